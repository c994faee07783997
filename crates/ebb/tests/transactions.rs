//! Transactions: optimistic and pessimistic, their conflicts, locks,
//! deadlocks, expiration, savepoints, bad input, and two-phase commit
//! across reopen (docs/transactions.md).

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ebb::{
    ColumnFamilyOptions, Error, OptimisticTransactionDb, OptimisticTransactionDbOptions, OptimisticTransactionOptions,
    Options, ReadOptions, TransactionDb, TransactionDbOptions, TransactionOptions, TransactionState, WriteBatch,
    WriteOptions,
};

fn options() -> Options {
    let mut o = Options::default();
    o.create_if_missing = true;
    o.merge_operator = Some(ebb::merge_operator::from_name("stringappend").unwrap());
    o
}

fn wo() -> WriteOptions {
    WriteOptions::default()
}

fn optimistic(dir: &std::path::Path) -> OptimisticTransactionDb {
    OptimisticTransactionDb::open(dir, options(), OptimisticTransactionDbOptions::default()).unwrap()
}

fn pessimistic(dir: &std::path::Path) -> TransactionDb {
    TransactionDb::open(dir, options(), TransactionDbOptions::default()).unwrap()
}

/// [`pessimistic`] with the family "cf" beside the default.
fn pessimistic_with_cf(dir: &std::path::Path) -> TransactionDb {
    let families = [("default", ColumnFamilyOptions::default()), ("cf", ColumnFamilyOptions::default())];
    TransactionDb::open_cf(dir, options(), TransactionDbOptions::default(), &families).unwrap()
}

fn no_wait() -> TransactionOptions {
    TransactionOptions { lock_timeout: 0, ..TransactionOptions::default() }
}

/// Waits (without sleeping: yielding) until `cond` holds; the test fails
/// after ten million tries.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..10_000_000u64 {
        if cond() {
            return;
        }
        std::thread::yield_now();
    }
    panic!("never happened: {what}");
}

fn prop(db: &TransactionDb, name: &str) -> u64 {
    db.get_property(name).unwrap().parse().unwrap()
}

// ---------------------------------------------------------------- optimistic

#[test]
fn optimistic_reads_its_own_writes_and_commits_them_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let db = optimistic(dir.path());
    db.put(b"a", b"1").unwrap();
    db.put(b"m", b"x").unwrap();
    let mut t = db.begin_transaction(&wo(), &OptimisticTransactionOptions::default());
    t.put(b"b", b"2").unwrap();
    t.delete(b"a").unwrap();
    t.merge(b"m", b"y").unwrap();
    assert_eq!(t.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(t.get(b"a").unwrap(), None);
    assert_eq!(t.get(b"m").unwrap().as_deref(), Some(&b"x,y"[..]));
    // Not visible outside before commit.
    assert_eq!(db.get(b"b").unwrap(), None);
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    let mut it = t.iter(ReadOptions::default());
    it.seek_to_first();
    let mut seen = Vec::new();
    while it.valid() {
        seen.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    drop(it);
    assert_eq!(seen, vec![(b"b".to_vec(), b"2".to_vec()), (b"m".to_vec(), b"x,y".to_vec())]);
    t.commit().unwrap();
    assert_eq!(t.state(), TransactionState::Committed);
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.get(b"m").unwrap().as_deref(), Some(&b"x,y"[..]));
}

#[test]
fn optimistic_commit_fails_busy_when_a_tracked_key_was_written_since() {
    let dir = tempfile::tempdir().unwrap();
    let db = optimistic(dir.path());
    db.put(b"k", b"0").unwrap();
    // Read for update, then written by another.
    let mut t = db.begin_transaction(&wo(), &OptimisticTransactionOptions::default());
    assert_eq!(t.get_for_update(b"k").unwrap().as_deref(), Some(&b"0"[..]));
    t.put(b"other", b"1").unwrap();
    db.put(b"k", b"outside").unwrap();
    let e = t.commit().unwrap_err();
    assert!(e.is_busy(), "{e}");
    // Nothing of it was written.
    assert_eq!(db.get(b"other").unwrap(), None);
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"outside"[..]));
    t.rollback().unwrap();

    // Written (blindly), then written by another transaction that commits first.
    let mut a = db.begin_transaction(&wo(), &OptimisticTransactionOptions::default());
    let mut b = db.begin_transaction(&wo(), &OptimisticTransactionOptions::default());
    a.put(b"w", b"a").unwrap();
    b.put(b"w", b"b").unwrap();
    b.commit().unwrap();
    assert!(a.commit().unwrap_err().is_busy());
    assert_eq!(db.get(b"w").unwrap().as_deref(), Some(&b"b"[..]));

    // A plain read tracks nothing: no conflict.
    let mut c = db.begin_transaction(&wo(), &OptimisticTransactionOptions::default());
    c.get(b"k").unwrap();
    c.put(b"z", b"1").unwrap();
    db.put(b"k", b"again").unwrap();
    c.commit().unwrap();
    assert_eq!(db.get(b"z").unwrap().as_deref(), Some(&b"1"[..]));
}

