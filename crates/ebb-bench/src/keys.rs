//! Keys as db_bench makes them (`GenerateKeyFromInt` without prefixes): the
//! number in big-endian over the first `min(key_size, 8)` bytes, then `'0'`
//! padding up to `key_size`. Keys of one size therefore sort as their numbers
//! do (for numbers below 2^(8·key_size)), which is what `fillseq` relies on.

/// Formats key numbers into fixed-size keys.
#[derive(Debug, Clone, Copy)]
pub struct KeyFormat {
    key_size: usize,
}

impl KeyFormat {
    /// Keys of `key_size` bytes (at least 1).
    pub fn new(key_size: usize) -> KeyFormat {
        KeyFormat { key_size: key_size.max(1) }
    }

    /// The size of every key.
    pub fn key_size(&self) -> usize {
        self.key_size
    }

    /// Writes the key of `n` into `out` (cleared first).
    pub fn write(&self, n: u64, out: &mut Vec<u8>) {
        out.clear();
        let width = self.key_size.min(8);
        let be = n.to_be_bytes();
        out.extend_from_slice(&be[8 - width..]);
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
}
