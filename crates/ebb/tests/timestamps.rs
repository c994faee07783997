//! User-defined timestamps (a column family whose comparator is
//! `bytewise_with_u64_ts`): random histories of puts, deletes and merges
//! at timestamps that grow per key, read at random timestamps and
//! snapshots against a model, through flushes, compactions of both styles
//! and reopens (some with the memtable only in the WAL); the compaction
//! rules that keep every version; bad input.

mod common;

use std::collections::BTreeMap;

use common::tiny_options;
use ebb::comparator::bytewise_with_u64_ts;
use ebb::fs::MemFs;
use ebb::{ColumnFamilyHandle, Db, Error, Options, ReadOptions, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One version of a key in the model.
#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>),
    Delete,
    Merge(Vec<u8>),
}

/// Every key's versions in the order written, each with its timestamp
/// (never below the one before it: the timestamps' contract).
type Model = BTreeMap<Vec<u8>, Vec<(u64, Op)>>;

/// How many versions of each key a snapshot sees.
type Seen = BTreeMap<Vec<u8>, usize>;

/// What a read at `read_ts` sees of `versions` (the first `seen` of them):
/// the newest at or below `read_ts`, with the string-append operands above
/// the put or delete below them applied; and its timestamp.
fn value_at(versions: &[(u64, Op)], seen: usize, read_ts: u64) -> Option<(Vec<u8>, u64)> {
    let visible: Vec<&(u64, Op)> = versions[..seen].iter().filter(|(ts, _)| *ts <= read_ts).collect();
    let newest_ts = visible.last()?.0;
    let mut operands = Vec::new();
    let mut base: Option<Vec<u8>> = None;
    for (_, op) in visible.iter().rev() {
        match op {
            Op::Merge(v) => operands.push(v.clone()),
            Op::Put(v) => {
                base = Some(v.clone());
                break;
            }
            Op::Delete => break,
        }
    }
    if operands.is_empty() {
        return base.map(|b| (b, newest_ts));
    }
    let mut acc = base;
    for op in operands.iter().rev() {
        acc = Some(match acc {
            None => op.clone(),
            Some(a) => [a.as_slice(), b",", op].concat(),
        });
    }
    acc.map(|v| (v, newest_ts))
}

/// The model's view at `read_ts` of the versions `seen` counts (all when
/// `None`): key, value, timestamp, ascending.
fn view(model: &Model, seen: Option<&Seen>, read_ts: u64) -> Vec<(Vec<u8>, Vec<u8>, u64)> {
    model
        .iter()
        .filter_map(|(k, versions)| {
            let n = seen.map_or(versions.len(), |s| s.get(k).copied().unwrap_or(0));
            value_at(versions, n, read_ts).map(|(v, ts)| (k.clone(), v, ts))
        })
        .collect()
}

fn key(rng: &mut StdRng) -> Vec<u8> {
    format!("key{:03}", rng.gen_range(0..120)).into_bytes()
}

fn bytes(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let len = rng.gen_range(1..max);
    (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect()
}

fn options(fs: &MemFs, universal: bool) -> Options {
    let mut o = tiny_options(Some(fs.clone()));
    o.comparator = Some(bytewise_with_u64_ts());
    o.merge_operator = Some(ebb::merge_operator::from_name("stringappend").unwrap());
    if universal {
        o.compaction_style = ebb::CompactionStyle::Universal;
    }
    o
}

fn at(ts: u64) -> ReadOptions<'static> {
    ReadOptions { timestamp: Some(ts), ..ReadOptions::default() }
}

