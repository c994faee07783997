//! Iterators over internal keys, and the merging iterator that combines them.
//!
//! Contract of [`InternalIterator`] (LevelDB `include/leveldb/iterator.h`):
//! 1. `key()` and `value()` may be called only while `valid()`; the slices they
//!    return stay valid until the next call that moves the iterator.
//! 2. An iterator that meets an error becomes invalid and reports it through
//!    `status()`, and an iterator whose `status()` is an error is never valid
//!    (RocksDB's rule; LevelDB lets some iterators carry on past a failed
//!    child and report it afterwards). So a consumer that stops at
//!    `!valid()` can never step over damage to an older, shadowed entry, and
//!    needs to read `status()` only then. A seek may clear an error when its
//!    new position reads cleanly; `next` and `prev` never do.
//! 3. Iterators are used by one thread at a time (`Send`, not `Sync`).

pub mod merging;

pub use merging::MergingIterator;

use crate::error::Result;

/// A cursor over a sorted sequence of internal-key / value pairs.
pub trait InternalIterator: Send {
    /// True when positioned at an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self);
    /// Positions at the last entry.
    fn seek_to_last(&mut self);
    /// Positions at the first entry `>= target` (an internal key).
    fn seek(&mut self, target: &[u8]);
    /// Prepares a [`InternalIterator::seek`] to `target` that comes next:
    /// does the part of it that waits on memory or the file (a table's
    /// index search and data block fetch), with the loads of what the seek
    /// then reads issued but not waited for. A merging iterator prepares
    /// every child before it seeks any, so one child's cache misses overlap
    /// the work on the others. The next positioning call must be `seek`
    /// with the same target for the preparation to count; any other call
    /// discards it, and the results are the same either way. The default
    /// does nothing.
    fn prepare_seek(&mut self, _target: &[u8]) {}
    /// Positions at the last entry `<= target` (an internal key).
    fn seek_for_prev(&mut self, target: &[u8]);
    /// Moves to the next entry. Requires `valid()`.
    fn next(&mut self);
    /// Moves to the previous entry. Requires `valid()`.
    fn prev(&mut self);
    /// The current internal key. Requires `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. Requires `valid()`.
    fn value(&self) -> &[u8];
    /// The error that made the iterator invalid, if any (contract 2).
    fn status(&self) -> Result<()>;
}

/// An iterator over nothing, optionally carrying an error (for a table that
/// failed to open, say).
pub struct EmptyIterator {
    error: Option<crate::error::Error>,
}

impl EmptyIterator {
    /// An empty iterator with no error.
    pub fn new() -> Self {
        EmptyIterator { error: None }
    }
    /// An empty iterator whose `status()` reports `e`.
    pub fn with_error(e: crate::error::Error) -> Self {
        EmptyIterator { error: Some(e) }
    }
}

impl Default for EmptyIterator {
    fn default() -> Self {
        Self::new()
    }
}

impl InternalIterator for EmptyIterator {
    fn valid(&self) -> bool {
        false
    }
    fn seek_to_first(&mut self) {}
    fn seek_to_last(&mut self) {}
    fn seek(&mut self, _target: &[u8]) {}
    fn seek_for_prev(&mut self, _target: &[u8]) {}
    fn next(&mut self) {}
    fn prev(&mut self) {}
    fn key(&self) -> &[u8] {
        &[]
    }
    fn value(&self) -> &[u8] {
        &[]
    }
    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}

/// An iterator over an owned sorted vector of entries; used for tests and for
/// small in-memory sequences.
#[cfg(any(test, feature = "internals"))]
pub struct VecIterator {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
}

#[cfg(any(test, feature = "internals"))]
impl VecIterator {
    /// Wraps entries already sorted by internal key (bytewise user keys).
    pub fn new(entries: Vec<(Vec<u8>, Vec<u8>)>) -> Self {
        let pos = entries.len();
        VecIterator { entries, pos }
    }
}

#[cfg(any(test, feature = "internals"))]
impl InternalIterator for VecIterator {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }
    fn seek_to_first(&mut self) {
        self.pos = 0;
    }
    fn seek_to_last(&mut self) {
        self.pos = if self.entries.is_empty() { 0 } else { self.entries.len() - 1 };
    }
    fn seek(&mut self, target: &[u8]) {
        self.pos = self.entries.partition_point(|(k, _)| {
            crate::key::compare_bytewise_internal_keys(k, target) == std::cmp::Ordering::Less
        });
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        let p = self.entries.partition_point(|(k, _)| {
            crate::key::compare_bytewise_internal_keys(k, target) != std::cmp::Ordering::Greater
        });
        self.pos = if p == 0 { self.entries.len() } else { p - 1 };
    }
    fn next(&mut self) {
        self.pos += 1;
    }
    fn prev(&mut self) {
        self.pos = if self.pos == 0 { self.entries.len() } else { self.pos - 1 };
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

/// Iterators for tests of the layers above.
#[cfg(test)]
pub(crate) mod testing {
    use super::{InternalIterator, VecIterator};
    use crate::error::{Error, Result};

    /// A test iterator over sorted entries that cannot read the entry at index
    /// `bad` (as in a damaged block): landing on it makes it invalid with a
    /// corruption error, until a seek lands elsewhere.
    pub(crate) struct FailingIterator {
        inner: VecIterator,
        bad_key: Vec<u8>,
        failed: bool,
    }

    impl FailingIterator {
        pub(crate) fn new(entries: Vec<(Vec<u8>, Vec<u8>)>, bad: usize) -> Self {
            let bad_key = entries[bad].0.clone();
            FailingIterator { inner: VecIterator::new(entries), bad_key, failed: false }
        }
        fn settle(&mut self) {
            self.failed = self.inner.valid() && self.inner.key() == self.bad_key.as_slice();
        }
    }

    impl InternalIterator for FailingIterator {
        fn valid(&self) -> bool {
            !self.failed && self.inner.valid()
        }
        fn seek_to_first(&mut self) {
            self.inner.seek_to_first();
            self.settle();
        }
        fn seek_to_last(&mut self) {
            self.inner.seek_to_last();
            self.settle();
        }
        fn seek(&mut self, target: &[u8]) {
            self.inner.seek(target);
            self.settle();
        }
        fn seek_for_prev(&mut self, target: &[u8]) {
            self.inner.seek_for_prev(target);
            self.settle();
        }
        fn next(&mut self) {
            if self.valid() {
                self.inner.next();
                self.settle();
            }
        }
        fn prev(&mut self) {
            if self.valid() {
                self.inner.prev();
                self.settle();
            }
        }
        fn key(&self) -> &[u8] {
            self.inner.key()
        }
        fn value(&self) -> &[u8] {
            self.inner.value()
        }
        fn status(&self) -> Result<()> {
            if self.failed {
                Err(Error::corruption("newer.sst", 0, "damaged block"))
            } else {
                Ok(())
            }
        }
    }
}
