//! The queue of jobs waiting to write their version edits to the MANIFEST
//! (RocksDB's manifest writer queue): jobs queue their edits oldest first;
//! the one at the front leads a batch of itself and the jobs behind it
//! (db/version_edits.rs, which writes the batch) and leaves each follower
//! its result here.
//!
//! Invariants (under the db mutex):
//! 1. Tickets are handed out in queue order and each job's edits are in
//!    the queue, or in the batch of the leader that took them, until its
//!    result is left.
//! 2. A batch is the front job and the jobs behind it up to the first
//!    column family drop, which goes alone.
//! 3. A result, once left, is taken by its job exactly once.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::error::Result;
use crate::memtable::MemTable;
use crate::version::VersionEdit;

/// The edits of one job waiting for the MANIFEST.
pub(crate) struct QueuedEdits {
    ticket: u64,
    pub(crate) edits: Vec<VersionEdit>,
    /// A flush's family and the memtables its table holds: they leave the
    /// family's immutable memtables when the edits are installed, in the
    /// same hold of the db mutex (db/version_edits.rs, contract 5).
    pub(crate) flushed: Option<(u32, Vec<Arc<MemTable>>)>,
}

/// Jobs waiting to have their edits written to the MANIFEST, and the
/// results a leader left for the jobs of its batch (the module's
/// invariants). Requires the db mutex.
#[derive(Default)]
pub(crate) struct ManifestQueue {
    next_ticket: u64,
    waiting: VecDeque<QueuedEdits>,
    done: HashMap<u64, Result<()>>,
}

impl ManifestQueue {
    /// Queues a job's edits; returns its ticket.
    pub(crate) fn enqueue(&mut self, edits: Vec<VersionEdit>, flushed: Option<(u32, Vec<Arc<MemTable>>)>) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.waiting.push_back(QueuedEdits { ticket, edits, flushed });
        ticket
    }

    /// The batch the front job leads: itself and the jobs behind it up to
    /// the first family drop, which goes alone.
    pub(crate) fn take_batch(&mut self) -> Vec<QueuedEdits> {
        let drops = |q: &QueuedEdits| q.edits.iter().any(|e| e.column_family_drop);
        let mut batch = Vec::new();
        while let Some(next) = self.waiting.front() {
            if !batch.is_empty() && (drops(next) || batch.iter().any(drops)) {
                break;
            }
            batch.extend(self.waiting.pop_front());
        }
        batch
    }

    /// The result a leader left for job `ticket`, taken.
    pub(crate) fn take_result(&mut self, ticket: u64) -> Option<Result<()>> {
        self.done.remove(&ticket)
    }

    /// Whether job `ticket` is at the front of the queue.
    pub(crate) fn is_front(&self, ticket: u64) -> bool {
        self.waiting.front().is_some_and(|q| q.ticket == ticket)
    }

    /// Leaves `result` for the job of `edits`, a follower in a batch.
    pub(crate) fn finish(&mut self, edits: QueuedEdits, result: Result<()>) {
        self.done.insert(edits.ticket, result);
    }

    /// Puts the jobs of a batch whose leader gave up back at the front, in
    /// their order.
    pub(crate) fn requeue(&mut self, followers: impl DoubleEndedIterator<Item = QueuedEdits>) {
        for q in followers.rev() {
            self.waiting.push_front(q);
        }
    }
}
