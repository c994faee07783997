//! Figures about the shape of a [`Version`] that the picker, the write
//! controller, the tuner and the properties read: level targets and the base
//! level, compaction scores, estimated pending compaction bytes, whether
//! compaction should be sped up, the count the L0 stall triggers compare
//! against, and the sorted runs of universal compaction. RocksDB keeps them
//! with the version, in `VersionStorageInfo` (`CalculateBaseBytes`,
//! `ComputeCompactionScore`, `EstimateCompactionBytesNeeded`,
//! `l0_delay_trigger_count`); so does Ebb, as methods on [`Version`].
//!
//! The version layer sits below the options (docs/architecture.md,
//! "Layers"), so these take the few numbers of a family's options they need
//! as a [`StorageInfoOptions`], which the options layer builds
//! (`StorageInfoOptions::from_options`).
//!
//! Thread safety: pure functions of an immutable version; a
//! `being_compacted` set passed in is the caller's (held under the db mutex).

use std::collections::HashSet;
use std::sync::Arc;

use super::{FileMetaData, Version};

/// How a family's files are organised (its `compaction_style`), as far as
/// the shape figures need to know.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TreeStyle {
    /// Leveled compaction.
    Level,
    /// Universal (size-tiered) compaction: every L0 file and every non-empty
    /// level is one sorted run.
    Universal,
    /// FIFO: files stay in L0 and are dropped past `max_table_files_size`
    /// bytes (`compaction_options_fifo.max_table_files_size`).
    Fifo {
        /// Bytes L0 may hold before the oldest files are dropped.
        max_table_files_size: u64,
    },
}

/// The options of a family the shape figures read (RocksDB names; see
/// `ColumnFamilyOptions` for their meaning and defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StorageInfoOptions {
    /// `compaction_style`.
    pub style: TreeStyle,
    /// `level0_file_num_compaction_trigger`.
    pub level0_file_num_compaction_trigger: i32,
    /// `level0_slowdown_writes_trigger` as RocksDB sanitizes it: at least
    /// the compaction trigger (`ColumnFamilyOptions::effective_l0_stall_triggers`).
    pub level0_slowdown_writes_trigger: i32,
    /// `max_bytes_for_level_base`.
    pub max_bytes_for_level_base: u64,
    /// `max_bytes_for_level_multiplier`.
    pub max_bytes_for_level_multiplier: f64,
    /// `level_compaction_dynamic_level_bytes`.
    pub level_compaction_dynamic_level_bytes: bool,
    /// `soft_pending_compaction_bytes_limit`; 0 is no limit.
    pub soft_pending_compaction_bytes_limit: u64,
    /// `disable_auto_compactions`.
    pub disable_auto_compactions: bool,
}

/// Target sizes per level and the level L0 compacts into.
#[derive(Debug, Clone, PartialEq)]
pub struct LevelTargets {
    /// The level L0 compacts into.
    pub base_level: usize,
    /// Target bytes per level: `u64::MAX` for L0 and the levels above the
    /// base, which are never compacted for their size (RocksDB prefills
    /// `level_max_bytes_` so).
    pub targets: Vec<u64>,
    /// With dynamic level bytes: the deepest non-empty level whose target
    /// would fall under `max_bytes_for_level_base / multiplier` if the
    /// largest level kept its size; it and the non-empty levels above it are
    /// drained into the levels below (RocksDB `lowest_unnecessary_level_`).
    pub lowest_unnecessary_level: Option<usize>,
}

impl LevelTargets {
    /// The target of `level`, `u64::MAX` when none.
    pub fn target(&self, level: usize) -> u64 {
        self.targets.get(level).copied().unwrap_or(u64::MAX)
    }
}

/// One sorted run: a single L0 file or a whole non-empty level.
#[derive(Debug, Clone)]
pub struct SortedRun {
    /// Level of the run's files.
    pub level: usize,
    /// Its files (one for an L0 run).
    pub files: Vec<Arc<FileMetaData>>,
    /// Total bytes.
    pub size: u64,
    /// Some file of the run is in a running compaction.
    pub being_compacted: bool,
}

