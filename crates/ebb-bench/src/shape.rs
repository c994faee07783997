//! Load shapes: the write-rate cap over time that the write limiter enforces.
//!
//! A [`Schedule`] is a piecewise-constant rate (bytes/s, or unlimited) over
//! benchmark time `t` in seconds:
//! - fixed: `--benchmark_write_rate_limit`;
//! - sine (thesis §3.4.2-3.4.3): `f(t) = a·sin(b·t + c) + d`, evaluated at the
//!   start of each `--sine_write_rate_interval_milliseconds` step and held for
//!   the step; from `--sine_finished_seconds` on, `--sine_finished_write_rate_limit`
//!   (0 = unlimited). A negative `f` pauses writes for that step. db_bench
//!   leaves the first step at `--benchmark_write_rate_limit` (or unlimited);
//!   we use `f(0)` from the start.
//! - trace (`--trace_file`): CSV rows `seconds,bytes_per_sec`, each rate held
//!   until the next row (the first row's rate also before its time, the last
//!   row's forever);
//! - bursts in time (seed 002 §6.1 "write random bursts in time"):
//!   `--burst_seconds` and `--idle_seconds`, each a number or a comma list
//!   used cyclically: burst 0, idle 0, burst 1, idle 1, ... During an idle
//!   phase the cap is 0; during a burst the cap is the base shape's.
//!
//! Bursts in count (`--burst_writes`) depend on progress rather than time and
//! live in [`CountBursts`].

use std::path::Path;

use parking_lot::Mutex;

use crate::bail;
use crate::clock::Clock;
use crate::error::{BenchError, Result};

/// A rate at one moment: `None` is unlimited.
pub type Rate = Option<f64>;

/// The sine wave of the thesis, `f(t) = a·sin(b·t + c) + d` bytes/s.
#[derive(Debug, Clone, PartialEq)]
pub struct Sine {
    /// Amplitude.
    pub a: f64,
    /// Angular frequency (rad/s).
    pub b: f64,
    /// Phase (rad).
    pub c: f64,
    /// Offset (bytes/s).
    pub d: f64,
    /// Seconds between re-evaluations.
    pub interval_secs: f64,
    /// From this time on the sine is replaced by `finished_rate`; `None` = never.
    pub finished_secs: Option<f64>,
    /// The cap after `finished_secs`; `None` = unlimited.
    pub finished_rate: Rate,
}

impl Sine {
    /// `f(t)` itself.
    pub fn f(&self, t: f64) -> f64 {
        self.a * (self.b * t + self.c).sin() + self.d
    }
}

/// A trace of `(seconds, bytes_per_sec)` steps.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    rows: Vec<(f64, f64)>,
}

impl Trace {
    /// Parses trace CSV text; `origin` names the file in errors.
    ///
    /// Lines are `seconds,bytes_per_sec`; blank lines and `#` comments are
    /// skipped, and a first line that is not numeric is taken as a header.
    /// Times must increase strictly and rates must be non-negative.
    pub fn parse(text: &str, origin: &str) -> Result<Trace> {
        let mut rows: Vec<(f64, f64)> = Vec::new();
        let mut seen_line = false;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let first = !seen_line;
            seen_line = true;
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let err = |msg: String| BenchError::new(format!("trace file {origin} line {}: {msg}", i + 1));
            if fields.len() != 2 {
                return Err(err(format!("expected 2 fields `seconds,bytes_per_sec`, got {}", fields.len())));
            }
            let t = fields[0].parse::<f64>();
            let r = fields[1].parse::<f64>();
            let (t, r) = match (t, r) {
                (Ok(t), Ok(r)) => (t, r),
                _ if first => continue, // a header
                _ => return Err(err(format!("not a number pair: {line:?}"))),
            };
            if !t.is_finite() || t < 0.0 {
                return Err(err(format!("time {t} must be a non-negative number of seconds")));
            }
            if !r.is_finite() || r < 0.0 {
                return Err(err(format!("rate {r} must be a non-negative number of bytes per second")));
            }
            if let Some((prev, _)) = rows.last() {
                if t <= *prev {
                    return Err(err(format!("time {t} does not increase (previous row: {prev})")));
                }
            }
            rows.push((t, r));
        }
        if rows.is_empty() {
            bail!("trace file {origin}: no `seconds,bytes_per_sec` rows");
        }
        Ok(Trace { rows })
    }

    /// Reads and parses a trace file.
    pub fn load(path: &Path) -> Result<Trace> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| BenchError::new(format!("cannot read trace file {}: {e}", path.display())))?;
        Trace::parse(&text, &path.display().to_string())
    }

    /// The rows.
    pub fn rows(&self) -> &[(f64, f64)] {
        &self.rows
    }

    fn index_at(&self, t: f64) -> usize {
        self.rows.partition_point(|(rt, _)| *rt <= t).saturating_sub(1)
    }
}

