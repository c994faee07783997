//! The runner: opens the engine, runs `--benchmarks` in order (reopening a
//! fresh database before each fill, as db_bench does), prints db_bench's
//! result lines and histograms, and writes the JSON report.
//!
//! The database: `--db` when given (destroyed at start unless
//! `--use_existing_db`, kept at exit), else a fresh directory under the
//! system temp dir that is deleted at exit (also on error; not if the process
//! is killed).

pub mod ops;
pub mod transactions;
pub mod worker;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Instant;

use crate::clock::SystemClock;
use crate::config::Config;
use crate::dist::TwoTermExpKeys;
use crate::engine::{self, Direction, Engine};
use crate::error::{BenchError, Result};
use crate::flags::Flags;
use crate::histogram::Histogram;
use crate::keys::KeyOrder;
use crate::limiter::RateLimiter;
use crate::monitor::{Monitor, ReportCsv};
use crate::progress::Progress;
use crate::report::{BenchResult, BurstSummary, FlagValue, LatencySummary, ReadersSummary, Report, SCHEMA_VERSION};
use crate::rng::{thread_seed, Rng64};
use crate::shape::{Base, CountBursts, Schedule};
use crate::stats::{result_line, LiveCounters, Merged, OpType, ThreadStats};
use crate::summary;
use crate::timefmt;
use worker::{Shared, Worker};

/// What a benchmark does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Write { order: KeyOrder, fresh: bool, per_1000: bool, big_values: bool, sync: bool },
    ReadRandom,
    ReadMissing,
    ReadHot,
    ReadSeq(Direction),
    SeekRandom,
    MultiReadRandom,
    Delete { sequential: bool },
    ReadWhileWriting,
    ReadRandomWriteRandom,
    UpdateRandom,
    MergeRandom,
    ReadRandomMergeRandom,
    MixGraph,
    Mix,
    RandomTransaction,
    TransferTransaction,
    Checksum { xxh3: bool },
    Stats,
    LevelStats,
    Options,
    Compact,
    WaitForCompaction,
    Flush,
    BulkLoad,
    Checkpoint,
}

fn kind_of(name: &str) -> Option<Kind> {
    let write = |order, fresh| Kind::Write { order, fresh, per_1000: false, big_values: false, sync: false };
    Some(match name {
        "fillseq" => write(KeyOrder::Sequential, true),
        "fillrandom" => write(KeyOrder::Random, true),
        "filluniquerandom" => write(KeyOrder::UniqueRandom, true),
        "fillsync" => {
            Kind::Write { order: KeyOrder::Random, fresh: true, per_1000: true, big_values: false, sync: true }
        }
        "fill100K" => {
            Kind::Write { order: KeyOrder::Random, fresh: true, per_1000: true, big_values: true, sync: false }
        }
        "overwrite" => write(KeyOrder::Random, false),
        "readrandom" => Kind::ReadRandom,
        "readmissing" => Kind::ReadMissing,
        "readhot" => Kind::ReadHot,
        "readseq" => Kind::ReadSeq(Direction::Forward),
        "readreverse" => Kind::ReadSeq(Direction::Backward),
        "seekrandom" => Kind::SeekRandom,
        "multireadrandom" => Kind::MultiReadRandom,
        "deleteseq" => Kind::Delete { sequential: true },
        "deleterandom" => Kind::Delete { sequential: false },
        "readwhilewriting" => Kind::ReadWhileWriting,
        "readrandomwriterandom" => Kind::ReadRandomWriteRandom,
        "updaterandom" => Kind::UpdateRandom,
        "mergerandom" => Kind::MergeRandom,
        "readrandommergerandom" => Kind::ReadRandomMergeRandom,
        "mixgraph" => Kind::MixGraph,
        "mix" => Kind::Mix,
        "randomtransaction" => Kind::RandomTransaction,
        "transfertransaction" => Kind::TransferTransaction,
        "crc32c" => Kind::Checksum { xxh3: false },
        "xxh3" => Kind::Checksum { xxh3: true },
        "stats" => Kind::Stats,
        "levelstats" => Kind::LevelStats,
        "options" => Kind::Options,
        "compact" => Kind::Compact,
        "waitforcompaction" => Kind::WaitForCompaction,
        "flush" => Kind::Flush,
        "bulkload" => Kind::BulkLoad,
        "checkpoint" => Kind::Checkpoint,
        _ => return None,
    })
}

/// `--readonly` opens an existing database read-only (db_bench's
/// `--readonly`): it needs `--use_existing_db`, and every benchmark must
/// only read.
fn check_readonly(cfg: &Config, flags: &Flags) -> Result<()> {
    if !flags.bool("readonly") {
        return Ok(());
    }
    if !cfg.use_existing_db {
        crate::bail!("--readonly opens an existing database: give --use_existing_db and --db");
    }
    if flags.bool("transaction_db") || flags.bool("optimistic_transaction_db") {
        crate::bail!("--readonly with a transaction database: transactions write; open it without --readonly");
    }
    for name in &cfg.benchmarks {
        if kind_of(name).is_some_and(|kind| !kind.reads_only()) {
            crate::bail!(
                "benchmark {name} changes the database, which --readonly opens read-only; run only reading \
                 benchmarks (readrandom, readseq, seekrandom, multireadrandom, stats ...)"
            );
        }
    }
    Ok(())
}

impl Kind {
    /// Runs on a database opened read-only (changes nothing on disk).
    fn reads_only(self) -> bool {
        !self.writes()
            && !matches!(
                self,
                Kind::RandomTransaction
                    | Kind::TransferTransaction
                    | Kind::Compact
                    | Kind::Flush
                    | Kind::BulkLoad
                    | Kind::Checkpoint
            )
    }

    fn writes(self) -> bool {
        matches!(
            self,
            Kind::Write { .. }
                | Kind::Delete { .. }
                | Kind::ReadWhileWriting
                | Kind::ReadRandomWriteRandom
                | Kind::UpdateRandom
                | Kind::MergeRandom
                | Kind::ReadRandomMergeRandom
                | Kind::MixGraph
                | Kind::Mix
        )
    }
}

struct Runner<'a> {
    cfg: &'a Config,
    flags: &'a Flags,
    seed: u64,
    db_path: PathBuf,
    engine: Option<Box<dyn Engine>>,
    untouched_fresh: bool,
    report: Report,
    /// The summary's lines, one per benchmark that ran.
    summary_rows: Vec<summary::Row>,
}

