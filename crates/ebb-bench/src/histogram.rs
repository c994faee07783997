//! Latency histograms with RocksDB's bucket layout (`HistogramBucketMapper`:
//! 1, 2, then ×1.5 rounded to two significant digits) and its text form
//! (`HistogramStat::ToString`), with P95 added to the percentile line.

use std::fmt::Write as _;
use std::sync::OnceLock;

fn bucket_limits() -> &'static [u64] {
    static LIMITS: OnceLock<Vec<u64>> = OnceLock::new();
    LIMITS.get_or_init(|| {
        let mut v: Vec<u64> = vec![1, 2];
        let mut val = 2.0f64;
        loop {
            val *= 1.5;
            if val > u64::MAX as f64 {
                break;
            }
            let mut b = val as u64;
            let mut pow = 1u64;
            while b / 10 > 10 {
                b /= 10;
                pow *= 10;
            }
            v.push(b * pow);
        }
        v
    })
}

/// A histogram of microsecond latencies.
#[derive(Debug, Clone)]
pub struct Histogram {
    buckets: Vec<u64>,
    min: u64,
    max: u64,
    num: u64,
    sum: f64,
    sum_squares: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { buckets: vec![0; bucket_limits().len()], min: u64::MAX, max: 0, num: 0, sum: 0.0, sum_squares: 0.0 }
    }
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Histogram {
        Histogram::default()
    }

    /// Records one value.
    pub fn add(&mut self, value: u64) {
        let limits = bucket_limits();
        let idx = if value >= *limits.last().unwrap_or(&u64::MAX) {
            limits.len() - 1
        } else {
            limits.partition_point(|l| *l < value)
        };
        self.buckets[idx] += 1;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
        self.num += 1;
        self.sum += value as f64;
        self.sum_squares += (value as f64) * (value as f64);
    }

    /// Adds all of `other`'s samples.
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.num += other.num;
        self.sum += other.sum;
        self.sum_squares += other.sum_squares;
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.num
    }

    /// Smallest sample (0 when empty).
    pub fn min(&self) -> u64 {
        if self.num == 0 {
            0
        } else {
            self.min
        }
    }

    /// Largest sample.
    pub fn max(&self) -> u64 {
        self.max
    }

    /// Mean.
    pub fn average(&self) -> f64 {
        if self.num == 0 {
            0.0
        } else {
            self.sum / self.num as f64
        }
    }

    /// Standard deviation.
    pub fn std_dev(&self) -> f64 {
        if self.num == 0 {
            return 0.0;
        }
        let n = self.num as f64;
        let variance = (self.sum_squares * n - self.sum * self.sum) / (n * n);
        variance.max(0.0).sqrt()
    }

    /// The `p`th percentile, interpolated linearly inside its bucket as RocksDB does.
    pub fn percentile(&self, p: f64) -> f64 {
        let limits = bucket_limits();
        let threshold = self.num as f64 * (p / 100.0);
        let mut cumulative = 0u64;
        for (b, count) in self.buckets.iter().enumerate() {
            cumulative += count;
            if cumulative as f64 >= threshold && self.num > 0 {
                let left = if b == 0 { 0 } else { limits[b - 1] } as f64;
                let right = limits[b] as f64;
                let left_sum = cumulative - count;
                let pos = if *count != 0 { (threshold - left_sum as f64) / *count as f64 } else { 0.0 };
                let r = left + (right - left) * pos;
                return r.clamp(self.min() as f64, self.max as f64);
            }
        }
        self.max as f64
    }

    /// The median.
    pub fn median(&self) -> f64 {
        self.percentile(50.0)
    }

    /// RocksDB's text form.
    pub fn to_text(&self) -> String {
        let mut r = String::new();
        let _ = writeln!(r, "Count: {} Average: {:.4}  StdDev: {:.2}", self.num, self.average(), self.std_dev());
        let _ = writeln!(r, "Min: {}  Median: {:.4}  Max: {}", self.min(), self.median(), self.max);
        let _ = writeln!(
            r,
            "Percentiles: P50: {:.2} P75: {:.2} P95: {:.2} P99: {:.2} P99.9: {:.2} P99.99: {:.2}",
            self.percentile(50.0),
            self.percentile(75.0),
            self.percentile(95.0),
            self.percentile(99.0),
            self.percentile(99.9),
            self.percentile(99.99)
        );
        r.push_str("------------------------------------------------------\n");
        if self.num == 0 {
            return r;
        }
        let limits = bucket_limits();
        let mult = 100.0 / self.num as f64;
        let mut cumulative = 0u64;
        for (b, count) in self.buckets.iter().enumerate() {
            if *count == 0 {
                continue;
            }
            cumulative += count;
            let _ = write!(
                r,
                "{} {:>7}, {:>7} ] {:>8} {:>7.3}% {:>7.3}% ",
                if b == 0 { '[' } else { '(' },
                if b == 0 { 0 } else { limits[b - 1] },
                limits[b],
                count,
                mult * *count as f64,
                mult * cumulative as f64
            );
            let marks = (mult * *count as f64 / 5.0 + 0.5) as usize;
            r.push_str(&"#".repeat(marks));
            r.push('\n');
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_limits_follow_rocksdb() {
        let l = bucket_limits();
        assert_eq!(&l[..12], &[1, 2, 3, 4, 6, 10, 15, 22, 34, 51, 76, 110]);
        assert!(l.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn percentiles_are_ordered_and_bounded() {
        let mut h = Histogram::new();
        for v in 1..=1000u64 {
            h.add(v);
        }
        let p50 = h.percentile(50.0);
        let p99 = h.percentile(99.0);
        assert!((400.0..=600.0).contains(&p50), "{p50}");
        assert!(p99 > p50 && p99 <= 1000.0);
        assert_eq!(h.max(), 1000);
        assert_eq!(h.min(), 1);
        let text = h.to_text();
        assert!(text.starts_with("Count: 1000 Average: 500.5000"));
        assert!(text.contains("P95: ") && text.contains("P99.9: "));
    }

    #[test]
    fn merge_adds_counts() {
        let mut a = Histogram::new();
        let mut b = Histogram::new();
        a.add(5);
        b.add(500);
        a.merge(&b);
        assert_eq!(a.count(), 2);
        assert_eq!(a.max(), 500);
        assert_eq!(a.min(), 5);
    }
}
