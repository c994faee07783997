//! `ebb-bench compare [--peer=rocksdb|db_bench] [--reps=3] [--db_bench=PATH] -- FLAGS...`:
//! runs the same db_bench flags with Ebb and with a peer, alternating which
//! runs first (A B, B A, A B, ...), and prints per benchmark the median ops/s
//! and MB/s of each and the Ebb/peer ratio.
//!
//! Fairness: both engines get the same `--seed` (one is drawn when none is
//! given), each its own database directory, and the same options: an engine
//! flag left out takes Ebb's value on both (db_bench is passed Ebb's values
//! explicitly). Before the runs, each engine is opened once with
//! `--benchmarks=options`, its options are read back and printed side by side,
//! and the comparison is refused if they differ on a flag the user gave.
//!
//! Peers: `rocksdb` is this binary with `--engine=rocksdb` (needs the
//! `rocksdb-peer` feature); `db_bench` is RocksDB's own tool found on PATH
//! (Debian's rocksdb-tools), given a fresh temporary `--db` per run unless the
//! flags name one. Flags only ebb-bench knows are refused for db_bench.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::bail;
use crate::engine::options_map;
use crate::error::{BenchError, Result};
use crate::flags::{Flags, Parsed, Value};
use crate::stats::{parse_result_line, ResultLine};

/// Flags that RocksDB's db_bench does not have.
pub const EBB_ONLY_FLAGS: &[&str] = &[
    "engine",
    "json",
    "progress",
    "burst_seconds",
    "idle_seconds",
    "burst_writes",
    "trace_file",
    "mix_point_reads",
    "mix_range_scans",
    "mix_scan_length",
    "mix_inserts",
    "mix_updates",
    "mix_deletes",
    "key_distribution",
    "zipf_theta",
    "hotspot_fraction",
    "hotspot_ops_fraction",
    "workload_file",
    "auto_tuned_compactions",
    "options_preset",
    "options_file",
    "summary",
    "sine_finished_seconds",
    "sine_finished_write_rate_limit",
    "max_manifest_file_size",
    "cache_lru_promote",
    "rate_limiter_fairness",
    "background_tuning",
    "tuning_flush_watermark_pct",
    "tuning_total_watermark_pct",
    "tuning_interval_us",
    "tuning_io_budget",
    "tuning_max_l0_files",
    "tuning_max_l0_debt_ratio",
    "tuning_read_share_pct",
    "idle_policy",
    "idle_probe_interval_ms",
    "idle_quiet_ms",
    "idle_throughput_threshold",
    "malloc_trim_period_ms",
    "readers",
    "transaction_deadlock_detect",
    "transfer_accounts",
];

/// The peer engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// This binary with `--engine=rocksdb`.
    RocksDb,
    /// RocksDB's db_bench at this path.
    DbBench(PathBuf),
}

impl Peer {
    fn name(&self) -> &'static str {
        match self {
            Peer::RocksDb => "rocksdb",
            Peer::DbBench(_) => "db_bench",
        }
    }
}

fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| p.is_file())
}

/// Median of some numbers (mean of the middle two for an even count).
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 })
}

/// Result lines keyed by benchmark (a repeated benchmark gets `#2`, `#3`, ...), in order.
pub fn collect_results(stdout: &str) -> Vec<(String, ResultLine)> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    stdout
        .lines()
        .filter_map(parse_result_line)
        .map(|r| {
            let n = seen.entry(r.name.clone()).or_insert(0);
            *n += 1;
            let key = if *n == 1 { r.name.clone() } else { format!("{}#{n}", r.name) };
            (key, r)
        })
        .collect()
}

fn run_child(program: &Path, args: &[String], what: &str) -> Result<String> {
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| BenchError::new(format!("compare: cannot run {}: {e}", program.display())))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        let tail: Vec<&str> = stdout.lines().rev().take(10).collect();
        bail!(
            "compare: the {what} run failed ({}); last output:\n{}",
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(stdout)
}

/// `ebb-bench compare --help`.
pub const USAGE: &str = "\
usage: ebb-bench compare [--peer=rocksdb|db_bench] [--reps=3] [--db_bench=PATH] -- FLAGS...

