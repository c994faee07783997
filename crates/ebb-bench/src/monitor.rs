//! The interval monitor: a thread beside the client threads of one benchmark
//! that, on its own clock, samples the engine's metrics into the JSON series,
//! prints db_bench's per-thread progress lines and the engine's stats text
//! (`--stats_interval_seconds`, `--stats_per_interval`), appends rows to
//! `--report_file` and moves the progress bar. The `--readers` threads beside
//! a benchmark have counters of their own, sampled into each interval's
//! `reads` apart from the benchmark's own operations.
//!
//! db_bench prints its interval stats from inside the client threads, every
//! 1000 operations at most; a separate thread keeps printing while writers
//! sleep (idle phases of a burst run, a low sine cap).

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::engine::{Engine, EngineMetrics};
use crate::error::{BenchError, Result};
use crate::progress::Progress;
use crate::report::{IntervalReads, IntervalSample};
use crate::shape::Schedule;
use crate::stats::{IntervalTally, LiveCounters};
use crate::timefmt;

const MB: f64 = 1048576.0;
const TICK: Duration = Duration::from_millis(100);

/// `--report_file` in db_bench's format: `secs_elapsed,interval_qps`, where
/// `interval_qps` is the number of operations in the interval (as db_bench's
/// `ReporterAgent` writes it; equal to ops/s for 1-second intervals).
#[derive(Debug)]
pub struct ReportCsv {
    file: File,
    path: PathBuf,
    interval_secs: u64,
}

impl ReportCsv {
    /// Creates (truncates) the file and writes the header.
    pub fn create(path: &Path, interval_secs: u64) -> Result<ReportCsv> {
        let mut file = File::create(path)
            .map_err(|e| BenchError::new(format!("cannot create report file {}: {e}", path.display())))?;
        writeln!(file, "secs_elapsed,interval_qps")
            .map_err(|e| BenchError::new(format!("cannot write report file {}: {e}", path.display())))?;
        Ok(ReportCsv { file, path: path.to_path_buf(), interval_secs })
    }

    fn row(&mut self, secs: u64, ops: u64) -> Result<()> {
        writeln!(self.file, "{secs},{ops}")
            .and_then(|()| self.file.flush())
            .map_err(|e| BenchError::new(format!("cannot write report file {}: {e}", self.path.display())))
    }
}

/// What the monitor watches and does.
pub struct Monitor<'a> {
    /// The engine.
    pub engine: &'a dyn Engine,
    /// One entry per client thread.
    pub live: Vec<Arc<LiveCounters>>,
    /// One entry per `--readers` thread; empty without them.
    pub readers: Vec<Arc<LiveCounters>>,
    /// Benchmark start.
    pub start: Instant,
    /// Engine metrics at the start.
    pub base: EngineMetrics,
    /// The write cap, for the series.
    pub schedule: &'a Schedule,
    /// Seconds between series samples; `None` = no series.
    pub sample_secs: Option<f64>,
    /// `--stats_interval_seconds` (0 = off).
    pub stats_interval_secs: u64,
    /// `--stats_per_interval`.
    pub stats_per_interval: bool,
    /// `--report_file` writer.
    pub report: Option<ReportCsv>,
    /// The progress bar.
    pub progress: &'a Progress,
}

struct Prev {
    t: f64,
    metrics: EngineMetrics,
    ops: u64,
}

/// What the threads of `live` did since the last call.
fn take_tallies(live: &[Arc<LiveCounters>]) -> IntervalTally {
    let mut all = IntervalTally::default();
    for l in live {
        let mut mine = l.interval.lock();
        all.merge(&mine);
        *mine = IntervalTally::default();
    }
    all
}

