//! Key distributions: the YCSB generators the custom mixes use (uniform,
//! zipfian, latest, hotspot) and the pieces of db_bench's `mixgraph` (Cao et
//! al., FAST'20): generalized Pareto and power-law inversions, the two-term
//! exponential key-range model and the query-type decider.

use crate::error::Result;
use crate::rng::{splitmix64, Rng64};

/// YCSB's zipfian generator over `[0, n)` (Gray et al., "Quickly generating
/// billion-record synthetic databases"): item 0 is the most popular, item `i`
/// has probability proportional to `1 / (i+1)^theta`.
#[derive(Debug, Clone)]
pub struct Zipfian {
    n: u64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    half_pow_theta: f64,
}

impl Zipfian {
    /// A generator over `n` items (at least 1) with skew `theta` in (0, 1).
    pub fn new(n: u64, theta: f64) -> Result<Zipfian> {
        if !(theta > 0.0 && theta < 1.0) {
            crate::bail!("zipf_theta must be strictly between 0 and 1, got {theta}");
        }
        let n = n.max(1);
        let zeta = |count: u64| -> f64 { (1..=count).map(|i| 1.0 / (i as f64).powf(theta)).sum() };
        let zetan = zeta(n);
        let zeta2 = zeta(2.min(n));
        let alpha = 1.0 / (1.0 - theta);
        let eta = if n > 1 { (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan) } else { 0.0 };
        Ok(Zipfian { n, alpha, zetan, eta, half_pow_theta: 0.5f64.powf(theta) })
    }

    /// The number of items.
    pub fn items(&self) -> u64 {
        self.n
    }

    /// The next rank in `[0, n)`; 0 is the hottest.
    pub fn next(&self, rng: &mut Rng64) -> u64 {
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + self.half_pow_theta {
            return 1.min(self.n - 1);
        }
        let rank = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        rank.min(self.n - 1)
    }
}

/// Which keys a custom mix reads, updates and deletes.
#[derive(Debug, Clone)]
pub enum KeyChooser {
    /// Uniform over the keys.
    Uniform,
    /// Zipfian ranks scattered over the key space by a hash (YCSB's
    /// `ScrambledZipfianGenerator`), so the hot keys are not neighbours.
    Zipfian(Zipfian),
    /// Zipfian distance back from the newest key (YCSB's
    /// `SkewedLatestGenerator`): recent inserts are hot. The skew is computed
    /// over the initial key count; ranks beyond the newest key clamp to key 0.
    Latest(Zipfian),
    /// A hot set of `hot_fraction` of the keys (the lowest numbers) receiving
    /// `hot_ops_fraction` of the operations, uniform within each set (YCSB's
    /// `HotspotIntegerGenerator`).
    Hotspot {
        /// Fraction of the key space that is hot.
        hot_fraction: f64,
        /// Fraction of the operations that go to the hot set.
        hot_ops_fraction: f64,
    },
}

impl KeyChooser {
    /// Parses `--key_distribution` with its parameters.
    pub fn from_name(name: &str, n: u64, zipf_theta: f64, hot_fraction: f64, hot_ops_fraction: f64) -> Result<Self> {
        match name {
            "uniform" => Ok(KeyChooser::Uniform),
            "zipfian" => Ok(KeyChooser::Zipfian(Zipfian::new(n, zipf_theta)?)),
            "latest" => Ok(KeyChooser::Latest(Zipfian::new(n, zipf_theta)?)),
            "hotspot" => {
                if !(0.0..=1.0).contains(&hot_fraction) || !(0.0..=1.0).contains(&hot_ops_fraction) {
                    crate::bail!("hotspot_fraction and hotspot_ops_fraction must be between 0 and 1");
                }
                Ok(KeyChooser::Hotspot { hot_fraction, hot_ops_fraction })
            }
            other => crate::bail!("unknown key_distribution {other:?} (expected uniform, zipfian, latest or hotspot)"),
        }
    }

    /// A key number in `[0, keys)`; `keys` is the current key count (it grows with inserts).
    pub fn next(&self, rng: &mut Rng64, keys: u64) -> u64 {
        let keys = keys.max(1);
        match self {
            KeyChooser::Uniform => rng.below(keys),
            KeyChooser::Zipfian(z) => splitmix64(z.next(rng)) % keys,
            KeyChooser::Latest(z) => (keys - 1).saturating_sub(z.next(rng)),
            KeyChooser::Hotspot { hot_fraction, hot_ops_fraction } => {
                let hot = ((keys as f64 * hot_fraction) as u64).clamp(1, keys);
                if rng.next_f64() < *hot_ops_fraction || hot == keys {
                    rng.below(hot)
                } else {
                    hot + rng.below(keys - hot)
                }
            }
        }
    }
}

