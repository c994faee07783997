//! Flushes run side by side, up to `max_background_flushes` (db/bg.rs,
//! `maybe_flush`), and a family's flushes install in the order of their
//! memtables (`wait_for_older_flushes`). Checked by holding the first
//! flush's table sync in a filesystem gate: a second flush writes its table
//! meanwhile, but does not install it before the first; a power loss at that
//! point, a failure of the held flush, and a reopen each keep every
//! acknowledged write, the newest version of a key winning.

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::hooked_fs::{FsHooks, HookedFs};
use common::{tiny_options, Model, SYNCED};
use ebb::fs::{CrashMode, FaultOp, FaultRule, MemFs};
use ebb::{Db, Options};
use parking_lot::{Condvar, Mutex};

const DB: &str = "/db";
/// How long a test waits for something that must happen before calling it
/// stuck (a watchdog, not a speed limit: the awaited step takes milliseconds).
const STUCK: Duration = Duration::from_secs(30);

/// Holds the first table sync that reaches it while closed; later table
/// syncs pass and are counted.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    /// Notified when the gate opens, and when a sync is held or passes.
    opened: Condvar,
}

#[derive(Default)]
struct GateState {
    closed: bool,
    /// The path of the table whose sync is held.
    holding: Option<String>,
    /// Table syncs that passed.
    passed: u64,
}

impl Gate {
    fn pass(&self, path: &str) {
        let mut st = self.state.lock();
        if st.closed && st.holding.is_none() {
            st.holding = Some(path.to_string());
            self.opened.notify_all();
            while st.closed {
                self.opened.wait(&mut st);
            }
            return;
        }
        st.passed += 1;
        self.opened.notify_all();
    }

    fn close(&self) {
        let mut st = self.state.lock();
        st.closed = true;
        st.holding = None;
    }

    fn open(&self) {
        self.state.lock().closed = false;
        self.opened.notify_all();
    }

    /// Waits until a table sync is held, and returns its path.
    fn wait_for_held(&self) -> String {
        let deadline = Instant::now() + STUCK;
        let mut st = self.state.lock();
        loop {
            if let Some(p) = st.holding.clone() {
                return p;
            }
            assert!(!self.opened.wait_until(&mut st, deadline).timed_out(), "no table sync reached the gate");
        }
    }

    /// Waits until `n` table syncs passed the closed gate.
    fn wait_for_passed(&self, n: u64, what: &str) {
        let deadline = Instant::now() + STUCK;
        let mut st = self.state.lock();
        while st.passed < n {
            assert!(!self.opened.wait_until(&mut st, deadline).timed_out(), "{what}");
        }
    }
}

