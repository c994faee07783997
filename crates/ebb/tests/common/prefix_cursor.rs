//! What a bounded prefix iterator (`ReadOptions::prefix_same_as_start`
//! with a prefix extractor) must show after each move: a total-order model
//! of the view, restricted to the prefix the last seek bounds the iterator
//! to (docs/data_model.md, "Prefixes"; RocksDB's `DBIter`).
//!
//! - `seek(t)` and `seek_for_prev(t)` bound the iterator to `t`'s prefix
//!   (none when `t` is outside the extractor's domain: total order);
//!   `seek` lands on the first key at or after `t` (and the lower bound),
//!   `seek_for_prev` on the last key at or before `t` (and before the upper
//!   bound).
//! - `seek_to_first` with a lower bound is `seek(lower)`; without one it
//!   lands on the first key and is bounded to that key's prefix.
//!   `seek_to_last` with an upper bound lands on the last key before it,
//!   bounded to the bound's prefix; without one on the last key, bounded to
//!   its prefix.
//! - `next` and `prev` move to the neighbouring key of the view (within the
//!   bounds) whatever the direction before, and the iterator is invalid
//!   when that key is not of the bound prefix.

use std::cmp::Ordering;

use ebb::prefix::{has_prefix, SliceTransform};

use super::Model;

/// An order of user keys.
pub type Order = fn(&[u8], &[u8]) -> Ordering;

/// The bytewise order.
pub fn bytewise(a: &[u8], b: &[u8]) -> Ordering {
    a.cmp(b)
}

/// The bytewise order reversed (RocksDB's reverse bytewise comparator).
pub fn reverse_bytewise(a: &[u8], b: &[u8]) -> Ordering {
    b.cmp(a)
}

/// The model of one bounded prefix iterator over a fixed view.
pub struct PrefixCursor<'a> {
    /// The view, sorted in `order`.
    keys: Vec<(&'a [u8], &'a [u8])>,
    order: Order,
    x: &'a dyn SliceTransform,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    /// The prefix the iterator is bounded to (`None`: total order).
    prefix: Option<Vec<u8>>,
    /// The index in `keys` the iterator is at (`None`: invalid).
    pos: Option<usize>,
}

impl<'a> PrefixCursor<'a> {
    /// An unpositioned iterator over `view` (what it may see) in `order`,
    /// with the read's bounds (lower inclusive, upper exclusive).
    pub fn new(
        view: &'a Model,
        order: Order,
        x: &'a dyn SliceTransform,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
    ) -> Self {
        let mut keys: Vec<(&[u8], &[u8])> = view.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect();
        keys.sort_by(|a, b| order(a.0, b.0));
        PrefixCursor { keys, order, x, lower, upper, prefix: None, pos: None }
    }

    /// The key and value the iterator must be at, `None` when invalid.
    pub fn current(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        self.pos.map(|i| (self.keys[i].0.to_vec(), self.keys[i].1.to_vec()))
    }

    fn prefix_of(&self, k: &[u8]) -> Option<Vec<u8>> {
        self.x.in_domain(k).then(|| self.x.transform(k).to_vec())
    }

    fn lt(&self, a: &[u8], b: &[u8]) -> bool {
        (self.order)(a, b) == Ordering::Less
    }

    /// Index `i`, when it holds a key within the bounds.
    fn bounded(&self, i: Option<usize>) -> Option<usize> {
        i.filter(|&i| {
            let k = self.keys[i].0;
            self.lower.as_ref().is_none_or(|l| !self.lt(k, l)) && self.upper.as_ref().is_none_or(|u| self.lt(k, u))
        })
    }

    /// `i`, when its key is of the bound prefix (or there is none).
    fn keep(&self, i: Option<usize>) -> Option<usize> {
        i.filter(|&i| self.prefix.as_ref().is_none_or(|p| has_prefix(self.x, self.keys[i].0, p)))
    }

    /// The first key at or after `from`, within the bounds.
    fn first_from(&self, from: &[u8]) -> Option<usize> {
        let from = match &self.lower {
            Some(l) if self.lt(from, l) => l.as_slice(),
            _ => from,
        };
        let i = self.keys.partition_point(|(k, _)| self.lt(k, from));
        self.bounded((i < self.keys.len()).then_some(i))
    }

