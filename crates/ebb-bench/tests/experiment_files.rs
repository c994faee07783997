//! Experiment and tune files: what parses, what is refused, and that each
//! refusal names the problem. Every shipped file under experiments/ parses.

use std::path::{Path, PathBuf};

use ebb_bench::experiment::file::Experiment;
use ebb_bench::experiment::spec::Settings;
use ebb_bench::experiment::tune::{Domain, Tune};

fn experiment(text: &str) -> Result<Experiment, String> {
    Experiment::parse(text, Path::new("/tmp/test.toml")).map_err(|e| e.to_string())
}

fn tune(text: &str) -> Result<Tune, String> {
    Tune::parse(text, Path::new("/tmp/tune.toml"), &Settings::default()).map_err(|e| e.to_string())
}

fn refused(text: &str, needles: &[&str]) {
    let e = experiment(text).expect_err("the file should be refused");
    for n in needles {
        assert!(e.contains(n), "{n:?} not in: {e}");
    }
}

const WORKLOAD: &str = "[workload]\nbenchmarks = \"fillrandom\"\nnum = 1000\n";

#[test]
fn a_grid_expands_to_its_product_in_order() {
    let e = experiment(&format!(
        "repetitions = 2\n{WORKLOAD}[grid]\nwrite_buffer_size = {{ from = \"1MiB\", to = \"8MiB\", factor = 2 }}\n\
         bloom_bits = [5, 10]\n"
    ))
    .unwrap();
    assert_eq!(e.name, "test");
    assert_eq!(e.swept, ["bloom_bits", "write_buffer_size"]);
    assert_eq!(e.points.len(), 8);
    assert_eq!(e.runs(), 16);
    assert_eq!(e.points[0].label(), "bloom_bits=5, write_buffer_size=1MiB");
    assert_eq!(e.points[7].label(), "bloom_bits=10, write_buffer_size=8MiB");
    let args = e.workload.settings.then(&e.points[3].settings()).args;
    assert!(args.contains(&"--write_buffer_size=8388608".to_string()), "{args:?}");
    assert!(args.contains(&"--num=1000".to_string()), "{args:?}");
}

#[test]
fn points_lists_and_workload_forms() {
    let e = experiment(
        "workload = \"--benchmarks=fillseq,readrandom --num=500\"\nfigures = [\"ops_per_sec\"]\n\
         [[points]]\noptions_preset = \"\"\n[[points]]\noptions_preset = \"write\"\n\
         [[points]]\noptions_preset = \"read\"\nbloom_bits_per_key = 12\n",
    )
    .unwrap();
    assert_eq!(e.swept, ["options_preset", "bloom_bits_per_key"]);
    assert_eq!(e.points.len(), 3);
    assert_eq!(e.points[0].label(), "options_preset=(none)");
    // bloom_bits_per_key is the option the --bloom_bits flag sets.
    assert!(e.points[2].settings().args.contains(&"--bloom_bits=12".to_string()));
    let e = experiment(
        "workload = [\"--benchmarks=fillseq\", \"--num=10\"]\n[grid]\nbottommost_compression = [\"zstd\"]\n",
    )
    .unwrap();
    assert_eq!(e.points[0].settings().option_lines, ["bottommost_compression=zstd"]);
}

/// `readers` is a flag like any other: a workload or a grid may set it, its
/// figures may be reported, and a workload where nothing writes is refused.
#[test]
fn readers_pass_through_to_the_runs() {
    let e = experiment(&format!(
        "figures = [\"ops_per_sec\", \"read_ops_per_sec\", \"read_p99_micros\"]\n{WORKLOAD}readers = 2\n\
         [grid]\nbenchmark_read_rate_limit = [1000, 10000]\n"
    ))
    .unwrap();
    assert!(e.workload.settings.args.contains(&"--readers=2".to_string()), "{:?}", e.workload.settings.args);
    assert_eq!(
        e.figures.iter().map(|f| f.name()).collect::<Vec<_>>(),
        ["ops_per_sec", "read_ops_per_sec", "read_p99_micros"]
    );
    let e = experiment(&format!("{WORKLOAD}[grid]\nreaders = [0, 1, 4]\n")).unwrap();
    assert_eq!(e.points[2].label(), "readers=4");
    refused(
        "[workload]\nbenchmarks = \"readrandom\"\nreaders = 1\n[grid]\nnum = [10]\n",
        &["--readers=1", "readwhilewriting"],
    );
}

