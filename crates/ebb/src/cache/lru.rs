//! A sharded LRU block cache with a high-priority pool (RocksDB
//! `cache/lru_cache.cc`, as seed 001 dissects it).
//!
//! Layout: the capacity is split over `2^num_shard_bits` shards; a key's shard
//! comes from the top bits of its hash. Each shard is one `parking_lot` mutex
//! over a hash table (key -> slot), a slab of slots, and one LRU list threaded
//! through the slab by index (slot 0 is the list's sentinel).
//!
//! Entry states (RocksDB `LRUHandle`):
//! 1. referenced and in the cache: `refs > 0`, `in_cache`; not on the list
//!    (with `lru_promote_on_hit` off it may stay on the list, see below);
//! 2. unreferenced and in the cache: `refs == 0`, `in_cache`, on the list,
//!    evictable;
//! 3. referenced, erased or replaced: `refs > 0`, not `in_cache`, on no list,
//!    unfindable; freed, and its charge released, by the last release.
//!
//! The list, oldest first: `[low-priority pool | high-priority pool]`.
//! `low_pri_newest` marks the boundary. A released entry goes to the head of
//! the high-priority pool if it is high priority or was hit, else to the head
//! of the low-priority pool (the midpoint); when the high pool outgrows
//! `high_pri_pool_ratio` of the shard its oldest entries are demoted to the low
//! pool. Eviction takes the oldest entry, so a flood of low-priority inserts
//! evicts low-priority entries while there are any.
//!
//! Promotion: RocksDB takes an entry off the list on lookup and puts it back at
//! the head on release, so every use writes the list head twice under the lock.
//! With `lru_promote_on_hit` off, a lookup only bumps `refs` and sets `hit`, a
//! release only drops `refs`; eviction gives an entry with `hit` set a second
//! chance at the head (clearing `hit`) and moves referenced entries it meets
//! off the list until released. Both locks remain; the list is untouched.
//!
//! Handles: a [`LruHandle`] owns an `Arc` of the entry (value, slot index,
//! shard), so it can release itself when dropped; the slot is reused only
//! after the entry is freed, so the index stays valid while a handle lives.
//! The shard and its entries point at each other; [`LruCache`]'s `Drop` breaks
//! the cycle by freeing what is unreferenced and leaving the rest to releases.
//!
//! Point reads ([`BlockCache::lookup_with`]) create no handle: under the lock
//! they take a reference in the slot, as a handle would, and read the value's
//! address from the slot itself (`Slot::value`, a second owner of the value);
//! the search runs on that address outside the lock, then one more lock drops
//! the reference. Nothing shared is written outside the two critical sections
//! (no `Arc` count), and the entry itself is never read: the chain is
//! slot -> value, as in RocksDB (handle -> value). This is the one `unsafe`
//! in this file, argued in `LruShard::lookup_with`.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{
    shard_capacity, shard_index, strict_limit_error, BlockCache, CacheHandle, CacheKey, CacheOptions, CacheStats,
    CacheValue, HandleInner, Priority,
};
use crate::error::Result;

/// Shards hold at least this much when the shard count is automatic (RocksDB
/// `GetDefaultCacheShardBits`'s rule, with 4 MiB where RocksDB has 512
/// KiB), so large blocks still fit a shard together. A 64 MB table's index
/// and filter blocks are about 0.8 MB in memory; in the 1 MB shards
/// RocksDB's rule gives a 64 MB cache, two or three of them hashing to one
/// shard evicted each other every few reads, in some processes and not
/// others (docs/cache.md, "Shards and large blocks").
const MIN_SHARD_SIZE: usize = 4 << 20;
// A slot is one cache line: the lock's critical section reads and writes one.
const _: () = assert!(std::mem::size_of::<Slot>() <= 64);
/// The list sentinel's slot.
const SENTINEL: usize = 0;
/// What one entry costs besides its value: the entry, its slot, its hash-table
/// bucket, and the `Arc` counts.
const METADATA_CHARGE: usize = std::mem::size_of::<LruEntry>()
    + 2 * std::mem::size_of::<usize>()
    + std::mem::size_of::<Slot>()
    + std::mem::size_of::<(CacheKey, usize)>()
    + 1;

/// The reference a [`CacheHandle`] holds on an LRU entry.
pub(super) struct LruHandle {
    entry: Arc<LruEntry>,
}

impl LruHandle {
    pub(super) fn value(&self) -> &CacheValue {
        &self.entry.value
    }
}

impl Drop for LruHandle {
    fn drop(&mut self) {
        self.entry.shard.release(self.entry.slot);
    }
}

/// The immutable part of an entry; the mutable part is its [`Slot`].
pub(super) struct LruEntry {
    value: CacheValue,
    slot: usize,
    shard: Arc<LruShard>,
}

