//! The order of user keys: the [`Comparator`] trait (RocksDB's
//! `Comparator`), the built-in bytewise and reverse-bytewise orders, and
//! [`UserComparator`], the handle every layer compares keys through (the
//! memtable, blocks and indexes, iterators, versions, range tombstones and
//! compaction).
//!
//! Contract (RocksDB's; docs/data_model.md, "Comparators"):
//! 1. `compare` is a total order that never changes for the life of the
//!    data. A column family records its comparator's name in the MANIFEST
//!    when it is created, and opening it with a comparator of another name
//!    is refused naming both.
//! 2. Keys compare equal only when they are the same bytes (RocksDB's
//!    `CanKeysWithDifferentByteContentsBeEqual() == false`): bloom filters,
//!    prefixes and the memtable's lookups hash and match bytes.
//! 3. With a prefix extractor, keys sharing a prefix are contiguous in the
//!    order (RocksDB's requirement for prefix seek).
//! 4. [`Comparator::find_shortest_separator`] and
//!    [`Comparator::find_short_successor`] only ever shorten index keys: the
//!    defaults change nothing, which is always correct.
//!
//! Thread safety: comparators are shared by every reader, writer and
//! background job (`Send + Sync`).

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};

/// A total order on user keys (RocksDB's `Comparator`), set per column
/// family with `ColumnFamilyOptions::comparator`. Its name is stored in the
/// MANIFEST and checked at every open: give a different order a different
/// name.
pub trait Comparator: Send + Sync {
    /// The order's name, stored in the MANIFEST, each table and the OPTIONS
    /// file (RocksDB's built-ins: `leveldb.BytewiseComparator`,
    /// `rocksdb.ReverseBytewiseComparator`).
    fn name(&self) -> &str;

    /// How `a` compares with `b`. Keys compare equal only when their bytes
    /// are equal (module contract 2).
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering;

    /// May shorten `start` to a key `k` with `start <= k < limit`, when
    /// `start < limit` (index separators between data blocks). The default
    /// leaves `start` as it is.
    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]) {
        let _ = (start, limit);
    }

    /// May change `key` to a short key `>= key` (a table's last index key).
    /// The default leaves it as it is.
    fn find_short_successor(&self, key: &mut Vec<u8>) {
        let _ = key;
    }
}

/// The name of the bytewise order (RocksDB's and LevelDB's default).
pub const BYTEWISE_NAME: &str = "leveldb.BytewiseComparator";
/// The name of the reverse bytewise order (RocksDB's).
pub const REVERSE_BYTEWISE_NAME: &str = "rocksdb.ReverseBytewiseComparator";
/// The name of the bytewise order of keys with a u64 timestamp (RocksDB's
/// `BytewiseComparatorWithU64Ts()`).
pub const BYTEWISE_U64TS_NAME: &str = "leveldb.BytewiseComparator.u64ts";
/// The size of a user-defined timestamp: a u64, fixed64 little-endian at
/// the end of the user key (RocksDB's `EncodeU64Ts`).
pub const TIMESTAMP_SIZE: usize = 8;

/// Keys that end in a u64 timestamp (RocksDB's
/// `BytewiseComparatorWithU64Ts()`, docs/timestamps.md): the key without
/// its timestamp in bytewise order, then the newer timestamp first. Set
/// with `ColumnFamilyOptions::comparator = Some(comparator::bytewise_with_u64_ts())`.
#[derive(Debug, Clone, Copy, Default)]
pub struct BytewiseU64TsComparator;

impl Comparator for BytewiseU64TsComparator {
    fn name(&self) -> &str {
        BYTEWISE_U64TS_NAME
    }
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        compare_u64ts(a, b)
    }
}

/// The bytewise order of keys with a u64 timestamp, shared.
pub fn bytewise_with_u64_ts() -> Arc<dyn Comparator> {
    Arc::new(BytewiseU64TsComparator)
}

/// A key and its timestamp: the key without its last
/// [`TIMESTAMP_SIZE`] bytes, and those decoded (0 for a key shorter than
/// a timestamp, which the write path refuses).
#[inline]
pub fn split_timestamp(key: &[u8]) -> (&[u8], u64) {
    match key.len().checked_sub(TIMESTAMP_SIZE) {
        Some(n) => {
            let mut t = [0u8; TIMESTAMP_SIZE];
            t.copy_from_slice(&key[n..]);
            (&key[..n], u64::from_le_bytes(t))
        }
        None => (key, 0),
    }
}

