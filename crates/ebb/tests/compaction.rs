//! Compaction, background work and write stalls, observed from outside.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::sync::{Gate, Watched};
use common::{scan, tiny_options};
use ebb::fs::MemFs;
use ebb::StallCause;
use ebb::{CompactionJobInfo, Db, EventListener, ReadOptions, StallCondition};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[derive(Default)]
struct Recorder {
    conditions: Mutex<Vec<StallCondition>>,
    compactions: Mutex<Vec<CompactionJobInfo>>,
    begun: AtomicUsize,
    flushes: AtomicUsize,
    /// While closed, a compaction that begins waits in `on_compaction_begin`
    /// (the job is already registered as running, so it can be cancelled).
    hold_begin: Gate,
}

impl EventListener for Recorder {
    fn on_flush_completed(&self, _info: &ebb::FlushJobInfo) {
        self.flushes.fetch_add(1, Ordering::SeqCst);
    }
    fn on_compaction_begin(&self, _info: &CompactionJobInfo) {
        self.begun.fetch_add(1, Ordering::SeqCst);
        self.hold_begin.pass();
    }
    fn on_compaction_completed(&self, info: &CompactionJobInfo) {
        self.compactions.lock().unwrap().push(info.clone());
    }
    fn on_stall_conditions_changed(&self, _previous: StallCondition, current: StallCondition) {
        self.conditions.lock().unwrap().push(current);
    }
}

/// A thread writing 4,000 keys of 64 bytes `fill` in a scattered order; the
/// flag is set once every write returned.
fn spawn_writer(db: &Arc<Db>, fill: u8) -> (std::thread::JoinHandle<()>, Arc<AtomicBool>) {
    let done = Arc::new(AtomicBool::new(false));
    let (db, flag) = (db.clone(), done.clone());
    let writer = std::thread::spawn(move || {
        for i in 0..4000u32 {
            db.put(format!("key{:06}", (i * 7919) % 4000).as_bytes(), &[fill; 64]).unwrap();
        }
        flag.store(true, Ordering::SeqCst);
    });
    (writer, done)
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn sequential_inserts_only_move_files() {
    let fs = MemFs::new();
    let rec = Arc::new(Recorder::default());
    let mut o = tiny_options(Some(fs));
    // One compaction at a time, so L0->base never finds the base level busy:
    // with two, a slow machine can see L0 reach trigger + 2 files while a
    // move out of the base level runs, and L0 then merges into itself
    // (RocksDB's intra-L0, which rewrites data by design).
    o.max_background_compactions = 1;
    // RocksDB's leveled moves: under the adaptive default a slow (debug)
    // build can fall behind, defer, and merge L0 runs (docs/tuning.md).
    o.background_tuning = ebb::BackgroundTuning::Off;
    o.listeners.push(rec.clone());
    let db = Db::open("/db", o).unwrap();
    for i in 0..20_000u32 {
        db.put(format!("key{i:08}").as_bytes(), &[b'v'; 40]).unwrap();
    }
    db.flush(true).unwrap();
    db.wait_for_compact().unwrap();
    let m = db.metrics();
    assert!(m.files_per_level.iter().skip(1).sum::<usize>() > 0, "nothing left L0: {:?}", m.files_per_level);
    let mut moved_levels = 0;
    for (level, l) in m.level_compaction.iter().enumerate().skip(1) {
        assert_eq!(l.bytes_written, 0, "level {level} rewrote data under fillseq: {l:?}");
        if l.bytes_moved > 0 {
            moved_levels += 1;
        }
    }
    assert!(moved_levels > 0, "no trivial move happened: {:?}", m.level_compaction);
    let infos = rec.compactions.lock().unwrap();
    assert!(!infos.is_empty() && infos.iter().all(|c| c.trivial_move), "{infos:?}");
    // Write amplification is 1.0: only flushes wrote data.
    assert_eq!(m.compaction_bytes_written, 0);
    assert_eq!(scan(&db, ReadOptions::default()).len(), 20_000);
}

#[test]
fn random_inserts_compact_and_keep_levels_sorted() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs));
    o.max_subcompactions = 2;
    let db = Db::open("/db", o).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut model = BTreeMap::new();
    for i in 0..30_000u32 {
        let k = format!("key{:06}", rng.gen_range(0..5000)).into_bytes();
        let v = format!("value{i}").into_bytes();
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.flush(true).unwrap();
    db.wait_for_compact().unwrap();
    let m = db.metrics();
    assert!(m.compaction_bytes_written > 0, "no compaction rewrote data");
    assert!(m.files_per_level[0] < 2, "L0 not compacted: {:?}", m.files_per_level);
    assert_eq!(scan(&db, ReadOptions::default()), model);
    let stats = db.get_property("ebb.stats").unwrap();
    assert!(stats.contains("** Compaction Stats [default] **"), "{stats}");
}

