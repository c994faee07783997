//! Bad input gets a specific error that names the problem, never a panic.

mod common;

use common::tiny_options;
use ebb::fs::MemFs;
use ebb::{Db, Error, Options, WriteBatch, MAX_KEY_SIZE, MAX_VALUE_SIZE};

#[test]
fn zero_write_buffer_is_refused_by_name() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs));
    o.write_buffer_size = 0;
    let e = Db::open("/db", o).err().expect("must fail");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    assert!(e.to_string().contains("write_buffer_size"), "{e}");
}

#[test]
fn unknown_option_and_compression_names_are_refused() {
    let e = Options::from_text("no_such_option=1").unwrap_err();
    assert!(e.to_string().contains("no_such_option"), "{e}");
    let e = Options::from_text("compression=brotli").unwrap_err();
    assert!(e.to_string().contains("brotli"), "{e}");
}

#[test]
fn second_open_is_busy() {
    let dir = tempfile::tempdir().unwrap();
    let o = tiny_options(None);
    let _db = Db::open(dir.path(), o.clone()).unwrap();
    let e = Db::open(dir.path(), o).err().expect("second open must fail");
    assert!(matches!(e, Error::Busy(_)), "{e:?}");
}

#[test]
fn second_open_on_memfs_is_busy() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs));
    let _db = Db::open("/db", o.clone()).unwrap();
    assert!(matches!(Db::open("/db", o), Err(Error::Busy(_))));
}

#[test]
fn missing_database_without_create_if_missing() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = tiny_options(None);
    o.create_if_missing = false;
    let e = Db::open(dir.path().join("nope"), o.clone()).err().expect("must fail");
    assert!(e.to_string().contains("create_if_missing"), "{e}");
    // An existing directory that holds something else is not a database either.
    std::fs::write(dir.path().join("notes.txt"), b"hello").unwrap();
    let e = Db::open(dir.path(), o.clone()).err().expect("must fail");
    assert!(e.to_string().contains("not an Ebb database"), "{e}");
    o.create_if_missing = true;
    let e = Db::open(dir.path(), o).err().expect("must refuse to create over foreign files");
    assert!(e.to_string().contains("not empty"), "{e}");
    // Refused before anything is written: no LOCK, no LOG left behind.
    let left: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(left, ["notes.txt"], "a directory that is not a database was changed");
}

#[test]
fn a_regular_file_is_not_a_database_directory() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.bin");
    std::fs::write(&file, b"bytes").unwrap();
    for create in [false, true] {
        let mut o = tiny_options(None);
        o.create_if_missing = create;
        let e = Db::open(&file, o).err().expect("must fail");
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        assert!(e.to_string().contains("regular file"), "{e}");
    }
    assert_eq!(std::fs::read(&file).unwrap(), b"bytes");
}

#[test]
fn the_info_log_is_a_diagnostic_whose_write_failures_fail_nothing() {
    use ebb::fs::{FaultOp, FaultRule};
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    drop(Db::open("/db", o.clone()).unwrap());
    // Appends to LOG fail from now on; renaming the old LOG fails too.
    fs.inject(FaultRule::new(FaultOp::Append).path_contains("LOG").persistent());
    fs.inject(FaultRule::new(FaultOp::Rename).path_contains("LOG").persistent());
    let db = Db::open("/db", o.clone()).expect("an open whose LOG cannot be written");
    db.put(b"k", b"v").unwrap();
    db.flush(true).unwrap();
    db.close().unwrap();
    // Creating LOG fails: the open fails, as in RocksDB.
    fs.clear_faults();
    fs.inject(FaultRule::new(FaultOp::Create).path_contains("LOG").persistent());
    let e = Db::open("/db", o.clone()).err().expect("an open that cannot create LOG");
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    fs.clear_faults();
    assert_eq!(Db::open("/db", o).unwrap().get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn error_if_exists() {
    let fs = MemFs::new();
    let mut o = tiny_options(Some(fs));
    drop(Db::open("/db", o.clone()).unwrap());
    o.error_if_exists = true;
    assert!(Db::open("/db", o).err().expect("must fail").to_string().contains("error_if_exists"));
}

#[test]
fn oversized_keys_and_values_are_invalid_arguments() {
    let fs = MemFs::new();
    let db = Db::open("/db", tiny_options(Some(fs))).unwrap();
    let e = db.put(&vec![0u8; MAX_KEY_SIZE + 1], b"v").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("key"), "{e}");
    let e = db.put(b"k", &vec![0u8; MAX_VALUE_SIZE + 1]).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("value"), "{e}");
    let mut b = WriteBatch::new();
    b.put(b"ok", b"1");
    b.put(&vec![1u8; MAX_KEY_SIZE + 1], b"2");
    assert!(db.write(&b).is_err());
    // Nothing of the refused batch was applied.
    assert_eq!(db.get(b"ok").unwrap(), None);
}

