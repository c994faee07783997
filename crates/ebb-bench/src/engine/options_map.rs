//! The value each engine flag takes in a run, in the flag's own form, read
//! back from the engine: from Ebb's `Options`, and from the OPTIONS file
//! RocksDB writes when it opens. `compare` prints the two side by side and
//! refuses a run where they differ on a flag the user gave.
//!
//! The same rule serves both engines: a flag the user gives is passed as
//! given; a flag left out takes Ebb's default, on both engines (the RocksDB
//! peer is given Ebb's values, see `engine::rocksdb`). Without it, an absent
//! `--bloom_bits` meant a 10-bit filter for Ebb and none for RocksDB, and an
//! absent `--checksum_type` CRC-32C against XXH3.

use std::collections::BTreeMap;

use crate::flags::{missing_in_ebb, parse_value, table::FLAGS, FlagSpec, Flags, Support, Value};

/// Every engine flag, in the table's order.
pub fn engine_flags() -> impl Iterator<Item = &'static FlagSpec> {
    FLAGS.iter().filter(|s| matches!(s.support, Support::Engine(_)))
}

/// True when a given value means "the engine's own default" (db_bench's
/// convention for these flags): it is treated as absent, so both engines get
/// Ebb's value.
pub fn means_engine_default(flag: &str, value: &Value) -> bool {
    match (flag, value) {
        ("bloom_bits", Value::Int(b)) => *b < 0,
        (
            "universal_size_ratio"
            | "universal_min_merge_width"
            | "universal_max_merge_width"
            | "universal_max_size_amplification_percent"
            | "fifo_compaction_max_table_files_size_mb",
            Value::UInt(0),
        ) => true,
        _ => false,
    }
}

/// The value of an engine flag given on the command line, unless the value
/// [`means_engine_default`]: `None` for a flag left out, which takes Ebb's value.
pub fn given_value<'f>(flags: &'f Flags, flag: &str) -> Option<&'f Value> {
    flags.value(flag).filter(|v| flags.is_set(flag) && !means_engine_default(flag, v))
}

/// An engine's text for an option (`kSnappyCompression`, `bloomfilter:10:false`,
/// `268435456`) as the value of `flag`; `None` when the text is not one the
/// flag can express.
pub fn flag_value_from_text(flag: &FlagSpec, text: &str) -> Option<Value> {
    let t = text.trim();
    let v = match flag.name {
        "compression_type" | "blob_compression_type" => Value::Str(
            match t {
                "kNoCompression" => "none",
                "kSnappyCompression" => "snappy",
                "kLZ4Compression" => "lz4",
                "kLZ4HCCompression" => "lz4hc",
                "kZSTD" | "kZSTDNotFinalCompression" => "zstd",
                "kZlibCompression" => "zlib",
                "kBZip2Compression" => "bzip2",
                "kXpressCompression" => "xpress",
                _ => return None,
            }
            .to_string(),
        ),
        "checksum_type" => Value::Int(match t {
            "kNoChecksum" => 0,
            "kCRC32c" => 1,
            "kxxHash" => 2,
            "kxxHash64" => 3,
            "kXXH3" => 4,
            _ => return None,
        }),
        "index_type" => Value::Int(match t {
            "kBinarySearch" => 0,
            "kHashSearch" => 1,
            "kTwoLevelIndexSearch" => 2,
            "kBinarySearchWithFirstKey" => 3,
            _ => return None,
        }),
        "compaction_style" => Value::Int(match t {
            "kCompactionStyleLevel" => 0,
            "kCompactionStyleUniversal" => 1,
            "kCompactionStyleFIFO" => 2,
            "kCompactionStyleNone" => 3,
            _ => return None,
        }),
        "cache_type" => Value::Str(
            match t {
                "kLRUCache" => "lru_cache",
                "kHyperClockCache" => "hyper_clock_cache",
                _ => return None,
            }
            .to_string(),
        ),
        // RocksDB: `bloomfilter:BITS:USE_BLOCK_BASED` or `nullptr`; Ebb: the bits.
        "bloom_bits" => {
            if t == "nullptr" || t.is_empty() {
                Value::Int(0)
            } else if t == "bloomfilter" {
                // RocksDB 10 records the policy without its bits.
                return None;
            } else if let Some(rest) = t.strip_prefix("bloomfilter:") {
                let bits: f64 = rest.split(':').next()?.parse().ok()?;
                Value::Int(bits.round() as i64)
            } else {
                Value::Int(t.parse().ok()?)
            }
        }
        "fifo_compaction_max_table_files_size_mb" => Value::UInt(t.parse::<u64>().ok()? >> 20),
        // `nullptr`, the class name, or (a configurable object) `{id=NAME;...}`.
        "merge_operator" => {
            let id = match t.strip_prefix('{') {
                Some(inner) => inner.split(';').find_map(|f| f.trim().strip_prefix("id="))?,
                None => t,
            };
            Value::Str(super::merge_operator_name(id).ok()?.to_string())
        }
        // `nullptr`, or the extractor's name (`rocksdb.FixedPrefix.8`, maybe
        // as `{id=...}`): the flag holds a fixed prefix's length, 0 for none;
        // other extractors (capped, noop) have no form in it.
        "prefix_size" => {
            let id = match t.strip_prefix('{') {
                Some(inner) => inner.split(';').find_map(|f| f.trim().strip_prefix("id="))?.trim_end_matches('}'),
                None => t,
            };
            if id == "nullptr" || id.is_empty() {
                Value::Int(0)
            } else {
                Value::Int(id.strip_prefix("rocksdb.FixedPrefix.")?.parse().ok()?)
            }
        }
        _ => parse_value(flag, t).ok()?,
    };
    Some(v)
}

