//! The model test: random operations against Ebb and a `BTreeMap`, with
//! snapshots, iteration both ways (and, with a prefix extractor, bounded
//! prefix iterators through random moves and changes of direction),
//! flushes, compactions and reopens. Any difference fails with the seed and
//! step.

mod common;

use common::prefix_cursor::{bytewise, check_random_moves, PrefixCursor};
use common::{check_bounded_scans, scan, scan_reverse, tiny_options, Model};
use ebb::fs::MemFs;
use ebb::prefix::SliceTransform;
use ebb::{Db, Options, ReadOptions, WriteBatch, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn key(rng: &mut StdRng, space: u32) -> Vec<u8> {
    format!("key{:05}", rng.gen_range(0..space)).into_bytes()
}

/// A key of the single-delete space: only put when absent and single
/// deleted when present (`Db::single_delete`'s contract).
fn single_delete_key(rng: &mut StdRng) -> Vec<u8> {
    format!("sdk{:04}", rng.gen_range(0..150)).into_bytes()
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(0..120);
    (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect()
}

/// Checks point reads, a forward and reverse scan and a few seeks; with
/// the family's prefix extractor `x`, also bounded prefix iterators
/// (`prefix_same_as_start`) through random moves in both directions.
fn check_view(db: &Db, model: &Model, ro: &ReadOptions, x: Option<&dyn SliceTransform>, rng: &mut StdRng, ctx: &str) {
    if let Some(x) = x {
        check_prefix_moves(db, model, ro, x, rng, ctx);
    }
    for _ in 0..20 {
        let k = key(rng, 600);
        assert_eq!(
            db.get_opt(&k, ro).unwrap(),
            model.get(&k).cloned(),
            "{ctx}: get {:?} at {:?}; {}",
            String::from_utf8_lossy(&k),
            ro.snapshot,
            db.get_property("ebb.levelstats").unwrap_or_default()
        );
    }
    let keys: Vec<Vec<u8>> = (0..12).map(|_| key(rng, 600)).collect();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    for (k, got) in keys.iter().zip(db.multi_get(&refs, ro)) {
        assert_eq!(got.unwrap(), model.get(k).cloned(), "{ctx}: multi_get {:?}", String::from_utf8_lossy(k));
    }
    assert_eq!(&scan(db, ro.clone()), model, "{ctx}: forward scan");
    assert_eq!(&scan_reverse(db, ro.clone()), model, "{ctx}: reverse scan");
    let mut it = db.iter(ro.clone());
    for _ in 0..10 {
        let k = key(rng, 600);
        it.seek(&k);
        let want = model.range(k.clone()..).next();
        assert_eq!(
            it.valid().then(|| (it.key().to_vec(), it.value().to_vec())),
            want.map(|(a, b)| (a.clone(), b.clone())),
            "{ctx}: seek"
        );
        if it.valid() {
            it.prev();
            let want_prev = model.range(..k.clone()).next_back();
            assert_eq!(
                it.valid().then(|| it.key().to_vec()),
                want_prev.map(|(a, _)| a.clone()),
                "{ctx}: prev after seek"
            );
        }
        it.seek_for_prev(&k);
        let want = model.range(..=k.clone()).next_back();
        assert_eq!(it.valid().then(|| it.key().to_vec()), want.map(|(a, _)| a.clone()), "{ctx}: seek_for_prev");
        if it.valid() {
            it.next();
            let want_next = model.range((std::ops::Bound::Excluded(k.clone()), std::ops::Bound::Unbounded)).next();
            assert_eq!(
                it.valid().then(|| it.key().to_vec()),
                want_next.map(|(a, _)| a.clone()),
                "{ctx}: next after seek_for_prev"
            );
        }
    }
}

/// Bounded prefix iterators over the view `model` (at `ro`'s snapshot),
/// with and without bounds, through random seeks and steps, every change
/// of direction included.
fn check_prefix_moves(db: &Db, model: &Model, ro: &ReadOptions, x: &dyn SliceTransform, rng: &mut StdRng, ctx: &str) {
    for _ in 0..2 {
        let lower = rng.gen_bool(0.25).then(|| key(rng, 600));
        let upper = rng.gen_bool(0.25).then(|| key(rng, 600));
        let ro = ReadOptions {
            prefix_same_as_start: true,
            total_order_seek: rng.gen_bool(0.2),
            iterate_lower_bound: lower.clone(),
            iterate_upper_bound: upper.clone(),
            ..ro.clone()
        };
        let mut it = db.iter(ro);
        let mut want = PrefixCursor::new(model, bytewise, x, lower, upper);
        // Targets mostly keys; some cut short, outside a fixed extractor's domain.
        let mut target = |rng: &mut StdRng| {
            let k = key(rng, 600);
            if rng.gen_bool(0.1) {
                k[..rng.gen_range(0..k.len())].to_vec()
            } else {
                k
            }
        };
        check_random_moves(&mut it, &mut want, rng, 30, &mut target, ctx);
    }
}

/// Totals of background events over a run, to show the test exercised them.
#[derive(Default, Debug)]
struct Activity {
    flushes: u64,
    compactions: u64,
    trivial_moves: u64,
    intra_l0: u64,
    subcompactions: u64,
    blob_bytes_written: u64,
    blobs_relocated: u64,
}

/// What a history may hold beyond puts, deletes, single deletes and batches.
#[derive(Clone, Copy, Default)]
struct Extras {
    /// Range deletions (`delete_range`, and in batches).
    range_deletes: bool,
}

fn run_seed(seed: u64, opts_for: &dyn Fn() -> Options, epochs: usize, ops_per_epoch: usize) -> Activity {
    run_seed_with(seed, opts_for, epochs, ops_per_epoch, Extras::default())
}

fn run_seed_with(
    seed: u64,
    opts_for: &dyn Fn() -> Options,
    epochs: usize,
    ops_per_epoch: usize,
    extras: Extras,
) -> Activity {
    let mut activity = Activity::default();
    let mut rng = StdRng::seed_from_u64(seed);
    let path = std::path::PathBuf::from(format!("/model-{seed}"));
    let mut model = Model::new();
    // With a merge operator, some puts are merges; the model applies the
    // operator to its value (the operators themselves are unit-tested).
    let merge = opts_for().merge_operator.clone();
    // With a prefix extractor, views are also read through bounded prefix
    // iterators.
    let x = opts_for().prefix_extractor.clone();
    let uint64 = merge.as_ref().is_some_and(|op| op.name() == "UInt64AddOperator");
    let operand = |rng: &mut StdRng| if uint64 { rng.gen_range(0..1000u64).to_le_bytes().to_vec() } else { value(rng) };
    let merged = |model: &Model, k: &[u8], operand: &[u8]| {
        merge.as_ref().and_then(|op| op.full_merge(k, model.get(k).map(Vec::as_slice), &[operand])).unwrap()
    };
    for epoch in 0..epochs {
        let db = Db::open(&path, opts_for()).unwrap_or_else(|e| panic!("seed {seed} epoch {epoch}: open: {e}"));
        assert_eq!(scan(&db, ReadOptions::default()), model, "seed {seed} epoch {epoch}: state after reopen");
        let mut snaps = Vec::new();
        for step in 0..ops_per_epoch {
            let ctx = format!("seed {seed} epoch {epoch} step {step}");
            match rng.gen_range(0..100) {
                0..=44 if rng.gen_bool(0.25) => {
                    // Keys written under single delete's contract: put when
                    // absent, single deleted when present (one put since the
                    // last single delete, never a plain delete).
                    let k = single_delete_key(&mut rng);
                    if model.remove(&k).is_some() {
                        db.single_delete(&k).unwrap();
                    } else {
                        let v = value(&mut rng);
                        db.put(&k, &v).unwrap();
                        model.insert(k, v);
                    }
                }
                0..=44 if merge.is_some() && rng.gen_bool(0.4) => {
                    let (k, v) = (key(&mut rng, 600), operand(&mut rng));
                    db.merge(&k, &v).unwrap();
                    let m = merged(&model, &k, &v);
                    model.insert(k, m);
                }
                0..=44 => {
                    let (k, v) = (key(&mut rng, 600), value(&mut rng));
                    db.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                45..=59 if extras.range_deletes && rng.gen_bool(0.3) => {
                    // Mostly narrow ranges, sometimes wide; now and then
                    // reversed (refused) or empty.
                    let a = key(&mut rng, 600);
                    let width = if rng.gen_bool(0.9) { rng.gen_range(0..30) } else { rng.gen_range(0..300) };
                    let b = format!("key{:05}", String::from_utf8_lossy(&a[3..]).parse::<u32>().unwrap() + width)
                        .into_bytes();
                    if rng.gen_bool(0.05) {
                        assert!(db.delete_range(&b, &a).is_err() || a == b, "{ctx}: a reversed range is refused");
                    } else {
                        if rng.gen_bool(0.3) {
                            let mut batch = WriteBatch::new();
                            batch.delete_range(&a, &b);
                            db.write(&batch).unwrap();
                        } else {
                            db.delete_range(&a, &b).unwrap();
                        }
                        let doomed: Vec<Vec<u8>> = model.range(a.clone()..b.clone()).map(|(k, _)| k.clone()).collect();
                        for k in doomed {
                            model.remove(&k);
                        }
                    }
                }
                45..=59 => {
                    let k = key(&mut rng, 600);
                    db.delete(&k).unwrap();
                    model.remove(&k);
                }
                60..=69 => {
                    let mut b = WriteBatch::new();
                    for _ in 0..rng.gen_range(1..10) {
                        if rng.gen_bool(0.15) {
                            let k = single_delete_key(&mut rng);
                            if model.remove(&k).is_some() {
                                b.single_delete(&k);
                            } else {
                                let v = value(&mut rng);
                                b.put(&k, &v);
                                model.insert(k, v);
                            }
                            continue;
                        }
                        let k = key(&mut rng, 600);
                        if merge.is_some() && rng.gen_bool(0.3) {
                            let v = operand(&mut rng);
                            b.merge(&k, &v);
                            let m = merged(&model, &k, &v);
                            model.insert(k, m);
                        } else if rng.gen_bool(0.7) {
                            let v = value(&mut rng);
                            b.put(&k, &v);
                            model.insert(k, v);
                        } else {
                            b.delete(&k);
                            model.remove(&k);
                        }
                    }
                    let wo = WriteOptions { sync: rng.gen_bool(0.1), disable_wal: false };
                    db.write_opt(&b, &wo).unwrap();
                }
                70..=79 => {
                    let k = key(&mut rng, 600);
                    assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "{ctx}: get");
                }
                80..=82 => {
                    if snaps.len() < 4 {
                        snaps.push((db.snapshot(), model.clone()));
                    } else {
                        snaps.remove(rng.gen_range(0..snaps.len()));
                    }
                }
                83..=86 => {
                    if !snaps.is_empty() {
                        let i = rng.gen_range(0..snaps.len());
                        let ro = snaps[i].0.read_options();
                        check_view(&db, &snaps[i].1, &ro, x.as_deref(), &mut rng, &format!("{ctx} snapshot"));
                    }
                }
                87..=89 => check_view(&db, &model, &ReadOptions::default(), x.as_deref(), &mut rng, &ctx),
                90..=93 => db.flush(rng.gen_bool(0.5)).unwrap(),
                94..=95 => {
                    let a = key(&mut rng, 600);
                    let b = key(&mut rng, 600);
                    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                    db.compact_range(Some(&lo), Some(&hi)).unwrap();
                }
                _ => {
                    // Range scan with bounds.
                    let a = key(&mut rng, 600);
                    let b = key(&mut rng, 600);
                    check_bounded_scans(&db, &model, a, b, &ctx);
                }
            }
        }
        let ctx = format!("seed {seed} epoch {epoch} end");
        check_view(&db, &model, &ReadOptions::default(), x.as_deref(), &mut rng, &ctx);
        for (s, m) in &snaps {
            assert_eq!(&scan(&db, s.read_options()), m, "seed {seed} epoch {epoch}: snapshot at end");
        }
        drop(snaps);
        let m = db.metrics();
        activity.flushes += m.flushes;
        activity.compactions += m.level_compaction.iter().skip(1).map(|l| l.count).sum::<u64>();
        activity.trivial_moves += m.trivial_moves;
        activity.intra_l0 += m.intra_l0_compactions;
        activity.subcompactions += m.split_compactions.1;
        activity.blob_bytes_written += m.blob_bytes_written;
        activity.blobs_relocated += m.blobs_relocated;
        if rng.gen_bool(0.5) {
            db.close().unwrap();
        } else {
            drop(db);
        }
    }
    activity
}

#[test]
fn model_on_memfs_many_seeds() {
    let mut total = Activity::default();
    for seed in 0..12 {
        let fs = MemFs::new();
        // Odd seeds read through a tiny clock cache holding index and filter
        // blocks too; even seeds through a tiny LRU (issue 6's model rerun).
        let opts = || {
            let mut o = tiny_options(Some(fs.clone()));
            o.block_cache_size = 16 * 1024;
            if seed % 2 == 1 {
                o.set("block_cache_type", "kHyperClockCache").unwrap();
                o.cache_index_and_filter_blocks = true;
                o.pin_l0_filter_and_index_blocks_in_cache = seed % 4 == 1;
                if seed % 4 == 3 {
                    o.compressed_secondary_cache_size = 64 * 1024;
                }
            } else if seed % 4 == 0 {
                // A compressed secondary cache under the tiny LRU: blocks
                // go down to it and come back up all the time.
                o.compressed_secondary_cache_size = 64 * 1024;
            }
            // Every third seed with a prefix extractor: tables hold prefix
            // blooms and memtable inserts land near their prefix's hint
            // (groups of ten keys share a 7-byte prefix).
            if seed % 3 == 2 {
                o.prefix_extractor = Some(ebb::prefix::fixed(7));
            }
            o
        };
        let a = run_seed(seed, &opts, 4, 1500);
        total.flushes += a.flushes;
        total.compactions += a.compactions;
        total.trivial_moves += a.trivial_moves;
        total.intra_l0 += a.intra_l0;
        total.subcompactions += a.subcompactions;
    }
    // The run must have exercised the background machinery it claims to test.
    assert!(total.flushes >= 100, "{total:?}");
    assert!(total.compactions >= 100, "{total:?}");
    assert!(total.trivial_moves > 0, "{total:?}");
    assert!(total.subcompactions > 0, "{total:?}");
    eprintln!("model activity: {total:?}");
}

/// The same histories with blob files: values are 0 to 119 bytes and
/// `min_blob_size` is 40, so both kinds of values occur (and a key's
/// versions are of both kinds); blob files are small, so there are many;
/// odd seeds collect garbage (relocating blobs and forcing compactions), and
/// every third seed compresses blobs.
#[test]
fn model_with_blob_files() {
    let mut total = Activity::default();
    for seed in 20..26 {
        let fs = MemFs::new();
        let opts = || {
            let mut o = tiny_options(Some(fs.clone()));
            o.enable_blob_files = true;
            o.min_blob_size = 40;
            o.blob_file_size = 4096;
            o.enable_blob_garbage_collection = seed % 2 == 1;
            o.blob_garbage_collection_age_cutoff = 0.5;
            o.blob_garbage_collection_force_threshold = 0.5;
            if seed % 3 == 0 {
                o.blob_compression_type = ebb::CompressionType::Lz4;
            }
            o
        };
        let a = run_seed(seed, &opts, 3, 1500);
        total.flushes += a.flushes;
        total.compactions += a.compactions;
        total.blob_bytes_written += a.blob_bytes_written;
        total.blobs_relocated += a.blobs_relocated;
    }
    assert!(total.flushes >= 50 && total.compactions >= 50, "{total:?}");
    assert!(total.blob_bytes_written > 0 && total.blobs_relocated > 0, "{total:?}");
    eprintln!("model with blob files: {total:?}");
}

/// The histories with merges, through each built-in operator (stringappend
/// shows any misordered operand), both compaction styles that keep data,
/// blob files (values below operands read back from them) and
/// `max_successive_merges` (operands folded into values as they are
/// written).
#[test]
fn model_with_merges() {
    let mut total = Activity::default();
    for seed in 40..48 {
        let fs = MemFs::new();
        let opts = || {
            let mut o = tiny_options(Some(fs.clone()));
            let name = ["stringappend", "uint64add", "max", "put"][seed as usize % 4];
            o.merge_operator = Some(ebb::merge_operator::from_name(name).unwrap());
            if seed % 3 == 1 {
                o.compaction_style = ebb::CompactionStyle::Universal;
            }
            if seed % 4 == 2 {
                o.enable_blob_files = true;
                o.min_blob_size = 40;
                o.blob_file_size = 4096;
            }
            if seed % 5 == 3 {
                o.max_successive_merges = 3;
            }
            // Even seeds with a prefix extractor (groups of ten keys), half
            // of them with a memtable prefix bloom: merges read through
            // bounded prefix iterators.
            if seed % 2 == 0 {
                o.prefix_extractor = Some(ebb::prefix::fixed(7));
                if seed % 4 == 0 {
                    o.memtable_prefix_bloom_size_ratio = 0.1;
                }
            }
            o
        };
        let a = run_seed(seed, &opts, 3, 1500);
        total.flushes += a.flushes;
        total.compactions += a.compactions;
    }
    assert!(total.flushes >= 50 && total.compactions >= 50, "{total:?}");
    eprintln!("model with merges: {total:?}");
}

/// The histories with range deletions (alone, in batches, over every kind
/// of version, under snapshots), through flushes and compactions of both
/// styles that keep data, with merges for some seeds and blob files for
/// others.
#[test]
fn model_with_range_deletions() {
    let mut total = Activity::default();
    for seed in 60..70 {
        let fs = MemFs::new();
        let opts = || {
            let mut o = tiny_options(Some(fs.clone()));
            if seed % 3 == 1 {
                o.compaction_style = ebb::CompactionStyle::Universal;
            }
            if seed % 4 == 2 {
                o.merge_operator = Some(ebb::merge_operator::from_name("stringappend").unwrap());
            }
            if seed % 5 == 3 {
                o.enable_blob_files = true;
                o.min_blob_size = 40;
                o.blob_file_size = 4096;
            }
            // Even seeds with a prefix extractor (groups of a hundred keys,
            // so ranges fall inside prefixes and across them), half of them
            // with only prefixes in the filters: range deletions read
            // through bounded prefix iterators.
            if seed % 2 == 0 {
                o.prefix_extractor = Some(ebb::prefix::fixed(6));
                o.whole_key_filtering = seed % 4 != 0;
            }
            o
        };
        let a = run_seed_with(seed, &opts, 3, 1500, Extras { range_deletes: true });
        total.flushes += a.flushes;
        total.compactions += a.compactions;
        total.trivial_moves += a.trivial_moves;
    }
    assert!(total.flushes >= 50 && total.compactions >= 50, "{total:?}");
    eprintln!("model with range deletions: {total:?}");
}

#[test]
fn model_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_path_buf();
    for seed in 100..103 {
        let mut rng = StdRng::seed_from_u64(seed);
        let _ = &mut rng;
        let path = base.join(format!("db{seed}"));
        let opts = move || {
            let mut o = tiny_options(None);
            o.compression = ebb::CompressionType::Lz4;
            o
        };
        run_seed_at(seed, &path, &opts);
    }
}

fn run_seed_at(seed: u64, path: &std::path::Path, opts: &dyn Fn() -> Options) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    for epoch in 0..3 {
        let db = Db::open(path, opts()).unwrap();
        assert_eq!(scan(&db, ReadOptions::default()), model, "seed {seed} epoch {epoch} reopen");
        for _ in 0..2000 {
            let k = key(&mut rng, 600);
            if rng.gen_bool(0.75) {
                let v = value(&mut rng);
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            } else {
                db.delete(&k).unwrap();
                model.remove(&k);
            }
        }
        check_view(&db, &model, &ReadOptions::default(), None, &mut rng, &format!("disk seed {seed} epoch {epoch}"));
        db.close().unwrap();
    }
}
