//! Cursors over a table's index, and the one two-level walk they share
//! (LevelDB `table/two_level_iterator.cc`): an upper cursor whose entries
//! name blocks by their handles, and an iterator over the block the current
//! upper entry names. The table iterator walks its data blocks so, under
//! its index; a partitioned index walks its partitions so, under its
//! top-level index (RocksDB's `PartitionedIndexIterator`).
//!
//! What it owns: [`Cursor`] (what a walk asks of its upper level),
//! [`LowerBlocks`] (how it reads the blocks the upper level names),
//! [`TwoLevelCursor`] (the walk), and [`IndexCursor`] (a table's index
//! entries, flat or partitioned).
//!
//! Invariants:
//! 1. A [`TwoLevelCursor`] is valid only on an entry of a block and with no
//!    error; it skips blocks with no entry where a move left off (forward to
//!    the next block's first entry, backward to the previous block's last).
//! 2. Errors are sticky: a damaged upper entry, a block that cannot be read
//!    or a damaged block makes the cursor invalid for good, the error kept
//!    for [`TwoLevelCursor::error`], so a damaged block never lets an older
//!    entry through (docs/format.md; STYLE.md, "Iterators").
//! 3. The block in use is held (its cache entry referenced) until the
//!    cursor moves to another block or is dropped.
//!
//! Thread-safety: a cursor is used by one thread; moves take the table,
//! which reads and caches blocks and is shared.

use std::sync::Arc;

use super::block::{Block, BlockIterator, KeyOrder};
use super::format::BlockHandle;
use super::table_reader::Table;
use crate::cache::CacheHandle;
use crate::error::{Error, Result};

/// A cursor over entries whose values are block handles: the upper level
/// of a [`TwoLevelCursor`]. Moves take the table, which reads the blocks.
pub(super) trait Cursor {
    fn valid(&self) -> bool;
    fn key(&self) -> &[u8];
    fn value(&self) -> &[u8];
    fn seek(&mut self, table: &Table, target: &[u8]);
    fn seek_to_first(&mut self, table: &Table);
    fn seek_to_last(&mut self, table: &Table);
    fn next(&mut self, table: &Table);
    fn prev(&mut self, table: &Table);
    /// Why the cursor stopped short; `None` at a clean end.
    fn error(&self, table: &Table) -> Option<Error>;
    /// The error for the current entry, whose value is not a block handle.
    fn entry_corruption(&self, table: &Table, reason: &str) -> Error;
}

/// The blocks the entries of a [`TwoLevelCursor`]'s upper level name.
pub(super) trait LowerBlocks {
    /// The block at `handle`, and the cache handle that keeps it cached
    /// while it is used.
    fn read(&mut self, table: &Table, handle: BlockHandle) -> Result<(Arc<Block>, Option<CacheHandle>)>;
    /// How the blocks' keys compare.
    fn order(&self, table: &Table) -> KeyOrder;
    /// The error for the block at `handle`, found damaged while iterated.
    fn corruption(&self, table: &Table, handle: BlockHandle, reason: &str) -> Error;
}

/// An upper level not read yet: no entries (the table iterator reads its
/// index on first positioning).
impl<C: Cursor> Cursor for Option<C> {
    fn valid(&self) -> bool {
        self.as_ref().is_some_and(C::valid)
    }
    fn key(&self) -> &[u8] {
        self.as_ref().map_or(&[][..], C::key)
    }
    fn value(&self) -> &[u8] {
        self.as_ref().map_or(&[][..], C::value)
    }
    fn seek(&mut self, table: &Table, target: &[u8]) {
        if let Some(c) = self {
            c.seek(table, target);
        }
    }
    fn seek_to_first(&mut self, table: &Table) {
        if let Some(c) = self {
            c.seek_to_first(table);
        }
    }
    fn seek_to_last(&mut self, table: &Table) {
        if let Some(c) = self {
            c.seek_to_last(table);
        }
    }
    fn next(&mut self, table: &Table) {
        if let Some(c) = self {
            c.next(table);
        }
    }
    fn prev(&mut self, table: &Table) {
        if let Some(c) = self {
            c.prev(table);
        }
    }
    fn error(&self, table: &Table) -> Option<Error> {
        self.as_ref().and_then(|c| c.error(table))
    }
    fn entry_corruption(&self, table: &Table, reason: &str) -> Error {
        match self {
            Some(c) => c.entry_corruption(table, reason),
            None => table.index_corruption(reason),
        }
    }
}

