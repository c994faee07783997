//! Flushes: immutable memtables written into L0 tables (RocksDB's
//! `FlushJob`), run by the flush pool that db/bg.rs schedules, and the
//! flush of unlogged writes at close. A flush takes the oldest run of
//! immutable memtables of a family no running flush holds; flushes of
//! different families run in parallel up to `max_background_flushes`, and a
//! family's flushes install in memtable order (docs/versions.md).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::MutexGuard;

use super::job_guard::{JobGuard, NewTables};
use super::jobs::Hold;
use super::{DbInner, DbState, FlushJobInfo};
use crate::clock::Clock;
use crate::compaction::job::{self, BlobSettings};
use crate::compaction::run;
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::memtable::MemTable;
use crate::options::ColumnFamilyOptions;
use crate::range_del::FragmentedTombstones;
use crate::sst::TableBuilderOptions;
use crate::stats::{bump, LevelCompactionStats};
use crate::version::VersionEdit;

impl DbInner {
    /// Writes `mems` (oldest first) of column family `cf` into one L0 table
    /// and installs it. Requires the db mutex; releases it during I/O. A
    /// family dropped meanwhile is `Cancelled`; its table is deleted.
    /// `resuming`: the flush is a resume's (db/resume.rs), which does not
    /// seal the closed WALs.
    pub(crate) fn flush_memtables(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        cf: u32,
        mems: &[Arc<MemTable>],
        resuming: bool,
    ) -> Result<()> {
        let start = Instant::now();
        let data = st.families.data(cf).ok_or(Error::Cancelled)?;
        let mut opts = self.family_opts(&data);
        let bits = self.l0_filter_bits(st, cf, &opts);
        if bits != opts.bloom_bits_per_key {
            let mut o = (*opts).clone();
            o.bloom_bits_per_key = bits;
            opts = Arc::new(o);
        }
        let smallest_snapshot = self.smallest_snapshot(st);
        let snapshots: Vec<u64> = st.snapshots.sequences();
        // A flush writes exactly one file (no size cut), so one number is
        // reserved, and protected until the table is installed: it is
        // written without the mutex, and the mutex is released again while
        // the MANIFEST is written.
        let number = st.versions.new_file_number();
        let new_tables = NewTables::new(self);
        new_tables.record(number);
        // Blob files take numbers above the table's, so the same floor
        // protects them.
        let numbers = st.versions.file_number_allocator();
        let new_blob_number = || new_tables.record(numbers.fetch_add(1, Ordering::SeqCst));
        let (written, file_number) = {
            let mut st = JobGuard::new(self, st, Hold::PendingOutputs(number));
            // A resume's flush does not seal: the closed WAL whose write
            // failed refuses every sync, and every family is flushed, and its
            // log number moved past the closed WALs, before any write
            // follows (db/resume.rs, contract 3).
            let several_families = st.families.len() > 1 && !resuming;
            let output = MutexGuard::unlocked(&mut st, || {
                let output = self.write_level0_table(
                    mems,
                    &opts,
                    &data,
                    number,
                    (smallest_snapshot, &snapshots),
                    &new_blob_number,
                )?;
                self.open_new_tables(&output.files, 0, &data.cmp)?;
                // No family's tables may hold writes logged after another
                // family's unsynced WAL (db/wal_seal.rs, contract 4).
                if several_families {
                    self.seal_closed_wals()?;
                }
                kill_point!("flush_after_sealing_wals");
                // A flush that wrote a file synced the directory; one that
                // wrote none (every entry dropped) did not, yet its edit may
                // move the family's log number onto a WAL a switch started
                // without a directory sync: that name must be durable
                // before the MANIFEST refers to it.
                if output.files.is_empty() && output.blob_files.is_empty() {
                    self.fs.sync_dir(&self.dir)?;
                }
                Ok(output)
            });
            let output = output?;
            self.wait_for_older_flushes(&mut st, cf, &mems[0])?;
            // A family created while the table was written (or while this
            // flush waited): the seal the edit needs (contract 4) was not
            // made, and the cap below relies on it. The mutex is held from
            // here to the edit, so no family appears after this check.
            let mut sealed = several_families;
            if !sealed && st.families.len() > 1 && !resuming {
                MutexGuard::unlocked(&mut st, || self.seal_closed_wals())?;
                sealed = true;
            }
            let mut edit = VersionEdit { column_family: cf, ..Default::default() };
            let written = output.bytes_written;
            let mut file_number = 0;
            self.record_blob_output(&mut edit, &output);
            for f in output.files {
                file_number = f.number;
                edit.add_file(0, f);
            }
            // The family's data in WALs older than its oldest memtable still
            // unflushed is all in tables.
            let remaining_log = st.families.oldest_log_after_flush(cf, mems).ok_or(Error::Cancelled)?;
            // Never past a closed WAL still unsealed (db/wal_seal.rs,
            // contract 5). The flushed memtables' writes are all in WALs
            // the seal above synced, so none of them is replayed twice.
            // With one family nothing was sealed, and nothing needs the
            // cap: replay starts at that family's own log number.
            let unsealed = if sealed { self.unsealed_log_cap(&st) } else { None }.unwrap_or(u64::MAX);
            edit.log_number = Some(remaining_log.min(unsealed));
            let mut edits = vec![edit];
            // Other families whose memtables moved past old WALs (idle ones,
            // renumbered at WAL switches) record it now, so they do not keep
            // those WALs alive (RocksDB advances their log numbers likewise).
            edits.extend(advanced_log_numbers(&st, unsealed).into_iter().filter(|e| e.column_family != cf));
            let last = self.last_sequence.get();
            st.versions.set_last_sequence(last);
            new_tables.installing();
            // Installed, the memtables have left the family's list: in the
            // same hold of the mutex, by whichever job led the batch.
            self.log_and_apply_flush(&mut st, edits, cf, mems)?;
            self.install_super_version(&mut st);
            // A newer flush of the family may be waiting for this one.
            self.bg_cv.notify_all();
            (written, file_number)
        };
        bump(&self.stats.flush_bytes, written);
        bump(&self.stats.flushes, 1);
        self.stats.time(|h| &h.flush_micros, start.elapsed().as_micros() as u64);
        self.stats.add_level(
            0,
            &LevelCompactionStats {
                bytes_written: written,
                micros: start.elapsed().as_micros() as u64,
                count: 1,
                keys_in: mems.iter().map(|m| m.num_entries()).sum(),
                ..Default::default()
            },
        );
        self.delete_obsolete_files(st);
        // The flushed memtables no longer count against a shared budget.
        self.report_memtable_usage(st);
        // The database's listeners (a family's options have none: a flush
        // of any family is told to them).
        if !self.opts().listeners.is_empty() {
            let info = FlushJobInfo {
                cf_id: cf,
                cf_name: st.families.data(cf).map(|d| d.name.clone()).unwrap_or_default(),
                file_number,
                bytes_written: written,
                entries: mems.iter().map(|m| m.num_entries()).sum(),
                micros: start.elapsed().as_micros() as u64,
            };
            MutexGuard::unlocked(st, || self.notify_event("on_flush_completed", |l| l.on_flush_completed(&info)));
        }
        // What `flush(true)` waits for (`wait_for_memtables_flushed`).
        for m in mems {
            m.set_flush_done();
        }
        self.bg_cv.notify_all();
        Ok(())
    }

