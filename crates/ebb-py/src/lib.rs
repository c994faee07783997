//! `ebb._ebb`, the native part of the `ebb` Python package (docs/python.md):
//! a dict-like face on [`ebb::Db`], as rocksdict's `Rdict`, with write
//! batches, snapshots, iterators and column families.
//!
//! - Keys and values are `bytes`; a `str` given is UTF-8 encoded. Values
//!   come back as `bytes`.
//! - Engine errors become Python exceptions carrying the engine's message
//!   (`EbbError` and its subclasses); nothing panics into the interpreter.
//! - Calls that may block (writes, reads, flushes, compactions, iterator
//!   steps, opening and closing) release the GIL, so other Python threads
//!   run meanwhile.
//! - Iterators and snapshots keep the database open (they hold it through an
//!   `Arc`); `close` waits for none of them and later calls through them
//!   fail with the engine's "closed" error.
//! - Transactions (`txn.rs`): `TransactionDb` and `OptimisticTransactionDb`
//!   are subclasses of `Db` whose handle ([`DbRef`]) routes writes through
//!   the transaction database.

mod txn;

use std::sync::{Arc, Mutex, PoisonError, Weak};

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyError, PyStopIteration, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString, PyTuple};

create_exception!(_ebb, EbbError, PyException, "An error of the Ebb engine.");
create_exception!(_ebb, CorruptionError, EbbError, "Stored data failed a check (a checksum, a length, ...).");
create_exception!(
    _ebb,
    BusyError,
    EbbError,
    "The database is locked by another process or handle, or a transaction conflicts with another: roll it back \
     and run it again."
);
create_exception!(
    _ebb,
    DeadlockError,
    BusyError,
    "A transaction would wait for a lock in a cycle of waits (a kind of busy, as in RocksDB): it took no lock."
);
create_exception!(
    _ebb,
    TimedOutError,
    EbbError,
    "A transaction waited its lock timeout for a lock and did not get it."
);
create_exception!(
    _ebb,
    TryAgainError,
    EbbError,
    "A transaction could not be checked for conflicts (the memtable history kept is too short): run it again."
);
create_exception!(_ebb, ExpiredError, EbbError, "A transaction outlived its expiration and lost its locks.");
create_exception!(_ebb, NotFoundError, EbbError, "What was asked for does not exist (a savepoint).");
create_exception!(_ebb, InvalidArgumentError, EbbError, "An argument, option or input was refused.");
create_exception!(_ebb, NotSupportedError, EbbError, "The operation or option is not supported here.");
create_exception!(_ebb, IOError, EbbError, "An operating-system I/O call failed.");

/// The Python exception for an engine error, with its message.
fn to_py(e: ebb::Error) -> PyErr {
    let message = e.to_string();
    let inner = match &e {
        ebb::Error::Background(inner) => inner.as_ref(),
        other => other,
    };
    match inner {
        ebb::Error::Corruption { .. } => CorruptionError::new_err(message),
        ebb::Error::Busy(_) => BusyError::new_err(message),
        ebb::Error::Deadlock(_) => DeadlockError::new_err(message),
        ebb::Error::TimedOut(_) => TimedOutError::new_err(message),
        ebb::Error::TryAgain(_) => TryAgainError::new_err(message),
        ebb::Error::Expired(_) => ExpiredError::new_err(message),
        ebb::Error::NotFound(_) => NotFoundError::new_err(message),
        ebb::Error::InvalidArgument(_) => InvalidArgumentError::new_err(message),
        ebb::Error::NotSupported(_) => NotSupportedError::new_err(message),
        ebb::Error::Io { .. } => IOError::new_err(message),
        // Only the batch-alone reads of a `WriteBatchWithIndex` raise
        // `MergeInProgress`, and the package has none of them.
        ebb::Error::MergeInProgress(_)
        | ebb::Error::Background(_)
        | ebb::Error::Panicked { .. }
        | ebb::Error::Cancelled
        | ebb::Error::Closed => EbbError::new_err(message),
        _ => EbbError::new_err(message),
    }
}

/// `bytes` as they are, or a `str` as UTF-8.
fn to_bytes(value: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    if let Ok(b) = value.downcast::<PyBytes>() {
        return Ok(b.as_bytes().to_vec());
    }
    if let Ok(s) = value.downcast::<PyString>() {
        return Ok(s.to_cow()?.as_bytes().to_vec());
    }
    if let Ok(v) = value.extract::<Vec<u8>>() {
        return Ok(v);
    }
    Err(PyTypeError::new_err(format!("{what} must be bytes or str, not {}", value.get_type().name()?)))
}

/// The columns of an entity as given from Python: a dict or an iterable
/// of `(name, value)` pairs; names are `bytes` or `str` (UTF-8) in every
/// mode, values cross as the mode says.
fn entity_columns(mode: Mode, columns: &Bound<'_, PyAny>) -> PyResult<Vec<(Vec<u8>, Vec<u8>)>> {
    let pairs: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = match columns.downcast::<PyDict>() {
        Ok(d) => d.iter().collect(),
        Err(_) => columns.try_iter()?.map(|p| p?.extract()).collect::<PyResult<_>>()?,
    };
    pairs.iter().map(|(n, v)| Ok((to_bytes(n, "column name")?, mode.enc(v, "column value")?))).collect()
}

/// An entity's columns as Python sees them: a dict by name ascending, names
/// `str` in mode `"str"` and `bytes` otherwise.
fn entity_dict(py: Python<'_>, mode: Mode, columns: &[ebb::WideColumn]) -> PyResult<PyObject> {
    let d = PyDict::new(py);
    for c in columns {
        let name = match mode {
            Mode::Str => Mode::Str.dec(py, &c.name)?,
            _ => PyBytes::new(py, &c.name).into_any().unbind(),
        };
        d.set_item(name, mode.dec(py, &c.value)?)?;
    }
    Ok(d.into_any().unbind())
}

fn column_refs(columns: &[(Vec<u8>, Vec<u8>)]) -> Vec<(&[u8], &[u8])> {
    columns.iter().map(|(n, v)| (n.as_slice(), v.as_slice())).collect()
}

/// How keys and values cross into Python (rocksdict's raw and pickle
/// modes): `"bytes"` (the default: `bytes`, or a `str` UTF-8 encoded, in;
/// `bytes` out), `"str"` (`str` in and out, stored as UTF-8) or `"pickle"`
/// (any picklable object, stored as its pickle; keys then sort by their
/// pickles).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Mode {
    Bytes,
    Str,
    Pickle,
}

impl Mode {
    fn parse(s: &str) -> PyResult<Mode> {
        match s {
            "bytes" => Ok(Mode::Bytes),
            "str" => Ok(Mode::Str),
            "pickle" => Ok(Mode::Pickle),
            other => {
                Err(InvalidArgumentError::new_err(format!("mode {other:?}: expected \"bytes\", \"str\" or \"pickle\"")))
            }
        }
    }