    /// The last key before `to` (or at it, with `inclusive`), within the
    /// bounds; `to` past the upper bound is the bound.
    fn last_to(&self, to: &[u8], inclusive: bool) -> Option<usize> {
        let (to, inclusive) = match &self.upper {
            Some(u) if !self.lt(to, u) => (u.as_slice(), false),
            _ => (to, inclusive),
        };
        let n = self.keys.partition_point(|(k, _)| match (self.order)(k, to) {
            Ordering::Less => true,
            Ordering::Equal => inclusive,
            Ordering::Greater => false,
        });
        self.bounded(n.checked_sub(1))
    }

    /// The last key within the bounds.
    fn last(&self) -> Option<usize> {
        match self.upper.clone() {
            Some(u) => self.last_to(&u, false),
            None => self.bounded(self.keys.len().checked_sub(1)),
        }
    }

    pub fn seek(&mut self, target: &[u8]) {
        self.prefix = self.prefix_of(target);
        self.pos = self.keep(self.first_from(target));
    }

    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.prefix = self.prefix_of(target);
        self.pos = self.keep(self.last_to(target, true));
    }

    pub fn seek_to_first(&mut self) {
        if let Some(l) = self.lower.clone() {
            return self.seek(&l);
        }
        self.pos = self.bounded((!self.keys.is_empty()).then_some(0));
        self.prefix = self.pos.and_then(|i| self.prefix_of(self.keys[i].0));
    }

    pub fn seek_to_last(&mut self) {
        match self.upper.clone() {
            Some(u) => {
                self.prefix = self.prefix_of(&u);
                self.pos = self.keep(self.last());
            }
            None => {
                self.pos = self.last();
                self.prefix = self.pos.and_then(|i| self.prefix_of(self.keys[i].0));
            }
        }
    }

    /// Requires a valid position.
    pub fn next(&mut self) {
        let Some(i) = self.pos.take() else { return };
        let next = (i + 1 < self.keys.len()).then_some(i + 1);
        self.pos = self.keep(self.bounded(next));
    }

    /// Requires a valid position.
    pub fn prev(&mut self) {
        let Some(i) = self.pos.take() else { return };
        self.pos = self.keep(self.bounded(i.checked_sub(1)));
    }
}

/// Drives `it` through `moves` random moves (seek targets drawn by
/// `target`), checking its position after each against `want`, the model
/// of the same iterator; a mismatch panics with `ctx` and the moves made.
pub fn check_random_moves(
    it: &mut ebb::DbIterator<'_>,
    want: &mut PrefixCursor<'_>,
    rng: &mut rand::rngs::StdRng,
    moves: usize,
    target: &mut dyn FnMut(&mut rand::rngs::StdRng) -> Vec<u8>,
    ctx: &str,
) {
    use rand::Rng;
    let show = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
    let mut trace = Vec::new();
    for _ in 0..moves {
        let reposition = !it.valid() || rng.gen_bool(0.2);
        match if reposition { rng.gen_range(0..6) } else { rng.gen_range(6..8) } {
            0 | 1 => {
                let t = target(rng);
                trace.push(format!("seek {}", show(&t)));
                it.seek(&t);
                want.seek(&t);
            }
            2 | 3 => {
                let t = target(rng);
                trace.push(format!("seek_for_prev {}", show(&t)));
                it.seek_for_prev(&t);
                want.seek_for_prev(&t);
            }
            4 => {
                trace.push("seek_to_first".to_string());
                it.seek_to_first();
                want.seek_to_first();
            }
            5 => {
                trace.push("seek_to_last".to_string());
                it.seek_to_last();
                want.seek_to_last();
            }
            6 => {
                trace.push("next".to_string());
                it.next();
                want.next();
            }
            _ => {
                trace.push("prev".to_string());
                it.prev();
                want.prev();
            }
        }
        let got = it.valid().then(|| (it.key().to_vec(), it.value().to_vec()));
        if let Err(e) = it.status() {
            panic!("{ctx}: prefix iterator error after {}: {e}", trace.join(", "));
        }
        let expected = want.current();
        assert_eq!(
            got.as_ref().map(|(k, _)| show(k)),
            expected.as_ref().map(|(k, _)| show(k)),
            "{ctx}: prefix iterator after {}",
            trace.join(", ")
        );
        assert_eq!(got, expected, "{ctx}: prefix iterator value after {}", trace.join(", "));
    }
}
