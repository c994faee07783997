//! The lifecycle of the database's files: which versions readers and jobs
//! hold, which files left a version and when they become obsolete, the
//! holds on deletions (checkpoints, backups, `disable_file_deletions`), and
//! the deletion itself (RocksDB's `FindObsoleteFiles` and
//! `PurgeObsoleteFiles`).
//!
//! Obsolete files are chosen under the db mutex
//! ([`DbInner::obsolete_files`]) and deleted without it
//! ([`DbInner::purge`]). A file chosen is obsolete for good: file numbers
//! are never reused, and no edit brings back a table it removed. They are
//! found by reference, not by listing the directory after every job
//! (RocksDB's `FindObsoleteFiles` without a full scan): an installed batch
//! of edits records the tables its edits took out of their family's
//! version (not those it moved) with a weak reference to their metadata,
//! which every version, reader and job that may read the table holds
//! ([`FileLifecycle::record_removed`]); such a table is obsolete once that
//! count is zero and its family's current version does not list its
//! number. Blob files that left a version are obsolete once no live
//! version lists them, and WALs once they are below the log number.
//!
//! Invariants (all under the db mutex):
//! 1. Every version handed to a reader, or held by a compaction, is in
//!    `live_versions` (as a weak reference) until it is dropped: the files
//!    it lists stay.
//! 2. While any deletion hold is taken, no file is chosen as obsolete.
//! 3. No file is chosen while a MANIFEST write is in flight: the outputs
//!    that edit adds are then in no version yet (the job that wrote it
//!    looks again once it is installed).
//! 4. The directory is listed (a full scan, which also finds old
//!    MANIFESTs, OPTIONS files, temporaries and what a failed job left) at
//!    open, after a job fails, a family is dropped or an OPTIONS file is
//!    written, and every [`FULL_SCAN_EVERY`] looks. After a MANIFEST write
//!    fails or is given up, the MANIFEST CURRENT names may hold the edit,
//!    so until a new MANIFEST with the whole state is installed a scan
//!    deletes no table or blob file that no version lists
//!    ([`VersionSet::manifest_uncertain`]).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Weak};

use parking_lot::MutexGuard;

use super::jobs::{Hold, JobGuard};
use super::{DbInner, DbState};
use crate::key::user_key;
use crate::version::{filename, FamilyVersions, FileMetaData, Version, VersionEdit, VersionSet};

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

/// Versions held, files that left a version, and deletion holds (the
/// module's invariants). Requires the db mutex.
#[derive(Default)]
pub(crate) struct FileLifecycle {
    /// Every version handed to a reader or held by a compaction, with its
    /// column family (invariant 1).
    live_versions: Vec<(u32, Weak<Version>)>,
    /// Tables that left a version, obsolete once nothing holds them.
    tables: Vec<RemovedTable>,
    /// Blob files that left a version, obsolete once no live version lists them.
    blob_files: Vec<u64>,
    looks_since_scan: u32,
    /// The next look lists the directory.
    scan_due: bool,
    /// Holds on deletions (invariant 2).
    deletion_holds: usize,
}

impl FileLifecycle {
    /// Keeps the files `version` (of family `cf`) lists while it lives.
    pub(crate) fn hold_version(&mut self, cf: u32, version: &Arc<Version>) {
        self.live_versions.push((cf, Arc::downgrade(version)));
    }

    /// Forgets the versions no one holds any more.
    pub(crate) fn forget_dropped_versions(&mut self) {
        self.live_versions.retain(|(_, w)| w.strong_count() > 0);
    }

    /// The versions of family `cf` still held.
    pub(crate) fn held_versions(&mut self, cf: u32) -> Vec<Arc<Version>> {
        self.forget_dropped_versions();
        self.live_versions.iter().filter(|(id, _)| *id == cf).filter_map(|(_, w)| w.upgrade()).collect()
    }

    /// Takes a hold on deletions (invariant 2).
    pub(crate) fn hold_deletions(&mut self) {
        self.deletion_holds += 1;
    }

    /// Gives one hold back; returns whether none is left.
    pub(crate) fn release_deletions(&mut self) -> bool {
        self.deletion_holds = self.deletion_holds.saturating_sub(1);
        self.deletion_holds == 0
    }

