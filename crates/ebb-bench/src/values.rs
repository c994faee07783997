//! Values as db_bench makes them (`RandomGenerator`): a 1 MiB (or
//! `value_size`, if larger) pool built from 100-byte fragments, each
//! `compression_ratio · 100` random printable bytes repeated to fill 100
//! bytes, so a compressor shrinks values to about `compression_ratio` of their
//! size. Values are consecutive windows of the pool.

use crate::rng::Rng64;

/// Hands out compressible values.
#[derive(Debug, Clone)]
pub struct ValueGenerator {
    data: Vec<u8>,
    pos: usize,
}

/// db_bench's pool seed (`Random rnd(301)`).
const POOL_SEED: u64 = 301;

impl ValueGenerator {
    /// A pool for values up to `max_value_size` bytes compressing to about `compression_ratio`.
    pub fn new(compression_ratio: f64, max_value_size: usize) -> ValueGenerator {
        let mut rng = Rng64::new(POOL_SEED);
        let target = max_value_size.max(1 << 20);
        let mut data = Vec::with_capacity(target + 100);
        let ratio = if compression_ratio.is_finite() { compression_ratio.clamp(0.0, 1.0) } else { 1.0 };
        let raw_len = ((100.0 * ratio) as usize).max(1);
        let mut raw = Vec::with_capacity(raw_len);
        while data.len() < target {
            raw.clear();
            raw.extend((0..raw_len).map(|_| b' ' + rng.below(95) as u8));
            let start = data.len();
            while data.len() - start < 100 {
                let take = raw.len().min(100 - (data.len() - start));
                data.extend_from_slice(&raw[..take]);
            }
        }
        ValueGenerator { data, pos: 0 }
    }

    /// The next `len` bytes of the pool (wrapping to its start).
    pub fn generate(&mut self, len: usize) -> &[u8] {
        let len = len.min(self.data.len());
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        self.pos += len;
        &self.data[self.pos - len..self.pos]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb::CompressionType;

    fn ratio(requested: f64) -> f64 {
        let mut g = ValueGenerator::new(requested, 100);
        let mut raw = 0usize;
        let mut packed = 0usize;
        for _ in 0..200 {
            let v = g.generate(4000).to_vec();
            raw += v.len();
            packed += CompressionType::Snappy.compress(&v).map_or(v.len(), |c| c.len());
        }
        packed as f64 / raw as f64
    }

    #[test]
    fn values_compress_near_the_requested_ratio() {
        for requested in [0.25, 0.5, 0.75] {
            let got = ratio(requested);
            assert!((got - requested).abs() < 0.12, "requested {requested}, snappy gave {got}");
        }
        // Incompressible when asked for 1.0.
        assert!(ratio(1.0) > 0.9);
    }

    #[test]
    fn generate_returns_the_requested_length() {
        let mut g = ValueGenerator::new(0.5, 100_000);
        assert_eq!(g.generate(100).len(), 100);
        assert_eq!(g.generate(100_000).len(), 100_000);
        assert!(g.data.len() >= 1 << 20);
    }
}
