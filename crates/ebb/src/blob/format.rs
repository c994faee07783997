//! The fixed pieces of the blob file format: the header, the record header,
//! the footer, and the blob index an LSM entry of kind
//! [`crate::key::ValueKind::BlobIndex`] holds. Written up in docs/format.md,
//! "Blob files"; every constant here is on-disk format.
//!
//! Decoders never panic; they report what is wrong as a reason string that
//! the caller wraps into [`crate::Error::Corruption`] with the file and offset.

use crate::util::checksum::{crc32c, crc32c_extend, mask, unmask};
use crate::util::coding::{decode_fixed32, decode_fixed64, put_fixed32, put_fixed64, put_varint64, Decoder};
use crate::util::compression::CompressionType;

/// Magic number opening and closing every blob file: the bytes `EbbBlobF`
/// read as a little-endian fixed64. DO NOT CHANGE: on-disk format.
pub const BLOB_MAGIC: u64 = u64::from_le_bytes(*b"EbbBlobF");

/// The blob file format version this code writes and reads. DO NOT CHANGE
/// the meaning of an existing version: on-disk format.
pub const BLOB_FORMAT_VERSION: u32 = 1;

/// Header: magic (8), version (4), column family (4), compression (1),
/// masked CRC-32C of the 17 bytes before it (4). DO NOT CHANGE: on-disk format.
pub const HEADER_LEN: usize = 21;

/// Record header: masked CRC-32C (4), key length (4), value length (4),
/// compression type of the value (1). DO NOT CHANGE: on-disk format.
pub const RECORD_HEADER_LEN: usize = 13;

/// Footer: blob count (8), blob bytes (8), masked CRC-32C of those 16 bytes
/// (4), magic (8). DO NOT CHANGE: on-disk format.
pub const FOOTER_LEN: usize = 28;

/// The one kind of blob index Ebb writes: a blob in a blob file (RocksDB's
/// `BlobIndex::Type::kBlob`, the same number). DO NOT CHANGE: on-disk format.
pub const BLOB_INDEX_KIND: u8 = 1;

/// What a blob file's header records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobFileHeader {
    /// The column family the file was written for.
    pub column_family: u32,
    /// The compression configured when it was written (each record names
    /// its own, since a value that does not shrink is stored raw).
    pub compression: CompressionType,
}

impl BlobFileHeader {
    /// The [`HEADER_LEN`] bytes of this header.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(HEADER_LEN);
        put_fixed64(&mut v, BLOB_MAGIC);
        put_fixed32(&mut v, BLOB_FORMAT_VERSION);
        put_fixed32(&mut v, self.column_family);
        v.push(self.compression as u8);
        let crc = mask(crc32c(&v));
        put_fixed32(&mut v, crc);
        v
    }

    /// Decodes and checks a header: magic, checksum, version, compression.
    pub fn decode(src: &[u8]) -> Result<BlobFileHeader, String> {
        if src.len() != HEADER_LEN {
            return Err(format!("blob file header is {} bytes, expected {HEADER_LEN}", src.len()));
        }
        let magic = decode_fixed64(src).ok_or("short blob file header")?;
        if magic != BLOB_MAGIC {
            return Err(format!("bad magic number {magic:#018x}: not an Ebb blob file"));
        }
        let stored = decode_fixed32(&src[HEADER_LEN - 4..]).ok_or("short blob file header")?;
        let actual = crc32c(&src[..HEADER_LEN - 4]);
        if unmask(stored) != actual {
            return Err(format!(
                "blob file header checksum mismatch: stored {:#010x}, computed {actual:#010x}",
                unmask(stored)
            ));
        }
        let version = decode_fixed32(&src[8..]).ok_or("short blob file header")?;
        if version != BLOB_FORMAT_VERSION {
            return Err(format!("unsupported blob file format version {version}"));
        }
        let column_family = decode_fixed32(&src[12..]).ok_or("short blob file header")?;
        let compression = CompressionType::from_u8(src[16])
            .ok_or_else(|| format!("unknown compression type {} in blob file header", src[16]))?;
        Ok(BlobFileHeader { column_family, compression })
    }
}

/// What a blob file's footer records: what the MANIFEST's blob file
/// addition records too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlobFileFooter {
    /// Records in the file.
    pub blob_count: u64,
    /// Bytes of the records, their headers and keys included (RocksDB's
    /// `total_blob_bytes`): the file's size less its header and footer.
    pub blob_bytes: u64,
}

