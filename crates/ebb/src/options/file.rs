//! OPTIONS files with every column family, and RocksDB's OPTIONS files
//! (docs/format.md, "OPTIONS file"; RocksDB's `LoadOptionsFromFile`).
//!
//! Ebb writes `[DBOptions]`, then `[CFOptions "<name>"]` and
//! `[TableOptions/BlockBasedTable "<name>"]` for the default family and
//! then for every other one. [`Options::load_options_file`] reads that text
//! back, and also a RocksDB OPTIONS file: RocksDB's names are Ebb's where
//! Ebb has the option (with RocksDB's spellings of values, and its
//! `filter_policy` and `{name=value;...}` struct values); an option Ebb does
//! not have is accepted when it holds RocksDB 10.4.2's default (it asks for
//! nothing), and otherwise named, with every other such one, in one
//! `NotSupported` error.

use super::{ColumnFamilyOptions, Options};
use crate::error::{Error, Result};

impl Options {
    /// The OPTIONS-file text of a database with these options (database
    /// options and the default family) and the column families `families`
    /// (name and options), one `[CFOptions "<name>"]` and
    /// `[TableOptions/BlockBasedTable "<name>"]` section pair each.
    pub fn to_text_with_families(&self, families: &[(&str, &ColumnFamilyOptions)]) -> String {
        let mut out = self.to_text();
        for (name, cf) in families.iter().filter(|(n, _)| *n != crate::version::DEFAULT_COLUMN_FAMILY) {
            let family = Options::default().with_cf_options(ColumnFamilyOptions::clone(cf));
            family.write_family_sections(&mut out, &format!("\"{}\"", escape(name)));
        }
        out
    }

    /// Reads an OPTIONS file's text, Ebb's or RocksDB's (RocksDB's
    /// `LoadOptionsFromFile`): the database options with the default
    /// family's, and every other family's name and options, in file order.
    ///
    /// Errors: `InvalidArgument` naming a line that is not `name=value` or a
    /// value that does not parse; `NotSupported` naming every option of a
    /// RocksDB file that Ebb does not have and that is not at RocksDB's
    /// default.
    pub fn load_options_file(text: &str) -> Result<(Options, Vec<(String, ColumnFamilyOptions)>)> {
        let rocksdb = text.lines().any(|l| l.trim().starts_with("rocksdb_version="));
        let mut db = Options::default();
        let mut families: Vec<(String, Options)> = Vec::new();
        let mut unsupported: Vec<String> = Vec::new();
        // Where the lines go: None for [Version], Some(None) for the
        // database and default family, Some(Some(i)) for families[i].
        let mut target: Option<Option<usize>> = Some(None);
        let mut section = String::new();
        for line in super::text::text_lines(text) {
            let (lineno, name, value) = match line? {
                super::text::TextLine::Section(header) => {
                    section = header.to_string();
                    target = match section_family(header) {
                        _ if header == "[Version]" => None,
                        None => Some(None),
                        Some(name) if name == crate::version::DEFAULT_COLUMN_FAMILY => Some(None),
                        Some(name) => Some(Some(match families.iter().position(|(n, _)| *n == name) {
                            Some(i) => i,
                            None => {
                                families.push((name, Options::default()));
                                families.len() - 1
                            }
                        })),
                    };
                    continue;
                }
                super::text::TextLine::Option(lineno, name, value) => (lineno, name, value),
            };
            let Some(t) = target else { continue };
            let opts = match t {
                None => &mut db,
                Some(i) => &mut families[i].1,
            };
            if rocksdb {
                set_rocksdb(opts, name, value, &section, &mut unsupported)?;
            } else {
                opts.set(name, value).map_err(|e| Error::invalid(format!("options file line {lineno}: {e}")))?;
            }
        }
        if !unsupported.is_empty() {
            return Err(Error::NotSupported(format!(
                "the RocksDB OPTIONS file sets options Ebb does not support: {}",
                unsupported.join(", ")
            )));
        }
        Ok((db, families.into_iter().map(|(n, o)| (n, o.cf_options())).collect()))
    }
}

