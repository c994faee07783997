//! The prepared sections of two-phase commit: transactions prepared (their
//! updates in the WAL, not applied) and neither committed nor rolled back
//! yet, by name, each with the WAL record that prepared it.
//!
//! Invariants:
//! 1. Changed only by the write-group leader, in the same step as the WAL
//!    record that changes it (a prepare adds, a commit or rollback
//!    removes): the set always matches the WAL's order of records.
//! 2. The WAL being written holds every section in the set: a memtable
//!    switch copies them into the new WAL before any write reaches it
//!    (db/write.rs), and recovery into the WAL it starts. So replaying the
//!    live WALs, which always include the current one, finds every
//!    prepared transaction, however old the WAL that first held it.
//! 3. Before an old WAL is deleted while the set holds any section, the
//!    current WAL is synced (db/purge.rs): the copies in it are durable
//!    before the records they copy are gone.
//!
//! Its own lock, a leaf: nothing else is locked while it is held.

use std::collections::BTreeMap;

use parking_lot::Mutex;

/// The prepared sections (the module's invariants).
#[derive(Default)]
pub(crate) struct PreparedSections {
    by_name: Mutex<BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl PreparedSections {
    /// `name` was prepared by the WAL record `record`.
    pub(crate) fn add(&self, name: &[u8], record: &[u8]) {
        self.by_name.lock().insert(name.to_vec(), record.to_vec());
    }

    /// `name` was committed or rolled back.
    pub(crate) fn remove(&self, name: &[u8]) {
        self.by_name.lock().remove(name);
    }

    /// Whether `name` is prepared.
    pub(crate) fn contains(&self, name: &[u8]) -> bool {
        self.by_name.lock().contains_key(name)
    }

    /// True when no transaction is prepared.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_name.lock().is_empty()
    }

    /// Every prepared section: its name and WAL record, by name.
    pub(crate) fn records(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.by_name.lock().iter().map(|(n, r)| (n.clone(), r.clone())).collect()
    }
}
