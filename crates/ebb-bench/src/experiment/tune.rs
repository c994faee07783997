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
use std::io::Write as _;
use std::path::{Path, PathBuf};

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
use super::optimizer::{candidate, space_json, Optimizer};
use super::spec::{knob_value, options_text, KnobValue};
use super::tune_file::{candidate_settings, int_value, label};
pub use super::tune_file::{synthetic_score, Direction, Domain, Objective, Param, Tune};

/// Version of the `tune.json` layout.
pub const TUNE_SCHEMA_VERSION: u32 = 1;

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
            before: None,
            after: None,
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