/// Runs the benchmarks the flags ask for.
pub fn run(flags: &Flags) -> Result<()> {
    let cfg = Config::from_flags(flags)?;
    // Whatever can be refused is refused before anything is printed.
    engine::check_options(cfg.engine, flags)?;
    check_merge_operator(&cfg, flags)?;
    check_prefix_seek(&cfg, flags)?;
    note_range_tombstones(&cfg);
    note_prefixes(&cfg);
    if let Some(db) = &cfg.db {
        check_db_path(db)?;
    }
    let seed = if cfg.seed == 0 {
        let s = timefmt::unix_now() as u64;
        println!("Set seed to {s} because --seed was 0");
        s
    } else {
        cfg.seed
    };
    if cfg.use_existing_db && cfg.db.is_none() {
        crate::bail!("--use_existing_db needs --db (the default database is a fresh temporary directory)");
    }
    check_readonly(&cfg, flags)?;
    // Held until the end of this function: dropping it deletes the directory.
    let (db_path, _temp_dir) = match &cfg.db {
        Some(p) => (p.clone(), None),
        None => {
            let dir = tempfile::Builder::new()
                .prefix("ebb-bench-")
                .tempdir()
                .map_err(|e| BenchError::new(format!("cannot create a temporary database directory: {e}")))?;
            (dir.path().join("db"), Some(dir))
        }
    };
    let mut runner = Runner {
        cfg: &cfg,
        flags,
        seed,
        db_path: db_path.clone(),
        engine: None,
        untouched_fresh: false,
        report: Report {
            schema_version: SCHEMA_VERSION,
            tool: format!("ebb-bench {}", env!("CARGO_PKG_VERSION")),
            engine: cfg.engine.name().to_string(),
            started_unix_secs: timefmt::unix_now(),
            command_line: flags.args().to_vec(),
            seed,
            db_path: db_path.display().to_string(),
            flags: flags
                .values()
                .map(|(name, v)| (name.to_string(), FlagValue { value: v.to_json(), explicit: flags.is_set(name) }))
                .collect(),
            effective_options: BTreeMap::new(),
            results: Vec::new(),
            open_micros: Vec::new(),
        },
        summary_rows: Vec::new(),
    };
    runner.print_header();
    let outcome = runner.run_all();
    if outcome.is_ok() && cfg.summary {
        if let Some(engine) = &runner.engine {
            print!("{}", summary::render(&runner.summary_rows, &engine.metrics()));
        }
    }
    let closed = match runner.engine.take() {
        Some(e) => e.close(),
        None => Ok(()),
    };
    outcome?;
    closed?;
    if let Some(path) = &cfg.json {
        runner.report.write(path)?;
    }
    Ok(())
}

