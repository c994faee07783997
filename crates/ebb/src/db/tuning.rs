//! Wires the tuners of `crate::tuning` into a database: the rate limiter on
//! flush, compaction and WAL writes; the compaction pacer; the deferral flag
//! and pause gate the picker and compaction jobs obey; and the tuning thread
//! that feeds the tuners and carries out their decisions (docs/tuning.md).
//!
//! The tuners decide in typed [`TuningCommand`]s; this file is where the
//! engine carries them out ([`DbInner::carry_out`]): a family's command
//! changes that family's options in force and no other's, a database-wide
//! one a switch or a database option. No option text is built or parsed.
//!
//! Per instance, not process-global as the thesis's `Env` hack was: each
//! database has its own limiter, tuner and thread.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::DbInner;
use crate::clock::{micros, Clock};
use crate::error::Result;
use crate::events::TuningEvent;
use crate::options::{ColumnFamilyOptions, IdlePolicyKind, Options};
use crate::tuning::adaptive::{self, Action, AdaptiveConfig, AdaptiveTuner, FamilyGauges, Observation};
use crate::tuning::auto_tuner::{AutoTunerConfig, CompactionAutoTuner, StallLifting, TunedOptions};
use crate::tuning::command::{FamilyId, TuningCommand};
use crate::tuning::idle::{IdleConfig, IdlePolicy};
use crate::tuning::rate_limiter::{IoPriority, RateLimiter, RateLimiterOptions};
use crate::tuning::BackgroundTuning;
use crate::version::StorageInfoOptions;

/// What the tuner did, for `DbMetrics`, `ebb.stats` and ebb-bench's report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TuningMetrics {
    /// The mode in force (`off`, `thesis`, `adaptive`, `idle`).
    pub mode: &'static str,
    /// The adaptive tuner's phase (`paced`, `deferred`, `catch-up`, `forced`),
    /// or `enabled`/`disabled` for the thesis tuner.
    pub phase: &'static str,
    /// True while the tuner holds automatic compaction back.
    pub compaction_deferred: bool,
    /// True while running compactions (other than L0→base) are paused.
    pub compactions_paused: bool,
    /// Times compaction was switched off by the tuner.
    pub disables: u64,
    /// Times compaction was switched back on by the tuner.
    pub enables: u64,
    /// Times running compactions were paused.
    pub pauses: u64,
    /// Changes of the compaction rate limit.
    pub rate_changes: u64,
    /// Catch-ups started after a peak.
    pub catch_ups: u64,
    /// Times a bound forced compaction.
    pub forced: u64,
    /// The compaction-only rate limit now, bytes/s (0: none).
    pub compaction_rate_limit: u64,
    /// The rate limiter's rate now, bytes/s (0: no limiter).
    pub rate_limit: u64,
    /// Rate-limiter drains so far: (flush, compaction).
    pub drains: (u64, u64),
}

/// The tuning state shared by the write path, the jobs and the tuning thread.
///
/// Owns the switches the tuner sets and the engine obeys (the deferral, L0
/// run merges, the pause gate), the count of memtables waiting for flush
/// that run merges yield to, the time of the last client write and the
/// tuner's counters. The switches are atomics read without a lock by the
/// picker and the jobs; they change only through this type's methods, so
/// every change that may open the pause gate wakes the compactions waiting
/// there (`gate`).
pub(crate) struct TuningHooks {
    pub(crate) mode: BackgroundTuning,
    /// The database's clock (`Options::clock`).
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) limiter: Option<Arc<RateLimiter>>,
    /// Compaction-only limit set by the adaptive tuner's pacing.
    pub(crate) pacer: Option<Arc<RateLimiter>>,
    /// The tuner asks for no new automatic compactions.
    deferred: AtomicBool,
    /// While deferred, the tuner asks for L0 run merges only
    /// (`compaction::picker::pick_l0_run_merge`).
    merge_l0_runs: AtomicBool,
    /// The tuner asks running compactions below L0 to wait at a block boundary.
    paused: AtomicBool,
    /// Immutable memtables waiting for flush in the family with the most
    /// (kept by `install_super_version`): each family's writes stall on its
    /// own memtables, so one flush in progress in each of three families is
    /// no backlog.
    immutable_memtables: AtomicUsize,
    /// Waiting memtables at which L0 run merges yield at once, without
    /// waiting for the tuner's next observation (adaptive and idle modes:
    /// `pause_immutable_memtables`; 0 never).
    merge_yield_memtables: usize,
    /// Set by `close`: nothing waits at a gate any more.
    closed: AtomicBool,
    /// Compactions waiting at the pause gate (`on_compaction_bytes`), and
    /// the condition variable they wait on, notified by every change that
    /// may let them go on.
    gate_waiting: Mutex<usize>,
    gate: Condvar,
    /// The database clock's coarse time of the last client write, µs (0:
    /// none yet).
    last_write_micros: AtomicU64,
    metrics: Mutex<TuningMetrics>,
    /// What each family tuned was configured with, by family id, before the
    /// mode's changes at open ([`family_options_at_open`]): what a tuner
    /// puts back.
    configured: Mutex<BTreeMap<FamilyId, TunedOptions>>,
}

