//! Column families (RocksDB's): named key spaces of one database, each with
//! its own memtables, version (levels of files), options, flushes and
//! compactions, sharing the WAL, the MANIFEST, the sequence numbers and the
//! background threads.
//!
//! A write batch may span families and is still one WAL record, so it is
//! atomic across them, also through a crash. Each family records in the
//! MANIFEST the WAL number below which its data is all in tables (its log
//! number); a WAL is deleted once every live family's log number is above it.
//!
//! Invariants:
//! 1. Family ids are never reused (the MANIFEST keeps the largest id handed
//!    out), so a WAL entry of a dropped family is never replayed into another.
//! 2. A family's memtable that is empty carries the number of the WAL being
//!    written (it is renumbered at every WAL switch), so an idle family never
//!    pins an old WAL.
//! 3. Once dropped, a family is out of the memtables (db/memtables.rs); its handle
//!    reports `InvalidArgument` and its files go once no reader holds them.
//!
//! Thread safety: `ColumnFamilyData` is shared by handles and the db; its
//! fields are atomics or leaf locks.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::SuperVersion;
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::options::ColumnFamilyOptions;

/// The part of a family readers reach without the db mutex.
pub(crate) struct ColumnFamilyData {
    pub(crate) id: u32,
    pub(crate) name: String,
    /// The family's options (for the default family, the column-family
    /// part of the database's options, swapped by `set_options`).
    options: ArcSwap<ColumnFamilyOptions>,
    /// `options`' `write_buffer_size` and `max_write_buffer_number`, stored
    /// by `set_options` after `options`. Every write group reads them for
    /// every family (whether a memtable is full, the WAL budget), where
    /// cloning `options` per family cost a 20-family fill about 4 % of its
    /// time.
    write_buffer_size: AtomicUsize,
    max_write_buffer_number: AtomicUsize,
    /// What readers of this family need, swapped as a whole. An `ArcSwap`:
    /// a point read borrows the current one through a thread-local debt slot
    /// instead of taking a lock and bumping its shared count (RocksDB keeps a
    /// thread-local super version for the same reason).
    super_version: ArcSwap<SuperVersion>,
    /// Set once, when the family is dropped.
    dropped: AtomicBool,
    /// The order of the family's keys (its `comparator` option, which
    /// cannot change while it is open).
    pub(crate) cmp: UserComparator,
    /// The family's full_history_ts_low (0: none; docs/timestamps.md),
    /// as the MANIFEST last recorded it.
    full_history_ts_low: std::sync::atomic::AtomicU64,
    /// The database instance it belongs to (`DbInner::instance`): a handle
    /// of another database names a family by an id that means another
    /// family here.
    pub(crate) owner: u64,
}

impl ColumnFamilyData {
    pub(crate) fn new(id: u32, name: &str, options: Arc<ColumnFamilyOptions>, owner: u64) -> Arc<Self> {
        let cmp = options.user_comparator();
        let sv = SuperVersion::new(
            Arc::new(MemTable::new(0, cmp.clone())),
            Vec::new(),
            Arc::new(crate::version::Version::with_comparator(options.num_levels, cmp.clone())),
        );
        Arc::new(ColumnFamilyData {
            id,
            name: name.to_string(),
            write_buffer_size: AtomicUsize::new(options.write_buffer_size),
            max_write_buffer_number: AtomicUsize::new(options.max_write_buffer_number),
            options: ArcSwap::new(options),
            super_version: ArcSwap::from_pointee(sv),
            dropped: AtomicBool::new(false),
            full_history_ts_low: std::sync::atomic::AtomicU64::new(0),
            cmp,
            owner,
        })
    }

    /// The family's options in force (a short borrow, no shared count).
    pub(crate) fn options(&self) -> arc_swap::Guard<Arc<ColumnFamilyOptions>> {
        self.options.load()
    }

    /// The family's options in force, owned.
    pub(crate) fn options_arc(&self) -> Arc<ColumnFamilyOptions> {
        self.options.load_full()
    }

    /// Puts `options` in force (`set_options`, for the default family).
    pub(crate) fn set_options(&self, options: Arc<ColumnFamilyOptions>) {
        let (size, number) = (options.write_buffer_size, options.max_write_buffer_number);
        self.options.store(options);
        self.write_buffer_size.store(size, Ordering::Relaxed);
        self.max_write_buffer_number.store(number, Ordering::Relaxed);
    }

    /// The `write_buffer_size` in force: a memtable holding this much is
    /// full.
    pub(crate) fn write_buffer_size(&self) -> usize {
        self.write_buffer_size.load(Ordering::Relaxed)
    }

    /// The `max_write_buffer_number` in force.
    pub(crate) fn max_write_buffer_number(&self) -> usize {
        self.max_write_buffer_number.load(Ordering::Relaxed)
    }

