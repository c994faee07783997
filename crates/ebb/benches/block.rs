//! Block encode and decode figures: building a ~4 KiB data block, decoding it
//! and iterating every entry, and point seeks inside it.
//!
//! Run: `cargo bench -p ebb --bench block`.

use std::sync::Arc;

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ebb::internals::key::{make_internal_key, ValueKind};
use ebb::internals::sst::{Block, BlockBuilder, BlockIterator, KeyOrder};

/// Entries shaped like db_bench's defaults: 16-byte user keys, 100-byte values.
fn entries() -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..36u64)
        .map(|i| {
            let user_key = format!("{:016}", i * 7919);
            let value: Vec<u8> = (0..100u64).map(|j| ((i * 31 + j * 17) % 251) as u8).collect();
            (make_internal_key(user_key.as_bytes(), 1000 + i, ValueKind::Value), value)
        })
        .collect()
}

fn build(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let mut b = BlockBuilder::new(16);
    for (k, v) in entries {
        b.add(k, v);
    }
    b.finish()
}

fn block_benches(c: &mut Criterion) {
    let entries = entries();
    let encoded = build(&entries);
    let mut group = c.benchmark_group("block");
    group.throughput(Throughput::Bytes(encoded.len() as u64));

    group.bench_function("encode", |b| b.iter(|| black_box(build(black_box(&entries)))));

    group.bench_function("decode_iterate", |b| {
        b.iter_batched(
            || encoded.clone(),
            |data| {
                let block = Arc::new(Block::new(data).expect("valid block"));
                let mut it = BlockIterator::new(block, KeyOrder::INTERNAL_BYTEWISE);
                let mut bytes = 0;
                it.seek_to_first();
                while it.valid() {
                    bytes += it.key().len() + it.value().len();
                    it.next();
                }
                black_box(bytes)
            },
            BatchSize::SmallInput,
        )
    });

    let block = Arc::new(Block::new(encoded.clone()).expect("valid block"));
    group.throughput(Throughput::Elements(1));
    group.bench_function("seek", |b| {
        let mut it = BlockIterator::new(block.clone(), KeyOrder::INTERNAL_BYTEWISE);
        let mut i = 0;
        b.iter(|| {
            i = (i + 13) % entries.len();
            it.seek(&entries[i].0);
            black_box(it.valid())
        })
    });
    group.finish();
}

criterion_group!(benches, block_benches);
criterion_main!(benches);
