//! Merge operators end to end: refused without an operator, operands read
//! through every path, combined by flushes and compactions without
//! crossing a snapshot, replayed from the WAL, recorded in the OPTIONS
//! file, and a failing operator reported, never papered over.

mod common;

use std::sync::Arc;

use common::{scan, scan_reverse, tiny_options};
use ebb::fs::{FileSystem, MemFs};
use ebb::merge_operator::{self, MergeOperator};
use ebb::{ColumnFamilyOptions, Db, Error, Options, ReadOptions, WriteBatch};

fn with_operator(fs: &MemFs, name: &str) -> Options {
    let mut o = tiny_options(Some(fs.clone()));
    o.merge_operator = Some(merge_operator::from_name(name).unwrap());
    o
}

fn u64le(n: u64) -> Vec<u8> {
    n.to_le_bytes().to_vec()
}

#[test]
fn a_merge_without_an_operator_is_refused_and_writes_nothing() {
    let fs = MemFs::new();
    let db = Db::open("/db", tiny_options(Some(fs.clone()))).unwrap();
    let e = db.merge(b"k", b"v").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("merge operator") && e.to_string().contains("\"k\""), "{e}");
    // A batch with a merge is refused whole: its put is not written either.
    let mut b = WriteBatch::new();
    b.put(b"p", b"1");
    b.merge(b"k", b"v");
    assert!(db.write(&b).is_err());
    assert_eq!(db.get(b"p").unwrap(), None);
    // The database is not stuck: writes go on.
    db.put(b"p", b"2").unwrap();
    assert_eq!(db.get(b"p").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn operands_apply_in_order_through_memtables_tables_and_the_wal() {
    let fs = MemFs::new();
    let o = with_operator(&fs, "stringappend");
    let db = Db::open("/db", o.clone()).unwrap();
    db.put(b"a", b"base").unwrap();
    db.merge(b"a", b"1").unwrap();
    db.flush(true).unwrap();
    db.merge(b"a", b"2").unwrap();
    db.merge(b"b", b"x").unwrap();
    let mut batch = WriteBatch::new();
    batch.merge(b"a", b"3");
    batch.delete(b"b");
    batch.merge(b"b", b"y");
    db.write(&batch).unwrap();
    let want = |db: &Db| {
        assert_eq!(db.get(b"a").unwrap(), Some(b"base,1,2,3".to_vec()));
        assert_eq!(db.get(b"b").unwrap(), Some(b"y".to_vec()));
        let got = db.multi_get(&[b"a", b"b", b"c"], &ReadOptions::default());
        let got: Vec<_> = got.into_iter().map(Result::unwrap).collect();
        assert_eq!(got, vec![Some(b"base,1,2,3".to_vec()), Some(b"y".to_vec()), None]);
        let all = scan(db, ReadOptions::default());
        assert_eq!(all.get(&b"a"[..]), Some(&b"base,1,2,3".to_vec()));
        assert_eq!(scan_reverse(db, ReadOptions::default()), all);
    };
    want(&db);
    // The WAL replays the operands.
    drop(db);
    let db = Db::open("/db", o.clone()).unwrap();
    want(&db);
    db.close().unwrap();
}

#[test]
fn a_full_compaction_turns_operands_into_values_but_keeps_what_snapshots_read() {
    let fs = MemFs::new();
    let o = with_operator(&fs, "uint64add");
    let db = Db::open("/db", o.clone()).unwrap();
    for i in 0..10u64 {
        db.merge(b"counter", &u64le(i)).unwrap();
    }
    let snap = db.snapshot();
    db.merge(b"counter", &u64le(100)).unwrap();
    db.merge(b"other", &u64le(7)).unwrap();
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"counter").unwrap(), Some(u64le(145)));
    assert_eq!(db.get_opt(b"counter", &snap.read_options()).unwrap(), Some(u64le(45)));
    drop(snap);
    // With no snapshot left, a compaction that reads the key's operands
    // (the newest one here, over what the bottom level holds) merges them
    // all into one value.
    db.merge(b"counter", &u64le(1)).unwrap();
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"counter").unwrap(), Some(u64le(146)));
    db.close().unwrap();
    // Every operand was merged into a value at the bottom level: a reopen
    // without an operator reads the values.
    let plain = tiny_options(Some(fs.clone()));
    let db = Db::open("/db", plain).unwrap();
    assert_eq!(db.get(b"counter").unwrap(), Some(u64le(146)));
    assert_eq!(db.get(b"other").unwrap(), Some(u64le(7)));
}

