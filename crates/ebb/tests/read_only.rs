//! Read-only instances (`Db::open_read_only`, RocksDB's `OpenForReadOnly`):
//! they read tables and replayed WALs, take no LOCK, write, create, rename
//! or delete no file, run no background work, and refuse every change with
//! `NotSupported`.

mod common;

use std::path::Path;

use common::{family_contents, tiny_options, Model};
use ebb::fs::{FaultOp, FileSystem, MemFs};
use ebb::{Checkpoint, Db, Error, Options, WriteBatch};

const DB: &str = "/db";

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Every file in `dir` with its bytes.
fn files(fs: &MemFs, dir: &str) -> Vec<(String, Vec<u8>)> {
    common::files_of(fs, dir)
}

/// The filesystem operations that change something, so far.
fn changes(fs: &MemFs) -> Vec<(FaultOp, u64)> {
    [FaultOp::CreateDir, FaultOp::Create, FaultOp::Append, FaultOp::Sync, FaultOp::SyncDir, FaultOp::Rename]
        .into_iter()
        .chain([FaultOp::Remove, FaultOp::Lock])
        .map(|op| (op, fs.op_count_of(op)))
        .collect()
}

/// A database with two families, tables at several levels and writes left
/// in its WAL; closed. Returns what it holds.
fn made(fs: &MemFs) -> (Options, std::collections::BTreeMap<String, Model>) {
    let o = tiny_options(Some(fs.clone()));
    let db = Db::open(DB, o.clone()).unwrap();
    let other = db.create_column_family("other", &o).unwrap();
    for i in 0..800 {
        db.put(&key(i), format!("v{i}").as_bytes()).unwrap();
        if i % 3 == 0 {
            db.put_cf(&other, &key(i), b"o").unwrap();
        }
    }
    db.wait_for_compact().unwrap();
    db.delete_range(&key(10), &key(20)).unwrap();
    db.delete(&key(30)).unwrap();
    db.put(&key(5000), b"only in the WAL").unwrap();
    db.put_cf(&other, b"wal", b"too").unwrap();
    let contents = family_contents(&db);
    drop(other);
    db.close().unwrap();
    (o, contents)
}

#[test]
fn a_read_only_instance_reads_tables_and_replayed_wals_and_changes_no_file() {
    let fs = MemFs::new();
    let (o, contents) = made(&fs);
    let before = files(&fs, DB);
    let ops = changes(&fs);

    let db = Db::open_read_only(DB, o.clone()).unwrap();
    assert_eq!(family_contents(&db), contents);
    let other = db.cf_handle("other").expect("families open without being listed");
    assert_eq!(db.get_cf(&other, b"wal").unwrap(), Some(b"too".to_vec()));
    assert_eq!(db.get(&key(5000)).unwrap(), Some(b"only in the WAL".to_vec()));
    assert_eq!(db.get(&key(15)).unwrap(), None);
    let snapshot = db.snapshot();
    assert_eq!(snapshot.get(&key(1)).unwrap(), Some(b"v1".to_vec()));
    drop(snapshot);
    let mut it = db.iter(Default::default());
    it.seek_to_last();
    assert_eq!(it.key(), key(5000).as_slice());
    drop(it);
    assert!(db.get_property("ebb.stats").is_some());
    db.wait_for_compact().unwrap();
    drop(other);
    db.close().unwrap();

    assert_eq!(changes(&fs), ops, "a read-only open changed the filesystem");
    assert_eq!(files(&fs, DB), before);
    // The database opens for writing afterwards as it was.
    let rw = Db::open_cf(DB, o.clone(), &[("other", o)]).unwrap();
    assert_eq!(family_contents(&rw), contents);
}

