//! User table property collectors (RocksDB's `TablePropertiesCollector`):
//! user code that sees every entry a table is built from and leaves
//! properties of its own in the table's properties block, read back with
//! `Db::get_properties_of_all_tables` (docs/operations.md, "Table
//! properties").
//!
//! Collectors are user code and are called defensively, as listeners are: a
//! collector that panics is dropped for the rest of that table (its
//! properties are left out) and the table is built as if it had none. A
//! property whose name starts with `ebb.` or `rocksdb.` (the engine's own)
//! is left out, and of two collectors naming the same property the first
//! (in the options' order) wins.

use crate::key::ValueKind;

/// What a stored entry is (RocksDB's `EntryType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryType {
    /// A value (a put).
    Put,
    /// A deletion.
    Delete,
    /// A single deletion.
    SingleDelete,
    /// A merge operand.
    Merge,
    /// A value kept in a blob file; the entry's value is the reference.
    BlobIndex,
    /// A wide-column entity; the entry's value is its serialized columns.
    WideColumnEntity,
}

impl EntryType {
    /// The type of an entry of kind `kind` (a point entry's).
    pub(crate) fn of(kind: ValueKind) -> EntryType {
        match kind {
            ValueKind::Value => EntryType::Put,
            ValueKind::Deletion => EntryType::Delete,
            ValueKind::SingleDeletion => EntryType::SingleDelete,
            ValueKind::Merge => EntryType::Merge,
            ValueKind::WideColumnEntity => EntryType::WideColumnEntity,
            _ => EntryType::BlobIndex,
        }
    }
}

impl std::fmt::Display for EntryType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EntryType::Put => "put",
            EntryType::Delete => "delete",
            EntryType::SingleDelete => "single_delete",
            EntryType::Merge => "merge",
            EntryType::BlobIndex => "blob_index",
            EntryType::WideColumnEntity => "wide_column_entity",
        })
    }
}

/// Collects properties of one table as it is built (RocksDB's
/// `TablePropertiesCollector`). Called from one thread at a time.
pub trait TablePropertiesCollector: Send {
    /// Called for each point entry added, in key order (RocksDB's
    /// `AddUserKey`): the user key, the value as stored, its type and
    /// sequence number, and the bytes of the file written so far.
    fn add_user_key(&mut self, key: &[u8], value: &[u8], entry_type: EntryType, sequence: u64, file_size: u64);

    /// Called once the entries are all added: the properties to store
    /// (RocksDB's `Finish`).
    fn finish(&mut self) -> Vec<(String, Vec<u8>)>;

    /// The collector's name (for the info log).
    fn name(&self) -> &str;
}

/// What a collector is made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollectorContext {
    /// The column family the table belongs to.
    pub column_family_id: u32,
}

/// Makes a collector for each table built (RocksDB's
/// `TablePropertiesCollectorFactory`), set per column family as
/// `ColumnFamilyOptions::table_properties_collector_factories`. Shared
/// between the threads that build tables.
pub trait TablePropertiesCollectorFactory: Send + Sync {
    /// A new collector for one table.
    fn create(&self, context: CollectorContext) -> Box<dyn TablePropertiesCollector>;

    /// The factory's name.
    fn name(&self) -> &str;
}

/// The collector factories a table builder runs, compared by identity (a
/// setting of the builder, which compares its settings).
#[derive(Clone, Default)]
pub struct Collectors(pub Vec<std::sync::Arc<dyn TablePropertiesCollectorFactory>>);

impl std::fmt::Debug for Collectors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.0.iter().map(|c| c.name())).finish()
    }
}

impl PartialEq for Collectors {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len() && self.0.iter().zip(&other.0).all(|(a, b)| std::sync::Arc::ptr_eq(a, b))
    }
}

impl Eq for Collectors {}

/// Property names that are the engine's own.
pub(crate) fn is_reserved(name: &str) -> bool {
    name.starts_with("ebb.") || name.starts_with("rocksdb.")
}
