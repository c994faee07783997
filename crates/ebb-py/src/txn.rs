//! Transactions from Python (docs/python.md, "Transactions";
//! docs/transactions.md for what they do): `TransactionDb` (pessimistic:
//! keys locked as they are touched, two-phase commit) and
//! `OptimisticTransactionDb` (conflicts found at commit), both subclasses of
//! `Db`, and their `Transaction`, a context manager that commits on a normal
//! exit and rolls back on an exception.
//!
//! Lifetimes. An `ebb::Transaction<'db>` borrows its database, so it lives
//! in a [`TxnGroup`], a `self_cell` owning the database's handle (an `Arc`,
//! as iterators and snapshots hold theirs) beside the transactions it
//! borrows it for: one from `transaction()`, or all at once those
//! `prepared_transactions()` hands out (the engine gives them as one `Vec`).
//! Each Python `Transaction` is a slot of its group.
//!
//! Who may touch a group: it sits in [`TxnShared`], behind a `RwLock`.
//! - A call that changes a transaction takes it for writing, without the
//!   GIL (a lock wait may last the lock timeout); one that only reads it
//!   takes it for reading.
//! - An iterator over a transaction holds it for reading while it lives (an
//!   owned guard, [`TxnView`]): in Rust the iterator borrows the
//!   transaction, which cannot change meanwhile. A call that would change
//!   it is refused then, instead of waiting for ever in the thread that
//!   holds the iterator; [`TxnShared`] counts the iterators to know.
//! - `Db.close` empties the group ([`TxnShared::end`]), ending its
//!   transactions as a drop does (rolled back, or left prepared), so that
//!   the database closes; later calls fail with "closed".

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::lock_api::ArcRwLockReadGuard;
use parking_lot::{RawRwLock, RwLock};
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;

use crate::{
    to_py, ColumnFamily, Cursor, Db, DbRef, EbbError, ExpiredError, InvalidArgumentError, Iterator, Mode, Options,
    Yield,
};

self_cell::self_cell!(
    /// Transactions owning the database they borrow.
    pub(crate) struct TxnGroup {
        owner: DbRef,
        #[covariant]
        dependent: Slots,
    }
);
/// A group's transactions, by slot; a slot is emptied when its Python
/// object goes.
type Slots<'a> = Vec<Option<ebb::Transaction<'a>>>;

/// A group of transactions as the Python objects (and `Db.close`) share it.
pub(crate) struct TxnShared {
    /// The group; `None` once `Db.close` ended it.
    group: Arc<RwLock<Option<TxnGroup>>>,
    /// Iterators open over the group's transactions (each holds `group`
    /// for reading).
    iterators: AtomicUsize,
    /// The database's iterators and snapshots, where the transactions'
    /// iterators are kept too, so that `Db.close` ends them first.
    handles: Arc<crate::Handles>,
}

impl TxnShared {
    /// Ends the group's transactions, as dropping them does, unless one is
    /// busy (in a call in another thread, or read by an open iterator):
    /// then they end when the last of their Python objects goes.
    pub(crate) fn end(&self) {
        if let Some(mut group) = self.group.try_write() {
            *group = None;
        }
    }
}

fn closed() -> PyErr {
    EbbError::new_err("the transaction's database was closed")
}

/// Refuses a transaction that has finished, as the engine's reads do.
fn refuse_unless_readable(t: &ebb::Transaction<'_>) -> PyResult<()> {
    match t.state() {
        ebb::TransactionState::Started | ebb::TransactionState::Prepared => Ok(()),
        ebb::TransactionState::Committed => {
            Err(InvalidArgumentError::new_err("the transaction has already been committed"))
        }
        ebb::TransactionState::RolledBack => {
            Err(InvalidArgumentError::new_err("the transaction has already been rolled back"))
        }
        ebb::TransactionState::LocksStolen => {
            Err(ExpiredError::new_err("the transaction expired and another transaction took its locks"))
        }
    }
}

/// A state's name in Python.
fn state_name(state: ebb::TransactionState) -> &'static str {
    match state {
        ebb::TransactionState::Started => "started",
        ebb::TransactionState::Prepared => "prepared",
        ebb::TransactionState::Committed => "committed",
        ebb::TransactionState::RolledBack => "rolled_back",
        ebb::TransactionState::LocksStolen => "locks_stolen",
    }
}

