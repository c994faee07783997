//! The guards a background job holds while it runs: [`JobGuard`] takes
//! what the job holds in the job accounting (db/jobs.rs) and gives it back
//! however the job ends, and [`NewTables`] deletes the files a job made but
//! never handed to the MANIFEST. So a job that fails, or unwinds from a
//! panic, leaves neither waiters waiting for it nor files behind.

use std::ops::{Deref, DerefMut};

use parking_lot::{Mutex, MutexGuard};

use super::jobs::Hold;
use super::{DbInner, DbState};
use crate::version::filename;

/// A job's hold on [`Jobs`], taken when the guard is made and given back
/// when it drops. Waiters are woken then (`bg_cv`, `work_cv`).
///
/// The guard owns the job's use of the db lock: it derefs to the job's
/// `MutexGuard`, so the lock is held whenever the guard drops, also during
/// an unwind (`MutexGuard::unlocked` takes the lock back on the way out).
/// So its `Drop` never takes the lock, and cannot deadlock.
pub(crate) struct JobGuard<'g, 'a> {
    inner: &'g DbInner,
    st: &'g mut MutexGuard<'a, DbState>,
    hold: Hold,
}

impl<'g, 'a> JobGuard<'g, 'a> {
    pub(crate) fn new(inner: &'g DbInner, st: &'g mut MutexGuard<'a, DbState>, hold: Hold) -> Self {
        st.jobs.take(&hold);
        JobGuard { inner, st, hold }
    }
}

impl<'a> Deref for JobGuard<'_, 'a> {
    type Target = MutexGuard<'a, DbState>;
    fn deref(&self) -> &Self::Target {
        self.st
    }
}

impl DerefMut for JobGuard<'_, '_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.st
    }
}

impl Drop for JobGuard<'_, '_> {
    fn drop(&mut self) {
        self.st.jobs.give_back(&self.hold);
        self.inner.bg_cv.notify_all();
        self.inner.work_cv.notify_all();
    }
}

/// The tables and blob files a job creates (their numbers, recorded as they
/// are handed out), deleted when the guard drops unless the job handed them
/// to the MANIFEST first (`installing`): a job that fails or panics before
/// that leaves none behind. Once an edit listing them may have reached the
/// MANIFEST they are never deleted here, even if installing fails: whether
/// it reached the disk is unknown, and the reopen decides.
pub(crate) struct NewTables<'g> {
    inner: &'g DbInner,
    numbers: Mutex<Vec<u64>>,
}

impl<'g> NewTables<'g> {
    pub(crate) fn new(inner: &'g DbInner) -> Self {
        NewTables { inner, numbers: Mutex::new(Vec::new()) }
    }

    /// Records table or blob file `number` as created by the job; returns it.
    pub(crate) fn record(&self, number: u64) -> u64 {
        self.numbers.lock().push(number);
        number
    }

    /// The tables are about to be handed to the MANIFEST.
    pub(crate) fn installing(&self) {
        self.numbers.lock().clear();
    }
}

impl Drop for NewTables<'_> {
    fn drop(&mut self) {
        for number in self.numbers.get_mut().drain(..) {
            self.inner.tables.evict(number);
            self.inner.blobs.evict(number);
            // A number names one file, a table or a blob file; a number
            // handed out for a file never started has none.
            let _ = self.inner.fs.remove_file(&filename::table_file(&self.inner.dir, number));
            let _ = self.inner.fs.remove_file(&filename::blob_file(&self.inner.dir, number));
        }
    }
}
