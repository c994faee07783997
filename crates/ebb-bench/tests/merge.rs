//! db_bench's merge benchmarks (`mergerandom`, `readrandommergerandom`)
//! through the binary against a real Ebb database, and their refusals.

mod common;

use std::process::{Command, Output};

use regex::Regex;

fn ebb_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ebb-bench")).args(args).output().expect("run ebb-bench")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The header's first line: nothing may be printed before a refusal.
const HEADER: &str = "Ebb:        version";

/// The line `name : ... N operations; ...` of stdout, parsed, with its message.
fn result(stdout: &str, name: &str) -> (ebb_bench::stats::ResultLine, String) {
    let line = stdout
        .lines()
        .find(|l| l.split_once(" : ").is_some_and(|(n, _)| n.trim() == name))
        .unwrap_or_else(|| panic!("no {name} line:\n{stdout}"));
    let parsed = ebb_bench::stats::parse_result_line(line).unwrap_or_else(|| panic!("bad result line: {line}"));
    let message = line.split_once("operations;").unwrap().1.trim().to_string();
    (parsed, message)
}

#[test]
fn mergerandom_then_readrandommergerandom_with_uint64add() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let json = dir.path().join("run.json");
    let o = ebb_bench(&[
        "--benchmarks=mergerandom,readrandommergerandom",
        "--merge_operator=uint64add",
        "--num=3000",
        "--merge_keys=100",
        "--value_size=8",
        "--threads=2",
        "--seed=5",
        "--progress=false",
        &format!("--db={}", db.display()),
        &format!("--json={}", json.display()),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{}", stderr(&o));
    assert!(!stderr(&o).contains("uint64add reads"), "8-byte operands need no note: {}", stderr(&o));

    // mergerandom: --num merges per thread, each of a 16-byte key and an 8-byte operand.
    let (merge, message) = result(&out, "mergerandom");
    assert_eq!(merge.operations, 2 * 3000);
    assert_eq!(message.split_once("MB/s").map(|(_, m)| m.trim()), Some("( updates:3000)"), "{message}");

    // readrandommergerandom: --num operations per thread, 70% of them merges by default.
    let (mixed, message) = result(&out, "readrandommergerandom");
    assert_eq!(mixed.operations, 2 * 3000);
    assert!(mixed.mb_per_sec.is_none(), "db_bench reports no bytes for it");
    let re = Regex::new(r"^\(reads:(\d+) merges:(\d+) total:3000 hits:(\d+) maxlength:(\d+)\)$").unwrap();
    let caps = re.captures(&message).unwrap_or_else(|| panic!("bad message: {message}"));
    let n = |i: usize| caps[i].parse::<u64>().unwrap();
    let (reads, merges, hits, max_length) = (n(1), n(2), n(3), n(4));
    assert_eq!(reads + merges, 3000, "one thread's operations");
    assert!((1800..=2400).contains(&merges), "about 70% merges: {message}");
    assert_eq!(hits, reads, "6000 merges into 100 keys left none unmerged: {message}");
    assert_eq!(max_length, 8, "a uint64add value is 8 bytes");

    // The report has the same counts, and the merges' latencies apart.
    let report = ebb_bench::report::Report::read(&json).unwrap();
    let ops: Vec<(&str, u64)> = report.results.iter().map(|r| (r.name.as_str(), r.ops)).collect();
    assert_eq!(ops, [("mergerandom", 6000), ("readrandommergerandom", 6000)]);
    assert_eq!(report.results[0].latency["merge"].count, 6000);
    let mixed = &report.results[1];
    assert_eq!(mixed.latency["merge"].count + mixed.latency["read"].count, 6000);

    // What is left: the 100 merge keys, each an 8-byte sum.
    let mut opts = ebb::Options::default();
    opts.merge_operator = Some(ebb::merge_operator::from_name("uint64add").unwrap());
    let handle = ebb::Db::open(&db, opts).unwrap();
    let values: Vec<usize> = handle
        .iterator(ebb::ReadOptions::default(), ebb::IteratorMode::Start)
        .map(|entry| entry.unwrap().1.len())
        .collect();
    assert_eq!(values.len(), 100);
    assert!(values.iter().all(|len| *len == 8), "{values:?}");
}

#[test]
fn merging_without_a_merge_operator_is_refused_before_the_run() {
    for benchmarks in ["--benchmarks=mergerandom", "--benchmarks=fillseq,readrandommergerandom"] {
        let o = ebb_bench(&[benchmarks, "--num=10", "--progress=false"]);
        assert_eq!(o.status.code(), Some(1), "{benchmarks}");
        let err = stderr(&o);
        assert!(err.contains("needs a merge operator") && err.contains("--merge_operator"), "{benchmarks}: {err}");
        assert!(!String::from_utf8_lossy(&o.stdout).contains(HEADER), "{benchmarks}: the run started");
    }
    // An unknown operator is named, for the peer too (before it is opened, or found missing).
    for engine in ["--engine=ebb", "--engine=rocksdb"] {
        let o = ebb_bench(&[engine, "--benchmarks=mergerandom", "--merge_operator=sum", "--num=10"]);
        assert_eq!(o.status.code(), Some(1), "{engine}");
        let err = stderr(&o);
        assert!(err.contains("--merge_operator=sum") && err.contains("uint64add"), "{engine}: {err}");
        assert!(!String::from_utf8_lossy(&o.stdout).contains("version"), "{engine}: the run started");
    }
    // Bad counts name their flag.
    for (flag, needle) in [("--merge_keys=0", "--merge_keys"), ("--mergereadpercent=101", "--mergereadpercent")] {
        let o = ebb_bench(&["--benchmarks=readrandommergerandom", "--merge_operator=uint64add", flag]);
        assert_eq!(o.status.code(), Some(1), "{flag}");
        assert!(stderr(&o).contains(needle), "{flag}: {}", stderr(&o));
    }
    // db_bench's name of the percentage is suggested for a near miss.
    let o = ebb_bench(&["--mergereadpercentage=30"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("did you mean --mergereadpercent?"), "{}", stderr(&o));
}

#[test]
fn uint64add_with_operands_of_another_size_adds_nothing_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let o = ebb_bench(&[
        "--benchmarks=mergerandom,readrandommergerandom",
        "--merge_operator=uint64add",
        "--num=500",
        "--merge_keys=20",
        "--mergereadpercent=0",
        "--seed=9",
        "--progress=false",
        "--summary=false",
        &format!("--db={}", dir.path().join("db").display()),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{}", stderr(&o));
    assert!(stderr(&o).contains("--value_size=100"), "the note: {}", stderr(&o));
    // 100-byte operands count as 0, as in RocksDB: every key reads as an 8-byte zero.
    let (_, message) = result(&out, "readrandommergerandom");
    assert_eq!(message, "(reads:500 merges:0 total:500 hits:500 maxlength:8)");
    let mut opts = ebb::Options::default();
    opts.merge_operator = Some(ebb::merge_operator::from_name("uint64add").unwrap());
    let handle = ebb::Db::open(dir.path().join("db"), opts).unwrap();
    let values: Vec<Vec<u8>> = handle
        .iterator(ebb::ReadOptions::default(), ebb::IteratorMode::Start)
        .map(|entry| entry.unwrap().1.to_vec())
        .collect();
    assert_eq!(values.len(), 20);
    assert!(values.iter().all(|v| v == &[0u8; 8]), "{values:?}");
}

/// The peer's operators (closures re-implementing RocksDB's, see
/// `engine::rocksdb`) against Ebb's: the same seeded merges leave the same
/// values, read back through each engine (which merges what compaction left
/// as operands), and both engines read the operator back from their OPTIONS
/// by name.
#[cfg(feature = "rocksdb-peer")]
#[test]
fn both_engines_merge_to_the_same_values_with_each_operator() {
    use ebb_bench::config::EngineKind;

    for op in ["uint64add", "stringappend", "max", "put"] {
        let dir = tempfile::tempdir().unwrap();
        let mut runs = Vec::new();
        for (engine, kind) in [("ebb", EngineKind::Ebb), ("rocksdb", EngineKind::RocksDb)] {
            let db = dir.path().join(engine);
            let args = [
                format!("--engine={engine}"),
                "--benchmarks=mergerandom,readrandommergerandom,compact,options".to_string(),
                format!("--merge_operator={op}"),
                "--num=2000".to_string(),
                "--merge_keys=50".to_string(),
                "--value_size=8".to_string(),
                "--seed=11".to_string(),
                "--progress=false".to_string(),
                "--summary=false".to_string(),
                format!("--db={}", db.display()),
            ];
            let o = ebb_bench(&args.iter().map(String::as_str).collect::<Vec<_>>());
            let out = String::from_utf8_lossy(&o.stdout).into_owned();
            assert!(o.status.success(), "{op} on {engine}: stdout:\n{out}\nstderr:\n{}", stderr(&o));
            assert!(out.contains(&format!("\n  --merge_operator={op}\n")), "{op} on {engine} reads back:\n{out}");
            let (line, message) = result(&out, "readrandommergerandom");
            assert_eq!(line.operations, 2000);
            let contents = common::engine_contents(kind, &db, &args);
            assert_eq!(contents.len(), 50, "{op} on {engine}");
            runs.push((message, contents));
        }
        assert_eq!(runs[0].0, runs[1].0, "{op}: the same reads, merges and hits");
        assert!(runs[0].1 == runs[1].1, "{op}: the engines' values differ");
    }
}