impl TuningHooks {
    pub(crate) fn new(opts: &Options) -> Result<TuningHooks> {
        let clock = Arc::clone(&opts.clock);
        let mode = opts.tuning_mode();
        let limiter = if opts.rate_limiter_bytes_per_sec > 0 {
            let mut ro = RateLimiterOptions::new(opts.rate_limiter_bytes_per_sec);
            ro.refill_period_us = opts.rate_limiter_refill_period_us;
            ro.fairness = opts.rate_limiter_fairness;
            ro.auto_tuned = opts.rate_limiter_auto_tuned;
            Some(Arc::new(RateLimiter::new(ro, Arc::clone(&clock))?))
        } else {
            None
        };
        let pacer = if matches!(mode, BackgroundTuning::Adaptive | BackgroundTuning::Idle) {
            // Starts unthrottled in practice; the tuner sets the paced limit.
            Some(Arc::new(RateLimiter::new(RateLimiterOptions::new(8 << 30), Arc::clone(&clock))?))
        } else {
            None
        };
        Ok(TuningHooks {
            mode,
            clock,
            limiter,
            pacer,
            deferred: AtomicBool::new(false),
            merge_l0_runs: AtomicBool::new(false),
            paused: AtomicBool::new(false),
            immutable_memtables: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            gate_waiting: Mutex::new(0),
            gate: Condvar::new(),
            merge_yield_memtables: match mode {
                BackgroundTuning::Adaptive | BackgroundTuning::Idle => adaptive_config(opts).pause_immutable_memtables,
                BackgroundTuning::Off | BackgroundTuning::Thesis => 0,
            },
            last_write_micros: AtomicU64::new(0),
            configured: Mutex::new(BTreeMap::new()),
            metrics: Mutex::new(TuningMetrics {
                mode: mode.name(),
                phase: if mode == BackgroundTuning::Off { "off" } else { "enabled" },
                ..Default::default()
            }),
        })
    }

    /// Accounts a WAL append (never blocks).
    pub(crate) fn on_wal_write(&self, bytes: u64) {
        if let Some(l) = &self.limiter {
            let _ = l.request(bytes, IoPriority::User);
        }
    }

    /// Stamps the time of a client write, for idle detection.
    pub(crate) fn on_client_write(&self) {
        if self.mode != BackgroundTuning::Off {
            self.last_write_micros.store(micros(self.clock.monotonic_coarse()).max(1), Ordering::Relaxed);
        }
    }

    /// Charges flush output to the limiter at high priority.
    pub(crate) fn on_flush_bytes(&self, bytes: u64) {
        if let Some(l) = &self.limiter {
            let _ = l.request(bytes, IoPriority::High);
        }
    }

    /// Charges compaction output at low priority and waits at the pause gate
    /// (compactions from L0 into a level never wait there: L0→base is never
    /// starved; L0 run merges do). An L0 run merge during a deferral
    /// (`run_merge`) also waits while `merge_yield_memtables` memtables wait
    /// for flush, checked at every block rather than at the tuner's next
    /// observation: at a wave's peak memtables fill in tens of
    /// milliseconds, and the tuner looks every 500.
    pub(crate) fn on_compaction_bytes(&self, bytes: u64, from_l0: bool, run_merge: bool, cancel: &AtomicBool) {
        if let Some(l) = &self.limiter {
            let _ = l.request(bytes, IoPriority::Low);
        }
        if let Some(p) = &self.pacer {
            let _ = p.request(bytes, IoPriority::Low);
        }
        let held = || {
            !cancel.load(Ordering::Relaxed)
                && ((!from_l0 && self.paused.load(Ordering::Relaxed)) || (run_merge && self.merge_must_yield()))
        };
        if held() {
            let mut waiting = self.gate_waiting.lock();
            *waiting += 1;
            self.gate.notify_all();
            // Every change of the switches notifies the gate; a cancelled
            // job (its flag is the job's, not ours) is seen within 5 ms.
            while held() {
                self.gate.wait_for(&mut waiting, Duration::from_millis(5));
            }
            *waiting -= 1;
        }
    }

    /// Wakes the compactions waiting at the pause gate to look at the
    /// switches again. Under the gate's lock, so a compaction about to wait
    /// cannot miss it.
    fn open_gate(&self) {
        drop(self.gate_waiting.lock());
        self.gate.notify_all();
    }

