//! `--readers`: point-read threads beside a shaped writer, through the binary
//! on a real database. Their figures reach the result lines, the summary, the
//! JSON report (per interval and in total) and the plot; bad uses are refused
//! by name before the header.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

fn ebb_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ebb-bench")).args(args).output().expect("run ebb-bench")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// fillseq fills a tiny key space; overwrite then writes under a sine cap
/// with two readers beside it, which should find every key they draw.
fn sine_run_with_readers(engine: &str, dir: &Path) -> (String, Value) {
    let json = dir.join("run.json");
    let o = ebb_bench(&[
        &format!("--engine={engine}"),
        "--benchmarks=fillseq,overwrite,stats",
        "--num=500",
        "--value_size=1000",
        "--duration=3",
        "--sine_write_rate=true",
        "--sine_a=100000",
        "--sine_b=2",
        "--sine_d=200000",
        "--sine_write_rate_interval_milliseconds=200",
        "--write_buffer_size=65536",
        "--readers=2",
        "--seed=5",
        "--progress=false",
        &format!("--db={}", dir.join("db").display()),
        &format!("--json={}", json.display()),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "stdout:\n{stdout}\nstderr:\n{}", stderr(&o));
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (stdout, report)
}

fn check_reads(stdout: &str, report: &Value) {
    let overwrite = &report["results"][1];
    assert_eq!(overwrite["name"], "overwrite");
    let readers = &overwrite["readers"];
    assert_eq!(readers["threads"], 2, "{readers}");
    let ops = readers["ops"].as_u64().unwrap();
    assert!(ops > 0, "{readers}");
    assert_eq!(readers["found"].as_u64(), Some(ops), "fillseq wrote every key in [0, num): {readers}");
    assert_eq!(readers["not_found"], 0);
    for field in ["elapsed_secs", "ops_per_sec"] {
        assert!(readers[field].as_f64().is_some_and(|v| v > 0.0), "{field}: {readers}");
    }
    for field in ["p50", "p99"] {
        assert!(readers["latency"][field].as_f64().is_some(), "{field}: {readers}");
    }
    let intervals = overwrite["intervals"].as_array().unwrap();
    assert!(intervals.len() >= 2, "{intervals:?}");
    let mut summed = 0;
    for i in intervals {
        let reads = &i["reads"];
        let n = reads["ops"].as_u64().unwrap_or_else(|| panic!("no reads in {i}"));
        if i["interval_secs"].as_f64().unwrap() >= 0.2 {
            assert!(n > 0, "{i}");
            assert!(reads["ops_per_sec"].as_f64().unwrap() > 0.0, "{i}");
            assert!(reads["p50_latency_micros"].as_f64().is_some() && reads["p99_latency_micros"].as_f64().is_some());
        }
        assert_eq!((reads["found"].as_u64(), reads["not_found"].as_u64()), (Some(n), Some(0)), "{i}");
        summed += n;
    }
    assert_eq!(summed, ops, "the intervals add up to the total");
    // The writer's result line is db_bench's; the readers' line follows it.
    let line = stdout
        .lines()
        .find(|l| l.starts_with("overwrite    : 2 readers alongside: "))
        .unwrap_or_else(|| panic!("no readers line:\n{stdout}"));
    assert!(line.contains(&format!("({ops} of {ops} found)")) && line.contains(" p99 "), "{line}");
    let results = ebb_bench::compare::collect_results(stdout);
    let names: Vec<&str> = results.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["fillseq", "overwrite"], "compare still sees one result line per benchmark");
    let summary = &stdout[stdout.find("\nSummary").expect("a summary")..];
    assert!(summary.contains("reads/sec") && summary.contains("read p99"), "{summary}");
}

#[test]
fn readers_beside_a_sine_wave_find_the_keys_written() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, report) = sine_run_with_readers("ebb", dir.path());
    check_reads(&stdout, &report);
    assert!(stdout.contains("Readers:    2 threads of random point reads beside fillseq, overwrite"), "{stdout}");
    // The plot gets a row of read panels under the write panels.
    let svg = dir.path().join("run.svg");
    let o = ebb_bench(&["plot", dir.path().join("run.json").to_str().unwrap(), "-o", svg.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("read ops/s") && text.contains("reads beside the writes"), "no read panel");
}

/// The same run through the RocksDB peer: the readers only use `Engine::get`.
#[cfg(feature = "rocksdb-peer")]
#[test]
fn readers_beside_a_sine_wave_on_rocksdb() {
    let dir = tempfile::tempdir().unwrap();
    let (stdout, report) = sine_run_with_readers("rocksdb", dir.path());
    check_reads(&stdout, &report);
}

#[test]
fn readers_are_refused_where_nothing_writes_or_the_count_is_not_a_number() {
    for (args, needles) in [
        (vec!["--readers=two", "--benchmarks=fillrandom"], vec!["--readers", "invalid value \"two\""]),
        (vec!["--readers=-1", "--benchmarks=fillrandom"], vec!["--readers", "negative"]),
        (vec!["--readers=2", "--benchmarks=readrandom,stats"], vec!["--readers=2", "fillrandom", "readrandom,stats"]),
        (
            vec!["--readers=2", "--benchmarks=readwhilewriting"],
            vec!["readwhilewriting's readers are its own --threads"],
        ),
    ] {
        let o = ebb_bench(&[&args[..], &["--num=10"]].concat());
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        for n in needles {
            assert!(stderr(&o).contains(n), "{args:?}: {n:?} not in {}", stderr(&o));
        }
        assert!(!String::from_utf8_lossy(&o.stdout).contains("Ebb:"), "{args:?}: refused after the header");
    }
}
