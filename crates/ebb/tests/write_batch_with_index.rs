//! `WriteBatchWithIndex` (docs/transactions.md): reads from the batch alone
//! and from the batch over the database, in both overwrite modes, in
//! families of either order, at snapshots; merges, savepoints, the errors
//! it reports; and its iterator over a database iterator against a model,
//! through random moves.
//!
//! The property test draws a database (keys in tables, in the memtable,
//! range-deleted), a batch of puts, deletes, single deletes and merges
//! with savepoints set, rolled back and popped, and iterators with or
//! without bounds, in a bounded prefix mode or not, at a snapshot or not,
//! in the bytewise or the reverse bytewise order; after every move the
//! iterator must show the model of the database with the batch written
//! over it. `EBB_WBWI_CASES` sets the number of cases (default 300),
//! `EBB_WBWI_BASE` the first case's seed (default 0), and `EBB_WBWI_SEED`
//! runs that one case alone. A failure names its seed and the moves.

mod common;

use std::sync::Arc;

use common::prefix_cursor::{bytewise, reverse_bytewise, Order, PrefixCursor};
use common::{manual_options, Model};
use ebb::comparator;
use ebb::fs::MemFs;
use ebb::merge_operator::{self, MergeOperator};
use ebb::prefix::{self, SliceTransform};
use ebb::{BatchOp, BatchValue, ColumnFamilyHandle, Db, Error, Options, ReadOptions, WriteBatchWithIndex};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

