//! The public database handle ([`Db`]), its snapshots and iterator
//! modes: the API facade. What it calls is the engine (db/engine.rs: the
//! state shared with the background threads, the lock order and the
//! database's invariants), which is made of owned subsystems, one file
//! each (docs/architecture.md, "Inside `db/`").
//!
//! # Inside `db/`
//!
//! Four tiers, bottom up. A file names (through `super::` paths) only files
//! of the tiers below its own; in tiers 1 and 2, also the files listed
//! before it in its tier; in tier 3, also the other files of tier 3 and the
//! handle's own types in `mod` (`Db` and `Snapshot`, which iterators and
//! read options borrow). The test `tests/layers.rs` reads this list and
//! fails on a file that names one above it, or that is not listed.
//!
//! 1. Helpers, holding no engine state: `info_log`, `sequence`,
//!    `bg_error`, `snapshots`, `blob_cache`, `super_version`,
//!    `column_family`, `batch`, `current_wal`, `wal_archive`.
//! 2. Subsystems, each owning one part of the state under the db mutex,
//!    fields private, invariants in its opening comment: `jobs`,
//!    `memtables`, `files`, `manifest_queue`, `wal_seal`, `write_controller`,
//!    `prepared`.
//! 3. The engine and its operations, methods of `DbInner` that carry out
//!    writes, reads, flushes, compactions and the rest over the subsystems:
//!    `engine`, `job_guard`, `purge`, `version_edits`, `stalls`,
//!    `family_admin`, `write`, `flush`, `bg`, `manual_compaction`,
//!    `close`, `resume`, `recovery`, `properties`, `tuning`, `read`, `iter`.
//! 4. The facade: `mod` (the handle) and the files that add to the
//!    public API: `open`, `backup`, `checkpoint`, `debug`, `ingest`,
//!    `repair`, `secondary`, `ttl`, `metadata`, `delete_files`,
//!    `compact_files`, `wal_updates`, `entities`, `timestamps`.

mod backup;
mod batch;
mod bg;
mod bg_error;
mod blob_cache;
mod checkpoint;
mod close;
mod column_family;
mod compact_files;
mod current_wal;
mod debug;
mod delete_files;
mod engine;
mod entities;
mod family_admin;
mod files;
mod flush;
mod info_log;
mod ingest;
mod iter;
mod job_guard;
mod jobs;
mod manifest_queue;
mod manual_compaction;
mod memtables;
mod metadata;
mod open;
mod prepared;
mod properties;
mod purge;
mod read;
mod recovery;
mod repair;
mod resume;
mod secondary;
mod sequence;
mod snapshots;
mod stalls;
mod super_version;
mod timestamps;
mod ttl;
mod tuning;
mod version_edits;
mod wal_archive;
mod wal_seal;
mod wal_updates;
mod write;
mod write_controller;

pub use crate::events::{
    CompactionJobInfo, ErrorRecoveryInfo, EventListener, FlushJobInfo, RecoveryReport, SetAside, StallCondition,
    TableFileDeletionInfo, TuningEvent, WalDamage, LOST_DIR,
};
pub use crate::version::DEFAULT_COLUMN_FAMILY;
pub use backup::{BackupEngine, BackupEngineOptions, BackupId, BackupInfo, RestoreOptions};
pub(crate) use batch::BatchMark;
pub use batch::{BatchIter, BatchOp, WriteBatch};
pub use checkpoint::{Checkpoint, CheckpointInfo, CheckpointOptions};
pub use column_family::ColumnFamilyHandle;
pub use debug::KeyVersion;
pub use ingest::{ExternalSstFileInfo, IngestExternalFileOptions, SstFileWriter};
pub use iter::{DbIterator, Entries};
pub use metadata::{ColumnFamilyMetaData, LevelMetaData, LiveFileMetaData, SizeApproximationOptions};
pub use properties::DbMetrics;
pub use repair::{RepairReport, RepairedBlobFile, RepairedTable, RepairedWal};
pub use ttl::{TtlDb, TtlIterator, TTL_MARKER};
pub use tuning::TuningMetrics;
pub use wal_archive::ARCHIVE_DIR;
pub use wal_updates::{WalUpdate, WalUpdates};

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::key::SequenceNumber;
use crate::options::{ColumnFamilyOptions, Options};
use crate::sst::PinnableSlice;
use column_family::ColumnFamilyData;
pub(crate) use engine::{next_instance, DbInner, DbState};
pub use read::ReadOptions;
pub(crate) use read::WrittenSince;
pub(crate) use super_version::SuperVersion;
pub use write::WriteOptions;

