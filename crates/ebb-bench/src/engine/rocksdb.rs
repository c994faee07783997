//! RocksDB behind the [`Engine`] trait, through the `rocksdb` crate (0.22),
//! for side-by-side runs with the same flags (`--engine=rocksdb`). Compiled
//! only with the `rocksdb-peer` feature, which builds RocksDB from source.
//!
//! Flags map to the crate's option setters by db_bench name, only when given;
//! the few the crate cannot express are refused unless at their defaults.
//! Statistics (needed for the interval series) are enabled with
//! `--statistics` or `--json`.

use std::path::Path;
use std::time::Duration;

use rocksdb::{
    BlockBasedOptions, Cache, ChecksumType, DBCompactionStyle, DBCompressionType, LruCacheOptions, Options, WriteBatch,
    WriteOptions, DB,
};

use super::{BatchOp, Direction, Engine, EngineMetrics, ScanStart, WriteOpts};
use crate::bail;
use crate::error::{BenchError, Result};
use crate::flags::{spec, Flags, Support, Value};

fn rocks_error(e: rocksdb::Error) -> BenchError {
    BenchError::new(format!("rocksdb: {e}"))
}

/// An open RocksDB database.
pub struct RocksDbEngine {
    db: DB,
    opts: Options,
    compaction_enabled: bool,
    num_levels: usize,
}

fn int(flag: &str, v: &Value) -> Result<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::UInt(u) => i64::try_from(*u).map_err(|_| BenchError::new(format!("flag --{flag}: value too large"))),
        other => bail!("flag --{flag}: expected an integer, got {other:?}"),
    }
}

fn i32_of(flag: &str, v: &Value) -> Result<i32> {
    i32::try_from(int(flag, v)?).map_err(|_| BenchError::new(format!("flag --{flag}: value out of range")))
}

fn u64_of(flag: &str, v: &Value) -> Result<u64> {
    u64::try_from(int(flag, v)?).map_err(|_| BenchError::new(format!("flag --{flag}: must not be negative")))
}

fn bool_of(flag: &str, v: &Value) -> Result<bool> {
    match v {
        Value::Bool(b) => Ok(*b),
        other => bail!("flag --{flag}: expected true or false, got {other:?}"),
    }
}

fn f64_of(flag: &str, v: &Value) -> Result<f64> {
    match v {
        Value::Double(d) => Ok(*d),
        other => bail!("flag --{flag}: expected a number, got {other:?}"),
    }
}

