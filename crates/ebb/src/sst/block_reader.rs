//! How a table reads its blocks: from the file, checked, and through the
//! block cache as its [`TableCachePolicy`] says (RocksDB
//! `BlockBasedTableOptions`).
//!
//! What it owns: [`BlockReader`] (one file's blocks: handle bounds,
//! trailers, checksums, decompression, memory-mapped views) and
//! [`TableBlocks`] (the reader with the table's block-cache id: where index,
//! filter and data blocks come from, and what a read of each counts).
//!
//! Invariants:
//! 1. A block is read only within the blocks (before the footer), and
//!    verified when [`ReadSettings::verify_checksums`] asks; index, filter
//!    and other meta blocks always are.
//! 2. A cached block is a verified one: a data block read without
//!    verification, or a view of a memory-mapped file, is never inserted.
//! 3. Index and filter blocks stay with the table ([`MetaBlock::Owned`])
//!    unless `cache_index_and_filter_blocks` puts them in the cache (pinned
//!    for the table's life, or read again after eviction). Whoever uses a
//!    cached block holds a [`CacheHandle`] or borrows it in place
//!    ([`BlockCache::lookup_with`]) meanwhile.
//! 4. Every cache lookup counts a hit or a miss, every insert an insert or
//!    a failure, per block kind ([`crate::cache::CacheStats`]). A refused
//!    insert (strict capacity limit) fails the read with [`Error::Busy`], as
//!    RocksDB fails it with `MemoryLimit`.
//!
//! Thread-safety: immutable after open and `Sync`; the cache does its own
//! locking. Readers that miss the same meta block together read it
//! together, and the first insert wins ([`TableBlocks::meta_block`]).

use std::sync::Arc;

use super::block::{Block, BlockContents, KeyOrder};
use super::filter::BloomFilter;
use super::format::{unwrap_block, unwrap_mapped_block, BlockHandle};
use super::prefetch::PrefetchBuffer;
use crate::cache::{BlockCache, BlockKind, CacheHandle, CacheKey, CacheValue, Priority};
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::util::checksum::ChecksumType;

/// Per-read settings for data blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadSettings {
    /// Check the checksum of every data block read from the file (blocks
    /// found in the cache were read before). Default true.
    pub verify_checksums: bool,
    /// Put data blocks read from the file into the block cache. Default true.
    pub fill_cache: bool,
    /// How iterators read ahead of the data blocks they need. Default auto.
    pub readahead: Readahead,
    /// The reads are a compaction's: iterators hint the file sequential
    /// (`posix_fadvise(POSIX_FADV_SEQUENTIAL)`) when created. Default false.
    pub for_compaction: bool,
}

/// How a table iterator reads ahead (docs/io.md, "Readahead").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Readahead {
    /// After two sequential data-block reads from the file, read ahead from
    /// the table's `initial_auto_readahead_size`, doubling up to its
    /// `max_auto_readahead_size` (RocksDB's implicit auto-readahead).
    #[default]
    Auto,
    /// Every data block read from the file reads this many bytes more
    /// (RocksDB `ReadOptions::readahead_size`, `compaction_readahead_size`);
    /// 0 reads each block alone.
    Fixed(usize),
}

impl Default for ReadSettings {
    fn default() -> Self {
        ReadSettings { verify_checksums: true, fill_cache: true, readahead: Readahead::Auto, for_compaction: false }
    }
}

/// What the table reader keeps in the block cache: decoded data and index
/// blocks, and bloom filters (the cache itself holds any value).
pub(super) trait CachedBlock {
    /// The block, if the value is one.
    fn block(&self) -> Option<&Block>;
    /// Another owner of the block, if the value is one.
    fn block_arc(&self) -> Option<Arc<Block>>;
    /// The filter, if the value is one.
    fn filter(&self) -> Option<&BloomFilter>;
    /// Bytes held: the charge given to the cache.
    fn charge(&self) -> usize;
}

impl CachedBlock for CacheValue {
    fn block(&self) -> Option<&Block> {
        self.get::<Block>()
    }
    fn block_arc(&self) -> Option<Arc<Block>> {
        self.get_arc::<Block>()
    }
    fn filter(&self) -> Option<&BloomFilter> {
        self.get::<BloomFilter>()
    }
    fn charge(&self) -> usize {
        self.block().map(Block::size).or_else(|| self.filter().map(BloomFilter::size)).unwrap_or(0)
    }
}

/// Reads blocks of one file, checking their handles and trailers.
pub(super) struct BlockReader {
    file: Arc<dyn RandomAccessFile>,
    file_name: String,
    checksum: ChecksumType,
    /// Where the footer starts: no block may reach past it.
    blocks_end: u64,
}

impl BlockReader {
    /// A reader of the blocks of `file` (named `file_name` in errors), whose
    /// blocks end where its footer starts, at `blocks_end`.
    pub(super) fn new(
        file: Arc<dyn RandomAccessFile>,
        file_name: String,
        checksum: ChecksumType,
        blocks_end: u64,
    ) -> Self {
        BlockReader { file, file_name, checksum, blocks_end }
    }

