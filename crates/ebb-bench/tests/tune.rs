//! `ebb-bench tune`: the optimiser (optuna, tools/tune.py; tools/deps.sh
//! installs tools/requirements.txt into .venv/, which tools/test.sh puts first
//! on PATH) finds a known optimum of the synthetic objective within a set
//! tolerance in a set number of iterations, deterministically for a seed; the
//! OPTIONS file it writes round-trips and runs; a tiny real search runs its
//! candidates as benchmarks.

use std::path::Path;
use std::process::{Command, Output};

use ebb_bench::experiment::tune::TuneResults;

fn ebb_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ebb-bench")).args(args).output().expect("run ebb-bench")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The synthetic objective peaks at a 32 MiB memtable and 16 MiB SSTs.
const SEARCH: &str = r#"
name = "joint"
iterations = 40
seed = 7
startup_trials = 10

[workload]
benchmarks = "fillrandom"
num = 200

[space.write_buffer_size]
type = "int"
low = "1MiB"
high = "128MiB"
log = true

[space.target_file_size_base]
type = "int"
low = "1MiB"
high = "128MiB"
log = true

[objective]
maximize = "mb_per_sec"

[synthetic]
write_buffer_size = "32MiB"
target_file_size_base = "16MiB"
"#;

fn tune(file_text: &str, dir: &Path, extra: &[&str]) -> TuneResults {
    let file = dir.join("search.toml");
    std::fs::write(&file, file_text).unwrap();
    let out = dir.join("out");
    let mut args = vec!["tune", file.to_str().unwrap(), "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = ebb_bench(&args);
    assert!(
        o.status.success(),
        "ebb-bench tune failed (it needs python3 with optuna and a font for its plots: \
         bash tools/test.sh installs both and puts .venv/ first on PATH):\n{}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(out.join("tune.json")).unwrap()).unwrap()
}

fn param(t: &ebb_bench::experiment::tune::TrialRecord, name: &str) -> f64 {
    t.params[name].parse().unwrap()
}

#[test]
fn the_tuner_finds_a_known_optimum() {
    let dir = tempfile::tempdir().unwrap();
    let r = tune(SEARCH, dir.path(), &["--synthetic"]);
    assert_eq!(r.trials.len(), 40);
    assert!(r.synthetic);
    let best = r.best.as_ref().unwrap();
    // Within a factor of sqrt(2) of both optima after 40 iterations.
    let wbs = (param(best, "write_buffer_size") / (32u64 << 20) as f64).log2();
    let sst = (param(best, "target_file_size_base") / (16u64 << 20) as f64).log2();
    assert!(wbs.abs() <= 0.5 && sst.abs() <= 0.5, "best {:?} is too far from the optimum", best.params);
    assert!(best.value.unwrap() > 99.5);
    // Convergence: best so far never falls, and ends at the best.
    let series: Vec<f64> = r.trials.iter().map(|t| t.best_so_far.unwrap()).collect();
    assert!(series.windows(2).all(|w| w[1] >= w[0]), "{series:?}");
    assert_eq!(series.last().copied(), best.value);
    // The baseline is the workload as it is: the 64 MiB defaults, 1 and 2 doublings away.
    assert_eq!(r.baseline.as_ref().unwrap().value, Some(95.0));
    assert!(r.gain_over_baseline.unwrap() > 1.0);
    let out = dir.path().join("out");
    let csv = std::fs::read_to_string(out.join("convergence.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 1 + 40, "header, baseline, 40 iterations");
    assert!(csv.starts_with("iteration,ok,score,value,feasible,best_so_far,best_iteration,"), "{csv}");
    assert!(std::fs::read_to_string(out.join("convergence.svg")).unwrap().contains("<svg"));

    // The model exploits what it learnt: the last ten candidates sit near the
    // optimum (random search's median there is about 90 to 96).
    assert!(late_median(&r) >= 98.5, "median of the last 10: {}", late_median(&r));

    // The same seed proposes the same candidates.
    let again = tempfile::tempdir().unwrap();
    let r2 = tune(SEARCH, again.path(), &["--synthetic"]);
    let params = |r: &TuneResults| r.trials.iter().map(|t| t.params.clone()).collect::<Vec<_>>();
    assert_eq!(params(&r), params(&r2));
}

fn late_median(r: &TuneResults) -> f64 {
    let mut late: Vec<f64> = r.trials.iter().rev().take(10).map(|t| t.value.unwrap()).collect();
    late.sort_by(f64::total_cmp);
    (late[4] + late[5]) / 2.0
}

#[test]
fn random_search_does_not_pass_the_convergence_bar() {
    // The control for the test above: without a model the bar is not met.
    let dir = tempfile::tempdir().unwrap();
    let r = tune(&SEARCH.replace("seed = 7", "seed = 7\nsampler = \"random\""), dir.path(), &["--synthetic"]);
    assert_eq!(r.optimizer["sampler"], "RandomSampler");
    assert!(late_median(&r) < 98.5, "median of the last 10: {}", late_median(&r));
}

#[test]
fn the_best_options_file_round_trips_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let r = tune(SEARCH, dir.path(), &["--synthetic", "--iterations", "12"]);
    let best = r.best.as_ref().unwrap();
    let path = dir.path().join("out/best.OPTIONS");
    assert_eq!(r.options_file.as_deref(), Some(path.to_str().unwrap()));
    let text = std::fs::read_to_string(&path).unwrap();
    let opts = ebb::Options::from_text(&text).unwrap();
    assert_eq!(opts.write_buffer_size.to_string(), best.params["write_buffer_size"]);
    assert_eq!(opts.target_file_size_base.to_string(), best.params["target_file_size_base"]);
    // Past the comment lines, the file is exactly what Options::to_text writes.
    let body: String = text
        .lines()
        .skip_while(|l| l.starts_with("# Best") || l.starts_with("# maximize") || l.starts_with("# Client"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(body, opts.to_text());
    // ebb-bench takes it.
    let json = dir.path().join("run.json");
    let o = ebb_bench(&[
        &format!("--options_file={}", path.display()),
        "--benchmarks=fillseq",
        "--num=100",
        &format!("--json={}", json.display()),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn a_tiny_real_search_runs_each_candidate() {
    let dir = tempfile::tempdir().unwrap();
    let r = tune(SEARCH, dir.path(), &["--iterations", "3"]);
    assert!(!r.synthetic);
    assert_eq!(r.trials.len(), 3);
    for t in &r.trials {
        assert!(t.ok, "{:?}", t.error);
        assert!(t.figures["mb_per_sec"] > 0.0);
        assert_eq!(t.score, Some(t.figures["mb_per_sec"]));
        assert!(dir.path().join(format!("out/reports/t{}-r0.json", t.iteration)).exists());
    }
    assert!(r.baseline.as_ref().unwrap().ok);
    assert!(dir.path().join("out/best.OPTIONS").exists());
    assert_eq!(r.optimizer["sampler"], "TPESampler");
}

#[test]
fn a_missing_interpreter_says_what_to_install() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("search.toml");
    std::fs::write(&file, SEARCH).unwrap();
    let o = ebb_bench(&[
        "tune",
        file.to_str().unwrap(),
        "--synthetic",
        "--python",
        "/nonexistent/python3",
        "--out",
        dir.path().join("out").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o.stderr).contains("tools/requirements.txt"), "{}", text(&o.stderr));
}
