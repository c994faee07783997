//! Open SST readers, keyed by file number, shared by reads and compactions:
//! the table cache owns every open [`Table`] (a version's file metadata
//! holds none).
//!
//! Two modes, as RocksDB's `max_open_files`:
//! - unbounded (`-1`, the default): a table opened once stays open until its
//!   file is deleted. The open tables sit in shards that are replaced whole
//!   when a table is opened or evicted (copy on write) and read without a
//!   lock: a point read finds its tables without taking a lock or bumping
//!   a reference count that readers on other cores share (RocksDB keeps
//!   the reader in the file's metadata for the same reason);
//! - bounded: at most `Options::table_cache_capacity` readers stay open,
//!   the least recently used closed first. A read takes the cache's lock
//!   and holds its own reference to the reader, so a table evicted while
//!   read is closed when its last reader is done (the bound may be passed
//!   by the tables being read, as RocksDB's LRU table cache without a
//!   strict capacity limit). A file closed and opened again keeps its
//!   block-cache id, so it finds the blocks it cached.
//!
//! Thread safety: internally locked; a table is opened outside the lock
//! (two threads racing to open the same file both succeed, one copy is
//! kept). Changes to the unbounded shards are made under the lock, one at a
//! time; readers see a shard as it was before or after a change.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use arc_swap::{ArcSwap, Guard};
use parking_lot::Mutex;

use crate::cache::BlockCache;
use crate::comparator::UserComparator;
use crate::error::Result;
use crate::fs::Access;
use crate::fs::FileSystem;
use crate::sst::{Table, TableCachePolicy};
use crate::util::open_files::OpenFiles;
use crate::version::{filename, FileMetaData};

/// The shards of the unbounded mode: file number modulo this.
const SHARDS: usize = 16;

/// One shard of the unbounded mode's open tables, sorted by file number.
type Shard = Vec<(u64, Arc<Table>)>;

/// A table's reader as [`TableCache::get`] hands it out: read in place from
/// the table cache's shard (unbounded mode), or held (bounded mode).
pub struct TableRef(Reference);

enum Reference {
    /// Entry `.1` of the shard as the read found it (the guard keeps that
    /// shard, and so the table, alive while the reference lives).
    Shared(Guard<Arc<Shard>>, usize),
    /// A reference of the caller's own.
    Held(Arc<Table>),
}

impl std::ops::Deref for TableRef {
    type Target = Arc<Table>;
    fn deref(&self) -> &Arc<Table> {
        match &self.0 {
            Reference::Shared(shard, at) => &shard[*at].1,
            Reference::Held(t) => t,
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
    /// Read tables with direct I/O (`use_direct_reads`).
    pub use_direct_reads: bool,
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
            use_direct_reads: false,
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
    use_direct_reads: bool,
    advise_random_on_open: bool,
    initial_auto_readahead_size: usize,
    max_auto_readahead_size: usize,
    /// `None`: unbounded.
    capacity: Option<usize>,
    /// Bounded mode: the open tables. Unbounded: its lock orders the
    /// changes to `shards`.
    tables: Mutex<OpenTables>,
    /// Unbounded mode: every open table, by file number modulo [`SHARDS`].
    shards: Vec<ArcSwap<Shard>>,
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
            use_direct_reads: options.use_direct_reads,
            advise_random_on_open: options.advise_random_on_open,
            initial_auto_readahead_size: options.initial_auto_readahead_size,
            max_auto_readahead_size: options.max_auto_readahead_size,
            capacity: options.capacity,
            tables: Mutex::new(OpenTables::default()),
            shards: (0..SHARDS).map(|_| ArcSwap::from_pointee(Vec::new())).collect(),
        }
    }

