//! A decoded block and the iterator over it (LevelDB `table/block.cc`).
//!
//! Contract:
//! 1. [`Block::new`] checks the restart array (count, bounds, increasing
//!    offsets) once; entries are checked lazily as the iterator decodes them.
//!    No byte pattern makes either panic: a bad entry makes the iterator
//!    invalid and [`BlockIterator::corruption`] says why.
//! 2. A block is immutable and shared through `Arc` (the block cache hands out
//!    the same block to many readers); an iterator owns its `Arc` (or, for a
//!    point lookup, borrows the block), so its `value()` slice stays valid
//!    until the iterator moves.
//! 3. Keys are compared in the block's [`KeyOrder`]: internal-key order for
//!    data blocks and the index blocks of older tables, user-key order for
//!    the index blocks of tables whose index keys are user keys (seeked with
//!    internal keys), both in the column family's comparator; bytewise for
//!    the metaindex and properties blocks.

use std::cmp::Ordering;
use std::ops::Deref;
use std::sync::Arc;

use bytes::Bytes;
use smallvec::SmallVec;

use crate::comparator::UserComparator;
use crate::key::TRAILER_LEN;
use crate::util::coding::{decode_fixed32, decode_varint32};

/// How the keys of a block are ordered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyOrder {
    /// Plain bytewise order (metaindex, properties).
    Bytewise,
    /// Internal-key order with user keys in the comparator's order; every
    /// key must be at least 8 bytes long.
    Internal(UserComparator),
    /// An index block whose keys are user keys (RocksDB's
    /// `index_key_is_user_key`): targets are internal keys, compared with
    /// the entries by their user key alone, in the comparator's order.
    UserKeys(UserComparator),
}

impl KeyOrder {
    /// Whether user keys `a` and `b` are versions of one key
    /// ([`UserComparator::same_key`]).
    #[inline]
    pub fn same_key(&self, a: &[u8], b: &[u8]) -> bool {
        match self {
            KeyOrder::Internal(c) | KeyOrder::UserKeys(c) => c.same_key(a, b),
            KeyOrder::Bytewise => a == b,
        }
    }

    /// Internal keys in the bytewise order.
    #[cfg(any(test, feature = "internals"))]
    pub const INTERNAL_BYTEWISE: KeyOrder = KeyOrder::Internal(UserComparator::BYTEWISE);

    /// How the block's entry key `entry` compares with the seek target `target`.
    #[inline]
    pub fn compare(&self, entry: &[u8], target: &[u8]) -> Ordering {
        match self {
            KeyOrder::Bytewise => entry.cmp(target),
            KeyOrder::Internal(cmp) => cmp.compare_internal(entry, target),
            KeyOrder::UserKeys(cmp) => {
                // A target too short to be an internal key (never passed by
                // the table reader) is compared whole rather than panicking.
                let user = target.len().checked_sub(TRAILER_LEN).map_or(target, |n| &target[..n]);
                cmp.compare(entry, user)
            }
        }
    }

    fn key_is_well_formed(&self, key: &[u8]) -> bool {
        !matches!(self, KeyOrder::Internal(_)) || key.len() >= TRAILER_LEN
    }

    /// How this order's keys map to key heads, or `None` when they do not
    /// (the plain bytewise order of small meta blocks, and user comparators,
    /// whose order the first bytes need not follow).
    fn head_form(&self) -> Option<HeadForm> {
        let (cmp, internal) = match self {
            KeyOrder::Bytewise => return None,
            KeyOrder::Internal(cmp) => (cmp, true),
            KeyOrder::UserKeys(cmp) => (cmp, false),
        };
        let reverse = if cmp.is_bytewise() {
            false
        } else if cmp.is_reverse_bytewise() {
            true
        } else {
            return None;
        };
        Some(HeadForm { internal, reverse })
    }
}

/// Which keys a block's key heads were taken from: entries that are
/// internal keys (or user keys), in the bytewise order (or its reverse).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HeadForm {
    internal: bool,
    reverse: bool,
}

impl HeadForm {
    /// The head of user key `user`: its first 8 bytes, zero-padded, as a
    /// big-endian number, inverted in the reverse order. Never decreasing
    /// in the order: where two keys differ within their first 8 bytes the
    /// heads differ the same way, and otherwise they are equal (a key that
    /// is a prefix of the other pads with zeros, the smallest byte).
    fn of_user_key(self, user: &[u8]) -> u64 {
        let mut b = [0u8; 8];
        let n = user.len().min(8);
        b[..n].copy_from_slice(&user[..n]);
        let h = u64::from_be_bytes(b);
        if self.reverse {
            !h
        } else {
            h
        }
    }

