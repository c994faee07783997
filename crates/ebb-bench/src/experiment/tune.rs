//! `ebb-bench tune FILE`: searches a declared space of options for the best
//! objective by Bayesian optimisation, as seed 002 §6.3.1 did with MLOS.
//!
//! The optimiser is optuna (TPE by default) in a Python process,
//! `tools/tune.py`, embedded in this binary and driven over stdin/stdout with
//! one JSON object per line (ask → a candidate, tell → its value), the
//! register/suggest split of MLOS's architecture. Every candidate is a real
//! benchmark run (a child process with `--json`), or, with `--synthetic`, a
//! quadratic of the candidate's distance to an optimum the file declares, so
//! the search itself can be tested without a database. Output:
//! `tune.json`, `convergence.csv`, `convergence.svg` (best so far per
//! iteration) and `best.OPTIONS` (read by `Options::from_text` and
//! `ebb-bench --options_file`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::bail;
use crate::config::{Config, EngineKind};
use crate::engine::ebb::ebb_options_with_text;
use crate::error::{BenchError, Result};
use crate::timefmt;

use super::chart::{self, Panel, Series, Style};
use super::child::{self, RunSpec};
use super::figures::{format_number, Figure};
use super::spec::{
    check_run, knob_value, options_text, parse_workload, resolve_knob, size_label, Knob, KnobValue, Settings, Workload,
};

/// The optimiser script, run with `python3 -c`.
pub const OPTIMIZER_SCRIPT: &str = include_str!("../../../../tools/tune.py");

/// Version of the `tune.json` layout.
pub const TUNE_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTune {
    name: Option<String>,
    description: Option<String>,
    workload: Option<toml::Value>,
    space: Option<BTreeMap<String, RawParam>>,
    objective: Option<RawObjective>,
    iterations: Option<u32>,
    seed: Option<u64>,
    sampler: Option<String>,
    startup_trials: Option<u32>,
    repetitions: Option<u32>,
    baseline: Option<bool>,
    synthetic: Option<toml::Table>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParam {
    #[serde(rename = "type")]
    kind: String,
    low: Option<toml::Value>,
    high: Option<toml::Value>,
    log: Option<bool>,
    step: Option<toml::Value>,
    choices: Option<Vec<toml::Value>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawObjective {
    maximize: Option<toml::Value>,
    minimize: Option<toml::Value>,
    benchmark: Option<String>,
    limits: Option<BTreeMap<String, f64>>,
    penalty: Option<f64>,
}

/// The values a parameter may take.
#[derive(Debug, Clone, PartialEq)]
pub enum Domain {
    /// Integers in `[low, high]` by `step` (log-uniform when `log`).
    Int {
        /// Smallest.
        low: i64,
        /// Largest.
        high: i64,
        /// Log scale.
        log: bool,
        /// Step (1 with `log`).
        step: i64,
    },
    /// Numbers in `[low, high]` (log-uniform when `log`), by `step` if given.
    Float {
        /// Smallest.
        low: f64,
        /// Largest.
        high: f64,
        /// Log scale.
        log: bool,
        /// Step.
        step: Option<f64>,
    },
    /// One of these values.
    Categorical(Vec<KnobValue>),
}

/// One dimension of the search space.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// The knob.
    pub knob: Knob,
    /// Its values.
    pub domain: Domain,
    /// True when the bounds were written as sizes ("4MiB"): labels follow.
    pub sized: bool,
}

/// Optimisation direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// More is better.
    Maximize,
    /// Less is better.
    Minimize,
}

/// What the tuner optimises.
#[derive(Debug, Clone, PartialEq)]
pub struct Objective {
    /// Direction.
    pub direction: Direction,
    /// Σ weight × figure.
    pub terms: Vec<(Figure, f64)>,
    /// The benchmark whose figures count; `None` = the last measured one.
    pub benchmark: Option<String>,
    /// Upper limits on figures: a candidate above one is penalised.
    pub limits: Vec<(Figure, f64)>,
    /// Penalty per unit of relative excess over a limit.
    pub penalty: f64,
}

impl Objective {
    /// `maximize mb_per_sec` or `maximize 1*ops_per_sec - 10*p99_micros`.
    pub fn describe(&self) -> String {
        let dir = match self.direction {
            Direction::Maximize => "maximize",
            Direction::Minimize => "minimize",
        };
        let terms: Vec<String> = self
            .terms
            .iter()
            .map(|(f, w)| if *w == 1.0 { f.name().to_string() } else { format!("{w}*{}", f.name()) })
            .collect();
        let mut s = format!("{dir} {}", terms.join(" + "));
        for (f, l) in &self.limits {
            let _ = write!(s, ", {} <= {l}", f.name());
        }
        s
    }

    /// The objective of some figures; `None` when one of its figures is missing.
    pub fn score(&self, figures: &BTreeMap<String, f64>) -> Option<f64> {
        self.terms.iter().map(|(f, w)| figures.get(f.name()).map(|v| w * v)).sum()
    }

