//! RocksDB behind the [`Engine`] trait, through the `rocksdb` crate (0.24),
//! for side-by-side runs with the same flags (`--engine=rocksdb`). Compiled
//! only with the `rocksdb-peer` feature, which builds RocksDB from source.
//!
//! Every engine flag maps to the crate's option setters by db_bench name: a
//! flag given is passed as given, a flag left out takes Ebb's value
//! (`ebb::peer_reference_options`), so both engines run with the same options.
//! A flag the crate cannot express is refused when given a value other than
//! its default; `effective_options` reads back the OPTIONS file RocksDB wrote,
//! so what RocksDB actually has is what `compare` shows.
//! Statistics (needed for the interval series) are enabled with
//! `--statistics` or `--json`.
//!
//! With `--optimistic_transaction_db` or `--transaction_db` the database is
//! opened as the crate's `OptimisticTransactionDB` or `TransactionDB`, as
//! db_bench opens it, and every benchmark runs on it. The optimistic one is
//! a database like `DB` in the crate; the pessimistic one has fewer calls
//! there (no flush, compaction, range deletion, ingestion, checkpoint or
//! `SetOptions`), so those benchmarks are refused on it with the reason.

use std::path::Path;
use std::time::Duration;

use rocksdb::{
    BlockBasedOptions, Cache, ChecksumType, DBAccess, DBCompactionStyle, DBCompressionType,
    DBRawIteratorWithThreadMode, ErrorKind, FifoCompactOptions, LruCacheOptions, MultiThreaded,
    OptimisticTransactionDB, Options, ReadOptions, SliceTransform, TransactionDB, UniversalCompactOptions, WriteBatch,
    WriteBatchWithTransaction, WriteOptions, DB,
};

use super::options_map::{self, engine_flags, given_value};
use super::transaction::{
    kind_from_flags, Transaction, TransactionDb, TransactionDbKind, TransactionError, TransactionOpts,
    TransactionResult,
};
use super::{BatchOp, Direction, Engine, EngineMetrics, ScanStart, WriteOpts};
use crate::bail;
use crate::error::{BenchError, Result};
use crate::flags::{Flags, Value};

fn rocks_error(e: rocksdb::Error) -> BenchError {
    BenchError::new(format!("rocksdb: {e}"))
}

/// The database as it was opened: plain, or as one of the transaction
/// databases.
enum Handle {
    Plain(DB),
    Optimistic(OptimisticTransactionDB),
    /// Multi-threaded: the crate reads a `TransactionDB`'s properties in
    /// that mode only.
    Pessimistic(TransactionDB<MultiThreaded>),
}

/// Runs `$body` with `$db` bound to the database, whichever kind it is: for
/// the calls the crate has, under one name, on all three.
macro_rules! on_any {
    ($handle:expr, $db:ident => $body:expr) => {
        match $handle {
            Handle::Plain($db) => $body,
            Handle::Optimistic($db) => $body,
            Handle::Pessimistic($db) => $body,
        }
    };
}

/// Runs `$body` on a plain or optimistic database (the crate's `DBCommon`),
/// and refuses on a pessimistic one, which has no `$what` in the crate.
macro_rules! on_common {
    ($handle:expr, $what:expr, $db:ident => $body:expr) => {
        match $handle {
            Handle::Plain($db) => $body,
            Handle::Optimistic($db) => $body,
            Handle::Pessimistic(_) => Err(not_in_transaction_db($what)),
        }
    };
}

fn not_in_transaction_db(what: &str) -> BenchError {
    BenchError::new(format!(
        "the rocksdb crate's TransactionDB has no {what} (RocksDB's has, through its base database, which the \
         crate does not reach), so the rocksdb peer cannot do it with --transaction_db"
    ))
}

