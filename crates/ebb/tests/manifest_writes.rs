//! Version edits are written to the MANIFEST, and obsolete files deleted,
//! without the db mutex (db/version_edits.rs): a foreground write never
//! waits for a MANIFEST sync or an unlink. Checked by holding those calls
//! inside a filesystem gate and writing meanwhile; and, with MANIFEST syncs
//! slowed down under concurrent flushes and compactions, every write is
//! still there, before and after a reopen and a power loss.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use common::hooked_fs::{FsHooks, HookedFs};
use common::{tiny_options, Model, SYNCED};
use ebb::fs::{CrashMode, FileSystem, MemFs};
use ebb::{Db, Options, WriteOptions};
use parking_lot::{Condvar, Mutex};

const DB: &str = "/db";
/// How long a test waits for something that must happen before calling it
/// stuck (a watchdog, not a speed limit: the awaited step takes milliseconds).
const STUCK: Duration = Duration::from_secs(30);

/// Where a [`Gate`] holds its callers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Held {
    /// `sync` of a MANIFEST.
    ManifestSync,
    /// `remove_file` of a table.
    TableRemoval,
}

/// A gate callers of one kind of operation wait at while it is closed.
#[derive(Default)]
struct Gate {
    closed: Mutex<Option<Held>>,
    opened: Condvar,
    waiting: AtomicU64,
    /// Sleep this many microseconds (times a pseudo-random 0..4) in every
    /// MANIFEST sync, to widen the window a MANIFEST write is in flight.
    manifest_delay_us: AtomicU64,
    calls: AtomicU64,
    /// MANIFEST syncs that passed the gate or were held at it.
    manifest_syncs: AtomicU64,
    /// The next MANIFEST sync to come panics (a job that unwinds inside its
    /// MANIFEST write).
    panic_next_manifest_sync: AtomicBool,
}

impl Gate {
    fn pass(&self, what: Held) {
        if what == Held::ManifestSync {
            if self.panic_next_manifest_sync.swap(false, Ordering::SeqCst) {
                panic!("injected panic: a job unwinds inside its MANIFEST sync");
            }
            self.manifest_syncs.fetch_add(1, Ordering::SeqCst);
            let delay = self.manifest_delay_us.load(Ordering::Relaxed);
            if delay > 0 {
                let n = self.calls.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(delay * (n * 7 % 4)));
            }
        }
        let mut closed = self.closed.lock();
        if *closed == Some(what) {
            self.waiting.fetch_add(1, Ordering::SeqCst);
            // Tells `wait_for_a_caller` (under the lock, so it cannot miss it).
            self.opened.notify_all();
            while *closed == Some(what) {
                self.opened.wait(&mut closed);
            }
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn close(&self, what: Held) {
        *self.closed.lock() = Some(what);
    }

    fn open(&self) {
        *self.closed.lock() = None;
        self.opened.notify_all();
    }

    /// Waits until a caller is held at the gate.
    fn wait_for_a_caller(&self) {
        let deadline = std::time::Instant::now() + STUCK;
        let mut closed = self.closed.lock();
        while self.waiting.load(Ordering::SeqCst) == 0 {
            assert!(!self.opened.wait_until(&mut closed, deadline).timed_out(), "nothing reached the gate");
        }
    }
}

impl FsHooks for Gate {
    fn before_sync(&self, path: &Path) {
        if is_manifest(path) {
            self.pass(Held::ManifestSync);
        }
    }
    fn before_remove(&self, path: &Path) {
        if path.extension().is_some_and(|e| e == "sst") {
            self.pass(Held::TableRemoval);
        }
    }
}

fn is_manifest(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-"))
}

/// Options on [`MemFs`] `fs` with a [`Gate`] in MANIFEST syncs and table removals.
fn gated(fs: &MemFs) -> (Options, Arc<Gate>) {
    let gate = Arc::new(Gate::default());
    let mut o = tiny_options(None);
    o.fs = Arc::new(HookedFs::new(fs.clone(), Arc::clone(&gate) as Arc<dyn FsHooks>));
    (o, gate)
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: usize, round: usize) -> Vec<u8> {
    format!("value {i} round {round} ").repeat(6).into_bytes()
}

/// Writes `n` small keys on another thread and says when all are
/// acknowledged and read back.
fn write_elsewhere(db: &Arc<Db>, from: usize, n: usize) -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel();
    let db = Arc::clone(db);
    std::thread::spawn(move || {
        for i in from..from + n {
            db.put_opt(&key(i), b"small", &WriteOptions::default()).unwrap();
        }
        for i in from..from + n {
            assert_eq!(db.get(&key(i)).unwrap().as_deref(), Some(&b"small"[..]));
        }
        let _ = tx.send(());
    });
    rx
}

