//! A memtable switch syncs nothing; WALs are sealed when a write needs them
//! durable (db/wal_seal.rs). The promises, each checked by a power loss:
//! - no sync in the write path at a switch;
//! - a synced write, `flush_wal(true)` and `close` make every earlier write
//!   durable, also those in WALs closed by switches;
//! - a power loss that tears a closed, unsealed WAL opens, to a prefix of the
//!   writes, and says what it dropped;
//! - damage before a WAL with its final name (one that follows a synced WAL)
//!   is still refused.

mod common;

use std::path::Path;

use common::{tiny_options, SYNCED};
use ebb::fs::{CrashMode, FaultOp, MemFs};
use ebb::{Db, Options, WriteOptions};

const DB: &str = "/db";

/// Options whose 8 KiB memtables switch every few dozen writes, with room
/// for many of them so the test decides when flushes run.
fn options(fs: &MemFs) -> Options {
    let mut o = tiny_options(Some(fs.clone()));
    o.max_write_buffer_number = 64;
    o.level0_slowdown_writes_trigger = 1000;
    o.level0_stop_writes_trigger = 1000;
    o
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    format!("value {i} ").repeat(20).into_bytes()
}

/// Writes keys `from..to` without sync.
fn write(db: &Db, from: usize, to: usize) {
    for i in from..to {
        db.put_opt(&key(i), &value(i), &WriteOptions::default()).unwrap();
    }
}

/// How many of keys `0..n` `db` holds, checking that they are a prefix
/// (keys were written in order, one per write) with the right values.
fn prefix_len(db: &Db, n: usize) -> usize {
    let mut found = 0;
    for i in 0..n {
        if let Some(v) = db.get(&key(i)).unwrap() {
            assert_eq!(v, value(i), "key {i} has a wrong value");
            assert_eq!(found, i, "key {i} survived but key {found} did not: not a prefix");
            found += 1;
        }
    }
    found
}

fn wal_names(fs: &MemFs) -> Vec<String> {
    use ebb::fs::FileSystem;
    fs.list_dir(Path::new(DB)).unwrap().into_iter().filter(|n| n.contains(".log")).collect()
}

#[test]
fn a_memtable_switch_syncs_nothing() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    // No flush runs, so every sync counted would be the write path's.
    db.pause_background_work();
    let (syncs, dir_syncs) = (fs.op_count_of(FaultOp::Sync), fs.op_count_of(FaultOp::SyncDir));
    write(&db, 0, 600);
    let wals = wal_names(&fs);
    assert!(wals.len() >= 5, "the writes should have switched memtables several times: {wals:?}");
    assert!(wals.iter().any(|n| n.ends_with(".log.pending")), "switches start pending WALs: {wals:?}");
    assert_eq!(fs.op_count_of(FaultOp::Sync) - syncs, 0, "a switch synced a file");
    assert_eq!(fs.op_count_of(FaultOp::SyncDir) - dir_syncs, 0, "a switch synced the directory");
    db.continue_background_work();
}

#[test]
fn a_synced_write_makes_every_earlier_write_durable() {
    for mode in [CrashMode::DropUnsynced, CrashMode::GarbageTail { seed: 7 }, CrashMode::ZeroTail] {
        let fs = MemFs::new();
        let db = Db::open(DB, options(&fs)).unwrap();
        db.pause_background_work();
        write(&db, 0, 500);
        db.put_opt(&key(500), &value(500), &SYNCED).unwrap();
        write(&db, 501, 520);
        fs.crash(mode);
        drop(db);
        let db = Db::open(DB, options(&fs)).unwrap();
        let found = prefix_len(&db, 520);
        assert!(found >= 501, "{mode:?}: the synced write and every write before it survive, found {found}");
    }
}

#[test]
fn flush_wal_with_sync_makes_every_earlier_write_durable() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    db.pause_background_work();
    write(&db, 0, 500);
    db.flush_wal(true).unwrap();
    fs.crash(CrashMode::GarbageTail { seed: 3 });
    drop(db);
    let db = Db::open(DB, options(&fs)).unwrap();
    assert_eq!(prefix_len(&db, 500), 500);
}

#[test]
fn close_makes_every_write_durable() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    db.pause_background_work();
    write(&db, 0, 500);
    db.close().unwrap();
    fs.crash(CrashMode::GarbageTail { seed: 5 });
    let db = Db::open(DB, options(&fs)).unwrap();
    assert_eq!(prefix_len(&db, 500), 500);
}