#[test]
fn optimistic_snapshot_makes_writes_after_it_conflicts_even_for_keys_tracked_later() {
    let dir = tempfile::tempdir().unwrap();
    let db = optimistic(dir.path());
    let mut t = db.begin_transaction(&wo(), &OptimisticTransactionOptions { set_snapshot: true });
    db.put(b"k", b"outside").unwrap();
    // Tracked after the outside write, but at the snapshot.
    t.put(b"k", b"mine").unwrap();
    assert!(t.commit().unwrap_err().is_busy());
    // Without a snapshot, a key tracked after the write is fine.
    let mut u = db.begin_transaction(&wo(), &OptimisticTransactionOptions::default());
    db.put(b"k", b"outside2").unwrap();
    u.put(b"k", b"mine").unwrap();
    u.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"mine"[..]));
}

#[test]
fn optimistic_conflicts_are_found_across_flushes_and_range_deletions() {
    let dir = tempfile::tempdir().unwrap();
    let db = optimistic(dir.path());
    db.put(b"k", b"0").unwrap();
    let mut t = db.begin_transaction(&wo(), &OptimisticTransactionOptions::default());
    t.get_for_update(b"k").unwrap();
    db.put(b"k", b"1").unwrap();
    // The write is flushed: the memtable kept (max_write_buffer_size_to_maintain
    // made -1 at open) still tells.
    db.flush(true).unwrap();
    assert!(t.commit().unwrap_err().is_busy());

    let mut r = db.begin_transaction(&wo(), &OptimisticTransactionOptions::default());
    r.get_for_update(b"k").unwrap();
    db.delete_range(b"a", b"z").unwrap();
    assert!(r.commit().unwrap_err().is_busy(), "a range deletion over a tracked key is a conflict");
}

#[test]
fn optimistic_commit_is_try_again_when_the_history_does_not_reach_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options();
    // One byte of history: only the newest flushed memtable is kept.
    o.max_write_buffer_size_to_maintain = 1;
    let db = OptimisticTransactionDb::open(dir.path(), o, OptimisticTransactionDbOptions::default()).unwrap();
    db.put(b"k", b"0").unwrap();
    let mut t = db.begin_transaction(&wo(), &OptimisticTransactionOptions::default());
    t.get_for_update(b"k").unwrap();
    for i in 0..3 {
        db.put(format!("other{i}").as_bytes(), b"x").unwrap();
        db.flush(true).unwrap();
    }
    let e = t.commit().unwrap_err();
    assert!(e.is_try_again(), "{e}");
    assert!(e.to_string().contains("max_write_buffer_size_to_maintain"), "{e}");
}

#[test]
fn optimistic_serial_and_parallel_validation_agree() {
    for policy in [ebb::OccValidationPolicy::ValidateSerial, ebb::OccValidationPolicy::ValidateParallel] {
        let dir = tempfile::tempdir().unwrap();
        let db = OptimisticTransactionDb::open(
            dir.path(),
            options(),
            OptimisticTransactionDbOptions { validate_policy: policy, occ_lock_buckets: 16 },
        )
        .unwrap();
        let mut a = db.begin_transaction(&wo(), &OptimisticTransactionOptions::default());
        let mut b = db.begin_transaction(&wo(), &OptimisticTransactionOptions::default());
        a.get_for_update(b"x").unwrap();
        b.get_for_update(b"x").unwrap();
        a.put(b"x", b"a").unwrap();
        b.put(b"x", b"b").unwrap();
        a.commit().unwrap();
        assert!(b.commit().unwrap_err().is_busy(), "{policy:?}");
    }
}

// ---------------------------------------------------------------- savepoints and bad input

