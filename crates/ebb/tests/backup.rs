//! Incremental backups (`BackupEngine`, RocksDB's `BackupEngine`): backups
//! round-trip through verify and restore, share tables between them, are
//! whole or absent after a crash at any filesystem operation, and damage is
//! found by verify and refused by restore.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::{family_contents, tiny_options, Model};
use ebb::fs::{CrashMode, FaultRule, FileSystem, MemFs};
use ebb::{BackupEngine, BackupEngineOptions, Db, Error, Options, RestoreOptions};

const DB: &str = "/db";
const BACKUPS: &str = "/backups";

type Contents = BTreeMap<String, Model>;

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn engine(fs: &MemFs) -> ebb::Result<BackupEngine> {
    BackupEngine::open(BackupEngineOptions { backup_dir: BACKUPS.into(), fs: Arc::new(fs.clone()) })
}

fn open_restored(dir: &str, o: &Options) -> Db {
    Db::open_cf(dir, o.clone(), &[("other", o.clone())]).unwrap_or_else(|e| panic!("{dir}: {e}"))
}

/// A database with two families, tables and WAL data.
fn loaded(fs: &MemFs) -> (Db, Options) {
    loaded_with(tiny_options(Some(fs.clone())))
}

fn loaded_with(o: Options) -> (Db, Options) {
    let db = Db::open(DB, o.clone()).unwrap();
    let other = db.create_column_family("other", &o).unwrap();
    for i in 0..500 {
        db.put(&key(i), format!("first {i}").as_bytes()).unwrap();
        db.put_cf(&other, &key(i * 2), b"o").unwrap();
    }
    db.wait_for_compact().unwrap();
    for i in 0..30 {
        db.put_opt(&key(i * 7), b"in the WAL", &common::SYNCED).unwrap();
    }
    (db, o)
}

/// Files under `dir` (one level).
fn count(fs: &MemFs, dir: &str) -> usize {
    fs.list_dir(Path::new(dir)).map_or(0, |n| n.len())
}

#[test]
fn backups_round_trip_share_their_tables_and_restore_each_state() {
    let fs = MemFs::new();
    // Without automatic compaction the first backup's tables stay for the
    // second to share.
    let (db, o) = loaded_with(common::manual_options(&fs));
    let mut e = engine(&fs).unwrap();
    let first = e.create_new_backup(&db, false).unwrap();
    let state1: Contents = family_contents(&db);
    let shared_after_one = count(&fs, "/backups/shared_checksum");
    assert!(shared_after_one > 0);

    let other = db.cf_handle("other").unwrap();
    for i in 0..40 {
        db.put(&key(i), b"second").unwrap();
        db.delete_cf(&other, &key(i * 2)).unwrap();
    }
    let second = e.create_new_backup(&db, true).unwrap();
    let state2 = family_contents(&db);
    assert_eq!((first, second), (1, 2));
    let info = e.backup_info();
    assert_eq!(info.iter().map(|b| b.backup_id).collect::<Vec<_>>(), vec![1, 2]);
    assert!(info[1].sequence > info[0].sequence && info.iter().all(|b| b.size > 0), "{info:?}");
    e.verify_backup(1).unwrap();
    e.verify_backup(2).unwrap();
    // Incremental: the second backup stored only the tables it added.
    let shared_now = count(&fs, "/backups/shared_checksum");
    let named: usize = info.iter().map(|b| b.number_files).sum::<usize>()
        - count(&fs, "/backups/private/1")
        - count(&fs, "/backups/private/2");
    assert!(shared_now < named, "{shared_now} shared files for {named} names: nothing was shared");
    assert!(shared_now > shared_after_one);

    e.restore_db_from_backup(1, "/r1", &RestoreOptions::default()).unwrap();
    e.restore_db_from_latest_backup("/r2", &RestoreOptions::default()).unwrap();
    assert_eq!(family_contents(&open_restored("/r1", &o)), state1);
    let r2 = open_restored("/r2", &o);
    assert_eq!(family_contents(&r2), state2);
    // A restored database is one of its own.
    r2.put(b"new", b"x").unwrap();
    assert_eq!(db.get(b"new").unwrap(), None);

    // The engine reopens with the same backups.
    drop(e);
    let e = engine(&fs).unwrap();
    assert_eq!(e.backup_info(), info);
}

