//! Incremental backups (RocksDB's `BackupEngine`): docs/operations.md,
//! "Backups"; the directory layout and the meta file format are in
//! docs/format.md, "Backup directory".
//!
//! A backup directory holds
//! - `shared_checksum/`: tables and blob files, each stored once under
//!   `<number>_<crc32c>_<size>.<ext>` and shared by every backup that has
//!   that file (the increment is the files no earlier backup has);
//! - `private/<id>/`: each backup's own files: MANIFEST, CURRENT, OPTIONS,
//!   the WALs, a TTL database's marker;
//! - `meta/<id>`: the list of a backup's files with their sizes and
//!   CRC-32Cs, checksummed itself. Writing it (a temporary, synced, then
//!   renamed) is the step that makes the backup exist: a backup interrupted
//!   before it is ignored, and what it left is removed when an engine next
//!   opens the directory;
//! - `LOCK`, held by the engine open on it.
//!
//! Promises:
//! 1. A backup listed is whole: every file it names was synced before its
//!    meta file was renamed into place.
//! 2. Nothing a listed backup names is ever deleted, except by
//!    `delete_backup`/`purge_old_backups` of every backup naming it; a meta
//!    file that cannot be read is reported (`corrupted_backups`), never
//!    deleted unasked, and while one exists no shared file is collected.
//! 3. A restore checks every byte it copies against the CRC-32C recorded
//!    and refuses a target that holds a live database or anything but an
//!    Ebb database's files; CURRENT is written last, so a restore that
//!    fails leaves no openable half database.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::checkpoint::{
    capture, copy_file, flush_if_needed, remove_dir_and_files, write_private_files, DeletionsHeld,
};
use super::{CheckpointOptions, Db};
use crate::error::{Error, Result};
use crate::fs::{FileLock, FileSystem, PosixFs};
use crate::version::filename;

/// A backup's id: 1 for the first, then one above the largest taken.
pub type BackupId = u32;

const SHARED: &str = "shared_checksum";
const PRIVATE: &str = "private";
const META: &str = "meta";
const META_HEADER: &str = "ebb-backup 1";

/// Where a [`BackupEngine`] keeps its backups.
#[derive(Clone)]
pub struct BackupEngineOptions {
    /// The backup directory (created if missing).
    pub backup_dir: PathBuf,
    /// The filesystem the backups live on (and restores are written to).
    pub fs: Arc<dyn FileSystem>,
}

impl BackupEngineOptions {
    /// Backups in `dir` on the operating system's filesystem.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        BackupEngineOptions { backup_dir: dir.into(), fs: Arc::new(PosixFs) }
    }
}

/// What a backup holds ([`BackupEngine::backup_info`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackupInfo {
    /// Its id.
    pub backup_id: BackupId,
    /// When it was taken, in seconds since the Unix epoch.
    pub timestamp: u64,
    /// The newest sequence number it holds, at least.
    pub sequence: u64,
    /// Bytes of all its files (shared ones counted in full).
    pub size: u64,
    /// Its files, shared and private.
    pub number_files: usize,
}

/// How [`BackupEngine::restore_db_from_backup`] restores.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreOptions {
    /// Replace the database in a target directory that holds one (its
    /// files are deleted first). Off: a target that is not empty is
    /// refused. A database open there is refused either way.
    pub overwrite: bool,
}

/// One file of a backup, as its meta file lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BackupFile {
    /// Relative to the backup directory.
    path: String,
    size: u64,
    crc: u32,
}

#[derive(Debug, Clone)]
struct BackupMeta {
    timestamp: u64,
    sequence: u64,
    files: Vec<BackupFile>,
}

/// Takes, checks, restores and deletes incremental backups of databases in
/// one backup directory (RocksDB's `BackupEngine`). Holds the directory's
/// `LOCK` while open: a second engine on it fails with `Busy`.
pub struct BackupEngine {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    backups: BTreeMap<BackupId, BackupMeta>,
    corrupt: BTreeMap<BackupId, String>,
    _lock: Box<dyn FileLock>,
}

