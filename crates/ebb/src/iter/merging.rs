//! The merging iterator: one sorted view over several sorted children
//! (LevelDB `table/merger.cc` and RocksDB `table/merging_iterator.cc`: a
//! binary heap of the children, with RocksDB's error handling).
//!
//! Invariants:
//! 1. In the forward direction every child is positioned at its first entry
//!    `>= key()`; in the reverse direction at its last entry `<= key()`
//!    (other than the current child). Switching direction re-seeks the others.
//! 2. `heap` holds exactly the valid children, as a binary heap whose top
//!    (`heap[0]`) holds `key()`: in the forward direction the child with the
//!    smallest key, the lowest-numbered one on equal keys; in the reverse
//!    direction the largest key, the highest-numbered one on equal keys (so
//!    a reverse scan returns the forward order backwards).
//! 3. The iterator is valid only while no child has reported an error since
//!    the last seek (RocksDB `MergingIterator`): a child that fails has lost
//!    its place, so the entries it would have shadowed must not be returned
//!    from the others. `status()` is the first such error, and the heap is
//!    empty while it is set.
//!
//! Error rule, precisely: `seek_to_first`, `seek_to_last`, `seek` and
//! `seek_for_prev` forget the error, position every child, and record the
//! status of each child that is then invalid; `next` and `prev` record the
//! status of each child they moved that became invalid (only the current
//! child, or every child on a direction switch). The error recorded (the
//! lowest-numbered child's when one movement fails several) makes the
//! iterator invalid, so nothing moves it until the next seek, which clears
//! it only if no child reports an error after it. A new iterator starts with
//! the first error its children report before any positioning (an
//! [`super::EmptyIterator`] standing for a table that failed to open).
//!
//! Children must keep contract 2 of [`InternalIterator`]: a child whose
//! status is an error is not valid. That is what lets a child's status be
//! read only when it turns invalid, never at every step. Debug builds check
//! the contract for every child moved.
//!
//! Cost: a `next` or `prev` in the current direction moves one child and
//! restores the heap in O(log k) key comparisons (k children: memtables, L0
//! files, one per deeper level; k reaches the L0 stop trigger's count
//! exactly when writes press), where a linear scan for the smallest costs
//! k - 1. A seek or a direction switch positions every child and rebuilds
//! the heap in O(k). A direction switch copies the current key into a
//! buffer the iterator keeps, so it allocates only when a key is longer
//! than any before.

use std::cmp::Ordering;

use super::InternalIterator;
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::key::SequenceNumber;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Merges children into one sorted sequence. Equal keys from different
/// children are all returned, earlier children first.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// The valid children by index, a binary heap (invariant 2).
    heap: Vec<usize>,
    direction: Direction,
    /// The first error a child reported since the last seek (invariant 3).
    error: Option<Error>,
    /// The key a direction switch re-seeks the other children to, kept so
    /// that a switch does not allocate.
    switch_key: Vec<u8>,
    /// The order of the children's keys.
    cmp: UserComparator,
    /// Per child, a sequence number no entry of it is above, when known
    /// (`u64::MAX` otherwise): what [`MergingIterator::skip_older`] goes by.
    newest: Vec<SequenceNumber>,
}

/// Whether child `a` comes before child `b` in `direction` (invariant 2).
/// Both must be valid and distinct.
fn before(
    cmp: &UserComparator,
    children: &[Box<dyn InternalIterator>],
    direction: Direction,
    a: usize,
    b: usize,
) -> bool {
    let order = cmp.compare_internal(children[a].key(), children[b].key()).then(a.cmp(&b));
    match direction {
        Direction::Forward => order == Ordering::Less,
        Direction::Reverse => order == Ordering::Greater,
    }
}

