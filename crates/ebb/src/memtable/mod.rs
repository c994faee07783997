//! The memtable: a concurrent sorted map of recent writes, flushed to an L0 SST
//! once full.
//!
//! Invariants:
//! 1. Entries are keyed by internal key, so every version of a user key is kept
//!    and the newest sorts first.
//! 2. Inserts come from one thread at a time (the write-group leader); reads and
//!    iterators run concurrently with inserts without locks (the arena
//!    skiplist of [`skiplist`]).
//! 3. Once switched to immutable, a memtable never changes again.
//!
//! Memory is accounted as the bytes of the skiplist's nodes (header, tower,
//! key and value: RocksDB's arena usage without the unused block tails), which
//! is what `write_buffer_size` is compared with.
//!
//! Cursors into the skiplist borrow it, or own an `Arc` of the memtable
//! ([`MemTableIterator`]): none outlives the nodes it points to
//! ([`skiplist`] contract 10).

pub(crate) mod skiplist;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use crate::comparator::UserComparator;
use crate::error::Result;
use crate::iter::InternalIterator;
use parking_lot::Mutex;

use crate::key::{
    make_internal_key, parse_internal_key, user_key, with_internal_key, SequenceNumber, ValueKind, KIND_FOR_SEEK,
    MAX_SEQUENCE,
};
use crate::prefix::SliceTransform;
use crate::range_del::{FragmentedTombstones, RangeTombstone};
pub(crate) use skiplist::WARM_LANES;
use skiplist::{hint_prefix_len, Cursor, ListOwner, SkipList};

/// What a point lookup found in a memtable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemLookup {
    /// The newest visible version is a value.
    Value(Vec<u8>),
    /// The newest visible version is a tombstone.
    Deleted,
    /// The newest visible version is a blob index. Writes never put one in a
    /// memtable (flushes and compactions make them, in SSTs); should one be
    /// there, it is reported as what it is, for the reader to resolve,
    /// never as the value.
    BlobIndex(Vec<u8>),
    /// The newest visible version is a merge operand: the reader collects
    /// the key's versions ([`MemTable::versions`]) and merges them.
    Merge,
    /// The newest visible version is a wide-column entity (its serialized
    /// columns).
    Entity(Vec<u8>),
}

/// What a point entry of kind `kind` holding `value` reads as (`None` for
/// a range deletion, never among the point entries: `add` keeps them apart).
fn found(kind: ValueKind, value: &[u8]) -> Option<MemLookup> {
    Some(match kind {
        ValueKind::Value => MemLookup::Value(value.to_vec()),
        ValueKind::Deletion | ValueKind::SingleDeletion => MemLookup::Deleted,
        ValueKind::BlobIndex => MemLookup::BlobIndex(value.to_vec()),
        ValueKind::Merge => MemLookup::Merge,
        ValueKind::WideColumnEntity => MemLookup::Entity(value.to_vec()),
        ValueKind::RangeDeletion => return None,
    })
}

