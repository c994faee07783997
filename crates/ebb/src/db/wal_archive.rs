//! Archived WALs (RocksDB's `WalManager`): with `wal_ttl_seconds` or
//! `wal_size_limit_mb` set, a WAL no longer needed for recovery is moved
//! into `DIR/archive/` instead of deleted, so that
//! [`Db::get_updates_since`](super::Db::get_updates_since) can read the
//! writes it holds; archived WALs are deleted once older than the TTL, and
//! the oldest first while the archive is over the size limit.
//!
//! Invariants:
//! 1. `files` lists every WAL in the archive directory this instance knows
//!    of: those it moved there, and those it found there at open.
//! 2. A WAL's age is counted from when this instance archived it, or from
//!    the open that found it (the filesystem keeps no times Ebb reads): a
//!    reopen never shortens a WAL's stay, it may lengthen it by the time
//!    the database was closed.
//! 3. Deletion is oldest first (lowest number), so what remains is always
//!    a run of consecutive WALs ending at the live ones: a reader of the
//!    archive sees a gap only before the oldest WAL kept.
//!
//! Thread-safety: one mutex over `files`, never held across another lock;
//! archiving and cleaning take it for the file operations themselves
//! (renames and deletions of WALs no writer uses).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use crate::error::Result;
use crate::fs::FileSystem;
use crate::options::Options;
use crate::version::filename;

/// DO NOT CHANGE: on-disk layout. The archive directory, under the
/// database directory (RocksDB's name).
pub const ARCHIVE_DIR: &str = "archive";

/// One archived WAL.
#[derive(Debug, Clone, Copy)]
struct Archived {
    size: u64,
    /// Clock seconds when archived (or found at open).
    since: u64,
}

/// The archive of one database.
#[derive(Debug)]
pub(crate) struct WalArchive {
    dir: PathBuf,
    files: Mutex<BTreeMap<u64, Archived>>,
}

/// `DIR/archive`.
pub(crate) fn archive_dir(db_dir: &Path) -> PathBuf {
    db_dir.join(ARCHIVE_DIR)
}

/// WAL `number`'s path in the archive of the database at `db_dir`.
pub(crate) fn archived_wal(db_dir: &Path, number: u64) -> PathBuf {
    filename::wal_file(&archive_dir(db_dir), number)
}

/// Whether `options` keep WALs no longer needed for recovery in the
/// archive (`wal_ttl_seconds` or `wal_size_limit_mb` set).
fn keeps_wals(options: &Options) -> bool {
    options.wal_ttl_seconds > 0 || options.wal_size_limit_mb > 0
}

impl WalArchive {
    pub(crate) fn new(db_dir: &Path) -> Self {
        WalArchive { dir: archive_dir(db_dir), files: Mutex::default() }
    }

    /// Lists what the archive directory holds (at open), aged from `now`.
    pub(crate) fn load(&self, fs: &dyn FileSystem, now: u64) -> Result<()> {
        if !fs.exists(&self.dir) {
            return Ok(());
        }
        let mut files = self.files.lock();
        for name in fs.list_dir(&self.dir)? {
            if let Some((filename::FileType::Wal, number)) = filename::parse_file_name(&name) {
                let size = fs.file_size(&self.dir.join(&name)).unwrap_or(0);
                files.entry(number).or_insert(Archived { size, since: now });
            }
        }
        Ok(())
    }

    /// Moves WAL `number` from `from` into the archive: linked (or
    /// renamed, where links are not supported) under the archive, the
    /// archive's directory synced, then the old name removed, so that a
    /// power loss leaves the WAL under one name or both, never none.
    pub(crate) fn archive(&self, fs: &dyn FileSystem, from: &Path, number: u64, now: u64) -> Result<()> {
        let mut files = self.files.lock();
        if !fs.exists(&self.dir) {
            fs.create_dir_all(&self.dir)?;
            if let Some(parent) = self.dir.parent() {
                fs.sync_dir(parent)?;
            }
        }
        let size = fs.file_size(from)?;
        let to = filename::wal_file(&self.dir, number);
        if fs.exists(&to) {
            // A crash between linking and removing left both names.
            fs.remove_file(from)?;
        } else if fs.link_file(from, &to).is_ok() {
            fs.sync_dir(&self.dir)?;
            fs.remove_file(from)?;
        } else {
            fs.rename(from, &to)?;
            fs.sync_dir(&self.dir)?;
        }
        files.insert(number, Archived { size, since: now });
        Ok(())
    }

    /// Disposes of WAL `number` at `from`, no longer needed for recovery:
    /// archived when `options` keep WALs, deleted otherwise.
    pub(crate) fn retire(&self, fs: &dyn FileSystem, from: &Path, number: u64, options: &Options) -> Result<()> {
        if keeps_wals(options) {
            self.archive(fs, from, number, options.clock.now_secs())
        } else {
            fs.remove_file(from)
        }
    }

