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
//!    mutex, writes them with the mutex released (appended to the open
//!    MANIFEST and synced, or, when a new MANIFEST is due, a new one with
//!    the whole state and CURRENT switched to it), and installs the new
//!    state under it again. One MANIFEST write is in flight at a
//!    time. Jobs queue their edits (`DbState::manifest_queue`, oldest
//!    first); the job at the front, once no write is in flight, leads: it
//!    takes the edits of every job queued behind it, prepares them against
//!    the current state as one batch, writes them with one sync, installs
//!    them, and hands each job its result (RocksDB's
//!    `LogAndApply` with its manifest writer queue). A column family drop
//!    goes alone. Readers see the old version until the new one is
//!    installed, so nothing is visible before its edit is durable (version
//!    invariant 3).
//! 2. Obsolete files are chosen under the mutex ([`DbInner::obsolete_files`])
//!    and deleted without it ([`DbInner::purge`]). A file chosen is obsolete
//!    for good: file numbers are never reused, and no edit brings back a
//!    table it removed. They are found by reference, not by listing the
//!    directory after every job (RocksDB's `FindObsoleteFiles` without a
//!    full scan): an installed batch records the tables its edits took out
//!    of their family's version (not those it moved) with a weak reference
//!    to their metadata, which every version, reader and job that may read
//!    the table holds; such a table is obsolete once that count is zero and
//!    its family's current version does not list its number. Blob files
//!    that left a version are obsolete once no live version lists them, and
//!    WALs once they are below the log number. The directory is listed (a
//!    full scan, which also finds old MANIFESTs, OPTIONS files, temporaries
//!    and what a failed job left) at open, after a job fails, a family is
//!    dropped or an OPTIONS file is written, and every
//!    [`FULL_SCAN_EVERY`] looks; none is made while a MANIFEST write is in
//!    flight, because the outputs that edit adds are then in no version yet
//!    (the job that wrote it looks again once it is installed). After a
//!    MANIFEST write fails, the MANIFEST CURRENT names may hold the failed
//!    edit, so until a new MANIFEST with the whole state is installed a
//!    scan deletes no table or blob file that no version lists
//!    ([`VersionSet::manifest_uncertain`]).
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

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Weak};

use parking_lot::MutexGuard;

use super::jobs::{Hold, JobGuard};
use super::{DbInner, DbState};
use crate::error::{Error, Result};
use crate::key::user_key;
use crate::memtable::MemTable;
use crate::version::{filename, FileMetaData, Version, VersionEdit};

/// Looks for obsolete files between two listings of the directory, as a
/// safety net for a file nothing recorded (RocksDB lists it every
/// `delete_obsolete_files_period_micros`, six hours by default).
pub(crate) const FULL_SCAN_EVERY: u32 = 256;

/// A table an installed edit took out of its family's version.
struct RemovedTable {
    family: u32,
    number: u64,
    /// Its smallest user key: where it would be in a level it is listed in.
    smallest: Vec<u8>,
    /// Held by every version, reader and job that may read it.
    meta: Weak<FileMetaData>,
}

impl RemovedTable {
    /// Whether the table's family's version `v` lists its number at some
    /// level (a table moved is listed again; a number is never reused).
    fn listed_in(&self, v: &Version) -> bool {
        v.levels.iter().enumerate().any(|(level, files)| {
            if level == 0 {
                return files.iter().any(|f| f.number == self.number);
            }
            let i = files.partition_point(|f| v.cmp.lt(f.largest_user_key(), &self.smallest));
            files.get(i).is_some_and(|f| f.number == self.number)
        })
    }
}

/// Files that left a version and become obsolete once nothing holds them
/// (contract 2). Requires the db mutex.
#[derive(Default)]
pub(crate) struct ObsoleteCandidates {
    tables: Vec<RemovedTable>,
    blob_files: Vec<u64>,
    looks_since_scan: u32,
    /// The next look lists the directory.
    scan_due: bool,
}

impl ObsoleteCandidates {
    /// Makes the next look list the directory: a job failed (its outputs
    /// may be on disk in no version), a family was dropped, or a file other
    /// than a table, blob file or WAL became obsolete.
    pub(crate) fn scan_next_time(&mut self) {
        self.scan_due = true;
    }

    /// Whether tables or blob files wait for a look to delete them (held
    /// by something when the last look ran).
    pub(crate) fn pending(&self) -> bool {
        !self.tables.is_empty() || !self.blob_files.is_empty()
    }
}