impl Monitor<'_> {
    fn total_ops(&self) -> u64 {
        self.live.iter().map(|l| l.ops.load(Ordering::Relaxed)).sum()
    }

    /// Whether the `--readers` threads read since the last sample.
    fn reads_pending(&self) -> bool {
        self.readers.iter().any(|l| l.interval.lock().hist.count() > 0)
    }

    /// The `--readers` threads' reads since the last call; `None` without readers.
    fn take_reads(&self, dt: f64) -> Option<IntervalReads> {
        if self.readers.is_empty() {
            return None;
        }
        // A reader adds one latency sample per read, so the tally's count is
        // the interval's reads, taken under the same lock as its found reads.
        let tally = take_tallies(&self.readers);
        let (ops, lat) = (tally.hist.count(), &tally.hist);
        Some(IntervalReads {
            ops,
            ops_per_sec: ops as f64 / dt,
            found: tally.found,
            not_found: ops - tally.found,
            p50_latency_micros: (ops > 0).then(|| lat.percentile(50.0)),
            p99_latency_micros: (ops > 0).then(|| lat.percentile(99.0)),
        })
    }

    fn sample(&self, prev: &Prev, t: f64, metrics: &EngineMetrics, ops: u64) -> IntervalSample {
        let dt = (t - prev.t).max(1e-9);
        let d = |now: u64, before: u64| now.saturating_sub(before) as f64;
        let hits = d(metrics.block_cache_hits, prev.metrics.block_cache_hits);
        let misses = d(metrics.block_cache_misses, prev.metrics.block_cache_misses);
        let since = t.max(1e-9);
        let lat = take_tallies(&self.live).hist;
        IntervalSample {
            t_secs: t,
            interval_secs: dt,
            ops: ops - prev.ops,
            ops_per_sec: (ops - prev.ops) as f64 / dt,
            ingest_mb_per_sec: d(metrics.user_bytes_written, prev.metrics.user_bytes_written) / MB / dt,
            cap_mb_per_sec: self.schedule.average_rate(prev.t, t).map(|r| r / MB),
            flush_mb_per_sec: d(metrics.flush_bytes_written, prev.metrics.flush_bytes_written) / MB / dt,
            compaction_mb_per_sec: d(metrics.compaction_bytes_written, prev.metrics.compaction_bytes_written) / MB / dt,
            stall_percent: (d(metrics.stall_micros, prev.metrics.stall_micros) / (dt * 1e6) * 100.0).min(100.0),
            l0_files: metrics.files_per_level.first().copied().unwrap_or(0),
            pending_compaction_bytes: metrics.pending_compaction_bytes,
            compaction_enabled: metrics.compaction_enabled,
            block_cache_hit_rate: (hits + misses > 0.0).then(|| hits / (hits + misses)),
            p99_latency_micros: (lat.count() > 0).then(|| lat.percentile(99.0)),
            reads: self.take_reads(dt),
            cumulative_ingest_mb_per_sec: d(metrics.user_bytes_written, self.base.user_bytes_written) / MB / since,
            cumulative_compaction_mb_per_sec: (d(metrics.flush_bytes_written, self.base.flush_bytes_written)
                + d(metrics.compaction_bytes_written, self.base.compaction_bytes_written))
                / MB
                / since,
        }
    }

    fn print_stats(&self, last: &mut (f64, Vec<u64>), t: f64) {
        let mut text = String::new();
        let now = timefmt::stats_time(timefmt::unix_now());
        let dt = (t - last.0).max(1e-9);
        for (id, l) in self.live.iter().enumerate() {
            let done = l.ops.load(Ordering::Relaxed);
            let before = last.1.get(id).copied().unwrap_or(0);
            text.push_str(&format!(
                "{now} ... thread {id}: ({},{done}) ops and ({:.1},{:.1}) ops/second in ({dt:.6},{t:.6}) seconds\n",
                done - before,
                (done - before) as f64 / dt,
                done as f64 / t.max(1e-9),
            ));
        }
        if self.stats_per_interval {
            let name = format!("{}.stats", self.engine.name());
            if let Some(stats) = self.engine.property(&name) {
                text.push_str(&stats);
                if !stats.ends_with('\n') {
                    text.push('\n');
                }
            }
        }
        self.progress.eprint(&text);
        *last = (t, self.live.iter().map(|l| l.ops.load(Ordering::Relaxed)).collect());
    }

    /// Runs until `stop` is signalled (or its sender dropped); returns the series.
    pub fn run(mut self, stop: Receiver<()>) -> Result<Vec<IntervalSample>> {
        let mut series = Vec::new();
        let mut prev = Prev { t: 0.0, metrics: self.base.clone(), ops: 0 };
        let mut next_sample = self.sample_secs;
        let mut next_stats = (self.stats_interval_secs > 0).then_some(self.stats_interval_secs as f64);
        let mut stats_last: (f64, Vec<u64>) = (0.0, vec![0; self.live.len()]);
        let mut next_report = self.report.as_ref().map(|r| r.interval_secs as f64);
        let mut report_ops = 0u64;
        let mut result = Ok(());
        loop {
            let stopped = !matches!(stop.recv_timeout(TICK), Err(RecvTimeoutError::Timeout));
            let t = self.start.elapsed().as_secs_f64();
            let ops = self.total_ops();
            self.progress.update(ops, t);
            if let Some(at) = next_stats {
                if t >= at {
                    self.print_stats(&mut stats_last, t);
                    next_stats = Some(at + self.stats_interval_secs as f64);
                }
            }
            if let (Some(at), Some(report)) = (next_report, self.report.as_mut()) {
                if t >= at {
                    let secs = (t + 0.5) as u64;
                    if let Err(e) = report.row(secs, ops - report_ops) {
                        result = Err(e);
                        next_report = None;
                    } else {
                        report_ops = ops;
                        next_report = Some(at + report.interval_secs as f64);
                    }
                }
            }
            if let Some(at) = next_sample {
                // A short benchmark still gets one sample, and the series
                // ends with every operation: the tail after the last sample
                // is a sample of its own when it is long or holds any.
                let final_partial =
                    stopped && (t - prev.t > 0.05 || series.is_empty() || ops != prev.ops || self.reads_pending());
                if t >= at || final_partial {
                    let metrics = self.engine.metrics();
                    let s = self.sample(&prev, t, &metrics, ops);
                    series.push(s);
                    prev = Prev { t, metrics, ops };
                    next_sample = self.sample_secs.map(|dt| at + dt);
                }
            }
            if stopped {
                break;
            }
        }
        result.map(|()| series)
    }
}
