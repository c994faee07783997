//! TTL databases (issue 18 part 5; RocksDB's `DBWithTTL`): values come back
//! without the write time stored with them, expire only through compaction
//! (reads may return an expired value until then, as RocksDB documents),
//! snapshots keep reading what they read, the column family's own
//! compaction filter sees values without timestamps and keeps them on what
//! it changes, and a database opened the wrong way (TTL or not) is an error
//! naming the problem, with nothing lost. Time is a manual clock set as the
//! database's (`Options::clock`), moved by hand: no test waits for it.
//! docs/data_model.md, "TTL".

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::manual_options;
use ebb::compaction_filter::Decision;
use ebb::fs::MemFs;
use ebb::{Clock, CompactionFilter, Db, ManualClock, Options, ReadOptions, TtlDb, WriteBatch, WriteOptions};

/// A clock the test moves by hand, reading `unix_secs` seconds after the epoch.
fn clock(unix_secs: u64) -> Arc<ManualClock> {
    Arc::new(ManualClock::new(Duration::from_secs(unix_secs)))
}

/// Moves `clock` on to `unix_secs` seconds after the epoch.
fn set(clock: &ManualClock, unix_secs: u64) {
    let to = Duration::from_secs(unix_secs);
    let now = Duration::from_micros(clock.now_micros());
    clock.advance(to.checked_sub(now).expect("a manual clock only goes forward"));
}

/// [`manual_options`] on `fs` reading time from `clock`.
fn on(fs: &MemFs, clock: &Arc<ManualClock>) -> Options {
    manual_options(fs).with_clock(Arc::clone(clock) as Arc<dyn Clock>)
}

fn scan(db: &TtlDb, ro: ReadOptions<'_>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db.iter(ro);
    let mut out = BTreeMap::new();
    it.seek_to_first();
    while it.valid() {
        out.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().unwrap();
    out
}

fn scan_reverse(db: &TtlDb) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db.iter(ReadOptions::default());
    let mut out = BTreeMap::new();
    it.seek_to_last();
    while it.valid() {
        out.insert(it.key().to_vec(), it.value().to_vec());
        it.prev();
    }
    it.status().unwrap();
    out
}

#[test]
fn values_read_back_without_their_write_time() {
    let fs = MemFs::new();
    let clk = clock(1_000_000);
    let db = Db::open_with_ttl("/ttl", on(&fs, &clk), 3600).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..200u32 {
        let (k, v) = (format!("k{i:03}").into_bytes(), format!("value {i}").into_bytes());
        db.put(&k, &v).unwrap();
        model.insert(k, v);
    }
    db.delete(b"k007").unwrap();
    model.remove(b"k007".as_slice());
    let mut batch = WriteBatch::new();
    batch.put(b"b1", b"from a batch");
    batch.delete(b"k008");
    db.write(&batch, &WriteOptions::default()).unwrap();
    model.insert(b"b1".to_vec(), b"from a batch".to_vec());
    model.remove(b"k008".as_slice());
    for stage in ["memtable", "flushed", "compacted"] {
        match stage {
            "flushed" => db.flush(true).unwrap(),
            "compacted" => db.compact_range(None, None).unwrap(),
            _ => {}
        }
        assert_eq!(db.get(b"k010").unwrap(), Some(b"value 10".to_vec()), "{stage}");
        assert_eq!(db.get(b"k007").unwrap(), None, "{stage}");
        assert_eq!(scan(&db, ReadOptions::default()), model, "{stage}: forward");
        assert_eq!(scan_reverse(&db), model, "{stage}: backward");
    }
    // Underneath, each value ends with its write time, little-endian.
    let raw = db.base_db().get(b"k010").unwrap().unwrap();
    assert_eq!(raw, [&b"value 10"[..], &1_000_000u32.to_le_bytes()].concat());
    db.close().unwrap();
    let clk = clock(1_000_001);
    let db = Db::open_with_ttl("/ttl", on(&fs, &clk), 3600).unwrap();
    assert_eq!(scan(&db, ReadOptions::default()), model, "after reopen");
}

