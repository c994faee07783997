//! The transaction benchmarks (`randomtransaction`, db_bench's, and
//! `transfertransaction`) through the binary against real Ebb databases of
//! both kinds, with 1 and 4 threads: each run's own check passes, the
//! database read back afterwards keeps the invariant, and the counts add
//! up. Then the checks catching a broken invariant, and the refusals.

use std::path::Path;
use std::process::{Command, Output};

use ebb_bench::bench::transactions::{
    account_key, check_accounts, open_accounts, set_key, verify_sets, INITIAL_BALANCE,
};
use ebb_bench::config::EngineKind;
use ebb_bench::engine::WriteOpts;
use ebb_bench::flags::{Flags, Parsed};
use ebb_bench::report::{Report, TransactionCounts};

fn ebb_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ebb-bench")).args(args).output().expect("run ebb-bench")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The message after `operations;` (and the MB/s) of benchmark `name`'s result line.
fn message(out: &str, name: &str) -> String {
    let line = out
        .lines()
        .find(|l| l.split_once(" : ").is_some_and(|(n, _)| n.trim() == name) && l.contains("micros/op"))
        .unwrap_or_else(|| panic!("no {name} result line:\n{out}"));
    let rest = line.split_once("operations;").unwrap().1;
    rest.split_once("MB/s").map_or(rest, |(_, m)| m).trim().to_string()
}

/// Opens the database at `db` as the flags `args` say (a transaction database).
fn open(db: &Path, args: &[&str]) -> Box<dyn ebb_bench::engine::Engine> {
    let Parsed::Run(flags) = Flags::parse(args.iter().copied()).unwrap() else { unreachable!() };
    ebb_bench::engine::open(EngineKind::Ebb, db, &flags, false, true).unwrap()
}

fn counts_add_up(c: &TransactionCounts, ops: u64, what: &str) {
    assert_eq!(c.attempts, ops, "{what}: every transaction begun is one operation: {c:?}");
    assert_eq!(c.committed + c.rolled_back + c.aborted(), c.attempts, "{what}: {c:?}");
    assert!(c.prepared <= c.committed, "{what}: {c:?}");
    assert!(c.committed > 0, "{what}: {c:?}");
}

/// Both workloads on both kinds of transaction database, 1 and 4 threads, on
/// few keys so that the threads conflict.
#[test]
fn both_workloads_keep_their_invariants_on_both_kinds() {
    const PER_THREAD: u64 = 300;
    for kind in ["--optimistic_transaction_db", "--transaction_db"] {
        let pessimistic = kind == "--transaction_db";
        for threads in [1u64, 4] {
            let what = format!("{kind} --threads={threads}");
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("db");
            let json = dir.path().join("run.json");
            let o = ebb_bench(&[
                "--benchmarks=randomtransaction,transfertransaction",
                kind,
                "--num=50",
                "--transaction_sets=3",
                "--transfer_accounts=8",
                &format!("--reads={PER_THREAD}"),
                &format!("--threads={threads}"),
                "--seed=11",
                "--progress=false",
                &format!("--db={}", db.display()),
                &format!("--json={}", json.display()),
            ]);
            let out = stdout(&o);
            assert!(o.status.success(), "{what}\nstdout:\n{out}\nstderr:\n{}", stderr(&o));
            assert!(out.contains("RandomTransactionVerify Success."), "{what}:\n{out}");
            assert!(
                out.contains("TransferTransactionVerify Success: the 8 accounts hold 8000 in total, as before."),
                "{what}:\n{out}"
            );

            let report: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
            let ops = threads * PER_THREAD;
            let random = &report.results[0];
            assert_eq!(
                (random.name.as_str(), random.ops, random.threads),
                ("randomtransaction", ops, threads as usize)
            );
            let c = random.transactions.expect("randomtransaction's counts");
            counts_add_up(&c, ops, &what);
            assert_eq!(random.message, format!("( transactions:{ops} aborts:{})", c.aborted()), "{what}");
            assert!(c.rolled_back > 0, "1 in 20 rolls back: {what}: {c:?}");
            if pessimistic {
                assert!(c.prepared > c.committed / 2, "9 in 10 are prepared first: {what}: {c:?}");
            } else {
                assert_eq!((c.prepared, c.timed_out, c.deadlock), (0, 0, 0), "{what}: {c:?}");
            }
            if threads == 1 {
                assert_eq!(c.aborted(), 0, "alone, nothing conflicts: {what}: {c:?}");
            }
            assert!(random.latency.contains_key("op"), "{what}: {:?}", random.latency.keys());

            let transfer = &report.results[1];
            assert_eq!((transfer.name.as_str(), transfer.ops), ("transfertransaction", ops));
            let t = transfer.transactions.expect("transfertransaction's counts");
            counts_add_up(&t, ops, &what);
            assert_eq!((t.rolled_back, t.prepared), (0, 0), "{what}: {t:?}");
            assert_eq!(
                transfer.message,
                format!("( transfers:{ops} committed:{} aborts:{})", t.committed, t.aborted()),
                "{what}"
            );
            if threads == 1 {
                assert_eq!(t.committed, ops, "{what}: {t:?}");
            }
            // The second line under each result line says the same counts.
            assert!(
                out.contains(&format!(
                    "transfertransaction : {ops} transactions: {} committed (0 after a prepare), 0 rolled back, {} aborted",
                    t.committed,
                    t.aborted()
                )),
                "{what}:\n{out}"
            );

            // Read back: the sets agree and are not empty, the money is all there.
            let engine = open(&db, &[kind]);
            assert!(verify_sets(engine.as_ref(), 3).unwrap() > 0, "{what}");
            assert_eq!(open_accounts(engine.as_ref(), 8).unwrap(), 8 * i128::from(INITIAL_BALANCE), "{what}");
            engine.close().unwrap();
        }
    }
}

