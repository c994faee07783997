//! Opening (creating or recovering), and destroying a database.
//!
//! Recovery: lock the directory; read CURRENT and replay the MANIFEST; replay
//! every WAL numbered at or above the MANIFEST's log number, oldest first,
//! under `wal_recovery_mode`; write what was recovered into L0 tables and
//! record them with a new log number in one edit; start a new WAL; delete
//! obsolete files. The recovered data is durable before the old WALs go.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::bg::PoolSizes;
use super::table_cache::TableCache;
use super::{BatchOp, Db, DbInner, DbState, WriteBatch};
use crate::error::{Error, Result};
use crate::key::ValueKind;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::stats::Stats;
use crate::version::{filename, VersionSet};
use crate::wal::LogWriter;

pub(super) fn open(dir: &Path, options: Options) -> Result<Db> {
    options.validate()?;
    let fs = Arc::clone(&options.fs);
    if !fs.exists(dir) {
        if !options.create_if_missing {
            return Err(Error::invalid(format!(
                "{} does not exist (set create_if_missing to create a database)",
                dir.display()
            )));
        }
        fs.create_dir_all(dir)?;
    }
    let lock = fs.lock_file(&filename::lock_file(dir))?;
    let current = filename::current_file(dir);
    if fs.exists(&current) {
        if options.error_if_exists {
            return Err(Error::invalid(format!("{} already exists (error_if_exists is set)", dir.display())));
        }
    } else {
        if !options.create_if_missing {
            return Err(Error::invalid(format!(
                "{} is not an Ebb database: it has no CURRENT file (set create_if_missing to create one)",
                dir.display()
            )));
        }
        // A creation that failed before CURRENT was installed leaves its empty
        // MANIFEST-000001 and CURRENT's temporary; creating again overwrites
        // them. A database opened even once has a later MANIFEST, a WAL and an
        // OPTIONS file, so it is still refused.
        let current_tmp = current.with_extension("dbtmp");
        let foreign = fs.list_dir(dir)?.into_iter().any(|n| {
            dir.join(&n) != current_tmp
                && !matches!(
                    filename::parse_file_name(&n),
                    Some(
                        (filename::FileType::Lock | filename::FileType::InfoLog, _) | (filename::FileType::Manifest, 1)
                    )
                )
        });
        if foreign {
            return Err(Error::invalid(format!(
                "{} is not empty and holds no Ebb database; refusing to create one there",
                dir.display()
            )));
        }
        VersionSet::create_new(dir, fs.as_ref())?;
    }
    let versions = VersionSet::recover(dir, Arc::clone(&fs), options.num_levels, options.max_manifest_file_size)?;
    let block_cache = crate::cache::block_cache_for(&options)?;
    let tables = Arc::new(TableCache::new(dir.to_path_buf(), Arc::clone(&fs), block_cache, &options));
    let num_levels = options.num_levels;
    // The tuning mode's option changes (the thesis's PrepareAutoTunedCompactions,
    // or the adaptive tuner's stall backstop) are part of the options in force.
    let mut options = options;
    for (name, value) in super::tuning::changes_at_open(&options) {
        options.set(name, &value)?;
    }
    let tuning = super::tuning::TuningHooks::new(&options)?;
    let options = Arc::new(options);
    let inner = Arc::new(DbInner {
        dir: dir.to_path_buf(),
        fs: Arc::clone(&fs),
        options: Mutex::new(Arc::clone(&options)),
        state: Mutex::new(DbState {
            mem: Arc::new(MemTable::new(0)),
            versions,
            imm: Vec::new(),
            bg_error: None,
            snapshots: BTreeMap::new(),
            pending_outputs: Vec::new(),
            being_compacted: HashSet::new(),
            live_versions: Vec::new(),
            flush_running: 0,
            compactions_running: 0,
            manual_compactions: 0,
            paused: 0,
            shutting_down: false,
            wal_number: 0,
            controller: super::write::WriteController::default(),
            running_jobs: Vec::new(),
            stall_cache: None,
        }),
        bg_cv: Condvar::new(),
        work_cv: Condvar::new(),
        queue: Mutex::new(VecDeque::new()),
        wal: Mutex::new(None),
        super_version: Mutex::new(Arc::new(super::SuperVersion {
            mem: Arc::new(MemTable::new(0)),
            imm: Vec::new(),
            version: Arc::new(crate::version::Version::new(num_levels)),
        })),
        last_sequence: AtomicU64::new(0),
        tables,
        stats: Arc::new(Stats::with_histograms(num_levels, options.statistics)),
        closed: AtomicBool::new(false),
        threads: Mutex::new(Vec::new()),
        pool_sizes: Mutex::new(PoolSizes::default()),
        tuning,
        _lock: lock,
    });
    recover_wals(&inner, &options)?;
    write_options_file(&inner, &options)?;
    // The info log is created at open, as RocksDB does: failing to create it
    // fails the open; later dumps into it are best effort.
    let info_log = if options.stats_dump_period_sec > 0 {
        let mut log = fs.new_writable(&filename::info_log_file(dir))?;
        log.append(format!("Ebb {} opened {}\n", env!("CARGO_PKG_VERSION"), dir.display()).as_bytes())?;
        log.flush()?;
        Some(log)
    } else {
        None
    };
    // From here on background threads hold the database: a failure must shut
    // them down, or they would keep the directory locked.
    if let Err(e) = start_threads(&inner, dir, info_log) {
        let _ = inner.close();
        return Err(e);
    }
    Ok(Db { inner })
}