impl Runner<'_> {
    fn print_header(&self) {
        let cfg = self.cfg;
        let raw = (cfg.key_size + cfg.value_size) as f64 * cfg.num as f64 / 1048576.0;
        let file = (cfg.key_size as f64 + cfg.value_size as f64 * cfg.compression_ratio) * cfg.num as f64 / 1048576.0;
        let compression = self.flags.str("compression_type");
        println!(
            "{}:{}version {}",
            engine_title(cfg),
            " ".repeat(12 - engine_title(cfg).len() - 1),
            engine_version(cfg)
        );
        println!("Date:       {}", timefmt::ctime(timefmt::unix_now()));
        println!("CPU:        {}", cpu_description());
        println!("Keys:       {} bytes each (+ 0 bytes user-defined timestamp)", cfg.key_size);
        println!(
            "Values:     {} bytes each ({} bytes after compression)",
            cfg.value_size,
            (cfg.value_size as f64 * cfg.compression_ratio) as u64
        );
        println!("Entries:    {}", cfg.num);
        println!("Prefix:    {} bytes", cfg.prefix_size);
        println!("Keys per prefix:    {}", cfg.keys_per_prefix);
        println!("RawSize:    {raw:.1} MB (estimated)");
        println!("FileSize:   {file:.1} MB (estimated)");
        // db_bench's two lines, with what their figure means here after them.
        let write_cap = match cfg.write_schedule.base {
            Base::Unlimited => " (0 = unlimited)",
            Base::Fixed(_) => "",
            Base::Sine(_) => " (the cap follows --sine_write_rate instead)",
            Base::Trace(_) => " (the cap follows --trace_file instead)",
        };
        println!("Write rate: {} bytes/second{write_cap}", self.flags.i64("benchmark_write_rate_limit"));
        let read_cap = if cfg.read_rate_limit.is_none() { " (0 = unlimited)" } else { "" };
        println!("Read rate: {} ops/second{read_cap}", self.flags.i64("benchmark_read_rate_limit"));
        if cfg.readers > 0 {
            let beside: Vec<&str> =
                cfg.benchmarks.iter().map(String::as_str).filter(|b| cfg.readers_beside(b) > 0).collect();
            println!(
                "Readers:    {} of random point reads beside {} (--readers; reported apart)",
                plural(cfg.readers, "thread"),
                beside.join(", ")
            );
        }
        println!("Compression: {compression}");
        println!("------------------------------------------------");
        println!("DB path: [{}]", self.db_path.display());
        let _ = std::io::stdout().flush();
    }

    fn open(&mut self, fresh: bool) -> Result<()> {
        if let Some(e) = self.engine.take() {
            e.close()?;
        }
        let create = !self.cfg.use_existing_db;
        let start = Instant::now();
        let engine = engine::open(self.cfg.engine, &self.db_path, self.flags, fresh, create)?;
        if self.cfg.report_open_timing {
            // db_bench's line (`--report_open_timing`).
            let micros = start.elapsed().as_micros() as u64;
            println!("OpenDb:     {:.6} milliseconds", micros as f64 / 1000.0);
            self.report.open_micros.push(micros);
        }
        if self.report.effective_options.is_empty() {
            self.report.effective_options =
                engine.effective_options().into_iter().map(|(f, v)| (f.to_string(), v.to_json())).collect();
        }
        self.engine = Some(engine);
        self.untouched_fresh = fresh;
        Ok(())
    }

    fn run_all(&mut self) -> Result<()> {
        self.open(!self.cfg.use_existing_db)?;
        let benchmarks = self.cfg.benchmarks.clone();
        for (index, name) in benchmarks.iter().enumerate() {
            let Some(kind) = kind_of(name) else {
                crate::bail!("unknown benchmark {name:?}");
            };
            if let Kind::Write { fresh: true, .. } = kind {
                if self.cfg.use_existing_db {
                    println!("{name:<12} : skipped (--use_existing_db is true)");
                    self.report.results.push(skipped(name));
                    continue;
                }
                if !self.untouched_fresh {
                    self.open(true)?;
                }
            }
            self.untouched_fresh = false;
            let before = self.engine()?.metrics();
            let peak_reset = self.cfg.report_memory && crate::memory::reset_peak();
            let mut result =
                self.run_one(index as u64, name, kind).map_err(|e| e.context(format!("benchmark {name}")))?;
            if self.cfg.report_memory {
                let m = crate::memory::summary(self.engine()?, peak_reset);
                println!("{}", crate::memory::line(&m));
                result.memory = Some(m);
            }
            if !matches!(kind, Kind::Stats | Kind::LevelStats | Kind::Options) {
                let one_shot = matches!(kind, Kind::Compact | Kind::WaitForCompaction | Kind::Flush | Kind::Checkpoint);
                self.summary_rows.push(summary::Row::new(&result, one_shot, &before, &self.engine()?.metrics()));
            }
            self.report.results.push(result);
            if let Some(path) = &self.cfg.json {
                self.report.write(path)?;
            }
        }
        if self.cfg.statistics {
            let engine = self.engine()?;
            if let Some(text) = engine.property(&format!("{}.options-statistics", engine.name())) {
                println!("STATISTICS:\n{text}");
            }
        }
        Ok(())
    }

    fn engine(&self) -> Result<&dyn Engine> {
        self.engine.as_deref().ok_or_else(|| BenchError::new("the database is not open"))
    }

    fn run_one(&mut self, index: u64, name: &str, kind: Kind) -> Result<BenchResult> {
        let engine = self.engine()?;
        let prefix = engine.name();
        let timed_meta = |f: &dyn Fn() -> Result<()>| -> Result<BenchResult> {
            let start = Instant::now();
            f()?;
            let elapsed = start.elapsed().as_secs_f64();
            let m = Merged { done: 1, thread_seconds: elapsed, elapsed, ..Merged::default() };
            println!("{}", result_line(name, &m));
            Ok(bench_result(name, 1, &m, None, Vec::new()))
        };
        match kind {
            Kind::Stats | Kind::LevelStats => {
                let property = format!("{prefix}.{}", if kind == Kind::Stats { "stats" } else { "levelstats" });
                match engine.property(&property) {
                    Some(text) => println!("\n{text}\n"),
                    None => println!("\n(the engine has no {property} property)\n"),
                }
                return Ok(BenchResult { skipped: false, ..skipped(name) });
            }
            Kind::Options => {
                println!("\n{}", engine::render_effective(&engine.effective_options()));
                return Ok(BenchResult { skipped: false, ..skipped(name) });
            }
            Kind::Compact => return timed_meta(&|| engine.compact_range()),
            Kind::WaitForCompaction => return timed_meta(&|| engine.wait_for_compaction()),
            Kind::Flush => return timed_meta(&|| engine.flush()),
            Kind::BulkLoad => return self.bulk_load(name),
            Kind::Checkpoint => {
                let dir = self.db_path.with_extension("checkpoint");
                let _ = std::fs::remove_dir_all(&dir);
                let result = timed_meta(&|| engine.checkpoint(&dir));
                let _ = std::fs::remove_dir_all(&dir);
                return result;
            }
            Kind::RandomTransaction => {
                let result = self.run_threads(index, name, kind)?;
                // db_bench's `RandomTransactionVerify`, which it runs only
                // on a transaction database (concurrent batches need not
                // keep the sums).
                if self.cfg.transactions.db.is_some() {
                    match transactions::verify_sets(engine, self.cfg.transactions.sets) {
                        Ok(_) => println!("RandomTransactionVerify Success."),
                        Err(e) => {
                            println!("RandomTransactionVerify FAILED!!");
                            return Err(e);
                        }
                    }
                }
                return Ok(result);
            }
            Kind::TransferTransaction => {
                let accounts = self.cfg.transactions.transfer_accounts;
                let total = transactions::open_accounts(engine, accounts)?;
                let result = self.run_threads(index, name, kind)?;
                transactions::check_accounts(engine, accounts, total)?;
                println!(
                    "TransferTransactionVerify Success: the {accounts} accounts hold {total} in total, as before."
                );
                return Ok(result);
            }
            _ => {}
        }
        self.run_threads(index, name, kind)
    }

    /// `bulkload` (not a db_bench benchmark): `--num` keys in order, with
    /// values as the fills make them, written into SST files of
    /// `--bulkload_file_keys` keys each by the engine's SST writer and
    /// ingested at once (hard-linked); the time covers both.
    fn bulk_load(&self, name: &str) -> Result<BenchResult> {
        let (cfg, engine) = (self.cfg, self.engine()?);
        let dir = self.db_path.with_extension("bulkload");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| BenchError::new(format!("{}: {e}", dir.display())))?;
        let per_file = cfg.bulkload_file_keys.max(1);
        let start = Instant::now();
        let mut values = crate::values::ValueGenerator::new(cfg.compression_ratio, cfg.value_size);
        let mut paths = Vec::new();
        let mut next = 0u64;
        while next < cfg.num {
            let end = (next + per_file).min(cfg.num);
            let path = dir.join(format!("{:06}.sst", paths.len()));
            let mut entries = (next..end).map(|n| (cfg.keys.key(n), values.generate(cfg.value_size).to_vec()));
            engine.write_sst(&path, &mut entries)?;
            paths.push(path);
            next = end;
        }
        engine.ingest(&paths)?;
        let elapsed = start.elapsed().as_secs_f64();
        let _ = std::fs::remove_dir_all(&dir);
        let m = Merged { done: cfg.num, thread_seconds: elapsed, elapsed, ..Merged::default() };
        println!("{}", result_line(name, &m));
        Ok(bench_result(name, 1, &m, None, Vec::new()))
    }

    fn run_threads(&self, index: u64, name: &str, kind: Kind) -> Result<BenchResult> {
        let cfg = self.cfg;
        let engine = self.engine()?;
        let clients = cfg.threads;
        let threads = if kind == Kind::ReadWhileWriting { clients + 1 } else { clients };
        let start = Instant::now();
        let clock = Arc::new(SystemClock::starting_at(start));
        let mut shared = Shared::new(clock.clone());
        let writes = kind.writes();
        let mut schedule = Schedule::unlimited();
        if writes {
            schedule = cfg.write_schedule.clone();
            if !schedule.is_unlimited() {
                shared.write_limiter = Some(RateLimiter::new(schedule.clone(), clock.clone()));
            }
            if let Some((n, idles)) = &cfg.count_bursts {
                shared.count_bursts = Some(CountBursts::new(*n, idles)?);
            }
        }
        if let Some(r) = cfg.read_rate_limit {
            shared.read_limiter = Some(RateLimiter::new(Schedule::fixed(r), clock.clone()));
        }
        shared.deadline = cfg.duration;
        if let Kind::Write { order: KeyOrder::UniqueRandom, .. } = kind {
            // db_bench's KeyGenerator shuffles num + max_num_range_tombstones keys.
            let mut order: Vec<u64> = (0..cfg.range_tombstones.key_space(cfg.num)).collect();
            let mut rng = Rng64::new(thread_seed(self.seed, index, u64::MAX));
            for i in (1..order.len()).rev() {
                order.swap(i, rng.below(i as u64 + 1) as usize);
            }
            shared.unique_order = Some(order);
        }
        if kind == Kind::MixGraph {
            let [a, b, c, d] = cfg.mixgraph.keyrange_dist;
            if a != 0.0 || b != 0.0 || c != 0.0 || d != 0.0 {
                shared.key_ranges = Some(TwoTermExpKeys::new(cfg.num as i64, cfg.mixgraph.keyrange_num, a, b, c, d)?);
            }
        }
        if kind == Kind::ReadWhileWriting {
            shared.readers_left.store(clients, Ordering::Relaxed);
        }
        let side_readers = cfg.readers_beside(name);
        shared.writers_left.store(threads, Ordering::Relaxed);
        if let Some(r) = cfg.read_rate_limit.filter(|_| side_readers > 0) {
            shared.side_read_limiter = Some(RateLimiter::new(Schedule::fixed(r), clock.clone()));
        }
        let (value_size, write_count) = match kind {
            Kind::Write { per_1000, big_values, .. } => {
                let count = if per_1000 { cfg.writes.unwrap_or(cfg.num / 1000) } else { cfg.writes_or_num() };
                (if big_values { 100_000 } else { cfg.value_size }, count)
            }
            _ => (cfg.value_size, cfg.writes_or_num()),
        };
        let expected_ops = match kind {
            Kind::Write { .. } => Some(write_count * clients as u64),
            Kind::Delete { .. } => Some(cfg.deletes.unwrap_or(cfg.num) * clients as u64),
            Kind::ReadRandomWriteRandom
            | Kind::UpdateRandom
            | Kind::MergeRandom
            | Kind::ReadRandomMergeRandom
            | Kind::RandomTransaction
            | Kind::TransferTransaction => Some(cfg.readwrites() * clients as u64),
            Kind::Checksum { .. } => Some((500 * 1048576 / cfg.block_size as u64 + 1) * clients as u64),
            _ => Some(cfg.reads_or_num() * clients as u64),
        };
        let timed = match kind {
            Kind::Write { order, .. } => order != KeyOrder::Sequential,
            Kind::Delete { sequential } => !sequential,
            Kind::ReadSeq(_) | Kind::Checksum { .. } => false,
            _ => true,
        };
        let progress = Progress::new(cfg.progress, name, expected_ops, cfg.duration.filter(|_| timed));
        let live: Vec<Arc<LiveCounters>> = (0..threads).map(|_| Arc::new(LiveCounters::default())).collect();
        let reader_live: Vec<Arc<LiveCounters>> =
            (0..side_readers).map(|_| Arc::new(LiveCounters::default())).collect();
        let sample_secs = cfg.json.as_ref().map(|_| {
            if cfg.report_interval_secs > 0 {
                cfg.report_interval_secs as f64
            } else if cfg.stats_interval_secs > 0 {
                cfg.stats_interval_secs as f64
            } else {
                1.0
            }
        });
        let report_csv = if cfg.report_interval_secs > 0 {
            Some(ReportCsv::create(&cfg.report_file, cfg.report_interval_secs)?)
        } else {
            None
        };
        let monitor = Monitor {
            engine,
            live: live.clone(),
            readers: reader_live.clone(),
            start,
            base: engine.metrics(),
            schedule: &schedule,
            sample_secs,
            stats_interval_secs: cfg.stats_interval_secs,
            stats_per_interval: cfg.stats_per_interval,
            report: report_csv,
            progress: &progress,
        };
        let shared = &shared;
        let mix = cfg.mix.as_ref();
        let (stop_tx, stop_rx) = mpsc::channel::<()>();
        let seed = self.seed;
        // Thread tid of this benchmark; the --readers threads follow the benchmark's own.
        let worker = move |tid: usize, live: Arc<LiveCounters>| {
            let values = value_size.max(cfg.value_size);
            Worker::new(tid, thread_seed(seed, index, tid as u64), live, engine, cfg, shared, values)
        };
        let abort = || {
            shared.abort.store(true, Ordering::Relaxed);
            shared.writer_stop.store(true, Ordering::Relaxed);
            shared.side_readers_stop.store(true, Ordering::Relaxed);
        };
        // Each benchmark thread's performance counters (`--perf_level`).
        let perf_level = cfg.perf_level;
        let perf_reports: std::sync::Mutex<Vec<(usize, crate::engine::PerfReports)>> = Default::default();
        let reported = &perf_reports;
        let (outcomes, reader_outcomes, series) = std::thread::scope(|scope| {
            let monitor_handle = scope.spawn(move || monitor.run(stop_rx));
            let handles: Vec<_> = (0..threads)
                .map(|tid| {
                    let live = live[tid].clone();
                    scope.spawn(move || {
                        let mut w = worker(tid, live);
                        if perf_level > 1 {
                            engine.start_perf(perf_level);
                        }
                        w.stats.start();
                        let outcome = run_body(&mut w, kind, write_count, value_size, mix);
                        w.stats.stop();
                        if perf_level > 1 {
                            let report = engine.end_perf();
                            reported.lock().unwrap_or_else(|e| e.into_inner()).push((tid, report));
                        }
                        if outcome.is_err() {
                            abort();
                        }
                        if kind == Kind::ReadWhileWriting
                            && w.tid > 0
                            && shared.readers_left.fetch_sub(1, Ordering::Relaxed) == 1
                        {
                            shared.writer_stop.store(true, Ordering::Relaxed);
                        }
                        if shared.writers_left.fetch_sub(1, Ordering::Relaxed) == 1 {
                            shared.side_readers_stop.store(true, Ordering::Relaxed);
                        }
                        (w.stats, outcome)
                    })
                })
                .collect();
            let reader_handles: Vec<_> = reader_live
                .iter()
                .enumerate()
                .map(|(r, live)| {
                    let live = live.clone();
                    scope.spawn(move || {
                        let mut w = worker(threads + r, live);
                        w.stats.start();
                        let outcome = ops::side_reader(&mut w);
                        w.stats.stop();
                        if outcome.is_err() {
                            abort();
                        }
                        (w.stats, outcome)
                    })
                })
                .collect();
            let outcomes: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
            let reader_outcomes: Vec<_> = reader_handles.into_iter().map(|h| h.join()).collect();
            drop(stop_tx);
            let series = monitor_handle.join();
            (outcomes, reader_outcomes, series)
        });
        progress.finish();
        let mut first_error = None;
        let stats = gather(outcomes, &mut first_error);
        let reader_stats = gather(reader_outcomes, &mut first_error);
        if let Some(e) = first_error {
            return Err(e);
        }
        let series = match series {
            Ok(s) => s?,
            Err(_) => return Err(BenchError::new("the monitor thread panicked")),
        };
        // db_bench's line, which each writing thread prints as it ends (so
        // before the result line), readwhilewriting's writer too.
        for s in stats.iter().filter(|s| s.range_deletions() > 0) {
            println!("Number of range deletions: {}", s.range_deletions());
        }
        let range_deletions = stats.iter().map(ThreadStats::range_deletions).sum();
        let mut merged = Merged::from_threads(&stats);
        let transactions = matches!(kind, Kind::RandomTransaction | Kind::TransferTransaction).then(|| {
            merged.message = transaction_message(kind, &merged.transactions, cfg.transactions.db.is_some());
            merged.transactions
        });
        println!("{}", result_line(name, &merged));
        // db_bench's per-thread message after the result line.
        let mut perf_reports = perf_reports.into_inner().unwrap_or_else(|e| e.into_inner());
        perf_reports.sort_by_key(|(tid, _)| *tid);
        for (tid, reports) in perf_reports {
            for (what, report) in reports {
                println!("{what} (thread {tid}):\n{report}");
            }
        }
        if let Some(counts) = transactions.filter(|_| cfg.transactions.db.is_some()) {
            println!("{}", transaction_line(name, &counts, merged.elapsed));
        }
        let burst = if writes { self.burst_summary(name, &merged, &stats, shared) } else { None };
        let readers = (!reader_stats.is_empty()).then(|| readers_summary(name, &reader_stats));
        if cfg.histogram {
            for (op, h) in &merged.hists {
                println!("Microseconds per {}:\n{}", op.name(), h.to_text());
            }
            if let Some(h) = Merged::from_threads(&reader_stats).hists.get(&OpType::Read) {
                println!("Microseconds per read (the --readers threads):\n{}", h.to_text());
            }
        }
        let _ = std::io::stdout().flush();
        let measured = stats.iter().filter(|s| !s.is_excluded()).count();
        Ok(BenchResult {
            readers,
            range_deletions,
            transactions,
            ..bench_result(name, measured, &merged, burst, series)
        })
    }

    fn burst_summary(
        &self,
        name: &str,
        merged: &Merged,
        stats: &[ThreadStats],
        shared: &Shared,
    ) -> Option<BurstSummary> {
        let elapsed = merged.elapsed;
        let burst_secs = if let Some(gate) = &shared.count_bursts {
            gate.burst_time_until(elapsed)
        } else if self.cfg.write_schedule.bursts.is_some() {
            self.cfg.write_schedule.burst_time_until(elapsed)
        } else {
            return None;
        };
        let done: u64 = stats.iter().map(ThreadStats::done).sum();
        let bytes = merged.bytes as f64 / 1048576.0;
        let per = |x: f64, secs: f64| if secs > 0.0 { x / secs } else { 0.0 };
        let summary = BurstSummary {
            burst_secs,
            idle_secs: (elapsed - burst_secs).max(0.0),
            ops_per_sec_whole_run: per(done as f64, elapsed),
            ops_per_sec_burst_only: per(done as f64, burst_secs),
            mb_per_sec_whole_run: per(bytes, elapsed),
            mb_per_sec_burst_only: per(bytes, burst_secs),
        };
        println!(
            "{name:<12} : bursts {:.3} of {:.3} seconds; {:.1} MB/s {} ops/sec over the whole run, {:.1} MB/s {} ops/sec over burst time",
            summary.burst_secs,
            elapsed,
            summary.mb_per_sec_whole_run,
            summary.ops_per_sec_whole_run as i64,
            summary.mb_per_sec_burst_only,
            summary.ops_per_sec_burst_only as i64
        );
        Some(summary)
    }
}

