//! `single_delete` (RocksDB's `SingleDelete`, issue 18 part 3): reads treat
//! it as a deletion everywhere; a flush or compaction that finds it right
//! above its put, with no snapshot between, drops both; it survives reopen
//! and works in column families and batches. docs/data_model.md.

mod common;

use common::{manual_options, scan, scan_reverse, tiny_options};
use ebb::fs::MemFs;
use ebb::{Db, ReadOptions, WriteBatch};

fn files(db: &Db) -> u64 {
    (0..4).map(|l| db.get_property(&format!("ebb.num-files-at-level{l}")).unwrap().parse::<u64>().unwrap()).sum()
}

#[test]
fn a_single_delete_hides_the_put_in_every_read_and_across_reopen() {
    let fs = MemFs::new();
    let path = std::path::Path::new("/sd");
    let db = Db::open(path, manual_options(&fs)).unwrap();
    for i in 0..100u32 {
        db.put(format!("k{i:03}").as_bytes(), b"v").unwrap();
    }
    db.flush(true).unwrap();
    for i in (0..100u32).step_by(2) {
        db.single_delete(format!("k{i:03}").as_bytes()).unwrap();
    }
    let check = |db: &Db, when: &str| {
        for i in 0..100u32 {
            let k = format!("k{i:03}");
            let want = (i % 2 == 1).then(|| b"v".to_vec());
            assert_eq!(db.get(k.as_bytes()).unwrap(), want, "{when}: get {k}");
        }
        let forward = scan(db, ReadOptions::default());
        assert_eq!(forward.len(), 50, "{when}");
        assert!(forward.keys().all(|k| k[3] % 2 == 1), "{when}: an even key came back");
        assert_eq!(scan_reverse(db, ReadOptions::default()), forward, "{when}: reverse scan");
        let keys: Vec<Vec<u8>> = (0..100u32).map(|i| format!("k{i:03}").into_bytes()).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        for (i, r) in db.multi_get(&refs, &ReadOptions::default()).into_iter().enumerate() {
            assert_eq!(r.unwrap().is_some(), i % 2 == 1, "{when}: multi_get {i}");
        }
    };
    check(&db, "in the memtable over a table");
    db.flush(true).unwrap();
    check(&db, "in two tables");
    drop(db);
    let db = Db::open(path, manual_options(&fs)).unwrap();
    check(&db, "after reopen");
    db.compact_range(None, None).unwrap();
    check(&db, "after a full compaction");
    drop(db);
    // From the WAL too: written, not flushed, reopened.
    let db = Db::open(path, manual_options(&fs)).unwrap();
    db.put(b"w", b"1").unwrap();
    db.single_delete(b"w").unwrap();
    drop(db);
    let db = Db::open(path, manual_options(&fs)).unwrap();
    assert_eq!(db.get(b"w").unwrap(), None, "replayed from the WAL");
}

#[test]
fn a_flush_drops_a_single_delete_with_its_put_and_a_delete_it_does_not() {
    let fs = MemFs::new();
    let db = Db::open("/pair", manual_options(&fs)).unwrap();
    db.put(b"a", b"1").unwrap();
    db.single_delete(b"a").unwrap();
    db.flush(true).unwrap();
    assert_eq!(files(&db), 0, "the pair left a table behind");
    assert_eq!(db.get(b"a").unwrap(), None);
    // A deletion is kept by a flush: it may hide a put in a table below.
    db.put(b"b", b"1").unwrap();
    db.delete(b"b").unwrap();
    db.flush(true).unwrap();
    assert_eq!(files(&db), 1, "a deletion is written");
}

