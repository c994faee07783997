//! `compact_files` (RocksDB's `CompactFiles`): named tables compacted into
//! a level, with the files that must go with them added, the data read the
//! same after (newer versions stay newer), durable through a power loss;
//! bad names and levels are errors that change nothing.

mod common;

use std::collections::BTreeMap;

use ebb::fs::{CrashMode, MemFs};
use ebb::{ColumnFamilyHandle, Db, Error, IteratorMode, LiveFileMetaData, Options, ReadOptions};

const DB: &str = "/db";

fn options(fs: &MemFs) -> Options {
    let mut o = common::tiny_options(Some(fs.clone()));
    o.disable_auto_compactions = true;
    o.write_buffer_size = 1 << 20;
    o
}

fn scan(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iterator(ReadOptions::default(), IteratorMode::Start)
        .map(|r| r.unwrap())
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect()
}

fn default(db: &Db) -> ColumnFamilyHandle {
    db.cf_handle("default").unwrap()
}

fn at_level(db: &Db, level: usize) -> Vec<LiveFileMetaData> {
    db.get_live_files_metadata().unwrap().into_iter().filter(|f| f.level == level).collect()
}

/// Writes keys `from..to` with `value`, then flushes them into level 0.
fn write(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, from: u32, to: u32, value: &str) {
    for i in from..to {
        let (k, v) = (format!("k{i:04}").into_bytes(), format!("{value}{i}").into_bytes());
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.flush(true).unwrap();
}

#[test]
fn named_files_and_those_that_must_go_with_them_are_compacted() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    let cf = default(&db);
    let mut model = BTreeMap::new();
    // Two overlapping L0 files and one apart.
    write(&db, &mut model, 0, 100, "a");
    write(&db, &mut model, 50, 150, "b");
    write(&db, &mut model, 500, 600, "c");
    let l0 = at_level(&db, 0);
    assert_eq!(l0.len(), 3);
    // Naming the newest overlapping file alone takes the older one too: left
    // in level 0 above the output, its older versions would shadow the new.
    let newest = l0.iter().find(|f| f.smallest_key == b"k0050").unwrap();
    let out = db.compact_files(&cf, &[&newest.name], 2).unwrap();
    assert!(!out.is_empty());
    let l2 = at_level(&db, 2);
    assert_eq!(l2.iter().map(|f| f.name.clone()).collect::<Vec<_>>(), out, "the outputs, in level 2");
    assert_eq!(at_level(&db, 0).len(), 1, "the file apart stays");
    assert!(scan(&db) == model);

    // Newer versions of the same keys compacted into level 1; then that
    // file into level 3: level 2's overlapping file goes too, or its older
    // versions would sit above the newer ones.
    write(&db, &mut model, 0, 150, "d");
    let name = at_level(&db, 0).into_iter().find(|f| f.smallest_key == b"k0000").unwrap().name;
    db.compact_files(&cf, &[&name], 1).unwrap();
    let l1: Vec<_> = at_level(&db, 1).iter().map(|f| f.name.clone()).collect();
    let names: Vec<&str> = l1.iter().map(String::as_str).collect();
    db.compact_files(&cf, &names, 3).unwrap();
    assert!(at_level(&db, 1).is_empty() && at_level(&db, 2).is_empty());
    assert!(scan(&db) == model, "the newest versions are read");
    // Within one level; names with or without the leading slash.
    let l3: Vec<String> = at_level(&db, 3).iter().map(|f| f.name.trim_start_matches('/').to_string()).collect();
    let names: Vec<&str> = l3.iter().map(String::as_str).collect();
    db.compact_files(&cf, &names, 3).unwrap();
    assert!(scan(&db) == model);

    let crashed = fs.crash_clone(CrashMode::DropUnsynced);
    drop(db);
    let db = Db::open(DB, options(&crashed)).unwrap();
    assert!(scan(&db) == model, "after a power loss");
}

#[test]
fn bad_names_and_levels_are_errors_and_change_nothing() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    let cf = default(&db);
    let mut model = BTreeMap::new();
    write(&db, &mut model, 0, 100, "a");
    let name = at_level(&db, 0)[0].name.clone();
    db.compact_files(&cf, &[&name], 2).unwrap();
    let l2 = at_level(&db, 2)[0].name.clone();
    let files = db.get_live_files_metadata().unwrap();
    let invalid = |r: ebb::Result<Vec<String>>, words: &str| match r {
        Err(e @ Error::InvalidArgument(_)) => assert!(e.to_string().contains(words), "{e}"),
        other => panic!("not refused ({words}): {other:?}"),
    };
    invalid(db.compact_files(&cf, &["/999999.sst"], 2), "not a live table");
    invalid(db.compact_files(&cf, &["MANIFEST-000001"], 2), "not a table file name");
    invalid(db.compact_files(&cf, &[".sst"], 2), "not a table file name");
    invalid(db.compact_files(&cf, &[], 2), "no input file");
    invalid(db.compact_files(&cf, &[&l2], 1), "compactions go down");
    invalid(db.compact_files(&cf, &[&l2], 99), "does not exist");
    assert_eq!(db.get_live_files_metadata().unwrap(), files);
    assert!(scan(&db) == model);
    drop(db);
    let ro = Db::open_read_only(DB, options(&fs)).unwrap();
    let cf = default(&ro);
    assert!(matches!(ro.compact_files(&cf, &[&l2], 3), Err(Error::NotSupported(_))));
}
