//! `--user_timestamp_size=8` (db_bench's user-defined timestamps): every
//! key carries a u64 timestamp in both engines' bytewise u64-timestamp
//! comparator (`leveldb.BytewiseComparator.u64ts`).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::bail;
use crate::error::Result;
use crate::flags::Flags;

/// The timestamps of a run (db_bench's `TimestampEmulator`): each write
/// takes the next one, starting from the wall clock in nanoseconds so that
/// a later run on the same database writes above an earlier one; reads are
/// at the latest (db_bench's default `--read_with_latest_user_timestamp`),
/// which sees what a read at the newest timestamp written sees.
pub struct Timestamps {
    next: AtomicU64,
}

impl Timestamps {
    /// The run's timestamps when `--user_timestamp_size` asks for them (8),
    /// `None` for 0; another size is refused, as are the features the
    /// benchmarks do not run with timestamps.
    pub fn from_flags(flags: &Flags) -> Result<Option<Timestamps>> {
        match flags.i64("user_timestamp_size") {
            0 => return Ok(None),
            8 => {}
            n => bail!("flag --user_timestamp_size={n}: 0 or 8 (a u64 timestamp)"),
        }
        if flags.i64("num_column_families") != 1 {
            bail!("--user_timestamp_size=8 runs with one column family (--num_column_families=1)");
        }
        if flags.bool("optimistic_transaction_db") || flags.bool("transaction_db") {
            bail!("--user_timestamp_size=8 runs without a transaction database");
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        Ok(Some(Timestamps { next: AtomicU64::new(now) }))
    }

    /// A write's timestamp.
    pub fn write(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// A read's timestamp: the latest.
    pub fn read(&self) -> u64 {
        u64::MAX
    }
}
