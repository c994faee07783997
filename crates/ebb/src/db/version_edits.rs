//! Installing version edits without holding the db mutex across I/O.
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
//!    mutex, appends and syncs them with the mutex released, and installs
//!    the new state under it again. One MANIFEST write is in flight at a
//!    time. Jobs queue their edits (`DbState::manifest_queue`, oldest
//!    first); the job at the front, once no write is in flight, leads: it
//!    takes the edits of every job queued behind it, prepares them against
//!    the current state as one batch, writes them in one append and one
//!    sync, installs them, and hands each job its result (RocksDB's
//!    `LogAndApply` with its manifest writer queue). A column family drop
//!    goes alone. Readers see the old version until the new one is
//!    installed, so nothing is visible before its edit is durable (version
//!    invariant 3).
//! 2. Obsolete files are chosen under the mutex ([`DbInner::obsolete_files`])
//!    and deleted without it ([`DbInner::purge`]). A file chosen is obsolete
//!    for good: file numbers are never reused, and no edit brings back a
//!    table it removed. None are chosen while a MANIFEST write is in flight,
//!    because the outputs that edit adds are then in no version yet; the job
//!    that wrote it looks again once it is installed.
//! 3. A leader that unwinds (an injected panic) gives the MANIFEST writer up
//!    ([`VersionSet::abandon_write`]): the next edit starts a new MANIFEST.
//!    The other jobs of its batch go back to the front of the queue, in
//!    order, and waiters are woken, so the next leader writes their edits
//!    and no job waits forever.
//! 4. A family may be dropped while a job waits for the MANIFEST writer.
//!    Edits that only advance a dropped family's log number are left out;
//!    a job whose edit changes a dropped family's files is `Cancelled`
//!    (RocksDB's `ColumnFamilyDropped`), which is no background error: its
//!    outputs are deleted, and the database goes on.

use std::collections::{HashMap, VecDeque};

use parking_lot::MutexGuard;

use super::{DbInner, DbState};
use crate::error::{Error, Result};
use crate::version::{filename, VersionEdit};

/// The edits of one job waiting for the MANIFEST.
struct QueuedEdits {
    ticket: u64,
    edits: Vec<VersionEdit>,
}

/// Jobs waiting to have their edits written to the MANIFEST, and the
/// results a leader left for the jobs of its batch (contract 1). Requires
/// the db mutex.
#[derive(Default)]
pub(crate) struct ManifestQueue {
    next_ticket: u64,
    waiting: VecDeque<QueuedEdits>,
    done: HashMap<u64, Result<()>>,
}

impl ManifestQueue {
    fn enqueue(&mut self, edits: Vec<VersionEdit>) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.waiting.push_back(QueuedEdits { ticket, edits });
        ticket
    }

    /// The batch the front job leads: itself and the jobs behind it up to
    /// the first family drop, which goes alone.
    fn take_batch(&mut self) -> Vec<QueuedEdits> {
        let drops = |q: &QueuedEdits| q.edits.iter().any(|e| e.column_family_drop);
        let mut batch = Vec::new();
        while let Some(next) = self.waiting.front() {
            if !batch.is_empty() && (drops(next) || batch.iter().any(drops)) {
                break;
            }
            batch.extend(self.waiting.pop_front());
        }
        batch
    }
}

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

/// A file chosen for deletion: its kind, number and name in the directory.
pub(crate) struct ObsoleteFile {
    kind: filename::FileType,
    number: u64,
    name: String,
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
        }
        for q in self.followers.drain(..).rev() {
            self.st.manifest_queue.waiting.push_front(q);
        }
        self.inner.manifest_cv.notify_all();
    }
}

/// Counts a purge in `DbState::purges_running` until it ends, also by an
/// unwind. Dropped with the db mutex held.
struct Purging<'g, 'a> {
    inner: &'g DbInner,
    st: &'g mut MutexGuard<'a, DbState>,
}

impl Drop for Purging<'_, '_> {
    fn drop(&mut self) {
        self.st.purges_running -= 1;
        self.inner.bg_cv.notify_all();
    }
}

