//! [`FileSystem`] over the operating system's files (std plus `fcntl` record locks).
//!
//! Writable files buffer appends in user space (64 KiB) and write them out on
//! `flush`/`sync`; `sync` is `fdatasync`. Directory sync opens the directory and
//! fsyncs it. Locks are POSIX record locks (`fcntl(F_SETLK)`) with a
//! process-wide set of the files held, so that two handles in one process
//! conflict too (`PosixLock`).
//!
//! Random-access files read with `pread`, or, opened by `open_random_mmap`,
//! from a read-only shared memory map (RocksDB `PosixMmapReadableFile`). A
//! mapped file must not shrink while mapped: reading a page past its new end
//! raises SIGBUS, which no check here can turn into an error. Ebb maps only
//! SSTs, which are immutable once written, as RocksDB documents for
//! `allow_mmap_reads`. `advise` is `posix_fadvise` on a descriptor and
//! `madvise` on a map.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use memmap2::{Advice, Mmap};

use super::{Access, FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};

/// A writer's buffer: 1 MiB, RocksDB's default `writable_file_max_buffer_size`.
/// Larger writes let the kernel keep a file's pages in large folios: a
/// point read of a 100 KB block from a table written in 64 KB pieces spent
/// 6.9 % of its time looking up page-cache folios, 2.9 % from one written
/// in 1 MiB pieces (docs/benchmarks.md, "Table writes of 1 MiB").
const WRITE_BUFFER: usize = 1 << 20;

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
            let timer = crate::perf::PerfTimer::start();
            self.file.write_all(&self.buf).map_err(|e| Error::io("write", &self.path, e))?;
            timer.stop_io(|c| &mut c.write_nanos);
            let bytes = self.buf.len() as u64;
            crate::perf::count_io(|c| c.bytes_written += bytes);
            self.buf.clear();
        }
        Ok(())
    }
}

