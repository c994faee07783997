//! Merge operators (RocksDB's `MergeOperator` and
//! `AssociativeMergeOperator`): user code that combines a key's value with
//! updates written by `merge`, so that counters and appends need no
//! read-modify-write (docs/data_model.md, "Merge").
//!
//! A `merge` writes an operand (an entry of kind `Merge`). Reads combine
//! the operands newer than the key's last put or delete with the value that
//! put wrote (or with none) through [`MergeOperator::full_merge`]. Flushes
//! and compactions do the same where every reader would see the same
//! result: operands and the value below them that no live snapshot
//! separates become one value; operands with no value below them in what
//! the job reads are combined by [`MergeOperator::partial_merge`] where
//! the operator can, or kept as they are.
//!
//! Built in, under the names db_bench's `--merge_operator` takes:
//! `uint64add` ([`UInt64AddOperator`]), `stringappend`
//! ([`StringAppendOperator`]), `max` ([`MaxOperator`]) and `put`
//! ([`PutOperator`]); [`from_name`] makes them.
//!
//! This module sits below `options` in the layers (lib.rs) because column
//! family options hold an operator.

use std::sync::Arc;

use crate::error::{Error, Result};

/// Combines a key's value with the operands `merge` wrote for it. One
/// operator is called from many threads at once and must be thread-safe,
/// and deterministic: the same inputs give the same result every time, or
/// reads and compactions disagree.
pub trait MergeOperator: Send + Sync {
    /// The operator's name, recorded in the OPTIONS file.
    fn name(&self) -> &str;

    /// The value of `key` after applying `operands` (oldest first, at least
    /// one) to `existing`, the value they were written over (`None` when
    /// the key had none, or was deleted). `None` is a failure: the read (or
    /// the compaction) that asked fails with a corruption error naming the
    /// operator and the key, as RocksDB's does.
    fn full_merge(&self, key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>>;

    /// One operand with the effect of `operands` (oldest first, at least
    /// two) applied in order, or `None` when they cannot be combined without
    /// the value below them (then they are kept as they are). The default
    /// combines nothing.
    fn partial_merge(&self, key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        let _ = (key, operands);
        None
    }
}

/// The simple form of a merge operator (RocksDB's
/// `AssociativeMergeOperator`): one function that applies one operand to a
/// value, where operands combine the way values do, so that any run of
/// operands can be combined into one. Use it through [`Associative`].
pub trait AssociativeMergeOperator: Send + Sync {
    /// The operator's name, recorded in the OPTIONS file.
    fn name(&self) -> &str;

    /// `existing` (or nothing) with `value` applied; `None` is a failure.
    fn merge(&self, key: &[u8], existing: Option<&[u8]>, value: &[u8]) -> Option<Vec<u8>>;
}

/// A [`MergeOperator`] made of an [`AssociativeMergeOperator`]: a full merge
/// folds the operands over the existing value in order; a partial merge
/// folds them over the oldest.
pub struct Associative<T>(pub T);

impl<T: AssociativeMergeOperator> MergeOperator for Associative<T> {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn full_merge(&self, key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let (first, rest) = operands.split_first()?;
        let mut acc = self.0.merge(key, existing, first)?;
        for op in rest {
            acc = self.0.merge(key, Some(&acc), op)?;
        }
        Some(acc)
    }

    fn partial_merge(&self, key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        let (first, rest) = operands.split_first()?;
        let mut acc = first.to_vec();
        for op in rest {
            acc = self.0.merge(key, Some(&acc), op)?;
        }
        Some(acc)
    }
}

/// Adds unsigned 64-bit integers, stored as 8 little-endian bytes (RocksDB's
/// `UInt64AddOperator`, db_bench's `uint64add`). As in RocksDB, a value or
/// operand of another size counts as 0, and sums wrap.
#[derive(Debug, Clone, Copy, Default)]
pub struct UInt64AddOperator;

fn decode_u64(v: &[u8]) -> u64 {
    <[u8; 8]>::try_from(v).map_or(0, u64::from_le_bytes)
}

impl AssociativeMergeOperator for UInt64AddOperator {
    fn name(&self) -> &str {
        "UInt64AddOperator"
    }