impl DbInner {
    /// Records `edits` durably in the MANIFEST and installs them (contract
    /// 1), on its own or in a batch with other jobs' edits. Requires the db
    /// mutex; releases it while waiting and while the MANIFEST is written.
    /// The caller installs a super version afterwards as before.
    pub(crate) fn log_and_apply(&self, st: &mut MutexGuard<'_, DbState>, edits: Vec<VersionEdit>) -> Result<()> {
        let ticket = st.manifest_queue.enqueue(edits);
        loop {
            if let Some(result) = st.manifest_queue.done.remove(&ticket) {
                return result;
            }
            let front = st.manifest_queue.waiting.front().map(|q| q.ticket);
            if front == Some(ticket) && !st.versions.manifest_busy() {
                break;
            }
            self.manifest_cv.wait(st);
        }
        let mut batch = st.manifest_queue.take_batch();
        let followers = batch.split_off(1);
        let mut leading = Leading { inner: self, st, followers, writing: false };
        let own = batch.pop().map(|q| q.edits).unwrap_or_default();
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
        let result = if all.is_empty() {
            Ok(())
        } else {
            match leading.st.versions.prepare(all) {
                Err(e) => Err(e),
                Ok(prepared) if !prepared.needs_write() => leading.st.versions.install(prepared, Ok(())),
                Ok(mut prepared) => {
                    leading.writing = true;
                    let written = MutexGuard::unlocked(leading.st, || prepared.write());
                    leading.writing = false;
                    leading.st.versions.install(prepared, written)
                }
            }
        };
        let followers = std::mem::take(&mut leading.followers);
        for (q, cancelled) in followers.into_iter().zip(followers_cancelled) {
            let r = if cancelled { Err(Error::Cancelled) } else { share(&result) };
            leading.st.manifest_queue.done.insert(q.ticket, r);
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

    /// Deletes the files no live version lists and no job is writing
    /// (contract 2): chosen with the db mutex held, deleted with it
    /// released.
    pub(crate) fn delete_obsolete_files(&self, st: &mut MutexGuard<'_, DbState>) {
        let files = self.obsolete_files(st);
        if !files.is_empty() {
            // Counted, so `wait_for_compact` does not return before the
            // files a job made obsolete are gone.
            st.purges_running += 1;
            let purging = Purging { inner: self, st };
            MutexGuard::unlocked(purging.st, || self.purge(files));
        }
    }

    /// Old WALs, unreferenced SSTs and blob files, old MANIFESTs and
    /// OPTIONS files, temporaries. Requires the db mutex. None while a
    /// MANIFEST write is in flight.
    pub(crate) fn obsolete_files(&self, st: &mut DbState) -> Vec<ObsoleteFile> {
        if st.versions.manifest_busy() {
            return Vec::new();
        }
        let Ok(names) = self.fs.list_dir(&self.dir) else { return Vec::new() };
        st.live_versions.retain(|(_, w)| w.strong_count() > 0);
        let mut live: std::collections::HashSet<u64> = st
            .versions
            .families()
            .values()
            .flat_map(|f| f.current.live_files().chain(f.current.live_blob_files()))
            .collect();
        // A running compaction of a family dropped meanwhile still reads its inputs.
        live.extend(st.being_compacted.iter().copied());
        for v in st.live_versions.iter().filter_map(|(_, w)| w.upgrade()) {
            live.extend(v.live_files().chain(v.live_blob_files()));
        }
        // Jobs number their outputs from a floor recorded when they started.
        let protected_from = st.pending_outputs.iter().copied().min().unwrap_or(u64::MAX);
        let log_number = st.versions.log_number();
        st.old_wals.retain(|(number, _)| *number >= log_number);
        self.wal_sealer.forget_below(log_number);
        let manifest = st.versions.manifest_number();
        let newest_options = names
            .iter()
            .filter_map(|n| filename::parse_file_name(n))
            .filter(|(t, _)| *t == filename::FileType::Options)
            .map(|(_, n)| n)
            .max()
            .unwrap_or(0);
        let mut files = Vec::new();
        for name in names {
            let Some((kind, number)) = filename::parse_file_name(&name) else { continue };
            let obsolete = match kind {
                filename::FileType::Wal => number < log_number && number != st.wal_number,
                filename::FileType::Table | filename::FileType::Blob => {
                    !live.contains(&number) && number < protected_from
                }
                filename::FileType::Manifest => number < manifest,
                filename::FileType::Options => number < newest_options,
                filename::FileType::Temp => number < protected_from,
                _ => false,
            };
            if obsolete {
                files.push(ObsoleteFile { kind, number, name });
            }
        }
        files
    }

    /// Deletes `files` (from [`DbInner::obsolete_files`]). Needs no db mutex;
    /// two purges deleting the same file are harmless (errors are ignored:
    /// a file left is chosen again by the next look).
    pub(crate) fn purge(&self, files: Vec<ObsoleteFile>) {
        for f in files {
            kill_point!("obsolete_delete" => ());
            match f.kind {
                filename::FileType::Table => self.tables.evict(f.number),
                filename::FileType::Blob => self.blobs.evict(f.number),
                _ => {}
            }
            // A sealer renaming this WAL, pending, waits (`finalize_wal_name`).
            let _sealers_held = (f.kind == filename::FileType::Wal).then(|| self.wal_sealer.hold_deletions());
            let _ = self.fs.remove_file(&self.dir.join(&f.name));
        }
    }
}
