//! Ebb: an embeddable, persistent LSM-tree key-value store whose background
//! work tunes itself to the load.
//!
//! # Layers
//!
//! Bottom up; a module imports only modules listed before it (`crate::` paths,
//! a root re-export counted as the module this file re-exports it from). The
//! test `tests/layers.rs` reads this list and fails on an upward import.
//!
//! 1. `error`: the error type.
//! 2. `util`: coding, checksums, compression, small helpers.
//! 3. `kill_points`: crash points for the kill tests (feature `failpoints`).
//! 4. `clock`, `perf`: the database's clock (RocksDB's `SystemClock`), real or
//!    manual, and the per-thread performance counters (RocksDB's
//!    `PerfContext`, `IOStatsContext`).
//! 5. `fs`: the filesystem boundary (POSIX, in memory, fault injection).
//! 6. `comparator`: the order of user keys (RocksDB's `Comparator`).
//! 7. `key`: internal keys, sequence numbers, size limits.
//! 8. `range_del`: range tombstones and their fragments.
//! 9. `prefix`, `sst_partitioner`: prefix extractors (RocksDB's
//!    `SliceTransform`) and SST partitioners (RocksDB's `SstPartitioner`).
//! 10. `table_properties`: entry types and the table property collectors
//!     users implement.
//! 11. `iter`: the internal iterator and the merging heap.
//! 12. `stats`: tickers and histograms in RocksDB's format.
//! 13. `tuning`: rate limiter, the tuners' decisions.
//! 14. `cache`, `write_buffer_manager`: the block cache, holding values of
//!     any type, and the memtable budget shared by families and databases.
//! 15. `wal`: the write-ahead log format.
//! 16. `memtable`: the skip list.
//! 17. `sst`: block-based tables (blocks, filters, indexes, reader, builder).
//! 18. `blob`: blob files (values kept apart from the tables).
//! 19. `version`: MANIFEST, version edits and the set of live files.
//! 20. `events`: what listeners are told (jobs, stalls, tuning, recovery).
//! 21. `compaction_filter`: the compaction filter traits users implement.
//! 22. `merge_operator`, `wide_columns`: the merge operator traits and the
//!     built-in ones; wide-column entities and how merges apply to them.
//! 23. `options`: the database's options, their text form, and the narrow
//!     settings each layer below takes from them.
//! 24. `compaction`: picking and running compactions.
//! 25. `db`: the public handle, the write and read paths, background jobs.
//! 26. `txn`: write batches with an index, optimistic and pessimistic
//!     transactions (RocksDB's `utilities/transactions`).
//! 27. `internals`: what Ebb's own tests, tools, fuzz targets and benchmarks
//!     use of the layers above (feature `internals`; not a stable API).

#![deny(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

// First, so that its `kill_point!` macro is in scope in every module below.
#[macro_use]
mod kill_points;

// The public surface: the handle and its types (re-exported below), the
// block cache users may share between databases, the clock and the
// filesystem boundary users may implement, what listeners are told,
// compaction filters, comparators, merge operators, prefix extractors and
// table property collectors.
pub mod cache;
pub mod clock;
pub mod compaction_filter;
pub mod comparator;
pub mod events;
pub mod fs;
pub mod merge_operator;
pub mod perf;
pub mod prefix;
pub mod sst_partitioner;
pub mod table_properties;
pub mod wide_columns;
pub mod write_buffer_manager;

mod db;
mod error;
mod options;

// The internal layers. What Ebb's own tests, tools, fuzz targets and
// benchmarks need of them is re-exported, with the feature `internals`, in
// `internals`.
pub(crate) mod blob;
pub(crate) mod compaction;
pub(crate) mod iter;
pub(crate) mod key;
pub(crate) mod memtable;
pub(crate) mod range_del;
pub(crate) mod sst;
pub(crate) mod stats;
pub(crate) mod tuning;
pub(crate) mod util;
pub(crate) mod version;
pub(crate) mod wal;

mod txn;

#[cfg(feature = "internals")]
pub mod internals;

pub use clock::{Clock, ManualClock, SystemClock};
pub use compaction_filter::{CompactionFilter, CompactionFilterContext, CompactionFilterFactory};
pub use comparator::Comparator;
pub use db::{
    BackupEngine, BackupEngineOptions, BackupId, BackupInfo, BatchIter, BatchOp, Checkpoint, CheckpointInfo,
    CheckpointOptions, ColumnFamilyHandle, ColumnFamilyMetaData, CompactionJobInfo, Db, DbIterator, DbMetrics,
    Direction, Entries, ErrorRecoveryInfo, EventListener, ExternalSstFileInfo, FlushJobInfo, IngestExternalFileOptions,
    IteratorMode, KeyVersion, LevelMetaData, LiveFileMetaData, ReadOptions, RecoveryReport, RepairReport,
    RepairedBlobFile, RepairedTable, RepairedWal, RestoreOptions, SetAside, SizeApproximationOptions, Snapshot,
    SstFileWriter, StallCondition, TableFileDeletionInfo, TtlDb, TtlIterator, TuningEvent, TuningMetrics, WalDamage,
    WalUpdate, WalUpdates, WriteBatch, WriteOptions, ARCHIVE_DIR, DEFAULT_COLUMN_FAMILY, LOST_DIR, TTL_MARKER,
};
pub use error::{Error, Result};
pub use key::SequenceNumber;
pub use merge_operator::{AssociativeMergeOperator, MergeOperator};
pub use options::{
    BackgroundTuning, ColumnFamilyOptions, CompactionOptionsFifo, CompactionOptionsUniversal, CompactionStyle,
    CompressionType, DbOptions, IdlePolicyKind, IndexType, Options, TableOptions, WalRecoveryMode, MAX_KEY_SIZE,
    MAX_VALUE_SIZE, PERIODIC_COMPACTION_AUTO,
};
pub use sst::{PinnableSlice, TableProperties};
pub use stats::{LevelCompactionStats, StallCause};
pub use table_properties::{CollectorContext, EntryType, TablePropertiesCollector, TablePropertiesCollectorFactory};
pub use txn::{
    BaseDeltaIterator, BatchEntries, BatchValue, DeadlockInfo, DeadlockPath, KeyLockInfo, OccValidationPolicy,
    OptimisticTransactionDb, OptimisticTransactionDbOptions, OptimisticTransactionOptions, Transaction, TransactionDb,
    TransactionDbOptions, TransactionOptions, TransactionState, WriteBatchWithIndex,
};
pub use util::checksum::ChecksumType;
pub use wide_columns::{WideColumn, DEFAULT_COLUMN_NAME};
pub use write_buffer_manager::WriteBufferManager;