    /// Publishes `sv` to the family's readers.
    pub(crate) fn install(&self, sv: SuperVersion) {
        self.super_version.store(Arc::new(sv));
    }

    /// Marks the family dropped: operations through its handles fail from
    /// now on.
    pub(crate) fn mark_dropped(&self) {
        self.dropped.store(true, Ordering::Release);
    }

    pub(crate) fn is_dropped(&self) -> bool {
        self.dropped.load(Ordering::Acquire)
    }

    /// `InvalidArgument` naming the family once it was dropped.
    pub(crate) fn check_live(&self) -> Result<()> {
        if self.is_dropped() {
            return Err(Error::invalid(format!("column family '{}' was dropped", self.name)));
        }
        Ok(())
    }

    /// Whether a read's timestamp (`ReadOptions::timestamp`) suits the
    /// family: required where keys carry timestamps, refused elsewhere
    /// (docs/timestamps.md).
    pub(crate) fn check_read_timestamp(&self, ts: Option<u64>) -> Result<()> {
        match (self.cmp.timestamp_size() > 0, ts) {
            (true, None) => Err(Error::invalid(format!(
                "column family '{}' has timestamps ({}): set ReadOptions::timestamp",
                self.name,
                self.cmp.name()
            ))),
            (false, Some(_)) => Err(Error::invalid(format!(
                "ReadOptions::timestamp is set, but column family '{}' has no timestamps (its comparator is {})",
                self.name,
                self.cmp.name()
            ))),
            (true, Some(ts)) if ts < self.full_history_ts_low() => Err(Error::invalid(format!(
                "read timestamp {ts} is below the full_history_ts_low {} of column family '{}': the history \
                 before it may be gone",
                self.full_history_ts_low(),
                self.name
            ))),
            _ => Ok(()),
        }
    }

    /// A range bound given without a timestamp (`begin`: the range's
    /// start; else its end, `included` or not) as the stored keys compare
    /// with it: in a family with timestamps, the bound with the timestamp
    /// that takes in (or, for an excluded end, leaves out) all of its key's
    /// versions (RocksDB pads range bounds the same way); elsewhere itself.
    pub(crate) fn range_bound<'k>(&self, key: &'k [u8], begin: bool, included: bool) -> std::borrow::Cow<'k, [u8]> {
        if self.cmp.timestamp_size() == 0 {
            return std::borrow::Cow::Borrowed(key);
        }
        let ts = if begin || !included { u64::MAX } else { 0 };
        std::borrow::Cow::Owned(crate::comparator::with_timestamp(key, ts))
    }

    /// The family's full_history_ts_low (0: none).
    pub(crate) fn full_history_ts_low(&self) -> u64 {
        self.full_history_ts_low.load(Ordering::Acquire)
    }

    /// Raises the family's full_history_ts_low to `ts` (once recorded).
    pub(crate) fn raise_full_history_ts_low(&self, ts: u64) {
        self.full_history_ts_low.fetch_max(ts, Ordering::AcqRel);
    }

    /// The current super version, owned (for iterators and snapshots' reads
    /// that keep it).
    pub(crate) fn super_version(&self) -> Arc<SuperVersion> {
        self.super_version.load_full()
    }

    /// The current super version for a short read: no lock, no shared count.
    pub(crate) fn super_version_guard(&self) -> arc_swap::Guard<Arc<SuperVersion>> {
        self.super_version.load()
    }
}

/// A handle on one column family (RocksDB `ColumnFamilyHandle`), from
/// [`Db::create_column_family`](super::Db::create_column_family) or
/// [`Db::cf_handle`](super::Db::cf_handle). Cheap to clone; it does not keep
/// the database open. Once the family is dropped, every operation through the
/// handle fails with `InvalidArgument`.
#[derive(Clone)]
pub struct ColumnFamilyHandle {
    pub(crate) data: Arc<ColumnFamilyData>,
}

impl ColumnFamilyHandle {
    /// The family's name.
    pub fn name(&self) -> &str {
        &self.data.name
    }

    /// The size of the timestamp its keys carry (RocksDB's
    /// `GetComparator()->timestamp_size()`): 8 in a family whose comparator
    /// has timestamps (docs/timestamps.md), else 0.
    pub fn timestamp_size(&self) -> usize {
        self.data.cmp.timestamp_size()
    }

    /// The family's id (0 for the default family), as stored in WAL and
    /// MANIFEST records.
    pub fn id(&self) -> u32 {
        self.data.id
    }

    /// True once the family was dropped.
    pub fn is_dropped(&self) -> bool {
        self.data.is_dropped()
    }
}

impl std::fmt::Debug for ColumnFamilyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnFamilyHandle").field("name", &self.data.name).field("id", &self.data.id).finish()
    }
}