#[test]
fn savepoints_undo_writes_and_tracking() {
    let dir = tempfile::tempdir().unwrap();
    let db = optimistic(dir.path());
    let mut t = db.begin_transaction(&wo(), &OptimisticTransactionOptions::default());
    t.put(b"a", b"1").unwrap();
    t.set_save_point();
    t.put(b"a", b"2").unwrap();
    t.put(b"b", b"2").unwrap();
    assert_eq!(t.num_tracked_keys(), 2);
    t.rollback_to_save_point().unwrap();
    assert_eq!(t.num_tracked_keys(), 1, "b was tracked after the savepoint");
    assert_eq!(t.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(t.get(b"b").unwrap(), None);
    assert!(matches!(t.rollback_to_save_point(), Err(Error::NotFound(_))));
    assert!(matches!(t.pop_save_point(), Err(Error::NotFound(_))));
    t.set_save_point();
    t.put(b"c", b"3").unwrap();
    t.pop_save_point().unwrap();
    // An outside write to b does not conflict: b is no longer tracked.
    db.put(b"b", b"outside").unwrap();
    t.commit().unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"c").unwrap().as_deref(), Some(&b"3"[..]));
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"outside"[..]));
}

#[test]
fn pessimistic_savepoint_rollback_releases_the_locks_taken_since() {
    let dir = tempfile::tempdir().unwrap();
    let db = pessimistic(dir.path());
    let mut a = db.begin_transaction(&wo(), &TransactionOptions::default());
    a.put(b"held", b"1").unwrap();
    a.set_save_point();
    a.put(b"later", b"1").unwrap();
    assert_eq!(prop(&db, "ebb.txn.num-locks"), 2);
    a.rollback_to_save_point().unwrap();
    assert_eq!(prop(&db, "ebb.txn.num-locks"), 1);
    let mut b = db.begin_transaction(&wo(), &no_wait());
    b.put(b"later", b"b").unwrap();
    assert!(b.put(b"held", b"b").unwrap_err().is_timed_out());
}

#[test]
fn finished_transactions_refuse_everything_with_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = pessimistic(dir.path());
    let mut t = db.begin_transaction(&wo(), &TransactionOptions::default());
    t.put(b"k", b"v").unwrap();
    t.commit().unwrap();
    for e in [t.put(b"k", b"w").unwrap_err(), t.commit().unwrap_err(), t.rollback().unwrap_err()] {
        assert!(matches!(e, Error::InvalidArgument(ref m) if m.contains("committed")), "{e}");
    }
    let mut r = db.begin_transaction(&wo(), &TransactionOptions::default());
    r.put(b"r", b"v").unwrap();
    r.rollback().unwrap();
    let e = r.commit().unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(ref m) if m.contains("rolled back")), "{e}");
    assert_eq!(db.get(b"r").unwrap(), None);
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));

    // Prepare without a name; a name twice; an empty one; optimistic 2PC.
    let mut p = db.begin_transaction(&wo(), &TransactionOptions::default());
    assert!(matches!(p.prepare(), Err(Error::InvalidArgument(m)) if m.contains("named")));
    p.set_name(b"x").unwrap();
    assert!(p.set_name(b"y").is_err());
    let mut q = db.begin_transaction(&wo(), &TransactionOptions::default());
    assert!(q.set_name(b"x").is_err(), "names are unique");
    assert!(q.set_name(b"").is_err());
    let odir = tempfile::tempdir().unwrap();
    let odb = optimistic(odir.path());
    let mut o = odb.begin_transaction(&wo(), &OptimisticTransactionOptions::default());
    assert!(matches!(o.set_name(b"n"), Err(Error::NotSupported(_))));
    assert!(matches!(o.prepare(), Err(Error::NotSupported(_))));

    // A family of another database; a dropped family; a merge without an operator.
    let cf = odb.create_column_family("other", ColumnFamilyOptions::default()).unwrap();
    assert!(matches!(p.put_cf(&cf, b"k", b"v"), Err(Error::InvalidArgument(m)) if m.contains("another database")));
    // A locking write with it neither: it would land in this database's
    // family of the same id.
    assert!(matches!(db.put_cf(&cf, b"k", b"v"), Err(Error::InvalidArgument(m)) if m.contains("another database")));
    let mine = db.create_column_family("mine", ColumnFamilyOptions::default()).unwrap();
    assert!(matches!(p.merge_cf(&mine, b"k", b"v"), Err(Error::InvalidArgument(m)) if m.contains("merge operator")));
    db.drop_column_family(&mine).unwrap();
    assert!(p.put_cf(&mine, b"k", b"v").is_err());
    // A batch with a range deletion through the locking write.
    let mut batch = WriteBatch::new();
    batch.delete_range(b"a", b"b");
    assert!(matches!(db.write(&batch), Err(Error::NotSupported(_))));
}