#[allow(deprecated)]
fn apply(opts: &mut Options, table: &mut BlockBasedOptions, flag: &str, v: &Value) -> Result<bool> {
    match flag {
        "statistics" => {
            if bool_of(flag, v)? {
                opts.enable_statistics();
            }
        }
        "write_buffer_size" => opts.set_write_buffer_size(u64_of(flag, v)? as usize),
        "max_write_buffer_number" => opts.set_max_write_buffer_number(i32_of(flag, v)?),
        "min_write_buffer_number_to_merge" => opts.set_min_write_buffer_number_to_merge(i32_of(flag, v)?),
        "max_background_jobs" => opts.set_max_background_jobs(i32_of(flag, v)?),
        "max_background_flushes" => opts.set_max_background_flushes(i32_of(flag, v)?),
        "max_background_compactions" => opts.set_max_background_compactions(i32_of(flag, v)?),
        "subcompactions" => opts.set_max_subcompactions(
            u32::try_from(u64_of(flag, v)?)
                .map_err(|_| BenchError::new("flag --subcompactions: value out of range"))?,
        ),
        "num_levels" => opts.set_num_levels(i32_of(flag, v)?),
        "compaction_style" => opts.set_compaction_style(match int(flag, v)? {
            0 => DBCompactionStyle::Level,
            1 => DBCompactionStyle::Universal,
            2 => DBCompactionStyle::Fifo,
            other => bail!("flag --compaction_style={other}: expected 0, 1 or 2"),
        }),
        "level0_file_num_compaction_trigger" => opts.set_level_zero_file_num_compaction_trigger(i32_of(flag, v)?),
        "level0_slowdown_writes_trigger" => opts.set_level_zero_slowdown_writes_trigger(i32_of(flag, v)?),
        "level0_stop_writes_trigger" => opts.set_level_zero_stop_writes_trigger(i32_of(flag, v)?),
        "max_bytes_for_level_base" => opts.set_max_bytes_for_level_base(u64_of(flag, v)?),
        "max_bytes_for_level_multiplier" => opts.set_max_bytes_for_level_multiplier(f64_of(flag, v)?),
        "level_compaction_dynamic_level_bytes" => opts.set_level_compaction_dynamic_level_bytes(bool_of(flag, v)?),
        "target_file_size_base" => opts.set_target_file_size_base(u64_of(flag, v)?),
        "target_file_size_multiplier" => opts.set_target_file_size_multiplier(i32_of(flag, v)?),
        "max_compaction_bytes" => opts.set_max_compaction_bytes(u64_of(flag, v)?),
        "soft_pending_compaction_bytes_limit" => {
            opts.set_soft_pending_compaction_bytes_limit(u64_of(flag, v)? as usize)
        }
        "hard_pending_compaction_bytes_limit" => {
            opts.set_hard_pending_compaction_bytes_limit(u64_of(flag, v)? as usize)
        }
        "disable_auto_compactions" => opts.set_disable_auto_compactions(bool_of(flag, v)?),
        "compression_type" => {
            let Value::Str(s) = v else { bail!("flag --compression_type: expected a name") };
            opts.set_compression_type(match s.to_ascii_lowercase().as_str() {
                "none" | "no" => DBCompressionType::None,
                "snappy" => DBCompressionType::Snappy,
                "lz4" => DBCompressionType::Lz4,
                "zstd" => DBCompressionType::Zstd,
                other => bail!("flag --compression_type={other}: the rocksdb peer supports none, snappy, lz4, zstd"),
            })
        }
        "block_size" => table.set_block_size(u64_of(flag, v)? as usize),
        "block_restart_interval" => table.set_block_restart_interval(i32_of(flag, v)?),
        "bloom_bits" => {
            let bits = int(flag, v)?;
            if bits >= 0 {
                table.set_bloom_filter(bits as f64, false);
            }
        }
        // The cache is built from all its flags at once, by `block_cache`.
        "cache_size" | "cache_type" | "cache_numshardbits" => {}
        "checksum_type" => table.set_checksum_type(match int(flag, v)? {
            1 => ChecksumType::CRC32c,
            4 => ChecksumType::XXH3,
            other => bail!("flag --checksum_type={other}: the rocksdb peer supports 1 (CRC32c) and 4 (XXH3)"),
        }),
        "cache_index_and_filter_blocks" => table.set_cache_index_and_filter_blocks(bool_of(flag, v)?),
        "pin_l0_filter_and_index_blocks_in_cache" => {
            table.set_pin_l0_filter_and_index_blocks_in_cache(bool_of(flag, v)?)
        }
        "rate_limiter_bytes_per_sec" => {
            let rate = u64_of(flag, v)?;
            if rate > 0 {
                opts.set_ratelimiter(rate as i64, 100_000, 10);
            }
        }
        "max_total_wal_size" => opts.set_max_total_wal_size(u64_of(flag, v)?),
        "wal_bytes_per_sync" => opts.set_wal_bytes_per_sync(u64_of(flag, v)?),
        "bytes_per_sync" => opts.set_bytes_per_sync(u64_of(flag, v)?),
        "manual_wal_flush" => opts.set_manual_wal_flush(bool_of(flag, v)?),
        "stats_dump_period_sec" => opts.set_stats_dump_period_sec(
            u32::try_from(u64_of(flag, v)?).map_err(|_| BenchError::new("flag --stats_dump_period_sec: too large"))?,
        ),
        "max_manifest_file_size" => opts.set_max_manifest_file_size(u64_of(flag, v)? as usize),
        "paranoid_checks" => opts.set_paranoid_checks(bool_of(flag, v)?),
        "open_files" => opts.set_max_open_files(i32_of(flag, v)?),
        "use_direct_reads" => opts.set_use_direct_reads(bool_of(flag, v)?),
        "use_direct_io_for_flush_and_compaction" => opts.set_use_direct_io_for_flush_and_compaction(bool_of(flag, v)?),
        "mmap_read" => opts.set_allow_mmap_reads(bool_of(flag, v)?),
        "compaction_readahead_size" => opts.set_compaction_readahead_size(u64_of(flag, v)? as usize),
        "advise_random_on_open" => opts.set_advise_random_on_open(bool_of(flag, v)?),
        "enable_pipelined_write" => opts.set_enable_pipelined_write(bool_of(flag, v)?),
        "allow_concurrent_memtable_write" => opts.set_allow_concurrent_memtable_write(bool_of(flag, v)?),
        "optimize_filters_for_hits" => opts.set_optimize_filters_for_hits(bool_of(flag, v)?),
        _ => return Ok(false),
    }
    Ok(true)
}

