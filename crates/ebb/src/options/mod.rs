//! Options: every knob, its default, its RocksDB name, and a text form that
//! round-trips (the OPTIONS file written next to the data, as RocksDB does).
//!
//! Every option is declared once below, in its section (DB, column family,
//! table), with its documentation and default; options/split.rs makes
//! [`Options`] (all of them) and [`DbOptions`], [`ColumnFamilyOptions`] and
//! [`TableOptions`] from that list. Names follow RocksDB where the meaning is
//! the same, so db_bench flags and OPTIONS files carry over.
//! `set_options` accepts only the options marked dynamic in the option table
//! in `options/text.rs` (the ones RocksDB's `SetOptions` accepts), which also
//! holds the text form.

use std::sync::Arc;

mod file;
#[macro_use]
mod split;
mod text;

use crate::cache::{new_cache, BlockCache, CacheOptions, CacheType};
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, PosixFs};
pub use crate::key::{MAX_KEY_SIZE, MAX_VALUE_SIZE};
pub use crate::sst::IndexType;
use crate::sst::{ReadSettings, Readahead, TableBuilderOptions};
pub use crate::tuning::BackgroundTuning;
use crate::util::checksum::ChecksumType;
pub use crate::util::compression::CompressionType;
use crate::version::{StorageInfoOptions, TableCacheOptions, TreeStyle};
pub use crate::wal::WalRecoveryMode;

/// How idle detection judges the client idle (seed 002 §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IdlePolicyKind {
    /// Write throughput under a threshold.
    #[default]
    Throughput,
    /// A set time since the last write.
    SinceLastWrite,
}

/// How SSTs are organised into levels (RocksDB `CompactionStyle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompactionStyle {
    /// Leveled compaction (the default).
    #[default]
    Level,
    /// Size-tiered ("universal") compaction.
    Universal,
    /// Oldest files dropped past a size or age.
    Fifo,
}

/// Universal (size-tiered) compaction settings (RocksDB
/// `CompactionOptionsUniversal`); see docs/compaction.md, "Universal compaction".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionOptionsUniversal {
    /// A run joins the candidates while its size is at most (100 + this)% of
    /// the candidates' total. RocksDB `size_ratio`; default 1.
    pub size_ratio: u32,
    /// Fewest sorted runs merged by a size-ratio compaction. RocksDB; default 2.
    pub min_merge_width: u32,
    /// Most sorted runs merged by one compaction. RocksDB; default `u32::MAX`.
    pub max_merge_width: u32,
    /// Everything is merged into the oldest run once the other runs add up to
    /// more than this percentage of it. RocksDB; default 200.
    pub max_size_amplification_percent: u32,
    /// Move inputs whose key ranges do not overlap instead of rewriting them. RocksDB; default false.
    pub allow_trivial_move: bool,
}

impl Default for CompactionOptionsUniversal {
    fn default() -> Self {
        CompactionOptionsUniversal {
            size_ratio: 1,
            min_merge_width: 2,
            max_merge_width: u32::MAX,
            max_size_amplification_percent: 200,
            allow_trivial_move: false,
        }
    }
}

/// FIFO compaction settings (RocksDB `CompactionOptionsFIFO`); see
/// docs/compaction.md, "FIFO compaction".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionOptionsFifo {
    /// The oldest files are dropped while all files add up to more than this.
    /// RocksDB `max_table_files_size`; default 1 GiB.
    pub max_table_files_size: u64,
    /// Merge small L0 files into one once `level0_file_num_compaction_trigger`
    /// of them pile up. RocksDB `allow_compaction`; default false.
    pub allow_compaction: bool,
}

impl Default for CompactionOptionsFifo {
    fn default() -> Self {
        CompactionOptionsFifo { max_table_files_size: 1 << 30, allow_compaction: false }
    }
}

