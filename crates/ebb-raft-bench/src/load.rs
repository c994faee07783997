//! What the benchmarks write: entries and requests with values drawn from
//! a small pool of incompressible byte strings, keys from a fixed key
//! space; and latency summaries.

use ebb_raft::Request;

/// xorshift64*: a fast, seeded, dependency-free generator; the load is the
/// same for every store and every run with one seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// Requests `Set {key, value}`: keys `key000000012345` from `keys` keys,
/// values of `value_bytes` random bytes (64 distinct values, cloned).
pub struct Load {
    rng: Rng,
    keys: u64,
    values: Vec<Vec<u8>>,
}

impl Load {
    pub fn new(seed: u64, keys: u64, value_bytes: usize) -> Self {
        let mut rng = Rng::new(seed);
        let values = (0..64)
            .map(|_| {
                let mut value = Vec::with_capacity(value_bytes + 8);
                while value.len() < value_bytes {
                    value.extend_from_slice(&rng.next().to_le_bytes());
                }
                value.truncate(value_bytes);
                value
            })
            .collect();
        Load { rng, keys: keys.max(1), values }
    }

    pub fn key(&mut self) -> Vec<u8> {
        format!("key{:012}", self.rng.next() % self.keys).into_bytes()
    }

    pub fn set(&mut self) -> Request {
        let key = self.key();
        let value = self.values[(self.rng.next() % self.values.len() as u64) as usize].clone();
        Request::Set { key, value }
    }
}

/// Latencies in microseconds, summarised.
#[derive(Default)]
pub struct Latencies(Vec<u32>);

impl Latencies {
    pub fn push(&mut self, elapsed: std::time::Duration) {
        self.0.push(u32::try_from(elapsed.as_micros()).unwrap_or(u32::MAX));
    }

    pub fn extend(&mut self, other: Latencies) {
        self.0.extend(other.0);
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The `q` quantile (0..=1) in microseconds; 0 with no samples.
    pub fn quantile(&mut self, q: f64) -> u32 {
        if self.0.is_empty() {
            return 0;
        }
        self.0.sort_unstable();
        let rank = ((self.0.len() as f64 - 1.0) * q).round() as usize;
        self.0[rank.min(self.0.len() - 1)]
    }
}

/// Bytes of every file under `path` (0 if it cannot be read).
pub fn disk_bytes(path: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else { return 0 };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(m) if m.is_dir() => disk_bytes(&entry.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