/// A memtable. Shared as `Arc<MemTable>` between the writer, readers,
/// iterators and the flush job.
pub struct MemTable {
    list: SkipList,
    entries: AtomicU64,
    deletions: AtomicU64,
    /// The WAL file whose records this memtable holds (all writes to it went there).
    log_number: u64,
    /// Set once any write skipped the WAL: the data survives only by flushing.
    has_unlogged: AtomicBool,
    /// Sequence number of the first entry (0 while empty).
    first_seq: AtomicU64,
    /// The database's last sequence number when this memtable began to take
    /// its family's writes: every later write to the family is in it or in
    /// a newer memtable (RocksDB `MemTable::earliest_seq_`). Set once, by
    /// whoever makes the memtable, before any write reaches it.
    earliest_seq: AtomicU64,
    /// Set while a flush job has taken this (immutable) memtable, so a
    /// second flush running beside it takes only the ones after it. Changed
    /// with the db mutex held.
    flush_claimed: AtomicBool,
    /// Set once a flush has installed this memtable's table and told its
    /// listeners (`flush(true)` waits for it). Changed with the db mutex
    /// held.
    flush_done: AtomicBool,
    /// Range tombstones as written.
    range_dels: Mutex<Vec<RangeTombstone>>,
    /// Their fragments, built by the first reader after an insert, with the
    /// count of tombstones they hold (readers load them without a lock).
    range_del_fragments: arc_swap::ArcSwapOption<(usize, Arc<FragmentedTombstones>)>,
    /// Range tombstones inserted (0: readers skip the fragments).
    range_del_count: AtomicUsize,
    /// Bytes the range tombstones take.
    range_del_bytes: AtomicUsize,
    /// The prefixes of the keys added (`memtable_prefix_bloom_size_ratio`).
    prefix_bloom: Option<PrefixBloom>,
    /// The column family's prefix extractor, when the list keeps prefix
    /// hints (`skiplist` contract 7).
    hint_extractor: Option<Arc<dyn SliceTransform>>,
}

/// A memtable's bloom filter of key prefixes (RocksDB's memtable prefix
/// bloom): lock-free bits, six probes per prefix.
struct PrefixBloom {
    extractor: Arc<dyn SliceTransform>,
    bits: Box<[AtomicU64]>,
}

impl PrefixBloom {
    const PROBES: u64 = 6;

    fn new(extractor: Arc<dyn SliceTransform>, bytes: usize) -> Self {
        let words = (bytes / 8).max(1);
        PrefixBloom { extractor, bits: (0..words).map(|_| AtomicU64::new(0)).collect() }
    }

    /// Bit positions of a prefix.
    fn positions(&self, prefix: &[u8]) -> impl Iterator<Item = (usize, u64)> + '_ {
        let h = xxhash_rust::xxh3::xxh3_64(prefix);
        let (h1, h2) = (h, (h >> 32) | 1);
        let n = self.bits.len() as u64 * 64;
        (0..Self::PROBES).map(move |i| {
            let bit = h1.wrapping_add(i.wrapping_mul(h2)) % n;
            ((bit / 64) as usize, 1u64 << (bit % 64))
        })
    }

    fn add(&self, key: &[u8]) {
        if self.extractor.in_domain(key) {
            for (w, m) in self.positions(self.extractor.transform(key)) {
                self.bits[w].fetch_or(m, AtomicOrdering::Relaxed);
            }
        }
    }

    /// False only when no key with `key`'s prefix was added.
    fn may_contain(&self, key: &[u8]) -> bool {
        !self.extractor.in_domain(key)
            || self
                .positions(self.extractor.transform(key))
                .all(|(w, m)| self.bits[w].load(AtomicOrdering::Relaxed) & m != 0)
    }
}

impl MemTable {
    /// A new, empty memtable whose writes go to WAL `log_number`, its keys
    /// in `cmp`'s order.
    pub fn new(log_number: u64, cmp: UserComparator) -> Self {
        Self::with_filters(log_number, cmp, None, 0, None)
    }