    /// The value told to the optimiser: the score, worsened by `penalty` ×
    /// the relative excess over each limit broken; and whether none was.
    pub fn penalised(&self, score: f64, figures: &BTreeMap<String, f64>) -> (f64, bool) {
        let excess: f64 = self
            .limits
            .iter()
            .filter_map(|(f, limit)| figures.get(f.name()).map(|v| (v - limit) / limit.abs().max(f64::MIN_POSITIVE)))
            .filter(|e| *e > 0.0)
            .sum();
        if excess == 0.0 {
            return (score, true);
        }
        let cost = self.penalty * excess * score.abs().max(1.0);
        match self.direction {
            Direction::Maximize => (score - cost, false),
            Direction::Minimize => (score + cost, false),
        }
    }

    fn better(&self, a: f64, b: f64) -> bool {
        match self.direction {
            Direction::Maximize => a > b,
            Direction::Minimize => a < b,
        }
    }
}

/// A checked tune file.
#[derive(Debug, Clone)]
pub struct Tune {
    /// Name (the file's stem unless given).
    pub name: String,
    /// What it tunes and why.
    pub description: String,
    /// The file.
    pub source: PathBuf,
    /// What every run shares.
    pub workload: Workload,
    /// The search space, in name order.
    pub space: Vec<Param>,
    /// The objective.
    pub objective: Objective,
    /// Candidates to evaluate.
    pub iterations: u32,
    /// Seed of the sampler (and base seed of the runs).
    pub seed: u64,
    /// `tpe`, `random` or `gp`.
    pub sampler: String,
    /// Random candidates before the model takes over.
    pub startup_trials: u32,
    /// Runs per candidate (the median of each figure counts).
    pub repetitions: u32,
    /// Evaluate the workload as it is first, to report the gain over it.
    pub baseline: bool,
    /// knob → optimum of the synthetic objective.
    pub synthetic: Option<Vec<KnobValue>>,
}

const SAMPLERS: &[&str] = &["tpe", "random", "gp"];

fn number(v: &toml::Value) -> Option<f64> {
    v.as_float().or_else(|| v.as_integer().map(|i| i as f64))
}

fn parse_param(name: &str, raw: &RawParam) -> Result<Param> {
    let knob = resolve_knob(name)?;
    let bound = |field: &str, v: &Option<toml::Value>| -> Result<(KnobValue, bool)> {
        let Some(v) = v else { bail!("needs `{field}`") };
        let kv = knob_value(&knob, v)?;
        if kv.number.is_none() {
            bail!("`{field}` must be a number");
        }
        Ok((kv, matches!(v, toml::Value::String(_))))
    };
    let log = raw.log.unwrap_or(false);
    let domain_of_kind = raw.kind.as_str();
    if domain_of_kind != "categorical" && raw.choices.is_some() {
        bail!("`choices` is for type = \"categorical\"");
    }
    let (domain, sized) = match domain_of_kind {
        "int" | "float" => {
            let (low, sized) = bound("low", &raw.low)?;
            let (high, _) = bound("high", &raw.high)?;
            let (lo, hi) = (low.number.unwrap_or(0.0), high.number.unwrap_or(0.0));
            if lo >= hi {
                bail!("`low` ({}) must be below `high` ({})", low.label, high.label);
            }
            if log && lo <= 0.0 {
                bail!("a log scale needs low > 0");
            }
            let step = match &raw.step {
                None => None,
                Some(_) if log => bail!("`step` cannot be used with log = true"),
                Some(s) => match number(s) {
                    Some(x) if x > 0.0 => Some(x),
                    _ => bail!("`step` must be a positive number"),
                },
            };
            if domain_of_kind == "int" {
                let (Ok(l), Ok(h)) = (low.text.parse::<i64>(), high.text.parse::<i64>()) else {
                    bail!("type = \"int\" needs integer bounds");
                };
                let step = match step {
                    None => 1,
                    Some(s) if s.fract() == 0.0 => s as i64,
                    Some(_) => bail!("`step` of an int must be a whole number"),
                };
                (Domain::Int { low: l, high: h, log, step }, sized)
            } else {
                // A float value must be something the knob takes.
                knob_value(&knob, &toml::Value::Float((lo + hi) / 2.0))
                    .map_err(|e| e.context("type = \"float\" does not fit this option (use int?)"))?;
                (Domain::Float { low: lo, high: hi, log, step }, sized)
            }
        }
        "categorical" => {
            if raw.low.is_some() || raw.high.is_some() || raw.step.is_some() || raw.log.is_some() {
                bail!("a categorical parameter takes only `choices`");
            }
            let Some(choices) = &raw.choices else { bail!("needs `choices`") };
            if choices.is_empty() {
                bail!("`choices` is empty");
            }
            let values: Vec<KnobValue> = choices.iter().map(|c| knob_value(&knob, c)).collect::<Result<_>>()?;
            (Domain::Categorical(values), false)
        }
        other => bail!("unknown type {other:?} (expected int, float or categorical)"),
    };
    Ok(Param { knob, domain, sized })
}

