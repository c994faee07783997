//! Open SST readers, keyed by file number, shared by reads and compactions.
//!
//! Two modes, as RocksDB's `max_open_files`:
//! - unbounded (`-1`, the default): a table opened once stays open until its
//!   file is deleted; its reader is also kept in the file's metadata, so a
//!   read through a version borrows it without a lock or a shared
//!   reference count;
//! - bounded: at most `Options::table_cache_capacity` readers stay open,
//!   the least recently used closed first. Nothing is kept in the metadata;
//!   a read takes the cache's lock and holds its own reference to the
//!   reader, so a table evicted while read is closed when its last reader
//!   is done (the bound may be passed by the tables being read, as RocksDB's
//!   LRU table cache without a strict capacity limit).
//!
//! Thread safety: internally locked; a table is opened outside the lock
//! (two threads racing to open the same file both succeed, one copy is kept).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::cache::BlockCache;
use crate::comparator::UserComparator;
use crate::error::Result;
use crate::fs::Access;
use crate::fs::FileSystem;
use crate::sst::table_reader::TableCachePolicy;
use crate::sst::Table;
use crate::util::open_files::OpenFiles;
use crate::version::{filename, FileMetaData};

/// A table's reader as [`TableCache::get`] hands it out: borrowed from the
/// file's metadata (unbounded mode) or held (bounded mode).
pub enum TableRef<'a> {
    /// Kept in the metadata the caller holds.
    Kept(&'a Arc<Table>),
    /// A reference of the caller's own.
    Held(Arc<Table>),
}

impl std::ops::Deref for TableRef<'_> {
    type Target = Arc<Table>;
    fn deref(&self) -> &Arc<Table> {
        match self {
            TableRef::Kept(t) => t,
            TableRef::Held(t) => t,
        }
    }
}

/// The open readers (bounded mode), and the cache ids of the files opened.
#[derive(Default)]
struct OpenTables {
    files: OpenFiles<Table>,
    /// Bounded mode: the block-cache id of every file opened once, kept
    /// while the file lives, so a table closed and opened again finds the
    /// blocks it cached (a new id would orphan them until evicted).
    cache_ids: HashMap<u64, u64>,
}

impl OpenTables {
    fn remove(&mut self, number: u64) {
        self.files.remove(number);
        self.cache_ids.remove(&number);
    }
}

/// How a [`TableCache`] opens and keeps tables: the database options of
/// the same names (built from them in `options`). The default is RocksDB's
/// and the options' defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCacheOptions {
    /// RocksDB `cache_index_and_filter_blocks`.
    pub cache_index_and_filter_blocks: bool,
    /// RocksDB `cache_index_and_filter_blocks_with_high_priority`.
    pub cache_index_and_filter_blocks_with_high_priority: bool,
    /// RocksDB `pin_l0_filter_and_index_blocks_in_cache`.
    pub pin_l0_filter_and_index_blocks_in_cache: bool,
    /// Read tables through `mmap`.
    pub allow_mmap_reads: bool,
    /// Hint every table random access when opened.
    pub advise_random_on_open: bool,
    /// Auto readahead's first size.
    pub initial_auto_readahead_size: usize,
    /// Auto readahead's largest size.
    pub max_auto_readahead_size: usize,
    /// Most tables kept open (`max_open_files` less RocksDB's reserve);
    /// `None`: unbounded.
    pub capacity: Option<usize>,
}

impl Default for TableCacheOptions {
    fn default() -> Self {
        TableCacheOptions {
            cache_index_and_filter_blocks: false,
            cache_index_and_filter_blocks_with_high_priority: true,
            pin_l0_filter_and_index_blocks_in_cache: false,
            allow_mmap_reads: false,
            advise_random_on_open: true,
            initial_auto_readahead_size: 8 << 10,
            max_auto_readahead_size: 256 << 10,
            capacity: None,
        }
    }
}

/// Cache of open tables.
pub struct TableCache {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    block_cache: Option<Arc<dyn BlockCache>>,
    cache_index_and_filter_blocks: bool,
    high_priority: bool,
    pin_l0: bool,
    allow_mmap_reads: bool,
    advise_random_on_open: bool,
    initial_auto_readahead_size: usize,
    max_auto_readahead_size: usize,
    /// `None`: unbounded.
    capacity: Option<usize>,
    tables: Mutex<OpenTables>,
}

impl TableCache {
    /// A cache for the tables of `dir`, reading blocks through `block_cache`.
    pub fn new(
        dir: PathBuf,
        fs: Arc<dyn FileSystem>,
        block_cache: Option<Arc<dyn BlockCache>>,
        options: TableCacheOptions,
    ) -> Self {
        TableCache {
            dir,
            fs,
            block_cache,
            cache_index_and_filter_blocks: options.cache_index_and_filter_blocks,
            high_priority: options.cache_index_and_filter_blocks_with_high_priority,
            pin_l0: options.pin_l0_filter_and_index_blocks_in_cache,
            allow_mmap_reads: options.allow_mmap_reads,
            advise_random_on_open: options.advise_random_on_open,
            initial_auto_readahead_size: options.initial_auto_readahead_size,
            max_auto_readahead_size: options.max_auto_readahead_size,
            capacity: options.capacity,
            tables: Mutex::new(OpenTables::default()),
        }
    }

