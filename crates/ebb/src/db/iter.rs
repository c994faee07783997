//! Iterators of the db layer: the per-level concatenating iterator and
//! [`DbIterator`], which turns internal entries into the user's view at a
//! snapshot (LevelDB `db/db_iter.cc`).

use std::cmp::Ordering;
use std::sync::Arc;

use super::table_cache::TableCache;
use super::Db;
use crate::error::{Error, Result};
use crate::iter::{EmptyIterator, InternalIterator, MergingIterator};
use crate::key::{
    compare_internal_keys, make_internal_key, parse_internal_key, user_key, SequenceNumber, ValueKind, KIND_FOR_SEEK,
};
use crate::sst::ReadSettings;
use crate::version::FileMetaData;

/// Iterates the files of one sorted level (L1 or deeper) as one sequence,
/// opening each table only when the cursor reaches it.
pub(crate) struct LevelIterator {
    files: Vec<Arc<FileMetaData>>,
    level: usize,
    tables: Arc<TableCache>,
    settings: ReadSettings,
    index: usize,
    current: Option<Box<dyn InternalIterator>>,
    error: Option<Error>,
}

impl LevelIterator {
    pub(crate) fn new(
        files: Vec<Arc<FileMetaData>>,
        level: usize,
        tables: Arc<TableCache>,
        settings: ReadSettings,
    ) -> Self {
        let index = files.len();
        LevelIterator { files, level, tables, settings, index, current: None, error: None }
    }

    fn open(&mut self, index: usize) {
        self.index = index;
        self.current = None;
        if let Some(f) = self.files.get(index) {
            match self.tables.get(f, self.level) {
                Ok(t) => self.current = Some(Box::new(t.iter(self.settings))),
                Err(e) => {
                    if self.error.is_none() {
                        self.error = Some(e);
                    }
                    self.current = Some(Box::new(EmptyIterator::new()));
                }
            }
        }
    }

    fn skip_forward(&mut self) {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.current.as_ref().is_some_and(|c| c.status().is_err()) || self.index + 1 >= self.files.len() {
                self.keep_error();
                self.current = None;
                return;
            }
            self.open(self.index + 1);
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first();
            }
        }
    }

    fn skip_backward(&mut self) {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.current.as_ref().is_some_and(|c| c.status().is_err()) || self.index == 0 {
                self.keep_error();
                self.current = None;
                return;
            }
            self.open(self.index - 1);
            if let Some(c) = self.current.as_mut() {
                c.seek_to_last();
            }
        }
    }

    fn keep_error(&mut self) {
        if let Some(Err(e)) = self.current.as_ref().map(|c| c.status()) {
            if self.error.is_none() {
                self.error = Some(e);
            }
        }
    }
}