/// Ebb's value for an engine flag under `opts`; a flag whose option Ebb does
/// not have takes its default (Ebb behaves as that default). `None` when Ebb's
/// value has no form in the flag.
pub fn ebb_flag_value(flag: &FlagSpec, opts: &ebb::Options) -> Option<Value> {
    let Support::Engine(option) = flag.support else { return None };
    if missing_in_ebb(flag).is_some() {
        return parse_value(flag, flag.default).ok();
    }
    if flag.name == "max_compaction_bytes" {
        // 0 stands for 25 target files, in Ebb as in RocksDB, whose OPTIONS
        // file records the product.
        return Some(Value::UInt(opts.effective_max_compaction_bytes()));
    }
    flag_value_from_text(flag, &opts.get(option)?)
}

/// A RocksDB OPTIONS file as `name -> value`, sections merged (the names this
/// module reads are unique across them). A struct value
/// (`compaction_options_universal={size_ratio=1;...}`) also gives one entry
/// per field, `compaction_options_universal.size_ratio`.
pub fn parse_rocksdb_options(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with('[') {
            continue;
        }
        let Some((name, value)) = line.split_once('=') else { continue };
        let (name, value) = (name.trim(), value.trim());
        if let Some(inner) = value.strip_prefix('{').and_then(|v| v.strip_suffix('}')) {
            for field in inner.split(';') {
                if let Some((k, v)) = field.split_once('=') {
                    out.insert(format!("{name}.{}", k.trim()), v.trim().to_string());
                }
            }
        }
        out.insert(name.to_string(), value.to_string());
    }
    out
}

/// The RocksDB OPTIONS-file name for an engine flag's option, where it
/// differs from the flag table's (Ebb's) name.
fn rocksdb_option_name(flag: &FlagSpec) -> Option<&'static str> {
    let Support::Engine(option) = flag.support else { return None };
    Some(match flag.name {
        "bloom_bits" => "filter_policy",
        "fifo_compaction_ttl" => "ttl",
        // Not recorded in RocksDB's OPTIONS file.
        "statistics"
        | "cache_size"
        | "cache_type"
        | "cache_numshardbits"
        | "cache_high_pri_pool_ratio"
        | "cache_lru_promote"
        | "compressed_secondary_cache_size" => return None,
        _ => option,
    })
}

/// RocksDB's value for an engine flag, from its parsed OPTIONS file; `None`
/// when the file does not record it.
pub fn rocksdb_flag_value(flag: &FlagSpec, options: &BTreeMap<String, String>) -> Option<Value> {
    let text = options.get(rocksdb_option_name(flag)?)?;
    flag_value_from_text(flag, text)
}

