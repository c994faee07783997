//! Builds one block: prefix-compressed entries with restart points (LevelDB
//! `table/block_builder.cc`; layout in docs/format.md, "Blocks").
//!
//! Entry: `shared: varint32, non_shared: varint32, value_len: varint32,
//! key[shared..], value`. Every `restart_interval` entries the key is stored
//! whole (`shared = 0`) and the entry's offset is recorded; the block ends with
//! the restart offsets as fixed32s and their count as a fixed32.
//!
//! The builder does not check key order: the caller adds keys in the order of
//! the block's [`super::block::KeyOrder`]. It keeps every offset below 4 GiB only
//! if the caller keeps blocks that small (the table builder does).

use crate::util::coding::{put_fixed32, put_varint32};

/// Accumulates entries for one block.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    since_restart: usize,
    num_entries: usize,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    /// A builder that restarts prefix compression every `restart_interval`
    /// entries (at least 1).
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            num_entries: 0,
            last_key: Vec::new(),
        }
    }

    /// Appends an entry. `key` must follow the previously added key in the
    /// block's order.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        let shared = if self.since_restart < self.restart_interval {
            self.last_key.iter().zip(key).take_while(|(a, b)| a == b).count()
        } else {
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
            0
        };
        let non_shared = key.len() - shared;
        put_varint32(&mut self.buf, shared as u32);
        put_varint32(&mut self.buf, non_shared as u32);
        put_varint32(&mut self.buf, value.len() as u32);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.since_restart += 1;
        self.num_entries += 1;
    }

    /// Size of the block if it were finished now.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// [`BlockBuilder::estimated_size`] once `(key, value)` is added, an
    /// upper bound as RocksDB's `EstimateSizeAfterKV` makes it: the whole
    /// key (as if nothing were shared), the value, a restart when one is
    /// due, and the entry's three lengths.
    pub fn estimated_size_after(&self, key: &[u8], value: &[u8]) -> usize {
        let restart = if self.since_restart >= self.restart_interval { 4 } else { 0 };
        let varint_len = |n: usize| (usize::BITS - (n | 1).leading_zeros()).div_ceil(7) as usize;
        self.estimated_size() + key.len() + value.len() + restart + 4 + varint_len(key.len()) + varint_len(value.len())
    }

    /// Entries added since the last reset.
    #[cfg(test)]
    pub fn num_entries(&self) -> usize {
        self.num_entries
    }

    /// True when no entry was added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.num_entries == 0
    }

    /// The last key added (empty before the first).
    #[cfg(test)]
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Appends the restart array and returns the finished block, leaving the
    /// builder reset for the next block.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        out.reserve(4 * self.restarts.len() + 4);
        for &r in &self.restarts {
            put_fixed32(&mut out, r);
        }
        put_fixed32(&mut out, self.restarts.len() as u32);
        self.reset();
        out
    }

    /// Drops every entry.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.since_restart = 0;
        self.num_entries = 0;
        self.last_key.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restart_points_every_interval() {
        let mut b = BlockBuilder::new(2);
        for k in [&b"apple"[..], b"apricot", b"banana"] {
            b.add(k, b"v");
        }
        assert_eq!(b.num_entries(), 3);
        assert_eq!(b.last_key(), b"banana");
        let est = b.estimated_size();
        let block = b.finish();
        assert_eq!(block.len(), est);
        // Entries: "apple" whole (3+5+1 = 9 bytes), "apricot" sharing "ap"
        // (3+5+1 = 9 bytes), then a restart at 18 for "banana".
        let n = block.len();
        assert_eq!(&block[n - 4..], &2u32.to_le_bytes());
        assert_eq!(&block[n - 12..n - 8], &0u32.to_le_bytes());
        assert_eq!(&block[n - 8..n - 4], &18u32.to_le_bytes());
        assert_eq!(&block[9..12], &[2, 5, 1]);
        assert!(b.is_empty());
        assert_eq!(b.finish(), vec![0, 0, 0, 0, 1, 0, 0, 0]);
    }
}