    /// The name given at open, used in errors.
    pub(super) fn file_name(&self) -> &str {
        &self.file_name
    }

    /// The file, for access hints.
    pub(super) fn file(&self) -> &dyn RandomAccessFile {
        self.file.as_ref()
    }

    /// Corruption at `offset` of this file.
    pub(super) fn corruption(&self, offset: u64, reason: impl Into<String>) -> Error {
        Error::corruption(self.file_name.clone(), offset, reason)
    }

    /// The uncompressed contents of the block at `handle`, read through
    /// `prefetch` when one is given, and whether they are a view of a
    /// memory-mapped file (an uncompressed block of a file whose
    /// [`RandomAccessFile::read_mapped`] answers: no copy, and no readahead,
    /// the bytes being in memory already).
    pub(super) fn read_contents(
        &self,
        handle: BlockHandle,
        verify: bool,
        prefetch: Option<&mut PrefetchBuffer>,
    ) -> Result<BlockContents> {
        let end = handle.end_with_trailer().filter(|&e| e <= self.blocks_end).ok_or_else(|| {
            self.corruption(
                handle.offset,
                format!(
                    "block handle (offset {}, size {}) points past the blocks, which end at {}",
                    handle.offset, handle.size, self.blocks_end
                ),
            )
        })?;
        let len = usize::try_from(end - handle.offset)
            .map_err(|_| self.corruption(handle.offset, "block too large for this platform"))?;
        let truncated =
            |got: usize| self.corruption(handle.offset, format!("truncated block: read {got} of {len} bytes"));
        crate::perf::count(|c| {
            c.block_read_count += 1;
            c.block_read_byte += len as u64;
        });
        let read_time = crate::perf::PerfTimer::start();
        if let Some(mapped) = self.file.read_mapped(handle.offset, len) {
            let raw = mapped?;
            read_time.stop(|c| &mut c.block_read_time);
            if raw.len() != len {
                return Err(truncated(raw.len()));
            }
            return unwrap_mapped_block(raw, self.checksum, verify).map_err(|r| self.corruption(handle.offset, r));
        }
        let raw = match prefetch {
            Some(p) => p.read(self.file.as_ref(), handle.offset, len, self.blocks_end)?,
            None => self.file.read_at(handle.offset, len)?,
        };
        read_time.stop(|c| &mut c.block_read_time);
        if raw.len() != len {
            return Err(truncated(raw.len()));
        }
        unwrap_block(raw, self.checksum, verify)
            .map(BlockContents::Owned)
            .map_err(|r| self.corruption(handle.offset, r))
    }

    /// The block of entries at `handle`, and whether it is a view of a
    /// memory-mapped file (see [`BlockReader::read_contents`]).
    pub(super) fn read_data(
        &self,
        handle: BlockHandle,
        verify: bool,
        prefetch: Option<&mut PrefetchBuffer>,
    ) -> Result<(Block, bool)> {
        let contents = self.read_contents(handle, verify, prefetch)?;
        let mapped = contents.is_mapped();
        Ok((Block::new(contents).map_err(|r| self.corruption(handle.offset, r))?, mapped))
    }

    /// The block of entries at `handle`, in memory of its own: a block kept
    /// by the table or the cache for long (index, metaindex, properties)
    /// does not hold a view of a mapped file.
    pub(super) fn read(
        &self,
        handle: BlockHandle,
        verify: bool,
        prefetch: Option<&mut PrefetchBuffer>,
    ) -> Result<Block> {
        let contents = match self.read_contents(handle, verify, prefetch)? {
            BlockContents::Mapped(view) => BlockContents::Owned(view.to_vec()),
            owned => owned,
        };
        Block::new(contents).map_err(|r| self.corruption(handle.offset, r))
    }

    /// The index or filter block at `handle`, always verified; an index
    /// block with its key heads in `index_order` ([`Block::with_key_heads`]).
    pub(super) fn read_meta(&self, handle: BlockHandle, kind: BlockKind, index_order: &KeyOrder) -> Result<CacheValue> {
        Ok(match kind {
            BlockKind::Filter => {
                let contents = match self.read_contents(handle, true, None)? {
                    BlockContents::Mapped(view) => view.to_vec(),
                    BlockContents::Owned(v) => v,
                };
                CacheValue::new(BloomFilter::from_block(contents).map_err(|r| self.corruption(handle.offset, r))?)
            }
            BlockKind::Index => CacheValue::new(self.read(handle, true, None)?.with_key_heads(index_order)),
            BlockKind::Data => CacheValue::new(self.read(handle, true, None)?),
        })
    }
}