/// RocksDB's factor on scores of at least 1, which leaves room to lower a
/// score for priority without taking it under the threshold.
const SCORE_SCALE: f64 = 10.0;

impl Version {
    /// The level targets: static (`max_bytes_for_level_base` x
    /// multiplier^(level-1)) or, with `level_compaction_dynamic_level_bytes`,
    /// derived from the last level's size so that L0 compacts straight into
    /// the first level whose target is at least the base ("base level"):
    /// RocksDB's `VersionStorageInfo::CalculateBaseBytes`, step for step.
    pub fn level_targets(&self, o: &StorageInfoOptions) -> LevelTargets {
        let n = self.num_levels();
        let mult = o.max_bytes_for_level_multiplier;
        let base = o.max_bytes_for_level_base;
        let mut targets = vec![u64::MAX; n];
        if !o.level_compaction_dynamic_level_bytes || n < 3 {
            let mut t = base as f64;
            for target in targets.iter_mut().skip(1) {
                *target = t.min(u64::MAX as f64) as u64;
                t *= mult;
            }
            return LevelTargets { base_level: 1, targets, lowest_unnecessary_level: None };
        }
        let last = n - 1;
        let first_non_empty = (1..n).find(|l| self.level_bytes(*l) > 0);
        let max_level_size = (1..n).map(|l| self.level_bytes(l)).max().unwrap_or(0);
        let Some(first_non_empty) = first_non_empty else {
            // Nothing below L0: L0 compacts into the last level, and nothing
            // else is ever compacted for its size.
            return LevelTargets { base_level: last, targets, lowest_unnecessary_level: None };
        };
        let base_bytes_min = (base as f64 / mult) as u64;
        // Whether the largest level can keep its size as the last level's target.
        let mut cur_level_size = max_level_size;
        let mut lowest_unnecessary_level = None;
        for level in (first_non_empty..=n - 2).rev() {
            cur_level_size = (cur_level_size as f64 / mult) as u64;
            if lowest_unnecessary_level.is_none() && cur_level_size <= base_bytes_min {
                lowest_unnecessary_level = Some(level);
            }
        }
        let mut base_level = first_non_empty;
        let base_level_size = if cur_level_size <= base_bytes_min {
            // Even the first non-empty level would be under the minimum: it is
            // the base, at the minimum.
            base_bytes_min + 1
        } else {
            while base_level > 1 && cur_level_size > base {
                base_level -= 1;
                cur_level_size = (cur_level_size as f64 / mult) as u64;
            }
            if cur_level_size > base {
                base
            } else {
                cur_level_size.max(1)
            }
        };
        let mut level_size = base_level_size as f64;
        for (level, target) in targets.iter_mut().enumerate().skip(base_level) {
            if level > base_level {
                level_size *= mult;
            }
            // No level under the base's maximum: an hourglass-shaped tree would
            // score L1+ above L0, which then fills and stalls (RocksDB's reason).
            *target = (level_size.min(u64::MAX as f64) as u64).max(base);
        }
        LevelTargets { base_level, targets, lowest_unnecessary_level }
    }

