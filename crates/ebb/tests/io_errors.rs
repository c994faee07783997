//! I/O errors, SQLite-style: for a few workloads, the k-th filesystem
//! operation of each kind fails, for every k, once and then persistently,
//! during open and recovery, writes, background flushes and compactions.
//!
//! Each failure must reach the caller: as the error of the call that hit it,
//! or as the sticky background error that every later write then returns
//! (`Recorder::check_sticky`). Only the best-effort parts may swallow one:
//! deleting obsolete files and listing the directory to find them; and a
//! `close` may retry a background flush that failed while it ran. After
//! the faults are cleared and the database reopened (no power loss), the
//! state is the model of the acknowledged writes, with or without the write
//! that failed. Then the database takes writes again.
//!
//! Also: a full disk (`ENOSPC`) fails writes cleanly with an error that says
//! so, and once space is back a reopen makes the database writable again.
//! Three workloads run again with blob files (`workload::blob_files`), so
//! blob file writes, syncs and reads (garbage collection, reads) fail too.

mod common;

use common::workload::{self, key, value, Configure, Recorder, Workload, DB};
use common::{try_scan, History, Model};
use ebb::fs::{FaultKind, FaultOp, FaultRule, MemFs};
use ebb::{Db, Error, Options, ReadOptions};

/// Fault positions tried per operation kind and persistence at most; past
/// that, every n-th operation of the kind.
const MAX_PER_KIND: u64 = 60;

/// Operations whose failure may be swallowed: removing obsolete files, and
/// listing the directory to find them, are best effort.
fn may_be_swallowed(op: FaultOp) -> bool {
    matches!(op, FaultOp::Remove | FaultOp::List)
}

/// A recorder that checks failures are sticky and lets background work
/// settle before each close.
fn recorder(fs: &MemFs, configure: Configure) -> Recorder {
    let mut r = Recorder::new(fs.clone());
    configure(&mut r.options);
    r.check_sticky = true;
    r.settle_before_close = true;
    r
}

/// Reopens with the faults cleared and checks the state against the
/// acknowledged writes; then checks the database takes a write.
fn reopen_and_check(fs: &MemFs, options: &Options, history: &History, ctx: &str) {
    fs.clear_faults();
    let db = Db::open(DB, options.clone()).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
    let got = try_scan(&db, ReadOptions::default()).unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
    if let Err(e) = history.check_without_crash(&got) {
        panic!("{ctx}: {e}");
    }
    common::put_late(&db, b"~after", b"1", &ebb::WriteOptions::default())
        .unwrap_or_else(|e| panic!("{ctx}: write after reopen: {e}"));
    assert_eq!(
        db.get_opt(b"~after", &common::latest(&db, ReadOptions::default())).unwrap(),
        Some(b"1".to_vec()),
        "{ctx}"
    );
    db.close().unwrap_or_else(|e| panic!("{ctx}: close after reopen: {e}"));
}

/// Counts of each operation kind in a clean run of `w`.
fn clean_counts(name: &str, w: Workload, configure: Configure) -> Vec<(FaultOp, u64)> {
    let fs = MemFs::new();
    let mut r = recorder(&fs, configure);
    w(&mut r).unwrap_or_else(|e| panic!("{name}: the clean run failed: {e}"));
    FaultOp::ALL.iter().map(|&op| (op, fs.op_count_of(op))).filter(|&(_, n)| n > 0).collect()
}

/// Fails each operation of `w` in turn, once and then persistently.
fn fail_every_operation(name: &str, w: Workload, configure: Configure) {
    let (mut runs, mut fired) = (0, 0);
    for (op, count) in clean_counts(name, w, configure) {
        let stride = count.div_ceil(MAX_PER_KIND).max(1);
        for k in (1..=count).step_by(stride as usize) {
            for persistent in [false, true] {
                let fs = MemFs::new();
                // The info log is a diagnostic: failing to write it fails
                // nothing (tested in bad_input.rs), so its files are spared.
                let rule = FaultRule::new(op).nth(k).path_excludes("LOG");
                fs.inject(if persistent { rule.persistent() } else { rule });
                let mut r = recorder(&fs, configure);
                let outcome = w(&mut r);
                let ctx = format!(
                    "{name}: {op:?} #{k} of {count} failing {}",
                    if persistent { "from then on" } else { "once" }
                );
                let hit = fs.faults_injected() > 0;
                // A close that succeeded despite a fault retried the failed
                // work itself; the state check below shows it kept its promise.
                let outside_close = fs.faults_injected() > r.faults_during_close;
                if outside_close && !may_be_swallowed(op) {
                    assert!(outcome.is_err(), "{ctx}: the failure reached no caller");
                }
                if let Err(e) = &outcome {
                    assert!(hit, "{ctx}: an error without a fault: {e}");
                }
                reopen_and_check(&fs, &r.options, &r.history, &ctx);
                runs += 1;
                fired += u64::from(hit);
            }
        }
    }
    eprintln!("{name}: {runs} runs, {fired} hit their fault");
    assert!(fired * 2 > runs, "{name}: most runs must hit their fault ({fired} of {runs})");
}

