//! [`LogWriter`]: appends logical records to a log file, fragmenting them into
//! physical records that never cross a block boundary (LevelDB
//! `db/log_writer.cc`).

use super::{RecordType, BLOCK_SIZE, HEADER_SIZE};
use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::util::checksum::{crc32c, crc32c_extend, mask};

/// The encode buffer is kept between records unless a huge record grew it
/// past this; a log of small writes then allocates nothing per record.
const RETAINED_BUFFER: usize = 1 << 20;

/// Writes a log file. Single-threaded (`&mut self`).
///
/// Each logical record goes to the file in one `append` (the file may buffer
/// it); `flush` pushes it to the OS, `sync` makes it durable. After any
/// failed call the writer refuses every later one with a copy of that error:
/// the file's tail is unknown (a failed fsync may have dropped dirty pages),
/// so the caller must start a new log.
pub struct LogWriter {
    file: Box<dyn WritableFile>,
    file_name: String,
    /// Offset within the current block of the next byte written.
    block_offset: usize,
    size: u64,
    /// Unmasked CRC of each type byte, precomputed (LevelDB `type_crc_`).
    type_crc: [u32; 5],
    encoded: Vec<u8>,
    failed: Option<Error>,
}

impl LogWriter {
    /// Writes records after whatever `file` already holds (a reopened log
    /// continues in its last block).
    pub fn new(file: Box<dyn WritableFile>, file_name: String) -> Self {
        let size = file.size();
        let type_crc = [0u8, 1, 2, 3, 4].map(|t| crc32c(&[t]));
        LogWriter {
            file,
            file_name,
            block_offset: (size % BLOCK_SIZE as u64) as usize,
            size,
            type_crc,
            encoded: Vec::new(),
            failed: None,
        }
    }

    /// The name the writer was created with, for error messages.
    #[cfg(test)]
    pub fn file_name(&self) -> &str {
        &self.file_name
    }