impl BlobFileFooter {
    /// The [`FOOTER_LEN`] bytes of this footer.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(FOOTER_LEN);
        put_fixed64(&mut v, self.blob_count);
        put_fixed64(&mut v, self.blob_bytes);
        let crc = mask(crc32c(&v));
        put_fixed32(&mut v, crc);
        put_fixed64(&mut v, BLOB_MAGIC);
        v
    }

    /// Decodes and checks a footer: magic, then checksum.
    pub fn decode(src: &[u8]) -> Result<BlobFileFooter, String> {
        if src.len() != FOOTER_LEN {
            return Err(format!("blob file footer is {} bytes, expected {FOOTER_LEN}", src.len()));
        }
        let magic = decode_fixed64(&src[FOOTER_LEN - 8..]).ok_or("short blob file footer")?;
        if magic != BLOB_MAGIC {
            return Err(format!("bad footer magic number {magic:#018x}: not a complete Ebb blob file"));
        }
        let stored = decode_fixed32(&src[16..]).ok_or("short blob file footer")?;
        let actual = crc32c(&src[..16]);
        if unmask(stored) != actual {
            return Err(format!(
                "blob file footer checksum mismatch: stored {:#010x}, computed {actual:#010x}",
                unmask(stored)
            ));
        }
        let blob_count = decode_fixed64(src).ok_or("short blob file footer")?;
        let blob_bytes = decode_fixed64(&src[8..]).ok_or("short blob file footer")?;
        Ok(BlobFileFooter { blob_count, blob_bytes })
    }
}

/// The bytes of one record: its header, then `key` and the stored `value`
/// (compressed with `compression`, or raw when that is `None`).
#[cfg(test)]
pub fn encode_record(key: &[u8], value: &[u8], compression: CompressionType) -> Vec<u8> {
    let mut v = encode_record_head(key, value, compression);
    v.extend_from_slice(value);
    v
}

/// The record of `value` for `key` up to the value: its header (whose
/// checksum covers `value` too) and `key`. A writer appends `value` after
/// it as it is, instead of copying it into one buffer with the head.
pub fn encode_record_head(key: &[u8], value: &[u8], compression: CompressionType) -> Vec<u8> {
    let mut v = Vec::with_capacity(RECORD_HEADER_LEN + key.len());
    put_fixed32(&mut v, 0);
    put_fixed32(&mut v, key.len() as u32);
    put_fixed32(&mut v, value.len() as u32);
    v.push(compression as u8);
    v.extend_from_slice(key);
    let crc = mask(crc32c_extend(crc32c(&v[4..]), value));
    v[..4].copy_from_slice(&crc.to_le_bytes());
    v
}

/// The bytes a record takes whose key is `key_len` bytes and whose stored
/// value is `value_len` bytes: what garbage collection counts per blob.
pub fn record_len(key_len: usize, value_len: u64) -> u64 {
    RECORD_HEADER_LEN as u64 + key_len as u64 + value_len
}

/// A record read back: the key and the stored value, and how that is compressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedRecord<'a> {
    /// The user key the blob was written for.
    pub key: &'a [u8],
    /// The stored value bytes.
    pub value: &'a [u8],
    /// The compression of `value`.
    pub compression: CompressionType,
}

/// Decodes a whole record (header, key and value, nothing more), checking
/// its checksum when `verify`.
#[cfg(test)]
pub fn decode_record(src: &[u8], verify: bool) -> Result<DecodedRecord<'_>, String> {
    if src.len() < RECORD_HEADER_LEN {
        return Err(format!("blob record of {} bytes is shorter than its header", src.len()));
    }
    let key_len = decode_fixed32(&src[4..]).ok_or("short blob record header")? as usize;
    let head_len = RECORD_HEADER_LEN.saturating_add(key_len).min(src.len());
    let (head, value) = src.split_at(head_len);
    decode_record_parts(head, value, verify)
}

/// Decodes a record read in two parts: `head`, its header and key, and
/// `value`, the stored value after them (a reader puts the value straight
/// into the buffer it returns). Checks as [`decode_record`] does.
pub fn decode_record_parts<'a>(head: &'a [u8], value: &'a [u8], verify: bool) -> Result<DecodedRecord<'a>, String> {
    let total = head.len() as u64 + value.len() as u64;
    if head.len() < RECORD_HEADER_LEN {
        return Err(format!("blob record of {total} bytes is shorter than its header"));
    }
    let key_len = decode_fixed32(&head[4..]).ok_or("short blob record header")? as usize;
    let value_len = decode_fixed32(&head[8..]).ok_or("short blob record header")? as usize;
    if RECORD_HEADER_LEN as u64 + key_len as u64 + value_len as u64 != total
        || head.len() != RECORD_HEADER_LEN + key_len
    {
        return Err(format!(
            "blob record header says {key_len} key and {value_len} value bytes, but the record is {total} bytes"
        ));
    }
    if verify {
        let stored = decode_fixed32(head).ok_or("short blob record header")?;
        let actual = crc32c_extend(crc32c(&head[4..]), value);
        if unmask(stored) != actual {
            return Err(format!(
                "blob record checksum mismatch: stored {:#010x}, computed {actual:#010x}",
                unmask(stored)
            ));
        }
    }
    let compression = CompressionType::from_u8(head[12])
        .ok_or_else(|| format!("unknown compression type {} in blob record", head[12]))?;
    Ok(DecodedRecord { key: &head[RECORD_HEADER_LEN..], value, compression })
}

