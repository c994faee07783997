//! `get_updates_since` and WAL archival: the stream of write batches read
//! back from the WALs, live and archived, its holes, archival by age and
//! size, and a replica kept by applying the stream.

use std::sync::Arc;
use std::time::Duration;

use ebb::fs::{CrashMode, MemFs};
use ebb::{
    BatchOp, Db, Error, IteratorMode, ManualClock, Options, ReadOptions, WalUpdates, WriteBatch, WriteOptions,
    ARCHIVE_DIR,
};

/// A batch's updates as text, family by family.
fn describe(batch: &WriteBatch) -> Vec<String> {
    batch
        .applied_cf()
        .map(|op| match op.expect("well-formed batch") {
            (cf, BatchOp::Put { key, value }) => {
                format!("{cf}:put {}={}", String::from_utf8_lossy(key), String::from_utf8_lossy(value))
            }
            (cf, BatchOp::Delete { key }) => format!("{cf}:delete {}", String::from_utf8_lossy(key)),
            (cf, other) => format!("{cf}:{other:?}"),
        })
        .collect()
}

/// Everything the stream from `since` yields: (sequence, updates).
fn read_all(updates: WalUpdates) -> Result<Vec<(u64, Vec<String>)>, Error> {
    updates.map(|u| u.map(|u| (u.sequence, describe(&u.batch)))).collect()
}

fn put(db: &Db, key: &str, value: &str) {
    db.put(key.as_bytes(), value.as_bytes()).unwrap();
}

fn flush(db: &Db) {
    db.flush(true).unwrap();
}

fn archiving(ttl: u64, size_mb: u64) -> Options {
    let mut options = Options::default().create_if_missing(true);
    options.wal_ttl_seconds = ttl;
    options.wal_size_limit_mb = size_mb;
    options
}

#[test]
fn the_stream_starts_at_the_batch_holding_the_sequence_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default().create_if_missing(true)).unwrap();
    put(&db, "a", "1"); // 1
    let mut batch = WriteBatch::new();
    batch.put(b"b", b"2");
    batch.delete(b"a");
    batch.put(b"c", b"3");
    db.write(&batch).unwrap(); // 2..=4
    put(&db, "d", "4"); // 5
    assert_eq!(db.latest_sequence_number(), 5);

    let all = read_all(db.get_updates_since(1).unwrap()).unwrap();
    assert_eq!(
        all,
        vec![
            (1, vec!["0:put a=1".to_string()]),
            (2, vec!["0:put b=2".into(), "0:delete a".into(), "0:put c=3".into()]),
            (5, vec!["0:put d=4".into()]),
        ]
    );
    // From inside the batch: the batch that holds it comes first.
    let from_3 = read_all(db.get_updates_since(3).unwrap()).unwrap();
    assert_eq!(from_3.iter().map(|(s, _)| *s).collect::<Vec<_>>(), vec![2, 5]);
    // 0 reads as 1, the first sequence number.
    assert_eq!(read_all(db.get_updates_since(0).unwrap()).unwrap(), all);

    // The next sequence number: nothing yet, then what is written next.
    let mut stream = db.get_updates_since(6).unwrap();
    assert!(stream.next().is_none());
    assert_eq!(stream.next_sequence(), 6);
    put(&db, "e", "5");
    assert_eq!(read_all(db.get_updates_since(6).unwrap()).unwrap(), vec![(6, vec!["0:put e=5".to_string()])]);
    // Beyond it: an error.
    let e = db.get_updates_since(8).unwrap_err();
    assert!(e.to_string().contains("the last sequence number written is 6"), "{e}");
}

#[test]
fn without_archival_flushed_writes_are_a_hole_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default().create_if_missing(true)).unwrap();
    for i in 0..10 {
        put(&db, &format!("k{i}"), "v");
    }
    flush(&db);
    put(&db, "after", "flush"); // 11
    let e = read_all(db.get_updates_since(1).unwrap()).unwrap_err();
    assert!(matches!(e, Error::NotFound(_)), "{e}");
    assert!(e.to_string().contains("wal_ttl_seconds"), "{e}");
    // What the live WAL holds is still there.
    assert_eq!(read_all(db.get_updates_since(11).unwrap()).unwrap(), vec![(11, vec!["0:put after=flush".into()])]);
    assert!(!dir.path().join(ARCHIVE_DIR).exists());
}

#[test]
fn archived_wals_keep_the_stream_whole_across_flushes_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let mut expected = Vec::new();
    for round in 0..3 {
        let db = Db::open(dir.path(), archiving(3600, 0)).unwrap();
        for i in 0..5 {
            let (key, value) = (format!("r{round}-{i}"), format!("v{i}"));
            put(&db, &key, &value);
            expected.push(vec![format!("0:put {key}={value}")]);
            if i == 2 {
                flush(&db);
            }
        }
        flush(&db);
        let all = read_all(db.get_updates_since(1).unwrap()).unwrap();
        assert_eq!(all.iter().map(|(_, ops)| ops.clone()).collect::<Vec<_>>(), expected, "round {round}");
        let seqs: Vec<u64> = all.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, (1..=expected.len() as u64).collect::<Vec<_>>());
        db.close().unwrap();
    }
    let archived = std::fs::read_dir(dir.path().join(ARCHIVE_DIR)).unwrap().count();
    assert!(archived >= 3, "{archived} archived WALs");
    // Read without opening the database.
    let all = read_all(WalUpdates::read_dir(dir.path(), &Options::default(), 1).unwrap()).unwrap();
    assert_eq!(all.len(), expected.len());
}

