//! The pessimistic transaction database (RocksDB `TransactionDB`, write
//! policy WRITE_COMMITTED): a transaction locks each key it writes or reads
//! for update, waiting up to its lock timeout for another's lock, so its
//! commit cannot conflict; its writes reach the memtables only at commit.
//! Two-phase commit: a named transaction may be prepared (its writes logged
//! to the WAL, not applied) and later committed or rolled back, also after
//! a crash.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::lock_manager::{DeadlockPath, KeyLockInfo, LockManager, LockRequest, TxnLockState};
use super::transaction::{Begin, Owner, Transaction};
use crate::db::{BatchOp, ColumnFamilyHandle, Db, WriteBatch, WriteOptions};
use crate::error::{Error, Result};
use crate::options::{ColumnFamilyOptions, Options};

/// Options of a [`TransactionDb`] (RocksDB `TransactionDBOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionDbOptions {
    /// Keys each column family may have locked at once; a lock past it
    /// fails with `Busy`. -1 (the default): no limit.
    pub max_num_locks: i64,
    /// Stripes of each family's lock table (lock table mutexes). Default 16.
    pub num_stripes: usize,
    /// Milliseconds a transaction waits for a lock when its own options
    /// leave `lock_timeout` at -1; negative waits without limit. Default
    /// 1000.
    pub transaction_lock_timeout: i64,
    /// Milliseconds a write made on the database directly (not in a
    /// transaction) waits for each lock; negative waits without limit.
    /// Default 1000.
    pub default_lock_timeout: i64,
    /// Deadlocks kept for [`TransactionDb::get_deadlock_info_buffer`].
    /// Default 5.
    pub max_num_deadlocks: usize,
}

impl Default for TransactionDbOptions {
    fn default() -> Self {
        TransactionDbOptions {
            max_num_locks: -1,
            num_stripes: 16,
            transaction_lock_timeout: 1000,
            default_lock_timeout: 1000,
            max_num_deadlocks: 5,
        }
    }
}

/// Options of one pessimistic transaction (RocksDB `TransactionOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionOptions {
    /// Take a snapshot at begin (as [`Transaction::set_snapshot`]). Default
    /// false.
    pub set_snapshot: bool,
    /// Look for a deadlock before waiting for a lock, and fail with
    /// [`Error::Deadlock`] on one. Default false.
    pub deadlock_detect: bool,
    /// How far along the waits the search for a deadlock goes; past it the
    /// wait counts as a deadlock too. Default 50.
    pub deadlock_detect_depth: i64,
    /// Milliseconds to wait for a lock: -1 (the default) takes the
    /// database's `transaction_lock_timeout`; 0 does not wait.
    pub lock_timeout: i64,
    /// Milliseconds after begin past which another transaction may take
    /// this one's locks, which then cannot commit (`Expired`); -1 (the
    /// default) never.
    pub expiration: i64,
}

impl Default for TransactionOptions {
    fn default() -> Self {
        TransactionOptions {
            set_snapshot: false,
            deadlock_detect: false,
            deadlock_detect_depth: 50,
            lock_timeout: -1,
            expiration: -1,
        }
    }
}

/// A prepared transaction found in the WAL at open, its keys locked.
struct Recovered {
    batch: WriteBatch,
    lock: Arc<TxnLockState>,
    keys: Vec<(u32, Vec<u8>)>,
}

/// A database whose transactions lock what they touch (RocksDB
/// `TransactionDB`, WRITE_COMMITTED). It is a [`Db`] (through `Deref`);
/// its own `put`, `delete`, `single_delete`, `merge` and `write` lock the
/// keys they write as a transaction would, and wait for transactions
/// holding them. What it does not wrap (`delete_range`, ingestion, and
/// [`TransactionDb::db`]'s writes) takes no lock, as in RocksDB.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use ebb::{Options, TransactionDb, TransactionDbOptions, TransactionOptions, WriteOptions};
/// let mut o = Options::default();
/// o.create_if_missing = true;
/// let db = TransactionDb::open(dir.path(), o, TransactionDbOptions::default()).unwrap();
/// let mut a = db.begin_transaction(&WriteOptions::default(), &TransactionOptions::default());
/// a.put(b"k", b"from a").unwrap();
/// // `k` is locked by `a`: another transaction waits, here not at all.
/// let mut b = db.begin_transaction(
///     &WriteOptions::default(),
///     &TransactionOptions { lock_timeout: 0, ..TransactionOptions::default() },
/// );
/// assert!(b.put(b"k", b"from b").unwrap_err().is_timed_out());
/// a.commit().unwrap();
/// b.put(b"k", b"from b").unwrap();
/// b.commit().unwrap();
/// assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"from b"[..]));
/// ```
pub struct TransactionDb {
    db: Db,
    options: TransactionDbOptions,
    locks: LockManager,
    next_id: AtomicU64,
    /// Names of live named transactions (two-phase commit).
    names: Mutex<HashSet<Vec<u8>>>,
    /// Prepared transactions found at open and not yet taken.
    recovered: Mutex<BTreeMap<Vec<u8>, Recovered>>,
}

