//! Range tombstones (RocksDB's `DeleteRange`): a tombstone `[start, end)`
//! at sequence `s` deletes every version of every key in the range whose
//! sequence is below `s`, for readers at `s` or later (docs/data_model.md,
//! "Range deletion").
//!
//! [`FragmentedTombstones`] is RocksDB's `FragmentedRangeTombstoneList`:
//! tombstones cut at every start and end into non-overlapping fragments,
//! each with the sequences of the tombstones covering all of it, so that
//! the newest tombstone covering a key at a snapshot is one binary search
//! and one more. Keys compare in the column family's order (the
//! fragments keep it). In the bytewise orders the search first compares
//! words: every fragment's end, past the prefix all bounds share, as one
//! big-endian `u64` in an array of their own, so that a lookup's probes
//! read 8 bytes each from one small array instead of two scattered ones
//! (a point read asks every memtable's fragments, and the fragments of a
//! memtable of range deletions outgrow the caches the skip list's search
//! leaves them).

use crate::comparator::UserComparator;
use crate::key::{make_internal_key, SequenceNumber, ValueKind};

/// One range tombstone: deletes keys in `[start, end)` below `seq`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeTombstone {
    /// First user key deleted.
    pub start: Vec<u8>,
    /// First user key not deleted (exclusive end).
    pub end: Vec<u8>,
    /// The tombstone's sequence number.
    pub seq: SequenceNumber,
}

impl RangeTombstone {
    /// Bytes it holds, for memory accounting.
    pub fn size(&self) -> usize {
        self.start.len() + self.end.len() + 8
    }
}

/// One fragment: `[start, end)` in [`FragmentedTombstones::keys`], and its
/// sequences (descending) in [`FragmentedTombstones::seqs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Fragment {
    start: (u32, u32),
    end: (u32, u32),
    seqs: (u32, u32),
}

/// Tombstones as sorted, non-overlapping fragments (module documentation),
/// laid out flat: a lookup's binary search reads one array of offsets and
/// one buffer of keys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FragmentedTombstones {
    fragments: Vec<Fragment>,
    keys: Vec<u8>,
    seqs: Vec<SequenceNumber>,
    cmp: UserComparator,
    /// The search aid of the bytewise orders (module documentation).
    end_words: Option<EndWords>,
}

/// Each fragment's end as a word past the prefix every bound shares: words
/// that differ order their keys bytewise (a shorter key is padded with
/// zeros, and a key that is a proper prefix of another sorts first);
/// equal words leave the keys to be compared.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct EndWords {
    prefix: Vec<u8>,
    words: Vec<u64>,
    /// The fragments' starts likewise: the common answer (the key is not
    /// covered) needs no key but the lookup's.
    start_words: Vec<u64>,
    /// The last end word of each run of [`EndWords::BLOCK`] fragments: a
    /// search narrows to one run in this small array (which stays in the
    /// caches) before it reads the run's words.
    top: Vec<u64>,
    /// The order is the reverse bytewise one: words order keys backwards.
    reverse: bool,
}

impl EndWords {
    /// Fragments per run of the top level.
    const BLOCK: usize = 32;

    /// Word `a` orders its key strictly before word `b`'s.
    fn before(&self, a: u64, b: u64) -> bool {
        if self.reverse {
            a > b
        } else {
            a < b
        }
    }

    /// How many of the sorted `words` order strictly before `kw`
    /// (`or_equal`: before or equal).
    fn count_before(&self, words: &[u64], kw: u64, or_equal: bool) -> usize {
        partition_branchless(0..words.len(), |i| self.before(words[i], kw) || (or_equal && words[i] == kw))
    }
}

/// The first index of `range` where `pred` is false (`pred` is true on a
/// prefix of it), by a search without a branch on `pred`'s outcome, which
/// is a coin toss for random keys.
fn partition_branchless(range: std::ops::Range<usize>, pred: impl Fn(usize) -> bool) -> usize {
    let (mut base, mut size) = (range.start, range.len());
    if size == 0 {
        return range.start;
    }
    while size > 1 {
        let half = size / 2;
        let mid = base + half;
        base = if pred(mid) { mid } else { base };
        size -= half;
    }
    base + usize::from(pred(base))
}

