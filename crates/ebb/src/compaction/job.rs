//! The merge primitive shared by flushes and compactions: read one sorted
//! stream of internal entries, drop what no reader can see, and write the rest
//! into SSTs cut at a target size.
//!
//! Dropping rules (LevelDB `DoCompactionWork`):
//! 1. An entry is hidden, and dropped, when a newer entry of the same user key
//!    is visible to the oldest live snapshot (`smallest_snapshot`).
//! 2. A tombstone is dropped when it is visible to the oldest snapshot and the
//!    output is bottommost (no deeper level holds the key's range), so nothing
//!    older can reappear.
//!
//! Output files are cut only between user keys, so files of one level never
//! share a user key (the version's invariant), and also before the output
//! would overlap more than 10 target sizes of grandparent bytes.
//!
//! Blob files (docs/blob.md): with [`BlobSettings::min_blob_size`] set, a
//! value kept of at least that size is written to a blob file and the output
//! holds a blob index for it instead (kind `BlobIndex`); blob files are cut
//! at `blob_file_size` and synced before the job returns. With garbage
//! collection (`BlobSettings::gc`), a blob index kept that points into a
//! blob file numbered below the cutoff has its blob read and written again
//! (into a new blob file, or inline when it no longer qualifies). Every blob
//! index read is counted against its file, and every one written out too:
//! the difference is the garbage the job found ([`JobOutput::blob_garbage`]),
//! which the version edit records, so a blob file's garbage reaches its
//! count exactly when no table refers to it any more.
//!
//! Compaction filters (docs/data_model.md): with [`JobContext::filter`] set,
//! the newest version of each user key the job reads is given to the filter
//! when it is a value (kind `Value`, or a blob index whose blob is read
//! back) that no live snapshot can see (its sequence is above the newest
//! snapshot's). The filter keeps it, changes
//! its value, turns it into a tombstone at the same sequence (so older
//! versions stay hidden; the tombstone is then dropped where tombstones
//! are), or removes it and drops the keys after it up to a user key, where
//! no snapshot sees them.
//!
//! A cancelled or failed job deletes every file it created.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::covered::Covered;
pub use super::operands::MergeSettings;
use super::operands::Operands;
use crate::blob::{BlobFetcher, BlobFileBuilder, BlobIndex, FinishedBlobFile};
use crate::compaction_filter::{CompactionFilter, Decision};
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{make_internal_key, parse_internal_key, user_key, SequenceNumber, ValueKind};
use crate::options::CompressionType;
use crate::range_del::{successor, FragmentedTombstones, RangeTombstone};
use crate::sst::{TableBuilder, TableBuilderOptions};
use crate::version::{filename, FileMetaData};

/// How a merge treats values and blob indexes (module documentation).
#[derive(Clone, Copy)]
pub struct BlobSettings<'a> {
    /// Values kept of at least this many bytes go to blob files; `None`
    /// keeps every value in the tables (`enable_blob_files` off).
    pub min_blob_size: Option<u64>,
    /// Cut blob files at about this size.
    pub blob_file_size: u64,
    /// Compression of each blob.
    pub compression: CompressionType,
    /// The column family, recorded in each blob file's header.
    pub column_family: u32,
    /// Garbage collection: blobs in files numbered below the cutoff are
    /// read through the fetcher and written again; `None` leaves every blob
    /// where it is.
    pub gc: Option<(u64, &'a dyn BlobFetcher)>,
    /// Verify blob checksums when reading blobs to relocate them.
    pub verify_checksums: bool,
}

impl BlobSettings<'_> {
    /// Values stay in the tables and blobs where they are.
    pub fn off() -> Self {
        BlobSettings {
            min_blob_size: None,
            blob_file_size: u64::MAX,
            compression: CompressionType::None,
            column_family: 0,
            gc: None,
            verify_checksums: true,
        }
    }
}

/// Everything a merge needs to know besides its input.
pub struct JobContext<'a> {
    /// Database directory.
    pub dir: &'a Path,
    /// Filesystem.
    pub fs: &'a Arc<dyn FileSystem>,
    /// Table format of the outputs.
    pub table_options: TableBuilderOptions,
    /// Cut output files at about this size.
    pub target_file_size: u64,
    /// Files of the level below the output (to bound overlap).
    pub grandparents: &'a [Arc<FileMetaData>],
    /// Where outputs must be cut whatever their size (the family's SST
    /// partitioner); `None` for flushes and families without one.
    pub partitioner: Option<Box<dyn crate::sst_partitioner::SstPartitioner>>,
    /// The oldest sequence number a live snapshot (or the present) reads at.
    pub smallest_snapshot: SequenceNumber,
    /// Drop tombstones (rule 2): the output is bottommost.
    pub drop_tombstones: bool,
    /// Drop hidden versions (rule 1). False for a flush that must keep every version.
    pub drop_hidden: bool,
    /// Checked at output-block boundaries; when set the job stops with `Error::Cancelled`.
    pub cancel: Option<&'a AtomicBool>,
    /// Hands out table file numbers (and registers them as pending outputs).
    pub new_file_number: &'a mut dyn FnMut() -> u64,
    /// Blob files: what goes into them, what is relocated.
    pub blob: BlobSettings<'a>,
    /// Hands out blob file numbers (and registers them as pending outputs).
    pub new_blob_file_number: &'a mut dyn FnMut() -> u64,
    /// Called with the bytes of each finished output block, for rate limiting and pacing.
    pub on_bytes: &'a mut dyn FnMut(u64),
    /// Ask the OS to write outputs back every this many bytes (`bytes_per_sync`); 0 never.
    pub bytes_per_sync: u64,
    /// The compaction filter, if any (module documentation).
    pub filter: Option<FilterSettings<'a>>,
    /// Combines merge operands (compaction/operands.rs); `None` keeps them
    /// as they are (the family has no merge operator).
    pub merge: Option<MergeSettings<'a>>,
    /// The range tombstones of the inputs (module documentation, "Range
    /// tombstones"); `None` when they have none.
    pub range_dels: Option<&'a FragmentedTombstones>,
    /// The live snapshots when the job started, ascending.
    pub snapshots: &'a [SequenceNumber],
    /// The family's full_history_ts_low (0: none): with timestamps, of a
    /// key's versions below it only the newest is kept (docs/timestamps.md).
    pub full_history_ts_low: u64,
}