#[test]
fn operands_left_unmerged_need_the_operator_to_be_read() {
    let fs = MemFs::new();
    let db = Db::open("/db", with_operator(&fs, "stringappend")).unwrap();
    db.merge(b"k", b"x").unwrap();
    db.close().unwrap();
    let db = Db::open("/db", tiny_options(Some(fs.clone()))).unwrap();
    let e = db.get(b"k").unwrap_err();
    assert!(e.to_string().contains("no merge operator"), "{e}");
    let mut it = db.iter(ReadOptions::default());
    it.seek_to_first();
    assert!(!it.valid());
    assert!(it.status().is_err(), "the iterator stops with the error instead of skipping the key");
}

struct FailsOn(&'static [u8]);

impl MergeOperator for FailsOn {
    fn name(&self) -> &str {
        "FailsOn"
    }
    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        if operands.contains(&self.0) {
            return None;
        }
        let mut out = existing.unwrap_or_default().to_vec();
        operands.iter().for_each(|o| out.extend_from_slice(o));
        Some(out)
    }
}

#[test]
fn a_failing_operator_is_a_corruption_error_naming_it() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.merge_operator = Some(Arc::new(FailsOn(b"bad")));
    let db = Db::open("/db", o).unwrap();
    db.merge(b"k", b"ok").unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"ok".to_vec()));
    db.merge(b"k", b"bad").unwrap();
    let e = db.get(b"k").unwrap_err();
    assert!(matches!(e, Error::Corruption { .. }) && e.to_string().contains("FailsOn"), "{e}");
    let mut it = db.iter(ReadOptions::default());
    it.seek_to_last();
    assert!(!it.valid() && it.status().unwrap_err().to_string().contains("FailsOn"));
    // A compaction cannot merge them either: it fails, and keeps the inputs.
    db.flush(true).unwrap();
    assert!(db.compact_range(None, None).is_err());
}

#[test]
fn merges_in_column_families_use_each_familys_operator() {
    let fs = MemFs::new();
    let db = Db::open("/db", with_operator(&fs, "stringappend")).unwrap();
    let mut cf_opts = ColumnFamilyOptions::default();
    cf_opts.merge_operator = Some(merge_operator::from_name("max").unwrap());
    let maxes = db.create_column_family("maxes", cf_opts).unwrap();
    let plain = db.create_column_family("plain", ColumnFamilyOptions::default()).unwrap();
    for v in [&b"b"[..], b"d", b"a"] {
        db.merge(b"k", v).unwrap();
        db.merge_cf(&maxes, b"k", v).unwrap();
    }
    assert_eq!(db.get(b"k").unwrap(), Some(b"b,d,a".to_vec()));
    assert_eq!(db.get_cf(&maxes, b"k").unwrap(), Some(b"d".to_vec()));
    let e = db.merge_cf(&plain, b"k", b"x").unwrap_err().to_string();
    assert!(e.contains("\"plain\""), "{e}");
}

#[test]
fn the_options_file_records_the_operator() {
    let fs = MemFs::new();
    let db = Db::open("/db", with_operator(&fs, "uint64add")).unwrap();
    let name =
        fs.list_dir(std::path::Path::new("/db")).unwrap().into_iter().find(|n| n.starts_with("OPTIONS")).unwrap();
    let text = String::from_utf8(fs.file_bytes(&std::path::Path::new("/db").join(name)).unwrap()).unwrap();
    assert!(text.contains("merge_operator=UInt64AddOperator"), "{text}");
    // And the text form reads a built-in operator back.
    let back = Options::from_text(&text).unwrap();
    assert_eq!(back.merge_operator.map(|o| o.name().to_string()), Some("UInt64AddOperator".to_string()));
    let e = Options::from_text("merge_operator=MyOperator").unwrap_err().to_string();
    assert!(e.contains("MyOperator"), "{e}");
    drop(db);
}

#[test]
fn max_successive_merges_writes_the_merged_value_instead() {
    let fs = MemFs::new();
    let mut o = with_operator(&fs, "stringappend");
    o.max_successive_merges = 2;
    let db = Db::open("/db", o).unwrap();
    // A snapshot after each merge keeps the flush from combining anything.
    let mut snaps = Vec::new();
    for i in 0..3 {
        db.merge(b"k", format!("{i}").as_bytes()).unwrap();
        snaps.push(db.snapshot());
    }
    assert_eq!(db.get(b"k").unwrap(), Some(b"0,1,2".to_vec()));
    assert_eq!(db.get_opt(b"k", &snaps[1].read_options()).unwrap(), Some(b"0,1".to_vec()));
    db.flush(true).unwrap();
    drop(snaps);
    db.close().unwrap();
    // The third merge found two operands on top of the key and wrote the
    // merged value: the newest version is a value, read without the operator.
    let db = Db::open("/db", tiny_options(Some(fs.clone()))).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"0,1,2".to_vec()));
}