    fn merge(&self, _key: &[u8], existing: Option<&[u8]>, value: &[u8]) -> Option<Vec<u8>> {
        let sum = existing.map_or(0, decode_u64).wrapping_add(decode_u64(value));
        Some(sum.to_le_bytes().to_vec())
    }
}

/// Appends each operand to the value, with a delimiter between (RocksDB's
/// `StringAppendOperator`, db_bench's `stringappend`; the default delimiter
/// is `,`).
#[derive(Debug, Clone)]
pub struct StringAppendOperator {
    delimiter: Vec<u8>,
}

impl StringAppendOperator {
    /// An operator joining with `delimiter` (may be empty).
    pub fn new(delimiter: &[u8]) -> Self {
        StringAppendOperator { delimiter: delimiter.to_vec() }
    }
}

impl Default for StringAppendOperator {
    fn default() -> Self {
        StringAppendOperator::new(b",")
    }
}

impl AssociativeMergeOperator for StringAppendOperator {
    fn name(&self) -> &str {
        "StringAppendOperator"
    }

    fn merge(&self, _key: &[u8], existing: Option<&[u8]>, value: &[u8]) -> Option<Vec<u8>> {
        Some(match existing {
            None => value.to_vec(),
            Some(e) => {
                let mut out = Vec::with_capacity(e.len() + self.delimiter.len() + value.len());
                out.extend_from_slice(e);
                out.extend_from_slice(&self.delimiter);
                out.extend_from_slice(value);
                out
            }
        })
    }
}

/// Keeps the bytewise largest of the value and the operands (RocksDB's
/// `MaxOperator`, db_bench's `max`).
#[derive(Debug, Clone, Copy, Default)]
pub struct MaxOperator;

impl AssociativeMergeOperator for MaxOperator {
    fn name(&self) -> &str {
        "MaxOperator"
    }

    fn merge(&self, _key: &[u8], existing: Option<&[u8]>, value: &[u8]) -> Option<Vec<u8>> {
        Some(match existing {
            Some(e) if e > value => e.to_vec(),
            _ => value.to_vec(),
        })
    }
}

/// The newest operand replaces the value: a merge behaves as a put
/// (RocksDB's `PutOperator`, db_bench's `put`).
#[derive(Debug, Clone, Copy, Default)]
pub struct PutOperator;

impl MergeOperator for PutOperator {
    fn name(&self) -> &str {
        "PutOperator"
    }

    fn full_merge(&self, _key: &[u8], _existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        operands.last().map(|v| v.to_vec())
    }

