//! Tables for the unit tests of the table reader's files: in-memory files
//! (one that counts its reads), builder options, sample entries, and
//! helpers that build, open and scan tables.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::block::Block;
use super::block_builder::BlockBuilder;
use super::block_reader::{ReadSettings, TableCachePolicy};
use super::properties::TableProperties;
use super::table_builder::{TableBuilder, TableBuilderOptions};
use super::table_reader::Table;
use crate::cache::{new_cache, BlockCache, CacheKey, CacheOptions, CacheType, CacheValue, Priority};
use crate::error::{Error, Result};
use crate::fs::{Access, RandomAccessFile, WritableFile};
use crate::iter::InternalIterator;
use crate::key::{make_internal_key, user_key, ValueKind};
use crate::range_del::RangeTombstone;
use crate::util::checksum::ChecksumType;
use crate::util::compression::CompressionType;

pub(crate) type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// A writable file in memory that records whether it was synced.
pub(crate) struct MemWritable {
    pub(crate) data: Arc<Mutex<Vec<u8>>>,
    pub(crate) synced: Arc<AtomicBool>,
    pub(crate) fail_after: Option<usize>,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut d = self.data.lock();
        if self.fail_after.is_some_and(|limit| d.len() + data.len() > limit) {
            return Err(Error::io("append", "mem.sst", std::io::Error::other("disk full")));
        }
        d.extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        self.synced.store(true, AtomicOrdering::SeqCst);
        Ok(())
    }
    fn size(&self) -> u64 {
        self.data.lock().len() as u64
    }
}

/// A read-only file in memory that counts its reads and records hints.
pub(crate) struct MemRandom {
    data: Vec<u8>,
    pub(crate) reads: AtomicUsize,
    pub(crate) advised: Mutex<Vec<Access>>,
}

impl MemRandom {
    pub(crate) fn new(data: Vec<u8>) -> Arc<MemRandom> {
        Arc::new(MemRandom { data, reads: AtomicUsize::new(0), advised: Mutex::new(Vec::new()) })
    }
}

impl RandomAccessFile for MemRandom {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.reads.fetch_add(1, AtomicOrdering::SeqCst);
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(self.data.len());
        let end = start.saturating_add(len).min(self.data.len());
        Ok(self.data[start..end].to_vec())
    }
    fn size(&self) -> Result<u64> {
        Ok(self.data.len() as u64)
    }
    fn advise(&self, access: Access) {
        self.advised.lock().push(access);
    }
}

pub(crate) fn opts(compression: CompressionType, checksum: ChecksumType, block_size: usize) -> TableBuilderOptions {
    TableBuilderOptions {
        block_size,
        block_restart_interval: 4,
        checksum,
        compression,
        ..TableBuilderOptions::default()
    }
}

pub(crate) fn build(entries: &[(Vec<u8>, Vec<u8>)], o: TableBuilderOptions) -> (Vec<u8>, TableProperties) {
    build_with_tombstones(entries, &[], o)
}

/// [`build`] with the range tombstones `tombstones` in the table.
pub(crate) fn build_with_tombstones(
    entries: &[(Vec<u8>, Vec<u8>)],
    tombstones: &[RangeTombstone],
    o: TableBuilderOptions,
) -> (Vec<u8>, TableProperties) {
    let data = Arc::new(Mutex::new(Vec::new()));
    let synced = Arc::new(AtomicBool::new(false));
    let file = MemWritable { data: data.clone(), synced: synced.clone(), fail_after: None };
    let mut b = TableBuilder::new(Box::new(file), o, "test.sst".into());
    for t in tombstones {
        b.add_range_deletion(t.clone());
    }
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    assert_eq!(b.num_entries(), entries.len() as u64);
    let props = b.finish().unwrap();
    assert!(synced.load(AtomicOrdering::SeqCst), "finish did not sync");
    let bytes = data.lock().clone();
    assert_eq!(props.file_size, bytes.len() as u64);
    (bytes, props)
}

pub(crate) fn open(bytes: &[u8]) -> Result<Arc<Table>> {
    Table::open(MemRandom::new(bytes.to_vec()), bytes.len() as u64, "test.sst".into(), None)
}

pub(crate) fn ikey(user_key: &[u8], seq: u64, kind: ValueKind) -> Vec<u8> {
    make_internal_key(user_key, seq, kind)
}

