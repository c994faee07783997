//! Runs an experiment: every point × repetition as a child run (repetition
//! by repetition, so slow drift of the machine touches every point alike),
//! then writes `runs.json` (every run, every figure), `table.txt` /
//! `table.csv` (median, min, max per point) and `plot-<knob>.svg`
//! (the plotted figures against each swept knob).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::bail;
use crate::error::{BenchError, Result};
use crate::timefmt;

use super::chart::{self, Panel, Series, Style};
use super::child::{self, RunSpec};
use super::figures::{format_number, Figure, Summary};
use super::file::{Experiment, AFTER_PREFIX};

/// Version of the `runs.json` layout.
pub const RESULTS_SCHEMA_VERSION: u32 = 1;

/// How to run.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// The output folder.
    pub out: PathBuf,
    /// The ebb-bench binary for the child runs.
    pub exe: PathBuf,
    /// Plot file extension: `svg` or `png`.
    pub plot_format: String,
}

/// benchmark → figure name → value.
pub type FigureMap = BTreeMap<String, BTreeMap<String, f64>>;

/// One run in `runs.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    /// Repetition (from 0).
    pub repetition: u32,
    /// `--seed` of the run.
    pub seed: u64,
    /// False when the run failed.
    pub ok: bool,
    /// Why it failed.
    pub error: Option<String>,
    /// Wall-clock seconds of the child process.
    pub wall_secs: f64,
    /// The run's JSON report, relative to the output folder.
    pub report: Option<String>,
    /// The run's log, relative to the output folder.
    pub log: String,
    /// Bytes on disk after the run.
    pub db_bytes: Option<u64>,
    /// Every figure of every measured benchmark.
    pub figures: FigureMap,
}

/// One point in `runs.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PointRecord {
    /// Index (from 0).
    pub index: usize,
    /// `knob=value, ...`.
    pub label: String,
    /// knob → value as written.
    pub values: BTreeMap<String, String>,
    /// The flags of its runs (without db, json, seed).
    pub args: Vec<String>,
    /// Its runs.
    pub runs: Vec<RunRecord>,
    /// benchmark → figure → summary over the runs that succeeded.
    pub summary: BTreeMap<String, BTreeMap<String, Summary>>,
}

/// What the experiment was.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExperimentInfo {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// The file.
    pub file: String,
    /// The swept knobs.
    pub swept: Vec<String>,
    /// Runs per point.
    pub repetitions: u32,
    /// Base seed.
    pub seed: u64,
    /// Figures in the table.
    pub figures: Vec<String>,
}

/// `runs.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExperimentResults {
    /// [`RESULTS_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `ebb-bench <version>`.
    pub tool: String,
    /// The experiment.
    pub experiment: ExperimentInfo,
    /// Unix time at the start.
    pub started_unix_secs: f64,
    /// Unix time at the end.
    pub finished_unix_secs: f64,
    /// Every point and its runs.
    pub points: Vec<PointRecord>,
}

fn rel(out: &Path, p: &Path) -> String {
    p.strip_prefix(out).unwrap_or(p).display().to_string()
}

fn write_file(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| BenchError::new(format!("cannot write {}: {e}", path.display())))
}

/// The figures of the measured benchmarks of a finished run (all figures;
/// only the benchmarks the experiment reports); the stage after the run
/// adds its own as `after.<name>`.
pub fn run_figures(outcome: &child::RunOutcome, benchmarks: Option<&[String]>) -> FigureMap {
    let mut out = FigureMap::new();
    let reports = std::iter::once(("", &outcome.report)).chain(outcome.after.iter().map(|r| (AFTER_PREFIX, r)));
    for (prefix, report) in reports {
        for (name, result) in child::measured(report) {
            let name = format!("{prefix}{name}");
            if benchmarks.is_some_and(|b| !b.contains(&name)) {
                continue;
            }
            let figures = Figure::ALL
                .iter()
                .filter_map(|f| f.of(report, result, outcome.db_bytes).map(|v| (f.name().to_string(), v)))
                .collect();
            out.insert(name, figures);
        }
    }
    out
}

