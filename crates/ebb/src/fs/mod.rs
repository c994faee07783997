//! The filesystem boundary: every byte Ebb reads or writes goes through
//! [`FileSystem`] (Pebble `vfs.FS`).
//!
//! Two implementations: [`PosixFs`] for real directories and [`MemFs`], an
//! in-memory filesystem that can simulate power loss (it keeps only what was
//! synced) and inject I/O errors, for tests.
//!
//! Durability contract, which both implementations honour:
//! 1. Data appended to a [`WritableFile`] is durable only after `sync()` returns.
//! 2. A new file's name, a rename or a removal is durable only after
//!    `sync_dir()` of its parent directory returns.
//! 3. `rename` atomically replaces the target.
//!
//! All implementations are `Send + Sync`; a single file handle is used by one
//! thread at a time.

mod direct;
mod mem;
mod posix;

pub use mem::{CrashMode, FaultKind, FaultOp, FaultRule, MemFs};
pub use posix::PosixFs;

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;

/// The error of a filesystem without direct I/O.
fn direct_io_unsupported(path: &Path) -> crate::Error {
    crate::Error::NotSupported(format!(
        "direct I/O: the file system holding {} does not support it; turn off use_direct_reads and \
         use_direct_io_for_flush_and_compaction",
        path.display()
    ))
}

/// A file being written sequentially.
pub trait WritableFile: Send {
    /// Appends bytes (possibly buffered in user space).
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Pushes buffered bytes to the operating system (not durable).
    fn flush(&mut self) -> Result<()>;
    /// Makes every appended byte durable.
    fn sync(&mut self) -> Result<()>;
    /// Bytes appended so far.
    fn size(&self) -> u64;
    /// Asks the OS to start writing back everything appended so far without
    /// waiting (`sync_file_range` write-behind); a no-op where unsupported.
    fn range_sync_hint(&mut self) -> Result<()> {
        Ok(())
    }
}

/// How a file is about to be read (POSIX `posix_fadvise` advice, RocksDB
/// `FSRandomAccessFile::AccessPattern`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No particular pattern: the OS default readahead.
    Normal,
    /// Point reads: the OS should not read ahead.
    Random,
    /// Front to back: the OS may read ahead aggressively.
    Sequential,
    /// The whole file will be needed soon.
    WillNeed,
}

/// A file read at arbitrary offsets, shared between threads.
pub trait RandomAccessFile: Send + Sync {
    /// Reads up to `len` bytes at `offset`; fewer only at end of file. A read
    /// that starts past the end returns no bytes or fails (a memory-mapped
    /// file fails, naming the file); it never panics.
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>>;
    /// Reads up to `len` bytes at `offset` onto the end of `out`, as
    /// `read_at` would read them (fewer only at end of file); returns how
    /// many. For a buffer refilled again and again (a readahead window): a
    /// file that can read into `out`'s spare capacity does, with no copy and
    /// no zeroing. The default makes one `read_at` and copies.
    fn read_at_append(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<usize> {
        let bytes = self.read_at(offset, len)?;
        out.extend_from_slice(&bytes);
        Ok(bytes.len())
    }
    /// Reads `head.len()` bytes at `offset` into `head` and the `tail_len`
    /// bytes after them into a new vector; returns how many bytes went into
    /// `head`, and the vector. Fewer only at end of file, as `read_at`. For
    /// a record whose header is checked and whose body is handed on (a blob
    /// value): the body lands in the buffer returned, instead of being
    /// copied out of one whole read. The default makes one `read_at` and
    /// copies.
    fn read_split_at(&self, offset: u64, head: &mut [u8], tail_len: usize) -> Result<(usize, Vec<u8>)> {
        let bytes = self.read_at(offset, head.len().saturating_add(tail_len))?;
        let n = bytes.len().min(head.len());
        head[..n].copy_from_slice(&bytes[..n]);
        Ok((n, bytes[n..].to_vec()))
    }
    /// For a file whose bytes are in memory already (a memory map): `len`
    /// bytes at `offset` (fewer only at end of file, as `read_at`) as a view
    /// of them, no copy, keeping the mapping alive while the view lives.
    /// `None` (the default) for a file that must be read into a buffer.
    fn read_mapped(&self, _offset: u64, _len: usize) -> Option<Result<Bytes>> {
        None
    }
    /// The file's size in bytes.
    fn size(&self) -> Result<u64>;
    /// Tells the OS how the file will be read. A hint: it changes no result,
    /// and a failure is ignored, as RocksDB ignores a failed `Hint`. The
    /// default does nothing.
    fn advise(&self, _access: Access) {}
}

/// A file read front to back.
pub trait SequentialFile: Send {
    /// Reads up to `buf.len()` bytes; 0 means end of file.
    fn read(&mut self, buf: &mut [u8]) -> Result<usize>;
}

/// A held advisory lock on a file; released when dropped.
pub trait FileLock: Send + Sync {}

/// The operations Ebb needs from a filesystem.
pub trait FileSystem: Send + Sync + 'static {
    /// Creates a directory and its parents.
    fn create_dir_all(&self, path: &Path) -> Result<()>;
    /// Creates (or truncates) a file for writing.
    fn new_writable(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for writing at its end.
    fn reopen_writable(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens a file for positional reads.
    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Opens a file for positional reads served from a read-only memory map
    /// (RocksDB `allow_mmap_reads`). Only for files that are never written
    /// again while open, such as SSTs: on most systems a mapped file that
    /// shrinks makes a later read of the lost pages raise SIGBUS. The default
    /// (and [`MemFs`]) opens it as [`FileSystem::open_random`] does.
    fn open_random_mmap(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_random(path)
    }
    /// Opens a file for positional reads that bypass the OS page cache
    /// (`O_DIRECT`; RocksDB `use_direct_reads`). `NotSupported` where the
    /// filesystem cannot: the default. [`MemFs`], which has no page cache,
    /// opens it as [`FileSystem::open_random`] does.
    fn open_random_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Err(direct_io_unsupported(path))
    }
    /// Creates (or truncates) a file written past the OS page cache
    /// (`O_DIRECT`; RocksDB `use_direct_io_for_flush_and_compaction`).
    /// `NotSupported` where the filesystem cannot: the default. [`MemFs`]
    /// creates it as [`FileSystem::new_writable`] does.
    fn new_writable_direct(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Err(direct_io_unsupported(path))
    }
    /// Opens a file for sequential reads.
    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>>;
    /// True when the file or directory exists.
    fn exists(&self, path: &Path) -> bool;
    /// The names (not paths) of the entries in a directory.
    fn list_dir(&self, path: &Path) -> Result<Vec<String>>;
    /// Size of a file in bytes.
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> Result<()>;
    /// Removes an empty directory.
    fn remove_dir(&self, path: &Path) -> Result<()>;
    /// Atomically renames `from` to `to`, replacing `to`. `from` may also
    /// be a directory, when `to` does not exist.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Makes `to` a second name of the file `from` (a hard link; `to` must
    /// not exist). Durable after `sync_dir` of `to`'s directory. The default
    /// refuses with [`crate::Error::NotSupported`], and callers copy
    /// instead (a checkpoint across filesystems does too).
    fn link_file(&self, from: &Path, to: &Path) -> Result<()> {
        let _ = (from, to);
        Err(crate::Error::NotSupported("hard links on this filesystem".into()))
    }
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, path: &Path) -> Result<()>;
    /// Takes an exclusive lock on `path` (creating it), or fails with
    /// [`crate::Error::Busy`] when another holder has it.
    fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>>;