/// Stalls engage at their triggers and release when compaction catches up;
/// a `set_options` change applies to the next decision.
/// Holds every compaction at its first output sync while `held` is closed
/// (compactions run on the `ebb-compact-N` threads; flushes do not).
struct HoldCompactions {
    held: Gate,
}

impl common::hooked_fs::FsHooks for HoldCompactions {
    fn before_sync(&self, _path: &std::path::Path) {
        if std::thread::current().name().is_some_and(|n| n.starts_with("ebb-compact")) {
            self.held.pass();
        }
    }
}

/// A manual clock that tells the test when a thread waits for a long span
/// of it (ten seconds or more): a write delayed by the controller waits out
/// its delay so (the statistics dump's waits are shorter).
struct DelayWatch {
    clock: ebb::ManualClock,
    long_waits: Watched<usize>,
}

impl ebb::Clock for DelayWatch {
    fn now_micros(&self) -> u64 {
        self.clock.now_micros()
    }
    fn monotonic(&self) -> Duration {
        self.clock.monotonic()
    }
    fn monotonic_coarse(&self) -> Duration {
        self.clock.monotonic_coarse()
    }
    fn sleep_for(&self, d: Duration) {
        self.clock.sleep_for(d)
    }
    fn real_wait(&self, d: Duration) -> Duration {
        if d >= Duration::from_secs(10) {
            self.long_waits.update(|n| *n += 1);
        }
        self.clock.real_wait(d)
    }
}

#[test]
fn l0_stalls_engage_and_release() {
    let fs = MemFs::new();
    let rec = Arc::new(Recorder::default());
    let hold = Arc::new(HoldCompactions { held: Gate::closed() });
    let mut o = tiny_options(None);
    o.fs = Arc::new(common::hooked_fs::HookedFs::new(fs, hold.clone()));
    o.listeners.push(rec.clone());
    // Compactions start at two L0 files and are held (one thread each, no
    // subcompactions), so L0 grows with every flush until released.
    o.level0_file_num_compaction_trigger = 2;
    o.max_subcompactions = 1;
    o.level0_slowdown_writes_trigger = 3;
    o.level0_stop_writes_trigger = 5;
    o.delayed_write_rate = 4 << 20;
    // RocksDB's triggers as set: the adaptive default raises them above its
    // L0 bound (docs/tuning.md).
    o.background_tuning = ebb::BackgroundTuning::Off;
    let db = Arc::new(Db::open("/db", o).unwrap());
    let (writer, done) = spawn_writer(&db, 1);
    // ...so writes stop once L0 holds 5 files. The condition is in force as
    // soon as it is worked out, but the writer waits at it only when its
    // memtable fills (a write into a memtable with room goes on): wait
    // until it has waited there, not only until the condition is set.
    wait_until("the writer waiting at the stop", || {
        let m = db.metrics();
        matches!(m.stall_condition, Some(StallCondition::Stopped(StallCause::L0Stop))) && m.stall_micros_by_cause[1] > 0
    });
    assert_eq!(db.get_property("ebb.is-write-stopped").as_deref(), Some("1"));
    assert!(!done.load(Ordering::SeqCst));
    assert!(db.metrics().files_per_level[0] >= 5);
    // Letting compaction run releases the stall and the writer finishes.
    hold.held.open();
    writer.join().unwrap();
    db.wait_for_compact().unwrap();
    let conditions = rec.conditions.lock().unwrap().clone();
    assert!(conditions.contains(&StallCondition::Delayed(StallCause::L0Slowdown)), "{conditions:?}");
    assert!(conditions.contains(&StallCondition::Stopped(StallCause::L0Stop)), "{conditions:?}");
    let m = db.metrics();
    assert!(m.stall_micros_by_cause[1] > 0, "no L0 stop time recorded: {:?}", m.stall_micros_by_cause);
    let stats = db.get_property("ebb.stats").unwrap();
    let line = stats.lines().find(|l| l.starts_with("Cumulative stall:")).unwrap();
    assert!(!line.contains(" 0.0 percent") || m.stall_micros > 0, "{line}");
}

