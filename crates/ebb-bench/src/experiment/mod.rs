//! `ebb-bench experiment FILE` and `ebb-bench tune FILE`: experiments from
//! files (seed 003's aggregated experiments: a workload, a sweep of option
//! values, repetitions, figures) and Bayesian tuning of options (seed 002
//! §6.3.1). docs/experiments.md describes both file formats.
//!
//! Layout: `spec` (knob names, values, workloads: what both files share),
//! `file` (experiment files), `figures` (what a run's JSON report yields),
//! `child` (one run as a child process), `run` (running an experiment and
//! writing its table, JSON and plots), `chart` (plotters), `tune_file`
//! (tune files), `optimizer` (the optuna process) and `tune` (the tuner).
//! Runs are child processes of this binary, so a crash ends one run, not
//! the experiment.

pub mod chart;
pub mod child;
pub mod figures;
pub mod file;
pub mod optimizer;
pub mod run;
pub mod spec;
pub mod tune;
pub mod tune_file;

use std::path::PathBuf;

use crate::bail;
use crate::error::{BenchError, Result};

use spec::{knob_value, resolve_knob, Settings};

const EXPERIMENT_USAGE: &str =
    "usage: ebb-bench experiment FILE [--out DIR] [--dry-run | --replot] [--plot-format svg|png] [--repetitions N] \
                                [--set NAME=VALUE]...";
const TUNE_USAGE: &str =
    "usage: ebb-bench tune FILE [--out DIR] [--dry-run] [--plot-format svg|png] [--synthetic] [--iterations N] \
                          [--seed N] [--python PATH] [--set NAME=VALUE]...";

/// Command-line options of both subcommands.
#[derive(Debug, Default)]
struct Cli {
    file: Option<PathBuf>,
    out: Option<PathBuf>,
    dry_run: bool,
    replot: bool,
    synthetic: bool,
    repetitions: Option<u32>,
    iterations: Option<u32>,
    seed: Option<u64>,
    python: Option<String>,
    plot_format: Option<String>,
    overrides: Settings,
}

fn parse_number<T: std::str::FromStr>(name: &str, text: &str, usage: &str) -> Result<T> {
    text.parse().map_err(|_| BenchError::new(format!("{name}: {text:?} is not a valid number ({usage})")))
}

/// `--set NAME=VALUE`: a workload knob, typed by what the knob takes.
fn override_setting(text: &str, settings: &mut Settings) -> Result<()> {
    let Some((name, value)) = text.split_once('=') else { bail!("--set {text:?}: expected NAME=VALUE") };
    let knob = resolve_knob(name.trim()).map_err(|e| e.context("--set"))?;
    let value = value.trim();
    let typed = if let Ok(b) = value.parse::<bool>() {
        toml::Value::Boolean(b)
    } else if let Ok(i) = value.parse::<i64>() {
        toml::Value::Integer(i)
    } else if let Ok(x) = value.parse::<f64>() {
        toml::Value::Float(x)
    } else {
        toml::Value::String(value.to_string())
    };
    let kv = knob_value(&knob, &typed)
        .or_else(|_| knob_value(&knob, &toml::Value::String(value.to_string())))
        .map_err(|e| e.context("--set"))?;
    settings.push(&knob, &kv);
    Ok(())
}