/// `key` with `ts` appended (RocksDB's `AppendKeyWithMaxTimestamp` and
/// kin, for any timestamp).
pub fn with_timestamp(key: &[u8], ts: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(key.len() + TIMESTAMP_SIZE);
    v.extend_from_slice(key);
    v.extend_from_slice(&ts.to_le_bytes());
    v
}

#[inline]
fn compare_u64ts(a: &[u8], b: &[u8]) -> Ordering {
    let (ak, at) = split_timestamp(a);
    let (bk, bt) = split_timestamp(b);
    match bytewise_compare(ak, bk) {
        Ordering::Equal => bt.cmp(&at),
        o => o,
    }
}

/// Keys in `memcmp` order, shorter first on a common prefix (RocksDB's
/// `BytewiseComparator()`): the default.
#[derive(Debug, Clone, Copy, Default)]
pub struct BytewiseComparator;

impl Comparator for BytewiseComparator {
    fn name(&self) -> &str {
        BYTEWISE_NAME
    }
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        a.cmp(b)
    }
    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]) {
        bytewise_separator(start, limit);
    }
    fn find_short_successor(&self, key: &mut Vec<u8>) {
        bytewise_successor(key);
    }
}

/// The bytewise order reversed (RocksDB's `ReverseBytewiseComparator()`):
/// forward iteration visits keys from the largest bytewise down.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReverseBytewiseComparator;

impl Comparator for ReverseBytewiseComparator {
    fn name(&self) -> &str {
        REVERSE_BYTEWISE_NAME
    }
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        b.cmp(a)
    }
    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]) {
        reverse_separator(start, limit);
    }
}

/// The bytewise comparator, shared.
pub fn bytewise() -> Arc<dyn Comparator> {
    Arc::new(BytewiseComparator)
}

/// The reverse bytewise comparator, shared.
pub fn reverse_bytewise() -> Arc<dyn Comparator> {
    Arc::new(ReverseBytewiseComparator)
}

/// A built-in comparator by its name (the OPTIONS file's `comparator=`):
/// `leveldb.BytewiseComparator` or `rocksdb.ReverseBytewiseComparator`.
pub fn from_name(name: &str) -> Result<Arc<dyn Comparator>> {
    match name {
        BYTEWISE_NAME => Ok(bytewise()),
        REVERSE_BYTEWISE_NAME => Ok(reverse_bytewise()),
        BYTEWISE_U64TS_NAME => Ok(bytewise_with_u64_ts()),
        _ => Err(Error::invalid(format!(
            "{name:?} is not a built-in comparator ({BYTEWISE_NAME}, {REVERSE_BYTEWISE_NAME}, \
             {BYTEWISE_U64TS_NAME}); \
             set ColumnFamilyOptions::comparator in code"
        ))),
    }
}

/// `a.cmp(b)` for byte strings, eight bytes at a time as big-endian words:
/// keys are short, and a call to `memcmp` per comparison (the skip list's
/// searches make dozens per lookup) costs more than the comparison.
#[inline(always)]
pub fn bytewise_compare(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= n {
        let x = u64::from_be_bytes(a[i..i + 8].try_into().unwrap_or([0; 8]));
        let y = u64::from_be_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
        if x != y {
            return x.cmp(&y);
        }
        i += 8;
    }
    a[i..].cmp(&b[i..])
}

/// RocksDB's bytewise `FindShortestSeparator`: the common prefix and the
/// first differing byte of `start` plus one, when that stays below `limit`;
/// else `start` up to its first later byte that is not 0xff, plus one.
/// Unchanged when `start` is not below `limit` or one is a prefix of the other.
fn bytewise_separator(start: &mut Vec<u8>, limit: &[u8]) {
    let common = start.iter().zip(limit).take_while(|(a, b)| a == b).count();
    if common >= start.len() || common >= limit.len() || start[common] >= limit[common] {
        return;
    }
    if common + 1 < limit.len() || start[common] + 1 < limit[common] {
        // start[common] < limit[common], so the increment cannot overflow.
        start[common] += 1;
        start.truncate(common + 1);
        return;
    }
    // `limit` ends at the differing byte, one above `start`'s: keep that
    // byte and increment the first later byte of `start` that can be.
    if let Some(i) = (common + 1..start.len()).find(|&i| start[i] < 0xff) {
        start[i] += 1;
        start.truncate(i + 1);
    }
}

