//! Damage to the MANIFEST and CURRENT, at every byte and every length, in
//! several small databases (docs/reliability.md, "Damage and what it leads
//! to"): one table; tables across levels; after MANIFEST rollovers; with
//! column families, one of them created after the last rollover and one
//! dropped.
//!
//! For each damaged copy the promise is:
//! - the open fails with a corruption error that names the MANIFEST (or
//!   CURRENT), or — only for an incomplete last record, or a copy cut at a
//!   record boundary that nothing was acted on after — it opens with every
//!   synced write present, in every family, and nothing else;
//! - never an empty open while data files exist;
//! - no table is ever deleted by a damaged open: every `.sst` is still in the
//!   directory or in `lost/`, byte for byte.
//!
//! Repair is checked on the same copies: every copy whose open fails is
//! repaired, and the repaired database holds every synced write.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use common::{family_contents, files_of, fs_holding, log_records, manual_options, Model, SYNCED};
use ebb::fs::{FileSystem, MemFs};
use ebb::{ColumnFamilyHandle, Db, Options, LOST_DIR};

const DB: &str = "/db";

type Files = Vec<(String, Vec<u8>)>;

/// A database's files and what a reader must find in each family.
struct Fixture {
    name: &'static str,
    files: Files,
    /// Family name to model (the default family is "default").
    models: BTreeMap<String, Model>,
}

fn options(fs: &MemFs) -> Options {
    let mut o = manual_options(fs);
    o.stats_dump_period_sec = 0;
    o
}

/// Writes `n` synced puts into `cf` (or the default family) and the model.
fn fill(db: &Db, cf: Option<&ColumnFamilyHandle>, model: &mut Model, prefix: &str, n: usize) {
    for i in 0..n {
        let (k, v) = (format!("{prefix}{i:04}").into_bytes(), format!("{prefix} value {i}").into_bytes());
        match cf {
            Some(cf) => db.put_cf_opt(cf, &k, &v, &SYNCED).unwrap(),
            None => db.put_opt(&k, &v, &SYNCED).unwrap(),
        }
        model.insert(k, v);
    }
}

/// One flushed table, and a few writes left in the WAL.
fn one_table() -> Fixture {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    let mut model = Model::new();
    fill(&db, None, &mut model, "a", 40);
    db.flush(true).unwrap();
    fill(&db, None, &mut model, "b", 5);
    db.close().unwrap();
    Fixture { name: "one table", files: files_of(&fs, DB), models: BTreeMap::from([("default".into(), model)]) }
}

/// Tables at L0 and two deeper levels, deletes included, writes in the WAL.
fn levels() -> Fixture {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    let mut model = Model::new();
    fill(&db, None, &mut model, "a", 60);
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    fill(&db, None, &mut model, "b", 30);
    for i in (0..60).step_by(7) {
        let k = format!("a{i:04}").into_bytes();
        db.delete_opt(&k, &SYNCED).unwrap();
        model.remove(&k);
    }
    db.flush(true).unwrap();
    fill(&db, None, &mut model, "c", 20);
    db.flush(true).unwrap();
    fill(&db, None, &mut model, "d", 5);
    db.close().unwrap();
    Fixture { name: "levels", files: files_of(&fs, DB), models: BTreeMap::from([("default".into(), model)]) }
}

/// A MANIFEST that rolled over several times (a small size limit).
fn rollover() -> Fixture {
    let fs = MemFs::new();
    let mut o = options(&fs);
    o.max_manifest_file_size = 150;
    let db = Db::open(DB, o).unwrap();
    let mut model = Model::new();
    for round in 0..6 {
        fill(&db, None, &mut model, &format!("r{round}-"), 12);
        db.flush(true).unwrap();
    }
    fill(&db, None, &mut model, "z", 5);
    db.close().unwrap();
    Fixture { name: "rollover", files: files_of(&fs, DB), models: BTreeMap::from([("default".into(), model)]) }
}

