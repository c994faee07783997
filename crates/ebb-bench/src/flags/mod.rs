//! db_bench-style flags: `--name=value`, `-name=value`, `--name value`, bare
//! `--name` (and `--noname`) for booleans, as gflags accepts them.
//!
//! Every flag is declared once in [`table::FLAGS`] with its kind, default,
//! help and [`Support`]. An unknown flag is an error naming it (with the
//! closest known name); a flag ebb-bench does not implement is an error when
//! given a value other than its default; so is an engine flag whose option
//! Ebb does not have yet, with `--engine=ebb` (see [`missing_in_ebb`]). The
//! values of engine options are checked by the engine (`engine::check_options`).

pub mod table;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::bail;
use crate::error::{BenchError, Result};

/// The type of a flag's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// true/false (also 1/0, yes/no, t/f, y/n).
    Bool,
    /// A signed 64-bit integer (decimal, or hex with 0x).
    Int,
    /// An unsigned 64-bit integer.
    UInt,
    /// A finite floating-point number.
    Double,
    /// Text.
    Str,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Bool => "bool",
            Kind::Int => "int",
            Kind::UInt => "uint",
            Kind::Double => "double",
            Kind::Str => "string",
        }
    }
}

/// Who acts on a flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// The client implements it.
    Client,
    /// Passed to the engine as the option of this (RocksDB) name, only when given.
    Engine(&'static str),
    /// Accepted at its default only; any other value is refused for this reason.
    Refused(&'static str),
}

/// One flag's declaration.
#[derive(Debug, Clone, Copy)]
pub struct FlagSpec {
    /// db_bench's name.
    pub name: &'static str,
    /// Value type.
    pub kind: Kind,
    /// Default, in text form.
    pub default: &'static str,
    /// Who acts on it.
    pub support: Support,
    /// One line of help.
    pub help: &'static str,
}

/// A parsed value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A number.
    Double(f64),
    /// Text.
    Str(String),
}

impl Value {
    /// The value as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Bool(b) => serde_json::Value::from(*b),
            Value::Int(i) => serde_json::Value::from(*i),
            Value::UInt(u) => serde_json::Value::from(*u),
            Value::Double(d) => serde_json::Value::from(*d),
            Value::Str(s) => serde_json::Value::from(s.clone()),
        }
    }

    /// The value as text (how it is passed to an engine's option setter).
    pub fn to_text(&self) -> String {
        match self {
            Value::Bool(b) => b.to_string(),
            Value::Int(i) => i.to_string(),
            Value::UInt(u) => u.to_string(),
            Value::Double(d) => d.to_string(),
            Value::Str(s) => s.clone(),
        }
    }
}

/// The option an engine flag names when Ebb's `Options` has no option of that
/// name (yet): with `--engine=ebb` such a flag takes only its default. Once
/// the engine adds the option the flag works without a change here.
pub fn missing_in_ebb(s: &FlagSpec) -> Option<&'static str> {
    match s.support {
        Support::Engine(option) if !ebb::Options::names().any(|n| n == option) => Some(option),
        _ => None,
    }
}

/// The error for an engine flag given a value Ebb has no option for.
pub(crate) fn not_in_ebb(name: &str, option: &str) -> BenchError {
    BenchError::new(format!(
        "flag --{name} is not supported yet by the ebb engine (it has no option {option}); \
         only its default is accepted with --engine=ebb"
    ))
}

/// Looks a flag up by name.
pub fn spec(name: &str) -> Option<&'static FlagSpec> {
    table::FLAGS.iter().find(|s| s.name == name)
}

pub(crate) fn parse_value(spec: &FlagSpec, text: &str) -> Result<Value> {
    let bad = |what: &str| BenchError::new(format!("flag --{}: invalid value {text:?}: expected {what}", spec.name));
    let t = text.trim();
    Ok(match spec.kind {
        Kind::Bool => Value::Bool(match t.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "y" | "t" => true,
            "false" | "0" | "no" | "n" | "f" => false,
            _ => return Err(bad("true or false")),
        }),
        Kind::Int => Value::Int(parse_int(t).ok_or_else(|| bad("an integer"))?),
        Kind::UInt => {
            let v = parse_int(t).ok_or_else(|| bad("a non-negative integer"))?;
            Value::UInt(u64::try_from(v).map_err(|_| bad("a non-negative integer"))?)
        }
        Kind::Double => {
            let v: f64 = t.parse().map_err(|_| bad("a number"))?;
            if !v.is_finite() {
                return Err(bad("a finite number"));
            }
            Value::Double(v)
        }
        Kind::Str => Value::Str(text.to_string()),
    })
}

