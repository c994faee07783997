//! What experiment and tune files share: knob names (ebb-bench flags or Ebb
//! option names) and their values, the workload, and the byte sizes
//! ("64MiB") that TOML files may use for integer options.
//!
//! A knob named in a file resolves, in this order, to an ebb-bench flag
//! (`write_buffer_size`, `bloom_bits`, `threads`), to the flag that sets an
//! Ebb option of that name (`bloom_bits_per_key` → `--bloom_bits`), or to an
//! Ebb option no flag sets (`compression_per_level`), which reaches the run
//! through a generated OPTIONS file. Anything else is an error that names it.

use std::path::Path;

use crate::bail;
use crate::config::{Config, EngineKind};
use crate::engine::ebb::ebb_options_with_text;
use crate::error::{BenchError, Result};
use crate::flags::{spec, table, Flags, Kind, Parsed, Support};
use crate::workload::MixSpec;

/// Flags the experiment sets itself for every run.
const SET_BY_THE_RUNNER: &[(&str, &str)] = &[
    ("db", "each run gets a fresh database directory"),
    ("use_existing_db", "each run starts from an empty database"),
    ("json", "the runner reads each run's JSON report"),
    ("progress", "runs are child processes without a terminal"),
    ("seed", "give the base seed as the top-level `seed`; repetition r uses seed + r"),
];

/// Flags whose value is a path: relative paths are taken from the file's folder.
const PATH_FLAGS: &[&str] = &["workload_file", "trace_file", "options_file"];

/// Engine flags whose values are not in their option's form: `--prefix_size=8`
/// sets `prefix_extractor=rocksdb.FixedPrefix.8`. A knob named by the option
/// stays the option (which takes every extractor, capped ones too); the flag
/// is a knob by its own name.
const FLAGS_NOT_NAMED_BY_THEIR_OPTION: &[&str] = &["prefix_size"];

/// Where a knob's value goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An ebb-bench flag (`--name=value`).
    Flag(&'static str),
    /// An Ebb option that no flag sets (a `name=value` line of an OPTIONS file).
    EngineOption(&'static str),
}

/// A knob as a file names it, and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knob {
    /// The name as written in the file.
    pub name: String,
    /// Where its value goes.
    pub target: Target,
}

/// One value of a knob.
#[derive(Debug, Clone, PartialEq)]
pub struct KnobValue {
    /// The text handed to the flag parser or to `Options::set`.
    pub text: String,
    /// How tables and plots show it (sizes as written, e.g. "64MiB").
    pub label: String,
    /// The value as a number, for plot axes; `None` for text and booleans.
    pub number: Option<f64>,
}

/// Resolves a knob name; the error names it and suggests a near name.
pub fn resolve_knob(name: &str) -> Result<Knob> {
    let target = if let Some(s) = spec(name) {
        Target::Flag(s.name)
    } else if let Some(s) = table::FLAGS.iter().find(|s| {
        matches!(s.support, Support::Engine(o) if o == name) && !FLAGS_NOT_NAMED_BY_THEIR_OPTION.contains(&s.name)
    }) {
        Target::Flag(s.name)
    } else if let Some(option) = ebb::Options::names().find(|n| *n == name) {
        Target::EngineOption(option)
    } else {
        let known = table::FLAGS.iter().map(|s| s.name).chain(ebb::Options::names());
        return Err(match crate::flags::nearest(name, known) {
            Some(near) => BenchError::new(format!(
                "unknown option {name:?}: not an ebb-bench flag nor an Ebb option (did you mean {near:?}?)"
            )),
            None => BenchError::new(format!("unknown option {name:?}: not an ebb-bench flag nor an Ebb option")),
        });
    };
    if let Target::Flag(flag) = target {
        if let Some((_, why)) = SET_BY_THE_RUNNER.iter().find(|(f, _)| *f == flag) {
            bail!("option {name:?} cannot be set in an experiment: {why}");
        }
    }
    Ok(Knob { name: name.to_string(), target })
}

/// Parses a byte size: a number with an optional binary suffix (`K`, `KB`,
/// `KiB`, `M`, `MB`, `MiB`, `G`, `GB`, `GiB`, `T`, `TB`, `TiB`; all powers of
/// 1024, as db_bench users mean them), e.g. "64MiB", "1.5GiB", "4096".
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, suffix) = t.split_at(split);
    let shift = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    if number.is_empty() {
        return None;
    }
    if let Ok(n) = number.parse::<u64>() {
        return n.checked_mul(1u64 << shift);
    }
    let x: f64 = number.parse().ok()?;
    let bytes = x * (1u64 << shift) as f64;
    (bytes.is_finite() && bytes.fract() == 0.0 && bytes < 2f64.powi(63)).then_some(bytes as u64)
}

