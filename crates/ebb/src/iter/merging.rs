//! The merging iterator: one sorted view over several sorted children
//! (LevelDB `table/merger.cc`).
//!
//! Invariant: in the forward direction every child is positioned at its first
//! entry `>= key()`; in the reverse direction at its last entry `<= key()`
//! (other than the current child). Switching direction re-seeks the others.
//! Children are scanned linearly to find the smallest or largest: there are
//! few of them (memtables, L0 files, one per deeper level).

use std::cmp::Ordering;

use super::InternalIterator;
use crate::error::Result;
use crate::key::compare_internal_keys;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// Merges children into one sorted sequence. Equal keys from different
/// children are all returned, earlier children first.
pub struct MergingIterator {
    children: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
    direction: Direction,
}

impl MergingIterator {
    /// Merges `children`; on equal keys the child listed first comes first.
    pub fn new(children: Vec<Box<dyn InternalIterator>>) -> Self {
        MergingIterator { children, current: None, direction: Direction::Forward }
    }

    fn find_smallest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate() {
            if c.valid() {
                match best {
                    None => best = Some(i),
                    Some(b) => {
                        if compare_internal_keys(c.key(), self.children[b].key()) == Ordering::Less {
                            best = Some(i);
                        }
                    }
                }
            }
        }
        self.current = best;
    }

    fn find_largest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, c) in self.children.iter().enumerate().rev() {
            if c.valid() {
                match best {
                    None => best = Some(i),
                    Some(b) => {
                        if compare_internal_keys(c.key(), self.children[b].key()) == Ordering::Greater {
                            best = Some(i);
                        }
                    }
                }
            }
        }
        self.current = best;
    }
}

impl InternalIterator for MergingIterator {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        for c in &mut self.children {
            c.seek_to_first();
        }
        self.direction = Direction::Forward;
        self.find_smallest();
    }

    fn seek_to_last(&mut self) {
        for c in &mut self.children {
            c.seek_to_last();
        }
        self.direction = Direction::Reverse;
        self.find_largest();
    }

    fn seek(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.seek(target);
        }
        self.direction = Direction::Forward;
        self.find_smallest();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        for c in &mut self.children {
            c.seek_for_prev(target);
        }
        self.direction = Direction::Reverse;
        self.find_largest();
    }

    fn next(&mut self) {
        let Some(cur) = self.current else { return };
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
        }
        self.children[cur].next();
        self.find_smallest();
    }

    fn prev(&mut self) {
        let Some(cur) = self.current else { return };
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
        }
        self.children[cur].prev();
        self.find_largest();
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
        for c in &self.children {
            c.status()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::VecIterator;
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
}
