//! Blob files (docs/blob.md): values of at least `min_blob_size` live in
//! blob files, and every read resolves them; garbage collection never drops
//! a blob a live key or a snapshot needs; obsolete blob files are deleted
//! once no reader holds them, and never on the strength of a damaged open;
//! the MANIFEST's blob files must exist; repair keeps the blob files its
//! tables refer to.

mod common;

use std::path::Path;

use common::{files_of, fs_holding, log_records, manual_options, scan, scan_reverse, tiny_options, try_scan, Model};
use ebb::fs::{FaultOp, FaultRule, FileSystem, MemFs};
use ebb::{Db, Direction, IteratorMode, Options, ReadOptions, WalRecoveryMode, LOST_DIR};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const DB: &str = "/db";

type Files = Vec<(String, Vec<u8>)>;

fn with_blobs(mut o: Options, min_blob_size: u64) -> Options {
    o.enable_blob_files = true;
    o.min_blob_size = min_blob_size;
    o
}

/// Manual compactions, and memtables large enough that only `flush` writes tables.
fn manual(fs: &MemFs) -> Options {
    let mut o = manual_options(fs);
    o.write_buffer_size = 1 << 20;
    o
}

/// `.blob` files in the database directory, sorted.
fn blob_files(fs: &MemFs) -> Vec<String> {
    let mut v: Vec<String> = files_of(fs, DB).into_iter().map(|(n, _)| n).filter(|n| n.ends_with(".blob")).collect();
    v.sort();
    v
}

fn lost(fs: &MemFs) -> Vec<String> {
    let dir = Path::new(DB).join(LOST_DIR);
    if fs.exists(&dir) {
        fs.list_dir(&dir).unwrap()
    } else {
        Vec::new()
    }
}