impl InternalIterator for LevelIterator {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }
    fn seek_to_first(&mut self) {
        if self.files.is_empty() {
            self.current = None;
            return;
        }
        self.open(0);
        if let Some(c) = self.current.as_mut() {
            c.seek_to_first();
        }
        self.skip_forward();
    }
    fn seek_to_last(&mut self) {
        if self.files.is_empty() {
            self.current = None;
            return;
        }
        self.open(self.files.len() - 1);
        if let Some(c) = self.current.as_mut() {
            c.seek_to_last();
        }
        self.skip_backward();
    }
    fn seek(&mut self, target: &[u8]) {
        let i = self.files.partition_point(|f| compare_internal_keys(&f.largest, target) == Ordering::Less);
        if i >= self.files.len() {
            self.current = None;
            return;
        }
        self.open(i);
        if let Some(c) = self.current.as_mut() {
            c.seek(target);
        }
        self.skip_forward();
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        let i = self.files.partition_point(|f| compare_internal_keys(&f.smallest, target) != Ordering::Greater);
        if i == 0 {
            self.current = None;
            return;
        }
        self.open(i - 1);
        if let Some(c) = self.current.as_mut() {
            c.seek_for_prev(target);
        }
        self.skip_backward();
    }
    fn next(&mut self) {
        if let Some(c) = self.current.as_mut() {
            c.next();
        }
        self.skip_forward();
    }
    fn prev(&mut self) {
        if let Some(c) = self.current.as_mut() {
            c.prev();
        }
        self.skip_backward();
    }
    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.key())
    }
    fn value(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |c| c.value())
    }
    fn status(&self) -> Result<()> {
        if let Some(e) = &self.error {
            return Err(e.duplicate());
        }
        self.current.as_ref().map_or(Ok(()), |c| c.status())
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A cursor over the database as of one sequence number (a consistent view
/// taken when it was created). Keys and values it returns stay valid until the
/// next call that moves it.
///
/// Errors do not panic or yield wrong data: the iterator becomes invalid and
/// [`DbIterator::status`] reports the error.
pub struct DbIterator<'a> {
    pub(crate) _db: std::marker::PhantomData<&'a Db>,
    pub(crate) iter: MergingIterator,
    pub(crate) sequence: SequenceNumber,
    pub(crate) lower: Option<Vec<u8>>,
    pub(crate) upper: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
    /// Keeps the memtables and version this view reads alive.
    pub(crate) _pin: Box<dyn std::any::Any + Send>,
}

impl<'a> DbIterator<'a> {
    pub(crate) fn new(
        iter: MergingIterator,
        sequence: SequenceNumber,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        pin: Box<dyn std::any::Any + Send>,
    ) -> Self {
        DbIterator {
            _db: std::marker::PhantomData,
            iter,
            sequence,
            lower,
            upper,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            _pin: pin,
        }
    }

    /// True when positioned at an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current key. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        match self.direction {
            Direction::Forward => user_key(self.iter.key()),
            Direction::Reverse => &self.saved_key,
        }
    }

    /// The current value. Requires `valid()`.
    pub fn value(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        match self.direction {
            Direction::Forward => self.iter.value(),
            Direction::Reverse => &self.saved_value,
        }
    }

    /// The first error met, if any.
    pub fn status(&self) -> Result<()> {
        self.iter.status()
    }

    /// Positions at the first key (at or after the lower bound).
    pub fn seek_to_first(&mut self) {
        self.direction = Direction::Forward;
        match self.lower.clone() {
            Some(lower) => self.iter.seek(&make_internal_key(&lower, self.sequence, KIND_FOR_SEEK)),
            None => self.iter.seek_to_first(),
        }
        self.find_next_user_entry(false);
    }

    /// Positions at the last key (before the upper bound).
    pub fn seek_to_last(&mut self) {
        self.direction = Direction::Reverse;
        match self.upper.clone() {
            Some(upper) => self.iter.seek_for_prev(&make_internal_key(&upper, crate::key::MAX_SEQUENCE, KIND_FOR_SEEK)),
            None => self.iter.seek_to_last(),
        }
        self.find_prev_user_entry();
    }

    /// Positions at the first key `>= target`.
    pub fn seek(&mut self, target: &[u8]) {
        let target = match &self.lower {
            Some(l) if target < l.as_slice() => l.clone(),
            _ => target.to_vec(),
        };
        self.direction = Direction::Forward;
        self.iter.seek(&make_internal_key(&target, self.sequence, KIND_FOR_SEEK));
        self.find_next_user_entry(false);
    }

    /// Positions at the last key `<= target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        if let Some(u) = &self.upper {
            if target >= u.as_slice() {
                self.seek_to_last();
                return;
            }
        }
        self.direction = Direction::Reverse;
        self.iter.seek_for_prev(&make_internal_key(target, 0, ValueKind::Deletion));
        self.find_prev_user_entry();
    }

    /// Moves to the next key. Requires `valid()`.
    pub fn next(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            // The inner iterator is just before the entries of key(); step into
            // them and skip them with the usual code below.
            if self.iter.valid() {
                self.iter.next();
            } else {
                self.iter.seek_to_first();
            }
            if !self.iter.valid() {
                self.valid = false;
                self.saved_key.clear();
                return;
            }
        } else {
            self.saved_key.clear();
            self.saved_key.extend_from_slice(user_key(self.iter.key()));
            self.iter.next();
        }
        self.find_next_user_entry(true);
    }

    /// Moves to the previous key. Requires `valid()`.
    pub fn prev(&mut self) {
        if !self.valid {
            return;
        }
        if self.direction == Direction::Forward {
            // Step back over every entry of the current key.
            self.saved_key.clear();
            self.saved_key.extend_from_slice(user_key(self.iter.key()));
            loop {
                self.iter.prev();
                if !self.iter.valid() {
                    self.valid = false;
                    self.saved_key.clear();
                    self.saved_value.clear();
                    return;
                }
                if user_key(self.iter.key()) < self.saved_key.as_slice() {
                    break;
                }
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry();
    }

    /// Forward scan from the inner position to the next visible user entry.
    /// With `skipping`, entries of keys `<= saved_key` are hidden.
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        while self.iter.valid() {
            let Some(p) = parse_internal_key(self.iter.key()) else {
                self.valid = false;
                return;
            };
            if p.seq <= self.sequence {
                match p.kind {
                    ValueKind::Deletion => {
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(p.user_key);
                        skipping = true;
                    }
                    ValueKind::Value => {
                        if !(skipping && p.user_key <= self.saved_key.as_slice()) {
                            if self.upper.as_ref().is_some_and(|u| p.user_key >= u.as_slice()) {
                                break;
                            }
                            self.valid = true;
                            self.saved_key.clear();
                            return;
                        }
                    }
                }
            }
            self.iter.next();
        }
        self.valid = false;
        self.saved_key.clear();
    }

    /// Reverse scan collecting the newest visible version of the previous key.
    fn find_prev_user_entry(&mut self) {
        let mut kind = ValueKind::Deletion;
        while self.iter.valid() {
            let Some(p) = parse_internal_key(self.iter.key()) else { break };
            if p.seq <= self.sequence {
                if kind != ValueKind::Deletion && p.user_key < self.saved_key.as_slice() {
                    break;
                }
                kind = p.kind;
                if kind == ValueKind::Deletion {
                    self.saved_key.clear();
                    self.saved_value.clear();
                } else {
                    self.saved_key.clear();
                    self.saved_key.extend_from_slice(p.user_key);
                    self.saved_value.clear();
                    self.saved_value.extend_from_slice(self.iter.value());
                }
            }
            self.iter.prev();
        }
        if kind == ValueKind::Deletion || self.lower.as_ref().is_some_and(|l| self.saved_key.as_slice() < l.as_slice())
        {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
            self.direction = Direction::Forward;
        } else {
            self.valid = true;
        }
    }

    /// A Rust iterator over `(key, value)` pairs from the current position
    /// forwards (or, with `reverse`, backwards). Ends at the first error,
    /// which it yields.
    pub fn into_entries(self, reverse: bool) -> Entries<'a> {
        Entries { it: self, reverse, done: false }
    }
}

/// Rust [`Iterator`] adapter over a [`DbIterator`]; see
/// [`DbIterator::into_entries`] and [`Db::iterator`].
pub struct Entries<'a> {
    it: DbIterator<'a>,
    reverse: bool,
    done: bool,
}

impl Iterator for Entries<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if !self.it.valid() {
            self.done = true;
            return self.it.status().err().map(Err);
        }
        let item = (self.it.key().to_vec(), self.it.value().to_vec());
        if self.reverse {
            self.it.prev();
        } else {
            self.it.next();
        }
        Some(Ok(item))
    }
}