    /// The head of an entry key (`None`: an internal key too short to hold
    /// its trailer, which the iterator reports as corruption).
    fn of_entry(self, key: &[u8]) -> Option<u64> {
        if !self.internal {
            return Some(self.of_user_key(key));
        }
        key.len().checked_sub(TRAILER_LEN).map(|n| self.of_user_key(&key[..n]))
    }

    /// The head of a seek target: an internal key, whose user key both
    /// forms compare (one too short for a trailer is compared whole, as
    /// [`KeyOrder::compare`] and `compare_internal` do).
    fn of_target(self, target: &[u8]) -> u64 {
        let user = target.len().checked_sub(TRAILER_LEN).map_or(target, |n| &target[..n]);
        self.of_user_key(user)
    }
}

/// A block's key heads: one per restart point, the head of its key
/// ([`HeadForm::of_user_key`]), so a seek narrows its binary search over
/// the restart points in arrays of numbers before comparing whole keys
/// (two dependent misses a step: the restart offset, then the key) only
/// among restarts whose heads equal the target's. Built for index blocks,
/// whose restart array is long (one entry per data block). Every
/// [`KeyHeads::STRIDE`]th head is also kept in `top`, small enough to stay
/// in the CPU cache: a search reads `top`, then one stride of `heads`.
#[derive(Debug)]
struct KeyHeads {
    form: HeadForm,
    heads: Box<[u64]>,
    top: Box<[u64]>,
}

impl KeyHeads {
    /// Heads per sample in `top` (two cache lines of `heads`).
    const STRIDE: usize = 16;

    fn new(form: HeadForm, heads: Vec<u64>) -> Self {
        let top = heads.iter().step_by(Self::STRIDE).copied().collect();
        KeyHeads { form, heads: heads.into_boxed_slice(), top }
    }

    fn bytes(&self) -> usize {
        8 * (self.heads.len() + self.top.len())
    }

    /// The restarts whose head is `t`: those before hold keys below any
    /// with head `t`, those after keys above. As `(first, end)`.
    fn equal_range(&self, t: u64) -> (usize, usize) {
        let heads = &self.heads[..];
        // `top[j]` is `heads[STRIDE * j]`: the first head `>= t` is after
        // the last sample below `t` and at or before the next sample.
        let j = self.top.partition_point(|&h| h < t);
        let start = Self::STRIDE * j.saturating_sub(1);
        let end = (Self::STRIDE * j).min(heads.len());
        let first = start + heads[start..end].partition_point(|&h| h < t);
        // Few restarts share a head: walk a stride, then search.
        let mut through = first;
        let walk_end = (first + Self::STRIDE).min(heads.len());
        while through < walk_end && heads[through] <= t {
            through += 1;
        }
        if through == walk_end && walk_end < heads.len() {
            through += heads[walk_end..].partition_point(|&h| h <= t);
        }
        (first, through)
    }
}

/// The uncompressed contents of one block, checked enough to iterate safely.
#[derive(Debug)]
pub struct Block {
    data: BlockContents,
    /// Offset of the restart array: entries live in `data[..restart_offset]`.
    restart_offset: usize,
    num_restarts: usize,
    /// The restart keys' heads, when built ([`Block::with_key_heads`]).
    heads: Option<KeyHeads>,
}

/// A block's bytes: a buffer of its own, or a view of a memory-mapped file
/// (no copy). Not one `Bytes` for both: turning a trimmed `Vec` into `Bytes`
/// allocates a shared header, a cost on every block read.
#[derive(Debug)]
pub enum BlockContents {
    /// A buffer of the block's own.
    Owned(Vec<u8>),
    /// A view of a mapped file.
    Mapped(Bytes),
}

impl BlockContents {
    /// True for a view of a mapped file.
    pub fn is_mapped(&self) -> bool {
        matches!(self, BlockContents::Mapped(_))
    }
}

impl Deref for BlockContents {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            BlockContents::Owned(v) => v,
            BlockContents::Mapped(b) => b,
        }
    }
}

impl From<Vec<u8>> for BlockContents {
    fn from(v: Vec<u8>) -> Self {
        BlockContents::Owned(v)
    }
}

impl From<Bytes> for BlockContents {
    fn from(b: Bytes) -> Self {
        BlockContents::Mapped(b)
    }
}