fn parse_objective(raw: &RawObjective) -> Result<Objective> {
    let (direction, spec) = match (&raw.maximize, &raw.minimize) {
        (Some(v), None) => (Direction::Maximize, v),
        (None, Some(v)) => (Direction::Minimize, v),
        _ => bail!("give exactly one of `maximize` or `minimize`"),
    };
    let terms = match spec {
        toml::Value::String(name) => vec![(Figure::parse(name)?, 1.0)],
        toml::Value::Table(t) if !t.is_empty() => t
            .iter()
            .map(|(name, w)| match number(w) {
                Some(w) if w.is_finite() => Ok((Figure::parse(name)?, w)),
                _ => bail!("weight of {name} must be a number"),
            })
            .collect::<Result<_>>()?,
        _ => bail!("expected a figure name or a table of figure = weight"),
    };
    let limits = raw
        .limits
        .iter()
        .flatten()
        .map(|(name, limit)| Ok((Figure::parse(name).map_err(|e| e.context("limits"))?, *limit)))
        .collect::<Result<_>>()?;
    let penalty = raw.penalty.unwrap_or(1.0);
    if !(penalty >= 0.0 && penalty.is_finite()) {
        bail!("penalty must be a non-negative number");
    }
    Ok(Objective { direction, terms, benchmark: raw.benchmark.clone(), limits, penalty })
}

fn not_a_tune_file(text: &str) -> Option<&'static str> {
    let table: toml::Table = toml::from_str(text).ok()?;
    (table.contains_key("grid") || table.contains_key("points"))
        .then_some("this is an experiment file (it has [grid] or [[points]]): run `ebb-bench experiment FILE`")
}

impl Tune {
    /// Reads and checks a tune file; `overrides` are appended to its workload.
    pub fn load(path: &Path, overrides: &Settings) -> Result<Tune> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| BenchError::new(format!("cannot read tune file {}: {e}", path.display())))?;
        Tune::parse(&text, path, overrides)
    }

    /// Parses and checks the text of a tune file found at `path`.
    pub fn parse(text: &str, path: &Path, overrides: &Settings) -> Result<Tune> {
        let origin = path.display().to_string();
        let ctx = |e: BenchError| e.context(format!("tune file {origin}"));
        if let Some(hint) = not_a_tune_file(text) {
            return Err(ctx(BenchError::new(hint)));
        }
        let raw: RawTune = toml::from_str(text).map_err(|e| ctx(BenchError::new(e.to_string().trim_end())))?;
        let base_dir = path.parent().unwrap_or(Path::new("."));
        let mut workload = parse_workload(raw.workload.as_ref(), base_dir).map_err(ctx)?;
        workload.settings = workload.settings.then(overrides);
        let Some(raw_space) = &raw.space else {
            return Err(ctx(BenchError::new("missing [space]: declare the options to search")));
        };
        if raw_space.is_empty() {
            return Err(ctx(BenchError::new("[space] is empty: declare at least one option")));
        }
        let space: Vec<Param> = raw_space
            .iter()
            .map(|(name, p)| parse_param(name, p).map_err(|e| ctx(e.context(format!("space.{name}")))))
            .collect::<Result<_>>()?;
        let Some(raw_objective) = &raw.objective else {
            return Err(ctx(BenchError::new("missing [objective] (e.g. maximize = \"mb_per_sec\")")));
        };
        let objective = parse_objective(raw_objective).map_err(|e| ctx(e.context("objective")))?;
        let iterations = raw.iterations.unwrap_or(30);
        if iterations == 0 {
            return Err(ctx(BenchError::new("iterations must be at least 1")));
        }
        let repetitions = raw.repetitions.unwrap_or(1);
        if repetitions == 0 {
            return Err(ctx(BenchError::new("repetitions must be at least 1")));
        }
        let sampler = raw.sampler.clone().unwrap_or_else(|| "tpe".into());
        if !SAMPLERS.contains(&sampler.as_str()) {
            return Err(ctx(BenchError::new(format!("unknown sampler {sampler:?} (expected tpe, random or gp)"))));
        }
        let synthetic = match &raw.synthetic {
            None => None,
            Some(t) => Some(parse_synthetic(t, &space).map_err(|e| ctx(e.context("synthetic")))?),
        };
        let tune = Tune {
            name: raw.name.clone().unwrap_or_else(|| {
                path.file_stem().map_or_else(|| "tune".into(), |s| s.to_string_lossy().into_owned())
            }),
            description: raw.description.clone().unwrap_or_default(),
            source: path.to_path_buf(),
            workload,
            space,
            objective,
            iterations,
            seed: raw.seed.unwrap_or(1),
            sampler,
            startup_trials: raw.startup_trials.unwrap_or(10),
            repetitions,
            baseline: raw.baseline.unwrap_or(true),
            synthetic,
        };
        // The corners of the space must be runnable settings.
        for corner in tune.corners() {
            let settings = tune.workload.settings.then(&candidate_settings(&tune.space, &corner));
            check_run(&settings).map_err(|e| ctx(e.context(format!("candidate {}", label(&tune.space, &corner)))))?;
        }
        let flags = check_run(&tune.workload.settings).map_err(ctx)?;
        if let Some(b) = &tune.objective.benchmark {
            if !flags.str("benchmarks").split(',').any(|l| l.trim() == b.split('#').next().unwrap_or(b)) {
                return Err(ctx(BenchError::new(format!(
                    "objective.benchmark {b:?} is not run by the workload (it runs {})",
                    flags.str("benchmarks")
                ))));
            }
        }
        Ok(tune)
    }

    /// The all-low and all-high candidates (categoricals at each choice in turn).
    fn corners(&self) -> Vec<Vec<KnobValue>> {
        let widest = self
            .space
            .iter()
            .map(|p| if let Domain::Categorical(c) = &p.domain { c.len() } else { 2 })
            .max()
            .unwrap_or(1);
        (0..widest.max(2))
            .map(|i| {
                self.space
                    .iter()
                    .map(|p| match &p.domain {
                        Domain::Int { low, high, .. } => int_value(p, if i % 2 == 0 { *low } else { *high }),
                        Domain::Float { low, high, .. } => float_value(p, if i % 2 == 0 { *low } else { *high }),
                        Domain::Categorical(c) => c[i % c.len()].clone(),
                    })
                    .collect()
            })
            .collect()
    }
}

