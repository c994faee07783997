//! The JSON report (`--json=FILE`): every flag, every benchmark's result, and
//! per-interval series built from the engine's metrics. The schema is these
//! structs; docs/bench-client.md describes each field. Bump
//! [`SCHEMA_VERSION`] on any incompatible change.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
pub use crate::stats::TransactionCounts;

/// The schema version written to `schema_version`.
pub const SCHEMA_VERSION: u32 = 1;

/// A whole invocation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `ebb-bench <version>`.
    pub tool: String,
    /// `ebb` or `rocksdb`.
    pub engine: String,
    /// Unix time (seconds) at which the run started.
    pub started_unix_secs: f64,
    /// The command-line arguments.
    pub command_line: Vec<String>,
    /// The base seed actually used (after `--seed=0` was resolved).
    pub seed: u64,
    /// The database directory.
    pub db_path: String,
    /// Every flag: its value and whether it was given.
    pub flags: BTreeMap<String, FlagValue>,
    /// The value each engine flag had in the engine, read back from it when
    /// the database was first opened (`--benchmarks=options` prints the same).
    #[serde(default)]
    pub effective_options: BTreeMap<String, serde_json::Value>,
    /// One entry per benchmark, in order.
    pub results: Vec<BenchResult>,
    /// With `--report_open_timing`: how long each open of the database
    /// took, in microseconds, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub open_micros: Vec<u64>,
}

/// A flag's value in the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlagValue {
    /// The value (bool, number or string).
    pub value: serde_json::Value,
    /// True when given on the command line.
    pub explicit: bool,
}

/// One benchmark's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchResult {
    /// Benchmark name.
    pub name: String,
    /// True when skipped (e.g. a fill with `--use_existing_db`).
    pub skipped: bool,
    /// Client threads measured (readwhilewriting's writer and the `--readers` threads excluded).
    pub threads: usize,
    /// Operations.
    pub ops: u64,
    /// Wall-clock seconds.
    pub elapsed_secs: f64,
    /// Microseconds per operation per thread (db_bench's figure).
    pub micros_per_op: f64,
    /// Operations per second.
    pub ops_per_sec: f64,
    /// Bytes moved.
    pub bytes: u64,
    /// MB/s (MB = 2^20 bytes); null without bytes.
    pub mb_per_sec: Option<f64>,
    /// The message after the result line (found counts and such).
    pub message: String,
    /// Latency summaries by operation type (`read`, `write`, ...).
    pub latency: BTreeMap<String, LatencySummary>,
    /// Throughput over burst time only; null without bursts.
    pub burst: Option<BurstSummary>,
    /// Range deletions the benchmark's threads issued
    /// (`--writes_per_range_tombstone`; readwhilewriting's writer included),
    /// which db_bench prints as `Number of range deletions: N` and leaves
    /// out of `ops`; absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub range_deletions: u64,
    /// The `--readers` threads' point reads beside this benchmark; null
    /// without them. The figures above are the benchmark's own threads'.
    #[serde(default)]
    pub readers: Option<ReadersSummary>,
    /// The interval series; empty for benchmarks without operations.
    pub intervals: Vec<IntervalSample>,
    /// With `--report_memory`: resident memory and the engine's own figures
    /// at the end of the benchmark; null without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemorySummary>,
    /// randomtransaction and transfertransaction: what their transactions
    /// came to, summed over the threads; absent for other benchmarks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transactions: Option<TransactionCounts>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Memory at the end of a benchmark (`--report_memory`), in bytes; a figure
/// the platform or the engine cannot give is null.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemorySummary {
    /// The process's peak resident set during the benchmark (`VmHWM`).
    pub rss_peak_bytes: Option<u64>,
    /// False when the peak could not be reset at the benchmark's start, so
    /// it covers the process's life so far.
    pub peak_since_start: bool,
    /// The resident set at the end (`VmRSS`).
    pub rss_end_bytes: Option<u64>,
    /// `<engine>.block-cache-usage`.
    pub block_cache_bytes: Option<u64>,
    /// `<engine>.cur-size-all-mem-tables`.
    pub memtable_bytes: Option<u64>,
    /// `<engine>.estimate-table-readers-mem`.
    pub table_readers_bytes: Option<u64>,
}