fn show(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

fn stringappend() -> Option<Arc<dyn MergeOperator>> {
    Some(merge_operator::from_name("stringappend").unwrap())
}

/// Options on `fs` with the string-append merge operator, no automatic
/// compaction and memtables that switch only when flushed.
fn options(fs: &MemFs) -> Options {
    let mut o = manual_options(fs);
    o.merge_operator = stringappend();
    o.write_buffer_size = 1 << 20;
    o
}

fn found(v: &str) -> BatchValue {
    BatchValue::Found(v.as_bytes().to_vec())
}

fn some(v: &str) -> Option<Vec<u8>> {
    Some(v.as_bytes().to_vec())
}

/// Every key and value of `it` from the first forwards, and from the last
/// backwards (reversed back), which must agree.
fn entries(it: &mut ebb::BaseDeltaIterator<'_>) -> Vec<(String, String)> {
    let mut forward = Vec::new();
    it.seek_to_first();
    while it.valid() {
        forward.push((show(it.key()), show(it.value())));
        it.next();
    }
    it.status().unwrap();
    let mut backward = Vec::new();
    it.seek_to_last();
    while it.valid() {
        backward.push((show(it.key()), show(it.value())));
        it.prev();
    }
    it.status().unwrap();
    backward.reverse();
    assert_eq!(forward, backward, "forward and backward scans");
    forward
}

/// The key an update is to.
fn op_key(op: BatchOp<'_>) -> String {
    match op {
        BatchOp::Put { key, .. }
        | BatchOp::Delete { key }
        | BatchOp::SingleDelete { key }
        | BatchOp::Merge { key, .. }
        | BatchOp::PutEntity { key, .. }
        | BatchOp::DeleteRange { begin: key, .. } => show(key),
    }
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn reads_from_the_batch_alone_in_both_overwrite_modes() {
    let mut o = Options::default();
    o.merge_operator = stringappend();
    for overwrite in [false, true] {
        let mut b = WriteBatchWithIndex::new(overwrite);
        b.put(b"a", b"1");
        b.put(b"a", b"2");
        b.delete(b"b");
        b.put(b"c", b"base");
        b.merge(b"c", b"x");
        b.merge(b"c", b"y");
        b.merge(b"d", b"only");
        b.put(b"e", b"1");
        b.single_delete(b"e");
        b.put(b"f", b"1");
        b.delete(b"f");
        b.merge(b"f", b"z");
        b.merge(b"g", b"lost");
        b.put(b"g", b"kept");
        let ctx = format!("overwrite_key={overwrite}");
        assert_eq!(b.len(), 14, "{ctx}: the batch keeps every update");
        assert_eq!(b.lookup_in_batch(&o, b"a").unwrap(), found("2"), "{ctx}");
        assert_eq!(b.lookup_in_batch(&o, b"b").unwrap(), BatchValue::Deleted, "{ctx}");
        assert_eq!(b.lookup_in_batch(&o, b"c").unwrap(), found("base,x,y"), "{ctx}");
        let e = b.lookup_in_batch(&o, b"d").unwrap_err();
        assert!(matches!(e, Error::MergeInProgress(_)), "{ctx}: {e}");
        assert_eq!(b.lookup_in_batch(&o, b"e").unwrap(), BatchValue::Deleted, "{ctx}: a single delete");
        assert_eq!(b.lookup_in_batch(&o, b"f").unwrap(), found("z"), "{ctx}: a merge onto a delete");
        assert_eq!(b.lookup_in_batch(&o, b"g").unwrap(), found("kept"), "{ctx}");
        assert_eq!(b.lookup_in_batch(&o, b"h").unwrap(), BatchValue::NotFound, "{ctx}");
        assert_eq!(b.get_from_batch(&o, b"a").unwrap(), some("2"), "{ctx}");
        assert_eq!(b.get_from_batch(&o, b"b").unwrap(), None, "{ctx}");
        assert_eq!(b.get_from_batch(&o, b"h").unwrap(), None, "{ctx}");
        // The index per key: every update, or those since the last put or
        // deletion.
        let got: Vec<BatchOp<'_>> = b.iter_batch().collect();
        let mut want = vec![BatchOp::Put { key: b"a", value: b"1" }, BatchOp::Put { key: b"a", value: b"2" }];
        want.extend([
            BatchOp::Delete { key: b"b" },
            BatchOp::Put { key: b"c", value: b"base" },
            BatchOp::Merge { key: b"c", value: b"x" },
            BatchOp::Merge { key: b"c", value: b"y" },
            BatchOp::Merge { key: b"d", value: b"only" },
            BatchOp::Put { key: b"e", value: b"1" },
            BatchOp::SingleDelete { key: b"e" },
            BatchOp::Put { key: b"f", value: b"1" },
            BatchOp::Delete { key: b"f" },
            BatchOp::Merge { key: b"f", value: b"z" },
            BatchOp::Merge { key: b"g", value: b"lost" },
            BatchOp::Put { key: b"g", value: b"kept" },
        ]);
        if overwrite {
            want.retain(|op| {
                !matches!(
                    op,
                    BatchOp::Put { key: b"a", value: b"1" }
                        | BatchOp::Put { key: b"e", .. }
                        | BatchOp::Put { key: b"f", .. }
                        | BatchOp::Merge { key: b"g", .. }
                )
            });
        }
        assert_eq!(got, want, "{ctx}");
        // Cleared, it holds nothing.
        b.clear();
        assert!(b.is_empty());
        assert_eq!(b.lookup_in_batch(&o, b"a").unwrap(), BatchValue::NotFound);
        assert_eq!(b.iter_batch().count(), 0);
    }
}

#[test]
fn reads_over_the_database_merge_onto_its_value_at_the_snapshot() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    db.put(b"a", b"db").unwrap();
    db.merge(b"a", b"m1").unwrap();
    db.put(b"b", b"db").unwrap();
    db.put(b"c", b"db").unwrap();
    db.flush(true).unwrap();
    db.merge(b"a", b"m2").unwrap();
    db.put(b"d", b"old").unwrap();
    let snapshot = db.snapshot();
    db.put(b"d", b"new").unwrap();
    db.merge(b"a", b"m3").unwrap();
    for overwrite in [false, true] {
        let ctx = format!("overwrite_key={overwrite}");
        let mut b = WriteBatchWithIndex::new(overwrite);
        b.merge(b"a", b"w");
        b.delete(b"b");
        b.put(b"c", b"batch");
        b.merge(b"c", b"w");
        b.merge(b"d", b"w");
        b.merge(b"e", b"w");
        b.single_delete(b"f");
        let latest = ReadOptions::default();
        let read = |key: &[u8], ro: &ReadOptions<'_>| b.get_from_batch_and_db(&db, ro, key).unwrap();
        assert_eq!(read(b"a", &latest), some("db,m1,m2,m3,w"), "{ctx}: operands onto the merged db value");
        assert_eq!(read(b"b", &latest), None, "{ctx}: the batch deletes it");
        assert_eq!(read(b"c", &latest), some("batch,w"), "{ctx}: the batch's put, not the db's");
        assert_eq!(read(b"d", &latest), some("new,w"), "{ctx}");
        assert_eq!(read(b"e", &latest), some("w"), "{ctx}: onto nothing");
        assert_eq!(read(b"f", &latest), None, "{ctx}");
        assert_eq!(read(b"g", &latest), None, "{ctx}: in neither");
        let at = snapshot.read_options();
        assert_eq!(read(b"a", &at), some("db,m1,m2,w"), "{ctx}: at the snapshot");
        assert_eq!(read(b"d", &at), some("old,w"), "{ctx}: at the snapshot");
        let keys: Vec<&[u8]> = vec![b"a", b"b", b"c", b"d", b"e", b"f", b"g"];
        for ro in [&latest, &at] {
            let many = b.multi_get_from_batch_and_db(&db, ro, &keys);
            let one: Vec<_> = keys.iter().map(|k| read(k, ro)).collect();
            assert_eq!(many.into_iter().map(Result::unwrap).collect::<Vec<_>>(), one, "{ctx}: multi-get");
        }
        let mut it = b.iterator_with_base(db.iter(snapshot.read_options()));
        assert_eq!(
            entries(&mut it),
            pairs(&[("a", "db,m1,m2,w"), ("c", "batch,w"), ("d", "old,w"), ("e", "w")]),
            "{ctx}: iterator at the snapshot"
        );
        drop(it);
        // Written, the database holds what the reads said.
        let before: Vec<_> = keys.iter().map(|k| read(k, &latest)).collect();
        db.write(b.write_batch()).unwrap();
        let after: Vec<_> = keys.iter().map(|k| db.get(k).unwrap()).collect();
        assert_eq!(after, before, "{ctx}: written");
        // Undo for the other mode.
        db.put(b"a", b"db").unwrap();
        db.merge(b"a", b"m1").unwrap();
        db.merge(b"a", b"m2").unwrap();
        db.merge(b"a", b"m3").unwrap();
        db.put(b"b", b"db").unwrap();
        db.put(b"c", b"db").unwrap();
        db.put(b"d", b"new").unwrap();
        db.delete(b"e").unwrap();
    }
}

#[test]
fn counters_add_up_through_the_batch() {
    let fs = MemFs::new();
    let mut o = options(&fs);
    o.merge_operator = Some(merge_operator::from_name("uint64add").unwrap());
    let db = Db::open("/db", o).unwrap();
    let n = |v: u64| v.to_le_bytes().to_vec();
    db.put(b"hits", &n(40)).unwrap();
    let mut b = WriteBatchWithIndex::for_db(&db, true);
    b.merge(b"hits", &n(1));
    b.merge(b"hits", &n(1));
    assert_eq!(b.get_from_batch_and_db(&db, &ReadOptions::default(), b"hits").unwrap(), Some(n(42)));
    // The operator of `for_db`'s database, without one in the options.
    b.put(b"other", &n(5));
    b.merge(b"other", &n(2));
    assert_eq!(b.get_from_batch(&Options::default(), b"other").unwrap(), Some(n(7)));
}

#[test]
fn families_in_the_reverse_order_keep_their_order_and_operator() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let mut rev_options = options(&fs);
    rev_options.comparator = Some(comparator::reverse_bytewise());
    let rev = db.create_column_family("rev", &rev_options).unwrap();
    let mut plain = options(&fs);
    plain.merge_operator = None;
    let plain = db.create_column_family("plain", &plain).unwrap();
    db.put_cf(&rev, b"b", b"db").unwrap();
    db.put_cf(&rev, b"d", b"db").unwrap();
    db.flush_cf(&rev, true).unwrap();
    db.put_cf(&rev, b"f", b"db").unwrap();
    for overwrite in [false, true] {
        let ctx = format!("overwrite_key={overwrite}");
        let mut b = WriteBatchWithIndex::new(overwrite);
        for k in ["a", "e", "c", "g"] {
            b.put_cf(&rev, k.as_bytes(), b"batch");
        }
        b.merge_cf(&rev, b"d", b"w");
        b.delete_cf(&rev, b"f");
        b.put(b"a", b"default family");
        b.put_cf(&plain, b"a", b"plain");
        let keys: Vec<String> = b.iter_batch_cf(&rev).unwrap().map(op_key).collect();
        assert_eq!(keys, ["g", "f", "e", "d", "c", "a"], "{ctx}: the family's order");
        assert!(matches!(b.get_from_batch_cf(&rev, b"d"), Err(Error::MergeInProgress(_))), "{ctx}");
        assert_eq!(b.get_from_batch_cf(&rev, b"a").unwrap(), some("batch"), "{ctx}");
        assert_eq!(b.get_from_batch_cf(&plain, b"a").unwrap(), some("plain"), "{ctx}: each family its own");
        assert_eq!(b.get_from_batch(&Options::default(), b"a").unwrap(), some("default family"), "{ctx}");
        let ro = ReadOptions::default();
        assert_eq!(b.get_from_batch_and_db_cf(&db, &ro, &rev, b"d").unwrap(), some("db,w"), "{ctx}");
        let mut it = b.iterator_with_base_cf(&rev, db.iter_cf(&rev, ReadOptions::default()));
        assert_eq!(
            entries(&mut it),
            pairs(&[("g", "batch"), ("e", "batch"), ("d", "db,w"), ("c", "batch"), ("b", "db"), ("a", "batch")]),
            "{ctx}"
        );
        // Bounds in the family's order: from "e" down to "b" excluded.
        let bounded = ReadOptions {
            iterate_lower_bound: Some(b"e".to_vec()),
            iterate_upper_bound: Some(b"b".to_vec()),
            ..ReadOptions::default()
        };
        let mut it = b.iterator_with_base_cf(&rev, db.iter_cf(&rev, bounded));
        assert_eq!(entries(&mut it), pairs(&[("e", "batch"), ("d", "db,w"), ("c", "batch")]), "{ctx}");
        it.seek(b"z");
        assert_eq!(it.key(), b"e", "{ctx}: a seek before the lower bound lands on it");
        it.seek_for_prev(b"a");
        assert_eq!(it.key(), b"c", "{ctx}: a seek past the upper bound lands before it");
        // The batch written holds what the iterator showed.
        db.write(b.write_batch()).unwrap();
        let mut scan = db.iter_cf(&rev, ReadOptions::default());
        scan.seek_to_first();
        let mut got = Vec::new();
        while scan.valid() {
            got.push((show(scan.key()), show(scan.value())));
            scan.next();
        }
        assert_eq!(got[..3], pairs(&[("g", "batch"), ("e", "batch"), ("d", "db,w")])[..], "{ctx}");
        db.put_cf(&rev, b"d", b"db").unwrap();
        db.put_cf(&rev, b"f", b"db").unwrap();
        for k in ["a", "c", "e", "g"] {
            db.delete_cf(&rev, k.as_bytes()).unwrap();
        }
    }
}

