//! Kill points (`--features failpoints`, src/kill_points.rs): the engine
//! stopped at each named durability point, by an injected error or by a
//! panic that stands for the process being killed there, loses no write it
//! promised to keep.
//!
//! For each kill point and each workload of `common::workload`, a clean run
//! counts the point's hits; then, for a spread of hits `k` (the first, the
//! last and some between), the workload runs again and hit `k`:
//! - returns an injected I/O error: the workload stops at the first error it
//!   meets and drops the database, and then the power fails
//!   (`CrashMode::DropUnsynced`);
//! - kills the process: every later filesystem operation fails (nothing the
//!   dead process does reaches the disk, so nothing it acknowledges after the
//!   kill can be durable), the disk's contents are taken as a power loss
//!   would leave them (`MemFs::crash_clone`), and the thread that hit the
//!   point panics. Whatever the rest of the dead database does, it does on
//!   the frozen filesystem. (A background job's panic becomes the sticky
//!   error and wakes every waiter; a workload thread that still has not wound
//!   down after `WIND_DOWN` is abandoned, as a dead process's would be, and
//!   counted: none is, since panics are caught, tests/panics.rs.)
//!
//! Then the database is reopened on what the disk kept, under
//! `AbsoluteConsistency` (a power loss that keeps only synced bytes tears
//! nothing): its state must be the model after some prefix of the writes
//! attempted, no earlier than the last write made durable (a synced write, a
//! flush, a close); it must take a write and keep it across another reopen.
//! Every kill point must fire in both modes. `blob_sync` fires only with
//! blob files, so its workloads run with them (`workload::blob_files`).
#![cfg(feature = "failpoints")]

mod common;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, Once};
use std::time::Duration;

use common::workload::{self, Configure, Recorder, Workload};
use common::History;
use ebb::fs::{CrashMode, FaultRule, MemFs};
use ebb::{Options, WalRecoveryMode};
use fail::FailScenario;

/// Hits of one point tried per workload at most, spread over all its hits.
const MAX_HITS: u64 = 6;

/// How long a killed workload's thread may take to wind down before it is
/// abandoned (it waits for a job whose thread died).
const WIND_DOWN: Duration = Duration::from_millis(250);

/// The payload of a kill point's panic.
struct Killed;

/// Keeps the kill points' panics out of the test output.
fn quiet_kills() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.payload().is::<Killed>() {
                default(info);
            }
        }));
    });
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kill {
    /// The point returns an injected I/O error.
    Error,
    /// The process dies at the point.
    Panic,
}

/// What one run left behind for the check.
struct Outcome {
    /// The filesystem holding what the disk kept.
    fs: MemFs,
    options: Options,
    history: History,
    first_error: Option<String>,
    /// The point fired during the run (in error mode: its error reached
    /// the workload, which `obsolete_delete`'s never does: it only skips the
    /// remaining deletions).
    fired: bool,
    /// The workload's thread did not wind down and was left behind.
    abandoned: bool,
}

/// Hits of `point` in a clean run of `w`.
fn count_hits(point: &'static str, w: Workload, configure: Configure) -> u64 {
    let hits = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&hits);
    fail::cfg_callback(point, move || {
        counter.fetch_add(1, Ordering::SeqCst);
    })
    .expect("configure the kill point");
    let mut r = Recorder::new(MemFs::new());
    configure(&mut r.options);
    let clean = w(&mut r);
    fail::remove(point);
    clean.unwrap_or_else(|e| panic!("{point}: the clean run failed: {e}"));
    hits.load(Ordering::SeqCst)
}

