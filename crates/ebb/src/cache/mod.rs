//! The block cache: decoded data, index and filter blocks shared between the
//! readers of all tables (RocksDB `cache/`; seed 001 dissects its LRU).
//!
//! Contract:
//! 1. A [`BlockCache`] maps a [`CacheKey`] (the table's cache id and the
//!    block's file offset) to a [`CacheValue`]. Every opened table takes a
//!    fresh id from [`BlockCache::new_id`], so a file number reused after
//!    deletion, or the same file opened twice, never aliases old blocks.
//! 2. [`BlockCache::lookup`] and [`BlockCache::insert`] return a
//!    [`CacheHandle`]: a reference that keeps the entry alive and its charge
//!    counted until the handle is dropped. An entry has one of the three
//!    states of RocksDB's `LRUHandle` (seed 001): referenced and in the cache;
//!    unreferenced and in the cache (evictable); referenced but erased or
//!    replaced (no longer found, freed, and its charge released, when the last
//!    handle goes). A referenced entry is never evicted.
//! 3. Entries carry a charge in bytes, plus a fixed per-entry metadata charge
//!    when [`CacheOptions::metadata_charge`] is set. Each shard keeps its
//!    usage at or below its share of the capacity by evicting unreferenced
//!    entries. When only referenced entries are left, an insert either fails
//!    with [`Error::Busy`] (`strict_capacity_limit`, RocksDB's
//!    `Status::MemoryLimit`) or goes over the limit until those handles are
//!    released. An entry larger than a whole shard is never cached (non-strict)
//!    or refused (strict).
//! 4. Capacity 0 disables caching: lookups miss without taking a lock and
//!    inserts hand back an uncached handle that owns the value.
//! 5. Implementations are `Send + Sync`; [`LruCache`] locks one shard per
//!    operation (twice per use: lookup and release), [`ClockCache`] looks up
//!    and releases with atomics only and locks a shard to insert or erase.
//!
//! Counters per block kind ([`CacheStats`]) live in the cache so databases
//! sharing it see the same figures; the table reader records them, as
//! RocksDB's `BlockBasedTable` records `BLOCK_CACHE_{DATA,INDEX,FILTER}_*`.

mod clock;
mod lru;
mod secondary;
mod stats;

pub use clock::ClockCache;
pub use lru::LruCache;
pub use secondary::{CompressedSecondaryCache, SecondaryCacheCounters};
pub use stats::{BlockKind, BlockKindCounters, CacheCounters, CacheStats};

use std::any::Any;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use crate::error::{Error, Result};

/// Identifies one block of one opened table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

    /// A well-mixed 64-bit hash: the top bits pick the shard, the low bits the
    /// slot (splitmix64's finaliser over both fields).
    pub fn hash64(&self) -> u64 {
        let mut h = self.cache_id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ self.block_offset;
        h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ (h >> 31)
    }
}

impl Hash for CacheKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash64());
    }
}

/// What the cache holds for one key: any immutable value its user shares
/// between threads (the table reader's decoded blocks and bloom filters).
/// The cache never looks inside; a user takes back the type it stored
/// ([`CacheValue::get`], [`CacheValue::get_arc`]), as RocksDB's cache holds
/// an opaque `ObjectPtr` beside its `CacheItemHelper`. So the cache sits
/// below the table format in the layers and knows nothing of it.
#[derive(Clone)]
pub struct CacheValue(Arc<dyn Any + Send + Sync>);

/// How a cache's user tells a [`CompressedSecondaryCache`] under it which
/// bytes to keep of a value the cache evicts (RocksDB's
/// `CacheItemHelper::saveto_cb`): `None` for a value it does not keep. The
/// cache never looks inside its values; the table reader, which knows what
/// it stored, gives the function ([`BlockCache::set_spill`]).
pub type SpillFn = fn(&(dyn Any + Send + Sync)) -> Option<&[u8]>;

impl CacheValue {
    /// A value owning `value`.
    pub fn new<T: Any + Send + Sync>(value: T) -> Self {
        CacheValue(Arc::new(value))
    }

    /// A value sharing `value` with its other owners.
    pub fn from_arc<T: Any + Send + Sync>(value: Arc<T>) -> Self {
        CacheValue(value)
    }