impl std::fmt::Debug for TransactionDb {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionDb").field("path", &self.db.path()).field("options", &self.options).finish()
    }
}

impl std::ops::Deref for TransactionDb {
    type Target = Db;
    fn deref(&self) -> &Db {
        &self.db
    }
}

/// A lock timeout in RocksDB's milliseconds: negative waits forever.
fn timeout(ms: i64) -> Option<Duration> {
    u64::try_from(ms).ok().map(Duration::from_millis)
}

impl TransactionDb {
    /// Opens (or creates) the database at `path` as [`Db::open`] does,
    /// with a `max_write_buffer_size_to_maintain` of 0 made -1 (as
    /// RocksDB's `TransactionDB::Open`), so that a transaction with a
    /// snapshot can check what was written since over flushed memtables.
    /// Transactions found prepared in the WAL are recovered with their
    /// keys locked: [`TransactionDb::get_all_prepared_transactions`].
    pub fn open(path: impl AsRef<Path>, options: Options, txn_options: TransactionDbOptions) -> Result<Self> {
        Self::wrap(super::open_db(path.as_ref(), options)?, txn_options)
    }

    /// Opens the database with its column families, as [`Db::open_cf`].
    pub fn open_cf<F>(
        path: impl AsRef<Path>,
        options: Options,
        txn_options: TransactionDbOptions,
        families: &[(&str, F)],
    ) -> Result<Self>
    where
        for<'a> &'a F: Into<ColumnFamilyOptions>,
    {
        Self::wrap(super::open_db_cf(path.as_ref(), options, families)?, txn_options)
    }

    fn wrap(db: Db, o: TransactionDbOptions) -> Result<Self> {
        if o.num_stripes == 0 {
            return Err(Error::invalid("num_stripes must be at least 1"));
        }
        let max_locks = usize::try_from(o.max_num_locks).ok();
        let clock = db.options().clock.clone();
        let locks = LockManager::new(o.num_stripes, max_locks, o.max_num_deadlocks, clock);
        let tdb = TransactionDb {
            db,
            options: o,
            locks,
            next_id: AtomicU64::new(1),
            names: Mutex::new(HashSet::new()),
            recovered: Mutex::new(BTreeMap::new()),
        };
        tdb.recover_prepared()?;
        Ok(tdb)
    }

    /// Takes the prepared transactions recovery found: each locks its keys
    /// again (RocksDB does) and waits to be committed or rolled back.
    fn recover_prepared(&self) -> Result<()> {
        for (name, record) in self.db.inner.prepared.records() {
            let batch = WriteBatch::from_data(&record, "WAL", 0)?;
            let data = updates_of(&batch)?;
            let lock = TxnLockState::new(self.next_id.fetch_add(1, Ordering::Relaxed), None);
            let mut keys: Vec<(u32, Vec<u8>)> = data
                .iter_cf()
                .filter_map(|op| op.ok())
                .filter_map(|(cf, op)| op_key(&op).map(|k| (cf, k.to_vec())))
                .collect();
            keys.sort();
            keys.dedup();
            let req = LockRequest {
                txn: &lock,
                timeout: Some(Duration::ZERO),
                deadlock_detect: false,
                deadlock_detect_depth: 0,
            };
            // Two prepared transactions never hold one key (each locked it
            // until it finished); should the WAL say otherwise, the second
            // goes without that lock rather than keep the database shut.
            keys.retain(|(cf, key)| self.locks.lock(&req, *cf, key, true).is_ok());
            self.names.lock().insert(name.clone());
            self.recovered.lock().insert(name, Recovered { batch: data, lock, keys });
        }
        Ok(())
    }

    /// The database beneath (RocksDB `GetBaseDB`): its writes take no lock.
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// The options the database was opened with.
    pub fn transaction_db_options(&self) -> TransactionDbOptions {
        self.options
    }

    pub(crate) fn locks(&self) -> &LockManager {
        &self.locks
    }

