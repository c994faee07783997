//! The write-ahead log: LevelDB's log format (see docs/format.md, "Write-ahead
//! log"; LevelDB `doc/log_format.md`) and recovery under RocksDB's
//! `WALRecoveryMode`.
//!
//! A log file is a sequence of 32 KiB blocks holding physical records
//! `masked_crc32c: fixed32 | length: fixed16 | type: u8 | payload`; a logical
//! record (what [`LogWriter::add_record`] was given) is one FULL physical
//! record or FIRST, MIDDLE*, LAST. Invariants the writer keeps and the reader
//! relies on:
//! 1. A physical record never crosses a block boundary. When fewer than
//!    [`HEADER_SIZE`] bytes remain in a block they are a zero trailer.
//! 2. Every block starts with a header (or with the zero trailer's successor,
//!    which is a header), so after damage the reader can resynchronise at the
//!    next block start without mistaking payload bytes for a header.
//! 3. The CRC covers the type byte and the payload, and is masked.
//! 4. The fragments of one logical record are consecutive physical records.
//! 5. Type 0 is never written; a header of seven zero bytes marks
//!    preallocated or zero-filled space, which is legitimate only when
//!    nothing but zeros follows it to the end of the file.
//!
//! Thread-safety: a [`LogWriter`] or [`LogReader`] is used by one thread at a
//! time (`&mut self`); both are `Send`.
//!
//! WAL recovery modes ([`replay`], RocksDB semantics):
//! - `TolerateCorruptedTailRecords`: damage that nothing valid follows (a torn
//!   or corrupt last record) is dropped when it is in the last log; any other
//!   damage is [`Error::Corruption`] naming the file and offset.
//! - `AbsoluteConsistency`: any damage, a torn tail included, is an error.
//!   Zero-filled space at the end is not damage.
//! - `PointInTime` (the default): replay stops at the first damage, keeps
//!   every record before it, and sets [`ReplayOutcome::stop_replay`] so the
//!   caller replays no later log: the result is the database as of one moment.
//! - `SkipAnyCorruptedRecords`: damaged records are skipped (the reader
//!   resynchronises at the next block that starts a record) and replay goes
//!   on; writes in the middle may be lost.
//!
//! Damage is: a bad checksum, a length that overruns its block, an unknown
//! type, a header or payload cut short by the end of the file, a FIRST with no
//! LAST, a MIDDLE or LAST with no FIRST, and non-zero bytes after a zero
//! header. The reader never panics on any input.

mod reader;
mod writer;

use std::path::Path;

pub use reader::{LogReader, LogRecord};
pub use writer::LogWriter;

use crate::error::{Error, Result};
use crate::fs::FileSystem;

/// How much of a damaged WAL recovery accepts (RocksDB `WALRecoveryMode`).
/// See docs/format.md, "WAL recovery modes", for what each promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WalRecoveryMode {
    /// Accept a torn or corrupt record only at the very end of the last WAL
    /// (a crash mid-write); anything else is a corruption error.
    TolerateCorruptedTailRecords,
    /// Any damage anywhere is a corruption error.
    AbsoluteConsistency,
    /// Stop replay at the first damaged record and keep everything before it:
    /// the database is recovered to a consistent point in time. The default.
    #[default]
    PointInTime,
    /// Skip damaged records and keep replaying (may lose writes in the middle).
    SkipAnyCorruptedRecords,
}

/// Bytes in a block. DO NOT CHANGE: on-disk format.
pub const BLOCK_SIZE: usize = 32 * 1024;

/// Bytes in a physical record header: crc (4), length (2), type (1).
/// DO NOT CHANGE: on-disk format.
pub const HEADER_SIZE: usize = 4 + 2 + 1;

