//! One memtable budget shared by column families and by databases
//! (RocksDB's `WriteBufferManager`): docs/column_families.md, "One
//! memtable budget for many families".
//!
//! Each database that holds the manager (`Options::write_buffer_manager`)
//! reports its memtables' memory, mutable and in all, on its write path and
//! after each flush; the manager sums the reports. Its rules are
//! RocksDB's:
//! - a flush is due ([`WriteBufferManager::should_flush`]) when the mutable
//!   memtables hold more than 7/8 of the budget, or when all memtables hold
//!   the budget and the mutable ones at least half of it: the writer's
//!   database then switches the mutable memtable of its family holding the
//!   most, and flushes it;
//! - with `allow_stall`, writes wait while all memtables hold the whole
//!   budget, until flushes bring them under it;
//! - with a block cache given, the memory is also charged to the cache (in
//!   1 MiB entries held pinned), so memtables and cached blocks share one
//!   limit.
//!
//! Invariants: `usage` holds one entry per database that reported and has
//! not left; the totals are the sums of its entries. The cache holds
//! `reserved.len()` MiB entries, the memory reported rounded up to whole
//! MiB.
//!
//! Thread-safety: one mutex over the reports and the cache reservation; a
//! condition variable wakes stalled writers when the memory reported
//! drops.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use crate::cache::{BlockCache, CacheHandle, CacheKey, CacheValue, Priority};

/// The unit of the cache reservation.
const RESERVATION_UNIT: u64 = 1 << 20;

#[derive(Default)]
struct State {
    /// Per database instance: (mutable bytes, all memtable bytes).
    usage: HashMap<u64, (u64, u64)>,
    /// The pinned cache entries standing for the memory.
    reserved: Vec<CacheHandle>,
    /// The cache keys' id, taken from the cache at the first reservation.
    cache_id: Option<u64>,
}

/// A memtable budget shared by families and databases. Share it by giving
/// one `Arc` to several databases' options.
pub struct WriteBufferManager {
    buffer_size: AtomicU64,
    allow_stall: bool,
    cache: Option<Arc<dyn BlockCache>>,
    mutable: AtomicU64,
    total: AtomicU64,
    state: Mutex<State>,
    freed: Condvar,
}

impl std::fmt::Debug for WriteBufferManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBufferManager")
            .field("buffer_size", &self.buffer_size())
            .field("memory_usage", &self.memory_usage())
            .field("allow_stall", &self.allow_stall)
            .finish_non_exhaustive()
    }
}

impl WriteBufferManager {
    /// A budget of `buffer_size` bytes for every memtable of the databases
    /// that share it (0: no limit, memory only counted); with
    /// `allow_stall`, writes wait while the memtables hold it all.
    pub fn new(buffer_size: usize, allow_stall: bool) -> Arc<WriteBufferManager> {
        Self::build(buffer_size, allow_stall, None)
    }

    /// [`WriteBufferManager::new`], the memory also charged to `cache`
    /// (RocksDB's `cost_write_buffer_to_cache`): pinned entries of 1 MiB
    /// stand for it, so blocks are evicted as memtables grow.
    pub fn with_cache(buffer_size: usize, allow_stall: bool, cache: Arc<dyn BlockCache>) -> Arc<WriteBufferManager> {
        Self::build(buffer_size, allow_stall, Some(cache))
    }

    fn build(buffer_size: usize, allow_stall: bool, cache: Option<Arc<dyn BlockCache>>) -> Arc<WriteBufferManager> {
        Arc::new(WriteBufferManager {
            buffer_size: AtomicU64::new(buffer_size as u64),
            allow_stall,
            cache,
            mutable: AtomicU64::new(0),
            total: AtomicU64::new(0),
            state: Mutex::default(),
            freed: Condvar::new(),
        })
    }

    /// The budget in bytes (0: none).
    pub fn buffer_size(&self) -> usize {
        self.buffer_size.load(Ordering::Relaxed) as usize
    }

    /// Changes the budget (RocksDB's `SetBufferSize`).
    pub fn set_buffer_size(&self, buffer_size: usize) {
        self.buffer_size.store(buffer_size as u64, Ordering::Relaxed);
        self.freed.notify_all();
    }

    /// Whether writes stall at the budget.
    pub fn allow_stall(&self) -> bool {
        self.allow_stall
    }

    /// Bytes in every memtable of the databases that share it.
    pub fn memory_usage(&self) -> usize {
        self.total.load(Ordering::Relaxed) as usize
    }

    /// Bytes in their mutable memtables.
    pub fn mutable_memtable_memory_usage(&self) -> usize {
        self.mutable.load(Ordering::Relaxed) as usize
    }