    fn partial_merge(&self, _key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        operands.last().map(|v| v.to_vec())
    }
}

/// The built-in operator called `name`: db_bench's names (`uint64add`,
/// `stringappend`, `max`, `put`) or the operators' own (`UInt64AddOperator`,
/// ...). Anything else is an invalid-argument error naming it and the names
/// known.
pub fn from_name(name: &str) -> Result<Arc<dyn MergeOperator>> {
    Ok(match name {
        "uint64add" | "UInt64AddOperator" => Arc::new(Associative(UInt64AddOperator)),
        "stringappend" | "StringAppendOperator" => Arc::new(Associative(StringAppendOperator::default())),
        "max" | "MaxOperator" => Arc::new(Associative(MaxOperator)),
        "put" | "PutOperator" => Arc::new(PutOperator),
        _ => {
            return Err(Error::invalid(format!(
                "unknown merge operator {name:?}: the built-in ones are uint64add, stringappend, max and put"
            )))
        }
    })
}

/// Applies `op` to `existing` and `operands` (oldest first); a failure is
/// a corruption error naming the operator, the key and `place` (where the
/// operands were read), as RocksDB reports a failed merge.
pub(crate) fn full_merge(
    op: &dyn MergeOperator,
    key: &[u8],
    existing: Option<&[u8]>,
    operands: &[&[u8]],
    place: &str,
) -> Result<Vec<u8>> {
    op.full_merge(key, existing, operands).ok_or_else(|| {
        Error::corruption(
            place,
            0,
            format!(
                "merge operator {} failed to merge {} operand(s) of key {:?}",
                op.name(),
                operands.len(),
                String::from_utf8_lossy(key)
            ),
        )
    })
}

/// The error for merge operands met where no merge operator is set.
pub(crate) fn missing(key: &[u8]) -> Error {
    Error::invalid(format!(
        "key {:?} has merge operands but the column family has no merge operator \
         (ColumnFamilyOptions::merge_operator)",
        String::from_utf8_lossy(key)
    ))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn le(n: u64) -> Vec<u8> {
        n.to_le_bytes().to_vec()
    }

    #[test]
    fn uint64add_adds_and_reads_a_malformed_value_as_zero() {
        let op = from_name("uint64add").unwrap();
        let (a, b) = (le(5), le(7));
        assert_eq!(op.full_merge(b"k", Some(&le(1)), &[&a, &b]), Some(le(13)));
        assert_eq!(op.full_merge(b"k", None, &[&a]), Some(le(5)));
        assert_eq!(op.full_merge(b"k", Some(b"bad"), &[&a]), Some(le(5)));
        assert_eq!(op.partial_merge(b"k", &[&a, &b]), Some(le(12)));
        assert_eq!(op.full_merge(b"k", Some(&le(u64::MAX)), &[&le(2)]), Some(le(1)), "sums wrap");
    }

    #[test]
    fn stringappend_joins_with_its_delimiter() {
        let op = from_name("stringappend").unwrap();
        assert_eq!(op.full_merge(b"k", Some(b"a"), &[b"b", b"c"]), Some(b"a,b,c".to_vec()));
        assert_eq!(op.full_merge(b"k", None, &[b"b", b"c"]), Some(b"b,c".to_vec()));
        assert_eq!(op.partial_merge(b"k", &[b"b", b"c"]), Some(b"b,c".to_vec()));
        let dash = Associative(StringAppendOperator::new(b"--"));
        assert_eq!(dash.full_merge(b"k", Some(b"a"), &[b"b"]), Some(b"a--b".to_vec()));
    }

    #[test]
    fn max_and_put() {
        let max = from_name("max").unwrap();
        assert_eq!(max.full_merge(b"k", Some(b"m"), &[b"c", b"z", b"a"]), Some(b"z".to_vec()));
        assert_eq!(max.full_merge(b"k", Some(b"zz"), &[b"c"]), Some(b"zz".to_vec()));
        let put = from_name("put").unwrap();
        assert_eq!(put.full_merge(b"k", Some(b"old"), &[b"a", b"b"]), Some(b"b".to_vec()));
        assert_eq!(put.partial_merge(b"k", &[b"a", b"b"]), Some(b"b".to_vec()));
    }

    #[test]
    fn an_unknown_name_is_refused_by_name() {
        let e = from_name("sum").err().unwrap().to_string();
        assert!(e.contains("\"sum\"") && e.contains("uint64add"), "{e}");
    }

    /// An operator whose every full merge fails (for the tests of what a
    /// failure does).
    pub(crate) struct Fails;

    impl MergeOperator for Fails {
        fn name(&self) -> &str {
            "Fails"
        }
        fn full_merge(&self, _: &[u8], _: Option<&[u8]>, _: &[&[u8]]) -> Option<Vec<u8>> {
            None
        }
    }

    #[test]
    fn a_failed_merge_names_the_operator_and_the_key() {
        let e = full_merge(&Fails, b"key7", None, &[b"x"], "memtable").unwrap_err().to_string();
        assert!(e.contains("Fails") && e.contains("key7"), "{e}");
    }
}
