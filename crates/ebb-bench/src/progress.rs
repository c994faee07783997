//! The progress bar (indicatif), shown only when stderr is a terminal and
//! `--progress` is true. Text for stderr goes through [`Progress::eprint`] so
//! it does not tear the bar.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar, or nothing.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    by_time: bool,
}

impl Progress {
    /// No bar.
    pub fn none() -> Progress {
        Progress { bar: None, by_time: false }
    }

    /// A bar for benchmark `name`: over `duration` seconds if given, else over `total_ops`.
    pub fn new(enabled: bool, name: &str, total_ops: Option<u64>, duration: Option<f64>) -> Progress {
        if !enabled || !std::io::stderr().is_terminal() {
            return Progress::none();
        }
        let (bar, by_time) = match (duration, total_ops) {
            (Some(secs), _) => (ProgressBar::new((secs * 1000.0) as u64), true),
            (None, Some(ops)) => (ProgressBar::new(ops), false),
            (None, None) => (ProgressBar::new_spinner(), false),
        };
        let template = if by_time {
            "{prefix:<12} [{bar:40}] {elapsed_precise} / {msg}"
        } else {
            "{prefix:<12} [{bar:40}] {pos}/{len} ops ({per_sec}, eta {eta})"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(name.to_string());
        if let Some(secs) = duration {
            bar.set_message(format!("{secs:.0}s"));
        }
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress { bar: Some(bar), by_time }
    }

    /// Updates the position.
    pub fn update(&self, ops: u64, elapsed_secs: f64) {
        if let Some(bar) = &self.bar {
            bar.set_position(if self.by_time { (elapsed_secs * 1000.0) as u64 } else { ops });
        }
    }

    /// Prints to stderr without tearing the bar.
    pub fn eprint(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprint!("{text}")),
            None => eprint!("{text}"),
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