    /// `value` as stored.
    fn enc(self, value: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
        match self {
            Mode::Bytes => to_bytes(value, what),
            Mode::Str => match value.downcast::<PyString>() {
                Ok(s) => Ok(s.to_cow()?.as_bytes().to_vec()),
                Err(_) => Err(PyTypeError::new_err(format!(
                    "{what} must be str in mode \"str\", not {}",
                    value.get_type().name()?
                ))),
            },
            Mode::Pickle => {
                let pickled = value.py().import("pickle")?.call_method1("dumps", (value,))?;
                Ok(pickled.downcast::<PyBytes>()?.as_bytes().to_vec())
            }
        }
    }

    fn enc_opt(self, value: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Vec<u8>>> {
        value.filter(|v| !v.is_none()).map(|v| self.enc(v, what)).transpose()
    }

    /// Stored bytes as the Python object they stand for.
    fn dec(self, py: Python<'_>, bytes: &[u8]) -> PyResult<PyObject> {
        match self {
            Mode::Bytes => Ok(PyBytes::new(py, bytes).into_any().unbind()),
            Mode::Str => match std::str::from_utf8(bytes) {
                Ok(s) => Ok(PyString::new(py, s).into_any().unbind()),
                Err(e) => Err(InvalidArgumentError::new_err(format!(
                    "a stored key or value is not UTF-8 ({e}): read it in mode \"bytes\""
                ))),
            },
            Mode::Pickle => Ok(py.import("pickle")?.call_method1("loads", (PyBytes::new(py, bytes),))?.unbind()),
        }
    }
}

/// Options with RocksDB's names (`write_buffer_size`, `compression`, ...):
/// `Options(create_if_missing=True, write_buffer_size=1 << 20)`, attributes
/// read and set by name, `Options.from_text(text)` for an OPTIONS file.
#[pyclass(module = "ebb")]
#[derive(Clone)]
struct Options {
    inner: ebb::Options,
}

/// An option's value as the options text writes it.
fn option_text(value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(b) = value.extract::<bool>() {
        return Ok(if b { "true" } else { "false" }.to_string());
    }
    Ok(value.str()?.to_cow()?.into_owned())
}

#[pymethods]
impl Options {
    #[new]
    #[pyo3(signature = (**kwargs))]
    fn new(kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut inner = ebb::Options::default();
        inner.create_if_missing = true;
        if let Some(kwargs) = kwargs {
            for (name, value) in kwargs.iter() {
                let name: String = name.extract()?;
                inner.set(&name, &option_text(&value)?).map_err(to_py)?;
            }
        }
        Ok(Options { inner })
    }

    /// Options read from an OPTIONS file's text (Ebb's or RocksDB's).
    #[staticmethod]
    fn from_text(text: &str) -> PyResult<Self> {
        Ok(Options { inner: ebb::Options::from_text(text).map_err(to_py)? })
    }

    /// The OPTIONS-file text of these options.
    fn to_text(&self) -> String {
        self.inner.to_text()
    }

    /// Sets option `name` from its text form (`set("compression", "kLZ4Compression")`).
    fn set(&mut self, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inner.set(name, &option_text(value)?).map_err(to_py)
    }

    /// The text form of option `name`.
    fn get(&self, name: &str) -> PyResult<String> {
        self.inner.get(name).ok_or_else(|| InvalidArgumentError::new_err(format!("unknown option {name:?}")))
    }

    fn __getattr__(&self, name: &str) -> PyResult<String> {
        self.get(name)
    }

    fn __setattr__(&mut self, name: &str, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.set(name, value)
    }

    fn __repr__(&self) -> String {
        format!("Options(<{} options>)", ebb::Options::names().count())
    }
}

/// Writes applied together (`Db.write`): `put`, `delete`, `merge`,
/// `delete_range`, each with an optional column family.
#[pyclass(module = "ebb")]
struct WriteBatch {
    inner: ebb::WriteBatch,
    mode: Mode,
}

#[pymethods]
impl WriteBatch {
    /// An empty batch whose keys and values are given in `mode` (the
    /// database's: see `Db`).
    #[new]
    #[pyo3(signature = (mode = "bytes"))]
    fn new(mode: &str) -> PyResult<Self> {
        Ok(WriteBatch { inner: ebb::WriteBatch::new(), mode: Mode::parse(mode)? })
    }

    #[pyo3(signature = (key, value, cf = None))]
    fn put(&mut self, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, cf: Option<&ColumnFamily>) -> PyResult<()> {
        let batch = &mut self.inner;
        let mut put = |k: &[u8], v: &[u8]| match cf {
            Some(cf) => batch.put_cf(&cf.handle, k, v),
            None => batch.put(k, v),
        };
        // `bytes` go into the batch straight from the objects (one copy).
        if let (Mode::Bytes, Ok(k), Ok(v)) = (self.mode, key.downcast::<PyBytes>(), value.downcast::<PyBytes>()) {
            put(k.as_bytes(), v.as_bytes());
            return Ok(());
        }
        let (k, v) = (self.mode.enc(key, "key")?, self.mode.enc(value, "value")?);
        put(&k, &v);
        Ok(())
    }

    /// Adds a put of a wide-column entity: `columns` a dict (or pairs) of
    /// column name to value, the name `""` the key's plain value.
    #[pyo3(signature = (key, columns, cf = None))]
    fn put_entity(
        &mut self,
        key: &Bound<'_, PyAny>,
        columns: &Bound<'_, PyAny>,
        cf: Option<&ColumnFamily>,
    ) -> PyResult<()> {
        let k = self.mode.enc(key, "key")?;
        let cols = entity_columns(self.mode, columns)?;
        match cf {
            Some(cf) => self.inner.put_entity_cf(&cf.handle, &k, &column_refs(&cols)),
            None => self.inner.put_entity(&k, &column_refs(&cols)),
        }
        .map_err(to_py)
    }

    #[pyo3(signature = (key, cf = None))]
    fn delete(&mut self, key: &Bound<'_, PyAny>, cf: Option<&ColumnFamily>) -> PyResult<()> {
        let k = self.mode.enc(key, "key")?;
        match cf {
            Some(cf) => self.inner.delete_cf(&cf.handle, &k),
            None => self.inner.delete(&k),
        }
        Ok(())
    }

    #[pyo3(signature = (key, operand, cf = None))]
    fn merge(&mut self, key: &Bound<'_, PyAny>, operand: &Bound<'_, PyAny>, cf: Option<&ColumnFamily>) -> PyResult<()> {
        let (k, v) = (self.mode.enc(key, "key")?, self.mode.enc(operand, "operand")?);
        match cf {
            Some(cf) => self.inner.merge_cf(&cf.handle, &k, &v),
            None => self.inner.merge(&k, &v),
        }
        Ok(())
    }

    #[pyo3(signature = (begin, end, cf = None))]
    fn delete_range(
        &mut self,
        begin: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        cf: Option<&ColumnFamily>,
    ) -> PyResult<()> {
        let (b, e) = (self.mode.enc(begin, "begin")?, self.mode.enc(end, "end")?);
        match cf {
            Some(cf) => self.inner.delete_range_cf(&cf.handle, &b, &e),
            None => self.inner.delete_range(&b, &e),
        }
        Ok(())
    }

