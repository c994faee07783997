//! Ebb behind the [`Engine`] trait. db_bench flags become `ebb::Options` by
//! their RocksDB names (the flag table's `Engine(name)`), only when given on
//! the command line. A flag whose option Ebb does not have yet is refused
//! unless it holds its default.

use std::path::Path;

use ebb::{
    ColumnFamilyHandle, Db, OptimisticTransactionDb, OptimisticTransactionDbOptions, OptimisticTransactionOptions,
    Options, ReadOptions, TransactionDbOptions, TransactionOptions, WriteBatch, WriteOptions,
};

use super::options_map;
use super::slow_fs::{SlowManifestFs, SlowedSyncs};
use super::transaction::{
    kind_from_flags, Transaction, TransactionDb, TransactionDbKind, TransactionError, TransactionOpts,
    TransactionResult,
};
use super::{BatchOp, Direction, Engine, EngineMetrics, JobCounts, ScanStart, TunerActivity, WriteOpts};
use crate::bail;
use crate::error::{BenchError, Result};
use crate::flags::{missing_in_ebb, not_in_ebb, spec, Flags, Support, Value};

/// The database as it was opened: plain, or as one of the transaction
/// databases (`--optimistic_transaction_db`, `--transaction_db`), each of
/// which is a [`Db`] beneath.
enum Handle {
    Plain(Db),
    Optimistic(OptimisticTransactionDb),
    /// Boxed: its lock manager makes it ten times the others' size.
    Pessimistic(Box<ebb::TransactionDb>),
}

impl std::ops::Deref for Handle {
    type Target = Db;
    fn deref(&self) -> &Db {
        match self {
            Handle::Plain(db) => db,
            Handle::Optimistic(db) => db.db(),
            Handle::Pessimistic(db) => db.db(),
        }
    }
}

impl Handle {
    /// The pessimistic database, whose own writes lock their keys as a
    /// transaction's do (db_bench's writes on a `TransactionDB` go through
    /// it too); `None` for the others, whose writes go to the [`Db`].
    fn locking(&self) -> Option<&ebb::TransactionDb> {
        match self {
            Handle::Pessimistic(db) => Some(db),
            _ => None,
        }
    }

    fn close(self) -> ebb::Result<()> {
        match self {
            Handle::Plain(db) => db.close(),
            Handle::Optimistic(db) => db.close(),
            Handle::Pessimistic(db) => db.close(),
        }
    }
}

/// An open Ebb database.
pub struct EbbEngine {
    db: Handle,
    /// `--num_column_families` above 1: the families after the default one
    /// (db_bench's names). A key's family is its hash modulo the count, 0
    /// being the default family; scans read the default family only.
    families: Vec<ColumnFamilyHandle>,
    /// The options it was opened with.
    options: Options,
    /// `--prefix_same_as_start` and `--total_order_seek`: the read options
    /// of every iterator (db_bench's `read_options_`).
    prefix_same_as_start: bool,
    total_order_seek: bool,
    /// `--manifest_sync_delay_ms`: the MANIFEST syncs it slowed.
    slowed_syncs: Option<std::sync::Arc<SlowedSyncs>>,
    /// `--user_timestamp_size=8`: the run's timestamps and the default
    /// family, whose keys carry them.
    ts: Option<(super::timestamps::Timestamps, ColumnFamilyHandle)>,
}

/// db_bench's `ColumnFamilyName(i)`.
pub(crate) fn family_name(i: usize) -> String {
    if i == 0 {
        "default".to_string()
    } else {
        format!("column_family_name_{i:06}")
    }
}

/// The text an engine option gets for a flag's value; `None` = leave the engine default.
pub fn option_text(flag: &str, value: &Value) -> Result<Option<String>> {
    if options_map::means_engine_default(flag, value) {
        return Ok(None);
    }
    Ok(match (flag, value) {
        ("checksum_type", Value::Int(1)) => Some("kCRC32c".into()),
        ("checksum_type", Value::Int(4)) => Some("kXXH3".into()),
        // db_bench's names; RocksDB has no other clock cache now, so clock_cache is Ebb's clock too.
        ("cache_type", Value::Str(t)) if t == "lru_cache" => Some("kLRUCache".into()),
        ("cache_type", Value::Str(t)) if t == "hyper_clock_cache" || t == "clock_cache" => {
            Some("kHyperClockCache".into())
        }
        ("index_type", Value::Int(0)) => Some("kBinarySearch".into()),
        ("index_type", Value::Int(2)) => Some("kTwoLevelIndexSearch".into()),
        ("index_type", Value::Int(other)) => {
            bail!("flag --index_type={other}: Ebb supports 0 (binary search) and 2 (two-level index)")
        }
        ("checksum_type", Value::Int(other)) => {
            bail!("flag --checksum_type={other}: Ebb supports 1 (CRC32c) and 4 (XXH3)")
        }
        ("fifo_compaction_max_table_files_size_mb", Value::UInt(mb)) => Some(mb.saturating_mul(1 << 20).to_string()),
        // Ebb's `from_name` takes the same names; this refuses others in the flag's words.
        ("merge_operator", Value::Str(name)) => Some(super::merge_operator_name(name)?.to_string()),
        // db_bench's `NewFixedPrefixTransform(prefix_size)`, or none for 0.
        ("prefix_size", Value::Int(0)) => Some("nullptr".into()),
        ("prefix_size", Value::Int(n)) if *n > 0 => Some(format!("rocksdb.FixedPrefix.{n}")),
        ("prefix_size", Value::Int(n)) => bail!("flag --prefix_size must not be negative, got {n}"),
        _ => Some(value.to_text()),
    })
}