/// A compaction filter and what decides which versions it is asked about.
#[derive(Clone, Copy)]
pub struct FilterSettings<'a> {
    /// The filter.
    pub filter: &'a dyn CompactionFilter,
    /// The newest live snapshot: versions at or below it may be what a
    /// snapshot reads and are never filtered. `None` without snapshots.
    pub newest_snapshot: Option<SequenceNumber>,
    /// The level the filter is told the compaction starts at.
    pub level: usize,
    /// Reads a value kept in a blob file back for the filter, as RocksDB
    /// does; `None` leaves such values unasked.
    pub blobs: Option<&'a dyn BlobFetcher>,
}

impl FilterSettings<'_> {
    /// True when no live snapshot can read the version at `seq`.
    pub(crate) fn unprotected(&self, seq: SequenceNumber) -> bool {
        self.newest_snapshot.is_none_or(|s| seq > s)
    }
}

/// What a merge produced.
#[derive(Debug, Default)]
pub struct JobOutput {
    /// The new files.
    pub files: Vec<FileMetaData>,
    /// Entries read.
    pub keys_in: u64,
    /// Entries dropped.
    pub keys_dropped: u64,
    /// Bytes written, to tables and blob files.
    pub bytes_written: u64,
    /// The blob files written, synced.
    pub blob_files: Vec<FinishedBlobFile>,
    /// Per blob file the input referred to: the blobs (count, record bytes)
    /// the output no longer refers to.
    pub blob_garbage: BTreeMap<u64, (u64, u64)>,
    /// Blobs relocated by garbage collection: count, value bytes.
    pub blobs_relocated: (u64, u64),
}

struct OpenOutput {
    number: u64,
    builder: TableBuilder,
    smallest: Vec<u8>,
    largest: Vec<u8>,
    smallest_seq: SequenceNumber,
    largest_seq: SequenceNumber,
    reported: u64,
    /// The oldest blob file an entry refers to (0: none yet).
    oldest_blob_file: u64,
    /// The last user key added (an output is cut only between user keys).
    last_user_key: Vec<u8>,
}

/// Blob references read and written per blob file: (count, record bytes).
type BlobFlow = BTreeMap<u64, (u64, u64)>;

fn add_flow(flow: &mut BlobFlow, number: u64, bytes: u64) {
    add_flows(flow, [(number, (1, bytes))]);
}

/// Adds each blob file's records and bytes in `from` to its totals in `into`.
pub(crate) fn add_flows(into: &mut BTreeMap<u64, (u64, u64)>, from: impl IntoIterator<Item = (u64, (u64, u64))>) {
    for (number, (count, bytes)) in from {
        let e = into.entry(number).or_default();
        e.0 += count;
        e.1 += bytes;
    }
}

/// The blob file being written, and what the job wrote to blob files.
#[derive(Default)]
struct BlobOutputs {
    current: Option<BlobFileBuilder>,
    finished: Vec<FinishedBlobFile>,
    reported: u64,
}

/// Runs the merge of `input` (already positioned with `seek_to_first`).
pub fn run(input: &mut dyn InternalIterator, ctx: JobContext<'_>) -> Result<JobOutput> {
    let mut out = JobOutput::default();
    let mut created: Vec<u64> = Vec::new();
    let mut created_blobs: Vec<u64> = Vec::new();
    let result = merge(input, ctx.dir, ctx, &mut out, &mut created, &mut created_blobs);
    match result {
        Ok(()) => Ok(out),
        Err((e, dir, fs)) => {
            for n in created {
                let _ = fs.remove_file(&filename::table_file(&dir, n));
            }
            for n in created_blobs {
                let _ = fs.remove_file(&filename::blob_file(&dir, n));
            }
            out.files.clear();
            out.blob_files.clear();
            Err(e)
        }
    }
}

type MergeError = (Error, std::path::PathBuf, Arc<dyn FileSystem>);