#[test]
fn a_mix_becomes_mix_flags() {
    let e = experiment(
        "[workload]\nbenchmarks = \"fillseq,mix\"\nnum = 100\n[workload.mix]\npoint_reads = 0.7\nupdates = 0.3\n\
         key_distribution = \"zipfian\"\n[grid]\ncache_size = [\"1MiB\"]\n",
    )
    .unwrap();
    let args = &e.workload.settings.args;
    assert!(
        args.contains(&"--mix_point_reads=0.7".to_string()) && args.contains(&"--key_distribution=zipfian".to_string())
    );
    refused(
        "[workload]\nbenchmarks = \"fillseq,mix\"\n[workload.mix]\npoint_read = 1.0\n[grid]\nnum = [1]\n",
        &["workload.mix", "point_read"],
    );
}

#[test]
fn stages_run_the_points_engine_and_only_the_knobs_they_inherit() {
    let e = experiment(
        r#"
benchmarks = ["overwrite", "after.readrandom"]
[workload]
benchmarks = "overwrite"
num = 1000
bloom_bits = 10
bottommost_compression = "lz4"
[before]
benchmarks = "fillseq"
num = 1000
disable_auto_compactions = true
[after]
inherit = ["bloom_bits", "bottommost_compression", "cache_size"]
benchmarks = "readrandom"
reads = 10
[[points]]
label = "ebb, 4 bits"
engine = "ebb"
bloom_bits = 4
[[points]]
disable_auto_compactions = true
"#,
    )
    .unwrap();
    assert!(e.listed);
    assert_eq!(e.points[0].label(), "ebb, 4 bits");
    assert_eq!(e.points[1].label(), "disable_auto_compactions=true");
    let run = e.workload.settings.then(&e.points[0].settings());
    let before = e.before.as_ref().unwrap().for_run(&run).args;
    assert_eq!(before, ["--engine=ebb", "--benchmarks=fillseq", "--disable_auto_compactions=true", "--num=1000"]);
    // The point's value wins over the workload's; a knob neither sets is not passed.
    let after = e.after.as_ref().unwrap().for_run(&run);
    assert_eq!(after.args, ["--engine=ebb", "--bloom_bits=4", "--benchmarks=readrandom", "--reads=10"]);
    assert_eq!(after.option_lines, ["bottommost_compression=lz4"]);
    // A point that leaves the engine to the default passes none; the stage takes the workload's bloom bits.
    let run = e.workload.settings.then(&e.points[1].settings());
    assert_eq!(e.after.as_ref().unwrap().for_run(&run).args[0], "--bloom_bits=10");
}

#[test]
fn invalid_stages_and_labels_are_refused() {
    let points = "[[points]]\nnum = 10\n";
    refused(&format!("{WORKLOAD}[after]\nreads = 3\n{points}"), &["after", "benchmarks"]);
    refused(&format!("{WORKLOAD}[after]\nbenchmarks = \"readrandom\"\nengine = \"ebb\"\n{points}"), &["engine"]);
    refused(
        &format!("{WORKLOAD}[before]\nbenchmarks = \"fillseq\"\ninherit = [\"engine\"]\n{points}"),
        &["before.inherit", "engine"],
    );
    refused(
        &format!(
            "{WORKLOAD}[after]\nbenchmarks = \"readrandom\"\ninherit = [\"bloom_bits\"]\nbloom_bits = 3\n{points}"
        ),
        &["bloom_bits", "both inherited and set"],
    );
    refused(
        &format!("{WORKLOAD}[after]\nbenchmarks = \"readrandom\"\ninherit = [\"blom_bits\"]\n{points}"),
        &["after.inherit", "blom_bits"],
    );
    refused(&format!("{WORKLOAD}[after]\nbenchmarks = \"nosuch\"\n{points}"), &["point 1", "after", "nosuch"]);
    refused(
        &format!("benchmarks = [\"after.readseq\"]\n{WORKLOAD}[after]\nbenchmarks = \"readrandom\"\n{points}"),
        &["after.readseq", "not run", "after.readrandom"],
    );
    refused(
        &format!("{WORKLOAD}[[points]]\nlabel = \"a\"\nnum = 1\n[[points]]\nlabel = \"a\"\n"),
        &["points[1]", "points[2]", "own label"],
    );
    refused(&format!("{WORKLOAD}[[points]]\nlabel = 3\n"), &["points[1]", "label"]);
}

