//! Two-phase commit under power loss and I/O errors, on the in-memory
//! filesystem: a prepare acknowledged with `sync` survives a power loss
//! however many WALs were switched and deleted after it; a prepare or a
//! commit that fails on an I/O error leaves the transaction whole after a
//! reopen (prepared or not, committed or still prepared, never half), and
//! its data never visible unless committed.

mod common;

use ebb::fs::{CrashMode, FaultOp, FaultRule, MemFs};
use ebb::{Options, TransactionDb, TransactionDbOptions, TransactionOptions, WriteOptions};

const DB: &str = "/db";

fn options(fs: &MemFs) -> Options {
    let mut o = common::tiny_options(Some(fs.clone()));
    o.write_buffer_size = 16 * 1024;
    o
}

fn open(fs: &MemFs) -> TransactionDb {
    TransactionDb::open(DB, options(fs), TransactionDbOptions::default()).unwrap()
}

const SYNC: WriteOptions = WriteOptions { sync: true, disable_wal: false };

/// Prepares transaction `name` writing `keys`.
fn prepare<'a>(db: &'a TransactionDb, name: &[u8], keys: &[&[u8]]) -> ebb::Transaction<'a> {
    let mut t = db.begin_transaction(&SYNC, &TransactionOptions::default());
    t.set_name(name).unwrap();
    for k in keys {
        t.put(k, b"prepared value").unwrap();
    }
    t.prepare().unwrap();
    t
}

/// Unsynced writes and flushes: memtables and WALs switch, and the WALs
/// before are deleted.
fn churn(db: &TransactionDb, rounds: usize) {
    for round in 0..rounds {
        for i in 0..150 {
            db.db().put(format!("churn{round:02}-{i:03}").as_bytes(), &[b'c'; 120]).unwrap();
        }
        db.flush(true).unwrap();
    }
}

#[test]
fn a_synced_prepare_survives_power_loss_after_its_wal_is_gone() {
    for (i, mode) in [
        CrashMode::DropUnsynced,
        CrashMode::KeepRandomPrefix { seed: 1 },
        CrashMode::KeepRandomPrefix { seed: 2 },
        CrashMode::GarbageTail { seed: 3 },
    ]
    .into_iter()
    .enumerate()
    {
        let fs = MemFs::new();
        let db = open(&fs);
        let t = prepare(&db, b"durable", &[b"a", b"b"]);
        churn(&db, 4);
        let crashed = fs.crash_clone(mode);
        drop(t);
        drop(db);
        let db = open(&crashed);
        assert_eq!(db.prepared_transaction_names(), vec![b"durable".to_vec()], "crash {i}");
        assert_eq!(db.get(b"a").unwrap(), None, "crash {i}: prepared, not visible");
        let mut found = db.get_all_prepared_transactions();
        found[0].commit().unwrap();
        assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"prepared value"[..]), "crash {i}");
    }
}

#[test]
fn a_prepare_found_at_open_survives_power_loss_after_the_next_flushes() {
    let fs = MemFs::new();
    {
        let db = open(&fs);
        let _t = prepare(&db, b"twice", &[b"k"]);
    }
    // Recovery moved it into the WAL it started; flushes then delete the
    // WALs before, and the power goes.
    let db = open(&fs);
    churn(&db, 3);
    let crashed = fs.crash_clone(CrashMode::DropUnsynced);
    drop(db);
    let db = open(&crashed);
    assert_eq!(db.prepared_transaction_names(), vec![b"twice".to_vec()]);
}

/// The WAL operations a synced prepare or commit makes: its append, its sync.
const WAL_OPS: [FaultOp; 2] = [FaultOp::Append, FaultOp::Sync];

/// Runs `act` with the first WAL operation of kind `op` failing, then clears
/// the fault.
fn with_failing_wal_append(fs: &MemFs, op: FaultOp, act: impl FnOnce() -> ebb::Result<()>) -> ebb::Result<()> {
    fs.inject(FaultRule::new(op).path_contains(".log"));
    let r = act();
    fs.clear_faults();
    r
}

#[test]
fn a_prepare_that_fails_on_io_leaves_nothing_half_done() {
    for nth in WAL_OPS {
        let fs = MemFs::new();
        {
            let db = open(&fs);
            let mut t = db.begin_transaction(&SYNC, &TransactionOptions::default());
            t.set_name(b"fails").unwrap();
            t.put(b"a", b"1").unwrap();
            t.put(b"b", b"2").unwrap();
            let r = with_failing_wal_append(&fs, nth, || t.prepare());
            assert!(r.is_err(), "nth {nth:?}: the failed append reaches the caller");
            assert_eq!(db.get(b"a").unwrap(), None);
            // The database refuses writes now (sticky error): a reopen heals.
        }
        let db = open(&fs);
        let listed = db.prepared_transaction_names();
        assert!(listed.is_empty() || listed == vec![b"fails".to_vec()], "nth {nth:?}: {listed:?}");
        assert_eq!(db.get(b"a").unwrap(), None, "nth {nth:?}: never visible without a commit");
        assert_eq!(db.get(b"b").unwrap(), None);
        // Whatever is listed commits whole.
        for mut t in db.get_all_prepared_transactions() {
            t.commit().unwrap();
            assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
            assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
        }
    }
}

#[test]
fn a_commit_that_fails_on_io_is_committed_or_still_prepared_after_reopen() {
    for nth in WAL_OPS {
        let fs = MemFs::new();
        {
            let db = open(&fs);
            let mut t = prepare(&db, b"c", &[b"a", b"b"]);
            let r = with_failing_wal_append(&fs, nth, || t.commit());
            assert!(r.is_err(), "nth {nth:?}");
            assert_eq!(db.get(b"a").unwrap(), None, "nth {nth:?}: a failed commit applies nothing");
        }
        let db = open(&fs);
        let listed = db.prepared_transaction_names();
        let (a, b) = (db.get(b"a").unwrap(), db.get(b"b").unwrap());
        assert_eq!(a.is_some(), b.is_some(), "nth {nth:?}: half committed");
        assert!(
            (a.is_some() && listed.is_empty()) || (a.is_none() && listed == vec![b"c".to_vec()]),
            "nth {nth:?}: committed and still prepared, or lost: {listed:?} {a:?}"
        );
    }
}
