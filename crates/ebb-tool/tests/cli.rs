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
    assert!(text(&refused).contains("pass --overwrite"), "{}", text(&refused));
    assert!(!text(&refused).contains("RestoreOptions"), "the shell's advice names a flag: {}", text(&refused));
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

// The ldb and sst_dump verbs (docs/ebb-tool.md).

/// Standard output alone, for parsing.
fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs `ebb` with `args`, expecting exit status `code`; returns its output.
fn expect(code: i32, args: &[&str]) -> Output {
    let out = ebb(args);
    assert_eq!(out.status.code(), Some(code), "ebb {}:\n{}", args.join(" "), text(&out));
    out
}

/// A new database at `dir` (created, then closed).
fn create(dir: &Path) -> Options {
    let mut o = Options::default();
    o.create_if_missing = true;
    Db::open(dir, o.clone()).unwrap().close().unwrap();
    o
}

/// The files in `dir` whose names end with `suffix`, sorted.
fn files_ending(dir: &Path, suffix: &str) -> Vec<std::path::PathBuf> {
    let mut found: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().ends_with(suffix))
        .collect();
    found.sort();
    found
}

/// `KEY ==> VALUE` lines split in two.
fn pairs(out: &str) -> Vec<(String, String)> {
    out.lines()
        .map(|l| {
            let (k, v) = l.split_once(" ==> ").unwrap_or_else(|| panic!("not a KEY ==> VALUE line: {l:?}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn owned(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn put_get_delete_and_scan_round_trip_in_text_and_hex() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    create(&dir);
    let db = dir.to_str().unwrap();

    assert_eq!(stdout(&expect(0, &["put", "--db", db, "apple", "red"])), "OK\n");
    expect(0, &["put", "--db", db, "banana", "yellow fruit"]);
    assert_eq!(stdout(&expect(0, &["get", "--db", db, "apple"])), "red\n");
    // Keys and values both in hex, `0x` optional; printed as `0x` and uppercase.
    expect(0, &["put", "--db", db, "--hex", "0x00ff", "CAFE"]);
    assert_eq!(stdout(&expect(0, &["get", "--db", db, "--hex", "00FF"])), "0xCAFE\n");
    // One side in hex; text output escapes what is not printable.
    expect(0, &["put", "--db", db, "--value_hex", "cherry", "0x0161"]);
    assert_eq!(stdout(&expect(0, &["get", "--db", db, "cherry"])), "\\x01a\n");
    assert_eq!(stdout(&expect(0, &["get", "--db", db, "--key_hex", "0x636865727279"])), "\\x01a\n");
    assert_eq!(stdout(&expect(0, &["get", "--db", db, "--value_hex", "cherry"])), "0x0161\n");

    let all = stdout(&expect(0, &["scan", "--db", db]));
    assert_eq!(
        pairs(&all),
        owned(&[("\\x00\\xFF", "\\xCA\\xFE"), ("apple", "red"), ("banana", "yellow fruit"), ("cherry", "\\x01a")])
    );
    let hex = stdout(&expect(0, &["scan", "--db", db, "--hex"]));
    assert_eq!(pairs(&hex)[0], ("0x00FF".to_string(), "0xCAFE".to_string()), "{hex}");
    assert_eq!(pairs(&hex)[1], ("0x6170706C65".to_string(), "0x726564".to_string()), "{hex}");

    assert_eq!(stdout(&expect(0, &["delete", "--db", db, "apple"])), "OK\n");
    let missing = expect(1, &["get", "--db", db, "apple"]);
    assert!(String::from_utf8_lossy(&missing.stderr).contains("key apple not found"), "{}", text(&missing));
    assert!(missing.stdout.is_empty());
    expect(0, &["delete", "--db", db, "--hex", "0x00FF"]);
    let left = stdout(&expect(0, &["scan", "--db", db]));
    assert_eq!(pairs(&left), owned(&[("banana", "yellow fruit"), ("cherry", "\\x01a")]));

    // What the tool wrote is what the engine reads.
    let d = Db::open(&dir, Options::default()).unwrap();
    assert_eq!(d.get(b"cherry").unwrap(), Some(vec![1, b'a']));
    assert_eq!(d.get(b"apple").unwrap(), None);
}

#[test]
fn scan_honours_from_to_and_limit() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = create(&dir);
    let d = Db::open(&dir, o).unwrap();
    for i in 0..20u32 {
        d.put(format!("key{i:03}").as_bytes(), format!("v{i}").as_bytes()).unwrap();
        if i == 9 {
            d.flush(true).unwrap();
        }
    }
    d.close().unwrap();
    let db = dir.to_str().unwrap();
    let keys = |args: &[&str]| -> Vec<String> {
        let mut a = vec!["scan", "--db", db];
        a.extend_from_slice(args);
        pairs(&stdout(&expect(0, &a))).into_iter().map(|(k, _)| k).collect()
    };
    let range = |a: u32, b: u32| -> Vec<String> { (a..b).map(|i| format!("key{i:03}")).collect() };
    assert_eq!(keys(&[]), range(0, 20));
    // --from inclusive, --to exclusive, across the flushed table and the WAL.
    assert_eq!(keys(&["--from", "key005", "--to", "key012"]), range(5, 12));
    assert_eq!(keys(&["--from", "key0055"]), range(6, 20));
    assert_eq!(keys(&["--to", "key003"]), range(0, 3));
    assert_eq!(keys(&["--limit", "3"]), range(0, 3));
    assert_eq!(keys(&["--from", "key018", "--limit", "5"]), range(18, 20));
    let hex = |k: &str| -> String { k.bytes().fold("0x".to_string(), |s, b| format!("{s}{b:02X}")) };
    assert_eq!(keys(&["--key_hex", "--from", "6B6579303130", "--limit", "2"]), [hex("key010"), hex("key011")]);
    assert!(keys(&["--from", "key010", "--to", "key010"]).is_empty());
    let values = pairs(&stdout(&expect(0, &["scan", "--db", db, "--from", "key007", "--limit", "1"])));
    assert_eq!(values, owned(&[("key007", "v7")]));
}

/// One `KEY @ SEQ : TYPE ==> VALUE` line of `dump`.
fn version(line: &str) -> (String, u64, String, String) {
    let (k, rest) = line.split_once(" @ ").unwrap_or_else(|| panic!("{line:?}"));
    let (seq, rest) = rest.split_once(" : ").unwrap_or_else(|| panic!("{line:?}"));
    let (kind, value) = rest.split_once(" ==> ").unwrap_or_else(|| panic!("{line:?}"));
    (k.to_string(), seq.parse().unwrap(), kind.to_string(), value.to_string())
}

#[test]
fn dump_shows_every_version_newest_first_and_deletions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = create(&dir);
    let d = Db::open(&dir, o).unwrap();
    d.put(b"a", b"first").unwrap();
    d.put(b"b", b"doomed").unwrap();
    d.flush(true).unwrap();
    d.put(b"a", b"second").unwrap();
    d.delete(b"b").unwrap();
    d.close().unwrap();
    let db = dir.to_str().unwrap();

    let out = stdout(&expect(0, &["dump", "--db", db]));
    let versions: Vec<_> = out.lines().map(version).collect();
    let shape: Vec<(&str, &str, &str)> =
        versions.iter().map(|(k, _, t, v)| (k.as_str(), t.as_str(), v.as_str())).collect();
    assert_eq!(shape, [("a", "put", "second"), ("a", "put", "first"), ("b", "delete", ""), ("b", "put", "doomed")]);
    assert!(versions[0].1 > versions[1].1, "newest first: {out}");
    assert!(versions[2].1 > versions[3].1, "newest first: {out}");
    // The read path sees only the newest of each.
    assert_eq!(pairs(&stdout(&expect(0, &["scan", "--db", db]))), owned(&[("a", "second")]));
    let limited = stdout(&expect(0, &["dump", "--db", db, "--limit", "2", "--hex"]));
    let first: Vec<_> = limited.lines().map(version).collect();
    assert_eq!(first.len(), 2, "{limited}");
    assert_eq!((first[0].0.as_str(), first[0].3.as_str()), ("0x61", "0x7365636F6E64"));
}

#[test]
fn entities_print_as_their_columns_in_dumps_and_as_their_default_column_in_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = create(&dir);
    let d = Db::open(&dir, o).unwrap();
    d.put_entity(b"e", &[(b"n", b"2"), (b"", b"dflt")]).unwrap();
    d.flush(true).unwrap();
    d.put_entity(b"e", &[(b"m", b"1")]).unwrap();
    d.close().unwrap();
    let db = dir.to_str().unwrap();

    let out = stdout(&expect(0, &["dump", "--db", db]));
    let shape: Vec<(String, String)> = out.lines().map(version).map(|(_, _, t, v)| (t, v)).collect();
    let want = [("wide_column_entity", "m:1"), ("wide_column_entity", ":dflt n:2")];
    assert_eq!(shape, want.map(|(t, v)| (t.to_string(), v.to_string())), "{out}");
    assert_eq!(stdout(&expect(0, &["get", "--db", db, "e"])), "\n");
    let wal = files_ending(&dir, ".log").pop().expect("the entity is in a WAL");
    let walout = stdout(&expect(0, &["dump_wal", "--walfile", wal.to_str().unwrap(), "--print_values"]));
    assert!(walout.contains(" : wide_column_entity ==> m:1"), "{walout}");
    let sst = files_ending(&dir, ".sst").pop().expect("the first entity is in a table");
    let sstout = stdout(&expect(0, &["sst_dump", "--file", sst.to_str().unwrap()]));
    assert!(sstout.contains(" : wide_column_entity ==> :dflt n:2"), "{sstout}");
}

#[test]
fn reading_verbs_work_beside_a_live_database_and_writing_verbs_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = create(&dir);
    let live = Db::open(&dir, o).unwrap();
    live.put(b"flushed", b"in a table").unwrap();
    live.flush(true).unwrap();
    live.put(b"unflushed", b"in the WAL").unwrap();
    let db = dir.to_str().unwrap();

    assert_eq!(stdout(&expect(0, &["get", "--db", db, "flushed"])), "in a table\n");
    assert_eq!(stdout(&expect(0, &["get", "--db", db, "unflushed"])), "in the WAL\n");
    let all = stdout(&expect(0, &["scan", "--db", db]));
    assert_eq!(pairs(&all), owned(&[("flushed", "in a table"), ("unflushed", "in the WAL")]));
    assert_eq!(stdout(&expect(0, &["dump", "--db", db])).lines().count(), 2);
    assert_eq!(stdout(&expect(0, &["checkconsistency", "--db", db])), "OK: 1 tables verified\n");

    for args in
        [&["put", "--db", db, "k", "v"][..], &["delete", "--db", db, "flushed"][..], &["compact", "--db", db][..]]
    {
        let refused = expect(1, args);
        assert!(text(&refused).contains("busy"), "{}", text(&refused));
        assert!(refused.stdout.is_empty(), "{}", text(&refused));
    }
    // Nothing the tool did disturbed the live handle.
    assert_eq!(live.get(b"flushed").unwrap(), Some(b"in a table".to_vec()));
    assert_eq!(live.get(b"k").unwrap(), None);
    live.put(b"later", b"still writable").unwrap();
    live.close().unwrap();
}

