//! A token-bucket rate limiter for background writes, with RocksDB's
//! `GenericRateLimiter` semantics (util/rate_limiter.cc; thesis §3.3.4-3.3.5)
//! and the per-priority drain counts the thesis adds for its compaction tuner
//! (§3.3.6, Fig. 3.8).
//!
//! Owns: the bucket (`available` bytes, refilled with `rate * refill_period`
//! bytes once per refill period), one FIFO queue per rate-limited priority,
//! and the counters the tuners read.
//!
//! Rules, each as RocksDB has it unless marked *Ebb*:
//! 1. A request is granted at once when nobody is queued and the bucket holds
//!    all its bytes; otherwise it joins the queue of its priority.
//! 2. A refill happens when a waiting request finds the refill time reached:
//!    the next refill is one period later; the bucket gains one period's bytes
//!    unless it already holds at least that many (so at most two periods' worth
//!    ever accumulate). Queues are served front first, high priority first,
//!    except that with probability `1/fairness` low priority goes first. A front
//!    request larger than what is left takes the rest and keeps waiting
//!    (partial grant), so no request starves when the rate drops.
//! 3. A *drain* is a refill period in which a request had to wait for the next
//!    refill; at most one per period (RocksDB `num_drains_`). The thesis counts
//!    it for the priority of the request that waits for the refill timer; *Ebb*
//!    makes that choice deterministic: the request that first had to wait in
//!    the period, and, when requests are still queued right after a refill, the
//!    highest priority still queued (RocksDB wakes the front of the high queue
//!    first). So `drains(High) + drains(Low)` equals RocksDB's `num_drains_`.
//! 4. `IoPriority::User` (client and WAL writes) is counted and never blocked,
//!    and takes no tokens: RocksDB "does not enforce rate limit for anything
//!    other than flush and compaction" (thesis §3.3.4). The counters let the
//!    adaptive tuner see the foreground's share of the disk.
//! 5. Auto-tuned mode starts at half the configured rate, which becomes the
//!    ceiling `max`. On the first request at least 100 refill periods after the
//!    last tune, `Tune()` computes `drained% = drains * 100 / elapsed periods`
//!    (periods rounded up) and sets the rate to `max/20` when `drained% == 0`,
//!    to `max(max/20, rate * 100/105)` below 50 %, to `min(max, rate * 105/100)`
//!    above 90 %, and leaves it otherwise (thesis Fig. 3.7).
//! 6. [`RateLimiter::request`] splits a request into chunks of at most one
//!    refill's bytes (RocksDB's `RequestToken` clamps to `GetSingleBurstBytes`
//!    and its callers loop); each chunk counts as one request.
//!
//! Time comes from a [`Clock`]. One waiting thread at a time sleeps until the
//! next refill, then refills and wakes the others; on a [`ManualClock`] that
//! sleep advances time, so single-threaded tests run without real sleeps. The
//! non-blocking API ([`RateLimiter::submit`], [`RateLimiter::is_granted`],
//! [`RateLimiter::refill_if_due`]) drives the same state machine by hand.
//!
//! Thread safety: all state sits behind one `parking_lot` mutex; waiters park
//! on one condition variable. Safe to share through an `Arc`.
//!
//! [`Clock`]: crate::clock::Clock
//! [`ManualClock`]: crate::clock::ManualClock

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::clock::{micros, Clock};
use crate::error::{Error, Result};

/// Refill periods between two auto-tunes (RocksDB `kRefillsPerTune`).
pub const REFILLS_PER_TUNE: u64 = 100;
/// Auto-tune lowers the rate below this drained percentage (RocksDB `kLowWatermarkPct`).
pub const TUNE_LOW_WATERMARK_PCT: u64 = 50;
/// Auto-tune raises the rate above this drained percentage (RocksDB `kHighWatermarkPct`).
pub const TUNE_HIGH_WATERMARK_PCT: u64 = 90;
/// Auto-tune's multiplicative step in percent (RocksDB `kAdjustFactorPct`).
pub const TUNE_ADJUST_FACTOR_PCT: u64 = 5;
/// Auto-tune keeps the rate in `[max / 20, max]` (RocksDB `kAllowedRangeFactor`).
pub const TUNE_ALLOWED_RANGE_FACTOR: u64 = 20;
/// Smallest refill, so a tiny rate still lets a block through (RocksDB `kMinRefillBytesPerPeriod`).
pub const MIN_REFILL_BYTES_PER_PERIOD: u64 = 100;
/// RocksDB caps `fairness` at 100.
pub const MAX_FAIRNESS: u32 = 100;

/// Who is asking for bytes. RocksDB's `Env::IOPriority`, reduced to what Ebb uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IoPriority {
    /// Compaction writes (RocksDB `IO_LOW`).
    Low,
    /// Flush writes (RocksDB `IO_HIGH`).
    High,
    /// Client and WAL writes: counted, never blocked, take no tokens.
    User,
}

