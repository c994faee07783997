//! Table properties: counts, sizes, key range and settings of one table, kept
//! in the properties block (docs/format.md, "Properties block").
//!
//! The block is an ordinary block with bytewise-sorted names as keys. Numbers
//! are varint64 values; keys are stored as raw bytes. Readers skip names they
//! do not know, so later versions can add properties; a missing property reads
//! as its default.

use std::sync::Arc;

use super::block::{Block, BlockIterator, KeyOrder};
use super::block_builder::BlockBuilder;
use crate::util::checksum::ChecksumType;
use crate::util::coding::{decode_varint64, put_varint64};
use crate::util::compression::CompressionType;

/// Property names. DO NOT CHANGE: on-disk format.
mod names {
    pub const CHECKSUM: &str = "ebb.checksum";
    pub const COLUMN_FAMILY: &str = "ebb.column.family.id";
    pub const COLUMN_FAMILY_NAME: &str = "ebb.column.family.name";
    /// Written only when the comparator is not the bytewise one.
    pub const COMPARATOR: &str = "ebb.comparator";
    pub const COMPRESSION: &str = "ebb.compression";
    pub const CREATION_TIME: &str = "ebb.creation.time";
    pub const DATA_SIZE: &str = "ebb.data.size";
    pub const FILTER_SIZE: &str = "ebb.filter.size";
    pub const INDEX_PARTITIONS: &str = "ebb.index.partitions";
    pub const INDEX_SIZE: &str = "ebb.index.size";
    pub const LARGEST_KEY: &str = "ebb.largest.key";
    pub const LARGEST_SEQNO: &str = "ebb.largest.seqno";
    pub const NUM_DATA_BLOCKS: &str = "ebb.num.data.blocks";
    pub const NUM_DELETIONS: &str = "ebb.num.deletions";
    /// Written only when the table has range tombstones.
    pub const NUM_RANGE_DELETIONS: &str = "ebb.num.range-deletions";
    /// Written only when the filter holds prefixes.
    pub const PREFIX_EXTRACTOR_NAME: &str = "ebb.prefix.extractor.name";
    /// Written only when the filter lacks whole keys (value 0).
    pub const WHOLE_KEY_FILTERING: &str = "ebb.whole.key.filtering";
    pub const NUM_ENTRIES: &str = "ebb.num.entries";
    pub const RAW_KEY_SIZE: &str = "ebb.raw.key.size";
    pub const RAW_VALUE_SIZE: &str = "ebb.raw.value.size";
    pub const SMALLEST_KEY: &str = "ebb.smallest.key";
    pub const SMALLEST_SEQNO: &str = "ebb.smallest.seqno";
}

/// What a table holds and how it was written.
///
/// Sizes of blocks count their 5-byte trailers, so `data_size + filter_size +
/// index_size` plus the properties block, the metaindex block and the footer
/// add up to `file_size`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableProperties {
    /// Entries (values and tombstones).
    pub num_entries: u64,
    /// Tombstones among them.
    pub num_deletions: u64,
    /// Sum of the internal-key lengths added.
    pub raw_key_size: u64,
    /// Sum of the value lengths added.
    pub raw_value_size: u64,
    /// Bytes of data blocks, trailers included (the offset where they end).
    pub data_size: u64,
    /// Bytes of the index block, trailer included (with a partitioned
    /// index: the partitions and the top level).
    pub index_size: u64,
    /// Index partitions (RocksDB `rocksdb.index.partitions`); 0 for a table
    /// with one index block. Recorded only when non-zero.
    pub index_partitions: u64,
    /// Bytes of the filter block, trailer included; 0 without a filter.
    pub filter_size: u64,
    /// Data blocks.
    pub num_data_blocks: u64,
    /// The smallest internal key; empty for an empty table.
    pub smallest_key: Vec<u8>,
    /// The largest internal key; empty for an empty table.
    pub largest_key: Vec<u8>,
    /// The smallest sequence number; 0 for an empty table.
    pub smallest_seqno: u64,
    /// The largest sequence number; 0 for an empty table.
    pub largest_seqno: u64,
    /// The compression the table was written with (each block records what it
    /// actually used, which may be none).
    pub compression: CompressionType,
    /// The checksum of every block.
    pub checksum: ChecksumType,
    /// When the table was written, in seconds since the Unix epoch.
    pub creation_time: u64,
    /// The id of the column family the table was written for (RocksDB's
    /// `rocksdb.column.family.id`), so that repair can place it; `None` in
    /// tables written before the property existed.
    pub column_family: Option<u32>,
    /// That family's name (RocksDB's `rocksdb.column.family.name`); `None`
    /// where the property is absent.
    pub column_family_name: Option<String>,
    /// Size of the whole file. Not stored in the block: filled in by
    /// `TableBuilder::finish` and `Table::open`.
    pub file_size: u64,
    /// Range tombstones in the range-deletion block.
    pub num_range_deletions: u64,
    /// The prefix extractor whose prefixes the filter holds.
    pub prefix_extractor_name: Option<String>,
    /// The filter holds whole keys (true in tables written before the
    /// property existed).
    pub whole_key_filtering: bool,
    /// The name of the comparator the keys are ordered by (RocksDB's
    /// `rocksdb.comparator`); `None` is the bytewise one.
    pub comparator_name: Option<String>,
    /// What the family's table property collectors stored (RocksDB's
    /// `user_collected_properties`): every property whose name is not the
    /// engine's (`ebb.`, `rocksdb.`).
    pub user_collected_properties: std::collections::BTreeMap<String, Vec<u8>>,
}