#[test]
fn list_column_families_and_get_property() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = create(&dir);
    let d = Db::open(&dir, o.clone()).unwrap();
    let users = d.create_column_family("users", &o).unwrap();
    d.put(b"k", b"v").unwrap();
    d.flush(true).unwrap();
    d.put(b"k2", b"v").unwrap();
    d.flush(true).unwrap();
    d.put_cf(&users, b"u", b"1").unwrap();
    d.flush_cf(&users, true).unwrap();
    d.put_cf(&users, b"w", b"in the WAL").unwrap();
    drop(users);
    d.close().unwrap();
    let db = dir.to_str().unwrap();

    assert_eq!(stdout(&expect(0, &["list_column_families", "--db", db])), "default\nusers\n");
    let prop = |args: &[&str]| -> String {
        let mut a = vec!["get_property", "--db", db];
        a.extend_from_slice(args);
        stdout(&expect(0, &a)).trim_end().to_string()
    };
    assert_eq!(prop(&["ebb.num-files-at-level0"]), "2");
    assert_eq!(prop(&["ebb.num-files-at-level0", "--cf", "users"]), "1");
    assert_eq!(prop(&["rocksdb.num-files-at-level0"]), "2", "RocksDB's prefix is accepted");
    assert_eq!(prop(&["ebb.num-column-families"]), "2");
    assert!(prop(&["ebb.stats"]).contains("Level"), "{}", prop(&["ebb.stats"]));
    assert_eq!(stdout(&expect(0, &["get", "--db", db, "--cf", "users", "u"])), "1\n");
    assert_eq!(stdout(&expect(0, &["get", "--db", db, "--cf", "users", "w"])), "in the WAL\n");
    assert_eq!(stdout(&expect(1, &["get", "--db", db, "w"])).len(), 0, "not in the default family");

    let unknown = expect(1, &["get_property", "--db", db, "ebb.no-such-thing"]);
    assert!(text(&unknown).contains("ebb.no-such-thing"), "{}", text(&unknown));
    let no_family = expect(1, &["get_property", "--db", db, "ebb.stats", "--cf", "orders"]);
    assert!(text(&no_family).contains("\"orders\"") && text(&no_family).contains("default, users"));
}

