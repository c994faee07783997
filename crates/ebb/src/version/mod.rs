//! The set of live SSTs: immutable [`Version`]s, and the [`VersionSet`] that
//! records every change in the MANIFEST.
//!
//! Invariants:
//! 1. A `Version` never changes once built; readers hold it by `Arc` and keep
//!    its files alive for as long as they read.
//! 2. Levels 1 and deeper hold files sorted by smallest key with disjoint key
//!    ranges; L0 files may overlap and are ordered newest first (largest
//!    sequence number descending).
//! 3. A change becomes visible only after its edit is synced to the MANIFEST.
//! 4. CURRENT is switched to a new MANIFEST by an atomic rename followed by a
//!    directory sync; the old MANIFEST is deleted only afterwards.
//!
//! Thread safety: `VersionSet` requires the db mutex (callers hold it).

pub mod edit;
pub mod filename;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use edit::{FileMetaData, VersionEdit};

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::key::{compare_internal_keys, user_key, SequenceNumber};
use crate::options::WalRecoveryMode;
use crate::wal::LogWriter;

/// One immutable state of the LSM tree: the files of every level.
#[derive(Debug, Clone, Default)]
pub struct Version {
    /// `levels[l]` holds the files of level `l`.
    pub levels: Vec<Vec<Arc<FileMetaData>>>,
}

impl Version {
    /// An empty version with `num_levels` levels.
    pub fn new(num_levels: usize) -> Self {
        Version { levels: vec![Vec::new(); num_levels] }
    }

    /// Number of levels.
    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// Files at `level`.
    pub fn num_files(&self, level: usize) -> usize {
        self.levels.get(level).map_or(0, Vec::len)
    }