#[test]
fn io_errors_synced_puts() {
    fail_every_operation("synced puts", workload::synced_puts, workload::as_is);
}

#[test]
fn io_errors_puts_and_deletes() {
    fail_every_operation("puts and deletes", workload::puts_and_deletes, workload::as_is);
}

#[test]
fn io_errors_compactions() {
    fail_every_operation("compactions", workload::compactions, workload::as_is);
}

#[test]
fn io_errors_manifest_rolls() {
    fail_every_operation("manifest rolls", workload::manifest_rolls, workload::as_is);
}

#[test]
fn io_errors_unlogged_writes_then_close() {
    fail_every_operation("unlogged writes then close", workload::unlogged_then_close, workload::as_is);
}

#[test]
fn io_errors_merges() {
    fail_every_operation("merges", workload::merges, workload::as_is);
}

#[test]
fn io_errors_range_deletions() {
    fail_every_operation("range deletions", workload::range_deletions, workload::as_is);
}

#[test]
fn io_errors_entities() {
    fail_every_operation("entities", workload::entities, workload::as_is);
}

#[test]
fn io_errors_timestamps() {
    fail_every_operation("timestamps", workload::timestamps, workload::as_is);
}

#[test]
fn io_errors_in_reverse_order() {
    fail_every_operation("manifest rolls", workload::manifest_rolls, workload::reverse_order);
    fail_every_operation("merges", workload::merges, workload::reverse_order);
}

#[test]
fn io_errors_single_deletes() {
    fail_every_operation("single deletes", workload::single_deletes, workload::as_is);
}

#[test]
fn io_errors_during_recovery_into_many_tables() {
    fail_every_operation("recovery into many tables", workload::recovery_into_many_tables, workload::as_is);
}

#[test]
fn io_errors_with_blob_files_synced_puts() {
    fail_every_operation("blob files: synced puts", workload::synced_puts, workload::blob_files);
}

#[test]
fn io_errors_with_blob_files_compactions() {
    fail_every_operation("blob files: compactions", workload::compactions, workload::blob_files);
}

#[test]
fn io_errors_with_blob_files_during_recovery_into_many_tables() {
    fail_every_operation(
        "blob files: recovery into many tables",
        workload::recovery_into_many_tables,
        workload::blob_files,
    );
}

/// Writes `n` puts from `from`, all acknowledged.
fn fill(r: &mut Recorder, db: &Db, from: usize, n: usize) {
    for i in from..from + n {
        r.put(db, &key(i), &value(i, 100), false).unwrap();
    }
}

fn expect_no_space(what: &str, r: ebb::Result<()>) {
    let e = r.err().unwrap_or_else(|| panic!("{what}: must fail on a full disk"));
    assert!(e.is_no_space(), "{what}: the error must say the disk is full: {e:?}");
}

#[test]
fn a_full_disk_fails_wal_writes_cleanly_until_reopened() {
    let fs = MemFs::new();
    let mut r = recorder(&fs, workload::as_is);
    r.options.write_buffer_size = 1 << 20;
    let db = r.open().unwrap();
    fill(&mut r, &db, 0, 50);
    fs.inject(FaultRule::new(FaultOp::Append).kind(FaultKind::NoSpace).persistent());
    let failed = r.put(&db, &key(50), b"no room", false);
    expect_no_space("a put", failed);
    for i in 0..3 {
        let e = db.put(&key(60 + i), b"x").unwrap_err();
        assert!(matches!(e, Error::Background(_)) && e.is_no_space(), "later writes: {e:?}");
    }
    // Space comes back: the database stays read-only until a resume
    // (resume.rs) or a reopen, and reads work.
    fs.clear_faults();
    assert!(matches!(db.put(b"k", b"v"), Err(Error::Background(_))));
    assert_eq!(db.get(&key(7)).unwrap(), Some(value(7, 100)));
    drop(db);
    let db = r.open().unwrap();
    let got = try_scan(&db, ReadOptions::default()).unwrap();
    r.history.check_without_crash(&got).unwrap();
    r.history = History::starting_from(got);
    fill(&mut r, &db, 100, 50);
    r.flush(&db).unwrap();
    r.close(db).unwrap();
    let db = r.open().unwrap();
    assert!(try_scan(&db, ReadOptions::default()).unwrap() == *r.history.latest());
}

