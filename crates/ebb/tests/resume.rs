//! `Db::resume` (RocksDB's `DB::Resume`): recovering from the sticky
//! background error without a reopen.
//!
//! For every kind of write-side filesystem operation, the k-th one fails
//! once while keys are written through flushes and compactions (some
//! synced, some not, some without the WAL). The write that fails, and every
//! later one, returns the background error until `resume`, which must then
//! succeed; the workload goes on after it, hitting the fault again where it
//! repeats. At the end, the open database, a reopen, and a reopen after a
//! power loss (unsynced bytes dropped) taken right after each resume all
//! hold exactly the acknowledged writes: a resume makes every write
//! acknowledged before it durable, and a write that failed is not there.
//!
//! Also: a resume that fails itself (the k-th operation of the resume
//! fails) leaves the error in force and can be tried again; errors that
//! cannot be resumed (a panic) are returned as they are; listeners hear
//! the recovery begin and end.

mod common;

use std::sync::{Arc, Mutex};

use common::workload::{key, value, DB};
use common::{tiny_options, try_scan, Model};
use ebb::fs::{CrashMode, FaultKind, FaultOp, FaultRule, MemFs};
use ebb::{Db, Error, ErrorRecoveryInfo, EventListener, Options, ReadOptions, WriteBatch, WriteOptions};

/// Fault positions tried per operation kind at most.
const MAX_PER_KIND: u64 = 25;

/// Operations whose failure a write or a background job turns into the
/// background error (reads are the compaction's; removals and listings are
/// best effort and never make one).
const WRITE_SIDE: [FaultOp; 6] =
    [FaultOp::Create, FaultOp::Append, FaultOp::Flush, FaultOp::Sync, FaultOp::SyncDir, FaultOp::Rename];

fn options(fs: &MemFs) -> Options {
    tiny_options(Some(fs.clone()))
}

/// The second column family of the runs with two (`Shape::TwoFamilies`).
const FAMILY: &str = "b";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    OneFamily,
    /// A third of the writes go to family `b` (the model holds them under
    /// `b/`): a flush then seals the closed WALs, but for a resume's.
    TwoFamilies,
}

fn open(fs: &MemFs, shape: Shape) -> ebb::Result<Db> {
    let mut o = options(fs);
    match shape {
        Shape::OneFamily => Db::open(DB, o),
        Shape::TwoFamilies => {
            o.create_missing_column_families = true;
            Db::open_cf(DB, o.clone(), &[(FAMILY, o)])
        }
    }
}

/// The whole database as the model holds it.
fn scan_all(db: &Db) -> ebb::Result<Model> {
    let mut out = try_scan(db, ReadOptions::default())?;
    if let Some(cf) = db.cf_handle(FAMILY) {
        let mut it = db.iter_cf(&cf, ReadOptions::default());
        it.seek_to_first();
        while it.valid() {
            out.insert([b"b/", it.key()].concat(), it.value().to_vec());
            it.next();
        }
        it.status()?;
    }
    Ok(out)
}

/// What one run saw.
#[derive(Default)]
struct Run {
    /// Writes that failed (each then resumed).
    failures: usize,
    /// Copies of the filesystem after a power loss right after each resume,
    /// with the model as it stood then.
    crashed: Vec<(MemFs, Model)>,
}

