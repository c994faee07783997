//! External SST files (`SstFileWriter`) and their ingestion
//! (`Db::ingest_external_file`, RocksDB's `IngestExternalFile`): placement,
//! global sequence numbers, snapshots, refusals that change nothing, a model
//! test interleaving writes and ingestions, and crash points across a
//! multi-family ingestion.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::{family_contents, tiny_options, Model};
use ebb::fs::{CrashMode, FaultRule, FileSystem, MemFs};
use ebb::{Db, Error, IngestExternalFileOptions, Options, ReadOptions, SstFileWriter};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DB: &str = "/db";

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// One operation of an external file.
#[derive(Clone, Debug)]
enum FileOp {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    DeleteRange(Vec<u8>, Vec<u8>),
}

/// Writes `ops` (point keys in increasing order) to `path`.
fn write_file(o: &Options, path: &str, ops: &[FileOp]) -> ebb::Result<PathBuf> {
    let mut w = SstFileWriter::create(o);
    w.open(path)?;
    for op in ops {
        match op {
            FileOp::Put(k, v) => w.put(k, v)?,
            FileOp::Delete(k) => w.delete(k)?,
            FileOp::DeleteRange(b, e) => w.delete_range(b, e)?,
        }
    }
    w.finish().map(|info| info.file_path)
}

/// What ingesting `ops` does to a model: ranges delete older data, then the
/// point operations apply.
fn apply(model: &mut Model, ops: &[FileOp]) {
    for op in ops {
        if let FileOp::DeleteRange(b, e) = op {
            model.retain(|k, _| k < b || k >= e);
        }
    }
    for op in ops {
        match op {
            FileOp::Put(k, v) => {
                model.insert(k.clone(), v.clone());
            }
            FileOp::Delete(k) => {
                model.remove(k);
            }
            FileOp::DeleteRange(..) => {}
        }
    }
}

fn files_at_levels(db: &Db) -> Vec<usize> {
    (0..4).map(|l| db.get_property(&format!("ebb.num-files-at-level{l}")).unwrap().parse().unwrap()).collect()
}

#[test]
fn the_sst_file_writer_refuses_unsorted_keys_and_empty_files() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    fs.create_dir_all(Path::new("/in")).unwrap();
    let mut w = SstFileWriter::create(&o);
    let e = w.put(b"a", b"1").unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("open")), "{e}");
    w.open("/in/1.sst").unwrap();
    w.put(b"b", b"1").unwrap();
    for bad in [&b"b"[..], b"a"] {
        let e = w.put(bad, b"2").unwrap_err();
        assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("strictly increasing")), "{e}");
    }
    let e = w.delete_range(b"z", b"c").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    w.put(b"c", b"3").unwrap();
    let info = w.finish().unwrap();
    assert_eq!(
        (info.smallest_key.as_slice(), info.largest_key.as_slice(), info.num_entries),
        (&b"b"[..], &b"c"[..], 2)
    );
    w.open("/in/2.sst").unwrap();
    let e = w.finish().unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("at least one")), "{e}");
    assert!(!fs.exists(Path::new("/in/2.sst")));
}

#[test]
fn files_that_overlap_nothing_go_to_the_last_level_as_they_are() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    fs.create_dir_all(Path::new("/in")).unwrap();
    let db = Db::open(DB, o.clone()).unwrap();
    let mut paths = Vec::new();
    for f in 0..3 {
        let ops: Vec<FileOp> =
            (f * 100..f * 100 + 100).map(|i| FileOp::Put(key(i), format!("v{i}").into_bytes())).collect();
        paths.push(write_file(&o, &format!("/in/{f}.sst"), &ops).unwrap());
    }
    let before = db.snapshot().sequence();
    db.ingest_external_file(&paths, &IngestExternalFileOptions { move_files: true, ..Default::default() }).unwrap();
    assert_eq!(files_at_levels(&db), vec![0, 0, 0, 3]);
    assert_eq!(db.snapshot().sequence(), before, "no sequence number was taken");
    assert_eq!(db.get(&key(250)).unwrap(), Some(b"v250".to_vec()));
    assert_eq!(common::scan(&db, ReadOptions::default()).len(), 300);
    // The sources stay.
    assert!(paths.iter().all(|p| fs.exists(p)));
    drop(db);
    let db = Db::open(DB, o).unwrap();
    assert_eq!(db.get(&key(0)).unwrap(), Some(b"v0".to_vec()));
    assert_eq!(common::scan(&db, ReadOptions::default()).len(), 300);
}

