//! The compressed secondary cache (RocksDB's `CompressedSecondaryCache`): a
//! second tier under a block cache (LRU or clock) that keeps, compressed, blocks the
//! primary evicted, so a block read again soon is decompressed from memory
//! instead of read from the file (docs/cache.md, "Compressed secondary
//! cache").
//!
//! Contract (RocksDB's policy, with its default options):
//! 1. Only blocks the primary evicts come here, and only a block evicted
//!    twice: the first eviction of a key leaves a *dummy* entry (no bytes,
//!    a small charge), the second finds the dummy and stores the block,
//!    compressed ([`CompressedSecondaryCache::insert_evicted`]). A block
//!    read once and dropped never costs a compression.
//! 2. A lookup that finds a block returns its bytes decompressed and leaves
//!    a dummy in its place: the block moves up to the primary, and when the
//!    primary evicts it again it comes straight back here. A dummy is a miss.
//! 3. The tier is an [`LruCache`] of its own, charged in compressed bytes
//!    (plus the metadata charge), within its own capacity; its values are
//!    opaque bytes, so it knows nothing of the table format.
//! 4. A block whose compression saves nothing is kept as it is.
//!
//! Thread-safety: as the LRU it is built on (`Send + Sync`).

use std::sync::atomic::{AtomicU64, Ordering};

use super::{BlockCache, CacheKey, CacheOptions, CacheValue, LruCache, Priority};
use crate::error::Result;
use crate::util::compression::CompressionType;

/// Charge of a dummy entry (RocksDB charges its dummies a few bytes too).
const DUMMY_CHARGE: usize = 8;

/// What the tier holds for a key.
enum Entry {
    /// The key was evicted once: the next eviction stores the block.
    Dummy,
    /// A block, as `compression` left it.
    Block { compression: CompressionType, bytes: Vec<u8> },
}

/// Counters of a [`CompressedSecondaryCache`] (RocksDB's
/// `rocksdb.secondary.cache.hits` and `rocksdb.compressed.secondary.cache.*`
/// tickers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SecondaryCacheCounters {
    /// Lookups that found a block.
    pub hits: u64,
    /// Lookups that found a dummy.
    pub dummy_hits: u64,
    /// Lookups that found nothing.
    pub misses: u64,
    /// Blocks stored (at their second eviction).
    pub inserts: u64,
    /// Dummies stored (at a first eviction).
    pub dummy_inserts: u64,
    /// Bytes of the blocks stored, before and after compression.
    pub uncompressed_bytes: u64,
    /// See `uncompressed_bytes`.
    pub compressed_bytes: u64,
}

/// A compressed second tier under a block cache. See the module contract.
pub struct CompressedSecondaryCache {
    cache: LruCache,
    compression: CompressionType,
    hits: AtomicU64,
    dummy_hits: AtomicU64,
    misses: AtomicU64,
    inserts: AtomicU64,
    dummy_inserts: AtomicU64,
    uncompressed_bytes: AtomicU64,
    compressed_bytes: AtomicU64,
}

impl CompressedSecondaryCache {
    /// A tier of `capacity` bytes (compressed) keeping blocks compressed
    /// with `compression` (RocksDB's default is LZ4; `None` keeps them as
    /// they are), sharded as `num_shard_bits` says (-1: automatic); refuses
    /// a shard count out of range.
    pub fn new(capacity: usize, compression: CompressionType, num_shard_bits: i32) -> Result<Self> {
        let options = CacheOptions { num_shard_bits, ..CacheOptions::new(capacity) };
        Ok(CompressedSecondaryCache {
            cache: LruCache::with_options(&options)?,
            compression,
            hits: AtomicU64::new(0),
            dummy_hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            inserts: AtomicU64::new(0),
            dummy_inserts: AtomicU64::new(0),
            uncompressed_bytes: AtomicU64::new(0),
            compressed_bytes: AtomicU64::new(0),
        })
    }

    /// The primary evicted the block `raw` (its bytes as the table format
    /// stores them, uncompressed) of `key`: a dummy the first time, the
    /// block, compressed, when a dummy is there (contract 1).
    pub fn insert_evicted(&self, key: CacheKey, raw: &[u8]) {
        // Anything there (a dummy, or the block kept while a read without
        // `fill_cache` used it) means the block is worth keeping.
        if !self.cache.lookup_with(&key, &mut |_| {}) {
            self.dummy_inserts.fetch_add(1, Ordering::Relaxed);
            let _ = self.cache.insert(key, CacheValue::new(Entry::Dummy), DUMMY_CHARGE, Priority::Low);
            return;
        }
        let (compression, bytes) = match self.compression.compress(raw) {
            Some(c) if c.len() < raw.len() => (self.compression, c),
            _ => (CompressionType::None, raw.to_vec()),
        };
        self.inserts.fetch_add(1, Ordering::Relaxed);
        self.uncompressed_bytes.fetch_add(raw.len() as u64, Ordering::Relaxed);
        self.compressed_bytes.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        let charge = bytes.len();
        let _ = self.cache.insert(key, CacheValue::new(Entry::Block { compression, bytes }), charge, Priority::Low);
    }

