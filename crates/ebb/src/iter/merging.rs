//! placeholder
pub struct MergingIterator;