    /// The value, if it is a `T`.
    pub fn get<T: Any>(&self) -> Option<&T> {
        (*self.0).downcast_ref::<T>()
    }

    /// Another owner of the value, if it is a `T`.
    pub fn get_arc<T: Any + Send + Sync>(&self) -> Option<Arc<T>> {
        Arc::clone(&self.0).downcast::<T>().ok()
    }

    /// The value's address: the same for every clone (the LRU keeps one
    /// beside its list links; see `lru.rs`).
    pub(crate) fn as_ptr(&self) -> *const (dyn Any + Send + Sync) {
        Arc::as_ptr(&self.0)
    }
}

impl std::fmt::Debug for CacheValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CacheValue").finish_non_exhaustive()
    }
}

/// Eviction priority of an entry (RocksDB `Cache::Priority`, without BOTTOM).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Priority {
    /// Index and filter blocks when `cache_index_and_filter_blocks_with_high_priority`
    /// is set: inserted at the head of the LRU's high-priority pool, or with
    /// the longest clock countdown.
    High,
    /// Data blocks: inserted at the LRU midpoint (the head of the low-priority
    /// pool), so a scan cannot flush the high-priority pool.
    #[default]
    Low,
}

/// A reference to a cached value. While it lives the entry is not evicted and
/// its charge counts towards [`BlockCache::usage`] and
/// [`BlockCache::pinned_usage`]; dropping it releases the reference (and frees
/// an entry erased meanwhile).
pub struct CacheHandle {
    inner: HandleInner,
}

enum HandleInner {
    Lru(lru::LruHandle),
    Clock(Arc<clock::ClockEntry>),
    ClockSlot(clock::ClockRef),
    Uncached(CacheValue),
}

impl CacheHandle {
    /// A handle that owns `value` without any cache: what a disabled cache
    /// (or one refusing an oversized entry) hands back from `insert`.
    pub fn uncached(value: CacheValue) -> Self {
        CacheHandle { inner: HandleInner::Uncached(value) }
    }

    /// The cached value.
    pub fn value(&self) -> &CacheValue {
        match &self.inner {
            HandleInner::Lru(h) => h.value(),
            HandleInner::Clock(e) => e.value(),
            HandleInner::ClockSlot(r) => r.value(),
            HandleInner::Uncached(v) => v,
        }
    }

    /// False for a handle that owns its value outside any cache.
    pub fn is_cached(&self) -> bool {
        !matches!(self.inner, HandleInner::Uncached(_))
    }
}

impl std::ops::Deref for CacheHandle {
    type Target = CacheValue;
    fn deref(&self) -> &CacheValue {
        self.value()
    }
}

impl std::fmt::Debug for CacheHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.inner {
            HandleInner::Lru(_) => "lru",
            HandleInner::Clock(_) | HandleInner::ClockSlot(_) => "clock",
            HandleInner::Uncached(_) => "uncached",
        };
        f.debug_struct("CacheHandle").field("cache", &kind).finish_non_exhaustive()
    }
}

