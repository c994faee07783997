//! The universal (size-tiered) compaction picker, after RocksDB's
//! `UniversalCompactionPicker` (db/compaction/compaction_picker_universal.cc)
//! with `stop_style = kCompactionStopStyleTotalSize` and no periodic,
//! incremental or deletion-triggered compactions.
//!
//! The database is a list of **sorted runs**, newest first: each L0 file is a
//! run, then each non-empty level 1.. is one. Runs never overlap in time, so a
//! compaction always merges adjacent runs. Nothing is picked while there are
//! fewer runs than `level0_file_num_compaction_trigger`; then, in order:
//!
//! 1. **Space amplification.** When the runs above the oldest add up to at
//!    least `max_size_amplification_percent`% of the oldest run's size, every
//!    run (from the newest free one) is merged into the last level.
//! 2. **Size ratio.** From each free run, newest first, add the next run while
//!    its size is at most `(100 + size_ratio)%` of the total picked so far and
//!    fewer than `max_merge_width` runs are picked; the first such series of at
//!    least `min_merge_width` runs is merged.
//! 3. **Sorted-run count.** If more than `trigger` runs are free, merge the
//!    newest `free - trigger + 1` of them regardless of size.
//!
//! Output level: the last level when the oldest run is an input; otherwise the
//! level just above the next older run, or L0 when that run is an L0 file (an
//! L0 output is one file, so it stays one sorted run). With
//! `allow_trivial_move`, inputs whose key ranges are pairwise disjoint are
//! moved instead of merged.
//!
//! Requires the db mutex (reads `being_compacted`, which the caller owns).

use std::collections::HashSet;
use std::sync::Arc;

use super::picker::files_disjoint;
use super::{Compaction, CompactionReason};
use crate::options::ColumnFamilyOptions;
use crate::version::{FileMetaData, SortedRun, Version};

/// Picks a universal compaction, or `None` (module doc for the order).
pub fn pick(version: &Version, opts: &ColumnFamilyOptions, busy: &HashSet<u64>) -> Option<Compaction> {
    let runs = version.sorted_runs(busy);
    let trigger = opts.level0_file_num_compaction_trigger.max(1) as usize;
    if runs.is_empty() || runs.len() < trigger {
        return None;
    }
    let uopts = &opts.compaction_options_universal;
    if let Some(start) = size_amp_start(&runs, uopts.max_size_amplification_percent) {
        return Some(build(version, opts, &runs, start, runs.len(), CompactionReason::UniversalSizeAmplification));
    }
    if let Some((start, end)) = similar_size_span(&runs, opts, uopts.size_ratio, u32::MAX) {
        return Some(build(version, opts, &runs, start, end, CompactionReason::UniversalSizeRatio));
    }
    let free = runs.iter().filter(|r| !r.being_compacted).count();
    if free > trigger {
        let width = (free - trigger + 1) as u32;
        if let Some((start, end)) = similar_size_span(&runs, opts, u32::MAX, width) {
            return Some(build(version, opts, &runs, start, end, CompactionReason::UniversalSortedRunNum));
        }
    }
    None
}

/// Every sorted run merged into the last level (`compact_range`), or `None`
/// when there is at most one run already at the last level, or a run is busy.
pub fn compact_all(version: &Version, opts: &ColumnFamilyOptions, busy: &HashSet<u64>) -> Option<Compaction> {
    let runs = version.sorted_runs(busy);
    let last = version.num_levels() - 1;
    if runs.is_empty() || (runs.len() == 1 && runs[0].level == last) || runs.iter().any(|r| r.being_compacted) {
        return None;
    }
    let mut c = build(version, opts, &runs, 0, runs.len(), CompactionReason::Manual);
    c.trivial_move = false;
    Some(c)
}

/// Start of a space-amplification compaction (RocksDB
/// `PickCompactionToReduceSizeAmp`): the newest free run, when every run from
/// it to the oldest is free and the runs above the oldest add up to at least
/// `percent`% of it.
fn size_amp_start(runs: &[SortedRun], percent: u32) -> Option<usize> {
    let (oldest, newer) = runs.split_last()?;
    if oldest.being_compacted {
        return None;
    }
    let start = newer.iter().position(|r| !r.being_compacted)?;
    if newer[start..].iter().any(|r| r.being_compacted) {
        return None;
    }
    let candidate: u64 = newer[start..].iter().map(|r| r.size).sum();
    if u128::from(candidate) * 100 < u128::from(percent) * u128::from(oldest.size) {
        return None;
    }
    Some(start)
}

