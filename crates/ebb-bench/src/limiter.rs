//! The write limiter: a token bucket shared by all writer threads whose refill
//! rate follows a [`Schedule`] (fixed, sine, trace, bursts).
//!
//! Accounting is cumulative, so concurrent writers are served in the order
//! they asked: `granted` counts every unit (byte or op) handed out or
//! promised, `refilled` the units the schedule has made available. A request
//! takes the next `n` units and waits until `refilled` reaches them. Credit
//! saved while nobody writes is capped at 100 ms worth of the current rate
//! (the refill period of RocksDB's `GenericRateLimiter`, which db_bench uses),
//! so an idle writer cannot burst far above the cap later. The refill is
//! integrated exactly over the schedule's steps, so the admitted volume over
//! any span equals the integral of the cap, give or take one request.
//!
//! Thread-safety: one mutex around the counters; waiting happens outside it,
//! in slices of at most 50 ms so that a stop request is noticed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::clock::Clock;
use crate::shape::Schedule;

/// Credit kept while idle, in seconds of the current rate.
const REFILL_PERIOD_SECS: f64 = 0.1;
/// Longest single sleep, so that stop requests and rate changes are seen.
const MAX_SLEEP_SECS: f64 = 0.05;

/// When a waiting writer should give up: at a deadline (clock time) or when a flag is raised.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stop<'a> {
    /// Give up at this clock time.
    pub deadline: Option<f64>,
    /// Give up once this is true.
    pub flag: Option<&'a AtomicBool>,
}

impl Stop<'_> {
    /// How long one may sleep now, at most `want` seconds; `None` means stop now.
    pub fn sleep_budget(&self, now: f64, want: f64) -> Option<f64> {
        if self.flag.is_some_and(|f| f.load(Ordering::Relaxed)) {
            return None;
        }
        let mut secs = want.min(MAX_SLEEP_SECS);
        if let Some(d) = self.deadline {
            if now >= d {
                return None;
            }
            secs = secs.min(d - now);
        }
        Some(secs.max(0.0))
    }
}

#[derive(Debug)]
struct Bucket {
    granted: f64,
    refilled: f64,
    last: f64,
}

/// A token bucket whose rate follows a schedule.
pub struct RateLimiter {
    schedule: Schedule,
    clock: Arc<dyn Clock>,
    bucket: Mutex<Bucket>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter").field("schedule", &self.schedule).finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// A limiter following `schedule` on `clock`, starting with no credit.
    pub fn new(schedule: Schedule, clock: Arc<dyn Clock>) -> RateLimiter {
        let now = clock.now();
        RateLimiter { schedule, clock, bucket: Mutex::new(Bucket { granted: 0.0, refilled: 0.0, last: now }) }
    }