// ---------------------------------------------------------------- pessimistic locks

#[test]
fn pessimistic_locks_time_out_and_are_released_at_commit_and_rollback() {
    let dir = tempfile::tempdir().unwrap();
    let db = pessimistic(dir.path());
    let mut a = db.begin_transaction(&wo(), &TransactionOptions::default());
    a.get_for_update(b"k").unwrap();
    let mut b = db.begin_transaction(&wo(), &no_wait());
    assert!(b.get_for_update(b"k").unwrap_err().is_timed_out());
    let mut c = db.begin_transaction(&wo(), &TransactionOptions { lock_timeout: 20, ..TransactionOptions::default() });
    assert!(c.put(b"k", b"c").unwrap_err().is_timed_out());
    assert!(prop(&db, "ebb.txn.lock-timeouts") >= 1);
    drop((b, c));
    a.rollback().unwrap();
    assert_eq!(prop(&db, "ebb.txn.num-locks"), 0);
    let mut d = db.begin_transaction(&wo(), &no_wait());
    d.put(b"k", b"d").unwrap();
    d.commit().unwrap();
    assert_eq!(prop(&db, "ebb.txn.num-locks"), 0);
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"d"[..]));
}

#[test]
fn pessimistic_shared_locks_admit_readers_and_keep_writers_out() {
    let dir = tempfile::tempdir().unwrap();
    let db = pessimistic(dir.path());
    let ro = ReadOptions::default();
    let mut a = db.begin_transaction(&wo(), &no_wait());
    let mut b = db.begin_transaction(&wo(), &no_wait());
    a.get_for_update_opt(&ro, b"k", false).unwrap();
    b.get_for_update_opt(&ro, b"k", false).unwrap();
    let status = db.get_lock_status_data();
    assert_eq!(status.len(), 1);
    assert!(!status[0].1.exclusive);
    assert_eq!(status[0].1.ids.len(), 2);
    assert!(a.put(b"k", b"a").unwrap_err().is_timed_out(), "b shares the lock");
    b.commit().unwrap();
    a.put(b"k", b"a").unwrap();
    a.commit().unwrap();
}

#[test]
fn plain_writes_through_a_transaction_db_wait_for_transaction_locks() {
    let dir = tempfile::tempdir().unwrap();
    let db = TransactionDb::open(
        dir.path(),
        options(),
        TransactionDbOptions { default_lock_timeout: 0, ..TransactionDbOptions::default() },
    )
    .unwrap();
    let mut a = db.begin_transaction(&wo(), &TransactionOptions::default());
    a.put(b"k", b"a").unwrap();
    assert!(db.put(b"k", b"plain").unwrap_err().is_timed_out());
    let mut batch = WriteBatch::new();
    batch.put(b"free", b"1");
    batch.put(b"k", b"2");
    assert!(db.write(&batch).unwrap_err().is_timed_out());
    assert_eq!(db.get(b"free").unwrap(), None, "the batch is all or nothing");
    assert!(db.put_entity(b"k", &[(b"", b"e")]).unwrap_err().is_timed_out(), "an entity locks its key too");
    let mut batch = WriteBatch::new();
    batch.put_entity(b"k", &[(b"c", b"e")]).unwrap();
    assert!(db.write(&batch).unwrap_err().is_timed_out());
    db.put(b"free", b"1").unwrap();
    a.commit().unwrap();
    db.put(b"k", b"plain").unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"plain"[..]));
}

/// A transaction's iterator shows the database's entities with their
/// columns, and its own writes as one default column.
#[test]
fn a_transaction_iterator_shows_columns() {
    let dir = tempfile::tempdir().unwrap();
    let db = pessimistic(dir.path());
    db.put_entity(b"e", &[(b"", b"base"), (b"attr", b"x")]).unwrap();
    let mut t = db.begin_transaction(&wo(), &TransactionOptions::default());
    t.put(b"own", b"mine").unwrap();
    let mut it = t.iter(ReadOptions::default());
    it.seek(b"e");
    assert_eq!(it.columns(), vec![ebb::WideColumn::new("", "base"), ebb::WideColumn::new("attr", "x")]);
    it.seek(b"own");
    assert_eq!(it.key(), b"own");
    assert_eq!(it.columns(), vec![ebb::WideColumn::new("", "mine")]);
    it.seek(b"zz");
    assert!(it.columns().is_empty());
}

