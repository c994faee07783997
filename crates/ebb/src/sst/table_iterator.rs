//! The table iterator: every entry of a table in internal-key order, both
//! ways, tombstones and old versions included (LevelDB `table/table.cc`
//! `Table::NewIterator`): the index picks the data block, the data block's
//! iterator walks its entries (one [`TwoLevelCursor`]).
//!
//! What it owns: [`TableIterator`], its walk, the index block it reads on
//! first positioning (held while it lives), the data block in use, and the
//! [`PrefetchBuffer`] that reads data blocks ahead.
//!
//! Invariants:
//! 1. Data blocks read from the file go through the readahead buffer as
//!    [`ReadSettings::readahead`] says: fixed readahead for compaction
//!    inputs and an explicit `ReadOptions::readahead_size`, auto readahead
//!    (growing on sequential reads) otherwise. A compaction's iterator
//!    hints the file sequential (docs/io.md).
//! 2. An iterator that meets an error (a damaged or unreadable block, a
//!    seek target that is not an internal key) is invalid for good and
//!    reports the error through `status()`.
//! 3. A slice from `key()` or `value()` is valid until the next move.
//!
//! Thread-safety: used by one thread; the table it reads is shared.

use std::sync::Arc;

use super::block::{Block, KeyBuf, KeyOrder};
use super::block_reader::{ReadSettings, Readahead};
use super::format::BlockHandle;
use super::prefetch::PrefetchBuffer;
use super::table_reader::Table;
use super::two_level::{IndexCursor, LowerBlocks, TwoLevelCursor};
use crate::cache::CacheHandle;
use crate::error::{Error, Result};
use crate::fs::Access;
use crate::iter::InternalIterator;
use crate::key::TRAILER_LEN;

impl Table {
    /// An iterator over every entry, unpositioned, reading ahead as
    /// `rs.readahead` says.
    pub fn iter(self: &Arc<Self>, rs: ReadSettings) -> TableIterator {
        if rs.for_compaction {
            self.file().advise(Access::Sequential);
        }
        let (initial, max) = self.auto_readahead();
        let prefetch = match rs.readahead {
            Readahead::Fixed(0) => None,
            Readahead::Fixed(size) => Some(PrefetchBuffer::fixed(size)),
            Readahead::Auto if max == 0 => None,
            Readahead::Auto => Some(PrefetchBuffer::auto(initial, max)),
        };
        TableIterator {
            table: Arc::clone(self),
            walk: TwoLevelCursor::new(None, DataBlocks { rs, prefetch }),
            index_pin: None,
            prepared: None,
            prepared_target: KeyBuf::new(),
        }
    }
}

/// The data blocks of a table iterator: from the cache, or read from the
/// file through its readahead buffer.
struct DataBlocks {
    rs: ReadSettings,
    /// Reads data blocks ahead; `None` when readahead is off.
    prefetch: Option<PrefetchBuffer>,
}

impl LowerBlocks for DataBlocks {
    fn read(&mut self, table: &Table, handle: BlockHandle) -> Result<(Arc<Block>, Option<CacheHandle>)> {
        table.data_block(handle, &self.rs, self.prefetch.as_mut())
    }
    fn order(&self, table: &Table) -> KeyOrder {
        table.data_order().clone()
    }
    fn corruption(&self, table: &Table, handle: BlockHandle, reason: &str) -> Error {
        table.corruption(handle.offset, reason)
    }
}

/// An iterator over a table's entries (module documentation).
pub struct TableIterator {
    table: Arc<Table>,
    /// The index (`None` until first positioning) over the data blocks.
    walk: TwoLevelCursor<Option<IndexCursor>, DataBlocks>,
    /// Keeps a cached index block referenced while the iterator lives.
    index_pin: Option<CacheHandle>,
    /// Set by `prepare_seek` to whether it loaded a data block: the index
    /// and the block are positioned for `prepared_target`. Any other call
    /// clears it.
    prepared: Option<bool>,
    prepared_target: KeyBuf,
}