/// A write delayed by the controller waits no longer than its condition
/// lasts: here the delay worked out is 100 s (a 100 KB value at 1,000
/// bytes a second), and raising the slowdown trigger while the write waits
/// ends it. The database runs on a manual clock that never moves, so only
/// the condition's end can let the write go. The leader once slept its
/// whole delay at once, every writer queued behind it, whatever happened
/// meanwhile.
#[test]
fn a_delayed_write_ends_when_its_condition_does() {
    let fs = MemFs::new();
    let hold = Arc::new(HoldCompactions { held: Gate::closed() });
    let clock = Arc::new(DelayWatch {
        clock: ebb::ManualClock::new(Duration::from_secs(1_700_000_000)),
        long_waits: Watched::new(0),
    });
    let mut o = tiny_options(None).with_clock(clock.clone());
    o.fs = Arc::new(common::hooked_fs::HookedFs::new(fs, hold.clone()));
    o.level0_file_num_compaction_trigger = 2;
    o.max_subcompactions = 1;
    o.level0_slowdown_writes_trigger = 2;
    o.level0_stop_writes_trigger = 100;
    o.delayed_write_rate = 1000;
    o.background_tuning = ebb::BackgroundTuning::Off;
    let db = Arc::new(Db::open("/db", o).unwrap());
    for i in 0..2 {
        db.put(format!("k{i}").as_bytes(), b"v").unwrap();
        db.flush(true).unwrap();
    }
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, done) = (Arc::clone(&db), Arc::clone(&done));
        std::thread::spawn(move || {
            db.put(b"big", &vec![b'x'; 100_000]).unwrap();
            done.store(true, Ordering::SeqCst);
        })
    };
    clock.long_waits.wait_until("the write to wait out its delay", |n| *n > 0);
    assert!(!done.load(Ordering::SeqCst), "the write was not delayed");
    assert!(matches!(db.metrics().stall_condition, Some(StallCondition::Delayed(_))));
    db.set_options(&[("level0_slowdown_writes_trigger", "50")]).unwrap();
    wait_until("the delayed write to end with its condition", || done.load(Ordering::SeqCst));
    writer.join().unwrap();
    hold.held.open();
    db.wait_for_compact().unwrap();
    assert_eq!(db.get(b"big").unwrap().map(|v| v.len()), Some(100_000));
}

/// Slows each flush's syncs, so that a writer fills memtables faster than
/// they are flushed.
struct SlowFlushes;