impl MergingIterator {
    /// Merges `children`, whose keys are internal keys in `cmp`'s order; on
    /// equal keys the child listed first comes first.
    pub fn new(cmp: UserComparator, children: Vec<Box<dyn InternalIterator>>) -> Self {
        let error = children.iter().find_map(|c| c.status().err());
        let heap = Vec::with_capacity(children.len());
        let newest = vec![SequenceNumber::MAX; children.len()];
        MergingIterator { children, heap, direction: Direction::Forward, error, switch_key: Vec::new(), cmp, newest }
    }

    /// Sets, per child, a sequence number none of its entries is above
    /// (a table's largest, a level's largest over its tables).
    pub fn with_newest(mut self, newest: Vec<SequenceNumber>) -> Self {
        if newest.len() == self.children.len() {
            self.newest = newest;
        }
        self
    }

    /// Whether some valid child's entries are all older than `below`
    /// (what [`MergingIterator::skip_older`] would move).
    pub fn can_skip_older(&self, below: SequenceNumber) -> bool {
        self.error.is_none() && self.children.iter().zip(&self.newest).any(|(c, &n)| n < below && c.valid())
    }

    /// Skips, in the current direction, the children whose entries are all
    /// older than `below` over what lies between their position and
    /// `target`: going forwards, each such child before `target` seeks to
    /// it; backwards, each such child after `target` seeks back to it. The
    /// caller knows that a range tombstone at `below` covers that whole
    /// stretch (RocksDB's range-tombstone-aware merging iterator), so what
    /// is skipped was deleted for the reader; whole blocks and tables are
    /// passed without being read. The children moved may then be past
    /// entries between `key()` and `target`, which were deleted.
    pub fn skip_older(&mut self, below: SequenceNumber, target: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let forward = self.direction == Direction::Forward;
        let mut moved = false;
        for (i, c) in self.children.iter_mut().enumerate() {
            if self.newest[i] >= below || !c.valid() {
                continue;
            }
            let order = self.cmp.compare_internal(c.key(), target);
            if forward && order == Ordering::Less {
                c.seek(target);
                moved = true;
            } else if !forward && order == Ordering::Greater {
                c.seek_for_prev(target);
                moved = true;
            }
        }
        if moved {
            self.rebuild();
        }
    }

    /// Moves the child at heap position `i` down until neither of its heap
    /// children comes before it.
    fn sift_down(&mut self, mut i: usize) {
        let (children, heap, direction, cmp) = (&self.children, &mut self.heap, self.direction, &self.cmp);
        loop {
            let left = 2 * i + 1;
            if left >= heap.len() {
                return;
            }
            let right = left + 1;
            let first = if right < heap.len() && before(cmp, children, direction, heap[right], heap[left]) {
                right
            } else {
                left
            };
            if !before(cmp, children, direction, heap[first], heap[i]) {
                return;
            }
            heap.swap(i, first);
            i = first;
        }
    }

    /// After every child was positioned (a seek or a direction switch):
    /// records the error of the lowest-numbered child that is invalid
    /// because it failed, and builds the heap of the valid ones. `error` is
    /// `None` on entry: a seek has just cleared it, or a direction switch
    /// found the iterator valid.
    fn rebuild(&mut self) {
        self.heap.clear();
        for (i, c) in self.children.iter().enumerate() {
            if c.valid() {
                debug_assert!(c.status().is_ok(), "child {i} is valid with an error status");
                self.heap.push(i);
            } else if self.error.is_none() {
                self.error = c.status().err();
            }
        }
        if self.error.is_some() {
            self.heap.clear();
            return;
        }
        for i in (0..self.heap.len() / 2).rev() {
            self.sift_down(i);
        }
    }

    /// After the top child moved one step in the current direction: puts
    /// it back in its place, takes it out when it is exhausted, or records
    /// its error.
    fn settle_top(&mut self) {
        let top = &self.children[self.heap[0]];
        if top.valid() {
            debug_assert!(top.status().is_ok(), "child {} is valid with an error status", self.heap[0]);
            self.sift_down(0);
        } else if let Err(e) = top.status() {
            self.error = Some(e);
            self.heap.clear();
        } else {
            self.heap.swap_remove(0);
            self.sift_down(0);
        }
    }