/// The value after `label: ` in `out`, as a number.
fn number(out: &str, label: &str) -> u64 {
    field(out, label).parse().unwrap_or_else(|_| panic!("'{label}' is not a number in:\n{out}"))
}

#[test]
fn compact_then_sst_dump_reads_the_table_it_made() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut o = create(&dir);
    o.disable_auto_compactions = true;
    let d = Db::open(&dir, o).unwrap();
    for round in 0..2u32 {
        for i in 0..40u32 {
            d.put(format!("key{i:03}").as_bytes(), format!("round{round}").as_bytes()).unwrap();
        }
        d.flush(true).unwrap();
    }
    d.delete(b"key000").unwrap();
    d.flush(true).unwrap();
    d.close().unwrap();
    let db = dir.to_str().unwrap();
    let level0 = || stdout(&expect(0, &["get_property", "--db", db, "ebb.num-files-at-level0"]));
    assert_eq!(level0().trim(), "3");

    let compacted = stdout(&expect(0, &["compact", "--db", db]));
    assert!(compacted.starts_with("compacted column family default"), "{compacted}");
    assert_eq!(level0().trim(), "0");
    let tables = files_ending(&dir, ".sst");
    assert_eq!(tables.len(), 1, "{tables:?}");
    let sst = tables[0].to_str().unwrap();

    // The compaction kept the newest version of each key and dropped key000.
    let scan = stdout(&expect(0, &["sst_dump", "--file", sst]));
    let entries: Vec<_> = scan.lines().map(version).collect();
    assert_eq!(entries.len(), 39, "{scan}");
    assert_eq!(entries[0].0, "key001");
    assert!(entries.iter().all(|(_, _, t, v)| t == "put" && v == "round1"), "{scan}");
    let limited = stdout(&expect(0, &["sst_dump", "--file", sst, "--command", "scan", "--limit", "2"]));
    assert_eq!(limited.lines().count(), 2);

    let check = stdout(&expect(0, &["sst_dump", "--file", sst, "--command", "check"]));
    assert!(check.starts_with("OK: 39 entries read"), "{check}");
    let props = stdout(&expect(0, &["sst_dump", "--file", sst, "--command", "properties"]));
    assert_eq!(number(&props, "entries"), 39);
    assert_eq!(number(&props, "file size"), std::fs::metadata(sst).unwrap().len());
    assert!(field(&props, "smallest key").starts_with("key001 @ "), "{props}");
    assert!(field(&props, "largest key").starts_with("key039 @ "), "{props}");
    let blocks = stdout(&expect(0, &["sst_dump", "--file", sst, "--command", "blocks"]));
    let listed = blocks.lines().filter(|l| l.starts_with("data block ")).count() as u64;
    assert_eq!(listed, number(&blocks, "data blocks"), "{blocks}");
    assert!(listed >= 1);
    assert_eq!(number(&blocks, "data size"), number(&props, "data size"));

    let not_a_table = expect(1, &["sst_dump", "--file", dir.join("CURRENT").to_str().unwrap()]);
    assert!(text(&not_a_table).contains("CURRENT"), "{}", text(&not_a_table));
}