#[test]
fn every_change_is_refused_on_a_read_only_instance() {
    let fs = MemFs::new();
    let (o, contents) = made(&fs);
    let db = Db::open_read_only(DB, o.clone()).unwrap();
    let other = db.cf_handle("other").unwrap();
    let mut batch = WriteBatch::new();
    batch.put(b"a", b"b");
    let attempts: Vec<(&str, ebb::Result<()>)> = vec![
        ("a write", db.put(b"k", b"v")),
        ("a write", db.delete(&key(1))),
        ("a write", db.single_delete(&key(1))),
        ("a write", db.delete_range(&key(1), &key(2))),
        ("a write", db.merge(&key(1), b"x")),
        ("a write", db.write(&batch)),
        ("a write", db.put_cf(&other, b"k", b"v")),
        ("a flush", db.flush(true)),
        ("flush_wal", db.flush_wal(true)),
        ("compact_range", db.compact_range(None, None)),
        ("set_options", db.set_options(&[("disable_auto_compactions", "true")])),
        ("create_column_family", db.create_column_family("new", &o).map(drop)),
        ("drop_column_family", db.drop_column_family(&other)),
        ("a checkpoint", Checkpoint::create(&db, "/ckpt").map(drop)),
    ];
    for (what, r) in attempts {
        match r {
            Err(Error::NotSupported(m)) => {
                assert!(m.contains(what) && m.contains("read-only") && m.contains(DB), "{what}: {m}")
            }
            other => panic!("{what}: {other:?}"),
        }
    }
    assert!(!fs.exists(Path::new("/ckpt")));
    assert_eq!(family_contents(&db), contents);
}

#[test]
fn read_only_instances_open_beside_a_live_database_and_see_it_as_it_was() {
    let fs = MemFs::new();
    let (o, contents) = made(&fs);
    let primary = Db::open_cf(DB, o.clone(), &[("other", o.clone())]).unwrap();
    // What the open started (the flush of the replayed WAL and the
    // compactions it calls for) ends before the readers open: until the
    // flush below the primary deletes nothing they list.
    primary.wait_for_compact().unwrap();
    // A second writer is refused; readers are not.
    let e = Db::open_cf(DB, o.clone(), &[("other", o.clone())]).err().expect("the LOCK is held");
    assert!(matches!(e, Error::Busy(_)), "{e}");
    let first = Db::open_read_only(DB, o.clone()).unwrap();
    let second = Db::open_read_only(DB, o.clone()).unwrap();
    primary.put(b"later", b"x").unwrap();
    assert_eq!(first.get(b"later").unwrap(), None);
    assert_eq!(family_contents(&second), contents);
    primary.flush(true).unwrap();
    // The third reader opens after what the flush set off has ended, so the
    // tables it lists stay while it reads.
    primary.wait_for_compact().unwrap();
    let third = Db::open_read_only(DB, o).unwrap();
    assert_eq!(third.get(b"later").unwrap(), Some(b"x".to_vec()));
    // The primary's flush may have compacted away tables the first reader
    // still lists: its reads then fail naming the missing file, and never
    // return a wrong value.
    for i in (0..800).step_by(37) {
        match first.get(&key(i)) {
            Ok(v) => assert_eq!(v, contents["default"].get(&key(i)).cloned(), "key {i}"),
            Err(Error::Io { path, source, .. }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound, "{}", path.display());
            }
            Err(e) => panic!("key {i}: {e}"),
        }
    }
}

#[test]
fn a_directory_that_is_not_a_database_is_refused_and_left_as_it_was() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    let e = Db::open_read_only("/nothing", o.clone()).err().expect("no directory");
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("/nothing") && m.contains("CURRENT")), "{e}");
    assert!(!fs.exists(Path::new("/nothing")), "create_if_missing creates nothing read-only");
    fs.create_dir_all(Path::new("/empty")).unwrap();
    o.create_if_missing = true;
    let e = Db::open_read_only("/empty", o.clone()).err().expect("an empty directory");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(fs.list_dir(Path::new("/empty")).unwrap().is_empty());
    // A TTL database opened without TTL is refused too.
    drop(Db::open_with_ttl("/ttl", o.clone(), 60).unwrap());
    let e = Db::open_read_only("/ttl", o).err().expect("a TTL database");
    assert!(e.to_string().contains("TTL"), "{e}");
}

#[test]
fn a_torn_wal_tail_is_reported_and_nothing_is_moved() {
    let fs = MemFs::new();
    let (o, _) = made(&fs);
    let wal = files(&fs, DB).into_iter().filter(|(n, _)| n.ends_with(".log")).max().expect("a WAL");
    let path = Path::new(DB).join(&wal.0);
    let cut = &wal.1[..wal.1.len() - 3];
    fs.set_file_bytes(&path, cut).unwrap();
    let before = files(&fs, DB);
    let db = Db::open_read_only(DB, o).unwrap();
    let report = db.recovery_report();
    assert!(!report.wal_damage.is_empty(), "{report:?}");
    drop(db);
    assert_eq!(files(&fs, DB), before, "nothing is moved to lost/ or rewritten");
    assert!(!fs.exists(&Path::new(DB).join(ebb::LOST_DIR)));
}

