//! A flush's MANIFEST edit moves log numbers forward: the flushed family's,
//! and those of idle families whose empty memtables a WAL switch renumbered.
//! With several families a flush seals the closed WALs first
//! (db/wal_seal.rs, contract 4), but a switch may come between that seal and
//! the edit (the `flush_after_sealing_wals` point, `--features failpoints`).
//! The WAL that switch closes is not synced. If the edit then moved a family
//! holding tables past it, a power loss that tore it made point-in-time
//! recovery refuse to open ("holds tables with data logged after this WAL"),
//! although no table held any write of it (contract 5).
#![cfg(feature = "failpoints")]

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};

use common::tiny_options;
use ebb::fs::{CrashMode, FaultOp, FaultRule, FileSystem, MemFs};
use ebb::{Db, Options};

const DB: &str = "/db";
const POINT: &str = "flush_after_sealing_wals";

/// The fail point is global to the process: one test at a time sets it.
static POINT_USER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Removes the fail point when dropped, also when a test panics, so that a
/// failing test leaves nothing behind for the next one. The callbacks hold
/// the database weakly: removing the point never drops (and closes) a
/// database inside the fail point registry, where its background work
/// could wait on the same registry.
struct PointGuard;

impl Drop for PointGuard {
    fn drop(&mut self) {
        fail::remove(POINT);
    }
}

fn options(fs: &MemFs) -> Options {
    let mut o = tiny_options(Some(fs.clone()));
    o.max_write_buffer_number = 64;
    o.level0_slowdown_writes_trigger = 1000;
    o.level0_stop_writes_trigger = 1000;
    // One flush at a time: family a's flushes wait for default's.
    o.max_background_flushes = 1;
    o.disable_auto_compactions = true;
    o
}

/// The number of the newest WAL in `fs` (final or pending name).
fn newest_wal(fs: &MemFs) -> u64 {
    fs.list_dir(Path::new(DB))
        .unwrap()
        .iter()
        .filter(|n| n.contains(".log"))
        .filter_map(|n| n.split('.').next()?.parse().ok())
        .max()
        .unwrap()
}

fn value(i: usize) -> Vec<u8> {
    format!("value {i} ").repeat(20).into_bytes()
}

#[test]
fn a_switch_between_a_flushs_seal_and_its_edit_leaves_the_database_openable_after_a_power_loss() {
    let _one = POINT_USER.lock().unwrap_or_else(|e| e.into_inner());
    for seed in 0..4 {
        let fs = MemFs::new();
        let o = options(&fs);
        let db = Arc::new(Db::open(DB, o.clone()).unwrap());
        let a = db.create_column_family("a", &o).unwrap();
        let b = db.create_column_family("b", &o).unwrap();
        // b holds a table and, from now on, an empty memtable.
        db.put_cf(&b, b"kb", b"vb").unwrap();
        db.flush_cf(&b, true).unwrap();
        db.put(b"k0", b"v0").unwrap();
        db.flush_wal(true).unwrap();

        // Between default's seal and its edit: writes to a switch WALs. The
        // WAL current then is closed and never synced (its sync fails, so
        // a's own flush cannot seal it before the power loss either).
        let fired = Arc::new(AtomicBool::new(false));
        let (d, f, fs2, a2) = (Arc::downgrade(&db), Arc::clone(&fired), fs.clone(), a.clone());
        let point = PointGuard;
        fail::cfg_callback(POINT, move || {
            let Some(d) = Weak::upgrade(&d) else { return };
            if f.swap(true, Ordering::SeqCst) {
                return;
            }
            let current = newest_wal(&fs2);
            fs2.inject(FaultRule::new(FaultOp::Sync).path_contains(format!("{current:06}.log")).persistent());
            for i in 0..200 {
                d.put_cf(&a2, format!("a{i:04}").as_bytes(), &value(i)).unwrap();
            }
            assert!(newest_wal(&fs2) > current, "the writes to a switched no WAL");
        })
        .unwrap();
        // The injected sync failure is a background error once the sealer
        // or a's flush tries that WAL; whether that comes before default's
        // flush ends is a race, and the wait may report it.
        if let Err(e) = db.flush(true) {
            assert!(e.to_string().contains("fdatasync"), "seed {seed}: {e}");
        }
        drop(point);
        assert!(fired.load(Ordering::SeqCst), "the flush never reached {POINT}");

        let crashed = fs.crash_clone(CrashMode::GarbageTail { seed });
        let o = options(&crashed);
        let db = Db::open_cf(DB, o.clone(), &[("a", o.clone()), ("b", o.clone())])
            .unwrap_or_else(|e| panic!("seed {seed}: the database did not open after the power loss: {e}"));
        assert_eq!(db.get(b"k0").unwrap().as_deref(), Some(&b"v0"[..]));
        let b = db.cf_handle("b").unwrap();
        assert_eq!(db.get_cf(&b, b"kb").unwrap().as_deref(), Some(&b"vb"[..]));
        // a's writes were never synced: any of them may be gone, none wrong.
        let a = db.cf_handle("a").unwrap();
        for i in 0..200 {
            if let Some(v) = db.get_cf(&a, format!("a{i:04}").as_bytes()).unwrap() {
                assert_eq!(v, value(i), "seed {seed}: a{i:04} has a wrong value");
            }
        }
    }
}