impl IoPriority {
    fn index(self) -> usize {
        match self {
            IoPriority::Low => 0,
            IoPriority::High => 1,
            IoPriority::User => 2,
        }
    }
}

/// Configuration of a [`RateLimiter`] (RocksDB `NewGenericRateLimiter` arguments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimiterOptions {
    /// Bytes per second for flush and compaction together; in auto-tuned mode
    /// the ceiling, and the limiter starts at half of it. RocksDB `rate_bytes_per_sec`.
    pub rate_bytes_per_sec: u64,
    /// How often the bucket is refilled; default 100 ms. Larger values allow
    /// larger bursts, smaller ones cost more wake-ups. RocksDB `refill_period_us`.
    pub refill_period_us: u64,
    /// Low priority is served first at a refill with probability `1/fairness`,
    /// so compaction is not starved by a steady stream of flushes; default 10,
    /// capped at 100. RocksDB `fairness`.
    pub fairness: u32,
    /// Tune the rate from the drain ratio every 100 refills. RocksDB `auto_tuned`; default off.
    pub auto_tuned: bool,
    /// Seed of the fairness coin. RocksDB seeds with the time of day; Ebb uses a
    /// fixed default so runs are reproducible.
    pub seed: u32,
}

impl RateLimiterOptions {
    /// RocksDB's defaults around `rate_bytes_per_sec`: 100 ms refills, fairness 10, not auto-tuned.
    pub fn new(rate_bytes_per_sec: u64) -> RateLimiterOptions {
        RateLimiterOptions { rate_bytes_per_sec, refill_period_us: 100_000, fairness: 10, auto_tuned: false, seed: 301 }
    }
}

/// Counters of one priority. All cumulative since the limiter was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PriorityStats {
    /// Bytes granted (for `User`: bytes reported).
    pub bytes_through: u64,
    /// Requests made (chunks, for split requests).
    pub requests: u64,
    /// Refill periods drained by this priority (rule 3 of the module contract).
    pub drains: u64,
}

/// A snapshot of a limiter's state and counters, with the time it was taken.
/// Two snapshots give a tuner its per-interval figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimiterStats {
    /// Clock time of the snapshot, microseconds.
    pub now_micros: u64,
    /// Refill period, microseconds.
    pub refill_period_us: u64,
    /// Current rate, bytes per second.
    pub bytes_per_second: u64,
    /// Ceiling of the rate (the configured rate; in auto-tuned mode the tuning range's top).
    pub max_bytes_per_second: u64,
    /// Refills performed.
    pub refills: u64,
    /// Auto-tunes performed.
    pub tunes: u64,
    /// Requests queued now.
    pub waiting: usize,
    /// Counters of low priority (compaction).
    pub low: PriorityStats,
    /// Counters of high priority (flush).
    pub high: PriorityStats,
    /// Counters of user priority (client and WAL writes).
    pub user: PriorityStats,
}

impl RateLimiterStats {
    /// The counters of one priority.
    #[cfg(test)]
    pub fn priority(&self, pri: IoPriority) -> PriorityStats {
        match pri {
            IoPriority::Low => self.low,
            IoPriority::High => self.high,
            IoPriority::User => self.user,
        }
    }

    /// All drains (RocksDB `num_drains_`): high plus low.
    #[cfg(test)]
    pub fn drains(&self) -> u64 {
        self.high.drains + self.low.drains
    }
}

/// A queued request, from [`RateLimiter::submit`]. Ask [`RateLimiter::is_granted`].
#[derive(Debug, PartialEq, Eq)]
pub struct Ticket {
    id: u64,
    pri: IoPriority,
}

impl Ticket {
    /// The priority the request was made at.
    #[cfg(test)]
    pub fn priority(&self) -> IoPriority {
        self.pri
    }
}

/// What [`RateLimiter::submit`] did with a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Submission {
    /// All bytes granted now.
    Granted,
    /// Queued; granted at a later refill.
    Queued(Ticket),
    /// The limiter was closed; nothing was granted.
    Closed,
}

/// Token-bucket limiter of flush and compaction writes. See the module contract.
pub struct RateLimiter {
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    wakeup: Condvar,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter").field("stats", &self.stats()).finish()
    }
}

struct Pending {
    id: u64,
    bytes: u64,
    remaining: u64,
}

/// Park-Miller generator, as LevelDB's and RocksDB's `Random`, for the fairness coin.
struct Random {
    seed: u32,
}

impl Random {
    const M: u32 = 2_147_483_647;

    fn new(seed: u32) -> Random {
        let seed = seed & Random::M;
        Random { seed: if seed == 0 || seed == Random::M { 1 } else { seed } }
    }

