//! Keys as db_bench makes them (`GenerateKeyFromInt`): without prefixes, the
//! number in big-endian over the first `min(key_size, 8)` bytes, then `'0'`
//! padding up to `key_size`. Keys of one size therefore sort as their numbers
//! do (for numbers below 2^(8·key_size)), which is what `fillseq` relies on.
//!
//! With `--keys_per_prefix=K` and `--prefix_size=P` (both positive), a key
//! starts with a prefix of P bytes: the number's prefix `n mod (num_keys / K)`
//! big-endian over its first `min(P, 8)` bytes (its low bytes when P < 8),
//! `'0'` padding up to P; then the number itself big-endian over the next
//! `min(key_size − P, 8)` bytes, and `'0'` padding to `key_size`. So about K
//! of the numbers in `[0, num_keys)` share each prefix, and keys sort by
//! prefix first. `num_keys` is `--num` for every benchmark but the merging
//! ones, whose keys are among `--merge_keys` (db_bench's `merge_keys_`).
//! A prefix size without keys per prefix (or the reverse) leaves the keys as
//! they are without prefixes, as in db_bench.

/// db_bench's prefixed keys: `size` bytes of prefix, one of `count` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Prefix {
    /// `--prefix_size`.
    size: usize,
    /// `--keys_per_prefix`.
    keys_per_prefix: u64,
    /// Distinct prefixes: `num_keys / keys_per_prefix` (db_bench's
    /// `num_prefix`), at least 1.
    count: u64,
}

/// Formats key numbers into fixed-size keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyFormat {
    key_size: usize,
    prefix: Option<Prefix>,
}

impl KeyFormat {
    /// Keys of `key_size` bytes (at least 1), without prefixes.
    pub fn new(key_size: usize) -> KeyFormat {
        KeyFormat { key_size: key_size.max(1), prefix: None }
    }

    /// Keys of `key_size` bytes with db_bench's prefixes
    /// (`--prefix_size`, `--keys_per_prefix`) for numbers in
    /// `[0, num_keys)`; either size 0 means no prefixes. `prefix_size` is
    /// capped at `key_size` (the configuration refuses larger ones).
    pub fn with_prefixes(key_size: usize, prefix_size: usize, keys_per_prefix: u64, num_keys: u64) -> KeyFormat {
        let key_size = key_size.max(1);
        let prefix = (prefix_size > 0 && keys_per_prefix > 0).then(|| Prefix {
            size: prefix_size.min(key_size),
            keys_per_prefix,
            count: (num_keys / keys_per_prefix).max(1),
        });
        KeyFormat { key_size, prefix }
    }

    /// The same layout for numbers in `[0, num_keys)` (db_bench's
    /// `num_keys` argument: the merging benchmarks pass `--merge_keys`).
    pub fn for_num_keys(self, num_keys: u64) -> KeyFormat {
        match self.prefix {
            None => self,
            Some(p) => KeyFormat::with_prefixes(self.key_size, p.size, p.keys_per_prefix, num_keys),
        }
    }

    /// The same layout with keys of `key_size` bytes (readmissing's one
    /// byte longer keys).
    pub fn with_key_size(self, key_size: usize) -> KeyFormat {
        KeyFormat { key_size: key_size.max(1), ..self }
    }

    /// The size of every key.
    pub fn key_size(&self) -> usize {
        self.key_size
    }

    /// The bytes that hold the key's number (after the prefix, if any):
    /// numbers agreeing modulo 2^(8·width) get the same key.
    pub fn number_width(&self) -> usize {
        self.key_size.saturating_sub(self.prefix.map_or(0, |p| p.size)).min(8)
    }

    /// The number of distinct prefixes (`num_keys / keys_per_prefix`), or
    /// `None` without prefixes.
    pub fn prefix_count(&self) -> Option<u64> {
        self.prefix.map(|p| p.count)
    }

    /// Writes the key of `n` into `out` (cleared first).
    pub fn write(&self, n: u64, out: &mut Vec<u8>) {
        out.clear();
        if let Some(p) = self.prefix {
            let fill = p.size.min(8);
            out.extend_from_slice(&(n % p.count).to_be_bytes()[8 - fill..]);
            out.resize(p.size, b'0');
        }
        let width = self.number_width();
        out.extend_from_slice(&n.to_be_bytes()[8 - width..]);
        out.resize(self.key_size, b'0');
    }

    /// The key of `n` as a new vector.
    pub fn key(&self, n: u64) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.key_size);
        self.write(n, &mut v);
        v
    }
}