#[test]
fn pessimistic_snapshot_validation_is_busy_for_a_key_written_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = pessimistic(dir.path());
    let mut t =
        db.begin_transaction(&wo(), &TransactionOptions { set_snapshot: true, ..TransactionOptions::default() });
    db.put(b"k", b"outside").unwrap();
    let e = t.get_for_update(b"k").unwrap_err();
    assert!(e.is_busy(), "{e}");
    assert_eq!(db.get_lock_status_data().len(), 0, "the lock taken for the failed validation is released");
    // set_snapshot_on_next_operation: the snapshot comes at the next write.
    let mut u = db.begin_transaction(&wo(), &TransactionOptions::default());
    u.set_snapshot_on_next_operation();
    db.put(b"j", b"before").unwrap();
    assert!(u.snapshot().is_none());
    u.put(b"j", b"mine").unwrap();
    assert!(u.snapshot().is_some());
    u.commit().unwrap();
    assert_eq!(db.get(b"j").unwrap().as_deref(), Some(&b"mine"[..]));
}

/// Transactions `0..n` each lock key `i`, then each asks for key `i + 1`
/// (the last for key 0): the last to ask closes the cycle and is told.
fn deadlock_cycle(n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let db = pessimistic(dir.path());
    let opts = TransactionOptions { deadlock_detect: true, lock_timeout: -1, ..TransactionOptions::default() };
    let opts = TransactionOptions { lock_timeout: 60_000, ..opts };
    let key = |i: usize| format!("key{i}").into_bytes();
    let mut txns: Vec<_> = (0..n).map(|_| db.begin_transaction(&wo(), &opts)).collect();
    for (i, t) in txns.iter_mut().enumerate() {
        t.put(&key(i), b"mine").unwrap();
    }
    let last = txns.pop().unwrap();
    let last_id = last.id();
    let ids: Vec<u64> = txns.iter().map(|t| t.id()).collect();
    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (i, mut t) in txns.into_iter().enumerate() {
            // Each commits as soon as it has its second key, releasing
            // both: the chain unwinds from the end the one told left.
            handles.push(s.spawn(move || t.put(&key(i + 1), b"next").and_then(|()| t.commit())));
        }
        wait_until("every other transaction waits", || prop(&db, "ebb.txn.lock-waits") as usize >= n - 1);
        let mut last = last;
        let e = last.put(&key(0), b"closing").unwrap_err();
        assert!(e.is_deadlock(), "{e}");
        assert!(e.is_busy(), "a deadlock is a kind of busy");
        let buffer = db.get_deadlock_info_buffer();
        assert_eq!(buffer.len(), 1);
        let path = &buffer[0].path;
        assert_eq!(path.len(), n, "{path:?}");
        // RocksDB's order: from the transaction the one told waits for,
        // round to the one told.
        assert_eq!(path[n - 1].txn_id, last_id);
        assert_eq!(path[n - 1].waiting_key, key(0));
        assert_eq!(path[0].waiting_key, key(1));
        let mut in_path: Vec<u64> = path.iter().map(|d| d.txn_id).collect();
        in_path.sort_unstable();
        let mut want = ids.clone();
        want.push(last_id);
        want.sort_unstable();
        assert_eq!(in_path, want);
        assert!(!buffer[0].limit_exceeded);
        // The one told rolls back; the cycle unwinds.
        last.rollback().unwrap();
        for h in handles {
            h.join().unwrap().unwrap();
        }
    });
    assert_eq!(prop(&db, "ebb.txn.deadlocks"), 1);
    assert_eq!(prop(&db, "ebb.txn.num-locks"), 0);
}

#[test]
fn deadlock_of_two_is_detected() {
    deadlock_cycle(2);
}

#[test]
fn deadlock_of_three_is_detected() {
    deadlock_cycle(3);
}