/// Prints the plan of an experiment (`--dry-run`).
pub fn print_plan(exp: &Experiment, settings: &RunSettings) -> Result<()> {
    println!(
        "experiment {}: {} point(s) x {} repetition(s) = {} run(s); output in {}",
        exp.name,
        exp.points.len(),
        exp.repetitions,
        exp.runs(),
        settings.out.display()
    );
    if !exp.description.is_empty() {
        println!("  {}", exp.description.trim());
    }
    let figures: Vec<&str> = exp.figures.iter().map(|f| f.name()).collect();
    println!("  figures: {}", figures.join(", "));
    let command = |s: &super::spec::Settings| {
        let mut line = format!("ebb-bench {}", s.args.join(" "));
        if !s.option_lines.is_empty() {
            let _ = write!(line, " --options_file=(with {})", s.option_lines.join(" "));
        }
        line
    };
    for (i, p) in exp.points.iter().enumerate() {
        let s = exp.workload.settings.then(&p.settings());
        if let Some(before) = &exp.before {
            println!("  [{}] before: {} --seed={}..", i + 1, command(&before.for_run(&s)), exp.seed);
        }
        let existing = if exp.before.is_some() { " --use_existing_db=true" } else { "" };
        println!("  [{}] {}: {}{existing} --seed={}..", i + 1, p.label(), command(&s), exp.seed);
        if let Some(after) = &exp.after {
            println!(
                "  [{}] after: {} --use_existing_db=true --seed={}..",
                i + 1,
                command(&after.for_run(&s)),
                exp.seed
            );
        }
    }
    Ok(())
}

/// Runs the experiment and writes its outputs. Failed runs are recorded and
/// reported at the end as an error, after everything is written.
pub fn run(exp: &Experiment, settings: &RunSettings) -> Result<ExperimentResults> {
    let out = &settings.out;
    std::fs::create_dir_all(out).map_err(|e| BenchError::new(format!("cannot create {}: {e}", out.display())))?;
    println!(
        "experiment {}: {} point(s) x {} repetition(s) = {} run(s); output in {}",
        exp.name,
        exp.points.len(),
        exp.repetitions,
        exp.runs(),
        out.display()
    );
    let started = timefmt::unix_now();
    let mut points: Vec<PointRecord> = exp
        .points
        .iter()
        .enumerate()
        .map(|(index, p)| PointRecord {
            index,
            label: p.label(),
            values: p.values.iter().map(|(k, v)| (k.name.clone(), v.label.clone())).collect(),
            args: exp.workload.settings.then(&p.settings()).args,
            runs: Vec::new(),
            summary: BTreeMap::new(),
        })
        .collect();
    let total = exp.runs();
    let mut done = 0;
    let mut failures = Vec::new();
    let progress_figure = exp.figures.first().copied().unwrap_or(Figure::OpsPerSec);
    for repetition in 0..exp.repetitions {
        for (index, point) in exp.points.iter().enumerate() {
            done += 1;
            let tag = format!("p{index}-r{repetition}");
            let seed = exp.seed + u64::from(repetition);
            print!(
                "[{done:>w$}/{total}] {}  rep {}/{} ... ",
                point.label(),
                repetition + 1,
                exp.repetitions,
                w = total.to_string().len()
            );
            let _ = std::io::stdout().flush();
            let run_settings = exp.workload.settings.then(&point.settings());
            let before = exp.before.as_ref().map(|s| s.for_run(&run_settings));
            let after = exp.after.as_ref().map(|s| s.for_run(&run_settings));
            let spec = RunSpec {
                exe: &settings.exe,
                settings: &run_settings,
                seed,
                out,
                tag: &tag,
                before: before.as_ref(),
                after: after.as_ref(),
            };
            let (_, log, _) = child::run_files(out, &tag);
            let record = match child::run(&spec) {
                Ok(outcome) => {
                    let figures = run_figures(&outcome, exp.benchmarks.as_deref());
                    let shown: Vec<String> = figures
                        .iter()
                        .map(|(b, f)| {
                            let v = f.get(progress_figure.name()).map_or("-".into(), |v| format_number(*v));
                            format!("{b} {v} {}", progress_figure.name())
                        })
                        .collect();
                    println!("{:.1} s  {}", outcome.wall_secs, shown.join(", "));
                    RunRecord {
                        repetition,
                        seed,
                        ok: true,
                        error: None,
                        wall_secs: outcome.wall_secs,
                        report: Some(rel(out, &outcome.report_path)),
                        log: rel(out, &log),
                        db_bytes: Some(outcome.db_bytes),
                        figures,
                    }
                }
                Err(e) => {
                    println!("FAILED");
                    eprintln!("ebb-bench experiment: {e}");
                    failures.push(e.to_string());
                    RunRecord {
                        repetition,
                        seed,
                        ok: false,
                        error: Some(e.to_string()),
                        wall_secs: 0.0,
                        report: None,
                        log: rel(out, &log),
                        db_bytes: None,
                        figures: FigureMap::new(),
                    }
                }
            };
            points[index].runs.push(record);
        }
    }
    for p in &mut points {
        p.summary = summarize(&p.runs);
    }
    let results = ExperimentResults {
        schema_version: RESULTS_SCHEMA_VERSION,
        tool: format!("ebb-bench {}", env!("CARGO_PKG_VERSION")),
        experiment: ExperimentInfo {
            name: exp.name.clone(),
            description: exp.description.clone(),
            file: exp.source.display().to_string(),
            swept: exp.swept.clone(),
            repetitions: exp.repetitions,
            seed: exp.seed,
            figures: exp.figures.iter().map(|f| f.name().to_string()).collect(),
        },
        started_unix_secs: started,
        finished_unix_secs: timefmt::unix_now(),
        points,
    };
    let json = serde_json::to_string_pretty(&results)
        .map_err(|e| BenchError::new(format!("cannot encode the results: {e}")))?;
    write_file(&out.join("runs.json"), &(json + "\n"))?;
    println!();
    write_table_and_plots(exp, &results, out, &settings.plot_format)?;
    println!(
        "wrote {}, {}, {}",
        out.join("runs.json").display(),
        out.join("table.txt").display(),
        out.join("table.csv").display()
    );
    if !failures.is_empty() {
        return Err(BenchError::new(format!(
            "{} of {total} run(s) failed; the first: {}",
            failures.len(),
            failures[0]
        )));
    }
    Ok(results)
}