/// The type byte of a physical record. DO NOT CHANGE the numbers: on-disk
/// format, the same as LevelDB's and RocksDB's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordType {
    /// Reserved for preallocated, zero-filled space; never written.
    Zero = 0,
    /// A whole logical record.
    Full = 1,
    /// The first fragment of a logical record.
    First = 2,
    /// A fragment that is neither first nor last.
    Middle = 3,
    /// The last fragment of a logical record.
    Last = 4,
}

impl RecordType {
    /// Parses the on-disk byte.
    pub fn from_u8(b: u8) -> Option<RecordType> {
        match b {
            0 => Some(RecordType::Zero),
            1 => Some(RecordType::Full),
            2 => Some(RecordType::First),
            3 => Some(RecordType::Middle),
            4 => Some(RecordType::Last),
            _ => None,
        }
    }
}

/// Damage in a log file (a WAL or the MANIFEST) that recovery accepted and
/// left out, for reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDamage {
    /// The file, as its path was given to the reader.
    pub file: String,
    /// Offset of the damaged record.
    pub offset: u64,
    /// Bytes from the damaged record to the end of the file (the part not
    /// replayed; for skipped records, the bytes skipped).
    pub bytes: u64,
    /// What check failed.
    pub reason: String,
}

/// What [`replay`] did with one log file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplayOutcome {
    /// Logical records handed to the callback.
    pub records: u64,
    /// Bytes of the file skipped or dropped as damage.
    pub corrupted_bytes: u64,
    /// Point-in-time recovery stopped at damage in this file: later logs must
    /// not be replayed.
    pub stop_replay: bool,
    /// The first damage met and accepted, if any: its offset and what check failed.
    pub first_damage: Option<(u64, String)>,
    /// Intact records after the damage that were not replayed (point-in-time
    /// recovery stops at the damage; the rest of the file is read only to
    /// count them).
    pub records_dropped: u64,
}

/// Replays one WAL file, handing each intact logical record and its file
/// offset to `f` in order and applying `mode` to damage (module documentation; RocksDB
/// `WALRecoveryMode`). `is_last_log` says whether this is the newest log, the
/// only one whose tail may be torn by a crash. I/O errors and errors from `f`
/// are returned as they are; refused damage is [`Error::Corruption`] naming
/// the file and the offset of the damaged record.
pub fn replay(
    fs: &dyn FileSystem,
    path: &Path,
    mode: WalRecoveryMode,
    is_last_log: bool,
    mut f: impl FnMut(&[u8], u64) -> Result<()>,
) -> Result<ReplayOutcome> {
    let mut reader = LogReader::new(fs.open_sequential(path)?, path.display().to_string());
    let mut out = ReplayOutcome::default();
    // Start of the damage skipped since the last intact record (skip mode).
    let mut skipping_from: Option<u64> = None;
    let dropped_to_end = |from: u64| -> Result<u64> { Ok(fs.file_size(path)?.saturating_sub(from)) };
    loop {
        match reader.next()? {
            LogRecord::Record { data, offset } => {
                if let Some(from) = skipping_from.take() {
                    out.corrupted_bytes += offset.saturating_sub(from);
                }
                f(&data, offset)?;
                out.records += 1;
            }
            LogRecord::Eof => {
                if let Some(from) = skipping_from {
                    out.corrupted_bytes += dropped_to_end(from)?;
                }
                return Ok(out);
            }
            LogRecord::Corrupt { offset, reason, tail, .. } => match mode {
                WalRecoveryMode::TolerateCorruptedTailRecords if tail && is_last_log => {
                    out.corrupted_bytes += dropped_to_end(offset)?;
                    out.first_damage.get_or_insert((offset, reason));
                    return Ok(out);
                }
                WalRecoveryMode::TolerateCorruptedTailRecords | WalRecoveryMode::AbsoluteConsistency => {
                    return Err(Error::corruption(reader.file_name(), offset, reason));
                }
                WalRecoveryMode::PointInTime => {
                    out.corrupted_bytes += dropped_to_end(offset)?;
                    out.stop_replay = true;
                    out.first_damage.get_or_insert((offset, reason));
                    out.records_dropped = count_records(&mut reader)?;
                    return Ok(out);
                }
                WalRecoveryMode::SkipAnyCorruptedRecords => {
                    skipping_from.get_or_insert(offset);
                    out.first_damage.get_or_insert((offset, reason));
                }
            },
        }
    }
}

