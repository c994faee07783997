//! Tune files (TOML): the workload, the search space (int, float or
//! categorical knobs, linear or log scale), the objective (a figure or a
//! weighted sum, maximised or minimised, with upper limits as penalties) and
//! the optimiser's settings; docs/experiments.md describes the format. Also
//! the synthetic objective `--synthetic` evaluates instead of a benchmark.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::bail;
use crate::error::{BenchError, Result};

use super::figures::{format_number, Figure};
use super::spec::{
    check_run, knob_value, parse_workload, resolve_knob, size_label, Knob, KnobValue, Settings, Workload,
};

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

    /// True when `a` beats `b` in this direction.
    pub fn better(&self, a: f64, b: f64) -> bool {
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

pub(crate) fn int_value(p: &Param, v: i64) -> KnobValue {
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

pub(crate) fn float_value(_p: &Param, v: f64) -> KnobValue {
    KnobValue { text: v.to_string(), label: format_number(v), number: Some(v) }
}

pub(crate) fn candidate_settings(space: &[Param], values: &[KnobValue]) -> Settings {
    let mut s = Settings::default();
    for (p, v) in space.iter().zip(values) {
        s.push(&p.knob, v);
    }
    s
}

pub(crate) fn label(space: &[Param], values: &[KnobValue]) -> String {
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