/// The shape of the cap while writes are allowed.
#[derive(Debug, Clone, PartialEq)]
pub enum Base {
    /// No cap.
    Unlimited,
    /// A constant cap in bytes/s.
    Fixed(f64),
    /// The thesis sine wave.
    Sine(Sine),
    /// A replayed trace.
    Trace(Trace),
}

/// Alternating burst and idle phases (lists used cyclically).
#[derive(Debug, Clone, PartialEq)]
pub struct TimeBursts {
    phases: Vec<(f64, f64)>,
    period: f64,
}

impl TimeBursts {
    /// Burst and idle lengths in seconds; both lists non-empty, bursts positive, idles non-negative.
    pub fn new(bursts: &[f64], idles: &[f64]) -> Result<TimeBursts> {
        if bursts.is_empty() || idles.is_empty() {
            bail!("--burst_seconds and --idle_seconds need at least one value each");
        }
        if bursts.iter().any(|b| !(b.is_finite() && *b > 0.0)) {
            bail!("--burst_seconds values must be positive, got {bursts:?}");
        }
        if idles.iter().any(|i| !(i.is_finite() && *i >= 0.0)) {
            bail!("--idle_seconds values must be non-negative, got {idles:?}");
        }
        let n = lcm(bursts.len(), idles.len());
        let phases: Vec<(f64, f64)> = (0..n).map(|k| (bursts[k % bursts.len()], idles[k % idles.len()])).collect();
        let period = phases.iter().map(|(b, i)| b + i).sum();
        Ok(TimeBursts { phases, period })
    }

    /// `(in_burst, end_of_current_phase)` at time `t`.
    fn phase_at(&self, t: f64) -> (bool, f64) {
        let cycles = (t / self.period).floor();
        let mut start = cycles * self.period;
        for (b, i) in &self.phases {
            if t < start + b {
                return (true, start + b);
            }
            if t < start + b + i {
                return (false, start + b + i);
            }
            start += b + i;
        }
        // Rounding at the end of a cycle: the next cycle starts with a burst.
        (true, start + self.phases[0].0)
    }

    /// Seconds of burst time within `[0, t)`.
    pub fn burst_time_until(&self, t: f64) -> f64 {
        let burst_per_cycle: f64 = self.phases.iter().map(|(b, _)| b).sum();
        let cycles = (t / self.period).floor();
        let mut total = cycles * burst_per_cycle;
        let mut start = cycles * self.period;
        for (b, i) in &self.phases {
            if t <= start {
                break;
            }
            total += (t - start).min(*b);
            start += b + i;
        }
        total
    }
}

fn lcm(a: usize, b: usize) -> usize {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    a / gcd(a, b) * b
}

/// The write cap over benchmark time.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// The cap while writes are allowed.
    pub base: Base,
    /// Idle phases, if any.
    pub bursts: Option<TimeBursts>,
}

impl Schedule {
    /// No cap at all.
    pub fn unlimited() -> Schedule {
        Schedule { base: Base::Unlimited, bursts: None }
    }

    /// A constant cap.
    pub fn fixed(rate: f64) -> Schedule {
        Schedule { base: Base::Fixed(rate), bursts: None }
    }

