//! Custom comparators (issue 18, part 7): the model test in orders other
//! than bytewise (RocksDB's reverse bytewise comparator, and two user
//! comparators through the trait's virtual path), and what a comparator
//! promises around it: its name recorded when a family is created and
//! checked at every open, in the OPTIONS file and in each table; range
//! deletions and prefix iterators in the family's order; repair.

mod common;

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::ops::Bound;
use std::sync::Arc;

use common::tiny_options;
use ebb::comparator::{self, Comparator};
use ebb::fs::MemFs;
use ebb::{ColumnFamilyOptions, Db, Options, ReadOptions, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Shorter keys first, then bytewise: a user comparator without the
/// separator hooks.
struct ShortLex;

impl Comparator for ShortLex {
    fn name(&self) -> &str {
        "test.ShortLex"
    }
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        a.len().cmp(&b.len()).then_with(|| a.cmp(b))
    }
}

/// The bytewise order reversed, as user code (the engine recognises only
/// its built-in by name): the virtual path with the separator hooks, which
/// shorten towards the larger bytes.
struct UserReverse;

impl Comparator for UserReverse {
    fn name(&self) -> &str {
        "test.UserReverse"
    }
    fn compare(&self, a: &[u8], b: &[u8]) -> Ordering {
        b.cmp(a)
    }
    fn find_shortest_separator(&self, start: &mut Vec<u8>, limit: &[u8]) {
        let common = start.iter().zip(limit).take_while(|(a, b)| a == b).count();
        if common < start.len().min(limit.len()) && start[common] > limit[common] && common + 1 < start.len() {
            start.truncate(common + 1);
        }
    }
}

/// An order the model sorts its keys by.
trait Order {
    fn comparator() -> Arc<dyn Comparator>;
    fn cmp(a: &[u8], b: &[u8]) -> Ordering {
        Self::comparator().compare(a, b)
    }
}

struct Reverse;
impl Order for Reverse {
    fn comparator() -> Arc<dyn Comparator> {
        comparator::reverse_bytewise()
    }
    fn cmp(a: &[u8], b: &[u8]) -> Ordering {
        b.cmp(a)
    }
}

struct Short;
impl Order for Short {
    fn comparator() -> Arc<dyn Comparator> {
        Arc::new(ShortLex)
    }
    fn cmp(a: &[u8], b: &[u8]) -> Ordering {
        ShortLex.compare(a, b)
    }
}

struct UserRev;
impl Order for UserRev {
    fn comparator() -> Arc<dyn Comparator> {
        Arc::new(UserReverse)
    }
    fn cmp(a: &[u8], b: &[u8]) -> Ordering {
        b.cmp(a)
    }
}

/// A key ordered by `O`, for the model's map.
struct K<O>(Vec<u8>, PhantomData<O>);

impl<O> K<O> {
    fn new(k: &[u8]) -> Self {
        K(k.to_vec(), PhantomData)
    }
}
impl<O> Clone for K<O> {
    fn clone(&self) -> Self {
        K::new(&self.0)
    }
}
impl<O: Order> PartialEq for K<O> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
impl<O: Order> Eq for K<O> {}
impl<O: Order> PartialOrd for K<O> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<O: Order> Ord for K<O> {
    fn cmp(&self, other: &Self) -> Ordering {
        O::cmp(&self.0, &other.0)
    }
}

type Model<O> = BTreeMap<K<O>, Vec<u8>>;

/// Keys of varying length sharing prefixes ("k1", "k12", "k123", ...), so
/// that the orders differ from bytewise and from each other.
fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("k{}", rng.gen_range(0..400)).into_bytes()
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(0..80);
    (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect()
}

fn listed<O>(m: &Model<O>) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter().map(|(k, v)| (k.0.clone(), v.clone())).collect()
}

fn scan(db: &Db, ro: ReadOptions<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(ro);
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    out
}

