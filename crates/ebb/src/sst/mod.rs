//! Sorted string tables: immutable files of sorted internal keys and values,
//! in a block-based format like LevelDB's and RocksDB's. The format is written
//! up in docs/format.md.
//!
//! What this module owns:
//! - [`TableBuilder`] writes a table from keys added in increasing
//!   internal-key order; [`Table`] reads one and answers point lookups
//!   ([`Table::lookup`], [`Table::multi_get`]), and [`TableIterator`] walks it
//!   in both directions.
//! - The pieces: [`format`] (block handles, block trailer, footer),
//!   [`block_builder`] and [`block`] (prefix-compressed blocks with restart
//!   points), [`filter`] (the per-table bloom filter over user keys),
//!   [`properties`] (the properties block), [`prefetch`] (the readahead
//!   buffer of table iterators: compaction and long scans).
//! - The reader's parts (docs/architecture.md, "The table reader's files"):
//!   `block_reader` (blocks from the file and the block cache),
//!   `table_filter` (whole-key and prefix filters), `two_level` (index
//!   cursors and the two-level walk), `table_iterator`, `prefix_seek`
//!   (bounded prefix seeks).
//!
//! Invariants:
//! 1. Every block is followed by a 5-byte trailer: compression type and a
//!    masked checksum over the stored bytes and the type byte. Every byte of
//!    a table belongs to a checksummed block or to the checksummed footer.
//! 2. Data and index blocks hold internal keys in internal-key order; the
//!    index key of a data block is `>=` its last key and `<` the next block's
//!    first key.
//! 3. Decoders trust nothing: damage is reported as
//!    [`crate::Error::Corruption`] with the file name and offset, never a
//!    panic, and never a wrong entry once a checksum is verified.
//!
//! Thread-safety: a [`TableBuilder`] is used by one thread; a [`Table`] is
//! immutable and shared through `Arc`; iterators are used by one thread each.

pub mod block;
pub mod block_builder;
mod block_reader;
pub mod filter;
pub mod format;
pub mod pinned;
pub mod prefetch;
mod prefix_seek;
pub mod properties;
pub mod table_builder;
mod table_filter;
mod table_iterator;
pub mod table_reader;
#[cfg(test)]
mod test_tables;
mod two_level;

pub use block::Block;
pub use pinned::PinnableSlice;
pub use prefix_seek::{PrefixCheckedIterator, SeekPrefix};
pub use properties::TableProperties;
pub use table_builder::{TableBuilder, TableBuilderOptions};
pub use table_reader::{
    copied_entry, BatchEntry, FilterProbe, PointLookup, ReadSettings, ReadValue, Readahead, Table, TableCachePolicy,
    TableEntry,
};

/// The layout of a table's index (RocksDB `BlockBasedTableOptions::IndexType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IndexType {
    /// One index block (`kBinarySearch`).
    #[default]
    BinarySearch,
    /// Index partitions under a top-level index (`kTwoLevelIndexSearch`).
    TwoLevelIndexSearch,
}

/// Metaindex name of the filter block. DO NOT CHANGE: on-disk format.
pub const FILTER_BLOCK_NAME: &str = "ebb.filter";
/// Metaindex name of the top-level filter index of a table with partitioned
/// filters (format version 2 only). DO NOT CHANGE: on-disk format.
pub const PARTITIONED_FILTER_BLOCK_NAME: &str = "ebb.filter.partitioned";
/// Metaindex name of the properties block. DO NOT CHANGE: on-disk format.
pub const PROPERTIES_BLOCK_NAME: &str = "ebb.properties";
/// Metaindex name of the range-deletion block (RocksDB's
/// `rocksdb.range_del`). DO NOT CHANGE: on-disk format.
pub const RANGE_DEL_BLOCK_NAME: &str = "ebb.range_del";