/// Distinct user keys, every third with an older version, every seventh
/// version a tombstone; values compress well.
pub(crate) fn sample_entries(n: usize) -> Entries {
    let mut out = Vec::new();
    for i in 0..n {
        let uk = format!("key{i:06}").into_bytes();
        let versions: &[u64] = if i % 3 == 0 { &[20, 10] } else { &[15] };
        for &seq in versions {
            let kind = if (i + seq as usize).is_multiple_of(7) { ValueKind::Deletion } else { ValueKind::Value };
            let value = match kind {
                ValueKind::Deletion | ValueKind::SingleDeletion | ValueKind::RangeDeletion => Vec::new(),
                ValueKind::Value | ValueKind::BlobIndex | ValueKind::Merge | ValueKind::WideColumnEntity => {
                    format!("value-{i}-{seq}-").repeat(1 + i % 5).into_bytes()
                }
            };
            out.push((ikey(&uk, seq, kind), value));
        }
    }
    out
}

/// One version of each user key: no two blocks share a user key, so the
/// index can hold user keys.
pub(crate) fn unique_entries(n: usize) -> Entries {
    let mut entries = sample_entries(n);
    entries.dedup_by(|b, a| user_key(&a.0) == user_key(&b.0));
    entries
}

pub(crate) fn scan_forward(t: &Arc<Table>, rs: ReadSettings) -> Result<Entries> {
    let mut it = t.iter(rs);
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().map(|()| out)
}

pub(crate) fn scan_backward(t: &Arc<Table>, rs: ReadSettings) -> Result<Entries> {
    let mut it = t.iter(rs);
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    out.reverse();
    it.status().map(|()| out)
}

pub(crate) fn small_table(compression: CompressionType, checksum: ChecksumType) -> (Vec<u8>, Entries) {
    small_table_of(sample_entries(24), compression, checksum)
}

/// [`small_table`] with one version per user key: its index holds user
/// keys (format version 3), where `small_table`'s holds internal keys.
pub(crate) fn small_user_key_table(compression: CompressionType, checksum: ChecksumType) -> (Vec<u8>, Entries) {
    small_table_of(unique_entries(30), compression, checksum)
}

/// `entries` in a table of at least three small blocks.
pub(crate) fn small_table_of(
    entries: Entries,
    compression: CompressionType,
    checksum: ChecksumType,
) -> (Vec<u8>, Entries) {
    let (bytes, props) = build(&entries, opts(compression, checksum, 128));
    assert!(props.num_data_blocks >= 3);
    (bytes, entries)
}

/// A table of many small blocks, in memory with a read counter.
pub(crate) fn cached_table_file() -> (Arc<MemRandom>, u64, Entries) {
    let entries = sample_entries(3000);
    let (bytes, _) = build(&entries, opts(CompressionType::None, ChecksumType::Crc32c, 512));
    let len = bytes.len() as u64;
    (MemRandom::new(bytes), len, entries)
}

pub(crate) fn policy(cache: &Arc<dyn BlockCache>, high_priority: bool, pin: bool) -> TableCachePolicy {
    TableCachePolicy {
        block_cache: Some(Arc::clone(cache)),
        cache_index_and_filter_blocks: true,
        cache_index_and_filter_blocks_with_high_priority: high_priority,
        pin_index_and_filter_blocks: pin,
        ..TableCachePolicy::default()
    }
}

pub(crate) fn cache_of(cache_type: CacheType, capacity: usize) -> Arc<dyn BlockCache> {
    let o = CacheOptions { num_shard_bits: 0, estimated_entry_charge: 600, ..CacheOptions::new(capacity) };
    new_cache(cache_type, &o).unwrap()
}

pub(crate) fn empty_block() -> CacheValue {
    CacheValue::new(Block::new(BlockBuilder::new(1).finish()).unwrap())
}

/// Fills `cache` with unrelated high-priority blocks so everything
/// unreferenced goes.
pub(crate) fn flood(cache: &Arc<dyn BlockCache>) {
    let id = cache.new_id();
    for i in 0..(4 * cache.capacity() / 512) as u64 {
        drop(cache.insert(CacheKey::new(id, i), empty_block(), 512, Priority::High).unwrap());
    }
}
