//! The binary's behaviour on bad input (no engine needed: every case fails
//! before the database is touched) and, awaiting the engine, end-to-end runs.

use std::process::{Command, Output};

use regex::Regex;

fn ebb_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ebb-bench")).args(args).output().expect("run ebb-bench")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn unknown_flag_exits_1_naming_it() {
    let o = ebb_bench(&["--benchmarks=fillseq", "--no_such_flag=3"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--no_such_flag"), "{}", stderr(&o));
}

#[test]
fn unsupported_flag_exits_1() {
    let o = ebb_bench(&["-use_blob_db=true"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("not supported"), "{}", stderr(&o));
}

#[test]
fn bad_combinations_exit_1() {
    for (args, needle) in [
        (vec!["--benchmarks=fillrandom,nosuchbench"], "nosuchbench"),
        (vec!["--sine_a=5"], "--sine_write_rate"),
        (vec!["--burst_seconds=10"], "--idle_seconds"),
        (vec!["--mix_inserts=0.5"], "`mix`"),
        (vec!["--benchmarks=mix"], "no operations"),
        (vec!["--trace_file=/nonexistent/trace.csv"], "trace file"),
        (vec!["--engine=leveldb"], "leveldb"),
        (vec!["--engine=rocksdb", "--options_preset=write"], "ebb engine only"),
        (vec!["--engine=rocksdb", "--manifest_sync_delay_ms=20"], "ebb engine only"),
        (vec!["--options_preset=fastest", "--benchmarks=fillseq", "--num=10"], "fastest"),
        (vec!["--use_existing_db=true", "--benchmarks=readrandom"], "--db"),
        (vec!["--perf_level=7"], "--perf_level"),
    ] {
        let o = ebb_bench(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn bad_trace_file_names_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.csv");
    std::fs::write(&path, "seconds,bytes_per_sec\n0,100\n5,lots\n").unwrap();
    let o = ebb_bench(&[&format!("--trace_file={}", path.display()), "--benchmarks=fillrandom"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("line 3"), "{}", stderr(&o));
}

#[cfg(not(feature = "rocksdb-peer"))]
#[test]
fn rocksdb_engine_without_the_feature_says_how_to_get_it() {
    let o = ebb_bench(&["--engine=rocksdb", "--benchmarks=fillseq", "--num=10"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("rocksdb-peer"), "{}", stderr(&o));
}

#[test]
fn help_lists_flags_and_subcommands_coexist() {
    let o = ebb_bench(&["--help"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("--sine_write_rate=") && out.contains("ebb-bench plot") && out.contains("mixgraph"));
    let o = ebb_bench(&["experiment", "/nonexistent/x.toml"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot read experiment file /nonexistent/x.toml"), "{}", stderr(&o));
    let o = ebb_bench(&["tune"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no file given"), "{}", stderr(&o));
}

#[test]
fn compare_help_prints_its_usage_and_exits_0() {
    for help in ["--help", "-h"] {
        let o = ebb_bench(&["compare", help]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{help}: {}", stderr(&o));
        assert!(out.contains("usage: ebb-bench compare") && out.contains("--peer=db_bench"), "{out}");
    }
}

#[test]
fn help_points_to_the_benchmark_list_where_it_is() {
    let o = ebb_bench(&["--help"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let benchmarks = out.find("\nBenchmarks:\n").expect("a Benchmarks section");
    let flag = out.find("  --benchmarks=").expect("the --benchmarks flag");
    assert!(benchmarks < flag, "the list comes before the flag");
    let help = out[flag..].lines().nth(1).unwrap();
    assert!(help.contains("above") && !help.contains("below"), "{help}");
}

/// The header's first line: nothing may be printed before a refusal.
const HEADER: &str = "Ebb:        version";

#[test]
fn a_flag_ebb_cannot_take_is_refused_before_the_header() {
    for flag in ["--optimize_filters_for_hits=true", "--enable_pipelined_write=true"] {
        let o = ebb_bench(&["--benchmarks=fillseq", "--num=10", flag]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(1), "{flag}");
        let name = flag.split('=').next().unwrap();
        assert!(stderr(&o).contains(name) && stderr(&o).contains("not supported yet"), "{flag}: {}", stderr(&o));
        assert!(!out.contains(HEADER) && !out.contains("Set seed"), "{flag} printed:\n{out}");
    }
    // An engine flag the engine took since (max_open_files) runs.
    let o = ebb_bench(&["--benchmarks=fillseq", "--num=10", "--open_files=100"]);
    assert_eq!(o.status.code(), Some(0), "--open_files=100: {}", stderr(&o));
    // Engine option values the engine refuses fail before the header too.
    let o = ebb_bench(&["--benchmarks=fillseq", "--num=10", "--compression_type=brotli"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("brotli"), "{}", stderr(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains(HEADER));
}

#[test]
fn db_at_a_regular_file_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-db");
    std::fs::write(&file, "x").unwrap();
    for db in [file.clone(), file.join("below")] {
        let o = ebb_bench(&["--benchmarks=fillseq", "--num=10", &format!("--db={}", db.display())]);
        assert_eq!(o.status.code(), Some(1));
        let err = stderr(&o);
        assert!(err.contains(&format!("{} is a regular file, not a directory", file.display())), "{err}");
        assert!(!String::from_utf8_lossy(&o.stdout).contains(HEADER));
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x", "the file is left alone");
}

#[test]
fn header_says_what_a_zero_rate_means() {
    let o = ebb_bench(&["--benchmarks=fillseq", "--num=10", "--progress=false", "--summary=false"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(out.contains("Write rate: 0 bytes/second (0 = unlimited)"), "{out}");
    assert!(out.contains("Read rate: 0 ops/second (0 = unlimited)"), "{out}");
    assert!(!out.contains("Summary"), "--summary=false leaves it out:\n{out}");
}

// ---- awaiting the engine: these drive a real Ebb database ----

#[test]
fn a_run_ends_with_a_summary_of_throughput_levels_and_tuner() {
    // Small memtables and levels, so that a few thousand entries flush and compact.
    let o = ebb_bench(&[
        "--benchmarks=fillrandom,overwrite,readrandom",
        "--num=20000",
        "--value_size=100",
        "--write_buffer_size=65536",
        "--target_file_size_base=65536",
        "--max_bytes_for_level_base=262144",
        "--level_compaction_dynamic_level_bytes=false",
        "--background_tuning=adaptive",
        "--progress=false",
        "--seed=3",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{}", stderr(&o));
    let summary = &out[out.find("\nSummary").unwrap_or_else(|| panic!("no summary:\n{out}"))..];
    for name in ["fillrandom", "overwrite", "readrandom"] {
        let row = Regex::new(&format!(r"(?m)^  {name} +\d+ +[\d.]+ +[\d.]+ +\d+ +\d+ +[\d.]+  \S")).unwrap();
        assert!(row.is_match(summary), "no {name} row:\n{summary}");
    }
    assert!(Regex::new(r"Write amplification \d+\.\d").unwrap().is_match(summary), "{summary}");
    assert!(Regex::new(r"Levels now: L\d \d+ files?, [\d.]+ MB").unwrap().is_match(summary), "{summary}");
    assert!(summary.contains("Tuner (adaptive):"), "{summary}");
    // db_bench's result lines are still the ones compare parses, and the summary adds none.
    let results = ebb_bench::compare::collect_results(&out);
    assert_eq!(results.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(), ["fillrandom", "overwrite", "readrandom"]);
}

/// db_bench's result line.
fn result_line_regex() -> Regex {
    Regex::new(r"^(\S+)\s* : +\d+\.\d{3} micros/op \d+ ops/sec \d+\.\d{3} seconds \d+ operations;( +\d+\.\d MB/s)?")
        .unwrap()
}

#[test]
fn end_to_end_benchmarks_print_db_bench_result_lines() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let o = ebb_bench(&[
        "--benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,readreverse,seekrandom,multireadrandom,\
          readwhilewriting,updaterandom,mixgraph,deleterandom,compact,waitforcompaction,stats,levelstats",
        "--num=5000",
        "--value_size=100",
        "--batch_size=4",
        "--mix_put_ratio=0.2",
        "--mix_seek_ratio=0.1",
        "--histogram",
        "--seed=42",
        "--progress=false",
        &format!("--json={}", json.display()),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "stdout:\n{stdout}\nstderr:\n{}", stderr(&o));
    let re = result_line_regex();
    for name in ["fillseq", "fillrandom", "overwrite", "readrandom", "readseq", "readreverse", "seekrandom", "mixgraph"]
    {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{name:<12} :")))
            .unwrap_or_else(|| panic!("no {name} line:\n{stdout}"));
        assert!(re.is_match(line), "bad result line: {line}");
    }
    assert!(stdout.contains("Microseconds per write:") && stdout.contains("Percentiles: P50:"));
    let report = ebb_bench::report::Report::read(&json).unwrap();
    assert_eq!(report.seed, 42);
    assert!(report.results.iter().any(|r| r.name == "fillrandom" && r.ops > 0 && !r.intervals.is_empty()));
}

/// Appendix A's regular expressions, as the thesis's parser applies them to
/// db_bench's stderr. The PDF text lost characters in two places, restored
/// here: the uptime pattern prints as `Uptime\secs\)` (meant: `Uptime\(secs\)`),
/// and the MB patterns print as `\sMB\s` in Appendix A but `\sMB\s/s` in
/// §3.2, while RocksDB's lines (`ingest: 1.23 GB, 4.56 MB/s`) need `\sMB/s`.
const THESIS_REGEXES: &[&str] = &[
    r"Uptime\(secs\).*?(\d*\.\d*)\stotal",
    r"Uptime\(secs\).*?(\d*\.\d*)\sinterval",
    r"Interval\sstall.*?(\d*\.\d*)\spercent",
    r"Cumulative\sstall.*?(\d*\.\d*)\spercent",
    r"Interval\swrites.*?(\d*\.\d*)\sMB/s",
    r"Cumulative\swrites.*?(\d*\.\d*)\sMB/s",
    r"Cumulative\scompaction.*?(\d*\.\d*)\sMB/s",
    r"Interval\scompaction.*?(\d*\.\d*)\sMB/s",
];

#[test]
fn end_to_end_stats_output_satisfies_the_thesis_parser() {
    let o = ebb_bench(&[
        "--benchmarks=fillrandom,stats",
        "-statistics",
        "-duration=3",
        "-value_size=10000",
        "-compression_type=None",
        "-sine_write_rate=true",
        "-sine_a=2000000",
        "-sine_b=1.0",
        "-sine_c=4.71",
        "-sine_d=4000000",
        "-sine_write_rate_interval_milliseconds=500",
        "-stats_interval_seconds=1",
        "-stats_per_interval=1",
        "-progress=false",
        "-seed=7",
    ]);
    let err = stderr(&o);
    assert!(o.status.success(), "stderr:\n{err}");
    for pattern in THESIS_REGEXES {
        let re = Regex::new(pattern).unwrap();
        let matches = re.captures_iter(&err).count();
        assert!(matches >= 2, "{pattern} matched {matches} times in the interval stats:\n{err}");
    }
    let thread_line = Regex::new(
        r"\.\.\. thread 0: \((\d+),(\d+)\) ops and \(([\d.]+),([\d.]+)\) ops/second in \(([\d.]+),([\d.]+)\) seconds",
    )
    .unwrap();
    assert!(thread_line.is_match(&err), "{err}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("Cumulative writes"), "stats benchmark output:\n{stdout}");
}

#[test]
fn end_to_end_bursts_report_both_throughputs() {
    let o = ebb_bench(&[
        "--benchmarks=fillrandom",
        "--duration=3",
        "--burst_seconds=1",
        "--idle_seconds=1",
        "--num=100000",
        "--progress=false",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    let line = stdout.lines().find(|l| l.contains("bursts")).unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("over the whole run") && line.contains("over burst time"), "{line}");
}

/// Fills 3,000 keys over three column families with `fill` (with `engine`
/// flags before), then reads every key back; returns the directory and the
/// database's path in it.
fn fill_three_families_and_find_every_key(engine: &[&str], fill: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_flag = format!("--db={}", db.display());
    let common = ["--num=3000", "--value_size=50", "--num_column_families=3", "--progress=false", db_flag.as_str()];
    let common = [engine, &common[..]].concat();
    let o = ebb_bench(&[&[fill], &common[..]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let o = ebb_bench(&[&["--benchmarks=readrandom", "--use_existing_db=1", "--reads=3000"], &common[..]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("(3000 of 3000 found)"), "{out}");
    (dir, db)
}

#[test]
fn column_families_spread_the_keys_and_reads_find_them() {
    let (_dir, db) = fill_three_families_and_find_every_key(&[], "--benchmarks=fillseq");
    let db_flag = format!("--db={}", db.display());
    // Three families, each holding about a third of the keys.
    let opts = ebb::Options::default();
    let mut names = ebb::Db::list_column_families(&db, &opts).unwrap();
    names.sort();
    assert_eq!(names, ["column_family_name_000001", "column_family_name_000002", "default"]);
    let listed: Vec<(&str, ebb::Options)> = names[..2].iter().map(|n| (n.as_str(), opts.clone())).collect();
    let handle = ebb::Db::open_cf(&db, opts.clone(), &listed).unwrap();
    let mut counts = vec![handle.iterator(ebb::ReadOptions::default(), ebb::IteratorMode::Start).count()];
    for n in &names[..2] {
        let cf = handle.cf_handle(n).unwrap();
        counts.push(handle.iterator_cf(&cf, ebb::ReadOptions::default(), ebb::IteratorMode::Start).count());
    }
    assert_eq!(counts.iter().sum::<usize>(), 3000, "{counts:?}");
    assert!(counts.iter().all(|c| *c > 800), "{counts:?}");
    // Bad counts are refused by name.
    let o = ebb_bench(&["--benchmarks=fillseq", "--num_column_families=0", db_flag.as_str()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--num_column_families"), "{}", stderr(&o));
}

/// The rocksdb peer spreads keys over the same families, by the same hash.
#[cfg(feature = "rocksdb-peer")]
#[test]
fn the_rocksdb_peer_spreads_keys_over_column_families_too() {
    let (_dir, db) = fill_three_families_and_find_every_key(&["--engine=rocksdb"], "--benchmarks=fillseq,flush");
    // RocksDB's OPTIONS file lists the three families.
    let options = std::fs::read_dir(&db)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("OPTIONS-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .last()
        .unwrap();
    for name in ["default", "column_family_name_000001", "column_family_name_000002"] {
        assert!(options.contains(&format!("[CFOptions \"{name}\"]")), "{name} missing");
    }
    // A transaction database with families is refused, as Ebb's is.
    let db_flag = format!("--db={}", db.display());
    let o = ebb_bench(&[
        "--engine=rocksdb",
        "--benchmarks=fillseq",
        "--optimistic_transaction_db=true",
        "--num_column_families=3",
        &db_flag,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--num_column_families"), "{}", stderr(&o));
}

#[test]
fn report_memory_prints_and_records_resident_and_engine_memory() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let o = ebb_bench(&[
        "--benchmarks=fillrandom,readrandom",
        "--num=20000",
        "--value_size=100",
        "--cache_size=8388608",
        "--write_buffer_size=262144",
        "--report_memory=true",
        "--progress=false",
        "--summary=false",
        &format!("--db={}", dir.path().join("db").display()),
        &format!("--json={}", json.display()),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "stdout:\n{out}\nstderr:\n{}", stderr(&o));
    let line = Regex::new(
        r"(?m)^Memory: +RSS peak [\d.]+ MB, at end [\d.]+ MB; block cache [\d.]+ MB, memtables [\d.]+ MB, table readers [\d.]+ MB$",
    )
    .unwrap();
    assert_eq!(line.find_iter(&out).count(), 2, "a memory line per benchmark:\n{out}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let results = report["results"].as_array().unwrap();
    let fill = &results[0]["memory"];
    let read = &results[1]["memory"];
    assert!(fill["memtable_bytes"].as_u64().unwrap() > 0, "{fill}");
    assert!(read["block_cache_bytes"].as_u64().unwrap() > 0, "reads filled the cache: {read}");
    assert!(read["table_readers_bytes"].as_u64().unwrap() > 0, "tables are open: {read}");
    let peak = read["rss_peak_bytes"].as_u64().unwrap();
    assert!(peak >= read["block_cache_bytes"].as_u64().unwrap(), "{read}");
    assert!(read["peak_since_start"].as_bool().unwrap());
    // Without the flag there is neither the line nor the field.
    let o = ebb_bench(&["--benchmarks=fillseq", "--num=10", "--progress=false", "--summary=false"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && !out.contains("Memory:"), "{out}");
}

#[test]
fn a_misspelt_benchmark_gets_the_nearest_name() {
    let o = ebb_bench(&["--benchmarks=fillseq,readrandon", "--num=10"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(r#"unknown benchmark "readrandon" in --benchmarks (did you mean "readrandom"?)"#),
        "{}",
        stderr(&o)
    );
    // Nothing near: the list is where to look.
    let o = ebb_bench(&["--benchmarks=zzzzzzzzzzzz", "--num=10"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("see --help for the list"), "{}", stderr(&o));
}

/// `--perf_level` prints each benchmark thread's `PerfContext` (and Ebb's
/// `IOStatsContext`) after the result line, as db_bench does; off (the
/// default) prints none.
#[test]
fn perf_level_prints_each_threads_counters_after_its_benchmark() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db_flag = format!("--db={}", db.display());
    let o = ebb_bench(&[
        "--benchmarks=fillrandom,readrandom",
        "--num=2000",
        "--threads=2",
        "--perf_level=2",
        "--progress=false",
        &db_flag,
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{}{out}", stderr(&o));
    let readrandom = &out[out.find("readrandom ").expect("a readrandom line")..];
    for tid in 0..2 {
        let at = readrandom.find(&format!("PERF_CONTEXT (thread {tid}):\n")).expect("each thread's counters");
        let line = readrandom[at..].lines().nth(1).unwrap();
        // Each thread read 2,000 keys.
        assert!(line.contains("get_count = 2000"), "{line}");
    }
    assert!(out[..out.find("readrandom ").unwrap()].contains("write_group_count = "), "the fill's writes: {out}");
    let o =
        ebb_bench(&["--benchmarks=readrandom", "--num=2000", "--use_existing_db=true", "--progress=false", &db_flag]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!String::from_utf8_lossy(&o.stdout).contains("PERF_CONTEXT"));
}
