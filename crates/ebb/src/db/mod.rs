//! The public database handle. (API surface; bodies land with the engine core.)

mod batch;

pub use batch::{BatchIter, BatchOp, WriteBatch};

use std::path::Path;

use crate::error::Result;
use crate::key::SequenceNumber;
use crate::options::{Options, ReadOptions, WriteOptions};

/// Figures about a running database, for programs (the same figures `ebb.stats` prints).
#[derive(Debug, Clone, Default)]
pub struct DbMetrics {
    /// Seconds since open.
    pub uptime_secs: f64,
    /// Write calls (batches) accepted.
    pub user_writes: u64,
    /// Keys written (puts and deletes).
    pub user_keys_written: u64,
    /// Bytes of keys and values written by users.
    pub user_bytes_written: u64,
    /// Bytes appended to the WAL.
    pub wal_bytes: u64,
    /// WAL syncs.
    pub wal_syncs: u64,
    /// Bytes written by flushes.
    pub flush_bytes_written: u64,
    /// Bytes written by compactions (trivial moves excluded).
    pub compaction_bytes_written: u64,
    /// Bytes read by compactions.
    pub compaction_bytes_read: u64,
    /// Microseconds writers spent stalled (slowed or stopped).
    pub stall_micros: u64,
    /// Files per level.
    pub files_per_level: Vec<usize>,
    /// Bytes per level.
    pub bytes_per_level: Vec<u64>,
    /// Estimated bytes compaction must rewrite to bring every level under its target.
    pub pending_compaction_bytes: u64,
    /// Compactions running now.
    pub running_compactions: usize,
    /// Flushes running now.
    pub running_flushes: usize,
    /// False while automatic compaction is disabled (by option or by the tuner).
    pub compaction_enabled: bool,
    /// Block cache hits.
    pub block_cache_hits: u64,
    /// Block cache misses.
    pub block_cache_misses: u64,
    /// Bytes held by all memtables.
    pub memtable_bytes: u64,
}

/// An open database. `Send + Sync`: share it between threads by reference or `Arc`.
pub struct Db {}

/// A consistent read view; reads through it see the database as of its creation.
pub struct Snapshot<'a> {
    db: &'a Db,
    seq: SequenceNumber,
}

impl Snapshot<'_> {
    /// The sequence number this snapshot reads at.
    pub fn sequence(&self) -> SequenceNumber {
        self.seq
    }
    /// Read options that read at this snapshot.
    pub fn read_options(&self) -> ReadOptions {
        ReadOptions { snapshot: Some(self.seq), ..ReadOptions::default() }
    }
    /// Reads `key` as of this snapshot.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.get_opt(key, &self.read_options())
    }
}

/// A cursor over the database (consistent view taken at creation).
pub struct DbIterator<'a> {
    _db: &'a Db,
}

#[allow(missing_docs, unused_variables)]
impl<'a> DbIterator<'a> {
    pub fn valid(&self) -> bool {
        todo!()
    }
    pub fn seek_to_first(&mut self) {
        todo!()
    }
    pub fn seek_to_last(&mut self) {
        todo!()
    }
    pub fn seek(&mut self, key: &[u8]) {
        todo!()
    }
    pub fn seek_for_prev(&mut self, key: &[u8]) {
        todo!()
    }
    pub fn next(&mut self) {
        todo!()
    }
    pub fn prev(&mut self) {
        todo!()
    }
    pub fn key(&self) -> &[u8] {
        todo!()
    }
    pub fn value(&self) -> &[u8] {
        todo!()
    }
    pub fn status(&self) -> Result<()> {
        todo!()
    }
}

#[allow(missing_docs, unused_variables)]
impl Db {
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        todo!()
    }
    pub fn destroy(path: impl AsRef<Path>, options: &Options) -> Result<()> {
        todo!()
    }
    pub fn close(self) -> Result<()> {
        todo!()
    }
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        todo!()
    }
    pub fn put_opt(&self, key: &[u8], value: &[u8], wo: &WriteOptions) -> Result<()> {
        todo!()
    }
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        todo!()
    }
    pub fn delete_opt(&self, key: &[u8], wo: &WriteOptions) -> Result<()> {
        todo!()
    }
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        todo!()
    }
    pub fn write_opt(&self, batch: &WriteBatch, wo: &WriteOptions) -> Result<()> {
        todo!()
    }
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        todo!()
    }
    pub fn get_opt(&self, key: &[u8], ro: &ReadOptions) -> Result<Option<Vec<u8>>> {
        todo!()
    }
    pub fn multi_get(&self, keys: &[&[u8]], ro: &ReadOptions) -> Vec<Result<Option<Vec<u8>>>> {
        todo!()
    }
    pub fn iter(&self, ro: ReadOptions) -> DbIterator<'_> {
        todo!()
    }
    pub fn snapshot(&self) -> Snapshot<'_> {
        todo!()
    }
    pub fn flush(&self, wait: bool) -> Result<()> {
        todo!()
    }
    pub fn flush_wal(&self, sync: bool) -> Result<()> {
        todo!()
    }
    pub fn get_property(&self, name: &str) -> Option<String> {
        todo!()
    }
    pub fn metrics(&self) -> DbMetrics {
        todo!()
    }
    pub fn set_options(&self, changes: &[(&str, &str)]) -> Result<()> {
        todo!()
    }
    pub fn options(&self) -> Options {
        todo!()
    }
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        todo!()
    }
    pub fn wait_for_compact(&self) -> Result<()> {
        todo!()
    }
}