#[test]
fn files_over_existing_data_take_a_sequence_number_and_win_but_not_at_older_snapshots() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    fs.create_dir_all(Path::new("/in")).unwrap();
    let db = Db::open(DB, o.clone()).unwrap();
    for i in 0..300 {
        db.put(&key(i), b"old").unwrap();
    }
    db.compact_range(None, None).unwrap();
    db.put(&key(5), b"in the memtable").unwrap();
    let snapshot = db.snapshot();
    let ops = vec![
        FileOp::Put(key(5), b"ingested".to_vec()),
        FileOp::Delete(key(7)),
        FileOp::DeleteRange(key(20), key(30)),
        FileOp::Put(key(25), b"kept: same file".to_vec()),
        FileOp::Put(key(400), b"new key".to_vec()),
    ];
    let mut sorted = ops.clone();
    sorted.sort_by(|a, b| {
        let k = |op: &FileOp| match op {
            FileOp::Put(k, _) | FileOp::Delete(k) => k.clone(),
            FileOp::DeleteRange(b, _) => b.clone(),
        };
        k(a).cmp(&k(b))
    });
    let path = write_file(&o, "/in/over.sst", &sorted).unwrap();
    let mut model: Model = common::scan(&db, ReadOptions::default());
    apply(&mut model, &ops);
    db.ingest_external_file(&[path], &IngestExternalFileOptions::default()).unwrap();
    assert!(db.snapshot().sequence() > snapshot.sequence(), "a global sequence number was assigned");
    assert_eq!(common::scan(&db, ReadOptions::default()), model);
    assert_eq!(db.get(&key(5)).unwrap(), Some(b"ingested".to_vec()));
    assert_eq!(db.get(&key(25)).unwrap(), Some(b"kept: same file".to_vec()));
    assert_eq!(db.get(&key(22)).unwrap(), None);
    // The snapshot taken before does not see the file.
    assert_eq!(snapshot.get(&key(5)).unwrap(), Some(b"in the memtable".to_vec()));
    assert_eq!(snapshot.get(&key(22)).unwrap(), Some(b"old".to_vec()));
    assert_eq!(snapshot.get(&key(400)).unwrap(), None);
    drop(snapshot);
    // Writes after it are newer; compaction and a reopen keep all of it.
    db.put(&key(5), b"after").unwrap();
    model.insert(key(5), b"after".to_vec());
    db.compact_range(None, None).unwrap();
    assert_eq!(common::scan(&db, ReadOptions::default()), model);
    drop(db);
    let db = Db::open(DB, o).unwrap();
    assert_eq!(common::scan(&db, ReadOptions::default()), model);
}

#[test]
fn refused_ingestions_change_nothing() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    fs.create_dir_all(Path::new("/in")).unwrap();
    let db = Db::open(DB, o.clone()).unwrap();
    for i in 0..100 {
        db.put(&key(i), b"db").unwrap();
    }
    let over = write_file(&o, "/in/over.sst", &[FileOp::Put(key(50), b"x".to_vec())]).unwrap();
    let state = common::scan(&db, ReadOptions::default());
    let check = |what: &str, r: ebb::Result<()>, want: &str| {
        let e = r.expect_err(what);
        assert!(e.to_string().contains(want), "{what}: {e}");
    };
    let no_flush = IngestExternalFileOptions { allow_blocking_flush: false, ..Default::default() };
    check("blocking flush off", db.ingest_external_file(&[&over], &no_flush), "allow_blocking_flush");
    db.flush(true).unwrap();
    let no_seqno = IngestExternalFileOptions { allow_global_seqno: false, ..Default::default() };
    check("global seqno off", db.ingest_external_file(&[&over], &no_seqno), "allow_global_seqno");
    let a = write_file(&o, "/in/a.sst", &[FileOp::Put(key(200), b"a".to_vec()), FileOp::Put(key(300), b"a".to_vec())])
        .unwrap();
    let b = write_file(&o, "/in/b.sst", &[FileOp::Put(key(250), b"b".to_vec())]).unwrap();
    check("files that overlap", db.ingest_external_file(&[&a, &b], &Default::default()), "overlap");
    // A damaged file.
    let mut bytes = fs.file_bytes(&a).unwrap();
    bytes[5] ^= 0x40;
    fs.set_file_bytes(Path::new("/in/bad.sst"), &bytes).unwrap();
    let e = db.ingest_external_file(&["/in/bad.sst"], &Default::default()).unwrap_err();
    assert!(e.is_corruption(), "{e}");
    // A table of a database: its keys are not at sequence 0.
    let table = fs.list_dir(Path::new(DB)).unwrap().into_iter().find(|n| n.ends_with(".sst")).unwrap();
    check(
        "a database's table",
        db.ingest_external_file(&[Path::new(DB).join(table)], &Default::default()),
        "not an external SST file",
    );
    let e = db.ingest_external_file(&["/in/missing.sst"], &Default::default()).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e}");
    assert_eq!(common::scan(&db, ReadOptions::default()), state);
    let tables_before: Vec<String> = fs.list_dir(Path::new(DB)).unwrap();
    drop(db);
    // A read-only instance refuses it too.
    let ro = Db::open_read_only(DB, o.clone()).unwrap();
    let e = ro.ingest_external_file(&[&b], &Default::default()).unwrap_err();
    assert!(matches!(e, Error::NotSupported(_)), "{e}");
    drop(ro);
    let db = Db::open(DB, o).unwrap();
    assert_eq!(common::scan(&db, ReadOptions::default()), state);
    let _ = tables_before;
}