fn merge(
    input: &mut dyn InternalIterator,
    dir: &Path,
    mut ctx: JobContext<'_>,
    out: &mut JobOutput,
    created: &mut Vec<u64>,
    created_blobs: &mut Vec<u64>,
) -> std::result::Result<(), MergeError> {
    let fs = Arc::clone(ctx.fs);
    let fail = |e: Error| (e, dir.to_path_buf(), Arc::clone(&fs));
    // With timestamps (docs/timestamps.md) each version of a key is kept
    // under its own timestamp: a tombstone is never dropped (it hides the
    // key's versions at older timestamps, which compare as other keys
    // here), nor a single delete paired away, nor operands merged as if
    // nothing were below them.
    let timestamps = ctx.table_options.comparator.timestamp_size() > 0;
    let drop_tombstones = ctx.drop_tombstones && !timestamps;
    let history_low = if timestamps { ctx.full_history_ts_low } else { 0 };
    let pairs_horizon = (ctx.drop_hidden && !timestamps).then_some(ctx.smallest_snapshot);
    let mut pairs = SingleDeletePairs::new(input, pairs_horizon);
    let mut covered = Covered::new(&mut pairs, ctx.range_dels, ctx.snapshots);
    let mut operands = Operands::new(&mut covered, ctx.merge, ctx.filter, ctx.snapshots, drop_tombstones);
    let input = &mut operands;
    // Range tombstones the outputs keep: at the bottom, those every reader
    // sees have deleted all they cover here (`Covered`) and go.
    let cmp = ctx.table_options.comparator.clone();
    let mut range_dels = OutputTombstones::new(
        cmp.clone(),
        ctx.range_dels
            .map(|t| t.tombstones().filter(|t| !(ctx.drop_tombstones && t.seq <= ctx.smallest_snapshot)).collect())
            .unwrap_or_default(),
    );
    let mut blob_in = BlobFlow::new();
    let mut blob_out = BlobFlow::new();
    let mut blobs = BlobOutputs::default();
    let min_blob_size = ctx.blob.min_blob_size;
    let to_blob = |len: usize| min_blob_size.is_some_and(|min| len as u64 >= min);
    let mut current: Option<OpenOutput> = None;
    let mut current_user_key: Option<Vec<u8>> = None;
    let mut last_seq_for_key = SequenceNumber::MAX;
    let grandparent_limit = ctx.target_file_size.saturating_mul(10);
    let mut grandparent_index = 0usize;
    let mut overlapped_bytes = 0u64;
    let mut seen_key = false;
    let block = ctx.table_options.block_size.max(1) as u64;
    // The end of a range a filter's `RemoveAndSkipUntil` drops (exclusive).
    let mut skip_until: Option<Vec<u8>> = None;

    while input.valid() {
        let key = input.key();
        let Some(parsed) = parse_internal_key(key) else {
            return Err(fail(Error::corruption("compaction input", 0, "unparsable internal key")));
        };
        out.keys_in += 1;
        // With timestamps, every timestamp is a key of its own, except that
        // below full_history_ts_low a key's versions are one run, of which
        // only the newest is needed (no read is at a timestamp below it):
        // the older ones are hidden by it (RocksDB's compaction iterator).
        let below_low = |k: &[u8]| crate::comparator::split_timestamp(k).1 < history_low;
        // Outputs are cut between keys (`new_range_key`), never between
        // versions of one key at two timestamps (a level's files never
        // split a key's versions).
        let (new_user_key, new_range_key) = match current_user_key.as_deref() {
            Some(c) if c == parsed.user_key => (false, false),
            Some(c) if timestamps && cmp.same_key(c, parsed.user_key) => {
                (!(below_low(c) && below_low(parsed.user_key)), false)
            }
            _ => (true, true),
        };
        if new_range_key {
            // Advance over grandparents that end before this key, counting overlap.
            while grandparent_index < ctx.grandparents.len()
                && cmp.lt(ctx.grandparents[grandparent_index].largest_user_key(), parsed.user_key)
            {
                if seen_key {
                    overlapped_bytes += ctx.grandparents[grandparent_index].file_size;
                }
                grandparent_index += 1;
            }
            seen_key = true;
            // Cut the output between user keys when it is big enough.
            let partition =
                |o: &OpenOutput, partitioner: &mut Option<Box<dyn crate::sst_partitioner::SstPartitioner>>| {
                    partitioner.as_mut().is_some_and(|p| {
                        let request = crate::sst_partitioner::PartitionerRequest {
                            prev_user_key: &o.last_user_key,
                            current_user_key: parsed.user_key,
                            current_output_file_size: o.builder.estimated_file_size(),
                        };
                        p.should_partition(&request) == crate::sst_partitioner::PartitionerResult::Required
                    })
                };
            let cut = match current.as_ref() {
                Some(o) => {
                    (o.builder.estimated_file_size() >= ctx.target_file_size
                        || overlapped_bytes > grandparent_limit
                        || partition(o, &mut ctx.partitioner))
                        && range_dels.can_cut_after(&o.last_user_key)
                }
                None => false,
            };
            if cut {
                if let Some(mut o) = current.take() {
                    range_dels.add_to(&mut o, true);
                    finish_output(o, out, &mut ctx).map_err(fail)?;
                }
                overlapped_bytes = 0;
            }
        }
        if new_user_key {
            current_user_key = Some(parsed.user_key.to_vec());
            last_seq_for_key = SequenceNumber::MAX;
            if skip_until.as_deref().is_some_and(|until| cmp.le(until, parsed.user_key)) {
                skip_until = None;
            }
        }
        // Every blob index read counts against its file, kept or not.
        let blob_index = match parsed.kind {
            ValueKind::BlobIndex => {
                let index = BlobIndex::decode(input.value()).map_err(|r| {
                    let shown = String::from_utf8_lossy(parsed.user_key);
                    fail(Error::corruption("compaction input", 0, format!("blob index of key {shown:?}: {r}")))
                })?;
                add_flow(&mut blob_in, index.file_number, index.record_len(parsed.user_key));
                Some(index)
            }
            _ => None,
        };
        // What the compaction filter makes of the key's newest version:
        // `removed` (a tombstone at its sequence) or a `new_value`; and
        // `skipped`, inside a range a `RemoveAndSkipUntil` drops.
        let (mut removed, mut new_value, mut skipped) = (false, None, false);
        if let Some(f) = ctx.filter.filter(|f| f.unprotected(parsed.seq)) {
            if skip_until.is_some() {
                // Dropped unasked, every version no snapshot can read.
                skipped = true;
            } else if new_user_key {
                let decision = match (parsed.kind, blob_index, f.blobs) {
                    (ValueKind::Value, _, _) => Some(f.filter.filter(f.level, parsed.user_key, input.value())),
                    // A value kept in a blob file is read back to be asked about.
                    (ValueKind::BlobIndex, Some(index), Some(blobs)) => {
                        let value = blobs.fetch(parsed.user_key, &index, ctx.blob.verify_checksums).map_err(fail)?;
                        Some(f.filter.filter(f.level, parsed.user_key, &value))
                    }
                    _ => None,
                };
                match decision {
                    Some(Decision::Remove) => removed = true,
                    Some(Decision::ChangeValue(v)) => new_value = Some(v),
                    // A bound at or before the key keeps it.
                    Some(Decision::RemoveAndSkipUntil(until)) if cmp.lt(parsed.user_key, &until) => {
                        removed = true;
                        skip_until = Some(until);
                    }
                    _ => {}
                }
            }
        }
        // A single deletion is never dropped as hidden by a newer version:
        // it may be all that hides an older put once a newer put goes with
        // its own single deletion (put 1, single delete 2, put 3: a flush of
        // 3 and 2 keeps 2, or a later merge of single delete 4 with put 3
        // would bring put 1 back). RocksDB's compaction iterator looks at
        // single deletions before hidden entries for the same reason.
        let hidden =
            ctx.drop_hidden && last_seq_for_key <= ctx.smallest_snapshot && parsed.kind != ValueKind::SingleDeletion;
        // A tombstone below full_history_ts_low hides every older version of
        // its key (its run's), so at the bottom it goes with them.
        let droppable = drop_tombstones || (ctx.drop_tombstones && history_low > 0 && below_low(parsed.user_key));
        let dead_tombstone = droppable && (parsed.kind.is_deletion() || removed) && parsed.seq <= ctx.smallest_snapshot;
        // A merge operand hides nothing: it applies to what is below it.
        if parsed.kind != ValueKind::Merge {
            last_seq_for_key = parsed.seq;
        }
        if hidden || dead_tombstone || skipped {
            out.keys_dropped += 1;
            input.next();
            continue;
        }
        // The value as the output holds it, when it is not the input's:
        // moved into a blob file, or relocated out of an old one.
        let relocated = match (blob_index, ctx.blob.gc) {
            _ if removed => None,
            _ if new_value.is_some() => new_value,
            (Some(index), Some((cutoff, fetcher))) if index.file_number < cutoff => {
                let v = fetcher.fetch(parsed.user_key, &index, ctx.blob.verify_checksums).map_err(fail)?;
                out.blobs_relocated.0 += 1;
                out.blobs_relocated.1 += v.len() as u64;
                Some(v)
            }
            _ => None,
        };
        let changed: Option<(ValueKind, Vec<u8>, u64)> = match (parsed.kind, relocated) {
            _ if removed => Some((ValueKind::Deletion, Vec::new(), 0)),
            (ValueKind::Value, None) if to_blob(input.value().len()) => {
                let index =
                    add_blob(&mut blobs, &mut ctx, dir, created_blobs, parsed.user_key, input.value()).map_err(fail)?;
                Some((ValueKind::BlobIndex, index.encode(), index.file_number))
            }
            (_, Some(v)) if to_blob(v.len()) => {
                let index = add_blob(&mut blobs, &mut ctx, dir, created_blobs, parsed.user_key, &v).map_err(fail)?;
                Some((ValueKind::BlobIndex, index.encode(), index.file_number))
            }
            (_, Some(v)) => Some((ValueKind::Value, v, 0)),
            (_, None) => None,
        };
        // The blob file the output entry refers to; a blob index kept as it
        // is counts for its file (what the job wrote into new blob files is
        // not garbage of anything).
        let refers_to = match (&changed, blob_index) {
            (Some((_, _, number)), _) => *number,
            (None, Some(index)) => {
                add_flow(&mut blob_out, index.file_number, index.record_len(parsed.user_key));
                index.file_number
            }
            (None, None) => 0,
        };
        let changed_key = changed.as_ref().map(|(kind, _, _)| make_internal_key(parsed.user_key, parsed.seq, *kind));
        let (out_key, out_value) = match (&changed_key, &changed) {
            (Some(k), Some((_, v, _))) => (k.as_slice(), v.as_slice()),
            _ => (key, input.value()),
        };
        if current.is_none() {
            current = Some(open_output(&mut ctx, dir, fs.as_ref(), created).map_err(fail)?);
        }
        if let Some(o) = current.as_mut() {
            o.builder.add(out_key, out_value).map_err(fail)?;
            if o.smallest.is_empty() {
                o.smallest = out_key.to_vec();
            }
            o.largest.clear();
            o.largest.extend_from_slice(out_key);
            o.last_user_key.clear();
            o.last_user_key.extend_from_slice(user_key(out_key));
            o.smallest_seq = o.smallest_seq.min(parsed.seq);
            o.largest_seq = o.largest_seq.max(parsed.seq);
            if refers_to != 0 && (o.oldest_blob_file == 0 || refers_to < o.oldest_blob_file) {
                o.oldest_blob_file = refers_to;
            }
            let size = o.builder.estimated_file_size();
            if size >= o.reported + block {
                (ctx.on_bytes)(size - o.reported);
                o.reported = size;
                if ctx.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                    return Err(fail(Error::Cancelled));
                }
            }
        }
        input.next();
    }
    input.status().map_err(fail)?;
    // Range tombstones after the last output's keys, or with no key at all.
    if current.is_none() && range_dels.remaining() {
        current = Some(open_output(&mut ctx, dir, fs.as_ref(), created).map_err(fail)?);
    }
    if let Some(o) = current.as_mut() {
        range_dels.add_to(o, false);
    }
    // Merge operands combined into others.
    out.keys_in += operands.absorbed;
    out.keys_dropped += operands.absorbed;
    drop(operands);
    // Entries range tombstones deleted, and their blobs (garbage now).
    out.keys_in += covered.dropped;
    out.keys_dropped += covered.dropped;
    for (number, bytes) in std::mem::take(&mut covered.dropped_blobs) {
        add_flow(&mut blob_in, number, bytes);
    }
    drop(covered);
    // The single deletions dropped with their puts, and the blob records
    // of those puts (garbage now).
    out.keys_in += pairs.dropped;
    out.keys_dropped += pairs.dropped;
    add_flows(&mut blob_in, std::mem::take(&mut pairs.dropped_blobs));
    if let Some(o) = current.take() {
        finish_output(o, out, &mut ctx).map_err(fail)?;
    }
    // Blob files are synced before the edit that lists the tables referring
    // to them can be written (the caller writes it after this returns).
    finish_blob_file(&mut blobs, &mut ctx).map_err(fail)?;
    for f in &blobs.finished {
        out.bytes_written += f.file_size;
    }
    out.blob_files = std::mem::take(&mut blobs.finished);
    for (number, (count, bytes)) in blob_in {
        let (kept_count, kept_bytes) = blob_out.get(&number).copied().unwrap_or_default();
        if count > kept_count {
            out.blob_garbage.insert(number, (count - kept_count, bytes.saturating_sub(kept_bytes)));
        }
    }
    if !out.files.is_empty() || !out.blob_files.is_empty() {
        kill_point!("dir_sync" => Err(fail(crate::kill_points::injected("dir_sync"))));
        fs.sync_dir(dir).map_err(fail)?;
    }
    Ok(())
}