    /// The schedule.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    fn refill(&self, b: &mut Bucket, now: f64) {
        let mut t = b.last;
        while t < now {
            let end = self.schedule.next_change(t).map_or(now, |c| c.min(now));
            match self.schedule.rate_at(t) {
                None => b.refilled = b.refilled.max(b.granted),
                Some(rate) => {
                    b.refilled += rate * (end - t);
                    b.refilled = b.refilled.min(b.granted + rate * REFILL_PERIOD_SECS);
                }
            }
            t = end;
        }
        if now > b.last {
            b.last = now;
        }
    }

    /// Takes `units` (bytes or ops), waiting as the schedule demands. Returns
    /// false if `stop` fired while waiting (the units are then forfeited).
    pub fn acquire(&self, units: u64, stop: &Stop<'_>) -> bool {
        let mut b = self.bucket.lock();
        let now = self.clock.now();
        self.refill(&mut b, now);
        b.granted += units as f64;
        let target = b.granted;
        loop {
            let now = self.clock.now();
            self.refill(&mut b, now);
            let rate = self.schedule.rate_at(now);
            if rate.is_none() {
                b.refilled = b.refilled.max(b.granted);
            }
            let deficit = target - b.refilled;
            if deficit <= 1e-6 {
                return true;
            }
            let mut wait = match rate {
                Some(r) if r > 0.0 => deficit / r,
                _ => f64::INFINITY,
            };
            if let Some(change) = self.schedule.next_change(now) {
                wait = wait.min(change - now);
            }
            let Some(secs) = stop.sleep_budget(now, wait) else {
                return false;
            };
            drop(b);
            self.clock.sleep(secs.max(1e-9));
            b = self.bucket.lock();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::shape::{Base, Sine, TimeBursts};

    fn limiter(s: Schedule) -> (Arc<ManualClock>, RateLimiter) {
        let clock = Arc::new(ManualClock::new());
        let l = RateLimiter::new(s, clock.clone());
        (clock, l)
    }

    #[test]
    fn fixed_rate_paces_exactly() {
        let (clock, l) = limiter(Schedule::fixed(1000.0));
        for _ in 0..100 {
            assert!(l.acquire(100, &Stop::default()));
        }
        // 10 000 bytes at 1000 B/s, starting with no credit.
        assert!((clock.now() - 10.0).abs() < 1e-6, "{}", clock.now());
    }

    #[test]
    fn idle_credit_is_capped_at_one_refill_period() {
        let (clock, l) = limiter(Schedule::fixed(1000.0));
        clock.advance(60.0);
        // 100 bytes of credit (0.1 s), then pacing.
        assert!(l.acquire(100, &Stop::default()));
        assert!((clock.now() - 60.0).abs() < 1e-9);
        assert!(l.acquire(1000, &Stop::default()));
        assert!((clock.now() - 61.0).abs() < 1e-6, "{}", clock.now());
    }

    #[test]
    fn unlimited_never_waits() {
        let (clock, l) = limiter(Schedule::unlimited());
        for _ in 0..1000 {
            assert!(l.acquire(1 << 20, &Stop::default()));
        }
        assert_eq!(clock.now(), 0.0);
    }

    #[test]
    fn sine_admits_the_integral_of_the_cap() {
        let sine = Sine {
            a: 500.0,
            b: 2.0 * std::f64::consts::PI / 20.0,
            c: 0.0,
            d: 1000.0,
            interval_secs: 1.0,
            finished_secs: None,
            finished_rate: None,
        };
        let expected_step = |k: u32| sine.f(f64::from(k)).max(0.0);
        let (clock, l) = limiter(Schedule { base: Base::Sine(sine.clone()), bursts: None });
        // A greedy writer of 10-byte requests; count bytes admitted per second.
        let mut per_second = [0u64; 20];
        loop {
            let t = clock.now();
            if t >= 20.0 {
                break;
            }
            assert!(l.acquire(10, &Stop::default()));
            let sec = clock.now().floor() as usize;
            if sec < 20 {
                per_second[sec] += 10;
            }
        }
        for (k, got) in per_second.iter().enumerate() {
            let want = expected_step(k as u32);
            assert!((*got as f64 - want).abs() <= 20.0, "second {k}: admitted {got}, f = {want}");
        }
    }

    #[test]
    fn bursts_block_writes_while_idle() {
        let s = Schedule { base: Base::Unlimited, bursts: Some(TimeBursts::new(&[1.0], &[4.0]).unwrap()) };
        let (clock, l) = limiter(s);
        clock.set(1.5);
        assert!(l.acquire(1, &Stop::default()));
        // Waited for the next burst at t=5.
        assert!((clock.now() - 5.0).abs() < 1e-6, "{}", clock.now());
    }

    #[test]
    fn stop_deadline_ends_the_wait() {
        let (clock, l) = limiter(Schedule::fixed(1.0));
        let stop = Stop { deadline: Some(2.0), flag: None };
        assert!(!l.acquire(100, &stop));
        assert!((clock.now() - 2.0).abs() < 1e-6);
        let flag = AtomicBool::new(true);
        assert!(!l.acquire(100, &Stop { deadline: None, flag: Some(&flag) }));
    }

    #[test]
    fn requests_are_served_in_order() {
        let (clock, l) = limiter(Schedule::fixed(100.0));
        assert!(l.acquire(100, &Stop::default()));
        assert!((clock.now() - 1.0).abs() < 1e-6);
        assert!(l.acquire(50, &Stop::default()));
        assert!((clock.now() - 1.5).abs() < 1e-6);
    }
}
