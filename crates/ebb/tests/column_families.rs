//! Column families: isolation, atomic batches across families through a
//! crash, WAL retention across families, `max_total_wal_size`, the family
//! catalogue (create, drop, list, open) and per-family compaction.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::{tiny_options, Model};
use ebb::fs::{CrashMode, FaultRule, FileSystem, MemFs};
use ebb::{ColumnFamilyHandle, Db, Options, ReadOptions, WriteBatch, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DB: &str = "/cf";

fn options(fs: &MemFs) -> Options {
    let mut o = Options::default();
    o.create_if_missing = true;
    o.fs = Arc::new(fs.clone());
    o
}

/// Options whose memtables never fill in these tests.
fn big_buffers(fs: &MemFs) -> Options {
    let mut o = options(fs);
    o.write_buffer_size = 4 << 20;
    o
}

fn scan_cf(db: &Db, cf: &ColumnFamilyHandle) -> Model {
    let mut it = db.iter_cf(cf, ReadOptions::default());
    it.seek_to_first();
    let mut out = BTreeMap::new();
    while it.valid() {
        out.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().expect("iterator status");
    out
}

/// Files of `kind` ("log", "sst") in the database directory, by number.
fn files(fs: &MemFs, kind: &str) -> Vec<u64> {
    let mut out: Vec<u64> = fs
        .list_dir(Path::new(DB))
        .unwrap()
        .iter()
        .filter_map(|n| n.strip_suffix(&format!(".{kind}")).and_then(|s| s.parse().ok()))
        .collect();
    out.sort_unstable();
    out
}

fn model(pairs: &[(&str, &str)]) -> Model {
    pairs.iter().map(|(k, v)| (k.as_bytes().to_vec(), v.as_bytes().to_vec())).collect()
}

fn open_ab(o: &Options) -> Db {
    Db::open_cf(DB, o.clone(), &[("a", o.clone()), ("b", o.clone())]).unwrap()
}

#[test]
fn families_are_isolated_and_survive_reopen() {
    let fs = MemFs::new();
    let o = options(&fs);
    let db = Db::open(DB, o.clone()).unwrap();
    let a = db.create_column_family("a", &o).unwrap();
    let b = db.create_column_family("b", &o).unwrap();
    db.put(b"k", b"default").unwrap();
    db.put_cf(&a, b"k", b"in a").unwrap();
    db.put_cf(&b, b"k", b"in b").unwrap();
    db.put_cf(&a, b"only-a", b"1").unwrap();
    db.put_cf(&b, b"only-b", b"2").unwrap();
    db.delete_cf(&a, b"k").unwrap();
    let check = |db: &Db, a: &ColumnFamilyHandle, b: &ColumnFamilyHandle| {
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"default"[..]));
        assert_eq!(db.get_cf(a, b"k").unwrap(), None, "the delete in a");
        assert_eq!(db.get_cf(b, b"k").unwrap().as_deref(), Some(&b"in b"[..]), "b is untouched by a's delete");
        assert_eq!(db.get(b"only-a").unwrap(), None);
        assert_eq!(db.get_cf(b, b"only-a").unwrap(), None);
        assert_eq!(scan_cf(db, a), model(&[("only-a", "1")]));
        assert_eq!(scan_cf(db, b), model(&[("k", "in b"), ("only-b", "2")]));
        assert_eq!(common::scan(db, ReadOptions::default()), model(&[("k", "default")]));
    };
    check(&db, &a, &b);
    // From the memtables of one family and the tables of the other.
    db.flush_cf(&a, true).unwrap();
    check(&db, &a, &b);
    drop((a, b));
    db.close().unwrap();
    // Recovered from the WAL (b, default) and from tables (a).
    let db = open_ab(&o);
    let (a, b) = (db.cf_handle("a").unwrap(), db.cf_handle("b").unwrap());
    check(&db, &a, &b);
    db.flush(true).unwrap();
    db.flush_cf(&b, true).unwrap();
    check(&db, &a, &b);
    drop((a, b));
    db.close().unwrap();
    let db = open_ab(&o);
    check(&db, &db.cf_handle("a").unwrap(), &db.cf_handle("b").unwrap());
}

/// One batch of `i` writes a value to `k<i>` in every family; values are big
/// enough that one batch spans WAL blocks, so a crash can tear it anywhere.
fn cross_batch(i: usize, a: &ColumnFamilyHandle, b: &ColumnFamilyHandle) -> WriteBatch {
    let key = format!("k{i:03}");
    let value = vec![b'0' + (i % 10) as u8; 15_000];
    let mut batch = WriteBatch::new();
    batch.put(key.as_bytes(), &value);
    batch.put_cf(a, key.as_bytes(), &value);
    batch.delete_cf(b, b"gone");
    batch.put_cf(b, key.as_bytes(), &value);
    batch
}

/// After recovery, every batch is wholly there or wholly missing, and those
/// there are a prefix of those written, no shorter than `durable`.
fn check_batches_atomic(fs: MemFs, written: usize, durable: usize, ctx: &str) -> usize {
    let o = options(&fs);
    let db = open_ab(&o);
    let (a, b) = (db.cf_handle("a").unwrap(), db.cf_handle("b").unwrap());
    let mut present = 0;
    for i in 0..written {
        let key = format!("k{i:03}");
        let found = [
            db.get(key.as_bytes()).unwrap(),
            db.get_cf(&a, key.as_bytes()).unwrap(),
            db.get_cf(&b, key.as_bytes()).unwrap(),
        ];
        let n = found.iter().filter(|v| v.is_some()).count();
        assert!(n == 0 || n == 3, "{ctx}: batch {i} recovered in part ({n} of 3 families)");
        if n == 3 {
            assert_eq!(present, i, "{ctx}: batch {i} recovered after a lost one");
            present += 1;
        }
    }
    assert!(present >= durable, "{ctx}: {present} batches recovered, {durable} were synced");
    if present > 0 {
        assert_eq!(db.get_cf(&b, b"gone").unwrap(), None, "{ctx}: the batch's delete in b was lost");
    }
    present
}

