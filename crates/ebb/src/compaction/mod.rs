//! Compaction: choosing what to merge ([`picker`]) and merging it ([`job`]).
//!
//! See docs/compaction.md for the policy and the options that steer it.

pub mod job;
pub mod picker;

use std::sync::Arc;

use crate::options::CompressionType;
use crate::version::FileMetaData;

/// Why a compaction was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionReason {
    /// L0 reached `level0_file_num_compaction_trigger`.
    L0FileCount,
    /// A level exceeded its target size.
    LevelSize,
    /// L0 files merged into one L0 file because L0→base was blocked.
    IntraL0,
    /// Asked for by `compact_range`.
    Manual,
}

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
        self.inputs.iter().chain(self.output_inputs.iter())
    }

    /// Total input bytes.
    pub fn input_bytes(&self) -> u64 {
        self.all_inputs().map(|f| f.file_size).sum()
    }

    /// Smallest and largest user key over all inputs.
    pub fn user_key_range(&self) -> (Vec<u8>, Vec<u8>) {
        let mut lo: Option<&[u8]> = None;
        let mut hi: Option<&[u8]> = None;
        for f in self.all_inputs() {
            let (s, l) = (f.smallest_user_key(), f.largest_user_key());
            if lo.is_none_or(|x| s < x) {
                lo = Some(s);
            }
            if hi.is_none_or(|x| l > x) {
                hi = Some(l);
            }
        }
        (lo.unwrap_or_default().to_vec(), hi.unwrap_or_default().to_vec())
    }
}
