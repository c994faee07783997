//! [`PinnableSlice`]: a value read without copying it out of its block
//! (RocksDB's `PinnableSlice`).
//!
//! A value found in a table's data block is handed out as a range of that
//! block, with the block kept alive by reference and, when it came from the
//! block cache, the cache entry referenced as well: the entry is not evicted
//! while the slice lives, and its bytes count in the cache's usage and pinned
//! usage (`ebb.block-cache-pinned-usage`), as RocksDB charges pinned blocks.
//! Values from a memtable or a blob file are owned copies.

use std::ops::{Deref, Range};
use std::sync::Arc;

use crate::cache::CacheHandle;
use crate::sst::Block;

/// A value that is either owned or a pinned range of a data block.
pub struct PinnableSlice {
    inner: Inner,
}

enum Inner {
    Owned(Vec<u8>),
    Block {
        block: Arc<Block>,
        /// Referenced for as long as the slice lives (the cache entry is then
        /// not evicted and stays charged); `None` for a block read outside
        /// the cache.
        _entry: Option<CacheHandle>,
        range: Range<usize>,
    },
}

impl PinnableSlice {
    /// An owned value.
    pub fn from_vec(value: Vec<u8>) -> Self {
        PinnableSlice { inner: Inner::Owned(value) }
    }

    /// `range` of `block`'s contents, holding `entry` (the block's cache
    /// entry, if cached). A range outside the block is an empty slice.
    pub(crate) fn pinned(block: Arc<Block>, entry: Option<CacheHandle>, range: Range<usize>) -> Self {
        let range = if range.start <= range.end && range.end <= block.contents().len() { range } else { 0..0 };
        PinnableSlice { inner: Inner::Block { block, _entry: entry, range } }
    }

    /// True when the bytes are a block's, not a copy.
    pub fn is_pinned(&self) -> bool {
        matches!(self.inner, Inner::Block { .. })
    }

    /// True when the pinned block is referenced in the block cache (so it
    /// counts in the cache's pinned usage until this slice is dropped).
    pub fn holds_cache_entry(&self) -> bool {
        matches!(&self.inner, Inner::Block { _entry: Some(e), .. } if e.is_cached())
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        match &self.inner {
            Inner::Owned(v) => v,
            Inner::Block { block, range, .. } => &block.contents()[range.clone()],
        }
    }

    /// The bytes as an owned vector (a copy only when pinned).
    pub fn into_vec(self) -> Vec<u8> {
        match self.inner {
            Inner::Owned(v) => v,
            Inner::Block { .. } => self.as_slice().to_vec(),
        }
    }
}

impl Deref for PinnableSlice {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for PinnableSlice {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl PartialEq<[u8]> for PinnableSlice {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<&[u8]> for PinnableSlice {
    fn eq(&self, other: &&[u8]) -> bool {
        self.as_slice() == *other
    }
}

impl PartialEq<Vec<u8>> for PinnableSlice {
    fn eq(&self, other: &Vec<u8>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl std::fmt::Debug for PinnableSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnableSlice")
            .field("pinned", &self.is_pinned())
            .field("len", &self.as_slice().len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::block_builder::BlockBuilder;

    fn block() -> Arc<Block> {
        let mut b = BlockBuilder::new(16);
        b.add(b"a", b"apple");
        b.add(b"b", b"banana");
        Arc::new(Block::new(b.finish()).unwrap())
    }

    #[test]
    fn a_pinned_range_reads_the_block_bytes_and_an_out_of_range_one_is_empty() {
        let blk = block();
        let at = blk.contents().windows(6).position(|w| w == b"banana").unwrap();
        let s = PinnableSlice::pinned(Arc::clone(&blk), None, at..at + 6);
        assert!(s.is_pinned());
        assert!(!s.holds_cache_entry());
        assert_eq!(&*s, b"banana");
        assert_eq!(s.into_vec(), b"banana".to_vec());
        let bad = PinnableSlice::pinned(blk, None, 5..1_000_000);
        assert_eq!(bad.as_slice(), b"");
        let owned = PinnableSlice::from_vec(b"x".to_vec());
        assert!(!owned.is_pinned());
        assert_eq!(owned, b"x".to_vec());
    }
}
