//! Snapshots by lifetime: read options borrow their snapshot, so a read
//! through a dropped snapshot does not compile (the `compile_fail` example on
//! `ReadOptions`); while a snapshot lives, flushes and compactions keep what
//! it sees; a snapshot of another database is refused.

mod common;

use common::tiny_options;
use ebb::fs::MemFs;
use ebb::{Db, Error, ReadOptions};

#[test]
fn a_snapshot_sees_its_values_through_flushes_and_compactions() {
    let fs = MemFs::new();
    let db = Db::open("/db", tiny_options(Some(fs))).unwrap();
    db.put(b"k", b"v1").unwrap();
    db.put(b"gone", b"here").unwrap();
    let snapshot = db.snapshot();
    let ro = ReadOptions { snapshot: Some(&snapshot), ..ReadOptions::default() };
    db.put(b"k", b"v2").unwrap();
    db.delete(b"gone").unwrap();
    for round in 0..3 {
        db.flush(true).unwrap();
        db.compact_range(None, None).unwrap();
        assert_eq!(db.get_opt(b"k", &ro).unwrap(), Some(b"v1".to_vec()), "round {round}");
        assert_eq!(db.get_opt(b"gone", &ro).unwrap(), Some(b"here".to_vec()), "round {round}");
        let seen: Vec<_> = db.iterator(ro.clone(), ebb::IteratorMode::Start).map(|e| e.unwrap()).collect();
        assert_eq!(seen, [(b"gone".to_vec(), b"here".to_vec()), (b"k".to_vec(), b"v1".to_vec())]);
        assert_eq!(db.multi_get(&[b"k"], &ro)[0].as_ref().unwrap(), &Some(b"v1".to_vec()));
    }
    assert_eq!(db.get(b"k").unwrap(), Some(b"v2".to_vec()));
    assert_eq!(db.get(b"gone").unwrap(), None);
    // An iterator keeps its view after the snapshot it was made with is gone.
    let mut it = db.iter(snapshot.read_options());
    drop(ro);
    drop(snapshot);
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    it.seek(b"k");
    assert!(it.valid());
    assert_eq!(it.value(), b"v1");
}

#[test]
fn a_snapshot_of_another_database_is_refused() {
    let a = Db::open("/a", tiny_options(Some(MemFs::new()))).unwrap();
    let b = Db::open("/b", tiny_options(Some(MemFs::new()))).unwrap();
    a.put(b"k", b"a").unwrap();
    b.put(b"k", b"b").unwrap();
    let snapshot = a.snapshot();
    let ro = snapshot.read_options();
    let e = b.get_opt(b"k", &ro).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("another database"), "{e:?}");
    assert!(b.multi_get(&[b"k"], &ro)[0].is_err());
    let it = b.iter(ro.clone());
    assert!(!it.valid() && it.status().is_err());
    assert_eq!(a.get_opt(b"k", &ro).unwrap(), Some(b"a".to_vec()));
}
