//! Experiment files (TOML): a workload, the values to sweep (a grid or a
//! list of points), repetitions, and the figures to report. docs/experiments.md
//! describes the format; [`Experiment::parse`] checks every point before
//! anything runs, so a bad file fails at once with the problem named.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::bail;
use crate::error::{BenchError, Result};

use super::figures::Figure;
use super::spec::{
    check_run, knob_value, parse_workload, resolve_knob, size_label, Knob, KnobValue, Settings, Target, Workload,
};

/// Figures reported when a file names none.
pub const DEFAULT_FIGURES: &[Figure] =
    &[Figure::OpsPerSec, Figure::MbPerSec, Figure::P99Micros, Figure::WriteAmp, Figure::StallPct];

/// Most points one file may ask for.
const MAX_POINTS: usize = 10_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExperiment {
    name: Option<String>,
    description: Option<String>,
    workload: Option<toml::Value>,
    grid: Option<toml::Table>,
    points: Option<Vec<toml::Table>>,
    repetitions: Option<u32>,
    seed: Option<u64>,
    figures: Option<Vec<String>>,
    benchmarks: Option<Vec<String>>,
    plot: Option<Vec<String>>,
    before: Option<toml::Value>,
    after: Option<toml::Value>,
}

/// One point of the sweep: a value for each swept knob it sets.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// (knob, value) in the order of [`Experiment::swept`].
    pub values: Vec<(Knob, KnobValue)>,
    /// The name a `[[points]]` entry gives itself (`label = "..."`).
    pub name: Option<String>,
}

impl Point {
    /// Its name, or `name=value, ...`, or `(defaults)` for a point that sets nothing.
    pub fn label(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        if self.values.is_empty() {
            return "(defaults)".into();
        }
        self.values.iter().map(|(k, v)| format!("{}={}", k.name, v.label)).collect::<Vec<_>>().join(", ")
    }

    /// The value this point gives `knob`, if any.
    pub fn value_of(&self, knob: &str) -> Option<&KnobValue> {
        self.values.iter().find(|(k, _)| k.name == knob).map(|(_, v)| v)
    }

    /// The point's knobs as run settings.
    pub fn settings(&self) -> Settings {
        let mut s = Settings::default();
        for (k, v) in &self.values {
            s.push(k, v);
        }
        s
    }
}

/// A run on the measured run's database: `[before]` it, on the fresh
/// database (a fill the measured run starts from), or `[after]` it (a
/// read-back of the tree it left). It runs the point's engine and takes the
/// knobs it inherits from the workload and the point; nothing else.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    /// Its own flags and OPTIONS lines.
    pub settings: Settings,
    /// Knobs whose values (the workload's, then the point's) it takes.
    pub inherit: Vec<Knob>,
}

impl Stage {
    /// The settings of this stage for a run whose settings are `run`: the
    /// engine and the inherited knobs as `run` sets them, then its own.
    pub fn for_run(&self, run: &Settings) -> Settings {
        let mut out = Settings::default();
        let last_arg = |flag: &str| run.args.iter().rev().find(|a| a.starts_with(&format!("--{flag}="))).cloned();
        if let Some(engine) = last_arg("engine") {
            out.args.push(engine);
        }
        for knob in &self.inherit {
            match &knob.target {
                Target::Flag(flag) => out.args.extend(last_arg(flag)),
                Target::EngineOption(option) => out
                    .option_lines
                    .extend(run.option_lines.iter().rev().find(|l| l.starts_with(&format!("{option}="))).cloned()),
            }
        }
        out.then(&self.settings)
    }
}

/// What a `[before]` or `[after]` table says: `inherit = [knobs]` and flags
/// as in a workload table.
fn parse_stage(v: &toml::Value, base_dir: &Path, field: &str) -> Result<Stage> {
    let toml::Value::Table(table) = v else { bail!("{field} must be a table of knobs") };
    let mut rest = table.clone();
    let mut inherit = Vec::new();
    if let Some(list) = rest.remove("inherit") {
        let toml::Value::Array(items) = list else { bail!("{field}.inherit must be an array of knob names") };
        for item in items {
            let toml::Value::String(name) = item else { bail!("{field}.inherit must be an array of knob names") };
            let knob = resolve_knob(&name).map_err(|e| e.context(format!("{field}.inherit")))?;
            if knob.name == "engine" {
                bail!("{field}.inherit: the engine is always the point's; leave it out");
            }
            inherit.push(knob);
        }
    }
    if rest.contains_key("engine") {
        bail!("{field}: a stage runs the point's engine; `engine` cannot be set here");
    }
    if let Some(k) = inherit.iter().find(|k| rest.contains_key(&k.name)) {
        bail!("{field}: {:?} is both inherited and set; keep one", k.name);
    }
    if !rest.contains_key("benchmarks") {
        bail!("{field}: name the stage's `benchmarks`");
    }
    let workload = parse_workload(Some(&toml::Value::Table(rest)), base_dir).map_err(|e| e.context(field))?;
    Ok(Stage { settings: workload.settings, inherit })
}