/// A byte count the way a person writes it: "64MiB", "1536KiB", "1000".
pub fn size_label(bytes: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if bytes >= 1 << shift && bytes.trailing_zeros() >= shift {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

fn toml_kind(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "a string",
        toml::Value::Integer(_) => "an integer",
        toml::Value::Float(_) => "a number",
        toml::Value::Boolean(_) => "a boolean",
        toml::Value::Datetime(_) => "a date",
        toml::Value::Array(_) => "an array",
        toml::Value::Table(_) => "a table",
    }
}

fn integer_value(knob: &Knob, v: &toml::Value) -> Result<KnobValue> {
    match v {
        toml::Value::Integer(i) => Ok(KnobValue { text: i.to_string(), label: i.to_string(), number: Some(*i as f64) }),
        toml::Value::String(s) => match parse_size(s) {
            Some(bytes) => {
                Ok(KnobValue { text: bytes.to_string(), label: s.trim().to_string(), number: Some(bytes as f64) })
            }
            None => bail!("option {}: {s:?} is not an integer nor a size like \"64MiB\"", knob.name),
        },
        other => bail!("option {}: expected an integer or a size like \"64MiB\", got {}", knob.name, toml_kind(other)),
    }
}

/// Converts a TOML value for `knob` and checks it parses (the error names the knob).
pub fn knob_value(knob: &Knob, v: &toml::Value) -> Result<KnobValue> {
    let value = match &knob.target {
        Target::Flag(flag) => {
            let Some(s) = spec(flag) else { bail!("option {}: not in the flag table", knob.name) };
            let value = match (s.kind, v) {
                (Kind::Int | Kind::UInt, _) => integer_value(knob, v)?,
                (Kind::Double, toml::Value::Integer(i)) => {
                    KnobValue { text: i.to_string(), label: i.to_string(), number: Some(*i as f64) }
                }
                (Kind::Double, toml::Value::Float(x)) => {
                    KnobValue { text: x.to_string(), label: x.to_string(), number: Some(*x) }
                }
                (Kind::Bool, toml::Value::Boolean(b)) => {
                    KnobValue { text: b.to_string(), label: b.to_string(), number: None }
                }
                (Kind::Str, toml::Value::String(t)) => KnobValue {
                    text: t.clone(),
                    label: if t.is_empty() { "(none)".into() } else { t.clone() },
                    number: None,
                },
                (kind, other) => bail!(
                    "option {}: expected {}, got {}",
                    knob.name,
                    match kind {
                        Kind::Bool => "true or false",
                        Kind::Double => "a number",
                        _ => "a string",
                    },
                    toml_kind(other)
                ),
            };
            Flags::defaults().set(flag, &value.text).map_err(|e| e.context(format!("option {}", knob.name)))?;
            value
        }
        Target::EngineOption(option) => {
            let default = ebb::Options::default().get(option).unwrap_or_default();
            let value = match v {
                toml::Value::String(_) if default.parse::<u64>().is_ok() => integer_value(knob, v)?,
                toml::Value::String(t) => KnobValue { text: t.clone(), label: t.clone(), number: None },
                toml::Value::Integer(_) => integer_value(knob, v)?,
                toml::Value::Float(x) => KnobValue { text: x.to_string(), label: x.to_string(), number: Some(*x) },
                toml::Value::Boolean(b) => KnobValue { text: b.to_string(), label: b.to_string(), number: None },
                other => bail!("option {}: expected a value, got {}", knob.name, toml_kind(other)),
            };
            ebb::Options::default()
                .set(option, &value.text)
                .map_err(|e| BenchError::new(format!("option {}: {e}", knob.name)))?;
            value
        }
    };
    Ok(value)
}

/// Knob settings turned into what a run takes: flags and OPTIONS lines.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Settings {
    /// `--name=value` arguments, in order (later ones win).
    pub args: Vec<String>,
    /// `name=value` lines for the run's OPTIONS file.
    pub option_lines: Vec<String>,
}

