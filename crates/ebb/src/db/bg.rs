//! Background work, scheduled: the flush and compaction thread pools, what
//! each worker picks (flushes in db/flush.rs; a compaction's merge in
//! compaction/run.rs, installed here), manual compaction, deletion of
//! obsolete files, and shutdown.
//!
//! Flush threads (high priority, `max_background_flushes`) and compaction
//! threads (low priority, `max_background_compactions`) wait on `work_cv`.
//! Pools are resized by `set_options`: a thread whose index is at or over the
//! current limit takes no work, and new threads are spawned when the limit grows.
//!
//! Panics: every job (flush, compaction, the file deletions they end with)
//! runs under `catch_unwind` (`catch_job`), and what a job holds in the db
//! state (running counters, `being_compacted` marks, `pending_outputs`
//! entries, cancellation flags) is held by a guard (`JobGuard`) that gives
//! it back however the job ends, so a panic can never leave writers or
//! waiters waiting for a job that is gone. Tables and blob files a job
//! wrote but never handed to the MANIFEST are deleted (`NewTables`). The
//! panic becomes the sticky background error (`Error::Panicked`), and the
//! thread lives on.

use std::any::Any;
use std::ops::{Deref, DerefMut};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use super::{CompactionJobInfo, DbInner, DbState};
use crate::compaction::job::BlobSettings;
use crate::compaction::{picker, run, Compaction, CompactionReason};
use crate::compaction_filter::CompactionFilterContext;
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::options::ColumnFamilyOptions;
use crate::sst::{ReadSettings, TableBuilderOptions};
use crate::stats::{bump, LevelCompactionStats};
use crate::version::{filename, FileMetaData};

/// Write-behind step of an L0 run merge's outputs when `bytes_per_sync` is
/// 0. A run merge (the tuner's merge of L0 sorted runs while it defers
/// compaction, during a write burst) writes outputs of many megabytes; left
/// to the kernel, their pages go out at the output's final `fdatasync` in
/// one burst (on W2 a median 265 ms each), and the flushes' syncs queue
/// behind it (p90 58 ms, max 439 ms) while memtables wait. Asked to write
/// back every MiB, the merge's pages leave at the rate it writes them
/// (docs/tuning.md, "How the engine wires it"). Flushes and other compactions keep
/// `bytes_per_sync` as configured: a write-behind in the flush made W2's
/// stalls worse (docs/benchmarks.md).
const RUN_MERGE_BYTES_PER_SYNC: u64 = 1 << 20;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Pool {
    Flush,
    Compaction,
}

/// Threads spawned so far per pool.
#[derive(Default)]
pub(crate) struct PoolSizes {
    pub(crate) flush: usize,
    pub(crate) compaction: usize,
}

