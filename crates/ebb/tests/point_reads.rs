//! Point reads of issue 17 part 3: the batched `multi_get` (RocksDB's
//! `MultiGet`: sorted keys, one visit per table, one read per data block)
//! and `get_pinned` (the value left in its cached block).
//!
//! - Random histories over two families with tiny memtables (so keys live in
//!   memtables, L0 and deeper levels at once): `multi_get_cf` of unsorted,
//!   repeated, absent and deleted keys in both families, `get_pinned` and
//!   `get` all give what the model gives, also through an old snapshot.
//! - With no block cache, a `multi_get` of many keys of one table reads each
//!   data block once, where one `get` per key reads a block per key.
//! - A pinned value holds its cache entry (counted as pinned usage) until
//!   dropped, and stays readable after compaction deleted its table.
//! - A damaged data block fails the keys it holds and only those; a dropped
//!   family fails its keys and only those.

mod common;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::hooked_fs::{FsHooks, HookedFs};
use common::{files_of, fs_holding, manual_options, scan, tiny_options};
use ebb::fs::{FileSystem, MemFs};
use ebb::{ColumnFamilyHandle, Db, ReadOptions};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Reads `n` random keys (some never written) in random families three ways
/// and compares each answer with the models.
fn check_reads(
    db: &Db,
    families: &[ColumnFamilyHandle],
    models: &[Model],
    ro: &ReadOptions,
    rng: &mut StdRng,
    ctx: &str,
) {
    let n = 300;
    let picks: Vec<(usize, Vec<u8>)> =
        (0..n).map(|_| (rng.gen_range(0..families.len()), key(rng.gen_range(0..900)))).collect();
    let reads: Vec<(&ColumnFamilyHandle, &[u8])> = picks.iter().map(|(f, k)| (&families[*f], k.as_slice())).collect();
    let batched = db.multi_get_cf(&reads, ro);
    assert_eq!(batched.len(), n);
    for ((f, k), got) in picks.iter().zip(batched) {
        let want = models[*f].get(k);
        let show = String::from_utf8_lossy(k);
        assert_eq!(got.unwrap().as_ref(), want, "{ctx}: multi_get_cf of {show} in family {f}");
        let pinned = db.get_pinned_cf_opt(&families[*f], k, ro).unwrap();
        assert_eq!(pinned.as_deref(), want.map(Vec::as_slice), "{ctx}: get_pinned of {show} in family {f}");
        assert_eq!(db.get_cf_opt(&families[*f], k, ro).unwrap().as_ref(), want, "{ctx}: get of {show}");
    }
    // The default family through `multi_get`, keys sorted and repeated.
    let mut keys: Vec<Vec<u8>> = (0..100).map(|_| key(rng.gen_range(0..900))).collect();
    keys.extend(keys.clone());
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    for (k, got) in keys.iter().zip(db.multi_get(&refs, ro)) {
        assert_eq!(got.unwrap().as_ref(), models[0].get(k), "{ctx}: multi_get of {}", String::from_utf8_lossy(k));
    }
}

#[test]
fn batched_multi_get_and_get_pinned_agree_with_the_model_across_families() {
    for seed in 0..3u64 {
        let o = tiny_options(Some(MemFs::new()));
        let db = Db::open("/db", o.clone()).unwrap();
        let other = db.create_column_family("other", &o).unwrap();
        let families = [db.cf_handle("default").unwrap(), other];
        let mut models = [Model::new(), Model::new()];
        let mut rng = StdRng::seed_from_u64(seed);
        let mut snapshot = None;
        for step in 0..6000u32 {
            let f = rng.gen_range(0..2);
            let k = key(rng.gen_range(0..800));
            if rng.gen_range(0..10) < 8 {
                let v = format!("{step}-{seed}-").repeat(rng.gen_range(1..20)).into_bytes();
                db.put_cf(&families[f], &k, &v).unwrap();
                models[f].insert(k, v);
            } else {
                db.delete_cf(&families[f], &k).unwrap();
                models[f].remove(&k);
            }
            if step % 1000 == 999 {
                check_reads(
                    &db,
                    &families,
                    &models,
                    &ReadOptions::default(),
                    &mut rng,
                    &format!("seed {seed} step {step}"),
                );
            }
            if step == 2500 {
                snapshot = Some((db.snapshot(), models.clone()));
            }
        }
        let levels = db.metrics().files_per_level;
        assert!(levels.iter().skip(1).sum::<usize>() > 0, "seed {seed}: nothing below L0: {levels:?}");
        let (snap, old) = snapshot.unwrap();
        check_reads(&db, &families, &old, &snap.read_options(), &mut rng, &format!("seed {seed} snapshot"));
        drop(snap);
        db.flush(true).unwrap();
        db.compact_range(None, None).unwrap();
        check_reads(&db, &families, &models, &ReadOptions::default(), &mut rng, &format!("seed {seed} compacted"));
    }
}