/// Column families: `one` from an earlier session, `two` created after the
/// last rollover (its creation is an appended edit), `gone` created and
/// dropped; the last edit is a flush that makes no file obsolete.
fn families() -> Fixture {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).unwrap();
    let one = db.create_column_family("one", options(&fs)).unwrap();
    let mut models: BTreeMap<String, Model> = BTreeMap::new();
    fill(&db, Some(&one), models.entry("one".into()).or_default(), "o", 20);
    db.flush_cf(&one, true).unwrap();
    db.close().unwrap();
    drop(one);
    let db = Db::open_cf(DB, options(&fs), &[("one", options(&fs))]).unwrap();
    let one = db.cf_handle("one").unwrap();
    let two = db.create_column_family("two", options(&fs)).unwrap();
    let gone = db.create_column_family("gone", options(&fs)).unwrap();
    db.put_cf_opt(&gone, b"g", b"g", &SYNCED).unwrap();
    db.drop_column_family(&gone).unwrap();
    fill(&db, Some(&two), models.entry("two".into()).or_default(), "t", 20);
    db.flush_cf(&two, true).unwrap();
    fill(&db, None, models.entry("default".into()).or_default(), "d", 15);
    db.flush(true).unwrap();
    fill(&db, Some(&two), models.get_mut("two").unwrap(), "u", 5);
    // The last edit flushes `one` while `two` keeps the WAL alive: nothing
    // is deleted on the strength of it, so a torn copy of it may be ignored.
    fill(&db, Some(&one), models.get_mut("one").unwrap(), "p", 5);
    db.flush_cf(&one, true).unwrap();
    db.close().unwrap();
    Fixture { name: "families", files: files_of(&fs, DB), models }
}

fn with_file(files: &Files, name: &str, bytes: Vec<u8>) -> Files {
    files.iter().map(|(n, b)| if n == name { (n.clone(), bytes.clone()) } else { (n.clone(), b.clone()) }).collect()
}

fn manifest_of(files: &Files) -> String {
    let v: Vec<&String> = files.iter().map(|(n, _)| n).filter(|n| n.starts_with("MANIFEST-")).collect();
    assert_eq!(v.len(), 1, "{v:?}");
    v[0].clone()
}

/// Opens the planted copy as an application would: the families the
/// MANIFEST lists, each with the same options.
fn open_listing(fs: &MemFs) -> ebb::Result<Db> {
    let mut o = options(fs);
    o.create_if_missing = false;
    let names = Db::list_column_families(DB, &o)?;
    let listed: Vec<(&str, Options)> = names.iter().map(|n| (n.as_str(), options(fs))).collect();
    Db::open_cf(DB, o, &listed)
}

/// Checks every table of `files` is still in the directory or in `lost/`,
/// byte for byte.
fn check_no_table_deleted(fs: &MemFs, files: &Files, ctx: &str) {
    for (name, bytes) in files.iter().filter(|(n, _)| n.ends_with(".sst")) {
        let here = fs.file_bytes(&Path::new(DB).join(name));
        let lost = fs.exists(&Path::new(DB).join(LOST_DIR)).then(|| {
            let dir = Path::new(DB).join(LOST_DIR);
            fs.list_dir(&dir)
                .unwrap()
                .into_iter()
                .filter(|n| n == name || n.starts_with(&format!("{name}.")))
                .filter_map(|n| fs.file_bytes(&dir.join(n)))
                .any(|b| b == *bytes)
        });
        assert!(
            here.as_ref() == Some(bytes) || lost == Some(true),
            "{ctx}: table {name} was deleted or changed by a damaged open"
        );
    }
}

/// The outcome of one damaged copy.
#[derive(Default, Debug)]
struct Tally {
    refused: usize,
    opened: usize,
    repaired: usize,
}

/// Opens one damaged copy and checks the promise; a refused copy is then
/// repaired, and the repaired database must hold every synced write.
fn check_copy(f: &Fixture, damaged: &Files, named: &str, ctx: &str, repair: bool, tally: &mut Tally) {
    let fs = fs_holding(DB, damaged);
    let refused = match open_listing(&fs) {
        Ok(db) => {
            let got = family_contents(&db);
            // A family that holds nothing may be missing: its creation was
            // the torn last record, never acknowledged.
            let got_nonempty: BTreeMap<&String, &Model> = got.iter().filter(|(_, m)| !m.is_empty()).collect();
            let want: BTreeMap<&String, &Model> = f.models.iter().filter(|(_, m)| !m.is_empty()).collect();
            assert!(got_nonempty == want, "{ctx}: opened, but not with every synced write (and nothing else)");
            db.close().unwrap_or_else(|e| panic!("{ctx}: close: {e}"));
            let again = open_listing(&fs).unwrap_or_else(|e| panic!("{ctx}: second open: {e}"));
            assert!(family_contents(&again) == got, "{ctx}: the second open differs");
            tally.opened += 1;
            false
        }
        Err(e) => {
            assert!(e.is_corruption(), "{ctx}: expected a corruption error, got {e:?}");
            assert!(e.to_string().contains(named), "{ctx}: the error must name {named}: {e}");
            tally.refused += 1;
            true
        }
    };
    check_no_table_deleted(&fs, damaged, ctx);
    if repair && refused {
        let fs = fs_holding(DB, damaged);
        let report = Db::repair(DB, &options(&fs)).unwrap_or_else(|e| panic!("{ctx}: repair: {e}"));
        let db = open_listing(&fs).unwrap_or_else(|e| panic!("{ctx}: open after repair: {e}\n{report}"));
        let got = family_contents(&db);
        for (family, model) in &f.models {
            let have = got.get(family).unwrap_or_else(|| panic!("{ctx}: repair lost family {family}\n{report}"));
            assert!(have == model, "{ctx}: after repair, family {family} lacks synced writes\n{report}");
        }
        db.close().unwrap();
        tally.repaired += 1;
    }
}

