//! Write stalls (RocksDB's `WriteController`, with
//! `ColumnFamilyData::RecalculateWriteStallConditions` and `SetupDelay`):
//! the condition the tree's shape calls for (normal, writes delayed, or
//! writes stopped), worked out over every column family, and the delayed
//! write rate writes are paced to while delayed (docs/compaction.md,
//! "Write stalls").
//!
//! Invariants (all under the db mutex):
//! 1. The condition depends only on the versions, the immutable memtables
//!    and the options: it is remembered, and worked out anew (db/stalls.rs)
//!    only after one of them changed ([`WriteController::invalidate`] is
//!    called then: a super version installed, a family dropped, options
//!    set).
//! 2. While delayed, writes are charged to a virtual clock at the delayed
//!    write rate; the rate stays between 16 KiB/s and
//!    `delayed_write_rate`.

use std::time::Duration;

use super::StallCondition;
use crate::options::ColumnFamilyOptions;
use crate::stats::StallCause;

/// The stall condition one family's version and options call for.
pub(crate) fn family_stall_condition(version: &crate::version::Version, opts: &ColumnFamilyOptions) -> StallCondition {
    // L0 files under leveled compaction, sorted runs under universal, none
    // under FIFO (`l0_delay_trigger_count`).
    let shape = crate::version::StorageInfoOptions::from_options(opts);
    let l0 = version.l0_delay_trigger_count(&shape) as i32;
    let compaction_on = !opts.disable_auto_compactions;
    let pending = if compaction_on
        && (opts.soft_pending_compaction_bytes_limit > 0 || opts.hard_pending_compaction_bytes_limit > 0)
    {
        version.estimate_pending_compaction_bytes(&shape)
    } else {
        0
    };
    // Adjusted as RocksDB adjusts them (`Options::effective_l0_stall_triggers`).
    let (slowdown, stop) = opts.effective_l0_stall_triggers();
    if compaction_on && l0 >= stop {
        StallCondition::Stopped(StallCause::L0Stop)
    } else if compaction_on
        && opts.hard_pending_compaction_bytes_limit > 0
        && pending >= opts.hard_pending_compaction_bytes_limit
    {
        StallCondition::Stopped(StallCause::PendingCompactionStop)
    } else if compaction_on && l0 >= slowdown {
        StallCondition::Delayed(StallCause::L0Slowdown)
    } else if compaction_on
        && opts.soft_pending_compaction_bytes_limit > 0
        && pending >= opts.soft_pending_compaction_bytes_limit
    {
        StallCondition::Delayed(StallCause::PendingCompactionSlowdown)
    } else {
        StallCondition::Normal
    }
}

/// Smallest delayed write rate the controller adapts down to (RocksDB's floor).
const MIN_DELAYED_WRITE_RATE: u64 = 16 * 1024;

/// RocksDB's `SetupDelay` ratios: the rate falls by this while the debt does
/// not shrink, and rises by its inverse while it does.
const INC_SLOWDOWN_RATIO: f64 = 0.8;
/// Near a stop: the rate falls by this.
const NEAR_STOP_SLOWDOWN_RATIO: f64 = 0.6;
/// Leaving a delay for no stall: the rate kept for the next delay rises by this.
const DELAY_RECOVER_SLOWDOWN_RATIO: f64 = 1.4;

/// Delays writes while the tree is behind (RocksDB `WriteController` with
/// `ColumnFamilyData::RecalculateWriteStallConditions` and `SetupDelay`):
/// writes are paced to the delayed write rate by a virtual clock. The rate
/// is kept between delays and adapted each time the condition is recomputed
/// (after each flush, compaction and memtable switch) from the pending
/// compaction bytes, whatever caused the delay: down by 0.8 while they do
/// not shrink, up by 1.25 while they do, down by 0.6 near a stop (L0 within
/// two files of its stop trigger, or pending bytes in the last quarter
/// between the soft and hard limits); up by 1.4 when a delay ends. A delay
/// starts at the rate the previous one left. Between 16 KiB/s and
/// `delayed_write_rate`.
#[derive(Debug)]
pub(crate) struct WriteController {
    condition: StallCondition,
    /// The condition of the current versions, memtables and options;
    /// `None` once any of them changed (invariant 1).
    cached: Option<StallCondition>,
    /// The delayed write rate, kept between delays; 0 until the first one.
    delayed_rate: u64,
    /// Pending compaction bytes at the previous recomputation.
    prev_pending: u64,
    /// When the next write may go, on the database clock's monotonic time.
    next_write: Option<Duration>,
}

impl Default for WriteController {
    fn default() -> Self {
        WriteController {
            condition: StallCondition::Normal,
            cached: None,
            delayed_rate: 0,
            prev_pending: 0,
            next_write: None,
        }
    }
}

/// The debt a stall condition is judged on, the largest over the families.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StallDebt {
    /// Pending compaction bytes.
    pub(crate) pending: u64,
    /// L0 within two files of its stop trigger, or pending bytes past three
    /// quarters of the way from the soft to the hard limit.
    pub(crate) near_stop: bool,
}

impl WriteController {
    /// The condition in force.
    pub(crate) fn condition(&self) -> StallCondition {
        self.condition
    }

    /// The condition last worked out, while nothing it depends on changed.
    pub(crate) fn cached(&self) -> Option<StallCondition> {
        self.cached
    }

    /// Remembers the condition worked out for the current state.
    pub(crate) fn remember(&mut self, c: StallCondition) {
        self.cached = Some(c);
    }

    /// The versions, the immutable memtables or the options changed: the
    /// condition is worked out anew before the next write.
    pub(crate) fn invalidate(&mut self) {
        self.cached = None;
    }

