//! Block cache counters per block kind (RocksDB tickers
//! `BLOCK_CACHE_{DATA,INDEX,FILTER}_{HIT,MISS,ADD,BYTES_INSERT}` and
//! `BLOCK_CACHE_ADD_FAILURES`).
//!
//! Every lookup bumps a counter, so one shared atomic would be written by all
//! reader threads and bounce between cores, which is the contention the clock
//! cache exists to avoid. The counters are striped instead
//! ([`crate::stats::Striped`]): each thread adds to its own cache-line-aligned
//! row, and a snapshot sums the rows. Counts are exact; a snapshot taken
//! during updates may miss the latest ones.

use crate::stats::Striped;

/// Counters per kind: hits, misses, inserts, bytes inserted, insert failures.
const PER_KIND: usize = 5;
const HITS: usize = 0;
const MISSES: usize = 1;
const INSERTS: usize = 2;
const BYTES: usize = 3;
const FAILURES: usize = 4;

/// What a cached block is, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockKind {
    /// A data block.
    Data,
    /// An index block.
    Index,
    /// A filter block.
    Filter,
}

impl BlockKind {
    /// Every kind, in the order counters are reported.
    pub const ALL: [BlockKind; 3] = [BlockKind::Data, BlockKind::Index, BlockKind::Filter];

    fn row_offset(self) -> usize {
        PER_KIND
            * match self {
                BlockKind::Data => 0,
                BlockKind::Index => 1,
                BlockKind::Filter => 2,
            }
    }
}

/// Striped counters of a cache's lookups and inserts per block kind.
#[derive(Default)]
pub struct CacheStats(Striped<{ PER_KIND * 3 }>);

impl std::fmt::Debug for CacheStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.snapshot().fmt(f)
    }
}

impl CacheStats {
    fn add(&self, kind: BlockKind, counter: usize, n: u64) {
        self.0.add(kind.row_offset() + counter, n);
    }

    /// A lookup of a `kind` block found it.
    pub fn record_hit(&self, kind: BlockKind) {
        self.add(kind, HITS, 1);
        crate::perf::count(|c| {
            c.block_cache_hit_count += 1;
            match kind {
                BlockKind::Index => c.block_cache_index_hit_count += 1,
                BlockKind::Filter => c.block_cache_filter_hit_count += 1,
                BlockKind::Data => {}
            }
        });
    }

    /// A lookup of a `kind` block missed.
    pub fn record_miss(&self, kind: BlockKind) {
        self.add(kind, MISSES, 1);
        crate::perf::count(|c| c.block_cache_miss_count += 1);
    }

    /// A `kind` block of `bytes` was inserted.
    pub fn record_insert(&self, kind: BlockKind, bytes: usize) {
        self.add(kind, INSERTS, 1);
        self.add(kind, BYTES, bytes as u64);
    }

    /// An insert of a `kind` block was refused (strict capacity limit).
    pub fn record_insert_failure(&self, kind: BlockKind) {
        self.add(kind, FAILURES, 1);
    }

    /// The sums of all rows.
    pub fn snapshot(&self) -> CacheCounters {
        let sums = self.0.sums();
        let kind = |k: BlockKind| {
            let at = k.row_offset();
            BlockKindCounters {
                hits: sums[at + HITS],
                misses: sums[at + MISSES],
                inserts: sums[at + INSERTS],
                bytes_inserted: sums[at + BYTES],
                insert_failures: sums[at + FAILURES],
            }
        };
        CacheCounters { data: kind(BlockKind::Data), index: kind(BlockKind::Index), filter: kind(BlockKind::Filter) }
    }
}

/// Counters of one block kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockKindCounters {
    /// Lookups that found the block (RocksDB `BLOCK_CACHE_*_HIT`).
    pub hits: u64,
    /// Lookups that did not (`BLOCK_CACHE_*_MISS`).
    pub misses: u64,
    /// Blocks inserted (`BLOCK_CACHE_*_ADD`).
    pub inserts: u64,
    /// Bytes of the blocks inserted (`BLOCK_CACHE_*_BYTES_INSERT`).
    pub bytes_inserted: u64,
    /// Inserts refused by the strict capacity limit (`BLOCK_CACHE_ADD_FAILURES`).
    pub insert_failures: u64,
}

/// A snapshot of a cache's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheCounters {
    /// Data blocks.
    pub data: BlockKindCounters,
    /// Index blocks.
    pub index: BlockKindCounters,
    /// Filter blocks.
    pub filter: BlockKindCounters,
}

impl CacheCounters {
    /// The counters of `kind`.
    pub fn kind(&self, kind: BlockKind) -> BlockKindCounters {
        match kind {
            BlockKind::Data => self.data,
            BlockKind::Index => self.index,
            BlockKind::Filter => self.filter,
        }
    }

    /// RocksDB's block cache tickers (`rocksdb.block.cache.hit`,
    /// `rocksdb.block.cache.index.miss`, ...) with their counts.
    pub fn tickers(&self) -> Vec<(String, u64)> {
        let t = self.total();
        let mut out = vec![
            ("rocksdb.block.cache.hit".to_string(), t.hits),
            ("rocksdb.block.cache.miss".to_string(), t.misses),
            ("rocksdb.block.cache.add".to_string(), t.inserts),
            ("rocksdb.block.cache.add.failures".to_string(), t.insert_failures),
        ];
        for (name, c) in [("index", self.index), ("filter", self.filter), ("data", self.data)] {
            out.push((format!("rocksdb.block.cache.{name}.miss"), c.misses));
            out.push((format!("rocksdb.block.cache.{name}.hit"), c.hits));
            out.push((format!("rocksdb.block.cache.{name}.add"), c.inserts));
            out.push((format!("rocksdb.block.cache.{name}.bytes.insert"), c.bytes_inserted));
        }
        out
    }

    /// All kinds added up.
    pub fn total(&self) -> BlockKindCounters {
        let mut t = BlockKindCounters::default();
        for k in [self.data, self.index, self.filter] {
            t.hits += k.hits;
            t.misses += k.misses;
            t.inserts += k.inserts;
            t.bytes_inserted += k.bytes_inserted;
            t.insert_failures += k.insert_failures;
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_many_threads_add_up_per_kind() {
        let stats = std::sync::Arc::new(CacheStats::default());
        let threads: Vec<_> = (0..20)
            .map(|i| {
                let stats = stats.clone();
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        stats.record_hit(BlockKind::Data);
                    }
                    stats.record_miss(BlockKind::Index);
                    stats.record_insert(BlockKind::Filter, i);
                    stats.record_insert_failure(BlockKind::Data);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = stats.snapshot();
        assert_eq!(s.data, BlockKindCounters { hits: 20_000, insert_failures: 20, ..Default::default() });
        assert_eq!(s.index, BlockKindCounters { misses: 20, ..Default::default() });
        assert_eq!(s.filter, BlockKindCounters { inserts: 20, bytes_inserted: (0..20).sum(), ..Default::default() });
        assert_eq!(s.total().hits, 20_000);
        assert_eq!(s.kind(BlockKind::Index).misses, 20);
    }
}