/// A cache of decoded blocks, charged in bytes. See the module contract.
pub trait BlockCache: Send + Sync {
    /// A reference to the entry for `key`, marking it recently used.
    fn lookup(&self, key: &CacheKey) -> Option<CacheHandle>;
    /// [`BlockCache::lookup`] for a caller that needs the value only for a
    /// moment: on a hit, calls `f` with the value, which stays referenced
    /// until `f` returns, and returns true. The clock cache holds its entry
    /// this way without creating a handle (one atomic add and one subtract on
    /// the slot, nothing else shared).
    fn lookup_with(&self, key: &CacheKey, f: &mut dyn FnMut(&CacheValue)) -> bool {
        match self.lookup(key) {
            Some(h) => {
                f(h.value());
                true
            }
            None => false,
        }
    }
    /// Caches `value` under `key` with `charge` bytes (plus the metadata
    /// charge), replacing any entry already there (a replaced entry still
    /// referenced lives on, unfindable, until its last handle goes), and
    /// returns a reference to it. Fails with [`Error::Busy`] only under
    /// `strict_capacity_limit`, when every evictable entry is gone and the new
    /// one still does not fit.
    fn insert(&self, key: CacheKey, value: CacheValue, charge: usize, priority: Priority) -> Result<CacheHandle>;
    /// Removes the entry for `key`, if any. A referenced entry is freed when
    /// its last handle is dropped.
    fn erase(&self, key: &CacheKey);
    /// Bytes charged by the entries alive now, referenced erased ones included
    /// (property `ebb.block-cache-usage`).
    fn usage(&self) -> usize;
    /// Bytes charged by referenced entries (property `ebb.block-cache-pinned-usage`).
    fn pinned_usage(&self) -> usize;
    /// The most bytes the cache holds (property `ebb.block-cache-capacity`).
    fn capacity(&self) -> usize;
    /// A cache id no earlier call returned.
    fn new_id(&self) -> u64;
    /// Counters per block kind, recorded by the table reader.
    fn stats(&self) -> &CacheStats;
    /// The implementation's name as RocksDB's text form spells the cache type
    /// (`LRUCache`, `HyperClockCache`).
    fn name(&self) -> &'static str;
    /// The compressed secondary cache under this one, if any: where a read
    /// that misses looks before the file.
    fn secondary(&self) -> Option<&CompressedSecondaryCache> {
        None
    }
    /// How the secondary cache, if any, takes the bytes of an evicted value
    /// (the first call sets it; later ones change nothing).
    fn set_spill(&self, spill: SpillFn) {
        let _ = spill;
    }
    /// Lookups that found a block, and lookups that did not, over all kinds.
    fn hits_and_misses(&self) -> (u64, u64) {
        let total = self.stats().snapshot().total();
        (total.hits, total.misses)
    }
}

/// Which implementation a database builds for its block cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheType {
    /// [`LruCache`]: sharded LRU with a high-priority pool (RocksDB `kLRUCache`).
    #[default]
    Lru,
    /// [`ClockCache`]: lock-free lookups, clock eviction (RocksDB `kHyperClockCache`).
    Clock,
}

impl CacheType {
    /// The text-form name (RocksDB's `CacheType` enumerator names).
    pub fn name(self) -> &'static str {
        match self {
            CacheType::Lru => "kLRUCache",
            CacheType::Clock => "kHyperClockCache",
        }
    }

    /// Parses `kLRUCache`/`lru_cache`/`lru` or `kHyperClockCache`/`hyper_clock_cache`/`clock`.
    pub fn parse(s: &str) -> Option<CacheType> {
        match s.to_ascii_lowercase().as_str() {
            "klrucache" | "lru_cache" | "lru" => Some(CacheType::Lru),
            "khyperclockcache" | "hyper_clock_cache" | "clock" => Some(CacheType::Clock),
            _ => None,
        }
    }
}

/// Most shard bits accepted: RocksDB refuses 20 and more ("the cache cannot be
/// sharded into too many fine pieces", `NewLRUCache`).
pub const MAX_NUM_SHARD_BITS: i32 = 19;

/// How to build a cache (RocksDB `LRUCacheOptions` / `HyperClockCacheOptions`).
#[derive(Debug, Clone, PartialEq)]
pub struct CacheOptions {
    /// Bytes the cache holds; 0 disables caching.
    pub capacity: usize,
    /// The cache is split into `2^num_shard_bits` shards, each with its own
    /// lock and its share of the capacity. -1 picks RocksDB's rule: shards
    /// of at least a minimum size, at most 64 of them; the minimum is 4 MiB
    /// for the LRU (RocksDB's is 512 KiB: docs/cache.md, "Shards and large
    /// blocks") and 32 MiB for the clock cache (RocksDB's).
    pub num_shard_bits: i32,
    /// Refuse inserts that do not fit once every evictable entry is gone,
    /// instead of going over capacity. RocksDB default false.
    pub strict_capacity_limit: bool,
    /// LRU only: share of each shard reserved for high-priority entries (and
    /// blocks hit again), in `[0, 1]`. RocksDB default 0.5.
    pub high_pri_pool_ratio: f64,
    /// LRU only: move an entry to the head of its list on every use (RocksDB's
    /// behaviour, default true). When false a hit only marks the entry, and
    /// eviction gives a marked entry at the tail a second chance instead: a
    /// lookup and a release then touch only the entry itself under the lock,
    /// never the list (seed 001's question).
    pub lru_promote_on_hit: bool,
    /// Add a fixed per-entry charge for the cache's own bookkeeping (RocksDB
    /// `kFullChargeCacheMetadata`, its default). Default true.
    pub metadata_charge: bool,
    /// Clock only: expected charge of an entry, which sizes the open-addressing
    /// table (RocksDB `estimated_entry_charge`). A table holds at most
    /// `capacity / estimated_entry_charge / 0.7 * 0.84` entries, so a
    /// too-large estimate caps the entry count below the byte capacity.
    pub estimated_entry_charge: usize,
    /// Bytes of a [`CompressedSecondaryCache`] under the cache, LZ4, for
    /// the blocks it evicts; 0 (default) none.
    pub compressed_secondary_cache_size: usize,
}