/// The 8 bytes of `key` from `from`, zero-padded, as a big-endian word.
fn word_at(key: &[u8], from: usize) -> u64 {
    let rest = &key[from.min(key.len())..];
    let n = rest.len().min(8);
    let mut b = [0u8; 8];
    b[..n].copy_from_slice(&rest[..n]);
    u64::from_be_bytes(b)
}

impl FragmentedTombstones {
    /// Fragments `tombstones` in the bytewise order (in any order; empty
    /// ranges are ignored).
    #[cfg(test)]
    pub fn new<'a>(tombstones: impl IntoIterator<Item = &'a RangeTombstone>) -> Self {
        Self::with_comparator(&UserComparator::BYTEWISE, tombstones)
    }

    /// Fragments `tombstones` in `cmp`'s order (in any order; empty ranges,
    /// whose start is not below their end, are ignored).
    pub fn with_comparator<'a>(cmp: &UserComparator, tombstones: impl IntoIterator<Item = &'a RangeTombstone>) -> Self {
        let mut list: Vec<&RangeTombstone> = tombstones.into_iter().filter(|t| cmp.lt(&t.start, &t.end)).collect();
        let mut out = FragmentedTombstones { cmp: cmp.clone(), ..FragmentedTombstones::default() };
        if list.is_empty() {
            return out;
        }
        list.sort_by(|a, b| cmp.compare(&a.start, &b.start));
        let mut bounds: Vec<&[u8]> = list.iter().flat_map(|t| [t.start.as_slice(), t.end.as_slice()]).collect();
        bounds.sort_unstable_by(|a, b| cmp.compare(a, b));
        bounds.dedup();
        // Tombstones started at or before the current bound, by index.
        let mut next = 0;
        let mut active: Vec<&RangeTombstone> = Vec::new();
        let mut pending: Vec<(&[u8], &[u8], Vec<SequenceNumber>)> = Vec::new();
        for pair in bounds.windows(2) {
            let (lo, hi) = (pair[0], pair[1]);
            while next < list.len() && cmp.le(&list[next].start, lo) {
                active.push(list[next]);
                next += 1;
            }
            active.retain(|t| cmp.lt(lo, &t.end));
            if active.is_empty() {
                continue;
            }
            let mut seqs: Vec<SequenceNumber> = active.iter().map(|t| t.seq).collect();
            seqs.sort_unstable_by(|a, b| b.cmp(a));
            seqs.dedup();
            match pending.last_mut() {
                // Adjacent fragments covered alike become one.
                Some(p) if p.1 == lo && p.2 == seqs => p.1 = hi,
                _ => pending.push((lo, hi, seqs)),
            }
        }
        // The bounds are sorted: the first and the last share the prefix
        // all of them share.
        let (first, last) = (bounds[0], bounds[bounds.len() - 1]);
        let common = first.iter().zip(last).take_while(|(a, b)| a == b).count();
        let mut end_words = (cmp.is_bytewise() || cmp.is_reverse_bytewise()).then(|| EndWords {
            prefix: first[..common].to_vec(),
            words: Vec::with_capacity(pending.len()),
            start_words: Vec::with_capacity(pending.len()),
            top: Vec::new(),
            reverse: cmp.is_reverse_bytewise(),
        });
        for (lo, hi, seqs) in pending {
            let mut put = |k: &[u8]| {
                let at = out.keys.len() as u32;
                out.keys.extend_from_slice(k);
                (at, k.len() as u32)
            };
            let (start, end) = (put(lo), put(hi));
            let at = out.seqs.len() as u32;
            out.seqs.extend_from_slice(&seqs);
            out.fragments.push(Fragment { start, end, seqs: (at, seqs.len() as u32) });
            if let Some(w) = end_words.as_mut() {
                w.words.push(word_at(hi, common));
                w.start_words.push(word_at(lo, common));
            }
        }
        if let Some(w) = end_words.as_mut() {
            w.top = w.words.chunks(EndWords::BLOCK).filter_map(|c| c.last().copied()).collect();
        }
        out.end_words = end_words;
        out
    }

    fn bytes(&self, (at, len): (u32, u32)) -> &[u8] {
        &self.keys[at as usize..(at + len) as usize]
    }

    fn seqs_of(&self, f: &Fragment) -> &[SequenceNumber] {
        &self.seqs[f.seqs.0 as usize..(f.seqs.0 + f.seqs.1) as usize]
    }

    /// True when no tombstone covers anything.
    pub fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    fn fragment(&self, key: &[u8]) -> Option<&Fragment> {
        let i = match &self.end_words {
            Some(w) if key.starts_with(&w.prefix) && !self.fragments.is_empty() => {
                // The first fragment whose end is above `key`, words first.
                // The runs before the first whose last end word is not
                // before the key's end before it; the runs after the first
                // whose last end word is after it, after it: the answer is
                // in between (one run, but where words tie across runs).
                let kw = word_at(key, w.prefix.len());
                let n = self.fragments.len();
                let lo = w.count_before(&w.top, kw, false) * EndWords::BLOCK;
                let hi = ((w.count_before(&w.top, kw, true) + 1) * EndWords::BLOCK).min(n);
                let end_le_key = |i: usize| {
                    let wi = w.words[i];
                    w.before(wi, kw) || (wi == kw && self.cmp.le(self.bytes(self.fragments[i].end), key))
                };
                let i = partition_branchless(lo..hi.max(lo), end_le_key);
                // Its start above the key (told by the words when they
                // differ): not covered.
                let sw = *w.start_words.get(i)?;
                if if w.reverse { sw < kw } else { sw > kw } {
                    return None;
                }
                i
            }
            _ => self.fragments.partition_point(|f| self.cmp.le(self.bytes(f.end), key)),
        };
        self.fragments.get(i).filter(|f| self.cmp.le(self.bytes(f.start), key))
    }

    /// The sequence of the newest tombstone covering `key` that a reader at
    /// `read_seq` sees (at or below it); 0 when none does. A version of
    /// `key` is deleted for that reader when its sequence is below this.
    pub fn max_covering(&self, key: &[u8], read_seq: SequenceNumber) -> SequenceNumber {
        let Some(f) = self.fragment(key) else { return 0 };
        let seqs = self.seqs_of(f);
        let i = seqs.partition_point(|s| *s > read_seq);
        seqs.get(i).copied().unwrap_or(0)
    }

    /// The newest tombstone covering `key` that a reader at `read_seq` sees,
    /// with the fragment it covers `key` in: its sequence and the
    /// fragment's start and end. Every key of the fragment is covered by a
    /// tombstone at that sequence.
    pub fn covering(&self, key: &[u8], read_seq: SequenceNumber) -> Option<(SequenceNumber, &[u8], &[u8])> {
        let f = self.fragment(key)?;
        let seqs = self.seqs_of(f);
        let i = seqs.partition_point(|s| *s > read_seq);
        seqs.get(i).map(|&s| (s, self.bytes(f.start), self.bytes(f.end)))
    }

    /// The sequence of the oldest tombstone covering `key` above `seq` (the
    /// first that deletes a version at `seq`), if any.
    pub fn oldest_covering_above(&self, key: &[u8], seq: SequenceNumber) -> Option<SequenceNumber> {
        let f = self.fragment(key)?;
        let seqs = self.seqs_of(f);
        let i = seqs.partition_point(|s| *s > seq);
        i.checked_sub(1).map(|j| seqs[j])
    }

    /// The fragments as tombstones (one per fragment and sequence), sorted
    /// by start then sequence descending: the same coverage as the input.
    pub fn tombstones(&self) -> impl Iterator<Item = RangeTombstone> + '_ {
        self.fragments.iter().flat_map(move |f| {
            self.seqs_of(f).iter().map(move |&seq| RangeTombstone {
                start: self.bytes(f.start).to_vec(),
                end: self.bytes(f.end).to_vec(),
                seq,
            })
        })
    }
}