/// A flush that began with one family makes no seal (contract 4 needs none
/// then). A family created while its table is written, and a switch that
/// closes the WAL holding the new family's writes, leave closed WALs
/// unsynced; the flush's edit must not move the first family past them.
/// The second family's own flush fails before sealing (its table cannot be
/// created), so only the first flush can seal.
#[test]
fn a_family_created_during_a_single_family_flush_gets_the_seal_the_edit_needs() {
    let _one = POINT_USER.lock().unwrap_or_else(|e| e.into_inner());
    for seed in 0..4 {
        let fs = MemFs::new();
        let o = options(&fs);
        let db = Arc::new(Db::open(DB, o.clone()).unwrap());
        db.put(b"k0", b"v0").unwrap();
        db.flush_wal(true).unwrap();
        db.put(b"k1", b"v1").unwrap();

        let fired = Arc::new(AtomicBool::new(false));
        let (d, f, fs2, o2) = (Arc::downgrade(&db), Arc::clone(&fired), fs.clone(), o.clone());
        let point = PointGuard;
        fail::cfg_callback(POINT, move || {
            let Some(d) = Weak::upgrade(&d) else { return };
            if f.swap(true, Ordering::SeqCst) {
                return;
            }
            let b = d.create_column_family("b", &o2).unwrap();
            for i in 0..10 {
                d.put_cf(&b, format!("b{i}").as_bytes(), &value(i)).unwrap();
            }
            fs2.inject(FaultRule::new(FaultOp::Create).path_contains(".sst").persistent());
            let before = newest_wal(&fs2);
            d.flush_cf(&b, false).unwrap();
            assert!(newest_wal(&fs2) > before, "b's flush switched no WAL");
        })
        .unwrap();
        // b's flush, which ran after it, failed: the wait may report that.
        if let Err(e) = db.flush(true) {
            assert!(e.to_string().contains(".sst"), "{e}");
        }
        drop(point);
        assert!(fired.load(Ordering::SeqCst), "the flush never reached {POINT}");

        let crashed = fs.crash_clone(CrashMode::GarbageTail { seed });
        let o = options(&crashed);
        let db = Db::open_cf(DB, o.clone(), &[("b", o.clone())])
            .unwrap_or_else(|e| panic!("seed {seed}: the database did not open after the power loss: {e}"));
        assert_eq!(db.get(b"k0").unwrap().as_deref(), Some(&b"v0"[..]));
        assert_eq!(db.get(b"k1").unwrap().as_deref(), Some(&b"v1"[..]));
        let b = db.cf_handle("b").unwrap();
        for i in 0..10 {
            if let Some(v) = db.get_cf(&b, format!("b{i}").as_bytes()).unwrap() {
                assert_eq!(v, value(i), "seed {seed}: b{i} has a wrong value");
            }
        }
    }
}