#[test]
fn an_expired_transaction_loses_its_locks_and_cannot_commit() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ebb::ManualClock::new(Duration::from_secs(1_700_000_000)));
    let mut o = options();
    o.clock = clock.clone();
    let db = TransactionDb::open(dir.path(), o, TransactionDbOptions::default()).unwrap();
    let mut a = db.begin_transaction(&wo(), &TransactionOptions { expiration: 100, ..TransactionOptions::default() });
    a.put(b"k", b"a").unwrap();
    let mut b = db.begin_transaction(&wo(), &no_wait());
    assert!(b.put(b"k", b"b").unwrap_err().is_timed_out(), "not expired yet");
    clock.advance(Duration::from_millis(150));
    b.put(b"k", b"b").unwrap();
    assert_eq!(prop(&db, "ebb.txn.locks-stolen"), 1);
    let e = a.commit().unwrap_err();
    assert!(e.is_expired(), "{e}");
    assert_eq!(a.state(), TransactionState::LocksStolen);
    b.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"b"[..]));
    // One that commits before it expires keeps what it wrote.
    let mut c = db.begin_transaction(&wo(), &TransactionOptions { expiration: 100, ..TransactionOptions::default() });
    c.put(b"k", b"c").unwrap();
    c.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"c"[..]));
}

// ---------------------------------------------------------------- column families

#[test]
fn one_commit_writes_several_column_families_atomically() {
    let dir = tempfile::tempdir().unwrap();
    let db = pessimistic(dir.path());
    let cf = db.create_column_family("accounts", ColumnFamilyOptions::default()).unwrap();
    let mut t = db.begin_transaction(&wo(), &TransactionOptions::default());
    t.put(b"k", b"default").unwrap();
    t.put_cf(&cf, b"k", b"accounts").unwrap();
    assert_eq!(t.get_cf(&cf, b"k").unwrap().as_deref(), Some(&b"accounts"[..]));
    assert_eq!(db.get_cf(&cf, b"k").unwrap(), None);
    t.commit().unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"default"[..]));
    assert_eq!(db.get_cf(&cf, b"k").unwrap().as_deref(), Some(&b"accounts"[..]));
    // The same key in two families is two locks.
    let mut a = db.begin_transaction(&wo(), &no_wait());
    let mut b = db.begin_transaction(&wo(), &no_wait());
    a.put(b"x", b"a").unwrap();
    b.put_cf(&cf, b"x", b"b").unwrap();
    a.commit().unwrap();
    b.commit().unwrap();
}

// ---------------------------------------------------------------- two-phase commit

fn named<'a>(db: &'a TransactionDb, name: &[u8]) -> ebb::Transaction<'a> {
    let mut t = db.begin_transaction(&common::SYNCED, &TransactionOptions::default());
    t.set_name(name).unwrap();
    t
}

#[test]
fn prepared_writes_are_invisible_until_commit_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = pessimistic(dir.path());
        let cf = db.create_column_family("cf", ColumnFamilyOptions::default()).unwrap();
        let mut t = named(&db, b"xid-1");
        t.put(b"a", b"1").unwrap();
        t.put_cf(&cf, b"b", b"2").unwrap();
        t.merge(b"m", b"op").unwrap();
        t.prepare().unwrap();
        assert_eq!(t.state(), TransactionState::Prepared);
        assert_eq!(db.get(b"a").unwrap(), None, "prepared, not committed");
        assert!(t.put(b"c", b"3").is_err(), "a prepared transaction takes only commit or rollback");
        assert_eq!(prop(&db, "ebb.txn.num-prepared"), 1);
        let mut u = named(&db, b"xid-2");
        u.put(b"z", b"9").unwrap();
        u.prepare().unwrap();
        u.commit().unwrap();
        assert_eq!(db.get(b"z").unwrap().as_deref(), Some(&b"9"[..]));
        // t is left prepared: dropped with the database, its locks released.
    }
    let db = pessimistic_with_cf(dir.path());
    let cf = db.cf_handle("cf").unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.get(b"z").unwrap().as_deref(), Some(&b"9"[..]));
    assert_eq!(db.prepared_transaction_names(), vec![b"xid-1".to_vec()]);
    // Its keys are locked again.
    let mut other = db.begin_transaction(&wo(), &no_wait());
    assert!(other.put(b"a", b"x").unwrap_err().is_timed_out());
    drop(other);
    let mut found = db.get_all_prepared_transactions();
    assert_eq!(found.len(), 1);
    let mut t = found.pop().unwrap();
    assert_eq!(t.name(), Some(&b"xid-1"[..]));
    assert_eq!(t.state(), TransactionState::Prepared);
    assert_eq!(t.get(b"a").unwrap().as_deref(), Some(&b"1"[..]), "its writes are in its batch");
    t.commit().unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get_cf(&cf, b"b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get(b"m").unwrap().as_deref(), Some(&b"op"[..]));
    assert_eq!(prop(&db, "ebb.txn.num-prepared"), 0);
    drop(t);
    drop(found);
    drop(cf);
    drop(db);
    let db = pessimistic_with_cf(dir.path());
    assert!(db.get_all_prepared_transactions().is_empty(), "committed once, not again");
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
}