// The handle and the file metadata its threads share are `Send + Sync`.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Db>();
    send_sync::<crate::version::FileMetaData>();
};

/// An open database. `Send + Sync`: share it between threads by reference or `Arc`.
///
/// Dropping it closes it as [`Db::close`] does, ignoring errors.
pub struct Db {
    pub(crate) inner: Arc<DbInner>,
}

/// A consistent read view; reads through it see the database as of its
/// creation. It cannot outlive the [`Db`] it came from, and read options
/// that read at it ([`ReadOptions::snapshot`]) cannot outlive it.
pub struct Snapshot<'a> {
    db: &'a Db,
    seq: SequenceNumber,
}

impl std::fmt::Debug for Snapshot<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("sequence", &self.seq).finish()
    }
}

impl<'a> Snapshot<'a> {
    /// The sequence number this snapshot reads at.
    pub fn sequence(&self) -> SequenceNumber {
        self.seq
    }
    /// Read options that read at this snapshot (the rest default).
    pub fn read_options(&self) -> ReadOptions<'_> {
        ReadOptions { snapshot: Some(self), ..ReadOptions::default() }
    }
    /// Reads `key` as of this snapshot.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.get_opt(key, &self.read_options())
    }
    /// An iterator over the database as of this snapshot.
    pub fn iter(&self) -> DbIterator<'_> {
        self.db.iter(self.read_options())
    }
}

/// A second hold on the same read view: both read at the same sequence,
/// and the view lasts until both are dropped.
impl Clone for Snapshot<'_> {
    fn clone(&self) -> Self {
        self.db.inner.state.lock().snapshots.acquire(self.seq);
        Snapshot { db: self.db, seq: self.seq }
    }
}

impl Drop for Snapshot<'_> {
    fn drop(&mut self) {
        self.db.inner.state.lock().snapshots.release(self.seq);
    }
}

/// Where a Rust iterator from [`Db::iterator`] starts.
#[derive(Debug, Clone, Copy)]
pub enum IteratorMode<'k> {
    /// From the first key, forwards.
    Start,
    /// From the last key, backwards.
    End,
    /// From `key` (first key `>=` it forwards, or last key `<=` it in reverse).
    From(&'k [u8], Direction),
}

/// Iteration direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Ascending keys.
    Forward,
    /// Descending keys.
    Reverse,
}