#[test]
fn checkconsistency_passes_then_names_a_damaged_table() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut o = create(&dir);
    o.compression = ebb::CompressionType::None;
    let d = Db::open(&dir, o).unwrap();
    for i in 0..400u32 {
        d.put(format!("key{i:05}").as_bytes(), &[b'v'; 100]).unwrap();
    }
    d.flush(true).unwrap();
    d.close().unwrap();
    let db = dir.to_str().unwrap();
    assert_eq!(stdout(&expect(0, &["checkconsistency", "--db", db])), "OK: 1 tables verified\n");

    let table = files_ending(&dir, ".sst").pop().unwrap();
    let mut bytes = std::fs::read(&table).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&table, &bytes).unwrap();
    let damaged = expect(1, &["checkconsistency", "--db", db]);
    let name = table.file_name().unwrap().to_str().unwrap();
    assert!(text(&damaged).contains(name) && text(&damaged).contains("corruption"), "{}", text(&damaged));
    assert!(!text(&damaged).contains("OK"), "{}", text(&damaged));
    // sst_dump's check finds it too.
    let check = expect(1, &["sst_dump", "--file", table.to_str().unwrap(), "--command", "check"]);
    assert!(text(&check).contains(name), "{}", text(&check));
}

#[test]
fn manifest_dump_lists_the_files_and_families_added() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = create(&dir);
    let d = Db::open(&dir, o.clone()).unwrap();
    let users = d.create_column_family("users", &o).unwrap();
    d.put(b"apple", b"1").unwrap();
    d.put(b"pear", b"2").unwrap();
    d.flush(true).unwrap();
    drop(users);
    let table = files_ending(&dir, ".sst").pop().unwrap();
    let number: u64 = table.file_stem().unwrap().to_str().unwrap().parse().unwrap();
    // A live database's MANIFEST can be read: no open, no LOCK.
    let out = stdout(&expect(0, &["manifest_dump", "--db", dir.to_str().unwrap()]));
    d.close().unwrap();

    let first = out.lines().next().unwrap();
    assert!(first.starts_with("manifest: ") && first.contains("MANIFEST-"), "{out}");
    let edits: Vec<&str> = out.lines().filter(|l| l.starts_with('@')).collect();
    assert_eq!(field(&out, "edits"), edits.len().to_string(), "{out}");
    let added = format!("add_file level 0 #{number} size {}", std::fs::metadata(&table).unwrap().len());
    let line = edits.iter().find(|l| l.contains(&added)).unwrap_or_else(|| panic!("no '{added}' in:\n{out}"));
    assert!(line.contains("keys [apple @ 1 : put .. pear @ 2 : put]"), "{line}");
    assert!(line.contains("column_family 0 (default)") && line.contains("entries 2"), "{line}");
    assert!(edits.iter().any(|l| l.contains("column_family 1 (users); add_column_family users")), "{out}");
    assert!(edits.iter().any(|l| l.contains("next_file_number ")), "{out}");

    let manifest = files_ending(&dir, "").into_iter().find(|p| p.to_string_lossy().contains("MANIFEST-")).unwrap();
    let by_path = stdout(&expect(0, &["manifest_dump", "--path", manifest.to_str().unwrap(), "--key_hex"]));
    assert!(by_path.contains("keys [0x6170706C65 @ "), "{by_path}");
}