/// The merge's input without the single deletions that sit right above
/// the put they delete: a single deletion at or below the smallest
/// snapshot (so no snapshot lies between it and the put) followed by a put
/// of the same user key is dropped with that put (RocksDB's
/// `CompactionIterator`, which drops both when they meet in one snapshot
/// stripe). Older entries of the key then read as if the pair had never
/// been written: a deletion below stays, and still hides what it hid.
/// Forward only, as the merge reads; a seek starts over.
struct SingleDeletePairs<'a> {
    inner: &'a mut dyn InternalIterator,
    /// Pairs are dropped at or below this sequence; `None`, never
    /// (`drop_hidden` off: every version is kept).
    smallest_snapshot: Option<SequenceNumber>,
    /// A single deletion read from `inner`, which has moved past it: what
    /// follows it is not its put, so it is the current entry.
    held: Option<(Vec<u8>, Vec<u8>)>,
    /// Entries dropped in pairs.
    dropped: u64,
    /// Blob records of the dropped puts, per blob file.
    dropped_blobs: BlobFlow,
}

impl<'a> SingleDeletePairs<'a> {
    fn new(inner: &'a mut dyn InternalIterator, smallest_snapshot: Option<SequenceNumber>) -> Self {
        let mut pairs =
            SingleDeletePairs { inner, smallest_snapshot, held: None, dropped: 0, dropped_blobs: BlobFlow::new() };
        pairs.settle();
        pairs
    }