#[derive(Clone)]
struct Slot {
    /// `None` for a free slot (and the sentinel).
    entry: Option<Arc<LruEntry>>,
    /// The entry's value: a second owner kept beside the list links so a
    /// point read reaches the value without reading the entry.
    value: Option<CacheValue>,
    key: CacheKey,
    /// Value charge plus metadata charge. `u32` keeps a slot within one
    /// cache line; an entry charged 4 GiB or more is never cached (as one
    /// larger than its shard).
    charge: u32,
    refs: u32,
    in_cache: bool,
    on_list: bool,
    high_pri: bool,
    in_high_pool: bool,
    /// Looked up since inserted (RocksDB `HasHit`); with promotion off, since
    /// it last reached the list tail.
    hit: bool,
    /// List links: slot indexes (a shard never holds 2^32 entries; `u32`
    /// keeps a slot within one cache line).
    older: u32,
    newer: u32,
}

impl Slot {
    fn free() -> Self {
        Slot {
            entry: None,
            value: None,
            key: CacheKey::new(0, 0),
            charge: 0,
            refs: 0,
            in_cache: false,
            on_list: false,
            high_pri: false,
            in_high_pool: false,
            hit: false,
            older: SENTINEL as u32,
            newer: SENTINEL as u32,
        }
    }
}

/// Hash-table hasher for keys that hash themselves ([`CacheKey`]'s `Hash`
/// writes its well-mixed `hash64`): passes the value through, rotated so the
/// table's tag bits do not come from the bits that picked the shard.
#[derive(Default, Clone, Copy)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 ^= x;
    }
}

impl BuildHasher for PassThrough {
    type Hasher = PassThrough;
    fn build_hasher(&self) -> PassThrough {
        PassThrough(0)
    }
}

/// One shard: everything below is guarded by its mutex.
struct ShardState {
    capacity: usize,
    high_pri_capacity: usize,
    strict: bool,
    promote_on_hit: bool,
    usage: usize,
    pinned_usage: usize,
    high_pri_usage: usize,
    map: HashMap<CacheKey, usize, PassThrough>,
    slots: Vec<Slot>,
    free: Vec<usize>,
    /// Newest entry of the low-priority pool; the sentinel when that pool is empty.
    low_pri_newest: usize,
    /// The cache has a secondary tier: eviction hands it what it keeps.
    spill: bool,
}

pub(super) struct LruShard {
    state: Mutex<ShardState>,
}

impl ShardState {
    /// The slot after `i` towards the newest end (the sentinel after the newest).
    fn newer(&self, i: usize) -> usize {
        self.slots[i].newer as usize
    }

    /// The slot before `i` towards the oldest end (the sentinel before the oldest).
    fn older(&self, i: usize) -> usize {
        self.slots[i].older as usize
    }

    fn link_after(&mut self, pos: usize, i: usize) {
        let next = self.newer(pos);
        self.slots[i].older = pos as u32;
        self.slots[i].newer = next as u32;
        self.slots[pos].newer = i as u32;
        self.slots[next].older = i as u32;
        self.slots[i].on_list = true;
    }

    fn unlink(&mut self, i: usize) {
        let (older, newer) = (self.older(i), self.newer(i));
        self.slots[older].newer = newer as u32;
        self.slots[newer].older = older as u32;
        if self.low_pri_newest == i {
            self.low_pri_newest = older;
        }
        if self.slots[i].in_high_pool {
            self.high_pri_usage -= self.slots[i].charge as usize;
            self.slots[i].in_high_pool = false;
        }
        self.slots[i].on_list = false;
    }

    /// Puts an unlisted entry on the list as most recently used in its pool.
    fn list_insert(&mut self, i: usize) {
        let s = &self.slots[i];
        if self.high_pri_capacity > 0 && (s.high_pri || s.hit) {
            let newest = self.older(SENTINEL);
            self.link_after(newest, i);
            self.slots[i].in_high_pool = true;
            self.high_pri_usage += self.slots[i].charge as usize;
            // Demote the oldest high-priority entries while the pool is too big.
            while self.high_pri_usage > self.high_pri_capacity {
                let j = self.newer(self.low_pri_newest);
                if j == SENTINEL {
                    break;
                }
                self.slots[j].in_high_pool = false;
                self.high_pri_usage -= self.slots[j].charge as usize;
                self.low_pri_newest = j;
            }
        } else {
            self.link_after(self.low_pri_newest, i);
            self.low_pri_newest = i;
        }
    }

    /// Frees slot `i` (unlisted, out of the table, unreferenced).
    fn free_slot(&mut self, i: usize) -> Option<Arc<LruEntry>> {
        self.usage -= self.slots[i].charge as usize;
        let entry = std::mem::replace(&mut self.slots[i], Slot::free()).entry;
        self.free.push(i);
        entry
    }