/// Opens the gate when dropped: declared after the database, it is dropped
/// first, also when a failed assertion unwinds, so closing the database
/// never waits for a sync held forever.
struct OpenOnDrop(Arc<Gate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

impl FsHooks for Gate {
    fn before_sync(&self, path: &Path) {
        if path.extension().is_some_and(|e| e == "sst") {
            self.pass(&path.to_string_lossy());
        }
    }
}

/// Options on a gated `fs`: two flush threads, memtables switched only by
/// `flush`, no compaction (the tables stay in L0 where the test counts them).
fn gated(fs: &MemFs) -> (Options, Arc<Gate>) {
    let gate = Arc::new(Gate::default());
    let mut o = tiny_options(None);
    o.fs = Arc::new(HookedFs::new(fs.clone(), Arc::clone(&gate) as Arc<dyn FsHooks>));
    o.write_buffer_size = 1 << 20;
    o.max_write_buffer_number = 4;
    o.max_background_flushes = 2;
    o.disable_auto_compactions = true;
    (o, gate)
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: usize, round: usize) -> Vec<u8> {
    format!("value {i} round {round} ").repeat(4).into_bytes()
}

/// Writes keys `from..from + 50` and `shared` (synced), switches the
/// memtable and starts its flush without waiting.
fn fill_and_flush(db: &Db, model: &mut Model, from: usize, round: usize) {
    for i in from..from + 50 {
        db.put_opt(&key(i), &value(i, round), &SYNCED).unwrap();
        model.insert(key(i), value(i, round));
    }
    let shared = format!("shared round {round}").into_bytes();
    db.put_opt(b"shared", &shared, &SYNCED).unwrap();
    model.insert(b"shared".to_vec(), shared);
    db.flush(false).unwrap();
}

/// Starts two flushes, the first held in its table sync; returns once the
/// second has written and synced its table.
fn second_flush_beside_a_held_first(db: &Db, gate: &Gate, model: &mut Model) -> String {
    gate.close();
    fill_and_flush(db, model, 0, 0);
    let held = gate.wait_for_held();
    fill_and_flush(db, model, 50, 1);
    gate.wait_for_passed(1, "the second flush did not write its table while the first was held");
    held
}

fn l0_files(db: &Db) -> usize {
    db.metrics().files_per_level.first().copied().unwrap_or(0)
}

#[test]
fn a_second_flush_writes_beside_a_held_one_and_installs_after_it() {
    let fs = MemFs::new();
    let (o, gate) = gated(&fs);
    let db = Db::open(DB, o.clone()).unwrap();
    let _open = OpenOnDrop(Arc::clone(&gate));
    let mut model = Model::new();
    second_flush_beside_a_held_first(&db, &gate, &mut model);
    assert_eq!(db.metrics().running_flushes, 2, "both flushes run");
    // The second flush's table is written; it must not be installed before
    // the first's (a newer table listed while the older memtable's WAL is
    // still replayed at recovery). Watch for a while: installing takes
    // microseconds once the table is synced.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(300) {
        assert_eq!(l0_files(&db), 0, "a newer flush installed before the older one");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(common::scan(&db, Default::default()), model, "reads while both flushes run");

    // A power loss now: one table written, none installed.
    let disk = fs.crash_clone(CrashMode::DropUnsynced);
    {
        let after = Db::open(DB, tiny_options(Some(disk))).unwrap();
        assert_eq!(common::scan(&after, Default::default()), model, "after a power loss mid-flush");
    }

    gate.open();
    db.flush(true).unwrap();
    assert_eq!(l0_files(&db), 2, "each flush installed its table");
    assert_eq!(db.metrics().flushes, 2);
    assert_eq!(common::scan(&db, Default::default()), model, "after both flushes");
    db.close().unwrap();
    let db = Db::open(DB, o).unwrap();
    assert_eq!(db.get(b"shared").unwrap(), model.get(&b"shared"[..]).cloned(), "the newer table wins");
    assert_eq!(common::scan(&db, Default::default()), model, "after a reopen");
}

#[test]
fn a_failed_flush_cancels_the_newer_one_waiting_behind_it_and_loses_nothing() {
    let fs = MemFs::new();
    let (o, gate) = gated(&fs);
    let db = Db::open(DB, o.clone()).unwrap();
    let _open = OpenOnDrop(Arc::clone(&gate));
    let mut model = Model::new();
    let held = second_flush_beside_a_held_first(&db, &gate, &mut model);
    // The held flush's sync fails once the gate opens.
    let name = Path::new(&held).file_name().unwrap().to_string_lossy().into_owned();
    fs.inject(FaultRule::new(FaultOp::Sync).path_contains(name));
    gate.open();
    let err = db.flush(true).expect_err("the first flush failed");
    assert!(err.to_string().contains("sync"), "the failure names the sync: {err}");
    assert_eq!(l0_files(&db), 0, "the newer flush did not install over the failed one");
    let _ = db.close();
    fs.clear_faults();
    let db = Db::open(DB, o).unwrap();
    assert_eq!(common::scan(&db, Default::default()), model, "after a reopen");
}

/// Many small memtables under three flush threads and two writers: flushes
/// overlap and finish out of order; every write is there before and after a
/// reopen and a power loss.
#[test]
fn overlapping_flushes_under_writers_keep_every_write() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.max_background_flushes = 3;
    o.max_write_buffer_number = 6;
    let db = Arc::new(Db::open(DB, o.clone()).unwrap());
    let writers: Vec<_> = (0..2)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                let mut model = Model::new();
                for round in 0..5 {
                    for i in 0..300 {
                        let k = key(t * 10_000 + i);
                        let v = value(i, round);
                        db.put_opt(&k, &v, &SYNCED).unwrap();
                        model.insert(k, v);
                        if i % 41 == round {
                            let gone = key(t * 10_000 + (i + 7) % 300);
                            db.delete_opt(&gone, &SYNCED).unwrap();
                            model.remove(&gone);
                        }
                    }
                }
                model
            })
        })
        .collect();
    let mut model = Model::new();
    for w in writers {
        model.extend(w.join().unwrap());
    }
    db.wait_for_compact().unwrap();
    assert!(db.metrics().flushes > 10, "flushes ran: {:?}", db.metrics().flushes);
    assert_eq!(common::scan(&db, Default::default()), model, "before the reopen");
    let disk = fs.crash_clone(CrashMode::DropUnsynced);
    let db = Arc::into_inner(db).expect("the only handle");
    db.close().unwrap();
    let db = Db::open(DB, o).unwrap();
    assert_eq!(common::scan(&db, Default::default()), model, "after the reopen");
    drop(db);
    let db = Db::open(DB, tiny_options(Some(disk))).unwrap();
    assert_eq!(common::scan(&db, Default::default()), model, "after a power loss");
}
