//! Range deletion end to end: bad ranges refused, tombstones read through
//! every path and every source (memtable, WAL replay, L0, deeper levels),
//! snapshots kept, tombstone-only tables, what compactions drop and keep,
//! and the MANIFEST and table formats that carry them.

mod common;

use common::{scan, scan_reverse, tiny_options, Model};
use ebb::fs::MemFs;
use ebb::{Db, Error, Options, ReadOptions, WriteBatch};

fn key(i: usize) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

fn fill(db: &Db, model: &mut Model, range: std::ops::Range<usize>, tag: &str) {
    for i in range {
        let v = format!("{tag}-{i}").into_bytes();
        db.put(&key(i), &v).unwrap();
        model.insert(key(i), v);
    }
}

fn delete_range(db: &Db, model: &mut Model, a: usize, b: usize) {
    db.delete_range(&key(a), &key(b)).unwrap();
    for i in a..b {
        model.remove(&key(i));
    }
}

fn check(db: &Db, model: &Model, ctx: &str) {
    assert_eq!(&scan(db, ReadOptions::default()), model, "{ctx}: forward scan");
    assert_eq!(&scan_reverse(db, ReadOptions::default()), model, "{ctx}: reverse scan");
    for i in 0..300 {
        assert_eq!(db.get(&key(i)).unwrap().as_ref(), model.get(&key(i)), "{ctx}: get {i}");
    }
    let keys: Vec<Vec<u8>> = (0..300).step_by(7).map(key).collect();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    for (k, got) in keys.iter().zip(db.multi_get(&refs, &ReadOptions::default())) {
        assert_eq!(got.unwrap().as_ref(), model.get(k), "{ctx}: multi_get");
    }
}

fn options(fs: &MemFs) -> Options {
    let mut o = tiny_options(Some(fs.clone()));
    o.disable_auto_compactions = true;
    o
}

#[test]
fn a_reversed_range_is_refused_and_writes_nothing() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    db.put(b"b", b"1").unwrap();
    let e = db.delete_range(b"z", b"a").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("\"z\"") && e.to_string().contains("\"a\""), "{e}");
    let mut batch = WriteBatch::new();
    batch.put(b"c", b"2");
    batch.delete_range(b"q", b"p");
    assert!(db.write(&batch).is_err());
    assert_eq!(db.get(b"c").unwrap(), None, "nothing of a refused batch is written");
    // An empty range deletes nothing.
    db.delete_range(b"b", b"b").unwrap();
    assert_eq!(db.get(b"b").unwrap(), Some(b"1".to_vec()));
}

#[test]
fn tombstones_delete_across_every_source_and_survive_reopen() {
    let fs = MemFs::new();
    let o = options(&fs);
    let db = Db::open("/db", o.clone()).unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, 0..300, "a");
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap(); // into the last level
    fill(&db, &mut model, 100..150, "b");
    db.flush(true).unwrap(); // an L0 table over them
    fill(&db, &mut model, 140..160, "c"); // and the memtable
    delete_range(&db, &mut model, 50, 145);
    check(&db, &model, "memtable tombstone");
    fill(&db, &mut model, 60..62, "d"); // newer than the tombstone: live
    check(&db, &model, "puts after the tombstone");
    // The WAL replays the tombstone.
    drop(db);
    let db = Db::open("/db", o.clone()).unwrap();
    check(&db, &model, "after WAL replay");
    db.flush(true).unwrap();
    check(&db, &model, "tombstone in L0");
    db.compact_range(None, None).unwrap();
    check(&db, &model, "after a full compaction");
    db.close().unwrap();
    let db = Db::open("/db", o).unwrap();
    check(&db, &model, "after reopen");
}

#[test]
fn snapshots_read_what_was_there_before_the_tombstone() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, 0..200, "a");
    db.flush(true).unwrap();
    let before = (db.snapshot(), model.clone());
    delete_range(&db, &mut model, 10, 190);
    let mut it = db.iter(before.0.read_options());
    it.seek(&key(100));
    assert!(it.valid() && it.key() == key(100).as_slice(), "the snapshot's iterator sees key 100");
    drop(it);
    for round in 0..2 {
        assert_eq!(scan(&db, before.0.read_options()), before.1, "round {round}: the snapshot reads all");
        assert_eq!(db.get_opt(&key(50), &before.0.read_options()).unwrap(), Some(b"a-50".to_vec()));
        check(&db, &model, "present");
        db.flush(true).unwrap();
        db.compact_range(None, None).unwrap();
    }
}

#[test]
fn a_flush_of_only_tombstones_writes_a_table_of_them() {
    let fs = MemFs::new();
    let o = options(&fs);
    let db = Db::open("/db", o.clone()).unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, 0..100, "a");
    db.flush(true).unwrap();
    delete_range(&db, &mut model, 20, 80);
    db.flush(true).unwrap();
    assert_eq!(db.get_property("ebb.num-files-at-level0").as_deref(), Some("2"));
    db.close().unwrap();
    let db = Db::open("/db", o).unwrap();
    check(&db, &model, "tombstone-only table after reopen");
}