    /// Positions every child but `cur` for a switch to `direction` at
    /// `cur`'s key (invariant 1), moves `cur` one step that way, and
    /// rebuilds the heap.
    fn switch_direction(&mut self, cur: usize, direction: Direction) {
        self.switch_key.clear();
        self.switch_key.extend_from_slice(self.children[cur].key());
        let key = &self.switch_key;
        for (i, c) in self.children.iter_mut().enumerate() {
            if i == cur {
                continue;
            }
            match direction {
                Direction::Forward => {
                    c.seek(key);
                    // Entries equal to `key` in earlier children were already
                    // returned before `cur` in forward order; skip past them.
                    if c.valid() && self.cmp.compare_internal(c.key(), key) == Ordering::Equal && i < cur {
                        c.next();
                    }
                }
                Direction::Reverse => {
                    c.seek_for_prev(key);
                    // Equal keys in later children come after `cur` in forward order.
                    if c.valid() && self.cmp.compare_internal(c.key(), key) == Ordering::Equal && i > cur {
                        c.prev();
                    }
                }
            }
        }
        match direction {
            Direction::Forward => self.children[cur].next(),
            Direction::Reverse => self.children[cur].prev(),
        }
        self.direction = direction;
        self.rebuild();
    }

    /// One step in `direction`.
    fn step(&mut self, direction: Direction) {
        let Some(&cur) = self.heap.first() else { return };
        if self.direction != direction {
            self.switch_direction(cur, direction);
            return;
        }
        match direction {
            Direction::Forward => self.children[cur].next(),
            Direction::Reverse => self.children[cur].prev(),
        }
        self.settle_top();
    }

    /// Forgets the error and positions every child with `position`, then
    /// builds the heap for `direction`.
    fn seek_all(&mut self, direction: Direction, position: impl Fn(&mut dyn InternalIterator)) {
        self.error = None;
        for c in &mut self.children {
            position(c.as_mut());
        }
        self.direction = direction;
        self.rebuild();
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        // The heap is empty whenever `error` is set.
        !self.heap.is_empty()
    }

    fn seek_to_first(&mut self) {
        self.seek_all(Direction::Forward, |c| c.seek_to_first());
    }

    fn seek_to_last(&mut self) {
        self.seek_all(Direction::Reverse, |c| c.seek_to_last());
    }