#[test]
fn archived_wals_go_when_older_than_the_ttl() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(Duration::from_secs(1_000_000)));
    let db = Db::open(dir.path(), archiving(60, 0).with_clock(clock.clone())).unwrap();
    for i in 0..4 {
        put(&db, &format!("k{i}"), "v");
    }
    flush(&db);
    put(&db, "k4", "v");
    assert_eq!(read_all(db.get_updates_since(1).unwrap()).unwrap().len(), 5);
    // 59 s later, the next purge keeps it; 60 s later, it goes.
    clock.advance(Duration::from_secs(59));
    flush(&db);
    assert_eq!(read_all(db.get_updates_since(1).unwrap()).unwrap().len(), 5);
    clock.advance(Duration::from_secs(1));
    put(&db, "k5", "v");
    flush(&db);
    let e = read_all(db.get_updates_since(1).unwrap()).unwrap_err();
    assert!(e.to_string().contains("updates since sequence 1"), "{e}");
    // Archived 1 s ago: the WAL of k4 is still there.
    assert_eq!(read_all(db.get_updates_since(5).unwrap()).unwrap().len(), 2);
}

#[test]
fn the_archive_keeps_the_newest_wals_within_its_size_limit() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), archiving(0, 1)).unwrap();
    let value = vec![b'x'; 100 << 10];
    let mut seq = 0;
    for round in 0..8 {
        for i in 0..4 {
            db.put(format!("r{round}-{i}").as_bytes(), &value).unwrap();
            seq += 1;
        }
        flush(&db);
    }
    let archive = dir.path().join(ARCHIVE_DIR);
    let bytes: u64 = std::fs::read_dir(&archive).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
    assert!(bytes <= 1 << 20, "archive holds {bytes} bytes");
    assert!(bytes > 0);
    // The oldest writes are gone, the newest readable up to the last one.
    assert!(read_all(db.get_updates_since(1).unwrap()).is_err());
    let recent = read_all(db.get_updates_since(seq - 3).unwrap()).unwrap();
    assert_eq!(recent.len(), 4);
    assert_eq!(recent.last().unwrap().0, seq);

    // Turning archival off empties the archive at the next purge.
    db.set_options(&[("wal_size_limit_mb", "0")]).unwrap();
    put(&db, "last", "one");
    flush(&db);
    assert_eq!(std::fs::read_dir(&archive).unwrap().count(), 0);
}

#[test]
fn writes_without_a_wal_record_are_a_hole() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default().create_if_missing(true)).unwrap();
    put(&db, "a", "1");
    let no_wal = WriteOptions { sync: false, disable_wal: true };
    db.put_opt(b"b", b"2", &no_wal).unwrap();
    put(&db, "c", "3");
    let mut stream = db.get_updates_since(1).unwrap();
    assert_eq!(stream.next().unwrap().unwrap().sequence, 1);
    let e = stream.next().unwrap().unwrap_err();
    assert!(e.to_string().contains("jump from sequence 2 to 3"), "{e}");
    assert!(stream.next().is_none());
}

#[test]
fn after_a_power_loss_the_stream_is_what_recovery_kept() {
    let fs = MemFs::new();
    let mut options = archiving(3600, 0);
    options.fs = Arc::new(fs.clone());
    let db = Db::open("/db", options.clone()).unwrap();
    let synced = WriteOptions { sync: true, disable_wal: false };
    for i in 0..5 {
        db.put_opt(format!("s{i}").as_bytes(), b"v", &synced).unwrap();
    }
    flush(&db);
    db.put_opt(b"s5", b"v", &synced).unwrap();
    for i in 0..5 {
        put(&db, &format!("u{i}"), "lost");
    }
    // The disk as a power loss now would leave it; the old instance goes on
    // on the old one.
    let after = fs.crash_clone(CrashMode::DropUnsynced);
    drop(db);
    options.fs = Arc::new(after);
    let db = Db::open("/db", options.clone()).unwrap();
    let all = read_all(db.get_updates_since(1).unwrap()).unwrap();
    let keys: Vec<String> = all.iter().flat_map(|(_, ops)| ops.clone()).collect();
    let want: Vec<String> = (0..6).map(|i| format!("0:put s{i}=v")).collect();
    assert_eq!(keys, want);
    assert_eq!(db.latest_sequence_number(), 6);
    // New writes continue the stream.
    put(&db, "after", "crash");
    let rest = read_all(db.get_updates_since(7).unwrap()).unwrap();
    assert_eq!(rest, vec![(7, vec!["0:put after=crash".to_string()])]);
}

