//! Installing version edits without holding the db mutex across I/O: the
//! queue of jobs waiting for the MANIFEST and its leader.
//!
//! Every write-group leader takes the db mutex to make room for its write,
//! so whatever a background job does with the mutex held, foreground writes
//! wait for. Two jobs did slow I/O there: the MANIFEST append and its sync
//! (tens of milliseconds each under a compaction load), and the unlinks of
//! obsolete files (an unlink of a table whose pages are cached frees them:
//! milliseconds per file). On a W2 variant the writer spent about a third of
//! its time waiting for the mutex, 26 ms at a time (docs/benchmarks.md).
//! RocksDB releases its mutex for both (`VersionSet::LogAndApply` writes
//! the MANIFEST with it released; `PurgeObsoleteFiles` runs without it).
//!
//! Contract:
//! 1. [`DbInner::log_and_apply`] checks and encodes the edits under the
//!    mutex, writes them with the mutex released (appended to the open
//!    MANIFEST and synced, or, when a new MANIFEST is due, a new one with
//!    the whole state and CURRENT switched to it), and installs the new
//!    state under it again. One MANIFEST write is in flight at a
//!    time. Jobs queue their edits (db/manifest_queue.rs, oldest
//!    first); the job at the front, once no write is in flight, leads: it
//!    takes the edits of every job queued behind it, prepares them against
//!    the current state as one batch, writes them with one sync, installs
//!    them, and hands each job its result (RocksDB's
//!    `LogAndApply` with its manifest writer queue). A column family drop
//!    goes alone. Readers see the old version until the new one is
//!    installed, so nothing is visible before its edit is durable (version
//!    invariant 3).
//! 2. Obsolete files are chosen under the mutex and deleted without it
//!    (db/files.rs). An installed batch records what its edits took out
//!    of the versions there ([`super::files::FileLifecycle::record_removed`]).
//! 3. A leader that unwinds (an injected panic) gives the MANIFEST writer up
//!    ([`VersionSet::abandon_write`]): the next edit starts a new MANIFEST,
//!    and until it is installed the MANIFEST CURRENT names may hold the
//!    given-up edit, so no table or blob file that no version lists is
//!    deleted ([`VersionSet::manifest_uncertain`]).
//!    The other jobs of its batch go back to the front of the queue, in
//!    order, and waiters are woken, so the next leader writes their edits
//!    and no job waits forever.
//! 4. A family may be dropped while a job waits for the MANIFEST writer.
//!    Edits that only advance a dropped family's log number are left out;
//!    a job whose edit changes a dropped family's files is `Cancelled`
//!    (RocksDB's `ColumnFamilyDropped`), which is no background error: its
//!    outputs are deleted, and the database goes on.
//! 5. A flush's memtables leave their family's immutable memtables in the
//!    hold of the db mutex that installs its edit, by whichever job leads
//!    the batch ([`DbInner::log_and_apply_flush`]; RocksDB's manifest write
//!    callback, `RemoveMemTablesOrRestoreFlags`). The leader installs the
//!    super versions of every family next, and a super version listing the
//!    flush's table beside the memtable it came from would read each of
//!    the memtable's entries twice: a merge operand twice is a wrong value.

use std::sync::Arc;

use parking_lot::MutexGuard;

use super::files::RemovedFiles;
use super::manifest_queue::QueuedEdits;
use super::{DbInner, DbState};
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::version::VersionEdit;

/// A batch's result for one of its jobs: an error is handed to each as its
/// own copy.
fn share(result: &Result<()>) -> Result<()> {
    match result {
        Ok(()) => Ok(()),
        Err(e) => Err(e.duplicate()),
    }
}

/// Whether `edit` only advances its family's log number (what a flush
/// records for the other families), so that it may be left out once that
/// family is dropped.
fn only_log_number(edit: &VersionEdit) -> bool {
    let bare = VersionEdit { column_family: edit.column_family, log_number: edit.log_number, ..Default::default() };
    *edit == bare
}

/// A leader's batch from the moment it leaves the queue: if the leader
/// unwinds before it has handed out the results, the MANIFEST writer is
/// given up when it is out, and the other jobs go back to the front of the
/// queue (contract 3). Dropped with the db mutex held.
struct Leading<'g, 'a> {
    inner: &'g DbInner,
    st: &'g mut MutexGuard<'a, DbState>,
    /// The other jobs of the batch, until they have their results.
    followers: Vec<QueuedEdits>,
    /// The prepared edits are being written.
    writing: bool,
}

impl Drop for Leading<'_, '_> {
    fn drop(&mut self) {
        if self.writing {
            self.st.versions.abandon_write();
            // The unwound job's outputs may be on disk in no version.
            self.st.files.scan_next_time();
        }
        self.st.manifest_queue.requeue(self.followers.drain(..));
        self.inner.manifest_cv.notify_all();
    }
}

