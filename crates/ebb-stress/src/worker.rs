//! The worker: verifies the database against the expected state, then runs
//! threads of random operations until it is killed, its time is up or a
//! check fails.
//!
//! Each thread owns the keys whose index is its number modulo the thread
//! count and is their only writer, so for its own keys the expected state is
//! exact; keys of other threads are checked against the range of states they
//! may be in while their owner writes (committed before the read, pending
//! after it).
//!
//! The keys are spread over `--column-families` families (RocksDB db_stress's
//! `column_families`), eight consecutive keys to a family in turn
//! ([`family_of`]), so batches, multi-gets and snapshots span families that
//! share one WAL, and each family flushes and compacts on its own. Families
//! missing at a start (the first, or one killed while creating them) are
//! created before any write.
//!
//! Output, one line each on stdout, read by the driver:
//! `verified keys=.. committed=.. pending_applied=.. pending_lost=.. lost=.. wrong=..`,
//! then `progress ops=..` every 200 ms, then `done ops=..` on a clean exit.
//! Failures go to stderr, and the exit code says what failed ([`Exit`]).

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ebb::{ColumnFamilyHandle, Db, Options, ReadOptions, WriteBatch, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::expected::{ExpectedState, Slot};
use crate::values::{key, key_index, value, value_id};

/// Exit codes of a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Verified, ran, closed.
    Ok = 0,
    /// Bad arguments, or the expected-state file could not be used.
    Usage = 1,
    /// A key held a value it may not hold (a lost write or a wrong value).
    Verification = 2,
    /// The database returned an error (none is injected, so none is expected).
    Engine = 3,
}

/// What a worker run does.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The database directory.
    pub db: PathBuf,
    /// The expected-state file.
    pub expected: PathBuf,
    /// Threads of operations.
    pub threads: u64,
    /// Size of the key space.
    pub keys: u64,
    /// Column families the keys are spread over (at least 1, the default).
    pub column_families: u64,
    /// Seeds every thread's choices.
    pub seed: u64,
    /// Fraction of writes made with `sync=true`.
    pub sync_ratio: f64,
    /// Options as `name=value` pairs separated by `;`, over [`stress_options`].
    pub options: String,
    /// Stop after this long (`None`: run until killed).
    pub duration: Option<Duration>,
    /// Verify, close and exit.
    pub verify_only: bool,
}

/// The options every run starts from: small memtables and files, so
/// flushes and compactions happen every few seconds of writes.
pub fn stress_options() -> Options {
    let mut o = Options::default();
    o.create_if_missing = true;
    o.write_buffer_size = 256 << 10;
    o.target_file_size_base = 256 << 10;
    o.max_bytes_for_level_base = 1 << 20;
    o.level0_file_num_compaction_trigger = 4;
    o.block_cache_size = 1 << 20;
    o.max_background_jobs = 4;
    o
}

/// The options of a run: [`stress_options`] with `text` applied.
pub fn options_from(text: &str) -> Result<Options, String> {
    let mut o = stress_options();
    o.apply_text(&text.replace(';', "\n")).map_err(|e| e.to_string())?;
    o.validate().map_err(|e| e.to_string())?;
    Ok(o)
}

/// The family of key `i` among `families`: eight consecutive keys to a
/// family in turn, so that every thread's keys fall in every family.
pub fn family_of(i: u64, families: u64) -> usize {
    ((i / 8) % families.max(1)) as usize
}

/// The name of family `f` (0 is the default family).
fn family_name(f: usize) -> String {
    if f == 0 {
        "default".to_string()
    } else {
        format!("cf{f}")
    }
}

/// The families the database at `cfg.db` has (the default alone when there
/// is none yet). A family beyond the first `column_families` is a usage
/// error: the keys' families would not match the expected state. Checked
/// before the expected-state file is made and before anything is created.
fn existing_families(cfg: &WorkerConfig, options: &Options) -> Result<Vec<String>, (Exit, String)> {
    let count = cfg.column_families.max(1) as usize;
    let existing = if cfg.db.join("CURRENT").exists() {
        Db::list_column_families(&cfg.db, options).map_err(|e| (Exit::Engine, format!("list column families: {e}")))?
    } else {
        vec!["default".to_string()]
    };
    if let Some(extra) = existing.iter().find(|n| !(0..count).any(|f| family_name(f) == **n)) {
        let msg = format!("the database has column family {extra:?}, not one of the {count} this run uses");
        return Err((Exit::Usage, msg));
    }
    Ok(existing)
}