/// Writes the preamble of the crash tests: the families and a synced key.
fn crash_setup(fs: &MemFs) -> (Db, ColumnFamilyHandle, ColumnFamilyHandle) {
    let o = options(fs);
    let db = Db::open(DB, o.clone()).unwrap();
    let a = db.create_column_family("a", &o).unwrap();
    let b = db.create_column_family("b", &o).unwrap();
    db.put_cf_opt(&b, b"gone", b"x", &WriteOptions { sync: true, ..Default::default() }).unwrap();
    (db, a, b)
}

#[test]
fn a_batch_across_families_is_all_or_nothing_through_a_crash() {
    const BATCHES: usize = 6;
    let mut outcomes = std::collections::BTreeSet::new();
    // A power loss keeping a random prefix of the unsynced WAL bytes.
    for seed in 0..24 {
        let fs = MemFs::new();
        let (db, a, b) = crash_setup(&fs);
        let synced = seed as usize % 3;
        for i in 0..BATCHES {
            let wo = WriteOptions { sync: i < synced, ..Default::default() };
            db.write_opt(&cross_batch(i, &a, &b), &wo).unwrap();
        }
        let crashed = fs.crash_clone(CrashMode::KeepRandomPrefix { seed });
        drop(db);
        outcomes.insert(check_batches_atomic(crashed, BATCHES, synced, &format!("random prefix, seed {seed}")));
    }
    // The crashes tore the history at several places, not only at its ends.
    assert!(outcomes.iter().filter(|n| **n > 0 && **n < BATCHES).count() >= 2, "{outcomes:?}");
    // A write failing at its k-th filesystem operation, then a power loss.
    let probe = MemFs::new();
    let (db, a, b) = crash_setup(&probe);
    let before = probe.op_count();
    for i in 0..BATCHES {
        db.write_opt(&cross_batch(i, &a, &b), &WriteOptions { sync: true, ..Default::default() }).unwrap();
    }
    let ops = probe.op_count() - before;
    drop(db);
    for k in 1..=ops {
        let fs = MemFs::new();
        let (db, a, b) = crash_setup(&fs);
        fs.inject(FaultRule::any_op().nth(k).persistent());
        let mut durable = 0;
        for i in 0..BATCHES {
            if db.write_opt(&cross_batch(i, &a, &b), &WriteOptions { sync: true, ..Default::default() }).is_err() {
                break;
            }
            durable = i + 1;
        }
        let crashed = fs.crash_clone(CrashMode::DropUnsynced);
        drop(db);
        check_batches_atomic(crashed, BATCHES, durable, &format!("fault at operation {k}"));
        outcomes.insert(durable);
    }
}

#[test]
fn a_wal_stays_until_every_family_has_flushed_past_it() {
    wal_retention(false);
}

#[test]
fn a_wal_stays_until_every_family_has_flushed_past_it_with_manifest_rollovers() {
    wal_retention(true);
}

/// With `roll`, every MANIFEST edit starts a new MANIFEST, so the families'
/// log numbers must survive in its snapshot.
fn wal_retention(roll: bool) {
    let fs = MemFs::new();
    let mut o = big_buffers(&fs);
    if roll {
        o.max_manifest_file_size = 1;
    }
    let db = Db::open(DB, o.clone()).unwrap();
    let a = db.create_column_family("a", &o).unwrap();
    let b = db.create_column_family("b", &o).unwrap();
    // A family never written must not keep any WAL alive.
    let _idle = db.create_column_family("idle", &o).unwrap();
    let first_wal = *files(&fs, "log").last().unwrap();
    db.put_cf(&a, b"ka", b"va").unwrap();
    db.put_cf(&a, b"deleted", b"old").unwrap();
    db.put_cf(&b, b"kb", b"vb").unwrap();
    db.flush_cf(&a, true).unwrap();
    // A delete kept only in a's tables (written without the WAL), then
    // compacted away: only a's log number keeps the old WAL's put from being
    // replayed into a.
    db.delete_cf_opt(&a, b"deleted", &WriteOptions { disable_wal: true, ..Default::default() }).unwrap();
    db.compact_range_cf(&a, None, None).unwrap();
    assert!(files(&fs, "log").contains(&first_wal), "b's data is only in WAL {first_wal}: {:?}", files(&fs, "log"));
    assert_eq!(db.get_property("ebb.num-live-wal-files").as_deref(), Some("3"));
    // A crash now recovers b's data from the old WAL (and a's from its table).
    db.flush_wal(true).unwrap();
    let crashed = fs.crash_clone(CrashMode::DropUnsynced);
    {
        let mut o = big_buffers(&crashed);
        o.max_manifest_file_size = if roll { 1 } else { o.max_manifest_file_size };
        let db = Db::open_cf(DB, o.clone(), &[("a", o.clone()), ("b", o.clone()), ("idle", o.clone())]).unwrap();
        assert_eq!(db.get_cf(&db.cf_handle("b").unwrap(), b"kb").unwrap().as_deref(), Some(&b"vb"[..]));
        assert_eq!(scan_cf(&db, &db.cf_handle("a").unwrap()), model(&[("ka", "va")]));
    }
    db.flush_cf(&b, true).unwrap();
    let logs = files(&fs, "log");
    assert!(!logs.contains(&first_wal), "every family flushed past WAL {first_wal}, still there: {logs:?}");
    assert_eq!(logs.len(), 1, "{logs:?}");
    // Flushing one family does not let a WAL go that another needs, also
    // across several WAL switches.
    db.put_cf(&b, b"kb2", b"vb2").unwrap();
    let pinned = *files(&fs, "log").last().unwrap();
    for i in 0..3 {
        db.put_cf(&a, format!("a{i}").as_bytes(), b"v").unwrap();
        db.flush_cf(&a, true).unwrap();
    }
    assert!(files(&fs, "log").contains(&pinned));
    db.flush_cf(&b, true).unwrap();
    assert_eq!(files(&fs, "log").len(), 1, "{:?}", files(&fs, "log"));
    drop((a, b, _idle));
    db.close().unwrap();
    let db = Db::open_cf(DB, o.clone(), &[("a", o.clone()), ("b", o.clone()), ("idle", o.clone())]).unwrap();
    let b = db.cf_handle("b").unwrap();
    assert_eq!(scan_cf(&db, &b), model(&[("kb", "vb"), ("kb2", "vb2")]));
}

