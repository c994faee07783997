//! Wide columns (RocksDB's `PutEntity`, `GetEntity`, `WideColumns`): a key
//! may hold an entity, several named columns, instead of one value
//! (docs/data_model.md, "Wide columns").
//!
//! The column named `""` ([`DEFAULT_COLUMN_NAME`]) is the entity's plain
//! value: `get` and an iterator's `value()` read it (empty when the entity
//! has none), and a plain value reads through `get_entity` and `columns()`
//! as an entity of that one column. A merge over an entity applies to its
//! default column and keeps the others, as RocksDB's `FullMergeV3` does by
//! default. Compaction filters are not asked about entities (RocksDB's
//! default `FilterV3` keeps them), and entities stay in the tables when blob
//! files are on.
//!
//! An entity is stored as one entry of kind `WideColumnEntity` whose value
//! is the columns in RocksDB's serialization, version 1
//! (docs/format.md, "Wide-column entities"):
//!
//! ```text
//! varint32 version (1) | varint32 column count
//! | per column, by name ascending: varint32 name length, name, varint32 value length
//! | the values, in the same order
//! ```

use crate::error::{Error, Result};
use crate::merge_operator::MergeOperator;
use crate::util::coding::{decode_varint32, put_varint32};

/// The name of the default column: the one a plain `get` reads.
pub const DEFAULT_COLUMN_NAME: &[u8] = b"";

/// The serialization version written (RocksDB's `kCurrentVersion` for
/// entities without blob columns).
const VERSION: u32 = 1;

/// One column of an entity: its name and value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WideColumn {
    /// The column's name; [`DEFAULT_COLUMN_NAME`] (empty) for the default column.
    pub name: Vec<u8>,
    /// The column's value.
    pub value: Vec<u8>,
}

impl WideColumn {
    /// A column named `name` holding `value`.
    pub fn new(name: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Self {
        WideColumn { name: name.into(), value: value.into() }
    }
}

/// Serializes `columns` (in any order) as an entity: sorted by name, which
/// must be unique. `InvalidArgument` names a duplicate column or one too
/// large for the format.
pub fn encode(columns: &[(&[u8], &[u8])]) -> Result<Vec<u8>> {
    let mut sorted: Vec<(&[u8], &[u8])> = columns.to_vec();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    if let Some(w) = sorted.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(Error::invalid(format!(
            "wide column {:?} given twice in one entity",
            String::from_utf8_lossy(w[0].0)
        )));
    }
    let too_long = |what: &str, len: usize| {
        Error::invalid(format!("wide column {what} of {len} bytes is longer than an entity can hold (4 GiB)"))
    };
    let count = u32::try_from(sorted.len()).map_err(|_| Error::invalid("more than 2^32 wide columns in one entity"))?;
    let payload: usize = sorted.iter().map(|(n, v)| n.len() + v.len() + 10).sum();
    let mut out = Vec::with_capacity(payload + 10);
    put_varint32(&mut out, VERSION);
    put_varint32(&mut out, count);
    for (name, value) in &sorted {
        put_varint32(&mut out, u32::try_from(name.len()).map_err(|_| too_long("name", name.len()))?);
        out.extend_from_slice(name);
        put_varint32(&mut out, u32::try_from(value.len()).map_err(|_| too_long("value", value.len()))?);
    }
    for (_, value) in &sorted {
        out.extend_from_slice(value);
    }
    Ok(out)
}

/// A column borrowed from a serialized entity: name and value.
pub(crate) type Column<'a> = (&'a [u8], &'a [u8]);

