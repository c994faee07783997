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
//! 3. Once dropped, a family is out of `DbState::families`; its handle
//!    reports `InvalidArgument` and its files go once no reader holds them.
//!
//! Thread safety: `ColumnFamilyData` is shared by handles and the db; its
//! fields are atomics or leaf locks. `FamilyState` requires the db mutex.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::SuperVersion;
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::options::ColumnFamilyOptions;
use crate::tuning::command::FamilyId;
use crate::version::VersionEdit;

/// The part of a family readers reach without the db mutex.
pub(crate) struct ColumnFamilyData {
    pub(crate) id: u32,
    pub(crate) name: String,
    /// The family's options (for the default family, the column-family
    /// part of the database's options, swapped by `set_options`).
    pub(crate) options: ArcSwap<ColumnFamilyOptions>,
    /// What readers of this family need, swapped as a whole. An `ArcSwap`:
    /// a point read borrows the current one through a thread-local debt slot
    /// instead of taking a lock and bumping its shared count (RocksDB keeps a
    /// thread-local super version for the same reason).
    pub(crate) super_version: ArcSwap<SuperVersion>,
    pub(crate) dropped: AtomicBool,
    /// The order of the family's keys (its `comparator` option, which
    /// cannot change while it is open).
    pub(crate) cmp: UserComparator,
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
            options: ArcSwap::new(options),
            super_version: ArcSwap::from_pointee(sv),
            dropped: AtomicBool::new(false),
            cmp,
            owner,
        })
    }

    /// `InvalidArgument` naming the family once it was dropped.
    pub(crate) fn check_live(&self) -> Result<()> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(Error::invalid(format!("column family '{}' was dropped", self.name)));
        }
        Ok(())
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

/// A family's memtables. Requires the db mutex.
pub(crate) struct FamilyState {
    pub(crate) data: Arc<ColumnFamilyData>,
    pub(crate) mem: Arc<MemTable>,
    /// Immutable memtables waiting for flush, oldest first.
    pub(crate) imm: Vec<Arc<MemTable>>,
}

impl FamilyState {
    /// The oldest WAL this family's unflushed data may be in.
    pub(crate) fn oldest_log_to_keep(&self) -> u64 {
        self.imm.iter().map(|m| m.log_number()).chain(std::iter::once(self.mem.log_number())).min().unwrap_or(0)
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

    /// The family's id (0 for the default family), as stored in WAL and
    /// MANIFEST records.
    pub fn id(&self) -> u32 {
        self.data.id
    }

    /// True once the family was dropped.
    pub fn is_dropped(&self) -> bool {
        self.data.dropped.load(Ordering::Acquire)
    }
}

impl std::fmt::Debug for ColumnFamilyHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ColumnFamilyHandle").field("name", &self.data.name).field("id", &self.data.id).finish()
    }
}

impl super::DbInner {
    pub(crate) fn create_column_family(&self, name: &str, options: ColumnFamilyOptions) -> Result<ColumnFamilyHandle> {
        self.check_writable("create_column_family")?;
        self.check_open()?;
        options.validate()?;
        if name.is_empty() {
            return Err(Error::invalid("a column family name must not be empty"));
        }
        // The OPTIONS file names each family in a section header on one
        // line, where `#` starts a comment: such a name would make a file
        // that cannot be read back, and a line break one that reads as
        // other options.
        if let Some(c) = name.chars().find(|c| c.is_control() || *c == '#') {
            return Err(Error::invalid(format!(
                "column family name {name:?} holds {c:?}: names may not hold '#' or control characters"
            )));
        }
        let mut st = self.state.lock();
        self.wait_for_manifest_writes(&mut st);
        if let Some(e) = &st.bg_error {
            return Err(Error::Background(Arc::clone(e)));
        }
        if st.families.values().any(|f| f.data.name == name) {
            return Err(Error::invalid(format!("column family '{name}' already exists")));
        }
        let id = st.versions.next_column_family_id();
        // The family's data starts in the WAL being written, but its log
        // number stops at the oldest closed WAL not yet sealed (db/wal_seal.rs,
        // contract 5): an ingestion may give it tables before any flush
        // seals. Older WALs hold none of its writes (ids are never reused).
        let log_number = self.unsealed_log_cap(&st).map_or(st.wal_number, |n| n.min(st.wal_number));
        let cmp = options.user_comparator();
        let edit = VersionEdit {
            column_family: id,
            column_family_add: Some(name.to_string()),
            comparator: (!cmp.is_bytewise()).then(|| cmp.name().to_string()),
            max_column_family: Some(id),
            log_number: Some(log_number),
            ..Default::default()
        };
        let last = self.last_sequence.load(Ordering::Acquire);
        st.versions.set_last_sequence(last);
        let shape = crate::version::FamilyShape { num_levels: options.num_levels, comparator: cmp };
        if let Err(e) = st.versions.add_column_family(edit, shape) {
            return Err(self.set_bg_error_locked(&mut st, e));
        }
        let mem = Arc::new(super::write::new_memtable(&options, st.wal_number));
        // The tuning mode's changes, as at open (the backstop, or the
        // thesis's lifted stalls); the tuner learns of the family from there.
        self.tuning.track_family(FamilyId(id), &options);
        let options = super::tuning::family_options_at_open(&self.opts(), FamilyId(id), options);
        let data = ColumnFamilyData::new(id, name, Arc::new(options), self.instance);
        st.families.insert(id, FamilyState { data: Arc::clone(&data), mem, imm: Vec::new() });
        self.install_super_version(&mut st);
        drop(st);
        self.record_options_after("creating column family");
        Ok(ColumnFamilyHandle { data })
    }