/// The statistics of finished threads; the first failure goes to `first_error`.
fn gather(
    outcomes: Vec<std::thread::Result<(ThreadStats, Result<()>)>>,
    first_error: &mut Option<BenchError>,
) -> Vec<ThreadStats> {
    let mut stats = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        match outcome {
            Ok((s, Ok(()))) => stats.push(s),
            Ok((s, Err(e))) => {
                stats.push(s);
                first_error.get_or_insert(e);
            }
            Err(_) => {
                first_error.get_or_insert(BenchError::new("a client thread panicked"));
            }
        }
    }
    stats
}

/// The `--readers` threads' figures, printed as a second line under the
/// benchmark's result line. Like the burst line it has no `micros/op`, so a
/// parser of db_bench's result lines (`compare`) passes over it.
fn readers_summary(name: &str, readers: &[ThreadStats]) -> ReadersSummary {
    let m = Merged::from_threads(readers);
    let latency = m.hists.get(&OpType::Read).filter(|h| h.count() > 0).map(latency_summary);
    let summary = ReadersSummary {
        threads: readers.len(),
        ops: m.done,
        elapsed_secs: m.elapsed,
        ops_per_sec: if m.elapsed > 0.0 { m.done as f64 / m.elapsed } else { 0.0 },
        found: m.found,
        not_found: m.done - m.found,
        latency,
    };
    let latency_text = summary
        .latency
        .as_ref()
        .map_or_else(String::new, |l| format!("; read latency p50 {:.1} p99 {:.1} micros", l.p50, l.p99));
    println!(
        "{name:<12} : {} alongside: {} reads/sec over {:.3} seconds ({} of {} found){latency_text}",
        plural(summary.threads, "reader"),
        summary.ops_per_sec as i64,
        summary.elapsed_secs,
        summary.found,
        summary.ops,
    );
    summary
}

