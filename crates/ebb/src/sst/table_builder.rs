//! Writes a table file front to back (LevelDB `table/table_builder.cc`).
//!
//! File order: data blocks, filter block, index block, properties block,
//! metaindex block, footer (docs/format.md). The index entry for a data
//! block is written once the next block's first key is known, so the
//! separator can be shortened to something between the two blocks.
//!
//! One builder writes one file from one thread. After an I/O error every later
//! call returns that error again; an out-of-order key is refused without
//! harming the table being built.

use std::cmp::Ordering;

use super::block_builder::BlockBuilder;
use super::filter::BloomFilterBuilder;
use super::format::{
    block_trailer, maybe_compress, BlockHandle, Footer, BLOCK_TRAILER_LEN, FORMAT_VERSION,
    FORMAT_VERSION_PARTITIONED_INDEX, FORMAT_VERSION_PARTITIONED_USER_KEY_INDEX, FORMAT_VERSION_RANGE_DELETIONS,
    FORMAT_VERSION_USER_KEY_INDEX,
};
use std::sync::Arc;

use super::properties::TableProperties;
use super::{FILTER_BLOCK_NAME, PARTITIONED_FILTER_BLOCK_NAME, PROPERTIES_BLOCK_NAME, RANGE_DEL_BLOCK_NAME};
use crate::clock::{Clock, SystemClock};
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::key::{internal_separator, internal_successor, make_internal_key, user_key, ValueKind, TRAILER_LEN};
use crate::key::{MAX_KEY_SIZE, MAX_VALUE_SIZE};
use crate::prefix::Extractor;
use crate::range_del::RangeTombstone;
use crate::table_properties::{CollectorContext, Collectors, EntryType, TablePropertiesCollector};
use crate::util::checksum::ChecksumType;
use crate::util::compression::CompressionType;

/// Largest data block target accepted; with the key and value limits this
/// keeps every block's offsets within the fixed32 restart array.
const MAX_BLOCK_SIZE: usize = 1 << 30;

/// How tables are written.
#[derive(Clone)]
pub struct TableBuilderOptions {
    /// Target uncompressed size of a data block (RocksDB `block_size`).
    pub block_size: usize,
    /// Keys between restart points in data blocks (RocksDB `block_restart_interval`).
    pub block_restart_interval: usize,
    /// Entries between restart points in index blocks and index partitions
    /// (RocksDB `index_block_restart_interval`).
    pub index_block_restart_interval: usize,
    /// A data block holding more than `100 - block_size_deviation` percent
    /// of `block_size` is closed before an entry that would take it past
    /// `block_size` (RocksDB `block_size_deviation` and its
    /// `FlushBlockBySizePolicy`); 0, or over 100, closes blocks only once
    /// they reach `block_size`.
    pub block_size_deviation: u32,
    /// Bloom filter bits per distinct user key; 0 writes no filter.
    pub bloom_bits_per_key: u32,
    /// Checksum of every block.
    pub checksum: ChecksumType,
    /// Compression of data and index blocks.
    pub compression: CompressionType,
    /// The column family the table is written for, recorded in its
    /// properties (0, the default family, unless set).
    pub column_family: u32,
    /// That family's name, recorded in its properties when set.
    pub column_family_name: Option<Arc<str>>,
    /// Cut the index into partitions of about this many bytes under a
    /// top-level index (RocksDB `kTwoLevelIndexSearch` with
    /// `metadata_block_size`); `None`, one index block.
    pub index_partition_size: Option<usize>,
    /// With a partitioned index, cut the bloom filter at the same
    /// boundaries, one filter partition per index partition under a top-level
    /// filter index (RocksDB `partition_filters`); ignored without one.
    pub partition_filters: bool,
    /// Write the index with user keys when no two adjacent data blocks share
    /// a user key (format versions 3 and 4; RocksDB's `format_version >= 3`).
    /// Default true; false writes internal keys (versions 1 and 2), as
    /// earlier versions of Ebb did.
    pub user_key_index: bool,
    /// Add each user key to the bloom filter (RocksDB `whole_key_filtering`).
    pub whole_key_filtering: bool,
    /// Add each key's prefix to the bloom filter too, and name the
    /// extractor in the properties.
    pub prefix_extractor: Option<Extractor>,
    /// The order of the keys (the column family's comparator), named in
    /// the properties.
    pub comparator: UserComparator,
    /// Makers of the user's table property collectors (the family's
    /// `table_properties_collector_factories`).
    pub collectors: Collectors,
    /// Whose wall-clock seconds the table's `creation_time` property is
    /// stamped with when it is finished: the database's clock
    /// (`Options::clock`), so file ages (periodic compaction, `ttl`, FIFO's
    /// `ttl`) are read on the time line the engine judges them by. Default
    /// the system's.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for TableBuilderOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The clock is a time source, not a setting: left out.
        f.debug_struct("TableBuilderOptions")
            .field("block_size", &self.block_size)
            .field("block_restart_interval", &self.block_restart_interval)
            .field("index_block_restart_interval", &self.index_block_restart_interval)
            .field("block_size_deviation", &self.block_size_deviation)
            .field("bloom_bits_per_key", &self.bloom_bits_per_key)
            .field("checksum", &self.checksum)
            .field("compression", &self.compression)
            .field("column_family", &self.column_family)
            .field("column_family_name", &self.column_family_name)
            .field("index_partition_size", &self.index_partition_size)
            .field("partition_filters", &self.partition_filters)
            .field("user_key_index", &self.user_key_index)
            .field("whole_key_filtering", &self.whole_key_filtering)
            .field("prefix_extractor", &self.prefix_extractor)
            .field("comparator", &self.comparator)
            .field("collectors", &self.collectors)
            .finish_non_exhaustive()
    }
}