    fn next(&mut self) -> u32 {
        let product = u64::from(self.seed) * 16_807;
        let folded = (product >> 31) + (product & u64::from(Random::M));
        let mut seed = u32::try_from(folded).unwrap_or(Random::M);
        if seed > Random::M {
            seed -= Random::M;
        }
        self.seed = seed;
        seed
    }

    fn one_in(&mut self, n: u32) -> bool {
        self.next().is_multiple_of(n.max(1))
    }
}

struct State {
    refill_period_us: u64,
    rate: u64,
    max_rate: u64,
    refill_bytes: u64,
    fairness: u32,
    auto_tuned: bool,
    rng: Random,
    available: u64,
    next_refill_us: u64,
    /// Queued requests: index 0 low, 1 high.
    queues: [VecDeque<Pending>; 2],
    next_id: u64,
    /// A drain was already recorded for the current refill period.
    period_drained: bool,
    counters: [PriorityStats; 3],
    refills: u64,
    tunes: u64,
    tuned_time_us: u64,
    drains_at_tune: u64,
    /// A waiting thread is sleeping until the next refill.
    timer_owned: bool,
    closed: bool,
}

fn queue_index(pri: IoPriority) -> Option<usize> {
    match pri {
        IoPriority::Low => Some(0),
        IoPriority::High => Some(1),
        IoPriority::User => None,
    }
}

fn refill_bytes_per_period(rate: u64, refill_period_us: u64) -> u64 {
    let bytes = u128::from(rate) * u128::from(refill_period_us) / 1_000_000;
    u64::try_from(bytes).unwrap_or(u64::MAX).max(MIN_REFILL_BYTES_PER_PERIOD)
}

impl State {
    fn set_rate(&mut self, rate: u64) {
        self.rate = rate.max(1);
        self.refill_bytes = refill_bytes_per_period(self.rate, self.refill_period_us);
    }

    fn queues_empty(&self) -> bool {
        self.queues.iter().all(VecDeque::is_empty)
    }

    fn is_queued(&self, ticket: &Ticket) -> bool {
        queue_index(ticket.pri).is_some_and(|q| self.queues[q].iter().any(|p| p.id == ticket.id))
    }

    fn remove(&mut self, ticket: &Ticket) {
        if let Some(q) = queue_index(ticket.pri) {
            self.queues[q].retain(|p| p.id != ticket.id);
        }
    }

    fn record_drain(&mut self, pri: IoPriority) {
        if !self.period_drained {
            self.period_drained = true;
            self.counters[pri.index()].drains += 1;
        }
    }

    /// Rule 2 of the module contract. Returns whether a refill happened.
    fn refill_if_due(&mut self, now: u64) -> bool {
        if now < self.next_refill_us {
            return false;
        }
        self.next_refill_us = now.saturating_add(self.refill_period_us);
        if self.available < self.refill_bytes {
            self.available = self.available.saturating_add(self.refill_bytes);
        }
        self.refills += 1;
        let order = if self.rng.one_in(self.fairness) {
            [IoPriority::Low, IoPriority::High]
        } else {
            [IoPriority::High, IoPriority::Low]
        };
        for pri in order {
            let Some(q) = queue_index(pri) else { continue };
            while let Some(front) = self.queues[q].front_mut() {
                if self.available < front.remaining {
                    front.remaining -= self.available;
                    self.available = 0;
                    break;
                }
                self.available -= front.remaining;
                let bytes = front.bytes;
                self.queues[q].pop_front();
                self.counters[pri.index()].bytes_through += bytes;
            }
        }
        self.period_drained = false;
        if !self.queues[1].is_empty() {
            self.record_drain(IoPriority::High);
        } else if !self.queues[0].is_empty() {
            self.record_drain(IoPriority::Low);
        }
        true
    }

    fn total_drains(&self) -> u64 {
        self.counters[0].drains + self.counters[1].drains
    }

    fn tune_if_due(&mut self, now: u64) {
        if self.auto_tuned
            && now.saturating_sub(self.tuned_time_us) >= REFILLS_PER_TUNE.saturating_mul(self.refill_period_us)
        {
            self.tune(now);
        }
    }