fn parse_synthetic(t: &toml::Table, space: &[Param]) -> Result<Vec<KnobValue>> {
    if let Some(k) = t.keys().find(|k| !space.iter().any(|p| p.knob.name == **k)) {
        bail!("{k:?} is not in [space]");
    }
    space
        .iter()
        .map(|p| {
            let Some(v) = t.get(&p.knob.name) else { bail!("no optimum for {}", p.knob.name) };
            let kv = knob_value(&p.knob, v)?;
            if !matches!(p.domain, Domain::Categorical(_)) && kv.number.is_none() {
                bail!("the optimum of {} must be a number", p.knob.name);
            }
            Ok(kv)
        })
        .collect()
}

fn int_value(p: &Param, v: i64) -> KnobValue {
    let label = if p.sized && v >= 0 { approximate_size(v as u64) } else { v.to_string() };
    KnobValue { text: v.to_string(), label, number: Some(v as f64) }
}

/// A size label with one decimal when it is not a whole unit: "28.4MiB".
fn approximate_size(bytes: u64) -> String {
    let exact = size_label(bytes);
    if !exact.chars().all(|c| c.is_ascii_digit()) {
        return exact;
    }
    for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift {
            return format!("{:.1}{unit}", bytes as f64 / (1u64 << shift) as f64);
        }
    }
    exact
}

fn float_value(_p: &Param, v: f64) -> KnobValue {
    KnobValue { text: v.to_string(), label: format_number(v), number: Some(v) }
}

fn candidate_settings(space: &[Param], values: &[KnobValue]) -> Settings {
    let mut s = Settings::default();
    for (p, v) in space.iter().zip(values) {
        s.push(&p.knob, v);
    }
    s
}

fn label(space: &[Param], values: &[KnobValue]) -> String {
    space.iter().zip(values).map(|(p, v)| format!("{}={}", p.knob.name, v.label)).collect::<Vec<_>>().join(" ")
}

/// The synthetic objective: 100 − Σ d², d = log2(x / optimum) on log
/// scales, 10 (x − optimum) / (high − low) on linear ones, 0 or 1 for a
/// categorical (equal or not). Its maximum, 100, is at the optimum.
pub fn synthetic_score(space: &[Param], optimum: &[KnobValue], values: &[KnobValue]) -> f64 {
    let mut sum = 0.0;
    for ((p, opt), v) in space.iter().zip(optimum).zip(values) {
        let d = match &p.domain {
            Domain::Categorical(_) => f64::from(u8::from(opt.text != v.text)),
            Domain::Int { low, high, log, .. } => distance(*low as f64, *high as f64, *log, opt, v),
            Domain::Float { low, high, log, .. } => distance(*low, *high, *log, opt, v),
        };
        sum += d * d;
    }
    100.0 - sum
}

fn distance(low: f64, high: f64, log: bool, opt: &KnobValue, v: &KnobValue) -> f64 {
    let (o, x) = (opt.number.unwrap_or(0.0), v.number.unwrap_or(0.0));
    if log && o > 0.0 && x > 0.0 {
        (x / o).log2()
    } else {
        10.0 * (x - o) / (high - low)
    }
}

/// How to run the tuner.
#[derive(Debug, Clone)]
pub struct TuneSettings {
    /// Output folder.
    pub out: PathBuf,
    /// The ebb-bench binary for the child runs.
    pub exe: PathBuf,
    /// The Python interpreter.
    pub python: String,
    /// Evaluate the synthetic objective instead of running benchmarks.
    pub synthetic: bool,
    /// Plot file extension: `svg` or `png`.
    pub plot_format: String,
}

/// One evaluated candidate.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TrialRecord {
    /// 1-based iteration; 0 for the baseline.
    pub iteration: usize,
    /// knob → value as passed.
    pub params: BTreeMap<String, String>,
    /// knob → value as shown.
    pub labels: BTreeMap<String, String>,
    /// False when a run failed.
    pub ok: bool,
    /// Why it failed.
    pub error: Option<String>,
    /// Median figures of the objective's benchmark over the repetitions.
    pub figures: BTreeMap<String, f64>,
    /// The objective.
    pub score: Option<f64>,
    /// The value told to the optimiser (the score with limit penalties).
    pub value: Option<f64>,
    /// No limit broken.
    pub feasible: bool,
    /// Best feasible value so far (iterations 1..this one).
    pub best_so_far: Option<f64>,
    /// The iteration that found it.
    pub best_iteration: Option<usize>,
}

