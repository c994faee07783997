//! Bounded prefix iterators (`prefix_same_as_start`) under random move
//! sequences: every seek kind, `next` and `prev` in any order (so every
//! change of direction), compared after each move with a total-order model
//! restricted to the start prefix (`common::prefix_cursor`).
//!
//! Each case draws a prefix extractor (fixed or capped, 1 to 3 bytes); the
//! prefix accelerations (table filters with whole keys and prefixes, with
//! prefixes only, partitioned, or none; a memtable prefix bloom or not);
//! the order (bytewise, reverse bytewise, or bytewise as a user comparator,
//! which turns the memtable's prefix firsts off); values in blob files or
//! not; a layout (keys in the bottom level, in levels left by automatic
//! compaction, in L0 tables, in immutable memtables and in the memtable);
//! puts, deletes, merges and range deletions whose ends fall on either side
//! of prefix boundaries; and iterators with or without bounds, at the
//! latest state or at a snapshot, with `total_order_seek` or not, with
//! writes made while they are open.
//!
//! `EBB_PREFIX_MOVES_CASES` sets the number of cases (default 300),
//! `EBB_PREFIX_MOVES_BASE` the first case's seed (default 0), and
//! `EBB_PREFIX_MOVES_SEED` runs that one case alone. A failure names its
//! seed, the case's options and layout, and the moves that led to it.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::prefix_cursor::{bytewise, reverse_bytewise, Order, PrefixCursor};
use common::{tiny_options, Model};
use ebb::comparator::{self, Comparator};
use ebb::fs::MemFs;
use ebb::prefix::{self, SliceTransform};
use ebb::{merge_operator, Db, ReadOptions, Snapshot};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Keys are drawn over this alphabet; seek targets also use `0` and `d`,
/// which fall before and after every key byte.
const ALPHABET: &[u8] = b"abc";

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v} is not a number")))
}

fn show(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

/// A key of 1 to `n + 2` bytes: prefixes of `n` bytes are shared by many
/// keys, and some keys are shorter than the prefix.
fn random_key(rng: &mut StdRng, n: usize) -> Vec<u8> {
    let len = rng.gen_range(1..=n + 2);
    (0..len).map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())]).collect()
}

/// A seek target: mostly a key, sometimes one with a byte outside the
/// keys' alphabet (between prefixes), sometimes empty.
fn random_target(rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut k = random_key(rng, n);
    match rng.gen_range(0..10) {
        0 => Vec::new(),
        1 => {
            let i = rng.gen_range(0..k.len());
            k[i] = if rng.gen_bool(0.5) { b'0' } else { b'd' };
            k
        }
        2 => {
            k.push(b'0');
            k
        }
        _ => k,
    }
}

/// Counts of what the cases covered, printed at the end.
#[derive(Default, Debug)]
struct Coverage {
    cases: u64,
    iterators: u64,
    moves: BTreeMap<&'static str, u64>,
    /// A `next` after a reverse move, or a `prev` after a forward one, from
    /// a valid position, and how many of those landed on a key.
    direction_changes: u64,
    direction_changes_valid: u64,
    layouts: BTreeMap<&'static str, u64>,
    tables_skipped: u64,
    /// Cases with a level of L1 or deeper made of several files, and with
    /// keys in two such levels at once.
    multi_file_levels: u64,
    two_sorted_levels: u64,
    writes_while_open: u64,
    snapshots: u64,
    bounded: u64,
    total_order: u64,
}

/// The bytewise order as user code: the engine keeps memtable prefix
/// firsts and its other shortcuts for built-in orders only.
struct UserBytewise;

impl Comparator for UserBytewise {
    fn name(&self) -> &str {
        "test.UserBytewise"
    }
    fn compare(&self, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        a.cmp(b)
    }
}

struct Case {
    seed: u64,
    order: Order,
    rng: StdRng,
    n: usize,
    x: Arc<dyn SliceTransform>,
    model: Model,
    counter: u64,
    about: Vec<String>,
}

impl Case {
    fn value(&mut self) -> Vec<u8> {
        self.counter += 1;
        let pad = self.rng.gen_range(0..40);
        format!("v{}{}", self.counter, "x".repeat(pad)).into_bytes()
    }