impl common::hooked_fs::FsHooks for SlowFlushes {
    fn before_sync(&self, _path: &std::path::Path) {
        if std::thread::current().name().is_some_and(|n| n.starts_with("ebb-flush")) {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `flush(true)` returns once the memtables that held data at the call are
/// flushed, while a writer goes on filling new ones faster than flushes
/// empty them. It once waited until no immutable memtable was left and no
/// flush ran, which under such a writer is when the writer stops.
#[test]
fn a_waiting_flush_returns_while_writes_go_on() {
    let mut o = tiny_options(None);
    o.fs = Arc::new(common::hooked_fs::HookedFs::new(MemFs::new(), Arc::new(SlowFlushes)));
    o.max_write_buffer_number = 64;
    o.background_tuning = ebb::BackgroundTuning::Off;
    let db = Arc::new(Db::open("/db", o).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let start = Instant::now();
            let mut i = 0u64;
            // Bounded, so the test ends whatever the flush does.
            while !stop.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(30) {
                db.put(format!("k{:06}", i % 5000).as_bytes(), &[b'v'; 200]).unwrap();
                i += 1;
            }
            stop.swap(true, Ordering::SeqCst)
        })
    };
    // Memtables pile up behind the slowed flushes first.
    wait_until("immutable memtables to wait", || {
        db.get_property("ebb.num-immutable-mem-table").and_then(|n| n.parse::<usize>().ok()).is_some_and(|n| n >= 3)
    });
    db.put(b"marker", b"1").unwrap();
    db.flush(true).unwrap();
    let writer_was_running = !stop.swap(true, Ordering::SeqCst);
    writer.join().unwrap();
    assert!(writer_was_running, "flush(true) returned only once the writer had stopped");
    // The marker was in a memtable at the call: it is in a table now.
    assert_eq!(db.get(b"marker").unwrap(), Some(b"1".to_vec()));
}

/// As RocksDB sanitizes them: a stop trigger below the compaction trigger
/// would stop writes before L0 holds enough files for a compaction to start,
/// forever. The triggers are raised to the compaction trigger instead.
#[test]
fn stall_triggers_below_the_compaction_trigger_do_not_freeze_writes() {
    let mut o = tiny_options(Some(MemFs::new()));
    o.level0_file_num_compaction_trigger = 4;
    o.level0_slowdown_writes_trigger = 1;
    o.level0_stop_writes_trigger = 2;
    o.background_tuning = ebb::BackgroundTuning::Off;
    assert_eq!(o.effective_l0_stall_triggers(), (4, 4));
    let db = Arc::new(Db::open("/db", o).unwrap());
    let (writer, done) = spawn_writer(&db, 3);
    wait_until("the writer to finish (writes stopped for good?)", || done.load(Ordering::SeqCst));
    writer.join().unwrap();
    db.wait_for_compact().unwrap();
    assert!(db.metrics().compaction_bytes_written > 0);
    for i in 0..4000u32 {
        assert!(db.get(format!("key{i:06}").as_bytes()).unwrap().is_some(), "key {i}");
    }
}

#[test]
fn compaction_disabled_with_lifted_triggers_never_stalls_on_l0() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs));
    o.disable_auto_compactions = true;
    o.level0_file_num_compaction_trigger = 10_000;
    o.level0_slowdown_writes_trigger = 10_000;
    o.level0_stop_writes_trigger = 10_000;
    o.max_write_buffer_number = 6;
    let db = Db::open("/db", o).unwrap();
    for i in 0..20_000u32 {
        db.put(format!("key{:06}", (i * 7919) % 20_000).as_bytes(), &[2u8; 64]).unwrap();
    }
    db.flush(true).unwrap();
    let m = db.metrics();
    assert!(m.files_per_level[0] > 20, "expected many L0 files, got {:?}", m.files_per_level);
    for cause in [
        StallCause::L0Slowdown,
        StallCause::L0Stop,
        StallCause::PendingCompactionSlowdown,
        StallCause::PendingCompactionStop,
    ] {
        assert_eq!(m.stall_micros_by_cause[cause as usize], 0, "{cause:?} stalled with compaction disabled");
    }
    assert_eq!(m.compaction_bytes_written, 0);
    // Turning compaction back on is honoured by the next decision.
    db.set_options(&[("disable_auto_compactions", "false"), ("level0_file_num_compaction_trigger", "4")]).unwrap();
    db.wait_for_compact().unwrap();
    assert!(db.metrics().files_per_level[0] < 4, "{:?}", db.metrics().files_per_level);
}

#[test]
fn cancelled_compaction_leaves_a_consistent_database_and_no_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let rec = Arc::new(Recorder::default());
    let mut o = tiny_options(None);
    o.listeners.push(rec.clone());
    o.disable_auto_compactions = true;
    o.target_file_size_base = 1 << 20;
    o.block_size = 256;
    let db = Db::open(dir.path(), o.clone()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..40_000u32 {
        let k = format!("key{:06}", (i * 7919) % 40_000).into_bytes();
        db.put(&k, &[3u8; 50]).unwrap();
        model.insert(k, vec![3u8; 50]);
    }
    db.flush(true).unwrap();
    let l0_before = db.metrics().files_per_level[0];
    // Start compaction, and cancel it while it is held at its beginning, so
    // it cannot finish first however fast the machine is.
    rec.hold_begin.close();
    db.set_options(&[("disable_auto_compactions", "false")]).unwrap();
    rec.hold_begin.wait_for_waiting(1, "a compaction held at its beginning");
    db.set_options(&[("disable_auto_compactions", "true")]).unwrap();
    db.cancel_compactions();
    rec.hold_begin.open();
    wait_until("the compaction to end", || !rec.compactions.lock().unwrap().is_empty());
    db.wait_for_compact().unwrap();
    let cancelled = rec.compactions.lock().unwrap().iter().all(|c| c.cancelled);
    assert!(cancelled, "the compaction finished before it could be cancelled: {:?}", rec.compactions.lock().unwrap());
    assert_eq!(db.metrics().files_per_level[0], l0_before, "a cancelled compaction changed L0");
    assert_eq!(scan(&db, ReadOptions::default()), model);
    db.close().unwrap();
    let db = Db::open(dir.path(), o).unwrap();
    let live: usize = db.metrics().files_per_level.iter().sum();
    let on_disk = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".sst"))
        .count();
    assert_eq!(live, on_disk, "orphan SSTs after a cancelled compaction");
    assert_eq!(scan(&db, ReadOptions::default()), model);
}