impl Settings {
    /// Adds one knob's value.
    pub fn push(&mut self, knob: &Knob, value: &KnobValue) {
        match &knob.target {
            Target::Flag(flag) => self.args.push(format!("--{flag}={}", value.text)),
            Target::EngineOption(option) => self.option_lines.push(format!("{option}={}", value.text)),
        }
    }

    /// These settings followed by `other`'s.
    pub fn then(&self, other: &Settings) -> Settings {
        let mut out = self.clone();
        out.args.extend(other.args.iter().cloned());
        out.option_lines.extend(other.option_lines.iter().cloned());
        out
    }
}

/// The workload: the flags every run of a file shares.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// The settings.
    pub settings: Settings,
}

/// Parses a file's `workload`: a string of flags, an array of flags, or a
/// table of knobs with an optional `mix` table (the `mix` benchmark's shares,
/// as in a `--workload_file`). Relative paths are taken from `base_dir`.
pub fn parse_workload(v: Option<&toml::Value>, base_dir: &Path) -> Result<Workload> {
    let mut settings = Settings::default();
    let with_base = |flag: &str, value: &str| -> String {
        if PATH_FLAGS.contains(&flag) && !value.is_empty() && Path::new(value).is_relative() {
            base_dir.join(value).display().to_string()
        } else {
            value.to_string()
        }
    };
    let mut push_arg = |arg: &str| -> Result<()> {
        let body = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'));
        let Some(body) = body else { bail!("workload: {arg:?} is not a flag (flags look like --name=value)") };
        let (name, value) = body.split_once('=').unwrap_or((body, "true"));
        let knob = resolve_knob(name).map_err(|e| e.context("workload"))?;
        let Target::Flag(flag) = knob.target else {
            bail!("workload: {name:?} is an Ebb option, not a flag: put it in a [workload] table")
        };
        settings.args.push(format!("--{flag}={}", with_base(flag, value)));
        Ok(())
    };
    match v {
        None => bail!("missing field `workload` (ebb-bench flags as a string, an array or a table)"),
        Some(toml::Value::String(s)) => s.split_whitespace().try_for_each(&mut push_arg)?,
        Some(toml::Value::Array(items)) => {
            for item in items {
                let toml::Value::String(s) = item else {
                    bail!("workload: array items must be flags as strings, got {}", toml_kind(item))
                };
                push_arg(s)?;
            }
        }
        Some(toml::Value::Table(t)) => {
            for (name, value) in t {
                if name == "mix" {
                    settings.args.extend(mix_args(value)?);
                    continue;
                }
                let knob = resolve_knob(name).map_err(|e| e.context("workload"))?;
                let mut kv = knob_value(&knob, value).map_err(|e| e.context("workload"))?;
                if let Target::Flag(flag) = knob.target {
                    kv.text = with_base(flag, &kv.text);
                }
                settings.push(&knob, &kv);
            }
        }
        Some(other) => bail!("workload must be flags as a string, an array or a table, got {}", toml_kind(other)),
    }
    Ok(Workload { settings })
}

/// A `mix` table as `--mix_*` flags (checked as a `--workload_file` would be).
fn mix_args(v: &toml::Value) -> Result<Vec<String>> {
    let toml::Value::Table(t) = v else { bail!("workload.mix must be a table, got {}", toml_kind(v)) };
    let text = toml::to_string(t).map_err(|e| BenchError::new(format!("workload.mix: {e}")))?;
    let mix = MixSpec::parse_toml(&text, "workload.mix")?;
    Ok(vec![
        format!("--mix_point_reads={}", mix.point_reads),
        format!("--mix_range_scans={}", mix.range_scans),
        format!("--mix_scan_length={}", mix.scan_length),
        format!("--mix_inserts={}", mix.inserts),
        format!("--mix_updates={}", mix.updates),
        format!("--mix_deletes={}", mix.deletes),
        format!("--key_distribution={}", mix.key_distribution),
        format!("--zipf_theta={}", mix.zipf_theta),
        format!("--hotspot_fraction={}", mix.hotspot_fraction),
        format!("--hotspot_ops_fraction={}", mix.hotspot_ops_fraction),
    ])
}

/// Parses settings as ebb-bench would for a run.
pub fn parse_flags(args: &[String]) -> Result<Flags> {
    match Flags::parse(args.iter().cloned())? {
        Parsed::Run(f) => Ok(f),
        Parsed::Help | Parsed::Version => bail!("--help and --version have no place in a workload"),
    }
}

