//! [`PrefetchBuffer`]: one larger read of a table file serves many of the
//! block reads that follow it (RocksDB `FilePrefetchBuffer` and the implicit
//! auto-readahead of `BlockPrefetcher`, file/file_prefetch_buffer.cc and
//! table/block_based/block_prefetcher.cc). See docs/io.md.
//!
//! Contract:
//! 1. [`PrefetchBuffer::read`] returns exactly the bytes `read_at` would for
//!    the same range, clipped at the caller's `limit` only where `read_at`
//!    would return more: a short result means the file is short, and the
//!    caller reports it as it would a short `read_at`.
//! 2. The buffer holds one window `[start, start + len)` of the file. A read
//!    inside it touches no file; a read outside it reads the missing bytes and
//!    moves the window to start at the read (bytes of the old window that the
//!    new one still covers are kept, not read again).
//! 3. Fixed mode (compaction inputs, `ReadOptions::readahead_size`): every
//!    miss reads the block plus `readahead` bytes. Auto mode (long scans):
//!    misses are read through unbuffered until two sequential ones in a row,
//!    where a read is sequential when it starts where the previous one ended;
//!    then each miss reads the block plus the readahead, which starts at
//!    `initial` and doubles per miss up to `max`. A non-sequential read drops
//!    the window and starts counting again, itself as the first read.
//!
//! Thread-safety: owned by one iterator, used by one thread.

use crate::error::Result;
use crate::fs::RandomAccessFile;

/// Sequential reads in a row after which auto readahead starts. RocksDB
/// `num_file_reads_for_auto_readahead`, default 2.
pub const READS_BEFORE_AUTO_READAHEAD: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Fixed,
    Auto { initial: usize, max: usize },
}

/// A readahead window over one file; see the module contract.
#[derive(Debug)]
pub struct PrefetchBuffer {
    mode: Mode,
    /// Bytes read past the block on the next miss.
    readahead: usize,
    /// Auto mode: sequential reads so far (capped once readahead is on).
    sequential_reads: u32,
    /// Where the previous read ended, for the sequential test.
    previous_end: Option<u64>,
    start: u64,
    window: Vec<u8>,
    hits: u64,
    bytes_prefetched: u64,
}

impl PrefetchBuffer {
    /// Every miss reads `readahead` bytes past the block (compaction inputs,
    /// an explicit `ReadOptions::readahead_size`).
    pub fn fixed(readahead: usize) -> Self {
        PrefetchBuffer::new(Mode::Fixed, readahead)
    }

    /// Auto readahead from `initial` doubling up to `max` bytes once reads are
    /// sequential (RocksDB `initial_auto_readahead_size`,
    /// `max_auto_readahead_size`); `initial` above `max` is clipped to it.
    pub fn auto(initial: usize, max: usize) -> Self {
        let initial = initial.min(max);
        PrefetchBuffer::new(Mode::Auto { initial, max }, initial)
    }

    fn new(mode: Mode, readahead: usize) -> Self {
        PrefetchBuffer {
            mode,
            readahead,
            sequential_reads: 0,
            previous_end: None,
            start: 0,
            window: Vec::new(),
            hits: 0,
            bytes_prefetched: 0,
        }
    }

    /// The bytes `[offset, offset + len)` of `file`, from the window when it
    /// holds them; `limit` is where readahead stops (the end of the blocks).
    pub fn read(&mut self, file: &dyn RandomAccessFile, offset: u64, len: usize, limit: u64) -> Result<Vec<u8>> {
        let end = offset.saturating_add(len as u64);
        let sequential = self.previous_end.is_none_or(|e| e == offset);
        self.previous_end = Some(end);
        if let Some(bytes) = self.in_window(offset, end).map(<[u8]>::to_vec) {
            self.hits += 1;
            return Ok(bytes);
        }
        if let Mode::Auto { initial, .. } = self.mode {
            if !sequential {
                self.sequential_reads = 1;
                self.readahead = initial;
                self.window = Vec::new();
                return file.read_at(offset, len);
            }
            if self.sequential_reads < READS_BEFORE_AUTO_READAHEAD {
                self.sequential_reads += 1;
                return file.read_at(offset, len);
            }
            if self.readahead == 0 {
                return file.read_at(offset, len);
            }
        }
        let window_end = end.saturating_add(self.readahead as u64).min(limit.max(end));
        self.fill(file, offset, window_end)?;
        if let Mode::Auto { max, .. } = self.mode {
            self.readahead = self.readahead.saturating_mul(2).min(max);
        }
        let available = self.window.len().min(len);
        Ok(self.window[..available].to_vec())
    }

    /// The window's bytes for `[offset, end)`, if it holds all of them.
    fn in_window(&self, offset: u64, end: u64) -> Option<&[u8]> {
        let from = usize::try_from(offset.checked_sub(self.start)?).ok()?;
        let to = usize::try_from(end - self.start).ok()?;
        self.window.get(from..to)
    }