/// Latency figures of one operation type, in microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Mean.
    pub avg: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest sample.
    pub max: u64,
}

/// A burst run's throughput two ways (seed 002 reports the whole run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BurstSummary {
    /// Seconds of the run spent in bursts.
    pub burst_secs: f64,
    /// Seconds of the run spent idle.
    pub idle_secs: f64,
    /// Operations per second over the whole run.
    pub ops_per_sec_whole_run: f64,
    /// Operations per second over burst time.
    pub ops_per_sec_burst_only: f64,
    /// MB/s over the whole run.
    pub mb_per_sec_whole_run: f64,
    /// MB/s over burst time.
    pub mb_per_sec_burst_only: f64,
}

/// What the `--readers` threads did beside a benchmark, over its whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadersSummary {
    /// Reader threads.
    pub threads: usize,
    /// Point reads.
    pub ops: u64,
    /// Seconds from the first reader's start to the last one's finish (the
    /// benchmark's own threads' run: readers stop when they do).
    pub elapsed_secs: f64,
    /// Reads per second over those seconds.
    pub ops_per_sec: f64,
    /// Reads that found their key.
    pub found: u64,
    /// Reads that did not.
    pub not_found: u64,
    /// Read latency; null without reads.
    pub latency: Option<LatencySummary>,
}

/// The `--readers` threads' point reads in one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalReads {
    /// Reads completed in the interval.
    pub ops: u64,
    /// Reads per second in the interval.
    pub ops_per_sec: f64,
    /// Reads that found their key.
    pub found: u64,
    /// Reads that did not.
    pub not_found: u64,
    /// Median read latency in the interval (microseconds); null without reads.
    pub p50_latency_micros: Option<f64>,
    /// 99th percentile read latency in the interval (microseconds); null without reads.
    pub p99_latency_micros: Option<f64>,
}

/// One interval of a benchmark, from deltas of the engine's metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IntervalSample {
    /// End of the interval, seconds since the benchmark started.
    pub t_secs: f64,
    /// Length of the interval in seconds.
    pub interval_secs: f64,
    /// Client operations completed in the interval.
    pub ops: u64,
    /// Client operations per second in the interval.
    pub ops_per_sec: f64,
    /// User bytes ingested by the engine per second (MB/s): "Interval writes".
    pub ingest_mb_per_sec: f64,
    /// The write cap's mean over the interval (MB/s); null when uncapped.
    pub cap_mb_per_sec: Option<f64>,
    /// Flush output (MB/s).
    pub flush_mb_per_sec: f64,
    /// Compaction output (MB/s).
    pub compaction_mb_per_sec: f64,
    /// Share of the interval writers were stalled (percent).
    pub stall_percent: f64,
    /// Files in L0 at the end of the interval.
    pub l0_files: u64,
    /// Estimated pending compaction bytes at the end of the interval.
    pub pending_compaction_bytes: u64,
    /// Whether automatic compaction was enabled at the end of the interval.
    pub compaction_enabled: bool,
    /// Block cache hits / lookups in the interval; null without lookups.
    pub block_cache_hit_rate: Option<f64>,
    /// 99th percentile latency of the benchmark's own threads in the interval
    /// (microseconds); null without ops.
    pub p99_latency_micros: Option<f64>,
    /// The `--readers` threads' point reads in the interval; null without them.
    #[serde(default)]
    pub reads: Option<IntervalReads>,
    /// Ingest since the benchmark started / elapsed (MB/s): "Cumulative writes".
    pub cumulative_ingest_mb_per_sec: f64,
    /// (Flush + compaction output) since the benchmark started / elapsed (MB/s):
    /// the thesis's "Cumulative compaction", which counts flushes too (§4.2.1).
    pub cumulative_compaction_mb_per_sec: f64,
}

