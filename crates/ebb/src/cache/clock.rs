//! A clock block cache in the spirit of RocksDB's HyperClockCache
//! (`cache/clock_cache.cc`): lookups and releases take no lock.
//!
//! Layout: the capacity is split over `2^num_shard_bits` shards (automatic:
//! shards of at least 32 MiB, as HyperClockCache). Each shard is a fixed
//! open-addressing table of 64-byte slots sized from its capacity
//! (`capacity / estimated_entry_charge / 0.7`, a power of two), probed by
//! double hashing, filled to at most 84% (RocksDB's `kLoadFactor` and
//! `kStrictLoadFactor`).
//!
//! A slot holds one atomic word, `meta`, plus the key (two atomics), a count
//! of `displacements` (entries whose probe passed this slot, so a lookup may
//! stop at a slot with none) and the entry. `meta` packs:
//!
//! ```text
//! bits 0-1  state: EMPTY, WRITING (one writer owns the slot), VISIBLE,
//!           INVISIBLE (erased or replaced while readers were inside)
//! bits 2-3  clock countdown 0..=3
//! bits 4-63 readers inside the slot
//! ```
//!
//! Protocol: a reader adds one reader and proceeds only if the state it saw
//! was VISIBLE (otherwise it gives the reader back at once). A writer enters
//! WRITING only by compare-and-swap, from EMPTY, or from VISIBLE or INVISIBLE
//! with no readers, so a slot's entry is written only while nobody can read
//! it; leaving WRITING publishes with release ordering. The `unsafe` of the
//! cache is confined to [`ReadGuard`], [`WriteGuard`] and [`ClockRef`].
//!
//! Handles from lookups are HyperClockCache's: a [`ClockRef`] is a reader
//! counted in the slot, so a hit is one atomic add on the slot's `meta` word
//! and its release one subtract, nothing else written (readers on different
//! cores share no other cache line). Point reads
//! ([`BlockCache::lookup_with`]) hold the same count for one block search
//! without creating a handle. A slot with readers is referenced: eviction
//! skips it. An erase, or an insert replacing the key, does not wait for the
//! readers: it turns the slot INVISIBLE (lookups no longer find it, the entry
//! stays charged and readable by its readers), and the last reader to leave
//! frees it under the shard's mutex, before its own count is gone. Eviction
//! also frees INVISIBLE slots no reader is in (a lookup that bumped the count
//! in passing may have been the last). The shards outlive every handle: a
//! cache dropped while handles are out (RocksDB forbids it) keeps its shards
//! rather than free memory a handle points into.
//!
//! Handles from inserts are a clone of the entry's `Arc` (the inserter holds
//! the entry before any reader can): the slot's own `Arc` is the cache's
//! reference, and such an entry is referenced while its strong count is above
//! one. Eviction takes a slot into WRITING and evicts only if the count is
//! then one; an entry erased or replaced while so referenced leaves the table and
//! lives on in its handles, still charged; its `Drop` gives the charge back.
//! (An unreferenced entry is uncharged as it leaves the table, so eviction
//! sees the room it made at once.)
//!
//! Inserts and erases take the shard's mutex (a small lock: one writer per
//! shard keeps displacement counts and eviction simple); lookups never do.
//! Eviction sweeps a hand over the slots: an unreferenced VISIBLE slot with
//! countdown > 0 is decremented, one at 0 is evicted. New entries start at
//! countdown 3 (high priority) or 2 (low), as HyperClockCache's
//! `kHighCountdown`/`kLowCountdown`, so a scan's blocks go before hot ones.
//! When nothing is evictable an insert fails (strict limit) or the entry is
//! handed out "standalone": charged and referenced, but not in the table.

use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{
    shard_capacity, shard_index, strict_limit_error, BlockCache, CacheHandle, CacheKey, CacheOptions, CacheStats,
    CacheValue, HandleInner, Priority,
};
use crate::error::Result;

/// Shards hold at least this much when the shard count is automatic
/// (HyperClockCache: "larger shard size to reduce risk of large entries
/// clustering or skewing individual shards").
const MIN_SHARD_SIZE: usize = 32 << 20;
/// Slots per expected entry: the table is sized for this load.
const LOAD_FACTOR: f64 = 0.7;
/// The most a table is filled before inserts evict by count.
const STRICT_LOAD_FACTOR: f64 = 0.84;
const MIN_TABLE_LEN: usize = 16;
/// 2^26 slots of 64 bytes: 4 GiB of table per shard at most.
const MAX_TABLE_LEN: usize = 1 << 26;
/// A slot and an entry, and the entry's `Arc` counts.
const METADATA_CHARGE: usize =
    std::mem::size_of::<Slot>() + std::mem::size_of::<ClockEntry>() + 2 * std::mem::size_of::<usize>();

const STATE_MASK: u64 = 0b11;
const EMPTY: u64 = 0;
const WRITING: u64 = 1;
const VISIBLE: u64 = 2;
/// Erased or replaced while readers were inside: not found by lookups, freed
/// by the last reader to leave (or by the writer that sees it empty).
const INVISIBLE: u64 = 3;
const COUNTDOWN_SHIFT: u32 = 2;
const COUNTDOWN_MASK: u64 = 0b11 << COUNTDOWN_SHIFT;
const COUNTDOWN_ONE: u64 = 1 << COUNTDOWN_SHIFT;
const MAX_COUNTDOWN: u64 = 3;
const HIGH_COUNTDOWN: u64 = 3;
const LOW_COUNTDOWN: u64 = 2;
const READER_SHIFT: u32 = 4;
const ONE_READER: u64 = 1 << READER_SHIFT;

fn state(meta: u64) -> u64 {
    meta & STATE_MASK
}

fn countdown(meta: u64) -> u64 {
    (meta & COUNTDOWN_MASK) >> COUNTDOWN_SHIFT
}

