//! The optimistic transaction database (RocksDB `OptimisticTransactionDB`):
//! transactions take no locks while they run; a commit checks that no key
//! the transaction read for update or wrote was written by another since,
//! and fails with `Busy` when one was.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

use super::transaction::{Begin, Owner, Transaction};
use crate::db::{Db, WriteOptions};
use crate::error::Result;
use crate::options::{ColumnFamilyOptions, Options};

/// How commits of an optimistic database check for conflicts (RocksDB
/// `OccValidationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OccValidationPolicy {
    /// One commit checks and writes at a time.
    ValidateSerial,
    /// Commits whose keys fall in different lock buckets check and write
    /// at once; those sharing a bucket take turns (RocksDB's default).
    #[default]
    ValidateParallel,
}

/// Options of an [`OptimisticTransactionDb`] (RocksDB
/// `OptimisticTransactionDBOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptimisticTransactionDbOptions {
    /// How commits check for conflicts. Default `ValidateParallel`.
    pub validate_policy: OccValidationPolicy,
    /// Lock buckets keys hash to under `ValidateParallel`. Default 2^20, as
    /// RocksDB's.
    pub occ_lock_buckets: usize,
}

impl Default for OptimisticTransactionDbOptions {
    fn default() -> Self {
        OptimisticTransactionDbOptions {
            validate_policy: OccValidationPolicy::ValidateParallel,
            occ_lock_buckets: 1 << 20,
        }
    }
}

/// Options of one optimistic transaction (RocksDB
/// `OptimisticTransactionOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OptimisticTransactionOptions {
    /// Take a snapshot at begin (as [`Transaction::set_snapshot`]): a key
    /// written by another after it fails the commit, even if the
    /// transaction tracked it later. Default false.
    pub set_snapshot: bool,
}

/// A database whose transactions are optimistic (RocksDB
/// `OptimisticTransactionDB`). It is a [`Db`] (through `Deref`): writes
/// made on it directly take part in no transaction, but a transaction
/// that tracked the key they write fails to commit.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use ebb::{OptimisticTransactionDb, OptimisticTransactionDbOptions, OptimisticTransactionOptions, Options, WriteOptions};
/// let mut o = Options::default();
/// o.create_if_missing = true;
/// let db = OptimisticTransactionDb::open(dir.path(), o, OptimisticTransactionDbOptions::default()).unwrap();
/// db.put(b"balance", b"10").unwrap();
/// let mut txn = db.begin_transaction(&WriteOptions::default(), &OptimisticTransactionOptions::default());
/// let balance = txn.get_for_update(b"balance").unwrap();
/// assert_eq!(balance.as_deref(), Some(&b"10"[..]));
/// txn.put(b"balance", b"9").unwrap();
/// // Written by another since the transaction read it: the commit fails.
/// db.put(b"balance", b"20").unwrap();
/// assert!(txn.commit().unwrap_err().is_busy());
/// ```
pub struct OptimisticTransactionDb {
    db: Db,
    policy: OccValidationPolicy,
    buckets: Vec<Mutex<()>>,
    serial: Mutex<()>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for OptimisticTransactionDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OptimisticTransactionDb").field("path", &self.db.path()).field("policy", &self.policy).finish()
    }
}

impl std::ops::Deref for OptimisticTransactionDb {
    type Target = Db;
    fn deref(&self) -> &Db {
        &self.db
    }
}

/// What a commit holds while it checks and writes.
pub(crate) enum CommitHold<'a> {
    Serial(#[allow(dead_code)] MutexGuard<'a, ()>),
    Buckets(#[allow(dead_code)] Vec<MutexGuard<'a, ()>>),
}

impl OptimisticTransactionDb {
    /// Opens (or creates) the database at `path` as [`Db::open`] does.
    /// A `max_write_buffer_size_to_maintain` of 0 becomes -1 (RocksDB's
    /// transaction databases do the same), so that commits can look back
    /// over flushed memtables.
    pub fn open(path: impl AsRef<Path>, options: Options, txn_options: OptimisticTransactionDbOptions) -> Result<Self> {
        Ok(Self::wrap(super::open_db(path.as_ref(), options)?, txn_options))
    }

    /// Opens the database with its column families, as [`Db::open_cf`].
    pub fn open_cf<F>(
        path: impl AsRef<Path>,
        options: Options,
        txn_options: OptimisticTransactionDbOptions,
        families: &[(&str, F)],
    ) -> Result<Self>
    where
        for<'a> &'a F: Into<ColumnFamilyOptions>,
    {
        Ok(Self::wrap(super::open_db_cf(path.as_ref(), options, families)?, txn_options))
    }

    fn wrap(db: Db, o: OptimisticTransactionDbOptions) -> Self {
        let buckets = match o.validate_policy {
            OccValidationPolicy::ValidateParallel => (0..o.occ_lock_buckets.max(1)).map(|_| Mutex::new(())).collect(),
            OccValidationPolicy::ValidateSerial => Vec::new(),
        };
        OptimisticTransactionDb {
            db,
            policy: o.validate_policy,
            buckets,
            serial: Mutex::new(()),
            next_id: AtomicU64::new(1),
        }
    }

    /// The database beneath (RocksDB `GetBaseDB`).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Creates column family `name` as [`Db::create_column_family`], with a
    /// `max_write_buffer_size_to_maintain` of 0 made -1 as at open.
    pub fn create_column_family(
        &self,
        name: &str,
        options: impl Into<ColumnFamilyOptions>,
    ) -> Result<crate::db::ColumnFamilyHandle> {
        super::create_family(&self.db, name, options.into())
    }

    /// Begins a transaction whose commit writes with `wo` (RocksDB
    /// `BeginTransaction`).
    pub fn begin_transaction(&self, wo: &WriteOptions, o: &OptimisticTransactionOptions) -> Transaction<'_> {
        let begin = Begin {
            owner: Owner::Optimistic(self),
            db: &self.db,
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            write_options: *wo,
            set_snapshot: o.set_snapshot,
            lock: None,
            lock_timeout: None,
            deadlock_detect: false,
            deadlock_detect_depth: 0,
        };
        Transaction::begin(begin)
    }

    /// Holds off every other commit whose keys share a lock bucket with
    /// `keys` (all of them under `ValidateSerial`) while a commit checks
    /// and writes.
    pub(crate) fn hold_for_commit<'k>(&self, keys: impl Iterator<Item = (u32, &'k [u8])>) -> CommitHold<'_> {
        if self.buckets.is_empty() {
            return CommitHold::Serial(self.serial.lock());
        }
        let n = self.buckets.len() as u64;
        let mut idx: Vec<usize> = keys
            .map(|(cf, k)| {
                let h = xxhash_rust::xxh3::xxh3_64_with_seed(k, u64::from(cf));
                (h % n) as usize
            })
            .collect();
        // Always in one order, so two commits never wait on each other.
        idx.sort_unstable();
        idx.dedup();
        CommitHold::Buckets(idx.into_iter().map(|i| self.buckets[i].lock()).collect())
    }

    /// Closes the database, as [`Db::close`].
    pub fn close(self) -> Result<()> {
        self.db.close()
    }
}
