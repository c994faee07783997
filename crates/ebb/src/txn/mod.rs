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

use std::path::Path;

use crate::db::{ColumnFamilyHandle, Db};
use crate::error::Result;
use crate::options::{ColumnFamilyOptions, Options};

/// A `max_write_buffer_size_to_maintain` of 0 becomes -1 (the whole write
/// buffer) in a transaction database, as RocksDB's transaction databases
/// make it, so that conflict checks can look back over flushed memtables.
fn keep_history(max_write_buffer_size_to_maintain: &mut i64) {
    if *max_write_buffer_size_to_maintain == 0 {
        *max_write_buffer_size_to_maintain = -1;
    }
}

/// Transactions do not take keys with timestamps (docs/timestamps.md):
/// `NotSupported` for a family whose comparator has them.
fn refuse_timestamps(name: &str, options: &ColumnFamilyOptions) -> Result<()> {
    if options.user_comparator().timestamp_size() > 0 {
        return Err(crate::error::Error::NotSupported(format!(
            "transactions in column family '{name}', whose keys carry timestamps"
        )));
    }
    Ok(())
}

/// [`Db::open`] for a transaction database (memtable history kept).
fn open_db(path: &Path, mut options: Options) -> Result<Db> {
    keep_history(&mut options.max_write_buffer_size_to_maintain);
    refuse_timestamps("default", &options.cf_options())?;
    Db::open(path, options)
}

/// [`Db::open_cf`] for a transaction database (memtable history kept in
/// every family).
fn open_db_cf<F>(path: &Path, mut options: Options, families: &[(&str, F)]) -> Result<Db>
where
    for<'a> &'a F: Into<ColumnFamilyOptions>,
{
    keep_history(&mut options.max_write_buffer_size_to_maintain);
    refuse_timestamps("default", &options.cf_options())?;
    let families: Vec<(&str, ColumnFamilyOptions)> = families
        .iter()
        .map(|(n, o)| {
            let mut o: ColumnFamilyOptions = o.into();
            keep_history(&mut o.max_write_buffer_size_to_maintain);
            (*n, o)
        })
        .collect();
    for (n, o) in &families {
        refuse_timestamps(n, o)?;
    }
    Db::open_cf::<ColumnFamilyOptions>(path, options, &families)
}

/// [`Db::create_column_family`] for a transaction database (memtable
/// history kept).
fn create_family(db: &Db, name: &str, options: ColumnFamilyOptions) -> Result<ColumnFamilyHandle> {
    let mut o = options;
    keep_history(&mut o.max_write_buffer_size_to_maintain);
    refuse_timestamps(name, &o)?;
    db.create_column_family(name, o)
}