impl Default for TableProperties {
    fn default() -> Self {
        TableProperties {
            num_entries: 0,
            num_deletions: 0,
            raw_key_size: 0,
            raw_value_size: 0,
            data_size: 0,
            index_size: 0,
            index_partitions: 0,
            filter_size: 0,
            num_data_blocks: 0,
            smallest_key: Vec::new(),
            largest_key: Vec::new(),
            smallest_seqno: 0,
            largest_seqno: 0,
            compression: CompressionType::None,
            checksum: ChecksumType::Crc32c,
            creation_time: 0,
            column_family: None,
            column_family_name: None,
            file_size: 0,
            num_range_deletions: 0,
            prefix_extractor_name: None,
            whole_key_filtering: true,
            comparator_name: None,
            user_collected_properties: std::collections::BTreeMap::new(),
        }
    }
}

impl TableProperties {
    /// The properties block contents.
    pub fn encode(&self) -> Vec<u8> {
        let number = |v: u64| {
            let mut b = Vec::with_capacity(10);
            put_varint64(&mut b, v);
            b
        };
        let mut entries: Vec<(&str, Vec<u8>)> = vec![
            (names::CHECKSUM, number(u64::from(self.checksum.as_u8()))),
            (names::COLUMN_FAMILY, self.column_family.map(|id| number(u64::from(id))).unwrap_or_default()),
            (names::COMPRESSION, number(self.compression as u64)),
            (names::CREATION_TIME, number(self.creation_time)),
            (names::DATA_SIZE, number(self.data_size)),
            (names::FILTER_SIZE, number(self.filter_size)),
            (names::INDEX_SIZE, number(self.index_size)),
            (names::LARGEST_KEY, self.largest_key.clone()),
            (names::LARGEST_SEQNO, number(self.largest_seqno)),
            (names::NUM_DATA_BLOCKS, number(self.num_data_blocks)),
            (names::NUM_DELETIONS, number(self.num_deletions)),
            (names::NUM_ENTRIES, number(self.num_entries)),
            (names::RAW_KEY_SIZE, number(self.raw_key_size)),
            (names::RAW_VALUE_SIZE, number(self.raw_value_size)),
            (names::SMALLEST_KEY, self.smallest_key.clone()),
            (names::SMALLEST_SEQNO, number(self.smallest_seqno)),
        ];
        if self.index_partitions > 0 {
            entries.push((names::INDEX_PARTITIONS, number(self.index_partitions)));
        }
        if self.num_range_deletions > 0 {
            entries.push((names::NUM_RANGE_DELETIONS, number(self.num_range_deletions)));
        }
        if let Some(name) = &self.prefix_extractor_name {
            entries.push((names::PREFIX_EXTRACTOR_NAME, name.as_bytes().to_vec()));
        }
        if !self.whole_key_filtering {
            entries.push((names::WHOLE_KEY_FILTERING, number(0)));
        }
        if let Some(name) = &self.column_family_name {
            entries.push((names::COLUMN_FAMILY_NAME, name.as_bytes().to_vec()));
        }
        if let Some(name) = &self.comparator_name {
            entries.push((names::COMPARATOR, name.as_bytes().to_vec()));
        }
        if self.column_family.is_none() {
            entries.retain(|(name, _)| *name != names::COLUMN_FAMILY);
        }
        for (name, value) in &self.user_collected_properties {
            if !crate::table_properties::is_reserved(name) {
                entries.push((name.as_str(), value.clone()));
            }
        }
        entries.sort_by(|a, b| a.0.cmp(b.0));
        let mut b = BlockBuilder::new(1);
        for (name, value) in &entries {
            b.add(name.as_bytes(), value);
        }
        b.finish()
    }

