//! Ebb's own background tuning, beyond the thesis: the `adaptive` and `idle`
//! modes, as a policy object fed with one [`Observation`] per interval and
//! answering with [`Action`]s for the engine.
//!
//! Owns: the tuning phase, the smoothed rates, the learned I/O budget, the
//! idle detector, and what it last told the engine (so it only emits changes).
//! It touches no engine type; the caller maps actions to engine calls.
//!
//! Per observation (every `interval_us`, 500 ms by default):
//! 1. Rates. Client, flush, WAL and compaction bytes per second over the
//!    interval, smoothed (exponential average, newest sample weighted
//!    `rate_smoothing_pct`). Foreground = flush + WAL.
//! 2. Budget. The configured `io_budget_bytes_per_sec`, or, when that is 0,
//!    learned: `max(budget * 0.5^(dt / half_life), flush + WAL + compaction)`,
//!    raised by 5 % whenever compaction used at least 95 % of its limit (the
//!    limit was binding, so the disk may give more; the same 5 % step as
//!    RocksDB's `Tune()`). Pacing would otherwise hide the disk's real speed.
//!    A learned budget paces nothing until compaction has run unpaced in
//!    two intervals (the limit is [`UNPACED_BYTES_PER_SEC`] until then):
//!    flush and WAL rates alone say nothing of what the disk gives
//!    compaction.
//! 3. Pacing (thesis §5.2 "Rate-limiting compactions": "sum the rates to the
//!    maximum write rate"): compaction limit = `max(floor, budget - foreground)`,
//!    floor = `compaction_floor_pct` of the budget. Re-emitted when it moves by
//!    `rate_change_pct` or more.
//! 4. Idle (UW paper §5, §6.3.2): the [`IdleDetector`] with its policy.
//! 5. Bounds: in some column family, L0 files >= `max_l0_files`, or L0
//!    bytes >= `max_l0_debt_ratio` times the bytes below L0 (once those
//!    reach `l0_debt_min_tree_bytes`), or space amplification >=
//!    `max_space_amplification`, or pending compaction bytes >=
//!    `max_pending_compaction_bytes` (each off at 0) puts the tuner in
//!    [`Phase::Forced`]: compaction runs at the full budget with
//!    `catch_up_subcompactions`, whatever the load, until every family's
//!    bounded figures are back under `bound_release_pct` of their bounds
//!    (space amplification: of its excess over 1). The decision names the
//!    family that crossed ([`Decision::bound_family`]).
//! 6. Deferral, by [`DeferPolicy`]:
//!    - `FlushPressure` (adaptive): defer when the client is not idle and
//!      foreground >= `defer_pct` of the budget, or >= `peak_defer_pct` of
//!      the highest foreground rate seen (decaying with the budget), or
//!      `pause_immutable_memtables` memtables wait for flush; once deferred,
//!      stay so until foreground falls under `resume_pct` of the budget and
//!      `peak_resume_pct` of the peak (and memtables drain), or the client
//!      goes idle. Load pressure starts a deferral only while some level's
//!      score is at least `defer_min_score` (compaction has fallen behind);
//!      waiting memtables start one whatever the score. Nor does load
//!      pressure defer while point reads and seeks are at least
//!      `defer_max_read_share_pct` of client operations: deferral trades
//!      reads for ingest, and a load that reads pays at once.
//!      A bound that forces compaction during such a deferral shows the
//!      load is sustained, not a burst a trough will pay for: deferral is
//!      then held off (compaction paced, as with no deferral) until
//!      foreground falls under both defer shares, or the client goes idle.
//!      Without this a steady load at its own peak cycled deferred, forced,
//!      deferred for as long as it lasted.
//!    - `UntilIdle` (idle): defer whenever the client is not idle.
//!    - `Never`: pacing only.
//! 7. Yield (thesis §3.5.3, §5.2 "Cancel compactions"): while deferred, pause
//!    running compactions when `pause_immutable_memtables` memtables wait, or
//!    always with `pause_when_deferred`; continue them when that ends.
//! 8. Catch-up (thesis §3.5.2, §5.2 "Manual compactions"): when a deferral
//!    ends and some level's score is >= 1, compaction runs at the full budget
//!    with `catch_up_subcompactions` until every score is < 1, then pacing
//!    resumes with `base_subcompactions`. While clients read (point reads and
//!    seeks at least `catch_up_read_share_pct` of their operations) the
//!    catch-up keeps `base_subcompactions` while L0 is under its
//!    compaction trigger: readers need the cores more than the debt below
//!    L0 needs paying at once. L0 at its trigger keeps
//!    `catch_up_subcompactions`: every read checks each of its runs.
//! 9. Write stalls: the engine runs with [`AdaptiveConfig::stall_backstop`]
//!    (slowdown and stop far above the configured L0 triggers) so that a
//!    write burst can run ahead of compaction. While point reads and seeks
//!    are at least `stall_read_share_pct` of client operations, the tuner
//!    asks for the configured triggers and limits instead
//!    ([`Action::ConfiguredWriteStalls`]), and for the backstop again once
//!    reads fall under half that share: a writer beside readers is held as
//!    RocksDB holds it, and the runs a read checks stay few.
//!
//! The trade-off of the bounds: deferring buys ingest throughput with reads
//! (each L0 file is one more place a lookup must check) and with a debt that
//! compaction repays later; the bound caps the debt. Past it, ingest competes
//! with compaction again, as without tuning.
//!
//! Column families. The rates, the budget, pacing, subcompactions, the
//! pause gate and the phase are the database's: its families share the
//! disk, the threads and the write path. The tree's shape is observed per
//! family ([`Observation::other_families`]): a bound is crossed when any
//! family's figure crosses it, compaction is behind (steps 6 and 8) when any
//! family's score is, memtables wait when some family's do (each family's
//! writes stall on its own memtables), and a catch-up keeps its
//! subcompactions beside readers when any family's L0 is at its trigger.
//! With one family this is the family's shape, as before. Each family's
//! write stalls are its own (step 9): the backstop raises each family's
//! configured triggers, and the configured ones put back are the family's
//! ([`AdaptiveTuner::track_family`], [`AdaptiveTuner::commands`]).
//!
//! Thread safety: plain data, `&mut self`; one tuning thread owns it.

use std::collections::BTreeMap;

use super::command::{FamilyId, TuningCommand, WriteStallLimits};
use super::idle::{IdleConfig, IdleDetector};

/// When compaction is deferred.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeferPolicy {
    /// Defer while flushes and the WAL use much of the budget, or while the
    /// load is near its own peak (Ebb adaptive). A deferral ends when both
    /// have fallen under their resume shares.
    FlushPressure {
        /// Foreground share of the budget, percent, at which compaction is deferred.
        /// Default 50, the thesis's flush watermark.
        defer_pct: u64,
        /// Foreground share under which a deferral ends. Default 25: the gap to
        /// `defer_pct` keeps the tuner from flapping on a noisy load.
        resume_pct: u64,
        /// Foreground share of its own peak (learned, decaying with the
        /// budget's half-life), percent, at which compaction is deferred; 0
        /// disables. Default 50. The budget share alone misses CPU-bound
        /// machines: when writes land in the page cache, compaction's own
        /// throughput inflates the learned budget and flushes never look
        /// pressed, yet compaction takes the cores the writers need.
        peak_defer_pct: u64,
        /// Foreground share of its peak under which a deferral may end.
        /// Default 15: a trough of a periodic load (W2's is 20 % of its peak)
        /// is not the end of the load; a cool-down (4 %) or idle is.
        peak_resume_pct: u64,
    },
    /// Defer whenever the client is writing (UW paper: compaction only when idle).
    UntilIdle,
    /// Never defer; pace only.
    #[cfg(test)]
    Never,
}

/// Configuration of an [`AdaptiveTuner`]. Start from [`AdaptiveConfig::adaptive`]
/// or [`AdaptiveConfig::idle`].
#[derive(Debug, Clone, PartialEq)]
pub struct AdaptiveConfig {
    /// How often to call [`AdaptiveTuner::observe`], microseconds; 500 ms, the
    /// paper's probe interval. Any spacing works; rates use the real elapsed time.
    pub interval_us: u64,
    /// Disk write budget for flush + WAL + compaction, bytes/s; 0 learns it.
    pub io_budget_bytes_per_sec: u64,
    /// Starting point of a learned budget, bytes/s. Default 64 MiB/s. It
    /// paces nothing: a learned budget paces compaction only once
    /// compaction has run unpaced (module step 2).
    pub initial_budget_bytes_per_sec: u64,
    /// Half-life of a learned budget's decay, microseconds. Default 10 min:
    /// slow, so a quiet spell does not forget what the disk can do.
    pub budget_half_life_us: u64,
    /// Compaction never gets less than this share of the budget, percent.
    /// Default 5 (RocksDB's auto-tuner floor, `max / 20`).
    pub compaction_floor_pct: u64,
    /// A new compaction limit is emitted when it moves at least this much,
    /// percent; default 5. Avoids a stream of tiny changes.
    pub rate_change_pct: u64,
    /// Weight of the newest sample in the smoothed rates, percent (100: no
    /// smoothing). Default 50: flushes land a file at a time, so raw rates jump.
    pub rate_smoothing_pct: u64,
    /// When compaction is deferred.
    pub defer: DeferPolicy,
    /// Immutable memtables waiting for flush at which flushes "need the disk":
    /// defer (adaptive) and pause running compactions. 0 disables. Default 2.
    pub pause_immutable_memtables: usize,
    /// Pause running compactions whenever deferred, not only when memtables
    /// wait. Default off (a paused compaction's work is lost); on for `idle`.
    pub pause_when_deferred: bool,
    /// Idle detection (UW paper).
    pub idle: IdleConfig,
    /// `FlushPressure` enters a deferral for load only while some level's
    /// compaction score (`Version::level_scores`, version/storage_info.rs) is at least
    /// this: compaction has fallen behind the load. Below it compaction
    /// keeps up, there is no debt worth deferring, and the tree stays what
    /// `off` leaves. Memtables waiting for flush defer whatever the score;
    /// a deferral under way ends by load, not by score. 0 disables the
    /// gate. Default 2 (L0 at twice its trigger, or a level at twice its
    /// target).
    pub defer_min_score: f64,
    /// `max_subcompactions` during catch-up and forced compaction. Default 2
    /// (thesis §3.5.4: more did not help).
    pub catch_up_subcompactions: u32,
    /// `max_subcompactions` otherwise. Default 1, RocksDB's default.
    pub base_subcompactions: u32,
    /// L0 files at which compaction is forced; 0 disables. Default 1024.
    pub max_l0_files: usize,
    /// L0 bytes, as a multiple of the bytes in the levels below L0, at which
    /// compaction is forced; 0 disables. The file bound alone does not cap
    /// a deferral's debt: L0 run merges keep the file count down while L0's
    /// bytes grow, and under a load that never eases (no trough to catch up
    /// in) L0 grew to four times the tree below it, every read checking it
    /// and the run merges rewriting gigabytes (docs/tuning.md, "The L0 debt
    /// bound"). Default 2, RocksDB universal compaction's
    /// `max_size_amplification_percent` of 200: the runs above the last may
    /// hold twice its bytes. 1 left W5's reads fewer L0 files and forced
    /// compaction inside W3's ten-second bursts (docs/tuning.md).
    pub max_l0_debt_ratio: f64,
    /// The bytes below L0 from which `max_l0_debt_ratio` applies: a young
    /// tree, whose L0 is nearly all its data (the thesis's first wave), is
    /// bounded by `max_l0_files` alone. Set from the default family's
    /// `max_bytes_for_level_base` (a full base level); default 256 MiB.
    pub l0_debt_min_tree_bytes: u64,
    /// Space amplification at which compaction is forced; 0 disables, the
    /// default, because the usual estimate (all bytes / last level's bytes,
    /// see [`space_amplification`]) is meaningless while the tree is young.
    pub max_space_amplification: f64,
    /// Pending compaction bytes at which compaction is forced; 0 disables (default).
    pub max_pending_compaction_bytes: u64,
    /// Forced compaction ends when the bounded figures are under this share of
    /// their bounds, percent. Default 75.
    pub bound_release_pct: u64,
    /// While deferred, merge L0 files into fewer runs (L0 only, by size
    /// ratio; `compaction::picker::pick_l0_run_merge`), paced to the
    /// headroom the load leaves: `budget x (1 - foreground / peak)`, at
    /// least the floor. Adaptive: on; idle: off (the paper compacts only in
    /// idle time).
    pub merge_l0_runs_when_deferred: bool,
    /// While point reads and seeks are at least this share of client
    /// operations (reads + keys written), percent, a catch-up with L0
    /// under its compaction trigger runs with `base_subcompactions` instead
    /// of `catch_up_subcompactions`, leaving readers the cores. 0 disables.
    /// Default 10.
    pub catch_up_read_share_pct: u64,
    /// While point reads and seeks are at least this share of client
    /// operations, percent, load pressure does not defer compaction (and
    /// ends a deferral it started): a deferral buys ingest with reads, each
    /// L0 run one more place a lookup checks, and a load that reads pays
    /// for it at once. Waiting memtables still defer. 0 disables. Default
    /// 10, `catch_up_read_share_pct`'s share.
    pub defer_max_read_share_pct: u64,
    /// While point reads and seeks are at least this share of client
    /// operations, percent, writes are held by the engine's write
    /// controller as configured (the options' L0 slowdown and stop triggers
    /// and pending-bytes limits, RocksDB's 20 and 36 files by default)
    /// instead of the backstop above `max_l0_files`
    /// ([`AdaptiveConfig::stall_backstop`]); the backstop returns once reads
    /// fall under half this share. The backstop is what lets a write burst
    /// run ahead of compaction; beside readers it let a writer at full speed
    /// grow L0 to tens of runs every read checked, where RocksDB's
    /// controller slows it at 20 (docs/tuning.md, "Readers get the
    /// configured write controller"). 0 keeps the backstop always. Default
    /// 10, `defer_max_read_share_pct`'s share.
    pub stall_read_share_pct: u64,
}