/// The message after a transaction benchmark's result line: db_bench's
/// `( transactions:N aborts:M)` for randomtransaction (`( batches:N )`
/// without a transaction database), and the like for transfertransaction.
/// The counts are the threads' sums (db_bench prints one thread's).
fn transaction_message(kind: Kind, counts: &crate::stats::TransactionCounts, transactional: bool) -> String {
    match (kind, transactional) {
        (Kind::RandomTransaction, false) => format!("( batches:{} )", counts.attempts),
        (Kind::RandomTransaction, true) => {
            format!("( transactions:{} aborts:{})", counts.attempts, counts.aborted())
        }
        _ => format!("( transfers:{} committed:{} aborts:{})", counts.attempts, counts.committed, counts.aborted()),
    }
}

/// The second line under a transaction benchmark's result line: how its
/// transactions ended, by RocksDB's status code. Like the readers' line it
/// has no `micros/op`, so parsers of result lines pass over it.
fn transaction_line(name: &str, c: &crate::stats::TransactionCounts, elapsed: f64) -> String {
    let per_sec = if elapsed > 0.0 { c.committed as f64 / elapsed } else { 0.0 };
    format!(
        "{name:<12} : {} transactions: {} committed ({} after a prepare), {} rolled back, {} aborted (busy {}, \
         deadlock {}, timed out {}, try again {}, expired {}); {} commits/sec",
        c.attempts,
        c.committed,
        c.prepared,
        c.rolled_back,
        c.aborted(),
        c.busy,
        c.deadlock,
        c.timed_out,
        c.try_again,
        c.expired,
        per_sec as i64
    )
}

/// `1 reader`, `2 readers`.
fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

fn run_body(
    w: &mut Worker<'_>,
    kind: Kind,
    write_count: u64,
    value_size: usize,
    mix: Option<&crate::workload::MixSpec>,
) -> Result<()> {
    let cfg = w.cfg;
    match kind {
        Kind::Write { order, sync, .. } => {
            let timed = order != KeyOrder::Sequential;
            let mut wo = w.write_opts();
            wo.sync |= sync;
            ops::write(w, order, write_count, value_size, timed, wo)
        }
        Kind::ReadRandom => ops::read_random(w, cfg.num, w.keys),
        // db_bench's `++key_size_`: the same prefix and number, one more '0'.
        Kind::ReadMissing => ops::read_random(w, cfg.num, w.keys.with_key_size(cfg.key_size + 1)),
        Kind::ReadHot => ops::read_random(w, cfg.num.div_ceil(100), w.keys),
        Kind::ReadSeq(direction) => ops::read_sequential(w, direction),
        Kind::SeekRandom => ops::seek_random(w),
        Kind::MultiReadRandom => ops::multi_read_random(w),
        Kind::Delete { sequential } => ops::delete(w, sequential),
        Kind::ReadWhileWriting => {
            if w.tid == 0 {
                ops::background_writer(w)
            } else {
                ops::read_random(w, cfg.num, w.keys)
            }
        }
        Kind::ReadRandomWriteRandom => ops::read_random_write_random(w),
        Kind::UpdateRandom => ops::update_random(w),
        Kind::MergeRandom => ops::merge_random(w),
        Kind::ReadRandomMergeRandom => ops::read_random_merge_random(w),
        Kind::MixGraph => ops::mixgraph(w),
        Kind::Mix => match mix {
            Some(spec) => ops::mix(w, spec),
            None => Err(BenchError::new("the mix benchmark has no mix defined")),
        },
        Kind::RandomTransaction => transactions::random_transaction(w),
        Kind::TransferTransaction => transactions::transfer_transaction(w),
        Kind::Checksum { xxh3 } => ops::checksum(w, xxh3),
        Kind::Stats
        | Kind::LevelStats
        | Kind::Options
        | Kind::Compact
        | Kind::WaitForCompaction
        | Kind::Flush
        | Kind::BulkLoad
        | Kind::Checkpoint => Ok(()),
    }
}

fn skipped(name: &str) -> BenchResult {
    BenchResult {
        name: name.to_string(),
        skipped: true,
        threads: 0,
        ops: 0,
        elapsed_secs: 0.0,
        micros_per_op: 0.0,
        ops_per_sec: 0.0,
        bytes: 0,
        mb_per_sec: None,
        message: String::new(),
        latency: BTreeMap::new(),
        burst: None,
        range_deletions: 0,
        readers: None,
        intervals: Vec::new(),
        memory: None,
        transactions: None,
    }
}