/// Opens the database with the families it has (`existing`), and creates
/// those of the first `column_families` it lacks. Returns the handles of
/// the first `column_families`, in order.
fn open_families(
    cfg: &WorkerConfig,
    options: &Options,
    existing: &[String],
) -> Result<(Db, Vec<ColumnFamilyHandle>), String> {
    let wanted: Vec<String> = (0..cfg.column_families.max(1) as usize).map(family_name).collect();
    let listed: Vec<(&str, Options)> =
        existing.iter().filter(|n| *n != "default").map(|n| (n.as_str(), options.clone())).collect();
    let db = Db::open_cf(&cfg.db, options.clone(), &listed).map_err(|e| format!("open {}: {e}", cfg.db.display()))?;
    let mut handles = Vec::with_capacity(wanted.len());
    for name in &wanted {
        let h = match db.cf_handle(name) {
            Some(h) => h,
            None => db.create_column_family(name, options).map_err(|e| format!("create column family {name}: {e}"))?,
        };
        handles.push(h);
    }
    Ok((db, handles))
}

/// Runs a worker; returns its exit code.
pub fn run(cfg: &WorkerConfig) -> Exit {
    let options = match options_from(&cfg.options) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("ebb-stress: options: {e}");
            return Exit::Usage;
        }
    };
    let existing = match existing_families(cfg, &options) {
        Ok(names) => names,
        Err((exit, e)) => {
            eprintln!("ebb-stress: {e}");
            return exit;
        }
    };
    let expected = match ExpectedState::open(&cfg.expected, cfg.keys, cfg.column_families.max(1)) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("ebb-stress: expected state: {e}");
            return Exit::Usage;
        }
    };
    let (db, cfs) = match open_families(cfg, &options, &existing) {
        Ok(opened) => opened,
        Err(e) => {
            eprintln!("ebb-stress: {e}");
            return Exit::Engine;
        }
    };
    let report = match verify(&db, &cfs, &expected) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ebb-stress: verification could not finish: {e}");
            return Exit::Engine;
        }
    };
    say(&format!(
        "verified keys={} committed={} pending_applied={} pending_lost={} lost={} wrong={}",
        expected.keys(),
        report.committed,
        report.pending_applied,
        report.pending_lost,
        report.lost,
        report.wrong
    ));
    if !report.failures.is_empty() {
        for f in &report.failures {
            eprintln!("ebb-stress: {f}");
        }
        return Exit::Verification;
    }
    if cfg.verify_only {
        drop(cfs);
        return close(db);
    }
    let shared = Shared {
        db: &db,
        cfs: &cfs,
        expected: &expected,
        threads: cfg.threads.max(1),
        sync_ratio: cfg.sync_ratio,
        stop: AtomicBool::new(false),
        ops: AtomicU64::new(0),
        failure: Mutex::new(None),
    };
    if let Err(e) = expected.record_threads(shared.threads) {
        eprintln!("ebb-stress: expected state: {e}");
        return Exit::Usage;
    }
    let earlier_ops = expected.recorded_ops().unwrap_or(0);
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..shared.threads {
            let shared = &shared;
            let seed = cfg.seed ^ (t + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            s.spawn(move || shared.thread(t, seed));
        }
        while !shared.stop.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(200));
            let ops = shared.ops.load(Ordering::Relaxed);
            say(&format!("progress ops={ops}"));
            let _ = expected.record_ops(earlier_ops + ops);
            if cfg.duration.is_some_and(|d| start.elapsed() >= d) {
                shared.stop.store(true, Ordering::Release);
            }
        }
    });
    let ops = shared.ops.load(Ordering::Relaxed);
    let _ = expected.record_ops(earlier_ops + ops);
    let failure = shared.failure.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some((exit, message)) = failure {
        eprintln!("ebb-stress: {message}");
        return exit;
    }
    drop(cfs);
    let exit = close(db);
    if exit == Exit::Ok {
        say(&format!("done ops={ops}"));
    }
    exit
}