impl Block {
    /// Wraps block contents, refusing a malformed restart array.
    pub fn new(data: impl Into<BlockContents>) -> Result<Block, String> {
        let data: BlockContents = data.into();
        let len = data.len();
        let num_restarts =
            len.checked_sub(4)
                .and_then(|at| decode_fixed32(&data[at..]))
                .ok_or_else(|| format!("block of {len} bytes is too short for a restart count"))? as usize;
        let max_restarts = (len - 4) / 4;
        if num_restarts == 0 || num_restarts > max_restarts {
            return Err(format!("block of {len} bytes claims {num_restarts} restart points"));
        }
        let restart_offset = len - 4 - 4 * num_restarts;
        let block = Block { data, restart_offset, num_restarts, heads: None };
        let mut previous = None;
        for i in 0..num_restarts {
            let r = block.restart_point(i);
            let in_bounds = r < restart_offset || (r == 0 && restart_offset == 0);
            if !in_bounds || previous.is_some_and(|p| r <= p) {
                return Err(format!("restart point {i} at {r} is out of order or past the entries ({restart_offset})"));
            }
            previous = Some(r);
        }
        Ok(block)
    }

    /// The block with the heads of its restart keys in `order`, which
    /// narrow its seeks ([`KeyHeads`]): for an index block. Without them
    /// when the order has no heads, or when a restart key does not decode
    /// (the iterator then finds and reports the damage as without heads).
    pub fn with_key_heads(mut self, order: &KeyOrder) -> Block {
        let Some(form) = order.head_form() else { return self };
        let mut heads = Vec::with_capacity(self.num_restarts);
        let mut it = BlockIterator::new(&self, order.clone());
        for i in 0..self.num_restarts {
            let Some((start, end)) = it.restart_key(i) else { return self };
            let Some(h) = form.of_entry(&self.data[start..end]) else { return self };
            heads.push(h);
        }
        self.heads = Some(KeyHeads::new(form, heads));
        self
    }

    /// True when the block carries key heads (in any order): an index
    /// block's.
    pub fn has_key_heads(&self) -> bool {
        self.heads.is_some()
    }

    /// Bytes held, for cache charging: the contents and the key heads.
    pub fn size(&self) -> usize {
        self.data.len() + self.heads.as_ref().map_or(0, KeyHeads::bytes)
    }

    /// The block's bytes as stored: entries, restart array and count.
    pub fn contents(&self) -> &[u8] {
        &self.data
    }

    /// Issues loads of the block's bytes into the CPU cache, the restart
    /// array first (blocks up to 16 KiB; of a larger one, the restart array
    /// only): a block found in the block cache is usually cold, and a seek
    /// reads its restart array, then a few restart keys, then a run of
    /// entries, each a miss that waits for the one before; issued together
    /// up front, the misses overlap.
    pub fn prefetch(&self) {
        let data: &[u8] = &self.data;
        for line in data[self.restart_offset..].chunks(64) {
            crate::util::prefetch(line.as_ptr());
        }
        if data.len() <= 16 << 10 {
            for line in data[..self.restart_offset].chunks(64) {
                crate::util::prefetch(line.as_ptr());
            }
        }
    }

    fn restart_point(&self, i: usize) -> usize {
        let at = self.restart_offset + 4 * i;
        decode_fixed32(&self.data[at..]).unwrap_or(0) as usize
    }
}

/// A decoded entry header: where the key delta and value sit in the block.
struct EntryHeader {
    shared: usize,
    key_start: usize,
    key_end: usize,
    value_end: usize,
}

/// A block iterator's current key: held inline up to 32 bytes (the internal
/// keys of user keys up to 24 bytes), so an iterator made for one seek (a
/// new `DbIterator` per seek makes one per table) allocates nothing for it.
pub type KeyBuf = SmallVec<[u8; 32]>;

/// A cursor over a [`Block`], in both directions.
///
/// Follows the [`crate::iter::InternalIterator`] contract except for error
/// reporting: a corruption makes it invalid and is reported as a reason by
/// [`BlockIterator::corruption`], for the owner to wrap with the file name and
/// block offset.
pub struct BlockIterator<B: Deref<Target = Block> = Arc<Block>> {
    block: B,
    order: KeyOrder,
    /// Offset of the current entry.
    current: usize,
    /// Offset just past the current entry (where the next one starts).
    next_offset: usize,
    /// Index of the restart region holding `current`.
    restart_index: usize,
    key: KeyBuf,
    value: (usize, usize),
    valid: bool,
    corruption: Option<String>,
}

impl<B: Deref<Target = Block>> BlockIterator<B> {
    /// An unpositioned iterator over `block` whose keys are in `order`: an
    /// `Arc<Block>` to own it, or `&Block` for a lookup that borrows it (no
    /// reference count touched, so readers on other cores do not contend).
    pub fn new(block: B, order: KeyOrder) -> Self {
        BlockIterator {
            block,
            order,
            current: 0,
            next_offset: 0,
            restart_index: 0,
            key: KeyBuf::new(),
            value: (0, 0),
            valid: false,
            corruption: None,
        }
    }