/// One engine flag's values in two engines.
#[derive(Debug, Clone, PartialEq)]
pub struct OptionRow {
    /// The flag.
    pub flag: &'static str,
    /// Ebb's value, in the flag's text form (`?` when the engine does not say).
    pub ebb: String,
    /// The peer's.
    pub peer: String,
    /// Given on the command line.
    pub given: bool,
}

impl OptionRow {
    /// Both engines said, and differently.
    pub fn differs(&self) -> bool {
        self.ebb != "?" && self.peer != "?" && self.ebb != self.peer
    }
}

/// Lines `  --flag=value` (as `Engine::effective_options` prints them) as a map.
pub fn parse_effective(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("  --"))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The rows for every engine flag either engine reported.
pub fn option_rows(
    ebb: &BTreeMap<String, String>,
    peer: &BTreeMap<String, String>,
    given: &dyn Fn(&str) -> bool,
) -> Vec<OptionRow> {
    engine_flags()
        .filter(|s| ebb.contains_key(s.name) || peer.contains_key(s.name))
        .map(|s| OptionRow {
            flag: s.name,
            ebb: ebb.get(s.name).cloned().unwrap_or_else(|| "?".into()),
            peer: peer.get(s.name).cloned().unwrap_or_else(|| "?".into()),
            given: given(s.name),
        })
        .collect()
}

