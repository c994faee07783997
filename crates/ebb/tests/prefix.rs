//! Prefix extractors end to end: prefix seeks (bounded to the seek key's
//! prefix, tables skipped by their prefix bloom) agree with a total-order
//! scan on random data in every filter setting, point reads through filters
//! that hold only prefixes and through memtable prefix blooms, and the bad
//! uses refused.

mod common;

use common::{tiny_options, Model};
use ebb::fs::MemFs;
use ebb::{prefix, Db, Error, Options, ReadOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Keys of 3 to 8 bytes over a small alphabet: many share 4-byte prefixes,
/// some are shorter than the prefix (outside a fixed extractor's domain).
fn random_key(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(3..=8);
    (0..len).map(|_| b"abcd"[rng.gen_range(0..4)]).collect()
}

/// What a bounded prefix seek to `target` must return: the keys at or after
/// it with its prefix (forwards), or at or before it (backwards).
fn expected(model: &Model, x: &dyn prefix::SliceTransform, target: &[u8], forward: bool) -> Vec<Vec<u8>> {
    let same = |k: &Vec<u8>| x.in_domain(k) && x.transform(k) == x.transform(target);
    if forward {
        model.range(target.to_vec()..).map(|(k, _)| k.clone()).take_while(same).collect()
    } else {
        model.range(..=target.to_vec()).rev().map(|(k, _)| k.clone()).take_while(same).collect()
    }
}

fn check_prefix_seeks(db: &Db, model: &Model, x: &dyn prefix::SliceTransform, rng: &mut StdRng, ctx: &str) {
    for _ in 0..60 {
        let target = random_key(rng);
        let ro = ReadOptions { prefix_same_as_start: true, ..ReadOptions::default() };
        let mut it = db.iter(ro.clone());
        it.seek(&target);
        let mut got = Vec::new();
        while it.valid() {
            got.push(it.key().to_vec());
            it.next();
        }
        it.status().unwrap();
        if x.in_domain(&target) {
            assert_eq!(got, expected(model, x, &target, true), "{ctx}: seek {:?}", String::from_utf8_lossy(&target));
            let mut it = db.iter(ro);
            it.seek_for_prev(&target);
            let mut back = Vec::new();
            while it.valid() {
                back.push(it.key().to_vec());
                it.prev();
            }
            it.status().unwrap();
            assert_eq!(back, expected(model, x, &target, false), "{ctx}: seek_for_prev");
        } else {
            // Outside the domain a seek is in total order.
            let want: Vec<Vec<u8>> = model.range(target.clone()..).map(|(k, _)| k.clone()).collect();
            assert_eq!(got, want, "{ctx}: total-order seek {:?}", String::from_utf8_lossy(&target));
        }
        // prefix_iterator: the keys starting with the bytes given.
        let p = &target[..rng.gen_range(1..=target.len())];
        let got: Vec<Vec<u8>> = db.prefix_iterator(p).map(|e| e.unwrap().0).collect();
        let want: Vec<Vec<u8>> = model.keys().filter(|k| k.starts_with(p)).cloned().collect();
        assert_eq!(got, want, "{ctx}: prefix_iterator {:?}", String::from_utf8_lossy(p));
    }
    for _ in 0..100 {
        let k = random_key(rng);
        assert_eq!(db.get(&k).unwrap().as_ref(), model.get(&k), "{ctx}: get {:?}", String::from_utf8_lossy(&k));
    }
}

fn run(configure: impl Fn(&mut Options), seed: u64) {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.prefix_extractor = Some(prefix::fixed(4));
    configure(&mut o);
    let x = o.prefix_extractor.clone().unwrap();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    for round in 0..4 {
        let db = Db::open("/db", o.clone()).unwrap();
        for i in 0..800 {
            let k = random_key(&mut rng);
            if rng.gen_bool(0.8) {
                let v = format!("v{round}-{i}").into_bytes();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            } else {
                db.delete(&k).unwrap();
                model.remove(&k);
            }
        }
        check_prefix_seeks(&db, &model, x.as_ref(), &mut rng, &format!("seed {seed} round {round} memtable"));
        db.flush(true).unwrap();
        check_prefix_seeks(&db, &model, x.as_ref(), &mut rng, &format!("seed {seed} round {round} flushed"));
        if round % 2 == 1 {
            db.compact_range(None, None).unwrap();
            check_prefix_seeks(&db, &model, x.as_ref(), &mut rng, &format!("seed {seed} round {round} compacted"));
        }
        db.close().unwrap();
    }
}

#[test]
fn prefix_seeks_agree_with_total_order_with_whole_keys_and_prefixes_in_filters() {
    run(|_| {}, 1);
}

#[test]
fn prefix_seeks_and_gets_with_only_prefixes_in_filters() {
    run(|o| o.whole_key_filtering = false, 2);
}

#[test]
fn prefix_seeks_with_a_capped_extractor_and_memtable_prefix_blooms() {
    run(
        |o| {
            o.prefix_extractor = Some(prefix::capped(3));
            o.memtable_prefix_bloom_size_ratio = 0.1;
        },
        3,
    );
}

#[test]
fn prefix_seeks_with_partitioned_filters() {
    run(
        |o| {
            o.index_type = ebb::IndexType::TwoLevelIndexSearch;
            o.partition_filters = true;
            o.metadata_block_size = 256;
        },
        4,
    );
}

/// The ticker of a statistics dump (`ebb.options-statistics`).
fn ticker(db: &Db, name: &str) -> u64 {
    let text = db.get_property("ebb.options-statistics").unwrap();
    let line = text.lines().find(|l| l.starts_with(&format!("{name} COUNT"))).unwrap();
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn a_prefix_seek_skips_tables_whose_filter_lacks_the_prefix() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.prefix_extractor = Some(prefix::fixed(4));
    o.disable_auto_compactions = true;
    let db = Db::open("/db", o).unwrap();
    // Three L0 tables, each of other prefixes.
    for group in [b"aaaa", b"bbbb", b"cccc"] {
        for i in 0..20 {
            db.put(&[&group[..], format!("{i:02}").as_bytes()].concat(), b"v").unwrap();
        }
        db.flush(true).unwrap();
    }
    let ro = ReadOptions { prefix_same_as_start: true, ..ReadOptions::default() };
    let mut it = db.iter(ro);
    it.seek(b"bbbb05");
    let mut n = 0;
    while it.valid() {
        assert!(it.key().starts_with(b"bbbb"));
        n += 1;
        it.next();
    }
    assert_eq!(n, 15);
    assert_eq!(ticker(&db, "rocksdb.bloom.filter.prefix.checked"), 3);
    assert_eq!(ticker(&db, "rocksdb.bloom.filter.prefix.useful"), 2, "the other prefixes' tables are skipped");
    // As in RocksDB: seek_to_first and seek_to_last bound the iterator to
    // the prefix of the key they land on; total_order_seek keeps the bound
    // but skips no table.
    let count = |ro: ReadOptions, last: bool| {
        let mut it = db.iter(ro);
        if last {
            it.seek_to_last();
        } else {
            it.seek_to_first();
        }
        let mut keys = Vec::new();
        while it.valid() {
            keys.push(it.key().to_vec());
            if last {
                it.prev();
            } else {
                it.next();
            }
        }
        keys
    };
    let bounded = ReadOptions { prefix_same_as_start: true, ..ReadOptions::default() };
    assert!(count(bounded.clone(), false).iter().all(|k| k.starts_with(b"aaaa")));
    assert_eq!(count(bounded.clone(), false).len(), 20);
    assert!(count(bounded, true).iter().all(|k| k.starts_with(b"cccc")));
    let total = ReadOptions { prefix_same_as_start: true, total_order_seek: true, ..ReadOptions::default() };
    let mut it = db.iter(total);
    it.seek(b"bbbb05");
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    assert_eq!(n, 15, "still bounded");
    assert_eq!(ticker(&db, "rocksdb.bloom.filter.prefix.checked"), 3, "no table asked");
    assert_eq!(count(ReadOptions::default(), false).len(), 60, "without the option, total order");
}

/// The keys a bounded prefix iterator with `lower` and `upper` yields after
/// `op`, stepping forward or back.
fn keys(
    db: &Db,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
    op: &dyn Fn(&mut ebb::DbIterator<'_>),
    forward: bool,
) -> Vec<String> {
    let ro = ReadOptions {
        prefix_same_as_start: true,
        iterate_lower_bound: lower.map(<[u8]>::to_vec),
        iterate_upper_bound: upper.map(<[u8]>::to_vec),
        ..ReadOptions::default()
    };
    let mut it = db.iter(ro);
    op(&mut it);
    let mut out = Vec::new();
    while it.valid() {
        out.push(String::from_utf8(it.key().to_vec()).unwrap());
        if forward {
            it.next();
        } else {
            it.prev();
        }
    }
    it.status().unwrap();
    out
}

/// With bounds, a bounded prefix iterator takes its prefix as RocksDB's
/// `DBIter` does: `seek_to_first` is a seek to the lower bound and
/// `seek_to_last` a seek for the last key before the upper bound, each
/// bounded to that bound's prefix; a seek is bounded to its target's prefix
/// even where the lower bound moves it, and so is a `seek_for_prev` past the
/// upper bound. (The iterator once took the prefix of the key it landed on.)
#[test]
fn bounds_give_a_prefix_seek_their_prefix_or_the_targets() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.prefix_extractor = Some(prefix::fixed(1));
    let db = Db::open("/db", o).unwrap();
    for k in ["b1", "b2", "c1"] {
        db.put(k.as_bytes(), b"v").unwrap();
    }
    let none: Vec<String> = Vec::new();
    assert_eq!(
        keys(&db, Some(&b"a"[..]), None, &|it| it.seek_to_first(), true),
        none,
        "seek_to_first, lower a: prefix a"
    );
    assert_eq!(
        keys(&db, Some(&b"b"[..]), None, &|it| it.seek_to_first(), true),
        ["b1", "b2"],
        "seek_to_first, lower b"
    );
    assert_eq!(
        keys(&db, None, None, &|it| it.seek_to_first(), true),
        ["b1", "b2"],
        "seek_to_first: the first key's prefix"
    );
    assert_eq!(
        keys(&db, None, Some(&b"c"[..]), &|it| it.seek_to_last(), false),
        none,
        "seek_to_last, upper c: prefix c"
    );
    assert_eq!(keys(&db, None, Some(&b"c2"[..]), &|it| it.seek_to_last(), false), ["c1"], "seek_to_last, upper c2");
    assert_eq!(keys(&db, None, None, &|it| it.seek_to_last(), false), ["c1"], "seek_to_last: the last key's prefix");
    assert_eq!(keys(&db, Some(&b"b"[..]), None, &|it| it.seek(b"a"), true), none, "seek a, lower b: prefix a");
    assert_eq!(keys(&db, Some(&b"b"[..]), None, &|it| it.seek(b"b0"), true), ["b1", "b2"], "seek b0, lower b");
    assert_eq!(keys(&db, None, Some(&b"c"[..]), &|it| it.seek_for_prev(b"d"), false), none, "seek_for_prev d, upper c");
    assert_eq!(
        keys(&db, None, Some(&b"c"[..]), &|it| it.seek_for_prev(b"b9"), false),
        ["b2", "b1"],
        "seek_for_prev b9, upper c"
    );
}

#[test]
fn a_prefix_seek_without_an_extractor_is_refused() {
    let fs = MemFs::new();
    let db = Db::open("/db", tiny_options(Some(fs.clone()))).unwrap();
    db.put(b"abcd1", b"v").unwrap();
    let mut it = db.iter(ReadOptions { prefix_same_as_start: true, ..ReadOptions::default() });
    it.seek(b"abcd");
    assert!(!it.valid());
    let e = it.status().unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("prefix extractor"), "{e}");
    // total_order_seek reads as usual; so does prefix_iterator (byte prefixes).
    let mut it = db.iter(ReadOptions { prefix_same_as_start: true, total_order_seek: true, ..ReadOptions::default() });
    it.seek(b"abcd");
    assert!(it.valid());
    assert_eq!(db.prefix_iterator(b"abc").count(), 1);
}

