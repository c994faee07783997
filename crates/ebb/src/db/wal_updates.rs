//! Reading writes back from the WALs (RocksDB's `GetUpdatesSince` and its
//! `TransactionLogIterator`): every write batch from a given sequence
//! number on, in order, with the sequence number of its first update,
//! from the live WALs and the archived ones (db/wal_archive.rs).
//! docs/operations.md, "WAL tailing".
//!
//! What a reader is promised:
//! 1. The first batch returned holds the sequence number asked for (or is
//!    the first written after it, when asked for the next sequence number
//!    not yet written); each later batch starts where the one before it
//!    ended. A hole, a WAL deleted (not archived, or cleaned from the
//!    archive) or sequence numbers no WAL record holds (writes with
//!    `disable_wal`, ingested files), is an error naming the missing
//!    numbers, never skipped: a replica applying the stream would diverge.
//! 2. The stream ends at the end of what the WALs hold when it is read: a
//!    record still being written (an incomplete last record of the newest
//!    WAL) ends it, and so does, for [`Db::get_updates_since`], a batch
//!    past the last sequence number visible to reads when the stream
//!    began (its writer is still applying it, as RocksDB's iterator stops
//!    at `LastSequence`); the next call, from
//!    [`WalUpdates::next_sequence`], reads them. Damage anywhere else is an
//!    error.
//! 3. WALs are listed once, when the stream starts; a WAL archived while
//!    the stream reads is looked for in the archive.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::wal_archive::{archive_dir, archived_wal};
use super::{Db, WriteBatch};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::key::SequenceNumber;
use crate::options::Options;
use crate::version::filename;
use crate::wal::{LogReader, LogRecord};

/// One write batch read back from a WAL.
#[derive(Debug, Clone)]
pub struct WalUpdate {
    /// The sequence number of its first update.
    pub sequence: SequenceNumber,
    /// The batch as it was written (two-phase commit markers included).
    pub batch: WriteBatch,
}

/// The write batches from a sequence number on: an iterator of
/// [`WalUpdate`]s (see [`Db::get_updates_since`]).
pub struct WalUpdates {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    /// WAL numbers to read, oldest first, from the one to start with.
    files: Vec<u64>,
    next_file: usize,
    reader: Option<LogReader>,
    since: SequenceNumber,
    next_sequence: SequenceNumber,
    started: bool,
    /// The database's last sequence number when the stream began, when
    /// known: asked for one at or below it, a stream that finds nothing
    /// is a hole.
    last_written: Option<SequenceNumber>,
    done: bool,
}

impl std::fmt::Debug for WalUpdates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalUpdates")
            .field("dir", &self.dir)
            .field("files", &self.files)
            .field("next_sequence", &self.next_sequence)
            .finish_non_exhaustive()
    }
}