/// A power loss keeps a random part of every unsynced tail: closed WALs are
/// torn while later (pending) WALs keep writes. The open succeeds, to a
/// prefix, and reports the pending WALs' writes it dropped.
///
/// Two schedules: with background work paused, where the test syncs the
/// directory itself (as a journaling filesystem's commit would) so every
/// pending WAL's name is durable and the outcome depends only on the seed;
/// and with flushes running, whose timing varies, checked only for a prefix.
#[test]
fn a_power_loss_tearing_closed_wals_opens_to_a_prefix() {
    use ebb::fs::FileSystem;
    let mut dropped_seen = false;
    for paused in [true, false] {
        for seed in 0..40 {
            for mode in [CrashMode::KeepRandomPrefix { seed }, CrashMode::GarbageTail { seed }] {
                let fs = MemFs::new();
                let db = Db::open(DB, options(&fs)).unwrap();
                if paused {
                    db.pause_background_work();
                }
                write(&db, 0, 400);
                if paused {
                    fs.sync_dir(Path::new(DB)).unwrap();
                }
                // What the disk holds at this instant; the process, whose
                // flushes may still run, never touches the copy.
                let disk = fs.crash_clone(mode);
                drop(db);
                let db = Db::open(DB, options(&disk))
                    .unwrap_or_else(|e| panic!("{mode:?}, paused {paused}: open after a power loss: {e}"));
                prefix_len(&db, 400);
                let report = db.recovery_report();
                if paused {
                    dropped_seen |= report.wal_damage.iter().any(|w| w.later_records_dropped > 0);
                }
                for w in &report.wal_damage {
                    assert!(w.stopped_replay, "{mode:?}: damage in {} did not stop the replay", w.damage.file);
                }
            }
        }
    }
    assert!(dropped_seen, "some power loss should have torn a closed WAL before a pending WAL holding writes");
}

/// After a synced write sealed the closed WALs, the current WAL has its final
/// name: damage in an earlier WAL is damage to synced data, and refused.
#[test]
fn damage_before_a_sealed_wal_holding_writes_is_refused() {
    use ebb::fs::FileSystem;
    let fs = MemFs::new();
    let mut o = options(&fs);
    o.max_write_buffer_number = 64;
    let db = Db::open(DB, o.clone()).unwrap();
    db.pause_background_work();
    write(&db, 0, 300);
    db.put_opt(&key(300), &value(300), &SYNCED).unwrap();
    db.close().unwrap();
    let mut wals = wal_names(&fs);
    wals.sort();
    assert!(wals.iter().all(|n| n.ends_with(".log")), "close seals every WAL: {wals:?}");
    // Damage the middle of the oldest WAL holding writes.
    let oldest = Path::new(DB).join(&wals[0]);
    let mut bytes = fs.file_bytes(&oldest).unwrap();
    assert!(bytes.len() > 100, "{} holds writes", wals[0]);
    let at = bytes.len() / 2;
    bytes[at] ^= 0x55;
    fs.set_file_bytes(&oldest, &bytes).unwrap();
    let err = Db::open(DB, o.clone()).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("later WAL"), "{err}");
    assert!(fs.exists(&oldest), "nothing is deleted on a refused open");
}

/// A power loss can cut a closed, unsealed WAL exactly at a record boundary,
/// which reads as a clean end, while the pending WAL after it kept writes.
/// The end mark a switch appends shows the cut: replay stops there instead of
/// leaving a hole, and the dropped writes are reported.
#[test]
fn a_closed_wal_cut_at_a_record_boundary_stops_the_replay() {
    use common::{files_of, fs_holding, log_records};
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    db.pause_background_work();
    write(&db, 0, 300);
    // What the page cache holds, as a power loss might leave it on disk.
    let mut files = files_of(&fs, DB);
    drop(db);
    files.sort();
    let wals: Vec<String> = files.iter().map(|(n, _)| n.clone()).filter(|n| n.contains(".log")).collect();
    assert!(wals.len() >= 3 && wals[1].ends_with(".log.pending"), "{wals:?}");
    // The oldest WAL loses its last few records (the end mark among them),
    // cut at a record boundary.
    let oldest = &mut files.iter_mut().find(|(n, _)| *n == wals[0]).unwrap().1;
    let records = log_records(oldest);
    assert!(records.len() > 10, "{} records", records.len());
    let cut = records[records.len() - 4].0;
    oldest.truncate(cut);
    let kept = records.len() - 4;
    let fs = fs_holding(DB, &files);
    let db = Db::open(DB, options(&fs)).unwrap();
    assert_eq!(prefix_len(&db, 300), kept, "the writes before the cut, and none after");
    let report = db.recovery_report();
    let w = report.wal_damage.first().expect("the cut is reported");
    assert!(w.damage.reason.contains("end mark"), "{}", w.damage.reason);
    assert!(w.later_records_dropped > 0, "{report}");
    drop(db);
    // AbsoluteConsistency refuses it.
    let fs = fs_holding(DB, &files);
    let mut o = options(&fs);
    o.wal_recovery_mode = ebb::WalRecoveryMode::AbsoluteConsistency;
    let err = Db::open(DB, o).map(|_| ()).unwrap_err();
    assert!(err.is_corruption() && err.to_string().contains("end mark"), "{err}");
}

/// Holds the first WAL sync after it is armed, until opened.
#[derive(Default)]
struct SyncGate {
    armed: std::sync::atomic::AtomicBool,
    held: std::sync::atomic::AtomicBool,
    open: parking_lot::Mutex<bool>,
    opened: parking_lot::Condvar,
}