/// Writes 300 keys' worth of puts, deletes and unlogged puts; on a failed
/// write, checks the error is sticky, resumes and goes on. `model` ends
/// as the acknowledged state.
fn write_through_faults(fs: &MemFs, db: &Db, model: &mut Model, ctx: &str) -> Run {
    let mut run = Run::default();
    let family = db.cf_handle(FAMILY);
    for i in 0..300 {
        let k = key(i * 7 % 120);
        let v = value(i, 90);
        let wo = WriteOptions { sync: i % 40 == 39, disable_wal: i % 25 == 24 };
        let mut batch = WriteBatch::new();
        let delete = i % 11 == 10;
        let (in_model, cf) = match &family {
            Some(cf) if i % 3 == 0 => ([b"b/", k.as_slice()].concat(), Some(cf)),
            _ => (k.clone(), None),
        };
        match (delete, cf) {
            (true, Some(cf)) => batch.delete_cf(cf, &k),
            (true, None) => batch.delete(&k),
            (false, Some(cf)) => batch.put_cf(cf, &k, &v),
            (false, None) => batch.put(&k, &v),
        }
        match db.write_opt(&batch, &wo) {
            Ok(()) => {
                if delete {
                    model.remove(&in_model);
                } else {
                    model.insert(in_model, v.clone());
                }
            }
            Err(e) => {
                assert!(matches!(e, Error::Background(_)), "{ctx}: write {i} failed with a non-sticky error: {e:?}");
                let probe = db.put(b"~probe", b"");
                assert!(matches!(probe, Err(Error::Background(_))), "{ctx}: the error is not sticky: {probe:?}");
                db.resume().unwrap_or_else(|e| panic!("{ctx}: resume after write {i}: {e}"));
                run.failures += 1;
                // The write that failed is not there; all before it are.
                let got = scan_all(db).unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
                assert_eq!(&got, model, "{ctx}: after the resume that followed write {i}");
                // Everything acknowledged so far survives a power loss now.
                run.crashed.push((fs.crash_clone(CrashMode::DropUnsynced), model.clone()));
            }
        }
    }
    run
}

/// Reopens `fs`'s database and checks it holds `model`; then that it takes
/// a write.
fn reopen_and_check(fs: &MemFs, shape: Shape, model: &Model, ctx: &str) {
    let db = open(fs, shape).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
    let got = scan_all(&db).unwrap_or_else(|e| panic!("{ctx}: scan after reopen: {e}"));
    assert_eq!(&got, model, "{ctx}: after reopen");
    db.put(b"~after", b"1").unwrap_or_else(|e| panic!("{ctx}: write after reopen: {e}"));
    db.close().unwrap_or_else(|e| panic!("{ctx}: close after reopen: {e}"));
}

/// Counts of each write-side operation in a clean run.
fn clean_counts(shape: Shape) -> Vec<(FaultOp, u64)> {
    let fs = MemFs::new();
    let db = open(&fs, shape).unwrap();
    let mut model = Model::new();
    let run = write_through_faults(&fs, &db, &mut model, "clean");
    assert_eq!(run.failures, 0);
    db.close().unwrap();
    WRITE_SIDE.iter().map(|&op| (op, fs.op_count_of(op))).filter(|&(_, n)| n > 0).collect()
}

#[test]
fn every_write_side_failure_is_resumed_and_nothing_acknowledged_is_lost() {
    resume_after_every_write_side_failure(Shape::OneFamily);
}

#[test]
fn every_write_side_failure_is_resumed_with_two_families() {
    resume_after_every_write_side_failure(Shape::TwoFamilies);
}

fn resume_after_every_write_side_failure(shape: Shape) {
    let (mut runs, mut resumed) = (0, 0);
    for (op, count) in clean_counts(shape) {
        let stride = count.div_ceil(MAX_PER_KIND).max(1);
        for k in (1..=count).step_by(stride as usize) {
            let ctx = format!("{shape:?}: {op:?} #{k} of {count}");
            let fs = MemFs::new();
            // Failing the open itself is io_errors.rs's: the fault is armed
            // once the database is open.
            let db = open(&fs, shape).unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
            fs.inject(FaultRule::new(op).nth(k).path_excludes("LOG"));
            let mut model = Model::new();
            let run = write_through_faults(&fs, &db, &mut model, &ctx);
            // The fault fires once: after its resume, everything works.
            assert!(run.failures <= 1, "{ctx}: {} writes failed after one fault", run.failures);
            // A failure in a background job may come after the last write:
            // it surfaces here, and is resumed too.
            if let Err(e) = db.wait_for_compact() {
                assert!(matches!(e, Error::Background(_)), "{ctx}: {e:?}");
                db.resume().unwrap_or_else(|e| panic!("{ctx}: resume after wait_for_compact: {e}"));
                db.wait_for_compact().unwrap_or_else(|e| panic!("{ctx}: wait_for_compact after resume: {e}"));
            }
            let got = scan_all(&db).unwrap();
            assert_eq!(got, model, "{ctx}: at the end");
            // A failure in the close itself is io_errors.rs's: a fault not
            // yet fired is disarmed.
            fs.clear_faults();
            db.close().unwrap_or_else(|e| panic!("{ctx}: close: {e}"));
            reopen_and_check(&fs, shape, &model, &ctx);
            for (n, (crashed, at_resume)) in run.crashed.iter().enumerate() {
                reopen_and_check(crashed, shape, at_resume, &format!("{ctx}: power loss after resume {n}"));
            }
            runs += 1;
            resumed += usize::from(run.failures > 0 || fs.faults_injected() > 0);
        }
    }
    eprintln!("{shape:?}: {runs} runs, {resumed} hit their fault");
    assert!(resumed * 2 > runs, "most runs must hit their fault ({resumed} of {runs})");
}

