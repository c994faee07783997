//! Recovery: after close, after a drop without close, and after simulated
//! power loss on the in-memory filesystem, every write acknowledged with
//! `sync=true` is present and nothing appears that was never written.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{scan, tiny_options};
use ebb::fs::{CrashMode, FaultRule, FileSystem, MemFs};
use ebb::{Db, Options, ReadOptions, WalRecoveryMode, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
fn reopen_after_close_keeps_everything() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = tiny_options(None);
    o.write_buffer_size = 1 << 20;
    {
        let db = Db::open(dir.path(), o.clone()).unwrap();
        for i in 0..1000u32 {
            db.put(format!("k{i:04}").as_bytes(), &i.to_le_bytes()).unwrap();
        }
        db.delete(b"k0007").unwrap();
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(db.get(b"k0999").unwrap(), Some(999u32.to_le_bytes().to_vec()));
    assert_eq!(db.get(b"k0007").unwrap(), None);
    assert_eq!(scan(&db, ReadOptions::default()).len(), 999);
}

#[test]
fn drop_without_close_keeps_acknowledged_writes() {
    let dir = tempfile::tempdir().unwrap();
    let o = tiny_options(None);
    {
        let db = Db::open(dir.path(), o.clone()).unwrap();
        for i in 0..3000u32 {
            db.put(format!("k{i:05}").as_bytes(), b"value").unwrap();
        }
        // No close: the handle is dropped.
    }
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(scan(&db, ReadOptions::default()).len(), 3000);
}

#[test]
fn unlogged_writes_survive_close_by_flush() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    let no_wal = WriteOptions { sync: false, disable_wal: true };
    {
        let db = Db::open("/db", o.clone()).unwrap();
        db.put_opt(b"a", b"1", &no_wal).unwrap();
        db.put_opt(b"b", b"2", &no_wal).unwrap();
        db.close().unwrap();
    }
    fs.crash(CrashMode::DropUnsynced);
    let db = Db::open("/db", o).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"b").unwrap(), Some(b"2".to_vec()));
}

/// A database still running after a power loss (here a flush that starts
/// after it, which would write a table, sync the directory and roll the
/// MANIFEST) changes nothing on the disk the crash left: MemFs models the
/// process as gone, so crash tests see only what a real power loss leaves.
#[test]
fn a_database_running_after_a_crash_leaves_the_crashed_disk_alone() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    let db = Db::open("/db", o.clone()).unwrap();
    db.pause_background_work();
    // One immutable memtable, and writes in the next (paused, nothing stalls).
    for i in 0..100u32 {
        db.put(format!("k{i:05}").as_bytes(), &[b'v'; 100]).unwrap();
    }
    db.flush_wal(true).unwrap();
    fs.crash(CrashMode::DropUnsynced);
    let listing = |fs: &MemFs| {
        let names = fs.list_dir(std::path::Path::new("/db")).unwrap();
        let digest = |b: Vec<u8>| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            b.hash(&mut h);
            (b.len(), h.finish())
        };
        names
            .into_iter()
            .map(|n| (fs.file_bytes(&std::path::Path::new("/db").join(&n)).map(digest), n))
            .collect::<Vec<_>>()
    };
    let after_crash = listing(&fs);
    db.continue_background_work();
    assert!(db.flush(true).is_err(), "a flush on a disk that lost power fails");
    drop(db);
    assert_eq!(listing(&fs), after_crash, "the crashed database changed the disk after the crash");
    let db = Db::open("/db", o).unwrap();
    assert_eq!(scan(&db, ReadOptions::default()).len(), 100);
}

/// Writes random data, some of it synced, then crashes the filesystem in
/// every mode: synced writes must survive, and every key must hold a value it
/// was given at some point (never an invented one), and the recovered state
/// must be a prefix of the history no earlier than the last sync.
#[test]
fn power_loss_keeps_synced_writes_in_every_crash_mode() {
    power_loss_in_every_crash_mode(tiny_options, |_, i| format!("v{i}").into_bytes());
}