    /// Compaction score of every level (index = level): RocksDB's
    /// `VersionStorageInfo::ComputeCompactionScore`. At least 1 means the
    /// level needs compaction; higher goes first. Universal and FIFO score
    /// only L0: sorted runs not being compacted / trigger, and total bytes /
    /// `max_table_files_size`.
    ///
    /// Leveled with dynamic level bytes: L0 scores files / trigger, at least
    /// 1.01 once it holds `max_bytes_for_level_base`, and at least its bytes
    /// over the base level's (or its target, whichever is larger), times 10
    /// when over 1. A deeper level over its target scores its bytes over its
    /// target *plus the bytes on their way down to it from above* (L0's, and
    /// every upper level's excess), times 10: a level that much data is about
    /// to land in waits, and L0→base goes first, so data moves down in fewer,
    /// larger merges instead of the base level being rewritten into the next
    /// on every flush's arrival. Levels the tree no longer needs (see
    /// [`LevelTargets::lowest_unnecessary_level`]) are drained just above
    /// the threshold.
    pub fn level_scores(&self, o: &StorageInfoOptions, being_compacted: &HashSet<u64>) -> Vec<f64> {
        let mut scores = vec![0.0; self.num_levels()];
        match o.style {
            TreeStyle::Universal => {
                let runs = self.sorted_runs(being_compacted);
                let free = runs.iter().filter(|r| !r.being_compacted).count();
                scores[0] = free as f64 / o.level0_file_num_compaction_trigger.max(1) as f64;
                return scores;
            }
            TreeStyle::Fifo { max_table_files_size } => {
                let bytes: u64 = (0..self.num_levels()).map(|l| self.level_bytes(l)).sum();
                scores[0] = bytes as f64 / max_table_files_size.max(1) as f64;
                return scores;
            }
            TreeStyle::Level => {}
        }
        let t = self.level_targets(o);
        let dynamic = o.level_compaction_dynamic_level_bytes && self.num_levels() >= 3;
        let free = |level: usize| self.levels[level].iter().filter(|f| !being_compacted.contains(&f.number));
        let mut downcompact = self.level_bytes(0) as f64;
        let l0_free = free(0).count();
        let l0_free_bytes: u64 = free(0).map(|f| f.file_size).sum();
        let mut l0 = l0_free as f64 / o.level0_file_num_compaction_trigger.max(1) as f64;
        if self.num_levels() > 1 {
            if dynamic {
                if l0_free_bytes >= o.max_bytes_for_level_base {
                    l0 = l0.max(1.01);
                }
                if l0_free_bytes > t.target(t.base_level) {
                    let base_bytes = self.level_bytes(t.base_level);
                    l0 = l0.max(l0_free_bytes as f64 / base_bytes.max(t.target(t.base_level)) as f64);
                }
                if l0 > 1.0 {
                    l0 *= SCORE_SCALE;
                }
            } else {
                l0 = l0.max(l0_free_bytes as f64 / o.max_bytes_for_level_base.max(1) as f64);
            }
        }
        scores[0] = l0;
        let last = self.num_levels().saturating_sub(1);
        for (level, score) in scores.iter_mut().enumerate().take(last).skip(1) {
            let target = t.target(level);
            let bytes: u64 = free(level).map(|f| f.file_size).sum();
            let total = self.level_bytes(level);
            if !dynamic {
                *score = bytes as f64 / target as f64;
                continue;
            }
            *score = if bytes < target {
                bytes as f64 / target as f64
            } else {
                bytes as f64 / (target as f64 + downcompact) * SCORE_SCALE
            };
            let unnecessary = t.lowest_unnecessary_level.is_some_and(|u| level <= u);
            if bytes > 0 && unnecessary {
                let below = t.lowest_unnecessary_level.unwrap_or(level) - level;
                *score = score.max(SCORE_SCALE * (1.001 + 0.001 * below as f64));
            }
            if unnecessary {
                downcompact += total as f64;
            } else if total > target {
                downcompact += (total - target) as f64;
            }
        }
        scores
    }

