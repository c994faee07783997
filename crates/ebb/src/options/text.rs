//! The text form of [`Options`]: one `name=value` per option, in the
//! sections of a RocksDB OPTIONS file (`[DBOptions]`, `[CFOptions "default"]`,
//! `[TableOptions/BlockBasedTable "default"]`), the table of every option's
//! name, section and whether `set_options` may change it, and each option
//! type's text (RocksDB's spellings: `kLZ4Compression`, `kCRC32c`, ...).

use std::fmt::Write as _;

use super::{BackgroundTuning, CompactionStyle, CompressionType, IdlePolicyKind, IndexType, Options, WalRecoveryMode};
use crate::cache::CacheType;
use crate::error::{Error, Result};
use crate::util::checksum::ChecksumType;

impl Options {
    /// Sets one option from its text form. Unknown names and unparsable values
    /// are errors naming the option.
    pub fn set(&mut self, name: &str, value: &str) -> Result<()> {
        self.set_by_name(name.trim(), value.trim())
    }

    /// The text form of one option, `None` for an unknown name.
    pub fn get(&self, name: &str) -> Option<String> {
        self.get_by_name(name)
    }

    /// True when `name` can be changed on an open database with `set_options`.
    pub fn is_dynamic(name: &str) -> Option<bool> {
        OPTION_TABLE.iter().find(|(n, _, _)| *n == name).map(|(_, _, d)| *d)
    }

    /// Every option name in the text form.
    pub fn names() -> impl Iterator<Item = &'static str> {
        OPTION_TABLE.iter().map(|(n, _, _)| *n)
    }

    /// The OPTIONS-file text: sections `[DBOptions]`, `[CFOptions "default"]`,
    /// `[TableOptions/BlockBasedTable "default"]`, one `name=value` per line.
    pub fn to_text(&self) -> String {
        let mut out = String::from("# Ebb options file: parsed by Options::from_text\n");
        let _ = writeln!(out, "[Version]\n  ebb_version={}\n  options_file_version=1", env!("CARGO_PKG_VERSION"));
        self.write_section(&mut out, Section::Db, "[DBOptions]");
        self.write_family_sections(&mut out, "\"default\"");
        out
    }

    /// Appends the `[CFOptions <family>]` and
    /// `[TableOptions/BlockBasedTable <family>]` sections of these options;
    /// `family` is the quoted (and escaped) family name.
    pub(super) fn write_family_sections(&self, out: &mut String, family: &str) {
        self.write_section(out, Section::Cf, &format!("[CFOptions {family}]"));
        self.write_section(out, Section::Table, &format!("[TableOptions/BlockBasedTable {family}]"));
    }

    /// Appends `header` and the options of `section`, one `name=value` each.
    fn write_section(&self, out: &mut String, section: Section, header: &str) {
        let _ = writeln!(out, "\n{header}");
        for (name, s, _) in OPTION_TABLE {
            if *s == section {
                let value = self.get_by_name(name).unwrap_or_default();
                let _ = writeln!(out, "  {name}={value}");
            }
        }
    }

    /// Parses the text written by [`Options::to_text`] (or by hand) on top of
    /// the defaults. Lines are `name=value`; `#` starts a comment; section
    /// headers are accepted and ignored except `[Version]`, whose keys are
    /// skipped, and the sections of column families other than the default
    /// (an OPTIONS file's; [`Options::load_options_file`] reads them). A
    /// RocksDB OPTIONS file (its `[Version]` names `rocksdb_version`) is
    /// read as [`Options::load_options_file`] reads it: options Ebb does not
    /// have are accepted at RocksDB's defaults and named in the error
    /// otherwise.
    pub fn from_text(text: &str) -> Result<Options> {
        if text.lines().any(|l| l.trim().starts_with("rocksdb_version=")) {
            return Options::load_options_file(text).map(|(o, _)| o);
        }
        let mut opts = Options::default();
        opts.apply_text(text)?;
        Ok(opts)
    }

    /// Applies the options in `text` on top of `self`.
    pub fn apply_text(&mut self, text: &str) -> Result<()> {
        let mut in_version = false;
        for line in text_lines(text) {
            match line? {
                TextLine::Section(header) => {
                    let other_family = header.split_once(' ').is_some_and(|(_, name)| name != "\"default\"]");
                    in_version = header == "[Version]" || other_family;
                }
                TextLine::Option(..) if in_version => {}
                TextLine::Option(_, name, value) => self.set(name, value)?,
            }
        }
        Ok(())
    }
}

/// One meaningful line of an options text.
pub(super) enum TextLine<'a> {
    /// A `[...]` section header.
    Section(&'a str),
    /// `name=value` (trimmed), with its 1-based line number.
    Option(usize, &'a str, &'a str),
}

