//! The thesis's compaction auto-tuner (`auto_tuned_compactions`, seed 000
//! §3.3.6-3.3.7 and §3.5.6), reproduced faithfully as the baseline Ebb's own
//! modes must beat.
//!
//! Owns: the decision whether automatic compaction is on, and the option
//! changes that carry it out. It reads nothing itself: every tune interval the
//! caller hands it the drains of the rate limiter's two priorities
//! ([`DrainSample`]), or simply a fresh [`RateLimiterStats`] through
//! [`CompactionAutoTuner::poll`].
//!
//! The rule (`GenericRateLimiter::TuneCompaction()`, thesis Fig. 3.9), with
//! `high% = high_drains * 100 / intervals` and `low%` likewise (integer
//! division each), `total% = high% + low%`:
//! 1. `total% == 0`: nothing changes.
//! 2. `total% <= 90 && high% < 50`: enable compaction.
//! 3. `total% >= 90 && high% >= 50`: disable compaction.
//! 4. otherwise nothing changes.
//!
//! The thesis's prose says "enable when total I/O is below 90 % and flush I/O
//! below 50 %"; its code says `<= 90`, which is what runs here. There is no
//! timed hysteresis, only the dead band of rules 1 and 4: with `total% > 90`
//! and `high% < 50` (compaction-heavy), or `total% < 90` and `high% >= 50`
//! (flush-heavy but the disk not full), the state stays as it was. The thesis
//! names the consequence (§3.3.7): a load hovering just above 50 % flush
//! drains never re-enables compaction. Rule 1 has another: if writes stop
//! abruptly while compaction is disabled there are no drains at all, and
//! compaction stays disabled; Ebb's adaptive and idle modes close that gap.
//!
//! Carrying a decision out (thesis Fig. 3.3 and Fig. 3.18), as RocksDB option
//! names and values for `set_options`:
//! - disable: `disable_auto_compactions=true`,
//!   `level0_file_num_compaction_trigger=1073741824` (`1<<30`);
//! - enable: `disable_auto_compactions=false` and the trigger back to its
//!   configured value (the thesis saves it at disable time);
//! - `PrepareAutoTunedCompactions()` lifts the stall triggers once, when the
//!   tuner is switched on, and never restores them:
//!   `level0_slowdown_writes_trigger` and `level0_stop_writes_trigger` to
//!   `1<<30`, `soft_pending_compaction_bytes_limit` and
//!   `hard_pending_compaction_bytes_limit` to 0 (no limit). That is
//!   [`StallLifting::AtOpen`], the default. [`StallLifting::WhileDisabled`]
//!   is Ebb's variant: lift them on disable, restore them on enable.
//!
//! Per instance: the thesis kept this state in the process-global `Env`, so
//! one tuned database toggled every database in the process (§3.3.3).
//!
//! Thread safety: plain data, `&mut self`; the caller serialises.

use super::rate_limiter::RateLimiterStats;

/// The value the thesis uses for "never" in L0 triggers: `1<<30`.
pub const TRIGGER_NEVER: i32 = 1 << 30;

/// When the stall triggers are lifted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StallLifting {
    /// Once, when the tuner is switched on, for good (thesis §3.5.6, Fig. 3.18).
    #[default]
    AtOpen,
    /// On each disable, restored on enable (Ebb).
    WhileDisabled,
}

/// Configuration of a [`CompactionAutoTuner`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoTunerConfig {
    /// Flush (high-priority) drain percentage at which compaction may be
    /// disabled, and under which it may be enabled. Thesis: 50.
    pub flush_watermark_pct: u64,
    /// Total drain percentage at or over which compaction may be disabled, and
    /// at or under which it may be enabled. Thesis: 90.
    pub total_watermark_pct: u64,
    /// Tune interval, microseconds. Thesis: every 100 refills of the rate
    /// limiter (`kRefillsPerTune`), 10 s at the default 100 ms refill period.
    pub interval_us: u64,
    /// When the stall triggers are lifted.
    pub stall_lifting: StallLifting,
}

impl Default for AutoTunerConfig {
    fn default() -> AutoTunerConfig {
        AutoTunerConfig {
            flush_watermark_pct: 50,
            total_watermark_pct: 90,
            interval_us: 10_000_000,
            stall_lifting: StallLifting::AtOpen,
        }
    }
}

/// Drains of each priority over one tune interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DrainSample {
    /// Refill periods in the interval, rounded up (RocksDB `elapsed_intervals`).
    pub intervals: u64,
    /// Periods drained by flushes (high priority).
    pub high_drains: u64,
    /// Periods drained by compactions (low priority).
    pub low_drains: u64,
}

