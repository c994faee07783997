//! Checkpoints (RocksDB's `Checkpoint`): an openable copy of a live
//! database. A copy holds the database at one point of its write order, in
//! every column family, also when taken under concurrent writes, flushes
//! and compactions; a failed or crashed checkpoint leaves no target and the
//! database as it was.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{family_contents, matching_prefix, tiny_options, Model, Op};
use ebb::fs::{CrashMode, FaultOp, FaultRule, FileSystem, MemFs};
use ebb::{merge_operator, Checkpoint, CheckpointOptions, Db, Error, Options, WriteOptions};

const DB: &str = "/db";
const CKPT: &str = "/backups/ckpt";

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Opens the database at `dir` with the families `names` (beside the default).
fn open_with(dir: &str, o: &Options, names: &[&str]) -> ebb::Result<Db> {
    let families: Vec<(&str, Options)> = names.iter().map(|n| (*n, o.clone())).collect();
    Db::open_cf(dir, o.clone(), &families)
}

/// Creates a database at `dir` with the families `names` (beside the default).
fn create_with(dir: &str, o: &Options, names: &[&str]) -> Db {
    let db = Db::open(dir, o.clone()).unwrap();
    for n in names {
        db.create_column_family(n, o).unwrap();
    }
    db
}

#[test]
fn a_checkpoint_opens_with_every_family_tables_and_memtables_alike() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.merge_operator = Some(merge_operator::from_name("uint64add").unwrap());
    let db = create_with(DB, &o, &["other"]);
    let other = db.cf_handle("other").unwrap();
    for i in 0..600 {
        db.put(&key(i), format!("v{i}").as_bytes()).unwrap();
        db.put_cf(&other, &key(i), b"o").unwrap();
    }
    db.delete_range(&key(100), &key(200)).unwrap();
    db.merge(b"counter", &5u64.to_le_bytes()).unwrap();
    db.compact_range(None, None).unwrap();
    db.delete(&key(7)).unwrap();
    db.merge(b"counter", &2u64.to_le_bytes()).unwrap();
    let before = family_contents(&db);
    fs.create_dir_all(Path::new("/backups")).unwrap();

    let info = Checkpoint::create(&db, CKPT).unwrap();
    assert!(info.flushed, "{info:?}");
    assert!(info.files_linked > 0, "tables are linked, not copied: {info:?}");
    assert_eq!(info.files_copied, 0, "{info:?}");

    // The database carries on; the copy does not see what comes after.
    db.put(&key(1), b"after").unwrap();
    db.drop_column_family(&other).unwrap();
    assert!(!fs.exists(Path::new("/backups/ckpt.tmp")));
    let copy = open_with(CKPT, &o, &["other"]).unwrap();
    assert_eq!(family_contents(&copy), before);
    assert_eq!(copy.get(b"counter").unwrap(), Some(7u64.to_le_bytes().to_vec()));
    assert_eq!(copy.get(&key(150)).unwrap(), None);
    // The copy is a database of its own: it takes writes, and they do not
    // reach the source.
    copy.put(&key(2), b"copy").unwrap();
    copy.flush(true).unwrap();
    copy.compact_range(None, None).unwrap();
    drop(copy);
    assert_eq!(db.get(&key(2)).unwrap(), Some(b"v2".to_vec()));
    assert_eq!(db.get(&key(1)).unwrap(), Some(b"after".to_vec()));
}