/// The columns of a serialized entity, borrowed from it, by name ascending;
/// `Err` says what is wrong with the bytes.
pub(crate) fn decode(entity: &[u8]) -> std::result::Result<Vec<Column<'_>>, String> {
    let mut at = 0usize;
    let varint = |what: &str, at: &mut usize| -> std::result::Result<usize, String> {
        let (v, n) = decode_varint32(&entity[*at..]).ok_or_else(|| format!("entity truncated in its {what}"))?;
        *at += n;
        Ok(v as usize)
    };
    let version = varint("version", &mut at)?;
    if version != VERSION as usize {
        return Err(format!("entity of serialization version {version} (only {VERSION} is known)"));
    }
    let count = varint("column count", &mut at)?;
    // Every column takes at least two bytes of index: a count past that is
    // damage, not an allocation to make.
    if count > (entity.len() - at) / 2 {
        return Err(format!("entity of {} bytes claims {count} columns", entity.len()));
    }
    let mut index: Vec<(&[u8], usize)> = Vec::with_capacity(count);
    for _ in 0..count {
        let len = varint("column name length", &mut at)?;
        let name = entity.get(at..at + len).ok_or("entity truncated in a column name")?;
        at += len;
        let value_len = varint("column value length", &mut at)?;
        if let Some((prev, _)) = index.last() {
            if *prev >= name {
                return Err("entity's columns are out of order or repeated".into());
            }
        }
        index.push((name, value_len));
    }
    let mut columns = Vec::with_capacity(count);
    for (name, len) in index {
        let value = entity.get(at..at + len).ok_or("entity truncated in a column value")?;
        at += len;
        columns.push((name, value));
    }
    if at != entity.len() {
        return Err(format!("entity has {} bytes past its last column", entity.len() - at));
    }
    Ok(columns)
}

/// The columns of a serialized entity (as [`crate::BatchOp::PutEntity`]
/// holds it), by name ascending; `InvalidArgument` says what is wrong with
/// the bytes.
pub fn decode_entity(entity: &[u8]) -> Result<Vec<WideColumn>> {
    decode(entity)
        .map(|cols| cols.into_iter().map(|(n, v)| WideColumn::new(n, v)).collect())
        .map_err(|r| Error::invalid(format!("not a wide-column entity: {r}")))
}

/// The value of the default column of `entity` (empty when it has none).
pub(crate) fn default_value(entity: &[u8]) -> std::result::Result<&[u8], String> {
    Ok(decode(entity)?.first().filter(|(name, _)| name.is_empty()).map_or(&[][..], |(_, v)| v))
}

/// `entity` with its default column set to `value` (added when it had none).
pub(crate) fn with_default(entity: &[u8], value: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let mut columns = decode(entity)?;
    match columns.first_mut() {
        Some(c) if c.0.is_empty() => c.1 = value,
        _ => columns.insert(0, (DEFAULT_COLUMN_NAME, value)),
    }
    // Already sorted and unique: encoding cannot fail.
    encode(&columns).map_err(|e| e.to_string())
}

/// The columns of `entity` as owned [`WideColumn`]s; a damaged entity is
/// corruption of `holder`, naming `key`.
pub(crate) fn columns(key: &[u8], entity: &[u8], holder: &str) -> Result<Vec<WideColumn>> {
    decode(entity)
        .map(|cols| cols.into_iter().map(|(n, v)| WideColumn::new(n, v)).collect())
        .map_err(|r| damaged(key, holder, r))
}

/// The corruption error of a damaged entity of `key` found in `holder`.
pub(crate) fn damaged(key: &[u8], holder: &str, reason: String) -> Error {
    Error::corruption(holder, 0, format!("wide-column entity of key {:?}: {reason}", String::from_utf8_lossy(key)))
}