impl DrainSample {
    /// The sample between two snapshots of one limiter, `prev` taken first.
    pub fn between(prev: &RateLimiterStats, cur: &RateLimiterStats) -> DrainSample {
        let period = cur.refill_period_us.max(1);
        let elapsed = cur.now_micros.saturating_sub(prev.now_micros);
        DrainSample {
            intervals: elapsed.div_ceil(period),
            high_drains: cur.high.drains.saturating_sub(prev.high.drains),
            low_drains: cur.low.drains.saturating_sub(prev.low.drains),
        }
    }

    fn pct(&self, drains: u64) -> u64 {
        drains.saturating_mul(100).checked_div(self.intervals).unwrap_or(0)
    }

    /// `high_drains * 100 / intervals`.
    pub fn high_pct(&self) -> u64 {
        self.pct(self.high_drains)
    }

    /// `low_drains * 100 / intervals`.
    pub fn low_pct(&self) -> u64 {
        self.pct(self.low_drains)
    }

    /// `high_pct() + low_pct()`, as the thesis adds them.
    pub fn total_pct(&self) -> u64 {
        self.high_pct() + self.low_pct()
    }
}

/// What the rule said about one interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Rule 2: compaction should run.
    Enable,
    /// Rule 3: compaction should stop.
    Disable,
    /// Rules 1 and 4: leave it as it is.
    Keep,
}

/// The outcome of one tune.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// What the rule said.
    pub verdict: Verdict,
    /// The compaction state changed (a disable while disabled changes nothing).
    pub toggled: bool,
    /// Whether automatic compaction is on after this decision.
    pub compaction_enabled: bool,
    /// The sample's `high%`.
    pub high_pct: u64,
    /// The sample's `low%`.
    pub low_pct: u64,
    /// The sample's `total%`.
    pub total_pct: u64,
    /// Options to set now, RocksDB names and text values; empty unless toggled.
    pub changes: Vec<(&'static str, String)>,
}

impl Decision {
    /// [`Decision::changes`] borrowed, the shape `Db::set_options` takes.
    pub fn option_pairs(&self) -> Vec<(&str, &str)> {
        self.changes.iter().map(|(n, v)| (*n, v.as_str())).collect()
    }
}

/// The configured values of the options the tuner overrides. Restores go back
/// to these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunedOptions {
    /// RocksDB `disable_auto_compactions`.
    pub disable_auto_compactions: bool,
    /// RocksDB `level0_file_num_compaction_trigger`.
    pub level0_file_num_compaction_trigger: i32,
    /// RocksDB `level0_slowdown_writes_trigger`.
    pub level0_slowdown_writes_trigger: i32,
    /// RocksDB `level0_stop_writes_trigger`.
    pub level0_stop_writes_trigger: i32,
    /// RocksDB `soft_pending_compaction_bytes_limit`; 0 is no limit.
    pub soft_pending_compaction_bytes_limit: u64,
    /// RocksDB `hard_pending_compaction_bytes_limit`; 0 is no limit.
    pub hard_pending_compaction_bytes_limit: u64,
}

impl Default for TunedOptions {
    /// RocksDB's (and Ebb's) defaults.
    fn default() -> TunedOptions {
        TunedOptions {
            disable_auto_compactions: false,
            level0_file_num_compaction_trigger: 4,
            level0_slowdown_writes_trigger: 20,
            level0_stop_writes_trigger: 36,
            soft_pending_compaction_bytes_limit: 64 << 30,
            hard_pending_compaction_bytes_limit: 256 << 30,
        }
    }
}

impl TunedOptions {
    fn stall_pairs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("level0_slowdown_writes_trigger", self.level0_slowdown_writes_trigger.to_string()),
            ("level0_stop_writes_trigger", self.level0_stop_writes_trigger.to_string()),
            ("soft_pending_compaction_bytes_limit", self.soft_pending_compaction_bytes_limit.to_string()),
            ("hard_pending_compaction_bytes_limit", self.hard_pending_compaction_bytes_limit.to_string()),
        ]
    }
}

/// `PrepareAutoTunedCompactions()` and the toggle of thesis Fig. 3.3, as data:
/// which options to set when, relative to the configured [`TunedOptions`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompactionOverrides {
    /// When the stall triggers are lifted.
    pub stall_lifting: StallLifting,
}

