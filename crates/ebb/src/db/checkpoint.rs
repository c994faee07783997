//! Checkpoints: an openable copy of a live database, made while writes go
//! on (RocksDB's `Checkpoint::CreateCheckpoint`).
//!
//! How a copy is made (docs/operations.md, "Checkpoints"):
//! 1. Refuse a target that exists; clear `<target>.tmp`, which only an
//!    earlier checkpoint that failed or crashed leaves.
//! 2. Flush every column family first, unless `log_size_for_flush` is set
//!    and the live WALs are smaller than it (then the WALs carry the
//!    memtables' data). Data written with `disable_wal` forces the flush:
//!    no WAL holds it.
//! 3. With file deletions held off, capture one point under the db mutex
//!    and the WAL lock: every family's version and log number, the file
//!    counters, the live WALs and the current one's length (the WAL lock
//!    is between records there, so the length ends on a whole record).
//! 4. Hard-link the versions' tables and blob files into `<target>.tmp`
//!    (copied where links fail: another filesystem, or one without them),
//!    copy the live WALs (the current one up to the captured length), write
//!    the OPTIONS file, the TTL marker of a TTL database, and a new MANIFEST
//!    holding the captured versions, then CURRENT; sync everything.
//! 5. Rename `<target>.tmp` to the target and sync its parent.
//!
//! Opening the copy replays the WALs on top of the versions, as recovery
//! after a crash at the captured point would: every write acknowledged
//! before the call is there (those made with `disable_wal` once flushed),
//! and each column family stands at the same point of the write order. A
//! failure at any step removes `<target>.tmp` and leaves the database as it
//! was; the target appears only whole.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Db, DbInner};
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::version::{filename, write_manifest, FamilyVersions, SnapshotCounters};

/// Makes checkpoints of a database: see [`Checkpoint::create`].
pub struct Checkpoint<'a> {
    db: &'a Db,
}

/// How [`Checkpoint::create_with`] makes a checkpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CheckpointOptions {
    /// Flush the memtables first unless the live WALs hold fewer bytes than
    /// this (RocksDB's `log_size_for_flush`). 0, the default, always
    /// flushes: the copy then replays little WAL when opened.
    pub log_size_for_flush: u64,
}

/// What a checkpoint copied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// Whether the memtables were flushed first.
    pub flushed: bool,
    /// Tables and blob files given a hard link.
    pub files_linked: usize,
    /// Tables and blob files copied (no hard link could be made).
    pub files_copied: usize,
    /// WAL files copied.
    pub wal_files: usize,
    /// Bytes copied, WALs included.
    pub bytes_copied: u64,
}

impl<'a> Checkpoint<'a> {
    /// A checkpoint maker for `db` (RocksDB's `Checkpoint::Create`).
    pub fn new(db: &'a Db) -> Self {
        Checkpoint { db }
    }

    /// Makes an openable copy of `db` in `dir`, which must not exist,
    /// flushing the memtables first. See the module documentation.
    pub fn create(db: &Db, dir: impl AsRef<Path>) -> Result<CheckpointInfo> {
        Checkpoint::new(db).create_checkpoint(dir, &CheckpointOptions::default())
    }

    /// [`Checkpoint::create`] with options.
    pub fn create_with(db: &Db, dir: impl AsRef<Path>, options: &CheckpointOptions) -> Result<CheckpointInfo> {
        Checkpoint::new(db).create_checkpoint(dir, options)
    }

    /// Makes an openable copy of the database in `dir` (RocksDB's
    /// `CreateCheckpoint`), which must not exist.
    pub fn create_checkpoint(&self, dir: impl AsRef<Path>, options: &CheckpointOptions) -> Result<CheckpointInfo> {
        create(&self.db.inner, dir.as_ref(), options)
    }
}

/// The point a checkpoint (or backup) copies, captured under the db mutex.
pub(super) struct Captured {
    families: BTreeMap<u32, FamilyVersions>,
    pub(super) counters: SnapshotCounters,
    manifest_number: u64,
    options_number: u64,
    /// Live WALs, oldest first: number, and the bytes to copy (the current
    /// WAL's captured length; `None`: a closed WAL, whole).
    wals: Vec<(u64, Option<u64>)>,
    options_text: String,
}

impl Captured {
    /// The tables and blob files of the captured versions: (source path,
    /// file name).
    pub(super) fn data_files(&self, src: &Path) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        for family in self.families.values() {
            for n in family.current.levels.iter().flatten().map(|f| f.number) {
                let path = filename::table_file(src, n);
                out.push((path.clone(), file_name(&path)));
            }
            for n in family.current.live_blob_files() {
                let path = filename::blob_file(src, n);
                out.push((path.clone(), file_name(&path)));
            }
        }
        out
    }
}

