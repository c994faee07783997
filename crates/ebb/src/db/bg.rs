//! The background scheduler: the flush and compaction thread pools, what
//! each worker picks next (a flush, db/flush.rs; or a compaction, run
//! through the three steps of `compaction::compaction_job`: prepared and
//! installed here under the db mutex, merged without it), and the guard
//! that turns a job's panic into the sticky background error.
//!
//! Flush threads (high priority, `max_background_flushes`) and compaction
//! threads (low priority, `max_background_compactions`) wait on `work_cv`.
//! Pools are resized by `set_options`: a thread whose index is at or over the
//! current limit takes no work, and new threads are spawned when the limit grows.
//!
//! Panics: every job (flush, compaction, the file deletions they end with)
//! runs under `catch_unwind` (`catch_job`), and what a job holds (db/jobs.rs)
//! is held by a guard (`JobGuard`) that gives it back however the job ends,
//! so a panic can never leave writers or waiters waiting for a job that is
//! gone. Tables and blob files a job wrote but never handed to the MANIFEST
//! are deleted (`NewTables`). The panic becomes the sticky background error
//! (`Error::Panicked`), and the thread lives on.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::path::Path;
use std::thread::JoinHandle;

use parking_lot::{Mutex, MutexGuard};

use super::job_guard::{JobGuard, NewTables};
use super::jobs::Hold;
use super::{CompactionJobInfo, DbInner, DbState, FlushJobInfo};
use crate::compaction::compaction_job::{self, CompactionJob, JobEnv, JobHooks, JobStart};
use crate::compaction::{picker, Compaction};
use crate::error::{Error, Result};
use crate::options::ColumnFamilyOptions;
use crate::stats::{bump, LevelCompactionStats};
use crate::version::FileMetaData;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Pool {
    Flush,
    Compaction,
}

/// Threads spawned so far per pool.
#[derive(Default)]
struct PoolSizes {
    flush: usize,
    compaction: usize,
}

/// The database's background threads: the flush and compaction pools
/// (grown by `set_options`; a thread whose index is at or over its pool's
/// limit takes no work), the stats dumper and the tuner. Joined at close.
#[derive(Default)]
pub(crate) struct BackgroundThreads {
    handles: Mutex<Vec<JoinHandle<()>>>,
    pool_sizes: Mutex<PoolSizes>,
}

impl BackgroundThreads {
    /// Starts a thread named `name` running `f`.
    pub(crate) fn spawn(&self, name: String, dir: &Path, f: impl FnOnce() + Send + 'static) -> Result<()> {
        let handle = std::thread::Builder::new().name(name).spawn(f).map_err(|e| Error::io("spawn thread", dir, e))?;
        self.handles.lock().push(handle);
        Ok(())
    }

    /// Every thread started, for the close to join.
    pub(crate) fn take_all(&self) -> Vec<JoinHandle<()>> {
        std::mem::take(&mut *self.handles.lock())
    }
}

impl DbInner {
    /// Spawns threads until each pool has as many as its option asks for.
    pub(crate) fn ensure_threads(self: &Arc<Self>) -> Result<()> {
        let opts = self.opts();
        let mut sizes = self.threads.pool_sizes.lock();
        while sizes.flush < opts.flush_threads() {
            let inner = Arc::clone(self);
            let index = sizes.flush;
            self.threads.spawn(format!("ebb-flush-{index}"), &self.dir, move || inner.worker(Pool::Flush, index))?;
            sizes.flush += 1;
        }
        while sizes.compaction < opts.compaction_threads() {
            let inner = Arc::clone(self);
            let index = sizes.compaction;
            self.threads
                .spawn(format!("ebb-compact-{index}"), &self.dir, move || inner.worker(Pool::Compaction, index))?;
            sizes.compaction += 1;
        }
        Ok(())
    }