/// Writes the table and plots again from the `runs.json` an earlier run of
/// the same file left in the output folder, running nothing: for a change of
/// `figures`, `plot` or the points' labels after the fact.
pub fn replot(exp: &Experiment, settings: &RunSettings) -> Result<()> {
    let out = &settings.out;
    let path = out.join("runs.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        BenchError::new(format!("--replot: cannot read {}: {e} (run the experiment first)", path.display()))
    })?;
    let results: ExperimentResults = serde_json::from_str(&text)
        .map_err(|e| BenchError::new(format!("--replot: {} is not an experiment's runs.json: {e}", path.display())))?;
    if results.points.len() != exp.points.len() {
        bail!(
            "--replot: {} has {} point(s) and {} has {}: not the same experiment",
            path.display(),
            results.points.len(),
            exp.source.display(),
            exp.points.len()
        );
    }
    for (p, point) in results.points.iter().zip(&exp.points) {
        let values: BTreeMap<String, String> =
            point.values.iter().map(|(k, v)| (k.name.clone(), v.label.clone())).collect();
        if p.values != values {
            bail!(
                "--replot: point {} of {} is {:?}, of {} {:?}: not the same experiment",
                p.index + 1,
                path.display(),
                p.label,
                exp.source.display(),
                point.label()
            );
        }
    }
    write_table_and_plots(exp, &results, out, &settings.plot_format)
}

/// Prints the table of `results` and writes it (`table.txt`, `table.csv`)
/// and the plots into `out`, naming each plot written: what a run ends with
/// and what `--replot` redoes.
fn write_table_and_plots(exp: &Experiment, results: &ExperimentResults, out: &Path, plot_format: &str) -> Result<()> {
    let table = table_text(exp, results);
    print!("{table}");
    write_file(&out.join("table.txt"), &table)?;
    write_file(&out.join("table.csv"), &table_csv(exp, results))?;
    for path in draw_plots(exp, results, out, plot_format)? {
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// benchmark → figure → summary over the runs that succeeded.
pub fn summarize(runs: &[RunRecord]) -> BTreeMap<String, BTreeMap<String, Summary>> {
    let mut samples: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.ok) {
        for (bench, figures) in &r.figures {
            for (figure, v) in figures {
                samples.entry(bench.clone()).or_default().entry(figure.clone()).or_default().push(*v);
            }
        }
    }
    samples
        .into_iter()
        .map(|(b, fs)| (b, fs.into_iter().filter_map(|(f, v)| Summary::of(&v).map(|s| (f, s))).collect()))
        .collect()
}

/// Benchmarks in the order the runs measured them.
fn benchmarks_of(results: &ExperimentResults) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in &results.points {
        for r in &p.runs {
            for b in r.figures.keys() {
                if !out.contains(b) {
                    out.push(b.clone());
                }
            }
        }
    }
    out
}