    /// Cleans the archive as `options` say: past `wal_ttl_seconds` or over
    /// `wal_size_limit_mb`, and everything once both are 0. Returns whether
    /// every deletion succeeded.
    pub(crate) fn clean_for(&self, fs: &dyn FileSystem, options: &Options) -> bool {
        if keeps_wals(options) {
            let now = options.clock.now_secs();
            self.clean(fs, options.wal_ttl_seconds, options.wal_size_limit_mb << 20, now)
        } else {
            self.clear(fs)
        }
    }

    /// Deletes archived WALs older than `ttl_secs` (0: no age limit), then
    /// the oldest while the archive holds more than `size_limit` bytes (0:
    /// no size limit). Returns whether every deletion succeeded.
    pub(crate) fn clean(&self, fs: &dyn FileSystem, ttl_secs: u64, size_limit: u64, now: u64) -> bool {
        let mut files = self.files.lock();
        let mut doomed: Vec<u64> = Vec::new();
        if ttl_secs > 0 {
            // Oldest first (invariant 3): stop at the first young one.
            for (number, f) in files.iter() {
                if now.saturating_sub(f.since) < ttl_secs {
                    break;
                }
                doomed.push(*number);
            }
        }
        if size_limit > 0 {
            let mut total: u64 = files.iter().filter(|(n, _)| !doomed.contains(n)).map(|(_, f)| f.size).sum();
            for (number, f) in files.iter() {
                if total <= size_limit {
                    break;
                }
                if !doomed.contains(number) {
                    doomed.push(*number);
                    total -= f.size;
                }
            }
        }
        let mut all_gone = true;
        for number in doomed {
            let path = filename::wal_file(&self.dir, number);
            match fs.remove_file(&path) {
                Ok(()) => {
                    files.remove(&number);
                }
                Err(_) if !fs.exists(&path) => {
                    files.remove(&number);
                }
                Err(_) => all_gone = false,
            }
        }
        all_gone
    }

    /// Deletes every archived WAL (archiving was turned off). Returns
    /// whether every deletion succeeded.
    pub(crate) fn clear(&self, fs: &dyn FileSystem) -> bool {
        if self.files.lock().is_empty() {
            return true;
        }
        self.clean(fs, 1, 0, u64::MAX)
    }

    /// Numbers of the archived WALs, oldest first.
    #[cfg(test)]
    pub(crate) fn numbers(&self) -> Vec<u64> {
        self.files.lock().keys().copied().collect()
    }

    /// Bytes in the archive.
    #[cfg(test)]
    pub(crate) fn total_size(&self) -> u64 {
        self.files.lock().values().map(|f| f.size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;

    fn wal(fs: &MemFs, dir: &Path, number: u64, bytes: usize) -> PathBuf {
        let path = filename::wal_file(dir, number);
        fs.set_file_bytes(&path, &vec![7u8; bytes]).unwrap();
        path
    }

    #[test]
    fn ttl_then_size_oldest_first() {
        let fs = MemFs::new();
        let db = Path::new("/db");
        fs.create_dir_all(db).unwrap();
        let archive = WalArchive::new(db);
        for (number, at) in [(3, 100), (5, 110), (8, 120)] {
            let path = wal(&fs, db, number, 1000);
            archive.archive(&fs, &path, number, at).unwrap();
            assert!(!fs.exists(&path));
        }
        assert_eq!(archive.numbers(), vec![3, 5, 8]);
        assert_eq!(archive.total_size(), 3000);
        // Age: 3 is 25 s old at 125, 5 is 15 s old.
        assert!(archive.clean(&fs, 20, 0, 125));
        assert_eq!(archive.numbers(), vec![5, 8]);
        assert!(!fs.exists(&archived_wal(db, 3)));
        // Size: 2000 bytes against a 1500-byte limit drops the oldest.
        assert!(archive.clean(&fs, 0, 1500, 125));
        assert_eq!(archive.numbers(), vec![8]);
        assert!(fs.exists(&archived_wal(db, 8)));
    }

    #[test]
    fn found_at_open_aged_from_the_open() {
        let fs = MemFs::new();
        let db = Path::new("/db");
        let dir = archive_dir(db);
        fs.create_dir_all(&dir).unwrap();
        wal(&fs, &dir, 4, 10);
        fs.set_file_bytes(&dir.join("notes.txt"), b"x").unwrap();
        let archive = WalArchive::new(db);
        archive.load(&fs, 1000).unwrap();
        assert_eq!(archive.numbers(), vec![4]);
        assert!(archive.clean(&fs, 60, 0, 1059));
        assert_eq!(archive.numbers(), vec![4]);
        assert!(archive.clean(&fs, 60, 0, 1060));
        assert!(archive.numbers().is_empty());
        assert!(fs.exists(&dir.join("notes.txt")), "only WALs are the archive's");
    }
}