    /// Appends one logical record (possibly empty). Not durable until [`sync`](Self::sync).
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        self.check()?;
        kill_point!("wal_append", if self.file_name.contains(".log"));
        self.encoded.clear();
        let mut left = payload;
        let mut begin = true;
        loop {
            let leftover = BLOCK_SIZE - self.block_offset;
            if leftover < HEADER_SIZE {
                // Invariant 1: too little room for a header; zero the trailer.
                self.encoded.resize(self.encoded.len() + leftover, 0);
                self.block_offset = 0;
            }
            let available = BLOCK_SIZE - self.block_offset - HEADER_SIZE;
            let fragment_len = left.len().min(available);
            let end = fragment_len == left.len();
            let kind = match (begin, end) {
                (true, true) => RecordType::Full,
                (true, false) => RecordType::First,
                (false, false) => RecordType::Middle,
                (false, true) => RecordType::Last,
            };
            let (fragment, rest) = left.split_at(fragment_len);
            self.encode_physical(kind, fragment);
            left = rest;
            begin = false;
            if end {
                break;
            }
        }
        let result = self.file.append(&self.encoded);
        let written = self.encoded.len() as u64;
        if self.encoded.capacity() > RETAINED_BUFFER {
            self.encoded = Vec::new();
        }
        self.guard(result)?;
        self.size += written;
        Ok(())
    }

    /// Pushes appended records to the operating system (not durable).
    pub fn flush(&mut self) -> Result<()> {
        self.check()?;
        let result = self.file.flush();
        self.guard(result)
    }

    /// Makes every appended record durable.
    pub fn sync(&mut self) -> Result<()> {
        self.check()?;
        kill_point!("wal_sync", if self.file_name.contains(".log"));
        let result = self.file.sync();
        self.guard(result)
    }

    /// Bytes in the file, records appended by this writer included.
    pub fn file_size(&self) -> u64 {
        self.size
    }

    /// Whether a call failed: the writer refuses every call since.
    pub fn has_failed(&self) -> bool {
        self.failed.is_some()
    }

    fn check(&self) -> Result<()> {
        match &self.failed {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }

    fn guard(&mut self, result: Result<()>) -> Result<()> {
        if let Err(e) = &result {
            self.failed = Some(e.duplicate());
        }
        result
    }

    fn encode_physical(&mut self, kind: RecordType, fragment: &[u8]) {
        debug_assert!(fragment.len() <= BLOCK_SIZE - HEADER_SIZE);
        let crc = mask(crc32c_extend(self.type_crc[kind as usize], fragment));
        self.encoded.extend_from_slice(&crc.to_le_bytes());
        self.encoded.extend_from_slice(&(fragment.len() as u16).to_le_bytes());
        self.encoded.push(kind as u8);
        self.encoded.extend_from_slice(fragment);
        self.block_offset += HEADER_SIZE + fragment.len();
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::test_support::*;
    use super::*;
    use crate::fs::{FaultOp, FaultRule, FileSystem};

    /// The physical records of a log: (offset, type byte, payload length).
    fn layout(bytes: &[u8]) -> Vec<(usize, u8, usize)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let room = BLOCK_SIZE - at % BLOCK_SIZE;
            if room < HEADER_SIZE {
                assert!(bytes[at..at + room].iter().all(|&b| b == 0), "trailer at {at} must be zero");
                at += room;
                continue;
            }
            let len = usize::from(u16::from_le_bytes([bytes[at + 4], bytes[at + 5]]));
            out.push((at, bytes[at + 6], len));
            at += HEADER_SIZE + len;
        }
        out
    }

    #[test]
    fn the_worked_example_in_the_format_doc_holds() {
        // docs/format.md, "Worked example".
        let bytes = encode(&[b"hello".to_vec()]);
        assert_eq!(bytes, [0x0b, 0xb9, 0x57, 0x58, 0x05, 0x00, 0x01, b'h', b'e', b'l', b'l', b'o']);
        assert_eq!(crc32c(b"\x01hello"), 0x6719_daea);
        assert_eq!(mask(0x6719_daea), 0x5857_b90b);
    }

    #[test]
    fn the_fragmentation_example_in_the_format_doc_holds() {
        // docs/format.md, "Blocks and records": A, B and C.
        let bytes = encode(&[vec![b'A'; 1000], vec![b'B'; 97_270], vec![b'C'; 8000]]);
        assert_eq!(
            layout(&bytes),
            [(0, 1, 1000), (1007, 2, 31_754), (32_768, 3, 32_761), (65_536, 4, 32_755), (98_304, 1, 8000)]
        );
    }

    #[test]
    fn an_empty_record_is_a_full_header_alone() {
        assert_eq!(layout(&encode(&[vec![]])), [(0, 1, 0)]);
    }

    #[test]
    fn large_records_are_fragmented_at_block_boundaries() {
        let max = BLOCK_SIZE - HEADER_SIZE;
        assert_eq!(layout(&encode(&[vec![7; max]])), [(0, 1, max)]);
        assert_eq!(layout(&encode(&[vec![7; max + 1]])), [(0, 2, max), (BLOCK_SIZE, 4, 1)]);
        assert_eq!(
            layout(&encode(&[vec![7; 100_000]])),
            [(0, 2, max), (BLOCK_SIZE, 3, max), (2 * BLOCK_SIZE, 3, max), (3 * BLOCK_SIZE, 4, 100_000 - 3 * max)]
        );
    }

    #[test]
    fn fewer_than_seven_bytes_left_become_a_zero_trailer() {
        for left in 0..HEADER_SIZE {
            let first = vec![1; BLOCK_SIZE - HEADER_SIZE - left];
            let bytes = encode(&[first, b"next".to_vec()]);
            assert_eq!(layout(&bytes)[1], (BLOCK_SIZE, 1, 4), "{left} bytes left");
            assert_eq!(bytes.len(), BLOCK_SIZE + HEADER_SIZE + 4);
        }
        // Exactly seven bytes left: a FIRST fragment with an empty payload.
        let bytes = encode(&[vec![1; BLOCK_SIZE - 2 * HEADER_SIZE], b"next".to_vec()]);
        assert_eq!(layout(&bytes)[1..], [(BLOCK_SIZE - HEADER_SIZE, 2, 0), (BLOCK_SIZE, 4, 4)]);
    }

    #[test]
    fn a_reopened_log_continues_in_its_last_block() {
        let fs = fs_holding(b"");
        let path = Path::new(LOG);
        let mut w = LogWriter::new(fs.new_writable(path).unwrap(), LOG.into());
        w.add_record(&[1; 30_000]).unwrap();
        w.sync().unwrap();
        drop(w);
        let mut w = LogWriter::new(fs.reopen_writable(path).unwrap(), LOG.into());
        assert_eq!(w.file_size(), 30_007);
        w.add_record(&[2; 5_000]).unwrap();
        w.flush().unwrap();
        let bytes = fs.file_bytes(path).unwrap();
        assert_eq!(w.file_size(), bytes.len() as u64);
        assert_eq!(layout(&bytes)[1..], [(30_007, 2, BLOCK_SIZE - 30_007 - HEADER_SIZE), (BLOCK_SIZE, 4, 2_246)]);
        assert_eq!(records_of(&read_all(&bytes)), [vec![1; 30_000], vec![2; 5_000]]);
    }

    #[test]
    fn a_failed_call_poisons_the_writer() {
        let fs = fs_holding(b"");
        let mut w = LogWriter::new(fs.new_writable(Path::new(LOG)).unwrap(), LOG.into());
        w.add_record(b"kept").unwrap();
        fs.inject(FaultRule::new(FaultOp::Sync));
        assert!(w.sync().is_err());
        assert!(w.add_record(b"refused").is_err());
        assert!(w.sync().is_err(), "a failed fsync is not retried");
        assert_eq!(fs.op_count_of(FaultOp::Append), 1);
        assert_eq!(w.file_name(), LOG);

        let fs = fs_holding(b"");
        let mut w = LogWriter::new(fs.new_writable(Path::new(LOG)).unwrap(), LOG.into());
        fs.inject(FaultRule::new(FaultOp::Append).kind(crate::fs::FaultKind::NoSpace));
        assert!(w.add_record(b"x").unwrap_err().is_no_space());
        assert!(w.add_record(b"y").unwrap_err().is_no_space());
        assert_eq!(w.file_size(), 0);
    }
}