#[test]
fn merges_without_an_operator_are_errors() {
    let fs = MemFs::new();
    let mut o = options(&fs);
    o.merge_operator = None;
    let db = Db::open("/db", o).unwrap();
    db.put(b"k", b"db").unwrap();
    let mut b = WriteBatchWithIndex::new(false);
    b.put(b"p", b"1");
    b.merge(b"p", b"2");
    b.merge(b"k", b"w");
    let invalid = |r: ebb::Result<Option<Vec<u8>>>| match r {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("merge operator"), "{m}"),
        other => panic!("not an invalid argument: {other:?}"),
    };
    invalid(b.get_from_batch(&Options::default(), b"p"));
    invalid(b.get_from_batch_and_db(&db, &ReadOptions::default(), b"p"));
    invalid(b.get_from_batch_and_db(&db, &ReadOptions::default(), b"k"));
    // With nothing under the operands in the batch, the batch alone cannot
    // say: a merge in progress, operator or not.
    assert!(matches!(b.get_from_batch(&Options::default(), b"k"), Err(Error::MergeInProgress(_))));
    let mut with_operator = Options::default();
    with_operator.merge_operator = stringappend();
    assert!(matches!(b.get_from_batch(&with_operator, b"k"), Err(Error::MergeInProgress(_))));
    assert_eq!(b.get_from_batch(&with_operator, b"p").unwrap(), some("1,2"));
    // The iterator stops at the first merge, invalid, and says why; a
    // seek past it goes on.
    let mut it = b.iterator_with_base(db.iter(ReadOptions::default()));
    it.seek_to_first();
    assert!(!it.valid());
    assert!(matches!(it.status(), Err(Error::InvalidArgument(_))), "{:?}", it.status());
    it.seek(b"l");
    assert!(!it.valid(), "p has operands too");
    let mut b = WriteBatchWithIndex::new(false);
    b.merge(b"k", b"w");
    b.put(b"z", b"1");
    let mut it = b.iterator_with_base(db.iter(ReadOptions::default()));
    it.seek(b"l");
    assert_eq!((it.valid(), it.key()), (true, &b"z"[..]));
    it.status().unwrap();
    // A merge operator that fails is corruption, named.
    struct Fails;
    impl MergeOperator for Fails {
        fn name(&self) -> &str {
            "Fails"
        }
        fn full_merge(&self, _: &[u8], _: Option<&[u8]>, _: &[&[u8]]) -> Option<Vec<u8>> {
            None
        }
    }
    let mut failing = Options::default();
    failing.merge_operator = Some(Arc::new(Fails));
    let mut b = WriteBatchWithIndex::new(false);
    b.put(b"p", b"1");
    b.merge(b"p", b"2");
    let e = b.get_from_batch(&failing, b"p").unwrap_err();
    assert!(e.is_corruption() && e.to_string().contains("Fails"), "{e}");
}