    fn clear(&mut self) {
        self.inner.clear();
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }
}

/// A column family of a database (`Db.create_column_family`,
/// `Db.get_column_family`), passed as `cf=` to the methods that take one.
#[pyclass(module = "ebb")]
#[derive(Clone)]
struct ColumnFamily {
    handle: ebb::ColumnFamilyHandle,
}

#[pymethods]
impl ColumnFamily {
    #[getter]
    fn name(&self) -> String {
        self.handle.name().to_string()
    }

    fn __repr__(&self) -> String {
        format!("ColumnFamily({:?})", self.handle.name())
    }
}

/// The database a `Db` opened: a plain one, or one of the two transaction
/// databases (`TransactionDb`, `OptimisticTransactionDb`, subclasses of
/// `Db`). Reads go to the `ebb::Db` beneath ([`DbRef::base`]); writes go
/// through [`DbRef`]'s own methods, because a pessimistic database's writes
/// must lock their keys as its transactions do (docs/transactions.md).
#[derive(Clone)]
enum DbRef {
    Plain(Arc<ebb::Db>),
    Optimistic(Arc<ebb::OptimisticTransactionDb>),
    Pessimistic(Arc<ebb::TransactionDb>),
}

impl DbRef {
    /// The database beneath, for reads and for what takes no lock.
    fn base(&self) -> &ebb::Db {
        match self {
            DbRef::Plain(db) => db,
            DbRef::Optimistic(db) => db.db(),
            DbRef::Pessimistic(db) => db.db(),
        }
    }

    fn put(
        &self,
        cf: Option<&ebb::ColumnFamilyHandle>,
        key: &[u8],
        value: &[u8],
        wo: &ebb::WriteOptions,
    ) -> ebb::Result<()> {
        match (self, cf) {
            (DbRef::Pessimistic(db), Some(cf)) => db.put_cf_opt(cf, key, value, wo),
            (DbRef::Pessimistic(db), None) => db.put_opt(key, value, wo),
            (_, Some(cf)) => self.base().put_cf_opt(cf, key, value, wo),
            (_, None) => self.base().put_opt(key, value, wo),
        }
    }

    fn put_entity(
        &self,
        cf: Option<&ebb::ColumnFamilyHandle>,
        key: &[u8],
        columns: &[(&[u8], &[u8])],
        wo: &ebb::WriteOptions,
    ) -> ebb::Result<()> {
        match (self, cf) {
            (DbRef::Pessimistic(db), Some(cf)) => db.put_entity_cf_opt(cf, key, columns, wo),
            (DbRef::Pessimistic(db), None) => db.put_entity_opt(key, columns, wo),
            (_, Some(cf)) => self.base().put_entity_cf_opt(cf, key, columns, wo),
            (_, None) => self.base().put_entity_opt(key, columns, wo),
        }
    }

    fn delete(&self, cf: Option<&ebb::ColumnFamilyHandle>, key: &[u8], wo: &ebb::WriteOptions) -> ebb::Result<()> {
        match (self, cf) {
            (DbRef::Pessimistic(db), Some(cf)) => db.delete_cf_opt(cf, key, wo),
            (DbRef::Pessimistic(db), None) => db.delete_opt(key, wo),
            (_, Some(cf)) => self.base().delete_cf_opt(cf, key, wo),
            (_, None) => self.base().delete_opt(key, wo),
        }
    }

    fn merge(
        &self,
        cf: Option<&ebb::ColumnFamilyHandle>,
        key: &[u8],
        operand: &[u8],
        wo: &ebb::WriteOptions,
    ) -> ebb::Result<()> {
        match (self, cf) {
            (DbRef::Pessimistic(db), Some(cf)) => db.merge_cf_opt(cf, key, operand, wo),
            (DbRef::Pessimistic(db), None) => db.merge_opt(key, operand, wo),
            (_, Some(cf)) => self.base().merge_cf_opt(cf, key, operand, wo),
            (_, None) => self.base().merge_opt(key, operand, wo),
        }
    }

    fn write(&self, batch: &ebb::WriteBatch, wo: &ebb::WriteOptions) -> ebb::Result<()> {
        match self {
            DbRef::Pessimistic(db) => db.write_opt(batch, wo),
            _ => self.base().write_opt(batch, wo),
        }
    }

    /// A new family; a transaction database's keeps the memtable history
    /// its conflict checks need.
    fn create_column_family(&self, name: &str, options: &ebb::Options) -> ebb::Result<ebb::ColumnFamilyHandle> {
        match self {
            DbRef::Plain(db) => db.create_column_family(name, options),
            DbRef::Optimistic(db) => db.create_column_family(name, options),
            DbRef::Pessimistic(db) => db.create_column_family(name, options),
        }
    }

    fn drop_column_family(&self, cf: &ebb::ColumnFamilyHandle) -> ebb::Result<()> {
        match self {
            DbRef::Pessimistic(db) => db.drop_column_family(cf),
            _ => self.base().drop_column_family(cf),
        }
    }

    /// A property; a pessimistic database adds those of its locks
    /// (`ebb.txn.num-locks`, ...).
    fn get_property(&self, name: &str, cf: Option<&ebb::ColumnFamilyHandle>) -> Option<String> {
        match (self, cf) {
            (_, Some(cf)) => self.base().get_property_cf(cf, name),
            (DbRef::Pessimistic(db), None) => db.get_property(name),
            (_, None) => self.base().get_property(name),
        }
    }

    /// Closes the database if this is the last handle to it; otherwise the
    /// last one to go closes it (dropping an `ebb::Db` closes it).
    fn close(self) -> ebb::Result<()> {
        match self {
            DbRef::Plain(db) => Arc::try_unwrap(db).map_or(Ok(()), ebb::Db::close),
            DbRef::Optimistic(db) => Arc::try_unwrap(db).map_or(Ok(()), ebb::OptimisticTransactionDb::close),
            DbRef::Pessimistic(db) => Arc::try_unwrap(db).map_or(Ok(()), ebb::TransactionDb::close),
        }
    }
}

self_cell::self_cell!(
    /// A snapshot owning the database it reads.
    struct SnapshotCell {
        owner: DbRef,
        #[covariant]
        dependent: SnapshotOf,
    }
);
type SnapshotOf<'a> = ebb::Snapshot<'a>;

/// What an iterator reads from: the database, and the snapshot it reads at.
struct IterOwner {
    db: DbRef,
    snapshot: Option<Arc<SnapshotCell>>,
}

self_cell::self_cell!(
    /// An iterator owning the database (and snapshot) it reads.
    struct IterCell {
        owner: IterOwner,
        #[not_covariant]
        dependent: IteratorOf,
    }
);
type IteratorOf<'a> = ebb::DbIterator<'a>;

/// A consistent view (`Db.snapshot()`): reads through it see the database
/// as of its creation. A context manager; `release()` ends it early.
#[pyclass(module = "ebb")]
struct Snapshot {
    /// The engine's snapshot; emptied by `release()` or when the database
    /// closes ([`Handles::close_all`]).
    slot: Arc<SnapshotSlot>,
    mode: Mode,
    handles: Arc<Handles>,
}

/// A snapshot's place, shared with its database's [`Handles`].
type SnapshotSlot = Mutex<Option<Arc<SnapshotCell>>>;

/// An iterator's place, shared with its database's [`Handles`].
type CursorSlot = Mutex<Option<Cursor>>;

/// The iterators and snapshots made from one database (through it, its
/// snapshots or its transactions), so that `Db.close` can end them: each
/// holds the database open while it lives.
///
/// Invariant: after [`Handles::close_all`], every slot registered before
/// is empty, and a slot registered after is emptied at once (the database
/// is gone), so nothing made from a closed database holds it.
#[derive(Default)]
pub(crate) struct Handles {
    closed: std::sync::atomic::AtomicBool,
    cursors: Mutex<Vec<Weak<CursorSlot>>>,
    snapshots: Mutex<Vec<Weak<SnapshotSlot>>>,
}

impl Handles {
    /// Keeps `slot` to be emptied at close, or empties it now if the
    /// database closed meanwhile (made on another thread, from a snapshot
    /// or a transaction); drops the entries of slots already gone whenever
    /// the list doubles.
    fn keep<T>(&self, list: &Mutex<Vec<Weak<Mutex<Option<T>>>>>, slot: &Arc<Mutex<Option<T>>>) {
        let mut list = list.lock().unwrap_or_else(PoisonError::into_inner);
        if list.len() >= 64 && list.len().is_power_of_two() {
            list.retain(|w| w.strong_count() > 0);
        }
        list.push(Arc::downgrade(slot));
        drop(list);
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            drop(slot.lock().unwrap_or_else(PoisonError::into_inner).take());
        }
    }