fn bench_result(
    name: &str,
    threads: usize,
    m: &Merged,
    burst: Option<BurstSummary>,
    intervals: Vec<crate::report::IntervalSample>,
) -> BenchResult {
    BenchResult {
        name: name.to_string(),
        skipped: false,
        threads,
        ops: m.done,
        elapsed_secs: m.elapsed,
        micros_per_op: m.micros_per_op(),
        ops_per_sec: m.ops_per_sec(),
        bytes: m.bytes,
        mb_per_sec: m.mb_per_sec(),
        message: m.message.clone(),
        latency: m.hists.iter().map(|(op, h)| (op.name().to_string(), latency_summary(h))).collect(),
        burst,
        range_deletions: 0,
        readers: None,
        intervals,
        memory: None,
        transactions: None,
    }
}

fn latency_summary(h: &Histogram) -> LatencySummary {
    LatencySummary {
        count: h.count(),
        avg: h.average(),
        p50: h.percentile(50.0),
        p95: h.percentile(95.0),
        p99: h.percentile(99.0),
        p999: h.percentile(99.9),
        max: h.max(),
    }
}

/// The merging benchmarks need a merge operator (db_bench stops at the first
/// of them without `--merge_operator`; this refuses the run before it starts).
/// With uint64add, operands of other than 8 bytes count as 0, as in RocksDB;
/// db_bench sends `--value_size` bytes all the same, and so does this, with
/// a note on stderr.
fn check_merge_operator(cfg: &Config, flags: &Flags) -> Result<()> {
    let Some(first) = cfg.benchmarks.iter().find(|b| engine::MERGE_BENCHMARKS.contains(&b.as_str())) else {
        return Ok(());
    };
    if !engine::has_merge_operator(cfg.engine, flags)? {
        crate::bail!(
            "benchmark {first} merges, so it needs a merge operator: give --merge_operator=NAME ({})",
            engine::MERGE_OPERATORS.iter().map(|(short, _)| *short).collect::<Vec<_>>().join(", ")
        );
    }
    if engine::merge_operator_name(flags.str("merge_operator"))? == "uint64add" && cfg.value_size != 8 {
        eprintln!(
            "ebb-bench: note: uint64add reads an operand of other than 8 bytes as 0 (as RocksDB does), and \
             {first} merges --value_size={} bytes; --value_size=8 makes each operand an 8-byte integer",
            cfg.value_size
        );
    }
    Ok(())
}

/// `--prefix_same_as_start` needs a prefix extractor: Ebb's iterators
/// refuse the bound without one (RocksDB ignores it), so on both engines the
/// run is refused before it starts rather than failing at its first seek
/// (or, on RocksDB, running unbounded seeks that the flags say are bounded).
fn check_prefix_seek(cfg: &Config, flags: &Flags) -> Result<()> {
    if cfg.prefix_same_as_start && !engine::has_prefix_extractor(cfg.engine, flags)? {
        let how = match cfg.engine {
            crate::config::EngineKind::Ebb => {
                "give --prefix_size=N (or an --options_file with prefix_extractor=rocksdb.FixedPrefix.N)"
            }
            crate::config::EngineKind::RocksDb => "give --prefix_size=N",
        };
        crate::bail!(
            "--prefix_same_as_start=true keeps each seek within its key's prefix, and the {} engine has no prefix \
             extractor to say what that prefix is: {how}",
            cfg.engine.name()
        );
    }
    Ok(())
}

/// `--keys_per_prefix` without `--prefix_size` changes no key, as in
/// db_bench (the prefix it puts first is `--prefix_size` bytes long): said
/// on stderr, as a user who asks for prefixes and gets none would misread
/// the figures.
fn note_prefixes(cfg: &Config) {
    if cfg.keys_per_prefix > 0 && cfg.prefix_size == 0 {
        eprintln!(
            "ebb-bench: note: --keys_per_prefix={} without --prefix_size puts no prefix in the keys (as in db_bench, \
             the prefix is --prefix_size bytes, and 0 is none); give --prefix_size=N",
            cfg.keys_per_prefix
        );
    }
}

/// `--writes_per_range_tombstone` without `--max_num_range_tombstones`
/// writes none, as in db_bench (whose default maximum is 0): said on stderr,
/// since a user who asks for them and gets none would misread the figures.
fn note_range_tombstones(cfg: &Config) {
    let rt = &cfg.range_tombstones;
    if rt.every > 0 && rt.max == 0 {
        eprintln!(
            "ebb-bench: note: --writes_per_range_tombstone={} with --max_num_range_tombstones=0 issues no range \
             deletion (as in db_bench, the maximum caps them, and 0 allows none); give --max_num_range_tombstones=N",
            rt.every
        );
    }
}

/// `--db` must be a directory or a path that can become one: a regular file
/// there (or in its way) is named as such, before anything is destroyed.
fn check_db_path(db: &Path) -> Result<()> {
    for path in db.ancestors().filter(|p| !p.as_os_str().is_empty()) {
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(m) => {
                let what = if m.is_file() { "a regular file, not a directory" } else { "not a directory" };
                let place = if path == db { String::new() } else { format!(" (in the way of {})", db.display()) };
                crate::bail!(
                    "--db={}: {} is {what}{place}; --db names the database's directory \
                     (ebb-bench creates it if missing)",
                    db.display(),
                    path.display()
                );
            }
            // Missing, or below a file (ENOTDIR): the parent tells. Anything
            // else (permissions) the engine reports when it opens.
            Err(_) => continue,
        }
    }
    Ok(())
}

fn engine_title(cfg: &Config) -> &'static str {
    match cfg.engine {
        crate::config::EngineKind::Ebb => "Ebb",
        crate::config::EngineKind::RocksDb => "RocksDB",
    }
}

fn engine_version(cfg: &Config) -> &'static str {
    match cfg.engine {
        crate::config::EngineKind::Ebb => env!("CARGO_PKG_VERSION"),
        crate::config::EngineKind::RocksDb => "(rocksdb crate)",
    }
}

fn cpu_description() -> String {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|text| {
        text.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
            .map(|s| s.trim().to_string())
    });
    format!("{cores} * {}", model.unwrap_or_else(|| "unknown".into()))
}

#[cfg(test)]
mod tests {
    //! The runner against an in-memory engine: every benchmark path runs to
    //! its end, threads stop, and the report is filled.

    use std::collections::BTreeMap;

    use parking_lot::RwLock;

    use super::*;
    use crate::engine::{BatchOp, EngineMetrics, ScanStart, WriteOpts};
    use crate::flags::Parsed;

    #[derive(Default)]
    struct MemEngine {
        map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
        written: std::sync::atomic::AtomicU64,
    }