impl std::fmt::Debug for BackupEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupEngine").field("dir", &self.dir).field("backups", &self.backups.len()).finish()
    }
}

impl BackupEngine {
    /// Opens the backup directory (creating it if missing), reads its
    /// backups and removes what interrupted ones left (promise 2).
    ///
    /// Errors: `InvalidArgument` for a directory that holds anything but
    /// backups (a database, say); `Busy` when another engine has it open.
    pub fn open(options: BackupEngineOptions) -> Result<BackupEngine> {
        let BackupEngineOptions { backup_dir: dir, fs } = options;
        if fs.exists(&dir) {
            for name in fs.list_dir(&dir)? {
                if ![SHARED, PRIVATE, META, "LOCK"].contains(&name.as_str()) {
                    return Err(Error::invalid(format!(
                        "{} is not a backup directory: it holds {name} (a backup directory holds only {SHARED}/, \
                         {PRIVATE}/, {META}/ and LOCK)",
                        dir.display()
                    )));
                }
            }
        } else {
            fs.create_dir_all(&dir)?;
        }
        let lock = fs.lock_file(&dir.join("LOCK"))?;
        for sub in [SHARED, PRIVATE, META] {
            fs.create_dir_all(&dir.join(sub))?;
        }
        let mut engine = BackupEngine { dir, fs, backups: BTreeMap::new(), corrupt: BTreeMap::new(), _lock: lock };
        engine.load()?;
        engine.collect_garbage()?;
        Ok(engine)
    }

    /// [`BackupEngine::open`] on the operating system's filesystem.
    pub fn open_dir(dir: impl Into<PathBuf>) -> Result<BackupEngine> {
        BackupEngine::open(BackupEngineOptions::new(dir))
    }

    /// Reads every meta file; an unfinished one (`.tmp`) is removed.
    fn load(&mut self) -> Result<()> {
        let meta_dir = self.dir.join(META);
        for name in self.fs.list_dir(&meta_dir)? {
            if name.ends_with(".tmp") {
                self.fs.remove_file(&meta_dir.join(&name))?;
                continue;
            }
            let Ok(id) = name.parse::<BackupId>() else {
                return Err(Error::invalid(format!(
                    "{} holds {name}, which is not a backup's meta file",
                    meta_dir.display()
                )));
            };
            let path = meta_dir.join(&name);
            match self.fs.read_file(&path).and_then(|bytes| parse_meta(&bytes, &path)) {
                Ok(meta) => {
                    self.backups.insert(id, meta);
                }
                Err(e) => {
                    self.corrupt.insert(id, e.to_string());
                }
            }
        }
        Ok(())
    }

    /// Removes private directories of no listed backup, temporaries, and
    /// shared files no backup names (none while a meta file is corrupt:
    /// what it names is unknown).
    fn collect_garbage(&self) -> Result<()> {
        let private = self.dir.join(PRIVATE);
        for name in self.fs.list_dir(&private)? {
            let known = name
                .parse::<BackupId>()
                .is_ok_and(|id| self.backups.contains_key(&id) || self.corrupt.contains_key(&id));
            if !known {
                remove_dir_and_files(self.fs.as_ref(), &private.join(&name))?;
            }
        }
        let named: BTreeSet<&str> =
            self.backups.values().flat_map(|m| m.files.iter().map(|f| f.path.as_str())).collect();
        let shared = self.dir.join(SHARED);
        for name in self.fs.list_dir(&shared)? {
            let rel = format!("{SHARED}/{name}");
            if name.ends_with(".tmp") || (self.corrupt.is_empty() && !named.contains(rel.as_str())) {
                self.fs.remove_file(&shared.join(&name))?;
            }
        }
        Ok(())
    }