/// The options an `--options_preset` value starts from.
pub fn preset_options(preset: &str) -> Result<Options> {
    Ok(match preset {
        "" => Options::default(),
        "write" => Options::default().optimize_for_writes(),
        "read" => Options::default().optimize_for_reads(),
        "bulk_load" => Options::default().prepare_for_bulk_load(),
        other => bail!("flag --options_preset: unknown preset {other:?} (expected write, read or bulk_load)"),
    })
}

/// Builds Ebb's options: the preset (`--options_preset`), then the OPTIONS
/// file (`--options_file`), then the engine flags given explicitly, each on
/// top of the last.
pub fn ebb_options(flags: &Flags, create: bool) -> Result<Options> {
    build_options(flags, create, read_options_file(flags)?.as_ref().map(|(t, f)| (t.as_str(), f.as_str())), false)
}

/// The options the RocksDB peer is given where a flag is absent: Ebb's, from
/// the same preset, OPTIONS file and flags, skipping the flags Ebb has no
/// option for (the peer sets those itself).
pub fn peer_reference_options(flags: &Flags) -> Result<Options> {
    build_options(flags, true, read_options_file(flags)?.as_ref().map(|(t, f)| (t.as_str(), f.as_str())), true)
        .map_err(|e| {
            BenchError::new(format!(
                "{e} (--engine=rocksdb takes Ebb's value for every engine flag not given, so the flags must suit Ebb too)"
            ))
        })
}

fn read_options_file(flags: &Flags) -> Result<Option<(String, String)>> {
    let file = flags.str("options_file");
    if file.is_empty() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(file)
        .map_err(|e| BenchError::new(format!("flag --options_file: cannot read {file}: {e}")))?;
    Ok(Some((text, file.to_string())))
}

/// As [`ebb_options`], with the OPTIONS text (and where it came from, for
/// errors) given instead of read from `--options_file`.
pub fn ebb_options_with_text(flags: &Flags, create: bool, options_text: Option<(&str, &str)>) -> Result<Options> {
    build_options(flags, create, options_text, false)
}

fn build_options(
    flags: &Flags,
    create: bool,
    options_text: Option<(&str, &str)>,
    skip_missing: bool,
) -> Result<Options> {
    let mut opts = preset_options(flags.str("options_preset"))?;
    if let Some((text, origin)) = options_text {
        opts.apply_text(text).map_err(|e| BenchError::new(format!("options file {origin}: {e}")))?;
    }
    for name in flags.explicit() {
        let Some(s) = spec(name) else { continue };
        let Support::Engine(option) = s.support else { continue };
        let Some(value) = flags.value(name) else { continue };
        // `Flags::parse` refuses these already; flags set by `Flags::set` (experiments) arrive here.
        if missing_in_ebb(s).is_some() {
            if flags.is_default(s) || skip_missing {
                continue;
            }
            return Err(not_in_ebb(name, option));
        }
        let Some(text) = option_text(name, value)? else { continue };
        opts.set(option, &text).map_err(|e| BenchError::new(format!("flag --{name}: {e}")))?;
    }
    // The client decides whether the database is created, whatever a file says.
    opts.create_if_missing = create;
    opts.validate().map_err(|e| BenchError::new(format!("engine options: {e}")))?;
    Ok(opts)
}

/// `--event_log`: one line per engine event, seconds since open first, so a
/// run's tuning decisions can be read beside its interval series.
struct EventLog {
    start: std::time::Instant,
    out: parking_lot::Mutex<std::io::BufWriter<std::fs::File>>,
}

impl EventLog {
    fn create(path: &Path) -> Result<EventLog> {
        let file = std::fs::File::create(path)
            .map_err(|e| BenchError::new(format!("flag --event_log: cannot create {}: {e}", path.display())))?;
        Ok(EventLog { start: std::time::Instant::now(), out: parking_lot::Mutex::new(std::io::BufWriter::new(file)) })
    }

