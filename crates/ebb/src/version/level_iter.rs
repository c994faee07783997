//! The iterator over one sorted level: its files as one sequence, each
//! table opened only when the cursor reaches it (LevelDB's
//! `LevelFileNumIterator` under a two-level iterator; RocksDB's
//! `LevelIterator`). Reads and compactions both walk levels with it.

use std::cmp::Ordering;
use std::sync::Arc;

use super::{FileMetaData, TableCache, Version};
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::iter::{EmptyIterator, InternalIterator};
use crate::sst::ReadSettings;
use crate::sst::{PrefixCheckedIterator, SeekPrefix};

/// Iterates the files of one sorted level (L1 or deeper) as one sequence,
/// opening each table only when the cursor reaches it.
///
/// Errors (iterator contract 2): a table that fails to open, or whose
/// iterator reports an error, makes this iterator invalid with that error; it
/// never moves on to the next file, since the failed file may hold the
/// entries that shadow older levels. The error lasts until the next seek,
/// which opens a fresh table iterator for the file it lands in.
pub(crate) struct LevelIterator {
    files: LevelFiles,
    /// The order of the family's keys.
    cmp: UserComparator,
    level: usize,
    tables: Arc<TableCache>,
    settings: ReadSettings,
    index: usize,
    /// The iterator of file `index`; `None` when exhausted or in error.
    current: Option<Box<dyn InternalIterator>>,
    /// Why `current` is `None`, when it is for an error.
    error: Option<Error>,
    /// Skips files a bounded prefix seek's prefix is not in.
    seek_prefix: Option<Arc<SeekPrefix>>,
    /// The file a prepared seek opened and prepared (`prepare_seek`).
    prepared: Option<usize>,
}

/// The files a [`LevelIterator`] walks: a level of a version it holds (a
/// read borrows the level the version already has instead of copying its
/// list of files, which grows with the database), or a list of its own (a
/// compaction's inputs).
pub(crate) enum LevelFiles {
    /// `version.levels[level]`.
    Version(Arc<Version>, usize),
    /// Files sorted and disjoint as a level's.
    Listed(Vec<Arc<FileMetaData>>),
}

impl std::ops::Deref for LevelFiles {
    type Target = [Arc<FileMetaData>];
    fn deref(&self) -> &[Arc<FileMetaData>] {
        match self {
            LevelFiles::Version(version, level) => version.levels.get(*level).map_or(&[], Vec::as_slice),
            LevelFiles::Listed(files) => files,
        }
    }
}

impl LevelIterator {
    pub(crate) fn new(
        files: LevelFiles,
        cmp: UserComparator,
        level: usize,
        tables: Arc<TableCache>,
        settings: ReadSettings,
    ) -> Self {
        let index = files.len();
        LevelIterator {
            files,
            cmp,
            level,
            tables,
            settings,
            index,
            current: None,
            error: None,
            seek_prefix: None,
            prepared: None,
        }
    }

    /// Lets bounded prefix seeks skip files whose filter lacks the prefix.
    pub(crate) fn with_seek_prefix(mut self, prefix: Arc<SeekPrefix>) -> Self {
        self.seek_prefix = Some(prefix);
        self
    }

    /// Makes file `index` the current one, unpositioned; a table that fails
    /// to open becomes an iterator holding the error, which the caller's
    /// `skip_*` then records.
    fn open(&mut self, index: usize) {
        self.index = index;
        self.current = self.files.get(index).map(|f| -> Box<dyn InternalIterator> {
            match self.tables.get(f, self.level, &self.cmp) {
                Ok(t) => match &self.seek_prefix {
                    Some(p) => Box::new(PrefixCheckedIterator::new(t.iter(self.settings), Arc::clone(p))),
                    None => Box::new(t.iter(self.settings)),
                },
                Err(e) => Box::new(EmptyIterator::with_error(e)),
            }
        });
    }

    /// Moves to following files while the current one has no entry left;
    /// stops, invalid, at the first file in error.
    fn skip_forward(&mut self) {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.fail_if_current_failed() || self.index + 1 >= self.files.len() {
                self.current = None;
                return;
            }
            self.open(self.index + 1);
            if let Some(c) = self.current.as_mut() {
                c.seek_to_first();
            }
        }
    }

    /// As `skip_forward`, towards preceding files.
    fn skip_backward(&mut self) {
        while self.current.as_ref().is_some_and(|c| !c.valid()) {
            if self.fail_if_current_failed() || self.index == 0 {
                self.current = None;
                return;
            }
            self.open(self.index - 1);
            if let Some(c) = self.current.as_mut() {
                c.seek_to_last();
            }
        }
    }

    /// The first file whose largest key is `>= target` (the number of files
    /// when none is).
    fn file_for(&self, target: &[u8]) -> usize {
        self.files.partition_point(|f| self.cmp.compare_internal(&f.largest, target) == Ordering::Less)
    }

    /// Records the error of the current (invalid) file iterator, if it has one.
    fn fail_if_current_failed(&mut self) -> bool {
        match self.current.as_ref().map(|c| c.status()) {
            Some(Err(e)) => {
                self.error = Some(e);
                true
            }
            _ => false,
        }
    }
}

impl InternalIterator for LevelIterator {
    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|c| c.valid())
    }
    fn seek_to_first(&mut self) {
        self.error = None;
        self.prepared = None;
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
        self.error = None;
        self.prepared = None;
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
        self.error = None;
        let i = self.file_for(target);
        if i >= self.files.len() {
            self.prepared = None;
            self.current = None;
            return;
        }
        // The file a prepared seek to this target opened is the same one;
        // its iterator checks the target itself.
        if self.prepared.take() != Some(i) || self.current.is_none() {
            self.open(i);
        }
        if let Some(c) = self.current.as_mut() {
            c.seek(target);
        }
        self.skip_forward();
    }
    fn prepare_seek(&mut self, target: &[u8]) {
        self.prepared = None;
        let i = self.file_for(target);
        if i < self.files.len() {
            self.open(i);
            if let Some(c) = self.current.as_mut() {
                c.prepare_seek(target);
            }
            self.prepared = Some(i);
        }
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.error = None;
        self.prepared = None;
        let i = self.files.partition_point(|f| self.cmp.compare_internal(&f.smallest, target) != Ordering::Greater);
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
        self.prepared = None;
        if let Some(c) = self.current.as_mut() {
            c.next();
        }
        self.skip_forward();
    }
    fn prev(&mut self) {
        self.prepared = None;
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
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}