/// Concurrent writers and readers with tiny memtables: every thread's keys end
/// as its model says, and a snapshot reads the same data twice.
#[test]
fn concurrent_writers_and_snapshot_readers() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs));
    o.max_background_compactions = 2;
    let db = Arc::new(Db::open("/db", o).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (db, stop) = (db.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut checks = 0;
                while !stop.load(Ordering::SeqCst) {
                    let snap = db.snapshot();
                    let a = scan(&db, snap.read_options());
                    let b = scan(&db, snap.read_options());
                    assert_eq!(a, b, "a snapshot changed under concurrent writes");
                    checks += 1;
                }
                checks
            })
        })
        .collect();
    let writers: Vec<_> = (0..3u32)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(u64::from(t));
                let mut model = BTreeMap::new();
                for i in 0..6000u32 {
                    let k = format!("t{t}-{:05}", rng.gen_range(0..1500)).into_bytes();
                    if rng.gen_bool(0.8) {
                        let v = format!("{t}:{i}").into_bytes();
                        db.put(&k, &v).unwrap();
                        model.insert(k, v);
                    } else {
                        db.delete(&k).unwrap();
                        model.remove(&k);
                    }
                }
                model
            })
        })
        .collect();
    let mut expected = BTreeMap::new();
    for w in writers {
        expected.extend(w.join().unwrap());
    }
    stop.store(true, Ordering::SeqCst);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(scan(&db, ReadOptions::default()), expected);
    db.wait_for_compact().unwrap();
    assert_eq!(scan(&db, ReadOptions::default()), expected);
}

/// Holds the first compaction out of L1 or deeper at its beginning while
/// the gate is closed, so L0→L1 is blocked on busy L1 files; the other
/// compaction thread goes on.
#[derive(Default)]
struct HoldDeepCompactions {
    gate: Gate,
    holding: AtomicBool,
}

impl EventListener for HoldDeepCompactions {
    fn on_compaction_begin(&self, info: &CompactionJobInfo) {
        if info.input_level >= 1 && !self.holding.swap(true, Ordering::SeqCst) {
            self.gate.pass();
        }
    }
}

/// Output file counts of finished L0→L0 compactions.
#[derive(Default)]
struct IntraL0Outputs(Mutex<Vec<usize>>);

impl EventListener for IntraL0Outputs {
    fn on_compaction_completed(&self, info: &CompactionJobInfo) {
        if info.input_level == 0 && info.output_level == 0 && !info.cancelled {
            self.0.lock().unwrap().push(info.output_files.len());
        }
    }
}

#[test]
fn l0_to_l0_runs_while_the_base_level_is_busy() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs));
    let outputs = Arc::new(IntraL0Outputs::default());
    let deep = Arc::new(HoldDeepCompactions::default());
    deep.gate.close();
    o.listeners.push(deep.clone());
    o.listeners.push(outputs.clone());
    o.max_background_compactions = 2;
    o.level0_slowdown_writes_trigger = 40;
    o.level0_stop_writes_trigger = 60;
    o.max_write_buffer_number = 6;
    o.level_compaction_dynamic_level_bytes = false;
    let db = Db::open("/db", o).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let mut model = BTreeMap::new();
    let start = Instant::now();
    while db.metrics().intra_l0_compactions == 0 && start.elapsed() < Duration::from_secs(30) {
        for _ in 0..500 {
            let k = format!("key{:06}", rng.gen_range(0..20_000)).into_bytes();
            let v = vec![b'x'; 60];
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
    }
    deep.gate.open();
    assert!(db.metrics().intra_l0_compactions > 0, "no L0→L0 compaction: {:?}", db.metrics().files_per_level);
    // The count above moves when a job is picked; its completion event comes
    // when it ends.
    db.wait_for_compact().unwrap();
    // Each merges its inputs into one L0 file, whatever the target file size
    // (several would be merged again by the next pick, without end).
    let outputs = outputs.0.lock().unwrap().clone();
    assert!(!outputs.is_empty() && outputs.iter().all(|n| *n == 1), "L0→L0 output files: {outputs:?}");
    assert_eq!(scan(&db, ReadOptions::default()), model);
}