/// Counts positional reads of `.sst` files and the offsets read.
#[derive(Default)]
struct CountReads {
    counting: AtomicBool,
    reads: AtomicUsize,
    offsets: Mutex<Vec<u64>>,
}

impl FsHooks for CountReads {
    fn before_read_at(&self, path: &Path, offset: u64, _len: usize) {
        if self.counting.load(Ordering::SeqCst) && path.extension().is_some_and(|e| e == "sst") {
            self.reads.fetch_add(1, Ordering::SeqCst);
            self.offsets.lock().unwrap().push(offset);
        }
    }
}

#[test]
fn multi_get_reads_each_data_block_once() {
    let counter = Arc::new(CountReads::default());
    let mut o = manual_options(&MemFs::new());
    o.fs = Arc::new(HookedFs::new(MemFs::new(), counter.clone()));
    o.block_cache_size = 0;
    o.write_buffer_size = 1 << 20;
    o.target_file_size_base = 1 << 20;
    let db = Db::open("/db", o).unwrap();
    for i in 0..400 {
        db.put(&key(i), &[b'v'; 100]).unwrap();
    }
    db.flush(true).unwrap();
    assert_eq!(db.metrics().files_per_level[0], 1);
    // Opens the table (footer, index, filter) before counting.
    assert!(db.get(&key(0)).unwrap().is_some());

    let mut keys: Vec<Vec<u8>> = (0..400).step_by(2).map(key).collect();
    keys.shuffle(&mut StdRng::seed_from_u64(7));
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    counter.counting.store(true, Ordering::SeqCst);
    for (k, got) in keys.iter().zip(db.multi_get(&refs, &ReadOptions::default())) {
        assert_eq!(got.unwrap(), Some(vec![b'v'; 100]), "{}", String::from_utf8_lossy(k));
    }
    counter.counting.store(false, Ordering::SeqCst);
    let batched = counter.reads.swap(0, Ordering::SeqCst);
    let offsets = std::mem::take(&mut *counter.offsets.lock().unwrap());
    let distinct: HashSet<u64> = offsets.iter().copied().collect();
    assert_eq!(distinct.len(), batched, "multi_get read a data block more than once: {offsets:?}");
    assert!(batched > 10, "the keys should span many 512-byte blocks, read {batched}");

    counter.counting.store(true, Ordering::SeqCst);
    for k in &keys {
        assert!(db.get(k).unwrap().is_some());
    }
    let one_by_one = counter.reads.load(Ordering::SeqCst);
    assert_eq!(one_by_one, keys.len(), "without a cache each get reads its block");
    // Blocks of 512 bytes hold four of these entries (closed within
    // `block_size_deviation` of their size), so every other key is two keys
    // a block.
    assert!(batched * 2 <= one_by_one, "batched {batched} reads, one by one {one_by_one}");
}

fn pinned_usage(db: &Db) -> u64 {
    db.get_property("ebb.block-cache-pinned-usage").unwrap().parse().unwrap()
}

