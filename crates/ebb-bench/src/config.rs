//! The client's settings, read once from the flags and checked together, so
//! that a bad combination fails before any database is touched.

use std::path::PathBuf;

use crate::bail;
use crate::engine::transaction::{kind_from_flags, TransactionDbKind};
use crate::error::Result;
use crate::flags::{table, Flags};
use crate::keys::KeyFormat;
use crate::shape::{parse_seconds_list, Base, Schedule, Sine, TimeBursts, Trace};
use crate::workload::{MixSpec, MIX_FLAGS};

/// Which engine to drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    /// Ebb.
    Ebb,
    /// RocksDB through the `rocksdb` crate.
    RocksDb,
}

impl EngineKind {
    /// The engine's name, as `--engine` spells it.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Ebb => "ebb",
            EngineKind::RocksDb => "rocksdb",
        }
    }
}

/// mixgraph's parameters (db_bench names).
#[derive(Debug, Clone, PartialEq)]
#[allow(missing_docs)]
pub struct MixGraphParams {
    pub get_ratio: f64,
    pub put_ratio: f64,
    pub seek_ratio: f64,
    pub max_scan_len: i64,
    pub max_value_size: i64,
    pub keyrange_dist: [f64; 4],
    pub keyrange_num: i64,
    pub key_dist_a: f64,
    pub key_dist_b: f64,
    pub value_theta: f64,
    pub value_k: f64,
    pub value_sigma: f64,
    pub iter_theta: f64,
    pub iter_k: f64,
    pub iter_sigma: f64,
}

/// Everything the runner needs, typed and validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// Benchmarks in order.
    pub benchmarks: Vec<String>,
    /// The engine.
    pub engine: EngineKind,
    /// `--db`, if given.
    pub db: Option<PathBuf>,
    /// `--use_existing_db`.
    pub use_existing_db: bool,
    /// `--num`.
    pub num: u64,
    /// `--reads` (None = num).
    pub reads: Option<u64>,
    /// `--writes` (None = num).
    pub writes: Option<u64>,
    /// `--deletes` (None = num).
    pub deletes: Option<u64>,
    /// `--duration` in seconds (None = use counts).
    pub duration: Option<f64>,
    /// `--threads`.
    pub threads: usize,
    /// `--seed` (0 = from the clock; resolved by the runner).
    pub seed: u64,
    /// `--key_size`.
    pub key_size: usize,
    /// `--prefix_size` (0 = none): the engine's fixed prefix extractor, and
    /// with `--keys_per_prefix` the prefix the keys start with.
    pub prefix_size: usize,
    /// `--keys_per_prefix` (0 = none).
    pub keys_per_prefix: u64,
    /// The keys of `[0, num)`: `--key_size` bytes, with db_bench's prefixes
    /// when `--prefix_size` and `--keys_per_prefix` are both positive.
    pub keys: KeyFormat,
    /// `--prefix_same_as_start`: iterators stop at the end of the seek
    /// key's prefix (checked against the engine's extractor by the runner).
    pub prefix_same_as_start: bool,
    /// `--total_order_seek`: iterators ignore the prefix extractor.
    pub total_order_seek: bool,
    /// `--value_size`.
    pub value_size: usize,
    /// `--batch_size`.
    pub batch_size: usize,
    /// `--compression_ratio`.
    pub compression_ratio: f64,
    /// `--sync`.
    pub sync: bool,
    /// `--disable_wal`.
    pub disable_wal: bool,
    /// `--seek_nexts`.
    pub seek_nexts: usize,
    /// `--reverse_iterator`.
    pub reverse_iterator: bool,
    /// `--readwritepercent`.
    pub readwritepercent: u32,
    /// `--merge_keys`, resolved: the keys mergerandom and
    /// readrandommergerandom draw from (db_bench `merge_keys_`).
    pub merge_keys: u64,
    /// `--bulkload_file_keys`: keys per SST file of `bulkload`.
    pub bulkload_file_keys: u64,
    /// `--mergereadpercent`: the percentage of readrandommergerandom's
    /// operations that merge.
    pub mergereadpercent: u32,
    /// The range deletions the write benchmarks mix in
    /// (`--writes_per_range_tombstone` and its companions).
    pub range_tombstones: RangeTombstones,
    /// `--histogram`.
    pub histogram: bool,
    /// `--perf_level`: RocksDB's `PerfLevel` number for the benchmark
    /// threads (1 = off).
    pub perf_level: u32,
    /// `--report_open_timing`.
    pub report_open_timing: bool,
    /// `--report_memory`.
    pub report_memory: bool,
    /// `--statistics`: print the engine's statistics after the last
    /// benchmark, as db_bench does (`STATISTICS:`).
    pub statistics: bool,
    /// `--stats_interval_seconds` (0 = off).
    pub stats_interval_secs: u64,
    /// `--stats_per_interval`.
    pub stats_per_interval: bool,
    /// `--report_interval_seconds` (0 = off).
    pub report_interval_secs: u64,
    /// `--report_file`.
    pub report_file: PathBuf,
    /// `--json`.
    pub json: Option<PathBuf>,
    /// `--progress`.
    pub progress: bool,
    /// `--summary`.
    pub summary: bool,
    /// The write cap over time.
    pub write_schedule: Schedule,
    /// Bursts in count: (`--burst_writes`, idle seconds).
    pub count_bursts: Option<CountBurstSpec>,
    /// `--benchmark_read_rate_limit` in ops/s.
    pub read_rate_limit: Option<f64>,
    /// `--readers`: point-read threads beside each benchmark of
    /// [`BENCHMARKS_WITH_READERS`] (0 = none).
    pub readers: usize,
    /// The custom mix (when `mix` is among the benchmarks).
    pub mix: Option<MixSpec>,
    /// mixgraph's parameters.
    pub mixgraph: MixGraphParams,
    /// `--block_size` (checksum benchmarks).
    pub block_size: usize,
    /// The transaction database and the transaction benchmarks' settings.
    pub transactions: Transactions,
}