/// The tables `edits` take out of the versions of `families` (not those
/// they move to another level), and the blob files of the families they
/// touch, to tell after the install which left.
fn removed_by(
    edits: &[VersionEdit],
    families: &std::collections::BTreeMap<u32, crate::version::FamilyVersions>,
) -> (Vec<RemovedTable>, Vec<(u32, Vec<u64>)>) {
    let added: HashSet<u64> = edits.iter().flat_map(|e| e.new_files.iter().map(|(_, f)| f.number)).collect();
    // The numbers deleted per family and level, so each level touched is
    // walked once however many of its files go.
    let mut deleted: std::collections::BTreeMap<(u32, usize), HashSet<u64>> = Default::default();
    let mut blobs = Vec::new();
    for e in edits {
        let Some(family) = families.get(&e.column_family) else { continue };
        for (level, number) in e.deleted_files.iter().filter(|(_, n)| !added.contains(n)) {
            deleted.entry((e.column_family, *level)).or_default().insert(*number);
        }
        let v = &family.current;
        if !v.blob_files.is_empty() && !blobs.iter().any(|(id, _)| *id == e.column_family) {
            blobs.push((e.column_family, v.live_blob_files().collect()));
        }
    }
    let mut tables = Vec::new();
    for ((id, level), numbers) in deleted {
        let Some(files) = families.get(&id).and_then(|f| f.current.levels.get(level)) else { continue };
        for f in files.iter().filter(|f| numbers.contains(&f.number)) {
            tables.push(RemovedTable {
                family: id,
                number: f.number,
                smallest: user_key(&f.smallest).to_vec(),
                meta: Arc::downgrade(f),
            });
        }
    }
    (tables, blobs)
}

