//! The database's clock (RocksDB's `SystemClock`), set with
//! [`Options::clock`](crate::Options::clock): every decision the engine
//! takes on time reads it, so a test swaps in a [`ManualClock`] and moves
//! time by hand instead of sleeping.
//!
//! Two readings, as RocksDB has: wall-clock time ([`Clock::now_micros`],
//! [`Clock::now_secs`]: what a TTL database stamps its values with and
//! judges them expired by, and what tables' `creation_time` is stamped
//! with and file ages are judged by), and monotonic time ([`Clock::monotonic`]: the
//! tuner's windows and idle detection, the rate limiter's refills, the
//! pacing of delayed writes, the period of the statistics dump). Timers
//! that only measure how long something took (latency histograms, a job's
//! `micros`, stall time) read `Instant` instead: they report, they decide
//! nothing.
//!
//! - [`SystemClock`], the default: the system's wall clock, and a
//!   monotonic clock from a process-wide origin (so times taken through two
//!   instances compare); sleeping puts the thread to sleep.
//! - [`ManualClock`]: time moves only by [`ManualClock::advance`], or when
//!   a thread sleeps on it ([`Clock::sleep_for`] advances it by the time
//!   slept instead of blocking: code that sleeps until a deadline returns at
//!   exactly that deadline, deterministically).
//!
//! Thread safety: both clocks are `Send + Sync`; [`ManualClock`] is a few
//! atomics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where the engine reads time (RocksDB's `SystemClock`). Implement it to
/// run a database on another time line; [`SystemClock`] and
/// [`ManualClock`] are the two Ebb provides.
pub trait Clock: Send + Sync {
    /// Wall-clock time: microseconds since the Unix epoch (RocksDB's
    /// `NowMicros`). May jump; only stamps and ages are taken from it.
    fn now_micros(&self) -> u64;

    /// Wall-clock time: whole seconds since the Unix epoch (RocksDB's
    /// `GetCurrentTime`).
    fn now_secs(&self) -> u64 {
        self.now_micros() / 1_000_000
    }

    /// Monotonic time since an origin of the clock's choosing (RocksDB's
    /// `NowNanos`): never goes back; only differences mean anything.
    fn monotonic(&self) -> Duration;

    /// [`Clock::monotonic`] to a few milliseconds, for readings taken on a
    /// hot path (the write path stamps the time of every client write for
    /// idle detection): possibly a little behind, never ahead of a
    /// `monotonic` reading taken after it. By default `monotonic` itself.
    fn monotonic_coarse(&self) -> Duration {
        self.monotonic()
    }

    /// Waits `d` of this clock's time (RocksDB's `SleepForMicroseconds`);
    /// the rate limiter waits for its next refill so.
    fn sleep_for(&self, d: Duration);

    /// How long, in real time, a thread that waits for `d` of this clock's
    /// time (a delayed write, the tuner between two looks, the statistics
    /// dump) blocks before it reads the clock again; the engine also wakes
    /// it early when what it waits on changes. A clock that follows real
    /// time returns `d`, the default; a clock that jumps returns less, so
    /// that a jump is seen promptly ([`ManualClock`]: at most a millisecond).
    fn real_wait(&self, d: Duration) -> Duration {
        d
    }
}

/// Microseconds in `d`, saturated (the tuning layer counts in microseconds).
pub(crate) fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// The real clock: the system's wall clock, and monotonic time since the
/// first use of any `SystemClock` in the process; sleeping puts the thread
/// to sleep.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    /// A handle on the system's clocks.
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
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, micros)
    }

    fn monotonic(&self) -> Duration {
        process_origin().0.elapsed()
    }

    fn monotonic_coarse(&self) -> Duration {
        let (origin, origin_ns) = process_origin();
        match monotonic_nanos(true) {
            // The coarse clock may read a tick behind the origin itself.
            Some(ns) if origin_ns > 0 => Duration::from_nanos(ns.saturating_sub(origin_ns)),
            _ => origin.elapsed(),
        }
    }

    fn sleep_for(&self, d: Duration) {
        if !d.is_zero() {
            std::thread::sleep(d);
        }
    }
}

/// A clock that moves only when told to: by [`ManualClock::advance`], or by
/// a thread sleeping on it, which advances it by the time slept instead of
/// blocking. Its wall-clock and monotonic readings move together. A thread
/// waiting on it for some time (a delayed write, the tuner) looks at it
/// again within a millisecond of real time ([`Clock::real_wait`]).
///
/// A TTL database whose value expires without the test waiting:
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use ebb::fs::MemFs;
/// use ebb::{Db, ManualClock, Options};
///
/// let clock = Arc::new(ManualClock::new(Duration::from_secs(1_700_000_000)));
/// let mut options = Options::default().with_fs(Arc::new(MemFs::new())).with_clock(clock.clone());
/// options.create_if_missing = true;
/// let db = Db::open_with_ttl("/db", options, 60)?;
/// db.put(b"k", b"v")?;
/// clock.advance(Duration::from_secs(60));
/// db.compact_range(None, None)?;
/// assert_eq!(db.get(b"k")?, Some(b"v".to_vec()), "60 s old: not expired yet");
/// clock.advance(Duration::from_secs(1));
/// db.compact_range(None, None)?;
/// assert_eq!(db.get(b"k")?, None, "61 s old: dropped by the compaction");
/// # Ok::<(), ebb::Error>(())
/// ```
#[derive(Debug, Default)]
pub struct ManualClock {
    /// Wall-clock microseconds since the Unix epoch at monotonic zero.
    start_micros: u64,
    /// Monotonic nanoseconds.
    now_nanos: AtomicU64,
    sleeps: AtomicU64,
    slept_nanos: AtomicU64,
}

