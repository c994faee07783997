//! Ebb: an embeddable, persistent LSM-tree key-value store whose background
//! work tunes itself to the load.
//!
//! Layers, bottom up (LevelDB's layout): `util` (coding, checksums,
//! compression), `fs` (the filesystem boundary), `key` (internal keys), `wal`
//! (write-ahead log), `memtable`, `sst` (block-based tables), `blob` (blob
//! files: values kept apart from the tables), `cache` (block cache),
//! `version` (MANIFEST and the set of live files), `iter` (merging),
//! `compaction`, `db` (the public handle).

#![deny(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]

// First, so that its `kill_point!` macro is in scope in every module below.
#[macro_use]
mod kill_points;

pub mod blob;
pub mod cache;
pub mod compaction;
mod db;
mod error;
pub mod fs;
pub mod iter;
pub mod key;
pub mod memtable;
mod options;
pub mod sst;
pub mod stats;
pub mod tuning;
pub mod util;
pub mod version;
pub mod wal;

pub use db::{
    BatchIter, BatchOp, ColumnFamilyHandle, CompactionJobInfo, Db, DbIterator, DbMetrics, Direction, Entries,
    EventListener, FlushJobInfo, IteratorMode, RecoveryReport, RepairReport, RepairedBlobFile, RepairedTable,
    RepairedWal, SetAside, Snapshot, StallCondition, TuningEvent, TuningMetrics, WalDamage, WriteBatch,
    DEFAULT_COLUMN_FAMILY, LOST_DIR,
};
pub use error::{Error, Result};
pub use key::SequenceNumber;
pub use options::{
    BackgroundTuning, CompactionOptionsFifo, CompactionOptionsUniversal, CompactionStyle, CompressionType,
    IdlePolicyKind, IndexType, Options, ReadOptions, WalRecoveryMode, WriteOptions, MAX_KEY_SIZE, MAX_VALUE_SIZE,
};
pub use sst::PinnableSlice;
pub use util::checksum::ChecksumType;