impl CompactionOverrides {
    /// The stall lifts: L0 slowdown and stop triggers to `1<<30`, pending-bytes
    /// limits to 0 (no limit).
    fn lifted_stalls() -> Vec<(&'static str, String)> {
        let lifted = TunedOptions {
            level0_slowdown_writes_trigger: TRIGGER_NEVER,
            level0_stop_writes_trigger: TRIGGER_NEVER,
            soft_pending_compaction_bytes_limit: 0,
            hard_pending_compaction_bytes_limit: 0,
            ..TunedOptions::default()
        };
        lifted.stall_pairs()
    }

    /// Changes to apply once when the tuner is switched on (Fig. 3.18);
    /// nothing for [`StallLifting::WhileDisabled`].
    pub fn prepare(&self) -> Vec<(&'static str, String)> {
        match self.stall_lifting {
            StallLifting::AtOpen => CompactionOverrides::lifted_stalls(),
            StallLifting::WhileDisabled => Vec::new(),
        }
    }

    /// Changes that disable compaction (Fig. 3.3 `DisableCompactions`).
    pub fn disable(&self) -> Vec<(&'static str, String)> {
        let mut changes = vec![
            ("disable_auto_compactions", "true".to_string()),
            ("level0_file_num_compaction_trigger", TRIGGER_NEVER.to_string()),
        ];
        if self.stall_lifting == StallLifting::WhileDisabled {
            changes.extend(CompactionOverrides::lifted_stalls());
        }
        changes
    }

    /// Changes that enable compaction again (Fig. 3.3 `EnableCompactions`):
    /// `disable_auto_compactions=false` and the configured trigger; for
    /// [`StallLifting::WhileDisabled`] also the configured stall options.
    pub fn enable(&self, base: &TunedOptions) -> Vec<(&'static str, String)> {
        let mut changes = vec![
            ("disable_auto_compactions", "false".to_string()),
            ("level0_file_num_compaction_trigger", base.level0_file_num_compaction_trigger.to_string()),
        ];
        if self.stall_lifting == StallLifting::WhileDisabled {
            changes.extend(base.stall_pairs());
        }
        changes
    }
}

/// Counters of a [`CompactionAutoTuner`], for statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AutoTunerStats {
    /// Intervals judged.
    pub tunes: u64,
    /// Disable verdicts, repeated ones included (the thesis's
    /// `COMPACTION_DISABLED_COUNT` ticker counts these).
    pub disable_verdicts: u64,
    /// Times compaction was switched off.
    pub disables: u64,
    /// Times compaction was switched on.
    pub enables: u64,
}

/// The thesis's compaction toggle, one per database instance.
#[derive(Debug, Clone)]
pub struct CompactionAutoTuner {
    config: AutoTunerConfig,
    overrides: CompactionOverrides,
    base: TunedOptions,
    enabled: bool,
    last: Option<RateLimiterStats>,
    stats: AutoTunerStats,
}

