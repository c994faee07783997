//! Wide columns (`put_entity`, `get_entity`, an iterator's `columns()`):
//! random histories of entities, plain values, merges and deletions
//! against a model, through flushes, compactions of both styles, blob
//! files, snapshots and reopens; the merge rules over entities; single
//! deletions, compaction filters, ingestion, transactions and the WAL with
//! entities; damaged entities and bad input.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::tiny_options;
use ebb::fs::MemFs;
use ebb::{Db, Options, ReadOptions, WideColumn, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// What a key holds in the model.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    Plain(Vec<u8>),
    /// Columns by name ascending.
    Entity(Vec<(Vec<u8>, Vec<u8>)>),
}

impl Entry {
    /// What `get` and `value()` return.
    fn value(&self) -> Vec<u8> {
        match self {
            Entry::Plain(v) => v.clone(),
            Entry::Entity(cols) => cols.iter().find(|(n, _)| n.is_empty()).map(|(_, v)| v.clone()).unwrap_or_default(),
        }
    }

    /// What `get_entity` and `columns()` return.
    fn columns(&self) -> Vec<WideColumn> {
        match self {
            Entry::Plain(v) => vec![WideColumn::new("", v.clone())],
            Entry::Entity(cols) => cols.iter().map(|(n, v)| WideColumn::new(n.clone(), v.clone())).collect(),
        }
    }

    /// This entry with the string-append operand `op` merged (RocksDB's
    /// rules: over an entity, its default column; a missing default column
    /// is an empty value).
    fn merged(before: Option<&Entry>, op: &[u8]) -> Entry {
        let append = |base: Option<&[u8]>| match base {
            None => op.to_vec(),
            Some(b) => [b, b",", op].concat(),
        };
        match before {
            None => Entry::Plain(append(None)),
            Some(Entry::Plain(v)) => Entry::Plain(append(Some(v))),
            Some(Entry::Entity(cols)) => {
                let mut cols = cols.clone();
                match cols.first_mut() {
                    Some((n, v)) if n.is_empty() => *v = append(Some(v)),
                    _ => cols.insert(0, (Vec::new(), append(Some(b"")))),
                }
                Entry::Entity(cols)
            }
        }
    }
}

type Model = BTreeMap<Vec<u8>, Entry>;

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("key{:04}", rng.gen_range(0..400)).into_bytes()
}

fn bytes(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let len = rng.gen_range(0..max);
    (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect()
}

/// Up to four columns named from `"", "a", "b", "c"`, each name once.
fn columns(rng: &mut StdRng) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut cols = Vec::new();
    for n in ["", "a", "b", "c"] {
        if rng.gen_bool(0.5) {
            cols.push((n.as_bytes().to_vec(), bytes(rng, 80)));
        }
    }
    // Given in any order: the database sorts them.
    if rng.gen_bool(0.5) {
        cols.reverse();
    }
    cols
}

fn refs(cols: &[(Vec<u8>, Vec<u8>)]) -> Vec<(&[u8], &[u8])> {
    cols.iter().map(|(n, v)| (n.as_slice(), v.as_slice())).collect()
}