    fn keep_cursor(&self, cursor: Cursor) -> Arc<CursorSlot> {
        let slot = Arc::new(Mutex::new(Some(cursor)));
        self.keep(&self.cursors, &slot);
        slot
    }

    fn keep_snapshot(&self, cell: SnapshotCell) -> Arc<SnapshotSlot> {
        let slot = Arc::new(Mutex::new(Some(Arc::new(cell))));
        self.keep(&self.snapshots, &slot);
        slot
    }

    /// Ends every iterator, then every snapshot (iterators at a snapshot
    /// hold it too): their later use raises "closed".
    fn close_all(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::Release);
        empty_all(&self.cursors);
        empty_all(&self.snapshots);
    }
}

/// Empties every slot of `list` still alive, and the list.
fn empty_all<T>(list: &Mutex<Vec<Weak<Mutex<Option<T>>>>>) {
    for slot in std::mem::take(&mut *list.lock().unwrap_or_else(PoisonError::into_inner)) {
        if let Some(slot) = slot.upgrade() {
            drop(slot.lock().unwrap_or_else(PoisonError::into_inner).take());
        }
    }
}

/// The error of an iterator or snapshot used after its database closed.
fn closed_db() -> PyErr {
    EbbError::new_err("the database this was made from is closed")
}

impl Snapshot {
    fn cell(&self) -> PyResult<Arc<SnapshotCell>> {
        let slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.as_ref() {
            Some(cell) => Ok(Arc::clone(cell)),
            None if self.handles.closed.load(std::sync::atomic::Ordering::Acquire) => Err(closed_db()),
            None => Err(InvalidArgumentError::new_err("the snapshot was released")),
        }
    }
}

#[pymethods]
impl Snapshot {
    /// The sequence number the snapshot reads at.
    #[getter]
    fn sequence(&self) -> PyResult<u64> {
        Ok(self.cell()?.borrow_dependent().sequence())
    }

    #[pyo3(signature = (key, default = None, cf = None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
        cf: Option<&ColumnFamily>,
    ) -> PyResult<PyObject> {
        let k = self.mode.enc(key, "key")?;
        let cell = self.cell()?;
        let handle = cf.map(|c| c.handle.clone());
        let got = py
            .allow_threads(|| {
                let snap = cell.borrow_dependent();
                let ro = snap.read_options();
                let db = cell.borrow_owner().base();
                match &handle {
                    Some(h) => db.get_cf_opt(h, &k, &ro),
                    None => db.get_opt(&k, &ro),
                }
            })
            .map_err(to_py)?;
        Ok(match got {
            Some(v) => self.mode.dec(py, &v)?,
            None => default.unwrap_or_else(|| py.None()),
        })
    }

    /// An iterator at this snapshot (as `Db.iter`).
    #[pyo3(signature = (cf = None, lower_bound = None, upper_bound = None))]
    fn iter(
        &self,
        py: Python<'_>,
        cf: Option<&ColumnFamily>,
        lower_bound: Option<&Bound<'_, PyAny>>,
        upper_bound: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iterator> {
        let cell = self.cell()?;
        let owner = IterOwner { db: cell.borrow_owner().clone(), snapshot: Some(cell) };
        let bounds = (self.mode.enc_opt(lower_bound, "lower_bound")?, self.mode.enc_opt(upper_bound, "upper_bound")?);
        Iterator::open(py, owner, cf, bounds, self.mode, &self.handles)
    }

    /// Ends the snapshot (also at the end of a `with` block).
    fn release(&mut self) {
        drop(self.slot.lock().unwrap_or_else(PoisonError::into_inner).take());
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&mut self, _t: PyObject, _v: PyObject, _tb: PyObject) -> bool {
        self.release();
        false
    }
}

/// Which of key and value `__next__` yields.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Yield {
    Keys,
    Values,
    Items,
}

/// An iterator over a database, a snapshot or a transaction (RocksDB's
/// `Iterator`): `seek_to_first`, `seek_to_last`, `seek`, `seek_for_prev`,
/// `next`, `prev`, `valid`, `key`, `value`, `status`. `keys()`, `values()`
/// and `items()` return one positioned and set to yield as a Python
/// iterator.
#[pyclass(module = "ebb", unsendable)]
struct Iterator {
    /// Emptied when the database closes ([`Handles::close_all`]).
    cursor: Arc<CursorSlot>,
    mode: Mode,
    yields: Yield,
    backwards: bool,
    /// The next `__next__` moves first (the current entry was yielded).
    started: bool,
}

/// What an iterator moves over: the database (or a snapshot of it), or a
/// transaction's writes over the database.
enum Cursor {
    Db(IterCell),
    Txn(txn::TxnIterCell),
}

/// Evaluates `$body` with `$it` bound to the iterator's engine iterator,
/// whichever kind it is, as `Ok`; `Err` (closed) once its database closed.
/// The two kinds have the same methods; the body is compiled for each, so
/// that stepping a database's iterator costs no virtual call (the slot's
/// lock is uncontended: only `Db.close` takes it from elsewhere).
macro_rules! with_cursor {
    ($iter:expr, |$it:ident| $body:expr) => {{
        let mut slot = $iter.cursor.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.as_mut() {
            Some(Cursor::Db(cell)) => Ok(cell.with_dependent_mut(|_, $it| $body)),
            Some(Cursor::Txn(cell)) => Ok(cell.with_dependent_mut(|_, $it| $body)),
            None => Err(closed_db()),
        }
    }};
}