    /// Returns once `first`, the oldest memtable a flush of family `cf`
    /// wrote, is the family's oldest immutable memtable: a flush that ends
    /// before an older one of its family waits for it to be installed, so
    /// tables and log numbers reach the MANIFEST in the order the memtables
    /// were filled (RocksDB commits flush results likewise, oldest first).
    /// Otherwise a crash between the two installs would leave the newer
    /// memtable's table listed while recovery replays the older WAL, which
    /// holds the newer writes too. `Cancelled` if the family was dropped, if
    /// a background error stops the older flush, or if at shutdown no flush
    /// holds the older memtables any more. Requires the db mutex.
    fn wait_for_older_flushes(&self, st: &mut MutexGuard<'_, DbState>, cf: u32, first: &Arc<MemTable>) -> Result<()> {
        loop {
            let family = st.families.get(cf).ok_or(Error::Cancelled)?;
            let Some(oldest) = family.imm().first() else { return Err(Error::Cancelled) };
            if Arc::ptr_eq(oldest, first) {
                return Ok(());
            }
            if st.bg_error.is_set() || (st.jobs.is_shutting_down() && !oldest.flush_claimed()) {
                return Err(Error::Cancelled);
            }
            self.bg_cv.wait_for(st, Duration::from_millis(50));
        }
    }

