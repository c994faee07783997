//! db_bench's range deletions in the write benchmarks
//! (`--writes_per_range_tombstone`, `--range_tombstone_width`,
//! `--max_num_range_tombstones`, `--writes_before_delete_range`,
//! `--expand_range_tombstones`) through the binary against a real database:
//! what the database holds afterwards against a model of db_bench's
//! `DoWrite` driven by the client's own seeded random numbers, the counts
//! reported, and the refusals.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

use ebb_bench::config::RangeTombstones;
use ebb_bench::rng::{thread_seed, Rng64};

fn ebb_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ebb-bench")).args(args).output().expect("run ebb-bench")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The header's first line: nothing may be printed before a refusal.
const HEADER: &str = "version";

/// The key numbers of the default (16-byte) keys in an Ebb database: the
/// number is big-endian in the first 8 bytes.
fn ebb_key_numbers(db: &Path) -> BTreeSet<u64> {
    let handle = ebb::Db::open(db, ebb::Options::default()).unwrap();
    handle
        .iterator(ebb::ReadOptions::default(), ebb::IteratorMode::Start)
        .map(|entry| {
            let (key, _) = entry.unwrap();
            assert_eq!(key.len(), 16);
            u64::from_be_bytes(key[..8].try_into().unwrap())
        })
        .collect()
}

/// db_bench's `DoWrite` for one thread, as a set of key numbers: `puts`
/// writes, each key the generator's next number (sequential, or uniform in
/// `[0, num + max)` from the thread's seed), and after each write that
/// `rt.due` picks, a range deletion from the generator's next number.
fn model(sequential: bool, seed: u64, bench_index: u64, num: u64, puts: u64, rt: RangeTombstones) -> BTreeSet<u64> {
    let mut keys = BTreeSet::new();
    model_into(&mut keys, sequential, seed, bench_index, num, puts, rt);
    keys
}

/// [`model`] over the keys a previous benchmark left.
fn model_into(
    keys: &mut BTreeSet<u64>,
    sequential: bool,
    seed: u64,
    bench_index: u64,
    num: u64,
    puts: u64,
    rt: RangeTombstones,
) {
    let mut rng = Rng64::new(thread_seed(seed, bench_index, 0));
    let mut seq = 0u64;
    let mut next = |rng: &mut Rng64| {
        let n = if sequential { seq } else { rng.below(rt.key_space(num)) };
        seq += 1;
        n
    };
    for written in 1..=puts {
        keys.insert(next(&mut rng));
        if rt.due(written) {
            let begin = next(&mut rng);
            keys.retain(|k| *k < begin || *k >= begin + rt.width);
        }
    }
}