/// As [`power_loss_keeps_synced_writes_in_every_crash_mode`], with blob
/// files: values of 1 to 400 bytes, those of 100 or more in blob files of
/// at most 4 KiB, garbage collection forcing compactions early, so the
/// crash finds blob files being written, relocated and made obsolete.
#[test]
fn power_loss_with_blob_files_keeps_synced_writes_in_every_crash_mode() {
    let options = |fs: Option<MemFs>| {
        let mut o = tiny_options(fs);
        o.enable_blob_files = true;
        o.min_blob_size = 100;
        o.blob_file_size = 4096;
        o.enable_blob_garbage_collection = true;
        o.blob_garbage_collection_force_threshold = 0.25;
        o
    };
    power_loss_in_every_crash_mode(options, |rng, i| {
        let mut v = format!("v{i}-").into_bytes();
        v.resize(rng.gen_range(1..400).max(v.len()), b'x');
        v
    });
}

fn power_loss_in_every_crash_mode(options: fn(Option<MemFs>) -> Options, value: fn(&mut StdRng, usize) -> Vec<u8>) {
    let modes = |seed: u64| {
        vec![
            CrashMode::DropUnsynced,
            CrashMode::KeepRandomPrefix { seed },
            CrashMode::GarbageTail { seed },
            CrashMode::ZeroTail,
        ]
    };
    for seed in 0..6u64 {
        for mode in modes(seed) {
            let fs = MemFs::new();
            let o = options(Some(fs.clone()));
            let mut rng = StdRng::seed_from_u64(seed);
            // history[i] = state after write i.
            let mut states: Vec<BTreeMap<Vec<u8>, Vec<u8>>> = vec![BTreeMap::new()];
            let mut last_synced = 0usize;
            {
                let db = Db::open("/db", o.clone()).unwrap();
                for i in 0..1500 {
                    let k = format!("k{:03}", rng.gen_range(0..200)).into_bytes();
                    let v = value(&mut rng, i);
                    let sync = rng.gen_bool(0.05);
                    let mut next = states.last().unwrap().clone();
                    if rng.gen_bool(0.8) {
                        db.put_opt(&k, &v, &WriteOptions { sync, disable_wal: false }).unwrap();
                        next.insert(k, v);
                    } else {
                        db.delete_opt(&k, &WriteOptions { sync, disable_wal: false }).unwrap();
                        next.remove(&k);
                    }
                    states.push(next);
                    if sync {
                        last_synced = states.len() - 1;
                    }
                    if i % 500 == 499 {
                        db.flush(true).unwrap();
                    }
                }
                fs.crash(mode);
                // The handle is now dead; dropping it must not panic.
                drop(db);
            }
            let garbage = matches!(mode, CrashMode::GarbageTail { .. });
            let (db, _) = common::open_after_power_loss("/db", &o, garbage)
                .unwrap_or_else(|e| panic!("seed {seed} {mode:?}: reopen: {e}"));
            let got = scan(&db, ReadOptions::default());
            let matching = states.iter().rposition(|s| *s == got);
            let Some(at) = matching else {
                panic!("seed {seed} {mode:?}: recovered state matches no prefix of the history");
            };
            assert!(
                at >= last_synced,
                "seed {seed} {mode:?}: recovered prefix {at} is before the last sync {last_synced}"
            );
        }
    }
}

