//! A real crash: a child process writes (with flushes and compactions
//! running in the background) and is killed with SIGKILL without closing;
//! the parent reopens the database on disk and finds every acknowledged
//! write, as a prefix of what was written (docs/reliability.md). SIGKILL
//! takes the process, not the operating system, so writes made without
//! `sync` are kept too.
//!
//! The child is this test binary run again with `EBB_KILL_CHILD_DIR` set: it
//! runs only `child_writer`, which prints `ack N` once write N returned.

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::tiny_options;
use ebb::{Db, ReadOptions, WriteBatch, WriteOptions};

const CHILD_ENV: &str = "EBB_KILL_CHILD_DIR";
const START_ENV: &str = "EBB_KILL_CHILD_START";

fn key(i: u64) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("value of {i} {}", "x".repeat((i % 97) as usize)).into_bytes()
}

/// The child: writes keys from `START_ENV` on, forever, acknowledging each.
#[test]
fn child_writer() {
    let Ok(dir) = std::env::var(CHILD_ENV) else { return };
    let start: u64 = std::env::var(START_ENV).unwrap().parse().unwrap();
    let mut o = tiny_options(None);
    o.write_buffer_size = 32 * 1024;
    let db = Db::open(&dir, o).unwrap();
    let stdout = std::io::stdout();
    for i in start.. {
        // Every third write is a two-key batch; every tenth is synced.
        let wo = WriteOptions { sync: i % 10 == 0, disable_wal: false };
        if i % 3 == 0 {
            let mut b = WriteBatch::new();
            b.put(&key(i), &value(i));
            b.put(format!("batch{i:08}").as_bytes(), b"second half");
            db.write_opt(&b, &wo).unwrap();
        } else {
            db.put_opt(&key(i), &value(i), &wo).unwrap();
        }
        use std::io::Write;
        let mut out = stdout.lock();
        writeln!(out, "ack {i}").unwrap();
        out.flush().unwrap();
    }
}

/// Runs the child from key `start`, kills it once it acknowledged `acks`
/// writes (or after a time limit), and returns the highest key it acknowledged.
fn run_and_kill(dir: &Path, start: u64, acks: u64) -> Option<u64> {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_writer", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, dir)
        .env(START_ENV, start.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = None;
    let mut seen = 0;
    while seen < acks && Instant::now() < deadline {
        match lines.next() {
            Some(Ok(line)) => {
                if let Some(n) = line.strip_prefix("ack ") {
                    last = Some(n.parse::<u64>().unwrap());
                    seen += 1;
                }
            }
            _ => break,
        }
    }
    child.kill().unwrap(); // SIGKILL
                           // Acknowledgements printed before the kill count too.
    for line in lines.map_while(Result::ok) {
        if let Some(n) = line.strip_prefix("ack ") {
            last = Some(n.parse::<u64>().unwrap());
        }
    }
    child.wait().unwrap();
    last
}

#[test]
fn sigkill_without_close_keeps_every_acknowledged_write() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut next = 0u64;
    // Kills at different depths: before the first flush, during flushes and
    // compactions (the memtable is 32 KiB, L0 compacts at 2 files).
    for (cycle, acks) in [40u64, 900, 300, 2500, 7, 1500].into_iter().enumerate() {
        let acked =
            run_and_kill(&dir, next, acks).unwrap_or_else(|| panic!("cycle {cycle}: the child acknowledged nothing"));
        let db = Db::open(&dir, tiny_options(None)).unwrap_or_else(|e| panic!("cycle {cycle}: reopen: {e}"));
        for i in 0..=acked {
            assert_eq!(db.get(&key(i)).unwrap(), Some(value(i)), "cycle {cycle}: acknowledged write {i} lost");
            if i % 3 == 0 {
                assert_eq!(db.get(format!("batch{i:08}").as_bytes()).unwrap(), Some(b"second half".to_vec()));
            }
        }
        // Beyond the last acknowledgement: a prefix of the writes in flight, never a gap.
        let mut it = db.iter(ReadOptions::default());
        it.seek(&key(acked + 1));
        let mut expect = acked + 1;
        while it.valid() && it.key().starts_with(b"key") {
            assert_eq!(it.key(), key(expect).as_slice(), "cycle {cycle}: a gap after write {acked}");
            assert_eq!(it.value(), value(expect).as_slice());
            expect += 1;
            it.next();
        }
        it.status().unwrap();
        drop(it);
        db.close().unwrap();
        next = expect;
    }
}
