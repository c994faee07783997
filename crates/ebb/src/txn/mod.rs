//! Transactions (RocksDB's `utilities/transactions`), built over the
//! database handle: a write batch with an index over its keys
//! ([`WriteBatchWithIndex`]), read-your-own-writes on top of it, and the
//! two transaction databases, optimistic and pessimistic
//! (docs/transactions.md).

pub(crate) mod lock_manager;
mod wbwi;

pub use lock_manager::{DeadlockInfo, DeadlockPath, KeyLockInfo};
pub use wbwi::{BaseDeltaIterator, WriteBatchWithIndex};
