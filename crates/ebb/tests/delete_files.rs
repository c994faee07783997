//! `delete_files_in_range(s)` (RocksDB's `DeleteFilesInRange`): whole
//! table files of levels 1 and up inside a range are dropped, level 0's
//! and those reaching outside are kept, `include_end` decides a file ending
//! at the range's end, the drop survives a power loss, an iterator open
//! before keeps reading what it started with, and bad input is an error.

mod common;

use std::collections::BTreeMap;

use ebb::fs::{CrashMode, FileSystem, MemFs};
use ebb::{ColumnFamilyHandle, Db, Error, IteratorMode, Options, ReadOptions};

const DB: &str = "/db";

fn options(fs: &MemFs) -> Options {
    let mut o = common::tiny_options(Some(fs.clone()));
    o.disable_auto_compactions = true;
    o.write_buffer_size = 1 << 20;
    o.target_file_size_base = 16 * 1024;
    o
}

fn key(range: char, i: u32) -> Vec<u8> {
    format!("{range}{i:04}").into_bytes()
}

/// Ranges `a` to `d`, 200 keys each, compacted out of level 0 (several
/// files per range), then range `e` flushed into level 0.
fn fill(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for range in ['a', 'b', 'c', 'd'] {
        for i in 0..200 {
            let (k, v) = (key(range, i), vec![range as u8; 200]);
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
    db.compact_range(None, None).unwrap();
    for i in 0..50 {
        let (k, v) = (key('e', i), vec![b'e'; 200]);
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.flush(true).unwrap();
    model
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

/// Files of levels 1 and up lying in `[lo, hi]`, and the others.
fn files_within(db: &Db, lo: &[u8], hi: &[u8]) -> (usize, usize) {
    let live = db.get_live_files_metadata().unwrap();
    let inside = live
        .iter()
        .filter(|f| f.level > 0 && f.smallest_key.as_slice() >= lo && f.largest_key.as_slice() <= hi)
        .count();
    (inside, live.len() - inside)
}

#[test]
fn whole_files_inside_the_range_are_dropped_and_the_rest_kept() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    let mut model = fill(&db);
    let (inside, outside) = files_within(&db, b"b", b"c9999");
    assert!(inside >= 2, "ranges b and c span several level-1+ files: {inside}");
    let files_before = fs.list_dir(DB.as_ref()).unwrap().iter().filter(|n| n.ends_with(".sst")).count();
    let cf = default(&db);
    // An iterator open before the drop keeps reading the version it began with.
    let before = db.iterator(ReadOptions::default(), IteratorMode::Start);
    let dropped = db.delete_files_in_range(&cf, Some(b"b"), Some(b"c9999"), true).unwrap();
    assert_eq!(dropped, inside);
    // A file straddling a range boundary is kept: here every b and c file
    // lies inside (ranges are compacted apart only by chance), so check the
    // keys of a and d are all there and b's and c's only where a kept file
    // holds them.
    let live = db.get_live_files_metadata().unwrap();
    assert_eq!(live.len(), outside);
    let kept: Vec<_> = live.iter().map(|f| (f.smallest_key.clone(), f.largest_key.clone())).collect();
    model.retain(|k, _| {
        !(k.as_slice() >= &b"b"[..] && k.as_slice() <= &b"c9999"[..]) || kept.iter().any(|(lo, hi)| lo <= k && k <= hi)
    });
    assert!(scan(&db) == model, "what is left is the keys of the files kept");
    assert!(model.contains_key(&key('a', 0)) && model.contains_key(&key('d', 199)));
    // The dropped files are gone from disk once no reader holds them.
    assert_eq!(before.count(), 4 * 200 + 50, "the old iterator reads its version whole");
    // (Files a reader held wait for the next look at obsolete files.)
    db.wait_for_compact().unwrap();
    let files_after = fs.list_dir(DB.as_ref()).unwrap().iter().filter(|n| n.ends_with(".sst")).count();
    assert!(files_after <= files_before - dropped, "{files_before} files, {dropped} dropped, {files_after} left");

    // Level 0's file (range e) is kept whatever the range.
    assert_eq!(db.delete_files_in_range(&cf, Some(b"e"), Some(b"f"), true).unwrap(), 0);
    assert_eq!(db.get(&key('e', 7)).unwrap().as_deref(), Some(&[b'e'; 200][..]));

    // The drop is durable: after a power loss the database reads the same.
    let crashed = fs.crash_clone(CrashMode::DropUnsynced);
    drop(db);
    let db = Db::open(DB, options(&crashed)).unwrap();
    assert!(scan(&db) == model, "after a power loss");
}

#[test]
fn include_end_decides_a_file_ending_at_the_range_end() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    fill(&db);
    let cf = default(&db);
    let live = db.get_live_files_metadata().unwrap();
    let f = live.iter().find(|f| f.level > 0 && f.smallest_key.starts_with(b"b")).unwrap();
    let (lo, hi) = (f.smallest_key.clone(), f.largest_key.clone());
    assert_eq!(db.delete_files_in_range(&cf, Some(&lo), Some(&hi), false).unwrap(), 0, "the end is excluded");
    assert_eq!(db.delete_files_in_range(&cf, Some(&lo), Some(&hi), true).unwrap(), 1);
    assert_eq!(db.get(&lo).unwrap(), None);
    assert_eq!(db.get(&hi).unwrap(), None);
    // Unbounded ends, several ranges in one call.
    let n = db.delete_files_in_ranges(&cf, &[(None, Some(&b"a9999"[..])), (Some(&b"d"[..]), None)], true).unwrap();
    assert!(n >= 2, "{n}");
    assert_eq!(db.get(&key('a', 0)).unwrap(), None);
    assert_eq!(db.get(&key('d', 199)).unwrap(), None);
    assert!(db.get(&key('c', 0)).unwrap().is_some());
}

#[test]
fn bad_input_is_an_error_and_nothing_is_dropped() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    let model = fill(&db);
    let cf = default(&db);
    match db.delete_files_in_range(&cf, Some(b"z"), Some(b"a"), true) {
        Err(e @ Error::InvalidArgument(_)) => assert!(e.to_string().contains("ends before it starts"), "{e}"),
        other => panic!("not refused: {other:?}"),
    }
    assert!(scan(&db) == model);
    drop(db);
    let ro = Db::open_read_only(DB, options(&fs)).unwrap();
    let cf = default(&ro);
    assert!(matches!(ro.delete_files_in_range(&cf, None, None, true), Err(Error::NotSupported(_))));
    let snapshot_reads = ro.iterator(ReadOptions::default(), IteratorMode::Start).count();
    assert_eq!(snapshot_reads, model.len());
}