    /// Estimated bytes compaction must rewrite to bring every level under
    /// target: RocksDB's `VersionStorageInfo::EstimateCompactionBytesNeeded`.
    /// L0 counts once it reaches its trigger (or holds
    /// `max_bytes_for_level_base`), with the base level it merges into; each
    /// level's excess over its target, bytes carried down from the level
    /// above included, counts with the fan-out it will meet below (next
    /// level's bytes / this level's, plus one), and the next level then
    /// starts from its own bytes plus that excess. 0 for universal and FIFO,
    /// which RocksDB does not estimate either.
    pub fn estimate_pending_compaction_bytes(&self, o: &StorageInfoOptions) -> u64 {
        if o.style != TreeStyle::Level {
            return 0;
        }
        let t = self.level_targets(o);
        let l0_bytes = self.level_bytes(0);
        let l0_triggered = self.num_files(0) >= o.level0_file_num_compaction_trigger.max(1) as usize
            || l0_bytes >= o.max_bytes_for_level_base;
        let mut pending = 0u64;
        let mut carried = 0u64;
        if l0_triggered {
            pending = l0_bytes;
            carried = l0_bytes;
        }
        for level in t.base_level..self.num_levels().saturating_sub(1) {
            let own = self.level_bytes(level);
            if level == t.base_level && l0_triggered {
                pending = pending.saturating_add(own);
            }
            let size = own.saturating_add(carried);
            carried = 0;
            if size > t.target(level) {
                carried = size - t.target(level);
                let next = self.level_bytes(level + 1);
                if next > 0 {
                    // `size` > target >= 0, so the division is by a positive size.
                    let fan_out = next as f64 / size as f64 + 1.0;
                    pending = pending.saturating_add((carried as f64 * fan_out) as u64);
                }
            }
        }
        pending
    }

    /// Whether this family's compaction debt asks for more than one
    /// compaction at a time (RocksDB's compaction pressure token, set in
    /// `RecalculateWriteStallConditions`): L0 files at `min(2 x trigger,
    /// trigger + (slowdown - trigger) / 4)`, the slowdown trigger as RocksDB
    /// sanitizes it; no soft pending-bytes limit (RocksDB then always speeds
    /// up); or estimated pending bytes at `min(soft limit / 4, max(bottommost
    /// bytes / 8, 2 x max_bytes_for_level_base))`, where the bottommost
    /// bytes are the deepest non-empty level's (0 when only L0 holds files,
    /// which leaves the soft limit's quarter). RocksDB also counts files
    /// marked for compaction, which Ebb does not mark. Automatic compaction
    /// off: no pressure.
    pub fn needs_compaction_speedup(&self, o: &StorageInfoOptions) -> bool {
        if o.disable_auto_compactions {
            return false;
        }
        let trigger = i64::from(o.level0_file_num_compaction_trigger);
        if trigger >= 0 {
            let slowdown = i64::from(o.level0_slowdown_writes_trigger);
            let l0_speedup = (2 * trigger).min(trigger + (slowdown - trigger) / 4);
            if self.l0_delay_trigger_count(o) as i64 >= l0_speedup {
                return true;
            }
        }
        if o.soft_pending_compaction_bytes_limit == 0 {
            return true;
        }
        let slowdown_threshold = o.soft_pending_compaction_bytes_limit / 4;
        let deepest = self.deepest_nonempty_level();
        let bottommost = if deepest == 0 { 0 } else { self.level_bytes(deepest) };
        let threshold = if bottommost == 0 {
            slowdown_threshold
        } else {
            slowdown_threshold.min((bottommost / 8).max(o.max_bytes_for_level_base.saturating_mul(2)))
        };
        self.estimate_pending_compaction_bytes(o) >= threshold
    }

    /// The count the L0 write-stall triggers compare against (RocksDB
    /// `l0_delay_trigger_count`): L0 files; for universal, every sorted run
    /// (L0 files plus non-empty levels); for FIFO 0, since RocksDB disables
    /// the L0 triggers there (files are dropped instead of compacted down).
    pub fn l0_delay_trigger_count(&self, o: &StorageInfoOptions) -> usize {
        match o.style {
            TreeStyle::Level => self.num_files(0),
            TreeStyle::Universal => self.sorted_runs(&HashSet::new()).len(),
            TreeStyle::Fifo { .. } => 0,
        }
    }