/// A crash inside recovery itself, at any filesystem operation of it, leaves
/// a database the next recovery opens, holding what the first recovery
/// would have recovered. Recovery writes tables, a new MANIFEST and a new WAL
/// before it deletes the WALs it replayed; here the newest of those ends in a
/// tail a power loss tore, in every WAL recovery mode that accepts one (the
/// new WAL once took its final name first, and a crash then left a torn WAL
/// followed by a final-named one, which the next recovery read as damage to
/// acknowledged writes).
#[test]
fn a_crash_inside_recovery_leaves_a_database_the_next_recovery_opens() {
    let modes = [
        WalRecoveryMode::TolerateCorruptedTailRecords,
        WalRecoveryMode::PointInTime,
        WalRecoveryMode::SkipAnyCorruptedRecords,
    ];
    for seed in 0..4u64 {
        let fs = MemFs::new();
        let o = tiny_options(Some(fs.clone()));
        let mut rng = StdRng::seed_from_u64(seed);
        {
            let db = Db::open("/db", o.clone()).unwrap();
            for i in 0..600 {
                let k = format!("k{:03}", rng.gen_range(0..150));
                let sync = i % 97 == 0;
                db.put_opt(k.as_bytes(), format!("v{i}").as_bytes(), &WriteOptions { sync, disable_wal: false })
                    .unwrap();
            }
            fs.crash(CrashMode::KeepRandomPrefix { seed });
            drop(db);
        }
        for mode in modes {
            // A copy of the crashed disk, and options that open it.
            let disk = || {
                let d = fs.crash_clone(CrashMode::DropUnsynced);
                let mut o = o.clone();
                o.wal_recovery_mode = mode;
                o.fs = Arc::new(d.clone());
                (d, o)
            };
            let (clean, co) = disk();
            let ops_before = clean.op_count();
            let db = Db::open("/db", co).unwrap_or_else(|e| panic!("seed {seed} {mode:?}: first recovery: {e}"));
            let ops = clean.op_count() - ops_before;
            let expected = scan(&db, ReadOptions::default());
            drop(db);
            assert!(ops > 5, "seed {seed} {mode:?}: recovery took {ops} operations");
            for k in 1..=ops {
                let (d, o) = disk();
                d.inject(FaultRule::any_op().nth(k).persistent());
                drop(Db::open("/db", o.clone()));
                d.crash(CrashMode::DropUnsynced);
                d.clear_faults();
                let ctx = format!("seed {seed} {mode:?}: crash at operation {k} of the recovery's {ops}");
                let db = Db::open("/db", o).unwrap_or_else(|e| panic!("{ctx}: the next recovery fails: {e}"));
                assert_eq!(scan(&db, ReadOptions::default()), expected, "{ctx}");
            }
        }
    }
}

/// A flush that writes no table (its put and single deletion cancel out)
/// still moves the log number onto the WAL the switch started under a name
/// no directory sync had made durable; a power loss right after must not
/// leave the MANIFEST naming a WAL that is gone.
#[test]
fn a_flush_that_writes_no_table_leaves_a_log_number_a_power_loss_keeps() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    {
        let db = Db::open("/db", o.clone()).unwrap();
        db.put_opt(b"a", b"1", &WriteOptions { sync: true, disable_wal: false }).unwrap();
        db.flush(true).unwrap();
        db.put(b"k", b"v").unwrap();
        db.single_delete(b"k").unwrap();
        db.flush(true).unwrap();
        assert_eq!(db.get_property("ebb.num-files-at-level0").as_deref(), Some("1"), "the second flush wrote a table");
        fs.crash(CrashMode::DropUnsynced);
        drop(db);
    }
    let db = Db::open("/db", o).unwrap_or_else(|e| panic!("reopen after the power loss: {e}"));
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    assert_eq!(db.get(b"k").unwrap(), None);
}

#[test]
fn sequence_numbers_continue_after_recovery() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    {
        let db = Db::open("/db", o.clone()).unwrap();
        db.put(b"k", b"old").unwrap();
        db.close().unwrap();
    }
    {
        let db = Db::open("/db", o.clone()).unwrap();
        db.put(b"k", b"new").unwrap();
        db.flush(true).unwrap();
        db.close().unwrap();
    }
    let db = Db::open("/db", o).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"new".to_vec()));
}