#[test]
fn savepoints_roll_back_the_batch_and_the_index() {
    let mut o = Options::default();
    o.merge_operator = stringappend();
    for overwrite in [false, true] {
        let ctx = format!("overwrite_key={overwrite}");
        let mut b = WriteBatchWithIndex::new(overwrite);
        assert!(matches!(b.rollback_to_save_point(), Err(Error::NotFound(_))), "{ctx}");
        assert!(matches!(b.pop_save_point(), Err(Error::NotFound(_))), "{ctx}");
        b.put(b"a", b"1");
        b.merge(b"m", b"x");
        let first = b.write_batch().clone();
        b.set_save_point();
        b.put(b"a", b"2");
        b.delete(b"m");
        b.put(b"b", b"1");
        let second = b.write_batch().clone();
        b.set_save_point();
        b.single_delete(b"a");
        b.merge(b"b", b"y");
        b.set_save_point();
        b.put(b"c", b"1");
        // Popped: its updates stay, the rollback goes to the one before.
        b.pop_save_point().unwrap();
        assert_eq!(b.get_from_batch(&o, b"c").unwrap(), some("1"), "{ctx}");
        b.rollback_to_save_point().unwrap();
        assert_eq!(b.write_batch(), &second, "{ctx}: the batch's bytes as they were");
        assert_eq!(b.get_from_batch(&o, b"a").unwrap(), some("2"), "{ctx}");
        assert_eq!(b.get_from_batch(&o, b"b").unwrap(), some("1"), "{ctx}");
        assert_eq!(b.get_from_batch(&o, b"c").unwrap(), None, "{ctx}");
        assert_eq!(b.lookup_in_batch(&o, b"m").unwrap(), BatchValue::Deleted, "{ctx}");
        b.rollback_to_save_point().unwrap();
        assert_eq!(b.write_batch(), &first, "{ctx}");
        assert_eq!(b.len(), 2);
        // The put of "a" that overwrite_key dropped from the index is back.
        assert_eq!(b.get_from_batch(&o, b"a").unwrap(), some("1"), "{ctx}");
        assert!(matches!(b.get_from_batch(&o, b"m"), Err(Error::MergeInProgress(_))), "{ctx}");
        assert_eq!(b.get_from_batch(&o, b"b").unwrap(), None, "{ctx}");
        let keys: Vec<String> = b.iter_batch().map(op_key).collect();
        assert_eq!(keys, ["a", "m"], "{ctx}");
        assert!(matches!(b.rollback_to_save_point(), Err(Error::NotFound(_))), "{ctx}: none left");
        assert_eq!(b.write_batch(), &first, "{ctx}: a refused rollback changes nothing");
        // Clearing forgets the savepoints.
        b.set_save_point();
        b.clear();
        assert!(matches!(b.rollback_to_save_point(), Err(Error::NotFound(_))), "{ctx}");
        // Writes after a rollback are indexed as any.
        b.set_save_point();
        b.put(b"x", b"1");
        b.rollback_to_save_point().unwrap();
        b.put(b"y", b"2");
        assert_eq!(b.get_from_batch(&o, b"x").unwrap(), None, "{ctx}");
        assert_eq!(b.get_from_batch(&o, b"y").unwrap(), some("2"), "{ctx}");
        assert_eq!(b.len(), 1, "{ctx}");
    }
}