    /// `ops` random writes to `db`, mirrored in the model.
    fn write(&mut self, db: &Db, ops: usize) {
        for _ in 0..ops {
            let k = random_key(&mut self.rng, self.n);
            match self.rng.gen_range(0..100) {
                0..=59 => {
                    let v = self.value();
                    db.put(&k, &v).unwrap();
                    self.model.insert(k, v);
                }
                60..=74 => {
                    db.delete(&k).unwrap();
                    self.model.remove(&k);
                }
                75..=91 => {
                    self.counter += 1;
                    let operand = format!("m{}", self.counter).into_bytes();
                    db.merge(&k, &operand).unwrap();
                    let merged = match self.model.get(&k) {
                        Some(v) => [v.as_slice(), b",", &operand].concat(),
                        None => operand,
                    };
                    self.model.insert(k, merged);
                }
                _ => {
                    // Ends drawn as keys fall on either side of prefix
                    // boundaries; short ranges keep most keys alive.
                    let mut other = k.clone();
                    if self.rng.gen_bool(0.5) {
                        other.push(ALPHABET[self.rng.gen_range(0..ALPHABET.len())]);
                    } else {
                        let last = other.len() - 1;
                        other[last] += 1;
                    }
                    let (begin, end) = if (self.order)(&k, &other).is_lt() { (k, other) } else { (other, k) };
                    db.delete_range(&begin, &end).unwrap();
                    let order = self.order;
                    self.model.retain(|k, _| order(k, &begin).is_lt() || !order(k, &end).is_lt());
                }
            }
        }
    }
}

/// The options a case reads with, drawn.
struct Read {
    total_order_seek: bool,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    at_snapshot: bool,
}