/// What merge operands apply to: nothing, a plain value or an entity.
#[derive(Debug, Clone, Copy)]
pub(crate) enum MergeBase<'a> {
    /// The key had no value (never written, or deleted).
    None,
    /// A plain value.
    Plain(&'a [u8]),
    /// A serialized entity.
    Entity(&'a [u8]),
}

/// `operands` (oldest first) applied to `base` by `op`: a plain value, or,
/// over an entity, the entity with its default column replaced by the
/// merge of that column's value (empty when it had none) and its other
/// columns kept (RocksDB's default `FullMergeV3`). The bool is true for an
/// entity.
pub(crate) fn merge(
    op: &dyn MergeOperator,
    key: &[u8],
    base: MergeBase<'_>,
    operands: &[&[u8]],
    place: &str,
) -> Result<(bool, Vec<u8>)> {
    match base {
        MergeBase::None => crate::merge_operator::full_merge(op, key, None, operands, place).map(|v| (false, v)),
        MergeBase::Plain(v) => crate::merge_operator::full_merge(op, key, Some(v), operands, place).map(|v| (false, v)),
        MergeBase::Entity(e) => {
            let default = default_value(e).map_err(|r| damaged(key, place, r))?;
            let merged = crate::merge_operator::full_merge(op, key, Some(default), operands, place)?;
            with_default(e, &merged).map(|v| (true, v)).map_err(|r| damaged(key, place, r))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_round_trip_sorted_by_name() {
        let e = encode(&[(b"b", b"2"), (b"", b"default"), (b"a", b"")]).unwrap();
        assert_eq!(decode(&e).unwrap(), vec![(&b""[..], &b"default"[..]), (b"a", b""), (b"b", b"2")]);
        assert_eq!(default_value(&e).unwrap(), b"default");
        let none = encode(&[]).unwrap();
        assert_eq!(decode(&none).unwrap(), vec![]);
        assert_eq!(default_value(&none).unwrap(), b"");
        assert_eq!(default_value(&encode(&[(b"x", b"1")]).unwrap()).unwrap(), b"");
    }

    #[test]
    fn the_layout_is_rocksdbs_version_1() {
        let e = encode(&[(b"n", b"vv"), (b"", b"d")]).unwrap();
        assert_eq!(e, vec![1, 2, 0, 1, 1, b'n', 2, b'd', b'v', b'v']);
    }

    #[test]
    fn a_repeated_column_is_refused_by_name() {
        let e = encode(&[(b"a", b"1"), (b"a", b"2")]).unwrap_err();
        assert!(e.to_string().contains("\"a\" given twice"), "{e}");
    }

    #[test]
    fn damaged_entities_are_told_not_misread() {
        let good = encode(&[(b"", b"d"), (b"n", b"vv")]).unwrap();
        for cut in 0..good.len() {
            assert!(decode(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(decode(&longer).unwrap_err().contains("past its last column"));
        let mut version = good.clone();
        version[0] = 2;
        assert!(decode(&version).unwrap_err().contains("version 2"));
        // Names out of order: "n" before "".
        let swapped = vec![1, 2, 1, b'n', 2, 0, 1, b'v', b'v', b'd'];
        assert!(decode(&swapped).unwrap_err().contains("out of order"));
        assert!(decode(&[1, 200, 1]).unwrap_err().contains("claims 200 columns"));
    }

    #[test]
    fn a_merge_over_an_entity_replaces_its_default_column_only() {
        let op = crate::merge_operator::from_name("stringappend").unwrap();
        let op = op.as_ref();
        let e = encode(&[(b"", b"a"), (b"x", b"1")]).unwrap();
        let (entity, v) = merge(op, b"k", MergeBase::Entity(&e), &[b"b", b"c"], "test").unwrap();
        assert!(entity);
        assert_eq!(decode(&v).unwrap(), vec![(&b""[..], &b"a,b,c"[..]), (b"x", b"1")]);
        // No default column: merged over an empty value, and added.
        let e = encode(&[(b"x", b"1")]).unwrap();
        let (_, v) = merge(op, b"k", MergeBase::Entity(&e), &[b"b"], "test").unwrap();
        assert_eq!(decode(&v).unwrap(), vec![(&b""[..], &b",b"[..]), (b"x", b"1")]);
        assert_eq!(merge(op, b"k", MergeBase::Plain(b"a"), &[b"b"], "test").unwrap(), (false, b"a,b".to_vec()));
        assert_eq!(merge(op, b"k", MergeBase::None, &[b"b"], "test").unwrap(), (false, b"b".to_vec()));
    }
}
