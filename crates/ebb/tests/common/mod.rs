//! Helpers shared by the integration tests: a reference model and option presets.
#![allow(dead_code)]

pub mod hooked_fs;
pub mod prefix_cursor;
pub mod sync;
pub mod workload;

use std::collections::BTreeMap;
use std::sync::Arc;

use ebb::fs::MemFs;
use ebb::{CompressionType, Db, Options, ReadOptions, WriteOptions};

/// A write synced through the WAL.
pub const SYNCED: WriteOptions = WriteOptions { sync: true, disable_wal: false };

/// Options that make flushes and compactions happen after a few KiB.
pub fn tiny_options(fs: Option<MemFs>) -> Options {
    let mut o = Options::default();
    o.create_if_missing = true;
    o.write_buffer_size = 8 * 1024;
    o.max_write_buffer_number = 3;
    o.level0_file_num_compaction_trigger = 2;
    o.level0_slowdown_writes_trigger = 8;
    o.level0_stop_writes_trigger = 12;
    o.max_bytes_for_level_base = 32 * 1024;
    o.max_bytes_for_level_multiplier = 4.0;
    o.target_file_size_base = 8 * 1024;
    o.block_size = 512;
    o.num_levels = 4;
    o.compression = CompressionType::None;
    o.block_cache_size = 64 * 1024;
    o.max_subcompactions = 2;
    o.max_background_compactions = 2;
    // Two flushes may run at once, as in W2's options: every test on these
    // options meets flushes that overlap and finish out of order.
    o.max_background_flushes = 2;
    if let Some(fs) = fs {
        o.fs = Arc::new(fs);
    }
    o
}

/// [`tiny_options`] on `fs` with automatic compaction off, so files stay
/// where a test puts them.
pub fn manual_options(fs: &MemFs) -> Options {
    let mut o = tiny_options(Some(fs.clone()));
    o.disable_auto_compactions = true;
    o
}

/// What each column family of `db` holds, by name (a full forward scan each).
pub fn family_contents(db: &Db) -> BTreeMap<String, Model> {
    let mut out = BTreeMap::new();
    for name in db.column_family_names() {
        let cf = db.cf_handle(&name).expect("a live family");
        let mut it = db.iter_cf(&cf, ReadOptions::default());
        it.seek_to_first();
        let mut m = Model::new();
        while it.valid() {
            m.insert(it.key().to_vec(), it.value().to_vec());
            it.next();
        }
        it.status().unwrap_or_else(|e| panic!("scan of {name}: {e}"));
        out.insert(name, m);
    }
    out
}

/// Every key/value visible through a full forward scan.
pub fn scan(db: &Db, ro: ReadOptions) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db.iter(ro);
    it.seek_to_first();
    let mut out = BTreeMap::new();
    while it.valid() {
        assert!(out.insert(it.key().to_vec(), it.value().to_vec()).is_none(), "key returned twice");
        it.next();
    }
    it.status().expect("iterator status");
    out
}

/// Every key/value visible through a full reverse scan, in ascending order.
pub fn scan_reverse(db: &Db, ro: ReadOptions) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db.iter(ro);
    it.seek_to_last();
    let mut out = BTreeMap::new();
    let mut prev: Option<Vec<u8>> = None;
    while it.valid() {
        if let Some(p) = &prev {
            assert!(it.key() < p.as_slice(), "reverse scan out of order");
        }
        prev = Some(it.key().to_vec());
        out.insert(it.key().to_vec(), it.value().to_vec());
        it.prev();
    }
    it.status().expect("iterator status");
    out
}

/// A reference model of the database: the visible key/value pairs.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Scans between keys `a` and `b` (in either order; lower bound inclusive,
/// upper exclusive) through `ReadOptions`' iterate bounds, forwards and
/// backwards, and checks both against `model`.
pub fn check_bounded_scans(db: &Db, model: &Model, a: Vec<u8>, b: Vec<u8>, ctx: &str) {
    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
    let ro = ReadOptions {
        iterate_lower_bound: Some(lo.clone()),
        iterate_upper_bound: Some(hi.clone()),
        ..ReadOptions::default()
    };
    let want: Model = model.range(lo..hi).map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(scan(db, ro.clone()), want, "{ctx}: bounded scan");
    assert_eq!(scan_reverse(db, ro), want, "{ctx}: bounded reverse scan");
}

/// The states a database may legally be found in after a failure.
///
/// `states[i]` is the model after the first `i` writes attempted (so
/// `states[0]` is the state before any). A write is pushed before it is
/// issued, so a write that then fails is the last state and may or may not
/// be found: the engine may have applied it before reporting the error.
/// Recovery must land on exactly one of these states (writes are atomic and
/// applied in order), no earlier than what the engine promised:
/// - after a power loss, the newest write made durable (a synced write, or
///   any write before a successful `flush(true)` or `close`);
/// - without one, the newest write acknowledged through the WAL (a write
///   made without it is kept only once flushed, power loss or not).
///
/// States are shared (`Arc`), so a copy of a history is cheap to publish.
#[derive(Debug, Clone)]
pub struct History {
    states: Vec<Arc<Model>>,
    /// The newest write that returned `Ok`.
    last_ok: usize,
    acked: usize,
    durable: usize,
}