    fn alloc_slot(&mut self) -> usize {
        match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot::free());
                self.slots.len() - 1
            }
        }
    }

    /// Takes slot `i` out of the table (state 1 -> 3, or frees it from state 2).
    fn detach(&mut self, i: usize, freed: &mut Vec<Arc<LruEntry>>) {
        self.slots[i].in_cache = false;
        if self.slots[i].on_list {
            self.unlink(i);
        }
        if self.slots[i].refs == 0 {
            freed.extend(self.free_slot(i));
        }
    }

    /// Evicts from the old end until `charge` more bytes fit or nothing is
    /// evictable; with a secondary tier, the evicted values it may keep go
    /// to `spilled`.
    fn evict(&mut self, charge: usize, freed: &mut Vec<Arc<LruEntry>>, spilled: &mut Vec<(CacheKey, CacheValue)>) {
        while self.usage + charge > self.capacity {
            let i = self.newer(SENTINEL);
            if i == SENTINEL {
                return;
            }
            if self.slots[i].refs > 0 {
                // Only without promotion are referenced entries listed: park it
                // off the list until its release.
                self.unlink(i);
                continue;
            }
            if !self.promote_on_hit && self.slots[i].hit {
                self.unlink(i);
                self.list_insert(i);
                self.slots[i].hit = false;
                continue;
            }
            let key = self.slots[i].key;
            if self.spill {
                if let Some(v) = &self.slots[i].value {
                    spilled.push((key, v.clone()));
                }
            }
            self.map.remove(&key);
            self.detach(i, freed);
        }
    }
}

impl LruShard {
    fn new(capacity: usize, o: &CacheOptions) -> Self {
        let high_pri_capacity = (capacity as f64 * o.high_pri_pool_ratio) as usize;
        LruShard {
            state: Mutex::new(ShardState {
                capacity,
                high_pri_capacity,
                strict: o.strict_capacity_limit,
                promote_on_hit: o.lru_promote_on_hit,
                usage: 0,
                pinned_usage: 0,
                high_pri_usage: 0,
                map: HashMap::with_hasher(PassThrough(0)),
                slots: vec![Slot::free()],
                free: Vec::new(),
                low_pri_newest: SENTINEL,
                spill: o.compressed_secondary_cache_size > 0,
            }),
        }
    }

    /// Takes a reference on the entry for `key` (a hit), under the lock.
    fn reference(st: &mut ShardState, key: &CacheKey) -> Option<usize> {
        let i = *st.map.get(key)?;
        if st.slots[i].refs == 0 {
            st.pinned_usage += st.slots[i].charge as usize;
            if st.promote_on_hit && st.slots[i].on_list {
                st.unlink(i);
            }
        }
        let s = &mut st.slots[i];
        s.refs += 1;
        s.hit = true;
        Some(i)
    }

    fn lookup(&self, key: &CacheKey) -> Option<LruHandle> {
        let mut st = self.state.lock();
        let i = Self::reference(&mut st, key)?;
        st.slots[i].entry.clone().map(|entry| LruHandle { entry })
    }

    /// [`BlockCache::lookup_with`]: a reference taken and dropped under the
    /// lock like a handle's, with no handle (see the module documentation).
    fn lookup_with(&self, key: &CacheKey, f: &mut dyn FnMut(&CacheValue)) -> bool {
        /// Drops the reference when the call returns or unwinds.
        struct Release<'a>(&'a LruShard, usize);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.release(self.1);
            }
        }
        let mut st = self.state.lock();
        let Some(i) = Self::reference(&mut st, key) else { return false };
        let Some(value) = st.slots[i].value.as_ref().map(CacheValue::as_ptr) else {
            unreachable!("a cached slot holds its value")
        };
        drop(st);
        let _release = Release(self, i);
        // SAFETY: `value` comes from `Arc::as_ptr` of the `Arc` in slot `i`,
        // whose reference we took above. A slot's `value` is dropped only by
        // `free_slot`, which runs only at `refs == 0`, so that `Arc` lives
        // until `_release` drops our reference, after `f` returns. The copy
        // made from it is never dropped (`ManuallyDrop`), so the strong count
        // is neither raised nor lowered; anything `f` clones from it is a
        // counted owner.
        #[allow(unsafe_code)]
        let value = ManuallyDrop::new(CacheValue(unsafe { Arc::from_raw(value) }));
        f(&value);
        true
    }

    fn release(&self, i: usize) {
        let mut freed = None;
        let mut st = self.state.lock();
        st.slots[i].refs -= 1;
        if st.slots[i].refs == 0 {
            st.pinned_usage -= st.slots[i].charge as usize;
            if !st.slots[i].in_cache {
                freed = st.free_slot(i);
            } else if st.usage > st.capacity {
                // Over capacity (a non-strict insert overflowed): drop it now.
                let key = st.slots[i].key;
                st.map.remove(&key);
                st.slots[i].in_cache = false;
                if st.slots[i].on_list {
                    st.unlink(i);
                }
                freed = st.free_slot(i);
            } else if !st.slots[i].on_list {
                st.list_insert(i);
                if !st.promote_on_hit {
                    st.slots[i].hit = false;
                }
            }
        }
        drop(st);
        drop(freed);
    }

    /// Inserts as [`BlockCache::insert`] does; what eviction made room
    /// with, that a secondary tier may keep, is added to `spilled`.
    fn insert(
        self: &Arc<Self>,
        key: CacheKey,
        value: CacheValue,
        charge: usize,
        high_pri: bool,
        spilled: &mut Vec<(CacheKey, CacheValue)>,
    ) -> Result<CacheHandle> {
        let mut freed = Vec::new();
        let mut st = self.state.lock();
        if charge > st.capacity || u32::try_from(charge).is_err() {
            // It could only be cached by flushing the whole shard.
            let (strict, capacity) = (st.strict, st.capacity);
            drop(st);
            return if strict { Err(strict_limit_error(charge, capacity)) } else { Ok(CacheHandle::uncached(value)) };
        }
        if let Some(old) = st.map.remove(&key) {
            st.detach(old, &mut freed);
        }
        st.evict(charge, &mut freed, spilled);
        if st.usage + charge > st.capacity && st.strict {
            let capacity = st.capacity;
            drop(st);
            drop(freed);
            return Err(strict_limit_error(charge, capacity));
        }
        let i = st.alloc_slot();
        let second = value.clone();
        let entry = Arc::new(LruEntry { value, slot: i, shard: Arc::clone(self) });
        st.slots[i] = Slot {
            entry: Some(Arc::clone(&entry)),
            value: Some(second),
            key,
            charge: charge as u32,
            refs: 1,
            in_cache: true,
            high_pri,
            ..Slot::free()
        };
        st.map.insert(key, i);
        st.usage += charge;
        st.pinned_usage += charge;
        drop(st);
        drop(freed);
        Ok(CacheHandle { inner: HandleInner::Lru(LruHandle { entry }) })
    }

    fn erase(&self, key: &CacheKey) {
        let mut freed = Vec::new();
        let mut st = self.state.lock();
        if let Some(i) = st.map.remove(key) {
            st.detach(i, &mut freed);
        }
        drop(st);
        drop(freed);
    }
}