/// A two-level walk: the upper cursor picks the block, the block's iterator
/// walks its entries, as one sequence of entries.
pub(super) struct TwoLevelCursor<U, L> {
    upper: U,
    lower: L,
    /// The iterator over the block the upper entry names.
    block: Option<BlockIterator>,
    /// Keeps the cached block `block` iterates referenced.
    pin: Option<CacheHandle>,
    /// Handle of the block `block` iterates.
    handle: BlockHandle,
    error: Option<Error>,
}

impl<U: Cursor, L: LowerBlocks> TwoLevelCursor<U, L> {
    /// An unpositioned walk over the blocks `upper`'s entries name.
    pub(super) fn new(upper: U, lower: L) -> Self {
        TwoLevelCursor { upper, lower, block: None, pin: None, handle: BlockHandle::default(), error: None }
    }

    /// The upper cursor.
    pub(super) fn upper(&self) -> &U {
        &self.upper
    }

    /// The upper cursor, to replace (the table iterator installs its index).
    pub(super) fn upper_mut(&mut self) -> &mut U {
        &mut self.upper
    }

    pub(super) fn valid(&self) -> bool {
        self.error.is_none() && self.block.as_ref().is_some_and(BlockIterator::valid)
    }

    pub(super) fn key(&self) -> &[u8] {
        self.block.as_ref().map_or(&[][..], BlockIterator::key)
    }

    pub(super) fn value(&self) -> &[u8] {
        self.block.as_ref().map_or(&[][..], BlockIterator::value)
    }

    /// The error that stopped the walk, if any (invariant 2).
    pub(super) fn error(&self) -> Option<&Error> {
        self.error.as_ref()
    }

    /// Stops the walk for good with `e`; false, for the callers' returns.
    pub(super) fn fail(&mut self, e: Error) -> bool {
        self.clear();
        self.error = Some(e);
        false
    }

    fn clear(&mut self) {
        self.block = None;
        self.pin = None;
    }

    /// Points `block` at the block the upper entry names (reusing it when it
    /// is already there). False when the upper level is exhausted or on
    /// error.
    fn load(&mut self, table: &Table) -> bool {
        if self.error.is_some() {
            return false;
        }
        if !self.upper.valid() {
            let error = self.upper.error(table);
            self.clear();
            if error.is_some() {
                self.error = error;
            }
            return false;
        }
        let handle = match BlockHandle::decode_exact(self.upper.value()) {
            Ok(h) => h,
            Err(r) => {
                let e = self.upper.entry_corruption(table, &r);
                return self.fail(e);
            }
        };
        if self.block.is_some() && self.handle == handle {
            return true;
        }
        match self.lower.read(table, handle) {
            Ok((block, pin)) => {
                let buf = self.block.take().map(BlockIterator::into_key_buffer).unwrap_or_default();
                self.block = Some(BlockIterator::with_key_buffer(block, self.lower.order(table), buf));
                self.pin = pin;
                self.handle = handle;
                true
            }
            Err(e) => self.fail(e),
        }
    }

    /// True when the block iterator is positioned; records its corruption.
    fn positioned(&mut self, table: &Table) -> bool {
        match &self.block {
            Some(b) if b.valid() => true,
            Some(b) => {
                if let Some(r) = b.corruption() {
                    let e = self.lower.corruption(table, self.handle, r);
                    self.fail(e);
                }
                false
            }
            None => false,
        }
    }

    /// Moves past blocks with no entry where the move left off (invariant 1).
    fn skip_forward(&mut self, table: &Table) {
        while !self.positioned(table) && self.error.is_none() {
            if !self.upper.valid() {
                self.clear();
                return;
            }
            self.upper.next(table);
            if !self.load(table) {
                return;
            }
            if let Some(b) = &mut self.block {
                b.seek_to_first();
            }
        }
    }