/// The block cache `--cache_size`, `--cache_type` and `--cache_numshardbits`
/// ask for, as db_bench builds it; `None` when none of them is given, which
/// keeps RocksDB's own default cache. A HyperClockCache is sized for entries
/// of `--block_size`, db_bench's `estimated_entry_charge`.
fn block_cache(flags: &Flags) -> Result<Option<Cache>> {
    if !["cache_size", "cache_type", "cache_numshardbits"].iter().any(|f| flags.is_set(f)) {
        return Ok(None);
    }
    let capacity =
        usize::try_from(flags.u64("cache_size")?).map_err(|_| BenchError::new("flag --cache_size: value too large"))?;
    let bits = i32::try_from(flags.i64("cache_numshardbits"))
        .map_err(|_| BenchError::new("flag --cache_numshardbits: value out of range"))?;
    Ok(Some(match flags.str("cache_type") {
        "lru_cache" => {
            let mut o = LruCacheOptions::default();
            o.set_capacity(capacity);
            o.set_num_shard_bits(bits);
            Cache::new_lru_cache_opts(&o)
        }
        "hyper_clock_cache" | "clock_cache" => {
            if bits != -1 {
                bail!(
                    "flag --cache_numshardbits={bits}: the rocksdb crate cannot set a HyperClockCache's shard \
                     bits; leave it at -1 with --cache_type=hyper_clock_cache"
                );
            }
            let entry_charge = usize::try_from(flags.u64("block_size")?)
                .map_err(|_| BenchError::new("flag --block_size: value too large"))?;
            Cache::new_hyper_clock_cache(capacity, entry_charge.max(1))
        }
        other => bail!("flag --cache_type={other}: the rocksdb peer supports lru_cache and hyper_clock_cache"),
    }))
}

impl RocksDbEngine {
    /// Opens (after destroying, if `fresh`) the database at `path`.
    pub fn open(path: &Path, flags: &Flags, fresh: bool, create: bool) -> Result<RocksDbEngine> {
        if flags.i64("num_column_families") != 1 {
            bail!("flag --num_column_families: the rocksdb peer drives one family (use compare --peer=db_bench)");
        }
        let mut opts = Options::default();
        opts.create_if_missing(create);
        let mut table = BlockBasedOptions::default();
        for name in flags.explicit() {
            let Some(s) = spec(name) else { continue };
            let Support::Engine(_) = s.support else { continue };
            let Some(value) = flags.value(name) else { continue };
            if !apply(&mut opts, &mut table, name, value)? && !flags.is_default(s) {
                bail!("flag --{name} is not supported by the rocksdb peer");
            }
        }
        match block_cache(flags)? {
            Some(_) if flags.u64("cache_size")? == 0 => table.disable_cache(),
            Some(cache) => table.set_block_cache(&cache),
            None => {}
        }
        if !flags.str("json").is_empty() && !flags.bool("statistics") {
            opts.enable_statistics();
        }
        opts.set_block_based_table_factory(&table);
        if fresh && path.exists() {
            DB::destroy(&opts, path).map_err(rocks_error)?;
        }
        let db = DB::open(&opts, path).map_err(rocks_error)?;
        let num_levels = usize::try_from(flags.i64("num_levels")).unwrap_or(7).max(1);
        Ok(RocksDbEngine { db, opts, compaction_enabled: !flags.bool("disable_auto_compactions"), num_levels })
    }

    fn int_property(&self, name: &str) -> u64 {
        self.db.property_int_value(name).ok().flatten().unwrap_or(0)
    }
}

