//! Block cache under concurrent use, after RocksDB's `cache_bench` with W4's
//! flags (WORKLOADS.md): 90% lookups (each handle released at once), 5%
//! inserts, 5% erases; 8 KiB values in a 64 MiB cache of 2^6 shards; keys
//! uniform over four times what fits (`cache_bench`'s `resident_ratio` 0.25),
//! so about a quarter of lookups hit. The cache starts full.
//!
//! Caches: `lru` (RocksDB's LRU: every use moves the entry to the head),
//! `lru_no_promote` (a hit only marks the entry) and `clock` (lock-free
//! lookups and releases). Threads: 1, 2 and 8 (more than this machine's cores).
//! Each figure is operations per second over all threads.
//!
//! Run: `cargo bench -p ebb --bench cache` (add `-- --quick` for a short run).

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use ebb::cache::{new_cache, BlockCache, CacheKey, CacheOptions, CacheType, CacheValue, Priority};

const CAPACITY: usize = 64 << 20;
const VALUE_BYTES: usize = 8 << 10;
const NUM_SHARD_BITS: i32 = 6;
/// Keys: capacity / (value size x resident ratio 0.25).
const MAX_KEY: u64 = (CAPACITY / VALUE_BYTES * 4) as u64;
/// Operations per measured iteration, split over the threads.
const OPS_PER_ITER: u64 = 8192;
const CACHE_ID: u64 = 1;

fn build(cache_type: CacheType, promote_on_hit: bool) -> Arc<dyn BlockCache> {
    let options = CacheOptions {
        num_shard_bits: NUM_SHARD_BITS,
        lru_promote_on_hit: promote_on_hit,
        estimated_entry_charge: VALUE_BYTES,
        ..CacheOptions::new(CAPACITY)
    };
    let cache = new_cache(cache_type, &options).expect("valid cache options");
    let value = value();
    for key in 0..(CAPACITY / VALUE_BYTES) as u64 {
        drop(cache.insert(CacheKey::new(CACHE_ID, key), value.make(), VALUE_BYTES, Priority::Low));
    }
    cache
}

/// The value every entry shares; only its charge matters here.
fn value() -> ValueSource {
    ValueSource(Arc::new(vec![7u8; 64]))
}

struct ValueSource(Arc<Vec<u8>>);

impl ValueSource {
    fn make(&self) -> CacheValue {
        CacheValue::from_arc(Arc::clone(&self.0))
    }
}

/// One thread's share: `ops` operations drawn by a xorshift generator.
fn run(cache: &dyn BlockCache, value: &ValueSource, seed: u64, ops: u64) {
    let mut x = seed | 1;
    for _ in 0..ops {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = CacheKey::new(CACHE_ID, (x >> 8) % MAX_KEY);
        match x % 100 {
            0..=89 => {
                if let Some(h) = cache.lookup(&key) {
                    black_box(h.value());
                }
            }
            90..=94 => drop(cache.insert(key, value.make(), VALUE_BYTES, Priority::Low)),
            _ => cache.erase(&key),
        }
    }
}

/// Time for `iters` iterations of `OPS_PER_ITER` operations on `threads` threads.
fn measure(cache: &dyn BlockCache, threads: u64, iters: u64) -> Duration {
    let barrier = Barrier::new(threads as usize + 1);
    let value = value();
    let per_thread = iters * OPS_PER_ITER / threads;
    std::thread::scope(|s| {
        for t in 0..threads {
            let (barrier, value) = (&barrier, &value);
            s.spawn(move || {
                barrier.wait();
                run(cache, value, 0x9e37_79b9_7f4a_7c15 ^ (t + 1).wrapping_mul(iters), per_thread);
            });
        }
        barrier.wait();
        let start = Instant::now();
        // The scope joins the threads before it returns.
        start
    })
    .elapsed()
}

fn cache_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("cache");
    group.throughput(Throughput::Elements(OPS_PER_ITER));
    for (name, cache_type, promote) in
        [("lru", CacheType::Lru, true), ("lru_no_promote", CacheType::Lru, false), ("clock", CacheType::Clock, true)]
    {
        let cache = build(cache_type, promote);
        for threads in [1u64, 2, 8] {
            group.bench_function(format!("{name}/threads={threads}"), |b| {
                b.iter_custom(|iters| measure(cache.as_ref(), threads, iters))
            });
        }
        println!("{name}: usage {} of {} bytes after the runs", cache.usage(), cache.capacity());
    }
    group.finish();
}

criterion_group!(benches, cache_benches);
criterion_main!(benches);
