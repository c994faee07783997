//! Transactions behind the engine boundary: what the transaction benchmarks
//! (`randomtransaction`, `transfertransaction`) need from a transaction
//! database, so the same client code drives Ebb's
//! `OptimisticTransactionDb` / `TransactionDb` and RocksDB's
//! `OptimisticTransactionDB` / `TransactionDB`.
//!
//! An engine is opened as a transaction database with `--transaction_db`
//! (pessimistic) or `--optimistic_transaction_db`, as db_bench opens its
//! database; every benchmark then runs on it, and [`super::Engine::transactions`]
//! hands out its transactions.
//!
//! Reads: both [`Transaction::get`] and [`Transaction::get_for_update`] read
//! at the transaction's snapshot when it has one (db_bench's
//! `RandomTransactionInserter` reads through `read_options_.snapshot` set to
//! the transaction's), the latest state otherwise, with the transaction's
//! own writes over what they read. `get_for_update` locks exclusively.
//!
//! Thread-safety: a [`TransactionDb`] is shared by the client threads; each
//! [`Transaction`] belongs to the thread that began it.

use crate::error::{BenchError, Result};
use crate::flags::Flags;

use super::WriteOpts;

/// Which transaction database an engine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionDbKind {
    /// RocksDB `OptimisticTransactionDB` (`--optimistic_transaction_db`):
    /// conflicts are found at commit.
    Optimistic,
    /// RocksDB `TransactionDB` (`--transaction_db`): keys are locked as they
    /// are touched; two-phase commit.
    Pessimistic,
}

impl TransactionDbKind {
    /// The flag that asks for it.
    pub fn flag(self) -> &'static str {
        match self {
            TransactionDbKind::Optimistic => "optimistic_transaction_db",
            TransactionDbKind::Pessimistic => "transaction_db",
        }
    }
}

/// The transaction database the flags ask for: `None` for a plain database.
/// Both flags at once are refused (db_bench would open the optimistic one).
pub fn kind_from_flags(flags: &Flags) -> Result<Option<TransactionDbKind>> {
    match (flags.bool("optimistic_transaction_db"), flags.bool("transaction_db")) {
        (true, true) => crate::bail!(
            "--optimistic_transaction_db and --transaction_db each open the database as a kind of transaction \
             database: give one of them"
        ),
        (true, false) => Ok(Some(TransactionDbKind::Optimistic)),
        (false, true) => Ok(Some(TransactionDbKind::Pessimistic)),
        (false, false) => Ok(None),
    }
}

/// Options of one transaction: RocksDB's `TransactionOptions` for a
/// pessimistic database, `OptimisticTransactionOptions` (the snapshot only)
/// for an optimistic one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransactionOpts {
    /// Take a snapshot at begin (`set_snapshot`).
    pub set_snapshot: bool,
    /// Milliseconds to wait for a lock (pessimistic; `lock_timeout`).
    pub lock_timeout_ms: i64,
    /// Look for a deadlock before waiting for a lock (pessimistic;
    /// `deadlock_detect`).
    pub deadlock_detect: bool,
}

/// Why a transaction's call failed. The first five are the outcomes a
/// benchmark counts and goes on from (RocksDB's `Status` codes); `Other` is
/// an error that stops the benchmark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransactionError {
    /// A conflict: a key written by another after the snapshot or after it
    /// was read (`Status::Busy`), or too many locks.
    Busy,
    /// Waiting for a lock would close a cycle of waits (`Status::Busy` with
    /// subcode `kDeadlock`; pessimistic with deadlock detection).
    Deadlock,
    /// A lock was not granted within the lock timeout (`Status::TimedOut`).
    TimedOut,
    /// The memtable history does not reach back far enough to tell
    /// (`Status::TryAgain`).
    TryAgain,
    /// The transaction expired and its locks were taken (`Status::Expired`).
    Expired,
    /// Anything else.
    Other(BenchError),
}

impl TransactionError {
    /// The error as the client's, for a failure that stops the benchmark.
    pub fn into_bench_error(self, what: &str) -> BenchError {
        match self {
            TransactionError::Other(e) => e.context(what),
            other => BenchError::new(format!("{what}: {other:?}")),
        }
    }
}

impl From<BenchError> for TransactionError {
    fn from(e: BenchError) -> Self {
        TransactionError::Other(e)
    }
}

/// A transaction call's result.
pub type TransactionResult<T> = std::result::Result<T, TransactionError>;

/// A database whose writes can be grouped in transactions.
pub trait TransactionDb: Send + Sync {
    /// Optimistic or pessimistic.
    fn kind(&self) -> TransactionDbKind;
    /// Begins a transaction whose commit writes with `wo`.
    fn begin(&self, wo: WriteOpts, options: &TransactionOpts) -> Box<dyn Transaction + '_>;
}

/// One transaction. Dropping it without a commit rolls it back.
pub trait Transaction {
    /// Names it, for two-phase commit (pessimistic only; RocksDB `SetName`).
    fn set_name(&mut self, name: &[u8]) -> TransactionResult<()>;
    /// Reads `key` (RocksDB `Transaction::Get`): tracks and locks nothing.
    fn get(&mut self, key: &[u8]) -> TransactionResult<Option<Vec<u8>>>;
    /// Reads `key` and keeps it from others until the transaction ends
    /// (RocksDB `GetForUpdate`, exclusive).
    fn get_for_update(&mut self, key: &[u8]) -> TransactionResult<Option<Vec<u8>>>;
    /// Writes `key` (locking it, pessimistic).
    fn put(&mut self, key: &[u8], value: &[u8]) -> TransactionResult<()>;
    /// Deletes `key` (locking it, pessimistic).
    fn delete(&mut self, key: &[u8]) -> TransactionResult<()>;
    /// Writes the transaction's updates to the WAL, prepared, under its
    /// name (pessimistic only; RocksDB `Prepare`).
    fn prepare(&mut self) -> TransactionResult<()>;
    /// Commits.
    fn commit(self: Box<Self>) -> TransactionResult<()>;
    /// Rolls back.
    fn rollback(self: Box<Self>) -> TransactionResult<()>;
}