    /// The reader for `f`, opening it if it is not open. `level` decides
    /// pinning (`pin_l0_filter_and_index_blocks_in_cache`), once, when it
    /// is opened, as in RocksDB. `cmp` is the order of the file's family,
    /// given to a table opened.
    pub fn get(&self, f: &FileMetaData, level: usize, cmp: &UserComparator) -> Result<TableRef> {
        if self.capacity.is_some() {
            return Ok(TableRef(Reference::Held(self.open_bounded(f, level, cmp)?)));
        }
        if let Some(found) = self.shared(f.number) {
            return Ok(found);
        }
        let table = self.open(f, level, cmp, None)?;
        let _changing = self.tables.lock();
        let shard = &self.shards[shard_of(f.number)];
        let current = shard.load_full();
        let at = match current.binary_search_by_key(&f.number, |(n, _)| *n) {
            // Kept by a thread that opened it first.
            Ok(at) => at,
            Err(at) => {
                let mut next = Shard::clone(&current);
                next.insert(at, (f.number, table));
                shard.store(Arc::new(next));
                at
            }
        };
        // The lock keeps the shard as it is now.
        Ok(TableRef(Reference::Shared(shard.load(), at)))
    }

    /// The reader for `f` if it is open now, without any I/O; `None` when
    /// it is not (a batched read leaves such a file for later, when it may
    /// no longer need it).
    pub fn get_if_open(&self, f: &FileMetaData) -> Option<TableRef> {
        if self.capacity.is_some() {
            return self.tables.lock().files.touch(f.number).map(|t| TableRef(Reference::Held(t)));
        }
        self.shared(f.number)
    }

    /// True when at most `max_open_files` tables are kept open (the least
    /// recently used closed first); false when every table opened stays
    /// open until its file is deleted.
    pub fn is_bounded(&self) -> bool {
        self.capacity.is_some()
    }

    /// Unbounded mode: the open table of file `number`, if any.
    fn shared(&self, number: u64) -> Option<TableRef> {
        let shard = self.shards[shard_of(number)].load();
        let at = shard.binary_search_by_key(&number, |(n, _)| *n).ok()?;
        Some(TableRef(Reference::Shared(shard, at)))
    }

    /// Bounded mode: the reader for file `f`, marked used, opening it if
    /// needed (under the id it had, if it was open before).
    fn open_bounded(&self, f: &FileMetaData, level: usize, cmp: &UserComparator) -> Result<Arc<Table>> {
        let cache_id = {
            let mut tables = self.tables.lock();
            if let Some(t) = tables.files.touch(f.number) {
                return Ok(t);
            }
            // A file may be closed and opened again: it keeps its id.
            match &self.block_cache {
                Some(cache) if cache.capacity() > 0 => {
                    Some(*tables.cache_ids.entry(f.number).or_insert_with(|| cache.new_id()))
                }
                _ => None,
            }
        };
        let table = self.open(f, level, cmp, cache_id)?;
        Ok(self.tables.lock().files.keep(f.number, table, self.capacity))
    }

    /// Opens file `f`'s table, its blocks cached under `cache_id` (`None`: a
    /// new id).
    fn open(&self, f: &FileMetaData, level: usize, cmp: &UserComparator, cache_id: Option<u64>) -> Result<Arc<Table>> {
        let path = filename::table_file(&self.dir, f.number);
        let file = if self.use_direct_reads {
            self.fs.open_random_direct(&path)?
        } else if self.allow_mmap_reads {
            self.fs.open_random_mmap(&path)?
        } else {
            self.fs.open_random(&path)?
        };
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
        Table::open_with_policy(file, f.file_size, path.display().to_string(), policy)
    }

    /// Forgets the reader of a deleted file (and, bounded, its cache id).
    pub fn evict(&self, number: u64) {
        let mut tables = self.tables.lock();
        tables.remove(number);
        let shard = &self.shards[shard_of(number)];
        let current = shard.load_full();
        if let Ok(at) = current.binary_search_by_key(&number, |(n, _)| *n) {
            let mut next = Shard::clone(&current);
            next.remove(at);
            shard.store(Arc::new(next));
        }
    }

    /// How many readers the cache holds open.
    pub fn open_tables(&self) -> usize {
        self.tables.lock().files.len() + self.shards.iter().map(|s| s.load().len()).sum::<usize>()
    }