/// A block cache evicting the least recently used blocks, sharded to spread
/// lock contention. See the module documentation.
pub struct LruCache {
    shards: Box<[Arc<LruShard>]>,
    shard_bits: u32,
    capacity: usize,
    metadata_charge: bool,
    next_id: AtomicU64,
    stats: CacheStats,
    /// The compressed tier under this one (`compressed_secondary_cache_size`).
    tier: Option<super::secondary::Tier>,
}

impl LruCache {
    /// A cache of `capacity` bytes with RocksDB's defaults: automatic shard
    /// count, high-priority pool of half of each shard, promotion on hit,
    /// metadata charged, no strict limit.
    pub fn new(capacity: usize) -> Self {
        LruCache::build(&CacheOptions::new(capacity))
    }

    /// A cache built as `options` say; refuses values out of range.
    pub fn with_options(options: &CacheOptions) -> Result<Self> {
        options.validate()?;
        Ok(LruCache::build(options))
    }

    fn build(o: &CacheOptions) -> Self {
        let shard_bits = o.shard_bits(MIN_SHARD_SIZE);
        let n = 1usize << shard_bits;
        let shards = (0..n).map(|i| Arc::new(LruShard::new(shard_capacity(o.capacity, n, i), o))).collect();
        LruCache {
            shards,
            shard_bits,
            capacity: o.capacity,
            metadata_charge: o.metadata_charge,
            next_id: AtomicU64::new(1),
            stats: CacheStats::default(),
            // With -1 shard bits the tier's options are always valid.
            tier: super::secondary::Tier::for_options(o).ok().flatten(),
        }
    }

    /// Number of shards.
    pub fn num_shards(&self) -> usize {
        self.shards.len()
    }

    fn shard(&self, key: &CacheKey) -> &Arc<LruShard> {
        &self.shards[shard_index(key.hash64(), self.shard_bits)]
    }

    /// Checks every shard's bookkeeping against its contents: list order and
    /// pools, usage, pinned usage, the table. For tests, on a quiet cache.
    #[cfg(test)]
    pub(crate) fn check_consistency(&self) -> std::result::Result<(), String> {
        for (n, shard) in self.shards.iter().enumerate() {
            let st = shard.state.lock();
            let mut listed = 0;
            let mut high = 0;
            let mut in_low_region = st.low_pri_newest != SENTINEL;
            let mut i = st.newer(SENTINEL);
            while i != SENTINEL {
                let s = &st.slots[i];
                if !s.on_list || !s.in_cache || s.entry.is_none() {
                    return Err(format!("shard {n}: slot {i} is listed but not a cached entry"));
                }
                if st.promote_on_hit && s.refs > 0 {
                    return Err(format!("shard {n}: referenced slot {i} is listed"));
                }
                if s.in_high_pool == in_low_region {
                    return Err(format!("shard {n}: slot {i} is on the wrong side of the pool boundary"));
                }
                if s.in_high_pool {
                    high += s.charge as usize;
                }
                if i == st.low_pri_newest {
                    in_low_region = false;
                }
                listed += 1;
                i = s.newer as usize;
            }
            if high != st.high_pri_usage {
                return Err(format!("shard {n}: high pool holds {high}, accounted {}", st.high_pri_usage));
            }
            let live = || st.slots.iter().filter(|s| s.entry.is_some());
            for (i, s) in st.slots.iter().enumerate() {
                let value = s.entry.as_ref().map(|e| e.value.as_ptr() as *const ());
                if value != s.value.as_ref().map(|v| v.as_ptr() as *const ()) {
                    return Err(format!("shard {n}: slot {i} points at another value than its entry holds"));
                }
            }
            let usage: usize = live().map(|s| s.charge as usize).sum();
            let pinned: usize = live().filter(|s| s.refs > 0).map(|s| s.charge as usize).sum();
            if (usage, pinned) != (st.usage, st.pinned_usage) {
                return Err(format!(
                    "shard {n}: entries charge {usage} (pinned {pinned}), accounted {} ({})",
                    st.usage, st.pinned_usage
                ));
            }
            let unreferenced = live().filter(|s| s.in_cache && s.refs == 0 && !s.on_list).count();
            if unreferenced > 0 {
                return Err(format!("shard {n}: {unreferenced} unreferenced entries are on no list"));
            }
            if live().filter(|s| s.in_cache).count() != st.map.len() || listed > st.map.len() {
                return Err(format!("shard {n}: table and slots disagree"));
            }
            for (k, &i) in &st.map {
                if st.slots[i].key != *k || !st.slots[i].in_cache {
                    return Err(format!("shard {n}: table points {k:?} at slot {i}, which holds something else"));
                }
            }
        }
        Ok(())
    }
}

