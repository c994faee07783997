//! The memtable: a concurrent sorted map of recent writes, flushed to an L0 SST
//! once full.
//!
//! Invariants:
//! 1. Entries are keyed by internal key, so every version of a user key is kept
//!    and the newest sorts first.
//! 2. Inserts come from one thread at a time (the write-group leader); reads and
//!    iterators run concurrently with inserts without locks (crossbeam's
//!    lock-free skiplist).
//! 3. Once switched to immutable, a memtable never changes again.
//!
//! Memory is accounted as key + value + a fixed per-entry overhead, which is
//! what `write_buffer_size` is compared with.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use crossbeam_skiplist::SkipMap;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{
    compare_internal_keys, make_internal_key, parse_internal_key, SequenceNumber, ValueKind, KIND_FOR_SEEK,
};

/// Bytes charged per entry on top of its key and value: skiplist node, tower
/// and the two boxed slices (measured order of magnitude, not exact).
const ENTRY_OVERHEAD: usize = 64;

/// An internal key with the internal ordering, owned by the skiplist.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MemKey(Box<[u8]>);

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal_keys(&self.0, &other.0)
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// What a point lookup found in a memtable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemLookup {
    /// The newest visible version is a value.
    Value(Vec<u8>),
    /// The newest visible version is a tombstone.
    Deleted,
}

/// A memtable. Shared as `Arc<MemTable>` between the writer, readers,
/// iterators and the flush job.
pub struct MemTable {
    map: SkipMap<MemKey, Box<[u8]>>,
    bytes: AtomicUsize,
    entries: AtomicU64,
    deletions: AtomicU64,
    /// The WAL file whose records this memtable holds (all writes to it went there).
    log_number: u64,
    /// Set once any write skipped the WAL: the data survives only by flushing.
    has_unlogged: AtomicBool,
    /// Sequence number of the first entry (0 while empty).
    first_seq: AtomicU64,
}

impl MemTable {
    /// A new, empty memtable whose writes go to WAL `log_number`.
    pub fn new(log_number: u64) -> Self {
        MemTable {
            map: SkipMap::new(),
            bytes: AtomicUsize::new(0),
            entries: AtomicU64::new(0),
            deletions: AtomicU64::new(0),
            log_number,
            has_unlogged: AtomicBool::new(false),
            first_seq: AtomicU64::new(0),
        }
    }

    /// Inserts one entry. Requires: a single inserting thread at a time.
    pub fn add(&self, seq: SequenceNumber, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        let ikey = make_internal_key(user_key, seq, kind);
        self.bytes.fetch_add(ikey.len() + value.len() + ENTRY_OVERHEAD, AtomicOrdering::Relaxed);
        self.entries.fetch_add(1, AtomicOrdering::Relaxed);
        if kind == ValueKind::Deletion {
            self.deletions.fetch_add(1, AtomicOrdering::Relaxed);
        }
        let _ = self.first_seq.compare_exchange(0, seq, AtomicOrdering::Relaxed, AtomicOrdering::Relaxed);
        self.map.insert(MemKey(ikey.into_boxed_slice()), value.into());
    }

    /// Records that a write reached this memtable without the WAL.
    pub fn mark_unlogged(&self) {
        self.has_unlogged.store(true, AtomicOrdering::Relaxed);
    }

    /// True when some write in this memtable is not in any WAL.
    pub fn has_unlogged(&self) -> bool {
        self.has_unlogged.load(AtomicOrdering::Relaxed)
    }

    /// The newest version of `user_key` with sequence `<= snapshot`.
    pub fn get(&self, user_key: &[u8], snapshot: SequenceNumber) -> Option<MemLookup> {
        let lookup = MemKey(make_internal_key(user_key, snapshot, KIND_FOR_SEEK).into_boxed_slice());
        let entry = self.map.lower_bound(Bound::Included(&lookup))?;
        let parsed = parse_internal_key(&entry.key().0)?;
        if parsed.user_key != user_key {
            return None;
        }
        Some(match parsed.kind {
            ValueKind::Value => MemLookup::Value(entry.value().to_vec()),
            ValueKind::Deletion => MemLookup::Deleted,
        })
    }

    /// Bytes charged against `write_buffer_size`.
    pub fn approximate_memory_usage(&self) -> usize {
        self.bytes.load(AtomicOrdering::Relaxed)
    }

    /// Number of entries (every version counts).
    pub fn num_entries(&self) -> u64 {
        self.entries.load(AtomicOrdering::Relaxed)
    }

    /// Number of tombstones.
    pub fn num_deletions(&self) -> u64 {
        self.deletions.load(AtomicOrdering::Relaxed)
    }

    /// True when nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The WAL this memtable's writes went to.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Sequence number of the first insert, 0 when empty.
    pub fn first_sequence(&self) -> SequenceNumber {
        self.first_seq.load(AtomicOrdering::Relaxed)
    }

    /// Calls `f` for every entry in internal-key order (used by flush).
    pub fn for_each(&self, mut f: impl FnMut(&[u8], &[u8]) -> Result<()>) -> Result<()> {
        for e in self.map.iter() {
            f(&e.key().0, e.value())?;
        }
        Ok(())
    }