/// The OPTIONS text a run needs: the workload's `--options_file`, then the
/// option lines; `None` when there is neither.
pub fn options_text(flags: &Flags, settings: &Settings) -> Result<Option<String>> {
    let file = flags.str("options_file");
    if file.is_empty() && settings.option_lines.is_empty() {
        return Ok(None);
    }
    let mut text = String::new();
    if !file.is_empty() {
        text = std::fs::read_to_string(file)
            .map_err(|e| BenchError::new(format!("flag --options_file: cannot read {file}: {e}")))?;
        text.push('\n');
    }
    for line in &settings.option_lines {
        text.push_str(line);
        text.push('\n');
    }
    Ok(Some(text))
}

/// Checks that a run with these settings would start: flags, their
/// combinations, and (for Ebb) the engine options. Returns the parsed flags.
pub fn check_run(settings: &Settings) -> Result<Flags> {
    let flags = parse_flags(&settings.args)?;
    let cfg = Config::from_flags(&flags)?;
    if cfg.engine == EngineKind::Ebb {
        let text = options_text(&flags, settings)?;
        ebb_options_with_text(&flags, true, text.as_deref().map(|t| (t, "(the run's OPTIONS)")))?;
    } else if !settings.option_lines.is_empty() {
        bail!("Ebb options without a flag ({}) need --engine=ebb", settings.option_lines.join(", "));
    }
    Ok(flags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("64MiB"), Some(64 << 20));
        assert_eq!(parse_size("64mb"), Some(64 << 20));
        assert_eq!(parse_size("1.5GiB"), Some(3 << 29));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("4 K"), Some(4096));
        assert_eq!(parse_size("MiB"), None);
        assert_eq!(parse_size("1.3B"), None);
        assert_eq!(parse_size("12 parsecs"), None);
        assert_eq!(size_label(64 << 20), "64MiB");
        assert_eq!(size_label(1536 << 10), "1536KiB");
        assert_eq!(size_label(1000), "1000");
    }

    #[test]
    fn knobs_resolve_by_flag_then_option_name() {
        assert_eq!(resolve_knob("write_buffer_size").unwrap().target, Target::Flag("write_buffer_size"));
        assert_eq!(resolve_knob("bloom_bits_per_key").unwrap().target, Target::Flag("bloom_bits"));
        assert_eq!(
            resolve_knob("compression_per_level").unwrap().target,
            Target::EngineOption("compression_per_level")
        );
        assert_eq!(
            resolve_knob("memtable_prefix_bloom_size_ratio").unwrap().target,
            Target::Flag("memtable_bloom_size_ratio")
        );
        assert_eq!(resolve_knob("prefix_size").unwrap().target, Target::Flag("prefix_size"));
        assert_eq!(resolve_knob("prefix_extractor").unwrap().target, Target::EngineOption("prefix_extractor"));
        let e = resolve_knob("write_bufer_size").unwrap_err().to_string();
        assert!(e.contains("write_bufer_size") && e.contains("write_buffer_size"), "{e}");
        let e = resolve_knob("db").unwrap_err().to_string();
        assert!(e.contains("fresh database"), "{e}");
    }

    #[test]
    fn values_are_checked_against_the_knob() {
        let k = resolve_knob("write_buffer_size").unwrap();
        let v = knob_value(&k, &toml::Value::String("4MiB".into())).unwrap();
        assert_eq!((v.text.as_str(), v.label.as_str(), v.number), ("4194304", "4MiB", Some(4194304.0)));
        let e = knob_value(&k, &toml::Value::String("big".into())).unwrap_err().to_string();
        assert!(e.contains("write_buffer_size") && e.contains("big"), "{e}");
        let e = knob_value(&k, &toml::Value::Boolean(true)).unwrap_err().to_string();
        assert!(e.contains("integer"), "{e}");
        let k = resolve_knob("bottommost_compression").unwrap();
        assert!(knob_value(&k, &toml::Value::String("zstd".into())).is_ok());
        let e = knob_value(&k, &toml::Value::String("brotli".into())).unwrap_err().to_string();
        assert!(e.contains("bottommost_compression") && e.contains("brotli"), "{e}");
        let k = resolve_knob("prefix_extractor").unwrap();
        assert!(knob_value(&k, &toml::Value::String("rocksdb.CappedPrefix.4".into())).is_ok());
    }
}
