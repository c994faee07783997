//! A sharded LRU block cache (LevelDB `util/cache.cc`, without handles: values
//! are `Arc`s, so an entry can be evicted while a reader still uses its block).
//!
//! The capacity is split over 2^n shards, each an LRU list under its own
//! `parking_lot` mutex; a key's shard comes from the top bits of a hash of the
//! key. Each shard keeps its usage at or below its share of the capacity, so
//! the whole cache never exceeds its capacity.
//!
//! The list is a doubly linked list threaded through a `Vec` of nodes by index
//! (no unsafe), with freed slots reused.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{BlockCache, CacheKey};
use crate::sst::block::Block;

/// The most shards a cache gets: 64.
const MAX_SHARD_BITS: u32 = 6;
/// Shards are added only while each keeps at least this much capacity
/// (RocksDB `GetDefaultCacheShardBits`), so large blocks still fit a shard.
const MIN_SHARD_CAPACITY: usize = 512 << 10;

const NIL: usize = usize::MAX;

struct Node {
    key: CacheKey,
    block: Option<Arc<Block>>,
    charge: usize,
    /// Towards the most recently used end.
    newer: usize,
    /// Towards the least recently used end.
    older: usize,
}

struct Shard {
    capacity: usize,
    usage: usize,
    map: HashMap<CacheKey, usize>,
    nodes: Vec<Node>,
    free: Vec<usize>,
    /// Most recently used.
    newest: usize,
    /// Least recently used: evicted first.
    oldest: usize,
}

impl Shard {
    fn new(capacity: usize) -> Self {
        Shard { capacity, usage: 0, map: HashMap::new(), nodes: Vec::new(), free: Vec::new(), newest: NIL, oldest: NIL }
    }

    fn unlink(&mut self, i: usize) {
        let (newer, older) = (self.nodes[i].newer, self.nodes[i].older);
        match newer {
            NIL => self.newest = older,
            n => self.nodes[n].older = older,
        }
        match older {
            NIL => self.oldest = newer,
            o => self.nodes[o].newer = newer,
        }
    }

    fn push_newest(&mut self, i: usize) {
        self.nodes[i].newer = NIL;
        self.nodes[i].older = self.newest;
        match self.newest {
            NIL => self.oldest = i,
            n => self.nodes[n].newer = i,
        }
        self.newest = i;
    }

    fn lookup(&mut self, key: &CacheKey) -> Option<Arc<Block>> {
        let i = *self.map.get(key)?;
        self.unlink(i);
        self.push_newest(i);
        self.nodes[i].block.clone()
    }

    fn remove(&mut self, key: &CacheKey) {
        if let Some(i) = self.map.remove(key) {
            self.unlink(i);
            self.usage -= self.nodes[i].charge;
            self.nodes[i].block = None;
            self.free.push(i);
        }
    }

    fn insert(&mut self, key: CacheKey, block: Arc<Block>, charge: usize) {
        self.remove(&key);
        if charge > self.capacity {
            return;
        }
        let node = Node { key, block: Some(block), charge, newer: NIL, older: NIL };
        let i = match self.free.pop() {
            Some(i) => {
                self.nodes[i] = node;
                i
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() - 1
            }
        };
        self.push_newest(i);
        self.map.insert(key, i);
        self.usage += charge;
        while self.usage > self.capacity && self.oldest != i {
            let victim = self.nodes[self.oldest].key;
            self.remove(&victim);
        }
    }
}