impl Drop for LruCache {
    fn drop(&mut self) {
        // Entries point back at their shard: free the unreferenced ones now and
        // detach the rest, which their last release frees.
        for shard in self.shards.iter() {
            let mut freed = Vec::new();
            let mut st = shard.state.lock();
            st.map.clear();
            for i in 1..st.slots.len() {
                if st.slots[i].entry.is_some() {
                    st.detach(i, &mut freed);
                }
            }
            drop(st);
            drop(freed);
        }
    }
}

impl BlockCache for LruCache {
    fn lookup(&self, key: &CacheKey) -> Option<CacheHandle> {
        if self.capacity == 0 {
            return None;
        }
        let h = self.shard(key).lookup(key)?;
        Some(CacheHandle { inner: HandleInner::Lru(h) })
    }

    fn lookup_with(&self, key: &CacheKey, f: &mut dyn FnMut(&CacheValue)) -> bool {
        self.capacity != 0 && self.shard(key).lookup_with(key, f)
    }

    fn insert(&self, key: CacheKey, value: CacheValue, charge: usize, priority: Priority) -> Result<CacheHandle> {
        if self.capacity == 0 {
            return Ok(CacheHandle::uncached(value));
        }
        let charge = charge + if self.metadata_charge { METADATA_CHARGE } else { 0 };
        let Some(tier) = &self.tier else {
            return self.shard(&key).insert(key, value, charge, priority == Priority::High, &mut Vec::new());
        };
        let mut spilled = Vec::new();
        let inserted = self.shard(&key).insert(key, value, charge, priority == Priority::High, &mut spilled);
        tier.keep(spilled);
        inserted
    }

    fn secondary(&self) -> Option<&super::CompressedSecondaryCache> {
        self.tier.as_ref().map(super::secondary::Tier::cache)
    }

    fn set_spill(&self, spill: super::SpillFn) {
        if let Some(tier) = &self.tier {
            tier.set_spill(spill);
        }
    }

    fn erase(&self, key: &CacheKey) {
        self.shard(key).erase(key);
    }

    fn usage(&self) -> usize {
        self.shards.iter().map(|s| s.state.lock().usage).sum()
    }