    /// Begins a transaction whose commit writes with `wo` (RocksDB
    /// `BeginTransaction`).
    pub fn begin_transaction(&self, wo: &WriteOptions, o: &TransactionOptions) -> Transaction<'_> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let expires_at = u64::try_from(o.expiration)
            .ok()
            .map(|ms| self.db.options().clock.now_micros().saturating_add(ms.saturating_mul(1000)));
        let lock_timeout =
            if o.lock_timeout == -1 { timeout(self.options.transaction_lock_timeout) } else { timeout(o.lock_timeout) };
        Transaction::begin(Begin {
            owner: Owner::Pessimistic(self),
            db: &self.db,
            id,
            write_options: *wo,
            set_snapshot: o.set_snapshot,
            lock: Some(TxnLockState::new(id, expires_at)),
            lock_timeout,
            deadlock_detect: o.deadlock_detect,
            deadlock_detect_depth: usize::try_from(o.deadlock_detect_depth).unwrap_or(0),
        })
    }

    /// Reserves `name` for a transaction: not in use by a live or prepared
    /// transaction.
    pub(crate) fn register_name(&self, name: &[u8]) -> Result<()> {
        let mut names = self.names.lock();
        if names.contains(name) || self.db.inner.prepared.contains(name) {
            return Err(Error::invalid(format!(
                "transaction name '{}' is in use by another transaction, live or prepared",
                String::from_utf8_lossy(name)
            )));
        }
        names.insert(name.to_vec());
        Ok(())
    }

    pub(crate) fn unregister_name(&self, name: &[u8]) {
        self.names.lock().remove(name);
    }

    /// The transactions found prepared in the WAL at open and not taken
    /// yet (RocksDB `GetAllPreparedTransactions`), each in the prepared
    /// state with its keys locked: commit or roll back each. Taken once:
    /// a second call returns those not taken since. A prepared transaction
    /// left alone stays prepared, and is found again at the next open.
    pub fn get_all_prepared_transactions(&self) -> Vec<Transaction<'_>> {
        let taken = std::mem::take(&mut *self.recovered.lock());
        taken
            .into_iter()
            .filter_map(|(name, r)| {
                let begin = Begin {
                    owner: Owner::Pessimistic(self),
                    db: &self.db,
                    id: r.lock.id(),
                    write_options: WriteOptions { sync: true, disable_wal: false },
                    set_snapshot: false,
                    lock: Some(Arc::clone(&r.lock)),
                    lock_timeout: timeout(self.options.transaction_lock_timeout),
                    deadlock_detect: false,
                    deadlock_detect_depth: 0,
                };
                // The name stays registered: the transaction now holds it.
                match Transaction::recovered(begin, name.clone(), &r.batch, r.keys) {
                    Ok(t) => Some(t),
                    Err(_) => {
                        // Not a batch transactions write: left prepared.
                        self.recovered
                            .lock()
                            .insert(name, Recovered { batch: r.batch, lock: r.lock, keys: Vec::new() });
                        None
                    }
                }
            })
            .collect()
    }

    /// The names of the transactions prepared and not yet committed or
    /// rolled back, live or recovered.
    pub fn prepared_transaction_names(&self) -> Vec<Vec<u8>> {
        self.db.inner.prepared.records().into_iter().map(|(n, _)| n).collect()
    }

    /// Every key locked now, by column family id (RocksDB
    /// `GetLockStatusData`).
    pub fn get_lock_status_data(&self) -> Vec<(u32, KeyLockInfo)> {
        self.locks.status()
    }

    /// The deadlocks found lately, newest first (RocksDB
    /// `GetDeadlockInfoBuffer`).
    pub fn get_deadlock_info_buffer(&self) -> Vec<DeadlockPath> {
        self.locks.deadlock_info()
    }

    /// Keeps the newest `n` deadlocks (RocksDB `SetDeadlockInfoBufferSize`).
    pub fn set_deadlock_info_buffer_size(&self, n: usize) {
        self.locks.set_deadlock_info_buffer_size(n);
    }

    /// A property of the database, as [`Db::get_property`], and those of
    /// its locks: `ebb.txn.num-locks` (keys locked now),
    /// `ebb.txn.lock-waits` (waits for a lock begun), `ebb.txn.lock-timeouts`,
    /// `ebb.txn.deadlocks` (found), `ebb.txn.locks-stolen` (from expired
    /// transactions), `ebb.txn.num-prepared` (transactions prepared, not
    /// finished).
    pub fn get_property(&self, name: &str) -> Option<String> {
        let c = self.locks.counters();
        let v = match name {
            "ebb.txn.num-locks" => c.locks,
            "ebb.txn.lock-waits" => c.waits,
            "ebb.txn.lock-timeouts" => c.timeouts,
            "ebb.txn.deadlocks" => c.deadlocks,
            "ebb.txn.locks-stolen" => c.stolen,
            "ebb.txn.num-prepared" => self.db.inner.prepared.records().len() as u64,
            _ => return self.db.get_property(name),
        };
        Some(v.to_string())
    }

    /// Creates column family `name` as [`Db::create_column_family`], with a
    /// `max_write_buffer_size_to_maintain` of 0 made -1 as at open.
    pub fn create_column_family(
        &self,
        name: &str,
        options: impl Into<ColumnFamilyOptions>,
    ) -> Result<ColumnFamilyHandle> {
        super::create_family(&self.db, name, options.into())
    }

    /// Drops a column family as [`Db::drop_column_family`]; its locks go.
    pub fn drop_column_family(&self, cf: &ColumnFamilyHandle) -> Result<()> {
        self.db.drop_column_family(cf)?;
        self.locks.drop_family(cf.id());
        Ok(())
    }

    // ---- Writes outside transactions, locked ----

    /// Applies `batch` atomically, first locking every key it writes (in
    /// one order, so two such writes never deadlock), waiting up to
    /// `default_lock_timeout` for each (RocksDB `TransactionDB::Write`).
    /// A range deletion in it is `NotSupported`: it would lock no key.
    pub fn write_opt(&self, batch: &WriteBatch, wo: &WriteOptions) -> Result<()> {
        let mut keys: Vec<(u32, &[u8])> = Vec::with_capacity(batch.len());
        for op in batch.iter_cf() {
            let (cf, op) = op.map_err(Error::invalid)?;
            match op_key(&op) {
                Some(k) => keys.push((cf, k)),
                None => {
                    return Err(Error::NotSupported(
                        "a range deletion in a batch written through a transaction database: it would lock no key; \
                         use delete_range, which takes no lock"
                            .into(),
                    ))
                }
            }
        }
        keys.sort_unstable();
        keys.dedup();
        let lock = TxnLockState::new(self.next_id.fetch_add(1, Ordering::Relaxed), None);
        let req = LockRequest {
            txn: &lock,
            timeout: timeout(self.options.default_lock_timeout),
            deadlock_detect: false,
            deadlock_detect_depth: 0,
        };
        let mut held = 0;
        let mut result = Ok(());
        for (cf, key) in &keys {
            if let Err(e) = self.locks.lock(&req, *cf, key, true) {
                result = Err(e);
                break;
            }
            held += 1;
        }
        if result.is_ok() {
            result = self.db.write_opt(batch, wo);
        }
        self.locks.unlock_all(lock.id(), keys[..held].iter().copied());
        result
    }

    /// [`TransactionDb::write_opt`] with default write options.
    pub fn write(&self, batch: &WriteBatch) -> Result<()> {
        self.write_opt(batch, &WriteOptions::default())
    }

    fn one(&self, wo: &WriteOptions, fill: impl FnOnce(&mut WriteBatch)) -> Result<()> {
        let mut b = WriteBatch::new();
        fill(&mut b);
        self.write_opt(&b, wo)
    }

    /// Sets `key`, locking it as a transaction would.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// [`TransactionDb::put`] with write options.
    pub fn put_opt(&self, key: &[u8], value: &[u8], wo: &WriteOptions) -> Result<()> {
        self.one(wo, |b| b.put(key, value))
    }

    /// [`TransactionDb::put`] in column family `cf`.
    pub fn put_cf(&self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_cf_opt(cf, key, value, &WriteOptions::default())
    }

    /// [`TransactionDb::put_cf`] with write options.
    pub fn put_cf_opt(&self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8], wo: &WriteOptions) -> Result<()> {
        self.db.inner.check_family(&cf.data)?;
        self.one(wo, |b| b.put_cf(cf, key, value))
    }

    /// Removes `key`, locking it as a transaction would.
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.delete_opt(key, &WriteOptions::default())
    }

    /// [`TransactionDb::delete`] with write options.
    pub fn delete_opt(&self, key: &[u8], wo: &WriteOptions) -> Result<()> {
        self.one(wo, |b| b.delete(key))
    }

    /// [`TransactionDb::delete`] in column family `cf`.
    pub fn delete_cf(&self, cf: &ColumnFamilyHandle, key: &[u8]) -> Result<()> {
        self.delete_cf_opt(cf, key, &WriteOptions::default())
    }

    /// [`TransactionDb::delete_cf`] with write options.
    pub fn delete_cf_opt(&self, cf: &ColumnFamilyHandle, key: &[u8], wo: &WriteOptions) -> Result<()> {
        self.db.inner.check_family(&cf.data)?;
        self.one(wo, |b| b.delete_cf(cf, key))
    }

    /// Single-deletes `key` ([`Db::single_delete`]), locking it.
    pub fn single_delete(&self, key: &[u8]) -> Result<()> {
        self.single_delete_opt(key, &WriteOptions::default())
    }

    /// [`TransactionDb::single_delete`] with write options.
    pub fn single_delete_opt(&self, key: &[u8], wo: &WriteOptions) -> Result<()> {
        self.one(wo, |b| b.single_delete(key))
    }

    /// [`TransactionDb::single_delete`] in column family `cf`.
    pub fn single_delete_cf(&self, cf: &ColumnFamilyHandle, key: &[u8]) -> Result<()> {
        self.single_delete_cf_opt(cf, key, &WriteOptions::default())
    }

    /// [`TransactionDb::single_delete_cf`] with write options.
    pub fn single_delete_cf_opt(&self, cf: &ColumnFamilyHandle, key: &[u8], wo: &WriteOptions) -> Result<()> {
        self.db.inner.check_family(&cf.data)?;
        self.one(wo, |b| b.single_delete_cf(cf, key))
    }

    /// Adds a merge operand for `key`, locking it.
    pub fn merge(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.merge_opt(key, value, &WriteOptions::default())
    }

    /// [`TransactionDb::merge`] with write options.
    pub fn merge_opt(&self, key: &[u8], value: &[u8], wo: &WriteOptions) -> Result<()> {
        self.one(wo, |b| b.merge(key, value))
    }

    /// [`TransactionDb::merge`] in column family `cf`.
    pub fn merge_cf(&self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8]) -> Result<()> {
        self.merge_cf_opt(cf, key, value, &WriteOptions::default())
    }

    /// [`TransactionDb::merge_cf`] with write options.
    pub fn merge_cf_opt(&self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8], wo: &WriteOptions) -> Result<()> {
        self.db.inner.check_family(&cf.data)?;
        self.one(wo, |b| b.merge_cf(cf, key, value))
    }

    /// Sets `key` to an entity of `columns` (as [`Db::put_entity`]),
    /// locking it as a transaction would (RocksDB's
    /// `PessimisticTransactionDB::PutEntity`).
    pub fn put_entity(&self, key: &[u8], columns: &[(&[u8], &[u8])]) -> Result<()> {
        self.put_entity_opt(key, columns, &WriteOptions::default())
    }

    /// [`TransactionDb::put_entity`] with write options.
    pub fn put_entity_opt(&self, key: &[u8], columns: &[(&[u8], &[u8])], wo: &WriteOptions) -> Result<()> {
        let mut b = WriteBatch::new();
        b.put_entity(key, columns)?;
        self.write_opt(&b, wo)
    }

    /// [`TransactionDb::put_entity`] in column family `cf`, with write options.
    pub fn put_entity_cf_opt(
        &self,
        cf: &ColumnFamilyHandle,
        key: &[u8],
        columns: &[(&[u8], &[u8])],
        wo: &WriteOptions,
    ) -> Result<()> {
        self.db.inner.check_family(&cf.data)?;
        let mut b = WriteBatch::new();
        b.put_entity_cf(cf, key, columns)?;
        self.write_opt(&b, wo)
    }

    /// Closes the database, as [`Db::close`]. Transactions prepared and not
    /// finished stay prepared, found again at the next open.
    pub fn close(self) -> Result<()> {
        self.db.close()
    }
}

/// The key an update locks; none for a range deletion.
fn op_key<'a>(op: &BatchOp<'a>) -> Option<&'a [u8]> {
    match *op {
        BatchOp::Put { key, .. }
        | BatchOp::Delete { key }
        | BatchOp::SingleDelete { key }
        | BatchOp::Merge { key, .. }
        | BatchOp::PutEntity { key, .. } => Some(key),
        BatchOp::DeleteRange { .. } => None,
    }
}

/// A prepared batch's updates, without its markers.
fn updates_of(batch: &WriteBatch) -> Result<WriteBatch> {
    let mut out = WriteBatch::new();
    for op in batch.iter_cf() {
        let (cf, op) = op.map_err(Error::invalid)?;
        match op {
            BatchOp::Put { key, value } => out.put_in(cf, key, value),
            BatchOp::Delete { key } => out.delete_in(cf, key),
            BatchOp::SingleDelete { key } => out.single_delete_in(cf, key),
            BatchOp::Merge { key, value } => out.merge_in(cf, key, value),
            BatchOp::DeleteRange { begin, end } => out.delete_range_in(cf, begin, end),
            BatchOp::PutEntity { key, entity } => out.put_entity_raw_in(cf, key, entity),
        }
    }
    Ok(out)
}