fn readers(meta: u64) -> u64 {
    meta >> READER_SHIFT
}

/// A cached value and its charge; shared by the slot and every handle.
pub(super) struct ClockEntry {
    value: CacheValue,
    charge: usize,
    counters: Arc<ShardCounters>,
    /// Left the table while referenced (erased, replaced) or never entered it
    /// (standalone): its charge stays in `usage`, and is also counted in
    /// `detached`, until `Drop` releases both.
    detached: AtomicBool,
}

impl ClockEntry {
    pub(super) fn value(&self) -> &CacheValue {
        &self.value
    }
}

impl Drop for ClockEntry {
    fn drop(&mut self) {
        // An entry leaving the table unreferenced was uncharged right then.
        if *self.detached.get_mut() {
            self.counters.usage.fetch_sub(self.charge, Ordering::Relaxed);
            self.counters.detached.fetch_sub(self.charge, Ordering::Relaxed);
        }
    }
}

/// Charges of a shard: updated by its writer, and by the `Drop` of detached entries.
#[derive(Default)]
struct ShardCounters {
    usage: AtomicUsize,
    detached: AtomicUsize,
}

#[repr(align(64))]
struct Slot {
    meta: AtomicU64,
    key_id: AtomicU64,
    key_offset: AtomicU64,
    displacements: AtomicU32,
    entry: UnsafeCell<Option<Arc<ClockEntry>>>,
}

// SAFETY: the only non-`Sync` field is `entry`, and it is accessed only through
// `ReadGuard` (shared reads while the slot is VISIBLE with the reader counted)
// and `WriteGuard` (exclusive access while the slot is WRITING, entered by a
// compare-and-swap only one thread can win and only when no reader is inside).
// Those two states exclude each other, so reads never race with writes.
#[allow(unsafe_code)]
unsafe impl Sync for Slot {}

impl Slot {
    fn new() -> Self {
        Slot {
            meta: AtomicU64::new(EMPTY),
            key_id: AtomicU64::new(0),
            key_offset: AtomicU64::new(0),
            displacements: AtomicU32::new(0),
            entry: UnsafeCell::new(None),
        }
    }

    fn holds(&self, key: &CacheKey) -> bool {
        self.key_id.load(Ordering::Relaxed) == key.cache_id
            && self.key_offset.load(Ordering::Relaxed) == key.block_offset
    }

    fn key(&self) -> CacheKey {
        CacheKey::new(self.key_id.load(Ordering::Relaxed), self.key_offset.load(Ordering::Relaxed))
    }
}

/// A reader inside a slot that was VISIBLE when it entered: while it lives
/// the slot's key and entry do not change (the slot may turn INVISIBLE, not
/// EMPTY or WRITING).
struct ReadGuard<'a> {
    shard: &'a ClockShard,
    index: usize,
    /// `meta` as the reader found it.
    meta: u64,
}

impl<'a> ReadGuard<'a> {
    fn acquire(shard: &'a ClockShard, index: usize) -> Option<Self> {
        Self::enter(shard, index, |st| st == VISIBLE)
    }

    /// A reader inside a VISIBLE or INVISIBLE slot (to read its charge).
    fn acquire_live(shard: &'a ClockShard, index: usize) -> Option<Self> {
        Self::enter(shard, index, |st| matches!(st, VISIBLE | INVISIBLE))
    }

    /// Counts a reader in; keeps it if the state it found is one `accept`s,
    /// else gives it back.
    fn enter(shard: &'a ClockShard, index: usize, accept: impl Fn(u64) -> bool) -> Option<Self> {
        let meta = shard.slots[index].meta.fetch_add(ONE_READER, Ordering::Acquire);
        if accept(state(meta)) {
            Some(ReadGuard { shard, index, meta })
        } else {
            shard.release_reader(index);
            None
        }
    }

    fn entry(&self) -> Option<&'a Arc<ClockEntry>> {
        // SAFETY: this guard was created by an increment that saw VISIBLE (or
        // INVISIBLE), and its reader is still counted, so no `WriteGuard` can
        // be created (that needs EMPTY, or VISIBLE or INVISIBLE with zero
        // readers) until it is dropped: the cell is not written while the
        // reader is counted. The writer published the cell with a release
        // store that our acquire increment read. The shard outlives `'a`.
        #[allow(unsafe_code)]
        unsafe {
            (*self.shard.slots[self.index].entry.get()).as_ref()
        }
    }

    /// Keeps the reader counted past the guard: the caller owns it now and
    /// must give it back with [`ClockShard::release_reader`]. Returns the slot.
    fn into_raw(self) -> usize {
        let index = self.index;
        std::mem::forget(self);
        index
    }
}

impl Drop for ReadGuard<'_> {
    fn drop(&mut self) {
        self.shard.release_reader(self.index);
    }
}

/// Exclusive ownership of a slot in state WRITING. Dropping it publishes the
/// slot: VISIBLE with `countdown` if it holds an entry, else EMPTY.
struct WriteGuard<'a> {
    slot: &'a Slot,
    countdown: u64,
}

