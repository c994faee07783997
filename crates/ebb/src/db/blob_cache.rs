//! Open blob file readers, keyed by file number, shared by reads and
//! compactions (RocksDB's `BlobFileCache`, on the pattern of
//! `table_cache.rs`): a blob file is opened, its header and footer checked,
//! once, not at every read. With a bound (`max_open_files` other than -1,
//! sanitized as for tables: `Options::table_cache_capacity`), at most that
//! many readers are kept, the least recently used closed first; a reader
//! in use stays open until its users drop it (RocksDB's blob file cache
//! shares the table cache's bound too).
//!
//! Thread safety: internally locked; `reader` may open a file outside the
//! lock (two threads racing to open the same file both succeed, one copy is
//! kept).

use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::blob::{BlobFetcher, BlobFileReader, BlobIndex};
use crate::error::{Error, Result};
use crate::fs::{Access, FileSystem};
use crate::stats::{bump, Stats};
use crate::util::open_files::OpenFiles;
use crate::version::filename;

/// Cache of open blob files.
pub(crate) struct BlobFileCache {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    stats: Arc<Stats>,
    /// Most readers kept; `None` keeps every file open until it is deleted.
    capacity: Option<usize>,
    /// Read with direct I/O (`use_direct_reads`).
    direct: bool,
    open: Mutex<OpenFiles<BlobFileReader>>,
}

impl BlobFileCache {
    pub(crate) fn new(
        dir: PathBuf,
        fs: Arc<dyn FileSystem>,
        stats: Arc<Stats>,
        capacity: Option<usize>,
        direct: bool,
    ) -> Self {
        BlobFileCache { dir, fs, stats, capacity, direct, open: Mutex::new(OpenFiles::default()) }
    }

    /// The reader of blob file `number`, opening it on first use. A file
    /// that is not there is corruption naming it: a table refers to it.
    pub(crate) fn reader(&self, number: u64) -> Result<Arc<BlobFileReader>> {
        if let Some(r) = self.open.lock().touch(number) {
            return Ok(r);
        }
        let path = filename::blob_file(&self.dir, number);
        let name = path.display().to_string();
        let missing = |e: Error| match e {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Error::corruption(&name, 0, "a table refers to this blob file, which is missing")
            }
            other => other,
        };
        let size = self.fs.file_size(&path).map_err(missing)?;
        let file = if self.direct { self.fs.open_random_direct(&path) } else { self.fs.open_random(&path) };
        let file = file.map_err(missing)?;
        file.advise(Access::Random);
        let reader = Arc::new(BlobFileReader::open(file, size, name, number)?);
        // Another thread may have opened it meanwhile: one copy is kept.
        Ok(self.open.lock().keep(number, reader, self.capacity))
    }

    /// Forgets the reader of a deleted file.
    pub(crate) fn evict(&self, number: u64) {
        self.open.lock().remove(number);
    }
}

impl BlobFetcher for BlobFileCache {
    fn fetch(&self, key: &[u8], index: &BlobIndex, verify: bool) -> Result<Vec<u8>> {
        let value = self.reader(index.file_number)?.get(key, index, verify)?;
        bump(&self.stats.blob_file_bytes_read, index.record_len(key));
        Ok(value)
    }
}