    fn line(&self, text: std::fmt::Arguments<'_>) {
        use std::io::Write;
        let mut out = self.out.lock();
        // An event log that cannot be written must not fail the benchmark.
        let _ = writeln!(out, "{:10.3} {text}", self.start.elapsed().as_secs_f64());
        let _ = out.flush();
    }
}

impl ebb::EventListener for EventLog {
    fn on_flush_completed(&self, info: &ebb::FlushJobInfo) {
        self.line(format_args!("flush file={} bytes={} micros={}", info.file_number, info.bytes_written, info.micros));
    }

    fn on_compaction_begin(&self, info: &ebb::CompactionJobInfo) {
        self.line(format_args!(
            "compaction-begin L{}->L{} inputs={} move={}",
            info.input_level,
            info.output_level,
            info.input_files.len(),
            info.trivial_move
        ));
    }

    fn on_compaction_completed(&self, info: &ebb::CompactionJobInfo) {
        self.line(format_args!(
            "compaction-end L{}->L{} inputs={} read={} written={} micros={} cancelled={}",
            info.input_level,
            info.output_level,
            info.input_files.len(),
            info.bytes_read,
            info.bytes_written,
            info.micros,
            info.cancelled
        ));
    }

    fn on_stall_conditions_changed(&self, previous: ebb::StallCondition, current: ebb::StallCondition) {
        self.line(format_args!("stall {previous:?} -> {current:?}"));
    }

    fn on_background_tuning(&self, event: &ebb::TuningEvent) {
        self.line(format_args!("tuning {} {} phase={}", event.mode, event.action, event.phase));
    }
}

fn write_options(wo: WriteOpts) -> WriteOptions {
    WriteOptions { sync: wo.sync, disable_wal: wo.disable_wal }
}

impl EbbEngine {
    /// Opens (after destroying, if `fresh`) the database at `path`.
    pub fn open(path: &Path, flags: &Flags, fresh: bool, create: bool) -> Result<EbbEngine> {
        let count = flags.i64("num_column_families");
        if count < 1 {
            bail!("flag --num_column_families={count}: at least 1");
        }
        let count = count as usize;
        let mut opts = ebb_options(flags, create)?;
        let timestamps = super::timestamps::Timestamps::from_flags(flags)?;
        if timestamps.is_some() {
            opts.comparator = Some(ebb::comparator::bytewise_with_u64_ts());
        }
        let event_log = flags.str("event_log");
        if !event_log.is_empty() {
            opts.listeners.push(std::sync::Arc::new(EventLog::create(Path::new(event_log))?));
        }
        let delay_ms = flags.u64("manifest_sync_delay_ms")?;
        let slowed_syncs = (delay_ms > 0).then(|| std::sync::Arc::new(SlowedSyncs::default()));
        if let Some(slowed) = &slowed_syncs {
            let delay = std::time::Duration::from_millis(delay_ms);
            opts.fs = std::sync::Arc::new(SlowManifestFs::new(opts.fs.clone(), delay, std::sync::Arc::clone(slowed)));
        }
        if fresh && path.exists() {
            Db::destroy(path, &opts).map_err(|e| BenchError::new(format!("cannot destroy {}: {e}", path.display())))?;
        }
        let cannot_open = |e: ebb::Error| BenchError::new(format!("cannot open {}: {e}", path.display()));
        let existing =
            if path.exists() { Db::list_column_families(path, &opts).unwrap_or_default() } else { Vec::new() };
        let listed: Vec<(&str, Options)> =
            existing.iter().filter(|n| *n != "default").map(|n| (n.as_str(), opts.clone())).collect();
        let db = match kind_from_flags(flags)? {
            None if flags.bool("readonly") => {
                Handle::Plain(Db::open_cf_read_only(path, opts.clone(), &listed).map_err(cannot_open)?)
            }
            None => Handle::Plain(Db::open_cf(path, opts.clone(), &listed).map_err(cannot_open)?),
            Some(kind) => {
                if count > 1 || !listed.is_empty() {
                    bail!(
                        "--{} with column families: the transaction benchmarks write the default family only, \
                         so ebb-bench opens a transaction database with that family alone (--num_column_families=1)",
                        kind.flag()
                    );
                }
                match kind {
                    TransactionDbKind::Optimistic => Handle::Optimistic(
                        OptimisticTransactionDb::open(path, opts.clone(), OptimisticTransactionDbOptions::default())
                            .map_err(cannot_open)?,
                    ),
                    TransactionDbKind::Pessimistic => Handle::Pessimistic(Box::new(
                        ebb::TransactionDb::open(path, opts.clone(), TransactionDbOptions::default())
                            .map_err(cannot_open)?,
                    )),
                }
            }
        };
        let mut families = Vec::new();
        for name in (1..count).map(family_name) {
            let handle = match db.cf_handle(&name) {
                Some(h) => h,
                None if flags.bool("readonly") => {
                    bail!("--readonly: the database has no column family {name} (--num_column_families={count})")
                }
                None => db.create_column_family(&name, &opts).map_err(cannot_open)?,
            };
            families.push(handle);
        }
        let ts = match timestamps {
            Some(t) => Some((t, db.cf_handle("default").ok_or_else(|| BenchError::new("no default family"))?)),
            None => None,
        };
        Ok(EbbEngine {
            db,
            families,
            options: opts,
            prefix_same_as_start: flags.bool("prefix_same_as_start"),
            total_order_seek: flags.bool("total_order_seek"),
            slowed_syncs,
            ts,
        })
    }