fn scan_reverse(db: &Db, ro: ReadOptions<'_>) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(ro);
    it.seek_to_last();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().unwrap();
    out.reverse();
    out
}

/// Point reads, batched reads, full scans both ways, seeks with a step
/// each way, and bounded scans, all in `O`'s order.
fn check_view<O: Order>(db: &Db, model: &Model<O>, ro: &ReadOptions<'_>, rng: &mut StdRng, ctx: &str) {
    for _ in 0..15 {
        let k = key(rng);
        assert_eq!(db.get_opt(&k, ro).unwrap(), model.get(&K::new(&k)).cloned(), "{ctx}: get {k:?}");
    }
    let keys: Vec<Vec<u8>> = (0..10).map(|_| key(rng)).collect();
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    for (k, got) in keys.iter().zip(db.multi_get(&refs, ro)) {
        assert_eq!(got.unwrap(), model.get(&K::new(k)).cloned(), "{ctx}: multi_get {k:?}");
    }
    assert_eq!(scan(db, ro.clone()), listed(model), "{ctx}: forward scan");
    assert_eq!(scan_reverse(db, ro.clone()), listed(model), "{ctx}: reverse scan");
    let mut it = db.iter(ro.clone());
    for _ in 0..8 {
        let k = key(rng);
        it.seek(&k);
        let want = model.range(K::new(&k)..).next().map(|(k, v)| (k.0.clone(), v.clone()));
        assert_eq!(it.valid().then(|| (it.key().to_vec(), it.value().to_vec())), want, "{ctx}: seek {k:?}");
        if it.valid() {
            it.prev();
            let want = model.range(..K::new(&k)).next_back().map(|(k, _)| k.0.clone());
            assert_eq!(it.valid().then(|| it.key().to_vec()), want, "{ctx}: prev after seek {k:?}");
        }
        it.seek_for_prev(&k);
        let want = model.range(..=K::new(&k)).next_back().map(|(k, _)| k.0.clone());
        assert_eq!(it.valid().then(|| it.key().to_vec()), want, "{ctx}: seek_for_prev {k:?}");
        if it.valid() {
            it.next();
            let want = model.range((Bound::Excluded(K::new(&k)), Bound::Unbounded)).next().map(|(k, _)| k.0.clone());
            assert_eq!(it.valid().then(|| it.key().to_vec()), want, "{ctx}: next after seek_for_prev {k:?}");
        }
    }
    let (a, b) = (key(rng), key(rng));
    let (lo, hi) = if O::cmp(&a, &b) != Ordering::Greater { (a, b) } else { (b, a) };
    let bounded = ReadOptions {
        iterate_lower_bound: Some(lo.clone()),
        iterate_upper_bound: Some(hi.clone()),
        snapshot: ro.snapshot,
        ..ReadOptions::default()
    };
    let want: Vec<_> = model.range(K::new(&lo)..K::new(&hi)).map(|(k, v)| (k.0.clone(), v.clone())).collect();
    assert_eq!(scan(db, bounded.clone()), want, "{ctx}: bounded scan {lo:?}..{hi:?}");
    assert_eq!(scan_reverse(db, bounded), want, "{ctx}: bounded reverse scan {lo:?}..{hi:?}");
}

