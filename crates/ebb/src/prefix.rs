//! Prefix extractors (RocksDB's `SliceTransform`): the part of a key that
//! prefix bloom filters hold and prefix seeks stay within
//! (docs/data_model.md, "Prefixes").
//!
//! A prefix extractor maps each key of its domain to a prefix of it; keys
//! with the same prefix must be contiguous in key order (true of a prefix of
//! the key's bytes under the bytewise order, as for the built-in ones).
//! Built in, under RocksDB's names (which the OPTIONS file records):
//! [`fixed`] (`rocksdb.FixedPrefix.N`: the first N bytes, for keys of at
//! least N bytes), [`capped`] (`rocksdb.CappedPrefix.N`: the first N bytes,
//! or the whole key when shorter) and [`noop`] (`rocksdb.Noop`: the key).

use std::sync::Arc;

use crate::error::{Error, Result};

/// Maps keys to their prefix (RocksDB's `SliceTransform`). Called from many
/// threads at once; must be deterministic, and `transform(key)` must be a
/// prefix of `key`, keys of one prefix contiguous in key order.
pub trait SliceTransform: Send + Sync {
    /// The extractor's name, recorded in the OPTIONS file and in each table
    /// whose filter holds its prefixes: a table's prefixes are used only by
    /// a reader whose extractor has the same name.
    fn name(&self) -> &str;

    /// The prefix of `key`, which must be in the domain.
    fn transform<'k>(&self, key: &'k [u8]) -> &'k [u8];

    /// Whether `key` has a prefix: keys outside the domain are in no prefix
    /// filter and a seek to one is a total-order seek.
    fn in_domain(&self, key: &[u8]) -> bool;
}

/// Keys ending in a u64 timestamp, without it: the memtable's key bloom
/// filter in a family with timestamps (`db/write.rs`, `new_memtable`).
struct WithoutTimestamp;

impl SliceTransform for WithoutTimestamp {
    fn name(&self) -> &str {
        "ebb.WithoutTimestamp"
    }
    fn transform<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        crate::comparator::split_timestamp(key).0
    }
    fn in_domain(&self, key: &[u8]) -> bool {
        key.len() >= crate::comparator::TIMESTAMP_SIZE
    }
}

/// The transform taking a key's u64 timestamp off.
pub(crate) fn without_timestamp() -> Arc<dyn SliceTransform> {
    Arc::new(WithoutTimestamp)
}

struct Fixed {
    len: usize,
    name: String,
}

impl SliceTransform for Fixed {
    fn name(&self) -> &str {
        &self.name
    }
    fn transform<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        &key[..self.len.min(key.len())]
    }
    fn in_domain(&self, key: &[u8]) -> bool {
        key.len() >= self.len
    }
}

struct Capped {
    len: usize,
    name: String,
}

impl SliceTransform for Capped {
    fn name(&self) -> &str {
        &self.name
    }
    fn transform<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        &key[..self.len.min(key.len())]
    }
    fn in_domain(&self, _key: &[u8]) -> bool {
        true
    }
}

struct Noop;

impl SliceTransform for Noop {
    fn name(&self) -> &str {
        "rocksdb.Noop"
    }
    fn transform<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        key
    }
    fn in_domain(&self, _key: &[u8]) -> bool {
        true
    }
}

/// The first `len` bytes of keys at least that long (RocksDB's
/// `NewFixedPrefixTransform`); shorter keys are outside the domain.
pub fn fixed(len: usize) -> Arc<dyn SliceTransform> {
    Arc::new(Fixed { len, name: format!("rocksdb.FixedPrefix.{len}") })
}

/// The first `len` bytes of every key, or the whole of a shorter one
/// (RocksDB's `NewCappedPrefixTransform`).
pub fn capped(len: usize) -> Arc<dyn SliceTransform> {
    Arc::new(Capped { len, name: format!("rocksdb.CappedPrefix.{len}") })
}

/// The whole key (RocksDB's `NewNoopTransform`).
pub fn noop() -> Arc<dyn SliceTransform> {
    Arc::new(Noop)
}

/// The built-in extractor a name means: RocksDB's `rocksdb.FixedPrefix.N`,
/// `rocksdb.CappedPrefix.N`, `rocksdb.Noop`, or the short forms
/// `fixed:N` and `capped:N` (RocksDB's `CreateFromString` forms). Anything
/// else is an invalid-argument error naming it.
pub fn from_name(name: &str) -> Result<Arc<dyn SliceTransform>> {
    let number = |s: &str| s.parse::<usize>().ok().filter(|n| *n > 0);
    let parsed = if let Some(n) = name.strip_prefix("rocksdb.FixedPrefix.").or_else(|| name.strip_prefix("fixed:")) {
        number(n).map(fixed)
    } else if let Some(n) = name.strip_prefix("rocksdb.CappedPrefix.").or_else(|| name.strip_prefix("capped:")) {
        number(n).map(capped)
    } else if name == "rocksdb.Noop" || name == "noop" {
        Some(noop())
    } else {
        None
    };
    parsed.ok_or_else(|| {
        Error::invalid(format!(
            "unknown prefix extractor {name:?}: the built-in ones are rocksdb.FixedPrefix.N, \
             rocksdb.CappedPrefix.N (N > 0) and rocksdb.Noop"
        ))
    })
}

/// A prefix extractor held by settings that compare and print: equal when
/// the names are.
#[derive(Clone)]
pub struct Extractor(pub Arc<dyn SliceTransform>);

impl PartialEq for Extractor {
    fn eq(&self, other: &Self) -> bool {
        self.0.name() == other.0.name()
    }
}

impl Eq for Extractor {}

impl std::fmt::Debug for Extractor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name())
    }
}

/// Whether `key` has the prefix `prefix` under `extractor`.
pub fn has_prefix(extractor: &dyn SliceTransform, key: &[u8], prefix: &[u8]) -> bool {
    extractor.in_domain(key) && extractor.transform(key) == prefix
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_extractors_behave_as_rocksdbs() {
        let f = fixed(3);
        assert_eq!(f.name(), "rocksdb.FixedPrefix.3");
        assert!(f.in_domain(b"abc") && !f.in_domain(b"ab"));
        assert_eq!(f.transform(b"abcdef"), b"abc");
        let c = capped(3);
        assert!(c.in_domain(b"a"));
        assert_eq!(c.transform(b"a"), b"a");
        assert_eq!(c.transform(b"abcdef"), b"abc");
        assert_eq!(noop().transform(b"xyz"), b"xyz");
        for e in [fixed(8), capped(4), noop()] {
            assert_eq!(from_name(e.name()).unwrap().name(), e.name());
        }
        assert_eq!(from_name("fixed:2").unwrap().name(), "rocksdb.FixedPrefix.2");
        for bad in ["rocksdb.FixedPrefix.0", "rocksdb.FixedPrefix.x", "mine"] {
            let e = from_name(bad).err().unwrap().to_string();
            assert!(e.contains(bad), "{e}");
        }
        assert!(has_prefix(f.as_ref(), b"abcz", b"abc") && !has_prefix(f.as_ref(), b"ab", b"ab"));
    }
}