/// Reads `reader` to the end, counting the intact records it still finds.
fn count_records(reader: &mut LogReader) -> Result<u64> {
    let mut n = 0;
    loop {
        match reader.next()? {
            LogRecord::Record { .. } => n += 1,
            LogRecord::Eof => return Ok(n),
            LogRecord::Corrupt { .. } => {}
        }
    }
}

/// The intact logical records of the log at `path`, counted, damage skipped.
pub fn count_intact_records(fs: &dyn FileSystem, path: &Path) -> Result<u64> {
    let mut reader = LogReader::new(fs.open_sequential(path)?, path.display().to_string());
    count_records(&mut reader)
}

/// Helpers shared by the WAL tests.
#[cfg(test)]
pub(crate) mod test_support {
    use std::path::Path;

    use super::*;
    use crate::fs::MemFs;

    /// Where the helpers keep their log.
    pub const LOG: &str = "/wal/000007.log";

    /// A filesystem whose file [`LOG`] holds `bytes`, durably.
    pub fn fs_holding(bytes: &[u8]) -> MemFs {
        let fs = MemFs::new();
        fs.create_dir_all(Path::new("/wal")).unwrap();
        fs.set_file_bytes(Path::new(LOG), bytes).unwrap();
        fs
    }

    /// The bytes of a log holding `records`.
    pub fn encode(records: &[Vec<u8>]) -> Vec<u8> {
        let fs = fs_holding(b"");
        let mut w = LogWriter::new(fs.new_writable(Path::new(LOG)).unwrap(), LOG.into());
        for r in records {
            w.add_record(r).unwrap();
        }
        w.flush().unwrap();
        let bytes = fs.file_bytes(Path::new(LOG)).unwrap();
        assert_eq!(w.file_size(), bytes.len() as u64);
        bytes
    }

    /// Everything a reader reports for a log holding `bytes`, through `Eof`.
    pub fn read_all(bytes: &[u8]) -> Vec<LogRecord> {
        let fs = fs_holding(bytes);
        let mut reader = LogReader::new(fs.open_sequential(Path::new(LOG)).unwrap(), LOG.into());
        let mut events = Vec::new();
        // Every step but the last consumes at least one header.
        for _ in 0..bytes.len() / HEADER_SIZE * 2 + 2 {
            let event = reader.next().unwrap();
            let done = event == LogRecord::Eof;
            events.push(event);
            if done {
                assert_eq!(reader.next().unwrap(), LogRecord::Eof, "Eof is sticky");
                return events;
            }
        }
        panic!("the reader did not reach Eof: {events:?}");
    }

    /// The data of the intact records among `events`.
    pub fn records_of(events: &[LogRecord]) -> Vec<Vec<u8>> {
        events
            .iter()
            .filter_map(|e| match e {
                LogRecord::Record { data, .. } => Some(data.clone()),
                _ => None,
            })
            .collect()
    }

    /// The offsets of the intact records among `events`.
    pub fn offsets_of(events: &[LogRecord]) -> Vec<u64> {
        events
            .iter()
            .filter_map(|e| match e {
                LogRecord::Record { offset, .. } => Some(*offset),
                _ => None,
            })
            .collect()
    }

