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
