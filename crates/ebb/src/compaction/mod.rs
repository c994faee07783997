//! Compaction: choosing what to merge ([`picker`] for leveled, [`universal`]
//! and [`fifo`] for the other `compaction_style`s) and merging it ([`job`]).
//!
//! See docs/compaction.md for the policy and the options that steer it.

pub mod fifo;
pub mod job;
pub(crate) mod covered;

/// The snapshot stripe of `seq` among `snapshots` (ascending): the index of
/// the oldest snapshot at or above it. Versions in one stripe are seen
/// together by every reader (RocksDB's `earliest_snapshot` of a version),
/// so a flush or compaction may combine them: merge operands
/// (`operands.rs`), and range tombstones with what they delete
/// (`covered.rs`).
pub(crate) fn snapshot_stripe(snapshots: &[crate::key::SequenceNumber], seq: crate::key::SequenceNumber) -> usize {
    snapshots.partition_point(|s| *s < seq)
}
pub(crate) mod operands;
pub mod picker;
pub(crate) mod run;
pub mod universal;

use std::sync::Arc;

pub use crate::events::CompactionReason;
use crate::options::CompressionType;
use crate::version::FileMetaData;

/// When a file's data was written, in seconds since the Unix epoch (the
/// `creation_time` table property); `None` when unknown. FIFO's `ttl` needs it.
pub type CreationTime<'a> = &'a dyn Fn(&FileMetaData) -> Option<u64>;

/// One unit of compaction work: inputs, where the output goes, and how.
#[derive(Debug, Clone)]
pub struct Compaction {
    /// The level the first inputs come from.
    pub level: usize,
    /// The level the outputs go to.
    pub output_level: usize,
    /// Files from `level`.
    pub inputs: Vec<Arc<FileMetaData>>,
    /// Files from `output_level` (empty when `level == output_level`).
    pub output_inputs: Vec<Arc<FileMetaData>>,
    /// Files from levels strictly between `level` and `output_level`, per
    /// level (universal compaction merges several sorted runs; empty otherwise).
    pub middle_inputs: Vec<(usize, Vec<Arc<FileMetaData>>)>,
    /// Files of the level below the output that overlap the inputs (limit output file overlap).
    pub grandparents: Vec<Arc<FileMetaData>>,
    /// Move the inputs to `output_level` without rewriting them.
    pub trivial_move: bool,
    /// No level below the output holds data in the compaction's key range, so
    /// tombstones can be dropped.
    pub bottommost: bool,
    /// Output file size target.
    pub target_file_size: u64,
    /// Output compression.
    pub compression: CompressionType,
    /// Why it was chosen.
    pub reason: CompactionReason,
}

impl Compaction {
    /// Every input file.
    pub fn all_inputs(&self) -> impl Iterator<Item = &Arc<FileMetaData>> {
        self.inputs
            .iter()
            .chain(self.middle_inputs.iter().flat_map(|(_, files)| files.iter()))
            .chain(self.output_inputs.iter())
    }

    /// Every input file with its level.
    pub fn inputs_by_level(&self) -> impl Iterator<Item = (usize, &Arc<FileMetaData>)> {
        let middle = self.middle_inputs.iter().flat_map(|(level, files)| files.iter().map(move |f| (*level, f)));
        self.inputs
            .iter()
            .map(|f| (self.level, f))
            .chain(middle)
            .chain(self.output_inputs.iter().map(|f| (self.output_level, f)))
    }

    /// The inputs are dropped, not merged: nothing is read or written (FIFO).
    pub fn is_deletion(&self) -> bool {
        matches!(self.reason, CompactionReason::FifoMaxSize | CompactionReason::FifoTtl)
    }

    /// Total input bytes.
    pub fn input_bytes(&self) -> u64 {
        self.all_inputs().map(|f| f.file_size).sum()
    }
}

/// A table of `size` bytes spanning user keys `[lo, hi]` at sequence `seq`,
/// for the pickers' tests.
#[cfg(test)]
pub(crate) fn test_file(number: u64, lo: &str, hi: &str, size: u64, seq: u64) -> FileMetaData {
    use crate::key::{make_internal_key, ValueKind};
    FileMetaData {
        number,
        file_size: size,
        smallest: make_internal_key(lo.as_bytes(), seq, ValueKind::Value),
        largest: make_internal_key(hi.as_bytes(), seq, ValueKind::Value),
        smallest_seq: seq,
        largest_seq: seq,
        num_entries: 1,
        num_deletions: 0,
        oldest_blob_file: 0,
        num_range_deletions: 0,
        table: Default::default(),
    }
}