define_options! {
    db {
        /// Create the database if it does not exist. RocksDB `create_if_missing`; default false.
        create_if_missing: bool = false,
        /// Fail to open if the database already exists. RocksDB `error_if_exists`; default false.
        error_if_exists: bool = false,
        /// Create the column families listed in `Db::open_cf` that the
        /// database does not have, each with its listed options, once the
        /// rest is open (as `create_column_family` does, one after another).
        /// RocksDB `create_missing_column_families`; default false: a listed
        /// family the database lacks fails the open.
        create_missing_column_families: bool = false,
        /// Verify checksums of every block read during open and compaction. RocksDB `paranoid_checks`; default true.
        paranoid_checks: bool = true,
        /// Total background threads for flushes and compactions when the two limits
        /// below are not set. RocksDB `max_background_jobs`; default 2. Dynamic.
        max_background_jobs: i32 = 2,
        /// Flush threads, each running one flush (flushes run side by side, as in
        /// RocksDB); -1 derives it from `max_background_jobs` (a quarter, at least 1). Dynamic.
        max_background_flushes: i32 = -1,
        /// Compaction threads; -1 derives it from `max_background_jobs` (the rest). Dynamic.
        max_background_compactions: i32 = -1,
        /// Threads one compaction may split into by key range. RocksDB `max_subcompactions`; default 1. Dynamic.
        max_subcompactions: u32 = 1,
        /// What recovery accepts from a damaged WAL. RocksDB `wal_recovery_mode`; default point in time.
        wal_recovery_mode: WalRecoveryMode = WalRecoveryMode::PointInTime,
        /// Writes reach the WAL file only on `flush_wal` (or a full buffer).
        /// RocksDB `manual_wal_flush`; default false.
        manual_wal_flush: bool = false,
        /// Once the live WALs exceed this, the column families whose memtables
        /// hold data in the oldest WAL are flushed; 0 means 4 x the sum over the
        /// families of write_buffer_size x max_write_buffer_number. As in RocksDB
        /// it applies only with more than one column family (one family's WALs
        /// are bounded by its memtables). Dynamic.
        max_total_wal_size: u64 = 0,
        /// One memtable budget shared by every family of this database and
        /// by the other databases given the same manager (RocksDB
        /// `write_buffer_manager`; docs/column_families.md, "One memtable
        /// budget for many families"). Default none.
        write_buffer_manager: Option<Arc<crate::write_buffer_manager::WriteBufferManager>> = None,
        /// A memtable budget for every family of this database alone, when
        /// no `write_buffer_manager` is given: the database makes its own
        /// manager of this size, without stalls (RocksDB
        /// `db_write_buffer_size`). 0, the default, sets none.
        db_write_buffer_size: usize = 0,
        /// Keep WALs no longer needed for recovery in `archive/` for this
        /// many seconds, for [`Db::get_updates_since`](crate::Db::get_updates_since);
        /// 0 keeps none by age (docs/operations.md, "WAL tailing").
        /// RocksDB `WAL_ttl_seconds`. Dynamic.
        wal_ttl_seconds: u64 = 0,
        /// Keep archived WALs (see `wal_ttl_seconds`) up to this many MiB in
        /// all, deleting the oldest first; 0: no size limit. With both 0 no
        /// WAL is archived. RocksDB `WAL_size_limit_MB`. Dynamic.
        wal_size_limit_mb: u64 = 0,
        /// Ask the OS to write back the WAL every this many bytes; 0 disables. RocksDB `wal_bytes_per_sync`.
        wal_bytes_per_sync: u64 = 0,
        /// Ask the OS to write back SSTs and blob files every this many bytes;
        /// 0 disables, except for the adaptive tuner's L0 run merges, which then
        /// write behind every MiB (docs/tuning.md). RocksDB `bytes_per_sync`. Dynamic.
        bytes_per_sync: u64 = 0,
        /// Start a new MANIFEST once it grows past this. RocksDB `max_manifest_file_size`; default 1 GiB.
        max_manifest_file_size: u64 = 1 << 30,
        /// Tables kept open (each its file descriptor, index and filter): -1
        /// opens every table when the database opens and as flushes and
        /// compactions write it, and keeps it open until it is deleted;
        /// otherwise at most this many less 10 (RocksDB's room for the WAL,
        /// MANIFEST and other files), the least recently used closed first
        /// (a table being read stays open until its readers are done), with
        /// at most 16 (and a quarter of them) opened when the database
        /// opens. Values below 20 count as 20, as RocksDB sanitizes them.
        /// RocksDB `max_open_files`; default -1.
        max_open_files: i32 = -1,
        /// Threads that open the tables when the database opens (see
        /// `max_open_files`). RocksDB `max_file_opening_threads`; default 16.
        max_file_opening_threads: i32 = 16,
        /// Read SSTs through a read-only memory map instead of `pread`. RocksDB
        /// `allow_mmap_reads`; default false. SSTs must not be truncated while
        /// open (a read of a lost page raises SIGBUS); see docs/io.md.
        allow_mmap_reads: bool = false,
        /// Read SSTs and blob files with direct I/O (`O_DIRECT`), past the OS
        /// page cache: the block cache is then the only cache. Refused with
        /// `allow_mmap_reads`, and at open where the filesystem refuses
        /// `O_DIRECT`. RocksDB `use_direct_reads`; default false; see
        /// docs/io.md.
        use_direct_reads: bool = false,
        /// Write the SSTs and blob files of flushes and compactions with
        /// direct I/O (`O_DIRECT`), so background writes do not fill the OS
        /// page cache. Refused at open where the filesystem refuses
        /// `O_DIRECT`. RocksDB `use_direct_io_for_flush_and_compaction`;
        /// default false; see docs/io.md.
        use_direct_io_for_flush_and_compaction: bool = false,
        /// Hint `POSIX_FADV_RANDOM` on SSTs when they are opened for reads, so
        /// point lookups do not pull in OS readahead. RocksDB `advise_random_on_open`; default true.
        advise_random_on_open: bool = true,
        /// Bytes read ahead of each compaction input's data blocks, in one read;
        /// 0 reads block by block. RocksDB `compaction_readahead_size`; default 2 MiB. Dynamic.
        compaction_readahead_size: usize = 2 << 20,
        /// Write rate while writes are slowed down, bytes/s. RocksDB `delayed_write_rate`; default 16 MiB/s. Dynamic.
        delayed_write_rate: u64 = 16 << 20,
        /// Collect tickers and histograms. RocksDB `statistics` (a pointer there, a switch here); default false.
        statistics: bool = false,
        /// Print `ebb.stats` to the info log every this many seconds; 0 disables. Dynamic.
        stats_dump_period_sec: u32 = 600,
        /// Hand the allocator's free pages back to the OS (glibc's
        /// `malloc_trim`) at most this often, from the background threads; 0
        /// never. Without it glibc keeps pages freed inside its per-thread
        /// arenas resident, and the process holds far more than the block
        /// cache and memtables (docs/cache.md, "Resident memory and the
        /// allocator"). Process-wide; nothing on other allocators. Ebb only;
        /// default 1000. Dynamic.
        malloc_trim_period_ms: u64 = 1000,
        /// Old info logs (`LOG.old.*`) kept beside `LOG`; older ones are deleted
        /// at open. RocksDB `keep_log_file_num`; default 1000.
        keep_log_file_num: usize = 1000,
        /// Open what can be opened of a damaged database instead of failing: the
        /// MANIFEST is replayed up to its first damage and back to the last state
        /// whose files all exist, and what was left out is reported
        /// (`Db::recovery_report`, the info log). RocksDB `best_efforts_recovery`;
        /// default false, so damage is an error (docs/reliability.md).
        best_efforts_recovery: bool = false,
        /// Rate limit for flush and compaction writes, bytes/s; 0 disables. RocksDB `rate_limiter` (db_bench `rate_limiter_bytes_per_sec`).
        rate_limiter_bytes_per_sec: u64 = 0,
        /// How often the rate limiter refills, microseconds. RocksDB's `refill_period_us`; default 100 ms.
        rate_limiter_refill_period_us: u64 = 100_000,
        /// When flushes and compactions both wait, compactions go first with
        /// probability 1/fairness. RocksDB's `fairness`; default 10.
        rate_limiter_fairness: u32 = 10,
        /// Let the rate limiter tune its rate between 1/20 of and the configured
        /// rate from how often it is drained (RocksDB `auto_tuned`). Default false.
        rate_limiter_auto_tuned: bool = false,
        /// The thesis's compaction auto-tuner (seed 000 §3.3): the same as
        /// `background_tuning=thesis`, and it takes the place of `off` or
        /// `adaptive` (the default); it conflicts with `idle`. db_bench's
        /// `auto_tuned_compactions`. Default false.
        auto_tuned_compactions: bool = false,
        /// Which tuner steers background work: off (RocksDB's behaviour), thesis,
        /// adaptive or idle (docs/tuning.md). Default adaptive: it defers
        /// compaction only while writes press and compaction falls behind them,
        /// so on a load compaction keeps up with it does what off does. Adaptive
        /// and idle raise the L0 stall triggers above their L0 bound
        /// (`tuning_max_l0_files`, docs/tuning.md).
        background_tuning: BackgroundTuning = BackgroundTuning::Adaptive,
        /// Thesis tuner: flush drains (percent of refill periods) at or above
        /// which compaction is disabled, together with the total watermark. Default 50.
        tuning_flush_watermark_pct: u64 = 50,
        /// Thesis tuner: total drains (percent) at or above which compaction is disabled. Default 90.
        tuning_total_watermark_pct: u64 = 90,
        /// Thesis tuner: how often it decides, microseconds. Default 10 s.
        tuning_interval_us: u64 = 10_000_000,
        /// Adaptive and idle modes: the I/O budget of flush, WAL and compaction
        /// writes, bytes/s; 0 learns it from the highest throughput seen. Default 0.
        tuning_io_budget: u64 = 0,
        /// Adaptive and idle modes: L0 files past which compaction runs however
        /// busy the client is (a bound on deferral). Default 1024 (256 before
        /// stop 30: docs/benchmarks.md, "Adaptive's L0 bound"); 0 disables the bound.
        tuning_max_l0_files: usize = 1024,
        /// Adaptive and idle modes: L0 bytes, as a multiple of the bytes below
        /// L0, past which compaction runs however busy the client is, once the
        /// levels below hold a full base level (`max_bytes_for_level_base`).
        /// L0 run merges keep the file count under `tuning_max_l0_files`
        /// while a load that never eases piles bytes into L0; this bounds the
        /// debt itself (docs/tuning.md, "The L0 debt bound"). Default 2
        /// (RocksDB universal's `max_size_amplification_percent` of 200; 1
        /// helps W5's reads and costs W3's bursts, docs/tuning.md); 0
        /// disables the bound.
        tuning_max_l0_debt_ratio: f64 = 2.0,
        /// Adaptive and idle modes: the share of client operations, percent,
        /// at which point reads and seeks make the load a reading one. Load
        /// pressure then defers no compaction, and writes are held by the
        /// configured L0 triggers and pending-bytes limits instead of the
        /// tuner's backstop above `tuning_max_l0_files` (docs/tuning.md,
        /// "Not while clients read" and "Readers get the configured write
        /// controller"). Default 10; 0: reads change neither.
        tuning_read_share_pct: u64 = 10,
        /// Idle detection (seed 002): how the client is judged idle, `throughput`
        /// (under `idle_throughput_threshold`) or `since_last_write` (no write for
        /// `idle_quiet_ms`). Default throughput.
        idle_policy: IdlePolicyKind = IdlePolicyKind::Throughput,
        /// Idle detection: how often write throughput is sampled, ms. Default 500.
        idle_probe_interval_ms: u64 = 500,
        /// Idle detection: client bytes/s under which the client is idle. Default 524288 (0.5 MB/s).
        idle_throughput_threshold: u64 = 512 * 1024,
        /// Idle detection: ms after the last write at which the client is idle. Default 500.
        idle_quiet_ms: u64 = 500,
        /// The filesystem all I/O goes through; the real one by default.
        fs: Arc<dyn FileSystem> = Arc::new(PosixFs::new()),
        /// The clock the database reads time from (RocksDB's `SystemClock`,
        /// `Env::GetSystemClock`); the system's by default. Its wall-clock
        /// time is what a TTL database (`Db::open_with_ttl`) stamps values
        /// with and expires them by; its monotonic time paces delayed writes
        /// (`delayed_write_rate`) and the rate limiter's refills, and times
        /// the tuner's looks and idle detection and `stats_dump_period_sec`.
        /// A test sets a [`ManualClock`](crate::ManualClock) and moves time
        /// with `advance` instead of sleeping (docs/operations.md, "Time").
        /// Its wall-clock time also stamps each table's creation time and
        /// judges file ages by it (periodic compaction, `ttl`, FIFO's
        /// `ttl`). The info log's timestamps and the latency statistics
        /// read the system's clock. Not in the OPTIONS file, as `fs` is not.
        clock: Arc<dyn Clock> = Arc::new(SystemClock::new()),
        /// Receivers of background events (flushes, compactions, stalls, errors).
        listeners: Vec<Arc<dyn crate::events::EventListener>> = Vec::new(),
    }
    cf {
        /// Bytes a memtable holds before it is switched for a new one and flushed.
        /// RocksDB `write_buffer_size`; default 64 MiB. Dynamic.
        write_buffer_size: usize = 64 << 20,
        /// Memtables (the mutable one and the immutable ones awaiting flush) before
        /// writes stop. RocksDB `max_write_buffer_number`; default 2. Dynamic.
        max_write_buffer_number: usize = 2,
        /// Bytes of memtables kept in memory after they are flushed, with the
        /// mutable and immutable ones, so that transactions can check what
        /// was written since they read (RocksDB
        /// `max_write_buffer_size_to_maintain`): 0 keeps none; -1 keeps
        /// `write_buffer_size x max_write_buffer_number`. The transaction
        /// databases open families that leave it 0 with -1, as RocksDB's
        /// do. Reads never look at the memtables kept. Default 0.
        max_write_buffer_size_to_maintain: i64 = 0,
        /// RocksDB's minimum of immutable memtables merged per flush; default 1.
        /// Accepted and checked, but a flush does not wait for that many: it
        /// takes every immutable memtable no running flush has taken.
        min_write_buffer_number_to_merge: usize = 1,
        /// Compaction organisation. RocksDB `compaction_style`; default level.
        compaction_style: CompactionStyle = CompactionStyle::Level,
        /// Universal compaction settings, in the text form as
        /// `compaction_options_universal.<field>`. Dynamic, as in RocksDB.
        compaction_options_universal: CompactionOptionsUniversal = CompactionOptionsUniversal::default(),
        /// FIFO compaction settings, in the text form as
        /// `compaction_options_fifo.<field>`. Dynamic, as in RocksDB.
        compaction_options_fifo: CompactionOptionsFifo = CompactionOptionsFifo::default(),
        /// FIFO: files whose newest data is older than this many seconds are
        /// dropped. Leveled: a file written longer ago than this, in any level
        /// but the last, is compacted into the next level (reason `Ttl`).
        /// 0 disables (RocksDB defaults to 30 days; Ebb keeps 0). RocksDB `ttl`. Dynamic.
        ttl: u64 = 0,
        /// Leveled: a file written longer ago than this many seconds is
        /// rewritten, into the next level or, in the last level, into its own
        /// (reason `PeriodicCompaction`), so compaction filters (and TTL
        /// databases) reach old data. 0 disables; the default,
        /// `PERIODIC_COMPACTION_AUTO`, is 30 days when the family has a
        /// compaction filter or factory and 0 otherwise, as in RocksDB.
        /// RocksDB `periodic_compaction_seconds`. Dynamic.
        periodic_compaction_seconds: u64 = PERIODIC_COMPACTION_AUTO,
        /// Number of levels. RocksDB `num_levels`; default 7.
        num_levels: usize = 7,
        /// L0 files that trigger an L0 compaction. RocksDB; default 4. Dynamic.
        level0_file_num_compaction_trigger: i32 = 4,
        /// L0 files at which writes are slowed. RocksDB; default 20. Dynamic.
        level0_slowdown_writes_trigger: i32 = 20,
        /// L0 files at which writes stop. RocksDB; default 36. Dynamic.
        level0_stop_writes_trigger: i32 = 36,
        /// Target size of L1 in bytes. RocksDB `max_bytes_for_level_base`; default 256 MiB. Dynamic.
        max_bytes_for_level_base: u64 = 256 << 20,
        /// Growth factor between levels. RocksDB; default 10. Dynamic.
        max_bytes_for_level_multiplier: f64 = 10.0,
        /// Size levels from the last level up (RocksDB's default since 8.4).
        level_compaction_dynamic_level_bytes: bool = true,
        /// Target SST size at L1. RocksDB `target_file_size_base`; default 64 MiB. Dynamic.
        target_file_size_base: u64 = 64 << 20,
        /// Growth of the target SST size per level. RocksDB; default 1. Dynamic.
        target_file_size_multiplier: u32 = 1,
        /// Upper bound of input bytes of one compaction; 0 means 25 x target_file_size_base. Dynamic.
        max_compaction_bytes: u64 = 0,
        /// Estimated pending compaction bytes at which writes slow; 0 disables. Default 64 GiB. Dynamic.
        soft_pending_compaction_bytes_limit: u64 = 64 << 30,
        /// Estimated pending compaction bytes at which writes stop; 0 disables. Default 256 GiB. Dynamic.
        hard_pending_compaction_bytes_limit: u64 = 256 << 30,
        /// Schedule no automatic compactions. RocksDB; default false. Dynamic.
        disable_auto_compactions: bool = false,
        /// A compaction filter every compaction of the family asks about each
        /// key's newest value (RocksDB `compaction_filter`; docs/data_model.md).
        /// Called from several compactions at once. Default none.
        compaction_filter: Option<Arc<dyn crate::compaction_filter::CompactionFilter>> = None,
        /// Makes a compaction filter per compaction when `compaction_filter`
        /// is not set (RocksDB `compaction_filter_factory`). Default none.
        compaction_filter_factory: Option<Arc<dyn crate::compaction_filter::CompactionFilterFactory>> = None,
        /// The order of the family's keys (RocksDB `comparator`;
        /// docs/data_model.md, "Comparators"): `None`, the default, is the
        /// bytewise order (`leveldb.BytewiseComparator`);
        /// `comparator::reverse_bytewise()` or user code otherwise. Its name
        /// is recorded in the MANIFEST when the family is created, and
        /// opening the family with another is refused. Recorded by name in
        /// the OPTIONS file. Not dynamic.
        comparator: Option<Arc<dyn crate::comparator::Comparator>> = None,
        /// Combines a key's value with the operands `merge` writes (RocksDB
        /// `merge_operator`; docs/data_model.md, "Merge"). A merge into a
        /// family without one is refused. Recorded by name in the OPTIONS
        /// file. Default none.
        merge_operator: Option<Arc<dyn crate::merge_operator::MergeOperator>> = None,
        /// Makers of user table property collectors, one collector per
        /// table built (RocksDB `table_properties_collector_factories`;
        /// docs/operations.md, "Table properties"). User code, set in code:
        /// the OPTIONS file lists their names. Default none.
        table_properties_collector_factories: Vec<Arc<dyn crate::table_properties::TablePropertiesCollectorFactory>> = Vec::new(),
        /// Extracts the prefix of each key that bloom filters also hold and
        /// prefix seeks stay within (RocksDB `prefix_extractor`;
        /// docs/data_model.md, "Prefixes"): `prefix::fixed(n)`,
        /// `prefix::capped(n)` or user code. Recorded by name in the OPTIONS
        /// file and in each table. Default none.
        prefix_extractor: Option<Arc<dyn crate::prefix::SliceTransform>> = None,
        /// Where compactions must cut their output tables, whatever their
        /// size (RocksDB `sst_partitioner_factory`; docs/compaction.md,
        /// "SST partitioners"): `sst_partitioner::fixed_prefix(n)` or user
        /// code. Recorded by name in the OPTIONS file. Default none.
        sst_partitioner_factory: Option<Arc<dyn crate::sst_partitioner::SstPartitionerFactory>> = None,
        /// Size of each memtable's prefix bloom filter as a fraction of
        /// `write_buffer_size` (RocksDB `memtable_prefix_bloom_size_ratio`),
        /// in `[0, 0.25]`; 0, the default, builds none. Needs a prefix
        /// extractor. Point reads of a prefix it lacks skip the memtable.
        memtable_prefix_bloom_size_ratio: f64 = 0.0,
        /// When a merge finds this many operands on top of its key in the
        /// memtable, it reads the key and writes the merged value instead of
        /// another operand, bounding the work of later reads (RocksDB
        /// `max_successive_merges`). 0, the default, never does. Dynamic.
        max_successive_merges: usize = 0,
        /// Compression of every level unless `compression_per_level` says otherwise.
        /// RocksDB `compression`; default snappy. Dynamic.
        compression: CompressionType = CompressionType::Snappy,
        /// Compression per level (index = level); empty means `compression`
        /// everywhere. RocksDB `compression_per_level`. Dynamic.
        compression_per_level: Vec<CompressionType> = Vec::new(),
        /// Compression of the bottommost level; `None` means as the other levels. Dynamic.
        bottommost_compression: Option<CompressionType> = None,
        /// Write values of at least `min_blob_size` bytes into blob files when
        /// flushing and compacting, keeping only a reference to each in the
        /// tables (key-value separation). RocksDB `enable_blob_files`; default
        /// false. Not with FIFO compaction, which drops tables unread and so
        /// could not account for the blobs they refer to. Dynamic.
        enable_blob_files: bool = false,
        /// Smallest value, in bytes, written to a blob file; smaller ones stay
        /// in the tables. RocksDB `min_blob_size`; default 0 (every value). Dynamic.
        min_blob_size: u64 = 0,
        /// A blob file is closed, and the next one started, once it reaches
        /// this many bytes. RocksDB `blob_file_size`; default 256 MiB. Dynamic.
        blob_file_size: u64 = 256 << 20,
        /// Compression of each blob (stored raw where it saves less than 1/8).
        /// RocksDB `blob_compression_type`; default none. Dynamic.
        blob_compression_type: CompressionType = CompressionType::None,
        /// Compactions relocate the blobs they meet in the oldest blob files
        /// (`blob_garbage_collection_age_cutoff`) into new ones, so the old files
        /// empty and are deleted. RocksDB `enable_blob_garbage_collection`;
        /// default false. Dynamic.
        enable_blob_garbage_collection: bool = false,
        /// The oldest fraction of blob files whose blobs compactions relocate,
        /// in `[0, 1]`. RocksDB `blob_garbage_collection_age_cutoff`; default 0.25. Dynamic.
        blob_garbage_collection_age_cutoff: f64 = 0.25,
        /// Once at least this fraction of the bytes of the blob files within
        /// the age cutoff is garbage, the tables referring to the oldest blob
        /// file are compacted even if no level needs it (leveled compaction
        /// only), in `[0, 1]`. RocksDB `blob_garbage_collection_force_threshold`;
        /// default 1.0, which turns forcing off, as in RocksDB. Dynamic.
        blob_garbage_collection_force_threshold: f64 = 1.0,
    }
    table {
        /// Uncompressed bytes per data block. RocksDB `block_size`; default 4 KiB.
        block_size: usize = 4096,
        /// Keys between restart points in a data block. RocksDB; default 16.
        block_restart_interval: usize = 16,
        /// Entries between restart points in an index block (and in each
        /// index partition): between them an entry stores only what its
        /// key adds to the one before. RocksDB `index_block_restart_interval`;
        /// default 16 (RocksDB's is 1): an index about a third the size,
        /// which matters once index blocks share the block cache with data
        /// (docs/format.md, "Index block"; docs/benchmarks.md).
        index_block_restart_interval: usize = 16,
        /// A data block holding more than `100 - block_size_deviation`
        /// percent of `block_size` is closed before an entry that would take
        /// it past `block_size`. RocksDB `block_size_deviation`; default 10;
        /// 0 (or, as RocksDB takes it, over 100) closes blocks only once they
        /// reach `block_size`.
        block_size_deviation: u32 = 10,
        /// Bloom filter bits per key; 0 builds no filter. Default 10 (RocksDB has no
        /// filter by default; db_bench's `bloom_bits` sets it).
        bloom_bits_per_key: u32 = 10,
        /// Put whole keys in tables' bloom filters (RocksDB
        /// `whole_key_filtering`); default true. False, with a prefix
        /// extractor, keeps only prefixes, for filters that serve prefix
        /// seeks in fewer bits; point reads then use the prefix.
        whole_key_filtering: bool = true,
        /// Checksum of every block. RocksDB `checksum`; default CRC-32C.
        checksum: ChecksumType = ChecksumType::Crc32c,
        /// Block cache capacity in bytes; 0 disables the cache. Default 32 MiB.
        block_cache_size: usize = 32 << 20,
        /// Block cache implementation: `kLRUCache` (sharded LRU) or
        /// `kHyperClockCache` (lock-free lookups; its table is sized for entries
        /// of `block_size`). db_bench `cache_type`; default LRU.
        block_cache_type: CacheType = CacheType::Lru,
        /// Block cache shards are 2^this; -1 picks RocksDB's default from the
        /// capacity; 0..=19 accepted. db_bench `cache_numshardbits`; default -1.
        block_cache_num_shard_bits: i32 = -1,
        /// LRU only: share of the block cache kept for high-priority blocks
        /// (index and filter, and blocks hit again), in `[0, 1]`. RocksDB
        /// `high_pri_pool_ratio`; default 0.5.
        block_cache_high_pri_pool_ratio: f64 = 0.5,
        /// Fail a read whose block cannot be cached because everything cached is
        /// in use, instead of going over capacity. RocksDB `strict_capacity_limit`; default false.
        block_cache_strict_capacity_limit: bool = false,
        /// LRU only: move a block to the head of the list on every hit (RocksDB's
        /// behaviour). False only marks it, and eviction gives marked blocks a
        /// second chance, so a hit never touches the list. Ebb-specific; default true.
        block_cache_lru_promote_on_hit: bool = true,
        /// Bytes of a compressed secondary cache under the block cache
        /// (RocksDB's `CompressedSecondaryCache`; db_bench
        /// `compressed_secondary_cache_size`): data blocks the block cache
        /// evicts twice are kept there LZ4-compressed, and a read that misses
        /// the block cache finds them there before the file (docs/cache.md).
        /// Default 0: none.
        compressed_secondary_cache_size: usize = 0,
        /// Keep index and filter blocks in the block cache, charged to it, instead
        /// of in each open table. RocksDB; default false.
        cache_index_and_filter_blocks: bool = false,
        /// How a table's index is laid out: one block (`BinarySearch`, the
        /// default), or partitions of about `metadata_block_size` bytes under a
        /// top-level index (`TwoLevelIndexSearch`: the table keeps only the top
        /// level, partitions go through the block cache). RocksDB `index_type`.
        index_type: IndexType = IndexType::BinarySearch,
        /// Target size of an index partition with `TwoLevelIndexSearch`. RocksDB
        /// `metadata_block_size`; default 4 KiB.
        metadata_block_size: usize = 4096,
        /// With `TwoLevelIndexSearch`, cut each table's bloom filter at the index
        /// partitions' boundaries, one filter partition per index partition
        /// (read through the block cache, as the index partitions); without a
        /// partitioned index it has no effect, as RocksDB sanitizes it. RocksDB
        /// `partition_filters`; default false.
        partition_filters: bool = false,
        /// Insert cached index and filter blocks with high priority, so scans do
        /// not flush them. RocksDB; default true.
        cache_index_and_filter_blocks_with_high_priority: bool = true,
        /// Keep the cached index and filter blocks of L0 tables referenced while
        /// the table is open, so they are never evicted. RocksDB; default false.
        pin_l0_filter_and_index_blocks_in_cache: bool = false,
        /// First readahead of a long iterator scan, once two data-block reads in a
        /// row were sequential; it doubles per read up to the max below. RocksDB
        /// `initial_auto_readahead_size`; default 8 KiB (clipped to the max).
        initial_auto_readahead_size: usize = 8 << 10,
        /// Largest readahead of a long iterator scan; 0 turns auto readahead off.
        /// RocksDB `max_auto_readahead_size`; default 256 KiB.
        max_auto_readahead_size: usize = 256 << 10,
        /// A block cache to use instead of building one from the options above,
        /// e.g. one shared by several databases (RocksDB `block_cache`). Its own
        /// capacity and kind apply; `block_cache_size` is then only recorded.
        block_cache: Option<Arc<dyn BlockCache>> = None,
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_text())
    }
}