/// The section headers and `name=value` lines of `text`, comments (`#` on)
/// and blank lines left out; a malformed line is an error naming it.
pub(super) fn text_lines(text: &str) -> impl Iterator<Item = Result<TextLine<'_>>> {
    text.lines().enumerate().filter_map(|(i, raw)| {
        let line = raw.split('#').next().unwrap_or("").trim();
        let lineno = i + 1;
        if line.is_empty() {
            return None;
        }
        if line.starts_with('[') {
            return Some(if line.ends_with(']') {
                Ok(TextLine::Section(line))
            } else {
                Err(Error::invalid(format!("options text line {lineno}: unterminated section header")))
            });
        }
        Some(match line.split_once('=') {
            Some((name, value)) => Ok(TextLine::Option(lineno, name.trim(), value.trim())),
            None => Err(Error::invalid(format!("options text line {lineno}: expected name=value, got {line:?}"))),
        })
    })
}

// ---- text form of each option type ----

trait OptionValue: Sized {
    fn format(&self) -> String;
    fn parse(s: &str) -> std::result::Result<Self, String>;
}

macro_rules! numeric_option_value {
    ($($t:ty),*) => {$(
        impl OptionValue for $t {
            fn format(&self) -> String { self.to_string() }
            fn parse(s: &str) -> std::result::Result<Self, String> {
                s.parse::<$t>().map_err(|e| format!("not a valid {}: {e}", stringify!($t)))
            }
        }
    )*};
}
numeric_option_value!(i32, i64, u32, u64, usize);

impl OptionValue for f64 {
    fn format(&self) -> String {
        format!("{self:?}")
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        s.parse::<f64>().map_err(|e| format!("not a number: {e}"))
    }
}

impl OptionValue for bool {
    fn format(&self) -> String {
        self.to_string()
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Ok(true),
            "false" | "0" | "no" | "off" => Ok(false),
            _ => Err("expected true or false".into()),
        }
    }
}

impl OptionValue for CompressionType {
    fn format(&self) -> String {
        self.name().to_string()
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        CompressionType::parse(s).map_err(|e| e.to_string())
    }
}

impl OptionValue for Option<CompressionType> {
    fn format(&self) -> String {
        match self {
            None => "kDisableCompressionOption".into(),
            Some(c) => c.name().into(),
        }
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        if s.eq_ignore_ascii_case("kDisableCompressionOption") || s.is_empty() {
            Ok(None)
        } else {
            CompressionType::parse(s).map(Some).map_err(|e| e.to_string())
        }
    }
}

impl OptionValue for Vec<CompressionType> {
    fn format(&self) -> String {
        self.iter().map(|c| c.name()).collect::<Vec<_>>().join(":")
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        if s.is_empty() {
            return Ok(Vec::new());
        }
        s.split([':', ',']).map(|p| CompressionType::parse(p.trim()).map_err(|e| e.to_string())).collect()
    }
}

impl OptionValue for IndexType {
    fn format(&self) -> String {
        match self {
            IndexType::BinarySearch => "kBinarySearch",
            IndexType::TwoLevelIndexSearch => "kTwoLevelIndexSearch",
        }
        .into()
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        match s {
            "kBinarySearch" => Ok(IndexType::BinarySearch),
            "kTwoLevelIndexSearch" => Ok(IndexType::TwoLevelIndexSearch),
            _ => Err(format!("unknown index type {s:?} (expected kBinarySearch or kTwoLevelIndexSearch)")),
        }
    }
}

impl OptionValue for ChecksumType {
    fn format(&self) -> String {
        self.name().into()
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        ChecksumType::parse(s).ok_or_else(|| format!("unknown checksum type {s:?} (expected kCRC32c or kXXH3)"))
    }
}

impl OptionValue for WalRecoveryMode {
    fn format(&self) -> String {
        match self {
            WalRecoveryMode::TolerateCorruptedTailRecords => "kTolerateCorruptedTailRecords",
            WalRecoveryMode::AbsoluteConsistency => "kAbsoluteConsistency",
            WalRecoveryMode::PointInTime => "kPointInTimeRecovery",
            WalRecoveryMode::SkipAnyCorruptedRecords => "kSkipAnyCorruptedRecords",
        }
        .into()
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        match s {
            "kTolerateCorruptedTailRecords" | "0" => Ok(WalRecoveryMode::TolerateCorruptedTailRecords),
            "kAbsoluteConsistency" | "1" => Ok(WalRecoveryMode::AbsoluteConsistency),
            "kPointInTimeRecovery" | "2" => Ok(WalRecoveryMode::PointInTime),
            "kSkipAnyCorruptedRecords" | "3" => Ok(WalRecoveryMode::SkipAnyCorruptedRecords),
            _ => Err(format!("unknown WAL recovery mode {s:?}")),
        }
    }
}

