//! The `ebb` command as a shell user runs it.

use std::path::Path;
use std::process::{Command, Output};

use ebb::{Db, Options, WriteOptions};

fn ebb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ebb")).args(args).output().expect("run ebb")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A database with one flushed table and a few writes in its WAL, whose
/// MANIFEST is then cut by a few bytes after its last edit acted (the WAL
/// the state before it needs is deleted).
fn damaged_database(dir: &Path) {
    let mut o = Options::default();
    o.create_if_missing = true;
    let db = Db::open(dir, o).unwrap();
    for i in 0..100u32 {
        db.put_opt(format!("key{i:03}").as_bytes(), b"value", &WriteOptions { sync: true, disable_wal: false })
            .unwrap();
    }
    db.flush(true).unwrap();
    db.close().unwrap();
    let manifest = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().starts_with("MANIFEST-"))
        .unwrap();
    let len = std::fs::metadata(&manifest).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&manifest).unwrap().set_len(len - 3).unwrap();
}

#[test]
fn check_names_the_damage_and_repair_brings_every_write_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    damaged_database(&dir);
    let db = dir.to_str().unwrap();

    let check = ebb(&["check", "--db", db]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check));
    assert!(text(&check).contains("MANIFEST-") && text(&check).contains("corruption"), "{}", text(&check));

    let repair = ebb(&["repair", "--db", db]);
    assert_eq!(repair.status.code(), Some(0), "{}", text(&repair));
    assert!(text(&repair).contains("repaired: MANIFEST-"), "{}", text(&repair));
    assert!(text(&repair).contains("set aside"), "{}", text(&repair));

    let check = ebb(&["check", "--db", db]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check));
    let db = Db::open(&dir, Options::default()).unwrap();
    for i in 0..100u32 {
        assert_eq!(db.get(format!("key{i:03}").as_bytes()).unwrap(), Some(b"value".to_vec()), "key{i:03}");
    }
}

#[test]
fn bad_command_lines_and_non_databases_are_refused_clearly() {
    assert_eq!(ebb(&[]).status.code(), Some(2));
    assert_eq!(ebb(&["repair"]).status.code(), Some(2), "--db is required");
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("plain.txt");
    std::fs::write(&file, b"not a database").unwrap();
    let out = ebb(&["check", "--db", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("regular file"), "{}", text(&out));
    let out = ebb(&["repair", "--db", tmp.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("nothing to repair"), "{}", text(&out));
    assert!(!tmp.path().join("LOCK").exists(), "a refused command must leave no LOCK file");
}

/// A database in the reverse bytewise order: `check` and `repair` without
/// `--comparator` refuse it naming both orders and change nothing; with it
/// they work.
#[test]
fn the_comparator_is_named_on_the_command_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut o = Options::default();
    o.create_if_missing = true;
    o.comparator = Some(ebb::comparator::reverse_bytewise());
    let db = Db::open(&dir, o.clone()).unwrap();
    db.put(b"a", b"1").unwrap();
    db.put(b"b", b"2").unwrap();
    db.flush(true).unwrap();
    db.close().unwrap();
    let path = dir.to_str().unwrap();
    let reverse = ebb::comparator::REVERSE_BYTEWISE_NAME;
    for command in ["check", "repair"] {
        let out = ebb(&[command, "--db", path]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains(reverse) && text(&out).contains(ebb::comparator::BYTEWISE_NAME), "{}", text(&out));
    }
    let out = ebb(&["repair", "--db", path, "--comparator", reverse]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = ebb(&["check", "--db", path, "--comparator", reverse]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = ebb(&["check", "--db", path, "--comparator", "my.Order"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("my.Order"), "{}", text(&out));
    let db = Db::open(&dir, o).unwrap();
    let keys: Vec<Vec<u8>> =
        db.iterator(ebb::ReadOptions::default(), ebb::IteratorMode::Start).map(|e| e.unwrap().0).collect();
    assert_eq!(keys, [b"b".to_vec(), b"a".to_vec()]);
}
