//! What a client thread holds while it runs a benchmark: its random numbers,
//! statistics, key and value generators, and the state shared with the other
//! threads (limiters, bursts, deadline, stop flags). The `--readers` threads
//! beside a benchmark are workers too, with their own cap and stop flag.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use crate::clock::{Clock, SystemClock};
use crate::config::Config;
use crate::dist::TwoTermExpKeys;
use crate::engine::{Engine, WriteOpts};
use crate::keys::KeyFormat;
use crate::limiter::{RateLimiter, Stop};
use crate::rng::Rng64;
use crate::shape::CountBursts;
use crate::stats::{LiveCounters, ThreadStats};
use crate::values::ValueGenerator;

/// State shared by the threads of one benchmark.
pub struct Shared {
    /// Benchmark time.
    pub clock: Arc<SystemClock>,
    /// The write cap, if any.
    pub write_limiter: Option<RateLimiter>,
    /// The read cap (ops/s), if any.
    pub read_limiter: Option<RateLimiter>,
    /// Bursts in count, if any.
    pub count_bursts: Option<CountBursts>,
    /// `--duration` as clock time, when the benchmark honours it.
    pub deadline: Option<f64>,
    /// Raised when a thread fails, so the others stop.
    pub abort: AtomicBool,
    /// Raised when readwhilewriting's readers are done.
    pub writer_stop: AtomicBool,
    /// Readers still running (readwhilewriting).
    pub readers_left: AtomicUsize,
    /// The benchmark's own threads still running; the last one to finish
    /// raises `side_readers_stop`.
    pub writers_left: AtomicUsize,
    /// Raised when the `--readers` threads are to stop: the benchmark's own
    /// threads are done, or a thread failed.
    pub side_readers_stop: AtomicBool,
    /// The cap on the `--readers` threads together (`--benchmark_read_rate_limit`),
    /// apart from `read_limiter`, which caps the benchmark's own reads.
    pub side_read_limiter: Option<RateLimiter>,
    /// Keys inserted by `mix` beyond `--num`.
    pub inserted: AtomicU64,
    /// The permutation of `filluniquerandom`.
    pub unique_order: Option<Vec<u64>>,
    /// mixgraph's key ranges, when modelled.
    pub key_ranges: Option<TwoTermExpKeys>,
}

impl Shared {
    /// Nothing shared but the clock.
    pub fn new(clock: Arc<SystemClock>) -> Shared {
        Shared {
            clock,
            write_limiter: None,
            read_limiter: None,
            count_bursts: None,
            deadline: None,
            abort: AtomicBool::new(false),
            writer_stop: AtomicBool::new(false),
            readers_left: AtomicUsize::new(0),
            writers_left: AtomicUsize::new(0),
            side_readers_stop: AtomicBool::new(false),
            side_read_limiter: None,
            inserted: AtomicU64::new(0),
            unique_order: None,
            key_ranges: None,
        }
    }
}

/// db_bench's `Duration`: an operation budget, or a deadline when `--duration` applies.
#[derive(Debug)]
pub struct Budget {
    max_ops: u64,
    ops: u64,
    deadline: Option<f64>,
}

impl Budget {
    /// True when the loop should stop, after counting `increment` more operations.
    pub fn done(&mut self, increment: u64, shared: &Shared) -> bool {
        self.ops += increment;
        if shared.abort.load(Ordering::Relaxed) {
            return true;
        }
        match self.deadline {
            Some(d) => shared.clock.now() >= d,
            None => self.ops > self.max_ops,
        }
    }
}

/// One client thread.
pub struct Worker<'a> {
    /// Thread index.
    pub tid: usize,
    /// This thread's random numbers.
    pub rng: Rng64,
    /// This thread's statistics.
    pub stats: ThreadStats,
    /// The engine.
    pub engine: &'a dyn Engine,
    /// Settings.
    pub cfg: &'a Config,
    /// Shared state.
    pub shared: &'a Shared,
    /// Key layout.
    pub keys: KeyFormat,
    /// Value source.
    pub values: ValueGenerator,
    /// Scratch key.
    pub key: Vec<u8>,
}

impl<'a> Worker<'a> {
    /// Thread `tid`, its random numbers from `seed` (see `rng::thread_seed`),
    /// counting into `live`, with values of up to `value_len` bytes.
    pub fn new(
        tid: usize,
        seed: u64,
        live: Arc<LiveCounters>,
        engine: &'a dyn Engine,
        cfg: &'a Config,
        shared: &'a Shared,
        value_len: usize,
    ) -> Worker<'a> {
        Worker {
            tid,
            rng: Rng64::new(seed),
            stats: ThreadStats::new(tid, live),
            engine,
            cfg,
            shared,
            keys: cfg.keys,
            values: ValueGenerator::new(cfg.compression_ratio, value_len),
            key: Vec::new(),
        }
    }

    /// The write options from `--sync` and `--disable_wal`.
    pub fn write_opts(&self) -> WriteOpts {
        WriteOpts { sync: self.cfg.sync, disable_wal: self.cfg.disable_wal }
    }

    /// A budget of `max_ops`, with the deadline when `timed`.
    pub fn budget(&self, max_ops: u64, timed: bool) -> Budget {
        Budget { max_ops, ops: 0, deadline: if timed { self.shared.deadline } else { None } }
    }

    /// Writes the key of `n` into the scratch key.
    pub fn set_key(&mut self, n: u64) {
        self.keys.write(n, &mut self.key);
    }

    fn stop(&self) -> Stop<'_> {
        Stop { deadline: self.shared.deadline, flag: Some(&self.shared.abort) }
    }

    /// Waits for the write shape to admit `ops` operations of `bytes`; false = stop now.
    pub fn before_write(&mut self, bytes: u64, ops: u64) -> bool {
        let mut waited = false;
        // readwhilewriting's writer stops with the readers; everyone stops on abort
        // (the runner raises writer_stop too when it aborts).
        let stop_flag = if self.stats.is_excluded() { &self.shared.writer_stop } else { &self.shared.abort };
        let stop = Stop { deadline: self.shared.deadline, flag: Some(stop_flag) };
        if let Some(gate) = &self.shared.count_bursts {
            if !gate.before_write(ops, self.shared.clock.as_ref(), &stop) {
                return false;
            }
            waited = true;
        }
        if let Some(l) = &self.shared.write_limiter {
            if !l.acquire(bytes, &stop) {
                return false;
            }
            waited = true;
        }
        if waited {
            // db_bench hides the limiter's sleep from the latency histogram.
            self.stats.reset_last_op_time();
        }
        !self.shared.abort.load(Ordering::Relaxed)
    }

    /// For a `--readers` thread: waits for the readers' cap to admit one
    /// read; false = stop now (the benchmark's own threads are done).
    pub fn before_side_read(&mut self) -> bool {
        let stop_flag = &self.shared.side_readers_stop;
        if let Some(l) = &self.shared.side_read_limiter {
            // No deadline: readers run as long as the writers, which may not
            // honour --duration (fillseq).
            if !l.acquire(1, &Stop { deadline: None, flag: Some(stop_flag) }) {
                return false;
            }
            self.stats.reset_last_op_time();
        }
        !stop_flag.load(Ordering::Relaxed) && !self.shared.abort.load(Ordering::Relaxed)
    }

    /// Waits for the read cap to admit `ops` reads; false = stop now.
    pub fn before_read(&mut self, ops: u64) -> bool {
        if let Some(l) = &self.shared.read_limiter {
            if !l.acquire(ops, &self.stop()) {
                return false;
            }
            self.stats.reset_last_op_time();
        }
        true
    }
}
