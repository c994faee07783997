//! One compaction job in three steps (RocksDB's `CompactionJob`: `Prepare`,
//! `Run`, `Install`): [`CompactionJob::prepare`] works out, from the
//! compaction the picker chose and the database state it starts from, how
//! its outputs are written (table and blob settings, merge operator,
//! compaction filter, subcompaction ranges, readahead); [`CompactionJob::run`]
//! merges without the db mutex ([`super::run::CompactionRun`]); and
//! [`CompactionJob::install`] describes the result as the version edit the
//! database records, with the statistics of the job. The database's
//! scheduler (db/bg.rs) picks, holds the inputs, calls the three steps, and
//! writes the edit to the MANIFEST.
//!
//! A compaction that writes nothing (a trivial move, FIFO's deletions) has
//! no run step: [`edit_without_merge`] is its whole result.
//!
//! Thread safety: `prepare` and `install` do no I/O (they run under the db
//! mutex); `run` does all of it and needs no lock.

use std::any::Any;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::job::{BlobSettings, JobOutput, MergeSettings};
use super::run::{self, CompactionRun, FilterSource, KeyRange};
use super::{Compaction, CompactionReason};
use crate::blob::BlobFetcher;
use crate::compaction_filter::CompactionFilterContext;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::options::{ColumnFamilyOptions, Options};
use crate::sst::{ReadSettings, TableBuilderOptions};
use crate::stats::LevelCompactionStats;
use crate::version::{FileMetaData, TableCache, Version, VersionEdit};

/// Write-behind step of an L0 run merge's outputs when `bytes_per_sync` is
/// 0. A run merge (the tuner's merge of L0 sorted runs while it defers
/// compaction, during a write burst) writes outputs of many megabytes; left
/// to the kernel, their pages go out at the output's final `fdatasync` in
/// one burst (on W2 a median 265 ms each), and the flushes' syncs queue
/// behind it (p90 58 ms, max 439 ms) while memtables wait. Asked to write
/// back every MiB, the merge's pages leave at the rate it writes them
/// (docs/tuning.md, "How the engine wires it"). Flushes and other
/// compactions keep `bytes_per_sync` as configured: a write-behind in the
/// flush made W2's stalls worse (docs/benchmarks.md).
pub(crate) const RUN_MERGE_BYTES_PER_SYNC: u64 = 1 << 20;

/// Where a compaction's files are and how the database reads them.
pub(crate) struct JobEnv<'a> {
    pub(crate) tables: &'a Arc<TableCache>,
    pub(crate) dir: &'a Path,
    pub(crate) fs: &'a Arc<dyn FileSystem>,
    /// Reads blobs back (garbage collection, merges, filters).
    pub(crate) blobs: &'a dyn BlobFetcher,
    /// The database's options (readahead, subcompactions, paranoid checks,
    /// `bytes_per_sync`).
    pub(crate) db_opts: &'a Options,
    /// The family's options (table format, blob files, merge operator,
    /// compaction filter).
    pub(crate) opts: &'a ColumnFamilyOptions,
}

/// The state of the database a compaction of one family starts from, read
/// under the db mutex.
pub(crate) struct JobStart<'s> {
    /// The family's id and name.
    pub(crate) cf: u32,
    pub(crate) family_name: &'s str,
    /// The family's version the inputs were picked from (held by the
    /// caller until the job ends: garbage collection reads the blob files
    /// it lists).
    pub(crate) input_version: &'s Version,
    /// The oldest sequence a reader may read at, and the live snapshots,
    /// ascending.
    pub(crate) smallest_snapshot: u64,
    pub(crate) snapshots: Vec<u64>,
    /// Filter bits per key of an L0 output (the tuner raises them while it
    /// defers compaction).
    pub(crate) l0_filter_bits: u32,
    /// The tuner defers compaction: an L0 run merge writes its outputs
    /// behind ([`RUN_MERGE_BYTES_PER_SYNC`]).
    pub(crate) deferred: bool,
    /// The family's full_history_ts_low (0: none; docs/timestamps.md).
    pub(crate) full_history_ts_low: u64,
}