/// `--transaction_db` / `--optimistic_transaction_db` and the flags of
/// randomtransaction and transfertransaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transactions {
    /// The transaction database the engine is opened as; `None` for a plain one.
    pub db: Option<TransactionDbKind>,
    /// `--transaction_sets`: randomtransaction's sets of keys (1 to 9999).
    pub sets: u16,
    /// `--transaction_set_snapshot`.
    pub set_snapshot: bool,
    /// `--transaction_sleep`: microseconds (exclusive bound) to sleep
    /// between a read and its write; 0 = none.
    pub sleep_micros: u64,
    /// `--transaction_lock_timeout` in milliseconds.
    pub lock_timeout_ms: i64,
    /// `--transaction_deadlock_detect`.
    pub deadlock_detect: bool,
    /// `--transfer_accounts`.
    pub transfer_accounts: u64,
}

impl Transactions {
    fn from_flags(flags: &Flags, benchmarks: &[String]) -> Result<Transactions> {
        let db = kind_from_flags(flags)?;
        let sets = flags.u64("transaction_sets")?;
        if !(1..=9999).contains(&sets) {
            bail!(
                "flag --transaction_sets must be between 1 and 9999 (db_bench's keys have 4 digits of set), got {sets}"
            );
        }
        let sleep = flags.i64("transaction_sleep");
        if sleep < 0 {
            bail!("flag --transaction_sleep must not be negative, got {sleep}");
        }
        let accounts = flags.i64("transfer_accounts");
        if accounts < 2 {
            bail!("flag --transfer_accounts must be at least 2 (a transfer moves money between two accounts), got {accounts}");
        }
        let has = |name: &str| benchmarks.iter().any(|b| b == name);
        if has("transfertransaction") && db.is_none() {
            bail!(
                "benchmark transfertransaction runs transactions: give --transaction_db (pessimistic) or \
                 --optimistic_transaction_db"
            );
        }
        if has("randomtransaction") && db == Some(TransactionDbKind::Pessimistic) && flags.bool("disable_wal") {
            bail!(
                "benchmark randomtransaction prepares most of its pessimistic transactions (two-phase commit, as \
                 db_bench does), and a prepare writes the WAL: leave out --disable_wal"
            );
        }
        if has("randomtransaction") && db.is_some() && flags.bool("prefix_same_as_start") {
            bail!(
                "benchmark randomtransaction checks its sets by scanning each set's keys, which \
                 --prefix_same_as_start would cut at the prefix extractor's prefix: leave it out"
            );
        }
        Ok(Transactions {
            db,
            sets: sets as u16,
            set_snapshot: flags.bool("transaction_set_snapshot"),
            sleep_micros: sleep as u64,
            lock_timeout_ms: i64::try_from(flags.u64("transaction_lock_timeout")?).unwrap_or(i64::MAX),
            deadlock_detect: flags.bool("transaction_deadlock_detect"),
            transfer_accounts: accounts as u64,
        })
    }
}