/// How a table uses the block cache and reads ahead (RocksDB
/// `BlockBasedTableOptions`).
#[derive(Clone)]
pub struct TableCachePolicy {
    /// The cache blocks are shared through; `None`, or a cache of capacity 0,
    /// reads every data block from the file.
    pub block_cache: Option<Arc<dyn BlockCache>>,
    /// Keep the index and filter blocks in the block cache, charged to it,
    /// rather than in the table. RocksDB `cache_index_and_filter_blocks`; default false.
    pub cache_index_and_filter_blocks: bool,
    /// Insert them with [`Priority::High`]. RocksDB
    /// `cache_index_and_filter_blocks_with_high_priority`; default true.
    pub cache_index_and_filter_blocks_with_high_priority: bool,
    /// Hold references to the cached index and filter blocks for the table's
    /// whole life, so they are never evicted (they count as pinned usage). The
    /// database sets it for L0 tables under `pin_l0_filter_and_index_blocks_in_cache`.
    pub pin_index_and_filter_blocks: bool,
    /// Auto readahead's first size. RocksDB `initial_auto_readahead_size`; default 8 KiB.
    pub initial_auto_readahead_size: usize,
    /// Auto readahead's largest size; 0 turns auto readahead off. RocksDB
    /// `max_auto_readahead_size`; default 256 KiB.
    pub max_auto_readahead_size: usize,
    /// The order of the keys: the column family's comparator. A table whose
    /// properties name another is refused at open.
    pub comparator: UserComparator,
    /// The id the table's blocks are cached under: `None` takes a new one
    /// from the cache. A table cache that closes and reopens a file passes
    /// the id the file had, so the blocks cached before are found again
    /// (RocksDB derives its cache keys from the file, not the reader). The
    /// id must come from the same cache's [`BlockCache::new_id`] and name
    /// this file only.
    pub cache_id: Option<u64>,
}

impl Default for TableCachePolicy {
    fn default() -> Self {
        TableCachePolicy {
            block_cache: None,
            cache_index_and_filter_blocks: false,
            cache_index_and_filter_blocks_with_high_priority: true,
            pin_index_and_filter_blocks: false,
            initial_auto_readahead_size: 8 << 10,
            max_auto_readahead_size: 256 << 10,
            comparator: UserComparator::BYTEWISE,
            cache_id: None,
        }
    }
}

impl TableCachePolicy {
    /// Data blocks through `cache`, index and filter owned by the table.
    #[cfg(any(test, feature = "internals"))]
    pub fn with_cache(cache: Option<Arc<dyn BlockCache>>) -> Self {
        TableCachePolicy { block_cache: cache, ..TableCachePolicy::default() }
    }
}

/// Where a table keeps its index or filter block.
pub(super) enum MetaBlock {
    /// Read at open and owned by the table.
    Owned(CacheValue),
    /// In the block cache, referenced by the table for its whole life.
    Pinned(CacheHandle),
    /// In the block cache until evicted; read again from the file then.
    Cached(BlockHandle),
}

impl MetaBlock {
    /// Bytes the table holds for the block outside the cache.
    pub(super) fn owned_charge(&self) -> usize {
        match self {
            MetaBlock::Owned(v) => v.charge(),
            MetaBlock::Pinned(_) | MetaBlock::Cached(_) => 0,
        }
    }
}

/// An index or filter block in use: borrowed from the table, or held through
/// a cache handle until dropped.
pub(super) enum MetaRef<'a> {
    Borrowed(&'a CacheValue),
    Held(CacheHandle),
}

impl MetaRef<'_> {
    pub(super) fn value(&self) -> &CacheValue {
        match self {
            MetaRef::Borrowed(v) => v,
            MetaRef::Held(h) => h.value(),
        }
    }

    pub(super) fn into_handle(self) -> Option<CacheHandle> {
        match self {
            MetaRef::Borrowed(_) => None,
            MetaRef::Held(h) => Some(h),
        }
    }
}

/// A table's blocks: its file's [`BlockReader`] and where the table's
/// blocks sit in the block cache.
pub(super) struct TableBlocks {
    reader: BlockReader,
    /// `None` also for a cache of capacity 0, which caches nothing.
    cache: Option<Arc<dyn BlockCache>>,
    /// The id the table's blocks are cached under (0 without a cache).
    cache_id: u64,
    /// The priority of index and filter blocks in the cache.
    meta_priority: Priority,
    /// How index keys compare: index blocks are read with their key heads
    /// in this order ([`Block::with_key_heads`]).
    index_order: KeyOrder,
}

impl TableBlocks {
    /// The blocks `reader` reads, cached as `policy` says; a cache of
    /// capacity 0 is read as none.
    pub(super) fn new(reader: BlockReader, policy: &TableCachePolicy, index_order: KeyOrder) -> Self {
        let cache = policy.block_cache.clone().filter(|c| c.capacity() > 0);
        if let Some(c) = cache.as_ref().filter(|c| c.secondary().is_some()) {
            c.set_spill(spill_data_block);
        }
        let cache_id = cache.as_ref().map_or(0, |c| policy.cache_id.unwrap_or_else(|| c.new_id()));
        let meta_priority =
            if policy.cache_index_and_filter_blocks_with_high_priority { Priority::High } else { Priority::Low };
        TableBlocks { reader, cache, cache_id, meta_priority, index_order }
    }

