//! Bounded prefix seeks over tables (docs/data_model.md, "Prefixes";
//! RocksDB `prefix_same_as_start`): the prefix a seek is after, shared by an
//! iterator over the database with its table iterators, and the table
//! iterator that such a seek skips when the table's filter lacks the prefix.
//!
//! What it owns: [`SeekPrefix`] (the prefix of the seek under way, and the
//! counts of tables asked and ruled out, which the database adds to its
//! `BLOOM_FILTER_PREFIX_CHECKED` and `BLOOM_FILTER_PREFIX_USEFUL` tickers)
//! and [`PrefixCheckedIterator`].
//!
//! Invariants:
//! 1. A table is asked about a prefix only during a bounded prefix seek:
//!    [`SeekPrefix::set`] holds the prefix for that seek and no other
//!    positioning, so a table is skipped only where the seek's caller stops
//!    at the prefix's end anyway.
//! 2. Each table asked counts once as checked, and once more as useful when
//!    its filter rules the prefix out; an answer prepared for a seek
//!    ([`crate::iter::InternalIterator::prepare_seek`]) counts once and holds
//!    for that seek while the prefix is unchanged.
//!
//! Thread-safety: a [`SeekPrefix`] is shared (its prefix behind a mutex, its
//! counts atomic); each [`PrefixCheckedIterator`] is used by one thread.

use std::sync::Arc;

use super::table_iterator::TableIterator;
use super::table_reader::Table;
use crate::error::Result;
use crate::iter::InternalIterator;

/// The prefix a bounded prefix seek (docs/data_model.md, "Prefixes") is
/// after, shared by an iterator over the database with its table
/// iterators: set only for the duration of that seek, so tables whose
/// filter lacks the prefix are skipped then and at no other positioning.
pub struct SeekPrefix {
    extractor: String,
    current: parking_lot::Mutex<Option<Vec<u8>>>,
    /// Tables asked, and ruled out, since [`SeekPrefix::take_counts`].
    checked: std::sync::atomic::AtomicU64,
    useful: std::sync::atomic::AtomicU64,
    /// Bumped by every [`SeekPrefix::set`]: an answer of
    /// [`SeekPrefix::excludes`] holds while it is unchanged.
    generation: std::sync::atomic::AtomicU64,
}

impl SeekPrefix {
    /// Shared state for prefixes of the extractor named `extractor`.
    pub fn new(extractor: &str) -> Self {
        SeekPrefix {
            extractor: extractor.to_string(),
            current: parking_lot::Mutex::new(None),
            checked: Default::default(),
            useful: Default::default(),
            generation: Default::default(),
        }
    }

    /// Changes with every [`SeekPrefix::set`].
    fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Tables asked about a prefix and tables ruled out, since the last call.
    pub fn take_counts(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.checked.swap(0, Relaxed), self.useful.swap(0, Relaxed))
    }

    /// Sets (or, with `None`, clears) the prefix of the seek under way.
    pub fn set(&self, prefix: Option<Vec<u8>>) {
        let mut current = self.current.lock();
        *current = prefix;
        self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// True when a seek is for a prefix `table`'s filter says it lacks.
    fn excludes(&self, table: &Table) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let current = self.current.lock();
        let Some(p) = current.as_ref() else { return false };
        self.checked.fetch_add(1, Relaxed);
        let excluded = !table.prefix_may_match(&self.extractor, p);
        if excluded {
            self.useful.fetch_add(1, Relaxed);
        }
        excluded
    }
}

/// A [`TableIterator`] that a bounded prefix seek skips when the table's
/// filter lacks the prefix: invalid after such a seek, as if the table
/// held nothing at or after the target (the seek's caller stops at the
/// prefix's end, so nothing past it is missed).
pub struct PrefixCheckedIterator {
    inner: TableIterator,
    prefix: Arc<SeekPrefix>,
    skipped: bool,
    /// Whether a prepared seek found the table excluded, and for which
    /// prefix ([`SeekPrefix::generation`]).
    prepared_skip: Option<(bool, u64)>,
}

impl PrefixCheckedIterator {
    /// Wraps `inner`, which iterates its table.
    pub fn new(inner: TableIterator, prefix: Arc<SeekPrefix>) -> Self {
        PrefixCheckedIterator { inner, prefix, skipped: false, prepared_skip: None }
    }
}

impl InternalIterator for PrefixCheckedIterator {
    fn valid(&self) -> bool {
        !self.skipped && self.inner.valid()
    }
    fn seek_to_first(&mut self) {
        self.skipped = false;
        self.prepared_skip = None;
        self.inner.seek_to_first();
    }
    fn seek_to_last(&mut self) {
        self.skipped = false;
        self.prepared_skip = None;
        self.inner.seek_to_last();
    }
    fn seek(&mut self, target: &[u8]) {
        // A prepared answer holds while the prefix is the one it was for.
        self.skipped = match self.prepared_skip.take() {
            Some((skipped, generation)) if generation == self.prefix.generation() => skipped,
            _ => self.prefix.excludes(self.inner.table()),
        };
        if !self.skipped {
            self.inner.seek(target);
        }
    }
    fn prepare_seek(&mut self, target: &[u8]) {
        let generation = self.prefix.generation();
        let skipped = self.prefix.excludes(self.inner.table());
        self.prepared_skip = Some((skipped, generation));
        if !skipped {
            self.inner.prepare_seek(target);
        }
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.prepared_skip = None;
        self.skipped = self.prefix.excludes(self.inner.table());
        if !self.skipped {
            self.inner.seek_for_prev(target);
        }
    }
    fn next(&mut self) {
        self.prepared_skip = None;
        self.inner.next();
    }
    fn prev(&mut self) {
        self.prepared_skip = None;
        self.inner.prev();
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn status(&self) -> Result<()> {
        if self.skipped {
            return Ok(());
        }
        self.inner.status()
    }
}
