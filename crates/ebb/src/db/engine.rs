//! The engine behind the handle: the state shared with the background
//! threads, made of owned subsystems (each in its own file, its fields
//! private, its invariants in its opening comment), and the few helpers
//! every part of the engine uses (options in force, listeners, checks).
//!
//! Locks, always taken in this order: the write queue (`queue`), the db state
//! (`state`), the WAL (`wal`). Each column family's super-version slot
//! (db/super_version.rs) is swapped atomically: readers load it without a
//! lock, installers (under the db state lock) swap it. Column families: see
//! `column_family.rs`.
//!
//! Invariants:
//! 1. Only the write-group leader appends to the WAL and inserts into the
//!    mutable memtable; it is the front of `queue` (db/write.rs).
//! 2. `last_sequence` is published only after a group's entries are all in the
//!    memtable, so readers never see half a batch (db/sequence.rs).
//! 3. A file is deleted only when no live `Version` (held by a reader or
//!    iterator) lists it and no running job is writing it (db/files.rs,
//!    db/jobs.rs).
//! 4. After a failed WAL write, WAL sync, flush or MANIFEST write, or a panic
//!    in a background job or a write group's leader, the error is sticky
//!    (`bg_error`, db/bg_error.rs): every later write fails until a resume
//!    recovers from it (an I/O error, db/resume.rs) or the database is
//!    reopened.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::{Condvar, Mutex};

use super::blob_cache::BlobFileCache;
use super::column_family::ColumnFamilyData;
use super::super_version::SuperVersion;
use super::{
    bg, bg_error, close, current_wal, files, info_log, jobs, manifest_queue, memtables, prepared, sequence, snapshots,
    tuning, wal_archive, wal_seal, write, write_controller, EventListener, ReadOptions, RecoveryReport,
};
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem};
use crate::key::SequenceNumber;
use crate::options::{ColumnFamilyOptions, Options};
use crate::stats::Stats;
use crate::version::{TableCache, VersionSet};

/// State guarded by the db mutex.
pub(crate) struct DbState {
    pub(crate) versions: VersionSet,
    /// The memtables of every live column family and the WALs
    /// (db/memtables.rs).
    pub(crate) families: memtables::Memtables,
    /// The sticky background error (db/bg_error.rs).
    pub(crate) bg_error: bg_error::BackgroundError,
    /// Running background jobs and what they hold (db/jobs.rs).
    pub(crate) jobs: jobs::Jobs,
    /// The live snapshots (db/snapshots.rs).
    pub(crate) snapshots: snapshots::SnapshotList,
    /// Jobs waiting to write their version edits (db/version_edits.rs).
    pub(crate) manifest_queue: manifest_queue::ManifestQueue,
    /// Versions held, files that left them, deletion holds (db/files.rs).
    pub(crate) files: files::FileLifecycle,
    /// Write stalls and the delayed write rate (db/write_controller.rs).
    pub(crate) controller: write_controller::WriteController,
}

/// A number no other database opened by this process has
/// ([`DbInner::instance`]).
pub(crate) fn next_instance() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