impl TableIterator {
    /// The table iterated.
    pub(super) fn table(&self) -> &Table {
        &self.table
    }

    /// Reads the index block on first use; false (with the error recorded)
    /// when it cannot be read.
    fn ensure_index(&mut self) -> bool {
        if self.walk.upper().is_none() {
            match self.table.index_block() {
                Ok((block, pin)) => {
                    *self.walk.upper_mut() = Some(IndexCursor::new(&self.table, block));
                    self.index_pin = pin;
                }
                Err(e) => return self.walk.fail(e),
            }
        }
        true
    }

    fn check_target(&mut self, target: &[u8]) -> bool {
        if self.walk.error().is_some() {
            return false;
        }
        if target.len() < TRAILER_LEN {
            let e = Error::invalid(format!("seek target of {} bytes is not an internal key", target.len()));
            return self.walk.fail(e);
        }
        true
    }
}

impl InternalIterator for TableIterator {
    fn valid(&self) -> bool {
        self.walk.valid()
    }

    fn seek_to_first(&mut self) {
        self.prepared = None;
        if self.walk.error().is_some() || !self.ensure_index() {
            return;
        }
        self.walk.seek_to_first(&self.table);
    }

    fn seek_to_last(&mut self) {
        self.prepared = None;
        if self.walk.error().is_some() || !self.ensure_index() {
            return;
        }
        self.walk.seek_to_last(&self.table);
    }

    fn seek(&mut self, target: &[u8]) {
        let prepared = self.prepared.take().filter(|_| self.prepared_target[..] == *target);
        if !self.check_target(target) {
            return;
        }
        let loaded = match prepared {
            Some(loaded) => loaded,
            None => {
                if !self.ensure_index() {
                    return;
                }
                self.walk.seek_block(&self.table, target)
            }
        };
        self.walk.finish_seek(&self.table, target, loaded);
    }

    /// The index search and the data block's fetch of a seek to `target`
    /// (a block found in the block cache has its bytes' loads issued,
    /// [`Block::prefetch`]); the seek that follows seeks in the block.
    fn prepare_seek(&mut self, target: &[u8]) {
        self.prepared = None;
        if !self.check_target(target) || !self.ensure_index() {
            return;
        }
        self.prepared = Some(self.walk.seek_block(&self.table, target));
        self.prepared_target.clear();
        self.prepared_target.extend_from_slice(target);
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.prepared = None;
        if !self.check_target(target) || !self.ensure_index() {
            return;
        }
        self.walk.seek_for_prev(&self.table, target);
    }

    fn next(&mut self) {
        self.prepared = None;
        self.walk.next(&self.table);
    }

    fn prev(&mut self) {
        self.prepared = None;
        self.walk.prev(&self.table);
    }

    fn key(&self) -> &[u8] {
        self.walk.key()
    }

    fn value(&self) -> &[u8] {
        self.walk.value()
    }