#[test]
fn the_options_file_records_the_extractor() {
    let mut o = Options::default();
    o.prefix_extractor = Some(prefix::capped(6));
    o.whole_key_filtering = false;
    let back = Options::from_text(&o.to_text()).unwrap();
    assert_eq!(back.prefix_extractor.map(|x| x.name().to_string()).as_deref(), Some("rocksdb.CappedPrefix.6"));
    assert!(!back.whole_key_filtering);
    let e = Options::from_text("prefix_extractor=mine").unwrap_err().to_string();
    assert!(e.contains("mine"), "{e}");
    let mut o = Options::default();
    o.memtable_prefix_bloom_size_ratio = 0.5;
    assert!(o.validate().unwrap_err().to_string().contains("memtable_prefix_bloom_size_ratio"));
}

/// The smallest history the comparison with RocksDB found: a bounded prefix
/// iterator positioned by `seek_for_prev`, then moved with `next`, must go
/// on to the next key of the prefix. The key before the prefix lies in a
/// table the prefix seek skipped, so the reverse scan leaves the merged
/// sources exhausted; the step forwards must not restart from the first key
/// (outside the prefix, which would end the scan) but from the current one.
#[test]
fn seek_for_prev_then_next_stays_in_the_prefix() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.prefix_extractor = Some(prefix::fixed(1));
    o.disable_auto_compactions = true;
    let db = Db::open("/db", o).unwrap();
    db.put(b"a", b"va").unwrap();
    db.flush(true).unwrap();
    db.put(b"b1", b"v1").unwrap();
    db.put(b"b2", b"v2").unwrap();
    let mut it = db.iter(ReadOptions { prefix_same_as_start: true, ..ReadOptions::default() });
    it.seek_for_prev(b"b15");
    assert!(it.valid());
    assert_eq!((it.key(), it.value()), (&b"b1"[..], &b"v1"[..]));
    it.next();
    assert!(it.valid(), "next after seek_for_prev stopped early: {:?}", it.status());
    assert_eq!((it.key(), it.value()), (&b"b2"[..], &b"v2"[..]));
    it.next();
    assert!(!it.valid());
    it.status().unwrap();
}