fn sorted(mut cols: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(Vec<u8>, Vec<u8>)> {
    cols.sort();
    cols
}

/// Every read of `db` at `ro` against `model`: `get`, `get_entity`,
/// `multi_get`, both scans with values and columns, and seeks followed by
/// random moves that change direction.
fn check(db: &Db, model: &Model, ro: &ReadOptions, rng: &mut StdRng, ctx: &str) {
    for _ in 0..15 {
        let k = key(rng);
        let want = model.get(&k);
        assert_eq!(db.get_opt(&k, ro).unwrap(), want.map(Entry::value), "{ctx}: get {k:?}");
        assert_eq!(db.get_entity_opt(&k, ro).unwrap(), want.map(Entry::columns), "{ctx}: get_entity {k:?}");
    }
    let keys: Vec<Vec<u8>> = (0..10).map(|_| key(rng)).collect();
    let krefs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    for (k, got) in keys.iter().zip(db.multi_get(&krefs, ro)) {
        assert_eq!(got.unwrap(), model.get(k).map(Entry::value), "{ctx}: multi_get {k:?}");
    }
    for (k, got) in keys.iter().zip(db.multi_get_entity(&krefs, ro)) {
        assert_eq!(got.unwrap(), model.get(k).map(Entry::columns), "{ctx}: multi_get_entity {k:?}");
    }
    let flat: Vec<(Vec<u8>, Vec<u8>, Vec<WideColumn>)> =
        model.iter().map(|(k, e)| (k.clone(), e.value(), e.columns())).collect();
    let mut it = db.iter(ro.clone());
    let mut forward = Vec::new();
    it.seek_to_first();
    while it.valid() {
        forward.push((it.key().to_vec(), it.value().to_vec(), it.columns()));
        it.next();
    }
    it.status().unwrap();
    assert_eq!(forward, flat, "{ctx}: forward scan");
    let mut backward = Vec::new();
    it.seek_to_last();
    while it.valid() {
        backward.push((it.key().to_vec(), it.value().to_vec(), it.columns()));
        it.prev();
    }
    it.status().unwrap();
    backward.reverse();
    assert_eq!(backward, flat, "{ctx}: reverse scan");
    // Random moves: at each step the position must be the model's.
    for _ in 0..4 {
        let target = key(rng);
        let mut at = flat.iter().position(|(k, _, _)| *k >= target);
        it.seek(&target);
        for step in 0..12 {
            match at {
                Some(i) => {
                    assert!(it.valid(), "{ctx}: seek {target:?} step {step}: invalid, want {:?}", flat[i].0);
                    assert_eq!(
                        (it.key().to_vec(), it.value().to_vec(), it.columns()),
                        flat[i].clone(),
                        "{ctx}: seek {target:?} step {step}"
                    );
                }
                None => {
                    assert!(!it.valid(), "{ctx}: seek {target:?} step {step}: valid at {:?}", it.key());
                    break;
                }
            }
            let i = at.unwrap();
            if rng.gen_bool(0.5) {
                it.next();
                at = (i + 1 < flat.len()).then_some(i + 1);
            } else {
                it.prev();
                at = i.checked_sub(1);
            }
        }
        it.status().unwrap();
    }
}

#[derive(Debug, Default)]
struct Activity {
    flushes: u64,
    compactions: u64,
    entities: u64,
    merges_over_entities: u64,
}

fn run(seed: u64, opts_for: &dyn Fn() -> Options) -> Activity {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut activity = Activity::default();
    let path = std::path::PathBuf::from(format!("/wide-{seed}"));
    let mut model = Model::new();
    for epoch in 0..3 {
        let db = Db::open(&path, opts_for()).unwrap();
        let ctx = format!("seed {seed} epoch {epoch} reopened");
        check(&db, &model, &ReadOptions::default(), &mut rng, &ctx);
        let mut snaps: Vec<(ebb::Snapshot, Model)> = Vec::new();
        for step in 0..1200 {
            let ctx = format!("seed {seed} epoch {epoch} step {step}");
            match rng.gen_range(0..100) {
                0..=24 => {
                    let (k, cols) = (key(&mut rng), columns(&mut rng));
                    db.put_entity(&k, &refs(&cols)).unwrap();
                    model.insert(k, Entry::Entity(sorted(cols)));
                    activity.entities += 1;
                }
                25..=44 => {
                    let (k, v) = (key(&mut rng), bytes(&mut rng, 80));
                    db.put(&k, &v).unwrap();
                    model.insert(k, Entry::Plain(v));
                }
                45..=59 => {
                    let (k, op) = (key(&mut rng), bytes(&mut rng, 12));
                    db.merge(&k, &op).unwrap();
                    if matches!(model.get(&k), Some(Entry::Entity(_))) {
                        activity.merges_over_entities += 1;
                    }
                    let e = Entry::merged(model.get(&k), &op);
                    model.insert(k, e);
                }
                60..=66 => {
                    let k = key(&mut rng);
                    db.delete(&k).unwrap();
                    model.remove(&k);
                }
                67..=68 => {
                    let (a, b) = (key(&mut rng), key(&mut rng));
                    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                    db.delete_range(&lo, &hi).unwrap();
                    let doomed: Vec<Vec<u8>> = model.range(lo..hi).map(|(k, _)| k.clone()).collect();
                    for k in doomed {
                        model.remove(&k);
                    }
                }
                69..=76 => {
                    // A batch mixing every kind, in one or two families' worth
                    // of keys (one family here).
                    let mut b = WriteBatch::new();
                    for _ in 0..rng.gen_range(1..8) {
                        let k = key(&mut rng);
                        match rng.gen_range(0..4) {
                            0 => {
                                let cols = columns(&mut rng);
                                b.put_entity(&k, &refs(&cols)).unwrap();
                                model.insert(k, Entry::Entity(sorted(cols)));
                            }
                            1 => {
                                let v = bytes(&mut rng, 80);
                                b.put(&k, &v);
                                model.insert(k, Entry::Plain(v));
                            }
                            2 => {
                                let op = bytes(&mut rng, 12);
                                b.merge(&k, &op);
                                let e = Entry::merged(model.get(&k), &op);
                                model.insert(k, e);
                            }
                            _ => {
                                b.delete(&k);
                                model.remove(&k);
                            }
                        }
                    }
                    db.write(&b).unwrap();
                }
                77..=79 => {
                    if snaps.len() < 3 {
                        snaps.push((db.snapshot(), model.clone()));
                    } else {
                        snaps.remove(rng.gen_range(0..snaps.len()));
                    }
                }
                80..=83 if !snaps.is_empty() => {
                    let i = rng.gen_range(0..snaps.len());
                    let ro = snaps[i].0.read_options();
                    check(&db, &snaps[i].1, &ro, &mut rng, &format!("{ctx} snapshot"));
                }
                80..=86 => check(&db, &model, &ReadOptions::default(), &mut rng, &ctx),
                87..=93 => db.flush(rng.gen_bool(0.5)).unwrap(),
                _ => {
                    let (a, b) = (key(&mut rng), key(&mut rng));
                    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                    db.compact_range(Some(&lo), Some(&hi)).unwrap();
                }
            }
        }
        let ctx = format!("seed {seed} epoch {epoch} end");
        check(&db, &model, &ReadOptions::default(), &mut rng, &ctx);
        for (s, m) in &snaps {
            check(&db, m, &s.read_options(), &mut rng, &format!("{ctx} snapshot"));
        }
        drop(snaps);
        let m = db.metrics();
        activity.flushes += m.flushes;
        activity.compactions += m.level_compaction.iter().skip(1).map(|l| l.count).sum::<u64>();
        if rng.gen_bool(0.5) {
            db.close().unwrap();
        }
    }
    activity
}

fn options(fs: &MemFs, seed: u64) -> Options {
    let mut o = tiny_options(Some(fs.clone()));
    o.merge_operator = Some(ebb::merge_operator::from_name("stringappend").unwrap());
    if seed % 3 == 1 {
        o.compaction_style = ebb::CompactionStyle::Universal;
    }
    if seed % 4 == 2 {
        // Plain values go to blob files; entities stay in the tables.
        o.enable_blob_files = true;
        o.min_blob_size = 40;
        o.blob_file_size = 4096;
    }
    if seed % 5 == 3 {
        // Merges written as values in the memtable, entities among them.
        o.max_successive_merges = 2;
    }
    o
}

/// Random histories of entities, plain values, merges over both, deletions
/// and range deletions, against the model, through flushes, compactions
/// (leveled and universal), blob files, `max_successive_merges`, snapshots
/// and reopens (recovery from the WAL, some without a clean close).
#[test]
fn model_with_entities() {
    let mut total = Activity::default();
    for seed in 0..8 {
        let fs = MemFs::new();
        let a = run(seed, &|| options(&fs, seed));
        total.flushes += a.flushes;
        total.compactions += a.compactions;
        total.entities += a.entities;
        total.merges_over_entities += a.merges_over_entities;
    }
    eprintln!("model with entities: {total:?}");
    assert!(total.flushes >= 50 && total.compactions >= 30, "{total:?}");
    assert!(total.merges_over_entities >= 300, "{total:?}");
}

fn memfs_db(o: impl FnOnce(&mut Options)) -> (MemFs, Db) {
    let fs = MemFs::new();
    let mut opts = tiny_options(Some(fs.clone()));
    o(&mut opts);
    let db = Db::open("/db", opts).unwrap();
    (fs, db)
}

#[test]
fn get_reads_the_default_column_and_get_entity_a_plain_value_as_one() {
    let (_fs, db) = memfs_db(|_| {});
    db.put_entity(b"e", &[(b"b", b"2"), (b"", b"dflt"), (b"a", b"1")]).unwrap();
    db.put_entity(b"nodefault", &[(b"x", b"1")]).unwrap();
    db.put_entity(b"empty", &[]).unwrap();
    db.put(b"p", b"plain").unwrap();
    for round in ["memtable", "table"] {
        assert_eq!(db.get(b"e").unwrap(), Some(b"dflt".to_vec()), "{round}");
        assert_eq!(
            db.get_entity(b"e").unwrap().unwrap(),
            vec![WideColumn::new("", "dflt"), WideColumn::new("a", "1"), WideColumn::new("b", "2")],
            "{round}: sorted by name"
        );
        assert_eq!(db.get(b"nodefault").unwrap(), Some(Vec::new()), "{round}: found, empty");
        assert_eq!(db.get(b"empty").unwrap(), Some(Vec::new()), "{round}");
        assert_eq!(db.get_entity(b"empty").unwrap(), Some(Vec::new()), "{round}: no columns");
        assert_eq!(db.get_entity(b"p").unwrap(), Some(vec![WideColumn::new("", "plain")]), "{round}");
        assert_eq!(db.get_entity(b"missing").unwrap(), None, "{round}");
        let pinned = db.get_pinned(b"e").unwrap().unwrap();
        assert_eq!(&*pinned, b"dflt", "{round}: a pinned read gets the default column too");
        db.flush(true).unwrap();
    }
}

#[test]
fn multi_get_entity_reads_every_key_at_one_point_in_its_family() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs));
    o.create_missing_column_families = true;
    let db = Db::open_cf("/db", o.clone(), &[("default", o.clone()), ("other", o)]).unwrap();
    let other = db.cf_handle("other").unwrap();
    db.put_entity(b"a", &[(b"", b"1"), (b"x", b"y")]).unwrap();
    db.put_entity_cf(&other, b"a", &[(b"o", b"2")]).unwrap();
    db.put(b"b", b"plain").unwrap();
    let snap = db.snapshot();
    db.put_entity(b"a", &[(b"new", b"3")]).unwrap();
    db.delete(b"b").unwrap();
    let at_snap = db.multi_get_entity(&[b"a", b"b", b"c"], &snap.read_options());
    let got: Vec<_> = at_snap.into_iter().map(|r| r.unwrap()).collect();
    assert_eq!(
        got,
        vec![
            Some(vec![WideColumn::new("", "1"), WideColumn::new("x", "y")]),
            Some(vec![WideColumn::new("", "plain")]),
            None
        ]
    );
    let now: Vec<_> = db
        .multi_get_entity_cf(&[(&other, b"a"), (&db.cf_handle("default").unwrap(), b"a")], &ReadOptions::default())
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(now, vec![Some(vec![WideColumn::new("o", "2")]), Some(vec![WideColumn::new("new", "3")])]);
}

