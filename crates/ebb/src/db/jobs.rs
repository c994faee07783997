//! Background job accounting: which flushes, compactions and deletions of
//! obsolete files are running, what they hold, and whether new ones may
//! start (RocksDB's `bg_flush_scheduled_`, `num_running_compactions_`,
//! `files_being_compacted` and `pending_outputs_`, kept in one place).
//!
//! A job takes what it holds through a guard (db/job_guard.rs), which gives
//! it back however the job ends: when it returns, fails, or unwinds from a
//! panic. So a panic can never leave writers or waiters waiting for a job
//! that is gone.
//!
//! Invariants (all under the db mutex):
//! 1. `flushes`, `compactions`, `manual` and `purges` count the live
//!    guards of each kind.
//! 2. A file number is in `being_compacted` exactly while a running
//!    compaction reads it as an input: pickers never pick it again, and
//!    the obsolete-file scan never deletes it (its family may be dropped
//!    meanwhile).
//! 3. Every file number at or above the smallest of `pending_outputs` may
//!    be an output a running job writes without the db mutex; none is
//!    deleted as obsolete ([`Jobs::output_floor`]).
//! 4. While `paused` is above zero no job starts (`pause_background_work`,
//!    an ingestion); running ones finish.
//! 5. Once `shutting_down` is set it stays set, and every running
//!    compaction has been asked to stop (its cancellation flag is set).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::memtable::MemTable;

/// The running jobs and what they hold (the module's invariants).
/// Requires the db mutex.
#[derive(Default)]
pub(crate) struct Jobs {
    flushes: usize,
    compactions: usize,
    manual: usize,
    purges: usize,
    paused: usize,
    being_compacted: HashSet<u64>,
    pending_outputs: Vec<u64>,
    /// Cancellation flags of running compactions.
    cancel_flags: Vec<Arc<AtomicBool>>,
    /// The column family the last automatic compaction was picked from.
    last_compacted_family: u32,
    shutting_down: bool,
}

impl Jobs {
    /// Flushes running (background ones and the flush at close).
    pub(crate) fn flushes_running(&self) -> usize {
        self.flushes
    }

    /// Compactions running, automatic and manual.
    pub(crate) fn compactions_running(&self) -> usize {
        self.compactions
    }

    /// Manual compactions (`compact_range`) under way: no automatic one is
    /// picked meanwhile.
    pub(crate) fn manual_compactions(&self) -> usize {
        self.manual
    }

    /// Deletions of obsolete files running without the db mutex.
    pub(crate) fn purges_running(&self) -> usize {
        self.purges
    }

    /// Whether a flush or a compaction is running.
    pub(crate) fn flushing_or_compacting(&self) -> bool {
        self.flushes > 0 || self.compactions > 0
    }

    /// Whether new jobs are held off (invariant 4).
    pub(crate) fn is_paused(&self) -> bool {
        self.paused > 0
    }

    /// Holds new jobs off until a matching [`Jobs::resume`]; calls nest.
    pub(crate) fn pause(&mut self) {
        self.paused += 1;
    }

    /// Undoes one [`Jobs::pause`].
    pub(crate) fn resume(&mut self) {
        self.paused = self.paused.saturating_sub(1);
    }

    /// The inputs of running compactions (invariant 2), for the pickers.
    pub(crate) fn being_compacted(&self) -> &HashSet<u64> {
        &self.being_compacted
    }

    /// The smallest file number a running job may be writing (invariant 3);
    /// `u64::MAX` when none is.
    pub(crate) fn output_floor(&self) -> u64 {
        self.pending_outputs.iter().copied().min().unwrap_or(u64::MAX)
    }

    /// Asks every running compaction to stop at its next output-block
    /// boundary.
    pub(crate) fn cancel_compactions(&self) {
        for flag in &self.cancel_flags {
            flag.store(true, Ordering::Release);
        }
    }

    /// The column family the last automatic compaction was picked from
    /// (the families take turns after it).
    pub(crate) fn last_compacted_family(&self) -> u32 {
        self.last_compacted_family
    }

    pub(crate) fn set_last_compacted_family(&mut self, cf: u32) {
        self.last_compacted_family = cf;
    }

    /// Starts the shutdown: running compactions are asked to stop, and no
    /// job starts from now on (invariant 5).
    pub(crate) fn shut_down(&mut self) {
        self.cancel_compactions();
        self.shutting_down = true;
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutting_down
    }

    /// Records what a job starting now holds (`JobGuard::new`).
    pub(crate) fn take(&mut self, hold: &Hold) {
        match hold {
            Hold::Flush(mems) => {
                self.flushes += 1;
                for m in mems {
                    m.set_flush_claimed(true);
                }
            }
            Hold::ManualCompaction => self.manual += 1,
            Hold::Compaction { inputs, cancel } => {
                self.being_compacted.extend(inputs.iter().copied());
                self.compactions += 1;
                self.cancel_flags.push(Arc::clone(cancel));
            }
            Hold::PendingOutputs(floor) => self.pending_outputs.push(*floor),
            Hold::Purge => self.purges += 1,
        }
    }

    /// Gives back what an ending job held (the guard's drop).
    pub(crate) fn give_back(&mut self, hold: &Hold) {
        match hold {
            Hold::Flush(mems) => {
                // Installed memtables have left the family's list; ones a
                // failed flush did not install are free for the next.
                for m in mems {
                    m.set_flush_claimed(false);
                }
                self.flushes -= 1;
            }
            Hold::ManualCompaction => self.manual -= 1,
            Hold::Compaction { inputs, cancel } => {
                for n in inputs {
                    self.being_compacted.remove(n);
                }
                self.cancel_flags.retain(|j| !Arc::ptr_eq(j, cancel));
                self.compactions -= 1;
            }
            Hold::PendingOutputs(floor) => {
                if let Some(i) = self.pending_outputs.iter().position(|n| n == floor) {
                    self.pending_outputs.swap_remove(i);
                }
            }
            Hold::Purge => self.purges -= 1,
        }
    }
}

/// What a running job holds in [`Jobs`].
pub(crate) enum Hold {
    /// A flush, counted among the flushes, its memtables marked taken
    /// (`MemTable::flush_claimed`) so no other flush writes them too.
    Flush(Vec<Arc<MemTable>>),
    /// A manual compaction (automatic ones are not picked meanwhile).
    ManualCompaction,
    /// A compaction: counted, its inputs marked being compacted, its
    /// cancellation flag kept.
    Compaction { inputs: Vec<u64>, cancel: Arc<AtomicBool> },
    /// File numbers from this floor up, protected from deletion as
    /// obsolete while the job writes them (invariant 3).
    PendingOutputs(u64),
    /// A deletion of obsolete files, counted so that `wait_for_compact`
    /// does not return before the files a job made obsolete are gone.
    Purge,
}