impl Iterator {
    fn open(
        py: Python<'_>,
        owner: IterOwner,
        cf: Option<&ColumnFamily>,
        (lower, upper): (Option<Vec<u8>>, Option<Vec<u8>>),
        mode: Mode,
        handles: &Handles,
    ) -> PyResult<Iterator> {
        let handle = cf.map(|c| c.handle.clone());
        let cell = py.allow_threads(move || {
            IterCell::new(owner, |o| {
                let mut ro = match &o.snapshot {
                    Some(s) => s.borrow_dependent().read_options(),
                    None => ebb::ReadOptions::default(),
                };
                ro.iterate_lower_bound = lower;
                ro.iterate_upper_bound = upper;
                match &handle {
                    Some(h) => o.db.base().iter_cf(h, ro),
                    None => o.db.base().iter(ro),
                }
            })
        });
        Ok(Iterator::over(Cursor::Db(cell), mode, handles))
    }

    /// An iterator, not positioned, yielding `(key, value)` pairs, kept in
    /// `handles` to end when its database closes.
    fn over(cursor: Cursor, mode: Mode, handles: &Handles) -> Iterator {
        Iterator { cursor: handles.keep_cursor(cursor), mode, yields: Yield::Items, backwards: false, started: false }
    }

    /// Positions the iterator at `from_key` (inclusive; the first or,
    /// `backwards`, the last key when not given) and sets what `__next__`
    /// yields: `keys()`, `values()` and `items()`.
    fn walk_from(mut self, from_key: Option<Vec<u8>>, backwards: bool, yields: Yield) -> PyResult<Iterator> {
        match (from_key, backwards) {
            (Some(k), false) => with_cursor!(self, |i| i.seek(&k))?,
            (Some(k), true) => with_cursor!(self, |i| i.seek_for_prev(&k))?,
            (None, false) => with_cursor!(self, |i| i.seek_to_first())?,
            (None, true) => with_cursor!(self, |i| i.seek_to_last())?,
        }
        self.check()?;
        self.yields = yields;
        self.backwards = backwards;
        Ok(self)
    }

    fn check(&mut self) -> PyResult<()> {
        with_cursor!(self, |it| it.status())?.map_err(to_py)
    }
}

#[pymethods]
impl Iterator {
    fn seek_to_first(&mut self) -> PyResult<()> {
        with_cursor!(self, |it| it.seek_to_first())?;
        self.started = false;
        self.check()
    }

    fn seek_to_last(&mut self) -> PyResult<()> {
        with_cursor!(self, |it| it.seek_to_last())?;
        self.started = false;
        self.check()
    }

    /// Positions at the first key at or after `key`.
    fn seek(&mut self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = self.mode.enc(key, "key")?;
        with_cursor!(self, |it| it.seek(&k))?;
        self.started = false;
        self.check()
    }

    /// Positions at the last key at or before `key`.
    fn seek_for_prev(&mut self, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let k = self.mode.enc(key, "key")?;
        with_cursor!(self, |it| it.seek_for_prev(&k))?;
        self.started = false;
        self.check()
    }

    fn valid(&mut self) -> PyResult<bool> {
        with_cursor!(self, |it| it.valid())
    }

    fn next(&mut self) -> PyResult<()> {
        if !self.valid()? {
            return Err(InvalidArgumentError::new_err("next on an iterator that is not valid"));
        }
        with_cursor!(self, |it| it.next())?;
        self.check()
    }

    fn prev(&mut self) -> PyResult<()> {
        if !self.valid()? {
            return Err(InvalidArgumentError::new_err("prev on an iterator that is not valid"));
        }
        with_cursor!(self, |it| it.prev())?;
        self.check()
    }

    fn key(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        if !self.valid()? {
            return Err(InvalidArgumentError::new_err("key of an iterator that is not valid"));
        }
        let mode = self.mode;
        with_cursor!(self, |it| mode.dec(py, it.key()))?
    }

    fn value(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        if !self.valid()? {
            return Err(InvalidArgumentError::new_err("value of an iterator that is not valid"));
        }
        let mode = self.mode;
        with_cursor!(self, |it| mode.dec(py, it.value()))?
    }

    /// The current entry's columns as a dict by name (RocksDB's
    /// `Iterator::columns`): an entity's, or for a plain value one column
    /// named `""`.
    fn columns(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        if !self.valid()? {
            return Err(InvalidArgumentError::new_err("columns of an iterator that is not valid"));
        }
        let mode = self.mode;
        with_cursor!(self, |it| entity_dict(py, mode, &it.columns()))?
    }

    /// Raises the error that stopped the iterator, if any.
    fn status(&mut self) -> PyResult<()> {
        self.check()
    }

    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        // One pass through the iterator per item: step, check, decode.
        let (step, back, yields, mode) = (self.started, self.backwards, self.yields, self.mode);
        self.started = true;
        with_cursor!(self, |it| {
            if step && it.valid() {
                if back {
                    it.prev()
                } else {
                    it.next()
                }
            }
            if !it.valid() {
                it.status().map_err(to_py)?;
                return Err(PyStopIteration::new_err(()));
            }
            Ok(match (yields, mode) {
                (Yield::Items, Mode::Bytes) => {
                    PyTuple::new(py, [PyBytes::new(py, it.key()), PyBytes::new(py, it.value())])?.into_any().unbind()
                }
                (Yield::Keys, _) => mode.dec(py, it.key())?,
                (Yield::Values, _) => mode.dec(py, it.value())?,
                (Yield::Items, _) => {
                    PyTuple::new(py, [mode.dec(py, it.key())?, mode.dec(py, it.value())?])?.into_any().unbind()
                }
            })
        })?
    }
}

/// An open Ebb database with a dict-like face (rocksdict's `Rdict`):
/// `db[key] = value`, `db[key]`, `del db[key]`, `key in db`, `get`,
/// `keys()`, `values()`, `items()`, plus batches, snapshots, iterators,
/// column families, `flush`, `compact_range`, `get_property`, `set_options`.
/// A context manager that closes the database. `TransactionDb` and
/// `OptimisticTransactionDb` (txn.rs) are its subclasses.
#[pyclass(module = "ebb", subclass)]
struct Db {
    db: Option<DbRef>,
    path: String,
    mode: Mode,
    /// The transactions begun on a transaction database, which `close`
    /// ends (an empty list for a plain database).
    transactions: Mutex<Vec<Weak<txn::TxnShared>>>,
    /// The iterators and snapshots made from it, which `close` ends.
    handles: Arc<Handles>,
}

impl Db {
    fn db(&self) -> PyResult<&DbRef> {
        self.db.as_ref().ok_or_else(|| EbbError::new_err(format!("the database at {} is closed", self.path)))
    }

    /// Opens the database at `path` with the column families it has (each
    /// with `options`), through `open` (`ebb::Db::open_cf`, or a
    /// transaction database's).
    fn open_with(
        py: Python<'_>,
        path: &str,
        options: Option<&Options>,
        mode: &str,
        open: impl FnOnce(&str, ebb::Options, &[(&str, ebb::Options)]) -> ebb::Result<DbRef> + Send,
    ) -> PyResult<Db> {
        let mode = Mode::parse(mode)?;
        let options = options.map_or_else(|| Options::new(None).map(|o| o.inner), |o| Ok(o.inner.clone()))?;
        let p = path.to_string();
        let db = py
            .allow_threads(|| {
                let names = if std::path::Path::new(&p).join("CURRENT").exists() {
                    ebb::Db::list_column_families(&p, &options)?
                } else {
                    Vec::new()
                };
                let families: Vec<(&str, ebb::Options)> = names
                    .iter()
                    .map(String::as_str)
                    .filter(|n| *n != ebb::DEFAULT_COLUMN_FAMILY)
                    .map(|n| (n, options.clone()))
                    .collect();
                open(&p, options.clone(), &families)
            })
            .map_err(to_py)?;
        Ok(Db {
            db: Some(db),
            path: path.to_string(),
            mode,
            transactions: Mutex::new(Vec::new()),
            handles: Arc::default(),
        })
    }

