//! The fixed pieces of the table format: block handles, the block trailer and
//! the footer. The layout is written up in docs/format.md.
//!
//! Everything here is a pure function of bytes; decoders never panic and report
//! what is wrong as a reason string that the caller wraps into
//! [`crate::Error::Corruption`] with the file name and offset.

use bytes::Bytes;

use super::block::BlockContents;

use crate::util::checksum::{mask, unmask, ChecksumType};
use crate::util::coding::{decode_fixed32, decode_fixed64, put_fixed32, put_fixed64, put_varint64, Decoder};
use crate::util::compression::{CompressionType, MAX_DECOMPRESSED};

/// Magic number closing every Ebb table: the bytes `EbbTable` read as a
/// little-endian fixed64. DO NOT CHANGE: on-disk format.
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"EbbTable");

/// The table format version this code writes and reads. DO NOT CHANGE the
/// meaning of an existing version: on-disk format.
pub const FORMAT_VERSION: u32 = 1;

/// The format version of a table whose footer's index handle names a
/// top-level index of index partitions (`IndexType::TwoLevelIndexSearch`);
/// everything else is as in [`FORMAT_VERSION`]. A reader that knows only
/// version 1 refuses such a table instead of reading partitions as data
/// blocks. DO NOT CHANGE: on-disk format.
pub const FORMAT_VERSION_PARTITIONED_INDEX: u32 = 2;

/// The format version of a table whose index block holds user keys rather
/// than internal keys (RocksDB's `index_key_is_user_key`, format_version 3):
/// written when no two adjacent data blocks share a user key, so a
/// separator needs no sequence number. Index entries are then compared with
/// a lookup's user key. A reader that knows only versions 1 and 2 refuses
/// such a table instead of reading user keys as internal keys. DO NOT
/// CHANGE: on-disk format.
pub const FORMAT_VERSION_USER_KEY_INDEX: u32 = 3;

/// Versions 2 and 3 together: a partitioned index whose partitions and top
/// level hold user keys (as does the top level of partitioned filters).
/// DO NOT CHANGE: on-disk format.
pub const FORMAT_VERSION_PARTITIONED_USER_KEY_INDEX: u32 = 4;

/// Added to the format version (1 to 4) of a table that has a
/// range-deletion block (`rocksdb.range_del` in the metaindex): versions 5
/// to 8. A reader that knows only versions 1 to 4 refuses such a table
/// instead of reading it without its range tombstones, which would bring
/// deleted keys back. DO NOT CHANGE: on-disk format.
pub const FORMAT_VERSION_RANGE_DELETIONS: u32 = 4;

/// Bytes after every block: compression type (1) + masked checksum (4).
/// DO NOT CHANGE: on-disk format.
pub const BLOCK_TRAILER_LEN: usize = 5;

/// The most bytes a [`BlockHandle`] takes: two varint64s.
pub const MAX_HANDLE_LEN: usize = 20;

/// Footer size: checksum type (1) + two handles padded to 40 + format version
/// (4) + footer checksum (4) + magic (8). DO NOT CHANGE: on-disk format.
pub const FOOTER_LEN: usize = 1 + 2 * MAX_HANDLE_LEN + 4 + 4 + 8;

/// Offset inside the footer where the footer checksum is stored; the checksum
/// covers every footer byte before it.
const FOOTER_CHECKSUM_AT: usize = 1 + 2 * MAX_HANDLE_LEN + 4;

/// Where a block lives in the file: its offset and its stored size, not
/// counting the 5-byte trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    /// Offset of the block's first byte.
    pub offset: u64,
    /// Stored (possibly compressed) size of the block, trailer excluded.
    pub size: u64,
}

impl BlockHandle {
    /// A handle for `size` bytes at `offset`.
    pub fn new(offset: u64, size: u64) -> Self {
        BlockHandle { offset, size }
    }