/// Appends operands with commas, and fails on an operand `bad`.
struct Picky;

impl MergeOperator for Picky {
    fn name(&self) -> &str {
        "Picky"
    }

    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut out = existing.map(<[u8]>::to_vec);
        for op in operands {
            if *op == b"bad" {
                return None;
            }
            out = Some(match out {
                Some(mut v) => {
                    v.push(b',');
                    v.extend_from_slice(op);
                    v
                }
                None => op.to_vec(),
            });
        }
        out
    }
}

/// A merge that `max_successive_merges` would write as its merged value,
/// but that the operator refuses, is written as its operand (RocksDB stores
/// the delta): the write succeeds, and the read that merges it reports the
/// failure. It once failed the write after the WAL held it, and the next
/// write took the same sequence numbers: the database read differently
/// after a reopen (the refused operand over the newer put), and a batch
/// left the entries before the merge in the memtable.
#[test]
fn a_merge_the_operator_refuses_in_place_is_stored_as_its_operand() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.merge_operator = Some(Arc::new(Picky));
    o.max_successive_merges = 2;
    let db = Db::open("/db", o.clone()).unwrap();
    db.merge(b"k", b"a").unwrap();
    db.merge(b"k", b"b").unwrap();
    db.merge(b"k", b"bad").unwrap();
    let e = db.get(b"k").unwrap_err();
    assert!(matches!(e, Error::Corruption { .. }), "{e}");
    let mut b = WriteBatch::new();
    b.put(b"p", b"1");
    b.merge(b"k", b"bad");
    b.put(b"q", b"2");
    db.write(&b).unwrap();
    db.put(b"k", b"v").unwrap();
    db.put(b"x", b"y").unwrap();
    let expected = |db: &Db, when: &str| {
        for (k, v) in [(&b"k"[..], &b"v"[..]), (b"p", b"1"), (b"q", b"2"), (b"x", b"y")] {
            assert_eq!(db.get(k).unwrap().as_deref(), Some(v), "{when}: {}", String::from_utf8_lossy(k));
        }
        db.merge(b"k", b"c").unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"v,c".to_vec()), "{when}");
    };
    expected(&db, "before the reopen");
    drop(db);
    // Replayed from the WAL: the same entries at the same sequence numbers.
    let db = Db::open("/db", o).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v,c".to_vec()), "after the reopen");
    db.put(b"k", b"v").unwrap();
    expected(&db, "after the reopen");
}

/// Merges in a TTL database (RocksDB's `TtlMergeOperator`): operands are
/// stamped, the operator sees values and operands without their write
/// times, and a merged value carries the time of the merge, through reads,
/// flushes, compactions and reopens; the TTL then expires it.
#[test]
fn a_ttl_database_merges_and_expires_merged_values() {
    use std::time::Duration;
    let fs = MemFs::new();
    let clock = Arc::new(ebb::ManualClock::new(Duration::from_secs(1_000_000)));
    let options = || {
        let mut o = common::manual_options(&fs).with_clock(Arc::clone(&clock) as Arc<dyn ebb::Clock>);
        o.merge_operator = Some(merge_operator::from_name("uint64add").unwrap());
        o
    };
    let n = |v: u64| v.to_le_bytes().to_vec();
    let db = Db::open_with_ttl("/ttl", options(), 100).unwrap();
    db.put(b"a", &n(5)).unwrap();
    db.merge(b"a", &n(2)).unwrap();
    let mut b = WriteBatch::new();
    b.merge(b"a", &n(3));
    b.merge(b"fresh", &n(7));
    db.write(&b, &Default::default()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(n(10)), "the operator sees no write times");
    assert_eq!(db.get(b"fresh").unwrap(), Some(n(7)));
    let mut it = db.iter(ReadOptions::default());
    it.seek_to_first();
    assert_eq!((it.key(), it.value()), (&b"a"[..], &n(10)[..]));
    it.status().unwrap();
    drop(it);
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(n(10)), "merged by the compaction, stamped, read back");
    // A later merge renews the key; the other expires.
    clock.advance(Duration::from_secs(80));
    db.merge(b"a", &n(1)).unwrap();
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    clock.advance(Duration::from_secs(50));
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"fresh").unwrap(), None, "expired 130 s after its merge");
    assert_eq!(db.get(b"a").unwrap(), Some(n(11)), "renewed by the merge 50 s ago");
    db.close().unwrap();
    let db = Db::open_with_ttl("/ttl", options(), 100).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(n(11)));
    // Without an operator a merge is refused, as in any database.
    let mut plain = common::manual_options(&fs);
    plain.create_if_missing = true;
    let db2 = Db::open_with_ttl("/ttl2", plain, 100).unwrap();
    let e = db2.merge(b"k", b"v").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}