/// db_bench's range deletions inside the write benchmarks (`DoWrite`, and
/// readwhilewriting's writer, `BGWriter`): after a thread's `n`-th write,
/// where [`RangeTombstones::due`] says so, one `DeleteRange` of `width`
/// keys (or, with `expand`, `width` point deletes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RangeTombstones {
    /// `--writes_before_delete_range`: writes before the count starts.
    pub writes_before: u64,
    /// `--writes_per_range_tombstone`: writes between two range deletions (0 = none).
    pub every: u64,
    /// `--range_tombstone_width`: key numbers `[begin, begin + width)`.
    pub width: u64,
    /// `--max_num_range_tombstones`: range deletions per thread at most; 0
    /// means none, as in db_bench (where the cap also widens the keys of
    /// `DoWrite`'s key generator to `[0, num + max)`).
    pub max: u64,
    /// `--expand_range_tombstones`: `width` point deletes instead.
    pub expand: bool,
}

/// The benchmarks whose threads mix range deletions into their writes, as
/// db_bench's `DoWrite` and `BGWriter` do.
pub const BENCHMARKS_WITH_RANGE_TOMBSTONES: &[&str] =
    &["fillseq", "fillrandom", "filluniquerandom", "fillsync", "fill100K", "overwrite", "readwhilewriting"];

impl RangeTombstones {
    /// db_bench's test after a thread's `written`-th write (`num_written`):
    /// past `writes_before`, every `every` writes, while the range
    /// deletions so far number at most `max`.
    pub fn due(&self, written: u64) -> bool {
        self.every > 0
            && written > self.writes_before
            && (written - self.writes_before) / self.every <= self.max
            && (written - self.writes_before).is_multiple_of(self.every)
    }

    /// True when some write can be followed by a range deletion.
    pub fn enabled(&self) -> bool {
        self.every > 0 && self.max > 0
    }

    fn from_flags(flags: &Flags, benchmarks: &[String], num: u64, keys: KeyFormat) -> Result<RangeTombstones> {
        let non_negative = |name: &str| -> Result<u64> {
            let v = flags.i64(name);
            if v < 0 {
                bail!("flag --{name} must not be negative, got {v}");
            }
            Ok(v as u64)
        };
        let rt = RangeTombstones {
            writes_before: non_negative("writes_before_delete_range")?,
            every: non_negative("writes_per_range_tombstone")?,
            width: non_negative("range_tombstone_width")?,
            max: non_negative("max_num_range_tombstones")?,
            expand: flags.bool("expand_range_tombstones"),
        };
        if rt.every > 0 && !benchmarks.iter().any(|b| BENCHMARKS_WITH_RANGE_TOMBSTONES.contains(&b.as_str())) {
            bail!(
                "--writes_per_range_tombstone={} adds range deletions to the writes of {}, and \
                 --benchmarks={} has none of them",
                rt.every,
                BENCHMARKS_WITH_RANGE_TOMBSTONES.join(", "),
                benchmarks.join(","),
            );
        }
        if rt.max > 0 {
            // The largest key number named: the end of a range that begins at
            // the last number of the key generator, [0, num + max).
            let width = if rt.every > 0 { rt.width } else { 0 };
            let last_end = u128::from(num) + u128::from(rt.max) + u128::from(width);
            let numbers = 1u128 << (8 * keys.number_width());
            if last_end > numbers {
                let key_size = keys.key_size();
                let prefix = match keys.prefix_count() {
                    Some(_) => format!(" after their --prefix_size={} bytes of prefix", flags.i64("prefix_size")),
                    None => String::new(),
                };
                bail!(
                    "--num={num}, --max_num_range_tombstones={} and --range_tombstone_width={width} name key \
                     numbers up to {} (db_bench's fills draw from [0, num + max), and a range deletion \
                     reaches width past its begin), past the {numbers} that keys of --key_size={key_size} \
                     hold{prefix}",
                    rt.max,
                    last_end - 1,
                );
            }
        }
        if rt.enabled() && !rt.expand && rt.width > 0 && keys.prefix_count().is_some() {
            bail!(
                "--writes_per_range_tombstone deletes the key numbers [begin, begin + width) as one range from \
                 the key of begin to the key of begin + width, and with --keys_per_prefix the keys sort by their \
                 prefix (the number modulo num / keys_per_prefix) first: that range is other keys, and often \
                 ends before it begins, which both engines refuse; give --expand_range_tombstones=true (point \
                 deletes of those numbers) or leave out --keys_per_prefix"
            );
        }
        Ok(rt)
    }