    /// The file's block reader.
    pub(super) fn reader(&self) -> &BlockReader {
        &self.reader
    }

    /// How index keys compare.
    pub(super) fn index_order(&self) -> &KeyOrder {
        &self.index_order
    }

    /// Opens the index or filter block at `handle`: owned by the table, or
    /// in the cache as `policy` says. A table opened again under the id it
    /// had (a bounded table cache) takes the block it cached then, verified
    /// when it was read, instead of reading it again. With
    /// `pin_index_and_filter_blocks` a refused insert fails the open.
    pub(super) fn open_meta(
        &self,
        handle: BlockHandle,
        kind: BlockKind,
        policy: &TableCachePolicy,
    ) -> Result<MetaBlock> {
        let Some(cache) = self.cache.as_ref().filter(|_| policy.cache_index_and_filter_blocks) else {
            return Ok(MetaBlock::Owned(self.reader.read_meta(handle, kind, &self.index_order)?));
        };
        let key = CacheKey::new(self.cache_id, handle.offset);
        if policy.cache_id.is_some() {
            if let Some(h) = cache.lookup(&key) {
                cache.stats().record_hit(kind);
                return Ok(if policy.pin_index_and_filter_blocks {
                    MetaBlock::Pinned(h)
                } else {
                    MetaBlock::Cached(handle)
                });
            }
        }
        // Counted as a miss, as RocksDB's prefetch through the cache at
        // open counts one.
        cache.stats().record_miss(kind);
        let value = self.reader.read_meta(handle, kind, &self.index_order)?;
        match insert_counted(cache.as_ref(), key, value, self.meta_priority, kind) {
            Ok(h) if policy.pin_index_and_filter_blocks => Ok(MetaBlock::Pinned(h)),
            Ok(_) => Ok(MetaBlock::Cached(handle)),
            Err(e) if policy.pin_index_and_filter_blocks => Err(e),
            // Unpinned, the block is simply read again when first used.
            Err(_) => Ok(MetaBlock::Cached(handle)),
        }
    }

    /// The index or filter block `which`: the table's own, its pinned one, or
    /// one from the cache (read from the file and inserted on a miss).
    pub(super) fn meta_block<'a>(&'a self, which: &'a MetaBlock, kind: BlockKind) -> Result<MetaRef<'a>> {
        let handle = match which {
            MetaBlock::Owned(v) => return Ok(MetaRef::Borrowed(v)),
            MetaBlock::Pinned(h) => return Ok(MetaRef::Borrowed(h.value())),
            MetaBlock::Cached(handle) => *handle,
        };
        self.cached_meta(handle, kind).map(MetaRef::Held)
    }

    /// The meta block at `handle` that lives in the cache (an index or
    /// filter partition, or an evictable index or filter block): looked up,
    /// or read and inserted on a miss; without a cache, read for the caller.
    pub(super) fn cached_meta(&self, handle: BlockHandle, kind: BlockKind) -> Result<CacheHandle> {
        let Some(cache) = &self.cache else {
            return Ok(CacheHandle::uncached(self.reader.read_meta(handle, kind, &self.index_order)?));
        };
        if let Some(h) = cache.lookup(&CacheKey::new(self.cache_id, handle.offset)) {
            cache.stats().record_hit(kind);
            return Ok(h);
        }
        self.load_meta(cache.as_ref(), handle, kind)
    }

    /// The index or filter block at `handle`, missing from `cache`: read
    /// (verified) and inserted with the index and filter blocks' priority.
    ///
    /// Readers that missed together read together; the first to finish
    /// inserts, and the others take its entry instead of replacing it
    /// (RocksDB replaces). A second copy of a block of hundreds of kilobytes
    /// would be charged beside the first while both are referenced, evict
    /// data blocks to make room, and take the first's place in the shard's
    /// LRU order: with index blocks large beside their shard, replacing fed
    /// the thrash docs/cache.md describes ("Shards and large blocks").
    fn load_meta(&self, cache: &dyn BlockCache, handle: BlockHandle, kind: BlockKind) -> Result<CacheHandle> {
        cache.stats().record_miss(kind);
        let value = self.reader.read_meta(handle, kind, &self.index_order)?;
        let key = CacheKey::new(self.cache_id, handle.offset);
        if let Some(loaded) = cache.lookup(&key) {
            return Ok(loaded);
        }
        insert_counted(cache, key, value, self.meta_priority, kind)
    }

