//! [`FileSystem`] over the operating system's files (std plus `flock`).
//!
//! Writable files buffer appends in user space (64 KiB) and write them out on
//! `flush`/`sync`; `sync` is `fdatasync`. Directory sync opens the directory and
//! fsyncs it. Locks are `flock(LOCK_EX | LOCK_NB)`, which also conflicts between
//! two handles in one process.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};

const WRITE_BUFFER: usize = 64 * 1024;

/// The real filesystem.
#[derive(Debug, Default, Clone, Copy)]
pub struct PosixFs;

impl PosixFs {
    /// A handle to the real filesystem.
    pub fn new() -> Self {
        PosixFs
    }
}

struct PosixWritable {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    size: u64,
    synced_through: u64,
}

impl PosixWritable {
    fn write_out(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.file.write_all(&self.buf).map_err(|e| Error::io("write", &self.path, e))?;
            self.buf.clear();
        }
        Ok(())
    }
}

impl WritableFile for PosixWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.size += data.len() as u64;
        if self.buf.len() + data.len() > WRITE_BUFFER {
            self.write_out()?;
            if data.len() > WRITE_BUFFER {
                return self.file.write_all(data).map_err(|e| Error::io("write", &self.path, e));
            }
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        self.write_out()
    }
    fn sync(&mut self) -> Result<()> {
        self.write_out()?;
        self.file.sync_data().map_err(|e| Error::io("fdatasync", &self.path, e))?;
        self.synced_through = self.size;
        Ok(())
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn range_sync_hint(&mut self) -> Result<()> {
        self.write_out()?;
        #[cfg(target_os = "linux")]
        {
            // SAFETY: the descriptor is owned by `self.file` and open for the call's duration.
            #[allow(unsafe_code)]
            let rc = unsafe {
                libc::sync_file_range(
                    self.file.as_raw_fd(),
                    self.synced_through as i64,
                    (self.size - self.synced_through) as i64,
                    libc::SYNC_FILE_RANGE_WRITE,
                )
            };
            if rc != 0 {
                return Err(Error::io("sync_file_range", &self.path, std::io::Error::last_os_error()));
            }
            self.synced_through = self.size;
        }
        Ok(())
    }
}

impl Drop for PosixWritable {
    fn drop(&mut self) {
        // Best effort: an unsynced file makes no durability promise, but data
        // handed to `append` should reach the OS like a buffered std writer would.
        let _ = self.write_out();
    }
}

struct PosixRandom {
    path: PathBuf,
    file: File,
}

impl RandomAccessFile for PosixRandom {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        let mut done = 0;
        while done < len {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("pread", &self.path, e)),
            }
        }
        buf.truncate(done);
        Ok(buf)
    }
    fn size(&self) -> Result<u64> {
        Ok(self.file.metadata().map_err(|e| Error::io("stat", &self.path, e))?.len())
    }
}

struct PosixSequential {
    path: PathBuf,
    file: File,
}

impl SequentialFile for PosixSequential {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        loop {
            match self.file.read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("read", &self.path, e)),
            }
        }
    }
}

struct PosixLock {
    _file: File,
}

impl FileLock for PosixLock {}

impl FileSystem for PosixFs {
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        std::fs::create_dir_all(path).map_err(|e| Error::io("mkdir", path, e))
    }
    fn new_writable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = File::create(path).map_err(|e| Error::io("create", path, e))?;
        Ok(Box::new(PosixWritable {
            path: path.to_path_buf(),
            file,
            buf: Vec::with_capacity(WRITE_BUFFER),
            size: 0,
            synced_through: 0,
        }))
    }
    fn reopen_writable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new().append(true).open(path).map_err(|e| Error::io("open", path, e))?;
        let size = file.metadata().map_err(|e| Error::io("stat", path, e))?.len();
        Ok(Box::new(PosixWritable {
            path: path.to_path_buf(),
            file,
            buf: Vec::with_capacity(WRITE_BUFFER),
            size,
            synced_through: size,
        }))
    }
    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        Ok(Arc::new(PosixRandom { path: path.to_path_buf(), file }))
    }
    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        Ok(Box::new(PosixSequential { path: path.to_path_buf(), file }))
    }
    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }
    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        let rd = std::fs::read_dir(path).map_err(|e| Error::io("readdir", path, e))?;
        let mut names = Vec::new();
        for entry in rd {
            let entry = entry.map_err(|e| Error::io("readdir", path, e))?;
            names.push(entry.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }
    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(std::fs::metadata(path).map_err(|e| Error::io("stat", path, e))?.len())
    }
    fn remove_file(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io("unlink", path, e))
    }
    fn remove_dir(&self, path: &Path) -> Result<()> {
        std::fs::remove_dir(path).map_err(|e| Error::io("rmdir", path, e))
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::rename(from, to).map_err(|e| Error::io("rename", from, e))
    }
    fn sync_dir(&self, path: &Path) -> Result<()> {
        let dir = File::open(path).map_err(|e| Error::io("open dir", path, e))?;
        dir.sync_all().map_err(|e| Error::io("fsync dir", path, e))
    }
    fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open lock", path, e))?;
        // SAFETY: the descriptor is owned by `file`, which outlives the call.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                return Err(Error::Busy(format!("{} is locked by another process or open handle", path.display())));
            }
            return Err(Error::io("flock", path, err));
        }
        Ok(Box::new(PosixLock { _file: file }))
    }
}