    /// The keys a write benchmark's key generator draws from: db_bench's
    /// `num + max_num_range_tombstones` (each range deletion takes its begin
    /// from the same generator).
    pub fn key_space(&self, num: u64) -> u64 {
        num + self.max
    }
}

/// The benchmarks `--readers` runs its threads beside: those whose own threads
/// write, where reads during the writes are worth measuring. Not
/// readwhilewriting: its readers are its own `--threads`, and it already
/// reports them.
pub const BENCHMARKS_WITH_READERS: &[&str] = &[
    "fillseq",
    "fillrandom",
    "filluniquerandom",
    "fillsync",
    "fill100K",
    "overwrite",
    "deleteseq",
    "deleterandom",
    "readrandomwriterandom",
    "updaterandom",
    "mergerandom",
    "readrandommergerandom",
    "mixgraph",
    "mix",
];

fn count(flags: &Flags, name: &str) -> Option<u64> {
    u64::try_from(flags.i64(name)).ok()
}

fn positive(flags: &Flags, name: &str) -> Result<u64> {
    let v = flags.i64(name);
    if v < 1 {
        bail!("flag --{name} must be at least 1, got {v}");
    }
    Ok(v as u64)
}

/// `--perf_level`, one of RocksDB's `PerfLevel` numbers (0 and 1 are off).
fn perf_level(flags: &Flags) -> Result<u32> {
    let v = flags.i64("perf_level");
    if !(0..=6).contains(&v) {
        bail!("flag --perf_level must be a RocksDB PerfLevel from 0 to 6 (1 = off, 2 = counts, 6 = times), got {v}");
    }
    Ok(v as u32)
}

