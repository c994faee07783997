//! The figures an experiment reports, each taken from one benchmark's result
//! in a run's JSON report (plus the database's size on disk after the run),
//! and the median / min / max summary over repetitions.

use crate::bail;
use crate::error::Result;
use crate::report::{BenchResult, Report};

/// A figure of one benchmark in one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Figure {
    /// Operations per second.
    OpsPerSec,
    /// MB/s (MB = 2^20 bytes) of keys and values moved.
    MbPerSec,
    /// Microseconds per operation per thread (db_bench's figure).
    MicrosPerOp,
    /// Seconds the benchmark took.
    ElapsedSecs,
    /// Median latency of the benchmark's main operation type (µs).
    P50Micros,
    /// 95th percentile latency (µs).
    P95Micros,
    /// 99th percentile latency (µs).
    P99Micros,
    /// 99.9th percentile latency (µs).
    P999Micros,
    /// Mean latency (µs).
    AvgMicros,
    /// Largest latency (µs).
    MaxMicros,
    /// (Flush + compaction bytes written) / user bytes written during the benchmark.
    WriteAmp,
    /// Share of the benchmark's time writers were stalled (percent).
    StallPct,
    /// Size of the database directory after the run (MB).
    DbSizeMb,
    /// Size on disk after the run / (num × (key_size + value_size)).
    SpaceAmp,
    /// The `--readers` threads' reads per second beside the benchmark.
    ReadOpsPerSec,
    /// Their 99th percentile read latency (µs).
    ReadP99Micros,
}

impl Figure {
    /// Every figure, in the order tables show them.
    pub const ALL: &'static [Figure] = &[
        Figure::OpsPerSec,
        Figure::MbPerSec,
        Figure::MicrosPerOp,
        Figure::ElapsedSecs,
        Figure::P50Micros,
        Figure::P95Micros,
        Figure::P99Micros,
        Figure::P999Micros,
        Figure::AvgMicros,
        Figure::MaxMicros,
        Figure::WriteAmp,
        Figure::StallPct,
        Figure::DbSizeMb,
        Figure::SpaceAmp,
        Figure::ReadOpsPerSec,
        Figure::ReadP99Micros,
    ];

    /// The name files and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Figure::OpsPerSec => "ops_per_sec",
            Figure::MbPerSec => "mb_per_sec",
            Figure::MicrosPerOp => "micros_per_op",
            Figure::ElapsedSecs => "elapsed_secs",
            Figure::P50Micros => "p50_micros",
            Figure::P95Micros => "p95_micros",
            Figure::P99Micros => "p99_micros",
            Figure::P999Micros => "p999_micros",
            Figure::AvgMicros => "avg_micros",
            Figure::MaxMicros => "max_micros",
            Figure::WriteAmp => "write_amp",
            Figure::StallPct => "stall_pct",
            Figure::DbSizeMb => "db_size_mb",
            Figure::SpaceAmp => "space_amp",
            Figure::ReadOpsPerSec => "read_ops_per_sec",
            Figure::ReadP99Micros => "read_p99_micros",
        }
    }

    /// Looks a figure up by name; the error lists the known names.
    pub fn parse(name: &str) -> Result<Figure> {
        match Figure::ALL.iter().find(|f| f.name() == name) {
            Some(f) => Ok(*f),
            None => {
                let known: Vec<&str> = Figure::ALL.iter().map(|f| f.name()).collect();
                bail!("unknown figure {name:?} (known: {})", known.join(", "))
            }
        }
    }

    /// True for throughput figures, where more is better.
    pub fn higher_is_better(self) -> bool {
        matches!(self, Figure::OpsPerSec | Figure::MbPerSec | Figure::ReadOpsPerSec)
    }

    /// The figure for `result`, a benchmark of `report`, after which the
    /// database took `db_bytes` on disk; `None` where it does not apply
    /// (MB/s without bytes, latencies without operations, write
    /// amplification without writes, read figures without `--readers`).
    pub fn of(self, report: &Report, result: &BenchResult, db_bytes: u64) -> Option<f64> {
        let latency = || result.latency.values().max_by_key(|l| l.count).filter(|l| l.count > 0);
        let interval_sum = |f: fn(&crate::report::IntervalSample) -> f64| -> f64 {
            result.intervals.iter().map(|i| f(i) * i.interval_secs).sum()
        };
        let value = match self {
            Figure::OpsPerSec => Some(result.ops_per_sec),
            Figure::MbPerSec => result.mb_per_sec,
            Figure::MicrosPerOp => Some(result.micros_per_op),
            Figure::ElapsedSecs => Some(result.elapsed_secs),
            Figure::P50Micros => latency().map(|l| l.p50),
            Figure::P95Micros => latency().map(|l| l.p95),
            Figure::P99Micros => latency().map(|l| l.p99),
            Figure::P999Micros => latency().map(|l| l.p999),
            Figure::AvgMicros => latency().map(|l| l.avg),
            Figure::MaxMicros => latency().map(|l| l.max as f64),
            Figure::WriteAmp => {
                let ingest = interval_sum(|i| i.ingest_mb_per_sec);
                let written = interval_sum(|i| i.flush_mb_per_sec + i.compaction_mb_per_sec);
                (ingest > 0.0).then(|| written / ingest)
            }
            Figure::StallPct => {
                let secs: f64 = result.intervals.iter().map(|i| i.interval_secs).sum();
                (secs > 0.0).then(|| interval_sum(|i| i.stall_percent) / secs)
            }
            Figure::DbSizeMb => Some(db_bytes as f64 / 1048576.0),
            Figure::SpaceAmp => {
                let flag = |name: &str| report.flags.get(name).and_then(|v| v.value.as_f64()).unwrap_or(0.0);
                let raw = flag("num") * (flag("key_size") + flag("value_size"));
                (raw > 0.0).then(|| db_bytes as f64 / raw)
            }
            Figure::ReadOpsPerSec => result.readers.as_ref().map(|r| r.ops_per_sec),
            Figure::ReadP99Micros => result.readers.as_ref().and_then(|r| r.latency.as_ref()).map(|l| l.p99),
        };
        value.filter(|v| v.is_finite())
    }
}

