//! Internal keys: how a user key, a sequence number and an operation kind are
//! packed into one byte string that sorts correctly.
//!
//! Layout (see docs/format.md, "Internal keys"): `user_key ++ fixed64_le(seq << 8 | kind)`.
//! Order: user key ascending in the column family's comparator
//! ([`crate::comparator`]), then sequence number descending, then kind
//! descending, so the newest version of a key comes first.

#[cfg(any(test, feature = "internals"))]
use std::cmp::Ordering;

use crate::comparator::UserComparator;
use crate::util::coding::{decode_fixed64, put_fixed64};

/// Largest user key accepted, in bytes.
pub const MAX_KEY_SIZE: usize = 8 << 20;
/// Largest value accepted, in bytes (RocksDB's limit is 3 GiB; ours keeps a
/// WAL record and a block in memory comfortably).
pub const MAX_VALUE_SIZE: usize = 256 << 20;

/// A sequence number: every write gets the next one; snapshots are sequence numbers.
pub type SequenceNumber = u64;

/// The largest sequence number an internal key can carry (56 bits).
pub const MAX_SEQUENCE: SequenceNumber = (1 << 56) - 1;

/// Bytes in the trailer appended to every user key.
pub const TRAILER_LEN: usize = 8;

/// The kind of an entry. DO NOT CHANGE the numbers: on-disk format (WAL, SSTs),
/// the same values as LevelDB's and RocksDB's `ValueType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ValueKind {
    /// A tombstone: the key was deleted.
    Deletion = 0,
    /// A value.
    Value = 1,
    /// A merge operand (RocksDB's `kTypeMerge`): applied by the column
    /// family's merge operator to the value below it (docs/data_model.md,
    /// "Merge").
    Merge = 0x2,
    /// A range tombstone (RocksDB's `kTypeRangeDeletion`): in a WAL batch,
    /// a memtable's tombstone list and a table's range-deletion block, never
    /// among point entries; its key is the range's start, its value the end
    /// (docs/data_model.md, "Range deletion").
    RangeDeletion = 0xF,
    /// A single deletion (RocksDB's `kTypeSingleDeletion`): removes a key
    /// written by one put since its last single deletion; when it meets that
    /// put in a flush or compaction, both are dropped (docs/data_model.md).
    SingleDeletion = 0x7,
    /// A value kept in a blob file: the entry's value is a
    /// [`crate::blob::BlobIndex`] saying where (RocksDB's `kTypeBlobIndex`,
    /// the same number). Only flushes and compactions write it, into SSTs;
    /// it is never in a WAL or a memtable.
    BlobIndex = 0x11,
    /// A wide-column entity (RocksDB's `kTypeWideColumnEntity`, the same
    /// number): the entry's value is the serialized columns
    /// ([`crate::wide_columns`]), its default column the key's plain value.
    WideColumnEntity = 0x16,
}

impl ValueKind {
    /// Parses the on-disk byte.
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Value),
            0x2 => Some(ValueKind::Merge),
            0x7 => Some(ValueKind::SingleDeletion),
            0xF => Some(ValueKind::RangeDeletion),
            0x11 => Some(ValueKind::BlobIndex),
            0x16 => Some(ValueKind::WideColumnEntity),
            _ => None,
        }
    }

    /// True for the kinds that hold the key's value (inline, in a blob file,
    /// or as the columns of an entity).
    pub fn is_value(self) -> bool {
        matches!(self, ValueKind::Value | ValueKind::BlobIndex | ValueKind::WideColumnEntity)
    }

    /// True for the tombstones: a deletion or a single deletion.
    pub fn is_deletion(self) -> bool {
        matches!(self, ValueKind::Deletion | ValueKind::SingleDeletion)
    }
}

/// The kind used when building a seek target: the highest, so a seek for
/// `(key, seq)` lands on the newest entry with sequence `<= seq` whatever
/// its kind (RocksDB's `kValueTypeForSeek`, for the same reason: a lower
/// kind would sort after, and so skip, an entry of a higher kind at `seq`).
pub const KIND_FOR_SEEK: ValueKind = ValueKind::WideColumnEntity;

/// Packs a sequence number and kind into the trailer value.
pub fn pack_trailer(seq: SequenceNumber, kind: ValueKind) -> u64 {
    debug_assert!(seq <= MAX_SEQUENCE);
    (seq << 8) | kind as u64
}

/// Appends the internal key for `(user_key, seq, kind)` to `dst`.
pub fn append_internal_key(dst: &mut Vec<u8>, user_key: &[u8], seq: SequenceNumber, kind: ValueKind) {
    dst.extend_from_slice(user_key);
    put_fixed64(dst, pack_trailer(seq, kind));
}

/// Builds an owned internal key.
pub fn make_internal_key(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut v, user_key, seq, kind);
    v
}

