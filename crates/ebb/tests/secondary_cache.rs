//! The compressed secondary cache (`compressed_secondary_cache_size`,
//! RocksDB's `CompressedSecondaryCache`): blocks the block cache evicts
//! twice are kept compressed and read back from memory instead of the file,
//! with the same answers; reads that do not fill the cache leave it as it
//! is; it works under both kinds of block cache. The model test
//! (`tests/model.rs`) also runs histories through one.

mod common;

use common::tiny_options;
use ebb::fs::MemFs;
use ebb::perf::{perf_context, reset_perf_context, set_perf_level, PerfLevel};
use ebb::{Db, Options, ReadOptions};

fn key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    // Compressible, as most values are: a short pattern repeated.
    format!("value {i} ").repeat(12).into_bytes()
}

/// A database of 3,000 keys in a few tables, read through a 32 KiB block
/// cache and a secondary cache of `secondary` bytes.
fn filled(secondary: usize) -> Db {
    filled_with(secondary, "kLRUCache")
}

fn filled_with(secondary: usize, cache_type: &str) -> Db {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs));
    o.set("block_cache_type", cache_type).unwrap();
    o.block_size = 4096;
    o.block_cache_size = 32 << 10;
    o.block_cache_num_shard_bits = 0;
    o.compressed_secondary_cache_size = secondary;
    o.disable_auto_compactions = true;
    let db = Db::open("/db", o).unwrap();
    for i in 0..3000 {
        db.put(&key(i), &value(i)).unwrap();
    }
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    db
}

/// Reads every key `rounds` times in order, checking each value; returns
/// the blocks read from files and the blocks the secondary cache served.
fn read_all(db: &Db, rounds: usize, ro: &ReadOptions) -> (u64, u64) {
    set_perf_level(PerfLevel::EnableCount);
    reset_perf_context();
    for _ in 0..rounds {
        for i in 0..3000 {
            assert_eq!(db.get_opt(&key(i), ro).unwrap(), Some(value(i)), "key {i}");
        }
    }
    let c = perf_context();
    set_perf_level(PerfLevel::Disable);
    (c.block_read_count, c.secondary_cache_hit_count)
}

#[test]
fn evicted_blocks_are_read_back_from_the_secondary_cache_not_the_file() {
    let ro = ReadOptions::default();
    let plain = filled(0);
    let (plain_reads, plain_hits) = read_all(&plain, 3, &ro);
    assert_eq!(plain_hits, 0);
    let tiered = filled(1 << 20);
    let (tiered_reads, tiered_hits) = read_all(&tiered, 3, &ro);
    // The data (~2.6 MB of values, blocks that compress well) does not fit
    // the 32 KiB block cache, and fits the secondary cache compressed: the
    // first round reads every block from the file and the second evicts
    // them a second time into the secondary, which serves the third.
    assert!(tiered_hits > 100, "secondary hits {tiered_hits}");
    assert!(
        tiered_reads + tiered_hits / 2 <= plain_reads,
        "file reads {tiered_reads} with the secondary cache, {plain_reads} without; {tiered_hits} secondary hits"
    );
    let stats = tiered.get_property("ebb.compressed-secondary-cache-stats").unwrap();
    assert!(stats.contains("dummy_inserts="), "{stats}");
    let usage: usize = tiered.get_property("ebb.compressed-secondary-cache-usage").unwrap().parse().unwrap();
    assert!(usage > 0 && usage <= 1 << 20, "usage {usage}");
    assert!(plain.get_property("ebb.compressed-secondary-cache-stats").is_none());
    // Iterators read through it too, with the same answers.
    let mut it = tiered.iter(ReadOptions::default());
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        assert_eq!((it.key(), it.value()), (key(n).as_slice(), value(n).as_slice()));
        n += 1;
        it.next();
    }
    assert_eq!(n, 3000);
}

#[test]
fn reads_that_do_not_fill_the_cache_leave_the_secondary_cache_as_it_is() {
    let db = filled(1 << 20);
    let fill = ReadOptions::default();
    read_all(&db, 2, &fill);
    // Blocks now sit in the secondary cache. Reads without fill_cache take
    // them from there and leave them there: two rounds hit it alike.
    let no_fill = ReadOptions { fill_cache: false, ..ReadOptions::default() };
    let (_, first) = read_all(&db, 1, &no_fill);
    let (_, second) = read_all(&db, 1, &no_fill);
    assert!(first > 100, "{first}");
    assert_eq!(first, second, "a read without fill_cache moved blocks out of the secondary cache");
}

#[test]
fn the_clock_cache_spills_into_a_secondary_cache_too() {
    let ro = ReadOptions::default();
    let (plain_reads, _) = read_all(&filled_with(0, "kHyperClockCache"), 3, &ro);
    let tiered = filled_with(1 << 20, "kHyperClockCache");
    let (tiered_reads, hits) = read_all(&tiered, 3, &ro);
    assert!(hits > 100, "secondary hits {hits}");
    assert!(tiered_reads < plain_reads, "file reads {tiered_reads} with the secondary cache, {plain_reads} without");
    assert_eq!(Options::default().get("compressed_secondary_cache_size").as_deref(), Some("0"));
}