    fn pinned_usage(&self) -> usize {
        self.shards.iter().map(|s| s.state.lock().pinned_usage).sum()
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn new_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn stats(&self) -> &CacheStats {
        &self.stats
    }

    fn name(&self) -> &'static str {
        "LRUCache"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::testutil::{tag_of, tagged};
    use crate::error::Error;
    use rand::{Rng, SeedableRng};

    /// One shard, no metadata charge, so charges add up exactly.
    fn cache(capacity: usize, ratio: f64, promote: bool) -> LruCache {
        let o = CacheOptions {
            num_shard_bits: 0,
            high_pri_pool_ratio: ratio,
            lru_promote_on_hit: promote,
            metadata_charge: false,
            ..CacheOptions::new(capacity)
        };
        LruCache::with_options(&o).unwrap()
    }

    fn key(i: u64) -> CacheKey {
        CacheKey::new(1, i * 4096)
    }

    fn put(c: &LruCache, i: u64, charge: usize, p: Priority) {
        drop(c.insert(key(i), tagged(i), charge, p).unwrap());
    }

    fn present(c: &LruCache, i: u64) -> bool {
        c.lookup(&key(i)).is_some()
    }

    #[test]
    fn hits_after_insert_and_misses_after_erase() {
        let c = cache(1 << 20, 0.5, true);
        assert!(c.lookup(&key(1)).is_none());
        put(&c, 1, 100, Priority::Low);
        assert_eq!(tag_of(&c.lookup(&key(1)).unwrap()), 1);
        assert_eq!(c.usage(), 100);
        // Replacing a key replaces its value and its charge.
        drop(c.insert(key(1), tagged(9), 60, Priority::Low).unwrap());
        assert_eq!(tag_of(&c.lookup(&key(1)).unwrap()), 9);
        assert_eq!(c.usage(), 60);
        c.erase(&key(1));
        assert!(c.lookup(&key(1)).is_none());
        assert_eq!(c.usage(), 0);
        c.erase(&key(1));
        assert_eq!(c.usage(), 0);
        c.check_consistency().unwrap();
    }

    /// With `cache_index_and_filter_blocks`, a 64 MB table brings an index
    /// block of about 0.45 MB (in memory) and a filter of 0.35 MB. Twenty
    /// such tables' metadata, a quarter of a 64 MB cache, stays cached
    /// under the default shard count while reads stream data blocks through
    /// it, each read checking every table's filter. With shards of 1 MB
    /// (RocksDB's 512 KiB rule), a shard that two or three of these blocks
    /// hash to cannot keep them in its high-priority half, and every few
    /// reads reload one (docs/cache.md, "Shards and large blocks").
    #[test]
    fn the_default_shards_keep_large_index_and_filter_blocks_under_a_stream_of_data_blocks() {
        let c = LruCache::with_options(&CacheOptions::new(64 << 20)).unwrap();
        let tables: Vec<u64> = (0..20).map(|_| c.new_id()).collect();
        let meta = |t: u64| [(CacheKey::new(t, 66_700_000), 350 << 10), (CacheKey::new(t, 67_050_000), 450 << 10)];
        let load = |k: CacheKey, charge: usize| drop(c.insert(k, tagged(k.cache_id), charge, Priority::High).unwrap());
        for &t in &tables {
            meta(t).into_iter().for_each(|(k, charge)| load(k, charge));
        }
        let data = c.new_id();
        let mut reloads = 0;
        for i in 0..50_000u64 {
            // A read: every table's filter, one table's index, a data block.
            for (n, &t) in tables.iter().enumerate() {
                for (k, charge) in meta(t).into_iter().take(if n as u64 == i % 20 { 2 } else { 1 }) {
                    if c.lookup(&k).is_none() {
                        reloads += 1;
                        load(k, charge);
                    }
                }
            }
            drop(c.insert(CacheKey::new(data, i * 4096), tagged(i), 4096, Priority::Low).unwrap());
        }
        assert_eq!(reloads, 0, "index and filter blocks were evicted and read again");
    }

    #[test]
    fn ids_are_unique() {
        let c = LruCache::new(0);
        let ids: std::collections::HashSet<u64> = (0..1000).map(|_| c.new_id()).collect();
        assert_eq!(ids.len(), 1000);
    }

    #[test]
    fn metadata_charge_is_added_per_entry() {
        let o = CacheOptions { num_shard_bits: 0, ..CacheOptions::new(1 << 20) };
        let c = LruCache::with_options(&o).unwrap();
        drop(c.insert(key(1), tagged(1), 100, Priority::Low).unwrap());
        assert_eq!(c.usage(), 100 + METADATA_CHARGE);
    }

    #[test]
    fn least_recently_used_goes_first() {
        for promote in [true, false] {
            let c = cache(300, 0.0, promote);
            for i in 0..3 {
                put(&c, i, 100, Priority::Low);
            }
            assert!(present(&c, 0));
            put(&c, 3, 100, Priority::Low);
            assert!(present(&c, 0), "recently used entry was evicted (promote {promote})");
            assert!(!present(&c, 1), "least recently used entry survived (promote {promote})");
            assert!(present(&c, 2) && present(&c, 3));
            assert_eq!(c.usage(), 300);
            // An entry larger than the shard is not cached and evicts nothing.
            let h = c.insert(key(4), tagged(4), 301, Priority::Low).unwrap();
            assert!(!h.is_cached());
            assert_eq!(tag_of(&h), 4);
            assert!(!present(&c, 4));
            assert_eq!(c.usage(), 300);
            c.check_consistency().unwrap();
        }
    }

    #[test]
    fn without_promotion_hits_earn_a_second_chance_in_list_order() {
        // Entries 0..4; 1 then 0 are used; three more inserts evict three.
        let survivors = |promote: bool| {
            let c = cache(400, 0.0, promote);
            for i in 0..4 {
                put(&c, i, 100, Priority::Low);
            }
            drop(c.lookup(&key(1)));
            drop(c.lookup(&key(0)));
            for i in 4..7 {
                put(&c, i, 100, Priority::Low);
            }
            c.check_consistency().unwrap();
            (0..7).filter(|&i| present(&c, i)).collect::<Vec<_>>()
        };
        // LRU: 0 was used last, so it outlives 1.
        assert_eq!(survivors(true), [0, 4, 5, 6]);
        // Second chance: hits did not reorder the list; at the tail 0 and 1
        // each got one more round, in list order, and 0 reached the tail first.
        assert_eq!(survivors(false), [1, 4, 5, 6]);
    }

    #[test]
    fn usage_stays_within_capacity_under_random_inserts() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        for (shard_bits, promote) in [(0, true), (2, true), (4, false)] {
            let capacity = 64 << 10;
            let o =
                CacheOptions { num_shard_bits: shard_bits, lru_promote_on_hit: promote, ..CacheOptions::new(capacity) };
            let c = LruCache::with_options(&o).unwrap();
            let max_charge = 4096;
            for i in 0..20_000u64 {
                let k = CacheKey::new(rng.gen_range(1..4), rng.gen_range(0..500) * 4096);
                match rng.gen_range(0..10) {
                    0 => c.erase(&k),
                    1..=3 => drop(c.lookup(&k)),
                    _ => {
                        let charge = rng.gen_range(1..=max_charge);
                        drop(c.insert(k, tagged(i), charge, Priority::Low).unwrap());
                    }
                }
                assert!(c.usage() <= capacity, "usage {} > capacity {capacity}", c.usage());
            }
            // Inserts alone fill every shard to within one entry of its share.
            for i in 0..2000u64 {
                drop(c.insert(CacheKey::new(5, i), tagged(i), rng.gen_range(1..=max_charge), Priority::Low).unwrap());
                assert!(c.usage() <= capacity);
            }
            let slack = (max_charge + METADATA_CHARGE) << shard_bits;
            assert!(c.usage() + slack >= capacity, "usage {} of {capacity}", c.usage());
            c.check_consistency().unwrap();
        }
    }

