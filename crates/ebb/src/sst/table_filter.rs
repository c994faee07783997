//! A table's filters as its reads ask them: the whole-key bloom filter (one
//! block, or partitions under a top-level filter index), probed for point
//! reads one key or a batch at a time, and the prefix check of bounded
//! prefix seeks (docs/format.md, "Filter block").
//!
//! What it owns: [`TableFilter`], the table's filter block (owned, pinned or
//! cached, as [`super::block_reader::TableBlocks`] keeps meta blocks) and
//! the top-level index of partitioned filters, which stays with the table.
//!
//! Invariants:
//! 1. A filter says "absent" only when the table certainly lacks the key
//!    (or prefix); a table without a filter, a filter of another kind (whole
//!    keys against prefixes, another extractor), and a filter that cannot be
//!    read all answer "may match": the data block read that follows reports
//!    the damage, if any.
//! 2. Every way of asking ([`TableFilter::key_may_match`],
//!    [`TableFilter::start_probe`], [`TableFilter::keys_may_match`]) gives a
//!    key the same answer, and reads the filter block through the cache as
//!    the others do (so the cache counts the same hits and misses).
//!
//! Thread-safety: immutable after open and `Sync`.

use std::sync::Arc;

use super::block::{Block, BlockIterator};
use super::block_reader::{CachedBlock, MetaBlock, MetaRef, TableBlocks};
use super::filter::filter_hash;
use super::format::BlockHandle;
use crate::cache::{BlockKind, CacheHandle};
use crate::key::{with_internal_key, KIND_FOR_SEEK, MAX_SEQUENCE};

/// A table's filters.
pub(super) struct TableFilter {
    /// The filter block (none with partitioned filters, or without a filter).
    filter: Option<MetaBlock>,
    /// With partitioned filters: the top-level filter index (partition key
    /// → filter partition handle), keyed as the top-level index.
    partitions: Option<Arc<Block>>,
    /// The filter holds whole user keys (not prefixes).
    whole_keys: bool,
    /// The prefix extractor whose prefixes the filter holds, if any.
    prefix_extractor: Option<String>,
}

/// A filter probe started by [`super::Table::start_filter_probe`]: the
/// answer, or the filter block (held, if it came from the cache) and the
/// key's hash.
pub struct FilterProbe<'a>(Probe<'a>);

enum Probe<'a> {
    Known(bool),
    Pending(MetaRef<'a>, u64),
}

impl FilterProbe<'_> {
    /// False only when the table certainly does not hold the key.
    pub fn may_match(&self) -> bool {
        match &self.0 {
            Probe::Known(answer) => *answer,
            Probe::Pending(meta, hash) => meta.value().filter().is_none_or(|f| f.may_match_hash(*hash)),
        }
    }
}

/// Where a key's filter partition is.
enum FilterPartition {
    /// The key is larger than every key of the table.
    PastTheEnd,
    /// The top-level filter index is damaged: the filter cannot rule out.
    Unknown,
    At(BlockHandle),
}

impl TableFilter {
    /// The filters of a table: its filter block `filter`, the top-level
    /// index of its filter partitions, and what its keys are (the table
    /// properties `whole_key_filtering` and `prefix_extractor_name`).
    pub(super) fn new(
        filter: Option<MetaBlock>,
        partitions: Option<Arc<Block>>,
        whole_keys: bool,
        prefix_extractor: Option<String>,
    ) -> Self {
        TableFilter { filter, partitions, whole_keys, prefix_extractor }
    }

    /// True when the filter holds whole keys.
    pub(super) fn whole_keys(&self) -> bool {
        self.whole_keys
    }

    /// Bytes held outside the block cache: an owned filter block and the
    /// top-level index of partitions.
    pub(super) fn memory_usage(&self) -> usize {
        self.filter.as_ref().map_or(0, MetaBlock::owned_charge) + self.partitions.as_ref().map_or(0, |b| b.size())
    }

    /// Whether the table may hold a key with prefix `prefix` under the
    /// extractor named `extractor`: false only when its filter holds that
    /// extractor's prefixes and lacks this one. (Partitioned filters are
    /// not asked: a prefix's keys may span partitions.)
    pub(super) fn prefix_may_match(&self, blocks: &TableBlocks, extractor: &str, prefix: &[u8]) -> bool {
        if self.prefix_extractor.as_deref() != Some(extractor) || self.partitions.is_some() {
            return true;
        }
        let Some(filter) = &self.filter else { return true };
        blocks
            .with_meta_block(filter, BlockKind::Filter, |v| v.filter().is_none_or(|f| f.may_match(prefix)))
            .unwrap_or(true)
    }

