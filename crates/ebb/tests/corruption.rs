//! Damaged files: every damage is either survived as the WAL recovery mode
//! promises or reported as an error naming the file, never a panic and never
//! a wrong value.
//!
//! - WAL: a byte flipped in a middle record or in the last one, a torn tail,
//!   a zeroed tail, damage in an older WAL; each under the four
//!   `WalRecoveryMode`s (docs/format.md, "WAL recovery modes").
//! - SST: every byte of the filter, index, properties and metaindex blocks
//!   and of the footer, and a dense sample of the data blocks, flipped one at
//!   a time (docs/format-sst.md, "File layout"). With checksums verified, a
//!   read returns the right value or a corruption error; without, it at least
//!   returns.
//! - Blob files: every byte (a sample, with compression) flipped one at a
//!   time: with checksums verified, a read returns the right value or a
//!   corruption error naming the blob file, in point reads and iteration.
//! - MANIFEST and CURRENT: a flipped byte anywhere but the last record of the
//!   MANIFEST, and a CURRENT that names nothing, garbage or a non-MANIFEST,
//!   fail the open with an error that names the file.
//!
//! Each case plants its damaged copy of a database into a fresh `MemFs`.

mod common;

use std::path::Path;

use common::{files_of, fs_holding, log_records, tiny_options, try_scan, Model};
use ebb::fs::{FileSystem, MemFs};
use ebb::internals::sst::format::FOOTER_LEN;
use ebb::internals::sst::Table;
use ebb::{CompressionType, Db, Error, Options, ReadOptions, WalRecoveryMode, WriteOptions};

const DB: &str = "/db";

const MODES: [WalRecoveryMode; 4] = [
    WalRecoveryMode::TolerateCorruptedTailRecords,
    WalRecoveryMode::AbsoluteConsistency,
    WalRecoveryMode::PointInTime,
    WalRecoveryMode::SkipAnyCorruptedRecords,
];

type Files = Vec<(String, Vec<u8>)>;

fn key(i: usize) -> Vec<u8> {
    format!("key{i:03}").into_bytes()
}

/// About 2 KB, so a WAL of 40 records spans three 32 KiB blocks and some
/// records are fragmented across block boundaries.
fn wal_value(i: usize) -> Vec<u8> {
    format!("value {i:03} ").repeat(200).into_bytes()
}

fn bytes_of<'a>(files: &'a Files, name: &str) -> &'a [u8] {
    &files.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no file {name}")).1
}

fn with_file(files: &Files, name: &str, bytes: Vec<u8>) -> Files {
    files.iter().map(|(n, b)| (n.clone(), if n == name { bytes.clone() } else { b.clone() })).collect()
}

fn names_ending(files: &Files, suffix: &str) -> Vec<String> {
    let mut v: Vec<String> = files.iter().filter(|(n, _)| n.ends_with(suffix)).map(|(n, _)| n.clone()).collect();
    v.sort();
    v
}

// ---------------------------------------------------------------- WAL ----

/// A database whose only copy of `n` writes is its WAL(s): close syncs the
/// WAL but does not flush memtables. With `wal_switches`, background work is
/// paused and the memtable is small, so the writes spread over two WALs that
/// are both replayed at the next open.
fn wal_fixture(n: usize, wal_switches: bool) -> Files {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.write_buffer_size = if wal_switches { 48 * 1024 } else { 4 << 20 };
    let db = Db::open(DB, o).unwrap();
    if wal_switches {
        db.pause_background_work();
    }
    for i in 0..n {
        db.put(&key(i), &wal_value(i)).unwrap();
    }
    db.close().unwrap();
    let files = files_of(&fs, DB);
    assert!(names_ending(&files, ".sst").is_empty(), "the fixture must keep its data in WALs only");
    let wals = names_ending(&files, ".log");
    assert_eq!(wals.len(), if wal_switches { 2 } else { 1 }, "WALs: {wals:?}");
    let records: usize = wals.iter().map(|w| log_records(bytes_of(&files, w)).len()).sum();
    // One record per put, and the end mark of each WAL a switch closed.
    assert_eq!(records, n + wals.len() - 1, "one WAL record per put");
    files
}