impl<'a> WriteGuard<'a> {
    /// Takes an EMPTY slot (readers passing through may be counted; they saw
    /// EMPTY and will not read).
    fn claim_empty(slot: &'a Slot) -> Option<Self> {
        slot.meta
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |m| (state(m) == EMPTY).then_some(m | WRITING))
            .ok()
            .map(|_| WriteGuard { slot, countdown: 0 })
    }

    /// Takes a VISIBLE slot no reader is inside.
    fn lock_visible(slot: &'a Slot) -> Option<Self> {
        slot.meta
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |m| {
                (state(m) == VISIBLE && readers(m) == 0).then_some((m & !STATE_MASK) | WRITING)
            })
            .ok()
            .map(|m| WriteGuard { slot, countdown: countdown(m) })
    }

    /// Takes an INVISIBLE slot whose readers number `readers` (0, or 1 for
    /// the last reader leaving, whose count the swap consumes).
    fn lock_invisible(slot: &'a Slot, readers_now: u64) -> Option<Self> {
        slot.meta
            .fetch_update(Ordering::Acquire, Ordering::Relaxed, |m| {
                (state(m) == INVISIBLE && readers(m) == readers_now).then_some((m & COUNTDOWN_MASK) | WRITING)
            })
            .ok()
            .map(|_| WriteGuard { slot, countdown: 0 })
    }

    fn entry(&self) -> Option<&Arc<ClockEntry>> {
        // SAFETY: the slot is WRITING and this guard is its only owner (see
        // `cell`); nothing writes the cell while `&self` is borrowed.
        #[allow(unsafe_code)]
        unsafe {
            (*self.slot.entry.get()).as_ref()
        }
    }

    fn cell(&mut self) -> &mut Option<Arc<ClockEntry>> {
        // SAFETY: the guard exists only after a compare-and-swap into WRITING
        // that exactly one thread can win: from EMPTY (no `ReadGuard` exists
        // outside VISIBLE and INVISIBLE) or from VISIBLE or INVISIBLE with
        // zero readers (the last reader's own count consumed by the swap).
        // Until `drop` leaves WRITING no `ReadGuard` or other `WriteGuard` can
        // be made, and the acquire swap ordered every earlier reader's reads
        // before us.
        #[allow(unsafe_code)]
        unsafe {
            &mut *self.slot.entry.get()
        }
    }

    fn take(&mut self) -> Option<Arc<ClockEntry>> {
        self.cell().take()
    }

    fn put(&mut self, key: &CacheKey, entry: Arc<ClockEntry>, countdown: u64) {
        self.slot.key_id.store(key.cache_id, Ordering::Relaxed);
        self.slot.key_offset.store(key.block_offset, Ordering::Relaxed);
        *self.cell() = Some(entry);
        self.countdown = countdown;
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        let low_bits = if self.entry().is_some() { VISIBLE | (self.countdown << COUNTDOWN_SHIFT) } else { EMPTY };
        // Readers only add and remove themselves meanwhile: keep their count.
        let _ = self.slot.meta.fetch_update(Ordering::Release, Ordering::Relaxed, |m| {
            Some((m & !(STATE_MASK | COUNTDOWN_MASK)) | low_bits)
        });
    }
}

/// What only the shard's writer (the holder of its mutex) touches.
struct WriterState {
    hand: usize,
    occupancy: usize,
}

#[repr(align(128))]
struct ClockShard {
    slots: Box<[Slot]>,
    mask: usize,
    capacity: usize,
    occupancy_limit: usize,
    strict: bool,
    counters: Arc<ShardCounters>,
    writer: Mutex<WriterState>,
    /// The cache has a secondary tier: eviction hands it what it keeps.
    spill: bool,
}

impl ClockShard {
    fn new(capacity: usize, o: &CacheOptions, metadata: usize) -> Self {
        let per_entry = (o.estimated_entry_charge + metadata).max(1) as f64;
        let wanted = (capacity as f64 / per_entry / LOAD_FACTOR).ceil() as usize;
        let len = wanted.clamp(MIN_TABLE_LEN, MAX_TABLE_LEN).next_power_of_two();
        ClockShard {
            slots: (0..len).map(|_| Slot::new()).collect(),
            mask: len - 1,
            capacity,
            occupancy_limit: ((len as f64 * STRICT_LOAD_FACTOR) as usize).max(1),
            strict: o.strict_capacity_limit,
            counters: Arc::new(ShardCounters::default()),
            writer: Mutex::new(WriterState { hand: 0, occupancy: 0 }),
            spill: o.compressed_secondary_cache_size > 0,
        }
    }

