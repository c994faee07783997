//! The time source of the write limiter and the load shapes, abstracted so
//! tests drive them with a [`ManualClock`] instead of waiting.
//!
//! Times are seconds (f64) since the clock's epoch: for [`SystemClock`] the
//! moment it was made, which the runner makes at the start of each benchmark.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A source of time that can also sleep.
pub trait Clock: Send + Sync {
    /// Seconds since this clock's epoch.
    fn now(&self) -> f64;
    /// Blocks for `secs` seconds (a manual clock advances instead).
    fn sleep(&self, secs: f64);
}

/// Real time, from the moment of creation.
#[derive(Debug)]
pub struct SystemClock {
    epoch: Instant,
}

impl SystemClock {
    /// A clock whose time 0 is now.
    pub fn new() -> SystemClock {
        SystemClock { epoch: Instant::now() }
    }

    /// A clock whose time 0 is `epoch`.
    pub fn starting_at(epoch: Instant) -> SystemClock {
        SystemClock { epoch }
    }

    /// The instant of time 0.
    pub fn epoch(&self) -> Instant {
        self.epoch
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }
    fn sleep(&self, secs: f64) {
        if secs > 0.0 && secs.is_finite() {
            std::thread::sleep(Duration::from_secs_f64(secs));
        }
    }
}

/// A clock that moves only when told to or when someone sleeps on it: a
/// sleeper advances the time by exactly the requested amount, so a single
/// thread observes a perfectly punctual world.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: Mutex<f64>,
}

impl ManualClock {
    /// A clock at time 0.
    pub fn new() -> ManualClock {
        ManualClock::default()
    }

    /// Moves the time forward by `secs`.
    pub fn advance(&self, secs: f64) {
        *self.now.lock() += secs.max(0.0);
    }

    /// Sets the time (never backwards).
    pub fn set(&self, secs: f64) {
        let mut now = self.now.lock();
        if secs > *now {
            *now = secs;
        }
    }
}

impl Clock for ManualClock {
    fn now(&self) -> f64 {
        *self.now.lock()
    }
    fn sleep(&self, secs: f64) {
        if secs.is_finite() {
            self.advance(secs);
        }
    }
}