    /// What an installed batch of edits took out of the versions
    /// (from [`RemovedFiles::by`], made before the install), now that
    /// `versions` holds the new state: its tables wait until nothing holds
    /// them, its blob files until no live version lists them.
    pub(crate) fn record_removed(&mut self, removed: RemovedFiles, versions: &VersionSet) {
        for (id, before) in removed.blobs_before {
            let after = versions.version(id);
            let left = before.into_iter().filter(|n| !after.as_ref().is_some_and(|v| v.blob_files.contains_key(n)));
            self.blob_files.extend(left);
        }
        self.tables.extend(removed.tables);
    }

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

/// What a batch of edits takes out of the versions, found before it is
/// installed ([`FileLifecycle::record_removed`]).
pub(crate) struct RemovedFiles {
    tables: Vec<RemovedTable>,
    /// The blob files of the families the edits touch, per family, to tell
    /// after the install which left.
    blobs_before: Vec<(u32, Vec<u64>)>,
}

impl RemovedFiles {
    /// The tables `edits` take out of the versions of `families` (not
    /// those they move to another level), and the blob files of the
    /// families they touch.
    pub(crate) fn by(edits: &[VersionEdit], families: &BTreeMap<u32, FamilyVersions>) -> Self {
        let added: HashSet<u64> = edits.iter().flat_map(|e| e.new_files.iter().map(|(_, f)| f.number)).collect();
        // The numbers deleted per family and level, so each level touched is
        // walked once however many of its files go.
        let mut deleted: BTreeMap<(u32, usize), HashSet<u64>> = Default::default();
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
        RemovedFiles { tables, blobs_before: blobs }
    }
}

/// A file chosen for deletion: its kind, number and, when a listing found
/// it, its name in the directory (otherwise the name its kind gives it).
pub(crate) struct ObsoleteFile {
    kind: filename::FileType,
    number: u64,
    name: Option<String>,
}

impl DbInner {
    /// Deletes the files no live version lists and no job is writing
    /// (this module's contract): chosen with the db mutex held, deleted with it
    /// released.
    pub(crate) fn delete_obsolete_files(&self, st: &mut MutexGuard<'_, DbState>) {
        let files = self.obsolete_files(st);
        if !files.is_empty() {
            // Counted, so `wait_for_compact` does not return before the
            // files a job made obsolete are gone.
            let mut purging = JobGuard::new(self, st, Hold::Purge);
            if !MutexGuard::unlocked(&mut purging, || self.purge(files)) {
                // A file left is found by the next listing.
                purging.files.scan_next_time();
            }
        }
    }

    /// Old WALs, unreferenced SSTs and blob files; with a full scan also
    /// old MANIFESTs and OPTIONS files, temporaries, and outputs no version
    /// lists (this module's contract). Requires the db mutex. None while a MANIFEST
    /// write is in flight.
    pub(crate) fn obsolete_files(&self, st: &mut DbState) -> Vec<ObsoleteFile> {
        if st.versions.manifest_busy() || st.files.deletion_holds > 0 {
            return Vec::new();
        }
        st.files.forget_dropped_versions();
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
        st.files.tables.retain(|t| {
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
        if !st.files.blob_files.is_empty() {
            let mut listed: BTreeSet<u64> =
                st.versions.families().values().flat_map(|f| f.current.live_blob_files().collect::<Vec<_>>()).collect();
            for v in st.files.live_versions.iter().filter_map(|(_, w)| w.upgrade()) {
                listed.extend(v.live_blob_files());
            }
            st.files.blob_files.sort_unstable();
            st.files.blob_files.dedup();
            st.files.blob_files.retain(|n| {
                if listed.contains(n) {
                    return true;
                }
                files.push(ObsoleteFile { kind: filename::FileType::Blob, number: *n, name: None });
                false
            });
        }
        st.files.looks_since_scan += 1;
        if st.files.scan_due || st.files.looks_since_scan >= FULL_SCAN_EVERY {
            if let Some(scanned) = self.scan_for_obsolete_files(st, log_number) {
                // A scan that had to spare unlisted tables (an uncertain
                // MANIFEST) is made again later.
                st.files.scan_due = st.versions.manifest_uncertain();
                st.files.looks_since_scan = 0;
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
        for v in st.files.live_versions.iter().filter_map(|(_, w)| w.upgrade()) {
            live.extend(v.live_files().chain(v.live_blob_files()));
        }
        // Tables a reader or job still holds, of families dropped since.
        live.extend(st.files.tables.iter().map(|t| t.number));
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