#[cfg(test)]
mod tests {
    //! The worked example of docs/format.md, byte for byte: if this test
    //! fails, the document (or the format) changed.

    use super::block_builder::BlockBuilder;
    use super::filter::BloomFilterBuilder;
    use super::format::{block_trailer, BlockHandle, Footer};
    use crate::key::{make_internal_key, ValueKind};
    use crate::util::checksum::ChecksumType;
    use crate::util::compression::CompressionType;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(" ")
    }

    fn with_trailer(contents: Vec<u8>) -> String {
        let mut v = contents;
        let t = block_trailer(ChecksumType::Crc32c, &v, CompressionType::None);
        v.extend_from_slice(&t);
        hex(&v)
    }

    #[test]
    fn documented_example_bytes() {
        let keys = [
            make_internal_key(b"ab", 5, ValueKind::Value),
            make_internal_key(b"ac", 4, ValueKind::Value),
            make_internal_key(b"b", 3, ValueKind::Deletion),
        ];
        let mut data = BlockBuilder::new(2);
        for (k, v) in keys.iter().zip([&b"x"[..], b"yz", b""]) {
            data.add(k, v);
        }
        assert_eq!(
            with_trailer(data.finish()),
            "00 0a 01 61 62 01 05 00 00 00 00 00 00 78 \
             01 09 02 63 01 04 00 00 00 00 00 00 79 7a \
             00 09 00 62 00 03 00 00 00 00 00 00 \
             00 00 00 00 1c 00 00 00 02 00 00 00 \
             00 da 81 db 45"
        );

        let mut filter = BloomFilterBuilder::new(10);
        for user_key in [&b"ab"[..], b"ac", b"b"] {
            filter.add_key(user_key);
        }
        assert_eq!(
            with_trailer(filter.finish().unwrap()),
            "20 00 00 00 20 00 04 00 40 22 00 00 24 00 00 00 10 02 02 00 00 00 00 02 20 00 00 00 00 00 00 40 \
             00 00 00 02 00 00 00 00 00 00 00 00 00 00 00 00 00 01 00 00 00 00 00 00 80 00 00 00 00 00 00 00 \
             06 01 01 00 00 00 00 71 a1 1f 31"
        );

        let mut index = BlockBuilder::new(1);
        index.add(&keys[2], &BlockHandle::new(0, 52).encode());
        assert_eq!(
            with_trailer(index.finish()),
            "00 09 02 62 00 03 00 00 00 00 00 00 00 34 00 00 00 00 01 00 00 00 00 7f f4 18 a1"
        );
        // The same index with user keys (format version 3).
        let mut user_index = BlockBuilder::new(1);
        user_index.add(crate::key::user_key(&keys[2]), &BlockHandle::new(0, 52).encode());
        assert_eq!(with_trailer(user_index.finish()), "00 01 02 62 00 34 00 00 00 00 01 00 00 00 00 c1 a0 54 e1");

        let mut metaindex = BlockBuilder::new(1);
        metaindex.add(b"ebb.filter", &BlockHandle::new(57, 70).encode());
        metaindex.add(b"ebb.properties", &BlockHandle::new(159, 382).encode());
        assert_eq!(
            with_trailer(metaindex.finish()),
            "00 0a 02 65 62 62 2e 66 69 6c 74 65 72 39 46 \
             00 0e 04 65 62 62 2e 70 72 6f 70 65 72 74 69 65 73 9f 01 fe 02 \
             00 00 00 00 0f 00 00 00 02 00 00 00 00 6c d3 70 6f"
        );

        let footer = Footer::new(ChecksumType::Crc32c, BlockHandle::new(546, 48), BlockHandle::new(132, 22));
        assert_eq!(
            hex(&footer.encode()),
            "01 a2 04 30 84 01 16 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 00 \
             00 00 00 00 00 00 00 00 00 01 00 00 00 2f ee c5 fb 45 62 62 54 61 62 6c 65"
        );
    }
}