/// One seed: random puts, deletes, merges (stringappend, which shows a
/// misordered operand), range deletions (sometimes reversed, refused),
/// batches, snapshots, flushes, compactions and reopens, checked against
/// the model in `O`'s order.
fn run_seed<O: Order>(seed: u64, opts_for: &dyn Fn() -> Options, epochs: usize, steps: usize) -> (u64, u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let path = format!("/cmp-{seed}");
    let mut model: Model<O> = Model::new();
    let (mut flushes, mut compactions) = (0, 0);
    let append = |model: &Model<O>, k: &[u8], v: &[u8]| match model.get(&K::new(k)) {
        Some(old) => [old.as_slice(), b",", v].concat(),
        None => v.to_vec(),
    };
    for epoch in 0..epochs {
        let db = Db::open(&path, opts_for()).unwrap_or_else(|e| panic!("seed {seed} epoch {epoch}: open: {e}"));
        assert_eq!(scan(&db, ReadOptions::default()), listed(&model), "seed {seed} epoch {epoch}: after reopen");
        let mut snaps = Vec::new();
        for step in 0..steps {
            let ctx = format!("seed {seed} epoch {epoch} step {step}");
            match rng.gen_range(0..100) {
                0..=39 => {
                    let (k, v) = (key(&mut rng), value(&mut rng));
                    db.put(&k, &v).unwrap();
                    model.insert(K::new(&k), v);
                }
                40..=49 => {
                    let (k, v) = (key(&mut rng), value(&mut rng));
                    db.merge(&k, &v).unwrap();
                    let merged = append(&model, &k, &v);
                    model.insert(K::new(&k), merged);
                }
                50..=57 => {
                    let k = key(&mut rng);
                    db.delete(&k).unwrap();
                    model.remove(&K::new(&k));
                }
                58..=62 => {
                    let (a, b) = (key(&mut rng), key(&mut rng));
                    let (lo, hi) = if O::cmp(&a, &b) != Ordering::Greater { (a, b) } else { (b, a) };
                    if lo != hi && rng.gen_bool(0.1) {
                        let e = db.delete_range(&hi, &lo).unwrap_err();
                        assert!(e.to_string().contains("comes after"), "{ctx}: {e}");
                        continue;
                    }
                    if rng.gen_bool(0.3) {
                        let mut b = WriteBatch::new();
                        b.delete_range(&lo, &hi);
                        db.write(&b).unwrap();
                    } else {
                        db.delete_range(&lo, &hi).unwrap();
                    }
                    let doomed: Vec<K<O>> = model.range(K::new(&lo)..K::new(&hi)).map(|(k, _)| k.clone()).collect();
                    for k in doomed {
                        model.remove(&k);
                    }
                }
                63..=70 => {
                    let mut b = WriteBatch::new();
                    for _ in 0..rng.gen_range(1..8) {
                        let k = key(&mut rng);
                        if rng.gen_bool(0.7) {
                            let v = value(&mut rng);
                            b.put(&k, &v);
                            model.insert(K::new(&k), v);
                        } else {
                            b.delete(&k);
                            model.remove(&K::new(&k));
                        }
                    }
                    db.write(&b).unwrap();
                }
                71..=74 => {
                    if snaps.len() < 3 {
                        snaps.push((db.snapshot(), model.clone()));
                    } else {
                        snaps.remove(rng.gen_range(0..snaps.len()));
                    }
                }
                75..=78 => {
                    if !snaps.is_empty() {
                        let i = rng.gen_range(0..snaps.len());
                        let ro = snaps[i].0.read_options();
                        check_view(&db, &snaps[i].1, &ro, &mut rng, &format!("{ctx} snapshot"));
                    }
                }
                79..=82 => check_view(&db, &model, &ReadOptions::default(), &mut rng, &ctx),
                83..=89 => db.flush(rng.gen_bool(0.5)).unwrap(),
                90..=92 => {
                    let (a, b) = (key(&mut rng), key(&mut rng));
                    let (lo, hi) = if O::cmp(&a, &b) != Ordering::Greater { (a, b) } else { (b, a) };
                    db.compact_range(Some(&lo), Some(&hi)).unwrap();
                }
                93..=94 => db.compact_range(None, None).unwrap(),
                _ => {
                    let k = key(&mut rng);
                    assert_eq!(db.get(&k).unwrap(), model.get(&K::new(&k)).cloned(), "{ctx}: get");
                }
            }
        }
        check_view(&db, &model, &ReadOptions::default(), &mut rng, &format!("seed {seed} epoch {epoch} end"));
        for (s, m) in &snaps {
            assert_eq!(scan(&db, s.read_options()), listed(m), "seed {seed} epoch {epoch}: snapshot at end");
        }
        drop(snaps);
        let m = db.metrics();
        flushes += m.flushes;
        compactions += m.level_compaction.iter().skip(1).map(|l| l.count).sum::<u64>();
        db.close().unwrap();
    }
    (flushes, compactions)
}

