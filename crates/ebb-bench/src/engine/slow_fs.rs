//! `--manifest_sync_delay_ms`: a filesystem whose MANIFEST syncs take that
//! much longer, as on a disk whose fsyncs are slow. Issue 17's target for the
//! version layer is that no foreground write waits on a MANIFEST fsync: a run
//! with the delay shows it when its write latencies (`--histogram`) stay
//! those of a run without, though the syncs took seconds in all. Everything
//! but a MANIFEST file's `sync` goes to the wrapped filesystem unchanged.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ebb::fs::{FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};

/// What the slowed syncs cost: how many, and the time they slept.
#[derive(Debug, Default)]
pub struct SlowedSyncs {
    count: AtomicU64,
    micros: AtomicU64,
}

impl SlowedSyncs {
    /// MANIFEST syncs slowed so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// Microseconds they slept in all.
    pub fn micros(&self) -> u64 {
        self.micros.load(Ordering::Relaxed)
    }
}

/// `inner`, with every sync of a file named `MANIFEST-*` delayed by `delay`
/// before it is made.
pub struct SlowManifestFs {
    inner: Arc<dyn FileSystem>,
    delay: Duration,
    slowed: Arc<SlowedSyncs>,
}

impl SlowManifestFs {
    /// Wraps `inner`; the counters are shared with the caller.
    pub fn new(inner: Arc<dyn FileSystem>, delay: Duration, slowed: Arc<SlowedSyncs>) -> SlowManifestFs {
        SlowManifestFs { inner, delay, slowed }
    }

    fn wrap(&self, path: &Path, file: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        let manifest = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("MANIFEST-"));
        if !manifest {
            return file;
        }
        Box::new(SlowSyncFile { inner: file, delay: self.delay, slowed: Arc::clone(&self.slowed) })
    }
}

struct SlowSyncFile {
    inner: Box<dyn WritableFile>,
    delay: Duration,
    slowed: Arc<SlowedSyncs>,
}

impl WritableFile for SlowSyncFile {
    fn append(&mut self, data: &[u8]) -> ebb::Result<()> {
        self.inner.append(data)
    }
    fn flush(&mut self) -> ebb::Result<()> {
        self.inner.flush()
    }
    fn sync(&mut self) -> ebb::Result<()> {
        let start = Instant::now();
        std::thread::sleep(self.delay);
        self.slowed.count.fetch_add(1, Ordering::Relaxed);
        self.slowed.micros.fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
        self.inner.sync()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn range_sync_hint(&mut self) -> ebb::Result<()> {
        self.inner.range_sync_hint()
    }
}

impl FileSystem for SlowManifestFs {
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
        self.inner.open_random(path)
    }
    fn open_random_mmap(&self, path: &Path) -> ebb::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open_random_mmap(path)
    }
    fn open_sequential(&self, path: &Path) -> ebb::Result<Box<dyn SequentialFile>> {
        self.inner.open_sequential(path)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn list_dir(&self, path: &Path) -> ebb::Result<Vec<String>> {
        self.inner.list_dir(path)
    }
    fn file_size(&self, path: &Path) -> ebb::Result<u64> {
        self.inner.file_size(path)
    }
    fn remove_file(&self, path: &Path) -> ebb::Result<()> {
        self.inner.remove_file(path)
    }
    fn remove_dir(&self, path: &Path) -> ebb::Result<()> {
        self.inner.remove_dir(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> ebb::Result<()> {
        self.inner.rename(from, to)
    }
    fn link_file(&self, from: &Path, to: &Path) -> ebb::Result<()> {
        self.inner.link_file(from, to)
    }
    fn sync_dir(&self, path: &Path) -> ebb::Result<()> {
        self.inner.sync_dir(path)
    }
    fn lock_file(&self, path: &Path) -> ebb::Result<Box<dyn FileLock>> {
        self.inner.lock_file(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ebb::fs::MemFs;

    #[test]
    fn only_manifest_syncs_are_slowed_and_counted() {
        let slowed = Arc::new(SlowedSyncs::default());
        let fs = SlowManifestFs::new(Arc::new(MemFs::new()), Duration::from_millis(5), Arc::clone(&slowed));
        fs.create_dir_all(Path::new("/db")).unwrap();
        for name in ["000004.log", "000005.sst", "CURRENT", "OPTIONS-000003"] {
            let mut f = fs.new_writable(&Path::new("/db").join(name)).unwrap();
            f.append(b"x").unwrap();
            f.sync().unwrap();
        }
        assert_eq!(slowed.count(), 0, "a file other than a MANIFEST was slowed");
        let mut m = fs.new_writable(Path::new("/db/MANIFEST-000001")).unwrap();
        m.append(b"edit").unwrap();
        let start = Instant::now();
        m.sync().unwrap();
        m.sync().unwrap();
        assert!(start.elapsed() >= Duration::from_millis(10));
        assert_eq!(slowed.count(), 2);
        assert!(slowed.micros() >= 10_000);
        drop(m);
        let mut again = fs.reopen_writable(Path::new("/db/MANIFEST-000001")).unwrap();
        again.sync().unwrap();
        assert_eq!(slowed.count(), 3, "a reopened MANIFEST is slowed too");
        assert_eq!(fs.read_file(Path::new("/db/MANIFEST-000001")).unwrap(), b"edit", "the bytes go through");
    }
}
