//! The `cachebench` run: `cache_bench`'s `PopulateCache`, `OperateCache` and
//! the lines `Run` prints (cache/cache_bench_tool.cc v7.8.3), over an Ebb
//! [`BlockCache`].
//!
//! Per operation a thread draws the key, then the operation from one more
//! 64-bit draw against cumulative thresholds in the order lookup_insert,
//! insert, lookup, erase. Lookups and inserts first release the handle the
//! thread holds and then keep the new one until its next lookup or insert
//! (erases leave it held), so some entries are always pinned, as in
//! `cache_bench` v7.8.3. With `--pinned_ratio` (cache_bench 10's loop) a
//! thread instead keeps its newest `cache_size * pinned_ratio / value_bytes /
//! threads` handles and releases the oldest beyond that after each operation,
//! and `--blind_insert_percent` inserts drop their handle at once. A hit is
//! "used" by hashing the value (skipped with
//! `--lean`); an insert allocates and fills a fresh value of `value_bytes`
//! from the generator, as `createValue` does, charged `value_bytes`.
//!
//! Differences from `cache_bench`, all small: a value is an Ebb data block
//! (one entry whose value holds the random bytes, about 20 bytes of block
//! framing more than `value_bytes`), hashed whole from its first byte.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Barrier};
use std::time::Instant;

use ebb::cache::{new_cache, BlockCache, CacheHandle, CacheKey, CacheOptions, CacheType, CacheValue, Priority};

use super::mt64::{random_key, Mt19937_64};
use super::CacheBenchConfig;
use crate::error::{BenchError, Result};
use crate::histogram::Histogram;

/// The one cache id every key uses: `cache_bench` keys are bare integers.
const CACHE_ID: u64 = 1;

/// What a `cachebench` run measured.
#[derive(Debug, Clone)]
pub struct CacheBenchReport {
    /// Threads that ran.
    pub threads: u32,
    /// Operations each ran.
    pub ops_per_thread: u64,
    /// Wall time from the common start until the last thread finished.
    pub elapsed_secs: f64,
    /// The threads' own run times, added up.
    pub thread_secs: f64,
    /// Lookups (both kinds).
    pub lookups: u64,
    /// Lookups that found their key.
    pub hits: u64,
    /// Cache usage once every thread finished and released its handle.
    pub usage: usize,
    /// Pinned usage then (0 unless a handle leaked).
    pub pinned_usage: usize,
    /// The cache's capacity.
    pub capacity: usize,
    /// Latency of every operation in nanoseconds (empty without `--histograms`).
    pub latency: Histogram,
}

impl CacheBenchReport {
    /// Operations of all threads.
    pub fn total_ops(&self) -> u64 {
        u64::from(self.threads) * self.ops_per_thread
    }

    /// `cache_bench`'s "Rough parallel ops/sec": all operations over the wall time.
    pub fn parallel_ops_per_sec(&self) -> f64 {
        self.total_ops() as f64 / self.elapsed_secs.max(1e-9)
    }

    /// `cache_bench`'s "Thread ops/sec": all operations over the threads'
    /// summed run times, i.e. one thread's average rate.
    pub fn thread_ops_per_sec(&self) -> f64 {
        self.total_ops() as f64 / self.thread_secs.max(1e-9)
    }

    /// Hits per lookup.
    pub fn hit_ratio(&self) -> f64 {
        if self.lookups == 0 {
            0.0
        } else {
            self.hits as f64 / self.lookups as f64
        }
    }
}

/// Builds the cache the configuration names.
pub fn build_cache(config: &CacheBenchConfig) -> Result<Arc<dyn BlockCache>> {
    let capacity = usize::try_from(config.cache_size)
        .map_err(|_| BenchError::new(format!("cachebench: flag --cache_size={} is too large", config.cache_size)))?;
    let options = CacheOptions {
        num_shard_bits: config.num_shard_bits,
        lru_promote_on_hit: config.lru_promote,
        // HyperClockCacheOptions(cache_size, value_bytes, num_shard_bits) in cache_bench.
        estimated_entry_charge: config.value_bytes as usize,
        ..CacheOptions::new(capacity)
    };
    new_cache(config.cache_type, &options).map_err(|e| BenchError::new(format!("cachebench: {e}")))
}