impl CacheOptions {
    /// Defaults for a cache of `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        CacheOptions {
            capacity,
            num_shard_bits: -1,
            strict_capacity_limit: false,
            high_pri_pool_ratio: 0.5,
            lru_promote_on_hit: true,
            metadata_charge: true,
            estimated_entry_charge: 8 << 10,
            compressed_secondary_cache_size: 0,
        }
    }

    /// Refuses values no cache can be built with; the error names the option
    /// as [`Options`] spells it.
    pub fn validate(&self) -> Result<()> {
        if self.num_shard_bits < -1 || self.num_shard_bits > MAX_NUM_SHARD_BITS {
            return Err(Error::invalid(format!(
                "option block_cache_num_shard_bits: {} is out of range (-1 for automatic, or 0 to {MAX_NUM_SHARD_BITS})",
                self.num_shard_bits
            )));
        }
        if !(0.0..=1.0).contains(&self.high_pri_pool_ratio) {
            return Err(Error::invalid(format!(
                "option block_cache_high_pri_pool_ratio: {} is not between 0 and 1",
                self.high_pri_pool_ratio
            )));
        }
        if self.estimated_entry_charge == 0 {
            return Err(Error::invalid("option estimated_entry_charge: must be positive"));
        }
        Ok(())
    }

    /// The shard bits to use: the option, or RocksDB's `GetDefaultCacheShardBits`
    /// rule for shards of at least `min_shard_size` bytes, at most 2^6 shards.
    fn shard_bits(&self, min_shard_size: usize) -> u32 {
        if let Ok(bits) = u32::try_from(self.num_shard_bits) {
            return bits;
        }
        let mut bits = 0;
        let mut shards = self.capacity / min_shard_size;
        while shards > 1 && bits < 6 {
            shards >>= 1;
            bits += 1;
        }
        bits
    }
}

/// Builds a cache of `cache_type`.
pub fn new_cache(cache_type: CacheType, options: &CacheOptions) -> Result<Arc<dyn BlockCache>> {
    Ok(match cache_type {
        CacheType::Lru => Arc::new(LruCache::with_options(options)?),
        CacheType::Clock => Arc::new(ClockCache::with_options(options)?),
    })
}

/// The shard of a key with hash `hash` among `2^bits` shards: the top bits.
fn shard_index(hash: u64, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        (hash >> (64 - bits)) as usize
    }
}

/// Capacity of shard `i` of `n`: an even split, the remainder to the first shards.
fn shard_capacity(capacity: usize, n: usize, i: usize) -> usize {
    capacity / n + usize::from(i < capacity % n)
}