/// An open RocksDB database.
pub struct RocksDbEngine {
    db: Handle,
    path: std::path::PathBuf,
    opts: Options,
    compaction_enabled: bool,
    num_levels: usize,
    /// Every value given to RocksDB's setters, for the flags its OPTIONS
    /// file does not record (the bloom filter's bits, the cache's kind).
    configured: Vec<(&'static str, Value)>,
    /// `--prefix_same_as_start` and `--total_order_seek`: the read options
    /// of every iterator (db_bench's `read_options_`).
    prefix_same_as_start: bool,
    total_order_seek: bool,
    /// `--num_column_families` above 1: the families after the default one,
    /// by name, as Ebb's engine has them (a key's family is its hash modulo
    /// the count, 0 being the default; scans read the default family only).
    families: Vec<String>,
    /// `--user_timestamp_size=8`: the run's timestamps, and the read
    /// options of a point read at the latest.
    ts: Option<(super::timestamps::Timestamps, ReadOptions)>,
}

/// The bytewise order of keys ending in a u64 timestamp (fixed64
/// little-endian), newer first: RocksDB's `BytewiseComparatorWithU64Ts`
/// given through the `rocksdb` crate's callbacks (its C API has no handle on
/// the built-in one). docs/benchmarks.md measures what the callbacks cost.
fn set_u64ts_comparator(opts: &mut Options) {
    fn split(k: &[u8]) -> (&[u8], u64) {
        let n = k.len().saturating_sub(8);
        let mut t = [0u8; 8];
        t[..k.len() - n].copy_from_slice(&k[n..]);
        (&k[..n], u64::from_le_bytes(t))
    }
    fn ts(t: &[u8]) -> u64 {
        let mut b = [0u8; 8];
        let n = t.len().min(8);
        b[..n].copy_from_slice(&t[..n]);
        u64::from_le_bytes(b)
    }
    opts.set_comparator_with_ts(
        "leveldb.BytewiseComparator.u64ts",
        8,
        Box::new(|a: &[u8], b: &[u8]| {
            let ((ak, at), (bk, bt)) = (split(a), split(b));
            ak.cmp(bk).then(bt.cmp(&at))
        }),
        Box::new(|a: &[u8], b: &[u8]| ts(a).cmp(&ts(b))),
        Box::new(|a: &[u8], a_has_ts: bool, b: &[u8], b_has_ts: bool| {
            let a = if a_has_ts { split(a).0 } else { a };
            let b = if b_has_ts { split(b).0 } else { b };
            a.cmp(b)
        }),
    );
}

fn no_ts_range_deletions() -> BenchError {
    BenchError::new("range deletions with --user_timestamp_size=8 are not supported")
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

/// A compression flag's value (`--compression_type`, `--blob_compression_type`).
fn compression_of(flag: &str, v: &Value) -> Result<DBCompressionType> {
    let Value::Str(s) = v else { bail!("flag --{flag}: expected a name") };
    Ok(match s.to_ascii_lowercase().as_str() {
        "none" | "no" => DBCompressionType::None,
        "snappy" => DBCompressionType::Snappy,
        "lz4" => DBCompressionType::Lz4,
        "zstd" => DBCompressionType::Zstd,
        other => bail!("flag --{flag}={other}: the rocksdb peer supports none, snappy, lz4, zstd"),
    })
}

fn f64_of(flag: &str, v: &Value) -> Result<f64> {
    match v {
        Value::Double(d) => Ok(*d),
        other => bail!("flag --{flag}: expected a number, got {other:?}"),
    }
}

/// What the flags set on RocksDB, gathered before the open.
struct Setup {
    opts: Options,
    table: BlockBasedOptions,
    universal: UniversalCompactOptions,
    fifo: FifoCompactOptions,
    cache_size: usize,
    cache_type: String,
    cache_shard_bits: i32,
    block_size: usize,
    num_levels: usize,
    /// `ttl`, which the crate sets only on an open database.
    ttl: Option<u64>,
}

fn c_int_of(flag: &str, v: &Value) -> Result<i32> {
    // RocksDB's unsigned fields (max_merge_width's UINT_MAX) pass through C's int.
    Ok(u32::try_from(int(flag, v)?).map_err(|_| BenchError::new(format!("flag --{flag}: value out of range")))? as i32)
}

#[allow(deprecated)]
fn apply(setup: &mut Setup, flag: &str, v: &Value) -> Result<bool> {
    let Setup { opts, table, .. } = setup;
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
        "num_levels" => {
            opts.set_num_levels(i32_of(flag, v)?);
            setup.num_levels = usize::try_from(int(flag, v)?).unwrap_or(7).max(1);
        }
        "fifo_compaction_ttl" => setup.ttl = Some(u64_of(flag, v)?),
        "universal_size_ratio" => setup.universal.set_size_ratio(c_int_of(flag, v)?),
        "universal_min_merge_width" => setup.universal.set_min_merge_width(c_int_of(flag, v)?),
        "universal_max_merge_width" => setup.universal.set_max_merge_width(c_int_of(flag, v)?),
        "universal_max_size_amplification_percent" => {
            setup.universal.set_max_size_amplification_percent(c_int_of(flag, v)?)
        }
        "fifo_compaction_max_table_files_size_mb" => {
            setup.fifo.set_max_table_files_size(u64_of(flag, v)?.saturating_mul(1 << 20))
        }
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
        "compression_type" => opts.set_compression_type(compression_of(flag, v)?),
        "block_size" => {
            setup.block_size = u64_of(flag, v)? as usize;
            table.set_block_size(setup.block_size);
        }
        "block_restart_interval" => table.set_block_restart_interval(i32_of(flag, v)?),
        "index_block_restart_interval" => table.set_index_block_restart_interval(i32_of(flag, v)?),
        "whole_key_filtering" => table.set_whole_key_filtering(bool_of(flag, v)?),
        // db_bench's `NewFixedPrefixTransform(prefix_size)`; 0 is none.
        "prefix_size" => {
            let len = u64_of(flag, v)?;
            if len > 0 {
                let len = usize::try_from(len).map_err(|_| BenchError::new("flag --prefix_size: value too large"))?;
                opts.set_prefix_extractor(SliceTransform::create_fixed_prefix(len));
            }
        }
        "memtable_bloom_size_ratio" => opts.set_memtable_prefix_bloom_ratio(f64_of(flag, v)?),
        "bloom_bits" => {
            let bits = int(flag, v)?;
            if bits > 0 {
                table.set_bloom_filter(bits as f64, false);
            }
        }
        // The cache is built from all its flags at once, by `block_cache`.
        "cache_size" => {
            setup.cache_size =
                usize::try_from(u64_of(flag, v)?).map_err(|_| BenchError::new("flag --cache_size: value too large"))?
        }
        "cache_type" => {
            let Value::Str(t) = v else { bail!("flag --cache_type: expected a name") };
            setup.cache_type = t.clone();
        }
        "cache_numshardbits" => setup.cache_shard_bits = i32_of(flag, v)?,
        "checksum_type" => table.set_checksum_type(match int(flag, v)? {
            1 => ChecksumType::CRC32c,
            4 => ChecksumType::XXH3,
            other => bail!("flag --checksum_type={other}: the rocksdb peer supports 1 (CRC32c) and 4 (XXH3)"),
        }),
        "cache_index_and_filter_blocks" => table.set_cache_index_and_filter_blocks(bool_of(flag, v)?),
        "index_type" => table.set_index_type(match int(flag, v)? {
            0 => rocksdb::BlockBasedIndexType::BinarySearch,
            2 => rocksdb::BlockBasedIndexType::TwoLevelIndexSearch,
            other => bail!("flag --index_type={other}: the rocksdb peer supports 0 (binary search) and 2 (two-level)"),
        }),
        "partition_filters" => table.set_partition_filters(bool_of(flag, v)?),
        "metadata_block_size" => table.set_metadata_block_size(
            usize::try_from(u64_of(flag, v)?)
                .map_err(|_| BenchError::new("flag --metadata_block_size: value too large"))?,
        ),
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
        "db_write_buffer_size" => opts.set_db_write_buffer_size(u64_of(flag, v)? as usize),
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
        "enable_blob_files" => opts.set_enable_blob_files(bool_of(flag, v)?),
        "min_blob_size" => opts.set_min_blob_size(u64_of(flag, v)?),
        "blob_file_size" => opts.set_blob_file_size(u64_of(flag, v)?),
        "blob_compression_type" => opts.set_blob_compression_type(compression_of(flag, v)?),
        "enable_blob_garbage_collection" => opts.set_enable_blob_gc(bool_of(flag, v)?),
        "blob_garbage_collection_age_cutoff" => opts.set_blob_gc_age_cutoff(f64_of(flag, v)?),
        "blob_garbage_collection_force_threshold" => opts.set_blob_gc_force_threshold(f64_of(flag, v)?),
        "merge_operator" => {
            let Value::Str(name) = v else { bail!("flag --merge_operator: expected a name") };
            set_merge_operator(opts, super::merge_operator_name(name)?);
        }
        // RocksDB has no background tuner: `off` is what it does, so a run
        // that sets it for both engines runs; another mode it cannot take.
        "background_tuning" => return Ok(matches!(v, Value::Str(s) if s.eq_ignore_ascii_case("off"))),
        _ => return Ok(false),
    }
    Ok(true)
}

/// RocksDB's `UInt64AddOperator::DecodeInteger`: 8 little-endian bytes, or 0
/// for any other size (RocksDB also logs an error to its info log then).
fn decode_u64(v: &[u8]) -> u64 {
    <[u8; 8]>::try_from(v).map_or(0, u64::from_le_bytes)
}

/// Sets the merge operator db_bench's `name` names (`""`: none).
///
/// The `rocksdb` crate cannot reach RocksDB's built-in C++ operators
/// (`MergeOperators::CreateFromStringId`, which db_bench calls): it takes
/// only Rust closures (`set_merge_operator_associative`), and the C API's
/// `rocksdb_options_set_uint64add_merge_operator` is behind its private
/// `ffi`. So these closures re-implement the four with RocksDB's semantics,
/// under RocksDB's class names (which its OPTIONS file then records). Each
/// closure serves as both full merge (`existing` = the value below, if any)
/// and partial merge (`existing` = `None`, operands only); for these
/// operators folding the operands from "no value" gives what RocksDB's
/// pairwise `PartialMerge` gives. Differences in cost: each merge crosses
/// the C API and returns a freshly allocated value, and a uint64add operand
/// of the wrong size is not logged.
fn set_merge_operator(opts: &mut Options, name: &str) {
    match name {
        // UInt64AddOperator (an AssociativeMergeOperator): wrapping sum.
        "uint64add" => opts.set_merge_operator_associative(
            "UInt64AddOperator",
            |_key: &[u8], existing: Option<&[u8]>, operands: &rocksdb::MergeOperands| {
                let sum =
                    operands.iter().fold(existing.map_or(0, decode_u64), |acc, op| acc.wrapping_add(decode_u64(op)));
                Some(sum.to_le_bytes().to_vec())
            },
        ),
        // StringAppendOperator (associative), db_bench's delimiter `,`.
        "stringappend" => opts.set_merge_operator_associative(
            "StringAppendOperator",
            |_key: &[u8], existing: Option<&[u8]>, operands: &rocksdb::MergeOperands| {
                let mut out = existing.map(<[u8]>::to_vec);
                for op in operands {
                    match &mut out {
                        None => out = Some(op.to_vec()),
                        Some(v) => {
                            v.push(b',');
                            v.extend_from_slice(op);
                        }
                    }
                }
                out
            },
        ),
        // MaxOperator: the bytewise largest (Slice::compare) of the value and the operands.
        "max" => opts.set_merge_operator_associative(
            "MaxOperator",
            |_key: &[u8], existing: Option<&[u8]>, operands: &rocksdb::MergeOperands| {
                let max = operands.iter().fold(existing.unwrap_or_default(), |max, op| if max < op { op } else { max });
                Some(max.to_vec())
            },
        ),
        // PutOperator: the newest operand.
        "put" => opts.set_merge_operator_associative(
            "PutOperator",
            |_key: &[u8], _existing: Option<&[u8]>, operands: &rocksdb::MergeOperands| {
                operands.iter().last().map(<[u8]>::to_vec)
            },
        ),
        _ => {}
    }
}

/// The block cache the cache flags ask for, as db_bench builds it. A
/// HyperClockCache is sized for entries of `--block_size`, db_bench's
/// `estimated_entry_charge`.
fn block_cache(setup: &Setup) -> Result<Cache> {
    let (capacity, bits) = (setup.cache_size, setup.cache_shard_bits);
    Ok(match setup.cache_type.as_str() {
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
            Cache::new_hyper_clock_cache(capacity, setup.block_size.max(1))
        }
        other => bail!("flag --cache_type={other}: the rocksdb peer supports lru_cache and hyper_clock_cache"),
    })
}

