//! What readers of a column family need, swapped as a whole: its
//! memtables and its version (RocksDB's `SuperVersion`). A point read or an
//! iterator takes the current one without a lock and reads only it, so it
//! sees one consistent state however flushes and compactions go on.
//!
//! Invariant: a super version is installed (under the db mutex,
//! `DbInner::install_super_version` in db/engine.rs) whenever a family's
//! memtables or version change, and only then; the versions it hands out
//! are recorded as held (db/files.rs) so their files stay.

use std::sync::Arc;

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
