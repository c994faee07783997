//! The engine boundary: what the benchmarks need from a key-value store, so the
//! same runner drives Ebb ([`ebb`]) and RocksDB ([`rocksdb`], behind the
//! `rocksdb-peer` feature).
//!
//! Thread-safety: an engine is shared by reference between the client threads
//! (`Send + Sync`); every call may run concurrently with any other, except
//! [`Engine::close`], which consumes it.

pub mod ebb;
pub mod options_map;
#[cfg(feature = "rocksdb-peer")]
pub mod rocksdb;
pub mod slow_fs;
pub mod timestamps;
pub mod transaction;

use std::path::Path;

use crate::config::EngineKind;
use crate::error::{BenchError, Result};
use crate::flags::{Flags, Value};

/// Per-write durability.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOpts {
    /// fsync the WAL before returning.
    pub sync: bool,
    /// Skip the WAL.
    pub disable_wal: bool,
}

/// One operation of a write batch.
#[derive(Debug, Clone, Copy)]
pub enum BatchOp<'a> {
    /// Put key → value.
    Put(&'a [u8], &'a [u8]),
    /// Delete key.
    Delete(&'a [u8]),
    /// Delete every key from the first (included) to the second (excluded):
    /// one range tombstone (RocksDB's `DeleteRange`).
    DeleteRange(&'a [u8], &'a [u8]),
}

impl<'a> BatchOp<'a> {
    /// The key the operation writes (a range deletion's begin), which picks
    /// its column family under `--num_column_families`.
    pub fn key(&self) -> &'a [u8] {
        match self {
            BatchOp::Put(k, _) | BatchOp::Delete(k) | BatchOp::DeleteRange(k, _) => k,
        }
    }
}

/// Where a scan starts.
#[derive(Debug, Clone, Copy)]
pub enum ScanStart<'a> {
    /// The smallest key.
    First,
    /// The largest key.
    Last,
    /// The first key at or after (forward) / at or before (backward) this one.
    At(&'a [u8]),
}

/// Scan direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Ascending keys (Next).
    Forward,
    /// Descending keys (Prev).
    Backward,
}

/// Cumulative figures since the database was opened, for the interval series.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineMetrics {
    /// Bytes of keys and values written by users (the ingest).
    pub user_bytes_written: u64,
    /// Bytes written by flushes.
    pub flush_bytes_written: u64,
    /// Bytes written by compactions.
    pub compaction_bytes_written: u64,
    /// Microseconds writers spent stalled.
    pub stall_micros: u64,
    /// Files per level (index = level).
    pub files_per_level: Vec<u64>,
    /// Estimated pending compaction bytes.
    pub pending_compaction_bytes: u64,
    /// False while automatic compaction is off (by option or by a tuner).
    pub compaction_enabled: bool,
    /// Block cache hits.
    pub block_cache_hits: u64,
    /// Block cache misses.
    pub block_cache_misses: u64,
    /// Bytes appended to the WAL.
    pub wal_bytes: u64,
    /// Bytes of table files per level (index = level); empty when the engine
    /// does not say.
    pub bytes_per_level: Vec<u64>,
    /// Flush and compaction jobs finished, when the engine counts them.
    pub jobs: Option<JobCounts>,
    /// What the background tuner has done, for an engine that has one.
    pub tuner: Option<TunerActivity>,
    /// MANIFEST syncs `--manifest_sync_delay_ms` slowed, and the
    /// microseconds they slept (Ebb only; zeros without the flag).
    pub slowed_manifest_syncs: (u64, u64),
}

/// Background jobs finished since open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobCounts {
    /// Flushes.
    pub flushes: u64,
    /// Compactions, trivial moves included.
    pub compactions: u64,
    /// Compactions that moved files without rewriting them.
    pub trivial_moves: u64,
}

/// A background tuner's decisions since open (Ebb's `background_tuning`,
/// docs/tuning.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TunerActivity {
    /// The mode: `off`, `thesis`, `adaptive` or `idle`.
    pub mode: String,
    /// Its phase now (`paced`, `deferred`, `catch_up`, `forced`; `enabled` or
    /// `disabled` for the thesis tuner).
    pub phase: String,
    /// Times it held automatic compaction back.
    pub disables: u64,
    /// Times it let automatic compaction run again.
    pub enables: u64,
    /// Times it paused running compactions.
    pub pauses: u64,
    /// Catch-ups it started after a peak.
    pub catch_ups: u64,
    /// Times a bound (L0 files, pending bytes) forced compaction.
    pub forced: u64,
}