impl Default for TableBuilderOptions {
    fn default() -> Self {
        TableBuilderOptions {
            block_size: 4096,
            block_restart_interval: 16,
            index_block_restart_interval: 16,
            block_size_deviation: 10,
            bloom_bits_per_key: 10,
            checksum: ChecksumType::Crc32c,
            compression: CompressionType::None,
            column_family: 0,
            column_family_name: None,
            index_partition_size: None,
            partition_filters: false,
            user_key_index: true,
            whole_key_filtering: true,
            prefix_extractor: None,
            comparator: UserComparator::BYTEWISE,
            collectors: Collectors::default(),
            clock: Arc::new(SystemClock::new()),
        }
    }
}

/// An index partition cut by the builder, in both key forms.
struct IndexPartition {
    /// Its last index key (an internal key): its key in the top-level index.
    last_key: Vec<u8>,
    block: Vec<u8>,
    user_block: Vec<u8>,
}

impl IndexPartition {
    fn key(&self, user_keys: bool) -> &[u8] {
        if user_keys {
            user_key(&self.last_key)
        } else {
            &self.last_key
        }
    }
}

/// Builds one table file from keys added in increasing internal-key order.
pub struct TableBuilder {
    file: Box<dyn WritableFile>,
    opts: TableBuilderOptions,
    file_name: String,
    offset: u64,
    data_block: BlockBuilder,
    /// The index with internal keys as separators.
    index_block: BlockBuilder,
    /// The same index with the separators' user keys (RocksDB's
    /// `index_key_is_user_key`): written instead of `index_block` unless two
    /// adjacent data blocks share a user key, which only a separator with a
    /// sequence number tells apart (`index_needs_seq`).
    user_index_block: BlockBuilder,
    index_needs_seq: bool,
    /// With a partitioned index: the partitions cut so far, in both forms.
    /// `index_block` and `user_index_block` are then the partition being
    /// filled.
    index_partitions: Vec<IndexPartition>,
    /// The last key added to `index_block`.
    last_index_key: Vec<u8>,
    /// With partitioned filters: the filter of each index partition cut so
    /// far (`filter` then collects the keys of the partition being filled).
    filter_partitions: Vec<Vec<u8>>,
    filter: Option<BloomFilterBuilder>,
    /// Handle of the last data block written, whose index entry waits for the
    /// next key (or `finish`).
    pending_index: Option<BlockHandle>,
    last_key: Vec<u8>,
    props: TableProperties,
    failed: Option<Error>,
    /// Range tombstones for the range-deletion block.
    range_dels: Vec<RangeTombstone>,
    /// The last prefix added to the filter.
    last_prefix: Option<Vec<u8>>,
    /// The user's property collectors for this table; one that panicked is
    /// `None` from then on (module `table_properties`).
    collectors: Vec<Option<Box<dyn TablePropertiesCollector>>>,
}