impl WritableFile for PosixWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.size += data.len() as u64;
        if data.len() > WRITE_BUFFER {
            // What is buffered and `data` in one `writev`, `data` not copied.
            let bytes = (self.buf.len() + data.len()) as u64;
            let timer = crate::perf::PerfTimer::start();
            let mut parts = [std::io::IoSlice::new(&self.buf), std::io::IoSlice::new(data)];
            let mut parts = &mut parts[..];
            while !parts.is_empty() {
                match self.file.write_vectored(parts) {
                    Ok(0) => {
                        let e = std::io::Error::new(std::io::ErrorKind::WriteZero, "writev wrote nothing");
                        return Err(Error::io("writev", &self.path, e));
                    }
                    Ok(n) => std::io::IoSlice::advance_slices(&mut parts, n),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(Error::io("writev", &self.path, e)),
                }
            }
            timer.stop_io(|c| &mut c.write_nanos);
            crate::perf::count_io(|c| c.bytes_written += bytes);
            self.buf.clear();
            return Ok(());
        }
        if self.buf.len() + data.len() > WRITE_BUFFER {
            self.write_out()?;
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        self.write_out()
    }
    fn sync(&mut self) -> Result<()> {
        self.write_out()?;
        let timer = crate::perf::PerfTimer::start();
        self.file.sync_data().map_err(|e| Error::io("fdatasync", &self.path, e))?;
        timer.stop_io(|c| &mut c.fsync_nanos);
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

impl PosixRandom {
    /// `offset + done` as the `off_t` a positional read takes.
    fn os_offset(&self, op: &'static str, offset: u64, done: usize) -> Result<libc::off_t> {
        libc::off_t::try_from(offset.saturating_add(done as u64)).map_err(|_| {
            Error::io(op, &self.path, std::io::Error::new(std::io::ErrorKind::InvalidInput, "offset too large"))
        })
    }

    /// What a positional read returned: the bytes read (0 at end of file),
    /// `None` when interrupted (to retry), or the error, naming `op`.
    fn os_count(&self, op: &'static str, n: isize) -> Result<Option<usize>> {
        if n >= 0 {
            return Ok(Some(n as usize));
        }
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::Interrupted {
            return Ok(None);
        }
        Err(Error::io(op, &self.path, e))
    }
}

impl PosixRandom {
    /// `pread` until `len` bytes or the end of the file, into `out`'s spare
    /// capacity.
    #[allow(unsafe_code)]
    fn pread_append(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<usize> {
        out.reserve(len);
        let base = out.len();
        let mut done = 0usize;
        while done < len {
            let at = self.os_offset("pread", offset, done)?;
            // SAFETY: `base + done <= base + len <= capacity`: the call writes
            // at most `len - done` bytes into capacity `out` owns exclusively.
            let n =
                unsafe { libc::pread(self.file.as_raw_fd(), out.as_mut_ptr().add(base + done).cast(), len - done, at) };
            match self.os_count("pread", n)? {
                None => continue,
                Some(0) => break,
                Some(n) => done += n,
            }
            // SAFETY: the kernel filled `out` up to `base + done`, within capacity.
            unsafe { out.set_len(base + done) };
        }
        Ok(done)
    }
}

impl RandomAccessFile for PosixRandom {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.read_at_append(offset, len, &mut buf)?;
        Ok(buf)
    }
    /// `pread` into `out`'s spare capacity: no zeroing, no copy.
    fn read_at_append(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<usize> {
        let timer = crate::perf::PerfTimer::start();
        let done = self.pread_append(offset, len, out)?;
        timer.stop_io(|c| &mut c.read_nanos);
        crate::perf::count_io(|c| c.bytes_read += done as u64);
        Ok(done)
    }
    /// One `preadv` into `head` and the returned vector's spare capacity:
    /// no copy and no zeroing of the tail.
    #[allow(unsafe_code)]
    fn read_split_at(&self, offset: u64, head: &mut [u8], tail_len: usize) -> Result<(usize, Vec<u8>)> {
        let timer = crate::perf::PerfTimer::start();
        let mut tail: Vec<u8> = Vec::with_capacity(tail_len);
        let want = head.len().saturating_add(tail_len);
        let mut done = 0usize;
        while done < want {
            let in_head = done.min(head.len());
            let in_tail = done - in_head;
            let iov = [
                libc::iovec { iov_base: head[in_head..].as_mut_ptr().cast(), iov_len: head.len() - in_head },
                // SAFETY: `in_tail <= tail_len`, the vector's capacity.
                libc::iovec { iov_base: unsafe { tail.as_mut_ptr().add(in_tail) }.cast(), iov_len: tail_len - in_tail },
            ];
            let at = self.os_offset("preadv", offset, done)?;
            // SAFETY: both iovecs point into memory this call owns exclusively
            // (`head`, and `tail`'s capacity from `in_tail` on), of the lengths given.
            let n = unsafe { libc::preadv(self.file.as_raw_fd(), iov.as_ptr(), 2, at) };
            match self.os_count("preadv", n)? {
                None => continue,
                Some(0) => break,
                Some(n) => done += n,
            }
            // SAFETY: the kernel filled the tail in order, up to `done - head.len()`
            // bytes, all within capacity.
            unsafe { tail.set_len(done.saturating_sub(head.len())) };
        }
        timer.stop_io(|c| &mut c.read_nanos);
        crate::perf::count_io(|c| c.bytes_read += done as u64);
        Ok((done.min(head.len()), tail))
    }
    fn size(&self) -> Result<u64> {
        Ok(self.file.metadata().map_err(|e| Error::io("stat", &self.path, e))?.len())
    }
    fn advise(&self, access: Access) {
        #[cfg(target_os = "linux")]
        {
            let advice = match access {
                Access::Normal => libc::POSIX_FADV_NORMAL,
                Access::Random => libc::POSIX_FADV_RANDOM,
                Access::Sequential => libc::POSIX_FADV_SEQUENTIAL,
                Access::WillNeed => libc::POSIX_FADV_WILLNEED,
            };
            // SAFETY: the descriptor is owned by `self.file` and open for the call's duration.
            #[allow(unsafe_code)]
            let _ = unsafe { libc::posix_fadvise(self.file.as_raw_fd(), 0, 0, advice) };
        }
        #[cfg(not(target_os = "linux"))]
        let _ = access;
    }
}

/// A file read from a read-only memory map taken at open; its size is the
/// size then. An empty file maps nothing (`map` is `None`).
struct PosixMmapRandom {
    path: PathBuf,
    /// Shared with every view [`RandomAccessFile::read_mapped`] hands out,
    /// so the mapping outlives the file object while a view is alive.
    map: Option<Arc<Mmap>>,
}

/// The owner of a view of a mapping (for [`Bytes::from_owner`]).
struct MapOwner(Arc<Mmap>);

impl AsRef<[u8]> for MapOwner {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl PosixMmapRandom {
    fn bytes(&self) -> &[u8] {
        self.map.as_deref().map_or(&[], |m| &m[..])
    }

    /// The range `len` bytes at `offset` covers, clipped to the end; an error
    /// when `offset` is past the end.
    fn range(&self, offset: u64, len: usize) -> Result<std::ops::Range<usize>> {
        let size = self.bytes().len();
        let start = match usize::try_from(offset) {
            Ok(s) if s <= size => s,
            _ => {
                let reason = format!("read at offset {offset} past the end of a {size}-byte mapped file");
                return Err(Error::io(
                    "mmap read",
                    &self.path,
                    std::io::Error::new(std::io::ErrorKind::UnexpectedEof, reason),
                ));
            }
        };
        Ok(start..start.saturating_add(len).min(size))
    }
}

impl RandomAccessFile for PosixMmapRandom {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let range = self.range(offset, len)?;
        Ok(self.bytes()[range].to_vec())
    }
    fn read_mapped(&self, offset: u64, len: usize) -> Option<Result<Bytes>> {
        let map = self.map.as_ref()?;
        Some(self.range(offset, len).map(|r| Bytes::from_owner(MapOwner(Arc::clone(map))).slice(r)))
    }
    fn read_split_at(&self, offset: u64, head: &mut [u8], tail_len: usize) -> Result<(usize, Vec<u8>)> {
        let bytes = self.bytes();
        if usize::try_from(offset).map_or(true, |s| s > bytes.len()) {
            return self.read_at(offset, 0).map(|_| (0, Vec::new()));
        }
        let start = offset as usize;
        let split = start.saturating_add(head.len()).min(bytes.len());
        let end = split.saturating_add(tail_len).min(bytes.len());
        head[..split - start].copy_from_slice(&bytes[start..split]);
        Ok((split - start, bytes[split..end].to_vec()))
    }
    fn size(&self) -> Result<u64> {
        Ok(self.bytes().len() as u64)
    }
    fn advise(&self, access: Access) {
        let advice = match access {
            Access::Normal => Advice::Normal,
            Access::Random => Advice::Random,
            Access::Sequential => Advice::Sequential,
            Access::WillNeed => Advice::WillNeed,
        };
        if let Some(map) = &self.map {
            let _ = map.advise(advice);
        }
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

/// A LOCK file held: a POSIX record lock (`fcntl(F_SETLK)`, as RocksDB's
/// `LockFile`) on the whole file, plus its entry in [`LOCKED`].
///
/// Not `flock`: an `flock` lock belongs to the open file description, which
/// a child process forked by any thread shares until it execs, so a
/// database closed and reopened while another thread spawns a process could
/// find its own old lock still held (`Busy`). A record lock belongs to the
/// process and is never inherited. Record locks do not exclude handles of
/// one process from each other, and closing any descriptor of the file drops
/// them: the process-wide [`LOCKED`] set, checked before the file is
/// opened, does both jobs.
struct PosixLock {
    /// `None` only inside `drop`.
    file: Option<File>,
    id: (u64, u64),
}

impl FileLock for PosixLock {}

impl Drop for PosixLock {
    fn drop(&mut self) {
        // The descriptor is closed (which drops the process's record lock)
        // before the id leaves the set, both under the set's mutex: a
        // thread locking the same file meanwhile would otherwise pass the
        // check, take the lock the process already held, and lose it to
        // this close.
        let mut locked = LOCKED.lock();
        drop(self.file.take());
        locked.remove(&self.id);
    }
}

/// The LOCK files this process holds, by (device, inode).
static LOCKED: parking_lot::Mutex<std::collections::BTreeSet<(u64, u64)>> =
    parking_lot::Mutex::new(std::collections::BTreeSet::new());

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
    fn open_random_mmap(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        let len = file.metadata().map_err(|e| Error::io("stat", path, e))?.len();
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the map is read-only. Its
            // bytes may change only if the file is written or truncated while
            // mapped; callers map only immutable files (SSTs), see the module
            // contract. The descriptor may close after mapping.
            #[allow(unsafe_code)]
            let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io("mmap", path, e))?;
            Some(map)
        };
        Ok(Arc::new(PosixMmapRandom { path: path.to_path_buf(), map: map.map(Arc::new) }))
    }
    fn open_random_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(super::direct::DirectRandom::open(path)?))
    }
    fn new_writable_direct(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(super::direct::DirectWritable::create(path)?))
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
    fn link_file(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::hard_link(from, to).map_err(|e| Error::io("link", to, e))
    }
    fn sync_dir(&self, path: &Path) -> Result<()> {
        let dir = File::open(path).map_err(|e| Error::io("open dir", path, e))?;
        dir.sync_all().map_err(|e| Error::io("fsync dir", path, e))
    }
    fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        use std::os::unix::fs::MetadataExt;
        let busy = || Error::Busy(format!("{} is locked by another process or open handle", path.display()));
        // Held while checking, opening and locking: two threads of this
        // process cannot both pass the check.
        let mut locked = LOCKED.lock();
        // Checked before opening: a descriptor of a file this process has
        // locked, once closed, would release that lock.
        if let Ok(m) = std::fs::metadata(path) {
            if locked.contains(&(m.dev(), m.ino())) {
                return Err(busy());
            }
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open lock", path, e))?;
        let m = file.metadata().map_err(|e| Error::io("stat lock", path, e))?;
        let id = (m.dev(), m.ino());
        if locked.contains(&id) {
            // Created anew between the check and the open? Then it is
            // another file; a held one is never reopened here.
            return Err(busy());
        }
        // SAFETY: an all-zero `flock` record is valid; the fields that
        // matter are set below.
        #[allow(unsafe_code)]
        let mut record: libc::flock = unsafe { std::mem::zeroed() };
        record.l_type = libc::F_WRLCK as libc::c_short;
        record.l_whence = libc::SEEK_SET as libc::c_short;
        record.l_start = 0;
        record.l_len = 0;
        // SAFETY: the descriptor is owned by `file`, which outlives the
        // call, and `record` is a valid lock record.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &record) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if matches!(err.raw_os_error(), Some(libc::EACCES) | Some(libc::EAGAIN)) {
                return Err(busy());
            }
            return Err(Error::io("fcntl lock", path, err));
        }
        locked.insert(id);
        Ok(Box::new(PosixLock { file: Some(file), id }))
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;

    #[test]
    fn a_lock_excludes_this_process_and_is_not_inherited_by_a_child() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("LOCK");
        let fs = PosixFs::new();
        let first = fs.lock_file(&path).unwrap();
        let e = fs.lock_file(&path).err().expect("a second handle of this process");
        assert!(matches!(e, Error::Busy(_)), "{e}");
        // The failed attempt closed nothing that releases the lock held.
        assert!(matches!(fs.lock_file(&path), Err(Error::Busy(_))));
        // A child forked while the lock is held (every process spawn forks
        // first) must not keep it: the parent drops and takes it again
        // while the child still lives.
        // SAFETY: the child only sleeps and exits (async-signal-safe calls).
        #[allow(unsafe_code)]
        let child = unsafe { libc::fork() };
        if child == 0 {
            #[allow(unsafe_code)]
            unsafe {
                libc::usleep(300_000);
                libc::_exit(0);
            }
        }
        assert!(child > 0);
        drop(first);
        let again = fs.lock_file(&path);
        let mut status = 0;
        // SAFETY: waits for the child forked above.
        #[allow(unsafe_code)]
        unsafe {
            libc::waitpid(child, &mut status, 0)
        };
        assert!(again.is_ok(), "the child kept the lock: {:?}", again.err());
    }

    fn file_of(bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.sst");
        std::fs::write(&path, bytes).unwrap();
        (dir, path)
    }

    /// `bytes` opened for reads through pread, a map and MemFs (the trait's defaults).
    fn readers_of(bytes: &[u8]) -> (tempfile::TempDir, [Arc<dyn RandomAccessFile>; 3]) {
        let (dir, path) = file_of(bytes);
        let fs = PosixFs::new();
        let mem = crate::fs::MemFs::new();
        let mem_path = Path::new("/f");
        let mut w = mem.new_writable(mem_path).unwrap();
        w.append(bytes).unwrap();
        w.sync().unwrap();
        drop(w);
        let files =
            [fs.open_random(&path).unwrap(), fs.open_random_mmap(&path).unwrap(), mem.open_random(mem_path).unwrap()];
        (dir, files)
    }

    #[test]
    fn mmap_reads_return_what_pread_returns() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(6);
        let bytes: Vec<u8> = (0..20_000).map(|_| rng.gen()).collect();
        let (_dir, path) = file_of(&bytes);
        let fs = PosixFs::new();
        let pread = fs.open_random(&path).unwrap();
        let mapped = fs.open_random_mmap(&path).unwrap();
        assert_eq!(mapped.size().unwrap(), 20_000);
        for access in [Access::Random, Access::Sequential, Access::WillNeed, Access::Normal] {
            pread.advise(access);
            mapped.advise(access);
        }
        for _ in 0..500 {
            let offset = rng.gen_range(0..=20_000u64);
            let len = rng.gen_range(0..6_000usize);
            let got = mapped.read_at(offset, len).unwrap();
            assert_eq!(got, pread.read_at(offset, len).unwrap(), "offset {offset} len {len}");
            let end = (offset as usize + len).min(bytes.len());
            assert_eq!(got, &bytes[offset as usize..end], "a read crossing the end is short, as with pread");
        }
    }

    /// A mapped file hands out views equal to what pread reads; pread has
    /// none; a view outlives the file object and the file's deletion.
    #[test]
    fn mapped_views_read_what_pread_reads_and_outlive_the_file() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        let bytes: Vec<u8> = (0..20_000).map(|_| rng.gen()).collect();
        let (_dir, path) = file_of(&bytes);
        let fs = PosixFs::new();
        let pread = fs.open_random(&path).unwrap();
        assert!(pread.read_mapped(0, 10).is_none());
        let mapped = fs.open_random_mmap(&path).unwrap();
        for _ in 0..200 {
            let offset = rng.gen_range(0..=20_000u64);
            let len = rng.gen_range(0..6_000usize);
            let view = mapped.read_mapped(offset, len).unwrap().unwrap();
            assert_eq!(&view[..], &pread.read_at(offset, len).unwrap()[..], "offset {offset} len {len}");
        }
        assert!(mapped.read_mapped(20_001, 1).unwrap().is_err(), "a view past the end");
        let view = mapped.read_mapped(100, 1000).unwrap().unwrap();
        drop(mapped);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(&view[..], &bytes[100..1100]);
    }

    /// Appends of every size, buffered or written past the buffer with what
    /// it holds, land in order, byte for byte.
    #[test]
    fn appends_small_and_large_land_in_order() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(8);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.blob");
        let mut f = PosixFs::new().new_writable(&path).unwrap();
        let mut want = Vec::new();
        for i in 0..400 {
            let len = match i % 4 {
                0 => rng.gen_range(0..40),
                1 => rng.gen_range(0..WRITE_BUFFER),
                _ => rng.gen_range(WRITE_BUFFER - 2..3 * WRITE_BUFFER),
            };
            let chunk: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            f.append(&chunk).unwrap();
            want.extend_from_slice(&chunk);
            assert_eq!(f.size(), want.len() as u64);
        }
        f.sync().unwrap();
        drop(f);
        assert!(std::fs::read(&path).unwrap() == want, "the file is not the appends in order");
    }

    /// A read appended to a buffer leaves the buffer's bytes and adds the
    /// file's, short only at the end of the file, for pread (into spare
    /// capacity), the map and the trait's default (MemFs); `read_at` is the
    /// same read into an empty buffer.
    #[test]
    fn appended_reads_add_the_files_bytes() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let bytes: Vec<u8> = (0..300_000).map(|_| rng.gen()).collect();
        let (_dir, files) = readers_of(&bytes);
        for _ in 0..300 {
            let offset = rng.gen_range(0..=300_000u64);
            let len = rng.gen_range(0..200_000usize);
            let kept = rng.gen_range(0..5000usize);
            let want = &bytes[offset as usize..(offset as usize + len).min(bytes.len())];
            for f in &files {
                let mut out = vec![0x5a; kept];
                let n = f.read_at_append(offset, len, &mut out).unwrap();
                assert_eq!(n, want.len(), "offset {offset} len {len}");
                assert!(out[..kept].iter().all(|b| *b == 0x5a), "the buffer's own bytes stay");
                assert_eq!(&out[kept..], want, "offset {offset} len {len}");
                assert_eq!(f.read_at(offset, len).unwrap(), want, "offset {offset} len {len}");
            }
        }
    }

    /// A split read is a whole read cut in two, for pread, the map and the
    /// trait's default (MemFs), also across the end of the file.
    #[test]
    fn split_reads_return_what_a_whole_read_returns() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let bytes: Vec<u8> = (0..300_000).map(|_| rng.gen()).collect();
        let (_dir, files) = readers_of(&bytes);
        for _ in 0..300 {
            let offset = rng.gen_range(0..=300_000u64);
            let head_len = rng.gen_range(0..64usize);
            let tail_len = rng.gen_range(0..200_000usize);
            let whole = files[0].read_at(offset, head_len + tail_len).unwrap();
            for f in &files {
                let mut head = vec![0xaa; head_len];
                let (n, tail) = f.read_split_at(offset, &mut head, tail_len).unwrap();
                assert_eq!(n, whole.len().min(head_len), "offset {offset} head {head_len} tail {tail_len}");
                assert_eq!(&head[..n], &whole[..n]);
                assert_eq!(tail, &whole[n..], "offset {offset} head {head_len} tail {tail_len}");
            }
        }
    }

    #[test]
    fn a_mapped_read_past_the_end_is_an_error_naming_the_file() {
        let (_dir, path) = file_of(b"0123456789");
        let mapped = PosixFs::new().open_random_mmap(&path).unwrap();
        for offset in [11, 1 << 40, u64::MAX] {
            let err = mapped.read_at(offset, 4).unwrap_err();
            assert!(matches!(err, Error::Io { .. }), "{err}");
            assert!(err.to_string().contains("000001.sst"), "{err}");
        }
        assert_eq!(mapped.read_at(8, usize::MAX).unwrap(), b"89");
        assert_eq!(mapped.read_at(10, 4).unwrap(), b"");
    }

    #[test]
    fn an_empty_file_maps_to_nothing() {
        let (_dir, path) = file_of(b"");
        let mapped = PosixFs::new().open_random_mmap(&path).unwrap();
        assert_eq!(mapped.size().unwrap(), 0);
        assert_eq!(mapped.read_at(0, 10).unwrap(), b"");
        assert!(mapped.read_at(1, 1).is_err());
        mapped.advise(Access::Random);
    }
}