    /// Runs `f` on the index or filter block `which`, as
    /// [`TableBlocks::meta_block`] finds it. A cached block is borrowed in
    /// place for the call ([`BlockCache::lookup_with`]: no handle, so
    /// concurrent point reads do not all bump one shared reference count);
    /// on a miss it is read and inserted as `meta_block` does.
    pub(super) fn with_meta_block<R>(
        &self,
        which: &MetaBlock,
        kind: BlockKind,
        f: impl Fn(&CacheValue) -> R,
    ) -> Result<R> {
        if let (MetaBlock::Cached(handle), Some(cache)) = (which, &self.cache) {
            let mut out = None;
            cache.lookup_with(&CacheKey::new(self.cache_id, handle.offset), &mut |v| out = Some(f(v)));
            if let Some(r) = out {
                cache.stats().record_hit(kind);
                return Ok(r);
            }
            return self.load_meta(cache.as_ref(), *handle, kind).map(|h| f(h.value()));
        }
        self.meta_block(which, kind).map(|r| f(r.value()))
    }

    /// Runs `search` on the data block at `handle` in place if the cache
    /// holds it (counting the hit), the entry held only for the call; `None`
    /// when it is not cached (nothing is counted then: the read that
    /// follows counts the miss).
    pub(super) fn with_cached_data_block<R>(&self, handle: BlockHandle, search: impl FnOnce(&Block) -> R) -> Option<R> {
        let cache = self.cache.as_ref()?;
        let mut search = Some(search);
        let mut hit = None;
        cache.lookup_with(&CacheKey::new(self.cache_id, handle.offset), &mut |v| {
            if let (Some(block), Some(search)) = (v.block(), search.take()) {
                hit = Some(search(block));
            }
        });
        if hit.is_some() {
            cache.stats().record_hit(BlockKind::Data);
        }
        hit
    }

    /// The data block at `handle`, from the cache when it is there, and the
    /// handle that keeps it cached while it is used. A block not in the cache
    /// is read through `prefetch` when one is given.
    pub(super) fn data_block(
        &self,
        handle: BlockHandle,
        rs: &ReadSettings,
        prefetch: Option<&mut PrefetchBuffer>,
    ) -> Result<(Arc<Block>, Option<CacheHandle>)> {
        if let Some(cache) = &self.cache {
            if let Some(h) = cache.lookup(&CacheKey::new(self.cache_id, handle.offset)) {
                if let Some(block) = h.value().block_arc() {
                    block.prefetch();
                    cache.stats().record_hit(BlockKind::Data);
                    return Ok((block, Some(h)));
                }
            }
        }
        self.load_data_block(handle, rs, prefetch)
    }

    /// The data block at `handle`, not found in the cache: read from the file
    /// (through `prefetch` when given) and inserted when `fill_cache` and its
    /// checksum was verified, with the handle of its cache entry then.
    pub(super) fn load_data_block(
        &self,
        handle: BlockHandle,
        rs: &ReadSettings,
        prefetch: Option<&mut PrefetchBuffer>,
    ) -> Result<(Arc<Block>, Option<CacheHandle>)> {
        let Some(cache) = &self.cache else {
            return Ok((Arc::new(self.reader.read_data(handle, rs.verify_checksums, prefetch)?.0), None));
        };
        cache.stats().record_miss(BlockKind::Data);
        let key = CacheKey::new(self.cache_id, handle.offset);
        if let Some(found) = self.load_from_secondary(cache.as_ref(), key, rs) {
            return found;
        }
        let (block, mapped) = self.reader.read_data(handle, rs.verify_checksums, prefetch)?;
        let block = Arc::new(block);
        // An unverified block is not shared: a later read that verifies
        // checksums takes cached blocks on trust, and must never be handed a
        // damaged one (RocksDB caches it; here a cached block is a verified one).
        // A view of a mapped file is not cached either (LevelDB's and
        // RocksDB's rule for blocks they did not copy): its bytes are in
        // memory already, and a cached view would keep the mapping of a
        // deleted table alive until evicted.
        if !rs.fill_cache || !rs.verify_checksums || mapped {
            return Ok((block, None));
        }
        let h = insert_counted(
            cache.as_ref(),
            key,
            CacheValue::from_arc(Arc::clone(&block)),
            Priority::Low,
            BlockKind::Data,
        )?;
        Ok((block, Some(h)))
    }
}

impl TableBlocks {
    /// The data block of `key` from the compressed secondary cache under
    /// `cache`, if it has one and holds the block: moved up into `cache`
    /// unless the read does not fill it (then left in the secondary). Its
    /// bytes were verified when first read; bytes that do not parse as a
    /// block are a miss, and the file is read.
    fn load_from_secondary(
        &self,
        cache: &dyn BlockCache,
        key: CacheKey,
        rs: &ReadSettings,
    ) -> Option<Result<(Arc<Block>, Option<CacheHandle>)>> {
        let bytes = cache.secondary()?.lookup(&key, !rs.fill_cache)?;
        let block = Arc::new(Block::new(BlockContents::Owned(bytes)).ok()?);
        crate::perf::count(|c| c.secondary_cache_hit_count += 1);
        if !rs.fill_cache {
            return Some(Ok((block, None)));
        }
        let value = CacheValue::from_arc(Arc::clone(&block));
        Some(insert_counted(cache, key, value, Priority::Low, BlockKind::Data).map(|h| (block, Some(h))))
    }
}