/// LevelDB's `FindShortSuccessor`: the first byte that is not 0xff, plus one.
fn bytewise_successor(key: &mut Vec<u8>) {
    if let Some(i) = key.iter().position(|&b| b != 0xff) {
        key[i] += 1;
        key.truncate(i + 1);
    }
}

/// RocksDB's reverse-bytewise `FindShortestSeparator`: in reverse order
/// `start < limit` means `start` is bytewise greater; `start` cut just after
/// the first byte where it is above `limit` stays bytewise greater than
/// `limit` and at most `start`.
fn reverse_separator(start: &mut Vec<u8>, limit: &[u8]) {
    let common = start.iter().zip(limit).take_while(|(a, b)| a == b).count();
    if common < start.len().min(limit.len()) && start[common] > limit[common] && common + 1 < start.len() {
        start.truncate(common + 1);
    }
}

/// An internal key's user key and packed trailer (`user_key ++
/// fixed64_le(seq << 8 | kind)`, docs/format.md "Internal keys"; `key`, the
/// layer above, builds them). Split here so that the order does not depend
/// on the layer that builds keys.
#[inline]
fn split_internal(ikey: &[u8]) -> (&[u8], u64) {
    match ikey.len().checked_sub(8) {
        Some(n) => {
            let mut t = [0u8; 8];
            t.copy_from_slice(&ikey[n..]);
            (&ikey[..n], u64::from_le_bytes(t))
        }
        None => (ikey, 0),
    }
}

/// The order a column family's keys are kept in, as every layer compares
/// them: the built-in orders without a virtual call, user comparators
/// through theirs. Cheap to clone (a user comparator is one shared count).
#[derive(Clone, Default)]
pub struct UserComparator(Order);

#[derive(Clone, Default)]
enum Order {
    #[default]
    Bytewise,
    Reverse,
    /// Keys ending in a u64 timestamp, newest first.
    U64Ts,
    /// Keys ending in a u64 timestamp compared without it: every version
    /// of a key is equal. The order of key ranges (a version's files, the
    /// compaction picker), never of entries.
    U64TsIgnored,
    Custom(Arc<dyn Comparator>),
}

impl UserComparator {
    /// The bytewise order (the default).
    pub const BYTEWISE: UserComparator = UserComparator(Order::Bytewise);

    /// The handle for `comparator`; the built-ins (known by name) compare
    /// without a virtual call.
    pub fn new(comparator: &Arc<dyn Comparator>) -> Self {
        match comparator.name() {
            BYTEWISE_NAME => UserComparator(Order::Bytewise),
            REVERSE_BYTEWISE_NAME => UserComparator(Order::Reverse),
            BYTEWISE_U64TS_NAME => UserComparator(Order::U64Ts),
            _ => UserComparator(Order::Custom(Arc::clone(comparator))),
        }
    }

    /// The handle for an option that may be unset (bytewise).
    pub fn from_option(comparator: Option<&Arc<dyn Comparator>>) -> Self {
        comparator.map_or(UserComparator::BYTEWISE, UserComparator::new)
    }

    /// The order's name.
    pub fn name(&self) -> &str {
        match &self.0 {
            Order::Bytewise => BYTEWISE_NAME,
            Order::Reverse => REVERSE_BYTEWISE_NAME,
            Order::U64Ts | Order::U64TsIgnored => BYTEWISE_U64TS_NAME,
            Order::Custom(c) => c.name(),
        }
    }

    /// The size of the timestamp at the end of every key: 8 for the u64
    /// timestamp order, else 0 (RocksDB's `Comparator::timestamp_size`).
    #[inline]
    pub fn timestamp_size(&self) -> usize {
        match self.0 {
            Order::U64Ts | Order::U64TsIgnored => TIMESTAMP_SIZE,
            _ => 0,
        }
    }

