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

/// The value printed after `label: ` in `out`.
fn field(out: &str, label: &str) -> String {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("{label}: ")))
        .unwrap_or_else(|| panic!("no '{label}' in:\n{out}"))
        .to_string()
}

#[test]
fn checkpoint_copies_every_family_and_refuses_an_existing_target() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, to) = (tmp.path().join("db"), tmp.path().join("copy"));
    let mut o = Options::default();
    o.create_if_missing = true;
    let db = Db::open(&dir, o.clone()).unwrap();
    let cf = db.create_column_family("users", &o).unwrap();
    for i in 0..50u32 {
        db.put(format!("key{i:03}").as_bytes(), b"value").unwrap();
        db.put_cf(&cf, format!("user{i:03}").as_bytes(), b"u").unwrap();
    }
    db.flush(true).unwrap();
    db.put(b"unflushed", b"in the WAL").unwrap();
    drop(cf);
    db.close().unwrap();

    let run = ebb(&["checkpoint", "--db", dir.to_str().unwrap(), "--to", to.to_str().unwrap()]);
    let out = text(&run);
    assert_eq!(run.status.code(), Some(0), "{out}");
    assert!(field(&out, "tables and blob files linked").parse::<usize>().unwrap() >= 2, "{out}");
    assert_eq!(field(&out, "tables and blob files copied"), "0", "{out}");
    // The open wrote what the WAL held into a table: nothing was left to flush.
    assert_eq!(field(&out, "memtables flushed first"), "no", "{out}");
    assert_eq!(field(&out, "tables and blob files linked"), "3", "{out}");

    let copy = Db::open_cf(&to, o.clone(), &[("users", o.clone())]).unwrap();
    let users = copy.cf_handle("users").unwrap();
    assert_eq!(copy.get(b"unflushed").unwrap(), Some(b"in the WAL".to_vec()));
    assert_eq!(copy.get(b"key049").unwrap(), Some(b"value".to_vec()));
    assert_eq!(copy.get_cf(&users, b"user007").unwrap(), Some(b"u".to_vec()));
    drop(users);
    drop(copy);

    let again = ebb(&["checkpoint", "--db", dir.to_str().unwrap(), "--to", to.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(text(&again).contains("already exists"), "{}", text(&again));
    // A database open in another process is refused as busy, not copied.
    let live = Db::open(tmp.path().join("live"), o).unwrap();
    let other = tmp.path().join("other");
    let busy = ebb(&["checkpoint", "--db", live.path().to_str().unwrap(), "--to", other.to_str().unwrap()]);
    assert_eq!(busy.status.code(), Some(1), "{}", text(&busy));
    assert!(!other.exists());
}

#[test]
fn backup_and_restore_round_trip_from_the_shell() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, backups, restored) = (tmp.path().join("db"), tmp.path().join("backups"), tmp.path().join("restored"));
    let mut o = Options::default();
    o.create_if_missing = true;
    let db = Db::open(&dir, o.clone()).unwrap();
    for i in 0..100u32 {
        db.put(format!("key{i:03}").as_bytes(), b"first").unwrap();
    }
    db.close().unwrap();
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a = vec!["backup".to_string(), "--db".into(), dir.display().to_string()];
        a.extend(["--backup_dir".to_string(), backups.display().to_string()]);
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let run = |a: Vec<String>| ebb(&a.iter().map(String::as_str).collect::<Vec<_>>());
    let first = run(args(&[]));
    assert_eq!(first.status.code(), Some(0), "{}", text(&first));
    assert!(text(&first).contains("backup 1 of"), "{}", text(&first));
    let db = Db::open(&dir, o.clone()).unwrap();
    db.put(b"key000", b"second").unwrap();
    db.close().unwrap();
    let second = run(args(&["--no_flush"]));
    let out = text(&second);
    assert_eq!(second.status.code(), Some(0), "{out}");
    let listed: Vec<&str> = out.lines().filter(|l| l.starts_with("backup ") && l.contains("files")).collect();
    assert_eq!(listed.len(), 2, "{out}");

    let r = ebb(&[
        "restore",
        "--backup_dir",
        backups.to_str().unwrap(),
        "--db",
        restored.to_str().unwrap(),
        "--backup_id",
        "1",
    ]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    assert!(text(&r).contains("backup 1 restored"), "{}", text(&r));
    assert_eq!(Db::open(&restored, o.clone()).unwrap().get(b"key000").unwrap(), Some(b"first".to_vec()));
    // The newest, over the first: only with --overwrite.
    let refused = ebb(&["restore", "--backup_dir", backups.to_str().unwrap(), "--db", restored.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1), "{}", text(&refused));
    assert!(text(&refused).contains("overwrite"), "{}", text(&refused));
    let r =
        ebb(&["restore", "--backup_dir", backups.to_str().unwrap(), "--db", restored.to_str().unwrap(), "--overwrite"]);
    assert_eq!(r.status.code(), Some(0), "{}", text(&r));
    assert_eq!(Db::open(&restored, o).unwrap().get(b"key000").unwrap(), Some(b"second".to_vec()));
}

#[test]
fn load_ingests_lines_and_later_lines_win() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, input, hexfile) = (tmp.path().join("db"), tmp.path().join("data.csv"), tmp.path().join("data.hex"));
    std::fs::write(&input, "b,2\na,1\nc,3\na,one again\n").unwrap();
    let run = ebb(&["load", "--db", dir.to_str().unwrap(), "--file", input.to_str().unwrap()]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    assert!(text(&run).contains("loaded 3 entries"), "{}", text(&run));
    std::fs::write(&hexfile, "0x62:ff00\n").unwrap();
    let run =
        ebb(&["load", "--db", dir.to_str().unwrap(), "--file", hexfile.to_str().unwrap(), "--delimiter", ":", "--hex"]);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run));
    let db = Db::open(&dir, Options::default()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"one again".to_vec()));
    assert_eq!(db.get(b"b").unwrap(), Some(vec![0xff, 0]));
    assert_eq!(db.get(b"c").unwrap(), Some(b"3".to_vec()));
    drop(db);
    std::fs::write(&input, "no delimiter here\n").unwrap();
    let bad = ebb(&["load", "--db", dir.to_str().unwrap(), "--file", input.to_str().unwrap()]);
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad));
    assert!(text(&bad).contains("line 1"), "{}", text(&bad));
    assert!(!dir.with_extension("load.sst").exists());
}