    impl Engine for MemEngine {
        fn name(&self) -> &'static str {
            "mem"
        }
        fn effective_options(&self) -> Vec<(&'static str, crate::flags::Value)> {
            Vec::new()
        }
        fn put(&self, key: &[u8], value: &[u8], _wo: WriteOpts) -> Result<()> {
            self.written.fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
            self.map.write().insert(key.to_vec(), value.to_vec());
            Ok(())
        }
        fn delete(&self, key: &[u8], _wo: WriteOpts) -> Result<()> {
            self.map.write().remove(key);
            Ok(())
        }
        /// uint64add's: 8 little-endian bytes, anything else counting as 0.
        fn merge(&self, key: &[u8], value: &[u8], _wo: WriteOpts) -> Result<()> {
            let decode = |v: &[u8]| <[u8; 8]>::try_from(v).map_or(0, u64::from_le_bytes);
            let mut map = self.map.write();
            let sum = map.get(key).map_or(0, |v| decode(v)).wrapping_add(decode(value));
            map.insert(key.to_vec(), sum.to_le_bytes().to_vec());
            Ok(())
        }
        fn write_batch(&self, ops: &[BatchOp<'_>], wo: WriteOpts) -> Result<()> {
            for op in ops {
                match op {
                    BatchOp::Put(k, v) => self.put(k, v, wo)?,
                    BatchOp::Delete(k) => self.delete(k, wo)?,
                    BatchOp::DeleteRange(b, e) => {
                        self.map.write().retain(|k, _| k.as_slice() < *b || k.as_slice() >= *e)
                    }
                }
            }
            Ok(())
        }
        fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
            Ok(self.map.read().get(key).cloned())
        }
        fn multi_get(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
            keys.iter().map(|k| self.get(k)).collect()
        }
        fn scan(
            &self,
            start: ScanStart<'_>,
            direction: Direction,
            limit: u64,
            visit: &mut dyn FnMut(&[u8], &[u8]) -> bool,
        ) -> Result<u64> {
            let map = self.map.read();
            let items: Vec<(&Vec<u8>, &Vec<u8>)> = match (start, direction) {
                (ScanStart::First, Direction::Forward) => map.iter().collect(),
                (ScanStart::Last, Direction::Backward) | (ScanStart::First, Direction::Backward) => {
                    map.iter().rev().collect()
                }
                (ScanStart::Last, Direction::Forward) => map.iter().rev().take(1).collect(),
                (ScanStart::At(k), Direction::Forward) => map.range(k.to_vec()..).collect(),
                (ScanStart::At(k), Direction::Backward) => map.range(..=k.to_vec()).rev().collect(),
            };
            let mut n = 0;
            for (k, v) in items.into_iter().take(limit as usize) {
                n += 1;
                if !visit(k, v) {
                    break;
                }
            }
            Ok(n)
        }
        fn flush(&self) -> Result<()> {
            Ok(())
        }
        fn compact_range(&self) -> Result<()> {
            Ok(())
        }
        fn wait_for_compaction(&self) -> Result<()> {
            Ok(())
        }
        fn property(&self, name: &str) -> Option<String> {
            (name == "mem.stats").then(|| "Interval writes: 1 writes, ingest: 0.00 MB, 0.00 MB/s\n".to_string())
        }
        fn metrics(&self) -> EngineMetrics {
            EngineMetrics {
                user_bytes_written: self.written.load(Ordering::Relaxed),
                compaction_enabled: true,
                files_per_level: vec![0; 7],
                ..EngineMetrics::default()
            }
        }
        fn close(self: Box<Self>) -> Result<()> {
            Ok(())
        }
    }

    fn run_with(args: &[&str]) -> Report {
        let Parsed::Run(flags) = Flags::parse(args.iter().copied()).unwrap() else { unreachable!() };
        let cfg = Config::from_flags(&flags).unwrap();
        let mut runner = Runner {
            cfg: &cfg,
            flags: &flags,
            seed: 7,
            db_path: PathBuf::from("/nonexistent"),
            engine: Some(Box::new(MemEngine::default())),
            untouched_fresh: true,
            report: Report {
                schema_version: SCHEMA_VERSION,
                tool: String::new(),
                engine: "mem".into(),
                started_unix_secs: 0.0,
                command_line: Vec::new(),
                seed: 7,
                db_path: String::new(),
                flags: BTreeMap::new(),
                effective_options: BTreeMap::new(),
                results: Vec::new(),
                open_micros: Vec::new(),
            },
            summary_rows: Vec::new(),
        };
        for (index, name) in cfg.benchmarks.iter().enumerate() {
            let kind = kind_of(name).unwrap();
            let r = runner.run_one(index as u64, name, kind).unwrap();
            runner.report.results.push(r);
        }
        runner.report
    }

    #[test]
    fn every_benchmark_runs_to_completion() {
        let report = run_with(&[
            "--benchmarks=fillseq,fillrandom,filluniquerandom,overwrite,readrandom,readmissing,readhot,readseq,\
              readreverse,seekrandom,multireadrandom,readwhilewriting,readrandomwriterandom,updaterandom,mixgraph,\
              deleteseq,deleterandom,randomtransaction,stats,levelstats,compact,waitforcompaction,flush",
            "--num=2000",
            "--threads=2",
            "--batch_size=3",
            "--seek_nexts=5",
            "--mix_put_ratio=0.3",
            "--mix_seek_ratio=0.2",
            "--progress=false",
            "--json=/dev/null",
        ]);
        let get = |n: &str| report.results.iter().find(|r| r.name == n).unwrap();
        assert_eq!(get("fillseq").ops, 2 * 1998, "batches of 3 up to 2000 per thread");
        assert!(get("readrandom").message.contains("found"), "{}", get("readrandom").message);
        assert!(get("readmissing").message.starts_with("(0 of "), "{}", get("readmissing").message);
        assert_eq!(get("readseq").ops, 2 * 2000);
        assert_eq!(get("readwhilewriting").threads, 2);
        assert!(get("mixgraph").message.contains("Gets:"));
        // Without a transaction database, db_bench's batches.
        assert_eq!(get("randomtransaction").message, "( batches:4000 )");
        assert_eq!(get("randomtransaction").transactions.map(|t| t.attempts), Some(4000));
        assert!(!get("fillrandom").intervals.is_empty(), "a final interval sample is taken");
    }

    /// Range deletions in the write benchmarks: db_bench's count per thread,
    /// left out of the operations, in the report; readwhilewriting's writer
    /// issues its own.
    #[test]
    fn range_deletions_are_counted_apart_from_the_writes() {
        let report = run_with(&[
            "--benchmarks=fillseq,fillrandom,filluniquerandom,overwrite",
            "--num=300",
            "--writes_per_range_tombstone=10",
            "--range_tombstone_width=5",
            "--max_num_range_tombstones=20",
            "--threads=2",
            "--batch_size=3",
            "--progress=false",
        ]);
        for r in &report.results {
            assert_eq!((r.ops, r.range_deletions), (2 * 300, 2 * 20), "{}", r.name);
            assert_eq!(r.latency.keys().collect::<Vec<_>>(), ["write"], "{}", r.name);
        }
        let report = run_with(&[
            "--benchmarks=fillseq,readwhilewriting",
            "--num=2000",
            "--reads=20000",
            "--writes_per_range_tombstone=1",
            "--max_num_range_tombstones=3",
            "--expand_range_tombstones=true",
            "--progress=false",
        ]);
        let rww = &report.results[1];
        assert!(rww.range_deletions <= 3, "{}", rww.range_deletions);
        assert_eq!(rww.latency.keys().collect::<Vec<_>>(), ["read"], "the writer is not reported");
    }

    /// mergerandom and readrandommergerandom against the in-memory engine
    /// (whose merge adds, as uint64add): db_bench's counts and messages, the
    /// keys among --merge_keys, the coin at --mergereadpercent.
    #[test]
    fn merge_benchmarks_count_their_operations() {
        let report = run_with(&[
            "--benchmarks=mergerandom,readrandommergerandom",
            "--num=1000",
            "--merge_keys=10",
            "--value_size=8",
            "--threads=2",
            "--merge_operator=uint64add",
            "--progress=false",
        ]);
        let merge = &report.results[0];
        assert_eq!((merge.ops, merge.threads), (2000, 2));
        assert_eq!(merge.message, "( updates:1000)");
        assert_eq!(merge.bytes, 2000 * (16 + 8), "each merge moves a key and its operand");
        assert_eq!(merge.latency.keys().collect::<Vec<_>>(), ["merge"]);
        let mixed = &report.results[1];
        assert_eq!(mixed.ops, 2000);
        assert_eq!(mixed.bytes, 0, "db_bench adds no bytes for it");
        let re = regex::Regex::new(r"^\(reads:(\d+) merges:(\d+) total:1000 hits:(\d+) maxlength:8\)$").unwrap();
        let caps = re.captures(&mixed.message).unwrap_or_else(|| panic!("{}", mixed.message));
        let n = |i: usize| caps[i].parse::<u64>().unwrap();
        assert_eq!(n(1) + n(2), 1000);
        assert_eq!(n(3), n(1), "every one of the 10 keys was merged into");
        assert!((600..=800).contains(&n(2)), "70% merges by default: {}", mixed.message);
        // The percentage's ends: all gets, all merges.
        for (percent, message) in [
            ("0", "(reads:500 merges:0 total:500 hits:500 maxlength:8)"),
            ("100", "(reads:0 merges:500 total:500 hits:0 maxlength:0)"),
        ] {
            let report = run_with(&[
                "--benchmarks=mergerandom,readrandommergerandom",
                "--num=500",
                "--merge_keys=5",
                &format!("--mergereadpercent={percent}"),
                "--value_size=8",
                "--merge_operator=uint64add",
                "--progress=false",
            ]);
            assert_eq!(report.results[1].message, message);
        }
    }

    #[test]
    fn a_write_cap_and_bursts_shape_a_timed_run() {
        let report = run_with(&[
            "--benchmarks=fillrandom",
            "--duration=2",
            "--value_size=1000",
            "--benchmark_write_rate_limit=100000",
            "--burst_seconds=0.5",
            "--idle_seconds=0.5",
            "--progress=false",
            "--json=/dev/null",
        ]);
        let r = &report.results[0];
        let burst = r.burst.as_ref().unwrap();
        // Burst time follows the 0.5 s on / 0.5 s off schedule over the elapsed time.
        let expected = crate::shape::TimeBursts::new(&[0.5], &[0.5]).unwrap().burst_time_until(r.elapsed_secs);
        assert!((burst.burst_secs - expected).abs() < 1e-9, "{burst:?}");
        assert!((burst.burst_secs + burst.idle_secs - r.elapsed_secs).abs() < 1e-9);
        // 100 KB/s for about 1 s of bursts: roughly 100 writes of ~1 KB, never 10x more.
        assert!(r.ops < 400, "{} writes admitted", r.ops);
        assert!(burst.ops_per_sec_burst_only > burst.ops_per_sec_whole_run);
    }

    /// Readers beside a sine-shaped writer: reads in every interval, and on
    /// a key space fillseq has filled, every read finds its key.
    #[test]
    fn readers_read_beside_a_shaped_writer_and_find_what_was_written() {
        let report = run_with(&[
            "--benchmarks=fillseq,overwrite",
            "--num=300",
            "--duration=2",
            "--value_size=200",
            "--sine_write_rate=true",
            "--sine_a=20000",
            "--sine_b=3",
            "--sine_d=40000",
            "--sine_write_rate_interval_milliseconds=100",
            "--readers=2",
            "--progress=false",
            "--json=/dev/null",
        ]);
        let overwrite = &report.results[1];
        assert!(overwrite.ops > 0 && overwrite.threads == 1, "the writer's own figures stay the result");
        let readers = overwrite.readers.as_ref().expect("a readers summary");
        assert_eq!(readers.threads, 2);
        assert!(readers.ops > 0, "{readers:?}");
        assert_eq!((readers.found, readers.not_found), (readers.ops, 0), "every key in [0, num) was written");
        assert!(readers.latency.as_ref().is_some_and(|l| l.count == readers.ops), "{readers:?}");
        assert!(!overwrite.intervals.is_empty());
        for i in &overwrite.intervals {
            let reads = i.reads.as_ref().expect("reads in every interval");
            assert!(reads.ops > 0 || i.interval_secs < 0.2, "{i:?}");
            assert_eq!((reads.found, reads.not_found), (reads.ops, 0), "{i:?}");
        }
        // The intervals add up to the totals: the last sample is taken after the readers stop.
        let sum = |f: fn(&crate::report::IntervalReads) -> u64| -> u64 {
            overwrite.intervals.iter().filter_map(|i| i.reads.as_ref()).map(f).sum()
        };
        assert_eq!((sum(|r| r.ops), sum(|r| r.found)), (readers.ops, readers.found));
        // Beside fillseq the key space fills as they read: found and not found add up.
        let fill = report.results[0].readers.as_ref().expect("readers beside fillseq too");
        assert_eq!(fill.found + fill.not_found, fill.ops);
    }

    #[test]
    fn readers_run_beside_writers_only_and_leave_readwhilewriting_as_it_is() {
        let report = run_with(&[
            "--benchmarks=fillrandom,readrandom,readwhilewriting",
            "--num=500",
            "--threads=2",
            "--readers=1",
            "--progress=false",
            "--json=/dev/null",
        ]);
        let get = |n: &str| report.results.iter().find(|r| r.name == n).unwrap();
        assert_eq!(get("fillrandom").readers.as_ref().map(|r| r.threads), Some(1));
        assert!(get("readrandom").readers.is_none());
        let rww = get("readwhilewriting");
        assert!(rww.readers.is_none(), "its readers are its own --threads");
        assert_eq!(rww.threads, 2);
        assert_eq!(rww.ops, 2 * 500, "each of its readers does --reads (= num) reads");
        assert!(rww.intervals.iter().all(|i| i.reads.is_none()));
    }

    /// The benchmarks `--readers` accompanies are those whose threads write,
    /// but readwhilewriting, whose readers are its own.
    #[test]
    fn readers_accompany_the_writing_benchmarks() {
        for (name, _) in crate::flags::table::BENCHMARKS {
            let kind = kind_of(name).unwrap();
            let expected = kind.writes() && kind != Kind::ReadWhileWriting;
            assert_eq!(crate::config::BENCHMARKS_WITH_READERS.contains(name), expected, "{name}");
        }
    }

    #[test]
    fn mix_runs_with_each_distribution() {
        for dist in ["uniform", "zipfian", "latest", "hotspot"] {
            let report = run_with(&[
                "--benchmarks=fillseq,mix",
                "--num=1000",
                "--mix_point_reads=0.5",
                "--mix_range_scans=0.1",
                "--mix_scan_length=10",
                "--mix_inserts=0.2",
                "--mix_updates=0.1",
                "--mix_deletes=0.1",
                &format!("--key_distribution={dist}"),
                "--progress=false",
            ]);
            let m = &report.results[1];
            assert_eq!(m.ops, 1000, "{dist}");
            assert!(m.message.contains("inserts:"), "{}", m.message);
        }
    }
}