#[test]
fn max_total_wal_size_flushes_the_family_pinning_the_oldest_wal() {
    let run = |max_total_wal_size: u64| {
        let fs = MemFs::new();
        let mut o = big_buffers(&fs);
        o.max_total_wal_size = max_total_wal_size;
        let db = Db::open(DB, o.clone()).unwrap();
        // `slow` takes one write and then none: its memtable pins the WAL it
        // went to. `busy` flushes every few KiB, switching WALs.
        let slow = db.create_column_family("slow", &o).unwrap();
        let mut small = o.clone();
        small.write_buffer_size = 8 << 10;
        let busy = db.create_column_family("busy", &small).unwrap();
        db.put_cf(&slow, b"pinned", b"value").unwrap();
        for i in 0..400u32 {
            db.put_cf(&busy, format!("key{i:05}").as_bytes(), &[b'v'; 500]).unwrap();
        }
        db.wait_for_compact().unwrap();
        let slow_files: u64 = db.get_property_cf(&slow, "ebb.num-files-at-level0").unwrap().parse().unwrap();
        let default_files: u64 = db.get_property("ebb.num-files-at-level0").unwrap().parse().unwrap();
        let wals: u64 = db.get_property("ebb.num-live-wal-files").unwrap().parse().unwrap();
        let wal_bytes: u64 = db.get_property("ebb.total-wal-size").unwrap().parse().unwrap();
        assert_eq!(db.get_cf(&slow, b"pinned").unwrap().as_deref(), Some(&b"value"[..]));
        (slow_files, default_files, wals, wal_bytes, db.metrics().wal_full_flushes)
    };
    let (slow_files, default_files, wals, wal_bytes, forced) = run(64 << 10);
    assert_eq!(slow_files, 1, "the family pinning the oldest WAL was flushed once");
    assert_eq!(default_files, 0, "the empty default family pins nothing and is not flushed");
    assert_eq!(forced, 1);
    assert!(wal_bytes <= 96 << 10, "live WALs hold {wal_bytes} bytes in {wals} files");
    // Without a small limit (0: four times the memtable budget), nothing forces it.
    let (slow_files, _, wals, _, forced) = run(0);
    assert_eq!((slow_files, forced), (0, 0));
    assert!(wals > 10, "{wals} WALs pinned by the slow family");
}