    /// With `inner` on a new entry: drops the pairs that start there, and
    /// holds a single deletion that starts none.
    fn settle(&mut self) {
        let Some(horizon) = self.smallest_snapshot else { return };
        while self.inner.valid() {
            let Some(p) = parse_internal_key(self.inner.key()) else { return };
            if p.kind != ValueKind::SingleDeletion || p.seq > horizon {
                return;
            }
            let key = self.inner.key().to_vec();
            let value = self.inner.value().to_vec();
            self.inner.next();
            if let Some(garbage) = self.version_below(user_key(&key), false) {
                if let Some((number, bytes)) = garbage {
                    add_flow(&mut self.dropped_blobs, number, bytes);
                }
                self.dropped += 2;
                self.inner.next();
                // What the single deletion hid below its put goes with the
                // pair: older values and merge operands of the key (a put
                // overwritten before the single deletion, against its
                // contract). Reads before the merge found nothing under the
                // single deletion; kept, they came back after a flush.
                // RocksDB drops them as hidden in the single deletion's
                // snapshot stripe. A deletion below stays, as the next
                // entry, and still hides what it hid.
                while let Some(garbage) = self.version_below(user_key(&key), true) {
                    if let Some((number, bytes)) = garbage {
                        add_flow(&mut self.dropped_blobs, number, bytes);
                    }
                    self.dropped += 1;
                    self.inner.next();
                }
                continue;
            }
            self.held = Some((key, value));
            return;
        }
    }

    /// Whether `inner` is on a put of `user_key`, or with `operands` also
    /// on a merge operand of it (with the blob record a put refers to, if
    /// any); never on a deletion. A blob index that does not decode is left
    /// to the merge, which reports it.
    fn version_below(&self, key: &[u8], operands: bool) -> Option<Option<(u64, u64)>> {
        if !self.inner.valid() {
            return None;
        }
        let p = parse_internal_key(self.inner.key())?;
        if p.user_key != key {
            return None;
        }
        match p.kind {
            ValueKind::Value | ValueKind::WideColumnEntity => Some(None),
            ValueKind::Merge if operands => Some(None),
            ValueKind::BlobIndex => {
                let index = BlobIndex::decode(self.inner.value()).ok()?;
                Some(Some((index.file_number, index.record_len(p.user_key))))
            }
            _ => None,
        }
    }
}

impl InternalIterator for SingleDeletePairs<'_> {
    fn valid(&self) -> bool {
        self.held.is_some() || self.inner.valid()
    }
    fn seek_to_first(&mut self) {
        self.held = None;
        self.inner.seek_to_first();
        self.settle();
    }
    fn seek_to_last(&mut self) {
        self.held = None;
        self.inner.seek_to_last();
    }
    fn seek(&mut self, target: &[u8]) {
        self.held = None;
        self.inner.seek(target);
        self.settle();
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.held = None;
        self.inner.seek_for_prev(target);
    }
    fn next(&mut self) {
        if self.held.take().is_none() {
            self.inner.next();
        }
        self.settle();
    }
    fn prev(&mut self) {
        // Not used by the merge; a held entry is behind `inner` already.
        if self.held.take().is_none() {
            self.inner.prev();
        }
    }
    fn key(&self) -> &[u8] {
        match &self.held {
            Some((k, _)) => k,
            None => self.inner.key(),
        }
    }
    fn value(&self) -> &[u8] {
        match &self.held {
            Some((_, v)) => v,
            None => self.inner.value(),
        }
    }
    fn status(&self) -> Result<()> {
        self.inner.status()
    }
}

/// Writes `value` of `key` into the blob file being written, starting one
/// first if none is; cuts it once it reaches `blob_file_size`.
fn add_blob(
    blobs: &mut BlobOutputs,
    ctx: &mut JobContext<'_>,
    dir: &Path,
    created_blobs: &mut Vec<u64>,
    key: &[u8],
    value: &[u8],
) -> Result<BlobIndex> {
    if blobs.current.is_none() {
        let number = (ctx.new_blob_file_number)();
        created_blobs.push(number);
        let path = filename::blob_file(dir, number);
        let file = crate::fs::WriteBehindFile::wrap(ctx.fs.new_writable(&path)?, ctx.bytes_per_sync);
        let name = path.display().to_string();
        blobs.current = Some(BlobFileBuilder::new(file, number, name, ctx.blob.column_family, ctx.blob.compression)?);
        blobs.reported = 0;
    }
    let Some(b) = blobs.current.as_mut() else { unreachable!("a blob file was just started") };
    let index = b.add(key, value)?;
    let size = b.file_size();
    (ctx.on_bytes)(size - blobs.reported);
    blobs.reported = size;
    if size >= ctx.blob.blob_file_size {
        finish_blob_file(blobs, ctx)?;
    }
    Ok(index)
}

