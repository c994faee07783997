//! The bodies of Ebb's fuzz targets, one function per target taking the raw
//! input. A body panics only on a bug: a decoder that panics, loops, or
//! accepts what it then cannot re-encode; or a database that loses or
//! invents data.
//!
//! Shared by the `cargo fuzz` targets (`fuzz_targets/*.rs`) and by
//! `crates/ebb/tests/fuzz_regressions.rs`, which includes this file and runs
//! every body over the kept inputs in `corpus/<target>/` under `cargo test`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use ebb::fs::{CrashMode, FileSystem, MemFs, RandomAccessFile, SequentialFile};
use ebb::internals::blob::format::{BlobIndex, HEADER_LEN, RECORD_HEADER_LEN};
use ebb::internals::blob::BlobFileReader;
use ebb::internals::iter::InternalIterator;
use ebb::internals::sst::{Block, BlockIterator, KeyOrder, ReadSettings, Table};
use ebb::internals::version::{Version, VersionEdit};
use ebb::internals::wal::{LogReader, LogRecord};
use ebb::{Db, Options, ReadOptions, WalRecoveryMode, WriteBatch, WriteOptions};

/// A target's body.
pub type Body = fn(&[u8]);

/// Every target, by name, with its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("wal_reader", wal_reader),
    ("block", block),
    ("table", table),
    ("version_edit", version_edit),
    ("batch_replay", batch_replay),
    ("model", model),
    ("manifest_recovery", manifest_recovery),
    ("blob_file", blob_file),
];

const RECOVERY_MODES: [WalRecoveryMode; 4] = [
    WalRecoveryMode::TolerateCorruptedTailRecords,
    WalRecoveryMode::AbsoluteConsistency,
    WalRecoveryMode::PointInTime,
    WalRecoveryMode::SkipAnyCorruptedRecords,
];

/// A file read front to back from memory.
struct BytesFile {
    data: Vec<u8>,
    pos: usize,
}