    /// The slots a key with `hash` may occupy, in probe order (double
    /// hashing: an odd step visits every slot of a power-of-two table).
    fn probe(&self, hash: u64) -> impl Iterator<Item = usize> + '_ {
        let home = hash as usize;
        let step = ((hash >> 32) as usize | 1) & self.mask;
        (0..self.slots.len()).map(move |i| home.wrapping_add(i.wrapping_mul(step)) & self.mask)
    }

    /// A reader inside the slot holding `key`, the hit counted for the clock
    /// (countdown back to the top).
    fn hold(&self, key: &CacheKey, hash: u64) -> Option<ReadGuard<'_>> {
        for i in self.probe(hash) {
            let slot = &self.slots[i];
            if state(slot.meta.load(Ordering::Acquire)) == VISIBLE && slot.holds(key) {
                if let Some(g) = ReadGuard::acquire(self, i) {
                    if slot.holds(key) && g.entry().is_some() {
                        if countdown(g.meta) < MAX_COUNTDOWN {
                            slot.meta.fetch_or(COUNTDOWN_MASK, Ordering::Relaxed);
                        }
                        return Some(g);
                    }
                }
            }
            if slot.displacements.load(Ordering::Relaxed) == 0 {
                return None;
            }
        }
        None
    }

    /// The slot holding `key`, with a reader counted in it that the caller
    /// owns (a [`ClockRef`]).
    fn lookup(&self, key: &CacheKey, hash: u64) -> Option<usize> {
        self.hold(key, hash).map(ReadGuard::into_raw)
    }

    /// Gives back one reader of slot `i`. The last reader of an INVISIBLE
    /// slot frees it, under the writer mutex, before its count is gone (so a
    /// cache being dropped sees it and waits or keeps the table).
    fn release_reader(&self, i: usize) {
        let slot = &self.slots[i];
        let mut m = slot.meta.load(Ordering::Relaxed);
        loop {
            if state(m) == INVISIBLE && readers(m) == 1 {
                let mut w = self.writer.lock();
                if let Some(g) = WriteGuard::lock_invisible(slot, 1) {
                    let mut freed = Vec::new();
                    self.remove_locked(i, g, &mut w, &mut freed);
                    drop(w);
                    drop(freed);
                    return;
                }
                drop(w);
                m = slot.meta.load(Ordering::Relaxed);
                continue;
            }
            match slot.meta.compare_exchange_weak(m, m - ONE_READER, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => m = now,
            }
        }
    }

    /// Calls `f` with the value of `key` while a reader is counted in its
    /// slot (so it cannot be evicted or freed meanwhile).
    fn lookup_with(&self, key: &CacheKey, hash: u64, f: &mut dyn FnMut(&CacheValue)) -> bool {
        match self.hold(key, hash) {
            Some(g) => {
                if let Some(entry) = g.entry() {
                    f(entry.value());
                }
                true
            }
            None => false,
        }
    }

    /// The slot holding `key`; the caller holds the writer mutex, so slots
    /// change state only by its hand.
    fn find_locked(&self, key: &CacheKey, hash: u64, _w: &WriterState) -> Option<usize> {
        for i in self.probe(hash) {
            let slot = &self.slots[i];
            if state(slot.meta.load(Ordering::Acquire)) == VISIBLE && slot.holds(key) {
                return Some(i);
            }
            if slot.displacements.load(Ordering::Relaxed) == 0 {
                return None;
            }
        }
        None
    }

    /// Empties slot `i`, owned through `g`, and undoes its key's displacements.
    fn remove_locked(&self, i: usize, mut g: WriteGuard<'_>, w: &mut WriterState, freed: &mut Vec<Arc<ClockEntry>>) {
        let entry = g.take();
        let hash = self.slots[i].key().hash64();
        drop(g);
        for j in self.probe(hash) {
            if j == i {
                break;
            }
            self.slots[j].displacements.fetch_sub(1, Ordering::Relaxed);
        }
        w.occupancy -= 1;
        if let Some(e) = entry {
            // Out of the slot, no new handle can appear: a count of 1 is final.
            if Arc::strong_count(&e) > 1 {
                e.detached.store(true, Ordering::Relaxed);
                self.counters.detached.fetch_add(e.charge, Ordering::Relaxed);
            } else {
                self.counters.usage.fetch_sub(e.charge, Ordering::Relaxed);
            }
            freed.push(e);
        }
    }

    /// Removes the entry for `key` whatever its references (erase, replace).
    /// With readers inside its slot (handles from [`BlockCache::lookup`],
    /// [`BlockCache::lookup_with`] calls) the slot turns INVISIBLE instead:
    /// no lookup finds it again, and the last reader frees it.
    fn remove_key_locked(&self, key: &CacheKey, hash: u64, w: &mut WriterState, freed: &mut Vec<Arc<ClockEntry>>) {
        let Some(i) = self.find_locked(key, hash, w) else { return };
        let slot = &self.slots[i];
        if let Some(g) = WriteGuard::lock_visible(slot) {
            self.remove_locked(i, g, w, freed);
            return;
        }
        let hidden = slot.meta.fetch_update(Ordering::AcqRel, Ordering::Relaxed, |m| {
            (state(m) == VISIBLE).then_some((m & !STATE_MASK) | INVISIBLE)
        });
        // The readers may all have left meanwhile: then nobody else frees it.
        if hidden.is_ok() {
            if let Some(g) = WriteGuard::lock_invisible(slot, 0) {
                self.remove_locked(i, g, w, freed);
            }
        }
    }

    /// Sweeps the hand until `charge` more bytes fit and a slot is free, or
    /// every slot has had enough visits to count down from 3 and be evicted;
    /// with a secondary tier, the evicted values go to `spilled`.
    fn evict(
        &self,
        charge: usize,
        w: &mut WriterState,
        freed: &mut Vec<Arc<ClockEntry>>,
        spilled: &mut Vec<(CacheKey, CacheValue)>,
    ) {
        let max_steps = self.slots.len() * (MAX_COUNTDOWN as usize + 2);
        let mut steps = 0;
        while (self.counters.usage.load(Ordering::Relaxed) + charge > self.capacity
            || w.occupancy >= self.occupancy_limit)
            && steps < max_steps
        {
            steps += 1;
            let i = w.hand;
            w.hand = (i + 1) & self.mask;
            let slot = &self.slots[i];
            let meta = slot.meta.load(Ordering::Relaxed);
            if state(meta) == INVISIBLE && readers(meta) == 0 {
                if let Some(g) = WriteGuard::lock_invisible(slot, 0) {
                    self.remove_locked(i, g, w, freed);
                }
                continue;
            }
            if state(meta) != VISIBLE || readers(meta) > 0 {
                continue;
            }
            if countdown(meta) > 0 {
                let _ = slot.meta.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| {
                    (state(m) == VISIBLE && countdown(m) > 0).then(|| m - COUNTDOWN_ONE)
                });
                continue;
            }
            let Some(g) = WriteGuard::lock_visible(slot) else { continue };
            if g.entry().is_some_and(|e| Arc::strong_count(e) > 1) {
                // Referenced: dropping the guard puts it back as it was.
                continue;
            }
            if self.spill {
                if let Some(e) = g.entry() {
                    spilled.push((slot.key(), e.value.clone()));
                }
            }
            self.remove_locked(i, g, w, freed);
        }
    }

    fn insert(
        &self,
        key: CacheKey,
        hash: u64,
        value: CacheValue,
        charge: usize,
        priority: Priority,
        spilled: &mut Vec<(CacheKey, CacheValue)>,
    ) -> Result<CacheHandle> {
        if charge > self.capacity {
            // It could only be cached by flushing the whole shard.
            return if self.strict {
                Err(strict_limit_error(charge, self.capacity))
            } else {
                Ok(CacheHandle::uncached(value))
            };
        }
        let mut freed = Vec::new();
        let mut w = self.writer.lock();
        self.remove_key_locked(&key, hash, &mut w, &mut freed);
        self.evict(charge, &mut w, &mut freed, spilled);
        let fits =
            self.counters.usage.load(Ordering::Relaxed) + charge <= self.capacity && w.occupancy < self.occupancy_limit;
        if !fits && self.strict {
            drop(w);
            drop(freed);
            return Err(strict_limit_error(charge, self.capacity));
        }
        self.counters.usage.fetch_add(charge, Ordering::Relaxed);
        let entry = Arc::new(ClockEntry {
            value,
            charge,
            counters: Arc::clone(&self.counters),
            detached: AtomicBool::new(false),
        });
        let countdown = if priority == Priority::High { HIGH_COUNTDOWN } else { LOW_COUNTDOWN };
        let mut placed = false;
        if fits {
            for (n, i) in self.probe(hash).enumerate() {
                let slot = &self.slots[i];
                if state(slot.meta.load(Ordering::Relaxed)) != EMPTY {
                    continue;
                }
                if let Some(mut g) = WriteGuard::claim_empty(slot) {
                    // Count the slots passed before the entry becomes visible,
                    // so no lookup stops short of it.
                    for j in self.probe(hash).take(n) {
                        self.slots[j].displacements.fetch_add(1, Ordering::Relaxed);
                    }
                    g.put(&key, Arc::clone(&entry), countdown);
                    placed = true;
                    break;
                }
            }
        }
        if placed {
            w.occupancy += 1;
        } else {
            // Standalone: charged while referenced, never found.
            entry.detached.store(true, Ordering::Relaxed);
            self.counters.detached.fetch_add(charge, Ordering::Relaxed);
        }
        drop(w);
        drop(freed);
        Ok(CacheHandle { inner: HandleInner::Clock(entry) })
    }

    fn erase(&self, key: &CacheKey, hash: u64) {
        let mut freed = Vec::new();
        let mut w = self.writer.lock();
        self.remove_key_locked(key, hash, &mut w, &mut freed);
        drop(w);
        drop(freed);
    }

    fn pinned_usage(&self) -> usize {
        let mut pinned = self.counters.detached.load(Ordering::Relaxed);
        for (i, slot) in self.slots.iter().enumerate() {
            if !matches!(state(slot.meta.load(Ordering::Relaxed)), VISIBLE | INVISIBLE) {
                continue;
            }
            if let Some(g) = ReadGuard::acquire_live(self, i) {
                // Referenced: readers other than this one, or handles from inserts.
                if let Some(e) = g.entry().filter(|e| readers(g.meta) > 0 || Arc::strong_count(e) > 1) {
                    pinned += e.charge;
                }
            }
        }
        pinned
    }
}

