//! What readers of a column family need, swapped as a whole: its
//! memtables and its version (RocksDB's `SuperVersion`). A point read or an
//! iterator takes the current one without a lock and reads only it, so it
//! sees one consistent state however flushes and compactions go on.
//!
//! Invariant: a super version is installed (under the db mutex) whenever a
//! family's memtables or version change, and only then; the versions it
//! hands out are recorded as held (db/files.rs) so their files stay.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{DbInner, DbState};
use crate::memtable::MemTable;
use crate::version::Version;

/// What readers need, swapped as a whole: the memtables and the version.
pub(crate) struct SuperVersion {
    pub(crate) mem: Arc<MemTable>,
    /// Immutable memtables, newest first.
    pub(crate) imm: Vec<Arc<MemTable>>,
    pub(crate) version: Arc<Version>,
    /// The range tombstones of the version's tables, fragmented once for
    /// every iterator (`None` inside: they have none).
    pub(crate) table_tombstones: std::sync::OnceLock<Option<Arc<crate::range_del::FragmentedTombstones>>>,
}

impl SuperVersion {
    pub(crate) fn new(mem: Arc<MemTable>, imm: Vec<Arc<MemTable>>, version: Arc<Version>) -> Self {
        SuperVersion { mem, imm, version, table_tombstones: std::sync::OnceLock::new() }
    }
}

impl DbInner {
    /// Publishes the memtables and versions of every family in `st` to
    /// readers. Requires the db mutex.
    pub(crate) fn install_super_version(&self, st: &mut DbState) {
        st.controller.invalidate();
        let waiting = st.families.immutable_count();
        self.tuning.immutable_memtables.store(waiting, Ordering::Relaxed);
        st.files.forget_dropped_versions();
        for (id, family) in st.families.iter() {
            let Some(version) = st.versions.version(id) else { continue };
            let data = family.data();
            let old = data.super_version();
            let same = Arc::ptr_eq(&old.version, &version)
                && Arc::ptr_eq(&old.mem, family.mem())
                && old.imm.len() == family.imm().len()
                && old.imm.iter().zip(family.imm().iter().rev()).all(|(a, b)| Arc::ptr_eq(a, b));
            if same {
                continue;
            }
            st.files.hold_version(id, &version);
            let same_version = Arc::ptr_eq(&old.version, &version);
            let sv = SuperVersion::new(Arc::clone(family.mem()), family.imm().iter().rev().cloned().collect(), version);
            // A memtable switch keeps the tables: and their tombstones.
            if let Some(t) = old.table_tombstones.get().filter(|_| same_version) {
                let _ = sv.table_tombstones.set(t.clone());
            }
            data.install(sv);
        }
    }
}