fn write_options(wo: WriteOpts) -> WriteOptions {
    let mut w = WriteOptions::default();
    w.set_sync(wo.sync);
    w.disable_wal(wo.disable_wal);
    w
}

/// A ticker's count from `Options::get_statistics` text (`rocksdb.bytes.written COUNT : 123`).
fn ticker(stats: &str, name: &str) -> u64 {
    stats
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .and_then(|l| l.rsplit(':').next())
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

impl Engine for RocksDbEngine {
    fn name(&self) -> &'static str {
        "rocksdb"
    }

    fn put(&self, key: &[u8], value: &[u8], wo: WriteOpts) -> Result<()> {
        self.db.put_opt(key, value, &write_options(wo)).map_err(rocks_error)
    }

    fn delete(&self, key: &[u8], wo: WriteOpts) -> Result<()> {
        self.db.delete_opt(key, &write_options(wo)).map_err(rocks_error)
    }

    fn write_batch(&self, ops: &[BatchOp<'_>], wo: WriteOpts) -> Result<()> {
        let mut batch = WriteBatch::default();
        for op in ops {
            match op {
                BatchOp::Put(k, v) => batch.put(k, v),
                BatchOp::Delete(k) => batch.delete(k),
            }
        }
        self.db.write_opt(batch, &write_options(wo)).map_err(rocks_error)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.get(key).map_err(rocks_error)
    }

    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        self.db.multi_get(keys.iter()).into_iter().map(|r| r.map_err(rocks_error)).collect()
    }

    fn scan(
        &self,
        start: ScanStart<'_>,
        direction: Direction,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<u64> {
        let mut it = self.db.raw_iterator();
        match (start, direction) {
            (ScanStart::First, _) => it.seek_to_first(),
            (ScanStart::Last, _) => it.seek_to_last(),
            (ScanStart::At(k), Direction::Forward) => it.seek(k),
            (ScanStart::At(k), Direction::Backward) => it.seek_for_prev(k),
        }
        let mut seen = 0;
        while seen < limit && it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else { break };
            seen += 1;
            if !visit(k, v) {
                break;
            }
            match direction {
                Direction::Forward => it.next(),
                Direction::Backward => it.prev(),
            }
        }
        it.status().map_err(rocks_error)?;
        Ok(seen)
    }

    fn flush(&self) -> Result<()> {
        self.db.flush().map_err(rocks_error)
    }

    fn compact_range(&self) -> Result<()> {
        self.db.compact_range(None::<&[u8]>, None::<&[u8]>);
        Ok(())
    }

    fn wait_for_compaction(&self) -> Result<()> {
        loop {
            let busy = [
                "rocksdb.compaction-pending",
                "rocksdb.num-running-compactions",
                "rocksdb.num-running-flushes",
                "rocksdb.mem-table-flush-pending",
            ]
            .iter()
            .any(|p| self.int_property(p) > 0);
            if !busy {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn property(&self, name: &str) -> Option<String> {
        self.db.property_value(name).ok().flatten()
    }

    fn metrics(&self) -> EngineMetrics {
        let stats = self.opts.get_statistics().unwrap_or_default();
        EngineMetrics {
            user_bytes_written: ticker(&stats, "rocksdb.bytes.written"),
            flush_bytes_written: ticker(&stats, "rocksdb.flush.write.bytes"),
            compaction_bytes_written: ticker(&stats, "rocksdb.compact.write.bytes"),
            stall_micros: ticker(&stats, "rocksdb.stall.micros"),
            files_per_level: (0..self.num_levels)
                .map(|l| self.int_property(&format!("rocksdb.num-files-at-level{l}")))
                .collect(),
            pending_compaction_bytes: self.int_property("rocksdb.estimate-pending-compaction-bytes"),
            compaction_enabled: self.compaction_enabled,
            block_cache_hits: ticker(&stats, "rocksdb.block.cache.hit"),
            block_cache_misses: ticker(&stats, "rocksdb.block.cache.miss"),
            wal_bytes: ticker(&stats, "rocksdb.wal.bytes"),
            ..EngineMetrics::default()
        }
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self.db);
        Ok(())
    }
}