impl Db {
    /// Opens (or, with `create_if_missing`, creates) the database at `path`.
    ///
    /// Errors: `Busy` when another handle holds the directory; `InvalidArgument`
    /// for a bad option or a directory that is not a database (without
    /// `create_if_missing`); `Corruption` when the MANIFEST or a WAL is damaged
    /// beyond what `wal_recovery_mode` accepts.
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        refuse_ttl_database(path.as_ref(), &options)?;
        open::open(path.as_ref(), options, &[])
    }

    /// Opens the database at `path` with its column families (RocksDB
    /// `DB::Open` with column family descriptors). Every family the database
    /// has must be listed, as in RocksDB; the default family may be left out
    /// and is configured by `options` (the options given for it in `families`
    /// are ignored). Each other family is configured by the options listed
    /// with it: a [`ColumnFamilyOptions`] (RocksDB's
    /// `ColumnFamilyDescriptor`), or an [`Options`] whose column-family and
    /// table part is taken; the database-wide options come from `options`.
    ///
    /// Errors: `InvalidArgument` naming a family the database has that is not
    /// listed, or a listed family the database does not have; as
    /// [`Db::open`] otherwise.
    pub fn open_cf<F>(path: impl AsRef<Path>, options: Options, families: &[(&str, F)]) -> Result<Db>
    where
        for<'a> &'a F: Into<ColumnFamilyOptions>,
    {
        refuse_ttl_database(path.as_ref(), &options)?;
        let families: Vec<(&str, ColumnFamilyOptions)> = families.iter().map(|(n, o)| (*n, o.into())).collect();
        open::open(path.as_ref(), options, &families)
    }

    /// Opens the database at `path` read-only (RocksDB's `OpenForReadOnly`):
    /// no LOCK is taken, so it may be open in another process (which may
    /// delete files this instance still reads: a read then fails with the
    /// missing file's error), and no file is written, created or deleted.
    /// The WALs are replayed into memtables that are never flushed; no
    /// background work runs. Every change (writes, flushes, compactions,
    /// column-family changes, `set_options`, checkpoints) fails with
    /// [`Error::NotSupported`]. What the instance reads is the database as
    /// it was when opened.
    ///
    /// Errors: `InvalidArgument` for a directory that is not a database, as
    /// [`Db::open`] otherwise.
    pub fn open_read_only(path: impl AsRef<Path>, options: Options) -> Result<Db> {
        let none: [(&str, ColumnFamilyOptions); 0] = [];
        Db::open_cf_read_only(path, options, &none)
    }

    /// [`Db::open_read_only`] with options for column families. Unlike
    /// [`Db::open_cf`], a family need not be listed: those not listed open
    /// with `options`.
    pub fn open_cf_read_only<F>(path: impl AsRef<Path>, options: Options, families: &[(&str, F)]) -> Result<Db>
    where
        for<'a> &'a F: Into<ColumnFamilyOptions>,
    {
        refuse_ttl_database(path.as_ref(), &options)?;
        let families: Vec<(&str, ColumnFamilyOptions)> = families.iter().map(|(n, o)| (*n, o.into())).collect();
        open::open_read_only(path.as_ref(), options, &families)
    }

    /// Rebuilds the MANIFEST of the database at `path` from the tables and
    /// WALs in its directory (LevelDB's and RocksDB's `RepairDB`), for a
    /// database whose MANIFEST or CURRENT is damaged beyond what an open
    /// accepts. Every table that reads back whole is kept, at level 0 of the
    /// column family its properties record; every WAL is turned into tables;
    /// what cannot be used (unreadable tables, the old MANIFESTs, the
    /// converted WALs) is moved to `lost/`, never deleted. The database must
    /// not be open. `options` supplies the filesystem and the table format
    /// of the tables written from WALs. See docs/reliability.md, "Repair".
    ///
    /// Errors: `Busy` when the database is open; `InvalidArgument` when the
    /// directory holds no Ebb files; I/O errors as they come.
    pub fn repair(path: impl AsRef<Path>, options: &Options) -> Result<RepairReport> {
        repair::repair(path.as_ref(), options)
    }

    /// What the open that returned this handle found damaged and left out,
    /// or set aside in `lost/` instead of deleting (docs/reliability.md,
    /// "Damage and what it leads to"). Empty after a clean open. The same
    /// text is the property `ebb.recovery-report` and is in the info log.
    pub fn recovery_report(&self) -> RecoveryReport {
        self.inner.recovery_report.get().cloned().unwrap_or_default()
    }

    /// The names of the column families of the database at `path`, the
    /// default first, read from its MANIFEST (RocksDB
    /// `DB::ListColumnFamilies`). The database need not be closed.
    pub fn list_column_families(path: impl AsRef<Path>, options: &Options) -> Result<Vec<String>> {
        crate::version::list_column_families(path.as_ref(), options.fs.as_ref())
    }

    /// Creates the column family `name`, configured by `options`: a
    /// [`ColumnFamilyOptions`], or an [`Options`] whose column-family and
    /// table part is taken (RocksDB `DB::CreateColumnFamily`). The family
    /// is recorded in the MANIFEST before this returns.
    ///
    /// Errors: `InvalidArgument` when a family of that name exists or the
    /// options are invalid.
    pub fn create_column_family(
        &self,
        name: &str,
        options: impl Into<ColumnFamilyOptions>,
    ) -> Result<ColumnFamilyHandle> {
        self.inner.create_column_family(name, options.into())
    }

    /// Drops a column family (RocksDB `DB::DropColumnFamily`): the drop is
    /// recorded in the MANIFEST, its memtables are discarded, its files are
    /// deleted once no iterator or snapshot read holds them, and operations
    /// through its handles fail from now on.
    ///
    /// Errors: `InvalidArgument` for the default family or a family already dropped.
    pub fn drop_column_family(&self, cf: &ColumnFamilyHandle) -> Result<()> {
        self.inner.drop_column_family(&cf.data)
    }

    /// A handle on the live column family with id `id`.
    pub(crate) fn cf_handle_by_id(&self, id: u32) -> Option<ColumnFamilyHandle> {
        let st = self.inner.state.lock();
        st.families.data(id).map(|data| ColumnFamilyHandle { data })
    }

    /// A handle on the live column family `name`, `None` if there is none.
    pub fn cf_handle(&self, name: &str) -> Option<ColumnFamilyHandle> {
        let st = self.inner.state.lock();
        st.families.find(name).map(|f| ColumnFamilyHandle { data: Arc::clone(f.data()) })
    }

    /// A handle on the default family, without the lookup by name (the
    /// reads of a `WriteBatchWithIndex` in the default family, txn/wbwi.rs).
    pub(crate) fn default_family(&self) -> ColumnFamilyHandle {
        ColumnFamilyHandle { data: Arc::clone(&self.inner.default_cf) }
    }

    /// The names of the live column families, by id (the default first).
    pub fn column_family_names(&self) -> Vec<String> {
        self.inner.state.lock().families.iter().map(|(_, f)| f.data().name.clone()).collect()
    }

    /// Sets `key` to `value` in column family `cf`.
    pub fn put_cf(&self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_cf_opt(cf, key, value, &WriteOptions::default())
    }

    /// Sets `key` to `value` in column family `cf` with write options.
    pub fn put_cf_opt(&self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8], wo: &WriteOptions) -> Result<()> {
        self.inner.check_family(&cf.data)?;
        let mut b = WriteBatch::one_record(cf.id(), key, value);
        b.put_cf(cf, key, value);
        b.validate()?;
        self.inner.write(Some(b), wo, None)
    }

    /// Deletes `key` in column family `cf`.
    pub fn delete_cf(&self, cf: &ColumnFamilyHandle, key: &[u8]) -> Result<()> {
        self.delete_cf_opt(cf, key, &WriteOptions::default())
    }

    /// Deletes `key` in column family `cf` with write options.
    pub fn delete_cf_opt(&self, cf: &ColumnFamilyHandle, key: &[u8], wo: &WriteOptions) -> Result<()> {
        self.inner.check_family(&cf.data)?;
        let mut b = WriteBatch::one_record(cf.id(), key, &[]);
        b.delete_cf(cf, key);
        b.validate()?;
        self.inner.write(Some(b), wo, None)
    }

    /// Reads `key` in column family `cf`.
    pub fn get_cf(&self, cf: &ColumnFamilyHandle, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_cf_opt(cf, key, &ReadOptions::default())
    }

    /// Reads `key` in column family `cf` with read options.
    pub fn get_cf_opt(&self, cf: &ColumnFamilyHandle, key: &[u8], ro: &ReadOptions<'_>) -> Result<Option<Vec<u8>>> {
        self.inner.get_in(&cf.data, key, ro)
    }

    /// A cursor over column family `cf` (a consistent view taken now),
    /// unpositioned. Over a dropped family it is empty and its `status()` is
    /// the error.
    pub fn iter_cf(&self, cf: &ColumnFamilyHandle, ro: ReadOptions<'_>) -> DbIterator<'_> {
        self.inner.new_iterator(&cf.data, ro)
    }

    /// A Rust iterator of `(key, value)` pairs of column family `cf`.
    pub fn iterator_cf(&self, cf: &ColumnFamilyHandle, ro: ReadOptions<'_>, mode: IteratorMode<'_>) -> Entries<'_> {
        position(self.iter_cf(cf, ro), mode)
    }

    /// As [`Db::flush`], for column family `cf`.
    pub fn flush_cf(&self, cf: &ColumnFamilyHandle, wait: bool) -> Result<()> {
        self.inner.check_family(&cf.data)?;
        self.inner.flush_family(cf.data.id, wait)
    }

    /// As [`Db::compact_range`], for column family `cf`.
    pub fn compact_range_cf(&self, cf: &ColumnFamilyHandle, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.check_family(&cf.data)?;
        self.inner.compact_range(cf.data.id, begin, end)
    }

    /// As [`Db::get_property`], for column family `cf`: the per-family
    /// properties (files, levels, memtables, keys) describe that family; the
    /// others are the database's. `None` for an unknown name, a dropped
    /// family or a family of another database.
    pub fn get_property_cf(&self, cf: &ColumnFamilyHandle, name: &str) -> Option<String> {
        if self.inner.check_family(&cf.data).is_err() {
            return None;
        }
        self.inner.property(cf.data.id, name)
    }

    /// Deletes the database at `path` and everything in its directory that
    /// Ebb created. Fails with `Busy` if it is open.
    pub fn destroy(path: impl AsRef<Path>, options: &Options) -> Result<()> {
        open::destroy(path.as_ref(), options)
    }

    /// Closes the database: waits for running writes, syncs the WAL, flushes
    /// memtables holding writes made without the WAL, stops background work.
    /// A reopen recovers every acknowledged write.
    pub fn close(self) -> Result<()> {
        self.inner.close()
    }

    /// Sets `key` to `value`.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// Sets `key` to `value` with write options.
    pub fn put_opt(&self, key: &[u8], value: &[u8], wo: &WriteOptions) -> Result<()> {
        let mut b = WriteBatch::one_record(0, key, value);
        b.put(key, value);
        b.validate()?;
        self.inner.write(Some(b), wo, None)
    }

    /// Deletes `key`.
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// Deletes `key` with write options.
    pub fn delete_opt(&self, key: &[u8], wo: &WriteOptions) -> Result<()> {
        let mut b = WriteBatch::one_record(0, key, &[]);
        b.delete(key);
        b.validate()?;
        self.inner.write(Some(b), wo, None)
    }

    /// Removes `key`, which must have been written by one put since its
    /// last single delete and never deleted with `delete` (RocksDB
    /// `SingleDelete`; otherwise the result is undefined, as there). A
    /// flush or compaction that finds it right above that put, with no
    /// snapshot between them, drops both: the tombstone does not travel to
    /// the bottom level as a deletion's does (docs/data_model.md).
    pub fn single_delete(&self, key: &[u8]) -> Result<()> {
        self.single_delete_opt(key, &WriteOptions::default())
    }

    /// [`Db::single_delete`] with write options.
    pub fn single_delete_opt(&self, key: &[u8], wo: &WriteOptions) -> Result<()> {
        let mut b = WriteBatch::one_record(0, key, &[]);
        b.single_delete(key);
        b.validate()?;
        self.inner.write(Some(b), wo, None)
    }

    /// [`Db::single_delete`] in column family `cf`.
    pub fn single_delete_cf(&self, cf: &ColumnFamilyHandle, key: &[u8]) -> Result<()> {
        self.single_delete_cf_opt(cf, key, &WriteOptions::default())
    }

    /// [`Db::single_delete`] in column family `cf` with write options.
    pub fn single_delete_cf_opt(&self, cf: &ColumnFamilyHandle, key: &[u8], wo: &WriteOptions) -> Result<()> {
        self.inner.check_family(&cf.data)?;
        let mut b = WriteBatch::one_record(cf.id(), key, &[]);
        b.single_delete_cf(cf, key);
        b.validate()?;
        self.inner.write(Some(b), wo, None)
    }

    /// Deletes every key from `begin` (included) to `end` (excluded) in one
    /// write (RocksDB `DeleteRange`): a range tombstone, not one tombstone
    /// per key (docs/data_model.md, "Range deletion"). `begin` after `end`
    /// is an invalid-argument error; an empty range deletes nothing.
    pub fn delete_range(&self, begin: &[u8], end: &[u8]) -> Result<()> {
        self.delete_range_opt(begin, end, &WriteOptions::default())
    }

    /// [`Db::delete_range`] with write options.
    pub fn delete_range_opt(&self, begin: &[u8], end: &[u8], wo: &WriteOptions) -> Result<()> {
        let mut b = WriteBatch::one_record(0, begin, end);
        b.delete_range(begin, end);
        b.validate()?;
        self.inner.write(Some(b), wo, None)
    }

    /// [`Db::delete_range`] in column family `cf`.
    pub fn delete_range_cf(&self, cf: &ColumnFamilyHandle, begin: &[u8], end: &[u8]) -> Result<()> {
        self.delete_range_cf_opt(cf, begin, end, &WriteOptions::default())
    }

    /// [`Db::delete_range`] in column family `cf` with write options.
    pub fn delete_range_cf_opt(
        &self,
        cf: &ColumnFamilyHandle,
        begin: &[u8],
        end: &[u8],
        wo: &WriteOptions,
    ) -> Result<()> {
        self.inner.check_family(&cf.data)?;
        let mut b = WriteBatch::one_record(cf.id(), begin, end);
        b.delete_range_cf(cf, begin, end);
        b.validate()?;
        self.inner.write(Some(b), wo, None)
    }

    /// Applies `value`, a merge operand, to `key`'s value with the default
    /// family's merge operator (RocksDB `Merge`): no read-modify-write; the
    /// operand is combined when the key is read, flushed or compacted
    /// (docs/data_model.md, "Merge"). Refused (invalid argument) when the
    /// family has no merge operator.
    pub fn merge(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.merge_opt(key, value, &WriteOptions::default())
    }

    /// [`Db::merge`] with write options.
    pub fn merge_opt(&self, key: &[u8], value: &[u8], wo: &WriteOptions) -> Result<()> {
        let mut b = WriteBatch::one_record(0, key, value);
        b.merge(key, value);
        b.validate()?;
        self.inner.write(Some(b), wo, None)
    }

    /// [`Db::merge`] in column family `cf`.
    pub fn merge_cf(&self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8]) -> Result<()> {
        self.merge_cf_opt(cf, key, value, &WriteOptions::default())
    }

    /// [`Db::merge`] in column family `cf` with write options.
    pub fn merge_cf_opt(&self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8], wo: &WriteOptions) -> Result<()> {
        self.inner.check_family(&cf.data)?;
        let mut b = WriteBatch::one_record(cf.id(), key, value);
        b.merge_cf(cf, key, value);
        b.validate()?;
        self.inner.write(Some(b), wo, None)
    }

    /// Applies `batch` atomically.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    /// Applies `batch` atomically with write options.
    pub fn write_opt(&self, batch: &WriteBatch, wo: &WriteOptions) -> Result<()> {
        if batch.has_markers() {
            return Err(Error::invalid(
                "the write batch carries two-phase commit markers, which only a transaction database writes",
            ));
        }
        batch.validate()?;
        self.inner.write(Some(batch.clone()), wo, None)
    }

    /// Writes `batch`, taken (the transaction databases', whose batches may
    /// carry two-phase commit markers).
    pub(crate) fn write_owned(&self, batch: WriteBatch, wo: &WriteOptions) -> Result<()> {
        batch.validate()?;
        self.inner.write(Some(batch), wo, None)
    }

    /// Reads `key`.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// Reads `key` with read options. A snapshot of another database in
    /// `ro` is an `InvalidArgument` error.
    pub fn get_opt(&self, key: &[u8], ro: &ReadOptions<'_>) -> Result<Option<Vec<u8>>> {
        self.inner.get_in(&self.inner.default_cf, key, ro)
    }

    /// Reads `key` without copying the value out of its block: a value
    /// found in a table comes back as a [`PinnableSlice`] of the cached
    /// block, whose cache entry stays referenced (not evicted, charged as
    /// pinned) until the slice is dropped (RocksDB's `Get` into a
    /// `PinnableSlice`). Values from memtables and blob files are copies.
    pub fn get_pinned(&self, key: &[u8]) -> Result<Option<PinnableSlice>> {
        self.get_pinned_opt(key, &ReadOptions::default())
    }

    /// [`Db::get_pinned`] with read options.
    pub fn get_pinned_opt(&self, key: &[u8], ro: &ReadOptions<'_>) -> Result<Option<PinnableSlice>> {
        self.inner.get_in(&self.inner.default_cf, key, ro)
    }

    /// [`Db::get_pinned`] in column family `cf`, with read options.
    pub fn get_pinned_cf_opt(
        &self,
        cf: &ColumnFamilyHandle,
        key: &[u8],
        ro: &ReadOptions<'_>,
    ) -> Result<Option<PinnableSlice>> {
        self.inner.get_in(&cf.data, key, ro)
    }

    /// Reads several keys at one consistent point (RocksDB's batched
    /// `MultiGet`: the keys sorted, each table visited once for the keys it
    /// may hold, each data block read once). Answers are in the order of
    /// `keys`; an error fails only the keys it concerns.
    pub fn multi_get(&self, keys: &[&[u8]], ro: &ReadOptions<'_>) -> Vec<Result<Option<Vec<u8>>>> {
        let reads: Vec<(&ColumnFamilyData, &[u8])> = keys.iter().map(|k| (&*self.inner.default_cf, *k)).collect();
        self.multi_get_reads(&reads, ro)
    }

    /// [`Db::multi_get`] across column families: each key read in its
    /// family, all at one sequence.
    pub fn multi_get_cf(
        &self,
        reads: &[(&ColumnFamilyHandle, &[u8])],
        ro: &ReadOptions<'_>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let reads: Vec<(&ColumnFamilyData, &[u8])> = reads.iter().map(|(cf, k)| (&*cf.data, *k)).collect();
        self.multi_get_reads(&reads, ro)
    }

    /// Reads every `(family, key)` at one point: batched, or where keys
    /// carry timestamps (docs/timestamps.md) one by one at one snapshot.
    fn multi_get_reads(
        &self,
        reads: &[(&ColumnFamilyData, &[u8])],
        ro: &ReadOptions<'_>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        if ro.timestamp.is_none() && reads.iter().all(|(cf, _)| cf.cmp.timestamp_size() == 0) {
            return self.inner.multi_get_in(reads, ro);
        }
        self.each_at_one_point(reads, ro, |cf, key, ro| self.inner.get_in(cf, key, ro))
    }

    /// `read` of every `(family, key)` of `reads`, one by one, all at one
    /// point: `ro`'s snapshot, or one taken for the call.
    fn each_at_one_point<T>(
        &self,
        reads: &[(&ColumnFamilyData, &[u8])],
        ro: &ReadOptions<'_>,
        read: impl Fn(&ColumnFamilyData, &[u8], &ReadOptions<'_>) -> T,
    ) -> Vec<T> {
        let taken = ro.snapshot.is_none().then(|| self.snapshot());
        let ro = ReadOptions { snapshot: ro.snapshot.or(taken.as_ref()), ..ro.clone() };
        reads.iter().map(|(cf, key)| read(cf, key, &ro)).collect()
    }

    /// A cursor over the database (a consistent view taken now), unpositioned.
    pub fn iter(&self, ro: ReadOptions<'_>) -> DbIterator<'_> {
        self.inner.new_iterator(&self.inner.default_cf, ro)
    }

    /// A Rust iterator of `(key, value)` pairs in the given mode.
    pub fn iterator(&self, ro: ReadOptions<'_>, mode: IteratorMode<'_>) -> Entries<'_> {
        position(self.iter(ro), mode)
    }

    /// A forward Rust iterator over the keys starting with `prefix`. When the
    /// family's prefix extractor gives keys starting with `prefix` that very
    /// prefix (a `fixed(n)` or `capped(n)` extractor and `n` bytes), the
    /// iterator also skips the tables whose bloom filter lacks it (a bounded
    /// prefix seek, `prefix_same_as_start`).
    pub fn prefix_iterator(&self, prefix: &[u8]) -> Entries<'_> {
        self.prefix_iterator_in(&self.inner.default_cf, prefix)
    }

    /// [`Db::prefix_iterator`] in column family `cf`.
    pub fn prefix_iterator_cf(&self, cf: &ColumnFamilyHandle, prefix: &[u8]) -> Entries<'_> {
        self.prefix_iterator_in(&cf.data, prefix)
    }

    fn prefix_iterator_in(&self, cf: &ColumnFamilyData, prefix: &[u8]) -> Entries<'_> {
        if !cf.cmp.is_bytewise() {
            return self.prefix_iterator_unbounded(cf, prefix);
        }
        // Probed at both ends of the keys starting with `prefix` (an
        // extractor's prefixes are contiguous).
        let extracted = cf.options().prefix_extractor.as_ref().is_some_and(|x| {
            [[prefix, &[0u8][..]].concat(), [prefix, &[0xff; 8][..]].concat()]
                .iter()
                .all(|k| x.in_domain(k) && x.transform(k) == prefix)
        });
        let ro = ReadOptions {
            iterate_lower_bound: Some(prefix.to_vec()),
            iterate_upper_bound: prefix_successor(prefix),
            prefix_same_as_start: extracted,
            ..ReadOptions::default()
        };
        position(self.inner.new_iterator(cf, ro), IteratorMode::From(prefix, Direction::Forward))
    }

    /// [`Db::prefix_iterator`] in an order other than bytewise, where the
    /// keys starting with `prefix` have no bounds to name: from where they
    /// start to the first key without the prefix. In the reverse bytewise
    /// order they start at the last key before `prefix`'s successor
    /// (`prefix` itself comes last); in a user comparator's, at `prefix`
    /// (RocksDB's prefix seek, which assumes the keys extending a prefix
    /// sort after it).
    fn prefix_iterator_unbounded(&self, cf: &ColumnFamilyData, prefix: &[u8]) -> Entries<'_> {
        let mut it = self.inner.new_iterator(cf, ReadOptions::default());
        if cf.cmp.name() == crate::comparator::REVERSE_BYTEWISE_NAME {
            match prefix_successor(prefix) {
                Some(s) => {
                    it.seek(&s);
                    if it.valid() && it.key() == s.as_slice() {
                        it.next();
                    }
                }
                None => it.seek_to_first(),
            }
        } else {
            it.seek(prefix);
        }
        it.into_entries_with_prefix(prefix)
    }

    /// Takes a snapshot: reads through it see the database as of now.
    pub fn snapshot(&self) -> Snapshot<'_> {
        let mut st = self.inner.state.lock();
        let seq = self.inner.last_sequence.get();
        st.snapshots.acquire(seq);
        Snapshot { db: self, seq }
    }

    /// Switches the memtable and flushes it; with `wait`, returns once every
    /// memtable that held data at the call is in an SST.
    pub fn flush(&self, wait: bool) -> Result<()> {
        self.inner.flush_family(0, wait)
    }

    /// Writes buffered WAL records to the file (for `manual_wal_flush`), and
    /// with `sync` makes them durable.
    pub fn flush_wal(&self, sync: bool) -> Result<()> {
        self.inner.flush_wal(sync)
    }

    /// Recovers from the sticky background error without a reopen
    /// (RocksDB `DB::Resume`): every write in a memtable is flushed to a
    /// table, through a new WAL and, when a MANIFEST write failed, a new
    /// MANIFEST; then writes and background work start again. `Ok` at once
    /// when no error is set. A panic, corrupt data, or a failure that may
    /// have left part of a write in a memtable cannot be resumed: that
    /// error is returned and only a reopen ends it. When the recovery
    /// fails (the disk still refuses), its error is returned wrapped in
    /// [`Error::Background`], the old error stays in force, and `resume`
    /// may be called again. Writes made while it runs wait for it.
    /// Listeners hear `on_error_recovery_begin` and `on_error_recovery_end`.
    pub fn resume(&self) -> Result<()> {
        self.inner.resume()
    }

    /// A property's value (`ebb.stats`, `ebb.num-files-at-level<N>`, ...);
    /// `None` for an unknown name.
    pub fn get_property(&self, name: &str) -> Option<String> {
        self.inner.property(0, name)
    }

    /// Figures about the database, for programs.
    pub fn metrics(&self) -> DbMetrics {
        self.inner.metrics()
    }

    /// Changes dynamic options on the open database; the change applies to the
    /// next decision. Unknown or non-dynamic names are refused and nothing changes.
    pub fn set_options(&self, changes: &[(&str, &str)]) -> Result<()> {
        self.inner.set_options(changes)
    }

    /// The options in force now.
    pub fn options(&self) -> Options {
        Options::clone(&self.inner.options.lock())
    }

    /// The options in force for column family `cf` (RocksDB
    /// `GetOptions(cf)`): for the default family, the column-family part of
    /// [`Db::options`].
    pub fn cf_options(&self, cf: &ColumnFamilyHandle) -> ColumnFamilyOptions {
        ColumnFamilyOptions::clone(&cf.data.options())
    }

    /// Compacts every file overlapping `[begin, end]` down to the last level
    /// holding data, then returns.
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.compact_range(0, begin, end)
    }

    /// Waits until no flush or compaction is running or needed. A tuner's
    /// deferral (docs/tuning.md) counts as compaction needed: the call
    /// returns after the deferral has ended (the adaptive and idle tuners
    /// end it within about a probe interval of the writes stopping) and the
    /// catch-up is done, so what it leaves is the compacted tree, as with
    /// `off`. Writes that keep pressing from other threads keep it waiting.
    /// Before it returns it deletes the files the jobs made obsolete that
    /// nothing holds any longer (docs/versions.md, "Obsolete files").
    pub fn wait_for_compact(&self) -> Result<()> {
        self.inner.wait_for_compact()
    }

    /// Stops starting new background jobs (running ones finish) until
    /// [`Db::continue_background_work`]. Calls nest.
    pub fn pause_background_work(&self) {
        let mut st = self.inner.state.lock();
        st.jobs.pause();
        while st.jobs.flushing_or_compacting() {
            self.inner.bg_cv.wait(&mut st);
        }
    }

    /// Cancels every running compaction at its next output-block boundary:
    /// its partial outputs are deleted and its inputs stay as they were.
    /// Automatic compaction may pick the same work again later (set
    /// `disable_auto_compactions` first to prevent that).
    pub fn cancel_compactions(&self) {
        self.inner.state.lock().jobs.cancel_compactions();
    }

    /// Undoes one [`Db::pause_background_work`].
    pub fn continue_background_work(&self) {
        let mut st = self.inner.state.lock();
        st.jobs.resume();
        self.inner.work_cv.notify_all();
    }

    /// The database directory.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.inner.close();
    }
}