/// The key range and sequences a table's tombstones add to its metadata:
/// what [`FragmentedTombstones::extend_file_bounds`] changes.
impl FragmentedTombstones {
    /// Widens a table's smallest and largest internal keys (empty when it
    /// has no point entries) and its sequence range to take in the
    /// tombstones: from the first start (before any entry of that key) to
    /// the last end's [`inclusive_bound`] (after any entry of that key; in
    /// an order other than bytewise, the end itself).
    pub fn extend_file_bounds(
        &self,
        smallest: &mut Vec<u8>,
        largest: &mut Vec<u8>,
        seqs: &mut (SequenceNumber, SequenceNumber),
    ) {
        let (Some(first), Some(last)) = (self.fragments.first(), self.fragments.last()) else { return };
        let start = make_internal_key(self.bytes(first.start), crate::key::MAX_SEQUENCE, ValueKind::RangeDeletion);
        if smallest.is_empty() || self.cmp.compare_internal(&start, smallest).is_lt() {
            *smallest = start;
        }
        let last_end = self.bytes(last.end);
        let bound = if self.cmp.is_bytewise() { inclusive_bound(last_end) } else { last_end };
        let end = make_internal_key(bound, 0, ValueKind::Deletion);
        if largest.is_empty() || self.cmp.compare_internal(&end, largest).is_gt() {
            *largest = end;
        }
        for &s in &self.seqs {
            seqs.0 = seqs.0.min(s);
            seqs.1 = seqs.1.max(s);
        }
    }
}