    /// Whether the tuner defers automatic compactions now.
    pub(crate) fn is_deferred(&self) -> bool {
        self.deferred.load(Ordering::Relaxed)
    }

    /// Starts (true) or ends (false) a deferral of automatic compactions.
    pub(crate) fn set_deferred(&self, deferred: bool) {
        self.deferred.store(deferred, Ordering::Relaxed);
        self.open_gate();
    }

    /// Whether L0 run merges are asked for during a deferral.
    pub(crate) fn merges_l0_runs(&self) -> bool {
        self.merge_l0_runs.load(Ordering::Relaxed)
    }

    /// Asks for L0 run merges during a deferral (true), or no longer.
    pub(crate) fn set_merge_l0_runs(&self, on: bool) {
        self.merge_l0_runs.store(on, Ordering::Relaxed);
    }

    /// Holds running compactions below L0 at the pause gate (true), or lets
    /// them go on.
    pub(crate) fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
        self.open_gate();
    }

    /// Lifts every hold the tuner puts on compaction: the deferral and the
    /// pause gate (a tuner that is gone can lift neither).
    pub(crate) fn lift_holds(&self) {
        self.deferred.store(false, Ordering::Relaxed);
        self.paused.store(false, Ordering::Relaxed);
        self.open_gate();
    }

    /// Records that the family with the most immutable memtables has `n`
    /// waiting for flush.
    pub(crate) fn set_immutable_memtables(&self, n: usize) {
        self.immutable_memtables.store(n, Ordering::Relaxed);
        self.open_gate();
    }

    /// The database clock's coarse time of the last client write, µs.
    fn last_write_micros(&self) -> Option<u64> {
        Some(self.last_write_micros.load(Ordering::Relaxed)).filter(|&t| t > 0)
    }

    /// Changes the tuner's counters with `f`.
    fn count(&self, f: impl FnOnce(&mut TuningMetrics)) {
        f(&mut self.metrics.lock());
    }

    /// The tuner's phase now.
    fn phase(&self) -> &'static str {
        self.metrics.lock().phase
    }

    /// Whether an L0 run merge waits now: a deferral is on and flushes are
    /// behind by `merge_yield_memtables` memtables or more.
    pub(crate) fn merge_must_yield(&self) -> bool {
        self.merge_yield_memtables > 0
            && !self.closed.load(Ordering::Relaxed)
            && self.deferred.load(Ordering::Relaxed)
            && self.immutable_memtables.load(Ordering::Relaxed) >= self.merge_yield_memtables
    }

    /// Wakes everything that may wait on the tuner (shutdown).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        self.paused.store(false, Ordering::Relaxed);
        self.open_gate();
        if let Some(l) = &self.limiter {
            l.close();
        }
        if let Some(p) = &self.pacer {
            p.close();
        }
    }

    /// Records that `family` was configured with `o` before
    /// [`family_options_at_open`] changed its options.
    pub(crate) fn track_family(&self, family: FamilyId, o: &ColumnFamilyOptions) {
        self.configured.lock().insert(family, tuned_options(o));
    }

    /// Forgets a dropped family.
    pub(crate) fn forget_family(&self, family: FamilyId) {
        self.configured.lock().remove(&family);
    }

    /// What `family` was configured with; its options in force when it was
    /// never tracked.
    fn configured(&self, family: FamilyId, in_force: &ColumnFamilyOptions) -> TunedOptions {
        self.configured.lock().get(&family).copied().unwrap_or_else(|| tuned_options(in_force))
    }

    pub(crate) fn snapshot(&self) -> TuningMetrics {
        let mut m = self.metrics.lock().clone();
        m.compaction_deferred = self.deferred.load(Ordering::Relaxed);
        m.compactions_paused = self.paused.load(Ordering::Relaxed);
        if let Some(l) = &self.limiter {
            let s = l.stats();
            m.rate_limit = s.bytes_per_second;
            m.drains = (s.high.drains, s.low.drains);
        }
        m
    }
}

fn tuned_options(o: &ColumnFamilyOptions) -> TunedOptions {
    TunedOptions {
        disable_auto_compactions: o.disable_auto_compactions,
        level0_file_num_compaction_trigger: o.level0_file_num_compaction_trigger,
        level0_slowdown_writes_trigger: o.level0_slowdown_writes_trigger,
        level0_stop_writes_trigger: o.level0_stop_writes_trigger,
        soft_pending_compaction_bytes_limit: o.soft_pending_compaction_bytes_limit,
        hard_pending_compaction_bytes_limit: o.hard_pending_compaction_bytes_limit,
    }
}

