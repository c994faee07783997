//! `cache_bench`'s random numbers: RocksDB's `Random64` is `std::mt19937_64`
//! (util/random.h), and `cache_bench` draws keys and operations from it. The
//! same generator with the same seeds (1 to populate, 1000 + thread index to
//! run) replays `cache_bench`'s key and operation sequence, and costs what it
//! costs there: an insert's value takes one draw per 8 bytes.

/// MT19937-64 (Matsumoto and Nishimura, 2004), as C++ `std::mt19937_64`:
/// `rand_mt`'s generator behind the draws `cache_bench` makes of it.
#[derive(Clone)]
pub struct Mt19937_64 {
    inner: rand_mt::Mt64,
}

impl Mt19937_64 {
    /// A generator seeded as `std::mt19937_64(seed)`.
    pub fn new(seed: u64) -> Self {
        Mt19937_64 { inner: rand_mt::Mt64::new(seed) }
    }

    /// The next 64 random bits (`Random64::Next`).
    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// Uniform in `[0, n)` for `n > 0` (`Random64::Uniform`, which is
    /// `std::uniform_int_distribution`; libstdc++ uses Lemire's method for a
    /// 64-bit generator, as here).
    pub fn uniform(&mut self, n: u64) -> u64 {
        if n == 0 {
            return self.next_u64();
        }
        let mut product = u128::from(self.next_u64()) * u128::from(n);
        let mut low = product as u64;
        if low < n {
            let threshold = n.wrapping_neg() % n;
            while low < threshold {
                product = u128::from(self.next_u64()) * u128::from(n);
                low = product as u64;
            }
        }
        (product >> 64) as u64
    }

    /// `Random64::Skewed`: an exponent uniform in `[0, max_log]`, then that
    /// many random bits, so small numbers are exponentially more likely.
    pub fn skewed(&mut self, max_log: u32) -> u64 {
        let bits = self.uniform(u64::from(max_log) + 1);
        self.uniform(1u64 << bits.min(63))
    }
}

/// `FastRange64`: maps 64 random bits onto `[0, n)` by multiplication.
pub fn fast_range64(raw: u64, n: u64) -> u64 {
    ((u128::from(raw) * u128::from(n)) >> 64) as u64
}

/// `cache_bench`'s `KeyGen::GetRand` (v7.8.3): without `--skewed`, the
/// smallest of `skew + 1` draws scaled onto `[0, max_key)`, so low keys are
/// hot; with `--skewed`, [`Mt19937_64::skewed`] folded into the key space.
pub fn random_key(rng: &mut Mt19937_64, max_key: u64, skew: u32, skewed_max_log: Option<u32>) -> u64 {
    match skewed_max_log {
        None => {
            let mut raw = rng.next_u64();
            for _ in 0..skew {
                raw = raw.min(rng.next_u64());
            }
            fast_range64(raw, max_key)
        }
        Some(max_log) => {
            let key = rng.skewed(max_log);
            if key > max_key {
                key - max_key
            } else {
                key
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_cpp_standard_library() {
        // C++11 [rand.predef]: the 10000th invocation of a default-constructed
        // mt19937_64 (seed 5489) produces 9981545732273789042.
        let mut r = Mt19937_64::new(5489);
        let mut last = 0;
        for _ in 0..10_000 {
            last = r.next_u64();
        }
        assert_eq!(last, 9_981_545_732_273_789_042);
    }

    #[test]
    fn keys_stay_in_range_and_skew_favours_low_keys() {
        let mut r = Mt19937_64::new(1000);
        let max_key = 1000;
        let mut low = 0;
        for _ in 0..10_000 {
            let k = random_key(&mut r, max_key, 5, None);
            assert!(k < max_key);
            low += u32::from(k < max_key / 10);
        }
        // P(min of 6 uniform draws < 0.1) = 1 - 0.9^6 = 0.47.
        assert!((4_000..5_400).contains(&low), "{low}");
        for _ in 0..10_000 {
            assert!(random_key(&mut r, max_key, 0, Some(9)) <= max_key);
            assert!(r.uniform(7) < 7);
        }
    }
}