/// Positions `it` as `mode` asks and turns it into a Rust iterator.
fn position<'a>(mut it: DbIterator<'a>, mode: IteratorMode<'_>) -> Entries<'a> {
    let reverse = match mode {
        IteratorMode::Start => {
            it.seek_to_first();
            false
        }
        IteratorMode::End => {
            it.seek_to_last();
            true
        }
        IteratorMode::From(k, Direction::Forward) => {
            it.seek(k);
            false
        }
        IteratorMode::From(k, Direction::Reverse) => {
            it.seek_for_prev(k);
            true
        }
    };
    it.into_entries(reverse)
}

/// The smallest key greater than every key with `prefix`, `None` if none.
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut p = prefix.to_vec();
    while let Some(last) = p.pop() {
        if last < 0xff {
            p.push(last + 1);
            return Some(p);
        }
    }
    None
}

/// Refuses to open a database created with a TTL without one: its values
/// end with write times that plain reads would return as data.
fn refuse_ttl_database(path: &Path, options: &Options) -> Result<()> {
    if options.fs.exists(&ttl::marker_path(path)) {
        return Err(Error::invalid(format!(
            "{}: the database was created with a TTL ({TTL_MARKER} file): its values end with write times; \
             open it with Db::open_with_ttl",
            path.display()
        )));
    }
    Ok(())
}
