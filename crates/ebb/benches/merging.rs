//! The merging iterator over k children, as a scan meets it: memtables, L0
//! files and one child per deeper level, k from a calm tree (4) to L0 at
//! the stop trigger (36) and a deferral's L0 (100). Forward and reverse
//! scans of every entry, and seeks each followed by ten `next`s.
//!
//! Run: `cargo bench -p ebb --bench merging`. Compare two builds with
//! criterion's baselines (`-- --save-baseline before`, then `-- --baseline before`).

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ebb::internals::iter::{InternalIterator, MergingIterator, VecIterator};
use ebb::internals::key::{make_internal_key, ValueKind};

/// Entries per merge, spread over the children round-robin, so each step
/// of a scan moves to another child as it would across overlapping L0 files.
const ENTRIES: u64 = 20_000;

fn key(i: u64) -> Vec<u8> {
    make_internal_key(format!("{:016}", i * 7919).as_bytes(), i + 1, ValueKind::Value)
}

fn children(k: u64) -> Vec<Box<dyn InternalIterator>> {
    (0..k)
        .map(|c| -> Box<dyn InternalIterator> {
            let entries = (0..ENTRIES).filter(|i| i % k == c).map(|i| (key(i), vec![b'v'; 100])).collect();
            Box::new(VecIterator::new(entries))
        })
        .collect()
}

fn merging_benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("merging");
    for k in [4u64, 12, 36, 100] {
        let mut it = MergingIterator::new(ebb::comparator::UserComparator::BYTEWISE, children(k));
        group.throughput(Throughput::Elements(ENTRIES));
        group.bench_with_input(BenchmarkId::new("forward_scan", k), &k, |b, _| {
            b.iter(|| {
                let mut n = 0u64;
                it.seek_to_first();
                while it.valid() {
                    n += it.key().len() as u64;
                    it.next();
                }
                black_box(n)
            })
        });
        group.bench_with_input(BenchmarkId::new("reverse_scan", k), &k, |b, _| {
            b.iter(|| {
                let mut n = 0u64;
                it.seek_to_last();
                while it.valid() {
                    n += it.key().len() as u64;
                    it.prev();
                }
                black_box(n)
            })
        });
        let targets: Vec<Vec<u8>> = (0..100).map(|i| key(i * ENTRIES / 100)).collect();
        group.throughput(Throughput::Elements(targets.len() as u64));
        group.bench_with_input(BenchmarkId::new("seek_next10", k), &k, |b, _| {
            b.iter(|| {
                let mut n = 0u64;
                for t in &targets {
                    it.seek(t);
                    for _ in 0..10 {
                        if !it.valid() {
                            break;
                        }
                        n += it.key().len() as u64;
                        it.next();
                    }
                }
                black_box(n)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, merging_benches);
criterion_main!(benches);