#[test]
fn a_merge_over_an_entity_keeps_its_other_columns_everywhere() {
    // Reads over the operands, then a flush that merges them with the
    // entity below, then a compaction.
    let (_fs, db) = memfs_db(|o| {
        o.merge_operator = Some(ebb::merge_operator::from_name("stringappend").unwrap());
        o.disable_auto_compactions = true;
    });
    db.put_entity(b"k", &[(b"", b"a"), (b"col", b"x")]).unwrap();
    db.put_entity(b"n", &[(b"col", b"y")]).unwrap();
    db.flush(true).unwrap();
    db.merge(b"k", b"b").unwrap();
    db.merge(b"n", b"c").unwrap();
    let want_k = vec![WideColumn::new("", "a,b"), WideColumn::new("col", "x")];
    let want_n = vec![WideColumn::new("", ",c"), WideColumn::new("col", "y")];
    for stage in ["operands over a table", "flushed", "compacted"] {
        assert_eq!(db.get(b"k").unwrap(), Some(b"a,b".to_vec()), "{stage}");
        assert_eq!(db.get_entity(b"k").unwrap().unwrap(), want_k, "{stage}");
        assert_eq!(db.get_entity(b"n").unwrap().unwrap(), want_n, "{stage}: no default column merges as empty");
        let mut it = db.iter(ReadOptions::default());
        it.seek_to_first();
        assert_eq!((it.key(), it.value(), it.columns()), (&b"k"[..], &b"a,b"[..], want_k.clone()), "{stage}");
        it.seek_to_last();
        assert_eq!((it.key(), it.value(), it.columns()), (&b"n"[..], &b",c"[..], want_n.clone()), "{stage}");
        match stage {
            "operands over a table" => db.flush(true).unwrap(),
            "flushed" => db.compact_range(None, None).unwrap(),
            _ => {}
        }
    }
    // After the compaction one version of each key is left: an entity.
    let versions = db.get_all_key_versions(&db.cf_handle("default").unwrap(), None, None, 100).unwrap();
    assert!(
        versions.iter().all(|v| v.entry_type == ebb::EntryType::WideColumnEntity),
        "{:?}",
        versions.iter().map(|v| v.entry_type).collect::<Vec<_>>()
    );
}