/// Finishes (footer, sync) the blob file being written, if any.
fn finish_blob_file(blobs: &mut BlobOutputs, ctx: &mut JobContext<'_>) -> Result<()> {
    if let Some(b) = blobs.current.take() {
        let done = b.finish()?;
        (ctx.on_bytes)(done.file_size.saturating_sub(blobs.reported));
        blobs.finished.push(done);
    }
    Ok(())
}

/// Starts an output table.
fn open_output(
    ctx: &mut JobContext<'_>,
    dir: &Path,
    fs: &dyn FileSystem,
    created: &mut Vec<u64>,
) -> Result<OpenOutput> {
    let number = (ctx.new_file_number)();
    created.push(number);
    let path = filename::table_file(dir, number);
    let file = crate::fs::WriteBehindFile::wrap(fs.new_writable(&path)?, ctx.bytes_per_sync);
    Ok(OpenOutput {
        number,
        builder: TableBuilder::new(file, ctx.table_options.clone(), path.display().to_string()),
        smallest: Vec::new(),
        largest: Vec::new(),
        smallest_seq: SequenceNumber::MAX,
        largest_seq: 0,
        reported: 0,
        oldest_blob_file: 0,
        last_user_key: Vec::new(),
    })
}

/// The range tombstones a job writes, handed out to its outputs in key
/// order (module documentation, "Range tombstones").
///
/// In the bytewise order an output's share is the tombstones clipped at the
/// successor of its last user key (that key followed by a zero byte). Other
/// orders have no successor to name, so tombstones are not clipped: an
/// output is cut only where no tombstone reaches past its last key
/// ([`OutputTombstones::can_cut_after`]), and takes the tombstones that
/// start at or before it whole.
struct OutputTombstones {
    list: Vec<RangeTombstone>,
    cmp: UserComparator,
    /// Where the next output's share starts: the successor of the previous
    /// output's last user key (`None` before the first output); in other
    /// orders, the previous output's last user key (exclusive).
    lower: Option<Vec<u8>>,
}

impl OutputTombstones {
    fn new(cmp: UserComparator, list: Vec<RangeTombstone>) -> Self {
        OutputTombstones { list, cmp, lower: None }
    }

    /// Whether some tombstone reaches past where the outputs so far end.
    fn remaining(&self) -> bool {
        self.list.iter().any(|t| self.lower.as_ref().is_none_or(|l| self.cmp.lt(l, &t.end)))
    }

    /// Whether an output ending at `last` may be cut there: always in the
    /// bytewise order; in others, only when no tombstone covering `last`
    /// reaches past it (it would need clipping at a successor).
    fn can_cut_after(&self, last: &[u8]) -> bool {
        self.cmp.is_bytewise() || !self.list.iter().any(|t| self.cmp.le(&t.start, last) && self.cmp.lt(last, &t.end))
    }

    /// Adds to `o` its share: the tombstones clipped to `[lower, upper)`,
    /// where `upper` is the successor of its last user key when `cut`
    /// (another output follows) and unbounded otherwise (in orders other
    /// than bytewise, the tombstones starting after `lower` and, when `cut`,
    /// at or before its last key, whole); then widens its key and sequence
    /// range to take them in.
    fn add_to(&mut self, o: &mut OpenOutput, cut: bool) {
        let share = if self.cmp.is_bytewise() { self.clipped_share(o, cut) } else { self.whole_share(o, cut) };
        if share.is_empty() {
            return;
        }
        let fragments = FragmentedTombstones::with_comparator(&self.cmp, &share);
        let mut seqs = (o.smallest_seq, o.largest_seq);
        fragments.extend_file_bounds(&mut o.smallest, &mut o.largest, &mut seqs);
        (o.smallest_seq, o.largest_seq) = seqs;
        for t in share {
            o.builder.add_range_deletion(t);
        }
    }

    /// The bytewise share of [`OutputTombstones::add_to`].
    fn clipped_share(&mut self, o: &OpenOutput, cut: bool) -> Vec<RangeTombstone> {
        let upper = cut.then(|| successor(&o.last_user_key));
        let mut share = Vec::new();
        for t in &self.list {
            let start = match &self.lower {
                Some(l) if *l > t.start => l.clone(),
                _ => t.start.clone(),
            };
            let end = match &upper {
                Some(u) if *u < t.end => u.clone(),
                _ => t.end.clone(),
            };
            if start < end {
                share.push(RangeTombstone { start, end, seq: t.seq });
            }
        }
        self.lower = upper;
        share
    }

    /// The share of [`OutputTombstones::add_to`] in other orders: whole
    /// tombstones, which `can_cut_after` kept from crossing a cut.
    fn whole_share(&mut self, o: &OpenOutput, cut: bool) -> Vec<RangeTombstone> {
        let cmp = &self.cmp;
        let after_lower = |t: &RangeTombstone| self.lower.as_ref().is_none_or(|l| cmp.lt(l, &t.start));
        let share = self
            .list
            .iter()
            .filter(|t| after_lower(t) && (!cut || cmp.le(&t.start, &o.last_user_key)))
            .cloned()
            .collect();
        if cut {
            self.lower = Some(o.last_user_key.clone());
        }
        share
    }
}

