//! The merging iterator: one sorted view over several sorted children
//! (LevelDB `table/merger.cc`, with RocksDB's error handling).
//!
//! Invariants:
//! 1. In the forward direction every child is positioned at its first entry
//!    `>= key()`; in the reverse direction at its last entry `<= key()`
//!    (other than the current child). Switching direction re-seeks the others.
//! 2. The iterator is valid only while no child has reported an error since
//!    the last seek (RocksDB `MergingIterator`): a child that fails has lost
//!    its place, so the entries it would have shadowed must not be returned
//!    from the others. `status()` is the first such error.
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
//! read only when it turns invalid, never at every step: a forward `next`
//! costs what it did before errors were tracked, one comparison more per
//! exhausted child. Debug builds check the contract for every child moved.
//!
//! Children are scanned linearly to find the smallest or largest: there are
//! few of them (memtables, L0 files, one per deeper level).

use std::cmp::Ordering;

use super::InternalIterator;
use crate::error::{Error, Result};
use crate::key::compare_internal_keys;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Which children a movement touched: only they can have newly failed.
#[derive(Clone, Copy)]
enum Moved {
    All,
    One(usize),
}

impl Moved {
    fn includes(self, i: usize) -> bool {
        match self {
            Moved::All => true,
            Moved::One(j) => i == j,
        }
    }
}

/// Merges children into one sorted sequence. Equal keys from different
/// children are all returned, earlier children first.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    /// The child holding `key()`; `None` when exhausted or in error.
    current: Option<usize>,
    direction: Direction,
    /// The first error a child reported since the last seek (invariant 2).
    error: Option<Error>,
}

