//! The typed commands a tuner hands the engine: each names what it changes
//! and carries its value as a number or a flag, never as option text
//! (STYLE.md: policy objects return typed decisions; the engine carries them
//! out). The engine applies a family's commands to the options in force of
//! that family only (`db/tuning.rs`, `DbInner::carry_out`); database-wide
//! commands set the engine's own switches (the deferral flag, the pause
//! gate, the compaction pacer) or a database option.
//!
//! Thread safety: plain data.

/// A column family, by the id its WAL and MANIFEST records carry (0 is the
/// default family).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FamilyId(pub u32);

impl FamilyId {
    /// The default column family, which every database has.
    pub const DEFAULT: FamilyId = FamilyId(0);
}

/// A family's write-stall triggers and limits (RocksDB's names): what its
/// write controller holds writes by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteStallLimits {
    /// `level0_slowdown_writes_trigger`.
    pub level0_slowdown_writes_trigger: i32,
    /// `level0_stop_writes_trigger`.
    pub level0_stop_writes_trigger: i32,
    /// `soft_pending_compaction_bytes_limit`; 0 is no limit.
    pub soft_pending_compaction_bytes_limit: u64,
    /// `hard_pending_compaction_bytes_limit`; 0 is no limit.
    pub hard_pending_compaction_bytes_limit: u64,
}

impl WriteStallLimits {
    /// Each trigger and limit of `self` raised to `floor`'s where that is
    /// higher, a pending-bytes limit of 0 (none) being above every other.
    /// So the adaptive backstop only raises: a trigger configured above it
    /// stays (W2's "disabled" sets 10000).
    pub fn raised_to(self, floor: WriteStallLimits) -> WriteStallLimits {
        let limit = |own: u64, floor: u64| if own == 0 || floor == 0 { 0 } else { own.max(floor) };
        WriteStallLimits {
            level0_slowdown_writes_trigger: self
                .level0_slowdown_writes_trigger
                .max(floor.level0_slowdown_writes_trigger),
            level0_stop_writes_trigger: self.level0_stop_writes_trigger.max(floor.level0_stop_writes_trigger),
            soft_pending_compaction_bytes_limit: limit(
                self.soft_pending_compaction_bytes_limit,
                floor.soft_pending_compaction_bytes_limit,
            ),
            hard_pending_compaction_bytes_limit: limit(
                self.hard_pending_compaction_bytes_limit,
                floor.hard_pending_compaction_bytes_limit,
            ),
        }
    }

    /// The commands that put these limits in force in `family`.
    pub fn commands(self, family: FamilyId) -> [TuningCommand; 2] {
        [
            TuningCommand::SetL0StallTriggers {
                family,
                slowdown: self.level0_slowdown_writes_trigger,
                stop: self.level0_stop_writes_trigger,
            },
            TuningCommand::SetPendingCompactionLimits {
                family,
                soft: self.soft_pending_compaction_bytes_limit,
                hard: self.hard_pending_compaction_bytes_limit,
            },
        ]
    }
}

/// What a tuner asks the engine to change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TuningCommand {
    /// A family's `level0_slowdown_writes_trigger` and
    /// `level0_stop_writes_trigger`.
    SetL0StallTriggers {
        /// The family.
        family: FamilyId,
        /// L0 files (sorted runs, universal) at which writes slow down.
        slowdown: i32,
        /// L0 files at which writes stop.
        stop: i32,
    },
    /// A family's `soft_pending_compaction_bytes_limit` and
    /// `hard_pending_compaction_bytes_limit` (0: no limit).
    SetPendingCompactionLimits {
        /// The family.
        family: FamilyId,
        /// Estimated pending compaction bytes at which writes slow down.
        soft: u64,
        /// Estimated pending compaction bytes at which writes stop.
        hard: u64,
    },
    /// A family's `level0_file_num_compaction_trigger`.
    SetL0CompactionTrigger {
        /// The family.
        family: FamilyId,
        /// L0 files at which L0 is compacted.
        trigger: i32,
    },
    /// A family's automatic compactions on (false `disable_auto_compactions`)
    /// or off.
    SetAutoCompactions {
        /// The family.
        family: FamilyId,
        /// On.
        enabled: bool,
    },
    /// The database's `max_subcompactions`.
    SetSubcompactions(u32),
    /// The compaction-only pacer's rate, bytes per second (flushes are never
    /// paced by it).
    SetCompactionRateLimit(u64),
    /// Hold new automatic compactions back (true; the picker still takes
    /// trivial moves, and L0 run merges while asked for) or let them run.
    /// The user's `disable_auto_compactions` is left alone.
    DeferCompactions(bool),
    /// Close (true) or open the pause gate running compactions out of L1 or
    /// deeper, and L0 run merges, wait at between output blocks.
    PauseCompactions(bool),
    /// While deferred, pick L0 run merges (true) or nothing but trivial moves.
    MergeL0Runs(bool),
}

impl TuningCommand {
    /// The family whose options the command changes; `None` for the
    /// database-wide ones.
    #[cfg(test)]
    pub fn family(&self) -> Option<FamilyId> {
        match *self {
            TuningCommand::SetL0StallTriggers { family, .. }
            | TuningCommand::SetPendingCompactionLimits { family, .. }
            | TuningCommand::SetL0CompactionTrigger { family, .. }
            | TuningCommand::SetAutoCompactions { family, .. } => Some(family),
            TuningCommand::SetSubcompactions(_)
            | TuningCommand::SetCompactionRateLimit(_)
            | TuningCommand::DeferCompactions(_)
            | TuningCommand::PauseCompactions(_)
            | TuningCommand::MergeL0Runs(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backstop_only_raises_and_no_limit_is_the_highest() {
        let configured = WriteStallLimits {
            level0_slowdown_writes_trigger: 10_000,
            level0_stop_writes_trigger: 36,
            soft_pending_compaction_bytes_limit: 64 << 30,
            hard_pending_compaction_bytes_limit: 0,
        };
        let backstop = WriteStallLimits {
            level0_slowdown_writes_trigger: 60,
            level0_stop_writes_trigger: 80,
            soft_pending_compaction_bytes_limit: 0,
            hard_pending_compaction_bytes_limit: 1 << 40,
        };
        assert_eq!(
            configured.raised_to(backstop),
            WriteStallLimits {
                level0_slowdown_writes_trigger: 10_000,
                level0_stop_writes_trigger: 80,
                soft_pending_compaction_bytes_limit: 0,
                hard_pending_compaction_bytes_limit: 0,
            }
        );
        let limited = WriteStallLimits { soft_pending_compaction_bytes_limit: 1 << 30, ..backstop };
        assert_eq!(configured.raised_to(limited).soft_pending_compaction_bytes_limit, 64 << 30);
        assert_eq!(configured.commands(FamilyId(3)).map(|c| c.family()), [Some(FamilyId(3)), Some(FamilyId(3))]);
    }
}