#[test]
fn a_torn_record_at_the_end_of_the_newest_wal_ends_the_stream() {
    let fs = MemFs::new();
    let mut options = Options::default().create_if_missing(true);
    options.fs = Arc::new(fs.clone());
    let db = Db::open("/db", options.clone()).unwrap();
    for i in 0..4 {
        put(&db, &format!("k{i}"), "v");
    }
    db.close().unwrap();
    let wal = ebb::fs::FileSystem::list_dir(&fs, std::path::Path::new("/db"))
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with(".log"))
        .expect("a WAL");
    let path = std::path::Path::new("/db").join(wal);
    let bytes = fs.file_bytes(&path).unwrap();
    // The last record cut short, as a reader racing its write sees it.
    fs.set_file_bytes(&path, &bytes[..bytes.len() - 3]).unwrap();
    let all = read_all(WalUpdates::read_dir("/db", &options, 1).unwrap()).unwrap();
    assert_eq!(all.iter().map(|(s, _)| *s).collect::<Vec<_>>(), vec![1, 2, 3]);
}

#[test]
fn a_replica_fed_the_stream_matches_the_primary() {
    let dir = tempfile::tempdir().unwrap();
    let (primary_dir, replica_dir) = (dir.path().join("primary"), dir.path().join("replica"));
    let mut options = archiving(3600, 0);
    options.write_buffer_size = 64 << 10;
    let primary = Db::open(&primary_dir, options.clone()).unwrap();
    let replica = Db::open(&replica_dir, Options::default().create_if_missing(true)).unwrap();
    // Families in the same order on both, so their ids match.
    let users = primary.create_column_family("users", options.cf_options()).unwrap();
    replica.create_column_family("users", Options::default().cf_options()).unwrap();
    let mut next = 1;
    for round in 0..20u32 {
        for i in 0..50u32 {
            let key = format!("k{:04}", (round * 37 + i * 11) % 400);
            let mut batch = WriteBatch::new();
            batch.put(key.as_bytes(), format!("{round}-{i}").as_bytes());
            batch.put_cf(&users, key.as_bytes(), &[b'u'; 300]);
            if i % 7 == 0 {
                batch.delete(format!("k{:04}", i * 3).as_bytes());
            }
            if i % 13 == 0 {
                batch.delete_range_cf(&users, b"k0100", b"k0120");
            }
            primary.write(&batch).unwrap();
        }
        // Tail what is there now, as a replication loop would.
        let mut stream = primary.get_updates_since(next).unwrap();
        for update in stream.by_ref() {
            replica.write(&update.unwrap().batch).unwrap();
        }
        next = stream.next_sequence();
    }
    assert_eq!(next, primary.latest_sequence_number() + 1);
    let contents = |db: &Db, cf: Option<&str>| -> Vec<(Vec<u8>, Vec<u8>)> {
        match cf {
            None => db.iterator(ReadOptions::default(), IteratorMode::Start).map(Result::unwrap).collect(),
            Some(name) => {
                let cf = db.cf_handle(name).unwrap();
                db.iterator_cf(&cf, ReadOptions::default(), IteratorMode::Start).map(Result::unwrap).collect()
            }
        }
    };
    assert_eq!(contents(&primary, None), contents(&replica, None));
    assert_eq!(contents(&primary, Some("users")), contents(&replica, Some("users")));
    assert!(!contents(&replica, Some("users")).is_empty());
}

#[test]
fn a_tail_read_while_writers_write_sees_every_batch_once_in_order() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let mut options = archiving(3600, 0);
    options.write_buffer_size = 256 << 10;
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2)
        .map(|t| {
            let (db, done) = (Arc::clone(&db), Arc::clone(&done));
            std::thread::spawn(move || {
                for i in 0..3000u32 {
                    db.put(format!("t{t}-{i:05}").as_bytes(), &[b'v'; 100]).unwrap();
                }
                done.store(true, Ordering::Release);
            })
        })
        .collect();
    let (mut next, mut seen) = (1u64, Vec::new());
    loop {
        let finished = done.load(Ordering::Acquire);
        let mut stream = db.get_updates_since(next).unwrap();
        for update in stream.by_ref() {
            // A write group's batches are one WAL record: one batch here.
            let update = update.unwrap();
            let updates = update.batch.applied_cf().count() as u64;
            seen.extend(update.sequence..update.sequence + updates);
        }
        next = stream.next_sequence();
        if finished && writers.iter().all(|w| w.is_finished()) && next > db.latest_sequence_number() {
            break;
        }
        std::thread::yield_now();
    }
    for w in writers {
        w.join().unwrap();
    }
    let first_wrong = seen.iter().zip(1u64..).find(|(s, want)| **s != *want);
    assert_eq!(first_wrong, None, "sequences out of order or missing");
    assert_eq!(seen.len(), 6000);
}
