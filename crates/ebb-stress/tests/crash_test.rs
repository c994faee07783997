//! The crash test, short form (the long form is `ebb-stress --driver
//! --duration=...`, docs/reliability.md): the driver runs the worker, kills
//! it with SIGKILL a few times at random moments, restarts it with freshly
//! drawn options, and every restart verifies each key against the expected
//! state. Also: the checker catches a database that lost a write.

use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::process::{Command, Output};

const EXE: &str = env!("CARGO_BIN_EXE_ebb-stress");

fn text(out: &Output) -> String {
    format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A database and its expected state in a temporary directory, with
/// workers of 100 keys and two threads run on them.
struct Worker {
    _dir: tempfile::TempDir,
    db: PathBuf,
    expected: PathBuf,
    seed: u64,
}

impl Worker {
    /// A worker that has run for a second and closed cleanly.
    fn after_a_run(seed: u64) -> Worker {
        let dir = tempfile::tempdir().unwrap();
        let (db, expected) = (dir.path().join("db"), dir.path().join("expected"));
        let w = Worker { _dir: dir, db, expected, seed };
        let out = w.run(&["--duration=1"]);
        assert!(out.status.success(), "{}", text(&out));
        w
    }

    /// Runs a worker with `extra` flags (later flags override earlier ones).
    fn run(&self, extra: &[&str]) -> Output {
        Command::new(EXE)
            .arg(format!("--db={}", self.db.display()))
            .arg(format!("--expected={}", self.expected.display()))
            .args(["--keys=100", "--threads=2"])
            .arg(format!("--seed={}", self.seed))
            .args(extra)
            .output()
            .expect("run ebb-stress")
    }

    /// Runs a verify-only worker, which must pass.
    fn verifies(&self) {
        let out = self.run(&["--verify-only"]);
        assert!(out.status.success(), "{}", text(&out));
    }
}

/// The offset of key `i`'s committed (`half` 0) or pending (1) state word
/// in the expected-state file: a 64-byte header, then 16 bytes a key.
fn slot_at(i: u64, half: u64) -> u64 {
    64 + i * 16 + half * 8
}

/// The number after `name` on the summary line that starts with it.
fn figure(stdout: &str, name: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix(name))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {name:?} in the summary:\n{stdout}"))
}

#[test]
fn killed_workers_lose_no_acknowledged_write() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(EXE)
        .args(["--driver", "--duration=20", "--threads=4", "--keys=2000", "--kill-min-ms=300", "--kill-max-ms=2500"])
        .arg(format!("--dir={}", dir.path().display()))
        .output()
        .expect("run ebb-stress");
    let all = text(&out);
    assert!(out.status.success(), "the crash test failed:\n{all}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(figure(&stdout, "writes lost:"), 0, "{all}");
    assert_eq!(figure(&stdout, "wrong values:"), 0, "{all}");
    assert_eq!(figure(&stdout, "errors:"), 0, "{all}");
    assert!(figure(&stdout, "crash cycles:") >= 3, "too few kills:\n{all}");
    assert!(figure(&stdout, "operations:") > 1000, "too few operations:\n{all}");
    assert!(figure(&stdout, "verified keys:") >= 3 * 2000, "{all}");
    eprintln!("{stdout}");
}

/// A worker run, then the expected state claims a write the database never
/// saw: the verification must call it a lost write and fail.
#[test]
fn verification_catches_a_lost_write() {
    let w = Worker::after_a_run(5);
    w.verifies();

    // Key 7's committed and pending states: value id 1000000, never written.
    let f = std::fs::OpenOptions::new().write(true).open(&w.expected).unwrap();
    let claimed = (1_000_000u64 << 1 | 1).to_le_bytes();
    f.write_all_at(&claimed, slot_at(7, 0)).unwrap();
    f.write_all_at(&claimed, slot_at(7, 1)).unwrap();
    let out = w.run(&["--verify-only"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("lost write: key 7"), "{}", text(&out));
}

/// The keys live in three column families by default. A key found in a
/// family other than its own is a wrong value, and a run for another number
/// of families is refused rather than misread, without changing anything.
#[test]
fn verification_checks_each_key_in_its_own_column_family() {
    let w = Worker::after_a_run(7);
    let db = &w.db;
    let options = ebb::Options::default();
    assert_eq!(ebb::Db::list_column_families(db, &options).unwrap(), ["default", "cf1", "cf2"]);

    // Fewer families than the database has: refused by the database's.
    let out = w.run(&["--verify-only", "--column-families=2"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("the database has column family \"cf2\", not one of the 2"), "{}", text(&out));
    // More: refused by the expected state, before a family is created.
    let out = w.run(&["--verify-only", "--column-families=4"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("made for 3 column families, not 4"), "{}", text(&out));
    assert_eq!(ebb::Db::list_column_families(db, &options).unwrap(), ["default", "cf1", "cf2"]);

    // Key 0 belongs to the default family (keys 0-7); write it to cf1 too.
    {
        let d = ebb::Db::open_cf(db, options.clone(), &[("cf1", options.clone()), ("cf2", options.clone())]).unwrap();
        let cf1 = d.cf_handle("cf1").unwrap();
        d.put_cf(&cf1, b"key00000000", b"anything").unwrap();
        d.close().unwrap();
    }
    let out = w.run(&["--verify-only"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("scan of cf1 found key 0, written to another family"), "{}", text(&out));
}

/// A write is atomic, across families too: after a kill, the keys of the
/// one write a thread had in flight all hold their new states or all their
/// old ones. Here the expected state says thread 0 (of the two the run had)
/// had keys 0 (default family) and 8 (cf1) in flight, and the database
/// holds key 8's new state but key 0's old one: each key alone is a state
/// it may hold, the pair is a torn write. The verification groups keys by
/// the threads of the run that wrote, not by its own `--threads` (with 3,
/// keys 0 and 8 would belong to different threads), and leaves the expected
/// state as it found it, so a second look finds the same.
#[test]
fn verification_catches_a_write_applied_in_part() {
    let w = Worker::after_a_run(9);
    w.verifies();

    let f = std::fs::OpenOptions::new().read(true).write(true).open(&w.expected).unwrap();
    let word = |at: u64| {
        let mut w = [0u8; 8];
        f.read_exact_at(&mut w, at).unwrap();
        u64::from_le_bytes(w)
    };
    // A state word is the value id shifted left by one, the low bit "present".
    // Key 0 (thread 0 of 2): in flight to a new state, not applied.
    let w0 = word(slot_at(0, 0));
    f.write_all_at(&(((w0 >> 1) + 1) << 1 | (1 - (w0 & 1))).to_le_bytes(), slot_at(0, 1)).unwrap();
    // Key 8 (thread 0, cf1): in flight from an older state, applied.
    let w8 = word(slot_at(8, 0));
    f.write_all_at(&((w8 >> 1).saturating_sub(1) << 1 | (1 - (w8 & 1))).to_le_bytes(), slot_at(8, 0)).unwrap();
    for _ in 0..2 {
        let out = w.run(&["--verify-only", "--threads=3"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(
            text(&out).contains(
                "thread 0's write in flight left keys [8] at their new states and keys [0] at their old ones"
            ),
            "{}",
            text(&out)
        );
    }
}
