//! `ebb-bench experiment` end to end: a tiny grid (a few hundred operations
//! per run) runs as child processes and leaves its JSON, table and plot.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ebb_bench::experiment::run::ExperimentResults;

fn ebb_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ebb-bench")).args(args).output().expect("run ebb-bench")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Writes `contents` to `dir/name`, runs it as an experiment into `dir/out`
/// and checks it succeeded; returns the output folder, what the run printed
/// and its `runs.json`.
fn run_experiment(dir: &Path, name: &str, contents: &str) -> (PathBuf, String, ExperimentResults) {
    let file = dir.join(name);
    std::fs::write(&file, contents).unwrap();
    let out = dir.join("out");
    let o = ebb_bench(&["experiment", file.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", text(&o.stderr));
    let results = serde_json::from_str(&std::fs::read_to_string(out.join("runs.json")).unwrap()).unwrap();
    (out, stdout, results)
}

const TINY: &str = r#"
name = "tiny"
description = "two memtable sizes, two repetitions, a few hundred operations"
repetitions = 2
seed = 5
figures = ["ops_per_sec", "mb_per_sec", "p99_micros", "write_amp", "db_size_mb"]

[workload]
benchmarks = "fillrandom,readrandom"
num = 300
value_size = 100
bottommost_compression = "lz4"

[grid]
write_buffer_size = ["64KiB", "256KiB"]
"#;

#[test]
fn a_tiny_grid_runs_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let (out, stdout, results) = run_experiment(dir.path(), "tiny.toml", TINY);
    for progress in ["[1/4] write_buffer_size=64KiB  rep 1/2", "[4/4] write_buffer_size=256KiB  rep 2/2"] {
        assert!(stdout.contains(progress), "no {progress:?} in:\n{stdout}");
    }

    assert_eq!(results.experiment.swept, ["write_buffer_size"]);
    assert_eq!(results.points.len(), 2);
    for (p, wbs) in results.points.iter().zip(["64KiB", "256KiB"]) {
        assert_eq!(p.values["write_buffer_size"], wbs);
        assert_eq!(p.runs.len(), 2);
        assert_eq!(p.runs.iter().map(|r| r.seed).collect::<Vec<_>>(), [5, 6]);
        for r in &p.runs {
            assert!(r.ok, "{:?}", r.error);
            assert!(r.figures["fillrandom"]["ops_per_sec"] > 0.0);
            assert!(r.figures["readrandom"]["ops_per_sec"] > 0.0);
            assert!(r.db_bytes.unwrap() > 0);
            assert!(out.join(r.report.as_ref().unwrap()).exists());
        }
        let s = &p.summary["fillrandom"]["ops_per_sec"];
        assert_eq!(s.n, 2);
        assert!(s.min <= s.median && s.median <= s.max);
        // Each run's report records the swept value and the seed.
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join(p.runs[0].report.as_ref().unwrap())).unwrap())
                .unwrap();
        let wanted = if wbs == "64KiB" { 65536 } else { 262144 };
        assert_eq!(report["flags"]["write_buffer_size"]["value"], wanted);
        assert_eq!(report["seed"], 5);
    }
    // The Ebb option without a flag reached the runs through an OPTIONS file.
    let options = std::fs::read_to_string(out.join("options/p0-r0.OPTIONS")).unwrap();
    assert!(options.contains("bottommost_compression=lz4"), "{options}");

    let table = std::fs::read_to_string(out.join("table.txt")).unwrap();
    assert!(table.contains("median (min..max) of 2 repetition(s)"), "{table}");
    assert!(table.lines().nth(1).unwrap().starts_with("write_buffer_size  benchmark"), "{table}");
    assert_eq!(table.lines().filter(|l| l.starts_with("64KiB") || l.starts_with("256KiB")).count(), 4, "{table}");
    assert!(stdout.contains(table.lines().nth(2).unwrap()), "the table is printed too");
    let csv = std::fs::read_to_string(out.join("table.csv")).unwrap();
    assert!(csv.starts_with("point,write_buffer_size,benchmark,figure,n,median,min,max\n"), "{csv}");
    assert!(csv.lines().any(|l| l.starts_with("1,256KiB,fillrandom,ops_per_sec,2,")), "{csv}");
    let svg = std::fs::read_to_string(out.join("plot-write_buffer_size.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("fillrandom: ops_per_sec vs write_buffer_size"), "plot");
}

const STAGED: &str = r#"
name = "staged"
description = "a fill before, overwrite measured, a read-back after"
repetitions = 1
figures = ["ops_per_sec", "p99_micros"]

[workload]
benchmarks = "overwrite"
num = 300
value_size = 100

[before]
benchmarks = "fillseq"
num = 300
value_size = 100

[after]
inherit = ["bloom_bits"]
benchmarks = "readrandom,readseq"
num = 300
value_size = 100
reads = 200

[[points]]
label = "no filter"
bloom_bits = 0

[[points]]
label = "12 bits"
bloom_bits = 12
"#;

#[test]
fn stages_run_before_and_after_on_the_same_database() {
    let dir = tempfile::tempdir().unwrap();
    let (out, _, results) = run_experiment(dir.path(), "staged.toml", STAGED);
    for (p, bits) in results.points.iter().zip([0, 12]) {
        let r = &p.runs[0];
        assert!(r.ok, "{:?}", r.error);
        let names: Vec<&String> = r.figures.keys().collect();
        assert_eq!(names, ["after.readrandom", "after.readseq", "overwrite"], "the fill is not measured");
        let tag = format!("p{}-r0", p.index);
        // The read-back found every key the fill wrote: it read the same database.
        let after: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join(format!("reports/{tag}.after.json"))).unwrap())
                .unwrap();
        let read = after["results"].as_array().unwrap().iter().find(|b| b["name"] == "readrandom").unwrap();
        assert_eq!(read["message"], "(200 of 200 found)", "{read}");
        assert_eq!(after["flags"]["bloom_bits"]["value"], bits, "the point's bloom bits reach the read-back");
        assert_eq!(after["flags"]["use_existing_db"]["value"], true);
        let main: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join(format!("reports/{tag}.json"))).unwrap()).unwrap();
        assert_eq!(main["flags"]["use_existing_db"]["value"], true, "the measured run starts from the fill");
        assert!(out.join(format!("logs/{tag}.before.log")).exists());
    }
    let table = std::fs::read_to_string(out.join("table.txt")).unwrap();
    assert!(table.lines().nth(1).unwrap().starts_with("point      bloom_bits  benchmark"), "{table}");
    assert!(table.lines().any(|l| l.starts_with("12 bits") && l.contains("after.readrandom")), "{table}");
    let svg = std::fs::read_to_string(out.join("plot-points.svg")).unwrap();
    assert!(svg.contains("overwrite: ops_per_sec") && svg.contains("12 bits"), "plot");
    assert!(!out.join("plot-bloom_bits.svg").exists(), "a list of points is plotted side by side");

    // --replot redraws from runs.json, running nothing: new labels reach the table.
    std::fs::remove_file(out.join("plot-points.svg")).unwrap();
    let renamed = dir.path().join("renamed.toml");
    std::fs::write(&renamed, STAGED.replace("\"12 bits\"", "\"twelve bits per key\"")).unwrap();
    let o = ebb_bench(&["experiment", renamed.to_str().unwrap(), "--replot", "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let table = std::fs::read_to_string(out.join("table.txt")).unwrap();
    assert!(table.lines().any(|l| l.starts_with("twelve bits per key") && l.contains("overwrite")), "{table}");
    assert!(out.join("plot-points.svg").exists());
    let runs = std::fs::read_dir(out.join("reports")).unwrap().count();
    assert_eq!(runs, 6, "two points, three reports each, none added");
    // Another experiment's file is refused.
    let other = dir.path().join("other.toml");
    std::fs::write(&other, STAGED.replace("bloom_bits = 12", "bloom_bits = 14")).unwrap();
    let o = ebb_bench(&["experiment", other.to_str().unwrap(), "--replot", "--out", out.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("not the same experiment"), "{}", text(&o.stderr));
}

#[test]
fn dry_run_prints_the_plan_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tiny.toml");
    std::fs::write(&file, TINY).unwrap();
    let out = dir.path().join("out");
    let o = ebb_bench(&[
        "experiment",
        file.to_str().unwrap(),
        "--dry-run",
        "--out",
        out.to_str().unwrap(),
        "--set",
        "num=50",
    ]);
    let stdout = text(&o.stdout);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(stdout.contains("2 point(s) x 2 repetition(s) = 4 run(s)"), "{stdout}");
    assert!(stdout.contains("--num=50"), "--set reaches the workload: {stdout}");
    assert!(!out.exists());
}

#[test]
fn a_bad_file_exits_1_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, TINY.replace("repetitions = 2", "repetitions = 0")).unwrap();
    let o = ebb_bench(&["experiment", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = text(&o.stderr);
    assert!(e.contains("bad.toml") && e.contains("repetitions must be at least 1"), "{e}");
    let o = ebb_bench(&["experiment", file.to_str().unwrap(), "--set", "nosuch=1"]);
    assert!(text(&o.stderr).contains("nosuch"), "{}", text(&o.stderr));
}