fn close(db: Db) -> Exit {
    match db.close() {
        Ok(()) => Exit::Ok,
        Err(e) => {
            eprintln!("ebb-stress: close: {e}");
            Exit::Engine
        }
    }
}

/// Prints a line for the driver, flushed at once (a kill may follow).
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// What verification found.
#[derive(Debug, Default)]
struct Report {
    /// Keys in their committed state, no write in flight.
    committed: u64,
    /// Keys whose in-flight write had reached the database.
    pending_applied: u64,
    /// Keys whose in-flight write had not (it was never acknowledged).
    pending_lost: u64,
    /// Keys found in a state older than their committed one.
    lost: u64,
    /// Keys found holding something never written to them.
    wrong: u64,
    failures: Vec<String>,
}

/// The state a read found: a value id, or `None` for absent.
fn found_state(i: u64, v: Option<&[u8]>) -> Result<Option<u64>, String> {
    v.map(|v| value_id(i, v)).transpose()
}

fn holds(s: Slot, found: Option<u64>) -> bool {
    if s.present() {
        found == Some(s.id())
    } else {
        found.is_none()
    }
}

fn show(found: Option<u64>) -> String {
    found.map_or_else(|| "absent".to_string(), |id| format!("value {id}"))
}

/// Checks every key, by a full scan of every family and by point reads,
/// against its committed and pending states, and settles each key on what
/// was found.
fn verify(db: &Db, cfs: &[ColumnFamilyHandle], expected: &ExpectedState) -> ebb::Result<Report> {
    let mut report = Report::default();
    fn fail(report: &mut Report, wrong: bool, msg: String) {
        if wrong {
            report.wrong += 1;
        } else {
            report.lost += 1;
        }
        if report.failures.len() < 20 {
            report.failures.push(msg);
        }
    }
    let families = cfs.len() as u64;
    // The keys in flight, by owning thread of the run that wrote them: as
    // each thread has one write in flight at a time, each thread's are all
    // of one write (a batch, maybe across families), and a write is atomic:
    // all of them applied or none (keys whose old and new states read
    // alike, a delete of an absent key, say nothing and are left out).
    let writers = expected.recorded_threads().map_err(|e| ebb::Error::io("read expected state", "expected", e))?;
    let mut in_flight: std::collections::BTreeMap<u64, (Vec<u64>, Vec<u64>)> = Default::default();
    let mut to_settle: Vec<(u64, Slot)> = Vec::new();
    let mut scanned: Vec<Option<u64>> = vec![None; expected.keys() as usize];
    for (f, cf) in cfs.iter().enumerate() {
        let mut it = db.iter_cf(cf, ReadOptions::default());
        it.seek_to_first();
        while it.valid() {
            let k = it.key();
            match key_index(k).filter(|i| *i < expected.keys()) {
                None => fail(
                    &mut report,
                    true,
                    format!("scan of {} found a key never written: {:?}", family_name(f), String::from_utf8_lossy(k)),
                ),
                Some(i) if family_of(i, families) != f => fail(
                    &mut report,
                    true,
                    format!("scan of {} found key {i}, written to another family", family_name(f)),
                ),
                Some(i) => match value_id(i, it.value()) {
                    Ok(id) => scanned[i as usize] = Some(id),
                    Err(e) => fail(&mut report, true, format!("scan: key {i}: {e}")),
                },
            }
            it.next();
        }
        it.status()?;
    }
    for i in 0..expected.keys() {
        let got = db.get_cf(&cfs[family_of(i, families)], &key(i))?;
        let found = match found_state(i, got.as_deref()) {
            Ok(f) => f,
            Err(e) => {
                fail(&mut report, true, format!("get: key {i}: {e}"));
                continue;
            }
        };
        if found != scanned[i as usize] {
            let msg = format!("key {i}: get found {} but the scan {}", show(found), show(scanned[i as usize]));
            fail(&mut report, true, msg);
            continue;
        }
        let (c, p) = (expected.committed(i), expected.pending(i));
        if writers > 0 && c != p && holds(c, found) != holds(p, found) {
            let (applied, not) = in_flight.entry(i % writers).or_default();
            if holds(p, found) {
                applied.push(i);
            } else {
                not.push(i);
            }
        }
        let settled = if holds(c, found) {
            if c == p {
                report.committed += 1;
            } else {
                report.pending_lost += 1;
            }
            c
        } else if holds(p, found) {
            report.pending_applied += 1;
            p
        } else {
            let older = found.map_or(c.present(), |id| id < c.id());
            let what = if older { "lost write" } else { "wrong value" };
            fail(&mut report, !older, format!("{what}: key {i} holds {}; committed {c}, pending {p}", show(found)));
            continue;
        };
        if c != settled || p != settled {
            to_settle.push((i, settled));
        }
    }
    for (t, (applied, not)) in in_flight {
        if !applied.is_empty() && !not.is_empty() {
            let msg = format!(
                "a write was applied in part: thread {t}'s write in flight left keys {applied:?} at their new \
                 states and keys {not:?} at their old ones"
            );
            fail(&mut report, true, msg);
        }
    }
    // Settled only when all is well: a failed verification leaves the
    // expected state as it found it, for the next look (the driver keeps
    // the directory) to find the same.
    if report.failures.is_empty() {
        for (i, settled) in to_settle {
            expected.resolve(i, settled).map_err(|e| ebb::Error::io("write expected state", "expected", e))?;
        }
    }
    Ok(report)
}

