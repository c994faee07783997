//! Opening (creating or recovering), and destroying a database.
//!
//! Open: decide whether the directory is (or may become) a database before
//! taking its LOCK, so a directory that is not one is left as it was; lock
//! it; start the info log; read CURRENT and replay the MANIFEST
//! (`VersionSet::recover`: damage is corruption, only an incomplete last
//! record is ignored); then `recovery::recover` replays every WAL numbered at
//! or above the smallest log number of any column family under
//! `wal_recovery_mode`, skipping each entry of a family whose log number is
//! above the WAL's (already in its tables) or that was dropped, writes what
//! was recovered into L0 tables of each family, records them with a new WAL
//! in a new MANIFEST, and cleans the directory without deleting evidence.
//! The recovered data is durable before the old WALs go.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use parking_lot::{Condvar, Mutex};

use super::blob_cache::BlobFileCache;
use super::column_family::ColumnFamilyData;
use super::info_log::{InfoLog, Level};
use super::{Db, DbInner, DbState};
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::options::{ColumnFamilyOptions, Options};
use crate::stats::Stats;
use crate::tuning::command::FamilyId;
use crate::version::{filename, FamilyShape, FileMetaData, VersionSet, DEFAULT_COLUMN_FAMILY};
use crate::version::{TableCache, TableCacheOptions};

pub(super) fn open(dir: &Path, options: Options, families: &[(&str, ColumnFamilyOptions)]) -> Result<Db> {
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
    } else if let Err(e) = fs.list_dir(dir) {
        if let Error::Io { source, .. } = &e {
            if source.raw_os_error() == Some(libc::ENOTDIR) {
                return Err(Error::invalid(format!("{} is a regular file, not a database directory", dir.display())));
            }
        }
        return Err(e);
    }
    // Refused before the LOCK is taken, so a directory that is not a
    // database is left without a LOCK file.
    let current = filename::current_file(dir);
    if !fs.exists(&current) {
        check_creatable(dir, fs.as_ref(), &options)?;
    }
    let lock = fs.lock_file(&filename::lock_file(dir))?;
    check_direct_io(dir, fs.as_ref(), &options)?;
    if fs.exists(&current) {
        if options.error_if_exists {
            return Err(Error::invalid(format!("{} already exists (error_if_exists is set)", dir.display())));
        }
    } else {
        // Checked again under the lock: another process may have been at work.
        check_creatable(dir, fs.as_ref(), &options)?;
    }
    // Before recovery, so what recovery finds is written down.
    let info_log = Arc::new(InfoLog::open(fs.as_ref(), dir, options.keep_log_file_num)?);
    open_locked(dir, options, families, lock, Arc::clone(&info_log), false).inspect_err(|e| {
        info_log.log(Level::Error, &format!("open failed: {e}"));
    })
}

/// Holds nothing: a read-only instance takes no LOCK.
pub(super) struct NoLock;
impl crate::fs::FileLock for NoLock {}

/// Opens the database in `dir` read-only (RocksDB's `OpenForReadOnly`):
/// no LOCK is taken and no file is written, created or deleted (no info
/// log either); the MANIFEST is read and the WALs replayed into memtables
/// that are never flushed; no background thread starts. Column families
/// not listed open with the default family's options.
pub(super) fn open_read_only(dir: &Path, options: Options, families: &[(&str, ColumnFamilyOptions)]) -> Result<Db> {
    options.validate()?;
    for (name, o) in families {
        if *name != DEFAULT_COLUMN_FAMILY {
            o.validate().map_err(|e| Error::invalid(format!("column family '{name}': {e}")))?;
        }
    }
    let fs = Arc::clone(&options.fs);
    if !fs.exists(&filename::current_file(dir)) {
        return Err(Error::invalid(format!(
            "{} is not an Ebb database: it has no CURRENT file (a read-only open creates nothing)",
            dir.display()
        )));
    }
    open_beside_primary(dir, &options, families, Arc::new(InfoLog::disabled()))
}

