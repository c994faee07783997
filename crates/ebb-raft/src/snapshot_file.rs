//! [`SnapshotFile`]: openraft's `SnapshotData` here, a snapshot's bytes in
//! a file of the database's filesystem (Ebb's `FileSystem`, so that tests
//! can cut the power under it as under the database).
//!
//! A file is open either for reading (a built snapshot, the current one,
//! one received and finished) or for writing (one being received:
//! openraft writes each chunk at the offset the leader sent). Writing is
//! in order: a seek while writing may go to the end (no move) or to the
//! start (the leader restarted the transfer: the file is emptied); any
//! other is refused. Reading, a seek may go anywhere. Shutting the writer
//! down (openraft does, after the last chunk) syncs the file; reading it
//! afterwards reads what was written.
//!
//! The filesystem calls are synchronous, as every Ebb call of this crate
//! is: a `poll` does its I/O at once (at most one chunk or
//! [`crate::snapshot::IO_SIZE`] bytes) and is never pending.
//!
//! A file that has not become the current snapshot (received, or built
//! while a newer one was installed) is removed when its `SnapshotFile` is
//! dropped; one that is, or was, current is removed by the snapshot store
//! when it is replaced.

use std::io::{self, SeekFrom};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ebb::fs::{FileSystem, RandomAccessFile, WritableFile};
use tokio::io::{AsyncRead, AsyncSeek, AsyncWrite, ReadBuf};

use crate::snapshot::IO_SIZE;

/// A snapshot's data in a file: openraft's `SnapshotData` for
/// [`crate::TypeConfig`]. It implements tokio's `AsyncRead`, `AsyncWrite`
/// and `AsyncSeek` as openraft's chunked transport needs.
///
/// One from `get_current_snapshot` or `build_snapshot` is read-only, and
/// seeks anywhere. One from `begin_receiving_snapshot` is written in
/// order: a seek may go to its end (no move) or to its start (the file is
/// emptied, for a transfer sent again); shutting it down syncs it. Its I/O
/// is synchronous: a poll is never pending. A file that did not become the
/// current snapshot is removed when this is dropped.
pub struct SnapshotFile {
    fs: Arc<dyn FileSystem>,
    path: PathBuf,
    pos: u64,
    /// While receiving: the file, written in order.
    writer: Option<Box<dyn WritableFile>>,
    /// For reading: opened at the first read (or seek from the end).
    reader: Option<Arc<dyn RandomAccessFile>>,
    /// The snapshot store and file number of a file that store is
    /// receiving, so that its install can take the file as it is.
    received_by: Option<(u64, u64)>,
    /// Whether dropping this removes the file.
    remove_on_drop: bool,
    /// The result of the last `start_seek`.
    seek: Option<io::Result<u64>>,
}

impl std::fmt::Debug for SnapshotFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotFile")
            .field("path", &self.path)
            .field("pos", &self.pos)
            .field("writing", &self.writer.is_some())
            .finish()
    }
}

fn io_error(e: ebb::Error) -> io::Error {
    io::Error::other(e)
}

impl SnapshotFile {
    /// A new, empty file at `path` to receive a snapshot into, for the
    /// store `store` under file number `number`; removed on drop until
    /// [`Self::keep`].
    pub(crate) fn create(fs: Arc<dyn FileSystem>, path: PathBuf, store: u64, number: u64) -> ebb::Result<Self> {
        let writer = fs.new_writable(&path)?;
        Ok(SnapshotFile {
            fs,
            path,
            pos: 0,
            writer: Some(writer),
            reader: None,
            received_by: Some((store, number)),
            remove_on_drop: true,
            seek: None,
        })
    }

    /// The finished file at `path`, for reading; removed on drop if
    /// `remove_on_drop`.
    pub(crate) fn open(fs: Arc<dyn FileSystem>, path: PathBuf, remove_on_drop: bool) -> ebb::Result<Self> {
        let reader = fs.open_random(&path)?;
        Ok(SnapshotFile {
            fs,
            path,
            pos: 0,
            writer: None,
            reader: Some(reader),
            received_by: None,
            remove_on_drop,
            seek: None,
        })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The store and file number, for a file a store is receiving.
    pub(crate) fn received_by(&self) -> Option<(u64, u64)> {
        self.received_by
    }

    /// The file is the current snapshot now: dropping this leaves it.
    pub(crate) fn keep(&mut self) {
        self.remove_on_drop = false;
    }

    /// Ends the writing, if any: flushes and syncs the file.
    fn finish_writing(&mut self) -> ebb::Result<()> {
        if let Some(mut writer) = self.writer.take() {
            writer.flush()?;
            writer.sync()?;
        }
        Ok(())
    }

    /// The file for reading (writing ended first), and its length.
    pub(crate) fn reader(&mut self) -> ebb::Result<(Arc<dyn RandomAccessFile>, u64)> {
        self.finish_writing()?;
        let reader = match &self.reader {
            Some(reader) => Arc::clone(reader),
            None => {
                let reader = self.fs.open_random(&self.path)?;
                self.reader = Some(Arc::clone(&reader));
                reader
            }
        };
        let len = reader.size()?;
        Ok((reader, len))
    }

    fn seek_to(&mut self, position: SeekFrom) -> io::Result<u64> {
        let end = match &self.writer {
            Some(writer) => writer.size(),
            None => self.reader().map_err(io_error)?.1,
        };
        let target = match position {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => end.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        let target = target.ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "seek before the start"))?;
        if let Some(writer) = &mut self.writer {
            if target == 0 && end > 0 {
                // The leader sends the snapshot again from its start.
                *writer = self.fs.new_writable(&self.path).map_err(io_error)?;
            } else if target != end {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("a snapshot being received is written in order: seek to {target} of {end} bytes"),
                ));
            }
        }
        self.pos = target;
        Ok(target)
    }
}

impl Drop for SnapshotFile {
    fn drop(&mut self) {
        if self.remove_on_drop {
            self.writer = None;
            // A file left behind (the removal failed) is removed when the
            // store is next opened.
            let _ = self.fs.remove_file(&self.path);
        }
    }
}

impl AsyncRead for SnapshotFile {
    fn poll_read(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = (|| {
            let (reader, len) = this.reader().map_err(io_error)?;
            if this.pos >= len {
                return Ok(());
            }
            let want = buf.remaining().min(IO_SIZE);
            let want = usize::try_from(len - this.pos).map_or(want, |left| want.min(left));
            let bytes = reader.read_at(this.pos, want).map_err(io_error)?;
            if bytes.is_empty() {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "snapshot file shorter than its size"));
            }
            buf.put_slice(&bytes);
            this.pos += bytes.len() as u64;
            Ok(())
        })();
        Poll::Ready(result)
    }
}

impl AsyncWrite for SnapshotFile {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let Some(writer) = &mut this.writer else {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::PermissionDenied, "snapshot file is read-only")));
        };
        let result = writer.append(data).map_err(io_error).map(|()| {
            this.pos += data.len() as u64;
            data.len()
        });
        Poll::Ready(result)
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        Poll::Ready(this.writer.as_mut().map_or(Ok(()), |w| w.flush().map_err(io_error)))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.get_mut().finish_writing().map_err(io_error))
    }
}

impl AsyncSeek for SnapshotFile {
    fn start_seek(self: Pin<&mut Self>, position: SeekFrom) -> io::Result<()> {
        let this = self.get_mut();
        this.seek = Some(this.seek_to(position));
        Ok(())
    }

    fn poll_complete(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<u64>> {
        let this = self.get_mut();
        Poll::Ready(this.seek.take().unwrap_or(Ok(this.pos)))
    }
}