#[test]
fn expired_values_go_at_the_first_compaction_that_reads_them() {
    let fs = MemFs::new();
    let clk = clock(10_000);
    let db = Db::open_with_ttl("/expire", on(&fs, &clk), 100).unwrap();
    db.put(b"old", b"o").unwrap();
    set(&clk, 10_050);
    db.put(b"young", b"y").unwrap();
    db.flush(true).unwrap();
    // 100 seconds after "old" was written it is not yet stale; one more and it is.
    set(&clk, 10_100);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"old").unwrap(), Some(b"o".to_vec()), "exactly the TTL old is kept");
    set(&clk, 10_101);
    // Reads return the expired value until a compaction reads it.
    assert_eq!(db.get(b"old").unwrap(), Some(b"o".to_vec()));
    let snap = db.snapshot();
    db.compact_range(None, None).unwrap();
    // A snapshot still reads what it read: the filter spares what it sees.
    assert_eq!(db.get_opt(b"old", &snap.read_options()).unwrap(), Some(b"o".to_vec()));
    drop(snap);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"old").unwrap(), None, "expired and compacted");
    assert_eq!(db.get(b"young").unwrap(), Some(b"y".to_vec()));
    set(&clk, 20_000);
    db.compact_range(None, None).unwrap();
    assert!(scan(&db, ReadOptions::default()).is_empty(), "everything expired");
}

#[test]
fn a_ttl_of_zero_or_less_never_expires() {
    for ttl in [0, -1] {
        let fs = MemFs::new();
        let clk = clock(5);
        let db = Db::open_with_ttl("/forever", on(&fs, &clk), ttl).unwrap();
        db.put(b"k", b"v").unwrap();
        db.flush(true).unwrap();
        set(&clk, u64::from(u32::MAX));
        db.compact_range(None, None).unwrap();
        assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()), "ttl {ttl}");
    }
}

/// Upper-cases every value it is shown.
struct Upper;

impl CompactionFilter for Upper {
    fn name(&self) -> &str {
        "upper"
    }

    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> Decision {
        Decision::ChangeValue(value.to_ascii_uppercase())
    }
}

#[test]
fn the_familys_own_filter_sees_values_without_timestamps() {
    let fs = MemFs::new();
    let clk = clock(500);
    let mut o = on(&fs, &clk);
    o.compaction_filter = Some(Arc::new(Upper));
    let db = Db::open_with_ttl("/own", o, 60).unwrap();
    db.put(b"a", b"lower").unwrap();
    db.flush(true).unwrap();
    set(&clk, 530);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"LOWER".to_vec()));
    // The changed value kept its write time: it expires on schedule.
    let raw = db.base_db().get(b"a").unwrap().unwrap();
    assert_eq!(&raw[raw.len() - 4..], &500u32.to_le_bytes());
    set(&clk, 561);
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
}

#[test]
fn opening_a_database_the_wrong_way_is_an_error_and_loses_nothing() {
    let fs = MemFs::new();
    // A TTL database opened without a TTL.
    let clk = clock(100);
    let db = Db::open_with_ttl("/t", on(&fs, &clk), 60).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    let err = Db::open("/t", manual_options(&fs)).err().expect("Db::open of a TTL database");
    assert!(err.to_string().contains("TTL") && err.to_string().contains("open_with_ttl"), "{err}");
    let db = Db::open_with_ttl("/t", on(&fs, &clk), 60).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    db.close().unwrap();
    // A plain database opened with a TTL.
    let plain = Db::open("/p", manual_options(&fs)).unwrap();
    plain.put(b"k", b"v").unwrap();
    plain.close().unwrap();
    let err = Db::open_with_ttl("/p", manual_options(&fs), 60).err().expect("open_with_ttl of a plain database");
    assert!(err.to_string().contains("not created with a TTL"), "{err}");
    let plain = Db::open("/p", manual_options(&fs)).unwrap();
    assert_eq!(plain.get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn each_column_family_expires_after_its_own_ttl() {
    let fs = MemFs::new();
    let clk = clock(1_000);
    let db = Db::open_with_ttl("/families", on(&fs, &clk), 100).unwrap();
    let short = db.create_column_family("short", manual_options(&fs), 10).unwrap();
    // One batch across both families: every value stamped.
    let mut batch = WriteBatch::new();
    batch.put(b"k", b"default");
    batch.put_cf(&short, b"k", b"short");
    db.write(&batch, &WriteOptions::default()).unwrap();
    db.put_cf(&short, b"k2", b"short2").unwrap();
    assert_eq!(db.get_cf(&short, b"k").unwrap(), Some(b"short".to_vec()));
    let raw = db.base_db().get_cf(&short, b"k").unwrap().unwrap();
    assert_eq!(raw, [&b"short"[..], &1_000u32.to_le_bytes()].concat(), "stamped in its family");
    db.flush(true).unwrap();
    db.base_db().flush_cf(&short, true).unwrap();
    set(&clk, 1_050);
    db.compact_range(None, None).unwrap();
    db.compact_range_cf(&short, None, None).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"default".to_vec()), "100 s TTL: 50 s old");
    assert_eq!(db.get_cf(&short, b"k").unwrap(), None, "10 s TTL: 50 s old");
    let mut it = db.iter_cf(&short, ReadOptions::default());
    it.seek_to_first();
    assert!(!it.valid(), "the short family still holds {:?}", it.valid().then(|| it.key().to_vec()));
    it.status().unwrap();
    drop(it);
    drop(short);
    db.close().unwrap();
    // Reopened with its families and their TTLs.
    let cf_opts = ebb::ColumnFamilyOptions::from(&manual_options(&fs));
    let db = Db::open_cf_with_ttl("/families", on(&fs, &clk), 100, &[("short", cf_opts, 10)]).unwrap();
    let short = db.cf_handle("short").unwrap();
    db.put_cf(&short, b"again", b"v").unwrap();
    assert_eq!(db.get_cf(&short, b"again").unwrap(), Some(b"v".to_vec()));
    set(&clk, 1_200);
    db.base_db().flush_cf(&short, true).unwrap();
    db.compact_range_cf(&short, None, None).unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get_cf(&short, b"again").unwrap(), None);
    assert_eq!(db.get(b"k").unwrap(), None, "the default family's value expired too");
}