/// The writes as a model: the first `n` puts.
fn wal_prefix(n: usize) -> Model {
    (0..n).map(|i| (key(i), wal_value(i))).collect()
}

fn wal_options(fs: &MemFs, mode: WalRecoveryMode) -> Options {
    let mut o = tiny_options(Some(fs.clone()));
    o.write_buffer_size = 4 << 20;
    o.wal_recovery_mode = mode;
    o
}

/// One damaged WAL: which file, which record (counted over all WALs, in
/// write order) the damage hits, and whether recovery may treat it as a torn
/// tail (it is in the last WAL and no intact record follows it).
struct WalDamage {
    what: String,
    files: Files,
    wal: String,
    record: usize,
    is_tail: bool,
    /// Some intact record follows the damage in a later block or a later WAL,
    /// so skip mode must find it.
    later_records_survive: bool,
    /// A later WAL holds writes: point-in-time recovery refuses to drop them.
    later_wal_has_writes: bool,
}

/// Recovers `d` under `mode` and checks the mode's promise, then checks the
/// recovered state is itself durable and writable.
fn check_wal_recovery(d: &WalDamage, written: usize, mode: WalRecoveryMode) {
    let ctx = format!("{} under {mode:?}", d.what);
    let fs = fs_holding(DB, &d.files);
    let refused = match mode {
        WalRecoveryMode::AbsoluteConsistency => true,
        WalRecoveryMode::TolerateCorruptedTailRecords => !d.is_tail,
        WalRecoveryMode::PointInTime => d.later_wal_has_writes,
        WalRecoveryMode::SkipAnyCorruptedRecords => false,
    };
    let opened = Db::open(DB, wal_options(&fs, mode));
    if refused {
        let e = opened.err().unwrap_or_else(|| panic!("{ctx}: open must fail"));
        assert!(e.is_corruption(), "{ctx}: expected a corruption error, got {e:?}");
        assert!(e.to_string().contains(&d.wal), "{ctx}: the error must name {}: {e}", d.wal);
        assert!(fs.exists(&Path::new(DB).join(&d.wal)), "{ctx}: a refused open must leave the WAL in place");
        return;
    }
    let db = opened.unwrap_or_else(|e| panic!("{ctx}: open must succeed: {e}"));
    check_damage_evidence(&fs, &db, d, &ctx);
    let got = try_scan(&db, ReadOptions::default()).unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
    let all = wal_prefix(written);
    if mode == WalRecoveryMode::SkipAnyCorruptedRecords {
        for (k, v) in &got {
            assert_eq!(all.get(k), Some(v), "{ctx}: key {} was never written so", String::from_utf8_lossy(k));
        }
        for i in 0..d.record {
            assert!(got.contains_key(&key(i)), "{ctx}: record {i}, before the damage, was lost");
        }
        assert!(!got.contains_key(&key(d.record)), "{ctx}: the damaged record {} was kept", d.record);
        if d.later_records_survive {
            assert!(got.keys().any(|k| *k > key(d.record)), "{ctx}: nothing after the damage was recovered");
        }
    } else {
        assert!(got == wal_prefix(d.record), "{ctx}: expected the first {} writes, got {} keys", d.record, got.len());
    }
    // The recovered state is durable and the database takes new writes.
    db.put_opt(b"zz-after", b"new", &WriteOptions { sync: true, disable_wal: false }).unwrap();
    db.close().unwrap();
    let db = Db::open(DB, wal_options(&fs, mode)).unwrap_or_else(|e| panic!("{ctx}: second open: {e}"));
    let mut want = got;
    want.insert(b"zz-after".to_vec(), b"new".to_vec());
    let again = try_scan(&db, ReadOptions::default()).unwrap_or_else(|e| panic!("{ctx}: second scan: {e}"));
    assert!(again == want, "{ctx}: the second open does not see the recovered state plus the new write");
}