    /// `key` without its timestamp (itself in an order without them).
    #[inline]
    pub fn strip_timestamp<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        match self.timestamp_size() {
            0 => key,
            _ => split_timestamp(key).0,
        }
    }

    /// Whether `a` and `b` are versions of one key: the same bytes, or with
    /// timestamps the same bytes but for them.
    #[inline]
    pub fn same_key(&self, a: &[u8], b: &[u8]) -> bool {
        match self.0 {
            Order::U64Ts | Order::U64TsIgnored => split_timestamp(a).0 == split_timestamp(b).0,
            _ => a == b,
        }
    }

    /// The order of key ranges: for keys with timestamps, every version of
    /// a key compares equal, so a range never splits a key's versions (a
    /// version's files and the compaction picker use it); else this order.
    pub fn without_timestamp(&self) -> UserComparator {
        match self.0 {
            Order::U64Ts => UserComparator(Order::U64TsIgnored),
            _ => self.clone(),
        }
    }

    /// The order of keys with their timestamps taken off (an iterator's
    /// keys and bounds): bytewise for the u64 timestamp order, else this one.
    pub fn of_stripped_keys(&self) -> UserComparator {
        match self.0 {
            Order::U64Ts | Order::U64TsIgnored => UserComparator::BYTEWISE,
            _ => self.clone(),
        }
    }

    /// True for the bytewise order.
    pub fn is_bytewise(&self) -> bool {
        matches!(self.0, Order::Bytewise)
    }

    /// True for the reverse bytewise order (the built-in one).
    pub fn is_reverse_bytewise(&self) -> bool {
        matches!(self.0, Order::Reverse)
    }

    /// How user key `a` compares with user key `b`.
    #[inline(always)]
    pub fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        match &self.0 {
            Order::Bytewise => bytewise_compare(a, b),
            Order::Reverse => bytewise_compare(b, a),
            Order::U64Ts => compare_u64ts(a, b),
            Order::U64TsIgnored => bytewise_compare(split_timestamp(a).0, split_timestamp(b).0),
            Order::Custom(c) => c.compare(a, b),
        }
    }

    /// `a < b`.
    #[inline]
    pub fn lt(&self, a: &[u8], b: &[u8]) -> bool {
        self.compare(a, b) == Ordering::Less
    }

    /// `a <= b`.
    #[inline]
    pub fn le(&self, a: &[u8], b: &[u8]) -> bool {
        self.compare(a, b) != Ordering::Greater
    }

    /// The smaller of `a` and `b` (`a` when equal).
    pub fn min<'a>(&self, a: &'a [u8], b: &'a [u8]) -> &'a [u8] {
        if self.le(a, b) {
            a
        } else {
            b
        }
    }

    /// The larger of `a` and `b` (`a` when equal).
    pub fn max<'a>(&self, a: &'a [u8], b: &'a [u8]) -> &'a [u8] {
        if self.le(b, a) {
            a
        } else {
            b
        }
    }

    /// The order of internal keys: user key in this order, then sequence
    /// number and kind descending (docs/format.md, "Internal keys").
    /// Both must be internal keys (at least the 8-byte trailer); a shorter
    /// one compares as a bare user key with trailer 0.
    #[inline(always)]
    pub fn compare_internal(&self, a: &[u8], b: &[u8]) -> Ordering {
        let (au, at) = split_internal(a);
        let (bu, bt) = split_internal(b);
        match self.compare(au, bu) {
            Ordering::Equal => bt.cmp(&at),
            o => o,
        }
    }

    /// A short user key `s` with `start <= s < limit`, or `start` itself.
    pub fn shortest_separator(&self, start: &[u8], limit: &[u8]) -> Vec<u8> {
        let mut s = start.to_vec();
        match &self.0 {
            Order::Bytewise => bytewise_separator(&mut s, limit),
            Order::Reverse => reverse_separator(&mut s, limit),
            // A key's timestamp must stay whole: index keys are not shortened
            // (RocksDB's u64 timestamp comparator does the same).
            Order::U64Ts | Order::U64TsIgnored => {}
            Order::Custom(c) => c.find_shortest_separator(&mut s, limit),
        }
        s
    }

    /// A short user key `>= key`, or `key` itself.
    pub fn short_successor(&self, key: &[u8]) -> Vec<u8> {
        let mut s = key.to_vec();
        match &self.0 {
            Order::Bytewise => bytewise_successor(&mut s),
            Order::Reverse | Order::U64Ts | Order::U64TsIgnored => {}
            Order::Custom(c) => c.find_short_successor(&mut s),
        }
        s
    }
}