    fn skip_backward(&mut self, table: &Table) {
        while !self.positioned(table) && self.error.is_none() {
            if !self.upper.valid() {
                self.clear();
                return;
            }
            self.upper.prev(table);
            if !self.load(table) {
                return;
            }
            if let Some(b) = &mut self.block {
                b.seek_to_last();
            }
        }
    }

    pub(super) fn seek_to_first(&mut self, table: &Table) {
        if self.error.is_some() {
            return;
        }
        self.upper.seek_to_first(table);
        if self.load(table) {
            if let Some(b) = &mut self.block {
                b.seek_to_first();
            }
        }
        self.skip_forward(table);
    }

    pub(super) fn seek_to_last(&mut self, table: &Table) {
        if self.error.is_some() {
            return;
        }
        self.upper.seek_to_last(table);
        if self.load(table) {
            if let Some(b) = &mut self.block {
                b.seek_to_last();
            }
        }
        self.skip_backward(table);
    }

    /// The first half of a seek to `target`: the upper level's seek and the
    /// block's read. True when a block was loaded; [`Self::finish_seek`]
    /// seeks in it.
    pub(super) fn seek_block(&mut self, table: &Table, target: &[u8]) -> bool {
        if self.error.is_some() {
            return false;
        }
        self.upper.seek(table, target);
        self.load(table)
    }

    /// The second half of a seek to `target`, after [`Self::seek_block`]
    /// answered `loaded`.
    pub(super) fn finish_seek(&mut self, table: &Table, target: &[u8], loaded: bool) {
        if loaded {
            if let Some(b) = &mut self.block {
                b.seek(target);
            }
        }
        self.skip_forward(table);
    }

    /// To the first entry `>= target`.
    pub(super) fn seek(&mut self, table: &Table, target: &[u8]) {
        let loaded = self.seek_block(table, target);
        self.finish_seek(table, target, loaded);
    }

    /// To the last entry `<= target`.
    pub(super) fn seek_for_prev(&mut self, table: &Table, target: &[u8]) {
        if self.error.is_some() {
            return;
        }
        // The first block whose upper key is >= target may hold the answer;
        // if it holds nothing <= target, the previous block's last entry is it.
        self.upper.seek(table, target);
        if !self.upper.valid() && self.upper.error(table).is_none() {
            self.upper.seek_to_last(table);
        }
        if self.load(table) {
            if let Some(b) = &mut self.block {
                b.seek_for_prev(target);
            }
        }
        self.skip_backward(table);
    }

    pub(super) fn next(&mut self, table: &Table) {
        if !self.valid() {
            return;
        }
        if let Some(b) = &mut self.block {
            b.next();
        }
        self.skip_forward(table);
    }

    pub(super) fn prev(&mut self, table: &Table) {
        if !self.valid() {
            return;
        }
        if let Some(b) = &mut self.block {
            b.prev();
        }
        self.skip_backward(table);
    }
}

/// A two-level walk is itself a cursor: a partitioned index is the walk of
/// its partitions under the top level.
impl<U: Cursor, L: LowerBlocks> Cursor for TwoLevelCursor<U, L> {
    fn valid(&self) -> bool {
        TwoLevelCursor::valid(self)
    }
    fn key(&self) -> &[u8] {
        TwoLevelCursor::key(self)
    }
    fn value(&self) -> &[u8] {
        TwoLevelCursor::value(self)
    }
    fn seek(&mut self, table: &Table, target: &[u8]) {
        TwoLevelCursor::seek(self, table, target)
    }
    fn seek_to_first(&mut self, table: &Table) {
        TwoLevelCursor::seek_to_first(self, table)
    }
    fn seek_to_last(&mut self, table: &Table) {
        TwoLevelCursor::seek_to_last(self, table)
    }
    fn next(&mut self, table: &Table) {
        TwoLevelCursor::next(self, table)
    }
    fn prev(&mut self, table: &Table) {
        TwoLevelCursor::prev(self, table)
    }
    fn error(&self, _: &Table) -> Option<Error> {
        self.error.as_ref().map(Error::duplicate)
    }
    fn entry_corruption(&self, table: &Table, reason: &str) -> Error {
        self.lower.corruption(table, self.handle, reason)
    }
}