    /// False only when the bloom filter proves `user_key` absent.
    pub(super) fn key_may_match(&self, blocks: &TableBlocks, user_key: &[u8]) -> bool {
        if !self.whole_keys {
            return true;
        }
        if let Some(top) = &self.partitions {
            return match partition_for(blocks, top, user_key) {
                FilterPartition::PastTheEnd => false,
                FilterPartition::Unknown => true,
                FilterPartition::At(h) => blocks
                    .cached_meta(h, BlockKind::Filter)
                    .map_or(true, |p| p.value().filter().is_none_or(|f| f.may_match(user_key))),
            };
        }
        let Some(filter) = &self.filter else { return true };
        may_match_hash(blocks, filter, filter_hash(user_key))
    }

    /// Starts [`TableFilter::key_may_match`] for `user_key`, whose
    /// [`filter_hash`] is `hash`: for a filter the table holds (its own, or
    /// pinned in the cache), asks the CPU for the line the probe will read,
    /// without waiting for it; a filter found through the cache (or
    /// partitioned) is probed at once, as `key_may_match` does.
    pub(super) fn start_probe<'a>(&'a self, blocks: &'a TableBlocks, user_key: &[u8], hash: u64) -> FilterProbe<'a> {
        let filter = match &self.filter {
            Some(filter) if self.whole_keys && self.partitions.is_none() => filter,
            // No filter, none of whole keys, or partitions: as `key_may_match`.
            _ => return FilterProbe(Probe::Known(self.key_may_match(blocks, user_key))),
        };
        if let MetaBlock::Cached(_) = filter {
            // Found through the cache: the lookup (a lock and a hash table)
            // costs more than the line, and a handle held across the batch
            // would cost more than `key_may_match`'s borrow. Answered now.
            return FilterProbe(Probe::Known(may_match_hash(blocks, filter, hash)));
        }
        match blocks.meta_block(filter, BlockKind::Filter) {
            Ok(meta) => match meta.value().filter() {
                Some(f) => {
                    f.prefetch_hash(hash);
                    FilterProbe(Probe::Pending(meta, hash))
                }
                None => FilterProbe(Probe::Known(true)),
            },
            Err(_) => FilterProbe(Probe::Known(true)),
        }
    }

    /// [`TableFilter::key_may_match`] for `n` keys (`key(k)`, ascending)
    /// given with their [`filter_hash`]: the filter is fetched once (with
    /// partitioned filters, once per partition the keys fall in), every
    /// key's line prefetched, then probed (RocksDB's batched
    /// `KeysMayMatch`). `verdict(k, may_match)` is called for each key in
    /// order.
    pub(super) fn keys_may_match<'k>(
        &self,
        blocks: &TableBlocks,
        n: usize,
        key: impl Fn(usize) -> &'k [u8],
        hash: impl Fn(usize) -> u64,
        mut verdict: impl FnMut(usize, bool),
    ) {
        if !self.whole_keys {
            (0..n).for_each(|k| verdict(k, true));
            return;
        }
        if let Some(top) = &self.partitions {
            let mut current: Option<(BlockHandle, Option<CacheHandle>)> = None;
            for k in 0..n {
                let may = match partition_for(blocks, top, key(k)) {
                    FilterPartition::PastTheEnd => false,
                    FilterPartition::Unknown => true,
                    FilterPartition::At(h) => {
                        if current.as_ref().map(|(at, _)| *at) != Some(h) {
                            current = Some((h, blocks.cached_meta(h, BlockKind::Filter).ok()));
                        }
                        match &current {
                            Some((_, Some(p))) => p.value().filter().is_none_or(|f| f.may_match_hash(hash(k))),
                            _ => true,
                        }
                    }
                };
                verdict(k, may);
            }
            return;
        }
        let meta = self.filter.as_ref().map(|f| blocks.meta_block(f, BlockKind::Filter));
        let filter = match &meta {
            Some(Ok(r)) => r.value().filter(),
            _ => None,
        };
        let Some(filter) = filter else {
            return (0..n).for_each(|k| verdict(k, true));
        };
        (0..n).for_each(|k| filter.prefetch_hash(hash(k)));
        (0..n).for_each(|k| verdict(k, filter.may_match_hash(hash(k))));
    }
}

/// Whether the whole-key filter `filter` (unpartitioned) may hold the key
/// whose filter hash is `hash`; a filter that cannot be read answers true.
fn may_match_hash(blocks: &TableBlocks, filter: &MetaBlock, hash: u64) -> bool {
    blocks
        .with_meta_block(filter, BlockKind::Filter, |v| v.filter().is_none_or(|f| f.may_match_hash(hash)))
        .unwrap_or(true)
}