    /// True when the schedule never limits anything.
    pub fn is_unlimited(&self) -> bool {
        self.base == Base::Unlimited && self.bursts.is_none()
    }

    /// The cap at time `t`.
    pub fn rate_at(&self, t: f64) -> Rate {
        if let Some(b) = &self.bursts {
            if !b.phase_at(t).0 {
                return Some(0.0);
            }
        }
        match &self.base {
            Base::Unlimited => None,
            Base::Fixed(r) => Some(*r),
            Base::Sine(s) => {
                if let Some(fin) = s.finished_secs {
                    if t >= fin {
                        return s.finished_rate;
                    }
                }
                let step = (t / s.interval_secs).floor() * s.interval_secs;
                Some(s.f(step).max(0.0))
            }
            Base::Trace(tr) => Some(tr.rows[tr.index_at(t)].1),
        }
    }

    /// The first time after `t` at which the cap may change; `None` if never.
    pub fn next_change(&self, t: f64) -> Option<f64> {
        let base = match &self.base {
            Base::Unlimited | Base::Fixed(_) => None,
            Base::Sine(s) => {
                let finished = s.finished_secs.filter(|f| *f > t);
                if s.finished_secs.is_some_and(|f| t >= f) {
                    None
                } else {
                    let next_step = ((t / s.interval_secs).floor() + 1.0) * s.interval_secs;
                    Some(finished.map_or(next_step, |f| f.min(next_step)))
                }
            }
            Base::Trace(tr) => tr.rows.iter().map(|(rt, _)| *rt).find(|rt| *rt > t),
        };
        let burst = self.bursts.as_ref().map(|b| b.phase_at(t).1);
        let next = match (base, burst) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // Guard against rounding that would not move time forward.
        next.map(|n| if n > t { n } else { t + 1e-9 })
    }

    /// The mean cap over `[t0, t1)`; `None` if it is unlimited anywhere there.
    pub fn average_rate(&self, t0: f64, t1: f64) -> Rate {
        if t1 <= t0 {
            return self.rate_at(t0);
        }
        let mut t = t0;
        let mut bytes = 0.0;
        while t < t1 {
            let end = self.next_change(t).map_or(t1, |n| n.min(t1));
            bytes += self.rate_at(t)? * (end - t);
            t = end;
        }
        Some(bytes / (t1 - t0))
    }

    /// Seconds of `[0, t)` spent in bursts (all of it without bursts).
    pub fn burst_time_until(&self, t: f64) -> f64 {
        self.bursts.as_ref().map_or(t, |b| b.burst_time_until(t))
    }
}

/// Bursts in count (seed 002 §6.1 "write random bursts in count"): all writer
/// threads together write `burst_writes` operations, then sleep the next
/// `--idle_seconds` entry, and so on.
#[derive(Debug)]
pub struct CountBursts {
    burst_writes: u64,
    idles: Vec<f64>,
    state: Mutex<CountState>,
}

#[derive(Debug, Default)]
struct CountState {
    written: u64,
    next_idle: usize,
    idle_until: Option<f64>,
    idle_spans: Vec<(f64, f64)>,
}

impl CountBursts {
    /// Bursts of `burst_writes` operations separated by `idles` seconds (cyclic).
    pub fn new(burst_writes: u64, idles: &[f64]) -> Result<CountBursts> {
        if burst_writes == 0 {
            bail!("--burst_writes must be positive");
        }
        if idles.is_empty() || idles.iter().any(|i| !(i.is_finite() && *i >= 0.0)) {
            bail!("--burst_writes needs --idle_seconds with non-negative values, got {idles:?}");
        }
        Ok(CountBursts { burst_writes, idles: idles.to_vec(), state: Mutex::new(CountState::default()) })
    }

