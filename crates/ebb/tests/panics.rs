//! Panics cannot freeze the database (issue 15, part 4).
//!
//! - An event listener is user code: one that panics in a callback is
//!   written to the info log and ignored. Writes keep flowing through many
//!   flushes and compactions, `flush(true)`, `wait_for_compact` and `close`
//!   return `Ok`, and a reopen finds every write.
//! - With `--features failpoints`, a panic is injected at a kill point
//!   (src/kill_points.rs) on the thread of one kind of job: a flush, a
//!   compaction, a subcompaction, a manual compaction, the leader of a write
//!   group. The panic becomes the sticky background error
//!   (`Error::Background` wrapping `Error::Panicked`): every later write,
//!   `flush(true)`, `wait_for_compact`, `compact_range` and `close` return
//!   it, nothing is left running, a job that panicked before the MANIFEST
//!   could list its tables leaves none of them behind, and a reopen recovers
//!   every acknowledged write.
//!
//! Every test runs its body on a thread of its own and fails if that takes
//! longer than `TIMEOUT`, so a regression fails instead of hanging the
//! suite. The tests run one at a time (`serial`): the fail points are
//! process-global, and would fire in another test's database.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, Once};
use std::time::Duration;

use common::{scan, tiny_options, Model};
use ebb::fs::MemFs;
use ebb::{CompactionJobInfo, Db, EventListener, FlushJobInfo, Options, ReadOptions, StallCondition};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Longer than any test takes, by far: only a hang gets there.
const TIMEOUT: Duration = Duration::from_secs(60);

const DB: &str = "/db";

/// The start of every panic message these tests inject.
const INJECTED: &str = "injected panic";

/// Runs one test at a time.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Keeps the injected panics (hundreds, from listeners) out of the test
/// output; any other panic is printed as usual.
fn quiet_injected_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let message = info.payload().downcast_ref::<String>().map(String::as_str);
            if !message.is_some_and(|m| m.starts_with(INJECTED)) {
                default(info);
            }
        }));
    });
}

/// Runs `body` on a thread named `workload` and returns what it returns;
/// fails if it panics (saying so when an injected panic reached it, whose
/// message the hook keeps quiet) or takes longer than `TIMEOUT` (it is left
/// behind).
fn within_timeout<T: Send + 'static>(what: &str, body: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    let handle = std::thread::Builder::new()
        .name("workload".into())
        .spawn(move || {
            let value = body();
            let _ = tx.send(());
            value
        })
        .expect("spawn the workload thread");
    match rx.recv_timeout(TIMEOUT) {
        Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => match handle.join() {
            Ok(value) => value,
            Err(payload) => match payload.downcast_ref::<String>() {
                Some(m) if m.starts_with(INJECTED) => panic!("{what}: a call panicked: {m}"),
                _ => std::panic::resume_unwind(payload),
            },
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: hung for {TIMEOUT:?}"),
    }
}

/// The key and value of write `i`: keys repeat, so compactions drop data.
fn key_value(rng: &mut StdRng, i: u32) -> (Vec<u8>, Vec<u8>) {
    let key = format!("key{:05}", rng.gen_range(0..4000)).into_bytes();
    (key, format!("value{i:08}-{}", "v".repeat(24)).into_bytes())
}

/// The info log of the database on `fs`.
fn info_log(fs: &MemFs) -> String {
    String::from_utf8_lossy(&fs.file_bytes(&Path::new(DB).join("LOG")).unwrap_or_default()).into_owned()
}

/// Reopens the database on `o.fs` (without listeners) and checks that it
/// holds exactly `model`; with `nothing_set_aside`, that the open found no
/// table it could not place (a job's uninstalled output would be one).
fn reopen_and_check(o: &Options, model: &Model, nothing_set_aside: bool, ctx: &str) {
    let mut o = o.clone();
    o.listeners.clear();
    let db = Db::open(DB, o).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
    assert!(scan(&db, ReadOptions::default()) == *model, "{ctx}: the reopened database differs from the model");
    if nothing_set_aside {
        let report = db.recovery_report();
        assert!(report.set_aside.is_empty(), "{ctx}: the reopen set tables aside: {report}");
    }
    db.close().unwrap_or_else(|e| panic!("{ctx}: close after the reopen: {e}"));
}

/// Which listener callback panics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Callback {
    FlushBegin,
    FlushCompleted,
    CompactionBegin,
    CompactionCompleted,
    StallConditionsChanged,
}

