//! The bounded table cache (`max_open_files`, issue 17 part 2): a database
//! of hundreds of tables read and written through a cache of ten open
//! tables gives what a model map gives, before and after a reopen, with
//! compactions deleting tables while iterators and reads hold them; the
//! cache never keeps more tables open than its capacity; and on disk the
//! process holds no more table files open than that, where `-1` keeps every
//! table it has read open (RocksDB's two modes).

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{scan, scan_reverse, tiny_options, Model};
use ebb::fs::MemFs;
use ebb::{Db, Options, ReadOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// `max_open_files = 10`: RocksDB sanitizes it to 20 and keeps 10 for other
/// files, so the cache holds 10 tables.
const CAPACITY: usize = 10;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Tiny tables (about ten entries each), so a few thousand keys make
/// hundreds of them.
fn options(o: Options) -> Options {
    let mut o = o;
    o.max_open_files = 10;
    o.write_buffer_size = 4 * 1024;
    o.target_file_size_base = 1024;
    o.max_bytes_for_level_base = 16 * 1024;
    o.max_bytes_for_level_multiplier = 10.0;
    o.level0_file_num_compaction_trigger = 4;
    o
}

fn open_tables(db: &Db) -> usize {
    db.get_property("ebb.num-open-tables").unwrap().parse().unwrap()
}

fn live_tables(db: &Db) -> usize {
    db.metrics().files_per_level.iter().sum()
}

/// Reads `model`'s keys back in every way a user reads: point gets of
/// present and absent keys, scans both ways, bounded scans.
fn check(db: &Db, model: &Model, rng: &mut StdRng, ctx: &str) {
    for _ in 0..300 {
        let k = key(rng.gen_range(0..4000));
        assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "{ctx}: get {}", String::from_utf8_lossy(&k));
    }
    assert!(scan(db, ReadOptions::default()) == *model, "{ctx}: forward scan");
    assert!(scan_reverse(db, ReadOptions::default()) == *model, "{ctx}: reverse scan");
    let (a, b) = (rng.gen_range(0..4000), rng.gen_range(0..4000));
    let (lo, hi) = (key(a.min(b)), key(a.max(b)));
    let ro = ReadOptions {
        iterate_lower_bound: Some(lo.clone()),
        iterate_upper_bound: Some(hi.clone()),
        ..Default::default()
    };
    let want: Model = model.range(lo..hi).map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(scan(db, ro) == want, "{ctx}: bounded scan");
    assert!(open_tables(db) <= CAPACITY, "{ctx}: {} tables open, capacity {CAPACITY}", open_tables(db));
}

/// A model history on a database of hundreds of tables behind a cache of
/// ten: puts, overwrites and deletes, with a thread compacting ranges
/// meanwhile (so tables are deleted while others read them), checked
/// against the model after each round and after reopens.
#[test]
fn hundreds_of_tables_through_ten_open_ones_read_as_the_model() {
    let fs = MemFs::new();
    let o = options(tiny_options(Some(fs.clone())));
    let mut rng = StdRng::seed_from_u64(17);
    let mut model = Model::new();
    let mut most_tables = 0;
    for epoch in 0..3 {
        let db = Arc::new(Db::open("/db", o.clone()).unwrap());
        assert!(scan(&db, ReadOptions::default()) == model, "epoch {epoch}: after the reopen");
        let stop = Arc::new(AtomicBool::new(false));
        let compactor = {
            let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(99);
                while !stop.load(Ordering::Relaxed) {
                    let (a, b) = (rng.gen_range(0..4000), rng.gen_range(0..4000));
                    db.compact_range(Some(&key(a.min(b))), Some(&key(a.max(b)))).unwrap();
                }
            })
        };
        for round in 0..4 {
            for _ in 0..2000 {
                let k = key(rng.gen_range(0..4000));
                if rng.gen_bool(0.85) {
                    let v = format!("{epoch}.{round}.{}", "v".repeat(rng.gen_range(10..60))).into_bytes();
                    db.put(&k, &v).unwrap();
                    model.insert(k, v);
                } else {
                    db.delete(&k).unwrap();
                    model.remove(&k);
                }
            }
            db.flush(true).unwrap();
            most_tables = most_tables.max(live_tables(&db));
            check(&db, &model, &mut rng, &format!("epoch {epoch} round {round}"));
        }
        stop.store(true, Ordering::Relaxed);
        compactor.join().unwrap();
        db.wait_for_compact().unwrap();
        most_tables = most_tables.max(live_tables(&db));
        check(&db, &model, &mut rng, &format!("epoch {epoch} end"));
        Arc::into_inner(db).expect("the only handle").close().unwrap();
    }
    assert!(most_tables >= 200, "the database never held 200 tables (at most {most_tables})");
}

