//! Compaction: choosing what to merge ([`picker`] for leveled, [`universal`]
//! and [`fifo`] for the other `compaction_style`s), the job that carries a
//! choice out in three steps (`compaction_job`: prepare, run, install), and
//! the merge it runs (`run` splits it into subcompactions, [`job`] merges).
//!
//! See docs/compaction.md for the policy and the options that steer it.

pub(crate) mod compaction_job;
pub(crate) mod covered;
pub mod fifo;
pub mod job;

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

/// The most a compaction reads ahead in all, as a multiple of
/// `compaction_readahead_size`: RocksDB gives every input its full readahead,
/// and its L0 stops at 36 files; Ebb's deferrals and L0 run merges make
/// compactions of hundreds of L0 files, whose buffers alone would hold
/// hundreds of megabytes (docs/io.md, "`compaction_readahead_size`").
pub const READAHEAD_INPUTS: usize = 16;

/// The least readahead an input of a wide compaction gets (when
/// `compaction_readahead_size` is not smaller): a read of 256 KiB costs the
/// disk about what a read of 2 MiB does per byte.
pub const MIN_INPUT_READAHEAD: usize = 256 << 10;

/// Each input's readahead when `open` input files are read at once:
/// `size` while `open` is at most [`READAHEAD_INPUTS`], then the share of
/// `READAHEAD_INPUTS x size` that falls to each, but not under
/// [`MIN_INPUT_READAHEAD`] (or `size`, if smaller). 0 stays 0 (no readahead).
pub fn readahead_per_input(size: usize, open: usize) -> usize {
    let share = size.saturating_mul(READAHEAD_INPUTS) / open.max(1);
    share.clamp(MIN_INPUT_READAHEAD.min(size), size)
}

/// A compaction whose output is one file (outputs not cut by size: L0 run
/// merges, universal's merges into L0) writes it with a partitioned index and
/// filters once its inputs hold more than this many times
/// `target_file_size_base`. One index or filter block of a table that size is
/// megabytes: the builder holds every key's filter hash (8 bytes a key) until
/// the end, and a reader that caches it evicts a cache shard's worth of
/// blocks each time it loads it (docs/cache.md, "Shards and large blocks").
pub const PARTITION_ONE_FILE_PAST_TARGETS: u64 = 4;

/// Such a file is partitioned only if its index or its filter would be
/// more than this many times `metadata_block_size` (256 KiB at the default
/// 4 KiB): below that its partitions are too few to be worth a block-cache
/// lookup on every filter probe, the price a point read pays per file over
/// a deep L0. Files of large values hold few keys: a 200 MB run merge of
/// 100 KB values has a 5 KB filter and a 50 KB index.
pub const PARTITIONS_WORTH_IT: u64 = 64;

impl Compaction {
    /// True when the output is one file that may pass
    /// [`PARTITION_ONE_FILE_PAST_TARGETS`] times `target_file_size_base`: it
    /// is then written with a partitioned index and filters.
    pub fn writes_one_large_file(&self, target_file_size_base: u64) -> bool {
        self.target_file_size == u64::MAX
            && !self.trivial_move
            && !self.is_deletion()
            && self.input_bytes() > target_file_size_base.saturating_mul(PARTITION_ONE_FILE_PAST_TARGETS)
    }

    /// True when the output is one large file
    /// ([`Compaction::writes_one_large_file`]) whose index or filter, as
    /// estimated from its inputs (every entry kept, a data block of
    /// `block_size` holding at least one, an index entry the length of the
    /// longest smallest key and a handle, `bloom_bits_per_key` bits a key),
    /// would pass [`PARTITIONS_WORTH_IT`] blocks of `metadata_block_size`:
    /// it is then written with a partitioned index and filters.
    pub fn partitions_its_metadata(
        &self,
        target_file_size_base: u64,
        block_size: usize,
        metadata_block_size: usize,
        bloom_bits_per_key: u32,
    ) -> bool {
        if !self.writes_one_large_file(target_file_size_base) {
            return false;
        }
        let entries: u64 = self.all_inputs().map(|f| f.num_entries).sum();
        let key_len = self.all_inputs().map(|f| f.smallest.len() as u64).max().unwrap_or(0);
        let blocks = entries.min(self.input_bytes() / block_size.max(1) as u64 + 1);
        let index_bytes = blocks.saturating_mul(key_len + 8);
        let filter_bytes = entries.saturating_mul(u64::from(bloom_bits_per_key)) / 8;
        index_bytes.max(filter_bytes) > PARTITIONS_WORTH_IT.saturating_mul(metadata_block_size.max(1) as u64)
    }

    /// Input files one merge of this compaction reads at once: each L0 input
    /// (tables of L0 overlap), and one file of each other input level.
    pub fn files_read_at_once(&self) -> usize {
        let first = if self.level == 0 { self.inputs.len() } else { usize::from(!self.inputs.is_empty()) };
        first + self.middle_inputs.len() + usize::from(!self.output_inputs.is_empty())
    }

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

#[cfg(test)]
mod readahead_tests {
    use super::*;

    #[test]
    fn a_wide_compaction_shares_sixteen_inputs_worth_of_readahead() {
        const MB: usize = 1 << 20;
        // Up to sixteen inputs read at once: each the full readahead.
        assert_eq!(readahead_per_input(2 * MB, 1), 2 * MB);
        assert_eq!(readahead_per_input(2 * MB, 16), 2 * MB);
        // More: 32 MiB in all, shared.
        assert_eq!(readahead_per_input(2 * MB, 32), MB);
        assert_eq!(readahead_per_input(2 * MB, 64), MB / 2);
        // Never under 256 KiB, unless the option is smaller; 0 stays none.
        assert_eq!(readahead_per_input(2 * MB, 1000), MIN_INPUT_READAHEAD);
        assert_eq!(readahead_per_input(64 << 10, 1000), 64 << 10);
        assert_eq!(readahead_per_input(0, 100), 0);
        assert_eq!(readahead_per_input(2 * MB, 0), 2 * MB);
    }

    #[test]
    fn files_read_at_once_count_each_l0_input_and_one_file_a_level() {
        let files = |n: u64| {
            (0..n).map(|i| Arc::new(crate::version::test_file(i + 1, "a", "z", 10, i + 1))).collect::<Vec<_>>()
        };
        let mut c = Compaction {
            level: 0,
            output_level: 1,
            inputs: files(40),
            output_inputs: files(7),
            middle_inputs: Vec::new(),
            grandparents: Vec::new(),
            trivial_move: false,
            bottommost: false,
            target_file_size: 1 << 20,
            compression: CompressionType::None,
            reason: CompactionReason::L0FileCount,
        };
        assert_eq!(c.files_read_at_once(), 41);
        c.output_level = 0;
        c.output_inputs.clear();
        assert_eq!(c.files_read_at_once(), 40);
        (c.level, c.output_level, c.middle_inputs) = (3, 5, vec![(4, files(3))]);
        c.output_inputs = files(9);
        assert_eq!(c.files_read_at_once(), 3);
    }
}