/// Begins transactions on `db` with `build`, which gets the database's
/// handle, and gives one Python `Transaction` per transaction built.
fn begin<F>(db: &Db, build: F) -> PyResult<Vec<Transaction>>
where
    F: for<'a> FnOnce(&'a DbRef) -> Slots<'a>,
{
    let group = TxnGroup::new(db.db()?.clone(), build);
    let n = group.borrow_dependent().len();
    let shared = Arc::new(TxnShared {
        group: Arc::new(RwLock::new(Some(group))),
        iterators: AtomicUsize::new(0),
        handles: Arc::clone(&db.handles),
    });
    db.register(&shared);
    Ok((0..n).map(|index| Transaction { shared: Arc::clone(&shared), index, mode: db.mode }).collect())
}

/// A database whose transactions lock the keys they touch (RocksDB
/// `TransactionDB`): a `Db` whose own `put`, `delete`, `merge` and `write`
/// lock their keys too, waiting up to `default_lock_timeout`, with
/// `transaction()` and `prepared_transactions()`.
#[pyclass(module = "ebb", extends = Db)]
pub(crate) struct TransactionDb;

#[pymethods]
impl TransactionDb {
    /// Opens (by default creating) the database at `path` as `Db` does;
    /// the rest are RocksDB's `TransactionDBOptions`, times in
    /// milliseconds, negative waiting without limit.
    #[new]
    #[pyo3(signature = (
        path, options = None, mode = "bytes", *, transaction_lock_timeout = 1000, default_lock_timeout = 1000,
        max_num_locks = -1, num_stripes = 16, max_num_deadlocks = 5
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: &str,
        options: Option<&Options>,
        mode: &str,
        transaction_lock_timeout: i64,
        default_lock_timeout: i64,
        max_num_locks: i64,
        num_stripes: usize,
        max_num_deadlocks: usize,
    ) -> PyResult<(Self, Db)> {
        let txn_options = ebb::TransactionDbOptions {
            max_num_locks,
            num_stripes,
            transaction_lock_timeout,
            default_lock_timeout,
            max_num_deadlocks,
        };
        let db = Db::open_with(py, path, options, mode, move |p, o, families| {
            ebb::TransactionDb::open_cf(p, o, txn_options, families).map(|db| DbRef::Pessimistic(Arc::new(db)))
        })?;
        Ok((TransactionDb, db))
    }

    /// Begins a transaction (RocksDB `BeginTransaction`): `sync` and
    /// `disable_wal` for its commit (and prepare); `set_snapshot` takes a
    /// snapshot now; `lock_timeout` in milliseconds (-1: the database's
    /// `transaction_lock_timeout`, 0: no wait); `deadlock_detect`,
    /// `deadlock_detect_depth`; `expiration` in milliseconds (-1: never).
    #[pyo3(signature = (
        *, sync = false, disable_wal = false, set_snapshot = false, lock_timeout = -1, deadlock_detect = false,
        deadlock_detect_depth = 50, expiration = -1
    ))]
    #[allow(clippy::too_many_arguments)]
    fn transaction(
        slf: PyRef<'_, Self>,
        sync: bool,
        disable_wal: bool,
        set_snapshot: bool,
        lock_timeout: i64,
        deadlock_detect: bool,
        deadlock_detect_depth: i64,
        expiration: i64,
    ) -> PyResult<Transaction> {
        let wo = ebb::WriteOptions { sync, disable_wal };
        let o =
            ebb::TransactionOptions { set_snapshot, deadlock_detect, deadlock_detect_depth, lock_timeout, expiration };
        let mut txns = begin(slf.as_super(), |db| match db {
            DbRef::Pessimistic(db) => vec![Some(db.begin_transaction(&wo, &o))],
            DbRef::Plain(_) | DbRef::Optimistic(_) => Vec::new(),
        })?;
        txns.pop().ok_or_else(|| EbbError::new_err("not a pessimistic transaction database"))
    }

    /// The transactions found prepared at open and not handed out yet
    /// (RocksDB `GetAllPreparedTransactions`), each prepared, with its
    /// name, its writes and its keys locked: commit or roll back each.
    fn prepared_transactions(slf: PyRef<'_, Self>) -> PyResult<Vec<Transaction>> {
        begin(slf.as_super(), |db| match db {
            DbRef::Pessimistic(db) => db.get_all_prepared_transactions().into_iter().map(Some).collect(),
            DbRef::Plain(_) | DbRef::Optimistic(_) => Vec::new(),
        })
    }
}