Runs the db_bench FLAGS (see ebb-bench --help) with Ebb and with a peer engine,
alternating (ebb, peer, ebb, peer, ...), and prints per benchmark the median
ops/s and MB/s of each and the Ebb/peer ops/s ratio.

  --peer=rocksdb    the default: this binary with --engine=rocksdb; needs ebb-bench
                    built with --features rocksdb-peer (builds RocksDB from source)
  --peer=db_bench   RocksDB's db_bench from PATH (Debian: apt-get install rocksdb-tools),
                    with a fresh temporary --db per run unless FLAGS name one
  --db_bench=PATH   the db_bench binary to run instead of the one on PATH
  --reps=N          runs of each engine (default 3)

Both engines get the same --seed (drawn when not given), each its own
database directory (--db=D becomes D-ebb and D-<peer>), and the same options:
an engine flag left out takes Ebb's value on both. With --peer=rocksdb each
engine is first opened once to read its options back; they are printed side
by side and the comparison is refused when they differ on a flag given.

Example: ebb-bench compare --peer=db_bench -- --benchmarks=fillrandom,readrandom --num=100000
";

/// The `compare` subcommand.
pub fn run(args: &[String]) -> Result<()> {
    let mut peer_name = "rocksdb".to_string();
    let mut reps = 3usize;
    let mut db_bench_path: Option<PathBuf> = None;
    let split = args.iter().position(|a| a == "--");
    if args[..split.unwrap_or(args.len())].iter().any(|a| a == "--help" || a == "-h" || a == "-help") {
        print!("{USAGE}");
        return Ok(());
    }
    let (own, flags) = match split {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => bail!("compare: put the benchmark flags after `--` (ebb-bench compare [--peer=rocksdb|db_bench] [--reps=3] -- FLAGS...; see ebb-bench compare --help)"),
    };
    for a in own {
        if let Some(v) = a.strip_prefix("--peer=") {
            peer_name = v.to_string();
        } else if let Some(v) = a.strip_prefix("--reps=") {
            reps = v
                .parse()
                .ok()
                .filter(|r| *r >= 1)
                .ok_or_else(|| BenchError::new(format!("compare: --reps={v} is not a positive count")))?;
        } else if let Some(v) = a.strip_prefix("--db_bench=") {
            db_bench_path = Some(PathBuf::from(v));
        } else {
            bail!("compare: unknown option {a:?} (expected --peer=, --reps=, --db_bench=)");
        }
    }
    let parsed = match Flags::parse(flags.iter().cloned())? {
        Parsed::Run(f) => f,
        _ => bail!("compare: --help and --version are not benchmark flags"),
    };
    if parsed.is_set("engine") {
        bail!("compare: do not pass --engine; compare runs ebb and the peer itself");
    }
    let peer = match peer_name.as_str() {
        "rocksdb" => {
            if !cfg!(feature = "rocksdb-peer") {
                bail!("compare: --peer=rocksdb needs ebb-bench built with --features rocksdb-peer (or use --peer=db_bench)");
            }
            Peer::RocksDb
        }
        "db_bench" => {
            if let Some(f) = EBB_ONLY_FLAGS.iter().find(|f| parsed.is_set(f)) {
                bail!("compare: --{f} is an ebb-bench flag that RocksDB's db_bench does not accept");
            }
            let path = match db_bench_path {
                Some(p) => p,
                None => find_on_path("db_bench").ok_or_else(|| {
                    BenchError::new(
                        "compare: db_bench is not on PATH; install Debian's RocksDB tools \
                         (apt-get install rocksdb-tools) or pass --db_bench=PATH",
                    )
                })?,
            };
            Peer::DbBench(path)
        }
        other => bail!("compare: unknown peer {other:?} (expected rocksdb or db_bench)"),
    };
    let me = std::env::current_exe().map_err(|e| BenchError::new(format!("compare: cannot find this binary: {e}")))?;
    let seed = match parsed.u64("seed")? {
        0 => crate::timefmt::unix_now() as u64,
        s => s,
    };
    eprintln!("compare: --seed={seed} for every run of both engines");
    let runs = plan(flags, &parsed, &peer, reps, seed)?;
    if peer == Peer::RocksDb {
        let probe = |engine: &str| -> Result<BTreeMap<String, String>> {
            let dir = scratch_dir("ebb-bench-options-")?;
            let a = probe_args(flags, engine, &dir.path().join("db"));
            Ok(options_map::parse_effective(&run_child(&me, &a, engine)?))
        };
        let rows = options_map::option_rows(&probe("ebb")?, &probe("rocksdb")?, &|f| {
            options_map::given_value(&parsed, f).is_some()
        });
        eprint!("{}", options_map::render_rows(&rows, "rocksdb"));
        let given_and_different: Vec<String> = rows
            .iter()
            .filter(|r| r.given && r.differs())
            .map(|r| format!("--{}: ebb {} rocksdb {}", r.flag, r.ebb, r.peer))
            .collect();
        if !given_and_different.is_empty() {
            bail!(
                "compare: the engines do not run with the options given; refusing to compare:\n  {}",
                given_and_different.join("\n  ")
            );
        }
        let others = rows.iter().filter(|r| r.differs()).count();
        if others > 0 {
            eprintln!("compare: warning: {others} option(s) marked ! differ between the engines (not given on the command line)");
        }
    }
    let mut ebb_runs: Vec<Vec<(String, ResultLine)>> = Vec::new();
    let mut peer_runs: Vec<Vec<(String, ResultLine)>> = Vec::new();
    for run in &runs {
        let name = if run.peer { peer.name() } else { "ebb" };
        eprintln!("compare: run {} of {reps}: {name}", run.rep + 1);
        let program = match (&peer, run.peer) {
            (Peer::DbBench(path), true) => path.clone(),
            _ => me.clone(),
        };
        let mut args = run.args.clone();
        // db_bench gets a fresh temporary directory when the flags name none.
        let _guard = if run.peer && matches!(peer, Peer::DbBench(_)) && !parsed.is_set("db") {
            let dir = scratch_dir("ebb-bench-db_bench-")?;
            args.push(format!("--db={}", dir.path().join("db").display()));
            Some(dir)
        } else {
            None
        };
        let results = collect_results(&run_child(&program, &args, name)?);
        if run.peer {
            peer_runs.push(results);
        } else {
            ebb_runs.push(results);
        }
    }
    print!("{}", comparison_table(&ebb_runs, &peer_runs, peer.name()));
    Ok(())
}

