//! The newest sequence number readers see (db/mod.rs, invariant 2): the
//! write-group leader publishes a group's last sequence only after every
//! entry of the group is in the memtable, so no reader sees half a batch;
//! an ingestion publishes the sequence its files are written at, recovery
//! the last one it replayed, and a secondary instance catching up the
//! primary's.
//!
//! Invariant: it never goes back. Lock-free: readers load it without the
//! db mutex.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::key::SequenceNumber;

/// The last sequence number visible to readers (the module's invariant).
#[derive(Default)]
pub(crate) struct LastSequence(AtomicU64);

impl LastSequence {
    /// The sequence number a read made now reads at.
    pub(crate) fn get(&self) -> SequenceNumber {
        self.0.load(Ordering::Acquire)
    }

    /// Makes everything written up to `seq` visible. Called by one writer
    /// at a time (the write-group leader, or a writer with writes stopped),
    /// with `seq` not below the current value.
    pub(crate) fn publish(&self, seq: SequenceNumber) {
        debug_assert!(seq >= self.get(), "the last sequence goes back: {} -> {seq}", self.get());
        self.0.store(seq, Ordering::Release);
    }

    /// Moves it up to `seq` if it is behind (a secondary instance catching up).
    pub(crate) fn advance_to(&self, seq: SequenceNumber) {
        self.0.fetch_max(seq, Ordering::AcqRel);
    }
}