/// A block cache evicting the least recently used blocks, sharded to spread
/// lock contention.
pub struct LruCache {
    shards: Box<[Mutex<Shard>]>,
    shard_bits: u32,
    capacity: usize,
    next_id: AtomicU64,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl LruCache {
    /// A cache of `capacity` bytes with a shard count chosen from the
    /// capacity (up to 64 shards of at least 512 KiB each).
    pub fn new(capacity: usize) -> Self {
        let mut bits = 0;
        while bits < MAX_SHARD_BITS && capacity >> (bits + 1) >= MIN_SHARD_CAPACITY {
            bits += 1;
        }
        LruCache::with_shard_bits(capacity, bits)
    }

    /// A cache of `capacity` bytes split over `2^shard_bits` shards (at most 2^6).
    pub fn with_shard_bits(capacity: usize, shard_bits: u32) -> Self {
        let shard_bits = shard_bits.min(MAX_SHARD_BITS);
        let n = 1usize << shard_bits;
        let shards = (0..n).map(|i| Mutex::new(Shard::new(capacity / n + usize::from(i < capacity % n)))).collect();
        LruCache {
            shards,
            shard_bits,
            capacity,
            next_id: AtomicU64::new(1),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: &CacheKey) -> &Mutex<Shard> {
        if self.shard_bits == 0 {
            return &self.shards[0];
        }
        // splitmix64's finaliser spreads the id and offset over the top bits.
        let mut h = key.cache_id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ key.block_offset;
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^= h >> 31;
        &self.shards[(h >> (64 - self.shard_bits)) as usize]
    }

    /// Number of shards.
    pub fn num_shards(&self) -> usize {
        self.shards.len()
    }
}

impl BlockCache for LruCache {
    fn lookup(&self, key: &CacheKey) -> Option<Arc<Block>> {
        if self.capacity == 0 {
            return None;
        }
        let found = self.shard(key).lock().lookup(key);
        let counter = if found.is_some() { &self.hits } else { &self.misses };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    fn insert(&self, key: CacheKey, block: Arc<Block>, charge: usize) {
        if self.capacity == 0 {
            return;
        }
        self.shard(&key).lock().insert(key, block, charge);
    }

    fn erase(&self, key: &CacheKey) {
        self.shard(key).lock().remove(key);
    }

    fn usage(&self) -> usize {
        self.shards.iter().map(|s| s.lock().usage).sum()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn hits_and_misses(&self) -> (u64, u64) {
        (self.hits.load(Ordering::Relaxed), self.misses.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::block_builder::BlockBuilder;
    use rand::{Rng, SeedableRng};

    fn block(tag: u8) -> Arc<Block> {
        let mut b = BlockBuilder::new(1);
        b.add(&[tag], &[tag]);
        Arc::new(Block::new(b.finish()).unwrap())
    }

    #[test]
    fn hits_after_insert_and_misses_after_erase() {
        let cache = LruCache::new(1 << 20);
        let k = CacheKey::new(cache.new_id(), 4096);
        assert!(cache.lookup(&k).is_none());
        let b = block(7);
        cache.insert(k, b.clone(), 100);
        assert!(Arc::ptr_eq(&cache.lookup(&k).unwrap(), &b));
        assert_eq!(cache.usage(), 100);
        assert!(cache.lookup(&CacheKey::new(k.cache_id + 1, 4096)).is_none());
        // Replacing a key replaces its charge.
        cache.insert(k, block(8), 60);
        assert_eq!(cache.usage(), 60);
        cache.erase(&k);
        assert!(cache.lookup(&k).is_none());
        assert_eq!(cache.usage(), 0);
        cache.erase(&k);
        assert_eq!(cache.usage(), 0);
    }

    #[test]
    fn ids_are_unique() {
        let cache = LruCache::new(0);
        let ids: std::collections::HashSet<u64> = (0..1000).map(|_| cache.new_id()).collect();
        assert_eq!(ids.len(), 1000);
    }

    #[test]
    fn capacity_zero_disables_caching() {
        let cache = LruCache::new(0);
        let k = CacheKey::new(1, 0);
        cache.insert(k, block(1), 1);
        assert!(cache.lookup(&k).is_none());
        assert_eq!(cache.usage(), 0);
        assert_eq!(cache.capacity(), 0);
    }

    #[test]
    fn least_recently_used_goes_first() {
        let cache = LruCache::with_shard_bits(300, 0);
        let keys: Vec<CacheKey> = (0..3).map(|i| CacheKey::new(1, i * 4096)).collect();
        for (i, k) in keys.iter().enumerate() {
            cache.insert(*k, block(i as u8), 100);
        }
        assert!(cache.lookup(&keys[0]).is_some());
        cache.insert(CacheKey::new(1, 99_999), block(9), 100);
        assert!(cache.lookup(&keys[0]).is_some(), "recently used entry was evicted");
        assert!(cache.lookup(&keys[1]).is_none(), "least recently used entry survived");
        assert!(cache.lookup(&keys[2]).is_some());
        assert_eq!(cache.usage(), 300);
        // An entry larger than the shard is not cached and evicts nothing.
        cache.insert(CacheKey::new(2, 0), block(3), 301);
        assert!(cache.lookup(&CacheKey::new(2, 0)).is_none());
        assert_eq!(cache.usage(), 300);
    }

    #[test]
    fn usage_stays_within_capacity_under_random_inserts() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        for shard_bits in [0, 2, 4] {
            let capacity = 64 << 10;
            let cache = LruCache::with_shard_bits(capacity, shard_bits);
            let blocks: Vec<Arc<Block>> = (0..8).map(block).collect();
            let max_charge = 4096;
            for i in 0..20_000u64 {
                let key = CacheKey::new(rng.gen_range(1..4), rng.gen_range(0..500) * 4096);
                match rng.gen_range(0..10) {
                    0 => cache.erase(&key),
                    1..=3 => {
                        let _ = cache.lookup(&key);
                    }
                    _ => {
                        let charge = rng.gen_range(1..=max_charge);
                        cache.insert(key, blocks[(i % 8) as usize].clone(), charge);
                    }
                }
                assert!(cache.usage() <= capacity, "usage {} > capacity {capacity}", cache.usage());
            }
            // Inserts alone fill every shard to within one entry of its share.
            for i in 0..2000u64 {
                cache.insert(CacheKey::new(5, i), blocks[0].clone(), rng.gen_range(1..=max_charge));
                assert!(cache.usage() <= capacity);
            }
            assert!(cache.usage() + max_charge * (1 << shard_bits) >= capacity, "usage {}", cache.usage());
            // Entries just inserted are found.
            let k = CacheKey::new(9, 0);
            cache.insert(k, blocks[0].clone(), 10);
            assert!(cache.lookup(&k).is_some());
        }
    }
}