/// A single deletion over a put that overwrote an older one (against its
/// contract: RocksDB calls the result undefined, and its compaction drops the
/// older versions as hidden): reads find nothing before the flush, and
/// nothing after it or after a full compaction. A flush once dropped the pair
/// and kept the older put, which came back. Older merge operands go the same
/// way; a deletion below the pair stays and still hides the table below.
#[test]
fn a_flush_does_not_bring_back_what_a_single_delete_hid_under_its_put() {
    let fs = MemFs::new();
    let mut o = manual_options(&fs);
    o.merge_operator = Some(ebb::merge_operator::from_name("stringappend").unwrap());
    let db = Db::open("/over", o).unwrap();
    db.put(b"d", b"deep").unwrap();
    db.flush(true).unwrap();
    db.put(b"a", b"1").unwrap();
    db.put(b"a", b"2").unwrap();
    db.single_delete(b"a").unwrap();
    db.merge(b"m", b"x").unwrap();
    db.put(b"m", b"y").unwrap();
    db.single_delete(b"m").unwrap();
    db.delete(b"d").unwrap();
    db.put(b"d", b"again").unwrap();
    db.single_delete(b"d").unwrap();
    let check = |db: &Db, when: &str| {
        for k in [&b"a"[..], b"m", b"d"] {
            assert_eq!(db.get(k).unwrap(), None, "{when}: {}", String::from_utf8_lossy(k));
        }
        assert!(scan(db, ReadOptions::default()).is_empty(), "{when}: scan");
    };
    check(&db, "before the flush");
    db.flush(true).unwrap();
    check(&db, "after the flush");
    db.compact_range(None, None).unwrap();
    check(&db, "after a full compaction");
}

#[test]
fn a_snapshot_between_the_put_and_its_single_delete_keeps_both() {
    let fs = MemFs::new();
    let db = Db::open("/snap", manual_options(&fs)).unwrap();
    db.put(b"k", b"old").unwrap();
    let snap = db.snapshot();
    db.single_delete(b"k").unwrap();
    db.flush(true).unwrap();
    assert_eq!(files(&db), 1, "the snapshot still reads the put");
    db.compact_range(None, None).unwrap();
    assert_eq!(snap.get(b"k").unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get(b"k").unwrap(), None);
    drop(snap);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
}

#[test]
fn put_and_single_delete_cycles_read_right_through_compactions() {
    // Each key is put and single deleted in turn many times, through
    // automatic flushes and compactions of tiny tables (pairs meet in
    // flushes, in L0 and deeper); the last state is checked after every
    // cycle and after reopen.
    let fs = MemFs::new();
    let path = std::path::Path::new("/cycles");
    let db = Db::open(path, tiny_options(Some(fs.clone()))).unwrap();
    let mut present = [false; 64];
    for round in 0..40u32 {
        let mut b = WriteBatch::new();
        for (i, p) in present.iter_mut().enumerate() {
            let k = format!("key{i:02}");
            if (i as u32 + round).is_multiple_of(3) {
                continue;
            }
            if *p {
                b.single_delete(k.as_bytes());
            } else {
                b.put(k.as_bytes(), format!("{round}-{}", "x".repeat(100)).as_bytes());
            }
            *p = !*p;
        }
        db.write(&b).unwrap();
        for (i, p) in present.iter().enumerate() {
            assert_eq!(db.get(format!("key{i:02}").as_bytes()).unwrap().is_some(), *p, "round {round}, key {i}");
        }
    }
    let want: Vec<Vec<u8>> =
        present.iter().enumerate().filter(|(_, p)| **p).map(|(i, _)| format!("key{i:02}").into_bytes()).collect();
    let live = |db: &Db| scan(db, ReadOptions::default()).keys().cloned().collect::<Vec<_>>();
    assert_eq!(live(&db), want, "before the full compaction");
    db.compact_range(None, None).unwrap();
    assert_eq!(live(&db), want, "after the full compaction");
    drop(db);
    let db = Db::open(path, tiny_options(Some(fs))).unwrap();
    assert_eq!(live(&db), want, "after reopen");
}

#[test]
fn single_deletes_work_in_a_column_family() {
    let fs = MemFs::new();
    let db = Db::open("/cf", manual_options(&fs)).unwrap();
    let cf = db.create_column_family("other", manual_options(&fs)).unwrap();
    db.put_cf(&cf, b"k", b"v").unwrap();
    db.put(b"k", b"default").unwrap();
    db.single_delete_cf(&cf, b"k").unwrap();
    assert_eq!(db.get_cf(&cf, b"k").unwrap(), None);
    assert_eq!(db.get(b"k").unwrap(), Some(b"default".to_vec()), "the default family is untouched");
    let mut b = WriteBatch::new();
    b.put_cf(&cf, b"j", b"1");
    b.single_delete_cf(&cf, b"j");
    db.write(&b).unwrap();
    db.flush_cf(&cf, true).unwrap();
    assert_eq!(db.get_cf(&cf, b"j").unwrap(), None);
    assert_eq!(db.get_cf(&cf, b"k").unwrap(), None);
}