impl Callback {
    fn method(self) -> &'static str {
        match self {
            Callback::FlushBegin => "on_flush_begin",
            Callback::FlushCompleted => "on_flush_completed",
            Callback::CompactionBegin => "on_compaction_begin",
            Callback::CompactionCompleted => "on_compaction_completed",
            Callback::StallConditionsChanged => "on_stall_conditions_changed",
        }
    }
}

/// A listener that panics every time its one callback is called.
struct PanickingListener {
    callback: Callback,
    calls: AtomicU64,
}

impl PanickingListener {
    fn called(&self, callback: Callback) {
        if callback == self.callback {
            self.calls.fetch_add(1, Ordering::SeqCst);
            panic!("{INJECTED} in {}", callback.method());
        }
    }
}

impl EventListener for PanickingListener {
    fn on_flush_begin(&self, _info: &FlushJobInfo) {
        self.called(Callback::FlushBegin)
    }
    fn on_flush_completed(&self, _info: &FlushJobInfo) {
        self.called(Callback::FlushCompleted)
    }
    fn on_compaction_begin(&self, _info: &CompactionJobInfo) {
        self.called(Callback::CompactionBegin)
    }
    fn on_compaction_completed(&self, _info: &CompactionJobInfo) {
        self.called(Callback::CompactionCompleted)
    }
    fn on_stall_conditions_changed(&self, _previous: StallCondition, _current: StallCondition) {
        self.called(Callback::StallConditionsChanged)
    }
}

fn listener_panics_in(callback: Callback) {
    let _serial = serial();
    quiet_injected_panics();
    let ctx = format!("a listener panicking in {}", callback.method());
    let body_ctx = ctx.clone();
    within_timeout(&ctx, move || {
        let ctx = body_ctx;
        let fs = MemFs::new();
        let listener = Arc::new(PanickingListener { callback, calls: AtomicU64::new(0) });
        let mut o = tiny_options(Some(fs.clone()));
        // Two L0 files delay writes, so the stall condition changes often
        // (RocksDB's triggers as set: the adaptive default raises them).
        o.level0_slowdown_writes_trigger = 2;
        o.background_tuning = ebb::BackgroundTuning::Off;
        o.delayed_write_rate = 64 << 20;
        o.listeners.push(listener.clone());
        let db = Db::open(DB, o.clone()).unwrap();
        let mut rng = StdRng::seed_from_u64(15);
        let mut model = Model::new();
        for i in 0..20_000u32 {
            let (k, v) = key_value(&mut rng, i);
            db.put(&k, &v).unwrap_or_else(|e| panic!("{ctx}: write {i}: {e}"));
            model.insert(k, v);
            if i % 5000 == 4999 {
                db.flush(true).unwrap_or_else(|e| panic!("{ctx}: flush after write {i}: {e}"));
            }
        }
        db.flush(true).unwrap_or_else(|e| panic!("{ctx}: flush: {e}"));
        db.wait_for_compact().unwrap_or_else(|e| panic!("{ctx}: wait_for_compact: {e}"));
        let m = db.metrics();
        let compactions: u64 = m.compactions_by_reason.iter().map(|(_, n)| n).sum();
        assert!(m.flushes >= 10 && compactions >= 3, "{ctx}: {} flushes, {compactions} compactions", m.flushes);
        let calls = listener.calls.load(Ordering::SeqCst);
        assert!(calls >= 1, "{ctx}: the callback was never called");
        assert_eq!(db.get_property("ebb.background-errors").as_deref(), Some("0"), "{ctx}");
        let line = format!("an event listener panicked in {0} (ignored): {INJECTED} in {0}", callback.method());
        assert!(info_log(&fs).contains(&line), "{ctx}: the info log does not say `{line}`");
        assert!(scan(&db, ReadOptions::default()) == model, "{ctx}: the database differs from the model");
        db.close().unwrap_or_else(|e| panic!("{ctx}: close: {e}"));
        reopen_and_check(&o, &model, true, &ctx);
    });
}

#[test]
fn listener_panicking_in_on_flush_begin_is_ignored() {
    listener_panics_in(Callback::FlushBegin);
}

#[test]
fn listener_panicking_in_on_flush_completed_is_ignored() {
    listener_panics_in(Callback::FlushCompleted);
}