/// Pessimistic transfers between 3 accounts in both orders deadlock; with
/// detection they fail as deadlocks (or busy) instead of waiting out the
/// lock timeout, and the total holds either way.
#[test]
fn pessimistic_transfers_count_deadlocks_with_detection() {
    let o = ebb_bench(&[
        "--benchmarks=transfertransaction",
        "--transaction_db",
        "--transaction_deadlock_detect",
        "--transaction_lock_timeout=10000",
        "--transfer_accounts=3",
        "--reads=200",
        "--threads=4",
        "--seed=3",
        "--progress=false",
    ]);
    let out = stdout(&o);
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{}", stderr(&o));
    assert!(out.contains("TransferTransactionVerify Success"), "{out}");
    assert!(out.contains(", timed out 0,"), "a 10 s lock timeout is not reached:\n{out}");
}

/// The plain database runs randomtransaction as db_bench does without a
/// transaction database: one write batch per transaction, and no check.
#[test]
fn randomtransaction_without_a_transaction_database_writes_batches() {
    let o =
        ebb_bench(&["--benchmarks=randomtransaction", "--num=100", "--reads=50", "--threads=2", "--progress=false"]);
    let out = stdout(&o);
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{}", stderr(&o));
    assert_eq!(message(&out, "randomtransaction"), "( batches:100 )");
    assert!(!out.contains("RandomTransactionVerify"), "{out}");
}

/// Sets whose sums disagree (written by hand) fail the run, loudly.
#[test]
fn randomtransaction_fails_on_sets_that_disagree() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let engine = open(&db, &["--optimistic_transaction_db"]);
    engine.put(&set_key(0, 1), b"5", WriteOpts::default()).unwrap();
    engine.put(&set_key(1, 2), b"7", WriteOpts::default()).unwrap();
    assert!(verify_sets(engine.as_ref(), 2).unwrap_err().to_string().contains("Set[0]: 5, Set[1]: 7"));
    engine.close().unwrap();
    // No transaction (--reads=0), then the check.
    let o = ebb_bench(&[
        "--benchmarks=randomtransaction",
        "--optimistic_transaction_db",
        "--use_existing_db",
        "--reads=0",
        "--progress=false",
        &format!("--db={}", db.display()),
    ]);
    assert_eq!(o.status.code(), Some(1), "stdout:\n{}\nstderr:\n{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("RandomTransactionVerify FAILED!!"), "{}", stdout(&o));
    assert!(stderr(&o).contains("inconsistent totals"), "{}", stderr(&o));
}

