//! `WriteBatchWithIndex`: a write batch with an index over its keys.

/// A write batch with an index over its keys, per column family.
pub struct WriteBatchWithIndex {}

/// An iterator over a [`WriteBatchWithIndex`] and the database beneath it.
pub struct BaseDeltaIterator {}
