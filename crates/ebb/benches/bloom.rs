//! Bloom filter figures: probes for keys that were added (hits) and keys that
//! were not (mostly misses), at 10 bits per key, and building the filter.
//!
//! Run: `cargo bench -p ebb --bench bloom`.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use ebb::internals::sst::{BloomFilter, BloomFilterBuilder};

const KEYS: usize = 100_000;

fn keys(prefix: &str) -> Vec<Vec<u8>> {
    (0..KEYS).map(|i| format!("{prefix}{i:012}").into_bytes()).collect()
}

fn build(keys: &[Vec<u8>]) -> Vec<u8> {
    let mut b = BloomFilterBuilder::new(10);
    for k in keys {
        b.add_key(k);
    }
    b.finish().expect("keys were added")
}

fn bloom_benches(c: &mut Criterion) {
    let present = keys("user");
    let absent = keys("none");
    let filter = BloomFilter::from_block(build(&present)).expect("valid filter");
    let false_positives = absent.iter().filter(|k| filter.may_match(k)).count();
    println!(
        "bloom: {KEYS} keys, 10 bits/key, {} probes, {} bytes, false-positive rate {:.3}%",
        filter.num_probes(),
        filter.size(),
        100.0 * false_positives as f64 / KEYS as f64
    );

    let mut group = c.benchmark_group("bloom");
    group.throughput(Throughput::Elements(1));
    let mut i = 0;
    group.bench_function("probe_hit", |b| {
        b.iter(|| {
            i = (i + 7919) % KEYS;
            black_box(filter.may_match(black_box(&present[i])))
        })
    });
    group.bench_function("probe_miss", |b| {
        b.iter(|| {
            i = (i + 7919) % KEYS;
            black_box(filter.may_match(black_box(&absent[i])))
        })
    });
    group.throughput(Throughput::Elements(KEYS as u64));
    group.bench_function("build_100k", |b| b.iter(|| black_box(build(black_box(&present)))));
    group.finish();
}

criterion_group!(benches, bloom_benches);
criterion_main!(benches);