#[test]
fn without_a_flush_the_copied_wals_carry_the_memtables() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.write_buffer_size = 1 << 20;
    let db = create_with(DB, &o, &["other"]);
    let other = db.cf_handle("other").unwrap();
    for i in 0..100 {
        db.put(&key(i), b"in a table").unwrap();
    }
    db.flush(true).unwrap();
    for i in 50..150 {
        db.put(&key(i), b"in the memtable").unwrap();
        db.put_cf(&other, &key(i), b"other").unwrap();
    }
    let before = family_contents(&db);
    let info = Checkpoint::create_with(&db, CKPT, &CheckpointOptions { log_size_for_flush: u64::MAX }).unwrap();
    assert!(!info.flushed, "{info:?}");
    assert!(info.wal_files >= 1 && info.bytes_copied > 0, "{info:?}");
    let copy = open_with(CKPT, &o, &["other"]).unwrap();
    assert_eq!(family_contents(&copy), before);
    // Below the threshold the flush happens.
    let info = Checkpoint::create_with(&db, "/ckpt2", &CheckpointOptions { log_size_for_flush: 1 }).unwrap();
    assert!(info.flushed, "{info:?}");
    assert_eq!(family_contents(&open_with("/ckpt2", &o, &["other"]).unwrap()), before);
}

#[test]
fn writes_without_the_wal_are_flushed_into_the_copy() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.write_buffer_size = 1 << 20;
    let db = Db::open(DB, o.clone()).unwrap();
    let unlogged = WriteOptions { sync: false, disable_wal: true };
    for i in 0..50 {
        db.put_opt(&key(i), b"no wal", &unlogged).unwrap();
    }
    let info = Checkpoint::create_with(&db, CKPT, &CheckpointOptions { log_size_for_flush: u64::MAX }).unwrap();
    assert!(info.flushed, "unlogged data forces the flush: {info:?}");
    let copy = Db::open(CKPT, o).unwrap();
    assert_eq!(copy.get(&key(49)).unwrap(), Some(b"no wal".to_vec()));
}

/// With background work paused no flush can run, and writes made without
/// the WAL are in no file: a checkpoint and a backup are refused then, not
/// made without them (they were, silently).
#[test]
fn writes_without_the_wal_while_background_work_is_paused_refuse_the_copy() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.write_buffer_size = 1 << 20;
    let db = Db::open(DB, o.clone()).unwrap();
    db.put(&key(1), b"logged").unwrap();
    db.pause_background_work();
    // Logged writes alone: the copied WALs carry them.
    let info = Checkpoint::create(&db, "/ckpt-logged").unwrap();
    assert!(!info.flushed);
    let copy = Db::open("/ckpt-logged", o.clone()).unwrap();
    assert_eq!(copy.get(&key(1)).unwrap(), Some(b"logged".to_vec()));
    drop(copy);
    db.put_opt(&key(2), b"no wal", &WriteOptions { sync: false, disable_wal: true }).unwrap();
    let e = Checkpoint::create(&db, CKPT).unwrap_err();
    assert!(matches!(e, Error::Busy(_)), "{e}");
    assert!(e.to_string().contains("without the WAL"), "{e}");
    assert!(!fs.exists(Path::new(CKPT)) && !fs.exists(Path::new("/backups/ckpt.tmp")));
    let mut backups =
        ebb::BackupEngine::open(ebb::BackupEngineOptions { backup_dir: "/backup".into(), fs: Arc::new(fs.clone()) })
            .unwrap();
    let e = backups.create_new_backup(&db, false).unwrap_err();
    assert!(matches!(e, Error::Busy(_)), "{e}");
    assert!(backups.backup_info().is_empty());
    db.continue_background_work();
    let info = Checkpoint::create(&db, CKPT).unwrap();
    assert!(info.flushed);
    let copy = Db::open(CKPT, o).unwrap();
    assert_eq!(copy.get(&key(2)).unwrap(), Some(b"no wal".to_vec()));
    backups.create_new_backup(&db, false).unwrap();
    assert_eq!(backups.backup_info().len(), 1);
}