impl MergingIterator {
    /// Merges `children`; on equal keys the child listed first comes first.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        let error = children.iter().find_map(|c| c.status().err());
        MergingIterator { children, current: None, direction: Direction::Forward, error }
    }

    /// Points `current` at the child with the smallest key, recording the
    /// error of any child in `moved` that is invalid because it failed (the
    /// lowest-numbered one if several did). `error` is `None` on entry: a
    /// seek has just cleared it, or `next`/`prev` found the iterator valid.
    fn find_smallest(&mut self, moved: Moved) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if c.valid() {
                debug_assert!(!moved.includes(i) || c.status().is_ok(), "child {i} is valid with an error status");
                match best {
                    None => best = Some(i),
                    Some(b) => {
                        if compare_internal_keys(c.key(), self.children[b].key()) == Ordering::Less {
                            best = Some(i);
                        }
                    }
                }
            } else if moved.includes(i) && self.error.is_none() {
                self.error = c.status().err();
            }
        }
        self.current = if self.error.is_some() { None } else { best };
    }

    /// As [`Self::find_smallest`], for the largest key.
    fn find_largest(&mut self, moved: Moved) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate().rev() {
            if c.valid() {
                debug_assert!(!moved.includes(i) || c.status().is_ok(), "child {i} is valid with an error status");
                match best {
                    None => best = Some(i),
                    Some(b) => {
                        if compare_internal_keys(c.key(), self.children[b].key()) == Ordering::Greater {
                            best = Some(i);
                        }
                    }
                }
            } else if moved.includes(i) {
                // Scanned from the last child: a later (lower) child's error
                // replaces an earlier one's, so a movement that fails in
                // several children records the same error both ways.
                if let Err(e) = c.status() {
                    self.error = Some(e);
                }
            }
        }
        self.current = if self.error.is_some() { None } else { best };
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        // `current` is `None` whenever `error` is set.
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        self.error = None;
        for c in &mut self.children {
            c.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.find_smallest(Moved::All);
    }

    fn seek_to_last(&mut self) {
        self.error = None;
        for c in &mut self.children {
            c.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.find_largest(Moved::All);
    }

    fn seek(&mut self, target: &[u8]) {
        self.error = None;
        for c in &mut self.children {
            c.seek(target);
        }
        self.direction = Direction::Forward;
        self.find_smallest(Moved::All);
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.error = None;
        for c in &mut self.children {
            c.seek_for_prev(target);
        }
        self.direction = Direction::Reverse;
        self.find_largest(Moved::All);
    }

    fn next(&mut self) {
        let Some(cur) = self.current else { return };
        let mut moved = Moved::One(cur);
        if self.direction != Direction::Forward {
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                c.seek(&key);
                // Entries equal to `key` in earlier children were already
                // returned before `cur` in forward order; skip past them.
                if c.valid() && compare_internal_keys(c.key(), &key) == Ordering::Equal && i < cur {
                    c.next();
                }
            }
            self.direction = Direction::Forward;
            moved = Moved::All;
        }
        self.children[cur].next();
        self.find_smallest(moved);
    }

    fn prev(&mut self) {
        let Some(cur) = self.current else { return };
        let mut moved = Moved::One(cur);
        if self.direction != Direction::Reverse {
            let key = self.children[cur].key().to_vec();
            for (i, c) in self.children.iter_mut().enumerate() {
                if i == cur {
                    continue;
                }
                c.seek_for_prev(&key);
                // Equal keys in later children come after `cur` in forward order.
                if c.valid() && compare_internal_keys(c.key(), &key) == Ordering::Equal && i > cur {
                    c.prev();
                }
            }
            self.direction = Direction::Reverse;
            moved = Moved::All;
        }
        self.children[cur].prev();
        self.find_largest(moved);
    }

    fn key(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].key(),
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.current {
            Some(i) => self.children[i].value(),
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

    fn entries(keys: &[(&str, u64)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut v: Vec<_> = keys
            .iter()
            .map(|(k, s)| (make_internal_key(k.as_bytes(), *s, ValueKind::Value), format!("{k}{s}").into_bytes()))
            .collect();
        v.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
        v
    }

    fn merged() -> (MergingIterator, Vec<Vec<u8>>) {
        let a = entries(&[("a", 1), ("c", 3), ("e", 5)]);
        let b = entries(&[("b", 2), ("c", 4), ("f", 6)]);
        let c = entries(&[("a", 7), ("d", 8)]);
        let mut all: Vec<_> = a.iter().chain(&b).chain(&c).cloned().collect();
        all.sort_by(|x, y| compare_internal_keys(&x.0, &y.0));
        let expected = all.into_iter().map(|(_, v)| v).collect();
        let it = MergingIterator::new(vec![
            Box::new(VecIterator::new(a)),
            Box::new(VecIterator::new(b)),
            Box::new(VecIterator::new(c)),
        ]);
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
        MergingIterator::new(vec![Box::new(FailingIterator::new(new, bad)), Box::new(VecIterator::new(old))])
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
        let it = MergingIterator::new(vec![Box::new(VecIterator::new(entries(&[("a", 1)]))), err_child()]);
        assert!(it.status().unwrap_err().to_string().contains("gone.sst"), "before any positioning");
        let mut it = MergingIterator::new(vec![
            Box::new(FailingIterator::new(entries(&[("a", 5), ("b", 5)]), 1)),
            Box::new(VecIterator::new(entries(&[("a", 1), ("b", 1), ("c", 1)]))),
            err_child(),
        ]);
        it.seek_to_first();
        assert!(it.status().unwrap_err().to_string().contains("gone.sst"), "the unopenable child fails every seek");
        assert!(!it.valid());
        let mut it = MergingIterator::new(vec![
            Box::new(FailingIterator::new(entries(&[("a", 5), ("b", 5)]), 1)),
            Box::new(FailingIterator::new(entries(&[("a", 1), ("b", 1), ("c", 1)]), 2)),
        ]);
        it.seek_to_first();
        assert_eq!(walk(&mut it, true), ["a5"]);
        assert!(it.status().unwrap_err().to_string().contains("damaged block"));
        it.seek(&ikey("c", 9));
        assert_failed(&it, "the second child's damage");
        it.seek(&ikey("a", 9));
        assert!(it.valid() && it.status().is_ok(), "a clean seek clears the error");
    }
}