#[test]
fn dump_wal_shows_the_writes_of_a_closed_database_and_names_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = create(&dir);
    let d = Db::open(&dir, o.clone()).unwrap();
    let users = d.create_column_family("users", &o).unwrap();
    d.put(b"alpha", b"one").unwrap();
    let mut batch = ebb::WriteBatch::new();
    batch.put_cf(&users, b"bob", b"two");
    batch.delete(b"alpha");
    d.write(&batch).unwrap();
    drop(users);
    d.close().unwrap();
    let wal = files_ending(&dir, ".log").pop().expect("the writes are in a WAL");
    let walfile = wal.to_str().unwrap();

    let out = stdout(&expect(0, &["dump_wal", "--walfile", walfile, "--print_values"]));
    let batches: Vec<&str> = out.lines().filter(|l| l.starts_with('@')).collect();
    assert_eq!(batches.len(), 2, "{out}");
    assert!(batches[0].contains("count 1") && batches[1].contains("count 2"), "{out}");
    let updates: Vec<&str> = out.lines().filter_map(|l| l.strip_prefix("  ")).collect();
    assert_eq!(updates.len(), 3, "{out}");
    let seq = |l: &str| -> u64 { version(&format!("{l} ==> ")).1 };
    assert_eq!(updates[0], format!("cf 0 alpha @ {} : put ==> one", seq(updates[0].split(" ==>").next().unwrap())));
    assert!(updates[1].starts_with("cf 1 bob @ ") && updates[1].ends_with(" : put ==> two"), "{out}");
    assert!(updates[2].starts_with("cf 0 alpha @ ") && updates[2].ends_with(" : delete"), "{out}");
    assert_eq!(field(&out, "records"), "2");
    let quiet = stdout(&expect(0, &["dump_wal", "--walfile", walfile]));
    assert!(quiet.contains("cf 0 alpha @ ") && !quiet.contains("==> one"), "{quiet}");

    // Damage in the second record: the first is printed, then the offset named.
    let second: u64 = batches[1][1..].split(' ').next().unwrap().parse().unwrap();
    let mut bytes = std::fs::read(&wal).unwrap();
    bytes[second as usize + 12] ^= 0xff;
    std::fs::write(&wal, &bytes).unwrap();
    let damaged = expect(1, &["dump_wal", "--walfile", walfile]);
    assert!(stdout(&damaged).starts_with(batches[0]), "{}", text(&damaged));
    let err = String::from_utf8_lossy(&damaged.stderr);
    assert!(err.contains(&format!("at offset {second}")) && err.contains(walfile), "{err}");
}

