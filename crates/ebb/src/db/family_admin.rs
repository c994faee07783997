//! Creating and dropping column families (RocksDB's `CreateColumnFamily`
//! and `DropColumnFamily`): the MANIFEST records the change first, then
//! the family joins or leaves the memtables and readers, and the OPTIONS
//! file is written anew.

use std::sync::Arc;

use super::column_family::{ColumnFamilyData, ColumnFamilyHandle};
use super::{DbInner, SuperVersion};
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::options::ColumnFamilyOptions;
use crate::tuning::command::FamilyId;
use crate::version::VersionEdit;

impl DbInner {
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
        st.bg_error.check()?;
        if st.families.find(name).is_some() {
            return Err(Error::invalid(format!("column family '{name}' already exists")));
        }
        let id = st.versions.next_column_family_id();
        // The family's data starts in the WAL being written, but its log
        // number stops at the oldest closed WAL not yet sealed (db/wal_seal.rs,
        // contract 5): an ingestion may give it tables before any flush
        // seals. Older WALs hold none of its writes (ids are never reused).
        let current_wal = st.families.current_wal();
        let log_number = self.unsealed_log_cap(&st).map_or(current_wal, |n| n.min(current_wal));
        let cmp = options.user_comparator();
        let edit = VersionEdit {
            column_family: id,
            column_family_add: Some(name.to_string()),
            comparator: (!cmp.is_bytewise()).then(|| cmp.name().to_string()),
            max_column_family: Some(id),
            log_number: Some(log_number),
            ..Default::default()
        };
        let last = self.last_sequence.get();
        st.versions.set_last_sequence(last);
        let shape = crate::version::FamilyShape { num_levels: options.num_levels, comparator: cmp };
        if let Err(e) = st.versions.add_column_family(edit, shape) {
            return Err(self.set_bg_error_locked(&mut st, e));
        }
        let mem = Arc::new(super::write::new_memtable(&options, current_wal));
        mem.set_earliest_sequence(last);
        // The tuning mode's changes, as at open (the backstop, or the
        // thesis's lifted stalls); the tuner learns of the family from there.
        self.tuning.track_family(FamilyId(id), &options);
        let options = super::tuning::family_options_at_open(&self.opts(), FamilyId(id), options);
        let data = ColumnFamilyData::new(id, name, Arc::new(options), self.instance);
        st.families.add_family(Arc::clone(&data), mem);
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
        if !st.families.get(cf.id).is_some_and(|f| Arc::ptr_eq(f.data(), cf)) {
            return Err(Error::invalid(format!("column family '{}' is not a family of this database", cf.name)));
        }
        st.bg_error.check()?;
        let edit = VersionEdit { column_family: cf.id, column_family_drop: true, ..Default::default() };
        if let Err(e) = self.log_and_apply(&mut st, vec![edit]) {
            return Err(self.set_bg_error_locked(&mut st, e));
        }
        st.families.remove_family(cf.id);
        self.tuning.forget_family(FamilyId(cf.id));
        cf.mark_dropped();
        // The handle's own view would keep the family's files alive; readers
        // that took one before the drop still hold theirs.
        let empty = SuperVersion::new(
            Arc::new(MemTable::new(0, cf.cmp.clone())),
            Vec::new(),
            Arc::new(crate::version::Version::with_comparator(cf.options().num_levels.max(1), cf.cmp.clone())),
        );
        cf.install(empty);
        st.controller.invalidate();
        // The family's files left no version through an edit.
        st.files.scan_next_time();
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
}