/// The options of a seed: tiny, with `O`'s comparator and stringappend;
/// universal compaction for some seeds, blob files or a partitioned index
/// for others.
fn options_for<O: Order>(fs: &MemFs, seed: u64) -> Options {
    let mut o = tiny_options(Some(fs.clone()));
    o.comparator = Some(O::comparator());
    o.merge_operator = Some(ebb::merge_operator::from_name("stringappend").unwrap());
    if seed % 3 == 1 {
        o.compaction_style = ebb::CompactionStyle::Universal;
    }
    if seed % 4 == 2 {
        o.enable_blob_files = true;
        o.min_blob_size = 40;
        o.blob_file_size = 4096;
    }
    if seed % 5 == 3 {
        o.set("index_type", "kTwoLevelIndexSearch").unwrap();
        o.metadata_block_size = 128;
    }
    o
}

fn model_in<O: Order>(seeds: std::ops::Range<u64>) {
    let (mut flushes, mut compactions) = (0, 0);
    for seed in seeds {
        let fs = MemFs::new();
        let (f, c) = run_seed::<O>(seed, &|| options_for::<O>(&fs, seed), 3, 1200);
        flushes += f;
        compactions += c;
    }
    assert!(flushes >= 30 && compactions >= 30, "flushes {flushes}, compactions {compactions}");
}

#[test]
fn model_in_reverse_bytewise_order() {
    model_in::<Reverse>(0..6);
}

#[test]
fn model_in_a_user_comparators_order() {
    model_in::<Short>(10..14);
}

#[test]
fn model_in_a_user_reverse_order_with_separators() {
    model_in::<UserRev>(20..23);
}

fn reverse_options(fs: &MemFs) -> Options {
    let mut o = tiny_options(Some(fs.clone()));
    o.comparator = Some(comparator::reverse_bytewise());
    o
}

/// A database is opened only with the comparator it was created with; the
/// refusal names both and changes nothing on disk.
#[test]
fn another_comparator_is_refused_naming_both_and_nothing_is_lost() {
    let fs = MemFs::new();
    let db = Db::open("/db", reverse_options(&fs)).unwrap();
    for i in 0..300u32 {
        db.put(format!("key{i:04}").as_bytes(), b"v").unwrap();
    }
    db.flush(true).unwrap();
    db.put(b"unflushed", b"w").unwrap();
    db.close().unwrap();
    let before = common::files_of(&fs, "/db");
    let options = before.iter().find(|(n, _)| n.starts_with("OPTIONS")).unwrap();
    let options = String::from_utf8_lossy(&options.1);
    assert!(options.contains("comparator=rocksdb.ReverseBytewiseComparator"), "{options}");

    let e = Db::open("/db", tiny_options(Some(fs.clone()))).err().expect("the bytewise order is refused");
    let msg = e.to_string();
    assert!(matches!(e, ebb::Error::InvalidArgument(_)), "{e:?}");
    assert!(
        msg.contains(comparator::REVERSE_BYTEWISE_NAME) && msg.contains(comparator::BYTEWISE_NAME),
        "names both: {msg}"
    );
    let mut user = tiny_options(Some(fs.clone()));
    user.comparator = Some(Arc::new(UserReverse));
    let msg = Db::open("/db", user).err().expect("a user comparator of another name is refused").to_string();
    assert!(msg.contains("test.UserReverse") && msg.contains(comparator::REVERSE_BYTEWISE_NAME), "{msg}");
    let after: Vec<_> = common::files_of(&fs, "/db").into_iter().filter(|(n, _)| !n.starts_with("LOG")).collect();
    let before: Vec<_> = before.into_iter().filter(|(n, _)| !n.starts_with("LOG")).collect();
    assert_eq!(after, before, "a refused open changes no file");

    let db = Db::open("/db", reverse_options(&fs)).unwrap();
    let keys: Vec<Vec<u8>> = scan(&db, ReadOptions::default()).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys.len(), 301);
    assert_eq!(keys.first().unwrap(), b"unflushed", "reverse order: the bytewise largest first");
    assert_eq!(keys.last().unwrap(), b"key0000");

    // A bytewise database refuses the reverse order the same way.
    let db2 = Db::open("/plain", tiny_options(Some(fs.clone()))).unwrap();
    db2.put(b"a", b"1").unwrap();
    db2.close().unwrap();
    let msg = Db::open("/plain", reverse_options(&fs)).err().unwrap().to_string();
    assert!(msg.contains(comparator::BYTEWISE_NAME) && msg.contains(comparator::REVERSE_BYTEWISE_NAME), "{msg}");
}