/// Benchmarks of the stage after a run are reported as `after.<name>`.
pub const AFTER_PREFIX: &str = "after.";

/// A checked experiment.
#[derive(Debug, Clone)]
pub struct Experiment {
    /// Name (the file's stem unless given).
    pub name: String,
    /// What it measures and why.
    pub description: String,
    /// The file it came from.
    pub source: PathBuf,
    /// What every run shares.
    pub workload: Workload,
    /// The swept knobs, in order.
    pub swept: Vec<String>,
    /// The points.
    pub points: Vec<Point>,
    /// True when the points are a `[[points]]` list (plotted side by side as
    /// categories), false for a grid (plotted against each swept knob).
    pub listed: bool,
    /// Runs per point.
    pub repetitions: u32,
    /// Base seed: repetition r runs with `seed + r`.
    pub seed: u64,
    /// Figures in the table.
    pub figures: Vec<Figure>,
    /// Benchmarks whose figures are reported; `None` = every measured one.
    pub benchmarks: Option<Vec<String>>,
    /// Figures plotted against each swept knob.
    pub plot: Vec<Figure>,
    /// A run before each measured run, on its fresh database.
    pub before: Option<Stage>,
    /// A run after each measured run, on the database it left.
    pub after: Option<Stage>,
}

fn figures(names: &[String], field: &str) -> Result<Vec<Figure>> {
    if names.is_empty() {
        bail!("{field} is empty: name at least one figure");
    }
    names.iter().map(|n| Figure::parse(n).map_err(|e| e.context(field))).collect()
}

/// The values of one grid entry: an array, or `{ from, to, factor }` /
/// `{ from, to, step }` for a geometric / arithmetic range (ends included).
fn grid_values(knob: &Knob, spec: &toml::Value) -> Result<Vec<KnobValue>> {
    let values: Vec<KnobValue> = match spec {
        toml::Value::Array(items) => items.iter().map(|v| knob_value(knob, v)).collect::<Result<_>>()?,
        toml::Value::Table(t) => range_values(knob, t)?,
        _ => bail!("expected an array of values or a range {{ from, to, factor | step }}"),
    };
    if values.is_empty() {
        bail!("no values: an empty sweep runs nothing");
    }
    Ok(values)
}

fn range_values(knob: &Knob, t: &toml::Table) -> Result<Vec<KnobValue>> {
    if let Some(k) = t.keys().find(|k| !["from", "to", "factor", "step"].contains(&k.as_str())) {
        bail!("unknown range field `{k}` (expected from, to, and factor or step)");
    }
    let end = |name: &str| -> Result<(KnobValue, bool)> {
        let v = t.get(name).ok_or_else(|| BenchError::new(format!("range needs `{name}`")))?;
        let kv = knob_value(knob, v)?;
        if kv.number.is_none() {
            bail!("range `{name}` must be a number");
        }
        Ok((kv, matches!(v, toml::Value::String(_))))
    };
    let (from, sized) = end("from")?;
    let (to, _) = end("to")?;
    let (lo, hi) = (from.number.unwrap_or(0.0), to.number.unwrap_or(0.0));
    if lo > hi {
        bail!("range goes from {} down to {}: `from` must not exceed `to`", from.label, to.label);
    }
    let mut xs = Vec::new();
    match (t.get("factor"), t.get("step")) {
        (Some(f), None) => {
            let f = f.as_float().or_else(|| f.as_integer().map(|i| i as f64)).unwrap_or(0.0);
            if f <= 1.0 || f.is_nan() || lo <= 0.0 {
                bail!("a geometric range needs factor > 1 and from > 0");
            }
            let mut x = lo;
            while x <= hi * (1.0 + 1e-12) && xs.len() <= MAX_POINTS {
                xs.push(x);
                x *= f;
            }
        }
        (None, Some(s)) => {
            let s = s.as_float().or_else(|| s.as_integer().map(|i| i as f64)).unwrap_or(0.0);
            if s <= 0.0 || s.is_nan() {
                bail!("an arithmetic range needs step > 0");
            }
            let mut i = 0.0;
            while lo + i * s <= hi * (1.0 + 1e-12) + 1e-12 && xs.len() <= MAX_POINTS {
                xs.push(lo + i * s);
                i += 1.0;
            }
        }
        _ => bail!("a range needs exactly one of `factor` (geometric) or `step` (arithmetic)"),
    }
    let integral = from.text.parse::<i64>().is_ok() && to.text.parse::<i64>().is_ok();
    xs.into_iter()
        .map(|x| {
            let v = if integral { toml::Value::Integer(x.round() as i64) } else { toml::Value::Float(x) };
            let mut kv = knob_value(knob, &v)?;
            if sized {
                kv.label = size_label(x.round() as u64);
            }
            Ok(kv)
        })
        .collect()
}

