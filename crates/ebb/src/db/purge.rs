//! Deleting obsolete files: chosen under the db mutex from what the file
//! lifecycle (db/files.rs), the memtables' WALs and the version set say is
//! no longer needed, and, with a full listing of the directory now and
//! then, from the files no version lists and no job writes; deleted with
//! the mutex released (RocksDB's `FindObsoleteFiles` and
//! `PurgeObsoleteFiles`).

use std::collections::HashSet;

use parking_lot::MutexGuard;

use super::job_guard::JobGuard;
use super::jobs::Hold;
use super::{DbInner, DbState};
use crate::events::TableFileDeletionInfo;
use crate::version::filename;

/// A file chosen for deletion: its kind, number and, when a listing found
/// it, its name in the directory (otherwise the name its kind gives it).
pub(crate) struct ObsoleteFile {
    kind: filename::FileType,
    number: u64,
    name: Option<String>,
}

impl DbInner {
    /// Deletes the files no live version lists and no job is writing
    /// (db/files.rs): chosen with the db mutex held, deleted with it
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
    /// lists (db/files.rs). Requires the db mutex. None while a MANIFEST
    /// write is in flight.
    pub(crate) fn obsolete_files(&self, st: &mut DbState) -> Vec<ObsoleteFile> {
        if st.versions.manifest_busy() || st.files.deletions_held() {
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
        for number in st.files.take_obsolete_tables(&st.versions) {
            files.push(ObsoleteFile { kind: filename::FileType::Table, number, name: None });
        }
        for number in st.files.take_obsolete_blob_files(&st.versions) {
            files.push(ObsoleteFile { kind: filename::FileType::Blob, number, name: None });
        }
        if st.files.look_lists_directory() {
            if let Some(scanned) = self.scan_for_obsolete_files(st, log_number) {
                // A scan that had to spare unlisted tables (an uncertain
                // MANIFEST) is made again later.
                st.files.listed_directory(st.versions.manifest_uncertain());
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
        // What readers and jobs hold, of families dropped since too.
        live.extend(st.files.held_file_numbers());
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
    pub(crate) fn purge(&self, mut files: Vec<ObsoleteFile>) -> bool {
        let mut all_gone = true;
        // The copies of the prepared transactions in the current WAL are
        // made durable before an older WAL goes (db/prepared.rs, invariant
        // 3); should that fail, the WALs stay for a later listing.
        if files.iter().any(|f| f.kind == filename::FileType::Wal)
            && !self.prepared.is_empty()
            && self.sync_current_wal().is_err()
        {
            files.retain(|f| f.kind != filename::FileType::Wal);
            all_gone = false;
        }
        let opts = self.opts();
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
                let gone = if f.kind == filename::FileType::Wal {
                    // Archived for `get_updates_since` when the options say so.
                    self.wal_archive.retire(self.fs.as_ref(), path, f.number, &opts).is_ok()
                } else {
                    self.fs.remove_file(path).is_ok()
                };
                if f.kind == filename::FileType::Table && !opts.listeners.is_empty() {
                    let info = TableFileDeletionInfo { file_path: path.clone(), file_number: f.number, deleted: gone };
                    self.notify_event("on_table_file_deleted", |l| l.on_table_file_deleted(&info));
                }
                all_gone &= gone;
            }
        }
        all_gone &= self.clean_wal_archive();
        all_gone
    }

    /// Deletes the archived WALs past `wal_ttl_seconds` or over
    /// `wal_size_limit_mb`, and every one once both are 0. Returns whether
    /// every deletion succeeded.
    pub(crate) fn clean_wal_archive(&self) -> bool {
        self.wal_archive.clean_for(self.fs.as_ref(), &self.opts())
    }
}