/// What a compaction's merge tells the database as it runs.
pub(crate) struct JobHooks<'a> {
    /// Set to stop the merge at the next block boundary.
    pub(crate) cancel: &'a AtomicBool,
    /// A new file number for an output, protected from deletion until
    /// installed (or deleted by the caller after a failure).
    pub(crate) new_file_number: &'a (dyn Fn() -> u64 + Sync),
    /// Told of every output byte written.
    pub(crate) on_bytes: &'a (dyn Fn(u64) + Sync),
    /// The error for a subcompaction thread's panic.
    pub(crate) on_panic: &'a (dyn Fn(Box<dyn Any + Send>) -> Error + Sync),
}

/// A compaction that merges, prepared (step 1).
pub(crate) struct CompactionJob<'a> {
    compaction: &'a Compaction,
    env: &'a JobEnv<'a>,
    cf: u32,
    snapshots: Vec<u64>,
    smallest_snapshot: u64,
    table_options: TableBuilderOptions,
    blob: BlobSettings<'a>,
    merge: Option<MergeSettings<'a>>,
    filter: FilterSource<'a>,
    ranges: Vec<KeyRange>,
    rs: ReadSettings,
    bytes_per_sync: u64,
    /// The family's SST partitioner factory, whether the compaction is
    /// full, and whether it is manual.
    partitioner: Option<(&'a Arc<dyn crate::sst_partitioner::SstPartitionerFactory>, bool, bool)>,
    /// Input bytes from the first input level and from the output level.
    bytes_level: u64,
    bytes_next: u64,
    full_history_ts_low: u64,
}

impl<'a> CompactionJob<'a> {
    /// Step 1, under the db mutex: how `c` (not a trivial move or a
    /// deletion) writes its outputs, from the state `start` describes.
    pub(crate) fn prepare(c: &'a Compaction, env: &'a JobEnv<'a>, start: JobStart<'_>) -> Self {
        let opts = env.opts;
        let db_opts = env.db_opts;
        let ranges = run::subcompaction_ranges(c, db_opts.max_subcompactions as usize, &opts.user_comparator());
        let mut table_options = TableBuilderOptions::from_options(opts, c.compression);
        table_options.clock = Arc::clone(&db_opts.clock);
        if c.level == 0 && c.output_level == 0 {
            table_options.bloom_bits_per_key = start.l0_filter_bits;
        }
        if table_options.index_partition_size.is_none()
            && c.partitions_its_metadata(
                opts.target_file_size_base,
                table_options.block_size,
                opts.metadata_block_size,
                table_options.bloom_bits_per_key,
            )
        {
            table_options.index_partition_size = Some(opts.metadata_block_size.max(1));
            table_options.partition_filters = true;
        }
        table_options.column_family = start.cf;
        table_options.column_family_name = Some(Arc::from(start.family_name));
        let gc = opts
            .enable_blob_garbage_collection
            .then(|| (start.input_version.blob_gc_cutoff(opts.blob_garbage_collection_age_cutoff), env.blobs));
        let total_files: usize = (0..start.input_version.num_levels()).map(|l| start.input_version.num_files(l)).sum();
        let newest_snapshot = start.snapshots.last().copied();
        let run_merge = c.level == 0 && c.output_level == 0;
        let bytes_next: u64 = c.output_inputs.iter().map(|f| f.file_size).sum();
        CompactionJob {
            compaction: c,
            env,
            cf: start.cf,
            smallest_snapshot: start.smallest_snapshot,
            snapshots: start.snapshots,
            blob: BlobSettings {
                min_blob_size: opts.enable_blob_files.then_some(opts.min_blob_size),
                blob_file_size: opts.blob_file_size,
                compression: opts.blob_compression_type,
                column_family: start.cf,
                gc,
                verify_checksums: db_opts.paranoid_checks,
            },
            merge: opts.merge_operator.as_deref().map(|operator| MergeSettings {
                operator,
                blobs: Some(env.blobs),
                verify_checksums: db_opts.paranoid_checks,
            }),
            filter: FilterSource {
                filter: opts.compaction_filter.as_ref(),
                factory: opts.compaction_filter_factory.as_ref(),
                context: CompactionFilterContext {
                    is_full_compaction: c.all_inputs().count() == total_files,
                    is_manual_compaction: c.reason == CompactionReason::Manual,
                    column_family_id: start.cf,
                },
                newest_snapshot,
                blobs: Some(env.blobs),
            },
            rs: ReadSettings::for_compaction(db_opts).with_readahead(super::readahead_per_input(
                db_opts.compaction_readahead_size,
                c.files_read_at_once() * ranges.len(),
            )),
            ranges,
            table_options,
            bytes_per_sync: match db_opts.bytes_per_sync {
                0 if run_merge && start.deferred => RUN_MERGE_BYTES_PER_SYNC,
                n => n,
            },
            bytes_level: c.input_bytes() - bytes_next,
            bytes_next,
            full_history_ts_low: start.full_history_ts_low,
            partitioner: opts
                .sst_partitioner_factory
                .as_ref()
                .map(|factory| (factory, c.all_inputs().count() == total_files, c.reason == CompactionReason::Manual)),
        }
    }