    #[test]
    fn referenced_entries_survive_eviction_pressure() {
        for promote in [true, false] {
            // No pool: the lookups below would send these to it.
            let c = cache(1000, 0.0, promote);
            let pinned: Vec<CacheHandle> =
                (0..3).map(|i| c.insert(key(i), tagged(i), 100, Priority::Low).unwrap()).collect();
            let looked_up = {
                put(&c, 3, 100, Priority::Low);
                c.lookup(&key(3)).unwrap()
            };
            assert_eq!(c.pinned_usage(), 400);
            for i in 10..200 {
                put(&c, i, 100, Priority::Low);
                assert!(c.usage() <= 1000);
            }
            for i in 0..4 {
                assert!(present(&c, i), "referenced entry {i} was evicted (promote {promote})");
            }
            c.check_consistency().unwrap();
            drop(pinned);
            drop(looked_up);
            assert_eq!(c.pinned_usage(), 0);
            // Released, they are ordinary entries again and age out.
            for i in 200..220 {
                put(&c, i, 100, Priority::Low);
            }
            assert!((0..4).all(|i| !present(&c, i)));
            c.check_consistency().unwrap();
        }
    }

    #[test]
    fn high_priority_entries_survive_a_flood_of_low_priority_inserts() {
        // Pool of 300 bytes: three 100-byte high-priority entries fit in it.
        let flood = |ratio: f64, promote: bool| {
            let c = cache(1000, ratio, promote);
            for i in 0..3 {
                put(&c, i, 100, Priority::High);
            }
            for i in 100..400 {
                put(&c, i, 100, Priority::Low);
            }
            c.check_consistency().unwrap();
            (0..3).filter(|&i| present(&c, i)).count()
        };
        for promote in [true, false] {
            assert_eq!(flood(0.3, promote), 3, "the pool did not protect high-priority entries");
            // Without a pool they are ordinary LRU entries, flushed by the scan.
            assert_eq!(flood(0.0, promote), 0);
        }
        // The pool protects only what fits in it: of five high-priority
        // entries the oldest two are demoted and flushed.
        let c = cache(1000, 0.3, true);
        for i in 0..5 {
            put(&c, i, 100, Priority::High);
        }
        for i in 100..400 {
            put(&c, i, 100, Priority::Low);
        }
        assert_eq!((0..5).map(|i| present(&c, i)).collect::<Vec<_>>(), [false, false, true, true, true]);
    }

    #[test]
    fn data_blocks_hit_again_join_the_high_priority_pool() {
        let c = cache(1000, 0.5, true);
        put(&c, 0, 100, Priority::Low);
        assert!(present(&c, 0));
        for i in 100..400 {
            put(&c, i, 100, Priority::Low);
        }
        assert!(present(&c, 0), "a block hit before the scan was flushed by it");
    }

    #[test]
    fn lookup_with_holds_the_entry_until_the_call_returns() {
        for promote in [true, false] {
            let c = cache(1000, 0.0, promote);
            let mut calls = 0;
            assert!(!c.lookup_with(&key(1), &mut |_| calls += 1), "a miss is a hit");
            assert_eq!(calls, 0, "a miss called back");
            put(&c, 1, 100, Priority::Low);
            // Inside the call the entry is referenced: a flood of inserts (ten
            // times the capacity) cannot evict it, an erase only hides it, and
            // its value stays the one found.
            let mut seen = None;
            assert!(c.lookup_with(&key(1), &mut |v| {
                assert_eq!(c.pinned_usage(), 100, "the call holds no reference");
                for i in 100..200 {
                    put(&c, i, 100, Priority::Low);
                }
                assert!(present(&c, 1), "promote={promote}: the entry held by lookup_with was evicted");
                c.erase(&key(1));
                assert!(!present(&c, 1));
                put(&c, 1, 50, Priority::Low);
                seen = Some(tag_of(v));
            }));
            assert_eq!(seen, Some(1));
            // Released when the call returns: the erased entry is freed, its
            // replacement stays.
            assert_eq!(c.pinned_usage(), 0, "promote={promote}: the reference outlived the call");
            // Eight of the flood (one made room for the replacement) and the
            // replacement: the erased 100 bytes are gone.
            assert_eq!(c.usage(), 8 * 100 + 50, "promote={promote}: the erased entry was not freed");
            assert!(present(&c, 1));
            c.check_consistency().unwrap();
        }
        let empty = cache(0, 0.5, true);
        assert!(!empty.lookup_with(&key(1), &mut |_| unreachable!()));
    }