    /// A new, empty memtable with a prefix bloom filter of about `bytes`
    /// for `extractor`'s prefixes, when given, and, when `index_slots > 0`
    /// and the order is a built-in one, a hash index of user keys for point
    /// lookups with that many 8-byte slots (`skiplist` contract 5), and,
    /// when `hints` gives an extractor and a number of slots, a table of
    /// that many 8-byte hints from the prefixes of keys to the nodes last
    /// inserted with them, through which inserts land near their prefix's
    /// keys (`skiplist` contract 7), and as many entries naming each
    /// prefix's first key, from which seeks start (contract 8).
    pub fn with_filters(
        log_number: u64,
        cmp: UserComparator,
        bloom: Option<(Arc<dyn SliceTransform>, usize)>,
        index_slots: usize,
        hints: Option<(Arc<dyn SliceTransform>, usize)>,
    ) -> Self {
        let hints = hints.filter(|&(_, slots)| slots > 0);
        let hint_slots = hints.as_ref().map_or(0, |&(_, slots)| slots);
        MemTable {
            list: {
                let list = SkipList::with_key_index(cmp, index_slots).with_prefix_hints(hint_slots);
                match &hints {
                    Some((x, slots)) => list.with_prefix_firsts(Arc::clone(x), *slots),
                    None => list,
                }
            },
            entries: AtomicU64::new(0),
            deletions: AtomicU64::new(0),
            log_number,
            has_unlogged: AtomicBool::new(false),
            first_seq: AtomicU64::new(0),
            earliest_seq: AtomicU64::new(0),
            flush_claimed: AtomicBool::new(false),
            flush_done: AtomicBool::new(false),
            range_dels: Mutex::new(Vec::new()),
            range_del_fragments: arc_swap::ArcSwapOption::empty(),
            range_del_count: AtomicUsize::new(0),
            range_del_bytes: AtomicUsize::new(0),
            prefix_bloom: bloom.map(|(x, bytes)| PrefixBloom::new(x, bytes)),
            hint_extractor: hints.map(|(x, _)| x),
        }
    }

    /// Inserts one entry. Inserts are serialised (one writer at a time).
    pub fn add(&self, seq: SequenceNumber, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        if kind == ValueKind::RangeDeletion {
            self.add_range_deletion(seq, user_key, value);
            return;
        }
        self.entries.fetch_add(1, AtomicOrdering::Relaxed);
        if kind.is_deletion() {
            self.deletions.fetch_add(1, AtomicOrdering::Relaxed);
        }
        let _ = self.first_seq.compare_exchange(0, seq, AtomicOrdering::Relaxed, AtomicOrdering::Relaxed);
        if let Some(b) = &self.prefix_bloom {
            b.add(user_key);
        }
        let prefix_len = self.hint_extractor.as_ref().map_or(0, |x| hint_prefix_len(x.as_ref(), user_key));
        with_internal_key(user_key, seq, kind, |ikey| self.list.insert_with_prefix(ikey, value, prefix_len));
    }

    /// Readies the inserts of `entries` (sequence, kind, user key), which
    /// [`MemTable::add`] is about to make: their descents of the skiplist
    /// run together so that their cache misses overlap
    /// ([`SkipList::warm`]). Changes nothing; at most [`WARM_LANES`] are
    /// used. A write group's batch calls this before each run of inserts.
    pub fn warm(&self, entries: &[(SequenceNumber, ValueKind, &[u8])]) {
        let mut buf = [0u8; 64 * WARM_LANES];
        let mut lens = [0usize; WARM_LANES];
        let mut n = 0;
        for &(seq, kind, user_key) in entries {
            // Range tombstones are not in the list; long keys (over a
            // 64-byte slot) are inserted without warming (the gain is for
            // the short keys of most workloads).
            if n == WARM_LANES || kind == ValueKind::RangeDeletion {
                continue;
            }
            if let Some(len) = crate::key::write_internal_key(&mut buf[n * 64..(n + 1) * 64], user_key, seq, kind) {
                lens[n] = len;
                n += 1;
            }
        }
        let mut keys: [&[u8]; WARM_LANES] = [&[]; WARM_LANES];
        for (i, k) in keys.iter_mut().enumerate().take(n) {
            *k = &buf[i * 64..i * 64 + lens[i]];
        }
        if n > 1 {
            self.list.warm(&keys[..n]);
        }
    }