    /// Moves the window to `[offset, window_end)`, reading what it lacks.
    fn fill(&mut self, file: &dyn RandomAccessFile, offset: u64, window_end: u64) -> Result<()> {
        let old_end = self.start + self.window.len() as u64;
        let kept = if offset >= self.start && offset < old_end {
            self.window.drain(..(offset - self.start) as usize);
            self.window.len()
        } else {
            self.window.clear();
            0
        };
        self.start = offset;
        let read_from = offset + kept as u64;
        let want = usize::try_from(window_end.saturating_sub(read_from)).unwrap_or(usize::MAX);
        // Read onto the kept bytes, into the window's own capacity (kept
        // between fills). The capacity is grown to what this fill needs
        // plus an eighth, not doubled as a `Vec` grows by default: the kept
        // bytes (less than a block) would otherwise push each window of a
        // compaction's inputs to twice its readahead size. A failed read
        // leaves a window that holds only what it says it holds.
        if self.window.capacity() < kept + want {
            self.window.reserve_exact(want.saturating_add(want / 8));
        }
        match file.read_at_append(read_from, want, &mut self.window) {
            Ok(n) => self.bytes_prefetched += n as u64,
            Err(e) => {
                self.window.clear();
                return Err(e);
            }
        }
        // A file that ends early leaves a short window: the caller then sees
        // a short read, as it would without the buffer.
        Ok(())
    }

    /// Bytes the window has allocated.
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.window.capacity()
    }

    /// Reads served from the window without touching the file.
    #[cfg(test)]
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// Bytes read from the file into the window.
    #[cfg(test)]
    pub fn bytes_prefetched(&self) -> u64 {
        self.bytes_prefetched
    }

    /// The readahead the next buffered miss will use.
    #[cfg(test)]
    pub fn readahead(&self) -> usize {
        self.readahead
    }
}

#[cfg(test)]
mod tests {
    use parking_lot::Mutex;

    use super::*;

    /// A file of `len` bytes (byte i is i mod 251) that records every read.
    struct CountingFile {
        bytes: Vec<u8>,
        reads: Mutex<Vec<(u64, usize)>>,
    }

    impl CountingFile {
        fn new(len: usize) -> Self {
            CountingFile { bytes: (0..len).map(|i| (i % 251) as u8).collect(), reads: Mutex::new(Vec::new()) }
        }
        fn reads(&self) -> Vec<(u64, usize)> {
            self.reads.lock().clone()
        }
        fn expect(&self, offset: u64, len: usize) -> Vec<u8> {
            let end = (offset as usize + len).min(self.bytes.len());
            self.bytes[offset as usize..end].to_vec()
        }
    }