/// A handle from a lookup: a reader counted in slot `index` of `shard`,
/// HyperClockCache's handle. Creating it is one atomic add on the slot,
/// dropping it one subtract; the entry stays in the slot meanwhile (an erase
/// or replace makes the slot INVISIBLE and leaves the freeing to the last
/// reader).
pub(super) struct ClockRef {
    shard: NonNull<ClockShard>,
    index: usize,
}

// SAFETY: a `ClockRef` only reads its slot's entry (which is `Send + Sync`:
// `CacheValue` holds `Arc`s of immutable blocks and filters) and gives back its
// reader with atomics and the shard's mutex; any thread may do both.
#[allow(unsafe_code)]
unsafe impl Send for ClockRef {}
#[allow(unsafe_code)]
unsafe impl Sync for ClockRef {}

impl ClockRef {
    fn shard(&self) -> &ClockShard {
        // SAFETY: the shard lives in its cache's `Vec` of shards, which is freed
        // only when the cache is dropped with no reader counted in any slot
        // (`Drop for ClockCache` checks under each shard's mutex, and leaks
        // the shards otherwise); this handle's reader is counted until its
        // `drop` has finished with the shard.
        #[allow(unsafe_code)]
        unsafe {
            self.shard.as_ref()
        }
    }

    pub(super) fn value(&self) -> &CacheValue {
        let slot = &self.shard().slots[self.index];
        // SAFETY: as `ReadGuard::entry`: the reader this handle holds keeps
        // every `WriteGuard` out of the slot, so the cell is not written while
        // the handle lives; `lookup` saw it hold an entry.
        #[allow(unsafe_code)]
        let entry = unsafe { (*slot.entry.get()).as_ref() };
        match entry {
            Some(e) => e.value(),
            None => unreachable!("a counted reader's slot lost its entry"),
        }
    }
}

impl Drop for ClockRef {
    fn drop(&mut self) {
        self.shard().release_reader(self.index);
    }
}

/// A block cache with lock-free lookups and clock eviction. See the module
/// documentation.
pub struct ClockCache {
    /// A `Vec`, not a `Box`: handles point into it, and moving a `Box` would
    /// claim unique access to the shards (Stacked Borrows).
    shards: Vec<ClockShard>,
    shard_bits: u32,
    capacity: usize,
    metadata_charge: bool,
    next_id: AtomicU64,
    stats: CacheStats,
    /// The compressed tier under this one (`compressed_secondary_cache_size`).
    tier: Option<super::secondary::Tier>,
}