impl common::hooked_fs::FsHooks for SyncGate {
    fn before_sync(&self, path: &Path) {
        use std::sync::atomic::Ordering::SeqCst;
        if path.to_string_lossy().contains(".log") && self.armed.swap(false, SeqCst) {
            self.held.store(true, SeqCst);
            let mut open = self.open.lock();
            while !*open {
                self.opened.wait(&mut open);
            }
        }
    }
}

/// A sealer's rename of a pending WAL fails while a flush makes that WAL
/// obsolete: the failure still reaches the synced write that sealed. (The
/// sealer used to take a pending WAL missing after a failed rename for one
/// deleted as obsolete meanwhile, and drop the error: the deletion could run
/// between the rename and the check. Obsolete WALs are now deleted with
/// sealers held out.)
#[test]
fn a_failed_rename_reaches_the_sealer_while_its_wal_becomes_obsolete() {
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::Arc;
    use std::time::{Duration, Instant};
    let fs = MemFs::new();
    let gate = Arc::new(SyncGate::default());
    let mut o = options(&fs);
    o.fs = Arc::new(common::hooked_fs::HookedFs::new(fs.clone(), gate.clone()));
    let db = Arc::new(Db::open(DB, o.clone()).unwrap());
    db.pause_background_work();
    write(&db, 0, 300);
    assert!(wal_names(&fs).iter().filter(|n| n.ends_with(".log.pending")).count() >= 3);
    gate.armed.store(true, SeqCst);
    let sealer = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.put_opt(&key(300), &value(300), &SYNCED))
    };
    // The sealer syncs the oldest closed WAL; it renames the next one after.
    let start = Instant::now();
    while !gate.held.load(SeqCst) {
        assert!(start.elapsed() < Duration::from_secs(60), "the synced write never synced a closed WAL");
        std::thread::sleep(Duration::from_millis(1));
    }
    fs.inject(ebb::fs::FaultRule::new(FaultOp::Rename).path_contains(".log.pending"));
    // A flush makes every closed WAL obsolete, and deletes them unless held out.
    db.continue_background_work();
    let flusher = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || db.flush(true))
    };
    let start = Instant::now();
    while !flusher.is_finished() && start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(5));
    }
    *gate.open.lock() = true;
    gate.opened.notify_all();
    let sealed = sealer.join().unwrap();
    let _ = flusher.join().unwrap();
    assert_eq!(fs.faults_injected(), 1, "the rename fault fired");
    assert!(sealed.is_err(), "the failed rename reached no caller");
    // Nothing acknowledged is lost: reopened without faults, every write is there.
    drop(db);
    fs.clear_faults();
    let db = Db::open(DB, options(&fs)).unwrap();
    assert!(prefix_len(&db, 301) >= 300);
}

/// A family created while a closed WAL is unsealed starts at that WAL, not at
/// the one being written (db/wal_seal.rs, contract 5). An ingestion gives it
/// tables before any flush seals; a power loss tearing the closed WAL then
/// stopped point-in-time recovery there, and the family, past the stop with
/// tables, was taken for one holding data logged after the damage: the open
/// was refused.
#[test]
fn a_family_created_beside_an_unsealed_wal_and_ingested_into_opens_after_a_power_loss() {
    for seed in 0..4 {
        let fs = MemFs::new();
        let o = options(&fs);
        let db = Db::open(DB, o.clone()).unwrap();
        let a = db.create_column_family("a", &o).unwrap();
        db.flush_wal(true).unwrap();
        // No flush runs, so none seals the WALs the writes below close.
        db.pause_background_work();
        for i in 0..200 {
            db.put_cf(&a, &key(i), &value(i)).unwrap();
        }
        assert!(wal_names(&fs).iter().any(|n| n.ends_with(".pending")), "no switch: {:?}", wal_names(&fs));
        let c = db.create_column_family("c", &o).unwrap();
        let mut w = ebb::SstFileWriter::create(&o);
        w.open("/ingest.sst").unwrap();
        w.put(b"ingested", b"value").unwrap();
        let path = w.finish().unwrap().file_path;
        db.ingest_external_file_cf(&c, &[path], &Default::default()).unwrap();

        let crashed = fs.crash_clone(CrashMode::GarbageTail { seed });
        let o = options(&crashed);
        let db = Db::open_cf(DB, o.clone(), &[("a", o.clone()), ("c", o.clone())])
            .unwrap_or_else(|e| panic!("seed {seed}: the database did not open after the power loss: {e}"));
        let c = db.cf_handle("c").unwrap();
        assert_eq!(db.get_cf(&c, b"ingested").unwrap().as_deref(), Some(&b"value"[..]));
        let a = db.cf_handle("a").unwrap();
        for i in 0..200 {
            if let Some(v) = db.get_cf(&a, &key(i)).unwrap() {
                assert_eq!(v, value(i), "seed {seed}: key {i} has a wrong value");
            }
        }
    }
}
