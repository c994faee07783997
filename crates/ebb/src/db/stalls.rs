//! The write stall condition of the database's current state, worked out
//! over every column family by its own options (RocksDB's
//! `GetWriteStallConditionAndCause`, the worst over the families), and its
//! effects: the write controller's rate adapted to the debt, the LOG lines
//! and the listeners' `on_stall_conditions_changed` (docs/compaction.md,
//! "Write stalls"). The controller itself is db/write_controller.rs.

use parking_lot::MutexGuard;

use super::write_controller::{family_stall_condition, StallDebt};
use super::{DbInner, DbState, StallCondition};
use crate::stats::StallCause;

impl DbInner {
    /// The stall condition the current state calls for (RocksDB
    /// `GetWriteStallConditionAndCause`), the worst over the column families.
    /// L0 and pending-bytes conditions apply only while automatic compaction
    /// is on.
    pub(crate) fn stall_condition(&self, st: &DbState) -> StallCondition {
        let severity = |c: &StallCondition| match c {
            StallCondition::Normal => 0,
            StallCondition::Delayed(_) => 1,
            StallCondition::Stopped(_) => 2,
        };
        let mut worst = StallCondition::Normal;
        for (id, family) in st.families.iter() {
            let o = self.family_opts(family.data());
            let c = family_stall_condition(&st.versions.version(id).unwrap_or_default(), &o);
            if severity(&c) > severity(&worst) {
                worst = c;
            }
        }
        worst
    }

    /// The stall condition in force. It depends only on the versions, the
    /// immutable memtables and the options, so it is recomputed (and
    /// recorded) after any of them changes ([`WriteController::invalidate`]),
    /// not on every write.
    pub(crate) fn cached_stall_condition(&self, st: &mut MutexGuard<'_, DbState>) -> StallCondition {
        if let Some(c) = st.controller.cached() {
            return c;
        }
        let c = self.stall_condition(st);
        self.set_stall_condition(st, c);
        st.controller.remember(c);
        c
    }

    /// Records a new stall condition, adapts the delayed write rate, and tells listeners.
    pub(crate) fn set_stall_condition(&self, st: &mut MutexGuard<'_, DbState>, condition: StallCondition) {
        let opts = self.opts();
        // The debt the rate adapts to is the largest over the families,
        // each counted by its own compaction style and options.
        let mut debt = StallDebt::default();
        for (id, family) in st.families.iter() {
            let o = self.family_opts(family.data());
            if o.disable_auto_compactions {
                continue;
            }
            let version = st.versions.version(id).unwrap_or_default();
            let shape = crate::version::StorageInfoOptions::from_options(&o);
            let pending = version.estimate_pending_compaction_bytes(&shape);
            debt.pending = debt.pending.max(pending);
            let l0 = version.l0_delay_trigger_count(&shape) as i32;
            let (_, stop) = o.effective_l0_stall_triggers();
            let (soft, hard) = (o.soft_pending_compaction_bytes_limit, o.hard_pending_compaction_bytes_limit);
            debt.near_stop |= match condition {
                StallCondition::Delayed(StallCause::L0Slowdown) => l0 >= stop - 2,
                StallCondition::Delayed(StallCause::PendingCompactionSlowdown) => {
                    hard > soft && pending > soft && pending - soft > 3 * ((hard - soft) / 4)
                }
                _ => false,
            };
        }
        let previous = st.controller.condition();
        st.controller.update(condition, debt, &opts);
        // As RocksDB's LOG: each recomputation while delayed, each new stop.
        match condition {
            StallCondition::Delayed(cause) => self.info_log.log(
                super::info_log::Level::Warn,
                &format!(
                    "Stalling writes because of {}: estimated pending compaction bytes {}, rate {}",
                    cause.name(),
                    debt.pending,
                    st.controller.rate()
                ),
            ),
            StallCondition::Stopped(cause) if previous != condition => self.info_log.log(
                super::info_log::Level::Warn,
                &format!(
                    "Stopping writes because of {}: estimated pending compaction bytes {}",
                    cause.name(),
                    debt.pending
                ),
            ),
            _ => {}
        }
        if previous != condition && !opts.listeners.is_empty() {
            MutexGuard::unlocked(st, || {
                self.notify_event("on_stall_conditions_changed", |l| l.on_stall_conditions_changed(previous, condition))
            });
        }
    }
}
