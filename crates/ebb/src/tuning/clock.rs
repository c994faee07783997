//! The time source of the tuning layer.
//!
//! Every tuning component reads time through [`Clock`], never through
//! `Instant::now()`, so tests drive time by hand and never sleep.
//!
//! - [`SystemClock`]: monotonic microseconds since a process-wide origin, so two
//!   instances agree and a timestamp taken through one (say, the time of the
//!   last write) can be compared with another.
//! - [`ManualClock`]: time moves only by [`ManualClock::advance`], and
//!   [`Clock::sleep_micros`] advances it by the slept amount instead of
//!   blocking. Code that sleeps until a deadline therefore returns at exactly
//!   that deadline, in a single thread, deterministically.
//!
//! Thread safety: both clocks are `Send + Sync`; [`ManualClock`] is a pair of
//! atomics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A monotonic time source in microseconds, with a way to wait.
pub trait Clock: Send + Sync {
    /// Monotonic time in microseconds. Only differences are meaningful.
    fn now_micros(&self) -> u64;

    /// [`Clock::now_micros`] to a few milliseconds' precision, possibly a
    /// little behind it, for timestamps taken on a hot path (the write
    /// path stamps the time of every client write). Never ahead of
    /// `now_micros` taken after it.
    fn now_micros_coarse(&self) -> u64 {
        self.now_micros()
    }

    /// Waits `us` microseconds (or, for a manual clock, moves time forward by `us`).
    fn sleep_micros(&self, us: u64);
}

/// The real clock: monotonic microseconds since the first use of any
/// `SystemClock` in the process; `sleep_micros` puts the thread to sleep.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    /// A handle on the process's monotonic clock.
    pub fn new() -> SystemClock {
        SystemClock
    }
}

/// The process-wide origin, as an `Instant` and (on Linux) as the
/// `CLOCK_MONOTONIC` nanoseconds read at the same moment, which is the
/// clock `Instant` reads there and the one `CLOCK_MONOTONIC_COARSE` lags.
fn process_origin() -> (Instant, u64) {
    static ORIGIN: OnceLock<(Instant, u64)> = OnceLock::new();
    *ORIGIN.get_or_init(|| (Instant::now(), monotonic_nanos(false).unwrap_or(0)))
}

/// `CLOCK_MONOTONIC` (or its coarse variant: the time of the last tick, a
/// read of one kernel word, where the fine clock reads the TSC: on this
/// project's test machine 6-7 ns against 31-33 ns idle and up to 72 ns
/// beside a benchmark, 1.5-3.5 % of a 2 µs write) in nanoseconds; `None`
/// off Linux.
fn monotonic_nanos(coarse: bool) -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        let id = if coarse { libc::CLOCK_MONOTONIC_COARSE } else { libc::CLOCK_MONOTONIC };
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid, writable timespec for the call.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::clock_gettime(id, &mut ts) };
        if rc == 0 {
            let secs = u64::try_from(ts.tv_sec).ok()?;
            let nanos = u64::try_from(ts.tv_nsec).ok()?;
            return secs.checked_mul(1_000_000_000)?.checked_add(nanos);
        }
        None
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = coarse;
        None
    }
}

impl Clock for SystemClock {
    fn now_micros(&self) -> u64 {
        u64::try_from(process_origin().0.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    fn now_micros_coarse(&self) -> u64 {
        let (origin, origin_ns) = process_origin();
        match monotonic_nanos(true) {
            // The coarse clock may read a tick behind the origin itself.
            Some(ns) if origin_ns > 0 => ns.saturating_sub(origin_ns) / 1000,
            _ => u64::try_from(origin.elapsed().as_micros()).unwrap_or(u64::MAX),
        }
    }

    fn sleep_micros(&self, us: u64) {
        if us > 0 {
            std::thread::sleep(Duration::from_micros(us));
        }
    }
}

/// A clock that moves only when told to. Sleeping on it advances it.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicU64,
    sleeps: AtomicU64,
    slept: AtomicU64,
}

impl ManualClock {
    /// A manual clock reading `start_micros`.
    pub fn new(start_micros: u64) -> ManualClock {
        ManualClock { now: AtomicU64::new(start_micros), sleeps: AtomicU64::new(0), slept: AtomicU64::new(0) }
    }

    /// Moves time forward by `us` microseconds.
    pub fn advance(&self, us: u64) {
        self.now.fetch_add(us, Ordering::SeqCst);
    }

    /// Number of `sleep_micros` calls with a non-zero duration so far: a test
    /// uses it to show that a caller never waited.
    pub fn sleeps(&self) -> u64 {
        self.sleeps.load(Ordering::SeqCst)
    }

    /// Total microseconds advanced by `sleep_micros` (not by `advance`).
    pub fn slept_micros(&self) -> u64 {
        self.slept.load(Ordering::SeqCst)
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }

    fn sleep_micros(&self, us: u64) {
        if us > 0 {
            self.sleeps.fetch_add(1, Ordering::SeqCst);
            self.slept.fetch_add(us, Ordering::SeqCst);
            self.now.fetch_add(us, Ordering::SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(1_000);
        assert_eq!(clock.now_micros(), 1_000);
        assert_eq!(clock.now_micros(), 1_000);
        clock.advance(250);
        assert_eq!(clock.now_micros(), 1_250);
        assert_eq!(clock.sleeps(), 0);
    }

    #[test]
    fn sleeping_on_a_manual_clock_advances_it() {
        let clock = ManualClock::new(0);
        clock.sleep_micros(0);
        assert_eq!((clock.now_micros(), clock.sleeps()), (0, 0));
        clock.sleep_micros(100_000);
        clock.sleep_micros(5);
        assert_eq!(clock.now_micros(), 100_005);
        assert_eq!(clock.sleeps(), 2);
        assert_eq!(clock.slept_micros(), 100_005);
    }

    #[test]
    fn system_clocks_share_an_origin_and_never_go_back() {
        let a = SystemClock::new();
        let t0 = a.now_micros();
        let b = SystemClock::new();
        let t1 = b.now_micros();
        let t2 = a.now_micros();
        assert!(t0 <= t1 && t1 <= t2);
    }

    /// The coarse reading is on the same time line as the fine one: never
    /// ahead of a fine reading taken after it, and behind one taken before
    /// it by at most a clock tick (bounded here at 100 ms).
    #[test]
    fn the_coarse_system_clock_lags_the_fine_one_by_at_most_a_tick() {
        let clock = SystemClock::new();
        for _ in 0..1000 {
            let before = clock.now_micros();
            let coarse = clock.now_micros_coarse();
            let after = clock.now_micros();
            assert!(coarse <= after, "coarse {coarse} ahead of {after}");
            assert!(before.saturating_sub(coarse) <= 100_000, "coarse {coarse} far behind {before}");
        }
    }
}