impl ColumnFamilyOptions {
    /// The bytes of memtables kept after their flush
    /// (`max_write_buffer_size_to_maintain`, -1 resolved).
    pub(crate) fn memtable_history_bytes(&self) -> u64 {
        match self.max_write_buffer_size_to_maintain {
            -1 => (self.write_buffer_size as u64).saturating_mul(self.max_write_buffer_number as u64),
            n => n.max(0) as u64,
        }
    }

    /// The family's key order, as the layers below compare through it.
    pub fn user_comparator(&self) -> crate::comparator::UserComparator {
        crate::comparator::UserComparator::from_option(self.comparator.as_ref())
    }

    /// True when the family has a compaction filter or a factory of them.
    pub fn has_compaction_filter(&self) -> bool {
        self.compaction_filter.is_some() || self.compaction_filter_factory.is_some()
    }

    /// `periodic_compaction_seconds` with its automatic default resolved:
    /// 30 days when the family has a compaction filter or factory, else 0.
    pub fn effective_periodic_compaction_seconds(&self) -> u64 {
        match self.periodic_compaction_seconds {
            PERIODIC_COMPACTION_AUTO if self.has_compaction_filter() => 30 * 24 * 3600,
            PERIODIC_COMPACTION_AUTO => 0,
            n => n,
        }
    }

