//! One benchmark run as a child process of this binary (`--json`, a fresh
//! database in a temporary directory, stdout and stderr to a log file): a
//! crash or a stuck engine ends that run, not the experiment. A run may have
//! a stage before it (a fill it starts from) and one after it (a read-back of
//! the database it left), each its own child process on the same database.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::error::{BenchError, Result};
use crate::report::Report;

use super::spec::{options_text, parse_flags, Settings};

/// What one run needs.
#[derive(Debug, Clone)]
pub struct RunSpec<'a> {
    /// The ebb-bench binary.
    pub exe: &'a Path,
    /// Flags and OPTIONS lines.
    pub settings: &'a Settings,
    /// `--seed`.
    pub seed: u64,
    /// Output folder: `reports/`, `logs/` and `options/` go under it.
    pub out: &'a Path,
    /// Names the run's files (`p3-r1`).
    pub tag: &'a str,
    /// A run on the fresh database before this one (its report is not measured).
    pub before: Option<&'a Settings>,
    /// A run on the database this one left.
    pub after: Option<&'a Settings>,
}

/// A finished run.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// The JSON report.
    pub report: Report,
    /// Bytes in the database directory after the run.
    pub db_bytes: u64,
    /// Wall-clock seconds of the child process.
    pub wall_secs: f64,
    /// Where the report is.
    pub report_path: PathBuf,
    /// The report of the stage after the run, if it has one.
    pub after: Option<Report>,
}

/// Where a run's files go: (report, log, OPTIONS).
pub fn run_files(out: &Path, tag: &str) -> (PathBuf, PathBuf, PathBuf) {
    (
        out.join("reports").join(format!("{tag}.json")),
        out.join("logs").join(format!("{tag}.log")),
        out.join("options").join(format!("{tag}.OPTIONS")),
    )
}

fn io_error(what: &str, path: &Path, e: std::io::Error) -> BenchError {
    BenchError::new(format!("cannot {what} {}: {e}", path.display()))
}

/// The arguments of a run, without the database and report paths.
fn run_args(settings: &Settings, seed: u64, out: &Path, tag: &str) -> Result<Vec<String>> {
    let mut args = settings.args.clone();
    let flags = parse_flags(&args)?;
    if let Some(text) = options_text(&flags, settings)? {
        let (_, _, options) = run_files(out, tag);
        if let Some(dir) = options.parent() {
            std::fs::create_dir_all(dir).map_err(|e| io_error("create", dir, e))?;
        }
        std::fs::write(&options, text).map_err(|e| io_error("write", &options, e))?;
        args.push(format!("--options_file={}", options.display()));
    }
    args.push(format!("--seed={seed}"));
    args.push("--progress=false".into());
    Ok(args)
}

/// Runs one child process with `args` on `db`, its report to `tag`'s report
/// file; returns the report and the wall-clock seconds.
fn invoke(spec: &RunSpec<'_>, settings: &Settings, tag: &str, db: &Path, existing: bool) -> Result<(Report, f64)> {
    let (report_path, log_path, _) = run_files(spec.out, tag);
    for dir in [report_path.parent(), log_path.parent()].into_iter().flatten() {
        std::fs::create_dir_all(dir).map_err(|e| io_error("create", dir, e))?;
    }
    let mut args = run_args(settings, spec.seed, spec.out, tag)?;
    if existing {
        args.push("--use_existing_db=true".into());
    }
    args.push(format!("--db={}", db.display()));
    args.push(format!("--json={}", report_path.display()));
    let _ = std::fs::remove_file(&report_path);
    let log = std::fs::File::create(&log_path).map_err(|e| io_error("create", &log_path, e))?;
    let log_err = log.try_clone().map_err(|e| io_error("open", &log_path, e))?;
    let started = Instant::now();
    let status = Command::new(spec.exe)
        .args(&args)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .status()
        .map_err(|e| BenchError::new(format!("cannot start {}: {e}", spec.exe.display())))?;
    let wall_secs = started.elapsed().as_secs_f64();
    if !status.success() {
        let text = std::fs::read_to_string(&log_path).unwrap_or_default();
        let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("(no output)");
        return Err(BenchError::new(format!("run {tag} failed ({status}): {last} (log: {})", log_path.display())));
    }
    Ok((Report::read(&report_path)?, wall_secs))
}

/// Runs the benchmark (with its stages, on one fresh database); an error says
/// which stage failed, why, and where its log is.
pub fn run(spec: &RunSpec<'_>) -> Result<RunOutcome> {
    let scratch = tempfile::Builder::new()
        .prefix("ebb-experiment-")
        .tempdir()
        .map_err(|e| BenchError::new(format!("cannot create a temporary database directory: {e}")))?;
    let db = scratch.path().join("db");
    if let Some(before) = spec.before {
        invoke(spec, before, &format!("{}.before", spec.tag), &db, false)?;
    }
    let (report, wall_secs) = invoke(spec, spec.settings, spec.tag, &db, spec.before.is_some())?;
    let db_bytes = dir_bytes(&db);
    let after = match spec.after {
        Some(after) => Some(invoke(spec, after, &format!("{}.after", spec.tag), &db, true)?.0),
        None => None,
    };
    let (report_path, _, _) = run_files(spec.out, spec.tag);
    Ok(RunOutcome { report, db_bytes, wall_secs, report_path, after })
}

/// Bytes of the files under `dir` (0 when it is missing).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(_) => e.metadata().map(|m| m.len()).unwrap_or(0),
            Err(_) => 0,
        })
        .sum()
}

/// The measured benchmarks of a report, named as `--benchmarks` lists them
/// (a second `fillrandom` is `fillrandom#2`): not skipped, with operations.
pub fn measured(report: &Report) -> Vec<(String, &crate::report::BenchResult)> {
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    let mut out = Vec::new();
    for r in &report.results {
        let n = seen.entry(r.name.as_str()).or_default();
        *n += 1;
        if r.skipped || r.ops == 0 {
            continue;
        }
        let name = if *n == 1 { r.name.clone() } else { format!("{}#{n}", r.name) };
        out.push((name, r));
    }
    out
}