fn parse_cli(args: &[String], usage: &str, tune: bool) -> Result<Option<Cli>> {
    let mut cli = Cli::default();
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        i += 1;
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n, Some(v.to_string())),
            _ => (arg, None),
        };
        let mut value = |what: &str| -> Result<String> {
            if let Some(v) = &inline {
                return Ok(v.clone());
            }
            let Some(v) = args.get(i) else { bail!("{name} needs {what} ({usage})") };
            i += 1;
            Ok(v.clone())
        };
        match name {
            "--help" | "-h" => {
                println!("{usage}\nSee docs/experiments.md for the file format.");
                return Ok(None);
            }
            "--out" | "-o" => cli.out = Some(PathBuf::from(value("a folder")?)),
            "--dry-run" | "--dry_run" => cli.dry_run = true,
            "--replot" if !tune => cli.replot = true,
            "--plot-format" | "--plot_format" => {
                let f = value("svg or png")?;
                if f != "svg" && f != "png" {
                    bail!("--plot-format: expected svg or png, got {f:?}");
                }
                cli.plot_format = Some(f);
            }
            "--set" => override_setting(&value("NAME=VALUE")?, &mut cli.overrides)?,
            "--repetitions" if !tune => cli.repetitions = Some(parse_number(name, &value("a number")?, usage)?),
            "--synthetic" if tune => cli.synthetic = true,
            "--iterations" if tune => cli.iterations = Some(parse_number(name, &value("a number")?, usage)?),
            "--seed" if tune => cli.seed = Some(parse_number(name, &value("a number")?, usage)?),
            "--python" if tune => cli.python = Some(value("an interpreter")?),
            _ if arg.starts_with('-') => bail!("unknown option {arg:?} ({usage})"),
            _ if cli.file.is_none() => cli.file = Some(PathBuf::from(arg)),
            _ => bail!("unexpected argument {arg:?}: give one file ({usage})"),
        }
    }
    if cli.file.is_none() {
        bail!("no file given ({usage})");
    }
    Ok(Some(cli))
}

fn default_out(name: &str) -> PathBuf {
    PathBuf::from("results").join(name)
}

fn this_binary() -> Result<PathBuf> {
    std::env::current_exe()
        .map_err(|e| BenchError::new(format!("cannot find this program's path to run benchmarks: {e}")))
}

/// `ebb-bench experiment FILE ...`.
pub fn run_experiment_cli(args: &[String]) -> Result<()> {
    let Some(cli) = parse_cli(args, EXPERIMENT_USAGE, false)? else { return Ok(()) };
    let path = cli.file.unwrap_or_default();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| BenchError::new(format!("cannot read experiment file {}: {e}", path.display())))?;
    let mut exp = file::Experiment::parse_with(&text, &path, &cli.overrides)?;
    if let Some(r) = cli.repetitions {
        if r == 0 {
            bail!("--repetitions must be at least 1");
        }
        exp.repetitions = r;
    }
    let settings = run::RunSettings {
        out: cli.out.unwrap_or_else(|| default_out(&exp.name)),
        exe: this_binary()?,
        plot_format: cli.plot_format.unwrap_or_else(|| "svg".into()),
    };
    if cli.dry_run && cli.replot {
        bail!("--dry-run and --replot: give one ({EXPERIMENT_USAGE})");
    }
    if cli.dry_run {
        return run::print_plan(&exp, &settings);
    }
    if cli.replot {
        return run::replot(&exp, &settings);
    }
    run::run(&exp, &settings).map(|_| ())
}

/// `ebb-bench tune FILE ...`.
pub fn run_tune_cli(args: &[String]) -> Result<()> {
    let Some(cli) = parse_cli(args, TUNE_USAGE, true)? else { return Ok(()) };
    let path = cli.file.unwrap_or_default();
    let mut t = tune::Tune::load(&path, &cli.overrides)?;
    if let Some(n) = cli.iterations {
        if n == 0 {
            bail!("--iterations must be at least 1");
        }
        t.iterations = n;
    }
    if let Some(s) = cli.seed {
        t.seed = s;
    }
    if cli.synthetic && t.synthetic.is_none() {
        bail!("--synthetic needs a [synthetic] table in {} naming the optimum of every option", path.display());
    }
    let settings = tune::TuneSettings {
        out: cli.out.unwrap_or_else(|| default_out(&t.name)),
        exe: this_binary()?,
        python: cli.python.or_else(|| std::env::var("EBB_PYTHON").ok()).unwrap_or_else(|| "python3".into()),
        synthetic: cli.synthetic,
        plot_format: cli.plot_format.unwrap_or_else(|| "svg".into()),
    };
    if cli.dry_run {
        tune::print_plan(&t, &settings);
        return Ok(());
    }
    tune::run(&t, &settings).map(|_| ())
}
