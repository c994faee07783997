//! The WAL being written: the write-group leader appends each group's
//! record to it, a memtable switch puts a new one in its place (the closed
//! one goes to the sealer, db/wal_seal.rs), `flush_wal` and `close` flush
//! or sync it, a checkpoint copies its length.
//!
//! Invariants:
//! 1. There is a current WAL from the end of recovery until close (none on
//!    a read-only instance): an append without one is `Closed`.
//! 2. A WAL replaced by a switch ends with the end-of-log record (recovery
//!    reads it as whole) and has its buffer written to the file, unless a
//!    call to it failed before (only a resume replaces that one).
//!
//! Thread safety: its own lock, the last in the lock order (the write
//! queue, the db state, then this); held across the WAL's I/O.

use parking_lot::Mutex;

use super::batch::END_OF_LOG;
use crate::error::{Error, Result};
use crate::wal::LogWriter;

/// How far an append goes before it returns.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Durability {
    /// Synced to the disk.
    Sync,
    /// Written to the file (the OS may still lose it in a power loss).
    Flush,
    /// Left in the writer's buffer (`manual_wal_flush`).
    Buffer,
}

/// The WAL being written (the module's invariants).
#[derive(Default)]
pub(crate) struct CurrentWal {
    writer: Mutex<Option<LogWriter>>,
}

impl CurrentWal {
    /// Makes `writer` the current WAL (at the end of recovery).
    pub(crate) fn start(&self, writer: LogWriter) {
        *self.writer.lock() = Some(writer);
    }

    /// Appends one record (a write group's batch).
    pub(crate) fn append(&self, record: &[u8], durability: Durability) -> Result<()> {
        let mut wal = self.writer.lock();
        let w = wal.as_mut().ok_or(Error::Closed)?;
        w.add_record(record)?;
        match durability {
            Durability::Sync => w.sync(),
            Durability::Flush => w.flush(),
            Durability::Buffer => Ok(()),
        }
    }

    /// Syncs the WAL (or, without `sync`, writes its buffer to the file)
    /// once `ready` holds with the WAL locked (switches are then
    /// excluded); `None` when it does not.
    pub(crate) fn flush_when(&self, sync: bool, ready: impl FnOnce() -> bool) -> Option<Result<()>> {
        let mut wal = self.writer.lock();
        if !ready() {
            return None;
        }
        Some(match wal.as_mut() {
            None => Err(Error::Closed),
            Some(w) if sync => w.sync(),
            Some(w) => w.flush(),
        })
    }

    /// Writes the buffer to the file and returns the WAL's length (a
    /// checkpoint copies that much).
    pub(crate) fn flushed_len(&self) -> Result<u64> {
        let mut wal = self.writer.lock();
        let w = wal.as_mut().ok_or(Error::Closed)?;
        w.flush()?;
        Ok(w.file_size())
    }

    /// The WAL's length so far (0 without one).
    pub(crate) fn len(&self) -> u64 {
        self.writer.lock().as_ref().map_or(0, |w| w.file_size())
    }

    /// Puts the WAL `open` makes in place of the current one, with the lock
    /// held throughout; returns the one replaced (invariant 2) and its
    /// length. If marking its end fails, the new WAL is current and the old
    /// writer is dropped with the error.
    pub(crate) fn switch(&self, open: impl FnOnce() -> Result<LogWriter>) -> Result<(Option<LogWriter>, u64)> {
        let mut wal = self.writer.lock();
        let new = open()?;
        // What `manual_wal_flush` buffered goes to the OS with the end
        // mark, as RocksDB flushes at a switch: the old writer is written
        // no more. If that fails, the old WAL stays the current one. A
        // writer that failed before gets no end mark: it refuses every call,
        // and only a resume switches away from it (db/resume.rs), which
        // flushes every write it held to tables and never replays it.
        if let Some(old) = wal.as_mut().filter(|w| !w.has_failed()) {
            old.add_record(&END_OF_LOG)?;
            old.flush()?;
        }
        let old_len = wal.as_ref().map_or(0, |w| w.file_size());
        Ok((wal.replace(new), old_len))
    }

    /// Syncs the WAL, if there is one (at close).
    pub(crate) fn sync(&self) -> Result<()> {
        match self.writer.lock().as_mut() {
            Some(w) => w.sync(),
            None => Ok(()),
        }
    }

    /// Closes the WAL: nothing is appended any more.
    pub(crate) fn close(&self) {
        *self.writer.lock() = None;
    }
}