/// The hint for a tune file handed to `experiment`.
fn not_an_experiment(text: &str) -> Option<&'static str> {
    let table: toml::Table = toml::from_str(text).ok()?;
    (table.contains_key("space") || table.contains_key("objective"))
        .then_some("this is a tune file (it has [space] or [objective]): run `ebb-bench tune FILE`")
}

impl Experiment {
    /// Reads and checks an experiment file.
    pub fn load(path: &Path) -> Result<Experiment> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| BenchError::new(format!("cannot read experiment file {}: {e}", path.display())))?;
        Experiment::parse(&text, path)
    }

    /// Parses and checks the text of an experiment file found at `path`
    /// (relative paths in it are taken from its folder).
    pub fn parse(text: &str, path: &Path) -> Result<Experiment> {
        Experiment::parse_with(text, path, &Settings::default())
    }

    /// As [`Experiment::parse`], with `overrides` appended to the workload
    /// (`--set` on the command line).
    pub fn parse_with(text: &str, path: &Path, overrides: &Settings) -> Result<Experiment> {
        let origin = path.display().to_string();
        let ctx = |e: BenchError| e.context(format!("experiment file {origin}"));
        if let Some(hint) = not_an_experiment(text) {
            return Err(ctx(BenchError::new(hint)));
        }
        let raw: RawExperiment = toml::from_str(text).map_err(|e| ctx(BenchError::new(e.to_string().trim_end())))?;
        let base_dir = path.parent().unwrap_or(Path::new("."));
        let mut workload = parse_workload(raw.workload.as_ref(), base_dir).map_err(ctx)?;
        workload.settings = workload.settings.then(overrides);
        let repetitions = raw.repetitions.unwrap_or(1);
        if repetitions == 0 {
            return Err(ctx(BenchError::new("repetitions must be at least 1")));
        }
        let (swept, points) = match (&raw.grid, &raw.points) {
            (Some(_), Some(_)) => return Err(ctx(BenchError::new("give either [grid] or [[points]], not both"))),
            (None, None) => {
                return Err(ctx(BenchError::new("nothing to sweep: add a [grid] table or [[points]] entries")))
            }
            (Some(grid), None) => expand_grid(grid).map_err(ctx)?,
            (None, Some(list)) => list_points(list).map_err(ctx)?,
        };
        let figure_list = match &raw.figures {
            Some(names) => figures(names, "figures").map_err(ctx)?,
            None => DEFAULT_FIGURES.to_vec(),
        };
        let plot = match &raw.plot {
            Some(names) => figures(names, "plot").map_err(ctx)?,
            None => vec![figure_list.iter().copied().find(|f| f.higher_is_better()).unwrap_or(figure_list[0])],
        };
        let before = raw.before.as_ref().map(|v| parse_stage(v, base_dir, "before")).transpose().map_err(ctx)?;
        let after = raw.after.as_ref().map(|v| parse_stage(v, base_dir, "after")).transpose().map_err(ctx)?;
        let names = |flags: &crate::flags::Flags| -> Vec<String> {
            flags.str("benchmarks").split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect()
        };
        let mut listed = Vec::new();
        for (i, point) in points.iter().enumerate() {
            let at = |e: BenchError| ctx(e.context(format!("point {} ({})", i + 1, point.label())));
            let run = workload.settings.then(&point.settings());
            let flags = check_run(&run).map_err(at)?;
            if listed.is_empty() {
                listed = names(&flags);
            }
            if let Some(stage) = &before {
                check_run(&stage.for_run(&run)).map_err(|e| at(e.context("before")))?;
            }
            if let Some(stage) = &after {
                let flags = check_run(&stage.for_run(&run)).map_err(|e| at(e.context("after")))?;
                if i == 0 {
                    listed.extend(names(&flags).into_iter().map(|n| format!("{AFTER_PREFIX}{n}")));
                }
            }
        }
        if let Some(wanted) = &raw.benchmarks {
            if wanted.is_empty() {
                return Err(ctx(BenchError::new("benchmarks is empty: leave it out to report every benchmark")));
            }
            for b in wanted {
                let base = b.split('#').next().unwrap_or(b);
                if !listed.iter().any(|l| l == base) {
                    return Err(ctx(BenchError::new(format!(
                        "benchmarks: {b:?} is not run by the workload (it runs {})",
                        listed.join(",")
                    ))));
                }
            }
        }
        Ok(Experiment {
            name: raw.name.unwrap_or_else(|| {
                path.file_stem().map_or_else(|| "experiment".into(), |s| s.to_string_lossy().into_owned())
            }),
            description: raw.description.unwrap_or_default(),
            source: path.to_path_buf(),
            workload,
            swept,
            points,
            listed: raw.points.is_some(),
            repetitions,
            seed: raw.seed.unwrap_or(1),
            figures: figure_list,
            benchmarks: raw.benchmarks,
            plot,
            before,
            after,
        })
    }

    /// Runs in the whole experiment.
    pub fn runs(&self) -> usize {
        self.points.len() * self.repetitions as usize
    }
}