    /// Adds the range tombstone `[start, end)` at `seq` (kept apart from the
    /// point entries, as RocksDB's range-deletion memtable). An empty range
    /// is not kept.
    pub fn add_range_deletion(&self, seq: SequenceNumber, start: &[u8], end: &[u8]) {
        let _ = self.first_seq.compare_exchange(0, seq, AtomicOrdering::Relaxed, AtomicOrdering::Relaxed);
        if !self.list.comparator().lt(start, end) {
            return;
        }
        let t = RangeTombstone { start: start.to_vec(), end: end.to_vec(), seq };
        self.range_del_bytes.fetch_add(t.size() + 32, AtomicOrdering::Relaxed);
        self.range_dels.lock().push(t);
        self.range_del_count.fetch_add(1, AtomicOrdering::Release);
        self.entries.fetch_add(1, AtomicOrdering::Relaxed);
        self.deletions.fetch_add(1, AtomicOrdering::Relaxed);
    }

    fn has_range_dels(&self) -> bool {
        self.range_del_count.load(AtomicOrdering::Acquire) > 0
    }

    /// The range tombstones, fragmented (`None` when there are none).
    pub fn range_tombstones(&self) -> Option<Arc<FragmentedTombstones>> {
        let count = self.range_del_count.load(AtomicOrdering::Acquire);
        if count == 0 {
            return None;
        }
        if let Some(cached) = self.range_del_fragments.load().as_ref().filter(|c| c.0 == count) {
            return Some(Arc::clone(&cached.1));
        }
        let list = self.range_dels.lock();
        let fragments = Arc::new(FragmentedTombstones::with_comparator(self.list.comparator(), list.iter()));
        self.range_del_fragments.store(Some(Arc::new((list.len(), Arc::clone(&fragments)))));
        Some(fragments)
    }

    /// The range tombstones as written (for a flush).
    pub fn range_tombstone_list(&self) -> Vec<RangeTombstone> {
        if !self.has_range_dels() {
            return Vec::new();
        }
        self.range_dels.lock().clone()
    }

    /// The newest range tombstone covering `key` that a reader at
    /// `read_seq` sees (0: none).
    pub fn max_covering(&self, key: &[u8], read_seq: SequenceNumber) -> SequenceNumber {
        self.range_tombstones().map_or(0, |t| t.max_covering(key, read_seq))
    }

    /// Sets the sequence after which every write to the family is in this
    /// memtable or a newer one.
    pub fn set_earliest_sequence(&self, seq: SequenceNumber) {
        self.earliest_seq.store(seq, AtomicOrdering::Relaxed);
    }

    /// See [`MemTable::set_earliest_sequence`].
    pub fn earliest_sequence(&self) -> SequenceNumber {
        self.earliest_seq.load(AtomicOrdering::Relaxed)
    }

    /// The sequence number of the newest write to `key` in this memtable:
    /// its newest version of any kind, or a range tombstone covering it,
    /// whichever is newer; 0 when none (RocksDB's
    /// `GetLatestSequenceForKey` over one memtable).
    pub fn latest_sequence(&self, key: &[u8]) -> SequenceNumber {
        let covering = self.max_covering(key, crate::key::MAX_SEQUENCE);
        if self.prefix_bloom.as_ref().is_some_and(|b| !b.may_contain(key)) {
            return covering;
        }
        let mut c = self.list.cursor();
        with_internal_key(key, crate::key::MAX_SEQUENCE, crate::key::KIND_FOR_SEEK, |lookup| c.seek_versions(lookup));
        let point = parse_internal_key(c.key()).filter(|p| c.valid() && p.user_key == key).map_or(0, |p| p.seq);
        point.max(covering)
    }

    /// Records that a write reached this memtable without the WAL.
    pub fn mark_unlogged(&self) {
        self.has_unlogged.store(true, AtomicOrdering::Relaxed);
    }

    /// True when some write in this memtable is not in any WAL.
    pub fn has_unlogged(&self) -> bool {
        self.has_unlogged.load(AtomicOrdering::Relaxed)
    }

    /// The newest version of a user key visible at a snapshot: `lookup` is
    /// its internal key with the snapshot's sequence and
    /// [`crate::key::KIND_FOR_SEEK`]
    /// (built once by the caller for every memtable and table it asks).
    pub fn get(&self, lookup: &[u8]) -> Option<MemLookup> {
        self.get_entry(lookup).map(|(_, found)| found)
    }