/// What the load leaves for L0 run merges during a deferral, bytes/s: the
/// budget times the share of the peak foreground rate not in use now, at
/// least `floor_pct` of the budget. At the wave's peak that is the floor; in
/// a trough at a fifth of the peak, 80 % of the budget.
fn wave_headroom(rates: &Rates, floor_pct: u64) -> u64 {
    let floor = rates.budget.saturating_mul(floor_pct) / 100;
    let peak = rates.peak_foreground.max(rates.foreground).max(1);
    let unused = peak - rates.foreground.min(peak);
    let headroom = u128::from(rates.budget) * u128::from(unused) / u128::from(peak);
    u64::try_from(headroom).unwrap_or(u64::MAX).max(floor)
}

/// Whether foreground is at least `pct` of the budget or, with the peak
/// rule on, at least `peak_pct` of its own peak (`FlushPressure`).
fn load_pressed(rates: &Rates, pct: u64, peak_rule: bool, peak_pct: u64) -> bool {
    let share_of = |reference: u64, pct: u64| {
        rates.foreground > 0 && u128::from(rates.foreground) * 100 >= u128::from(reference) * u128::from(pct.max(1))
    };
    share_of(rates.budget, pct) || (peak_rule && share_of(rates.peak_foreground.max(MIN_BUDGET as u64), peak_pct))
}

/// Whether client reads are at least `share_pct` of client operations (point
/// reads and seeks over those plus keys written); false when `share_pct` is 0
/// or nothing is read.
fn reads_weigh(rates: &Rates, share_pct: u64) -> bool {
    let ops = u128::from(rates.reads) + u128::from(rates.writes);
    share_pct > 0 && rates.reads > 0 && u128::from(rates.reads) * 100 >= ops * u128::from(share_pct)
}

impl AdaptiveConfig {
    /// Ebb's `adaptive` mode: pacing, deferral under flush pressure, yield,
    /// catch-up, bounds; idle detection by throughput ends deferrals early.
    pub fn adaptive() -> AdaptiveConfig {
        AdaptiveConfig {
            interval_us: 500_000,
            io_budget_bytes_per_sec: 0,
            initial_budget_bytes_per_sec: 64 << 20,
            budget_half_life_us: 600_000_000,
            compaction_floor_pct: 5,
            rate_change_pct: 5,
            rate_smoothing_pct: 50,
            defer: DeferPolicy::FlushPressure {
                defer_pct: 50,
                resume_pct: 25,
                peak_defer_pct: 50,
                peak_resume_pct: 15,
            },
            defer_min_score: 2.0,
            pause_immutable_memtables: 2,
            pause_when_deferred: false,
            idle: IdleConfig::throughput(),
            catch_up_subcompactions: 2,
            base_subcompactions: 1,
            max_l0_files: 1024,
            max_l0_debt_ratio: 2.0,
            l0_debt_min_tree_bytes: 256 << 20,
            max_space_amplification: 0.0,
            max_pending_compaction_bytes: 0,
            bound_release_pct: 75,
            merge_l0_runs_when_deferred: true,
            catch_up_read_share_pct: 10,
            defer_max_read_share_pct: 10,
            stall_read_share_pct: 10,
        }
    }

    /// Ebb's `idle` mode (UW paper): compaction only while the client is idle
    /// (throughput policy; set `idle` for the since-last-write policy), running
    /// compactions paused when a burst starts, catch-up and bounds as adaptive.
    pub fn idle() -> AdaptiveConfig {
        AdaptiveConfig {
            defer: DeferPolicy::UntilIdle,
            pause_when_deferred: true,
            merge_l0_runs_when_deferred: false,
            ..AdaptiveConfig::adaptive()
        }
    }

    /// Stall triggers and limits that keep the engine's write controller as
    /// a backstop above the tuner's L0 bound instead of in front of it:
    /// slowdown at 1.5x and stop at 2x `max_l0_files`, pending-bytes limits
    /// at 1.5x and 2x `max_pending_compaction_bytes` (0, no limit, when that
    /// bound is off). `None` when the L0 bound is off.
    pub fn stall_backstop(&self) -> Option<WriteStallLimits> {
        if self.max_l0_files == 0 {
            return None;
        }
        let l0 = i32::try_from(self.max_l0_files).unwrap_or(i32::MAX / 2);
        let pending = self.max_pending_compaction_bytes;
        Some(WriteStallLimits {
            level0_slowdown_writes_trigger: l0.saturating_add(l0 / 2),
            level0_stop_writes_trigger: l0.saturating_mul(2),
            soft_pending_compaction_bytes_limit: pending.saturating_add(pending / 2),
            hard_pending_compaction_bytes_limit: pending.saturating_mul(2),
        })
    }

    /// What a family configured with `configured` is held by under the
    /// backstop: each trigger and limit raised to the backstop's, never
    /// lowered ([`WriteStallLimits::raised_to`]); `configured` itself when
    /// there is no backstop. The engine puts it in force when the family is
    /// opened or created.
    pub fn backstop_for(&self, configured: WriteStallLimits) -> WriteStallLimits {
        self.stall_backstop().map_or(configured, |backstop| configured.raised_to(backstop))
    }
}

impl Default for AdaptiveConfig {
    /// [`AdaptiveConfig::adaptive`].
    fn default() -> AdaptiveConfig {
        AdaptiveConfig::adaptive()
    }
}

/// What the engine reports each interval. Byte counts are cumulative since
/// open (the tuner takes differences) and the database's; the rest are
/// gauges. The gauges of the tree's shape are per column family: the flat
/// fields from `l0_files` on are the default family's, `other_families`
/// holds every other family's (empty for a database with one family).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observation {
    /// Clock time, microseconds.
    pub now_micros: u64,
    /// Key and value bytes written by clients (`DbMetrics::user_bytes_written`).
    pub client_bytes: u64,
    /// Keys written by clients (`DbMetrics::user_keys_written`).
    pub client_keys: u64,
    /// Point reads and iterator seeks by clients (`DbMetrics::user_reads`).
    pub client_reads: u64,
    /// Bytes appended to the WAL (`DbMetrics::wal_bytes`).
    pub wal_bytes: u64,
    /// Bytes written by flushes (`DbMetrics::flush_bytes_written`).
    pub flush_bytes: u64,
    /// Bytes written by compactions (`DbMetrics::compaction_bytes_written`).
    pub compaction_bytes: u64,
    /// Clock time of the last client write, when the write path records it.
    pub last_write_micros: Option<u64>,
    /// Files in L0.
    pub l0_files: usize,
    /// Immutable memtables waiting for (or in) flush.
    pub immutable_memtables: usize,
    /// Estimated pending compaction bytes.
    pub pending_compaction_bytes: u64,
    /// Highest compaction score of any level (>= 1: that level needs compaction).
    pub max_level_score: f64,
    /// Space amplification estimate, see [`space_amplification`].
    pub space_amplification: f64,
    /// Bytes in L0.
    pub l0_bytes: u64,
    /// Bytes in the levels below L0.
    pub lower_levels_bytes: u64,
    /// L0 files at which L0 is compacted (`level0_file_num_compaction_trigger`);
    /// 0 counts as 1.
    pub l0_trigger: usize,
    /// The gauges of every column family but the default one.
    pub other_families: Vec<FamilyGauges>,
}

/// One column family's gauges (the fields of [`Observation`] of the same
/// names, for that family).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FamilyGauges {
    /// The family.
    pub family: FamilyId,
    /// Files in its L0.
    pub l0_files: usize,
    /// Its immutable memtables waiting for (or in) flush.
    pub immutable_memtables: usize,
    /// Its estimated pending compaction bytes.
    pub pending_compaction_bytes: u64,
    /// The highest compaction score of its levels.
    pub max_level_score: f64,
    /// Its space amplification estimate, see [`space_amplification`].
    pub space_amplification: f64,
    /// Bytes in its L0.
    pub l0_bytes: u64,
    /// Bytes in its levels below L0.
    pub lower_levels_bytes: u64,
    /// Its `level0_file_num_compaction_trigger`; 0 counts as 1.
    pub l0_trigger: usize,
}

impl Observation {
    /// The default family's gauges (the flat fields).
    pub fn default_family(&self) -> FamilyGauges {
        FamilyGauges {
            family: FamilyId::DEFAULT,
            l0_files: self.l0_files,
            immutable_memtables: self.immutable_memtables,
            pending_compaction_bytes: self.pending_compaction_bytes,
            max_level_score: self.max_level_score,
            space_amplification: self.space_amplification,
            l0_bytes: self.l0_bytes,
            lower_levels_bytes: self.lower_levels_bytes,
            l0_trigger: self.l0_trigger,
        }
    }

    /// Every family's gauges, the default family's first.
    pub fn families(&self) -> impl Iterator<Item = FamilyGauges> + '_ {
        std::iter::once(self.default_family()).chain(self.other_families.iter().copied())
    }

    /// Whether some family has at least `count` immutable memtables waiting
    /// (0: never). Per family, as each family's writes stall on its own
    /// memtables (`max_write_buffer_number`): three families flushing one
    /// memtable each are three flushes in progress, not a backlog.
    fn memtables_wait(&self, count: usize) -> bool {
        count > 0 && self.families().any(|f| f.immutable_memtables >= count)
    }

    /// The highest compaction score of any family's levels.
    fn max_level_score(&self) -> f64 {
        self.families().map(|f| f.max_level_score).fold(f64::NEG_INFINITY, f64::max)
    }
}

/// RocksDB's space-amplification estimate for leveled trees: bytes in all
/// levels over bytes in the last non-empty level; 1.0 for an empty tree.
pub fn space_amplification(bytes_per_level: &[u64]) -> f64 {
    let total: u64 = bytes_per_level.iter().sum();
    match bytes_per_level.iter().rev().find(|b| **b > 0) {
        Some(last) => total as f64 / *last as f64,
        None => 1.0,
    }
}

/// The tuner's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Compaction runs, paced to what flushes and the WAL leave of the budget.
    Paced,
    /// Compaction deferred: no new automatic compactions.
    Deferred,
    /// After a deferral: compaction at the full budget until every score < 1.
    CatchUp,
    /// A bound was crossed: compaction at the full budget whatever the load.
    Forced,
}

impl Phase {
    /// Lower-case name, for statistics and reports.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Paced => "paced",
            Phase::Deferred => "deferred",
            Phase::CatchUp => "catch_up",
            Phase::Forced => "forced",
        }
    }
}

/// Which bound forced compaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bound {
    /// L0 reached `max_l0_files`.
    L0Files,
    /// L0's bytes reached `max_l0_debt_ratio` times the bytes below it.
    L0Debt,
    /// Space amplification reached `max_space_amplification`.
    SpaceAmplification,
    /// Pending compaction bytes reached `max_pending_compaction_bytes`.
    PendingCompactionBytes,
}