fn start_threads(inner: &Arc<DbInner>, dir: &Path, info_log: Option<Box<dyn crate::fs::WritableFile>>) -> Result<()> {
    let mut sizes = PoolSizes::default();
    let spawned = inner.ensure_threads(&mut sizes);
    *inner.pool_sizes.lock() = sizes;
    spawned?;
    if let Some(log) = info_log {
        let dumper = Arc::clone(inner);
        let handle = std::thread::Builder::new()
            .name("ebb-stats".into())
            .spawn(move || dumper.stats_dump_loop(log))
            .map_err(|e| Error::io("spawn stats thread", dir, e))?;
        inner.threads.lock().push(handle);
    }
    if inner.tuning.mode != crate::tuning::BackgroundTuning::Off {
        let tuner = Arc::clone(inner);
        let handle = std::thread::Builder::new()
            .name("ebb-tuner".into())
            .spawn(move || tuner.tuning_loop())
            .map_err(|e| Error::io("spawn tuning thread", dir, e))?;
        inner.threads.lock().push(handle);
    }
    Ok(())
}

/// Replays the WALs into memtables, flushes them to L0, and starts a new WAL.
fn recover_wals(inner: &Arc<DbInner>, options: &Options) -> Result<()> {
    let mut st = inner.state.lock();
    let log_number = st.versions.log_number();
    let mut wals: Vec<u64> = inner
        .fs
        .list_dir(&inner.dir)?
        .iter()
        .filter_map(|n| filename::parse_file_name(n))
        .filter(|(t, n)| *t == filename::FileType::Wal && *n >= log_number)
        .map(|(_, n)| n)
        .collect();
    wals.sort_unstable();
    // Every WAL found keeps its number out of use, also those a point-in-time
    // recovery will not replay: the new WAL must be numbered above them, or
    // they would not become obsolete and a later open would replay them.
    if let Some(newest) = wals.last() {
        st.versions.set_next_file_at_least(newest + 1);
    }
    // Every live SST must exist.
    let version = st.versions.current();
    for f in version.levels.iter().flatten() {
        let path = filename::table_file(&inner.dir, f.number);
        if !inner.fs.exists(&path) {
            return Err(Error::corruption(
                path.display().to_string(),
                0,
                format!("SST {} listed in the MANIFEST is missing", f.number),
            ));
        }
    }
    let mut last_seq = st.versions.last_sequence();
    let mut mems: Vec<Arc<MemTable>> = Vec::new();
    // Each recovered memtable is labelled with the oldest WAL it holds data
    // from, as a live one is, so flushing it makes obsolete only older WALs.
    let mut mem = Arc::new(MemTable::new(wals.first().copied().unwrap_or(0)));
    for (i, number) in wals.iter().enumerate() {
        let path = filename::wal_file(&inner.dir, *number);
        let name = path.display().to_string();
        let is_last = i + 1 == wals.len();
        let outcome = crate::wal::replay(inner.fs.as_ref(), &path, options.wal_recovery_mode, is_last, |record| {
            let batch = WriteBatch::from_data(record, &name, 0)?;
            let mut seq = batch.sequence();
            for op in batch.iter() {
                match op {
                    Ok(BatchOp::Put { key, value }) => mem.add(seq, ValueKind::Value, key, value),
                    Ok(BatchOp::Delete { key }) => mem.add(seq, ValueKind::Deletion, key, &[]),
                    Err(reason) => return Err(Error::corruption(&name, 0, reason)),
                }
                seq += 1;
            }
            last_seq = last_seq.max(seq.saturating_sub(1));
            if mem.approximate_memory_usage() >= options.write_buffer_size {
                mems.push(std::mem::replace(&mut mem, Arc::new(MemTable::new(*number))));
            }
            Ok(())
        })?;
        if outcome.stop_replay {
            break;
        }
    }
    if !mem.is_empty() {
        mems.push(mem);
    }
    inner.last_sequence.store(last_seq, std::sync::atomic::Ordering::Release);
    st.versions.set_last_sequence(last_seq);
    // Start the new WAL first: its number becomes the log number, which makes
    // every replayed WAL obsolete once the flush below is recorded.
    let wal_number = st.versions.new_file_number();
    let path = filename::wal_file(&inner.dir, wal_number);
    let file = crate::fs::WriteBehindFile::wrap(inner.fs.new_writable(&path)?, options.wal_bytes_per_sync);
    let mut writer = LogWriter::new(file, path.display().to_string());
    writer.sync()?;
    *inner.wal.lock() = Some(writer);
    st.wal_number = wal_number;
    st.mem = Arc::new(MemTable::new(wal_number));
    // The recovered memtables wait in `imm` while they are flushed one at a
    // time, so each flush's edit keeps the log number at the oldest WAL a
    // memtable still to be flushed came from: a failure or crash between two
    // of these flushes must not leave the later memtables' WALs obsolete.
    st.imm = mems.clone();
    for m in &mems {
        inner.flush_memtables(&mut st, std::slice::from_ref(m))?;
    }
    if mems.is_empty() {
        // Record the new log number so the old WALs become obsolete.
        let edit = crate::version::VersionEdit { log_number: Some(wal_number), ..Default::default() };
        st.versions.log_and_apply(edit)?;
    }
    inner.fs.sync_dir(&inner.dir)?;
    inner.install_super_version(&mut st);
    inner.delete_obsolete_files(&mut st);
    Ok(())
}

fn write_options_file(inner: &Arc<DbInner>, options: &Options) -> Result<()> {
    let number = inner.state.lock().versions.new_file_number();
    let path = filename::options_file(&inner.dir, number);
    inner.fs.write_file_atomic(&path, options.to_text().as_bytes())?;
    let mut st = inner.state.lock();
    inner.delete_obsolete_files(&mut st);
    Ok(())
}

pub(super) fn destroy(dir: &Path, options: &Options) -> Result<()> {
    let fs = &options.fs;
    if !fs.exists(dir) {
        return Ok(());
    }
    let lock = fs.lock_file(&filename::lock_file(dir))?;
    for name in fs.list_dir(dir)? {
        if let Some((kind, _)) = filename::parse_file_name(&name) {
            if kind != filename::FileType::Lock {
                fs.remove_file(&dir.join(&name))?;
            }
        }
    }
    drop(lock);
    let _ = fs.remove_file(&filename::lock_file(dir));
    let _ = fs.remove_dir(dir);
    Ok(())
}
