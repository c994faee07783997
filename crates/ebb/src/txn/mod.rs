//! Transactions (RocksDB's `utilities/transactions`), built over the
//! database handle: a write batch with an index over its keys
//! ([`WriteBatchWithIndex`]), read-your-own-writes on top of it, and the
//! two transaction databases, optimistic ([`OptimisticTransactionDb`]) and
//! pessimistic ([`TransactionDb`]), whose transactions are
//! [`Transaction`]s (docs/transactions.md).

pub(crate) mod lock_manager;
mod optimistic;
mod pessimistic;
mod transaction;
mod wbwi;

pub use lock_manager::{DeadlockInfo, DeadlockPath, KeyLockInfo};
pub use optimistic::{
    OccValidationPolicy, OptimisticTransactionDb, OptimisticTransactionDbOptions, OptimisticTransactionOptions,
};
pub use pessimistic::{TransactionDb, TransactionDbOptions, TransactionOptions};
pub use transaction::{Transaction, TransactionState};
pub use wbwi::{BaseDeltaIterator, BatchEntries, BatchValue, WriteBatchWithIndex};