/// A value of `value_bytes` random bytes (`cache_bench`'s `createValue`: one
/// draw per 8 bytes) after the 8-byte key `key`, written in place so the
/// bytes are copied once. The cache holds any value; a byte buffer is what
/// `cache_bench` caches.
fn make_value(rng: &mut Mt19937_64, key: u64, value_bytes: usize) -> Result<CacheValue> {
    let mut data = Vec::with_capacity(value_bytes + 8);
    data.extend_from_slice(&key.to_le_bytes());
    let start = data.len();
    data.resize(start + value_bytes, 0);
    // Fixed 8-byte chunks (one store each, no call per chunk), then the tail.
    let mut chunks = data[start..].chunks_exact_mut(8);
    for chunk in &mut chunks {
        chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    let tail = chunks.into_remainder();
    if !tail.is_empty() {
        let n = tail.len();
        tail.copy_from_slice(&rng.next_u64().to_le_bytes()[..n]);
    }
    Ok(CacheValue::new(data))
}

/// "Does something with the data": hashes a hit's bytes from the start, as
/// `cache_bench` hashes its value buffer.
fn use_value(value: &CacheValue) -> u64 {
    value.get::<Vec<u8>>().map_or(0, |bytes| xxhash_rust::xxh3::xxh3_64(bytes))
}

/// cache_bench 10's handles kept pinned by thread `tid`: `cache_size *
/// pinned_ratio / value_bytes` over all threads (rounded up), split so some
/// threads round up and some down; `None` for v7.8.3's loop.
fn pin_count(config: &CacheBenchConfig, tid: u32) -> Option<usize> {
    config.pinned_ratio.map(|ratio| {
        let total = (config.cache_size as f64 * ratio / f64::from(config.value_bytes) + 0.999999) as u64;
        ((total + u64::from(tid)) / u64::from(config.threads)) as usize
    })
}

/// The operation chosen by one 64-bit draw (`cache_bench`'s cumulative thresholds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    LookupInsert,
    Insert,
    BlindInsert,
    Lookup,
    Erase,
    Nothing,
}

struct Thresholds {
    lookup_insert: u64,
    insert: u64,
    blind_insert: u64,
    lookup: u64,
    erase: u64,
}

impl Thresholds {
    fn new(c: &CacheBenchConfig) -> Thresholds {
        let hundredth = u64::MAX / 100;
        let lookup_insert = hundredth * u64::from(c.lookup_insert_percent);
        let insert = lookup_insert + hundredth * u64::from(c.insert_percent);
        let blind_insert = insert + hundredth * u64::from(c.blind_insert_percent);
        let lookup = blind_insert + hundredth * u64::from(c.lookup_percent);
        let erase = lookup + hundredth * u64::from(c.erase_percent);
        Thresholds { lookup_insert, insert, blind_insert, lookup, erase }
    }

    fn pick(&self, draw: u64) -> Op {
        if draw < self.lookup_insert {
            Op::LookupInsert
        } else if draw < self.insert {
            Op::Insert
        } else if draw < self.blind_insert {
            Op::BlindInsert
        } else if draw < self.lookup {
            Op::Lookup
        } else if draw < self.erase {
            Op::Erase
        } else {
            // The last 16 of 2^64 draws, as in cache_bench.
            Op::Nothing
        }
    }
}

/// `--skewed`'s exponent bound: floor(log2(max_key)), as `cache_bench` computes it.
fn skewed_max_log(config: &CacheBenchConfig) -> Option<u32> {
    config.skewed.then(|| 63 - config.max_key.max(1).leading_zeros())
}

/// `PopulateCache`: `2 x cache_size` bytes of inserts from seed 1, released at once.
fn populate(cache: &dyn BlockCache, config: &CacheBenchConfig) -> Result<()> {
    let mut rng = Mt19937_64::new(1);
    let skewed = skewed_max_log(config);
    let value_bytes = u64::from(config.value_bytes);
    let mut filled = 0u64;
    while filled < config.cache_size.saturating_mul(2) {
        let key = random_key(&mut rng, config.max_key, config.skew, skewed);
        let value = make_value(&mut rng, key, config.value_bytes as usize)?;
        drop(cache.insert(CacheKey::new(CACHE_ID, key), value, config.value_bytes as usize, Priority::Low)?);
        filled += value_bytes;
    }
    Ok(())
}

/// One thread's share of the figures.
struct ThreadResult {
    secs: f64,
    lookups: u64,
    hits: u64,
    latency: Histogram,
    checksum: u64,
}

