//! Block and record checksums.
//!
//! CRC-32C (Castagnoli) is the default, as LevelDB and RocksDB; xxh3 (low 32 bits
//! of XXH3-64) is the alternative seed 001 measures. Stored CRCs are masked
//! (LevelDB `util/crc32c.h`): a CRC computed over data that itself contains CRCs
//! is weak, so what is written is rotated and offset.

/// Which function checksums SST blocks. DO NOT CHANGE the numbers: on-disk format
/// (stored in the SST footer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChecksumType {
    /// CRC-32C, masked. The default.
    Crc32c = 1,
    /// Low 32 bits of XXH3-64, masked the same way.
    Xxh3 = 4,
}

impl ChecksumType {
    /// The on-disk byte.
    pub fn as_u8(self) -> u8 {
        self as u8
    }
    /// Parses the on-disk byte.
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            1 => Some(ChecksumType::Crc32c),
            4 => Some(ChecksumType::Xxh3),
            _ => None,
        }
    }
    /// The option-text name (`kCRC32c`, `kXXH3`, as RocksDB spells them).
    pub fn name(self) -> &'static str {
        match self {
            ChecksumType::Crc32c => "kCRC32c",
            ChecksumType::Xxh3 => "kXXH3",
        }
    }
    /// Parses an option-text name; accepts RocksDB's names and plain ones.
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "kcrc32c" | "crc32c" => Some(ChecksumType::Crc32c),
            "kxxh3" | "xxh3" => Some(ChecksumType::Xxh3),
            _ => None,
        }
    }
    /// Computes the unmasked checksum of the concatenation of `parts`.
    pub fn compute(self, parts: &[&[u8]]) -> u32 {
        match self {
            ChecksumType::Crc32c => {
                let mut crc = 0;
                for p in parts {
                    crc = crc32c::crc32c_append(crc, p);
                }
                crc
            }
            ChecksumType::Xxh3 => {
                if parts.len() == 1 {
                    xxhash_rust::xxh3::xxh3_64(parts[0]) as u32
                } else {
                    let mut h = xxhash_rust::xxh3::Xxh3::new();
                    for p in parts {
                        h.update(p);
                    }
                    h.digest() as u32
                }
            }
        }
    }
}

const MASK_DELTA: u32 = 0xa282_ead8;

/// Masks a CRC for storage (LevelDB `crc32c::Mask`).
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverts [`mask`].
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// CRC-32C of `data`, unmasked.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Extends a CRC-32C with more data.
pub fn crc32c_extend(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_vectors() {
        // RFC 3720 B.4 test vectors, also in LevelDB's crc32c_test.cc.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        let ascending: Vec<u8> = (0..32).collect();
        assert_eq!(crc32c(&ascending), 0x46dd_794e);
        assert_eq!(crc32c(b"hello world"), crc32c_extend(crc32c(b"hello "), b"world"));
    }

    #[test]
    fn mask_round_trips_and_changes_the_value() {
        for v in [0u32, 1, 0x8a91_36aa, u32::MAX] {
            assert_ne!(mask(v), v);
            assert_ne!(mask(mask(v)), v);
            assert_eq!(unmask(mask(v)), v);
        }
    }

    #[test]
    fn checksum_types_detect_a_flip_and_agree_across_parts() {
        for t in [ChecksumType::Crc32c, ChecksumType::Xxh3] {
            let a = t.compute(&[b"abcdef"]);
            assert_eq!(a, t.compute(&[b"abc", b"def"]));
            assert_ne!(a, t.compute(&[b"abcdeg"]));
            assert_eq!(ChecksumType::from_u8(t.as_u8()), Some(t));
            assert_eq!(ChecksumType::parse(t.name()), Some(t));
        }
    }
}