#[test]
fn families_are_listed_created_dropped_and_must_all_be_opened() {
    let fs = MemFs::new();
    let o = options(&fs);
    let db = Db::open(DB, o.clone()).unwrap();
    assert_eq!(Db::list_column_families(DB, &o).unwrap(), vec!["default"]);
    let a = db.create_column_family("a", &o).unwrap();
    let b = db.create_column_family("b", &o).unwrap();
    assert_eq!(Db::list_column_families(DB, &o).unwrap(), vec!["default", "a", "b"]);
    let e = db.create_column_family("a", &o).unwrap_err();
    assert!(e.to_string().contains("'a'") && e.to_string().contains("exists"), "{e}");
    let e = db.drop_column_family(&db.cf_handle("default").unwrap()).unwrap_err();
    assert!(e.to_string().contains("default"), "{e}");

    // Dropping a family deletes its tables.
    let before = files(&fs, "sst");
    for i in 0..50u32 {
        db.put_cf(&a, format!("k{i}").as_bytes(), b"v").unwrap();
    }
    db.flush_cf(&a, true).unwrap();
    let a_files: Vec<u64> = files(&fs, "sst").into_iter().filter(|n| !before.contains(n)).collect();
    assert!(!a_files.is_empty());
    db.put_cf(&a, b"unflushed", b"v").unwrap();
    db.drop_column_family(&a).unwrap();
    let left = files(&fs, "sst");
    assert!(a_files.iter().all(|n| !left.contains(n)), "a's tables {a_files:?} outlive the drop: {left:?}");
    assert_eq!(Db::list_column_families(DB, &o).unwrap(), vec!["default", "b"]);
    assert!(db.cf_handle("a").is_none());

    // The dropped family's handle fails, without a panic.
    assert!(a.is_dropped());
    for e in [
        db.put_cf(&a, b"k", b"v").unwrap_err(),
        db.get_cf(&a, b"k0").unwrap_err(),
        db.delete_cf(&a, b"k").unwrap_err(),
        db.flush_cf(&a, true).unwrap_err(),
        db.compact_range_cf(&a, None, None).unwrap_err(),
        db.drop_column_family(&a).unwrap_err(),
        db.iter_cf(&a, ReadOptions::default()).status().unwrap_err(),
    ] {
        assert!(e.to_string().contains("'a'") && e.to_string().contains("dropped"), "{e}");
    }
    let mut batch = WriteBatch::new();
    batch.put(b"x", b"1");
    batch.put_cf(&a, b"x", b"1");
    assert!(db.write(&batch).is_err(), "a batch writing to a dropped family is refused");
    assert_eq!(db.get(b"x").unwrap(), None, "and none of it is applied");
    assert_eq!(db.get_property_cf(&a, "ebb.num-files-at-level0"), None);

    // A new family never reuses the dropped one's id, so the WAL entries of
    // `a` are not replayed into it.
    let a2 = db.create_column_family("a", &o).unwrap();
    assert_ne!(a2.id(), a.id());
    db.put_cf(&b, b"kb", b"vb").unwrap();
    drop((a2, b));
    db.close().unwrap();

    // Every family must be opened, and only existing ones.
    let e = Db::open(DB, o.clone()).err().expect("open without listing families");
    assert!(e.to_string().contains("'a'") || e.to_string().contains("'b'"), "{e}");
    let e = Db::open_cf(DB, o.clone(), &[("a", o.clone())]).err().expect("b not listed");
    assert!(e.to_string().contains("'b'"), "{e}");
    let e = Db::open_cf(DB, o.clone(), &[("a", o.clone()), ("b", o.clone()), ("nope", o.clone())])
        .err()
        .expect("an unknown family");
    assert!(e.to_string().contains("'nope'"), "{e}");
    let db = Db::open_cf(DB, o.clone(), &[("default", o.clone()), ("b", o.clone()), ("a", o.clone())]).unwrap();
    assert_eq!(Db::list_column_families(DB, &o).unwrap(), vec!["default", "b", "a"]);
    assert_eq!(db.column_family_names(), vec!["default", "b", "a"]);
    assert_eq!(scan_cf(&db, &db.cf_handle("a").unwrap()), Model::new(), "the new 'a' starts empty");
    assert_eq!(db.get_cf(&db.cf_handle("b").unwrap(), b"kb").unwrap().as_deref(), Some(&b"vb"[..]));
    // A MANIFEST rolled over keeps the families and the largest id, also
    // when the family that had it was dropped.
    let tmp = db.create_column_family("tmp", &o).unwrap();
    db.drop_column_family(&tmp).unwrap();
    drop(db);
    let mut rolled = o.clone();
    rolled.max_manifest_file_size = 1;
    let db = Db::open_cf(DB, rolled.clone(), &[("b", rolled.clone()), ("a", rolled.clone())]).unwrap();
    db.put(b"roll", b"1").unwrap();
    db.flush(true).unwrap();
    drop(db);
    let db = Db::open_cf(DB, o.clone(), &[("b", o.clone()), ("a", o.clone())]).unwrap();
    let c = db.create_column_family("c", &rolled).unwrap();
    assert!(c.id() > tmp.id(), "id {} handed out again", c.id());
    drop((c, db));
    assert_eq!(Db::list_column_families(DB, &o).unwrap(), vec!["default", "b", "a", "c"]);
}

#[test]
fn each_family_compacts_by_its_own_options() {
    let fs = MemFs::new();
    // The default family never compacts; `c` has tiny buffers and levels.
    let mut o = big_buffers(&fs);
    o.disable_auto_compactions = true;
    let c_opts = tiny_options(Some(fs.clone()));
    let db = Db::open(DB, o.clone()).unwrap();
    let c = db.create_column_family("c", &c_opts).unwrap();
    let mut rng = StdRng::seed_from_u64(8);
    let mut want = Model::new();
    let mut default_want = Model::new();
    for i in 0..3000u32 {
        let key = format!("key{:05}", rng.gen_range(0..1500)).into_bytes();
        if rng.gen_bool(0.1) {
            db.delete_cf(&c, &key).unwrap();
            want.remove(&key);
        } else {
            let value = format!("value{i}-{}", "x".repeat(rng.gen_range(10..120))).into_bytes();
            db.put_cf(&c, &key, &value).unwrap();
            want.insert(key.clone(), value);
        }
        if i % 100 == 0 {
            db.put(&key, b"default").unwrap();
            default_want.insert(key, b"default".to_vec());
        }
    }
    db.wait_for_compact().unwrap();
    let deeper: u64 = (1..4)
        .map(|l| db.get_property_cf(&c, &format!("ebb.num-files-at-level{l}")).unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(deeper > 0, "c's flushes were compacted into deeper levels");
    let l0: u64 = db.get_property_cf(&c, "ebb.num-files-at-level0").unwrap().parse().unwrap();
    assert!(l0 < 2, "{l0} L0 files left at c's trigger of 2");
    assert_eq!(db.get_property("ebb.num-files-at-level0").as_deref(), Some("0"), "the default family did not flush");
    assert_eq!(scan_cf(&db, &c), want);
    assert_eq!(common::scan(&db, ReadOptions::default()), default_want);
    for (k, v) in want.iter().step_by(37) {
        assert_eq!(db.get_cf(&c, k).unwrap().as_ref(), Some(v));
    }
    db.compact_range_cf(&c, None, None).unwrap();
    assert_eq!(scan_cf(&db, &c), want);
    drop(c);
    db.close().unwrap();
    let db = Db::open_cf(DB, o.clone(), &[("c", c_opts.clone())]).unwrap();
    assert_eq!(scan_cf(&db, &db.cf_handle("c").unwrap()), want);
    assert_eq!(common::scan(&db, ReadOptions::default()), default_want);
}

#[test]
fn a_family_is_dropped_while_its_flush_and_writes_go_on() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    let db = Arc::new(Db::open(DB, o.clone()).unwrap());
    let victim = db.create_column_family("victim", &o).unwrap();
    let writer = {
        let (db, victim) = (Arc::clone(&db), victim.clone());
        std::thread::spawn(move || {
            let mut n = 0;
            while db.put_cf(&victim, format!("k{n}").as_bytes(), &[b'v'; 200]).is_ok() {
                n += 1;
            }
            n
        })
    };
    while db.get_property_cf(&victim, "ebb.total-sst-files-size").is_some_and(|n| n == "0") {
        std::thread::yield_now();
    }
    db.drop_column_family(&victim).unwrap();
    assert!(writer.join().unwrap() > 0);
    for i in 0..200u32 {
        db.put(format!("d{i}").as_bytes(), &[b'd'; 200]).unwrap();
    }
    db.wait_for_compact().unwrap();
    db.flush(true).unwrap();
    assert_eq!(db.get_property("ebb.background-errors").as_deref(), Some("0"));
    let Ok(db) = Arc::try_unwrap(db) else { panic!("the writer thread still holds the database") };
    db.close().unwrap();
    let db = Db::open(DB, o.clone()).unwrap();
    assert_eq!(common::scan(&db, ReadOptions::default()).len(), 200);
}

