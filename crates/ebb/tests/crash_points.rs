//! Every crash point: a power loss at any moment of a workload loses no write
//! the engine promised to keep, and recovers the database as of one moment.
//!
//! For each small fixed workload (`common::workload`), a clean run counts
//! the filesystem operations; then, for every operation `k` (every n-th one
//! when there are many), the workload runs again with operation `k` and
//! every later one failing, so nothing after `k` reaches the disk, and
//! stops at its first error. The filesystem then loses power (unsynced
//! bytes dropped) and the database is reopened. The recovered state must be
//! the model after some prefix of the writes attempted, no earlier than the
//! last write made durable (a synced write, a flush, a close), and recovery
//! must find no damage at all (it runs under `AbsoluteConsistency`: a crash
//! that keeps only synced bytes tears nothing). The recovered state must then
//! be durable itself and take new writes.
//!
//! A second test pulls the plug with no fault, after a random step, while
//! background flushes and compactions run, under every `CrashMode`.
//!
//! Both run every workload again with blob files (`workload::blob_files`):
//! flushes and compactions then also write blob files, garbage collection
//! relocates blobs and obsoletes blob files, and recovery must find every
//! blob file the MANIFEST lists synced and whole.

mod common;

use std::cell::Cell;
use std::rc::Rc;

use common::workload::{self, Configure, Recorder, Workload, DB};
use ebb::fs::{CrashMode, FaultRule, FileSystem, MemFs};
use ebb::WalRecoveryMode;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Crash points explored per workload at most; past that, every n-th
/// operation is one.
const MAX_POINTS: u64 = 400;

/// Reopens after a crash, checks the recovered state against the history,
/// then checks it is durable and writable.
fn recover_and_check(fs: &MemFs, r: &Recorder, mode: WalRecoveryMode, ctx: &str, garbage_tail: bool) {
    let mut o = r.options.clone();
    o.wal_recovery_mode = mode;
    let detail = format!("; the workload stopped at {:?}; files left: {:?}", r.first_error, file_sizes(fs));
    workload::recover_and_verify(o, &r.history, &detail, ctx, garbage_tail);
}

/// The files in the database directory and their sizes, for failure messages
/// (none when the crash came before the directory was created).
fn file_sizes(fs: &MemFs) -> Vec<(String, usize)> {
    let dir = std::path::Path::new(DB);
    let names = fs.list_dir(dir).unwrap_or_default();
    names.into_iter().filter_map(|n| fs.file_bytes(&dir.join(&n)).map(|b| (n, b.len()))).collect()
}

/// Runs `w` cleanly; returns the filesystem operations and the steps (calls
/// that returned `Ok`) it took.
fn clean_run(name: &str, w: Workload, configure: Configure) -> (u64, usize) {
    let fs = MemFs::new();
    let mut r = Recorder::new(fs.clone());
    configure(&mut r.options);
    let steps = Rc::new(Cell::new(0));
    let counter = Rc::clone(&steps);
    r.after_step = Some(Box::new(move |s| counter.set(s)));
    w(&mut r).unwrap_or_else(|e| panic!("{name}: the clean run failed: {e}"));
    (fs.op_count(), steps.get())
}

/// Crashes `w` at every operation (or every n-th).
fn explore_fault_points(name: &str, w: Workload, configure: Configure) {
    let (total, _) = clean_run(name, w, configure);
    let stride = total.div_ceil(MAX_POINTS).max(1);
    let (mut explored, mut interrupted) = (0, 0);
    for k in (1..=total).step_by(stride as usize) {
        let fs = MemFs::new();
        fs.inject(FaultRule::any_op().nth(k).persistent());
        let mut r = Recorder::new(fs.clone());
        configure(&mut r.options);
        let outcome = w(&mut r);
        fs.crash(CrashMode::DropUnsynced);
        fs.clear_faults();
        let ctx = format!("{name}: crash at operation {k} of {total}");
        recover_and_check(&fs, &r, WalRecoveryMode::AbsoluteConsistency, &ctx, false);
        explored += 1;
        interrupted += u64::from(outcome.is_err());
    }
    eprintln!("{name}: {explored} crash points of {total} operations, {interrupted} interrupted the workload");
    assert!(interrupted * 2 > explored, "{name}: most crash points must interrupt the workload");
}

#[test]
fn crash_points_synced_puts() {
    explore_fault_points("synced puts", workload::synced_puts, workload::as_is);
}