    /// Keeps `shared` (a group of transactions) to be ended at `close`.
    fn register(&self, shared: &Arc<txn::TxnShared>) {
        let mut list = self.transactions.lock().unwrap_or_else(PoisonError::into_inner);
        list.retain(|w| w.strong_count() > 0);
        list.push(Arc::downgrade(shared));
    }
}

#[pymethods]
impl Db {
    /// Opens (by default creating) the database at `path`, with the column
    /// families it has (each with `options`); keys and values cross in
    /// `mode`: `"bytes"`, `"str"` or `"pickle"` (see `Mode` in docs/python.md).
    #[new]
    #[pyo3(signature = (path, options = None, mode = "bytes"))]
    fn new(py: Python<'_>, path: &str, options: Option<&Options>, mode: &str) -> PyResult<Self> {
        Db::open_with(py, path, options, mode, |p, o, families| {
            ebb::Db::open_cf(p, o, families).map(|db| DbRef::Plain(Arc::new(db)))
        })
    }

    #[pyo3(signature = (key, value, cf = None, sync = false))]
    fn put(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        cf: Option<&ColumnFamily>,
        sync: bool,
    ) -> PyResult<()> {
        let db = self.db()?;
        let wo = ebb::WriteOptions { sync, disable_wal: false };
        let handle = cf.map(|cf| &cf.handle);
        let put = |k: &[u8], v: &[u8]| db.put(handle, k, v, &wo);
        // `bytes` objects are immutable: their contents are read in place,
        // without the GIL, while the arguments keep them alive.
        if let (Mode::Bytes, Ok(k), Ok(v)) = (self.mode, key.downcast::<PyBytes>(), value.downcast::<PyBytes>()) {
            let (k, v) = (k.as_bytes(), v.as_bytes());
            return py.allow_threads(|| put(k, v)).map_err(to_py);
        }
        let (k, v) = (self.mode.enc(key, "key")?, self.mode.enc(value, "value")?);
        py.allow_threads(|| put(&k, &v)).map_err(to_py)
    }

    /// The value of `key`, or `default` when it has none.
    #[pyo3(signature = (key, default = None, cf = None))]
    fn get(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
        cf: Option<&ColumnFamily>,
    ) -> PyResult<PyObject> {
        Ok(match self.read(key, cf)? {
            Some(v) => self.mode.dec(py, &v)?,
            None => default.unwrap_or_else(|| py.None()),
        })
    }

    /// Sets `key` to a wide-column entity: `columns` a dict (or pairs) of
    /// column name (`bytes` or `str`) to value; the column named `""` is
    /// what `get` reads.
    #[pyo3(signature = (key, columns, cf = None, sync = false))]
    fn put_entity(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        columns: &Bound<'_, PyAny>,
        cf: Option<&ColumnFamily>,
        sync: bool,
    ) -> PyResult<()> {
        let k = self.mode.enc(key, "key")?;
        let cols = entity_columns(self.mode, columns)?;
        let db = self.db()?.clone();
        let wo = ebb::WriteOptions { sync, disable_wal: false };
        let handle = cf.map(|cf| &cf.handle);
        py.allow_threads(|| db.put_entity(handle, &k, &column_refs(&cols), &wo)).map_err(to_py)
    }

    /// The columns of `key` as a dict by name (a plain value is one column
    /// named `""`), or `default` when it has none.
    #[pyo3(signature = (key, default = None, cf = None))]
    fn get_entity(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        default: Option<PyObject>,
        cf: Option<&ColumnFamily>,
    ) -> PyResult<PyObject> {
        let k = self.mode.enc(key, "key")?;
        let db = self.db()?.clone();
        let ro = ebb::ReadOptions::default();
        let got = py
            .allow_threads(|| match cf {
                Some(cf) => db.base().get_entity_cf_opt(&cf.handle, &k, &ro),
                None => db.base().get_entity(&k),
            })
            .map_err(to_py)?;
        match got {
            Some(cols) => entity_dict(py, self.mode, &cols),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    #[pyo3(signature = (key, cf = None, sync = false))]
    fn delete(&self, py: Python<'_>, key: &Bound<'_, PyAny>, cf: Option<&ColumnFamily>, sync: bool) -> PyResult<()> {
        let k = self.mode.enc(key, "key")?;
        let db = self.db()?.clone();
        let wo = ebb::WriteOptions { sync, disable_wal: false };
        let handle = cf.map(|cf| &cf.handle);
        py.allow_threads(|| db.delete(handle, &k, &wo)).map_err(to_py)
    }

    /// Merges `operand` into `key` with the family's merge operator
    /// (`Options(merge_operator="uint64add")`).
    #[pyo3(signature = (key, operand, cf = None))]
    fn merge(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        operand: &Bound<'_, PyAny>,
        cf: Option<&ColumnFamily>,
    ) -> PyResult<()> {
        let (k, v) = (self.mode.enc(key, "key")?, self.mode.enc(operand, "operand")?);
        let db = self.db()?.clone();
        let wo = ebb::WriteOptions::default();
        let handle = cf.map(|cf| &cf.handle);
        py.allow_threads(|| db.merge(handle, &k, &v, &wo)).map_err(to_py)
    }

    /// Deletes every key in `[begin, end)`.
    #[pyo3(signature = (begin, end, cf = None))]
    fn delete_range(
        &self,
        py: Python<'_>,
        begin: &Bound<'_, PyAny>,
        end: &Bound<'_, PyAny>,
        cf: Option<&ColumnFamily>,
    ) -> PyResult<()> {
        let (b, e) = (self.mode.enc(begin, "begin")?, self.mode.enc(end, "end")?);
        let db = self.db()?.clone();
        let wo = ebb::WriteOptions::default();
        // A range deletion takes no lock, in a pessimistic database too
        // (docs/transactions.md).
        py.allow_threads(|| match cf {
            Some(cf) => db.base().delete_range_cf_opt(&cf.handle, &b, &e, &wo),
            None => db.base().delete_range_opt(&b, &e, &wo),
        })
        .map_err(to_py)
    }

    /// Applies `batch` atomically.
    #[pyo3(signature = (batch, sync = false))]
    fn write(&self, py: Python<'_>, batch: &WriteBatch, sync: bool) -> PyResult<()> {
        let db = self.db()?.clone();
        let wo = ebb::WriteOptions { sync, disable_wal: false };
        let b = &batch.inner;
        py.allow_threads(|| db.write(b, &wo)).map_err(to_py)
    }

    fn __getitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<PyObject> {
        match self.lookup(py, key)? {
            Some(v) => self.mode.dec(py, v.as_ref()),
            None => Err(PyKeyError::new_err(key.clone().unbind())),
        }
    }

    fn __setitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<()> {
        self.put(py, key, value, None, false)
    }

    fn __delitem__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        if !self.__contains__(py, key)? {
            return Err(PyKeyError::new_err(key.clone().unbind()));
        }
        self.delete(py, key, None, false)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.lookup(py, key)?.is_some())
    }