/// The side-by-side table `compare` prints.
pub fn render_rows(rows: &[OptionRow], peer: &str) -> String {
    let mut out = format!(
        "effective engine options (* given on the command line, ! differs)\n{:<44} {:>22} {:>22}\n",
        "flag", "ebb", peer
    );
    for r in rows {
        let mark = match (r.given, r.differs()) {
            (_, true) => "!",
            (true, false) => "*",
            _ => " ",
        };
        out.push_str(&format!("{mark} {:<42} {:>22} {:>22}\n", r.flag, r.ebb, r.peer));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ebb::option_text;
    use crate::flags::spec;

    /// The peer is given Ebb's values through the flags: each must survive
    /// the trip flag value -> Ebb option -> flag value, or the peer would get
    /// something Ebb does not have.
    #[test]
    fn every_ebb_default_has_a_flag_form_that_sets_it_back() {
        for preset in [
            ebb::Options::default(),
            ebb::Options::default().optimize_for_writes(),
            ebb::Options::default().optimize_for_reads(),
            ebb::Options::default().prepare_for_bulk_load(),
        ] {
            let mut checked = 0;
            for s in engine_flags() {
                let Support::Engine(option) = s.support else { unreachable!() };
                let Some(v) = ebb_flag_value(s, &preset) else {
                    panic!("--{}: Ebb's {option}={:?} has no flag form", s.name, preset.get(option))
                };
                if missing_in_ebb(s).is_some() {
                    continue;
                }
                let mut fresh = ebb::Options::default();
                if let Some(text) = option_text(s.name, &v).unwrap() {
                    fresh.set(option, &text).unwrap_or_else(|e| panic!("--{}={v:?}: {e}", s.name));
                }
                assert_eq!(ebb_flag_value(s, &fresh), Some(v), "--{} does not round-trip", s.name);
                checked += 1;
            }
            assert!(checked > 40, "only {checked} flags checked");
        }
        // And the values read are the ones Ebb has.
        let d = ebb::Options::default();
        let get = |f: &str| ebb_flag_value(spec(f).unwrap(), &d).unwrap().to_text();
        assert_eq!(get("blob_compression_type"), "none");
        assert_eq!(get("blob_garbage_collection_age_cutoff"), "0.25");
        assert_eq!(
            [
                get("checksum_type"),
                get("compression_type"),
                get("bloom_bits"),
                get("cache_type"),
                get("compaction_style")
            ],
            ["1", "snappy", "10", "lru_cache", "0"]
        );
        assert_eq!(get("max_compaction_bytes"), (25 * d.target_file_size_base).to_string());
    }

    #[test]
    fn rocksdb_options_file_values_read_as_flags() {
        let text = "\
[DBOptions]
  max_background_jobs=2
  max_open_files=-1
[CFOptions \"default\"]
  compression=kNoCompression
  enable_blob_files=true
  min_blob_size=4096
  blob_file_size=268435456
  blob_compression_type=kLZ4Compression
  enable_blob_garbage_collection=false
  blob_garbage_collection_age_cutoff=0.250000
  blob_garbage_collection_force_threshold=1.000000
  max_bytes_for_level_multiplier=10.000000
  compaction_style=kCompactionStyleLevel
  compaction_options_universal={allow_trivial_move=false;max_merge_width=4294967295;size_ratio=1;}
  compaction_options_fifo={allow_compaction=false;max_table_files_size=1073741824;}
[TableOptions/BlockBasedTable \"default\"]
  checksum=kXXH3
  filter_policy=bloomfilter:10:false
";
        let map = parse_rocksdb_options(text);
        let get = |f: &str| rocksdb_flag_value(spec(f).unwrap(), &map);
        assert_eq!(get("max_background_jobs"), Some(Value::Int(2)));
        assert_eq!(get("open_files"), Some(Value::Int(-1)));
        assert_eq!(get("compression_type"), Some(Value::Str("none".into())));
        assert_eq!(get("enable_blob_files"), Some(Value::Bool(true)));
        assert_eq!(get("min_blob_size"), Some(Value::UInt(4096)));
        assert_eq!(get("blob_file_size"), Some(Value::UInt(256 << 20)));
        assert_eq!(get("blob_compression_type"), Some(Value::Str("lz4".into())));
        assert_eq!(get("enable_blob_garbage_collection"), Some(Value::Bool(false)));
        assert_eq!(get("blob_garbage_collection_age_cutoff"), Some(Value::Double(0.25)));
        assert_eq!(get("blob_garbage_collection_force_threshold"), Some(Value::Double(1.0)));
        assert_eq!(get("max_bytes_for_level_multiplier"), Some(Value::Double(10.0)));
        assert_eq!(get("compaction_style"), Some(Value::Int(0)));
        assert_eq!(get("universal_size_ratio"), Some(Value::UInt(1)));
        assert_eq!(get("universal_max_merge_width"), Some(Value::UInt(4294967295)));
        assert_eq!(get("fifo_compaction_max_table_files_size_mb"), Some(Value::UInt(1024)));
        assert_eq!(get("fifo_compaction_allow_compaction"), Some(Value::Bool(false)));
        assert_eq!(get("checksum_type"), Some(Value::Int(4)));
        assert_eq!(get("bloom_bits"), Some(Value::Int(10)));
        assert_eq!(get("cache_size"), None, "RocksDB does not record its cache");
        let none = parse_rocksdb_options("filter_policy=nullptr\n");
        assert_eq!(rocksdb_flag_value(spec("bloom_bits").unwrap(), &none), Some(Value::Int(0)));
        // RocksDB 10.4's own form: the kind without the bits.
        let v10 = parse_rocksdb_options("filter_policy=bloomfilter\n");
        assert_eq!(rocksdb_flag_value(spec("bloom_bits").unwrap(), &v10), None);
    }

    #[test]
    fn rows_mark_differences_and_given_flags() {
        let ebb: BTreeMap<String, String> = parse_effective("Effective\n  --bloom_bits=10\n  --checksum_type=1\n");
        let peer: BTreeMap<String, String> = parse_effective("  --bloom_bits=0\n  --checksum_type=1\n");
        let rows = option_rows(&ebb, &peer, &|f| f == "checksum_type");
        assert_eq!(rows.len(), 2);
        let bloom = rows.iter().find(|r| r.flag == "bloom_bits").unwrap();
        assert!(bloom.differs() && !bloom.given);
        let checksum = rows.iter().find(|r| r.flag == "checksum_type").unwrap();
        assert!(!checksum.differs() && checksum.given);
        let table = render_rows(&rows, "rocksdb");
        assert!(table.lines().any(|l| l.starts_with("! bloom_bits")), "{table}");
        assert!(table.lines().any(|l| l.starts_with("* checksum_type")), "{table}");
    }

    #[test]
    fn engine_default_markers_are_not_values() {
        assert!(means_engine_default("bloom_bits", &Value::Int(-1)));
        assert!(!means_engine_default("bloom_bits", &Value::Int(0)));
        assert!(means_engine_default("universal_size_ratio", &Value::UInt(0)));
        assert!(!means_engine_default("write_buffer_size", &Value::Int(0)));
    }
}
