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
//! A cancelled or failed job deletes every file it created.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, user_key, SequenceNumber, ValueKind};
use crate::sst::{TableBuilder, TableBuilderOptions};
use crate::version::{filename, FileMetaData};

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
    /// The oldest sequence number a live snapshot (or the present) reads at.
    pub smallest_snapshot: SequenceNumber,
    /// Drop tombstones (rule 2): the output is bottommost.
    pub drop_tombstones: bool,
    /// Drop hidden versions (rule 1). False for a flush that must keep every version.
    pub drop_hidden: bool,
    /// Checked at output-block boundaries; when set the job stops with `Error::Cancelled`.
    pub cancel: Option<&'a AtomicBool>,
    /// Hands out file numbers (and registers them as pending outputs).
    pub new_file_number: &'a mut dyn FnMut() -> u64,
    /// Called with the bytes of each finished output block, for rate limiting and pacing.
    pub on_bytes: &'a mut dyn FnMut(u64),
    /// Ask the OS to write outputs back every this many bytes (`bytes_per_sync`); 0 never.
    pub bytes_per_sync: u64,
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
    /// Bytes written.
    pub bytes_written: u64,
}

struct OpenOutput {
    number: u64,
    builder: TableBuilder,
    smallest: Vec<u8>,
    largest: Vec<u8>,
    smallest_seq: SequenceNumber,
    largest_seq: SequenceNumber,
    reported: u64,
}

/// Runs the merge of `input` (already positioned with `seek_to_first`).
pub fn run(input: &mut dyn InternalIterator, ctx: JobContext<'_>) -> Result<JobOutput> {
    let mut out = JobOutput::default();
    let mut created: Vec<u64> = Vec::new();
    let result = merge(input, ctx.dir, ctx, &mut out, &mut created);
    match result {
        Ok(()) => Ok(out),
        Err((e, dir, fs)) => {
            for n in created {
                let _ = fs.remove_file(&filename::table_file(&dir, n));
            }
            out.files.clear();
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
) -> std::result::Result<(), MergeError> {
    let fs = Arc::clone(ctx.fs);
    let fail = |e: Error| (e, dir.to_path_buf(), Arc::clone(&fs));
    let mut current: Option<OpenOutput> = None;
    let mut current_user_key: Option<Vec<u8>> = None;
    let mut last_seq_for_key = SequenceNumber::MAX;
    let grandparent_limit = ctx.target_file_size.saturating_mul(10);
    let mut grandparent_index = 0usize;
    let mut overlapped_bytes = 0u64;
    let mut seen_key = false;
    let block = ctx.table_options.block_size.max(1) as u64;

    while input.valid() {
        let key = input.key();
        let Some(parsed) = parse_internal_key(key) else {
            return Err(fail(Error::corruption("compaction input", 0, "unparsable internal key")));
        };
        out.keys_in += 1;
        let new_user_key = current_user_key.as_deref() != Some(parsed.user_key);
        if new_user_key {
            // Advance over grandparents that end before this key, counting overlap.
            while grandparent_index < ctx.grandparents.len()
                && ctx.grandparents[grandparent_index].largest_user_key() < parsed.user_key
            {
                if seen_key {
                    overlapped_bytes += ctx.grandparents[grandparent_index].file_size;
                }
                grandparent_index += 1;
            }
            seen_key = true;
            // Cut the output between user keys when it is big enough.
            let cut = current.as_ref().is_some_and(|o| {
                o.builder.estimated_file_size() >= ctx.target_file_size || overlapped_bytes > grandparent_limit
            });
            if cut {
                if let Some(o) = current.take() {
                    finish_output(o, out, &mut ctx).map_err(fail)?;
                }
                overlapped_bytes = 0;
            }
            current_user_key = Some(parsed.user_key.to_vec());
            last_seq_for_key = SequenceNumber::MAX;
        }
        let hidden = ctx.drop_hidden && last_seq_for_key <= ctx.smallest_snapshot;
        let dead_tombstone =
            ctx.drop_tombstones && parsed.kind == ValueKind::Deletion && parsed.seq <= ctx.smallest_snapshot;
        last_seq_for_key = parsed.seq;
        if hidden || dead_tombstone {
            out.keys_dropped += 1;
            input.next();
            continue;
        }
        if current.is_none() {
            let number = (ctx.new_file_number)();
            created.push(number);
            let path = filename::table_file(dir, number);
            let file = crate::fs::WriteBehindFile::wrap(fs.new_writable(&path).map_err(fail)?, ctx.bytes_per_sync);
            current = Some(OpenOutput {
                number,
                builder: TableBuilder::new(file, ctx.table_options.clone(), path.display().to_string()),
                smallest: key.to_vec(),
                largest: Vec::new(),
                smallest_seq: SequenceNumber::MAX,
                largest_seq: 0,
                reported: 0,
            });
        }
        if let Some(o) = current.as_mut() {
            o.builder.add(key, input.value()).map_err(fail)?;
            o.largest.clear();
            o.largest.extend_from_slice(key);
            o.smallest_seq = o.smallest_seq.min(parsed.seq);
            o.largest_seq = o.largest_seq.max(parsed.seq);
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
    if let Some(o) = current.take() {
        finish_output(o, out, &mut ctx).map_err(fail)?;
    }
    if !out.files.is_empty() {
        kill_point!("dir_sync" => Err(fail(crate::kill_points::injected("dir_sync"))));
        fs.sync_dir(dir).map_err(fail)?;
    }
    Ok(())
}

fn finish_output(o: OpenOutput, out: &mut JobOutput, ctx: &mut JobContext<'_>) -> Result<()> {
    let num_entries = o.builder.num_entries();
    let props = o.builder.finish()?;
    (ctx.on_bytes)(props.file_size.saturating_sub(o.reported));
    out.bytes_written += props.file_size;
    debug_assert!(user_key(&o.smallest) <= user_key(&o.largest));
    out.files.push(FileMetaData {
        number: o.number,
        file_size: props.file_size,
        smallest: o.smallest,
        largest: o.largest,
        smallest_seq: o.smallest_seq,
        largest_seq: o.largest_seq,
        num_entries,
        num_deletions: props.num_deletions,
        table: Default::default(),
    });
    Ok(())
}