    /// Appends the handle as varint64 offset, varint64 size.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// The encoded handle.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(MAX_HANDLE_LEN);
        self.encode_to(&mut v);
        v
    }

    /// Decodes a handle from the start of `src`: `(handle, bytes consumed)`.
    pub fn decode(src: &[u8]) -> Result<(BlockHandle, usize), String> {
        let mut d = Decoder::new(src);
        let offset = d.varint64().ok_or("bad block handle offset varint")?;
        let size = d.varint64().ok_or("bad block handle size varint")?;
        Ok((BlockHandle { offset, size }, d.position()))
    }

    /// Decodes a handle that must fill `src` exactly (an index or metaindex value).
    pub fn decode_exact(src: &[u8]) -> Result<BlockHandle, String> {
        let (h, n) = BlockHandle::decode(src)?;
        if n != src.len() {
            return Err(format!("block handle followed by {} stray bytes", src.len() - n));
        }
        Ok(h)
    }

    /// Offset just past the block's trailer, `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset.checked_add(self.size)?.checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// Chooses how a block is stored: compressed with `compression` when that
/// saves at least 1/8 of its size (RocksDB `GoodCompressionRatio`), else raw.
/// Blocks larger than [`MAX_DECOMPRESSED`] are stored raw, since a reader
/// refuses to decompress beyond that.
pub fn maybe_compress(raw: &[u8], compression: CompressionType) -> Option<(Vec<u8>, CompressionType)> {
    if compression == CompressionType::None || raw.len() > MAX_DECOMPRESSED {
        return None;
    }
    let compressed = compression.compress(raw)?;
    compression_pays(raw.len(), compressed.len()).then_some((compressed, compression))
}

/// True when `compressed` bytes save at least 1/8 of `raw` bytes.
fn compression_pays(raw: usize, compressed: usize) -> bool {
    compressed < raw - raw / 8
}

/// The trailer written after `contents` (the stored bytes) of the given type:
/// the type byte, then the masked checksum of `contents ++ type`.
pub fn block_trailer(checksum: ChecksumType, contents: &[u8], ctype: CompressionType) -> [u8; BLOCK_TRAILER_LEN] {
    let type_byte = ctype as u8;
    let crc = mask(checksum.compute(&[contents, &[type_byte]]));
    let mut t = [0u8; BLOCK_TRAILER_LEN];
    t[0] = type_byte;
    t[1..].copy_from_slice(&crc.to_le_bytes());
    t
}

/// Turns the bytes read for a block (stored contents followed by the trailer)
/// into the uncompressed block contents, checking the checksum when `verify`.
pub fn unwrap_block(mut raw: Vec<u8>, checksum: ChecksumType, verify: bool) -> Result<Vec<u8>, String> {
    let (size, ctype) = check_block(&raw, checksum, verify)?;
    match ctype {
        CompressionType::None => {
            raw.truncate(size);
            Ok(raw)
        }
        c => decompress(c, &raw[..size]),
    }
}

/// The contents of a compressed block, timed for the calling thread's
/// `PerfContext` (`block_decompress_time`).
fn decompress(c: CompressionType, stored: &[u8]) -> Result<Vec<u8>, String> {
    let timer = crate::perf::PerfTimer::start();
    let out = c.decompress(stored).map_err(|e| format!("cannot decompress block: {e}"));
    timer.stop(|c| &mut c.block_decompress_time);
    out
}

/// [`unwrap_block`] for a view of a memory-mapped file: an uncompressed
/// block is a view of `raw` (no copy), a compressed one is decompressed into
/// a buffer.
pub fn unwrap_mapped_block(raw: Bytes, checksum: ChecksumType, verify: bool) -> Result<BlockContents, String> {
    let (size, ctype) = check_block(&raw, checksum, verify)?;
    match ctype {
        CompressionType::None => Ok(BlockContents::Mapped(raw.slice(..size))),
        c => decompress(c, &raw[..size]).map(BlockContents::Owned),
    }
}

/// Checks a block's trailer (and, when `verify`, its checksum): the size of
/// its stored contents and their compression.
fn check_block(raw: &[u8], checksum: ChecksumType, verify: bool) -> Result<(usize, CompressionType), String> {
    let Some(size) = raw.len().checked_sub(BLOCK_TRAILER_LEN) else {
        return Err(format!("block of {} bytes is shorter than its trailer", raw.len()));
    };
    let type_byte = raw[size];
    if verify {
        let stored = decode_fixed32(&raw[size + 1..]).ok_or("short block trailer")?;
        let timer = crate::perf::PerfTimer::start();
        let actual = checksum.compute(&[&raw[..size + 1]]);
        timer.stop(|c| &mut c.block_checksum_time);
        if unmask(stored) != actual {
            return Err(format!(
                "block checksum mismatch: stored {:#010x}, computed {:#010x} ({})",
                unmask(stored),
                actual,
                checksum.name()
            ));
        }
    }
    CompressionType::from_u8(type_byte)
        .map(|c| (size, c))
        .ok_or_else(|| format!("unknown block compression type {type_byte}"))
}