/// `tune.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TuneResults {
    /// [`TUNE_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `ebb-bench <version>`.
    pub tool: String,
    /// Name.
    pub name: String,
    /// The file.
    pub file: String,
    /// The objective, in words.
    pub objective: String,
    /// `maximize` or `minimize`.
    pub direction: Direction,
    /// True for the synthetic objective.
    pub synthetic: bool,
    /// Sampler and library versions, as the optimiser reported them.
    pub optimizer: serde_json::Value,
    /// Base seed.
    pub seed: u64,
    /// The workload's flags.
    pub workload: Vec<String>,
    /// The workload as it is (engine defaults for the tuned options).
    pub baseline: Option<TrialRecord>,
    /// Every candidate in order.
    pub trials: Vec<TrialRecord>,
    /// The best feasible candidate (or the best penalised one if none is feasible).
    pub best: Option<TrialRecord>,
    /// Value of the best / value of the baseline.
    pub gain_over_baseline: Option<f64>,
    /// The OPTIONS file written for the best candidate.
    pub options_file: Option<String>,
    /// Unix time at the start.
    pub started_unix_secs: f64,
    /// Unix time at the end.
    pub finished_unix_secs: f64,
}

/// The optimiser process.
struct Optimizer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    log: PathBuf,
}

impl Optimizer {
    fn start(python: &str, config: &serde_json::Value, log: &Path) -> Result<(Optimizer, serde_json::Value)> {
        let log_file =
            std::fs::File::create(log).map_err(|e| BenchError::new(format!("cannot create {}: {e}", log.display())))?;
        let mut child = Command::new(python)
            .arg("-c")
            .arg(OPTIMIZER_SCRIPT)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .map_err(|e| {
                BenchError::new(format!(
                    "cannot start the optimiser with {python:?}: {e} (the tuner needs Python 3 with optuna: \
                     python3 -m pip install -r tools/requirements.txt; EBB_PYTHON or --python names the interpreter)"
                ))
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("the optimiser's pipes did not open");
        };
        let mut opt = Optimizer { child, stdin, stdout: BufReader::new(stdout), log: log.to_path_buf() };
        let ready = opt.call(config)?;
        Ok((opt, ready))
    }

    fn call(&mut self, msg: &serde_json::Value) -> Result<serde_json::Value> {
        let sent = writeln!(self.stdin, "{msg}").and_then(|()| self.stdin.flush());
        let mut line = String::new();
        let read = if sent.is_ok() { self.stdout.read_line(&mut line).ok() } else { None };
        if read.unwrap_or(0) == 0 {
            let _ = self.child.wait();
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("(no output)");
            bail!(
                "the optimiser stopped: {last} (log: {}; the tuner needs Python 3 with optuna: \
                 python3 -m pip install -r tools/requirements.txt)",
                self.log.display()
            );
        }
        let reply: serde_json::Value = serde_json::from_str(&line)
            .map_err(|e| BenchError::new(format!("the optimiser said {line:?}, not JSON: {e}")))?;
        if let Some(err) = reply.get("error").and_then(|e| e.as_str()) {
            bail!("optimiser: {err}");
        }
        Ok(reply)
    }

    fn finish(mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"cmd": "quit"}));
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

fn space_json(space: &[Param]) -> serde_json::Value {
    let params: Vec<serde_json::Value> = space
        .iter()
        .map(|p| match &p.domain {
            Domain::Int { low, high, log, step } => {
                json!({"name": p.knob.name, "type": "int", "low": low, "high": high, "log": log, "step": step})
            }
            Domain::Float { low, high, log, step } => {
                json!({"name": p.knob.name, "type": "float", "low": low, "high": high, "log": log, "step": step})
            }
            Domain::Categorical(c) => {
                let choices: Vec<&str> = c.iter().map(|v| v.text.as_str()).collect();
                json!({"name": p.knob.name, "type": "categorical", "choices": choices})
            }
        })
        .collect();
    serde_json::Value::Array(params)
}

/// The candidate the optimiser suggested, as knob values.
fn candidate(space: &[Param], params: &serde_json::Value) -> Result<Vec<KnobValue>> {
    space
        .iter()
        .map(|p| {
            let v = params
                .get(&p.knob.name)
                .ok_or_else(|| BenchError::new(format!("the optimiser suggested no value for {}", p.knob.name)))?;
            Ok(match &p.domain {
                Domain::Int { .. } => match v.as_i64() {
                    Some(i) => int_value(p, i),
                    None => bail!("the optimiser suggested {v} for the int {}", p.knob.name),
                },
                Domain::Float { .. } => match v.as_f64() {
                    Some(x) => float_value(p, x),
                    None => bail!("the optimiser suggested {v} for the float {}", p.knob.name),
                },
                Domain::Categorical(choices) => match choices.iter().find(|c| Some(c.text.as_str()) == v.as_str()) {
                    Some(c) => c.clone(),
                    None => bail!("the optimiser suggested {v}, not a choice of {}", p.knob.name),
                },
            })
        })
        .collect()
}