/// A database whose transactions find conflicts at commit (RocksDB
/// `OptimisticTransactionDB`): a `Db` with `transaction()`. Its own writes
/// take part in no transaction, but a transaction that tracked a key they
/// write fails to commit.
#[pyclass(module = "ebb", extends = Db)]
pub(crate) struct OptimisticTransactionDb;

#[pymethods]
impl OptimisticTransactionDb {
    /// Opens (by default creating) the database at `path` as `Db` does;
    /// the rest are RocksDB's `OptimisticTransactionDBOptions`:
    /// `validate_policy` `"kValidateParallel"` or `"kValidateSerial"`.
    #[new]
    #[pyo3(signature = (
        path, options = None, mode = "bytes", *, validate_policy = "kValidateParallel", occ_lock_buckets = 1 << 20
    ))]
    fn new(
        py: Python<'_>,
        path: &str,
        options: Option<&Options>,
        mode: &str,
        validate_policy: &str,
        occ_lock_buckets: usize,
    ) -> PyResult<(Self, Db)> {
        let validate_policy = match validate_policy {
            "kValidateParallel" => ebb::OccValidationPolicy::ValidateParallel,
            "kValidateSerial" => ebb::OccValidationPolicy::ValidateSerial,
            other => {
                return Err(InvalidArgumentError::new_err(format!(
                    "validate_policy {other:?}: expected \"kValidateParallel\" or \"kValidateSerial\""
                )))
            }
        };
        let txn_options = ebb::OptimisticTransactionDbOptions { validate_policy, occ_lock_buckets };
        let db = Db::open_with(py, path, options, mode, move |p, o, families| {
            ebb::OptimisticTransactionDb::open_cf(p, o, txn_options, families).map(|db| DbRef::Optimistic(Arc::new(db)))
        })?;
        Ok((OptimisticTransactionDb, db))
    }

    /// Begins a transaction (RocksDB `BeginTransaction`): `sync` and
    /// `disable_wal` for its commit; `set_snapshot` takes a snapshot now,
    /// so that a key written by another after it fails the commit.
    #[pyo3(signature = (*, sync = false, disable_wal = false, set_snapshot = false))]
    fn transaction(slf: PyRef<'_, Self>, sync: bool, disable_wal: bool, set_snapshot: bool) -> PyResult<Transaction> {
        let wo = ebb::WriteOptions { sync, disable_wal };
        let o = ebb::OptimisticTransactionOptions { set_snapshot };
        let mut txns = begin(slf.as_super(), |db| match db {
            DbRef::Optimistic(db) => vec![Some(db.begin_transaction(&wo, &o))],
            DbRef::Plain(_) | DbRef::Pessimistic(_) => Vec::new(),
        })?;
        txns.pop().ok_or_else(|| EbbError::new_err("not an optimistic transaction database"))
    }
}

/// A transaction (RocksDB `Transaction`) of either transaction database:
/// its writes are seen by its own reads and by no one else's until it
/// commits. A context manager: a normal exit commits, an exception rolls
/// back (and goes on). Keys and values cross in its database's mode.
#[pyclass(module = "ebb")]
pub(crate) struct Transaction {
    shared: Arc<TxnShared>,
    /// Its slot in the group.
    index: usize,
    mode: Mode,
}

