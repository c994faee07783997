//! Running a compaction's merge (RocksDB's `CompactionJob::Run`): the
//! inputs split into subcompactions by key range, each merged on its own
//! thread through a merging iterator over the input levels into output
//! tables ([`super::job::run`]), the outputs gathered into one
//! [`JobOutput`]. The database's scheduler (db/bg.rs) picks the compaction,
//! marks its inputs, calls [`CompactionRun::run`] without the db mutex, and
//! installs the edit [`CompactionRun::edit`] describes.
//!
//! Errors: the first error of any subcompaction fails the compaction (a
//! cancellation gives way to any other error); a subcompaction thread that
//! panics fails it with the error `on_panic` makes of the panic. The outputs
//! of a failed run are the caller's to delete (it numbered them).

use std::any::Any;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use super::job::{self, BlobSettings, JobOutput};
use super::Compaction;
use crate::compaction_filter::{ActiveFilter, CompactionFilter, CompactionFilterContext, CompactionFilterFactory};
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{make_internal_key, user_key, KIND_FOR_SEEK, MAX_SEQUENCE};
use crate::range_del::FragmentedTombstones;
use crate::sst::{ReadSettings, TableBuilderOptions};
use crate::sst_partitioner::{SstPartitionerContext, SstPartitionerFactory};
use crate::version::{
    BlobFileAddition, BlobFileGarbage, FileMetaData, LevelFiles, LevelIterator, TableCache, VersionEdit,
};

/// Where a compaction's filter comes from ([`ActiveFilter::for_compaction`]).
#[derive(Clone, Copy)]
pub(crate) struct FilterSource<'a> {
    pub(crate) filter: Option<&'a Arc<dyn CompactionFilter>>,
    pub(crate) factory: Option<&'a Arc<dyn CompactionFilterFactory>>,
    pub(crate) context: CompactionFilterContext,
    /// The newest live snapshot (`None` without any).
    pub(crate) newest_snapshot: Option<u64>,
    /// Reads values kept in blob files back for the filter.
    pub(crate) blobs: Option<&'a dyn crate::blob::BlobFetcher>,
}

/// A user-key range `[start, end)` of one subcompaction; `None` is unbounded.
pub(crate) type KeyRange = (Option<Vec<u8>>, Option<Vec<u8>>);

/// One compaction's merge, with everything its subcompactions share.
pub(crate) struct CompactionRun<'a> {
    /// What to merge.
    pub(crate) compaction: &'a Compaction,
    /// Where the inputs are opened.
    pub(crate) tables: &'a Arc<TableCache>,
    /// The database directory, where outputs are written.
    pub(crate) dir: &'a Path,
    /// Its filesystem.
    pub(crate) fs: &'a Arc<dyn FileSystem>,
    /// How the inputs are read.
    pub(crate) rs: ReadSettings,
    /// How the output tables are built.
    pub(crate) table_options: TableBuilderOptions,
    /// Combines merge operands (`None`: the family has no merge operator).
    pub(crate) merge: Option<job::MergeSettings<'a>>,
    /// The live snapshots when the compaction started, ascending.
    pub(crate) snapshots: &'a [u64],
    /// Blob files: separation, garbage collection.
    pub(crate) blob: BlobSettings<'a>,
    /// The oldest sequence a reader may read at.
    pub(crate) smallest_snapshot: u64,
    /// The compaction filter's source (the family's filter, or its factory
    /// called once per subcompaction) and the newest live snapshot.
    pub(crate) filter: FilterSource<'a>,
    /// Set to stop the merge at the next block boundary.
    pub(crate) cancel: &'a AtomicBool,
    /// A new file number for an output table or blob file, protected from
    /// deletion until installed or deleted by the caller.
    pub(crate) new_file_number: &'a (dyn Fn() -> u64 + Sync),
    /// Told of every output byte written (statistics, the tuner's pacing).
    pub(crate) on_bytes: &'a (dyn Fn(u64) + Sync),
    /// Write-behind interval of the outputs (0: none).
    pub(crate) bytes_per_sync: u64,
    /// The error for a subcompaction thread's panic.
    pub(crate) on_panic: &'a (dyn Fn(Box<dyn Any + Send>) -> Error + Sync),
    /// The family's SST partitioner factory, with whether the compaction
    /// is full and manual (for the partitioners' context).
    pub(crate) partitioner: Option<(&'a Arc<dyn SstPartitionerFactory>, bool, bool)>,
    /// The family's full_history_ts_low (0: none).
    pub(crate) full_history_ts_low: u64,
}

