//! Reads a table: [`Table`] holds what every lookup needs (index block,
//! filters, range tombstones, properties) and answers point lookups; the
//! pieces it reads with live beside it (LevelDB `table/table.cc`):
//! - `block_reader.rs`: reading blocks, checked, through the block cache
//!   ([`TableCachePolicy`], [`ReadSettings`]);
//! - `table_filter.rs`: the whole-key and prefix filters ([`FilterProbe`]);
//! - `two_level.rs`: the index cursors and the two-level walk;
//! - `table_iterator.rs`: [`super::TableIterator`], every entry both ways;
//! - `prefix_seek.rs`: bounded prefix seeks over tables.
//!
//! Contract:
//! 1. `Table::open` reads and checksum-verifies the footer, metaindex, index,
//!    filter, range-deletion and properties blocks; data blocks are read on
//!    demand, verified when [`ReadSettings::verify_checksums`] asks, and
//!    shared through the block cache as its [`TableCachePolicy`] says.
//! 2. A point lookup ([`Table::lookup`]) answers for the table alone: its
//!    filters first (a key they rule out is not searched), then the first
//!    entry at or after the lookup key if it has the key's user key, with
//!    the newest range tombstone of the table that covers the key at the
//!    read's sequence. Merging the answers of several tables is the version
//!    layer's (`version/get.rs`).
//! 3. Any damage found (checksum, magic, lengths, varints, compression, a
//!    handle past the end) is [`Error::Corruption`] naming the file and the
//!    offset of the block concerned; no input makes a read panic. A filter
//!    that cannot be read lets every key through.
//! 4. Point lookups and the index, filter and properties blocks never read
//!    ahead (only iterators do, docs/io.md).
//! 5. A `Table` is immutable and `Sync`, shared through `Arc`.

use std::sync::Arc;

use super::block::{Block, BlockIterator, KeyOrder};
use super::block_reader::{BlockReader, CachedBlock, MetaBlock, TableBlocks};
pub use super::block_reader::{ReadSettings, Readahead, TableCachePolicy};
use super::format::{BlockHandle, Footer, FOOTER_LEN};
use super::pinned::PinnableSlice;
// The paths the engine's iterators and the tools name.
use super::prefetch::PrefetchBuffer;
pub use super::prefix_seek::{PrefixCheckedIterator, SeekPrefix};
use super::properties::TableProperties;
pub use super::table_filter::FilterProbe;
use super::table_filter::TableFilter;
use super::two_level::{Cursor, IndexCursor};
use super::{FILTER_BLOCK_NAME, PARTITIONED_FILTER_BLOCK_NAME, PROPERTIES_BLOCK_NAME, RANGE_DEL_BLOCK_NAME};
#[cfg(any(test, feature = "internals"))]
use crate::cache::BlockCache;
use crate::cache::{BlockKind, CacheHandle};
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, user_key, SequenceNumber, ValueKind, TRAILER_LEN};
use crate::prefix::SliceTransform;
use crate::range_del::{FragmentedTombstones, RangeTombstone};

/// An open table file.
pub struct Table {
    blocks: TableBlocks,
    index_offset: u64,
    /// The index is partitions under a top-level index (`index` is then the
    /// top level): format versions 2 and 4.
    partitioned_index: bool,
    /// How data-block keys compare: internal keys in the comparator's order.
    data_order: KeyOrder,
    index: MetaBlock,
    filter: TableFilter,
    properties: TableProperties,
    /// Auto readahead sizes, initial and max.
    auto_readahead: (usize, usize),
    /// The range tombstones of the range-deletion block, fragmented.
    range_dels: Option<Arc<FragmentedTombstones>>,
}

/// A point read as [`Table::lookup`] asks each table it visits.
pub struct PointLookup<'a> {
    /// The user key read.
    pub key: &'a [u8],
    /// Its lookup key: the internal key `(key, seq, KIND_FOR_SEEK)`.
    pub lookup: &'a [u8],
    /// The read's sequence: newer entries and tombstones are not seen.
    pub seq: SequenceNumber,
    /// How data blocks are read.
    pub rs: ReadSettings,
    /// The family's prefix extractor, asked only by a table whose filter
    /// holds prefixes rather than whole keys (so a plain read never loads
    /// the family's options).
    pub prefix_extractor: &'a dyn Fn() -> Option<Arc<dyn SliceTransform>>,
}