/// A temporary directory, deleted when dropped.
/// The flags that open `engine` once in `db` and print its options: the
/// comparison's flags, with only the `options` benchmark.
fn probe_args(flags: &[String], engine: &str, db: &Path) -> Vec<String> {
    let mut a = flags.to_vec();
    a.extend([
        format!("--engine={engine}"),
        "--benchmarks=options".into(),
        // `options` writes nothing for readers to run beside.
        "--readers=0".into(),
        "--use_existing_db=false".into(),
        format!("--db={}", db.display()),
        "--json=".into(),
        "--progress=false".into(),
        "--summary=false".into(),
    ]);
    a
}

fn scratch_dir(prefix: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| BenchError::new(format!("compare: cannot create a temporary directory: {e}")))
}

/// One run `compare` makes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRun {
    /// Which repetition (from 0).
    pub rep: usize,
    /// The peer's run (else Ebb's).
    pub peer: bool,
    /// Its flags.
    pub args: Vec<String>,
}

/// The runs in order: the engines alternate which goes first in each
/// repetition; every run gets `--seed=seed`; a `--db` the user names becomes
/// one directory per engine (`DB-ebb`, `DB-rocksdb`, `DB-db_bench`). db_bench
/// is given Ebb's value for every engine flag left out that it knows.
pub fn plan(flags: &[String], parsed: &Flags, peer: &Peer, reps: usize, seed: u64) -> Result<Vec<PlannedRun>> {
    let db = parsed.is_set("db").then(|| parsed.str("db").to_string());
    let ebb_args = {
        let mut a = flags.to_vec();
        a.extend(["--engine=ebb".to_string(), "--progress=false".into(), format!("--seed={seed}")]);
        if let Some(db) = &db {
            a.push(format!("--db={db}-ebb"));
        }
        a
    };
    let peer_args = {
        let mut a = flags.to_vec();
        match peer {
            Peer::RocksDb => a.extend(["--engine=rocksdb".to_string(), "--progress=false".into()]),
            Peer::DbBench(_) => {
                let reference = crate::engine::ebb::peer_reference_options(parsed)?;
                for s in options_map::engine_flags() {
                    if options_map::given_value(parsed, s.name).is_some()
                        || EBB_ONLY_FLAGS.contains(&s.name)
                        || s.name == "statistics"
                    {
                        continue;
                    }
                    // db_bench's universal widths are int32: RocksDB's UINT_MAX
                    // default is what db_bench's 0 leaves anyway.
                    if let Some(v) = options_map::ebb_flag_value(s, &reference).filter(|v| {
                        !(s.name.starts_with("universal_") && matches!(v, Value::UInt(u) if *u > i32::MAX as u64))
                    }) {
                        a.push(format!("--{}={}", s.name, v.to_text()));
                    }
                }
            }
        }
        a.push(format!("--seed={seed}"));
        if let Some(db) = &db {
            a.push(format!("--db={db}-{}", peer.name()));
        }
        a
    };
    let mut out = Vec::new();
    for rep in 0..reps {
        let peer_first = rep % 2 == 1;
        for peer_run in [peer_first, !peer_first] {
            let args = if peer_run { peer_args.clone() } else { ebb_args.clone() };
            out.push(PlannedRun { rep, peer: peer_run, args });
        }
    }
    Ok(out)
}