/// Prints what the tuner would do (`--dry-run`).
pub fn print_plan(tune: &Tune, settings: &TuneSettings) {
    println!(
        "tune {}: {} iteration(s) with optuna's {} sampler (seed {}), {} run(s) per candidate; output in {}",
        tune.name,
        tune.iterations,
        tune.sampler,
        tune.seed,
        tune.repetitions,
        settings.out.display()
    );
    if !tune.description.is_empty() {
        println!("  {}", tune.description.trim());
    }
    println!(
        "  objective: {}",
        if settings.synthetic { "synthetic (known optimum)".into() } else { tune.objective.describe() }
    );
    for p in &tune.space {
        let d = match &p.domain {
            Domain::Int { low, high, log, step } => format!(
                "int {}..{}{}{}",
                int_value(p, *low).label,
                int_value(p, *high).label,
                if *log { ", log scale" } else { "" },
                if *step > 1 { format!(", step {step}") } else { String::new() }
            ),
            Domain::Float { low, high, log, .. } => {
                format!("float {low}..{high}{}", if *log { ", log scale" } else { "" })
            }
            Domain::Categorical(c) => {
                format!("one of {}", c.iter().map(|v| v.label.as_str()).collect::<Vec<_>>().join(", "))
            }
        };
        println!("  space: {} = {d}", p.knob.name);
    }
    println!("  workload: ebb-bench {}", tune.workload.settings.args.join(" "));
}

/// Evaluates one candidate: its figures, score, told value and feasibility.
fn evaluate(
    tune: &Tune,
    settings: &TuneSettings,
    values: Option<&[KnobValue]>,
    tag: &str,
) -> Result<(BTreeMap<String, f64>, f64)> {
    if settings.synthetic {
        let Some(optimum) = &tune.synthetic else { bail!("--synthetic needs a [synthetic] table of optimum values") };
        let values: Vec<KnobValue> = match values {
            Some(v) => v.to_vec(),
            None => tune.space.iter().map(|p| default_value(tune, p)).collect::<Result<_>>()?,
        };
        let score = synthetic_score(&tune.space, optimum, &values);
        return Ok((BTreeMap::from([("synthetic".to_string(), score)]), score));
    }
    let run_settings = match values {
        Some(v) => tune.workload.settings.then(&candidate_settings(&tune.space, v)),
        None => tune.workload.settings.clone(),
    };
    let mut samples: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for r in 0..tune.repetitions {
        let run_tag = format!("{tag}-r{r}");
        let spec = RunSpec {
            exe: &settings.exe,
            settings: &run_settings,
            seed: tune.seed + u64::from(r),
            out: &settings.out,
            tag: &run_tag,
        };
        let outcome = child::run(&spec)?;
        let measured = child::measured(&outcome.report);
        let chosen = match &tune.objective.benchmark {
            Some(b) => measured.iter().find(|(n, _)| n == b),
            None => measured.last(),
        };
        let Some((_, result)) = chosen else {
            bail!(
                "run {run_tag} measured no benchmark {}",
                tune.objective.benchmark.as_deref().map_or(String::new(), |b| format!("named {b}"))
            );
        };
        for f in Figure::ALL {
            if let Some(v) = f.of(&outcome.report, result, outcome.db_bytes) {
                samples.entry(f.name().to_string()).or_default().push(v);
            }
        }
    }
    let figures: BTreeMap<String, f64> =
        samples.into_iter().filter_map(|(k, v)| super::figures::Summary::of(&v).map(|s| (k, s.median))).collect();
    let Some(score) = tune.objective.score(&figures) else {
        bail!("the run has no value for a figure of the objective ({})", tune.objective.describe());
    };
    Ok((figures, score))
}

/// The value a knob has when the workload leaves it alone (for the synthetic baseline).
fn default_value(tune: &Tune, p: &Param) -> Result<KnobValue> {
    let flags = super::spec::parse_flags(&tune.workload.settings.args)?;
    let text = match &p.knob.target {
        super::spec::Target::Flag(flag) => {
            let opts = crate::engine::ebb::ebb_options(&flags, false)?;
            let option = crate::flags::spec(flag).and_then(|s| match s.support {
                crate::flags::Support::Engine(o) => Some(o),
                _ => None,
            });
            match option.and_then(|o| opts.get(o)) {
                Some(v) if !flags.is_set(flag) => v,
                _ => flags.value(flag).map(|v| v.to_text()).unwrap_or_default(),
            }
        }
        super::spec::Target::EngineOption(o) => ebb::Options::default().get(o).unwrap_or_default(),
    };
    let v = match text.parse::<i64>() {
        Ok(i) => toml::Value::Integer(i),
        Err(_) => match text.parse::<f64>() {
            Ok(x) => toml::Value::Float(x),
            Err(_) => toml::Value::String(text),
        },
    };
    knob_value(&p.knob, &v)
}