/// Which keys a write benchmark visits (db_bench's `WriteMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOrder {
    /// 0, 1, 2, ... (`fillseq`, `deleteseq`).
    Sequential,
    /// Uniform in `[0, num)`, repeats allowed (`fillrandom`, `overwrite`).
    Random,
    /// A permutation of `[0, num)` (`filluniquerandom`).
    UniqueRandom,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fixed_width_big_endian_then_padding() {
        let f = KeyFormat::new(16);
        let k = f.key(0x0102);
        assert_eq!(k.len(), 16);
        assert_eq!(&k[..8], &[0, 0, 0, 0, 0, 0, 1, 2]);
        assert_eq!(&k[8..], b"00000000");
        let short = KeyFormat::new(4).key(0x0102_0304_0506);
        assert_eq!(short, vec![3, 4, 5, 6]);
    }

    #[test]
    fn sequential_keys_sort_in_number_order() {
        let f = KeyFormat::new(16);
        let keys: Vec<Vec<u8>> = (0..2000u64).map(|n| f.key(n * 997)).collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
    }

    /// db_bench's `GenerateKeyFromInt` as written (little-endian host),
    /// byte by byte.
    #[allow(clippy::needless_range_loop)]
    fn db_bench_key(v: u64, num_keys: i64, key_size: usize, prefix_size: usize, keys_per_prefix: i64) -> Vec<u8> {
        let mut key = vec![0u8; key_size];
        let mut pos = 0;
        if keys_per_prefix > 0 {
            let num_prefix = num_keys / keys_per_prefix;
            // uint64_t % int64_t: the remainder of unsigned numbers.
            let prefix = (v % num_prefix as u64) as i64;
            let bytes_to_fill = prefix_size.min(8);
            for i in 0..bytes_to_fill {
                key[i] = ((prefix >> ((bytes_to_fill - i - 1) << 3)) & 0xFF) as u8;
            }
            if prefix_size > 8 {
                key[8..prefix_size].fill(b'0');
            }
            pos += prefix_size;
        }
        let bytes_to_fill = (key_size - pos).min(8);
        for i in 0..bytes_to_fill {
            key[pos + i] = ((v >> ((bytes_to_fill - i - 1) << 3)) & 0xFF) as u8;
        }
        pos += bytes_to_fill;
        key[pos..].fill(b'0');
        key
    }

    #[test]
    fn prefixed_keys_are_db_bench_s() {
        for (key_size, prefix_size, kpp, num) in
            [(16, 8, 10, 1000), (16, 4, 3, 100), (16, 12, 7, 500), (20, 16, 1, 64), (8, 8, 10, 100), (10, 3, 2, 10)]
        {
            let f = KeyFormat::with_prefixes(key_size, prefix_size, kpp as u64, num as u64);
            for v in (0..num as u64 * 2).chain([u64::MAX - 1, 1 << 40]) {
                assert_eq!(
                    f.key(v),
                    db_bench_key(v, num, key_size, prefix_size, kpp),
                    "v={v} key_size={key_size} prefix_size={prefix_size} kpp={kpp} num={num}"
                );
            }
        }
        // Without both, the keys are the unprefixed ones (db_bench writes no
        // prefix bytes for a prefix size of 0, and none without keys per prefix).
        for (prefix_size, kpp) in [(0, 10), (8, 0)] {
            let f = KeyFormat::with_prefixes(16, prefix_size, kpp, 1000);
            assert_eq!(f, KeyFormat::new(16));
            assert_eq!(f.prefix_count(), None);
        }
    }

    #[test]
    fn each_prefix_holds_about_keys_per_prefix_numbers() {
        let f = KeyFormat::with_prefixes(16, 8, 10, 1005);
        assert_eq!(f.prefix_count(), Some(100));
        let mut groups: std::collections::BTreeMap<Vec<u8>, u64> = std::collections::BTreeMap::new();
        for n in 0..1005 {
            *groups.entry(f.key(n)[..8].to_vec()).or_default() += 1;
        }
        assert_eq!(groups.len(), 100);
        assert!(groups.values().all(|c| (10..=11).contains(c)), "{groups:?}");
        // The number follows the prefix, so keys of one prefix sort by number.
        let k = |n| f.key(n);
        assert!(k(3) < k(103) && k(103) < k(203) && k(99) > k(100));
        assert_eq!(f.number_width(), 8);
        assert_eq!(f.for_num_keys(50).prefix_count(), Some(5), "merge_keys / keys_per_prefix");
        let longer = f.with_key_size(17).key(42);
        assert_eq!((&longer[..16], longer[16]), (&f.key(42)[..], b'0'), "readmissing's keys");
    }
}