/// Every read of `db` at `ro` (its timestamp `read_ts`) against `want`:
/// point reads of random keys (and their timestamps), `multi_get`, both
/// scans with each entry's timestamp, and seeks followed by random moves
/// that change direction.
fn check(
    db: &Db,
    cf: &ColumnFamilyHandle,
    want: &[(Vec<u8>, Vec<u8>, u64)],
    ro: &ReadOptions,
    rng: &mut StdRng,
    ctx: &str,
) {
    let find = |k: &[u8]| want.iter().find(|(wk, _, _)| wk.as_slice() == k).map(|(_, v, ts)| (v.clone(), *ts));
    for _ in 0..12 {
        let k = key(rng);
        assert_eq!(db.get_with_ts(cf, &k, ro).unwrap(), find(&k), "{ctx}: get_with_ts {k:?}");
        assert_eq!(db.get_cf_opt(cf, &k, ro).unwrap(), find(&k).map(|(v, _)| v), "{ctx}: get {k:?}");
    }
    let keys: Vec<Vec<u8>> = (0..6).map(|_| key(rng)).collect();
    let reads: Vec<(&ColumnFamilyHandle, &[u8])> = keys.iter().map(|k| (cf, k.as_slice())).collect();
    for (k, got) in keys.iter().zip(db.multi_get_cf(&reads, ro)) {
        assert_eq!(got.unwrap(), find(k).map(|(v, _)| v), "{ctx}: multi_get {k:?}");
    }
    let mut it = db.iter_cf(cf, ro.clone());
    let mut forward = Vec::new();
    it.seek_to_first();
    while it.valid() {
        forward.push((it.key().to_vec(), it.value().to_vec(), it.timestamp()));
        it.next();
    }
    it.status().unwrap();
    assert_eq!(forward, want, "{ctx}: forward scan");
    let mut backward = Vec::new();
    it.seek_to_last();
    while it.valid() {
        backward.push((it.key().to_vec(), it.value().to_vec(), it.timestamp()));
        it.prev();
    }
    it.status().unwrap();
    backward.reverse();
    assert_eq!(backward, want, "{ctx}: reverse scan");
    for _ in 0..3 {
        let target = key(rng);
        let (mut at, reverse) = if rng.gen_bool(0.5) {
            it.seek(&target);
            (want.iter().position(|(k, _, _)| *k >= target), false)
        } else {
            it.seek_for_prev(&target);
            (want.iter().rposition(|(k, _, _)| *k <= target), true)
        };
        for step in 0..10 {
            match at {
                Some(i) => {
                    assert!(it.valid(), "{ctx}: seek {target:?} (reverse {reverse}) step {step}: invalid");
                    assert_eq!(
                        (it.key().to_vec(), it.value().to_vec(), it.timestamp()),
                        want[i].clone(),
                        "{ctx}: seek {target:?} (reverse {reverse}) step {step}"
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
                at = (i + 1 < want.len()).then_some(i + 1);
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
    /// Point reads whose answer was an older version than the key's newest
    /// (the timestamp mattered).
    older_versions_read: u64,
    /// Raises of full_history_ts_low.
    lows: u64,
}

fn run(seed: u64, universal: bool) -> Activity {
    let mut rng = StdRng::seed_from_u64(seed);
    let fs = MemFs::new();
    let path = std::path::PathBuf::from(format!("/ts-{seed}"));
    let mut model = Model::new();
    let mut activity = Activity::default();
    // The newest timestamp written to any key, and the full_history_ts_low.
    let mut clock = 1u64;
    let mut low = 0u64;
    for epoch in 0..3 {
        let db = Db::open(&path, options(&fs, universal)).unwrap();
        let cf = db.cf_handle("default").unwrap();
        let ctx = format!("seed {seed} epoch {epoch} reopened");
        assert_eq!(db.get_full_history_ts_low(&cf).unwrap(), low, "{ctx}: the MANIFEST keeps it");
        let read_ts = rng.gen_range(low..=clock + 1);
        check(&db, &cf, &view(&model, None, read_ts), &at(read_ts), &mut rng, &ctx);
        let mut snaps: Vec<(ebb::Snapshot, Seen)> = Vec::new();
        for step in 0..900 {
            let ctx = format!("seed {seed} epoch {epoch} step {step}");
            // A key's next timestamp: at or above its last one, often equal
            // to the clock, sometimes behind it (keys age apart).
            let mut stamp = |model: &Model, k: &[u8], rng: &mut StdRng| {
                let last = model.get(k).and_then(|v| v.last()).map_or(0, |(ts, _)| *ts);
                clock += rng.gen_range(0..3);
                rng.gen_range(last..=clock.max(last))
            };
            match rng.gen_range(0..100) {
                0..=39 => {
                    let k = key(&mut rng);
                    let ts = stamp(&model, &k, &mut rng);
                    let v = bytes(&mut rng, 60);
                    db.put_with_ts(&cf, &k, ts, &v).unwrap();
                    model.entry(k).or_default().push((ts, Op::Put(v)));
                }
                40..=51 => {
                    let k = key(&mut rng);
                    let ts = stamp(&model, &k, &mut rng);
                    db.delete_with_ts(&cf, &k, ts).unwrap();
                    model.entry(k).or_default().push((ts, Op::Delete));
                }
                52..=63 => {
                    let k = key(&mut rng);
                    let ts = stamp(&model, &k, &mut rng);
                    let v = bytes(&mut rng, 8);
                    db.merge_with_ts(&cf, &k, ts, &v).unwrap();
                    model.entry(k).or_default().push((ts, Op::Merge(v)));
                }
                64..=70 => {
                    let mut b = WriteBatch::new();
                    for _ in 0..rng.gen_range(1..6) {
                        let k = key(&mut rng);
                        let ts = stamp(&model, &k, &mut rng);
                        if rng.gen_bool(0.7) {
                            let v = bytes(&mut rng, 40);
                            b.put_with_ts(&cf, &k, ts, &v);
                            model.entry(k).or_default().push((ts, Op::Put(v)));
                        } else {
                            b.delete_with_ts(&cf, &k, ts);
                            model.entry(k).or_default().push((ts, Op::Delete));
                        }
                    }
                    db.write(&b).unwrap();
                }
                71..=73 => {
                    if snaps.len() < 3 {
                        let seen = model.iter().map(|(k, v)| (k.clone(), v.len())).collect();
                        snaps.push((db.snapshot(), seen));
                    } else {
                        snaps.remove(rng.gen_range(0..snaps.len()));
                    }
                }
                74 if rng.gen_bool(0.3) => {
                    // History below a new low goes: reads at or above it see
                    // what they saw, and reads below it are refused.
                    low = rng.gen_range(low..=clock);
                    db.increase_full_history_ts_low(&cf, low).unwrap();
                    activity.lows += 1;
                    if low > 0 {
                        let refused = db.get_cf_opt(&cf, b"key000", &at(low - 1)).unwrap_err();
                        assert!(matches!(refused, Error::InvalidArgument(_)), "{ctx}: {refused}");
                        assert!(db.increase_full_history_ts_low(&cf, low - 1).is_err(), "{ctx}: lowered");
                    }
                }
                74..=76 => {
                    db.flush(true).unwrap();
                    activity.flushes += 1;
                }
                77..=78 => {
                    db.compact_range(None, None).unwrap();
                    activity.compactions += 1;
                }
                79..=88 => {
                    let k = key(&mut rng);
                    let read_ts = rng.gen_range(low..=clock + 1);
                    let got = db.get_with_ts(&cf, &k, &at(read_ts)).unwrap();
                    let versions = model.get(&k).map_or(&[][..], Vec::as_slice);
                    let want = value_at(versions, versions.len(), read_ts);
                    if want.is_some() && want != value_at(versions, versions.len(), u64::MAX) {
                        activity.older_versions_read += 1;
                    }
                    assert_eq!(got, want, "{ctx}: get {k:?} at {read_ts}");
                }
                89..=92 if !snaps.is_empty() => {
                    let i = rng.gen_range(0..snaps.len());
                    let read_ts = rng.gen_range(low..=clock + 1);
                    let want = view(&model, Some(&snaps[i].1), read_ts);
                    let ro =
                        ReadOptions { snapshot: Some(&snaps[i].0), timestamp: Some(read_ts), ..Default::default() };
                    check(&db, &cf, &want, &ro, &mut rng, &format!("{ctx} snapshot {i} at {read_ts}"));
                }
                _ => {
                    let read_ts = rng.gen_range(low..=clock + 1);
                    check(
                        &db,
                        &cf,
                        &view(&model, None, read_ts),
                        &at(read_ts),
                        &mut rng,
                        &format!("{ctx} at {read_ts}"),
                    );
                }
            }
        }
        let read_ts = rng.gen_range(low..=clock + 1);
        check(&db, &cf, &view(&model, None, read_ts), &at(read_ts), &mut rng, &format!("seed {seed} end at {read_ts}"));
        drop(snaps);
        // Closed or dropped, the memtable comes back from the WAL.
        if epoch == 1 {
            db.close().unwrap();
        }
    }
    activity
}

#[test]
fn reads_at_every_timestamp_and_snapshot_match_the_model_through_flushes_compactions_and_reopens() {
    let mut total = Activity::default();
    for seed in 0..6 {
        let a = run(seed, seed % 3 == 2);
        total.flushes += a.flushes;
        total.compactions += a.compactions;
        total.older_versions_read += a.older_versions_read;
        total.lows += a.lows;
    }
    eprintln!("{total:?}");
    assert!(total.flushes > 50 && total.compactions > 20, "{total:?}");
    assert!(total.older_versions_read > 100, "the reads must reach older versions: {total:?}");
    assert!(total.lows > 10, "{total:?}");
}

/// A key's versions are never split between two files of a level, and a
/// tombstone at the bottom is kept while older versions lie below it in
/// timestamp order: each version stays readable at its timestamp after a
/// full compaction into many small files.
#[test]
fn compactions_keep_every_version_and_cut_files_between_keys_only() {
    let fs = MemFs::new();
    let mut o = options(&fs, false);
    o.target_file_size_base = 2 * 1024;
    let db = Db::open("/cuts", o).unwrap();
    let cf = db.cf_handle("default").unwrap();
    let value = vec![b'v'; 300];
    for round in 0..12u64 {
        for k in 0..20u32 {
            let key = format!("k{k:02}");
            if round % 4 == 3 {
                db.delete_with_ts(&cf, key.as_bytes(), round * 10).unwrap();
            } else {
                db.put_with_ts(&cf, key.as_bytes(), round * 10, &[&value[..], &round.to_le_bytes()].concat()).unwrap();
            }
        }
        db.flush(true).unwrap();
    }
    db.compact_range(None, None).unwrap();
    let meta = db.get_column_family_metadata().unwrap();
    let deepest = meta.levels.iter().rev().find(|l| !l.files.is_empty()).unwrap();
    assert!(deepest.files.len() > 3, "small target files: {} files", deepest.files.len());
    for pair in deepest.files.windows(2) {
        let last = &pair[0].largest_key[..pair[0].largest_key.len() - 8];
        let first = &pair[1].smallest_key[..pair[1].smallest_key.len() - 8];
        assert!(last < first, "a key's versions split between files: {last:?} / {first:?}");
    }
    for round in 0..12u64 {
        for k in 0..20u32 {
            let key = format!("k{k:02}");
            let got = db.get_cf_opt(&cf, key.as_bytes(), &at(round * 10 + 5)).unwrap();
            let want = (round % 4 != 3).then(|| [&value[..], &round.to_le_bytes()].concat());
            assert_eq!(got, want, "{key} at {}", round * 10 + 5);
        }
    }
}

#[test]
fn bad_input_is_refused_naming_the_problem() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.create_if_missing = true;
    let db = Db::open("/bad", o).unwrap();
    let plain = db.cf_handle("default").unwrap();
    let mut cfo = ebb::ColumnFamilyOptions::default();
    cfo.comparator = Some(bytewise_with_u64_ts());
    let stamped = db.create_column_family("stamped", cfo.clone()).unwrap();
    let invalid = |r: ebb::Result<()>, words: &[&str]| {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        let shown = e.to_string();
        for w in words {
            assert!(shown.contains(w), "{shown:?} lacks {w:?}");
        }
    };
    // Writes without a timestamp to the family with them, and with one to
    // the family without; nothing is written.
    invalid(db.put_cf(&stamped, b"k", b"v"), &["stamped", "timestamps"]);
    invalid(db.delete_cf(&stamped, b"k"), &["stamped"]);
    invalid(db.merge_cf(&stamped, b"k", b"v"), &["stamped"]);
    invalid(db.delete_range_cf(&stamped, b"a", b"z"), &["stamped"]);
    invalid(db.put_with_ts(&plain, b"k", 1, b"v"), &["default", "no timestamps"]);
    let mut b = WriteBatch::new();
    b.put_with_ts(&stamped, b"ok", 1, b"v");
    b.put_cf(&stamped, b"k", b"v");
    invalid(db.write(&b), &["stamped"]);
    assert_eq!(db.get_cf_opt(&stamped, b"ok", &at(5)).unwrap(), None, "the refused batch wrote nothing");
    // Reads: a timestamp is required in the family with them, refused in
    // the other.
    db.put_with_ts(&stamped, b"k", 7, b"v").unwrap();
    invalid(db.get_cf(&stamped, b"k").map(|_| ()), &["stamped", "ReadOptions::timestamp"]);
    invalid(db.get_opt(b"k", &at(3)).map(|_| ()), &["no timestamps"]);
    let mut it = db.iter_cf(&stamped, ReadOptions::default());
    it.seek_to_first();
    assert!(!it.valid());
    assert!(matches!(it.status(), Err(Error::InvalidArgument(_))));
    let results = db.multi_get_cf(&[(&stamped, b"k".as_slice())], &ReadOptions::default());
    assert!(matches!(results[0], Err(Error::InvalidArgument(_))));
    // Options a timestamped family does not support yet, and entities.
    let mut bad = cfo.clone();
    bad.prefix_extractor = Some(ebb::prefix::fixed(2));
    assert!(matches!(db.create_column_family("bad1", bad), Err(Error::InvalidArgument(_))));
    let mut bad = cfo;
    bad.enable_blob_files = true;
    assert!(matches!(db.create_column_family("bad2", bad), Err(Error::InvalidArgument(_))));
    assert!(matches!(db.put_entity_cf(&stamped, b"e", &[(b"", b"v")]), Err(Error::NotSupported(_))));
    let mut w = ebb::SstFileWriter::create(&tiny_options(Some(fs.clone())));
    w.open("/plain.sst").unwrap();
    w.put(b"a", b"1").unwrap();
    w.finish().unwrap();
    let refused = db.ingest_external_file_cf(&stamped, &["/plain.sst"], &ebb::IngestExternalFileOptions::default());
    assert!(matches!(refused, Err(Error::NotSupported(_))), "{refused:?}");
    // What was written reads back at its timestamp.
    assert_eq!(db.get_with_ts(&stamped, b"k", &at(7)).unwrap(), Some((b"v".to_vec(), 7)));
    assert_eq!(db.get_with_ts(&stamped, b"k", &at(6)).unwrap(), None);
}

/// Transactions do not take keys with timestamps: a transaction database
/// with such a family is refused at open and when creating one.
#[test]
fn transaction_databases_refuse_timestamped_families() {
    let fs = MemFs::new();
    let refused = ebb::TransactionDb::open("/txn", options(&fs, false), ebb::TransactionDbOptions::default());
    assert!(matches!(refused, Err(Error::NotSupported(_))), "{:?}", refused.err());
    let refused =
        ebb::OptimisticTransactionDb::open("/txn", options(&fs, false), ebb::OptimisticTransactionDbOptions::default());
    assert!(matches!(refused, Err(Error::NotSupported(_))), "{:?}", refused.err());
    let tdb = ebb::TransactionDb::open("/txn2", tiny_options(Some(fs.clone())), ebb::TransactionDbOptions::default())
        .unwrap();
    let mut cfo = ebb::ColumnFamilyOptions::default();
    cfo.comparator = Some(bytewise_with_u64_ts());
    assert!(matches!(tdb.create_column_family("stamped", cfo), Err(Error::NotSupported(_))));
}

/// The comparator's name is kept with the data: a family created with
/// timestamps cannot be opened without them.
#[test]
fn a_timestamped_family_reopened_without_timestamps_is_refused() {
    let fs = MemFs::new();
    let db = Db::open("/name", options(&fs, false)).unwrap();
    let cf = db.cf_handle("default").unwrap();
    db.put_with_ts(&cf, b"k", 1, b"v").unwrap();
    db.flush(true).unwrap();
    drop(cf);
    db.close().unwrap();
    let mut o = options(&fs, false);
    o.comparator = None;
    let e = Db::open("/name", o).err().unwrap().to_string();
    assert!(e.contains("u64ts"), "{e}");
}

/// Entries of every live table of the default family.
fn table_entries(db: &Db) -> u64 {
    db.get_live_files_metadata().unwrap().iter().map(|f| f.num_entries).sum()
}

/// full_history_ts_low: compactions drop the versions below it that no
/// read can see (the newest of each key below it stays; at the bottom, a
/// tombstone goes with what it hides), reads below it are refused, it
/// never goes down, and the MANIFEST keeps it across reopens.
#[test]
fn history_below_full_history_ts_low_is_collected_and_no_longer_readable() {
    let fs = MemFs::new();
    let db = Db::open("/low", options(&fs, false)).unwrap();
    let cf = db.cf_handle("default").unwrap();
    // 40 keys with 10 versions each at timestamps 10..=100; key k is
    // deleted at 55 when k is even.
    for ts in (10..=100).step_by(10) {
        for k in 0..40u32 {
            let key = format!("k{k:02}");
            db.put_with_ts(&cf, key.as_bytes(), ts, format!("{key}@{ts}").as_bytes()).unwrap();
            if ts == 50 && k % 2 == 0 {
                db.delete_with_ts(&cf, key.as_bytes(), 55).unwrap();
            }
        }
    }
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(table_entries(&db), 420, "without a low every version stays");
    let want = |key: &str, k: u32, ts: u64| -> Option<Vec<u8>> {
        if k.is_multiple_of(2) && (55..60).contains(&ts) {
            return None;
        }
        Some(format!("{key}@{}", ts.min(100) / 10 * 10).into_bytes())
    };
    db.increase_full_history_ts_low(&cf, 57).unwrap();
    // A range compaction takes bounds without timestamps and collects
    // every version of the keys in it.
    let versions_of = |key: &[u8]| {
        let from = ebb::comparator::with_timestamp(key, u64::MAX);
        let all = db.get_all_key_versions(&cf, Some(&from), None, 64).unwrap();
        all.iter().filter(|v| ebb::comparator::split_timestamp(&v.user_key).0 == key).count()
    };
    assert_eq!(versions_of(b"k05"), 10);
    db.compact_range(Some(b"k05"), Some(b"k05")).unwrap();
    assert_eq!(versions_of(b"k05"), 6, "50 (the newest below the low) and 60..=100");
    db.compact_range(None, None).unwrap();
    // Odd keys keep 60..=100 and 50 (the newest below 57); even keys keep
    // 60..=100 only: their tombstone at 55 is the newest below the low, at
    // the bottom, and goes with everything under it.
    assert_eq!(table_entries(&db), 20 * 6 + 20 * 5, "the collected history");
    for k in 0..40u32 {
        let key = format!("k{k:02}");
        for ts in [57, 59, 60, 75, 100, 200] {
            assert_eq!(db.get_cf_opt(&cf, key.as_bytes(), &at(ts)).unwrap(), want(&key, k, ts), "{key} at {ts}");
        }
    }
    let e = db.get_cf_opt(&cf, b"k01", &at(56)).unwrap_err().to_string();
    assert!(e.contains("56") && e.contains("57"), "{e}");
    let mut it = db.iter_cf(&cf, at(30));
    it.seek_to_first();
    assert!(!it.valid() && it.status().is_err(), "an iterator below the low is refused too");
    assert!(db.increase_full_history_ts_low(&cf, 40).is_err(), "it never goes down");
    drop((it, cf));
    db.close().unwrap();
    let db = Db::open("/low", options(&fs, false)).unwrap();
    let cf = db.cf_handle("default").unwrap();
    assert_eq!(db.get_full_history_ts_low(&cf).unwrap(), 57);
    assert!(db.get_cf_opt(&cf, b"k01", &at(56)).is_err(), "refused after a reopen");
    assert_eq!(db.get_cf_opt(&cf, b"k01", &at(57)).unwrap(), Some(b"k01@50".to_vec()));
}

/// Range calls take bounds without timestamps, as RocksDB's do: a deletion
/// of files by range leaves every key outside the range whole (all its
/// versions), and a size estimate of a range counts it.
#[test]
fn range_calls_take_keys_without_timestamps() {
    let fs = MemFs::new();
    let mut o = options(&fs, false);
    o.target_file_size_base = 2 * 1024;
    let db = Db::open("/ranges", o).unwrap();
    let cf = db.cf_handle("default").unwrap();
    let key = |i: u32| format!("user-key-{i:05}").into_bytes();
    for ts in 1..=5u64 {
        for i in 0..100 {
            db.put_with_ts(&cf, &key(i), ts, format!("{i}@{ts}").as_bytes()).unwrap();
        }
    }
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    let sizes =
        db.get_approximate_sizes_cf(&cf, &[(&key(20), &key(60)), (&key(200), &key(300))], &Default::default()).unwrap();
    assert!(sizes[0] > 0 && sizes[1] == 0, "{sizes:?}");
    let dropped = db.delete_files_in_range(&cf, Some(&key(20)), Some(&key(60)), true).unwrap();
    assert!(dropped > 0, "some files lie inside the range");
    for i in (0..20).chain(61..100) {
        for ts in 1..=5u64 {
            assert_eq!(
                db.get_cf_opt(&cf, &key(i), &at(ts)).unwrap(),
                Some(format!("{i}@{ts}").into_bytes()),
                "key {i} at {ts}, outside the range"
            );
        }
    }
    let mut gone = 0;
    for i in 20..=60 {
        let v: Vec<_> = (1..=5u64).map(|ts| db.get_cf_opt(&cf, &key(i), &at(ts)).unwrap()).collect();
        // A key is in one file with all its versions: all kept or all gone.
        assert!(v.iter().all(Option::is_some) || v.iter().all(Option::is_none), "key {i}: {v:?}");
        gone += usize::from(v[0].is_none());
    }
    assert!(gone > 0);
}

/// A secondary instance takes up a raised full_history_ts_low when it
/// catches up: reads below it are refused there too.
#[test]
fn a_secondary_refuses_reads_below_the_primarys_low_after_catching_up() {
    let fs = MemFs::new();
    let primary = Db::open("/primary", options(&fs, false)).unwrap();
    let cf = primary.cf_handle("default").unwrap();
    for ts in 1..=10u64 {
        primary.put_with_ts(&cf, b"k", ts * 10, format!("v{ts}").as_bytes()).unwrap();
    }
    primary.flush(true).unwrap();
    let secondary = Db::open_as_secondary("/primary", "/secondary", options(&fs, false)).unwrap();
    let scf = secondary.cf_handle("default").unwrap();
    assert_eq!(secondary.get_cf_opt(&scf, b"k", &at(35)).unwrap(), Some(b"v3".to_vec()));
    primary.increase_full_history_ts_low(&cf, 55).unwrap();
    primary.compact_range(None, None).unwrap();
    secondary.try_catch_up_with_primary().unwrap();
    assert_eq!(secondary.get_full_history_ts_low(&scf).unwrap(), 55);
    assert!(matches!(secondary.get_cf_opt(&scf, b"k", &at(35)), Err(Error::InvalidArgument(_))));
    assert_eq!(secondary.get_cf_opt(&scf, b"k", &at(55)).unwrap(), Some(b"v5".to_vec()));
}