#[test]
fn a_single_delete_removes_an_entity_as_it_does_a_put() {
    let (_fs, db) = memfs_db(|o| o.disable_auto_compactions = true);
    db.put_entity(b"a", &[(b"", b"v"), (b"c", b"1")]).unwrap();
    db.single_delete(b"a").unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    db.flush(true).unwrap();
    assert_eq!(db.get_entity(b"a").unwrap(), None);
    let left = db.get_all_key_versions(&db.cf_handle("default").unwrap(), None, None, 100).unwrap();
    assert!(left.is_empty(), "the flush drops the pair, as for a put: {left:?}");
}

/// A compaction filter that removes every plain value it is asked about.
struct RemoveAll;

impl ebb::CompactionFilter for RemoveAll {
    fn name(&self) -> &str {
        "RemoveAll"
    }
    fn filter(&self, _level: usize, _key: &[u8], _value: &[u8]) -> ebb::compaction_filter::Decision {
        ebb::compaction_filter::Decision::Remove
    }
}

#[test]
fn compaction_filters_are_not_asked_about_entities() {
    let (_fs, db) = memfs_db(|o| {
        o.compaction_filter = Some(Arc::new(RemoveAll));
        o.disable_auto_compactions = true;
    });
    db.put(b"plain", b"v").unwrap();
    db.put_entity(b"entity", &[(b"", b"v")]).unwrap();
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"plain").unwrap(), None, "the filter ran");
    assert_eq!(db.get_entity(b"entity").unwrap(), Some(vec![WideColumn::new("", "v")]), "kept, as RocksDB's FilterV3");
}