/// What one table holds for a point read ([`Table::lookup`]).
pub struct TableGet<V> {
    /// The key's entry in the table.
    pub entry: TableEntry<V>,
    /// The newest range tombstone of the table covering the key at or below
    /// the read's sequence; 0 for none. Given whatever the entry, as a
    /// tombstone deletes the older versions of every table below.
    pub tombstone: SequenceNumber,
}

/// The entry a table holds for a point read.
pub enum TableEntry<V> {
    /// The table's filter (whole-key or prefix) rules the key out: the
    /// table was not searched.
    FilteredOut,
    /// The table has no entry of the key at or below the read's sequence.
    Absent,
    /// The newest entry of the key at or below the read's sequence
    /// (sequence, kind, value); the value of a tombstone is not kept.
    Found(SequenceNumber, ValueKind, V),
    /// The entry found has an internal key that does not parse (the caller
    /// names the file in its error).
    Unparsable,
}

/// What [`Table::multi_get`] found for one of its keys.
pub enum BatchEntry<'b> {
    /// A range tombstone of the table covers the key at some sequence up
    /// to the read's: the table was not searched for it.
    Covered,
    /// The table's whole-key filter rules the key out.
    FilteredOut,
    /// The first entry at or after the key's lookup key, which has its user
    /// key: internal key and value.
    Found(&'b [u8], &'b [u8]),
    /// The error that kept the key from being answered (a damaged index or
    /// block fails only the keys that needed it).
    Failed(Error),
}

/// How a point read hands out the value it finds in a table: copied into a
/// vector, or pinned in its block ([`PinnableSlice`]).
pub trait ReadValue: Sized {
    /// A value that is owned already (a memtable's, a blob's).
    fn owned(v: Vec<u8>) -> Self;
    /// The bytes.
    fn bytes(&self) -> &[u8];
    /// The first entry of `table` at or after `lookup`, if it has its user
    /// key, without asking the filters: `Some(None)` when the entry's
    /// internal key does not parse.
    #[allow(clippy::type_complexity)]
    fn search(
        table: &Table,
        rs: &ReadSettings,
        lookup: &[u8],
    ) -> Result<Option<Option<(SequenceNumber, ValueKind, Self)>>>;
}

impl ReadValue for Vec<u8> {
    fn owned(v: Vec<u8>) -> Self {
        v
    }
    fn bytes(&self) -> &[u8] {
        self
    }
    fn search(
        table: &Table,
        rs: &ReadSettings,
        lookup: &[u8],
    ) -> Result<Option<Option<(SequenceNumber, ValueKind, Self)>>> {
        // Only a value (or blob index) is copied out of the block; the key
        // is parsed in place.
        table.get_past_filter_with(rs, lookup, copied_entry)
    }
}

impl ReadValue for PinnableSlice {
    fn owned(v: Vec<u8>) -> Self {
        PinnableSlice::from_vec(v)
    }
    fn bytes(&self) -> &[u8] {
        self
    }
    fn search(
        table: &Table,
        rs: &ReadSettings,
        lookup: &[u8],
    ) -> Result<Option<Option<(SequenceNumber, ValueKind, Self)>>> {
        table.get_past_filter_pinned(rs, lookup, |ikey, value| parse_internal_key(ikey).map(|p| (p.seq, p.kind, value)))
    }
}

/// An entry found in a table as a read keeps it: sequence, kind, and the
/// value copied out of the block only for a value or blob index (the key is
/// parsed in place); `None` when the internal key does not parse.
pub fn copied_entry(ikey: &[u8], value: &[u8]) -> Option<(SequenceNumber, ValueKind, Vec<u8>)> {
    parse_internal_key(ikey).map(|p| (p.seq, p.kind, if p.kind.is_value() { value.to_vec() } else { Vec::new() }))
}