/// Read-only opens beside a primary that keeps flushing and compacting:
/// the primary deletes tables and WALs that a MANIFEST being read still
/// names, and such an open reads the newer MANIFEST again instead of
/// reporting the database damaged. Every open succeeds, and what it reads
/// of the keys the primary no longer changes is theirs.
/// A primary starts a WAL under a pending name and gives it its final name
/// once the WAL before it is sealed. A read-only open that listed the
/// pending name and finds it gone when it opens the file (the rename came
/// in between) tries again and reads the WAL under its final name: nothing
/// is reported damaged and nothing in that WAL is missed. The hook renames
/// at exactly that point, so this does not depend on timing (the test
/// above found the race 1 run in 12).
#[test]
fn a_read_only_open_follows_a_pending_wal_renamed_as_it_opens_it() {
    use common::hooked_fs::{FsHooks, HookedFs};
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct SealAtOpen {
        fs: MemFs,
        renames: AtomicUsize,
    }
    impl FsHooks for SealAtOpen {
        fn before_open_sequential(&self, path: &Path) {
            let name = path.to_string_lossy();
            if let Some(sealed) = name.strip_suffix(".pending") {
                self.fs.rename(path, Path::new(sealed)).unwrap();
                self.renames.fetch_add(1, Ordering::SeqCst);
            }
        }
    }

    let fs = MemFs::new();
    let (o, contents) = made(&fs);
    // The newest WAL (it holds writes no table has) under its pending name,
    // as the primary leaves it while the WAL before it is being sealed.
    let newest = files(&fs, DB)
        .into_iter()
        .map(|(name, _)| name)
        .filter(|n| n.ends_with(".log"))
        .max()
        .expect("the database has a WAL");
    let wal = Path::new(DB).join(&newest);
    fs.rename(&wal, &wal.with_file_name(format!("{newest}.pending"))).unwrap();
    let hooks = std::sync::Arc::new(SealAtOpen { fs: fs.clone(), renames: AtomicUsize::new(0) });
    let mut ro = o.clone();
    ro.fs =
        std::sync::Arc::new(HookedFs::new(fs.clone(), std::sync::Arc::clone(&hooks) as std::sync::Arc<dyn FsHooks>));
    let db = Db::open_read_only(DB, ro).unwrap_or_else(|e| panic!("the open failed on the renamed WAL: {e}"));
    assert_eq!(hooks.renames.load(Ordering::SeqCst), 1, "the open listed the pending name and met the rename");
    assert_eq!(family_contents(&db), contents, "the WAL's writes are read under its final name");
    assert_eq!(db.get(&key(5000)).unwrap().as_deref(), Some(&b"only in the WAL"[..]));
}

#[test]
fn read_only_opens_beside_a_compacting_primary_read_the_newer_manifest() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    let primary = std::sync::Arc::new(Db::open(DB, o.clone()).unwrap());
    for i in 0..300 {
        primary.put(&key(i), b"fixed").unwrap();
    }
    primary.flush(true).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (primary, stop) = (std::sync::Arc::clone(&primary), std::sync::Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut n = 0usize;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                primary.put(&key(1000 + n % 2000), &[b'x'; 64]).unwrap();
                n += 1;
                if n.is_multiple_of(200) {
                    primary.flush(true).unwrap();
                }
            }
        })
    };
    for round in 0..200 {
        let ro = Db::open_read_only(DB, o.clone()).unwrap_or_else(|e| panic!("open {round}: {e}"));
        for i in (0..300).step_by(29) {
            match ro.get(&key(i)) {
                Ok(v) => assert_eq!(v.as_deref(), Some(&b"fixed"[..]), "open {round}, key {i}"),
                // A table compacted away after this instance opened: named,
                // never a wrong value.
                Err(Error::Io { source, .. }) => assert_eq!(source.kind(), std::io::ErrorKind::NotFound),
                Err(e) => panic!("open {round}, key {i}: {e}"),
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
}