    /// How many subcompactions the merge runs in.
    pub(crate) fn subcompactions(&self) -> usize {
        self.ranges.len()
    }

    /// Step 2, without the db mutex: merges the inputs into output tables
    /// (and blob files), each numbered by `hooks.new_file_number`.
    pub(crate) fn run(&self, hooks: &JobHooks<'_>) -> Result<JobOutput> {
        let merge = CompactionRun {
            compaction: self.compaction,
            tables: self.env.tables,
            dir: self.env.dir,
            fs: self.env.fs,
            rs: self.rs,
            table_options: self.table_options.clone(),
            merge: self.merge,
            snapshots: &self.snapshots,
            blob: self.blob,
            smallest_snapshot: self.smallest_snapshot,
            filter: self.filter,
            cancel: hooks.cancel,
            new_file_number: hooks.new_file_number,
            on_bytes: hooks.on_bytes,
            bytes_per_sync: self.bytes_per_sync,
            on_panic: hooks.on_panic,
            partitioner: self.partitioner,
            full_history_ts_low: self.full_history_ts_low,
        };
        merge.run(&self.ranges)
    }

    /// Step 3: the outputs of `out` and the edit that installs them in the
    /// family in place of the inputs (the blob files written and the
    /// garbage found with them).
    pub(crate) fn install(&self, out: &mut JobOutput) -> (Vec<Arc<FileMetaData>>, VersionEdit) {
        let installed: Vec<Arc<FileMetaData>> = std::mem::take(&mut out.files).into_iter().map(Arc::new).collect();
        let edit = run::edit(self.compaction, self.cf, &installed, Some(out));
        (installed, edit)
    }

    /// Input bytes read: from the first input level, and from the output level.
    pub(crate) fn bytes_read(&self) -> (u64, u64) {
        (self.bytes_level, self.bytes_next)
    }

    /// The output level's statistics for this job, which wrote `out` in
    /// `micros`.
    pub(crate) fn level_stats(&self, out: &JobOutput, micros: u64) -> LevelCompactionStats {
        LevelCompactionStats {
            bytes_read_level: self.bytes_level,
            bytes_read_next: self.bytes_next,
            bytes_written: out.bytes_written,
            micros,
            count: 1,
            keys_in: out.keys_in,
            keys_dropped: out.keys_dropped,
            ..Default::default()
        }
    }
}

/// The whole result of a compaction that writes nothing, for family `cf`:
/// a trivial move's inputs at the output level (the files it installs),
/// or a deletion's inputs gone (none).
pub(crate) fn edit_without_merge(c: &Compaction, cf: u32) -> (Vec<Arc<FileMetaData>>, VersionEdit) {
    // Leveled moves have no output-level inputs; universal ones leave them
    // where they are (deleted, and added back by the edit).
    let moved: Vec<Arc<FileMetaData>> = if c.trivial_move { c.all_inputs().cloned().collect() } else { Vec::new() };
    let edit = run::edit(c, cf, &moved, None);
    (moved, edit)
}