/// The visible state of every family, by name.
type Families = BTreeMap<String, Model>;

/// The catalogue workload: each step is one atomic change (or a flush).
const CATALOGUE: &[&str] = &[
    "create a",
    "put a k1",
    "create b",
    "put b k1",
    "put default k1",
    "flush a",
    "batch",
    "flush b",
    "drop a",
    "create c",
    "put c k1",
    "flush default",
    "put b k3",
];

/// What step `step` makes of `state`.
fn model_step(step: usize, state: &Families) -> Families {
    let mut next = state.clone();
    let words: Vec<&str> = CATALOGUE[step].split(' ').collect();
    match words[..] {
        ["create", name] => {
            next.insert(name.into(), Model::new());
        }
        ["drop", name] => {
            next.remove(name);
        }
        ["put", family, key] => {
            let value = format!("{family}-{key}-{step}").into_bytes();
            next.get_mut(family).unwrap().insert(key.as_bytes().to_vec(), value);
        }
        ["batch"] => {
            next.get_mut("default").unwrap().insert(b"k2".to_vec(), b"d2".to_vec());
            next.get_mut("a").unwrap().insert(b"k2".to_vec(), b"a2".to_vec());
            next.get_mut("b").unwrap().remove(&b"k1".to_vec());
        }
        _ => {}
    }
    next
}

/// Runs step `step` on `db`; every write is synced.
fn db_step(db: &Db, o: &Options, step: usize) -> ebb::Result<()> {
    let sync = WriteOptions { sync: true, ..Default::default() };
    let handle = |name: &str| db.cf_handle(name).expect("a family of the model");
    let words: Vec<&str> = CATALOGUE[step].split(' ').collect();
    match words[..] {
        ["create", name] => db.create_column_family(name, o).map(drop),
        ["drop", name] => db.drop_column_family(&handle(name)),
        ["put", "default", key] => db.put_opt(key.as_bytes(), format!("default-{key}-{step}").as_bytes(), &sync),
        ["put", family, key] => {
            db.put_cf_opt(&handle(family), key.as_bytes(), format!("{family}-{key}-{step}").as_bytes(), &sync)
        }
        ["flush", "default"] => db.flush(true),
        ["flush", family] => db.flush_cf(&handle(family), true),
        ["batch"] => {
            let mut batch = WriteBatch::new();
            batch.put(b"k2", b"d2");
            batch.put_cf(&handle("a"), b"k2", b"a2");
            batch.delete_cf(&handle("b"), b"k1");
            db.write_opt(&batch, &sync)
        }
        _ => unreachable!("{}", CATALOGUE[step]),
    }
}

/// Runs the catalogue workload until a step fails. Returns the state after
/// the last step that succeeded, and the state the failed step would have
/// made (`None` when none failed, or opening failed).
fn run_catalogue(o: &Options) -> (Families, Option<Families>) {
    let mut state = Families::from([("default".to_string(), Model::new())]);
    let Ok(db) = Db::open(DB, o.clone()) else { return (state, None) };
    for step in 0..CATALOGUE.len() {
        let next = model_step(step, &state);
        if db_step(&db, o, step).is_err() {
            return (state, Some(next));
        }
        state = next;
    }
    (state, None)
}

/// Opens the crashed copy with every family its MANIFEST lists.
fn recovered_families(fs: &MemFs, o: &Options) -> Families {
    let mut o = o.clone();
    o.fs = Arc::new(fs.clone());
    o.create_if_missing = false;
    let names = Db::list_column_families(DB, &o).unwrap();
    let listed: Vec<(&str, Options)> = names.iter().map(|n| (n.as_str(), o.clone())).collect();
    let db = Db::open_cf(DB, o.clone(), &listed).unwrap();
    names.iter().map(|n| (n.clone(), scan_cf(&db, &db.cf_handle(n).unwrap()))).collect()
}