    /// Reads a whole file.
    fn read_file(&self, path: &Path) -> Result<Vec<u8>> {
        let mut f = self.open_sequential(path)?;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                return Ok(out);
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    /// Writes a whole file durably: a temporary name, sync, rename, directory sync.
    fn write_file_atomic(&self, path: &Path, data: &[u8]) -> Result<()> {
        let tmp = path.with_extension("dbtmp");
        {
            let mut f = self.new_writable(&tmp)?;
            f.append(data)?;
            f.sync()?;
        }
        kill_point!("current_rename", if path.ends_with("CURRENT"));
        self.rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            kill_point!("dir_sync");
            self.sync_dir(dir)?;
        }
        Ok(())
    }
}

/// Asks the OS to write back a file every `every` bytes appended
/// (`bytes_per_sync`, `wal_bytes_per_sync`): smooths writeback instead of one
/// large burst at the final sync. Durability is unchanged: only `sync` makes
/// data durable. With `every == 0` it is a plain pass-through.
pub struct WriteBehindFile {
    inner: Box<dyn WritableFile>,
    every: u64,
    since_hint: u64,
}

impl WriteBehindFile {
    /// Wraps `inner`, hinting every `every` bytes.
    pub fn wrap(inner: Box<dyn WritableFile>, every: u64) -> Box<dyn WritableFile> {
        if every == 0 {
            return inner;
        }
        Box::new(WriteBehindFile { inner, every, since_hint: 0 })
    }
}

impl WritableFile for WriteBehindFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.inner.append(data)?;
        self.since_hint += data.len() as u64;
        if self.since_hint >= self.every {
            self.inner.range_sync_hint()?;
            self.since_hint = 0;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> Result<()> {
        self.since_hint = 0;
        self.inner.sync()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn range_sync_hint(&mut self) -> Result<()> {
        self.inner.range_sync_hint()
    }
}

/// `inner` with every new file written with direct I/O
/// ([`FileSystem::new_writable_direct`]): what flushes and compactions
/// write through under `use_direct_io_for_flush_and_compaction`. Every
/// other call goes to `inner` as it is.
pub(crate) struct DirectWrites(pub(crate) Arc<dyn FileSystem>);

impl FileSystem for DirectWrites {
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        self.0.create_dir_all(path)
    }
    fn new_writable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.0.new_writable_direct(path)
    }
    fn reopen_writable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.0.reopen_writable(path)
    }
    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.0.open_random(path)
    }
    fn open_random_mmap(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.0.open_random_mmap(path)
    }
    fn open_random_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.0.open_random_direct(path)
    }
    fn new_writable_direct(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.0.new_writable_direct(path)
    }
    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        self.0.open_sequential(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.0.exists(path)
    }
    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        self.0.list_dir(path)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        self.0.file_size(path)
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        self.0.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> Result<()> {
        self.0.remove_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.0.rename(from, to)
    }
    fn link_file(&self, from: &Path, to: &Path) -> Result<()> {
        self.0.link_file(from, to)
    }
    fn sync_dir(&self, path: &Path) -> Result<()> {
        self.0.sync_dir(path)
    }
    fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.0.lock_file(path)
    }
}