    /// Bytes at `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels.get(level).map_or(0, |fs| fs.iter().map(|f| f.file_size).sum())
    }

    /// Every live file number.
    pub fn live_files(&self) -> impl Iterator<Item = u64> + '_ {
        self.levels.iter().flatten().map(|f| f.number)
    }

    /// The deepest level holding any file, or 0.
    pub fn deepest_nonempty_level(&self) -> usize {
        self.levels.iter().rposition(|l| !l.is_empty()).unwrap_or(0)
    }

    /// Files whose user-key range overlaps `[begin, end]` at `level` (either
    /// bound open when `None`). For L0 the range is not widened.
    pub fn overlapping_files(&self, level: usize, begin: Option<&[u8]>, end: Option<&[u8]>) -> Vec<Arc<FileMetaData>> {
        let Some(files) = self.levels.get(level) else { return Vec::new() };
        let overlaps = |f: &FileMetaData| {
            begin.is_none_or(|b| f.largest_user_key() >= b) && end.is_none_or(|e| f.smallest_user_key() <= e)
        };
        if level == 0 {
            return files.iter().filter(|f| overlaps(f)).cloned().collect();
        }
        // Sorted and disjoint: binary search for the first candidate.
        let start = match begin {
            Some(b) => files.partition_point(|f| f.largest_user_key() < b),
            None => 0,
        };
        files[start..].iter().take_while(|f| end.is_none_or(|e| f.smallest_user_key() <= e)).cloned().collect()
    }

    /// For a point lookup: the L0 files that may hold `key` (newest first), then
    /// at most one file per deeper level.
    pub fn files_for_key(&self, key: &[u8]) -> Vec<(usize, Arc<FileMetaData>)> {
        let mut out = Vec::new();
        for (level, files) in self.levels.iter().enumerate() {
            if level == 0 {
                for f in files {
                    if f.smallest_user_key() <= key && key <= f.largest_user_key() {
                        out.push((0, Arc::clone(f)));
                    }
                }
            } else {
                let i = files.partition_point(|f| f.largest_user_key() < key);
                if let Some(f) = files.get(i) {
                    if f.smallest_user_key() <= key {
                        out.push((level, Arc::clone(f)));
                    }
                }
            }
        }
        out
    }

    /// Checks invariant 2; corruption when violated.
    fn check(&self, manifest: &str) -> Result<()> {
        for (level, files) in self.levels.iter().enumerate().skip(1) {
            for pair in files.windows(2) {
                if user_key(&pair[0].largest) >= user_key(&pair[1].smallest) {
                    return Err(Error::corruption(
                        manifest,
                        0,
                        format!("level {level} files {} and {} overlap", pair[0].number, pair[1].number),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Builds the version that results from applying `edits` to `self`.
    pub fn apply(&self, edits: &[&VersionEdit]) -> Result<Version> {
        let mut levels = self.levels.clone();
        for edit in edits {
            for (level, number) in &edit.deleted_files {
                let files = levels.get_mut(*level).ok_or_else(|| {
                    Error::corruption("MANIFEST", 0, format!("edit deletes file {number} at missing level {level}"))
                })?;
                files.retain(|f| f.number != *number);
            }
            for (level, f) in &edit.new_files {
                let files = levels.get_mut(*level).ok_or_else(|| {
                    Error::corruption("MANIFEST", 0, format!("edit adds file {} at missing level {level}", f.number))
                })?;
                files.retain(|g| g.number != f.number);
                files.push(Arc::clone(f));
            }
        }
        for (level, files) in levels.iter_mut().enumerate() {
            if level == 0 {
                files.sort_by(|a, b| b.largest_seq.cmp(&a.largest_seq).then(b.number.cmp(&a.number)));
            } else {
                files.sort_by(|a, b| compare_internal_keys(&a.smallest, &b.smallest));
            }
        }
        Ok(Version { levels })
    }
}

/// The live version plus the counters persisted in the MANIFEST.
pub struct VersionSet {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    current: Arc<Version>,
    /// Shared with running jobs so they can number their outputs without the mutex.
    next_file_number: Arc<AtomicU64>,
    last_sequence: SequenceNumber,
    log_number: u64,
    manifest_number: u64,
    manifest: Option<LogWriter>,
    max_manifest_size: u64,
}

impl VersionSet {
    /// Recovers the version set from CURRENT and its MANIFEST.
    pub fn recover(dir: &Path, fs: Arc<dyn FileSystem>, num_levels: usize, max_manifest_size: u64) -> Result<Self> {
        let current_path = filename::current_file(dir);
        let current = fs.read_file(&current_path)?;
        let name = std::str::from_utf8(&current)
            .ok()
            .and_then(|s| s.strip_suffix('\n'))
            .filter(|s| matches!(filename::parse_file_name(s), Some((filename::FileType::Manifest, _))))
            .ok_or_else(|| Error::corruption("CURRENT", 0, "does not name a MANIFEST file"))?
            .to_string();
        let Some((_, manifest_number)) = filename::parse_file_name(&name) else {
            return Err(Error::corruption("CURRENT", 0, "does not name a MANIFEST file"));
        };
        let manifest_path = dir.join(&name);
        let mut version = Version::new(num_levels);
        let (mut log_number, mut next_file, mut last_seq) = (None, None, None);
        let mut records = 0u64;
        crate::wal::replay(
            fs.as_ref(),
            &manifest_path,
            WalRecoveryMode::TolerateCorruptedTailRecords,
            true,
            |record| {
                let edit = VersionEdit::decode(record, &name, 0)?;
                version = version.apply(&[&edit]).map_err(|e| match e {
                    Error::Corruption { offset, reason, .. } => Error::corruption(&name, offset, reason),
                    other => other,
                })?;
                log_number = edit.log_number.or(log_number);
                next_file = edit.next_file_number.or(next_file);
                last_seq = edit.last_sequence.or(last_seq);
                records += 1;
                Ok(())
            },
        )?;
        let missing = |what: &str| Error::corruption(&name, 0, format!("MANIFEST has no {what}"));
        let next_file_number = next_file.ok_or_else(|| missing("next file number"))?;
        let last_sequence = last_seq.ok_or_else(|| missing("last sequence"))?;
        let log_number = log_number.ok_or_else(|| missing("log number"))?;
        version.check(&name)?;
        for f in version.levels.iter().flatten() {
            if f.number >= next_file_number {
                return Err(Error::corruption(
                    &name,
                    0,
                    format!("file {} is not below the next file number", f.number),
                ));
            }
        }
        Ok(VersionSet {
            dir: dir.to_path_buf(),
            fs,
            current: Arc::new(version),
            next_file_number: Arc::new(AtomicU64::new(next_file_number.max(manifest_number + 1))),
            last_sequence,
            log_number,
            manifest_number,
            manifest: None,
            max_manifest_size,
        })
    }

    /// Writes the MANIFEST and CURRENT of a new, empty database.
    pub fn create_new(dir: &Path, fs: &dyn FileSystem) -> Result<()> {
        let edit = VersionEdit {
            log_number: Some(0),
            next_file_number: Some(2),
            last_sequence: Some(0),
            ..Default::default()
        };
        let path = filename::manifest_file(dir, 1);
        let mut w = LogWriter::new(fs.new_writable(&path)?, path.display().to_string());
        w.add_record(&edit.encode())?;
        w.sync()?;
        drop(w);
        fs.write_file_atomic(&filename::current_file(dir), b"MANIFEST-000001\n")
    }

    /// The live version.
    pub fn current(&self) -> Arc<Version> {
        Arc::clone(&self.current)
    }

    /// Hands out a new file number.
    pub fn new_file_number(&self) -> u64 {
        self.next_file_number.fetch_add(1, Ordering::SeqCst)
    }

    /// The shared counter behind [`VersionSet::new_file_number`], for jobs
    /// that number files without the db mutex.
    pub fn file_number_allocator(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.next_file_number)
    }

    /// Makes sure numbers below `n` are never handed out again (files found on disk).
    pub fn set_next_file_at_least(&mut self, n: u64) {
        self.next_file_number.fetch_max(n, Ordering::SeqCst);
    }

    /// The next file number that would be handed out.
    pub fn next_file_number(&self) -> u64 {
        self.next_file_number.load(Ordering::SeqCst)
    }

    /// The last sequence number persisted (or about to be).
    pub fn last_sequence(&self) -> SequenceNumber {
        self.last_sequence
    }

    /// Advances the persisted last sequence number.
    pub fn set_last_sequence(&mut self, seq: SequenceNumber) {
        self.last_sequence = self.last_sequence.max(seq);
    }

    /// WALs numbered below this are obsolete.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    /// The live MANIFEST's number.
    pub fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Records `edit` durably in the MANIFEST and installs the new version.
    /// Starts a new MANIFEST (with a snapshot of the whole state) first when
    /// none is open or the current one is over its size limit.
    pub fn log_and_apply(&mut self, mut edit: VersionEdit) -> Result<()> {
        let next = self.current.apply(&[&edit])?;
        if let Some(n) = edit.log_number {
            if n < self.log_number {
                edit.log_number = Some(self.log_number);
            }
        }
        edit.next_file_number = Some(self.next_file_number());
        edit.last_sequence = Some(self.last_sequence);
        let too_big = self.manifest.as_ref().is_some_and(|m| m.file_size() >= self.max_manifest_size);
        if self.manifest.is_none() || too_big {
            self.roll_manifest(&next, edit.log_number.unwrap_or(self.log_number))?;
        } else if let Some(m) = self.manifest.as_mut() {
            kill_point!("manifest_append");
            m.add_record(&edit.encode())?;
            m.sync()?;
        }
        if let Some(n) = edit.log_number {
            self.log_number = self.log_number.max(n);
        }
        self.current = Arc::new(next);
        Ok(())
    }

    /// Writes a new MANIFEST holding `version` as one edit, then points CURRENT at it.
    fn roll_manifest(&mut self, version: &Version, log_number: u64) -> Result<()> {
        let number = self.new_file_number();
        let path = filename::manifest_file(&self.dir, number);
        let mut snapshot = VersionEdit {
            log_number: Some(log_number.max(self.log_number)),
            next_file_number: Some(self.next_file_number()),
            last_sequence: Some(self.last_sequence),
            ..Default::default()
        };
        for (level, files) in version.levels.iter().enumerate() {
            for f in files {
                snapshot.new_files.push((level, Arc::clone(f)));
            }
        }
        let mut current_touched = false;
        let result = (|| {
            let mut w = LogWriter::new(self.fs.new_writable(&path)?, path.display().to_string());
            kill_point!("manifest_append");
            w.add_record(&snapshot.encode())?;
            w.sync()?;
            kill_point!("dir_sync");
            self.fs.sync_dir(&self.dir)?;
            let current = format!("MANIFEST-{number:06}\n");
            current_touched = true;
            self.fs.write_file_atomic(&filename::current_file(&self.dir), current.as_bytes())?;
            Ok(w)
        })();
        match result {
            Ok(w) => {
                let old = std::mem::replace(&mut self.manifest_number, number);
                self.manifest = Some(w);
                if old != number {
                    let _ = self.fs.remove_file(&filename::manifest_file(&self.dir, old));
                }
                Ok(())
            }
            Err(e) => {
                // Once CURRENT is being replaced it may name the new MANIFEST
                // (the rename may have happened before the directory sync
                // failed), so the file must stay. Either way the next edit
                // rolls again, since what started this roll still holds, and
                // points CURRENT at a MANIFEST with the whole state.
                if !current_touched {
                    let _ = self.fs.remove_file(&path);
                }
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};

    fn file(number: u64, lo: &[u8], hi: &[u8], seq: u64) -> FileMetaData {
        FileMetaData {
            number,
            file_size: 100,
            smallest: make_internal_key(lo, seq, ValueKind::Value),
            largest: make_internal_key(hi, seq, ValueKind::Value),
            smallest_seq: seq,
            largest_seq: seq,
            num_entries: 1,
            num_deletions: 0,
        }
    }

    #[test]
    fn apply_sorts_levels_and_finds_files_for_keys() {
        let mut e = VersionEdit::default();
        e.add_file(0, file(1, b"a", b"m", 1));
        e.add_file(0, file(2, b"k", b"z", 5));
        e.add_file(1, file(4, b"n", b"r", 0));
        e.add_file(1, file(3, b"a", b"f", 0));
        let v = Version::new(3).apply(&[&e]).unwrap();
        assert_eq!(v.levels[0].iter().map(|f| f.number).collect::<Vec<_>>(), vec![2, 1]);
        assert_eq!(v.levels[1].iter().map(|f| f.number).collect::<Vec<_>>(), vec![3, 4]);
        let hits: Vec<_> = v.files_for_key(b"l").iter().map(|(l, f)| (*l, f.number)).collect();
        assert_eq!(hits, vec![(0, 2), (0, 1)]);
        let hits: Vec<_> = v.files_for_key(b"o").iter().map(|(l, f)| (*l, f.number)).collect();
        assert_eq!(hits, vec![(0, 2), (1, 4)]);
        assert!(v.files_for_key(b"h").iter().all(|(l, _)| *l == 0));
        assert_eq!(v.overlapping_files(1, Some(b"e"), Some(b"o")).len(), 2);
        assert_eq!(v.overlapping_files(1, Some(b"g"), Some(b"m")).len(), 0);
        let mut d = VersionEdit::default();
        d.delete_file(0, 2);
        let v2 = v.apply(&[&d]).unwrap();
        assert_eq!(v2.num_files(0), 1);
    }

    #[test]
    fn overlapping_deeper_levels_are_corruption() {
        let mut e = VersionEdit::default();
        e.add_file(1, file(3, b"a", b"f", 0));
        e.add_file(1, file(4, b"e", b"r", 0));
        let v = Version::new(3).apply(&[&e]).unwrap();
        assert!(v.check("MANIFEST-000001").unwrap_err().is_corruption());
    }
}