#[test]
fn bad_hex_unknown_families_and_missing_databases_are_refused_clearly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    create(&dir);
    let db = dir.to_str().unwrap();
    expect(0, &["put", "--db", db, "k", "v"]);

    for (args, named) in [
        (&["get", "--db", db, "--hex", "0xzz"][..], "KEY \"0xzz\" is not hex"),
        (&["put", "--db", db, "--value_hex", "k", "abc"][..], "VALUE \"abc\" is not hex"),
        (&["scan", "--db", db, "--key_hex", "--from", "00", "--to", "xy"][..], "--to \"xy\" is not hex"),
        (&["compact", "--db", db, "--hex", "--from", "0x1"][..], "--from \"0x1\" is not hex"),
        (&["get", "--db", db, "--cf", "orders", "k"][..], "no column family \"orders\""),
        (&["put", "--db", db, "--cf", "orders", "k", "v"][..], "no column family \"orders\""),
        (&["dump", "--db", db, "--cf", "orders"][..], "no column family \"orders\""),
    ] {
        let out = expect(1, args);
        assert!(text(&out).contains(named), "ebb {}: {}", args.join(" "), text(&out));
        assert!(out.stdout.is_empty(), "{}", text(&out));
    }
    assert_eq!(stdout(&expect(0, &["get", "--db", db, "k"])), "v\n", "nothing was written");

    let missing = tmp.path().join("nowhere");
    let m = missing.to_str().unwrap();
    for args in [
        &["get", "--db", m, "k"][..],
        &["put", "--db", m, "k", "v"][..],
        &["scan", "--db", m][..],
        &["list_column_families", "--db", m][..],
        &["checkconsistency", "--db", m][..],
        &["manifest_dump", "--db", m][..],
    ] {
        let out = expect(1, args);
        assert!(text(&out).contains(&format!("{m} does not exist")), "ebb {}: {}", args.join(" "), text(&out));
    }
    assert!(!missing.exists(), "a refused command creates nothing");
    expect(2, &["sst_dump", "--file", db, "--command", "nonsense"]);
    expect(2, &["manifest_dump"]);
}

/// A database in the reverse bytewise order: the reading verbs and sst_dump
/// take `--comparator`; without it the table is refused naming both orders.
#[test]
fn the_new_verbs_take_the_comparator_too() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut o = Options::default();
    o.create_if_missing = true;
    o.comparator = Some(ebb::comparator::reverse_bytewise());
    let d = Db::open(&dir, o).unwrap();
    d.put(b"a", b"1").unwrap();
    d.put(b"b", b"2").unwrap();
    d.flush(true).unwrap();
    d.close().unwrap();
    let db = dir.to_str().unwrap();
    let reverse = ebb::comparator::REVERSE_BYTEWISE_NAME;

    let refused = expect(1, &["scan", "--db", db]);
    assert!(text(&refused).contains(reverse), "{}", text(&refused));
    let scan = stdout(&expect(0, &["scan", "--db", db, "--comparator", reverse]));
    assert_eq!(pairs(&scan), owned(&[("b", "2"), ("a", "1")]));
    assert_eq!(stdout(&expect(0, &["put", "--db", db, "--comparator", reverse, "c", "3"])), "OK\n");
    assert_eq!(stdout(&expect(0, &["get", "--db", db, "--comparator", reverse, "c"])), "3\n");

    let sst = files_ending(&dir, ".sst").pop().unwrap();
    let sst = sst.to_str().unwrap();
    let refused = expect(1, &["sst_dump", "--file", sst]);
    assert!(text(&refused).contains(reverse) && text(&refused).contains(ebb::comparator::BYTEWISE_NAME));
    let entries = stdout(&expect(0, &["sst_dump", "--file", sst, "--comparator", reverse]));
    let keys: Vec<String> = entries.lines().map(|l| version(l).0).collect();
    assert_eq!(keys, ["b", "a"]);
    let check = stdout(&expect(0, &["sst_dump", "--file", sst, "--comparator", reverse, "--command", "check"]));
    assert!(check.starts_with("OK: 2 entries read"), "{check}");
}

/// A TTL database: `put` stamps the value with its write time as the TTL
/// layer does (the application reads it back whole), and the read-only
/// verbs, which cannot open one, refuse it by name.
#[test]
fn ttl_databases_are_written_through_the_ttl_layer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut o = Options::default();
    o.create_if_missing = true;
    Db::open_with_ttl(&dir, o.clone(), 3600).unwrap().close().unwrap();
    let db = dir.to_str().unwrap();

    assert_eq!(stdout(&expect(0, &["put", "--db", db, "k", "value"])), "OK\n");
    let refused = expect(1, &["get", "--db", db, "k"]);
    assert!(text(&refused).contains("TTL database"), "{}", text(&refused));
    let ttl = Db::open_with_ttl(&dir, o, 3600).unwrap();
    assert_eq!(ttl.get(b"k").unwrap(), Some(b"value".to_vec()));
    assert_eq!(ttl.base_db().get(b"k").unwrap().map(|v| v.len()), Some(b"value".len() + 4), "stamped");
}