/// Damage a recovery mode accepted leaves evidence: the report, the
/// property and the info log name the WAL and the offset, and the WAL is kept
/// in `lost/` instead of being deleted.
fn check_damage_evidence(fs: &MemFs, db: &Db, d: &WalDamage, ctx: &str) {
    let report = db.recovery_report();
    let w = report
        .wal_damage
        .iter()
        .find(|w| w.damage.file.ends_with(&d.wal))
        .unwrap_or_else(|| panic!("{ctx}: the recovery report does not name {}: {report:?}", d.wal));
    let property = db.get_property("ebb.recovery-report").unwrap_or_default();
    assert!(
        property.contains(&d.wal) && property.contains(&format!("offset {}", w.damage.offset)),
        "{ctx}: {property}"
    );
    let log = String::from_utf8(fs.file_bytes(&Path::new(DB).join("LOG")).unwrap()).unwrap();
    assert!(log.contains(&d.wal) && log.contains("[WARN]"), "{ctx}: the info log does not name {}:\n{log}", d.wal);
    let kept = Path::new(DB).join(ebb::LOST_DIR).join(&d.wal);
    assert!(fs.exists(&kept), "{ctx}: the damaged WAL was not kept as {}", kept.display());
    assert!(report.set_aside.iter().any(|s| s.to.ends_with(&d.wal)), "{ctx}: {report:?}");
}

fn run_wal_damages(damages: &[WalDamage], written: usize) -> usize {
    for d in damages {
        for mode in MODES {
            check_wal_recovery(d, written, mode);
        }
    }
    damages.len() * MODES.len()
}

#[test]
fn wal_damage_in_one_log_follows_each_recovery_mode() {
    const N: usize = 40;
    let files = wal_fixture(N, false);
    let wal = names_ending(&files, ".log").remove(0);
    let clean = bytes_of(&files, &wal).to_vec();
    let records = log_records(&clean);
    let block_of = |offset: usize| offset / (32 * 1024);
    let damage = |what: String, bytes: Vec<u8>, record: usize| {
        let (offset, _) = records[record];
        WalDamage {
            what,
            files: with_file(&files, &wal, bytes),
            wal: wal.clone(),
            record,
            is_tail: record == N - 1,
            later_records_survive: records.iter().any(|(o, _)| block_of(*o) > block_of(offset)),
            later_wal_has_writes: false,
        }
    };
    let flipped = |at: usize| {
        let mut b = clean.clone();
        b[at] ^= 0x20;
        b
    };
    let mut cases = Vec::new();
    // Every header byte and two payload bytes of a middle record.
    let middle = N / 2;
    let (at, len) = records[middle];
    assert!(len > 100, "the middle record's first fragment is too short to aim at");
    for i in (0..7).chain([7 + 10, 7 + len / 2]) {
        cases.push(damage(format!("byte {i} of middle record {middle} flipped"), flipped(at + i), middle));
    }
    // The last record: a flipped checksum, length or payload byte.
    let (at, _) = records[N - 1];
    for i in [0, 4, 7 + 10] {
        cases.push(damage(format!("byte {i} of the last record flipped"), flipped(at + i), N - 1));
    }
    // A torn tail: cut in the header, in the payload, one byte short.
    for cut in [at + 3, at + 7 + 100, clean.len() - 1] {
        cases.push(damage(format!("log cut at {cut} of {}", clean.len()), clean[..cut].to_vec(), N - 1));
    }
    let explored = run_wal_damages(&cases, N);

    // Zero-filled space at the end (a crash on a filesystem that zero-fills
    // unwritten blocks) is not damage: every mode keeps what precedes it.
    let mut zeroed = clean.clone();
    zeroed[at..].fill(0);
    for mode in MODES {
        let fs = fs_holding(DB, &with_file(&files, &wal, zeroed.clone()));
        let db = Db::open(DB, wal_options(&fs, mode)).unwrap_or_else(|e| panic!("zeroed tail, {mode:?}: {e}"));
        assert!(try_scan(&db, ReadOptions::default()).unwrap() == wal_prefix(N - 1), "zeroed tail, {mode:?}");
    }
    assert!(explored >= 50);
}