#[test]
fn range_deletions_are_not_supported() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let cf = db.cf_handle("default").unwrap();
    let mut b = WriteBatchWithIndex::new(false);
    b.put(b"a", b"1");
    let before = b.write_batch().clone();
    assert!(matches!(b.delete_range(b"a", b"z"), Err(Error::NotSupported(_))));
    assert!(matches!(b.delete_range_cf(&cf, b"a", b"z"), Err(Error::NotSupported(_))));
    assert_eq!(b.write_batch(), &before, "nothing added");
    assert_eq!(b.get_from_batch(&Options::default(), b"a").unwrap(), some("1"));
}

#[test]
fn a_dropped_family_is_refused_on_reads_and_when_written() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let cf: ColumnFamilyHandle = db.create_column_family("gone", options(&fs)).unwrap();
    let mut b = WriteBatchWithIndex::new(false);
    b.put_cf(&cf, b"k", b"v");
    db.drop_column_family(&cf).unwrap();
    b.put_cf(&cf, b"k2", b"v");
    let dropped = |e: Error| assert!(matches!(e, Error::InvalidArgument(ref m) if m.contains("dropped")), "{e}");
    dropped(b.get_from_batch_cf(&cf, b"k").unwrap_err());
    dropped(b.lookup_in_batch_cf(&cf, b"k").unwrap_err());
    dropped(b.get_from_batch_and_db_cf(&db, &ReadOptions::default(), &cf, b"k").unwrap_err());
    for r in b.multi_get_from_batch_and_db_cf(&db, &ReadOptions::default(), &cf, &[&b"k"[..], &b"x"[..]]) {
        dropped(r.unwrap_err());
    }
    assert!(b.iter_batch_cf(&cf).is_err());
    let mut it = b.iterator_with_base_cf(&cf, db.iter_cf(&cf, ReadOptions::default()));
    it.seek_to_first();
    assert!(!it.valid());
    dropped(it.status().unwrap_err());
    drop(it);
    assert!(db.write(b.write_batch()).is_err(), "the write is refused");
}

#[test]
fn an_iterator_over_a_base_of_another_order_is_refused() {
    let fs = MemFs::new();
    let mut o = options(&fs);
    o.comparator = Some(comparator::reverse_bytewise());
    let db = Db::open("/db", o).unwrap();
    db.put(b"a", b"db").unwrap();
    let mut b = WriteBatchWithIndex::new(false);
    b.put(b"b", b"batch");
    let mut it = b.iterator_with_base(db.iter(ReadOptions::default()));
    it.seek_to_first();
    assert!(!it.valid());
    assert!(matches!(it.status(), Err(Error::InvalidArgument(ref m)) if m.contains("ReverseBytewise")));
    for mut b in [
        WriteBatchWithIndex::for_db(&db, false),
        WriteBatchWithIndex::with_comparator(comparator::reverse_bytewise(), false),
    ] {
        b.put(b"b", b"batch");
        let mut it = b.iterator_with_base(db.iter(ReadOptions::default()));
        assert_eq!(entries(&mut it), pairs(&[("b", "batch"), ("a", "db")]));
    }
}

// The property test.

/// Keys are drawn over this alphabet; seek targets and bounds also use `0`
/// and `d`, before and after every key byte.
const ALPHABET: &[u8] = b"abc";

fn random_key(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(1..=3);
    (0..len).map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())]).collect()
}

fn random_target(rng: &mut StdRng) -> Vec<u8> {
    let mut k = random_key(rng);
    match rng.gen_range(0..10) {
        0 => Vec::new(),
        1 => {
            let i = rng.gen_range(0..k.len());
            k[i] = if rng.gen_bool(0.5) { b'0' } else { b'd' };
            k
        }
        _ => k,
    }
}

/// No key is in its domain: a model cursor in total order.
struct NoPrefix;

impl SliceTransform for NoPrefix {
    fn name(&self) -> &str {
        "test.NoPrefix"
    }
    fn transform<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        key
    }
    fn in_domain(&self, _key: &[u8]) -> bool {
        false
    }
}

/// One update of the batch, as the model keeps it.
#[derive(Debug, Clone)]
enum Update {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    SingleDelete(Vec<u8>),
    Merge(Vec<u8>, Vec<u8>),
}

