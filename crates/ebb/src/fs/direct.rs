//! Direct I/O on the real filesystem (`O_DIRECT`; RocksDB's
//! `use_direct_reads` and `use_direct_io_for_flush_and_compaction`): reads
//! and writes bypass the OS page cache, so the block cache is the only cache
//! and a compaction's writes do not push readers' pages out of memory.
//!
//! `O_DIRECT` asks that every transfer's file offset, length and memory
//! address be multiples of the device's logical block size. Both kinds of
//! file here work in [`ALIGN`] (4 KiB) units, a multiple of every common
//! block size:
//! 1. A read is widened to the aligned span around it, read into an aligned
//!    buffer, and the bytes asked for are copied out. A transfer that ends
//!    short, or not on a block boundary, is the end of the file.
//! 2. A writer keeps an aligned buffer whose first byte is at an aligned
//!    file offset. A full buffer is written whole. `flush` (and `sync`)
//!    writes what is buffered padded with zeros to the next block, then
//!    truncates the file to the bytes appended, and keeps the partial last
//!    block in the buffer: the next write of it rewrites that block. So the
//!    file holds exactly the bytes appended after every `flush`, and readers
//!    (with or without `O_DIRECT`) see them.
//!
//! A filesystem that refuses `O_DIRECT` (`EINVAL` at open) is reported as
//! [`Error::NotSupported`] naming the file and the options.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::ptr::NonNull;

use super::{RandomAccessFile, WritableFile};
use crate::error::{Error, Result};

/// The unit of every direct transfer: offsets, lengths and buffer addresses.
pub(crate) const ALIGN: usize = 4096;

/// A writer's buffer: 1 MiB, as RocksDB's default `writable_file_max_buffer_size`.
const WRITE_BUFFER: usize = 1 << 20;

fn round_up(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

/// The error for an open with `O_DIRECT`: `NotSupported` when the
/// filesystem refuses the flag, else the I/O error.
fn open_error(op: &'static str, path: &Path, e: std::io::Error) -> Error {
    if e.raw_os_error() == Some(libc::EINVAL) {
        return Error::NotSupported(format!(
            "direct I/O: the filesystem holding {} refuses O_DIRECT ({e}); turn off use_direct_reads and \
             use_direct_io_for_flush_and_compaction",
            path.display()
        ));
    }
    Error::io(op, path, e)
}

/// An [`ALIGN`]-aligned heap buffer of a fixed capacity: zeroed (a
/// writer's, whose whole capacity is read and written as a slice), or not
/// (a read's, of which only the bytes the kernel wrote are ever read,
/// through [`AlignedBuf::filled`]).
struct AlignedBuf {
    ptr: NonNull<u8>,
    cap: usize,
    zeroed: bool,
}

// SAFETY: the buffer is owned memory with no shared state.
#[allow(unsafe_code)]
unsafe impl Send for AlignedBuf {}

impl AlignedBuf {
    fn layout(cap: usize) -> std::alloc::Layout {
        // `cap` is a positive multiple of ALIGN (callers round up), so the
        // layout is valid.
        std::alloc::Layout::from_size_align(cap, ALIGN).expect("an aligned buffer's layout")
    }

    /// `cap` rounded up to [`ALIGN`] (at least one block), zeroed or not.
    #[allow(unsafe_code)]
    fn new(cap: usize, zeroed: bool) -> Self {
        let cap = round_up(cap.max(1));
        let layout = Self::layout(cap);
        // SAFETY: the layout has a non-zero size.
        let raw = unsafe {
            if zeroed {
                std::alloc::alloc_zeroed(layout)
            } else {
                std::alloc::alloc(layout)
            }
        };
        let ptr = NonNull::new(raw).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, cap, zeroed }
    }

    /// The whole buffer; only a zeroed one.
    #[allow(unsafe_code)]
    fn as_slice(&self) -> &[u8] {
        assert!(self.zeroed, "only a zeroed buffer is read whole");
        // SAFETY: `ptr` owns `cap` bytes, initialised (zeroed) at allocation.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.cap) }
    }

    /// The whole buffer, mutably; only a zeroed one.
    #[allow(unsafe_code)]
    fn as_mut_slice(&mut self) -> &mut [u8] {
        assert!(self.zeroed, "only a zeroed buffer is written as a slice");
        // SAFETY: as `as_slice`, borrowed mutably through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.cap) }
    }

    /// `range` of the first `filled` bytes, which the kernel wrote.
    ///
    /// # Safety
    /// `buf[..filled]` must have been written (by `pread_aligned`).
    #[allow(unsafe_code)]
    unsafe fn filled(&self, filled: usize, range: std::ops::Range<usize>) -> &[u8] {
        assert!(range.start <= range.end && range.end <= filled && filled <= self.cap);
        // SAFETY: in bounds (asserted); initialised by the caller's promise.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(range.start), range.len()) }
    }
}

impl Drop for AlignedBuf {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), Self::layout(self.cap)) }
    }
}

/// `pread` into `buf[..len]` at `offset` (both aligned) until `len` bytes,
/// the end of the file, or a transfer that is not whole blocks (the end of
/// the file too); returns the bytes read.
#[allow(unsafe_code)]
fn pread_aligned(file: &File, path: &Path, buf: &mut AlignedBuf, len: usize, offset: u64) -> Result<usize> {
    let mut done = 0usize;
    while done < len {
        let at = libc::off_t::try_from(offset + done as u64).map_err(|_| {
            Error::io("pread", path, std::io::Error::new(std::io::ErrorKind::InvalidInput, "offset too large"))
        })?;
        assert!(len <= buf.cap);
        // SAFETY: `[done, len)` is within the buffer, which this call owns
        // exclusively (`&mut`); the kernel writes at most `len - done` bytes.
        let n = unsafe { libc::pread(file.as_raw_fd(), buf.ptr.as_ptr().add(done).cast(), len - done, at) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(Error::io("pread", path, e));
        }
        let n = n as usize;
        done += n;
        if n == 0 || !n.is_multiple_of(ALIGN) {
            break;
        }
    }
    Ok(done)
}

