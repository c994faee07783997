//! `ebb-bench cachebench`: a tiny run of every cache through the library
//! (the report adds up, the cache ends within its capacity with nothing
//! pinned) and through the binary (cache_bench's result lines, exit code 1
//! with the flag named on bad input).

use std::process::{Command, Output};

use ebb_bench::cachebench::{run, CacheBenchConfig};
use regex::Regex;

const TINY: &[&str] = &[
    "--threads=3",
    "--ops_per_thread=3000",
    "--cache_size=1048576",
    "--value_bytes=4096",
    "--num_shard_bits=2",
    "--lookup_percent=90",
    "--insert_percent=5",
    "--erase_percent=5",
    "--lookup_insert_percent=0",
];

fn tiny(extra: &[&str]) -> CacheBenchConfig {
    let args = TINY.iter().chain(extra).copied();
    CacheBenchConfig::parse(args).expect("valid flags").expect("not --help")
}

#[test]
fn tiny_runs_report_every_operation_and_stay_within_capacity() {
    for extra in [
        &["--cache_type=lru_cache"][..],
        &["--cache_type=lru_cache", "--lru_promote=false"],
        &["--cache_type=hyper_clock_cache"],
        &["--cache_type=clock_cache", "--lookup_insert_percent=87", "--lookup_percent=3", "--skewed"],
        &["--nopopulate_cache", "--lean", "--nohistograms"],
        // cache_bench 10's loop: a quarter of the capacity pinned, blind inserts.
        &["--cache_type=hyper_clock_cache", "--pinned_ratio=0.25", "--insert_percent=2", "--blind_insert_percent=3"],
        &["--cache_type=lru_cache", "--pinned_ratio=0.25"],
    ] {
        let config = tiny(extra);
        let mut out = Vec::new();
        let report = run(&config, &mut out).expect("run");
        let text = String::from_utf8(out).unwrap();
        assert_eq!(report.total_ops(), 9000, "{extra:?}");
        assert!(report.elapsed_secs > 0.0 && report.thread_secs > 0.0, "{extra:?}");
        assert!(report.parallel_ops_per_sec() > 0.0 && report.thread_ops_per_sec() > 0.0, "{extra:?}");
        assert!(report.lookups > 0, "{extra:?}");
        if config.populate_cache {
            assert!(report.hits > 0, "{extra:?}: a populated cache with skewed keys must hit");
        }
        assert_eq!(report.capacity, 1 << 20, "{extra:?}");
        assert!(report.usage <= report.capacity, "{extra:?}: usage {} > capacity {}", report.usage, report.capacity);
        assert_eq!(report.pinned_usage, 0, "{extra:?}: every handle was released");
        assert_eq!(report.latency.count(), if config.histograms { 9000 } else { 0 }, "{extra:?}");
        assert!(text.contains("Thread ops/sec = "), "{text}");
        assert_eq!(text.contains("Population complete"), config.populate_cache, "{text}");
    }
}

fn ebb_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ebb-bench")).args(args).output().expect("run ebb-bench")
}

#[test]
fn the_binary_prints_cache_bench_lines() {
    let mut args = vec!["cachebench"];
    args.extend_from_slice(TINY);
    let o = ebb_bench(&args);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}{}", String::from_utf8_lossy(&o.stderr));
    for pattern in [
        r"(?m)^Complete in \d+\.\d{3} s; Rough parallel ops/sec = \d+$",
        r"(?m)^Thread ops/sec = \d+$",
        r"(?m)^Number of threads   : 3$",
        r"(?m)^Max key             : 1024$",
        r"(?m)^Count: 9000 ",
    ] {
        assert!(Regex::new(pattern).unwrap().is_match(&stdout), "{pattern} not in\n{stdout}");
    }
}

#[test]
fn bad_flags_exit_1_naming_the_flag() {
    for (args, needle) in [
        (&["cachebench", "--lookup_percent=50"][..], "must add to 100"),
        (&["cachebench", "--value_bytes=-1"], "--value_bytes"),
        (&["cachebench", "--cache_type=fast_lru_cache"], "--cache_type"),
        (&["cachebench", "--threads=0"], "--threads"),
    ] {
        let o = ebb_bench(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