#[test]
fn invalid_files_are_refused_naming_the_problem() {
    refused(&format!("repetition = 3\n{WORKLOAD}[grid]\nnum = [1]\n"), &["unknown field `repetition`"]);
    refused(&format!("{WORKLOAD}[grid]\nwrite_bufer_size = [1]\n"), &["write_bufer_size", "write_buffer_size"]);
    refused(&format!("{WORKLOAD}[grid]\n"), &["grid is empty"]);
    refused(&format!("{WORKLOAD}[grid]\nwrite_buffer_size = []\n"), &["grid.write_buffer_size", "no values"]);
    refused(&format!("repetitions = 0\n{WORKLOAD}[grid]\nnum = [1]\n"), &["repetitions must be at least 1"]);
    refused(
        &format!("figures = [\"speed\"]\n{WORKLOAD}[grid]\nnum = [1]\n"),
        &["unknown figure \"speed\"", "ops_per_sec"],
    );
    refused(&format!("figures = []\n{WORKLOAD}[grid]\nnum = [1]\n"), &["figures is empty"]);
    refused(WORKLOAD, &["nothing to sweep"]);
    refused(&format!("{WORKLOAD}[grid]\nnum = [1]\n[[points]]\nnum = 2\n"), &["not both"]);
    refused(&format!("points = []\n{WORKLOAD}"), &["points is empty"]);
    refused("[grid]\nnum = [1]\n", &["missing field `workload`"]);
    refused(&format!("{WORKLOAD}[grid]\nwrite_buffer_size = [\"big\"]\n"), &["write_buffer_size", "\"big\""]);
    refused(&format!("{WORKLOAD}[grid]\nwrite_buffer_size = {{ from = 1, to = 8 }}\n"), &["factor", "step"]);
    refused(&format!("{WORKLOAD}[grid]\nwrite_buffer_size = {{ from = 8, to = 1, step = 1 }}\n"), &["must not exceed"]);
    // Options the engine refuses name the point.
    refused(&format!("{WORKLOAD}[grid]\nwrite_buffer_size = [100]\n"), &["point 1", "write_buffer_size=100", "4096"]);
    refused(&format!("{WORKLOAD}[grid]\ncompaction_style = [3]\n"), &["compaction_style"]);
    refused(
        "workload = \"--benchmarks=fillrandom --nmu=3\"\n[grid]\nnum = [1]\n",
        &["\"nmu\"", "did you mean \"num\""],
    );
    refused("workload = \"--db=/tmp/x\"\n[grid]\nnum = [1]\n", &["\"db\"", "fresh database"]);
    refused(&format!("{WORKLOAD}[grid]\nseed = [1, 2]\n"), &["top-level `seed`"]);
    refused("workload = \"--benchmarks=nosuch\"\n[grid]\nnum = [1]\n", &["nosuch"]);
    refused(&format!("benchmarks = [\"readrandom\"]\n{WORKLOAD}[grid]\nnum = [1]\n"), &["readrandom", "not run"]);
    refused("workload = 3\n[grid]\nnum = [1]\n", &["workload must be"]);
    refused(&format!("{WORKLOAD}[space.num]\ntype = \"int\"\nlow = 1\nhigh = 2\n"), &["tune file", "ebb-bench tune"]);
    refused("this is = not toml", &["test.toml"]);
}

const TUNE_HEAD: &str = "[workload]\nbenchmarks = \"fillrandom\"\nnum = 1000\n[objective]\nmaximize = \"mb_per_sec\"\n";

fn tune_refused(text: &str, needles: &[&str]) {
    let e = tune(text).expect_err("the file should be refused");
    for n in needles {
        assert!(e.contains(n), "{n:?} not in: {e}");
    }
}

#[test]
fn tune_files_declare_a_space_and_an_objective() {
    let t = tune(&format!(
        "{TUNE_HEAD}[space.write_buffer_size]\ntype = \"int\"\nlow = \"1MiB\"\nhigh = \"64MiB\"\nlog = true\n\
         [space.compression_type]\ntype = \"categorical\"\nchoices = [\"none\", \"lz4\"]\n\
         [space.max_bytes_for_level_multiplier]\ntype = \"float\"\nlow = 4\nhigh = 12\n\
         [objective.limits]\nwrite_amp = 10.0\n"
    ))
    .unwrap();
    assert_eq!(t.space.len(), 3);
    assert_eq!(t.space[2].domain, Domain::Int { low: 1 << 20, high: 64 << 20, log: true, step: 1 });
    assert_eq!((t.iterations, t.sampler.as_str(), t.repetitions), (30, "tpe", 1));
    assert_eq!(t.objective.describe(), "maximize mb_per_sec, write_amp <= 10");
}