impl OptionValue for BackgroundTuning {
    fn format(&self) -> String {
        self.name().into()
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        BackgroundTuning::parse(s).map_err(|e| e.to_string())
    }
}

impl OptionValue for IdlePolicyKind {
    fn format(&self) -> String {
        match self {
            IdlePolicyKind::Throughput => "throughput",
            IdlePolicyKind::SinceLastWrite => "since_last_write",
        }
        .into()
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        match s {
            "throughput" => Ok(IdlePolicyKind::Throughput),
            "since_last_write" => Ok(IdlePolicyKind::SinceLastWrite),
            _ => Err(format!("unknown idle policy {s:?} (expected throughput or since_last_write)")),
        }
    }
}

/// A merge operator is written by name (RocksDB writes `nullptr` for none);
/// the built-in ones are read back by name (`merge_operator::from_name`).
impl OptionValue for Option<std::sync::Arc<dyn crate::merge_operator::MergeOperator>> {
    fn format(&self) -> String {
        self.as_ref().map_or_else(|| "nullptr".into(), |op| op.name().to_string())
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        match s {
            "" | "nullptr" => Ok(None),
            name => crate::merge_operator::from_name(name).map(Some).map_err(|_| {
                format!(
                    "not a built-in merge operator (uint64add, stringappend, max, put); \
                     set ColumnFamilyOptions::merge_operator in code for {name:?}"
                )
            }),
        }
    }
}

/// A comparator is written by name (RocksDB's `comparator=`; none is the
/// bytewise one); the built-in ones read back.
impl OptionValue for Option<std::sync::Arc<dyn crate::comparator::Comparator>> {
    fn format(&self) -> String {
        self.as_ref().map_or_else(|| crate::comparator::BYTEWISE_NAME.into(), |c| c.name().to_string())
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        match s {
            "" | "nullptr" | crate::comparator::BYTEWISE_NAME => Ok(None),
            name => crate::comparator::from_name(name).map(Some).map_err(|e| match e {
                crate::Error::InvalidArgument(m) => m,
                other => other.to_string(),
            }),
        }
    }
}

/// A prefix extractor is written by name (RocksDB's
/// `rocksdb.FixedPrefix.N` ...); the built-in ones read back.
impl OptionValue for Option<std::sync::Arc<dyn crate::prefix::SliceTransform>> {
    fn format(&self) -> String {
        self.as_ref().map_or_else(|| "nullptr".into(), |p| p.name().to_string())
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        match s {
            "" | "nullptr" => Ok(None),
            name => crate::prefix::from_name(name).map(Some).map_err(|_| {
                format!(
                    "not a built-in prefix extractor (rocksdb.FixedPrefix.N, rocksdb.CappedPrefix.N, rocksdb.Noop); \
                     set ColumnFamilyOptions::prefix_extractor in code for {name:?}"
                )
            }),
        }
    }
}

/// An SST partitioner factory is written by name; the built-in ones read
/// back (`SstPartitionerFixedPrefixFactory:N`).
impl OptionValue for Option<std::sync::Arc<dyn crate::sst_partitioner::SstPartitionerFactory>> {
    fn format(&self) -> String {
        self.as_ref().map_or_else(|| "nullptr".into(), |p| p.name().to_string())
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        match s {
            "" | "nullptr" => Ok(None),
            name => crate::sst_partitioner::from_name(name).map(Some).map_err(|e| match e {
                crate::Error::InvalidArgument(m) => m,
                other => other.to_string(),
            }),
        }
    }
}

/// A shared write buffer manager is an object made in code, written as
/// `WriteBufferManager:BUDGET[:stall]`; read back, that makes a manager of
/// the database's own with that budget (shared with no other database).
impl OptionValue for Option<std::sync::Arc<crate::write_buffer_manager::WriteBufferManager>> {
    fn format(&self) -> String {
        self.as_ref().map_or_else(
            || "nullptr".into(),
            |m| format!("WriteBufferManager:{}{}", m.buffer_size(), if m.allow_stall() { ":stall" } else { "" }),
        )
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        if matches!(s, "" | "nullptr") {
            return Ok(None);
        }
        let bad = || format!("{s:?}: want nullptr or WriteBufferManager:BUDGET[:stall]");
        let rest = s.strip_prefix("WriteBufferManager:").ok_or_else(bad)?;
        let (size, stall) = match rest.strip_suffix(":stall") {
            Some(size) => (size, true),
            None => (rest, false),
        };
        let size: usize = size.parse().map_err(|_| bad())?;
        Ok(Some(crate::write_buffer_manager::WriteBufferManager::new(size, stall)))
    }
}