    /// Parses a properties block. `file_size` is left 0 for the caller.
    pub(crate) fn decode(block: Arc<Block>) -> Result<TableProperties, String> {
        let mut p = TableProperties::default();
        let mut it = BlockIterator::new(block, KeyOrder::Bytewise);
        it.seek_to_first();
        while it.valid() {
            let name = it.key();
            let value = it.value();
            let number = || match decode_varint64(value) {
                Some((v, n)) if n == value.len() => Ok(v),
                _ => Err(format!("property {} has a malformed number", String::from_utf8_lossy(name))),
            };
            match std::str::from_utf8(name).unwrap_or("") {
                names::CHECKSUM => {
                    let v = number()?;
                    p.checksum = u8::try_from(v)
                        .ok()
                        .and_then(ChecksumType::from_u8)
                        .ok_or_else(|| format!("unknown checksum type {v} in properties"))?;
                }
                names::COMPRESSION => {
                    let v = number()?;
                    p.compression = u8::try_from(v)
                        .ok()
                        .and_then(CompressionType::from_u8)
                        .ok_or_else(|| format!("unknown compression type {v} in properties"))?;
                }
                names::COLUMN_FAMILY => {
                    let v = number()?;
                    p.column_family =
                        Some(u32::try_from(v).map_err(|_| format!("column family id {v} in properties is too large"))?);
                }
                names::COLUMN_FAMILY_NAME => {
                    let name = std::str::from_utf8(value).map_err(|_| "column family name is not UTF-8".to_string())?;
                    p.column_family_name = Some(name.to_string());
                }
                names::COMPARATOR => p.comparator_name = Some(String::from_utf8_lossy(value).into_owned()),
                names::CREATION_TIME => p.creation_time = number()?,
                names::DATA_SIZE => p.data_size = number()?,
                names::FILTER_SIZE => p.filter_size = number()?,
                names::INDEX_SIZE => p.index_size = number()?,
                names::INDEX_PARTITIONS => p.index_partitions = number()?,
                names::LARGEST_KEY => p.largest_key = value.to_vec(),
                names::LARGEST_SEQNO => p.largest_seqno = number()?,
                names::NUM_DATA_BLOCKS => p.num_data_blocks = number()?,
                names::NUM_DELETIONS => p.num_deletions = number()?,
                names::NUM_RANGE_DELETIONS => p.num_range_deletions = number()?,
                names::PREFIX_EXTRACTOR_NAME => {
                    p.prefix_extractor_name = Some(String::from_utf8_lossy(value).into_owned())
                }
                names::WHOLE_KEY_FILTERING => p.whole_key_filtering = number()? != 0,
                names::NUM_ENTRIES => p.num_entries = number()?,
                names::RAW_KEY_SIZE => p.raw_key_size = number()?,
                names::RAW_VALUE_SIZE => p.raw_value_size = number()?,
                names::SMALLEST_KEY => p.smallest_key = value.to_vec(),
                names::SMALLEST_SEQNO => p.smallest_seqno = number()?,
                other if !other.is_empty() && !crate::table_properties::is_reserved(other) => {
                    p.user_collected_properties.insert(other.to_string(), value.to_vec());
                }
                _ => {}
            }
            it.next();
        }
        match it.corruption() {
            Some(reason) => Err(format!("properties block: {reason}")),
            None => Ok(p),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_round_trip_and_unknown_names_are_skipped() {
        let p = TableProperties {
            num_entries: 3,
            num_deletions: 1,
            raw_key_size: 30,
            raw_value_size: 300,
            data_size: 4096,
            index_size: 40,
            index_partitions: 3,
            filter_size: 75,
            num_data_blocks: 2,
            smallest_key: b"a\x01\x00\x00\x00\x00\x00\x00\x00".to_vec(),
            largest_key: b"z\x01\x05\x00\x00\x00\x00\x00\x00".to_vec(),
            smallest_seqno: 1,
            largest_seqno: u64::MAX >> 8,
            compression: CompressionType::Zstd,
            checksum: ChecksumType::Xxh3,
            creation_time: 1_700_000_000,
            column_family: Some(7),
            column_family_name: Some("users".into()),
            file_size: 0,
            num_range_deletions: 4,
            prefix_extractor_name: Some("rocksdb.FixedPrefix.8".into()),
            whole_key_filtering: false,
            comparator_name: Some("rocksdb.ReverseBytewiseComparator".into()),
            user_collected_properties: [("app.count".to_string(), b"12".to_vec()), ("zz".to_string(), Vec::new())]
                .into_iter()
                .collect(),
        };
        let decoded = TableProperties::decode(Arc::new(Block::new(p.encode()).unwrap())).unwrap();
        assert_eq!(decoded, p);

        // A later version's own property is skipped; any other name is a
        // user-collected property.
        let mut b = BlockBuilder::new(1);
        b.add(b"aaa.user.property", b"whatever");
        b.add(b"ebb.future.property", b"later");
        let mut n = Vec::new();
        put_varint64(&mut n, 9);
        b.add(names::NUM_ENTRIES.as_bytes(), &n);
        let decoded = TableProperties::decode(Arc::new(Block::new(b.finish()).unwrap())).unwrap();
        assert_eq!(decoded.num_entries, 9);
        assert_eq!(decoded.user_collected_properties.len(), 1);
        assert_eq!(decoded.user_collected_properties["aaa.user.property"], b"whatever");
    }

    #[test]
    fn malformed_values_are_refused() {
        for (name, value) in [
            (names::NUM_ENTRIES, &[0x80u8][..]),
            (names::NUM_ENTRIES, &[1, 2][..]),
            (names::COMPRESSION, &[3][..]),
            (names::CHECKSUM, &[2][..]),
        ] {
            let mut b = BlockBuilder::new(1);
            b.add(name.as_bytes(), value);
            assert!(TableProperties::decode(Arc::new(Block::new(b.finish()).unwrap())).is_err(), "{name} {value:?}");
        }
    }
}
