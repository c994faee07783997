//! Compaction filters (RocksDB's `CompactionFilter` and
//! `CompactionFilterFactory`): user code that a compaction asks about each
//! key's newest value, to keep it, remove it, change it, or remove it and
//! skip a range of keys after it (docs/data_model.md, "Compaction filters").
//!
//! The filter is asked only about versions no live snapshot can see (their
//! sequence is above the newest snapshot's, or there is no snapshot), so a
//! snapshot reads the same before and after any compaction. It is asked
//! about values written with `put` (not tombstones, and not values kept in
//! blob files), once per user key per compaction: about the newest version
//! the compaction reads; and, separately, about each merge operand no
//! snapshot can see (`filter_merge_operand`).
//!
//! This module sits below `options` in the layers (lib.rs) because column
//! family options hold a filter or a factory; the compaction job
//! (`compaction::job`) applies them.

use std::sync::Arc;

/// What a compaction filter decides about one value (RocksDB's
/// `CompactionFilter::Decision`, the subset its `FilterV2` returns for
/// values).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Keep the value as it is.
    Keep,
    /// Remove the key: the output holds a tombstone at the value's sequence
    /// (so older versions stay hidden), dropped itself where tombstones are.
    Remove,
    /// Keep the key with this value instead.
    ChangeValue(Vec<u8>),
    /// Remove the key as [`Decision::Remove`] does, and drop without asking
    /// every key the compaction reads after it and before this user key
    /// (exclusive), where no snapshot can see them. Skipped keys are dropped,
    /// not turned into tombstones, so older versions of them in levels the
    /// compaction does not read may be seen again (as in RocksDB). A key at
    /// or before the filtered key makes this [`Decision::Keep`].
    RemoveAndSkipUntil(Vec<u8>),
}

/// Why a filter is created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionFilterContext {
    /// The compaction reads every file of the column family.
    pub is_full_compaction: bool,
    /// The compaction was asked for (`compact_range`).
    pub is_manual_compaction: bool,
    /// The column family compacted.
    pub column_family_id: u32,
}

/// Decides, during compactions, what becomes of each key's newest value.
/// One filter may be called from several compactions at once (when set
/// directly in the options) and must be thread-safe; a factory makes one
/// per compaction, which is called from one thread at a time.
pub trait CompactionFilter: Send + Sync {
    /// The filter's name, recorded in the OPTIONS file.
    fn name(&self) -> &str;

    /// The decision about `value`, the newest value of user key `key` that
    /// the compaction reads, from a compaction starting at `level`.
    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> Decision;

    /// Whether to remove the merge operand `operand` of `key` (RocksDB's
    /// `FilterMergeOperand`): asked about every operand no live snapshot
    /// can see, before operands are combined; a removed operand is dropped
    /// as if never written. The default keeps every operand.
    fn filter_merge_operand(&self, level: usize, key: &[u8], operand: &[u8]) -> bool {
        let _ = (level, key, operand);
        false
    }
}

/// Makes a [`CompactionFilter`] for each compaction (RocksDB's
/// `CompactionFilterFactory`); used when the options set no filter.
pub trait CompactionFilterFactory: Send + Sync {
    /// The factory's name, recorded in the OPTIONS file.
    fn name(&self) -> &str;

    /// A filter for the compaction `context` describes, or `None` to keep
    /// everything in it.
    fn create_compaction_filter(&self, context: &CompactionFilterContext) -> Option<Box<dyn CompactionFilter>>;
}

/// The filter of a compaction: the column family's own, or one made by its
/// factory, or none.
pub(crate) enum ActiveFilter {
    Shared(Arc<dyn CompactionFilter>),
    Owned(Box<dyn CompactionFilter>),
}

impl ActiveFilter {
    /// The filter for a compaction of a family with `filter` and `factory`
    /// set (the filter wins, as in RocksDB).
    pub(crate) fn for_compaction(
        filter: Option<&Arc<dyn CompactionFilter>>,
        factory: Option<&Arc<dyn CompactionFilterFactory>>,
        context: &CompactionFilterContext,
    ) -> Option<ActiveFilter> {
        match (filter, factory) {
            (Some(f), _) => Some(ActiveFilter::Shared(Arc::clone(f))),
            (None, Some(factory)) => factory.create_compaction_filter(context).map(ActiveFilter::Owned),
            (None, None) => None,
        }
    }

    pub(crate) fn get(&self) -> &dyn CompactionFilter {
        match self {
            ActiveFilter::Shared(f) => f.as_ref(),
            ActiveFilter::Owned(f) => f.as_ref(),
        }
    }
}