    /// [`MemTable::get`] with the sequence of the version found.
    pub fn get_entry(&self, lookup: &[u8]) -> Option<(SequenceNumber, MemLookup)> {
        if self.prefix_bloom.as_ref().is_some_and(|b| !b.may_contain(user_key(lookup))) {
            return None;
        }
        let mut c = self.list.cursor();
        c.seek_versions(lookup);
        // With timestamps, the first entry at or after `(key, read's
        // timestamp)` of the key is its newest version at or below it.
        let cmp = self.list.comparator();
        let parsed = parse_internal_key(c.key()).filter(|p| c.valid() && cmp.same_key(p.user_key, user_key(lookup)))?;
        Some((parsed.seq, found(parsed.kind, c.value())?))
    }

    /// [`MemTable::get_entry`] in one search with [`MemTable::versions`]:
    /// when the newest visible version is a merge operand, the key's
    /// versions from it on are appended to `out` as `versions` appends them
    /// (a read then merges them without searching this memtable again).
    pub fn get_entry_or_versions(
        &self,
        lookup: &[u8],
        out: &mut Vec<(SequenceNumber, ValueKind, Vec<u8>)>,
    ) -> Option<(SequenceNumber, MemLookup)> {
        let want = user_key(lookup);
        if self.prefix_bloom.as_ref().is_some_and(|b| !b.may_contain(want)) {
            return None;
        }
        let mut c = self.list.cursor();
        c.seek_versions(lookup);
        let first = parse_internal_key(c.key()).filter(|p| c.valid() && p.user_key == want)?;
        let (seq, lookup) = (first.seq, found(first.kind, c.value())?);
        if lookup == MemLookup::Merge {
            collect_versions(&mut c, want, out);
        }
        Some((seq, lookup))
    }

    /// Appends every version of `lookup`'s user key visible at its sequence
    /// (newest first: sequence, kind, value) to `out`, stopping after the
    /// first that is not a merge operand (older ones cannot matter to a
    /// read). Returns true when it stopped there.
    pub fn versions(&self, lookup: &[u8], out: &mut Vec<(SequenceNumber, ValueKind, Vec<u8>)>) -> bool {
        let want = user_key(lookup);
        if self.prefix_bloom.as_ref().is_some_and(|b| !b.may_contain(want)) {
            return false;
        }
        let mut c = self.list.cursor();
        c.seek_versions(lookup);
        collect_versions(&mut c, want, out)
    }

    /// How many merge operands sit on top of `key`'s newest version in this
    /// memtable (RocksDB's `CountSuccessiveMergeEntries`).
    pub fn successive_merges(&self, key: &[u8]) -> usize {
        let mut c = self.list.cursor();
        with_internal_key(key, crate::key::MAX_SEQUENCE, crate::key::KIND_FOR_SEEK, |lookup| c.seek_versions(lookup));
        let mut n = 0;
        while c.valid() {
            match parse_internal_key(c.key()) {
                Some(p) if p.user_key == key && p.kind == ValueKind::Merge => n += 1,
                _ => break,
            }
            c.next();
        }
        n
    }

    /// About how many entries of user keys in `[start, limit)` the
    /// memtable holds, and their bytes (RocksDB's
    /// `MemTable::ApproximateStats`): the range's share of the skiplist
    /// ([`SkipList::approximate_range_count`]: a few percent off, exact for
    /// small lists and ranges), and that share of the memtable's bytes. A
    /// range with `limit <= start` holds nothing.
    pub fn approximate_stats(&self, start: &[u8], limit: &[u8]) -> (u64, u64) {
        if !self.list.comparator().lt(start, limit) {
            return (0, 0);
        }
        let entries = self.num_entries().saturating_sub(self.range_del_count.load(AtomicOrdering::Acquire) as u64);
        if entries == 0 {
            return (0, 0);
        }
        let key = |k: &[u8]| make_internal_key(k, MAX_SEQUENCE, KIND_FOR_SEEK);
        let count = self.list.approximate_range_count(&key(start), &key(limit), entries).min(entries);
        let bytes = (u128::from(count) * self.approximate_memory_usage() as u128 / u128::from(entries)) as u64;
        (count, bytes)
    }