/// Runs `w` with hit `k` of `point` doing `kill`.
fn run_killed(point: &'static str, w: Workload, configure: Configure, k: u64, kill: Kill) -> Outcome {
    let fs = MemFs::new();
    let fired = Arc::new(AtomicBool::new(false));
    let dead_disk: Arc<Mutex<Option<MemFs>>> = Arc::new(Mutex::new(None));
    match kill {
        Kill::Error => {
            let actions = format!("{}*off->1*return", k - 1);
            fail::cfg(point, &actions).expect("configure the kill point");
        }
        Kill::Panic => {
            let (hits, fired, disk, fs) = (AtomicU64::new(0), Arc::clone(&fired), Arc::clone(&dead_disk), fs.clone());
            fail::cfg_callback(point, move || {
                if hits.fetch_add(1, Ordering::SeqCst) + 1 != k {
                    return;
                }
                fs.inject(FaultRule::any_op().persistent());
                *disk.lock().unwrap_or_else(|e| e.into_inner()) = Some(fs.crash_clone(CrashMode::DropUnsynced));
                fired.store(true, Ordering::SeqCst);
                std::panic::panic_any(Killed);
            })
            .expect("configure the kill point");
        }
    }
    let published = Arc::new(Mutex::new(History::default()));
    let (done_tx, done_rx) = mpsc::channel();
    let (thread_fs, thread_published) = (fs.clone(), Arc::clone(&published));
    std::thread::spawn(move || {
        let mut r = Recorder::new(thread_fs);
        configure(&mut r.options);
        r.published = Some(thread_published);
        let outcome = catch_unwind(AssertUnwindSafe(|| w(&mut r)));
        let first_error = match (&outcome, &r.first_error) {
            (Err(_), _) => Some("the workload's thread was killed".to_string()),
            (Ok(_), Some((call, e))) => Some(format!("{call}: {e}")),
            (Ok(_), None) => None,
        };
        let _ = done_tx.send((r.history, r.options, first_error));
    });
    let finished = loop {
        match done_rx.recv_timeout(WIND_DOWN) {
            Ok(done) => break Some(done),
            Err(mpsc::RecvTimeoutError::Timeout) if fired.load(Ordering::SeqCst) => break None,
            Err(mpsc::RecvTimeoutError::Timeout) => continue,
            Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{point}: the workload's thread vanished"),
        }
    };
    fail::remove(point);
    let abandoned = finished.is_none();
    let (history, options, first_error) = match finished {
        Some(done) => done,
        None => {
            let history = published.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let mut options = workload::Recorder::new(fs.clone()).options;
            configure(&mut options);
            (history, options, Some("abandoned".into()))
        }
    };
    let disk = dead_disk.lock().unwrap_or_else(|e| e.into_inner()).take();
    let (fs, fired) = match (kill, disk) {
        (Kill::Panic, Some(disk)) => (disk, true),
        (Kill::Error, _) | (Kill::Panic, None) => {
            let fired = first_error.as_deref().is_some_and(|e| e.contains("kill point"));
            fs.crash(CrashMode::DropUnsynced);
            (fs, fired)
        }
    };
    Outcome { fs, options, history, first_error, fired, abandoned }
}

/// Reopens on the disk left by a run and checks the state against the
/// history; then checks it is durable and writable.
fn recover_and_check(out: &Outcome, ctx: &str) {
    let mut o = out.options.clone();
    o.fs = Arc::new(out.fs.clone());
    o.wal_recovery_mode = WalRecoveryMode::AbsoluteConsistency;
    let detail = format!("; the workload stopped at {:?}", out.first_error);
    workload::recover_and_verify(o, &out.history, &detail, ctx, false);
}

/// The hits tried out of `n`: the first, the last and up to `MAX_HITS` in all.
fn hits_to_try(n: u64) -> Vec<u64> {
    let mut ks: Vec<u64> = (0..MAX_HITS.min(n)).map(|i| 1 + i * (n - 1) / (MAX_HITS.min(n) - 1).max(1)).collect();
    ks.dedup();
    ks
}

/// Kills every workload at a spread of `point`'s hits, in both modes.
fn explore(point: &'static str) {
    explore_with(point, workload::as_is);
}

/// As [`explore`], with every open's options changed by `configure`.
fn explore_with(point: &'static str, configure: Configure) {
    quiet_kills();
    let scenario = FailScenario::setup();
    let (mut runs, mut fired, mut abandoned) = ([0u64; 2], [0u64; 2], 0u64);
    for (name, w) in workload::all() {
        let n = count_hits(point, w, configure);
        for k in hits_to_try(n) {
            for kill in [Kill::Error, Kill::Panic] {
                let out = run_killed(point, w, configure, k, kill);
                let ctx = format!("{point}: {name}: {kill:?} at hit {k} of {n}");
                recover_and_check(&out, &ctx);
                runs[kill as usize] += 1;
                fired[kill as usize] += u64::from(out.fired);
                abandoned += u64::from(out.abandoned);
            }
        }
    }
    scenario.teardown();
    eprintln!("{point}: runs {runs:?}, fired {fired:?} (error, panic), abandoned threads {abandoned}");
    assert!(fired[1] > 0, "{point}: the kill point never killed: {fired:?} of {runs:?}");
    assert!(fired[0] > 0 || point == "obsolete_delete", "{point}: no injected error reached a workload");
}

#[test]
fn kill_at_wal_append() {
    explore("wal_append");
}

#[test]
fn kill_at_wal_sync() {
    explore("wal_sync");
}

#[test]
fn kill_at_sst_finish() {
    explore("sst_finish");
}

#[test]
fn kill_at_sst_sync() {
    explore("sst_sync");
}

#[test]
fn kill_at_dir_sync() {
    explore("dir_sync");
}

#[test]
fn kill_at_blob_sync() {
    explore_with("blob_sync", workload::blob_files);
}

#[test]
fn kill_at_dir_sync_with_blob_files() {
    explore_with("dir_sync", workload::blob_files);
}

#[test]
fn kill_at_manifest_append() {
    explore("manifest_append");
}

#[test]
fn kill_at_current_rename() {
    explore("current_rename");
}

#[test]
fn kill_at_obsolete_delete() {
    explore("obsolete_delete");
}