    /// An iterator, not positioned (call a `seek`), reading at the newest
    /// state, within `[lower_bound, upper_bound)` when given.
    #[pyo3(signature = (cf = None, lower_bound = None, upper_bound = None))]
    fn iter(
        &self,
        py: Python<'_>,
        cf: Option<&ColumnFamily>,
        lower_bound: Option<&Bound<'_, PyAny>>,
        upper_bound: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iterator> {
        let owner = IterOwner { db: self.db()?.clone(), snapshot: None };
        let bounds = (self.mode.enc_opt(lower_bound, "lower_bound")?, self.mode.enc_opt(upper_bound, "upper_bound")?);
        Iterator::open(py, owner, cf, bounds, self.mode, &self.handles)
    }

    /// The keys from `from_key` (inclusive; the first or, `backwards`, the
    /// last when not given), in order or backwards.
    #[pyo3(signature = (from_key = None, backwards = false, cf = None, lower_bound = None, upper_bound = None))]
    fn keys(
        &self,
        py: Python<'_>,
        from_key: Option<&Bound<'_, PyAny>>,
        backwards: bool,
        cf: Option<&ColumnFamily>,
        lower_bound: Option<&Bound<'_, PyAny>>,
        upper_bound: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iterator> {
        self.walk(py, Yield::Keys, from_key, backwards, cf, lower_bound, upper_bound)
    }

    /// As `keys`, yielding values.
    #[pyo3(signature = (from_key = None, backwards = false, cf = None, lower_bound = None, upper_bound = None))]
    fn values(
        &self,
        py: Python<'_>,
        from_key: Option<&Bound<'_, PyAny>>,
        backwards: bool,
        cf: Option<&ColumnFamily>,
        lower_bound: Option<&Bound<'_, PyAny>>,
        upper_bound: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iterator> {
        self.walk(py, Yield::Values, from_key, backwards, cf, lower_bound, upper_bound)
    }

    /// As `keys`, yielding `(key, value)` pairs.
    #[pyo3(signature = (from_key = None, backwards = false, cf = None, lower_bound = None, upper_bound = None))]
    fn items(
        &self,
        py: Python<'_>,
        from_key: Option<&Bound<'_, PyAny>>,
        backwards: bool,
        cf: Option<&ColumnFamily>,
        lower_bound: Option<&Bound<'_, PyAny>>,
        upper_bound: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Iterator> {
        self.walk(py, Yield::Items, from_key, backwards, cf, lower_bound, upper_bound)
    }

    fn __iter__(&self, py: Python<'_>) -> PyResult<Iterator> {
        self.walk(py, Yield::Keys, None, false, None, None, None)
    }

    /// A snapshot of the newest state (a context manager).
    fn snapshot(&self) -> PyResult<Snapshot> {
        let db = self.db()?.clone();
        let slot = self.handles.keep_snapshot(SnapshotCell::new(db, |db| db.base().snapshot()));
        Ok(Snapshot { slot, mode: self.mode, handles: Arc::clone(&self.handles) })
    }

    /// Flushes the memtables (of `cf`, or the default family) and waits.
    #[pyo3(signature = (cf = None))]
    fn flush(&self, py: Python<'_>, cf: Option<&ColumnFamily>) -> PyResult<()> {
        let db = self.db()?.clone();
        py.allow_threads(|| match cf {
            Some(cf) => db.base().flush_cf(&cf.handle, true),
            None => db.base().flush(true),
        })
        .map_err(to_py)
    }

    /// Recovers from a background error (a failed write, flush or
    /// compaction, e.g. on a full disk) without a reopen, once its cause is
    /// gone: every memtable is flushed and writes are accepted again
    /// (RocksDB's `DB::Resume`). Raises the error when it cannot.
    fn resume(&self, py: Python<'_>) -> PyResult<()> {
        let db = self.db()?.clone();
        py.allow_threads(|| db.base().resume()).map_err(to_py)
    }

    /// Compacts `[begin, end]` (everything when not given).
    #[pyo3(signature = (begin = None, end = None, cf = None))]
    fn compact_range(
        &self,
        py: Python<'_>,
        begin: Option<&Bound<'_, PyAny>>,
        end: Option<&Bound<'_, PyAny>>,
        cf: Option<&ColumnFamily>,
    ) -> PyResult<()> {
        let (b, e) = (self.mode.enc_opt(begin, "begin")?, self.mode.enc_opt(end, "end")?);
        let db = self.db()?.clone();
        py.allow_threads(|| match cf {
            Some(cf) => db.base().compact_range_cf(&cf.handle, b.as_deref(), e.as_deref()),
            None => db.base().compact_range(b.as_deref(), e.as_deref()),
        })
        .map_err(to_py)
    }

    /// A property (`ebb.stats`, `ebb.num-files-at-level0`, ...), or None.
    #[pyo3(signature = (name, cf = None))]
    fn get_property(&self, name: &str, cf: Option<&ColumnFamily>) -> PyResult<Option<String>> {
        Ok(self.db()?.get_property(name, cf.map(|cf| &cf.handle)))
    }

    /// Changes dynamic options: `set_options({"write_buffer_size": 1 << 20})`.
    fn set_options(&self, changes: &Bound<'_, PyDict>) -> PyResult<()> {
        let mut pairs = Vec::new();
        for (name, value) in changes.iter() {
            pairs.push((name.extract::<String>()?, option_text(&value)?));
        }
        let refs: Vec<(&str, &str)> = pairs.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        self.db()?.base().set_options(&refs).map_err(to_py)
    }

    /// Creates column family `name` (with `options`, or the defaults).
    #[pyo3(signature = (name, options = None))]
    fn create_column_family(&self, name: &str, options: Option<&Options>) -> PyResult<ColumnFamily> {
        let o = options.map_or_else(ebb::Options::default, |o| o.inner.clone());
        let handle = self.db()?.create_column_family(name, &o).map_err(to_py)?;
        Ok(ColumnFamily { handle })
    }

    /// The column family `name`.
    fn get_column_family(&self, name: &str) -> PyResult<ColumnFamily> {
        self.db()?
            .base()
            .cf_handle(name)
            .map(|handle| ColumnFamily { handle })
            .ok_or_else(|| InvalidArgumentError::new_err(format!("no column family {name:?}")))
    }

    fn drop_column_family(&self, cf: &ColumnFamily) -> PyResult<()> {
        self.db()?.drop_column_family(&cf.handle).map_err(to_py)
    }

    /// The names of the column families.
    fn column_families(&self) -> PyResult<Vec<String>> {
        Ok(self.db()?.base().column_family_names())
    }

    /// Makes an openable copy of the database in `dir`, which must not
    /// exist, while it runs (docs/operations.md, "Checkpoints").
    fn checkpoint(&self, py: Python<'_>, dir: &str) -> PyResult<()> {
        let db = self.db()?.clone();
        py.allow_threads(|| ebb::Checkpoint::create(db.base(), dir)).map(drop).map_err(to_py)
    }

    /// The database directory.
    #[getter]
    fn path(&self) -> String {
        self.path.clone()
    }

    /// Closes the database; later calls fail. Transactions not committed
    /// end as if dropped (rolled back; prepared ones stay prepared, found
    /// again at the next open). Iterators and snapshots still open, and a
    /// transaction busy in another thread or with an iterator open over
    /// it, keep the database open until they are gone.
    fn close(&mut self, py: Python<'_>) -> PyResult<()> {
        // Iterators first: a transaction's iterator holds its transaction.
        self.handles.close_all();
        let transactions = std::mem::take(&mut *self.transactions.lock().unwrap_or_else(PoisonError::into_inner));
        for shared in transactions.iter().filter_map(Weak::upgrade) {
            shared.end();
        }
        if let Some(db) = self.db.take() {
            py.allow_threads(|| db.close()).map_err(to_py)?;
        }
        Ok(())
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(&mut self, py: Python<'_>, _t: PyObject, _v: PyObject, _tb: PyObject) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(format!("{}({:?})", slf.get_type().name()?, slf.borrow().path))
    }
}

impl Db {
    /// The stored value of `key` in the default family.
    fn lookup(&self, _py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<Option<ebb::PinnableSlice>> {
        self.read(key, None)
    }

    /// A point read, pinned in its block (no copy). It keeps the GIL: a
    /// point read is short, and handing the GIL over and back costs more
    /// than it does (docs/python.md, "Threads").
    fn read(&self, key: &Bound<'_, PyAny>, cf: Option<&ColumnFamily>) -> PyResult<Option<ebb::PinnableSlice>> {
        let db = self.db()?.base();
        let ro = ebb::ReadOptions::default();
        let get = |k: &[u8]| match cf {
            Some(cf) => db.get_pinned_cf_opt(&cf.handle, k, &ro),
            None => db.get_pinned(k),
        };
        let got = match (self.mode, key.downcast::<PyBytes>()) {
            (Mode::Bytes, Ok(b)) => get(b.as_bytes()),
            _ => get(&self.mode.enc(key, "key")?),
        };
        got.map_err(to_py)
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
    ) -> PyResult<Iterator> {
        let from_key = self.mode.enc_opt(from_key, "from_key")?;
        self.iter(py, cf, lower_bound, upper_bound)?.walk_from(from_key, backwards, yields)
    }
}

/// Incremental backups of databases in one directory
/// (docs/operations.md, "Backups"): `create_new_backup`, `backup_info`,
/// `verify_backup`, `restore_db_from_backup`,
/// `restore_db_from_latest_backup`, `delete_backup`, `purge_old_backups`.
#[pyclass(module = "ebb")]
struct BackupEngine {
    inner: ebb::BackupEngine,
}

#[pymethods]
impl BackupEngine {
    #[new]
    fn new(py: Python<'_>, backup_dir: &str) -> PyResult<Self> {
        let dir = backup_dir.to_string();
        let inner = py.allow_threads(|| ebb::BackupEngine::open_dir(dir)).map_err(to_py)?;
        Ok(BackupEngine { inner })
    }

    /// Backs `db` up; returns the new backup's id.
    #[pyo3(signature = (db, flush_before_backup = true))]
    fn create_new_backup(&mut self, py: Python<'_>, db: &Db, flush_before_backup: bool) -> PyResult<u32> {
        let handle = db.db()?.clone();
        let inner = &mut self.inner;
        py.allow_threads(|| inner.create_new_backup(handle.base(), flush_before_backup)).map_err(to_py)
    }

    /// One dict per backup, oldest first: `backup_id`, `timestamp`,
    /// `sequence`, `size`, `number_files`.
    fn backup_info<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        self.inner
            .backup_info()
            .into_iter()
            .map(|b| {
                let d = PyDict::new(py);
                d.set_item("backup_id", b.backup_id)?;
                d.set_item("timestamp", b.timestamp)?;
                d.set_item("sequence", b.sequence)?;
                d.set_item("size", b.size)?;
                d.set_item("number_files", b.number_files)?;
                Ok(d)
            })
            .collect()
    }

    fn verify_backup(&self, py: Python<'_>, backup_id: u32) -> PyResult<()> {
        let inner = &self.inner;
        py.allow_threads(|| inner.verify_backup(backup_id)).map_err(to_py)
    }

    #[pyo3(signature = (backup_id, db_dir, overwrite = false))]
    fn restore_db_from_backup(&self, py: Python<'_>, backup_id: u32, db_dir: &str, overwrite: bool) -> PyResult<()> {
        let (inner, options) = (&self.inner, ebb::RestoreOptions { overwrite });
        py.allow_threads(|| inner.restore_db_from_backup(backup_id, db_dir, &options)).map_err(to_py)
    }

    #[pyo3(signature = (db_dir, overwrite = false))]
    fn restore_db_from_latest_backup(&self, py: Python<'_>, db_dir: &str, overwrite: bool) -> PyResult<()> {
        let (inner, options) = (&self.inner, ebb::RestoreOptions { overwrite });
        py.allow_threads(|| inner.restore_db_from_latest_backup(db_dir, &options)).map_err(to_py)
    }

    fn delete_backup(&mut self, backup_id: u32) -> PyResult<()> {
        self.inner.delete_backup(backup_id).map_err(to_py)
    }

    fn purge_old_backups(&mut self, keep: usize) -> PyResult<()> {
        self.inner.purge_old_backups(keep).map_err(to_py)
    }
}

/// Destroys the database at `path` (its files; the directory if left empty).
#[pyfunction]
#[pyo3(signature = (path, options = None))]
fn destroy(path: &str, options: Option<&Options>) -> PyResult<()> {
    let o = options.map_or_else(ebb::Options::default, |o| o.inner.clone());
    ebb::Db::destroy(path, &o).map_err(to_py)
}

#[pymodule]
fn _ebb(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<Db>()?;
    m.add_class::<Options>()?;
    m.add_class::<WriteBatch>()?;
    m.add_class::<Snapshot>()?;
    m.add_class::<Iterator>()?;
    m.add_class::<ColumnFamily>()?;
    m.add_class::<BackupEngine>()?;
    m.add_class::<txn::TransactionDb>()?;
    m.add_class::<txn::OptimisticTransactionDb>()?;
    m.add_class::<txn::Transaction>()?;
    m.add_function(wrap_pyfunction!(destroy, m)?)?;
    m.add("EbbError", py.get_type::<EbbError>())?;
    m.add("CorruptionError", py.get_type::<CorruptionError>())?;
    m.add("BusyError", py.get_type::<BusyError>())?;
    m.add("DeadlockError", py.get_type::<DeadlockError>())?;
    m.add("TimedOutError", py.get_type::<TimedOutError>())?;
    m.add("TryAgainError", py.get_type::<TryAgainError>())?;
    m.add("ExpiredError", py.get_type::<ExpiredError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("InvalidArgumentError", py.get_type::<InvalidArgumentError>())?;
    m.add("NotSupportedError", py.get_type::<NotSupportedError>())?;
    m.add("IOError", py.get_type::<IOError>())?;
    Ok(())
}
