//! Secondary instances (`Db::open_as_secondary`, RocksDB's
//! `OpenAsSecondary`): a second reader of a live database that catches up
//! on request and never shows a state the primary did not have.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{family_contents, matching_prefix, tiny_options, Op};
use ebb::fs::{FaultOp, FileSystem, MemFs};
use ebb::{Db, Error, Options};

const DB: &str = "/db";

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn create(o: &Options) -> Db {
    let db = Db::open(DB, o.clone()).unwrap();
    db.create_column_family("other", o).unwrap();
    db
}

#[test]
fn a_secondary_reads_the_primary_and_catches_up_on_request() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    let primary = create(&o);
    let other = primary.cf_handle("other").unwrap();
    for i in 0..300 {
        primary.put(&key(i), b"one").unwrap();
        primary.put_cf(&other, &key(i), b"o").unwrap();
    }
    primary.flush(true).unwrap();
    primary.put(&key(1000), b"in the WAL").unwrap();
    // No compaction of the primary's may create files while the count
    // below is taken.
    primary.wait_for_compact().unwrap();
    let primary_files = fs.list_dir(Path::new(DB)).unwrap();
    let creates = fs.op_count_of(FaultOp::Create);

    let secondary = Db::open_as_secondary(DB, "/secondary", o.clone()).unwrap();
    assert_eq!(family_contents(&secondary), family_contents(&primary));
    assert_eq!(fs.op_count_of(FaultOp::Create), creates + 1, "only the secondary's own LOG");
    assert!(fs.exists(Path::new("/secondary/LOG")));
    assert_eq!(fs.list_dir(Path::new(DB)).unwrap(), primary_files);

    for i in 0..300 {
        primary.put(&key(i), b"two").unwrap();
    }
    primary.delete_cf(&other, &key(3)).unwrap();
    primary.compact_range(None, None).unwrap();
    primary.put(&key(2000), b"newest").unwrap();
    // Until it catches up, the secondary keeps its view.
    assert_eq!(secondary.get(&key(5)).unwrap(), Some(b"one".to_vec()));
    secondary.try_catch_up_with_primary().unwrap();
    assert_eq!(family_contents(&secondary), family_contents(&primary));
    assert_eq!(secondary.get(&key(2000)).unwrap(), Some(b"newest".to_vec()));

    // The primary closes and reopens (a new MANIFEST, its WALs flushed).
    drop(other);
    drop(primary);
    let primary = Db::open_cf(DB, o.clone(), &[("other", o.clone())]).unwrap();
    primary.put(&key(7), b"three").unwrap();
    secondary.try_catch_up_with_primary().unwrap();
    assert_eq!(family_contents(&secondary), family_contents(&primary));

    let e = secondary.put(b"k", b"v").unwrap_err();
    assert!(matches!(e, Error::NotSupported(_)), "{e}");
    let e = primary.try_catch_up_with_primary().unwrap_err();
    assert!(matches!(&e, Error::NotSupported(m) if m.contains("not open as a secondary")), "{e}");
}

#[test]
fn under_load_every_catch_up_shows_a_state_the_primary_had() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    // Flushes and compactions every few hundred writes, not every few.
    o.write_buffer_size = 64 << 10;
    o.target_file_size_base = 64 << 10;
    o.max_bytes_for_level_base = 256 << 10;
    let primary = Arc::new(create(&o));
    let secondary = Db::open_as_secondary(DB, "/secondary", o.clone()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // How many operations the primary's writer has done.
    let written = Arc::new(common::sync::Watched::new(0usize));
    let writer = {
        let (db, stop, written) = (Arc::clone(&primary), Arc::clone(&stop), Arc::clone(&written));
        std::thread::spawn(move || {
            let cfs = [db.cf_handle("default").unwrap(), db.cf_handle("other").unwrap()];
            let mut ops: Vec<Op> = Vec::new();
            let mut rng = 0x2545f4914f6cdd1du64;
            let mut i = 0usize;
            while !stop.load(Ordering::Acquire) || i < 3000 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let cf = (rng % 2) as usize;
                let k = key((rng >> 8) as usize % 300);
                if rng.is_multiple_of(6) {
                    db.delete_cf(&cfs[cf], &k).unwrap();
                    ops.push((cf, k, None));
                } else {
                    let v = format!("{i}").into_bytes();
                    db.put_cf(&cfs[cf], &k, &v).unwrap();
                    ops.push((cf, k, Some(v)));
                }
                i += 1;
                written.update(|n| *n = i);
            }
            ops
        })
    };
    let mut views = Vec::new();
    let mut caught = 0;
    for _ in 0..40 {
        // A catch-up may fail while the primary deletes or renames files
        // under it (after its retries); the view then stays as it was,
        // which the prefix check below covers too.
        if secondary.try_catch_up_with_primary().is_ok() {
            caught += 1;
        }
        let contents = family_contents(&secondary);
        views.push(vec![contents["default"].clone(), contents["other"].clone()]);
        // The next catch-up twenty operations of the primary later.
        let at = written.with(|n| *n) + 20;
        written.wait_until("the primary's writer to go on", |n| *n >= at);
    }
    stop.store(true, Ordering::Release);
    let ops = writer.join().unwrap();
    assert!(caught >= 10, "only {caught} of 40 catch-ups succeeded");
    let mut last = 0;
    for (n, view) in views.iter().enumerate() {
        let point: usize =
            matching_prefix(&ops, 2, view).unwrap_or_else(|| panic!("view {n} holds a state the primary never had"));
        assert!(point >= last, "view {n} went back in time: {point} < {last}");
        last = point;
    }
    // Quiet now: one more catch-up reaches the end.
    secondary.try_catch_up_with_primary().unwrap();
    assert_eq!(family_contents(&secondary), family_contents(&primary));
}

#[test]
fn a_secondary_whose_primary_vanished_says_so_and_keeps_its_view() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    let primary = create(&o);
    for i in 0..200 {
        primary.put(&key(i), b"v").unwrap();
    }
    primary.flush(true).unwrap();
    let secondary = Db::open_as_secondary(DB, "/secondary", o.clone()).unwrap();
    secondary.try_catch_up_with_primary().unwrap();
    let view = family_contents(&secondary);
    drop(primary);
    Db::destroy(DB, &o).unwrap();
    let e = secondary.try_catch_up_with_primary().unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("is gone")), "{e}");
    assert_eq!(family_contents(&secondary), view);
    let e = Db::open_as_secondary(DB, "/secondary2", o).err().expect("no primary");
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("CURRENT")), "{e}");
}

/// A secondary's own directory (its info log's) given as the primary's is
/// refused: its log would rotate and prune the primary's `LOG` files, and a
/// secondary writes nothing in the primary's directory.
#[test]
fn a_secondary_whose_own_directory_is_the_primarys_is_refused() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    let primary = create(&o);
    primary.put(&key(1), b"v").unwrap();
    let before = fs.list_dir(Path::new(DB)).unwrap();
    for own in [DB, "/db/", "/db/."] {
        let e = Db::open_as_secondary(DB, own, o.clone()).err().expect("refused");
        assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("must not be the primary's")), "{own}: {e}");
    }
    assert_eq!(fs.list_dir(Path::new(DB)).unwrap(), before);
}