#[test]
fn checkpoints_under_concurrent_writes_flushes_and_compactions_hold_one_point_in_time() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    let names = ["a", "b"];
    let db = Arc::new(create_with(DB, &o, &names));
    let stop = Arc::new(AtomicBool::new(false));
    // How many operations the writer has done, for the checkpoints to wait on.
    let written = Arc::new(common::sync::Watched::new(0usize));
    let writer = {
        let (db, stop, written) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&written));
        std::thread::spawn(move || {
            let cfs = [db.cf_handle("default").unwrap(), db.cf_handle("a").unwrap(), db.cf_handle("b").unwrap()];
            let mut ops: Vec<Op> = Vec::new();
            let mut rng = 0x9e3779b97f4a7c15u64;
            let mut i = 0usize;
            while !stop.load(Ordering::Acquire) || i < 3000 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let cf = (rng % 3) as usize;
                let k = key((rng >> 8) as usize % 400);
                if rng.is_multiple_of(5) {
                    db.delete_cf(&cfs[cf], &k).unwrap();
                    ops.push((cf, k, None));
                } else {
                    let v = format!("{i}-{}", "x".repeat((rng >> 20) as usize % 60)).into_bytes();
                    db.put_cf(&cfs[cf], &k, &v).unwrap();
                    ops.push((cf, k, Some(v)));
                }
                i += 1;
                written.update(|n| *n = i);
            }
            ops
        })
    };
    let mut taken = Vec::new();
    for n in 0..6u32 {
        // Each checkpoint a hundred operations after the last.
        let at = written.with(|n| *n) + 100;
        written.wait_until("the writer to go on", |n| *n >= at);
        let dir = format!("/ckpt{n}");
        // Half flush first, half copy the WALs as they are.
        let log_size_for_flush = if n.is_multiple_of(2) { 0 } else { u64::MAX };
        Checkpoint::create_with(&db, &dir, &CheckpointOptions { log_size_for_flush }).unwrap();
        taken.push(dir);
    }
    stop.store(true, Ordering::Release);
    let ops = writer.join().unwrap();
    let mut points = Vec::new();
    for dir in &taken {
        let copy = open_with(dir, &o, &names).unwrap();
        let contents = family_contents(&copy);
        let got: Vec<Model> = ["default", "a", "b"].iter().map(|n| contents[*n].clone()).collect();
        let point =
            matching_prefix(&ops, 3, &got).unwrap_or_else(|| panic!("{dir} holds a state the database never had"));
        points.push(point);
    }
    // Taken one after another: their points follow the same order.
    assert!(points.windows(2).all(|w| w[0] <= w[1]), "{points:?}");
    assert!(points.last().is_some_and(|p| *p > 0), "{points:?}");
}