    fn worker(self: Arc<Self>, pool: Pool, index: usize) {
        let mut st = self.state.lock();
        loop {
            let opts = self.opts();
            // Between jobs, and on each idle wake: pages freed inside glibc's
            // arenas go back to the OS (util/heap.rs), without the mutex.
            if opts.malloc_trim_period_ms > 0 && !st.jobs.is_shutting_down() {
                MutexGuard::unlocked(&mut st, || crate::util::heap::trim_if_due(opts.malloc_trim_period_ms));
            }
            if st.jobs.is_shutting_down() {
                return;
            }
            let limit = match pool {
                Pool::Flush => opts.flush_threads(),
                Pool::Compaction => opts.compaction_threads(),
            };
            if index < limit && !st.jobs.is_paused() && !st.bg_error.is_set() {
                let did = match pool {
                    Pool::Flush => self.catch_job(&mut st, "flush", |st| self.maybe_flush(st)),
                    Pool::Compaction => self.catch_job(&mut st, "compaction", |st| self.maybe_compact(st, &opts)),
                };
                // A job that panicked did work too: its error is sticky now,
                // and this thread waits on for the shutdown.
                if did.unwrap_or(true) {
                    continue;
                }
            }
            self.work_cv.wait_for(&mut st, Duration::from_millis(250));
        }
    }

    /// Flushes immutable memtables no other flush has taken: those of the
    /// family holding the oldest such data, so the oldest WAL goes first.
    /// Up to `max_background_flushes` run at once (one per flush thread), as
    /// in RocksDB; flushes of one family install in the order of their
    /// memtables (`flush_memtables`). Returns whether it did work.
    fn maybe_flush(&self, st: &mut MutexGuard<'_, DbState>) -> bool {
        let Some((cf, mems)) = st.families.pick_flush() else {
            return false;
        };
        let cf_name = st.families.data(cf).map(|d| d.name.clone()).unwrap_or_default();
        let mut st = JobGuard::new(self, st, Hold::Flush(mems.clone()));
        if !self.opts().listeners.is_empty() {
            let info = FlushJobInfo { cf_id: cf, cf_name, file_number: 0, bytes_written: 0, entries: 0, micros: 0 };
            MutexGuard::unlocked(&mut st, || self.notify_event("on_flush_begin", |l| l.on_flush_begin(&info)));
        }
        if let Err(e) = self.flush_memtables(&mut st, cf, &mems, false) {
            self.set_bg_error_locked(&mut st, e);
        }
        true
    }

    /// The oldest sequence number any reader may still read at.
    pub(crate) fn smallest_snapshot(&self, st: &DbState) -> u64 {
        st.snapshots.oldest().unwrap_or_else(|| self.last_sequence.get())
    }

    fn maybe_compact(&self, st: &mut MutexGuard<'_, DbState>, opts: &crate::Options) -> bool {
        // Deferred by the tuner: trivial moves (a MANIFEST edit, no data
        // written) and, while the tuner asks for them, L0 run merges.
        let deferred = self.tuning.is_deferred();
        let run_merges = self.tuning.merges_l0_runs();
        if st.jobs.manual_compactions() > 0 {
            return false;
        }
        // The limit is at least one, so it is only worked out (a debt
        // estimate per family) when a compaction already runs.
        let running = st.jobs.compactions_running();
        if running > 0 && running >= self.compaction_limit(st, opts) {
            return false;
        }
        // Each family is compacted by its own options (and its own
        // compaction style); the families take turns, starting after the one
        // compacted last.
        let last = st.jobs.last_compacted_family();
        let ids: Vec<u32> = st.families.ids();
        let order = ids.iter().filter(|id| **id > last).chain(ids.iter().filter(|id| **id <= last));
        let mut pick = None;
        for id in order {
            let Some(family) = st.families.get(*id) else { continue };
            let family_opts = self.family_opts(family.data());
            if family_opts.disable_auto_compactions {
                continue;
            }
            let picked = if deferred {
                if family_opts.compaction_style != crate::options::CompactionStyle::Level {
                    continue;
                }
                // Files that need no merge (sequential inserts: L0 files
                // disjoint from each other and from the base level) move
                // down as they would undeferred, instead of waiting in L0
                // for a run merge to rewrite them.
                let moved = self.pick_compaction(st, *id, &family_opts).filter(|c| c.trivial_move);
                moved.or_else(|| {
                    let v = st.versions.version(*id).filter(|_| run_merges)?;
                    picker::pick_l0_run_merge(&v, &family_opts, st.jobs.being_compacted())
                })
            } else {
                self.pick_compaction(st, *id, &family_opts)
            };
            if let Some(c) = picked {
                pick = Some((*id, c));
                break;
            }
        }
        let Some((cf, c)) = pick else {
            return false;
        };
        st.jobs.set_last_compacted_family(cf);
        let r = self.run_compaction(st, cf, c).map(|_| ());
        if let Err(e) = r {
            if !matches!(e, Error::Cancelled) {
                self.set_bg_error_locked(st, e);
            }
        }
        true
    }

