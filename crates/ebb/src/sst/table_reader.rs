//! Reads a table: [`Table`] holds what every lookup needs (index block, bloom
//! filter, properties), [`TableIterator`] walks the index block and, through
//! it, the data blocks (LevelDB `table/table.cc` and `two_level_iterator.cc`).
//!
//! Contract:
//! 1. `Table::open` reads and checksum-verifies the footer, metaindex, index,
//!    filter and properties blocks; data blocks are read on demand, verified
//!    when [`ReadSettings::verify_checksums`] asks, and shared through the
//!    block cache when one is given.
//! 2. Block cache use follows [`TableCachePolicy`] (RocksDB
//!    `BlockBasedTableOptions`): index and filter blocks are owned by the table
//!    unless `cache_index_and_filter_blocks` puts them in the cache (inserted
//!    at open, read again after eviction, optionally pinned for the table's
//!    life). Whoever uses a cached block holds a [`CacheHandle`] meanwhile: a
//!    `get` for its duration, an iterator for its index block and its current
//!    data block. Reads count hits, misses and inserts per block kind in the
//!    cache's [`crate::cache::CacheStats`]. A refused insert (strict capacity
//!    limit) fails the read with [`Error::Busy`], as RocksDB fails it with
//!    `MemoryLimit`; a filter that cannot be read lets every key through.
//! 3. Any damage found (checksum, magic, lengths, varints, compression, a
//!    handle past the end) is [`Error::Corruption`] naming the file and the
//!    offset of the block concerned; no input makes a read panic.
//! 4. Data blocks an iterator reads from the file go through its
//!    [`PrefetchBuffer`] as [`ReadSettings::readahead`] says: fixed readahead
//!    for compaction inputs and an explicit `ReadOptions::readahead_size`,
//!    auto readahead (growing on sequential reads) otherwise; point lookups and
//!    the index, filter and properties blocks never read ahead. A compaction's
//!    iterator hints the file sequential (docs/io.md).
//! 5. A `Table` is immutable and `Sync`; iterators are used by one thread each.
//!    A [`TableIterator`] that meets an error becomes invalid for good and
//!    reports the error through `status()`.

use std::sync::Arc;

use super::block::{Block, BlockContents, BlockIterator, KeyOrder};
use super::filter::{filter_hash, BloomFilter};
use super::format::{unwrap_block, unwrap_mapped_block, BlockHandle, Footer, FOOTER_LEN};
use super::pinned::PinnableSlice;
use super::prefetch::PrefetchBuffer;
use super::properties::TableProperties;
use super::{FILTER_BLOCK_NAME, PARTITIONED_FILTER_BLOCK_NAME, PROPERTIES_BLOCK_NAME, RANGE_DEL_BLOCK_NAME};
use crate::cache::{BlockCache, BlockKind, CacheHandle, CacheKey, CacheValue, Priority};
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::fs::{Access, RandomAccessFile};
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, user_key, with_internal_key, ValueKind, KIND_FOR_SEEK, MAX_SEQUENCE, TRAILER_LEN};
use crate::range_del::{FragmentedTombstones, RangeTombstone};
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
trait CachedBlock {
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
struct BlockReader {
    file: Arc<dyn RandomAccessFile>,
    file_name: String,
    checksum: ChecksumType,
    /// Where the footer starts: no block may reach past it.
    blocks_end: u64,
}

impl BlockReader {
    fn corruption(&self, offset: u64, reason: impl Into<String>) -> Error {
        Error::corruption(self.file_name.clone(), offset, reason)
    }

    /// The uncompressed contents of the block at `handle`, read through
    /// `prefetch` when one is given, and whether they are a view of a
    /// memory-mapped file (an uncompressed block of a file whose
    /// [`RandomAccessFile::read_mapped`] answers: no copy, and no readahead,
    /// the bytes being in memory already).
    fn read_contents(
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
        if let Some(mapped) = self.file.read_mapped(handle.offset, len) {
            let raw = mapped?;
            if raw.len() != len {
                return Err(truncated(raw.len()));
            }
            return unwrap_mapped_block(raw, self.checksum, verify).map_err(|r| self.corruption(handle.offset, r));
        }
        let raw = match prefetch {
            Some(p) => p.read(self.file.as_ref(), handle.offset, len, self.blocks_end)?,
            None => self.file.read_at(handle.offset, len)?,
        };
        if raw.len() != len {
            return Err(truncated(raw.len()));
        }
        unwrap_block(raw, self.checksum, verify)
            .map(BlockContents::Owned)
            .map_err(|r| self.corruption(handle.offset, r))
    }

    /// The block of entries at `handle`, and whether it is a view of a
    /// memory-mapped file (see [`BlockReader::read_contents`]).
    fn read_data(
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
    fn read(&self, handle: BlockHandle, verify: bool, prefetch: Option<&mut PrefetchBuffer>) -> Result<Block> {
        let contents = match self.read_contents(handle, verify, prefetch)? {
            BlockContents::Mapped(view) => BlockContents::Owned(view.to_vec()),
            owned => owned,
        };
        Block::new(contents).map_err(|r| self.corruption(handle.offset, r))
    }

    /// The index or filter block at `handle`, always verified; an index
    /// block with its key heads in `index_order` ([`Block::with_key_heads`]).
    fn read_meta(&self, handle: BlockHandle, kind: BlockKind, index_order: &KeyOrder) -> Result<CacheValue> {
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
    pub fn with_cache(cache: Option<Arc<dyn BlockCache>>) -> Self {
        TableCachePolicy { block_cache: cache, ..TableCachePolicy::default() }
    }
}

/// Where a table keeps its index or filter block.
enum MetaBlock {
    /// Read at open and owned by the table.
    Owned(CacheValue),
    /// In the block cache, referenced by the table for its whole life.
    Pinned(CacheHandle),
    /// In the block cache until evicted; read again from the file then.
    Cached(BlockHandle),
}

/// A filter probe started by [`Table::start_filter_probe`]: the answer,
/// or the filter block (held, if it came from the cache) and the key's hash.
pub struct FilterProbe<'a>(Probe<'a>);

enum Probe<'a> {
    Known(bool),
    Pending(MetaRef<'a>, u64),
}

impl FilterProbe<'_> {
    /// False only when the table certainly does not hold the key.
    pub fn may_match(&self) -> bool {
        match &self.0 {
            Probe::Known(answer) => *answer,
            Probe::Pending(meta, hash) => meta.value().filter().is_none_or(|f| f.may_match_hash(*hash)),
        }
    }
}

/// An index or filter block in use: borrowed from the table, or held through
/// a cache handle until dropped.
enum MetaRef<'a> {
    Borrowed(&'a CacheValue),
    Held(CacheHandle),
}

impl MetaRef<'_> {
    fn value(&self) -> &CacheValue {
        match self {
            MetaRef::Borrowed(v) => v,
            MetaRef::Held(h) => h.value(),
        }
    }

    fn into_handle(self) -> Option<CacheHandle> {
        match self {
            MetaRef::Borrowed(_) => None,
            MetaRef::Held(h) => Some(h),
        }
    }
}

/// An open table file.
pub struct Table {
    reader: BlockReader,
    file_size: u64,
    index_offset: u64,
    /// The index is partitions under a top-level index (`index` is then the
    /// top level): format versions 2 and 4.
    partitioned_index: bool,
    /// How index keys (and the top-level filter index's) compare with a
    /// lookup: `UserKeys` in format versions 3 and 4, else `Internal`.
    index_order: KeyOrder,
    /// How data-block keys compare: internal keys in the comparator's order.
    data_order: KeyOrder,
    index: MetaBlock,
    /// With partitioned filters: the top-level filter index (partition key
    /// → filter partition handle), keyed as the top-level index.
    filter_partitions: Option<Arc<Block>>,
    filter: Option<MetaBlock>,
    properties: TableProperties,
    cache: Option<Arc<dyn BlockCache>>,
    cache_id: u64,
    meta_priority: Priority,
    /// Auto readahead sizes, initial and max.
    auto_readahead: (usize, usize),
    /// The range tombstones of the range-deletion block, fragmented.
    range_dels: Option<Arc<FragmentedTombstones>>,
}