    /// RocksDB `GenericRateLimiter::Tune()` (thesis Fig. 3.7).
    fn tune(&mut self, now: u64) {
        let prev_tuned_time = self.tuned_time_us;
        self.tuned_time_us = now;
        let period = self.refill_period_us;
        let elapsed_intervals = now.saturating_sub(prev_tuned_time).div_ceil(period);
        let drains = self.total_drains() - self.drains_at_tune;
        self.drains_at_tune = self.total_drains();
        self.tunes += 1;
        if elapsed_intervals == 0 {
            return;
        }
        let drained_pct = drains.saturating_mul(100) / elapsed_intervals;
        let floor = self.max_rate / TUNE_ALLOWED_RANGE_FACTOR;
        let rate = u128::from(self.rate);
        let new_rate = if drained_pct == 0 {
            floor
        } else if drained_pct < TUNE_LOW_WATERMARK_PCT {
            let lowered = rate * 100 / u128::from(100 + TUNE_ADJUST_FACTOR_PCT);
            floor.max(u64::try_from(lowered).unwrap_or(u64::MAX))
        } else if drained_pct > TUNE_HIGH_WATERMARK_PCT {
            let raised = rate * u128::from(100 + TUNE_ADJUST_FACTOR_PCT) / 100;
            self.max_rate.min(u64::try_from(raised).unwrap_or(u64::MAX))
        } else {
            self.rate
        };
        if new_rate != self.rate {
            self.set_rate(new_rate);
        }
    }

    fn submit(&mut self, bytes: u64, pri: IoPriority, now: u64) -> (Submission, bool) {
        self.tune_if_due(now);
        if self.closed {
            return (Submission::Closed, false);
        }
        self.counters[pri.index()].requests += 1;
        let Some(q) = queue_index(pri) else {
            self.counters[pri.index()].bytes_through += bytes;
            return (Submission::Granted, false);
        };
        if self.queues_empty() && self.available >= bytes {
            self.available -= bytes;
            self.counters[pri.index()].bytes_through += bytes;
            return (Submission::Granted, false);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.queues[q].push_back(Pending { id, bytes, remaining: bytes });
        let ticket = Ticket { id, pri };
        // A request that finds the refill time already passed refills at once
        // and has not waited: no drain (RocksDB's `time_until_refill_us <= 0`).
        let refilled = self.refill_if_due(now);
        if !refilled {
            self.record_drain(pri);
        }
        if self.is_queued(&ticket) {
            (Submission::Queued(ticket), refilled)
        } else {
            (Submission::Granted, refilled)
        }
    }

    fn stats(&self, now: u64) -> RateLimiterStats {
        RateLimiterStats {
            now_micros: now,
            refill_period_us: self.refill_period_us,
            bytes_per_second: self.rate,
            max_bytes_per_second: self.max_rate,
            refills: self.refills,
            tunes: self.tunes,
            waiting: self.queues.iter().map(VecDeque::len).sum(),
            low: self.counters[0],
            high: self.counters[1],
            user: self.counters[2],
        }
    }
}

impl RateLimiter {
    /// A limiter with `options`, reading time from `clock`. Refuses a zero rate,
    /// a zero refill period and a zero fairness (RocksDB asserts the same).
    pub fn new(options: RateLimiterOptions, clock: Arc<dyn Clock>) -> Result<RateLimiter> {
        if options.rate_bytes_per_sec == 0 {
            return Err(Error::invalid("rate limiter: rate_bytes_per_sec must be positive"));
        }
        if options.refill_period_us == 0 {
            return Err(Error::invalid("rate limiter: refill_period_us must be positive"));
        }
        if options.fairness == 0 {
            return Err(Error::invalid("rate limiter: fairness must be at least 1"));
        }
        let now = micros(clock.monotonic());
        let mut state = State {
            refill_period_us: options.refill_period_us,
            rate: 0,
            max_rate: options.rate_bytes_per_sec,
            refill_bytes: 0,
            fairness: options.fairness.min(MAX_FAIRNESS),
            auto_tuned: options.auto_tuned,
            rng: Random::new(options.seed),
            available: 0,
            next_refill_us: now,
            queues: [VecDeque::new(), VecDeque::new()],
            next_id: 0,
            period_drained: false,
            counters: [PriorityStats::default(); 3],
            refills: 0,
            tunes: 0,
            tuned_time_us: now,
            drains_at_tune: 0,
            timer_owned: false,
            closed: false,
        };
        // RocksDB: "the database write throughput hovers around half of the
        // maximum", so auto-tuning starts there (thesis §3.5.1).
        let start = if options.auto_tuned { options.rate_bytes_per_sec / 2 } else { options.rate_bytes_per_sec };
        state.set_rate(start);
        Ok(RateLimiter { clock, state: Mutex::new(state), wakeup: Condvar::new() })
    }

    /// Blocks until `bytes` at priority `pri` are granted, in chunks of at most
    /// one refill. `User` returns at once (counted only). Fails with
    /// [`Error::Closed`] once the limiter is closed.
    pub fn request(&self, bytes: u64, pri: IoPriority) -> Result<()> {
        let mut remaining = bytes;
        loop {
            let chunk = if pri == IoPriority::User { remaining } else { remaining.min(self.single_burst_bytes()) };
            match self.submit(chunk, pri) {
                Submission::Granted => {}
                Submission::Queued(ticket) => self.wait(ticket)?,
                Submission::Closed => return Err(Error::Closed),
            }
            remaining -= chunk;
            if remaining == 0 {
                return Ok(());
            }
        }
    }