    /// Writes `mems` (oldest first) of column family `cf` into one table
    /// numbered `number`, and blob files numbered by `new_blob_number` (see
    /// [`write_memtables`]). Does not need the db mutex: callers hold it
    /// only at open.
    pub(crate) fn write_level0_table(
        &self,
        mems: &[Arc<MemTable>],
        opts: &ColumnFamilyOptions,
        family: &super::column_family::ColumnFamilyData,
        number: u64,
        (smallest_snapshot, snapshots): (u64, &[u64]),
        new_blob_number: &dyn Fn() -> u64,
    ) -> Result<job::JobOutput> {
        let mut on_bytes = |b: u64| self.tuning.on_flush_bytes(b);
        let db_opts = self.opts();
        let target = TableTarget {
            dir: &self.dir,
            fs: &self.job_fs,
            opts,
            clock: &db_opts.clock,
            cf: family.id,
            cf_name: &family.name,
            bytes_per_sync: db_opts.bytes_per_sync,
            new_blob_number: Some(new_blob_number),
            merge: opts.merge_operator.as_deref().map(|operator| job::MergeSettings {
                operator,
                blobs: Some(&*self.blobs),
                verify_checksums: true,
            }),
            snapshots,
        };
        write_memtables(&target, mems, number, smallest_snapshot, &mut on_bytes)
    }

    /// Adds what a job wrote to blob files, and the garbage it found, to
    /// `edit`, and counts them in the statistics.
    pub(crate) fn record_blob_output(&self, edit: &mut VersionEdit, output: &job::JobOutput) {
        run::record_blob_output(edit, output);
        self.count_blob_output(output);
    }

    /// Counts the blob files `output` wrote and the blobs it relocated.
    pub(super) fn count_blob_output(&self, output: &job::JobOutput) {
        for b in &output.blob_files {
            bump(&self.stats.blob_file_bytes_written, b.file_size);
            bump(&self.stats.blob_files_synced, 1);
        }
        bump(&self.stats.blob_gc_keys_relocated, output.blobs_relocated.0);
        bump(&self.stats.blob_gc_bytes_relocated, output.blobs_relocated.1);
    }

    /// Flushes every memtable holding writes (running background flushes
    /// finish first): at close, those made without the WAL; in a resume
    /// (`new_wal`), all of them, to a new WAL even if none holds any.
    /// Failures are returned as they are, not made the sticky error.
    /// Requires the db mutex.
    pub(super) fn flush_all_memtables(&self, st: &mut MutexGuard<'_, DbState>, new_wal: bool) -> Result<()> {
        let switch: Vec<u32> = st.families.iter().filter(|(_, f)| !f.mem().is_empty()).map(|(id, _)| id).collect();
        if new_wal || !switch.is_empty() {
            self.try_switch_memtables(st, &switch)?;
        }
        loop {
            // With no flush running, no memtable is taken: the pick is all
            // of a family's immutable memtables, the oldest WAL's first.
            match st.families.pick_flush() {
                None if st.jobs.flushes_running() == 0 => return Ok(()),
                Some((cf, mems)) if st.jobs.flushes_running() == 0 => {
                    let mut st = JobGuard::new(self, st, Hold::Flush(mems.clone()));
                    self.flush_memtables(&mut st, cf, &mems, new_wal)?;
                }
                _ => self.bg_cv.wait(st),
            }
        }
    }
}

/// A log-number edit for each family whose memtables all moved past WALs
/// its recorded log number still keeps (none at or past `cap`): what a
/// flush records for the other families, and what a resume records for
/// every family once all are flushed. Requires the db mutex.
pub(super) fn advanced_log_numbers(st: &DbState, cap: u64) -> Vec<VersionEdit> {
    st.families
        .iter()
        .filter_map(|(id, f)| {
            let keep = f.oldest_log_to_keep().min(cap);
            (keep > st.versions.family_log_number(id)).then(|| VersionEdit {
                column_family: id,
                log_number: Some(keep),
                ..Default::default()
            })
        })
        .collect()
}