fn parse_int(t: &str) -> Option<i64> {
    let (neg, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let magnitude = if let Some(hex) = digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
        i128::from_str_radix(hex, 16).ok()?
    } else {
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse::<i128>().ok()?
    };
    i64::try_from(if neg { -magnitude } else { magnitude }).ok()
}

/// The outcome of parsing a command line.
#[derive(Debug)]
pub enum Parsed {
    /// Run with these flags.
    Run(Flags),
    /// Print the help text.
    Help,
    /// Print the version.
    Version,
}

/// Every flag's value, and which were given explicitly.
#[derive(Debug, Clone)]
pub struct Flags {
    values: BTreeMap<&'static str, Value>,
    explicit: BTreeSet<&'static str>,
    args: Vec<String>,
}

impl Flags {
    /// All defaults.
    pub fn defaults() -> Flags {
        let mut values = BTreeMap::new();
        for s in table::FLAGS {
            // The defaults in the table parse; a test checks it.
            if let Ok(v) = parse_value(s, s.default) {
                values.insert(s.name, v);
            }
        }
        Flags { values, explicit: BTreeSet::new(), args: Vec::new() }
    }

    /// Parses a command line (without the program name).
    pub fn parse<I, S>(args: I) -> Result<Parsed>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let args: Vec<String> = args.into_iter().map(Into::into).collect();
        let mut flags = Flags::defaults();
        flags.args = args.clone();
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            i += 1;
            match arg.as_str() {
                "--help" | "-help" | "-h" | "--helpfull" | "-helpfull" => return Ok(Parsed::Help),
                "--version" | "-version" => return Ok(Parsed::Version),
                _ => {}
            }
            let Some(body) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
                bail!("unexpected argument {arg:?}: flags look like --name=value (see --help)");
            };
            let (name, value) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            if name.is_empty() {
                bail!("unexpected argument {arg:?}: flags look like --name=value (see --help)");
            }
            let (spec, value) = match (spec(name), value) {
                (Some(s), Some(v)) => (s, v),
                (Some(s), None) if s.kind == Kind::Bool => (s, "true".to_string()),
                (Some(s), None) => {
                    let Some(v) = args.get(i) else {
                        bail!("flag --{name} needs a value (--{name}=VALUE)");
                    };
                    i += 1;
                    (s, v.clone())
                }
                (None, None) => match name.strip_prefix("no").and_then(spec) {
                    Some(s) if s.kind == Kind::Bool => (s, "false".to_string()),
                    _ => return Err(unknown_flag(name)),
                },
                (None, Some(_)) => return Err(unknown_flag(name)),
            };
            let parsed = parse_value(spec, &value)?;
            flags.values.insert(spec.name, parsed);
            flags.explicit.insert(spec.name);
        }
        flags.check_refused()?;
        Ok(Parsed::Run(flags))
    }

    fn check_refused(&self) -> Result<()> {
        for name in &self.explicit {
            let Some(s) = spec(name) else { continue };
            if let Support::Refused(reason) = s.support {
                if !self.is_default(s) {
                    bail!("flag --{} is not supported by ebb-bench: {reason}", s.name);
                }
            }
            if let Some(option) = missing_in_ebb(s) {
                if self.str("engine") == "ebb" && !self.is_default(s) {
                    return Err(not_in_ebb(s.name, option));
                }
            }
        }
        Ok(())
    }

    /// True when the flag holds its default value.
    pub fn is_default(&self, s: &FlagSpec) -> bool {
        match parse_value(s, s.default) {
            Ok(d) => self.values.get(s.name) == Some(&d),
            Err(_) => false,
        }
    }

    /// The command line these flags came from.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// True when the flag was given on the command line.
    pub fn is_set(&self, name: &str) -> bool {
        self.explicit.contains(name)
    }

    /// Names of the flags given on the command line.
    pub fn explicit(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.explicit.iter().copied()
    }

    /// Every flag and its value.
    pub fn values(&self) -> impl Iterator<Item = (&'static str, &Value)> {
        self.values.iter().map(|(k, v)| (*k, v))
    }

    /// The value of a flag.
    pub fn value(&self, name: &str) -> Option<&Value> {
        self.values.get(name)
    }

    /// Sets a flag as if given on the command line (for `compare` and tests).
    pub fn set(&mut self, name: &str, text: &str) -> Result<()> {
        let Some(s) = spec(name) else { return Err(unknown_flag(name)) };
        self.values.insert(s.name, parse_value(s, text)?);
        self.explicit.insert(s.name);
        Ok(())
    }

    fn get(&self, name: &str) -> &Value {
        match self.values.get(name) {
            Some(v) => v,
            // Only reachable through a misspelt name in this crate's code.
            None => panic!("flag {name:?} is not in the flag table"),
        }
    }

    /// A boolean flag.
    pub fn bool(&self, name: &str) -> bool {
        match self.get(name) {
            Value::Bool(b) => *b,
            other => panic!("flag {name} is not a bool: {other:?}"),
        }
    }

    /// An integer flag (int or uint).
    pub fn i64(&self, name: &str) -> i64 {
        match self.get(name) {
            Value::Int(i) => *i,
            Value::UInt(u) => i64::try_from(*u).unwrap_or(i64::MAX),
            other => panic!("flag {name} is not an integer: {other:?}"),
        }
    }

    /// An integer flag that must not be negative; the error names the flag.
    pub fn u64(&self, name: &str) -> Result<u64> {
        match self.get(name) {
            Value::UInt(u) => Ok(*u),
            Value::Int(i) => {
                u64::try_from(*i).map_err(|_| BenchError::new(format!("flag --{name} must not be negative, got {i}")))
            }
            other => panic!("flag {name} is not an integer: {other:?}"),
        }
    }

    /// A number flag.
    pub fn f64(&self, name: &str) -> f64 {
        match self.get(name) {
            Value::Double(d) => *d,
            Value::Int(i) => *i as f64,
            Value::UInt(u) => *u as f64,
            other => panic!("flag {name} is not a number: {other:?}"),
        }
    }

    /// A text flag.
    pub fn str(&self, name: &str) -> &str {
        match self.get(name) {
            Value::Str(s) => s,
            other => panic!("flag {name} is not text: {other:?}"),
        }
    }
}