/// Runs the tuner and writes its outputs.
pub fn run(tune: &Tune, settings: &TuneSettings) -> Result<TuneResults> {
    let out = &settings.out;
    std::fs::create_dir_all(out).map_err(|e| BenchError::new(format!("cannot create {}: {e}", out.display())))?;
    let started = timefmt::unix_now();
    let objective_text = if settings.synthetic {
        "maximize synthetic (100 at the declared optimum)".to_string()
    } else {
        tune.objective.describe()
    };
    let direction = if settings.synthetic { Direction::Maximize } else { tune.objective.direction };
    let objective = Objective { direction, ..tune.objective.clone() };
    println!("tune {}: {} iteration(s), {objective_text}; output in {}", tune.name, tune.iterations, out.display());
    let baseline = if tune.baseline {
        print!("[baseline] the workload as it is ... ");
        let _ = std::io::stdout().flush();
        let record = match evaluate(tune, settings, None, "baseline") {
            Ok((figures, score)) => {
                let (value, feasible) =
                    if settings.synthetic { (score, true) } else { objective.penalised(score, &figures) };
                println!("{} {}", format_number(score), if feasible { "" } else { "(breaks a limit)" });
                TrialRecord {
                    iteration: 0,
                    params: BTreeMap::new(),
                    labels: BTreeMap::new(),
                    ok: true,
                    error: None,
                    figures,
                    score: Some(score),
                    value: Some(value),
                    feasible,
                    best_so_far: None,
                    best_iteration: None,
                }
            }
            Err(e) => bail!("the baseline run failed: {e}"),
        };
        Some(record)
    } else {
        None
    };
    let config = json!({
        "direction": direction,
        "seed": tune.seed,
        "sampler": tune.sampler,
        "startup_trials": tune.startup_trials,
        "space": space_json(&tune.space),
    });
    let (mut optimizer, ready) = Optimizer::start(&settings.python, &config, &out.join("optimizer.log"))?;
    let mut trials: Vec<TrialRecord> = Vec::new();
    let mut best: Option<(f64, bool, usize)> = None;
    let width = tune.iterations.to_string().len();
    for iteration in 1..=tune.iterations as usize {
        let suggestion = optimizer.call(&json!({"cmd": "ask"}))?;
        let trial_number = suggestion.get("trial").cloned().unwrap_or(serde_json::Value::Null);
        let values = candidate(&tune.space, suggestion.get("params").unwrap_or(&serde_json::Value::Null))?;
        print!("[{iteration:>width$}/{}] {} ... ", tune.iterations, label(&tune.space, &values));
        let _ = std::io::stdout().flush();
        let tag = format!("t{iteration}");
        let mut record = TrialRecord {
            iteration,
            params: tune.space.iter().zip(&values).map(|(p, v)| (p.knob.name.clone(), v.text.clone())).collect(),
            labels: tune.space.iter().zip(&values).map(|(p, v)| (p.knob.name.clone(), v.label.clone())).collect(),
            ok: false,
            error: None,
            figures: BTreeMap::new(),
            score: None,
            value: None,
            feasible: false,
            best_so_far: None,
            best_iteration: None,
        };
        match evaluate(tune, settings, Some(&values), &tag) {
            Ok((figures, score)) => {
                let (value, feasible) =
                    if settings.synthetic { (score, true) } else { objective.penalised(score, &figures) };
                optimizer.call(&json!({"cmd": "tell", "trial": trial_number, "value": value}))?;
                record.ok = true;
                record.figures = figures;
                record.score = Some(score);
                record.value = Some(value);
                record.feasible = feasible;
                let improves = match best {
                    None => true,
                    Some((b, b_feasible, _)) => {
                        (feasible && !b_feasible) || (feasible == b_feasible && objective.better(value, b))
                    }
                };
                if improves {
                    best = Some((value, feasible, iteration));
                }
            }
            Err(e) => {
                optimizer.call(&json!({"cmd": "tell", "trial": trial_number, "failed": true}))?;
                record.error = Some(e.to_string());
            }
        }
        record.best_so_far = best.map(|b| b.0);
        record.best_iteration = best.map(|b| b.2);
        match (&record.score, &record.error) {
            (Some(s), _) => println!(
                "{}{}  best {} (iteration {})",
                format_number(*s),
                if record.feasible { "" } else { " (breaks a limit)" },
                record.best_so_far.map_or("-".into(), format_number),
                record.best_iteration.unwrap_or(0)
            ),
            (None, Some(e)) => println!("FAILED: {e}"),
            (None, None) => println!(),
        }
        trials.push(record);
    }
    optimizer.finish();
    let best_record = best.and_then(|(_, _, i)| trials.get(i - 1)).cloned();
    let gain_over_baseline = match (&best_record, &baseline) {
        (Some(b), Some(base)) => match (b.value, base.value) {
            (Some(v), Some(bv)) if bv != 0.0 => Some(v / bv),
            _ => None,
        },
        _ => None,
    };
    let options_file = match &best_record {
        Some(b) => write_best_options(tune, b, &objective_text, out)?,
        None => None,
    };
    let results = TuneResults {
        schema_version: TUNE_SCHEMA_VERSION,
        tool: format!("ebb-bench {}", env!("CARGO_PKG_VERSION")),
        name: tune.name.clone(),
        file: tune.source.display().to_string(),
        objective: objective_text,
        direction,
        synthetic: settings.synthetic,
        optimizer: ready,
        seed: tune.seed,
        workload: tune.workload.settings.args.clone(),
        baseline,
        trials,
        best: best_record,
        gain_over_baseline,
        options_file: options_file.as_ref().map(|p| p.display().to_string()),
        started_unix_secs: started,
        finished_unix_secs: timefmt::unix_now(),
    };
    let text = serde_json::to_string_pretty(&results)
        .map_err(|e| BenchError::new(format!("cannot encode the tuner's results: {e}")))?;
    write(&out.join("tune.json"), &(text + "\n"))?;
    write(&out.join("convergence.csv"), &convergence_csv(tune, &results))?;
    draw_convergence(&results, &out.join(format!("convergence.{}", settings.plot_format)))?;
    print_summary(&results, options_file.as_deref());
    if results.best.is_none() {
        bail!("no candidate ran successfully (see the logs in {})", out.join("logs").display());
    }
    Ok(results)
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).map_err(|e| BenchError::new(format!("cannot write {}: {e}", path.display())))
}