    /// Backs `db` up as a new backup and returns its id (RocksDB's
    /// `CreateNewBackup`). With `flush_before_backup` the memtables are
    /// flushed first; without, the live WALs are copied with the backup (a
    /// restore replays them), and only data written without the WAL is
    /// flushed. The backup holds `db` at one point of its write order, as a
    /// checkpoint does; tables and blob files an earlier backup stored are
    /// not copied again.
    pub fn create_new_backup(&mut self, db: &Db, flush_before_backup: bool) -> Result<BackupId> {
        let inner = &db.inner;
        inner.check_writable("a backup")?;
        let log_size_for_flush = if flush_before_backup { 0 } else { u64::MAX };
        flush_if_needed(inner, &CheckpointOptions { log_size_for_flush })?;
        let id = self.backups.keys().chain(self.corrupt.keys()).max().map_or(1, |m| m + 1);
        let private = self.dir.join(PRIVATE).join(id.to_string());
        if self.fs.exists(&private) {
            remove_dir_and_files(self.fs.as_ref(), &private)?;
        }
        let held = DeletionsHeld::new(inner);
        let captured = capture(inner)?;
        let mut files = Vec::new();
        let copied = (|| -> Result<()> {
            self.fs.create_dir_all(&private)?;
            // The new directory's entry, durable before a meta file names
            // what is in it (MemFs takes a directory's creation as durable,
            // a disk need not).
            self.fs.sync_dir(&self.dir.join(PRIVATE))?;
            let shared = self.dir.join(SHARED);
            for (src, name) in captured.data_files(&inner.dir) {
                let (size, crc) = checksum(inner.fs.as_ref(), &src)?;
                let (stem, ext) = name.rsplit_once('.').unwrap_or((name.as_str(), ""));
                let stored = format!("{stem}_{crc:08x}_{size}.{ext}");
                let path = shared.join(&stored);
                if !self.fs.exists(&path) {
                    let tmp = shared.join(format!("{stored}.tmp"));
                    let got = copy_file(inner.fs.as_ref(), &src, self.fs.as_ref(), &tmp, None)?;
                    if got != (size, crc) {
                        return Err(Error::corruption(
                            src.display().to_string(),
                            0,
                            "the file changed while it was backed up (a table never changes: the disk may be failing)",
                        ));
                    }
                    self.fs.rename(&tmp, &path)?;
                }
                files.push(BackupFile { path: format!("{SHARED}/{stored}"), size, crc });
            }
            self.fs.sync_dir(&shared)?;
            write_private_files(inner, &captured, self.fs.as_ref(), &private)?;
            let mut names = self.fs.list_dir(&private)?;
            names.sort();
            for name in names {
                let (size, crc) = checksum(self.fs.as_ref(), &private.join(&name))?;
                files.push(BackupFile { path: format!("{PRIVATE}/{id}/{name}"), size, crc });
            }
            self.fs.sync_dir(&private)
        })();
        drop(held);
        if let Err(e) = copied {
            let _ = remove_dir_and_files(self.fs.as_ref(), &private);
            return Err(e);
        }
        let meta = BackupMeta { timestamp: now_seconds(), sequence: captured.counters.last_sequence, files };
        let meta_dir = self.dir.join(META);
        let tmp = meta_dir.join(format!("{id}.tmp"));
        let written = (|| -> Result<()> {
            let mut f = self.fs.new_writable(&tmp)?;
            f.append(&encode_meta(&meta))?;
            f.sync()?;
            drop(f);
            self.fs.rename(&tmp, &meta_dir.join(id.to_string()))?;
            self.fs.sync_dir(&meta_dir)
        })();
        if let Err(e) = written {
            // Renamed or not, the backup is not promised: it is listed only
            // by a later open that finds its meta file whole. A meta file
            // renamed before the failure is taken back; one that cannot be
            // counts as a corrupt backup for the rest of this session, so
            // that its files are not collected (nor its id reused) while a
            // later open may still list it.
            let _ = self.fs.remove_file(&tmp);
            let renamed = meta_dir.join(id.to_string());
            let taken_back = !self.fs.exists(&renamed)
                || (self.fs.remove_file(&renamed).is_ok() && self.fs.sync_dir(&meta_dir).is_ok());
            if !taken_back {
                self.corrupt.insert(id, format!("backup {id} failed after its meta file was written: {e}"));
            }
            return Err(e);
        }
        self.backups.insert(id, meta);
        Ok(id)
    }