    impl RandomAccessFile for CountingFile {
        fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
            self.reads.lock().push((offset, len));
            Ok(self.expect(offset, len))
        }
        fn size(&self) -> Result<u64> {
            Ok(self.bytes.len() as u64)
        }
    }

    const BLOCK: usize = 1000;

    /// Reads the block at `offset` and returns the file reads it caused.
    fn read_block(buf: &mut PrefetchBuffer, file: &CountingFile, offset: u64) -> Vec<(u64, usize)> {
        let before = file.reads().len();
        let got = buf.read(file, offset, BLOCK, file.bytes.len() as u64).unwrap();
        assert_eq!(got, file.expect(offset, BLOCK), "block at {offset}");
        file.reads()[before..].to_vec()
    }

    #[test]
    fn a_fixed_window_serves_the_blocks_inside_it_without_reading() {
        let file = CountingFile::new(100_000);
        let mut buf = PrefetchBuffer::fixed(9 * BLOCK);
        assert_eq!(read_block(&mut buf, &file, 0), vec![(0, 10 * BLOCK)], "block plus readahead");
        for b in 1..10 {
            assert_eq!(read_block(&mut buf, &file, (b * BLOCK) as u64), vec![], "block {b} is in the window");
        }
        assert_eq!(buf.hits(), 9);
        // A miss reads through: the window moves to the block read.
        assert_eq!(read_block(&mut buf, &file, 50_000), vec![(50_000, 10 * BLOCK)]);
        assert_eq!(read_block(&mut buf, &file, 55_000), vec![]);
        // Going back before the window is a miss too.
        assert_eq!(read_block(&mut buf, &file, 40_000), vec![(40_000, 10 * BLOCK)]);
        assert_eq!(buf.bytes_prefetched(), 30 * BLOCK as u64);
    }

    #[test]
    fn a_block_across_the_window_end_reads_only_the_missing_bytes() {
        let file = CountingFile::new(100_000);
        let mut buf = PrefetchBuffer::fixed(4_500);
        assert_eq!(read_block(&mut buf, &file, 0), vec![(0, 5_500)]);
        // [5000, 6000) has 500 bytes in the window; they are kept.
        assert_eq!(read_block(&mut buf, &file, 5_000), vec![(5_500, 5_000)]);
        assert_eq!(read_block(&mut buf, &file, 9_000), vec![]);
    }

    #[test]
    fn a_window_read_through_a_file_stays_near_its_readahead_size() {
        // Blocks of varying sizes (as compressed blocks are), read in
        // order: each fill needs a little more or less than the last; the
        // window must not double its capacity for a little more.
        let file = CountingFile::new(400_000);
        let readahead = 20 * BLOCK;
        let mut buf = PrefetchBuffer::fixed(readahead);
        let (mut offset, mut largest, mut n) = (0u64, 0, 0u64);
        loop {
            let len = 900 + (n * 37 % 200) as usize;
            if offset + len as u64 > 400_000 {
                break;
            }
            let got = buf.read(&file, offset, len, 400_000).unwrap();
            assert_eq!(got, file.expect(offset, len), "block at {offset}");
            largest = largest.max(buf.capacity());
            offset += len as u64;
            n += 1;
        }
        assert!(largest <= (readahead + BLOCK) * 5 / 4, "window capacity reached {largest} for readahead {readahead}");
    }

    #[test]
    fn readahead_stops_at_the_limit_and_a_short_file_gives_a_short_read() {
        let file = CountingFile::new(10_000);
        let mut buf = PrefetchBuffer::fixed(1 << 20);
        let got = buf.read(&file, 0, BLOCK, 8_000).unwrap();
        assert_eq!(got, file.expect(0, BLOCK));
        assert_eq!(file.reads(), vec![(0, 8_000)], "clipped at the limit, not at readahead");
        // A block the caller believes is there but the file lacks.
        let mut buf = PrefetchBuffer::fixed(1 << 20);
        let got = buf.read(&file, 9_500, BLOCK, 20_000).unwrap();
        assert_eq!(got, file.expect(9_500, BLOCK));
        assert_eq!(got.len(), 500);
    }

    #[test]
    fn fixed_readahead_of_zero_reads_each_block_alone() {
        let file = CountingFile::new(10_000);
        let mut buf = PrefetchBuffer::fixed(0);
        for b in 0..5u64 {
            assert_eq!(read_block(&mut buf, &file, b * BLOCK as u64), vec![(b * BLOCK as u64, BLOCK)]);
        }
    }

    /// Reads blocks from `first` on, sequentially, until `n` file reads
    /// happened; returns the readahead of each read (bytes past its block).
    fn readaheads(buf: &mut PrefetchBuffer, file: &CountingFile, first: u64, n: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut offset = first;
        while out.len() < n {
            for (at, len) in read_block(buf, file, offset) {
                out.push((at + len as u64 - (offset + BLOCK as u64)) as usize);
            }
            offset += BLOCK as u64;
        }
        out
    }

    #[test]
    fn auto_readahead_doubles_from_the_third_sequential_read_up_to_the_max() {
        let file = CountingFile::new(4 << 20);
        let mut buf = PrefetchBuffer::auto(8 << 10, 64 << 10);
        let k = 1 << 10;
        assert_eq!(readaheads(&mut buf, &file, 0, 7), vec![0, 0, 8 * k, 16 * k, 32 * k, 64 * k, 64 * k]);
        assert!(buf.hits() > 100, "most blocks came from the window");
    }

    #[test]
    fn auto_readahead_resets_on_a_jump() {
        let file = CountingFile::new(4 << 20);
        let mut buf = PrefetchBuffer::auto(8 << 10, 256 << 10);
        let k = 1 << 10;
        assert_eq!(readaheads(&mut buf, &file, 0, 5), vec![0, 0, 8 * k, 16 * k, 32 * k]);
        assert_eq!(buf.readahead(), 64 * k);
        // The jump is read alone and counts as the first sequential read.
        assert_eq!(readaheads(&mut buf, &file, 2 << 20, 4), vec![0, 0, 8 * k, 16 * k]);
        // Backwards is not sequential either: every block is read alone.
        let mut offset = 3 << 20;
        for _ in 0..4 {
            assert_eq!(read_block(&mut buf, &file, offset), vec![(offset, BLOCK)]);
            offset -= 4 * BLOCK as u64;
        }
    }

    #[test]
    fn auto_readahead_with_a_max_of_zero_never_buffers() {
        let file = CountingFile::new(100_000);
        let mut buf = PrefetchBuffer::auto(8 << 10, 0);
        assert_eq!(readaheads(&mut buf, &file, 0, 6), vec![0; 6]);
        assert_eq!(buf.bytes_prefetched(), 0);
    }
}
