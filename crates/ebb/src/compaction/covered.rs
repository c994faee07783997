//! Entries a range tombstone deletes, dropped in flushes and compactions (a
//! stage of the job's input, before merge operands are combined): a
//! version of a key is dropped when a range tombstone the job read covers
//! it with a higher sequence and no live snapshot lies between the two (the
//! same snapshot stripe, as RocksDB's `CompactionIterator` decides with its
//! range-deletion aggregator). Every reader that could see the version sees
//! the tombstone too, so nobody can read the version any more; a snapshot
//! between them still reads it, so it stays.

use super::snapshot_stripe;
use crate::blob::BlobIndex;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, SequenceNumber, ValueKind};
use crate::range_del::FragmentedTombstones;

/// The stage (module documentation). Forward only; a seek starts over.
pub(crate) struct Covered<'a> {
    inner: &'a mut dyn InternalIterator,
    tombstones: Option<&'a FragmentedTombstones>,
    /// Live snapshots, ascending.
    snapshots: &'a [SequenceNumber],
    /// Entries dropped.
    pub(crate) dropped: u64,
    /// Blob records the dropped entries referred to: (file, bytes).
    pub(crate) dropped_blobs: Vec<(u64, u64)>,
}

impl<'a> Covered<'a> {
    pub(crate) fn new(
        inner: &'a mut dyn InternalIterator,
        tombstones: Option<&'a FragmentedTombstones>,
        snapshots: &'a [SequenceNumber],
    ) -> Self {
        let tombstones = tombstones.filter(|t| !t.is_empty());
        let mut s = Covered { inner, tombstones, snapshots, dropped: 0, dropped_blobs: Vec::new() };
        s.settle();
        s
    }

    /// Moves past the entries it drops.
    fn settle(&mut self) {
        let Some(t) = self.tombstones else { return };
        while self.inner.valid() {
            let Some(p) = parse_internal_key(self.inner.key()) else { return };
            let deleted = t
                .oldest_covering_above(p.user_key, p.seq)
                .is_some_and(|ts| snapshot_stripe(self.snapshots, ts) == snapshot_stripe(self.snapshots, p.seq));
            if !deleted {
                return;
            }
            if p.kind == ValueKind::BlobIndex {
                // The blob becomes garbage (an index that does not decode
                // names no blob to count).
                if let Ok(index) = BlobIndex::decode(self.inner.value()) {
                    self.dropped_blobs.push((index.file_number, index.record_len(p.user_key)));
                }
            }
            self.dropped += 1;
            self.inner.next();
        }
    }
}

impl InternalIterator for Covered<'_> {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) {
        self.inner.seek_to_first();
        self.settle();
    }
    fn seek_to_last(&mut self) {
        self.inner.seek_to_last();
    }
    fn seek(&mut self, target: &[u8]) {
        self.inner.seek(target);
        self.settle();
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.inner.seek_for_prev(target);
    }
    fn next(&mut self) {
        self.inner.next();
        self.settle();
    }
    fn prev(&mut self) {
        // Not used by the job.
        self.inner.prev();
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn status(&self) -> Result<()> {
        self.inner.status()
    }
}
