//! Statistics: RocksDB-format tickers and histograms, the info log, and
//! options that change how files are written back.

mod common;

use common::tiny_options;
use ebb::fs::MemFs;
use ebb::Db;

#[test]
fn statistics_report_tickers_and_histograms() {
    let mut o = tiny_options(Some(MemFs::new()));
    o.statistics = true;
    let db = Db::open("/db", o).unwrap();
    for i in 0..500u32 {
        db.put(format!("k{i:04}").as_bytes(), b"value").unwrap();
    }
    for i in 0..300u32 {
        db.get(format!("k{i:04}").as_bytes()).unwrap();
    }
    db.get(b"absent").unwrap();
    // Seeks of every kind are counted once each (the tuner weighs reads by
    // them); a seek_for_prev past the upper bound is one seek, not two.
    let mut it = db.iter(ebb::ReadOptions::default());
    it.seek_to_first();
    it.seek(b"k0100");
    it.seek_to_last();
    it.seek_for_prev(b"k0200");
    drop(it);
    let mut ro = ebb::ReadOptions::default();
    ro.iterate_upper_bound = Some(b"k0010".to_vec());
    let mut it = db.iter(ro);
    it.seek_for_prev(b"k0400");
    assert_eq!(it.key(), b"k0009");
    drop(it);
    assert_eq!(db.metrics().user_reads, 301 + 5);
    let text = db.get_property("ebb.options-statistics").unwrap();
    assert!(text.contains("rocksdb.number.db.seek COUNT : 5"), "{text}");
    assert!(text.contains("rocksdb.number.keys.written COUNT : 500"), "{text}");
    assert!(text.contains("rocksdb.number.keys.read COUNT : 301"), "{text}");
    assert!(text.contains("rocksdb.number.keys.found COUNT : 300"), "{text}");
    let get = text.lines().find(|l| l.starts_with("rocksdb.db.get.micros")).expect("get histogram");
    assert!(get.contains("COUNT : 301"), "{get}");
    let write = text.lines().find(|l| l.starts_with("rocksdb.db.write.micros")).expect("write histogram");
    assert!(write.contains("COUNT : 500") && write.contains("P99 :"), "{write}");
    // Without `statistics`, tickers only.
    let db2 = Db::open("/db2", tiny_options(Some(MemFs::new()))).unwrap();
    db2.put(b"a", b"b").unwrap();
    let text = db2.get_property("ebb.options-statistics").unwrap();
    assert!(!text.contains("rocksdb.db.get.micros"), "{text}");
}

#[test]
fn stats_are_dumped_to_the_info_log() {
    let dir = tempfile::tempdir().unwrap();
    // The period is on the database's clock: a manual one, moved a period
    // at a time until the dump is in the LOG.
    let clock = std::sync::Arc::new(ebb::ManualClock::new(std::time::Duration::from_secs(1_700_000_000)));
    let mut o = tiny_options(None).with_clock(clock.clone());
    o.stats_dump_period_sec = 1;
    let db = Db::open(dir.path(), o).unwrap();
    db.put(b"k", b"v").unwrap();
    let log = dir.path().join("LOG");
    let start = std::time::Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("DUMPING STATS") && text.contains("Cumulative writes:") {
            break;
        }
        assert!(start.elapsed() < common::sync::STUCK, "no stats dump in LOG:\n{text}");
        clock.advance(std::time::Duration::from_secs(1));
        std::thread::yield_now();
    }
    db.close().unwrap();
}

#[test]
fn write_behind_options_keep_data_intact() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = tiny_options(None);
    o.bytes_per_sync = 4096;
    o.wal_bytes_per_sync = 4096;
    {
        let db = Db::open(dir.path(), o.clone()).unwrap();
        for i in 0..3000u32 {
            db.put(format!("k{i:05}").as_bytes(), &[9u8; 100]).unwrap();
        }
        db.close().unwrap();
    }
    let db = Db::open(dir.path(), o).unwrap();
    assert_eq!(db.get(b"k02999").unwrap(), Some(vec![9u8; 100]));
}
