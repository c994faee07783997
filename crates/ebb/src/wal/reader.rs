//! [`LogReader`]: reads logical records back from a log file and reports
//! damage instead of failing on it (LevelDB `db/log_reader.cc`, with RocksDB's
//! distinction between a torn tail and damage in the middle).
//!
//! After damage the reader resumes at the next physical record that passes its
//! checksum and begins a logical record (FULL or FIRST), looking only at
//! block starts and at records chained from intact records (module invariant
//! 2): a damaged record's length is not trusted, since it could point into a
//! payload that happens to hold a well-formed record. Whether anything valid
//! follows the damage (`tail`) is judged more eagerly: the damaged record's
//! length is followed as well, so a flipped payload byte in the middle of a
//! block is not mistaken for a torn tail; and when that finds nothing, every
//! byte offset after the damage in its block is tried, because a damaged length
//! field hides where the next record in that block starts. An error in that
//! judgement can only call tail damage "not tail", the safe side.

use std::ops::Range;

use super::{RecordType, BLOCK_SIZE, HEADER_SIZE};
use crate::error::Result;
use crate::fs::SequentialFile;
use crate::util::checksum::{crc32c, crc32c_extend, unmask};

const BLOCK: u64 = BLOCK_SIZE as u64;
const HEADER: u64 = HEADER_SIZE as u64;

/// One step of reading a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogRecord {
    /// An intact logical record.
    Record {
        /// The record as given to `add_record`.
        data: Vec<u8>,
        /// File offset of its first physical record's header.
        offset: u64,
    },
    /// The end of the file; every later call returns `Eof` too.
    Eof,
    /// Damage. Reading may continue: the next call returns what follows it.
    Corrupt {
        /// File offset of the damaged logical record (of its first fragment
        /// when the damage is in a later one).
        offset: u64,
        /// What check failed.
        reason: String,
        /// True when nothing valid follows the damage in this file (a torn or
        /// corrupt tail): the next call returns `Eof`.
        tail: bool,
        /// True when the damage is an incomplete last record: its header or
        /// payload, or its later fragments, run past the end of the file (an
        /// append cut short). A record that is all there but fails its
        /// checksum is not incomplete. Implies `tail`.
        incomplete: bool,
    },
}

/// What one header and its payload turned out to be.
enum Physical {
    /// An intact physical record; `payload` indexes the reader's buffer.
    Fragment { kind: RecordType, payload: Range<usize>, next: u64 },
    /// The zero trailer of a block.
    Trailer { next: u64 },
    /// The end of the file, or zero-filled space from here to it.
    End,
    /// Damage. `chained` is where the next record would start if the header's
    /// length is right; `resync` is where reading may safely resume: the next
    /// block start, or `next` when the checksum vouches for the length.
    /// `incomplete`: the record runs past the end of the file.
    Damaged { reason: String, chained: Option<u64>, resync: u64, incomplete: bool },
}

/// Reads a log file front to back. Single-threaded (`&mut self`).
///
/// Memory: one or two blocks normally; after damage, the blocks up to the next
/// intact record (or the end of the file) while it looks ahead.
pub struct LogReader {
    file: Box<dyn SequentialFile>,
    file_name: String,
    /// File bytes `[buf_start, buf_start + buf.len())`; the file has been read
    /// exactly up to the end of `buf`.
    buf: Vec<u8>,
    buf_start: u64,
    /// The file has nothing past the end of `buf`.
    eof: bool,
    /// File offset of the next physical record to read.
    pos: u64,
    /// Only `Eof` remains.
    finished: bool,
    fragments: Vec<u8>,
}

impl LogReader {
    /// Reads `file` from its start; `file_name` names it in reports.
    pub fn new(file: Box<dyn SequentialFile>, file_name: String) -> Self {
        LogReader {
            file,
            file_name,
            buf: Vec::new(),
            buf_start: 0,
            eof: false,
            pos: 0,
            finished: false,
            fragments: Vec::new(),
        }
    }

    /// The name the reader was created with.
    pub fn file_name(&self) -> &str {
        &self.file_name
    }