#[test]
fn a_pinned_value_holds_its_cache_entry_and_outlives_its_table() {
    let fs = MemFs::new();
    let mut o = manual_options(&fs);
    o.block_cache_size = 1 << 20;
    let db = Db::open("/db", o).unwrap();
    for i in 0..200 {
        db.put(&key(i), format!("value-{i}").repeat(10).as_bytes()).unwrap();
    }
    db.flush(true).unwrap();
    db.put(&key(5), b"in the memtable").unwrap();

    let from_memtable = db.get_pinned(&key(5)).unwrap().unwrap();
    assert!(!from_memtable.is_pinned());
    assert_eq!(&*from_memtable, b"in the memtable");

    assert_eq!(pinned_usage(&db), 0);
    let pinned = db.get_pinned(&key(100)).unwrap().unwrap();
    assert!(pinned.is_pinned() && pinned.holds_cache_entry());
    assert_eq!(&*pinned, "value-100".repeat(10).as_bytes());
    assert!(pinned_usage(&db) > 0, "a pinned value's block counts as pinned");
    drop(pinned);
    assert_eq!(pinned_usage(&db), 0, "dropping the value unpins its block");

    // Held across a compaction that deletes the table it came from.
    let held = db.get_pinned(&key(150)).unwrap().unwrap();
    let tables_before =
        fs.list_dir(Path::new("/db")).unwrap().into_iter().filter(|n| n.ends_with(".sst")).collect::<Vec<_>>();
    db.put(&key(150), b"newer").unwrap();
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    let tables_after =
        fs.list_dir(Path::new("/db")).unwrap().into_iter().filter(|n| n.ends_with(".sst")).collect::<Vec<_>>();
    assert!(tables_before.iter().all(|t| !tables_after.contains(t)), "{tables_before:?} -> {tables_after:?}");
    assert_eq!(&*held, "value-150".repeat(10).as_bytes());
    assert_eq!(db.get_pinned(&key(150)).unwrap().unwrap(), b"newer".to_vec());
}

#[test]
fn a_damaged_block_fails_only_the_keys_it_holds() {
    let fs = MemFs::new();
    let mut o = manual_options(&fs);
    o.write_buffer_size = 1 << 20;
    o.target_file_size_base = 1 << 20;
    let mut model = Model::new();
    {
        let db = Db::open("/db", o.clone()).unwrap();
        for i in 0..400 {
            let v = format!("value-{i}").repeat(8).into_bytes();
            db.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        db.flush(true).unwrap();
        db.close().unwrap();
    }
    // The first data block starts at offset 0: damage a byte inside it.
    let mut files = files_of(&fs, "/db");
    let (_, bytes) = files.iter_mut().find(|(n, _)| n.ends_with(".sst")).unwrap();
    bytes[20] ^= 0x40;
    o.fs = Arc::new(fs_holding("/db", &files));
    let db = Db::open("/db", o).unwrap();
    let keys: Vec<Vec<u8>> = (0..400).rev().map(key).collect();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let (mut failed, mut answered) = (Vec::new(), 0);
    for (k, got) in keys.iter().zip(db.multi_get(&refs, &ReadOptions::default())) {
        match got {
            Ok(v) => {
                assert_eq!(v.as_ref(), model.get(k), "a wrong answer for {}", String::from_utf8_lossy(k));
                answered += 1;
            }
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                failed.push(k.clone());
            }
        }
    }
    assert!(failed.contains(&key(0)), "the damaged block's first key was answered");
    assert!(failed.len() < 20, "one block's keys failed, not {}", failed.len());
    assert_eq!(answered + failed.len(), 400);
    for k in &failed {
        assert!(db.get(k).is_err(), "get answers what multi_get failed");
        assert!(db.get_pinned(k).is_err(), "get_pinned answers what multi_get failed");
    }
}