fn cell(s: Option<&Summary>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s.n == 1 || s.min == s.max => format_number(s.median),
        Some(s) => format!("{} ({}..{})", format_number(s.median), format_number(s.min), format_number(s.max)),
    }
}

/// The table: one row per point and benchmark, one column per figure:
/// `median (min..max)` over the repetitions.
pub fn table_text(exp: &Experiment, results: &ExperimentResults) -> String {
    let named = exp.points.iter().any(|p| p.name.is_some());
    let mut header: Vec<String> = if named { vec!["point".into()] } else { Vec::new() };
    header.extend(exp.swept.iter().cloned());
    header.push("benchmark".into());
    header.extend(exp.figures.iter().map(|f| f.name().to_string()));
    let mut rows = vec![header];
    for (p, point) in results.points.iter().zip(&exp.points) {
        for b in benchmarks_of(results) {
            let mut row: Vec<String> = if named { vec![point.label()] } else { Vec::new() };
            row.extend(exp.swept.iter().map(|k| point.value_of(k).map_or("(default)".into(), |v| v.label.clone())));
            row.push(b.clone());
            let summary = p.summary.get(&b);
            row.extend(exp.figures.iter().map(|f| cell(summary.and_then(|s| s.get(f.name())))));
            rows.push(row);
        }
    }
    let widths: Vec<usize> =
        (0..rows[0].len()).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = format!("{}: median (min..max) of {} repetition(s) per point\n", exp.name, exp.repetitions);
    for row in rows {
        let line: Vec<String> = row.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
    }
    out
}

/// The table in long form: `point,<knobs...>,benchmark,figure,n,median,min,max`.
pub fn table_csv(exp: &Experiment, results: &ExperimentResults) -> String {
    let quote =
        |s: &str| if s.contains([',', '"']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() };
    let mut out = String::from("point");
    for k in &exp.swept {
        let _ = write!(out, ",{}", quote(k));
    }
    out.push_str(",benchmark,figure,n,median,min,max\n");
    for (p, point) in results.points.iter().zip(&exp.points) {
        for (b, figures) in &p.summary {
            for f in &exp.figures {
                let Some(s) = figures.get(f.name()) else { continue };
                let _ = write!(out, "{}", p.index);
                for k in &exp.swept {
                    let _ = write!(out, ",{}", quote(&point.value_of(k).map_or(String::new(), |v| v.label.clone())));
                }
                let _ = writeln!(out, ",{},{},{},{},{},{}", quote(b), f.name(), s.n, s.median, s.min, s.max);
            }
        }
    }
    out
}

/// X positions and tick labels of a knob's values: numbers (log2-spaced when
/// they span 4x or more) or, for text and missing values, categories.
/// Returns the positions, the labelled ticks, and whether the axis is log2.
fn axis(exp: &Experiment, knob: &str) -> (Vec<f64>, Vec<(f64, String)>, bool) {
    let values: Vec<Option<&super::spec::KnobValue>> = exp.points.iter().map(|p| p.value_of(knob)).collect();
    let numbers: Option<Vec<f64>> = values.iter().map(|v| v.and_then(|v| v.number)).collect();
    let mut ticks: Vec<(f64, String)> = Vec::new();
    if let Some(ns) = numbers {
        let (lo, hi) = ns.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| (a.min(*x), b.max(*x)));
        let log = lo > 0.0 && hi / lo >= 4.0;
        let xs: Vec<f64> = ns.iter().map(|x| if log { x.log2() } else { *x }).collect();
        for (x, v) in xs.iter().zip(&values) {
            if !ticks.iter().any(|t| t.0 == *x) {
                ticks.push((*x, v.map_or(String::new(), |v| v.label.clone())));
            }
        }
        // Linear axes of other than small whole numbers keep plotters' own ticks.
        let small_whole = hi - lo <= 40.0 && xs.iter().all(|x| x.fract() == 0.0);
        if !log && !small_whole {
            ticks.clear();
        }
        return (xs, ticks, log);
    }
    let labels: Vec<String> = values.iter().map(|v| v.map_or("(default)".into(), |v| v.label.clone())).collect();
    let mut xs = Vec::new();
    for l in &labels {
        let i = match ticks.iter().position(|t| t.1 == *l) {
            Some(i) => i,
            None => {
                ticks.push((ticks.len() as f64, l.clone()));
                ticks.len() - 1
            }
        };
        xs.push(i as f64);
    }
    (xs, ticks, false)
}

