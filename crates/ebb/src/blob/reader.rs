//! [`BlobFileReader`]: reads the blob a [`BlobIndex`] points at, checking
//! everything it can, so that a damaged or misdirected index is a
//! corruption error naming the file and offset, never another value.

use std::sync::Arc;

use super::format::{
    decode_record_parts, BlobFileFooter, BlobFileHeader, BlobIndex, FOOTER_LEN, HEADER_LEN, RECORD_HEADER_LEN,
};
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::util::compression::CompressionType;

/// An open blob file, its header and footer checked. Immutable; shared
/// between threads through `Arc`.
pub struct BlobFileReader {
    file: Arc<dyn RandomAccessFile>,
    name: String,
    number: u64,
    file_size: u64,
    footer: BlobFileFooter,
}

impl std::fmt::Debug for BlobFileReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobFileReader").field("name", &self.name).field("file_size", &self.file_size).finish()
    }
}

impl BlobFileReader {
    /// Opens blob file `number`, `file_size` bytes, named `name` in errors:
    /// reads and checks its header and footer, and that the footer's byte
    /// count matches the file's size.
    pub fn open(file: Arc<dyn RandomAccessFile>, file_size: u64, name: String, number: u64) -> Result<Self> {
        let bad = |offset: u64, reason: String| Error::corruption(&name, offset, reason);
        if file_size < (HEADER_LEN + FOOTER_LEN) as u64 {
            return Err(bad(0, format!("blob file of {file_size} bytes is shorter than a header and a footer")));
        }
        let head = file.read_at(0, HEADER_LEN)?;
        // Checked, not kept: what the header records is not needed past here.
        BlobFileHeader::decode(&head).map_err(|r| bad(0, r))?;
        let footer_at = file_size - FOOTER_LEN as u64;
        let tail = file.read_at(footer_at, FOOTER_LEN)?;
        let footer = BlobFileFooter::decode(&tail).map_err(|r| bad(footer_at, r))?;
        let records = footer_at - HEADER_LEN as u64;
        if footer.blob_bytes != records {
            return Err(bad(
                footer_at,
                format!("the footer counts {} record bytes, the file holds {records}", footer.blob_bytes),
            ));
        }
        Ok(BlobFileReader { file, name, number, file_size, footer })
    }

    /// What the footer records.
    pub fn footer(&self) -> BlobFileFooter {
        self.footer
    }