/// What the threads share.
struct Shared<'a> {
    db: &'a Db,
    /// The families, by number; key `i` lives in `cfs[family_of(i, ..)]`.
    cfs: &'a [ColumnFamilyHandle],
    expected: &'a ExpectedState,
    threads: u64,
    sync_ratio: f64,
    stop: AtomicBool,
    ops: AtomicU64,
    failure: Mutex<Option<(Exit, String)>>,
}

/// A failed operation: what kind, and what happened.
type OpResult = Result<(), (Exit, String)>;

fn engine(what: &str, e: ebb::Error) -> (Exit, String) {
    (Exit::Engine, format!("{what}: {e}"))
}

fn wrong(msg: String) -> (Exit, String) {
    (Exit::Verification, msg)
}

impl Shared<'_> {
    fn thread(&self, t: u64, seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        while !self.stop.load(Ordering::Acquire) {
            let r = match rng.gen_range(0..1000) {
                0..=349 => self.put(t, &mut rng),
                350..=449 => self.delete(t, &mut rng),
                450..=549 => self.batch(t, &mut rng),
                550..=699 => self.get(t, &mut rng),
                700..=849 => self.walk(t, &mut rng),
                850..=939 => self.snapshot(t, &mut rng),
                940..=997 => self.multi_get(t, &mut rng),
                998 => self.db.flush_cf(self.random_cf(&mut rng), false).map_err(|e| engine("flush", e)),
                _ => self.compact(&mut rng),
            };
            self.ops.fetch_add(1, Ordering::Relaxed);
            if let Err(failure) = r {
                let mut slot = self.failure.lock().unwrap_or_else(|e| e.into_inner());
                slot.get_or_insert(failure);
                self.stop.store(true, Ordering::Release);
            }
        }
    }

    /// The number of the family key `i` lives in.
    fn family(&self, i: u64) -> usize {
        family_of(i, self.cfs.len() as u64)
    }

    /// The family key `i` lives in.
    fn cf(&self, i: u64) -> &ColumnFamilyHandle {
        &self.cfs[self.family(i)]
    }

    fn random_cf(&self, rng: &mut StdRng) -> &ColumnFamilyHandle {
        &self.cfs[rng.gen_range(0..self.cfs.len())]
    }

    /// A random key owned by thread `t`.
    fn own_key(&self, t: u64, rng: &mut StdRng) -> u64 {
        let owned = (self.expected.keys().saturating_sub(t)).div_ceil(self.threads).max(1);
        (t + self.threads * rng.gen_range(0..owned)).min(self.expected.keys() - 1)
    }

    fn owns(&self, t: u64, i: u64) -> bool {
        i % self.threads == t
    }

    /// Writes `updates` (key, new state) as one batch, following the
    /// pending/committed protocol.
    fn write(&self, updates: &[(u64, Slot)], rng: &mut StdRng) -> OpResult {
        let mut b = WriteBatch::new();
        for (i, s) in updates {
            self.expected.mark_pending(*i, *s).map_err(|e| (Exit::Usage, format!("expected state: {e}")))?;
            if s.present() && s.id().is_multiple_of(3) {
                // One value in three is written as a wide-column entity whose
                // default column is the value (what reads and scans check)
                // beside a column of its id: entities go through the WAL,
                // flushes, compactions and recovery under the same kills.
                let v = value(*i, s.id());
                let id = s.id().to_le_bytes();
                b.put_entity_cf(self.cf(*i), &key(*i), &[(b"", &v), (b"id", &id)])
                    .map_err(|e| engine("put_entity", e))?;
            } else if s.present() {
                b.put_cf(self.cf(*i), &key(*i), &value(*i, s.id()));
            } else {
                b.delete_cf(self.cf(*i), &key(*i));
            }
        }
        let wo = WriteOptions { sync: rng.gen_bool(self.sync_ratio), disable_wal: false };
        self.db.write_opt(&b, &wo).map_err(|e| engine("write", e))?;
        for (i, s) in updates {
            self.expected.commit(*i, *s).map_err(|e| (Exit::Usage, format!("expected state: {e}")))?;
        }
        Ok(())
    }

    fn put(&self, t: u64, rng: &mut StdRng) -> OpResult {
        let i = self.own_key(t, rng);
        self.write(&[(i, self.expected.next(i, true))], rng)
    }

    fn delete(&self, t: u64, rng: &mut StdRng) -> OpResult {
        let i = self.own_key(t, rng);
        self.write(&[(i, self.expected.next(i, false))], rng)
    }

    fn batch(&self, t: u64, rng: &mut StdRng) -> OpResult {
        let mut keys: Vec<u64> = (0..rng.gen_range(2..9)).map(|_| self.own_key(t, rng)).collect();
        keys.sort_unstable();
        keys.dedup();
        let updates: Vec<(u64, Slot)> = keys.iter().map(|&i| (i, self.expected.next(i, rng.gen_bool(0.8)))).collect();
        self.write(&updates, rng)
    }

    /// Checks a read of key `i` owned by this thread: exactly its committed state.
    fn check_own(&self, i: u64, got: Option<&[u8]>, want: Slot, what: &str) -> OpResult {
        let found = found_state(i, got).map_err(|e| wrong(format!("{what}: key {i}: {e}")))?;
        if holds(want, found) {
            Ok(())
        } else {
            Err(wrong(format!("{what}: key {i} holds {}, expected {want}", show(found))))
        }
    }

    /// Checks a read of any key `i`: a state between `before` (committed
    /// before the read) and `after` (pending after it).
    fn check_between(&self, i: u64, got: Option<&[u8]>, before: Slot, after: Slot, what: &str) -> OpResult {
        let found = found_state(i, got).map_err(|e| wrong(format!("{what}: key {i}: {e}")))?;
        let ok = match found {
            // A value id in the range, and not the id of a known delete.
            Some(id) => {
                (before.id()..=after.id()).contains(&id)
                    && (id != before.id() || before.present())
                    && (id != after.id() || after.present())
            }
            // Absent: some write in the range must be a delete; those
            // strictly between the two are unknown.
            None => !before.present() || !after.present() || after.id() >= before.id() + 2,
        };
        if ok {
            Ok(())
        } else {
            Err(wrong(format!("{what}: key {i} holds {}, expected {before} to {after}", show(found))))
        }
    }

    fn get(&self, t: u64, rng: &mut StdRng) -> OpResult {
        if rng.gen_bool(0.15) {
            return self.get_entity(t, rng);
        }
        if rng.gen_bool(0.5) {
            let i = self.own_key(t, rng);
            let got = self.db.get_cf(self.cf(i), &key(i)).map_err(|e| engine("get", e))?;
            return self.check_own(i, got.as_deref(), self.expected.committed(i), "get");
        }
        let i = rng.gen_range(0..self.expected.keys());
        let before = self.expected.committed(i);
        let got = self.db.get_cf(self.cf(i), &key(i)).map_err(|e| engine("get", e))?;
        self.check_between(i, got.as_deref(), before, self.expected.pending(i), "get")
    }

    /// Reads an own key's columns: its value as the default column, and
    /// for a value written as an entity (an id divisible by 3) its id
    /// column beside it.
    fn get_entity(&self, t: u64, rng: &mut StdRng) -> OpResult {
        let i = self.own_key(t, rng);
        let ro = ReadOptions::default();
        let got = self.db.get_entity_cf_opt(self.cf(i), &key(i), &ro).map_err(|e| engine("get_entity", e))?;
        let want = self.expected.committed(i);
        let default = got.as_ref().map(|cols| match cols.first() {
            Some(c) if c.name.is_empty() => c.value.clone(),
            _ => Vec::new(),
        });
        self.check_own(i, default.as_deref(), want, "get_entity")?;
        if let Some(cols) = got {
            let names: Vec<&[u8]> = cols.iter().map(|c| c.name.as_slice()).collect();
            let entity = want.id().is_multiple_of(3);
            let id_ok = cols.get(1).is_some_and(|c| c.value == want.id().to_le_bytes());
            if (entity && (names != [&b""[..], b"id"] || !id_ok)) || (!entity && names != [&b""[..]]) {
                return Err(wrong(format!("get_entity: key {i} (value id {}) has columns {names:?}", want.id())));
            }
        }
        Ok(())
    }

    fn multi_get(&self, t: u64, rng: &mut StdRng) -> OpResult {
        let keys: Vec<u64> = (0..rng.gen_range(1..6)).map(|_| self.own_key(t, rng)).collect();
        let encoded: Vec<Vec<u8>> = keys.iter().map(|&i| key(i)).collect();
        let reads: Vec<(&ColumnFamilyHandle, &[u8])> =
            keys.iter().zip(&encoded).map(|(&i, k)| (self.cf(i), k.as_slice())).collect();
        for (i, got) in keys.iter().zip(self.db.multi_get_cf(&reads, &ReadOptions::default())) {
            let got = got.map_err(|e| engine("multi_get", e))?;
            self.check_own(*i, got.as_deref(), self.expected.committed(*i), "multi_get")?;
        }
        Ok(())
    }

    /// A random range of key indices `[lo, hi)` of at most `max` keys.
    fn range(&self, rng: &mut StdRng, max: u64) -> (u64, u64) {
        let lo = rng.gen_range(0..self.expected.keys());
        (lo, (lo + rng.gen_range(1..=max)).min(self.expected.keys()))
    }

    /// Walks a random range of a random family with an iterator, forwards
    /// or backwards, and checks every key of that family in it: present ones
    /// by value, missing ones as allowed to be absent.
    fn walk(&self, t: u64, rng: &mut StdRng) -> OpResult {
        let (lo, hi) = self.range(rng, 64);
        let f = rng.gen_range(0..self.cfs.len());
        let before: Vec<Slot> = (lo..hi).map(|i| self.expected.committed(i)).collect();
        let ro = ReadOptions {
            iterate_lower_bound: Some(key(lo)),
            iterate_upper_bound: Some(key(hi)),
            ..ReadOptions::default()
        };
        let mut it = self.db.iter_cf(&self.cfs[f], ro);
        let reverse = rng.gen_bool(0.5);
        if reverse {
            it.seek_to_last();
        } else {
            it.seek(&key(lo));
        }
        let mut seen: Vec<Option<Vec<u8>>> = vec![None; (hi - lo) as usize];
        let mut last: Option<u64> = None;
        while it.valid() {
            let i = key_index(it.key()).filter(|i| (lo..hi).contains(i) && self.family(*i) == f).ok_or_else(|| {
                wrong(format!("iterator over [{lo}, {hi}) of {} returned {:?}", family_name(f), it.key()))
            })?;
            if last.is_some_and(|l| if reverse { i >= l } else { i <= l }) {
                return Err(wrong(format!("iterator returned key {i} after key {last:?} (reverse: {reverse})")));
            }
            last = Some(i);
            seen[(i - lo) as usize] = Some(it.value().to_vec());
            if reverse {
                it.prev();
            } else {
                it.next();
            }
        }
        it.status().map_err(|e| engine("iterate", e))?;
        drop(it);
        for (n, got) in seen.iter().enumerate() {
            let i = lo + n as u64;
            if self.family(i) != f {
                continue;
            }
            if self.owns(t, i) {
                self.check_own(i, got.as_deref(), before[n], "iterate")?;
            } else {
                self.check_between(i, got.as_deref(), before[n], self.expected.pending(i), "iterate")?;
            }
        }
        Ok(())
    }

    /// Takes a snapshot, writes some of this thread's keys in a range (in
    /// one batch across their families), and checks that reads through the
    /// snapshot still see the range as it was: point reads of those keys,
    /// and an iterator over one family.
    fn snapshot(&self, t: u64, rng: &mut StdRng) -> OpResult {
        let (lo, hi) = self.range(rng, 32);
        let f = rng.gen_range(0..self.cfs.len());
        let before: Vec<Slot> = (lo..hi).map(|i| self.expected.committed(i)).collect();
        let snap = self.db.snapshot();
        let own: Vec<u64> = (lo..hi).filter(|i| self.owns(t, *i)).collect();
        let mut changed: Vec<(u64, Slot)> = Vec::new();
        for &i in &own {
            if rng.gen_bool(0.5) {
                changed.push((i, self.expected.next(i, rng.gen_bool(0.8))));
            }
        }
        if !changed.is_empty() {
            self.write(&changed, rng)?;
        }
        for &i in &own {
            let got =
                self.db.get_cf_opt(self.cf(i), &key(i), &snap.read_options()).map_err(|e| engine("snapshot get", e))?;
            self.check_own(i, got.as_deref(), before[(i - lo) as usize], "snapshot get")?;
        }
        let ro = ReadOptions {
            iterate_lower_bound: Some(key(lo)),
            iterate_upper_bound: Some(key(hi)),
            ..snap.read_options()
        };
        let mut it = self.db.iter_cf(&self.cfs[f], ro);
        it.seek_to_first();
        let mut seen: Vec<Option<Vec<u8>>> = vec![None; (hi - lo) as usize];
        while it.valid() {
            if let Some(i) = key_index(it.key()).filter(|i| (lo..hi).contains(i) && self.family(*i) == f) {
                seen[(i - lo) as usize] = Some(it.value().to_vec());
            } else {
                let name = family_name(f);
                return Err(wrong(format!("snapshot iterator over [{lo}, {hi}) of {name} returned {:?}", it.key())));
            }
            it.next();
        }
        it.status().map_err(|e| engine("snapshot iterate", e))?;
        drop(it);
        for (n, got) in seen.iter().enumerate() {
            let i = lo + n as u64;
            if self.family(i) != f {
                continue;
            }
            if self.owns(t, i) {
                self.check_own(i, got.as_deref(), before[n], "snapshot iterate")?;
            } else {
                self.check_between(i, got.as_deref(), before[n], self.expected.pending(i), "snapshot iterate")?;
            }
        }
        Ok(())
    }

    fn compact(&self, rng: &mut StdRng) -> OpResult {
        let (lo, hi) = self.range(rng, 500);
        let cf = self.random_cf(rng);
        self.db.compact_range_cf(cf, Some(&key(lo)), Some(&key(hi))).map_err(|e| engine("compact_range", e))
    }
}