impl Update {
    fn key(&self) -> &[u8] {
        match self {
            Update::Put(k, _) | Update::Delete(k) | Update::SingleDelete(k) | Update::Merge(k, _) => k,
        }
    }
}

fn append(existing: Option<&Vec<u8>>, operand: &[u8]) -> Vec<u8> {
    match existing {
        Some(v) => [v.as_slice(), b",", operand].concat(),
        None => operand.to_vec(),
    }
}

/// `view` with `updates` written over it.
fn written(view: &Model, updates: &[Update]) -> Model {
    let mut m = view.clone();
    for u in updates {
        match u {
            Update::Put(k, v) => {
                m.insert(k.clone(), v.clone());
            }
            Update::Delete(k) | Update::SingleDelete(k) => {
                m.remove(k);
            }
            Update::Merge(k, v) => {
                let merged = append(m.get(k), v);
                m.insert(k.clone(), merged);
            }
        }
    }
    m
}

/// What the batch alone says of `key`: `None` for a merge in progress.
fn batch_alone(updates: &[Update], key: &[u8]) -> Option<BatchValue> {
    let mut operands = Vec::new();
    let mut under = None;
    for u in updates.iter().rev().filter(|u| u.key() == key) {
        match u {
            Update::Merge(_, v) => operands.push(v.clone()),
            Update::Put(_, v) => {
                under = Some(Some(v.clone()));
                break;
            }
            Update::Delete(_) | Update::SingleDelete(_) => {
                under = Some(None);
                break;
            }
        }
    }
    let Some(mut value) = under else {
        return operands.is_empty().then_some(BatchValue::NotFound);
    };
    for op in operands.iter().rev() {
        value = Some(append(value.as_ref(), op));
    }
    Some(value.map_or(BatchValue::Deleted, BatchValue::Found))
}

/// Counts of what the cases covered, printed at the end.
#[derive(Default, Debug)]
struct Coverage {
    cases: u64,
    moves: u64,
    /// A move in the other direction from a valid position that landed on
    /// a key.
    direction_changes_valid: u64,
    rollbacks: u64,
    prefix_mode: u64,
    bounded: u64,
    at_snapshot: u64,
    /// Positions at a key of the batch whose merge operands apply to the
    /// database's value.
    merged_onto_base: u64,
}