impl DbInner {
    /// Spawns threads until each pool has as many as its option asks for.
    pub(crate) fn ensure_threads(self: &Arc<Self>, sizes: &mut PoolSizes) -> Result<()> {
        let opts = self.opts();
        let mut threads = self.threads.lock();
        while sizes.flush < opts.flush_threads() {
            let inner = Arc::clone(self);
            let index = sizes.flush;
            threads.push(
                std::thread::Builder::new()
                    .name(format!("ebb-flush-{index}"))
                    .spawn(move || inner.worker(Pool::Flush, index))
                    .map_err(|e| Error::io("spawn flush thread", &self.dir, e))?,
            );
            sizes.flush += 1;
        }
        while sizes.compaction < opts.compaction_threads() {
            let inner = Arc::clone(self);
            let index = sizes.compaction;
            threads.push(
                std::thread::Builder::new()
                    .name(format!("ebb-compact-{index}"))
                    .spawn(move || inner.worker(Pool::Compaction, index))
                    .map_err(|e| Error::io("spawn compaction thread", &self.dir, e))?,
            );
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
            if opts.malloc_trim_period_ms > 0 && !st.shutting_down {
                MutexGuard::unlocked(&mut st, || crate::util::heap::trim_if_due(opts.malloc_trim_period_ms));
            }
            if st.shutting_down {
                return;
            }
            let limit = match pool {
                Pool::Flush => opts.flush_threads(),
                Pool::Compaction => opts.compaction_threads(),
            };
            if index < limit && st.paused == 0 && st.bg_error.is_none() {
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
        let Some((cf, mems)) = Self::pick_flush(st) else {
            return false;
        };
        let mut st = JobGuard::new(self, st, Hold::Flush(mems.clone()));
        if !self.opts().listeners.is_empty() {
            MutexGuard::unlocked(&mut st, || self.notify_event("on_flush_begin", |l| l.on_flush_begin()));
        }
        if let Err(e) = self.flush_memtables(&mut st, cf, &mems) {
            self.set_bg_error_locked(&mut st, e);
        }
        true
    }

    /// The oldest sequence number any reader may still read at.
    pub(crate) fn smallest_snapshot(&self, st: &DbState) -> u64 {
        st.snapshots.keys().next().copied().unwrap_or_else(|| self.last_sequence.load(Ordering::Acquire))
    }

    fn maybe_compact(&self, st: &mut MutexGuard<'_, DbState>, opts: &crate::Options) -> bool {
        // Deferred by the tuner: trivial moves (a MANIFEST edit, no data
        // written) and, while the tuner asks for them, L0 run merges.
        let deferred = self.tuning.deferred.load(Ordering::Relaxed);
        let run_merges = self.tuning.merge_l0_runs.load(Ordering::Relaxed);
        if st.manual_compactions > 0 {
            return false;
        }
        // The limit is at least one, so it is only worked out (a debt
        // estimate per family) when a compaction already runs.
        if st.compactions_running > 0 && st.compactions_running >= self.compaction_limit(st, opts) {
            return false;
        }
        // Each family is compacted by its own options (and its own
        // compaction style); the families take turns, starting after the one
        // compacted last.
        let last = st.last_compacted_family;
        let ids: Vec<u32> = st.families.keys().copied().collect();
        let order = ids.iter().filter(|id| **id > last).chain(ids.iter().filter(|id| **id <= last));
        let mut pick = None;
        for id in order {
            let Some(family) = st.families.get(id) else { continue };
            let family_opts = self.family_opts(&family.data);
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
                    picker::pick_l0_run_merge(&v, &family_opts, &st.being_compacted)
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
        st.last_compacted_family = cf;
        let r = self.run_compaction(st, cf, c);
        if let Err(e) = r {
            if !matches!(e, Error::Cancelled) {
                self.set_bg_error_locked(st, e);
            }
        }
        true
    }

    /// Filter bits per key for an L0 table of family `cf` written now: the
    /// configured bits, raised while the tuner defers compaction and L0
    /// holds more files than its trigger ([`crate::tuning::l0_filter_bits`]).
    /// Requires the db mutex.
    pub(super) fn l0_filter_bits(&self, st: &DbState, cf: u32, opts: &ColumnFamilyOptions) -> u32 {
        if !self.tuning.deferred.load(Ordering::Relaxed) {
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
        if threads <= 1 || st.controller.condition != super::StallCondition::Normal {
            return threads;
        }
        let pressed = st.families.iter().any(|(id, family)| {
            let family_opts = self.family_opts(&family.data);
            let shape = crate::version::StorageInfoOptions::from_options(&family_opts);
            st.versions.version(*id).is_some_and(|v| v.needs_compaction_speedup(&shape))
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
        picker::pick_compaction(&version, opts, &st.being_compacted, &|f| self.creation_time(f, &version.cmp))
    }

    /// When `f` was written: its `creation_time` table property (FIFO's `ttl`).
    fn creation_time(&self, f: &FileMetaData, cmp: &crate::comparator::UserComparator) -> Option<u64> {
        self.tables.get(f, 0, cmp).ok().map(|t| t.properties().creation_time)
    }

    /// Runs `c`: marks its inputs busy, merges (without the mutex), installs
    /// the result. Requires the db mutex.
    pub(crate) fn run_compaction(&self, st: &mut MutexGuard<'_, DbState>, cf: u32, c: Compaction) -> Result<()> {
        let cancel = Arc::new(AtomicBool::new(false));
        let listening = !self.opts().listeners.is_empty();
        let mut info = CompactionJobInfo {
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
        // once nothing holds its metadata (db/version_edits.rs, contract 2).
        drop(c);
        if result.is_ok() {
            // With the inputs no longer marked as being compacted, they are
            // obsolete now (unless a reader still holds them). A trivial
            // move makes nothing obsolete, but looks too: files another job
            // made obsolete while this one's MANIFEST write was in flight
            // were left for it.
            self.delete_obsolete_files(st);
        }
        result.map(|_| ())
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
        let data = Arc::clone(&st.families.get(&cf).ok_or(Error::Cancelled)?.data);
        let bytes_next: u64 = c.output_inputs.iter().map(|f| f.file_size).sum();
        let bytes_level: u64 = c.input_bytes() - bytes_next;
        if c.is_deletion() {
            if !st.families.contains_key(&cf) {
                return Err(Error::Cancelled);
            }
            self.log_and_apply(st, vec![run::edit(c, cf, &[], None)])?;
            self.install_super_version(st);
            return Ok(Vec::new());
        }
        if c.trivial_move {
            bump(&self.stats.trivial_moves, 1);
            // Leveled moves have no output-level inputs; universal ones leave
            // them where they are (deleted, and added back by the edit).
            let moved: Vec<Arc<FileMetaData>> = c.all_inputs().cloned().collect();
            if !st.families.contains_key(&cf) {
                return Err(Error::Cancelled);
            }
            self.log_and_apply(st, vec![run::edit(c, cf, &moved, None)])?;
            self.install_super_version(st);
            self.stats.add_level(
                c.output_level,
                &LevelCompactionStats {
                    bytes_moved: bytes_level,
                    count: 1,
                    micros: start.elapsed().as_micros() as u64,
                    ..Default::default()
                },
            );
            return Ok(moved);
        }
        let opts = self.family_opts(&data);
        let db_opts = self.opts();
        let smallest_snapshot = self.smallest_snapshot(st);
        let newest_snapshot = st.snapshots.keys().next_back().copied();
        let snapshots: Vec<u64> = st.snapshots.keys().copied().collect();
        let filter_context = CompactionFilterContext {
            is_full_compaction: {
                let v = st.versions.version(cf);
                let total: usize = v.map_or(0, |v| (0..v.num_levels()).map(|l| v.num_files(l)).sum());
                c.all_inputs().count() == total
            },
            is_manual_compaction: c.reason == CompactionReason::Manual,
            column_family_id: cf,
        };
        // Held, and listed among the versions readers hold, until the job
        // ends: garbage collection reads the blob files it lists, which must
        // stay even if the family is dropped meanwhile.
        let input_version = st.versions.version(cf).ok_or(Error::Cancelled)?;
        st.live_versions.push((cf, Arc::downgrade(&input_version)));
        let fetcher: &dyn crate::blob::BlobFetcher = &*self.blobs;
        let gc = opts
            .enable_blob_garbage_collection
            .then(|| (input_version.blob_gc_cutoff(opts.blob_garbage_collection_age_cutoff), fetcher));
        // Outputs are numbered without the mutex; every number at or above
        // `floor` is protected from deletion until they are installed.
        let floor = st.versions.next_file_number();
        let new_tables = NewTables::new(self);
        let numbers = st.versions.file_number_allocator();
        let ranges = run::subcompaction_ranges(c, db_opts.max_subcompactions as usize, &data.cmp);
        if ranges.len() > 1 {
            bump(&self.stats.split_compactions, 1);
            bump(&self.stats.subcompactions, ranges.len() as u64);
        }
        let mut table_options = TableBuilderOptions::from_options(&opts, c.compression);
        if c.level == 0 && c.output_level == 0 {
            table_options.bloom_bits_per_key = self.l0_filter_bits(st, cf, &opts);
        }
        if table_options.index_partition_size.is_none() && c.writes_one_large_file(opts.target_file_size_base) {
            table_options.index_partition_size = Some(opts.metadata_block_size.max(1));
            table_options.partition_filters = true;
        }
        table_options.column_family = cf;
        table_options.column_family_name = Some(Arc::from(data.name.as_str()));
        let from_l0 = c.level == 0 && c.output_level > 0;
        let run_merge = c.level == 0 && c.output_level == 0;
        let new_file_number = || new_tables.record(numbers.fetch_add(1, Ordering::SeqCst));
        let on_bytes = |b: u64| {
            bump(&self.stats.compaction_bytes_written, b);
            self.tuning.on_compaction_bytes(b, from_l0, run_merge, cancel);
        };
        let on_panic = |payload| self.panic_error("subcompaction", payload);
        let merge = run::CompactionRun {
            compaction: c,
            tables: &self.tables,
            dir: &self.dir,
            fs: &self.fs,
            rs: ReadSettings::for_compaction(&db_opts).with_readahead(crate::compaction::readahead_per_input(
                db_opts.compaction_readahead_size,
                c.files_read_at_once() * ranges.len(),
            )),
            table_options,
            blob: BlobSettings {
                min_blob_size: opts.enable_blob_files.then_some(opts.min_blob_size),
                blob_file_size: opts.blob_file_size,
                compression: opts.blob_compression_type,
                column_family: cf,
                gc,
                verify_checksums: db_opts.paranoid_checks,
            },
            smallest_snapshot,
            snapshots: &snapshots,
            merge: opts.merge_operator.as_deref().map(|operator| crate::compaction::job::MergeSettings {
                operator,
                blobs: Some(fetcher),
                verify_checksums: db_opts.paranoid_checks,
            }),
            filter: run::FilterSource {
                filter: opts.compaction_filter.as_ref(),
                factory: opts.compaction_filter_factory.as_ref(),
                context: filter_context,
                newest_snapshot,
                blobs: Some(fetcher),
            },
            cancel,
            new_file_number: &new_file_number,
            on_bytes: &on_bytes,
            bytes_per_sync: match db_opts.bytes_per_sync {
                0 if run_merge && self.tuning.deferred.load(Ordering::Relaxed) => RUN_MERGE_BYTES_PER_SYNC,
                n => n,
            },
            on_panic: &on_panic,
        };
        let mut job = JobGuard::new(self, st, Hold::PendingOutputs(floor));
        // A subcompaction thread that panics fails the compaction; its
        // outputs are in `new_tables` and deleted with the others'.
        let mut out = match MutexGuard::unlocked(&mut job, || merge.run(&ranges)) {
            Ok(out) => out,
            Err(e) => {
                if matches!(e, Error::Cancelled) {
                    bump(&self.stats.cancelled_compactions, 1);
                }
                if matches!(e, Error::Panicked { .. }) {
                    // Sticky whichever thread ran the compaction (a manual one
                    // does not make its other errors sticky).
                    return Err(self.set_bg_error_locked(&mut job, e));
                }
                return Err(e);
            }
        };
        let written = out.bytes_written;
        self.count_blob_output(&out);
        let installed: Vec<Arc<FileMetaData>> = std::mem::take(&mut out.files).into_iter().map(Arc::new).collect();
        let edit = run::edit(c, cf, &installed, Some(&out));
        let r = if job.families.contains_key(&cf) {
            new_tables.installing();
            self.log_and_apply(&mut job, vec![edit])
        } else {
            Err(Error::Cancelled)
        };
        drop(job);
        drop(input_version);
        r?;
        self.install_super_version(st);
        if c.level == 0 && c.output_level == 0 {
            bump(&self.stats.intra_l0_compactions, 1);
        }
        self.stats.time(|h| &h.compaction_micros, start.elapsed().as_micros() as u64);
        bump(&self.stats.compaction_bytes_read, bytes_level + bytes_next);
        self.stats.add_level(
            c.output_level,
            &LevelCompactionStats {
                bytes_read_level: bytes_level,
                bytes_read_next: bytes_next,
                bytes_written: written,
                micros: start.elapsed().as_micros() as u64,
                count: 1,
                keys_in: out.keys_in,
                keys_dropped: out.keys_dropped,
                ..Default::default()
            },
        );
        Ok(installed)
    }

    /// Appends `ebb.stats` to the info log (`LOG`) every
    /// `stats_dump_period_sec` (dynamic), as RocksDB does. A panic ends the
    /// thread and becomes the sticky background error.
    pub(crate) fn stats_dump_loop(self: Arc<Self>) {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| self.dump_stats_until_shutdown())) {
            let e = self.panic_error("stats dump thread", payload);
            self.set_bg_error(e);
        }
    }

    fn dump_stats_until_shutdown(&self) {
        let mut last = Instant::now();
        loop {
            let period = Duration::from_secs(u64::from(self.opts().stats_dump_period_sec.max(1)));
            {
                let mut st = self.state.lock();
                if st.shutting_down {
                    return;
                }
                self.work_cv.wait_for(&mut st, Duration::from_millis(500));
                if st.shutting_down {
                    return;
                }
            }
            if self.opts().stats_dump_period_sec == 0 || last.elapsed() < period {
                continue;
            }
            last = Instant::now();
            if let Some(text) = self.property(0, "ebb.stats") {
                self.info_log.log(super::info_log::Level::Info, &format!("------- DUMPING STATS -------\n{text}"));
            }
        }
    }

    /// Compacts column family `cf`'s files overlapping `[begin, end]`, on
    /// the caller's thread: a panic there is a job's panic too (the sticky
    /// error, returned).
    pub(crate) fn compact_range(&self, cf: u32, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.check_writable("compact_range")?;
        self.flush_family(cf, true)?;
        let mut st = self.state.lock();
        self.catch_job(&mut st, "manual compaction", |st| {
            let mut st = JobGuard::new(self, st, Hold::ManualCompaction);
            self.compact_range_locked(&mut st, cf, begin, end)
        })?
    }

    fn compact_range_locked(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        cf: u32,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        // Wait for automatic compactions to finish, so inputs are free.
        while st.compactions_running > 0 {
            self.bg_cv.wait(st);
        }
        if let Some(e) = &st.bg_error {
            return Err(Error::Background(Arc::clone(e)));
        }
        let dropped = || Error::invalid(format!("column family {cf} was dropped"));
        let data = Arc::clone(&st.families.get(&cf).ok_or_else(dropped)?.data);
        let opts = self.family_opts(&data);
        let version = st.versions.version(cf).ok_or_else(dropped)?;
        if opts.compaction_style != crate::CompactionStyle::Level {
            let created = |f: &FileMetaData| self.creation_time(f, &data.cmp);
            let c = picker::manual_compaction_for_style(&version, &opts, &st.being_compacted, &created);
            return c.map_or(Ok(()), |c| self.run_compaction(st, cf, c));
        }
        let (deepest, num_levels) = (version.deepest_nonempty_level(), version.num_levels());
        // Versions held here would keep the files each compaction makes
        // obsolete until some later job's clean-up.
        drop(version);
        // With a compaction filter every file in the range is rewritten
        // through it: no trivial moves, and the deepest level compacted into
        // itself (RocksDB's `bottommost_level_compaction =
        // kIfHaveCompactionFilter`, its default).
        let filtered = opts.has_compaction_filter();
        let mut level = 0;
        while level < num_levels {
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(Arc::clone(e)));
            }
            let v = st.versions.version(cf).ok_or_else(dropped)?;
            let last = deepest.max(1);
            if level >= last && level > 0 && !(filtered && level == deepest) {
                // Without a filter, rewriting the deepest level into itself
                // would not change it, so stop.
                break;
            }
            let output_level = match level {
                0 => v
                    .level_targets(&crate::version::StorageInfoOptions::from_options(&opts))
                    .base_level
                    .min(last)
                    .max(1),
                l if l == deepest => l,
                l => l + 1,
            };
            let picked = picker::range_compaction(
                &v,
                &opts,
                &st.being_compacted,
                (level, output_level),
                (begin, end),
                CompactionReason::Manual,
            );
            drop(v);
            if let Some(mut c) = picked {
                if filtered {
                    c.trivial_move = false;
                }
                self.run_compaction(st, cf, c)?;
            }
            if level == deepest && level > 0 {
                break;
            }
            level = if level == 0 { output_level } else { level + 1 };
        }
        Ok(())
    }

    pub(crate) fn wait_for_compact(&self) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            // Nothing runs, and nothing ever will.
            return Ok(());
        }
        let mut st = self.state.lock();
        let mut purged = false;
        loop {
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(Arc::clone(e)));
            }
            // A deferral is compaction put off, not compaction done: wait
            // for the tuner to end it (it ends when writes stop) and for
            // the catch-up that follows.
            let deferred = self.tuning.deferred.load(Ordering::Relaxed) && !st.shutting_down;
            let needs = deferred
                || st.families.iter().any(|(id, f)| {
                    let opts = self.family_opts(&f.data);
                    !opts.disable_auto_compactions && self.pick_compaction(&st, *id, &opts).is_some()
                });
            let flushing = st.flush_running > 0 || st.families.values().any(|f| !f.imm.is_empty());
            if !flushing && st.compactions_running == 0 && st.purges_running == 0 && !needs {
                // A file a job made obsolete while something else held it
                // for a moment (a reader, another job's grandparents) waits
                // for the next job's look (db/version_edits.rs, contract 2);
                // the work done, look once more here, so the files the jobs
                // made obsolete are gone unless still held.
                if !purged && (st.obsolete.pending() || st.versions.has_retired_manifests()) {
                    purged = true;
                    self.delete_obsolete_files(&mut st);
                    continue;
                }
                return Ok(());
            }
            if st.paused > 0 {
                return Err(Error::invalid("background work is paused; wait_for_compact would never return"));
            }
            self.work_cv.notify_all();
            self.bg_cv.wait_for(&mut st, Duration::from_millis(100));
        }
    }

    /// Shuts the database down. Idempotent.
    pub(crate) fn close(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        // Let queued writes finish: take the queue, then stop new ones.
        let q = self.queue.lock();
        let mut result = self.seal_closed_wals();
        {
            let mut wal = self.wal.lock();
            if let Some(w) = wal.as_mut() {
                if let Err(e) = w.sync() {
                    result = result.and(Err(e));
                }
            }
        }
        // Writes made without the WAL survive only in an SST. If a background
        // error stopped flushes, they are lost: close must say so (the
        // writes were acknowledged before the error).
        let needs_flush = {
            let st = self.state.lock();
            let unlogged = st.families.values().any(|f| f.mem.has_unlogged() || f.imm.iter().any(|m| m.has_unlogged()));
            if let (true, Some(e)) = (unlogged, &st.bg_error) {
                if result.is_ok() {
                    result = Err(Error::Background(Arc::clone(e)));
                }
            }
            unlogged && st.bg_error.is_none()
        };
        if needs_flush && result.is_ok() {
            let mut st = self.state.lock();
            if let Err(e) = self.catch_job(&mut st, "flush at close", |st| self.flush_unlogged(st)).and_then(|r| r) {
                result = Err(e);
            }
        }
        self.closed.store(true, Ordering::Release);
        self.tuning.close();
        {
            let mut st = self.state.lock();
            for flag in &st.running_jobs {
                flag.store(true, Ordering::Release);
            }
            st.shutting_down = true;
            self.work_cv.notify_all();
            self.bg_cv.notify_all();
        }
        drop(q);
        let threads: Vec<_> = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            let name = t.thread().name().unwrap_or("unnamed").to_string();
            // Jobs run under `catch_unwind`; a thread dies only of a panic
            // outside one, and that is reported, not ignored.
            if let Err(payload) = t.join() {
                let message = format!("{name}: {}", crate::error::panic_message(payload.as_ref()));
                let e = Error::Panicked { job: "background thread", message };
                self.info_log.log(super::info_log::Level::Error, &format!("background error: {e}"));
                if result.is_ok() {
                    result = Err(e);
                }
            }
        }
        // A panic (caught, and made the sticky error) may have interrupted
        // work half done: unlike an I/O error that a write or flush already
        // reported, nothing else tells the caller, so close does not report
        // a clean shutdown.
        if result.is_ok() {
            let st = self.state.lock();
            if let Some(e) = st.bg_error.as_ref().filter(|e| matches!(***e, Error::Panicked { .. })) {
                result = Err(Error::Background(Arc::clone(e)));
            }
        }
        *self.wal.lock() = None;
        self.info_log.close();
        result
    }

    /// Runs `body`, the job `job`, under `catch_unwind`: a panic in it
    /// becomes the sticky background error (`Error::Panicked`, also in the
    /// info log), returned wrapped as every later write will see it. By then
    /// the job's guards (`JobGuard`, `NewTables`) have given back what it
    /// held. Requires the db mutex, and it is held again when this returns
    /// (`MutexGuard::unlocked` takes it back while a panic unwinds).
    fn catch_job<'a, T>(
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