/// Where one blob lives: the value of an LSM entry of kind `BlobIndex`
/// (RocksDB's `BlobIndex` of type `kBlob`, the same layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobIndex {
    /// The blob file's number (`NNNNNN.blob`).
    pub file_number: u64,
    /// Offset of the stored value within the file (its record starts
    /// [`RECORD_HEADER_LEN`] plus the key's length before it).
    pub offset: u64,
    /// Stored bytes of the value.
    pub size: u64,
    /// How the stored value is compressed.
    pub compression: CompressionType,
}

impl BlobIndex {
    /// `kind u8 = 1, varint64 file number, varint64 offset, varint64 size, u8 compression`.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(1 + 3 * 10 + 1);
        v.push(BLOB_INDEX_KIND);
        put_varint64(&mut v, self.file_number);
        put_varint64(&mut v, self.offset);
        put_varint64(&mut v, self.size);
        v.push(self.compression as u8);
        v
    }

    /// Decodes a blob index that fills `src` exactly.
    pub fn decode(src: &[u8]) -> Result<BlobIndex, String> {
        let mut d = Decoder::new(src);
        let kind = d.u8().ok_or("empty blob index")?;
        if kind != BLOB_INDEX_KIND {
            return Err(format!("unknown blob index kind {kind}"));
        }
        let file_number = d.varint64().ok_or("blob index file number truncated")?;
        let offset = d.varint64().ok_or("blob index offset truncated")?;
        let size = d.varint64().ok_or("blob index size truncated")?;
        let c = d.u8().ok_or("blob index compression truncated")?;
        let compression =
            CompressionType::from_u8(c).ok_or_else(|| format!("unknown compression type {c} in blob index"))?;
        if !d.is_empty() {
            return Err(format!("blob index followed by {} stray bytes", d.remaining().len()));
        }
        Ok(BlobIndex { file_number, offset, size, compression })
    }

    /// Bytes of the record this index points at, for a blob of `key`.
    pub fn record_len(&self, key: &[u8]) -> u64 {
        record_len(key.len(), self.size)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_round_trip_and_refuse_damage() {
        let h = BlobFileHeader { column_family: 3, compression: CompressionType::Lz4 };
        let bytes = h.encode();
        assert_eq!(bytes.len(), HEADER_LEN);
        assert_eq!(BlobFileHeader::decode(&bytes).unwrap(), h);
        let f = BlobFileFooter { blob_count: 7, blob_bytes: 12345 };
        let fb = f.encode();
        assert_eq!(fb.len(), FOOTER_LEN);
        assert_eq!(BlobFileFooter::decode(&fb).unwrap(), f);
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x04;
            assert!(BlobFileHeader::decode(&b).is_err(), "header byte {i}");
        }
        for i in 0..fb.len() {
            let mut b = fb.clone();
            b[i] ^= 0x04;
            assert!(BlobFileFooter::decode(&b).is_err(), "footer byte {i}");
        }
        let r = encode_record(b"key", b"value", CompressionType::None);
        assert_eq!(r.len() as u64, record_len(3, 5));
        let d = decode_record(&r, true).unwrap();
        assert_eq!((d.key, d.value, d.compression), (&b"key"[..], &b"value"[..], CompressionType::None));
        for i in 0..r.len() {
            let mut b = r.clone();
            b[i] ^= 0x04;
            assert!(decode_record(&b, true).is_err(), "record byte {i}");
        }
        let idx = BlobIndex { file_number: 300, offset: 70_000, size: 5, compression: CompressionType::Zstd };
        assert_eq!(BlobIndex::decode(&idx.encode()).unwrap(), idx);
        let enc = idx.encode();
        for cut in 0..enc.len() {
            assert!(BlobIndex::decode(&enc[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = enc.clone();
        longer.push(0);
        assert!(BlobIndex::decode(&longer).is_err());
        let mut other_kind = enc;
        other_kind[0] = 2;
        assert!(BlobIndex::decode(&other_kind).is_err());
    }
}