#[test]
fn deleting_and_purging_keep_what_the_remaining_backups_name() {
    let fs = MemFs::new();
    let (db, o) = loaded(&fs);
    let mut e = engine(&fs).unwrap();
    let mut states = Vec::new();
    for round in 0..4 {
        for i in 0..60 {
            db.put(&key(i + round * 100), format!("round {round}").as_bytes()).unwrap();
        }
        e.create_new_backup(&db, true).unwrap();
        states.push(family_contents(&db));
    }
    e.delete_backup(2).unwrap();
    assert!(!fs.exists(Path::new("/backups/private/2")) && !fs.exists(Path::new("/backups/meta/2")));
    e.purge_old_backups(1).unwrap();
    assert_eq!(e.backup_info().iter().map(|b| b.backup_id).collect::<Vec<_>>(), vec![4]);
    assert_eq!(count(&fs, "/backups/private"), 1);
    // Exactly the files backup 4 names are left.
    let shared_named = e.backup_info()[0].number_files - count(&fs, "/backups/private/4");
    assert_eq!(count(&fs, "/backups/shared_checksum"), shared_named);
    e.verify_backup(4).unwrap();
    e.restore_db_from_latest_backup("/r", &RestoreOptions::default()).unwrap();
    assert_eq!(family_contents(&open_restored("/r", &o)), states[3]);
    let err = e.delete_backup(2).unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("no backup 2")), "{err}");
    // The next id is above every one taken.
    assert_eq!(e.create_new_backup(&db, false).unwrap(), 5);
}

#[test]
fn damage_is_found_by_verify_and_refused_by_restore() {
    let fs = MemFs::new();
    let (db, o) = loaded(&fs);
    let mut e = engine(&fs).unwrap();
    e.create_new_backup(&db, true).unwrap();
    let shared = fs.list_dir(Path::new("/backups/shared_checksum")).unwrap();
    let victim = Path::new("/backups/shared_checksum").join(&shared[0]);
    let mut bytes = fs.file_bytes(&victim).unwrap();
    bytes[10] ^= 1;
    fs.set_file_bytes(&victim, &bytes).unwrap();
    let err = e.verify_backup(1).unwrap_err();
    assert!(err.is_corruption() && err.to_string().contains(&shared[0]), "{err}");
    let err = e.restore_db_from_backup(1, "/r", &RestoreOptions::default()).unwrap_err();
    assert!(err.is_corruption() && err.to_string().contains(&shared[0]), "{err}");
    // No half database is left: what the restore wrote is removed.
    let left = fs.list_dir(Path::new("/r")).unwrap();
    assert!(left.iter().all(|n| n == "LOCK"), "{left:?}");
    let _ = &o;
    // A missing file too.
    fs.remove_file(&victim).unwrap();
    let err = e.verify_backup(1).unwrap_err();
    assert!(err.is_corruption() && err.to_string().contains("missing"), "{err}");

    // A damaged meta file: reported, kept, and its shared files are not
    // collected until it is deleted.
    e.create_new_backup(&db, false).unwrap();
    drop(e);
    let meta = Path::new("/backups/meta/2");
    let mut bytes = fs.file_bytes(meta).unwrap();
    bytes[3] ^= 1;
    fs.set_file_bytes(meta, &bytes).unwrap();
    let shared_before = count(&fs, "/backups/shared_checksum");
    let mut e = engine(&fs).unwrap();
    assert_eq!(e.corrupted_backups().iter().map(|(id, _)| *id).collect::<Vec<_>>(), vec![2]);
    assert_eq!(e.backup_info().iter().map(|b| b.backup_id).collect::<Vec<_>>(), vec![1]);
    assert_eq!(count(&fs, "/backups/shared_checksum"), shared_before);
    let err = e.restore_db_from_backup(2, "/r2", &RestoreOptions::default()).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    e.delete_backup(2).unwrap();
    assert!(e.corrupted_backups().is_empty());
    assert_eq!(e.create_new_backup(&db, false).unwrap(), 2);
}

#[test]
fn restores_refuse_live_databases_other_files_and_unasked_overwrites() {
    let fs = MemFs::new();
    let (db, o) = loaded(&fs);
    let mut e = engine(&fs).unwrap();
    e.create_new_backup(&db, true).unwrap();
    let state = family_contents(&db);
    // Over the live database: its LOCK is held.
    let err = e.restore_db_from_backup(1, DB, &RestoreOptions { overwrite: true }).unwrap_err();
    assert!(matches!(err, Error::Busy(_)), "{err}");
    db.put(b"after the backup", b"x").unwrap();
    drop(db);
    // Over a closed database: only when asked.
    let err = e.restore_db_from_backup(1, DB, &RestoreOptions::default()).unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("not empty") && m.contains("overwrite")), "{err}");
    e.restore_db_from_backup(1, DB, &RestoreOptions { overwrite: true }).unwrap();
    let restored = open_restored(DB, &o);
    assert_eq!(family_contents(&restored), state);
    drop(restored);
    // A directory holding someone else's file is not overwritten.
    fs.create_dir_all(Path::new("/home")).unwrap();
    let mut f = fs.new_writable(Path::new("/home/notes.txt")).unwrap();
    f.append(b"mine").unwrap();
    drop(f);
    let err = e.restore_db_from_backup(1, "/home", &RestoreOptions { overwrite: true }).unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("notes.txt")), "{err}");
    assert_eq!(fs.file_bytes(Path::new("/home/notes.txt")).unwrap(), b"mine");
    let err = e.restore_db_from_backup(9, "/r", &RestoreOptions::default()).unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("no backup 9")), "{err}");
}