#[test]
fn entities_survive_recovery_from_the_wal_in_every_family() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.write_buffer_size = 1 << 20;
    o.create_missing_column_families = true;
    let families = [("default", o.clone()), ("other", o.clone())];
    {
        let db = Db::open_cf("/db", o.clone(), &families).unwrap();
        let other = db.cf_handle("other").unwrap();
        db.put_entity_cf(&other, b"k", &[(b"", b"o"), (b"x", b"1")]).unwrap();
        let mut b = WriteBatch::new();
        b.put_entity(b"k", &[(b"y", b"2")]).unwrap();
        b.put_entity_cf(&other, b"k2", &[(b"z", b"3")]).unwrap();
        db.write(&b).unwrap();
        // The WAL's updates name the entities, their columns readable.
        let updates: Vec<_> = db.get_updates_since(0).unwrap().collect::<ebb::Result<Vec<_>>>().unwrap();
        let entities: Vec<Vec<WideColumn>> = updates
            .iter()
            .flat_map(|u| u.batch.iter().collect::<Vec<_>>())
            .filter_map(|op| match op.unwrap() {
                ebb::BatchOp::PutEntity { entity, .. } => Some(ebb::wide_columns::decode_entity(entity).unwrap()),
                _ => None,
            })
            .collect();
        assert_eq!(entities[2], vec![WideColumn::new("z", "3")]);
        assert_eq!(entities.len(), 3, "{entities:?}");
        // Dropped without a close: the memtables are lost, the WAL is not.
    }
    let db = Db::open_cf("/db", o, &families).unwrap();
    let other = db.cf_handle("other").unwrap();
    let ro = ReadOptions::default();
    assert_eq!(db.get_entity(b"k").unwrap(), Some(vec![WideColumn::new("y", "2")]));
    assert_eq!(db.get_entity_cf_opt(&other, b"k", &ro).unwrap().unwrap().len(), 2);
    assert_eq!(db.get_cf(&other, b"k").unwrap(), Some(b"o".to_vec()));
    assert_eq!(db.get_entity_cf_opt(&other, b"k2", &ro).unwrap(), Some(vec![WideColumn::new("z", "3")]));
}