    fn seek(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.prepare_seek(target);
        }
        self.seek_all(Direction::Forward, |c| c.seek(target));
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek_all(Direction::Reverse, |c| c.seek_for_prev(target));
    }

    fn next(&mut self) {
        self.step(Direction::Forward);
    }

    fn prev(&mut self) {
        self.step(Direction::Reverse);
    }

    fn key(&self) -> &[u8] {
        match self.heap.first() {
            Some(&i) => self.children[i].key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.heap.first() {
            Some(&i) => self.children[i].value(),
            None => &[],
        }
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::testing::FailingIterator;
    use crate::iter::{EmptyIterator, VecIterator};
    use crate::key::{make_internal_key, ValueKind};
    use proptest::prelude::*;

    fn entries(keys: &[(&str, u64)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut v: Vec<_> = keys
            .iter()
            .map(|(k, s)| (make_internal_key(k.as_bytes(), *s, ValueKind::Value), format!("{k}{s}").into_bytes()))
            .collect();
        v.sort_by(|a, b| crate::key::compare_bytewise_internal_keys(&a.0, &b.0));
        v
    }

    fn merged() -> (MergingIterator, Vec<Vec<u8>>) {
        let a = entries(&[("a", 1), ("c", 3), ("e", 5)]);
        let b = entries(&[("b", 2), ("c", 4), ("f", 6)]);
        let c = entries(&[("a", 7), ("d", 8)]);
        let mut all: Vec<_> = a.iter().chain(&b).chain(&c).cloned().collect();
        all.sort_by(|x, y| crate::key::compare_bytewise_internal_keys(&x.0, &y.0));
        let expected = all.into_iter().map(|(_, v)| v).collect();
        let it = MergingIterator::new(
            UserComparator::BYTEWISE,
            vec![Box::new(VecIterator::new(a)), Box::new(VecIterator::new(b)), Box::new(VecIterator::new(c))],
        );
        (it, expected)
    }

    #[test]
    fn forward_and_reverse_give_the_sorted_union() {
        let (mut it, expected) = merged();
        let mut got = Vec::new();
        it.seek_to_first();
        while it.valid() {
            got.push(it.value().to_vec());
            it.next();
        }
        assert_eq!(got, expected);
        let mut back = Vec::new();
        it.seek_to_last();
        while it.valid() {
            back.push(it.value().to_vec());
            it.prev();
        }
        back.reverse();
        assert_eq!(back, expected);
    }

    #[test]
    fn direction_changes_keep_position() {
        let (mut it, expected) = merged();
        it.seek_to_first();
        // Walk forward k steps, back k, forward again: values follow the sorted order.
        for k in 0..expected.len() {
            it.seek_to_first();
            for _ in 0..k {
                it.next();
            }
            assert_eq!(it.value(), &expected[k][..]);
            if k > 0 {
                it.prev();
                assert_eq!(it.value(), &expected[k - 1][..], "prev after {k} nexts");
                it.next();
                assert_eq!(it.value(), &expected[k][..], "next after prev at {k}");
            }
        }
        it.seek(&make_internal_key(b"c", u64::MAX >> 8, ValueKind::Value));
        assert_eq!(it.value(), b"c4");
        it.seek_for_prev(&make_internal_key(b"c", 0, ValueKind::Deletion));
        assert_eq!(it.value(), b"c3");
        it.next();
        assert_eq!(it.value(), b"d8");
    }

    /// An older child holding `a`..`h` = "old", and a newer one holding a
    /// newer version of each (sequence + 100) that fails at `bad_key`.
    fn shadowed(bad_key: &str) -> MergingIterator {
        const KEYS: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];
        let old = entries(&KEYS.map(|k| (k, 1)));
        let new = entries(&KEYS.map(|k| (k, 101)));
        let bad = KEYS.iter().position(|k| *k == bad_key).unwrap();
        MergingIterator::new(
            UserComparator::BYTEWISE,
            vec![Box::new(FailingIterator::new(new, bad)), Box::new(VecIterator::new(old))],
        )
    }

    fn ikey(k: &str, seq: u64) -> Vec<u8> {
        make_internal_key(k.as_bytes(), seq, ValueKind::Value)
    }

    /// The values met walking from the current position until invalid.
    fn walk(it: &mut MergingIterator, forward: bool) -> Vec<String> {
        let mut out = Vec::new();
        while it.valid() {
            out.push(String::from_utf8(it.value().to_vec()).unwrap());
            if forward {
                it.next();
            } else {
                it.prev();
            }
        }
        out
    }

    fn assert_failed(it: &MergingIterator, ctx: &str) {
        assert!(!it.valid(), "{ctx}: valid while a child is in error");
        let e = it.status().expect_err(ctx);
        assert!(e.is_corruption(), "{ctx}: {e}");
    }

    #[test]
    fn a_failing_child_with_the_smallest_key_stops_a_forward_scan_at_once() {
        let mut it = shadowed("a");
        it.seek_to_first();
        assert_failed(&it, "seek_to_first");
        assert_eq!(walk(&mut it, true), Vec::<String>::new());
        it.next();
        assert_failed(&it, "next after the error");
    }

    #[test]
    fn a_failing_child_with_a_larger_key_ends_a_forward_scan_before_the_shadowed_entry() {
        let mut it = shadowed("d");
        it.seek_to_first();
        // "c1" is intact, but the newer child stepped from "c101" onto the
        // damage, and nothing is returned while a child is in error.
        assert_eq!(walk(&mut it, true), ["a101", "a1", "b101", "b1", "c101"]);
        assert_failed(&it, "forward scan into the damage");
    }

    #[test]
    fn a_failing_child_ends_a_reverse_scan_before_the_shadowed_entry() {
        let mut it = shadowed("h");
        it.seek_to_last();
        assert_failed(&it, "seek_to_last onto the damage");
        let mut it = shadowed("e");
        it.seek_to_last();
        // In reverse the older version of a key comes first; "e1" must not
        // be returned without "e101" after it.
        assert_eq!(walk(&mut it, false), ["h1", "h101", "g1", "g101", "f1", "f101"]);
        assert_failed(&it, "reverse scan into the damage");
    }

    #[test]
    fn seeks_onto_the_damage_fail_and_seeks_elsewhere_recover() {
        let mut it = shadowed("d");
        it.seek(&ikey("d", 500));
        assert_failed(&it, "seek onto the damage");
        it.seek(&ikey("e", 500));
        assert!(it.valid(), "a seek past the damage stays in error: {:?}", it.status().err());
        assert!(it.status().is_ok());
        assert_eq!(it.value(), b"e101");
        it.seek_for_prev(&ikey("d", 0));
        assert_failed(&it, "seek_for_prev onto the damage");
        it.seek_for_prev(&ikey("c", 0));
        assert_eq!((it.valid(), it.value()), (true, &b"c1"[..]));
        it.seek_to_first();
        assert!(it.valid());
        it.seek(&ikey("c", 50));
        // The newer child lands on "d" (damaged): "c1" from the older child
        // is smaller, but the merged view is in error all the same.
        assert_failed(&it, "seek whose newer child lands on the damage past the answer");
    }

    #[test]
    fn direction_switches_that_reseek_onto_the_damage_fail() {
        // Forward at "e101", then back: the newer child is re-seeked to the
        // last entry <= "e101", which is "d" (damaged).
        let mut it = shadowed("d");
        it.seek(&ikey("e", 500));
        assert_eq!(it.value(), b"e101");
        it.prev();
        assert_failed(&it, "prev switching to reverse");
        // Reverse at "c1", then forward: the newer child is re-seeked past
        // "c1", onto "d".
        let mut it = shadowed("d");
        it.seek_for_prev(&ikey("c", 0));
        assert_eq!(it.value(), b"c1");
        it.next();
        assert_failed(&it, "next switching to forward");
        // At "e1" (older child) forwards, then back: the newer child is
        // re-seeked to the last entry <= "e1", which is "e101" (damaged),
        // while the current child steps back cleanly to "d1".
        let mut it = shadowed("e");
        it.seek(&ikey("e", 50));
        assert_eq!(it.value(), b"e1");
        it.prev();
        assert_failed(&it, "prev whose re-seeked child lands on the damage");
        // At "c101" in reverse, then forward: the older child is re-seeked
        // cleanly to "c1", but the current (newer) child steps onto "d".
        let mut it = shadowed("d");
        it.seek_for_prev(&ikey("c", 0));
        it.prev();
        assert_eq!(it.value(), b"c101");
        it.next();
        assert_failed(&it, "next from the failing child's own entry");
    }

    #[test]
    fn the_first_error_wins_and_an_error_child_fails_a_new_iterator() {
        let err_child = || Box::new(EmptyIterator::with_error(Error::corruption("gone.sst", 7, "unopenable")));
        let it = MergingIterator::new(
            UserComparator::BYTEWISE,
            vec![Box::new(VecIterator::new(entries(&[("a", 1)]))), err_child()],
        );
        assert!(it.status().unwrap_err().to_string().contains("gone.sst"), "before any positioning");
        let mut it = MergingIterator::new(
            UserComparator::BYTEWISE,
            vec![
                Box::new(FailingIterator::new(entries(&[("a", 5), ("b", 5)]), 1)),
                Box::new(VecIterator::new(entries(&[("a", 1), ("b", 1), ("c", 1)]))),
                err_child(),
            ],
        );
        it.seek_to_first();
        assert!(it.status().unwrap_err().to_string().contains("gone.sst"), "the unopenable child fails every seek");
        assert!(!it.valid());
        let mut it = MergingIterator::new(
            UserComparator::BYTEWISE,
            vec![
                Box::new(FailingIterator::new(entries(&[("a", 5), ("b", 5)]), 1)),
                Box::new(FailingIterator::new(entries(&[("a", 1), ("b", 1), ("c", 1)]), 2)),
            ],
        );
        it.seek_to_first();
        assert_eq!(walk(&mut it, true), ["a5"]);
        assert!(it.status().unwrap_err().to_string().contains("damaged block"));
        it.seek(&ikey("c", 9));
        assert_failed(&it, "the second child's damage");
        it.seek(&ikey("a", 9));
        assert!(it.valid() && it.status().is_ok(), "a clean seek clears the error");
    }

    /// The linear merge the heap replaced (LevelDB's `MergingIterator`,
    /// with the same error rule), kept as the reference the heap must match.
    struct LinearMerge {
        children: Vec<Box<dyn InternalIterator>>,
        current: Option<usize>,
        forward: bool,
        error: Option<Error>,
    }

    impl LinearMerge {
        fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
            let error = children.iter().find_map(|c| c.status().err());
            LinearMerge { children, current: None, forward: true, error }
        }

        /// The child with the smallest key (forward) or largest (reverse),
        /// after recording the first error of a moved child (`only` = the
        /// one child moved, `None` = all).
        fn find(&mut self, only: Option<usize>) {
            let mut best: Option<usize> = None;
            for (i, c) in self.children.iter().enumerate() {
                if c.valid() {
                    let better = best.is_none_or(|b| {
                        let order = crate::key::compare_bytewise_internal_keys(c.key(), self.children[b].key());
                        if self.forward {
                            order == Ordering::Less
                        } else {
                            order != Ordering::Less
                        }
                    });
                    if better {
                        best = Some(i);
                    }
                } else if only.is_none_or(|j| j == i) && self.error.is_none() {
                    self.error = c.status().err();
                }
            }
            self.current = if self.error.is_some() { None } else { best };
        }

        fn step(&mut self, forward: bool) {
            let Some(cur) = self.current else { return };
            let mut only = Some(cur);
            if self.forward != forward {
                let key = self.children[cur].key().to_vec();
                for (i, c) in self.children.iter_mut().enumerate() {
                    if i == cur {
                        continue;
                    }
                    if forward {
                        c.seek(&key);
                        if c.valid() && c.key() == key.as_slice() && i < cur {
                            c.next();
                        }
                    } else {
                        c.seek_for_prev(&key);
                        if c.valid() && c.key() == key.as_slice() && i > cur {
                            c.prev();
                        }
                    }
                }
                self.forward = forward;
                only = None;
            }
            if forward {
                self.children[cur].next();
            } else {
                self.children[cur].prev();
            }
            self.find(only);
        }

        fn position(&mut self, forward: bool, f: impl Fn(&mut dyn InternalIterator)) {
            self.error = None;
            for c in &mut self.children {
                f(c.as_mut());
            }
            self.forward = forward;
            self.find(None);
        }
    }

    /// One child of a generated merge: sorted, distinct entries, and the
    /// index of an entry it cannot read, if any.
    #[derive(Debug, Clone)]
    struct ChildSpec {
        entries: Vec<(Vec<u8>, Vec<u8>)>,
        bad: Option<usize>,
    }

    fn build(specs: &[ChildSpec]) -> Vec<Box<dyn InternalIterator>> {
        specs
            .iter()
            .map(|s| -> Box<dyn InternalIterator> {
                match s.bad {
                    Some(bad) => Box::new(FailingIterator::new(s.entries.clone(), bad)),
                    None => Box::new(VecIterator::new(s.entries.clone())),
                }
            })
            .collect()
    }

    #[derive(Debug, Clone)]
    enum Op {
        First,
        Last,
        Seek(Vec<u8>),
        SeekForPrev(Vec<u8>),
        Next,
        Prev,
    }

    /// Internal keys from a small space of user keys and sequence numbers,
    /// so children share user keys and, now and then, whole internal keys.
    fn small_ikey() -> impl Strategy<Value = Vec<u8>> {
        (0u8..12, 0u64..4).prop_map(|(k, s)| make_internal_key(&[b'a' + k], s, ValueKind::Value))
    }

    fn child_spec() -> impl Strategy<Value = ChildSpec> {
        (proptest::collection::vec(small_ikey(), 0..10), any::<u8>(), any::<bool>()).prop_map(|(keys, v, fails)| {
            let mut keys = keys;
            keys.sort_by(|a, b| crate::key::compare_bytewise_internal_keys(a, b));
            keys.dedup();
            let entries: Vec<_> = keys.into_iter().enumerate().map(|(i, k)| (k, vec![v, i as u8])).collect();
            let bad = (fails && !entries.is_empty()).then(|| usize::from(v) % entries.len());
            ChildSpec { entries, bad }
        })
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            1 => Just(Op::First),
            1 => Just(Op::Last),
            2 => small_ikey().prop_map(Op::Seek),
            2 => small_ikey().prop_map(Op::SeekForPrev),
            6 => Just(Op::Next),
            6 => Just(Op::Prev),
        ]
    }

    /// What a caller can observe of a merging iterator.
    fn observe(valid: bool, key: &[u8], value: &[u8], status: Result<()>) -> (bool, Vec<u8>, Vec<u8>, Option<String>) {
        let (key, value) = if valid { (key.to_vec(), value.to_vec()) } else { (Vec::new(), Vec::new()) };
        (valid, key, value, status.err().map(|e| e.to_string()))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// The heap and the linear merge it replaced agree after every
        /// operation, on up to 40 children with shared keys, damaged
        /// entries, seeks and direction switches.
        #[test]
        fn the_heap_matches_the_linear_merge(
            specs in proptest::collection::vec(child_spec(), 0..40),
            ops in proptest::collection::vec(op(), 1..80),
        ) {
            let mut heap = MergingIterator::new(UserComparator::BYTEWISE, build(&specs));
            let mut linear = LinearMerge::new(build(&specs));
            for (n, op) in ops.iter().enumerate() {
                match op {
                    Op::First => {
                        heap.seek_to_first();
                        linear.position(true, |c| c.seek_to_first());
                    }
                    Op::Last => {
                        heap.seek_to_last();
                        linear.position(false, |c| c.seek_to_last());
                    }
                    Op::Seek(k) => {
                        heap.seek(k);
                        linear.position(true, |c| c.seek(k));
                    }
                    Op::SeekForPrev(k) => {
                        heap.seek_for_prev(k);
                        linear.position(false, |c| c.seek_for_prev(k));
                    }
                    Op::Next => {
                        heap.next();
                        linear.step(true);
                    }
                    Op::Prev => {
                        heap.prev();
                        linear.step(false);
                    }
                }
                let got = observe(heap.valid(), heap.key(), heap.value(), heap.status());
                let cur = linear.current;
                let want = match cur {
                    Some(i) => observe(true, linear.children[i].key(), linear.children[i].value(), Ok(())),
                    None => observe(false, &[], &[], linear.error.as_ref().map_or(Ok(()), |e| Err(e.duplicate()))),
                };
                prop_assert_eq!(got, want, "after op {} ({:?})", n, op);
            }
        }
    }
}