/// The edits of one job waiting for the MANIFEST.
struct QueuedEdits {
    ticket: u64,
    edits: Vec<VersionEdit>,
    /// A flush's family and the memtables its table holds: they leave the
    /// family's immutable memtables when the edits are installed, in the
    /// same hold of the db mutex (contract 5).
    flushed: Option<(u32, Vec<Arc<MemTable>>)>,
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
    fn enqueue(&mut self, edits: Vec<VersionEdit>, flushed: Option<(u32, Vec<Arc<MemTable>>)>) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.waiting.push_back(QueuedEdits { ticket, edits, flushed });
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

/// A file chosen for deletion: its kind, number and, when a listing found
/// it, its name in the directory (otherwise the name its kind gives it).
pub(crate) struct ObsoleteFile {
    kind: filename::FileType,
    number: u64,
    name: Option<String>,
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
            self.st.obsolete.scan_next_time();
        }
        for q in self.followers.drain(..).rev() {
            self.st.manifest_queue.waiting.push_front(q);
        }
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
        let (removed_tables, blobs_before) = removed_by(&all, leading.st.versions.families());
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
            leading.st.obsolete.scan_next_time();
        }
        if result.is_ok() {
            let st = &mut *leading.st;
            for (id, before) in blobs_before {
                let after = st.versions.version(id);
                let left = before.into_iter().filter(|n| !after.as_ref().is_some_and(|v| v.blob_files.contains_key(n)));
                st.obsolete.blob_files.extend(left);
            }
            st.obsolete.tables.extend(removed_tables);
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
            let mut purging = JobGuard::new(self, st, Hold::Purge);
            if !MutexGuard::unlocked(&mut purging, || self.purge(files)) {
                // A file left is found by the next listing.
                purging.obsolete.scan_next_time();
            }
        }
    }

    /// Old WALs, unreferenced SSTs and blob files; with a full scan also
    /// old MANIFESTs and OPTIONS files, temporaries, and outputs no version
    /// lists (contract 2). Requires the db mutex. None while a MANIFEST
    /// write is in flight.
    pub(crate) fn obsolete_files(&self, st: &mut DbState) -> Vec<ObsoleteFile> {
        if st.versions.manifest_busy() || st.file_deletions_disabled > 0 {
            return Vec::new();
        }
        st.live_versions.retain(|(_, w)| w.strong_count() > 0);
        let log_number = st.versions.log_number();
        let mut files = Vec::new();
        for number in st.families.take_wals_below(log_number) {
            // Pending or sealed: the sealer renames it only with deletions
            // held out, and purge removes whichever name it has.
            files.push(ObsoleteFile { kind: filename::FileType::Wal, number, name: None });
        }
        self.wal_sealer.forget_below(log_number);
        // A MANIFEST a roll replaced: CURRENT names the new one.
        for number in st.versions.take_retired_manifests() {
            let name = filename::manifest_file(&self.dir, number).file_name().map(|n| n.to_string_lossy().into_owned());
            files.push(ObsoleteFile { kind: filename::FileType::Manifest, number, name });
        }
        let versions = &st.versions;
        st.obsolete.tables.retain(|t| {
            let held = t.meta.strong_count() > 0;
            let listed = || versions.version(t.family).is_some_and(|v| t.listed_in(&v));
            if held || listed() {
                // A reader or job still holds it (a listed one was moved
                // back by a later edit: it leaves with a later one again).
                return held;
            }
            files.push(ObsoleteFile { kind: filename::FileType::Table, number: t.number, name: None });
            false
        });
        if !st.obsolete.blob_files.is_empty() {
            let mut listed: BTreeSet<u64> =
                st.versions.families().values().flat_map(|f| f.current.live_blob_files().collect::<Vec<_>>()).collect();
            for v in st.live_versions.iter().filter_map(|(_, w)| w.upgrade()) {
                listed.extend(v.live_blob_files());
            }
            st.obsolete.blob_files.sort_unstable();
            st.obsolete.blob_files.dedup();
            st.obsolete.blob_files.retain(|n| {
                if listed.contains(n) {
                    return true;
                }
                files.push(ObsoleteFile { kind: filename::FileType::Blob, number: *n, name: None });
                false
            });
        }
        st.obsolete.looks_since_scan += 1;
        if st.obsolete.scan_due || st.obsolete.looks_since_scan >= FULL_SCAN_EVERY {
            if let Some(scanned) = self.scan_for_obsolete_files(st, log_number) {
                // A scan that had to spare unlisted tables (an uncertain
                // MANIFEST) is made again later.
                st.obsolete.scan_due = st.versions.manifest_uncertain();
                st.obsolete.looks_since_scan = 0;
                // Every file takes its number from one counter.
                let chosen: HashSet<u64> = files.iter().map(|f| f.number).collect();
                files.extend(scanned.into_iter().filter(|f| !chosen.contains(&f.number)));
            }
        }
        files
    }

    /// The full scan: every file in the directory no live version lists
    /// and no job is writing. `None` when the directory cannot be listed
    /// (the next look tries again).
    fn scan_for_obsolete_files(&self, st: &DbState, log_number: u64) -> Option<Vec<ObsoleteFile>> {
        let names = self.fs.list_dir(&self.dir).ok()?;
        let mut live: HashSet<u64> = st
            .versions
            .families()
            .values()
            .flat_map(|f| f.current.live_files().chain(f.current.live_blob_files()))
            .collect();
        // A running compaction of a family dropped meanwhile still reads its inputs.
        live.extend(st.jobs.being_compacted().iter().copied());
        for v in st.live_versions.iter().filter_map(|(_, w)| w.upgrade()) {
            live.extend(v.live_files().chain(v.live_blob_files()));
        }
        // Tables a reader or job still holds, of families dropped since.
        live.extend(st.obsolete.tables.iter().map(|t| t.number));
        // Jobs number their outputs from a floor recorded when they started.
        let protected_from = st.jobs.output_floor();
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
                filename::FileType::Wal => number < log_number && number != st.families.current_wal(),
                // Not after a failed MANIFEST write: the MANIFEST a reopen
                // reads may name them.
                filename::FileType::Table | filename::FileType::Blob => {
                    !live.contains(&number) && number < protected_from && !st.versions.manifest_uncertain()
                }
                filename::FileType::Manifest => number < manifest,
                filename::FileType::Options => number < newest_options,
                // An OPTIONS file being written (without the db mutex) has
                // a number above every OPTIONS file; a crash's leftover is
                // older than the one the open wrote.
                filename::FileType::Temp => {
                    match name.strip_prefix("OPTIONS-").and_then(|r| r.strip_suffix(".dbtmp")) {
                        Some(n) => n.parse::<u64>().is_ok_and(|n| n < newest_options),
                        None => number < protected_from,
                    }
                }
                _ => false,
            };
            if obsolete {
                files.push(ObsoleteFile { kind, number, name: Some(name) });
            }
        }
        Some(files)
    }

    /// Deletes `files` (from [`DbInner::obsolete_files`]). Needs no db mutex;
    /// two purges deleting the same file are harmless. Returns whether every
    /// file went: one left is for the next listing to find.
    pub(crate) fn purge(&self, files: Vec<ObsoleteFile>) -> bool {
        let mut all_gone = true;
        for f in files {
            kill_point!("obsolete_delete" => false);
            match f.kind {
                filename::FileType::Table => self.tables.evict(f.number),
                filename::FileType::Blob => self.blobs.evict(f.number),
                _ => {}
            }
            // A sealer renaming this WAL, pending, waits (`finalize_wal_name`).
            let _sealers_held = (f.kind == filename::FileType::Wal).then(|| self.wal_sealer.hold_deletions());
            let paths = match (&f.name, f.kind) {
                (Some(name), _) => vec![self.dir.join(name)],
                (None, filename::FileType::Table) => vec![filename::table_file(&self.dir, f.number)],
                (None, filename::FileType::Blob) => vec![filename::blob_file(&self.dir, f.number)],
                (None, filename::FileType::Wal) => {
                    vec![filename::wal_file(&self.dir, f.number), filename::pending_wal_file(&self.dir, f.number)]
                }
                (None, _) => Vec::new(),
            };
            for path in paths.iter().filter(|p| f.name.is_some() || self.fs.exists(p)) {
                all_gone &= self.fs.remove_file(path).is_ok();
            }
        }
        all_gone
    }
}
