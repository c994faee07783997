//! Obsolete files are found by reference, not by listing the directory
//! after every job (db/version_edits.rs, contract 2; issue 17 part 1): a
//! table leaves the disk once no version, reader or job holds it, a blob
//! file once no live version lists it, a WAL once it is below the log
//! number. Checked by counting directory listings through a long run of
//! flushes and compactions, and by what is on disk against what the
//! versions list, with and without blob files, with a reader holding an old
//! version across compactions.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::hooked_fs::{FsHooks, HookedFs};
use common::{scan, tiny_options, Model};
use ebb::fs::{FileSystem, MemFs};
use ebb::{Db, Options, ReadOptions};

const DB: &str = "/db";

/// Counts directory listings.
#[derive(Default)]
struct Listings(AtomicU64);

impl FsHooks for Listings {
    fn before_list_dir(&self, _path: &Path) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counted(fs: &MemFs) -> (Options, Arc<Listings>) {
    let listings = Arc::new(Listings::default());
    let mut o = tiny_options(None);
    o.fs = Arc::new(HookedFs::new(fs.clone(), Arc::clone(&listings) as Arc<dyn FsHooks>));
    (o, listings)
}

fn on_disk(fs: &MemFs, ext: &str) -> usize {
    let suffix = format!(".{ext}");
    fs.list_dir(Path::new(DB)).unwrap().iter().filter(|n| n.ends_with(&suffix)).count()
}

fn key(i: u32) -> Vec<u8> {
    format!("key{:06}", (i * 7919) % 5000).into_bytes()
}

/// Writes 20,000 overwrites of 5,000 keys (values of `len` bytes, told
/// apart by `round`), so tiny memtables flush and compactions rewrite the
/// tree over and over.
fn churn(db: &Db, model: &mut Model, len: usize, round: u32) {
    for i in 0..20_000u32 {
        let v = format!("{:08}", round * 20_000 + i).repeat(len / 8).into_bytes();
        db.put(&key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    db.flush(true).unwrap();
    db.wait_for_compact().unwrap();
}

/// [`churn`], checking that its hundreds of flushes and compactions listed
/// the directory at most once in a hundred jobs; returns the metrics after.
/// How many compactions a churn takes depends on how fast the flushes run
/// beside it, so it churns again (at most 8 times) until there were 50.
fn churn_counting_listings(db: &Db, model: &mut Model, listings: &Listings) -> ebb::DbMetrics {
    let before = listings.0.load(Ordering::SeqCst);
    let compactions = |m: &ebb::DbMetrics| m.compactions_by_reason.iter().map(|(_, n)| n).sum::<u64>();
    let mut m = db.metrics();
    for round in 0..8 {
        churn(db, model, 64, round);
        m = db.metrics();
        if compactions(&m) >= 50 {
            break;
        }
    }
    let compactions = compactions(&m);
    let jobs = m.flushes + compactions;
    assert!(m.flushes >= 100 && compactions >= 50, "not enough background work: {m:?}");
    let listed = listings.0.load(Ordering::SeqCst) - before;
    assert!(listed * 100 <= jobs, "{listed} directory listings for {jobs} jobs");
    m
}

/// A long run of flushes and compactions lists the directory only at
/// open and every few hundred looks, yet leaves on disk exactly the tables
/// the version lists, and one WAL.
#[test]
fn obsolete_tables_and_wals_go_without_listing_the_directory() {
    let fs = MemFs::new();
    let (o, listings) = counted(&fs);
    let db = Db::open(DB, o.clone()).unwrap();
    let mut model = Model::new();
    let m = churn_counting_listings(&db, &mut model, &listings);
    let live: usize = m.files_per_level.iter().sum();
    assert_eq!(on_disk(&fs, "sst"), live, "tables on disk against tables in the version");
    assert_eq!(on_disk(&fs, "log") + on_disk(&fs, "pending"), 1, "WALs left: {:?}", fs.list_dir(Path::new(DB)));
    assert!(scan(&db, ReadOptions::default()) == model);
    db.close().unwrap();
    let db = Db::open(DB, o).unwrap();
    assert!(scan(&db, ReadOptions::default()) == model, "after the reopen");
}

/// The same with values in blob files, garbage collected: blob files leave
/// the disk as they leave the version.
#[test]
fn obsolete_blob_files_go_without_listing_the_directory() {
    let fs = MemFs::new();
    let (mut o, listings) = counted(&fs);
    o.enable_blob_files = true;
    o.min_blob_size = 32;
    o.blob_file_size = 8 * 1024;
    o.enable_blob_garbage_collection = true;
    o.blob_garbage_collection_age_cutoff = 0.5;
    let db = Db::open(DB, o.clone()).unwrap();
    let mut model = Model::new();
    let m = churn_counting_listings(&db, &mut model, &listings);
    assert!(m.blobs_relocated > 0, "no blob was relocated: {m:?}");
    assert_eq!(on_disk(&fs, "blob"), m.blob_files, "blob files on disk against blob files in the version");
    assert_eq!(on_disk(&fs, "sst"), m.files_per_level.iter().sum::<usize>());
    assert!(scan(&db, ReadOptions::default()) == model);
}

/// A database without automatic compactions holding `rounds` flushed
/// tables of the same 300 keys, and what it holds.
fn flushed_rounds(fs: &MemFs, rounds: u32) -> (Db, Model) {
    let (mut o, _) = counted(fs);
    o.disable_auto_compactions = true;
    let db = Db::open(DB, o).unwrap();
    let mut model = Model::new();
    for round in 0..rounds {
        for i in 0..300 {
            let v = format!("round {round} {i}").into_bytes();
            db.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        db.flush(true).unwrap();
    }
    (db, model)
}

/// A reader holding an old version keeps the tables compactions took out
/// of it on disk, and reads them whole; once it lets go, the next job
/// deletes them.
#[test]
fn a_table_a_reader_holds_stays_until_the_reader_lets_go() {
    let fs = MemFs::new();
    let (db, model) = flushed_rounds(&fs, 4);
    let before = on_disk(&fs, "sst");
    let mut it = db.iter(ReadOptions::default());
    it.seek_to_first();
    db.compact_range(None, None).unwrap();
    let live: usize = db.metrics().files_per_level.iter().sum();
    assert!(live < before, "the compaction merged nothing");
    assert_eq!(on_disk(&fs, "sst"), before + live, "the held tables were deleted under the reader");
    let mut read = Model::new();
    while it.valid() {
        read.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().unwrap();
    assert!(read == model, "the reader's view");
    drop(it);
    // The next job looks again.
    db.put(b"another", b"write").unwrap();
    db.flush(true).unwrap();
    assert_eq!(on_disk(&fs, "sst"), db.metrics().files_per_level.iter().sum::<usize>(), "held tables left behind");
}

/// Tables a reader held while the compaction that took them out ended
/// are gone once `wait_for_compact` returns after the reader let go, with
/// no job in between: it looks once more before returning.
#[test]
fn wait_for_compact_deletes_what_a_reader_let_go_of_after_the_last_job() {
    let fs = MemFs::new();
    let (db, _) = flushed_rounds(&fs, 3);
    let before = on_disk(&fs, "sst");
    let mut it = db.iter(ReadOptions::default());
    it.seek_to_first();
    db.compact_range(None, None).unwrap();
    let m = db.metrics();
    let live: usize = m.files_per_level.iter().sum();
    assert_eq!(on_disk(&fs, "sst"), before + live, "the held tables were deleted under the reader");
    drop(it);
    db.wait_for_compact().unwrap();
    assert_eq!(on_disk(&fs, "sst"), live, "held tables left behind");
    let after = db.metrics();
    let jobs = |m: &ebb::DbMetrics| (m.flushes, m.compactions_by_reason.iter().map(|(_, n)| n).sum::<u64>());
    assert_eq!(jobs(&after), jobs(&m), "a job ran");
}