impl Config {
    /// Reads and checks the flags.
    pub fn from_flags(flags: &Flags) -> Result<Config> {
        let benchmarks: Vec<String> =
            flags.str("benchmarks").split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect();
        for b in &benchmarks {
            if !table::BENCHMARKS.iter().any(|(name, _)| name == b) {
                match crate::flags::nearest(b, table::BENCHMARKS.iter().map(|(name, _)| *name)) {
                    Some(near) => bail!("unknown benchmark {b:?} in --benchmarks (did you mean {near:?}?)"),
                    None => bail!("unknown benchmark {b:?} in --benchmarks (see --help for the list)"),
                }
            }
        }
        let engine = match flags.str("engine") {
            "ebb" => EngineKind::Ebb,
            "rocksdb" => EngineKind::RocksDb,
            other => bail!("flag --engine: unknown engine {other:?} (expected ebb or rocksdb)"),
        };
        if engine == EngineKind::RocksDb {
            if let Some(f) = ["options_preset", "options_file"].into_iter().find(|f| !flags.str(f).is_empty()) {
                bail!("flag --{f} applies to the ebb engine only (it reads Ebb's presets and OPTIONS format)");
            }
            if flags.u64("manifest_sync_delay_ms")? > 0 {
                bail!("flag --manifest_sync_delay_ms applies to the ebb engine only (it wraps Ebb's filesystem)");
            }
        }
        let db = Some(flags.str("db")).filter(|s| !s.is_empty()).map(PathBuf::from);
        let duration = match flags.i64("duration") {
            d if d < 0 => bail!("flag --duration must not be negative, got {d}"),
            0 => None,
            d => Some(d as f64),
        };
        let compression_ratio = flags.f64("compression_ratio");
        if !(0.0..=1.0).contains(&compression_ratio) {
            bail!("flag --compression_ratio must be between 0 and 1, got {compression_ratio}");
        }
        let readwritepercent = flags.i64("readwritepercent");
        if !(0..=100).contains(&readwritepercent) {
            bail!("flag --readwritepercent must be between 0 and 100, got {readwritepercent}");
        }
        let mergereadpercent = flags.i64("mergereadpercent");
        if !(0..=100).contains(&mergereadpercent) {
            bail!("flag --mergereadpercent must be between 0 and 100, got {mergereadpercent}");
        }
        let num = positive(flags, "num")?;
        let merge_keys = match flags.i64("merge_keys") {
            k if k < 0 => num,
            0 => bail!("flag --merge_keys must be at least 1 (or negative for --num)"),
            k => k as u64,
        };
        let bulkload_file_keys = positive(flags, "bulkload_file_keys")?;
        let key_size = positive(flags, "key_size")? as usize;
        if key_size > ebb::MAX_KEY_SIZE {
            bail!("flag --key_size must be at most {}", ebb::MAX_KEY_SIZE);
        }
        let (prefix_size, keys_per_prefix) = prefixes(flags, &benchmarks, num, merge_keys, key_size)?;
        let keys = KeyFormat::with_prefixes(key_size, prefix_size, keys_per_prefix, num);
        let range_tombstones = RangeTombstones::from_flags(flags, &benchmarks, num, keys)?;
        let value_size = flags.u64("value_size")? as usize;
        if value_size > ebb::MAX_VALUE_SIZE {
            bail!("flag --value_size must be at most {}", ebb::MAX_VALUE_SIZE);
        }
        let (write_schedule, count_bursts) = write_shape(flags)?;
        let read_rate_limit = Some(flags.u64("benchmark_read_rate_limit")? as f64).filter(|r| *r > 0.0);
        let readers = readers(flags, &benchmarks)?;
        let mix = if benchmarks.iter().any(|b| b == "mix") {
            Some(MixSpec::from_flags(flags)?)
        } else {
            if let Some(f) = MIX_FLAGS.iter().chain(["workload_file"].iter()).find(|f| flags.is_set(f)) {
                bail!("flag --{f} only affects the `mix` benchmark, which is not in --benchmarks");
            }
            None
        };
        let json = Some(flags.str("json")).filter(|s| !s.is_empty()).map(PathBuf::from);
        let transactions = Transactions::from_flags(flags, &benchmarks)?;
        Ok(Config {
            benchmarks,
            engine,
            db,
            use_existing_db: flags.bool("use_existing_db"),
            num,
            reads: count(flags, "reads"),
            writes: count(flags, "writes"),
            deletes: count(flags, "deletes"),
            duration,
            threads: positive(flags, "threads")? as usize,
            seed: flags.u64("seed")?,
            key_size,
            prefix_size,
            keys_per_prefix,
            keys,
            prefix_same_as_start: flags.bool("prefix_same_as_start"),
            total_order_seek: flags.bool("total_order_seek"),
            value_size,
            batch_size: positive(flags, "batch_size")? as usize,
            compression_ratio,
            sync: flags.bool("sync"),
            disable_wal: flags.bool("disable_wal"),
            seek_nexts: flags.u64("seek_nexts")? as usize,
            reverse_iterator: flags.bool("reverse_iterator"),
            readwritepercent: readwritepercent as u32,
            merge_keys,
            bulkload_file_keys,
            mergereadpercent: mergereadpercent as u32,
            range_tombstones,
            histogram: flags.bool("histogram"),
            perf_level: perf_level(flags)?,
            report_open_timing: flags.bool("report_open_timing"),
            report_memory: flags.bool("report_memory"),
            statistics: flags.bool("statistics"),
            stats_interval_secs: flags.u64("stats_interval_seconds")?,
            stats_per_interval: flags.i64("stats_per_interval") > 0,
            report_interval_secs: flags.u64("report_interval_seconds")?,
            report_file: PathBuf::from(flags.str("report_file")),
            json,
            progress: flags.bool("progress"),
            summary: flags.bool("summary"),
            write_schedule,
            count_bursts,
            read_rate_limit,
            readers,
            mix,
            mixgraph: MixGraphParams {
                get_ratio: flags.f64("mix_get_ratio"),
                put_ratio: flags.f64("mix_put_ratio"),
                seek_ratio: flags.f64("mix_seek_ratio"),
                max_scan_len: positive(flags, "mix_max_scan_len")? as i64,
                max_value_size: positive(flags, "mix_max_value_size")? as i64,
                keyrange_dist: [
                    flags.f64("keyrange_dist_a"),
                    flags.f64("keyrange_dist_b"),
                    flags.f64("keyrange_dist_c"),
                    flags.f64("keyrange_dist_d"),
                ],
                keyrange_num: flags.i64("keyrange_num"),
                key_dist_a: flags.f64("key_dist_a"),
                key_dist_b: flags.f64("key_dist_b"),
                value_theta: flags.f64("value_theta"),
                value_k: flags.f64("value_k"),
                value_sigma: flags.f64("value_sigma"),
                iter_theta: flags.f64("iter_theta"),
                iter_k: flags.f64("iter_k"),
                iter_sigma: flags.f64("iter_sigma"),
            },
            block_size: positive(flags, "block_size")? as usize,
            transactions,
        })
    }