    /// `max_compaction_bytes` with 0 resolved.
    pub fn effective_max_compaction_bytes(&self) -> u64 {
        if self.max_compaction_bytes == 0 {
            self.target_file_size_base.saturating_mul(25)
        } else {
            self.max_compaction_bytes
        }
    }

    /// The compression for output at `level`, given the deepest level in use.
    pub fn compression_for_level(&self, level: usize, bottommost: bool) -> CompressionType {
        if bottommost {
            if let Some(c) = self.bottommost_compression {
                return c;
            }
        }
        if self.compression_per_level.is_empty() {
            self.compression
        } else {
            let i = level.min(self.compression_per_level.len() - 1);
            self.compression_per_level[i]
        }
    }

    /// Target SST size for output at `level`.
    pub fn target_file_size(&self, level: usize) -> u64 {
        let mut size = self.target_file_size_base;
        for _ in 1..level.max(1) {
            size = size.saturating_mul(u64::from(self.target_file_size_multiplier));
        }
        size.max(1)
    }

    /// The L0 slowdown and stop triggers writes are held to, as RocksDB
    /// sanitizes them (`SanitizeOptions` in `db/column_family.cc`): the
    /// slowdown trigger at least the compaction trigger, the stop trigger at
    /// least the slowdown trigger. A slowdown below the compaction trigger
    /// would delay writes while L0 holds too few files for a compaction to
    /// start, which only a flush could end.
    pub fn effective_l0_stall_triggers(&self) -> (i32, i32) {
        let slowdown = self.level0_slowdown_writes_trigger.max(self.level0_file_num_compaction_trigger);
        (slowdown, self.level0_stop_writes_trigger.max(slowdown))
    }

    /// Checks the family's options as [`Options::validate`] does; the error
    /// names the option.
    pub fn validate(&self) -> Result<()> {
        Options::default().with_cf_options(self.clone()).validate()
    }
}

impl From<&Options> for ColumnFamilyOptions {
    fn from(o: &Options) -> Self {
        o.cf_options()
    }
}

impl From<Options> for ColumnFamilyOptions {
    fn from(o: Options) -> Self {
        o.cf_options()
    }
}

impl From<&ColumnFamilyOptions> for ColumnFamilyOptions {
    fn from(o: &ColumnFamilyOptions) -> Self {
        o.clone()
    }
}