/// Holds calls of kind `what` at the gate while `job` runs on another
/// thread, writes meanwhile, and fails unless every write is acknowledged
/// (and read back) before the gate opens; then lets the job finish, which
/// must succeed. `held` names the held call in the failure.
fn write_while_held(db: &Arc<Db>, gate: &Gate, what: Held, job: fn(&Db) -> ebb::Result<()>, held: &str) {
    gate.close(what);
    let job = {
        let db = Arc::clone(db);
        std::thread::spawn(move || job(&db))
    };
    gate.wait_for_a_caller();
    let done = write_elsewhere(db, 1000, 200).recv_timeout(STUCK);
    gate.open();
    job.join().unwrap().unwrap();
    done.unwrap_or_else(|_| panic!("writes waited for {held}"));
}

#[test]
fn writes_go_on_while_a_flush_syncs_the_manifest() {
    let fs = MemFs::new();
    let (mut o, gate) = gated(&fs);
    // Room for the writes below in the memtable: none of them switches it.
    o.write_buffer_size = 1 << 20;
    let db = Arc::new(Db::open(DB, o).unwrap());
    for i in 0..50 {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    write_while_held(&db, &gate, Held::ManifestSync, |db| db.flush(true), "the flush's MANIFEST sync");
    for i in 0..50 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, 0)));
    }
    assert_eq!(db.metrics().files_per_level.first(), Some(&1), "the flush installed its table");
}

/// A flush whose edit rolls a new MANIFEST (the open one is over
/// `max_manifest_file_size`) writes the whole state into it, syncs it and
/// points CURRENT at it with the mutex released, as an append is written:
/// RocksDB writes its new descriptor without the mutex too.
#[test]
fn writes_go_on_while_a_flush_rolls_a_new_manifest() {
    let fs = MemFs::new();
    let (mut o, gate) = gated(&fs);
    o.write_buffer_size = 1 << 20;
    // Every MANIFEST is over its size once anything is in it.
    o.max_manifest_file_size = 1;
    let db = Arc::new(Db::open(DB, o).unwrap());
    let current = || fs.read_file(Path::new("/db/CURRENT")).unwrap();
    let before = current();
    for i in 0..50 {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    write_while_held(&db, &gate, Held::ManifestSync, |db| db.flush(true), "the sync of a new MANIFEST");
    assert_ne!(current(), before, "the flush's edit went into a new MANIFEST");
    for i in 0..50 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, 0)));
    }
    let manifests =
        |fs: &MemFs| fs.list_dir(Path::new(DB)).unwrap().into_iter().filter(|n| n.starts_with("MANIFEST-")).count();
    db.flush(true).unwrap();
    db.wait_for_compact().unwrap();
    assert_eq!(manifests(&fs), 1, "the MANIFESTs the rolls replaced were deleted");
    drop(db);
    let db = Db::open(DB, tiny_options(None).with_fs(Arc::new(fs.clone()))).unwrap();
    for i in 0..50 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, 0)), "after a reopen");
    }
}

#[test]
fn writes_go_on_while_a_compaction_deletes_its_inputs() {
    let fs = MemFs::new();
    let (mut o, gate) = gated(&fs);
    o.write_buffer_size = 1 << 20;
    o.disable_auto_compactions = true;
    let db = Arc::new(Db::open(DB, o).unwrap());
    for round in 0..3 {
        for i in 0..50 {
            db.put(&key(i), &value(i, round)).unwrap();
        }
        db.flush(true).unwrap();
    }
    write_while_held(
        &db,
        &gate,
        Held::TableRemoval,
        |db| db.compact_range(None, None),
        "the unlink of a compaction input",
    );
    for i in 0..50 {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, 2)));
    }
}

