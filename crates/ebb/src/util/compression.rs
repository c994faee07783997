//! Block compression: none, snappy, lz4, zstd.
//!
//! The type byte is stored after every SST block (see docs/format.md), so the
//! numbers are RocksDB's `CompressionType` values. DO NOT CHANGE: on-disk format.

use crate::error::{Error, Result};

/// A block compression algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CompressionType {
    /// Stored as is.
    #[default]
    None = 0,
    /// Google's snappy (raw format, the `snap` crate).
    Snappy = 1,
    /// LZ4 block format with the uncompressed length prepended (`lz4_flex`).
    Lz4 = 4,
    /// Zstandard, level 3 by default.
    Zstd = 7,
}

impl CompressionType {
    /// Parses the on-disk byte.
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(CompressionType::None),
            1 => Some(CompressionType::Snappy),
            4 => Some(CompressionType::Lz4),
            7 => Some(CompressionType::Zstd),
            _ => None,
        }
    }

    /// RocksDB's option-text name (`kNoCompression`, `kSnappyCompression`, ...).
    pub fn name(self) -> &'static str {
        match self {
            CompressionType::None => "kNoCompression",
            CompressionType::Snappy => "kSnappyCompression",
            CompressionType::Lz4 => "kLZ4Compression",
            CompressionType::Zstd => "kZSTD",
        }
    }

    /// Parses RocksDB's names and db_bench's (`none`, `snappy`, `lz4`, `zstd`).
    pub fn parse(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "none" | "knocompression" | "no" => Ok(CompressionType::None),
            "snappy" | "ksnappycompression" => Ok(CompressionType::Snappy),
            "lz4" | "klz4compression" => Ok(CompressionType::Lz4),
            "zstd" | "kzstd" | "kzstdcompression" => Ok(CompressionType::Zstd),
            other => {
                Err(Error::invalid(format!("unknown compression type {other:?} (expected none, snappy, lz4 or zstd)")))
            }
        }
    }

    /// Compresses `input`; `None` when this type is `None`.
    pub fn compress(self, input: &[u8]) -> Option<Vec<u8>> {
        match self {
            CompressionType::None => None,
            CompressionType::Snappy => snap::raw::Encoder::new().compress_vec(input).ok(),
            CompressionType::Lz4 => Some(lz4_flex::compress_prepend_size(input)),
            CompressionType::Zstd => zstd::bulk::compress(input, 3).ok(),
        }
    }

    /// Decompresses `input`. Errors are returned as a reason string for the
    /// caller to wrap with the file and offset.
    pub fn decompress(self, input: &[u8]) -> std::result::Result<Vec<u8>, String> {
        match self {
            CompressionType::None => Ok(input.to_vec()),
            CompressionType::Snappy => {
                let len = snap::raw::decompress_len(input).map_err(|e| format!("snappy: {e}"))?;
                if len > MAX_DECOMPRESSED {
                    return Err(format!("snappy block claims {len} bytes"));
                }
                snap::raw::Decoder::new().decompress_vec(input).map_err(|e| format!("snappy: {e}"))
            }
            CompressionType::Lz4 => {
                let claimed = input.get(..4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
                if claimed.is_none_or(|n| n > MAX_DECOMPRESSED) {
                    return Err("lz4 block has a bad length prefix".into());
                }
                lz4_flex::decompress_size_prepended(input).map_err(|e| format!("lz4: {e}"))
            }
            CompressionType::Zstd => zstd::bulk::decompress(input, MAX_DECOMPRESSED).map_err(|e| format!("zstd: {e}")),
        }
    }
}

/// No block decompresses to more than this; a larger claim is corruption.
pub const MAX_DECOMPRESSED: usize = 256 << 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_round_trips() {
        let data: Vec<u8> = (0..10_000u32).flat_map(|i| (i % 97).to_le_bytes()).collect();
        for t in [CompressionType::Snappy, CompressionType::Lz4, CompressionType::Zstd] {
            let c = t.compress(&data).unwrap();
            assert!(c.len() < data.len(), "{t:?} did not compress");
            assert_eq!(t.decompress(&c).unwrap(), data);
            assert_eq!(CompressionType::from_u8(t as u8), Some(t));
            assert_eq!(CompressionType::parse(t.name()).unwrap(), t);
        }
        assert!(CompressionType::None.compress(&data).is_none());
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let garbage = [0xffu8; 64];
        for t in [CompressionType::Snappy, CompressionType::Lz4, CompressionType::Zstd] {
            assert!(t.decompress(&garbage).is_err(), "{t:?}");
        }
        assert!(CompressionType::parse("brotli").unwrap_err().to_string().contains("brotli"));
    }

    /// A block's stored bytes damaged anywhere: the length prefix lowered
    /// or raised, the stream cut, any byte flipped. Decompression returns
    /// an error or some bytes, never a panic and never more than the prefix
    /// claims (the decoder writes into a buffer of the claimed size, and
    /// every write must stay inside it).
    #[test]
    fn damaged_lz4_blocks_error_or_stay_within_their_claim() {
        let data: Vec<u8> =
            (0..4096u32).map(|i| if i % 7 == 0 { (i / 7) as u8 } else { b'a' + (i % 5) as u8 }).collect();
        let good = CompressionType::Lz4.compress(&data).unwrap();
        let claimed = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
        let mut rejected = 0;
        let mut check = |block: &[u8]| match CompressionType::Lz4.decompress(block) {
            Ok(out) => assert!(out.len() <= claimed(block), "{} bytes out of a claim of {}", out.len(), claimed(block)),
            Err(e) => {
                assert!(e.starts_with("lz4"), "{e}");
                rejected += 1;
            }
        };
        for claim in [0usize, 1, 100, data.len() - 1, data.len() + 1, 1 << 20] {
            let mut b = good.clone();
            b[..4].copy_from_slice(&(claim as u32).to_le_bytes());
            check(&b);
        }
        for cut in 4..good.len() {
            check(&good[..cut]);
        }
        for at in 4..good.len() {
            for bit in [0x01u8, 0x80] {
                let mut b = good.clone();
                b[at] ^= bit;
                check(&b);
            }
        }
        // Shorter claims and cut streams cannot all decode.
        assert!(rejected > good.len(), "only {rejected} damaged blocks rejected");
        assert_eq!(CompressionType::Lz4.decompress(&good).unwrap(), data);
    }
}