impl From<&Options> for DbOptions {
    fn from(o: &Options) -> Self {
        o.db_options()
    }
}

impl std::fmt::Debug for ColumnFamilyOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&Options::default().with_cf_options(self.clone()).to_text())
    }
}

/// Largest `write_buffer_size` accepted: a memtable's key index and prefix
/// tables are sized from it when it is made.
pub const MAX_WRITE_BUFFER_SIZE: usize = 64 << 30;

/// Largest `max_write_buffer_number` accepted.
pub const MAX_WRITE_BUFFER_NUMBER: usize = 1024;

/// Largest readahead accepted, in bytes: each is a buffer in memory.
pub const MAX_READAHEAD_SIZE: usize = 1 << 30;

/// `periodic_compaction_seconds`' default: 30 days with a compaction filter,
/// else off (RocksDB's `0xfffffffffffffffe`, "let RocksDB decide").
pub const PERIODIC_COMPACTION_AUTO: u64 = u64::MAX - 1;

impl Options {
    /// Sets `create_if_missing`; chainable.
    pub fn create_if_missing(mut self, yes: bool) -> Self {
        self.create_if_missing = yes;
        self
    }

    /// Manos's write-optimised parameters (seed 003, "Aggregated Experiments"):
    /// five memtables, so that writes keep going while flushes fall behind.
    ///
    /// Sets `max_write_buffer_number = 5`; the block cache, memtable size and
    /// bloom filter keep their values, as in Manos. Manos also picked universal
    /// compaction; the style is left as it is (set `compaction_style` to
    /// [`CompactionStyle::Universal`] for his whole setting).
    /// RocksDB has no single counterpart: its `OptimizeLevelStyleCompaction`
    /// and `OptimizeUniversalStyleCompaction` also raise the memtable count.
    pub fn optimize_for_writes(mut self) -> Self {
        self.max_write_buffer_number = 5;
        self
    }

    /// Manos's read-optimised parameters (seed 003): a large block cache,
    /// large memtables and large bloom filters, with leveled compaction.
    ///
    /// Sets `block_cache_size = 512 MiB`, `write_buffer_size = 256 MiB` and
    /// `bloom_bits_per_key = 20`. Manos used 100 bits per key; Ebb's filter
    /// keeps every probe of a key in one cache line (RocksDB's FastLocalBloom),
    /// so past about 20 bits the false-positive rate hardly falls (Manos found
    /// bigger filters did not cut read times either), and Ebb accepts at most 64.
    /// RocksDB's counterpart is `OptimizeForPointLookup(block_cache_size_mb)`,
    /// which also sets a block cache and a bloom filter.
    pub fn optimize_for_reads(mut self) -> Self {
        self.block_cache_size = 512 << 20;
        self.write_buffer_size = 256 << 20;
        self.bloom_bits_per_key = 20;
        self
    }

    /// RocksDB's `Options::PrepareForBulkLoad`: no automatic compaction and
    /// no write stalls while loading; the application compacts (for example
    /// with `compact_range`) once everything is in L0.
    ///
    /// Sets, as RocksDB does: `disable_auto_compactions = true`; the three L0
    /// triggers to 2^30 (never slow or stop); both pending-compaction-bytes
    /// limits to 0 (off); `max_compaction_bytes = 2^60` (one manual compaction
    /// takes all of L0); `num_levels = 2` (a manual compaction then rewrites
    /// L0 into L1 once instead of at every level); `max_write_buffer_number = 6`
    /// and `min_write_buffer_number_to_merge = 1`; `max_background_flushes = 4`
    /// and `max_background_compactions = 2`; `target_file_size_base = 256 MiB`.
    pub fn prepare_for_bulk_load(mut self) -> Self {
        self.disable_auto_compactions = true;
        self.level0_file_num_compaction_trigger = 1 << 30;
        self.level0_slowdown_writes_trigger = 1 << 30;
        self.level0_stop_writes_trigger = 1 << 30;
        self.soft_pending_compaction_bytes_limit = 0;
        self.hard_pending_compaction_bytes_limit = 0;
        self.max_compaction_bytes = 1 << 60;
        self.num_levels = 2;
        self.max_write_buffer_number = 6;
        self.min_write_buffer_number_to_merge = 1;
        self.max_background_flushes = 4;
        self.max_background_compactions = 2;
        self.target_file_size_base = 256 << 20;
        self
    }

    /// Uses the given filesystem for all I/O.
    pub fn with_fs(mut self, fs: Arc<dyn FileSystem>) -> Self {
        self.fs = fs;
        self
    }

    /// Reads time from `clock` (see [`Options::clock`]).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Flush threads after resolving -1 from `max_background_jobs`.
    pub fn flush_threads(&self) -> usize {
        if self.max_background_flushes > 0 {
            self.max_background_flushes as usize
        } else {
            (self.max_background_jobs.max(1) as usize / 4).max(1)
        }
    }

    /// Compaction threads after resolving -1 from `max_background_jobs`.
    pub fn compaction_threads(&self) -> usize {
        if self.max_background_compactions > 0 {
            self.max_background_compactions as usize
        } else {
            let jobs = self.max_background_jobs.max(1) as usize;
            (jobs - (jobs / 4).max(1).min(jobs - 1)).max(1)
        }
    }

    /// How many tables the table cache keeps open: `None` for all
    /// (`max_open_files = -1`), else `max_open_files` as RocksDB sanitizes
    /// it (at least 20) less the 10 it leaves to other files.
    pub fn table_cache_capacity(&self) -> Option<usize> {
        (self.max_open_files != -1).then(|| (self.max_open_files.max(20) - 10) as usize)
    }

    /// The tuning mode in force: `background_tuning`, or thesis when
    /// `auto_tuned_compactions` is set (over off or adaptive).
    pub fn tuning_mode(&self) -> BackgroundTuning {
        if self.auto_tuned_compactions
            && matches!(self.background_tuning, BackgroundTuning::Off | BackgroundTuning::Adaptive)
        {
            BackgroundTuning::Thesis
        } else {
            self.background_tuning
        }
    }

    /// `max_compaction_bytes` with 0 resolved (the default family's).
    pub fn effective_max_compaction_bytes(&self) -> u64 {
        self.cf_options().effective_max_compaction_bytes()
    }

    /// The default family's compression for output at `level`.
    pub fn compression_for_level(&self, level: usize, bottommost: bool) -> CompressionType {
        self.cf_options().compression_for_level(level, bottommost)
    }

    /// The default family's target SST size for output at `level`.
    pub fn target_file_size(&self, level: usize) -> u64 {
        self.cf_options().target_file_size(level)
    }

    /// The default family's L0 stall triggers
    /// ([`ColumnFamilyOptions::effective_l0_stall_triggers`]).
    pub fn effective_l0_stall_triggers(&self) -> (i32, i32) {
        self.cf_options().effective_l0_stall_triggers()
    }