#[test]
fn ingest_behind_puts_files_below_everything() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    fs.create_dir_all(Path::new("/in")).unwrap();
    let db = Db::open(DB, o.clone()).unwrap();
    db.put(&key(1), b"newer").unwrap();
    db.flush(true).unwrap();
    let path =
        write_file(&o, "/in/old.sst", &[FileOp::Put(key(1), b"older".to_vec()), FileOp::Put(key(2), b"only".to_vec())])
            .unwrap();
    let behind = IngestExternalFileOptions { ingest_behind: true, ..Default::default() };
    db.ingest_external_file(&[path], &behind).unwrap();
    assert_eq!(db.get(&key(1)).unwrap(), Some(b"newer".to_vec()));
    assert_eq!(db.get(&key(2)).unwrap(), Some(b"only".to_vec()));
    assert_eq!(files_at_levels(&db)[3], 1);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(&key(1)).unwrap(), Some(b"newer".to_vec()));
}

/// Random point keys for a file: sorted, distinct, with puts, deletes and
/// sometimes a range deletion.
fn random_file(rng: &mut StdRng, round: usize) -> Vec<FileOp> {
    let lo = rng.gen_range(0..900);
    let n = rng.gen_range(1..40);
    let mut keys: Vec<usize> = (0..n).map(|_| lo + rng.gen_range(0..100)).collect();
    keys.sort_unstable();
    keys.dedup();
    let mut ops: Vec<FileOp> = keys
        .into_iter()
        .map(|k| {
            if rng.gen_bool(0.2) {
                FileOp::Delete(key(k))
            } else {
                FileOp::Put(key(k), format!("file {round} {k}").into_bytes())
            }
        })
        .collect();
    if rng.gen_bool(0.3) {
        let b = rng.gen_range(0..1000);
        ops.push(FileOp::DeleteRange(key(b), key(b + rng.gen_range(1..30))));
    }
    ops
}

#[test]
fn a_model_of_writes_and_ingestions_matches_through_flushes_compactions_and_reopens() {
    for seed in 0..6u64 {
        let fs = MemFs::new();
        let mut o = tiny_options(Some(fs.clone()));
        if seed % 3 == 1 {
            o.compaction_style = ebb::CompactionStyle::Universal;
        }
        fs.create_dir_all(Path::new("/in")).unwrap();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut db = Db::open(DB, o.clone()).unwrap();
        let mut model = Model::new();
        for round in 0..120 {
            match rng.gen_range(0..10) {
                0..=5 => {
                    for _ in 0..rng.gen_range(1..30) {
                        let k = key(rng.gen_range(0..1000));
                        if rng.gen_bool(0.2) {
                            db.delete(&k).unwrap();
                            model.remove(&k);
                        } else {
                            let v = format!("write {round}").into_bytes();
                            db.put(&k, &v).unwrap();
                            model.insert(k, v);
                        }
                    }
                }
                6..=8 => {
                    let ops = random_file(&mut rng, round);
                    let path = write_file(&o, &format!("/in/{round}.sst"), &ops).unwrap();
                    let opts = IngestExternalFileOptions { move_files: rng.gen_bool(0.5), ..Default::default() };
                    db.ingest_external_file(&[path], &opts).unwrap();
                    apply(&mut model, &ops);
                }
                _ => match rng.gen_range(0..3) {
                    0 => db.flush(true).unwrap(),
                    1 => db.compact_range(None, None).unwrap(),
                    _ => {
                        drop(db);
                        db = Db::open(DB, o.clone()).unwrap();
                    }
                },
            }
            assert_eq!(common::scan(&db, ReadOptions::default()), model, "seed {seed} round {round}");
        }
        for k in (0..1000).step_by(7) {
            assert_eq!(db.get(&key(k)).unwrap(), model.get(&key(k)).cloned(), "seed {seed} key {k}");
        }
        drop(db);
        let db = Db::open(DB, o.clone()).unwrap();
        assert_eq!(common::scan(&db, ReadOptions::default()), model, "seed {seed} after reopen");
    }
}