/// db_bench `ParetoCdfInversion`: the inverse CDF of the generalized Pareto
/// distribution `f(x) = (1/σ)(1 + k(x−θ)/σ)^−(1/k+1)`, rounded up.
pub fn pareto_cdf_inversion(u: f64, theta: f64, k: f64, sigma: f64) -> i64 {
    let ret = if k == 0.0 { theta - sigma * u.ln() } else { theta + sigma * (u.powf(-k) - 1.0) / k };
    saturating_ceil(ret)
}

/// db_bench `PowerCdfInversion`: the inverse of the power CDF `y = a·x^b`, rounded up.
pub fn power_cdf_inversion(u: f64, a: f64, b: f64) -> i64 {
    saturating_ceil((u / a).powf(1.0 / b))
}

fn saturating_ceil(x: f64) -> i64 {
    if x.is_nan() {
        0
    } else {
        x.ceil().clamp(i64::MIN as f64, i64::MAX as f64) as i64
    }
}

/// A pseudo-random number drawn from `seed` alone (db_bench builds a fresh
/// `Random64(seed)` and takes its first output; we use SplitMix64 instead).
pub fn seeded_draw(seed: i64) -> u64 {
    splitmix64(seed as u64)
}

#[derive(Debug, Clone, Copy)]
struct KeyRange {
    start: i64,
    access: i64,
}

/// db_bench `GenerateTwoTermExpKeys`: the key space split into `keyrange_num`
/// ranges whose hotness follows `a·e^(b·x) + c·e^(d·x)`, shuffled so that hot
/// ranges are spread over the key space.
#[derive(Debug, Clone)]
pub struct TwoTermExpKeys {
    rand_max: i64,
    range_size: i64,
    ranges: Vec<KeyRange>,
}

impl TwoTermExpKeys {
    /// Builds the ranges for `total_keys` keys (`InitiateExpDistribution`).
    pub fn new(total_keys: i64, keyrange_num: i64, a: f64, b: f64, c: f64, d: f64) -> Result<Self> {
        let num = keyrange_num.max(1);
        let range_size = total_keys / num;
        if range_size < 1 {
            crate::bail!("keyrange_num ({num}) must not exceed num ({total_keys})");
        }
        let mut amplify: i64 = 0;
        let mut start: i64 = 0;
        let mut ranges = Vec::with_capacity(num as usize);
        for pfx in (1..=num).rev() {
            let mut p = a * (b * pfx as f64).exp() + c * (d * pfx as f64).exp();
            if p < 1e-16 {
                p = 0.0;
            }
            if amplify == 0 && p > 0.0 {
                amplify = (1.0 / p).floor() as i64 + 1;
            }
            let access = if p <= 0.0 { 0 } else { (amplify as f64 * p).floor() as i64 };
            ranges.push(KeyRange { start, access });
            start += access;
        }
        let rand_max = start;
        if rand_max <= 0 {
            crate::bail!("keyrange_dist_a/b/c/d give every key range zero probability");
        }
        // Shuffle, seeded only by the distribution (db_bench: Random64(keyrange_rand_max_)).
        let mut rng = Rng64::new(rand_max as u64);
        for i in 0..ranges.len() {
            let pos = rng.below(ranges.len() as u64) as usize;
            ranges.swap(i, pos);
        }
        let mut offset = 0;
        for r in &mut ranges {
            r.start = offset;
            offset += r.access;
        }
        Ok(TwoTermExpKeys { rand_max, range_size, ranges })
    }

    /// db_bench `DistGetKeyID`: picks a range by hotness, then a key inside it
    /// (power-law within the range when `key_dist_a` and `key_dist_b` are set).
    pub fn key_id(&self, ini_rand: i64, key_dist_a: f64, key_dist_b: f64) -> i64 {
        let r = ini_rand.rem_euclid(self.rand_max);
        let (mut lo, mut hi) = (0usize, self.ranges.len());
        while lo + 1 < hi {
            let mid = lo + (hi - lo) / 2;
            if r < self.ranges[mid].start {
                hi = mid;
            } else {
                lo = mid;
            }
        }
        let offset = if key_dist_a == 0.0 || key_dist_b == 0.0 {
            ini_rand.rem_euclid(self.range_size)
        } else {
            let u = ini_rand.rem_euclid(self.range_size) as f64 / self.range_size as f64;
            let seed = power_cdf_inversion(u, key_dist_a, key_dist_b);
            (seeded_draw(seed) % self.range_size as u64) as i64
        };
        self.range_size * lo as i64 + offset
    }
}

/// db_bench `QueryDecider`: maps a number to a query type by the ratios,
/// over 1000 slots.
#[derive(Debug, Clone)]
pub struct QueryDecider {
    bounds: Vec<i64>,
    range: i64,
}

