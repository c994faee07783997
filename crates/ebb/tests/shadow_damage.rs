//! Damage to a newer table never lets the older values it shadows through
//! (issue 15: reads never return a wrong answer).
//!
//! An older table holds `k000`..`k099`; a newer one deletes all of them
//! (tombstones) or holds newer values for all of them. The newer one sits in
//! L0 over an older L0 table, in L0 over L1, or in L1 (as two tables) over L2.
//! For each part of each newer table (every data block, the filter, index,
//! properties and metaindex blocks, the footer) a byte is flipped, the
//! database reopened on a fresh `MemFs` (the open, which opens every table,
//! fails naming the table for damage to what that reads), and read with
//! checksums verified:
//! `get` of every key, `multi_get`, scans both ways (cursor and Rust
//! iterator), and seeks both ways at several keys. Each read gives the newer
//! answer or a corruption error; never the shadowed older value, and never a
//! scan cut short that ends without an error. Since every flip is caught by a
//! checksum and a full scan reads every part of the table, each full scan
//! must also end in an error (so the damage is really exercised).
//!
//! The older table is damaged the same way: backwards, a key's older
//! version is met before its newer one, so a failure there must not leave
//! the older version standing either.
//!
//! With blob files, the newer values live in blob files (the tables hold
//! blob indexes) over older values inline: each part of each blob file (the
//! header, every record, the footer) is damaged the same way, and the file
//! is removed; a read gives the newer value or a corruption error, never
//! the older value.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::{files_of, fs_holding, Model};
use ebb::fs::{FileSystem, MemFs};
use ebb::internals::key::{make_internal_key, KIND_FOR_SEEK, MAX_SEQUENCE};
use ebb::internals::sst::format::FOOTER_LEN;
use ebb::internals::sst::Table;
use ebb::{CompressionType, Db, DbIterator, Error, IteratorMode, Options, ReadOptions};

const DB: &str = "/db";
const N: usize = 100;

type Files = Vec<(String, Vec<u8>)>;

fn key(i: usize) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

fn old_value(i: usize) -> Vec<u8> {
    format!("old-{i:03}").into_bytes()
}

fn new_value(i: usize) -> Vec<u8> {
    format!("new-{i:03}-value").into_bytes()
}