impl Table {
    /// Opens the table in `file`, which holds `file_size` bytes. Reads and
    /// verifies the footer, metaindex, index, filter and properties blocks.
    /// Data blocks go through `cache`; index and filter stay in the table.
    #[cfg(any(test, feature = "internals"))]
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
        let reader = BlockReader::new(file, file_name, footer.checksum, footer_at);

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
                reader.file_name(),
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

        let blocks = TableBlocks::new(reader, &policy, index_order);
        let filter = match filter_handle {
            Some(h) => Some(blocks.open_meta(h, BlockKind::Filter, &policy)?),
            None => None,
        };
        let index = blocks.open_meta(footer.index, BlockKind::Index, &policy)?;
        let filter = TableFilter::new(
            filter,
            filter_partitions,
            properties.whole_key_filtering,
            properties.prefix_extractor_name.clone(),
        );
        Ok(Arc::new(Table {
            blocks,
            index_offset: footer.index.offset,
            partitioned_index: footer.partitioned_index(),
            data_order: KeyOrder::Internal(cmp),
            index,
            filter,
            properties,
            auto_readahead: (policy.initial_auto_readahead_size, policy.max_auto_readahead_size),
            range_dels,
        }))
    }

    /// The point read `read` in this table (contract 2): the filters asked
    /// (through `probe` when the caller started it,
    /// [`Table::start_filter_probe`]), then the key's newest entry at or
    /// below the read's sequence, with the table's newest range tombstone
    /// covering the key.
    pub fn lookup<V: ReadValue>(&self, read: &PointLookup<'_>, probe: Option<FilterProbe<'_>>) -> Result<TableGet<V>> {
        let tombstone = self.max_covering_tombstone(read.key, read.seq);
        let may_match = match probe {
            Some(probe) => probe.may_match(),
            None => self.key_may_match(read.key),
        };
        if !may_match || !self.prefix_may_match_key(read) {
            return Ok(TableGet { entry: TableEntry::FilteredOut, tombstone });
        }
        let entry = match V::search(self, &read.rs, read.lookup)? {
            None => TableEntry::Absent,
            Some(None) => TableEntry::Unparsable,
            Some(Some((seq, kind, value))) => TableEntry::Found(seq, kind, value),
        };
        Ok(TableGet { entry, tombstone })
    }

    /// Every version of `read`'s key at or below its sequence, newest
    /// first, down to the first that is not a merge operand, each given to
    /// `version(seq, kind, value)`; nothing when the filters rule the key
    /// out. False when an entry's internal key does not parse (the caller
    /// names the file in its error).
    pub fn key_versions(
        self: &Arc<Self>,
        read: &PointLookup<'_>,
        mut version: impl FnMut(SequenceNumber, ValueKind, &[u8]),
    ) -> Result<bool> {
        if !self.key_may_match(read.key) || !self.prefix_may_match_key(read) {
            return Ok(true);
        }
        let mut it = self.iter(read.rs);
        it.seek(read.lookup);
        while it.valid() {
            let Some(p) = parse_internal_key(it.key()) else { return Ok(false) };
            if p.user_key != read.key {
                break;
            }
            version(p.seq, p.kind, it.value());
            if p.kind != ValueKind::Merge {
                break;
            }
            it.next();
        }
        it.status().map(|()| true)
    }

    /// Point reads of many keys in one visit (RocksDB's batched `MultiGet`):
    /// `keys` are the caller's indexes of the keys this table may hold, in
    /// ascending key order, `key(i)` each user key, `lookup(i)` its lookup
    /// key at `seq`, `hash(i)` its [`filter_hash`](super::filter::filter_hash).
    /// Keys a range tombstone of the table covers are answered
    /// [`BatchEntry::Covered`] and dropped from `keys`; the others are asked
    /// of the whole-key filter at once ([`Table::keys_may_match`]), and those
    /// it lets through (collected in `passing`, which is cleared first) are
    /// looked up together ([`Table::multi_get_past_filter`]). `answer(i,
    /// entry)` is called for every key but the ones the table has no entry
    /// of. `keys` and `passing` are the caller's, reused from table to table.
    #[allow(clippy::too_many_arguments)]
    pub fn multi_get<'k>(
        &self,
        rs: &ReadSettings,
        seq: SequenceNumber,
        keys: &mut Vec<usize>,
        passing: &mut Vec<usize>,
        key: impl Fn(usize) -> &'k [u8],
        lookup: impl Fn(usize) -> &'k [u8],
        hash: impl Fn(usize) -> u64,
        mut answer: impl FnMut(usize, BatchEntry<'_>),
    ) {
        if let Some(t) = &self.range_dels {
            keys.retain(|&i| {
                if t.max_covering(key(i), seq) == 0 {
                    return true;
                }
                answer(i, BatchEntry::Covered);
                false
            });
        }
        passing.clear();
        self.keys_may_match(
            keys.len(),
            |k| key(keys[k]),
            |k| hash(keys[k]),
            |k, may| {
                if may {
                    passing.push(keys[k]);
                } else {
                    answer(keys[k], BatchEntry::FilteredOut);
                }
            },
        );
        self.multi_get_past_filter(
            rs,
            passing.len(),
            |k| lookup(passing[k]),
            |k, r| match r {
                Ok((ikey, value)) => answer(passing[k], BatchEntry::Found(ikey, value)),
                Err(e) => answer(passing[k], BatchEntry::Failed(e)),
            },
        );
    }

    /// For a table whose filter holds prefixes but not whole keys: whether
    /// it may hold `read`'s key's prefix under the family's extractor.
    fn prefix_may_match_key(&self, read: &PointLookup<'_>) -> bool {
        if self.filter.whole_keys() {
            return true;
        }
        match (read.prefix_extractor)() {
            Some(x) if x.in_domain(read.key) => self.prefix_may_match(x.name(), x.transform(read.key)),
            _ => true,
        }
    }

    /// The newest range tombstone of the table covering `user_key` at or
    /// below `seq`; 0 for none.
    pub fn max_covering_tombstone(&self, user_key: &[u8], seq: SequenceNumber) -> SequenceNumber {
        self.range_dels.as_ref().map_or(0, |t| t.max_covering(user_key, seq))
    }

    /// Whether the table may hold a key with prefix `prefix` under the
    /// extractor named `extractor`: false only when its filter holds that
    /// extractor's prefixes and lacks this one. (Partitioned filters are
    /// not asked: a prefix's keys may span partitions.)
    pub fn prefix_may_match(&self, extractor: &str, prefix: &[u8]) -> bool {
        self.filter.prefix_may_match(&self.blocks, extractor, prefix)
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
    #[cfg(any(test, feature = "internals"))]
    pub fn index_key_is_user_key(&self) -> bool {
        matches!(self.index_order(), KeyOrder::UserKeys(_))
    }

    /// Bytes this reader holds outside the block cache: itself, and its
    /// index and filter blocks unless they are in the cache (RocksDB's
    /// `BlockBasedTable::ApproximateMemoryUsage`, summed by the property
    /// `ebb.estimate-table-readers-mem`).
    pub fn memory_usage(&self) -> usize {
        std::mem::size_of::<Table>() + self.index.owned_charge() + self.filter.memory_usage()
    }

    /// False only when the bloom filter proves `user_key` absent; true for a
    /// table without a filter, and when the filter cannot be read (the data
    /// block read that follows reports the damage, if any).
    pub fn key_may_match(&self, user_key: &[u8]) -> bool {
        self.filter.key_may_match(&self.blocks, user_key)
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
        self.filter.start_probe(&self.blocks, user_key, hash)
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
        verdict: impl FnMut(usize, bool),
    ) {
        self.filter.keys_may_match(&self.blocks, n, key, hash, verdict)
    }

    /// The first entry whose internal key is `>= lookup`, if its user key is
    /// `lookup`'s user key. `lookup` is an internal key, normally
    /// `(user_key, snapshot sequence, KIND_FOR_SEEK)`, so the answer is the
    /// newest version visible at that sequence (value or tombstone).
    #[cfg(any(test, feature = "internals"))]
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
    #[cfg(any(test, feature = "internals"))]
    fn get_past_filter(&self, rs: &ReadSettings, lookup: &[u8]) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.get_past_filter_with(rs, lookup, |k, v| (k.to_vec(), v.to_vec()))
    }

    /// [`Table::get_past_filter`] handing the entry found (internal key,
    /// value) to `found` instead of copying both out. The blocks are borrowed
    /// from the table or the cache for the lookup, not reference-counted: a
    /// point read touches no count that readers on other cores share.
    fn get_past_filter_with<R>(
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
        // A hit is searched in place, the entry held only for the search.
        if let Some(r) = self.blocks.with_cached_data_block(handle, &mut search) {
            return r;
        }
        let (data_block, _data_pin) = self.blocks.load_data_block(handle, rs, None)?;
        search(&data_block)
    }

    /// [`Table::get_past_filter`] handing `found` the entry's internal key and
    /// its value as a [`PinnableSlice`] of the data block: no copy of the
    /// value, and the block's cache entry (if cached) referenced until the
    /// slice is dropped (RocksDB's `Get` into a `PinnableSlice`).
    fn get_past_filter_pinned<R>(
        &self,
        rs: &ReadSettings,
        lookup: &[u8],
        found: impl FnOnce(&[u8], PinnableSlice) -> R,
    ) -> Result<Option<R>> {
        let Some(handle) = self.data_handle_for(lookup)? else { return Ok(None) };
        let (block, entry) = self.blocks.data_block(handle, rs, None)?;
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
            .and_then(|()| self.blocks.meta_block(&self.index, BlockKind::Index));
        let index_block = index_ref.and_then(|r| match r.value().block_arc() {
            Some(b) => Ok(b),
            None => Err(self.index_corruption("cached as a filter")),
        });
        let index_block = match index_block {
            Ok(b) => b,
            Err(e) => return (0..n).for_each(|k| found(k, Err(e.duplicate()))),
        };
        let mut index = IndexCursor::new(self, index_block);
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
            while end < n && self.index_order().compare(index.key(), lookup(end)).is_ge() {
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
            if self.blocks.with_cached_data_block(handle, &mut search).is_none() {
                match self.blocks.load_data_block(handle, rs, None) {
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
            let mut index = IndexCursor::new(self, block);
            index.seek(self, lookup);
            if !index.valid() {
                return index.error(self).map_or(Ok(None), Err);
            }
            return BlockHandle::decode_exact(index.value()).map(Some).map_err(|r| index.entry_corruption(self, &r));
        }
        self.blocks.with_meta_block(&self.index, BlockKind::Index, |v| {
            let index_block = v.block().ok_or_else(|| self.index_corruption("cached as a filter"))?;
            let mut index = BlockIterator::new(index_block, self.index_order().clone());
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
            return Err(self.corruption(handle.offset, r));
        }
        // With timestamps, the first entry at or after `(key, read's
        // timestamp)` of the key is its newest version at or below it.
        if data.valid() && self.data_order.same_key(user_key(data.key()), user_key(lookup)) {
            Ok(Some(found(data.key(), data.value_range())))
        } else {
            Ok(None)
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
        let mut index = IndexCursor::new(self, index_block);
        index.seek(self, internal_key);
        if index.valid() {
            if let Ok(h) = BlockHandle::decode_exact(index.value()) {
                return h.offset;
            }
        }
        self.properties.data_size
    }

    /// Corruption at `offset` of this table's file.
    pub(super) fn corruption(&self, offset: u64, reason: impl Into<String>) -> Error {
        self.blocks.reader().corruption(offset, reason)
    }

    /// Corruption of the index block.
    pub(super) fn index_corruption(&self, reason: &str) -> Error {
        self.corruption(self.index_offset, format!("index block: {reason}"))
    }

    /// The file, for access hints.
    pub(super) fn file(&self) -> &dyn RandomAccessFile {
        self.blocks.reader().file()
    }

    /// How index keys (and the top-level filter index's) compare with a
    /// lookup: `UserKeys` in format versions 3 and 4, else `Internal`.
    pub(super) fn index_order(&self) -> &KeyOrder {
        self.blocks.index_order()
    }

    /// How data-block keys compare.
    pub(super) fn data_order(&self) -> &KeyOrder {
        &self.data_order
    }

    /// True when the index is partitions under a top-level index.
    pub(super) fn partitioned_index(&self) -> bool {
        self.partitioned_index
    }

    /// Auto readahead's sizes for the table's iterators: initial and max.
    pub(super) fn auto_readahead(&self) -> (usize, usize) {
        self.auto_readahead
    }

    /// The index partition at `handle`, through the block cache as the other
    /// index blocks (read verified; inserted with their priority), and the
    /// handle that keeps it cached while it is used.
    pub(super) fn index_partition(&self, handle: BlockHandle) -> Result<(Arc<Block>, Option<CacheHandle>)> {
        let h = self.blocks.cached_meta(handle, BlockKind::Index)?;
        let block = h
            .value()
            .block_arc()
            .ok_or_else(|| self.corruption(handle.offset, "index partition: cached as a filter"))?;
        Ok((block, Some(h)))
    }

    /// The index block, and the handle that keeps it cached while it is used.
    pub(super) fn index_block(&self) -> Result<(Arc<Block>, Option<CacheHandle>)> {
        let r = self.blocks.meta_block(&self.index, BlockKind::Index)?;
        let block = r.value().block_arc().ok_or_else(|| self.index_corruption("cached as a filter"))?;
        Ok((block, r.into_handle()))
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
        self.blocks.data_block(handle, rs, prefetch)
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
    use std::sync::atomic::AtomicBool;

    use parking_lot::Mutex;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::key::{compare_bytewise_internal_keys, KIND_FOR_SEEK, MAX_SEQUENCE};
    use crate::sst::block_builder::BlockBuilder;
    use crate::sst::table_builder::{TableBuilder, TableBuilderOptions};
    use crate::sst::test_tables::*;
    use crate::sst::PinnableSlice;
    use crate::util::checksum::{mask, ChecksumType};
    use crate::util::compression::CompressionType;

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
        let fixed: Entries = (0..3000u32)
            .map(|i| (ikey(format!("key{i:013}").as_bytes(), 1, ValueKind::Value), vec![b'v'; 100]))
            .collect();
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
            assert!(
                over_with < over_without,
                "deviation {deviation}: {over_with} blocks past block_size, {over_without} without"
            );
            assert_eq!(scan_forward(&t, ReadSettings::default()).unwrap(), random);
        }
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

    /// Entries of `a`, `k` (two versions), `m` (a tombstone) and `p` (a merge
    /// operand), and a range tombstone over `[c, l)` at sequence 4.
    fn lookup_table(o: TableBuilderOptions) -> Arc<Table> {
        let entries: Entries = vec![
            (ikey(b"a", 7, ValueKind::Value), b"a7".to_vec()),
            (ikey(b"k", 5, ValueKind::Value), b"five".to_vec()),
            (ikey(b"k", 3, ValueKind::Value), b"three".to_vec()),
            (ikey(b"m", 2, ValueKind::Deletion), Vec::new()),
            (ikey(b"p", 6, ValueKind::Merge), b"+1".to_vec()),
        ];
        let tombstone = RangeTombstone { start: b"c".to_vec(), end: b"l".to_vec(), seq: 4 };
        open(&build_with_tombstones(&entries, &[tombstone], o).0).unwrap()
    }

    /// What `t` holds for `key` read at `seq`, the value copied (`V`) and
    /// pinned alike, with the filter probed by `lookup` or started first.
    fn look(t: &Table, key: &[u8], seq: u64, x: Option<Arc<dyn SliceTransform>>) -> (String, SequenceNumber) {
        let lookup = ikey(key, seq, KIND_FOR_SEEK);
        let extractor = move || x.clone();
        let read = PointLookup { key, lookup: &lookup, seq, rs: ReadSettings::default(), prefix_extractor: &extractor };
        let show = |got: TableGet<Vec<u8>>| {
            let entry = match got.entry {
                TableEntry::FilteredOut => "filtered".to_string(),
                TableEntry::Absent => "absent".to_string(),
                TableEntry::Unparsable => "unparsable".to_string(),
                TableEntry::Found(s, kind, v) => format!("{kind:?}@{s}={}", String::from_utf8_lossy(&v)),
            };
            (entry, got.tombstone)
        };
        let copied = show(t.lookup::<Vec<u8>>(&read, None).unwrap());
        let probe = t.start_filter_probe(key, crate::sst::filter::filter_hash(key));
        assert_eq!(show(t.lookup::<Vec<u8>>(&read, Some(probe)).unwrap()), copied, "probed first");
        let pinned = t.lookup::<PinnableSlice>(&read, None).unwrap();
        let pinned = TableGet {
            entry: match pinned.entry {
                // As a copy keeps it: no value but a value's (or blob index's).
                TableEntry::Found(s, kind, v) => {
                    TableEntry::Found(s, kind, if kind.is_value() { v.to_vec() } else { Vec::new() })
                }
                TableEntry::FilteredOut => TableEntry::FilteredOut,
                TableEntry::Absent => TableEntry::Absent,
                TableEntry::Unparsable => TableEntry::Unparsable,
            },
            tombstone: pinned.tombstone,
        };
        assert_eq!(show(pinned), copied, "pinned");
        copied
    }

    #[test]
    fn a_lookup_answers_for_its_table_with_the_tombstone_covering_the_key() {
        let unfiltered =
            TableBuilderOptions { bloom_bits_per_key: 0, ..opts(CompressionType::None, ChecksumType::Crc32c, 64) };
        let t = lookup_table(unfiltered);
        let found = |s: &str, tombstone| (s.to_string(), tombstone);
        // The newest version at or below the read's sequence, and the
        // table's newest tombstone over the key that the read sees.
        assert_eq!(look(&t, b"k", 10, None), found("Value@5=five", 4));
        assert_eq!(look(&t, b"k", 4, None), found("Value@3=three", 4));
        assert_eq!(look(&t, b"k", 3, None), found("Value@3=three", 0), "a newer tombstone is not seen");
        assert_eq!(look(&t, b"k", 2, None), found("absent", 0));
        assert_eq!(look(&t, b"a", 10, None), found("Value@7=a7", 0), "outside the tombstone's range");
        assert_eq!(look(&t, b"m", 10, None), found("Deletion@2=", 0), "a tombstone is an entry, its value dropped");
        assert_eq!(look(&t, b"p", 10, None), found("Merge@6=", 0), "an operand's value is not copied");
        // A key the table lacks still learns of the tombstone over it: it
        // deletes the key's versions in older tables.
        assert_eq!(look(&t, b"d", 10, None), found("absent", 4));
        assert_eq!(look(&t, b"z", 10, None), found("absent", 0));

        // With a whole-key filter, keys it rules out are not searched.
        let t = lookup_table(opts(CompressionType::None, ChecksumType::Crc32c, 64));
        assert_eq!(look(&t, b"k", 10, None), found("Value@5=five", 4));
        let absent: Vec<Vec<u8>> = (0..500).map(|i| format!("d{i}").into_bytes()).collect();
        let filtered = absent.iter().filter(|k| look(&t, k, 10, None) == found("filtered", 4)).count();
        let passed = absent.iter().filter(|k| look(&t, k, 10, None) == found("absent", 4)).count();
        assert_eq!(filtered + passed, absent.len());
        assert!(filtered > 450, "the filter ruled out {filtered} of 500 absent keys");
    }

    #[test]
    fn a_lookup_asks_a_prefix_filter_through_the_familys_extractor_only_when_the_table_has_one() {
        let prefixes = TableBuilderOptions {
            whole_key_filtering: false,
            prefix_extractor: Some(crate::prefix::Extractor(crate::prefix::fixed(1))),
            ..opts(CompressionType::None, ChecksumType::Crc32c, 64)
        };
        let t = lookup_table(prefixes);
        let x = || Some(crate::prefix::fixed(1));
        assert_eq!(look(&t, b"k", 10, x()), ("Value@5=five".to_string(), 4));
        // Keys of prefixes the table lacks: ruled out by the prefix filter,
        // but only under the extractor that wrote it.
        let absent: Vec<Vec<u8>> = (b'q'..=b'z').map(|c| vec![c, b'1']).collect();
        let filtered = absent.iter().filter(|k| look(&t, k, 10, x()).0 == "filtered").count();
        assert!(filtered >= 8, "the prefix filter ruled out {filtered} of 10 absent prefixes");
        assert!(absent.iter().all(|k| look(&t, k, 10, None).0 == "absent"), "no extractor: no prefix check");
        let other = || Some(crate::prefix::fixed(2));
        assert!(absent.iter().all(|k| look(&t, k, 10, other()).0 == "absent"), "another extractor's prefixes");
        // A table of whole keys never asks for the family's extractor.
        let t = lookup_table(opts(CompressionType::None, ChecksumType::Crc32c, 64));
        let asked = std::cell::Cell::new(0);
        let extractor = || {
            asked.set(asked.get() + 1);
            x()
        };
        let lookup = ikey(b"k", 10, KIND_FOR_SEEK);
        let read = PointLookup {
            key: b"k",
            lookup: &lookup,
            seq: 10,
            rs: ReadSettings::default(),
            prefix_extractor: &extractor,
        };
        assert!(matches!(t.lookup::<Vec<u8>>(&read, None).unwrap().entry, TableEntry::Found(5, ValueKind::Value, _)));
        assert_eq!(asked.get(), 0);
    }

    #[test]
    fn a_batched_lookup_answers_each_key_as_a_single_lookup_does() {
        for bits in [0, 10] {
            let t = lookup_table(TableBuilderOptions {
                bloom_bits_per_key: bits,
                ..opts(CompressionType::None, ChecksumType::Crc32c, 64)
            });
            let keys: Vec<Vec<u8>> =
                [&b"a"[..], b"b", b"d", b"k", b"m", b"n", b"p", b"z"].iter().map(|k| k.to_vec()).collect();
            let lookups: Vec<Vec<u8>> = keys.iter().map(|k| ikey(k, 10, KIND_FOR_SEEK)).collect();
            let hashes: Vec<u64> = keys.iter().map(|k| crate::sst::filter::filter_hash(k)).collect();
            let mut wanted: Vec<usize> = (0..keys.len()).collect();
            let mut passing = Vec::new();
            let mut answers = vec![String::from("none"); keys.len()];
            t.multi_get(
                &ReadSettings::default(),
                10,
                &mut wanted,
                &mut passing,
                |i| &keys[i],
                |i| &lookups[i],
                |i| hashes[i],
                |i, entry| {
                    answers[i] = match entry {
                        BatchEntry::Covered => "covered".into(),
                        BatchEntry::FilteredOut => "filtered".into(),
                        BatchEntry::Found(k, v) => {
                            let p = parse_internal_key(k).unwrap();
                            let v = if p.kind.is_value() { String::from_utf8_lossy(v) } else { "".into() };
                            format!("{:?}@{}={v}", p.kind, p.seq)
                        }
                        BatchEntry::Failed(e) => format!("{e}"),
                    }
                },
            );
            for (i, k) in keys.iter().enumerate() {
                let (single, tombstone) = look(&t, k, 10, None);
                let want = match single.as_str() {
                    _ if tombstone > 0 => "covered".to_string(),
                    "absent" => "none".to_string(),
                    _ => single,
                };
                assert_eq!(answers[i], want, "bits {bits}: key {}", String::from_utf8_lossy(k));
            }
            assert_eq!(wanted.len(), keys.len() - 2, "the covered keys d and k leave the batch");
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
        assert_eq!(
            compare_bytewise_internal_keys(&t.properties().largest_key, &entries.last().unwrap().0),
            Ordering::Equal
        );
    }
}
