//! The optimiser process of `ebb-bench tune`: optuna in Python
//! (`tools/tune.py`, embedded here and run with `python3 -c`), driven over
//! its stdin/stdout with one JSON object per line — the configuration, then
//! ask (a candidate) and tell (its value) — as MLOS splits the optimiser from
//! the system it tunes. The protocol is in the script's docstring.

use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::json;

use crate::bail;
use crate::error::{BenchError, Result};

use super::spec::KnobValue;
use super::tune_file::{float_value, int_value, Domain, Param};

/// The optimiser script, run with `python3 -c`.
pub const OPTIMIZER_SCRIPT: &str = include_str!("../../../../tools/tune.py");

/// The optimiser process.
pub struct Optimizer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    log: PathBuf,
}

impl Optimizer {
    /// Starts the optimiser and sends it `config`; returns its greeting.
    pub fn start(python: &str, config: &serde_json::Value, log: &Path) -> Result<(Optimizer, serde_json::Value)> {
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
                     bash tools/deps.sh makes .venv/ with tools/requirements.txt; then \
                     EBB_PYTHON=.venv/bin/python3, or --python, names the interpreter)"
                ))
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            bail!("the optimiser's pipes did not open");
        };
        let mut opt = Optimizer { child, stdin, stdout: BufReader::new(stdout), log: log.to_path_buf() };
        let ready = opt.call(config)?;
        Ok((opt, ready))
    }

    /// Sends one message and returns the reply; an `error` reply is an error.
    pub fn call(&mut self, msg: &serde_json::Value) -> Result<serde_json::Value> {
        let sent = writeln!(self.stdin, "{msg}").and_then(|()| self.stdin.flush());
        let mut line = String::new();
        let read = if sent.is_ok() { self.stdout.read_line(&mut line).ok() } else { None };
        if read.unwrap_or(0) == 0 {
            let _ = self.child.wait();
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("(no output)");
            bail!(
                "the optimiser stopped: {last} (log: {}; the tuner needs Python 3 with optuna: \
                 bash tools/deps.sh, then EBB_PYTHON=.venv/bin/python3)",
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

    /// Tells the optimiser to quit and waits for it.
    pub fn finish(mut self) {
        let _ = writeln!(self.stdin, "{}", json!({"cmd": "quit"}));
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

/// The search space as the optimiser takes it.
pub fn space_json(space: &[Param]) -> serde_json::Value {
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
pub fn candidate(space: &[Param], params: &serde_json::Value) -> Result<Vec<KnobValue>> {
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
