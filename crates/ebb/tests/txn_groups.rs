//! Two-phase commit steps in write groups: prepares, commits, rollbacks and
//! plain writes queued behind one leader are written as one WAL record
//! (RocksDB groups them too), and that record applies the plain and
//! committed updates, not the prepared ones; after a power loss the
//! prepared transactions are listed and commit whole. The fail points
//! (`--features failpoints`) hold the first leader at its WAL append until
//! the others are queued behind it, so the group forms every run.
#![cfg(feature = "failpoints")]

mod common;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ebb::fs::{CrashMode, MemFs};
use ebb::{TransactionDb, TransactionDbOptions, TransactionOptions, WriteOptions};
use parking_lot::{Condvar, Mutex};

const DB: &str = "/db";
const SYNC: WriteOptions = WriteOptions { sync: true, disable_wal: false };

fn open(fs: &MemFs) -> TransactionDb {
    TransactionDb::open(DB, common::tiny_options(Some(fs.clone())), TransactionDbOptions::default()).unwrap()
}

/// A transaction named `name` writing `key`, prepared.
fn prepared<'a>(db: &'a TransactionDb, name: &[u8], key: &[u8]) -> ebb::Transaction<'a> {
    let mut t = db.begin_transaction(&SYNC, &TransactionOptions::default());
    t.set_name(name).unwrap();
    t.put(key, name).unwrap();
    t.prepare().unwrap();
    t
}

/// Writers queued behind the leader so far, and its wake-up.
#[derive(Default)]
struct Queued {
    n: Mutex<u64>,
    cv: Condvar,
}

#[test]
fn prepares_commits_and_rollbacks_share_a_group_record_and_recover_whole() {
    let fs = MemFs::new();
    let db = open(&fs);
    let t0 = prepared(&db, b"t0", b"k0");
    let t3 = prepared(&db, b"t3", b"k3");
    let queued = Arc::new(Queued::default());
    let appends = Arc::new(AtomicU64::new(0));
    const FOLLOWERS: u64 = 5;
    {
        let q = Arc::clone(&queued);
        fail::cfg_callback("write_queued_behind", move || {
            *q.n.lock() += 1;
            q.cv.notify_all();
        })
        .unwrap();
        let (q, a) = (Arc::clone(&queued), Arc::clone(&appends));
        fail::cfg_callback("wal_append", move || {
            a.fetch_add(1, Ordering::SeqCst);
            if std::thread::current().name() == Some("leader") {
                // Held until every follower is queued (bounded: a follower
                // that never comes fails the group count below).
                let mut n = q.n.lock();
                let deadline = std::time::Instant::now() + Duration::from_secs(30);
                while *n < FOLLOWERS && std::time::Instant::now() < deadline {
                    q.cv.wait_until(&mut n, deadline);
                }
            }
        })
        .unwrap();
    }
    let db_ref = &db;
    std::thread::scope(|s| {
        let db = db_ref;
        std::thread::Builder::new()
            .name("leader".into())
            .spawn_scoped(s, || db.db().put_opt(b"lead", b"L", &SYNC).unwrap())
            .unwrap();
        // Each follower starts once the leader holds the queue.
        let appends = &appends;
        let wait_for_leader = move || {
            while appends.load(Ordering::SeqCst) == 0 {
                std::thread::yield_now();
            }
        };
        s.spawn(move || {
            wait_for_leader();
            let _t1 = prepared(db, b"t1", b"k1");
        });
        s.spawn(move || {
            wait_for_leader();
            let _t2 = prepared(db, b"t2", b"k2");
        });
        s.spawn(move || {
            wait_for_leader();
            db.db().put_opt(b"plain", b"P", &SYNC).unwrap();
        });
        let mut t0 = t0;
        s.spawn(move || {
            wait_for_leader();
            t0.commit().unwrap();
        });
        let mut t3 = t3;
        s.spawn(move || {
            wait_for_leader();
            t3.rollback().unwrap();
        });
    });
    fail::remove("wal_append");
    fail::remove("write_queued_behind");
    assert_eq!(*queued.n.lock(), FOLLOWERS);
    assert_eq!(appends.load(Ordering::SeqCst), 2, "the leader's record, then one record for the five followers");
    let check = |db: &TransactionDb, ctx: &str| {
        let names: BTreeSet<_> = db.prepared_transaction_names().into_iter().collect();
        assert_eq!(names, BTreeSet::from([b"t1".to_vec(), b"t2".to_vec()]), "{ctx}");
        for (k, v) in [(&b"lead"[..], Some(&b"L"[..])), (b"plain", Some(b"P")), (b"k0", Some(b"t0"))] {
            assert_eq!(db.get(k).unwrap().as_deref(), v, "{ctx}: {k:?}");
        }
        for k in [&b"k1"[..], b"k2", b"k3"] {
            assert_eq!(db.get(k).unwrap(), None, "{ctx}: {k:?} is not committed");
        }
    };
    check(&db, "before the crash");
    // The sequence numbers the group took: the plain write's and the
    // commit's updates only, one each, after the leader's.
    let before = db.db().snapshot().sequence();
    let crashed = fs.crash_clone(CrashMode::DropUnsynced);
    drop(db);
    let db = open(&crashed);
    check(&db, "after a power loss");
    assert_eq!(db.db().snapshot().sequence(), before, "recovery applies what the write applied");
    for mut t in db.get_all_prepared_transactions() {
        if t.name() == Some(&b"t1"[..]) {
            t.commit().unwrap();
        } else {
            t.rollback().unwrap();
        }
    }
    drop(db);
    let db = open(&crashed);
    assert!(db.prepared_transaction_names().is_empty());
    assert_eq!(db.get(b"k1").unwrap().as_deref(), Some(&b"t1"[..]));
    assert_eq!(db.get(b"k2").unwrap(), None);
}