/// Median, min and max of some samples.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Summary {
    /// Samples.
    pub n: usize,
    /// Median (the mean of the middle two for an even count).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Summary {
    /// The summary of `samples`; `None` when there are none.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        let n = s.len();
        let median = if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 };
        Some(Summary { n, median, min: s[0], max: s[n - 1] })
    }
}

/// A figure as tables print it: three significant digits or whole numbers.
pub fn format_number(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 || (v.fract() == 0.0 && a < 1e15) {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::synthetic_report;

    #[test]
    fn figures_come_from_the_report() {
        let r = synthetic_report("ebb", 10);
        let b = &r.results[0];
        assert_eq!(Figure::OpsPerSec.of(&r, b, 0), Some(1000.0));
        assert_eq!(Figure::P99Micros.of(&r, b, 0), Some(3.0));
        let wa = Figure::WriteAmp.of(&r, b, 0).unwrap();
        assert!(wa > 1.0, "{wa}");
        assert_eq!(Figure::StallPct.of(&r, b, 0), Some(0.0));
        // num = 1000 in the synthetic report, key 16 + value 100 bytes by default flags
        // are absent there, so space amplification has no raw size to divide by.
        assert_eq!(Figure::SpaceAmp.of(&r, b, 1 << 20), None);
        assert_eq!(Figure::DbSizeMb.of(&r, b, 1 << 20), Some(1.0));
        // The synthetic run had two --readers threads; without them there is no read figure.
        assert_eq!(Figure::ReadOpsPerSec.of(&r, b, 0), Some(3000.0));
        assert_eq!(Figure::ReadP99Micros.of(&r, b, 0), Some(250.0));
        let alone = crate::report::BenchResult { readers: None, ..b.clone() };
        assert_eq!(Figure::ReadOpsPerSec.of(&r, &alone, 0), None);
        assert_eq!(Figure::ReadP99Micros.of(&r, &alone, 0), None);
    }

    #[test]
    fn names_round_trip_and_unknown_names_list_the_known() {
        for f in Figure::ALL {
            assert_eq!(Figure::parse(f.name()).unwrap(), *f);
        }
        let e = Figure::parse("throughput").unwrap_err().to_string();
        assert!(e.contains("throughput") && e.contains("ops_per_sec"), "{e}");
    }

    #[test]
    fn summaries() {
        let s = Summary::of(&[3.0, 1.0, 2.0, 10.0]).unwrap();
        assert_eq!((s.n, s.median, s.min, s.max), (4, 2.5, 1.0, 10.0));
        assert_eq!(Summary::of(&[]), None);
    }
}