    /// The sorted runs of the version, newest first: each L0 file, then each
    /// non-empty level (universal compaction's view of the tree). A run is
    /// being compacted when any of its files is in `busy`.
    pub fn sorted_runs(&self, busy: &HashSet<u64>) -> Vec<SortedRun> {
        let mut runs: Vec<SortedRun> = self.levels[0]
            .iter()
            .map(|f| SortedRun {
                level: 0,
                files: vec![Arc::clone(f)],
                size: f.file_size,
                being_compacted: busy.contains(&f.number),
            })
            .collect();
        for (level, files) in self.levels.iter().enumerate().skip(1) {
            if files.is_empty() {
                continue;
            }
            runs.push(SortedRun {
                level,
                files: files.clone(),
                size: files.iter().map(|f| f.file_size).sum(),
                being_compacted: files.iter().any(|f| busy.contains(&f.number)),
            });
        }
        runs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::test_file as file;
    use crate::version::VersionEdit;

    /// Leveled, static targets from a 1000-byte base, L0 trigger 2.
    fn opts() -> StorageInfoOptions {
        StorageInfoOptions {
            style: TreeStyle::Level,
            level0_file_num_compaction_trigger: 2,
            level0_slowdown_writes_trigger: 20,
            max_bytes_for_level_base: 1000,
            max_bytes_for_level_multiplier: 10.0,
            level_compaction_dynamic_level_bytes: false,
            soft_pending_compaction_bytes_limit: 64 << 30,
            disable_auto_compactions: false,
        }
    }

    /// W2's bug: with the base level empty, the old estimate divided the
    /// next level's bytes by the base level's own (0, taken as 1) and passed
    /// the 256 GiB hard limit on a tree of a few MB. The figure is RocksDB's.
    #[test]
    fn pending_bytes_with_an_empty_base_level_count_the_carried_bytes() {
        let mut e = VersionEdit::default();
        for n in 1..=3 {
            e.add_file(0, file(n, "a", "z", 1000, n));
        }
        e.add_file(2, file(10, "a", "z", 50_000, 0));
        let v = Version::new(4).apply(&[&e]).unwrap();
        let o = opts();
        // L0 3000 bytes (trigger 2) into an empty L1 (target 1000): 2000 over,
        // meeting 50000 bytes in L2 -> 2000 * (50000 / 3000 + 1); L2 then holds
        // 52000 against 10000, with nothing below to merge into.
        let expected = 3000 + (2000.0 * (50_000.0 / 3000.0 + 1.0)) as u64;
        assert_eq!(v.estimate_pending_compaction_bytes(&o), expected);
        assert!(expected < 100_000, "bounded by a small multiple of the tree's 53 KB");
        // Below the trigger L0 counts for nothing; L2's excess has no level to merge into.
        let mut e = VersionEdit::default();
        e.add_file(0, file(1, "a", "z", 500, 1));
        e.add_file(2, file(10, "a", "z", 50_000, 0));
        let v = Version::new(4).apply(&[&e]).unwrap();
        assert_eq!(v.estimate_pending_compaction_bytes(&o), 0);
        // L1 over target with L2 below: excess * (L2 / L1 + 1).
        let mut e = VersionEdit::default();
        e.add_file(1, file(1, "a", "z", 1500, 0));
        e.add_file(2, file(10, "a", "z", 3000, 0));
        let v = Version::new(4).apply(&[&e]).unwrap();
        assert_eq!(v.estimate_pending_compaction_bytes(&o), (500.0 * (3000.0 / 1500.0 + 1.0)) as u64);
        // Universal and FIFO are not estimated.
        for style in [TreeStyle::Universal, TreeStyle::Fifo { max_table_files_size: 1 }] {
            assert_eq!(v.estimate_pending_compaction_bytes(&StorageInfoOptions { style, ..o }), 0);
        }
    }

    /// RocksDB's thresholds for running compactions in parallel, each crossed
    /// alone: L0 files, no soft limit, pending bytes against the soft limit's
    /// quarter and against the bottommost level's eighth.
    #[test]
    fn compaction_speedup_follows_rocksdbs_thresholds() {
        let l0_files = |n: u64| {
            let mut e = VersionEdit::default();
            for i in 1..=n {
                e.add_file(0, file(i, "a", "z", 10, i));
            }
            Version::new(4).apply(&[&e]).unwrap()
        };
        let mut o = opts();
        o.soft_pending_compaction_bytes_limit = 1 << 40;
        // Trigger 2, slowdown 20: min(2 x 2, 2 + 18 / 4) = 4 files.
        assert!(!l0_files(3).needs_compaction_speedup(&o), "3 L0 files of 10 bytes: one compaction at a time");
        assert!(l0_files(4).needs_compaction_speedup(&o), "4 L0 files");
        // Trigger 4, slowdown 8: min(8, 4 + 1) = 5.
        (o.level0_file_num_compaction_trigger, o.level0_slowdown_writes_trigger) = (4, 8);
        assert!(!l0_files(4).needs_compaction_speedup(&o));
        assert!(l0_files(5).needs_compaction_speedup(&o));
        let off = StorageInfoOptions { disable_auto_compactions: true, ..o };
        assert!(!l0_files(50).needs_compaction_speedup(&off), "no automatic compaction, no pressure");
        let no_soft = StorageInfoOptions { soft_pending_compaction_bytes_limit: 0, ..o };
        assert!(l0_files(1).needs_compaction_speedup(&no_soft), "RocksDB always speeds up without a soft limit");
        // L1 1500 over its 1000 target, L2 3000 below: 500 x (3000 / 1500 + 1) = 1500 pending.
        let mut e = VersionEdit::default();
        e.add_file(1, file(1, "a", "z", 1500, 0));
        e.add_file(2, file(10, "a", "z", 3000, 0));
        let v = Version::new(4).apply(&[&e]).unwrap();
        assert_eq!(v.estimate_pending_compaction_bytes(&o), 1500);
        // min(soft / 4, max(3000 / 8, 2 x 1000)) = min(soft / 4, 2000).
        o.soft_pending_compaction_bytes_limit = 4 * 1500;
        assert!(v.needs_compaction_speedup(&o), "1500 pending reach a quarter of a 6000 soft limit");
        o.soft_pending_compaction_bytes_limit = 4 * 1501;
        assert!(!v.needs_compaction_speedup(&o), "1500 pending under a quarter of 6004 and under 2000");
        // With no soft limit near, the bottommost rule alone decides.
        o.soft_pending_compaction_bytes_limit = 1 << 40;
        assert!(!v.needs_compaction_speedup(&o), "1500 pending under max(3000 / 8, 2 x 1000)");
        o.max_bytes_for_level_base = 700;
        // 800 over 700, 800 x (3000 / 1500 + 1) = 2400 pending against
        // max(3000 / 8, 2 x 700) = 1400.
        assert!(v.needs_compaction_speedup(&o), "the debt passes twice the base level's target");
    }

    /// What the L0 stall triggers count: L0 files (leveled), every sorted run
    /// (universal: L0 files and non-empty levels, newest first), nothing (FIFO).
    #[test]
    fn the_l0_delay_count_follows_the_style() {
        let mut e = VersionEdit::default();
        e.add_file(0, file(1, "a", "c", 10, 1));
        e.add_file(0, file(2, "b", "d", 10, 2));
        e.add_file(2, file(3, "a", "z", 100, 0));
        e.add_file(3, file(4, "a", "z", 1000, 0));
        let v = Version::new(4).apply(&[&e]).unwrap();
        let with = |style| StorageInfoOptions { style, ..opts() };
        assert_eq!(v.l0_delay_trigger_count(&with(TreeStyle::Level)), 2);
        assert_eq!(v.l0_delay_trigger_count(&with(TreeStyle::Universal)), 4);
        assert_eq!(v.l0_delay_trigger_count(&with(TreeStyle::Fifo { max_table_files_size: 1 })), 0);
        let runs = v.sorted_runs(&HashSet::from([3]));
        let shape: Vec<_> = runs.iter().map(|r| (r.level, r.size, r.being_compacted)).collect();
        assert_eq!(shape, [(0, 10, false), (0, 10, false), (2, 100, true), (3, 1000, false)]);
    }
}