    /// The current delayed write rate, bytes/s (0 when not delaying).
    pub(crate) fn rate(&self) -> u64 {
        if matches!(self.condition, StallCondition::Delayed(_)) {
            self.delayed_rate
        } else {
            0
        }
    }

    pub(crate) fn update(&mut self, condition: StallCondition, debt: StallDebt, opts: &crate::Options) {
        let max = opts.delayed_write_rate;
        if self.delayed_rate == 0 {
            self.delayed_rate = max;
        }
        let was_delayed = matches!(self.condition, StallCondition::Delayed(_));
        let scale = |rate: u64, by: f64| ((rate as f64 * by) as u64).clamp(MIN_DELAYED_WRITE_RATE.min(max), max);
        match condition {
            StallCondition::Delayed(_) => {
                if opts.disable_auto_compactions {
                    self.delayed_rate = max;
                } else if was_delayed && max > MIN_DELAYED_WRITE_RATE {
                    // A delay entered now keeps the rate the last one left.
                    if debt.near_stop {
                        self.delayed_rate = scale(self.delayed_rate, NEAR_STOP_SLOWDOWN_RATIO);
                    } else if self.prev_pending > 0 && self.prev_pending <= debt.pending {
                        self.delayed_rate = scale(self.delayed_rate, INC_SLOWDOWN_RATIO);
                    } else if self.prev_pending > debt.pending {
                        self.delayed_rate = scale(self.delayed_rate, 1.0 / INC_SLOWDOWN_RATIO);
                    }
                }
                self.delayed_rate = self.delayed_rate.min(max);
            }
            StallCondition::Normal if was_delayed => {
                self.delayed_rate = scale(self.delayed_rate, DELAY_RECOVER_SLOWDOWN_RATIO);
            }
            _ => {}
        }
        if !matches!(condition, StallCondition::Delayed(_)) {
            self.next_write = None;
        }
        self.prev_pending = debt.pending;
        self.condition = condition;
    }

    /// Charges `bytes` to the virtual clock; returns how long to sleep when
    /// the clock runs more than a millisecond ahead of `now` (the database
    /// clock's monotonic time).
    pub(crate) fn delay(&mut self, bytes: u64, now: Duration) -> Option<Duration> {
        let rate = self.rate();
        if rate == 0 {
            return None;
        }
        let cost = Duration::from_nanos(bytes.max(1).saturating_mul(1_000_000_000) / rate);
        let start = match self.next_write {
            Some(t) if t > now => t,
            _ => now,
        };
        let next = start + cost;
        self.next_write = Some(next);
        let ahead = next.saturating_sub(now);
        (ahead > Duration::from_millis(1)).then_some(ahead)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delayed(c: &mut WriteController, cause: StallCause, pending: u64, near_stop: bool, opts: &crate::Options) {
        c.update(StallCondition::Delayed(cause), StallDebt { pending, near_stop }, opts);
    }

    #[test]
    fn controller_paces_to_its_rate_and_adapts() {
        let mut opts = crate::Options::default();
        opts.delayed_write_rate = 1_000_000;
        let mut c = WriteController::default();
        let l0 = StallCause::L0Slowdown;
        delayed(&mut c, l0, 1000, false, &opts);
        assert_eq!(c.rate(), 1_000_000);
        let t0 = Duration::from_secs(7);
        // 100 writes of 1000 bytes at 1 MB/s cost 100 ms of virtual time.
        let mut slept = Duration::ZERO;
        for _ in 0..100 {
            if let Some(d) = c.delay(1000, t0) {
                slept = d;
            }
        }
        assert!(slept >= Duration::from_millis(99) && slept <= Duration::from_millis(101), "{slept:?}");
        // Pending bytes do not shrink: the rate drops by 0.8, whatever the
        // cause; they shrink: it rises by 1.25, capped.
        delayed(&mut c, l0, 1000, false, &opts);
        assert_eq!(c.rate(), 800_000);
        delayed(&mut c, l0, 900, false, &opts);
        assert_eq!(c.rate(), 1_000_000);
        delayed(&mut c, l0, 800, false, &opts);
        assert_eq!(c.rate(), 1_000_000);
        // Near a stop: down by 0.6.
        delayed(&mut c, l0, 700, true, &opts);
        assert_eq!(c.rate(), 600_000);
        for pending in 800..900 {
            delayed(&mut c, StallCause::PendingCompactionSlowdown, pending, false, &opts);
        }
        assert_eq!(c.rate(), MIN_DELAYED_WRITE_RATE);
        // No delay: no rate, no sleep; the rate kept for the next delay
        // rises by 1.4.
        c.update(StallCondition::Normal, StallDebt::default(), &opts);
        assert_eq!(c.rate(), 0);
        assert!(c.delay(1 << 20, t0).is_none());
        delayed(&mut c, l0, 5000, false, &opts);
        assert_eq!(c.rate(), (MIN_DELAYED_WRITE_RATE as f64 * 1.4) as u64, "a delay starts where the last one left");
        // A stop keeps the rate; the delay after it starts there.
        c.update(StallCondition::Stopped(StallCause::L0Stop), StallDebt { pending: 6000, near_stop: false }, &opts);
        assert_eq!(c.rate(), 0);
        delayed(&mut c, l0, 7000, false, &opts);
        assert_eq!(c.rate(), (MIN_DELAYED_WRITE_RATE as f64 * 1.4) as u64);
        // With compaction off a delay runs at the configured rate.
        opts.disable_auto_compactions = true;
        delayed(&mut c, l0, 7000, false, &opts);
        assert_eq!(c.rate(), 1_000_000);
    }
}