#[test]
fn a_target_that_exists_is_refused_and_left_alone() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    let db = Db::open(DB, o.clone()).unwrap();
    db.put(b"k", b"v").unwrap();
    fs.create_dir_all(Path::new(CKPT)).unwrap();
    let e = Checkpoint::create(&db, CKPT).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains(CKPT) && m.contains("already exists")), "{e}");
    assert!(fs.list_dir(Path::new(CKPT)).unwrap().is_empty());
    // The database itself is a directory that exists too.
    let e = Checkpoint::create(&db, DB).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    // A temporary left by an earlier checkpoint that crashed is cleared.
    fs.create_dir_all(Path::new("/fresh.tmp")).unwrap();
    let mut junk = fs.new_writable(Path::new("/fresh.tmp/000009.sst")).unwrap();
    junk.append(b"half a table").unwrap();
    drop(junk);
    Checkpoint::create(&db, "/fresh").unwrap();
    assert!(!fs.exists(Path::new("/fresh.tmp")));
    assert!(!fs.exists(Path::new("/fresh/000009.sst")));
    assert_eq!(Db::open("/fresh", o).unwrap().get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// A database with tables, blob-free, in two families, and data in the
/// memtables; returns it and what it holds.
fn loaded(fs: &MemFs) -> (Db, Options, BTreeMap<String, Model>) {
    let o = tiny_options(Some(fs.clone()));
    let db = create_with(DB, &o, &["other"]);
    let other = db.cf_handle("other").unwrap();
    for i in 0..300 {
        db.put(&key(i), &[b'v'; 40]).unwrap();
        db.put_cf(&other, &key(i * 7), b"o").unwrap();
    }
    db.wait_for_compact().unwrap();
    for i in 0..20 {
        db.put_opt(&key(i * 3), b"newer", &common::SYNCED).unwrap();
    }
    let contents = family_contents(&db);
    (db, o, contents)
}

#[test]
fn a_checkpoint_that_fails_at_any_step_leaves_no_target_and_the_database_as_it_was() {
    for op in [FaultOp::CreateDir, FaultOp::Create, FaultOp::Append, FaultOp::Sync, FaultOp::SyncDir, FaultOp::Rename] {
        for nth in 1.. {
            let fs = MemFs::new();
            let (db, o, contents) = loaded(&fs);
            fs.inject(FaultRule::new(op).nth(nth).path_contains("ckpt"));
            let before = fs.faults_injected();
            let r = Checkpoint::create(&db, CKPT);
            let fired = fs.faults_injected() > before;
            fs.clear_faults();
            match r {
                Ok(info) => {
                    // Only a hard link may fail without failing the
                    // checkpoint: the file is copied instead.
                    assert!(
                        !fired || (op == FaultOp::Create && info.files_copied == 1),
                        "{op:?} #{nth}: the fault fired, yet the checkpoint reported success: {info:?}"
                    );
                    assert_eq!(family_contents(&open_with(CKPT, &o, &["other"]).unwrap()), contents);
                    if !fired {
                        break;
                    }
                    continue;
                }
                Err(e) => {
                    assert!(fired, "{op:?} #{nth}: failed without the fault: {e}");
                    assert!(!fs.exists(Path::new(CKPT)), "{op:?} #{nth}: a half copy was left");
                    assert!(!fs.exists(Path::new("/backups/ckpt.tmp")), "{op:?} #{nth}: the temporary was left");
                }
            }
            // The database works on, holds what it held, and a second
            // attempt makes a whole copy.
            assert_eq!(family_contents(&db), contents, "{op:?} #{nth}");
            db.put(b"later", b"x").unwrap();
            Checkpoint::create(&db, CKPT).unwrap();
            let copy = open_with(CKPT, &o, &["other"]).unwrap();
            assert_eq!(copy.get(b"later").unwrap(), Some(b"x".to_vec()));
            assert!(nth < 200, "{op:?}: the checkpoint never got past the fault");
        }
    }
}

#[test]
fn a_power_loss_during_a_checkpoint_leaves_the_source_whole_and_the_target_whole_or_absent() {
    // Operation `cut` after the call and every later one fail, so nothing
    // after it reaches the disk; then the power goes. Background work makes
    // the count of a checkpoint's operations vary a little: the cuts go on
    // until one lets the checkpoint finish untouched.
    let mut absent = 0;
    for cut in 1.. {
        assert!(cut < 1000, "the checkpoint never finished");
        let fs = MemFs::new();
        let (db, o, contents) = loaded(&fs);
        fs.inject(FaultRule::any_op().nth(cut).persistent());
        let before = fs.faults_injected();
        let made = Checkpoint::create(&db, CKPT).is_ok();
        let untouched = fs.faults_injected() == before;
        let after = fs.crash_clone(CrashMode::DropUnsynced);
        drop(db);
        let mut o = o.clone();
        o.fs = Arc::new(after.clone());
        let source = open_with(DB, &o, &["other"]).unwrap_or_else(|e| panic!("cut {cut}: the source: {e}"));
        assert_eq!(family_contents(&source), contents, "cut {cut}");
        if after.exists(Path::new(CKPT)) {
            let copy = open_with(CKPT, &o, &["other"]).unwrap_or_else(|e| panic!("cut {cut}: the copy: {e}"));
            assert_eq!(family_contents(&copy), contents, "cut {cut}");
        } else {
            assert!(!made || !untouched, "cut {cut}: made untouched, but the copy is gone");
            absent += 1;
            // Whatever the crash left of the temporary, a new checkpoint
            // clears it.
            Checkpoint::create(&source, CKPT).unwrap_or_else(|e| panic!("cut {cut}: again: {e}"));
            assert_eq!(family_contents(&open_with(CKPT, &o, &["other"]).unwrap()), contents, "cut {cut}");
        }
        if made && untouched {
            assert!(absent + 1 >= cut as usize / 2, "{absent} of {cut} cuts left no copy");
            break;
        }
    }
}

#[test]
fn on_a_real_filesystem_tables_are_hard_links_and_the_copy_opens() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let (src, dst) = (tmp.path().join("db"), tmp.path().join("ckpt"));
    let mut o = tiny_options(None);
    o.create_if_missing = true;
    let db = Db::open(&src, o.clone()).unwrap();
    for i in 0..500 {
        db.put(&key(i), &[b'v'; 30]).unwrap();
    }
    db.wait_for_compact().unwrap();
    db.put(b"tail", b"in the memtable").unwrap();
    let info = Checkpoint::create_with(&db, &dst, &CheckpointOptions { log_size_for_flush: u64::MAX }).unwrap();
    assert!(info.files_linked > 0 && info.files_copied == 0 && info.wal_files >= 1, "{info:?}");
    let tables: Vec<_> = std::fs::read_dir(&dst)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "sst"))
        .collect();
    assert_eq!(tables.len(), info.files_linked);
    for t in &tables {
        let (a, b) = (std::fs::metadata(t).unwrap(), std::fs::metadata(src.join(t.file_name().unwrap())).unwrap());
        assert_eq!((a.ino(), a.nlink()), (b.ino(), 2), "{}", t.display());
    }
    let want = common::scan(&db, Default::default());
    drop(db);
    let copy = Db::open(&dst, o).unwrap();
    assert_eq!(common::scan(&copy, Default::default()), want);
    assert_eq!(copy.get(b"tail").unwrap(), Some(b"in the memtable".to_vec()));
}