#[test]
fn a_compaction_to_the_bottom_drops_tombstones_and_what_they_delete() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, 0..300, "a");
    db.flush(true).unwrap();
    delete_range(&db, &mut model, 0, 250);
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    check(&db, &model, "after compaction");
    let keys: u64 = db.get_property("ebb.estimate-num-keys").unwrap().parse().unwrap();
    assert!(keys <= 50, "the deleted keys and the tombstone are gone from the tables: {keys}");
}

#[test]
fn tombstones_spanning_many_output_files_keep_levels_disjoint() {
    let fs = MemFs::new();
    let mut o = options(&fs);
    o.target_file_size_base = 2048;
    let db = Db::open("/db", o.clone()).unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, 0..300, "a");
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    let snapshot = db.snapshot(); // keeps the tombstones below from going
    for (a, b) in [(5, 120), (118, 119), (200, 299), (150, 151)] {
        delete_range(&db, &mut model, a, b);
    }
    fill(&db, &mut model, 100..110, "b");
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    check(&db, &model, "tombstones cut at output files");
    drop(snapshot);
    db.close().unwrap();
    // The MANIFEST (and its level invariants) reads back.
    let db = Db::open("/db", o).unwrap();
    check(&db, &model, "after reopen");
}

#[test]
fn column_families_and_ttl_databases_delete_ranges_too() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs)).unwrap();
    let cf = db.create_column_family("other", ebb::ColumnFamilyOptions::default()).unwrap();
    for i in 0..10 {
        db.put(&key(i), b"d").unwrap();
        db.put_cf(&cf, &key(i), b"o").unwrap();
    }
    db.delete_range_cf(&cf, &key(2), &key(8)).unwrap();
    assert_eq!(db.get(&key(5)).unwrap(), Some(b"d".to_vec()), "other families are untouched");
    assert_eq!(db.get_cf(&cf, &key(5)).unwrap(), None);
    assert_eq!(db.get_cf(&cf, &key(8)).unwrap(), Some(b"o".to_vec()), "the end is excluded");
    drop(db);

    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::default();
    o.create_if_missing = true;
    let ttl = Db::open_with_ttl(dir.path(), o, 3600).unwrap();
    ttl.put(b"a", b"1").unwrap();
    ttl.put(b"b", b"2").unwrap();
    ttl.delete_range(b"a", b"b").unwrap();
    assert_eq!(ttl.get(b"a").unwrap(), None);
    assert_eq!(ttl.get(b"b").unwrap(), Some(b"2".to_vec()));
}

/// The ticker of an iterator's skips over deleted keys.
fn range_skips(db: &Db) -> u64 {
    let stats = db.get_property("ebb.options-statistics").unwrap();
    let line = stats.lines().find(|l| l.starts_with("ebb.range.tombstone.skips")).unwrap();
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// Iterators pass the keys a newer range tombstone deletes in older
/// sources by seeking those sources past them (whole tables and blocks
/// unread), in both directions, and still see what newer sources hold in
/// the range, and what a snapshot from before the tombstone reads.
#[test]
fn iterators_skip_what_a_newer_tombstone_deletes_in_older_sources() {
    let fs = MemFs::new();
    let mut o = options(&fs);
    o.statistics = true;
    let db = Db::open("/skip", o).unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, 0..3000, "old");
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    let before = db.snapshot();
    let old_model = model.clone();
    delete_range(&db, &mut model, 100, 2900);
    // Newer writes inside the range stay visible.
    fill(&db, &mut model, 1500..1510, "new");
    let skips = range_skips(&db);
    check(&db, &model, "memtable tombstone over older tables");
    assert!(range_skips(&db) > skips, "the scans skipped the deleted keys");
    let mut it = db.iter(ReadOptions::default());
    it.seek(&key(50));
    let mut seen = Vec::new();
    while it.valid() && seen.len() < 200 {
        seen.push(it.key().to_vec());
        it.next();
    }
    let want: Vec<Vec<u8>> = model.range(key(50)..).take(200).map(|(k, _)| k.clone()).collect();
    assert_eq!(seen, want);
    drop(it);
    assert_eq!(scan(&db, before.read_options()), old_model, "a snapshot before the tombstone reads all");
    assert_eq!(scan_reverse(&db, before.read_options()), old_model);
    drop(before);
    db.flush(true).unwrap();
    check(&db, &model, "L0 tombstone over older tables");
    db.close().unwrap();
    let db = Db::open("/skip", options(&fs)).unwrap();
    check(&db, &model, "after reopen");
}