impl Transaction {
    /// Runs `f` on the transaction, which it may change, without the GIL.
    fn change<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut ebb::Transaction<'_>) -> ebb::Result<R> + Send,
    ) -> PyResult<R> {
        if self.shared.iterators.load(Ordering::Acquire) > 0 {
            return Err(InvalidArgumentError::new_err(
                "an iterator over the transaction is open: the transaction cannot change while it lives",
            ));
        }
        let index = self.index;
        py.allow_threads(|| {
            let mut group = self.shared.group.write();
            let group = group.as_mut().ok_or_else(closed)?;
            group.with_dependent_mut(|_, txns| match txns.get_mut(index).and_then(Option::as_mut) {
                Some(t) => f(t).map_err(to_py),
                None => Err(closed()),
            })
        })
    }

    /// Runs `f` on the transaction, reading it, without the GIL.
    fn read<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&ebb::Transaction<'_>) -> PyResult<R> + Send,
    ) -> PyResult<R> {
        let index = self.index;
        py.allow_threads(|| {
            // Recursive: a reader queued behind a waiting writer would wait
            // for ever in a thread whose iterator holds the group already.
            let group = self.shared.group.read_recursive();
            let group = group.as_ref().ok_or_else(closed)?;
            match group.borrow_dependent().get(index).and_then(Option::as_ref) {
                Some(t) => f(t),
                None => Err(closed()),
            }
        })
    }

    /// The stored value of `key` as `get` reads it.
    fn lookup(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        cf: Option<&ColumnFamily>,
        at_snapshot: bool,
    ) -> PyResult<Option<Vec<u8>>> {
        let k = self.mode.enc(key, "key")?;
        let handle = cf.map(|c| c.handle.clone());
        self.read(py, move |t| {
            let ro = if at_snapshot { t.read_options() } else { ebb::ReadOptions::default() };
            match &handle {
                Some(h) => t.get_cf_opt(h, &ro, &k),
                None => t.get_opt(&ro, &k),
            }
            .map_err(to_py)
        })
    }

    fn value_or(&self, py: Python<'_>, got: Option<Vec<u8>>, default: Option<PyObject>) -> PyResult<PyObject> {
        match got {
            Some(v) => self.mode.dec(py, &v),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn walk(
        &self,
        py: Python<'_>,
        yields: Yield,
        from_key: Option<&Bound<'_, PyAny>>,
        backwards: bool,
        cf: Option<&ColumnFamily>,
        lower_bound: Option<&Bound<'_, PyAny>>,
        upper_bound: Option<&Bound<'_, PyAny>>,
        at_snapshot: bool,
    ) -> PyResult<Iterator> {
        let from_key = self.mode.enc_opt(from_key, "from_key")?;
        self.iter(py, cf, lower_bound, upper_bound, at_snapshot)?.walk_from(from_key, backwards, yields)
    }
}

#[pymethods]
impl Transaction {
    /// The value of `key` with the transaction's writes over the
    /// database's, or `default`. It reads the newest state of the database
    /// (RocksDB's `Get` with default read options), or with `at_snapshot`
    /// the transaction's snapshot (`set_snapshot`). It locks nothing.
    #[pyo3(signature = (key, default = None, cf = None, at_snapshot = false))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
        cf: Option<&ColumnFamily>,
        at_snapshot: bool,
    ) -> PyResult<PyObject> {
        let got = self.lookup(py, key, cf, at_snapshot)?;
        self.value_or(py, got, default)
    }

    /// The values of `keys` (a list, `None` for a key without one), each
    /// read as `get` reads.
    #[pyo3(signature = (keys, cf = None, at_snapshot = false))]
    fn multi_get(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        cf: Option<&ColumnFamily>,
        at_snapshot: bool,
    ) -> PyResult<Vec<PyObject>> {
        let keys = keys.try_iter()?.map(|k| self.mode.enc(&k?, "key")).collect::<PyResult<Vec<Vec<u8>>>>()?;
        let handle = cf.map(|c| c.handle.clone());
        let got = self.read(py, move |t| {
            let ro = if at_snapshot { t.read_options() } else { ebb::ReadOptions::default() };
            let results = match &handle {
                Some(h) => t.multi_get_cf(&ro, &keys.iter().map(|k| (h, k.as_slice())).collect::<Vec<_>>()),
                None => t.multi_get(&ro, &keys.iter().map(Vec::as_slice).collect::<Vec<_>>()),
            };
            results.into_iter().collect::<ebb::Result<Vec<_>>>().map_err(to_py)
        })?;
        got.into_iter().map(|v| self.value_or(py, v, None)).collect()
    }

    /// Reads `key` as `get` does at the transaction's snapshot (the newest
    /// state without one), and keeps it from others until the transaction
    /// ends (RocksDB `GetForUpdate`): a pessimistic transaction locks it,
    /// `exclusive`ly or shared with other readers, waiting up to its lock
    /// timeout (`TimedOutError`, `DeadlockError`); an optimistic one fails
    /// to commit (`BusyError`) if another writes it meanwhile.
    #[pyo3(signature = (key, exclusive = true, cf = None))]
    fn get_for_update(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        exclusive: bool,
        cf: Option<&ColumnFamily>,
    ) -> PyResult<PyObject> {
        let k = self.mode.enc(key, "key")?;
        let handle = cf.map(|c| c.handle.clone());
        let got = self.change(py, move |t| {
            if exclusive {
                return match &handle {
                    Some(h) => t.get_for_update_cf(h, &k),
                    None => t.get_for_update(&k),
                };
            }
            let snapshot = t.snapshot().cloned();
            let ro = ebb::ReadOptions { snapshot: snapshot.as_ref(), ..ebb::ReadOptions::default() };
            match &handle {
                Some(h) => t.get_for_update_cf_opt(h, &ro, &k, false),
                None => t.get_for_update_opt(&ro, &k, false),
            }
        })?;
        self.value_or(py, got, None)
    }

    /// Sets `key` to `value` in the transaction, keeping the key from others
    /// as `get_for_update` does.
    #[pyo3(signature = (key, value, cf = None))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        cf: Option<&ColumnFamily>,
    ) -> PyResult<()> {
        let (k, v) = (self.mode.enc(key, "key")?, self.mode.enc(value, "value")?);
        let handle = cf.map(|c| c.handle.clone());
        self.change(py, move |t| match &handle {
            Some(h) => t.put_cf(h, &k, &v),
            None => t.put(&k, &v),
        })
    }

    /// Removes `key` in the transaction, keeping it from others.
    #[pyo3(signature = (key, cf = None))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, cf: Option<&ColumnFamily>) -> PyResult<()> {
        let k = self.mode.enc(key, "key")?;
        let handle = cf.map(|c| c.handle.clone());
        self.change(py, move |t| match &handle {
            Some(h) => t.delete_cf(h, &k),
            None => t.delete(&k),
        })
    }

    /// Merges `operand` into `key` in the transaction, with the family's
    /// merge operator, keeping the key from others.
    #[pyo3(signature = (key, operand, cf = None))]
    fn merge(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        operand: &Bound<'_, PyAny>,
        cf: Option<&ColumnFamily>,
    ) -> PyResult<()> {
        let (k, v) = (self.mode.enc(key, "key")?, self.mode.enc(operand, "operand")?);
        let handle = cf.map(|c| c.handle.clone());
        self.change(py, move |t| match &handle {
            Some(h) => t.merge_cf(h, &k, &v),
            None => t.merge(&k, &v),
        })
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        match self.lookup(py, key, None, false)? {
            Some(v) => self.mode.dec(py, &v),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __setitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.put(py, key, value, None)
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        if !self.__contains__(py, key)? {
            return Err(PyKeyError::new_err(key.clone().unbind()));
        }
        self.delete(py, key, None)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.lookup(py, key, None, false)?.is_some())
    }

    /// An iterator, not positioned (call a `seek`), over the transaction's
    /// writes over the database (the newest state, or with `at_snapshot`
    /// the transaction's snapshot), within `[lower_bound, upper_bound)`
    /// when given. While it lives the transaction cannot change: a write,
    /// `get_for_update`, `commit` or `rollback` raises.
    #[pyo3(signature = (cf = None, lower_bound = None, upper_bound = None, at_snapshot = false))]
    fn iter(
        &self,
        py: Python<'_>,
        cf: Option<&ColumnFamily>,
        lower_bound: Option<&Bound<'_, PyAny>>,
        upper_bound: Option<&Bound<'_, PyAny>>,
        at_snapshot: bool,
    ) -> PyResult<Iterator> {
        let lower = self.mode.enc_opt(lower_bound, "lower_bound")?;
        let upper = self.mode.enc_opt(upper_bound, "upper_bound")?;
        let handle = cf.map(|c| c.handle.clone());
        let (shared, index) = (Arc::clone(&self.shared), self.index);
        let cell = py.allow_threads(move || {
            let group = shared.group.read_arc_recursive();
            shared.iterators.fetch_add(1, Ordering::AcqRel);
            TxnIterCell::try_new(TxnView { group, shared, index }, |view| {
                let group = view.group.as_ref().ok_or_else(closed)?;
                let t = group.borrow_dependent().get(view.index).and_then(Option::as_ref).ok_or_else(closed)?;
                refuse_unless_readable(t)?;
                let mut ro = if at_snapshot { t.read_options() } else { ebb::ReadOptions::default() };
                ro.iterate_lower_bound = lower;
                ro.iterate_upper_bound = upper;
                Ok::<_, PyErr>(match &handle {
                    Some(h) => t.iter_cf(h, ro),
                    None => t.iter(ro),
                })
            })
        })?;
        Ok(Iterator::over(Cursor::Txn(cell), self.mode, &self.shared.handles))
    }

    /// The keys, in order or backwards, from `from_key` (inclusive; the
    /// first or, `backwards`, the last when not given), as `iter` sees them.
    #[pyo3(signature = (
        from_key = None, backwards = false, cf = None, lower_bound = None, upper_bound = None, at_snapshot = false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn keys(
        &self,
        py: Python<'_>,
        from_key: Option<&Bound<'_, PyAny>>,
        backwards: bool,
        cf: Option<&ColumnFamily>,
        lower_bound: Option<&Bound<'_, PyAny>>,
        upper_bound: Option<&Bound<'_, PyAny>>,
        at_snapshot: bool,
    ) -> PyResult<Iterator> {
        self.walk(py, Yield::Keys, from_key, backwards, cf, lower_bound, upper_bound, at_snapshot)
    }

    /// As `keys`, yielding values.
    #[pyo3(signature = (
        from_key = None, backwards = false, cf = None, lower_bound = None, upper_bound = None, at_snapshot = false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn values(
        &self,
        py: Python<'_>,
        from_key: Option<&Bound<'_, PyAny>>,
        backwards: bool,
        cf: Option<&ColumnFamily>,
        lower_bound: Option<&Bound<'_, PyAny>>,
        upper_bound: Option<&Bound<'_, PyAny>>,
        at_snapshot: bool,
    ) -> PyResult<Iterator> {
        self.walk(py, Yield::Values, from_key, backwards, cf, lower_bound, upper_bound, at_snapshot)
    }

    /// As `keys`, yielding `(key, value)` pairs.
    #[pyo3(signature = (
        from_key = None, backwards = false, cf = None, lower_bound = None, upper_bound = None, at_snapshot = false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn items(
        &self,
        py: Python<'_>,
        from_key: Option<&Bound<'_, PyAny>>,
        backwards: bool,
        cf: Option<&ColumnFamily>,
        lower_bound: Option<&Bound<'_, PyAny>>,
        upper_bound: Option<&Bound<'_, PyAny>>,
        at_snapshot: bool,
    ) -> PyResult<Iterator> {
        self.walk(py, Yield::Items, from_key, backwards, cf, lower_bound, upper_bound, at_snapshot)
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<Iterator> {
        self.walk(py, Yield::Keys, None, false, None, None, None, false)
    }

    /// Marks a savepoint (savepoints nest).
    fn set_save_point(&self, py: Python<'_>) -> PyResult<()> {
        self.change(py, |t| {
            t.set_save_point();
            Ok(())
        })
    }

    /// Undoes everything since the newest savepoint and forgets it: its
    /// writes, the keys it began to keep from others (a pessimistic
    /// transaction unlocks them) and its snapshot. `NotFoundError` without
    /// a savepoint.
    fn rollback_to_save_point(&self, py: Python<'_>) -> PyResult<()> {
        self.change(py, |t| t.rollback_to_save_point())
    }

    /// Forgets the newest savepoint, keeping what came after it.
    /// `NotFoundError` without a savepoint.
    fn pop_save_point(&self, py: Python<'_>) -> PyResult<()> {
        self.change(py, |t| t.pop_save_point())
    }

    /// Takes a snapshot now: what others write after it is a conflict (an
    /// optimistic commit fails, a pessimistic lock is refused with
    /// `BusyError`), and reads with `at_snapshot` read at it.
    fn set_snapshot(&self, py: Python<'_>) -> PyResult<()> {
        self.change(py, |t| {
            t.set_snapshot();
            Ok(())
        })
    }

    /// Forgets the snapshot; keys kept before stay kept at its sequence.
    fn clear_snapshot(&self, py: Python<'_>) -> PyResult<()> {
        self.change(py, |t| {
            t.clear_snapshot();
            Ok(())
        })
    }

    /// Makes the transaction's writes visible, atomically. Optimistic:
    /// `BusyError` when a key it kept was written by another since (nothing
    /// is written: run it again), `TryAgainError` when that cannot be told.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        self.change(py, |t| t.commit())
    }

    /// Discards the transaction's writes and releases its keys; a prepared
    /// transaction's rollback is written to the WAL.
    fn rollback(&self, py: Python<'_>) -> PyResult<()> {
        self.change(py, |t| t.rollback())
    }

    /// Names the transaction for two-phase commit (pessimistic only): a
    /// name no other live or prepared transaction of the database has.
    fn set_name(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let name = name.as_bytes().to_vec();
        self.change(py, move |t| t.set_name(&name))
    }

    /// Writes the transaction's updates to the WAL, not applied, under its
    /// name: from then on they survive a crash or a close, and the next
    /// open hands the transaction out again (`prepared_transactions()`)
    /// until it is committed or rolled back.
    fn prepare(&self, py: Python<'_>) -> PyResult<()> {
        self.change(py, |t| t.prepare())
    }

    /// The transaction's id, unique in its database since it was opened.
    #[getter]
    fn id(&self, py: Python<'_>) -> PyResult<u64> {
        self.read(py, |t| Ok(t.id()))
    }

    /// The name `set_name` gave, or None.
    #[getter]
    fn name(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.read(py, |t| Ok(t.name().map(|n| String::from_utf8_lossy(n).into_owned())))
    }

    /// `"started"`, `"prepared"`, `"committed"`, `"rolled_back"` or
    /// `"locks_stolen"` (it expired and another took its locks).
    #[getter]
    fn state(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.read(py, |t| Ok(state_name(t.state())))
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Commits on a normal exit, rolls back on an exception (which goes
    /// on); a transaction already committed or rolled back is left as it
    /// is. A commit that fails rolls a started transaction back before the
    /// error goes on; a prepared one stays prepared (its outcome is for
    /// whoever prepared it to decide).
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: &Bound<'_, PyAny>,
        _value: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let failed = !exc_type.is_none();
        let state = match self.read(py, |t| Ok(t.state())) {
            Ok(state) => state,
            // The database was closed in the block: the exception goes on.
            Err(_) if failed => return Ok(false),
            Err(e) => return Err(e),
        };
        if matches!(state, ebb::TransactionState::Committed | ebb::TransactionState::RolledBack) {
            return Ok(false);
        }
        if failed {
            // The exception goes on whatever the rollback says: refused
            // (an iterator over the transaction is still open) or failed,
            // the transaction never commits, and dropping it rolls it back
            // (a prepared one stays prepared, for the next open).
            let _ = self.rollback(py);
            return Ok(false);
        }
        if let Err(e) = self.commit(py) {
            if state != ebb::TransactionState::Prepared {
                // The commit's error is the one to raise; a rollback of a
                // started transaction only releases what it keeps.
                let _ = self.rollback(py);
            }
            return Err(e);
        }
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        match self.read(py, |t| Ok((t.id(), t.state()))) {
            Ok((id, state)) => format!("Transaction(id={id}, state={:?})", state_name(state)),
            Err(_) => "Transaction(<closed>)".to_string(),
        }
    }
}