impl Default for History {
    fn default() -> Self {
        History::starting_from(Model::new())
    }
}

impl History {
    /// A history whose writes start from `initial` (durable already).
    pub fn starting_from(initial: Model) -> Self {
        History { states: vec![Arc::new(initial)], last_ok: 0, acked: 0, durable: 0 }
    }

    /// The model after every write attempted so far.
    pub fn latest(&self) -> &Model {
        self.states.last().expect("a history has at least its initial state")
    }

    /// Writes attempted so far.
    pub fn attempted(&self) -> usize {
        self.states.len() - 1
    }

    /// Records a write about to be issued, as its effect on the model.
    pub fn attempt(&mut self, apply: impl FnOnce(&mut Model)) {
        let mut next = self.latest().clone();
        apply(&mut next);
        self.states.push(Arc::new(next));
    }

    /// The write last attempted, through the WAL, returned `Ok`.
    pub fn acknowledged(&mut self) {
        self.last_ok = self.attempted();
        self.acked = self.last_ok;
    }

    /// The write last attempted, without the WAL, returned `Ok`.
    pub fn acknowledged_unlogged(&mut self) {
        self.last_ok = self.attempted();
    }

    /// Every write that returned `Ok` is now durable (a synced write
    /// returned, or `flush(true)` or `close` succeeded).
    pub fn made_durable(&mut self) {
        self.durable = self.last_ok;
        self.acked = self.last_ok;
    }

    /// Checks a state recovered after a power loss.
    pub fn check_after_crash(&self, got: &Model) -> Result<usize, String> {
        self.check_from(self.durable, got)
    }

    /// Checks a state recovered after a clean reopen (no power loss).
    pub fn check_without_crash(&self, got: &Model) -> Result<usize, String> {
        self.check_from(self.acked, got)
    }

    fn check_from(&self, earliest: usize, got: &Model) -> Result<usize, String> {
        if let Some(i) = (earliest..self.states.len()).rev().find(|&i| *self.states[i] == *got) {
            return Ok(i);
        }
        let hint = match (0..earliest).rev().find(|&i| *self.states[i] == *got) {
            Some(i) => format!("it is the state after write {i}, older than the {earliest} promised"),
            None => "it matches no prefix of the history: writes were lost out of order or invented".into(),
        };
        let promised = &self.states[earliest];
        let missing: Vec<_> = promised.iter().filter(|(k, v)| got.get(*k) != Some(*v)).map(|(k, _)| k).collect();
        let extra: Vec<_> = got.iter().filter(|(k, v)| self.latest().get(*k) != Some(*v)).map(|(k, _)| k).collect();
        Err(format!(
            "recovered {} keys, {hint}; {} attempted, {} acknowledged, {} durable; \
             differs from the promised state at {} keys (first {:?}); {} keys not in the latest state (first {:?})",
            got.len(),
            self.attempted(),
            self.acked,
            self.durable,
            missing.len(),
            missing.first().map(|k| String::from_utf8_lossy(k)),
            extra.len(),
            extra.first().map(|k| String::from_utf8_lossy(k)),
        ))
    }
}

/// Opens the database in `dir` after a power loss. With `garbage_tail` (the
/// crash mode `GarbageTail`: a filesystem that fills unsynced space with
/// garbage), an append to the MANIFEST cut short can read as a record that
/// fails its checksum, which an open refuses, naming the MANIFEST, as
/// RocksDB's does; the database is then repaired, as an operator would, and
/// opened again. Returns the database and whether it was repaired.
pub fn open_after_power_loss(dir: &str, o: &Options, garbage_tail: bool) -> ebb::Result<(Db, bool)> {
    match Db::open(dir, o.clone()) {
        Err(e) if garbage_tail && e.is_corruption() && e.to_string().contains("MANIFEST-") => {
            Db::repair(dir, o)?;
            Ok((Db::open(dir, o.clone())?, true))
        }
        r => r.map(|db| (db, false)),
    }
}

/// Every file of a MemFs directory with its bytes, for replanting copies.
pub fn files_of(fs: &MemFs, dir: &str) -> Vec<(String, Vec<u8>)> {
    use ebb::fs::FileSystem;
    let dir = std::path::Path::new(dir);
    fs.list_dir(dir)
        .expect("list the database directory")
        .into_iter()
        .filter_map(|name| fs.file_bytes(&dir.join(&name)).map(|bytes| (name, bytes)))
        .collect()
}