    /// Write operations per thread for write benchmarks.
    pub fn writes_or_num(&self) -> u64 {
        self.writes.unwrap_or(self.num)
    }

    /// The `--readers` threads to run beside `benchmark`: none unless it is
    /// one of [`BENCHMARKS_WITH_READERS`].
    pub fn readers_beside(&self, benchmark: &str) -> usize {
        if BENCHMARKS_WITH_READERS.contains(&benchmark) {
            self.readers
        } else {
            0
        }
    }

    /// Read operations per thread.
    pub fn reads_or_num(&self) -> u64 {
        self.reads.unwrap_or(self.num)
    }

    /// Operations per thread of mixed benchmarks (db_bench `readwrites_`):
    /// the larger of `--reads` and `--writes`, or `--num` when neither is given.
    pub fn readwrites(&self) -> u64 {
        match (self.reads, self.writes) {
            (None, None) => self.num,
            (r, w) => r.unwrap_or(0).max(w.unwrap_or(0)),
        }
    }
}

/// `--prefix_size` and `--keys_per_prefix`, checked as db_bench checks them
/// (no negative sizes; a prefix no longer than the key), and where db_bench
/// would divide by zero (fewer keys than keys per prefix leave no prefix to
/// draw) refused.
fn prefixes(flags: &Flags, benchmarks: &[String], num: u64, merge_keys: u64, key_size: usize) -> Result<(usize, u64)> {
    let prefix_size = flags.i64("prefix_size");
    if prefix_size < 0 {
        bail!("flag --prefix_size must not be negative, got {prefix_size}");
    }
    if prefix_size as u64 > key_size as u64 {
        bail!("--prefix_size={prefix_size} is larger than --key_size={key_size} (db_bench: prefix size is larger than key size)");
    }
    let keys_per_prefix = flags.i64("keys_per_prefix");
    if keys_per_prefix < 0 {
        bail!("flag --keys_per_prefix must not be negative, got {keys_per_prefix}");
    }
    let keys_per_prefix = keys_per_prefix as u64;
    if prefix_size > 0 && keys_per_prefix > 0 {
        // The merging benchmarks' keys are among --merge_keys (their num_keys).
        let mut key_counts = vec![("num", num)];
        if benchmarks.iter().any(|b| crate::engine::MERGE_BENCHMARKS.contains(&b.as_str())) {
            key_counts.push(("merge_keys", merge_keys));
        }
        for (flag, keys) in key_counts {
            if keys < keys_per_prefix {
                bail!(
                    "--keys_per_prefix={keys_per_prefix} is more than --{flag}={keys}: the keys have {flag} / \
                     keys_per_prefix prefixes (db_bench's num_prefix), and that is none"
                );
            }
        }
    }
    Ok((prefix_size as usize, keys_per_prefix))
}

/// `--readers`, refused where no benchmark would run them: a user who asks
/// for reads beside the writes and gets none would misread the figures.
fn readers(flags: &Flags, benchmarks: &[String]) -> Result<usize> {
    let readers = flags.i64("readers");
    if readers < 0 {
        bail!("flag --readers must not be negative, got {readers}");
    }
    if readers > 0 && !benchmarks.iter().any(|b| BENCHMARKS_WITH_READERS.contains(&b.as_str())) {
        bail!(
            "--readers={readers} runs reader threads beside the benchmarks that write ({}), and \
             --benchmarks={} has none of them (readwhilewriting's readers are its own --threads)",
            BENCHMARKS_WITH_READERS.join(", "),
            benchmarks.join(","),
        );
    }
    Ok(readers as usize)
}

const SINE_FLAGS: &[&str] = &[
    "sine_write_rate_interval_milliseconds",
    "sine_a",
    "sine_b",
    "sine_c",
    "sine_d",
    "sine_finished_seconds",
    "sine_finished_write_rate_limit",
];

/// Bursts in count: (`--burst_writes`, idle seconds).
pub type CountBurstSpec = (u64, Vec<f64>);