impl Drop for Transaction {
    /// Ends the transaction now (rolled back unless committed; a prepared
    /// one stays prepared) rather than with the last of its group, unless
    /// the group is busy.
    fn drop(&mut self) {
        if let Some(mut group) = self.shared.group.try_write() {
            if let Some(group) = group.as_mut() {
                group.with_dependent_mut(|_, txns| {
                    if let Some(slot) = txns.get_mut(self.index) {
                        *slot = None;
                    }
                });
            }
        }
    }
}

/// An iterator's hold on the transaction it reads: its group, held for
/// reading while the iterator lives, and counted in `shared.iterators`.
pub(crate) struct TxnView {
    group: ArcRwLockReadGuard<RawRwLock, Option<TxnGroup>>,
    shared: Arc<TxnShared>,
    index: usize,
}

impl Drop for TxnView {
    fn drop(&mut self) {
        self.shared.iterators.fetch_sub(1, Ordering::AcqRel);
    }
}

self_cell::self_cell!(
    /// An iterator over a transaction's writes over its database, owning
    /// its hold on the transaction.
    pub(crate) struct TxnIterCell {
        owner: TxnView,
        #[not_covariant]
        dependent: TxnIteratorOf,
    }
);
type TxnIteratorOf<'a> = ebb::BaseDeltaIterator<'a>;