    /// Replays a log holding `bytes`, collecting the records.
    pub fn replay_bytes(
        bytes: &[u8],
        mode: WalRecoveryMode,
        is_last_log: bool,
    ) -> Result<(Vec<Vec<u8>>, ReplayOutcome)> {
        let fs = fs_holding(bytes);
        let mut got = Vec::new();
        let outcome = replay(&fs, Path::new(LOG), mode, is_last_log, |r, _| {
            got.push(r.to_vec());
            Ok(())
        })?;
        assert_eq!(outcome.records, got.len() as u64);
        Ok((got, outcome))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::test_support::*;
    use super::*;
    use crate::fs::{CrashMode, MemFs};
    use crate::util::checksum::{crc32c_extend, mask};
    use WalRecoveryMode::*;

    const MODES: [WalRecoveryMode; 4] =
        [TolerateCorruptedTailRecords, AbsoluteConsistency, PointInTime, SkipAnyCorruptedRecords];

    /// Five records that share one block.
    fn small_records() -> Vec<Vec<u8>> {
        (0..5).map(|i| format!("record {i} ").repeat(10).into_bytes()).collect()
    }

    /// Five records of three fragments each.
    fn big_records() -> Vec<Vec<u8>> {
        (0..5u8).map(|i| (0..50_000u32).map(|j| (j as u8) ^ i.wrapping_mul(37)).collect()).collect()
    }

    fn record_offsets(bytes: &[u8]) -> Vec<u64> {
        offsets_of(&read_all(bytes))
    }

    fn flip(bytes: &mut [u8], at: u64) {
        bytes[at as usize] ^= 0x40;
    }

    /// Replay in `mode` keeps `want` (and says whether it stopped).
    fn assert_kept(bytes: &[u8], mode: WalRecoveryMode, last: bool, want: &[Vec<u8>], stop: bool) {
        let (got, outcome) = replay_bytes(bytes, mode, last).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        assert_eq!(got.len(), want.len(), "{mode:?} record count");
        assert!(got == want, "{mode:?} kept the wrong records");
        assert_eq!(outcome.stop_replay, stop, "{mode:?} stop_replay");
    }

    /// Replay in `mode` refuses the log, naming the file and `offset`.
    fn assert_refused(bytes: &[u8], mode: WalRecoveryMode, last: bool, offset: u64) {
        match replay_bytes(bytes, mode, last) {
            Err(Error::Corruption { file, offset: at, .. }) => {
                assert_eq!(file, LOG, "{mode:?}");
                assert_eq!(at, offset, "{mode:?} offset");
            }
            other => panic!("{mode:?}: expected corruption at {offset}, got {other:?}"),
        }
    }

    #[test]
    fn a_clean_log_replays_fully_in_every_mode() {
        for records in [small_records(), big_records(), vec![], vec![vec![]]] {
            let bytes = encode(&records);
            for mode in MODES {
                for last in [true, false] {
                    assert_kept(&bytes, mode, last, &records, false);
                    assert_eq!(replay_bytes(&bytes, mode, last).unwrap().1.corrupted_bytes, 0);
                }
            }
        }
    }

    #[test]
    fn a_torn_tail_is_dropped_unless_absolute_or_not_the_last_log() {
        for records in [small_records(), big_records()] {
            let clean = encode(&records);
            let last = record_offsets(&clean)[4];
            let cuts = [
                last + 3,                       // inside the header
                last + HEADER_SIZE as u64 + 10, // inside the first fragment
                clean.len() as u64 - 1,         // one byte short
            ];
            for cut in cuts {
                let bytes = &clean[..cut as usize];
                let want = &records[..4];
                assert_kept(bytes, TolerateCorruptedTailRecords, true, want, false);
                assert_refused(bytes, TolerateCorruptedTailRecords, false, last);
                assert_refused(bytes, AbsoluteConsistency, true, last);
                assert_kept(bytes, PointInTime, true, want, true);
                assert_kept(bytes, SkipAnyCorruptedRecords, true, want, false);
                for mode in [TolerateCorruptedTailRecords, PointInTime, SkipAnyCorruptedRecords] {
                    assert_eq!(replay_bytes(bytes, mode, true).unwrap().1.corrupted_bytes, cut - last);
                }
            }
        }
    }

    #[test]
    fn a_flipped_byte_in_a_middle_record_is_never_taken_for_a_tail() {
        for records in [small_records(), big_records()] {
            let mut bytes = encode(&records);
            let middle = record_offsets(&bytes)[2];
            flip(&mut bytes, middle + HEADER_SIZE as u64 + 1);
            assert_refused(&bytes, TolerateCorruptedTailRecords, true, middle);
            assert_refused(&bytes, AbsoluteConsistency, true, middle);
            assert_kept(&bytes, PointInTime, true, &records[..2], true);
            let (skipped, outcome) = replay_bytes(&bytes, SkipAnyCorruptedRecords, true).unwrap();
            assert!(outcome.corrupted_bytes > 0 && !outcome.stop_replay);
            assert_eq!(&skipped[..2], &records[..2]);
            if records[0].len() < BLOCK_SIZE {
                // Resynchronisation is at the next block: the records sharing
                // the damaged block are lost with it.
                assert_eq!(skipped.len(), 2);
            } else {
                // Each record starts in a later block than the previous one
                // starts, so only the damaged record is lost.
                assert_eq!(&skipped[2..], &records[3..]);
            }
        }
    }

    #[test]
    fn a_damaged_length_in_a_middle_record_is_never_taken_for_a_tail() {
        // Following the wrong length lands between records, and the next block
        // start is past the end, so only a scan of every offset finds the
        // intact records that follow.
        let records = small_records();
        let clean = encode(&records);
        let middle = record_offsets(&clean)[2];
        for (at, mask) in [(4, 0x01), (4, 0x20), (5, 0x01), (5, 0x80)] {
            let mut bytes = clean.clone();
            bytes[(middle + at) as usize] ^= mask;
            assert_refused(&bytes, TolerateCorruptedTailRecords, true, middle);
            assert_kept(&bytes, PointInTime, true, &records[..2], true);
        }
    }

    #[test]
    fn a_flipped_byte_in_the_last_record_is_a_tail() {
        for records in [small_records(), big_records()] {
            let mut bytes = encode(&records);
            let last = record_offsets(&bytes)[4];
            flip(&mut bytes, last + HEADER_SIZE as u64 + 1);
            let want = &records[..4];
            assert_kept(&bytes, TolerateCorruptedTailRecords, true, want, false);
            assert_refused(&bytes, TolerateCorruptedTailRecords, false, last);
            assert_refused(&bytes, AbsoluteConsistency, true, last);
            assert_kept(&bytes, PointInTime, true, want, true);
            assert_kept(&bytes, SkipAnyCorruptedRecords, true, want, false);
        }
    }

    #[test]
    fn a_flipped_byte_in_a_later_fragment_damages_the_whole_record() {
        let records = big_records();
        let mut bytes = encode(&records);
        let fourth = record_offsets(&bytes)[3];
        // The second fragment of record 3 starts at the next block boundary.
        let second_fragment = (fourth / BLOCK_SIZE as u64 + 1) * BLOCK_SIZE as u64;
        flip(&mut bytes, second_fragment + HEADER_SIZE as u64 + 5);
        assert_refused(&bytes, AbsoluteConsistency, true, fourth);
        assert_refused(&bytes, TolerateCorruptedTailRecords, true, fourth);
        assert_kept(&bytes, PointInTime, true, &records[..3], true);
        let (skipped, _) = replay_bytes(&bytes, SkipAnyCorruptedRecords, true).unwrap();
        assert_eq!(skipped, [&records[..3], &records[4..]].concat());
    }

    #[test]
    fn garbage_appended_is_a_tail() {
        let records = small_records();
        let clean = encode(&records);
        let mut bytes = clean.clone();
        let mut state = 0x1234_5678_u32;
        bytes.extend((0..1000).map(|_| {
            state = state.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (state >> 16) as u8 | 1
        }));
        let end = clean.len() as u64;
        assert_kept(&bytes, TolerateCorruptedTailRecords, true, &records, false);
        assert_refused(&bytes, TolerateCorruptedTailRecords, false, end);
        assert_refused(&bytes, AbsoluteConsistency, true, end);
        assert_kept(&bytes, PointInTime, true, &records, true);
        assert_kept(&bytes, SkipAnyCorruptedRecords, true, &records, false);
        assert_eq!(replay_bytes(&bytes, PointInTime, true).unwrap().1.corrupted_bytes, 1000);
    }

    #[test]
    fn zero_filled_space_at_the_end_is_not_damage() {
        let records = small_records();
        let mut bytes = encode(&records);
        bytes.resize(bytes.len() + 3 * BLOCK_SIZE + 5, 0);
        for mode in MODES {
            assert_kept(&bytes, mode, true, &records, false);
        }
    }

    #[test]
    fn zeros_followed_by_records_are_damage() {
        let records = big_records();
        let mut bytes = encode(&records);
        let third = record_offsets(&bytes)[2] as usize;
        bytes[third..third + 100].fill(0);
        assert_refused(&bytes, AbsoluteConsistency, true, third as u64);
        assert_refused(&bytes, TolerateCorruptedTailRecords, true, third as u64);
        assert_kept(&bytes, PointInTime, true, &records[..2], true);
    }

    /// Raw physical records, for layouts the writer never produces.
    fn physical(kind: u8, payload: &[u8]) -> Vec<u8> {
        let crc = mask(crc32c_extend(crate::util::checksum::crc32c(&[kind]), payload));
        let mut out = crc.to_le_bytes().to_vec();
        out.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        out.push(kind);
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn broken_fragment_sequences_are_damage() {
        let b = physical(1, b"b");
        let cases: Vec<(Vec<u8>, &str)> = vec![
            ([physical(2, b"a"), b.clone()].concat(), "FIRST fragment without LAST"),
            (
                [physical(2, b"a"), physical(2, b"c"), physical(4, b"d"), b.clone()].concat(),
                "FIRST fragment without LAST",
            ),
            ([physical(3, b"m"), b.clone()].concat(), "Middle fragment without FIRST"),
            ([physical(4, b"l"), b.clone()].concat(), "Last fragment without FIRST"),
            ([physical(9, b"?"), b.clone()].concat(), "unknown record type 9"),
        ];
        for (bytes, reason) in cases {
            let events = read_all(&bytes);
            match &events[0] {
                LogRecord::Corrupt { offset: 0, reason: r, tail: false, incomplete: false } => {
                    assert!(r.starts_with(reason), "{r}")
                }
                other => panic!("{reason}: {other:?}"),
            }
            assert_eq!(records_of(&events).last().unwrap(), b"b");
            assert_refused(&bytes, TolerateCorruptedTailRecords, true, 0);
            assert_kept(&bytes, PointInTime, true, &[], true);
        }

        let torn = [b.clone(), physical(2, b"a"), physical(3, b"m")].concat();
        let events = read_all(&torn);
        assert!(matches!(&events[1], LogRecord::Corrupt { offset: 8, tail: true, incomplete: true, .. }), "{events:?}");
        assert_kept(&torn, TolerateCorruptedTailRecords, true, &[b"b".to_vec()], false);
    }

    #[test]
    fn a_length_overrunning_its_block_is_damage() {
        let mut bytes = physical(1, b"abc");
        bytes[4..6].copy_from_slice(&40_000u16.to_le_bytes());
        let events = read_all(&bytes);
        assert!(matches!(&events[0], LogRecord::Corrupt { offset: 0, tail: true, .. }), "{events:?}");
        // Past the end of the file as well: an append cut short, not damage in place.
        assert!(matches!(&events[0], LogRecord::Corrupt { incomplete: true, .. }), "{events:?}");
        let mut inside = bytes.clone();
        inside.resize(BLOCK_SIZE + 10, 0x55);
        let events = read_all(&inside);
        assert!(matches!(&events[0], LogRecord::Corrupt { offset: 0, incomplete: false, .. }), "{events:?}");
    }

    #[test]
    fn only_records_cut_short_by_the_end_of_the_file_are_incomplete() {
        let records: Vec<Vec<u8>> = vec![vec![1; 100], vec![2; 40_000], vec![3; 50]];
        let bytes = test_support::encode(&records);
        // Every truncation inside the last record (a single FULL) is incomplete.
        let last_start = bytes.len() - (50 + HEADER_SIZE);
        for cut in last_start + 1..bytes.len() {
            let events = read_all(&bytes[..cut]);
            let damage = events.iter().find(|e| matches!(e, LogRecord::Corrupt { .. }));
            assert!(
                matches!(damage, Some(LogRecord::Corrupt { incomplete: true, tail: true, .. })),
                "cut at {cut}: {events:?}"
            );
        }
        // Every truncation inside the fragmented record, once its FIRST is complete.
        for cut in (100 + 2 * HEADER_SIZE + 1..last_start).step_by(997) {
            let events = read_all(&bytes[..cut]);
            assert!(
                events.iter().any(|e| matches!(e, LogRecord::Corrupt { incomplete: true, .. })),
                "cut at {cut}: {events:?}"
            );
        }
        // A flipped byte in the last record leaves it all there: not incomplete.
        for at in last_start..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x40;
            let events = read_all(&damaged);
            for e in &events {
                if let LogRecord::Corrupt { incomplete, offset, .. } = e {
                    // A flip in the length field may make the length run past the end.
                    let in_length = at == last_start + 4 || at == last_start + 5;
                    assert!(!incomplete || in_length, "flip at {at}: {events:?}");
                    assert_eq!(*offset, last_start as u64, "flip at {at}: {events:?}");
                }
            }
        }
    }

    #[test]
    fn recovery_after_a_crash_keeps_what_was_synced() {
        let records = small_records();
        for mode in [
            CrashMode::DropUnsynced,
            CrashMode::ZeroTail,
            CrashMode::GarbageTail { seed: 3 },
            CrashMode::KeepRandomPrefix { seed: 1 },
            CrashMode::KeepRandomPrefix { seed: 2 },
            CrashMode::KeepRandomPrefix { seed: 5 },
        ] {
            let fs = MemFs::new();
            fs.create_dir_all(Path::new("/wal")).unwrap();
            let mut w = LogWriter::new(fs.new_writable(Path::new(LOG)).unwrap(), LOG.into());
            fs.sync_dir(Path::new("/wal")).unwrap();
            for r in &records[..3] {
                w.add_record(r).unwrap();
            }
            w.sync().unwrap();
            for r in &records[3..] {
                w.add_record(r).unwrap();
            }
            w.flush().unwrap();
            fs.crash(mode);
            let mut got = Vec::new();
            let outcome = replay(&fs, Path::new(LOG), TolerateCorruptedTailRecords, true, |r, _| {
                got.push(r.to_vec());
                Ok(())
            })
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
            assert!(got.len() >= 3 && got[..] == records[..got.len()], "{mode:?}: {outcome:?}");
            if matches!(mode, CrashMode::DropUnsynced | CrashMode::ZeroTail) {
                assert_eq!(got.len(), 3, "{mode:?}");
                assert_eq!(outcome.corrupted_bytes, 0, "{mode:?}");
            }
        }
    }

    #[test]
    fn callback_and_io_errors_end_replay() {
        let bytes = encode(&small_records());
        let fs = fs_holding(&bytes);
        let err = replay(&fs, Path::new(LOG), PointInTime, true, |_, _| Err(Error::Closed)).unwrap_err();
        assert!(matches!(err, Error::Closed));
        fs.inject(crate::fs::FaultRule::new(crate::fs::FaultOp::Read));
        assert!(matches!(replay(&fs, Path::new(LOG), PointInTime, true, |_, _| Ok(())), Err(Error::Io { .. })));
        assert!(replay(&fs, Path::new("/wal/missing.log"), PointInTime, true, |_, _| Ok(())).is_err());
    }
}