fn expand_grid(grid: &toml::Table) -> Result<(Vec<String>, Vec<Point>)> {
    if grid.is_empty() {
        bail!("grid is empty: name at least one option and its values");
    }
    let mut axes = Vec::new();
    for (name, spec) in grid {
        let knob = resolve_knob(name).map_err(|e| e.context("grid"))?;
        let values = grid_values(&knob, spec).map_err(|e| e.context(format!("grid.{name}")))?;
        axes.push((knob, values));
    }
    let total = axes.iter().map(|(_, v)| v.len()).try_fold(1usize, |acc, n| acc.checked_mul(n));
    match total {
        Some(t) if t <= MAX_POINTS => {}
        _ => bail!("grid has more than {MAX_POINTS} points"),
    }
    let mut points = vec![Point { values: Vec::new(), name: None }];
    for (knob, values) in &axes {
        points = points
            .into_iter()
            .flat_map(|p| {
                values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.values.push((knob.clone(), v.clone()));
                    q
                })
            })
            .collect();
    }
    Ok((axes.into_iter().map(|(k, _)| k.name).collect(), points))
}

fn list_points(list: &[toml::Table]) -> Result<(Vec<String>, Vec<Point>)> {
    if list.is_empty() {
        bail!("points is empty: add at least one [[points]] entry");
    }
    if list.len() > MAX_POINTS {
        bail!("more than {MAX_POINTS} points");
    }
    let mut swept: Vec<String> = Vec::new();
    let mut points = Vec::new();
    for (i, table) in list.iter().enumerate() {
        let mut values = Vec::new();
        let mut label = None;
        for (name, v) in table {
            let ctx = |e: BenchError| e.context(format!("points[{}]", i + 1));
            if name == "label" {
                match v {
                    toml::Value::String(s) if !s.trim().is_empty() => label = Some(s.trim().to_string()),
                    _ => return Err(ctx(BenchError::new("label must be a non-empty string"))),
                }
                continue;
            }
            let knob = resolve_knob(name).map_err(ctx)?;
            let value = knob_value(&knob, v).map_err(ctx)?;
            if !swept.contains(name) {
                swept.push(name.clone());
            }
            values.push((knob, value));
        }
        points.push(Point { values, name: label });
    }
    for p in &mut points {
        p.values.sort_by_key(|(k, _)| swept.iter().position(|s| *s == k.name));
    }
    for (i, p) in points.iter().enumerate() {
        if let Some(j) = points[..i].iter().position(|q| q.label() == p.label()) {
            bail!("points[{}] and points[{}] are both {:?}: give each point its own label", j + 1, i + 1, p.label());
        }
    }
    Ok((swept, points))
}