/// Draws `plot-points.svg` for a list of points: one panel per plotted
/// figure and benchmark, the points side by side as categories (their
/// labels), each its median with a min–max bar.
fn draw_points(exp: &Experiment, results: &ExperimentResults, path: &Path) -> Result<bool> {
    let benchmarks = benchmarks_of(results);
    let ticks: Vec<(f64, String)> = exp.points.iter().enumerate().map(|(i, p)| (i as f64, p.label())).collect();
    let mut panels = Vec::new();
    for figure in &exp.plot {
        for b in &benchmarks {
            let points: Vec<(f64, f64, f64, f64)> = results
                .points
                .iter()
                .enumerate()
                .filter_map(|(i, r)| {
                    let s = r.summary.get(b)?.get(figure.name())?;
                    Some((i as f64, s.median, s.min, s.max))
                })
                .collect();
            if points.is_empty() {
                continue;
            }
            panels.push(Panel {
                title: format!("{b}: {}", figure.name()),
                x_desc: "point".into(),
                y_desc: figure.name().to_string(),
                x_ticks: ticks.clone(),
                series: vec![Series {
                    label: format!("median of {}, min-max", exp.repetitions),
                    style: Style::DotsWithRange,
                    points,
                }],
            });
        }
    }
    if panels.is_empty() {
        return Ok(false);
    }
    // About 7 pixels a character of the longest label, per point, plus the axis.
    let longest = ticks.iter().map(|t| t.1.chars().count()).max().unwrap_or(0) as u32;
    let width = 100 + ticks.len() as u32 * (longest * 7 + 16);
    chart::draw_wide(&panels, benchmarks.len(), path, width)?;
    Ok(true)
}

/// Draws `plot-<knob>.svg` (or `.png`) for each swept knob of a grid: one
/// panel per plotted figure and benchmark, one line per combination of the
/// other knobs' values; for a list of points, `plot-points.svg`.
pub fn draw_plots(exp: &Experiment, results: &ExperimentResults, out: &Path, format: &str) -> Result<Vec<PathBuf>> {
    let benchmarks = benchmarks_of(results);
    if benchmarks.is_empty() {
        return Ok(Vec::new());
    }
    if exp.listed {
        let path = out.join(format!("plot-points.{format}"));
        return Ok(if draw_points(exp, results, &path)? { vec![path] } else { Vec::new() });
    }
    let mut written = Vec::new();
    for knob in &exp.swept {
        let (xs, ticks, log) = axis(exp, knob);
        let mut panels = Vec::new();
        for figure in &exp.plot {
            for b in &benchmarks {
                let mut series: Vec<Series> = Vec::new();
                for ((point, record), x) in exp.points.iter().zip(&results.points).zip(&xs) {
                    let others: Vec<String> = point
                        .values
                        .iter()
                        .filter(|(k, _)| k.name != *knob)
                        .map(|(k, v)| format!("{}={}", k.name, v.label))
                        .collect();
                    let label = if others.is_empty() { figure.name().to_string() } else { others.join(", ") };
                    let Some(s) = record.summary.get(b).and_then(|f| f.get(figure.name())) else { continue };
                    let at = match series.iter().position(|s| s.label == label) {
                        Some(i) => i,
                        None => {
                            series.push(Series { label, style: Style::LineWithRange, points: Vec::new() });
                            series.len() - 1
                        }
                    };
                    series[at].points.push((*x, s.median, s.min, s.max));
                }
                for s in &mut series {
                    s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
                }
                if series.is_empty() {
                    continue;
                }
                panels.push(Panel {
                    title: format!("{b}: {} vs {knob}", figure.name()),
                    x_desc: if log { format!("{knob} (log scale)") } else { knob.clone() },
                    y_desc: figure.name().to_string(),
                    x_ticks: ticks.clone(),
                    series,
                });
            }
        }
        if panels.is_empty() {
            continue;
        }
        let path = out.join(format!("plot-{knob}.{format}"));
        chart::draw(&panels, benchmarks.len(), &path)?;
        written.push(path);
    }
    Ok(written)
}