/// The fixed-size record closing every table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The checksum function of every block in the file.
    pub checksum: ChecksumType,
    /// Handle of the metaindex block.
    pub metaindex: BlockHandle,
    /// Handle of the index block.
    pub index: BlockHandle,
    /// Format version ([`FORMAT_VERSION`]).
    pub format_version: u32,
}

impl Footer {
    /// A footer for the current format version.
    pub fn new(checksum: ChecksumType, metaindex: BlockHandle, index: BlockHandle) -> Self {
        Footer { checksum, metaindex, index, format_version: FORMAT_VERSION }
    }

    /// The version without [`FORMAT_VERSION_RANGE_DELETIONS`]: 1 to 4.
    fn index_version(&self) -> u32 {
        if self.has_range_deletions() {
            self.format_version - FORMAT_VERSION_RANGE_DELETIONS
        } else {
            self.format_version
        }
    }

    /// True when the table has a range-deletion block (versions 5 to 8).
    pub fn has_range_deletions(&self) -> bool {
        self.format_version > FORMAT_VERSION_PARTITIONED_USER_KEY_INDEX
    }

    /// True when the index handle names a top-level index of partitions.
    pub fn partitioned_index(&self) -> bool {
        matches!(self.index_version(), FORMAT_VERSION_PARTITIONED_INDEX | FORMAT_VERSION_PARTITIONED_USER_KEY_INDEX)
    }

    /// True when the index keys are user keys (versions 3 and 4).
    pub fn index_key_is_user_key(&self) -> bool {
        matches!(self.index_version(), FORMAT_VERSION_USER_KEY_INDEX | FORMAT_VERSION_PARTITIONED_USER_KEY_INDEX)
    }