#[test]
fn listener_panicking_in_on_compaction_begin_is_ignored() {
    listener_panics_in(Callback::CompactionBegin);
}

#[test]
fn listener_panicking_in_on_compaction_completed_is_ignored() {
    listener_panics_in(Callback::CompactionCompleted);
}

#[test]
fn listener_panicking_in_on_stall_conditions_changed_is_ignored() {
    listener_panics_in(Callback::StallConditionsChanged);
}

#[cfg(feature = "failpoints")]
mod injected {
    use super::*;

    use std::collections::BTreeSet;

    use ebb::fs::FileSystem;
    use ebb::{Error, WriteBatch};
    use fail::FailScenario;

    /// Every table a listener heard of being installed (flush and compaction
    /// outputs), so a test can tell a table that never was from an obsolete one.
    #[derive(Default)]
    struct InstalledTables(Mutex<BTreeSet<u64>>);

    impl EventListener for InstalledTables {
        fn on_flush_completed(&self, info: &FlushJobInfo) {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).insert(info.file_number);
        }
        fn on_compaction_completed(&self, info: &CompactionJobInfo) {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).extend(&info.output_files);
        }
    }

    /// The numbers of the tables in the database directory on `fs`.
    fn tables_on_disk(fs: &MemFs) -> BTreeSet<u64> {
        fs.list_dir(Path::new(DB))
            .expect("list the database directory")
            .iter()
            .filter_map(|name| name.strip_suffix(".sst").and_then(|n| n.parse().ok()))
            .collect()
    }

    /// The thread a panic is injected on.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum On {
        /// A flush thread (`ebb-flush-*`).
        Flush,
        /// A compaction thread (`ebb-compact-*`).
        Compaction,
        /// A subcompaction's thread (unnamed: scoped threads of a compaction).
        Subcompaction,
        /// The test's own thread (`workload`): `compact_range`.
        ManualCompaction,
    }

    impl On {
        fn here(self) -> bool {
            let name = std::thread::current().name().map(str::to_string);
            match self {
                On::Flush => name.is_some_and(|n| n.starts_with("ebb-flush")),
                On::Compaction => name.is_some_and(|n| n.starts_with("ebb-compact")),
                On::Subcompaction => name.is_none(),
                On::ManualCompaction => name.as_deref() == Some("workload"),
            }
        }

        /// The job name `Error::Panicked` gives.
        fn job(self) -> &'static str {
            match self {
                On::Flush => "flush",
                On::Compaction => "compaction",
                On::Subcompaction => "subcompaction",
                On::ManualCompaction => "manual compaction",
            }
        }
    }

    /// Configures `point` to panic at its first hit on a thread `on`
    /// accepts; returns that thread's hit count.
    fn panic_once_at(point: &'static str, on: On) -> Arc<AtomicU64> {
        let hits = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&hits);
        fail::cfg_callback(point, move || {
            if on.here() && counter.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("{INJECTED} at {point}");
            }
        })
        .expect("configure the fail point");
        hits
    }

    /// Checks that `e` is the sticky error made of the panic injected at `point`.
    fn assert_panicked(e: &Error, job: &str, point: &str, ctx: &str) {
        let Error::Background(inner) = e else { panic!("{ctx}: not the sticky error: {e:?}") };
        match inner.as_ref() {
            Error::Panicked { job: j, message } => {
                assert_eq!(*j, job, "{ctx}: {e}");
                assert_eq!(message, &format!("{INJECTED} at {point}"), "{ctx}: {e}");
            }
            other => panic!("{ctx}: the sticky error is not the panic: {other:?}"),
        }
    }

    /// What a test changes in `tiny_options`.
    type Tweak = fn(&mut Options);

    /// Writes until a call fails after the panic injected at `point` on
    /// `on`'s thread, then checks every promise of the module doc.
    fn panic_in_job(point: &'static str, on: On, tweak: Tweak) {
        let _serial = serial();
        quiet_injected_panics();
        let scenario = FailScenario::setup();
        let ctx = format!("a panic at {point} in a {}", on.job());
        let fs = MemFs::new();
        let installed = Arc::new(InstalledTables::default());
        let mut o = tiny_options(Some(fs.clone()));
        tweak(&mut o);
        o.listeners.push(installed.clone());
        let hits = panic_once_at(point, on);
        let (body_ctx, body_o) = (ctx.clone(), o.clone());
        let model = within_timeout(&ctx, move || {
            let (ctx, o) = (body_ctx, body_o);
            let db = Db::open(DB, o).unwrap();
            let mut rng = StdRng::seed_from_u64(4);
            let mut model = Model::new();
            let mut first_error = None;
            for i in 0..50_000u32 {
                let (k, v) = key_value(&mut rng, i);
                match db.put(&k, &v) {
                    Ok(()) => {
                        model.insert(k, v);
                    }
                    Err(e) => {
                        first_error = Some(e);
                        break;
                    }
                }
                if on == On::ManualCompaction && i % 1000 == 999 {
                    if let Err(e) = db.compact_range(None, None) {
                        first_error = Some(e);
                        break;
                    }
                }
            }
            let e = first_error.unwrap_or_else(|| panic!("{ctx}: no call failed"));
            assert_panicked(&e, on.job(), point, &ctx);
            // Sticky, and no call waits for the job that is gone.
            assert_panicked(&db.put(b"after", b"panic").unwrap_err(), on.job(), point, &ctx);
            assert_panicked(&db.flush(true).unwrap_err(), on.job(), point, &ctx);
            assert_panicked(&db.wait_for_compact().unwrap_err(), on.job(), point, &ctx);
            assert_panicked(&db.compact_range(None, None).unwrap_err(), on.job(), point, &ctx);
            // What the panic interrupted may be half done: no resume ends it.
            assert_panicked(&db.resume().unwrap_err(), on.job(), point, &ctx);
            assert_panicked(&db.put(b"after", b"resume").unwrap_err(), on.job(), point, &ctx);
            // Nothing is left running (this waits until no job runs).
            db.pause_background_work();
            let m = db.metrics();
            assert_eq!((m.running_flushes, m.running_compactions), (0, 0), "{ctx}");
            db.continue_background_work();
            assert_eq!(db.get_property("ebb.background-errors").as_deref(), Some("1"), "{ctx}");
            assert!(scan(&db, ReadOptions::default()) == model, "{ctx}: reads differ from the model");
            assert_panicked(&db.close().unwrap_err(), on.job(), point, &ctx);
            model
        });
        fail::remove(point);
        scenario.teardown();
        assert_eq!(hits.load(Ordering::SeqCst).min(1), 1, "{ctx}: the fail point was never hit");
        let line = format!("background error: {} panicked: {INJECTED} at {point}", on.job());
        assert!(info_log(&fs).contains(&line), "{ctx}: the info log does not say `{line}`");
        // Before the edit naming them may have reached the MANIFEST, a job's
        // tables are deleted; after, they are kept for the reopen to judge.
        let before_manifest = !matches!(point, "manifest_append" | "obsolete_delete");
        if before_manifest {
            let installed = installed.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let stray: Vec<u64> = tables_on_disk(&fs).difference(&installed).copied().collect();
            assert!(stray.is_empty(), "{ctx}: tables never installed are left: {stray:?}");
        }
        reopen_and_check(&o, &model, before_manifest, &ctx);
    }

    fn defaults(_: &mut Options) {}

    /// One compaction at a time, not split: the compaction thread merges.
    fn unsplit(o: &mut Options) {
        o.max_subcompactions = 1;
        o.max_background_compactions = 1;
    }

    /// Compactions split in up to 4 subcompactions on threads of their own.
    fn split(o: &mut Options) {
        o.max_subcompactions = 4;
        o.level0_file_num_compaction_trigger = 4;
    }

    /// Only `compact_range` compacts, on the caller's thread.
    fn manual_only(o: &mut Options) {
        o.max_subcompactions = 1;
        o.disable_auto_compactions = true;
    }

    #[test]
    fn flush_panicking_at_sst_finish() {
        panic_in_job("sst_finish", On::Flush, defaults);
    }

    #[test]
    fn flush_panicking_at_sst_sync() {
        panic_in_job("sst_sync", On::Flush, defaults);
    }

    #[test]
    fn flush_panicking_at_dir_sync() {
        panic_in_job("dir_sync", On::Flush, defaults);
    }

    #[test]
    fn flush_panicking_at_manifest_append() {
        panic_in_job("manifest_append", On::Flush, defaults);
    }

    #[test]
    fn flush_panicking_at_obsolete_delete() {
        panic_in_job("obsolete_delete", On::Flush, defaults);
    }

    #[test]
    fn compaction_panicking_at_sst_finish() {
        panic_in_job("sst_finish", On::Compaction, unsplit);
    }

    #[test]
    fn compaction_panicking_at_manifest_append() {
        panic_in_job("manifest_append", On::Compaction, unsplit);
    }

    #[test]
    fn compaction_panicking_at_obsolete_delete() {
        panic_in_job("obsolete_delete", On::Compaction, unsplit);
    }

    #[test]
    fn subcompaction_panicking_at_sst_sync() {
        panic_in_job("sst_sync", On::Subcompaction, split);
    }

    #[test]
    fn manual_compaction_panicking_at_sst_finish() {
        panic_in_job("sst_finish", On::ManualCompaction, manual_only);
    }

    /// How a writer of `write_group_leader_panicking_at_wal_append` stopped.
    enum Stop {
        /// A write returned this error.
        Failed(Error),
        /// The write of this key panicked.
        Panicked(Vec<u8>),
    }

    /// The leader of a write group panics (at `wal_append`): its own call
    /// panics, and the writers behind it fail with the sticky error instead
    /// of waiting forever for it to leave the queue.
    #[test]
    fn write_group_leader_panicking_at_wal_append() {
        let _serial = serial();
        quiet_injected_panics();
        let scenario = FailScenario::setup();
        let ctx = "a write group leader panicking at wal_append";
        let fs = MemFs::new();
        let o = tiny_options(Some(fs.clone()));
        let leader_hits = Arc::new(AtomicU64::new(0));
        let counter = Arc::clone(&leader_hits);
        fail::cfg_callback("wal_append", move || {
            let leader = std::thread::current().name() == Some("leader");
            if leader && counter.fetch_add(1, Ordering::SeqCst) == 500 {
                panic!("{INJECTED} at wal_append");
            }
        })
        .expect("configure the fail point");
        let body_o = o.clone();
        let (model, panicked_key) = within_timeout(ctx, move || {
            let db = Arc::new(Db::open(DB, body_o).unwrap());
            // Each thread writes keys of its own, once each, until a write fails.
            let writer = |name: &'static str| {
                let db = Arc::clone(&db);
                std::thread::Builder::new()
                    .name(name.into())
                    .spawn(move || {
                        let mut acked = Model::new();
                        for i in 0..100_000u32 {
                            let (k, v) = (format!("{name}{i:06}").into_bytes(), vec![b'v'; 40]);
                            let mut b = WriteBatch::new();
                            b.put(&k, &v);
                            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| db.write(&b))) {
                                Ok(Ok(())) => {
                                    acked.insert(k, v);
                                }
                                Ok(Err(e)) => return (acked, Stop::Failed(e)),
                                Err(_) => return (acked, Stop::Panicked(k)),
                            }
                        }
                        panic!("{name}: no write failed")
                    })
                    .expect("spawn a writer")
            };
            let (leader, other) = (writer("leader"), writer("other"));
            let (mut model, leader_stop) = leader.join().expect("the leader's thread");
            let (other_model, other_stop) = other.join().expect("the other writer's thread");
            let Stop::Panicked(panicked_key) = leader_stop else { panic!("{ctx}: the leader's write did not panic") };
            let Stop::Failed(e) = other_stop else { panic!("{ctx}: the other writer panicked") };
            assert_write_panicked(&e, ctx);
            model.extend(other_model);
            assert_write_panicked(&db.flush(true).unwrap_err(), ctx);
            let db = Arc::into_inner(db).expect("the only handle");
            assert_write_panicked(&db.close().unwrap_err(), ctx);
            (model, panicked_key)
        });
        fail::remove("wal_append");
        scenario.teardown();
        // The write that panicked was never acknowledged: it may or may not be there.
        let mut o = o.clone();
        o.listeners.clear();
        let db = Db::open(DB, o).unwrap_or_else(|e| panic!("{ctx}: reopen: {e}"));
        let mut got = scan(&db, ReadOptions::default());
        got.remove(&panicked_key);
        assert!(got == model, "{ctx}: the reopened database differs from the acknowledged writes");
        db.close().unwrap_or_else(|e| panic!("{ctx}: close after the reopen: {e}"));
    }

    fn assert_write_panicked(e: &Error, ctx: &str) {
        let Error::Background(inner) = e else { panic!("{ctx}: not the sticky error: {e:?}") };
        assert!(matches!(inner.as_ref(), Error::Panicked { job: "write group", .. }), "{ctx}: {e}");
    }
}
