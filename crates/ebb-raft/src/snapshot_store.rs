//! The snapshot store: the directory of snapshot files, and the record of
//! which one is the current snapshot.
//!
//! Owns the `sm_snapshot` family and the directory [`SNAPSHOT_DIR`] inside
//! the database's directory, on the database's filesystem. Files are
//! named by a number this store hands out: `<n>.snap` holds a snapshot's
//! data (docs/cluster.md, "Snapshot format"), `<n>.<family>.sst` a table
//! an install is about to ingest. The record under `current` in
//! `sm_snapshot` names the current snapshot's file, its length and its
//! metadata.
//!
//! Invariants: a file is synced, and the directory too, before a record
//! names it; the only file a record names is the current one, so at open
//! every other file in the directory is left over from a build, a
//! transfer or an install that did not finish, and is removed. The record
//! changes under the `replacing` lock, so that a snapshot built from an
//! older state never replaces a newer one installed meanwhile; an install
//! (`crate::install`) holds it across its ingestion.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ebb::fs::{FileSystem, WritableFile};
use ebb::{ColumnFamilyHandle, Db, WriteBatch, WriteOptions};
use openraft::{BasicNode, ErrorSubject, SnapshotMeta};
use parking_lot::{Mutex, MutexGuard};
use serde::{Deserialize, Serialize};

use crate::codec::{self, CodecError};
use crate::error::{read_error, write_error, StoreError};
use crate::snapshot_file::SnapshotFile;
use crate::types::NodeId;

/// DO NOT CHANGE: on-disk format. The directory of snapshot files, inside
/// the database's directory (Ebb leaves names it does not know alone).
pub(crate) const SNAPSHOT_DIR: &str = "raft-snapshots";

/// DO NOT CHANGE: on-disk format. The key of the current snapshot's record.
pub(crate) const CURRENT_KEY: &[u8] = b"current";

/// Keys an earlier layout kept the current snapshot under (its metadata,
/// and its data in chunks from `chunk/` to `chunk0`); removed at open.
const LEGACY_META_KEY: &[u8] = b"meta";
const LEGACY_CHUNKS: (&[u8], &[u8]) = (b"chunk/", b"chunk0");

/// openraft's snapshot metadata, for this crate's node ids and nodes.
pub(crate) type Meta = SnapshotMeta<NodeId, BasicNode>;

/// What the `current` key holds.
#[derive(Serialize, Deserialize)]
pub(crate) struct StoredSnapshot {
    pub(crate) meta: Meta,
    /// The number of the file, `<file>.snap`.
    pub(crate) file: u64,
    /// Its length in bytes.
    pub(crate) len: u64,
}

impl StoredSnapshot {
    /// The value of the `current` key for it.
    pub(crate) fn encode(&self) -> Result<Vec<u8>, CodecError> {
        codec::encode(self)
    }
}

/// The next store's identity (unique in the process).
static NEXT_STORE_ID: AtomicU64 = AtomicU64::new(1);

/// A file being written that is removed unless [`PendingFile::done`] is
/// called: a build or copy that fails leaves nothing behind.
pub(crate) struct PendingFile {
    fs: Arc<dyn FileSystem>,
    path: PathBuf,
    armed: bool,
}

impl PendingFile {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn done(mut self) -> PathBuf {
        self.armed = false;
        std::mem::take(&mut self.path)
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.fs.remove_file(&self.path);
        }
    }
}

/// The snapshot files and the current snapshot's record.
pub(crate) struct SnapshotStore {
    db: Arc<Db>,
    family: ColumnFamilyHandle,
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    /// Tells this store's received files from any other's.
    id: u64,
    next_file: AtomicU64,
    /// Held from reading the current record to writing its replacement.
    replacing: Mutex<()>,
}

fn file_number(name: &str) -> Option<u64> {
    name.split('.').next()?.parse().ok()
}

impl SnapshotStore {
    /// Opens the store of `db` (creating its directory), removes the files
    /// no record names, and the earlier layout's keys.
    pub(crate) fn open(db: Arc<Db>, family: ColumnFamilyHandle) -> ebb::Result<Self> {
        let fs = Arc::clone(&db.options().fs);
        let dir = db.path().join(SNAPSHOT_DIR);
        fs.create_dir_all(&dir)?;
        let store = SnapshotStore {
            db,
            family,
            fs,
            dir,
            id: NEXT_STORE_ID.fetch_add(1, Ordering::Relaxed),
            next_file: AtomicU64::new(1),
            replacing: Mutex::new(()),
        };
        let mut next = 1;
        // A record that does not decode is reported when it is read; until
        // then no file is removed on its strength.
        let keep: Option<Option<String>> = match store.read_record() {
            Ok(record) => Some(record.map(|r| format!("{}.snap", r.file))),
            Err(_) => None,
        };
        for name in store.fs.list_dir(&store.dir)? {
            next = next.max(file_number(&name).map_or(0, |n| n + 1));
            if let Some(keep) = &keep {
                if keep.as_deref() != Some(name.as_str()) {
                    store.fs.remove_file(&store.dir.join(&name))?;
                }
            }
        }
        store.next_file.store(next, Ordering::Relaxed);
        if store.db.get_cf(&store.family, LEGACY_META_KEY)?.is_some() {
            let mut batch = WriteBatch::new();
            batch.delete_cf(&store.family, LEGACY_META_KEY);
            batch.delete_range_cf(&store.family, LEGACY_CHUNKS.0, LEGACY_CHUNKS.1);
            store.db.write_opt(&batch, &WriteOptions { sync: true, disable_wal: false })?;
        }
        Ok(store)
    }