/// The entries of one index block (a flat index, or a partitioned index's
/// top level).
pub(super) struct IndexBlockCursor(BlockIterator);

impl Cursor for IndexBlockCursor {
    fn valid(&self) -> bool {
        self.0.valid()
    }
    fn key(&self) -> &[u8] {
        self.0.key()
    }
    fn value(&self) -> &[u8] {
        self.0.value()
    }
    fn seek(&mut self, _: &Table, target: &[u8]) {
        self.0.seek(target)
    }
    fn seek_to_first(&mut self, _: &Table) {
        self.0.seek_to_first()
    }
    fn seek_to_last(&mut self, _: &Table) {
        self.0.seek_to_last()
    }
    fn next(&mut self, _: &Table) {
        self.0.next()
    }
    fn prev(&mut self, _: &Table) {
        self.0.prev()
    }
    fn error(&self, table: &Table) -> Option<Error> {
        self.0.corruption().map(|r| table.index_corruption(r))
    }
    fn entry_corruption(&self, table: &Table, reason: &str) -> Error {
        table.index_corruption(reason)
    }
}

/// The partitions of a partitioned index, read through the block cache as
/// the other index blocks.
pub(super) struct IndexPartitions;

impl LowerBlocks for IndexPartitions {
    fn read(&mut self, table: &Table, handle: BlockHandle) -> Result<(Arc<Block>, Option<CacheHandle>)> {
        table.index_partition(handle)
    }
    fn order(&self, table: &Table) -> KeyOrder {
        table.index_order().clone()
    }
    fn corruption(&self, table: &Table, handle: BlockHandle, reason: &str) -> Error {
        table.corruption(handle.offset, format!("index partition: {reason}"))
    }
}

/// A table's index entries (index key → data block handle): the one index
/// block, or the partitions under a top-level index.
pub(super) enum IndexCursor {
    Flat(IndexBlockCursor),
    Partitioned(Box<TwoLevelCursor<IndexBlockCursor, IndexPartitions>>),
}

impl IndexCursor {
    /// A cursor over the index entries of `table`, given its index block
    /// (with a partitioned index, the top level).
    pub(super) fn new(table: &Table, index_block: Arc<Block>) -> Self {
        let top = IndexBlockCursor(BlockIterator::new(index_block, table.index_order().clone()));
        if table.partitioned_index() {
            IndexCursor::Partitioned(Box::new(TwoLevelCursor::new(top, IndexPartitions)))
        } else {
            IndexCursor::Flat(top)
        }
    }
}

/// Runs `$e` on the cursor inside an [`IndexCursor`], statically
/// dispatched (a seek asks its index cursor several questions).
macro_rules! on_index {
    ($self:ident, $c:ident => $e:expr) => {
        match $self {
            IndexCursor::Flat($c) => $e,
            IndexCursor::Partitioned($c) => $e,
        }
    };
}

