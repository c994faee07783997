//! The sticky background error (RocksDB's `ErrorHandler`, without its
//! recovery): after a failed WAL write, WAL sync, flush or MANIFEST write,
//! or a panic in a background job or a write group's leader, the first
//! error is kept and every later write fails with it until the database is
//! reopened (db/mod.rs, invariant 4).
//!
//! Invariant: once set, the error never changes and is never cleared.
//! Requires the db mutex.

use std::sync::Arc;

use crate::error::{Error, Result};

/// The first background error, if any (the module's invariant).
#[derive(Default)]
pub(crate) struct BackgroundError {
    first: Option<Arc<Error>>,
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
    /// force and whether it is `e` (the first).
    pub(crate) fn set(&mut self, e: Error) -> (Arc<Error>, bool) {
        let first = self.first.is_none();
        let arc = Arc::clone(self.first.get_or_insert_with(|| Arc::new(e)));
        (arc, first)
    }
}