/// File descriptors of this process open on files in `dir` with the
/// extension `ext`.
fn open_files_in(dir: &Path, ext: &str) -> usize {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else { return 0 };
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target.starts_with(dir) && target.extension().is_some_and(|e| e == ext))
        .count()
}

/// On-disk options for the descriptor tests: `max_open_files = 30` (20
/// files kept), no compaction and no write stalls, so every flush stays a
/// file of its own.
fn bounded_on_disk_options() -> Options {
    let mut o = options(tiny_options(None));
    o.max_open_files = 30;
    o.disable_auto_compactions = true;
    o.level0_slowdown_writes_trigger = 1000;
    o.level0_stop_writes_trigger = 1000;
    o
}

/// On disk: with `max_open_files = 30` (20 tables) the process holds at
/// most 20 table files open after reading every table of a database of
/// hundreds, and closes a table evicted while read once the read is done;
/// with `-1` it keeps every table it has read open, as RocksDB does.
#[test]
fn on_disk_the_bound_is_what_the_process_holds_open() {
    if !Path::new("/proc/self/fd").exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut o = bounded_on_disk_options();
    let db = Db::open(&path, o.clone()).unwrap();
    let mut model = Model::new();
    for round in 0..60 {
        for i in 0..40 {
            let k = key(round * 40 + i);
            let v = vec![b'v'; 80];
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush(true).unwrap();
    }
    let tables = live_tables(&db);
    assert!(tables >= 60, "only {tables} tables");
    // A scan holds every L0 table it merges while it lives; its own
    // references go with it.
    assert!(scan(&db, ReadOptions::default()) == model);
    for k in model.keys() {
        assert!(db.get(k).unwrap().is_some());
    }
    let held = open_files_in(&path, "sst");
    assert!(held <= 20, "{held} table files open with max_open_files = 30");
    assert_eq!(open_tables(&db), 20);
    db.close().unwrap();
    o.max_open_files = -1;
    let db = Db::open(&path, o).unwrap();
    for k in model.keys() {
        assert!(db.get(k).unwrap().is_some());
    }
    assert_eq!(open_files_in(&path, "sst"), tables, "unbounded, every table read stays open");
    db.close().unwrap();
}

/// Blob files are bounded as tables are (RocksDB's blob file cache shares
/// the table cache's bound): with `max_open_files = 30` the process holds at
/// most 20 blob files open after reading every value of a database of 60,
/// every value reads back, and with `-1` every blob file read stays open.
#[test]
fn on_disk_blob_files_are_bounded_as_tables_are() {
    if !Path::new("/proc/self/fd").exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let mut o = bounded_on_disk_options();
    o.enable_blob_files = true;
    o.min_blob_size = 64;
    let db = Db::open(&path, o.clone()).unwrap();
    let value = |i: u32| format!("blob value {i} ").repeat(8).into_bytes();
    for round in 0..60 {
        for i in 0..20 {
            db.put(&key(round * 20 + i), &value(round * 20 + i)).unwrap();
        }
        // One blob file per flush.
        db.flush(true).unwrap();
    }
    let blob_files = std::fs::read_dir(&path)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "blob"));
    assert!(blob_files.count() >= 60, "fewer than 60 blob files");
    for round in [0u32, 1] {
        for i in 0..1200 {
            assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "round {round}: key {i}");
        }
    }
    let held = open_files_in(&path, "blob");
    assert!(held <= 20, "{held} blob files open with max_open_files = 30");
    db.close().unwrap();
    o.max_open_files = -1;
    let db = Db::open(&path, o).unwrap();
    for i in 0..1200 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "unbounded: key {i}");
    }
    assert!(open_files_in(&path, "blob") >= 60, "unbounded, every blob file read stays open");
    db.close().unwrap();
}

#[test]
fn max_open_files_below_minus_one_is_refused() {
    let mut o = tiny_options(Some(MemFs::new()));
    o.max_open_files = -2;
    let Err(e) = Db::open("/db", o) else { panic!("max_open_files = -2 was accepted") };
    let e = e.to_string();
    assert!(e.contains("max_open_files"), "{e}");
}

/// Live tables of every family.
fn live_tables_of_all_families(db: &Db) -> usize {
    db.get_live_files_metadata().unwrap().len()
}

/// Three hundred writes of about 110 bytes to `cf` of round `round`, flushed.
fn write_round(db: &Db, cf: &ebb::ColumnFamilyHandle, round: u32, model: &mut Model) {
    for i in 0..300u32 {
        let k = key((i * 7 + round * 311) % 4000);
        let v = format!("{}.{round}.{i}.{}", cf.name(), "v".repeat(100)).into_bytes();
        db.put_cf(cf, &k, &v).unwrap();
        if cf.name() == "default" {
            model.insert(k, v);
        }
    }
    db.flush_cf(cf, true).unwrap();
}