/// What a compressed secondary cache keeps of a block the block cache
/// evicts: a data block's bytes as stored ([`crate::cache::SpillFn`]);
/// nothing of index blocks (read again with their key heads) and filters.
fn spill_data_block(value: &(dyn std::any::Any + Send + Sync)) -> Option<&[u8]> {
    value.downcast_ref::<Block>().filter(|b| !b.has_key_heads()).map(Block::contents)
}

/// Inserts `value` into `cache` under `key` with its charge, counting the
/// insert (or its failure, under the strict capacity limit) for `kind`.
fn insert_counted(
    cache: &dyn BlockCache,
    key: CacheKey,
    value: CacheValue,
    priority: Priority,
    kind: BlockKind,
) -> Result<CacheHandle> {
    let charge = value.charge();
    let inserted = cache.insert(key, value, charge, priority);
    match &inserted {
        Ok(_) => cache.stats().record_insert(kind, charge),
        Err(_) => cache.stats().record_insert_failure(kind),
    }
    inserted
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
    use std::sync::Arc;

    use super::*;
    use crate::cache::{new_cache, BlockCache, CacheKey, CacheOptions, CacheType, CacheValue, LruCache, Priority};
    use crate::error::{Error, Result};
    use crate::sst::table_reader::Table;
    use crate::sst::test_tables::*;
    use crate::util::checksum::ChecksumType;
    use crate::util::compression::CompressionType;

    #[test]
    fn block_cache_serves_repeated_reads() {
        let entries = sample_entries(500);
        let (bytes, _) = build(&entries, opts(CompressionType::Snappy, ChecksumType::Crc32c, 512));
        let file = MemRandom::new(bytes.clone());
        let cache = Arc::new(LruCache::new(1 << 20));
        let t = Table::open(file.clone(), bytes.len() as u64, "c.sst".into(), Some(cache.clone())).unwrap();
        let key = &entries[100].0;
        let no_fill = ReadSettings { verify_checksums: true, fill_cache: false, ..ReadSettings::default() };
        assert!(t.get(&no_fill, key).unwrap().is_some());
        assert_eq!(cache.usage(), 0, "fill_cache = false inserted a block");

        let rs = ReadSettings::default();
        assert!(t.get(&rs, key).unwrap().is_some());
        let usage = cache.usage();
        assert!(usage > 0);
        let reads = file.reads.load(AtomicOrdering::SeqCst);
        assert_eq!(t.get(&rs, key).unwrap(), Some(entries[100].clone()));
        assert_eq!(file.reads.load(AtomicOrdering::SeqCst), reads, "second read missed the cache");
        assert_eq!(cache.usage(), usage);

        // The same file opened again gets its own cache id.
        let t2 = Table::open(file.clone(), bytes.len() as u64, "c.sst".into(), Some(cache.clone())).unwrap();
        let reads = file.reads.load(AtomicOrdering::SeqCst);
        assert!(t2.get(&rs, key).unwrap().is_some());
        assert_eq!(file.reads.load(AtomicOrdering::SeqCst), reads + 1);
        assert_eq!(cache.usage(), 2 * usage);

        // A full scan through a small cache keeps it within capacity.
        let small: Arc<dyn BlockCache> =
            Arc::new(LruCache::with_options(&CacheOptions { num_shard_bits: 0, ..CacheOptions::new(2048) }).unwrap());
        let t3 = Table::open(file, bytes.len() as u64, "c.sst".into(), Some(small.clone())).unwrap();
        assert_eq!(scan_forward(&t3, rs).unwrap(), entries);
        assert!(small.usage() > 0 && small.usage() <= 2048);
    }

    #[test]
    fn a_block_read_without_verification_is_not_cached_for_verified_reads() {
        let entries = sample_entries(50);
        let (mut bytes, _) = build(&entries, opts(CompressionType::None, ChecksumType::Crc32c, 4096));
        // A byte of the first value, inside the first data block: it still
        // parses, so only its checksum tells.
        let (key, value) = &entries[0];
        let at = bytes.windows(value.len()).position(|w| w == value.as_slice()).unwrap();
        bytes[at] ^= 0x01;
        let file = MemRandom::new(bytes.clone());
        let cache = Arc::new(LruCache::new(1 << 20));
        let t = Table::open(file, bytes.len() as u64, "d.sst".into(), Some(cache.clone())).unwrap();
        let unverified = ReadSettings { verify_checksums: false, ..ReadSettings::default() };
        let got = t.get(&unverified, key).unwrap().unwrap();
        assert_ne!(got.1, *value, "the damage is in the value read without verification");
        assert_eq!(cache.usage(), 0, "an unverified block was cached");
        let e = t.get(&ReadSettings::default(), key).unwrap_err();
        assert!(e.is_corruption(), "{e:?}");
    }

    /// A cache whose next `misses` lookups answer "not there" whatever it
    /// holds, as a reader sees it when another reader loads the same block
    /// between its lookup and its insert.
    struct RacedCache {
        inner: Arc<dyn BlockCache>,
        misses: AtomicUsize,
    }

    impl BlockCache for RacedCache {
        fn lookup(&self, key: &CacheKey) -> Option<CacheHandle> {
            let raced = self.misses.fetch_update(AtomicOrdering::SeqCst, AtomicOrdering::SeqCst, |n| n.checked_sub(1));
            if raced.is_ok() {
                return None;
            }
            self.inner.lookup(key)
        }
        fn insert(&self, key: CacheKey, value: CacheValue, charge: usize, priority: Priority) -> Result<CacheHandle> {
            self.inner.insert(key, value, charge, priority)
        }
        fn erase(&self, key: &CacheKey) {
            self.inner.erase(key)
        }
        fn usage(&self) -> usize {
            self.inner.usage()
        }
        fn pinned_usage(&self) -> usize {
            self.inner.pinned_usage()
        }
        fn capacity(&self) -> usize {
            self.inner.capacity()
        }
        fn new_id(&self) -> u64 {
            self.inner.new_id()
        }
        fn stats(&self) -> &crate::cache::CacheStats {
            self.inner.stats()
        }
        fn name(&self) -> &'static str {
            self.inner.name()
        }
    }

    #[test]
    fn a_reader_that_loses_the_race_to_load_a_meta_block_takes_the_cached_one() {
        for cache_type in [CacheType::Lru, CacheType::Clock] {
            let (file, len, entries) = cached_table_file();
            let raced = Arc::new(RacedCache { inner: cache_of(cache_type, 1 << 20), misses: AtomicUsize::new(0) });
            let cache: Arc<dyn BlockCache> = raced.clone();
            let t = Table::open_with_policy(file, len, "c.sst".into(), policy(&cache, true, false)).unwrap();
            let meta_inserts = || {
                let s = cache.stats().snapshot();
                (s.index.inserts, s.filter.inserts)
            };
            let at_open = meta_inserts();
            assert_eq!(at_open, (1, 1), "{cache_type:?}");
            let rs = ReadSettings::default();
            // The filter's lookup misses though the block is cached: the
            // reader reads it, finds it loaded meanwhile, and inserts nothing.
            for (k, v) in entries.iter().step_by(101) {
                raced.misses.store(1, AtomicOrdering::SeqCst);
                assert_eq!(t.get(&rs, k).unwrap(), Some((k.clone(), v.clone())), "{cache_type:?}");
            }
            assert_eq!(meta_inserts(), at_open, "{cache_type:?}: a copy replaced the cached block");
            assert!(cache.stats().snapshot().filter.misses >= 30, "{cache_type:?}: the misses are counted");
        }
    }

    #[test]
    fn index_and_filter_blocks_go_through_the_cache_when_asked() {
        for cache_type in [CacheType::Lru, CacheType::Clock] {
            let (file, len, entries) = cached_table_file();
            let cache = cache_of(cache_type, 1 << 20);
            let t = Table::open_with_policy(file.clone(), len, "c.sst".into(), policy(&cache, true, false)).unwrap();
            let p = t.properties();
            let s = cache.stats().snapshot();
            assert_eq!((s.index.inserts, s.filter.inserts, s.data.inserts), (1, 1, 0), "{cache_type:?}");
            // Read at open through the cache: one miss each, as RocksDB counts.
            assert_eq!((s.index.misses, s.filter.misses), (1, 1));
            assert!(s.index.bytes_inserted > 0 && s.filter.bytes_inserted + 6 >= p.filter_size);
            assert!(cache.usage() as u64 >= s.index.bytes_inserted + s.filter.bytes_inserted);
            assert_eq!(cache.pinned_usage(), 0, "unpinned blocks are referenced");

            let rs = ReadSettings::default();
            assert_eq!(t.get(&rs, &entries[10].0).unwrap(), Some(entries[10].clone()));
            let s = cache.stats().snapshot();
            assert_eq!((s.index.hits, s.filter.hits, s.data.misses, s.data.inserts), (1, 1, 1, 1));
            assert!(!t.key_may_match(b"absent-key-1"));
            assert_eq!(cache.stats().snapshot().filter.hits, 2);

            // Evicted, they are read again from the file and cached again.
            flood(&cache);
            let reads = file.reads.load(AtomicOrdering::SeqCst);
            assert_eq!(t.get(&rs, &entries[20].0).unwrap(), Some(entries[20].clone()));
            assert_eq!(file.reads.load(AtomicOrdering::SeqCst), reads + 3, "filter, index and data re-read");
            let s = cache.stats().snapshot();
            assert_eq!((s.index.misses, s.filter.misses, s.index.inserts, s.filter.inserts), (2, 2, 2, 2));
            assert_eq!(scan_forward(&t, rs).unwrap(), entries);
        }
    }

    #[test]
    fn pinned_index_and_filter_blocks_survive_eviction_pressure() {
        for cache_type in [CacheType::Lru, CacheType::Clock] {
            let (file, len, entries) = cached_table_file();
            let cache = cache_of(cache_type, 64 << 10);
            let t = Table::open_with_policy(file.clone(), len, "c.sst".into(), policy(&cache, true, true)).unwrap();
            let s = cache.stats().snapshot();
            assert_eq!((s.index.misses, s.filter.misses), (1, 1), "read at open through the cache");
            let pinned = cache.pinned_usage() as u64;
            assert!(pinned >= s.index.bytes_inserted + s.filter.bytes_inserted, "{cache_type:?}: pinned {pinned}");
            flood(&cache);
            assert_eq!(cache.pinned_usage() as u64, pinned);
            let reads = file.reads.load(AtomicOrdering::SeqCst);
            assert_eq!(t.get(&ReadSettings::default(), &entries[5].0).unwrap(), Some(entries[5].clone()));
            assert_eq!(file.reads.load(AtomicOrdering::SeqCst), reads + 1, "only the data block is read");
            let s = cache.stats().snapshot();
            assert_eq!((s.index.misses, s.filter.misses), (1, 1), "pinned blocks are not even looked up");
            drop(t);
            assert_eq!(cache.pinned_usage(), 0, "closing the table releases its pins");
        }
    }

    #[test]
    fn high_priority_index_and_filter_blocks_survive_a_scan() {
        // 48 KiB of LRU, half of it for high priority; the scan reads far more.
        let filter_misses_after_scan = |high_priority: bool| {
            let (file, len, entries) = cached_table_file();
            let cache = cache_of(CacheType::Lru, 48 << 10);
            let t = Table::open_with_policy(file, len, "c.sst".into(), policy(&cache, high_priority, false)).unwrap();
            let at_open = cache.stats().snapshot().filter.misses;
            assert_eq!(scan_forward(&t, ReadSettings::default()).unwrap(), entries);
            let s = cache.stats().snapshot();
            assert!(s.data.bytes_inserted as usize > 4 * cache.capacity(), "{s:?}");
            assert!(!t.key_may_match(b"absent-key-1"));
            cache.stats().snapshot().filter.misses - at_open
        };
        assert_eq!(filter_misses_after_scan(true), 0, "the scan flushed a high-priority filter");
        // Control: at low priority the same scan flushes it.
        assert_eq!(filter_misses_after_scan(false), 1);
    }

    #[test]
    fn a_cache_of_capacity_zero_caches_nothing() {
        for cache_type in [CacheType::Lru, CacheType::Clock] {
            let (file, len, entries) = cached_table_file();
            let cache = cache_of(cache_type, 0);
            let t = Table::open_with_policy(file.clone(), len, "c.sst".into(), policy(&cache, true, true)).unwrap();
            let rs = ReadSettings::default();
            for _ in 0..2 {
                let reads = file.reads.load(AtomicOrdering::SeqCst);
                assert_eq!(t.get(&rs, &entries[7].0).unwrap(), Some(entries[7].clone()));
                assert_eq!(file.reads.load(AtomicOrdering::SeqCst), reads + 1, "{cache_type:?}");
            }
            assert_eq!((cache.usage(), cache.stats().snapshot().total()), (0, Default::default()));
        }
    }

    #[test]
    fn the_strict_capacity_limit_fails_reads_that_cannot_be_cached() {
        for cache_type in [CacheType::Lru, CacheType::Clock] {
            let (file, len, entries) = cached_table_file();
            let o = CacheOptions {
                num_shard_bits: 0,
                strict_capacity_limit: true,
                estimated_entry_charge: 600,
                ..CacheOptions::new(32 << 10)
            };
            let cache = new_cache(cache_type, &o).unwrap();
            let t = Table::open(file, len, "c.sst".into(), Some(Arc::clone(&cache))).unwrap();
            let rs = ReadSettings::default();
            assert!(t.get(&rs, &entries[1].0).unwrap().is_some());
            // Everything else in the cache is in use, and no room is left.
            let id = cache.new_id();
            let mut held = Vec::new();
            for charge in [1024, 64, 1] {
                while let Ok(h) =
                    cache.insert(CacheKey::new(id, held.len() as u64), empty_block(), charge, Priority::Low)
                {
                    held.push(h);
                    assert!(held.len() < 10_000, "{cache_type:?}: the strict limit never refused an insert");
                }
            }
            let e = t.get(&rs, &entries[2000].0).unwrap_err();
            assert!(matches!(e, Error::Busy(_)), "{cache_type:?}: {e}");
            assert!(cache.stats().snapshot().data.insert_failures >= 1);
            // Reads that do not fill the cache still work, and so does
            // everything once the handles are released.
            let no_fill = ReadSettings { verify_checksums: true, fill_cache: false, ..ReadSettings::default() };
            assert!(t.get(&no_fill, &entries[2000].0).unwrap().is_some());
            drop(held);
            assert!(t.get(&rs, &entries[2000].0).unwrap().is_some());
        }
    }
}