#[test]
fn creating_and_dropping_families_survives_a_crash_at_every_point() {
    for roll_every_edit in [false, true] {
        let base = |fs: &MemFs| {
            let mut o = options(fs);
            if roll_every_edit {
                o.max_manifest_file_size = 1;
            }
            o
        };
        let probe = MemFs::new();
        let (done, failed) = run_catalogue(&base(&probe));
        assert!(failed.is_none(), "the clean run failed");
        assert_eq!(recovered_families(&probe, &base(&probe)), done);
        let ops = probe.op_count();
        for k in 1..=ops {
            let fs = MemFs::new();
            let o = base(&fs);
            fs.inject(FaultRule::any_op().nth(k).persistent());
            let (done, failed) = run_catalogue(&o);
            let crashed = fs.crash_clone(CrashMode::DropUnsynced);
            if !crashed.exists(&Path::new(DB).join("CURRENT")) {
                continue;
            }
            // Every step that succeeded is durable (writes are synced;
            // creates, drops and flushes sync the MANIFEST); the failed one
            // may or may not have reached the disk, wholly.
            let got = recovered_families(&crashed, &o);
            assert!(
                got == done || failed.as_ref() == Some(&got),
                "roll {roll_every_edit}, fault at operation {k} of {ops}: recovered {got:?}, \
                 expected {done:?} or {failed:?}"
            );
        }
    }
}