    /// An iterator over this memtable; it keeps the memtable alive.
    pub fn iter(self: &Arc<Self>) -> MemTableIterator {
        MemTableIterator { current: None, mem: Arc::clone(self) }
    }
}

/// An [`InternalIterator`] over a memtable.
///
/// It walks the skiplist's links directly (`Entry::next` / `Entry::prev`), so a
/// step costs O(1) and copies nothing. The entry borrows the skiplist owned by
/// the memtable this iterator keeps alive in `mem`.
pub struct MemTableIterator {
    // Field order matters: `current` borrows from `*mem` and must be dropped first.
    current: Option<MapEntry<'static>>,
    mem: Arc<MemTable>,
}

type MapEntry<'a> = crossbeam_skiplist::map::Entry<'a, MemKey, Box<[u8]>>;

impl MemTableIterator {
    fn set(&mut self, e: Option<MapEntry<'_>>) {
        // SAFETY: the entry borrows `self.mem.map`. `self.mem` is an `Arc` this
        // struct owns, so the skiplist neither moves nor is dropped while the
        // entry lives: the entry is always replaced or dropped (field order
        // above) before `mem` is. Extending the borrow to 'static never lets
        // it escape: `key()` and `value()` hand out borrows of `self` only.
        #[allow(unsafe_code)]
        let e: Option<MapEntry<'static>> = unsafe { std::mem::transmute(e) };
        self.current = e;
    }

    fn map(&self) -> &'static SkipMap<MemKey, Box<[u8]>> {
        // SAFETY: as in `set`: the map lives as long as `self.mem`, and every
        // entry derived from this reference is stored in `self.current`, which
        // is dropped before `self.mem`.
        #[allow(unsafe_code)]
        unsafe {
            &*(&self.mem.map as *const SkipMap<MemKey, Box<[u8]>>)
        }
    }
}

impl InternalIterator for MemTableIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }
    fn seek_to_first(&mut self) {
        let e = self.map().front();
        self.set(e);
    }
    fn seek_to_last(&mut self) {
        let e = self.map().back();
        self.set(e);
    }
    fn seek(&mut self, target: &[u8]) {
        let t = MemKey(target.into());
        let e = self.map().lower_bound(Bound::Included(&t));
        self.set(e);
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        let t = MemKey(target.into());
        let e = self.map().upper_bound(Bound::Included(&t));
        self.set(e);
    }
    fn next(&mut self) {
        let e = self.current.as_ref().and_then(|e| e.next());
        self.set(e);
    }
    fn prev(&mut self) {
        let e = self.current.as_ref().and_then(|e| e.prev());
        self.set(e);
    }
    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |e| &e.key().0)
    }
    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |e| e.value())
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::user_key;

    #[test]
    fn get_sees_the_newest_visible_version() {
        let m = MemTable::new(1);
        m.add(1, ValueKind::Value, b"k", b"v1");
        m.add(2, ValueKind::Value, b"k", b"v2");
        m.add(3, ValueKind::Deletion, b"k", b"");
        m.add(4, ValueKind::Value, b"k2", b"x");
        assert_eq!(m.get(b"k", 1), Some(MemLookup::Value(b"v1".to_vec())));
        assert_eq!(m.get(b"k", 2), Some(MemLookup::Value(b"v2".to_vec())));
        assert_eq!(m.get(b"k", 3), Some(MemLookup::Deleted));
        assert_eq!(m.get(b"k", 100), Some(MemLookup::Deleted));
        assert_eq!(m.get(b"k2", 3), None);
        assert_eq!(m.get(b"j", 100), None);
        assert_eq!(m.num_entries(), 4);
        assert_eq!(m.num_deletions(), 1);
        assert_eq!(m.first_sequence(), 1);
        assert!(m.approximate_memory_usage() > 4 * ENTRY_OVERHEAD);
    }

    #[test]
    fn iterator_walks_both_ways_in_internal_order() {
        let m = Arc::new(MemTable::new(1));
        for (i, k) in [b"c", b"a", b"b"].iter().enumerate() {
            m.add(i as u64 + 1, ValueKind::Value, *k, b"v");
        }
        m.add(10, ValueKind::Value, b"b", b"newer");
        let mut it = m.iter();
        it.seek_to_first();
        let mut seen = Vec::new();
        while it.valid() {
            seen.push((user_key(it.key()).to_vec(), it.value().to_vec()));
            it.next();
        }
        assert_eq!(
            seen,
            vec![
                (b"a".to_vec(), b"v".to_vec()),
                (b"b".to_vec(), b"newer".to_vec()),
                (b"b".to_vec(), b"v".to_vec()),
                (b"c".to_vec(), b"v".to_vec())
            ]
        );
        it.seek_to_last();
        assert_eq!(user_key(it.key()), b"c");
        it.prev();
        it.prev();
        assert_eq!(it.value(), b"newer");
        it.seek(&make_internal_key(b"b", 5, KIND_FOR_SEEK));
        assert_eq!(it.value(), b"v");
        it.seek_for_prev(&make_internal_key(b"b", 5, KIND_FOR_SEEK));
        assert_eq!(it.value(), b"newer");
        it.seek_to_first();
        it.prev();
        assert!(!it.valid());
    }
}