    /// Filter bits per key for an L0 table of family `cf` written now: the
    /// configured bits, raised while an adaptive or idle tuner runs (or any
    /// tuner defers compaction) and L0 holds more files than its trigger
    /// ([`crate::tuning::l0_filter_bits`]): the catch-up after a deferral
    /// merges L0's fresh runs while L0 is still deep. Requires the db mutex.
    pub(super) fn l0_filter_bits(&self, st: &DbState, cf: u32, opts: &ColumnFamilyOptions) -> u32 {
        let sizing = self.tuning.is_deferred()
            || matches!(
                self.tuning.mode,
                crate::options::BackgroundTuning::Adaptive | crate::options::BackgroundTuning::Idle
            );
        if !sizing {
            return opts.bloom_bits_per_key;
        }
        let l0 = st.versions.version(cf).map_or(0, |v| v.num_files(0));
        crate::tuning::l0_filter_bits(opts.bloom_bits_per_key, l0, opts.level0_file_num_compaction_trigger)
    }

    /// How many compactions may run at once (RocksDB `GetBGJobLimits`): all
    /// the compaction threads while the write controller needs compaction
    /// sped up (writes delayed or stopped, or some family's debt past
    /// [`crate::version::Version::needs_compaction_speedup`]'s thresholds), otherwise one. A
    /// second compaction then runs only when the debt asks for it, instead of
    /// taking CPU and disk from flushes and writers whenever it can.
    /// Requires the db mutex.
    fn compaction_limit(&self, st: &DbState, opts: &crate::Options) -> usize {
        let threads = opts.compaction_threads();
        if threads <= 1 || st.controller.condition() != super::StallCondition::Normal {
            return threads;
        }
        let pressed = st.families.iter().any(|(id, family)| {
            let family_opts = self.family_opts(family.data());
            let shape = crate::version::StorageInfoOptions::from_options(&family_opts);
            st.versions.version(id).is_some_and(|v| v.needs_compaction_speedup(&shape))
        });
        if pressed {
            threads
        } else {
            1
        }
    }

    /// The next automatic compaction of column family `cf`, picked by `opts`
    /// (the family's options), if any. Requires the db mutex.
    pub(crate) fn pick_compaction(&self, st: &DbState, cf: u32, opts: &ColumnFamilyOptions) -> Option<Compaction> {
        let version = st.versions.version(cf)?;
        let now = self.opts().clock.now_secs();
        picker::pick_compaction(&version, opts, st.jobs.being_compacted(), now, &|f| {
            self.creation_time(f, &version.cmp)
        })
    }

    /// When `f` was written: its `creation_time` table property, stamped on
    /// the database's clock (FIFO's `ttl`, `ttl`, periodic compaction).
    pub(crate) fn creation_time(&self, f: &FileMetaData, cmp: &crate::comparator::UserComparator) -> Option<u64> {
        self.tables.get(f, 0, cmp).ok().map(|t| t.properties().creation_time)
    }