/// The family a `[CFOptions "x"]` or `[TableOptions/... "x"]` header names.
fn section_family(line: &str) -> Option<String> {
    let inner = line.strip_prefix('[')?.strip_suffix(']')?;
    let (_, quoted) = inner.split_once(' ')?;
    let name = quoted.trim().strip_prefix('"')?.strip_suffix('"')?;
    Some(unescape(name))
}

fn escape(name: &str) -> String {
    name.replace('\\', "\\\\").replace('"', "\\\"")
}

fn unescape(name: &str) -> String {
    name.replace("\\\"", "\"").replace("\\\\", "\\")
}

/// Sets RocksDB option `name` to `value` on `opts`, or records it in
/// `unsupported` when Ebb does not have it and it is not at RocksDB's
/// default.
fn set_rocksdb(
    opts: &mut Options,
    name: &str,
    value: &str,
    section: &str,
    unsupported: &mut Vec<String>,
) -> Result<()> {
    let bad = |e: Error| Error::invalid(format!("{section} {name}={value}: {e}"));
    // Struct values: `{a=1;b=2;}`, members set as `name.member` where Ebb
    // has them.
    if let Some(body) = value.strip_prefix('{').and_then(|v| v.strip_suffix('}')) {
        for member in body.split(';').filter(|m| !m.trim().is_empty()) {
            let (m, v) = member.split_once('=').unwrap_or((member, ""));
            let full = format!("{name}.{}", m.trim());
            if Options::names().any(|n| n == full) {
                opts.set(&full, v.trim()).map_err(bad)?;
            } else if rocksdb_default(&full) != Some(v.trim()) {
                unsupported.push(format!("{full}={}", v.trim()));
            }
        }
        return Ok(());
    }
    match name {
        // `bloomfilter:<bits>:<block-based>`; RocksDB 10 writes bare
        // `bloomfilter` and keeps the bits elsewhere: Ebb's default then.
        "filter_policy" => {
            let bits = match value {
                "nullptr" | "" => Some(0),
                "bloomfilter" => None,
                v => match v.strip_prefix("bloomfilter:").map(|r| r.split(':').next().unwrap_or("")) {
                    Some(b) => Some(
                        b.parse::<f64>()
                            .map_err(|_| Error::invalid(format!("{section} filter_policy={value}: bad bits per key")))?
                            .round() as u32,
                    ),
                    None => {
                        unsupported.push(format!("filter_policy={value}"));
                        None
                    }
                },
            };
            if let Some(bits) = bits {
                opts.bloom_bits_per_key = bits;
            }
            Ok(())
        }
        // RocksDB spells these two with capitals.
        "WAL_ttl_seconds" => opts.set("wal_ttl_seconds", value).map_err(bad),
        "WAL_size_limit_MB" => opts.set("wal_size_limit_mb", value).map_err(bad),
        // RocksDB's -1 is "decided from max_background_jobs", as Ebb's 0.
        "max_background_flushes" | "max_background_compactions" if value == "-1" => Ok(()),
        _ if Options::names().any(|n| n == name) => opts.set(name, value).map_err(bad),
        _ => {
            if rocksdb_default(name) != Some(value) {
                unsupported.push(format!("{name}={value}"));
            }
            Ok(())
        }
    }
}

/// RocksDB 10.4.2's default value of an option Ebb does not have, as its
/// OPTIONS file writes it (`None`: not known, so never taken as default).
fn rocksdb_default(name: &str) -> Option<&'static str> {
    ROCKSDB_DEFAULTS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// Options of RocksDB 10.4.2 that Ebb does not have, at their defaults, as