impl ClockCache {
    /// A cache built as `options` say; refuses values out of range.
    pub fn with_options(options: &CacheOptions) -> Result<Self> {
        options.validate()?;
        let shard_bits = options.shard_bits(MIN_SHARD_SIZE);
        let n = 1usize << shard_bits;
        let metadata = if options.metadata_charge { METADATA_CHARGE } else { 0 };
        let shards =
            (0..n).map(|i| ClockShard::new(shard_capacity(options.capacity, n, i), options, metadata)).collect();
        Ok(ClockCache {
            shards,
            shard_bits,
            capacity: options.capacity,
            metadata_charge: options.metadata_charge,
            next_id: AtomicU64::new(1),
            stats: CacheStats::default(),
            tier: super::secondary::Tier::for_options(options)?,
        })
    }

    /// Number of shards.
    pub fn num_shards(&self) -> usize {
        self.shards.len()
    }

    /// Slots in each shard's table.
    pub fn table_len(&self) -> usize {
        self.shards.first().map_or(0, |s| s.slots.len())
    }

    fn shard(&self, hash: u64) -> &ClockShard {
        &self.shards[shard_index(hash, self.shard_bits)]
    }

    /// Checks every shard's bookkeeping against its table: occupancy, usage,
    /// displacement counts, findability. For tests, on a quiet cache.
    #[cfg(test)]
    pub(crate) fn check_consistency(&self) -> std::result::Result<(), String> {
        for (n, shard) in self.shards.iter().enumerate() {
            let w = shard.writer.lock();
            let mut expected = vec![0u32; shard.slots.len()];
            let mut occupied = 0;
            let mut charged = 0;
            for (i, slot) in shard.slots.iter().enumerate() {
                let meta = slot.meta.load(Ordering::Acquire);
                if readers(meta) != 0 || matches!(state(meta), WRITING | INVISIBLE) {
                    return Err(format!("shard {n}: slot {i} is busy on a quiet cache ({meta:#x})"));
                }
                if state(meta) != VISIBLE {
                    continue;
                }
                occupied += 1;
                let key = slot.key();
                let hash = key.hash64();
                if shard_index(hash, self.shard_bits) != n {
                    return Err(format!("shard {n}: slot {i} holds a key of another shard"));
                }
                if shard.find_locked(&key, hash, &w) != Some(i) {
                    return Err(format!("shard {n}: {key:?} in slot {i} is not found there"));
                }
                for j in shard.probe(hash) {
                    if j == i {
                        break;
                    }
                    expected[j] += 1;
                }
                let g = ReadGuard::acquire(shard, i).ok_or("visible slot refused a reader")?;
                charged += g.entry().map_or(0, |e| e.charge);
            }
            let actual: Vec<u32> = shard.slots.iter().map(|s| s.displacements.load(Ordering::Relaxed)).collect();
            if actual != expected {
                return Err(format!("shard {n}: displacement counts drifted"));
            }
            if occupied != w.occupancy {
                return Err(format!("shard {n}: {occupied} slots occupied, {} accounted", w.occupancy));
            }
            let (usage, detached) =
                (shard.counters.usage.load(Ordering::Relaxed), shard.counters.detached.load(Ordering::Relaxed));
            if charged + detached != usage {
                return Err(format!("shard {n}: entries charge {charged} + detached {detached}, usage {usage}"));
            }
        }
        Ok(())
    }
}

impl Drop for ClockCache {
    fn drop(&mut self) {
        // Handles from lookups point into the shards. A handle still held
        // (the cache dropped first: a misuse RocksDB forbids outright) keeps
        // its reader counted until it is done with its shard, so: wait out a
        // handle inside its shard's mutex, then keep all the shards alive for
        // good if any reader is still counted.
        let held = self.shards.iter().any(|shard| {
            let _w = shard.writer.lock();
            shard.slots.iter().any(|slot| readers(slot.meta.load(Ordering::Acquire)) > 0)
        });
        if held {
            std::mem::forget(std::mem::take(&mut self.shards));
        }
    }
}

impl BlockCache for ClockCache {
    fn lookup(&self, key: &CacheKey) -> Option<CacheHandle> {
        if self.capacity == 0 {
            return None;
        }
        let hash = key.hash64();
        let shard = self.shard(hash);
        let index = shard.lookup(key, hash)?;
        Some(CacheHandle { inner: HandleInner::ClockSlot(ClockRef { shard: NonNull::from(shard), index }) })
    }

    fn lookup_with(&self, key: &CacheKey, f: &mut dyn FnMut(&CacheValue)) -> bool {
        if self.capacity == 0 {
            return false;
        }
        let hash = key.hash64();
        self.shard(hash).lookup_with(key, hash, f)
    }

    fn insert(&self, key: CacheKey, value: CacheValue, charge: usize, priority: Priority) -> Result<CacheHandle> {
        if self.capacity == 0 {
            return Ok(CacheHandle::uncached(value));
        }
        let charge = charge + if self.metadata_charge { METADATA_CHARGE } else { 0 };
        let hash = key.hash64();
        let Some(tier) = &self.tier else {
            return self.shard(hash).insert(key, hash, value, charge, priority, &mut Vec::new());
        };
        let mut spilled = Vec::new();
        let inserted = self.shard(hash).insert(key, hash, value, charge, priority, &mut spilled);
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
        let hash = key.hash64();
        self.shard(hash).erase(key, hash);
    }

    fn usage(&self) -> usize {
        self.shards.iter().map(|s| s.counters.usage.load(Ordering::Relaxed)).sum()
    }