/// A compaction filter (or factory) is written by name, for the record: it
/// is user code, set in code, so only `nullptr` (none) reads back.
macro_rules! named_user_object {
    ($($t:ty, $field:literal;)*) => {$(
        impl OptionValue for Option<std::sync::Arc<$t>> {
            fn format(&self) -> String {
                self.as_ref().map_or_else(|| "nullptr".into(), |f| f.name().to_string())
            }
            fn parse(s: &str) -> std::result::Result<Self, String> {
                match s {
                    "" | "nullptr" => Ok(None),
                    name => Err(format!(
                        "{name:?} is user code: set ColumnFamilyOptions::{} in code", $field
                    )),
                }
            }
        }
    )*};
}
named_user_object! {
    dyn crate::compaction_filter::CompactionFilter, "compaction_filter";
    dyn crate::compaction_filter::CompactionFilterFactory, "compaction_filter_factory";
}

impl OptionValue for CompactionStyle {
    fn format(&self) -> String {
        match self {
            CompactionStyle::Level => "kCompactionStyleLevel",
            CompactionStyle::Universal => "kCompactionStyleUniversal",
            CompactionStyle::Fifo => "kCompactionStyleFIFO",
        }
        .into()
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "kcompactionstylelevel" | "level" | "0" => Ok(CompactionStyle::Level),
            "kcompactionstyleuniversal" | "universal" | "1" => Ok(CompactionStyle::Universal),
            "kcompactionstylefifo" | "fifo" | "2" => Ok(CompactionStyle::Fifo),
            _ => Err(format!("unknown compaction style {s:?}")),
        }
    }
}