impl CompactionRun<'_> {
    /// Merges every range of `ranges` (a thread each when there are several)
    /// and gathers their outputs, in range order.
    pub(crate) fn run(&self, ranges: &[KeyRange]) -> Result<JobOutput> {
        let results: Vec<Result<JobOutput>> = if ranges.len() == 1 {
            vec![self.run_range(&ranges[0])]
        } else {
            std::thread::scope(|scope| {
                let handles: Vec<_> = ranges.iter().map(|r| scope.spawn(|| self.run_range(r))).collect();
                handles.into_iter().map(|h| h.join().unwrap_or_else(|payload| Err((self.on_panic)(payload)))).collect()
            })
        };
        let mut out = JobOutput::default();
        let mut first_error = None;
        for r in results {
            match r {
                Ok(o) => {
                    out.keys_in += o.keys_in;
                    out.keys_dropped += o.keys_dropped;
                    out.bytes_written += o.bytes_written;
                    out.files.extend(o.files);
                    out.blob_files.extend(o.blob_files);
                    job::add_flows(&mut out.blob_garbage, o.blob_garbage);
                    out.blobs_relocated.0 += o.blobs_relocated.0;
                    out.blobs_relocated.1 += o.blobs_relocated.1;
                }
                Err(e) => {
                    if first_error.is_none() || matches!(first_error, Some(Error::Cancelled)) {
                        first_error = Some(e);
                    }
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Merges the part of the compaction whose user keys fall in `range`.
    fn run_range(&self, range: &KeyRange) -> Result<JobOutput> {
        let c = self.compaction;
        // The family's order, which the output tables are built in.
        let cmp = &self.table_options.comparator;
        let level = |files: &Vec<Arc<FileMetaData>>, level: usize| -> Box<dyn InternalIterator> {
            let files = LevelFiles::Listed(files.clone());
            Box::new(LevelIterator::new(files, cmp.clone(), level, Arc::clone(self.tables), self.rs))
        };
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        if c.level == 0 {
            for f in &c.inputs {
                children.push(Box::new(self.tables.get(f, 0, cmp)?.iter(self.rs)));
            }
        } else {
            children.push(level(&c.inputs, c.level));
        }
        for (l, files) in &c.middle_inputs {
            children.push(level(files, *l));
        }
        if !c.output_inputs.is_empty() {
            children.push(level(&c.output_inputs, c.output_level));
        }
        // The range tombstones of every input (one range: see
        // `subcompaction_ranges`).
        let mut tombstones = Vec::new();
        for (level, f) in c.inputs_by_level().filter(|(_, f)| f.num_range_deletions > 0) {
            if let Some(t) = self.tables.get(f, level, cmp)?.range_tombstones() {
                tombstones.extend(t.tombstones());
            }
        }
        let range_dels = (!tombstones.is_empty()).then(|| FragmentedTombstones::with_comparator(cmp, &tombstones));
        let merged = MergingIterator::new(cmp.clone(), children);
        let mut input = BoundedIterator { inner: merged, end: range.1.clone(), cmp: cmp.clone() };
        match &range.0 {
            Some(start) => input.seek(&make_internal_key(start, MAX_SEQUENCE, KIND_FOR_SEEK)),
            None => input.seek_to_first(),
        }
        let active = ActiveFilter::for_compaction(self.filter.filter, self.filter.factory, &self.filter.context);
        let filter = active.as_ref().map(|f| job::FilterSettings {
            filter: f.get(),
            newest_snapshot: self.filter.newest_snapshot,
            level: c.level,
            blobs: self.filter.blobs,
        });
        let partitioner = self.partitioner.map(|(factory, is_full_compaction, is_manual_compaction)| {
            factory.create_partitioner(&SstPartitionerContext {
                is_full_compaction,
                is_manual_compaction,
                output_level: c.output_level,
                smallest_user_key: range.0.as_deref().unwrap_or_default(),
                largest_user_key: range.1.as_deref().unwrap_or_default(),
            })
        });
        let mut alloc = || (self.new_file_number)();
        let mut alloc_blob = || (self.new_file_number)();
        let mut on_bytes = |b: u64| (self.on_bytes)(b);
        job::run(
            &mut input,
            job::JobContext {
                dir: self.dir,
                fs: self.fs,
                table_options: self.table_options.clone(),
                target_file_size: c.target_file_size,
                grandparents: &c.grandparents,
                partitioner,
                smallest_snapshot: self.smallest_snapshot,
                drop_tombstones: c.bottommost,
                drop_hidden: true,
                cancel: Some(self.cancel),
                new_file_number: &mut alloc,
                blob: self.blob,
                new_blob_file_number: &mut alloc_blob,
                on_bytes: &mut on_bytes,
                bytes_per_sync: self.bytes_per_sync,
                filter,
                merge: self.merge,
                range_dels: range_dels.as_ref(),
                snapshots: self.snapshots,
                full_history_ts_low: self.full_history_ts_low,
            },
        )
    }
}

/// The edit that installs a compaction's result in family `cf`: its inputs
/// deleted; `installed` (the outputs, or the moved inputs of a trivial move)
/// added at the output level; the blob files written and the garbage found
/// in older ones, from `out`.
pub(crate) fn edit(c: &Compaction, cf: u32, installed: &[Arc<FileMetaData>], out: Option<&JobOutput>) -> VersionEdit {
    let mut edit = VersionEdit { column_family: cf, ..Default::default() };
    for (level, f) in c.inputs_by_level() {
        edit.delete_file(level, f.number);
    }
    for f in installed {
        edit.new_files.push((c.output_level, Arc::clone(f)));
    }
    if let Some(out) = out {
        record_blob_output(&mut edit, out);
    }
    edit
}

/// Adds the blob files `output` wrote, and the garbage it found, to `edit`.
pub(crate) fn record_blob_output(edit: &mut VersionEdit, output: &JobOutput) {
    for b in &output.blob_files {
        edit.blob_file_additions.push(BlobFileAddition {
            number: b.number,
            total_count: b.blob_count,
            total_bytes: b.blob_bytes,
        });
    }
    for (number, (count, bytes)) in &output.blob_garbage {
        edit.blob_file_garbage.push(BlobFileGarbage { number: *number, count: *count, bytes: *bytes });
    }
}

/// Splits `c` into at most `max` key ranges of about equal input bytes, cut
/// at input-file boundaries (RocksDB `GenSubcompactionBoundaries`, simplified).
/// Only L0→base and compactions with output-level inputs are split; a range
/// is never smaller than one target file. Keys are in `cmp`'s order.
pub(crate) fn subcompaction_ranges(c: &Compaction, max: usize, cmp: &UserComparator) -> Vec<KeyRange> {
    // Range tombstones are handed out to outputs in key order by one job
    // (job.rs), so a compaction reading any is not split.
    // Keys with timestamps are not split either: a cut point is one
    // version of a key, and its versions must stay in one output.
    let splittable = c.level != c.output_level
        && cmp.timestamp_size() == 0
        && (c.level == 0 || !c.output_inputs.is_empty())
        && c.all_inputs().all(|f| f.num_range_deletions == 0);
    let wanted = max.min((c.input_bytes() / c.target_file_size.max(1)).max(1) as usize);
    if !splittable || wanted <= 1 {
        return vec![(None, None)];
    }
    // Candidate cut points: each input file's smallest key, weighted by
    // bytes. An L0 file usually spans most of the key space (random writes),
    // and its bytes at its smallest key alone put nearly all of L0 in the
    // first range: its bytes are spread instead over the output level's
    // files starting inside its range, in proportion to theirs (RocksDB
    // takes anchors inside each file for the same reason).
    let mut points: Vec<(Vec<u8>, u64)> = Vec::new();
    let anchors: Vec<(&[u8], u64)> = if c.level == 0 {
        c.output_inputs.iter().map(|f| (f.smallest_user_key(), f.file_size)).collect()
    } else {
        Vec::new()
    };
    for f in &c.inputs {
        let inside: Vec<&(&[u8], u64)> = anchors
            .iter()
            .filter(|(k, _)| {
                cmp.compare(k, f.smallest_user_key()).is_ge() && cmp.compare(k, f.largest_user_key()).is_le()
            })
            .collect();
        let inside_bytes: u64 = inside.iter().map(|(_, size)| size).sum();
        if inside_bytes == 0 {
            points.push((f.smallest_user_key().to_vec(), f.file_size));
            continue;
        }
        for (k, size) in inside {
            let share = u128::from(f.file_size) * u128::from(*size) / u128::from(inside_bytes);
            points.push((k.to_vec(), u64::try_from(share).unwrap_or(u64::MAX)));
        }
    }
    let rest = c.middle_inputs.iter().flat_map(|(_, files)| files.iter()).chain(c.output_inputs.iter());
    points.extend(rest.map(|f| (f.smallest_user_key().to_vec(), f.file_size)));
    points.sort_by(|a, b| cmp.compare(&a.0, &b.0).then(a.1.cmp(&b.1)));
    let total: u64 = points.iter().map(|p| p.1).sum();
    let step = total / wanted as u64;
    let mut cuts: Vec<Vec<u8>> = Vec::new();
    let mut acc = 0;
    for (key, size) in &points {
        if acc >= step * (cuts.len() as u64 + 1) && cuts.last() != Some(key) && cuts.len() + 1 < wanted {
            cuts.push(key.clone());
        }
        acc += size;
    }
    let first = points.first().map(|p| p.0.clone());
    cuts.retain(|k| Some(k) != first.as_ref());
    let mut ranges = Vec::new();
    let mut start: Option<Vec<u8>> = None;
    for cut in cuts {
        ranges.push((start.take(), Some(cut.clone())));
        start = Some(cut);
    }
    ranges.push((start, None));
    ranges
}

/// Stops an iterator at the first entry whose user key is `>= end` in
/// `cmp`'s order.
struct BoundedIterator<I> {
    inner: I,
    end: Option<Vec<u8>>,
    cmp: UserComparator,
}

impl<I: InternalIterator> InternalIterator for BoundedIterator<I> {
    fn valid(&self) -> bool {
        self.inner.valid() && self.end.as_ref().is_none_or(|e| self.cmp.lt(user_key(self.inner.key()), e))
    }
    fn seek_to_first(&mut self) {
        self.inner.seek_to_first()
    }
    fn seek_to_last(&mut self) {
        self.inner.seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) {
        self.inner.seek(target)
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.inner.seek_for_prev(target)
    }
    fn next(&mut self) {
        self.inner.next()
    }
    fn prev(&mut self) {
        self.inner.prev()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn status(&self) -> Result<()> {
        self.inner.status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compaction::CompactionReason;

    fn file(number: u64, lo: &str, hi: &str, size: u64) -> Arc<FileMetaData> {
        Arc::new(crate::version::test_file(number, lo, hi, size, 1))
    }

    fn compaction(inputs: Vec<Arc<FileMetaData>>, outputs: Vec<Arc<FileMetaData>>) -> Compaction {
        Compaction {
            level: 0,
            output_level: 1,
            inputs,
            output_inputs: outputs,
            middle_inputs: Vec::new(),
            grandparents: Vec::new(),
            trivial_move: false,
            bottommost: true,
            target_file_size: 100,
            compression: crate::CompressionType::None,
            reason: CompactionReason::L0FileCount,
        }
    }

    /// L0 files spanning the key space weigh where the output level's
    /// bytes are, not at their smallest key: two ranges split the work in
    /// half. (Before, the cut fell at "g": a fifth of the output level and
    /// most of L0 in the second range.)
    #[test]
    fn l0_inputs_spread_their_bytes_over_the_output_levels_files() {
        let c = compaction(
            vec![file(1, "a", "z", 400), file(2, "c", "q", 400)],
            vec![file(3, "a", "f", 300), file(4, "g", "m", 300), file(5, "n", "t", 300), file(6, "u", "z", 300)],
        );
        let ranges = subcompaction_ranges(&c, 2, &UserComparator::BYTEWISE);
        assert_eq!(ranges, vec![(None, Some(b"n".to_vec())), (Some(b"n".to_vec()), None)]);
    }

    #[test]
    fn subcompaction_ranges_cover_everything_once_in_order() {
        let c = compaction(
            vec![file(1, "a", "z", 400), file(2, "c", "q", 400)],
            vec![file(3, "a", "f", 300), file(4, "g", "m", 300), file(5, "n", "t", 300), file(6, "u", "z", 300)],
        );
        let ranges = subcompaction_ranges(&c, 4, &UserComparator::BYTEWISE);
        assert!(ranges.len() > 1 && ranges.len() <= 4, "{ranges:?}");
        assert_eq!(ranges.first().unwrap().0, None);
        assert_eq!(ranges.last().unwrap().1, None);
        for pair in ranges.windows(2) {
            assert_eq!(pair[0].1, pair[1].0, "ranges must be contiguous");
            assert!(pair[0].0.as_ref().is_none_or(|s| Some(s) < pair[0].1.as_ref()));
        }
        assert_eq!(subcompaction_ranges(&c, 1, &UserComparator::BYTEWISE), vec![(None, None)]);
        // Too little data for more than one target file: no split.
        let small = compaction(vec![file(1, "a", "b", 10)], vec![file(2, "a", "c", 10)]);
        assert_eq!(subcompaction_ranges(&small, 4, &UserComparator::BYTEWISE).len(), 1);
    }
}