    /// Every backup, oldest first (RocksDB's `GetBackupInfo`).
    pub fn backup_info(&self) -> Vec<BackupInfo> {
        self.backups
            .iter()
            .map(|(id, m)| BackupInfo {
                backup_id: *id,
                timestamp: m.timestamp,
                sequence: m.sequence,
                size: m.files.iter().map(|f| f.size).sum(),
                number_files: m.files.len(),
            })
            .collect()
    }

    /// Backups whose meta file could not be read, with the reason (RocksDB's
    /// `GetCorruptedBackups`). They are kept until deleted.
    pub fn corrupted_backups(&self) -> Vec<(BackupId, String)> {
        self.corrupt.iter().map(|(id, why)| (*id, why.clone())).collect()
    }

    fn meta(&self, id: BackupId) -> Result<&BackupMeta> {
        if let Some(why) = self.corrupt.get(&id) {
            return Err(Error::corruption(
                self.dir.join(META).join(id.to_string()).display().to_string(),
                0,
                why.clone(),
            ));
        }
        self.backups.get(&id).ok_or_else(|| Error::invalid(format!("no backup {id} in {}", self.dir.display())))
    }

    /// Checks that every file of backup `id` is there with the size and
    /// CRC-32C recorded (RocksDB's `VerifyBackup` with checksums).
    ///
    /// Errors: `Corruption` naming the first file that differs, or is missing.
    pub fn verify_backup(&self, id: BackupId) -> Result<()> {
        for f in &self.meta(id)?.files {
            let path = self.dir.join(&f.path);
            if !self.fs.exists(&path) {
                return Err(Error::corruption(path.display().to_string(), 0, format!("backup {id}'s file is missing")));
            }
            let (size, crc) = checksum(self.fs.as_ref(), &path)?;
            if size != f.size || crc != f.crc {
                return Err(Error::corruption(
                    path.display().to_string(),
                    0,
                    format!(
                        "backup {id}'s file holds {size} bytes with CRC-32C {crc:08x}; its meta file records {} bytes \
                         with CRC-32C {:08x}",
                        f.size, f.crc
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Restores backup `id` into `db_dir` (RocksDB's `RestoreDBFromBackup`),
    /// checking every byte against the CRC-32C recorded. The directory is
    /// created if missing; one that holds anything is refused unless
    /// `options.overwrite`, and then only if it holds nothing but an Ebb
    /// database's files; a database open there is refused (`Busy`).
    pub fn restore_db_from_backup(
        &self,
        id: BackupId,
        db_dir: impl AsRef<Path>,
        options: &RestoreOptions,
    ) -> Result<()> {
        let meta = self.meta(id)?;
        let db_dir = db_dir.as_ref();
        let fs = self.fs.as_ref();
        fs.create_dir_all(db_dir)?;
        let lock_path = filename::lock_file(db_dir);
        let lock = fs.lock_file(&lock_path)?;
        let present: Vec<String> = fs.list_dir(db_dir)?.into_iter().filter(|n| db_dir.join(n) != lock_path).collect();
        if !present.is_empty() {
            if !options.overwrite {
                return Err(Error::invalid(format!(
                    "{} is not empty (it holds {}); set RestoreOptions::overwrite to replace the database in it",
                    db_dir.display(),
                    present[0]
                )));
            }
            let ours = |n: &str| filename::parse_file_name(n).is_some() || n == crate::db::ttl::TTL_MARKER;
            if let Some(foreign) = present.iter().find(|n| !ours(n)) {
                return Err(Error::invalid(format!(
                    "{} holds {foreign}, which is not an Ebb database's file; refusing to overwrite it",
                    db_dir.display()
                )));
            }
            // CURRENT first: from here on the directory is no database.
            let mut order: Vec<&String> = present.iter().collect();
            order.sort_by_key(|n| filename::parse_file_name(n).map(|(t, _)| t) != Some(filename::FileType::Current));
            for name in order {
                fs.remove_file(&db_dir.join(name))?;
            }
        }
        let mut current = None;
        let mut written = Vec::new();
        let restored = (|| -> Result<()> {
            for f in &meta.files {
                let name = restored_name(&f.path);
                if name == "CURRENT" {
                    current = Some(f);
                    continue;
                }
                let to = db_dir.join(&name);
                written.push(to.clone());
                let got = copy_file(fs, &self.dir.join(&f.path), fs, &to, None)?;
                check_copy(&self.dir.join(&f.path), got, f)?;
            }
            let Some(f) = current else {
                return Err(Error::corruption(
                    self.dir.join(META).join(id.to_string()).display().to_string(),
                    0,
                    "the backup lists no CURRENT",
                ));
            };
            let from = self.dir.join(&f.path);
            let bytes = fs.read_file(&from)?;
            check_copy(&from, (bytes.len() as u64, crc32c::crc32c(&bytes)), f)?;
            fs.sync_dir(db_dir)?;
            fs.write_file_atomic(&filename::current_file(db_dir), &bytes)
        })();
        if restored.is_err() {
            for path in written {
                let _ = fs.remove_file(&path);
            }
        }
        drop(lock);
        restored
    }

    /// [`BackupEngine::restore_db_from_backup`] of the newest backup.
    pub fn restore_db_from_latest_backup(&self, db_dir: impl AsRef<Path>, options: &RestoreOptions) -> Result<()> {
        let Some(id) = self.backups.keys().next_back() else {
            return Err(Error::invalid(format!("{} holds no backup", self.dir.display())));
        };
        self.restore_db_from_backup(*id, db_dir, options)
    }

    /// Deletes backup `id` (a corrupt one too): its meta file first, so a
    /// crash leaves it either listed whole or gone; then its private files
    /// and the shared files no other backup names.
    pub fn delete_backup(&mut self, id: BackupId) -> Result<()> {
        if !self.backups.contains_key(&id) && !self.corrupt.contains_key(&id) {
            return Err(Error::invalid(format!("no backup {id} in {}", self.dir.display())));
        }
        let meta_dir = self.dir.join(META);
        self.fs.remove_file(&meta_dir.join(id.to_string()))?;
        self.fs.sync_dir(&meta_dir)?;
        self.backups.remove(&id);
        self.corrupt.remove(&id);
        self.collect_garbage()
    }

    /// Deletes all but the newest `keep` backups (RocksDB's
    /// `PurgeOldBackups`).
    pub fn purge_old_backups(&mut self, keep: usize) -> Result<()> {
        let ids: Vec<BackupId> = self.backups.keys().copied().collect();
        for id in &ids[..ids.len().saturating_sub(keep)] {
            self.delete_backup(*id)?;
        }
        Ok(())
    }
}

/// The name a backup file takes in a restored database: a shared file's
/// `<number>_<crc>_<size>.<ext>` goes back to `<number>.<ext>`.
fn restored_name(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path);
    if !path.starts_with(SHARED) {
        return name.to_string();
    }
    let (stem, ext) = name.rsplit_once('.').unwrap_or((name, ""));
    let number = stem.split('_').next().unwrap_or(stem);
    format!("{number}.{ext}")
}

fn check_copy(from: &Path, got: (u64, u32), f: &BackupFile) -> Result<()> {
    if got != (f.size, f.crc) {
        return Err(Error::corruption(
            from.display().to_string(),
            0,
            format!(
                "{} bytes with CRC-32C {:08x} read; the backup recorded {} bytes with CRC-32C {:08x}",
                got.0, got.1, f.size, f.crc
            ),
        ));
    }
    Ok(())
}

/// The size and CRC-32C of a file.
fn checksum(fs: &dyn FileSystem, path: &Path) -> Result<(u64, u32)> {
    let mut input = fs.open_sequential(path)?;
    let mut buf = vec![0u8; 256 << 10];
    let (mut size, mut crc) = (0u64, 0u32);
    loop {
        let n = input.read(&mut buf)?;
        if n == 0 {
            return Ok((size, crc));
        }
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        size += n as u64;
    }
}

fn now_seconds() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The meta file (docs/format.md, "Backup directory").
fn encode_meta(m: &BackupMeta) -> Vec<u8> {
    let mut text = format!("{META_HEADER}\ntimestamp {}\nsequence {}\n", m.timestamp, m.sequence);
    for f in &m.files {
        text.push_str(&format!("file {} {} {:08x}\n", f.path, f.size, f.crc));
    }
    let crc = crc32c::crc32c(text.as_bytes());
    text.push_str(&format!("end {crc:08x}\n"));
    text.into_bytes()
}

fn parse_meta(bytes: &[u8], path: &Path) -> Result<BackupMeta> {
    let bad = |offset: usize, why: String| Error::corruption(path.display().to_string(), offset as u64, why);
    let text = std::str::from_utf8(bytes).map_err(|e| bad(e.valid_up_to(), "not UTF-8".into()))?;
    let Some(end_at) = text.rfind("end ") else {
        return Err(bad(text.len(), "no end line: the meta file is cut short".into()));
    };
    let recorded = text[end_at + 4..].trim_end();
    let crc = crc32c::crc32c(&bytes[..end_at]);
    if recorded != format!("{crc:08x}") || !text.ends_with('\n') {
        return Err(bad(end_at, format!("checksum mismatch: the end line records {recorded}, the text has {crc:08x}")));
    }
    let mut lines = text[..end_at].lines();
    let mut offset = 0;
    if lines.next() != Some(META_HEADER) {
        return Err(bad(0, format!("the first line is not '{META_HEADER}'")));
    }
    let mut meta = BackupMeta { timestamp: 0, sequence: 0, files: Vec::new() };
    for line in lines {
        offset += line.len() + 1;
        let fields: Vec<&str> = line.split(' ').collect();
        let number = |s: &str| s.parse::<u64>().map_err(|_| bad(offset, format!("bad number in '{line}'")));
        match fields.as_slice() {
            ["timestamp", t] => meta.timestamp = number(t)?,
            ["sequence", s] => meta.sequence = number(s)?,
            ["file", p, size, crc] => {
                let crc = u32::from_str_radix(crc, 16).map_err(|_| bad(offset, format!("bad CRC in '{line}'")))?;
                let safe = p.split('/').all(|c| !c.is_empty() && c != "." && c != "..");
                if !safe || !(p.starts_with(&format!("{SHARED}/")) || p.starts_with(&format!("{PRIVATE}/"))) {
                    return Err(bad(offset, format!("a file outside the backup directory: '{p}'")));
                }
                meta.files.push(BackupFile { path: p.to_string(), size: number(size)?, crc });
            }
            _ => return Err(bad(offset, format!("an unknown line: '{line}'"))),
        }
    }
    Ok(meta)
}

/// Used by the tests of the module (and kept private otherwise).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_files_round_trip_and_refuse_damage() {
        let m = BackupMeta {
            timestamp: 17,
            sequence: 99,
            files: vec![
                BackupFile { path: "shared_checksum/000007_0badf00d_123.sst".into(), size: 123, crc: 0x0bad_f00d },
                BackupFile { path: "private/3/CURRENT".into(), size: 16, crc: 1 },
            ],
        };
        let bytes = encode_meta(&m);
        let back = parse_meta(&bytes, Path::new("meta/3")).unwrap();
        assert_eq!((back.timestamp, back.sequence, back.files.clone()), (17, 99, m.files.clone()));
        // Any one byte changed, and any cut, is refused.
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x20;
            assert!(parse_meta(&b, Path::new("m")).is_err(), "byte {i}");
            assert!(parse_meta(&bytes[..i], Path::new("m")).is_err(), "cut at {i}");
        }
        // A path leaving the directory is refused even with a good checksum.
        let evil =
            BackupMeta { files: vec![BackupFile { path: "shared_checksum/../../etc/x".into(), size: 1, crc: 1 }], ..m };
        let e = parse_meta(&encode_meta(&evil), Path::new("m")).unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
        assert_eq!(restored_name("shared_checksum/000007_0badf00d_123.sst"), "000007.sst");
        assert_eq!(restored_name("private/3/MANIFEST-000012"), "MANIFEST-000012");
    }
}