fn property(db: &Db, name: &str) -> u64 {
    db.get_property(name).unwrap_or_else(|| panic!("no property {name}")).parse().unwrap()
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

/// A value naming its key and round, `len` bytes.
fn value(i: usize, round: usize, len: usize) -> Vec<u8> {
    let mut v = format!("v{i}.{round}.").into_bytes();
    v.resize(len.max(v.len()), b'a' + (i % 26) as u8);
    v.truncate(len.max(1));
    v
}

/// Every way of reading `model` back from `db` through `ro`: get,
/// multi_get, scans both ways (cursor and Rust iterator), seeks both ways.
fn check_every_read(db: &Db, model: &Model, ro: &ReadOptions<'_>, probes: &[Vec<u8>], ctx: &str) {
    for k in probes {
        assert_eq!(db.get_opt(k, ro).unwrap().as_ref(), model.get(k), "{ctx}: get {}", String::from_utf8_lossy(k));
    }
    let refs: Vec<&[u8]> = probes.iter().map(Vec::as_slice).collect();
    for (k, r) in probes.iter().zip(db.multi_get(&refs, ro)) {
        assert_eq!(r.unwrap().as_ref(), model.get(k), "{ctx}: multi_get {}", String::from_utf8_lossy(k));
    }
    assert_eq!(&scan(db, ro.clone()), model, "{ctx}: forward scan");
    assert_eq!(&scan_reverse(db, ro.clone()), model, "{ctx}: reverse scan");
    let backwards: Vec<(Vec<u8>, Vec<u8>)> =
        db.iterator(ro.clone(), IteratorMode::End).collect::<ebb::Result<_>>().unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().rev().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(backwards == want, "{ctx}: Rust iterator from the end");
    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;
    let owned = |(k, v): (&Vec<u8>, &Vec<u8>)| (k.clone(), v.clone());
    for k in probes.iter().step_by(7) {
        let shown = String::from_utf8_lossy(k);
        let from: Pairs = db
            .iterator(ro.clone(), IteratorMode::From(k, Direction::Forward))
            .take(3)
            .collect::<ebb::Result<_>>()
            .unwrap();
        let want: Pairs = model.range(k.clone()..).take(3).map(owned).collect();
        assert!(from == want, "{ctx}: seek {shown}");
        let from: Pairs = db
            .iterator(ro.clone(), IteratorMode::From(k, Direction::Reverse))
            .take(3)
            .collect::<ebb::Result<_>>()
            .unwrap();
        let want: Pairs = model.range(..=k.clone()).rev().take(3).map(owned).collect();
        assert!(from == want, "{ctx}: seek_for_prev {shown}");
    }
}

#[test]
fn values_at_or_over_min_blob_size_live_in_blob_files_and_read_back_every_way() {
    let fs = MemFs::new();
    let o = with_blobs(manual(&fs), 64);
    let db = Db::open(DB, o.clone()).unwrap();
    let mut model = Model::new();
    let mut big_bytes = 0;
    for i in 0..200 {
        // Both kinds: every third value is under min_blob_size.
        let len = if i % 3 == 0 { 10 + i % 50 } else { 64 + i * 3 };
        let v = value(i, 0, len);
        big_bytes += if len >= 64 { len } else { 0 };
        db.put(&key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    for i in (0..200).step_by(11) {
        db.delete(&key(i)).unwrap();
        model.remove(&key(i));
    }
    db.flush(true).unwrap();
    let snapshot = db.snapshot();
    let at_snapshot = model.clone();
    for i in (0..200).step_by(2) {
        let v = value(i, 1, if i % 4 == 0 { 20 } else { 300 });
        db.put(&key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    db.flush(true).unwrap();
    let probes: Vec<Vec<u8>> = (0..205).map(key).chain([b"a".to_vec(), b"zzz".to_vec()]).collect();
    check_every_read(&db, &model, &ReadOptions::default(), &probes, "after flushes");
    check_every_read(&db, &at_snapshot, &snapshot.read_options(), &probes, "snapshot after flushes");
    assert_eq!(property(&db, "rocksdb.num-blob-files"), blob_files(&fs).len() as u64);
    assert_eq!(blob_files(&fs).len(), 2, "one blob file per flush");
    // The big values are in the blob files, not in the tables.
    assert!(property(&db, "rocksdb.total-sst-files-size") < big_bytes as u64 / 2);
    assert!(property(&db, "rocksdb.live-blob-file-size") > big_bytes as u64);
    let stats = db.get_property("rocksdb.options-statistics").unwrap();
    assert!(!stats.contains("rocksdb.blobdb.blob.file.bytes.written COUNT : 0\n"), "{stats}");
    assert!(stats.contains("rocksdb.blobdb.blob.file.synced COUNT : 2\n"), "{stats}");
    assert!(db.metrics().blob_bytes_read > 0);

    db.compact_range(None, None).unwrap();
    check_every_read(&db, &model, &ReadOptions::default(), &probes, "after compaction");
    check_every_read(&db, &at_snapshot, &snapshot.read_options(), &probes, "snapshot after compaction");
    drop(snapshot);
    db.close().unwrap();
    let db = Db::open(DB, o).unwrap();
    check_every_read(&db, &model, &ReadOptions::default(), &probes, "after reopen");
    // Blob files off: what is in them is still read, and new values stay inline.
    db.set_options(&[("enable_blob_files", "false")]).unwrap();
    let before = blob_files(&fs).len();
    db.put(&key(500), &value(500, 0, 500)).unwrap();
    model.insert(key(500), value(500, 0, 500));
    db.flush(true).unwrap();
    assert_eq!(blob_files(&fs).len(), before, "a flush with blob files off wrote one");
    check_every_read(&db, &model, &ReadOptions::default(), &probes, "blob files turned off");
}

/// A model-style history with garbage collection on, small blob files and
/// snapshots held across flushes and compactions: every key's value through
/// every snapshot, and the latest, stays right.
#[test]
fn garbage_collection_never_drops_a_blob_a_live_key_or_a_snapshot_needs() {
    let mut relocated = 0;
    let mut forced = 0;
    for seed in 0..4u64 {
        let fs = MemFs::new();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut o = with_blobs(tiny_options(Some(fs.clone())), 40);
        o.blob_file_size = 2048;
        o.enable_blob_garbage_collection = true;
        o.blob_garbage_collection_age_cutoff = [0.25, 0.5, 1.0, 0.75][seed as usize];
        o.blob_garbage_collection_force_threshold = 0.2;
        o.blob_compression_type = if seed % 2 == 0 { ebb::CompressionType::None } else { ebb::CompressionType::Lz4 };
        let probes: Vec<Vec<u8>> = (0..300).map(key).collect();
        let mut model = Model::new();
        for epoch in 0..3 {
            let db = Db::open(DB, o.clone()).unwrap();
            assert_eq!(scan(&db, ReadOptions::default()), model, "seed {seed} epoch {epoch}: reopen");
            let mut snaps: Vec<(ebb::Snapshot<'_>, Model)> = Vec::new();
            for step in 0..1500 {
                let ctx = format!("seed {seed} epoch {epoch} step {step}");
                match rng.gen_range(0..100) {
                    0..=59 => {
                        let i = rng.gen_range(0..300);
                        let v = value(i, step, rng.gen_range(1..160));
                        db.put(&key(i), &v).unwrap();
                        model.insert(key(i), v);
                    }
                    60..=74 => {
                        let i = rng.gen_range(0..300);
                        db.delete(&key(i)).unwrap();
                        model.remove(&key(i));
                    }
                    75..=79 => {
                        if snaps.len() < 4 {
                            snaps.push((db.snapshot(), model.clone()));
                        } else {
                            snaps.remove(rng.gen_range(0..snaps.len()));
                        }
                    }
                    80..=84 => db.flush(rng.gen_bool(0.5)).unwrap(),
                    85..=87 => {
                        let (a, b) = (rng.gen_range(0..300), rng.gen_range(0..300));
                        db.compact_range(Some(&key(a.min(b))), Some(&key(a.max(b)))).unwrap();
                    }
                    88..=89 => {
                        for (s, m) in &snaps {
                            check_every_read(&db, m, &s.read_options(), &probes, &format!("{ctx}: snapshot"));
                        }
                    }
                    _ => {
                        let i = rng.gen_range(0..300);
                        assert_eq!(db.get(&key(i)).unwrap().as_ref(), model.get(&key(i)), "{ctx}: get");
                    }
                }
            }
            db.wait_for_compact().unwrap();
            for (s, m) in &snaps {
                check_every_read(&db, m, &s.read_options(), &probes, &format!("seed {seed} epoch {epoch}: snapshot"));
            }
            check_every_read(&db, &model, &ReadOptions::default(), &probes, &format!("seed {seed} epoch {epoch}"));
            drop(snaps);
            // Without snapshots everything hidden goes: the blob files the
            // directory holds are those the version lists, no more.
            db.compact_range(None, None).unwrap();
            db.wait_for_compact().unwrap();
            check_every_read(&db, &model, &ReadOptions::default(), &probes, &format!("seed {seed} epoch {epoch}"));
            assert_eq!(
                property(&db, "rocksdb.num-blob-files"),
                blob_files(&fs).len() as u64,
                "seed {seed} epoch {epoch}: {:?} {}",
                blob_files(&fs),
                db.get_property("ebb.levelstats").unwrap()
            );
            let m = db.metrics();
            relocated += m.blobs_relocated;
            forced += m.compactions_by_reason.iter().find(|(r, _)| *r == "ForcedBlobGC").map_or(0, |(_, n)| *n);
            db.close().unwrap();
        }
    }
    assert!(relocated > 0, "garbage collection relocated no blob");
    assert!(forced > 0, "no compaction was forced by blob garbage");
    eprintln!("blobs relocated: {relocated}, forced compactions: {forced}");
}

#[test]
fn blob_files_garbage_collection_empties_are_deleted_once_no_reader_holds_them() {
    let fs = MemFs::new();
    let mut o = with_blobs(manual(&fs), 0);
    o.enable_blob_garbage_collection = true;
    o.blob_garbage_collection_age_cutoff = 1.0;
    let db = Db::open(DB, o).unwrap();
    let mut model = Model::new();
    for round in 0..3 {
        // Round 0 and 1: distinct keys; round 2 overwrites round 0's.
        let first = if round == 2 { 0 } else { round * 50 };
        for i in first..first + 50 {
            let v = value(i, round, 200);
            db.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        db.flush(true).unwrap();
    }
    let old = blob_files(&fs);
    assert_eq!(old.len(), 3);
    // An iterator holds the current version, and with it the three files.
    let held = model.clone();
    let mut it = db.iter(ReadOptions::default());
    db.compact_range(None, None).unwrap();
    let now = blob_files(&fs);
    let listed = property(&db, "rocksdb.num-blob-files");
    assert!(old.iter().all(|f| now.contains(f)), "a blob file a reader holds was deleted: {old:?} -> {now:?}");
    // Every blob was relocated (age cutoff 1): the version lists new files only.
    assert!(listed >= 1 && now.len() as u64 == old.len() as u64 + listed, "{old:?} -> {now:?}, {listed} listed");
    assert!(property(&db, "rocksdb.total-blob-file-size") > property(&db, "rocksdb.live-blob-file-size"));
    // The iterator reads the relocated-from files.
    it.seek_to_first();
    let mut seen = Model::new();
    while it.valid() {
        seen.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().unwrap();
    assert_eq!(seen, held);
    drop(it);
    // The next job's clean-up deletes them.
    db.put(b"x", b"y").unwrap();
    model.insert(b"x".to_vec(), b"y".to_vec());
    db.flush(true).unwrap();
    let after = blob_files(&fs);
    assert!(old.iter().all(|f| !after.contains(f)), "obsolete blob files stayed: {after:?}");
    assert_eq!(after.len() as u64, property(&db, "rocksdb.num-blob-files"));
    assert_eq!(property(&db, "rocksdb.total-blob-file-size"), property(&db, "rocksdb.live-blob-file-size"));
    let m = db.metrics();
    assert_eq!(m.blobs_relocated, 100, "round 1's and round 2's blobs relocated, round 0's dropped");
    assert_eq!(m.blob_garbage_bytes, 0);
    assert_eq!(scan(&db, ReadOptions::default()), model);
}

/// A database whose directory holds blob files the MANIFEST no longer lists
/// (made obsolete by garbage collection while an iterator held them), as a
/// crash before their deletion leaves it; and the WAL holding the last writes.
fn with_obsolete_blob_files() -> (Files, Vec<String>, Model) {
    let fs = MemFs::new();
    let mut o = with_blobs(manual(&fs), 0);
    o.enable_blob_garbage_collection = true;
    o.blob_garbage_collection_age_cutoff = 1.0;
    let db = Db::open(DB, o).unwrap();
    let mut model = Model::new();
    for round in 0..2 {
        for i in 0..30 {
            let v = value(i, round, 100);
            db.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        db.flush(true).unwrap();
    }
    let old = blob_files(&fs);
    let it = db.iter(ReadOptions::default());
    db.compact_range(None, None).unwrap();
    for i in 0..5 {
        db.put_opt(&key(100 + i), b"in the WAL", &common::SYNCED).unwrap();
        model.insert(key(100 + i), b"in the WAL".to_vec());
    }
    let files = files_of(&fs, DB);
    drop(it);
    drop(db);
    let obsolete: Vec<String> = old.into_iter().filter(|f| files.iter().any(|(n, _)| n == f)).collect();
    assert_eq!(obsolete.len(), 2, "{files:?}");
    (files, obsolete, model)
}

#[test]
fn a_clean_open_deletes_obsolete_blob_files_and_a_damaged_open_sets_them_aside() {
    // Clean: they are deleted.
    let (files, obsolete, model) = with_obsolete_blob_files();
    let fs = fs_holding(DB, &files);
    let db = Db::open(DB, manual_options(&fs)).unwrap();
    assert_eq!(scan(&db, ReadOptions::default()), model);
    assert!(obsolete.iter().all(|f| !blob_files(&fs).contains(f)), "{:?}", blob_files(&fs));
    assert!(lost(&fs).is_empty());
    assert_eq!(property(&db, "rocksdb.num-blob-files"), blob_files(&fs).len() as u64);
    db.close().unwrap();

    // Damaged: the last WAL record fails its checksum; point-in-time
    // recovery accepts that, and then deletes nothing: the obsolete blob
    // files go to lost/, the listed ones stay.
    let fs = fs_holding(DB, &files);
    let (wal, bytes) = files.iter().find(|(n, _)| n.ends_with(".log")).unwrap();
    let (last, _) = *log_records(bytes).last().unwrap();
    let mut damaged = bytes.clone();
    damaged[last + 9] ^= 0x10;
    fs.set_file_bytes(&Path::new(DB).join(wal), &damaged).unwrap();
    let mut o = manual_options(&fs);
    o.wal_recovery_mode = WalRecoveryMode::PointInTime;
    let listed_before: Vec<String> = blob_files(&fs).into_iter().filter(|f| !obsolete.contains(f)).collect();
    let db = Db::open(DB, o).unwrap();
    let report = db.recovery_report();
    assert!(report.tolerated_damage(), "{report}");
    for f in &obsolete {
        assert!(lost(&fs).contains(f), "{f} was not set aside: {report}");
        assert!(report.set_aside.iter().any(|s| s.to.ends_with(f)), "{report}");
    }
    assert_eq!(blob_files(&fs), listed_before, "a listed blob file was touched");
    let mut want = model;
    want.remove(&key(104));
    assert_eq!(scan(&db, ReadOptions::default()), want);
    db.close().unwrap();

    // A blob file numbered above everything the MANIFEST handed out (an
    // unfinished job's output) is set aside even by a clean open.
    let fs = fs_holding(DB, &files);
    let (_, blob) = files.iter().find(|(n, _)| n.ends_with(".blob")).unwrap();
    fs.set_file_bytes(&Path::new(DB).join("000999.blob"), blob).unwrap();
    let db = Db::open(DB, manual_options(&fs)).unwrap();
    assert!(lost(&fs).contains(&"000999.blob".to_string()), "{}", db.recovery_report());
    assert!(!blob_files(&fs).contains(&"000999.blob".to_string()));
}

#[test]
fn a_missing_blob_file_fails_the_open_and_reads_name_it() {
    let fs = MemFs::new();
    let db = Db::open(DB, with_blobs(manual(&fs), 0)).unwrap();
    for i in 0..20 {
        db.put(&key(i), &value(i, 0, 100)).unwrap();
    }
    db.flush(true).unwrap();
    let blob = blob_files(&fs).pop().unwrap();
    // While open: a read whose blob file is gone is corruption naming it.
    fs.remove_file(&Path::new(DB).join(&blob)).unwrap();
    let e = db.get(&key(3)).unwrap_err();
    assert!(e.is_corruption() && e.to_string().contains(&blob), "{e}");
    let e = try_scan(&db, ReadOptions::default()).unwrap_err();
    assert!(e.is_corruption() && e.to_string().contains(&blob), "{e}");
    drop(db);
    let e = Db::open(DB, with_blobs(manual(&fs), 0)).err().expect("the open must fail");
    assert!(e.is_corruption() && e.to_string().contains(&blob), "{e}");
}

#[test]
fn repair_keeps_the_blob_files_its_tables_refer_to_and_sets_the_others_aside() {
    let fs = MemFs::new();
    let o = with_blobs(manual(&fs), 50);
    let db = Db::open(DB, o.clone()).unwrap();
    let mut model = Model::new();
    for round in 0..3 {
        for i in 0..40 {
            let v = value(i, round, if i % 2 == 0 { 100 } else { 10 });
            db.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        db.flush(true).unwrap();
    }
    db.close().unwrap();
    let blobs = blob_files(&fs);
    assert_eq!(blobs.len(), 3);
    // A blob file no table refers to.
    let (_, bytes) = files_of(&fs, DB).into_iter().find(|(n, _)| n.ends_with(".blob")).unwrap();
    fs.set_file_bytes(&Path::new(DB).join("000090.blob"), &bytes).unwrap();
    for (name, _) in files_of(&fs, DB) {
        if name.starts_with("MANIFEST-") || name == "CURRENT" {
            fs.remove_file(&Path::new(DB).join(name)).unwrap();
        }
    }
    let report = Db::repair(DB, &o).unwrap();
    assert_eq!(report.blob_files.len(), 3, "{report}");
    assert!(report.blob_files.iter().all(|b| b.blobs == Some(20) && b.references == 20), "{report}");
    assert!(lost(&fs).contains(&"000090.blob".to_string()), "{report}");
    let db = Db::open(DB, o).unwrap();
    assert_eq!(scan(&db, ReadOptions::default()), model);
    assert_eq!(blob_files(&fs), blobs);
    // The repaired accounting lets compaction drop what is garbage.
    db.compact_range(None, None).unwrap();
    assert_eq!(scan(&db, ReadOptions::default()), model);
    db.put(b"x", b"y").unwrap();
    db.flush(true).unwrap();
    assert_eq!(property(&db, "rocksdb.num-blob-files"), 1, "the two overwritten rounds' files are garbage");
    assert_eq!(blob_files(&fs).len(), 1);
}

/// A flush and a compaction that fail while writing a blob file leave no
/// blob file behind, and the failure is sticky; a reopen recovers the writes.
#[test]
fn jobs_that_fail_writing_blob_files_leave_none_behind() {
    for (what, op) in [("append", FaultOp::Append), ("sync", FaultOp::Sync)] {
        let fs = MemFs::new();
        let o = with_blobs(manual(&fs), 0);
        let db = Db::open(DB, o.clone()).unwrap();
        let mut model = Model::new();
        for i in 0..20 {
            db.put(&key(i), &value(i, 0, 100)).unwrap();
            model.insert(key(i), value(i, 0, 100));
        }
        fs.inject(FaultRule::new(op).path_contains(".blob"));
        let e = db.flush(true).unwrap_err();
        assert!(!e.is_corruption(), "{what}: {e}");
        assert!(blob_files(&fs).is_empty(), "{what}: a failed flush left {:?}", blob_files(&fs));
        assert!(db.put(b"k", b"v").is_err(), "{what}: the failure is not sticky");
        drop(db);
        let db = Db::open(DB, o.clone()).unwrap();
        assert_eq!(scan(&db, ReadOptions::default()), model, "{what}");
        db.flush(true).unwrap();
        let before = blob_files(&fs);
        // Now a compaction relocating blobs fails the same way.
        db.set_options(&[("enable_blob_garbage_collection", "true"), ("blob_garbage_collection_age_cutoff", "1")])
            .unwrap();
        fs.inject(FaultRule::new(op).path_contains(".blob"));
        assert!(db.compact_range(None, None).is_err(), "{what}");
        assert_eq!(blob_files(&fs), before, "{what}: a failed compaction left a blob file");
        drop(db);
        let db = Db::open(DB, o).unwrap();
        assert_eq!(scan(&db, ReadOptions::default()), model, "{what}");
    }
}

/// A merge over a value kept in a blob file reads the blob as the base, in
/// the memtable, after a flush and after a compaction (the merged result
/// is written back).
#[test]
fn merges_over_values_in_blob_files_read_the_blob_as_their_base() {
    let fs = MemFs::new();
    let mut o = with_blobs(manual(&fs), 40);
    o.merge_operator = Some(ebb::merge_operator::from_name("stringappend").unwrap());
    let db = Db::open(DB, o).unwrap();
    let base = vec![b'b'; 100];
    db.put(b"k", &base).unwrap();
    db.flush(true).unwrap();
    assert_eq!(blob_files(&fs).len(), 1, "the base value went to a blob file");
    db.merge(b"k", b"one").unwrap();
    let mut expected = base.clone();
    expected.extend_from_slice(b",one");
    assert_eq!(db.get(b"k").unwrap(), Some(expected.clone()), "memtable operand over a blob");
    db.flush(true).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(expected.clone()), "table operand over a blob");
    db.merge(b"k", b"two").unwrap();
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    expected.extend_from_slice(b",two");
    assert_eq!(db.get(b"k").unwrap(), Some(expected.clone()), "after the compaction merged them");
    let all = scan(&db, ReadOptions::default());
    assert_eq!(all.into_iter().collect::<Vec<_>>(), vec![(b"k".to_vec(), expected)]);
    db.close().unwrap();
}
