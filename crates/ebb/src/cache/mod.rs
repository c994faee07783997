//! The block cache: decoded data blocks shared between readers of all tables.
//!
//! Contract:
//! 1. A [`BlockCache`] maps a [`CacheKey`] (the table's cache id and the
//!    block's file offset) to an `Arc<Block>`. Every opened table takes a
//!    fresh id from [`BlockCache::new_id`], so a file number reused after
//!    deletion, or the same file opened twice, never aliases old blocks.
//! 2. Entries carry a charge in bytes; the cache keeps the sum of charges
//!    (`usage`) at or below `capacity`, evicting as it sees fit. An evicted
//!    block stays alive for readers still holding its `Arc`.
//! 3. Capacity 0 disables caching: inserts are dropped, lookups miss.
//! 4. Implementations are `Send + Sync` and lock internally.
//!
//! [`LruCache`] is the sharded LRU implementation.

mod lru;

pub use lru::LruCache;

use std::sync::Arc;

use crate::sst::block::Block;

/// Identifies one block of one opened table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CacheKey {
    /// The id the table got from [`BlockCache::new_id`] when it was opened.
    pub cache_id: u64,
    /// The block's offset in the table file.
    pub block_offset: u64,
}

impl CacheKey {
    /// The key of the block at `block_offset` of the table with `cache_id`.
    pub fn new(cache_id: u64, block_offset: u64) -> Self {
        CacheKey { cache_id, block_offset }
    }
}

/// A cache of decoded blocks, charged in bytes.
pub trait BlockCache: Send + Sync {
    /// The cached block for `key`, marking it recently used.
    fn lookup(&self, key: &CacheKey) -> Option<Arc<Block>>;
    /// Caches `block` under `key` with `charge` bytes, replacing any block
    /// already there. A block larger than the cache can hold is not cached.
    fn insert(&self, key: CacheKey, block: Arc<Block>, charge: usize);
    /// Drops the entry for `key`, if any.
    fn erase(&self, key: &CacheKey);
    /// Bytes charged by the entries held now.
    fn usage(&self) -> usize;
    /// The most bytes the cache holds.
    fn capacity(&self) -> usize;
    /// A cache id no earlier call returned.
    fn new_id(&self) -> u64;
    /// Lookups that found a block, and lookups that did not.
    fn hits_and_misses(&self) -> (u64, u64);
}