/// What the tuner decided. The engine carries each action out as the typed
/// [`TuningCommand`]s [`AdaptiveTuner::commands`] gives for it (none for
/// [`Action::CatchUp`], which marks an event for statistics and listeners),
/// and tells listeners the action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Schedule automatic compactions again (`disable_auto_compactions=false`).
    EnableAutoCompactions,
    /// Schedule no new automatic compactions; running ones finish
    /// (`disable_auto_compactions=true`).
    DisableAutoCompactions,
    /// Stop running compactions at their next block boundary (cancel, or
    /// pause if the engine can resume them); they will be picked again later.
    PauseCompactions,
    /// Undo [`Action::PauseCompactions`].
    ContinueCompactions,
    /// Set the compaction-only rate limit, bytes per second.
    SetCompactionRateLimit(u64),
    /// Set `max_subcompactions`.
    SetSubcompactions(u32),
    /// A catch-up begins (the settings come as the actions before it).
    CatchUp,
    /// A bound was crossed and compaction is forced (settings before it).
    ForceCompaction(Bound),
    /// While automatic compaction is deferred, merge L0 runs (true) or
    /// nothing (false); see [`AdaptiveConfig::merge_l0_runs_when_deferred`].
    MergeL0Runs(bool),
    /// Hold writes by the write controller's configured triggers and limits
    /// (true, while clients read) or by the backstop above the L0 bound
    /// (false); see [`AdaptiveConfig::stall_read_share_pct`]. The tuner
    /// assumes the engine starts with the backstop.
    ConfiguredWriteStalls(bool),
}

/// The figures a decision was based on, bytes per second (smoothed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rates {
    /// Client writes.
    pub client: u64,
    /// Keys written by clients, per second.
    pub writes: u64,
    /// Point reads and seeks by clients, per second.
    pub reads: u64,
    /// Flush writes.
    pub flush: u64,
    /// WAL writes.
    pub wal: u64,
    /// Compaction writes.
    pub compaction: u64,
    /// Flush + WAL.
    pub foreground: u64,
    /// The I/O budget in use (configured or learned).
    pub budget: u64,
    /// The paced compaction limit: `max(floor, budget - foreground)`, or
    /// [`UNPACED_BYTES_PER_SEC`] while a learned budget has not yet seen
    /// compaction run.
    pub paced_limit: u64,
    /// The limit of a catch-up or forced compaction: the budget, or
    /// [`UNPACED_BYTES_PER_SEC`] while a learned budget has not yet seen
    /// compaction run.
    pub full_limit: u64,
    /// The highest foreground rate seen (decaying with the budget's half-life).
    pub peak_foreground: u64,
}

/// The outcome of one observation.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Phase after this observation.
    pub phase: Phase,
    /// What to do, in order; empty when nothing changes.
    pub actions: Vec<Action>,
    /// Whether the idle detector said idle.
    pub idle: bool,
    /// The figures behind the decision.
    pub rates: Rates,
    /// The bound crossed now, if any.
    pub bound: Option<Bound>,
    /// The family whose figure crossed [`Decision::bound`] (the first, in
    /// family order, when several did).
    pub bound_family: Option<FamilyId>,
}

/// Counters of an [`AdaptiveTuner`], for statistics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AdaptiveStats {
    /// Observations judged.
    pub observations: u64,
    /// Times compaction was deferred.
    pub deferrals: u64,
    /// Times running compactions were paused.
    pub pauses: u64,
    /// Catch-ups begun.
    pub catch_ups: u64,
    /// Times a bound forced compaction.
    pub forced: u64,
    /// Compaction rate limits emitted.
    pub rate_changes: u64,
    /// Microseconds spent deferred.
    pub deferred_micros: u64,
    /// Times a bound cut a deferral short and deferral was held off until a
    /// trough (module step 6, sustained loads).
    pub sustained: u64,
}

#[derive(Debug, Clone, Copy, Default)]
struct Smoothed {
    client: f64,
    writes: f64,
    reads: f64,
    flush: f64,
    wal: f64,
    compaction: f64,
}

/// What the engine was last told.
#[derive(Debug, Clone, Copy)]
struct EngineSettings {
    auto_compactions: bool,
    paused: bool,
    merging_l0_runs: bool,
    subcompactions: u32,
    rate_limit: Option<u64>,
    /// The write controller holds writes at the configured triggers, not
    /// the backstop ([`Action::ConfiguredWriteStalls`]).
    configured_stalls: bool,
}

/// The adaptive policy. See the module contract.
#[derive(Debug, Clone)]
pub struct AdaptiveTuner {
    config: AdaptiveConfig,
    idle: IdleDetector,
    phase: Phase,
    last: Option<Observation>,
    rates: Option<Smoothed>,
    learned_budget: f64,
    peak_foreground: f64,
    engine: EngineSettings,
    stats: AdaptiveStats,
    /// A bound forced compaction during a deferral: the load is sustained,
    /// and `FlushPressure` defers no more until it falls under its defer
    /// shares (a trough) or the client goes idle (module step 6).
    sustained: bool,
    /// Intervals in which compaction ran while the learned budget was not
    /// yet trusted (module step 2); it paces from [`BUDGET_SAMPLES`] on.
    budget_samples: u32,
    /// The configured write-stall limits of each family it tunes, by id
    /// ([`AdaptiveTuner::track_family`]).
    families: BTreeMap<FamilyId, WriteStallLimits>,
}

const MIN_BUDGET: f64 = 1_048_576.0;

/// The compaction limit while a learned budget has not yet seen compaction
/// run: none in practice (8 GiB/s, where the engine's pacer starts).
pub const UNPACED_BYTES_PER_SEC: u64 = 8 << 30;

/// Intervals in which compaction ran unpaced before a learned budget paces
/// it: one interval may hold only the start of a compaction.
const BUDGET_SAMPLES: u32 = 2;

fn to_u64(x: f64) -> u64 {
    if x.is_finite() && x > 0.0 {
        x.min(u64::MAX as f64) as u64
    } else {
        0
    }
}

impl AdaptiveTuner {
    /// A tuner that assumes the engine starts with automatic compaction on,
    /// nothing paused and `base_subcompactions`; its first decision sets the
    /// compaction rate limit.
    pub fn new(config: AdaptiveConfig) -> AdaptiveTuner {
        AdaptiveTuner {
            idle: IdleDetector::new(config.idle),
            phase: Phase::Paced,
            last: None,
            rates: None,
            learned_budget: (config.initial_budget_bytes_per_sec as f64).max(MIN_BUDGET),
            peak_foreground: 0.0,
            engine: EngineSettings {
                auto_compactions: true,
                paused: false,
                merging_l0_runs: false,
                subcompactions: config.base_subcompactions,
                rate_limit: None,
                configured_stalls: false,
            },
            stats: AdaptiveStats::default(),
            sustained: false,
            budget_samples: 0,
            families: BTreeMap::new(),
            config,
        }
    }

    /// Records `family`, configured with the write-stall limits
    /// `configured`, and returns the commands that bring it to what the
    /// tuner last decided: the configured limits when they are in force
    /// ([`Action::ConfiguredWriteStalls`]), nothing otherwise (the engine
    /// puts [`AdaptiveConfig::backstop_for`] in force when it opens or
    /// creates a family).
    pub fn track_family(&mut self, family: FamilyId, configured: WriteStallLimits) -> Vec<TuningCommand> {
        self.families.insert(family, configured);
        if self.engine.configured_stalls {
            configured.commands(family).to_vec()
        } else {
            Vec::new()
        }
    }

    /// Forgets a dropped family.
    pub fn forget_family(&mut self, family: FamilyId) {
        self.families.remove(&family);
    }