    /// Waits while an idle phase runs, then counts `ops` writes into the
    /// current burst. Returns false if `stop` says to give up while waiting.
    pub fn before_write(&self, ops: u64, clock: &dyn Clock, stop: &crate::limiter::Stop<'_>) -> bool {
        loop {
            let mut st = self.state.lock();
            let now = clock.now();
            if let Some(until) = st.idle_until {
                if now < until {
                    drop(st);
                    match stop.sleep_budget(now, until - now) {
                        Some(secs) => clock.sleep(secs),
                        None => return false,
                    }
                    continue;
                }
                st.idle_until = None;
            }
            if st.written >= self.burst_writes {
                let idle = self.idles[st.next_idle % self.idles.len()];
                st.next_idle += 1;
                st.written = 0;
                st.idle_until = Some(now + idle);
                st.idle_spans.push((now, now + idle));
                continue;
            }
            st.written += ops;
            return true;
        }
    }

    /// Seconds of `[0, t)` not spent idle.
    pub fn burst_time_until(&self, t: f64) -> f64 {
        let st = self.state.lock();
        let idle: f64 = st.idle_spans.iter().map(|(a, b)| (b.min(t) - a.min(t)).max(0.0)).sum();
        t - idle
    }
}

/// Parses a comma list of seconds (`--burst_seconds=10` or `10,5,20`).
pub fn parse_seconds_list(flag: &str, text: &str) -> Result<Vec<f64>> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| BenchError::new(format!("flag --{flag}: {s:?} is not a number of seconds")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn thesis_sine() -> Sine {
        Sine {
            a: 75_000_000.0,
            b: 0.017942857,
            c: 4.71,
            d: 125_000_000.0,
            interval_secs: 10.0,
            finished_secs: Some(350.0),
            finished_rate: Some(10_000_000.0),
        }
    }

    #[test]
    fn sine_is_held_per_interval_then_finished() {
        let s = Schedule { base: Base::Sine(thesis_sine()), bursts: None };
        let f = |t: f64| 75e6 * (0.017942857 * t + 4.71).sin() + 125e6;
        for t in [0.0, 3.0, 9.99, 10.0, 47.5, 175.0, 349.9] {
            let step = (t / 10.0_f64).floor() * 10.0;
            assert_eq!(s.rate_at(t), Some(f(step)), "t={t}");
        }
        assert_eq!(s.rate_at(350.0), Some(10e6));
        assert_eq!(s.rate_at(1000.0), Some(10e6));
        assert_eq!(s.next_change(3.0), Some(10.0));
        assert_eq!(s.next_change(345.0), Some(350.0));
        assert_eq!(s.next_change(351.0), None);
        // The trough is ~50 MB/s at t=0, the peak ~200 MB/s half a period later.
        assert!((s.rate_at(0.0).unwrap() - 50e6).abs() < 0.1e6);
        assert!((s.rate_at(175.0).unwrap() - 200e6).abs() < 0.5e6);
    }

    #[test]
    fn negative_sine_pauses() {
        let sine = Sine {
            a: 10.0,
            b: 1.0,
            c: -std::f64::consts::FRAC_PI_2,
            d: 0.0,
            interval_secs: 1.0,
            finished_secs: None,
            finished_rate: None,
        };
        let s = Schedule { base: Base::Sine(sine), bursts: None };
        assert_eq!(s.rate_at(0.0), Some(0.0));
    }

    #[test]
    fn bursts_alternate_cyclically() {
        let b = TimeBursts::new(&[10.0], &[20.0]).unwrap();
        let s = Schedule { base: Base::Unlimited, bursts: Some(b) };
        assert_eq!(s.rate_at(0.0), None);
        assert_eq!(s.rate_at(9.9), None);
        assert_eq!(s.rate_at(10.0), Some(0.0));
        assert_eq!(s.rate_at(29.9), Some(0.0));
        assert_eq!(s.rate_at(30.0), None);
        assert_eq!(s.next_change(5.0), Some(10.0));
        assert_eq!(s.next_change(15.0), Some(30.0));
        assert!((s.burst_time_until(120.0) - 40.0).abs() < 1e-9);
        assert!((s.burst_time_until(35.0) - 15.0).abs() < 1e-9);
    }

    #[test]
    fn burst_lists_pair_up() {
        let b = TimeBursts::new(&[1.0, 2.0], &[3.0]).unwrap();
        let s = Schedule { base: Base::Fixed(5.0), bursts: Some(b) };
        // burst 1, idle 3, burst 2, idle 3, then again.
        assert_eq!(s.rate_at(0.5), Some(5.0));
        assert_eq!(s.rate_at(2.0), Some(0.0));
        assert_eq!(s.rate_at(4.5), Some(5.0));
        assert_eq!(s.rate_at(7.0), Some(0.0));
        assert_eq!(s.rate_at(9.5), Some(5.0));
        assert!((s.burst_time_until(9.0) - 3.0).abs() < 1e-9);
        assert!(TimeBursts::new(&[0.0], &[1.0]).is_err());
    }

    #[test]
    fn trace_parses_and_steps() {
        let t = Trace::parse("seconds,bytes_per_sec\n0,100\n# comment\n2.5, 300\n\n10,0\n", "t.csv").unwrap();
        assert_eq!(t.rows(), &[(0.0, 100.0), (2.5, 300.0), (10.0, 0.0)]);
        let s = Schedule { base: Base::Trace(t), bursts: None };
        assert_eq!(s.rate_at(1.0), Some(100.0));
        assert_eq!(s.rate_at(2.5), Some(300.0));
        assert_eq!(s.rate_at(99.0), Some(0.0));
        assert_eq!(s.next_change(1.0), Some(2.5));
        assert_eq!(s.average_rate(0.0, 5.0), Some((2.5 * 100.0 + 2.5 * 300.0) / 5.0));
    }

    #[test]
    fn bad_trace_names_file_and_line() {
        let e = Trace::parse("0,100\n1,abc\n", "bad.csv").unwrap_err().to_string();
        assert!(e.contains("bad.csv") && e.contains("line 2"), "{e}");
        let e = Trace::parse("0,100\n0,50\n", "x.csv").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("increase"), "{e}");
        let e = Trace::parse("0,-5\n", "x.csv").unwrap_err().to_string();
        assert!(e.contains("non-negative"), "{e}");
        let e = Trace::parse("0,1,2\n", "x.csv").unwrap_err().to_string();
        assert!(e.contains("2 fields"), "{e}");
        assert!(Trace::parse("# nothing\n", "x.csv").is_err());
    }

    #[test]
    fn count_bursts_idle_after_n_writes() {
        use crate::clock::{Clock, ManualClock};
        use crate::limiter::Stop;
        let clock = ManualClock::new();
        let gate = CountBursts::new(3, &[2.0, 5.0]).unwrap();
        for _ in 0..3 {
            assert!(gate.before_write(1, &clock, &Stop::default()));
        }
        assert_eq!(clock.now(), 0.0);
        assert!(gate.before_write(1, &clock, &Stop::default()));
        assert!((clock.now() - 2.0).abs() < 1e-9, "first idle is 2 s, now {}", clock.now());
        assert!((gate.burst_time_until(3.0) - 1.0).abs() < 1e-9);
        assert!(gate.before_write(2, &clock, &Stop::default()));
        assert!(gate.before_write(1, &clock, &Stop::default()));
        assert!((clock.now() - 7.0).abs() < 1e-9, "second idle is 5 s, now {}", clock.now());
        let stop = Stop { deadline: Some(8.0), flag: None };
        assert!(gate.before_write(3, &clock, &stop));
        assert!(!gate.before_write(1, &clock, &stop), "the deadline ends the idle wait");
        assert!(CountBursts::new(0, &[1.0]).is_err());
    }

    #[test]
    fn seconds_lists_parse() {
        assert_eq!(parse_seconds_list("burst_seconds", "10, 5,20").unwrap(), vec![10.0, 5.0, 20.0]);
        let e = parse_seconds_list("idle_seconds", "1,x").unwrap_err().to_string();
        assert!(e.contains("idle_seconds") && e.contains("\"x\""), "{e}");
    }
}