    /// The reader for `f`, opening it if it is not open. `level` decides
    /// pinning (`pin_l0_filter_and_index_blocks_in_cache`), once, when it
    /// is opened, as in RocksDB. Unbounded, the reader is then kept in `f`
    /// itself, so later reads through the same metadata borrow it without
    /// any lock.
    /// `cmp` is the order of the file's family, given to a table opened.
    pub fn get<'a>(&self, f: &'a FileMetaData, level: usize, cmp: &UserComparator) -> Result<TableRef<'a>> {
        if self.capacity.is_some() {
            return Ok(TableRef::Held(self.open(f, level, cmp)?));
        }
        if let Some(t) = f.table.get() {
            return Ok(TableRef::Kept(t));
        }
        let table = self.open(f, level, cmp)?;
        Ok(TableRef::Kept(f.table.keep(table)))
    }

    /// The reader for file `f` from the map (metadata not from a version, or
    /// a file opened before its metadata reached one), opening it if needed.
    fn open(&self, f: &FileMetaData, level: usize, cmp: &UserComparator) -> Result<Arc<Table>> {
        let cache_id = {
            let mut tables = self.tables.lock();
            if let Some(t) = tables.files.touch(f.number) {
                return Ok(t);
            }
            // Bounded, a file may be closed and opened again: it keeps its id.
            match (&self.block_cache, self.capacity) {
                (Some(cache), Some(_)) if cache.capacity() > 0 => {
                    Some(*tables.cache_ids.entry(f.number).or_insert_with(|| cache.new_id()))
                }
                _ => None,
            }
        };
        let path = filename::table_file(&self.dir, f.number);
        let file = if self.allow_mmap_reads { self.fs.open_random_mmap(&path)? } else { self.fs.open_random(&path)? };
        // RocksDB `TableCache::GetTableReader`: tables are opened for point
        // reads; a compaction's iterator hints its inputs sequential later.
        if self.advise_random_on_open {
            file.advise(Access::Random);
        }
        let policy = TableCachePolicy {
            block_cache: self.block_cache.clone(),
            cache_index_and_filter_blocks: self.cache_index_and_filter_blocks,
            cache_index_and_filter_blocks_with_high_priority: self.high_priority,
            pin_index_and_filter_blocks: self.pin_l0 && level == 0 && self.cache_index_and_filter_blocks,
            initial_auto_readahead_size: self.initial_auto_readahead_size,
            max_auto_readahead_size: self.max_auto_readahead_size,
            comparator: cmp.clone(),
            cache_id,
        };
        let table = Table::open_with_policy(file, f.file_size, path.display().to_string(), policy)?;
        Ok(self.tables.lock().files.keep(f.number, table, self.capacity))
    }

    /// Forgets the reader of a deleted file (and, bounded, its cache id).
    pub fn evict(&self, number: u64) {
        self.tables.lock().remove(number);
    }

    /// How many readers the cache holds open.
    pub fn open_tables(&self) -> usize {
        self.tables.lock().files.len()
    }

    /// Bytes the open readers hold outside the block cache
    /// ([`Table::memory_usage`]).
    pub fn memory_usage(&self) -> usize {
        self.tables.lock().files.readers().map(|t| t.memory_usage()).sum()
    }

    /// The block cache, if any.
    pub fn block_cache(&self) -> Option<&Arc<dyn BlockCache>> {
        self.block_cache.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::MemFs;
    use crate::key::{make_internal_key, ValueKind};
    use crate::sst::{TableBuilder, TableBuilderOptions};

    /// A one-entry table `000007.sst` in a memory file system, and its metadata.
    fn setup() -> (TableCache, FileMetaData) {
        let fs = Arc::new(MemFs::new());
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).unwrap();
        let f = write_table(&fs, &dir, 7, 1);
        (TableCache::new(dir, fs, None, TableCacheOptions::default()), f)
    }

    #[test]
    fn an_opened_table_stays_with_its_metadata() {
        let (cache, f) = setup();
        assert!(f.table.get().is_none());
        let first = Arc::clone(&cache.get(&f, 1, &UserComparator::BYTEWISE).unwrap());
        let kept = f.table.get().expect("the reader was not kept in the metadata");
        assert!(Arc::ptr_eq(&first, kept));
        assert!(Arc::ptr_eq(&first, &cache.get(&f, 1, &UserComparator::BYTEWISE).unwrap()), "a second read opened the file again");
        // A copy of the metadata (a trivial move's edit) shares the reader, and
        // equality ignores it.
        let moved = f.clone();
        assert!(Arc::ptr_eq(&first, moved.table.get().unwrap()));
        let fresh = FileMetaData { table: Default::default(), ..f.clone() };
        assert_eq!(fresh, f);
        // Metadata that never saw the reader (decoded from the MANIFEST) gets
        // the one already open, not a second.
        assert!(Arc::ptr_eq(&first, &cache.get(&fresh, 1, &UserComparator::BYTEWISE).unwrap()));
        // Evicting the file forgets the shared copy; readers holding the
        // metadata keep theirs.
        cache.evict(7);
        assert!(Arc::ptr_eq(&first, &cache.get(&f, 1, &UserComparator::BYTEWISE).unwrap()));
    }

    /// A table `NNNNNN.sst` of `n` keys (one value each) written to `fs`.
    fn write_table(fs: &Arc<MemFs>, dir: &std::path::Path, number: u64, n: usize) -> FileMetaData {
        let file = fs.new_writable(&filename::table_file(dir, number)).unwrap();
        let key = |i: usize| make_internal_key(format!("k{i:05}").as_bytes(), 1, ValueKind::Value);
        let options = TableBuilderOptions { bloom_bits_per_key: 10, ..TableBuilderOptions::default() };
        let mut b = TableBuilder::new(file, options, format!("{number:06}.sst"));
        for i in 0..n {
            b.add(&key(i), &[b'v'; 100]).unwrap();
        }
        let props = b.finish().unwrap();
        FileMetaData {
            number,
            file_size: props.file_size,
            smallest: key(0),
            largest: key(n - 1),
            smallest_seq: 1,
            largest_seq: 1,
            num_entries: n as u64,
            num_deletions: 0,
            oldest_blob_file: 0,
            num_range_deletions: 0,
            table: Default::default(),
        }
    }

    #[test]
    fn a_table_closed_by_the_bound_and_opened_again_finds_the_blocks_it_cached() {
        use crate::cache::{new_cache, CacheOptions, CacheType};
        use crate::sst::ReadSettings;
        for (cache_index_and_filter_blocks, pin_l0) in [(false, false), (true, false), (true, true)] {
            let what = format!("cache_index_and_filter_blocks={cache_index_and_filter_blocks}, pinned={pin_l0}");
            let fs = Arc::new(MemFs::new());
            let dir = PathBuf::from("/db");
            fs.create_dir_all(&dir).unwrap();
            let files: Vec<FileMetaData> = (1..=3).map(|n| write_table(&fs, &dir, n, 2000)).collect();
            let block_cache = new_cache(CacheType::Lru, &CacheOptions::new(64 << 20)).unwrap();
            let options = TableCacheOptions {
                capacity: Some(1),
                cache_index_and_filter_blocks,
                pin_l0_filter_and_index_blocks_in_cache: pin_l0,
                ..TableCacheOptions::default()
            };
            let cache = TableCache::new(dir, fs, Some(Arc::clone(&block_cache)), options);
            let cmp = UserComparator::BYTEWISE;
            let rs = ReadSettings::default();
            let read_all = |f: &FileMetaData| {
                let table = cache.get(f, 0, &cmp).unwrap();
                for i in 0..2000 {
                    let lookup = make_internal_key(format!("k{i:05}").as_bytes(), 2, ValueKind::Value);
                    assert!(table.get(&rs, &lookup).unwrap().is_some(), "{what}: k{i:05} not found in {}", f.number);
                    // Keys the filter answers for.
                    let absent = make_internal_key(format!("k{i:05}x").as_bytes(), 2, ValueKind::Value);
                    assert!(table.get(&rs, &absent).unwrap().is_none(), "{what}: an absent key found");
                }
            };
            // Each file's blocks go into the cache once; the bound of one open
            // table closes each file as the next opens.
            for f in &files {
                read_all(f);
            }
            assert_eq!(cache.open_tables(), 1);
            let before = block_cache.stats().snapshot().total();
            assert!(before.misses > 0 && before.inserts > 0, "{what}: the first reads were not cached");
            // Opened again, the closed files find every block they cached,
            // the index and filter blocks too: nothing is read or inserted.
            for f in &files {
                read_all(f);
            }
            let after = block_cache.stats().snapshot().total();
            assert_eq!(after.misses, before.misses, "{what}: a reopened table missed blocks it had cached");
            assert_eq!(after.inserts, before.inserts, "{what}: a reopened table inserted blocks again");
            // A deleted file forgets its id.
            cache.evict(1);
            assert!(!cache.tables.lock().cache_ids.contains_key(&1));
        }
    }

    #[test]
    fn a_missing_file_is_an_error_and_nothing_is_kept() {
        let (cache, f) = setup();
        let gone = FileMetaData { number: 8, table: Default::default(), ..f };
        assert!(cache.get(&gone, 0, &UserComparator::BYTEWISE).is_err());
        assert!(gone.table.get().is_none(), "a failed open left a reader behind");
    }
}