impl TableBuilder {
    /// A builder writing to `file` (positioned at its start). `file_name`
    /// appears in errors.
    pub fn new(file: Box<dyn WritableFile>, mut opts: TableBuilderOptions, file_name: String) -> Self {
        opts.block_size = opts.block_size.clamp(1, MAX_BLOCK_SIZE);
        let filter = (opts.bloom_bits_per_key > 0).then(|| BloomFilterBuilder::new(opts.bloom_bits_per_key));
        let props = TableProperties {
            compression: opts.compression,
            checksum: opts.checksum,
            column_family: Some(opts.column_family),
            column_family_name: opts.column_family_name.as_ref().map(|n| n.to_string()),
            prefix_extractor_name: opts.prefix_extractor.as_ref().map(|Extractor(x)| x.name().to_string()),
            whole_key_filtering: opts.whole_key_filtering,
            comparator_name: (!opts.comparator.is_bytewise()).then(|| opts.comparator.name().to_string()),
            ..Default::default()
        };
        let context = CollectorContext { column_family_id: opts.column_family };
        let collectors = opts
            .collectors
            .0
            .iter()
            .map(|f| std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.create(context))).ok())
            .collect();
        TableBuilder {
            collectors,
            file,
            data_block: BlockBuilder::new(opts.block_restart_interval),
            index_block: BlockBuilder::new(opts.index_block_restart_interval),
            user_index_block: BlockBuilder::new(opts.index_block_restart_interval),
            index_needs_seq: false,
            index_partitions: Vec::new(),
            last_index_key: Vec::new(),
            filter_partitions: Vec::new(),
            opts,
            file_name,
            offset: 0,
            filter,
            pending_index: None,
            last_key: Vec::new(),
            props,
            failed: None,
            range_dels: Vec::new(),
            last_prefix: None,
        }
    }

    /// Adds a range tombstone, written to the table's range-deletion block
    /// ([`RANGE_DEL_BLOCK_NAME`]) at `finish`; any order.
    pub fn add_range_deletion(&mut self, tombstone: RangeTombstone) {
        self.range_dels.push(tombstone);
    }

    /// Range tombstones added so far.
    pub fn num_range_deletions(&self) -> usize {
        self.range_dels.len()
    }

    /// Hands an entry to every collector still working; one that panics is
    /// dropped (module `table_properties`).
    fn collect(&mut self, internal_key: &[u8], value: &[u8]) {
        let Some(p) = crate::key::parse_internal_key(internal_key) else { return };
        let (entry_type, offset) = (EntryType::of(p.kind), self.offset);
        for slot in &mut self.collectors {
            if let Some(c) = slot.as_mut() {
                let call =
                    std::panic::AssertUnwindSafe(|| c.add_user_key(p.user_key, value, entry_type, p.seq, offset));
                if std::panic::catch_unwind(call).is_err() {
                    *slot = None;
                }
            }
        }
    }

    /// Every collector's properties: reserved names left out, the first
    /// collector's value kept where two name the same property.
    fn collected_properties(&mut self) -> std::collections::BTreeMap<String, Vec<u8>> {
        let mut out = std::collections::BTreeMap::new();
        for slot in &mut self.collectors {
            let Some(c) = slot.as_mut() else { continue };
            let Ok(props) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c.finish())) else { continue };
            for (name, value) in props {
                if !crate::table_properties::is_reserved(&name) && !name.is_empty() {
                    out.entry(name).or_insert(value);
                }
            }
        }
        out
    }

    /// Adds an entry. Keys must be strictly increasing in internal-key order
    /// (user keys in the options' comparator);
    /// anything else is [`Error::InvalidArgument`] and the entry is not added.
    pub fn add(&mut self, internal_key: &[u8], value: &[u8]) -> Result<()> {
        if let Some(e) = &self.failed {
            return Err(e.duplicate());
        }
        if internal_key.len() < TRAILER_LEN || internal_key.len() > MAX_KEY_SIZE + TRAILER_LEN {
            return Err(Error::invalid(format!(
                "{}: internal key of {} bytes (must be 8 to {} bytes)",
                self.file_name,
                internal_key.len(),
                MAX_KEY_SIZE + TRAILER_LEN
            )));
        }
        if value.len() > MAX_VALUE_SIZE {
            return Err(Error::invalid(format!("{}: value of {} bytes is too large", self.file_name, value.len())));
        }
        if self.props.num_entries > 0
            && self.opts.comparator.compare_internal(&self.last_key, internal_key) != Ordering::Less
        {
            return Err(Error::invalid(format!(
                "{}: keys added out of order: {:?} after {:?}",
                self.file_name,
                String::from_utf8_lossy(internal_key),
                String::from_utf8_lossy(&self.last_key)
            )));
        }
        if !self.collectors.is_empty() {
            self.collect(internal_key, value);
        }
        if self.block_full_before(internal_key, value) {
            self.flush_data_block()?;
        }
        if let Some(handle) = self.pending_index.take() {
            // A key spanning two blocks needs the sequence in the index;
            // with timestamps so do two versions of one key: a read of an
            // older version must not stop at the first block's end.
            if self.opts.comparator.same_key(user_key(&self.last_key), user_key(internal_key)) {
                self.index_needs_seq = true;
            }
            let separator = internal_separator(&self.opts.comparator, &self.last_key, internal_key);
            self.add_index_entry(separator, handle);
        }
        if let Some(f) = &mut self.filter {
            // Filters hold keys without their timestamps (RocksDB's): a read
            // at any timestamp probes the key alone.
            let key = self.opts.comparator.strip_timestamp(user_key(internal_key));
            if self.opts.whole_key_filtering {
                f.add_key(key);
            }
            if let Some(Extractor(x)) = &self.opts.prefix_extractor {
                if x.in_domain(key) {
                    let prefix = x.transform(key);
                    if self.last_prefix.as_deref() != Some(prefix) {
                        f.add_key(prefix);
                        self.last_prefix = Some(prefix.to_vec());
                    }
                }
            }
        }
        self.track(internal_key, value);
        self.data_block.add(internal_key, value);
        self.last_key.clear();
        self.last_key.extend_from_slice(internal_key);
        if self.data_block.estimated_size() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Whether the data block is closed before `(key, value)` joins it
    /// (RocksDB's `FlushBlockBySizePolicy::BlockAlmostFull`): it is not
    /// empty, holds more than `100 - block_size_deviation` percent of
    /// `block_size`, and the entry would take it past `block_size`. A block
    /// that reaches `block_size` is closed after the entry that makes it
    /// (in `add`), as with no deviation.
    fn block_full_before(&self, key: &[u8], value: &[u8]) -> bool {
        let deviation = self.opts.block_size_deviation as usize;
        if self.data_block.is_empty() || deviation == 0 || deviation > 100 {
            return false;
        }
        let block_size = self.opts.block_size;
        let limit = (block_size * (100 - deviation)).div_ceil(100);
        self.data_block.estimated_size() > limit && self.data_block.estimated_size_after(key, value) > block_size
    }

    /// Adds a data block's index entry; with a partitioned index, cuts the
    /// partition once it reaches its size.
    fn add_index_entry(&mut self, key: Vec<u8>, handle: BlockHandle) {
        let handle = handle.encode();
        self.index_block.add(&key, &handle);
        // The user-key form only while it can still be the one written.
        if self.index_keys_are_user_keys() {
            self.user_index_block.add(user_key(&key), &handle);
        }
        self.last_index_key = key;
        if let Some(size) = self.opts.index_partition_size {
            if self.index_block.estimated_size() >= size {
                self.cut_index_partition();
            }
        }
    }

    /// True when the filter is cut into partitions beside the index.
    fn filters_partitioned(&self) -> bool {
        self.opts.partition_filters && self.opts.index_partition_size.is_some() && self.filter.is_some()
    }

    /// Closes the index partition being filled and, with partitioned
    /// filters, the filter of the keys of its data blocks: every key added so
    /// far belongs to a block indexed so far (a block's index entry is added
    /// before the next block's first key reaches the filter).
    fn cut_index_partition(&mut self) {
        if self.index_block.is_empty() {
            return;
        }
        self.index_partitions.push(IndexPartition {
            last_key: std::mem::take(&mut self.last_index_key),
            block: self.index_block.finish(),
            user_block: self.user_index_block.finish(),
        });
        if self.filters_partitioned() {
            let bits = self.opts.bloom_bits_per_key;
            if let Some(f) = &mut self.filter {
                let full = std::mem::replace(f, BloomFilterBuilder::new(bits));
                self.filter_partitions.push(full.finish().unwrap_or_default());
            }
        }
    }

    /// Writes the filter: one block, or the partitions and then the
    /// top-level filter index keyed as the top-level index. Returns the
    /// metaindex entry naming it, if there is a filter.
    fn write_filter(&mut self) -> Result<Option<(&'static str, BlockHandle)>> {
        let start = self.offset;
        let entry = if self.filters_partitioned() {
            let mut top = BlockBuilder::new(1);
            let partitions = std::mem::take(&mut self.filter_partitions);
            let user_keys = self.index_keys_are_user_keys();
            let keys: Vec<Vec<u8>> = self.index_partitions.iter().map(|p| p.key(user_keys).to_vec()).collect();
            for (last_key, filter) in keys.iter().zip(partitions) {
                let h = self.write_block(&filter, false)?;
                top.add(last_key, &h.encode());
            }
            self.filter = None;
            Some((PARTITIONED_FILTER_BLOCK_NAME, self.write_block(&top.finish(), false)?))
        } else {
            match self.filter.take().and_then(BloomFilterBuilder::finish) {
                Some(filter) => Some((FILTER_BLOCK_NAME, self.write_block(&filter, false)?)),
                None => None,
            }
        };
        self.props.filter_size = self.offset - start;
        Ok(entry)
    }

    /// Writes the index: one block, or the partitions and then the
    /// top-level index naming each by its last key. Returns the handle the
    /// footer names.
    fn write_index(&mut self) -> Result<BlockHandle> {
        let start = self.offset;
        let user_keys = self.index_keys_are_user_keys();
        let handle = if self.opts.index_partition_size.is_some() {
            self.cut_index_partition();
            let mut top = BlockBuilder::new(1);
            for partition in std::mem::take(&mut self.index_partitions) {
                let h = self.write_block(if user_keys { &partition.user_block } else { &partition.block }, true)?;
                top.add(partition.key(user_keys), &h.encode());
                self.props.index_partitions += 1;
            }
            self.write_block(&top.finish(), true)?
        } else {
            let index = if user_keys { self.user_index_block.finish() } else { self.index_block.finish() };
            self.write_block(&index, true)?
        };
        self.props.index_size = self.offset - start;
        Ok(handle)
    }

    /// True when the index is written with user keys: no two adjacent data
    /// blocks share a user key.
    fn index_keys_are_user_keys(&self) -> bool {
        self.opts.user_key_index && !self.index_needs_seq
    }

    fn track(&mut self, internal_key: &[u8], value: &[u8]) {
        let t = crate::key::trailer(internal_key);
        let seq = t >> 8;
        let p = &mut self.props;
        if p.num_entries == 0 {
            p.smallest_key = internal_key.to_vec();
            p.smallest_seqno = seq;
            p.largest_seqno = seq;
        }
        p.smallest_seqno = p.smallest_seqno.min(seq);
        p.largest_seqno = p.largest_seqno.max(seq);
        p.num_entries += 1;
        if ValueKind::from_u8((t & 0xff) as u8).is_some_and(ValueKind::is_deletion) {
            p.num_deletions += 1;
        }
        p.raw_key_size += internal_key.len() as u64;
        p.raw_value_size += value.len() as u64;
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Bytes written so far plus the data block being filled: what the file
    /// would hold, give or take the index, filter and footer.
    pub fn estimated_file_size(&self) -> u64 {
        self.offset + self.data_block.estimated_size() as u64
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let raw = self.data_block.finish();
        let handle = self.write_block(&raw, true)?;
        self.props.num_data_blocks += 1;
        self.pending_index = Some(handle);
        Ok(())
    }

    /// Writes a block and its trailer, compressed when `compress` and it pays.
    fn write_block(&mut self, raw: &[u8], compress: bool) -> Result<BlockHandle> {
        let compressed = if compress { maybe_compress(raw, self.opts.compression) } else { None };
        let (contents, ctype) = match &compressed {
            Some((c, t)) => (c.as_slice(), *t),
            None => (raw, CompressionType::None),
        };
        let trailer = block_trailer(self.opts.checksum, contents, ctype);
        let handle = BlockHandle::new(self.offset, contents.len() as u64);
        let written = self.file.append(contents).and_then(|()| self.file.append(&trailer));
        written.map_err(|e| self.fail(e))?;
        self.offset += (contents.len() + BLOCK_TRAILER_LEN) as u64;
        Ok(handle)
    }

    fn fail(&mut self, e: Error) -> Error {
        self.failed = Some(e.duplicate());
        e
    }

    /// Writes the remaining blocks and the footer, syncs the file, and returns
    /// the table's properties.
    pub fn finish(mut self) -> Result<TableProperties> {
        if let Some(e) = &self.failed {
            return Err(e.duplicate());
        }
        self.flush_data_block()?;
        self.props.data_size = self.offset;
        if let Some(handle) = self.pending_index.take() {
            let successor = internal_successor(&self.opts.comparator, &self.last_key);
            self.add_index_entry(successor, handle);
        }
        self.props.largest_key = self.last_key.clone();

        let mut meta = Vec::new();
        if self.opts.index_partition_size.is_some() {
            self.cut_index_partition();
        }
        meta.extend(self.write_filter()?);

        let index_handle = self.write_index()?;
        // After the index, before the properties (docs/format.md).
        if !self.range_dels.is_empty() {
            // Sorted as internal keys (start, then newest first), each entry
            // the start's internal key and the end (RocksDB's layout).
            let mut dels = std::mem::take(&mut self.range_dels);
            let cmp = &self.opts.comparator;
            dels.sort_by(|a, b| cmp.compare(&a.start, &b.start).then(b.seq.cmp(&a.seq)));
            let mut block = BlockBuilder::new(1);
            for t in &dels {
                block.add(&make_internal_key(&t.start, t.seq, ValueKind::RangeDeletion), &t.end);
            }
            self.props.num_range_deletions = dels.len() as u64;
            meta.push((RANGE_DEL_BLOCK_NAME, self.write_block(&block.finish(), false)?));
        }

        self.props.creation_time = self.opts.clock.now_secs();
        if !self.collectors.is_empty() {
            self.props.user_collected_properties = self.collected_properties();
        }
        let props_block = self.props.encode();
        meta.push((PROPERTIES_BLOCK_NAME, self.write_block(&props_block, false)?));

        // Names are added in bytewise order, as the metaindex block requires.
        meta.sort_by(|a, b| a.0.cmp(b.0));
        let mut metaindex = BlockBuilder::new(1);
        for (name, handle) in &meta {
            metaindex.add(name.as_bytes(), &handle.encode());
        }
        let metaindex_handle = self.write_block(&metaindex.finish(), false)?;

        kill_point!("sst_finish");
        let mut footer = Footer::new(self.opts.checksum, metaindex_handle, index_handle);
        footer.format_version = match (self.opts.index_partition_size.is_some(), self.index_keys_are_user_keys()) {
            (false, false) => FORMAT_VERSION,
            (true, false) => FORMAT_VERSION_PARTITIONED_INDEX,
            (false, true) => FORMAT_VERSION_USER_KEY_INDEX,
            (true, true) => FORMAT_VERSION_PARTITIONED_USER_KEY_INDEX,
        };
        if self.props.num_range_deletions > 0 {
            footer.format_version += FORMAT_VERSION_RANGE_DELETIONS;
        }
        let footer = footer.encode();
        self.file.append(&footer)?;
        self.offset += footer.len() as u64;
        kill_point!("sst_sync");
        self.file.sync()?;
        self.props.file_size = self.offset;
        Ok(self.props)
    }
}