#[test]
fn a_directory_that_is_not_a_backup_directory_is_refused() {
    let fs = MemFs::new();
    let (db, _) = loaded(&fs);
    let err = BackupEngine::open(BackupEngineOptions { backup_dir: DB.into(), fs: Arc::new(fs.clone()) }).unwrap_err();
    assert!(matches!(&err, Error::InvalidArgument(m) if m.contains("not a backup directory")), "{err}");
    let _first = engine(&fs).unwrap();
    let err = engine(&fs).unwrap_err();
    assert!(matches!(err, Error::Busy(_)), "{err}");
    drop(db);
}

/// A backup that fails after its meta file took its name (the meta
/// directory's sync fails) is not listed in this session; deleting another
/// backup (which collects what no listed backup names), or taking the next
/// one, must still not delete files a later open lists it by. Every backup
/// a reopened engine lists verifies.
#[test]
fn a_backup_failing_after_its_meta_rename_leaves_no_listed_backup_without_its_files() {
    for then_delete in [true, false] {
        let fs = MemFs::new();
        let (db, _) = loaded(&fs);
        let mut backups = engine(&fs).unwrap();
        let first = backups.create_new_backup(&db, false).unwrap();
        for i in 0..200 {
            db.put(&key(i), b"second").unwrap();
        }
        db.flush(true).unwrap();
        fs.inject(FaultRule::new(ebb::fs::FaultOp::SyncDir).path_contains("/meta"));
        backups.create_new_backup(&db, false).unwrap_err();
        fs.clear_faults();
        if then_delete {
            backups.delete_backup(first).unwrap();
        } else {
            backups.create_new_backup(&db, false).unwrap();
        }
        drop(backups);
        let backups = engine(&fs).unwrap();
        assert!(backups.corrupted_backups().is_empty());
        for info in backups.backup_info() {
            backups.verify_backup(info.backup_id).unwrap_or_else(|e| {
                panic!("delete {then_delete}: backup {} is listed but broken: {e}", info.backup_id)
            });
        }
    }
}

#[test]
fn a_crash_at_any_step_of_a_backup_leaves_every_listed_backup_whole() {
    // Operation `cut` after the call and every later one fail, so nothing
    // after it reaches the disk; then the power goes. Background work makes
    // a backup's count of operations vary a little: the cuts go on until
    // one lets the backup finish untouched.
    for cut in 1.. {
        assert!(cut < 2000, "the backup never finished");
        let fs = MemFs::new();
        let (db, o) = loaded(&fs);
        let mut e = engine(&fs).unwrap();
        e.create_new_backup(&db, true).unwrap();
        let state1 = family_contents(&db);
        for i in 0..50 {
            db.put_opt(&key(i + 1000), b"second", &common::SYNCED).unwrap();
        }
        let state2 = family_contents(&db);
        fs.inject(FaultRule::any_op().nth(cut).persistent());
        let before = fs.faults_injected();
        let made = e.create_new_backup(&db, cut % 2 == 0).is_ok();
        let untouched = fs.faults_injected() == before;
        let after = fs.crash_clone(CrashMode::DropUnsynced);
        drop(e);
        drop(db);
        let e = engine(&after).unwrap_or_else(|err| panic!("cut {cut}: {err}"));
        let ids: Vec<u32> = e.backup_info().iter().map(|b| b.backup_id).collect();
        assert!(ids == [1] || ids == [1, 2], "cut {cut}: {ids:?}");
        assert!(e.corrupted_backups().is_empty(), "cut {cut}: {:?}", e.corrupted_backups());
        if made && untouched {
            assert_eq!(ids, [1, 2], "cut {cut}: made, yet lost");
        }
        // What the interrupted backup left is gone.
        for dir in ["/backups/private", "/backups/shared_checksum", "/backups/meta"] {
            let names = after.list_dir(Path::new(dir)).unwrap();
            assert!(names.iter().all(|n| !n.ends_with(".tmp")), "cut {cut}: {dir}: {names:?}");
        }
        assert_eq!(count(&after, "/backups/private"), ids.len(), "cut {cut}");
        let mut o = o.clone();
        o.fs = Arc::new(after.clone());
        for (id, state) in [(1u32, &state1), (2, &state2)].into_iter().filter(|(id, _)| ids.contains(id)) {
            e.verify_backup(id).unwrap_or_else(|err| panic!("cut {cut}: backup {id}: {err}"));
            let dir = format!("/restored{id}");
            e.restore_db_from_backup(id, &dir, &RestoreOptions::default()).unwrap();
            assert_eq!(&family_contents(&open_restored(&dir, &o)), state, "cut {cut}: backup {id}");
        }
        if made && untouched {
            break;
        }
    }
}