    /// The family `key` lives in; `None` for the default one.
    fn family(&self, key: &[u8]) -> Option<&ColumnFamilyHandle> {
        if self.families.is_empty() {
            return None;
        }
        let i = (xxhash_rust::xxh3::xxh3_64(key) % (self.families.len() as u64 + 1)) as usize;
        i.checked_sub(1).map(|i| &self.families[i])
    }
}

impl Engine for EbbEngine {
    fn start_perf(&self, level: u32) {
        ebb::perf::set_perf_level(ebb::perf::PerfLevel::from_number(level).unwrap_or_default());
        ebb::perf::reset_perf_context();
        ebb::perf::reset_iostats_context();
    }

    fn end_perf(&self) -> super::PerfReports {
        let reports = vec![
            ("PERF_CONTEXT", ebb::perf::perf_context().report(true)),
            ("IO_STATS", ebb::perf::iostats_context().report(true)),
        ];
        ebb::perf::set_perf_level(ebb::perf::PerfLevel::Disable);
        reports
    }

    fn name(&self) -> &'static str {
        "ebb"
    }

    fn put(&self, key: &[u8], value: &[u8], wo: WriteOpts) -> Result<()> {
        let wo = write_options(wo);
        if let Some((t, cf)) = &self.ts {
            return Ok(self.db.put_with_ts_opt(cf, key, t.write(), value, &wo)?);
        }
        match (self.family(key), self.db.locking()) {
            (None, None) => Ok(self.db.put_opt(key, value, &wo)?),
            (Some(cf), None) => Ok(self.db.put_cf_opt(cf, key, value, &wo)?),
            (None, Some(tdb)) => Ok(tdb.put_opt(key, value, &wo)?),
            (Some(cf), Some(tdb)) => Ok(tdb.put_cf_opt(cf, key, value, &wo)?),
        }
    }

    fn delete(&self, key: &[u8], wo: WriteOpts) -> Result<()> {
        let wo = write_options(wo);
        if let Some((t, cf)) = &self.ts {
            return Ok(self.db.delete_with_ts_opt(cf, key, t.write(), &wo)?);
        }
        match (self.family(key), self.db.locking()) {
            (None, None) => Ok(self.db.delete_opt(key, &wo)?),
            (Some(cf), None) => Ok(self.db.delete_cf_opt(cf, key, &wo)?),
            (None, Some(tdb)) => Ok(tdb.delete_opt(key, &wo)?),
            (Some(cf), Some(tdb)) => Ok(tdb.delete_cf_opt(cf, key, &wo)?),
        }
    }

    fn merge(&self, key: &[u8], value: &[u8], wo: WriteOpts) -> Result<()> {
        let wo = write_options(wo);
        if let Some((t, cf)) = &self.ts {
            let mut batch = WriteBatch::new();
            batch.merge_with_ts(cf, key, t.write(), value);
            return Ok(self.db.write_opt(&batch, &wo)?);
        }
        match (self.family(key), self.db.locking()) {
            (None, None) => Ok(self.db.merge_opt(key, value, &wo)?),
            (Some(cf), None) => Ok(self.db.merge_cf_opt(cf, key, value, &wo)?),
            (None, Some(tdb)) => Ok(tdb.merge_opt(key, value, &wo)?),
            (Some(cf), Some(tdb)) => Ok(tdb.merge_cf_opt(cf, key, value, &wo)?),
        }
    }

    /// In the family of `begin`, as a batch's range deletion goes.
    fn delete_range(&self, begin: &[u8], end: &[u8], wo: WriteOpts) -> Result<()> {
        if self.ts.is_some() {
            bail!("range deletions with --user_timestamp_size=8 are not supported");
        }
        match self.family(begin) {
            None => Ok(self.db.delete_range_opt(begin, end, &write_options(wo))?),
            Some(cf) => Ok(self.db.delete_range_cf_opt(cf, begin, end, &write_options(wo))?),
        }
    }

    fn write_batch(&self, ops: &[BatchOp<'_>], wo: WriteOpts) -> Result<()> {
        let mut batch = WriteBatch::new();
        if let Some((t, cf)) = &self.ts {
            for op in ops {
                match op {
                    BatchOp::Put(k, v) => batch.put_with_ts(cf, k, t.write(), v),
                    BatchOp::Delete(k) => batch.delete_with_ts(cf, k, t.write()),
                    BatchOp::DeleteRange(..) => bail!("range deletions with --user_timestamp_size=8 are not supported"),
                }
            }
            return Ok(self.db.write_opt(&batch, &write_options(wo))?);
        }
        for op in ops {
            match (op, self.family(op.key())) {
                (BatchOp::Put(k, v), None) => batch.put(k, v),
                (BatchOp::Put(k, v), Some(cf)) => batch.put_cf(cf, k, v),
                (BatchOp::Delete(k), None) => batch.delete(k),
                (BatchOp::Delete(k), Some(cf)) => batch.delete_cf(cf, k),
                (BatchOp::DeleteRange(b, e), None) => batch.delete_range(b, e),
                (BatchOp::DeleteRange(b, e), Some(cf)) => batch.delete_range_cf(cf, b, e),
            }
        }
        match self.db.locking() {
            None => Ok(self.db.write_opt(&batch, &write_options(wo))?),
            Some(tdb) => Ok(tdb.write_opt(&batch, &write_options(wo))?),
        }
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some((t, cf)) = &self.ts {
            return Ok(self.db.get_cf_opt(
                cf,
                key,
                &ReadOptions { timestamp: Some(t.read()), ..Default::default() },
            )?);
        }
        match self.family(key) {
            None => Ok(self.db.get(key)?),
            Some(cf) => Ok(self.db.get_cf(cf, key)?),
        }
    }

    fn get_len(&self, key: &[u8]) -> Result<Option<usize>> {
        if let Some((t, cf)) = &self.ts {
            let ro = ReadOptions { timestamp: Some(t.read()), ..Default::default() };
            return Ok(self.db.get_pinned_cf_opt(cf, key, &ro)?.map(|v| v.len()));
        }
        let value = match self.family(key) {
            None => self.db.get_pinned(key)?,
            Some(cf) => self.db.get_pinned_cf_opt(cf, key, &ReadOptions::default())?,
        };
        Ok(value.map(|v| v.len()))
    }

    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        if !self.families.is_empty() {
            return keys.iter().map(|k| self.get(k)).collect();
        }
        let ro = ReadOptions { timestamp: self.ts.as_ref().map(|(t, _)| t.read()), ..Default::default() };
        self.db.multi_get(keys, &ro).into_iter().map(|r| r.map_err(BenchError::from)).collect()
    }

    fn scan(
        &self,
        start: ScanStart<'_>,
        direction: Direction,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<u64> {
        let ro = ReadOptions {
            prefix_same_as_start: self.prefix_same_as_start,
            total_order_seek: self.total_order_seek,
            timestamp: self.ts.as_ref().map(|(t, _)| t.read()),
            ..ReadOptions::default()
        };
        let mut it = self.db.iter(ro);
        match (start, direction) {
            (ScanStart::First, _) => it.seek_to_first(),
            (ScanStart::Last, _) => it.seek_to_last(),
            (ScanStart::At(k), Direction::Forward) => it.seek(k),
            (ScanStart::At(k), Direction::Backward) => it.seek_for_prev(k),
        }
        let mut seen = 0;
        while seen < limit && it.valid() {
            seen += 1;
            if !visit(it.key(), it.value()) {
                break;
            }
            match direction {
                Direction::Forward => it.next(),
                Direction::Backward => it.prev(),
            }
        }
        it.status()?;
        Ok(seen)
    }

    fn flush(&self) -> Result<()> {
        self.db.flush(true)?;
        for cf in &self.families {
            self.db.flush_cf(cf, true)?;
        }
        Ok(())
    }

    fn compact_range(&self) -> Result<()> {
        self.db.compact_range(None, None)?;
        for cf in &self.families {
            self.db.compact_range_cf(cf, None, None)?;
        }
        Ok(())
    }

    fn wait_for_compaction(&self) -> Result<()> {
        Ok(self.db.wait_for_compact()?)
    }

    /// A pessimistic database adds its locks' (`ebb.txn.num-locks`, ...).
    fn property(&self, name: &str) -> Option<String> {
        match self.db.locking() {
            Some(tdb) => tdb.get_property(name),
            None => self.db.get_property(name),
        }
    }

    fn effective_options(&self) -> Vec<(&'static str, Value)> {
        options_map::engine_flags()
            .filter_map(|s| Some((s.name, options_map::ebb_flag_value(s, &self.options)?)))
            .collect()
    }

    fn metrics(&self) -> EngineMetrics {
        let m = self.db.metrics();
        EngineMetrics {
            user_bytes_written: m.user_bytes_written,
            flush_bytes_written: m.flush_bytes_written,
            compaction_bytes_written: m.compaction_bytes_written,
            stall_micros: m.stall_micros,
            files_per_level: m.files_per_level.iter().map(|n| *n as u64).collect(),
            pending_compaction_bytes: m.pending_compaction_bytes,
            compaction_enabled: m.compaction_enabled,
            block_cache_hits: m.block_cache_hits,
            block_cache_misses: m.block_cache_misses,
            wal_bytes: m.wal_bytes,
            bytes_per_level: m.bytes_per_level.clone(),
            jobs: Some(JobCounts {
                flushes: m.flushes,
                compactions: m.compactions_by_reason.iter().map(|(_, n)| n).sum(),
                trivial_moves: m.trivial_moves,
            }),
            tuner: Some(TunerActivity {
                mode: m.tuning.mode.to_string(),
                phase: m.tuning.phase.to_string(),
                disables: m.tuning.disables,
                enables: m.tuning.enables,
                pauses: m.tuning.pauses,
                catch_ups: m.tuning.catch_ups,
                forced: m.tuning.forced,
            }),
            slowed_manifest_syncs: self.slowed_syncs.as_ref().map_or((0, 0), |s| (s.count(), s.micros())),
        }
    }

    fn write_sst(&self, path: &Path, entries: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>) -> Result<()> {
        let mut w = ebb::SstFileWriter::create(&self.options);
        w.open(path)?;
        for (k, v) in entries {
            w.put(&k, &v)?;
        }
        w.finish()?;
        Ok(())
    }

    fn ingest(&self, paths: &[std::path::PathBuf]) -> Result<()> {
        let opts = ebb::IngestExternalFileOptions { move_files: true, ..Default::default() };
        Ok(self.db.ingest_external_file(paths, &opts)?)
    }

    fn checkpoint(&self, dir: &Path) -> Result<()> {
        ebb::Checkpoint::create(&self.db, dir)?;
        Ok(())
    }

    fn transactions(&self) -> Option<&dyn TransactionDb> {
        match &self.db {
            Handle::Plain(_) => None,
            Handle::Optimistic(db) => Some(db),
            Handle::Pessimistic(db) => Some(db.as_ref()),
        }
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(self.db.close()?)
    }
}