impl SequentialFile for BytesFile {
    fn read(&mut self, buf: &mut [u8]) -> ebb::Result<usize> {
        let n = buf.len().min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// A file read at offsets from memory.
struct BytesAt(Vec<u8>);

impl RandomAccessFile for BytesAt {
    fn read_at(&self, offset: u64, len: usize) -> ebb::Result<Vec<u8>> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(self.0.len());
        let end = start.saturating_add(len).min(self.0.len());
        Ok(self.0[start..end].to_vec())
    }

    fn size(&self) -> ebb::Result<u64> {
        Ok(self.0.len() as u64)
    }
}

/// The WAL reader over raw bytes: it ends, and every record it returns
/// consumed input; then replay under every recovery mode returns.
pub fn wal_reader(data: &[u8]) {
    let mut reader = LogReader::new(Box::new(BytesFile { data: data.to_vec(), pos: 0 }), "fuzz.log".into());
    // Each step consumes at least a header or a block trailer.
    let mut steps = 0;
    loop {
        match reader.next() {
            Ok(LogRecord::Eof) | Err(_) => break,
            Ok(LogRecord::Record { offset, .. } | LogRecord::Corrupt { offset, .. }) => {
                assert!(offset <= data.len() as u64, "record offset {offset} past the end ({})", data.len());
            }
        }
        steps += 1;
        assert!(steps <= data.len() + 2, "the reader does not progress");
    }
    let fs = MemFs::new();
    let path = Path::new("/wal/000001.log");
    fs.create_dir_all(Path::new("/wal")).expect("mkdir");
    fs.set_file_bytes(path, data).expect("plant the log");
    for mode in RECOVERY_MODES {
        let _ = ebb::internals::wal::replay(&fs, path, mode, true, |_, _| Ok(()));
    }
}

/// Walks a block every way an iterator can, in both key orders.
fn walk_block(block: Arc<Block>, order: KeyOrder, probes: &[&[u8]]) {
    let limit = block.size() + 2;
    let mut it = BlockIterator::new(Arc::clone(&block), order.clone());
    it.seek_to_first();
    let mut n = 0;
    while it.valid() && n <= limit {
        let _ = (it.key(), it.value());
        it.next();
        n += 1;
    }
    assert!(n <= limit, "a forward walk did not end");
    it.seek_to_last();
    n = 0;
    while it.valid() && n <= limit {
        it.prev();
        n += 1;
    }
    assert!(n <= limit, "a backward walk did not end");
    for p in probes {
        it.seek(p);
        if it.valid() {
            it.prev();
        }
        it.seek_for_prev(p);
        if it.valid() {
            it.next();
        }
    }
    let _ = it.corruption();
}

/// A block decoded from raw bytes: refused, or walked without a panic.
pub fn block(data: &[u8]) {
    let Ok(block) = Block::new(data.to_vec()) else { return };
    let block = Arc::new(block);
    // Seek targets of internal-key order are internal keys (8 bytes at least).
    let mut from_input = data[..data.len().min(16)].to_vec();
    from_input.resize(from_input.len().max(8), 0);
    let probes: [&[u8]; 3] = [&[0; 8], &from_input, &[0xff; 12]];
    walk_block(Arc::clone(&block), KeyOrder::Bytewise, &probes);
    walk_block(block, KeyOrder::INTERNAL_BYTEWISE, &probes);
}

/// A table opened from raw bytes: refused, or read every way (checksums
/// verified and not) without a panic.
pub fn table(data: &[u8]) {
    let Ok(t) = Table::open(Arc::new(BytesAt(data.to_vec())), data.len() as u64, "fuzz.sst".into(), None) else {
        return;
    };
    let _ = t.properties();
    for verify_checksums in [true, false] {
        let rs = ReadSettings { verify_checksums, fill_cache: false, ..ReadSettings::default() };
        let mut it = t.iter(rs);
        it.seek_to_first();
        let mut keys = Vec::new();
        while it.valid() && keys.len() < 100_000 {
            keys.push(it.key().to_vec());
            it.next();
        }
        let _ = it.status();
        it.seek_to_last();
        let mut n = 0;
        while it.valid() && n < 100_000 {
            it.prev();
            n += 1;
        }
        for k in keys.iter().take(16) {
            let _ = t.get(&rs, k);
            let _ = t.key_may_match(k.get(..k.len().saturating_sub(8)).unwrap_or_default());
            it.seek(k);
            it.seek_for_prev(k);
            let _ = t.approximate_offset_of(k);
        }
        let _ = t.get(&rs, &[0u8; 9]);
    }
}

/// A blob file opened from raw bytes: refused, or every record its headers
/// lead to read back (checksums verified and not) without a panic; a blob
/// index decoded from the input's first bytes re-encodes to them.
pub fn blob_file(data: &[u8]) {
    if let Ok(index) = BlobIndex::decode(data.get(..data.len().min(32)).unwrap_or_default()) {
        let encoded = index.encode();
        let again = BlobIndex::decode(&encoded).unwrap_or_else(|e| panic!("a blob index re-encodes badly: {e}"));
        assert_eq!(again, index, "a blob index does not survive re-encoding");
    }
    let file = Arc::new(BytesAt(data.to_vec()));
    let Ok(r) = BlobFileReader::open(file, data.len() as u64, "000009.blob".into(), 9) else { return };
    let u32_at = |at: usize| data.get(at..at + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
    let mut at = HEADER_LEN;
    let mut read = 0;
    while let (Some(key_len), Some(value_len)) = (u32_at(at + 4), u32_at(at + 8)) {
        let Some(key) = data.get(at + RECORD_HEADER_LEN..at + RECORD_HEADER_LEN + key_len) else { break };
        let compression = data.get(at + 12).and_then(|c| ebb::CompressionType::from_u8(*c));
        let offset = (at + RECORD_HEADER_LEN + key_len) as u64;
        let index =
            BlobIndex { file_number: 9, offset, size: value_len as u64, compression: compression.unwrap_or_default() };
        for verify in [true, false] {
            let _ = r.get(key, &index, verify);
            let _ = r.get(b"another key", &index, verify);
        }
        at = at.saturating_add(RECORD_HEADER_LEN).saturating_add(key_len).saturating_add(value_len);
        read += 1;
        if read > 10_000 {
            break;
        }
    }
}

/// A MANIFEST record decoded from raw bytes: refused, or re-encoded to
/// bytes that decode to the same edit, and applied to a version.
pub fn version_edit(data: &[u8]) {
    let Ok(edit) = VersionEdit::decode(data, "MANIFEST-fuzz", 0) else { return };
    let again = VersionEdit::decode(&edit.encode(), "MANIFEST-fuzz", 0)
        .unwrap_or_else(|e| panic!("an accepted edit re-encodes to bytes its decoder refuses: {e}"));
    assert_eq!(again, edit, "an accepted edit does not survive re-encoding");
    let _ = Version::new(7).apply(&[&edit]);
}

/// The options of the database targets: tiny buffers so a few writes flush.
fn tiny_options(fs: &MemFs) -> Options {
    let mut o = Options::default();
    o.create_if_missing = true;
    o.write_buffer_size = 4096;
    o.target_file_size_base = 4096;
    o.max_bytes_for_level_base = 16 * 1024;
    o.level0_file_num_compaction_trigger = 2;
    o.num_levels = 4;
    o.block_size = 256;
    o.block_cache_size = 0;
    o.max_background_jobs = 2;
    o.fs = Arc::new(fs.clone());
    o
}

/// Raw bytes as a WAL record of a database: the write-batch decoder and
/// recovery see them. Each recovery mode opens the database or refuses
/// with an error; an open database reads back consistently.
pub fn batch_replay(data: &[u8]) {
    let fs = MemFs::new();
    let o = tiny_options(&fs);
    match Db::open("/db", o.clone()) {
        Ok(db) => {
            if db.put(b"k", b"v").and_then(|()| db.close()).is_err() {
                return;
            }
        }
        Err(_) => return,
    }
    let path = Path::new("/db/999999.log");
    {
        let Ok(file) = fs.new_writable(path) else { return };
        let mut w = ebb::internals::wal::LogWriter::new(file, "999999.log".into());
        if w.add_record(data).and_then(|()| w.sync()).is_err() {
            return;
        }
    }
    if fs.sync_dir(Path::new("/db")).is_err() {
        return;
    }
    let files: Vec<(String, Vec<u8>)> = fs
        .list_dir(Path::new("/db"))
        .unwrap_or_default()
        .into_iter()
        .filter_map(|n| fs.file_bytes(&Path::new("/db").join(&n)).map(|b| (n, b)))
        .collect();
    for mode in RECOVERY_MODES {
        let copy = MemFs::new();
        let _ = copy.create_dir_all(Path::new("/db"));
        for (name, bytes) in &files {
            let _ = copy.set_file_bytes(&Path::new("/db").join(name), bytes);
        }
        let mut o = tiny_options(&copy);
        o.wal_recovery_mode = mode;
        let Ok(db) = Db::open("/db", o) else { continue };
        let mut it = db.iter(ReadOptions::default());
        it.seek_to_first();
        let mut scanned = BTreeMap::new();
        while it.valid() {
            scanned.insert(it.key().to_vec(), it.value().to_vec());
            it.next();
        }
        let status = it.status();
        drop(it);
        if status.is_ok() {
            for (k, v) in &scanned {
                assert_eq!(db.get(k).ok().flatten().as_ref(), Some(v), "get and scan disagree after replay ({mode:?})");
            }
        }
        let _ = db.close();
    }
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// The states a database may be found in after a crash: every state since
/// the last one made durable.
struct History {
    states: Vec<Model>,
    durable: usize,
}

impl History {
    fn latest(&self) -> &Model {
        &self.states[self.states.len() - 1]
    }

    fn apply(&mut self, updates: &[(Vec<u8>, Option<Vec<u8>>)]) {
        let mut next = self.latest().clone();
        for (k, v) in updates {
            match v {
                Some(v) => next.insert(k.clone(), v.clone()),
                None => next.remove(k),
            };
        }
        self.states.push(next);
    }

    fn made_durable(&mut self) {
        self.durable = self.states.len() - 1;
    }

    /// After recovery to `got`: the state found becomes the only one.
    fn recovered(&mut self, got: Model, what: &str) {
        assert!(
            self.states[self.durable..].contains(&got),
            "after {what}, the database holds {} keys, matching no state since the last durable one \
             ({} states, durable from {})",
            got.len(),
            self.states.len(),
            self.durable
        );
        self.states = vec![got];
        self.durable = 0;
    }
}

fn scan(db: &Db) -> Model {
    let mut it = db.iter(ReadOptions::default());
    it.seek_to_first();
    let mut out = Model::new();
    while it.valid() {
        out.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().unwrap_or_else(|e| panic!("scan: {e}"));
    out
}

/// Raw bytes as a program of operations on a database on a `MemFs`:
/// writes (some synced), reads, flushes, compactions, clean restarts and
/// crashes in every `CrashMode`, checked against a model. After a crash the
/// database holds the model at some point no earlier than the last write
/// made durable; otherwise reads return exactly the model.
pub fn model(data: &[u8]) {
    let mut bytes = data.iter().copied();
    let mut fs = MemFs::new();
    let mut o = tiny_options(&fs);
    o.wal_recovery_mode = WalRecoveryMode::TolerateCorruptedTailRecords;
    let mut db = Db::open("/db", o.clone()).unwrap_or_else(|e| panic!("open: {e}"));
    let mut h = History { states: vec![Model::new()], durable: 0 };
    let key = |b: u8| format!("k{:02}", b % 24).into_bytes();
    for step in 0..256u32 {
        let Some(op) = bytes.next() else { break };
        let arg = bytes.next().unwrap_or(0);
        let kind = op % 16;
        match kind {
            // Puts (0-5), deletes (6-7), batches of both (8).
            0..=8 => {
                let n = if kind == 8 { 1 + usize::from(arg % 4) } else { 1 };
                let mut updates = Vec::new();
                let mut b = WriteBatch::new();
                for j in 0..n {
                    let k = key(arg.wrapping_add(j as u8 * 7));
                    if (6..=7).contains(&kind) || (n > 1 && j % 2 == 1) {
                        b.delete(&k);
                        updates.push((k, None));
                    } else {
                        let v = format!("v{step}.{j}.{}", "x".repeat(usize::from(arg % 64))).into_bytes();
                        b.put(&k, &v);
                        updates.push((k, Some(v)));
                    }
                }
                let sync = op & 0x80 != 0;
                h.apply(&updates);
                db.write_opt(&b, &WriteOptions { sync, disable_wal: false })
                    .unwrap_or_else(|e| panic!("step {step}: write: {e}"));
                if sync {
                    h.made_durable();
                }
            }
            9 | 10 => {
                let k = key(arg);
                let got = db.get(&k).unwrap_or_else(|e| panic!("step {step}: get: {e}"));
                assert_eq!(got.as_ref(), h.latest().get(&k), "step {step}: get {:?}", String::from_utf8_lossy(&k));
            }
            11 => {
                db.flush(true).unwrap_or_else(|e| panic!("step {step}: flush: {e}"));
                h.made_durable();
            }
            12 => db.compact_range(None, None).unwrap_or_else(|e| panic!("step {step}: compact: {e}")),
            13 => {
                db.close().unwrap_or_else(|e| panic!("step {step}: close: {e}"));
                h.made_durable();
                db = Db::open("/db", o.clone()).unwrap_or_else(|e| panic!("step {step}: reopen: {e}"));
                let got = scan(&db);
                h.recovered(got, "a clean restart");
            }
            14 => {
                let mode = match arg % 4 {
                    0 => CrashMode::DropUnsynced,
                    1 => CrashMode::KeepRandomPrefix { seed: u64::from(arg) },
                    2 => CrashMode::GarbageTail { seed: u64::from(arg) },
                    _ => CrashMode::ZeroTail,
                };
                // The dead process's disk; the old database winds down on
                // the old filesystem, out of the new one's way.
                let disk = fs.crash_clone(mode);
                drop(db);
                fs = disk;
                o.fs = Arc::new(fs.clone());
                // A garbage tail can turn an unsynced MANIFEST append into a
                // record that fails its checksum: the open refuses it, naming
                // the MANIFEST, and a repair must bring back what was durable.
                db = match Db::open("/db", o.clone()) {
                    Err(e) if matches!(mode, CrashMode::GarbageTail { .. }) && e.to_string().contains("MANIFEST-") => {
                        Db::repair("/db", &o).unwrap_or_else(|e| panic!("step {step}: repair after {mode:?}: {e}"));
                        Db::open("/db", o.clone())
                    }
                    r => r,
                }
                .unwrap_or_else(|e| panic!("step {step}: open after {mode:?}: {e}"));
                let got = scan(&db);
                h.recovered(got, &format!("a crash ({mode:?})"));
            }
            _ => {
                let got = scan(&db);
                assert!(got == *h.latest(), "step {step}: a scan differs from the model");
            }
        }
    }
    let _ = db.close();
}

/// A small database, built once: two column families, tables at several
/// levels, writes left in the WAL; its files and each family's contents.
struct Sample {
    files: Vec<(String, Vec<u8>)>,
    models: BTreeMap<String, Model>,
}

fn sample_options(fs: &MemFs) -> Options {
    let mut o = tiny_options(fs);
    o.disable_auto_compactions = true;
    o.stats_dump_period_sec = 0;
    o
}

fn sample() -> &'static Sample {
    static SAMPLE: OnceLock<Sample> = OnceLock::new();
    SAMPLE.get_or_init(|| {
        let fs = MemFs::new();
        let db = Db::open("/db", sample_options(&fs)).unwrap();
        let other = db.create_column_family("other", sample_options(&fs)).unwrap();
        let mut models: BTreeMap<String, Model> = BTreeMap::new();
        let synced = WriteOptions { sync: true, disable_wal: false };
        for round in 0..4u32 {
            for i in 0..12u32 {
                let (k, v) = (format!("k{i:02}").into_bytes(), format!("r{round} {i}").into_bytes());
                db.put_opt(&k, &v, &synced).unwrap();
                models.entry("default".into()).or_default().insert(k.clone(), v.clone());
                if round % 2 == 0 {
                    db.put_cf_opt(&other, &k, &v, &synced).unwrap();
                    models.entry("other".into()).or_default().insert(k, v);
                }
            }
            if round < 3 {
                db.flush(true).unwrap();
                db.flush_cf(&other, true).unwrap();
            }
            if round == 1 {
                db.compact_range(None, None).unwrap();
            }
        }
        db.close().unwrap();
        let dir = Path::new("/db");
        let files = fs
            .list_dir(dir)
            .unwrap()
            .into_iter()
            .filter_map(|n| fs.file_bytes(&dir.join(&n)).map(|b| (n, b)))
            .collect();
        Sample { files, models }
    })
}

/// Each family's contents, `None` when a read fails.
fn family_contents(db: &Db) -> Option<BTreeMap<String, Model>> {
    let mut out = BTreeMap::new();
    for name in db.column_family_names() {
        let cf = db.cf_handle(&name)?;
        let mut it = db.iter_cf(&cf, ReadOptions::default());
        it.seek_to_first();
        let mut m = Model::new();
        while it.valid() {
            m.insert(it.key().to_vec(), it.value().to_vec());
            it.next();
        }
        it.status().ok()?;
        out.insert(name, m);
    }
    Some(out)
}

/// Raw bytes as damage to the MANIFEST and CURRENT of a whole database
/// directory: four bytes per change (which file and how: flip, set or cut;
/// a 16-bit position; a byte). An open, default or best-efforts, never
/// panics; a default open that succeeds holds every synced write of every
/// family that holds any, and nothing else; no open deletes a table; and
/// when the default open fails, repair brings every synced write back.
pub fn manifest_recovery(data: &[u8]) {
    let sample = sample();
    let manifest = sample.files.iter().position(|(n, _)| n.starts_with("MANIFEST-")).unwrap();
    let current = sample.files.iter().position(|(n, _)| n == "CURRENT").unwrap();
    let mut files = sample.files.clone();
    for change in data.chunks(4).take(16) {
        let [how, hi, lo, byte] =
            [change[0], *change.get(1).unwrap_or(&0), *change.get(2).unwrap_or(&0), *change.get(3).unwrap_or(&1)];
        let file = if how & 1 == 0 { manifest } else { current };
        let bytes = &mut files[file].1;
        if bytes.is_empty() {
            continue;
        }
        let at = usize::from(u16::from_be_bytes([hi, lo])) % bytes.len();
        match how >> 1 & 3 {
            0 => bytes[at] ^= byte.max(1),
            1 => bytes[at] = byte,
            _ => bytes.truncate(at),
        }
    }
    let plant = || {
        let fs = MemFs::new();
        fs.create_dir_all(Path::new("/db")).unwrap();
        for (name, bytes) in &files {
            fs.set_file_bytes(&Path::new("/db").join(name), bytes).unwrap();
        }
        fs
    };
    let open = |fs: &MemFs, best_efforts: bool| {
        let mut o = sample_options(fs);
        o.create_if_missing = false;
        o.best_efforts_recovery = best_efforts;
        let names = Db::list_column_families("/db", &o)?;
        let listed: Vec<(&str, Options)> = names.iter().map(|n| (n.as_str(), sample_options(fs))).collect();
        Db::open_cf("/db", o, &listed)
    };
    let tables_kept = |fs: &MemFs| {
        for (name, bytes) in files.iter().filter(|(n, _)| n.ends_with(".sst")) {
            let here = fs.file_bytes(&Path::new("/db").join(name));
            let lost = fs.file_bytes(&Path::new("/db/lost").join(name));
            assert!(here.as_ref() == Some(bytes) || lost.as_ref() == Some(bytes), "table {name} was deleted");
        }
    };
    let nonempty = |m: &BTreeMap<String, Model>| -> BTreeMap<String, Model> {
        m.iter().filter(|(_, v)| !v.is_empty()).map(|(k, v)| (k.clone(), v.clone())).collect()
    };
    let fs = plant();
    let opened = open(&fs, false);
    tables_kept(&fs);
    match opened {
        Ok(db) => {
            let got = family_contents(&db).expect("reads of an opened database fail");
            assert!(nonempty(&got) == sample.models, "a damaged MANIFEST opened without every synced write");
            let _ = db.close();
        }
        Err(e) => {
            assert!(e.to_string().contains("MANIFEST") || e.to_string().contains("CURRENT"), "{e}");
            let best = plant();
            if let Ok(db) = open(&best, true) {
                let _ = family_contents(&db);
                let _ = db.close();
            }
            tables_kept(&best);
            let fs = plant();
            Db::repair("/db", &sample_options(&fs)).unwrap_or_else(|e| panic!("repair: {e}"));
            let db = open(&fs, false).unwrap_or_else(|e| panic!("open after repair: {e}"));
            let got = family_contents(&db).expect("reads after repair fail");
            for (family, model) in &sample.models {
                assert_eq!(got.get(family), Some(model), "repair lost writes of {family}");
            }
            let _ = db.close();
        }
    }
}