    /// The commands that carry `action` out. Write stalls are set in every
    /// family the tuner tracks, each to its own configured limits or its own
    /// backstop.
    pub fn commands(&self, action: &Action) -> Vec<TuningCommand> {
        match *action {
            Action::EnableAutoCompactions => vec![TuningCommand::DeferCompactions(false)],
            Action::DisableAutoCompactions => vec![TuningCommand::DeferCompactions(true)],
            Action::PauseCompactions => vec![TuningCommand::PauseCompactions(true)],
            Action::ContinueCompactions => vec![TuningCommand::PauseCompactions(false)],
            Action::SetCompactionRateLimit(rate) => vec![TuningCommand::SetCompactionRateLimit(rate)],
            Action::SetSubcompactions(n) => vec![TuningCommand::SetSubcompactions(n)],
            Action::CatchUp => Vec::new(),
            // A bound crossed: compaction now, whatever held it.
            Action::ForceCompaction(_) => {
                vec![TuningCommand::DeferCompactions(false), TuningCommand::PauseCompactions(false)]
            }
            Action::MergeL0Runs(on) => vec![TuningCommand::MergeL0Runs(on)],
            Action::ConfiguredWriteStalls(configured) => self
                .families
                .iter()
                .flat_map(|(family, limits)| {
                    let limits = if configured { *limits } else { self.config.backstop_for(*limits) };
                    limits.commands(*family)
                })
                .collect(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &AdaptiveConfig {
        &self.config
    }

    /// Counters so far.
    #[cfg(test)]
    pub fn stats(&self) -> AdaptiveStats {
        self.stats
    }

    /// The I/O budget in use, bytes per second.
    pub fn budget(&self) -> u64 {
        if self.config.io_budget_bytes_per_sec > 0 {
            self.config.io_budget_bytes_per_sec
        } else {
            to_u64(self.learned_budget)
        }
    }

    /// Judges one interval (steps 1-8 of the module contract).
    pub fn observe(&mut self, obs: &Observation) -> Decision {
        self.stats.observations += 1;
        let prev = self.last.replace(obs.clone());
        let elapsed = prev.as_ref().map_or(0, |p| obs.now_micros.saturating_sub(p.now_micros));
        if let (Some(prev), true) = (prev, elapsed > 0) {
            let secs = elapsed as f64 / 1e6;
            let per_sec = |now: u64, before: u64| now.saturating_sub(before) as f64 / secs;
            let raw = Smoothed {
                client: per_sec(obs.client_bytes, prev.client_bytes),
                writes: per_sec(obs.client_keys, prev.client_keys),
                reads: per_sec(obs.client_reads, prev.client_reads),
                flush: per_sec(obs.flush_bytes, prev.flush_bytes),
                wal: per_sec(obs.wal_bytes, prev.wal_bytes),
                compaction: per_sec(obs.compaction_bytes, prev.compaction_bytes),
            };
            if !self.budget_known() && raw.compaction > 0.0 && self.phase != Phase::Deferred {
                // Compaction ran unpaced (a deferral's run merges are paced
                // to the wave's headroom): what the disk gave it and the
                // foreground together is a sample of the budget.
                self.budget_samples += 1;
                self.learned_budget = self.learned_budget.max(raw.flush + raw.wal + raw.compaction);
            }
            self.smooth(raw);
            self.learn_budget(secs);
            if self.phase == Phase::Deferred {
                self.stats.deferred_micros += elapsed;
            }
        }
        let idle = self.idle.observe(obs.now_micros, obs.client_bytes, obs.last_write_micros);
        let rates = self.rates();
        let crossed = self.bound_crossed(obs);
        let bound = crossed.map(|(bound, _)| bound);
        if self.sustained && (idle || self.in_trough(&rates)) {
            self.sustained = false;
        }
        let next = self.next_phase(obs, idle, &rates, bound);
        let actions = self.transition(next, obs, &rates, bound);
        Decision { phase: next, actions, idle, rates, bound, bound_family: crossed.map(|(_, family)| family) }
    }

    fn smooth(&mut self, raw: Smoothed) {
        let w = (self.config.rate_smoothing_pct.clamp(1, 100) as f64) / 100.0;
        let mix = |old: f64, new: f64| w * new + (1.0 - w) * old;
        self.rates = Some(match self.rates {
            None => raw,
            Some(old) => Smoothed {
                client: mix(old.client, raw.client),
                writes: mix(old.writes, raw.writes),
                reads: mix(old.reads, raw.reads),
                flush: mix(old.flush, raw.flush),
                wal: mix(old.wal, raw.wal),
                compaction: mix(old.compaction, raw.compaction),
            },
        });
    }

    fn learn_budget(&mut self, secs: f64) {
        let Some(r) = self.rates else { return };
        let half_life = (self.config.budget_half_life_us.max(1) as f64) / 1e6;
        let total = r.flush + r.wal + r.compaction;
        let decay = 0.5f64.powf(secs / half_life);
        self.peak_foreground = (self.peak_foreground * decay).max(r.flush + r.wal);
        let mut learned = (self.learned_budget * decay).max(total);
        let binding = self.phase != Phase::Deferred
            && self.engine.rate_limit.is_some_and(|limit| r.compaction >= 0.95 * limit as f64);
        if binding {
            learned = learned.max(total * 1.05);
        }
        self.learned_budget = learned.max(MIN_BUDGET);
    }

    /// Whether the budget paces compaction: configured, or learned from
    /// [`BUDGET_SAMPLES`] intervals of compaction running unpaced. Until
    /// then the learned budget holds only what flushes and the WAL wrote,
    /// which says nothing of what the disk can give compaction (W1's fills
    /// write 56 MB/s; paced to what that leaves, their compaction ran
    /// into the reads that followed).
    fn budget_known(&self) -> bool {
        self.config.io_budget_bytes_per_sec > 0 || self.budget_samples >= BUDGET_SAMPLES
    }

    fn rates(&self) -> Rates {
        let r = self.rates.unwrap_or_default();
        let budget = self.budget();
        let foreground = to_u64(r.flush + r.wal);
        let floor = budget.saturating_mul(self.config.compaction_floor_pct) / 100;
        let known = self.budget_known();
        Rates {
            client: to_u64(r.client),
            writes: to_u64(r.writes),
            reads: to_u64(r.reads),
            flush: to_u64(r.flush),
            wal: to_u64(r.wal),
            compaction: to_u64(r.compaction),
            foreground,
            budget,
            paced_limit: if known { budget.saturating_sub(foreground).max(floor) } else { UNPACED_BYTES_PER_SEC },
            full_limit: if known { budget } else { UNPACED_BYTES_PER_SEC },
            peak_foreground: to_u64(self.peak_foreground),
        }
    }

    /// The first bound a family crossed, and the family (each family's
    /// figures against the bounds: a family's L0 is what its reads probe,
    /// and its debt is paid by its own compactions).
    fn bound_crossed(&self, obs: &Observation) -> Option<(Bound, FamilyId)> {
        obs.families().find_map(|f| self.family_bound_crossed(&f).map(|bound| (bound, f.family)))
    }

    fn family_bound_crossed(&self, f: &FamilyGauges) -> Option<Bound> {
        let c = &self.config;
        if c.max_l0_files > 0 && f.l0_files >= c.max_l0_files {
            Some(Bound::L0Files)
        } else if self.l0_debt_bounded(f) && f.l0_bytes as f64 >= c.max_l0_debt_ratio * f.lower_levels_bytes as f64 {
            Some(Bound::L0Debt)
        } else if c.max_space_amplification > 0.0 && f.space_amplification >= c.max_space_amplification {
            Some(Bound::SpaceAmplification)
        } else if c.max_pending_compaction_bytes > 0 && f.pending_compaction_bytes >= c.max_pending_compaction_bytes {
            Some(Bound::PendingCompactionBytes)
        } else {
            None
        }
    }

    /// Whether the L0 debt bound applies to a family: on, and the family's
    /// tree below L0 past its young size.
    fn l0_debt_bounded(&self, f: &FamilyGauges) -> bool {
        let c = &self.config;
        c.max_l0_debt_ratio > 0.0 && f.lower_levels_bytes >= c.l0_debt_min_tree_bytes.max(1)
    }

    /// Whether every family's bounded figures are back under their share
    /// of the bounds.
    fn bounds_released(&self, obs: &Observation) -> bool {
        obs.families().all(|f| self.family_bounds_released(&f))
    }

    fn family_bounds_released(&self, f: &FamilyGauges) -> bool {
        let c = &self.config;
        let pct = c.bound_release_pct as f64 / 100.0;
        let l0_ok = c.max_l0_files == 0 || f.l0_files as f64 <= c.max_l0_files as f64 * pct;
        let debt_ok =
            !self.l0_debt_bounded(f) || f.l0_bytes as f64 <= c.max_l0_debt_ratio * pct * f.lower_levels_bytes as f64;
        let sa_ok = c.max_space_amplification <= 0.0
            || f.space_amplification <= 1.0 + (c.max_space_amplification - 1.0).max(0.0) * pct;
        let pending_ok = c.max_pending_compaction_bytes == 0
            || f.pending_compaction_bytes as f64 <= c.max_pending_compaction_bytes as f64 * pct;
        l0_ok && debt_ok && sa_ok && pending_ok
    }

    /// Whether the load is under both defer shares of `FlushPressure` (what
    /// a steady load at its own peak never is). False for other policies.
    fn in_trough(&self, rates: &Rates) -> bool {
        match self.config.defer {
            DeferPolicy::FlushPressure { defer_pct, peak_defer_pct, .. } => {
                !load_pressed(rates, defer_pct, peak_defer_pct > 0, peak_defer_pct)
            }
            _ => false,
        }
    }

    fn wants_deferral(&self, obs: &Observation, idle: bool, rates: &Rates) -> bool {
        let memtables_wait = obs.memtables_wait(self.config.pause_immutable_memtables);
        match self.config.defer {
            #[cfg(test)]
            DeferPolicy::Never => false,
            DeferPolicy::UntilIdle => !idle,
            DeferPolicy::FlushPressure { defer_pct, resume_pct, peak_defer_pct, peak_resume_pct } => {
                let deferring = matches!(self.phase, Phase::Deferred | Phase::Forced);
                let (pct, peak_pct) =
                    if deferring { (resume_pct, peak_resume_pct) } else { (defer_pct, peak_defer_pct) };
                let behind = deferring || obs.max_level_score() >= self.config.defer_min_score;
                let reads = reads_weigh(rates, self.config.defer_max_read_share_pct);
                let pressed = behind && !reads && load_pressed(rates, pct, peak_defer_pct > 0, peak_pct);
                !idle && !self.sustained && (memtables_wait || pressed)
            }
        }
    }

    /// Whether writes should be held by the configured write controller:
    /// clients read at least `stall_read_share_pct` of their operations
    /// (until they fall under half of it), and there is a backstop to lift.
    fn wants_configured_stalls(&self, rates: &Rates) -> bool {
        let c = &self.config;
        if c.stall_read_share_pct == 0 || c.stall_backstop().is_none() {
            return false;
        }
        let share =
            if self.engine.configured_stalls { c.stall_read_share_pct.div_ceil(2) } else { c.stall_read_share_pct };
        reads_weigh(rates, share)
    }

    fn next_phase(&self, obs: &Observation, idle: bool, rates: &Rates, bound: Option<Bound>) -> Phase {
        if bound.is_some() || (self.phase == Phase::Forced && !self.bounds_released(obs)) {
            return Phase::Forced;
        }
        if self.wants_deferral(obs, idle, rates) {
            return Phase::Deferred;
        }
        let behind = obs.max_level_score() >= 1.0;
        match self.phase {
            Phase::Deferred | Phase::Forced if behind => Phase::CatchUp,
            Phase::CatchUp if behind => Phase::CatchUp,
            _ => Phase::Paced,
        }
    }

    fn transition(&mut self, next: Phase, obs: &Observation, rates: &Rates, bound: Option<Bound>) -> Vec<Action> {
        let c = &self.config;
        let memtables_wait = obs.memtables_wait(c.pause_immutable_memtables);
        let merging = next == Phase::Deferred && c.merge_l0_runs_when_deferred;
        let l0_over_trigger = obs.families().any(|f| f.l0_files >= f.l0_trigger.max(1));
        let (auto_compactions, paused, subcompactions, rate) = match next {
            Phase::Paced => (true, false, c.base_subcompactions, Some(rates.paced_limit)),
            Phase::Deferred => {
                let rate = merging.then(|| wave_headroom(rates, c.compaction_floor_pct));
                (false, c.pause_when_deferred || memtables_wait, c.base_subcompactions, rate)
            }
            // A catch-up while clients read leaves them the cores: the
            // debt below L0 is paid with one thread (RocksDB's default), as
            // `off` would have paid it while it was written. L0 at its
            // trigger is paid with `catch_up_subcompactions`: each run is
            // one more place every read checks, so the sooner it is gone
            // the better for the readers too.
            Phase::CatchUp if reads_weigh(rates, c.catch_up_read_share_pct) && !l0_over_trigger => {
                (true, false, c.base_subcompactions, Some(rates.full_limit))
            }
            Phase::CatchUp | Phase::Forced => (true, false, c.catch_up_subcompactions, Some(rates.full_limit)),
        };
        let entered = next != self.phase;
        let mut actions = Vec::new();
        if subcompactions != self.engine.subcompactions {
            actions.push(Action::SetSubcompactions(subcompactions));
            self.engine.subcompactions = subcompactions;
        }
        if let Some(rate) = rate {
            let moved = match self.engine.rate_limit {
                None => true,
                Some(cur) => {
                    let diff = u128::from(rate.abs_diff(cur)) * 100;
                    rate != cur && (entered || diff >= u128::from(cur) * u128::from(c.rate_change_pct))
                }
            };
            if moved {
                actions.push(Action::SetCompactionRateLimit(rate));
                self.engine.rate_limit = Some(rate);
                self.stats.rate_changes += 1;
            }
        }
        if !auto_compactions && self.engine.auto_compactions {
            actions.push(Action::DisableAutoCompactions);
        }
        if paused && !self.engine.paused {
            actions.push(Action::PauseCompactions);
            self.stats.pauses += 1;
        }
        if !paused && self.engine.paused {
            actions.push(Action::ContinueCompactions);
        }
        if auto_compactions && !self.engine.auto_compactions {
            actions.push(Action::EnableAutoCompactions);
        }
        if merging != self.engine.merging_l0_runs {
            actions.push(Action::MergeL0Runs(merging));
            self.engine.merging_l0_runs = merging;
        }
        let configured_stalls = self.wants_configured_stalls(rates);
        if configured_stalls != self.engine.configured_stalls {
            actions.push(Action::ConfiguredWriteStalls(configured_stalls));
            self.engine.configured_stalls = configured_stalls;
        }
        self.engine.auto_compactions = auto_compactions;
        self.engine.paused = paused;
        if entered {
            match next {
                Phase::Deferred => self.stats.deferrals += 1,
                Phase::CatchUp => {
                    actions.push(Action::CatchUp);
                    self.stats.catch_ups += 1;
                }
                Phase::Forced => {
                    actions.push(Action::ForceCompaction(bound.unwrap_or(Bound::L0Files)));
                    self.stats.forced += 1;
                    if self.phase == Phase::Deferred && matches!(c.defer, DeferPolicy::FlushPressure { .. }) {
                        self.sustained = true;
                        self.stats.sustained += 1;
                    }
                }
                Phase::Paced => {}
            }
        }
        self.phase = next;
        actions
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuning::idle::IdlePolicy;

    const MB: u64 = 1_000_000;

    fn observation(t_ms: u64, flush_mb: u64, wal_mb: u64, compaction_mb: u64) -> Observation {
        Observation {
            now_micros: t_ms * 1_000,
            client_bytes: wal_mb * MB,
            wal_bytes: wal_mb * MB,
            flush_bytes: flush_mb * MB,
            compaction_bytes: compaction_mb * MB,
            ..Observation::default()
        }
    }

    /// What `pick` takes from each action that has it, in order.
    fn picked<T>(actions: &[Action], pick: impl Fn(&Action) -> Option<T>) -> Vec<T> {
        actions.iter().filter_map(pick).collect()
    }

    fn rate_limits(actions: &[Action]) -> Vec<u64> {
        picked(actions, |a| if let Action::SetCompactionRateLimit(r) = a { Some(*r) } else { None })
    }

    #[test]
    fn pacing_gives_compaction_what_flushes_and_the_wal_leave() {
        let config = AdaptiveConfig {
            io_budget_bytes_per_sec: 100 * MB,
            rate_smoothing_pct: 100,
            defer: DeferPolicy::Never,
            ..AdaptiveConfig::adaptive()
        };
        let mut tuner = AdaptiveTuner::new(config);
        // First call: no rates yet, the whole budget.
        let d = tuner.observe(&observation(0, 0, 0, 0));
        assert_eq!(d.actions, [Action::SetCompactionRateLimit(100 * MB)]);
        // Flush 30 MB/s + WAL 20 MB/s over one second: 50 MB/s left.
        let d = tuner.observe(&observation(1_000, 30, 20, 10));
        assert_eq!(
            d.rates,
            Rates {
                client: 20 * MB,
                writes: 0,
                reads: 0,
                flush: 30 * MB,
                wal: 20 * MB,
                compaction: 10 * MB,
                foreground: 50 * MB,
                budget: 100 * MB,
                paced_limit: 50 * MB,
                full_limit: 100 * MB,
                peak_foreground: 50 * MB
            }
        );
        assert_eq!(d.actions, [Action::SetCompactionRateLimit(50 * MB)]);
        // Foreground 51 MB/s: 49 MB/s is a 2 % move, not worth an action.
        let d = tuner.observe(&observation(2_000, 60, 41, 20));
        assert_eq!(d.rates.paced_limit, 49 * MB);
        assert!(d.actions.is_empty(), "{:?}", d.actions);
        // Foreground over the budget: the floor, 5 % of it.
        let d = tuner.observe(&observation(3_000, 160, 91, 25));
        assert_eq!(d.rates.foreground, 150 * MB);
        assert_eq!(rate_limits(&d.actions), [5 * MB]);
        assert_eq!(d.phase, Phase::Paced);
        assert_eq!(tuner.stats().rate_changes, 3);
    }

    #[test]
    fn smoothing_damps_a_flush_landing_in_one_interval() {
        let config = AdaptiveConfig {
            io_budget_bytes_per_sec: 100 * MB,
            defer: DeferPolicy::Never,
            ..AdaptiveConfig::adaptive()
        };
        let mut tuner = AdaptiveTuner::new(config);
        tuner.observe(&observation(0, 0, 0, 0));
        tuner.observe(&observation(1_000, 20, 0, 0));
        // A 64 MB flush lands in one second: the smoothed flush rate moves halfway.
        let d = tuner.observe(&observation(2_000, 84, 0, 0));
        assert_eq!(d.rates.flush, 42 * MB);
        assert_eq!(d.rates.paced_limit, 58 * MB);
    }

    /// A learned budget paces nothing until compaction has run unpaced in
    /// two intervals: a fill writing 56 MB/s of flush and WAL (W1's) says
    /// nothing of what compaction can have; once compaction has run at
    /// 300 MB/s beside it, pacing leaves compaction what it had.
    #[test]
    fn a_learned_budget_paces_only_once_compaction_has_run() {
        let config = AdaptiveConfig {
            rate_smoothing_pct: 100,
            defer: DeferPolicy::Never,
            max_l0_files: 0,
            ..AdaptiveConfig::adaptive()
        };
        let mut tuner = AdaptiveTuner::new(config);
        let (mut flush, mut compaction) = (0, 0);
        let mut step = |t_s: u64, flush_mb: u64, compaction_mb: u64| {
            flush += flush_mb;
            compaction += compaction_mb;
            tuner.observe(&observation(t_s * 1000, flush, flush, compaction))
        };
        let d = step(0, 0, 0);
        assert_eq!(rate_limits(&d.actions), [UNPACED_BYTES_PER_SEC]);
        for t in 1..=10 {
            let d = step(t, 28, 0);
            assert_eq!(d.rates.paced_limit, UNPACED_BYTES_PER_SEC, "no compaction yet, at {t} s");
            assert!(rate_limits(&d.actions).is_empty());
        }
        // One interval of compaction is not yet a sample of the disk.
        let d = step(11, 28, 150);
        assert_eq!((d.rates.paced_limit, d.rates.full_limit), (UNPACED_BYTES_PER_SEC, UNPACED_BYTES_PER_SEC));
        // The second is: the budget is the most flush + WAL + compaction
        // wrote together while unpaced (356 MB/s), and pacing leaves
        // compaction that minus the foreground.
        let d = step(12, 28, 300);
        assert_eq!(d.rates.budget, 356 * MB);
        assert_eq!(d.rates.paced_limit, 300 * MB);
        assert_eq!(rate_limits(&d.actions), [300 * MB]);
    }

    #[test]
    fn the_budget_is_learned_from_the_highest_throughput() {
        let config = AdaptiveConfig {
            initial_budget_bytes_per_sec: 10 * MB,
            rate_smoothing_pct: 100,
            budget_half_life_us: 100_000_000,
            defer: DeferPolicy::Never,
            ..AdaptiveConfig::adaptive()
        };
        let mut tuner = AdaptiveTuner::new(config);
        tuner.observe(&observation(0, 0, 0, 0));
        assert_eq!(tuner.budget(), 10 * MB);
        // 80 MB/s of flush + WAL: the budget is at least that.
        let d = tuner.observe(&observation(1_000, 50, 30, 0));
        assert!((80 * MB..81 * MB).contains(&d.rates.budget), "{:?}", d.rates);
        // A quiet spell decays it slowly: half after a half-life (100 s).
        let mut t = 1_000;
        let mut o = observation(1_000, 50, 30, 0);
        for _ in 0..100 {
            t += 1_000;
            o.now_micros = t * 1_000;
            tuner.observe(&o);
        }
        let half = tuner.budget();
        assert!((39 * MB..41 * MB).contains(&half), "budget after one half-life: {half}");
        // Compaction using all of its limit means the limit binds: probe 5 % up.
        let limit = tuner.engine.rate_limit.unwrap();
        t += 1_000;
        o.now_micros = t * 1_000;
        o.compaction_bytes += limit;
        let before = tuner.budget();
        tuner.observe(&o);
        let after = tuner.budget();
        assert!(after as f64 >= before as f64 * 1.04, "{before} -> {after}");
    }

    /// A toy engine: L0 grows with flushes, compaction (when allowed and
    /// needed) removes L0 bytes at half its write rate, bounded by its limit
    /// and by what the disk leaves after flush and WAL.
    struct Toy {
        t_us: u64,
        client: u64,
        flush: u64,
        compaction: u64,
        l0_bytes: f64,
        file_bytes: f64,
        disk: f64,
        auto: bool,
        paused: bool,
        limit: f64,
        subcompactions: u32,
        last_write: Option<u64>,
        imm: usize,
        merging: bool,
        /// Compaction bytes written per L0 byte compacted away (2: every
        /// byte written once more below).
        write_amp: f64,
    }

    impl Toy {
        fn new(file_mb: u64, disk_mb: u64) -> Toy {
            Toy {
                t_us: 0,
                client: 0,
                flush: 0,
                compaction: 0,
                l0_bytes: 0.0,
                file_bytes: (file_mb * MB) as f64,
                disk: (disk_mb * MB) as f64,
                auto: true,
                paused: false,
                limit: f64::MAX,
                subcompactions: 1,
                last_write: None,
                imm: 0,
                merging: false,
                write_amp: 2.0,
            }
        }

        fn l0_files(&self) -> usize {
            (self.l0_bytes / self.file_bytes) as usize
        }

        fn score(&self) -> f64 {
            self.l0_bytes / self.file_bytes / 4.0
        }

        /// Runs `dt_us` at `client_mb` MB/s of client writes; returns compaction bytes written.
        fn run(&mut self, dt_us: u64, client_mb: f64) -> u64 {
            let secs = dt_us as f64 / 1e6;
            let written = (client_mb * MB as f64 * secs) as u64;
            self.client += written;
            self.flush += written;
            self.l0_bytes += written as f64;
            self.t_us += dt_us;
            if written > 0 {
                self.last_write = Some(self.t_us);
            }
            if !(self.auto && !self.paused && self.score() >= 1.0) {
                return 0;
            }
            let room = (self.disk - 2.0 * client_mb * MB as f64).max(0.0);
            let c = (self.limit.min(room) * secs).min(self.write_amp * self.l0_bytes) as u64;
            self.compaction += c;
            self.l0_bytes -= c as f64 / self.write_amp;
            c
        }

        fn observation(&self) -> Observation {
            Observation {
                now_micros: self.t_us,
                client_bytes: self.client,
                wal_bytes: self.client,
                flush_bytes: self.flush,
                compaction_bytes: self.compaction,
                last_write_micros: self.last_write,
                l0_files: self.l0_files(),
                immutable_memtables: self.imm,
                max_level_score: self.score(),
                ..Observation::default()
            }
        }

        fn apply(&mut self, actions: &[Action]) {
            for a in actions {
                match *a {
                    Action::EnableAutoCompactions => self.auto = true,
                    Action::DisableAutoCompactions => self.auto = false,
                    Action::PauseCompactions => self.paused = true,
                    Action::ContinueCompactions => self.paused = false,
                    Action::SetCompactionRateLimit(r) => self.limit = r as f64,
                    Action::SetSubcompactions(n) => self.subcompactions = n,
                    Action::MergeL0Runs(on) => self.merging = on,
                    // The toy's writes are not held by a controller, and
                    // it has no reads.
                    Action::CatchUp | Action::ForceCompaction(_) | Action::ConfiguredWriteStalls(_) => {}
                }
            }
        }
    }

    /// One step of a simulation: observe, apply, run an interval.
    struct Step {
        t_us: u64,
        client_mb: f64,
        decision: Decision,
        compaction: u64,
        l0_files: usize,
    }

    fn simulate(
        tuner: &mut AdaptiveTuner,
        toy: &mut Toy,
        until_us: u64,
        step_us: u64,
        load: impl Fn(u64) -> f64,
    ) -> Vec<Step> {
        let mut steps = Vec::new();
        while toy.t_us < until_us {
            let decision = tuner.observe(&toy.observation());
            toy.apply(&decision.actions);
            let (t_us, l0_files) = (toy.t_us, toy.l0_files());
            let client_mb = load(t_us);
            let compaction = toy.run(step_us, client_mb);
            steps.push(Step { t_us, client_mb, decision, compaction, l0_files });
        }
        steps
    }

    fn phase_sequence(steps: &[Step]) -> Vec<Phase> {
        let mut seq: Vec<Phase> = steps.iter().map(|s| s.decision.phase).collect();
        seq.dedup();
        seq
    }

    fn phase_at(steps: &[Step], t_us: u64) -> Phase {
        steps.iter().rev().find(|s| s.t_us <= t_us).unwrap().decision.phase
    }

    /// The thesis's sine wave (§3.4.2), scaled as W2: 50 to 250 MB/s over a
    /// 60 s period, then 10 MB/s of cool-down (the thesis's 700 s run).
    fn sine(t_us: u64) -> f64 {
        let t = t_us as f64 / 1e6;
        if t < 60.0 {
            100.0 * (std::f64::consts::TAU / 60.0 * t + 1.5 * std::f64::consts::PI).sin() + 150.0
        } else {
            10.0
        }
    }

    fn sine_config() -> AdaptiveConfig {
        AdaptiveConfig { io_budget_bytes_per_sec: 400 * MB, max_l0_files: 1000, ..AdaptiveConfig::adaptive() }
    }

    /// The budget rule alone (the peak rule off), as on a disk-bound machine.
    fn budget_only(config: AdaptiveConfig) -> AdaptiveConfig {
        AdaptiveConfig {
            defer: DeferPolicy::FlushPressure { defer_pct: 50, resume_pct: 25, peak_defer_pct: 0, peak_resume_pct: 0 },
            ..config
        }
    }

    /// Without the score gate: the deferral tests that follow are about
    /// when a deferral starts and ends by load, on a toy whose compaction
    /// keeps up; the gate has its own test
    /// (`only_a_load_compaction_falls_behind_is_deferred`).
    fn ungated(config: AdaptiveConfig) -> AdaptiveConfig {
        AdaptiveConfig { defer_min_score: 0.0, ..config }
    }

    /// The score gate: a load at its own peak is deferred only once
    /// compaction falls behind it. The same wave on a toy whose compaction
    /// keeps up is never deferred (the tree stays what `off` leaves); on one
    /// that falls behind near the peak (each L0 byte costs 12 bytes of
    /// compaction, as a leveled tree's rewrites do), the deferral starts
    /// once the score reaches 2 and then ends by load, not by score.
    #[test]
    fn only_a_load_compaction_falls_behind_is_deferred() {
        let config =
            AdaptiveConfig { initial_budget_bytes_per_sec: 2000 * MB, max_l0_files: 2000, ..Default::default() };
        assert_eq!(config.defer_min_score, 2.0);
        let mut tuner = AdaptiveTuner::new(config.clone());
        let mut toy = Toy::new(8, 3000);
        let steps = simulate(&mut tuner, &mut toy, 60_000_000, 500_000, sine);
        assert!(steps.iter().all(|s| s.decision.phase == Phase::Paced), "{:?}", phase_sequence(&steps));
        assert!(steps.iter().all(|s| s.l0_files < 8), "compaction kept up");
        assert_eq!(tuner.stats().deferrals, 0);

        let mut tuner = AdaptiveTuner::new(config.clone());
        let mut toy = Toy { write_amp: 12.0, ..Toy::new(8, 3000) };
        let steps = simulate(&mut tuner, &mut toy, 150_000_000, 500_000, sine);
        assert_eq!(phase_sequence(&steps), [Phase::Paced, Phase::Deferred, Phase::CatchUp, Phase::Paced]);
        let first = steps.iter().position(|s| s.decision.phase == Phase::Deferred).unwrap();
        let before = &steps[first - 1];
        // Paced while compaction kept up with the rising wave; deferred in
        // the interval after L0 reached twice its trigger (8 files).
        assert!(before.t_us >= 5_000_000, "deferred at {} us", steps[first].t_us);
        assert!(steps[..first - 1].iter().all(|s| s.l0_files < 8));
        assert!(steps[first].l0_files >= 8, "{} L0 files", steps[first].l0_files);
        // Held to the wave's end (the toy merges nothing, so its score
        // stays high; the deferral ends with the cool-down).
        assert_eq!(phase_at(&steps, 59_500_000), Phase::Deferred);

        // Ends by load, not by score: a deferral whose tree is no longer
        // behind (score 0.5) stays deferred while the load presses.
        let mut tuner = AdaptiveTuner::new(AdaptiveConfig {
            io_budget_bytes_per_sec: 100 * MB,
            rate_smoothing_pct: 100,
            ..AdaptiveConfig::adaptive()
        });
        let mut o = Observation::default();
        tuner.observe(&o);
        o.max_level_score = 1.5;
        let mut step = |o: &mut Observation, mb: u64, score: f64| {
            o.now_micros += 1_000_000;
            o.client_bytes += mb * MB;
            o.wal_bytes += mb * MB;
            o.flush_bytes += mb * MB;
            o.max_level_score = score;
            tuner.observe(o).phase
        };
        assert_eq!(step(&mut o, 40, 1.5), Phase::Paced, "pressed, but compaction keeps up");
        assert_eq!(step(&mut o, 40, 2.0), Phase::Deferred, "pressed and behind");
        assert_eq!(step(&mut o, 40, 0.5), Phase::Deferred, "still pressed");
        assert_eq!(step(&mut o, 0, 0.5), Phase::Paced, "the load has gone, nothing to catch up");
    }

    #[test]
    fn the_peak_rule_defers_a_cpu_bound_sine_at_once_and_catches_up_in_the_cool_down() {
        // A learned budget on a machine whose "disk" is the page cache: while
        // compaction runs it drives the budget far above what flushes use, so
        // the budget rule alone would never see flush pressure.
        let config = ungated(AdaptiveConfig {
            initial_budget_bytes_per_sec: 2000 * MB,
            max_l0_files: 2000,
            ..Default::default()
        });
        let mut tuner = AdaptiveTuner::new(config.clone());
        let mut toy = Toy::new(8, 3000);
        let steps = simulate(&mut tuner, &mut toy, 150_000_000, 500_000, sine);
        assert_eq!(phase_sequence(&steps), [Phase::Paced, Phase::Deferred, Phase::CatchUp, Phase::Paced]);
        // Deferred from the second observation (the first has no rates): the
        // load is at its own peak so far.
        assert_eq!(phase_at(&steps, 500_000), Phase::Deferred);
        // Held through the end of the wave: the peak rule resumes under 15 %
        // of the peak (2 x 250 MB/s), which only the cool-down reaches.
        assert_eq!(phase_at(&steps, 59_500_000), Phase::Deferred);
        let catch_up = steps.iter().find(|s| s.decision.phase == Phase::CatchUp).unwrap();
        assert!((60_000_000..63_000_000).contains(&catch_up.t_us), "catch-up at {}", catch_up.t_us);
        assert!(catch_up.l0_files > 500, "the wave's debt: {} L0 files", catch_up.l0_files);
        assert!(toy.score() < 1.0, "caught up by the end");
        let deferred_bytes: u64 =
            steps.iter().filter(|s| s.decision.phase == Phase::Deferred).map(|s| s.compaction).sum();
        assert_eq!(deferred_bytes, 0);
        // With the peak rule off, the same run never defers: the learned
        // budget dwarfs flush + WAL.
        let mut tuner = AdaptiveTuner::new(budget_only(config));
        let mut toy = Toy::new(8, 3000);
        let steps = simulate(&mut tuner, &mut toy, 60_000_000, 500_000, sine);
        assert!(steps.iter().all(|s| s.decision.phase != Phase::Deferred));
    }

    /// Compaction during the wave: while deferred, L0 run merges are on,
    /// paced to what the load leaves (the floor at the peak, most of the
    /// budget in a trough), and off again once the wave ends.
    #[test]
    fn a_deferral_merges_l0_runs_paced_to_the_waves_headroom() {
        let config =
            ungated(AdaptiveConfig { io_budget_bytes_per_sec: 1000 * MB, max_l0_files: 0, ..Default::default() });
        let mut tuner = AdaptiveTuner::new(config.clone());
        let mut toy = Toy::new(8, 3000);
        let wave = |t_us: u64| {
            let t = t_us as f64 / 1e6;
            100.0 * (std::f64::consts::TAU / 60.0 * t + 1.5 * std::f64::consts::PI).sin() + 150.0
        };
        // (time, phase, merging, compaction limit) per step.
        let mut seen = Vec::new();
        while toy.t_us < 150_000_000 {
            let t = toy.t_us;
            let load = if t < 120_000_000 { wave(t) } else { 0.0 };
            let decision = tuner.observe(&toy.observation());
            toy.apply(&decision.actions);
            seen.push((t, decision.phase, toy.merging, toy.limit));
            toy.run(500_000, load);
        }
        let at = |t_us: u64| *seen.iter().rev().find(|s| s.0 <= t_us).unwrap();
        let floor = (1000 * MB) as f64 * config.compaction_floor_pct as f64 / 100.0;
        // The second wave's peak (t = 90 s, 250 MB/s) and trough (t = 120 s, 50 MB/s).
        let (peak, trough) = (at(90_000_000), at(119_500_000));
        assert_eq!((peak.1, trough.1), (Phase::Deferred, Phase::Deferred));
        assert!(peak.2 && trough.2, "merging L0 runs while deferred");
        assert!(peak.3 <= 1.5 * floor, "at the peak the floor: {} against {floor}", peak.3);
        assert!(trough.3 >= 0.6 * (1000 * MB) as f64, "in the trough most of the budget: {}", trough.3);
        // Once the writes stop the deferral ends, and so do the merges.
        let after = at(149_000_000);
        assert_ne!(after.1, Phase::Deferred);
        assert!(!after.2, "no L0 run merges outside a deferral");
        // The idle mode never merges.
        let mut tuner = AdaptiveTuner::new(AdaptiveConfig { max_l0_files: 0, ..AdaptiveConfig::idle() });
        let mut toy = Toy::new(8, 3000);
        let steps = simulate(&mut tuner, &mut toy, 60_000_000, 500_000, wave);
        assert!(steps.iter().all(|s| !s.decision.actions.contains(&Action::MergeL0Runs(true))));
    }

    #[test]
    fn a_periodic_trough_does_not_end_a_deferral_under_the_peak_rule() {
        let config =
            ungated(AdaptiveConfig { io_budget_bytes_per_sec: 3000 * MB, max_l0_files: 0, ..Default::default() });
        let mut tuner = AdaptiveTuner::new(config);
        let mut toy = Toy::new(8, 3000);
        // Two full periods of the wave: troughs at 0, 60 and 120 s (50 MB/s, 20 % of the peak).
        let wave = |t_us: u64| {
            let t = t_us as f64 / 1e6;
            100.0 * (std::f64::consts::TAU / 60.0 * t + 1.5 * std::f64::consts::PI).sin() + 150.0
        };
        let steps = simulate(&mut tuner, &mut toy, 120_000_000, 500_000, wave);
        assert_eq!(phase_sequence(&steps), [Phase::Paced, Phase::Deferred]);
    }

    #[test]
    fn a_sine_load_is_deferred_at_the_peak_and_caught_up_after() {
        let mut tuner = AdaptiveTuner::new(ungated(budget_only(sine_config())));
        let mut toy = Toy::new(64, 600);
        let steps = simulate(&mut tuner, &mut toy, 180_000_000, 500_000, sine);
        assert_eq!(phase_sequence(&steps), [Phase::Paced, Phase::Deferred, Phase::CatchUp, Phase::Paced]);
        // Deferred from when flush + WAL reach half the budget (client 100 MB/s
        // at t = 10 s, seen a little late through smoothing) ...
        assert_eq!(phase_at(&steps, 9_000_000), Phase::Paced);
        assert_eq!(phase_at(&steps, 12_000_000), Phase::Deferred);
        assert_eq!(phase_at(&steps, 30_000_000), Phase::Deferred, "the peak");
        // ... through the end of the wave (hysteresis: 25 % to resume) ...
        assert_eq!(phase_at(&steps, 59_500_000), Phase::Deferred);
        // ... then caught up at the full budget with subcompactions.
        let catch_up = steps.iter().find(|s| s.decision.phase == Phase::CatchUp).unwrap();
        assert!((60_000_000..62_000_000).contains(&catch_up.t_us), "catch-up at {}", catch_up.t_us);
        assert_eq!(
            catch_up.decision.actions,
            [
                Action::SetSubcompactions(2),
                Action::SetCompactionRateLimit(400 * MB),
                Action::EnableAutoCompactions,
                Action::MergeL0Runs(false),
                Action::CatchUp
            ]
        );
        assert!(catch_up.l0_files > 100, "the peak's debt: {} L0 files", catch_up.l0_files);
        let back = steps.iter().rev().find(|s| s.decision.phase == Phase::CatchUp).unwrap().t_us;
        let paced = steps.iter().find(|s| s.t_us > back).unwrap();
        assert_eq!(paced.decision.phase, Phase::Paced);
        assert_eq!(paced.decision.actions[0], Action::SetSubcompactions(1));
        assert!(toy.score() < 1.0);
        // No compaction ran while deferred; it ran during catch-up.
        let deferred_bytes: u64 =
            steps.iter().filter(|s| s.decision.phase == Phase::Deferred).map(|s| s.compaction).sum();
        assert_eq!(deferred_bytes, 0);
        let entering_deferral = steps.iter().find(|s| s.decision.phase == Phase::Deferred).unwrap();
        // Entered at the wave's high: L0 run merges at the floor (5 % of 400 MB/s).
        assert_eq!(
            entering_deferral.decision.actions,
            [Action::SetCompactionRateLimit(20 * MB), Action::DisableAutoCompactions, Action::MergeL0Runs(true)]
        );
        assert_eq!(tuner.stats().deferrals, 1);
        assert_eq!(tuner.stats().catch_ups, 1);
    }

    #[test]
    fn bounds_force_compaction_during_a_deferral() {
        let config = AdaptiveConfig { max_l0_files: 32, ..sine_config() };
        let mut tuner = AdaptiveTuner::new(config);
        let mut toy = Toy::new(64, 2000);
        let steps = simulate(&mut tuner, &mut toy, 60_000_000, 500_000, |_| 150.0);
        let first_forced = steps.iter().position(|s| s.decision.phase == Phase::Forced).unwrap();
        let forced = &steps[first_forced];
        assert_eq!(forced.l0_files, 32);
        assert_eq!(steps[first_forced - 1].decision.phase, Phase::Deferred);
        assert_eq!(forced.decision.bound, Some(Bound::L0Files));
        assert_eq!(
            forced.decision.actions,
            // The full budget again after the deferral's merge pacing.
            [
                Action::SetSubcompactions(2),
                Action::SetCompactionRateLimit(400 * MB),
                Action::EnableAutoCompactions,
                Action::MergeL0Runs(false),
                Action::ForceCompaction(Bound::L0Files)
            ]
        );
        // Forced until L0 is back to 75 % of the bound: L0 never runs more
        // than one interval's flushes past the bound.
        let max_l0 = steps.iter().map(|s| s.l0_files).max().unwrap();
        assert!(max_l0 <= 33, "L0 reached {max_l0} files");
        let released = steps[first_forced..].iter().position(|s| s.decision.phase != Phase::Forced).unwrap();
        assert!(steps[first_forced + released].l0_files <= 24, "released above 75 % of the bound");
    }

    /// A bound reached during a deferral shows the load is sustained, not a
    /// burst: the tuner stops deferring (no Deferred / Forced cycling) until
    /// the load falls under its defer shares, then defers the next rise.
    /// One second of `write_mb` MB/s of client writes (as much WAL and
    /// flush; 100,000 keys when writing) beside `reads` point reads, with
    /// the tree behind (every level's score is 2).
    fn write_and_read(tuner: &mut AdaptiveTuner, o: &mut Observation, write_mb: u64, reads: u64) -> Decision {
        o.now_micros += 1_000_000;
        o.client_bytes += write_mb * MB;
        o.wal_bytes += write_mb * MB;
        o.flush_bytes += write_mb * MB;
        o.client_keys += if write_mb > 0 { 100_000 } else { 0 };
        o.client_reads += reads;
        o.max_level_score = 2.0;
        tuner.observe(o)
    }

    /// A tuner of `config` that has seen `first`, and the observation to go on from.
    fn started(config: AdaptiveConfig, first: Observation) -> (AdaptiveTuner, Observation) {
        let mut tuner = AdaptiveTuner::new(config);
        tuner.observe(&first);
        (tuner, first)
    }

    /// Adaptive with a 100 MB/s budget and unsmoothed rates: each
    /// observation's figures are the interval's own.
    fn unsmoothed_100mb() -> AdaptiveConfig {
        AdaptiveConfig { io_budget_bytes_per_sec: 100 * MB, rate_smoothing_pct: 100, ..AdaptiveConfig::adaptive() }
    }

    fn subcompaction_changes(actions: &[Action]) -> Vec<u32> {
        picked(actions, |a| if let Action::SetSubcompactions(n) = a { Some(*n) } else { None })
    }

    /// A load that reads is not deferred: with W5's readwhilewriting (a
    /// writer at full speed beside readers) adaptive deferred for as long as
    /// the writer ran, and every read checked the L0 runs it piled up.
    /// Writes alone, or with reads under 10 % of operations, are deferred;
    /// reads at a third of operations are not, and reads that begin end a
    /// deferral under way.
    #[test]
    fn load_pressure_does_not_defer_while_clients_read() {
        let config = unsmoothed_100mb();
        let phases = |reads: u64| {
            let (mut tuner, mut o) = started(config.clone(), Observation::default());
            (0..10).map(|_| write_and_read(&mut tuner, &mut o, 40, reads).phase).collect::<Vec<_>>()
        };
        assert!(phases(0).iter().all(|p| *p == Phase::Deferred), "{:?}", phases(0));
        assert!(phases(10_000).iter().all(|p| *p == Phase::Deferred), "{:?}", phases(10_000));
        assert!(phases(50_000).iter().all(|p| *p != Phase::Deferred), "{:?}", phases(50_000));

        let (mut tuner, mut o) = started(config.clone(), Observation::default());
        assert_eq!(write_and_read(&mut tuner, &mut o, 40, 0).phase, Phase::Deferred);
        assert_eq!(write_and_read(&mut tuner, &mut o, 40, 50_000).phase, Phase::CatchUp);

        // The rule off: reads or not, the load is deferred.
        let off = AdaptiveConfig { defer_max_read_share_pct: 0, ..config.clone() };
        let (mut tuner, mut o) = started(off, Observation::default());
        assert_eq!(write_and_read(&mut tuner, &mut o, 40, 50_000).phase, Phase::Deferred);

        // Waiting memtables defer whatever the reads.
        let waiting = Observation { immutable_memtables: 2, ..Observation::default() };
        let (mut tuner, mut o) = started(AdaptiveConfig { defer_min_score: 0.0, ..config.clone() }, waiting);
        assert_eq!(write_and_read(&mut tuner, &mut o, 40, 50_000).phase, Phase::Deferred);
    }

    fn stall_switches(actions: &[Action]) -> Vec<bool> {
        picked(actions, |a| if let Action::ConfiguredWriteStalls(on) = a { Some(*on) } else { None })
    }

    /// Readers get the write controller as configured, writers alone the
    /// backstop: W5's readwhilewriting at a tenth ran its writer at full
    /// speed beside the readers, L0 at tens of runs every read checked,
    /// where RocksDB's controller slows the writer at 20 L0 files.
    #[test]
    fn readers_get_the_configured_write_stalls_and_writers_alone_the_backstop() {
        let config = unsmoothed_100mb();
        let (mut tuner, mut o) = started(config.clone(), Observation::default());
        // Writes alone (100,000 keys/s): the backstop stays.
        for _ in 0..3 {
            assert_eq!(stall_switches(&write_and_read(&mut tuner, &mut o, 40, 0).actions), Vec::<bool>::new());
        }
        // Readers at a third of operations: the configured controller, once.
        assert_eq!(stall_switches(&write_and_read(&mut tuner, &mut o, 40, 50_000).actions), vec![true]);
        assert_eq!(stall_switches(&write_and_read(&mut tuner, &mut o, 40, 50_000).actions), Vec::<bool>::new());
        // At 7 % (between half the share and the share) nothing changes.
        assert_eq!(stall_switches(&write_and_read(&mut tuner, &mut o, 40, 8_000).actions), Vec::<bool>::new());
        // Under half the share: the backstop again.
        assert_eq!(stall_switches(&write_and_read(&mut tuner, &mut o, 40, 2_000).actions), vec![false]);
        // Reads alone, no writes at all, are a reading load too.
        assert_eq!(stall_switches(&write_and_read(&mut tuner, &mut o, 0, 50_000).actions), vec![true]);

        // The rule off, or no backstop to lift (no L0 bound): never.
        for quiet in [
            AdaptiveConfig { stall_read_share_pct: 0, ..config.clone() },
            AdaptiveConfig { max_l0_files: 0, ..config.clone() },
        ] {
            let (mut tuner, mut o) = started(quiet, Observation::default());
            for reads in [0, 50_000, 2_000, 50_000] {
                assert_eq!(stall_switches(&write_and_read(&mut tuner, &mut o, 40, reads).actions), Vec::<bool>::new());
            }
        }
    }

    #[test]
    fn a_catch_up_beside_reads_keeps_one_subcompaction_unless_l0_is_at_its_trigger() {
        let config = unsmoothed_100mb();
        let (mut tuner, mut o) = started(config, Observation::default());
        assert_eq!(write_and_read(&mut tuner, &mut o, 40, 0).phase, Phase::Deferred);
        // Writes stop and reads begin: the deferral ends (foreground under
        // its resume shares); the catch-up runs with one subcompaction,
        // which is what the engine already has.
        let d = write_and_read(&mut tuner, &mut o, 0, 150_000);
        assert_eq!(d.phase, Phase::CatchUp);
        assert!(d.actions.contains(&Action::CatchUp));
        assert_eq!(subcompaction_changes(&d.actions), Vec::<u32>::new());
        // The readers leave: the catch-up takes two.
        let d = write_and_read(&mut tuner, &mut o, 0, 0);
        assert_eq!((d.phase, subcompaction_changes(&d.actions)), (Phase::CatchUp, vec![2]));
        // They come back: one again.
        let d = write_and_read(&mut tuner, &mut o, 0, 150_000);
        assert_eq!((d.phase, subcompaction_changes(&d.actions)), (Phase::CatchUp, vec![1]));
        // L0 reaches its compaction trigger: every read checks each of its
        // runs, so its debt is paid with two, readers or not.
        o.l0_trigger = 4;
        o.l0_files = 4;
        let d = write_and_read(&mut tuner, &mut o, 0, 150_000);
        assert_eq!((d.phase, subcompaction_changes(&d.actions)), (Phase::CatchUp, vec![2]));
        o.l0_files = 3;
        let d = write_and_read(&mut tuner, &mut o, 0, 150_000);
        assert_eq!((d.phase, subcompaction_changes(&d.actions)), (Phase::CatchUp, vec![1]));
    }

    #[test]
    fn a_sustained_load_is_not_deferred_again_until_a_trough() {
        let config = AdaptiveConfig { max_l0_files: 32, ..sine_config() };
        let mut tuner = AdaptiveTuner::new(config);
        let mut toy = Toy::new(64, 2000);
        // Steady 150 MB/s for 60 s, a 10 s trough at 20 MB/s, then 150 again.
        let load = |t_us: u64| if (60_000_000..70_000_000).contains(&t_us) { 20.0 } else { 150.0 };
        let steps = simulate(&mut tuner, &mut toy, 100_000_000, 500_000, load);
        let first_forced = steps.iter().position(|s| s.decision.phase == Phase::Forced).unwrap();
        let steady = &steps[first_forced..steps.iter().position(|s| s.t_us >= 60_000_000).unwrap()];
        assert!(steady.len() > 60, "the bound came late: {}", steps[first_forced].t_us);
        assert!(
            steady.iter().all(|s| s.decision.phase != Phase::Deferred),
            "deferred again under the same load: {:?}",
            phase_sequence(steady)
        );
        // Once in the steady part, once after the trough's rise (the same
        // load again reaches the bound within 30 s).
        assert_eq!(tuner.stats().sustained, 2);
        // Compaction ran through the steady part (the toy's pacing cannot
        // keep up with 150 MB/s, so the bound may force it again, but the
        // tuner never stops compaction in between).
        assert!(steady.iter().all(|s| s.decision.actions.iter().all(|a| *a != Action::DisableAutoCompactions)));
        // The trough re-arms deferral; the next rise is deferred.
        let after = &steps[steps.iter().position(|s| s.t_us >= 70_000_000).unwrap()..];
        assert!(after.iter().take(10).any(|s| s.decision.phase == Phase::Deferred), "{:?}", phase_sequence(after));
    }

    /// L0 run merges keep the file count far under `max_l0_files` while a
    /// load that never eases piles bytes into L0 (W5's readwhilewriting left
    /// 19 GB in 36 L0 files over a 4.8 GB tree): the debt bound, L0's bytes
    /// against the tree below, forces compaction, and the load, shown to be
    /// sustained, is not deferred again. A young tree is left to the file
    /// bound.
    #[test]
    fn l0_bytes_past_the_bound_times_the_tree_below_force_compaction_whatever_the_file_count() {
        let default = unsmoothed_100mb();
        assert_eq!(default.max_l0_debt_ratio, 2.0);
        // 40 s of 80 MB/s flushed (and as much WAL), half-second intervals;
        // compaction, when not deferred, moves 120 MB of L0 below an interval.
        let run = |config: &AdaptiveConfig, lower_at_start: u64| {
            let mut tuner = AdaptiveTuner::new(config.clone());
            let mut o = observation(0, 0, 0, 0);
            (o.max_level_score, o.l0_files, o.lower_levels_bytes) = (5.0, 20, lower_at_start);
            let mut steps = Vec::new();
            for _ in 0..80 {
                o.now_micros += 500_000;
                o.flush_bytes += 40 * MB;
                o.wal_bytes += 40 * MB;
                o.client_bytes += 40 * MB;
                o.l0_bytes += 40 * MB;
                let d = tuner.observe(&o);
                if d.phase != Phase::Deferred && o.l0_bytes >= 120 * MB {
                    o.l0_bytes -= 120 * MB;
                    o.lower_levels_bytes += 120 * MB;
                }
                steps.push((o.l0_bytes, o.lower_levels_bytes, d.phase, d.bound));
            }
            steps
        };

        // The default (2, RocksDB universal's 200 %) and 1.
        for ratio in [2.0, 1.0] {
            let config = AdaptiveConfig { max_l0_debt_ratio: ratio, ..default.clone() };
            let steps = run(&config, 1000 * MB);
            let first = steps.iter().position(|s| s.2 == Phase::Forced).unwrap();
            // (The first interval paces: the budget's rates are not known yet.)
            assert!(steps[1..first].iter().all(|s| s.2 == Phase::Deferred), "{steps:?}");
            // Forced in the interval L0 reached `ratio` times the 1,000 MB below it.
            assert_eq!(steps[first].3, Some(Bound::L0Debt));
            assert_eq!(steps[first].0 + 120 * MB, (ratio * 1000.0) as u64 * MB);
            // Released once L0 is back to 75 % of the bound.
            let released = first + steps[first..].iter().position(|s| s.2 != Phase::Forced).unwrap();
            let (l0, lower, ..) = steps[released - 1];
            assert!(l0 as f64 <= 0.75 * ratio * lower as f64 + (120 * MB) as f64, "{l0} over {lower}");
            // The load never eased: no deferral after the bound, whatever the file count.
            assert!(steps[released..].iter().all(|s| s.2 != Phase::Deferred), "{:?}", &steps[released..]);
            assert!(steps.iter().all(|s| s.2 != Phase::Forced || s.3 != Some(Bound::L0Files)));
        }

        // A young tree (under a full base level below L0): deferred throughout.
        let young = run(&default, 100 * MB);
        assert!(young[1..].iter().all(|s| s.2 == Phase::Deferred), "{young:?}");
        assert_eq!(young.last().unwrap().0, 3200 * MB);
        // The bound off: deferred throughout as well.
        let off = run(&AdaptiveConfig { max_l0_debt_ratio: 0.0, ..default.clone() }, 1000 * MB);
        assert!(off[1..].iter().all(|s| s.2 == Phase::Deferred), "{off:?}");
    }

    #[test]
    fn space_amplification_and_pending_bytes_bounds_force_compaction() {
        let config = AdaptiveConfig {
            io_budget_bytes_per_sec: 100 * MB,
            rate_smoothing_pct: 100,
            defer: DeferPolicy::UntilIdle,
            max_space_amplification: 3.0,
            max_pending_compaction_bytes: 10 * MB,
            ..AdaptiveConfig::adaptive()
        };
        let mut tuner = AdaptiveTuner::new(config);
        let mut o = observation(0, 0, 0, 0);
        o.space_amplification = 1.5;
        let step = |tuner: &mut AdaptiveTuner, o: &mut Observation, sa: f64, pending: u64| {
            o.now_micros += 500_000;
            o.client_bytes += 10 * MB;
            o.space_amplification = sa;
            o.pending_compaction_bytes = pending;
            tuner.observe(o)
        };
        assert_eq!(tuner.observe(&o).phase, Phase::Deferred, "writing, not idle: deferred");
        assert_eq!(step(&mut tuner, &mut o, 2.9, 0).phase, Phase::Deferred);
        let d = step(&mut tuner, &mut o, 3.0, 0);
        assert_eq!((d.phase, d.bound), (Phase::Forced, Some(Bound::SpaceAmplification)));
        assert!(d.actions.contains(&Action::ForceCompaction(Bound::SpaceAmplification)));
        // Released at 1 + 75 % of the excess: 2.5.
        assert_eq!(step(&mut tuner, &mut o, 2.6, 0).phase, Phase::Forced);
        assert_eq!(step(&mut tuner, &mut o, 2.5, 0).phase, Phase::Deferred);
        let d = step(&mut tuner, &mut o, 1.2, 10 * MB);
        assert_eq!((d.phase, d.bound), (Phase::Forced, Some(Bound::PendingCompactionBytes)));
        assert_eq!(step(&mut tuner, &mut o, 1.2, 8 * MB).phase, Phase::Forced);
        assert_eq!(step(&mut tuner, &mut o, 1.2, 7 * MB).phase, Phase::Deferred);
        assert_eq!(tuner.stats().forced, 2);
    }

    #[test]
    fn waiting_memtables_pause_running_compactions() {
        let config = budget_only(AdaptiveConfig { io_budget_bytes_per_sec: 400 * MB, ..AdaptiveConfig::adaptive() });
        let mut tuner = AdaptiveTuner::new(config);
        let mut toy = Toy::new(8, 600);
        // Flush + WAL at 30 % of the budget: paced.
        let steps = simulate(&mut tuner, &mut toy, 5_000_000, 500_000, |_| 60.0);
        assert_eq!(phase_sequence(&steps), [Phase::Paced]);
        // Two memtables wait for flush: defer and stop running compactions.
        toy.imm = 2;
        let d = tuner.observe(&toy.observation());
        assert_eq!(d.phase, Phase::Deferred);
        // The deferral paces L0 run merges to the headroom (flush + WAL at
        // their peak: the floor, 5 % of 400 MB/s), and pauses them too.
        assert_eq!(
            d.actions,
            [
                Action::SetCompactionRateLimit(20 * MB),
                Action::DisableAutoCompactions,
                Action::PauseCompactions,
                Action::MergeL0Runs(true)
            ]
        );
        toy.apply(&d.actions);
        toy.run(500_000, 60.0);
        // Flushes caught up but flush + WAL still use over 25 % of the budget:
        // still deferred; running compactions may finish what they started.
        toy.imm = 0;
        let d = tuner.observe(&toy.observation());
        assert_eq!((d.phase, d.actions.as_slice()), (Phase::Deferred, [Action::ContinueCompactions].as_slice()));
        assert_eq!(tuner.stats().pauses, 1);
        // Load falls to 10 % of the budget: deferral ends.
        toy.apply(&d.actions);
        let steps = simulate(&mut tuner, &mut toy, 10_000_000, 500_000, |_| 20.0);
        assert_ne!(steps.last().unwrap().decision.phase, Phase::Deferred);
    }

    /// UW paper §6.3.2: 10 s bursts, 20 s idle, 120 s.
    fn bursts(t_us: u64) -> f64 {
        if (t_us / 1_000_000) % 30 < 10 {
            40.0
        } else {
            0.0
        }
    }

    fn idle_mode_compacts_only_between_bursts(idle: IdleConfig) {
        let config = AdaptiveConfig { io_budget_bytes_per_sec: 400 * MB, idle, ..AdaptiveConfig::idle() };
        let mut tuner = AdaptiveTuner::new(config);
        let mut toy = Toy::new(8, 600);
        let steps = simulate(&mut tuner, &mut toy, 120_000_000, 100_000, bursts);
        let in_bursts: u64 = steps.iter().filter(|s| s.client_mb > 0.0).map(|s| s.compaction).sum();
        let total: u64 = steps.iter().map(|s| s.compaction).sum();
        assert!(total > 0);
        assert!(in_bursts * 10 <= total, "{in_bursts} of {total} compaction bytes written during bursts");
        // Deferred within the first probe of each burst, released within a
        // probe (or the quiet time) after it, and caught up in each gap.
        for burst in 0..4u64 {
            let start = burst * 30_000_000;
            assert_eq!(phase_at(&steps, start + 1_000_000), Phase::Deferred, "burst {burst}");
            assert_eq!(phase_at(&steps, start + 9_900_000), Phase::Deferred, "burst {burst}");
            assert_ne!(phase_at(&steps, start + 11_100_000), Phase::Deferred, "gap {burst}");
            assert_eq!(phase_at(&steps, start + 29_900_000), Phase::Paced, "gap {burst}");
        }
        assert_eq!(tuner.stats().catch_ups, 4);
        // The L0 bound never had to step in.
        assert!(steps.iter().all(|s| s.l0_files < 256));
    }

    #[test]
    fn idle_mode_with_the_throughput_policy() {
        idle_mode_compacts_only_between_bursts(IdleConfig::throughput());
    }

    #[test]
    fn idle_mode_with_the_since_last_write_policy() {
        idle_mode_compacts_only_between_bursts(IdleConfig::since_last_write());
    }

    #[test]
    fn idle_mode_never_releases_while_writes_continue() {
        // 1 MB/s is above the 0.5 MB/s threshold: the client is never idle.
        let config = AdaptiveConfig {
            io_budget_bytes_per_sec: 400 * MB,
            idle: IdleConfig {
                policy: IdlePolicy::Throughput { threshold_bytes_per_sec: 500_000 },
                probe_interval_us: 500_000,
            },
            ..AdaptiveConfig::idle()
        };
        let mut tuner = AdaptiveTuner::new(config);
        let mut toy = Toy::new(1, 600);
        let steps = simulate(&mut tuner, &mut toy, 60_000_000, 100_000, |_| 1.0);
        assert_eq!(phase_sequence(&steps), [Phase::Deferred]);
        assert_eq!(toy.compaction, 0);
        assert!(toy.l0_files() >= 50);
    }

    /// One second of 40 MB/s of client writes (as much WAL and flush), the
    /// default family's shape left as it is.
    fn write_second(tuner: &mut AdaptiveTuner, o: &mut Observation) -> Decision {
        o.now_micros += 1_000_000;
        o.client_bytes += 40 * MB;
        o.wal_bytes += 40 * MB;
        o.flush_bytes += 40 * MB;
        o.client_keys += 100_000;
        tuner.observe(o)
    }

    /// A second family whose L0 fills is seen for itself: the same load
    /// and the same L0 in a second family while the default one stays
    /// empty gives the decisions it gives in a database with one family
    /// (deferred once its score reaches 2, forced at the bound), and the
    /// forced compaction names the second family.
    #[test]
    fn a_second_family_filling_its_l0_is_deferred_and_forced_for_itself_while_the_first_is_quiet() {
        let config = AdaptiveConfig { max_l0_files: 32, ..unsmoothed_100mb() };
        let logs = FamilyId(7);
        let (mut alone, mut one) = started(config.clone(), Observation::default());
        let (mut beside, mut two) = started(config, Observation::default());
        two.other_families = vec![FamilyGauges { family: logs, l0_trigger: 4, ..FamilyGauges::default() }];
        let mut forced_at = None;
        for files in 1..=40usize {
            // L0 grows a file a second, its score with it (trigger 4).
            (one.l0_files, one.l0_trigger, one.max_level_score) = (files, 4, files as f64 / 4.0);
            let b = &mut two.other_families[0];
            (b.l0_files, b.max_level_score) = (files, files as f64 / 4.0);
            let (d1, d2) = (write_second(&mut alone, &mut one), write_second(&mut beside, &mut two));
            assert_eq!((d2.phase, &d2.actions, d2.bound), (d1.phase, &d1.actions, d1.bound), "at {files} files");
            assert_eq!(two.l0_files, 0, "the default family stays quiet");
            match files {
                ..8 => assert_eq!(d2.phase, Phase::Paced, "{files} files: compaction keeps up"),
                8..32 => assert_eq!(d2.phase, Phase::Deferred, "{files} files: behind, deferred"),
                _ => {}
            }
            if d2.actions.contains(&Action::ForceCompaction(Bound::L0Files)) {
                forced_at.get_or_insert((files, d2.bound_family, d1.bound_family));
            }
        }
        assert_eq!(forced_at, Some((32, Some(logs), Some(FamilyId::DEFAULT))));
    }

    /// Each family's write stalls are its own: the backstop raises each
    /// family's configured limits, the configured ones put back are each
    /// family's, and a family that arrives while the configured ones are in
    /// force gets its own at once.
    #[test]
    fn each_family_gets_its_own_write_stall_limits() {
        let mut tuner = AdaptiveTuner::new(unsmoothed_100mb());
        let limits = |slowdown, stop, soft, hard| WriteStallLimits {
            level0_slowdown_writes_trigger: slowdown,
            level0_stop_writes_trigger: stop,
            soft_pending_compaction_bytes_limit: soft,
            hard_pending_compaction_bytes_limit: hard,
        };
        let (default, logs, late) = (FamilyId::DEFAULT, FamilyId(2), FamilyId(3));
        let (wide, tight, high) =
            (limits(20, 36, 64 << 30, 256 << 30), limits(4, 6, 1 << 30, 2 << 30), limits(5000, 5000, 0, 0));
        assert!(tuner.track_family(default, wide).is_empty(), "the engine opens families with the backstop");
        assert!(tuner.track_family(logs, tight).is_empty());
        let stalls = |tuner: &AdaptiveTuner, configured| tuner.commands(&Action::ConfiguredWriteStalls(configured));
        let backstop = limits(1536, 2048, 0, 0);
        assert_eq!(stalls(&tuner, false), [backstop.commands(default), backstop.commands(logs)].concat());
        assert_eq!(stalls(&tuner, true), [wide.commands(default), tight.commands(logs)].concat());
        // Readers arrive: the configured limits, each family's own.
        let (mut o, mut reads) = (Observation::default(), 0);
        tuner.observe(&o);
        let d = loop {
            reads += 50_000;
            o.client_reads = reads;
            let d = write_second(&mut tuner, &mut o);
            if d.actions.contains(&Action::ConfiguredWriteStalls(true)) {
                break d;
            }
            assert!(reads < 500_000, "readers never got the configured write controller");
        };
        assert_eq!(d.actions.iter().filter(|a| matches!(a, Action::ConfiguredWriteStalls(_))).count(), 1);
        // A family created now is brought to its configured limits.
        assert_eq!(tuner.track_family(late, high), high.commands(late).to_vec());
        // Above the backstop, the backstop keeps its own: it only raises.
        assert_eq!(stalls(&tuner, false)[4..], high.commands(late));
        tuner.forget_family(logs);
        assert_eq!(stalls(&tuner, true), [wide.commands(default), high.commands(late)].concat());
    }

    /// Memtables wait when one family's do: three families flushing one
    /// memtable each are three flushes in progress, not a backlog; two in
    /// one family are.
    #[test]
    fn memtables_wait_when_one_familys_do() {
        let (mut tuner, mut o) = started(unsmoothed_100mb(), Observation::default());
        let family =
            |id, imm| FamilyGauges { family: FamilyId(id), immutable_memtables: imm, ..FamilyGauges::default() };
        // Client writes with no flushes yet: not idle, no load pressure.
        let mut step = |o: &mut Observation| {
            o.now_micros += 1_000_000;
            o.client_bytes += 10 * MB;
            tuner.observe(o).phase
        };
        o.immutable_memtables = 1;
        o.other_families = vec![family(1, 1), family(2, 1)];
        assert_eq!(step(&mut o), Phase::Paced);
        o.other_families[1].immutable_memtables = 2;
        assert_eq!(step(&mut o), Phase::Deferred);
    }

    #[test]
    fn stall_backstop_sits_above_the_bound() {
        let config = AdaptiveConfig { max_l0_files: 100, ..AdaptiveConfig::adaptive() };
        assert_eq!(
            config.stall_backstop(),
            Some(WriteStallLimits {
                level0_slowdown_writes_trigger: 150,
                level0_stop_writes_trigger: 200,
                soft_pending_compaction_bytes_limit: 0,
                hard_pending_compaction_bytes_limit: 0,
            })
        );
        assert!(AdaptiveConfig { max_l0_files: 0, ..config }.stall_backstop().is_none());
    }

    #[test]
    fn space_amplification_estimate() {
        assert_eq!(space_amplification(&[]), 1.0);
        assert_eq!(space_amplification(&[0, 0, 0]), 1.0);
        assert_eq!(space_amplification(&[10, 20, 70, 0]), 100.0 / 70.0);
        assert_eq!(space_amplification(&[50, 0, 0]), 1.0);
    }
}