fn run_case(seed: u64, cov: &mut Coverage) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = MemFs::new();
    let mut o = options(&fs);
    let reverse = rng.gen_bool(0.4);
    let order: Order = if reverse { reverse_bytewise } else { bytewise };
    if reverse {
        o.comparator = Some(comparator::reverse_bytewise());
    }
    let extractor: Option<Arc<dyn SliceTransform>> = match rng.gen_range(0..4) {
        0 => Some(prefix::fixed(1)),
        1 => Some(prefix::fixed(2)),
        _ => None,
    };
    o.prefix_extractor = extractor.clone();
    let db = Db::open("/db", o).map_err(|e| e.to_string())?;
    let mut counter = 0u64;
    let mut value = |what: &str| {
        counter += 1;
        format!("{what}{counter}").into_bytes()
    };

    // The database: tables, then the memtable, with a snapshot between
    // them sometimes.
    let mut model = Model::new();
    let mut snapshot = None;
    for phase in 0..2 {
        for _ in 0..rng.gen_range(0..40) {
            let k = random_key(&mut rng);
            match rng.gen_range(0..10) {
                0..=4 => {
                    let v = value("v");
                    db.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                5 | 6 => {
                    db.delete(&k).unwrap();
                    model.remove(&k);
                }
                7 | 8 => {
                    let v = value("m");
                    db.merge(&k, &v).unwrap();
                    let merged = append(model.get(&k), &v);
                    model.insert(k, merged);
                }
                _ => {
                    let other = random_key(&mut rng);
                    let (begin, end) = if order(&k, &other).is_lt() { (k, other) } else { (other, k) };
                    db.delete_range(&begin, &end).unwrap();
                    model.retain(|k, _| order(k, &begin).is_lt() || !order(k, &end).is_lt());
                }
            }
        }
        if phase == 0 {
            db.flush(true).unwrap();
            if rng.gen_bool(0.3) {
                snapshot = Some((db.snapshot(), model.clone()));
            }
        }
    }

    // The batch, with savepoints.
    let overwrite = rng.gen_bool(0.5);
    let mut b = match rng.gen_range(0..3) {
        0 => WriteBatchWithIndex::for_db(&db, overwrite),
        _ if reverse => WriteBatchWithIndex::with_comparator(comparator::reverse_bytewise(), overwrite),
        _ => WriteBatchWithIndex::new(overwrite),
    };
    let mut updates: Vec<Update> = Vec::new();
    let mut save_points: Vec<usize> = Vec::new();
    let mut trace = vec![format!(
        "seed {seed}: reverse={reverse} prefix={:?} overwrite_key={overwrite} snapshot={}",
        extractor.as_ref().map(|x| x.name().to_string()),
        snapshot.is_some()
    )];
    for _ in 0..rng.gen_range(0..50) {
        let k = random_key(&mut rng);
        let u = match rng.gen_range(0..20) {
            0..=6 => Update::Put(k, value("b")),
            7..=9 => Update::Delete(k),
            10 | 11 => Update::SingleDelete(k),
            12..=16 => Update::Merge(k, value("w")),
            17 => {
                b.set_save_point();
                save_points.push(updates.len());
                continue;
            }
            18 => {
                let r = b.rollback_to_save_point();
                match save_points.pop() {
                    Some(n) => {
                        r.map_err(|e| format!("{}: rollback: {e}", trace.join(", ")))?;
                        updates.truncate(n);
                        cov.rollbacks += 1;
                    }
                    None if matches!(r, Err(Error::NotFound(_))) => {}
                    None => return Err(format!("{}: a rollback without a savepoint gave {r:?}", trace.join(", "))),
                }
                continue;
            }
            _ => {
                let r = b.pop_save_point();
                if save_points.pop().is_some() != r.is_ok() {
                    return Err(format!("{}: pop_save_point gave {r:?}", trace.join(", ")));
                }
                continue;
            }
        };
        match &u {
            Update::Put(k, v) => b.put(k, v),
            Update::Delete(k) => b.delete(k),
            Update::SingleDelete(k) => b.single_delete(k),
            Update::Merge(k, v) => b.merge(k, v),
        }
        updates.push(u);
    }
    trace.push(format!("{} updates in the batch", updates.len()));
    if b.len() != updates.len() {
        return Err(format!("{}: the batch holds {} updates", trace.join(", "), b.len()));
    }

    // The batch's index, key by key.
    let mut keys: Vec<Vec<u8>> = updates.iter().map(|u| u.key().to_vec()).collect();
    keys.sort_by(|a, c| order(a, c));
    keys.dedup();
    let mut want_entries = Vec::new();
    for k in &keys {
        let of_key: Vec<&Update> = updates.iter().filter(|u| u.key() == k.as_slice()).collect();
        let from =
            if overwrite { of_key.iter().rposition(|u| !matches!(u, Update::Merge(..))).unwrap_or(0) } else { 0 };
        want_entries.extend(of_key[from..].iter().map(|u| format!("{u:?}")));
    }
    let got_entries: Vec<String> = b
        .iter_batch()
        .map(|op| {
            format!(
                "{:?}",
                match op {
                    BatchOp::Put { key, value } => Update::Put(key.to_vec(), value.to_vec()),
                    BatchOp::Delete { key } => Update::Delete(key.to_vec()),
                    BatchOp::SingleDelete { key } => Update::SingleDelete(key.to_vec()),
                    BatchOp::Merge { key, value } => Update::Merge(key.to_vec(), value.to_vec()),
                    BatchOp::DeleteRange { .. } => panic!("a range deletion in the index"),
                    BatchOp::PutEntity { .. } => panic!("an entity in the index"),
                }
            )
        })
        .collect();
    if got_entries != want_entries {
        return Err(format!("{}: the index holds {got_entries:?}, want {want_entries:?}", trace.join(", ")));
    }

    // Point reads: the batch alone, and over the database.
    let mut batch_options = Options::default();
    batch_options.merge_operator = stringappend();
    let latest = written(&model, &updates);
    for _ in 0..20 {
        let k = random_key(&mut rng);
        let got = b.lookup_in_batch(&batch_options, &k);
        let ok = match (batch_alone(&updates, &k), &got) {
            (None, Err(Error::MergeInProgress(_))) => true,
            (Some(want), Ok(got)) => &want == got,
            _ => false,
        };
        if !ok {
            return Err(format!("{}: lookup_in_batch({:?}) = {got:?}", trace.join(", "), show(&k)));
        }
        let got = b.get_from_batch_and_db(&db, &ReadOptions::default(), &k).map_err(|e| e.to_string())?;
        if got.as_ref() != latest.get(&k) {
            return Err(format!("{}: get_from_batch_and_db({:?}) = {got:?}", trace.join(", "), show(&k)));
        }
        if let Some((s, at)) = &snapshot {
            let got = b.get_from_batch_and_db(&db, &s.read_options(), &k).map_err(|e| e.to_string())?;
            if got.as_ref() != written(at, &updates).get(&k) {
                return Err(format!("{}: at the snapshot, {:?} = {got:?}", trace.join(", "), show(&k)));
            }
        }
    }
    let some_keys: Vec<Vec<u8>> = (0..8).map(|_| random_key(&mut rng)).collect();
    let refs: Vec<&[u8]> = some_keys.iter().map(Vec::as_slice).collect();
    let many = b.multi_get_from_batch_and_db(&db, &ReadOptions::default(), &refs);
    for (k, got) in some_keys.iter().zip(many) {
        let got = got.map_err(|e| e.to_string())?;
        if got.as_ref() != latest.get(k) {
            return Err(format!("{}: multi_get {:?} = {got:?}", trace.join(", "), show(k)));
        }
    }

    // Iterators through random moves.
    let no_prefix = NoPrefix;
    for _ in 0..3 {
        let lower = rng.gen_bool(0.25).then(|| random_target(&mut rng));
        let upper = rng.gen_bool(0.25).then(|| random_target(&mut rng));
        let at_snapshot = snapshot.is_some() && rng.gen_bool(0.5);
        let prefix_mode = extractor.is_some() && rng.gen_bool(0.7);
        let ro = ReadOptions {
            iterate_lower_bound: lower.clone(),
            iterate_upper_bound: upper.clone(),
            snapshot: snapshot.as_ref().filter(|_| at_snapshot).map(|(s, _)| s),
            prefix_same_as_start: prefix_mode,
            ..ReadOptions::default()
        };
        let view = match &snapshot {
            Some((_, at)) if at_snapshot => written(at, &updates),
            _ => latest.clone(),
        };
        let x: &dyn SliceTransform = match &extractor {
            Some(x) if prefix_mode => x.as_ref(),
            _ => &no_prefix,
        };
        cov.prefix_mode += u64::from(prefix_mode);
        cov.bounded += u64::from(lower.is_some() || upper.is_some());
        cov.at_snapshot += u64::from(at_snapshot);
        let mut want = PrefixCursor::new(&view, order, x, lower.clone(), upper.clone());
        let mut it = b.iterator_with_base(db.iter(ro));
        let mut moves = vec![format!(
            "iterator: lower={:?} upper={:?} at_snapshot={at_snapshot} prefix_same_as_start={prefix_mode}",
            lower.as_deref().map(show),
            upper.as_deref().map(show)
        )];
        let mut forward = true;
        for _ in 0..40 {
            let reposition = !it.valid() || rng.gen_bool(0.15);
            let name = if reposition {
                ["seek", "seek", "seek_for_prev", "seek_for_prev", "seek_to_first", "seek_to_last"][rng.gen_range(0..6)]
            } else if rng.gen_bool(0.5) {
                "next"
            } else {
                "prev"
            };
            let turns = it.valid() && ((name == "next" && !forward) || (name == "prev" && forward));
            match name {
                "seek" => {
                    let t = random_target(&mut rng);
                    moves.push(format!("seek({:?})", show(&t)));
                    it.seek(&t);
                    want.seek(&t);
                }
                "seek_for_prev" => {
                    let t = random_target(&mut rng);
                    moves.push(format!("seek_for_prev({:?})", show(&t)));
                    it.seek_for_prev(&t);
                    want.seek_for_prev(&t);
                }
                "seek_to_first" => {
                    moves.push(name.to_string());
                    it.seek_to_first();
                    want.seek_to_first();
                }
                "seek_to_last" => {
                    moves.push(name.to_string());
                    it.seek_to_last();
                    want.seek_to_last();
                }
                "next" => {
                    moves.push(name.to_string());
                    it.next();
                    want.next();
                }
                _ => {
                    moves.push(name.to_string());
                    it.prev();
                    want.prev();
                }
            }
            forward = matches!(name, "seek" | "seek_to_first" | "next");
            cov.moves += 1;
            let got = it.valid().then(|| (it.key().to_vec(), it.value().to_vec()));
            let expected = want.current();
            if turns && expected.is_some() {
                cov.direction_changes_valid += 1;
            }
            if let Some((k, _)) = &expected {
                let merges_onto_base = batch_alone(&updates, k).is_none();
                cov.merged_onto_base += u64::from(merges_onto_base);
            }
            let status = it.status();
            if got != expected || status.is_err() {
                let fmt = |e: &Option<(Vec<u8>, Vec<u8>)>| match e {
                    Some((k, v)) => format!("{:?} = {:?}", show(k), show(v)),
                    None => "invalid".to_string(),
                };
                return Err(format!(
                    "{}\n  {}\n  got {} (status {status:?}), want {}\n  view: {:?}",
                    trace.join(", "),
                    moves.join(", "),
                    fmt(&got),
                    fmt(&expected),
                    view.iter().map(|(k, v)| format!("{}={}", show(k), show(v))).collect::<Vec<_>>()
                ));
            }
        }
    }

    // Written, the database holds the model.
    drop(snapshot);
    db.write(b.write_batch()).map_err(|e| e.to_string())?;
    let mut it = db.iter(ReadOptions::default());
    it.seek_to_first();
    let mut got = Model::new();
    while it.valid() {
        got.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().map_err(|e| e.to_string())?;
    if got != latest {
        return Err(format!("{}: written, the database holds {got:?}, want {latest:?}", trace.join(", ")));
    }
    cov.cases += 1;
    drop(it);
    db.close().map_err(|e| e.to_string())
}

#[test]
fn iterators_over_the_database_agree_with_the_model_through_random_moves() {
    let mut cov = Coverage::default();
    if let Some(seed) = env_u64("EBB_WBWI_SEED") {
        run_case(seed, &mut cov).unwrap_or_else(|e| panic!("{e}"));
        return;
    }
    let base = env_u64("EBB_WBWI_BASE").unwrap_or(0);
    let cases = env_u64("EBB_WBWI_CASES").unwrap_or(300);
    for seed in base..base + cases {
        run_case(seed, &mut cov).unwrap_or_else(|e| panic!("{e}"));
    }
    eprintln!("write batch with index: {cov:#?}");
    assert!(cov.direction_changes_valid > cases, "{cov:?}");
    assert!(cov.merged_onto_base > 0 && cov.rollbacks > 0 && cov.prefix_mode > 0, "{cov:?}");
}
