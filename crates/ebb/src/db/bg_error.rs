//! The sticky background error (RocksDB's `ErrorHandler`, without its
//! automatic recovery): after a failed WAL write, WAL sync, flush or
//! MANIFEST write, or a panic in a background job or a write group's
//! leader, the first error is kept and every later write fails with it
//! until [`Db::resume`](crate::Db::resume) recovers from it or the database
//! is reopened (db/mod.rs, invariant 4).
//!
//! Invariants:
//! 1. Once set, the error does not change; it is cleared only by a resume
//!    (db/resume.rs) that has put every write the error put at risk in
//!    tables, with the write queue held.
//! 2. Only an I/O error is recoverable, and only one recorded as such
//!    ([`BackgroundError::set`]): a panic, corrupt data, or a failure that
//!    left part of a write group in a memtable is fatal, and only a reopen
//!    ends it.
//! 3. `burned` is at least the last sequence number any write that failed
//!    on the WAL was given: a resume publishes it, so that no later write
//!    reuses a number a failed record may hold in a WAL.
//!
//! Requires the db mutex.

use std::sync::Arc;

use crate::error::{Error, Result};

/// The first background error, if any (the module's invariants).
#[derive(Default)]
pub(crate) struct BackgroundError {
    first: Option<Arc<Error>>,
    recoverable: bool,
    burned: u64,
    /// Errors that became sticky since open (`ebb.background-errors`).
    count: u64,
}

impl BackgroundError {
    /// `Ok` while no background error is set; otherwise that error,
    /// wrapped as every later write sees it.
    pub(crate) fn check(&self) -> Result<()> {
        match &self.first {
            Some(e) => Err(Error::Background(Arc::clone(e))),
            None => Ok(()),
        }
    }

    pub(crate) fn is_set(&self) -> bool {
        self.first.is_some()
    }

    /// The error, if set.
    pub(crate) fn get(&self) -> Option<&Arc<Error>> {
        self.first.as_ref()
    }

    /// Records `e` unless an error is set already; returns the error in
    /// force and whether it is `e` (the first). With `fatal` (or when `e`
    /// is not an I/O error) the error in force becomes fatal, even if it
    /// was set before (invariant 2).
    pub(crate) fn set(&mut self, e: Error, fatal: bool) -> (Arc<Error>, bool) {
        let first = self.first.is_none();
        let io = matches!(e, Error::Io { .. });
        if first {
            self.recoverable = io && !fatal;
            self.count += 1;
        } else if fatal || !io {
            self.recoverable = false;
        }
        let arc = Arc::clone(self.first.get_or_insert_with(|| Arc::new(e)));
        (arc, first)
    }

    /// Notes that a write given sequence numbers up to `last` failed on the
    /// WAL (invariant 3).
    pub(crate) fn burn(&mut self, last: u64) {
        self.burned = self.burned.max(last);
    }

    /// Whether [`BackgroundError::clear`] may end the error in force.
    pub(crate) fn recoverable(&self) -> bool {
        self.first.is_some() && self.recoverable
    }

    /// Ends the error in force (a resume's last step, invariant 1); returns
    /// the last sequence number a failed write may hold, which the resume
    /// publishes.
    pub(crate) fn clear(&mut self) -> u64 {
        self.first = None;
        self.recoverable = false;
        std::mem::take(&mut self.burned)
    }

    /// Errors that became sticky since open.
    pub(crate) fn count(&self) -> u64 {
        self.count
    }
}