impl TransactionDb for OptimisticTransactionDb {
    fn kind(&self) -> TransactionDbKind {
        TransactionDbKind::Optimistic
    }

    fn begin(&self, wo: WriteOpts, o: &TransactionOpts) -> Box<dyn Transaction + '_> {
        let options = OptimisticTransactionOptions { set_snapshot: o.set_snapshot };
        Box::new(EbbTransaction(self.begin_transaction(&write_options(wo), &options)))
    }
}

impl TransactionDb for ebb::TransactionDb {
    fn kind(&self) -> TransactionDbKind {
        TransactionDbKind::Pessimistic
    }

    fn begin(&self, wo: WriteOpts, o: &TransactionOpts) -> Box<dyn Transaction + '_> {
        let options = TransactionOptions {
            set_snapshot: o.set_snapshot,
            lock_timeout: o.lock_timeout_ms,
            deadlock_detect: o.deadlock_detect,
            ..TransactionOptions::default()
        };
        Box::new(EbbTransaction(self.begin_transaction(&write_options(wo), &options)))
    }
}

/// The outcome a transaction benchmark counts, from Ebb's error (a
/// deadlock is also busy: asked first).
fn transaction_error(e: ebb::Error) -> TransactionError {
    if e.is_deadlock() {
        TransactionError::Deadlock
    } else if e.is_busy() {
        TransactionError::Busy
    } else if e.is_timed_out() {
        TransactionError::TimedOut
    } else if e.is_try_again() {
        TransactionError::TryAgain
    } else if e.is_expired() {
        TransactionError::Expired
    } else {
        TransactionError::Other(e.into())
    }
}

