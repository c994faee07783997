//! Opening (creating or recovering), and destroying a database.
//!
//! Recovery: lock the directory; read CURRENT and replay the MANIFEST; replay
//! every WAL numbered at or above the smallest log number of any column
//! family, oldest first, under `wal_recovery_mode`, skipping each entry of a
//! family whose log number is above the WAL's (already in its tables) or that
//! was dropped; write what was recovered into L0 tables of each family and
//! record them with new log numbers; start a new WAL; delete obsolete files.
//! The recovered data is durable before the old WALs go.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use super::bg::PoolSizes;
use super::column_family::{ColumnFamilyData, FamilyState};
use super::table_cache::TableCache;
use super::{BatchOp, Db, DbInner, DbState, WriteBatch};
use crate::error::{Error, Result};
use crate::key::ValueKind;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::stats::Stats;
use crate::version::{filename, VersionSet, DEFAULT_COLUMN_FAMILY};
use crate::wal::LogWriter;

pub(super) fn open(dir: &Path, options: Options, families: &[(&str, Options)]) -> Result<Db> {
    options.validate()?;
    for (name, o) in families {
        if *name != DEFAULT_COLUMN_FAMILY {
            o.validate().map_err(|e| Error::invalid(format!("column family '{name}': {e}")))?;
        }
        if families.iter().filter(|(n, _)| n == name).count() > 1 {
            return Err(Error::invalid(format!("column family '{name}' is listed twice")));
        }
    }
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
    // The default family is configured by `options`, the others by theirs.
    let listed = |name: &str| families.iter().find(|(n, _)| *n == name && name != DEFAULT_COLUMN_FAMILY);
    let default_levels = options.num_levels;
    let levels_for = |name: &str| listed(name).map_or(default_levels, |(_, o)| o.num_levels);
    let versions = VersionSet::recover(dir, Arc::clone(&fs), &levels_for, options.max_manifest_file_size)?;
    // RocksDB's rule: every family must be opened, and only existing ones.
    for f in versions.families().values() {
        if f.name != DEFAULT_COLUMN_FAMILY && !families.iter().any(|(n, _)| *n == f.name) {
            return Err(Error::invalid(format!(
                "column family '{}' exists in {} but was not opened (list every family in Db::open_cf)",
                f.name,
                dir.display()
            )));
        }
    }
    for (name, _) in families {
        if *name != DEFAULT_COLUMN_FAMILY && !versions.families().values().any(|f| f.name == *name) {
            return Err(Error::invalid(format!(
                "column family '{name}' does not exist in {} (create it with create_column_family)",
                dir.display()
            )));
        }
    }
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
    let mut family_states = BTreeMap::new();
    for (id, f) in versions.families() {
        let o = match listed(&f.name) {
            Some((_, o)) if *id != 0 => Arc::new(o.clone()),
            _ => Arc::clone(&options),
        };
        let data = ColumnFamilyData::new(*id, &f.name, o);
        family_states.insert(*id, FamilyState { data, mem: Arc::new(MemTable::new(0)), imm: Vec::new() });
    }
    let default_cf = family_states
        .get(&0)
        .map(|f| Arc::clone(&f.data))
        .ok_or_else(|| Error::corruption("MANIFEST", 0, "no default column family"))?;
    let inner = Arc::new(DbInner {
        dir: dir.to_path_buf(),
        fs: Arc::clone(&fs),
        options: Mutex::new(Arc::clone(&options)),
        state: Mutex::new(DbState {
            versions,
            families: family_states,
            old_wals: VecDeque::new(),
            wal_full_flushed: 0,
            last_compacted_family: 0,
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
        default_cf,
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
    for family in st.versions.families().values() {
        for f in family.current.levels.iter().flatten() {
            let path = filename::table_file(&inner.dir, f.number);
            if !inner.fs.exists(&path) {
                return Err(Error::corruption(
                    path.display().to_string(),
                    0,
                    format!("SST {} listed in the MANIFEST is missing", f.number),
                ));
            }
        }
    }
    let mut last_seq = st.versions.last_sequence();
    // Per family: the recovered memtables, the one being filled, its options
    // and its log number. Each recovered memtable is labelled with the oldest
    // WAL it holds data from, as a live one is, so flushing it makes obsolete
    // only older WALs.
    struct Recovering {
        mems: Vec<Arc<MemTable>>,
        mem: Option<Arc<MemTable>>,
        write_buffer_size: usize,
        log_number: u64,
    }
    let mut recovering: BTreeMap<u32, Recovering> = st
        .families
        .iter()
        .map(|(id, f)| {
            let r = Recovering {
                mems: Vec::new(),
                mem: None,
                write_buffer_size: inner.family_opts(&f.data).write_buffer_size,
                log_number: st.versions.family_log_number(*id),
            };
            (*id, r)
        })
        .collect();
    for (i, number) in wals.iter().enumerate() {
        let path = filename::wal_file(&inner.dir, *number);
        let name = path.display().to_string();
        let is_last = i + 1 == wals.len();
        let outcome = crate::wal::replay(inner.fs.as_ref(), &path, options.wal_recovery_mode, is_last, |record| {
            let batch = WriteBatch::from_data(record, &name, 0)?;
            let mut seq = batch.sequence();
            for op in batch.iter_cf() {
                let (cf, op) = op.map_err(|reason| Error::corruption(&name, 0, reason))?;
                // A dropped family's entries, and those already in a family's
                // tables, are skipped.
                if let Some(r) = recovering.get_mut(&cf).filter(|r| *number >= r.log_number) {
                    let mem = r.mem.get_or_insert_with(|| Arc::new(MemTable::new(*number)));
                    match op {
                        BatchOp::Put { key, value } => mem.add(seq, ValueKind::Value, key, value),
                        BatchOp::Delete { key } => mem.add(seq, ValueKind::Deletion, key, &[]),
                    }
                    if mem.approximate_memory_usage() >= r.write_buffer_size {
                        r.mems.extend(r.mem.take());
                    }
                }
                seq += 1;
            }
            last_seq = last_seq.max(seq.saturating_sub(1));
            Ok(())
        })?;
        if outcome.stop_replay {
            break;
        }
    }
    inner.last_sequence.store(last_seq, std::sync::atomic::Ordering::Release);
    st.versions.set_last_sequence(last_seq);
    // Start the new WAL first: its number becomes the log number, which makes
    // every replayed WAL obsolete once the flushes below are recorded.
    let wal_number = st.versions.new_file_number();
    let path = filename::wal_file(&inner.dir, wal_number);
    let file = crate::fs::WriteBehindFile::wrap(inner.fs.new_writable(&path)?, options.wal_bytes_per_sync);
    let mut writer = LogWriter::new(file, path.display().to_string());
    writer.sync()?;
    *inner.wal.lock() = Some(writer);
    st.wal_number = wal_number;
    // The recovered memtables wait in `imm` while they are flushed one at a
    // time, so each flush's edit keeps the family's log number at the oldest
    // WAL a memtable still to be flushed came from: a failure or crash
    // between two of these flushes must not leave the later memtables' WALs
    // obsolete. The other families' log numbers advance with the first
    // flush (see `flush_memtables`), each to its own oldest memtable.
    let mut to_flush = Vec::new();
    for (id, r) in recovering.iter_mut() {
        r.mems.extend(r.mem.take().filter(|m| !m.is_empty()));
        if let Some(family) = st.families.get_mut(id) {
            family.mem = Arc::new(MemTable::new(wal_number));
            family.imm = r.mems.clone();
            to_flush.extend(r.mems.iter().map(|m| (*id, Arc::clone(m))));
        }
    }
    for (id, m) in &to_flush {
        inner.flush_memtables(&mut st, *id, std::slice::from_ref(m))?;
    }
    // Record the new log number of every family not advanced by a flush, so
    // the old WALs become obsolete.
    let edits: Vec<crate::version::VersionEdit> = st
        .families
        .keys()
        .filter(|id| st.versions.family_log_number(**id) < wal_number)
        .map(|id| crate::version::VersionEdit {
            column_family: *id,
            log_number: Some(wal_number),
            ..Default::default()
        })
        .collect();
    if !edits.is_empty() {
        st.versions.log_and_apply_all(edits)?;
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