    /// Makes one request without blocking: granted now, or queued until a
    /// refill grants it. Pair with [`RateLimiter::is_granted`] and
    /// [`RateLimiter::refill_if_due`] (or [`RateLimiter::wait`]).
    pub fn submit(&self, bytes: u64, pri: IoPriority) -> Submission {
        let now = micros(self.clock.monotonic());
        let (submission, refilled) = self.state.lock().submit(bytes, pri, now);
        if refilled {
            self.wakeup.notify_all();
        }
        submission
    }

    /// True once the request behind `ticket` has been granted.
    #[cfg(test)]
    pub fn is_granted(&self, ticket: &Ticket) -> bool {
        let state = self.state.lock();
        !state.closed && !state.is_queued(ticket)
    }

    /// Refills and grants queued requests if the refill time has come.
    /// Returns whether a refill happened. Blocking waiters do this themselves;
    /// it is public for callers that drive the limiter by hand.
    #[cfg(test)]
    pub fn refill_if_due(&self) -> bool {
        let now = micros(self.clock.monotonic());
        let refilled = self.state.lock().refill_if_due(now);
        if refilled {
            self.wakeup.notify_all();
        }
        refilled
    }

    /// Blocks until the request behind `ticket` is granted. One waiter at a
    /// time sleeps on the clock until the next refill, then refills and wakes
    /// the others; the rest park on a condition variable.
    pub fn wait(&self, ticket: Ticket) -> Result<()> {
        let mut state = self.state.lock();
        loop {
            if state.closed {
                state.remove(&ticket);
                return Err(Error::Closed);
            }
            if !state.is_queued(&ticket) {
                return Ok(());
            }
            if state.timer_owned {
                self.wakeup.wait(&mut state);
                continue;
            }
            state.timer_owned = true;
            let delta = state.next_refill_us.saturating_sub(micros(self.clock.monotonic()));
            if delta > 0 {
                MutexGuard::unlocked(&mut state, || self.clock.sleep_for(std::time::Duration::from_micros(delta)));
            }
            state.timer_owned = false;
            state.refill_if_due(micros(self.clock.monotonic()));
            self.wakeup.notify_all();
        }
    }

    /// Changes the rate at run time; the next refill uses it. As in RocksDB,
    /// in auto-tuned mode this sets the current rate and leaves the ceiling,
    /// so the next tune moves it back into `[max/20, max]`.
    pub fn set_bytes_per_second(&self, bytes_per_second: u64) -> Result<()> {
        if bytes_per_second == 0 {
            return Err(Error::invalid("rate limiter: bytes_per_second must be positive"));
        }
        self.state.lock().set_rate(bytes_per_second);
        Ok(())
    }

    /// Current rate, bytes per second.
    #[cfg(test)]
    pub fn bytes_per_second(&self) -> u64 {
        self.state.lock().rate
    }

    /// The most one chunk of [`RateLimiter::request`] asks for: one refill's bytes.
    pub fn single_burst_bytes(&self) -> u64 {
        self.state.lock().refill_bytes
    }

    /// A snapshot of the counters, stamped with the clock's time.
    pub fn stats(&self) -> RateLimiterStats {
        let now = micros(self.clock.monotonic());
        self.state.lock().stats(now)
    }