    /// The block of `key`, decompressed, when the tier holds it (a dummy
    /// takes its place, unless `keep`: a read that will not put the block
    /// in the primary leaves it here); `None` on a miss, a dummy, or bytes
    /// that do not decompress (then the entry is dropped, and the caller
    /// reads the file).
    pub fn lookup(&self, key: &CacheKey, keep: bool) -> Option<Vec<u8>> {
        let mut found: Option<std::result::Result<Vec<u8>, String>> = None;
        let mut dummy = false;
        let present = self.cache.lookup_with(key, &mut |v| match v.get::<Entry>() {
            Some(Entry::Block { compression, bytes }) => found = Some(compression.decompress(bytes)),
            _ => dummy = true,
        });
        match found {
            Some(Ok(block)) => {
                self.hits.fetch_add(1, Ordering::Relaxed);
                if !keep {
                    let _ = self.cache.insert(*key, CacheValue::new(Entry::Dummy), DUMMY_CHARGE, Priority::Low);
                }
                Some(block)
            }
            Some(Err(_)) => {
                self.misses.fetch_add(1, Ordering::Relaxed);
                self.cache.erase(key);
                None
            }
            None => {
                let counter = if present && dummy { &self.dummy_hits } else { &self.misses };
                counter.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// Bytes charged now (compressed blocks, dummies, metadata).
    pub fn usage(&self) -> usize {
        self.cache.usage()
    }

    /// The most bytes the tier holds.
    pub fn capacity(&self) -> usize {
        self.cache.capacity()
    }

    /// The counters so far.
    pub fn counters(&self) -> SecondaryCacheCounters {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        SecondaryCacheCounters {
            hits: get(&self.hits),
            dummy_hits: get(&self.dummy_hits),
            misses: get(&self.misses),
            inserts: get(&self.inserts),
            dummy_inserts: get(&self.dummy_inserts),
            uncompressed_bytes: get(&self.uncompressed_bytes),
            compressed_bytes: get(&self.compressed_bytes),
        }
    }
}

/// A block cache's tier as the cache holds it: the tier, and how to take
/// the bytes of the values the cache evicts ([`super::BlockCache::set_spill`]).
pub(super) struct Tier {
    /// Boxed: the tier is an LRU cache itself (with no tier under it).
    cache: Box<CompressedSecondaryCache>,
    spill: std::sync::OnceLock<super::SpillFn>,
}

impl Tier {
    /// The tier a block cache built with `options` has: none when
    /// `compressed_secondary_cache_size` is 0, else one of that size, LZ4.
    pub(super) fn for_options(options: &CacheOptions) -> Result<Option<Tier>> {
        if options.compressed_secondary_cache_size == 0 {
            return Ok(None);
        }
        let cache = CompressedSecondaryCache::new(options.compressed_secondary_cache_size, CompressionType::Lz4, -1)?;
        Ok(Some(Tier { cache: Box::new(cache), spill: std::sync::OnceLock::new() }))
    }

    pub(super) fn cache(&self) -> &CompressedSecondaryCache {
        &self.cache
    }

    /// Sets how evicted values give their bytes (the first call only).
    pub(super) fn set_spill(&self, spill: super::SpillFn) {
        let _ = self.spill.set(spill);
    }

    /// Hands the tier what an insert evicted (called outside the block
    /// cache's locks: the tier compresses).
    pub(super) fn keep(&self, evicted: Vec<(CacheKey, CacheValue)>) {
        let Some(spill) = self.spill.get() else { return };
        for (k, v) in evicted {
            if let Some(bytes) = spill(&*v.0) {
                self.cache.insert_evicted(k, bytes);
            }
        }
    }
}

impl std::fmt::Debug for CompressedSecondaryCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompressedSecondaryCache")
            .field("capacity", &self.capacity())
            .field("usage", &self.usage())
            .field("compression", &self.compression)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(i: u64) -> Vec<u8> {
        format!("block {i} ").repeat(100).into_bytes()
    }

    #[test]
    fn a_block_is_kept_at_its_second_eviction_and_moves_up_on_a_hit() {
        let c = CompressedSecondaryCache::new(1 << 20, CompressionType::Lz4, 0).unwrap();
        let k = CacheKey::new(1, 0);
        c.insert_evicted(k, &block(1));
        assert_eq!(c.lookup(&k, false), None, "the first eviction leaves a dummy");
        assert_eq!(c.counters().dummy_hits, 1);
        c.insert_evicted(k, &block(1));
        assert_eq!(c.lookup(&k, false), Some(block(1)), "the second keeps the block");
        assert_eq!(c.lookup(&k, false), None, "a hit leaves a dummy in its place");
        c.insert_evicted(k, &block(1));
        assert_eq!(c.lookup(&k, false), Some(block(1)), "evicted again, it comes straight back");
        let n = c.counters();
        assert_eq!((n.hits, n.inserts, n.dummy_inserts), (2, 2, 1));
        assert!(n.compressed_bytes * 4 < n.uncompressed_bytes, "repetitive blocks compress: {n:?}");
        assert_eq!(c.lookup(&CacheKey::new(2, 0), false), None);
        assert_eq!(c.counters().misses, 1);
    }

    #[test]
    fn blocks_that_do_not_compress_are_kept_as_they_are_within_capacity() {
        let c = CompressedSecondaryCache::new(64 << 10, CompressionType::Lz4, 0).unwrap();
        let noise: Vec<u8> = (0..4000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for i in 0..100 {
            let k = CacheKey::new(3, i);
            c.insert_evicted(k, &noise);
            c.insert_evicted(k, &noise);
            assert!(c.usage() <= c.capacity(), "{} over {}", c.usage(), c.capacity());
        }
        // The newest ones are there, whole.
        assert_eq!(c.lookup(&CacheKey::new(3, 99), false), Some(noise));
        assert_eq!(c.lookup(&CacheKey::new(3, 0), false), None, "the oldest were evicted");
    }
}