fn unknown_flag(name: &str) -> BenchError {
    match nearest(name, table::FLAGS.iter().map(|s| s.name)) {
        Some(near) => BenchError::new(format!("unknown flag --{name} (did you mean --{near}?)")),
        None => BenchError::new(format!("unknown flag --{name} (see --help for the list)")),
    }
}

/// The name of `known` nearest to the mistyped `name`, if one is within
/// three edits (the first of equally near ones).
pub(crate) fn nearest<'a>(name: &str, known: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    known.map(|k| (edit_distance(name, k), k)).filter(|(d, _)| *d <= 3).min_by_key(|(d, _)| *d).map(|(_, k)| k)
}

/// Levenshtein distance between `a` and `b`, in characters: how near a
/// mistyped name is ([`nearest`]).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != *cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The `--help` text.
pub fn help_text() -> String {
    let mut out = String::new();
    out.push_str(
        "ebb-bench: a db_bench-compatible benchmark client for Ebb\n\n\
         Usage:\n  \
         ebb-bench [--flag=value ...]                        run benchmarks, db_bench style (Benchmarks, Flags below)\n  \
         ebb-bench plot REPORT.json... -o FIG.svg|FIG.png    draw --json reports' interval series\n  \
         ebb-bench compare [--peer=P] [--reps=N] -- FLAGS... Ebb against RocksDB, alternating (--help)\n  \
         ebb-bench experiment FILE [--out DIR] [--dry-run]   sweep options (docs/experiments.md)\n  \
         ebb-bench tune FILE [--out DIR] [--synthetic]       Bayesian tuning of options\n  \
         ebb-bench cachebench [--flag=value ...]             RocksDB's cache_bench over Ebb's caches (--help)\n\n\
         Flags are accepted as --name=value, -name=value, --name value, and bare --name (or --noname) for booleans.\n\
         An engine option given is passed as given; one left out takes Ebb's default, with --engine=rocksdb too,\n\
         so both engines run with the same options (--benchmarks=options prints what the engine has).\n\
         A run prints db_bench's header and result lines, then a plain-language summary (--summary=false omits it).\n\n\
         Benchmarks:\n",
    );
    for (name, what) in table::BENCHMARKS {
        let _ = writeln!(out, "  {name:<22} {what}");
    }
    out.push_str("\nFlags:\n");
    for s in table::FLAGS {
        let note = match s.support {
            Support::Client => String::new(),
            Support::Engine(opt) if missing_in_ebb(s).is_some() => {
                format!(" [engine option {opt}; not in Ebb yet: --engine=ebb takes only the default]")
            }
            Support::Engine(opt) => format!(" [engine option {opt}]"),
            Support::Refused(why) => format!(" [default only: {why}]"),
        };
        let _ = writeln!(
            out,
            "  --{}={} ({}){}\n      {}",
            s.name,
            if s.default.is_empty() { "\"\"" } else { s.default },
            s.kind.name(),
            note,
            s.help
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Flags> {
        match Flags::parse(args.iter().copied())? {
            Parsed::Run(f) => Ok(f),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn every_default_parses_and_names_are_unique() {
        let mut seen = BTreeSet::new();
        for s in table::FLAGS {
            assert!(parse_value(s, s.default).is_ok(), "default of {} does not parse", s.name);
            assert!(seen.insert(s.name), "{} declared twice", s.name);
        }
        assert_eq!(Flags::defaults().values.len(), table::FLAGS.len());
    }

    #[test]
    fn single_and_double_dash_and_bare_bools() {
        let f =
            run(&["--num=5", "-value_size=7", "--histogram", "-statistics", "--nosync", "--key_size", "8"]).unwrap();
        assert_eq!(f.i64("num"), 5);
        assert_eq!(f.i64("value_size"), 7);
        assert!(f.bool("histogram"));
        assert!(f.bool("statistics"));
        assert!(!f.bool("sync"));
        assert_eq!(f.i64("key_size"), 8);
        assert!(f.is_set("num") && !f.is_set("threads"));
    }

    #[test]
    fn unknown_flag_is_named_with_a_suggestion() {
        let e = run(&["--nmu=5"]).unwrap_err().to_string();
        assert!(e.contains("--nmu") && e.contains("--num"), "{e}");
        let e = run(&["--completely_made_up_flag"]).unwrap_err().to_string();
        assert!(e.contains("completely_made_up_flag"), "{e}");
        let e = run(&["stray"]).unwrap_err().to_string();
        assert!(e.contains("stray"), "{e}");
    }

    #[test]
    fn bad_values_name_the_flag() {
        let e = run(&["--num=lots"]).unwrap_err().to_string();
        assert!(e.contains("--num") && e.contains("lots"), "{e}");
        let e = run(&["--sync=maybe"]).unwrap_err().to_string();
        assert!(e.contains("--sync"), "{e}");
        let e = run(&["--seed=-1"]).unwrap_err().to_string();
        assert!(e.contains("--seed"), "{e}");
        let e = run(&["--sine_a=nan"]).unwrap_err().to_string();
        assert!(e.contains("--sine_a"), "{e}");
        let e = run(&["--num"]).unwrap_err().to_string();
        assert!(e.contains("needs a value"), "{e}");
    }

    #[test]
    fn refused_flags_error_unless_default() {
        let e = run(&["--use_blob_db=true"]).unwrap_err().to_string();
        assert!(e.contains("--use_blob_db") && e.contains("not supported"), "{e}");
        assert!(run(&["--use_blob_db=false"]).is_ok());
        let e = run(&["--stats_interval=1000"]).unwrap_err().to_string();
        assert!(e.contains("stats_interval_seconds"), "{e}");
    }

    #[test]
    fn flags_ebb_has_no_option_for_are_refused_at_parse_time_and_marked_in_help() {
        let missing: Vec<&FlagSpec> = table::FLAGS.iter().filter(|s| missing_in_ebb(s).is_some()).collect();
        let help = help_text();
        for s in &missing {
            let other = match s.kind {
                Kind::Bool if s.default == "false" => "true",
                Kind::Bool => "false",
                _ => "12345",
            };
            let e = run(&[&format!("--{}={other}", s.name)]).unwrap_err().to_string();
            assert!(e.contains(&format!("--{}", s.name)) && e.contains("not supported yet"), "{e}");
            assert!(run(&[&format!("--{}={}", s.name, s.default)]).is_ok(), "{} at its default", s.name);
            assert!(run(&["--engine=rocksdb", &format!("--{}={other}", s.name)]).is_ok(), "{} for the peer", s.name);
            let line = help.lines().find(|l| l.starts_with(&format!("  --{}=", s.name))).unwrap();
            assert!(line.contains("not in Ebb yet"), "{line}");
        }
    }

    #[test]
    fn hex_and_signs() {
        assert_eq!(parse_int("0x10"), Some(16));
        assert_eq!(parse_int("-3"), Some(-3));
        assert_eq!(parse_int("1e6"), None);
        assert_eq!(parse_int(""), None);
    }

    #[test]
    fn help_lists_every_flag() {
        let h = help_text();
        for s in table::FLAGS {
            assert!(h.contains(&format!("--{}=", s.name)), "{}", s.name);
        }
        assert!(matches!(Flags::parse(["--help"]).unwrap(), Parsed::Help));
    }
}
