//! Partitioned index blocks (issue 17 part 2; RocksDB's
//! `kTwoLevelIndexSearch` with `metadata_block_size`):
//!
//! - A table whose index is cut into many partitions answers every point
//!   lookup, batched lookup, seek both ways, scan both ways and direction
//!   switch exactly as the same entries with one index block do, read with
//!   no cache, with a cache, and with index blocks charged to the cache.
//! - Damage anywhere in a partitioned index is an error or harmless, never a
//!   wrong answer, and some damage is caught.
//! - Partitioned filters (cut with the index partitions) never rule out a
//!   key the table holds, at any sequence, and rule out most absent keys,
//!   one at a time and in batches.
//! - A database written with partitioned indexes and filters (and one
//!   switched between the layouts across reopens) gives what a model map
//!   gives.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use common::{scan, scan_reverse, tiny_options};
use ebb::cache::{new_cache, BlockCache, CacheOptions, CacheType};
use ebb::fs::{FileSystem, MemFs};
use ebb::internals::iter::InternalIterator;
use ebb::internals::key::{make_internal_key, ValueKind, KIND_FOR_SEEK};
use ebb::internals::sst::table_reader::TableCachePolicy;
use ebb::internals::sst::{ReadSettings, Table, TableBuilder, TableBuilderOptions};
use ebb::{CompressionType, Db, IndexType, ReadOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn user_key(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Distinct user keys in order, some with two versions, some tombstones.
fn entries(n: usize) -> Entries {
    let mut out = Vec::new();
    for i in 0..n {
        let versions: &[u64] = if i % 3 == 0 { &[20, 10] } else { &[15] };
        for &seq in versions {
            let kind = if (i + seq as usize).is_multiple_of(7) { ValueKind::Deletion } else { ValueKind::Value };
            let value = if kind == ValueKind::Deletion {
                Vec::new()
            } else {
                format!("v{i}-{seq}").repeat(1 + i % 4).into_bytes()
            };
            out.push((make_internal_key(&user_key(i), seq, kind), value));
        }
    }
    out
}

/// One version of each user key of [`entries`]: no two data blocks share a
/// user key, so the index holds user keys (format versions 3 and 4).
fn unique_entries(n: usize) -> Entries {
    let mut out = entries(n);
    out.dedup_by(|b, a| a.0[..a.0.len() - 8] == b.0[..b.0.len() - 8]);
    out
}

/// Writes `entries` as a table at `path` of `fs`; returns its size.
fn write_table(fs: &MemFs, path: &Path, entries: &Entries, partition: Option<usize>) -> u64 {
    write_table_with(fs, path, entries, partition, false)
}

/// [`write_table`], with the filter partitioned too when `partition_filters`.
fn write_table_with(
    fs: &MemFs,
    path: &Path,
    entries: &Entries,
    partition: Option<usize>,
    partition_filters: bool,
) -> u64 {
    write_table_keyed(fs, path, entries, partition, partition_filters, true)
}

/// [`write_table_with`], with internal index keys unless `user_key_index`.
fn write_table_keyed(
    fs: &MemFs,
    path: &Path,
    entries: &Entries,
    partition: Option<usize>,
    partition_filters: bool,
    user_key_index: bool,
) -> u64 {
    let o = TableBuilderOptions {
        user_key_index,
        block_size: 256,
        block_restart_interval: 4,
        compression: CompressionType::Lz4,
        index_partition_size: partition,
        partition_filters,
        ..TableBuilderOptions::default()
    };
    let mut b = TableBuilder::new(fs.new_writable(path).unwrap(), o, path.display().to_string());
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    let props = b.finish().unwrap();
    if partition.is_some() {
        assert!(props.index_partitions > 10, "only {} partitions", props.index_partitions);
    } else {
        assert_eq!(props.index_partitions, 0);
    }
    props.file_size
}

fn open(fs: &MemFs, path: &Path, size: u64, policy: TableCachePolicy) -> ebb::Result<Arc<Table>> {
    Table::open_with_policy(fs.open_random(path)?, size, path.display().to_string(), policy)
}

fn policies() -> Vec<(&'static str, TableCachePolicy)> {
    let cache =
        || -> Option<Arc<dyn BlockCache>> { Some(new_cache(CacheType::Lru, &CacheOptions::new(64 << 10)).unwrap()) };
    vec![
        ("no cache", TableCachePolicy::with_cache(None)),
        ("cache", TableCachePolicy::with_cache(cache())),
        (
            "index in cache",
            TableCachePolicy { cache_index_and_filter_blocks: true, ..TableCachePolicy::with_cache(cache()) },
        ),
    ]
}

/// Where an iterator stands: its entry, or nothing.
fn at(it: &dyn InternalIterator) -> Option<(Vec<u8>, Vec<u8>)> {
    it.valid().then(|| (it.key().to_vec(), it.value().to_vec()))
}

#[test]
fn a_partitioned_index_reads_as_one_index_block() {
    // Versions of a user key across blocks (internal index keys), and one
    // version per user key (user index keys); the reference is one index
    // block of internal keys.
    reads_as_one_index_block(entries(3000), false);
    reads_as_one_index_block(unique_entries(3000), true);
}

fn reads_as_one_index_block(all: Entries, user_keys: bool) {
    let fs = MemFs::new();
    let (flat_path, part_path, both_path) = (Path::new("/flat.sst"), Path::new("/part.sst"), Path::new("/both.sst"));
    let (user_path, user_size) = (Path::new("/user.sst"), write_table(&fs, Path::new("/user.sst"), &all, None));
    let flat_size = write_table_keyed(&fs, flat_path, &all, None, false, false);
    let part_size = write_table(&fs, part_path, &all, Some(128));
    let both_size = write_table_with(&fs, both_path, &all, Some(128), true);
    assert!(both_size > part_size, "the filter partitions and their index take room");
    for (path, size) in [(part_path, part_size), (both_path, both_size), (user_path, user_size)] {
        let t = open(&fs, path, size, TableCachePolicy::with_cache(None)).unwrap();
        assert_eq!(t.index_key_is_user_key(), user_keys, "{}", path.display());
    }
    let rs = ReadSettings::default();
    let layouts = [
        ("one index block", user_path, user_size),
        ("partitioned index", part_path, part_size),
        ("partitioned index and filters", both_path, both_size),
    ];
    for ((layout, path, size), (policy_name, policy)) in
        layouts.iter().flat_map(|l| policies().into_iter().map(move |p| (*l, p)))
    {
        let name = format!("{layout}, {policy_name}, user index keys: {user_keys}");
        let flat = open(&fs, flat_path, flat_size, TableCachePolicy::with_cache(None)).unwrap();
        let part = open(&fs, path, size, policy).unwrap();
        let mut rng = StdRng::seed_from_u64(5);
        // Point lookups at several sequences, keys present and absent.
        for _ in 0..3000 {
            let lookup = make_internal_key(&user_key(rng.gen_range(0..3100)), rng.gen_range(0..30), KIND_FOR_SEEK);
            assert_eq!(part.get(&rs, &lookup).unwrap(), flat.get(&rs, &lookup).unwrap(), "{name}: get");
        }
        // Batched lookups, in ascending order.
        let mut lookups: Vec<Vec<u8>> = (0..400)
            .map(|_| make_internal_key(&user_key(rng.gen_range(0..3100)), rng.gen_range(0..30), KIND_FOR_SEEK))
            .collect();
        lookups.sort_by(|a, b| ebb::internals::key::compare_bytewise_internal_keys(a, b));
        let batch = |t: &Table| {
            let mut got = vec![None; lookups.len()];
            t.multi_get_past_filter(
                &rs,
                lookups.len(),
                |k| &lookups[k],
                |k, r| {
                    got[k] = Some(r.map(|(key, value)| (key.to_vec(), value.to_vec())).unwrap());
                },
            );
            got
        };
        assert_eq!(batch(&part), batch(&flat), "{name}: multi_get");
        // Scans both ways.
        let mut a = part.iter(rs);
        let mut b = flat.iter(rs);
        let (mut forward, mut backward) = (0, 0);
        a.seek_to_first();
        b.seek_to_first();
        while b.valid() {
            assert_eq!(at(&a), at(&b), "{name}: forward scan at {forward}");
            a.next();
            b.next();
            forward += 1;
        }
        assert!(!a.valid() && a.status().is_ok());
        a.seek_to_last();
        b.seek_to_last();
        while b.valid() {
            assert_eq!(at(&a), at(&b), "{name}: backward scan at {backward}");
            a.prev();
            b.prev();
            backward += 1;
        }
        assert!(!a.valid() && a.status().is_ok());
        assert_eq!((forward, backward), (all.len(), all.len()));
        // Random moves with direction switches.
        for step in 0..4000 {
            let target = make_internal_key(&user_key(rng.gen_range(0..3100)), rng.gen_range(0..30), KIND_FOR_SEEK);
            match rng.gen_range(0..8) {
                0 => {
                    a.seek(&target);
                    b.seek(&target);
                }
                1 => {
                    a.seek_for_prev(&target);
                    b.seek_for_prev(&target);
                }
                2 => {
                    a.seek_to_first();
                    b.seek_to_first();
                }
                3 => {
                    a.seek_to_last();
                    b.seek_to_last();
                }
                4..=5 if b.valid() => {
                    a.next();
                    b.next();
                }
                _ if b.valid() => {
                    a.prev();
                    b.prev();
                }
                _ => {}
            }
            assert_eq!(at(&a), at(&b), "{name}: step {step}");
            a.status().unwrap();
        }
    }
}

#[test]
fn partitioned_filters_keep_every_present_key_and_exclude_most_absent_ones() {
    partitioned_filters_keep_present_keys(entries(3000));
    partitioned_filters_keep_present_keys(unique_entries(3000));
}

fn partitioned_filters_keep_present_keys(all: Entries) {
    let fs = MemFs::new();
    let path = Path::new("/both.sst");
    let size = write_table_with(&fs, path, &all, Some(128), true);
    for (name, policy) in policies() {
        let t = open(&fs, path, size, policy).unwrap();
        for i in 0..3000 {
            assert!(t.key_may_match(&user_key(i)), "{name}: present key {i} ruled out");
        }
        let absent: Vec<Vec<u8>> = (0..3000).map(|i| format!("key{i:06}x").into_bytes()).collect();
        let passed = absent.iter().filter(|k| t.key_may_match(k)).count();
        assert!(passed < 150, "{name}: {passed} of 3000 absent keys passed the filters");
        // Past the last key: no partition to ask.
        assert!(!t.key_may_match(b"zzz"), "{name}");
        // In a batch (keys ascending), the same verdicts.
        let mut keys: Vec<Vec<u8>> = (0..3000).map(user_key).chain(absent.iter().cloned()).collect();
        keys.sort();
        let hashes: Vec<u64> = keys.iter().map(|k| ebb::internals::sst::filter::filter_hash(k)).collect();
        let mut batched = Vec::new();
        t.keys_may_match(keys.len(), |k| &keys[k], |k| hashes[k], |_, may| batched.push(may));
        let single: Vec<bool> = keys.iter().map(|k| t.key_may_match(k)).collect();
        assert_eq!(batched, single, "{name}: batched verdicts");
    }
}

#[test]
fn damage_in_a_partitioned_index_is_an_error_never_a_wrong_answer() {
    damage_is_an_error_never_a_wrong_answer(entries(1500));
    damage_is_an_error_never_a_wrong_answer(unique_entries(1500));
}

fn damage_is_an_error_never_a_wrong_answer(all: Entries) {
    let fs = MemFs::new();
    let path = Path::new("/part.sst");
    let size = write_table_with(&fs, path, &all, Some(128), true);
    let bytes = fs.file_bytes(path).unwrap();
    let props = open(&fs, path, size, TableCachePolicy::with_cache(None)).unwrap().properties().clone();
    // The filter partitions, their top level, the index partitions and theirs.
    let index_start = props.data_size as usize;
    let index_end = index_start + (props.filter_size + props.index_size) as usize;
    let model: BTreeMap<Vec<u8>, Vec<u8>> = all.iter().cloned().collect();
    let rs = ReadSettings::default();
    // Damage anywhere is never a wrong answer; damage in the index (after
    // the filter) is always caught (the scan and the gets read every index
    // block, and each is checksummed). A damaged filter partition may go
    // unnoticed: a filter that cannot be read rules nothing out.
    let index_from = index_start + props.filter_size as usize;
    let (mut caught, mut tried) = (0, 0);
    for at_byte in (index_start..index_end).step_by(97).chain((index_from..index_end).step_by(13)) {
        let mut damaged = bytes.clone();
        damaged[at_byte] ^= 0x20;
        let dpath = Path::new("/damaged.sst");
        fs.set_file_bytes(dpath, &damaged).unwrap();
        let in_index = at_byte >= index_from;
        tried += usize::from(in_index);
        let Ok(t) = open(&fs, dpath, size, TableCachePolicy::with_cache(None)) else {
            caught += usize::from(in_index);
            continue;
        };
        let mut failed = false;
        for (k, v) in all.iter().step_by(5) {
            match t.get(&rs, k) {
                Ok(Some((key, value))) => {
                    assert_eq!((&key, &value), (k, v), "byte {at_byte}: a wrong entry");
                }
                Ok(None) => panic!("byte {at_byte}: an entry went missing without an error"),
                Err(e) => {
                    assert!(e.is_corruption(), "{e}");
                    failed = true;
                }
            }
        }
        let mut it = t.iter(rs);
        it.seek_to_first();
        let mut seen = 0;
        while it.valid() {
            assert_eq!(
                model.get(it.key()),
                Some(&it.value().to_vec()),
                "byte {at_byte}: a scan returned a wrong entry"
            );
            seen += 1;
            it.next();
        }
        match it.status() {
            Ok(()) => assert_eq!(seen, all.len(), "byte {at_byte}: a scan ended early without an error"),
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                failed = true;
            }
        }
        caught += usize::from(failed && in_index);
    }
    assert!(tried > 10, "only {tried} copies with a damaged index");
    assert_eq!(caught, tried, "damage to the index caught in {caught} of {tried} copies");
}

fn model_run(seed: u64, switch_layout: bool) {
    let fs = MemFs::new();
    let options = |two_level: bool, cache_index: bool| {
        let mut o = tiny_options(Some(fs.clone()));
        o.index_type = if two_level { IndexType::TwoLevelIndexSearch } else { IndexType::BinarySearch };
        o.partition_filters = two_level && seed % 2 == 1;
        o.metadata_block_size = 64;
        o.target_file_size_base = 64 << 10;
        o.cache_index_and_filter_blocks = cache_index;
        o
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = BTreeMap::new();
    for epoch in 0..4 {
        let two_level = !switch_layout || epoch % 2 == 0;
        let db = Db::open("/db", options(two_level, epoch % 2 == 1)).unwrap();
        assert_eq!(scan(&db, ReadOptions::default()), model, "seed {seed} epoch {epoch}: reopened");
        for _ in 0..3000 {
            let k = user_key(rng.gen_range(0..2000));
            if rng.gen_range(0..5) == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("{epoch}-{}", rng.gen::<u32>()).repeat(rng.gen_range(1..8)).into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        let ctx = format!("seed {seed} epoch {epoch}");
        for i in (0..2100).step_by(7) {
            let k = user_key(i);
            assert_eq!(db.get(&k).unwrap().as_ref(), model.get(&k), "{ctx}: get {i}");
        }
        let keys: Vec<Vec<u8>> = (0..300).map(|_| user_key(rng.gen_range(0..2100))).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        for (k, got) in keys.iter().zip(db.multi_get(&refs, &ReadOptions::default())) {
            assert_eq!(got.unwrap().as_ref(), model.get(k), "{ctx}: multi_get");
        }
        assert_eq!(scan(&db, ReadOptions::default()), model, "{ctx}: scan");
        assert_eq!(scan_reverse(&db, ReadOptions::default()), model, "{ctx}: reverse scan");
        db.close().unwrap();
    }
}

#[test]
fn a_database_with_partitioned_indexes_matches_the_model() {
    model_run(2, false);
}

#[test]
fn a_database_with_partitioned_indexes_and_filters_matches_the_model() {
    model_run(1, false);
}

#[test]
fn a_database_switching_index_layouts_across_reopens_matches_the_model() {
    model_run(3, true);
}

/// Every live table of the default family, as (index partitions, entries).
fn tables(db: &Db) -> Vec<(u64, u64)> {
    let all = db.get_properties_of_all_tables(&db.cf_handle("default").unwrap()).unwrap();
    all.values().map(|p| (p.index_partitions, p.num_entries)).collect()
}

#[test]
fn a_merge_into_one_file_past_four_target_files_partitions_its_index() {
    // Universal: similar L0 runs above an older, larger run in L1 merge into
    // one L0 file, whatever its size (as the adaptive tuner's L0 run merges
    // do). Past four target files of input that file gets a partitioned
    // index and filters when its index or filter would pass 64 blocks of
    // `metadata_block_size`: many small entries. A file of the same size
    // holding few large values keeps one index block (a point read over
    // many L0 runs would pay a block-cache lookup per probe for nothing);
    // the flushes (one of them past the size too), the L1 files (cut at the
    // target size) and a merge of less keep one index block.
    // (value bytes, keys, merge past four target files, partitioned)
    for (value_len, keys, large, partitioned) in
        [(100usize, 8000usize, true, true), (4000, 200, true, false), (1, 1200, false, false)]
    {
        let fs = MemFs::new();
        let options = || {
            let mut o = tiny_options(Some(fs.clone()));
            o.compaction_style = ebb::CompactionStyle::Universal;
            o.num_levels = 2;
            o.write_buffer_size = 1 << 20;
            o.level0_file_num_compaction_trigger = 4;
            o.level0_slowdown_writes_trigger = 20;
            o.level0_stop_writes_trigger = 30;
            o.metadata_block_size = 256;
            o.bloom_bits_per_key = 10;
            o
        };
        let threshold = options().target_file_size_base * ebb::internals::compaction::PARTITION_ONE_FILE_PAST_TARGETS;
        let db = Db::open("/db", options()).unwrap();
        let mut model = BTreeMap::new();
        // The run below, larger than the three runs together, so that they
        // merge into L0 without it.
        for i in 0..keys {
            let (k, v) = (user_key(i), vec![b'o'; 2 * value_len + 100]);
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.compact_range(None, None).unwrap();
        for round in 0..3 {
            for i in (round..keys).step_by(4) {
                let (k, v) = (user_key(i), format!("{round}").repeat(value_len).into_bytes());
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
            db.flush(true).unwrap();
            if round == 0 {
                // One flush, not yet merged: one index block whatever its
                // size (past the threshold in the first two cases).
                let flushed = db.metrics().bytes_per_level[0];
                assert_eq!(flushed > threshold, large, "a flush of {flushed} bytes against {threshold}");
                assert!(tables(&db).iter().all(|t| t.0 == 0), "a flush keeps one index block: {:?}", tables(&db));
            }
        }
        db.wait_for_compact().unwrap();
        let m = db.metrics();
        let all = tables(&db);
        let per_round = keys as u64 / 4;
        let merged: Vec<_> = all.iter().filter(|t| t.1 > per_round).collect();
        assert_eq!((m.files_per_level[0], merged.len()), (1, 1), "the three runs merged into one L0 file: {all:?}");
        assert_eq!(merged[0].1, 3 * per_round);
        let l0_bytes = m.bytes_per_level[0];
        assert_eq!(l0_bytes > threshold, large, "an L0 file of {l0_bytes} bytes against {threshold}");
        assert_eq!(merged[0].0 > 1, partitioned, "the merge's index partitions: {all:?}");
        assert!(
            all.iter().filter(|t| t.1 <= per_round).all(|t| t.0 == 0),
            "the L1 files keep one index block: {all:?}"
        );
        let check = |db: &Db, ctx: &str| {
            for i in 0..keys + 10 {
                let k = user_key(i);
                assert_eq!(db.get(&k).unwrap().as_ref(), model.get(&k), "{ctx}: get {i}");
            }
            assert_eq!(scan(db, ReadOptions::default()), model, "{ctx}: scan");
            assert_eq!(scan_reverse(db, ReadOptions::default()), model, "{ctx}: reverse scan");
        };
        check(&db, "merged");
        db.close().unwrap();
        let db = Db::open("/db", options()).unwrap();
        check(&db, "reopened");
        db.close().unwrap();
    }
}