#[test]
fn invalid_tune_files_are_refused_naming_the_problem() {
    let space = "[space.write_buffer_size]\ntype = \"int\"\nlow = \"1MiB\"\nhigh = \"8MiB\"\n";
    tune_refused(TUNE_HEAD, &["missing [space]"]);
    tune_refused(&format!("{TUNE_HEAD}[space]\n"), &["[space] is empty"]);
    tune_refused(&format!("{TUNE_HEAD}[space.nosuch_option]\ntype = \"int\"\nlow = 1\nhigh = 2\n"), &["nosuch_option"]);
    tune_refused(
        &format!("{TUNE_HEAD}[space.num]\ntype = \"integer\"\nlow = 1\nhigh = 2\n"),
        &["space.num", "integer"],
    );
    tune_refused(&format!("{TUNE_HEAD}[space.num]\ntype = \"int\"\nlow = 5\nhigh = 2\n"), &["space.num", "below"]);
    tune_refused(&format!("{TUNE_HEAD}[space.num]\ntype = \"int\"\nlow = 0\nhigh = 2\nlog = true\n"), &["log scale"]);
    tune_refused(
        &format!("{TUNE_HEAD}[space.num]\ntype = \"int\"\nlow = 1\nhigh = 2\nmax = 3\n"),
        &["unknown field `max`"],
    );
    tune_refused(&format!("{TUNE_HEAD}[space.compression_type]\ntype = \"categorical\"\nchoices = []\n"), &["empty"]);
    tune_refused(
        &format!("{TUNE_HEAD}[space.compression_type]\ntype = \"categorical\"\nchoices = [\"brotli\"]\n"),
        &["compression_type", "brotli"],
    );
    tune_refused(&format!("iterations = 0\n{TUNE_HEAD}{space}"), &["iterations must be at least 1"]);
    tune_refused(&format!("sampler = \"cmaes\"\n{TUNE_HEAD}{space}"), &["cmaes"]);
    tune_refused(
        &format!("[workload]\nnum = 1\n[objective]\nmaximize = \"mb_per_sec\"\nminimize = \"p99_micros\"\n{space}"),
        &["exactly one of `maximize` or `minimize`"],
    );
    tune_refused(&format!("{TUNE_HEAD}[objective.limits]\nwrite_ampl = 3.0\n{space}"), &["limits", "write_ampl"]);
    tune_refused(&format!("{TUNE_HEAD}{space}[synthetic]\nnum = 3\n"), &["synthetic", "not in [space]"]);
    tune_refused(&format!("{TUNE_HEAD}{space}[synthetic]\n"), &["no optimum for write_buffer_size"]);
    // The smallest memtable is below what the engine accepts: the corner is checked.
    tune_refused(
        &format!("{TUNE_HEAD}[space.write_buffer_size]\ntype = \"int\"\nlow = 16\nhigh = 4096\n"),
        &["candidate"],
    );
    tune_refused(&format!("{TUNE_HEAD}{space}[grid]\nnum = [1]\n"), &["experiment file"]);
}

fn shipped() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_shipped_file_parses() {
    let files = shipped();
    let names: Vec<String> = files.iter().map(|p| p.file_stem().unwrap().to_string_lossy().into_owned()).collect();
    for want in [
        "memtable_size",
        "sst_size",
        "memtable_count",
        "l0_slowdown_trigger",
        "l0_stop_trigger",
        "bloom_bits",
        "cache_size",
        "compaction_style",
        "background_threads",
        "presets",
        "tune_fillrandom",
    ] {
        assert!(names.iter().any(|n| n == want), "experiments/{want}.toml is missing");
    }
    for path in &files {
        if path.file_stem().unwrap().to_string_lossy().starts_with("tune_") {
            Tune::load(path, &Settings::default()).unwrap_or_else(|e| panic!("{e}"));
        } else {
            let e = Experiment::load(path).unwrap_or_else(|e| panic!("{e}"));
            assert!(!e.description.is_empty(), "{} has no description", path.display());
        }
    }
}