#[test]
fn tables_are_opened_when_the_database_opens_and_when_jobs_write_them() {
    // RocksDB's LoadTableHandlers: with max_open_files = -1 every live table
    // of every family is open when Db::open returns, and a table a flush or
    // a compaction writes is opened before it is installed, so the reads
    // that follow open none. With a bound the open opens at most 16 and a
    // quarter of the tables the cache keeps.
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    let mut model = Model::new();
    let db = Db::open("/db", o.clone()).unwrap();
    let other = db.create_column_family("other", &o).unwrap();
    let default = db.cf_handle("default").unwrap();
    for round in 0..6 {
        write_round(&db, &default, round, &mut model);
        write_round(&db, &other, round, &mut model);
    }
    db.wait_for_compact().unwrap();
    db.close().unwrap();

    let db = Db::open_cf("/db", o.clone(), &[("other", o.clone())]).unwrap();
    let live = live_tables_of_all_families(&db);
    let levels = db
        .get_live_files_metadata()
        .unwrap()
        .iter()
        .map(|f| (f.column_family_name.clone(), f.level))
        .collect::<std::collections::BTreeSet<_>>();
    assert!(live >= 8 && levels.len() >= 3, "a tree of several levels in both families: {live} tables in {levels:?}");
    assert_eq!(open_tables(&db), live, "every table of every family is open when the database opens");
    // A flush and a compaction write new tables: the reads after them open
    // none (their count may only fall, as the inputs' files are deleted).
    let (default, other) = (db.cf_handle("default").unwrap(), db.cf_handle("other").unwrap());
    write_round(&db, &default, 7, &mut model);
    write_round(&db, &other, 7, &mut model);
    db.compact_range(None, None).unwrap();
    db.wait_for_compact().unwrap();
    let before = open_tables(&db);
    assert!(before >= live_tables_of_all_families(&db), "the tables written are open");
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    assert!(db.get_cf(&other, &key(0)).unwrap().is_some(), "round 0 wrote key 0 in both families");
    assert!(open_tables(&db) <= before, "reads opened tables: {} after {before}", open_tables(&db));
    db.close().unwrap();

    // Bounded to 50 tables (max_open_files 60 less RocksDB's 10): 12 opened.
    let mut bounded = o.clone();
    bounded.max_open_files = 60;
    let db = Db::open_cf("/db", bounded, &[("other", o.clone())]).unwrap();
    assert!(live_tables_of_all_families(&db) > 12);
    assert_eq!(open_tables(&db), 12, "a quarter of the bound, at most 16");
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    db.close().unwrap();
}

#[test]
fn a_table_that_cannot_be_opened_fails_the_open_or_the_reads_that_need_it() {
    // With every table kept open, the open opens them all: a damaged one
    // fails it, naming the table, as RocksDB's. With a bound the open
    // opens a few (the newest), and a damaged table the open left fails
    // only the reads that need it.
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.disable_auto_compactions = true;
    let db = Db::open("/db", o.clone()).unwrap();
    db.put(b"a", b"1").unwrap();
    db.flush(true).unwrap();
    for i in 0..4 {
        db.put(format!("b{i}").as_bytes(), b"2").unwrap();
        db.flush(true).unwrap();
    }
    let files = db.get_live_files_metadata().unwrap();
    let damaged = files.iter().find(|f| f.smallest_key == b"a").expect("a's table").name.clone();
    db.close().unwrap();
    let path = std::path::PathBuf::from(format!("/db{damaged}"));
    let mut bytes = fs.file_bytes(&path).unwrap();
    let n = bytes.len();
    // The footer's magic number: the table cannot be opened.
    for b in &mut bytes[n - 8..] {
        *b ^= 0xff;
    }
    fs.set_file_bytes(&path, &bytes).unwrap();
    let e = Db::open("/db", o.clone()).err().expect("an open of every table with one damaged");
    assert!(e.to_string().contains(damaged.trim_start_matches('/')), "the error names the table: {e}");
    // Ten tables kept open at most: the open opens two, the newest.
    o.max_open_files = 20;
    let db = Db::open("/db", o).unwrap();
    assert_eq!(open_tables(&db), 2);
    assert_eq!(db.get(b"b3").unwrap(), Some(b"2".to_vec()));
    let e = db.get(b"a").expect_err("a read of the damaged table");
    assert!(e.to_string().contains(damaged.trim_start_matches('/')), "the error names the table: {e}");
    db.close().unwrap();
}