impl Report {
    /// Writes the report as pretty JSON (to a temporary name first, then renamed).
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string_pretty(self)
            .map_err(|e| BenchError::new(format!("cannot encode the JSON report: {e}")))?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, text + "\n")
            .and_then(|()| std::fs::rename(&tmp, path))
            .map_err(|e| BenchError::new(format!("cannot write JSON report {}: {e}", path.display())))
    }

    /// Reads a report.
    pub fn read(path: &Path) -> Result<Report> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| BenchError::new(format!("cannot read report {}: {e}", path.display())))?;
        let report: Report = serde_json::from_str(&text)
            .map_err(|e| BenchError::new(format!("report {} is not an ebb-bench JSON report: {e}", path.display())))?;
        if report.schema_version != SCHEMA_VERSION {
            return Err(BenchError::new(format!(
                "report {} has schema version {}, this ebb-bench reads {SCHEMA_VERSION}",
                path.display(),
                report.schema_version
            )));
        }
        Ok(report)
    }
}

/// A synthetic report with a sine-shaped cap, for tests and examples.
pub fn synthetic_report(engine: &str, seconds: usize) -> Report {
    let intervals = (1..=seconds)
        .map(|i| {
            let t = i as f64;
            let cap = 100.0 * (0.1 * t + 4.71).sin() + 150.0;
            let ingest = cap.min(120.0);
            IntervalSample {
                t_secs: t,
                interval_secs: 1.0,
                ops: (ingest * 10.0) as u64,
                ops_per_sec: ingest * 10.0,
                ingest_mb_per_sec: ingest,
                cap_mb_per_sec: Some(cap),
                flush_mb_per_sec: ingest,
                compaction_mb_per_sec: if (20..40).contains(&i) { 0.0 } else { 60.0 },
                stall_percent: 0.0,
                l0_files: (i % 12) as u64,
                pending_compaction_bytes: (i as u64) << 20,
                compaction_enabled: !(20..40).contains(&i),
                block_cache_hit_rate: None,
                p99_latency_micros: Some(50.0),
                // Reads slow down as the cap climbs, as they would beside a real wave.
                reads: Some(IntervalReads {
                    ops: (5000.0 - 10.0 * cap) as u64,
                    ops_per_sec: 5000.0 - 10.0 * cap,
                    found: (4000.0 - 10.0 * cap) as u64,
                    not_found: 1000,
                    p50_latency_micros: Some(20.0 + cap / 10.0),
                    p99_latency_micros: Some(100.0 + cap),
                }),
                cumulative_ingest_mb_per_sec: ingest * 0.9,
                cumulative_compaction_mb_per_sec: ingest * 1.4,
            }
        })
        .collect();
    Report {
        schema_version: SCHEMA_VERSION,
        tool: format!("ebb-bench {}", env!("CARGO_PKG_VERSION")),
        engine: engine.to_string(),
        started_unix_secs: 0.0,
        command_line: vec!["--benchmarks=fillrandom".into()],
        seed: 1000,
        db_path: "/tmp/x".into(),
        flags: BTreeMap::from([(
            "num".to_string(),
            FlagValue { value: serde_json::Value::from(1000), explicit: true },
        )]),
        effective_options: BTreeMap::new(),
        results: vec![BenchResult {
            name: "fillrandom".into(),
            skipped: false,
            threads: 1,
            ops: 1000,
            elapsed_secs: seconds as f64,
            micros_per_op: 1.0,
            ops_per_sec: 1000.0,
            bytes: 100_000,
            mb_per_sec: Some(0.1),
            message: String::new(),
            latency: BTreeMap::from([(
                "write".to_string(),
                LatencySummary { count: 1000, avg: 1.0, p50: 1.0, p95: 2.0, p99: 3.0, p999: 4.0, max: 5 },
            )]),
            burst: None,
            memory: None,
            transactions: None,
            range_deletions: 0,
            readers: Some(ReadersSummary {
                threads: 2,
                ops: 3000 * seconds as u64,
                elapsed_secs: seconds as f64,
                ops_per_sec: 3000.0,
                found: 2000 * seconds as u64,
                not_found: 1000 * seconds as u64,
                latency: Some(LatencySummary {
                    count: 3000 * seconds as u64,
                    avg: 30.0,
                    p50: 25.0,
                    p95: 150.0,
                    p99: 250.0,
                    p999: 400.0,
                    max: 900,
                }),
            }),
            intervals,
        }],
        open_micros: Vec::new(),
    }
}