/// A database with families `default` and `other` holding 100 synced keys,
/// and two external files for them: `a.sst` (keys 10 and 500, over the
/// database's key 10) and `b.sst` (key 20).
fn two_families_and_their_files(fs: &MemFs) -> (Db, Options, PathBuf, PathBuf) {
    let o = tiny_options(Some(fs.clone()));
    fs.create_dir_all(Path::new("/in")).unwrap();
    let db = Db::open(DB, o.clone()).unwrap();
    db.create_column_family("other", &o).unwrap();
    for i in 0..100 {
        db.put_opt(&key(i), b"db", &common::SYNCED).unwrap();
    }
    let a = write_file(&o, "/in/a.sst", &[FileOp::Put(key(10), b"a".to_vec()), FileOp::Put(key(500), b"a".to_vec())])
        .unwrap();
    let b = write_file(&o, "/in/b.sst", &[FileOp::Put(key(20), b"b".to_vec())]).unwrap();
    (db, o, a, b)
}

#[test]
fn a_multi_family_ingestion_is_all_or_nothing_across_a_crash() {
    let open = |o: &Options| Db::open_cf(DB, o.clone(), &[("other", o.clone())]).unwrap();
    for cut in 1.. {
        assert!(cut < 500, "the ingestion never finished");
        let fs = MemFs::new();
        let (db, o, a, b) = two_families_and_their_files(&fs);
        let before = family_contents(&db);
        let other = db.cf_handle("other").unwrap();
        let default = db.cf_handle("default").unwrap();
        fs.inject(FaultRule::any_op().nth(cut).persistent());
        let faults = fs.faults_injected();
        let done = db.ingest_external_files(&[(&default, &[a][..]), (&other, &[b][..])], &Default::default()).is_ok();
        let untouched = fs.faults_injected() == faults;
        let after = fs.crash_clone(CrashMode::DropUnsynced);
        drop((other, default, db));
        let mut o = o.clone();
        o.fs = Arc::new(after);
        let db = open(&o);
        let got = family_contents(&db);
        let has_a = got["default"].contains_key(&key(500));
        let has_b = got["other"].contains_key(&key(20));
        assert_eq!(has_a, has_b, "cut {cut}: one family took its file, the other did not");
        if !has_a {
            assert_eq!(got, before, "cut {cut}");
        } else {
            assert_eq!(got["default"].get(&key(10)), Some(&b"a".to_vec()), "cut {cut}");
        }
        if done && untouched {
            assert!(has_a, "cut {cut}: acknowledged, then lost");
            break;
        }
    }
}