/// `OperateCache`: one thread's loop.
fn operate(cache: &dyn BlockCache, config: &CacheBenchConfig, tid: u32, start: &Barrier) -> Result<ThreadResult> {
    let mut rng = Mt19937_64::new(1000 + u64::from(tid));
    let thresholds = Thresholds::new(config);
    let skewed = skewed_max_log(config);
    let value_bytes = config.value_bytes as usize;
    let mut r = ThreadResult { secs: 0.0, lookups: 0, hits: 0, latency: Histogram::new(), checksum: 0 };
    // v7.8.3: one handle, held until this thread's next lookup or insert.
    // cache_bench 10 (`pinned_ratio` given): the newest `pin_count` handles,
    // released oldest first once there are more.
    let pin_count = pin_count(config, tid);
    let mut pinned: VecDeque<CacheHandle> = VecDeque::new();
    let mut handle = None;
    start.wait();
    let began = Instant::now();
    for _ in 0..config.ops_per_thread {
        let key = random_key(&mut rng, config.max_key, config.skew, skewed);
        let op = thresholds.pick(rng.next_u64());
        let cache_key = CacheKey::new(CACHE_ID, key);
        let timer = config.histograms.then(Instant::now);
        if pin_count.is_none() && matches!(op, Op::LookupInsert | Op::Lookup | Op::Insert) {
            drop(handle.take());
        }
        match op {
            Op::LookupInsert | Op::Lookup => {
                handle = cache.lookup(&cache_key);
                r.lookups += 1;
                match &handle {
                    Some(h) => {
                        r.hits += 1;
                        if !config.lean {
                            r.checksum = r.checksum.wrapping_add(use_value(h.value()));
                        }
                    }
                    None if op == Op::LookupInsert => {
                        let value = make_value(&mut rng, key, value_bytes)?;
                        handle = Some(cache.insert(cache_key, value, value_bytes, Priority::Low)?);
                    }
                    None => {}
                }
            }
            Op::Insert => {
                let value = make_value(&mut rng, key, value_bytes)?;
                handle = Some(cache.insert(cache_key, value, value_bytes, Priority::Low)?);
            }
            Op::BlindInsert => {
                let value = make_value(&mut rng, key, value_bytes)?;
                drop(cache.insert(cache_key, value, value_bytes, Priority::Low)?);
            }
            Op::Erase => cache.erase(&cache_key),
            Op::Nothing => {}
        }
        if let Some(pin_count) = pin_count {
            pinned.extend(handle.take());
            while pinned.len() > pin_count {
                pinned.pop_front();
            }
        }
        if let Some(t) = timer {
            r.latency.add(t.elapsed().as_nanos() as u64);
        }
    }
    drop(pinned);
    drop(handle);
    r.secs = began.elapsed().as_secs_f64();
    Ok(r)
}

/// `RocksDB`'s `BytesToHumanString`: KB at least, two decimals.
fn human_bytes(bytes: u64) -> String {
    let mut size = bytes as f64 / 1024.0;
    let mut unit = 0;
    while unit < 3 && size >= 1024.0 {
        size /= 1024.0;
        unit += 1;
    }
    format!("{size:.2} {}", ["KB", "MB", "GB", "TB"][unit])
}

fn cache_name(config: &CacheBenchConfig, cache: &dyn BlockCache) -> String {
    match (config.cache_type, config.lru_promote) {
        (CacheType::Lru, false) => format!("{} (no promotion on hit)", cache.name()),
        _ => cache.name().to_string(),
    }
}

fn print_env(out: &mut dyn Write, c: &CacheBenchConfig, cache: &dyn BlockCache) -> std::io::Result<()> {
    if cfg!(debug_assertions) {
        writeln!(out, "WARNING: Assertions are enabled; benchmarks unnecessarily slow")?;
    }
    writeln!(out, "Ebb version         : {}", env!("CARGO_PKG_VERSION"))?;
    writeln!(out, "Cache impl name     : {}", cache_name(c, cache))?;
    writeln!(out, "Number of threads   : {}", c.threads)?;
    writeln!(out, "Ops per thread      : {}", c.ops_per_thread)?;
    writeln!(out, "Cache size          : {}", human_bytes(c.cache_size))?;
    writeln!(out, "Num shard bits      : {}", c.num_shard_bits)?;
    writeln!(out, "Max key             : {}", c.max_key)?;
    writeln!(out, "Resident ratio      : {}", c.resident_ratio)?;
    writeln!(out, "Skew degree         : {}", c.skew)?;
    writeln!(out, "Populate cache      : {}", u8::from(c.populate_cache))?;
    writeln!(out, "Lookup+Insert pct   : {}%", c.lookup_insert_percent)?;
    writeln!(out, "Insert percentage   : {}%", c.insert_percent)?;
    writeln!(out, "Lookup percentage   : {}%", c.lookup_percent)?;
    writeln!(out, "Erase percentage    : {}%", c.erase_percent)?;
    writeln!(out, "Gather stats        : disabled")?;
    writeln!(out, "----------------------------")
}

fn io_error(e: std::io::Error) -> BenchError {
    BenchError::new(format!("cachebench: cannot write the report: {e}"))
}

