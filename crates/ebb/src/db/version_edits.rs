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
//!    time: a second job waits (`manifest_cv`) until the first is installed,
//!    then prepares against the state that includes it. Readers see the old
//!    version until the new one is installed, so nothing is visible before
//!    its edit is durable (version invariant 3).
//! 2. Obsolete files are chosen under the mutex ([`DbInner::obsolete_files`])
//!    and deleted without it ([`DbInner::purge`]). A file chosen is obsolete
//!    for good: file numbers are never reused, and no edit brings back a
//!    table it removed. None are chosen while a MANIFEST write is in flight,
//!    because the outputs that edit adds are then in no version yet; the job
//!    that wrote it looks again once it is installed.
//! 3. A writer that unwinds (an injected panic) gives the MANIFEST writer up
//!    ([`VersionSet::abandon_write`]): the next edit starts a new MANIFEST,
//!    and waiters are woken, so no job waits forever.
//! 4. A family may be dropped while a job waits for the MANIFEST writer.
//!    Edits that only advance a dropped family's log number are left out;
//!    a job whose edit changes a dropped family's files is `Cancelled`
//!    (RocksDB's `ColumnFamilyDropped`), which is no background error: its
//!    outputs are deleted, and the database goes on.

use parking_lot::MutexGuard;

use super::{DbInner, DbState};
use crate::error::{Error, Result};
use crate::version::{filename, VersionEdit};

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

/// Marks the MANIFEST writer given up if the write unwinds before it is
/// installed (contract 3). Dropped with the db mutex held.
struct InFlight<'g, 'a> {
    inner: &'g DbInner,
    st: &'g mut MutexGuard<'a, DbState>,
    installed: bool,
}

impl Drop for InFlight<'_, '_> {
    fn drop(&mut self) {
        if !self.installed {
            self.st.versions.abandon_write();
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
    /// 1). Requires the db mutex; releases it while the MANIFEST is written.
    /// The caller installs a super version afterwards as before.
    pub(crate) fn log_and_apply(&self, st: &mut MutexGuard<'_, DbState>, mut edits: Vec<VersionEdit>) -> Result<()> {
        self.wait_for_manifest_writes(st);
        // The wait released the mutex: a family may have been dropped since
        // the caller built its edits (contract 4).
        let families = st.versions.families();
        if edits.iter().any(|e| !families.contains_key(&e.column_family) && !only_log_number(e)) {
            return Err(Error::Cancelled);
        }
        edits.retain(|e| families.contains_key(&e.column_family));
        if edits.is_empty() {
            return Ok(());
        }
        let mut prepared = st.versions.prepare(edits)?;
        if !prepared.needs_write() {
            return st.versions.install(prepared, Ok(()));
        }
        let mut in_flight = InFlight { inner: self, st, installed: false };
        let written = MutexGuard::unlocked(in_flight.st, || prepared.write());
        in_flight.installed = true;
        in_flight.st.versions.install(prepared, written)
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