    /// Runs `c`: marks its inputs busy, merges (without the mutex), installs
    /// the result. Requires the db mutex.
    /// Runs compaction `c`; returns the numbers of the tables it wrote
    /// (moved, for a trivial move).
    pub(crate) fn run_compaction(&self, st: &mut MutexGuard<'_, DbState>, cf: u32, c: Compaction) -> Result<Vec<u64>> {
        let cancel = Arc::new(AtomicBool::new(false));
        let listening = !self.opts().listeners.is_empty();
        let cf_name = st.families.data(cf).map(|d| d.name.clone()).unwrap_or_default();
        let mut info = CompactionJobInfo {
            cf_id: cf,
            cf_name,
            input_level: c.level,
            output_level: c.output_level,
            input_files: c.all_inputs().map(|f| f.number).collect(),
            output_files: Vec::new(),
            bytes_read: 0,
            bytes_written: 0,
            trivial_move: c.trivial_move,
            cancelled: false,
            micros: 0,
            reason: c.reason,
        };
        let start = Instant::now();
        let result = {
            let inputs = info.input_files.clone();
            let mut st = JobGuard::new(self, st, Hold::Compaction { inputs, cancel: Arc::clone(&cancel) });
            if listening {
                MutexGuard::unlocked(&mut st, || {
                    self.notify_event("on_compaction_begin", |l| l.on_compaction_begin(&info))
                });
            }
            let result = self.run_compaction_inner(&mut st, cf, &c, &cancel);
            if result.is_ok() {
                bump(&self.stats.compactions_by_reason[c.reason.index()], 1);
            }
            // Told while the job still counts as running, so a caller of
            // `wait_for_compact` has every completion event when it returns
            // (RocksDB notifies before the job leaves its count too).
            if listening {
                info.micros = start.elapsed().as_micros() as u64;
                info.cancelled = matches!(result, Err(Error::Cancelled));
                if let Ok(out) = &result {
                    info.output_files = out.iter().map(|f| f.number).collect();
                    info.bytes_written = if c.trivial_move { 0 } else { out.iter().map(|f| f.file_size).sum() };
                    info.bytes_read = if c.trivial_move || c.is_deletion() { 0 } else { c.input_bytes() };
                }
                MutexGuard::unlocked(&mut st, || {
                    self.notify_event("on_compaction_completed", |l| l.on_compaction_completed(&info))
                });
            }
            result
        };
        // The job's own hold on its inputs goes first: a table is obsolete
        // once nothing holds its metadata (db/files.rs).
        drop(c);
        if result.is_ok() {
            // With the inputs no longer marked as being compacted, they are
            // obsolete now (unless a reader still holds them). A trivial
            // move makes nothing obsolete, but looks too: files another job
            // made obsolete while this one's MANIFEST write was in flight
            // were left for it.
            self.delete_obsolete_files(st);
        }
        result.map(|out| out.iter().map(|f| f.number).collect())
    }

    /// Returns the files the compaction installed.
    /// A family dropped meanwhile is `Cancelled`; its outputs are deleted.
    fn run_compaction_inner(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        cf: u32,
        c: &Compaction,
        cancel: &AtomicBool,
    ) -> Result<Vec<Arc<FileMetaData>>> {
        let start = Instant::now();
        let data = st.families.data(cf).ok_or(Error::Cancelled)?;
        if c.is_deletion() || c.trivial_move {
            if c.trivial_move {
                bump(&self.stats.trivial_moves, 1);
            }
            let (moved, edit) = compaction_job::edit_without_merge(c, cf);
            if !st.families.contains(cf) {
                return Err(Error::Cancelled);
            }
            self.log_and_apply(st, vec![edit])?;
            self.install_super_version(st);
            if c.trivial_move {
                let bytes_moved = c.input_bytes() - c.output_inputs.iter().map(|f| f.file_size).sum::<u64>();
                let micros = start.elapsed().as_micros() as u64;
                let moved_stats = LevelCompactionStats { bytes_moved, count: 1, micros, ..Default::default() };
                self.stats.add_level(c.output_level, &moved_stats);
            }
            return Ok(moved);
        }
        // Step 1, under the mutex. The input version is held, and listed
        // among the versions readers hold, until the job ends: garbage
        // collection reads the blob files it lists, which must stay even if
        // the family is dropped meanwhile.
        let opts = self.family_opts(&data);
        let db_opts = self.opts();
        let input_version = st.versions.version(cf).ok_or(Error::Cancelled)?;
        st.files.hold_version(cf, &input_version);
        let env = JobEnv {
            tables: &self.tables,
            dir: &self.dir,
            fs: &self.job_fs,
            blobs: &*self.blobs,
            db_opts: &db_opts,
            opts: &opts,
        };
        let deferred = self.tuning.is_deferred();
        let job = CompactionJob::prepare(
            c,
            &env,
            JobStart {
                cf,
                family_name: &data.name,
                input_version: &input_version,
                smallest_snapshot: self.smallest_snapshot(st),
                snapshots: st.snapshots.sequences(),
                l0_filter_bits: self.l0_filter_bits(st, cf, &opts),
                deferred,
                full_history_ts_low: data.full_history_ts_low(),
            },
        );
        if job.subcompactions() > 1 {
            bump(&self.stats.split_compactions, 1);
            bump(&self.stats.subcompactions, job.subcompactions() as u64);
        }
        // Step 2, without the mutex. Outputs are numbered without it; every
        // number at or above `floor` is protected from deletion until they
        // are installed.
        let floor = st.versions.next_file_number();
        let new_tables = NewTables::new(self);
        let numbers = st.versions.file_number_allocator();
        let from_l0 = c.level == 0 && c.output_level > 0;
        let run_merge = c.level == 0 && c.output_level == 0;
        let hooks = JobHooks {
            cancel,
            new_file_number: &|| new_tables.record(numbers.fetch_add(1, Ordering::SeqCst)),
            on_bytes: &|b: u64| {
                bump(&self.stats.compaction_bytes_written, b);
                self.tuning.on_compaction_bytes(b, from_l0, run_merge, cancel);
            },
            on_panic: &|payload| self.panic_error("subcompaction", payload),
        };
        let mut guard = JobGuard::new(self, st, Hold::PendingOutputs(floor));
        // A subcompaction thread that panics fails the compaction; its
        // outputs are in `new_tables` and deleted with the others'.
        let run = || {
            let out = job.run(&hooks)?;
            self.open_new_tables(&out.files, c.output_level, &data.cmp)?;
            Ok(out)
        };
        let mut out = match MutexGuard::unlocked(&mut guard, run) {
            Ok(out) => out,
            Err(e) => {
                if matches!(e, Error::Cancelled) {
                    bump(&self.stats.cancelled_compactions, 1);
                }
                if matches!(e, Error::Panicked { .. }) {
                    // Sticky whichever thread ran the compaction (a manual one
                    // does not make its other errors sticky).
                    return Err(self.set_bg_error_locked(&mut guard, e));
                }
                return Err(e);
            }
        };
        // Step 3.
        self.count_blob_output(&out);
        let (installed, edit) = job.install(&mut out);
        let r = if guard.families.contains(cf) {
            new_tables.installing();
            self.log_and_apply(&mut guard, vec![edit])
        } else {
            Err(Error::Cancelled)
        };
        drop(guard);
        drop(input_version);
        r?;
        self.install_super_version(st);
        if run_merge {
            bump(&self.stats.intra_l0_compactions, 1);
        }
        let micros = start.elapsed().as_micros() as u64;
        self.stats.time(|h| &h.compaction_micros, micros);
        let (bytes_level, bytes_next) = job.bytes_read();
        bump(&self.stats.compaction_bytes_read, bytes_level + bytes_next);
        self.stats.add_level(c.output_level, &job.level_stats(&out, micros));
        Ok(installed)
    }

