//! Memtable insert and lookup: Ebb's memtable (its arena skiplist) beside the
//! crate it replaced, `crossbeam-skiplist`'s lock-free `SkipMap`, and a
//! `RwLock<BTreeMap>`, the simplest alternative, all over the same internal
//! keys. Single-threaded inserts (the write-group leader inserts alone) and
//! lookups with 1 and 2 concurrent reader threads.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crossbeam_skiplist::SkipMap;
use ebb::internals::key::{make_internal_key, InternalKey, ValueKind};
use ebb::internals::memtable::MemTable;
use parking_lot::RwLock;

const N: u64 = 50_000;

fn key(i: u64) -> Vec<u8> {
    // Scrambled so inserts are random, as fillrandom's.
    format!("{:016}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15) % 1_000_000_007).into_bytes()
}

fn bench_insert(c: &mut Criterion) {
    let value = vec![b'v'; 100];
    let mut g = c.benchmark_group("memtable_insert");
    g.throughput(Throughput::Elements(N));
    g.bench_function("skiplist", |b| {
        b.iter(|| {
            let m = MemTable::new(1, ebb::comparator::UserComparator::BYTEWISE);
            for i in 0..N {
                m.add(i + 1, ValueKind::Value, &key(i), &value);
            }
            black_box(m.num_entries())
        })
    });
    g.bench_function("crossbeam_skipmap", |b| {
        b.iter(|| {
            let m: SkipMap<InternalKey, Vec<u8>> = SkipMap::new();
            for i in 0..N {
                m.insert(InternalKey::new(&key(i), i + 1, ValueKind::Value), value.clone());
            }
            black_box(m.len())
        })
    });
    g.bench_function("rwlock_btreemap", |b| {
        b.iter(|| {
            let m: RwLock<BTreeMap<InternalKey, Vec<u8>>> = RwLock::new(BTreeMap::new());
            for i in 0..N {
                m.write().insert(InternalKey::new(&key(i), i + 1, ValueKind::Value), value.clone());
            }
            let n = m.read().len();
            black_box(n)
        })
    });
    g.finish();
}

fn bench_lookup(c: &mut Criterion) {
    let value = vec![b'v'; 100];
    let skip = Arc::new(MemTable::new(1, ebb::comparator::UserComparator::BYTEWISE));
    let tree: Arc<RwLock<BTreeMap<InternalKey, Vec<u8>>>> = Arc::new(RwLock::new(BTreeMap::new()));
    let cross: SkipMap<InternalKey, Vec<u8>> = SkipMap::new();
    for i in 0..N {
        skip.add(i + 1, ValueKind::Value, &key(i), &value);
        cross.insert(InternalKey::new(&key(i), i + 1, ValueKind::Value), value.clone());
        tree.write().insert(InternalKey::new(&key(i), i + 1, ValueKind::Value), value.clone());
    }
    let keys: Vec<Vec<u8>> = (0..N).map(key).collect();
    let mut g = c.benchmark_group("memtable_lookup");
    for threads in [1usize, 2] {
        g.throughput(Throughput::Elements(N * threads as u64));
        g.bench_with_input(BenchmarkId::new("skiplist", threads), &threads, |b, &t| {
            b.iter(|| {
                look_up_all(t, &keys, |k| {
                    black_box(skip.get(&make_internal_key(k, u64::MAX >> 8, ValueKind::Value))).is_some()
                })
            })
        });
        g.bench_with_input(BenchmarkId::new("crossbeam_skipmap", threads), &threads, |b, &t| {
            b.iter(|| {
                look_up_all(t, &keys, |k| {
                    let probe = InternalKey(make_internal_key(k, u64::MAX >> 8, ValueKind::Value));
                    black_box(cross.lower_bound(Bound::Included(&probe)).map(|e| e.value().len())).is_some()
                })
            })
        });
        g.bench_with_input(BenchmarkId::new("rwlock_btreemap", threads), &threads, |b, &t| {
            b.iter(|| {
                look_up_all(t, &keys, |k| {
                    let probe = InternalKey(make_internal_key(k, u64::MAX >> 8, ValueKind::Value));
                    let m = tree.read();
                    black_box(m.range(probe..).next().map(|(_, v)| v.len())).is_some()
                })
            })
        });
    }
    g.finish();
}

/// Looks up every key from each of `threads` threads at once.
fn look_up_all(threads: usize, keys: &[Vec<u8>], get: impl Fn(&[u8]) -> bool + Sync) {
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| keys.iter().filter(|k| get(k)).count());
        }
    })
}

criterion_group!(benches, bench_insert, bench_lookup);
criterion_main!(benches);