impl ManualClock {
    /// A manual clock whose wall-clock time reads `since_epoch` after the
    /// Unix epoch, and whose monotonic time reads zero.
    pub fn new(since_epoch: Duration) -> ManualClock {
        ManualClock { start_micros: micros(since_epoch), ..ManualClock::default() }
    }

    /// Moves time forward by `d`.
    pub fn advance(&self, d: Duration) {
        self.now_nanos.fetch_add(nanos(d), Ordering::SeqCst);
    }

    /// Number of [`Clock::sleep_for`] calls with a non-zero duration so far:
    /// a test uses it to show that a caller waited, or never did.
    pub fn sleeps(&self) -> u64 {
        self.sleeps.load(Ordering::SeqCst)
    }

    /// Total time advanced by [`Clock::sleep_for`] (not by `advance`).
    pub fn slept(&self) -> Duration {
        Duration::from_nanos(self.slept_nanos.load(Ordering::SeqCst))
    }
}

/// Nanoseconds in `d`, saturated.
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Clock for ManualClock {
    fn now_micros(&self) -> u64 {
        self.start_micros.saturating_add(self.now_nanos.load(Ordering::SeqCst) / 1000)
    }

    fn monotonic(&self) -> Duration {
        Duration::from_nanos(self.now_nanos.load(Ordering::SeqCst))
    }

    fn sleep_for(&self, d: Duration) {
        if !d.is_zero() {
            self.sleeps.fetch_add(1, Ordering::SeqCst);
            self.slept_nanos.fetch_add(nanos(d), Ordering::SeqCst);
            self.now_nanos.fetch_add(nanos(d), Ordering::SeqCst);
        }
    }

    /// A millisecond at most: the time a waiter may take to see an `advance`.
    fn real_wait(&self, d: Duration) -> Duration {
        d.min(Duration::from_millis(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(Duration::from_secs(1_700_000_000));
        assert_eq!(clock.monotonic(), Duration::ZERO);
        assert_eq!((clock.now_secs(), clock.now_micros()), (1_700_000_000, 1_700_000_000_000_000));
        assert_eq!(clock.monotonic(), Duration::ZERO);
        clock.advance(Duration::from_micros(2_500_250));
        assert_eq!(clock.monotonic(), Duration::from_micros(2_500_250));
        assert_eq!((clock.now_secs(), clock.now_micros()), (1_700_000_002, 1_700_000_002_500_250));
        assert_eq!(clock.sleeps(), 0);
        assert_eq!(clock.real_wait(Duration::from_secs(100)), Duration::from_millis(1));
    }

    #[test]
    fn sleeping_on_a_manual_clock_advances_it() {
        let clock = ManualClock::new(Duration::ZERO);
        clock.sleep_for(Duration::ZERO);
        assert_eq!((clock.monotonic(), clock.sleeps()), (Duration::ZERO, 0));
        clock.sleep_for(Duration::from_millis(100));
        clock.sleep_for(Duration::from_micros(5));
        assert_eq!(clock.monotonic(), Duration::from_micros(100_005));
        assert_eq!(clock.now_micros(), 100_005);
        assert_eq!(clock.sleeps(), 2);
        assert_eq!(clock.slept(), Duration::from_micros(100_005));
    }

    #[test]
    fn system_clocks_share_an_origin_and_never_go_back() {
        let a = SystemClock::new();
        let t0 = a.monotonic();
        let b = SystemClock::new();
        let t1 = b.monotonic();
        let t2 = a.monotonic();
        assert!(t0 <= t1 && t1 <= t2);
        assert_eq!(a.real_wait(Duration::from_secs(100)), Duration::from_secs(100));
    }

    /// The system clock's wall-clock reading is the system's time.
    #[test]
    fn the_system_clock_reads_the_systems_wall_clock() {
        let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let read = SystemClock::new().now_micros();
        let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        assert!(micros(before) <= read && read <= micros(after), "{before:?} {read} {after:?}");
        assert_eq!(SystemClock::new().now_secs(), SystemClock::new().now_micros() / 1_000_000);
    }

    /// The coarse reading is on the same time line as the fine one: never
    /// ahead of a fine reading taken after it, and behind one taken before
    /// it by at most a clock tick (bounded here at 100 ms).
    #[test]
    fn the_coarse_system_clock_lags_the_fine_one_by_at_most_a_tick() {
        let clock = SystemClock::new();
        for _ in 0..1000 {
            let before = clock.monotonic();
            let coarse = clock.monotonic_coarse();
            let after = clock.monotonic();
            assert!(coarse <= after, "coarse {coarse:?} ahead of {after:?}");
            assert!(
                before.saturating_sub(coarse) <= Duration::from_millis(100),
                "coarse {coarse:?} far behind {before:?}"
            );
        }
    }
}