    /// The value of the blob `index` points at, written for user key `key`.
    /// The record must lie within the file's records, carry `key`, the
    /// size and the compression `index` names, and (with `verify`) pass its
    /// checksum; anything else is a corruption error naming this file and
    /// the offset of the record (or of the index's target when it is out
    /// of range).
    pub fn get(&self, key: &[u8], index: &BlobIndex, verify: bool) -> Result<Vec<u8>> {
        let out_of_range = || {
            Error::corruption(
                &self.name,
                index.offset,
                format!(
                    "blob index (offset {}, {} bytes, key of {} bytes) points outside the file's records \
                     ({HEADER_LEN}..{})",
                    index.offset,
                    index.size,
                    key.len(),
                    self.file_size - FOOTER_LEN as u64
                ),
            )
        };
        if index.file_number != self.number {
            return Err(Error::corruption(
                &self.name,
                index.offset,
                format!("blob index names file {}, not this one", index.file_number),
            ));
        }
        let start = index.offset.checked_sub((RECORD_HEADER_LEN + key.len()) as u64).ok_or_else(out_of_range)?;
        let end = index.offset.checked_add(index.size).ok_or_else(out_of_range)?;
        if start < HEADER_LEN as u64 || end > self.file_size - FOOTER_LEN as u64 {
            return Err(out_of_range());
        }
        let len = usize::try_from(end - start).map_err(|_| out_of_range())?;
        let bad = |reason: String| Error::corruption(&self.name, start, reason);
        // The header and key into `head`, the value straight into the
        // buffer that becomes the result when it is stored uncompressed.
        let mut head = vec![0u8; RECORD_HEADER_LEN + key.len()];
        let tail_len = len - head.len();
        let (in_head, value) = self.file.read_split_at(start, &mut head, tail_len)?;
        if in_head + value.len() != len {
            return Err(bad(format!("blob record read came back with {} of {len} bytes", in_head + value.len())));
        }
        let record = decode_record_parts(&head, &value, verify).map_err(bad)?;
        if record.key != key {
            return Err(bad(format!(
                "blob record is for key {:?}, not {:?}",
                String::from_utf8_lossy(record.key),
                String::from_utf8_lossy(key)
            )));
        }
        if record.compression != index.compression {
            return Err(bad(format!(
                "blob record is stored as {:?}, its index says {:?}",
                record.compression, index.compression
            )));
        }
        if record.compression == CompressionType::None {
            return Ok(value);
        }
        record.compression.decompress(record.value).map_err(|e| bad(format!("cannot decompress blob: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::builder::BlobFileBuilder;
    use super::*;
    use crate::fs::{FileSystem, MemFs};
    use crate::util::compression::CompressionType;

    /// A blob file of `values` (keys `k0`, `k1`, ...) in `fs`; returns the
    /// indexes and the file's bytes.
    fn write(fs: &MemFs, compression: CompressionType, values: &[Vec<u8>]) -> (Vec<BlobIndex>, Vec<u8>) {
        let path = Path::new("/000009.blob");
        let mut b =
            BlobFileBuilder::new(fs.new_writable(path).unwrap(), 9, "000009.blob".into(), 0, compression).unwrap();
        let indexes = values.iter().enumerate().map(|(i, v)| b.add(format!("k{i}").as_bytes(), v).unwrap()).collect();
        let done = b.finish().unwrap();
        let bytes = fs.file_bytes(path).unwrap();
        assert_eq!(done.file_size, bytes.len() as u64);
        assert_eq!(done.blob_count, values.len() as u64);
        (indexes, bytes)
    }

    fn open(bytes: &[u8]) -> Result<BlobFileReader> {
        let fs = MemFs::new();
        let path = Path::new("/000009.blob");
        fs.set_file_bytes(path, bytes).unwrap();
        BlobFileReader::open(fs.open_random(path).unwrap(), bytes.len() as u64, "000009.blob".into(), 9)
    }

    fn values() -> Vec<Vec<u8>> {
        vec![
            b"short".to_vec(),
            b"compressible ".repeat(40),
            // Incompressible: a xorshift sequence.
            (0..300)
                .scan(0x9e37_79b9_7f4a_7c15u64, |x, _| {
                    *x ^= *x << 13;
                    *x ^= *x >> 7;
                    *x ^= *x << 17;
                    Some((*x >> 32) as u8)
                })
                .collect(),
            Vec::new(),
        ]
    }

    #[test]
    fn every_value_reads_back_with_every_compression() {
        for compression in [CompressionType::None, CompressionType::Snappy, CompressionType::Lz4, CompressionType::Zstd]
        {
            let fs = MemFs::new();
            let values = values();
            let (indexes, bytes) = write(&fs, compression, &values);
            let r = open(&bytes).unwrap();
            assert_eq!(BlobFileHeader::decode(&bytes[..HEADER_LEN]).unwrap().compression, compression);
            assert_eq!(r.footer().blob_count, values.len() as u64);
            for (i, (index, value)) in indexes.iter().zip(&values).enumerate() {
                assert_eq!(&r.get(format!("k{i}").as_bytes(), index, true).unwrap(), value, "{compression:?} k{i}");
            }
            if compression != CompressionType::None {
                assert_eq!(indexes[1].compression, compression, "a compressible value is stored compressed");
                assert!(indexes[1].size < values[1].len() as u64);
            }
            assert_eq!(indexes[2].compression, CompressionType::None, "an incompressible value is stored raw");
        }
    }

    /// Every byte of the file damaged in turn: each read returns the right
    /// value or a corruption error naming the file, never another value.
    #[test]
    fn damage_to_any_byte_is_an_error_or_harmless_never_a_wrong_value() {
        for compression in [CompressionType::None, CompressionType::Snappy] {
            let fs = MemFs::new();
            let values = values();
            let (indexes, clean) = write(&fs, compression, &values);
            let (mut errors, mut intact) = (0, 0);
            for at in 0..clean.len() {
                let mut bytes = clean.clone();
                bytes[at] ^= 0x20;
                let r = match open(&bytes) {
                    Ok(r) => r,
                    Err(e) => {
                        assert!(e.is_corruption() && e.to_string().contains("000009.blob"), "byte {at}: {e}");
                        errors += 1;
                        continue;
                    }
                };
                for (i, (index, value)) in indexes.iter().zip(&values).enumerate() {
                    match r.get(format!("k{i}").as_bytes(), index, true) {
                        Ok(v) => {
                            assert_eq!(&v, value, "byte {at} flipped: k{i} read a wrong value");
                            intact += 1;
                        }
                        Err(e) => {
                            assert!(e.is_corruption() && e.to_string().contains("000009.blob"), "byte {at}: {e}");
                            errors += 1;
                        }
                    }
                }
            }
            // Every byte belongs to the header, a record or the footer, each
            // checksummed: each flip must be noticed by the open or by the
            // read of the record it hit.
            assert!(errors >= clean.len(), "{compression:?}: {errors} errors for {} flipped bytes", clean.len());
            assert!(intact > 0);
        }
    }

    #[test]
    fn a_misdirected_index_is_corruption_not_another_value() {
        let fs = MemFs::new();
        let values = values();
        let (indexes, bytes) = write(&fs, CompressionType::None, &values);
        let r = open(&bytes).unwrap();
        // Another key's index: the record's key does not match.
        let e = r.get(b"k0", &indexes[1], true).unwrap_err();
        assert!(e.is_corruption() && e.to_string().contains("not"), "{e}");
        // The right key with its neighbour's index (same key length).
        let e = r.get(b"k1", &indexes[0], true).unwrap_err();
        assert!(e.is_corruption(), "{e}");
        for bad in [
            BlobIndex { offset: 0, ..indexes[0] },
            BlobIndex { offset: u64::MAX, ..indexes[0] },
            BlobIndex { size: u64::MAX, ..indexes[0] },
            BlobIndex { size: bytes.len() as u64, ..indexes[0] },
            BlobIndex { size: indexes[0].size + 1, ..indexes[0] },
            BlobIndex { compression: CompressionType::Zstd, ..indexes[0] },
            BlobIndex { file_number: 10, ..indexes[0] },
        ] {
            let e = r.get(b"k0", &bad, true).unwrap_err();
            assert!(e.is_corruption() && e.to_string().contains("000009.blob"), "{bad:?}: {e}");
        }
        // A file cut short (a crash before the footer) does not open.
        for cut in [0, HEADER_LEN, bytes.len() - 1, bytes.len() - FOOTER_LEN] {
            assert!(open(&bytes[..cut]).unwrap_err().is_corruption(), "cut at {cut}");
        }
    }

    /// docs/format.md, "Blob files", the worked example, byte for byte.
    #[test]
    fn the_worked_example_in_the_format_doc_holds() {
        let fs = MemFs::new();
        let path = Path::new("/000012.blob");
        let mut b =
            BlobFileBuilder::new(fs.new_writable(path).unwrap(), 12, "000012.blob".into(), 0, CompressionType::None)
                .unwrap();
        let index = b.add(b"key", b"value").unwrap();
        b.finish().unwrap();
        let hex = |v: &[u8]| v.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ");
        assert_eq!(
            hex(&fs.file_bytes(path).unwrap()),
            "45 62 62 42 6c 6f 62 46 01 00 00 00 00 00 00 00 00 13 68 89 93 \
             bc 45 f2 ec 03 00 00 00 05 00 00 00 00 6b 65 79 76 61 6c 75 65 \
             01 00 00 00 00 00 00 00 15 00 00 00 00 00 00 00 2e a3 57 66 45 62 62 42 6c 6f 62 46"
        );
        assert_eq!(hex(&index.encode()), "01 0c 25 05 00");
    }
}