/// its OPTIONS files write them. Holding these values, they ask for
/// nothing Ebb does not do. (`db_host_id`, `db_write_buffer_size` and the
/// like are here because they only name or size things Ebb leaves alone.)
const ROCKSDB_DEFAULTS: &[(&str, &str)] = &[
    // [DBOptions]
    ("strict_bytes_per_sync", "false"),
    ("avoid_flush_during_shutdown", "false"),
    ("writable_file_max_buffer_size", "1048576"),
    ("delete_obsolete_files_period_micros", "21600000000"),
    ("stats_history_buffer_size", "1048576"),
    ("stats_persist_period_sec", "600"),
    ("follower_refresh_catchup_period_ms", "10000"),
    ("enforce_single_del_contracts", "true"),
    ("lowest_used_cache_tier", "kNonVolatileBlockTier"),
    ("bgerror_resume_retry_interval", "1000000"),
    ("metadata_write_temperature", "kUnknown"),
    ("log_readahead_size", "0"),
    ("write_identity_file", "true"),
    ("write_dbid_to_manifest", "true"),
    ("prefix_seek_opt_in_only", "false"),
    ("wal_compression", "kNoCompression"),
    ("db_host_id", "__hostname__"),
    ("two_write_queues", "false"),
    ("allow_ingest_behind", "false"),
    ("skip_checking_sst_file_sizes_on_db_open", "false"),
    ("flush_verify_memtable_count", "true"),
    ("atomic_flush", "false"),
    ("verify_sst_unique_id_in_manifest", "true"),
    ("skip_stats_update_on_db_open", "false"),
    ("track_and_verify_wals", "false"),
    ("track_and_verify_wals_in_manifest", "false"),
    ("compaction_verify_record_count", "true"),
    ("max_write_batch_group_size_bytes", "1048576"),
    ("follower_catchup_retry_count", "10"),
    ("avoid_flush_during_recovery", "false"),
    ("file_checksum_gen_factory", "nullptr"),
    ("enable_thread_tracking", "false"),
    ("allow_fallocate", "true"),
    ("allow_data_in_errors", "false"),
    ("use_direct_io_for_flush_and_compaction", "false"),
    ("background_close_inactive_wals", "false"),
    ("use_direct_reads", "false"),
    ("persist_stats_to_disk", "false"),
    ("allow_2pc", "false"),
    ("max_log_file_size", "0"),
    ("is_fd_close_on_exec", "true"),
    ("avoid_unnecessary_blocking_io", "false"),
    ("wal_filter", "nullptr"),
    ("wal_write_temperature", "kUnknown"),
    ("follower_catchup_retry_wait_ms", "100"),
    ("allow_mmap_writes", "false"),
    ("use_adaptive_mutex", "false"),
    ("use_fsync", "false"),
    ("table_cache_numshardbits", "6"),
    ("dump_malloc_stats", "false"),
    ("max_bgerror_resume_count", "2147483647"),
    ("allow_concurrent_memtable_write", "true"),
    ("recycle_log_file_num", "0"),
    ("log_file_time_to_roll", "0"),
    ("manifest_preallocation_size", "4194304"),
    ("enable_write_thread_adaptive_yield", "true"),
    ("enable_pipelined_write", "false"),
    ("write_thread_slow_yield_usec", "3"),
    ("unordered_write", "false"),
    ("write_thread_max_yield_usec", "100"),
    ("info_log_level", "INFO_LEVEL"),
    // [CFOptions]
    ("memtable_max_range_deletions", "0"),
    ("compression_manager", "nullptr"),
    ("paranoid_memory_checks", "false"),
    ("memtable_avg_op_scan_flush_trigger", "0"),
    ("block_protection_bytes_per_key", "0"),
    ("uncache_aggressiveness", "0"),
    ("bottommost_file_compaction_delay", "0"),
    ("memtable_protection_bytes_per_key", "0"),
    ("experimental_mempurge_threshold", "0.000000"),
    ("sample_for_compression", "0"),
    ("prepopulate_blob_cache", "kDisable"),
    ("blob_file_starting_level", "0"),
    ("blob_compaction_readahead_size", "0"),
    ("table_factory", "BlockBasedTable"),
    ("memtable_huge_page_size", "0"),
    ("strict_max_successive_merges", "false"),
    ("arena_block_size", "1048576"),
    ("memtable_op_scan_flush_trigger", "0"),
    ("report_bg_io_stats", "false"),
    ("inplace_update_num_locks", "10000"),
    ("paranoid_file_checks", "false"),
    ("memtable_whole_key_filtering", "false"),
    ("last_level_temperature", "kUnknown"),
    ("preserve_internal_time_seconds", "0"),
    ("max_bytes_for_level_multiplier_additional", "1:1:1:1:1:1:1"),
    ("max_sequential_skip_in_iterations", "8"),
    ("default_write_temperature", "kUnknown"),
    ("preclude_last_level_data_seconds", "0"),
    ("persist_user_defined_timestamps", "true"),
    ("compaction_pri", "kMinOverlappingRatio"),
    ("bloom_locality", "0"),
    ("optimize_filters_for_hits", "false"),
    ("inplace_update_support", "false"),
    ("memtable_factory", "SkipListFactory"),
    ("memtable_insert_with_hint_prefix_extractor", "nullptr"),
    ("force_consistency_checks", "true"),
    ("default_temperature", "kUnknown"),
    ("disallow_memtable_writes", "false"),
    ("compression_opts.checksum", "false"),
    ("compression_opts.max_dict_buffer_bytes", "0"),
    ("compression_opts.enabled", "false"),
    ("compression_opts.max_dict_bytes", "0"),
    ("compression_opts.max_compressed_bytes_per_kb", "896"),
    ("compression_opts.parallel_threads", "1"),
    ("compression_opts.zstd_max_train_bytes", "0"),
    ("compression_opts.level", "32767"),
    ("compression_opts.use_zstd_dict_trainer", "true"),
    ("compression_opts.strategy", "0"),
    ("compression_opts.window_bits", "-14"),
    ("bottommost_compression_opts.checksum", "false"),
    ("bottommost_compression_opts.max_dict_buffer_bytes", "0"),
    ("bottommost_compression_opts.enabled", "false"),
    ("bottommost_compression_opts.max_dict_bytes", "0"),
    ("bottommost_compression_opts.max_compressed_bytes_per_kb", "896"),
    ("bottommost_compression_opts.parallel_threads", "1"),
    ("bottommost_compression_opts.zstd_max_train_bytes", "0"),
    ("bottommost_compression_opts.level", "32767"),
    ("bottommost_compression_opts.use_zstd_dict_trainer", "true"),
    ("bottommost_compression_opts.strategy", "0"),
    ("bottommost_compression_opts.window_bits", "-14"),
    ("compaction_options_fifo.trivial_copy_buffer_size", "4096"),
    ("compaction_options_fifo.allow_trivial_copy_when_change_temperature", "false"),
    ("compaction_options_fifo.file_temperature_age_thresholds", ""),
    ("compaction_options_fifo.age_for_warm", "0"),
    ("compaction_options_universal.reduce_file_locking", "false"),
    ("compaction_options_universal.incremental", "false"),
    ("compaction_options_universal.compression_size_percent", "-1"),
    ("compaction_options_universal.stop_style", "kCompactionStopStyleTotalSize"),
    ("compaction_options_universal.max_read_amp", "-1"),
    // [TableOptions/BlockBasedTable]
    ("num_file_reads_for_auto_readahead", "2"),
    ("metadata_cache_options.unpartitioned_pinning", "kFallback"),
    ("metadata_cache_options.partition_pinning", "kFallback"),
    ("metadata_cache_options.top_level_index_pinning", "kFallback"),
    ("enable_index_compression", "true"),
    ("verify_compression", "false"),
    ("prepopulate_block_cache", "kDisable"),
    ("format_version", "6"),
    ("use_delta_encoding", "true"),
    ("pin_top_level_index_and_filter", "true"),
    ("read_amp_bytes_per_bit", "0"),
    ("decouple_partitioned_filters", "false"),
    ("detect_filter_construct_corruption", "false"),
    ("no_block_cache", "false"),
    ("data_block_hash_table_util_ratio", "0.750000"),
    ("data_block_index_type", "kDataBlockBinarySearch"),
    ("index_shortening", "kShortenSeparators"),
    ("block_align", "false"),
    ("optimize_filters_for_memory", "true"),
    ("flush_block_policy_factory", "FlushBlockBySizePolicyFactory"),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::CompressionType;

    const ROCKSDB_FILE: &str = include_str!("../../tests/data/rocksdb-10.4.2-OPTIONS");

    #[test]
    fn every_family_round_trips_through_the_options_file() {
        let mut db = Options::default();
        db.max_background_jobs = 5;
        db.write_buffer_size = 1 << 20;
        let mut users = Options::default().cf_options();
        users.write_buffer_size = 2 << 20;
        users.compression = CompressionType::Zstd;
        users.bloom_bits_per_key = 3;
        let mut odd = Options::default().cf_options();
        odd.num_levels = 4;
        let text = db.to_text_with_families(&[("users", &users), ("with \"quotes\"", &odd)]);
        let (back, families) = Options::load_options_file(&text).unwrap();
        assert_eq!(back.to_text(), db.to_text());
        let names: Vec<&str> = families.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, vec!["users", "with \"quotes\""]);
        let as_text = |cf: &ColumnFamilyOptions| Options::default().with_cf_options(cf.clone()).to_text();
        assert_eq!(as_text(&families[0].1), as_text(&users));
        assert_eq!(as_text(&families[1].1), as_text(&odd));
        // Options::from_text reads the database's and the default family's
        // sections only.
        let default_only = Options::from_text(&text).unwrap();
        assert_eq!(default_only.write_buffer_size, 1 << 20);
        assert_eq!(default_only.compression, db.compression);
    }

    #[test]
    fn a_rocksdb_options_file_is_read_and_what_ebb_lacks_is_named() {
        let (o, families) = Options::load_options_file(ROCKSDB_FILE).unwrap();
        assert!(families.is_empty());
        assert_eq!(Options::from_text(ROCKSDB_FILE).unwrap().to_text(), o.to_text());
        assert_eq!(o.write_buffer_size, 67_108_864);
        assert_eq!(o.compression, CompressionType::Snappy);
        assert!(o.level_compaction_dynamic_level_bytes);
        assert_eq!(o.compaction_options_universal.max_size_amplification_percent, 200);

        // A second family, with a bloom filter of 6 bits, read as Ebb's.
        let cf: String = ROCKSDB_FILE[ROCKSDB_FILE.find("[CFOptions").unwrap()..]
            .replace("\"default\"", "\"logs\"")
            .replace("  write_buffer_size=67108864", "  write_buffer_size=1048576")
            .replace("  filter_policy=bloomfilter", "  filter_policy=bloomfilter:6:false");
        let (_, families) = Options::load_options_file(&format!("{ROCKSDB_FILE}\n{cf}")).unwrap();
        assert_eq!(families.len(), 1);
        assert_eq!((families[0].0.as_str(), families[0].1.write_buffer_size), ("logs", 1_048_576));
        assert_eq!(families[0].1.bloom_bits_per_key, 6);

        // Options Ebb does not have, away from RocksDB's defaults, are all named.
        let asking = ROCKSDB_FILE
            .replace("  allow_2pc=false", "  allow_2pc=true")
            .replace("  inplace_update_support=false", "  inplace_update_support=true")
            .replace("use_zstd_dict_trainer=true;strategy=0;window_bits=-14;}|  paranoid", "x");
        let asking = asking.replacen("max_dict_bytes=0;", "max_dict_bytes=16384;", 1);
        let e = Options::load_options_file(&asking).unwrap_err();
        assert_eq!(Options::from_text(&asking).unwrap_err().to_string(), e.to_string());
        let m = e.to_string();
        assert!(matches!(e, Error::NotSupported(_)), "{m}");
        for name in ["allow_2pc=true", "inplace_update_support=true", "compression_opts.max_dict_bytes=16384"] {
            assert!(m.contains(name), "{name} not named in: {m}");
        }
        // An option Ebb has with a value it cannot read is refused by name.
        let bad = ROCKSDB_FILE.replace("  num_levels=7", "  num_levels=many");
        let e = Options::load_options_file(&bad).unwrap_err();
        assert!(e.to_string().contains("num_levels"), "{e}");
    }
}