/// A fresh MemFs holding `files` (all durable) in `dir`.
pub fn fs_holding(dir: &str, files: &[(String, Vec<u8>)]) -> MemFs {
    use ebb::fs::FileSystem;
    let fs = MemFs::new();
    let dir = std::path::Path::new(dir);
    fs.create_dir_all(dir).expect("create the database directory");
    for (name, bytes) in files {
        fs.set_file_bytes(&dir.join(name), bytes).expect("plant a file");
    }
    fs
}

/// Like [`scan`], but returns the iterator's error instead of panicking,
/// and a key's wide columns as [`shown_columns`] writes them.
pub fn try_scan(db: &Db, ro: ReadOptions) -> ebb::Result<Model> {
    let mut it = db.iter(latest(db, ro));
    it.seek_to_first();
    let mut out = Model::new();
    while it.valid() {
        out.insert(it.key().to_vec(), shown_columns(&it.columns()));
        it.next();
    }
    it.status()?;
    Ok(out)
}

/// `ro`, reading the latest version of every key where the default family
/// has timestamps (the failure workloads write them in increasing order).
pub fn latest<'a>(db: &Db, ro: ReadOptions<'a>) -> ReadOptions<'a> {
    let stamped = db.cf_handle("default").is_some_and(|cf| cf.timestamp_size() > 0);
    ReadOptions { timestamp: ro.timestamp.or(stamped.then_some(u64::MAX)), ..ro }
}

/// The timestamp of a write a failure test adds after its workload (newer
/// than any the workloads write).
pub const LATE_TS: u64 = 1 << 62;

/// Puts `key` in the default family with `wo`: at [`LATE_TS`] where the
/// family has timestamps.
pub fn put_late(db: &Db, key: &[u8], value: &[u8], wo: &ebb::WriteOptions) -> ebb::Result<()> {
    match db.cf_handle("default") {
        Some(cf) if cf.timestamp_size() > 0 => db.put_with_ts_opt(&cf, key, LATE_TS, value, wo),
        _ => db.put_opt(key, value, wo),
    }
}

/// Marks a model value that stands for a wide-column entity.
pub const ENTITY_MARK: &[u8] = b"\0E\0";

/// How a [`Model`] holds a key's columns: one default column as its value
/// (a plain value and such an entity read alike), any other entity as
/// [`ENTITY_MARK`] and its serialized columns.
pub fn shown_columns(columns: &[ebb::WideColumn]) -> Vec<u8> {
    match columns {
        [only] if only.name.is_empty() => only.value.clone(),
        _ => {
            let pairs: Vec<(&[u8], &[u8])> = columns.iter().map(|c| (c.name.as_slice(), c.value.as_slice())).collect();
            [ENTITY_MARK, &ebb::wide_columns::encode(&pairs).expect("unique names")].concat()
        }
    }
}

/// Where each logical record of a log file starts, and the payload length
/// of its first fragment: the FULL and FIRST physical records, walked by
/// their headers (docs/format.md, "Blocks and records").
pub fn log_records(bytes: &[u8]) -> Vec<(usize, usize)> {
    const BLOCK: usize = 32 * 1024;
    const HEADER: usize = 7;
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + HEADER <= bytes.len() {
        let left = BLOCK - pos % BLOCK;
        if left < HEADER {
            pos += left;
            continue;
        }
        let len = usize::from(u16::from_le_bytes([bytes[pos + 4], bytes[pos + 5]]));
        match bytes[pos + 6] {
            0 => break,
            1 | 2 => out.push((pos, len)),
            _ => {}
        }
        pos += HEADER + len;
    }
    out
}

/// One write of the history: (family, key, value or deletion).
pub type Op = (usize, Vec<u8>, Option<Vec<u8>>);

/// The length of the shortest prefix of `ops` whose result equals `got`
/// (family by family), if any: the copy is the database at that point.
pub fn matching_prefix(ops: &[Op], families: usize, got: &[Model]) -> Option<usize> {
    // Keys whose model value differs from `got`, kept as the ops apply.
    let mut model: Vec<Model> = vec![Model::new(); families];
    let mut differing: usize = got.iter().map(|m| m.len()).sum();
    if differing == 0 {
        return Some(0);
    }
    for (t, (cf, k, v)) in ops.iter().enumerate() {
        let was_same = model[*cf].get(k) == got[*cf].get(k);
        match v {
            Some(v) => model[*cf].insert(k.clone(), v.clone()),
            None => model[*cf].remove(k),
        };
        let is_same = model[*cf].get(k) == got[*cf].get(k);
        match (was_same, is_same) {
            (true, false) => differing += 1,
            (false, true) => differing -= 1,
            _ => {}
        }
        if differing == 0 {
            return Some(t + 1);
        }
    }
    None
}