    /// An unpositioned iterator over `block` that builds its keys in `buf`
    /// (cleared): the buffer of an iterator over a block read before
    /// ([`BlockIterator::into_key_buffer`]), so moving to the next block
    /// allocates nothing.
    pub fn with_key_buffer(block: B, order: KeyOrder, mut buf: KeyBuf) -> Self {
        buf.clear();
        BlockIterator { key: buf, ..BlockIterator::new(block, order) }
    }

    /// The buffer the iterator built its keys in, for the next block's.
    pub fn into_key_buffer(self) -> KeyBuf {
        self.key
    }

    /// True when positioned at an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current key; valid until the iterator moves. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current value; valid until the iterator moves. Requires `valid()`.
    pub fn value(&self) -> &[u8] {
        self.block.data.get(self.value.0..self.value.1).unwrap_or(&[])
    }

    /// Where the current value sits in the block's contents. Requires `valid()`.
    pub fn value_range(&self) -> std::ops::Range<usize> {
        self.value.0..self.value.1
    }

    /// Why the block is corrupt, once the iterator has met a bad entry. A
    /// corrupt iterator stays invalid.
    pub fn corruption(&self) -> Option<&str> {
        self.corruption.as_deref()
    }

    /// Positions at the first entry.
    pub fn seek_to_first(&mut self) {
        if self.corruption.is_some() {
            return;
        }
        self.seek_to_restart(0);
        self.parse_next();
    }

    /// Positions at the last entry.
    pub fn seek_to_last(&mut self) {
        if self.corruption.is_some() {
            return;
        }
        self.seek_to_restart(self.block.num_restarts - 1);
        while self.parse_next() && self.next_offset < self.block.restart_offset {}
    }

    /// Positions at the first entry `>= target`.
    pub fn seek(&mut self, target: &[u8]) {
        if self.corruption.is_some() {
            return;
        }
        // Binary search for the last restart point whose key is < target.
        let (mut left, mut right) = (0, self.block.num_restarts - 1);
        if let Some(kh) = self.block.heads.as_ref().filter(|kh| Some(kh.form) == self.order.head_form()) {
            // Restarts whose head is below the target's hold smaller keys,
            // those whose head is above it larger ones: only the restarts
            // with the target's head need whole keys compared.
            let t = kh.form.of_target(target);
            let (below, through) = kh.equal_range(t);
            left = below.saturating_sub(1);
            right = through.saturating_sub(1);
        }
        while left < right {
            let mid = left + (right - left).div_ceil(2);
            let Some((start, end)) = self.restart_key(mid) else {
                return;
            };
            if self.order.compare(&self.block.data[start..end], target) == Ordering::Less {
                left = mid;
            } else {
                right = mid - 1;
            }
        }
        self.seek_to_restart(left);
        while self.parse_next() {
            if self.order.compare(&self.key, target) != Ordering::Less {
                return;
            }
        }
    }

