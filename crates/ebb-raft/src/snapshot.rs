//! The snapshot data format, written and read as a stream.
//!
//! The format (docs/cluster.md, "Snapshot format", with a worked example): one format version
//! byte; the records, each a key and its value as a postcard varint length
//! and the bytes, keys in strictly ascending order; a 12-byte trailer, the
//! number of records (8 bytes big-endian) and the masked CRC-32C of every
//! byte before the trailer (4 bytes big-endian).
//!
//! [`SnapshotWriter`] appends records to a file through a buffer of
//! [`IO_SIZE`] bytes; [`SnapshotReader`] reads them back one at a time
//! through a buffer of the same size (larger only for a record that does
//! not fit in it). Neither holds the whole snapshot: memory is bounded by
//! the buffer and the largest record, whatever the state's size.
//!
//! The reader checks as it goes, and [`SnapshotReader::finish`] checks the
//! end: the version, each record's lengths against Ebb's key and value
//! limits and against the bytes left, the key order, the record count and
//! the checksum. A caller changes nothing until `finish` has passed.

use std::sync::Arc;

use ebb::fs::{RandomAccessFile, WritableFile};

use crate::codec::CodecError;

/// DO NOT CHANGE: on-disk format. The first byte of a snapshot's data.
/// Version 1 (a record count before the records, no checksum) was kept in
/// the database itself and is not read any more.
pub(crate) const SNAPSHOT_FORMAT_VERSION: u8 = 2;

/// DO NOT CHANGE: on-disk format. Bytes after the records: the record
/// count and the checksum.
pub(crate) const TRAILER_LEN: u64 = 8 + 4;

/// Bytes a writer buffers before it appends them, and a reader reads at
/// once: few filesystem calls, little memory.
pub(crate) const IO_SIZE: usize = 1 << 20;

/// Most bytes of a varint of a `u64`: 7 bits a byte.
const MAX_VARINT_LEN: usize = 10;

/// LevelDB's masked CRC (util/crc32c.h `Mask`): a CRC of data that holds
/// CRCs is weak, so the stored one is rotated and offset.
pub(crate) fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// Why snapshot data could not be written or read.
#[derive(Debug)]
pub(crate) enum SnapshotError {
    /// The filesystem (or Ebb) failed.
    Io(ebb::Error),
    /// The data is not a snapshot of this format.
    Format(CodecError),
}

impl std::fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SnapshotError::Io(e) => write!(f, "{e}"),
            SnapshotError::Format(e) => write!(f, "snapshot data: {e}"),
        }
    }
}

impl std::error::Error for SnapshotError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SnapshotError::Io(e) => Some(e),
            SnapshotError::Format(e) => Some(e),
        }
    }
}

impl From<ebb::Error> for SnapshotError {
    fn from(e: ebb::Error) -> Self {
        SnapshotError::Io(e)
    }
}

impl From<CodecError> for SnapshotError {
    fn from(e: CodecError) -> Self {
        SnapshotError::Format(e)
    }
}