    fn pinned_usage(&self) -> usize {
        self.shards.iter().map(ClockShard::pinned_usage).sum()
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
        "HyperClockCache"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::testutil::{tag_of, tagged};
    use crate::error::Error;
    use rand::{Rng, SeedableRng};

    fn cache(capacity: usize, estimated: usize, strict: bool) -> ClockCache {
        let o = CacheOptions {
            num_shard_bits: 0,
            strict_capacity_limit: strict,
            metadata_charge: false,
            estimated_entry_charge: estimated,
            ..CacheOptions::new(capacity)
        };
        ClockCache::with_options(&o).unwrap()
    }

    fn key(i: u64) -> CacheKey {
        CacheKey::new(1, i * 4096)
    }

    fn put(c: &ClockCache, i: u64, charge: usize) {
        drop(c.insert(key(i), tagged(i), charge, Priority::Low).unwrap());
    }

    fn present(c: &ClockCache, i: u64) -> bool {
        c.lookup(&key(i)).is_some()
    }

    #[test]
    fn meta_word_fields_do_not_overlap() {
        assert_eq!(STATE_MASK & COUNTDOWN_MASK, 0);
        assert_eq!((STATE_MASK | COUNTDOWN_MASK) & ONE_READER, 0);
        assert_eq!(countdown(MAX_COUNTDOWN << COUNTDOWN_SHIFT), MAX_COUNTDOWN);
        assert_eq!(readers((3 * ONE_READER) | VISIBLE | COUNTDOWN_MASK), 3);
        assert_eq!(std::mem::size_of::<Slot>(), 64);
    }

    #[test]
    fn hits_after_insert_misses_after_erase_and_replacement_replaces() {
        let c = cache(1 << 20, 1000, false);
        assert!(c.table_len() >= (1 << 20) / 1000);
        assert!(c.lookup(&key(1)).is_none());
        put(&c, 1, 100);
        assert_eq!(tag_of(&c.lookup(&key(1)).unwrap()), 1);
        assert_eq!(c.usage(), 100);
        drop(c.insert(key(1), tagged(9), 60, Priority::Low).unwrap());
        assert_eq!(tag_of(&c.lookup(&key(1)).unwrap()), 9);
        assert_eq!(c.usage(), 60);
        c.erase(&key(1));
        assert!(c.lookup(&key(1)).is_none());
        assert_eq!(c.usage(), 0);
        c.erase(&key(1));
        c.check_consistency().unwrap();
    }

    #[test]
    fn many_keys_in_a_crowded_table_stay_findable() {
        // 64-slot table, up to 53 entries: long probe sequences, many removals.
        let c = cache(6400, 150, false);
        assert_eq!(c.table_len(), 64);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for round in 0..3000u64 {
            let i = rng.gen_range(0..200);
            if rng.gen_bool(0.3) {
                c.erase(&key(i));
            } else {
                drop(c.insert(key(i), tagged(round), 100, Priority::Low).unwrap());
                assert_eq!(tag_of(&c.lookup(&key(i)).unwrap()), round, "a key just inserted is not found");
            }
        }
        c.check_consistency().unwrap();
    }

    #[test]
    fn usage_stays_within_capacity_under_random_inserts() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        for shard_bits in [0, 2] {
            let capacity = 64 << 10;
            let o = CacheOptions {
                num_shard_bits: shard_bits,
                estimated_entry_charge: 2048,
                ..CacheOptions::new(capacity)
            };
            let c = ClockCache::with_options(&o).unwrap();
            let max_charge = 4096;
            for i in 0..20_000u64 {
                let k = CacheKey::new(rng.gen_range(1..4), rng.gen_range(0..500) * 4096);
                match rng.gen_range(0..10) {
                    0 => c.erase(&k),
                    1..=3 => drop(c.lookup(&k)),
                    _ => drop(c.insert(k, tagged(i), rng.gen_range(1..=max_charge), Priority::Low).unwrap()),
                }
                assert!(c.usage() <= capacity, "usage {} > capacity {capacity}", c.usage());
            }
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
    fn a_full_table_evicts_by_count() {
        // Entries far smaller than estimated: the table fills before the bytes do.
        let c = cache(16 * 1000, 1000, false);
        let limit = (c.table_len() as f64 * STRICT_LOAD_FACTOR) as usize;
        for i in 0..200 {
            put(&c, i, 10);
        }
        let found = (0..200).filter(|&i| present(&c, i)).count();
        assert!(found <= limit && found + 1 >= limit, "{found} entries for a limit of {limit}");
        c.check_consistency().unwrap();
    }

    #[test]
    fn referenced_entries_survive_eviction_pressure() {
        let c = cache(1000, 100, false);
        let pinned: Vec<CacheHandle> =
            (0..3).map(|i| c.insert(key(i), tagged(i), 100, Priority::Low).unwrap()).collect();
        put(&c, 3, 100);
        let looked_up = c.lookup(&key(3)).unwrap();
        assert_eq!(c.pinned_usage(), 400);
        for i in 10..300 {
            put(&c, i, 100);
            assert!(c.usage() <= 1000);
        }
        for i in 0..4 {
            assert!(present(&c, i), "referenced entry {i} was evicted");
        }
        drop(pinned);
        drop(looked_up);
        assert_eq!(c.pinned_usage(), 0);
        for i in 300..400 {
            put(&c, i, 100);
        }
        assert!((0..4).all(|i| !present(&c, i)), "released entries never aged out");
        c.check_consistency().unwrap();
    }

    #[test]
    fn lookup_with_holds_the_entry_until_the_call_returns() {
        let c = cache(1000, 100, false);
        let mut calls = 0;
        assert!(!c.lookup_with(&key(1), &mut |_| calls += 1), "a miss is a hit");
        assert_eq!(calls, 0, "a miss called back");
        put(&c, 1, 100);
        // Inside the call the entry is referenced: a flood of inserts (ten
        // times the capacity) cannot evict it.
        let mut seen = None;
        assert!(c.lookup_with(&key(1), &mut |v| {
            for i in 100..200 {
                put(&c, i, 100);
            }
            seen = Some(tag_of(v));
        }));
        assert_eq!(seen, Some(1));
        assert!(present(&c, 1), "the entry held by lookup_with was evicted");
        assert!(c.usage() <= 1000);
        // Released when the call returns: it ages out like any other.
        for i in 200..300 {
            put(&c, i, 100);
        }
        assert!(!present(&c, 1), "the entry stayed referenced after lookup_with returned");
        c.check_consistency().unwrap();

        let empty = cache(0, 100, false);
        assert!(!empty.lookup_with(&key(1), &mut |_| unreachable!()));
    }

    #[test]
    fn erase_hides_an_entry_in_use_and_its_last_reader_frees_it() {
        let c = Arc::new(cache(1000, 100, false));
        put(&c, 1, 100);
        let (inside_tx, inside_rx) = std::sync::mpsc::channel();
        let (leave_tx, leave_rx) = std::sync::mpsc::channel::<()>();
        let reader = {
            let c = Arc::clone(&c);
            std::thread::spawn(move || {
                c.lookup_with(&key(1), &mut |v| {
                    inside_tx.send(()).unwrap();
                    leave_rx.recv().unwrap();
                    // Still the value it found: nobody freed it meanwhile.
                    assert_eq!(tag_of(v), 1);
                })
            })
        };
        inside_rx.recv().unwrap();
        // Erase does not wait for the reader: the slot turns invisible.
        c.erase(&key(1));
        assert!(!present(&c, 1), "an erased entry is still found");
        assert_eq!((c.usage(), c.pinned_usage()), (100, 100), "the entry in use must stay charged and pinned");
        // A replacing insert does not wait either, and wins at once.
        put(&c, 1, 50);
        assert_eq!(tag_of(&c.lookup(&key(1)).unwrap()), 1);
        assert_eq!(c.usage(), 150);
        leave_tx.send(()).unwrap();
        assert!(reader.join().unwrap());
        assert_eq!((c.usage(), c.pinned_usage()), (50, 0), "the last reader did not free the hidden entry");
        c.check_consistency().unwrap();

        // The same through handles, released in either order, on this thread.
        let h1 = c.lookup(&key(1)).unwrap();
        let h2 = c.lookup(&key(1)).unwrap();
        c.erase(&key(1));
        drop(h2);
        assert_eq!(c.usage(), 50);
        assert_eq!(tag_of(&h1), 1);
        drop(h1);
        assert_eq!(c.usage(), 0);
        c.check_consistency().unwrap();
    }

    #[test]
    fn a_cache_dropped_before_its_handles_leaves_them_valid() {
        let c = cache(1000, 100, false);
        put(&c, 1, 100);
        put(&c, 2, 100);
        let h = c.lookup(&key(1)).unwrap();
        c.erase(&key(1));
        let h2 = c.lookup(&key(2)).unwrap();
        drop(c);
        // The shards were kept: the handles still read and release safely
        // (under Miri this is a use-after-free if they were not).
        assert_eq!(tag_of(&h), 1);
        assert_eq!(tag_of(&h2), 2);
        drop(h);
        drop(h2);
        // Without handles out, dropping frees (nothing to observe but Miri's
        // leak check and no hang).
        let c = cache(1000, 100, false);
        put(&c, 3, 100);
        drop(c.lookup(&key(3)));
        drop(c);
    }

    #[test]
    fn hot_entries_outlive_a_scan() {
        let c = cache(1000, 100, false);
        for i in 0..3 {
            drop(c.insert(key(i), tagged(i), 100, Priority::High).unwrap());
        }
        for i in 100..400 {
            put(&c, i, 100);
            for h in 0..3 {
                assert!(present(&c, h), "hot entry {h} evicted by the scan at {i}");
            }
        }
    }

    #[test]
    fn erased_while_referenced_entries_are_freed_on_last_release() {
        let c = cache(1000, 100, false);
        let h1 = c.insert(key(1), tagged(1), 300, Priority::Low).unwrap();
        let h2 = c.lookup(&key(1)).unwrap();
        c.erase(&key(1));
        assert!(!present(&c, 1), "an erased entry was found");
        assert_eq!(c.usage(), 300, "the charge must stay until the last release");
        assert_eq!(c.pinned_usage(), 300);
        drop(h1);
        assert_eq!(c.usage(), 300);
        assert_eq!(tag_of(&h2), 1);
        drop(h2);
        assert_eq!(c.usage(), 0, "the last release did not free the entry");
        assert_eq!(c.pinned_usage(), 0);
        let old = c.insert(key(2), tagged(2), 200, Priority::Low).unwrap();
        put(&c, 2, 100);
        assert_eq!(c.usage(), 300);
        drop(old);
        assert_eq!(c.usage(), 100);
        c.check_consistency().unwrap();
    }

    #[test]
    fn strict_capacity_limit_refuses_inserts_when_everything_is_referenced() {
        let c = cache(300, 100, true);
        let held: Vec<_> = (0..3).map(|i| c.insert(key(i), tagged(i), 100, Priority::Low).unwrap()).collect();
        let e = c.insert(key(3), tagged(3), 100, Priority::Low).unwrap_err();
        assert!(matches!(e, Error::Busy(_)), "{e}");
        assert_eq!(c.usage(), 300);
        drop(held);
        put(&c, 3, 100);
        assert_eq!(c.usage(), 300);

        // Without the limit the entry is handed out standalone: charged while
        // referenced, never found, gone with its handle.
        let c = cache(300, 100, false);
        let held: Vec<_> = (0..3).map(|i| c.insert(key(i), tagged(i), 100, Priority::Low).unwrap()).collect();
        let over = c.insert(key(3), tagged(3), 100, Priority::Low).unwrap();
        assert_eq!((c.usage(), c.pinned_usage()), (400, 400));
        assert!(!present(&c, 3));
        drop(over);
        assert_eq!(c.usage(), 300);
        drop(held);
        c.check_consistency().unwrap();
    }
}