/// Attempts [`open_beside_primary`] makes while the primary moves on.
const BESIDE_PRIMARY_ATTEMPTS: usize = 20;

/// Opens `dir` read-only without its lock (a read-only or secondary
/// instance), beside a primary that may be writing. The primary can delete
/// a table or WAL that the MANIFEST being read still names (a compaction
/// finished, a WAL flushed), or rename a WAL the attempt listed (a pending
/// WAL becomes `NNNNNN.log` once the one before it is sealed); an attempt
/// that fails while the primary's MANIFEST or its WALs moved on is made
/// again, up to `BESIDE_PRIMARY_ATTEMPTS` times. An error with both
/// unchanged is the database's own, and returned as it is.
pub(super) fn open_beside_primary(
    dir: &Path,
    options: &Options,
    families: &[(&str, ColumnFamilyOptions)],
    info_log: Arc<InfoLog>,
) -> Result<Db> {
    let fs = Arc::clone(&options.fs);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let before = (manifest_marker(fs.as_ref(), dir), wal_names(fs.as_ref(), dir));
        match open_locked(dir, options.clone(), families, Box::new(NoLock), Arc::clone(&info_log), true) {
            Ok(db) => return Ok(db),
            Err(e)
                if attempt >= BESIDE_PRIMARY_ATTEMPTS
                    || (manifest_marker(fs.as_ref(), dir), wal_names(fs.as_ref(), dir)) == before =>
            {
                return Err(e)
            }
            Err(_) => {}
        }
    }
}

/// The names of the WAL files in `dir` (pending ones included), sorted;
/// empty when it cannot be listed. A primary changes them as it starts,
/// seals and deletes WALs.
fn wal_names(fs: &dyn FileSystem, dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs
        .list_dir(dir)
        .unwrap_or_default()
        .into_iter()
        .filter(|n| matches!(filename::parse_file_name(n), Some((filename::FileType::Wal, _))))
        .collect();
    names.sort();
    names
}

/// What names a database's MANIFEST state: CURRENT's text and the size of
/// the MANIFEST it names. It changes with every edit a primary records.
pub(super) fn manifest_marker(fs: &dyn FileSystem, dir: &Path) -> Option<(Vec<u8>, u64)> {
    let current = fs.read_file(&filename::current_file(dir)).ok()?;
    let name = String::from_utf8_lossy(&current).trim().to_string();
    let size = fs.file_size(&dir.join(&name)).ok()?;
    Some((current, size))
}

/// Refuses to create a database in `dir` unless asked to and `dir` holds
/// nothing but what a failed creation leaves.
fn check_creatable(dir: &Path, fs: &dyn FileSystem, options: &Options) -> Result<()> {
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
    let current_tmp = filename::current_file(dir).with_extension("dbtmp");
    // A TTL database's marker (and its temporary) is written first, before
    // the database is created (db/ttl.rs).
    let ttl_marker = super::ttl::marker_path(dir);
    let foreign = fs.list_dir(dir)?.into_iter().any(|n| {
        dir.join(&n) != current_tmp
            && dir.join(&n) != ttl_marker
            && dir.join(&n) != ttl_marker.with_extension("dbtmp")
            && !matches!(
                filename::parse_file_name(&n),
                Some((filename::FileType::Lock | filename::FileType::InfoLog, _) | (filename::FileType::Manifest, 1))
            )
    });
    if foreign {
        return Err(Error::invalid(format!(
            "{} is not empty and holds no Ebb database; refusing to create one there",
            dir.display()
        )));
    }
    Ok(())
}