/// The filter partition that holds `user_key`'s hash if the table holds
/// the key: the one of the index partition holding the key's newest entry
/// (the top level `top` seeked with the key's smallest internal key).
fn partition_for(blocks: &TableBlocks, top: &Block, user_key: &[u8]) -> FilterPartition {
    with_internal_key(user_key, MAX_SEQUENCE, KIND_FOR_SEEK, |probe| {
        let mut it = BlockIterator::new(top, blocks.index_order().clone());
        it.seek(probe);
        if !it.valid() {
            // Past the last partition: no key of the table is as large.
            return if it.corruption().is_some() { FilterPartition::Unknown } else { FilterPartition::PastTheEnd };
        }
        BlockHandle::decode_exact(it.value()).map_or(FilterPartition::Unknown, FilterPartition::At)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::CacheType;
    use crate::key::user_key;
    use crate::sst::block_reader::TableCachePolicy;
    use crate::sst::table_builder::TableBuilderOptions;
    use crate::sst::table_reader::Table;
    use crate::sst::test_tables::*;
    use crate::util::checksum::ChecksumType;
    use crate::util::compression::CompressionType;

    #[test]
    fn a_started_filter_probe_answers_as_key_may_match() {
        let entries = sample_entries(3000);
        let plain = opts(CompressionType::None, ChecksumType::Crc32c, 512);
        let partitioned =
            TableBuilderOptions { index_partition_size: Some(1024), partition_filters: true, ..plain.clone() };
        let unfiltered = TableBuilderOptions { bloom_bits_per_key: 0, ..plain.clone() };
        for (name, o) in [("plain", plain), ("partitioned", partitioned), ("no filter", unfiltered)] {
            let (bytes, _) = build(&entries, o);
            let len = bytes.len() as u64;
            for (how, cache, meta_in_cache, pin) in [
                ("owned", false, false, false),
                ("cached", true, true, false),
                ("pinned", true, true, true),
                ("data only", true, false, false),
            ] {
                let cache = cache.then(|| cache_of(CacheType::Lru, 1 << 20));
                let policy = TableCachePolicy {
                    block_cache: cache.clone(),
                    cache_index_and_filter_blocks: meta_in_cache,
                    pin_index_and_filter_blocks: pin,
                    ..TableCachePolicy::default()
                };
                let t = Table::open_with_policy(MemRandom::new(bytes.clone()), len, "f.sst".into(), policy).unwrap();
                let mut ruled_out = 0;
                for i in 0..6000 {
                    // Keys of the table (i < 3000) and keys it lacks.
                    let k = format!("key{i:06}").into_bytes();
                    let probe = t.start_filter_probe(&k, filter_hash(&k));
                    let want = t.key_may_match(&k);
                    assert_eq!(probe.may_match(), want, "{name}, {how}: key{i:06}");
                    assert!(i >= 3000 || want, "{name}, {how}: a key of the table ruled out");
                    ruled_out += usize::from(!want);
                }
                if name == "no filter" {
                    assert_eq!(ruled_out, 0);
                } else {
                    assert!(
                        ruled_out > 2800,
                        "{name}, {how}: the filter ruled out only {ruled_out} of 3000 absent keys"
                    );
                }
            }
        }
    }

    #[test]
    fn bloom_filter_excludes_absent_keys_and_never_present_ones() {
        let entries = sample_entries(2000);
        let (bytes, _) = build(&entries, opts(CompressionType::None, ChecksumType::Crc32c, 4096));
        let t = open(&bytes).unwrap();
        assert!(entries.iter().all(|(k, _)| t.key_may_match(user_key(k))));
        let passed = (0..10_000).filter(|i| t.key_may_match(format!("absent{i}").as_bytes())).count();
        assert!(passed < 300, "{passed} of 10000 absent keys passed the filter");

        let mut o = opts(CompressionType::None, ChecksumType::Crc32c, 4096);
        o.bloom_bits_per_key = 0;
        let (bytes, props) = build(&entries, o);
        assert_eq!(props.filter_size, 0);
        let t = open(&bytes).unwrap();
        assert!(t.key_may_match(b"absent"));
    }

    /// The batched filter check gives every key the verdict the one-key
    /// check gives, with a filter and without one.
    #[test]
    fn batched_filter_verdicts_equal_single_ones() {
        let entries = sample_entries(2000);
        for bits in [10, 0] {
            let mut o = opts(CompressionType::None, ChecksumType::Crc32c, 4096);
            o.bloom_bits_per_key = bits;
            let t = open(&build(&entries, o).0).unwrap();
            let keys: Vec<Vec<u8>> = entries
                .iter()
                .map(|(k, _)| user_key(k).to_vec())
                .chain((0..3000).map(|i| format!("absent{i}").into_bytes()))
                .collect();
            let hashes: Vec<u64> = keys.iter().map(|k| crate::sst::filter::filter_hash(k)).collect();
            let mut verdicts = Vec::new();
            t.keys_may_match(keys.len(), |k| &keys[k], |k| hashes[k], |k, may| verdicts.push((k, may)));
            let single: Vec<(usize, bool)> =
                keys.iter().enumerate().map(|(k, key)| (k, t.key_may_match(key))).collect();
            assert_eq!(verdicts, single, "bits {bits}");
            assert!(bits == 0 || verdicts.iter().any(|(_, may)| !may), "no absent key was excluded");
        }
    }
}