fn inconsistent(what: String) -> SnapshotError {
    SnapshotError::Format(CodecError::Inconsistent(what))
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The varint at the start of `bytes` and its length; `None` when `bytes`
/// ends inside it.
fn parse_varint(bytes: &[u8]) -> Result<Option<(u64, usize)>, SnapshotError> {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(MAX_VARINT_LEN) {
        let bits = u64::from(b & 0x7f);
        if i == MAX_VARINT_LEN - 1 && b > 1 {
            return Err(inconsistent("a record length does not fit in 64 bits".into()));
        }
        v |= bits << (7 * i);
        if b & 0x80 == 0 {
            return Ok(Some((v, i + 1)));
        }
    }
    if bytes.len() >= MAX_VARINT_LEN {
        return Err(inconsistent("a record length does not fit in 64 bits".into()));
    }
    Ok(None)
}

/// Writes a snapshot's data into a file, record by record.
pub(crate) struct SnapshotWriter {
    file: Box<dyn WritableFile>,
    buf: Vec<u8>,
    crc: u32,
    records: u64,
    len: u64,
}

impl SnapshotWriter {
    pub(crate) fn new(file: Box<dyn WritableFile>) -> Self {
        let mut buf = Vec::with_capacity(IO_SIZE);
        buf.push(SNAPSHOT_FORMAT_VERSION);
        SnapshotWriter { file, buf, crc: 0, records: 0, len: 0 }
    }

    /// Appends a record; keys must come in strictly ascending order.
    pub(crate) fn push(&mut self, key: &[u8], value: &[u8]) -> ebb::Result<()> {
        put_varint(&mut self.buf, key.len() as u64);
        self.buf.extend_from_slice(key);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(value);
        self.records += 1;
        if self.buf.len() >= IO_SIZE {
            self.flush_buffer()?;
        }
        Ok(())
    }

    fn flush_buffer(&mut self) -> ebb::Result<()> {
        self.crc = crc32c::crc32c_append(self.crc, &self.buf);
        self.file.append(&self.buf)?;
        self.len += self.buf.len() as u64;
        self.buf.clear();
        Ok(())
    }

    /// Appends the trailer and syncs the file; returns its length.
    pub(crate) fn finish(mut self) -> ebb::Result<u64> {
        self.flush_buffer()?;
        let mut trailer = [0u8; TRAILER_LEN as usize];
        trailer[..8].copy_from_slice(&self.records.to_be_bytes());
        trailer[8..].copy_from_slice(&mask(self.crc).to_be_bytes());
        self.file.append(&trailer)?;
        self.file.sync()?;
        Ok(self.len + TRAILER_LEN)
    }
}

/// A record's key and value.
pub(crate) type Record<'a> = (&'a [u8], &'a [u8]);

/// Reads a snapshot's records from a file, checking them (module
/// documentation).
pub(crate) struct SnapshotReader {
    file: Arc<dyn RandomAccessFile>,
    /// Offset in the file of the first byte not yet in `buf`.
    next: u64,
    /// Offset of the trailer: where the records end.
    records_end: u64,
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed.
    at: usize,
    /// CRC of the bytes read so far.
    crc: u32,
    records: u64,
    /// The last key read, for the order check.
    last_key: Vec<u8>,
}

impl SnapshotReader {
    /// Starts reading the `len` bytes of `file`.
    pub(crate) fn open(file: Arc<dyn RandomAccessFile>, len: u64) -> Result<Self, SnapshotError> {
        if len == 0 {
            return Err(CodecError::Empty.into());
        }
        let first = file.read_at(0, 1)?;
        match first.first() {
            None => return Err(inconsistent(format!("snapshot file is empty; {len} bytes were expected"))),
            Some(&SNAPSHOT_FORMAT_VERSION) => {}
            Some(&other) => return Err(CodecError::UnknownVersion(other).into()),
        }
        if len < 1 + TRAILER_LEN {
            return Err(inconsistent(format!("{len} bytes end inside the trailer")));
        }
        Ok(SnapshotReader {
            file,
            next: 1,
            records_end: len - TRAILER_LEN,
            buf: Vec::new(),
            at: 0,
            crc: crc32c::crc32c(&first),
            records: 0,
            last_key: Vec::new(),
        })
    }

    /// Reads until `buf` holds `n` unconsumed bytes, or the records end
    /// (then false). May move the unconsumed bytes to the front of `buf`.
    fn fill(&mut self, n: usize) -> Result<bool, SnapshotError> {
        while self.buf.len() - self.at < n {
            let left = self.records_end - self.next;
            if left == 0 {
                return Ok(false);
            }
            if self.at > 0 {
                self.buf.drain(..self.at);
                self.at = 0;
            }
            let want = (n - self.buf.len()).max(IO_SIZE);
            let want = usize::try_from(left).map_or(want, |left| want.min(left));
            let start = self.buf.len();
            let got = self.file.read_at_append(self.next, want, &mut self.buf)?;
            if got == 0 {
                return Err(inconsistent(format!("the file ends at byte {}, before its trailer", self.next)));
            }
            self.crc = crc32c::crc32c_append(self.crc, &self.buf[start..]);
            self.next += got as u64;
        }
        Ok(true)
    }

    /// The varint at `offset` bytes past the unconsumed start, and its
    /// length. The bytes before it must be in `buf` already.
    fn varint_at(&mut self, offset: usize) -> Result<(u64, usize), SnapshotError> {
        self.fill(offset + MAX_VARINT_LEN)?;
        match parse_varint(&self.buf[self.at + offset..])? {
            Some(v) => Ok(v),
            None => Err(inconsistent(format!("record {} is cut short", self.records))),
        }
    }

    /// The next record, `None` after the last; its key and value stay
    /// valid until the next call.
    pub(crate) fn next_record(&mut self) -> Result<Option<Record<'_>>, SnapshotError> {
        if !self.fill(1)? {
            return Ok(None);
        }
        let record = self.records;
        let cut = || inconsistent(format!("record {record} is cut short"));
        let (key_len, key_varint) = self.varint_at(0)?;
        if key_len > ebb::MAX_KEY_SIZE as u64 {
            return Err(inconsistent(format!(
                "record {record} has a key of {key_len} bytes (at most {})",
                ebb::MAX_KEY_SIZE
            )));
        }
        let key_end = key_varint + key_len as usize;
        if !self.fill(key_end)? {
            return Err(cut());
        }
        let (value_len, value_varint) = self.varint_at(key_end)?;
        if value_len >= ebb::MAX_VALUE_SIZE as u64 {
            return Err(inconsistent(format!(
                "record {record} has a value of {value_len} bytes (under {})",
                ebb::MAX_VALUE_SIZE
            )));
        }
        let value_start = key_end + value_varint;
        let end = value_start + value_len as usize;
        if !self.fill(end)? {
            return Err(cut());
        }
        let bytes = &self.buf[self.at..self.at + end];
        let key = &bytes[key_varint..key_end];
        if record > 0 && key <= self.last_key.as_slice() {
            return Err(inconsistent(format!("record {record}'s key is not after the key before it")));
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.at += end;
        self.records += 1;
        let bytes = &self.buf[self.at - end..self.at];
        Ok(Some((&bytes[key_varint..key_end], &bytes[value_start..])))
    }

    /// The key of the last record read (empty before the first).
    pub(crate) fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Checks the trailer against the records read (all of them must have
    /// been); returns their number.
    pub(crate) fn finish(self) -> Result<u64, SnapshotError> {
        if self.next != self.records_end || self.at != self.buf.len() {
            return Err(inconsistent("records were left unread".into()));
        }
        let trailer = self.file.read_at(self.records_end, TRAILER_LEN as usize)?;
        let (count, crc) = match (trailer.get(..8), trailer.get(8..12)) {
            (Some(count), Some(crc)) if trailer.len() == TRAILER_LEN as usize => (count, crc),
            _ => return Err(inconsistent(format!("the trailer is cut short ({} bytes)", trailer.len()))),
        };
        let count = u64::from_be_bytes(count.try_into().map_err(|_| inconsistent("trailer".into()))?);
        let crc = u32::from_be_bytes(crc.try_into().map_err(|_| inconsistent("trailer".into()))?);
        if count != self.records {
            return Err(inconsistent(format!("{} records, the trailer says {count}", self.records)));
        }
        if crc != mask(self.crc) {
            return Err(inconsistent("checksum mismatch".into()));
        }
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use ebb::fs::{FileSystem, MemFs};

    use super::*;

    type OwnedRecords = Vec<(Vec<u8>, Vec<u8>)>;

    fn write(fs: &MemFs, records: &[(&[u8], &[u8])]) -> Vec<u8> {
        let path = Path::new("/snap");
        let mut w = SnapshotWriter::new(fs.new_writable(path).unwrap());
        for (k, v) in records {
            w.push(k, v).unwrap();
        }
        let len = w.finish().unwrap();
        let data = fs.file_bytes(path).unwrap();
        assert_eq!(data.len() as u64, len);
        data
    }

    fn read(data: &[u8]) -> Result<OwnedRecords, SnapshotError> {
        let fs = MemFs::new();
        let path = Path::new("/read");
        fs.set_file_bytes(path, data).unwrap();
        let mut r = SnapshotReader::open(fs.open_random(path).unwrap(), data.len() as u64)?;
        let mut out = Vec::new();
        while let Some((k, v)) = r.next_record()? {
            out.push((k.to_vec(), v.to_vec()));
        }
        assert_eq!(r.finish()?, out.len() as u64);
        Ok(out)
    }

    #[test]
    fn records_round_trip() {
        let big_value = vec![7u8; 3 * IO_SIZE + 5];
        let records: Vec<(&[u8], &[u8])> =
            vec![(b"", b"empty key"), (b"k", b""), (&[0xfe; 300], &big_value), (&[0xff; 2], &[1; 1000])];
        let data = write(&MemFs::new(), &records);
        let read = read(&data).unwrap();
        let expected: Vec<(Vec<u8>, Vec<u8>)> = records.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        assert_eq!(read, expected);
    }

    #[test]
    fn an_empty_snapshot_is_a_version_and_a_trailer() {
        let data = write(&MemFs::new(), &[]);
        let crc = mask(crc32c::crc32c(&[SNAPSHOT_FORMAT_VERSION])).to_be_bytes();
        let mut expected = vec![SNAPSHOT_FORMAT_VERSION, 0, 0, 0, 0, 0, 0, 0, 0];
        expected.extend_from_slice(&crc);
        assert_eq!(data, expected);
        assert!(read(&data).unwrap().is_empty());
    }

    #[test]
    fn the_worked_example_of_the_documentation() {
        let data = write(&MemFs::new(), &[(b"ab", b"xyz"), (b"k", b"v")]);
        assert_eq!(&data[..12], &[0x02, 0x02, 0x61, 0x62, 0x03, 0x78, 0x79, 0x7a, 0x01, 0x6b, 0x01, 0x76]);
        assert_eq!(&data[12..20], &[0, 0, 0, 0, 0, 0, 0, 2]);
        assert_eq!(crc32c::crc32c(&data[..12]), 0xad1c_3055);
        assert_eq!(data[20..], [0x03, 0x2e, 0x45, 0x10], "masked");
    }

    #[test]
    fn damaged_data_is_refused() {
        let data = write(&MemFs::new(), &[(b"a", b"1"), (b"b", b"2")]);
        let refused = |case: &str, bytes: &[u8]| {
            let e = read(bytes).expect_err(case);
            assert!(matches!(e, SnapshotError::Format(_)), "{case}: {e}");
        };
        refused("empty", &[]);
        refused("only the version", &data[..1]);
        refused("cut in the trailer", &data[..data.len() - 1]);
        refused("cut in a record", &[&data[..4], &data[data.len() - 12..]].concat());
        refused("a record missing", &[&data[..5], &data[data.len() - 12..]].concat());
        let mut longer = data.clone();
        longer.push(0);
        refused("a byte left over", &longer);
        let mut version = data.clone();
        version[0] = 9;
        assert!(matches!(read(&version), Err(SnapshotError::Format(CodecError::UnknownVersion(9)))));
        let mut flipped = data.clone();
        flipped[4] ^= 1;
        refused("a value byte changed", &flipped);
        let mut count = data.clone();
        count[data.len() - 5] = 3;
        refused("the count changed", &count);
        let mut huge = vec![SNAPSHOT_FORMAT_VERSION];
        huge.extend_from_slice(&[0xff; 12]);
        huge.extend_from_slice(&[0; 12]);
        refused("a length over 64 bits", &huge);
        let mut over = vec![SNAPSHOT_FORMAT_VERSION];
        put_varint(&mut over, ebb::MAX_KEY_SIZE as u64 + 1);
        over.extend_from_slice(&[0; 12]);
        refused("a key over Ebb's limit", &over);
    }

    #[test]
    fn keys_out_of_order_are_refused() {
        let data = write(&MemFs::new(), &[(b"b", b"1"), (b"a", b"2")]);
        assert!(matches!(read(&data), Err(SnapshotError::Format(_))));
        let data = write(&MemFs::new(), &[(b"a", b"1"), (b"a", b"2")]);
        assert!(matches!(read(&data), Err(SnapshotError::Format(_))), "a key twice");
    }
}