#[test]
fn wal_damage_in_an_older_log_is_never_a_tail() {
    const N: usize = 40;
    let files = wal_fixture(N, true);
    let wals = names_ending(&files, ".log");
    let (older, newer) = (&wals[0], &wals[1]);
    // The older WAL's puts; its last record is the end mark its switch wrote.
    let in_older = log_records(bytes_of(&files, older)).len() - 1;
    assert!(in_older > 1 && in_older < N, "the fixture must split the writes: {in_older} of {N} in the older WAL");
    let older_bytes = bytes_of(&files, older).to_vec();
    let (last_at, _) = log_records(&older_bytes)[in_older - 1];
    let (first_at, _) = log_records(&older_bytes)[0];
    let mut cases = Vec::new();
    for (what, at, record) in [("last", last_at, in_older - 1), ("first", first_at, 0)] {
        let mut b = older_bytes.clone();
        b[at + 7 + 10] ^= 0x01;
        cases.push(WalDamage {
            what: format!("{what} record of the older WAL {older} flipped"),
            files: with_file(&files, older, b),
            wal: older.clone(),
            record,
            is_tail: false,
            later_records_survive: true,
            later_wal_has_writes: true,
        });
    }
    let cut = last_at + 7 + 50;
    cases.push(WalDamage {
        what: format!("older WAL {older} cut inside its last record"),
        files: with_file(&files, older, older_bytes[..cut].to_vec()),
        wal: older.clone(),
        record: in_older - 1,
        is_tail: false,
        later_records_survive: true,
        later_wal_has_writes: true,
    });
    run_wal_damages(&cases, N);

    // The newer WAL's torn tail is a tail.
    let newer_bytes = bytes_of(&files, newer).to_vec();
    let (at, _) = *log_records(&newer_bytes).last().unwrap();
    let torn = WalDamage {
        what: format!("newer WAL {newer} cut inside its last record"),
        files: with_file(&files, newer, newer_bytes[..at + 7 + 50].to_vec()),
        wal: newer.clone(),
        record: N - 1,
        is_tail: true,
        later_records_survive: false,
        later_wal_has_writes: false,
    };
    run_wal_damages(&[torn], N);
}

// ---------------------------------------------------------------- SST ----

struct SstFixture {
    files: Files,
    table: String,
    model: Model,
    /// Keys to read: live, deleted and never written.
    probes: Vec<Vec<u8>>,
    options: Options,
}

/// One table holding 150 puts and 15 deletes in many small blocks, with a
/// bloom filter, flushed and closed; automatic compaction is off so nothing
/// rewrites the table while it is read.
fn sst_fixture(compression: CompressionType) -> SstFixture {
    fixture_with(compression, |_| {})
}