/// Four writers, automatic flushes and compactions, and every MANIFEST sync
/// slowed: edits queue behind one another and obsolete files are looked
/// for while others are in flight. Every write is there, then after a
/// reopen, then after a power loss (all writes synced).
#[test]
fn slow_manifest_syncs_under_flushes_and_compactions_keep_every_write() {
    let fs = MemFs::new();
    let (o, gate) = gated(&fs);
    gate.manifest_delay_us.store(1500, Ordering::Relaxed);
    let db = Arc::new(Db::open(DB, o.clone()).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                let mut model = Model::new();
                for round in 0..6 {
                    for i in 0..150 {
                        let k = key(t * 10_000 + i);
                        let v = value(i, round);
                        db.put_opt(&k, &v, &SYNCED).unwrap();
                        model.insert(k, v);
                        if i % 37 == round {
                            let gone = key(t * 10_000 + (i + 11) % 150);
                            db.delete_opt(&gone, &SYNCED).unwrap();
                            model.remove(&gone);
                        }
                    }
                }
                model
            })
        })
        .collect();
    let compactor = {
        let db = Arc::clone(&db);
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                db.compact_range(None, None).unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let mut model = Model::new();
    for w in writers {
        model.extend(w.join().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    compactor.join().unwrap();
    db.wait_for_compact().unwrap();
    assert_eq!(common::scan(&db, Default::default()), model, "before the reopen");
    let metrics = db.metrics();
    let compactions: u64 = metrics.compactions_by_reason.iter().map(|(_, n)| n).sum();
    assert!(compactions > 0 && metrics.flushes > 10, "flushes and compactions ran: {metrics:?}");
    let db = Arc::into_inner(db).expect("the only handle");
    db.close().unwrap();
    let db = Db::open(DB, o.clone()).unwrap();
    assert_eq!(common::scan(&db, Default::default()), model, "after the reopen");
    for i in 0..40 {
        db.put_opt(&key(90_000 + i), &value(i, 9), &SYNCED).unwrap();
        model.insert(key(90_000 + i), value(i, 9));
    }
    // What the disk holds now; a flush the writes started never touches it.
    let disk = fs.crash_clone(CrashMode::DropUnsynced);
    drop(db);
    let db = Db::open(DB, tiny_options(Some(disk))).unwrap();
    assert_eq!(common::scan(&db, Default::default()), model, "after a power loss");
}

/// A family is dropped while its flush waits for the MANIFEST writer the
/// drop holds: the flush is cancelled, not a background error (before, it
/// found its family gone when it prepared its edit and stopped the
/// database with "edit for unknown column family"). Its table is deleted,
/// the other families go on, and a reopen sees them whole.
#[test]
fn a_flush_waiting_for_the_manifest_behind_its_familys_drop_is_cancelled() {
    let fs = MemFs::new();
    let (mut o, gate) = gated(&fs);
    o.write_buffer_size = 1 << 20;
    let db = Arc::new(Db::open(DB, o.clone()).unwrap());
    let victim = db.create_column_family("victim", &o).unwrap();
    for i in 0..50 {
        db.put(&key(i), &value(i, 0)).unwrap();
        db.put_cf(&victim, &key(i), &value(i, 1)).unwrap();
    }
    let tables = || fs.list_dir(Path::new(DB)).unwrap().into_iter().filter(|n| n.ends_with(".sst")).count();
    assert_eq!(tables(), 0);
    gate.close(Held::ManifestSync);
    let dropper = {
        let (db, victim) = (Arc::clone(&db), victim.clone());
        std::thread::spawn(move || db.drop_column_family(&victim))
    };
    gate.wait_for_a_caller();
    let flusher = {
        let (db, victim) = (Arc::clone(&db), victim.clone());
        std::thread::spawn(move || db.flush_cf(&victim, true))
    };
    // The flush writes its table without the mutex, then waits for the
    // MANIFEST writer: give it the time to get there.
    let start = std::time::Instant::now();
    while tables() == 0 {
        assert!(start.elapsed() < STUCK, "the flush wrote no table");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(100));
    gate.open();
    dropper.join().unwrap().unwrap();
    let _ = flusher.join().unwrap();
    db.flush(true).unwrap();
    assert_eq!(db.get_property("ebb.background-errors").as_deref(), Some("0"));
    for i in 0..50 {
        db.put(&key(1000 + i), &value(i, 2)).unwrap();
    }
    db.flush(true).unwrap();
    assert_eq!(tables(), 2, "the cancelled flush's table is deleted, the default family's two stay");
    drop(victim);
    let db = Arc::into_inner(db).expect("the only handle");
    db.close().unwrap();
    assert_eq!(Db::list_column_families(DB, &o).unwrap(), vec!["default".to_string()]);
    let db = Db::open(DB, o).unwrap();
    assert_eq!(common::scan(&db, Default::default()).len(), 100);
}

/// Families "a", "b", ... (`n` of them) besides the default, with 50 keys
/// in each, family `k` (the default is 0) writing `value(i, k)`.
fn families(db: &Db, o: &Options, n: usize) -> Vec<ebb::ColumnFamilyHandle> {
    let others: Vec<_> =
        (0..n).map(|k| db.create_column_family(&((b'a' + k as u8) as char).to_string(), o).unwrap()).collect();
    for i in 0..50 {
        db.put(&key(i), &value(i, 0)).unwrap();
        for (k, cf) in others.iter().enumerate() {
            db.put_cf(cf, &key(i), &value(i, k + 1)).unwrap();
        }
    }
    others
}

/// Holds the default family's flush in its MANIFEST sync, then flushes
/// `queued`, whose edits queue behind it; waits until all have written
/// their tables and had the time to queue. Returns the flush threads,
/// default first.
fn queue_flushes_behind_a_held_one(
    fs: &MemFs,
    db: &Arc<Db>,
    gate: &Gate,
    queued: &[ebb::ColumnFamilyHandle],
) -> Vec<std::thread::JoinHandle<ebb::Result<()>>> {
    let tables = || fs.list_dir(Path::new(DB)).unwrap().into_iter().filter(|n| n.ends_with(".sst")).count();
    gate.close(Held::ManifestSync);
    let mut flushes = vec![{
        let db = Arc::clone(db);
        std::thread::spawn(move || db.flush(true))
    }];
    gate.wait_for_a_caller();
    for cf in queued {
        let (db, cf) = (Arc::clone(db), cf.clone());
        flushes.push(std::thread::spawn(move || db.flush_cf(&cf, true)));
    }
    let start = std::time::Instant::now();
    while tables() < 1 + queued.len() {
        assert!(start.elapsed() < STUCK, "the queued flushes wrote no tables");
        std::thread::sleep(Duration::from_millis(1));
    }
    // From its table's sync to its place in the MANIFEST queue a flush
    // takes microseconds: give it far more.
    std::thread::sleep(Duration::from_millis(300));
    flushes
}

/// Options on `fs` with a gate, for the queue tests: room for their writes
/// in one memtable, four flush threads, no compactions.
fn queue_options(fs: &MemFs) -> (Options, Arc<Gate>) {
    let (mut o, gate) = gated(fs);
    o.write_buffer_size = 1 << 20;
    o.max_background_flushes = 4;
    o.disable_auto_compactions = true;
    (o, gate)
}

/// Opens the database with the families `names`, each on `o`, and checks
/// that family `k` holds `value(i, k)` for each of the 50 keys.
fn check_families(o: &Options, names: &[String], ctx: &str) {
    let families: Vec<(&str, Options)> = names.iter().map(|n| (n.as_str(), o.clone())).collect();
    let db = Db::open_cf(DB, o.clone(), &families).unwrap();
    for (k, name) in names.iter().enumerate() {
        let cf = db.cf_handle(name).unwrap();
        for i in 0..50 {
            assert_eq!(db.get_cf(&cf, &key(i)).unwrap(), Some(value(i, k)), "family {name} {ctx}");
        }
    }
}

fn level0_files(db: &Db, cf: &ebb::ColumnFamilyHandle) -> Option<String> {
    db.get_property_cf(cf, "ebb.num-files-at-level0")
}

/// The edits of jobs that queue behind a MANIFEST write go out together:
/// one append and one sync for both flushes (RocksDB's manifest writer
/// queue), not one each. Every family's data is then in its tables, through
/// a reopen and a power loss.
#[test]
fn edits_queued_behind_a_manifest_write_go_out_in_one_sync() {
    let fs = MemFs::new();
    let (o, gate) = queue_options(&fs);
    let db = Arc::new(Db::open(DB, o.clone()).unwrap());
    let others = families(&db, &o, 2);
    let flushes = queue_flushes_behind_a_held_one(&fs, &db, &gate, &others);
    let held = gate.manifest_syncs.load(Ordering::SeqCst);
    gate.open();
    for f in flushes {
        f.join().unwrap().unwrap();
    }
    assert_eq!(
        gate.manifest_syncs.load(Ordering::SeqCst) - held,
        1,
        "the two queued flushes' edits took one MANIFEST sync"
    );
    for cf in &others {
        assert_eq!(level0_files(&db, cf).as_deref(), Some("1"));
    }
    // What the disk holds, writes unsynced included: the families' data
    // is in tables now, not only in a WAL.
    let disk = fs.crash_clone(CrashMode::DropUnsynced);
    drop(others);
    let db = Arc::into_inner(db).expect("the only handle");
    db.close().unwrap();
    let mut after_power_loss = tiny_options(Some(disk));
    after_power_loss.create_if_missing = false;
    let names = Db::list_column_families(DB, &after_power_loss).unwrap();
    assert_eq!(names, ["default", "a", "b"]);
    check_families(&after_power_loss, &names, "after the power loss");
}

/// The job leading a batch unwinds inside its MANIFEST write: the jobs of
/// its batch are not lost with it. They go back to the queue, the next
/// leader writes their edits (in a new MANIFEST), their flushes install,
/// and a reopen finds every family's data, the unwound flush's included
/// (still in the WAL).
#[test]
fn a_leader_unwinding_in_its_manifest_write_leaves_its_batch_to_the_next() {
    let fs = MemFs::new();
    let (o, gate) = queue_options(&fs);
    let db = Arc::new(Db::open(DB, o.clone()).unwrap());
    let others = families(&db, &o, 3);
    // Three flushes queue behind the held one: when it is installed, the
    // first of them leads a batch of all three, and unwinds.
    let flushes = queue_flushes_behind_a_held_one(&fs, &db, &gate, &others);
    gate.panic_next_manifest_sync.store(true, Ordering::SeqCst);
    gate.open();
    // Watched, not joined: a job left waiting forever must fail the test,
    // not hang it.
    let start = std::time::Instant::now();
    while others.iter().filter(|cf| level0_files(&db, cf).as_deref() == Some("1")).count() < 2 {
        if start.elapsed() > STUCK {
            // Dropping the database would wait for the stuck jobs forever.
            std::mem::forget((db, others, flushes));
            panic!("the unwound leader's batch was never installed");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(!gate.panic_next_manifest_sync.load(Ordering::SeqCst), "no MANIFEST sync came after the held one");
    let results: Vec<ebb::Result<()>> = flushes.into_iter().map(|f| f.join().unwrap()).collect();
    assert!(results.iter().any(|r| r.is_err()), "no flush saw the unwound job");
    drop(others);
    let db = Arc::into_inner(db).expect("the only handle");
    let _ = db.close();
    check_families(&o, &Db::list_column_families(DB, &o).unwrap(), "after the reopen");
}

/// A MANIFEST append whose sync fails may or may not be on disk: CURRENT
/// still names that MANIFEST, which may list the failed edit's new table.
/// The table must stay until a new MANIFEST without it is installed; a
/// directory scan after the failure deleted it, and the reopen then failed
/// with "table N listed in MANIFEST is missing" (found by `io_errors`).
#[test]
fn a_failed_manifest_sync_keeps_the_tables_its_edit_named() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.disable_auto_compactions = true;
    let db = Db::open(DB, o.clone()).unwrap();
    for i in 0..200 {
        db.put(&key(i), &value(i, 0)).unwrap();
    }
    db.flush(true).unwrap();
    for i in 0..200 {
        db.put(&key(i), &value(i, 1)).unwrap();
    }
    fs.inject(ebb::fs::FaultRule::new(ebb::fs::FaultOp::Sync).path_contains("MANIFEST").persistent());
    assert!(db.flush(true).is_err(), "the flush's MANIFEST sync fails");
    // A look for obsolete files after the failure, which asked for a
    // directory scan (as a job that finished before it would make).
    db.disable_file_deletions();
    db.enable_file_deletions();
    let _ = db.close();
    fs.clear_faults();
    let db = Db::open(DB, o).unwrap_or_else(|e| panic!("reopen after a failed MANIFEST sync: {e}"));
    for i in (0..200).step_by(7) {
        assert_eq!(db.get(&key(i)).unwrap(), Some(value(i, 1)), "key {i}");
    }
}

/// Reads each family's merged key at every flush's end, from the flush's
/// own thread (right after its job installed its edits, before any other
/// job may have run).
#[derive(Default)]
struct ReadAtFlushEnd {
    target: Mutex<Option<(std::sync::Weak<Db>, Vec<ebb::ColumnFamilyHandle>)>>,
    seen: Mutex<Vec<(String, Option<Vec<u8>>)>>,
}

impl ebb::EventListener for ReadAtFlushEnd {
    fn on_flush_completed(&self, _info: &ebb::FlushJobInfo) {
        let target = self.target.lock();
        let Some((db, families)) = target.as_ref() else { return };
        let Some(db) = db.upgrade() else { return };
        for cf in families {
            let got = db.get_cf(cf, b"merged").unwrap();
            self.seen.lock().push((cf.name().to_string(), got));
        }
    }
}

/// A job leading a batch installs the other jobs' edits with its own, and
/// then the super versions of every family. A flush queued behind it must
/// leave its family's immutable memtables in that same step: a super version
/// listing both the flush's table and the memtable it came from reads each
/// entry twice, and a merge operand read twice is a wrong value ("m,m" for
/// "m"; found by the comparator model test in CI).
#[test]
fn a_flush_installed_by_another_jobs_batch_leaves_its_memtables_in_the_same_step() {
    for round in 0..10 {
        let fs = MemFs::new();
        let (mut o, gate) = queue_options(&fs);
        o.merge_operator = Some(ebb::merge_operator::from_name("stringappend").unwrap());
        let reads = Arc::new(ReadAtFlushEnd::default());
        o.listeners.push(reads.clone());
        let db = Arc::new(Db::open(DB, o.clone()).unwrap());
        let queued: Vec<_> = ["a", "b"].iter().map(|n| db.create_column_family(n, &o).unwrap()).collect();
        // A family left unflushed keeps the WAL: no job deletes a file, so
        // none releases the db mutex between its install and its listeners.
        let unflushed = db.create_column_family("c", &o).unwrap();
        db.put_cf(&unflushed, b"k", b"v").unwrap();
        db.put(b"k", b"v").unwrap();
        for cf in &queued {
            db.merge_cf(cf, b"merged", b"m").unwrap();
        }
        *reads.target.lock() = Some((Arc::downgrade(&db), queued.clone()));
        let flushes = queue_flushes_behind_a_held_one(&fs, &db, &gate, &queued);
        gate.open();
        for f in flushes {
            f.join().unwrap().unwrap();
        }
        *reads.target.lock() = None;
        let seen = std::mem::take(&mut *reads.seen.lock());
        assert_eq!(seen.len(), 6, "round {round}: three flushes, two reads each: {seen:?}");
        for (family, got) in &seen {
            assert_eq!(got.as_deref(), Some(&b"m"[..]), "round {round}: family {family}: {seen:?}");
        }
        for cf in &queued {
            assert_eq!(db.get_cf(cf, b"merged").unwrap().as_deref(), Some(&b"m"[..]));
        }
        drop((queued, unflushed));
        Arc::into_inner(db).expect("the only handle").close().unwrap();
    }
}