impl Cursor for IndexCursor {
    fn valid(&self) -> bool {
        on_index!(self, c => c.valid())
    }
    fn key(&self) -> &[u8] {
        on_index!(self, c => c.key())
    }
    fn value(&self) -> &[u8] {
        on_index!(self, c => c.value())
    }
    fn seek(&mut self, table: &Table, target: &[u8]) {
        on_index!(self, c => c.seek(table, target))
    }
    fn seek_to_first(&mut self, table: &Table) {
        on_index!(self, c => c.seek_to_first(table))
    }
    fn seek_to_last(&mut self, table: &Table) {
        on_index!(self, c => c.seek_to_last(table))
    }
    fn next(&mut self, table: &Table) {
        on_index!(self, c => c.next(table))
    }
    fn prev(&mut self, table: &Table) {
        on_index!(self, c => c.prev(table))
    }
    fn error(&self, table: &Table) -> Option<Error> {
        match self {
            IndexCursor::Flat(c) => c.error(table),
            IndexCursor::Partitioned(c) => Cursor::error(c.as_ref(), table),
        }
    }
    fn entry_corruption(&self, table: &Table, reason: &str) -> Error {
        on_index!(self, c => c.entry_corruption(table, reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KIND_FOR_SEEK;
    use crate::sst::block_reader::ReadSettings;
    use crate::sst::table_builder::TableBuilderOptions;
    use crate::sst::test_tables::*;
    use crate::util::checksum::ChecksumType;
    use crate::util::compression::CompressionType;

    /// The data blocks of a table, read as a point read reads them.
    struct Data;

    impl LowerBlocks for Data {
        fn read(&mut self, table: &Table, handle: BlockHandle) -> Result<(Arc<Block>, Option<CacheHandle>)> {
            table.data_block(handle, &ReadSettings::default(), None)
        }
        fn order(&self, table: &Table) -> KeyOrder {
            table.data_order().clone()
        }
        fn corruption(&self, table: &Table, handle: BlockHandle, reason: &str) -> Error {
            table.corruption(handle.offset, reason)
        }
    }

    /// Sample entries in blocks of 256 bytes, under a flat index or one of
    /// partitions of 512 bytes.
    fn table_bytes(partitioned: bool) -> (Vec<u8>, Entries) {
        let entries = sample_entries(2000);
        let o = TableBuilderOptions {
            index_partition_size: partitioned.then_some(512),
            ..opts(CompressionType::None, ChecksumType::Crc32c, 256)
        };
        let (bytes, props) = build(&entries, o);
        assert_eq!(props.index_partitions > 1, partitioned, "{} partitions", props.index_partitions);
        (bytes, entries)
    }

    fn index_cursor(t: &Table) -> IndexCursor {
        IndexCursor::new(t, t.index_block().unwrap().0)
    }

    /// Every entry of `c` from its first on, and the error it stopped at.
    fn forward(c: &mut impl Cursor, t: &Table) -> (Entries, Option<Error>) {
        let mut out = Vec::new();
        c.seek_to_first(t);
        while c.valid() {
            out.push((c.key().to_vec(), c.value().to_vec()));
            c.next(t);
        }
        (out, c.error(t))
    }

    /// Every entry of `c` from its last back, in ascending order, and the
    /// error it stopped at.
    fn backward(c: &mut impl Cursor, t: &Table) -> (Entries, Option<Error>) {
        let mut out = Vec::new();
        c.seek_to_last(t);
        while c.valid() {
            out.push((c.key().to_vec(), c.value().to_vec()));
            c.prev(t);
        }
        out.reverse();
        (out, c.error(t))
    }

    /// The handles of the blocks `c`'s entries name.
    fn handles(entries: &Entries) -> Vec<BlockHandle> {
        entries.iter().map(|(_, v)| BlockHandle::decode_exact(v).unwrap()).collect()
    }

    #[test]
    fn the_walk_reads_every_entry_both_ways_under_flat_and_partitioned_indexes() {
        let mut index_keys = Vec::new();
        for partitioned in [false, true] {
            let (bytes, entries) = table_bytes(partitioned);
            let t = open(&bytes).unwrap();
            // The index entries, one per data block, in order both ways.
            let mut index = index_cursor(&t);
            let (ahead, error) = forward(&mut index, &t);
            assert!(error.is_none(), "{error:?}");
            assert_eq!(ahead.len() as u64, t.properties().num_data_blocks, "partitioned {partitioned}");
            assert!(handles(&ahead).windows(2).all(|w| w[0].offset < w[1].offset));
            let (behind, error) = backward(&mut index, &t);
            assert!(error.is_none(), "{error:?}");
            assert_eq!(behind, ahead);
            index_keys.push(ahead.into_iter().map(|(k, _)| k).collect::<Vec<_>>());
            // The data blocks under them: every entry, both ways.
            let mut walk = TwoLevelCursor::new(index_cursor(&t), Data);
            assert_eq!(forward(&mut walk, &t).0, entries, "partitioned {partitioned}");
            assert_eq!(backward(&mut walk, &t).0, entries, "partitioned {partitioned}");
            // Seeks land on the first entry at or after the target, and on
            // the last at or before it.
            for i in (0..2100).step_by(37) {
                let target = ikey(format!("key{i:06}").as_bytes(), 12, KIND_FOR_SEEK);
                let at =
                    entries.partition_point(|(k, _)| crate::key::compare_bytewise_internal_keys(k, &target).is_lt());
                walk.seek(&t, &target);
                assert_eq!(walk.valid(), at < entries.len());
                if walk.valid() {
                    assert_eq!(walk.key(), &entries[at].0[..], "seek key{i:06}");
                }
                walk.seek_for_prev(&t, &target);
                let before =
                    entries.partition_point(|(k, _)| crate::key::compare_bytewise_internal_keys(k, &target).is_le());
                assert_eq!(walk.valid(), before > 0);
                if walk.valid() {
                    assert_eq!(walk.key(), &entries[before - 1].0[..], "seek_for_prev key{i:06}");
                }
            }
        }
        // The partitions hold the flat index's entries, partition after partition.
        assert_eq!(index_keys[0], index_keys[1]);
    }

    /// `bytes` with one byte flipped inside the block at `handle`.
    fn damaged(bytes: &[u8], handle: BlockHandle) -> Vec<u8> {
        let mut bad = bytes.to_vec();
        bad[handle.offset as usize + handle.size as usize / 2] ^= 0x20;
        bad
    }

    fn corruption_offset(e: Option<Error>) -> u64 {
        match e {
            Some(Error::Corruption { offset, .. }) => offset,
            other => panic!("not corruption: {other:?}"),
        }
    }

    #[test]
    fn a_damaged_block_stops_the_walk_for_good_both_ways() {
        for partitioned in [false, true] {
            let (bytes, entries) = table_bytes(partitioned);
            let t = open(&bytes).unwrap();
            let blocks = handles(&forward(&mut index_cursor(&t), &t).0);
            let middle = blocks[blocks.len() / 2];
            let t = open(&damaged(&bytes, middle)).unwrap();
            let mut walk = TwoLevelCursor::new(index_cursor(&t), Data);
            // Forward: the blocks before the damaged one, then its error.
            let (ahead, error) = forward(&mut walk, &t);
            assert_eq!(corruption_offset(error), middle.offset, "partitioned {partitioned}");
            assert!(!ahead.is_empty() && ahead.len() < entries.len());
            assert_eq!(ahead[..], entries[..ahead.len()]);
            // The error is sticky: no move makes the walk valid again.
            walk.next(&t);
            walk.seek_to_first(&t);
            walk.seek(&t, &entries[0].0);
            assert!(!walk.valid() && walk.error().is_some());
            // Backward: the blocks after it, then its error.
            let mut walk = TwoLevelCursor::new(index_cursor(&t), Data);
            let (behind, error) = backward(&mut walk, &t);
            assert_eq!(corruption_offset(error), middle.offset);
            assert!(!behind.is_empty());
            assert_eq!(behind[..], entries[entries.len() - behind.len()..]);
            assert!(ahead.len() + behind.len() < entries.len(), "the damaged block's entries were read");
        }
    }

    #[test]
    fn a_damaged_index_partition_stops_the_index_walk_both_ways() {
        let (bytes, entries) = table_bytes(true);
        let t = open(&bytes).unwrap();
        let (top, _) = t.index_block().unwrap();
        let mut top = IndexBlockCursor(BlockIterator::new(top, t.index_order().clone()));
        let partitions = handles(&forward(&mut top, &t).0);
        assert!(partitions.len() >= 3, "{} partitions", partitions.len());
        let second = partitions[1];
        let t = open(&damaged(&bytes, second)).unwrap();
        let (ahead, error) = forward(&mut index_cursor(&t), &t);
        assert_eq!(corruption_offset(error), second.offset);
        assert!(!ahead.is_empty(), "the first partition's entries come first");
        let (behind, error) = backward(&mut index_cursor(&t), &t);
        assert_eq!(corruption_offset(error), second.offset);
        assert!(!behind.is_empty(), "the later partitions' entries come first backwards");
        // The data walk over the damaged partition fails there too.
        let (read, error) = forward(&mut TwoLevelCursor::new(index_cursor(&t), Data), &t);
        assert_eq!(corruption_offset(error), second.offset);
        assert_eq!(read[..], entries[..read.len()]);
    }
}