impl RocksDbEngine {
    /// Opens (after destroying, if `fresh`) the database at `path`.
    pub fn open(path: &Path, flags: &Flags, fresh: bool, create: bool) -> Result<RocksDbEngine> {
        let count = flags.i64("num_column_families");
        if count < 1 {
            bail!("flag --num_column_families={count}: at least 1");
        }
        let count = count as usize;
        if count > 1 && kind_from_flags(flags)?.is_some() {
            bail!(
                "--num_column_families={count} with a transaction database: the transaction benchmarks write the \
                 default family only (--num_column_families=1)"
            );
        }
        let reference = super::ebb::peer_reference_options(flags)?;
        let mut setup = Setup {
            opts: Options::default(),
            table: BlockBasedOptions::default(),
            universal: UniversalCompactOptions::default(),
            fifo: FifoCompactOptions::default(),
            cache_size: 32 << 20,
            cache_type: "lru_cache".into(),
            cache_shard_bits: -1,
            block_size: 4096,
            num_levels: 7,
            ttl: None,
        };
        setup.opts.create_if_missing(create);
        let mut configured = Vec::new();
        for s in engine_flags() {
            let given = given_value(flags, s.name);
            let value = match given {
                Some(v) => v.clone(),
                None => match options_map::ebb_flag_value(s, &reference) {
                    Some(v) => v,
                    None => continue,
                },
            };
            // A flag left out that RocksDB cannot take (Ebb's tuner, say) is
            // Ebb's own feature, not an option the peer lacks.
            if apply(&mut setup, s.name, &value)? {
                configured.push((s.name, value));
            } else if given.is_some() && !flags.is_default(s) {
                bail!("flag --{} is not supported by the rocksdb peer", s.name);
            }
        }
        if !cfg!(target_feature = "sse4.2")
            && configured.iter().any(|(f, v)| *f == "checksum_type" && *v == Value::Int(1))
        {
            eprintln!(
                "ebb-bench: warning: RocksDB was compiled without SSE4.2, so its CRC-32C is software and slow; \
                 build the peer with bench/build_peer.sh"
            );
        }
        let cache = block_cache(&setup)?;
        let Setup { mut opts, mut table, universal, fifo, cache_size, num_levels, ttl, .. } = setup;
        let timestamps = super::timestamps::Timestamps::from_flags(flags)?;
        if timestamps.is_some() {
            set_u64ts_comparator(&mut opts);
        } else if flags.bool("peer_comparator_callbacks") {
            opts.set_comparator("leveldb.BytewiseComparator", Box::new(|a: &[u8], b: &[u8]| a.cmp(b)));
        }
        if cache_size == 0 {
            table.disable_cache();
        } else {
            table.set_block_cache(&cache);
        }
        opts.set_universal_compaction_options(&universal);
        opts.set_fifo_compaction_options(&fifo);
        if !flags.str("json").is_empty() && !flags.bool("statistics") {
            opts.enable_statistics();
        }
        opts.set_block_based_table_factory(&table);
        if fresh && path.exists() {
            DB::destroy(&opts, path).map_err(rocks_error)?;
        }
        // The default family opened by name, so `cf_handle("default")` finds
        // it (the batched MultiGet takes a handle); the same options.
        let default = rocksdb::ColumnFamilyDescriptor::new(rocksdb::DEFAULT_COLUMN_FAMILY_NAME, opts.clone());
        // `--num_column_families`: the others, with the same options, created
        // when missing (as Ebb's engine creates them).
        let families: Vec<String> = (1..count).map(super::ebb::family_name).collect();
        if count > 1 {
            opts.create_missing_column_families(true);
        }
        let all = || {
            std::iter::once(rocksdb::ColumnFamilyDescriptor::new(rocksdb::DEFAULT_COLUMN_FAMILY_NAME, opts.clone()))
                .chain(families.iter().map(|name| rocksdb::ColumnFamilyDescriptor::new(name, opts.clone())))
        };
        let db = match kind_from_flags(flags)? {
            None if flags.bool("readonly") => {
                Handle::Plain(DB::open_cf_descriptors_read_only(&opts, path, all(), false).map_err(rocks_error)?)
            }
            None => Handle::Plain(DB::open_cf_descriptors(&opts, path, all()).map_err(rocks_error)?),
            Some(TransactionDbKind::Optimistic) => Handle::Optimistic(
                OptimisticTransactionDB::open_cf_descriptors(&opts, path, [default]).map_err(rocks_error)?,
            ),
            Some(TransactionDbKind::Pessimistic) => Handle::Pessimistic(
                TransactionDB::open_cf_descriptors(&opts, &transaction_db_options(), path, [default])
                    .map_err(rocks_error)?,
            ),
        };
        // (Read-only, nothing compacts: the ttl does not matter.)
        if let Some(ttl) = ttl.filter(|_| !flags.bool("readonly")) {
            // RocksDB's leveled default is 30 days; Ebb's is none.
            let ttl = ttl.to_string();
            if let Handle::Pessimistic(_) = db {
                // Said once, not at every reopen of a fill.
                static SAID: std::sync::Once = std::sync::Once::new();
                SAID.call_once(|| {
                    eprintln!(
                        "ebb-bench: note: the rocksdb crate's TransactionDB cannot set ttl={ttl} (it has no \
                         SetOptions); RocksDB keeps its own default (30 days under leveled compaction), which \
                         compacts only files older than that"
                    )
                });
            } else {
                on_common!(&db, "SetOptions", db => db.set_options(&[("ttl", &ttl)]).map_err(rocks_error))?;
            }
        }
        Ok(RocksDbEngine {
            db,
            path: path.to_path_buf(),
            opts,
            compaction_enabled: !flags.bool("disable_auto_compactions"),
            num_levels,
            configured,
            prefix_same_as_start: flags.bool("prefix_same_as_start"),
            total_order_seek: flags.bool("total_order_seek"),
            families,
            ts: timestamps.map(|t| {
                let mut ro = ReadOptions::default();
                ro.set_timestamp(t.read().to_le_bytes());
                (t, ro)
            }),
        })
    }