#[test]
fn a_value_too_short_for_its_write_time_is_corruption() {
    let fs = MemFs::new();
    let db = Db::open_with_ttl("/short", manual_options(&fs), 60).unwrap();
    // Written underneath without a timestamp (as a damaged value would read).
    db.base_db().put(b"k", b"ab").unwrap();
    let err = db.get(b"k").unwrap_err();
    assert!(err.is_corruption() && err.to_string().contains("write time"), "{err}");
    let mut it = db.iter(ReadOptions::default());
    it.seek_to_first();
    assert!(it.valid());
    assert_eq!(it.value(), b"");
    assert!(it.status().unwrap_err().is_corruption());
}

#[test]
fn a_creation_cut_short_after_the_marker_opens_with_a_ttl_only() {
    use ebb::fs::FileSystem;
    // What a crash right after the marker leaves: the marker, no database.
    let fs = MemFs::new();
    fs.create_dir_all(std::path::Path::new("/cut")).unwrap();
    fs.write_file_atomic(std::path::Path::new("/cut/TTL"), b"marker").unwrap();
    let err = Db::open("/cut", manual_options(&fs)).err().expect("a plain open of a TTL directory");
    assert!(err.to_string().contains("open_with_ttl"), "{err}");
    let db = Db::open_with_ttl("/cut", manual_options(&fs), 60).unwrap();
    db.put(b"k", b"v").unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
}

#[test]
fn periodic_compaction_removes_expired_values_no_other_compaction_reaches() {
    // Automatic compaction on; the files are under every size trigger, so
    // only their age gets them compacted.
    let fs = MemFs::new();
    let clk = clock(1_000);
    let mut o = common::tiny_options(Some(fs.clone())).with_clock(Arc::clone(&clk) as Arc<dyn Clock>);
    o.periodic_compaction_seconds = 1;
    let db = Db::open_with_ttl("/periodic", o, 10).unwrap();
    db.put(b"a", b"1").unwrap();
    db.put(b"b", b"2").unwrap();
    db.flush(true).unwrap();
    db.base_db().wait_for_compact().unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    // A table's age is on the database's clock too: its `creation_time`
    // was stamped at 1 000, and the flush below has the scheduler look again.
    set(&clk, 2_000);
    db.put(b"c", b"fresh").unwrap();
    db.flush(true).unwrap();
    db.base_db().wait_for_compact().unwrap();
    assert_eq!(db.get(b"a").unwrap(), None, "expired, and compacted for its age alone");
    assert_eq!(db.get(b"b").unwrap(), None);
    assert_eq!(db.get(b"c").unwrap(), Some(b"fresh".to_vec()));
    let m = db.base_db().metrics();
    let periodic = m.compactions_by_reason.iter().find(|(name, _)| *name == "PeriodicCompaction").map(|(_, n)| *n);
    assert!(periodic.unwrap_or(0) >= 1, "{:?}", m.compactions_by_reason);
}