    /// The next logical record, damage report or end of file. I/O errors are
    /// `Err`; the call may then be retried and starts from the same record.
    // Not `Iterator::next`: the end of the file is a value (`Eof`) that stays
    // put, and damage is reported in-band rather than ending the sequence.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<LogRecord> {
        let start = self.pos;
        let result = self.next_inner();
        if result.is_err() {
            self.pos = start;
        }
        result
    }

    fn next_inner(&mut self) -> Result<LogRecord> {
        if self.finished {
            return Ok(LogRecord::Eof);
        }
        self.discard_consumed();
        self.fragments.clear();
        let mut first_at: Option<u64> = None;
        loop {
            let at = self.pos;
            match self.parse_at(at)? {
                Physical::Trailer { next } => self.pos = next,
                Physical::End => {
                    return match first_at {
                        Some(first) => {
                            let reason = "FIRST fragment without LAST at end of file".into();
                            self.damage(first, reason, at, at, at, true)
                        }
                        None => {
                            self.finished = true;
                            Ok(LogRecord::Eof)
                        }
                    };
                }
                Physical::Damaged { reason, chained, resync, incomplete } => {
                    let offset = first_at.unwrap_or(at);
                    return self.damage(offset, reason, at, chained.unwrap_or(resync), resync, incomplete);
                }
                Physical::Fragment { kind, payload, next } => match (kind, first_at) {
                    (RecordType::Full, None) => {
                        let data = self.buf.get(payload).unwrap_or_default().to_vec();
                        self.pos = next;
                        return Ok(LogRecord::Record { data, offset: at });
                    }
                    (RecordType::First, None) => {
                        first_at = Some(at);
                        self.append_fragment(payload);
                        self.pos = next;
                    }
                    (RecordType::Middle, Some(_)) => {
                        self.append_fragment(payload);
                        self.pos = next;
                    }
                    (RecordType::Last, Some(first)) => {
                        self.append_fragment(payload);
                        self.pos = next;
                        return Ok(LogRecord::Record { data: std::mem::take(&mut self.fragments), offset: first });
                    }
                    (RecordType::Full | RecordType::First, Some(first)) => {
                        let reason = format!("FIRST fragment without LAST, followed by {kind:?} at offset {at}");
                        return self.damage(first, reason, at, at, at, false);
                    }
                    (RecordType::Middle | RecordType::Last | RecordType::Zero, None) => {
                        return self.damage(at, format!("{kind:?} fragment without FIRST"), at, next, next, false);
                    }
                    (RecordType::Zero, Some(first)) => {
                        return self.damage(first, "fragment of type 0".into(), at, next, next, false);
                    }
                },
            }
        }
    }

    /// Reports damage to the logical record at `offset`, found in the
    /// physical record at `damaged_at`, and positions the reader at what follows.
    /// `incomplete`: the damage is a record that runs past the end of the
    /// file, which is an append cut short if nothing intact follows it.
    fn damage(
        &mut self,
        offset: u64,
        reason: String,
        damaged_at: u64,
        tail_scan_from: u64,
        resume_from: u64,
        incomplete: bool,
    ) -> Result<LogRecord> {
        self.fragments.clear();
        let tail = self.next_record_start(tail_scan_from, true)?.is_none()
            && !self.intact_record_starts_later_in_block(damaged_at)?;
        // A length that runs past the end of the file while intact records
        // follow it is a damaged length, not an append cut short.
        let incomplete = incomplete && tail;
        let resume = if tail { None } else { self.next_record_start(resume_from, false)? };
        match resume {
            Some(at) => self.pos = at,
            None => self.finished = true,
        }
        Ok(LogRecord::Corrupt { offset, reason, tail, incomplete })
    }

    /// The offset of the first intact FULL or FIRST record at or after `from`,
    /// skipping intact MIDDLE/LAST fragments (their FIRST is damaged or
    /// skipped). `follow_damaged` also trusts the length of damaged records.
    fn next_record_start(&mut self, from: u64, follow_damaged: bool) -> Result<Option<u64>> {
        let mut at = from;
        loop {
            match self.parse_at(at)? {
                Physical::Fragment { kind: RecordType::Full | RecordType::First, .. } => return Ok(Some(at)),
                Physical::Fragment { next, .. } | Physical::Trailer { next } => at = next,
                Physical::End => return Ok(None),
                Physical::Damaged { chained, resync, .. } => {
                    at = match chained {
                        Some(next) if follow_damaged => next,
                        _ => resync,
                    };
                }
            }
        }
    }

    /// True when an intact FULL or FIRST record starts at any byte offset
    /// after `from` in the same block. The fallback of the tail judgement:
    /// when the damage is in a length field, neither following that length
    /// nor resynchronising at the next block start finds the intact records
    /// that follow in the same block. (Later blocks are reached by that
    /// resynchronisation; scanning them byte by byte too would make a long
    /// garbage tail cost a checksum per candidate offset.)
    fn intact_record_starts_later_in_block(&mut self, from: u64) -> Result<bool> {
        let block_end = (from / BLOCK + 1) * BLOCK;
        let mut at = from + 1;
        while at + HEADER <= block_end {
            self.fill_to(at + HEADER)?;
            let Ok(header) = <[u8; HEADER_SIZE]>::try_from(self.bytes(at, HEADER_SIZE)) else {
                return Ok(false);
            };
            let length = u64::from(u16::from_le_bytes([header[4], header[5]]));
            let room = block_end - at;
            let type_byte = header[6];
            if (type_byte == RecordType::Full as u8 || type_byte == RecordType::First as u8) && HEADER + length <= room
            {
                self.fill_to(at + HEADER + length)?;
                let payload = self.buf.get(self.range(at + HEADER, at + HEADER + length)).unwrap_or_default();
                let stored = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
                if payload.len() as u64 == length && unmask(stored) == crc32c_extend(crc32c(&[type_byte]), payload) {
                    return Ok(true);
                }
            }
            at += 1;
        }
        Ok(false)
    }

    /// Decodes the physical record at `at`. Every returned `next`, `chained`
    /// and `resync` is greater than `at`, so scans always make progress.
    fn parse_at(&mut self, at: u64) -> Result<Physical> {
        let block_end = (at / BLOCK + 1) * BLOCK;
        let room = block_end - at;
        let truncated_header = || Physical::Damaged {
            reason: "header cut short by the end of the file".into(),
            chained: None,
            resync: block_end,
            incomplete: true,
        };
        if room < HEADER {
            self.fill_to(block_end)?;
            if self.end() >= block_end {
                return Ok(Physical::Trailer { next: block_end });
            }
            // The file ends inside what would be the trailer.
            return Ok(match self.first_nonzero(at)? {
                None => Physical::End,
                Some(_) => truncated_header(),
            });
        }
        self.fill_to(at + HEADER)?;
        let available = self.end().saturating_sub(at);
        if available == 0 {
            return Ok(Physical::End);
        }
        if available < HEADER {
            return Ok(match self.first_nonzero(at)? {
                None => Physical::End,
                Some(_) => truncated_header(),
            });
        }
        let Ok(header) = <[u8; HEADER_SIZE]>::try_from(self.bytes(at, HEADER_SIZE)) else {
            return Ok(truncated_header());
        };
        if header == [0; HEADER_SIZE] {
            // Invariant 5: zeros are preallocated space only if they run to the end.
            return Ok(match self.first_nonzero(at)? {
                None => Physical::End,
                Some(nonzero) => Physical::Damaged {
                    reason: format!("zero-filled bytes inside the log, up to offset {nonzero}"),
                    chained: None,
                    resync: (nonzero / BLOCK * BLOCK).max(block_end),
                    incomplete: false,
                },
            });
        }
        let stored_crc = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let length = u64::from(u16::from_le_bytes([header[4], header[5]]));
        let type_byte = header[6];
        if HEADER + length > room {
            // A length past the end of the file as well is an append cut short
            // (its bytes never all reached the disk); inside the file it is damage.
            self.fill_to(block_end)?;
            return Ok(Physical::Damaged {
                reason: format!("record length {length} overruns its block"),
                chained: None,
                resync: block_end,
                incomplete: self.eof && self.end() < at + HEADER + length,
            });
        }
        let next = at + HEADER + length;
        self.fill_to(next)?;
        if self.end() < next {
            return Ok(Physical::Damaged {
                reason: "record cut short by the end of the file".into(),
                chained: None,
                resync: block_end,
                incomplete: true,
            });
        }
        let payload = self.range(at + HEADER, next);
        let actual_crc = crc32c_extend(crc32c(&[type_byte]), self.buf.get(payload.clone()).unwrap_or_default());
        if unmask(stored_crc) != actual_crc {
            return Ok(Physical::Damaged {
                reason: "checksum mismatch".into(),
                chained: Some(next),
                resync: block_end,
                incomplete: false,
            });
        }
        match RecordType::from_u8(type_byte) {
            Some(kind) if kind != RecordType::Zero => Ok(Physical::Fragment { kind, payload, next }),
            // The checksum vouches for the length, so reading resumes right after.
            _ => Ok(Physical::Damaged {
                reason: format!("unknown record type {type_byte}"),
                chained: Some(next),
                resync: next,
                incomplete: false,
            }),
        }
    }

    fn append_fragment(&mut self, payload: Range<usize>) {
        self.fragments.extend_from_slice(self.buf.get(payload).unwrap_or_default());
    }

    /// File offset just past the buffered bytes.
    fn end(&self) -> u64 {
        self.buf_start + self.buf.len() as u64
    }

    /// Buffer indices of file bytes `[from, to)`; empty when not buffered.
    fn range(&self, from: u64, to: u64) -> Range<usize> {
        let index = |o: u64| usize::try_from(o.saturating_sub(self.buf_start)).unwrap_or(usize::MAX);
        let (start, end) = (index(from), index(to).min(self.buf.len()));
        if from < self.buf_start || start > end {
            return 0..0;
        }
        start..end
    }

    fn bytes(&self, from: u64, len: usize) -> &[u8] {
        self.buf.get(self.range(from, from + len as u64)).unwrap_or_default()
    }

    /// Reads until the buffer reaches file offset `target` or the file ends.
    fn fill_to(&mut self, target: u64) -> Result<()> {
        while !self.eof && self.end() < target {
            let old = self.buf.len();
            self.buf.resize(old + BLOCK_SIZE, 0);
            match self.file.read(&mut self.buf[old..]) {
                Ok(n) => {
                    self.buf.truncate(old + n.min(BLOCK_SIZE));
                    self.eof = n == 0;
                }
                Err(e) => {
                    self.buf.truncate(old);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// The offset of the first non-zero byte at or after `from`, reading as
    /// far as needed; `None` when only zeros remain.
    fn first_nonzero(&mut self, from: u64) -> Result<Option<u64>> {
        let mut at = from;
        loop {
            let buffered = self.buf.get(self.range(at, self.end())).unwrap_or_default();
            if let Some(i) = buffered.iter().position(|&b| b != 0) {
                return Ok(Some(at + i as u64));
            }
            at = at.max(self.end());
            if self.eof {
                return Ok(None);
            }
            self.fill_to(self.end() + 1)?;
        }
    }

    /// Drops buffered blocks wholly before the current position.
    fn discard_consumed(&mut self) {
        let keep_from = self.pos / BLOCK * BLOCK;
        if keep_from > self.buf_start {
            let n = usize::try_from(keep_from - self.buf_start).unwrap_or(usize::MAX).min(self.buf.len());
            self.buf.drain(..n);
            self.buf_start += n as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};

    use super::super::test_support::*;
    use super::super::{replay, LogWriter};
    use super::*;
    use crate::error::Error;
    use crate::fs::{FaultOp, FaultRule, FileSystem};
    use crate::wal::WalRecoveryMode;

    fn round_trip(records: &[Vec<u8>]) {
        let bytes = encode(records);
        let events = read_all(&bytes);
        assert_eq!(events.len(), records.len() + 1);
        assert!(records_of(&events) == records, "records differ");
    }

    #[test]
    fn records_of_every_size_class_round_trip() {
        let max = BLOCK_SIZE - HEADER_SIZE;
        round_trip(&[]);
        round_trip(&[vec![]]);
        round_trip(&[vec![], vec![], vec![]]);
        round_trip(&[b"small".to_vec(), vec![], b"records".to_vec()]);
        for len in [max - 1, max, max + 1, BLOCK_SIZE, 2 * max, 2 * max + 1, 3 * BLOCK_SIZE + 17, 200_000] {
            let big: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            round_trip(std::slice::from_ref(&big));
            round_trip(&[b"before".to_vec(), big.clone(), b"after".to_vec()]);
            round_trip(&[big.clone(), big]);
        }
    }

    #[test]
    fn records_ending_near_a_block_boundary_round_trip() {
        for left in 0..=HEADER_SIZE + 1 {
            let first = vec![1; BLOCK_SIZE - HEADER_SIZE - left];
            round_trip(&[first.clone(), b"next".to_vec(), vec![]]);
            round_trip(&[first.clone(), vec![]]);
            round_trip(&[first, vec![2; 40_000]]);
        }
    }

    #[test]
    fn offsets_point_at_each_record_header() {
        let records = vec![b"a".to_vec(), vec![9; BLOCK_SIZE], b"c".to_vec()];
        let events = read_all(&encode(&records));
        // The big record: FIRST at 8 fills the block, LAST holds the other
        // 8 + 7 bytes at the next block start, and "c" follows it.
        assert_eq!(offsets_of(&events), [0, 8, BLOCK_SIZE as u64 + 7 + 15]);
    }

    /// A file that returns at most `step` bytes per read.
    struct Trickle {
        data: Vec<u8>,
        pos: usize,
        step: usize,
    }

    impl SequentialFile for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
            let n = buf.len().min(self.step).min(self.data.len() - self.pos);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    #[test]
    fn short_reads_are_assembled() {
        let records = vec![vec![5; 70_000], b"x".to_vec(), vec![6; 33_000]];
        let data = encode(&records);
        for step in [1, 7, 1000, 40_000] {
            let mut reader = LogReader::new(Box::new(Trickle { data: data.clone(), pos: 0, step }), "t".into());
            for want in &records {
                match reader.next().unwrap() {
                    LogRecord::Record { data, .. } => assert!(&data == want),
                    other => panic!("step {step}: {other:?}"),
                }
            }
            assert_eq!(reader.next().unwrap(), LogRecord::Eof);
        }
    }

    #[test]
    fn a_read_error_is_returned_and_the_call_can_be_retried() {
        let records = vec![vec![1; 50_000], vec![2; 50_000]];
        let fs = fs_holding(&encode(&records));
        let mut reader = LogReader::new(fs.open_sequential(Path::new(LOG)).unwrap(), LOG.into());
        assert_eq!(reader.file_name(), LOG);
        fs.inject(FaultRule::new(FaultOp::Read).nth(2));
        assert!(matches!(reader.next(), Err(Error::Io { .. })));
        for want in &records {
            assert!(matches!(reader.next().unwrap(), LogRecord::Record { data, offset: _ } if &data == want));
        }
        assert_eq!(reader.next().unwrap(), LogRecord::Eof);
    }

    /// Replays `bytes` in every mode, checking what no input may break: no
    /// panic, no I/O error, and records that are a prefix (point in time) or
    /// an in-order selection (skip mode) of `written` when `written` is given.
    fn check_every_mode(bytes: &[u8], written: Option<&[Vec<u8>]>) {
        let events = read_all(bytes);
        let mut last_offset = None;
        for e in &events {
            if let LogRecord::Record { offset, .. } | LogRecord::Corrupt { offset, .. } = e {
                assert!(*offset < bytes.len() as u64);
                if let LogRecord::Record { offset, .. } = e {
                    assert!(last_offset < Some(*offset), "offsets increase");
                    last_offset = Some(*offset);
                }
            }
        }
        for mode in [
            WalRecoveryMode::TolerateCorruptedTailRecords,
            WalRecoveryMode::AbsoluteConsistency,
            WalRecoveryMode::PointInTime,
            WalRecoveryMode::SkipAnyCorruptedRecords,
        ] {
            match replay_bytes(bytes, mode, true) {
                Ok((got, outcome)) => {
                    assert!(outcome.corrupted_bytes <= bytes.len() as u64);
                    let Some(written) = written else { continue };
                    match mode {
                        WalRecoveryMode::SkipAnyCorruptedRecords => {
                            let mut rest = written.iter();
                            for r in &got {
                                assert!(
                                    rest.any(|w| w == r),
                                    "skip mode returned a record not written, or out of order"
                                );
                            }
                        }
                        _ => assert!(got[..] == written[..got.len()], "{mode:?} must return a prefix"),
                    }
                }
                Err(e) => {
                    assert!(e.is_corruption(), "{mode:?}: {e}");
                    assert!(matches!(
                        mode,
                        WalRecoveryMode::TolerateCorruptedTailRecords | WalRecoveryMode::AbsoluteConsistency
                    ));
                }
            }
        }
    }

    #[test]
    fn random_bytes_never_panic_the_reader() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
        for _ in 0..200 {
            let len = rng.gen_range(0..3 * BLOCK_SIZE);
            let mut bytes: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            if rng.gen_bool(0.3) && len > 0 {
                let start = rng.gen_range(0..len);
                let end = rng.gen_range(start..=len);
                bytes[start..end].fill(0);
            }
            check_every_mode(&bytes, None);
        }
    }

    #[test]
    fn mutated_logs_never_panic_and_never_invent_records() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(42);
        for _ in 0..200 {
            let records: Vec<Vec<u8>> = (0..rng.gen_range(1..12))
                .map(|i| {
                    let len = if rng.gen_bool(0.3) { rng.gen_range(0..80_000) } else { rng.gen_range(0..200) };
                    (0..len).map(|j| (j as u8).wrapping_mul(31) ^ i as u8).collect()
                })
                .collect();
            let mut bytes = encode(&records);
            for _ in 0..rng.gen_range(1..4) {
                if bytes.is_empty() {
                    break;
                }
                let at = rng.gen_range(0..bytes.len());
                match rng.gen_range(0..6) {
                    0 => bytes[at] ^= 1 << rng.gen_range(0..8),
                    1 => bytes.truncate(at),
                    2 => {
                        let end = (at + rng.gen_range(1..5000)).min(bytes.len());
                        bytes[at..end].fill(0);
                    }
                    3 => {
                        let garbage: Vec<u8> = (0..rng.gen_range(1..100)).map(|_| rng.gen()).collect();
                        bytes.splice(at..at, garbage);
                    }
                    4 => {
                        let end = (at + rng.gen_range(1..100)).min(bytes.len());
                        bytes.drain(at..end);
                    }
                    _ => {
                        let garbage: Vec<u8> = (0..rng.gen_range(1..100_000)).map(|_| rng.gen()).collect();
                        bytes.extend(garbage);
                    }
                }
            }
            check_every_mode(&bytes, Some(&records));
        }
    }

    fn record_strategy() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => proptest::collection::vec(any::<u8>(), 0..300),
            1 => proptest::collection::vec(any::<u8>(), 0..100_000),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn random_records_round_trip(records in proptest::collection::vec(record_strategy(), 0..12)) {
            let events = read_all(&encode(&records));
            prop_assert_eq!(events.last(), Some(&LogRecord::Eof));
            prop_assert!(records_of(&events) == records);
        }

        #[test]
        fn random_records_round_trip_across_a_reopen(
            records in proptest::collection::vec(record_strategy(), 0..12),
            split in 0usize..12,
        ) {
            let split = split.min(records.len());
            let fs = fs_holding(b"");
            let path = Path::new(LOG);
            let mut w = LogWriter::new(fs.new_writable(path).unwrap(), LOG.into());
            for r in &records[..split] {
                w.add_record(r).unwrap();
            }
            drop(w);
            let mut w = LogWriter::new(fs.reopen_writable(path).unwrap(), LOG.into());
            for r in &records[split..] {
                w.add_record(r).unwrap();
            }
            let mut got = Vec::new();
            let outcome = replay(&fs, path, WalRecoveryMode::AbsoluteConsistency, true, |r, _| {
                got.push(r.to_vec());
                Ok(())
            })
            .unwrap();
            prop_assert_eq!(outcome.corrupted_bytes, 0);
            prop_assert!(got == records);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80_000)) {
            check_every_mode(&bytes, None);
        }
    }
}