    #[test]
    fn lookup_with_releases_its_reference_when_the_call_panics() {
        // No high-priority pool, so the hit entry is not shielded by it.
        let c = cache(1000, 0.0, true);
        put(&c, 1, 100, Priority::Low);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            c.lookup_with(&key(1), &mut |_| panic!("inside the call"));
        }));
        assert!(r.is_err());
        assert_eq!(c.pinned_usage(), 0, "a panicking call left its entry referenced");
        // Unreferenced again, so it can be evicted.
        for i in 100..200 {
            put(&c, i, 100, Priority::Low);
        }
        assert!(!present(&c, 1));
        c.check_consistency().unwrap();
    }

    #[test]
    fn lookup_with_returns_values_of_any_type() {
        let c = cache(1 << 20, 0.5, true);
        drop(c.insert(key(1), CacheValue::new(String::from("a filter")), 100, Priority::High).unwrap());
        let mut seen = None;
        assert!(c.lookup_with(&key(1), &mut |v| seen = v.get::<String>().cloned()));
        assert_eq!(seen.as_deref(), Some("a filter"));
        assert_eq!(c.pinned_usage(), 0);
        c.check_consistency().unwrap();
    }

    #[test]
    fn erased_while_referenced_entries_are_freed_on_last_release() {
        let c = cache(1000, 0.5, true);
        let h1 = c.insert(key(1), tagged(1), 300, Priority::Low).unwrap();
        let h2 = c.lookup(&key(1)).unwrap();
        c.erase(&key(1));
        assert!(!present(&c, 1), "an erased entry was found");
        assert_eq!(c.usage(), 300, "the charge must stay until the last release");
        assert_eq!(c.pinned_usage(), 300);
        drop(h1);
        assert_eq!(c.usage(), 300);
        assert_eq!(tag_of(&h2), 1, "the value must outlive the erase");
        drop(h2);
        assert_eq!(c.usage(), 0, "the last release did not free the entry");
        assert_eq!(c.pinned_usage(), 0);
        // Replacing a referenced entry works the same way.
        let old = c.insert(key(2), tagged(2), 200, Priority::Low).unwrap();
        put(&c, 2, 100, Priority::Low);
        assert_eq!(tag_of(&c.lookup(&key(2)).unwrap()), 2);
        assert_eq!(c.usage(), 300);
        drop(old);
        assert_eq!(c.usage(), 100);
        c.check_consistency().unwrap();
    }

    #[test]
    fn strict_capacity_limit_refuses_inserts_when_everything_is_referenced() {
        let mut o = CacheOptions::new(300);
        o.num_shard_bits = 0;
        o.metadata_charge = false;
        o.strict_capacity_limit = true;
        let c = LruCache::with_options(&o).unwrap();
        let held: Vec<_> = (0..3).map(|i| c.insert(key(i), tagged(i), 100, Priority::Low).unwrap()).collect();
        let e = c.insert(key(3), tagged(3), 100, Priority::Low).unwrap_err();
        assert!(matches!(e, Error::Busy(_)), "{e}");
        assert!(e.to_string().contains("strict_capacity_limit"), "{e}");
        assert_eq!(c.usage(), 300);
        assert!(c.insert(key(4), tagged(4), 301, Priority::Low).is_err(), "an oversized entry was accepted");
        drop(held);
        drop(c.insert(key(3), tagged(3), 100, Priority::Low).unwrap());
        assert_eq!(c.usage(), 300);

        // Without the limit the insert goes over capacity, and the entry is
        // dropped when released since the cache is still over.
        o.strict_capacity_limit = false;
        let c = LruCache::with_options(&o).unwrap();
        let held: Vec<_> = (0..3).map(|i| c.insert(key(i), tagged(i), 100, Priority::Low).unwrap()).collect();
        let over = c.insert(key(3), tagged(3), 100, Priority::Low).unwrap();
        assert_eq!(c.usage(), 400);
        drop(over);
        assert_eq!(c.usage(), 300);
        assert!(!present(&c, 3));
        drop(held);
        c.check_consistency().unwrap();
    }

    #[test]
    fn dropping_the_cache_with_handles_out_frees_on_release() {
        let c = cache(1000, 0.5, true);
        let h = c.insert(key(1), tagged(1), 100, Priority::Low).unwrap();
        put(&c, 2, 100, Priority::Low);
        let shard = Arc::clone(&c.shards[0]);
        drop(c);
        assert_eq!(shard.state.lock().usage, 100);
        assert_eq!(tag_of(&h), 1);
        drop(h);
        assert_eq!(shard.state.lock().usage, 0);
        assert_eq!(Arc::strong_count(&shard), 1, "an entry still points at the shard");
    }
}