fn write_shape(flags: &Flags) -> Result<(Schedule, Option<CountBurstSpec>)> {
    let sine_on = flags.bool("sine_write_rate");
    let trace = flags.str("trace_file");
    let fixed = flags.u64("benchmark_write_rate_limit")?;
    if !sine_on {
        if let Some(f) = SINE_FLAGS.iter().find(|f| flags.is_set(f)) {
            bail!("flag --{f} has no effect without --sine_write_rate=true");
        }
    }
    if sine_on && !trace.is_empty() {
        bail!("--sine_write_rate and --trace_file both define the write cap; give one");
    }
    if fixed > 0 && (sine_on || !trace.is_empty()) {
        bail!("--benchmark_write_rate_limit conflicts with --sine_write_rate / --trace_file, which set the cap themselves");
    }
    let base = if sine_on {
        let interval_ms = flags.u64("sine_write_rate_interval_milliseconds")?;
        if interval_ms == 0 {
            bail!("flag --sine_write_rate_interval_milliseconds must be positive");
        }
        let finished = flags.i64("sine_finished_seconds");
        let finished_limit = flags.i64("sine_finished_write_rate_limit");
        if finished < 0 || finished_limit < 0 {
            bail!("--sine_finished_seconds and --sine_finished_write_rate_limit must not be negative");
        }
        if finished == 0 && finished_limit > 0 {
            bail!("--sine_finished_write_rate_limit needs --sine_finished_seconds");
        }
        Base::Sine(Sine {
            a: flags.f64("sine_a"),
            b: flags.f64("sine_b"),
            c: flags.f64("sine_c"),
            d: flags.f64("sine_d"),
            interval_secs: interval_ms as f64 / 1000.0,
            finished_secs: Some(finished as f64).filter(|f| *f > 0.0),
            finished_rate: Some(finished_limit as f64).filter(|r| *r > 0.0),
        })
    } else if !trace.is_empty() {
        Base::Trace(Trace::load(std::path::Path::new(trace))?)
    } else if fixed > 0 {
        Base::Fixed(fixed as f64)
    } else {
        Base::Unlimited
    };
    let bursts_text = flags.str("burst_seconds");
    let idle_text = flags.str("idle_seconds");
    let burst_writes = flags.i64("burst_writes");
    if burst_writes < 0 {
        bail!("flag --burst_writes must not be negative, got {burst_writes}");
    }
    let idles = parse_seconds_list("idle_seconds", idle_text)?;
    let bursts = parse_seconds_list("burst_seconds", bursts_text)?;
    let mut count_bursts = None;
    let time_bursts = match (bursts.is_empty(), burst_writes > 0, idles.is_empty()) {
        (true, false, true) => None,
        (false, true, _) => bail!("--burst_seconds and --burst_writes both define bursts; give one"),
        (_, _, true) => bail!("bursts need --idle_seconds"),
        (true, false, false) => bail!("--idle_seconds needs --burst_seconds or --burst_writes"),
        (false, false, false) => Some(TimeBursts::new(&bursts, &idles)?),
        (true, true, false) => {
            count_bursts = Some((burst_writes as u64, idles));
            None
        }
    };
    Ok((Schedule { base, bursts: time_bursts }, count_bursts))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// db_bench's condition, at its edges: after every `every` writes past
    /// `writes_before`, `max` times at most; a maximum of 0 allows none.
    #[test]
    fn range_deletions_are_due_as_in_db_bench() {
        let rt = RangeTombstones { writes_before: 0, every: 10, width: 5, max: 20, expand: false };
        let due: Vec<u64> = (0..=400).filter(|n| rt.due(*n)).collect();
        assert_eq!(due, (1..=20).map(|i| i * 10).collect::<Vec<_>>());
        let late = RangeTombstones { writes_before: 95, ..rt };
        let due: Vec<u64> = (0..=400).filter(|n| late.due(*n)).collect();
        assert_eq!(due, (1..=20).map(|i| 95 + i * 10).collect::<Vec<_>>());
        for none in [RangeTombstones { max: 0, ..rt }, RangeTombstones { every: 0, ..rt }] {
            assert!(!(0..=400).any(|n| none.due(n)), "{none:?}");
            assert!(!none.enabled());
        }
        assert_eq!(rt.key_space(1000), 1020, "db_bench's KeyGenerator spans num + max");
    }
}