/// Where and how a table written from memtables goes.
pub(crate) struct TableTarget<'a> {
    pub(crate) dir: &'a std::path::Path,
    pub(crate) fs: &'a Arc<dyn crate::fs::FileSystem>,
    /// The column family's options (table format, level-0 compression).
    pub(crate) opts: &'a ColumnFamilyOptions,
    /// The database's clock, whose time the table is stamped with.
    pub(crate) clock: &'a Arc<dyn Clock>,
    /// The column family and its name, recorded in the table's properties.
    pub(crate) cf: u32,
    pub(crate) cf_name: &'a str,
    pub(crate) bytes_per_sync: u64,
    /// Numbers blob files (`opts.enable_blob_files`); `None` keeps every
    /// value in the table whatever the options say (repair).
    pub(crate) new_blob_number: Option<&'a dyn Fn() -> u64>,
    /// Combines merge operands (`None`: kept as they are).
    pub(crate) merge: Option<job::MergeSettings<'a>>,
    /// The live snapshots, ascending (range tombstones delete only what no
    /// snapshot between sees).
    pub(crate) snapshots: &'a [u64],
}

/// Writes `mems` (oldest first) into one table numbered `number`: a flush,
/// with no size cut, keeping what a reader at `smallest_snapshot` or later
/// can see; values of at least `min_blob_size` go to blob files when the
/// options and `target` say so. Writes nothing (no file) when they hold
/// nothing. Range tombstones go with the entries (drop what they delete
/// where no snapshot is between, and are written to the table).
pub(crate) fn write_memtables(
    target: &TableTarget<'_>,
    mems: &[Arc<MemTable>],
    number: u64,
    smallest_snapshot: u64,
    on_bytes: &mut dyn FnMut(u64),
) -> Result<job::JobOutput> {
    let mut table_options = TableBuilderOptions::from_options(target.opts, target.opts.compression_for_level(0, false));
    table_options.column_family = target.cf;
    table_options.clock = Arc::clone(target.clock);
    table_options.column_family_name = Some(Arc::from(target.cf_name));
    let children: Vec<Box<dyn InternalIterator>> =
        mems.iter().rev().map(|m| Box::new(m.iter()) as Box<dyn InternalIterator>).collect();
    let cmp = table_options.comparator.clone();
    let mut input = MergingIterator::new(cmp.clone(), children);
    input.seek_to_first();
    let mut pool = vec![number];
    let mut alloc = || pool.pop().unwrap_or(u64::MAX);
    let o = target.opts;
    let blob = match target.new_blob_number {
        Some(_) if o.enable_blob_files => BlobSettings {
            min_blob_size: Some(o.min_blob_size),
            blob_file_size: o.blob_file_size,
            compression: o.blob_compression_type,
            column_family: target.cf,
            gc: None,
            verify_checksums: true,
        },
        _ => BlobSettings::off(),
    };
    let mut alloc_blob = || target.new_blob_number.map_or(u64::MAX, |f| f());
    let tombstones: Vec<_> = mems.iter().flat_map(|m| m.range_tombstone_list()).collect();
    let range_dels = (!tombstones.is_empty()).then(|| FragmentedTombstones::with_comparator(&cmp, &tombstones));
    job::run(
        &mut input,
        job::JobContext {
            dir: target.dir,
            fs: target.fs,
            table_options,
            target_file_size: u64::MAX,
            grandparents: &[],
            partitioner: None,
            smallest_snapshot,
            drop_tombstones: false,
            drop_hidden: true,
            cancel: None,
            new_file_number: &mut alloc,
            blob,
            new_blob_file_number: &mut alloc_blob,
            on_bytes,
            bytes_per_sync: target.bytes_per_sync,
            filter: None,
            merge: target.merge,
            range_dels: range_dels.as_ref(),
            snapshots: target.snapshots,
            full_history_ts_low: 0,
        },
    )
}