    /// The [`FOOTER_LEN`] bytes of this footer.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(FOOTER_LEN);
        v.push(self.checksum.as_u8());
        self.metaindex.encode_to(&mut v);
        self.index.encode_to(&mut v);
        v.resize(1 + 2 * MAX_HANDLE_LEN, 0);
        put_fixed32(&mut v, self.format_version);
        let crc = mask(self.checksum.compute(&[&v]));
        put_fixed32(&mut v, crc);
        put_fixed64(&mut v, TABLE_MAGIC);
        v
    }

    /// Decodes and checks a footer: magic, checksum type, footer checksum,
    /// format version, in that order.
    pub fn decode(src: &[u8]) -> Result<Footer, String> {
        if src.len() != FOOTER_LEN {
            return Err(format!("footer is {} bytes, expected {FOOTER_LEN}", src.len()));
        }
        let magic = decode_fixed64(&src[FOOTER_LEN - 8..]).ok_or("short footer")?;
        if magic != TABLE_MAGIC {
            return Err(format!("bad magic number {magic:#018x}: not an Ebb table"));
        }
        let checksum =
            ChecksumType::from_u8(src[0]).ok_or_else(|| format!("unknown checksum type {} in footer", src[0]))?;
        let stored = decode_fixed32(&src[FOOTER_CHECKSUM_AT..]).ok_or("short footer")?;
        let actual = checksum.compute(&[&src[..FOOTER_CHECKSUM_AT]]);
        if unmask(stored) != actual {
            return Err(format!("footer checksum mismatch: stored {:#010x}, computed {actual:#010x}", unmask(stored)));
        }
        let format_version = decode_fixed32(&src[1 + 2 * MAX_HANDLE_LEN..]).ok_or("short footer")?;
        if !(FORMAT_VERSION..=FORMAT_VERSION_PARTITIONED_USER_KEY_INDEX + FORMAT_VERSION_RANGE_DELETIONS)
            .contains(&format_version)
        {
            return Err(format!("unsupported table format version {format_version}"));
        }
        let handles = &src[1..1 + 2 * MAX_HANDLE_LEN];
        let (metaindex, n) = BlockHandle::decode(handles)?;
        let (index, _) = BlockHandle::decode(&handles[n..])?;
        Ok(Footer { checksum, metaindex, index, format_version })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_round_trips_and_refuses_bad_varints() {
        for h in [BlockHandle::new(0, 0), BlockHandle::new(1 << 40, 4096), BlockHandle::new(u64::MAX, u64::MAX)] {
            let enc = h.encode();
            assert!(enc.len() <= MAX_HANDLE_LEN);
            assert_eq!(BlockHandle::decode_exact(&enc), Ok(h));
            for cut in 0..enc.len() {
                assert!(BlockHandle::decode_exact(&enc[..cut]).is_err());
            }
        }
        let mut extra = BlockHandle::new(5, 6).encode();
        extra.push(0);
        assert!(BlockHandle::decode_exact(&extra).is_err());
        assert_eq!(BlockHandle::new(u64::MAX, 1).end_with_trailer(), None);
    }

    #[test]
    fn range_deletion_versions_keep_their_index_meaning() {
        let mut f = Footer::new(ChecksumType::Crc32c, BlockHandle::new(1, 2), BlockHandle::new(3, 4));
        for base in FORMAT_VERSION..=FORMAT_VERSION_PARTITIONED_USER_KEY_INDEX {
            f.format_version = base;
            let (partitioned, user_keys) = (f.partitioned_index(), f.index_key_is_user_key());
            assert!(!f.has_range_deletions());
            f.format_version = base + FORMAT_VERSION_RANGE_DELETIONS;
            assert!(f.has_range_deletions());
            assert_eq!((f.partitioned_index(), f.index_key_is_user_key()), (partitioned, user_keys));
            assert_eq!(Footer::decode(&f.encode()), Ok(f));
        }
        f.format_version = FORMAT_VERSION_PARTITIONED_USER_KEY_INDEX + FORMAT_VERSION_RANGE_DELETIONS + 1;
        assert!(Footer::decode(&f.encode()).unwrap_err().contains("unsupported table format version"));
    }

    #[test]
    fn footer_round_trips_and_every_flip_is_refused() {
        for ct in [ChecksumType::Crc32c, ChecksumType::Xxh3] {
            let f = Footer::new(ct, BlockHandle::new(1000, 77), BlockHandle::new(1082, u64::MAX));
            let enc = f.encode();
            assert_eq!(enc.len(), FOOTER_LEN);
            assert_eq!(Footer::decode(&enc), Ok(f));
            for i in 0..enc.len() {
                for bit in 0..8 {
                    let mut bad = enc.clone();
                    bad[i] ^= 1 << bit;
                    assert!(Footer::decode(&bad).is_err(), "flip at byte {i} bit {bit} accepted");
                }
            }
            assert!(Footer::decode(&enc[1..]).is_err());
        }
    }

    #[test]
    fn trailer_checksum_covers_contents_and_type() {
        let contents = b"some block bytes".to_vec();
        let trailer = block_trailer(ChecksumType::Crc32c, &contents, CompressionType::None);
        let mut raw = contents.clone();
        raw.extend_from_slice(&trailer);
        assert_eq!(unwrap_block(raw.clone(), ChecksumType::Crc32c, true), Ok(contents.clone()));
        for i in 0..raw.len() {
            let mut bad = raw.clone();
            bad[i] ^= 0x10;
            assert!(unwrap_block(bad, ChecksumType::Crc32c, true).is_err(), "flip at {i}");
        }
        // Unverified, a bad type byte is still refused rather than misread.
        let mut bad_type = raw.clone();
        bad_type[contents.len()] = 9;
        assert!(unwrap_block(bad_type, ChecksumType::Crc32c, false).unwrap_err().contains("compression type"));
        assert!(unwrap_block(vec![0; 4], ChecksumType::Crc32c, false).is_err());
    }

    #[test]
    fn compression_is_kept_only_when_it_saves_an_eighth() {
        let compressible = vec![b'a'; 4096];
        let (c, t) = maybe_compress(&compressible, CompressionType::Snappy).unwrap();
        assert_eq!(t, CompressionType::Snappy);
        assert!(c.len() < 4096 - 512);
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let incompressible: Vec<u8> = (0..4096).map(|_| rng.gen()).collect();
        for t in [CompressionType::Snappy, CompressionType::Lz4, CompressionType::Zstd] {
            assert!(maybe_compress(&incompressible, t).is_none(), "{t:?}");
        }
        assert!(maybe_compress(&compressible, CompressionType::None).is_none());
        assert!(compression_pays(800, 699));
        assert!(!compression_pays(800, 700));
        assert!(!compression_pays(0, 0));
    }
}