    fn status(&self) -> Result<()> {
        match self.walk.error() {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;
    use std::sync::atomic::Ordering as AtomicOrdering;

    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::cache::{BlockCache, LruCache};
    use crate::iter::VecIterator;
    use crate::key::{compare_bytewise_internal_keys, user_key, ValueKind, KIND_FOR_SEEK};
    use crate::sst::block_reader::TableCachePolicy;
    use crate::sst::properties::TableProperties;
    use crate::sst::table_builder::TableBuilderOptions;
    use crate::sst::test_tables::*;
    use crate::util::checksum::ChecksumType;
    use crate::util::compression::CompressionType;

    /// Applies one random operation to both iterators and checks they agree.
    fn check_same(ours: &TableIterator, reference: &VecIterator, what: &str) {
        assert_eq!(ours.valid(), reference.valid(), "{what}");
        if reference.valid() {
            assert_eq!(ours.key(), reference.key(), "{what}");
            assert_eq!(ours.value(), reference.value(), "{what}");
        }
    }

    #[test]
    fn many_blocks_agree_with_a_sorted_vec() {
        // Versions of a user key across blocks keep internal index keys;
        // one version per key gives user index keys, unless turned off.
        for (entries, user_key_index, expect_user_keys) in [
            (sample_entries(6000), true, false),
            (unique_entries(6000), true, true),
            (unique_entries(6000), false, false),
        ] {
            let o = TableBuilderOptions { user_key_index, ..opts(CompressionType::Lz4, ChecksumType::Crc32c, 256) };
            let (bytes, props) = build(&entries, o);
            let t = open(&bytes).unwrap();
            assert_eq!(t.index_key_is_user_key(), expect_user_keys);
            many_blocks_agree(&entries, &bytes, &props);
        }
    }

    #[test]
    fn index_blocks_of_every_restart_interval_read_alike() {
        // Flat and partitioned indexes, with internal and user index keys:
        // every interval reads as the sorted entries do (seeks both ways,
        // steps, point lookups one at a time and batched); tables written
        // with different intervals differ only in the index's size.
        // The flat index sizes are compared on the user-key index of
        // entries with one version each (`sized`).
        let mut flat_index_size = std::collections::BTreeMap::new();
        for (entries, user_key_index, sized) in [
            (sample_entries(6000), true, false),
            (unique_entries(6000), true, true),
            (unique_entries(6000), false, false),
        ] {
            for partition in [None, Some(512)] {
                for interval in [1, 2, 7, 16, 64, 1000] {
                    let o = TableBuilderOptions {
                        user_key_index,
                        index_block_restart_interval: interval,
                        index_partition_size: partition,
                        compression: CompressionType::None,
                        ..opts(CompressionType::Lz4, ChecksumType::Crc32c, 256)
                    };
                    let (bytes, props) = build(&entries, o);
                    many_blocks_agree(&entries, &bytes, &props);
                    if partition.is_some() {
                        assert!(props.index_partitions > 1, "interval {interval}: one partition");
                    } else if sized {
                        flat_index_size.insert(interval, props.index_size);
                    }
                }
            }
        }
        // Between restarts an entry stores only what its key adds: the
        // index of interval 16 is under half the size of interval 1's.
        let size = |i: usize| flat_index_size[&i];
        assert!(size(16) * 2 < size(1), "index sizes by interval: {flat_index_size:?}");
        assert!(size(2) < size(1) && size(16) < size(2), "index sizes by interval: {flat_index_size:?}");
    }

    fn many_blocks_agree(entries: &Entries, bytes: &[u8], props: &TableProperties) {
        assert!(props.num_data_blocks > 200, "{} blocks", props.num_data_blocks);
        let t = open(bytes).unwrap();
        let mut ours = t.iter(ReadSettings::default());
        let mut reference = VecIterator::new(entries.clone());
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let random_target = |rng: &mut rand::rngs::StdRng| {
            let i = rng.gen_range(0..6100);
            let mut uk = format!("key{i:06}").into_bytes();
            if rng.gen_bool(0.2) {
                uk.push(b'x');
            }
            ikey(&uk, rng.gen_range(0..25), KIND_FOR_SEEK)
        };
        for step in 0..3000 {
            let what = format!("step {step}");
            match rng.gen_range(0..6) {
                0 => {
                    let target = random_target(&mut rng);
                    ours.seek(&target);
                    reference.seek(&target);
                }
                1 => {
                    let target = random_target(&mut rng);
                    ours.seek_for_prev(&target);
                    reference.seek_for_prev(&target);
                }
                2 if rng.gen_bool(0.1) => {
                    ours.seek_to_first();
                    reference.seek_to_first();
                }
                2 => {
                    ours.seek_to_last();
                    reference.seek_to_last();
                }
                3 | 4 => {
                    for _ in 0..rng.gen_range(1..40) {
                        if reference.valid() {
                            ours.next();
                            reference.next();
                            check_same(&ours, &reference, &what);
                        }
                    }
                }
                _ => {
                    for _ in 0..rng.gen_range(1..40) {
                        if reference.valid() {
                            ours.prev();
                            reference.prev();
                            check_same(&ours, &reference, &what);
                        }
                    }
                }
            }
            check_same(&ours, &reference, &what);
        }
        ours.status().unwrap();

        // Point lookups, one at a time and batched, give the first entry at
        // or after the lookup when it has the lookup's user key.
        let rs = ReadSettings::default();
        let mut lookups: Vec<Vec<u8>> = (0..2000).map(|_| random_target(&mut rng)).collect();
        lookups.sort_by(|a, b| compare_bytewise_internal_keys(a, b));
        let expected: Vec<Option<(Vec<u8>, Vec<u8>)>> = lookups
            .iter()
            .map(|l| {
                let i = entries.partition_point(|(k, _)| compare_bytewise_internal_keys(k, l) == Ordering::Less);
                entries.get(i).filter(|(k, _)| user_key(k) == user_key(l)).cloned()
            })
            .collect();
        for (l, want) in lookups.iter().zip(&expected) {
            assert_eq!(&t.get(&rs, l).unwrap(), want, "get {:?}", String::from_utf8_lossy(l));
        }
        let mut batched = vec![None; lookups.len()];
        t.multi_get_past_filter(
            &rs,
            lookups.len(),
            |k| &lookups[k],
            |k, r| {
                let (key, value) = r.unwrap();
                batched[k] = Some((key.to_vec(), value.to_vec()));
            },
        );
        assert_eq!(batched, expected, "multi_get");

        // Offsets grow with the key and stay within the data blocks.
        let mut last = 0;
        for (k, _) in entries.iter().step_by(97) {
            let off = t.approximate_offset_of(k);
            assert!(off >= last && off < props.data_size, "{off} after {last}");
            last = off;
        }
        assert_eq!(t.approximate_offset_of(&entries[0].0), 0);
        assert_eq!(t.approximate_offset_of(&ikey(b"zzz", 1, ValueKind::Value)), props.data_size);
        assert!(t.approximate_offset_of(&entries[entries.len() / 2].0) > props.data_size / 4);
    }

    /// Where `it` is: its entry and the two after it, or its error.
    fn position_of(it: &mut dyn InternalIterator) -> std::result::Result<Entries, String> {
        let mut out = Vec::new();
        while it.valid() && out.len() < 3 {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status().map_err(|e| e.to_string())?;
        Ok(out)
    }

    #[test]
    fn prepared_seeks_land_where_plain_seeks_do() {
        let entries = sample_entries(3000);
        let (bytes, _) = build(&entries, opts(CompressionType::None, ChecksumType::Crc32c, 512));
        let cache: Arc<dyn BlockCache> = Arc::new(LruCache::new(64 << 10));
        let uncached = open(&bytes).unwrap();
        let cached =
            Table::open(MemRandom::new(bytes.clone()), bytes.len() as u64, "p.sst".into(), Some(cache)).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(29);
        let target = |rng: &mut rand::rngs::StdRng| match rng.gen_range(0..20) {
            // Not an internal key: the seek's error.
            0 => b"short".to_vec(),
            _ => {
                let mut uk = format!("key{:06}", rng.gen_range(0..3100)).into_bytes();
                if rng.gen_bool(0.2) {
                    uk.push(b'x');
                }
                ikey(&uk, rng.gen_range(0..25), KIND_FOR_SEEK)
            }
        };
        for (name, t) in [("uncached", &uncached), ("cached", &cached)] {
            // One iterator reused, as a merging iterator reuses its children.
            let mut prepared = t.iter(ReadSettings::default());
            for step in 0..1500 {
                let goal = target(&mut rng);
                let mut plain = t.iter(ReadSettings::default());
                plain.seek(&goal);
                let want = position_of(&mut plain);
                let what = format!("{name}, step {step}");
                match rng.gen_range(0..4) {
                    // Prepared for this target.
                    0 | 1 => prepared.prepare_seek(&goal),
                    // Prepared for another target: discarded.
                    2 => prepared.prepare_seek(&target(&mut rng)),
                    // Prepared, then moved: discarded.
                    _ => {
                        prepared.prepare_seek(&goal);
                        prepared.seek_to_first();
                    }
                }
                if prepared.status().is_err() {
                    // A failed seek's error stays with its iterator, as it
                    // does without preparing.
                    prepared = t.iter(ReadSettings::default());
                    prepared.prepare_seek(&goal);
                }
                prepared.seek(&goal);
                assert_eq!(position_of(&mut prepared), want, "{what}");
                if want.is_err() {
                    prepared = t.iter(ReadSettings::default());
                }
            }
        }
    }

    #[test]
    fn iterators_read_ahead_as_their_settings_say() {
        let entries = sample_entries(3000);
        let (bytes, props) = build(&entries, opts(CompressionType::None, ChecksumType::Crc32c, 512));
        let blocks = props.num_data_blocks as usize;
        assert!(blocks > 100, "{blocks} blocks");
        let file = MemRandom::new(bytes.clone());
        let table = Table::open(file.clone(), bytes.len() as u64, "test.sst".into(), None).unwrap();
        let scan_reads = |rs: ReadSettings| {
            let before = file.reads.load(AtomicOrdering::SeqCst);
            assert_eq!(scan_forward(&table, rs).unwrap(), entries);
            file.reads.load(AtomicOrdering::SeqCst) - before
        };
        let fixed = |n| ReadSettings { readahead: Readahead::Fixed(n), ..ReadSettings::default() };
        assert_eq!(scan_reads(fixed(0)), blocks, "no readahead: one read per block");
        let with_64k = scan_reads(fixed(64 << 10));
        assert_eq!(with_64k, bytes.len().div_ceil(64 << 10).min(blocks), "one read per 64 KiB window");
        let auto = scan_reads(ReadSettings::default());
        assert!(auto < blocks / 10, "auto readahead: {auto} reads for {blocks} blocks");
        // A reverse scan is never sequential: auto readahead stays off.
        let before = file.reads.load(AtomicOrdering::SeqCst);
        let mut it = table.iter(ReadSettings::default());
        it.seek_to_last();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.prev();
        }
        assert_eq!(n, entries.len());
        assert_eq!(file.reads.load(AtomicOrdering::SeqCst) - before, blocks);
        assert!(file.advised.lock().is_empty(), "user scans give no hint");
        let compaction = ReadSettings { for_compaction: true, ..fixed(0) };
        assert_eq!(scan_reads(compaction), blocks);
        assert_eq!(*file.advised.lock(), vec![Access::Sequential]);
        // With auto readahead off, a scan reads block by block.
        let policy = TableCachePolicy { max_auto_readahead_size: 0, ..TableCachePolicy::default() };
        let table = Table::open_with_policy(file.clone(), bytes.len() as u64, "test.sst".into(), policy).unwrap();
        let before = file.reads.load(AtomicOrdering::SeqCst);
        assert_eq!(scan_forward(&table, ReadSettings::default()).unwrap(), entries);
        assert_eq!(file.reads.load(AtomicOrdering::SeqCst) - before, blocks);
    }

    #[test]
    fn a_damaged_block_read_through_the_readahead_window_is_corruption() {
        let entries = sample_entries(2000);
        let (mut bytes, props) = build(&entries, opts(CompressionType::None, ChecksumType::Crc32c, 512));
        let middle = (props.data_size / 2) as usize;
        bytes[middle] ^= 0x40;
        let table = open(&bytes).unwrap();
        for readahead in [Readahead::Auto, Readahead::Fixed(16 << 10)] {
            let err = scan_forward(&table, ReadSettings { readahead, ..ReadSettings::default() }).unwrap_err();
            assert!(matches!(err, Error::Corruption { .. }), "{readahead:?}: {err}");
        }
    }
}