#[test]
fn a_full_disk_fails_flushes_cleanly_until_reopened() {
    let fs = MemFs::new();
    let mut r = recorder(&fs, workload::as_is);
    r.options.write_buffer_size = 1 << 20;
    let db = r.open().unwrap();
    fill(&mut r, &db, 0, 50);
    // Only new tables run out of space; the WAL still has room.
    fs.inject(FaultRule::new(FaultOp::Append).kind(FaultKind::NoSpace).path_contains(".sst").persistent());
    expect_no_space("a flush", db.flush(true));
    let e = db.put(&key(99), b"x").unwrap_err();
    assert!(matches!(e, Error::Background(_)) && e.is_no_space(), "a write after the failed flush: {e:?}");
    assert!(fs.faults_injected() > 0);
    // Nothing half-written is left behind to be mistaken for a table.
    assert!(common::files_of(&fs, DB).iter().all(|(n, b)| !n.ends_with(".sst") || b.is_empty()), "partial table");
    fs.clear_faults();
    drop(db);
    let db = r.open().unwrap();
    assert!(try_scan(&db, ReadOptions::default()).unwrap() == *r.history.latest());
    fill(&mut r, &db, 100, 50);
    r.flush(&db).unwrap();
    r.close(db).unwrap();
}

#[test]
fn a_full_disk_during_compaction_and_open_fails_cleanly() {
    let fs = MemFs::new();
    let mut r = recorder(&fs, workload::as_is);
    let db = r.open().unwrap();
    fill(&mut r, &db, 0, 100);
    r.flush(&db).unwrap();
    // Tables fill the disk while the background compacts what the writes flush.
    fs.inject(FaultRule::new(FaultOp::Create).kind(FaultKind::NoSpace).path_contains(".sst").persistent());
    let mut outcome = Ok(());
    for i in 0..2000 {
        outcome = r.put(&db, &key(i % 150), &value(i, 120), false);
        if outcome.is_err() {
            break;
        }
    }
    expect_no_space("writes while flushes and compactions fail", outcome);
    drop(db);
    // The disk is still full at the next open: recovery cannot flush the WAL.
    let mut o = r.options.clone();
    o.write_buffer_size = 4096;
    expect_no_space("open", Db::open(DB, o).map(drop));
    fs.clear_faults();
    let db = r.open().unwrap();
    let got = try_scan(&db, ReadOptions::default()).unwrap();
    r.history.check_without_crash(&got).unwrap();
    r.history = History::starting_from(got);
    fill(&mut r, &db, 200, 100);
    r.wait_for_compact(&db).unwrap();
    let want: Model = r.history.latest().clone();
    assert!(try_scan(&db, ReadOptions::default()).unwrap() == want);
}

#[test]
fn close_reports_unlogged_writes_that_a_failed_flush_left_unsaved() {
    let fs = MemFs::new();
    let mut r = recorder(&fs, workload::as_is);
    r.options.write_buffer_size = 1 << 20;
    let db = r.open().unwrap();
    for i in 0..20 {
        r.put_unlogged(&db, &key(i), &value(i, 100)).unwrap();
    }
    // The flush that would save them fails; they exist only in the memtable.
    fs.inject(FaultRule::new(FaultOp::Append).kind(FaultKind::NoSpace).path_contains(".sst").persistent());
    expect_no_space("a flush", db.flush(true));
    // Close cannot flush them either (the error is sticky), so it must not
    // report success: those acknowledged writes are lost.
    let e = db.close().unwrap_err();
    assert!(matches!(e, Error::Background(_)) && e.is_no_space(), "close after the failed flush: {e:?}");
    fs.clear_faults();
    let db = r.open().unwrap();
    assert!(try_scan(&db, ReadOptions::default()).unwrap().is_empty(), "unlogged writes came back without a table");
}

/// A point read over many L0 files (read in batches, docs/cache.md) reads
/// no file its answer does not need: with the key in the newest file, a
/// failing read of the oldest is never made, and so no failure is dropped;
/// a key only the oldest holds reaches it, and its failure is the read's.
#[test]
fn a_point_read_over_many_l0_files_reads_only_the_files_it_needs() {
    let fs = MemFs::new();
    let mut o = common::tiny_options(Some(fs.clone()));
    o.disable_auto_compactions = true;
    o.max_open_files = -1;
    let db = Db::open(DB, o.clone()).unwrap();
    for round in 0..6u8 {
        db.put(b"k", &[b'v', b'0' + round]).unwrap();
        if round == 0 {
            db.put(b"only-oldest", b"x").unwrap();
        }
        db.flush(true).unwrap();
    }
    let oldest = db.get_live_files_metadata().unwrap().iter().map(|f| f.file_number).min().unwrap();
    assert_eq!(db.get_property("ebb.num-files-at-level0").as_deref(), Some("6"));
    db.close().unwrap();
    // Reopened, no table is open yet.
    let db = Db::open(DB, o).unwrap();
    fs.inject(FaultRule::new(FaultOp::Read).path_contains(format!("{oldest:06}.sst")).persistent());
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v5"[..]));
    assert_eq!(fs.faults_injected(), 0, "the oldest file was read though the newest answered");
    let e = db.get(b"only-oldest").unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    fs.clear_faults();
    assert_eq!(db.get(b"only-oldest").unwrap().as_deref(), Some(&b"x"[..]));
    db.close().unwrap();
}