    /// With timestamps: the plain database (the timestamp benchmarks open
    /// no transaction database).
    fn stamped(&self) -> Option<(&super::timestamps::Timestamps, &ReadOptions, &DB)> {
        match (&self.ts, &self.db) {
            (Some((t, ro)), Handle::Plain(db)) => Some((t, ro, db)),
            _ => None,
        }
    }

    /// The plain database and the family `key` lives in, under
    /// `--num_column_families` above 1; `None` for the default family (and
    /// for a transaction database, which has the default family only).
    fn family(&self, key: &[u8]) -> Option<(&DB, &rocksdb::ColumnFamily)> {
        let Handle::Plain(db) = &self.db else { return None };
        if self.families.is_empty() {
            return None;
        }
        let i = (xxhash_rust::xxh3::xxh3_64(key) % (self.families.len() as u64 + 1)) as usize;
        let name = self.families.get(i.checked_sub(1)?)?;
        db.cf_handle(name).map(|cf| (db, cf))
    }

    /// The newest OPTIONS file RocksDB wrote, parsed.
    fn options_file(&self) -> std::collections::BTreeMap<String, String> {
        let newest = std::fs::read_dir(&self.path)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let n: u64 = name.strip_prefix("OPTIONS-")?.parse().ok()?;
                Some((n, e.path()))
            })
            .max();
        newest
            .and_then(|(_, p)| std::fs::read_to_string(p).ok())
            .map(|t| options_map::parse_rocksdb_options(&t))
            .unwrap_or_default()
    }

    fn int_property(&self, name: &str) -> u64 {
        on_any!(&self.db, db => db.property_int_value(name)).ok().flatten().unwrap_or(0)
    }

    /// The plain database and the families after the default one
    /// (`--num_column_families`); none for one family.
    fn other_families(&self) -> Vec<(&DB, &rocksdb::ColumnFamily)> {
        let Handle::Plain(db) = &self.db else { return Vec::new() };
        self.families.iter().filter_map(|name| db.cf_handle(name).map(|cf| (db, cf))).collect()
    }
}