fn fixture_with(compression: CompressionType, configure: impl Fn(&mut Options)) -> SstFixture {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.write_buffer_size = 4 << 20;
    o.disable_auto_compactions = true;
    o.block_size = 256;
    o.bloom_bits_per_key = 10;
    o.compression = compression;
    configure(&mut o);
    let db = Db::open(DB, o.clone()).unwrap();
    let mut model = Model::new();
    for i in 0..150 {
        let v = format!("value-{i}-").repeat(1 + i % 5).into_bytes();
        db.put(&key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    for i in (0..150).step_by(10) {
        db.delete(&key(i)).unwrap();
        model.remove(&key(i));
    }
    db.flush(true).unwrap();
    db.close().unwrap();
    let files = files_of(&fs, DB);
    let tables = names_ending(&files, ".sst");
    assert_eq!(tables.len(), 1, "{tables:?}");
    let probes = (0..160).map(key).chain([b"a".to_vec(), b"key0505".to_vec(), b"zzz".to_vec()]).collect();
    SstFixture { files, table: tables[0].clone(), model, probes, options: o }
}

/// As [`sst_fixture`], with range tombstones in the table too: ranges
/// over live keys, over deleted ones, and past the last key.
fn range_deletion_fixture() -> SstFixture {
    let mut f = fixture_with(CompressionType::None, |_| {});
    let fs = fs_holding(DB, &f.files);
    let mut o = f.options.clone();
    o.fs = std::sync::Arc::new(fs.clone());
    let db = Db::open(DB, o).unwrap();
    // A snapshot from before the tombstones keeps the compaction below from
    // dropping them with what they delete, so one table holds both.
    let snapshot = db.snapshot();
    for (a, b) in [(20, 35), (60, 61), (140, 170)] {
        db.delete_range(&key(a), &key(b)).unwrap();
        for i in a..b {
            f.model.remove(&key(i));
        }
    }
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    drop(snapshot);
    db.close().unwrap();
    f.files = files_of(&fs, DB);
    let tables = names_ending(&f.files, ".sst");
    assert_eq!(tables.len(), 1, "{tables:?}");
    f.table = tables[0].clone();
    let path = Path::new(DB).join(&f.table);
    let table = Table::open(fs.open_random(&path).unwrap(), fs.file_size(&path).unwrap(), f.table.clone(), None);
    assert_eq!(table.unwrap().properties().num_range_deletions, 3, "the table holds the tombstones");
    f
}

/// The byte ranges of a table's parts, from its properties (the parts are
/// laid out in this order; docs/format-sst.md, "File layout").
fn table_parts(f: &SstFixture) -> Vec<(&'static str, std::ops::Range<usize>)> {
    let fs = fs_holding(DB, &f.files);
    let path = Path::new(DB).join(&f.table);
    let len = fs.file_size(&path).unwrap();
    let table = Table::open(fs.open_random(&path).unwrap(), len, f.table.clone(), None).unwrap();
    let p = table.properties();
    let (data, filter, index) = (p.data_size as usize, p.filter_size as usize, p.index_size as usize);
    assert!(filter > 0, "the fixture must have a filter block");
    let len = len as usize;
    vec![
        ("data", 0..data),
        ("filter", data..data + filter),
        ("index", data + filter..data + filter + index),
        ("properties and metaindex", data + filter + index..len - FOOTER_LEN),
        ("footer", len - FOOTER_LEN..len),
    ]
}

/// Reads with checksums verified must give the right answer or a
/// corruption error: point reads, scans both ways, and seeks.
fn check_verified_reads(db: &Db, f: &SstFixture, ctx: &str) {
    let ro = ReadOptions::default();
    let expect_corruption = |what: &str, e: Error| {
        assert!(e.is_corruption(), "{ctx}: {what}: expected a corruption error, got {e:?}");
    };
    for k in &f.probes {
        match db.get_opt(k, &ro) {
            Ok(v) => assert_eq!(v.as_ref(), f.model.get(k), "{ctx}: get {} returned a wrong value", show(k)),
            Err(e) => expect_corruption("get", e),
        }
    }
    let want: Vec<(&Vec<u8>, &Vec<u8>)> = f.model.iter().collect();
    let mut it = db.iter(ro.clone());
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        assert!(n < want.len(), "{ctx}: forward scan returned more entries than exist");
        assert!((it.key(), it.value()) == (&want[n].0[..], &want[n].1[..]), "{ctx}: forward scan entry {n} is wrong");
        n += 1;
        it.next();
    }
    match it.status() {
        Ok(()) => assert_eq!(n, want.len(), "{ctx}: forward scan ended early without an error"),
        Err(e) => expect_corruption("forward scan", e),
    }
    let mut it = db.iter(ro.clone());
    it.seek_to_last();
    let mut n = 0;
    while it.valid() {
        assert!(n < want.len(), "{ctx}: reverse scan returned more entries than exist");
        let (k, v) = want[want.len() - 1 - n];
        assert!((it.key(), it.value()) == (&k[..], &v[..]), "{ctx}: reverse scan entry {n} is wrong");
        n += 1;
        it.prev();
    }
    match it.status() {
        Ok(()) => assert_eq!(n, want.len(), "{ctx}: reverse scan ended early without an error"),
        Err(e) => expect_corruption("reverse scan", e),
    }
    for k in f.probes.iter().step_by(7) {
        let mut it = db.iter(ro.clone());
        it.seek(k);
        let expected = f.model.range(k.clone()..).next();
        if it.valid() {
            let (wk, wv) = expected.unwrap_or_else(|| panic!("{ctx}: seek {} found an entry past the end", show(k)));
            assert!((it.key(), it.value()) == (&wk[..], &wv[..]), "{ctx}: seek {} landed wrong", show(k));
        } else {
            match it.status() {
                Ok(()) => assert!(expected.is_none(), "{ctx}: seek {} found nothing without an error", show(k)),
                Err(e) => expect_corruption("seek", e),
            }
        }
    }
}

/// Reads without checksum verification: anything but a panic or a hang.
fn exercise_unverified_reads(db: &Db, f: &SstFixture) {
    let ro = ReadOptions { verify_checksums: false, ..ReadOptions::default() };
    for k in &f.probes {
        let _ = db.get_opt(k, &ro);
    }
    // A table holds at most this many entries, however damaged: a scan that
    // goes on longer is stuck.
    let bound = 4 * (f.probes.len() + 1000);
    let mut it = db.iter(ro.clone());
    it.seek_to_first();
    let mut steps = 0;
    while it.valid() {
        steps += 1;
        assert!(steps < bound, "an unverified forward scan does not end");
        it.next();
    }
    let _ = it.status();
    let mut it = db.iter(ro);
    it.seek_to_last();
    let mut steps = 0;
    while it.valid() {
        steps += 1;
        assert!(steps < bound, "an unverified reverse scan does not end");
        it.prev();
    }
    let _ = it.status();
}

fn show(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

/// Flips each chosen byte of the fixture's table in turn and reads the
/// damaged database both with and without checksum verification.
fn flip_table_bytes(f: &SstFixture, data_stride: usize) -> usize {
    let clean = bytes_of(&f.files, &f.table).to_vec();
    let mut flipped = 0;
    for (part, range) in table_parts(f) {
        let stride = if part == "data" { data_stride } else { 1 };
        for at in range.step_by(stride) {
            // Vary which bits flip: the low bit, the high bit, all of them.
            let mask = [0x01, 0x80, 0xff][at % 3];
            let mut bytes = clean.clone();
            bytes[at] ^= mask;
            let fs = fs_holding(DB, &with_file(&f.files, &f.table, bytes));
            let ctx = format!("{} byte {at} ({part}) ^ {mask:#04x}", f.table);
            let mut o = f.options.clone();
            o.fs = std::sync::Arc::new(fs);
            let db = match Db::open(DB, o) {
                Ok(db) => db,
                Err(e) => {
                    assert!(e.is_corruption(), "{ctx}: open: {e:?}");
                    continue;
                }
            };
            // Verified reads first, so the block cache holds only verified blocks.
            check_verified_reads(&db, f, &ctx);
            exercise_unverified_reads(&db, f);
            db.close().unwrap();
            flipped += 1;
        }
    }
    flipped
}

/// Every byte of a table with range tombstones flipped in turn (its
/// range-deletion block among them): reads give the right answer (no
/// deleted key comes back) or a corruption error.
#[test]
fn sst_damage_with_range_tombstones_is_detected_or_harmless() {
    let f = range_deletion_fixture();
    let len = bytes_of(&f.files, &f.table).len();
    let flipped = flip_table_bytes(&f, 61);
    assert!(flipped > 0 && len > 0);
}

#[test]
fn sst_damage_is_detected_or_harmless_uncompressed() {
    let f = sst_fixture(CompressionType::None);
    let n = flip_table_bytes(&f, 4);
    eprintln!("uncompressed table: {n} byte flips read back");
    assert!(n > 1000, "only {n} positions flipped");
}

#[test]
fn sst_damage_is_detected_or_harmless_snappy() {
    let f = sst_fixture(CompressionType::Snappy);
    let n = flip_table_bytes(&f, 4);
    eprintln!("snappy table: {n} byte flips read back");
    assert!(n > 500, "only {n} positions flipped");
}

// ---------------------------------------------------------- blob files ----

/// [`sst_fixture`]'s data with values of 30 bytes or more (most of them) in
/// one blob file, compressed with `compression`.
fn blob_fixture(compression: CompressionType) -> (SstFixture, String) {
    let f = fixture_with(CompressionType::None, |o| {
        o.enable_blob_files = true;
        o.min_blob_size = 30;
        o.blob_compression_type = compression;
    });
    let blobs = names_ending(&f.files, ".blob");
    assert_eq!(blobs.len(), 1, "{blobs:?}");
    let blob = blobs[0].clone();
    (f, blob)
}

/// Flips every `stride`-th byte of the fixture's blob file in turn: every
/// verified read gives the right value or a corruption error, and an error
/// names the blob file (the tables are intact); every flip is noticed by a
/// full scan, which reads every blob.
fn flip_blob_bytes(f: &SstFixture, blob: &str, stride: usize) -> usize {
    let clean = bytes_of(&f.files, blob).to_vec();
    let mut flipped = 0;
    for at in (0..clean.len()).step_by(stride) {
        let mask = [0x01, 0x80, 0xff][at % 3];
        let mut bytes = clean.clone();
        bytes[at] ^= mask;
        let fs = fs_holding(DB, &with_file(&f.files, blob, bytes));
        let ctx = format!("{blob} byte {at} ^ {mask:#04x}");
        let mut o = f.options.clone();
        o.fs = std::sync::Arc::new(fs);
        let db = Db::open(DB, o).unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
        check_verified_reads(&db, f, &ctx);
        let mut errors = 0;
        for k in &f.probes {
            if let Err(e) = db.get(k) {
                assert!(e.to_string().contains(blob), "{ctx}: the error does not name the blob file: {e}");
                errors += 1;
            }
        }
        assert!(errors > 0, "{ctx}: no read noticed the damage");
        let e = try_scan(&db, ReadOptions::default()).expect_err(&ctx);
        assert!(e.is_corruption() && e.to_string().contains(blob), "{ctx}: scan: {e}");
        exercise_unverified_reads(&db, f);
        db.close().unwrap();
        flipped += 1;
    }
    flipped
}

#[test]
fn blob_file_damage_is_detected_uncompressed() {
    let (f, blob) = blob_fixture(CompressionType::None);
    let n = flip_blob_bytes(&f, &blob, 3);
    eprintln!("uncompressed blob file: {n} byte flips read back");
    assert!(n > 1000, "only {n} positions flipped");
}

#[test]
fn blob_file_damage_is_detected_lz4() {
    let (f, blob) = blob_fixture(CompressionType::Lz4);
    let n = flip_blob_bytes(&f, &blob, 5);
    eprintln!("lz4 blob file: {n} byte flips read back");
    assert!(n > 200, "only {n} positions flipped");
}

// ---------------------------------------------------- MANIFEST, CURRENT ----

/// A database with several flushes, so its MANIFEST holds several edits,
/// and no data left in its WAL.
fn manifest_fixture() -> (Files, Model) {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs.clone()));
    o.write_buffer_size = 4 << 20;
    o.disable_auto_compactions = true;
    let db = Db::open(DB, o).unwrap();
    let mut model = Model::new();
    for round in 0..4 {
        for i in 0..10 {
            let (k, v) = (key(round * 10 + i), format!("round {round}").into_bytes());
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush(true).unwrap();
    }
    db.close().unwrap();
    (files_of(&fs, DB), model)
}

fn manifest_name(files: &Files) -> String {
    let v: Vec<String> = files.iter().filter(|(n, _)| n.starts_with("MANIFEST-")).map(|(n, _)| n.clone()).collect();
    assert_eq!(v.len(), 1, "{v:?}");
    v[0].clone()
}

fn open_planted(files: &Files) -> (MemFs, ebb::Result<Db>) {
    let fs = fs_holding(DB, files);
    let mut o = tiny_options(Some(fs.clone()));
    o.create_if_missing = false;
    let r = Db::open(DB, o);
    (fs, r)
}

#[test]
fn manifest_damage_before_its_last_record_fails_the_open() {
    let (files, model) = manifest_fixture();
    let manifest = manifest_name(&files);
    let clean = bytes_of(&files, &manifest).to_vec();
    let records = log_records(&clean);
    assert!(records.len() >= 5, "the MANIFEST holds {} records", records.len());
    let (last, _) = *records.last().unwrap();
    // The undamaged copy opens to the written state.
    let (_, db) = open_planted(&files);
    assert!(try_scan(&db.unwrap(), ReadOptions::default()).unwrap() == model);
    let mut flipped = 0;
    for at in 0..last {
        for mask in [0x01u8, 0x80] {
            let mut bytes = clean.clone();
            bytes[at] ^= mask;
            let damaged = with_file(&files, &manifest, bytes);
            let (fs, r) = open_planted(&damaged);
            let e = r.err().unwrap_or_else(|| panic!("{manifest} byte {at} ^ {mask:#04x}: open must fail"));
            assert!(e.is_corruption(), "{manifest} byte {at} ^ {mask:#04x}: expected corruption, got {e:?}");
            assert!(e.to_string().contains(&manifest), "the error must name {manifest}: {e}");
            // The info log (LOG, LOG.old.*) is the only thing a failed open may change.
            let data = |n: &String| !n.starts_with("LOG");
            let left: Vec<String> = files_of(&fs, DB).into_iter().map(|(n, _)| n).filter(data).collect();
            let before: Vec<String> = damaged.iter().map(|(n, _)| n.clone()).filter(data).collect();
            assert_eq!(left, before, "a failed open must leave the files for repair");
            flipped += 1;
        }
    }
    assert!(flipped > 200, "{flipped}");
}

#[test]
fn a_bad_current_file_fails_the_open_clearly() {
    let (files, _) = manifest_fixture();
    let manifest = manifest_name(&files);
    let wal = names_ending(&files, ".log").remove(0);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("names a missing MANIFEST", b"MANIFEST-000999\n".to_vec(), "MANIFEST-000999"),
        ("is empty", Vec::new(), "CURRENT"),
        ("holds garbage", vec![0xde, 0xad, 0xbe, 0xef, 0x00, 0x17], "CURRENT"),
        ("lacks its newline", manifest.as_bytes().to_vec(), "CURRENT"),
        ("names a WAL", format!("{wal}\n").into_bytes(), "CURRENT"),
    ];
    for (what, current, named) in cases {
        let (_, r) = open_planted(&with_file(&files, "CURRENT", current));
        let e = r.err().unwrap_or_else(|| panic!("CURRENT {what}: open must fail"));
        assert!(e.to_string().contains(named), "CURRENT {what}: the error must name {named}: {e}");
        assert!(!matches!(e, Error::InvalidArgument(_) | Error::Busy(_)), "CURRENT {what}: {e:?}");
    }
    // A MANIFEST name that holds something else entirely (a WAL's bytes).
    let mut planted = with_file(&files, "CURRENT", b"MANIFEST-000999\n".to_vec());
    planted.push(("MANIFEST-000999".into(), bytes_of(&files, &wal).to_vec()));
    let (_, r) = open_planted(&planted);
    let e = r.err().expect("CURRENT naming a non-MANIFEST: open must fail");
    assert!(e.is_corruption() && e.to_string().contains("MANIFEST-000999"), "{e:?}");

    // Without CURRENT the directory is not taken for an empty one: no new
    // database is created over the old files.
    let without: Files = files.iter().filter(|(n, _)| n != "CURRENT").cloned().collect();
    let fs = fs_holding(DB, &without);
    let e = Db::open(DB, tiny_options(Some(fs.clone()))).err().expect("open without CURRENT must fail");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert!(!fs.exists(&Path::new(DB).join("CURRENT")), "a new CURRENT was written over the old database");
    assert_eq!(names_ending(&files_of(&fs, DB), ".sst"), names_ending(&files, ".sst"));
}