/// Runs `cachebench` as configured, printing `cache_bench`'s lines to `out`.
pub fn run(config: &CacheBenchConfig, out: &mut dyn Write) -> Result<CacheBenchReport> {
    let cache = build_cache(config)?;
    if config.populate_cache {
        populate(cache.as_ref(), config)?;
        writeln!(out, "Population complete\n----------------------------").map_err(io_error)?;
    }
    print_env(out, config, cache.as_ref()).map_err(io_error)?;
    out.flush().map_err(io_error)?;

    let start = Barrier::new(config.threads as usize + 1);
    let (elapsed_secs, results) = std::thread::scope(|s| {
        let workers: Vec<_> = (0..config.threads)
            .map(|tid| {
                let (cache, start) = (cache.as_ref(), &start);
                s.spawn(move || operate(cache, config, tid, start))
            })
            .collect();
        start.wait();
        let began = Instant::now();
        let results: Vec<_> = workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err(BenchError::new("cachebench: a thread panicked"))))
            .collect();
        (began.elapsed().as_secs_f64(), results)
    });

    let mut report = CacheBenchReport {
        threads: config.threads,
        ops_per_thread: config.ops_per_thread,
        elapsed_secs,
        thread_secs: 0.0,
        lookups: 0,
        hits: 0,
        usage: cache.usage(),
        pinned_usage: cache.pinned_usage(),
        capacity: cache.capacity(),
        latency: Histogram::new(),
    };
    let mut checksum = 0u64;
    for r in results {
        let r = r?;
        report.thread_secs += r.secs;
        report.lookups += r.lookups;
        report.hits += r.hits;
        report.latency.merge(&r.latency);
        checksum = checksum.wrapping_add(r.checksum);
    }

    // cache_bench prints these two as integers (uint32_t).
    writeln!(
        out,
        "Complete in {:.3} s; Rough parallel ops/sec = {}",
        report.elapsed_secs,
        report.parallel_ops_per_sec() as u64
    )
    .map_err(io_error)?;
    writeln!(out, "Thread ops/sec = {}", report.thread_ops_per_sec() as u64).map_err(io_error)?;
    writeln!(out, "Lookup hit ratio: {}", report.hit_ratio()).map_err(io_error)?;
    writeln!(
        out,
        "Final usage: {} of {} bytes ({} pinned); value checksum {checksum:016x}",
        report.usage, report.capacity, report.pinned_usage
    )
    .map_err(io_error)?;
    if config.histograms {
        write!(out, "\nOperation latency (ns):\n{}", report.latency.to_text()).map_err(io_error)?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> CacheBenchConfig {
        CacheBenchConfig::parse(args.iter().copied()).unwrap().unwrap()
    }

    #[test]
    fn values_are_the_key_then_value_bytes() {
        let mut rng = Mt19937_64::new(1);
        for n in [1usize, 8, 13, 8192] {
            let v = make_value(&mut rng, 42, n).unwrap();
            let bytes = v.get::<Vec<u8>>().unwrap();
            assert_eq!((&bytes[..8], bytes.len()), (&42u64.to_le_bytes()[..], n + 8));
        }
    }

    #[test]
    fn thresholds_split_the_draws_in_cache_bench_order() {
        // cache_bench 10's order: blind inserts between inserts and lookups.
        let t = Thresholds::new(&config(&[
            "--lookup_insert_percent=10",
            "--insert_percent=20",
            "--blind_insert_percent=5",
            "--lookup_percent=25",
            "--erase_percent=40",
        ]));
        let at = |pct: u64| t.pick(u64::MAX / 100 * pct);
        assert_eq!(
            [at(5), at(15), at(32), at(40), at(65)],
            [Op::LookupInsert, Op::Insert, Op::BlindInsert, Op::Lookup, Op::Erase]
        );
        assert_eq!(t.pick(u64::MAX), Op::Nothing);
    }

    #[test]
    fn pinned_handles_split_cache_bench_10s_share_over_the_threads() {
        let w4 = ["--cache_size=67108864", "--value_bytes=8192", "--threads=3", "--pinned_ratio=0.25"];
        let c = config(&w4);
        // 64 MiB x 0.25 / 8 KiB = 2048 handles: 682, 683, 683 (RocksDB's rounding).
        let per: Vec<_> = (0..3).map(|t| pin_count(&c, t).unwrap()).collect();
        assert_eq!(per, [682, 683, 683]);
        assert_eq!(per.iter().sum::<usize>(), 2048);
        assert_eq!(pin_count(&config(&w4[..3]), 0), None, "without --pinned_ratio the v7.8.3 loop holds one handle");
        assert_eq!(pin_count(&config(&["--pinned_ratio=0", "--threads=4"]), 3), Some(0));
    }

    #[test]
    fn human_bytes_follows_rocksdb() {
        assert_eq!(human_bytes(8 << 20), "8.00 MB");
        assert_eq!(human_bytes(1 << 30), "1.00 GB");
        assert_eq!(human_bytes(512), "0.50 KB");
    }
}
