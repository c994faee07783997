//! A lock-free latency histogram with RocksDB's percentile summary
//! (`HistogramImpl`): exponentially spaced buckets, atomically counted.

use std::sync::atomic::{AtomicU64, Ordering};

const BUCKETS: usize = 160;

/// Upper bound (inclusive) of each bucket: 1, 2, ... growing by about 1.15x.
fn bucket_limits() -> &'static [u64; BUCKETS] {
    static LIMITS: std::sync::OnceLock<[u64; BUCKETS]> = std::sync::OnceLock::new();
    LIMITS.get_or_init(|| {
        let mut l = [0u64; BUCKETS];
        let mut v = 1.0f64;
        for slot in l.iter_mut() {
            *slot = v.round() as u64;
            v = (v * 1.15).max(v + 1.0);
        }
        l[BUCKETS - 1] = u64::MAX;
        l
    })
}

/// Counts of values (microseconds, bytes) in exponential buckets.
pub struct Histogram {
    buckets: [AtomicU64; BUCKETS],
    count: AtomicU64,
    sum: AtomicU64,
    max: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            max: AtomicU64::new(0),
        }
    }
}

/// A percentile summary of a [`Histogram`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HistogramSummary {
    /// Values recorded.
    pub count: u64,
    /// Sum of the values.
    pub sum: u64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest value.
    pub max: u64,
}

impl Histogram {
    /// Records one value.
    pub fn record(&self, value: u64) {
        let limits = bucket_limits();
        let i = limits.partition_point(|l| *l < value).min(BUCKETS - 1);
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
        self.max.fetch_max(value, Ordering::Relaxed);
    }

    /// The value below which `pct` percent of the recorded values fall,
    /// interpolated within its bucket (as RocksDB's `Percentile`).
    pub fn percentile(&self, pct: f64) -> f64 {
        let total = self.count.load(Ordering::Relaxed);
        if total == 0 {
            return 0.0;
        }
        let limits = bucket_limits();
        let threshold = total as f64 * pct / 100.0;
        let mut cumulative = 0.0;
        for (i, b) in self.buckets.iter().enumerate() {
            let n = b.load(Ordering::Relaxed) as f64;
            if cumulative + n >= threshold && n > 0.0 {
                let lo = if i == 0 { 0.0 } else { limits[i - 1] as f64 };
                let hi = (limits[i] as f64).min(self.max.load(Ordering::Relaxed) as f64).max(lo);
                return lo + (hi - lo) * ((threshold - cumulative) / n);
            }
            cumulative += n;
        }
        self.max.load(Ordering::Relaxed) as f64
    }

    /// Count, sum, percentiles and max.
    pub fn summary(&self) -> HistogramSummary {
        HistogramSummary {
            count: self.count.load(Ordering::Relaxed),
            sum: self.sum.load(Ordering::Relaxed),
            p50: self.percentile(50.0),
            p95: self.percentile(95.0),
            p99: self.percentile(99.0),
            max: self.max.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_uniform_range() {
        let h = Histogram::default();
        for v in 1..=10_000u64 {
            h.record(v);
        }
        let s = h.summary();
        assert_eq!((s.count, s.max), (10_000, 10_000));
        assert_eq!(s.sum, 10_000 * 10_001 / 2);
        // Bucket interpolation is within one bucket (15 %) of the truth.
        assert!((s.p50 - 5000.0).abs() < 750.0, "{s:?}");
        assert!((s.p99 - 9900.0).abs() < 1500.0, "{s:?}");
        assert!(s.p50 < s.p95 && s.p95 <= s.p99);
    }

    #[test]
    fn empty_and_single_value() {
        let h = Histogram::default();
        assert_eq!(h.summary(), HistogramSummary::default());
        h.record(42);
        let s = h.summary();
        assert!(s.p50 <= 42.0 && s.p99 <= 42.0 && s.max == 42, "{s:?}");
    }
}