#[test]
fn a_prepared_transaction_left_alone_stays_prepared_across_opens() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = pessimistic(dir.path());
        let mut t = named(&db, b"patient");
        t.put(b"a", b"1").unwrap();
        t.prepare().unwrap();
    }
    for open in 0..3 {
        let db = pessimistic(dir.path());
        assert_eq!(db.prepared_transaction_names(), vec![b"patient".to_vec()], "open {open}");
        assert_eq!(db.get(b"a").unwrap(), None);
        // Opens with writes and flushes between, and without.
        if open == 1 {
            db.put(format!("between{open}").as_bytes(), b"x").unwrap();
            db.flush(true).unwrap();
        }
    }
    let db = pessimistic(dir.path());
    let mut found = db.get_all_prepared_transactions();
    found[0].commit().unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
}

#[test]
fn a_prepared_transaction_rolled_back_after_reopen_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = pessimistic(dir.path());
        let mut t = named(&db, b"gone");
        t.put(b"a", b"1").unwrap();
        t.prepare().unwrap();
        let mut r = named(&db, b"rolled");
        r.put(b"r", b"1").unwrap();
        r.prepare().unwrap();
        r.rollback().unwrap();
    }
    let db = pessimistic(dir.path());
    let mut found = db.get_all_prepared_transactions();
    assert_eq!(found.len(), 1, "the one rolled back before the close is not found");
    found[0].rollback().unwrap();
    drop(found);
    drop(db);
    let db = pessimistic(dir.path());
    assert!(db.get_all_prepared_transactions().is_empty());
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.get(b"r").unwrap(), None);
}

#[test]
fn a_prepared_transaction_outlives_the_wal_it_was_prepared_in() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options();
    o.write_buffer_size = 64 << 10;
    {
        let db = TransactionDb::open(dir.path(), o.clone(), TransactionDbOptions::default()).unwrap();
        let mut t = named(&db, b"old");
        t.put(b"prepared-key", b"v").unwrap();
        t.prepare().unwrap();
        // Many memtable switches and flushes: the WAL that held the prepare
        // becomes obsolete and is deleted.
        for round in 0..6 {
            for i in 0..500 {
                db.put(format!("filler-{round}-{i:04}").as_bytes(), &[b'x'; 100]).unwrap();
            }
            db.flush(true).unwrap();
        }
        let wals = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".log"))
            .count();
        assert!(wals <= 2, "old WALs were deleted ({wals} left)");
        drop(t);
    }
    let db = TransactionDb::open(dir.path(), o, TransactionDbOptions::default()).unwrap();
    let mut found = db.get_all_prepared_transactions();
    assert_eq!(found.len(), 1);
    assert_eq!(db.get(b"prepared-key").unwrap(), None);
    found[0].commit().unwrap();
    assert_eq!(db.get(b"prepared-key").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(db.get(b"filler-5-0499").unwrap().as_deref(), Some(&[b'x'; 100][..]));
}

#[test]
fn a_plain_batch_cannot_carry_two_phase_markers() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = pessimistic(dir.path());
        let mut t = named(&db, b"n");
        t.put(b"a", b"1").unwrap();
        t.prepare().unwrap();
    }
    // The prepare record, read back from the WAL, written as a plain batch.
    let db = pessimistic(dir.path());
    let wal = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .unwrap();
    let bytes = std::fs::read(&wal).unwrap();
    // The first record's payload starts after the 7-byte record header.
    let len = u16::from_le_bytes([bytes[4], bytes[5]]) as usize;
    let batch = WriteBatch::from_data(&bytes[7..7 + len], "wal", 0).unwrap();
    let e = db.db().write(&batch).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(ref m) if m.contains("two-phase")), "{e}");
}