/// A file read with `O_DIRECT` (the module's rule 1).
pub(super) struct DirectRandom {
    path: PathBuf,
    file: File,
}

impl DirectRandom {
    pub(super) fn open(path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| open_error("open", path, e))?;
        Ok(DirectRandom { path: path.to_path_buf(), file })
    }
}

impl RandomAccessFile for DirectRandom {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.read_at_append(offset, len, &mut out)?;
        Ok(out)
    }

    /// Copies the bytes asked for straight from the aligned buffer onto
    /// `out` (one copy, as for `read_at`).
    #[allow(unsafe_code)]
    fn read_at_append(&self, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<usize> {
        if len == 0 {
            return Ok(0);
        }
        let start = offset / ALIGN as u64 * ALIGN as u64;
        let skip = (offset - start) as usize;
        let span = round_up(skip + len);
        let timer = crate::perf::PerfTimer::start();
        let mut buf = AlignedBuf::new(span, false);
        let done = pread_aligned(&self.file, &self.path, &mut buf, span, start)?;
        timer.stop_io(|c| &mut c.read_nanos);
        crate::perf::count_io(|c| c.bytes_read += done as u64);
        if done <= skip {
            return Ok(0);
        }
        let n = (done - skip).min(len);
        // SAFETY: `pread_aligned` wrote the first `done` bytes.
        out.extend_from_slice(unsafe { buf.filled(done, skip..skip + n) });
        Ok(n)
    }

    fn size(&self) -> Result<u64> {
        Ok(self.file.metadata().map_err(|e| Error::io("stat", &self.path, e))?.len())
    }
}

/// A file written with `O_DIRECT` (the module's rule 2).
pub(super) struct DirectWritable {
    path: PathBuf,
    file: File,
    buf: AlignedBuf,
    /// Bytes in `buf`.
    len: usize,
    /// The file offset of `buf[0]` (aligned).
    at: u64,
    /// Bytes appended.
    size: u64,
    /// Bytes appended since the last `flush`.
    unflushed: bool,
}

impl DirectWritable {
    pub(super) fn create(path: &Path) -> Result<Self> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .map_err(|e| open_error("create", path, e))?;
        Ok(DirectWritable {
            path: path.to_path_buf(),
            file,
            buf: AlignedBuf::new(WRITE_BUFFER, true),
            len: 0,
            at: 0,
            size: 0,
            unflushed: false,
        })
    }

    /// Writes `buf[..len]` (a multiple of ALIGN) at `self.at`.
    #[allow(unsafe_code)]
    fn write_blocks(&mut self, len: usize) -> Result<()> {
        let timer = crate::perf::PerfTimer::start();
        let mut done = 0usize;
        while done < len {
            let at = libc::off_t::try_from(self.at + done as u64).map_err(|_| {
                Error::io(
                    "pwrite",
                    &self.path,
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, "offset too large"),
                )
            })?;
            let data = &self.buf.as_slice()[done..len];
            // SAFETY: `data` is `len - done` bytes the buffer owns.
            let n = unsafe { libc::pwrite(self.file.as_raw_fd(), data.as_ptr().cast(), data.len(), at) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(Error::io("pwrite", &self.path, e));
            }
            let n = n as usize;
            if n == 0 || !n.is_multiple_of(ALIGN) {
                let e = std::io::Error::new(
                    std::io::ErrorKind::WriteZero,
                    format!("a direct write of {} bytes wrote {n}", data.len()),
                );
                return Err(Error::io("pwrite", &self.path, e));
            }
            done += n;
        }
        timer.stop_io(|c| &mut c.write_nanos);
        crate::perf::count_io(|c| c.bytes_written += len as u64);
        Ok(())
    }
}

impl WritableFile for DirectWritable {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            let n = data.len().min(self.buf.cap - self.len);
            self.buf.as_mut_slice()[self.len..self.len + n].copy_from_slice(&data[..n]);
            self.len += n;
            self.size += n as u64;
            self.unflushed = true;
            data = &data[n..];
            if self.len == self.buf.cap {
                self.write_blocks(self.len)?;
                self.at += self.len as u64;
                self.len = 0;
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.unflushed {
            return Ok(());
        }
        if self.len > 0 {
            let padded = round_up(self.len);
            self.buf.as_mut_slice()[self.len..padded].fill(0);
            self.write_blocks(padded)?;
            // Keep the partial last block: the next flush rewrites it.
            let whole = self.len / ALIGN * ALIGN;
            self.buf.as_mut_slice().copy_within(whole..self.len, 0);
            self.at += whole as u64;
            self.len -= whole;
        }
        self.file.set_len(self.size).map_err(|e| Error::io("truncate", &self.path, e))?;
        self.unflushed = false;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush()?;
        let timer = crate::perf::PerfTimer::start();
        self.file.sync_data().map_err(|e| Error::io("fdatasync", &self.path, e))?;
        timer.stop_io(|c| &mut c.fsync_nanos);
        Ok(())
    }

    fn size(&self) -> u64 {
        self.size
    }
}

impl Drop for DirectWritable {
    fn drop(&mut self) {
        // As a buffered file's drop writes its buffer out: best effort.
        let _ = self.flush();
    }
}