/// A database with a sticky I/O error: a synced write whose WAL sync fails.
fn failed_on_sync(fs: &MemFs) -> Db {
    let db = Db::open(DB, options(fs)).unwrap();
    db.put(b"a", b"1").unwrap();
    fs.inject(FaultRule::new(FaultOp::Sync).nth(1));
    let e = db.put_opt(b"b", b"2", &WriteOptions { sync: true, disable_wal: false }).unwrap_err();
    assert!(matches!(e, Error::Background(_)), "{e:?}");
    db
}

#[test]
fn a_resume_that_fails_leaves_the_error_and_can_be_tried_again() {
    // How many operations a clean resume makes.
    let fs = MemFs::new();
    let db = failed_on_sync(&fs);
    let before = fs.op_count();
    db.resume().unwrap();
    let ops = fs.op_count() - before;
    assert!(ops > 3, "a resume writes a new WAL, a table and a MANIFEST edit ({ops} operations)");
    db.close().unwrap();
    for j in 1..=ops {
        let ctx = format!("operation {j} of {ops} of the resume failing");
        let fs = MemFs::new();
        let db = failed_on_sync(&fs);
        fs.inject(FaultRule::any_op().nth(j));
        let first = db.resume();
        if fs.faults_injected() == 0 {
            // A best-effort operation (an obsolete file's removal) was not reached.
            first.unwrap_or_else(|e| panic!("{ctx}: {e}"));
        } else if let Err(e) = first {
            assert!(matches!(e, Error::Background(_)), "{ctx}: {e:?}");
            let probe = db.put(b"c", b"3");
            assert!(matches!(probe, Err(Error::Background(_))), "{ctx}: writes go on after a failed resume: {probe:?}");
            db.resume().unwrap_or_else(|e| panic!("{ctx}: second resume: {e}"));
        }
        db.put(b"c", b"3").unwrap_or_else(|e| panic!("{ctx}: write after resume: {e}"));
        let want: Model = [(b"a".to_vec(), b"1".to_vec()), (b"c".to_vec(), b"3".to_vec())].into_iter().collect();
        assert_eq!(try_scan(&db, ReadOptions::default()).unwrap(), want, "{ctx}");
        db.close().unwrap_or_else(|e| panic!("{ctx}: close: {e}"));
        reopen_and_check(&fs, Shape::OneFamily, &want, &ctx);
    }
}

#[test]
fn a_persistent_failure_keeps_the_error_until_the_disk_is_back() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    db.put(b"a", b"1").unwrap();
    fs.inject(FaultRule::new(FaultOp::Append).nth(1).persistent());
    assert!(matches!(db.put(b"b", b"2"), Err(Error::Background(_))));
    for _ in 0..3 {
        let e = db.resume().unwrap_err();
        assert!(matches!(e, Error::Background(_)), "{e:?}");
        assert!(matches!(db.put(b"b", b"2"), Err(Error::Background(_))));
    }
    fs.clear_faults();
    db.resume().unwrap();
    db.put(b"b", b"2").unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get_property("ebb.background-errors").as_deref(), Some("1"));
    db.close().unwrap();
    let want: Model = [(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"2".to_vec())].into_iter().collect();
    reopen_and_check(&fs, Shape::OneFamily, &want, "persistent");
}

