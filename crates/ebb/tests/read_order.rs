//! A point read takes its super version before its sequence (db/read.rs,
//! RocksDB's `GetImpl`), with the `read_between_its_two_steps` point
//! (`--features failpoints`) between the two. A put and a flush that drop
//! the key's older version in between must not make the key read as
//! missing: with the sequence taken first, the read looked for the older
//! version in a super version that had dropped it, and found nothing.
#![cfg(feature = "failpoints")]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::tiny_options;
use ebb::fs::MemFs;
use ebb::Db;

const POINT: &str = "read_between_its_two_steps";

/// Runs `read` with one put of `k` and a flush between its two steps.
fn with_a_flush_between(db: &Arc<Db>, value: &'static [u8], read: impl FnOnce()) {
    let fired = Arc::new(AtomicBool::new(false));
    let (d, f) = (Arc::clone(db), Arc::clone(&fired));
    fail::cfg_callback(POINT, move || {
        if !f.swap(true, Ordering::SeqCst) {
            d.put(b"k", value).unwrap();
            d.flush(true).unwrap();
        }
    })
    .unwrap();
    read();
    fail::remove(POINT);
    assert!(fired.load(Ordering::SeqCst), "the read never reached {POINT}");
}

#[test]
fn a_put_and_flush_between_a_reads_two_steps_do_not_lose_the_key() {
    let fs = MemFs::new();
    let db = Arc::new(Db::open("/db", tiny_options(Some(fs.clone()))).unwrap());
    db.put(b"k", b"v1").unwrap();
    let mut got = None;
    with_a_flush_between(&db, b"v2", || got = Some(db.get(b"k").unwrap()));
    let got = got.unwrap();
    assert!(got.as_deref() == Some(b"v1") || got.as_deref() == Some(b"v2"), "get read {got:?}");
    let mut got = Vec::new();
    with_a_flush_between(&db, b"v3", || got = db.multi_get(&[&b"k"[..]], &Default::default()));
    let got = got.pop().unwrap().unwrap();
    assert!(got.as_deref() == Some(b"v2") || got.as_deref() == Some(b"v3"), "multi_get read {got:?}");
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v3"[..]));
}