/// The adaptive tuner's configuration from the options.
pub(crate) fn adaptive_config(o: &Options) -> AdaptiveConfig {
    let mut c =
        if o.tuning_mode() == BackgroundTuning::Idle { AdaptiveConfig::idle() } else { AdaptiveConfig::adaptive() };
    c.io_budget_bytes_per_sec = o.tuning_io_budget;
    c.max_l0_files = o.tuning_max_l0_files;
    c.max_l0_debt_ratio = o.tuning_max_l0_debt_ratio;
    c.defer_max_read_share_pct = o.tuning_read_share_pct;
    c.stall_read_share_pct = o.tuning_read_share_pct;
    c.l0_debt_min_tree_bytes = o.max_bytes_for_level_base;
    c.base_subcompactions = o.max_subcompactions;
    c.catch_up_subcompactions = o.max_subcompactions.max(2);
    c.idle = IdleConfig {
        policy: match o.idle_policy {
            IdlePolicyKind::Throughput => {
                IdlePolicy::Throughput { threshold_bytes_per_sec: o.idle_throughput_threshold }
            }
            IdlePolicyKind::SinceLastWrite => {
                IdlePolicy::SinceLastWrite { quiet_us: o.idle_quiet_ms.saturating_mul(1000) }
            }
        },
        probe_interval_us: o.idle_probe_interval_ms.saturating_mul(1000),
    };
    c.interval_us = o.idle_probe_interval_ms.saturating_mul(1000);
    c
}

/// The options of `family`, configured with `cf` in a database opened with
/// `o`, with the changes its tuning mode makes when the family is opened or
/// created: the thesis's `PrepareAutoTunedCompactions` (§3.5.6), or the
/// adaptive tuner's stall backstop above its L0 bound. The backstop only
/// raises: an L0 trigger already above it stays (W2's "disabled" sets
/// 10000), and a pending-bytes limit is lifted only where the backstop has
/// none ([`crate::tuning::command::WriteStallLimits::raised_to`]).
pub(crate) fn family_options_at_open(
    o: &Options,
    family: FamilyId,
    mut cf: ColumnFamilyOptions,
) -> ColumnFamilyOptions {
    let commands = match o.tuning_mode() {
        BackgroundTuning::Off => Vec::new(),
        BackgroundTuning::Thesis => thesis_tuner(o, tuned_options(&cf)).prepare_commands(family),
        BackgroundTuning::Adaptive | BackgroundTuning::Idle => {
            adaptive_config(o).backstop_for(tuned_options(&cf).stalls()).commands(family).to_vec()
        }
    };
    for command in &commands {
        set_family_option(&mut cf, command);
    }
    cf
}

/// Carries out a command that changes a family's options on `cf`, that
/// family's options; database-wide commands change nothing here.
fn set_family_option(cf: &mut ColumnFamilyOptions, command: &TuningCommand) {
    match *command {
        TuningCommand::SetL0StallTriggers { slowdown, stop, .. } => {
            cf.level0_slowdown_writes_trigger = slowdown;
            cf.level0_stop_writes_trigger = stop;
        }
        TuningCommand::SetPendingCompactionLimits { soft, hard, .. } => {
            cf.soft_pending_compaction_bytes_limit = soft;
            cf.hard_pending_compaction_bytes_limit = hard;
        }
        TuningCommand::SetL0CompactionTrigger { trigger, .. } => cf.level0_file_num_compaction_trigger = trigger,
        TuningCommand::SetAutoCompactions { enabled, .. } => cf.disable_auto_compactions = !enabled,
        TuningCommand::SetSubcompactions(_)
        | TuningCommand::SetCompactionRateLimit(_)
        | TuningCommand::DeferCompactions(_)
        | TuningCommand::PauseCompactions(_)
        | TuningCommand::MergeL0Runs(_) => {}
    }
}

/// The thesis tuner of a database opened with `o` whose default family is
/// configured with `base`.
fn thesis_tuner(o: &Options, base: TunedOptions) -> CompactionAutoTuner {
    CompactionAutoTuner::new(
        AutoTunerConfig {
            flush_watermark_pct: o.tuning_flush_watermark_pct,
            total_watermark_pct: o.tuning_total_watermark_pct,
            interval_us: o.tuning_interval_us,
            stall_lifting: StallLifting::AtOpen,
        },
        base,
    )
}