impl fmt::Debug for UserComparator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Handles are the same order when their names are (contract 1).
impl PartialEq for UserComparator {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for UserComparator {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shortlex: shorter keys first, then bytewise; a user comparator with
    /// neither hook, for the handle's virtual path.
    struct ShortLex;
    impl Comparator for ShortLex {
        fn name(&self) -> &str {
            "test.ShortLex"
        }
        fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
            a.len().cmp(&b.len()).then_with(|| a.cmp(b))
        }
    }

    #[test]
    fn built_ins_are_recognised_by_name_and_order_as_named() {
        let fwd = UserComparator::new(&bytewise());
        let rev = UserComparator::new(&reverse_bytewise());
        assert!(fwd.is_bytewise() && !rev.is_bytewise());
        assert_eq!(fwd.compare(b"a", b"ab"), Ordering::Less);
        assert_eq!(rev.compare(b"a", b"ab"), Ordering::Greater);
        assert_eq!(rev.name(), REVERSE_BYTEWISE_NAME);
        let custom = UserComparator::new(&(Arc::new(ShortLex) as Arc<dyn Comparator>));
        assert_eq!(custom.compare(b"b", b"aa"), Ordering::Less);
        assert_eq!(custom.name(), "test.ShortLex");
        assert_eq!(from_name(REVERSE_BYTEWISE_NAME).unwrap().name(), REVERSE_BYTEWISE_NAME);
        let e = from_name("my.Order").err().unwrap().to_string();
        assert!(e.contains("my.Order") && e.contains("comparator"), "{e}");
    }

    #[test]
    fn internal_order_is_user_order_then_newest_first() {
        // Internal keys of values (kind 1) built by hand: `key` is the
        // layer above.
        let ikey = |user: &[u8], seq: u64| [user, &((seq << 8) | 1).to_le_bytes()].concat();
        let rev = UserComparator::new(&reverse_bytewise());
        let (a9, a3, b1) = (ikey(b"a", 9), ikey(b"a", 3), ikey(b"b", 1));
        assert_eq!(rev.compare_internal(&b1, &a9), Ordering::Less);
        assert_eq!(rev.compare_internal(&a9, &a3), Ordering::Less);
        assert_eq!(UserComparator::BYTEWISE.compare_internal(&a3, &b1), Ordering::Less);
    }

    proptest::proptest! {
        /// The word-at-a-time comparison is the slices' own.
        #[test]
        fn bytewise_compare_is_slice_order(
            a in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xff]), 0..24),
            b in proptest::collection::vec(proptest::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xff]), 0..24),
        ) {
            proptest::prop_assert_eq!(bytewise_compare(&a, &b), a.cmp(&b));
            let common: Vec<u8> = a.iter().chain(&b).copied().collect();
            proptest::prop_assert_eq!(bytewise_compare(&common, &a), common.as_slice().cmp(&a));
        }

        /// Separators and successors stay within their bounds in both
        /// built-in orders, and the user comparator's defaults change nothing.
        #[test]
        fn separators_stay_between_their_keys(
            a in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8),
            b in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..8),
        ) {
            let custom: Arc<dyn Comparator> = Arc::new(ShortLex);
            for cmp in [UserComparator::new(&bytewise()), UserComparator::new(&reverse_bytewise()), UserComparator::new(&custom)] {
                let (lo, hi) = if cmp.le(&a, &b) { (&a, &b) } else { (&b, &a) };
                let sep = cmp.shortest_separator(lo, hi);
                proptest::prop_assert!(cmp.le(lo, &sep), "{cmp:?} {lo:?} {hi:?} -> {sep:?}");
                proptest::prop_assert!(lo == hi || cmp.lt(&sep, hi), "{cmp:?} {lo:?} {hi:?} -> {sep:?}");
                let succ = cmp.short_successor(lo);
                proptest::prop_assert!(cmp.le(lo, &succ), "{cmp:?} {lo:?} -> {succ:?}");
            }
        }
    }
}