/// The transfer check: money made or lost, or an account gone, is named.
#[test]
fn the_transfer_check_catches_money_made_and_accounts_lost() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open(&dir.path().join("db"), &["--transaction_db"]);
    let total = open_accounts(engine.as_ref(), 4).unwrap();
    assert_eq!(total, 4 * i128::from(INITIAL_BALANCE));
    check_accounts(engine.as_ref(), 4, total).unwrap();
    engine.put(&account_key(2), b"1001", WriteOpts::default()).unwrap();
    let e = check_accounts(engine.as_ref(), 4, total).unwrap_err().to_string();
    assert!(e.contains("hold 4001 in total, and held 4000"), "{e}");
    engine.delete(&account_key(3), WriteOpts::default()).unwrap();
    assert!(check_accounts(engine.as_ref(), 4, total).unwrap_err().to_string().contains("account 3 is missing"));
    // Accounts found are kept as they are: the total is theirs.
    assert_eq!(open_accounts(engine.as_ref(), 4).unwrap(), 4001);
    engine.close().unwrap();
}

#[test]
fn bad_transaction_flags_are_refused_before_the_header() {
    for (args, expected) in [
        (
            &["--benchmarks=transfertransaction"][..],
            "give --transaction_db (pessimistic) or --optimistic_transaction_db",
        ),
        (&["--benchmarks=randomtransaction", "--transaction_db", "--optimistic_transaction_db"], "give one of them"),
        (&["--benchmarks=randomtransaction", "--transaction_sets=0"], "--transaction_sets must be between 1 and 9999"),
        (&["--benchmarks=randomtransaction", "--transaction_sets=10000"], "--transaction_sets must be between"),
        (&["--benchmarks=transfertransaction", "--transaction_db", "--transfer_accounts=1"], "at least 2"),
        (&["--benchmarks=randomtransaction", "--transaction_sleep=-1"], "--transaction_sleep must not be negative"),
        (&["--benchmarks=randomtransaction", "--transaction_db", "--disable_wal"], "leave out --disable_wal"),
    ] {
        let o = ebb_bench(&[args, &["--progress=false"]].concat());
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains(expected), "{args:?}: {}", stderr(&o));
        assert!(stdout(&o).is_empty(), "{args:?}: nothing before the refusal: {}", stdout(&o));
    }
    let o = ebb_bench(&[
        "--benchmarks=randomtransaction",
        "--transaction_db",
        "--num_column_families=2",
        "--progress=false",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--num_column_families=1"), "{}", stderr(&o));
}

/// Both workloads on the RocksDB peer, both kinds, 4 threads: its checks
/// pass, and its counts add up as Ebb's do.
#[cfg(feature = "rocksdb-peer")]
#[test]
fn the_peer_runs_both_workloads_on_both_kinds() {
    for kind in ["--optimistic_transaction_db", "--transaction_db"] {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("run.json");
        let o = ebb_bench(&[
            "--engine=rocksdb",
            "--benchmarks=randomtransaction,transfertransaction",
            kind,
            "--transaction_deadlock_detect",
            "--num=50",
            "--transfer_accounts=8",
            "--reads=300",
            "--threads=4",
            "--seed=11",
            "--progress=false",
            &format!("--db={}", dir.path().join("db").display()),
            &format!("--json={}", json.display()),
        ]);
        let out = stdout(&o);
        assert!(o.status.success(), "{kind}\nstdout:\n{out}\nstderr:\n{}", stderr(&o));
        assert!(out.contains("RandomTransactionVerify Success."), "{kind}:\n{out}");
        assert!(out.contains("TransferTransactionVerify Success"), "{kind}:\n{out}");
        let report: Report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        for r in &report.results {
            counts_add_up(&r.transactions.expect("counts"), 1200, &format!("{kind} {}", r.name));
        }
    }
}