/// Calls `f` with the internal key for `(user_key, seq, kind)`, built on the
/// stack when the user key is short (a memtable insert per write), else on
/// the heap.
pub fn with_internal_key<R>(user_key: &[u8], seq: SequenceNumber, kind: ValueKind, f: impl FnOnce(&[u8]) -> R) -> R {
    let mut buf = [0u8; 64];
    match write_internal_key(&mut buf, user_key, seq, kind) {
        Some(len) => f(&buf[..len]),
        None => f(&make_internal_key(user_key, seq, kind)),
    }
}

/// Writes the internal key for `(user_key, seq, kind)` at the start of
/// `buf` and returns its length, or None (nothing written) when it does not
/// fit.
pub fn write_internal_key(buf: &mut [u8], user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Option<usize> {
    let len = user_key.len() + TRAILER_LEN;
    let out = buf.get_mut(..len)?;
    out[..user_key.len()].copy_from_slice(user_key);
    out[user_key.len()..].copy_from_slice(&pack_trailer(seq, kind).to_le_bytes());
    Some(len)
}

/// The user-key part of an internal key. Requires `ikey.len() >= 8`.
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len() - TRAILER_LEN]
}

/// The packed trailer of an internal key. Requires `ikey.len() >= 8`.
pub fn trailer(ikey: &[u8]) -> u64 {
    decode_fixed64(&ikey[ikey.len() - TRAILER_LEN..]).unwrap_or(0)
}

/// A decoded internal key borrowing its user key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The user's key.
    pub user_key: &'a [u8],
    /// The write's sequence number.
    pub seq: SequenceNumber,
    /// Value or tombstone.
    pub kind: ValueKind,
}

/// Decodes an internal key; `None` when it is too short or the kind is unknown.
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    if ikey.len() < TRAILER_LEN {
        return None;
    }
    let t = trailer(ikey);
    Some(ParsedKey { user_key: user_key(ikey), seq: t >> 8, kind: ValueKind::from_u8((t & 0xff) as u8)? })
}

/// The ordering of internal keys in the bytewise user-key order, for
/// containers of [`InternalKey`] (the engine compares through its column
/// family's [`UserComparator::compare_internal`]).
#[cfg(any(test, feature = "internals"))]
pub fn compare_bytewise_internal_keys(a: &[u8], b: &[u8]) -> Ordering {
    UserComparator::BYTEWISE.compare_internal(a, b)
}

/// An owned internal key ordered as [`compare_bytewise_internal_keys`], for
/// ordered containers (benchmarks' reference maps).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg(any(test, feature = "internals"))]
pub struct InternalKey(pub Vec<u8>);

#[cfg(any(test, feature = "internals"))]
impl InternalKey {
    /// Builds the key for `(user_key, seq, kind)`.
    pub fn new(user_key: &[u8], seq: SequenceNumber, kind: ValueKind) -> Self {
        InternalKey(make_internal_key(user_key, seq, kind))
    }
    /// The encoded bytes.
    pub fn encoded(&self) -> &[u8] {
        &self.0
    }
    /// The user-key part.
    pub fn user_key(&self) -> &[u8] {
        user_key(&self.0)
    }
}

#[cfg(any(test, feature = "internals"))]
impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_bytewise_internal_keys(&self.0, &other.0)
    }
}

#[cfg(any(test, feature = "internals"))]
impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Shortens the separator between two internal keys while keeping
/// `start <= result < limit` in `cmp`'s internal order. The result is an
/// internal key.
pub fn internal_separator(cmp: &UserComparator, start: &[u8], limit: &[u8]) -> Vec<u8> {
    let (su, lu) = (user_key(start), user_key(limit));
    let sep = cmp.shortest_separator(su, lu);
    if sep.len() < su.len() && cmp.lt(su, &sep) {
        return make_internal_key(&sep, MAX_SEQUENCE, KIND_FOR_SEEK);
    }
    start.to_vec()
}

