//! Two-phase commit through real crashes: a child process runs named
//! transactions on a `TransactionDb` (prepare, then commit; some are left
//! prepared; filler writes switch memtables and WALs under them) and is
//! killed with SIGKILL at a random point. The parent reopens and finds
//! every transaction whole: committed (both keys, visible), or prepared
//! (listed, nothing visible), never half; every commit acknowledged is
//! visible and every prepare acknowledged and not committed is listed. It
//! then commits half of the prepared ones and rolls back the rest, and the
//! next cycle checks that those decisions held too.
//!
//! The child runs its transactions on several threads, so prepares,
//! commits and filler writes share write groups (and WAL records).
//!
//! The child is this test binary run again with `EBB_TXN_KILL_DIR` set.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ebb::{Options, TransactionDb, TransactionDbOptions, TransactionOptions, WriteOptions};

const CHILD_ENV: &str = "EBB_TXN_KILL_DIR";
const START_ENV: &str = "EBB_TXN_KILL_START";
/// The child's threads: thread `k` runs transactions `start + k`,
/// `start + k + THREADS`, ...
const THREADS: u64 = 3;

fn options() -> Options {
    let mut o = common::tiny_options(None);
    o.write_buffer_size = 16 * 1024;
    o
}

fn name(i: u64) -> Vec<u8> {
    format!("xid{i:06}").into_bytes()
}

fn keys(i: u64) -> [Vec<u8>; 2] {
    [format!("t{i:06}/a").into_bytes(), format!("t{i:06}/b").into_bytes()]
}

fn value(i: u64) -> Vec<u8> {
    format!("value {i} {}", "v".repeat((i % 41) as usize)).into_bytes()
}

/// The child: transaction `i` for `i` from `START_ENV` on, forever, on
/// [`THREADS`] threads.
#[test]
fn child_transactions() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let start: u64 = std::env::var(START_ENV).unwrap().parse().unwrap();
    let db = TransactionDb::open(&dir, options(), TransactionDbOptions::default()).unwrap();
    let out = std::io::stdout();
    let say = |line: String| {
        let mut o = out.lock();
        writeln!(o, "{line}").unwrap();
        o.flush().unwrap();
    };
    std::thread::scope(|s| {
        for k in 0..THREADS {
            let (db, say) = (&db, &say);
            s.spawn(move || {
                for i in (start + k..).step_by(THREADS as usize) {
                    let wo = WriteOptions { sync: i % 4 == 0, disable_wal: false };
                    let mut t = db.begin_transaction(&wo, &TransactionOptions::default());
                    t.set_name(&name(i)).unwrap();
                    for k in keys(i) {
                        t.put(&k, &value(i)).unwrap();
                    }
                    t.prepare().unwrap();
                    say(format!("prepared {i}"));
                    // Filler between prepare and commit: the memtable and the
                    // WAL switch under prepared transactions.
                    for j in 0..(i % 7) {
                        db.put(format!("filler{i:06}-{j}").as_bytes(), &[b'f'; 300]).unwrap();
                    }
                    if i % 5 == 3 {
                        // Left prepared, for the parent to find.
                        std::mem::forget(t);
                        continue;
                    }
                    t.commit().unwrap();
                    say(format!("committed {i}"));
                }
            });
        }
    });
}

struct Acks {
    prepared: BTreeSet<u64>,
    committed: BTreeSet<u64>,
    /// The largest transaction acknowledged as prepared.
    last: Option<u64>,
}

fn run_and_kill(dir: &Path, start: u64, lines_wanted: u64) -> Acks {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_transactions", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .env(START_ENV, start.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut acks = Acks { prepared: BTreeSet::new(), committed: BTreeSet::new(), last: None };
    let note = |line: &str, acks: &mut Acks| {
        if let Some(n) = line.strip_prefix("prepared ") {
            let n = n.parse().unwrap();
            acks.prepared.insert(n);
            acks.last = acks.last.max(Some(n));
        } else if let Some(n) = line.strip_prefix("committed ") {
            acks.committed.insert(n.parse().unwrap());
        }
    };
    let mut seen = 0;
    while seen < lines_wanted && Instant::now() < deadline {
        match lines.next() {
            Some(Ok(line)) => {
                note(&line, &mut acks);
                seen += 1;
            }
            _ => break,
        }
    }
    child.kill().unwrap();
    for line in lines.map_while(Result::ok) {
        note(&line, &mut acks);
    }
    child.wait().unwrap();
    acks
}

#[test]
fn sigkill_during_two_phase_commit_leaves_every_transaction_whole() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut next = 0u64;
    // What the parent decided for prepared transactions it found: true
    // committed, false rolled back.
    let mut decided: BTreeMap<u64, bool> = BTreeMap::new();
    // Prepared transactions found and left prepared for a later cycle.
    let mut left: BTreeSet<u64> = BTreeSet::new();
    for (cycle, lines) in [30u64, 400, 7, 900, 150].into_iter().enumerate() {
        let acks = run_and_kill(&dir, next, lines);
        let last = acks.last.unwrap_or_else(|| panic!("cycle {cycle}: the child acknowledged nothing"));
        let db = TransactionDb::open(&dir, options(), TransactionDbOptions::default())
            .unwrap_or_else(|e| panic!("cycle {cycle}: reopen: {e}"));
        let listed: BTreeSet<u64> = db
            .prepared_transaction_names()
            .iter()
            .map(|n| std::str::from_utf8(&n[3..]).unwrap().parse().unwrap())
            .collect();
        // Every transaction so far, by what is visible (each thread may
        // have started one past its last acknowledged).
        for i in 0..=last + THREADS {
            let [a, b] = keys(i);
            let (va, vb) = (db.get(&a).unwrap(), db.get(&b).unwrap());
            assert_eq!(va.is_some(), vb.is_some(), "cycle {cycle}: transaction {i} is half applied");
            let visible = va.is_some();
            if visible {
                assert_eq!(va, Some(value(i)));
                assert!(!listed.contains(&i), "cycle {cycle}: transaction {i} is visible and still prepared");
            }
            if acks.committed.contains(&i) || decided.get(&i) == Some(&true) {
                assert!(visible, "cycle {cycle}: committed transaction {i} is not visible");
            }
            if decided.get(&i) == Some(&false) {
                assert!(!visible && !listed.contains(&i), "cycle {cycle}: transaction {i} rolled back came back");
            }
            if acks.prepared.contains(&i) && !visible {
                assert!(listed.contains(&i), "cycle {cycle}: prepared transaction {i} was lost");
            }
            if left.contains(&i) {
                assert!(!visible && listed.contains(&i), "cycle {cycle}: transaction {i} left prepared was lost");
            }
        }
        // Decide: leave every third prepared (through the next crash and
        // open), commit the even ones, roll back the odd ones.
        let mut found = db.get_all_prepared_transactions();
        assert_eq!(found.len(), listed.len());
        left.clear();
        for t in found.iter_mut() {
            let i: u64 = std::str::from_utf8(&t.name().unwrap()[3..]).unwrap().parse().unwrap();
            if i.is_multiple_of(3) && cycle % 2 == 0 {
                left.insert(i);
            } else if i.is_multiple_of(2) {
                t.commit().unwrap();
                decided.insert(i, true);
            } else {
                t.rollback().unwrap();
                decided.insert(i, false);
            }
        }
        drop(found);
        db.close().unwrap();
        next = last + THREADS + 1;
    }
}