#[test]
fn resume_without_an_error_does_nothing() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    db.put(b"a", b"1").unwrap();
    let before = fs.op_count();
    db.resume().unwrap();
    assert_eq!(fs.op_count(), before, "a resume with no error touches nothing");
    db.close().unwrap();
}

/// A failed write's sequence numbers are not handed out again: after the
/// resume, a write's sequence is past the failed one's.
#[test]
fn the_failed_writes_sequence_numbers_are_skipped() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    db.put(b"a", b"1").unwrap();
    let seq = db.latest_sequence_number();
    fs.inject(FaultRule::new(FaultOp::Sync).nth(1));
    let mut batch = WriteBatch::new();
    batch.put(b"b", b"2");
    batch.put(b"c", b"3");
    assert!(db.write_opt(&batch, &WriteOptions { sync: true, disable_wal: false }).is_err());
    assert_eq!(db.latest_sequence_number(), seq, "a failed write publishes nothing");
    db.resume().unwrap();
    assert!(db.latest_sequence_number() >= seq + 2, "the failed batch's two numbers are skipped");
    db.put(b"d", b"4").unwrap();
    assert_eq!(db.latest_sequence_number(), seq + 3);
    db.close().unwrap();
}

#[derive(Default)]
struct Recoveries {
    events: Mutex<Vec<String>>,
}

impl EventListener for Recoveries {
    fn on_background_error(&self, error: &Error) {
        self.events.lock().unwrap().push(format!("error {}", matches!(error, Error::Io { .. })));
    }
    fn on_error_recovery_begin(&self, error: &Error) {
        self.events.lock().unwrap().push(format!("begin {}", matches!(error, Error::Io { .. })));
    }
    fn on_error_recovery_end(&self, info: &ErrorRecoveryInfo) {
        self.events.lock().unwrap().push(format!("end {}", info.new_error.is_none()));
    }
}

#[test]
fn listeners_hear_the_recovery_begin_and_end() {
    let fs = MemFs::new();
    let listener = Arc::new(Recoveries::default());
    let mut o = options(&fs);
    o.listeners.push(listener.clone());
    let db = Db::open(DB, o).unwrap();
    db.put(b"a", b"1").unwrap();
    fs.inject(FaultRule::new(FaultOp::Append).nth(1).persistent());
    assert!(db.put(b"b", b"2").is_err());
    assert!(db.resume().is_err());
    fs.clear_faults();
    db.resume().unwrap();
    let events = listener.events.lock().unwrap().clone();
    assert_eq!(events, ["error true", "begin true", "end false", "begin true", "end true"]);
    db.close().unwrap();
}

/// A full disk (RocksDB's common case for `Resume`): writes fail with
/// `ENOSPC` until space comes back; then a resume, not a reopen, makes the
/// database writable again with every acknowledged write.
#[test]
fn a_full_disk_is_resumed_once_space_is_back() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    let mut model = Model::new();
    for i in 0..60 {
        db.put(&key(i), &value(i, 100)).unwrap();
        model.insert(key(i), value(i, 100));
    }
    fs.inject(FaultRule::new(FaultOp::Append).kind(FaultKind::NoSpace).persistent());
    let e = db.put(&key(60), b"no room").unwrap_err();
    assert!(matches!(e, Error::Background(_)) && e.is_no_space(), "{e:?}");
    let e = db.resume().unwrap_err();
    assert!(e.is_no_space(), "the resume fails while the disk is full: {e:?}");
    fs.clear_faults();
    db.resume().unwrap();
    assert_eq!(scan_all(&db).unwrap(), model);
    for i in 60..120 {
        db.put(&key(i), &value(i, 100)).unwrap();
        model.insert(key(i), value(i, 100));
    }
    db.close().unwrap();
    reopen_and_check(&fs, Shape::OneFamily, &model, "full disk");
}