// ---------------------------------------------------------------- the bank

/// Threads move money between accounts in transactions; the total never
/// changes, and every transfer that committed is in the balances.
fn bank(pessimistic_db: bool, threads: usize, seed: u64) {
    const ACCOUNTS: usize = 8;
    const START: i64 = 1000;
    let dir = tempfile::tempdir().unwrap();
    let mut o = options();
    o.write_buffer_size = 16 << 10;
    enum Either {
        O(Box<OptimisticTransactionDb>),
        P(Box<TransactionDb>),
    }
    let db = if pessimistic_db {
        Either::P(Box::new(TransactionDb::open(dir.path(), o, TransactionDbOptions::default()).unwrap()))
    } else {
        Either::O(Box::new(
            OptimisticTransactionDb::open(dir.path(), o, OptimisticTransactionDbOptions::default()).unwrap(),
        ))
    };
    let base: &ebb::Db = match &db {
        Either::O(d) => d.db(),
        Either::P(d) => d.db(),
    };
    let account = |i: usize| format!("acct{i}").into_bytes();
    for i in 0..ACCOUNTS {
        base.put(&account(i), START.to_string().as_bytes()).unwrap();
    }
    let committed = AtomicUsize::new(0);
    let moved: Vec<std::sync::atomic::AtomicI64> =
        (0..ACCOUNTS).map(|_| std::sync::atomic::AtomicI64::new(0)).collect();
    std::thread::scope(|s| {
        for th in 0..threads {
            let (db, committed, moved) = (&db, &committed, &moved);
            s.spawn(move || {
                let mut rng = seed.wrapping_mul(6364136223846793005).wrapping_add(th as u64 * 1442695040888963407 + 1);
                let mut next = move || {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    rng
                };
                let mut done = 0;
                while done < 150 {
                    let from = (next() % ACCOUNTS as u64) as usize;
                    let to = (next() % ACCOUNTS as u64) as usize;
                    if from == to {
                        continue;
                    }
                    let amount = (next() % 50) as i64;
                    let mut t = match db {
                        Either::O(d) => d.begin_transaction(&wo(), &OptimisticTransactionOptions::default()),
                        Either::P(d) => d.begin_transaction(
                            &wo(),
                            &TransactionOptions { deadlock_detect: true, lock_timeout: 5000, ..Default::default() },
                        ),
                    };
                    let result = (|| -> ebb::Result<()> {
                        let a: i64 =
                            String::from_utf8(t.get_for_update(&account(from))?.unwrap()).unwrap().parse().unwrap();
                        let b: i64 =
                            String::from_utf8(t.get_for_update(&account(to))?.unwrap()).unwrap().parse().unwrap();
                        t.put(&account(from), (a - amount).to_string().as_bytes())?;
                        t.put(&account(to), (b + amount).to_string().as_bytes())?;
                        t.commit()
                    })();
                    match result {
                        Ok(()) => {
                            committed.fetch_add(1, Ordering::Relaxed);
                            moved[from].fetch_sub(amount, Ordering::Relaxed);
                            moved[to].fetch_add(amount, Ordering::Relaxed);
                        }
                        Err(e) if e.is_busy() || e.is_timed_out() || e.is_try_again() => {
                            if t.state() == TransactionState::Started {
                                t.rollback().unwrap();
                            }
                        }
                        Err(e) => panic!("unexpected error: {e}"),
                    }
                    done += 1;
                }
            });
        }
    });
    let mut total = 0;
    for (i, m) in moved.iter().enumerate() {
        let v: i64 = String::from_utf8(base.get(&account(i)).unwrap().unwrap()).unwrap().parse().unwrap();
        assert_eq!(v, START + m.load(Ordering::Relaxed), "account {i}: every committed transfer and only those");
        total += v;
    }
    assert_eq!(total, START * ACCOUNTS as i64, "money is neither made nor lost");
    assert!(committed.load(Ordering::Relaxed) > 0);
}

#[test]
fn bank_transfers_keep_the_total_under_optimistic_transactions() {
    let seeds: u64 = std::env::var("EBB_BANK_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    for seed in 0..seeds {
        bank(false, 4, seed);
    }
}

#[test]
fn bank_transfers_keep_the_total_under_pessimistic_transactions() {
    let seeds: u64 = std::env::var("EBB_BANK_SEEDS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    for seed in 0..seeds {
        bank(true, 4, seed);
    }
}