#[test]
fn crash_points_puts_and_deletes() {
    explore_fault_points("puts and deletes", workload::puts_and_deletes, workload::as_is);
}

#[test]
fn crash_points_puts_then_flush() {
    explore_fault_points("puts then flush", workload::puts_then_flush, workload::as_is);
}

#[test]
fn crash_points_compactions() {
    explore_fault_points("compactions", workload::compactions, workload::as_is);
}

#[test]
fn crash_points_manifest_rolls() {
    explore_fault_points("manifest rolls", workload::manifest_rolls, workload::as_is);
}

#[test]
fn crash_points_unlogged_writes_then_close() {
    explore_fault_points("unlogged writes then close", workload::unlogged_then_close, workload::as_is);
}

#[test]
fn crash_points_single_deletes() {
    explore_fault_points("single deletes", workload::single_deletes, workload::as_is);
}

#[test]
fn crash_points_merges() {
    explore_fault_points("merges", workload::merges, workload::as_is);
}

#[test]
fn crash_points_entities() {
    explore_fault_points("entities", workload::entities, workload::as_is);
}

#[test]
fn crash_points_timestamps() {
    explore_fault_points("timestamps", workload::timestamps, workload::as_is);
}

#[test]
fn crash_points_range_deletions() {
    explore_fault_points("range deletions", workload::range_deletions, workload::as_is);
}

#[test]
fn crash_points_in_reverse_order() {
    explore_fault_points("compactions", workload::compactions, workload::reverse_order);
    explore_fault_points("manifest rolls", workload::manifest_rolls, workload::reverse_order);
    explore_fault_points("merges", workload::merges, workload::reverse_order);
}

#[test]
fn crash_points_blob_files_merges() {
    explore_fault_points("merges", workload::merges, workload::blob_files);
}

#[test]
fn crash_points_recovery_into_many_tables() {
    explore_fault_points("recovery into many tables", workload::recovery_into_many_tables, workload::as_is);
}

#[test]
fn crash_points_blob_files_synced_puts() {
    explore_fault_points("blob files: synced puts", workload::synced_puts, workload::blob_files);
}

#[test]
fn crash_points_blob_files_puts_and_deletes() {
    explore_fault_points("blob files: puts and deletes", workload::puts_and_deletes, workload::blob_files);
}

#[test]
fn crash_points_blob_files_compactions() {
    explore_fault_points("blob files: compactions", workload::compactions, workload::blob_files);
}

#[test]
fn crash_points_blob_files_recovery_into_many_tables() {
    explore_fault_points(
        "blob files: recovery into many tables",
        workload::recovery_into_many_tables,
        workload::blob_files,
    );
}

/// Pulls the plug after a random step of each workload, with background work
/// in flight and no fault injected, in every crash mode. Torn and garbage
/// tails are possible here, so recovery tolerates damage at the tail of the
/// last WAL, and nothing else.
#[test]
fn random_crashes_in_every_mode() {
    random_crashes(workload::as_is, 40);
}

/// As [`random_crashes_in_every_mode`], with blob files.
#[test]
fn random_crashes_in_every_mode_with_blob_files() {
    random_crashes(workload::blob_files, 24);
}

fn random_crashes(configure: Configure, per_workload: u64) {
    for (name, w) in workload::all() {
        let (_, steps) = clean_run(name, w, configure);
        for seed in 0..per_workload {
            let mut rng = StdRng::seed_from_u64(seed);
            let mode = match seed % 4 {
                0 => CrashMode::DropUnsynced,
                1 => CrashMode::KeepRandomPrefix { seed },
                2 => CrashMode::GarbageTail { seed },
                _ => CrashMode::ZeroTail,
            };
            let crash_at = rng.gen_range(1..=steps);
            let fs = MemFs::new();
            let mut r = Recorder::new(fs.clone());
            configure(&mut r.options);
            let crashed = Rc::new(Cell::new(false));
            let (plug, flag) = (fs.clone(), Rc::clone(&crashed));
            r.after_step = Some(Box::new(move |s| {
                if s == crash_at {
                    plug.crash(mode);
                    flag.set(true);
                }
            }));
            let _ = w(&mut r);
            if !crashed.get() {
                fs.crash(mode);
            }
            let ctx = format!("{name}: {mode:?} after step {crash_at} of {steps}");
            let garbage = matches!(mode, CrashMode::GarbageTail { .. });
            recover_and_check(&fs, &r, WalRecoveryMode::TolerateCorruptedTailRecords, &ctx, garbage);
        }
    }
}