fn run_case(seed: u64, cov: &mut Coverage) -> Result<(), String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let n = rng.gen_range(1..=3);
    let capped = rng.gen_bool(0.3);
    let x = if capped { prefix::capped(n) } else { prefix::fixed(n) };
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs));
    let (order, order_name): (Order, &str) = match rng.gen_range(0..4) {
        0 => {
            o.comparator = Some(comparator::reverse_bytewise());
            (reverse_bytewise, "reverse bytewise")
        }
        1 => {
            o.comparator = Some(Arc::new(UserBytewise));
            (bytewise, "user bytewise (no memtable prefix firsts)")
        }
        _ => (bytewise, "bytewise"),
    };
    o.disable_auto_compactions = true;
    // Memtables switch only when a case asks: with background work
    // paused, a full memtable would otherwise wait for a flush forever.
    o.write_buffer_size = 1 << 20;
    o.max_write_buffer_number = 8;
    o.target_file_size_base = 1024;
    o.max_bytes_for_level_base = 4096;
    o.level_compaction_dynamic_level_bytes = false;
    o.block_size = 256;
    o.prefix_extractor = Some(Arc::clone(&x));
    o.merge_operator = Some(merge_operator::from_name("stringappend").unwrap());
    let filter = rng.gen_range(0..4);
    o.bloom_bits_per_key = if filter == 0 { 0 } else { 10 };
    o.whole_key_filtering = filter != 1;
    if filter == 3 {
        o.index_type = ebb::IndexType::TwoLevelIndexSearch;
        o.partition_filters = true;
        o.metadata_block_size = 128;
    }
    // Longer values in blob files, in one case of four.
    let blobs = rng.gen_bool(0.25);
    if blobs {
        o.enable_blob_files = true;
        o.min_blob_size = 20;
    }
    let mem_bloom = rng.gen_bool(0.5);
    o.memtable_prefix_bloom_size_ratio = if mem_bloom { 0.1 } else { 0.0 };
    let mut about = vec![format!(
        "{order_name} {} filters={} memtable_prefix_bloom={mem_bloom} blob_files={blobs}",
        x.name(),
        ["none", "prefixes only", "whole keys and prefixes", "partitioned"][filter]
    )];
    let db = Db::open("/db", o).map_err(|e| e.to_string())?;
    let mut case = Case { seed, order, rng, n, x, model: Model::new(), counter: 0, about: Vec::new() };

    let mut layout = Vec::new();
    let mut snapshot: Option<(Snapshot<'_>, Model)> = None;
    if case.rng.gen_bool(0.6) {
        let ops = case.rng.gen_range(50..300);
        case.write(&db, ops);
        db.flush(true).unwrap();
        db.compact_range(None, None).unwrap();
        layout.push("bottom level");
        maybe_snapshot(&db, &mut case, &mut snapshot);
    }
    if case.rng.gen_bool(0.4) {
        for _ in 0..case.rng.gen_range(2..5) {
            let ops = case.rng.gen_range(30..150);
            case.write(&db, ops);
            db.flush(true).unwrap();
        }
        db.set_options(&[("disable_auto_compactions", "false")]).unwrap();
        db.wait_for_compact().unwrap();
        db.set_options(&[("disable_auto_compactions", "true")]).unwrap();
        layout.push("compacted levels");
        maybe_snapshot(&db, &mut case, &mut snapshot);
    }
    let l0_tables = case.rng.gen_range(0..3);
    for _ in 0..l0_tables {
        let ops = case.rng.gen_range(10..80);
        case.write(&db, ops);
        db.flush(true).unwrap();
        maybe_snapshot(&db, &mut case, &mut snapshot);
    }
    if l0_tables > 0 {
        layout.push("L0 tables");
    }
    let paused = case.rng.gen_bool(0.4);
    if paused {
        db.pause_background_work();
        for _ in 0..case.rng.gen_range(1..3) {
            let ops = case.rng.gen_range(10..60);
            case.write(&db, ops);
            db.flush(false).unwrap();
            maybe_snapshot(&db, &mut case, &mut snapshot);
        }
        layout.push("immutable memtables");
    }
    let ops = case.rng.gen_range(0..60);
    case.write(&db, ops);
    if ops > 0 {
        layout.push("memtable");
    }
    maybe_snapshot(&db, &mut case, &mut snapshot);
    for l in &layout {
        *cov.layouts.entry(l).or_default() += 1;
    }
    let files: Vec<u64> = (1..4)
        .map(|l| db.get_property(&format!("ebb.num-files-at-level{l}")).and_then(|v| v.parse().ok()).unwrap_or(0))
        .collect();
    cov.multi_file_levels += u64::from(files.iter().any(|&f| f > 1));
    cov.two_sorted_levels += u64::from(files.iter().filter(|&&f| f > 0).count() > 1);
    about.push(format!("layout: {}", layout.join(", ")));
    about.push(db.get_property("ebb.levelstats").unwrap_or_default().replace('\n', " | "));
    case.about = about;

    for _ in 0..4 {
        let read = Read {
            total_order_seek: case.rng.gen_bool(0.2),
            lower: case.rng.gen_bool(0.25).then(|| random_target(&mut case.rng, n)),
            upper: case.rng.gen_bool(0.25).then(|| random_target(&mut case.rng, n)),
            at_snapshot: snapshot.is_some() && case.rng.gen_bool(0.4),
        };
        check_iterator(&db, &mut case, &read, snapshot.as_ref(), cov)?;
    }
    drop(snapshot);
    if paused {
        db.continue_background_work();
    }
    cov.cases += 1;
    db.close().map_err(|e| e.to_string())
}

/// Sometimes takes a snapshot (at most one a case), with the model then.
fn maybe_snapshot<'d>(db: &'d Db, case: &mut Case, snapshot: &mut Option<(Snapshot<'d>, Model)>) {
    if snapshot.is_none() && case.rng.gen_bool(0.15) {
        *snapshot = Some((db.snapshot(), case.model.clone()));
    }
}