    pub(crate) fn drop_column_family(&self, cf: &Arc<ColumnFamilyData>) -> Result<()> {
        self.check_writable("drop_column_family")?;
        self.check_open()?;
        if cf.id == 0 {
            return Err(Error::invalid(format!(
                "the default column family '{}' cannot be dropped",
                crate::version::DEFAULT_COLUMN_FAMILY
            )));
        }
        self.check_family(cf)?;
        let mut st = self.state.lock();
        // Checked with no MANIFEST write in flight, so nothing changes the
        // families before this edit is prepared.
        self.wait_for_manifest_writes(&mut st);
        if !st.families.get(&cf.id).is_some_and(|f| Arc::ptr_eq(&f.data, cf)) {
            return Err(Error::invalid(format!("column family '{}' is not a family of this database", cf.name)));
        }
        if let Some(e) = &st.bg_error {
            return Err(Error::Background(Arc::clone(e)));
        }
        let edit = VersionEdit { column_family: cf.id, column_family_drop: true, ..Default::default() };
        if let Err(e) = self.log_and_apply(&mut st, vec![edit]) {
            return Err(self.set_bg_error_locked(&mut st, e));
        }
        st.families.remove(&cf.id);
        self.tuning.forget_family(FamilyId(cf.id));
        cf.dropped.store(true, Ordering::Release);
        // The handle's own view would keep the family's files alive; readers
        // that took one before the drop still hold theirs.
        let empty = SuperVersion::new(
            Arc::new(MemTable::new(0, cf.cmp.clone())),
            Vec::new(),
            Arc::new(crate::version::Version::with_comparator(cf.options.load().num_levels.max(1), cf.cmp.clone())),
        );
        cf.super_version.store(Arc::new(empty));
        st.stall_cache = None;
        // The family's files left no version through an edit.
        st.obsolete.scan_next_time();
        self.delete_obsolete_files(&mut st);
        self.bg_cv.notify_all();
        self.work_cv.notify_all();
        drop(st);
        self.record_options_after("dropping column family");
        Ok(())
    }

    /// Rewrites the OPTIONS file after a change that is made already: a
    /// failure is written to the info log, not returned (the family exists,
    /// or is gone, either way; the next OPTIONS file records it).
    fn record_options_after(&self, what: &str) {
        if let Err(e) = self.write_options_file() {
            self.info_log.log(super::info_log::Level::Warn, &format!("OPTIONS file not written after {what}: {e}"));
        }
    }

    /// Bytes in live WAL files, the one being written included.
    pub(crate) fn total_wal_size(&self, st: &super::DbState) -> u64 {
        let current = self.wal.lock().as_ref().map_or(0, |w| w.file_size());
        st.old_wals.iter().map(|(_, size)| size).sum::<u64>() + current
    }

    /// The `max_total_wal_size` in force: when 0, four times the memtable
    /// budget of all families (RocksDB `DBImpl::GetMaxTotalWalSize`).
    pub(crate) fn max_total_wal_size(&self, st: &super::DbState) -> u64 {
        let limit = self.opts().max_total_wal_size;
        if limit > 0 {
            return limit;
        }
        let budget = st.families.values().fold(0u64, |sum, f| {
            let o = self.family_opts(&f.data);
            sum.saturating_add((o.write_buffer_size as u64).saturating_mul(o.max_write_buffer_number as u64))
        });
        budget.saturating_mul(4)
    }
}