fn print_summary(results: &TuneResults, options_file: Option<&Path>) {
    let Some(best) = &results.best else { return };
    let params: Vec<String> = best.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!(
        "\nbest: {} = {} at iteration {} of {}: {}",
        results.objective,
        best.value.map_or("-".into(), format_number),
        best.iteration,
        results.trials.len(),
        params.join(" ")
    );
    if let (Some(base), Some(gain)) = (&results.baseline, results.gain_over_baseline) {
        println!(
            "baseline (the workload as it is): {}; best / baseline = {:.3}",
            base.value.map_or("-".into(), format_number),
            gain
        );
    }
    if let Some(p) = options_file {
        println!("wrote {}", p.display());
    }
}

/// `iteration,ok,score,value,feasible,best_so_far,best_iteration,<knobs...>`.
fn convergence_csv(tune: &Tune, results: &TuneResults) -> String {
    let mut out = String::from("iteration,ok,score,value,feasible,best_so_far,best_iteration");
    for p in &tune.space {
        let _ = write!(out, ",{}", p.knob.name);
    }
    out.push('\n');
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    for t in results.baseline.iter().chain(&results.trials) {
        let _ = write!(
            out,
            "{},{},{},{},{},{},{}",
            t.iteration,
            t.ok,
            opt(t.score),
            opt(t.value),
            t.feasible,
            opt(t.best_so_far),
            t.best_iteration.map_or(String::new(), |i| i.to_string())
        );
        for p in &tune.space {
            let _ = write!(out, ",{}", t.params.get(&p.knob.name).map_or("", String::as_str));
        }
        out.push('\n');
    }
    out
}

fn draw_convergence(results: &TuneResults, path: &Path) -> Result<()> {
    let mut series = vec![
        Series {
            label: "candidate".into(),
            style: Style::Dots,
            points: results.trials.iter().filter_map(|t| t.value.map(|v| (t.iteration as f64, v, v, v))).collect(),
        },
        Series {
            label: "best so far".into(),
            style: Style::Steps,
            points: results
                .trials
                .iter()
                .filter_map(|t| t.best_so_far.map(|v| (t.iteration as f64, v, v, v)))
                .collect(),
        },
    ];
    if let Some(v) = results.baseline.as_ref().and_then(|b| b.value) {
        series.push(Series {
            label: "baseline (as it is)".into(),
            style: Style::Horizontal,
            points: vec![(1.0, v, v, v)],
        });
    }
    if series[0].points.is_empty() {
        return Ok(());
    }
    let panel = Panel {
        title: format!("{}: {}", results.name, results.objective),
        x_desc: "iteration".into(),
        y_desc: "objective".into(),
        x_ticks: Vec::new(),
        series,
    };
    chart::draw(&[panel], 1, path)
}

/// Writes `best.OPTIONS`: Ebb's options for the best candidate (the
/// workload's engine flags and OPTIONS lines, then the candidate's), as
/// `Options::to_text` writes them, after comment lines saying where they came from.
fn write_best_options(tune: &Tune, best: &TrialRecord, objective: &str, out: &Path) -> Result<Option<PathBuf>> {
    let values: Vec<KnobValue> = tune
        .space
        .iter()
        .map(|p| {
            let text = best.params.get(&p.knob.name).cloned().unwrap_or_default();
            let label = best.labels.get(&p.knob.name).cloned().unwrap_or_default();
            KnobValue { text, label, number: None }
        })
        .collect();
    let settings = tune.workload.settings.then(&candidate_settings(&tune.space, &values));
    let flags = super::spec::parse_flags(&settings.args)?;
    if Config::from_flags(&flags)?.engine != EngineKind::Ebb {
        println!("(no OPTIONS file: the workload does not run the ebb engine)");
        return Ok(None);
    }
    let text = options_text(&flags, &settings)?;
    let opts = ebb_options_with_text(&flags, false, text.as_deref().map(|t| (t, "(the best candidate's OPTIONS)")))?;
    let client_flags: Vec<&String> = settings
        .args
        .iter()
        .filter(|a| {
            let name = a.trim_start_matches('-').split('=').next().unwrap_or("");
            crate::flags::spec(name).is_some_and(|s| s.support == crate::flags::Support::Client)
                && !["options_file", "options_preset"].contains(&name)
        })
        .collect();
    let mut header = format!("# Best options found by `ebb-bench tune {}`\n", tune.source.display());
    let _ = writeln!(
        header,
        "# {objective}: {} at iteration {} ({})",
        best.value.map_or("-".into(), format_number),
        best.iteration,
        best.labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
    );
    let _ = writeln!(
        header,
        "# Client flags of the workload (not engine options): {}",
        client_flags.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" ")
    );
    let path = out.join("best.OPTIONS");
    write(&path, &(header + &opts.to_text()))?;
    Ok(Some(path))
}