impl CompactionAutoTuner {
    /// A tuner for a database configured with `base`. Compaction starts in the
    /// state `base` says (the thesis copies `disable_auto_compactions` into its
    /// environment at open). Apply [`CompactionAutoTuner::prepare_changes`] once.
    pub fn new(config: AutoTunerConfig, base: TunedOptions) -> CompactionAutoTuner {
        CompactionAutoTuner {
            config,
            overrides: CompactionOverrides { stall_lifting: config.stall_lifting },
            base,
            enabled: !base.disable_auto_compactions,
            last: None,
            stats: AutoTunerStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &AutoTunerConfig {
        &self.config
    }

    /// Option changes to apply when the tuner is switched on
    /// (`PrepareAutoTunedCompactions`).
    pub fn prepare_changes(&self) -> Vec<(&'static str, String)> {
        self.overrides.prepare()
    }

    /// Records new configured values (after a user's `set_options`), so that
    /// an enable restores those.
    pub fn set_base_options(&mut self, base: TunedOptions) {
        self.base = base;
    }

    /// Whether automatic compaction is on, as far as the tuner decided.
    pub fn compaction_enabled(&self) -> bool {
        self.enabled
    }

    /// Counters so far.
    pub fn stats(&self) -> AutoTunerStats {
        self.stats
    }

    /// Judges one interval's drains (rules 1-4 of the module contract).
    pub fn observe(&mut self, sample: &DrainSample) -> Decision {
        let (high_pct, low_pct, total_pct) = (sample.high_pct(), sample.low_pct(), sample.total_pct());
        let c = &self.config;
        let verdict = if sample.intervals == 0 || total_pct == 0 {
            Verdict::Keep
        } else if total_pct <= c.total_watermark_pct && high_pct < c.flush_watermark_pct {
            Verdict::Enable
        } else if total_pct >= c.total_watermark_pct && high_pct >= c.flush_watermark_pct {
            Verdict::Disable
        } else {
            Verdict::Keep
        };
        self.stats.tunes += 1;
        let mut changes = Vec::new();
        match verdict {
            Verdict::Enable if !self.enabled => {
                self.enabled = true;
                self.stats.enables += 1;
                changes = self.overrides.enable(&self.base);
            }
            Verdict::Disable => {
                self.stats.disable_verdicts += 1;
                if self.enabled {
                    self.enabled = false;
                    self.stats.disables += 1;
                    changes = self.overrides.disable();
                }
            }
            _ => {}
        }
        Decision {
            verdict,
            toggled: !changes.is_empty(),
            compaction_enabled: self.enabled,
            high_pct,
            low_pct,
            total_pct,
            changes,
        }
    }

    /// Feeds a fresh snapshot of the rate limiter; returns a decision once a
    /// tune interval has passed since the previous one (the first call only
    /// records where the first interval starts). Call it as often as you like.
    pub fn poll(&mut self, stats: &RateLimiterStats) -> Option<Decision> {
        let Some(prev) = &self.last else {
            self.last = Some(stats.clone());
            return None;
        };
        if stats.now_micros.saturating_sub(prev.now_micros) < self.config.interval_us {
            return None;
        }
        let sample = DrainSample::between(prev, stats);
        self.last = Some(stats.clone());
        Some(self.observe(&sample))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::clock::{micros, Clock, ManualClock};
    use crate::tuning::rate_limiter::{IoPriority, RateLimiter, RateLimiterOptions};

    /// Runs the table in testdata/thesis_tuner.txt: each line a sample and the
    /// percentages, verdict and resulting state the thesis's rules give.
    #[test]
    fn toggle_decisions_follow_the_thesis_rules() {
        let table = include_str!("testdata/thesis_tuner.txt");
        let mut tuner = CompactionAutoTuner::new(AutoTunerConfig::default(), TunedOptions::default());
        let mut failures = Vec::new();
        let mut rows = 0;
        for (lineno, line) in table.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            if line == "reset" {
                tuner = CompactionAutoTuner::new(AutoTunerConfig::default(), TunedOptions::default());
                continue;
            }
            let (input, expected) = line.split_once("=>").unwrap();
            let n: Vec<u64> = input.split_whitespace().map(|x| x.parse().unwrap()).collect();
            let sample = DrainSample { intervals: n[0], high_drains: n[1], low_drains: n[2] };
            let d = tuner.observe(&sample);
            let verdict = match d.verdict {
                Verdict::Enable => "enable",
                Verdict::Disable => "disable",
                Verdict::Keep => "keep",
            };
            let state = if d.compaction_enabled { "on" } else { "off" };
            let got = format!("{} {} {} {verdict} {state}", d.high_pct, d.low_pct, d.total_pct);
            let want = expected.split_whitespace().collect::<Vec<_>>().join(" ");
            if got != want {
                failures.push(format!("line {}: {input}=> want {want}, got {got}", lineno + 1));
            }
            rows += 1;
        }
        assert!(rows >= 20, "table too short: {rows}");
        assert!(failures.is_empty(), "\n{}", failures.join("\n"));
    }

    #[test]
    fn disable_and_enable_carry_the_thesis_option_changes() {
        let base = TunedOptions { level0_file_num_compaction_trigger: 6, ..TunedOptions::default() };
        let mut tuner = CompactionAutoTuner::new(AutoTunerConfig::default(), base);
        assert_eq!(
            tuner.prepare_changes(),
            vec![
                ("level0_slowdown_writes_trigger", "1073741824".to_string()),
                ("level0_stop_writes_trigger", "1073741824".to_string()),
                ("soft_pending_compaction_bytes_limit", "0".to_string()),
                ("hard_pending_compaction_bytes_limit", "0".to_string()),
            ]
        );
        let hot = DrainSample { intervals: 100, high_drains: 70, low_drains: 25 };
        let d = tuner.observe(&hot);
        assert!(d.toggled);
        assert_eq!(
            d.option_pairs(),
            vec![("disable_auto_compactions", "true"), ("level0_file_num_compaction_trigger", "1073741824")]
        );
        // A second disable verdict changes nothing but is still counted.
        let d = tuner.observe(&hot);
        assert!(!d.toggled && d.changes.is_empty());
        // The user changed the trigger meanwhile: enable restores the new value.
        tuner.set_base_options(TunedOptions { level0_file_num_compaction_trigger: 8, ..base });
        let d = tuner.observe(&DrainSample { intervals: 100, high_drains: 10, low_drains: 10 });
        assert_eq!(
            d.option_pairs(),
            vec![("disable_auto_compactions", "false"), ("level0_file_num_compaction_trigger", "8")]
        );
        assert_eq!(tuner.stats(), AutoTunerStats { tunes: 3, disable_verdicts: 2, disables: 1, enables: 1 });
    }

    #[test]
    fn stalls_can_be_lifted_only_while_disabled() {
        let config = AutoTunerConfig { stall_lifting: StallLifting::WhileDisabled, ..AutoTunerConfig::default() };
        let base = TunedOptions::default();
        let mut tuner = CompactionAutoTuner::new(config, base);
        assert!(tuner.prepare_changes().is_empty());
        let d = tuner.observe(&DrainSample { intervals: 100, high_drains: 90, low_drains: 5 });
        let names: Vec<_> = d.changes.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "disable_auto_compactions",
                "level0_file_num_compaction_trigger",
                "level0_slowdown_writes_trigger",
                "level0_stop_writes_trigger",
                "soft_pending_compaction_bytes_limit",
                "hard_pending_compaction_bytes_limit"
            ]
        );
        let d = tuner.observe(&DrainSample { intervals: 100, high_drains: 5, low_drains: 5 });
        assert_eq!(
            d.option_pairs(),
            vec![
                ("disable_auto_compactions", "false"),
                ("level0_file_num_compaction_trigger", "4"),
                ("level0_slowdown_writes_trigger", "20"),
                ("level0_stop_writes_trigger", "36"),
                ("soft_pending_compaction_bytes_limit", "68719476736"),
                ("hard_pending_compaction_bytes_limit", "274877906944"),
            ]
        );
    }