/// Each column family keeps its own order, recorded when it is created
/// and checked at open.
#[test]
fn families_keep_their_own_comparators() {
    let fs = MemFs::new();
    let db = Db::open("/db", tiny_options(Some(fs.clone()))).unwrap();
    let mut rev = ColumnFamilyOptions::default();
    rev.comparator = Some(comparator::reverse_bytewise());
    let cf = db.create_column_family("rev", rev.clone()).unwrap();
    for k in ["a", "b", "c"] {
        db.put(k.as_bytes(), b"1").unwrap();
        db.put_cf(&cf, k.as_bytes(), b"2").unwrap();
    }
    db.flush_cf(&cf, true).unwrap();
    let keys = |it: ebb::Entries<'_>| it.map(|e| e.unwrap().0).collect::<Vec<_>>();
    assert_eq!(keys(db.iterator(ReadOptions::default(), ebb::IteratorMode::Start)), [b"a", b"b", b"c"]);
    assert_eq!(keys(db.iterator_cf(&cf, ReadOptions::default(), ebb::IteratorMode::Start)), [b"c", b"b", b"a"]);
    db.close().unwrap();

    let refused = Db::open_cf("/db", tiny_options(Some(fs.clone())), &[("rev", ColumnFamilyOptions::default())]);
    let msg = refused.err().expect("the family's order is checked").to_string();
    assert!(msg.contains("'rev'") && msg.contains(comparator::REVERSE_BYTEWISE_NAME), "{msg}");
    let db = Db::open_cf("/db", tiny_options(Some(fs.clone())), &[("rev", rev)]).unwrap();
    let cf = db.cf_handle("rev").unwrap();
    assert_eq!(keys(db.iterator_cf(&cf, ReadOptions::default(), ebb::IteratorMode::Start)), [b"c", b"b", b"a"]);
}

/// The OPTIONS text reads the built-in comparators back by name, and names
/// what it cannot read.
#[test]
fn options_text_names_the_comparator() {
    let mut o = Options::default();
    o.set("comparator", comparator::REVERSE_BYTEWISE_NAME).unwrap();
    assert_eq!(o.comparator.as_ref().unwrap().name(), comparator::REVERSE_BYTEWISE_NAME);
    let back = Options::from_text(&o.to_text()).unwrap();
    assert_eq!(back.comparator.as_ref().unwrap().name(), comparator::REVERSE_BYTEWISE_NAME);
    o.set("comparator", comparator::BYTEWISE_NAME).unwrap();
    assert!(o.comparator.is_none());
    let e = o.set("comparator", "my.Order").unwrap_err().to_string();
    assert!(e.contains("my.Order") && e.contains("comparator"), "{e}");
    let db = Db::open("/x", tiny_options(Some(MemFs::new()))).unwrap();
    let e = db.set_options(&[("comparator", comparator::REVERSE_BYTEWISE_NAME)]).unwrap_err().to_string();
    assert!(e.contains("comparator"), "the order of an open family cannot change: {e}");
}