/// The rest of `open`, with the directory locked and the info log started.
pub(super) fn open_locked(
    dir: &Path,
    options: Options,
    families: &[(&str, ColumnFamilyOptions)],
    lock: Box<dyn crate::fs::FileLock>,
    info_log: Arc<InfoLog>,
    read_only: bool,
) -> Result<Db> {
    let fs = Arc::clone(&options.fs);
    if !read_only && !fs.exists(&filename::current_file(dir)) {
        VersionSet::create_new(dir, fs.as_ref(), &options.cf_options().user_comparator())?;
    }
    // The default family is configured by `options`, the others by theirs.
    let listed = |name: &str| families.iter().find(|(n, _)| *n == name && name != DEFAULT_COLUMN_FAMILY);
    let default_shape =
        FamilyShape { num_levels: options.num_levels, comparator: options.cf_options().user_comparator() };
    let shape_for = |name: &str| {
        listed(name).map_or_else(
            || default_shape.clone(),
            |(_, o)| FamilyShape { num_levels: o.num_levels, comparator: o.user_comparator() },
        )
    };
    let (versions, manifest) = VersionSet::recover(
        dir,
        Arc::clone(&fs),
        &shape_for,
        options.max_manifest_file_size,
        options.best_efforts_recovery,
    )?;
    // RocksDB's rule: every family must be opened, and only existing ones.
    for f in versions.families().values().filter(|_| !read_only) {
        if f.name != DEFAULT_COLUMN_FAMILY && !families.iter().any(|(n, _)| *n == f.name) {
            return Err(Error::invalid(format!(
                "column family '{}' exists in {} but was not opened (list every family in Db::open_cf)",
                f.name,
                dir.display()
            )));
        }
    }
    // Listed families the database lacks: created once it is open when
    // `create_missing_column_families` asks, refused otherwise.
    let mut missing = Vec::new();
    for (name, family_options) in families {
        if *name != DEFAULT_COLUMN_FAMILY && !versions.families().values().any(|f| f.name == *name) {
            if options.create_missing_column_families && !read_only {
                missing.push((*name, family_options.clone()));
                continue;
            }
            return Err(Error::invalid(format!(
                "column family '{name}' does not exist in {} (create it with create_column_family, \
                 or set create_missing_column_families)",
                dir.display()
            )));
        }
    }
    let block_cache = crate::options::block_cache_for(&options)?;
    let tables = Arc::new(TableCache::new(
        dir.to_path_buf(),
        Arc::clone(&fs),
        block_cache,
        TableCacheOptions::from_options(&options),
    ));
    let num_levels = options.num_levels;
    let stats = Arc::new(Stats::with_histograms(num_levels, options.statistics));
    let blobs = Arc::new(BlobFileCache::new(
        dir.to_path_buf(),
        Arc::clone(&fs),
        Arc::clone(&stats),
        options.table_cache_capacity(),
        options.use_direct_reads,
    ));
    // The tuning mode's option changes (the thesis's PrepareAutoTunedCompactions,
    // or the adaptive tuner's stall backstop) are part of the options in force.
    let configured = options.cf_options();
    let tuned = super::tuning::family_options_at_open(&options, FamilyId::DEFAULT, configured.clone());
    let options = options.with_cf_options(tuned);
    let tuning = super::tuning::TuningHooks::new(&options)?;
    tuning.track_family(FamilyId::DEFAULT, &configured);
    let options = Arc::new(options);
    let instance = super::next_instance();
    let mut opened = Vec::new();
    for (id, f) in versions.families() {
        let o = match listed(&f.name) {
            Some((_, o)) if *id != 0 => {
                tuning.track_family(FamilyId(*id), o);
                Arc::new(super::tuning::family_options_at_open(&options, FamilyId(*id), o.clone()))
            }
            _ => Arc::new(options.cf_options()),
        };
        let data = ColumnFamilyData::new(*id, &f.name, o, instance);
        data.raise_full_history_ts_low(f.full_history_ts_low);
        opened.push(data);
    }
    let families = super::memtables::Memtables::new(opened);
    let default_cf = families.data(0).ok_or_else(|| Error::corruption("MANIFEST", 0, "no default column family"))?;
    let inner = Arc::new(DbInner {
        instance,
        dir: dir.to_path_buf(),
        fs: Arc::clone(&fs),
        job_fs: if options.use_direct_io_for_flush_and_compaction {
            Arc::new(crate::fs::DirectWrites(Arc::clone(&fs)))
        } else {
            Arc::clone(&fs)
        },
        options: Mutex::new(Arc::clone(&options)),
        state: Mutex::new(DbState {
            versions,
            families,
            bg_error: Default::default(),
            jobs: Default::default(),
            files: Default::default(),
            snapshots: Default::default(),
            manifest_queue: Default::default(),
            controller: Default::default(),
        }),
        bg_cv: Condvar::new(),
        work_cv: Condvar::new(),
        manifest_cv: Condvar::new(),
        queue: Default::default(),
        wal: Default::default(),
        wal_sealer: Default::default(),
        wal_archive: super::wal_archive::WalArchive::new(dir),
        write_buffer_manager: options.write_buffer_manager.clone().or_else(|| {
            (options.db_write_buffer_size > 0)
                .then(|| crate::write_buffer_manager::WriteBufferManager::new(options.db_write_buffer_size, false))
        }),
        prepared: Default::default(),
        default_cf,
        last_sequence: Default::default(),
        tables,
        blobs,
        stats,
        closed: Default::default(),
        threads: Default::default(),
        tuning,
        info_log,
        recovery_report: OnceLock::new(),
        read_only,
        secondary: OnceLock::new(),
        _lock: lock,
    });
    let report = super::recovery::recover(&inner, &options, manifest, read_only)?;
    if !report.is_empty() {
        inner.info_log.log(Level::Warn, &format!("recovery report:\n{report}"));
        inner.notify_event("on_recovery_damage", |l| l.on_recovery_damage(&report));
    }
    let _ = inner.recovery_report.set(report);
    inner.open_tables_at_open(&options)?;
    if read_only {
        return Ok(Db { inner });
    }
    inner.wal_archive.load(inner.fs.as_ref(), options.clock.now_secs())?;
    inner.clean_wal_archive();
    inner.write_options_file()?;
    // From here on background threads hold the database: a failure must shut
    // them down, or they would keep the directory locked.
    if let Err(e) = start_threads(&inner, dir) {
        let _ = inner.close();
        return Err(e);
    }
    let db = Db { inner };
    for (name, family_options) in missing {
        if let Err(e) = db.create_column_family(name, family_options) {
            let _ = db.close();
            return Err(e);
        }
    }
    Ok(db)
}

