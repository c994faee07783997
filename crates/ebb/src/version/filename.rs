//! Names of the files in a database directory (RocksDB's scheme).
//!
//! `CURRENT` names the live MANIFEST; `MANIFEST-NNNNNN` holds version edits;
//! `NNNNNN.log` are WALs (`NNNNNN.log.pending` while the WAL before them may
//! not be synced, db/wal_seal.rs); `NNNNNN.sst` tables; `NNNNNN.blob` blob
//! files (RocksDB's name); `OPTIONS-NNNNNN` the options in
//! text form; `LOCK` is held while the database is open; `*.dbtmp` are
//! temporaries. Every numbered file shares one counter.

use std::path::{Path, PathBuf};

/// The kinds of file in a database directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileType {
    /// A write-ahead log.
    Wal,
    /// An SST.
    Table,
    /// A blob file.
    Blob,
    /// A MANIFEST.
    Manifest,
    /// The CURRENT pointer.
    Current,
    /// The LOCK file.
    Lock,
    /// An OPTIONS file.
    Options,
    /// A temporary file.
    Temp,
    /// The info log.
    InfoLog,
}

/// `dir/000012.log`
pub fn wal_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.log"))
}

/// `dir/000012.log.pending`: a WAL started while the WAL before it may not
/// be synced; renamed to [`wal_file`]'s name once that one is (db/wal_seal.rs).
pub fn pending_wal_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.log.pending"))
}

/// WAL `number`'s path: [`pending_wal_file`] or [`wal_file`].
pub fn wal_path(dir: &Path, number: u64, pending: bool) -> PathBuf {
    if pending {
        pending_wal_file(dir, number)
    } else {
        wal_file(dir, number)
    }
}

/// Whether the directory entry `name` is a pending WAL's ([`pending_wal_file`]).
pub fn is_pending_wal(name: &str) -> bool {
    name.ends_with(".log.pending") && matches!(parse_file_name(name), Some((FileType::Wal, _)))
}

/// `dir/000012.sst`
pub fn table_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.sst"))
}

/// `dir/000012.blob`
pub fn blob_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.blob"))
}

/// `dir/MANIFEST-000012`
pub fn manifest_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("MANIFEST-{number:06}"))
}

/// `dir/OPTIONS-000012`
pub fn options_file(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("OPTIONS-{number:06}"))
}

/// `dir/CURRENT`
pub fn current_file(dir: &Path) -> PathBuf {
    dir.join("CURRENT")
}

/// `dir/LOCK`
pub fn lock_file(dir: &Path) -> PathBuf {
    dir.join("LOCK")
}

/// `dir/LOG`
pub fn info_log_file(dir: &Path) -> PathBuf {
    dir.join("LOG")
}

/// Classifies a directory entry name; `None` for files that are not Ebb's.
pub fn parse_file_name(name: &str) -> Option<(FileType, u64)> {
    match name {
        "CURRENT" => return Some((FileType::Current, 0)),
        "LOCK" => return Some((FileType::Lock, 0)),
        "LOG" => return Some((FileType::InfoLog, 0)),
        _ => {}
    }
    if name.strip_prefix("LOG.old.").is_some_and(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())) {
        return Some((FileType::InfoLog, 0));
    }
    // Temporaries of atomic writes (`CURRENT.dbtmp`, `OPTIONS-000009.dbtmp`).
    if name.ends_with(".dbtmp") && (name.starts_with("CURRENT") || name.starts_with("OPTIONS-")) {
        return Some((FileType::Temp, 0));
    }
    if let Some(rest) = name.strip_prefix("MANIFEST-") {
        return Some((FileType::Manifest, rest.parse().ok()?));
    }
    if let Some(rest) = name.strip_prefix("OPTIONS-") {
        return Some((FileType::Options, rest.parse().ok()?));
    }
    let (stem, ext) = name.split_once('.')?;
    let number: u64 = stem.parse().ok()?;
    match ext {
        "log" | "log.pending" => Some((FileType::Wal, number)),
        "sst" => Some((FileType::Table, number)),
        "blob" => Some((FileType::Blob, number)),
        "dbtmp" => Some((FileType::Temp, number)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        let d = Path::new("/db");
        for (path, t, n) in [
            (wal_file(d, 7), FileType::Wal, 7),
            (table_file(d, 1234567), FileType::Table, 1234567),
            (blob_file(d, 42), FileType::Blob, 42),
            (manifest_file(d, 3), FileType::Manifest, 3),
            (options_file(d, 9), FileType::Options, 9),
        ] {
            let name = path.file_name().unwrap().to_str().unwrap();
            assert_eq!(parse_file_name(name), Some((t, n)));
        }
        assert_eq!(parse_file_name("000012.log.pending"), Some((FileType::Wal, 12)));
        assert!(is_pending_wal("000012.log.pending"));
        assert!(!is_pending_wal("000012.log"));
        assert!(!is_pending_wal("x.log.pending"));
        assert_eq!(pending_wal_file(d, 12), d.join("000012.log.pending"));
        assert_eq!(parse_file_name("CURRENT"), Some((FileType::Current, 0)));
        assert_eq!(parse_file_name("000001.txt"), None);
        assert_eq!(parse_file_name("MANIFEST-x"), None);
        assert_eq!(parse_file_name("notes"), None);
        assert_eq!(parse_file_name("CURRENT.dbtmp"), Some((FileType::Temp, 0)));
        assert_eq!(parse_file_name("LOG.old.1795456625000000"), Some((FileType::InfoLog, 0)));
        assert_eq!(parse_file_name("LOG.old."), None);
        assert_eq!(parse_file_name("OPTIONS-000009.dbtmp"), Some((FileType::Temp, 0)));
    }
}