pub(crate) struct DbInner {
    /// This open database among all the process opened: its families'
    /// `owner`, so that a handle of another database is refused.
    pub(crate) instance: u64,
    pub(crate) dir: PathBuf,
    pub(crate) fs: Arc<dyn FileSystem>,
    /// What flushes and compactions create their files through: `fs`, or
    /// with `use_direct_io_for_flush_and_compaction`, `fs` writing them
    /// with direct I/O ([`crate::fs::DirectWrites`]).
    pub(crate) job_fs: Arc<dyn FileSystem>,
    pub(crate) options: Mutex<Arc<Options>>,
    pub(crate) state: Mutex<DbState>,
    /// Signalled whenever background work finishes or the state changes in a
    /// way a waiting writer or `flush(wait)` cares about.
    pub(crate) bg_cv: Condvar,
    /// Signalled when there may be new background work.
    pub(crate) work_cv: Condvar,
    /// Signalled when a MANIFEST batch is installed or given up
    /// (db/version_edits.rs).
    pub(crate) manifest_cv: Condvar,
    /// The writers waiting to write (db/write.rs).
    pub(crate) queue: write::WriteQueue,
    /// The WAL being written (db/current_wal.rs).
    pub(crate) wal: current_wal::CurrentWal,
    /// WALs closed by memtable switches whose sync is still owed.
    pub(crate) wal_sealer: wal_seal::WalSealer,
    /// WALs kept for `get_updates_since` (db/wal_archive.rs).
    pub(crate) wal_archive: wal_archive::WalArchive,
    /// The memtable budget this database shares (`write_buffer_manager`,
    /// or its own of `db_write_buffer_size`), if any.
    pub(crate) write_buffer_manager: Option<Arc<crate::write_buffer_manager::WriteBufferManager>>,
    /// Transactions prepared and not yet committed or rolled back
    /// (db/prepared.rs).
    pub(crate) prepared: prepared::PreparedSections,
    /// The default column family (also in `DbState::families`).
    pub(crate) default_cf: Arc<ColumnFamilyData>,
    /// The newest sequence number visible to readers (db/sequence.rs).
    pub(crate) last_sequence: sequence::LastSequence,
    pub(crate) tables: Arc<TableCache>,
    /// Open blob files, for reads and for compactions relocating blobs.
    pub(crate) blobs: Arc<BlobFileCache>,
    pub(crate) stats: Arc<Stats>,
    /// Set once the database is closed (db/close.rs).
    pub(crate) closed: close::ClosedFlag,
    /// Background threads (db/bg.rs).
    pub(crate) threads: bg::BackgroundThreads,
    pub(crate) tuning: tuning::TuningHooks,
    /// The info log, `LOG`.
    pub(crate) info_log: Arc<info_log::InfoLog>,
    /// What recovery at open found damaged or set aside.
    pub(crate) recovery_report: OnceLock<RecoveryReport>,
    /// Opened with `Db::open_read_only`: no LOCK, no WAL, no background
    /// work; every change is refused (`check_writable`).
    pub(crate) read_only: bool,
    /// Set on a secondary instance (`Db::open_as_secondary`): how to read
    /// the primary again.
    pub(crate) secondary: OnceLock<SecondaryState>,
    pub(crate) _lock: Box<dyn FileLock>,
}