    /// Bytes charged against `write_buffer_size`: entries, range
    /// tombstones and the prefix bloom filter (not the key index).
    pub fn approximate_memory_usage(&self) -> usize {
        let bloom = self.prefix_bloom.as_ref().map_or(0, |b| b.bits.len() * 8);
        self.list.memory_usage() + self.range_del_bytes.load(AtomicOrdering::Relaxed) + bloom
    }

    /// [`MemTable::approximate_memory_usage`] with the key index (its first
    /// tier from the start, its second once made; `skiplist` contract 5):
    /// the memory the memtable holds, as `ebb.cur-size-all-mem-tables`
    /// reports.
    pub fn allocated_bytes(&self) -> usize {
        self.approximate_memory_usage() + self.list.index_bytes()
    }

    /// Number of entries (every version counts).
    pub fn num_entries(&self) -> u64 {
        self.entries.load(AtomicOrdering::Relaxed)
    }

    /// Number of tombstones.
    #[cfg(test)]
    pub fn num_deletions(&self) -> u64 {
        self.deletions.load(AtomicOrdering::Relaxed)
    }

    /// True when nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty() && !self.has_range_dels()
    }

    /// The WAL this memtable's writes went to.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// Whether a flush job has taken this memtable (see `set_flush_claimed`).
    pub(crate) fn flush_claimed(&self) -> bool {
        self.flush_claimed.load(AtomicOrdering::Relaxed)
    }

    /// Marks this memtable taken by a flush job, or given back when the job
    /// ends without installing it. Called with the db mutex held.
    pub(crate) fn set_flush_claimed(&self, claimed: bool) {
        self.flush_claimed.store(claimed, AtomicOrdering::Relaxed);
    }

    /// Whether a flush has installed this memtable and told its listeners.
    pub(crate) fn flush_done(&self) -> bool {
        self.flush_done.load(AtomicOrdering::Relaxed)
    }

    /// Marks this memtable flushed, listeners told. Called with the db
    /// mutex held.
    pub(crate) fn set_flush_done(&self) {
        self.flush_done.store(true, AtomicOrdering::Relaxed);
    }

    /// Sequence number of the first insert, 0 when empty.
    #[cfg(test)]
    pub fn first_sequence(&self) -> SequenceNumber {
        self.first_seq.load(AtomicOrdering::Relaxed)
    }

    /// An iterator over this memtable; it keeps the memtable alive.
    pub fn iter(self: &Arc<Self>) -> MemTableIterator {
        MemTableIterator { cursor: Cursor::new(Arc::clone(self)) }
    }
}

impl ListOwner for MemTable {
    fn skip_list(&self) -> &SkipList {
        &self.list
    }
}

/// The versions of user key `want` from the cursor `c` on (as
/// [`MemTable::versions`] appends them), down to the first that is not an
/// operand (true when one ended them).
fn collect_versions(
    c: &mut Cursor<&SkipList>,
    want: &[u8],
    out: &mut Vec<(SequenceNumber, ValueKind, Vec<u8>)>,
) -> bool {
    while c.valid() {
        let Some(p) = parse_internal_key(c.key()) else { return false };
        if p.user_key != want {
            return false;
        }
        out.push((p.seq, p.kind, c.value().to_vec()));
        if p.kind != ValueKind::Merge {
            return true;
        }
        c.next();
    }
    false
}

/// An [`InternalIterator`] over a memtable: a cursor into its skiplist that
/// owns an `Arc` of the memtable, which keeps the list alive (`skiplist`
/// contract 10). A step forward follows one link; a step back is a search
/// from the head (the nodes have no back links, as in LevelDB).
pub struct MemTableIterator {
    cursor: Cursor<Arc<MemTable>>,
}