/// The smallest user key above `key` in the bytewise order (`key` followed
/// by a zero byte).
pub fn successor(key: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(key.len() + 1);
    s.extend_from_slice(key);
    s.push(0);
    s
}

/// The largest user key below the exclusive bound `end` when it can be
/// named (`end` is some key followed by a zero byte: that key), else `end`
/// itself, which bounds the range from above (an inclusive bound a file's
/// key range can hold).
pub fn inclusive_bound(end: &[u8]) -> &[u8] {
    match end.split_last() {
        Some((0, rest)) => rest,
        _ => end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(start: &str, end: &str, seq: u64) -> RangeTombstone {
        RangeTombstone { start: start.into(), end: end.into(), seq }
    }

    #[test]
    fn overlapping_tombstones_cut_into_fragments() {
        let f = FragmentedTombstones::new(&[t("b", "f", 10), t("d", "h", 20), t("x", "x", 30)]);
        assert_eq!(f.max_covering(b"a", 100), 0);
        assert_eq!(f.max_covering(b"b", 100), 10);
        assert_eq!(f.max_covering(b"d", 100), 20);
        assert_eq!(f.max_covering(b"d", 15), 10, "a reader at 15 does not see the tombstone at 20");
        assert_eq!(f.max_covering(b"d", 5), 0);
        assert_eq!(f.max_covering(b"f", 100), 20);
        assert_eq!(f.max_covering(b"h", 100), 0, "the end is exclusive");
        assert_eq!(f.max_covering(b"x", 100), 0, "an empty range covers nothing");
        assert_eq!(f.oldest_covering_above(b"e", 5), Some(10));
        assert_eq!(f.oldest_covering_above(b"e", 10), Some(20));
        assert_eq!(f.oldest_covering_above(b"e", 20), None);
    }

    /// Words that tie across the search's runs of fragments (every end
    /// word the same within each of two groups): the answer is found past
    /// the run the tie starts in, in both bytewise orders.
    #[test]
    fn words_tied_across_runs_are_searched_past_the_run() {
        let key = |group: char, n: u32| format!("{group}zzzzzzz{n:05}").into_bytes();
        for reverse in [false, true] {
            let cmp = if reverse {
                UserComparator::new(&crate::comparator::reverse_bytewise())
            } else {
                UserComparator::BYTEWISE
            };
            let list: Vec<RangeTombstone> = ['a', 'b']
                .iter()
                .flat_map(|&g| (0..100u32).map(move |i| (g, i)))
                .map(|(g, i)| {
                    let (a, b) = (key(g, 10 * i), key(g, 10 * i + 5));
                    let (start, end) = if cmp.le(&a, &b) { (a, b) } else { (b, a) };
                    RangeTombstone { start, end, seq: u64::from(i) + 1 }
                })
                .collect();
            let f = FragmentedTombstones::with_comparator(&cmp, &list);
            assert!(f.fragments.len() > 2 * EndWords::BLOCK);
            for g in ['a', 'b'] {
                for n in 0..1000u32 {
                    let k = key(g, n);
                    let want = list
                        .iter()
                        .filter(|t| cmp.le(&t.start, &k) && cmp.lt(&k, &t.end))
                        .map(|t| t.seq)
                        .max()
                        .unwrap_or(0);
                    assert_eq!(
                        f.max_covering(&k, u64::MAX),
                        want,
                        "reverse {reverse}: {}",
                        String::from_utf8_lossy(&k)
                    );
                }
            }
        }
    }

    #[test]
    fn bounds_name_the_key_before_an_exclusive_end_when_they_can() {
        assert_eq!(successor(b"ab"), b"ab\0");
        assert_eq!(inclusive_bound(b"ab\0"), b"ab");
        assert_eq!(inclusive_bound(b"ab"), b"ab");
    }

    proptest! {
        /// Fragments answer as the tombstones do, one by one.
        #[test]
        fn fragments_cover_as_the_tombstones(
            raw in proptest::collection::vec((0u8..12, 0u8..12, 1u64..50), 0..12),
            key in 0u8..13,
            read in 0u64..60,
        ) {
            let list: Vec<RangeTombstone> =
                raw.iter().map(|&(a, b, s)| RangeTombstone { start: vec![a], end: vec![b], seq: s }).collect();
            let f = FragmentedTombstones::new(&list);
            let k = [key];
            let covering: Vec<u64> =
                list.iter().filter(|t| t.start.as_slice() <= &k[..] && &k[..] < t.end.as_slice()).map(|t| t.seq).collect();
            let want = covering.iter().copied().filter(|s| *s <= read).max().unwrap_or(0);
            prop_assert_eq!(f.max_covering(&[key], read), want);
            let above = covering.iter().copied().filter(|s| *s > read).min();
            prop_assert_eq!(f.oldest_covering_above(&[key], read), above);
            let again = FragmentedTombstones::new(&f.tombstones().collect::<Vec<_>>());
            prop_assert_eq!(again.max_covering(&[key], read), want);
        }

        /// The word search answers as the plain one, in both bytewise
        /// orders, for keys of any length sharing long prefixes (words that
        /// tie, keys that are prefixes of others, keys outside the prefix).
        #[test]
        fn the_word_search_answers_as_a_plain_search(
            raw in proptest::collection::vec((0u16..40, 0u16..40, 1u64..50), 1..120),
            probe in 0u16..45,
            read in 0u64..60,
            reverse in proptest::prelude::any::<bool>(),
        ) {
            // Keys like "pre" + up to 10 digits and letters: long shared
            // prefixes, variable lengths.
            let key = |n: u16| {
                let mut k = b"prefix/".to_vec();
                k.extend(format!("{n:o}").bytes());
                if n.is_multiple_of(3) { k.extend_from_slice(b"\0\0\0\0\0\0\0\0x"); }
                if n == 44 { k = b"other".to_vec(); }
                k
            };
            let cmp = if reverse {
                UserComparator::new(&crate::comparator::reverse_bytewise())
            } else {
                UserComparator::BYTEWISE
            };
            let list: Vec<RangeTombstone> = raw
                .iter()
                .map(|&(a, b, s)| {
                    let (a, b) = (key(a), key(b));
                    let (start, end) = if cmp.le(&a, &b) { (a, b) } else { (b, a) };
                    RangeTombstone { start, end, seq: s }
                })
                .collect();
            let f = FragmentedTombstones::with_comparator(&cmp, &list);
            prop_assert_eq!(f.end_words.is_some(), !f.is_empty());
            let k = key(probe);
            let want = list
                .iter()
                .filter(|t| cmp.le(&t.start, &k) && cmp.lt(&k, &t.end) && t.seq <= read)
                .map(|t| t.seq)
                .max()
                .unwrap_or(0);
            prop_assert_eq!(f.max_covering(&k, read), want);
        }
    }
}