/// The pessimistic database's options: Ebb's defaults
/// (`ebb::TransactionDbOptions`), which are RocksDB's, set explicitly so
/// that both engines lock alike.
fn transaction_db_options() -> rocksdb::TransactionDBOptions {
    let ebb = ebb::TransactionDbOptions::default();
    let mut o = rocksdb::TransactionDBOptions::new();
    o.set_max_num_locks(ebb.max_num_locks);
    o.set_num_stripes(ebb.num_stripes);
    o.set_txn_lock_timeout(ebb.transaction_lock_timeout);
    o.set_default_lock_timeout(ebb.default_lock_timeout);
    o
}

/// A transaction database's write batch (the crate's transactional
/// `WriteBatch`, which has no range deletion).
fn transaction_batch(ops: &[BatchOp<'_>]) -> Result<WriteBatchWithTransaction<true>> {
    let mut batch = WriteBatchWithTransaction::<true>::default();
    for op in ops {
        match op {
            BatchOp::Put(k, v) => batch.put(k, v),
            BatchOp::Delete(k) => batch.delete(k),
            BatchOp::DeleteRange(..) => {
                bail!(
                    "the rocksdb crate's transactional write batch has no range deletion (with a transaction database)"
                )
            }
        }
    }
    Ok(batch)
}

/// Visits up to `limit` entries from where `it` was positioned.
fn drive<D: DBAccess>(
    mut it: DBRawIteratorWithThreadMode<'_, D>,
    start: ScanStart<'_>,
    direction: Direction,
    limit: u64,
    visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
) -> Result<u64> {
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

/// The `rocksdb` crate's level whose number (what it hands to RocksDB's
/// `rocksdb_set_perf_level`) is `level`. The crate names its variants after
/// an older RocksDB, before `kEnableWait` (3) moved the later levels up one:
/// by number, 3 is its `EnableTimeExceptForMutex`, 4
/// `EnableTimeAndCPUTimeExceptForMutex`, 5 `EnableTime` and 6 `OutOfBound`,
/// which RocksDB 10.4 reads as `kEnableWait`, `kEnableTimeExceptForMutex`,
/// `kEnableTimeAndCPUTimeExceptForMutex` and `kEnableTime`.
fn perf_stats_level(level: u32) -> rocksdb::perf::PerfStatsLevel {
    use rocksdb::perf::PerfStatsLevel as L;
    [
        L::Uninitialized,
        L::Disable,
        L::EnableCount,
        L::EnableTimeExceptForMutex,
        L::EnableTimeAndCPUTimeExceptForMutex,
        L::EnableTime,
        L::OutOfBound,
    ]
    .into_iter()
    .find(|l| *l as u32 == level)
    .unwrap_or(L::Disable)
}

impl Engine for RocksDbEngine {
    fn start_perf(&self, level: u32) {
        rocksdb::perf::set_perf_stats(perf_stats_level(level));
        rocksdb::perf::PerfContext::default().reset();
    }

    /// RocksDB's `PerfContext` (the `rocksdb` crate does not expose its
    /// `IOStatsContext`).
    fn end_perf(&self) -> super::PerfReports {
        let report = rocksdb::perf::PerfContext::default().report(true);
        rocksdb::perf::set_perf_stats(rocksdb::perf::PerfStatsLevel::Disable);
        vec![("PERF_CONTEXT", report)]
    }

    fn name(&self) -> &'static str {
        "rocksdb"
    }

    fn put(&self, key: &[u8], value: &[u8], wo: WriteOpts) -> Result<()> {
        if let Some((t, _, db)) = self.stamped() {
            return db.put_with_ts_opt(key, t.write().to_le_bytes(), value, &write_options(wo)).map_err(rocks_error);
        }
        if let Some((db, cf)) = self.family(key) {
            return db.put_cf_opt(cf, key, value, &write_options(wo)).map_err(rocks_error);
        }
        on_any!(&self.db, db => db.put_opt(key, value, &write_options(wo))).map_err(rocks_error)
    }

    fn delete(&self, key: &[u8], wo: WriteOpts) -> Result<()> {
        if let Some((t, _, db)) = self.stamped() {
            return db.delete_with_ts_opt(key, t.write().to_le_bytes(), &write_options(wo)).map_err(rocks_error);
        }
        if let Some((db, cf)) = self.family(key) {
            return db.delete_cf_opt(cf, key, &write_options(wo)).map_err(rocks_error);
        }
        on_any!(&self.db, db => db.delete_opt(key, &write_options(wo))).map_err(rocks_error)
    }

    fn merge(&self, key: &[u8], value: &[u8], wo: WriteOpts) -> Result<()> {
        if self.ts.is_some() {
            return Err(BenchError::new("the rocksdb crate has no merge with a timestamp (--user_timestamp_size=8)"));
        }
        if let Some((db, cf)) = self.family(key) {
            return db.merge_cf_opt(cf, key, value, &write_options(wo)).map_err(rocks_error);
        }
        on_any!(&self.db, db => db.merge_opt(key, value, &write_options(wo))).map_err(rocks_error)
    }

    /// In the family of `begin`, as a batch's range deletion goes.
    fn delete_range(&self, begin: &[u8], end: &[u8], wo: WriteOpts) -> Result<()> {
        if self.ts.is_some() {
            return Err(no_ts_range_deletions());
        }
        if let Some((db, cf)) = self.family(begin) {
            return db.delete_range_cf_opt(cf, begin, end, &write_options(wo)).map_err(rocks_error);
        }
        on_common!(&self.db, "DeleteRange", db => {
            let cf = db
                .cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
                .ok_or_else(|| BenchError::new("rocksdb: no default column family"))?;
            db.delete_range_cf_opt(cf, begin, end, &write_options(wo)).map_err(rocks_error)
        })
    }

    fn write_batch(&self, ops: &[BatchOp<'_>], wo: WriteOpts) -> Result<()> {
        let wo = write_options(wo);
        if let Some((t, _, db)) = self.stamped() {
            let cf = db
                .cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
                .ok_or_else(|| BenchError::new("rocksdb: no default column family"))?;
            let mut batch = WriteBatch::default();
            for op in ops {
                match op {
                    BatchOp::Put(k, v) => batch.put_cf_with_ts(cf, k, t.write().to_le_bytes(), v),
                    BatchOp::Delete(k) => batch.delete_cf_with_ts(cf, k, t.write().to_le_bytes()),
                    BatchOp::DeleteRange(..) => return Err(no_ts_range_deletions()),
                }
            }
            return db.write_opt(batch, &wo).map_err(rocks_error);
        }
        match &self.db {
            Handle::Plain(db) => {
                let mut batch = WriteBatch::default();
                for op in ops {
                    match (op, self.family(op.key())) {
                        (BatchOp::Put(k, v), None) => batch.put(k, v),
                        (BatchOp::Put(k, v), Some((_, cf))) => batch.put_cf(cf, k, v),
                        (BatchOp::Delete(k), None) => batch.delete(k),
                        (BatchOp::Delete(k), Some((_, cf))) => batch.delete_cf(cf, k),
                        (BatchOp::DeleteRange(b, e), None) => batch.delete_range(b, e),
                        (BatchOp::DeleteRange(b, e), Some((_, cf))) => batch.delete_range_cf(cf, b, e),
                    }
                }
                db.write_opt(batch, &wo)
            }
            Handle::Optimistic(db) => db.write_opt(transaction_batch(ops)?, &wo),
            Handle::Pessimistic(db) => db.write_opt(transaction_batch(ops)?, &wo),
        }
        .map_err(rocks_error)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some((_, ro, db)) = self.stamped() {
            return db.get_opt(key, ro).map_err(rocks_error);
        }
        if let Some((db, cf)) = self.family(key) {
            return db.get_cf(cf, key).map_err(rocks_error);
        }
        on_any!(&self.db, db => db.get(key)).map_err(rocks_error)
    }

    fn get_len(&self, key: &[u8]) -> Result<Option<usize>> {
        if let Some((_, ro, db)) = self.stamped() {
            return db.get_pinned_opt(key, ro).map(|v| v.map(|v| v.len())).map_err(rocks_error);
        }
        if let Some((db, cf)) = self.family(key) {
            return db.get_pinned_cf(cf, key).map(|v| v.map(|v| v.len())).map_err(rocks_error);
        }
        on_any!(&self.db, db => db.get_pinned(key).map(|v| v.map(|v| v.len()))).map_err(rocks_error)
    }

    fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        if !self.families.is_empty() {
            // Each key in its family, as Ebb's engine reads them.
            return keys.iter().map(|k| self.get(k)).collect();
        }
        if let Some((_, ro, db)) = self.stamped() {
            let cf = db
                .cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
                .ok_or_else(|| BenchError::new("rocksdb: no default column family"))?;
            return db
                .batched_multi_get_cf_opt(cf, keys.iter(), false, ro)
                .into_iter()
                .map(|r| r.map(|v| v.map(|v| v.to_vec())).map_err(rocks_error))
                .collect();
        }
        if let Handle::Pessimistic(db) = &self.db {
            // The crate's TransactionDB has only the vector API.
            return db.multi_get(keys.iter()).into_iter().map(|r| r.map_err(rocks_error)).collect();
        }
        // The batched MultiGet (what db_bench's multireadrandom calls), not
        // the vector API.
        on_common!(&self.db, "MultiGet", db => {
            let cf = db
                .cf_handle(rocksdb::DEFAULT_COLUMN_FAMILY_NAME)
                .ok_or_else(|| BenchError::new("rocksdb: no default column family"))?;
            db.batched_multi_get_cf(cf, keys.iter(), false)
                .into_iter()
                .map(|r| r.map(|v| v.map(|v| v.to_vec())).map_err(rocks_error))
                .collect()
        })
    }

    fn scan(
        &self,
        start: ScanStart<'_>,
        direction: Direction,
        limit: u64,
        visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<u64> {
        let mut ro = ReadOptions::default();
        ro.set_prefix_same_as_start(self.prefix_same_as_start);
        ro.set_total_order_seek(self.total_order_seek);
        if let Some((t, _)) = &self.ts {
            ro.set_timestamp(t.read().to_le_bytes());
        }
        on_any!(&self.db, db => drive(db.raw_iterator_opt(ro), start, direction, limit, visit))
    }

    /// Every family's memtables, as Ebb's engine flushes.
    fn flush(&self) -> Result<()> {
        on_common!(&self.db, "Flush", db => db.flush().map_err(rocks_error))?;
        for (db, cf) in self.other_families() {
            db.flush_cf(cf).map_err(rocks_error)?;
        }
        Ok(())
    }

    /// Every family, as Ebb's engine compacts.
    fn compact_range(&self) -> Result<()> {
        on_common!(&self.db, "CompactRange", db => {
            db.compact_range(None::<&[u8]>, None::<&[u8]>);
            Ok(())
        })?;
        for (db, cf) in self.other_families() {
            db.compact_range_cf(cf, None::<&[u8]>, None::<&[u8]>);
        }
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
            // The pending figures are each family's own.
            let others_busy = self.other_families().into_iter().any(|(db, cf)| {
                ["rocksdb.compaction-pending", "rocksdb.mem-table-flush-pending"]
                    .iter()
                    .any(|p| db.property_int_value_cf(cf, *p).ok().flatten().unwrap_or(0) > 0)
            });
            if !busy && !others_busy {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn property(&self, name: &str) -> Option<String> {
        on_any!(&self.db, db => db.property_value(name)).ok().flatten()
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

    fn effective_options(&self) -> Vec<(&'static str, Value)> {
        let file = self.options_file();
        engine_flags()
            .filter_map(|s| {
                let value = match s.name {
                    // Not in the OPTIONS file; RocksDB reports the capacity.
                    "cache_size" => Value::Int(self.int_property("rocksdb.block-cache-capacity") as i64),
                    _ => match options_map::rocksdb_flag_value(s, &file) {
                        Some(v) => v,
                        // The file does not say (RocksDB 10 writes the filter as
                        // `bloomfilter`, without its bits): what was set.
                        None => self.configured.iter().find(|(f, _)| *f == s.name)?.1.clone(),
                    },
                };
                Some((s.name, value))
            })
            .collect()
    }

    fn write_sst(&self, path: &Path, entries: &mut dyn Iterator<Item = (Vec<u8>, Vec<u8>)>) -> Result<()> {
        let mut w = rocksdb::SstFileWriter::create(&self.opts);
        w.open(path).map_err(rocks_error)?;
        for (k, v) in entries {
            w.put(&k, &v).map_err(rocks_error)?;
        }
        w.finish().map_err(rocks_error)
    }

    fn ingest(&self, paths: &[std::path::PathBuf]) -> Result<()> {
        let mut opts = rocksdb::IngestExternalFileOptions::default();
        opts.set_move_files(true);
        on_common!(&self.db, "IngestExternalFile", db => {
            db.ingest_external_file_opts(&opts, paths.to_vec()).map_err(rocks_error)
        })
    }

    fn checkpoint(&self, dir: &Path) -> Result<()> {
        on_common!(&self.db, "Checkpoint", db => {
            let c = rocksdb::checkpoint::Checkpoint::new(db).map_err(rocks_error)?;
            c.create_checkpoint(dir).map_err(rocks_error)
        })
    }

    fn transactions(&self) -> Option<&dyn TransactionDb> {
        match &self.db {
            Handle::Plain(_) => None,
            Handle::Optimistic(db) => Some(db),
            Handle::Pessimistic(db) => Some(db),
        }
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self.db);
        Ok(())
    }
}

impl TransactionDb for OptimisticTransactionDB {
    fn kind(&self) -> TransactionDbKind {
        TransactionDbKind::Optimistic
    }

    fn begin(&self, wo: WriteOpts, o: &TransactionOpts) -> Box<dyn Transaction + '_> {
        let mut options = rocksdb::OptimisticTransactionOptions::new();
        options.set_snapshot(o.set_snapshot);
        Box::new(RocksTransaction { txn: self.transaction_opt(&write_options(wo), &options), snapshot: o.set_snapshot })
    }
}

impl TransactionDb for TransactionDB<MultiThreaded> {
    fn kind(&self) -> TransactionDbKind {
        TransactionDbKind::Pessimistic
    }

    fn begin(&self, wo: WriteOpts, o: &TransactionOpts) -> Box<dyn Transaction + '_> {
        let mut options = rocksdb::TransactionOptions::new();
        options.set_snapshot(o.set_snapshot);
        options.set_lock_timeout(o.lock_timeout_ms);
        options.set_deadlock_detect(o.deadlock_detect);
        Box::new(RocksTransaction { txn: self.transaction_opt(&write_options(wo), &options), snapshot: o.set_snapshot })
    }
}

/// The outcome a transaction benchmark counts, from RocksDB's status text
/// (a deadlock is `Busy` with subcode `kDeadlock`: "Resource busy: Deadlock").
fn transaction_error(e: rocksdb::Error) -> TransactionError {
    match e.kind() {
        ErrorKind::Busy if e.as_ref().contains("Deadlock") => TransactionError::Deadlock,
        ErrorKind::Busy => TransactionError::Busy,
        ErrorKind::TimedOut => TransactionError::TimedOut,
        ErrorKind::TryAgain => TransactionError::TryAgain,
        ErrorKind::Expired => TransactionError::Expired,
        _ => TransactionError::Other(rocks_error(e)),
    }
}

/// One of the crate's transactions (of either database) behind the
/// [`Transaction`] trait.
struct RocksTransaction<'db, D> {
    txn: rocksdb::Transaction<'db, D>,
    /// Began with a snapshot, which its reads then read at.
    snapshot: bool,
}

impl<D> RocksTransaction<'_, D> {
    /// Reads `key` at the transaction's snapshot, if it has one.
    fn read(&self, key: &[u8], for_update: bool) -> TransactionResult<Option<Vec<u8>>> {
        let snapshot = self.snapshot.then(|| self.txn.snapshot());
        let mut ro = ReadOptions::default();
        if let Some(s) = &snapshot {
            ro.set_snapshot(s);
        }
        let value = if for_update { self.txn.get_for_update_opt(key, true, &ro) } else { self.txn.get_opt(key, &ro) };
        value.map_err(transaction_error)
    }
}

impl<D> Transaction for RocksTransaction<'_, D> {
    fn set_name(&mut self, name: &[u8]) -> TransactionResult<()> {
        self.txn.set_name(name).map_err(transaction_error)
    }

    fn get(&mut self, key: &[u8]) -> TransactionResult<Option<Vec<u8>>> {
        self.read(key, false)
    }

    fn get_for_update(&mut self, key: &[u8]) -> TransactionResult<Option<Vec<u8>>> {
        self.read(key, true)
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> TransactionResult<()> {
        self.txn.put(key, value).map_err(transaction_error)
    }

    fn delete(&mut self, key: &[u8]) -> TransactionResult<()> {
        self.txn.delete(key).map_err(transaction_error)
    }

    fn prepare(&mut self) -> TransactionResult<()> {
        self.txn.prepare().map_err(transaction_error)
    }

    fn commit(self: Box<Self>) -> TransactionResult<()> {
        self.txn.commit().map_err(transaction_error)
    }

    fn rollback(self: Box<Self>) -> TransactionResult<()> {
        self.txn.rollback().map_err(transaction_error)
    }
}