    /// Checks every option for a value Ebb cannot run with; the error names it.
    pub fn validate(&self) -> Result<()> {
        fn bad(name: &str, why: &str) -> Result<()> {
            Err(Error::invalid(format!("option {name}: {why}")))
        }
        if self.use_direct_reads && self.allow_mmap_reads {
            return bad(
                "use_direct_reads",
                "conflicts with allow_mmap_reads (a mapped file is read through the page cache)",
            );
        }
        if self.auto_tuned_compactions && self.background_tuning == BackgroundTuning::Idle {
            return bad("auto_tuned_compactions", "is the thesis tuner; it conflicts with background_tuning=idle");
        }
        if self.tuning_mode() == BackgroundTuning::Thesis && self.rate_limiter_bytes_per_sec == 0 {
            return bad(
                "rate_limiter_bytes_per_sec",
                "must be set for the thesis tuner (it decides from rate-limiter drains; the thesis used 380 MB/s)",
            );
        }
        // A day at most: the intervals below are waited out by background
        // threads (a close waits for them) and multiplied into deadlines.
        const DAY_US: u64 = 86_400_000_000;
        if self.rate_limiter_refill_period_us == 0 || self.rate_limiter_refill_period_us > DAY_US {
            return bad("rate_limiter_refill_period_us", "must be between 1 microsecond and a day");
        }
        if self.rate_limiter_fairness == 0 {
            return bad("rate_limiter_fairness", "must be at least 1");
        }
        if self.tuning_flush_watermark_pct > 100 || self.tuning_total_watermark_pct > 200 {
            return bad("tuning_flush_watermark_pct", "watermarks are percentages of refill periods");
        }
        if self.tuning_interval_us == 0 || self.tuning_interval_us > DAY_US {
            return bad("tuning_interval_us", "must be between 1 microsecond and a day");
        }
        if self.idle_probe_interval_ms == 0 || self.idle_probe_interval_ms > DAY_US / 1000 {
            return bad("idle_probe_interval_ms", "must be between 1 millisecond and a day");
        }
        if self.idle_quiet_ms > DAY_US / 1000 {
            return bad("idle_quiet_ms", "must be at most a day");
        }
        let timestamps = crate::comparator::UserComparator::from_option(self.comparator.as_ref()).timestamp_size() > 0;
        if timestamps && self.prefix_extractor.is_some() {
            return bad(
                "prefix_extractor",
                "is not supported with a timestamped comparator (leveldb.BytewiseComparator.u64ts) yet",
            );
        }
        if timestamps && self.enable_blob_files {
            return bad(
                "enable_blob_files",
                "is not supported with a timestamped comparator (leveldb.BytewiseComparator.u64ts) yet",
            );
        }
        if self.write_buffer_size < 4096 || self.write_buffer_size > MAX_WRITE_BUFFER_SIZE {
            return bad("write_buffer_size", "must be between 4096 bytes and 64 GiB");
        }
        if self.max_write_buffer_number < 2 || self.max_write_buffer_number > MAX_WRITE_BUFFER_NUMBER {
            return bad("max_write_buffer_number", "must be between 2 and 1024");
        }
        if self.max_write_buffer_size_to_maintain < -1 {
            return bad("max_write_buffer_size_to_maintain", "must be -1 (automatic), 0 (none) or a byte count");
        }
        if self.min_write_buffer_number_to_merge == 0 {
            return bad("min_write_buffer_number_to_merge", "must be at least 1");
        }
        if self.num_levels < 2 || self.num_levels > 64 {
            return bad("num_levels", "must be between 2 and 64");
        }
        if self.level0_file_num_compaction_trigger < 1 {
            return bad("level0_file_num_compaction_trigger", "must be at least 1");
        }
        if self.level0_slowdown_writes_trigger < 1 || self.level0_stop_writes_trigger < 1 {
            return bad("level0_slowdown_writes_trigger", "L0 triggers must be at least 1");
        }
        let universal = &self.compaction_options_universal;
        if universal.min_merge_width < 2 {
            return bad("compaction_options_universal.min_merge_width", "must be at least 2");
        }
        if universal.max_merge_width < universal.min_merge_width {
            return bad("compaction_options_universal.max_merge_width", "must be at least min_merge_width");
        }
        if self.compaction_options_fifo.max_table_files_size == 0 {
            return bad("compaction_options_fifo.max_table_files_size", "must be positive");
        }
        if self.max_bytes_for_level_base == 0 {
            return bad("max_bytes_for_level_base", "must be positive");
        }
        if !(self.max_bytes_for_level_multiplier > 0.0 && self.max_bytes_for_level_multiplier.is_finite()) {
            return bad("max_bytes_for_level_multiplier", "must be a positive number");
        }
        if self.target_file_size_base == 0 {
            return bad("target_file_size_base", "must be positive");
        }
        if self.target_file_size_multiplier == 0 {
            return bad("target_file_size_multiplier", "must be at least 1");
        }
        if self.block_size == 0 || self.block_size > (1 << 30) {
            return bad("block_size", "must be between 1 byte and 1 GiB");
        }
        if self.block_restart_interval == 0 {
            return bad("block_restart_interval", "must be at least 1");
        }
        if self.index_block_restart_interval == 0 {
            return bad("index_block_restart_interval", "must be at least 1");
        }
        if self.metadata_block_size == 0 || self.metadata_block_size > (1 << 30) {
            return bad("metadata_block_size", "must be between 1 byte and 1 GiB");
        }
        if self.max_background_jobs < 1 {
            return bad("max_background_jobs", "must be at least 1");
        }
        if self.max_background_flushes == 0 || self.max_background_flushes < -1 {
            return bad("max_background_flushes", "must be -1 or at least 1");
        }
        if self.max_background_compactions == 0 || self.max_background_compactions < -1 {
            return bad("max_background_compactions", "must be -1 or at least 1");
        }
        if self.max_subcompactions == 0 {
            return bad("max_subcompactions", "must be at least 1");
        }
        if !(0.0..=0.25).contains(&self.memtable_prefix_bloom_size_ratio) {
            return bad("memtable_prefix_bloom_size_ratio", "must be between 0 and 0.25");
        }
        if self.bloom_bits_per_key > 64 {
            return bad("bloom_bits_per_key", "must be between 0 and 64");
        }
        if self.compression_per_level.len() > self.num_levels {
            return bad("compression_per_level", "has more entries than num_levels");
        }
        if self.max_manifest_file_size == 0 {
            return bad("max_manifest_file_size", "must be positive");
        }
        if self.max_file_opening_threads < 1 {
            return bad("max_file_opening_threads", "must be at least 1");
        }
        if self.max_open_files < -1 {
            return bad("max_open_files", "must be -1 (keep every table open) or at least 0");
        }
        if self.delayed_write_rate == 0 {
            return bad("delayed_write_rate", "must be positive");
        }
        if self.blob_file_size == 0 {
            return bad("blob_file_size", "must be positive");
        }
        for (name, fraction) in [
            ("blob_garbage_collection_age_cutoff", self.blob_garbage_collection_age_cutoff),
            ("blob_garbage_collection_force_threshold", self.blob_garbage_collection_force_threshold),
        ] {
            if !(0.0..=1.0).contains(&fraction) {
                return bad(name, "must be between 0 and 1");
            }
        }
        if self.enable_blob_files && self.compaction_style == CompactionStyle::Fifo {
            return bad(
                "enable_blob_files",
                "is not supported with FIFO compaction (it drops tables unread, so the blobs they refer to \
                 could never be counted as garbage and deleted)",
            );
        }
        // Each readahead is one buffer in memory per iterator.
        for (name, size) in [
            ("compaction_readahead_size", self.compaction_readahead_size),
            ("initial_auto_readahead_size", self.initial_auto_readahead_size),
            ("max_auto_readahead_size", self.max_auto_readahead_size),
        ] {
            if size > MAX_READAHEAD_SIZE {
                return bad(name, "must be at most 1 GiB");
            }
        }
        CacheOptions::from_options(self).validate()?;
        Ok(())
    }

    /// Applies `(name, value)` pairs, refusing options that are not dynamic.
    /// Used by `Db::set_options`; the whole change is refused if any pair is bad.
    pub fn apply_dynamic(&self, changes: &[(&str, &str)]) -> Result<Options> {
        let mut next = self.clone();
        for (name, value) in changes {
            match Options::is_dynamic(name) {
                None => return Err(Error::invalid(format!("unknown option {name:?}"))),
                Some(false) => {
                    return Err(Error::invalid(format!("option {name} cannot be changed while the database is open")))
                }
                Some(true) => next.set(name, value)?,
            }
        }
        next.validate()?;
        Ok(next)
    }
}

// What the layers below take from the options: each keeps its own narrow
// settings type (the table builder's, the readers', the cache's), built here
// so that none of them imports `Options`.

impl TableBuilderOptions {
    /// The table options of `o`, with the compression chosen for the output level.
    pub fn from_options(o: &ColumnFamilyOptions, compression: CompressionType) -> Self {
        TableBuilderOptions {
            block_size: o.block_size,
            block_restart_interval: o.block_restart_interval,
            index_block_restart_interval: o.index_block_restart_interval,
            block_size_deviation: o.block_size_deviation,
            bloom_bits_per_key: o.bloom_bits_per_key,
            checksum: o.checksum,
            compression,
            column_family: 0,
            column_family_name: None,
            index_partition_size: (o.index_type == IndexType::TwoLevelIndexSearch)
                .then_some(o.metadata_block_size.max(1)),
            partition_filters: o.partition_filters,
            user_key_index: true,
            whole_key_filtering: o.whole_key_filtering,
            prefix_extractor: o.prefix_extractor.clone().map(crate::prefix::Extractor),
            comparator: o.user_comparator(),
            collectors: crate::table_properties::Collectors(o.table_properties_collector_factories.clone()),
            // A family's options hold no clock: the database sets its own.
            clock: Arc::new(SystemClock::new()),
        }
    }
}

impl TableCacheOptions {
    /// How the database's table cache opens and keeps tables.
    pub fn from_options(o: &Options) -> Self {
        TableCacheOptions {
            cache_index_and_filter_blocks: o.cache_index_and_filter_blocks,
            cache_index_and_filter_blocks_with_high_priority: o.cache_index_and_filter_blocks_with_high_priority,
            pin_l0_filter_and_index_blocks_in_cache: o.pin_l0_filter_and_index_blocks_in_cache,
            allow_mmap_reads: o.allow_mmap_reads,
            use_direct_reads: o.use_direct_reads,
            advise_random_on_open: o.advise_random_on_open,
            initial_auto_readahead_size: o.initial_auto_readahead_size,
            max_auto_readahead_size: o.max_auto_readahead_size,
            capacity: o.table_cache_capacity(),
        }
    }
}