#[test]
fn a_repeated_column_is_refused_and_writes_nothing() {
    let (_fs, db) = memfs_db(|_| {});
    let e = db.put_entity(b"k", &[(b"a", b"1"), (b"a", b"2")]).unwrap_err();
    assert!(matches!(e, ebb::Error::InvalidArgument(_)), "{e:?}");
    assert!(e.to_string().contains("\"a\" given twice"), "{e}");
    let mut b = WriteBatch::new();
    b.put(b"before", b"v");
    assert!(b.put_entity(b"k", &[(b"", b"1"), (b"", b"2")]).is_err());
    assert_eq!(b.len(), 1, "the refused entity added nothing to the batch");
    assert_eq!(db.get(b"k").unwrap(), None);
}

#[test]
fn a_damaged_entity_in_a_batch_is_refused_before_it_is_logged() {
    let (_fs, db) = memfs_db(|_| {});
    // A batch of one entity record (docs/format.md, "Write batch"): header,
    // tag 0x16, the key, then the entity's bytes, its last value cut short.
    let entity = [1, 2, 0, 1, 1, b'c', 1, b'v'];
    let mut data = vec![0u8; 12];
    data[8] = 1;
    data.extend_from_slice(&[0x16, 1, b'k', entity.len() as u8]);
    data.extend_from_slice(&entity);
    let damaged = WriteBatch::from_data(&data, "test", 0).unwrap();
    let e = db.write(&damaged).unwrap_err();
    assert!(e.to_string().contains("entity of key \"k\""), "{e}");
    assert_eq!(db.get(b"k").unwrap(), None);
}

#[test]
fn a_ttl_database_refuses_entities() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::default();
    o.create_if_missing = true;
    let db = Db::open_with_ttl(dir.path(), o, 3600).unwrap();
    let mut b = WriteBatch::new();
    b.put_entity(b"k", &[(b"", b"v")]).unwrap();
    let e = db.write(&b, &ebb::WriteOptions::default()).unwrap_err();
    assert!(matches!(e, ebb::Error::NotSupported(_)), "{e:?}");
}

#[test]
fn entities_ingest_from_external_files() {
    let (fs, db) = memfs_db(|_| {});
    let mut w = ebb::SstFileWriter::create(&tiny_options(Some(fs.clone())));
    w.open("/ext.sst").unwrap();
    w.put_entity(b"a", &[(b"", b"A"), (b"n", b"1")]).unwrap();
    w.put(b"b", b"B").unwrap();
    w.finish().unwrap();
    db.ingest_external_file(&["/ext.sst"], &ebb::IngestExternalFileOptions::default()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"A".to_vec()));
    assert_eq!(db.get_entity(b"a").unwrap().unwrap(), vec![WideColumn::new("", "A"), WideColumn::new("n", "1")]);
}
