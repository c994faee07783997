//! Small fixed workloads for the failure tests, and the [`Recorder`] they
//! write through, which keeps the [`History`] every recovery is checked
//! against.
//!
//! A workload opens the database itself (so failures during open and
//! recovery are covered too), and stops at the first error any call returns:
//! what it attempted until then is in the history, what it did not attempt is
//! not.

use std::sync::{Arc, Mutex};

use ebb::fs::MemFs;
use ebb::{Db, Error, Options, Result, WriteBatch, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{tiny_options, History};

/// Where every workload keeps its database.
pub const DB: &str = "/db";

/// A workload: runs against `r`, returning the first error met.
pub type Workload = fn(&mut Recorder) -> Result<()>;

/// Issues calls to a database and records their effect in a [`History`].
pub struct Recorder {
    /// The filesystem the database lives on.
    pub fs: MemFs,
    /// The options of every open; a workload may change them between opens.
    pub options: Options,
    /// Every write attempted, and what the engine promised about them.
    pub history: History,
    /// After a write or flush fails, check that the failure is sticky: a
    /// later write must fail with `Error::Background` too.
    pub check_sticky: bool,
    /// Wait for background work before closing, so a failure in a flush or
    /// compaction started by the last writes surfaces instead of being left
    /// behind by the close.
    pub settle_before_close: bool,
    /// Injected faults that fired while `close` ran (close may retry a
    /// failed background flush itself and succeed).
    pub faults_during_close: u64,
    /// Called after every call that returned `Ok`, with the number of such
    /// calls so far (the crash tests pull the plug from here).
    pub after_step: Option<Box<dyn FnMut(usize)>>,
    /// The call that returned the first error, and the error.
    pub first_error: Option<(&'static str, Error)>,
    /// When set, a copy of `history` is kept here before every write is
    /// issued and after every call returns, for a test that may have to
    /// abandon the workload's thread (the kill point tests).
    pub published: Option<Arc<Mutex<History>>>,
    steps: usize,
}

impl Recorder {
    /// A recorder for a database on `fs` opened with `tiny_options`.
    pub fn new(fs: MemFs) -> Self {
        let options = tiny_options(Some(fs.clone()));
        Recorder {
            fs,
            options,
            history: History::default(),
            check_sticky: false,
            settle_before_close: false,
            faults_during_close: 0,
            after_step: None,
            first_error: None,
            published: None,
            steps: 0,
        }
    }

    fn publish(&self) {
        if let Some(p) = &self.published {
            *p.lock().unwrap_or_else(|e| e.into_inner()) = self.history.clone();
        }
    }

    fn done<T>(&mut self, call: &'static str, r: Result<T>) -> Result<T> {
        self.publish();
        match &r {
            Ok(_) => {
                self.steps += 1;
                if let Some(hook) = self.after_step.as_mut() {
                    hook(self.steps);
                }
            }
            Err(e) => {
                if self.first_error.is_none() {
                    self.first_error = Some((call, e.duplicate()));
                }
            }
        }
        r
    }

    /// A write or flush failed with `e`: the failure must be sticky.
    fn check_failure_is_sticky(&self, db: &Db, call: &str, e: &Error) {
        if !self.check_sticky {
            return;
        }
        assert!(matches!(e, Error::Background(_)), "{call} failed with a non-sticky error: {e:?}");
        let probe = super::put_late(db, b"~probe", b"", &WriteOptions::default());
        assert!(
            matches!(probe, Err(Error::Background(_))),
            "after {call} failed ({e}), a later write must fail with the background error: {probe:?}"
        );
    }

    /// Opens the database with `self.options`.
    pub fn open(&mut self) -> Result<Db> {
        let r = Db::open(DB, self.options.clone());
        self.done("open", r)
    }

    fn write(&mut self, db: &Db, call: &'static str, batch: &WriteBatch, wo: WriteOptions) -> Result<()> {
        self.publish();
        let r = db.write_opt(batch, &wo);
        match &r {
            Ok(()) => {
                if wo.disable_wal {
                    self.history.acknowledged_unlogged();
                } else {
                    self.history.acknowledged();
                }
                if wo.sync {
                    self.history.made_durable();
                }
            }
            Err(e) => self.check_failure_is_sticky(db, call, e),
        }
        self.done(call, r)
    }

    /// Puts `key`, with or without a WAL sync.
    pub fn put(&mut self, db: &Db, key: &[u8], value: &[u8], sync: bool) -> Result<()> {
        self.history.attempt(|m| {
            m.insert(key.to_vec(), value.to_vec());
        });
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(db, "put", &b, WriteOptions { sync, disable_wal: false })
    }

    /// Puts `key` without the WAL: durable only once flushed.
    pub fn put_unlogged(&mut self, db: &Db, key: &[u8], value: &[u8]) -> Result<()> {
        self.history.attempt(|m| {
            m.insert(key.to_vec(), value.to_vec());
        });
        let mut b = WriteBatch::new();
        b.put(key, value);
        self.write(db, "put without WAL", &b, WriteOptions { sync: false, disable_wal: true })
    }

    /// Deletes `key`.
    pub fn delete(&mut self, db: &Db, key: &[u8], sync: bool) -> Result<()> {
        self.history.attempt(|m| {
            m.remove(key);
        });
        let mut b = WriteBatch::new();
        b.delete(key);
        self.write(db, "delete", &b, WriteOptions { sync, disable_wal: false })
    }

    /// Single-deletes `key` (which the workload put once since its last
    /// single delete: the operation's contract).
    pub fn single_delete(&mut self, db: &Db, key: &[u8], sync: bool) -> Result<()> {
        self.history.attempt(|m| {
            m.remove(key);
        });
        let mut b = WriteBatch::new();
        b.single_delete(key);
        self.write(db, "single delete", &b, WriteOptions { sync, disable_wal: false })
    }

    /// Deletes the keys in `[begin, end)`.
    pub fn delete_range(&mut self, db: &Db, begin: &[u8], end: &[u8], sync: bool) -> Result<()> {
        self.history.attempt(|m| {
            let doomed: Vec<Vec<u8>> = m.range(begin.to_vec()..end.to_vec()).map(|(k, _)| k.clone()).collect();
            for k in doomed {
                m.remove(&k);
            }
        });
        let mut b = WriteBatch::new();
        b.delete_range(begin, end);
        self.write(db, "delete_range", &b, WriteOptions { sync, disable_wal: false })
    }

    /// Puts `key` as an entity of `columns` (names unique), with or without
    /// a WAL sync; the model holds it as [`super::shown_columns`] does.
    pub fn put_entity(&mut self, db: &Db, key: &[u8], columns: &[(&[u8], &[u8])], sync: bool) -> Result<()> {
        let mut cols: Vec<ebb::WideColumn> = columns.iter().map(|(n, v)| ebb::WideColumn::new(*n, *v)).collect();
        cols.sort();
        self.history.attempt(|m| {
            m.insert(key.to_vec(), super::shown_columns(&cols));
        });
        let mut b = WriteBatch::new();
        b.put_entity(key, columns)?;
        self.write(db, "put_entity", &b, WriteOptions { sync, disable_wal: false })
    }

    /// Merges `operand` into `key` (the workload set a `stringappend`
    /// merge operator: the model appends with a comma; over an entity, to
    /// its default column, an empty one when it has none).
    pub fn merge(&mut self, db: &Db, key: &[u8], operand: &[u8], sync: bool) -> Result<()> {
        self.history.attempt(|m| {
            let merged = match m.get(key) {
                Some(v) if v.starts_with(super::ENTITY_MARK) => {
                    let mut cols = ebb::wide_columns::decode_entity(&v[super::ENTITY_MARK.len()..]).unwrap();
                    match cols.first_mut() {
                        Some(c) if c.name.is_empty() => c.value = [c.value.as_slice(), b",", operand].concat(),
                        _ => cols.insert(0, ebb::WideColumn::new("", [b",", operand].concat())),
                    }
                    super::shown_columns(&cols)
                }
                Some(v) => [v.as_slice(), b",", operand].concat(),
                None => operand.to_vec(),
            };
            m.insert(key.to_vec(), merged);
        });
        let mut b = WriteBatch::new();
        b.merge(key, operand);
        self.write(db, "merge", &b, WriteOptions { sync, disable_wal: false })
    }

    /// Writes `op` of `key` at timestamp `ts` in the default family, whose
    /// comparator has timestamps: a put (`Some(value)`), a delete (`None`)
    /// or, with `merge`, a merge operand. The workload's timestamps only
    /// grow, so the latest state is the model's as for plain writes.
    pub fn stamped(&mut self, db: &Db, key: &[u8], ts: u64, op: Option<&[u8]>, merge: bool, sync: bool) -> Result<()> {
        let cf = db.cf_handle("default").expect("the default family");
        let mut b = WriteBatch::new();
        self.history.attempt(|m| match op {
            Some(v) if merge => {
                let merged = match m.get(key) {
                    Some(old) => [old.as_slice(), b",", v].concat(),
                    None => v.to_vec(),
                };
                m.insert(key.to_vec(), merged);
                b.merge_with_ts(&cf, key, ts, v);
            }
            Some(v) => {
                m.insert(key.to_vec(), v.to_vec());
                b.put_with_ts(&cf, key, ts, v);
            }
            None => {
                m.remove(key);
                b.delete_with_ts(&cf, key, ts);
            }
        });
        self.write(db, "write with a timestamp", &b, WriteOptions { sync, disable_wal: false })
    }

    /// Raises the default family's full_history_ts_low to `ts`.
    pub fn raise_history_low(&mut self, db: &Db, ts: u64) -> Result<()> {
        let cf = db.cf_handle("default").expect("the default family");
        let r = db.increase_full_history_ts_low(&cf, ts);
        self.done("increase_full_history_ts_low", r)
    }

    /// Writes a batch of puts (`Some(value)`) and deletes (`None`) atomically.
    pub fn batch(&mut self, db: &Db, ops: &[(Vec<u8>, Option<Vec<u8>>)], sync: bool) -> Result<()> {
        let mut b = WriteBatch::new();
        self.history.attempt(|m| {
            for (k, v) in ops {
                match v {
                    Some(v) => {
                        b.put(k, v);
                        m.insert(k.clone(), v.clone());
                    }
                    None => {
                        b.delete(k);
                        m.remove(k);
                    }
                }
            }
        });
        self.write(db, "batch", &b, WriteOptions { sync, disable_wal: false })
    }

    /// Reads `key`; the columns returned must be the model's.
    pub fn get(&mut self, db: &Db, key: &[u8]) -> Result<()> {
        let r = db.get_entity_opt(key, &super::latest(db, ebb::ReadOptions::default()));
        if let Ok(v) = &r {
            let got = v.as_deref().map(super::shown_columns);
            assert_eq!(got.as_ref(), self.history.latest().get(key), "get {} is wrong", String::from_utf8_lossy(key));
        }
        self.done("get", r.map(|_| ()))
    }

    /// Flushes and waits: everything acknowledged so far becomes durable.
    pub fn flush(&mut self, db: &Db) -> Result<()> {
        let r = db.flush(true);
        match &r {
            Ok(()) => self.history.made_durable(),
            Err(e) => self.check_failure_is_sticky(db, "flush", e),
        }
        self.done("flush", r)
    }

    /// Compacts everything down.
    pub fn compact(&mut self, db: &Db) -> Result<()> {
        let r = db.compact_range(None, None);
        self.done("compact_range", r)
    }

    /// Waits for background work; a background error surfaces here.
    pub fn wait_for_compact(&mut self, db: &Db) -> Result<()> {
        let r = db.wait_for_compact();
        self.done("wait_for_compact", r)
    }

    /// Closes: everything acknowledged so far becomes durable.
    pub fn close(&mut self, db: Db) -> Result<()> {
        if self.settle_before_close {
            self.wait_for_compact(&db)?;
        }
        let before = self.fs.faults_injected();
        let r = db.close();
        self.faults_during_close += self.fs.faults_injected() - before;
        if r.is_ok() {
            self.history.made_durable();
        }
        self.done("close", r)
    }
}

/// `k000`...: short keys, so many fit in the tiny memtables.
pub fn key(i: usize) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

/// A value that names its write, `len` bytes or a little more.
pub fn value(i: usize, len: usize) -> Vec<u8> {
    let mut v = format!("v{i}.").into_bytes();
    while v.len() < len {
        v.extend_from_slice(b"abcdefghij");
    }
    v
}

/// Puts, every third one synced, overwriting 25 keys; the 8 KiB memtable
/// fills every ~20 puts, so WALs are switched and flushed as it goes.
pub fn synced_puts(r: &mut Recorder) -> Result<()> {
    let db = r.open()?;
    for i in 0..60 {
        r.put(&db, &key(i % 25), &value(i, 300), i % 3 == 0)?;
    }
    r.close(db)
}

/// Random puts, deletes and batches over 30 keys, one in five synced, with
/// reads checked along the way.
pub fn puts_and_deletes(r: &mut Recorder) -> Result<()> {
    let mut rng = StdRng::seed_from_u64(7);
    let db = r.open()?;
    for i in 0..120 {
        let sync = rng.gen_bool(0.2);
        let k = key(rng.gen_range(0..30));
        match rng.gen_range(0..10) {
            0..=5 => r.put(&db, &k, &value(i, rng.gen_range(10..200)), sync)?,
            6..=7 => r.delete(&db, &k, sync)?,
            8 => {
                let ops: Vec<_> = (0..3)
                    .map(|j| {
                        let k = key(rng.gen_range(0..30));
                        (k, rng.gen_bool(0.7).then(|| value(i * 10 + j, 50)))
                    })
                    .collect();
                r.batch(&db, &ops, sync)?;
            }
            _ => r.get(&db, &k)?,
        }
    }
    r.close(db)
}

/// Keys put and single deleted in turn (single delete's contract: one put
/// since the last single delete), one write in four synced, through the
/// tiny memtables' flushes and the compactions they start, then a full
/// compaction: single deletes meet their puts in flushes, in L0 and deeper,
/// and some stay above the put of an earlier round.
pub fn single_deletes(r: &mut Recorder) -> Result<()> {
    let mut rng = StdRng::seed_from_u64(11);
    let db = r.open()?;
    let mut present = [false; 20];
    for i in 0..160 {
        let k = rng.gen_range(0..present.len());
        let sync = i % 4 == 3;
        if present[k] {
            r.single_delete(&db, &key(k), sync)?;
        } else {
            r.put(&db, &key(k), &value(i, 150), sync)?;
        }
        present[k] = !present[k];
        if i % 40 == 39 {
            r.get(&db, &key(k))?;
        }
    }
    r.compact(&db)?;
    r.close(db)
}

/// Unsynced puts made durable by explicit flushes; the memtable is large, so
/// only the flushes write tables.
pub fn puts_then_flush(r: &mut Recorder) -> Result<()> {
    r.options.write_buffer_size = 1 << 20;
    let db = r.open()?;
    for round in 0..3 {
        for i in 0..25 {
            r.put(&db, &key(round * 25 + i), &value(round * 100 + i, 100), false)?;
        }
        r.flush(&db)?;
    }
    r.close(db)
}

/// Enough overwrites to flush many times and compact into deeper levels,
/// then a full manual compaction.
pub fn compactions(r: &mut Recorder) -> Result<()> {
    let db = r.open()?;
    for i in 0..400 {
        r.put(&db, &key(i * 7 % 150), &value(i, 120), i % 50 == 49)?;
    }
    r.wait_for_compact(&db)?;
    r.get(&db, &key(0))?;
    r.compact(&db)?;
    r.close(db)
}

/// Merges (`stringappend`) over puts, deletes and nothing, one write in
/// five synced, through flushes and the compactions they start (operands
/// combined over their values, partially, and at the bottom), then a full
/// compaction.
pub fn merges(r: &mut Recorder) -> Result<()> {
    r.options.merge_operator = Some(ebb::merge_operator::from_name("stringappend")?);
    let db = r.open()?;
    let mut rng = StdRng::seed_from_u64(23);
    for i in 0..300 {
        let k = key(rng.gen_range(0..40));
        let sync = i % 5 == 4;
        match rng.gen_range(0..10) {
            0..=5 => r.merge(&db, &k, format!("m{i}").as_bytes(), sync)?,
            6..=8 => r.put(&db, &k, &value(i, 60), sync)?,
            _ => r.delete(&db, &k, sync)?,
        }
    }
    r.wait_for_compact(&db)?;
    r.get(&db, &key(3))?;
    r.compact(&db)?;
    r.close(db)
}

/// Wide-column entities (some without a default column) among puts,
/// merges over both and deletes, one write in four synced, through flushes
/// and the compactions they start, then a full compaction.
pub fn entities(r: &mut Recorder) -> Result<()> {
    r.options.merge_operator = Some(ebb::merge_operator::from_name("stringappend")?);
    let db = r.open()?;
    let mut rng = StdRng::seed_from_u64(29);
    for i in 0..300 {
        let k = key(rng.gen_range(0..40));
        let sync = i % 4 == 3;
        match rng.gen_range(0..10) {
            0..=3 => {
                let v = value(i, rng.gen_range(10..120));
                let (a, b) = (format!("a{i}"), format!("b{}", i % 7));
                let columns: Vec<(&[u8], &[u8])> = match i % 3 {
                    0 => vec![(b"", &v), (b"attr", a.as_bytes())],
                    1 => vec![(b"x", b.as_bytes()), (b"attr", &v)],
                    _ => vec![(b"", &v)],
                };
                r.put_entity(&db, &k, &columns, sync)?
            }
            4..=5 => r.merge(&db, &k, format!("m{i}").as_bytes(), sync)?,
            6..=7 => r.put(&db, &k, &value(i, 60), sync)?,
            8 => r.delete(&db, &k, sync)?,
            _ => r.get(&db, &k)?,
        }
    }
    r.wait_for_compact(&db)?;
    r.compact(&db)?;
    r.close(db)
}

/// Keys with timestamps (the default family's comparator is
/// `bytewise_with_u64_ts`): puts, deletes and merges at growing
/// timestamps, one write in four synced, full_history_ts_low raised as they
/// go (its MANIFEST records, and compactions collecting history below it),
/// through flushes and the compactions they start, then a full compaction.
pub fn timestamps(r: &mut Recorder) -> Result<()> {
    r.options.merge_operator = Some(ebb::merge_operator::from_name("stringappend")?);
    r.options.comparator = Some(ebb::comparator::bytewise_with_u64_ts());
    // Blob files do not take keys with timestamps (yet): run without them
    // even where the test asks for them.
    r.options.enable_blob_files = false;
    let db = r.open()?;
    let mut rng = StdRng::seed_from_u64(31);
    for i in 0..300u64 {
        let k = key(rng.gen_range(0..40));
        let sync = i % 4 == 3;
        let ts = 10 + i;
        match rng.gen_range(0..12) {
            0..=5 => r.stamped(&db, &k, ts, Some(&value(i as usize, 60)), false, sync)?,
            6..=7 => r.stamped(&db, &k, ts, Some(format!("m{i}").as_bytes()), true, sync)?,
            8..=9 => r.stamped(&db, &k, ts, None, false, sync)?,
            10 => r.raise_history_low(&db, ts - 5)?,
            _ => r.get(&db, &k)?,
        }
    }
    r.wait_for_compact(&db)?;
    r.compact(&db)?;
    r.close(db)
}

/// Range deletions among puts, one write in four synced, through flushes
/// and the compactions they start (tombstones cut at output files, dropped
/// at the bottom with what they delete), then a full compaction.
pub fn range_deletions(r: &mut Recorder) -> Result<()> {
    let db = r.open()?;
    let mut rng = StdRng::seed_from_u64(29);
    for i in 0..300 {
        let sync = i % 4 == 3;
        if rng.gen_range(0..8) == 0 {
            let a = rng.gen_range(0..100);
            let b = a + rng.gen_range(0..25);
            r.delete_range(&db, &key(a), &key(b), sync)?;
        } else {
            r.put(&db, &key(rng.gen_range(0..100)), &value(i, 80), sync)?;
        }
    }
    r.wait_for_compact(&db)?;
    r.get(&db, &key(7))?;
    r.compact(&db)?;
    r.close(db)
}

/// Many small flushes with a tiny `max_manifest_file_size`, so the MANIFEST
/// is rolled (new file, CURRENT switched) several times.
pub fn manifest_rolls(r: &mut Recorder) -> Result<()> {
    r.options.write_buffer_size = 1 << 20;
    r.options.max_manifest_file_size = 400;
    let db = r.open()?;
    for round in 0..10 {
        for i in 0..6 {
            r.put(&db, &key(round * 6 + i), &value(round, 40), false)?;
        }
        r.flush(&db)?;
    }
    r.close(db)
}

/// Writes without the WAL, some filling memtables that are flushed, then a
/// close, which must flush the rest.
pub fn unlogged_then_close(r: &mut Recorder) -> Result<()> {
    let db = r.open()?;
    for i in 0..90 {
        r.put_unlogged(&db, &key(i % 60), &value(i, 200))?;
    }
    r.close(db)
}

/// Writes that only a WAL holds, then a reopen with memtables so small that
/// recovery flushes them into several tables, then more writes.
pub fn recovery_into_many_tables(r: &mut Recorder) -> Result<()> {
    r.options.write_buffer_size = 1 << 20;
    let db = r.open()?;
    for i in 0..60 {
        r.put(&db, &key(i), &value(i, 200), i % 20 == 19)?;
    }
    r.close(db)?;
    r.options.write_buffer_size = 4096;
    let db = r.open()?;
    for i in 0..20 {
        r.put(&db, &key(i * 3), &value(1000 + i, 100), i == 19)?;
    }
    r.close(db)
}

/// A change to the options every open of a workload uses.
pub type Configure = fn(&mut Options);

/// The options as [`Recorder::new`] sets them.
pub fn as_is(_: &mut Options) {}

/// Runs a workload with blob files: values of at least 100 bytes (all of
/// most workloads' values, some of `puts_and_deletes`') go to blob files of
/// at most 4 KiB, and compactions collect garbage, forced early, so flushes
/// and compactions write, relocate and delete blob files as they go.
pub fn blob_files(o: &mut Options) {
    o.enable_blob_files = true;
    o.min_blob_size = 100;
    o.blob_file_size = 4096;
    o.enable_blob_garbage_collection = true;
    o.blob_garbage_collection_age_cutoff = 0.5;
    o.blob_garbage_collection_force_threshold = 0.25;
}

/// Runs a workload with its keys in the reverse bytewise order (RocksDB's
/// `ReverseBytewiseComparator`): the comparator's name is in the MANIFEST
/// from creation and in every snapshot a roll writes. For workloads whose
/// model does not depend on the order (no range deletions).
pub fn reverse_order(o: &mut Options) {
    o.comparator = Some(ebb::comparator::reverse_bytewise());
}

/// Every workload, by name.
pub fn all() -> Vec<(&'static str, Workload)> {
    vec![
        ("synced puts", synced_puts as Workload),
        ("puts and deletes", puts_and_deletes),
        ("puts then flush", puts_then_flush),
        ("compactions", compactions),
        ("manifest rolls", manifest_rolls),
        ("unlogged writes then close", unlogged_then_close),
        ("recovery into many tables", recovery_into_many_tables),
        ("single deletes", single_deletes),
        ("merges", merges),
        ("range deletions", range_deletions),
        ("entities", entities),
        ("timestamps", timestamps),
    ]
}

/// Reopens the database after a crash with `options`, checks the state
/// against `history` (a prefix no earlier than what was promised), then that
/// it is durable and writable: a synced write, a close, and a second reopen
/// that keeps both. `detail` is appended to failure messages.
pub fn recover_and_verify(options: Options, history: &super::History, detail: &str, ctx: &str, garbage_tail: bool) {
    let (db, _) = super::open_after_power_loss(DB, &options, garbage_tail)
        .unwrap_or_else(|e| panic!("{ctx}: reopen: {e}{detail}"));
    let got = super::try_scan(&db, ebb::ReadOptions::default()).unwrap_or_else(|e| panic!("{ctx}: scan: {e}"));
    if let Err(e) = history.check_after_crash(&got) {
        panic!("{ctx}: {e}{detail}");
    }
    super::put_late(&db, b"~after", b"1", &WriteOptions { sync: true, disable_wal: false })
        .unwrap_or_else(|e| panic!("{ctx}: write after recovery: {e}"));
    db.close().unwrap_or_else(|e| panic!("{ctx}: close after recovery: {e}"));
    let db = Db::open(DB, options).unwrap_or_else(|e| panic!("{ctx}: second reopen: {e}"));
    let mut want = got;
    want.insert(b"~after".to_vec(), b"1".to_vec());
    let again = super::try_scan(&db, ebb::ReadOptions::default()).unwrap_or_else(|e| panic!("{ctx}: second scan: {e}"));
    assert!(again == want, "{ctx}: the second reopen lost the recovered state or the write after it");
}