/// The last component of `path`.
pub(super) fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn create(inner: &DbInner, dir: &Path, options: &CheckpointOptions) -> Result<CheckpointInfo> {
    inner.check_writable("a checkpoint")?;
    let fs = inner.fs.as_ref();
    if fs.exists(dir) {
        return Err(Error::invalid(format!("checkpoint directory {} already exists", dir.display())));
    }
    let Some(name) = dir.file_name() else {
        return Err(Error::invalid(format!("checkpoint directory {} does not name a directory", dir.display())));
    };
    let tmp = dir.with_file_name(format!("{}.tmp", name.to_string_lossy()));
    if fs.exists(&tmp) {
        remove_dir_and_files(fs, &tmp)?;
    }
    let flushed = flush_if_needed(inner, options)?;
    let held = DeletionsHeld::new(inner);
    let captured = capture(inner)?;
    let mut info = CheckpointInfo { flushed, ..Default::default() };
    let made = fs.create_dir_all(&tmp).and_then(|()| write_copy(inner, &captured, &tmp, &mut info));
    drop(held);
    let renamed = made.and_then(|()| {
        fs.sync_dir(&tmp)?;
        fs.rename(&tmp, dir)
    });
    if let Err(e) = renamed {
        let _ = remove_dir_and_files(fs, &tmp);
        return Err(e);
    }
    // The copy is whole under its name; only its name's durability is left.
    fs.sync_dir(&parent_of(dir))?;
    Ok(info)
}

/// `dir`'s parent directory ("." for a bare name).
fn parent_of(dir: &Path) -> PathBuf {
    match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Removes the files in `dir`, then `dir` (a checkpoint's temporary holds
/// no subdirectory).
pub(super) fn remove_dir_and_files(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    for name in fs.list_dir(dir)? {
        fs.remove_file(&dir.join(name))?;
    }
    fs.remove_dir(dir)
}

/// Flushes every column family when the options or unlogged data call for
/// it; returns whether it did. Not while background work is paused: the
/// flush could not run, and the WALs carry what is logged. Writes made
/// without the WAL are in no file a copy could take until a flush: with
/// background work paused (by the user, or by an ingestion under way) and
/// such writes in the memtables, the copy is refused (`Busy`) instead of
/// made without them.
pub(super) fn flush_if_needed(inner: &DbInner, options: &CheckpointOptions) -> Result<bool> {
    let (ids, wanted) = {
        let st = inner.state.lock();
        let unlogged = st.families.any_unlogged();
        if st.jobs.is_paused() {
            if unlogged {
                return Err(Error::Busy(
                    "background work is paused and the memtables hold writes made without the WAL, which only a \
                     flush can copy: continue background work, then copy"
                        .into(),
                ));
            }
            return Ok(false);
        }
        let current = inner.wal.len();
        let wal_bytes: u64 = st.families.old_wal_bytes() + current;
        let holds_data = st.families.any_data();
        let wanted =
            holds_data && (options.log_size_for_flush == 0 || wal_bytes >= options.log_size_for_flush || unlogged);
        (st.families.ids(), wanted)
    };
    if wanted {
        for id in ids {
            match inner.flush_family(id, true) {
                // A family dropped meanwhile has nothing to copy.
                Err(Error::InvalidArgument(_)) => {}
                r => r?,
            }
        }
    }
    Ok(wanted)
}

/// Holds file deletions off while alive ([`Db::disable_file_deletions`]).
pub(super) struct DeletionsHeld<'a> {
    inner: &'a DbInner,
}

impl<'a> DeletionsHeld<'a> {
    pub(super) fn new(inner: &'a DbInner) -> Self {
        inner.disable_file_deletions();
        DeletionsHeld { inner }
    }
}

impl Drop for DeletionsHeld<'_> {
    fn drop(&mut self) {
        self.inner.enable_file_deletions();
    }
}

/// Captures the point the checkpoint copies (see the module documentation,
/// step 3).
pub(super) fn capture(inner: &DbInner) -> Result<Captured> {
    let mut st = inner.state.lock();
    inner.wait_for_manifest_writes(&mut st);
    st.bg_error.check()?;
    let manifest_number = st.versions.new_file_number();
    let options_number = st.versions.new_file_number();
    let families = st.versions.families().clone();
    let min_log = families.values().map(|f| f.log_number).min().unwrap_or(0);
    let mut wals: Vec<(u64, Option<u64>)> =
        st.families.old_wals().filter(|(n, _)| *n >= min_log).map(|(n, _)| (n, None)).collect();
    // What `manual_wal_flush` buffered goes to the file, as RocksDB's
    // checkpoint flushes the WAL first.
    let current_len = match inner.wal.flushed_len() {
        Ok(len) => len,
        Err(e) => return Err(inner.set_bg_error_locked(&mut st, e)),
    };
    wals.push((st.families.current_wal(), Some(current_len)));
    let counters = SnapshotCounters {
        next_file_number: st.versions.next_file_number(),
        last_sequence: inner.last_sequence.get().max(st.versions.last_sequence()),
        max_column_family: st.versions.next_column_family_id() - 1,
    };
    drop(st);
    let options_text = inner.options_file_text();
    Ok(Captured { families, counters, manifest_number, options_number, wals, options_text })
}