impl DbInner {
    /// The tuning thread's body: runs until the database shuts down. A
    /// panic ends the thread and becomes the sticky background error; the
    /// holds the tuner may have left on compaction (deferral, the pause
    /// gate) are lifted, so no compaction waits for a tuner that is gone.
    pub(crate) fn tuning_loop(self: Arc<Self>) {
        let opts = self.opts();
        let default = self.tuning.configured(FamilyId::DEFAULT, &self.family_opts(&self.default_cf));
        let tune = || match self.tuning.mode {
            BackgroundTuning::Off => {}
            BackgroundTuning::Thesis => self.thesis_loop(thesis_tuner(&opts, default)),
            BackgroundTuning::Adaptive | BackgroundTuning::Idle => {
                self.adaptive_loop(AdaptiveTuner::new(adaptive_config(&opts)))
            }
        };
        if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(tune)) {
            self.tuning.lift_holds();
            let e = self.panic_error("tuning thread", payload);
            self.set_bg_error(e);
            self.work_cv.notify_all();
        }
    }

    fn shutting_down(&self) -> bool {
        self.state.lock().jobs.is_shutting_down()
    }

    /// Sleeps `d` of the database's clock (the whole of it: `work_cv` is
    /// notified by every flush and compaction, and a tuner woken by those
    /// would judge rates over intervals of a millisecond); false once the
    /// database shuts down.
    fn tuner_sleep(&self, d: Duration) -> bool {
        let clock = &self.tuning.clock;
        let deadline = clock.monotonic() + d;
        let mut st = self.state.lock();
        while !st.jobs.is_shutting_down() {
            let Some(left) = deadline.checked_sub(clock.monotonic()).filter(|left| !left.is_zero()) else { break };
            self.work_cv.wait_for(&mut st, clock.real_wait(left));
        }
        !st.jobs.is_shutting_down()
    }

    /// The families created and dropped since a tuner last looked
    /// (`tracked`: the ones it knows, brought up to date): each new one with
    /// what it was configured with, and the ids of those gone.
    fn family_changes(&self, tracked: &mut BTreeSet<FamilyId>) -> (Vec<(FamilyId, TunedOptions)>, Vec<FamilyId>) {
        let live: Vec<(FamilyId, Arc<ColumnFamilyOptions>)> = {
            let st = self.state.lock();
            st.families.iter().map(|(id, f)| (FamilyId(id), self.family_opts(f.data()))).collect()
        };
        let gone: Vec<FamilyId> = tracked.iter().filter(|id| !live.iter().any(|(l, _)| l == *id)).copied().collect();
        for id in &gone {
            tracked.remove(id);
        }
        let new = live
            .into_iter()
            .filter(|(id, _)| tracked.insert(*id))
            .map(|(id, in_force)| (id, self.tuning.configured(id, &in_force)))
            .collect();
        (new, gone)
    }

    /// Carries out the commands a tuner gave for family `id` when it first
    /// saw it. On an error the family keeps the options it was opened
    /// with (the tuner's next decision carries the rest out again).
    fn carry_out_for_new_family(&self, id: FamilyId, commands: &[TuningCommand]) {
        if let Err(e) = self.carry_out(commands) {
            self.info_log.log(
                super::info_log::Level::Warn,
                &format!("tuning commands for column family {} not carried out: {e}", id.0),
            );
        }
    }

    fn thesis_loop(&self, mut tuner: CompactionAutoTuner) {
        let Some(limiter) = self.tuning.limiter.clone() else { return };
        let mut tracked = BTreeSet::from([FamilyId::DEFAULT]);
        while self.tuner_sleep(Duration::from_millis(100)) {
            let (new, gone) = self.family_changes(&mut tracked);
            for id in gone {
                tuner.forget_family(id);
            }
            for (id, base) in new {
                let commands = tuner.track_family(id, base);
                self.carry_out_for_new_family(id, &commands);
            }
            let Some(decision) = tuner.poll(&limiter.stats()) else { continue };
            if !decision.toggled {
                continue;
            }
            if let Err(e) = self.carry_out(&decision.commands) {
                // The tuning thread ends here: a resume would leave the
                // database untuned, so only a reopen ends this error.
                self.set_fatal_bg_error(e);
                return;
            }
            let enabled = decision.compaction_enabled;
            self.tuning.count(|m| {
                m.phase = if enabled { "enabled" } else { "disabled" };
                if enabled {
                    m.enables += 1;
                } else {
                    m.disables += 1;
                }
            });
            self.tuning_event(if enabled { "enable compaction" } else { "disable compaction" }.into());
        }
    }

    fn adaptive_loop(&self, mut tuner: AdaptiveTuner) {
        let interval = Duration::from_micros(tuner.config().interval_us.max(1000));
        let mut tracked = BTreeSet::new();
        while self.tuner_sleep(interval) {
            if self.shutting_down() {
                return;
            }
            let (new, gone) = self.family_changes(&mut tracked);
            for id in gone {
                tuner.forget_family(id);
            }
            for (id, base) in new {
                let commands = tuner.track_family(id, base.stalls());
                self.carry_out_for_new_family(id, &commands);
            }
            let m = self.metrics();
            let (mut families, names) = self.family_gauges();
            let default = if families.first().is_some_and(|f| f.family == FamilyId::DEFAULT) {
                families.remove(0)
            } else {
                FamilyGauges::default()
            };
            let obs = Observation {
                now_micros: micros(self.tuning.clock.monotonic()),
                client_bytes: m.user_bytes_written,
                client_keys: m.user_keys_written,
                client_reads: m.user_reads,
                wal_bytes: m.wal_bytes,
                flush_bytes: m.flush_bytes_written,
                compaction_bytes: m.compaction_bytes_written,
                last_write_micros: self.tuning.last_write_micros(),
                l0_files: default.l0_files,
                immutable_memtables: default.immutable_memtables,
                pending_compaction_bytes: default.pending_compaction_bytes,
                max_level_score: default.max_level_score,
                space_amplification: default.space_amplification,
                l0_bytes: default.l0_bytes,
                lower_levels_bytes: default.lower_levels_bytes,
                l0_trigger: default.l0_trigger,
                other_families: families,
            };
            let decision = tuner.observe(&obs);
            self.tuning.count(|m| m.phase = decision.phase.name());
            // A bound crossed in a family other than the default one is
            // told with the family's name.
            let family = decision.bound_family.filter(|f| *f != FamilyId::DEFAULT).and_then(|f| names.get(&f));
            for action in decision.actions {
                let commands = tuner.commands(&action);
                self.apply_action(action, &commands, family.map(String::as_str));
            }
        }
    }

    /// Each live family's gauges, the default family's first, and the
    /// families' names.
    fn family_gauges(&self) -> (Vec<FamilyGauges>, BTreeMap<FamilyId, String>) {
        let st = self.state.lock();
        let mut names = BTreeMap::new();
        let gauges = st
            .families
            .iter()
            .map(|(id, family)| {
                names.insert(FamilyId(id), family.data().name.clone());
                let o = self.family_opts(family.data());
                let version = st.versions.version(id).unwrap_or_default();
                let shape = StorageInfoOptions::from_options(&o);
                let bytes_per_level: Vec<u64> = (0..version.num_levels()).map(|l| version.level_bytes(l)).collect();
                let scores = version.level_scores(&shape, st.jobs.being_compacted());
                FamilyGauges {
                    family: FamilyId(id),
                    l0_files: version.num_files(0),
                    immutable_memtables: family.imm().len(),
                    pending_compaction_bytes: version.estimate_pending_compaction_bytes(&shape),
                    max_level_score: scores.into_iter().fold(0.0f64, f64::max),
                    space_amplification: adaptive::space_amplification(&bytes_per_level),
                    l0_bytes: bytes_per_level.first().copied().unwrap_or(0),
                    lower_levels_bytes: bytes_per_level.iter().skip(1).sum(),
                    l0_trigger: usize::try_from(o.level0_file_num_compaction_trigger).unwrap_or(1),
                }
            })
            .collect();
        (gauges, names)
    }

    /// Carries out `action` (as `commands`, what the tuner gave for it),
    /// counts it, and tells the listeners; `family` names the column family
    /// (not the default one) whose bound a forced compaction answers.
    fn apply_action(&self, action: Action, commands: &[TuningCommand], family: Option<&str>) {
        let done = self.carry_out(commands);
        let text = match action {
            Action::EnableAutoCompactions => {
                self.tuning.count(|m| m.enables += 1);
                "enable compaction".to_string()
            }
            Action::DisableAutoCompactions => {
                self.tuning.count(|m| m.disables += 1);
                "defer compaction".to_string()
            }
            Action::PauseCompactions => {
                self.tuning.count(|m| m.pauses += 1);
                "pause compactions".to_string()
            }
            Action::ContinueCompactions => "continue compactions".to_string(),
            Action::SetCompactionRateLimit(rate) => {
                self.tuning.count(|m| {
                    m.rate_changes += 1;
                    m.compaction_rate_limit = rate;
                });
                format!("compaction rate {rate} B/s")
            }
            Action::SetSubcompactions(n) => format!("subcompactions {n}"),
            Action::CatchUp => {
                self.tuning.count(|m| m.catch_ups += 1);
                self.work_cv.notify_all();
                "catch up".to_string()
            }
            Action::MergeL0Runs(on) => format!("merge L0 runs while deferred: {on}"),
            Action::ConfiguredWriteStalls(configured) => {
                let which = if configured { "as configured (clients read)" } else { "at the backstop" };
                match done {
                    Ok(()) => format!("write stalls {which}"),
                    // Both sets were in force once (the configured ones at
                    // open); failing now leaves the current ones, which
                    // still stall writes.
                    Err(e) => format!("write stalls {which} failed: {e}"),
                }
            }
            Action::ForceCompaction(bound) => {
                self.tuning.count(|m| m.forced += 1);
                match family {
                    Some(name) => format!("force compaction ({bound:?}) in column family '{name}'"),
                    None => format!("force compaction ({bound:?})"),
                }
            }
        };
        self.tuning_event(text);
    }

    fn tuning_event(&self, action: String) {
        let phase = self.tuning.phase();
        let event = TuningEvent { mode: self.tuning.mode.name(), action, phase };
        self.notify_event("on_background_tuning", |l| l.on_background_tuning(&event));
    }

    /// Carries out a tuner's `commands`, in order: the switches at once; the
    /// option changes (dynamic or not: the tuner owns them) as one new set
    /// of options in force per family changed, each family's commands
    /// applied to that family's options only, and the database's. A command
    /// for a family that is gone (dropped meanwhile) changes nothing. On an
    /// error (options that do not validate) no option changes.
    pub(crate) fn carry_out(&self, commands: &[TuningCommand]) -> Result<()> {
        let hooks = &self.tuning;
        let mut subcompactions = None;
        let mut family_commands: BTreeMap<FamilyId, Vec<&TuningCommand>> = BTreeMap::new();
        for command in commands {
            match *command {
                TuningCommand::DeferCompactions(deferred) => {
                    hooks.set_deferred(deferred);
                    if !deferred {
                        self.work_cv.notify_all();
                    }
                }
                TuningCommand::PauseCompactions(paused) => hooks.set_paused(paused),
                TuningCommand::MergeL0Runs(on) => {
                    hooks.set_merge_l0_runs(on);
                    self.work_cv.notify_all();
                }
                TuningCommand::SetCompactionRateLimit(rate) => {
                    if let Some(p) = &hooks.pacer {
                        let _ = p.set_bytes_per_second(rate.max(1 << 20));
                    }
                }
                TuningCommand::SetSubcompactions(n) => subcompactions = Some(n),
                TuningCommand::SetL0StallTriggers { family, .. }
                | TuningCommand::SetPendingCompactionLimits { family, .. }
                | TuningCommand::SetL0CompactionTrigger { family, .. }
                | TuningCommand::SetAutoCompactions { family, .. } => {
                    family_commands.entry(family).or_default().push(command)
                }
            }
        }
        if subcompactions.is_none() && family_commands.is_empty() {
            return Ok(());
        }
        // The families' data first: the db mutex is never taken under the
        // options lock (listeners read the options under the db mutex).
        let others: Vec<_> = {
            let st = self.state.lock();
            family_commands
                .keys()
                .filter(|id| **id != FamilyId::DEFAULT)
                .filter_map(|id| st.families.get(id.0).map(|f| Arc::clone(f.data())))
                .collect()
        };
        let mut guard = self.options.lock();
        let mut next = Options::clone(&guard);
        if let Some(n) = subcompactions {
            next.max_subcompactions = n;
        }
        if let Some(commands) = family_commands.get(&FamilyId::DEFAULT) {
            let mut cf = next.cf_options();
            for command in commands {
                set_family_option(&mut cf, command);
            }
            next = next.with_cf_options(cf);
        }
        next.validate()?;
        let mut changed = Vec::with_capacity(others.len());
        for data in others {
            let mut cf = ColumnFamilyOptions::clone(&self.family_opts(&data));
            for command in family_commands.get(&FamilyId(data.id)).into_iter().flatten() {
                set_family_option(&mut cf, command);
            }
            cf.validate()?;
            changed.push((data, cf));
        }
        self.put_options_in_force(&mut guard, next);
        for (data, cf) in changed {
            data.set_options(Arc::new(cf));
        }
        drop(guard);
        self.state.lock().controller.invalidate();
        self.bg_cv.notify_all();
        self.work_cv.notify_all();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a family's options hold of what the tuners change: (slowdown,
    /// stop, soft, hard, compaction trigger, automatic compactions off).
    fn tuned(o: &ColumnFamilyOptions) -> (i32, i32, u64, u64, i32, bool) {
        (
            o.level0_slowdown_writes_trigger,
            o.level0_stop_writes_trigger,
            o.soft_pending_compaction_bytes_limit,
            o.hard_pending_compaction_bytes_limit,
            o.level0_file_num_compaction_trigger,
            o.disable_auto_compactions,
        )
    }

    /// The engine carries a family's commands out on that family's options
    /// in force and on no other family's; the default family's are the
    /// database's options; a command that would make options invalid
    /// changes nothing; a dropped family's changes nothing.
    #[test]
    fn a_family_command_changes_that_familys_options_and_no_others() {
        let dir = tempfile::tempdir().unwrap();
        let o = Options { create_if_missing: true, background_tuning: BackgroundTuning::Off, ..Options::default() };
        let db = crate::Db::open(dir.path(), o).unwrap();
        let b = db.create_column_family("b", ColumnFamilyOptions::default()).unwrap();
        let c = db.create_column_family("c", ColumnFamilyOptions::default()).unwrap();
        let (family_b, default) = (FamilyId(b.id()), FamilyId::DEFAULT);
        let untouched = tuned(&ColumnFamilyOptions::default());
        let now = |h: &crate::ColumnFamilyHandle| tuned(&db.inner.family_opts(&h.data));
        db.inner
            .carry_out(&[
                TuningCommand::SetL0StallTriggers { family: family_b, slowdown: 111, stop: 222 },
                TuningCommand::SetPendingCompactionLimits { family: family_b, soft: 5, hard: 6 },
                TuningCommand::SetL0CompactionTrigger { family: family_b, trigger: 7 },
                TuningCommand::SetAutoCompactions { family: family_b, enabled: false },
            ])
            .unwrap();
        assert_eq!(now(&b), (111, 222, 5, 6, 7, true));
        assert_eq!(now(&c), untouched);
        assert_eq!(tuned(&db.options().cf_options()), untouched);
        assert_eq!(tuned(&db.inner.family_opts(&db.inner.default_cf)), untouched);
        // The default family's: the database's options, and its family's part.
        db.inner
            .carry_out(&[
                TuningCommand::SetL0StallTriggers { family: default, slowdown: 300, stop: 400 },
                TuningCommand::SetSubcompactions(3),
            ])
            .unwrap();
        assert_eq!((db.options().level0_slowdown_writes_trigger, db.options().max_subcompactions), (300, 3));
        assert_eq!(db.inner.family_opts(&db.inner.default_cf).level0_stop_writes_trigger, 400);
        assert_eq!(now(&b), (111, 222, 5, 6, 7, true));
        assert_eq!(now(&c), untouched);
        // Triggers under 1 do not validate: nothing changes, in that family or another.
        let bad = [
            TuningCommand::SetL0CompactionTrigger { family: FamilyId(c.id()), trigger: 9 },
            TuningCommand::SetL0StallTriggers { family: family_b, slowdown: 0, stop: 0 },
        ];
        assert!(db.inner.carry_out(&bad).is_err());
        assert_eq!((now(&b), now(&c)), ((111, 222, 5, 6, 7, true), untouched));
        // A family dropped since the tuner decided: nothing to change.
        db.drop_column_family(&c).unwrap();
        db.inner.carry_out(&[TuningCommand::SetL0CompactionTrigger { family: FamilyId(c.id()), trigger: 9 }]).unwrap();
        assert_eq!(now(&b), (111, 222, 5, 6, 7, true));
    }

    fn hooks(mode: BackgroundTuning) -> TuningHooks {
        let opts = Options { background_tuning: mode, ..Options::default() };
        TuningHooks::new(&opts).unwrap()
    }

    #[test]
    fn run_merges_yield_at_once_while_memtables_wait_in_a_deferral() {
        let h = hooks(BackgroundTuning::Adaptive);
        h.set_deferred(true);
        h.set_immutable_memtables(1);
        assert!(!h.merge_must_yield(), "one memtable waiting is a flush in progress");
        h.set_immutable_memtables(2);
        assert!(h.merge_must_yield());
        h.set_deferred(false);
        assert!(!h.merge_must_yield(), "outside a deferral an L0 merge is the engine's own intra-L0 work");
        // `off` never holds a merge back.
        let off = hooks(BackgroundTuning::Off);
        off.set_deferred(true);
        off.set_immutable_memtables(5);
        assert!(!off.merge_must_yield());
    }

    /// Waits until a compaction waits at `h`'s pause gate.
    fn wait_at_the_gate(h: &TuningHooks) {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let mut waiting = h.gate_waiting.lock();
        while *waiting == 0 {
            assert!(!h.gate.wait_until(&mut waiting, deadline).timed_out(), "no compaction reached the gate");
        }
    }

    #[test]
    fn a_yielding_run_merge_goes_on_when_flushes_catch_up_or_at_close() {
        let h = Arc::new(hooks(BackgroundTuning::Adaptive));
        h.set_deferred(true);
        h.set_immutable_memtables(3);
        let cancel = AtomicBool::new(false);
        // An L0→base compaction never waits here.
        h.on_compaction_bytes(4096, true, false, &cancel);
        // A run merge on another thread, which says when it goes on.
        let merge = |h: &Arc<TuningHooks>| {
            let (done, went_on) = std::sync::mpsc::channel();
            let h = Arc::clone(h);
            std::thread::spawn(move || {
                h.on_compaction_bytes(4096, false, true, &AtomicBool::new(false));
                let _ = done.send(());
            });
            went_on
        };
        let went_on = merge(&h);
        wait_at_the_gate(&h);
        assert!(went_on.try_recv().is_err(), "the merge went on while three memtables waited");
        h.set_immutable_memtables(1);
        went_on.recv_timeout(Duration::from_secs(60)).expect("the merge went on once flushes caught up");
        // Waiting again, then the database closes: the gate opens.
        h.set_immutable_memtables(3);
        let went_on = merge(&h);
        wait_at_the_gate(&h);
        h.close();
        went_on.recv_timeout(Duration::from_secs(60)).expect("the merge went on at close");
    }
}