/// Every byte of the MANIFEST flipped (one bit, varying with the offset) and
/// every truncation; repair is run on every `repair_every`-th refused copy.
fn damage_manifest(f: &Fixture, repair_every: usize) -> Tally {
    let manifest = manifest_of(&f.files);
    let clean = f.files.iter().find(|(n, _)| *n == manifest).map(|(_, b)| b.clone()).unwrap();
    let mut tally = Tally::default();
    check_copy(f, &f.files, &manifest, &format!("{}: undamaged", f.name), false, &mut tally);
    assert_eq!(tally.opened, 1, "{}: the undamaged copy must open", f.name);
    // A flipped byte leaves a record all there, failing its check: refused,
    // last record included. Only a flip in the last record's length field
    // can make it run past the end of the file, which reads as a torn append.
    let (last, _) = *log_records(&clean).last().unwrap();
    for at in 0..clean.len() {
        let mut bytes = clean.clone();
        bytes[at] ^= 1 << (at % 8);
        let ctx = format!("{}: {manifest} byte {at} ^ {:#04x}", f.name, 1 << (at % 8));
        let opened = tally.opened;
        check_copy(f, &with_file(&f.files, &manifest, bytes), &manifest, &ctx, at % repair_every == 0, &mut tally);
        let in_last_length = at == last + 4 || at == last + 5;
        assert!(tally.opened == opened || in_last_length, "{ctx}: a record that fails its checksum was accepted");
    }
    for len in 0..clean.len() {
        let ctx = format!("{}: {manifest} cut to {len} of {} bytes", f.name, clean.len());
        let damaged = with_file(&f.files, &manifest, clean[..len].to_vec());
        check_copy(f, &damaged, &manifest, &ctx, len % repair_every == 0, &mut tally);
    }
    eprintln!("{}: {} bytes of {manifest}: {tally:?}", f.name, clean.len());
    tally
}

/// Every byte of CURRENT flipped in every bit, and every truncation.
fn damage_current(f: &Fixture) {
    let clean = f.files.iter().find(|(n, _)| n == "CURRENT").map(|(_, b)| b.clone()).unwrap();
    let mut tally = Tally::default();
    for at in 0..clean.len() {
        for bit in 0..8 {
            let mut bytes = clean.clone();
            bytes[at] ^= 1 << bit;
            let ctx = format!("{}: CURRENT byte {at} bit {bit}", f.name);
            check_copy(f, &with_file(&f.files, "CURRENT", bytes), "CURRENT", &ctx, false, &mut tally);
        }
    }
    for len in 0..clean.len() {
        let ctx = format!("{}: CURRENT cut to {len}", f.name);
        check_copy(f, &with_file(&f.files, "CURRENT", clean[..len].to_vec()), "CURRENT", &ctx, false, &mut tally);
    }
    assert_eq!(tally.opened, 0, "{}: a damaged CURRENT never opens: {tally:?}", f.name);
}

#[test]
fn one_table_manifest_and_current_damage() {
    let f = one_table();
    let t = damage_manifest(&f, 1);
    assert!(t.refused > 0 && t.repaired == t.refused, "{t:?}");
    damage_current(&f);
}

#[test]
fn levels_manifest_and_current_damage() {
    let f = levels();
    let t = damage_manifest(&f, 7);
    assert!(t.refused > 0 && t.repaired > 0, "{t:?}");
    damage_current(&f);
}

#[test]
fn rollover_manifest_and_current_damage() {
    let f = rollover();
    let t = damage_manifest(&f, 7);
    assert!(t.refused > 0 && t.repaired > 0, "{t:?}");
    damage_current(&f);
}

#[test]
fn families_manifest_and_current_damage() {
    let f = families();
    let t = damage_manifest(&f, 5);
    assert!(t.refused > 0 && t.repaired > 0, "{t:?}");
    damage_current(&f);
}