/// Range deletions and prefix iterators work in the family's order: a
/// range is `[begin, end)` in it, and a prefix iterator finds the keys
/// extending the prefix, which the reverse order puts before it.
#[test]
fn ranges_and_prefixes_follow_the_reverse_order() {
    let fs = MemFs::new();
    let db = Db::open("/db", reverse_options(&fs)).unwrap();
    for k in ["a", "ab", "abc", "abd", "ac", "b", "ba"] {
        db.put(k.as_bytes(), k.as_bytes()).unwrap();
    }
    let keys = |it: ebb::Entries<'_>| it.map(|e| String::from_utf8(e.unwrap().0).unwrap()).collect::<Vec<_>>();
    assert_eq!(keys(db.prefix_iterator(b"ab")), ["abd", "abc", "ab"]);
    assert_eq!(keys(db.prefix_iterator(b"b")), ["ba", "b"]);
    assert!(keys(db.prefix_iterator(b"z")).is_empty());
    // Bytewise "a" < "b": in reverse "b" comes first, so [a, b) is reversed.
    let e = db.delete_range(b"a", b"b").unwrap_err();
    assert!(e.to_string().contains(comparator::REVERSE_BYTEWISE_NAME), "{e}");
    db.delete_range(b"ac", b"ab").unwrap();
    assert_eq!(keys(db.iterator(ReadOptions::default(), ebb::IteratorMode::Start)), ["ba", "b", "ab", "a"]);
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(keys(db.iterator(ReadOptions::default(), ebb::IteratorMode::Start)), ["ba", "b", "ab", "a"]);
    assert_eq!(db.get(b"abc").unwrap(), None);
    assert_eq!(db.get(b"ab").unwrap().as_deref(), Some(&b"ab"[..]));
}

/// Repair rebuilds a reverse-ordered database in its order: its tables
/// and its WAL's writes are kept, and it opens with its comparator.
#[test]
fn repair_keeps_the_order() {
    let fs = MemFs::new();
    let db = Db::open("/db", reverse_options(&fs)).unwrap();
    for i in 0..200u32 {
        db.put(format!("k{i:03}").as_bytes(), b"v").unwrap();
    }
    db.flush(true).unwrap();
    db.put(b"k999", b"w").unwrap();
    db.close().unwrap();
    let manifest = common::files_of(&fs, "/db").into_iter().find(|(n, _)| n.starts_with("MANIFEST")).unwrap().0;
    ebb::fs::FileSystem::remove_file(&fs, std::path::Path::new(&format!("/db/{manifest}"))).unwrap();
    // In the wrong order repair would set every table aside: it refuses,
    // changing nothing.
    let before = common::files_of(&fs, "/db");
    let e = Db::repair("/db", &tiny_options(Some(fs.clone()))).unwrap_err().to_string();
    assert!(e.contains(comparator::BYTEWISE_NAME) && e.contains(comparator::REVERSE_BYTEWISE_NAME), "{e}");
    let unchanged =
        |files: Vec<(String, Vec<u8>)>| files.into_iter().filter(|(n, _)| !n.starts_with("LOG")).collect::<Vec<_>>();
    assert_eq!(unchanged(common::files_of(&fs, "/db")), unchanged(before));
    let report = Db::repair("/db", &reverse_options(&fs)).unwrap();
    assert!(!report.tables.is_empty(), "{report}");
    let db = Db::open("/db", reverse_options(&fs)).unwrap();
    let keys: Vec<Vec<u8>> = scan(&db, ReadOptions::default()).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys.len(), 201);
    assert_eq!(keys[0], b"k999");
    assert_eq!(keys[200], b"k000");
    assert_eq!(db.get(b"k100").unwrap().as_deref(), Some(&b"v"[..]));
}