/// A thread's performance counter reports: `(name, report)` pairs
/// ([`Engine::end_perf`]).
pub type PerfReports = Vec<(&'static str, String)>;

/// A key-value store under test.
pub trait Engine: Send + Sync {
    /// `ebb` or `rocksdb`: also the prefix of its property names (`ebb.stats`).
    fn name(&self) -> &'static str;
    /// Writes one key.
    fn put(&self, key: &[u8], value: &[u8], wo: WriteOpts) -> Result<()>;
    /// Deletes one key.
    fn delete(&self, key: &[u8], wo: WriteOpts) -> Result<()>;
    /// Merges `value` into one key through the merge operator the engine
    /// was opened with (`--merge_operator`); an engine without one refuses.
    fn merge(&self, key: &[u8], value: &[u8], wo: WriteOpts) -> Result<()>;
    /// Deletes every key from `begin` (included) to `end` (excluded) with
    /// one range tombstone (RocksDB's `DeleteRange`); `begin` must not come
    /// after `end`. The default writes a batch of that one operation.
    fn delete_range(&self, begin: &[u8], end: &[u8], wo: WriteOpts) -> Result<()> {
        self.write_batch(&[BatchOp::DeleteRange(begin, end)], wo)
    }
    /// Applies a batch atomically.
    fn write_batch(&self, ops: &[BatchOp<'_>], wo: WriteOpts) -> Result<()>;
    /// Reads one key.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Reads one key as db_bench's read benchmarks do, into a pinned slice
    /// (`Get` into a `PinnableSlice`: the value is not copied out of its
    /// block), and returns the value's length. The default copies.
    fn get_len(&self, key: &[u8]) -> Result<Option<usize>> {
        Ok(self.get(key)?.map(|v| v.len()))
    }
    /// Reads several keys.
    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>>;
    /// Opens an iterator at `start` and visits up to `limit` entries in
    /// `direction`, stopping early when `visit` returns false. Returns the
    /// number of entries visited.
    fn scan(
        &self,
        start: ScanStart<'_>,
        direction: Direction,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<u64>;
    /// Flushes the memtables and waits.
    fn flush(&self) -> Result<()>;
    /// Compacts the whole key range.
    fn compact_range(&self) -> Result<()>;
    /// Waits until no flush or compaction is pending or running.
    fn wait_for_compaction(&self) -> Result<()>;
    /// A named property (`ebb.stats`, `rocksdb.levelstats`, ...).
    fn property(&self, name: &str) -> Option<String>;
    /// Cumulative figures now.
    fn metrics(&self) -> EngineMetrics;
    /// The value each engine flag has in the open engine, read back from it
    /// (Ebb's options; the OPTIONS file RocksDB wrote), in the flag's form.
    /// Flags the engine does not record are left out.
    fn effective_options(&self) -> Vec<(&'static str, Value)>;
    /// Writes an SST file at `path` holding `entries` (sorted, distinct
    /// keys) with the engine's SST writer and the database's options
    /// (RocksDB's `SstFileWriter`), for [`Engine::ingest`].
    /// The default refuses.
    fn write_sst(&self, path: &Path, entries: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>) -> Result<()> {
        let _ = entries;
        Err(BenchError::new(format!("{} writes no SST file ({})", self.name(), path.display())))
    }
    /// Ingests SST files written by [`Engine::write_sst`], hard-linking them
    /// (RocksDB's `IngestExternalFile` with `move_files`). The default refuses.
    fn ingest(&self, paths: &[std::path::PathBuf]) -> Result<()> {
        Err(BenchError::new(format!("{} ingests no SST file ({} given)", self.name(), paths.len())))
    }
    /// The database's transactions, when it was opened as a transaction
    /// database (`--transaction_db`, `--optimistic_transaction_db`);
    /// `None` for a plain one.
    fn transactions(&self) -> Option<&dyn transaction::TransactionDb> {
        None
    }
    /// Makes a checkpoint of the database in `dir` (RocksDB's `Checkpoint`).
    /// The default refuses.
    fn checkpoint(&self, dir: &Path) -> Result<()> {
        Err(BenchError::new(format!("{} makes no checkpoint ({})", self.name(), dir.display())))
    }
    /// Sets the calling thread's performance counters to RocksDB's
    /// `PerfLevel` number `level` and zeroes them (`--perf_level`). The
    /// default (an engine without counters) does nothing.
    fn start_perf(&self, level: u32) {
        let _ = level;
    }
    /// The calling thread's counters since [`Engine::start_perf`], each set
    /// as `(name, report)` in the engine's own `ToString` form, zeros left
    /// out (`PERF_CONTEXT`, and `IO_STATS` where the engine gives it); then
    /// the thread counts no more.
    fn end_perf(&self) -> PerfReports {
        Vec::new()
    }
    /// Closes the database.
    fn close(self: Box<Self>) -> Result<()>;
}

/// `options`' output: a header, then `  --flag=value` per flag
/// ([`options_map::parse_effective`] reads it back).
pub fn render_effective(values: &[(&'static str, Value)]) -> String {
    let mut out = String::from("Effective engine options (read back from the engine):\n");
    for (flag, v) in values {
        out.push_str(&format!("  --{flag}={}\n", v.to_text()));
    }
    out
}

/// The merge operators `--merge_operator` takes: db_bench's name, then
/// RocksDB's class name (also accepted, and what both engines record).
pub const MERGE_OPERATORS: &[(&str, &str)] = &[
    ("uint64add", "UInt64AddOperator"),
    ("stringappend", "StringAppendOperator"),
    ("max", "MaxOperator"),
    ("put", "PutOperator"),
];

/// db_bench's name of the merge operator `name` names (either of its
/// names); `""` for none (`""`, or `nullptr` as OPTIONS files write it).
pub fn merge_operator_name(name: &str) -> Result<&'static str> {
    if name.is_empty() || name == "nullptr" {
        return Ok("");
    }
    match MERGE_OPERATORS.iter().find(|(short, class)| *short == name || *class == name) {
        Some((short, _)) => Ok(short),
        None => crate::bail!(
            "flag --merge_operator={name}: unknown merge operator (expected one of db_bench's {})",
            MERGE_OPERATORS.iter().map(|(short, _)| *short).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The benchmarks that merge, which need a merge operator.
pub const MERGE_BENCHMARKS: &[&str] = &["mergerandom", "readrandommergerandom"];

/// True when the engine opens with a merge operator: `--merge_operator`,
/// or for Ebb one an `--options_file` names.
pub fn has_merge_operator(kind: EngineKind, flags: &Flags) -> Result<bool> {
    Ok(match kind {
        EngineKind::Ebb => ebb::ebb_options(flags, true)?.merge_operator.is_some(),
        // The peer takes no OPTIONS file (`Config::from_flags`), only the flag.
        EngineKind::RocksDb => !merge_operator_name(flags.str("merge_operator"))?.is_empty(),
    })
}

/// True when the engine opens with a prefix extractor: `--prefix_size`, or
/// for Ebb one an `--options_file` names (`prefix_extractor=...`).
pub fn has_prefix_extractor(kind: EngineKind, flags: &Flags) -> Result<bool> {
    Ok(match kind {
        EngineKind::Ebb => ebb::ebb_options(flags, true)?.prefix_extractor.is_some(),
        // The peer takes no OPTIONS file, only the flag.
        EngineKind::RocksDb => flags.i64("prefix_size") > 0,
    })
}

/// Checks the engine options among `flags` without opening anything, so that
/// a value the engine refuses fails before the run prints its header.
pub fn check_options(kind: EngineKind, flags: &Flags) -> Result<()> {
    // Both engines know the same operators; the peer sets its own as it opens.
    merge_operator_name(flags.str("merge_operator"))?;
    match kind {
        EngineKind::Ebb => ebb::ebb_options(flags, true).map(drop),
        // The peer maps flags to the `rocksdb` crate's setters as it opens;
        // the values it takes from Ebb (every flag left out) are built from
        // the given ones, which must suit Ebb too (`--memtable_bloom_size_ratio`
        // within Ebb's range), so that much is checked here.
        EngineKind::RocksDb => ebb::peer_reference_options(flags).map(drop),
    }
}

/// Opens `kind` at `path` with the engine options among `flags`; `fresh`
/// destroys whatever database is there first, `create` allows creating one.
pub fn open(kind: EngineKind, path: &Path, flags: &Flags, fresh: bool, create: bool) -> Result<Box<dyn Engine>> {
    match kind {
        EngineKind::Ebb => Ok(Box::new(ebb::EbbEngine::open(path, flags, fresh, create)?)),
        EngineKind::RocksDb => open_rocksdb(path, flags, fresh, create),
    }
}

#[cfg(feature = "rocksdb-peer")]
fn open_rocksdb(path: &Path, flags: &Flags, fresh: bool, create: bool) -> Result<Box<dyn Engine>> {
    Ok(Box::new(rocksdb::RocksDbEngine::open(path, flags, fresh, create)?))
}

#[cfg(not(feature = "rocksdb-peer"))]
fn open_rocksdb(_path: &Path, _flags: &Flags, _fresh: bool, _create: bool) -> Result<Box<dyn Engine>> {
    crate::bail!(
        "--engine=rocksdb needs ebb-bench built with the rocksdb-peer feature: \
         cargo build -p ebb-bench --features rocksdb-peer (builds RocksDB from source; needs libclang)"
    )
}