/// One of Ebb's transactions behind the [`Transaction`] trait.
struct EbbTransaction<'db>(ebb::Transaction<'db>);

impl Transaction for EbbTransaction<'_> {
    fn set_name(&mut self, name: &[u8]) -> TransactionResult<()> {
        self.0.set_name(name).map_err(transaction_error)
    }

    fn get(&mut self, key: &[u8]) -> TransactionResult<Option<Vec<u8>>> {
        self.0.get_opt(&self.0.read_options(), key).map_err(transaction_error)
    }

    /// Ebb's `get_for_update` reads at the transaction's snapshot already.
    fn get_for_update(&mut self, key: &[u8]) -> TransactionResult<Option<Vec<u8>>> {
        self.0.get_for_update(key).map_err(transaction_error)
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> TransactionResult<()> {
        self.0.put(key, value).map_err(transaction_error)
    }

    fn delete(&mut self, key: &[u8]) -> TransactionResult<()> {
        self.0.delete(key).map_err(transaction_error)
    }

    fn prepare(&mut self) -> TransactionResult<()> {
        self.0.prepare().map_err(transaction_error)
    }

    fn commit(mut self: Box<Self>) -> TransactionResult<()> {
        self.0.commit().map_err(transaction_error)
    }

    fn rollback(mut self: Box<Self>) -> TransactionResult<()> {
        self.0.rollback().map_err(transaction_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flags::Parsed;

    fn flags(args: &[&str]) -> Flags {
        match Flags::parse(args.iter().copied()).unwrap() {
            Parsed::Run(f) => f,
            _ => unreachable!(),
        }
    }

    #[test]
    fn engine_flags_map_to_options_by_rocksdb_name() {
        let f = flags(&[
            "--write_buffer_size=8388608",
            "--subcompactions=2",
            "--compression_type=None",
            "--bloom_bits=-1",
            "--cache_size=1048576",
            "--checksum_type=4",
            "--disable_auto_compactions=true",
            "--db_write_buffer_size=2097152",
        ]);
        let o = ebb_options(&f, true).unwrap();
        assert_eq!(o.write_buffer_size, 8 << 20);
        assert_eq!(o.db_write_buffer_size, 2 << 20);
        assert_eq!(o.max_subcompactions, 2);
        assert_eq!(o.compression, ebb::CompressionType::None);
        assert_eq!(o.bloom_bits_per_key, Options::default().bloom_bits_per_key);
        assert_eq!(o.block_cache_size, 1 << 20);
        assert_eq!(o.checksum, ebb::ChecksumType::Xxh3);
        assert!(o.disable_auto_compactions);
        assert!(o.create_if_missing);
    }

    #[test]
    fn blob_flags_reach_the_blob_options() {
        let o = ebb_options(
            &flags(&[
                "--enable_blob_files=true",
                "--min_blob_size=512",
                "--blob_file_size=1048576",
                "--blob_compression_type=lz4",
                "--enable_blob_garbage_collection=true",
                "--blob_garbage_collection_age_cutoff=0.5",
                "--blob_garbage_collection_force_threshold=0.8",
            ]),
            true,
        )
        .unwrap();
        assert!(o.enable_blob_files && o.enable_blob_garbage_collection);
        assert_eq!((o.min_blob_size, o.blob_file_size), (512, 1 << 20));
        assert_eq!(o.blob_compression_type, ebb::CompressionType::Lz4);
        assert_eq!((o.blob_garbage_collection_age_cutoff, o.blob_garbage_collection_force_threshold), (0.5, 0.8));
        let d = ebb_options(&flags(&[]), true).unwrap();
        assert!(!d.enable_blob_files, "blob files are off unless asked for, as in db_bench");
        let e = ebb_options(&flags(&["--blob_garbage_collection_age_cutoff=2"]), true).unwrap_err().to_string();
        assert!(e.contains("blob_garbage_collection_age_cutoff"), "{e}");
    }

    #[test]
    fn cache_flags_reach_the_block_cache_options() {
        let o = ebb_options(
            &flags(&[
                "--cache_size=1073741824",
                "--cache_type=hyper_clock_cache",
                "--cache_numshardbits=4",
                "--cache_index_and_filter_blocks=true",
            ]),
            true,
        )
        .unwrap();
        assert_eq!((o.block_cache_size, o.block_cache_num_shard_bits), (1 << 30, 4));
        assert_eq!(o.block_cache_type, ebb::cache::CacheType::Clock);
        assert!(o.cache_index_and_filter_blocks);
        let o = ebb_options(&flags(&["--cache_type=clock_cache"]), true).unwrap();
        assert_eq!(o.block_cache_type, ebb::cache::CacheType::Clock);
        let o = ebb_options(&flags(&["--cache_type=lru_cache", "--cache_lru_promote=false"]), true).unwrap();
        assert_eq!(o.block_cache_type, ebb::cache::CacheType::Lru);
        assert!(!o.block_cache_lru_promote_on_hit);
        let e = ebb_options(&flags(&["--cache_type=fifo"]), true).unwrap_err().to_string();
        assert!(e.contains("--cache_type") && e.contains("fifo"), "{e}");
        let o = ebb_options(&flags(&["--compressed_secondary_cache_size=67108864"]), true).unwrap();
        assert_eq!(o.compressed_secondary_cache_size, 64 << 20);
        assert_eq!(ebb_options(&flags(&[]), true).unwrap().compressed_secondary_cache_size, 0);
    }

    #[test]
    fn read_path_io_flags_reach_the_options() {
        let d = ebb_options(&flags(&[]), true).unwrap();
        assert!(!d.allow_mmap_reads && d.advise_random_on_open);
        assert_eq!(d.compaction_readahead_size, 2 << 20);
        let o = ebb_options(
            &flags(&[
                "--use_direct_reads=true",
                "--use_direct_io_for_flush_and_compaction=true",
                "--advise_random_on_open=false",
                "--compaction_readahead_size=0",
                "--initial_auto_readahead_size=4096",
                "--max_auto_readahead_size=65536",
            ]),
            true,
        )
        .unwrap();
        assert!(o.use_direct_reads && o.use_direct_io_for_flush_and_compaction && !o.advise_random_on_open);
        assert_eq!(
            (o.compaction_readahead_size, o.initial_auto_readahead_size, o.max_auto_readahead_size),
            (0, 4096, 65536)
        );
        let e = ebb_options(&flags(&["--max_auto_readahead_size=4294967296"]), true).unwrap_err().to_string();
        assert!(e.contains("max_auto_readahead_size"), "{e}");
    }

    #[test]
    fn missing_engine_options_are_refused_unless_default() {
        // The thesis tuner decides from rate-limiter drains, so it needs a rate.
        let e = ebb_options(&flags(&["--auto_tuned_compactions=true"]), true).unwrap_err().to_string();
        assert!(e.contains("rate_limiter_bytes_per_sec"), "{e}");
        let o = ebb_options(&flags(&["--auto_tuned_compactions=true", "--rate_limiter_bytes_per_sec=398458880"]), true)
            .unwrap();
        assert_eq!(o.tuning_mode(), ebb::BackgroundTuning::Thesis);
        assert!(ebb_options(&flags(&["--auto_tuned_compactions=false"]), true).is_ok());
        // `Flags::parse` refuses it; `Flags::set` (experiments) reaches the engine's own check.
        let mut f = flags(&[]);
        f.set("optimize_filters_for_hits", "true").unwrap();
        assert!(!Options::names().any(|n| n == "optimize_filters_for_hits"));
        assert!(ebb_options(&f, true).unwrap_err().to_string().contains("--optimize_filters_for_hits"));
    }

    #[test]
    fn bad_engine_values_name_the_flag() {
        let e = ebb_options(&flags(&["--compression_type=brotli"]), true).unwrap_err().to_string();
        assert!(e.contains("--compression_type") && e.contains("brotli"), "{e}");
        let e = ebb_options(&flags(&["--write_buffer_size=10"]), true).unwrap_err().to_string();
        assert!(e.contains("write_buffer_size"), "{e}");
        let e = ebb_options(&flags(&["--checksum_type=2"]), true).unwrap_err().to_string();
        assert!(e.contains("--checksum_type"), "{e}");
    }

    #[test]
    fn preset_then_file_then_flags() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("OPTIONS");
        std::fs::write(&path, "[CFOptions \"default\"]\n  max_write_buffer_number=3\n  write_buffer_size=1048576\n")
            .unwrap();
        let file = format!("--options_file={}", path.display());
        let o = ebb_options(&flags(&["--options_preset=write", &file, "--write_buffer_size=2097152"]), true).unwrap();
        // The flag beats the file, the file beats the preset (5 memtables).
        assert_eq!(o.write_buffer_size, 2 << 20);
        assert_eq!(o.max_write_buffer_number, 3);
        assert!(o.create_if_missing);
        let o = ebb_options(&flags(&["--options_preset=read"]), false).unwrap();
        assert_eq!(o.block_cache_size, Options::default().optimize_for_reads().block_cache_size);
        assert!(!o.create_if_missing);
        let o = ebb_options(&flags(&["--options_preset=bulk_load"]), true).unwrap();
        assert!(o.disable_auto_compactions);
    }

    #[test]
    fn bad_presets_and_files_are_named() {
        let e = ebb_options(&flags(&["--options_preset=fast"]), true).unwrap_err().to_string();
        assert!(e.contains("--options_preset") && e.contains("fast"), "{e}");
        let e = ebb_options(&flags(&["--options_file=/nonexistent/OPTIONS"]), true).unwrap_err().to_string();
        assert!(e.contains("--options_file") && e.contains("/nonexistent/OPTIONS"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("OPTIONS");
        std::fs::write(&path, "write_bufer_size=3\n").unwrap();
        let e = ebb_options(&flags(&[&format!("--options_file={}", path.display())]), true).unwrap_err().to_string();
        assert!(e.contains("write_bufer_size") && e.contains("OPTIONS"), "{e}");
    }
}