/// Shortens the last key of a table to a short internal key `>= key` in
/// `cmp`'s internal order.
pub fn internal_successor(cmp: &UserComparator, key: &[u8]) -> Vec<u8> {
    let u = user_key(key);
    let succ = cmp.short_successor(u);
    if succ.len() < u.len() && cmp.lt(u, &succ) {
        return make_internal_key(&succ, MAX_SEQUENCE, KIND_FOR_SEEK);
    }
    key.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: UserComparator = UserComparator::BYTEWISE;

    #[test]
    fn newer_versions_sort_first() {
        let a = make_internal_key(b"k", 10, ValueKind::Value);
        let b = make_internal_key(b"k", 9, ValueKind::Value);
        let c = make_internal_key(b"k", 10, ValueKind::Deletion);
        let d = make_internal_key(b"l", 100, ValueKind::Value);
        assert_eq!(compare_bytewise_internal_keys(&a, &b), Ordering::Less);
        assert_eq!(compare_bytewise_internal_keys(&a, &c), Ordering::Less);
        assert_eq!(compare_bytewise_internal_keys(&b, &d), Ordering::Less);
        assert_eq!(compare_bytewise_internal_keys(&a, &a), Ordering::Equal);
    }

    #[test]
    fn with_internal_key_builds_what_make_internal_key_does_on_either_side_of_the_stack_buffer() {
        for len in [0, 1, 55, 56, 57, 300] {
            let user = vec![b'u'; len];
            for (seq, kind) in [(0, ValueKind::Deletion), (MAX_SEQUENCE, ValueKind::Value), (77, ValueKind::Value)] {
                let got = with_internal_key(&user, seq, kind, <[u8]>::to_vec);
                assert_eq!(got, make_internal_key(&user, seq, kind), "user key of {len} bytes, seq {seq}");
            }
        }
    }

    #[test]
    fn parse_round_trips_and_refuses_garbage() {
        let k = make_internal_key(b"user", 77, ValueKind::Deletion);
        let p = parse_internal_key(&k).unwrap();
        assert_eq!((p.user_key, p.seq, p.kind), (&b"user"[..], 77, ValueKind::Deletion));
        assert!(parse_internal_key(b"short").is_none());
        let mut bad = k.clone();
        let n = bad.len();
        bad[n - 8] = 9;
        assert!(parse_internal_key(&bad).is_none());
    }

    proptest::proptest! {
        /// Any two distinct keys: the separator lies in `[start, limit)` and
        /// is no longer than `start`; its internal form stays between the
        /// internal keys.
        #[test]
        fn separators_of_random_keys_stay_between_them(
            a in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 2, 0x7f, 0xfe, 0xff]), 0..6),
            b in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 2, 0x7f, 0xfe, 0xff]), 0..6),
        ) {
            let (s, l) = if a < b { (a, b) } else { (b, a) };
            proptest::prop_assume!(s < l);
            let sep = B.shortest_separator(&s, &l);
            proptest::prop_assert!(s <= sep && sep < l, "{:?} {:?} -> {:?}", s, l, sep);
            proptest::prop_assert!(sep.len() <= s.len());
            let is = make_internal_key(&s, 5, ValueKind::Value);
            let il = make_internal_key(&l, 3, ValueKind::Value);
            let isep = internal_separator(&B, &is, &il);
            proptest::prop_assert_ne!(compare_bytewise_internal_keys(&is, &isep), Ordering::Greater);
            proptest::prop_assert_eq!(compare_bytewise_internal_keys(&isep, &il), Ordering::Less);
        }
    }

    #[test]
    fn separators_stay_between_their_bounds() {
        let cases: &[(&[u8], &[u8])] = &[
            (b"abcdefg", b"abzz"),
            (b"abc", b"abd"),
            (b"a", b"b"),
            (b"foo", b"foo\x00"),
            (b"\xff\xff", b"\xff\xff\x01"),
            (b"key0056xyz", b"key0057abc"),
            (b"ab1\xffc9", b"ab2"),
            (b"ab1\xff", b"ab2"),
            (b"\x00\x00\x01\xff\xff\x07", b"\x00\x00\x02"),
        ];
        for (s, l) in cases {
            let sep = B.shortest_separator(s, l);
            assert!(*s <= sep.as_slice() && sep.as_slice() < *l, "{s:?} {l:?} -> {sep:?}");
            let is = make_internal_key(s, 5, ValueKind::Value);
            let il = make_internal_key(l, 3, ValueKind::Value);
            let isep = internal_separator(&B, &is, &il);
            assert_ne!(compare_bytewise_internal_keys(&is, &isep), Ordering::Greater);
            assert_eq!(compare_bytewise_internal_keys(&isep, &il), Ordering::Less);
        }
        assert_eq!(B.shortest_separator(b"abcdefg", b"abzz"), b"abd");
        // Adjacent differing bytes: the prefix of a longer limit, or a later
        // byte of start incremented (RocksDB's two refinements of LevelDB).
        assert_eq!(B.shortest_separator(b"key0056xyz", b"key0057abc"), b"key0057");
        assert_eq!(B.shortest_separator(b"ab1\xffc9", b"ab2"), b"ab1\xffd");
        assert_eq!(B.shortest_separator(b"ab1\xff", b"ab2"), b"ab1\xff");
        assert_eq!(B.shortest_separator(b"b", b"a"), b"b");
        assert_eq!(B.short_successor(b"abc"), b"b");
        assert_eq!(B.short_successor(b"\xff\xff"), b"\xff\xff");
    }
}