/// WAL numbers in `dir` (final and pending names) and in its archive,
/// oldest first, each once.
fn list_wals(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<u64>> {
    let mut numbers = Vec::new();
    for place in [dir.to_path_buf(), archive_dir(dir)] {
        if place != dir && !fs.exists(&place) {
            continue;
        }
        for name in fs.list_dir(&place)? {
            if let Some((filename::FileType::Wal, number)) = filename::parse_file_name(&name) {
                numbers.push(number);
            }
        }
    }
    numbers.sort_unstable();
    numbers.dedup();
    Ok(numbers)
}

/// Opens WAL `number` wherever it is now: live, pending or archived.
/// `None` if it is gone.
fn open_wal(fs: &dyn FileSystem, dir: &Path, number: u64) -> Result<Option<LogReader>> {
    let places = [filename::wal_file(dir, number), filename::pending_wal_file(dir, number), archived_wal(dir, number)];
    for path in places {
        match fs.open_sequential(&path) {
            Ok(file) => return Ok(Some(LogReader::new(file, path.display().to_string()))),
            Err(_) if !fs.exists(&path) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(None)
}

/// The sequence number of the first update WAL `number` holds; `None`
/// for a WAL with none (or gone). Damage counts as the end.
fn first_sequence(fs: &dyn FileSystem, dir: &Path, number: u64) -> Result<Option<SequenceNumber>> {
    let Some(mut reader) = open_wal(fs, dir, number)? else { return Ok(None) };
    loop {
        match reader.next()? {
            LogRecord::Record { data, offset } => {
                let batch = WriteBatch::from_data(&data, reader.file_name(), offset)?;
                if batch.applied_cf().next().is_some() {
                    return Ok(Some(batch.sequence()));
                }
            }
            LogRecord::Eof | LogRecord::Corrupt { .. } => return Ok(None),
        }
    }
}

impl WalUpdates {
    /// The batches from `since` on in the WALs of the database directory
    /// `dir` and its archive, read with `options.fs`, without opening the
    /// database (another process may have it open and be writing). A
    /// stream that finds nothing at or after `since` is empty.
    pub fn read_dir(dir: impl AsRef<Path>, options: &Options, since: SequenceNumber) -> Result<WalUpdates> {
        Self::start(Arc::clone(&options.fs), dir.as_ref(), since, None)
    }

    fn start(
        fs: Arc<dyn FileSystem>,
        dir: &Path,
        since: SequenceNumber,
        last_written: Option<SequenceNumber>,
    ) -> Result<WalUpdates> {
        // Sequence numbers start at 1.
        let since = since.max(1);
        let files = list_wals(fs.as_ref(), dir)?;
        // The newest WAL whose first update is at or before `since`; else
        // the oldest, whose first batch then tells how much is missing.
        let mut start = 0;
        for (i, number) in files.iter().enumerate().rev() {
            if first_sequence(fs.as_ref(), dir, *number)?.is_some_and(|first| first <= since) {
                start = i;
                break;
            }
        }
        Ok(WalUpdates {
            fs,
            dir: dir.to_path_buf(),
            files: files[start..].to_vec(),
            next_file: 0,
            reader: None,
            since,
            next_sequence: since,
            started: false,
            last_written,
            done: false,
        })
    }

    /// The sequence number the next batch will start at (where a later
    /// stream picks up after this one ends).
    pub fn next_sequence(&self) -> SequenceNumber {
        self.next_sequence
    }

    fn fail(&mut self, e: Error) -> Option<Result<WalUpdate>> {
        self.done = true;
        Some(Err(e))
    }

    fn hole(&self, found: Option<SequenceNumber>) -> Error {
        let found = match found {
            Some(seq) => format!("the oldest WAL record kept from there starts at {seq}"),
            None => "no WAL record kept holds it".to_string(),
        };
        Error::NotFound(format!(
            "updates since sequence {}: {found}. WALs are deleted once their writes are flushed unless \
             wal_ttl_seconds or wal_size_limit_mb keeps them in {}/; writes made with disable_wal and \
             ingested files have no WAL record",
            self.since,
            super::ARCHIVE_DIR
        ))
    }

    /// The stream ran out of records.
    fn finish(&mut self) -> Option<Result<WalUpdate>> {
        self.done = true;
        if !self.started && self.last_written.is_some_and(|last| self.since <= last) {
            return Some(Err(self.hole(None)));
        }
        None
    }
}

impl Iterator for WalUpdates {
    type Item = Result<WalUpdate>;

    fn next(&mut self) -> Option<Result<WalUpdate>> {
        if self.done {
            return None;
        }
        loop {
            if self.reader.is_none() {
                let Some(&number) = self.files.get(self.next_file) else { return self.finish() };
                self.next_file += 1;
                match open_wal(self.fs.as_ref(), &self.dir, number) {
                    Ok(Some(reader)) => self.reader = Some(reader),
                    // Deleted since listed: before the stream starts it held
                    // nothing asked for (else later records tell the hole);
                    // after, its records are missing.
                    Ok(None) if !self.started => continue,
                    Ok(None) => {
                        let e = Error::NotFound(format!(
                            "updates from sequence {}: WAL {number} was deleted while being read",
                            self.next_sequence
                        ));
                        return self.fail(e);
                    }
                    Err(e) => return self.fail(e),
                }
            }
            let newest = self.next_file >= self.files.len();
            let Some(reader) = self.reader.as_mut() else { continue };
            let step = reader.next();
            let name = reader.file_name().to_string();
            let (data, offset) = match step {
                Ok(LogRecord::Record { data, offset }) => (data, offset),
                Ok(LogRecord::Eof) => {
                    self.reader = None;
                    continue;
                }
                // A record still being written ends the stream (promise 2).
                Ok(LogRecord::Corrupt { incomplete: true, .. }) if newest => {
                    self.reader = None;
                    continue;
                }
                Ok(LogRecord::Corrupt { offset, reason, .. }) => {
                    return self.fail(Error::corruption(&name, offset, reason));
                }
                Err(e) => return self.fail(e),
            };
            // A memtable switch's end mark.
            if data.as_slice() == super::batch::END_OF_LOG {
                continue;
            }
            let batch = match WriteBatch::from_data(&data, &name, offset) {
                Ok(batch) => batch,
                Err(e) => return self.fail(e),
            };
            let span = batch.applied_cf().count() as u64;
            let seq = batch.sequence();
            // A batch in the WAL but not yet visible to reads (its writer is
            // still applying it) is left for the next stream (promise 2).
            if span > 0 && self.last_written.is_some_and(|last| seq > last) {
                self.done = true;
                self.reader = None;
                return self.finish();
            }
            if !self.started {
                // Wholly before `since`, or a switch's end mark.
                if span == 0 || seq.saturating_add(span) <= self.since {
                    continue;
                }
                if seq > self.since {
                    return self.fail(self.hole(Some(seq)));
                }
                self.started = true;
            } else if span > 0 && seq != self.next_sequence {
                let e = Error::NotFound(format!(
                    "the WALs jump from sequence {} to {seq} (in {name} at offset {offset}): writes made with \
                     disable_wal and ingested files have no WAL record",
                    self.next_sequence
                ));
                return self.fail(e);
            }
            if span > 0 {
                self.next_sequence = seq + span;
            }
            return Some(Ok(WalUpdate { sequence: seq, batch }));
        }
    }
}

impl Db {
    /// Every write batch from sequence number `since` on, read from the
    /// WALs (RocksDB's `GetUpdatesSince`): the first batch holds `since`,
    /// each later one starts where the one before ended, and the stream
    /// ends with what the WALs hold now; call again from
    /// [`WalUpdates::next_sequence`] for what follows. WALs whose writes
    /// are flushed are kept only with `wal_ttl_seconds` or
    /// `wal_size_limit_mb` (in `archive/`).
    ///
    /// Errors: `since` beyond the next sequence number to be written
    /// (`InvalidArgument`); writes from `since` that no WAL holds any more,
    /// or a hole in the sequence numbers, `NotFound` saying which (the
    /// iterator yields it); damage in a WAL, `Corruption`.
    pub fn get_updates_since(&self, since: SequenceNumber) -> Result<WalUpdates> {
        self.inner.check_open()?;
        let last = self.inner.last_sequence.get();
        if since > last.saturating_add(1) {
            return Err(Error::invalid(format!(
                "get_updates_since({since}): the last sequence number written is {last}"
            )));
        }
        WalUpdates::start(Arc::clone(&self.inner.fs), &self.inner.dir, since, Some(last))
    }

    /// The sequence number of the last write visible to reads (RocksDB's
    /// `GetLatestSequenceNumber`).
    pub fn latest_sequence_number(&self) -> SequenceNumber {
        self.inner.last_sequence.get()
    }
}