/// Step 4: fills `tmp` with the captured point's files.
fn write_copy(inner: &DbInner, c: &Captured, tmp: &Path, info: &mut CheckpointInfo) -> Result<()> {
    let fs = inner.fs.as_ref();
    for (from, name) in c.data_files(&inner.dir) {
        let to = tmp.join(name);
        match fs.link_file(&from, &to) {
            Ok(()) => info.files_linked += 1,
            Err(_) => {
                info.bytes_copied += copy_file(fs, &from, fs, &to, None)?.0;
                info.files_copied += 1;
            }
        }
    }
    let (wal_files, bytes) = write_private_files(inner, c, fs, tmp)?;
    info.wal_files += wal_files;
    info.bytes_copied += bytes;
    Ok(())
}

/// Writes into `to` (on `out_fs`) the captured point's files other than
/// tables and blob files: the live WALs (each copy whole and synced, under
/// its final name), the OPTIONS file, a TTL database's marker, a new
/// MANIFEST holding the captured versions, and CURRENT. Returns the WALs
/// copied and the bytes copied.
pub(super) fn write_private_files(
    inner: &DbInner,
    c: &Captured,
    out_fs: &dyn FileSystem,
    to: &Path,
) -> Result<(usize, u64)> {
    let (fs, src) = (inner.fs.as_ref(), &inner.dir);
    let (mut wal_files, mut bytes) = (0, 0);
    for &(number, len) in &c.wals {
        // A sealer may rename a pending WAL to its final name meanwhile (it
        // never goes back): the pending name first, then the final one.
        let target = filename::wal_file(to, number);
        let pending = filename::pending_wal_file(src, number);
        let copied = match copy_file(fs, &pending, out_fs, &target, len) {
            Err(_) if !fs.exists(&pending) => copy_file(fs, &filename::wal_file(src, number), out_fs, &target, len)?,
            r => r?,
        };
        bytes += copied.0;
        wal_files += 1;
    }
    write_synced(out_fs, &filename::options_file(to, c.options_number), c.options_text.as_bytes())?;
    let marker = super::ttl::marker_path(src);
    if fs.exists(&marker) {
        bytes += copy_file(fs, &marker, out_fs, &super::ttl::marker_path(to), None)?.0;
    }
    let mut touched = false;
    write_manifest(out_fs, to, c.manifest_number, &c.families, c.counters, &mut touched)?;
    Ok((wal_files, bytes))
}

/// Copies `from` (on `fs`) to a new file `to` (on `out_fs`): its first
/// `len` bytes, or all of it; syncs the copy. Returns the bytes copied and
/// their CRC-32C. A source shorter than `len` is an error: the bytes
/// captured must all be there.
pub(super) fn copy_file(
    fs: &dyn FileSystem,
    from: &Path,
    out_fs: &dyn FileSystem,
    to: &Path,
    len: Option<u64>,
) -> Result<(u64, u32)> {
    let mut input = fs.open_sequential(from)?;
    let mut out = out_fs.new_writable(to)?;
    let mut left = len.unwrap_or(u64::MAX);
    let mut buf = vec![0u8; 256 << 10];
    let (mut copied, mut crc) = (0u64, 0u32);
    while left > 0 {
        let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let n = input.read(&mut buf[..want])?;
        if n == 0 {
            break;
        }
        out.append(&buf[..n])?;
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        copied += n as u64;
        left -= n as u64;
    }
    if let Some(len) = len {
        if copied < len {
            return Err(Error::corruption(
                from.display().to_string(),
                copied,
                format!("the file ended after {copied} bytes; {len} were expected"),
            ));
        }
    }
    out.sync()?;
    Ok((copied, crc))
}

/// Writes a new file holding `data`, synced.
pub(super) fn write_synced(fs: &dyn FileSystem, path: &Path, data: &[u8]) -> Result<()> {
    let mut f = fs.new_writable(path)?;
    f.append(data)?;
    f.sync()
}

impl DbInner {
    /// Takes one hold on file deletions ([`Db::disable_file_deletions`]).
    pub(crate) fn disable_file_deletions(&self) {
        self.state.lock().files.hold_deletions();
    }

    /// Undoes one hold on file deletions; once none is left, deletes what
    /// became obsolete meanwhile.
    pub(crate) fn enable_file_deletions(&self) {
        let mut st = self.state.lock();
        if st.files.release_deletions() {
            self.delete_obsolete_files(&mut st);
        }
    }
}

impl Db {
    /// Holds off deleting obsolete files (tables, blob files, WALs) until
    /// as many [`Db::enable_file_deletions`] calls: their names stay valid
    /// for a copy (RocksDB's `DisableFileDeletions`). Calls nest.
    pub fn disable_file_deletions(&self) {
        self.inner.disable_file_deletions();
    }

    /// Undoes one [`Db::disable_file_deletions`]; the last one deletes what
    /// became obsolete meanwhile.
    pub fn enable_file_deletions(&self) {
        self.inner.enable_file_deletions();
    }
}