fn show(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shadow {
    Tombstones,
    NewerValues,
    /// Newer values written to blob files, over older values inline.
    NewerValuesInBlobFiles,
}

#[derive(Debug, Clone, Copy)]
enum Placement {
    L0OverL0,
    L0OverL1,
    /// The newer data in two L1 tables (its halves), so a damaged first
    /// table must not be skipped for the second.
    L1OverL2,
}

/// Small blocks so each table has several; one table per flush; no
/// compression, so the filter and index are a good share of the file.
fn options(fs: &MemFs) -> Options {
    let mut o = Options::default();
    o.create_if_missing = true;
    o.fs = Arc::new(fs.clone());
    o.write_buffer_size = 1 << 20;
    o.disable_auto_compactions = true;
    o.num_levels = 3;
    o.block_size = 256;
    o.bloom_bits_per_key = 10;
    o.compression = CompressionType::None;
    o.paranoid_checks = true;
    o
}

fn files_at(db: &Db, level: usize) -> usize {
    db.get_property(&format!("ebb.num-files-at-level{level}")).unwrap().parse().unwrap()
}

fn table_number(name: &str) -> u64 {
    name.trim_end_matches(".sst").parse().unwrap()
}

struct Fixture {
    what: String,
    files: Files,
    /// The tables of the older data.
    older_tables: Vec<String>,
    /// The tables written after the older data, which shadow it.
    newer_tables: Vec<String>,
    /// The blob files holding the newer values.
    newer_blob_files: Vec<String>,
    /// The visible state: the newer answers.
    model: Model,
}

fn fixture(shadow: Shadow, placement: Placement) -> Fixture {
    let fs = MemFs::new();
    let mut o = options(&fs);
    if let Placement::L1OverL2 = placement {
        // Automatic compaction moves L0 into L1 at once and, with L1's
        // target tiny, L1 into L2 (the last level): `compact_range` never
        // pushes data below the deepest level that holds some.
        // (Static level targets: dynamic ones would send L0 straight to L2.)
        o.disable_auto_compactions = false;
        o.level_compaction_dynamic_level_bytes = false;
        o.level0_file_num_compaction_trigger = 1;
        o.max_bytes_for_level_base = 1;
    }
    let db = Db::open(DB, o).unwrap();
    for i in 0..N {
        db.put(&key(i), &old_value(i)).unwrap();
    }
    db.flush(true).unwrap();
    match placement {
        Placement::L0OverL0 => {}
        Placement::L0OverL1 => db.compact_range(None, None).unwrap(),
        Placement::L1OverL2 => {
            db.wait_for_compact().unwrap();
            // From now on L1 holds what reaches it.
            db.set_options(&[("max_bytes_for_level_base", "1048576")]).unwrap();
        }
    }
    let old_tables: Vec<u64> =
        files_of(&fs, DB).iter().filter(|(n, _)| n.ends_with(".sst")).map(|(n, _)| table_number(n)).collect();
    if shadow == Shadow::NewerValuesInBlobFiles {
        db.set_options(&[("enable_blob_files", "true"), ("min_blob_size", "10")]).unwrap();
    }
    let write_newer = |range: std::ops::Range<usize>| {
        for i in range {
            match shadow {
                Shadow::Tombstones => db.delete(&key(i)).unwrap(),
                Shadow::NewerValues | Shadow::NewerValuesInBlobFiles => db.put(&key(i), &new_value(i)).unwrap(),
            }
        }
        db.flush(true).unwrap();
        if let Placement::L1OverL2 = placement {
            db.wait_for_compact().unwrap();
        }
    };
    match placement {
        Placement::L1OverL2 => {
            write_newer(0..N / 2);
            write_newer(N / 2..N);
            db.set_options(&[("disable_auto_compactions", "true")]).unwrap();
        }
        _ => write_newer(0..N),
    }
    let layout: Vec<usize> = (0..3).map(|l| files_at(&db, l)).collect();
    let expected = match placement {
        Placement::L0OverL0 => [2, 0, 0],
        Placement::L0OverL1 => [1, 1, 0],
        Placement::L1OverL2 => [0, 2, 1],
    };
    assert_eq!(layout, expected, "{placement:?}: files per level");
    db.close().unwrap();
    let files = files_of(&fs, DB);
    let (mut older_tables, mut newer_tables): (Vec<String>, Vec<String>) = files
        .iter()
        .map(|(n, _)| n.clone())
        .filter(|n| n.ends_with(".sst"))
        .partition(|n| old_tables.contains(&table_number(n)));
    older_tables.sort();
    newer_tables.sort();
    assert_eq!(older_tables.len(), 1, "{older_tables:?}");
    assert_eq!(newer_tables.len(), if let Placement::L1OverL2 = placement { 2 } else { 1 }, "{newer_tables:?}");
    let model = match shadow {
        Shadow::Tombstones => Model::new(),
        Shadow::NewerValues | Shadow::NewerValuesInBlobFiles => (0..N).map(|i| (key(i), new_value(i))).collect(),
    };
    let mut newer_blob_files: Vec<String> =
        files.iter().map(|(n, _)| n.clone()).filter(|n| n.ends_with(".blob")).collect();
    newer_blob_files.sort();
    let blob_files_wanted = match (shadow, placement) {
        (Shadow::NewerValuesInBlobFiles, Placement::L1OverL2) => 2,
        (Shadow::NewerValuesInBlobFiles, _) => 1,
        _ => 0,
    };
    assert_eq!(newer_blob_files.len(), blob_files_wanted, "{newer_blob_files:?}");
    Fixture { what: format!("{shadow:?} {placement:?}"), files, older_tables, newer_tables, newer_blob_files, model }
}

/// The byte ranges of a blob file's parts: the header, each record (walked
/// by the lengths in its header), the footer (docs/format.md, "Blob files").
fn blob_parts(bytes: &[u8]) -> Vec<(String, std::ops::Range<usize>)> {
    use ebb::internals::blob::format::{FOOTER_LEN, HEADER_LEN, RECORD_HEADER_LEN};
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let mut parts = vec![("header".to_string(), 0..HEADER_LEN)];
    let mut at = HEADER_LEN;
    while at < bytes.len() - FOOTER_LEN {
        let end = at + RECORD_HEADER_LEN + u32_at(at + 4) + u32_at(at + 8);
        parts.push((format!("record at {at}"), at..end));
        at = end;
    }
    parts.push(("footer".to_string(), bytes.len() - FOOTER_LEN..bytes.len()));
    parts
}

/// The byte ranges of `table`'s parts: each data block (its start found
/// through the index, for every key), then the filter, index, properties
/// and metaindex blocks and the footer (docs/format-sst.md, "File layout").
fn table_parts(files: &Files, table: &str) -> Vec<(String, std::ops::Range<usize>)> {
    let fs = fs_holding(DB, files);
    let path = Path::new(DB).join(table);
    let len = fs.file_size(&path).unwrap();
    let t = Table::open(fs.open_random(&path).unwrap(), len, table.to_string(), None).unwrap();
    let p = t.properties();
    let (data, filter, index) = (p.data_size as usize, p.filter_size as usize, p.index_size as usize);
    assert!(filter > 0, "the table must have a filter block");
    let mut starts: Vec<usize> = (0..N)
        .map(|i| t.approximate_offset_of(&make_internal_key(&key(i), MAX_SEQUENCE, KIND_FOR_SEEK)) as usize)
        .collect();
    starts.retain(|&s| s < data);
    starts.sort_unstable();
    starts.dedup();
    assert!(starts.len() >= 3 && starts[0] == 0, "data blocks start at {starts:?}");
    let mut parts: Vec<(String, std::ops::Range<usize>)> = starts
        .iter()
        .enumerate()
        .map(|(b, &s)| (format!("data block {b}"), s..starts.get(b + 1).copied().unwrap_or(data)))
        .collect();
    let len = len as usize;
    parts.push(("filter block".into(), data..data + filter));
    parts.push(("index block".into(), data + filter..data + filter + index));
    parts.push(("properties and metaindex blocks".into(), data + filter + index..len - FOOTER_LEN));
    parts.push(("footer".into(), len - FOOTER_LEN..len));
    parts
}

fn expect_corruption(ctx: &str, what: &str, e: &Error) {
    assert!(e.is_corruption(), "{ctx}: {what}: expected a corruption error, got {e:?}");
}

/// Walks `it` from where it stands with `step`, up to `limit` entries,
/// checking each against `expected`: every entry is the right one, and the
/// walk ends where `expected` does or with a corruption error, never early
/// with an OK status. Returns whether it ended in an error.
fn check_walk<'m>(
    ctx: &str,
    what: &str,
    it: &mut DbIterator<'_>,
    mut expected: impl Iterator<Item = (&'m Vec<u8>, &'m Vec<u8>)>,
    step: fn(&mut DbIterator<'_>),
    limit: usize,
) -> bool {
    for n in 0..limit {
        let w = expected.next();
        if !it.valid() {
            return match it.status() {
                Ok(()) => {
                    assert!(w.is_none(), "{ctx}: {what}: ended early after {n} entries without an error");
                    false
                }
                Err(e) => {
                    expect_corruption(ctx, what, &e);
                    true
                }
            };
        }
        assert!(
            w == Some((&it.key().to_vec(), &it.value().to_vec())),
            "{ctx}: {what}: entry {n} ({}) is wrong",
            show(it.key())
        );
        step(it);
    }
    false
}

/// Reads everything every way, checking each answer against `model`.
/// Returns whether a full forward and a full reverse scan each met an error.
fn check_reads(db: &Db, model: &Model, ctx: &str) -> (bool, bool) {
    let ro = ReadOptions::default();
    let probes: Vec<Vec<u8>> =
        (0..N).map(key).chain([b"a".to_vec(), b"k0505".to_vec(), b"k100".to_vec(), b"zzz".to_vec()]).collect();
    for k in &probes {
        match db.get(k) {
            Ok(v) => assert_eq!(v.as_ref(), model.get(k), "{ctx}: get {} returned a wrong answer", show(k)),
            Err(e) => expect_corruption(ctx, &format!("get {}", show(k)), &e),
        }
    }
    let refs: Vec<&[u8]> = probes.iter().map(Vec::as_slice).collect();
    for (k, r) in probes.iter().zip(db.multi_get(&refs, &ro)) {
        match r {
            Ok(v) => assert_eq!(v.as_ref(), model.get(k), "{ctx}: multi_get {} returned a wrong answer", show(k)),
            Err(e) => expect_corruption(ctx, &format!("multi_get {}", show(k)), &e),
        }
    }

    let mut it = db.iter(ro.clone());
    it.seek_to_first();
    let forward_failed = check_walk(ctx, "forward scan", &mut it, model.iter(), |it| it.next(), usize::MAX);
    let mut it = db.iter(ro.clone());
    it.seek_to_last();
    let reverse_failed = check_walk(ctx, "reverse scan", &mut it, model.iter().rev(), |it| it.prev(), usize::MAX);

    // The Rust iterators: right entries in order, then at most one error, last.
    for (mode, reverse) in [(IteratorMode::Start, false), (IteratorMode::End, true)] {
        let mut expected: Box<dyn Iterator<Item = (&Vec<u8>, &Vec<u8>)>> =
            if reverse { Box::new(model.iter().rev()) } else { Box::new(model.iter()) };
        let mut ended_in_error = false;
        for item in db.iterator(ro.clone(), mode) {
            assert!(!ended_in_error, "{ctx}: {mode:?} iterator went on after its error");
            match item {
                Ok((k, v)) => {
                    let w = expected.next();
                    assert!(w == Some((&k, &v)), "{ctx}: {mode:?} iterator gave {} wrongly", show(&k));
                }
                Err(e) => {
                    expect_corruption(ctx, &format!("{mode:?} iterator"), &e);
                    ended_in_error = true;
                }
            }
        }
        assert!(ended_in_error || expected.next().is_none(), "{ctx}: {mode:?} iterator ended early without an error");
    }

    // Seeks both ways, then a few steps on from each.
    for k in probes.iter().step_by(9).chain(&probes[N..]) {
        let mut it = db.iter(ro.clone());
        it.seek(k);
        check_walk(ctx, &format!("seek {}", show(k)), &mut it, model.range(k.clone()..), |it| it.next(), 3);
        let mut it = db.iter(ro.clone());
        it.seek_for_prev(k);
        let expected = model.range(..=k.clone()).rev();
        check_walk(ctx, &format!("seek_for_prev {}", show(k)), &mut it, expected, |it| it.prev(), 3);
    }
    (forward_failed, reverse_failed)
}

fn with_file(files: &Files, name: &str, bytes: Vec<u8>) -> Files {
    files.iter().map(|(n, b)| (n.clone(), if n == name { bytes.clone() } else { b.clone() })).collect()
}

/// Flips the first, the middle and the last byte of each part of each
/// table, one at a time, and checks every read of the damaged database.
fn check_damage(f: &Fixture) -> usize {
    let fs = fs_holding(DB, &f.files);
    let db = Db::open(DB, options(&fs)).unwrap();
    assert_eq!(check_reads(&db, &f.model, &f.what), (false, false), "{}: the undamaged copy", f.what);
    db.close().unwrap();
    let mut cases = 0;
    let tables = f.newer_tables.iter().map(|t| (t, "newer")).chain(f.older_tables.iter().map(|t| (t, "older")));
    for (table, age) in tables {
        let clean = f.files.iter().find(|(n, _)| n == table).unwrap().1.clone();
        for (part, range) in table_parts(&f.files, table) {
            for at in [range.start, (range.start + range.end) / 2, range.end - 1] {
                let mut bytes = clean.clone();
                bytes[at] ^= 0x41;
                let ctx = format!("{}: {age} table {table} byte {at} ({part}) flipped", f.what);
                let fs = fs_holding(DB, &with_file(&f.files, table, bytes));
                // The open opens every table: damage to what that reads (the
                // footer, index, filter, properties) fails it, naming the
                // table, and nothing is read.
                let db = match Db::open(DB, options(&fs)) {
                    Ok(db) => db,
                    Err(e) => {
                        assert!(e.is_corruption() && e.to_string().contains(table.as_str()), "{ctx}: open: {e}");
                        cases += 1;
                        continue;
                    }
                };
                let (forward, reverse) = check_reads(&db, &f.model, &ctx);
                assert!(forward && reverse, "{ctx}: a full scan did not notice the damage");
                db.close().unwrap();
                cases += 1;
            }
        }
    }
    for blob in &f.newer_blob_files {
        let clean = f.files.iter().find(|(n, _)| n == blob).unwrap().1.clone();
        for (part, range) in blob_parts(&clean) {
            for at in [range.start, (range.start + range.end) / 2, range.end - 1] {
                let mut bytes = clean.clone();
                bytes[at] ^= 0x41;
                let ctx = format!("{}: blob file {blob} byte {at} ({part}) flipped", f.what);
                let fs = fs_holding(DB, &with_file(&f.files, blob, bytes));
                let db = Db::open(DB, options(&fs)).unwrap_or_else(|e| panic!("{ctx}: open: {e}"));
                let (forward, reverse) = check_reads(&db, &f.model, &ctx);
                assert!(forward && reverse, "{ctx}: a full scan did not notice the damage");
                db.close().unwrap();
                cases += 1;
            }
        }
        // Gone while the database is open (an open refuses a missing one).
        let ctx = format!("{}: blob file {blob} removed", f.what);
        let fs = fs_holding(DB, &f.files);
        let db = Db::open(DB, options(&fs)).unwrap();
        fs.remove_file(&Path::new(DB).join(blob)).unwrap();
        let (forward, reverse) = check_reads(&db, &f.model, &ctx);
        assert!(forward && reverse, "{ctx}: a full scan did not notice");
        cases += 1;
    }
    cases
}

fn run(shadow: Shadow) {
    for placement in [Placement::L0OverL0, Placement::L0OverL1, Placement::L1OverL2] {
        let f = fixture(shadow, placement);
        let cases = check_damage(&f);
        eprintln!("{}: {cases} damages read back", f.what);
        assert!(cases >= 24, "{}: only {cases} damages", f.what);
    }
}

#[test]
fn damaged_tombstones_never_uncover_deleted_values() {
    run(Shadow::Tombstones);
}

#[test]
fn damaged_newer_values_never_uncover_older_values() {
    run(Shadow::NewerValues);
}

#[test]
fn damaged_blob_files_never_uncover_older_values() {
    run(Shadow::NewerValuesInBlobFiles);
}
