//! Per-thread performance counters (`ebb::perf`, RocksDB's `PerfContext`
//! and `IOStatsContext`): what a point read, an iterator and a write did,
//! step by step, counted only at the levels that ask, and only for the
//! thread that asked.

use ebb::perf::{self, PerfContext, PerfLevel};
use ebb::{Db, Options, ReadOptions, WriteOptions};

fn open(dir: &std::path::Path) -> Db {
    let mut o = Options::default().create_if_missing(true);
    // Tables keep no index or filter of their own outside the cache, so a
    // read's block cache lookups are all counted.
    o.disable_auto_compactions = true;
    Db::open(dir, o).unwrap()
}

fn value(i: u32) -> Vec<u8> {
    format!("value-{i:05}-{}", "v".repeat(100)).into_bytes()
}

/// 1,000 keys flushed to a table, one more in the memtable.
fn filled(dir: &std::path::Path) -> Db {
    let db = open(dir);
    for i in 0..1000u32 {
        db.put(format!("key{i:05}").as_bytes(), &value(i)).unwrap();
    }
    db.flush(true).unwrap();
    db.put(b"in-memtable", b"m").unwrap();
    db
}

/// Runs `f` with the calling thread at `level` from zeroed counters; the
/// counters it left.
fn measured(level: PerfLevel, f: impl FnOnce()) -> PerfContext {
    perf::set_perf_level(level);
    perf::reset_perf_context();
    perf::reset_iostats_context();
    f();
    let ctx = perf::perf_context();
    perf::set_perf_level(PerfLevel::Disable);
    ctx
}

#[test]
fn a_point_read_is_counted_through_memtable_filter_cache_and_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = filled(dir.path());

    // A key in the memtable (the one memtable there is): answered there,
    // no table asked.
    let ctx = measured(PerfLevel::EnableCount, || assert!(db.get(b"in-memtable").unwrap().is_some()));
    assert_eq!((ctx.get_count, ctx.get_from_memtable_count, ctx.get_read_bytes), (1, 1, 1));
    assert_eq!((ctx.block_read_count, ctx.bloom_sst_hit_count), (0, 0));

    // A key in the table, first read: the memtable searched in vain, the
    // filter says maybe, the data block is read from the file (and missed
    // in the cache first).
    let ctx = measured(PerfLevel::EnableCount, || assert_eq!(db.get(b"key00500").unwrap(), Some(value(500))));
    assert_eq!((ctx.get_count, ctx.get_from_memtable_count), (1, 1));
    assert_eq!(ctx.get_read_bytes, value(500).len() as u64);
    assert_eq!(ctx.bloom_sst_hit_count, 1);
    assert!(ctx.block_read_count >= 1 && ctx.block_cache_miss_count >= 1, "{ctx:?}");
    assert!(ctx.block_read_byte >= value(500).len() as u64, "{ctx:?}");
    assert_eq!((ctx.block_read_time, ctx.get_from_output_files_time), (0, 0), "counts only: no times");
    let io = perf::iostats_context();
    assert!(io.bytes_read >= ctx.block_read_byte, "{io:?} {ctx:?}");

    // Again: every block from the cache, nothing read.
    let ctx = measured(PerfLevel::EnableCount, || assert!(db.get(b"key00500").unwrap().is_some()));
    assert_eq!(ctx.block_read_count, 0, "{ctx:?}");
    assert!(ctx.block_cache_hit_count >= 1, "{ctx:?}");
    assert_eq!(perf::iostats_context().bytes_read, 0);

    // A key the table lacks: the filter rules it out (almost surely, and
    // for this key it does), no data block is looked at.
    let ctx = measured(PerfLevel::EnableCount, || assert_eq!(db.get(b"key00500x").unwrap(), None));
    assert_eq!((ctx.bloom_sst_miss_count, ctx.bloom_sst_hit_count, ctx.get_read_bytes), (1, 0, 0), "{ctx:?}");

    // With times: the steps a read took are timed.
    let ctx = measured(PerfLevel::EnableTime, || {
        assert!(db.get(b"key00999").unwrap().is_some());
    });
    assert!(ctx.get_from_output_files_time > 0 && ctx.get_from_memtable_time > 0, "{ctx:?}");
    assert!(ctx.block_read_count == 0 || ctx.block_read_time > 0, "{ctx:?}");

    // multi_get counts each key.
    let ctx = measured(PerfLevel::EnableCount, || {
        let got = db.multi_get(&[b"key00001", b"nope", b"in-memtable"], &ReadOptions::default());
        assert_eq!(got.len(), 3);
    });
    assert_eq!((ctx.get_count, ctx.get_read_bytes), (3, value(1).len() as u64 + 1), "{ctx:?}");
}