#[test]
fn a_dropped_family_fails_only_its_keys() {
    let o = tiny_options(Some(MemFs::new()));
    let db = Db::open("/db", o.clone()).unwrap();
    let gone = db.create_column_family("gone", &o).unwrap();
    let default = db.cf_handle("default").unwrap();
    db.put(b"a", b"1").unwrap();
    db.put_cf(&gone, b"a", b"2").unwrap();
    db.drop_column_family(&gone).unwrap();
    let got = db.multi_get_cf(
        &[(&gone, b"a".as_slice()), (&default, b"a"), (&gone, b"b"), (&default, b"b")],
        &ReadOptions::default(),
    );
    assert!(got[0].is_err() && got[2].is_err(), "{got:?}");
    assert_eq!(got[1].as_ref().unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(got[3].as_ref().unwrap(), &None);
}

/// Tables written with different index restart intervals live side by side:
/// a database written at one interval, reopened at others (so levels hold
/// tables of several intervals, and compactions rewrite them), reads as the
/// model says, through gets, `multi_get` and a scan.
#[test]
fn tables_of_every_index_restart_interval_read_alike() {
    let fs = MemFs::new();
    let mut model = Model::new();
    let mut rng = StdRng::seed_from_u64(17);
    for (round, interval) in [1usize, 16, 3, 64].into_iter().enumerate() {
        let mut o = tiny_options(Some(fs.clone()));
        o.index_block_restart_interval = interval;
        let db = Db::open("/db", o).unwrap();
        write_random(&db, &mut model, &mut rng, 3000, 4000, 0.1, round);
        db.flush(true).unwrap();
        if round == 2 {
            db.compact_range(None, None).unwrap();
        }
        db.wait_for_compact().unwrap();
        let keys: Vec<Vec<u8>> = (0..4100).map(key).collect();
        for k in &keys {
            assert_eq!(db.get(k).unwrap().as_ref(), model.get(k), "interval {interval}: get {k:?}");
        }
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let batched = db.multi_get(&refs, &ReadOptions::default());
        for (k, got) in keys.iter().zip(batched) {
            assert_eq!(got.unwrap().as_ref(), model.get(k), "interval {interval}: multi_get {k:?}");
        }
        assert_eq!(scan(&db, ReadOptions::default()), model, "interval {interval}: scan");
        db.close().unwrap();
    }
}

/// `n` random writes to keys below `keys`, mirrored in `model`: a deletion
/// with probability `delete`, else a put of a value tagged `tag`.
fn write_random(
    db: &Db,
    model: &mut Model,
    rng: &mut StdRng,
    n: usize,
    keys: u32,
    delete: f64,
    tag: impl std::fmt::Display,
) {
    for _ in 0..n {
        let k = key(rng.gen_range(0..keys));
        if rng.gen_bool(delete) {
            db.delete(&k).unwrap();
            model.remove(&k);
        } else {
            let v = format!("v{tag}-{}", rng.gen::<u32>()).into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
}

/// A database of `runs` L0 files (no compaction), each run putting and
/// deleting random keys of 400, with the model after each run.
fn deep_l0(o: &ebb::Options, runs: u32, seed: u64) -> (Db, Vec<Model>) {
    let db = Db::open("/db", o.clone()).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut after_each = Vec::new();
    for run in 0..runs {
        write_random(&db, &mut model, &mut rng, 60, 400, 0.2, run);
        db.flush(true).unwrap();
        after_each.push(model.clone());
    }
    let l0: u32 = db.get_property("ebb.num-files-at-level0").unwrap().parse().unwrap();
    assert_eq!(l0, runs, "every run is its own L0 file");
    (db, after_each)
}

fn deep_l0_options(fs: &MemFs) -> ebb::Options {
    let mut o = manual_options(fs);
    o.write_buffer_size = 1 << 20;
    o.level0_slowdown_writes_trigger = 1000;
    o.level0_stop_writes_trigger = 1000;
    o
}

/// Point reads over an L0 of more files than one batch of filter probes
/// (`L0_PROBE_BATCH`, 8): the newest version wins across batch boundaries,
/// deletions hide older values, and a snapshot reads the runs it saw.
#[test]
fn point_reads_over_a_deep_l0_find_the_newest_version() {
    for (seed, cache_index_and_filter_blocks) in [(1u64, false), (2, true), (3, true)] {
        let fs = MemFs::new();
        let mut o = deep_l0_options(&fs);
        o.cache_index_and_filter_blocks = cache_index_and_filter_blocks;
        o.block_cache_size = 1 << 20;
        let (db, models) = deep_l0(&o, 21, seed);
        let snapshot = db.snapshot();
        let ctx = format!("seed {seed}, cache_index_and_filter_blocks={cache_index_and_filter_blocks}");
        let last = models.last().unwrap();
        for i in 0..420 {
            let k = key(i);
            assert_eq!(db.get(&k).unwrap().as_ref(), last.get(&k), "{ctx}: get of key{i:05}");
            let pinned = db.get_pinned(&k).unwrap();
            assert_eq!(pinned.as_deref(), last.get(&k).map(Vec::as_slice), "{ctx}: get_pinned of key{i:05}");
        }
        // Later writes go to new L0 files; the snapshot still reads the old.
        for i in 0..400 {
            db.put(&key(i), b"later").unwrap();
        }
        db.flush(true).unwrap();
        let ro = ReadOptions { snapshot: Some(&snapshot), ..ReadOptions::default() };
        for i in 0..420 {
            let k = key(i);
            assert_eq!(db.get_opt(&k, &ro).unwrap().as_ref(), last.get(&k), "{ctx}: snapshot read of key{i:05}");
            let want = (i < 400).then(|| b"later".to_vec());
            assert_eq!(db.get(&k).unwrap(), want, "{ctx}: get of key{i:05} after the later run");
        }
    }
}

/// Over a deep L0 a point read asks each table's filter before its key
/// range; a table with range tombstones is asked whatever its filter says,
/// as its tombstones delete keys it does not hold. Also after a reopen and
/// for a bound table cache, where the tables are found one by one.
#[test]
fn a_range_tombstone_in_a_deep_l0_deletes_keys_its_table_does_not_hold() {
    for max_open_files in [-1, 30] {
        let fs = MemFs::new();
        let mut o = deep_l0_options(&fs);
        o.max_open_files = max_open_files;
        let db = Db::open("/db", o.clone()).unwrap();
        for i in 0..100 {
            db.put(&key(i), b"old").unwrap();
        }
        db.flush(true).unwrap();
        // A table of one key and a tombstone over keys 10-19, which its
        // filter does not hold.
        db.delete_range(&key(10), &key(20)).unwrap();
        db.put(&key(500), b"new").unwrap();
        db.flush(true).unwrap();
        // Newer runs above it, past a batch of filter probes.
        for r in 0..10 {
            db.put(&key(1000 + r), b"newer").unwrap();
            db.flush(true).unwrap();
        }
        let check = |db: &Db, ctx: &str| {
            let l0: u32 = db.get_property("ebb.num-files-at-level0").unwrap().parse().unwrap();
            assert_eq!(l0, 12, "{ctx}: every run is its own L0 file");
            for pass in 0..2 {
                for i in 0..100 {
                    let want = (!(10..20).contains(&i)).then(|| b"old".to_vec());
                    assert_eq!(db.get(&key(i)).unwrap(), want, "{ctx}, pass {pass}: get of key{i:05}");
                }
                assert_eq!(db.get(&key(500)).unwrap(), Some(b"new".to_vec()), "{ctx}");
            }
        };
        check(&db, &format!("max_open_files={max_open_files}"));
        db.close().unwrap();
        let db = Db::open("/db", o).unwrap();
        check(&db, &format!("max_open_files={max_open_files}, reopened"));
    }
}

/// A table that cannot be opened fails only the reads that reach it: a
/// key whose newest version is in a newer file than the missing one (and
/// newer than everything it holds) reads without it. A table missing at
/// open fails the open, naming it; one that goes away after it is found by
/// the reads, if the open left it closed: with a bound table cache the open
/// opens a few tables (the newest here).
#[test]
fn a_missing_l0_file_fails_only_the_reads_that_reach_it() {
    let fs = MemFs::new();
    let mut o = deep_l0_options(&fs);
    let db = Db::open("/db", o.clone()).unwrap();
    // Ten runs: run r puts key r (and key 100 + r, left for later).
    for r in 0..10u32 {
        db.put(&key(r), format!("run{r}").as_bytes()).unwrap();
        db.put(&key(100 + r), format!("run{r}").as_bytes()).unwrap();
        db.flush(true).unwrap();
    }
    drop(db);
    // The oldest run's table goes away behind the engine's back.
    let mut tables: Vec<String> =
        files_of(&fs, "/db").into_iter().map(|(n, _)| n).filter(|n| n.ends_with(".sst")).collect();
    tables.sort();
    assert_eq!(tables.len(), 10);
    let oldest = Path::new("/db").join(&tables[0]);
    let bytes = fs.file_bytes(&oldest).unwrap();
    fs.remove_file(&oldest).unwrap();
    let e = Db::open("/db", o.clone()).err().expect("an open with a table missing");
    assert!(e.to_string().contains(&tables[0]), "the error names the missing table: {e}");
    fs.set_file_bytes(&oldest, &bytes).unwrap();
    // Twenty open files at most: ten tables, of which the open opens two.
    o.max_open_files = 20;
    let db = Db::open("/db", o).unwrap();
    fs.remove_file(&oldest).unwrap();
    // Keys of runs 1-9 are found in newer files than the missing one.
    for r in 1..10u32 {
        assert_eq!(db.get(&key(r)).unwrap(), Some(format!("run{r}").into_bytes()), "key of run {r}");
    }
    // A key held only by the missing file, or absent (every file is asked):
    // an error, not a silent miss.
    assert!(db.get(&key(0)).is_err(), "the missing file's key read as absent");
    assert!(db.get(&key(99)).is_err(), "an absent key read past a missing file");
}