impl StorageInfoOptions {
    /// What the shape figures of a version (level targets, scores, pending
    /// compaction bytes, the L0 stall count) read of family options `o`.
    pub fn from_options(o: &ColumnFamilyOptions) -> Self {
        StorageInfoOptions {
            style: match o.compaction_style {
                CompactionStyle::Level => TreeStyle::Level,
                CompactionStyle::Universal => TreeStyle::Universal,
                CompactionStyle::Fifo => {
                    TreeStyle::Fifo { max_table_files_size: o.compaction_options_fifo.max_table_files_size }
                }
            },
            level0_file_num_compaction_trigger: o.level0_file_num_compaction_trigger,
            level0_slowdown_writes_trigger: o.effective_l0_stall_triggers().0,
            max_bytes_for_level_base: o.max_bytes_for_level_base,
            max_bytes_for_level_multiplier: o.max_bytes_for_level_multiplier,
            level_compaction_dynamic_level_bytes: o.level_compaction_dynamic_level_bytes,
            soft_pending_compaction_bytes_limit: o.soft_pending_compaction_bytes_limit,
            disable_auto_compactions: o.disable_auto_compactions,
        }
    }
}

impl ReadSettings {
    /// These settings with a fixed readahead of `bytes` (0: none).
    pub fn with_readahead(self, bytes: usize) -> Self {
        ReadSettings { readahead: Readahead::Fixed(bytes), ..self }
    }

    /// The settings of a compaction's input iterators: checksums as
    /// `paranoid_checks` says, no cache fill, `compaction_readahead_size`
    /// readahead (less for each input of a wide compaction, compaction/mod.rs
    /// `readahead_per_input`), files hinted sequential.
    pub fn for_compaction(o: &Options) -> Self {
        ReadSettings {
            verify_checksums: o.paranoid_checks,
            fill_cache: false,
            readahead: Readahead::Fixed(o.compaction_readahead_size),
            for_compaction: true,
        }
    }
}

impl CacheOptions {
    /// The cache options a database's [`Options`] ask for (the clock table is
    /// sized for entries of `block_size`).
    pub fn from_options(o: &Options) -> Self {
        CacheOptions {
            capacity: o.block_cache_size,
            num_shard_bits: o.block_cache_num_shard_bits,
            strict_capacity_limit: o.block_cache_strict_capacity_limit,
            high_pri_pool_ratio: o.block_cache_high_pri_pool_ratio,
            lru_promote_on_hit: o.block_cache_lru_promote_on_hit,
            metadata_charge: true,
            estimated_entry_charge: o.block_size.max(1),
            compressed_secondary_cache_size: o.compressed_secondary_cache_size,
        }
    }
}