    /// This store's identity, which its received files carry.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn fs(&self) -> &Arc<dyn FileSystem> {
        &self.fs
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn family(&self) -> &ColumnFamilyHandle {
        &self.family
    }

    fn new_number(&self) -> u64 {
        self.next_file.fetch_add(1, Ordering::Relaxed)
    }

    fn file_path(&self, number: u64) -> PathBuf {
        self.dir.join(format!("{number}.snap"))
    }

    /// The path of table `what` of the install into file `number`.
    pub(crate) fn table_path(&self, number: u64, what: &str) -> PathBuf {
        self.dir.join(format!("{number}.{what}.sst"))
    }

    /// A new file to receive a snapshot into (openraft's
    /// `begin_receiving_snapshot`).
    pub(crate) fn receive(&self) -> ebb::Result<SnapshotFile> {
        let number = self.new_number();
        SnapshotFile::create(Arc::clone(&self.fs), self.file_path(number), self.id, number)
    }

    /// A new snapshot file to write: its number, the file, and the guard
    /// that removes it unless the write completes.
    pub(crate) fn create(&self) -> ebb::Result<(u64, Box<dyn WritableFile>, PendingFile)> {
        let number = self.new_number();
        let path = self.file_path(number);
        let file = self.fs.new_writable(&path)?;
        Ok((number, file, PendingFile { fs: Arc::clone(&self.fs), path, armed: true }))
    }

    /// Held while the current record is read and replaced.
    pub(crate) fn lock(&self) -> MutexGuard<'_, ()> {
        self.replacing.lock()
    }

    /// The current record, `None` if there is none.
    pub(crate) fn read_record(&self) -> Result<Option<StoredSnapshot>, StoreError> {
        let subject = || ErrorSubject::Snapshot(None);
        let Some(value) = self.db.get_cf(&self.family, CURRENT_KEY).map_err(|e| read_error(subject(), &e))? else {
            return Ok(None);
        };
        codec::decode(&value).map(Some).map_err(|e| read_error(subject(), &e))
    }

    /// Removes the file of a record replaced (a failure leaves it to the
    /// next open). A reader holding it open keeps reading it.
    pub(crate) fn remove_replaced(&self, replaced: Option<StoredSnapshot>, now: u64) {
        if let Some(old) = replaced.filter(|old| old.file != now) {
            let _ = self.fs.remove_file(&self.file_path(old.file));
        }
    }

    /// Makes the built snapshot `meta` in file `number` of `len` bytes the
    /// current one (synced) unless the current one is newer; says whether
    /// it did.
    pub(crate) fn replace_built(&self, meta: &Meta, number: u64, len: u64) -> Result<bool, StoreError> {
        let subject = || ErrorSubject::Snapshot(Some(meta.signature()));
        let _replacing = self.lock();
        // A record that does not decode is replaced, as before.
        let current = self.read_record().ok().flatten();
        if let Some(current) = &current {
            if current.meta.last_log_id > meta.last_log_id {
                return Ok(false);
            }
        }
        self.fs.sync_dir(&self.dir).map_err(|e| write_error(subject(), &e))?;
        let record = StoredSnapshot { meta: meta.clone(), file: number, len };
        let value = record.encode().map_err(|e| write_error(subject(), &e))?;
        let mut batch = WriteBatch::new();
        batch.put_cf(&self.family, CURRENT_KEY, &value);
        let sync = WriteOptions { sync: true, disable_wal: false };
        self.db.write_opt(&batch, &sync).map_err(|e| write_error(subject(), &e))?;
        self.remove_replaced(current, number);
        Ok(true)
    }

    /// The current snapshot's metadata and file, opened for reading; `None`
    /// if there is none. The file's length is checked against the record.
    pub(crate) fn current(&self) -> Result<Option<(Meta, SnapshotFile)>, StoreError> {
        let Some(record) = self.read_record()? else { return Ok(None) };
        let subject = || ErrorSubject::Snapshot(Some(record.meta.signature()));
        let mut file = SnapshotFile::open(Arc::clone(&self.fs), self.file_path(record.file), false)
            .map_err(|e| read_error(subject(), &e))?;
        let (_, len) = file.reader().map_err(|e| read_error(subject(), &e))?;
        if len != record.len {
            let e = CodecError::Inconsistent(format!(
                "snapshot file {} has {len} bytes; its record says {}",
                file.path().display(),
                record.len
            ));
            return Err(read_error(subject(), &e));
        }
        Ok(Some((record.meta, file)))
    }
}