#[test]
fn nothing_is_counted_while_disabled_nor_for_another_thread() {
    let dir = tempfile::tempdir().unwrap();
    let db = filled(dir.path());
    let ctx = measured(PerfLevel::Disable, || {
        db.get(b"key00010").unwrap();
        db.put(b"x", b"y").unwrap();
        db.iter(ReadOptions::default()).seek_to_first();
    });
    assert_eq!(ctx, PerfContext::default());
    assert_eq!(perf::iostats_context(), perf::IoStatsContext::default());

    // This thread counts; another thread's reads are not in its counters,
    // and that thread (never having set a level) counts nothing.
    let ctx = measured(PerfLevel::EnableCount, || {
        std::thread::scope(|s| {
            s.spawn(|| {
                for i in 0..100u32 {
                    db.get(format!("key{i:05}").as_bytes()).unwrap();
                }
                assert_eq!(perf::perf_context(), PerfContext::default());
            });
        });
        db.get(b"key00020").unwrap();
    });
    assert_eq!(ctx.get_count, 1);
}

#[test]
fn an_iterator_counts_its_moves_what_it_stopped_on_and_what_it_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    // a, b (overwritten once), c (deleted), d.
    for (k, v) in [(&b"a"[..], &b"1"[..]), (b"b", b"old"), (b"c", b"3"), (b"d", b"4")] {
        db.put(k, v).unwrap();
    }
    db.flush(true).unwrap();
    db.put(b"b", b"22").unwrap();
    db.delete(b"c").unwrap();
    let snapshot = db.snapshot();
    db.put(b"e", b"newer than the snapshot").unwrap();

    let ctx = measured(PerfLevel::EnableCount, || {
        let mut it = db.iter(snapshot.read_options());
        it.seek_to_first();
        let mut seen = Vec::new();
        while it.valid() {
            seen.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status().unwrap();
        assert_eq!(
            seen,
            [(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"22".to_vec()), (b"d".to_vec(), b"4".to_vec())]
        );
    });
    assert_eq!((ctx.iter_seek_count, ctx.iter_next_count, ctx.iter_prev_count), (1, 3, 0));
    // a=1, b=22, d=4: the keys and values stopped on.
    assert_eq!(ctx.iter_read_bytes, 2 + 3 + 2);
    // b's older version, c's tombstone and c's value.
    assert_eq!(ctx.internal_key_skipped_count, 3, "{ctx:?}");
    assert_eq!(ctx.internal_delete_skipped_count, 1, "{ctx:?}");
    // e, written after the snapshot.
    assert_eq!(ctx.internal_recent_skipped_count, 1, "{ctx:?}");

    let ctx = measured(PerfLevel::EnableCount, || {
        let mut it = db.iter(snapshot.read_options());
        it.seek_to_last();
        assert_eq!(it.key(), b"d");
        it.prev();
        assert_eq!(it.key(), b"b");
        it.prev();
        assert_eq!(it.key(), b"a");
    });
    assert_eq!((ctx.iter_seek_count, ctx.iter_prev_count, ctx.iter_next_count), (1, 2, 0));
    assert_eq!(ctx.iter_read_bytes, 2 + 3 + 2);
    assert_eq!(ctx.internal_delete_skipped_count, 1, "{ctx:?}");
    // Backwards too: c's value and tombstone and b's older version skipped,
    // the versions stopped on not; e too new.
    assert_eq!(ctx.internal_key_skipped_count, 3, "{ctx:?}");
    assert_eq!(ctx.internal_recent_skipped_count, 1, "{ctx:?}");
}

#[test]
fn a_write_is_timed_through_the_wal_and_the_memtable_and_its_io_counted() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let ctx = measured(PerfLevel::EnableTime, || {
        db.put_opt(b"k", &[7u8; 4096], &WriteOptions { sync: true, ..WriteOptions::default() }).unwrap();
    });
    assert_eq!(ctx.write_group_count, 1);
    assert!(ctx.write_wal_time > 0 && ctx.write_memtable_time > 0, "{ctx:?}");
    let io = perf::iostats_context();
    assert!(io.bytes_written >= 4096, "{io:?}");
    assert!(io.write_nanos > 0 && io.fsync_nanos > 0, "{io:?}");

    // Counts only: the group is counted, nothing timed.
    let ctx = measured(PerfLevel::EnableCount, || db.put(b"k2", b"v").unwrap());
    assert_eq!((ctx.write_group_count, ctx.write_wal_time, ctx.write_memtable_time), (1, 0, 0));
    assert_eq!(perf::iostats_context().fsync_nanos, 0);
}