/// The options split (RocksDB's `DBOptions` / `ColumnFamilyOptions`): a
/// family is created and reopened with a `ColumnFamilyOptions`, reports the
/// options it runs with, keeps them when the database's change, and its
/// flushes are told to the database's listeners.
#[test]
fn families_run_with_column_family_options_and_the_database_listeners() {
    use ebb::{ColumnFamilyOptions, EventListener, FlushJobInfo};
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Flushes(AtomicUsize);
    impl EventListener for Flushes {
        fn on_flush_completed(&self, _info: &FlushJobInfo) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let fs = MemFs::new();
    let flushes = Arc::new(Flushes::default());
    let mut o = big_buffers(&fs);
    o.listeners.push(flushes.clone());
    let db = Db::open(DB, o.clone()).unwrap();
    let mut cf = ColumnFamilyOptions::default();
    cf.write_buffer_size = 1 << 20;
    cf.block_size = 1024;
    cf.num_levels = 5;
    let c = db.create_column_family("c", &cf).unwrap();
    let got = db.cf_options(&c);
    assert_eq!((got.write_buffer_size, got.block_size, got.num_levels), (1 << 20, 1024, 5));
    // The default family's options are the database's column-family part,
    // changed with them by set_options; the other family keeps its own.
    let default = db.cf_handle("default").unwrap();
    assert_eq!(db.cf_options(&default).write_buffer_size, 4 << 20);
    db.set_options(&[("write_buffer_size", "2097152")]).unwrap();
    assert_eq!(db.cf_options(&default).write_buffer_size, 2 << 20);
    assert_eq!(db.cf_options(&c).write_buffer_size, 1 << 20);
    // A flush of the other family reaches the database's listeners.
    db.put_cf(&c, b"k", b"v").unwrap();
    db.flush_cf(&c, true).unwrap();
    assert_eq!(flushes.0.load(Ordering::SeqCst), 1, "the family's flush was not told");
    // An invalid family option is refused by name.
    let mut bad = ColumnFamilyOptions::default();
    bad.num_levels = 0;
    let e = db.create_column_family("bad", &bad).expect_err("num_levels 0 accepted");
    assert!(e.to_string().contains("num_levels"), "{e}");
    drop((c, default));
    db.close().unwrap();
    // Reopened with a ColumnFamilyOptions descriptor.
    let db = Db::open_cf(DB, o, &[("c", cf.clone())]).unwrap();
    let c = db.cf_handle("c").unwrap();
    assert_eq!(db.cf_options(&c).block_size, 1024);
    assert_eq!(db.get_cf(&c, b"k").unwrap(), Some(b"v".to_vec()));
}

/// A `write_buffer_size` lowered by `set_options` is the one the next
/// writes switch memtables at: a memtable already past the new size is made
/// immutable by the next write.
#[test]
fn a_lowered_write_buffer_size_switches_memtables_at_the_new_size() {
    let fs = MemFs::new();
    let db = Db::open(DB, big_buffers(&fs)).unwrap();
    let switched = |db: &Db| {
        let imm: u64 = db.get_property("ebb.num-immutable-mem-table").unwrap().parse().unwrap();
        let l0: u64 = db.get_property("ebb.num-files-at-level0").unwrap().parse().unwrap();
        imm + l0
    };
    let value = vec![b'v'; 2048];
    for i in 0..100u32 {
        db.put(format!("a{i:04}").as_bytes(), &value).unwrap();
    }
    assert_eq!(switched(&db), 0, "200 KB switched a memtable of 4 MiB");
    db.set_options(&[("write_buffer_size", "65536")]).unwrap();
    db.put(b"b", &value).unwrap();
    db.put(b"c", &value).unwrap();
    assert!(switched(&db) >= 1, "a memtable of 200 KB kept past a write_buffer_size of 64 KiB");
    for i in 0..100u32 {
        assert_eq!(db.get(format!("a{i:04}").as_bytes()).unwrap().as_deref(), Some(&value[..]));
    }
    db.close().unwrap();
}

/// Every flush and compaction event names the family it is about, and a
/// table a compaction made obsolete is reported deleted, by number.
#[test]
fn events_name_their_column_family() {
    use ebb::{CompactionJobInfo, EventListener, FlushJobInfo, TableFileDeletionInfo};
    use std::sync::Mutex;

    #[derive(Default)]
    struct Events(Mutex<Vec<String>>, Mutex<Vec<u64>>);
    impl EventListener for Events {
        fn on_flush_begin(&self, info: &FlushJobInfo) {
            self.0.lock().unwrap().push(format!("flush_begin {} {}", info.cf_id, info.cf_name));
        }
        fn on_flush_completed(&self, info: &FlushJobInfo) {
            self.0.lock().unwrap().push(format!("flush_completed {} {}", info.cf_id, info.cf_name));
        }
        fn on_compaction_begin(&self, info: &CompactionJobInfo) {
            self.0.lock().unwrap().push(format!("compaction_begin {} {}", info.cf_id, info.cf_name));
        }
        fn on_compaction_completed(&self, info: &CompactionJobInfo) {
            self.0.lock().unwrap().push(format!("compaction_completed {} {}", info.cf_id, info.cf_name));
            if !info.trivial_move {
                self.1.lock().unwrap().extend(&info.input_files);
            }
        }
        fn on_table_file_deleted(&self, info: &TableFileDeletionInfo) {
            assert!(info.deleted, "{info:?}");
            assert!(info.file_path.to_string_lossy().ends_with(&format!("{:06}.sst", info.file_number)));
            self.0.lock().unwrap().push(format!("deleted {}", info.file_number));
        }
    }
    let fs = MemFs::new();
    let events = Arc::new(Events::default());
    let mut o = big_buffers(&fs);
    o.listeners.push(events.clone());
    let db = Db::open(DB, o).unwrap();
    let logs = db.create_column_family("logs", ebb::ColumnFamilyOptions::default()).unwrap();
    for round in 0..2u32 {
        db.put(format!("d{round}").as_bytes(), b"v").unwrap();
        db.flush(true).unwrap();
        db.put_cf(&logs, format!("l{round}").as_bytes(), b"v").unwrap();
        db.flush_cf(&logs, true).unwrap();
    }
    let before = events.0.lock().unwrap().clone();
    for (id, name) in [(0, "default"), (1, "logs")] {
        for what in ["flush_begin", "flush_completed"] {
            let n = before.iter().filter(|e| **e == format!("{what} {id} {name}")).count();
            assert_eq!(n, 2, "{what} of {name}: {before:?}");
        }
    }
    db.compact_range_cf(&logs, None, None).unwrap();
    db.wait_for_compact().unwrap();
    let after = events.0.lock().unwrap().clone();
    assert!(after.contains(&"compaction_begin 1 logs".to_string()), "{after:?}");
    assert!(after.contains(&"compaction_completed 1 logs".to_string()), "{after:?}");
    assert!(!after.iter().any(|e| e.starts_with("compaction") && e.contains("default")), "{after:?}");
    let inputs = events.1.lock().unwrap().clone();
    assert!(!inputs.is_empty());
    for number in inputs {
        assert!(after.contains(&format!("deleted {number}")), "input {number} not reported deleted: {after:?}");
    }
}

/// Large batches go into the memtables in runs whose skiplist descents are
/// warmed together (`MemTable::warm`): batches of up to 70 entries spread
/// over three families in any order, with repeated keys, long keys (not
/// warmed), merges written as values by `max_successive_merges`, range
/// deletions and deletes, read back against a model in every family,
/// before and after a reopen that replays the WAL.
#[test]
fn large_batches_across_families_read_back_as_written() {
    let fs = MemFs::new();
    let mut o = big_buffers(&fs);
    o.merge_operator = Some(ebb::merge_operator::from_name("stringappend").unwrap());
    o.max_successive_merges = 3;
    let mut rng = StdRng::seed_from_u64(5);
    let mut models = vec![Model::new(), Model::new(), Model::new()];
    let key = |rng: &mut StdRng| {
        let k = rng.gen_range(0..300u32);
        // One key in ten is longer than a warmed key can be.
        if k % 10 == 0 {
            format!("{k:04}{}", "l".repeat(70)).into_bytes()
        } else {
            format!("{k:04}").into_bytes()
        }
    };
    let check = |db: &Db, a: &ColumnFamilyHandle, b: &ColumnFamilyHandle, models: &[Model], ctx: &str| {
        let d = db.cf_handle(ebb::DEFAULT_COLUMN_FAMILY).unwrap();
        let got = [scan_cf(db, &d), scan_cf(db, a), scan_cf(db, b)];
        for (i, (g, m)) in got.iter().zip(models).enumerate() {
            assert_eq!(g, m, "{ctx}: family {i}");
        }
    };
    {
        let db = Db::open(DB, o.clone()).unwrap();
        let (a, b) = (db.create_column_family("a", &o).unwrap(), db.create_column_family("b", &o).unwrap());
        let families = [db.cf_handle(ebb::DEFAULT_COLUMN_FAMILY).unwrap(), a.clone(), b.clone()];
        for round in 0..60 {
            let mut batch = WriteBatch::new();
            for _ in 0..rng.gen_range(2..70) {
                let f = rng.gen_range(0..3usize);
                let cf = &families[f];
                let k = key(&mut rng);
                let m = &mut models[f];
                match rng.gen_range(0..10) {
                    0..=4 => {
                        let v = format!("v{round}.{}", rng.gen::<u16>()).into_bytes();
                        batch.put_cf(cf, &k, &v);
                        m.insert(k, v);
                    }
                    5..=6 => {
                        let v = format!("m{}", rng.gen_range(0..10)).into_bytes();
                        batch.merge_cf(cf, &k, &v);
                        let merged = match m.get(&k) {
                            Some(old) => [old.as_slice(), b",", &v].concat(),
                            None => v,
                        };
                        m.insert(k, merged);
                    }
                    7..=8 => {
                        batch.delete_cf(cf, &k);
                        m.remove(&k);
                    }
                    _ => {
                        let end = [k.as_slice(), b"\xff"].concat();
                        batch.delete_range_cf(cf, &k, &end);
                        m.retain(|x, _| !(x.as_slice() >= k.as_slice() && x.as_slice() < end.as_slice()));
                    }
                }
            }
            db.write(&batch).unwrap();
        }
        check(&db, &a, &b, &models, "after the writes");
    }
    let db = open_ab(&o);
    let (a, b) = (db.cf_handle("a").unwrap(), db.cf_handle("b").unwrap());
    check(&db, &a, &b, &models, "after a reopen");
}

/// A handle of another database is refused by every call that takes one:
/// its family id means another family here (both databases' second family
/// has id 1). Writes once went into this database's family of that id, and
/// reads read the other database's memtables and tables.
#[test]
fn a_handle_of_another_database_is_refused_everywhere() {
    let fs = MemFs::new();
    let one = Db::open("/one", big_buffers(&fs)).unwrap();
    let two = Db::open("/two", big_buffers(&fs)).unwrap();
    let users = one.create_column_family("users", big_buffers(&fs)).unwrap();
    let logs = two.create_column_family("logs", big_buffers(&fs)).unwrap();
    assert_eq!(users.id(), logs.id());
    one.put_cf(&users, b"k", b"in one").unwrap();
    let refused = |r: ebb::Result<()>, what: &str| {
        let e = r.expect_err(what);
        assert!(e.to_string().contains("another database"), "{what}: {e}");
    };
    refused(two.put_cf(&users, b"k", b"wrong"), "put_cf");
    refused(two.delete_cf(&users, b"k"), "delete_cf");
    refused(two.single_delete_cf(&users, b"k"), "single_delete_cf");
    refused(two.delete_range_cf(&users, b"a", b"z"), "delete_range_cf");
    refused(two.get_cf(&users, b"k").map(|_| ()), "get_cf");
    refused(two.flush_cf(&users, true), "flush_cf");
    refused(two.compact_range_cf(&users, None, None), "compact_range_cf");
    refused(two.drop_column_family(&users), "drop_column_family");
    let mut it = two.iter_cf(&users, ReadOptions::default());
    it.seek_to_first();
    assert!(!it.valid());
    refused(it.status(), "iter_cf");
    for r in two.multi_get_cf(&[(&users, &b"k"[..])], &ReadOptions::default()) {
        refused(r.map(|_| ()), "multi_get_cf");
    }
    assert_eq!(two.get_property_cf(&users, "ebb.num-entries-active-mem-table"), None);
    // Nothing reached either database's family.
    assert_eq!(two.get_cf(&logs, b"k").unwrap(), None);
    assert_eq!(one.get_cf(&users, b"k").unwrap(), Some(b"in one".to_vec()));
}

/// `create_missing_column_families`: without it a listed family the
/// database lacks fails the open, naming the family and the option, and
/// changes nothing; with it the missing families are created with their
/// listed options (a new database's too), hold writes, and are there to be
/// listed at the next open.
#[test]
fn create_missing_column_families_creates_what_open_cf_lists() {
    let fs = MemFs::new();
    let o = options(&fs);
    Db::open("/db", o.clone()).unwrap().close().unwrap();
    let mut small = o.cf_options();
    small.write_buffer_size = 1 << 16;
    let listed = [("a", small.clone()), ("b", small.clone())];
    let e = match Db::open_cf("/db", o.clone(), &listed) {
        Ok(_) => panic!("a missing family opened without create_missing_column_families"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("'a'") && e.contains("create_missing_column_families"), "{e}");
    assert_eq!(Db::list_column_families("/db", &o).unwrap(), vec!["default".to_string()]);

    let mut create = o.clone();
    create.create_missing_column_families = true;
    let db = Db::open_cf("/db", create.clone(), &listed).unwrap();
    for name in ["a", "b"] {
        let cf = db.cf_handle(name).expect("created");
        assert_eq!(db.cf_options(&cf).write_buffer_size, 1 << 16, "{name} has its listed options");
        db.put_cf(&cf, b"k", name.as_bytes()).unwrap();
    }
    db.close().unwrap();
    // Now they exist: listed, they open without the option.
    let db = Db::open_cf("/db", o.clone(), &listed).unwrap();
    assert_eq!(db.get_cf(&db.cf_handle("b").unwrap(), b"k").unwrap(), Some(b"b".to_vec()));
    db.close().unwrap();

    // A new database: created with its families in one open.
    let mut fresh = create.clone();
    fresh.create_if_missing = true;
    let db = Db::open_cf("/fresh", fresh, &[("logs", small)]).unwrap();
    assert!(db.cf_handle("logs").is_some());
    db.close().unwrap();
    let mut names = Db::list_column_families("/fresh", &o).unwrap();
    names.sort();
    assert_eq!(names, vec!["default".to_string(), "logs".to_string()]);
}

/// A transaction database opened with `create_missing_column_families`
/// creates the family as its own `create_column_family` would: a
/// transaction writes there and commits, and the write reads back after a
/// reopen.
#[test]
fn a_transaction_database_creates_missing_families_too() {
    let fs = MemFs::new();
    let mut o = options(&fs);
    o.create_missing_column_families = true;
    let listed = [("orders", o.cf_options())];
    let db = ebb::TransactionDb::open_cf("/txn", o.clone(), ebb::TransactionDbOptions::default(), &listed).unwrap();
    let cf = db.db().cf_handle("orders").expect("created");
    let mut t = db.begin_transaction(&WriteOptions::default(), &ebb::TransactionOptions::default());
    t.put_cf(&cf, b"k", b"v").unwrap();
    t.commit().unwrap();
    drop(t);
    db.close().unwrap();
    let db = ebb::TransactionDb::open_cf("/txn", o, ebb::TransactionDbOptions::default(), &listed).unwrap();
    assert_eq!(db.db().get_cf(&db.db().cf_handle("orders").unwrap(), b"k").unwrap(), Some(b"v".to_vec()));
    db.close().unwrap();
}