/// The table of medians and ratios.
pub fn comparison_table(
    ebb_runs: &[Vec<(String, ResultLine)>],
    peer_runs: &[Vec<(String, ResultLine)>],
    peer: &str,
) -> String {
    let mut order: Vec<String> = Vec::new();
    for run in ebb_runs.iter().chain(peer_runs) {
        for (k, _) in run {
            if !order.contains(k) {
                order.push(k.clone());
            }
        }
    }
    let medians = |runs: &[Vec<(String, ResultLine)>], key: &str| -> (Option<f64>, Option<f64>) {
        let mut ops: Vec<f64> = Vec::new();
        let mut mb: Vec<f64> = Vec::new();
        for run in runs {
            for (k, r) in run {
                if k == key {
                    ops.push(r.ops_per_sec);
                    if let Some(m) = r.mb_per_sec {
                        mb.push(m);
                    }
                }
            }
        }
        (median(&mut ops), median(&mut mb))
    };
    let fmt = |v: Option<f64>, decimals: usize| v.map_or_else(|| "-".to_string(), |x| format!("{x:.decimals$}"));
    let mut out = format!(
        "\nmedians of {} runs each (ebb and {peer} alternating)\n{:<24} {:>14} {:>14} {:>10} {:>10} {:>12}\n",
        ebb_runs.len(),
        "benchmark",
        "ebb ops/s",
        format!("{peer} ops/s"),
        "ebb MB/s",
        format!("{peer} MB/s"),
        format!("ebb/{peer}")
    );
    for key in order {
        let (e_ops, e_mb) = medians(ebb_runs, &key);
        let (p_ops, p_mb) = medians(peer_runs, &key);
        let ratio = match (e_ops, p_ops) {
            (Some(e), Some(p)) if p > 0.0 => Some(e / p),
            _ => None,
        };
        out.push_str(&format!(
            "{key:<24} {:>14} {:>14} {:>10} {:>10} {:>12}\n",
            fmt(e_ops, 0),
            fmt(p_ops, 0),
            fmt(e_mb, 1),
            fmt(p_mb, 1),
            fmt(ratio, 2)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_ratios() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
        let line = |ops: f64| {
            format!("fillrandom   :      10.000 micros/op {ops} ops/sec 1.000 seconds 100 operations;    1.0 MB/s")
        };
        let ebb: Vec<_> = [100.0, 300.0, 200.0].iter().map(|o| collect_results(&line(*o))).collect();
        let peer: Vec<_> = [100.0, 100.0, 100.0].iter().map(|o| collect_results(&line(*o))).collect();
        let table = comparison_table(&ebb, &peer, "db_bench");
        let row = table.lines().find(|l| l.starts_with("fillrandom")).unwrap();
        assert!(row.contains("200") && row.trim_end().ends_with("2.00"), "{row}");
    }

    #[test]
    fn repeated_benchmarks_are_numbered() {
        let out = "readrandom   :       1.000 micros/op 1000 ops/sec 1.000 seconds 1000 operations;\n\
                   readrandom   :       2.000 micros/op 500 ops/sec 2.000 seconds 1000 operations;\n";
        let r = collect_results(out);
        assert_eq!(r[0].0, "readrandom");
        assert_eq!(r[1].0, "readrandom#2");
    }

    #[test]
    fn compare_needs_the_separator() {
        let e = run(&["--reps=2".to_string()]).unwrap_err().to_string();
        assert!(e.contains("--"), "{e}");
        let e = run(&["--peer=leveldb".into(), "--".into(), "--num=1".into()]).unwrap_err().to_string();
        assert!(e.contains("leveldb"), "{e}");
        assert!(run(&["--help".into()]).is_ok());
        // After `--`, --help belongs to the benchmark flags, which do not take it.
        let e = run(&["--".into(), "--help".into()]).unwrap_err().to_string();
        assert!(e.contains("not benchmark flags"), "{e}");
    }

    fn parsed(args: &[String]) -> Flags {
        match Flags::parse(args.iter().cloned()).unwrap() {
            Parsed::Run(f) => f,
            _ => unreachable!(),
        }
    }

    #[test]
    fn runs_alternate_share_the_seed_and_keep_their_own_directories() {
        let flags: Vec<String> = ["--benchmarks=fillrandom", "--num=10", "--db=/tmp/x"].map(String::from).to_vec();
        let runs = plan(&flags, &parsed(&flags), &Peer::RocksDb, 3, 42).unwrap();
        let order: Vec<bool> = runs.iter().map(|r| r.peer).collect();
        assert_eq!(order, [false, true, true, false, false, true], "who goes first alternates");
        for r in &runs {
            let f = parsed(&r.args);
            assert_eq!(f.u64("seed").unwrap(), 42);
            let engine = if r.peer { "rocksdb" } else { "ebb" };
            assert_eq!(f.str("engine"), engine);
            assert_eq!(f.str("db"), format!("/tmp/x-{engine}"));
        }
    }

    /// `--readers` reaches both engines' runs; db_bench has no such flag, and
    /// the options probe, which runs no writer, leaves it out.
    #[test]
    fn readers_go_to_rocksdb_runs_only() {
        let flags: Vec<String> = ["--benchmarks=fillrandom", "--readers=2"].map(String::from).to_vec();
        let runs = plan(&flags, &parsed(&flags), &Peer::RocksDb, 1, 7).unwrap();
        assert!(runs.iter().all(|r| parsed(&r.args).i64("readers") == 2));
        let probe = parsed(&probe_args(&flags, "rocksdb", Path::new("/tmp/probe")));
        crate::config::Config::from_flags(&probe).expect("the probe is not refused for its readers");
        let peer = vec!["--peer=db_bench".to_string(), "--".into()];
        let e = run(&[peer, flags].concat()).unwrap_err().to_string();
        assert!(e.contains("--readers is an ebb-bench flag"), "{e}");
    }

    #[test]
    fn db_bench_is_given_ebbs_value_for_each_engine_flag_left_out() {
        let flags: Vec<String> = ["--benchmarks=readrandom", "--checksum_type=4"].map(String::from).to_vec();
        let runs = plan(&flags, &parsed(&flags), &Peer::DbBench(PathBuf::from("db_bench")), 1, 7).unwrap();
        let peer = runs.iter().find(|r| r.peer).unwrap();
        let f = parsed(&peer.args);
        assert_eq!(f.i64("bloom_bits"), 10, "Ebb's filter, not db_bench's none");
        assert_eq!(f.i64("checksum_type"), 4, "a flag given stays as given");
        assert!(!peer.args.iter().any(|a| a.starts_with("--background_tuning")), "db_bench has no such flag");
        let ebb = runs.iter().find(|r| !r.peer).unwrap();
        assert!(!ebb.args.iter().any(|a| a.starts_with("--bloom_bits")), "Ebb keeps its own defaults");
    }
}