#[test]
fn set_options_refuses_unknown_and_static_names() {
    let fs = MemFs::new();
    let db = Db::open("/db", tiny_options(Some(fs))).unwrap();
    let e = db.set_options(&[("num_levels", "3")]).unwrap_err();
    assert!(e.to_string().contains("num_levels"), "{e}");
    let e = db.set_options(&[("bogus", "3")]).unwrap_err();
    assert!(e.to_string().contains("bogus"), "{e}");
    db.set_options(&[("level0_slowdown_writes_trigger", "30"), ("disable_auto_compactions", "true")]).unwrap();
    assert!(db.options().disable_auto_compactions);
    assert_eq!(db.options().level0_slowdown_writes_trigger, 30);
}

#[test]
fn options_file_is_written_and_parses_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = tiny_options(None);
    o.write_buffer_size = 123_456;
    let db = Db::open(dir.path(), o).unwrap();
    let name = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("OPTIONS-"))
        .expect("an OPTIONS file");
    let text = std::fs::read_to_string(dir.path().join(name)).unwrap();
    let parsed = Options::from_text(&text).unwrap();
    assert_eq!(parsed.write_buffer_size, 123_456);
    assert_eq!(parsed.to_text(), db.options().to_text());
}

#[test]
fn destroy_removes_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let o = tiny_options(None);
    {
        let db = Db::open(&path, o.clone()).unwrap();
        db.put(b"a", b"b").unwrap();
        assert!(matches!(Db::destroy(&path, &o), Err(Error::Busy(_))));
    }
    Db::destroy(&path, &o).unwrap();
    assert!(!path.exists());
}

#[test]
fn restart_intervals_of_zero_are_refused_by_name() {
    for name in ["block_restart_interval", "index_block_restart_interval"] {
        let mut o = tiny_options(Some(MemFs::new()));
        o.apply_text(&format!("{name}=0")).unwrap();
        let e = Db::open("/db", o).err().expect("must fail");
        assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
        assert!(e.to_string().contains(name), "{e}");
    }
}

/// Column family names the OPTIONS file cannot hold are refused by name:
/// `#` starts a comment there, and a line break would read as more options.
#[test]
fn column_family_names_with_comment_marks_or_control_characters_are_refused() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs));
    let db = Db::open("/db", o.clone()).unwrap();
    for name in ["a#b", "a\nmax_background_jobs=64", "tab\there"] {
        let e = db.create_column_family(name, &o).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("column family name"), "{e}");
    }
    assert_eq!(db.column_family_names(), ["default"]);
    db.create_column_family("fine name-1.2", &o).unwrap();
}

/// Huge values of options the engine multiplies (debug builds panicked on
/// the overflow, release builds wrapped) or waits out (a close waits for the
/// threads that sleep them) are refused by name; the largest accepted
/// ones open, write, flush and close.
#[test]
fn huge_intervals_and_memtable_limits_are_refused_by_name() {
    let day_ms = 86_400_000u64;
    let refused = [
        ("max_write_buffer_number", usize::MAX.to_string()),
        ("write_buffer_size", (1u64 << 40).to_string()),
        ("idle_probe_interval_ms", (u64::MAX / 999).to_string()),
        ("idle_quiet_ms", (day_ms + 1).to_string()),
        ("tuning_interval_us", u64::MAX.to_string()),
        ("rate_limiter_refill_period_us", (u64::MAX / 99).to_string()),
    ];
    for (name, value) in refused {
        let mut o = tiny_options(Some(MemFs::new()));
        o.set(name, &value).unwrap();
        let e = Db::open("/db", o).err().expect("refused");
        assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains(name), "{name}: {e}");
    }
    let mut o = tiny_options(Some(MemFs::new()));
    o.set("idle_quiet_ms", &day_ms.to_string()).unwrap();
    o.set("max_write_buffer_number", "1024").unwrap();
    o.set("rate_limiter_bytes_per_sec", "100000000").unwrap();
    o.set("rate_limiter_auto_tuned", "true").unwrap();
    let db = Db::open("/db", o).unwrap();
    for i in 0..2000u32 {
        db.put(format!("k{i:05}").as_bytes(), &[b'v'; 100]).unwrap();
    }
    db.flush(true).unwrap();
    assert_eq!(db.get(b"k01999").unwrap(), Some(vec![b'v'; 100]));
    db.close().unwrap();
}