    /// Whether a flush is due (the module's rule).
    pub fn should_flush(&self) -> bool {
        let size = self.buffer_size.load(Ordering::Relaxed);
        if size == 0 {
            return false;
        }
        let mutable = self.mutable.load(Ordering::Relaxed);
        let total = self.total.load(Ordering::Relaxed);
        mutable > size / 8 * 7 || (total >= size && mutable >= size / 2)
    }

    /// Whether writes wait now (`allow_stall` and the budget is full).
    pub fn should_stall(&self) -> bool {
        let size = self.buffer_size.load(Ordering::Relaxed);
        self.allow_stall && size > 0 && self.total.load(Ordering::Relaxed) >= size
    }

    /// Database `db`'s memtables now hold `mutable` bytes in their mutable
    /// memtables and `total` in all.
    pub(crate) fn report(&self, db: u64, mutable: u64, total: u64) {
        let mut st = self.state.lock();
        let before = st.usage.insert(db, (mutable, total)).unwrap_or((0, 0));
        self.apply(&mut st, total < before.1);
    }

    /// Database `db` closed: its memtables count no more.
    pub(crate) fn leave(&self, db: u64) {
        let mut st = self.state.lock();
        if st.usage.remove(&db).is_some() {
            self.apply(&mut st, true);
        }
    }

    /// Sums the reports into the totals, keeps the cache reservation in
    /// step, and wakes stalled writers when memory was `freed`.
    fn apply(&self, st: &mut State, freed: bool) {
        let (mutable, total) = st.usage.values().fold((0u64, 0u64), |(m, t), (um, ut)| (m + um, t + ut));
        self.mutable.store(mutable, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
        if let Some(cache) = &self.cache {
            let id = *st.cache_id.get_or_insert_with(|| cache.new_id());
            let want = total.div_ceil(RESERVATION_UNIT) as usize;
            while st.reserved.len() < want {
                let key = CacheKey::new(id, st.reserved.len() as u64);
                match cache.insert(key, CacheValue::new(()), RESERVATION_UNIT as usize, Priority::High) {
                    Ok(handle) => st.reserved.push(handle),
                    // A strict cache full of pinned entries: the memory is
                    // counted here all the same.
                    Err(_) => break,
                }
            }
            while st.reserved.len() > want {
                st.reserved.pop();
                cache.erase(&CacheKey::new(id, st.reserved.len() as u64));
            }
        }
        if freed {
            self.freed.notify_all();
        }
    }

    /// Waits (at most `limit`) for the memory reported to drop below the
    /// budget. Returns whether it did.
    pub(crate) fn wait_for_room(&self, limit: Duration) -> bool {
        let mut st = self.state.lock();
        if self.should_stall() {
            self.freed.wait_for(&mut st, limit);
        }
        !self.should_stall()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::{new_cache, CacheOptions, CacheType};

    #[test]
    fn flush_and_stall_follow_rocksdbs_rules() {
        let wbm = WriteBufferManager::new(800, true);
        wbm.report(1, 300, 300);
        wbm.report(2, 300, 500);
        assert_eq!((wbm.mutable_memtable_memory_usage(), wbm.memory_usage()), (600, 800));
        // Mutable 600 <= 700, total 800 >= 800 with mutable >= 400: due.
        assert!(wbm.should_flush());
        assert!(wbm.should_stall());
        wbm.report(2, 0, 100);
        assert!(!wbm.should_flush() && !wbm.should_stall());
        wbm.report(1, 701, 701);
        assert!(wbm.should_flush(), "mutable over 7/8");
        wbm.leave(1);
        assert_eq!(wbm.memory_usage(), 100);
        wbm.set_buffer_size(0);
        wbm.report(3, 1 << 30, 1 << 30);
        assert!(!wbm.should_flush() && !wbm.should_stall(), "0: no limit");
    }

    #[test]
    fn memory_is_charged_to_the_cache_in_whole_mib() {
        let cache = new_cache(CacheType::Lru, &CacheOptions::new(64 << 20)).unwrap();
        let wbm = WriteBufferManager::with_cache(32 << 20, false, Arc::clone(&cache));
        wbm.report(1, 0, (3 << 20) + 1);
        assert!(cache.usage() >= 4 << 20, "{}", cache.usage());
        assert!(cache.pinned_usage() >= 4 << 20);
        wbm.report(1, 0, 1 << 20);
        assert!(cache.usage() < (2 << 20) + 4096, "{}", cache.usage());
        wbm.leave(1);
        assert!(cache.usage() < 4096, "{}", cache.usage());
    }
}
