//! Compaction filters (issue 18 part 4; RocksDB's `CompactionFilter` and
//! `CompactionFilterFactory`), end to end: a manual compaction runs every
//! key of its range through the filter (no trivial moves, the deepest level
//! compacted into itself), removed keys are gone from gets, scans both ways
//! and reopens, changed values are what reads return, versions a snapshot
//! reads are never filtered, a factory makes one filter per compaction and
//! is told what it is for, a filter set on one column family leaves the
//! others alone, and random histories under automatic compactions in each
//! style end where a model filtered the same way ends. docs/data_model.md.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::{manual_options, scan, scan_reverse, tiny_options};
use ebb::compaction_filter::Decision;
use ebb::fs::MemFs;
use ebb::{
    ColumnFamilyOptions, CompactionFilter, CompactionFilterContext, CompactionFilterFactory, CompactionStyle, Db,
    Options, ReadOptions,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Removes `tmp/` keys, upper-cases the values of `up/` keys (idempotent, so
/// asking twice changes nothing more), keeps the rest; counts its calls.
#[derive(Default)]
struct TmpAndUpper {
    calls: AtomicUsize,
}

impl CompactionFilter for TmpAndUpper {
    fn name(&self) -> &str {
        "tmp-and-upper"
    }

    fn filter(&self, _level: usize, key: &[u8], value: &[u8]) -> Decision {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if key.starts_with(b"tmp/") {
            Decision::Remove
        } else if key.starts_with(b"up/") {
            Decision::ChangeValue(value.to_ascii_uppercase())
        } else {
            Decision::Keep
        }
    }
}

/// What the filter makes of a model: the state a full compaction leaves.
fn filtered(model: &BTreeMap<Vec<u8>, Vec<u8>>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    model
        .iter()
        .filter(|(k, _)| !k.starts_with(b"tmp/"))
        .map(|(k, v)| (k.clone(), if k.starts_with(b"up/") { v.to_ascii_uppercase() } else { v.clone() }))
        .collect()
}

fn with_filter(mut o: Options, f: &Arc<TmpAndUpper>) -> Options {
    o.compaction_filter = Some(Arc::clone(f) as Arc<dyn CompactionFilter>);
    o
}

fn key(prefix: &str, i: u32) -> Vec<u8> {
    format!("{prefix}{i:04}").into_bytes()
}

#[test]
fn a_manual_compaction_removes_and_changes_what_the_filter_says_everywhere() {
    let fs = MemFs::new();
    let filter = Arc::new(TmpAndUpper::default());
    let db = Db::open("/cf", with_filter(manual_options(&fs), &filter)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..300u32 {
        for prefix in ["keep/", "tmp/", "up/"] {
            let v = format!("value-{i}").into_bytes();
            db.put(&key(prefix, i), &v).unwrap();
            model.insert(key(prefix, i), v);
        }
        if i % 100 == 99 {
            db.flush(true).unwrap();
        }
    }
    // Before any compaction the filter has been asked nothing and every key reads as written.
    assert_eq!(filter.calls.load(Ordering::Relaxed), 0);
    assert_eq!(scan(&db, ReadOptions::default()), model);
    db.compact_range(None, None).unwrap();
    let want = filtered(&model);
    assert!(filter.calls.load(Ordering::Relaxed) >= 900, "every key asked about");
    let check = |db: &Db, when: &str| {
        assert_eq!(scan(db, ReadOptions::default()), want, "{when}: forward scan");
        assert_eq!(scan_reverse(db, ReadOptions::default()), want, "{when}: reverse scan");
        for i in (0..300u32).step_by(7) {
            assert_eq!(db.get(&key("tmp/", i)).unwrap(), None, "{when}: a removed key reads");
            assert_eq!(db.get(&key("up/", i)).unwrap(), Some(format!("VALUE-{i}").into_bytes()), "{when}");
            assert_eq!(db.get(&key("keep/", i)).unwrap(), Some(format!("value-{i}").into_bytes()), "{when}");
        }
    };
    check(&db, "after compaction");
    // A second full compaction (the deepest level into itself) asks again,
    // and an idempotent filter leaves the same state.
    let calls = filter.calls.load(Ordering::Relaxed);
    db.compact_range(None, None).unwrap();
    assert!(filter.calls.load(Ordering::Relaxed) > calls, "the deepest level was not rewritten through the filter");
    check(&db, "after a second compaction");
    drop(db);
    let db = Db::open("/cf", with_filter(manual_options(&fs), &filter)).unwrap();
    check(&db, "after reopen");
}

#[test]
fn versions_a_snapshot_reads_are_not_filtered() {
    let fs = MemFs::new();
    let filter = Arc::new(TmpAndUpper::default());
    let db = Db::open("/snap", with_filter(manual_options(&fs), &filter)).unwrap();
    db.put(b"tmp/a", b"old").unwrap();
    db.put(b"up/b", b"old").unwrap();
    db.put(b"tmp/d", b"only-old").unwrap();
    let snap = db.snapshot();
    db.put(b"tmp/a", b"new").unwrap();
    db.put(b"up/b", b"new").unwrap();
    db.put(b"tmp/c", b"only-new").unwrap();
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    // The snapshot reads what it read before the compaction.
    let at_snap = snap.read_options();
    assert_eq!(db.get_opt(b"tmp/a", &at_snap).unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get_opt(b"up/b", &at_snap).unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get_opt(b"tmp/c", &at_snap).unwrap(), None);
    // A newest version the snapshot reads is not filtered either, so the
    // present still reads it too.
    assert_eq!(db.get_opt(b"tmp/d", &at_snap).unwrap(), Some(b"only-old".to_vec()));
    assert_eq!(db.get(b"tmp/d").unwrap(), Some(b"only-old".to_vec()));
    // The present reads the newer versions filtered.
    assert_eq!(db.get(b"tmp/a").unwrap(), None);
    assert_eq!(db.get(b"up/b").unwrap(), Some(b"NEW".to_vec()));
    assert_eq!(db.get(b"tmp/c").unwrap(), None);
    // Without the snapshot, the old versions go too.
    drop(snap);
    db.compact_range(None, None).unwrap();
    let mut want = BTreeMap::new();
    want.insert(b"up/b".to_vec(), b"NEW".to_vec());
    assert_eq!(scan(&db, ReadOptions::default()), want);
}

/// Makes a [`TmpAndUpper`] per compaction and records each context.
#[derive(Default)]
struct Factory {
    contexts: Mutex<Vec<CompactionFilterContext>>,
}

impl CompactionFilterFactory for Factory {
    fn name(&self) -> &str {
        "tmp-and-upper-factory"
    }

    fn create_compaction_filter(&self, context: &CompactionFilterContext) -> Option<Box<dyn CompactionFilter>> {
        self.contexts.lock().unwrap().push(*context);
        Some(Box::new(TmpAndUpper::default()))
    }
}

#[test]
fn a_factory_makes_a_filter_per_compaction_and_is_told_what_it_is_for() {
    let fs = MemFs::new();
    let factory = Arc::new(Factory::default());
    let mut o = manual_options(&fs);
    o.compaction_filter_factory = Some(Arc::clone(&factory) as Arc<dyn CompactionFilterFactory>);
    let db = Db::open("/factory", o).unwrap();
    for i in 0..200u32 {
        db.put(&key("tmp/", i), b"x").unwrap();
        db.put(&key("up/", i), b"x").unwrap();
    }
    db.flush(true).unwrap();
    assert!(factory.contexts.lock().unwrap().is_empty(), "a flush made a compaction filter");
    db.compact_range(None, None).unwrap();
    let contexts = factory.contexts.lock().unwrap().clone();
    assert!(!contexts.is_empty());
    assert!(contexts.iter().all(|c| c.is_manual_compaction && c.column_family_id == 0), "{contexts:?}");
    assert!(contexts.iter().any(|c| c.is_full_compaction), "{contexts:?}");
    let want: BTreeMap<Vec<u8>, Vec<u8>> = (0..200u32).map(|i| (key("up/", i), b"X".to_vec())).collect();
    assert_eq!(scan(&db, ReadOptions::default()), want);
}

#[test]
fn a_filter_on_one_column_family_leaves_the_others_alone() {
    let fs = MemFs::new();
    let filter = Arc::new(TmpAndUpper::default());
    let db = Db::open("/families", manual_options(&fs)).unwrap();
    let mut cf_opts = ColumnFamilyOptions::from(&manual_options(&fs));
    cf_opts.compaction_filter = Some(Arc::clone(&filter) as Arc<dyn CompactionFilter>);
    let filtered_cf = db.create_column_family("filtered", cf_opts).unwrap();
    for i in 0..100u32 {
        db.put(&key("tmp/", i), b"v").unwrap();
        db.put_cf(&filtered_cf, &key("tmp/", i), b"v").unwrap();
    }
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    db.compact_range_cf(&filtered_cf, None, None).unwrap();
    assert_eq!(scan(&db, ReadOptions::default()).len(), 100, "the default family was filtered");
    let mut it = db.iter_cf(&filtered_cf, ReadOptions::default());
    it.seek_to_first();
    assert!(!it.valid(), "the filtered family kept a tmp/ key");
    it.status().unwrap();
}

/// Asserts `got == want`, naming the first key that differs.
fn same(got: &BTreeMap<Vec<u8>, Vec<u8>>, want: &BTreeMap<Vec<u8>, Vec<u8>>, ctx: &str) {
    let show = |v: Option<&Vec<u8>>| v.map(|v| String::from_utf8_lossy(v).into_owned());
    let keys: std::collections::BTreeSet<&Vec<u8>> = got.keys().chain(want.keys()).collect();
    for k in keys {
        let (g, w) = (got.get(k), want.get(k));
        assert!(g == w, "{ctx}: {:?} reads {:?}, expected {:?}", String::from_utf8_lossy(k), show(g), show(w));
    }
}

/// Random puts and deletes of `keep/`, `tmp/` and `up/` keys under automatic
/// compactions, with a snapshot held through each round; then a full
/// manual compaction. The snapshot reads, through the compactions of its
/// round, what the database read when it was taken; every key reads as
/// written or as the filter makes it; in the end the database holds the
/// model, filtered.
fn random_history(style: CompactionStyle, seed: u64) {
    let fs = MemFs::new();
    let filter = Arc::new(TmpAndUpper::default());
    let mut o = tiny_options(Some(fs.clone()));
    o.compaction_style = style;
    let db = Db::open("/random", with_filter(o.clone(), &filter)).unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for round in 0..4 {
        // A snapshot taken while a compaction runs may see that
        // compaction's decisions once it ends (docs/data_model.md): take it
        // between compactions.
        db.wait_for_compact().unwrap();
        let snap = db.snapshot();
        // What the present reads now (some keys may be filtered already):
        // the snapshot must read exactly this through what follows.
        let at_snap = scan(&db, ReadOptions::default());
        for _ in 0..1500 {
            let prefix = ["keep/", "tmp/", "up/"][rng.gen_range(0..3)];
            let k = key(prefix, rng.gen_range(0..150));
            if rng.gen_range(0..6) == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                let v = format!("v{round}-{}", rng.gen::<u16>()).repeat(rng.gen_range(1..6)).into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        db.flush(true).unwrap();
        same(&scan(&db, snap.read_options()), &at_snap, &format!("{style:?} seed {seed} round {round}: the snapshot"));
        // Present reads: each key reads as written or as the filter makes it.
        let got = scan(&db, ReadOptions::default());
        let want = filtered(&model);
        for (k, v) in &got {
            let ok = model.get(k) == Some(v) || want.get(k) == Some(v);
            assert!(ok, "{style:?} seed {seed} round {round}: {:?} reads {:?}", String::from_utf8_lossy(k), v);
        }
        for k in want.keys() {
            assert!(got.contains_key(k), "{style:?} seed {seed} round {round}: {:?} went missing", k);
        }
    }
    db.compact_range(None, None).unwrap();
    if style == CompactionStyle::Level {
        same(
            &scan(&db, ReadOptions::default()),
            &filtered(&model),
            &format!("{style:?} seed {seed}: after compact_range"),
        );
    }
    drop(db);
    let db = Db::open("/random", with_filter(o, &filter)).unwrap();
    let got = scan(&db, ReadOptions::default());
    let want = filtered(&model);
    for (k, v) in &got {
        assert!(model.get(k) == Some(v) || want.get(k) == Some(v), "{style:?} seed {seed}: after reopen");
    }
    assert!(want.keys().all(|k| got.contains_key(k)), "{style:?} seed {seed}: a key went missing after reopen");
}

#[test]
fn random_histories_under_leveled_compaction_end_filtered() {
    for seed in 0..3 {
        random_history(CompactionStyle::Level, seed);
    }
}

#[test]
fn random_histories_under_universal_compaction_keep_what_the_filter_allows() {
    for seed in 0..2 {
        random_history(CompactionStyle::Universal, seed);
    }
}

/// Panics when asked about `boom`.
struct Panicky;

impl CompactionFilter for Panicky {
    fn name(&self) -> &str {
        "panicky"
    }

    fn filter(&self, _level: usize, key: &[u8], _value: &[u8]) -> Decision {
        assert!(key != b"boom", "the filter panics on boom");
        Decision::Keep
    }
}

#[test]
fn a_panicking_filter_fails_the_compaction_and_loses_nothing() {
    let fs = MemFs::new();
    let mut o = manual_options(&fs);
    o.compaction_filter = Some(Arc::new(Panicky));
    let db = Db::open("/panic", o).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..200u32 {
        db.put(&key("k/", i), b"v").unwrap();
        model.insert(key("k/", i), b"v".to_vec());
    }
    db.put(b"boom", b"v").unwrap();
    model.insert(b"boom".to_vec(), b"v".to_vec());
    db.flush(true).unwrap();
    db.put(b"boom", b"w").unwrap();
    model.insert(b"boom".to_vec(), b"w".to_vec());
    db.flush(true).unwrap();
    // The panic becomes an error of the compaction, not of the caller's thread.
    let err = db.compact_range(None, None).unwrap_err();
    assert!(err.to_string().contains("panic"), "{err}");
    // Everything written still reads.
    assert_eq!(scan(&db, ReadOptions::default()), model);
    drop(db);
    // Reopened without the filter, the database holds everything and compacts.
    let db = Db::open("/panic", manual_options(&fs)).unwrap();
    assert_eq!(scan(&db, ReadOptions::default()), model);
    db.compact_range(None, None).unwrap();
    assert_eq!(scan(&db, ReadOptions::default()), model);
}

#[test]
fn values_kept_in_blob_files_are_read_back_for_the_filter() {
    let fs = MemFs::new();
    let filter = Arc::new(TmpAndUpper::default());
    let mut o = with_filter(manual_options(&fs), &filter);
    o.enable_blob_files = true;
    o.min_blob_size = 16;
    let db = Db::open("/blobs", o.clone()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..100u32 {
        for prefix in ["keep/", "tmp/", "up/"] {
            // Long values go to blob files at the flush, short ones stay inline.
            let v = if i % 2 == 0 { format!("a long value number {i} for a blob file") } else { format!("v{i}") };
            db.put(&key(prefix, i), v.as_bytes()).unwrap();
            model.insert(key(prefix, i), v.into_bytes());
        }
    }
    db.flush(true).unwrap();
    let blob_files = |fs: &MemFs| {
        use ebb::fs::FileSystem;
        fs.list_dir(std::path::Path::new("/blobs")).unwrap().iter().filter(|n| n.ends_with(".blob")).count()
    };
    assert!(blob_files(&fs) >= 1, "the flush wrote no blob file");
    db.compact_range(None, None).unwrap();
    let want = filtered(&model);
    same(&scan(&db, ReadOptions::default()), &want, "after compaction");
    assert_eq!(
        db.get(&key("up/", 2)).unwrap(),
        Some(b"A LONG VALUE NUMBER 2 FOR A BLOB FILE".to_vec()),
        "a blob value changed"
    );
    assert_eq!(db.get(&key("tmp/", 2)).unwrap(), None, "a blob value removed");
    drop(db);
    let db = Db::open("/blobs", o).unwrap();
    same(&scan(&db, ReadOptions::default()), &want, "after reopen");
}

/// Drops merge operands that start with `-` (RocksDB's
/// `FilterMergeOperand`), keeps every value.
struct DropNegativeOperands;

impl CompactionFilter for DropNegativeOperands {
    fn name(&self) -> &str {
        "drop-negative-operands"
    }
    fn filter(&self, _level: usize, _key: &[u8], _value: &[u8]) -> Decision {
        Decision::Keep
    }
    fn filter_merge_operand(&self, _level: usize, _key: &[u8], operand: &[u8]) -> bool {
        operand.starts_with(b"-")
    }
}

/// Appends operands with commas, by full merges only: operands a flush
/// writes stay one by one for the compaction's filter to see.
struct Append;

impl ebb::MergeOperator for Append {
    fn name(&self) -> &str {
        "append-full-only"
    }
    fn full_merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut parts: Vec<&[u8]> = existing.into_iter().collect();
        parts.extend_from_slice(operands);
        Some(parts.join(&b","[..]))
    }
}

/// Merge operands go to the filter before a compaction combines them: the
/// ones it removes are gone, as if never written, from gets, scans and
/// reopens; operands a snapshot reads are not asked about; a whole run
/// removed leaves the value below it; a TTL database asks about them
/// without their write times.
#[test]
fn merge_operands_are_filtered_before_they_are_combined() {
    let fs = MemFs::new();
    let options = || {
        let mut o = manual_options(&fs);
        o.merge_operator = Some(Arc::new(Append) as Arc<dyn ebb::MergeOperator>);
        o.compaction_filter = Some(Arc::new(DropNegativeOperands) as Arc<dyn CompactionFilter>);
        o
    };
    let db = Db::open("/ops", options()).unwrap();
    db.put(b"a", b"base").unwrap();
    db.put(b"c", b"kept").unwrap();
    // The values in one table, the operands in the next (a flush would
    // merge them into the values below in the same memtable).
    db.flush(true).unwrap();
    db.merge(b"d", b"-old").unwrap();
    let snap = db.snapshot();
    for op in ["+1", "-2", "+3"] {
        db.merge(b"a", op.as_bytes()).unwrap();
    }
    db.merge(b"b", b"-only").unwrap();
    db.merge(b"c", b"-x").unwrap();
    db.merge(b"d", b"-new").unwrap();
    db.merge(b"d", b"+new").unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"base,+1,-2,+3".to_vec()), "reads do not filter");
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"base,+1,+3".to_vec()));
    assert_eq!(db.get(b"b").unwrap(), None, "a key whose every operand went has nothing");
    assert_eq!(db.get(b"c").unwrap(), Some(b"kept".to_vec()), "the value below a removed run stays");
    assert_eq!(db.get_opt(b"d", &snap.read_options()).unwrap(), Some(b"-old".to_vec()), "a snapshot's operand stays");
    assert_eq!(db.get(b"d").unwrap(), Some(b"-old,+new".to_vec()));
    drop(snap);
    db.close().unwrap();
    let db = Db::open("/ops", options()).unwrap();
    let want: BTreeMap<Vec<u8>, Vec<u8>> = [
        (b"a".to_vec(), b"base,+1,+3".to_vec()),
        (b"c".to_vec(), b"kept".to_vec()),
        (b"d".to_vec(), b"-old,+new".to_vec()),
    ]
    .into_iter()
    .collect();
    assert_eq!(scan(&db, ReadOptions::default()), want);
    assert_eq!(scan_reverse(&db, ReadOptions::default()), want);
    db.close().unwrap();

    let mut o = options();
    o.create_if_missing = true;
    let ttl = Db::open_with_ttl("/ttl-ops", o, 3600).unwrap();
    ttl.put(b"k", b"v").unwrap();
    ttl.flush(true).unwrap();
    ttl.merge(b"k", b"+a").unwrap();
    ttl.merge(b"k", b"-b").unwrap();
    ttl.flush(true).unwrap();
    ttl.compact_range(None, None).unwrap();
    assert_eq!(ttl.get(b"k").unwrap(), Some(b"v,+a".to_vec()));
}
