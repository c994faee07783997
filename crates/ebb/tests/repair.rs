//! `Db::repair` (LevelDB's and RocksDB's RepairDB): what it keeps, what it
//! sets aside, and that it never deletes (docs/reliability.md, "Repair").
//! The MANIFEST- and CURRENT-damage cases it repairs are in
//! `manifest_damage.rs`.

mod common;

use std::path::Path;

use common::{family_contents, files_of, fs_holding, manual_options, Model, SYNCED};
use ebb::fs::{FileSystem, MemFs};
use ebb::{Db, Error, LOST_DIR};

const DB: &str = "/db";

/// Three flushed tables of 20 keys each (`t0-`, `t1-`, `t2-`), then 10 keys
/// left in the WAL (`w-`), in the default family and in family `users`.
fn fixture() -> (MemFs, Model, Model) {
    let fs = MemFs::new();
    let db = Db::open(DB, manual_options(&fs)).unwrap();
    let users = db.create_column_family("users", manual_options(&fs)).unwrap();
    let (mut default, mut in_users) = (Model::new(), Model::new());
    for t in 0..3 {
        for i in 0..20 {
            let (k, v) = (format!("t{t}-{i:03}").into_bytes(), format!("v{t}.{i}").into_bytes());
            db.put_opt(&k, &v, &SYNCED).unwrap();
            default.insert(k.clone(), v.clone());
            db.put_cf_opt(&users, &k, b"u", &SYNCED).unwrap();
            in_users.insert(k, b"u".to_vec());
        }
        db.flush(true).unwrap();
        db.flush_cf(&users, true).unwrap();
    }
    for i in 0..10 {
        let (k, v) = (format!("w-{i:03}").into_bytes(), b"in the WAL".to_vec());
        db.put_opt(&k, &v, &SYNCED).unwrap();
        default.insert(k, v);
    }
    db.close().unwrap();
    (fs, default, in_users)
}

fn open_users(fs: &MemFs) -> ebb::Result<Db> {
    Db::open_cf(DB, manual_options(fs), &[("users", manual_options(fs))])
}

fn tables(fs: &MemFs) -> Vec<String> {
    files_of(fs, DB).into_iter().map(|(n, _)| n).filter(|n| n.ends_with(".sst")).collect()
}

#[test]
fn repair_without_any_manifest_keeps_every_table_and_the_wal_with_family_names() {
    let (fs, default, users) = fixture();
    let before = tables(&fs);
    // Every MANIFEST and CURRENT gone: family names come from the tables' properties.
    for (name, _) in files_of(&fs, DB) {
        if name.starts_with("MANIFEST-") || name == "CURRENT" {
            fs.remove_file(&Path::new(DB).join(name)).unwrap();
        }
    }
    let report = Db::repair(DB, &manual_options(&fs)).unwrap();
    assert_eq!(report.column_families.values().cloned().collect::<Vec<_>>(), ["default", "users"], "{report}");
    assert_eq!(report.wals.len(), 1, "{report}");
    assert_eq!(report.wals[0].records, 10, "{report}");
    assert!(report.tables.iter().filter(|t| t.from_wal.is_none()).count() == before.len(), "{report}");
    let db = open_users(&fs).unwrap();
    assert_eq!(family_contents(&db)["default"], default);
    assert_eq!(family_contents(&db)["users"], users);
    // New writes get sequence numbers above every repaired one, so they win.
    db.put(b"t0-000", b"newer").unwrap();
    assert_eq!(db.get(b"t0-000").unwrap(), Some(b"newer".to_vec()));
    db.close().unwrap();
    let db = open_users(&fs).unwrap();
    assert_eq!(db.get(b"t0-000").unwrap(), Some(b"newer".to_vec()));
}

#[test]
fn an_unreadable_table_is_set_aside_and_the_rest_is_kept() {
    let (fs, default, _) = fixture();
    // Damage the first data block of the oldest table: the default family's `t0-` keys.
    let victim = tables(&fs)[0].clone();
    let path = Path::new(DB).join(&victim);
    let mut bytes = fs.file_bytes(&path).unwrap();
    bytes[40] ^= 0xff;
    fs.set_file_bytes(&path, &bytes).unwrap();
    let report = Db::repair(DB, &manual_options(&fs)).unwrap();
    let lost = Path::new(DB).join(LOST_DIR).join(&victim);
    assert_eq!(fs.file_bytes(&lost).as_deref(), Some(&bytes[..]), "the damaged table must be kept in lost/: {report}");
    assert!(report.set_aside.iter().any(|s| s.to == lost && s.why.contains("cannot be read")), "{report}");
    assert!(report.tables.iter().all(|t| format!("{:06}.sst", t.number) != victim), "{report}");
    // What the damaged table held is gone, unless a newer table holds it;
    // everything else is there, and nothing is invented.
    let db = open_users(&fs).unwrap();
    let contents = family_contents(&db);
    let got = &contents["default"];
    for (k, v) in got {
        assert_eq!(default.get(k), Some(v), "a value nobody wrote: {}", String::from_utf8_lossy(k));
    }
    for prefix in ["t1-", "t2-", "w-"] {
        let want: Vec<_> = default.keys().filter(|k| k.starts_with(prefix.as_bytes())).collect();
        assert!(want.iter().all(|k| got.contains_key(*k)), "keys {prefix}* are missing after repair");
    }
}

#[test]
fn repair_refuses_an_open_database_and_a_directory_that_holds_no_database() {
    let (fs, _, _) = fixture();
    let db = open_users(&fs).unwrap();
    let e = Db::repair(DB, &manual_options(&fs)).unwrap_err();
    assert!(matches!(e, Error::Busy(_)), "{e:?}");
    db.close().unwrap();

    let fs = fs_holding("/notes", &[("todo.txt".into(), b"nothing to see".to_vec())]);
    let mut o = manual_options(&fs);
    o.create_if_missing = false;
    let e = Db::repair("/notes", &o).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("nothing to repair"), "{e:?}");
    assert!(!fs.exists(Path::new("/notes/LOCK")), "repair of a non-database left a LOCK file");
    let e = Db::repair("/missing", &o).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
}

#[test]
fn repairing_twice_changes_nothing_the_second_time() {
    let (fs, default, users) = fixture();
    Db::repair(DB, &manual_options(&fs)).unwrap();
    let first = tables(&fs);
    let report = Db::repair(DB, &manual_options(&fs)).unwrap();
    assert_eq!(tables(&fs), first, "{report}");
    let db = open_users(&fs).unwrap();
    assert_eq!(family_contents(&db)["default"], default);
    assert_eq!(family_contents(&db)["users"], users);
}