impl QueryDecider {
    /// Slots for each ratio (normalised by their sum).
    pub fn new(ratios: &[f64]) -> Result<QueryDecider> {
        let sum: f64 = ratios.iter().sum();
        if sum.is_nan() || sum <= 0.0 || ratios.iter().any(|r| *r < 0.0 || !r.is_finite()) {
            crate::bail!("query ratios must be non-negative with a positive sum, got {ratios:?}");
        }
        let mut range = 0i64;
        let mut bounds = Vec::with_capacity(ratios.len());
        for r in ratios {
            range += (1000.0 * (r / sum)).ceil() as i64;
            bounds.push(range);
        }
        Ok(QueryDecider { bounds, range })
    }

    /// The query type (index into the ratios) for `rand_num`.
    pub fn query_type(&self, rand_num: i64) -> usize {
        let pos = rand_num.unsigned_abs() % self.range as u64;
        self.bounds.iter().position(|b| (pos as i64) < *b).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(chooser: &KeyChooser, keys: u64, draws: usize) -> Vec<u64> {
        let mut rng = Rng64::new(42);
        let mut c = vec![0u64; keys as usize];
        for _ in 0..draws {
            c[chooser.next(&mut rng, keys) as usize] += 1;
        }
        c
    }

    #[test]
    fn zipfian_top_key_frequency_matches_theory() {
        let n = 1000u64;
        let z = Zipfian::new(n, 0.99).unwrap();
        let zetan: f64 = (1..=n).map(|i| 1.0 / (i as f64).powf(0.99)).sum();
        let mut rng = Rng64::new(1);
        let draws = 200_000;
        let mut top = 0;
        let mut second = 0;
        for _ in 0..draws {
            match z.next(&mut rng) {
                0 => top += 1,
                1 => second += 1,
                _ => {}
            }
        }
        let expected = 1.0 / zetan;
        let got = top as f64 / draws as f64;
        assert!((got - expected).abs() < 0.01, "top key frequency {got}, theory {expected}");
        assert!(top > second, "rank 0 must be hotter than rank 1");
    }

    #[test]
    fn scrambled_zipfian_is_skewed_and_in_range() {
        let c = counts(&KeyChooser::from_name("zipfian", 1000, 0.99, 0.0, 0.0).unwrap(), 1000, 100_000);
        let max = *c.iter().max().unwrap();
        // Uniform would give 100 per key; the hottest zipfian key gets ~13%.
        assert!(max > 5_000, "hottest key got {max}");
    }

    #[test]
    fn latest_prefers_the_newest_keys() {
        let chooser = KeyChooser::from_name("latest", 1000, 0.99, 0.0, 0.0).unwrap();
        let c = counts(&chooser, 2000, 100_000);
        let newest = c[1999];
        let oldest_half: u64 = c[..1000].iter().sum();
        assert!(newest > 10_000, "newest key got {newest}");
        assert!(oldest_half < 10_000, "old keys got {oldest_half}");
    }

    #[test]
    fn hotspot_sends_the_ops_fraction_to_the_hot_set() {
        let chooser = KeyChooser::from_name("hotspot", 1000, 0.99, 0.2, 0.8).unwrap();
        let c = counts(&chooser, 1000, 100_000);
        let hot: u64 = c[..200].iter().sum();
        assert!((hot as f64 / 100_000.0 - 0.8).abs() < 0.02, "hot share {hot}");
    }

    #[test]
    fn bad_distribution_is_named() {
        let e = KeyChooser::from_name("pareto", 10, 0.99, 0.2, 0.8).unwrap_err();
        assert!(e.message().contains("pareto"));
        assert!(Zipfian::new(10, 1.5).is_err());
    }

    #[test]
    fn pareto_inversion_matches_db_bench_mean_value_size() {
        // smalldatum: value_k=0.2615 value_sigma=25.45 gives ~35-byte values on average.
        let mut rng = Rng64::new(3);
        let n = 100_000;
        let mut sum = 0i64;
        for _ in 0..n {
            let v = pareto_cdf_inversion(rng.next_f64().max(1e-12), 0.0, 0.2615, 25.45).clamp(10, 1024);
            sum += v;
        }
        let mean = sum as f64 / n as f64;
        assert!((25.0..50.0).contains(&mean), "mean value size {mean}");
    }

    #[test]
    fn query_decider_follows_ratios() {
        let q = QueryDecider::new(&[0.83, 0.14, 0.03]).unwrap();
        let mut c = [0usize; 3];
        for i in 0..100_000 {
            c[q.query_type(i)] += 1;
        }
        assert!((c[0] as f64 / 100_000.0 - 0.83).abs() < 0.01, "{c:?}");
        assert!(QueryDecider::new(&[0.0, 0.0]).is_err());
    }

    #[test]
    fn two_term_exp_keys_stay_in_range() {
        let g = TwoTermExpKeys::new(10_000, 30, 14.18, -2.917, 0.0164, -0.08082).unwrap();
        let mut rng = Rng64::new(9);
        for _ in 0..10_000 {
            let id = g.key_id(rng.below(10_000) as i64, 0.002312, 0.3467);
            assert!((0..10_000).contains(&id), "{id}");
        }
    }
}
