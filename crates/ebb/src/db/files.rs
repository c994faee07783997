//! The lifecycle of the database's files: which versions readers and jobs
//! hold, which files left a version and when they become obsolete, the
//! holds on deletions (checkpoints, backups, `disable_file_deletions`), and
//! the deletion itself (RocksDB's `FindObsoleteFiles` and
//! `PurgeObsoleteFiles`).
//!
//! Obsolete files are chosen under the db mutex and deleted without it
//! (db/purge.rs). A file chosen is obsolete for good: file numbers
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

use crate::key::user_key;
use crate::version::{FamilyVersions, FileMetaData, Version, VersionEdit, VersionSet};

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
            let i = files.partition_point(|f| v.ranges().lt(f.largest_user_key(), &self.smallest));
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

    /// Whether a deletion hold is taken (invariant 2).
    pub(crate) fn deletions_held(&self) -> bool {
        self.deletion_holds > 0
    }

    /// Takes out the tables that left a version and that nothing holds
    /// any more, and that their family's current version (in `versions`)
    /// does not list again: they are obsolete.
    pub(crate) fn take_obsolete_tables(&mut self, versions: &VersionSet) -> Vec<u64> {
        let mut gone = Vec::new();
        self.tables.retain(|t| {
            let held = t.meta.strong_count() > 0;
            let listed = || versions.version(t.family).is_some_and(|v| t.listed_in(&v));
            if held || listed() {
                // A reader or job still holds it (a listed one was moved
                // back by a later edit: it leaves with a later one again).
                return held;
            }
            gone.push(t.number);
            false
        });
        gone
    }

    /// Takes out the blob files that left a version and that neither a
    /// current version (in `versions`) nor a held one lists: they are
    /// obsolete.
    pub(crate) fn take_obsolete_blob_files(&mut self, versions: &VersionSet) -> Vec<u64> {
        if self.blob_files.is_empty() {
            return Vec::new();
        }
        let mut listed: BTreeSet<u64> =
            versions.families().values().flat_map(|f| f.current.live_blob_files().collect::<Vec<_>>()).collect();
        for v in self.live_versions.iter().filter_map(|(_, w)| w.upgrade()) {
            listed.extend(v.live_blob_files());
        }
        self.blob_files.sort_unstable();
        self.blob_files.dedup();
        let mut gone = Vec::new();
        self.blob_files.retain(|n| {
            if listed.contains(n) {
                return true;
            }
            gone.push(*n);
            false
        });
        gone
    }

    /// Counts a look for obsolete files; returns whether this one lists
    /// the directory (invariant 4).
    pub(crate) fn look_lists_directory(&mut self) -> bool {
        self.looks_since_scan += 1;
        self.scan_due || self.looks_since_scan >= FULL_SCAN_EVERY
    }

    /// The directory was listed; with `again` (it had to spare unlisted
    /// tables, the MANIFEST being uncertain) the next look lists it again.
    pub(crate) fn listed_directory(&mut self, again: bool) {
        self.scan_due = again;
        self.looks_since_scan = 0;
    }

    /// The numbers of every file a held version lists, and of the tables
    /// that left a version but are still held (of families dropped since,
    /// too): a listing of the directory spares them.
    pub(crate) fn held_file_numbers(&self) -> HashSet<u64> {
        let mut held: HashSet<u64> = HashSet::new();
        for v in self.live_versions.iter().filter_map(|(_, w)| w.upgrade()) {
            held.extend(v.live_files().chain(v.live_blob_files()));
        }
        held.extend(self.tables.iter().map(|t| t.number));
        held
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