    /// Positions at the last entry `<= target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.seek(target);
        if self.corruption.is_some() {
            return;
        }
        if !self.valid {
            self.seek_to_last();
        } else if self.order.compare(&self.key, target) == Ordering::Greater {
            self.prev();
        }
    }

    /// Moves to the next entry. Requires `valid()`.
    pub fn next(&mut self) {
        if self.valid {
            self.parse_next();
        }
    }

    /// Moves to the previous entry. Requires `valid()`.
    pub fn prev(&mut self) {
        if !self.valid {
            return;
        }
        // Back up to the restart region that starts before the current entry,
        // then walk forward to the entry just before it.
        let original = self.current;
        while self.block.restart_point(self.restart_index) >= original {
            if self.restart_index == 0 {
                self.valid = false;
                return;
            }
            self.restart_index -= 1;
        }
        self.seek_to_restart(self.restart_index);
        while self.parse_next() && self.next_offset < original {}
    }

    fn seek_to_restart(&mut self, index: usize) {
        self.key.clear();
        self.restart_index = index;
        self.next_offset = self.block.restart_point(index);
        self.valid = false;
    }

    /// Decodes the entry header at `offset`, checking every length against
    /// the entry area.
    fn decode_header(&self, offset: usize) -> Result<EntryHeader, String> {
        let limit = self.block.restart_offset;
        let area = self.block.data.get(offset..limit).ok_or("entry offset past the entries")?;
        // LevelDB's `DecodeEntry` fast path: three one-byte lengths.
        if let [shared, non_shared, value_len, ..] = *area {
            if (shared | non_shared | value_len) < 0x80 {
                let key_start = offset + 3;
                let key_end = key_start + usize::from(non_shared);
                let value_end = key_end + usize::from(value_len);
                if value_end <= limit {
                    return Ok(EntryHeader { shared: usize::from(shared), key_start, key_end, value_end });
                }
            }
        }
        // The same with a two-byte value length (values of 128 bytes to 16 KiB).
        if let [shared, non_shared, v0, v1, ..] = *area {
            if (shared | non_shared | v1) < 0x80 && v0 >= 0x80 {
                let key_start = offset + 4;
                let key_end = key_start + usize::from(non_shared);
                let value_end = key_end + (usize::from(v0 & 0x7f) | usize::from(v1) << 7);
                if value_end <= limit {
                    return Ok(EntryHeader { shared: usize::from(shared), key_start, key_end, value_end });
                }
            }
        }
        let mut p = 0;
        let mut field = |name: &str| -> Result<usize, String> {
            let (v, n) = decode_varint32(&area[p..]).ok_or_else(|| format!("bad {name} varint"))?;
            p += n;
            Ok(v as usize)
        };
        let shared = field("shared-length")?;
        let non_shared = field("key-length")?;
        let value_len = field("value-length")?;
        let key_start = offset + p;
        let key_end = key_start.checked_add(non_shared).filter(|&e| e <= limit).ok_or("key runs past the entries")?;
        let value_end = key_end.checked_add(value_len).filter(|&e| e <= limit).ok_or("value runs past the entries")?;
        Ok(EntryHeader { shared, key_start, key_end, value_end })
    }

    /// Where the whole key stored at restart point `index` sits in the block,
    /// or `None` after recording a corruption.
    fn restart_key(&mut self, index: usize) -> Option<(usize, usize)> {
        let offset = self.block.restart_point(index);
        match self.decode_header(offset) {
            Ok(h) if h.shared == 0 && self.order.key_is_well_formed(&self.block.data[h.key_start..h.key_end]) => {
                Some((h.key_start, h.key_end))
            }
            Ok(_) => {
                self.fail(offset, "malformed key at a restart point".into());
                None
            }
            Err(reason) => {
                self.fail(offset, reason);
                None
            }
        }
    }

    /// Decodes the entry at `next_offset`; false at the end or on corruption.
    fn parse_next(&mut self) -> bool {
        self.current = self.next_offset;
        if self.current >= self.block.restart_offset {
            self.valid = false;
            return false;
        }
        let h = match self.decode_header(self.current) {
            Ok(h) => h,
            Err(reason) => {
                self.fail(self.current, reason);
                return false;
            }
        };
        if h.shared > self.key.len() {
            self.fail(self.current, format!("entry shares {} bytes of a {}-byte key", h.shared, self.key.len()));
            return false;
        }
        self.key.truncate(h.shared);
        self.key.extend_from_slice(&self.block.data[h.key_start..h.key_end]);
        if !self.order.key_is_well_formed(&self.key) {
            self.fail(self.current, format!("{}-byte key is too short for an internal key", self.key.len()));
            return false;
        }
        self.value = (h.key_end, h.value_end);
        self.next_offset = h.value_end;
        while self.restart_index + 1 < self.block.num_restarts
            && self.block.restart_point(self.restart_index + 1) <= self.current
        {
            self.restart_index += 1;
        }
        self.valid = true;
        true
    }

    fn fail(&mut self, offset: usize, reason: String) {
        self.valid = false;
        self.key.clear();
        self.corruption = Some(format!("{reason} (entry at block offset {offset})"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};
    use crate::sst::block_builder::BlockBuilder;
    use proptest::prelude::*;

    fn build(entries: &[(Vec<u8>, Vec<u8>)], interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for (k, v) in entries {
            b.add(k, v);
        }
        Arc::new(Block::new(b.finish()).unwrap())
    }

    fn collect_forward(it: &mut BlockIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        it.seek_to_first();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        out
    }

    fn collect_backward(it: &mut BlockIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        it.seek_to_last();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        out.reverse();
        out
    }

    /// Sorted, distinct internal keys built from a small alphabet so that
    /// neighbours share prefixes, with a few versions per user key.
    fn entries_strategy() -> impl Strategy<Value = Vec<(Vec<u8>, Vec<u8>)>> {
        prop::collection::vec(
            (
                prop::collection::vec(prop::sample::select(vec![b'a', b'b', b'c']), 0..6),
                0u64..4,
                // One-, two- and three-byte value lengths (decode_header's
                // fast paths and its general one).
                prop_oneof![4 => 0usize..20, 2 => 120usize..300, 1 => 16_370usize..16_400],
            ),
            0..120,
        )
        .prop_map(|raw| {
            let mut v: Vec<(Vec<u8>, Vec<u8>)> = raw
                .into_iter()
                .map(|(uk, seq, vlen)| (make_internal_key(&uk, seq, ValueKind::Value), vec![b'v'; vlen]))
                .collect();
            v.sort_by(|a, b| crate::key::compare_bytewise_internal_keys(&a.0, &b.0));
            v.dedup_by(|a, b| a.0 == b.0);
            v
        })
    }

    fn target_strategy() -> impl Strategy<Value = Vec<u8>> {
        (prop::collection::vec(prop::sample::select(vec![b'a', b'b', b'c', b'd']), 0..7), 0u64..5)
            .prop_map(|(uk, seq)| make_internal_key(&uk, seq, ValueKind::Value))
    }

    proptest! {
        #[test]
        fn block_matches_a_sorted_vec(
            entries in entries_strategy(),
            interval in 1usize..8,
            targets in prop::collection::vec(target_strategy(), 1..30),
            walk in prop::collection::vec(any::<bool>(), 0..40),
        ) {
            let block = build(&entries, interval);
            let mut it = BlockIterator::new(block, KeyOrder::INTERNAL_BYTEWISE);
            prop_assert_eq!(&collect_forward(&mut it), &entries);
            prop_assert_eq!(&collect_backward(&mut it), &entries);
            for t in &targets {
                let ge = entries.partition_point(|(k, _)| crate::key::compare_bytewise_internal_keys(k, t) == Ordering::Less);
                it.seek(t);
                prop_assert_eq!(it.valid(), ge < entries.len());
                if ge < entries.len() {
                    prop_assert_eq!(it.key(), &entries[ge].0[..]);
                    prop_assert_eq!(it.value(), &entries[ge].1[..]);
                }
                let le = entries.partition_point(|(k, _)| crate::key::compare_bytewise_internal_keys(k, t) != Ordering::Greater);
                it.seek_for_prev(t);
                prop_assert_eq!(it.valid(), le > 0);
                if le > 0 {
                    prop_assert_eq!(it.key(), &entries[le - 1].0[..]);
                }
                // A random walk from the seek position crosses restart boundaries.
                let mut pos = le.checked_sub(1);
                for &forward in &walk {
                    let Some(p) = pos else { break };
                    if forward { it.next(); pos = Some(p + 1).filter(|&q| q < entries.len()); }
                    else { it.prev(); pos = p.checked_sub(1); }
                    prop_assert_eq!(it.valid(), pos.is_some());
                    if let Some(q) = pos {
                        prop_assert_eq!(it.key(), &entries[q].0[..]);
                        prop_assert_eq!(it.value(), &entries[q].1[..]);
                    }
                }
            }
            prop_assert!(it.corruption().is_none());
        }

        /// Seeks narrowed by key heads land where the plain binary search
        /// does and where a sorted vector says, in both built-in orders, for
        /// internal-key and user-key entries; keys of 0 to 11 bytes over a
        /// small alphabet make many restarts share a head and short keys pad.
        #[test]
        fn seeks_narrowed_by_key_heads_land_where_plain_seeks_do(
            raw in prop::collection::vec(
                (prop::collection::vec(prop::sample::select(vec![0u8, b'a', b'b']), 0..12), 0u64..3), 0..150),
            targets in prop::collection::vec(
                (prop::collection::vec(prop::sample::select(vec![0u8, b'a', b'b', b'c']), 0..12), 0u64..4), 1..30),
            interval in prop_oneof![3 => Just(1usize), 1 => 2usize..5],
            reverse in any::<bool>(),
            internal in any::<bool>(),
        ) {
            let cmp = UserComparator::new(&if reverse {
                crate::comparator::reverse_bytewise()
            } else {
                crate::comparator::bytewise()
            });
            let order = if internal { KeyOrder::Internal(cmp.clone()) } else { KeyOrder::UserKeys(cmp.clone()) };
            let mut entries: Vec<(Vec<u8>, Vec<u8>)> = raw
                .into_iter()
                .map(|(uk, seq)| {
                    let k = if internal { make_internal_key(&uk, seq, ValueKind::Value) } else { uk };
                    (k, seq.to_le_bytes().to_vec())
                })
                .collect();
            let entry_order = |a: &[u8], b: &[u8]| if internal { cmp.compare_internal(a, b) } else { cmp.compare(a, b) };
            entries.sort_by(|a, b| entry_order(&a.0, &b.0));
            entries.dedup_by(|a, b| entry_order(&a.0, &b.0) == Ordering::Equal);
            let mut b = BlockBuilder::new(interval);
            for (k, v) in &entries {
                b.add(k, v);
            }
            let raw_block = b.finish();
            let plain = Arc::new(Block::new(raw_block.clone()).unwrap());
            let headed = Arc::new(Block::new(raw_block).unwrap().with_key_heads(&order));
            // (An empty block has one restart point and no key there.)
            prop_assert_eq!(headed.has_key_heads(), !entries.is_empty());
            let heads_size = if entries.is_empty() { 0 } else { 8 * (plain.num_restarts + plain.num_restarts.div_ceil(16)) };
            prop_assert_eq!(headed.size(), plain.size() + heads_size);
            let mut p = BlockIterator::new(plain, order.clone());
            let mut h = BlockIterator::new(headed, order.clone());
            for (uk, seq) in &targets {
                let t = make_internal_key(uk, *seq, ValueKind::Value);
                let ge = entries.partition_point(|(k, _)| order.compare(k, &t) == Ordering::Less);
                p.seek(&t);
                h.seek(&t);
                prop_assert_eq!(h.valid(), ge < entries.len());
                prop_assert_eq!(p.valid(), h.valid());
                if h.valid() {
                    prop_assert_eq!(h.key(), &entries[ge].0[..]);
                    prop_assert_eq!(p.key(), h.key());
                }
                p.seek_for_prev(&t);
                h.seek_for_prev(&t);
                prop_assert_eq!(p.valid(), h.valid());
                if h.valid() {
                    prop_assert_eq!(p.key(), h.key());
                }
            }
            prop_assert!(h.corruption().is_none());
        }

        /// The sampled search finds exactly the run of equal heads, for
        /// runs shorter and longer than a stride and targets between, below
        /// and above every head.
        #[test]
        fn key_heads_find_the_run_of_a_targets_head(
            mut heads in prop::collection::vec(0u64..40, 0..200),
            targets in prop::collection::vec(0u64..45, 1..20),
        ) {
            heads.sort_unstable();
            let kh = KeyHeads::new(HeadForm { internal: true, reverse: false }, heads.clone());
            for t in targets {
                let first = heads.partition_point(|&h| h < t);
                let through = heads.partition_point(|&h| h <= t);
                prop_assert_eq!(kh.equal_range(t), (first, through), "target {}", t);
            }
        }

        #[test]
        fn random_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..200), target in target_strategy()) {
            if let Ok(block) = Block::new(data) {
                let block = Arc::new(block);
                for order in [KeyOrder::INTERNAL_BYTEWISE, KeyOrder::Bytewise] {
                    let mut it = BlockIterator::new(block.clone(), order);
                    let n = collect_forward(&mut it).len();
                    prop_assert!(n <= block.size());
                    collect_backward(&mut it);
                    it.seek(&target);
                    it.seek_for_prev(&target);
                }
            }
        }
    }

    #[test]
    fn key_heads_are_built_only_for_orders_they_follow() {
        let mut b = BlockBuilder::new(1);
        for k in [&b"apple"[..], b"banana", b"cherry"] {
            b.add(&make_internal_key(k, 1, ValueKind::Value), b"v");
        }
        let raw = b.finish();
        let custom: Arc<dyn crate::comparator::Comparator> = Arc::new(Custom);
        for (order, heads) in [
            (KeyOrder::INTERNAL_BYTEWISE, true),
            (KeyOrder::Internal(UserComparator::new(&crate::comparator::reverse_bytewise())), true),
            (KeyOrder::Bytewise, false),
            (KeyOrder::Internal(UserComparator::new(&custom)), false),
        ] {
            assert_eq!(Block::new(raw.clone()).unwrap().with_key_heads(&order).has_key_heads(), heads, "{order:?}");
        }
        // Heads built in one order are not used by an iterator in another.
        let headed = Arc::new(Block::new(raw).unwrap().with_key_heads(&KeyOrder::INTERNAL_BYTEWISE));
        let mut it = BlockIterator::new(headed, KeyOrder::Bytewise);
        it.seek(&make_internal_key(b"banana", 1, ValueKind::Value));
        assert_eq!(it.key(), &make_internal_key(b"banana", 1, ValueKind::Value)[..]);
        // A restart key too short for an internal key: no heads, and the
        // iterator reports the damage as it would without them.
        let mut b = BlockBuilder::new(1);
        b.add(b"abc", b"1");
        let block = Block::new(b.finish()).unwrap().with_key_heads(&KeyOrder::INTERNAL_BYTEWISE);
        assert!(!block.has_key_heads());
        let mut it = BlockIterator::new(Arc::new(block), KeyOrder::INTERNAL_BYTEWISE);
        it.seek(&make_internal_key(b"a", 1, ValueKind::Value));
        assert!(it.corruption().unwrap().contains("too short"), "{:?}", it.corruption());
    }

    /// A user comparator (bytewise in fact, but not known to be).
    struct Custom;
    impl crate::comparator::Comparator for Custom {
        fn name(&self) -> &str {
            "test.Custom"
        }
        fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
            a.cmp(b)
        }
    }

    #[test]
    fn empty_block_has_no_entries() {
        let block = build(&[], 16);
        assert_eq!(block.size(), 8);
        let mut it = BlockIterator::new(block, KeyOrder::INTERNAL_BYTEWISE);
        it.seek_to_first();
        assert!(!it.valid());
        it.seek_to_last();
        assert!(!it.valid());
        it.seek(&make_internal_key(b"a", 1, ValueKind::Value));
        assert!(!it.valid());
        it.seek_for_prev(&make_internal_key(b"a", 1, ValueKind::Value));
        assert!(!it.valid());
        assert!(it.corruption().is_none());
    }

    #[test]
    fn malformed_restart_arrays_are_refused() {
        assert!(Block::new(vec![]).is_err());
        assert!(Block::new(vec![0, 0, 0]).is_err());
        assert!(Block::new(vec![0, 0, 0, 0]).unwrap_err().contains("0 restart"));
        assert!(Block::new(vec![0xff, 0xff, 0xff, 0xff]).is_err());
        // One restart pointing past the entry area.
        assert!(Block::new(vec![9, 9, 5, 0, 0, 0, 1, 0, 0, 0]).is_err());
        // Restarts out of order.
        let mut b = vec![0u8; 6];
        b.extend_from_slice(&[3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0]);
        assert!(Block::new(b).unwrap_err().contains("out of order"));
    }

    #[test]
    fn bad_entries_are_reported_not_misread() {
        let entries: Vec<_> =
            (0..4u8).map(|i| (make_internal_key(&[b'k', i], 1, ValueKind::Value), vec![i; 3])).collect();
        let mut raw = {
            let mut b = BlockBuilder::new(16);
            for (k, v) in &entries {
                b.add(k, v);
            }
            b.finish()
        };
        // The second entry claims to share more bytes than the first key has.
        let second = 3 + entries[0].0.len() + 3;
        raw[second] = 40;
        let mut it = BlockIterator::new(Arc::new(Block::new(raw).unwrap()), KeyOrder::INTERNAL_BYTEWISE);
        it.seek_to_first();
        assert!(it.valid());
        it.next();
        assert!(!it.valid());
        assert!(it.corruption().unwrap().contains("shares 40 bytes"), "{:?}", it.corruption());
        it.seek_to_first();
        assert!(!it.valid(), "a corrupt iterator stays invalid");
    }

    #[test]
    fn one_byte_lengths_past_the_entries_are_corruption() {
        // The fast path (three one-byte lengths) must check bounds as the slow
        // path does: a value length of 127 runs past this small block.
        let key = make_internal_key(b"k", 1, ValueKind::Value);
        let mut raw = {
            let mut b = BlockBuilder::new(16);
            b.add(&key, b"v");
            b.finish()
        };
        raw[2] = 127;
        let mut it = BlockIterator::new(Arc::new(Block::new(raw.clone()).unwrap()), KeyOrder::INTERNAL_BYTEWISE);
        it.seek_to_first();
        assert!(!it.valid());
        assert!(it.corruption().unwrap().contains("value runs past"), "{:?}", it.corruption());
        // Same through a borrowed block and a seek.
        let block = Block::new(raw).unwrap();
        let mut it = BlockIterator::new(&block, KeyOrder::INTERNAL_BYTEWISE);
        it.seek(&key);
        assert!(!it.valid());
        assert!(it.corruption().is_some());
    }

    #[test]
    fn short_internal_keys_are_corruption_but_fine_bytewise() {
        let mut b = BlockBuilder::new(16);
        b.add(b"abc", b"1");
        let block = Arc::new(Block::new(b.finish()).unwrap());
        let mut bytewise = BlockIterator::new(block.clone(), KeyOrder::Bytewise);
        bytewise.seek(b"abc");
        assert_eq!((bytewise.key(), bytewise.value()), (&b"abc"[..], &b"1"[..]));
        let mut internal = BlockIterator::new(block, KeyOrder::INTERNAL_BYTEWISE);
        internal.seek_to_first();
        assert!(!internal.valid());
        assert!(internal.corruption().unwrap().contains("too short"));
    }
}