    /// Bytes the open readers hold outside the block cache
    /// ([`Table::memory_usage`]).
    pub fn memory_usage(&self) -> usize {
        let bounded: usize = self.tables.lock().files.readers().map(|t| t.memory_usage()).sum();
        let shared = |s: &ArcSwap<Shard>| s.load().iter().map(|(_, t)| t.memory_usage()).sum::<usize>();
        bounded + self.shards.iter().map(shared).sum::<usize>()
    }

    /// The block cache, if any.
    pub fn block_cache(&self) -> Option<&Arc<dyn BlockCache>> {
        self.block_cache.as_ref()
    }
}

/// The unbounded shard of file `number`.
fn shard_of(number: u64) -> usize {
    (number % SHARDS as u64) as usize
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
    fn an_opened_table_is_kept_by_the_cache_until_its_file_is_evicted() {
        let (cache, f) = setup();
        let cmp = UserComparator::BYTEWISE;
        assert_eq!(cache.open_tables(), 0);
        let first = Arc::clone(&cache.get(&f, 1, &cmp).unwrap());
        assert_eq!(cache.open_tables(), 1);
        assert!(Arc::ptr_eq(&first, &cache.get(&f, 1, &cmp).unwrap()), "a second read opened the file again");
        // Metadata decoded anew (from the MANIFEST, or a trivial move's
        // edit) names the same file: it gets the table already open.
        let decoded = f.clone();
        assert!(Arc::ptr_eq(&first, &cache.get(&decoded, 2, &cmp).unwrap()));
        assert!(cache.memory_usage() >= first.memory_usage());
        // Evicting the file closes the cache's copy; a reader holding its
        // own keeps reading it, and the next read opens the file again.
        cache.evict(7);
        assert_eq!((cache.open_tables(), cache.memory_usage()), (0, 0));
        assert_eq!(first.properties().num_entries, 1);
        let reopened = Arc::clone(&cache.get(&f, 1, &cmp).unwrap());
        assert!(!Arc::ptr_eq(&first, &reopened));
        assert_eq!(cache.open_tables(), 1);
    }

    #[test]
    fn readers_racing_to_open_tables_share_one_copy_of_each() {
        let fs = Arc::new(MemFs::new());
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).unwrap();
        // More files than shards, so shards hold several.
        let files: Vec<FileMetaData> = (1..=40).map(|n| write_table(&fs, &dir, n, 3)).collect();
        let cache = TableCache::new(dir, fs, None, TableCacheOptions::default());
        let cmp = UserComparator::BYTEWISE;
        let opened: Vec<Vec<Arc<Table>>> = std::thread::scope(|s| {
            let readers: Vec<_> = (0..4)
                .map(|_| s.spawn(|| files.iter().map(|f| Arc::clone(&cache.get(f, 0, &cmp).unwrap())).collect()))
                .collect();
            readers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        assert_eq!(cache.open_tables(), files.len());
        for (i, f) in files.iter().enumerate() {
            let kept = cache.get(f, 0, &cmp).unwrap();
            assert!(
                opened.iter().all(|o| Arc::ptr_eq(&o[i], &kept)),
                "file {}: readers got different copies",
                f.number
            );
            assert_eq!(kept.properties().num_entries, 3);
        }
        for f in files.iter().step_by(2) {
            cache.evict(f.number);
        }
        assert_eq!(cache.open_tables(), files.len() / 2);
        for f in files.iter().skip(1).step_by(2) {
            assert!(Arc::ptr_eq(
                &opened[0][files.iter().position(|g| g.number == f.number).unwrap()],
                &cache.get(f, 0, &cmp).unwrap()
            ));
        }
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
        let gone = FileMetaData { number: 8, ..f };
        assert!(cache.get(&gone, 0, &UserComparator::BYTEWISE).is_err());
        assert_eq!(cache.open_tables(), 0, "a failed open left a reader behind");
    }
}