fn finish_output(o: OpenOutput, out: &mut JobOutput, ctx: &mut JobContext<'_>) -> Result<()> {
    let num_entries = o.builder.num_entries();
    let num_range_deletions = o.builder.num_range_deletions() as u64;
    let props = o.builder.finish()?;
    (ctx.on_bytes)(props.file_size.saturating_sub(o.reported));
    out.bytes_written += props.file_size;
    debug_assert!(ctx.table_options.comparator.le(user_key(&o.smallest), user_key(&o.largest)));
    out.files.push(FileMetaData {
        number: o.number,
        file_size: props.file_size,
        smallest: o.smallest,
        largest: o.largest,
        smallest_seq: o.smallest_seq,
        largest_seq: o.largest_seq,
        num_entries,
        num_deletions: props.num_deletions,
        oldest_blob_file: o.oldest_blob_file,
        num_range_deletions,
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;
    use crate::iter::VecIterator;
    use crate::key::make_internal_key;
    use crate::sst::{ReadSettings, Table};
    use ValueKind::{BlobIndex as B, Deletion as D, SingleDeletion as S, Value as V};

    fn entry(key: &str, seq: u64, kind: ValueKind) -> (Vec<u8>, Vec<u8>) {
        let value = match kind {
            V => format!("{key}{seq}").into_bytes(),
            B => BlobIndex { file_number: 9, offset: 100, size: 10, compression: CompressionType::None }.encode(),
            _ => Vec::new(),
        };
        (make_internal_key(key.as_bytes(), seq, kind), value)
    }

    /// `(key, seq, kind)` of what the pairs filter passes on, and how many
    /// entries it dropped.
    fn filtered(entries: &[(&str, u64, ValueKind)], horizon: Option<u64>) -> (Vec<(String, u64, ValueKind)>, u64) {
        let mut inner = VecIterator::new(entries.iter().map(|(k, s, kind)| entry(k, *s, *kind)).collect());
        inner.seek_to_first();
        let mut it = SingleDeletePairs::new(&mut inner, horizon);
        let mut seen = Vec::new();
        while it.valid() {
            let p = parse_internal_key(it.key()).unwrap();
            seen.push((String::from_utf8(p.user_key.to_vec()).unwrap(), p.seq, p.kind));
            it.next();
        }
        (seen, it.dropped)
    }

    fn owned(entries: &[(&str, u64, ValueKind)]) -> Vec<(String, u64, ValueKind)> {
        entries.iter().map(|(k, s, kind)| (k.to_string(), *s, *kind)).collect()
    }

    #[test]
    fn a_single_delete_right_above_its_put_goes_with_it() {
        let (seen, dropped) = filtered(&[("a", 5, V), ("k", 4, S), ("k", 3, V), ("z", 1, V)], Some(10));
        assert_eq!(seen, owned(&[("a", 5, V), ("z", 1, V)]));
        assert_eq!(dropped, 2);
        // Over a blob index too, whose record becomes garbage.
        let mut inner = VecIterator::new(vec![entry("k", 4, S), entry("k", 3, B)]);
        inner.seek_to_first();
        let it = SingleDeletePairs::new(&mut inner, Some(10));
        assert!(!it.valid());
        assert_eq!(it.dropped_blobs.get(&9).map(|g| g.0), Some(1));
    }

    #[test]
    fn a_snapshot_between_or_another_kind_below_keeps_the_single_delete() {
        // The single delete is above the smallest snapshot: a snapshot may
        // lie between it and the put, which it still reads.
        let all = [("k", 4, S), ("k", 3, V)];
        assert_eq!(filtered(&all, Some(3)), (owned(&all), 0));
        // Nothing is dropped with `drop_hidden` off.
        assert_eq!(filtered(&all, None), (owned(&all), 0));
        // Below it a deletion, another single delete, another key, nothing.
        for below in [vec![("k", 3, D)], vec![("k", 3, S)], vec![("l", 3, V)], vec![]] {
            let mut entries = vec![("k", 4, S)];
            entries.extend(below);
            assert_eq!(filtered(&entries, Some(10)), (owned(&entries), 0), "{entries:?}");
        }
    }

    #[test]
    fn pairs_in_a_row_go_and_what_is_below_them_stays() {
        let (seen, dropped) = filtered(&[("k", 8, S), ("k", 7, V), ("k", 6, S), ("k", 5, V), ("k", 4, S)], Some(10));
        assert_eq!((seen, dropped), (owned(&[("k", 4, S)]), 4));
        let (seen, _) = filtered(&[("k", 4, S), ("k", 3, V), ("k", 2, D), ("k", 1, V)], Some(10));
        assert_eq!(seen, owned(&[("k", 2, D), ("k", 1, V)]));
    }

    /// The merge over `entries` into a table on a fresh filesystem: what the
    /// table holds, as `(key, seq, kind)`.
    fn merged(
        entries: &[(&str, u64, ValueKind)],
        smallest_snapshot: u64,
        bottom: bool,
    ) -> Vec<(String, u64, ValueKind)> {
        merged_filtered(entries, smallest_snapshot, bottom, None)
            .into_iter()
            .map(|(k, s, kind, _)| (k, s, kind))
            .collect()
    }

    /// [`merged`] through `filter`, with the values.
    fn merged_filtered(
        entries: &[(&str, u64, ValueKind)],
        smallest_snapshot: u64,
        bottom: bool,
        filter: Option<FilterSettings<'_>>,
    ) -> Vec<(String, u64, ValueKind, String)> {
        let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        let mut input = VecIterator::new(entries.iter().map(|(k, s, kind)| entry(k, *s, *kind)).collect());
        input.seek_to_first();
        let mut number = 10;
        let mut new_number = || {
            number += 1;
            number
        };
        let mut blob_number = || 99;
        let mut on_bytes = |_| {};
        let out = run(
            &mut input,
            JobContext {
                dir,
                fs: &fs,
                table_options: TableBuilderOptions::default(),
                target_file_size: u64::MAX,
                grandparents: &[],
                partitioner: None,
                smallest_snapshot,
                drop_tombstones: bottom,
                drop_hidden: true,
                cancel: None,
                new_file_number: &mut new_number,
                blob: BlobSettings::off(),
                new_blob_file_number: &mut blob_number,
                on_bytes: &mut on_bytes,
                bytes_per_sync: 0,
                filter,
                merge: None,
                range_dels: None,
                snapshots: &[],
                full_history_ts_low: 0,
            },
        )
        .unwrap();
        let mut seen = Vec::new();
        for f in &out.files {
            let path = filename::table_file(dir, f.number);
            let file = fs.open_random(&path).unwrap();
            let table = Table::open(file, f.file_size, path.display().to_string(), None).unwrap();
            let mut it = table.iter(ReadSettings::default());
            it.seek_to_first();
            while it.valid() {
                let p = parse_internal_key(it.key()).unwrap();
                let value = String::from_utf8(it.value().to_vec()).unwrap_or_default();
                seen.push((String::from_utf8(p.user_key.to_vec()).unwrap(), p.seq, p.kind, value));
                it.next();
            }
        }
        assert_eq!(out.keys_in, entries.len() as u64);
        assert_eq!(out.keys_in - out.keys_dropped, seen.len() as u64);
        seen
    }

    #[test]
    fn the_merge_drops_pairs_and_keeps_the_deletion_below_them() {
        // The deletion below a dropped pair is the newest entry of its key
        // now: kept (it may hide a put in a level below this compaction),
        // and the put under it hidden.
        let entries = [("a", 9, V), ("k", 4, S), ("k", 3, V), ("k", 2, D), ("k", 1, V)];
        assert_eq!(merged(&entries, 10, false), owned(&[("a", 9, V), ("k", 2, D)]));
        // At the bottom the deletion goes too.
        assert_eq!(merged(&entries, 10, true), owned(&[("a", 9, V)]));
        // A single delete with no put below stays above the bottom and
        // goes at it, as a deletion does.
        assert_eq!(merged(&[("k", 4, S)], 10, false), owned(&[("k", 4, S)]));
        assert!(merged(&[("k", 4, S)], 10, true).is_empty());
        // A snapshot at 3 still reads the put: both stay.
        assert_eq!(merged(&[("k", 4, S), ("k", 3, V)], 3, false), owned(&[("k", 4, S), ("k", 3, V)]));
    }

    #[test]
    fn a_single_delete_under_a_newer_put_is_kept_until_it_meets_its_own_put() {
        // Put 1, single delete 2, put 3, single delete 4, written so that
        // one flush sees 3 and 2, and put 1 and single delete 4 are in
        // other tables. The flush keeps single delete 2 under put 3.
        let flushed = merged(&[("k", 3, V), ("k", 2, S)], 10, false);
        assert_eq!(flushed, owned(&[("k", 3, V), ("k", 2, S)]));
        // The merge of everything: both pairs go, nothing comes back.
        let all = [("k", 4, S), ("k", 3, V), ("k", 2, S), ("k", 1, V)];
        assert!(merged(&all, 10, false).is_empty());
        // Without put 1 in the merge: single delete 2 stays to hide it.
        assert_eq!(merged(&all[..3], 10, false), owned(&[("k", 2, S)]));
    }

    /// Removes keys starting with `r`, doubles values of keys starting with
    /// `c`, and on `s<x>` removes it and skips to `<x>`; counts its calls.
    struct Rules(std::sync::atomic::AtomicUsize);

    impl CompactionFilter for Rules {
        fn name(&self) -> &str {
            "rules"
        }
        fn filter(&self, _level: usize, key: &[u8], value: &[u8]) -> Decision {
            self.0.fetch_add(1, Ordering::Relaxed);
            match key.first() {
                Some(b'r') => Decision::Remove,
                Some(b'c') => Decision::ChangeValue([value, value].concat()),
                Some(b's') => Decision::RemoveAndSkipUntil(key[1..].to_vec()),
                _ => Decision::Keep,
            }
        }
    }

    fn with_rules(
        entries: &[(&str, u64, ValueKind)],
        smallest_snapshot: u64,
        newest_snapshot: Option<u64>,
        bottom: bool,
    ) -> (Vec<(String, u64, ValueKind, String)>, usize) {
        let rules = Rules(Default::default());
        let f = FilterSettings { filter: &rules, newest_snapshot, level: 1, blobs: None };
        let out = merged_filtered(entries, smallest_snapshot, bottom, Some(f));
        (out, rules.0.load(Ordering::Relaxed))
    }

    fn row(k: &str, seq: u64, kind: ValueKind, v: &str) -> (String, u64, ValueKind, String) {
        (k.to_string(), seq, kind, v.to_string())
    }

    #[test]
    fn the_filter_keeps_changes_and_removes_the_newest_value_of_each_key() {
        let entries = [("a", 5, V), ("c", 6, V), ("c", 2, V), ("r", 7, V), ("r", 3, V), ("x", 8, D)];
        // No snapshot: asked once per key about its newest value (not the
        // tombstone); the removed key becomes a tombstone hiding its older
        // version, and at the bottom goes altogether.
        let (out, calls) = with_rules(&entries, 10, None, false);
        assert_eq!(calls, 3);
        assert_eq!(out, vec![row("a", 5, V, "a5"), row("c", 6, V, "c6c6"), row("r", 7, D, ""), row("x", 8, D, "")]);
        let (out, _) = with_rules(&entries, 10, None, true);
        assert_eq!(out, vec![row("a", 5, V, "a5"), row("c", 6, V, "c6c6")]);
    }

    #[test]
    fn versions_a_snapshot_can_read_are_never_filtered() {
        let entries = [("c", 6, V), ("c", 2, V), ("r", 7, V), ("r", 3, V)];
        // Snapshots at 4 and 6: c@6 and r@3 are what they read; only r@7,
        // above the newest snapshot, is asked about. Its tombstone keeps
        // r@3 hidden from the present but not from the snapshot at 4.
        let (out, calls) = with_rules(&entries, 4, Some(6), false);
        assert_eq!(calls, 1);
        assert_eq!(out, vec![row("c", 6, V, "c6"), row("c", 2, V, "c2"), row("r", 7, D, ""), row("r", 3, V, "r3")]);
        // At the bottom, the tombstone above the oldest snapshot stays.
        let (out, _) = with_rules(&entries, 4, Some(6), true);
        assert_eq!(out[2], row("r", 7, D, ""));
    }

    #[test]
    fn remove_and_skip_until_drops_the_keys_before_the_bound_that_no_snapshot_reads() {
        // "sm" asks to skip to "m", at or before itself: kept, as is.
        let (out, _) = with_rules(&[("sm", 9, V), ("t", 2, V)], 10, None, false);
        assert_eq!(out, vec![row("sm", 9, V, "sm9"), row("t", 2, V, "t2")]);
        // "sz" removes itself and skips the keys up to "z" ("t" is one),
        // but keeps the version a snapshot at 3 reads.
        let input = [("sz", 9, V), ("t", 8, V), ("t", 3, V), ("u", 5, D), ("zz", 4, V)];
        let (out, calls) = with_rules(&input, 3, Some(3), false);
        assert_eq!(calls, 2, "asked about sz and zz only");
        assert_eq!(out, vec![row("sz", 9, D, ""), row("t", 3, V, "t3"), row("zz", 4, V, "zz4")]);
    }
}