    /// Refuses new requests and fails waiting ones with [`Error::Closed`], for
    /// shutdown. A waiter asleep until the next refill returns after it.
    pub fn close(&self) {
        self.state.lock().closed = true;
        self.wakeup.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::clock::ManualClock;

    const MB: u64 = 1_000_000;

    /// The manual clock's monotonic reading, microseconds.
    fn now(clock: &ManualClock) -> u64 {
        micros(clock.monotonic())
    }

    fn advance(clock: &ManualClock, us: u64) {
        clock.advance(Duration::from_micros(us));
    }

    fn limiter(options: RateLimiterOptions) -> (Arc<ManualClock>, RateLimiter) {
        let clock = Arc::new(ManualClock::new(Duration::ZERO));
        let limiter = RateLimiter::new(options, clock.clone()).unwrap();
        (clock, limiter)
    }

    /// Requests `chunk` bytes at a time until the clock reaches `until`;
    /// returns the bytes granted.
    fn saturate(clock: &ManualClock, limiter: &RateLimiter, chunk: u64, pri: IoPriority, until: u64) -> u64 {
        let mut granted = 0;
        while now(clock) < until {
            limiter.request(chunk, pri).unwrap();
            granted += chunk;
        }
        granted
    }

    fn assert_within_5pct(measured: f64, expected: f64) {
        let err = (measured - expected).abs() / expected;
        assert!(err <= 0.05, "measured {measured:.0} B/s, expected {expected:.0} B/s ({:.1} % off)", err * 100.0);
    }

    #[test]
    fn granted_bytes_per_second_match_the_rate() {
        for (rate, chunk, secs) in [(10 * MB, 64 * 1024, 3), (10 * MB, 1_000_000, 5), (7 * MB, 4096, 4)] {
            let (clock, limiter) = limiter(RateLimiterOptions::new(rate));
            let granted = saturate(&clock, &limiter, chunk, IoPriority::Low, secs * 1_000_000);
            let elapsed = now(&clock) as f64 / 1e6;
            assert_within_5pct(granted as f64 / elapsed, rate as f64);
            // The limiter, not the test's arithmetic, did the waiting.
            assert!(clock.sleeps() >= secs * 10 - 1, "only {} waits", clock.sleeps());
        }
    }

    #[test]
    fn contending_threads_share_the_rate() {
        let (clock, limiter) = limiter(RateLimiterOptions::new(10 * MB));
        let limiter = Arc::new(limiter);
        let per_thread = 20 * MB;
        let threads: Vec<_> = [IoPriority::High, IoPriority::Low, IoPriority::Low]
            .into_iter()
            .map(|pri| {
                let limiter = limiter.clone();
                std::thread::spawn(move || {
                    for _ in 0..per_thread / 50_000 {
                        limiter.request(50_000, pri).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let stats = limiter.stats();
        assert_eq!(stats.high.bytes_through, per_thread);
        assert_eq!(stats.low.bytes_through, 2 * per_thread);
        let elapsed = now(&clock) as f64 / 1e6;
        assert_within_5pct(3.0 * per_thread as f64 / elapsed, 10.0 * MB as f64);
    }

    #[test]
    fn idle_time_banks_no_refills() {
        let (clock, limiter) = limiter(RateLimiterOptions::new(10 * MB));
        // The first refill's bytes go unused, then a second of silence.
        assert_eq!(limiter.submit(1, IoPriority::Low), Submission::Granted);
        advance(&clock, 1_000_000);
        // Refills happen only when a request waits, so silence banks nothing:
        // what was left plus one refill is there at once; the third MB waits.
        limiter.request(MB - 1, IoPriority::Low).unwrap();
        limiter.request(MB, IoPriority::Low).unwrap();
        assert_eq!(clock.sleeps(), 0);
        limiter.request(MB, IoPriority::Low).unwrap();
        assert_eq!(clock.sleeps(), 1);
        assert_eq!(now(&clock), 1_100_000);
    }

    #[test]
    fn a_request_larger_than_one_refill_is_split() {
        let (clock, limiter) = limiter(RateLimiterOptions::new(10 * MB));
        assert_eq!(limiter.single_burst_bytes(), MB);
        limiter.request(3 * MB + MB / 2, IoPriority::High).unwrap();
        let stats = limiter.stats();
        assert_eq!(stats.high.requests, 4);
        assert_eq!(stats.high.bytes_through, 3 * MB + MB / 2);
        // Refills at 0, 100, 200 and 300 ms.
        assert_eq!(now(&clock), 300_000);
    }

    /// Queues `n` one-refill requests of each priority, lows first, and returns
    /// the grant order as it unfolds refill by refill.
    fn grant_order(fairness: u32, n: usize) -> Vec<IoPriority> {
        let (clock, limiter) = limiter(RateLimiterOptions { fairness, ..RateLimiterOptions::new(10 * MB) });
        // Empty the first refill so everything below has to queue.
        limiter.request(MB, IoPriority::Low).unwrap();
        let mut tickets = Vec::new();
        for pri in [IoPriority::Low, IoPriority::High] {
            for _ in 0..n {
                match limiter.submit(MB, pri) {
                    Submission::Queued(t) => tickets.push(t),
                    other => panic!("expected to queue, got {other:?}"),
                }
            }
        }
        let mut order = Vec::new();
        while !tickets.is_empty() {
            advance(&clock, 100_000);
            assert!(limiter.refill_if_due());
            let (granted, waiting): (Vec<_>, Vec<_>) = tickets.into_iter().partition(|t| limiter.is_granted(t));
            order.extend(granted.iter().map(Ticket::priority));
            tickets = waiting;
        }
        order
    }

    #[test]
    fn high_priority_is_served_before_low() {
        // Lows were queued first, yet highs come out first (a low may slip in
        // once in `fairness` refills).
        let order = grant_order(10, 5);
        let highs_in_first_five = order[..5].iter().filter(|p| **p == IoPriority::High).count();
        assert!(highs_in_first_five >= 4, "grant order {order:?}");
        assert_eq!(order.len(), 10);
    }

    #[test]
    fn fairness_lets_low_priority_through() {
        // Both queues stay full: low wins about one refill in `fairness`.
        for (fairness, lo, hi) in [(10u32, 140, 260), (4, 400, 600)] {
            let (clock, limiter) = limiter(RateLimiterOptions { fairness, ..RateLimiterOptions::new(10 * MB) });
            limiter.request(MB, IoPriority::Low).unwrap();
            let mut queued: Vec<Ticket> = Vec::new();
            let mut low_grants = 0;
            for _ in 0..2000 {
                for pri in [IoPriority::Low, IoPriority::High] {
                    if !queued.iter().any(|t| t.priority() == pri) {
                        match limiter.submit(MB, pri) {
                            Submission::Queued(t) => queued.push(t),
                            other => panic!("expected to queue, got {other:?}"),
                        }
                    }
                }
                advance(&clock, 100_000);
                limiter.refill_if_due();
                let before = queued.len();
                queued.retain(|t| {
                    let granted = limiter.is_granted(t);
                    if granted && t.priority() == IoPriority::Low {
                        low_grants += 1;
                    }
                    !granted
                });
                assert_eq!(before - queued.len(), 1, "one refill grants one request");
            }
            assert!((lo..=hi).contains(&low_grants), "fairness {fairness}: low granted {low_grants} of 2000 refills");
        }
        // fairness 1: the coin always says low first, so high waits behind it.
        let order = grant_order(1, 3);
        assert_eq!(order[..3], [IoPriority::Low; 3]);
    }

    #[test]
    fn user_writes_are_counted_and_never_blocked() {
        let (clock, limiter) = limiter(RateLimiterOptions::new(10 * MB));
        limiter.request(MB / 2, IoPriority::High).unwrap();
        limiter.request(100 * MB, IoPriority::User).unwrap();
        limiter.request(3, IoPriority::User).unwrap();
        assert_eq!(clock.sleeps(), 0);
        let stats = limiter.stats();
        assert_eq!(stats.user, PriorityStats { bytes_through: 100 * MB + 3, requests: 2, drains: 0 });
        // They took no tokens: the other half of the first refill is still there.
        assert_eq!(limiter.submit(MB / 2, IoPriority::High), Submission::Granted);
        assert_eq!(clock.sleeps(), 0);
        assert_eq!(now(&clock), 0);
    }

    #[test]
    fn drains_are_counted_per_priority() {
        let (clock, limiter) = limiter(RateLimiterOptions::new(10 * MB));
        // Flushes alone saturate the disk for 2 s: every period after the first drains.
        saturate(&clock, &limiter, MB / 2, IoPriority::High, 2_000_000);
        let s = limiter.stats();
        assert!((19..=21).contains(&s.high.drains), "{s:?}");
        assert_eq!(s.low.drains, 0);
        // Compactions alone for 1 s.
        saturate(&clock, &limiter, MB / 2, IoPriority::Low, 3_000_000);
        let t = limiter.stats();
        assert_eq!(t.high.drains, s.high.drains);
        assert!((9..=11).contains(&(t.low.drains - s.low.drains)), "{t:?}");
        // A light load that fits in each refill never drains.
        for _ in 0..10 {
            advance(&clock, 100_000);
            limiter.request(MB / 4, IoPriority::High).unwrap();
        }
        assert_eq!(limiter.stats().drains(), t.drains());
    }

    #[test]
    fn one_drain_per_period_goes_to_the_priority_left_waiting() {
        let (clock, limiter) = limiter(RateLimiterOptions::new(10 * MB));
        limiter.request(MB, IoPriority::Low).unwrap();
        // The first request to wait in a period owns its drain.
        let Submission::Queued(low) = limiter.submit(MB, IoPriority::Low) else { panic!("low should queue") };
        let Submission::Queued(high) = limiter.submit(MB, IoPriority::High) else { panic!("high should queue") };
        let s = limiter.stats();
        assert_eq!((s.low.drains, s.high.drains), (1, 0), "one drain per period, to the first waiter");
        // The refill grants one of them; the next period's drain goes to the one left.
        advance(&clock, 100_000);
        assert!(limiter.refill_if_due());
        let left = match (limiter.is_granted(&low), limiter.is_granted(&high)) {
            (true, false) => IoPriority::High,
            (false, true) => IoPriority::Low,
            other => panic!("one refill should grant exactly one request: {other:?}"),
        };
        let t = limiter.stats();
        assert_eq!(t.drains(), 2);
        assert_eq!(t.priority(left).drains - s.priority(left).drains, 1);
    }

    #[test]
    fn set_bytes_per_second_takes_effect() {
        let (clock, limiter) = limiter(RateLimiterOptions::new(10 * MB));
        saturate(&clock, &limiter, 100_000, IoPriority::Low, 2_000_000);
        limiter.set_bytes_per_second(2 * MB).unwrap();
        assert_eq!(limiter.bytes_per_second(), 2 * MB);
        assert_eq!(limiter.single_burst_bytes(), 200_000);
        // Spend what the old rate left in the bucket, then measure.
        saturate(&clock, &limiter, 100_000, IoPriority::Low, 3_000_000);
        let start = now(&clock);
        let before = limiter.stats().low.bytes_through;
        saturate(&clock, &limiter, 100_000, IoPriority::Low, start + 4_000_000);
        let granted = limiter.stats().low.bytes_through - before;
        let elapsed = (now(&clock) - start) as f64 / 1e6;
        assert_within_5pct(granted as f64 / elapsed, 2.0 * MB as f64);
        assert!(limiter.set_bytes_per_second(0).is_err());
    }

    #[test]
    fn auto_tune_raises_the_rate_under_sustained_demand() {
        let opts = RateLimiterOptions { auto_tuned: true, ..RateLimiterOptions::new(100 * MB) };
        let (clock, limiter) = limiter(opts);
        assert_eq!(limiter.bytes_per_second(), 50 * MB, "auto-tuned starts at half the ceiling");
        let mut rates = vec![limiter.bytes_per_second()];
        for tune in 1..=20u64 {
            // Every period drains: demand always exceeds the refill.
            while now(&clock) < tune * 10_000_000 {
                let chunk = limiter.single_burst_bytes();
                limiter.request(chunk, IoPriority::High).unwrap();
            }
            limiter.request(1, IoPriority::High).unwrap();
            rates.push(limiter.bytes_per_second());
        }
        // 50 -> 52.5 -> 55.125 ... (5 % steps), then pinned at the ceiling.
        assert_eq!(rates[1], 52_500_000);
        assert_eq!(rates[2], 55_125_000);
        assert!(rates.windows(2).all(|w| w[1] >= w[0]), "{rates:?}");
        assert_eq!(*rates.last().unwrap(), 100 * MB);
        assert!(limiter.stats().tunes >= 20);
    }

    #[test]
    fn auto_tune_lowers_the_rate_when_demand_falls() {
        let opts = RateLimiterOptions { auto_tuned: true, ..RateLimiterOptions::new(100 * MB) };
        let (clock, limiter) = limiter(opts);
        // Light demand: a drain in 3 of every 10 periods (30 % < 50 %).
        let mut rate = limiter.bytes_per_second();
        for tune in 1..=3u64 {
            while now(&clock) < tune * 10_000_000 {
                let burst = limiter.single_burst_bytes();
                for _ in 0..3 {
                    limiter.request(burst, IoPriority::Low).unwrap();
                }
                let next = (now(&clock) / 1_000_000 + 1) * 1_000_000;
                advance(&clock, next - now(&clock));
            }
            limiter.request(1, IoPriority::Low).unwrap();
            let expected = rate * 100 / 105;
            assert_eq!(limiter.bytes_per_second(), expected, "tune {tune}");
            rate = expected;
        }
        // Idle: no drain in a whole tune interval sends it to the floor, max/20.
        for _ in 0..10 {
            advance(&clock, 1_000_000);
            limiter.request(1000, IoPriority::Low).unwrap();
        }
        advance(&clock, 1_000_000);
        limiter.request(1000, IoPriority::Low).unwrap();
        assert_eq!(limiter.bytes_per_second(), 5 * MB);
    }

    #[test]
    fn a_closed_limiter_refuses_and_releases_waiters() {
        let (_clock, limiter) = limiter(RateLimiterOptions::new(10 * MB));
        limiter.request(MB, IoPriority::Low).unwrap();
        let Submission::Queued(ticket) = limiter.submit(MB, IoPriority::Low) else { panic!("should queue") };
        limiter.close();
        assert!(!limiter.is_granted(&ticket));
        assert!(matches!(limiter.wait(ticket), Err(Error::Closed)));
        assert!(matches!(limiter.request(1, IoPriority::High), Err(Error::Closed)));
        assert_eq!(limiter.stats().waiting, 0);
    }

    #[test]
    fn bad_options_are_refused() {
        let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(Duration::ZERO));
        for opts in [
            RateLimiterOptions::new(0),
            RateLimiterOptions { refill_period_us: 0, ..RateLimiterOptions::new(1) },
            RateLimiterOptions { fairness: 0, ..RateLimiterOptions::new(1) },
        ] {
            assert!(RateLimiter::new(opts, clock.clone()).is_err());
        }
        // A tiny rate still refills at least 100 bytes per period.
        let tiny = RateLimiter::new(RateLimiterOptions::new(1), clock).unwrap();
        assert_eq!(tiny.single_burst_bytes(), MIN_REFILL_BYTES_PER_PERIOD);
    }
}
