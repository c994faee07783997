//! A [`MemFs`] that calls a test's hooks before file syncs, removals,
//! directory listings, sequential opens and positional reads, so a test can hold a background job at a chosen call
//! (a gate) or count the calls, and check what goes on meanwhile.
//! Everything else passes straight to the `MemFs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ebb::fs::{FileLock, FileSystem, MemFs, RandomAccessFile, SequentialFile, WritableFile};

/// What a test does at the calls a [`HookedFs`] reports; by default nothing.
pub trait FsHooks: Send + Sync {
    /// Before `sync` of a writable file opened at `path`.
    fn before_sync(&self, _path: &Path) {}
    /// Before `remove_file(path)`.
    fn before_remove(&self, _path: &Path) {}
    /// Before `list_dir(path)`.
    fn before_list_dir(&self, _path: &Path) {}
    /// Before `open_sequential(path)` (WALs and the MANIFEST are read so).
    fn before_open_sequential(&self, _path: &Path) {}
    /// Before a read of `len` bytes at `offset` of the file at `path`
    /// (every positional read goes through `read_at`).
    fn before_read_at(&self, _path: &Path, _offset: u64, _len: usize) {}
}

/// [`MemFs`] with [`FsHooks`] in syncs, removals and listings.
pub struct HookedFs {
    inner: MemFs,
    hooks: Arc<dyn FsHooks>,
}

impl HookedFs {
    pub fn new(inner: MemFs, hooks: Arc<dyn FsHooks>) -> Self {
        HookedFs { inner, hooks }
    }

    fn wrap(&self, path: &Path, inner: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        Box::new(HookedFile { inner, path: path.to_path_buf(), hooks: Arc::clone(&self.hooks) })
    }
}

struct HookedFile {
    inner: Box<dyn WritableFile>,
    path: PathBuf,
    hooks: Arc<dyn FsHooks>,
}

impl WritableFile for HookedFile {
    fn append(&mut self, data: &[u8]) -> ebb::Result<()> {
        self.inner.append(data)
    }
    fn flush(&mut self) -> ebb::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> ebb::Result<()> {
        self.hooks.before_sync(&self.path);
        self.inner.sync()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
}

/// A file read at offsets whose reads the hooks see.
struct HookedRandom {
    inner: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    hooks: Arc<dyn FsHooks>,
}

impl RandomAccessFile for HookedRandom {
    fn read_at(&self, offset: u64, len: usize) -> ebb::Result<Vec<u8>> {
        self.hooks.before_read_at(&self.path, offset, len);
        self.inner.read_at(offset, len)
    }
    fn size(&self) -> ebb::Result<u64> {
        self.inner.size()
    }
}

impl FileSystem for HookedFs {
    fn create_dir_all(&self, path: &Path) -> ebb::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn new_writable(&self, path: &Path) -> ebb::Result<Box<dyn WritableFile>> {
        Ok(self.wrap(path, self.inner.new_writable(path)?))
    }
    fn reopen_writable(&self, path: &Path) -> ebb::Result<Box<dyn WritableFile>> {
        Ok(self.wrap(path, self.inner.reopen_writable(path)?))
    }
    fn open_random(&self, path: &Path) -> ebb::Result<Arc<dyn RandomAccessFile>> {
        let inner = self.inner.open_random(path)?;
        Ok(Arc::new(HookedRandom { inner, path: path.to_path_buf(), hooks: Arc::clone(&self.hooks) }))
    }
    fn open_sequential(&self, path: &Path) -> ebb::Result<Box<dyn SequentialFile>> {
        self.hooks.before_open_sequential(path);
        self.inner.open_sequential(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn list_dir(&self, path: &Path) -> ebb::Result<Vec<String>> {
        self.hooks.before_list_dir(path);
        self.inner.list_dir(path)
    }
    fn file_size(&self, path: &Path) -> ebb::Result<u64> {
        self.inner.file_size(path)
    }
    fn remove_file(&self, path: &Path) -> ebb::Result<()> {
        self.hooks.before_remove(path);
        self.inner.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> ebb::Result<()> {
        self.inner.remove_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> ebb::Result<()> {
        self.inner.rename(from, to)
    }
    fn sync_dir(&self, path: &Path) -> ebb::Result<()> {
        self.inner.sync_dir(path)
    }
    fn lock_file(&self, path: &Path) -> ebb::Result<Box<dyn FileLock>> {
        self.inner.lock_file(path)
    }
}