/// The first series of adjacent free runs `[start, end)` where each next run
/// is at most `(100 + ratio)%` of the total before it, at most `max_width`
/// runs long (and `max_merge_width`) and at least `min_merge_width` long
/// (RocksDB `PickCompactionToReduceSortedRuns`).
fn similar_size_span(
    runs: &[SortedRun],
    opts: &ColumnFamilyOptions,
    ratio: u32,
    max_width: u32,
) -> Option<(usize, usize)> {
    let uopts = &opts.compaction_options_universal;
    let max_count = uopts.max_merge_width.min(max_width) as usize;
    let min_count = uopts.min_merge_width.max(2) as usize;
    let mut start = 0;
    while start < runs.len() {
        if runs[start].being_compacted {
            start += 1;
            continue;
        }
        let mut picked = runs[start].size as f64;
        let mut count = 1;
        while count < max_count && start + count < runs.len() {
            let next = &runs[start + count];
            if next.being_compacted || picked * (100.0 + f64::from(ratio)) / 100.0 < next.size as f64 {
                break;
            }
            picked += next.size as f64;
            count += 1;
        }
        if count >= min_count {
            return Some((start, start + count));
        }
        start += 1;
    }
    None
}

/// The compaction of runs `[start, end)` (RocksDB
/// `PickCompactionWithSortedRunRange` / the tail of `PickCompactionToReduceSortedRuns`).
fn build(
    version: &Version,
    opts: &ColumnFamilyOptions,
    runs: &[SortedRun],
    start: usize,
    end: usize,
    reason: CompactionReason,
) -> Compaction {
    let last = version.num_levels() - 1;
    let output_level = match runs.get(end) {
        None => last,
        Some(next) => next.level.saturating_sub(1),
    };
    let level = runs[start].level;
    let mut inputs = Vec::new();
    let mut middle_inputs: Vec<(usize, Vec<Arc<FileMetaData>>)> = Vec::new();
    let mut output_inputs = Vec::new();
    for run in &runs[start..end] {
        if run.level == level {
            inputs.extend(run.files.iter().cloned());
        } else if run.level == output_level {
            output_inputs = run.files.clone();
        } else {
            middle_inputs.push((run.level, run.files.clone()));
        }
    }
    // Everything older than the inputs is an input too: nothing lies beneath.
    let bottommost = end == runs.len();
    let mut c = Compaction {
        level,
        output_level,
        inputs,
        output_inputs,
        middle_inputs,
        grandparents: Vec::new(),
        trivial_move: false,
        bottommost,
        // One L0 output file keeps the output one sorted run.
        target_file_size: if output_level == 0 { u64::MAX } else { opts.target_file_size(output_level) },
        compression: opts.compression_for_level(output_level, bottommost),
        reason,
    };
    // Moving files within L0 would change nothing and be picked again.
    c.trivial_move = opts.compaction_options_universal.allow_trivial_move
        && output_level > 0
        && files_disjoint(version.ranges(), c.all_inputs());
    if c.trivial_move {
        let all: Vec<Arc<FileMetaData>> = c.all_inputs().cloned().collect();
        let (lo, hi) = super::picker::range_of(version.ranges(), &all);
        c.trivial_move = super::picker::partitioner_allows_move(opts, output_level, &all, (&lo, &hi));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::CompactionStyle;
    use crate::version::test_file as file;
    use crate::version::VersionEdit;

    fn opts() -> ColumnFamilyOptions {
        let mut o = ColumnFamilyOptions::default();
        o.compaction_style = CompactionStyle::Universal;
        o.level0_file_num_compaction_trigger = 4;
        o.compression = crate::CompressionType::None;
        o
    }

    /// A version with L0 files of `l0` sizes (newest first) and `levels` as (level, size).
    fn version(l0: &[u64], levels: &[(usize, u64)]) -> Version {
        let mut e = VersionEdit::default();
        for (i, size) in l0.iter().enumerate() {
            let n = 100 - i as u64;
            e.add_file(0, file(n, "a", "z", *size, n));
        }
        for (i, (level, size)) in levels.iter().enumerate() {
            e.add_file(*level, file(200 + i as u64, "a", "z", *size, 0));
        }
        Version::new(7).apply(&[&e]).unwrap()
    }

    fn numbers(files: &[Arc<FileMetaData>]) -> Vec<u64> {
        files.iter().map(|f| f.number).collect()
    }

    #[test]
    fn nothing_below_the_trigger() {
        let v = version(&[10, 10, 10], &[(6, 1)]);
        assert_eq!(v.sorted_runs(&HashSet::new()).len(), 4);
        let mut o = opts();
        o.level0_file_num_compaction_trigger = 5;
        assert!(pick(&v, &o, &HashSet::new()).is_none());
    }

    #[test]
    fn space_amplification_merges_everything_into_the_last_level() {
        // 3 x 40 = 120 above a last run of 50: 240% > 200%.
        let v = version(&[40, 40, 40], &[(6, 50)]);
        let c = pick(&v, &opts(), &HashSet::new()).unwrap();
        assert_eq!(c.reason, CompactionReason::UniversalSizeAmplification);
        assert_eq!((c.level, c.output_level, c.inputs.len(), c.output_inputs.len()), (0, 6, 3, 1));
        assert!(c.bottommost);
        // Under 200%: not a size-amplification compaction.
        let v = version(&[30, 30, 30], &[(6, 50)]);
        let c = pick(&v, &opts(), &HashSet::new()).unwrap();
        assert_ne!(c.reason, CompactionReason::UniversalSizeAmplification);
        // A busy run among the candidates blocks it.
        let v = version(&[40, 40, 40], &[(6, 50)]);
        let busy: HashSet<u64> = [99].into_iter().collect();
        let c = pick(&v, &opts(), &busy);
        assert!(c.is_none_or(|c| c.reason != CompactionReason::UniversalSizeAmplification));
    }

    #[test]
    fn size_ratio_merges_similar_newest_runs_above_the_next_run() {
        // Newest three are similar; the fourth (L5) is much bigger, the last is huge.
        let v = version(&[10, 10, 11], &[(5, 500), (6, 100_000)]);
        let c = pick(&v, &opts(), &HashSet::new()).unwrap();
        assert_eq!(c.reason, CompactionReason::UniversalSizeRatio);
        assert_eq!(numbers(&c.inputs), vec![100, 99, 98]);
        assert_eq!(c.output_level, 4, "just above the next older run (L5)");
        assert!(!c.bottommost && c.output_inputs.is_empty());
        // The next run an L0 file: the output stays in L0 as one file.
        let v = version(&[10, 10, 500, 600], &[(6, 100_000)]);
        let c = pick(&v, &opts(), &HashSet::new()).unwrap();
        assert_eq!((c.output_level, c.inputs.len(), c.target_file_size), (0, 2, u64::MAX));
        // max_merge_width caps the series.
        let mut o = opts();
        o.compaction_options_universal.max_merge_width = 2;
        let v = version(&[10, 10, 10, 10], &[(6, 100_000)]);
        let c = pick(&v, &o, &HashSet::new()).unwrap();
        assert_eq!((c.reason, c.inputs.len()), (CompactionReason::UniversalSizeRatio, 2));
    }

    #[test]
    fn size_ratio_skips_busy_runs_and_takes_levels_between() {
        // L0: 100 (busy), then runs 10 (L0), L2 = 10, L3 = 10, last L6 huge.
        let v = version(&[5, 10], &[(2, 10), (3, 10), (6, 100_000)]);
        let busy: HashSet<u64> = [100].into_iter().collect();
        let c = pick(&v, &opts(), &busy).unwrap();
        assert_eq!(c.reason, CompactionReason::UniversalSizeRatio);
        assert_eq!(numbers(&c.inputs), vec![99]);
        let middle: Vec<usize> = c.middle_inputs.iter().map(|(level, _)| *level).collect();
        assert_eq!(middle, vec![2, 3]);
        assert_eq!((c.output_level, c.output_inputs.len()), (5, 0), "just above L6");
        assert_eq!(c.all_inputs().count(), 3);
    }

    #[test]
    fn sorted_run_count_forces_a_merge_of_dissimilar_runs() {
        // Each run more than double the sum before it: no size-ratio series,
        // little space amplification, yet 6 runs > trigger 4.
        let v = version(&[1, 3, 10, 30, 100], &[(6, 1_000_000)]);
        let c = pick(&v, &opts(), &HashSet::new()).unwrap();
        assert_eq!(c.reason, CompactionReason::UniversalSortedRunNum);
        assert_eq!(c.inputs.len(), 6 - 4 + 1);
        assert_eq!(c.output_level, 0);
    }

    #[test]
    fn trivial_move_only_when_allowed_and_disjoint() {
        let mut e = VersionEdit::default();
        e.add_file(0, file(10, "a", "b", 10, 10));
        e.add_file(0, file(11, "c", "d", 10, 11));
        e.add_file(0, file(12, "e", "f", 10, 12));
        e.add_file(0, file(13, "g", "h", 10, 13));
        let v = Version::new(7).apply(&[&e]).unwrap();
        let mut o = opts();
        let c = pick(&v, &o, &HashSet::new()).unwrap();
        assert!(!c.trivial_move);
        o.compaction_options_universal.allow_trivial_move = true;
        let c = pick(&v, &o, &HashSet::new()).unwrap();
        assert!(c.trivial_move && c.output_level == 6);
        let mut e = VersionEdit::default();
        e.add_file(0, file(14, "a", "h", 10, 14));
        let v = v.apply(&[&e]).unwrap();
        assert!(!pick(&v, &o, &HashSet::new()).unwrap().trivial_move);
    }

    #[test]
    fn compact_all_takes_every_run_to_the_last_level() {
        let v = version(&[1, 3], &[(3, 10), (6, 1000)]);
        let c = compact_all(&v, &opts(), &HashSet::new()).unwrap();
        assert_eq!((c.reason, c.output_level, c.all_inputs().count()), (CompactionReason::Manual, 6, 4));
        let v = version(&[], &[(6, 1000)]);
        assert!(compact_all(&v, &opts(), &HashSet::new()).is_none());
    }
}