/// `ebb load` refuses what it cannot load right, naming why, and leaves
/// the database and the files beside it alone: a key of non-ASCII text with
/// `--hex` (it once panicked, slicing inside a character), an empty
/// delimiter (every line was one empty key), a TTL database (the values went
/// in without their write time, and compactions dropped them as expired),
/// and a file already where it writes its table first.
#[test]
fn load_refuses_bad_hex_an_empty_delimiter_ttl_databases_and_a_file_in_its_way() {
    let tmp = tempfile::tempdir().unwrap();
    let (dir, input) = (tmp.path().join("db"), tmp.path().join("data.csv"));
    let o = create(&dir);
    let db = dir.to_str().unwrap();
    let file = input.to_str().unwrap();
    std::fs::write(&input, "a\u{e9}b,00\n").unwrap();
    let out = expect(1, &["load", "--db", db, "--file", file, "--hex"]);
    assert!(text(&out).contains("is not hex") && !text(&out).contains("panicked"), "{}", text(&out));
    std::fs::write(&input, "a,1\nb,2\n").unwrap();
    let out = expect(1, &["load", "--db", db, "--file", file, "--delimiter", ""]);
    assert!(text(&out).contains("delimiter is empty"), "{}", text(&out));
    std::fs::write(dir.with_extension("load.sst"), b"mine").unwrap();
    let out = expect(1, &["load", "--db", db, "--file", file]);
    assert!(text(&out).contains("exists"), "{}", text(&out));
    assert_eq!(std::fs::read(dir.with_extension("load.sst")).unwrap(), b"mine");
    std::fs::remove_file(dir.with_extension("load.sst")).unwrap();
    assert_eq!(Db::open(&dir, o.clone()).unwrap().get(b"a").unwrap(), None);
    let ttl_dir = tmp.path().join("ttl");
    Db::open_with_ttl(&ttl_dir, o.clone(), 3600).unwrap().close().unwrap();
    let out = expect(1, &["load", "--db", ttl_dir.to_str().unwrap(), "--file", file]);
    assert!(text(&out).contains("TTL database"), "{}", text(&out));
    assert!(!ttl_dir.with_extension("load.sst").exists());
    let ttl = Db::open_with_ttl(&ttl_dir, o, 3600).unwrap();
    assert_eq!(ttl.get(b"a").unwrap(), None);
}

#[test]
fn dump_wal_db_prints_the_writes_since_a_sequence_across_live_and_archived_wals() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let mut o = create(&dir);
    o.wal_ttl_seconds = 3600;
    let d = Db::open(&dir, o.clone()).unwrap();
    for i in 0..6u32 {
        d.put(format!("key{i}").as_bytes(), b"v").unwrap();
        if i == 2 {
            d.flush(true).unwrap();
        }
    }
    d.close().unwrap();
    assert!(dir.join(ebb::ARCHIVE_DIR).exists(), "a flushed WAL is archived");
    let db = dir.to_str().unwrap();

    let out = stdout(&expect(0, &["dump_wal", "--db", db, "--since", "2"]));
    let headers: Vec<&str> = out.lines().filter(|l| l.starts_with("sequence ")).collect();
    assert_eq!(
        headers,
        ["sequence 2 count 1", "sequence 3 count 1", "sequence 4 count 1", "sequence 5 count 1", "sequence 6 count 1"],
        "{out}"
    );
    assert!(out.contains("cf 0 key1 @ 2 : put") && out.contains("cf 0 key5 @ 6 : put"), "{out}");
    assert_eq!(field(&out, "batches"), "5");
    // --tail stops after --count batches.
    let out = stdout(&expect(0, &["dump_wal", "--db", db, "--since", "5", "--tail", "--count", "2"]));
    assert_eq!(field(&out, "batches"), "2");

    // Without the archive the flushed writes are gone, and the error says so.
    std::fs::remove_dir_all(dir.join(ebb::ARCHIVE_DIR)).unwrap();
    let gone = expect(1, &["dump_wal", "--db", db, "--since", "1"]);
    let err = String::from_utf8_lossy(&gone.stderr);
    assert!(err.contains("updates since sequence 1") && err.contains("wal_ttl_seconds"), "{err}");
    // --since without --db, and neither --walfile nor --db: usage errors.
    assert_eq!(ebb(&["dump_wal", "--since", "1"]).status.code(), Some(2));
    assert_eq!(ebb(&["dump_wal"]).status.code(), Some(2));
}