impl OptionValue for CacheType {
    fn format(&self) -> String {
        self.name().into()
    }
    fn parse(s: &str) -> std::result::Result<Self, String> {
        CacheType::parse(s).ok_or_else(|| format!("unknown cache type {s:?} (expected kLRUCache or kHyperClockCache)"))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Section {
    Db,
    Cf,
    Table,
}

/// Every option of the text form with its section (`db`, `cf`, `table`).
#[cfg(test)]
pub(super) fn option_sections() -> impl Iterator<Item = (&'static str, &'static str)> {
    OPTION_TABLE.iter().map(|(name, section, _)| {
        let s = match section {
            Section::Db => "db",
            Section::Cf => "cf",
            Section::Table => "table",
        };
        (*name, s)
    })
}

// A field of a nested settings struct is named `struct.field`, as RocksDB
// names the members of `compaction_options_universal` in `SetOptions`.
macro_rules! option_table {
    ($($field:ident $(. $member:ident)? : $section:ident, $dynamic:literal;)*) => {
        /// (name, section, dynamic) for every option in the text form.
        const OPTION_TABLE: &[(&str, Section, bool)] =
            &[$((concat!(stringify!($field) $(, ".", stringify!($member))?), Section::$section, $dynamic)),*];

        impl Options {
            fn set_by_name(&mut self, name: &str, value: &str) -> Result<()> {
                match name {
                    $(concat!(stringify!($field) $(, ".", stringify!($member))?) => {
                        self.$field $(.$member)? = OptionValue::parse(value)
                            .map_err(|e| Error::invalid(format!("option {name}={value:?}: {e}")))?;
                    })*
                    _ => return Err(Error::invalid(format!("unknown option {name:?}"))),
                }
                Ok(())
            }

            fn get_by_name(&self, name: &str) -> Option<String> {
                match name {
                    $(concat!(stringify!($field) $(, ".", stringify!($member))?) => {
                        Some(OptionValue::format(&self.$field $(.$member)?))
                    })*
                    _ => None,
                }
            }
        }
    };
}

option_table! {
    create_if_missing: Db, false;
    error_if_exists: Db, false;
    create_missing_column_families: Db, false;
    paranoid_checks: Db, false;
    max_background_jobs: Db, true;
    max_background_flushes: Db, true;
    max_background_compactions: Db, true;
    max_subcompactions: Db, true;
    wal_recovery_mode: Db, false;
    manual_wal_flush: Db, false;
    max_total_wal_size: Db, true;
    write_buffer_manager: Db, false;
    db_write_buffer_size: Db, false;
    wal_ttl_seconds: Db, true;
    wal_size_limit_mb: Db, true;
    wal_bytes_per_sync: Db, true;
    bytes_per_sync: Db, true;
    max_manifest_file_size: Db, false;
    max_open_files: Db, false;
    max_file_opening_threads: Db, false;
    allow_mmap_reads: Db, false;
    use_direct_reads: Db, false;
    use_direct_io_for_flush_and_compaction: Db, false;
    advise_random_on_open: Db, false;
    compaction_readahead_size: Db, true;
    delayed_write_rate: Db, true;
    statistics: Db, false;
    stats_dump_period_sec: Db, true;
    malloc_trim_period_ms: Db, true;
    keep_log_file_num: Db, false;
    best_efforts_recovery: Db, false;
    rate_limiter_bytes_per_sec: Db, true;
    rate_limiter_refill_period_us: Db, false;
    rate_limiter_fairness: Db, false;
    rate_limiter_auto_tuned: Db, false;
    auto_tuned_compactions: Db, false;
    background_tuning: Db, false;
    tuning_flush_watermark_pct: Db, false;
    tuning_total_watermark_pct: Db, false;
    tuning_interval_us: Db, false;
    tuning_io_budget: Db, false;
    tuning_max_l0_files: Db, false;
    tuning_max_l0_debt_ratio: Db, false;
    tuning_read_share_pct: Db, false;
    idle_policy: Db, false;
    idle_probe_interval_ms: Db, false;
    idle_throughput_threshold: Db, false;
    idle_quiet_ms: Db, false;
    write_buffer_size: Cf, true;
    max_write_buffer_number: Cf, true;
    min_write_buffer_number_to_merge: Cf, false;
    max_write_buffer_size_to_maintain: Cf, false;
    compaction_style: Cf, false;
    compaction_options_universal.size_ratio: Cf, true;
    compaction_options_universal.min_merge_width: Cf, true;
    compaction_options_universal.max_merge_width: Cf, true;
    compaction_options_universal.max_size_amplification_percent: Cf, true;
    compaction_options_universal.allow_trivial_move: Cf, true;
    compaction_options_fifo.max_table_files_size: Cf, true;
    compaction_options_fifo.allow_compaction: Cf, true;
    ttl: Cf, true;
    periodic_compaction_seconds: Cf, true;
    num_levels: Cf, false;
    level0_file_num_compaction_trigger: Cf, true;
    level0_slowdown_writes_trigger: Cf, true;
    level0_stop_writes_trigger: Cf, true;
    max_bytes_for_level_base: Cf, true;
    max_bytes_for_level_multiplier: Cf, true;
    level_compaction_dynamic_level_bytes: Cf, false;
    target_file_size_base: Cf, true;
    target_file_size_multiplier: Cf, true;
    max_compaction_bytes: Cf, true;
    soft_pending_compaction_bytes_limit: Cf, true;
    hard_pending_compaction_bytes_limit: Cf, true;
    disable_auto_compactions: Cf, true;
    comparator: Cf, false;
    merge_operator: Cf, false;
    prefix_extractor: Cf, false;
    sst_partitioner_factory: Cf, false;
    memtable_prefix_bloom_size_ratio: Cf, false;
    max_successive_merges: Cf, true;
    compaction_filter: Cf, false;
    compaction_filter_factory: Cf, false;
    compression: Cf, true;
    compression_per_level: Cf, true;
    bottommost_compression: Cf, true;
    enable_blob_files: Cf, true;
    min_blob_size: Cf, true;
    blob_file_size: Cf, true;
    blob_compression_type: Cf, true;
    enable_blob_garbage_collection: Cf, true;
    blob_garbage_collection_age_cutoff: Cf, true;
    blob_garbage_collection_force_threshold: Cf, true;
    block_size: Table, false;
    block_restart_interval: Table, false;
    index_block_restart_interval: Table, false;
    block_size_deviation: Table, false;
    bloom_bits_per_key: Table, false;
    whole_key_filtering: Table, false;
    checksum: Table, false;
    block_cache_size: Table, false;
    block_cache_type: Table, false;
    block_cache_num_shard_bits: Table, false;
    block_cache_high_pri_pool_ratio: Table, false;
    block_cache_strict_capacity_limit: Table, false;
    block_cache_lru_promote_on_hit: Table, false;
    compressed_secondary_cache_size: Table, false;
    cache_index_and_filter_blocks: Table, false;
    index_type: Table, false;
    metadata_block_size: Table, false;
    partition_filters: Table, false;
    cache_index_and_filter_blocks_with_high_priority: Table, false;
    pin_l0_filter_and_index_blocks_in_cache: Table, false;
    initial_auto_readahead_size: Table, false;
    max_auto_readahead_size: Table, false;
}