impl InternalIterator for MemTableIterator {
    fn valid(&self) -> bool {
        self.cursor.valid()
    }
    fn seek_to_first(&mut self) {
        self.cursor.seek_to_first();
    }
    fn seek_to_last(&mut self) {
        self.cursor.seek_to_last();
    }
    fn seek(&mut self, target: &[u8]) {
        self.cursor.seek(target);
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.cursor.seek_for_prev(target);
    }
    fn next(&mut self) {
        self.cursor.next();
    }
    fn prev(&mut self) {
        self.cursor.prev();
    }
    fn key(&self) -> &[u8] {
        self.cursor.key()
    }
    fn value(&self) -> &[u8] {
        self.cursor.value()
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, KIND_FOR_SEEK};

    fn get(m: &MemTable, key: &[u8], snapshot: SequenceNumber) -> Option<MemLookup> {
        m.get(&make_internal_key(key, snapshot, KIND_FOR_SEEK))
    }

    #[test]
    fn get_sees_the_newest_visible_version() {
        let m = MemTable::new(1, UserComparator::BYTEWISE);
        m.add(1, ValueKind::Value, b"k", b"v1");
        m.add(2, ValueKind::Value, b"k", b"v2");
        m.add(3, ValueKind::Deletion, b"k", b"");
        m.add(4, ValueKind::Value, b"k2", b"x");
        assert_eq!(get(&m, b"k", 1), Some(MemLookup::Value(b"v1".to_vec())));
        assert_eq!(get(&m, b"k", 2), Some(MemLookup::Value(b"v2".to_vec())));
        assert_eq!(get(&m, b"k", 3), Some(MemLookup::Deleted));
        assert_eq!(get(&m, b"k", 100), Some(MemLookup::Deleted));
        assert_eq!(get(&m, b"k2", 3), None);
        assert_eq!(get(&m, b"j", 100), None);
        assert_eq!(m.num_entries(), 4);
        assert_eq!(m.num_deletions(), 1);
        assert_eq!(m.first_sequence(), 1);
        // Each node: 16-byte header, a tower of at least one link, key, value.
        assert!(m.approximate_memory_usage() >= 4 * (16 + 8 + 9));
    }

    #[test]
    fn approximate_stats_estimate_a_range_share_of_the_entries() {
        for n in [500u32, 20_000, 200_000] {
            let m = MemTable::new(1, UserComparator::BYTEWISE);
            for i in 0..n {
                m.add(u64::from(i) + 1, ValueKind::Value, format!("k{i:06}").as_bytes(), b"v");
            }
            let count = |a: u32, b: u32| {
                m.approximate_stats(format!("k{a:06}").as_bytes(), format!("k{b:06}").as_bytes()).0 as f64
            };
            let near = |got: f64, want: u32, ctx: &str| {
                let want = f64::from(want);
                assert!((got - want).abs() <= want * 0.15 + 1.0, "n {n}, {ctx}: {got} for {want}");
            };
            assert_eq!(count(0, n), f64::from(n), "n {n}: the whole list");
            near(count(0, n / 2), n / 2, "half");
            near(count(n / 4, n / 2), n / 4, "a quarter");
            near(count(n / 3, n / 3 + 40), 40, "a few (counted exactly)");
            assert_eq!(count(n / 2, n / 2), 0.0, "n {n}: empty range");
            assert_eq!(count(n, n + 10), 0.0, "n {n}: past the end");
            let (c, bytes) = m.approximate_stats(b"k", b"l");
            assert_eq!(bytes, m.approximate_memory_usage() as u64, "n {n}: every entry's bytes ({c})");
        }
    }

    #[test]
    fn iterator_walks_both_ways_in_internal_order() {
        let m = Arc::new(MemTable::new(1, UserComparator::BYTEWISE));
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