impl DbInner {
    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.is_set() {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Refuses `what` (a change to the database) on a read-only instance.
    pub(crate) fn check_writable(&self, what: &str) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            return Err(Error::NotSupported(format!(
                "{what} on a database opened read-only ({}): reopen it with Db::open to change it",
                self.dir.display()
            )));
        }
        Ok(())
    }

    /// Calls `f`, which calls the listener method `callback`, on every
    /// listener. Listeners are user code, called defensively (RocksDB does
    /// too): a listener that panics is written to the info log and skipped,
    /// and neither the job that called it nor the other listeners notice.
    /// May be called with the db mutex held (`on_background_error`).
    pub(crate) fn notify_event(&self, callback: &'static str, f: impl Fn(&dyn EventListener)) {
        let opts = self.opts();
        for l in &opts.listeners {
            if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(l.as_ref()))) {
                let message = crate::error::panic_message(payload.as_ref());
                self.info_log.log(
                    info_log::Level::Error,
                    &format!("an event listener panicked in {callback} (ignored): {message}"),
                );
            }
        }
    }

    pub(crate) fn opts(&self) -> Arc<Options> {
        Arc::clone(&self.options.lock())
    }

    /// Makes `next` the options in force: the database's (in `current`, the
    /// guarded `options`) and the default family's part of them, which
    /// `family_opts` reads. Requires the options lock (`current`).
    pub(crate) fn put_options_in_force(&self, current: &mut Arc<Options>, next: Options) {
        self.default_cf.set_options(Arc::new(next.cf_options()));
        *current = Arc::new(next);
    }

    /// The options of column family `cf` (for the default family, the
    /// column-family part of the database's options).
    pub(crate) fn family_opts(&self, cf: &ColumnFamilyData) -> Arc<ColumnFamilyOptions> {
        cf.options_arc()
    }

    /// `cf` is a live family of this database: dropped, or a handle of
    /// another database (whose family ids mean other families here), is
    /// `InvalidArgument`.
    pub(crate) fn check_family(&self, cf: &ColumnFamilyData) -> Result<()> {
        cf.check_live()?;
        if cf.owner != self.instance {
            return Err(Error::invalid(format!(
                "column family '{}' is a family of another database, not of {}",
                cf.name,
                self.dir.display()
            )));
        }
        Ok(())
    }

    /// The sequence number a read with `ro` reads at: its snapshot's, which
    /// must be of this database, or the latest.
    pub(crate) fn read_sequence(&self, ro: &ReadOptions<'_>) -> Result<SequenceNumber> {
        match ro.snapshot {
            Some(s) if !std::ptr::eq(Arc::as_ptr(&s.db.inner), self) => {
                Err(Error::invalid("the read options' snapshot is of another database"))
            }
            Some(s) => Ok(s.seq),
            None => Ok(self.last_sequence.get()),
        }
    }

    pub(crate) fn set_options(self: &Arc<Self>, changes: &[(&str, &str)]) -> Result<()> {
        self.check_writable("set_options")?;
        self.check_open()?;
        let mut guard = self.options.lock();
        let next = guard.apply_dynamic(changes)?;
        self.put_options_in_force(&mut guard, next);
        drop(guard);
        // Grow the thread pools if a limit went up (shrinking is by index).
        self.ensure_threads()?;
        self.state.lock().controller.invalidate();
        self.bg_cv.notify_all();
        self.work_cv.notify_all();
        // As RocksDB, the change is in force even if it cannot be recorded.
        self.write_options_file()
    }

    /// Publishes the memtables and versions of every family in `st` to
    /// readers. Requires the db mutex.
    pub(crate) fn install_super_version(&self, st: &mut DbState) {
        st.controller.invalidate();
        let waiting = st.families.most_immutable();
        self.tuning.set_immutable_memtables(waiting);
        st.files.forget_dropped_versions();
        for (id, family) in st.families.iter() {
            let Some(version) = st.versions.version(id) else { continue };
            let data = family.data();
            let old = data.super_version();
            let same = Arc::ptr_eq(&old.version, &version)
                && Arc::ptr_eq(&old.mem, family.mem())
                && old.imm.len() == family.imm().len()
                && old.imm.iter().zip(family.imm().iter().rev()).all(|(a, b)| Arc::ptr_eq(a, b));
            if same {
                continue;
            }
            st.files.hold_version(id, &version);
            let same_version = Arc::ptr_eq(&old.version, &version);
            let sv = SuperVersion::new(Arc::clone(family.mem()), family.imm().iter().rev().cloned().collect(), version);
            // A memtable switch keeps the tables: and their tombstones.
            if let Some(t) = old.table_tombstones.get().filter(|_| same_version) {
                let _ = sv.table_tombstones.set(t.clone());
            }
            data.install(sv);
        }
    }

    /// The highest log number an edit may give a family now (db/wal_seal.rs,
    /// contract 5): the oldest closed WAL not yet sealed, among those no
    /// family has made obsolete; `None` when every live closed WAL is sealed.
    pub(crate) fn unsealed_log_cap(&self, st: &DbState) -> Option<u64> {
        self.wal_sealer.oldest_unsealed(st.versions.log_number())
    }

    /// Seals every closed WAL and syncs the directory (db/wal_seal.rs,
    /// contract 2). Must not be called with the db mutex held; an error is
    /// the caller's to make sticky.
    pub(crate) fn seal_closed_wals(&self) -> Result<()> {
        self.wal_sealer.seal(self.fs.as_ref(), &self.dir)
    }
}

/// What a secondary instance keeps to read the primary again
/// (db/secondary.rs).
pub(crate) struct SecondaryState {
    options: Options,
    /// One catch-up at a time.
    catching_up: Mutex<()>,
}

impl SecondaryState {
    pub(crate) fn new(options: Options) -> Self {
        SecondaryState { options, catching_up: Mutex::new(()) }
    }

    /// The options the primary is read with.
    pub(crate) fn options(&self) -> &Options {
        &self.options
    }

    /// Held for the length of a catch-up: one at a time.
    pub(crate) fn one_catch_up(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.catching_up.lock()
    }
}