    #[test]
    fn a_database_configured_without_compaction_starts_disabled() {
        let base = TunedOptions { disable_auto_compactions: true, ..TunedOptions::default() };
        let mut tuner = CompactionAutoTuner::new(AutoTunerConfig::default(), base);
        assert!(!tuner.compaction_enabled());
        // As in the thesis, a calm interval turns it on.
        let d = tuner.observe(&DrainSample { intervals: 100, high_drains: 1, low_drains: 0 });
        assert!(d.toggled && d.compaction_enabled);
    }

    /// Spends one simulated refill period: requests `high` and `low` bytes,
    /// then moves the clock to the next period boundary.
    fn period(clock: &ManualClock, limiter: &RateLimiter, high: u64, low: u64) {
        let now = || micros(clock.monotonic());
        let end = (now() / 100_000 + 1) * 100_000;
        if high > 0 {
            limiter.request(high, IoPriority::High).unwrap();
        }
        if low > 0 {
            limiter.request(low, IoPriority::Low).unwrap();
        }
        if now() < end {
            clock.advance(Duration::from_micros(end - now()));
        }
    }

    #[test]
    fn the_tuner_reads_drains_from_the_rate_limiter() {
        let clock = Arc::new(ManualClock::new(Duration::ZERO));
        let limiter = RateLimiter::new(RateLimiterOptions::new(10_000_000), clock.clone()).unwrap();
        let mut tuner = CompactionAutoTuner::new(AutoTunerConfig::default(), TunedOptions::default());
        let refill = limiter.single_burst_bytes();
        assert!(tuner.poll(&limiter.stats()).is_none(), "the first poll only starts the interval");
        // Runs refill periods, the i-th asking `pattern(i)` = (flush, compaction)
        // bytes, until the tuner decides.
        let mut until_decision = |pattern: &dyn Fn(u64) -> (u64, u64)| {
            for i in 0.. {
                let (high, low) = pattern(i);
                period(&clock, &limiter, high, low);
                if let Some(d) = tuner.poll(&limiter.stats()) {
                    return d;
                }
            }
            unreachable!()
        };
        let decisions = [
            // Flushes and compactions both want more than the disk gives.
            until_decision(&|_| (refill * 3 / 2, refill / 2)),
            // Writes stop: no requests, no drains.
            until_decision(&|_| (0, 0)),
            // A flush burst over the refill once every six periods.
            until_decision(&|i| (if i % 6 == 0 { refill * 2 } else { refill / 10 }, 0)),
        ];
        let summary: Vec<_> = decisions.iter().map(|d| (d.verdict, d.compaction_enabled)).collect();
        assert_eq!(
            summary,
            [(Verdict::Disable, false), (Verdict::Keep, false), (Verdict::Enable, true)],
            "{decisions:#?}"
        );
        assert!(decisions[0].high_pct >= 50 && decisions[0].total_pct >= 90, "{:?}", decisions[0]);
        assert_eq!(decisions[1].total_pct, 0, "no drains: the thesis leaves compaction off");
    }
}