/// The error of an insert refused under `strict_capacity_limit`.
fn strict_limit_error(charge: usize, capacity: usize) -> Error {
    Error::Busy(format!(
        "block cache full: an entry of {charge} bytes does not fit in a shard of {capacity} bytes \
         whose other entries are all in use (strict_capacity_limit is set)"
    ))
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Values that carry a tag, to check that a lookup returns what was inserted.

    use super::*;

    /// A value whose content is `tag`.
    pub fn tagged(tag: u64) -> CacheValue {
        CacheValue::new(tag)
    }

    /// The tag of a value made by [`tagged`].
    pub fn tag_of(v: &CacheValue) -> u64 {
        *v.get::<u64>().expect("a tagged value")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use rand::{Rng, SeedableRng};

    use super::testutil::{tag_of, tagged};
    use super::*;

    fn options(capacity: usize, bits: i32) -> CacheOptions {
        CacheOptions {
            num_shard_bits: bits,
            metadata_charge: false,
            estimated_entry_charge: 4096,
            ..CacheOptions::new(capacity)
        }
    }

    fn both(o: &CacheOptions) -> Vec<Arc<dyn BlockCache>> {
        vec![new_cache(CacheType::Lru, o).unwrap(), new_cache(CacheType::Clock, o).unwrap()]
    }

    #[test]
    fn num_shard_bits_out_of_range_is_refused_with_its_name() {
        for cache_type in [CacheType::Lru, CacheType::Clock] {
            for bits in [-2, 20, 64] {
                let e = new_cache(cache_type, &options(1 << 20, bits)).err().expect("accepted");
                assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
                assert!(e.to_string().contains("block_cache_num_shard_bits"), "{e}");
            }
            for bits in [-1, 0, 19] {
                new_cache(cache_type, &options(1 << 20, bits)).unwrap();
            }
            let mut o = options(1 << 20, 0);
            o.high_pri_pool_ratio = 1.5;
            let e = new_cache(cache_type, &o).err().expect("accepted");
            assert!(e.to_string().contains("block_cache_high_pri_pool_ratio"), "{e}");
        }
    }

    #[test]
    fn default_shard_bits_follow_rocksdbs_rule() {
        let bits = |capacity: usize, min: usize| CacheOptions::new(capacity).shard_bits(min);
        assert_eq!(bits(0, 512 << 10), 0);
        assert_eq!(bits(1 << 20, 512 << 10), 1);
        assert_eq!(bits((1 << 20) - 1, 512 << 10), 0);
        assert_eq!(bits(8 << 20, 512 << 10), 4);
        assert_eq!(bits(32 << 20, 512 << 10), 6);
        assert_eq!(bits(1 << 40, 512 << 10), 6);
        assert_eq!(bits(64 << 20, 32 << 20), 1);
        // The LRU's shards: at least 4 MiB each (RocksDB's are 512 KiB).
        assert_eq!(LruCache::new(8 << 20).num_shards(), 2);
        assert_eq!(LruCache::new(64 << 20).num_shards(), 16);
        assert_eq!(LruCache::new(256 << 20).num_shards(), 64);
        assert_eq!(LruCache::new(1 << 30).num_shards(), 64);
        assert_eq!(ClockCache::with_options(&CacheOptions::new(256 << 20)).unwrap().num_shards(), 8);
    }

    #[test]
    fn capacity_zero_disables_both_kinds() {
        for cache in both(&options(0, -1)) {
            let k = CacheKey::new(cache.new_id(), 0);
            let h = cache.insert(k, tagged(1), 100, Priority::High).unwrap();
            assert!(!h.is_cached());
            assert_eq!(tag_of(&h), 1);
            assert!(cache.lookup(&k).is_none());
            assert_eq!((cache.usage(), cache.pinned_usage(), cache.capacity()), (0, 0, 0));
        }
    }

    #[test]
    fn cache_type_names_parse() {
        for t in [CacheType::Lru, CacheType::Clock] {
            assert_eq!(CacheType::parse(t.name()), Some(t));
        }
        assert_eq!(CacheType::parse("hyper_clock_cache"), Some(CacheType::Clock));
        assert_eq!(CacheType::parse("fifo"), None);
    }

    /// Tags pack (thread, key, version) so any value found can be checked.
    fn tag(thread: u64, key: u64, version: u64) -> u64 {
        (thread << 48) | (key << 32) | version
    }

    /// Threads insert, erase, look up and hold handles; each owns its keys
    /// (cache id = thread + 1) and checks them against a model: a lookup finds
    /// nothing or exactly the version last inserted, never an erased one.
    /// Lookups of other threads' keys must return a value of that key. Once
    /// quiet, the cache's own bookkeeping must add up.
    fn stress(cache: Arc<dyn BlockCache>, check: impl Fn() -> std::result::Result<(), String>) {
        const THREADS: u64 = 4;
        const KEYS: u64 = 64;
        // Miri checks the clock's unsafe cells for data races; it runs slowly.
        const OPS: usize = if cfg!(miri) { 150 } else { 6000 };
        let threads: Vec<_> = (0..THREADS)
            .map(|t| {
                let cache = Arc::clone(&cache);
                std::thread::spawn(move || {
                    let mut rng = rand::rngs::StdRng::seed_from_u64(t);
                    let mut model: HashMap<u64, u64> = HashMap::new();
                    let mut held: Vec<(u64, u64, CacheHandle)> = Vec::new();
                    let mut version = 0;
                    for _ in 0..OPS {
                        let key = rng.gen_range(0..KEYS);
                        let ck = CacheKey::new(t + 1, key);
                        match rng.gen_range(0..100) {
                            0..=29 => {
                                version += 1;
                                let prio = if rng.gen_bool(0.2) { Priority::High } else { Priority::Low };
                                let charge = rng.gen_range(500..3000);
                                let h = cache.insert(ck, tagged(tag(t, key, version)), charge, prio).unwrap();
                                model.insert(key, version);
                                if rng.gen_bool(0.3) {
                                    held.push((key, version, h));
                                }
                            }
                            30..=39 => {
                                cache.erase(&ck);
                                model.remove(&key);
                            }
                            40..=59 => {
                                let want = model.get(&key).map(|v| tag(t, key, *v));
                                let mut got = None;
                                let hit = cache.lookup_with(&ck, &mut |v| got = Some(tag_of(v)));
                                assert_eq!(hit, got.is_some(), "lookup_with's answer and its call disagree");
                                if let Some(got) = got {
                                    assert_eq!(
                                        Some(got),
                                        want,
                                        "thread {t} key {key}: lookup_with found a stale version"
                                    );
                                }
                            }
                            60..=79 => {
                                if let Some(h) = cache.lookup(&ck) {
                                    let got = tag_of(&h);
                                    assert_eq!(
                                        Some(&got),
                                        model.get(&key).map(|v| tag(t, key, *v)).as_ref(),
                                        "thread {t} key {key}: found a version the model does not have"
                                    );
                                    if rng.gen_bool(0.3) {
                                        held.push((key, got & 0xffff_ffff, h));
                                    }
                                }
                            }
                            80..=89 => {
                                // Other threads' keys, which their owners replace
                                // and erase meanwhile: a reader inside the slot
                                // makes them wait.
                                let other = rng.gen_range(0..THREADS);
                                let ok = CacheKey::new(other + 1, key);
                                if rng.gen_bool(0.5) {
                                    if let Some(h) = cache.lookup(&ok) {
                                        assert_eq!(tag_of(&h) >> 32, (other << 16) | key, "foreign key mixed up");
                                    }
                                } else {
                                    cache.lookup_with(&ok, &mut |v| {
                                        assert_eq!(tag_of(v) >> 32, (other << 16) | key, "foreign key mixed up");
                                    });
                                }
                            }
                            _ => {
                                if !held.is_empty() {
                                    let (key, version, h) = held.swap_remove(rng.gen_range(0..held.len()));
                                    assert_eq!(tag_of(&h), tag(t, key, version), "a held value changed");
                                }
                            }
                        }
                        if held.len() > 8 {
                            held.remove(0);
                        }
                    }
                    for (key, version, h) in held {
                        assert_eq!(tag_of(&h), tag(t, key, version), "a held value changed");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(cache.pinned_usage(), 0, "no handle is held any more");
        assert!(cache.usage() <= cache.capacity(), "usage {} > capacity {}", cache.usage(), cache.capacity());
        check().unwrap();
        for t in 0..THREADS {
            for key in 0..KEYS {
                cache.erase(&CacheKey::new(t + 1, key));
            }
        }
        assert_eq!(cache.usage(), 0, "erasing every key left charge behind");
        check().unwrap();
    }

    #[test]
    fn concurrent_stress_against_a_model_lru() {
        for promote in [true, false] {
            let o = CacheOptions { lru_promote_on_hit: promote, ..options(48 << 10, 1) };
            let cache = Arc::new(LruCache::with_options(&o).unwrap());
            let c2 = Arc::clone(&cache);
            stress(cache, move || c2.check_consistency());
        }
    }

    #[test]
    fn concurrent_stress_against_a_model_clock() {
        let o = CacheOptions { estimated_entry_charge: 1500, ..options(48 << 10, 1) };
        let cache = Arc::new(ClockCache::with_options(&o).unwrap());
        let c2 = Arc::clone(&cache);
        stress(cache, move || c2.check_consistency());
    }
}