impl DbInner {
    /// Records `edits` durably in the MANIFEST and installs them (contract
    /// 1), on its own or in a batch with other jobs' edits. Requires the db
    /// mutex; releases it while waiting and while the MANIFEST is written.
    /// The caller installs a super version afterwards as before.
    pub(crate) fn log_and_apply(&self, st: &mut MutexGuard<'_, DbState>, edits: Vec<VersionEdit>) -> Result<()> {
        self.log_and_apply_queued(st, edits, None)
    }

    /// [`log_and_apply`](Self::log_and_apply) for a flush of family `cf`:
    /// once the edits are installed, `mems` (the memtables its table holds)
    /// are no longer among the family's immutable memtables (contract 5).
    pub(crate) fn log_and_apply_flush(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        edits: Vec<VersionEdit>,
        cf: u32,
        mems: &[Arc<MemTable>],
    ) -> Result<()> {
        self.log_and_apply_queued(st, edits, Some((cf, mems.to_vec())))
    }

    fn log_and_apply_queued(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        edits: Vec<VersionEdit>,
        flushed: Option<(u32, Vec<Arc<MemTable>>)>,
    ) -> Result<()> {
        let ticket = st.manifest_queue.enqueue(edits, flushed);
        loop {
            if let Some(result) = st.manifest_queue.take_result(ticket) {
                return result;
            }
            if st.manifest_queue.is_front(ticket) && !st.versions.manifest_busy() {
                break;
            }
            self.manifest_cv.wait(st);
        }
        let mut batch = st.manifest_queue.take_batch();
        let followers = batch.split_off(1);
        let mut leading = Leading { inner: self, st, followers, writing: false };
        let (own, own_flushed) = batch.pop().map(|q| (q.edits, q.flushed)).unwrap_or_default();
        // The waits released the mutex: a family may have been dropped since
        // a job built its edits (contract 4). Each job is decided alone.
        let families = leading.st.versions.families();
        let cancelled = |edits: &[VersionEdit]| {
            edits.iter().any(|e| !families.contains_key(&e.column_family) && !only_log_number(e))
        };
        let own_cancelled = cancelled(&own);
        let followers_cancelled: Vec<bool> = leading.followers.iter().map(|q| cancelled(&q.edits)).collect();
        let mut all: Vec<VersionEdit> = Vec::new();
        let jobs = std::iter::once((own, own_cancelled))
            .chain(leading.followers.iter().map(|q| q.edits.clone()).zip(followers_cancelled.iter().copied()));
        for (edits, cancelled) in jobs {
            if !cancelled {
                all.extend(edits.into_iter().filter(|e| families.contains_key(&e.column_family)));
            }
        }
        let removed = RemovedFiles::by(&all, leading.st.versions.families());
        let result = if all.is_empty() {
            Ok(())
        } else {
            match leading.st.versions.prepare(all) {
                Err(e) => Err(e),
                Ok(mut prepared) => {
                    leading.writing = true;
                    let written = MutexGuard::unlocked(leading.st, || prepared.write());
                    leading.writing = false;
                    leading.st.versions.install(prepared, written)
                }
            }
        };
        if result.is_err() || own_cancelled || followers_cancelled.iter().any(|c| *c) {
            // Outputs of edits not installed may be on disk in no version.
            leading.st.files.scan_next_time();
        }
        if result.is_ok() {
            let st: &mut DbState = leading.st;
            st.files.record_removed(removed, &st.versions);
            // Every flush of the batch leaves its memtables now, before any
            // super version is made from the new versions (contract 5).
            let flushes = std::iter::once((&own_flushed, own_cancelled))
                .chain(leading.followers.iter().map(|q| &q.flushed).zip(followers_cancelled.iter().copied()));
            for (flushed, cancelled) in flushes {
                if let (Some((cf, mems)), false) = (flushed, cancelled) {
                    st.families.remove_flushed(*cf, mems);
                }
            }
        }
        let followers = std::mem::take(&mut leading.followers);
        for (q, cancelled) in followers.into_iter().zip(followers_cancelled) {
            let r = if cancelled { Err(Error::Cancelled) } else { share(&result) };
            leading.st.manifest_queue.finish(q, r);
        }
        drop(leading);
        if own_cancelled {
            return Err(Error::Cancelled);
        }
        result
    }

    /// Returns once no MANIFEST write is in flight; the db mutex is held
    /// from then on until the caller releases it, so the families do not
    /// change under a check made before an edit is prepared.
    pub(crate) fn wait_for_manifest_writes(&self, st: &mut MutexGuard<'_, DbState>) {
        while st.versions.manifest_busy() {
            self.manifest_cv.wait(st);
        }
    }
}