fn start_threads(inner: &Arc<DbInner>, dir: &Path) -> Result<()> {
    inner.ensure_threads()?;
    if inner.opts().stats_dump_period_sec > 0 {
        let dumper = Arc::clone(inner);
        inner.threads.spawn("ebb-stats".into(), dir, move || dumper.stats_dump_loop())?;
    }
    if inner.tuning.mode != crate::tuning::BackgroundTuning::Off {
        let tuner = Arc::clone(inner);
        inner.threads.spawn("ebb-tuner".into(), dir, move || tuner.tuning_loop())?;
    }
    Ok(())
}

impl DbInner {
    /// Opens the live tables of every family before the database is handed
    /// out, as RocksDB's `LoadTableHandlers` does at open: all of them with
    /// `max_open_files = -1`, else at most 16 and a quarter of the table
    /// cache, `max_file_opening_threads` at a time. The first reads then
    /// find their tables open instead of each opening the files it
    /// touches. A table that cannot be opened fails the open, naming it, as
    /// in RocksDB (`Db::repair` recovers what the others hold).
    pub(crate) fn open_tables_at_open(&self, options: &Options) -> Result<()> {
        let limit = match options.table_cache_capacity() {
            None => usize::MAX,
            Some(capacity) => (capacity / 4).min(16),
        };
        let mut files = Vec::new();
        {
            let st = self.state.lock();
            'families: for (_, family) in st.families.iter() {
                let data = family.data();
                let sv = data.super_version();
                for (level, level_files) in sv.version.levels.iter().enumerate() {
                    for f in level_files {
                        if files.len() == limit {
                            break 'families;
                        }
                        files.push((Arc::clone(f), level, data.cmp.clone()));
                    }
                }
            }
        }
        let threads = (options.max_file_opening_threads.max(1) as usize).min(files.len());
        let next = std::sync::atomic::AtomicUsize::new(0);
        let failed: Mutex<Option<Error>> = Mutex::new(None);
        let open = || {
            while let Some((f, level, cmp)) = files.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed)) {
                if let Err(e) = self.tables.get(f, *level, cmp) {
                    // The first failure is the open's; the others stop.
                    next.store(files.len(), std::sync::atomic::Ordering::Relaxed);
                    failed.lock().get_or_insert(e);
                }
            }
        };
        // This thread opens tables too; a helper that cannot be started
        // leaves its share to the others.
        std::thread::scope(|scope| {
            for _ in 1..threads {
                let _ = std::thread::Builder::new().name("ebb-open-tables".into()).spawn_scoped(scope, open);
            }
            open();
        });
        match failed.into_inner() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Opens the tables a flush or compaction wrote (`files`, of `level` in
    /// a family ordered by `cmp`) before they are installed, as RocksDB
    /// opens its outputs to check them: the reads that follow the install
    /// find them open, and an output that cannot be opened fails the job
    /// instead of the reads.
    pub(crate) fn open_new_tables(&self, files: &[FileMetaData], level: usize, cmp: &UserComparator) -> Result<()> {
        for f in files {
            self.tables.get(f, level, cmp)?;
        }
        Ok(())
    }

    /// The OPTIONS-file text of the options in force: the database's and
    /// the default family's, then every other family's.
    pub(crate) fn options_file_text(&self) -> String {
        let families: Vec<(String, Arc<ColumnFamilyOptions>)> = {
            let st = self.state.lock();
            st.families
                .iter()
                .filter(|(id, _)| *id != 0)
                .map(|(_, f)| (f.data().name.clone(), f.data().options_arc()))
                .collect()
        };
        let refs: Vec<(&str, &ColumnFamilyOptions)> = families.iter().map(|(n, o)| (n.as_str(), o.as_ref())).collect();
        self.opts().to_text_with_families(&refs)
    }

    /// Writes a new OPTIONS file with the options in force (at open, and
    /// after a family is created or dropped or options change); the older
    /// ones go with the next obsolete-file scan.
    pub(crate) fn write_options_file(&self) -> Result<()> {
        if self.read_only {
            return Ok(());
        }
        let number = self.state.lock().versions.new_file_number();
        let path = filename::options_file(&self.dir, number);
        self.fs.write_file_atomic(&path, self.options_file_text().as_bytes())?;
        let mut st = self.state.lock();
        // Older OPTIONS files, and at open whatever the last run left.
        st.files.scan_next_time();
        self.delete_obsolete_files(&mut st);
        Ok(())
    }
}

/// Direct I/O asked for (`use_direct_reads`,
/// `use_direct_io_for_flush_and_compaction`) is refused at open, before
/// recovery, where the filesystem refuses it, as RocksDB's open is: the
/// LOCK file is opened for a direct read. `NotSupported`, naming the
/// options.
fn check_direct_io(dir: &Path, fs: &dyn crate::fs::FileSystem, options: &Options) -> Result<()> {
    if !options.use_direct_reads && !options.use_direct_io_for_flush_and_compaction {
        return Ok(());
    }
    fs.open_random_direct(&filename::lock_file(dir)).map(|_| ())
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
    let archive = super::wal_archive::archive_dir(dir);
    if fs.exists(&archive) {
        for name in fs.list_dir(&archive)? {
            if let Some((filename::FileType::Wal, _)) = filename::parse_file_name(&name) {
                fs.remove_file(&archive.join(&name))?;
            }
        }
        let _ = fs.remove_dir(&archive);
    }
    drop(lock);
    let _ = fs.remove_file(&filename::lock_file(dir));
    let _ = fs.remove_dir(dir);
    Ok(())
}
