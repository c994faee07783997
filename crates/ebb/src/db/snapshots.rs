//! The live snapshots (RocksDB's `SnapshotList`): the sequence numbers
//! readers hold, each with how many snapshots hold it. Flushes and
//! compactions keep every version a snapshot can see.
//!
//! Invariant: a sequence number is listed exactly while at least one
//! [`crate::Snapshot`] at it lives. Requires the db mutex.

use std::collections::BTreeMap;

use crate::key::SequenceNumber;

/// The live snapshots' sequence numbers, with their counts.
#[derive(Default)]
pub(crate) struct SnapshotList {
    counts: BTreeMap<SequenceNumber, usize>,
}

impl SnapshotList {
    /// A snapshot at `seq` is taken.
    pub(crate) fn acquire(&mut self, seq: SequenceNumber) {
        *self.counts.entry(seq).or_insert(0) += 1;
    }

    /// A snapshot at `seq` is dropped.
    pub(crate) fn release(&mut self, seq: SequenceNumber) {
        if let Some(n) = self.counts.get_mut(&seq) {
            *n -= 1;
            if *n == 0 {
                self.counts.remove(&seq);
            }
        }
    }

    /// The oldest snapshot's sequence number.
    pub(crate) fn oldest(&self) -> Option<SequenceNumber> {
        self.counts.keys().next().copied()
    }

    /// Every live snapshot's sequence number, ascending (each once).
    pub(crate) fn sequences(&self) -> Vec<SequenceNumber> {
        self.counts.keys().copied().collect()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }

    /// How many snapshots live.
    pub(crate) fn count(&self) -> usize {
        self.counts.values().sum()
    }
}