/// The block cache a database opened with `options` reads through: the shared
/// [`Options::block_cache`] when set, none when `block_cache_size` is 0, else
/// a new cache of `block_cache_type`.
pub fn block_cache_for(options: &Options) -> Result<Option<Arc<dyn BlockCache>>> {
    if let Some(shared) = &options.block_cache {
        return Ok(Some(Arc::clone(shared)));
    }
    if options.block_cache_size == 0 {
        return Ok(None);
    }
    new_cache(options.block_cache_type, &CacheOptions::from_options(options)).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_form_round_trips_every_option() {
        let mut o = Options::default();
        o.write_buffer_size = 12345;
        o.compression_per_level = vec![CompressionType::None, CompressionType::Lz4, CompressionType::Zstd];
        o.bottommost_compression = Some(CompressionType::Zstd);
        o.wal_recovery_mode = WalRecoveryMode::AbsoluteConsistency;
        o.max_bytes_for_level_multiplier = 8.5;
        o.checksum = ChecksumType::Xxh3;
        o.compaction_style = CompactionStyle::Universal;
        o.create_if_missing = true;
        let text = o.to_text();
        let back = Options::from_text(&text).unwrap();
        assert_eq!(back.to_text(), text);
        for name in Options::names() {
            assert_eq!(back.get(name), o.get(name), "{name}");
        }
        assert_eq!(back.write_buffer_size, 12345);
        assert_eq!(back.compression_per_level.len(), 3);
    }

    #[test]
    fn bad_option_text_names_the_option() {
        let e = Options::from_text("write_bufer_size=1").unwrap_err().to_string();
        assert!(e.contains("write_bufer_size"), "{e}");
        let e = Options::from_text("compression=brotli").unwrap_err().to_string();
        assert!(e.contains("compression") && e.contains("brotli"), "{e}");
        let e = Options::from_text("num_levels=seven").unwrap_err().to_string();
        assert!(e.contains("num_levels"), "{e}");
        assert!(Options::from_text("no equals sign").is_err());
    }

    #[test]
    fn universal_and_fifo_options_round_trip_and_are_checked() {
        let text = "compaction_style=kCompactionStyleUniversal\n\
                    compaction_options_universal.size_ratio=5\n\
                    compaction_options_universal.min_merge_width=3\n\
                    compaction_options_universal.max_merge_width=9\n\
                    compaction_options_universal.max_size_amplification_percent=150\n\
                    compaction_options_universal.allow_trivial_move=true\n\
                    compaction_options_fifo.max_table_files_size=4096\n\
                    compaction_options_fifo.allow_compaction=true\n\
                    ttl=60";
        let o = Options::from_text(text).unwrap();
        let u = o.compaction_options_universal;
        assert_eq!(
            (
                u.size_ratio,
                u.min_merge_width,
                u.max_merge_width,
                u.max_size_amplification_percent,
                u.allow_trivial_move
            ),
            (5, 3, 9, 150, true)
        );
        assert_eq!(
            o.compaction_options_fifo,
            CompactionOptionsFifo { max_table_files_size: 4096, allow_compaction: true }
        );
        assert_eq!(o.ttl, 60);
        o.validate().unwrap();
        let back = Options::from_text(&o.to_text()).unwrap();
        assert_eq!(back.to_text(), o.to_text());
        assert_eq!(back.compaction_options_universal, u);
        let d = Options::default();
        assert_eq!(d.get("compaction_options_universal.max_merge_width").as_deref(), Some("4294967295"));
        assert_eq!(d.get("compaction_options_fifo.max_table_files_size").as_deref(), Some("1073741824"));
        assert_eq!(Options::is_dynamic("compaction_options_universal.size_ratio"), Some(true));
        let e = Options::from_text("compaction_options_universal.size_ratio=-1").unwrap_err().to_string();
        assert!(e.contains("compaction_options_universal.size_ratio"), "{e}");
        let e = Options::from_text("compaction_options_fifo.allow_compaction=maybe").unwrap_err().to_string();
        assert!(e.contains("compaction_options_fifo.allow_compaction"), "{e}");
        for (name, value) in [
            ("compaction_options_universal.min_merge_width", "1"),
            ("compaction_options_universal.max_merge_width", "2"),
            ("compaction_options_fifo.max_table_files_size", "0"),
        ] {
            let e = Options::from_text(text).unwrap().apply_dynamic(&[(name, value)]).unwrap_err().to_string();
            assert!(e.contains(name), "{name}: {e}");
        }
    }

    #[test]
    fn blob_options_have_rocksdbs_defaults_round_trip_and_are_checked() {
        let d = Options::default();
        assert!(!d.enable_blob_files && !d.enable_blob_garbage_collection);
        assert_eq!((d.min_blob_size, d.blob_file_size, d.blob_compression_type), (0, 256 << 20, CompressionType::None));
        assert_eq!((d.blob_garbage_collection_age_cutoff, d.blob_garbage_collection_force_threshold), (0.25, 1.0));
        let text = "enable_blob_files=true\nmin_blob_size=4096\nblob_file_size=1048576\n\
                    blob_compression_type=kZSTD\nenable_blob_garbage_collection=true\n\
                    blob_garbage_collection_age_cutoff=0.5\nblob_garbage_collection_force_threshold=0.8";
        let o = Options::from_text(text).unwrap();
        assert!(o.enable_blob_files && o.enable_blob_garbage_collection);
        assert_eq!(
            (o.min_blob_size, o.blob_file_size, o.blob_compression_type),
            (4096, 1 << 20, CompressionType::Zstd)
        );
        assert_eq!((o.blob_garbage_collection_age_cutoff, o.blob_garbage_collection_force_threshold), (0.5, 0.8));
        o.validate().unwrap();
        let written = o.to_text();
        // Column family options, in their section, as RocksDB's OPTIONS file has them.
        let cf = written.split("[CFOptions").nth(1).unwrap().split("[TableOptions").next().unwrap();
        assert!(cf.contains("  blob_compression_type=kZSTD\n"), "{written}");
        assert_eq!(Options::from_text(&written).unwrap().to_text(), written);
        for name in Options::names().filter(|n| n.contains("blob")) {
            assert_eq!(Options::is_dynamic(name), Some(true), "{name} is dynamic in RocksDB");
        }
        let n = d.apply_dynamic(&[("enable_blob_files", "true"), ("min_blob_size", "100")]).unwrap();
        assert!(n.enable_blob_files && n.min_blob_size == 100);
        for (name, value) in [
            ("blob_file_size", "0"),
            ("blob_garbage_collection_age_cutoff", "1.5"),
            ("blob_garbage_collection_force_threshold", "-0.1"),
        ] {
            let e = d.apply_dynamic(&[(name, value)]).unwrap_err().to_string();
            assert!(e.contains(name), "{name}: {e}");
        }
        let e = Options::from_text("blob_compression_type=brotli").unwrap_err().to_string();
        assert!(e.contains("blob_compression_type"), "{e}");
        let mut fifo = Options::default();
        fifo.compaction_style = CompactionStyle::Fifo;
        fifo.enable_blob_files = true;
        assert!(fifo.validate().unwrap_err().to_string().contains("enable_blob_files"));
    }

    #[test]
    fn validate_refuses_zero_write_buffer() {
        let mut o = Options::default();
        assert!(o.validate().is_ok());
        o.write_buffer_size = 0;
        let e = o.validate().unwrap_err().to_string();
        assert!(e.contains("write_buffer_size"), "{e}");
    }

    #[test]
    fn block_cache_options_parse_and_are_checked() {
        let o = Options::from_text(
            "block_cache_type=kHyperClockCache\nblock_cache_num_shard_bits=3\n\
             cache_index_and_filter_blocks=true\npin_l0_filter_and_index_blocks_in_cache=true",
        )
        .unwrap();
        assert_eq!(o.block_cache_type, CacheType::Clock);
        assert_eq!(o.block_cache_num_shard_bits, 3);
        assert!(o.cache_index_and_filter_blocks && o.pin_l0_filter_and_index_blocks_in_cache);
        assert_eq!(Options::default().get("block_cache_type").as_deref(), Some("kLRUCache"));
        let e = Options::from_text("block_cache_type=arc").unwrap_err().to_string();
        assert!(e.contains("block_cache_type"), "{e}");
        let mut o = Options::default();
        o.block_cache_num_shard_bits = 20;
        let e = o.validate().unwrap_err().to_string();
        assert!(e.contains("block_cache_num_shard_bits"), "{e}");
        o.block_cache_num_shard_bits = 19;
        o.block_cache_high_pri_pool_ratio = -0.1;
        let e = o.validate().unwrap_err().to_string();
        assert!(e.contains("block_cache_high_pri_pool_ratio"), "{e}");
    }

    #[test]
    fn the_structs_sections_are_the_text_forms_sections() {
        let mut seen = 0;
        for (name, section) in text::option_sections() {
            let field = name.split('.').next().unwrap();
            let fields = match section {
                "db" => split_fields::DB,
                "cf" => split_fields::CF,
                _ => split_fields::TABLE,
            };
            assert!(
                fields.contains(&field),
                "option {name} is in the text form's {section} section, not in its struct"
            );
            seen += 1;
        }
        assert!(seen > 80, "{seen} options in the text form");
        // And every field is in exactly one struct.
        let all: Vec<&str> = [split_fields::DB, split_fields::CF, split_fields::TABLE].concat();
        let mut sorted = all.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), all.len());
    }

    /// The clock, like the filesystem, is no option of the text form: a
    /// manual one changes nothing in the OPTIONS text, and options read
    /// back from text have the system's clock.
    #[test]
    fn the_clock_is_not_in_the_text_form() {
        use std::time::Duration;
        let manual = Arc::new(crate::clock::ManualClock::new(Duration::from_secs(5)));
        let o = Options::default().with_clock(manual.clone());
        assert_eq!(o.clock.now_secs(), 5);
        assert_eq!(o.db_options().clock.now_secs(), 5, "the clock is a database option");
        let text = o.to_text();
        assert_eq!(text, Options::default().to_text());
        assert!(!text.contains("clock"), "{text}");
        let back = Options::from_text(&text).unwrap();
        assert!(back.clock.now_secs() > 1_700_000_000, "the system's clock, not the manual one");
    }

    #[test]
    fn options_split_and_join_back_unchanged() {
        let mut o = Options::default();
        o.set("max_background_jobs", "5").unwrap();
        o.set("write_buffer_size", "12345").unwrap();
        o.set("block_size", "8192").unwrap();
        o.set("compaction_options_universal.size_ratio", "7").unwrap();
        let (db, cf) = (o.db_options(), o.cf_options());
        assert_eq!((db.max_background_jobs, cf.write_buffer_size, cf.block_size), (5, 12345, 8192));
        assert_eq!(cf.table_options().block_size, 8192);
        let back = Options::from_parts(db, cf);
        assert_eq!(back.to_text(), o.to_text());
        // A family's options over another database's options.
        let mut other = ColumnFamilyOptions::default();
        other.write_buffer_size = 1 << 20;
        let mixed = o.clone().with_cf_options(other);
        assert_eq!((mixed.max_background_jobs, mixed.write_buffer_size, mixed.block_size), (5, 1 << 20, 4096));
        let t = TableOptions { block_size: 1024, ..TableOptions::default() };
        assert_eq!(ColumnFamilyOptions::default().with_table_options(t).block_size, 1024);
    }

    #[test]
    fn the_layers_settings_default_as_the_options_do() {
        let d = Options::default();
        assert_eq!(TableCacheOptions::from_options(&d), TableCacheOptions::default());
        assert_eq!(ReadSettings::for_compaction(&d).readahead, Readahead::Fixed(d.compaction_readahead_size));
    }

    #[test]
    fn read_path_io_options_round_trip_and_are_checked() {
        let d = Options::default();
        assert!(!d.allow_mmap_reads && d.advise_random_on_open);
        assert_eq!(
            (d.compaction_readahead_size, d.initial_auto_readahead_size, d.max_auto_readahead_size),
            (2 << 20, 8 << 10, 256 << 10),
            "RocksDB's defaults"
        );
        let text = "allow_mmap_reads=true\nadvise_random_on_open=false\ncompaction_readahead_size=65536\n\
                    initial_auto_readahead_size=4096\nmax_auto_readahead_size=0";
        let o = Options::from_text(text).unwrap();
        assert!(o.allow_mmap_reads && !o.advise_random_on_open);
        assert_eq!(
            (o.compaction_readahead_size, o.initial_auto_readahead_size, o.max_auto_readahead_size),
            (65536, 4096, 0)
        );
        o.validate().unwrap();
        assert_eq!(Options::from_text(&o.to_text()).unwrap().to_text(), o.to_text());
        let n = o.apply_dynamic(&[("compaction_readahead_size", "0")]).unwrap();
        assert_eq!(n.compaction_readahead_size, 0);
        let e = o.apply_dynamic(&[("allow_mmap_reads", "false")]).unwrap_err().to_string();
        assert!(e.contains("allow_mmap_reads"), "{e}");
        for name in ["compaction_readahead_size", "initial_auto_readahead_size", "max_auto_readahead_size"] {
            let e = Options::from_text(&format!("{name}=-1")).unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
            let mut o = Options::default();
            o.set(name, &(MAX_READAHEAD_SIZE + 1).to_string()).unwrap();
            let e = o.validate().unwrap_err().to_string();
            assert!(e.contains(name), "{e}");
        }
        let e = Options::from_text("allow_mmap_reads=sometimes").unwrap_err().to_string();
        assert!(e.contains("allow_mmap_reads"), "{e}");
    }

    #[test]
    fn dynamic_changes_are_checked() {
        let o = Options::default();
        let n = o.apply_dynamic(&[("level0_slowdown_writes_trigger", "8")]).unwrap();
        assert_eq!(n.level0_slowdown_writes_trigger, 8);
        assert!(o.apply_dynamic(&[("num_levels", "3")]).unwrap_err().to_string().contains("num_levels"));
        assert!(o.apply_dynamic(&[("nope", "3")]).unwrap_err().to_string().contains("nope"));
        assert!(o.apply_dynamic(&[("write_buffer_size", "0")]).is_err());
    }

    #[test]
    fn thread_counts_derive_from_jobs() {
        let mut o = Options::default();
        assert_eq!((o.flush_threads(), o.compaction_threads()), (1, 1));
        o.max_background_jobs = 8;
        assert_eq!((o.flush_threads(), o.compaction_threads()), (2, 6));
        o.max_background_compactions = 3;
        assert_eq!(o.compaction_threads(), 3);
    }

    #[test]
    fn presets_set_what_they_document_and_validate() {
        let d = Options::default();
        let w = Options::default().optimize_for_writes();
        assert_eq!(w.max_write_buffer_number, 5);
        assert_eq!(
            (w.block_cache_size, w.write_buffer_size, w.bloom_bits_per_key),
            (d.block_cache_size, d.write_buffer_size, d.bloom_bits_per_key)
        );
        assert_eq!(w.compaction_style, CompactionStyle::Level);
        let r = Options::default().optimize_for_reads();
        assert_eq!((r.block_cache_size, r.write_buffer_size, r.bloom_bits_per_key), (512 << 20, 256 << 20, 20));
        let b = Options::default().prepare_for_bulk_load();
        assert!(b.disable_auto_compactions);
        assert_eq!(b.level0_stop_writes_trigger, 1 << 30);
        assert_eq!((b.soft_pending_compaction_bytes_limit, b.hard_pending_compaction_bytes_limit), (0, 0));
        assert_eq!((b.num_levels, b.max_write_buffer_number, b.target_file_size_base), (2, 6, 256 << 20));
        assert_eq!(b.effective_max_compaction_bytes(), 1 << 60);
        for o in [w, r, b] {
            o.validate().unwrap();
            // Each preset is plain options: it survives the OPTIONS text form.
            assert_eq!(Options::from_text(&o.to_text()).unwrap().to_text(), o.to_text());
        }
    }
}