impl Table {
    /// Opens the table in `file`, which holds `file_size` bytes. Reads and
    /// verifies the footer, metaindex, index, filter and properties blocks.
    /// Data blocks go through `cache`; index and filter stay in the table.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        file_size: u64,
        file_name: String,
        cache: Option<Arc<dyn BlockCache>>,
    ) -> Result<Arc<Table>> {
        Table::open_with_policy(file, file_size, file_name, TableCachePolicy::with_cache(cache))
    }

    /// [`Table::open`] using the block cache as `policy` says. With
    /// `cache_index_and_filter_blocks` the index and filter blocks are
    /// inserted into the cache here; with `pin_index_and_filter_blocks` a
    /// refused insert (strict capacity limit) fails the open.
    pub fn open_with_policy(
        file: Arc<dyn RandomAccessFile>,
        file_size: u64,
        file_name: String,
        policy: TableCachePolicy,
    ) -> Result<Arc<Table>> {
        let Some(footer_at) = file_size.checked_sub(FOOTER_LEN as u64) else {
            return Err(Error::corruption(
                file_name,
                0,
                format!("file of {file_size} bytes is shorter than the {FOOTER_LEN}-byte footer"),
            ));
        };
        let buf = file.read_at(footer_at, FOOTER_LEN)?;
        if buf.len() != FOOTER_LEN {
            return Err(Error::corruption(
                file_name,
                footer_at,
                format!("truncated file: read {} of {FOOTER_LEN} footer bytes", buf.len()),
            ));
        }
        let footer = Footer::decode(&buf).map_err(|r| Error::corruption(file_name.clone(), footer_at, r))?;
        let reader = BlockReader { file, file_name, checksum: footer.checksum, blocks_end: footer_at };

        let metaindex = Arc::new(reader.read(footer.metaindex, true, None)?);
        let mut meta = BlockIterator::new(metaindex, KeyOrder::Bytewise);
        let mut filter_handle = None;
        let mut partitioned_filter_handle = None;
        let mut properties_handle = None;
        let mut range_del_handle = None;
        meta.seek_to_first();
        while meta.valid() {
            let handle = || {
                BlockHandle::decode_exact(meta.value())
                    .map_err(|r| reader.corruption(footer.metaindex.offset, format!("metaindex: {r}")))
            };
            match meta.key() {
                k if k == FILTER_BLOCK_NAME.as_bytes() => filter_handle = Some(handle()?),
                k if k == PARTITIONED_FILTER_BLOCK_NAME.as_bytes() && footer.partitioned_index() => {
                    partitioned_filter_handle = Some(handle()?)
                }
                k if k == PROPERTIES_BLOCK_NAME.as_bytes() => properties_handle = Some(handle()?),
                k if k == RANGE_DEL_BLOCK_NAME.as_bytes() => range_del_handle = Some(handle()?),
                _ => {}
            }
            meta.next();
        }
        if let Some(r) = meta.corruption() {
            return Err(reader.corruption(footer.metaindex.offset, format!("metaindex: {r}")));
        }

        let properties_handle = properties_handle
            .ok_or_else(|| reader.corruption(footer.metaindex.offset, "metaindex names no properties block"))?;
        let mut properties = TableProperties::decode(Arc::new(reader.read(properties_handle, true, None)?))
            .map_err(|r| reader.corruption(properties_handle.offset, r))?;
        properties.file_size = file_size;
        let cmp = policy.comparator.clone();
        let written_with = properties.comparator_name.as_deref().unwrap_or(crate::comparator::BYTEWISE_NAME);
        if written_with != cmp.name() {
            return Err(Error::invalid(format!(
                "{}: the table's keys are ordered by comparator {written_with}, not by {} as the column family's",
                reader.file_name,
                cmp.name()
            )));
        }
        let range_dels = match (range_del_handle, footer.has_range_deletions()) {
            (Some(h), true) => Some(Arc::new(read_range_dels(&reader, h, &cmp)?)),
            (None, false) => None,
            (Some(h), false) => {
                return Err(reader.corruption(h.offset, "a range-deletion block in a table whose format has none"))
            }
            (None, true) => {
                return Err(reader.corruption(
                    footer.metaindex.offset,
                    "the format version says the table has range deletions but the metaindex names no block",
                ))
            }
        };

        let index_order = if footer.index_key_is_user_key() {
            KeyOrder::UserKeys(cmp.clone())
        } else {
            KeyOrder::Internal(cmp.clone())
        };
        // The top-level filter index of partitioned filters stays with the
        // table (one entry per partition); the partitions go through the cache.
        let filter_partitions = match partitioned_filter_handle {
            Some(h) => Some(Arc::new(reader.read(h, true, None)?.with_key_heads(&index_order))),
            None => None,
        };

        // A cache of capacity 0 caches nothing: read as without one.
        let cache = policy.block_cache.filter(|c| c.capacity() > 0);
        let cache_id = cache.as_ref().map_or(0, |c| policy.cache_id.unwrap_or_else(|| c.new_id()));
        let meta_priority =
            if policy.cache_index_and_filter_blocks_with_high_priority { Priority::High } else { Priority::Low };
        // The index or filter block at `handle`: owned by the table, or in
        // the cache. A table opened again under the id it had (a bounded
        // table cache) takes the block it cached then, verified when it was
        // read, instead of reading it again.
        let meta = |handle: BlockHandle, kind: BlockKind| -> Result<MetaBlock> {
            let Some(cache) = cache.as_ref().filter(|_| policy.cache_index_and_filter_blocks) else {
                return Ok(MetaBlock::Owned(reader.read_meta(handle, kind, &index_order)?));
            };
            let key = CacheKey::new(cache_id, handle.offset);
            if policy.cache_id.is_some() {
                if let Some(h) = cache.lookup(&key) {
                    cache.stats().record_hit(kind);
                    return Ok(if policy.pin_index_and_filter_blocks { MetaBlock::Pinned(h) } else { MetaBlock::Cached(handle) });
                }
            }
            // Counted as a miss, as RocksDB's prefetch through the cache at
            // open counts one.
            cache.stats().record_miss(kind);
            let value = reader.read_meta(handle, kind, &index_order)?;
            match insert_counted(cache.as_ref(), key, value, meta_priority, kind) {
                Ok(h) if policy.pin_index_and_filter_blocks => Ok(MetaBlock::Pinned(h)),
                Ok(_) => Ok(MetaBlock::Cached(handle)),
                Err(e) if policy.pin_index_and_filter_blocks => Err(e),
                // Unpinned, the block is simply read again when first used.
                Err(_) => Ok(MetaBlock::Cached(handle)),
            }
        };
        let filter = match filter_handle {
            Some(h) => Some(meta(h, BlockKind::Filter)?),
            None => None,
        };
        let index = meta(footer.index, BlockKind::Index)?;
        Ok(Arc::new(Table {
            reader,
            file_size,
            index_offset: footer.index.offset,
            partitioned_index: footer.partitioned_index(),
            index_order,
            data_order: KeyOrder::Internal(cmp),
            index,
            filter_partitions,
            filter,
            properties,
            cache,
            cache_id,
            meta_priority,
            auto_readahead: (policy.initial_auto_readahead_size, policy.max_auto_readahead_size),
            range_dels,
        }))
    }

    /// Whether the table may hold a key with prefix `prefix` under the
    /// extractor named `extractor`: false only when its filter holds that
    /// extractor's prefixes and lacks this one. (Partitioned filters are
    /// not asked: a prefix's keys may span partitions.)
    pub fn prefix_may_match(&self, extractor: &str, prefix: &[u8]) -> bool {
        if self.properties.prefix_extractor_name.as_deref() != Some(extractor) || self.filter_partitions.is_some() {
            return true;
        }
        let Some(filter) = &self.filter else { return true };
        self.with_meta_block(filter, BlockKind::Filter, |v| v.filter().is_none_or(|f| f.may_match(prefix)))
            .unwrap_or(true)
    }

    /// True when the filter holds whole keys ([`Table::key_may_match`] then
    /// answers for them).
    pub fn whole_key_filtering(&self) -> bool {
        self.properties.whole_key_filtering
    }

    /// The table's range tombstones, fragmented (`None`: it has none).
    pub fn range_tombstones(&self) -> Option<&Arc<FragmentedTombstones>> {
        self.range_dels.as_ref()
    }

    /// The table's properties; `file_size` is the size given to `open`.
    pub fn properties(&self) -> &TableProperties {
        &self.properties
    }

    /// True when the index keys are user keys (format versions 3 and 4).
    pub fn index_key_is_user_key(&self) -> bool {
        matches!(self.index_order, KeyOrder::UserKeys(_))
    }

    /// Bytes this reader holds outside the block cache: itself, and its
    /// index and filter blocks unless they are in the cache (RocksDB's
    /// `BlockBasedTable::ApproximateMemoryUsage`, summed by the property
    /// `ebb.estimate-table-readers-mem`).
    pub fn memory_usage(&self) -> usize {
        let owned = |b: &MetaBlock| match b {
            MetaBlock::Owned(v) => v.charge(),
            MetaBlock::Pinned(_) | MetaBlock::Cached(_) => 0,
        };
        std::mem::size_of::<Table>()
            + owned(&self.index)
            + self.filter.as_ref().map_or(0, owned)
            + self.filter_partitions.as_ref().map_or(0, |b| b.size())
    }

    /// The name given to `open`, used in errors.
    pub fn file_name(&self) -> &str {
        &self.reader.file_name
    }

    /// The size given to `open`.
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// False only when the bloom filter proves `user_key` absent; true for a
    /// table without a filter, and when the filter cannot be read (the data
    /// block read that follows reports the damage, if any).
    pub fn key_may_match(&self, user_key: &[u8]) -> bool {
        if !self.properties.whole_key_filtering {
            return true;
        }
        if let Some(top) = &self.filter_partitions {
            return match self.filter_partition_for(top, user_key) {
                FilterPartition::PastTheEnd => false,
                FilterPartition::Unknown => true,
                FilterPartition::At(h) => {
                    self.filter_partition(h).map_or(true, |p| p.value().filter().is_none_or(|f| f.may_match(user_key)))
                }
            };
        }
        let Some(filter) = &self.filter else { return true };
        self.filter_may_match(filter, filter_hash(user_key))
    }

    /// Whether the whole-key filter `filter` (the table's own, unpartitioned)
    /// may hold the key whose filter hash is `hash`; a filter that cannot be
    /// read answers true.
    fn filter_may_match(&self, filter: &MetaBlock, hash: u64) -> bool {
        self.with_meta_block(filter, BlockKind::Filter, |v| v.filter().is_none_or(|f| f.may_match_hash(hash)))
            .unwrap_or(true)
    }

    /// Starts [`Table::key_may_match`] for `user_key`, whose
    /// [`filter_hash`](super::filter::filter_hash) is `hash`: for a filter
    /// the table holds (its own, or pinned in the cache), asks the CPU for
    /// the line the probe will read, without waiting for it; a filter found
    /// through the cache (or partitioned) is probed at once, as
    /// `key_may_match` does.
    /// A point read over many L0 tables starts every table's probe before
    /// it reads the first answer, so their memory latencies overlap instead
    /// of following each other. [`FilterProbe::may_match`] gives the answer
    /// `key_may_match` would: false only when the table certainly lacks the
    /// key (a filter that cannot be read answers true).
    pub fn start_filter_probe(&self, user_key: &[u8], hash: u64) -> FilterProbe<'_> {
        let filter = match &self.filter {
            Some(filter) if self.properties.whole_key_filtering && self.filter_partitions.is_none() => filter,
            // No filter, none of whole keys, or partitions: as `key_may_match`.
            _ => return FilterProbe(Probe::Known(self.key_may_match(user_key))),
        };
        if let MetaBlock::Cached(_) = filter {
            // Found through the cache: the lookup (a lock and a hash table)
            // costs more than the line, and a handle held across the batch
            // would cost more than `key_may_match`'s borrow. Answered now.
            return FilterProbe(Probe::Known(self.filter_may_match(filter, hash)));
        }
        match self.meta_block(filter, BlockKind::Filter) {
            Ok(meta) => match meta.value().filter() {
                Some(f) => {
                    f.prefetch_hash(hash);
                    FilterProbe(Probe::Pending(meta, hash))
                }
                None => FilterProbe(Probe::Known(true)),
            },
            Err(_) => FilterProbe(Probe::Known(true)),
        }
    }

    /// [`Table::key_may_match`] for `n` keys (`key(k)`, ascending) given
    /// with their [`filter_hash`](super::filter::filter_hash) (computed once
    /// per key for every table a batch visits): the filter is fetched once
    /// (with partitioned filters, once per partition the keys fall in), every
    /// key's line prefetched, then probed (RocksDB's batched
    /// `KeysMayMatch`). `verdict(k, may_match)` is called for each key in
    /// order.
    pub fn keys_may_match<'k>(
        &self,
        n: usize,
        key: impl Fn(usize) -> &'k [u8],
        hash: impl Fn(usize) -> u64,
        mut verdict: impl FnMut(usize, bool),
    ) {
        if !self.properties.whole_key_filtering {
            (0..n).for_each(|k| verdict(k, true));
            return;
        }
        if let Some(top) = &self.filter_partitions {
            let mut current: Option<(BlockHandle, Option<CacheHandle>)> = None;
            for k in 0..n {
                let may = match self.filter_partition_for(top, key(k)) {
                    FilterPartition::PastTheEnd => false,
                    FilterPartition::Unknown => true,
                    FilterPartition::At(h) => {
                        if current.as_ref().map(|(at, _)| *at) != Some(h) {
                            current = Some((h, self.filter_partition(h).ok()));
                        }
                        match &current {
                            Some((_, Some(p))) => p.value().filter().is_none_or(|f| f.may_match_hash(hash(k))),
                            _ => true,
                        }
                    }
                };
                verdict(k, may);
            }
            return;
        }
        let meta = self.filter.as_ref().map(|f| self.meta_block(f, BlockKind::Filter));
        let filter = match &meta {
            Some(Ok(r)) => r.value().filter(),
            _ => None,
        };
        let Some(filter) = filter else {
            return (0..n).for_each(|k| verdict(k, true));
        };
        (0..n).for_each(|k| filter.prefetch_hash(hash(k)));
        (0..n).for_each(|k| verdict(k, filter.may_match_hash(hash(k))));
    }

    /// The filter partition that holds `user_key`'s hash if the table holds
    /// the key: the one of the index partition holding the key's newest
    /// entry (the top level seeked with the key's smallest internal key).
    fn filter_partition_for(&self, top: &Block, user_key: &[u8]) -> FilterPartition {
        with_internal_key(user_key, MAX_SEQUENCE, KIND_FOR_SEEK, |probe| {
            let mut it = BlockIterator::new(top, self.index_order.clone());
            it.seek(probe);
            if !it.valid() {
                // Past the last partition: no key of the table is as large.
                return if it.corruption().is_some() { FilterPartition::Unknown } else { FilterPartition::PastTheEnd };
            }
            BlockHandle::decode_exact(it.value()).map_or(FilterPartition::Unknown, FilterPartition::At)
        })
    }

    /// The filter partition at `handle`, through the block cache as the
    /// other filter blocks (read verified; inserted with their priority).
    fn filter_partition(&self, handle: BlockHandle) -> Result<CacheHandle> {
        let which = MetaBlock::Cached(handle);
        match self.meta_block(&which, BlockKind::Filter)? {
            MetaRef::Held(h) => Ok(h),
            MetaRef::Borrowed(_) => Err(self.reader.corruption(handle.offset, "filter partition: not a cached block")),
        }
    }

    /// The first entry whose internal key is `>= lookup`, if its user key is
    /// `lookup`'s user key. `lookup` is an internal key, normally
    /// `(user_key, snapshot sequence, KIND_FOR_SEEK)`, so the answer is the
    /// newest version visible at that sequence (value or tombstone).
    pub fn get(&self, rs: &ReadSettings, lookup: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if lookup.len() < TRAILER_LEN {
            return Err(Error::invalid(format!("lookup key of {} bytes is not an internal key", lookup.len())));
        }
        if !self.key_may_match(user_key(lookup)) {
            return Ok(None);
        }
        self.get_past_filter(rs, lookup)
    }

    /// [`Table::get`] for a caller that already asked [`Table::key_may_match`]
    /// (the db counts the filter's verdicts), so the filter is not probed twice.
    pub fn get_past_filter(&self, rs: &ReadSettings, lookup: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.get_past_filter_with(rs, lookup, |k, v| (k.to_vec(), v.to_vec()))
    }

    /// [`Table::get_past_filter`] handing the entry found (internal key,
    /// value) to `found` instead of copying both out. The blocks are borrowed
    /// from the table or the cache for the lookup, not reference-counted: a
    /// point read touches no count that readers on other cores share.
    pub fn get_past_filter_with<R>(
        &self,
        rs: &ReadSettings,
        lookup: &[u8],
        found: impl FnOnce(&[u8], &[u8]) -> R,
    ) -> Result<Option<R>> {
        let Some(handle) = self.data_handle_for(lookup)? else { return Ok(None) };
        let mut found = Some(found);
        let mut search = |block: &Block| -> Result<Option<R>> {
            let Some(found) = found.take() else { return Ok(None) };
            self.search_data_block(block, handle, lookup, |ikey, value| {
                found(ikey, block.contents().get(value).unwrap_or(&[]))
            })
        };
        if let Some(cache) = &self.cache {
            // A hit is searched in place, the entry held only for the search.
            let mut hit = None;
            cache.lookup_with(&CacheKey::new(self.cache_id, handle.offset), &mut |v| {
                if let Some(block) = v.block() {
                    hit = Some(search(block));
                }
            });
            if let Some(r) = hit {
                cache.stats().record_hit(BlockKind::Data);
                return r;
            }
        }
        let (data_block, _data_pin) = self.load_data_block(handle, rs, None)?;
        search(&data_block)
    }

    /// [`Table::get_past_filter`] handing `found` the entry's internal key and
    /// its value as a [`PinnableSlice`] of the data block: no copy of the
    /// value, and the block's cache entry (if cached) referenced until the
    /// slice is dropped (RocksDB's `Get` into a `PinnableSlice`).
    pub fn get_past_filter_pinned<R>(
        &self,
        rs: &ReadSettings,
        lookup: &[u8],
        found: impl FnOnce(&[u8], PinnableSlice) -> R,
    ) -> Result<Option<R>> {
        let Some(handle) = self.data_handle_for(lookup)? else { return Ok(None) };
        let (block, entry) = self.data_block(handle, rs, None)?;
        let pinned = Arc::clone(&block);
        self.search_data_block(&block, handle, lookup, |ikey, value| {
            found(ikey, PinnableSlice::pinned(pinned, entry, value))
        })
    }

    /// [`Table::get_past_filter_with`] for `n` lookups at once, `lookup(k)`
    /// in ascending internal-key order of `k` (RocksDB's batched
    /// `MultiGet`): the index is searched once per lookup, and each data
    /// block is fetched once for every lookup it may answer (searched in
    /// place when cached, as a single lookup's). `found(k, entry)` is called
    /// for lookup `k` when its block holds an entry with its user key (the
    /// entry's internal key and value), or with the error that kept it from
    /// being answered (a damaged index or block fails only the lookups that
    /// needed it).
    pub fn multi_get_past_filter<'k>(
        &self,
        rs: &ReadSettings,
        n: usize,
        lookup: impl Fn(usize) -> &'k [u8],
        mut found: impl FnMut(usize, Result<(&[u8], &[u8])>),
    ) {
        let index_ref = (0..n)
            .map(&lookup)
            .find(|l| l.len() < TRAILER_LEN)
            .map_or(Ok(()), |short| {
                Err(Error::invalid(format!("lookup key of {} bytes is not an internal key", short.len())))
            })
            .and_then(|()| self.meta_block(&self.index, BlockKind::Index));
        let index_block = index_ref.and_then(|r| match r.value().block_arc() {
            Some(b) => Ok(b),
            None => Err(self.index_corruption("cached as a filter")),
        });
        let index_block = match index_block {
            Ok(b) => b,
            Err(e) => return (0..n).for_each(|k| found(k, Err(e.duplicate()))),
        };
        let mut index = self.index_iter(index_block);
        let mut i = 0;
        while i < n {
            index.seek(self, lookup(i));
            if !index.valid() {
                // Past the last block: no later lookup is in this table either.
                if let Some(e) = index.error(self) {
                    (i..n).for_each(|k| found(k, Err(e.duplicate())));
                }
                return;
            }
            // Every lookup up to the block's index key is answered by this
            // block or by none (see `data_handle_for`).
            let mut end = i + 1;
            while end < n && self.index_order.compare(index.key(), lookup(end)).is_ge() {
                end += 1;
            }
            let handle = match BlockHandle::decode_exact(index.value()) {
                Ok(h) => h,
                Err(r) => {
                    let e = self.index_corruption(&r);
                    (i..end).for_each(|k| found(k, Err(e.duplicate())));
                    i = end;
                    continue;
                }
            };
            let mut search = |block: &Block| {
                for k in i..end {
                    let r = self.search_data_block(block, handle, lookup(k), |ikey, value| {
                        found(k, Ok((ikey, block.contents().get(value).unwrap_or(&[]))))
                    });
                    if let Err(e) = r {
                        found(k, Err(e));
                    }
                }
            };
            let mut hit = false;
            if let Some(cache) = &self.cache {
                cache.lookup_with(&CacheKey::new(self.cache_id, handle.offset), &mut |v| {
                    if let Some(block) = v.block() {
                        hit = true;
                        search(block);
                    }
                });
                if hit {
                    cache.stats().record_hit(BlockKind::Data);
                }
            }
            if !hit {
                match self.load_data_block(handle, rs, None) {
                    Ok((block, _entry)) => search(&block),
                    Err(e) => (i..end).for_each(|k| found(k, Err(e.duplicate()))),
                }
            }
            i = end;
        }
    }

    /// The handle of the data block that may hold `lookup`'s user key at or
    /// below its sequence: the first block whose index key is `>= lookup`.
    fn data_handle_for(&self, lookup: &[u8]) -> Result<Option<BlockHandle>> {
        if lookup.len() < TRAILER_LEN {
            return Err(Error::invalid(format!("lookup key of {} bytes is not an internal key", lookup.len())));
        }
        if self.partitioned_index {
            let (block, _pin) = self.index_block()?;
            let mut index = self.index_iter(block);
            index.seek(self, lookup);
            if !index.valid() {
                return index.error(self).map_or(Ok(None), Err);
            }
            return BlockHandle::decode_exact(index.value()).map(Some).map_err(|r| index.entry_corruption(self, &r));
        }
        self.with_meta_block(&self.index, BlockKind::Index, |v| {
            let index_block = v.block().ok_or_else(|| self.index_corruption("cached as a filter"))?;
            let mut index = BlockIterator::new(index_block, self.index_order.clone());
            index.seek(lookup);
            if !index.valid() {
                return match index.corruption() {
                    Some(r) => Err(self.index_corruption(r)),
                    None => Ok(None),
                };
            }
            // The index key of a block is >= its last key and < the next
            // block's first key (by user key alone when the index holds user
            // keys: then no user key spans two blocks), with a key strictly
            // between them when shortened; so if this block holds no entry
            // >= lookup, no later block holds one with lookup's user key.
            BlockHandle::decode_exact(index.value()).map(Some).map_err(|r| self.index_corruption(&r))
        })?
    }

    /// The first entry of `block` (read from `handle`) at or after `lookup`,
    /// if it has `lookup`'s user key: its internal key and where its value
    /// sits in the block.
    fn search_data_block<R>(
        &self,
        block: &Block,
        handle: BlockHandle,
        lookup: &[u8],
        found: impl FnOnce(&[u8], std::ops::Range<usize>) -> R,
    ) -> Result<Option<R>> {
        let mut data = BlockIterator::new(block, self.data_order.clone());
        data.seek(lookup);
        if let Some(r) = data.corruption() {
            return Err(self.reader.corruption(handle.offset, r));
        }
        if data.valid() && user_key(data.key()) == user_key(lookup) {
            Ok(Some(found(data.key(), data.value_range())))
        } else {
            Ok(None)
        }
    }

    /// An iterator over every entry, unpositioned, reading ahead as
    /// `rs.readahead` says.
    pub fn iter(self: &Arc<Self>, rs: ReadSettings) -> TableIterator {
        if rs.for_compaction {
            self.reader.file.advise(Access::Sequential);
        }
        let prefetch = match rs.readahead {
            Readahead::Fixed(0) => None,
            Readahead::Fixed(size) => Some(PrefetchBuffer::fixed(size)),
            Readahead::Auto if self.auto_readahead.1 == 0 => None,
            Readahead::Auto => Some(PrefetchBuffer::auto(self.auto_readahead.0, self.auto_readahead.1)),
        };
        TableIterator {
            prefetch,
            index: None,
            index_pin: None,
            table: self.clone(),
            rs,
            data: None,
            data_pin: None,
            data_handle: BlockHandle::default(),
            error: None,
            prepared: None,
            prepared_target: crate::sst::block::KeyBuf::new(),
        }
    }

    /// The approximate file offset where entries `>= internal_key` begin: the
    /// offset of the data block that would hold it, or the end of the data
    /// blocks when it is past the last key; 0 when a cached index block has
    /// been evicted and cannot be read again.
    pub fn approximate_offset_of(&self, internal_key: &[u8]) -> u64 {
        if internal_key.len() < TRAILER_LEN {
            return 0;
        }
        let Ok((index_block, _index_pin)) = self.index_block() else { return 0 };
        let mut index = self.index_iter(index_block);
        index.seek(self, internal_key);
        if index.valid() {
            if let Ok(h) = BlockHandle::decode_exact(index.value()) {
                return h.offset;
            }
        }
        self.properties.data_size
    }

    fn index_corruption(&self, reason: &str) -> Error {
        self.reader.corruption(self.index_offset, format!("index block: {reason}"))
    }

    /// The index or filter block `which`: the table's own, its pinned one, or
    /// one from the cache (read from the file and inserted on a miss).
    fn meta_block<'a>(&'a self, which: &'a MetaBlock, kind: BlockKind) -> Result<MetaRef<'a>> {
        let handle = match which {
            MetaBlock::Owned(v) => return Ok(MetaRef::Borrowed(v)),
            MetaBlock::Pinned(h) => return Ok(MetaRef::Borrowed(h.value())),
            MetaBlock::Cached(handle) => *handle,
        };
        let Some(cache) = &self.cache else {
            return Ok(MetaRef::Held(CacheHandle::uncached(self.reader.read_meta(handle, kind, &self.index_order)?)));
        };
        if let Some(h) = cache.lookup(&CacheKey::new(self.cache_id, handle.offset)) {
            cache.stats().record_hit(kind);
            return Ok(MetaRef::Held(h));
        }
        self.load_meta(cache.as_ref(), handle, kind).map(MetaRef::Held)
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

    /// Runs `f` on the index or filter block `which`, as [`Table::meta_block`]
    /// finds it. A cached block is borrowed in place for the call
    /// ([`BlockCache::lookup_with`]: no handle, so concurrent point reads do
    /// not all bump one shared reference count); on a miss it is read and
    /// inserted as `meta_block` does.
    fn with_meta_block<R>(&self, which: &MetaBlock, kind: BlockKind, f: impl Fn(&CacheValue) -> R) -> Result<R> {
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

    /// A cursor over the index entries, given the index block (with a
    /// partitioned index, the top level).
    fn index_iter(&self, index_block: Arc<Block>) -> IndexIter {
        let top = BlockIterator::new(index_block, self.index_order.clone());
        if self.partitioned_index {
            IndexIter::Partitioned(Box::new(PartitionedIndexIter {
                top,
                part: None,
                part_pin: None,
                part_handle: BlockHandle::default(),
                error: None,
            }))
        } else {
            IndexIter::Flat(top)
        }
    }

    /// The index partition at `handle`, through the block cache as the other
    /// index blocks (read verified; inserted with their priority), and the
    /// handle that keeps it cached while it is used.
    fn index_partition(&self, handle: BlockHandle) -> Result<(Arc<Block>, Option<CacheHandle>)> {
        let which = MetaBlock::Cached(handle);
        let r = self.meta_block(&which, BlockKind::Index)?;
        let block = r
            .value()
            .block_arc()
            .ok_or_else(|| self.reader.corruption(handle.offset, "index partition: cached as a filter"))?;
        Ok((block, r.into_handle()))
    }

    /// The index block, and the handle that keeps it cached while it is used.
    fn index_block(&self) -> Result<(Arc<Block>, Option<CacheHandle>)> {
        let r = self.meta_block(&self.index, BlockKind::Index)?;
        let block = r.value().block_arc().ok_or_else(|| self.index_corruption("cached as a filter"))?;
        Ok((block, r.into_handle()))
    }

    /// The data block at `handle`, from the cache when it is there, and the
    /// handle that keeps it cached while it is used. A block not in the cache
    /// is read through `prefetch` when one is given.
    fn data_block(
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
    fn load_data_block(
        &self,
        handle: BlockHandle,
        rs: &ReadSettings,
        prefetch: Option<&mut PrefetchBuffer>,
    ) -> Result<(Arc<Block>, Option<CacheHandle>)> {
        let Some(cache) = &self.cache else {
            return Ok((Arc::new(self.reader.read_data(handle, rs.verify_checksums, prefetch)?.0), None));
        };
        cache.stats().record_miss(BlockKind::Data);
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
        let key = CacheKey::new(self.cache_id, handle.offset);
        let h =
            insert_counted(cache.as_ref(), key, CacheValue::from_arc(Arc::clone(&block)), Priority::Low, BlockKind::Data)?;
        Ok((block, Some(h)))
    }
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

/// Where a key's filter partition is.
enum FilterPartition {
    /// The key is larger than every key of the table.
    PastTheEnd,
    /// The top-level filter index is damaged: the filter cannot rule out.
    Unknown,
    At(BlockHandle),
}

/// A cursor over a table's index entries (index key → data block handle):
/// the one index block, or the partitions under a top-level index. Moves take
/// the table, which loads partitions.
enum IndexIter {
    Flat(BlockIterator),
    Partitioned(Box<PartitionedIndexIter>),
}

/// The partitioned index as one sequence of entries: the top level picks the
/// partition, the partition's iterator walks its entries (RocksDB's
/// `PartitionedIndexIterator`).
struct PartitionedIndexIter {
    top: BlockIterator,
    part: Option<BlockIterator>,
    /// Keeps the cached partition `part` iterates referenced.
    part_pin: Option<CacheHandle>,
    /// Handle of the partition `part` iterates.
    part_handle: BlockHandle,
    error: Option<Error>,
}

impl IndexIter {
    fn valid(&self) -> bool {
        match self {
            IndexIter::Flat(it) => it.valid(),
            IndexIter::Partitioned(p) => p.error.is_none() && p.part.as_ref().is_some_and(BlockIterator::valid),
        }
    }

    fn key(&self) -> &[u8] {
        match self {
            IndexIter::Flat(it) => it.key(),
            IndexIter::Partitioned(p) => p.part.as_ref().map_or(&[][..], BlockIterator::key),
        }
    }

    fn value(&self) -> &[u8] {
        match self {
            IndexIter::Flat(it) => it.value(),
            IndexIter::Partitioned(p) => p.part.as_ref().map_or(&[][..], BlockIterator::value),
        }
    }

    /// Why the cursor stopped short: a damaged index block or partition, or
    /// a partition that could not be read; `None` at a clean end.
    fn error(&self, table: &Table) -> Option<Error> {
        match self {
            IndexIter::Flat(it) => it.corruption().map(|r| table.index_corruption(r)),
            IndexIter::Partitioned(p) => p.error.as_ref().map(Error::duplicate),
        }
    }

    /// The error for an entry whose value is not a block handle.
    fn entry_corruption(&self, table: &Table, reason: &str) -> Error {
        match self {
            IndexIter::Flat(_) => table.index_corruption(reason),
            IndexIter::Partitioned(p) => {
                table.reader.corruption(p.part_handle.offset, format!("index partition: {reason}"))
            }
        }
    }

    fn seek(&mut self, table: &Table, target: &[u8]) {
        match self {
            IndexIter::Flat(it) => it.seek(target),
            IndexIter::Partitioned(p) => {
                p.top.seek(target);
                if p.load(table) {
                    if let Some(part) = &mut p.part {
                        part.seek(target);
                    }
                }
                p.skip(table, true);
            }
        }
    }

    fn seek_to_first(&mut self, table: &Table) {
        match self {
            IndexIter::Flat(it) => it.seek_to_first(),
            IndexIter::Partitioned(p) => {
                p.top.seek_to_first();
                if p.load(table) {
                    if let Some(part) = &mut p.part {
                        part.seek_to_first();
                    }
                }
                p.skip(table, true);
            }
        }
    }

    fn seek_to_last(&mut self, table: &Table) {
        match self {
            IndexIter::Flat(it) => it.seek_to_last(),
            IndexIter::Partitioned(p) => {
                p.top.seek_to_last();
                if p.load(table) {
                    if let Some(part) = &mut p.part {
                        part.seek_to_last();
                    }
                }
                p.skip(table, false);
            }
        }
    }

    fn next(&mut self, table: &Table) {
        match self {
            IndexIter::Flat(it) => it.next(),
            IndexIter::Partitioned(p) => {
                if let Some(part) = &mut p.part {
                    part.next();
                }
                p.skip(table, true);
            }
        }
    }

    fn prev(&mut self, table: &Table) {
        match self {
            IndexIter::Flat(it) => it.prev(),
            IndexIter::Partitioned(p) => {
                if let Some(part) = &mut p.part {
                    part.prev();
                }
                p.skip(table, false);
            }
        }
    }
}

impl PartitionedIndexIter {
    /// Points `part` at the partition the top-level entry names (reusing it
    /// when it is already there). False at the top level's end or on error.
    fn load(&mut self, table: &Table) -> bool {
        if self.error.is_some() {
            return false;
        }
        if !self.top.valid() {
            self.part = None;
            self.part_pin = None;
            if let Some(r) = self.top.corruption() {
                self.error = Some(table.index_corruption(r));
            }
            return false;
        }
        let handle = match BlockHandle::decode_exact(self.top.value()) {
            Ok(h) => h,
            Err(r) => return self.fail(table.index_corruption(&r)),
        };
        if self.part.is_some() && self.part_handle == handle {
            return true;
        }
        match table.index_partition(handle) {
            Ok((block, pin)) => {
                self.part = Some(BlockIterator::new(block, table.index_order.clone()));
                self.part_pin = pin;
                self.part_handle = handle;
                true
            }
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, e: Error) -> bool {
        self.part = None;
        self.part_pin = None;
        self.error = Some(e);
        false
    }

    /// True when the partition iterator is positioned; records its corruption.
    fn positioned(&mut self, table: &Table) -> bool {
        match &self.part {
            Some(p) if p.valid() => true,
            Some(p) => {
                if let Some(r) = p.corruption() {
                    let e = table.reader.corruption(self.part_handle.offset, format!("index partition: {r}"));
                    self.fail(e);
                }
                false
            }
            None => false,
        }
    }

    /// Moves past partitions with no entry where the move left off
    /// (forward: to the next partition's first entry; else to the previous
    /// one's last).
    fn skip(&mut self, table: &Table, forward: bool) {
        while self.error.is_none() && !self.positioned(table) {
            if !self.top.valid() {
                self.part = None;
                return;
            }
            if forward {
                self.top.next();
            } else {
                self.top.prev();
            }
            if !self.load(table) {
                return;
            }
            if let Some(part) = &mut self.part {
                if forward {
                    part.seek_to_first();
                } else {
                    part.seek_to_last();
                }
            }
        }
    }
}

/// The prefix a bounded prefix seek (docs/data_model.md, "Prefixes") is
/// after, shared by an iterator over the database with its table
/// iterators: set only for the duration of that seek, so tables whose
/// filter lacks the prefix are skipped then and at no other positioning.
pub struct SeekPrefix {
    extractor: String,
    current: parking_lot::Mutex<Option<Vec<u8>>>,
    /// Tables asked, and ruled out, since [`SeekPrefix::take_counts`].
    checked: std::sync::atomic::AtomicU64,
    useful: std::sync::atomic::AtomicU64,
    /// Bumped by every [`SeekPrefix::set`]: an answer of
    /// [`SeekPrefix::excludes`] holds while it is unchanged.
    generation: std::sync::atomic::AtomicU64,
}

impl SeekPrefix {
    /// Shared state for prefixes of the extractor named `extractor`.
    pub fn new(extractor: &str) -> Self {
        SeekPrefix {
            extractor: extractor.to_string(),
            current: parking_lot::Mutex::new(None),
            checked: Default::default(),
            useful: Default::default(),
            generation: Default::default(),
        }
    }

    /// Changes with every [`SeekPrefix::set`].
    fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Tables asked about a prefix and tables ruled out, since the last call.
    pub fn take_counts(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.checked.swap(0, Relaxed), self.useful.swap(0, Relaxed))
    }

    /// Sets (or, with `None`, clears) the prefix of the seek under way.
    pub fn set(&self, prefix: Option<Vec<u8>>) {
        let mut current = self.current.lock();
        *current = prefix;
        self.generation.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// True when a seek is for a prefix `table`'s filter says it lacks.
    fn excludes(&self, table: &Table) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let current = self.current.lock();
        let Some(p) = current.as_ref() else { return false };
        self.checked.fetch_add(1, Relaxed);
        let excluded = !table.prefix_may_match(&self.extractor, p);
        if excluded {
            self.useful.fetch_add(1, Relaxed);
        }
        excluded
    }
}

/// A [`TableIterator`] that a bounded prefix seek skips when the table's
/// filter lacks the prefix: invalid after such a seek, as if the table
/// held nothing at or after the target (the seek's caller stops at the
/// prefix's end, so nothing past it is missed).
pub struct PrefixCheckedIterator {
    inner: TableIterator,
    prefix: Arc<SeekPrefix>,
    skipped: bool,
    /// Whether a prepared seek found the table excluded, and for which
    /// prefix ([`SeekPrefix::generation`]).
    prepared_skip: Option<(bool, u64)>,
}

impl PrefixCheckedIterator {
    /// Wraps `inner`, which iterates its table.
    pub fn new(inner: TableIterator, prefix: Arc<SeekPrefix>) -> Self {
        PrefixCheckedIterator { inner, prefix, skipped: false, prepared_skip: None }
    }
}

impl InternalIterator for PrefixCheckedIterator {
    fn valid(&self) -> bool {
        !self.skipped && self.inner.valid()
    }
    fn seek_to_first(&mut self) {
        self.skipped = false;
        self.prepared_skip = None;
        self.inner.seek_to_first();
    }
    fn seek_to_last(&mut self) {
        self.skipped = false;
        self.prepared_skip = None;
        self.inner.seek_to_last();
    }
    fn seek(&mut self, target: &[u8]) {
        // A prepared answer holds while the prefix is the one it was for.
        self.skipped = match self.prepared_skip.take() {
            Some((skipped, generation)) if generation == self.prefix.generation() => skipped,
            _ => self.prefix.excludes(&self.inner.table),
        };
        if !self.skipped {
            self.inner.seek(target);
        }
    }
    fn prepare_seek(&mut self, target: &[u8]) {
        let generation = self.prefix.generation();
        let skipped = self.prefix.excludes(&self.inner.table);
        self.prepared_skip = Some((skipped, generation));
        if !skipped {
            self.inner.prepare_seek(target);
        }
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.prepared_skip = None;
        self.skipped = self.prefix.excludes(&self.inner.table);
        if !self.skipped {
            self.inner.seek_for_prev(target);
        }
    }
    fn next(&mut self) {
        self.prepared_skip = None;
        self.inner.next();
    }
    fn prev(&mut self) {
        self.prepared_skip = None;
        self.inner.prev();
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn status(&self) -> Result<()> {
        if self.skipped {
            return Ok(());
        }
        self.inner.status()
    }
}

/// A two-level iterator over a table: the index block picks the data block,
/// the data block iterator walks its entries. Yields every entry, tombstones
/// and old versions included.
pub struct TableIterator {
    table: Arc<Table>,
    rs: ReadSettings,
    /// Loaded on first positioning.
    index: Option<IndexIter>,
    /// Keeps a cached index block referenced while the iterator lives.
    index_pin: Option<CacheHandle>,
    data: Option<BlockIterator>,
    /// Keeps the cached block `data` iterates referenced.
    data_pin: Option<CacheHandle>,
    /// Handle of the block `data` iterates.
    data_handle: BlockHandle,
    /// Reads data blocks ahead; `None` when readahead is off.
    prefetch: Option<PrefetchBuffer>,
    error: Option<Error>,
    /// Set by `prepare_seek` to whether it loaded a data block: the index
    /// and the block are positioned for `prepared_target`. Any other call
    /// clears it.
    prepared: Option<bool>,
    prepared_target: crate::sst::block::KeyBuf,
}

impl TableIterator {
    /// Loads the index block on first use; false (with the error recorded)
    /// when it cannot be read.
    fn ensure_index(&mut self) -> bool {
        if self.index.is_none() {
            match self.table.index_block() {
                Ok((block, pin)) => {
                    self.index = Some(self.table.index_iter(block));
                    self.index_pin = pin;
                }
                Err(e) => {
                    return self.fail(e);
                }
            }
        }
        true
    }

    fn clear_data(&mut self) {
        self.data = None;
        self.data_pin = None;
    }

    /// Points `data` at the block the index entry names (reusing it when it is
    /// already there). False when the index is exhausted or on error.
    fn load_data_block(&mut self) -> bool {
        let decoded = match &self.index {
            Some(index) if index.valid() => {
                BlockHandle::decode_exact(index.value()).map_err(|r| index.entry_corruption(&self.table, &r))
            }
            Some(index) => {
                let error = index.error(&self.table);
                self.clear_data();
                if error.is_some() {
                    self.error = error;
                }
                return false;
            }
            None => {
                self.clear_data();
                return false;
            }
        };
        let handle = match decoded {
            Ok(h) => h,
            Err(e) => return self.fail(e),
        };
        if self.data.is_some() && self.data_handle == handle {
            return true;
        }
        match self.table.data_block(handle, &self.rs, self.prefetch.as_mut()) {
            Ok((block, pin)) => {
                let buf = self.data.take().map(BlockIterator::into_key_buffer).unwrap_or_default();
                self.data = Some(BlockIterator::with_key_buffer(block, self.table.data_order.clone(), buf));
                self.data_pin = pin;
                self.data_handle = handle;
                true
            }
            Err(e) => self.fail(e),
        }
    }

    fn fail(&mut self, e: Error) -> bool {
        self.clear_data();
        self.error = Some(e);
        false
    }

    /// True when the data iterator is positioned; records its corruption.
    fn data_positioned(&mut self) -> bool {
        match &self.data {
            Some(d) if d.valid() => true,
            Some(d) => {
                if let Some(r) = d.corruption() {
                    let e = self.table.reader.corruption(self.data_handle.offset, r);
                    self.fail(e);
                }
                false
            }
            None => false,
        }
    }

    fn skip_empty_blocks_forward(&mut self) {
        while !self.data_positioned() && self.error.is_none() {
            match self.index.as_mut() {
                Some(index) if index.valid() => index.next(&self.table),
                _ => {
                    self.clear_data();
                    return;
                }
            }
            if !self.load_data_block() {
                return;
            }
            if let Some(d) = &mut self.data {
                d.seek_to_first();
            }
        }
    }

    fn skip_empty_blocks_backward(&mut self) {
        while !self.data_positioned() && self.error.is_none() {
            match self.index.as_mut() {
                Some(index) if index.valid() => index.prev(&self.table),
                _ => {
                    self.clear_data();
                    return;
                }
            }
            if !self.load_data_block() {
                return;
            }
            if let Some(d) = &mut self.data {
                d.seek_to_last();
            }
        }
    }

    fn check_target(&mut self, target: &[u8]) -> bool {
        if self.error.is_some() {
            return false;
        }
        if target.len() < TRAILER_LEN {
            let e = Error::invalid(format!("seek target of {} bytes is not an internal key", target.len()));
            return self.fail(e);
        }
        true
    }
}

impl InternalIterator for TableIterator {
    fn valid(&self) -> bool {
        self.error.is_none() && self.data.as_ref().is_some_and(BlockIterator::valid)
    }

    fn seek_to_first(&mut self) {
        self.prepared = None;
        if self.error.is_some() {
            return;
        }
        if !self.ensure_index() {
            return;
        }
        let Some(index) = self.index.as_mut() else { return };
        index.seek_to_first(&self.table);
        if self.load_data_block() {
            if let Some(d) = &mut self.data {
                d.seek_to_first();
            }
        }
        self.skip_empty_blocks_forward();
    }

    fn seek_to_last(&mut self) {
        self.prepared = None;
        if self.error.is_some() {
            return;
        }
        if !self.ensure_index() {
            return;
        }
        let Some(index) = self.index.as_mut() else { return };
        index.seek_to_last(&self.table);
        if self.load_data_block() {
            if let Some(d) = &mut self.data {
                d.seek_to_last();
            }
        }
        self.skip_empty_blocks_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        let prepared = self.prepared.take().filter(|_| self.prepared_target[..] == *target);
        if !self.check_target(target) {
            return;
        }
        let loaded = if let Some(loaded) = prepared {
            loaded
        } else {
            if !self.ensure_index() {
                return;
            }
            let Some(index) = self.index.as_mut() else { return };
            index.seek(&self.table, target);
            self.load_data_block()
        };
        if loaded {
            if let Some(d) = &mut self.data {
                d.seek(target);
            }
        }
        self.skip_empty_blocks_forward();
    }

    /// The index search and the data block's fetch of a seek to `target`
    /// (a block found in the block cache has its bytes' loads issued,
    /// [`Block::prefetch`]); the seek that follows seeks in the block.
    fn prepare_seek(&mut self, target: &[u8]) {
        self.prepared = None;
        if !self.check_target(target) || !self.ensure_index() {
            return;
        }
        let Some(index) = self.index.as_mut() else { return };
        index.seek(&self.table, target);
        self.prepared = Some(self.load_data_block());
        self.prepared_target.clear();
        self.prepared_target.extend_from_slice(target);
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.prepared = None;
        if !self.check_target(target) {
            return;
        }
        // The first block whose index key is >= target may hold the answer;
        // if it holds nothing <= target, the previous block's last entry is it.
        if !self.ensure_index() {
            return;
        }
        let Some(index) = self.index.as_mut() else { return };
        index.seek(&self.table, target);
        if !index.valid() && index.error(&self.table).is_none() {
            index.seek_to_last(&self.table);
        }
        if self.load_data_block() {
            if let Some(d) = &mut self.data {
                d.seek_for_prev(target);
            }
        }
        self.skip_empty_blocks_backward();
    }

    fn next(&mut self) {
        self.prepared = None;
        if !self.valid() {
            return;
        }
        if let Some(d) = &mut self.data {
            d.next();
        }
        self.skip_empty_blocks_forward();
    }

    fn prev(&mut self) {
        self.prepared = None;
        if !self.valid() {
            return;
        }
        if let Some(d) = &mut self.data {
            d.prev();
        }
        self.skip_empty_blocks_backward();
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[][..], BlockIterator::key)
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[][..], BlockIterator::value)
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}

/// Reads and checks a range-deletion block: each entry the start's
/// internal key (kind `RangeDeletion`) and the end, no end before its start.
fn read_range_dels(reader: &BlockReader, handle: BlockHandle, cmp: &UserComparator) -> Result<FragmentedTombstones> {
    let block = Arc::new(reader.read(handle, true, None)?);
    let mut it = BlockIterator::new(block, KeyOrder::Internal(cmp.clone()));
    let mut list = Vec::new();
    it.seek_to_first();
    while it.valid() {
        let bad = |r: &str| reader.corruption(handle.offset, format!("range-deletion block: {r}"));
        let p = parse_internal_key(it.key()).ok_or_else(|| bad("unparsable internal key"))?;
        if p.kind != ValueKind::RangeDeletion {
            return Err(bad(&format!("an entry of kind {:?}", p.kind)));
        }
        if cmp.lt(it.value(), p.user_key) {
            return Err(bad("a range tombstone ends before it starts"));
        }
        list.push(RangeTombstone { start: p.user_key.to_vec(), end: it.value().to_vec(), seq: p.seq });
        it.next();
    }
    if let Some(r) = it.corruption() {
        return Err(reader.corruption(handle.offset, format!("range-deletion block: {r}")));
    }
    Ok(FragmentedTombstones::with_comparator(cmp, &list))
}

#[cfg(test)]
mod tests {
    use std::cmp::Ordering;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering as AtomicOrdering};

    use parking_lot::Mutex;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::cache::{new_cache, CacheOptions, CacheType, LruCache};
    use crate::fs::WritableFile;
    use crate::iter::VecIterator;
    use crate::key::{compare_bytewise_internal_keys, make_internal_key, ValueKind, KIND_FOR_SEEK, MAX_SEQUENCE};
    use crate::sst::block_builder::BlockBuilder;
    use crate::sst::table_builder::{TableBuilder, TableBuilderOptions};
    use crate::util::checksum::mask;
    use crate::util::compression::CompressionType;

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    /// A writable file in memory that records whether it was synced.
    struct MemWritable {
        data: Arc<Mutex<Vec<u8>>>,
        synced: Arc<AtomicBool>,
        fail_after: Option<usize>,
    }

    impl WritableFile for MemWritable {
        fn append(&mut self, data: &[u8]) -> Result<()> {
            let mut d = self.data.lock();
            if self.fail_after.is_some_and(|limit| d.len() + data.len() > limit) {
                return Err(Error::io("append", "mem.sst", std::io::Error::other("disk full")));
            }
            d.extend_from_slice(data);
            Ok(())
        }
        fn flush(&mut self) -> Result<()> {
            Ok(())
        }
        fn sync(&mut self) -> Result<()> {
            self.synced.store(true, AtomicOrdering::SeqCst);
            Ok(())
        }
        fn size(&self) -> u64 {
            self.data.lock().len() as u64
        }
    }

    /// A read-only file in memory that counts its reads and records hints.
    struct MemRandom {
        data: Vec<u8>,
        reads: AtomicUsize,
        advised: Mutex<Vec<Access>>,
    }

    impl MemRandom {
        fn new(data: Vec<u8>) -> Arc<MemRandom> {
            Arc::new(MemRandom { data, reads: AtomicUsize::new(0), advised: Mutex::new(Vec::new()) })
        }
    }

    impl RandomAccessFile for MemRandom {
        fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
            self.reads.fetch_add(1, AtomicOrdering::SeqCst);
            let start = usize::try_from(offset).unwrap_or(usize::MAX).min(self.data.len());
            let end = start.saturating_add(len).min(self.data.len());
            Ok(self.data[start..end].to_vec())
        }
        fn size(&self) -> Result<u64> {
            Ok(self.data.len() as u64)
        }
        fn advise(&self, access: Access) {
            self.advised.lock().push(access);
        }
    }

    fn opts(compression: CompressionType, checksum: ChecksumType, block_size: usize) -> TableBuilderOptions {
        TableBuilderOptions {
            block_size,
            block_restart_interval: 4,
            index_block_restart_interval: 16,
            block_size_deviation: 10,
            bloom_bits_per_key: 10,
            checksum,
            compression,
            column_family: 0,
            column_family_name: None,
            index_partition_size: None,
            partition_filters: false,
            user_key_index: true,
            whole_key_filtering: true,
            prefix_extractor: None,
            comparator: UserComparator::BYTEWISE,
            collectors: Default::default(),
        }
    }

    fn build(entries: &[(Vec<u8>, Vec<u8>)], o: TableBuilderOptions) -> (Vec<u8>, TableProperties) {
        let data = Arc::new(Mutex::new(Vec::new()));
        let synced = Arc::new(AtomicBool::new(false));
        let file = MemWritable { data: data.clone(), synced: synced.clone(), fail_after: None };
        let mut b = TableBuilder::new(Box::new(file), o, "test.sst".into());
        for (k, v) in entries {
            b.add(k, v).unwrap();
        }
        assert_eq!(b.num_entries(), entries.len() as u64);
        let props = b.finish().unwrap();
        assert!(synced.load(AtomicOrdering::SeqCst), "finish did not sync");
        let bytes = data.lock().clone();
        assert_eq!(props.file_size, bytes.len() as u64);
        (bytes, props)
    }

    /// The sizes of a table's data blocks as stored, in order (the table
    /// uncompressed, its index in one block).
    fn data_block_sizes(t: &Table) -> Vec<u64> {
        let (index, _) = t.index_block().unwrap();
        let mut it = BlockIterator::new(index, KeyOrder::Bytewise);
        it.seek_to_first();
        let mut sizes = Vec::new();
        while it.valid() {
            sizes.push(BlockHandle::decode_exact(it.value()).unwrap().size);
            it.next();
        }
        sizes
    }

    #[test]
    fn data_blocks_are_cut_within_block_size_deviation_as_rocksdb_cuts_them() {
        // Entries of 127 bytes (no key sharing at restart interval 1) and a
        // 4-byte restart each: 31 make 4,065 bytes, 32 make 4,196.
        let fixed: Entries =
            (0..3000u32).map(|i| (ikey(format!("key{i:013}").as_bytes(), 1, ValueKind::Value), vec![b'v'; 100])).collect();
        let with = |deviation: u32, block_size: usize| TableBuilderOptions {
            block_size,
            block_restart_interval: 1,
            block_size_deviation: deviation,
            ..opts(CompressionType::None, ChecksumType::Crc32c, block_size)
        };
        for (deviation, want) in [(10, 4065), (0, 4196), (101, 4196)] {
            let (bytes, _) = build(&fixed, with(deviation, 4096));
            let t = open(&bytes).unwrap();
            let sizes = data_block_sizes(&t);
            assert!(sizes[..sizes.len() - 1].iter().all(|&s| s == want), "deviation {deviation}: blocks of {sizes:?}");
            assert_eq!(scan_forward(&t, ReadSettings::default()).unwrap(), fixed);
        }
        // Entries of random sizes: a block other than the last is closed
        // only once it holds more than (100 - deviation) % of block_size,
        // and it goes past block_size only by an entry added while it held
        // no more than that.
        let mut rng = rand::rngs::StdRng::seed_from_u64(41);
        let random: Entries = (0..4000u32)
            .map(|i| {
                let value = vec![b'r'; rng.gen_range(0..700)];
                (ikey(format!("k{i:08}").as_bytes(), 1, ValueKind::Value), value)
            })
            .collect();
        let block_size = 2048;
        let over = |deviation: u32| {
            let (bytes, _) = build(&random, with(deviation, block_size as usize));
            data_block_sizes(&open(&bytes).unwrap()).iter().filter(|&&s| s > block_size).count()
        };
        let over_without = over(0);
        for deviation in [5, 10, 30] {
            let limit = (block_size * (100 - deviation as u64)).div_ceil(100);
            let (bytes, _) = build(&random, with(deviation, block_size as usize));
            let t = open(&bytes).unwrap();
            let sizes = data_block_sizes(&t);
            for &s in &sizes[..sizes.len() - 1] {
                assert!(s > limit, "deviation {deviation}: a block of {s} bytes closed at or under {limit}");
                // Past block_size by at most one entry (12 bytes of lengths
                // and restart, a 17-byte key, a value under 700 bytes).
                assert!(s <= limit + 12 + 17 + 700, "deviation {deviation}: a block of {s} bytes");
            }
            let over_with = sizes.iter().filter(|&&s| s > block_size).count();
            assert!(over_with < over_without, "deviation {deviation}: {over_with} blocks past block_size, {over_without} without");
            assert_eq!(scan_forward(&t, ReadSettings::default()).unwrap(), random);
        }
    }

    fn open(bytes: &[u8]) -> Result<Arc<Table>> {
        Table::open(MemRandom::new(bytes.to_vec()), bytes.len() as u64, "test.sst".into(), None)
    }

    fn ikey(user_key: &[u8], seq: u64, kind: ValueKind) -> Vec<u8> {
        make_internal_key(user_key, seq, kind)
    }

    /// Distinct user keys, every third with an older version, every seventh
    /// version a tombstone; values compress well.
    fn sample_entries(n: usize) -> Entries {
        let mut out = Vec::new();
        for i in 0..n {
            let uk = format!("key{i:06}").into_bytes();
            let versions: &[u64] = if i % 3 == 0 { &[20, 10] } else { &[15] };
            for &seq in versions {
                let kind = if (i + seq as usize).is_multiple_of(7) { ValueKind::Deletion } else { ValueKind::Value };
                let value = match kind {
                    ValueKind::Deletion | ValueKind::SingleDeletion | ValueKind::RangeDeletion => Vec::new(),
                    ValueKind::Value | ValueKind::BlobIndex | ValueKind::Merge => {
                        format!("value-{i}-{seq}-").repeat(1 + i % 5).into_bytes()
                    }
                };
                out.push((ikey(&uk, seq, kind), value));
            }
        }
        out
    }

    fn scan_forward(t: &Arc<Table>, rs: ReadSettings) -> Result<Entries> {
        let mut it = t.iter(rs);
        let mut out = Vec::new();
        it.seek_to_first();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status().map(|()| out)
    }

    fn scan_backward(t: &Arc<Table>, rs: ReadSettings) -> Result<Entries> {
        let mut it = t.iter(rs);
        let mut out = Vec::new();
        it.seek_to_last();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        out.reverse();
        it.status().map(|()| out)
    }

    #[test]
    fn round_trip_for_every_compression_and_checksum() {
        let entries = sample_entries(3000);
        let rs = ReadSettings::default();
        let (plain, _) = build(&entries, opts(CompressionType::None, ChecksumType::Crc32c, 1024));
        let plain_data_size = open(&plain).unwrap().properties().data_size;
        for compression in [CompressionType::None, CompressionType::Snappy, CompressionType::Lz4, CompressionType::Zstd]
        {
            for checksum in [ChecksumType::Crc32c, ChecksumType::Xxh3] {
                let ctx = format!("{compression:?}/{checksum:?}");
                let (bytes, built) = build(&entries, opts(compression, checksum, 1024));
                let t = open(&bytes).unwrap();
                let p = t.properties();
                assert_eq!(p, &built, "{ctx}: properties read back differ from those written");
                assert_eq!(p.num_entries, entries.len() as u64);
                assert_eq!(p.num_deletions, entries.iter().filter(|(k, _)| k[k.len() - 8] == 0).count() as u64);
                assert_eq!(p.raw_key_size, entries.iter().map(|(k, _)| k.len() as u64).sum::<u64>());
                assert_eq!(p.raw_value_size, entries.iter().map(|(_, v)| v.len() as u64).sum::<u64>());
                assert_eq!(
                    (p.smallest_key.as_slice(), p.largest_key.as_slice()),
                    (&entries[0].0[..], &entries.last().unwrap().0[..])
                );
                assert_eq!((p.smallest_seqno, p.largest_seqno), (10, 20));
                assert_eq!((p.compression, p.checksum), (compression, checksum));
                assert!(p.num_data_blocks > 10, "{ctx}");
                assert!(p.filter_size > 0 && p.index_size > 0);
                assert!(p.data_size + p.filter_size + p.index_size + FOOTER_LEN as u64 <= p.file_size);
                assert!(p.creation_time > 0);
                if compression != CompressionType::None {
                    assert!(p.data_size < plain_data_size * 3 / 4, "{ctx}: {} vs {plain_data_size}", p.data_size);
                }
                assert_eq!(scan_forward(&t, rs).unwrap(), entries, "{ctx}");
                assert_eq!(scan_backward(&t, rs).unwrap(), entries, "{ctx}");
                for (k, v) in &entries {
                    assert_eq!(t.get(&rs, k).unwrap(), Some((k.clone(), v.clone())), "{ctx}");
                }
                for (i, (k, v)) in entries.iter().enumerate() {
                    // The newest version is the one a lookup at the latest sequence finds.
                    let uk = user_key(k);
                    if i == 0 || user_key(&entries[i - 1].0) != uk {
                        let got = t.get(&rs, &ikey(uk, MAX_SEQUENCE, KIND_FOR_SEEK)).unwrap();
                        assert_eq!(got, Some((k.clone(), v.clone())), "{ctx}");
                    }
                }
                for absent in [&b"key"[..], b"key000000a", b"key0015", b"zzz", b""] {
                    assert_eq!(t.get(&rs, &ikey(absent, MAX_SEQUENCE, KIND_FOR_SEEK)).unwrap(), None, "{ctx}");
                }
            }
        }
    }

    #[test]
    fn lookups_at_older_sequences_find_older_versions() {
        let entries: Entries = vec![
            (ikey(b"a", 7, ValueKind::Value), b"a7".to_vec()),
            (ikey(b"k", 5, ValueKind::Value), b"five".to_vec()),
            (ikey(b"k", 3, ValueKind::Value), b"three".to_vec()),
            (ikey(b"k", 1, ValueKind::Deletion), Vec::new()),
            (ikey(b"m", 2, ValueKind::Value), b"m2".to_vec()),
        ];
        // Block size 1 puts every entry in its own block, so versions of "k"
        // straddle block boundaries; 4096 puts them all in one block.
        for block_size in [1, 4096] {
            let (bytes, _) = build(&entries, opts(CompressionType::None, ChecksumType::Crc32c, block_size));
            let t = open(&bytes).unwrap();
            let rs = ReadSettings::default();
            let get = |uk: &[u8], seq| t.get(&rs, &ikey(uk, seq, KIND_FOR_SEEK)).unwrap();
            assert_eq!(get(b"k", 4), Some(entries[2].clone()), "block size {block_size}");
            assert_eq!(get(b"k", 3), Some(entries[2].clone()));
            assert_eq!(get(b"k", 5), Some(entries[1].clone()));
            assert_eq!(get(b"k", 100), Some(entries[1].clone()));
            assert_eq!(get(b"k", 2), Some(entries[3].clone()), "the tombstone is returned as is");
            assert_eq!(get(b"k", 0), None);
            assert_eq!(get(b"a", 6), None);
            assert_eq!(get(b"j", 100), None);
            assert_eq!(get(b"n", 100), None);
            assert_eq!(t.properties().num_deletions, 1);
            assert_eq!(scan_backward(&t, rs).unwrap(), entries);
        }
    }

    /// Applies one random operation to both iterators and checks they agree.
    fn check_same(ours: &TableIterator, reference: &VecIterator, what: &str) {
        assert_eq!(ours.valid(), reference.valid(), "{what}");
        if reference.valid() {
            assert_eq!(ours.key(), reference.key(), "{what}");
            assert_eq!(ours.value(), reference.value(), "{what}");
        }
    }

    /// One version of each user key: no two blocks share a user key, so the
    /// index can hold user keys.
    fn unique_entries(n: usize) -> Entries {
        let mut entries = sample_entries(n);
        entries.dedup_by(|b, a| user_key(&a.0) == user_key(&b.0));
        entries
    }

    #[test]
    fn many_blocks_agree_with_a_sorted_vec() {
        // Versions of a user key across blocks keep internal index keys;
        // one version per key gives user index keys, unless turned off.
        for (entries, user_key_index, expect_user_keys) in [
            (sample_entries(6000), true, false),
            (unique_entries(6000), true, true),
            (unique_entries(6000), false, false),
        ] {
            let o = TableBuilderOptions { user_key_index, ..opts(CompressionType::Lz4, ChecksumType::Crc32c, 256) };
            let (bytes, props) = build(&entries, o);
            let t = open(&bytes).unwrap();
            assert_eq!(t.index_key_is_user_key(), expect_user_keys);
            many_blocks_agree(&entries, &bytes, &props);
        }
    }

    #[test]
    fn index_blocks_of_every_restart_interval_read_alike() {
        // Flat and partitioned indexes, with internal and user index keys:
        // every interval reads as the sorted entries do (seeks both ways,
        // steps, point lookups one at a time and batched); tables written
        // with different intervals differ only in the index's size.
        // The flat index sizes are compared on the user-key index of
        // entries with one version each (`sized`).
        let mut flat_index_size = std::collections::BTreeMap::new();
        for (entries, user_key_index, sized) in [
            (sample_entries(6000), true, false),
            (unique_entries(6000), true, true),
            (unique_entries(6000), false, false),
        ] {
            for partition in [None, Some(512)] {
                for interval in [1, 2, 7, 16, 64, 1000] {
                    let o = TableBuilderOptions {
                        user_key_index,
                        index_block_restart_interval: interval,
                        index_partition_size: partition,
                        compression: CompressionType::None,
                        ..opts(CompressionType::Lz4, ChecksumType::Crc32c, 256)
                    };
                    let (bytes, props) = build(&entries, o);
                    many_blocks_agree(&entries, &bytes, &props);
                    if partition.is_some() {
                        assert!(props.index_partitions > 1, "interval {interval}: one partition");
                    } else if sized {
                        flat_index_size.insert(interval, props.index_size);
                    }
                }
            }
        }
        // Between restarts an entry stores only what its key adds: the
        // index of interval 16 is under half the size of interval 1's.
        let size = |i: usize| flat_index_size[&i];
        assert!(size(16) * 2 < size(1), "index sizes by interval: {flat_index_size:?}");
        assert!(size(2) < size(1) && size(16) < size(2), "index sizes by interval: {flat_index_size:?}");
    }

    fn many_blocks_agree(entries: &Entries, bytes: &[u8], props: &TableProperties) {
        assert!(props.num_data_blocks > 200, "{} blocks", props.num_data_blocks);
        let t = open(bytes).unwrap();
        let mut ours = t.iter(ReadSettings::default());
        let mut reference = VecIterator::new(entries.clone());
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let random_target = |rng: &mut rand::rngs::StdRng| {
            let i = rng.gen_range(0..6100);
            let mut uk = format!("key{i:06}").into_bytes();
            if rng.gen_bool(0.2) {
                uk.push(b'x');
            }
            ikey(&uk, rng.gen_range(0..25), KIND_FOR_SEEK)
        };
        for step in 0..3000 {
            let what = format!("step {step}");
            match rng.gen_range(0..6) {
                0 => {
                    let target = random_target(&mut rng);
                    ours.seek(&target);
                    reference.seek(&target);
                }
                1 => {
                    let target = random_target(&mut rng);
                    ours.seek_for_prev(&target);
                    reference.seek_for_prev(&target);
                }
                2 if rng.gen_bool(0.1) => {
                    ours.seek_to_first();
                    reference.seek_to_first();
                }
                2 => {
                    ours.seek_to_last();
                    reference.seek_to_last();
                }
                3 | 4 => {
                    for _ in 0..rng.gen_range(1..40) {
                        if reference.valid() {
                            ours.next();
                            reference.next();
                            check_same(&ours, &reference, &what);
                        }
                    }
                }
                _ => {
                    for _ in 0..rng.gen_range(1..40) {
                        if reference.valid() {
                            ours.prev();
                            reference.prev();
                            check_same(&ours, &reference, &what);
                        }
                    }
                }
            }
            check_same(&ours, &reference, &what);
        }
        ours.status().unwrap();

        // Point lookups, one at a time and batched, give the first entry at
        // or after the lookup when it has the lookup's user key.
        let rs = ReadSettings::default();
        let mut lookups: Vec<Vec<u8>> = (0..2000).map(|_| random_target(&mut rng)).collect();
        lookups.sort_by(|a, b| compare_bytewise_internal_keys(a, b));
        let expected: Vec<Option<(Vec<u8>, Vec<u8>)>> = lookups
            .iter()
            .map(|l| {
                let i = entries.partition_point(|(k, _)| compare_bytewise_internal_keys(k, l) == Ordering::Less);
                entries.get(i).filter(|(k, _)| user_key(k) == user_key(l)).cloned()
            })
            .collect();
        for (l, want) in lookups.iter().zip(&expected) {
            assert_eq!(&t.get(&rs, l).unwrap(), want, "get {:?}", String::from_utf8_lossy(l));
        }
        let mut batched = vec![None; lookups.len()];
        t.multi_get_past_filter(&rs, lookups.len(), |k| &lookups[k], |k, r| {
            let (key, value) = r.unwrap();
            batched[k] = Some((key.to_vec(), value.to_vec()));
        });
        assert_eq!(batched, expected, "multi_get");

        // Offsets grow with the key and stay within the data blocks.
        let mut last = 0;
        for (k, _) in entries.iter().step_by(97) {
            let off = t.approximate_offset_of(k);
            assert!(off >= last && off < props.data_size, "{off} after {last}");
            last = off;
        }
        assert_eq!(t.approximate_offset_of(&entries[0].0), 0);
        assert_eq!(t.approximate_offset_of(&ikey(b"zzz", 1, ValueKind::Value)), props.data_size);
        assert!(t.approximate_offset_of(&entries[entries.len() / 2].0) > props.data_size / 4);
    }

    /// Where `it` is: its entry and the two after it, or its error.
    fn position_of(it: &mut dyn InternalIterator) -> std::result::Result<Entries, String> {
        let mut out = Vec::new();
        while it.valid() && out.len() < 3 {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status().map_err(|e| e.to_string())?;
        Ok(out)
    }

    #[test]
    fn prepared_seeks_land_where_plain_seeks_do() {
        let entries = sample_entries(3000);
        let (bytes, _) = build(&entries, opts(CompressionType::None, ChecksumType::Crc32c, 512));
        let cache: Arc<dyn BlockCache> = Arc::new(LruCache::new(64 << 10));
        let uncached = open(&bytes).unwrap();
        let cached = Table::open(MemRandom::new(bytes.clone()), bytes.len() as u64, "p.sst".into(), Some(cache)).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(29);
        let target = |rng: &mut rand::rngs::StdRng| match rng.gen_range(0..20) {
            // Not an internal key: the seek's error.
            0 => b"short".to_vec(),
            _ => {
                let mut uk = format!("key{:06}", rng.gen_range(0..3100)).into_bytes();
                if rng.gen_bool(0.2) {
                    uk.push(b'x');
                }
                ikey(&uk, rng.gen_range(0..25), KIND_FOR_SEEK)
            }
        };
        for (name, t) in [("uncached", &uncached), ("cached", &cached)] {
            // One iterator reused, as a merging iterator reuses its children.
            let mut prepared = t.iter(ReadSettings::default());
            for step in 0..1500 {
                let goal = target(&mut rng);
                let mut plain = t.iter(ReadSettings::default());
                plain.seek(&goal);
                let want = position_of(&mut plain);
                let what = format!("{name}, step {step}");
                match rng.gen_range(0..4) {
                    // Prepared for this target.
                    0 | 1 => prepared.prepare_seek(&goal),
                    // Prepared for another target: discarded.
                    2 => prepared.prepare_seek(&target(&mut rng)),
                    // Prepared, then moved: discarded.
                    _ => {
                        prepared.prepare_seek(&goal);
                        prepared.seek_to_first();
                    }
                }
                if prepared.status().is_err() {
                    // A failed seek's error stays with its iterator, as it
                    // does without preparing.
                    prepared = t.iter(ReadSettings::default());
                    prepared.prepare_seek(&goal);
                }
                prepared.seek(&goal);
                assert_eq!(position_of(&mut prepared), want, "{what}");
                if want.is_err() {
                    prepared = t.iter(ReadSettings::default());
                }
            }
        }
    }

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

    /// A table of many small blocks, in memory with a read counter.
    fn cached_table_file() -> (Arc<MemRandom>, u64, Entries) {
        let entries = sample_entries(3000);
        let (bytes, _) = build(&entries, opts(CompressionType::None, ChecksumType::Crc32c, 512));
        let len = bytes.len() as u64;
        (MemRandom::new(bytes), len, entries)
    }

    fn policy(cache: &Arc<dyn BlockCache>, high_priority: bool, pin: bool) -> TableCachePolicy {
        TableCachePolicy {
            block_cache: Some(Arc::clone(cache)),
            cache_index_and_filter_blocks: true,
            cache_index_and_filter_blocks_with_high_priority: high_priority,
            pin_index_and_filter_blocks: pin,
            ..TableCachePolicy::default()
        }
    }

    fn cache_of(cache_type: CacheType, capacity: usize) -> Arc<dyn BlockCache> {
        let o = CacheOptions { num_shard_bits: 0, estimated_entry_charge: 600, ..CacheOptions::new(capacity) };
        new_cache(cache_type, &o).unwrap()
    }

    fn empty_block() -> CacheValue {
        CacheValue::new(Block::new(BlockBuilder::new(1).finish()).unwrap())
    }

    /// Fills `cache` with unrelated high-priority blocks so everything
    /// unreferenced goes.
    fn flood(cache: &Arc<dyn BlockCache>) {
        let id = cache.new_id();
        for i in 0..(4 * cache.capacity() / 512) as u64 {
            drop(cache.insert(CacheKey::new(id, i), empty_block(), 512, Priority::High).unwrap());
        }
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
    fn a_started_filter_probe_answers_as_key_may_match() {
        let entries = sample_entries(3000);
        let plain = opts(CompressionType::None, ChecksumType::Crc32c, 512);
        let partitioned = TableBuilderOptions { index_partition_size: Some(1024), partition_filters: true, ..plain.clone() };
        let unfiltered = TableBuilderOptions { bloom_bits_per_key: 0, ..plain.clone() };
        for (name, o) in [("plain", plain), ("partitioned", partitioned), ("no filter", unfiltered)] {
            let (bytes, _) = build(&entries, o);
            let len = bytes.len() as u64;
            for (how, cache, meta_in_cache, pin) in
                [("owned", false, false, false), ("cached", true, true, false), ("pinned", true, true, true), ("data only", true, false, false)]
            {
                let cache = cache.then(|| cache_of(CacheType::Lru, 1 << 20));
                let policy = TableCachePolicy {
                    block_cache: cache.clone(),
                    cache_index_and_filter_blocks: meta_in_cache,
                    pin_index_and_filter_blocks: pin,
                    ..TableCachePolicy::default()
                };
                let t = Table::open_with_policy(MemRandom::new(bytes.clone()), len, "f.sst".into(), policy).unwrap();
                let mut ruled_out = 0;
                for i in 0..6000 {
                    // Keys of the table (i < 3000) and keys it lacks.
                    let k = format!("key{i:06}").into_bytes();
                    let probe = t.start_filter_probe(&k, filter_hash(&k));
                    let want = t.key_may_match(&k);
                    assert_eq!(probe.may_match(), want, "{name}, {how}: key{i:06}");
                    assert!(i >= 3000 || want, "{name}, {how}: a key of the table ruled out");
                    ruled_out += usize::from(!want);
                }
                if name == "no filter" {
                    assert_eq!(ruled_out, 0);
                } else {
                    assert!(ruled_out > 2800, "{name}, {how}: the filter ruled out only {ruled_out} of 3000 absent keys");
                }
            }
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

    #[test]
    fn empty_table_opens_and_holds_nothing() {
        for bits in [0, 10] {
            let mut o = opts(CompressionType::Zstd, ChecksumType::Xxh3, 4096);
            o.bloom_bits_per_key = bits;
            let (bytes, props) = build(&[], o);
            assert_eq!((props.num_entries, props.num_data_blocks, props.data_size, props.filter_size), (0, 0, 0, 0));
            assert!(props.smallest_key.is_empty() && props.largest_key.is_empty());
            let t = open(&bytes).unwrap();
            assert_eq!(t.properties(), &props);
            let target = ikey(b"k", 1, ValueKind::Value);
            assert_eq!(t.get(&ReadSettings::default(), &target).unwrap(), None);
            assert!(t.key_may_match(b"anything"), "a table without a filter must not exclude keys");
            assert_eq!(t.approximate_offset_of(&target), 0);
            let mut it = t.iter(ReadSettings::default());
            it.seek_to_first();
            assert!(!it.valid());
            it.seek_to_last();
            assert!(!it.valid());
            it.seek(&target);
            assert!(!it.valid());
            it.seek_for_prev(&target);
            assert!(!it.valid());
            it.status().unwrap();
        }
    }

    #[test]
    fn bloom_filter_excludes_absent_keys_and_never_present_ones() {
        let entries = sample_entries(2000);
        let (bytes, _) = build(&entries, opts(CompressionType::None, ChecksumType::Crc32c, 4096));
        let t = open(&bytes).unwrap();
        assert!(entries.iter().all(|(k, _)| t.key_may_match(user_key(k))));
        let passed = (0..10_000).filter(|i| t.key_may_match(format!("absent{i}").as_bytes())).count();
        assert!(passed < 300, "{passed} of 10000 absent keys passed the filter");

        let mut o = opts(CompressionType::None, ChecksumType::Crc32c, 4096);
        o.bloom_bits_per_key = 0;
        let (bytes, props) = build(&entries, o);
        assert_eq!(props.filter_size, 0);
        let t = open(&bytes).unwrap();
        assert!(t.key_may_match(b"absent"));
    }

    /// The batched filter check gives every key the verdict the one-key
    /// check gives, with a filter and without one.
    #[test]
    fn batched_filter_verdicts_equal_single_ones() {
        let entries = sample_entries(2000);
        for bits in [10, 0] {
            let mut o = opts(CompressionType::None, ChecksumType::Crc32c, 4096);
            o.bloom_bits_per_key = bits;
            let t = open(&build(&entries, o).0).unwrap();
            let keys: Vec<Vec<u8>> = entries
                .iter()
                .map(|(k, _)| user_key(k).to_vec())
                .chain((0..3000).map(|i| format!("absent{i}").into_bytes()))
                .collect();
            let hashes: Vec<u64> = keys.iter().map(|k| crate::sst::filter::filter_hash(k)).collect();
            let mut verdicts = Vec::new();
            t.keys_may_match(keys.len(), |k| &keys[k], |k| hashes[k], |k, may| verdicts.push((k, may)));
            let single: Vec<(usize, bool)> =
                keys.iter().enumerate().map(|(k, key)| (k, t.key_may_match(key))).collect();
            assert_eq!(verdicts, single, "bits {bits}");
            assert!(bits == 0 || verdicts.iter().any(|(_, may)| !may), "no absent key was excluded");
        }
    }

    #[test]
    fn out_of_order_and_malformed_keys_are_refused() {
        let data = Arc::new(Mutex::new(Vec::new()));
        let file = MemWritable { data: data.clone(), synced: Arc::new(AtomicBool::new(false)), fail_after: None };
        let mut b = TableBuilder::new(Box::new(file), TableBuilderOptions::default(), "o.sst".into());
        let k5 = ikey(b"k", 5, ValueKind::Value);
        b.add(&k5, b"v").unwrap();
        for bad in [ikey(b"k", 5, ValueKind::Value), ikey(b"k", 6, ValueKind::Value), ikey(b"a", 1, ValueKind::Value)] {
            let e = b.add(&bad, b"x").unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
            assert!(e.to_string().contains("out of order"), "{e}");
        }
        assert!(matches!(b.add(b"short", b"x"), Err(Error::InvalidArgument(_))));
        let k4 = ikey(b"k", 4, ValueKind::Value);
        b.add(&k4, b"w").unwrap();
        let props = b.finish().unwrap();
        assert_eq!(props.num_entries, 2);
        let bytes = data.lock().clone();
        let t = open(&bytes).unwrap();
        assert_eq!(scan_forward(&t, ReadSettings::default()).unwrap(), vec![(k5, b"v".to_vec()), (k4, b"w".to_vec())]);
    }

    #[test]
    fn a_write_error_poisons_the_builder() {
        let file = MemWritable {
            data: Arc::new(Mutex::new(Vec::new())),
            synced: Arc::new(AtomicBool::new(false)),
            fail_after: Some(1000),
        };
        let mut b =
            TableBuilder::new(Box::new(file), opts(CompressionType::None, ChecksumType::Crc32c, 256), "e.sst".into());
        let entries = sample_entries(200);
        let first_error = entries.iter().find_map(|(k, v)| b.add(k, v).err()).expect("no write error");
        assert!(matches!(first_error, Error::Io { .. }), "{first_error}");
        let k = ikey(b"zzz", 1, ValueKind::Value);
        assert!(matches!(b.add(&k, b"v"), Err(Error::Io { .. })));
        assert!(matches!(b.finish(), Err(Error::Io { .. })));
    }

    /// Reads everything through every path, checking each entry returned
    /// against `entries`; the first error stops it.
    fn read_everything(bytes: &[u8], entries: &Entries, rs: ReadSettings, strict: bool) -> Result<()> {
        let t = open(bytes)?;
        let mut it = t.iter(rs);
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            if strict {
                assert_eq!((it.key(), it.value()), (&entries[n].0[..], &entries[n].1[..]), "wrong entry {n}");
            }
            n += 1;
            it.next();
        }
        it.status()?;
        if strict {
            assert_eq!(n, entries.len(), "entries went missing without an error");
        }
        for (k, v) in entries {
            let got = t.get(&rs, k)?;
            if strict {
                assert_eq!(got, Some((k.clone(), v.clone())));
            }
        }
        Ok(())
    }

    fn small_table(compression: CompressionType, checksum: ChecksumType) -> (Vec<u8>, Entries) {
        small_table_of(sample_entries(24), compression, checksum)
    }

    /// [`small_table`] with one version per user key: its index holds user
    /// keys (format version 3), where `small_table`'s holds internal keys.
    fn small_user_key_table(compression: CompressionType, checksum: ChecksumType) -> (Vec<u8>, Entries) {
        small_table_of(unique_entries(30), compression, checksum)
    }

    /// `entries` in a table of at least three small blocks.
    fn small_table_of(entries: Entries, compression: CompressionType, checksum: ChecksumType) -> (Vec<u8>, Entries) {
        let (bytes, props) = build(&entries, opts(compression, checksum, 128));
        assert!(props.num_data_blocks >= 3);
        (bytes, entries)
    }

    #[test]
    fn the_small_tables_have_both_index_forms() {
        let (internal, _) = small_table(CompressionType::None, ChecksumType::Crc32c);
        let (user, _) = small_user_key_table(CompressionType::None, ChecksumType::Crc32c);
        assert!(!open(&internal).unwrap().index_key_is_user_key());
        assert!(open(&user).unwrap().index_key_is_user_key());
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        for (compression, checksum) in [
            (CompressionType::None, ChecksumType::Crc32c),
            (CompressionType::Snappy, ChecksumType::Xxh3),
            (CompressionType::Zstd, ChecksumType::Crc32c),
        ] {
          for table in [small_table, small_user_key_table] {
            let (bytes, entries) = table(compression, checksum);
            read_everything(&bytes, &entries, ReadSettings::default(), true).unwrap();
            for i in 0..bytes.len() {
                let mut bad = bytes.clone();
                bad[i] ^= [0x01, 0x80, 0xff, 0x24][i % 4];
                match read_everything(&bad, &entries, ReadSettings::default(), true) {
                    Err(e) => assert!(e.is_corruption(), "{compression:?}/{checksum:?} byte {i}: {e}"),
                    Ok(()) => {
                        panic!("{compression:?}/{checksum:?}: flip of byte {i} of {} went unnoticed", bytes.len())
                    }
                }
            }
          }
        }
    }

    #[test]
    fn flipped_bytes_without_verification_never_panic() {
        let rs = ReadSettings { verify_checksums: false, fill_cache: true, ..ReadSettings::default() };
        for (compression, table) in [
            (CompressionType::None, small_table as fn(_, _) -> _),
            (CompressionType::Lz4, small_table),
            (CompressionType::Lz4, small_user_key_table),
        ] {
            let (bytes, entries) = table(compression, ChecksumType::Crc32c);
            for i in 0..bytes.len() {
                for mask in [0x01u8, 0xff] {
                    let mut bad = bytes.clone();
                    bad[i] ^= mask;
                    if let Err(e) = read_everything(&bad, &entries, rs, false) {
                        assert!(e.is_corruption(), "byte {i}: {e}");
                    }
                    let Ok(t) = open(&bad) else { continue };
                    let _ = scan_backward(&t, rs);
                    let mut it = t.iter(rs);
                    it.seek_for_prev(&entries[10].0);
                    it.seek(&entries[3].0);
                }
            }
        }
    }

    #[test]
    fn truncated_files_are_corruption() {
        let (bytes, entries) = small_table(CompressionType::Snappy, ChecksumType::Crc32c);
        for len in 0..bytes.len() {
            let cut = &bytes[..len];
            let e = read_everything(cut, &entries, ReadSettings::default(), true).unwrap_err();
            assert!(e.is_corruption(), "length {len}: {e}");
            // The size recorded elsewhere (the MANIFEST) says more than the file holds.
            let short_file = MemRandom::new(cut.to_vec());
            match Table::open(short_file, bytes.len() as u64, "t.sst".into(), None) {
                Err(e) => assert!(e.is_corruption() && e.to_string().contains("truncated"), "length {len}: {e}"),
                Ok(_) => panic!("opened a table cut to {len} bytes"),
            }
        }
    }

    #[test]
    fn garbage_files_are_corruption() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let (valid, _) = small_table(CompressionType::None, ChecksumType::Crc32c);
        let footer = &valid[valid.len() - FOOTER_LEN..];
        for len in [0usize, 1, 8, FOOTER_LEN - 1, FOOTER_LEN, FOOTER_LEN + 1, 100, 1000, 4096] {
            for round in 0..20 {
                let mut garbage: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                if round == 1 {
                    garbage.fill(0);
                }
                let e = open(&garbage).err().expect("garbage opened");
                assert!(e.is_corruption(), "{e}");
                // Right magic, random footer.
                garbage.extend_from_slice(&crate::sst::format::TABLE_MAGIC.to_le_bytes());
                assert!(open(&garbage).err().expect("garbage opened").is_corruption());
                // A valid footer whose handles point into garbage.
                garbage.truncate(len);
                garbage.resize(valid.len() - FOOTER_LEN, 0x5a);
                garbage.extend_from_slice(footer);
                let e = open(&garbage).err().expect("garbage opened");
                assert!(e.is_corruption(), "{e}");
            }
        }
    }

    /// Replaces the table's index with `index_contents` stored with
    /// `type_byte` and a valid checksum, appended after the metaindex.
    fn with_index_block(valid: &[u8], index_contents: &[u8], type_byte: u8) -> Vec<u8> {
        let footer_at = valid.len() - FOOTER_LEN;
        let old = Footer::decode(&valid[footer_at..]).unwrap();
        let mut bytes = valid[..footer_at].to_vec();
        let handle = BlockHandle::new(bytes.len() as u64, index_contents.len() as u64);
        bytes.extend_from_slice(index_contents);
        bytes.push(type_byte);
        bytes.extend_from_slice(&mask(old.checksum.compute(&[index_contents, &[type_byte]])).to_le_bytes());
        bytes.extend_from_slice(&Footer::new(old.checksum, old.metaindex, handle).encode());
        bytes
    }

    fn index_with_value(value: &[u8]) -> Vec<u8> {
        let mut b = BlockBuilder::new(1);
        b.add(&ikey(b"zzz", MAX_SEQUENCE, KIND_FOR_SEEK), value);
        b.finish()
    }

    fn expect_read_corruption(bytes: &[u8], words: &str) {
        let t = open(bytes).unwrap();
        let rs = ReadSettings::default();
        let e = t.get(&rs, &ikey(b"key000001", 100, KIND_FOR_SEEK)).unwrap_err();
        assert!(e.is_corruption() && e.to_string().contains(words), "{e}");
        let e = scan_forward(&t, rs).unwrap_err();
        assert!(e.is_corruption() && e.to_string().contains(words), "{e}");
        assert!(e.to_string().contains("test.sst"), "{e}");
    }

    #[test]
    fn bad_handles_varints_and_compression_bytes_are_corruption() {
        let (valid, _) = small_table(CompressionType::None, ChecksumType::Crc32c);
        // Checksums are valid in each case: the damage is in what they cover.
        let beyond = with_index_block(&valid, &index_with_value(&BlockHandle::new(1 << 40, 100).encode()), 0);
        expect_read_corruption(&beyond, "points past");
        let overflow = with_index_block(&valid, &index_with_value(&BlockHandle::new(u64::MAX - 2, 10).encode()), 0);
        expect_read_corruption(&overflow, "points past");
        let bad_varint = with_index_block(&valid, &index_with_value(&[0xff; 11]), 0);
        expect_read_corruption(&bad_varint, "varint");

        // A data block stored with an unknown compression byte.
        let mut data_block = valid[..valid.len() - FOOTER_LEN].to_vec();
        let mut b = BlockBuilder::new(1);
        b.add(&ikey(b"key000001", 1, ValueKind::Value), b"v");
        let contents = b.finish();
        let handle = BlockHandle::new(data_block.len() as u64, contents.len() as u64);
        data_block.extend_from_slice(&contents);
        data_block.push(9);
        data_block.extend_from_slice(&mask(ChecksumType::Crc32c.compute(&[&contents, &[9]])).to_le_bytes());
        // `with_index_block` expects a footer at the end of its input.
        let mut padded = data_block.clone();
        padded.extend_from_slice(&valid[valid.len() - FOOTER_LEN..]);
        let bad_compression = with_index_block(&padded, &index_with_value(&handle.encode()), 0);
        expect_read_corruption(&bad_compression, "compression type");

        // An index block that is itself stored with an unknown compression byte.
        let e = open(&with_index_block(&valid, &index_with_value(&handle.encode()), 9)).err().unwrap();
        assert!(e.is_corruption() && e.to_string().contains("compression type"), "{e}");

        // A footer whose index handle reaches past the file.
        let footer_at = valid.len() - FOOTER_LEN;
        let old = Footer::decode(&valid[footer_at..]).unwrap();
        let mut bytes = valid[..footer_at].to_vec();
        bytes.extend_from_slice(
            &Footer::new(old.checksum, old.metaindex, BlockHandle::new(old.index.offset, 1 << 40)).encode(),
        );
        let e = open(&bytes).err().unwrap();
        assert!(e.is_corruption() && e.to_string().contains("points past"), "{e}");
        assert!(matches!(e, Error::Corruption { offset, .. } if offset == old.index.offset));
    }

    #[test]
    fn short_targets_are_refused_not_misread() {
        let (bytes, _) = small_table(CompressionType::None, ChecksumType::Crc32c);
        let t = open(&bytes).unwrap();
        assert!(matches!(t.get(&ReadSettings::default(), b"abc"), Err(Error::InvalidArgument(_))));
        let mut it = t.iter(ReadSettings::default());
        it.seek(b"abc");
        assert!(!it.valid());
        assert!(matches!(it.status(), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn round_trip_through_the_posix_filesystem() {
        use crate::fs::{FileSystem, PosixFs};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.sst");
        let fs = PosixFs::new();
        let entries = sample_entries(1000);
        let mut b = TableBuilder::new(
            fs.new_writable(&path).unwrap(),
            opts(CompressionType::Zstd, ChecksumType::Crc32c, 4096),
            path.display().to_string(),
        );
        for (k, v) in &entries {
            b.add(k, v).unwrap();
        }
        let props = b.finish().unwrap();
        assert_eq!(fs.file_size(&path).unwrap(), props.file_size);
        let t = Table::open(fs.open_random(&path).unwrap(), props.file_size, path.display().to_string(), None).unwrap();
        assert_eq!(scan_forward(&t, ReadSettings::default()).unwrap(), entries);
        assert_eq!(compare_bytewise_internal_keys(&t.properties().largest_key, &entries.last().unwrap().0), Ordering::Equal);
    }
    #[test]
    fn iterators_read_ahead_as_their_settings_say() {
        let entries = sample_entries(3000);
        let (bytes, props) = build(&entries, opts(CompressionType::None, ChecksumType::Crc32c, 512));
        let blocks = props.num_data_blocks as usize;
        assert!(blocks > 100, "{blocks} blocks");
        let file = MemRandom::new(bytes.clone());
        let table = Table::open(file.clone(), bytes.len() as u64, "test.sst".into(), None).unwrap();
        let scan_reads = |rs: ReadSettings| {
            let before = file.reads.load(AtomicOrdering::SeqCst);
            assert_eq!(scan_forward(&table, rs).unwrap(), entries);
            file.reads.load(AtomicOrdering::SeqCst) - before
        };
        let fixed = |n| ReadSettings { readahead: Readahead::Fixed(n), ..ReadSettings::default() };
        assert_eq!(scan_reads(fixed(0)), blocks, "no readahead: one read per block");
        let with_64k = scan_reads(fixed(64 << 10));
        assert_eq!(with_64k, bytes.len().div_ceil(64 << 10).min(blocks), "one read per 64 KiB window");
        let auto = scan_reads(ReadSettings::default());
        assert!(auto < blocks / 10, "auto readahead: {auto} reads for {blocks} blocks");
        // A reverse scan is never sequential: auto readahead stays off.
        let before = file.reads.load(AtomicOrdering::SeqCst);
        let mut it = table.iter(ReadSettings::default());
        it.seek_to_last();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.prev();
        }
        assert_eq!(n, entries.len());
        assert_eq!(file.reads.load(AtomicOrdering::SeqCst) - before, blocks);
        assert!(file.advised.lock().is_empty(), "user scans give no hint");
        let compaction = ReadSettings { for_compaction: true, ..fixed(0) };
        assert_eq!(scan_reads(compaction), blocks);
        assert_eq!(*file.advised.lock(), vec![Access::Sequential]);
        // With auto readahead off, a scan reads block by block.
        let policy = TableCachePolicy { max_auto_readahead_size: 0, ..TableCachePolicy::default() };
        let table = Table::open_with_policy(file.clone(), bytes.len() as u64, "test.sst".into(), policy).unwrap();
        let before = file.reads.load(AtomicOrdering::SeqCst);
        assert_eq!(scan_forward(&table, ReadSettings::default()).unwrap(), entries);
        assert_eq!(file.reads.load(AtomicOrdering::SeqCst) - before, blocks);
    }

    #[test]
    fn a_damaged_block_read_through_the_readahead_window_is_corruption() {
        let entries = sample_entries(2000);
        let (mut bytes, props) = build(&entries, opts(CompressionType::None, ChecksumType::Crc32c, 512));
        let middle = (props.data_size / 2) as usize;
        bytes[middle] ^= 0x40;
        let table = open(&bytes).unwrap();
        for readahead in [Readahead::Auto, Readahead::Fixed(16 << 10)] {
            let err = scan_forward(&table, ReadSettings { readahead, ..ReadSettings::default() }).unwrap_err();
            assert!(matches!(err, Error::Corruption { .. }), "{readahead:?}: {err}");
        }
    }
}