#[test]
fn check_reads_every_table_and_fails_on_a_damaged_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let o = create(&dir);
    let d = Db::open(&dir, o.clone()).unwrap();
    let users = d.create_column_family("users", &o).unwrap();
    for i in 0..200u32 {
        d.put(format!("key{i:03}").as_bytes(), &[b'v'; 200]).unwrap();
        d.put_cf(&users, format!("user{i:03}").as_bytes(), &[b'u'; 200]).unwrap();
    }
    d.flush(true).unwrap();
    d.flush_cf(&users, true).unwrap();
    drop(users);
    d.close().unwrap();
    let db = dir.to_str().unwrap();

    let clean = stdout(&expect(0, &["check", "--db", db]));
    assert!(clean.contains("tables: 2 read whole, every checksum verified"), "{clean}");

    // A flipped byte inside a data block of one table: the open does not
    // read it, the check does.
    let table = files_ending(&dir, ".sst").pop().unwrap();
    let mut bytes = std::fs::read(&table).unwrap();
    bytes[100] ^= 0xff;
    std::fs::write(&table, &bytes).unwrap();
    let damaged = expect(1, &["check", "--db", db]);
    let err = String::from_utf8_lossy(&damaged.stderr);
    assert!(err.contains("corruption") && err.contains(table.file_name().unwrap().to_str().unwrap()), "{err}");
}

/// Runs `ebb args` with its standard output a pipe whose reading end is
/// closed before `ebb` writes anything (as `ebb scan ... | head` leaves it
/// once `head` has read its lines).
fn ebb_into_a_closed_pipe(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ebb"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run ebb");
    drop(child.stdout.take());
    child.wait_with_output().expect("wait for ebb")
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, create(&dir)).unwrap();
    for i in 0..2_000u32 {
        db.put(format!("key{i:05}").as_bytes(), &[b'v'; 40]).unwrap();
    }
    db.close().unwrap();
    let path = dir.to_str().unwrap();
    for args in [
        vec!["scan", "--db", path],
        vec!["dump", "--db", path],
        vec!["repair", "--db", path],
        vec!["check", "--db", path],
    ] {
        let o = ebb_into_a_closed_pipe(&args);
        assert_eq!(o.status.code(), Some(0), "ebb {args:?} into a closed pipe: {}", text(&o));
        assert!(o.stderr.is_empty(), "ebb {args:?} into a closed pipe said: {}", text(&o));
    }
    // The output was cut, not the work: the repair left a database that
    // still holds every key.
    let db = Db::open(&dir, Options::default()).unwrap();
    assert_eq!(db.get(b"key01999").unwrap(), Some(vec![b'v'; 40]));
}

#[test]
fn errors_give_advice_in_commands_and_flags() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let empty = empty.to_str().unwrap();
    for args in [vec!["put", "--db", empty, "k", "v"], vec!["get", "--db", empty, "k"]] {
        let o = expect(1, &args);
        assert!(text(&o).contains("`ebb repair --db`"), "ebb {args:?}: {}", text(&o));
        assert!(!text(&o).contains("create_if_missing"), "ebb {args:?} names an API option: {}", text(&o));
    }
    let missing = tmp.path().join("missing");
    let o = expect(1, &["put", "--db", missing.to_str().unwrap(), "k", "v"]);
    assert!(text(&o).contains("does not exist"), "{}", text(&o));
    assert!(!text(&o).contains("create_if_missing"), "names an API option: {}", text(&o));
}

#[test]
fn printed_keys_paste_back_into_get() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let db = Db::open(&dir, create(&dir)).unwrap();
    db.put(&[1, b'a', b'\\', 0xff], b"found").unwrap();
    db.close().unwrap();
    let path = dir.to_str().unwrap();
    let scan = stdout(&expect(0, &["scan", "--db", path]));
    let printed = scan.lines().next().expect("one line").split(" ==> ").next().expect("a key").to_string();
    assert_eq!(printed, "\\x01a\\x5C\\xFF", "{scan}");
    assert_eq!(stdout(&expect(0, &["get", "--db", path, &printed])), "found\n");
    // A key not there is named as it would print: escaped once.
    let missing = expect(1, &["get", "--db", path, "\\x02b"]);
    assert!(text(&missing).contains("key \\x02b not found"), "{}", text(&missing));
}