/// What a running job holds in the db state.
pub(super) enum Hold {
    /// A flush, counted in `flush_running`, its memtables marked taken
    /// (`MemTable::flush_claimed`) so no other flush writes them too.
    Flush(Vec<Arc<MemTable>>),
    /// A manual compaction, counted in `manual_compactions` (automatic ones
    /// are not picked meanwhile).
    ManualCompaction,
    /// A compaction: counted in `compactions_running`, its inputs marked in
    /// `being_compacted`, its cancellation flag in `running_jobs`.
    Compaction { inputs: Vec<u64>, cancel: Arc<AtomicBool> },
    /// Table numbers from this floor up, protected from deletion as
    /// obsolete (`pending_outputs`) while the job writes them.
    PendingOutputs(u64),
}

/// A job's hold on the db state (`Hold`), taken when the guard is made and
/// given back when it drops: when the job returns, fails, or unwinds from a
/// panic. Waiters are woken then (`bg_cv`, `work_cv`).
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
    pub(super) fn new(inner: &'g DbInner, st: &'g mut MutexGuard<'a, DbState>, hold: Hold) -> Self {
        match &hold {
            Hold::Flush(mems) => {
                st.flush_running += 1;
                for m in mems {
                    m.set_flush_claimed(true);
                }
            }
            Hold::ManualCompaction => st.manual_compactions += 1,
            Hold::Compaction { inputs, cancel } => {
                st.being_compacted.extend(inputs.iter().copied());
                st.compactions_running += 1;
                st.running_jobs.push(Arc::clone(cancel));
            }
            Hold::PendingOutputs(floor) => st.pending_outputs.push(*floor),
        }
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
        let st: &mut DbState = self.st;
        match &self.hold {
            Hold::Flush(mems) => {
                // Installed memtables have left the family's list; ones a
                // failed flush did not install are free for the next.
                for m in mems {
                    m.set_flush_claimed(false);
                }
                st.flush_running -= 1;
            }
            Hold::ManualCompaction => st.manual_compactions -= 1,
            Hold::Compaction { inputs, cancel } => {
                for n in inputs {
                    st.being_compacted.remove(n);
                }
                st.running_jobs.retain(|j| !Arc::ptr_eq(j, cancel));
                st.compactions_running -= 1;
            }
            Hold::PendingOutputs(floor) => {
                if let Some(i) = st.pending_outputs.iter().position(|n| n == floor) {
                    st.pending_outputs.swap_remove(i);
                }
            }
        }
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
    pub(super) fn new(inner: &'g DbInner) -> Self {
        NewTables { inner, numbers: Mutex::new(Vec::new()) }
    }

    /// Records table or blob file `number` as created by the job; returns it.
    pub(super) fn record(&self, number: u64) -> u64 {
        self.numbers.lock().push(number);
        number
    }

    /// The tables are about to be handed to the MANIFEST.
    pub(super) fn installing(&self) {
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

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<super::Db>();
    is::<FileMetaData>();
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
        hooks.deferred.store(true, Ordering::Relaxed);
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
        hooks.merge_l0_runs.store(true, Ordering::Relaxed);
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
        hooks.merge_l0_runs.store(false, Ordering::Relaxed);
        hooks.deferred.store(false, Ordering::Relaxed);
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
        db.inner.tuning.deferred.store(true, Ordering::Relaxed);
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
        std::thread::sleep(Duration::from_millis(200));
        assert!(files_at(0) >= 4, "overlapping files stay in L0 while deferred: {}", files_at(0));
        assert_eq!(db.metrics().compaction_bytes_written, 0);
        db.inner.tuning.deferred.store(false, Ordering::Relaxed);
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
        hooks.deferred.store(true, Ordering::Relaxed);
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
        hooks.merge_l0_runs.store(true, Ordering::Relaxed);
        db.inner.work_cv.notify_all();
        let start = Instant::now();
        while db.inner.state.lock().bg_error.is_none() && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(fs.faults_injected() > 0, "no L0 run merge output asked for write-behind");
        let e = db.inner.state.lock().bg_error.clone().expect("the injected fault stopped the merge");
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
        db.inner.tuning.deferred.store(true, Ordering::Relaxed);
        for round in 1..=16 {
            flush_round(round);
        }
        // 17 L0 files against a trigger of 2: 2.08 x ln(16 / 2) -> 5 more bits.
        let deferred = bits_of_newest_l0();
        assert!(deferred >= configured + 3.5, "deferred with 16 L0 files: {deferred} bits, configured {configured}");
        db.inner.tuning.deferred.store(false, Ordering::Relaxed);
        flush_round(17);
        let after = bits_of_newest_l0();
        assert!(after < configured + 1.0, "the deferral over: {after}");
    }
}