    /// Runs `body`, the job `job`, under `catch_unwind`: a panic in it
    /// becomes the sticky background error (`Error::Panicked`, also in the
    /// info log), returned wrapped as every later write will see it. By then
    /// the job's guards (`JobGuard`, `NewTables`) have given back what it
    /// held. Requires the db mutex, and it is held again when this returns
    /// (`MutexGuard::unlocked` takes it back while a panic unwinds).
    pub(crate) fn catch_job<'a, T>(
        &self,
        st: &mut MutexGuard<'a, DbState>,
        job: &'static str,
        body: impl FnOnce(&mut MutexGuard<'a, DbState>) -> T,
    ) -> Result<T> {
        match catch_unwind(AssertUnwindSafe(|| body(st))) {
            Ok(v) => Ok(v),
            Err(payload) => {
                let e = self.panic_error(job, payload);
                Err(self.set_bg_error_locked(st, e))
            }
        }
    }

    /// The error for a panic caught in `job`, written to the info log.
    pub(crate) fn panic_error(&self, job: &'static str, payload: Box<dyn Any + Send>) -> Error {
        let e = Error::panicked(job, payload.as_ref());
        self.info_log.log(super::info_log::Level::Error, &format!("background error: {e}"));
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Options for a test that drives the tuning hooks (`deferred`,
    /// `merge_l0_runs`) by hand: tuning off, so no tuner thread of the
    /// default mode changes them under it; L0 compaction at 2 files and no
    /// L0 stall within reach.
    fn hand_tuned_options() -> crate::Options {
        let mut o = crate::Options::default();
        o.background_tuning = crate::BackgroundTuning::Off;
        o.create_if_missing = true;
        o.level0_file_num_compaction_trigger = 2;
        o.level0_slowdown_writes_trigger = 1000;
        o.level0_stop_writes_trigger = 1000;
        o
    }

    /// While the tuner defers compaction with L0 run merges on, the engine
    /// merges L0 files into fewer L0 files and nothing else, and every key
    /// still reads its newest value (overwrites span the merged files).
    #[test]
    fn a_deferral_with_l0_run_merges_merges_l0_only_and_keeps_the_newest_values() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = hand_tuned_options();
        o.write_buffer_size = 16 << 10;
        o.max_write_buffer_number = 8;
        let db = crate::Db::open(dir.path(), o).unwrap();
        let hooks = &db.inner.tuning;
        hooks.set_deferred(true);
        let value = |round: usize, i: usize| format!("round {round} key {i} ").repeat(8).into_bytes();
        for round in 0..12 {
            for i in 0..60 {
                db.put(format!("k{i:03}").as_bytes(), &value(round, i)).unwrap();
            }
            db.flush(true).unwrap();
        }
        let files_at = |level: usize| db.inner.state.lock().versions.version(0).unwrap().levels[level].len();
        let below_l0 = || (1..7).map(files_at).sum::<usize>();
        assert_eq!((files_at(0), below_l0()), (12, 0), "deferred: nothing compacted");
        hooks.set_merge_l0_runs(true);
        db.inner.work_cv.notify_all();
        let start = Instant::now();
        while files_at(0) > 3 && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(files_at(0) <= 3, "L0 run merges bound L0: {} files", files_at(0));
        assert!(files_at(0) >= 1 && below_l0() == 0, "merges stay in L0");
        for i in 0..60 {
            assert_eq!(db.get(format!("k{i:03}").as_bytes()).unwrap(), Some(value(11, i)), "key {i}");
        }
        // The deferral ends: leveled compaction takes over.
        hooks.set_merge_l0_runs(false);
        hooks.set_deferred(false);
        for round in 12..14 {
            for i in 0..60 {
                db.put(format!("k{i:03}").as_bytes(), &value(round, i)).unwrap();
            }
            db.flush(true).unwrap();
        }
        db.inner.wait_for_compact().unwrap();
        assert!(below_l0() > 0, "L0 compacted into the base level after the deferral");
        for i in 0..60 {
            assert_eq!(db.get(format!("k{i:03}").as_bytes()).unwrap(), Some(value(13, i)), "key {i}");
        }
    }

    /// A deferral puts off merges, not moves: L0 files that overlap
    /// nothing (sequential inserts) move down as a MANIFEST edit while
    /// deferred, with or without run merges, writing no data; files that
    /// overlap stay in L0 until the deferral ends.
    #[test]
    fn a_deferral_still_moves_files_that_need_no_merge() {
        let dir = tempfile::tempdir().unwrap();
        let o = hand_tuned_options();
        let db = crate::Db::open(dir.path(), o).unwrap();
        db.inner.tuning.set_deferred(true);
        let files_at = |level: usize| db.inner.state.lock().versions.version(0).unwrap().levels[level].len();
        let below_l0 = || (1..7).map(files_at).sum::<usize>();
        let wait_until = |done: &dyn Fn() -> bool| {
            let start = Instant::now();
            while !done() && start.elapsed() < Duration::from_secs(20) {
                db.inner.work_cv.notify_all();
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        // Six rounds of keys, each after the last: disjoint files.
        for round in 0..6 {
            for i in 0..200 {
                db.put(format!("k{round}{i:04}").as_bytes(), b"sequential").unwrap();
            }
            db.flush(true).unwrap();
        }
        wait_until(&|| files_at(0) < 2);
        let m = db.metrics();
        assert!(files_at(0) < 2, "disjoint files moved while deferred: {} left in L0", files_at(0));
        assert!(below_l0() >= 5 && m.trivial_moves >= 1, "{} below L0, {} moves", below_l0(), m.trivial_moves);
        assert_eq!(m.compaction_bytes_written, 0, "a move writes no data");
        // Overlapping files (every round rewrites the same keys) need a
        // merge: they wait in L0 while deferred and run merges are off.
        for round in 0..4 {
            for i in 0..200 {
                db.put(format!("k0{i:04}").as_bytes(), format!("round {round}").as_bytes()).unwrap();
            }
            db.flush(true).unwrap();
        }
        // Asked now, the scheduler has nothing to run: no merge while deferred.
        let opts = db.inner.opts();
        assert!(!db.inner.maybe_compact(&mut db.inner.state.lock(), &opts), "a merge was picked while deferred");
        assert!(files_at(0) >= 4, "overlapping files stay in L0 while deferred: {}", files_at(0));
        assert_eq!(db.metrics().compaction_bytes_written, 0);
        db.inner.tuning.set_deferred(false);
        db.inner.work_cv.notify_all();
        db.inner.wait_for_compact().unwrap();
        assert!(files_at(0) < 2 && db.metrics().compaction_bytes_written > 0, "merged once undeferred");
        for i in 0..200 {
            assert_eq!(db.get(format!("k0{i:04}").as_bytes()).unwrap().as_deref(), Some(&b"round 3"[..]));
            assert_eq!(db.get(format!("k5{i:04}").as_bytes()).unwrap().as_deref(), Some(&b"sequential"[..]));
        }
    }

    /// An L0 run merge asks for write-behind on its outputs when
    /// `bytes_per_sync` is 0 (`RUN_MERGE_BYTES_PER_SYNC`); flushes do not.
    /// Seen through MemFs: a fault on every write-behind of a table, set
    /// before the flushes, catches none of theirs and the merge's first.
    #[test]
    fn l0_run_merges_write_their_outputs_behind() {
        let fs = crate::fs::MemFs::new();
        let mut o = hand_tuned_options();
        o.fs = Arc::new(fs.clone());
        o.write_buffer_size = 4 << 20;
        o.max_write_buffer_number = 8;
        o.compression = crate::CompressionType::None;
        assert_eq!(o.bytes_per_sync, 0);
        let db = crate::Db::open("/db", o).unwrap();
        let hooks = &db.inner.tuning;
        hooks.set_deferred(true);
        // Every write-behind of a table fails from here on: the flushes
        // below must ask for none.
        fs.inject(crate::fs::FaultRule::new(crate::fs::FaultOp::Flush).path_contains(".sst").persistent());
        // Ten L0 files of ~800 KB: a run merge takes at least eight of them
        // (`pick_l0_run_merge`) and writes several MiB. Their keys interleave,
        // so no file can move down without a merge.
        for round in 0..10 {
            for i in 0..100 {
                let key = format!("k{:05}", i * 10 + round);
                db.put(key.as_bytes(), &vec![b'a' + (i % 26) as u8; 8 << 10]).unwrap();
            }
            db.flush(true).unwrap();
        }
        assert_eq!(fs.faults_injected(), 0, "a flush asked for write-behind");
        hooks.set_merge_l0_runs(true);
        db.inner.work_cv.notify_all();
        let start = Instant::now();
        while !db.inner.state.lock().bg_error.is_set() && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(fs.faults_injected() > 0, "no L0 run merge output asked for write-behind");
        let e = db.inner.state.lock().bg_error.get().cloned().expect("the injected fault stopped the merge");
        assert!(e.to_string().contains("sync_file_range"), "{e}");
        fs.clear_faults();
    }

    /// While deferred with L0 past its trigger, flushes and L0 run merges
    /// write filters with more bits per key; otherwise the configured bits.
    #[test]
    fn deferred_l0_tables_get_filters_with_more_bits_per_key() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = hand_tuned_options();
        o.bloom_bits_per_key = 10;
        // Nothing compacts L0 away under the test.
        o.disable_auto_compactions = true;
        let db = crate::Db::open(dir.path(), o).unwrap();
        let bits_of_newest_l0 = || {
            let v = db.inner.state.lock().versions.version(0).unwrap();
            let f = Arc::clone(&v.levels[0][0]);
            let t = db.inner.tables.get(&f, 0, &crate::comparator::UserComparator::BYTEWISE).unwrap();
            let p = t.properties();
            p.filter_size as f64 * 8.0 / p.num_entries as f64
        };
        let flush_round = |round: usize| {
            for i in 0..500 {
                db.put(format!("r{round}k{i:04}").as_bytes(), b"v").unwrap();
            }
            db.flush(true).unwrap();
        };
        flush_round(0);
        let configured = bits_of_newest_l0();
        assert!((9.0..=12.0).contains(&configured), "10 bits per key configured: {configured}");
        db.inner.tuning.set_deferred(true);
        for round in 1..=16 {
            flush_round(round);
        }
        // 17 L0 files against a trigger of 2: 2.08 x ln(16 / 2) -> 5 more bits.
        let deferred = bits_of_newest_l0();
        assert!(deferred >= configured + 3.5, "deferred with 16 L0 files: {deferred} bits, configured {configured}");
        db.inner.tuning.set_deferred(false);
        flush_round(17);
        let after = bits_of_newest_l0();
        assert!(after < configured + 1.0, "the deferral over: {after}");
    }
}