#[test]
fn a_ttl_database_checkpoints_into_a_ttl_database() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    let db = Db::open_with_ttl(DB, o.clone(), 3600).unwrap();
    db.put(b"k", b"v").unwrap();
    Checkpoint::create(db.base_db(), CKPT).unwrap();
    let e = Db::open(CKPT, o.clone()).err().expect("a TTL copy opened without TTL");
    assert!(e.to_string().contains("TTL"), "{e}");
    let copy = Db::open_with_ttl(CKPT, o, 3600).unwrap();
    assert_eq!(copy.get(b"k").unwrap(), Some(b"v".to_vec()));
}

/// The table files in `dir`.
fn tables_in(fs: &MemFs, dir: &str) -> Vec<String> {
    let mut t: Vec<String> = fs.list_dir(Path::new(dir)).unwrap().into_iter().filter(|n| n.ends_with(".sst")).collect();
    t.sort();
    t
}

#[test]
fn obsolete_files_stay_while_deletions_are_held_off() {
    let fs = MemFs::new();
    let o = common::manual_options(&fs);
    let db = Db::open(DB, o).unwrap();
    for round in 0..3 {
        for i in 0..100 {
            db.put(&key(i), format!("{round}").as_bytes()).unwrap();
        }
        db.flush(true).unwrap();
    }
    let flushed = tables_in(&fs, DB);
    assert_eq!(flushed.len(), 3);
    db.disable_file_deletions();
    db.disable_file_deletions();
    db.compact_range(None, None).unwrap();
    let during = tables_in(&fs, DB);
    assert!(flushed.iter().all(|t| during.contains(t)), "{flushed:?} / {during:?}");
    db.enable_file_deletions();
    assert_eq!(tables_in(&fs, DB), during, "one hold is still on");
    db.enable_file_deletions();
    let after = tables_in(&fs, DB);
    assert!(flushed.iter().all(|t| !after.contains(t)), "{flushed:?} / {after:?}");
    assert_eq!(db.get(&key(5)).unwrap(), Some(b"2".to_vec()));
}