/// Runs `benchmark` on a fresh Ebb database in `dir` with the range
/// deletion flags and `extra`; returns stdout and the JSON report.
fn run(dir: &Path, benchmark: &str, num: u64, extra: &[&str]) -> (String, serde_json::Value) {
    let db = dir.join("db");
    let json = dir.join("run.json");
    let mut args = vec![
        format!("--benchmarks={benchmark}"),
        format!("--num={num}"),
        "--seed=7".to_string(),
        "--progress=false".to_string(),
        "--summary=false".to_string(),
        format!("--db={}", db.display()),
        format!("--json={}", json.display()),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let o = ebb_bench(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{args:?}\nstdout:\n{out}\nstderr:\n{}", stderr(&o));
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (out, report)
}

const FLAGS: [&str; 3] =
    ["--writes_per_range_tombstone=10", "--range_tombstone_width=5", "--max_num_range_tombstones=20"];

fn rt(writes_before: u64) -> RangeTombstones {
    RangeTombstones { writes_before, every: 10, width: 5, max: 20, expand: false }
}

/// fillseq: each range deletion takes the next sequential number as its
/// begin, so it deletes nothing written (the keys it covers come later) and
/// leaves a hole of one key; 20 of them, then the cap stops them, and the
/// keys run past `--num`.
#[test]
fn fillseq_skips_a_key_per_range_deletion_up_to_the_maximum() {
    let dir = tempfile::tempdir().unwrap();
    let (out, report) = run(dir.path(), "fillseq", 300, &FLAGS);
    assert_eq!(out.matches("Number of range deletions: 20\n").count(), 1, "{out}");
    let line = out.find("Number of range deletions").unwrap();
    assert!(line < out.find("fillseq      :").unwrap(), "db_bench prints it before the result line:\n{out}");
    let result = &report["results"][0];
    assert_eq!((result["ops"].as_u64(), result["range_deletions"].as_u64()), (Some(300), Some(20)), "{result}");
    assert_eq!(result["bytes"], 300 * (16 + 100), "range deletions move no bytes");

    let holes: BTreeSet<u64> = (0..20).map(|c| c * 11 + 10).collect();
    let expected: BTreeSet<u64> = (0..320).filter(|n| !holes.contains(n)).collect();
    assert_eq!(ebb_key_numbers(&dir.path().join("db")), expected);
    assert_eq!(expected, model(true, 7, 0, 300, 300, rt(0)));
}

/// fillrandom: keys and range deletions drawn from `[0, num + max)` by the
/// thread's seeded generator; what the database holds (after flushes and a
/// compaction carry the tombstones through tables) is the model's set, in
/// batches of one and of four, as range tombstones or expanded into point
/// deletes, and with the count starting after `--writes_before_delete_range`.
#[test]
fn fillrandom_leaves_the_keys_db_bench_would() {
    let num = 3000;
    for (extra, writes_before) in [
        (&["--batch_size=1"][..], 0),
        (&["--batch_size=4"][..], 0),
        (&["--batch_size=1", "--expand_range_tombstones=true"][..], 0),
        (&["--batch_size=4", "--writes_before_delete_range=95"][..], 95),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let flags: Vec<&str> = FLAGS.iter().chain(extra).copied().chain(["--write_buffer_size=65536"]).collect();
        let (out, report) = run(dir.path(), "fillrandom,compact", num, &flags);
        assert!(out.contains("Number of range deletions: 20\n"), "{extra:?}:\n{out}");
        assert_eq!(report["results"][0]["range_deletions"], 20, "{extra:?}");
        assert_eq!(report["results"][0]["ops"], num, "{extra:?}");
        assert!(report["results"][1].get("range_deletions").is_none(), "compact issues none");

        let expected = model(false, 7, 0, num, num, rt(writes_before));
        let unfiltered = model(false, 7, 0, num, num, RangeTombstones { width: 0, ..rt(writes_before) });
        assert!(expected.len() < unfiltered.len(), "the range deletions delete written keys");
        assert!(expected.iter().any(|n| *n >= num), "keys reach past --num: [0, num + max)");
        assert_eq!(ebb_key_numbers(&dir.path().join("db")), expected, "{extra:?}");
    }
}

/// Without `--max_num_range_tombstones` db_bench issues none (its default
/// maximum, 0, allows none): the same here, with a note; nothing is
/// reported as a range deletion, and the keys stay in `[0, num)`.
#[test]
fn a_maximum_of_zero_issues_none_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let json = dir.path().join("run.json");
    let o = ebb_bench(&[
        "--benchmarks=fillrandom",
        "--num=500",
        "--writes_per_range_tombstone=10",
        "--seed=3",
        "--progress=false",
        &format!("--db={}", db.display()),
        &format!("--json={}", json.display()),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out}\n{}", stderr(&o));
    assert!(stderr(&o).contains("--max_num_range_tombstones=0 issues no range deletion"), "{}", stderr(&o));
    assert!(!out.contains("Number of range deletions"), "{out}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(report["results"][0].get("range_deletions").is_none(), "{}", report["results"][0]);
    let keys = ebb_key_numbers(&db);
    assert!(keys.iter().all(|n| *n < 500));
    assert_eq!(keys, model(false, 3, 0, 500, 500, RangeTombstones { every: 10, ..RangeTombstones::default() }));
}

#[test]
fn bad_values_are_refused_before_the_header() {
    for (flags, needle) in [
        (&["--writes_per_range_tombstone=-1"][..], "flag --writes_per_range_tombstone must not be negative, got -1"),
        (&["--range_tombstone_width=-5"][..], "flag --range_tombstone_width must not be negative, got -5"),
        (&["--max_num_range_tombstones=-1"][..], "flag --max_num_range_tombstones must not be negative, got -1"),
        (&["--writes_before_delete_range=-3"][..], "flag --writes_before_delete_range must not be negative, got -3"),
        (&["--range_tombstone_width=wide"][..], "--range_tombstone_width"),
        (&["--expand_range_tombstones=maybe"][..], "--expand_range_tombstones"),
        // No benchmark in the list writes with range deletions.
        (
            &["--writes_per_range_tombstone=10", "--benchmarks=readrandom,mergerandom", "--merge_operator=put"][..],
            "--benchmarks=readrandom,mergerandom has none of them",
        ),
        // Keys of 2 bytes hold 65536 numbers; the ranges would wrap.
        (
            &["--key_size=2", "--num=65530", "--max_num_range_tombstones=4", "--writes_per_range_tombstone=5"][..],
            "past the 65536 that keys of --key_size=2 hold",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = format!("--db={}", dir.path().join("db").display());
        let mut args = vec!["--benchmarks=fillrandom", "--num=100", "--progress=false", &db];
        args.extend(flags);
        let o = ebb_bench(&args);
        assert_eq!(o.status.code(), Some(1), "{flags:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{flags:?}: {}", stderr(&o));
        assert!(!String::from_utf8_lossy(&o.stdout).contains(HEADER), "{flags:?}: the run started");
        assert!(!dir.path().join("db").exists(), "{flags:?}: nothing is created");
    }
}

/// The same seeded runs leave the same keys (and values) on Ebb and on
/// RocksDB, the model's keys: a fill and an overwrite with range deletions,
/// then a compaction, in batches of one and of four, as tombstones and
/// expanded.
#[cfg(feature = "rocksdb-peer")]
#[test]
fn both_engines_leave_the_same_keys() {
    use ebb_bench::config::EngineKind;

    for extra in [&["--batch_size=1"][..], &["--batch_size=4", "--expand_range_tombstones=true"][..]] {
        let dir = tempfile::tempdir().unwrap();
        let mut contents = Vec::new();
        for (engine, kind) in [("ebb", EngineKind::Ebb), ("rocksdb", EngineKind::RocksDb)] {
            let db = dir.path().join(engine);
            let mut args = vec![
                format!("--engine={engine}"),
                "--benchmarks=fillrandom,overwrite,compact".to_string(),
                "--num=4000".to_string(),
                "--writes=2000".to_string(),
                "--writes_per_range_tombstone=7".to_string(),
                "--range_tombstone_width=20".to_string(),
                "--max_num_range_tombstones=50".to_string(),
                "--write_buffer_size=65536".to_string(),
                "--seed=13".to_string(),
                "--progress=false".to_string(),
                "--summary=false".to_string(),
                format!("--db={}", db.display()),
            ];
            args.extend(extra.iter().map(|s| s.to_string()));
            let o = ebb_bench(&args.iter().map(String::as_str).collect::<Vec<_>>());
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            assert!(o.status.success(), "{engine} {extra:?}: stdout:\n{out}\nstderr:\n{}", stderr(&o));
            assert_eq!(out.matches("Number of range deletions: 50\n").count(), 2, "{engine} {extra:?}:\n{out}");
            contents.push(common::engine_contents(kind, &db, &args));
        }
        assert_eq!(contents[0].len(), contents[1].len(), "{extra:?}: key counts");
        assert!(contents[0] == contents[1], "{extra:?}: Ebb and RocksDB hold different keys or values");
        let rt = RangeTombstones { writes_before: 0, every: 7, width: 20, max: 50, expand: false };
        let mut expected = BTreeSet::new();
        model_into(&mut expected, false, 13, 0, 4000, 2000, rt);
        model_into(&mut expected, false, 13, 1, 4000, 2000, rt);
        let mut unfiltered = BTreeSet::new();
        model_into(&mut unfiltered, false, 13, 0, 4000, 2000, RangeTombstones { width: 0, ..rt });
        model_into(&mut unfiltered, false, 13, 1, 4000, 2000, RangeTombstones { width: 0, ..rt });
        assert!(expected.len() < unfiltered.len(), "the range deletions delete written keys");
        let held: BTreeSet<u64> =
            contents[0].iter().map(|(k, _)| u64::from_be_bytes(k[..8].try_into().unwrap())).collect();
        assert_eq!(held, expected, "{extra:?}");
    }
}