/// One iterator through a random sequence of moves, checked after each.
fn check_iterator(
    db: &Db,
    case: &mut Case,
    read: &Read,
    snapshot: Option<&(Snapshot<'_>, Model)>,
    cov: &mut Coverage,
) -> Result<(), String> {
    let ro = ReadOptions {
        prefix_same_as_start: true,
        total_order_seek: read.total_order_seek,
        iterate_lower_bound: read.lower.clone(),
        iterate_upper_bound: read.upper.clone(),
        snapshot: snapshot.filter(|_| read.at_snapshot).map(|(s, _)| s),
        ..ReadOptions::default()
    };
    let skipped_before = ticker(db, "rocksdb.bloom.filter.prefix.useful");
    let view = match snapshot {
        Some((_, m)) if read.at_snapshot => m.clone(),
        _ => case.model.clone(),
    };
    let x = Arc::clone(&case.x);
    let mut it = db.iter(ro);
    let mut want = PrefixCursor::new(&view, case.order, x.as_ref(), read.lower.clone(), read.upper.clone());
    cov.iterators += 1;
    cov.snapshots += u64::from(read.at_snapshot);
    cov.bounded += u64::from(read.lower.is_some() || read.upper.is_some());
    cov.total_order += u64::from(read.total_order_seek);
    let mut trace = vec![format!(
        "iterator: total_order_seek={} lower={:?} upper={:?} at_snapshot={}",
        read.total_order_seek,
        read.lower.as_deref().map(show),
        read.upper.as_deref().map(show),
        read.at_snapshot
    )];
    // Whether the last move went forwards (seek, seek_to_first, next).
    let mut forward = true;
    for _ in 0..40 {
        if case.rng.gen_bool(0.1) {
            let ops = case.rng.gen_range(1..6);
            case.write(db, ops);
            cov.writes_while_open += 1;
            trace.push(format!("{ops} writes"));
        }
        let reposition = !it.valid() || case.rng.gen_bool(0.15);
        let name: &'static str = if reposition {
            match case.rng.gen_range(0..10) {
                0..=3 => "seek",
                4..=7 => "seek_for_prev",
                8 => "seek_to_first",
                _ => "seek_to_last",
            }
        } else if case.rng.gen_bool(0.5) {
            "next"
        } else {
            "prev"
        };
        *cov.moves.entry(name).or_default() += 1;
        let turns = (name == "next" && !forward) || (name == "prev" && forward);
        match name {
            "seek" | "seek_for_prev" => {
                let t = random_target(&mut case.rng, case.n);
                trace.push(format!("{name}({:?})", show(&t)));
                if name == "seek" {
                    it.seek(&t);
                    want.seek(&t);
                    forward = true;
                } else {
                    it.seek_for_prev(&t);
                    want.seek_for_prev(&t);
                    forward = false;
                }
            }
            "seek_to_first" => {
                trace.push(name.to_string());
                it.seek_to_first();
                want.seek_to_first();
                forward = true;
            }
            "seek_to_last" => {
                trace.push(name.to_string());
                it.seek_to_last();
                want.seek_to_last();
                forward = false;
            }
            "next" => {
                trace.push(name.to_string());
                it.next();
                want.next();
                forward = true;
            }
            _ => {
                trace.push(name.to_string());
                it.prev();
                want.prev();
                forward = false;
            }
        }
        let got = it.valid().then(|| (it.key().to_vec(), it.value().to_vec()));
        let expected = want.current();
        if turns {
            cov.direction_changes += 1;
            cov.direction_changes_valid += u64::from(expected.is_some());
        }
        let status = it.status();
        if got != expected || status.is_err() {
            let fmt = |e: &Option<(Vec<u8>, Vec<u8>)>| match e {
                Some((k, v)) => format!("{:?} = {:?}", show(k), show(v)),
                None => "invalid".to_string(),
            };
            return Err(format!(
                "seed {}: after {}: got {} (status {:?}), want {}\n  {}\n  {}\n  view: {:?}",
                case.seed,
                trace.last().unwrap(),
                fmt(&got),
                status,
                fmt(&expected),
                case.about.join("\n  "),
                trace.join(", "),
                view.keys().map(|k| show(k)).collect::<Vec<_>>(),
            ));
        }
    }
    cov.tables_skipped += ticker(db, "rocksdb.bloom.filter.prefix.useful") - skipped_before;
    Ok(())
}

/// A ticker of the statistics dump.
fn ticker(db: &Db, name: &str) -> u64 {
    let text = db.get_property("ebb.options-statistics").unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(&format!("{name} COUNT")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn prefix_iterators_agree_with_the_model_through_every_change_of_direction() {
    let mut cov = Coverage::default();
    if let Some(seed) = env_u64("EBB_PREFIX_MOVES_SEED") {
        run_case(seed, &mut cov).unwrap_or_else(|e| panic!("{e}"));
        return;
    }
    let base = env_u64("EBB_PREFIX_MOVES_BASE").unwrap_or(0);
    let cases = env_u64("EBB_PREFIX_MOVES_CASES").unwrap_or(300);
    for seed in base..base + cases {
        run_case(seed, &mut cov).unwrap_or_else(|e| panic!("{e}"));
    }
    eprintln!("prefix moves: {cov:#?}");
    // The cases must reach what they are for: changes of direction that
    // land on a key, and tables a prefix seek skipped.
    assert!(cov.direction_changes_valid > cases, "{cov:?}");
    assert!(cov.tables_skipped > 0, "{cov:?}");
}