/// One failed filesystem operation anywhere in an ingestion (a fault that
/// passes: the next operation works) never leaves the MANIFEST naming a
/// table that is gone. A failed MANIFEST sync may leave the edit in the
/// file, read back by a reopen without power loss: the ingested tables must
/// then still be there. Checked for one family and for two (a new MANIFEST),
/// on the disk as the process left it and after a power loss.
#[test]
fn a_failed_ingestion_never_leaves_the_manifest_naming_a_missing_table() {
    for families in [1, 2] {
        let open = |o: &Options| {
            Db::open_cf(DB, o.clone(), &[("other", o.clone())]).unwrap_or_else(|e| panic!("{families} families: {e}"))
        };
        for cut in 1.. {
            assert!(cut < 500, "the ingestion never finished");
            let fs = MemFs::new();
            let (db, o, a, b) = two_families_and_their_files(&fs);
            let before = family_contents(&db);
            let other = db.cf_handle("other").unwrap();
            let default = db.cf_handle("default").unwrap();
            fs.inject(FaultRule::any_op().nth(cut));
            let faults = fs.faults_injected();
            let done = if families == 1 {
                db.ingest_external_files(&[(&default, &[a][..])], &Default::default()).is_ok()
            } else {
                db.ingest_external_files(&[(&default, &[a][..]), (&other, &[b][..])], &Default::default()).is_ok()
            };
            let untouched = fs.faults_injected() == faults;
            fs.clear_faults();
            let crashed = fs.crash_clone(CrashMode::DropUnsynced);
            drop((other, default, db));
            for (what, disk) in [("as left", fs.clone()), ("after a power loss", crashed)] {
                let mut o = o.clone();
                o.fs = Arc::new(disk);
                let db = open(&o);
                let got = family_contents(&db);
                let ctx = format!("{families} families, fault at operation {cut}, reopened {what}");
                let has_a = got["default"].contains_key(&key(500));
                if families == 2 {
                    let has_b = got["other"].contains_key(&key(20));
                    assert_eq!(has_a, has_b, "{ctx}: one family took its file, the other did not");
                }
                if has_a {
                    assert_eq!(got["default"].get(&key(10)), Some(&b"a".to_vec()), "{ctx}");
                } else {
                    assert_eq!(got, before, "{ctx}");
                }
                if done {
                    assert!(has_a, "{ctx}: acknowledged, then lost");
                }
            }
            if done && untouched {
                break;
            }
        }
    }
}

#[test]
fn ingestions_beside_concurrent_writers_lose_nothing() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    fs.create_dir_all(Path::new("/in")).unwrap();
    let db = Arc::new(Db::open(DB, o.clone()).unwrap());
    let writer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            for i in 0..3000 {
                db.put(format!("w{i:05}").as_bytes(), b"written").unwrap();
            }
        })
    };
    let mut model = Model::new();
    for f in 0..20 {
        // Half the files overlap the writer's keys, half do not.
        let prefix = if f % 2 == 0 { "w" } else { "x" };
        let ops: Vec<FileOp> = (0..50)
            .map(|i| FileOp::Put(format!("{prefix}{:05}", f * 150 + i).into_bytes(), format!("file {f}").into_bytes()))
            .collect();
        let path = write_file(&o, &format!("/in/{f}.sst"), &ops).unwrap();
        db.ingest_external_file(&[path], &Default::default()).unwrap();
        apply(&mut model, &ops);
    }
    writer.join().unwrap();
    let got = common::scan(&db, ReadOptions::default());
    for i in 0..3000 {
        assert!(got.contains_key(format!("w{i:05}").as_bytes()), "write {i} lost");
    }
    for (k, v) in &model {
        if k.starts_with(b"x") {
            assert_eq!(got.get(k), Some(v));
        }
    }
}

#[test]
fn without_verification_a_damaged_block_is_found_by_the_first_read_not_returned() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    fs.create_dir_all(Path::new("/in")).unwrap();
    let db = Db::open(DB, o.clone()).unwrap();
    let ops: Vec<FileOp> = (0..50).map(|i| FileOp::Put(key(i), vec![b'v'; 40])).collect();
    let good = write_file(&o, "/in/good.sst", &ops).unwrap();
    let mut bytes = fs.file_bytes(&good).unwrap();
    bytes[5] ^= 0x40;
    fs.set_file_bytes(Path::new("/in/bad.sst"), &bytes).unwrap();
    let trusting = IngestExternalFileOptions { verify_checksums_before_ingest: false, ..Default::default() };
    // A database's own table is refused either way (its properties say so).
    db.put(b"zzz", b"1").unwrap();
    db.flush(true).unwrap();
    let table = fs.list_dir(Path::new(DB)).unwrap().into_iter().find(|n| n.ends_with(".sst")).unwrap();
    let e = db.ingest_external_file(&[Path::new(DB).join(table)], &trusting).unwrap_err();
    assert!(e.to_string().contains("not an external SST file"), "{e}");
    // The damaged file goes in; reading it fails loudly, never with a value.
    db.ingest_external_file(&["/in/bad.sst"], &trusting).unwrap();
    let e = db.get(&key(0)).unwrap_err();
    assert!(e.is_corruption(), "{e}");
    assert_eq!(db.get(b"zzz").unwrap(), Some(b"1".to_vec()));
}
