//! `ebb-bench cachebench`: RocksDB's `cache_bench` tool (cache/cache_bench_tool.cc
//! at v7.8.3, the version Debian ships as /usr/bin/cache_bench) over Ebb's
//! block caches, with its flags, its operation loop and its result lines, so
//! the two programs' outputs compare line by line (issue 6, workload W4).
//!
//! Layout: this file holds the flags (gflags style, as `cache_bench` takes
//! them) and the checked [`CacheBenchConfig`]; `mt64` the generator and key
//! choice `cache_bench` uses; `run` the threads, the loop and the report.
//! docs/bench-client.md lists the flags.

pub mod mt64;
pub mod run;

use std::fmt::Write as _;

use ebb::cache::CacheType;

use crate::bail;
use crate::error::{BenchError, Result};

pub use run::{run, CacheBenchReport};

/// The type of a flag's value, with gflags' ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Bool,
    U32,
    U64,
    I32,
    Double,
    Str,
}

/// One flag: `cache_bench`'s name and default, or an Ebb addition.
struct CacheFlag {
    name: &'static str,
    kind: Kind,
    default: &'static str,
    help: &'static str,
}

const fn flag(name: &'static str, kind: Kind, default: &'static str, help: &'static str) -> CacheFlag {
    CacheFlag { name, kind, default, help }
}

/// Every flag, `cache_bench` v7.8.3's defaults first, then Ebb's additions.
const FLAGS: &[CacheFlag] = &[
    flag("threads", Kind::U32, "16", "Number of concurrent threads to run."),
    flag("cache_size", Kind::U64, "1073741824", "Number of bytes to use as a cache of uncompressed data."),
    flag("num_shard_bits", Kind::I32, "6", "The cache has 2^num_shard_bits shards (-1 = the cache's default)."),
    flag("resident_ratio", Kind::Double, "0.25", "Ratio of keys fitting in cache to keyspace."),
    flag("ops_per_thread", Kind::U64, "2000000", "Number of operations per thread."),
    flag("value_bytes", Kind::U32, "8192", "Size of each value added."),
    flag("skew", Kind::U32, "5", "Degree of skew in key selection (each key is the least of skew+1 draws)."),
    flag("skewed", Kind::Bool, "false", "If true, skew the key access distribution exponentially instead."),
    flag("populate_cache", Kind::Bool, "true", "Populate cache before operations."),
    flag(
        "lookup_insert_percent",
        Kind::U32,
        "87",
        "Ratio of lookup (+ insert on not found) to total workload (expressed as a percentage).",
    ),
    flag("insert_percent", Kind::U32, "2", "Ratio of insert to total workload (expressed as a percentage)."),
    flag("lookup_percent", Kind::U32, "10", "Ratio of lookup to total workload (expressed as a percentage)."),
    flag("erase_percent", Kind::U32, "1", "Ratio of erase to total workload (expressed as a percentage)."),
    flag("lean", Kind::Bool, "false", "If true, no additional computation is performed besides cache operations."),
    flag("gather_stats", Kind::Bool, "false", "Refused unless false: Ebb's caches cannot be walked entry by entry."),
    flag("cache_type", Kind::Str, "lru_cache", "lru_cache, or hyper_clock_cache / clock_cache (Ebb's clock cache)."),
    flag(
        "max_key",
        Kind::U64,
        "0",
        "Ebb: keys are drawn from [0, max_key); 0 = cache_size / resident_ratio / value_bytes as cache_bench.",
    ),
    flag(
        "lru_promote",
        Kind::Bool,
        "true",
        "Ebb: LRU moves an entry to the head on every hit (false = only marks it; lru_cache only).",
    ),
    flag(
        "histograms",
        Kind::Bool,
        "true",
        "Time every operation and print the latency histogram (as later cache_bench).",
    ),
    flag(
        "blind_insert_percent",
        Kind::U32,
        "0",
        "cache_bench 10: ratio of inserts that keep no handle (between insert and lookup in the draw).",
    ),
    flag(
        "pinned_ratio",
        Kind::Double,
        "-1",
        "cache_bench 10: keep the newest cache_size * pinned_ratio / value_bytes handles (over all threads) \
         pinned; negative = v7.8.3's loop, one handle held until the thread's next lookup or insert.",
    ),
];

/// A checked `cachebench` configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheBenchConfig {
    /// Client threads.
    pub threads: u32,
    /// Cache capacity in bytes.
    pub cache_size: u64,
    /// Shard bits (-1 = the cache's default rule).
    pub num_shard_bits: i32,
    /// Share of the key space that fits in the cache (sets `max_key`).
    pub resident_ratio: f64,
    /// Operations per thread.
    pub ops_per_thread: u64,
    /// Bytes per value (the charge of each entry).
    pub value_bytes: u32,
    /// Each key is the least of `skew + 1` uniform draws.
    pub skew: u32,
    /// Exponential skew instead (`Random64::Skewed`).
    pub skewed: bool,
    /// Insert `2 x cache_size` bytes of entries before the timed run.
    pub populate_cache: bool,
    /// Percent of lookups that insert on a miss.
    pub lookup_insert_percent: u32,
    /// Percent of inserts.
    pub insert_percent: u32,
    /// Percent of lookups.
    pub lookup_percent: u32,
    /// Percent of erases.
    pub erase_percent: u32,
    /// Skip hashing the value of every hit.
    pub lean: bool,
    /// Which cache.
    pub cache_type: CacheType,
    /// The flag's spelling of the cache type, for the report.
    pub cache_type_name: String,
    /// Keys are drawn from `[0, max_key)`.
    pub max_key: u64,
    /// LRU only: promote an entry on every hit.
    pub lru_promote: bool,
    /// Time every operation.
    pub histograms: bool,
    /// Percent of inserts that keep no handle (cache_bench 10).
    pub blind_insert_percent: u32,
    /// Handles each thread keeps pinned (cache_bench 10's `pinned_ratio`
    /// share of the capacity, split over the threads); `None` = v7.8.3's
    /// loop, which holds one handle until the next lookup or insert.
    pub pinned_ratio: Option<f64>,
}

impl CacheBenchConfig {
    /// The defaults (`cache_bench`'s).
    pub fn defaults() -> CacheBenchConfig {
        match CacheBenchConfig::parse(Vec::<String>::new()) {
            Ok(Some(c)) => c,
            // The defaults parse; a test checks it.
            other => panic!("cachebench defaults do not parse: {other:?}"),
        }
    }

    /// Parses `cachebench` arguments (without the subcommand); `None` for `--help`.
    pub fn parse<I, S>(args: I) -> Result<Option<CacheBenchConfig>>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let args: Vec<String> = args.into_iter().map(Into::into).collect();
        let mut values: Vec<(&'static str, String)> = FLAGS.iter().map(|f| (f.name, f.default.to_string())).collect();
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            i += 1;
            if matches!(arg.as_str(), "--help" | "-help" | "-h" | "--helpfull" | "-helpfull") {
                return Ok(None);
            }
            let Some(body) = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-')) else {
                bail!("cachebench: unexpected argument {arg:?}: flags look like --name=value (see --help)");
            };
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            let (def, text) = match (find(name), inline) {
                (Some(f), Some(v)) => (f, v),
                (Some(f), None) if f.kind == Kind::Bool => (f, "true".to_string()),
                (Some(f), None) => {
                    let Some(v) = args.get(i) else {
                        bail!("cachebench: flag --{name} needs a value (--{name}=VALUE)")
                    };
                    i += 1;
                    (f, v.clone())
                }
                (None, None) => match name.strip_prefix("no").and_then(find) {
                    Some(f) if f.kind == Kind::Bool => (f, "false".to_string()),
                    _ => bail!("cachebench: unknown flag --{name} (see ebb-bench cachebench --help)"),
                },
                (None, Some(_)) => bail!("cachebench: unknown flag --{name} (see ebb-bench cachebench --help)"),
            };
            check_kind(def, &text)?;
            if let Some(slot) = values.iter_mut().find(|(n, _)| *n == def.name) {
                slot.1 = text;
            }
        }
        CacheBenchConfig::from_values(&values).map(Some)
    }

    fn from_values(values: &[(&'static str, String)]) -> Result<CacheBenchConfig> {
        let text = |name: &str| values.iter().find(|(n, _)| *n == name).map(|(_, v)| v.trim()).unwrap_or_default();
        let u64_of = |name: &str| parse_u64(name, text(name));
        let u32_of = |name: &str| parse_u32(name, text(name));
        let bool_of = |name: &str| parse_bool(name, text(name));
        let threads = u32_of("threads")?;
        if threads == 0 {
            bail!("cachebench: flag --threads must be at least 1 (cache_bench: \"threads number <= 0\")");
        }
        let percents =
            ["lookup_insert_percent", "insert_percent", "blind_insert_percent", "lookup_percent", "erase_percent"];
        let mut sum = 0u64;
        for p in percents {
            sum += u64::from(u32_of(p)?);
        }
        if sum != 100 {
            bail!(
                "cachebench: flags --lookup_insert_percent={}, --insert_percent={}, --blind_insert_percent={}, \
                 --lookup_percent={} and --erase_percent={} add to {sum}; percentages must add to 100",
                text(percents[0]),
                text(percents[1]),
                text(percents[2]),
                text(percents[3]),
                text(percents[4])
            );
        }
        let value_bytes = u32_of("value_bytes")?;
        if value_bytes == 0 {
            bail!("cachebench: flag --value_bytes must be at least 1");
        }
        let resident_ratio = parse_f64("resident_ratio", text("resident_ratio"))?;
        if resident_ratio <= 0.0 {
            bail!("cachebench: flag --resident_ratio must be positive, got {resident_ratio}");
        }
        let cache_size = u64_of("cache_size")?;
        let max_key = match u64_of("max_key")? {
            0 => (cache_size as f64 / resident_ratio / f64::from(value_bytes)) as u64,
            given => given,
        };
        if max_key == 0 {
            bail!(
                "cachebench: the key space is empty (cache_size / resident_ratio / value_bytes < 1): \
                 raise --cache_size or give --max_key"
            );
        }
        let cache_type_name = text("cache_type").to_string();
        let cache_type = match cache_type_name.as_str() {
            "lru_cache" => CacheType::Lru,
            "hyper_clock_cache" | "clock_cache" => CacheType::Clock,
            other => bail!(
                "cachebench: flag --cache_type={other:?}: Ebb has lru_cache and a clock cache \
                 (hyper_clock_cache or clock_cache)"
            ),
        };
        let lru_promote = bool_of("lru_promote")?;
        if !lru_promote && cache_type != CacheType::Lru {
            bail!("cachebench: flag --lru_promote=false applies only to --cache_type=lru_cache");
        }
        if bool_of("gather_stats")? {
            bail!("cachebench: flag --gather_stats is not supported: Ebb's caches cannot be walked entry by entry");
        }
        let pinned_ratio = parse_f64("pinned_ratio", text("pinned_ratio"))?;
        if pinned_ratio > 1.0 || pinned_ratio.is_nan() {
            bail!("cachebench: flag --pinned_ratio={pinned_ratio} must be at most 1 (negative = v7.8.3's loop)");
        }
        let num_shard_bits = parse_i32("num_shard_bits", text("num_shard_bits"))?;
        if !(-1..=ebb::cache::MAX_NUM_SHARD_BITS).contains(&num_shard_bits) {
            bail!(
                "cachebench: flag --num_shard_bits={num_shard_bits} is out of range (-1, or 0 to {})",
                ebb::cache::MAX_NUM_SHARD_BITS
            );
        }
        Ok(CacheBenchConfig {
            threads,
            cache_size,
            num_shard_bits,
            resident_ratio,
            ops_per_thread: u64_of("ops_per_thread")?,
            value_bytes,
            skew: u32_of("skew")?,
            skewed: bool_of("skewed")?,
            populate_cache: bool_of("populate_cache")?,
            lookup_insert_percent: u32_of("lookup_insert_percent")?,
            insert_percent: u32_of("insert_percent")?,
            lookup_percent: u32_of("lookup_percent")?,
            erase_percent: u32_of("erase_percent")?,
            lean: bool_of("lean")?,
            cache_type,
            cache_type_name,
            max_key,
            lru_promote,
            histograms: bool_of("histograms")?,
            blind_insert_percent: u32_of("blind_insert_percent")?,
            pinned_ratio: (pinned_ratio >= 0.0).then_some(pinned_ratio),
        })
    }
}

fn find(name: &str) -> Option<&'static CacheFlag> {
    FLAGS.iter().find(|f| f.name == name)
}

fn check_kind(def: &CacheFlag, text: &str) -> Result<()> {
    let t = text.trim();
    match def.kind {
        Kind::Bool => parse_bool(def.name, t).map(drop),
        Kind::U32 => parse_u32(def.name, t).map(drop),
        Kind::U64 => parse_u64(def.name, t).map(drop),
        Kind::I32 => parse_i32(def.name, t).map(drop),
        Kind::Double => parse_f64(def.name, t).map(drop),
        Kind::Str => Ok(()),
    }
}

fn invalid(name: &str, text: &str, what: &str) -> BenchError {
    BenchError::new(format!("cachebench: flag --{name}: invalid value {text:?}: expected {what}"))
}

fn parse_u64(name: &str, text: &str) -> Result<u64> {
    text.parse().map_err(|_| invalid(name, text, "a non-negative integer"))
}

fn parse_u32(name: &str, text: &str) -> Result<u32> {
    text.parse().map_err(|_| invalid(name, text, "a non-negative 32-bit integer"))
}

fn parse_i32(name: &str, text: &str) -> Result<i32> {
    text.parse().map_err(|_| invalid(name, text, "a 32-bit integer"))
}

fn parse_f64(name: &str, text: &str) -> Result<f64> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(invalid(name, text, "a finite number")),
    }
}

fn parse_bool(name: &str, text: &str) -> Result<bool> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "y" | "t" => Ok(true),
        "false" | "0" | "no" | "n" | "f" => Ok(false),
        _ => Err(invalid(name, text, "true or false")),
    }
}

/// The `--help` text.
pub fn help_text() -> String {
    let mut out = String::from(
        "ebb-bench cachebench: RocksDB's cache_bench (v7.8.3) over Ebb's block caches\n\n\
         Usage: ebb-bench cachebench [--flag=value ...]\n\n\
         Each thread draws a key (the least of skew+1 draws) and an operation: lookup, inserting on a\n\
         miss (lookup_insert); insert; lookup; erase. The handle of the last lookup or insert is held\n\
         until the thread's next lookup or insert, as cache_bench holds it.\n\nFlags:\n",
    );
    for f in FLAGS {
        let _ = writeln!(out, "  --{}={}\n      {}", f.name, f.default, f.help);
    }
    out
}

/// `ebb-bench cachebench ...`: parses, runs, prints to standard output.
pub fn run_cli(args: &[String]) -> Result<()> {
    let Some(config) = CacheBenchConfig::parse(args.iter().cloned())? else {
        print!("{}", help_text());
        return Ok(());
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    run(&config, &mut out).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<CacheBenchConfig> {
        Ok(CacheBenchConfig::parse(args.iter().copied())?.expect("not --help"))
    }

    #[test]
    fn defaults_are_cache_bench_defaults() {
        let c = CacheBenchConfig::defaults();
        assert_eq!((c.threads, c.cache_size, c.num_shard_bits, c.value_bytes), (16, 1 << 30, 6, 8192));
        assert_eq!((c.lookup_insert_percent, c.insert_percent, c.lookup_percent, c.erase_percent), (87, 2, 10, 1));
        assert_eq!((c.skew, c.ops_per_thread, c.cache_type), (5, 2_000_000, CacheType::Lru));
        assert!(c.populate_cache && c.lru_promote && c.histograms && !c.lean && !c.skewed);
        // cache_bench: max_key = cache_size / resident_ratio / value_bytes.
        assert_eq!(c.max_key, (1u64 << 30) * 4 / 8192);
    }

    #[test]
    fn w4_flags_parse_in_every_gflags_spelling() {
        let c = parse(&[
            "--threads=8",
            "-lookup_percent=90",
            "--insert_percent",
            "5",
            "--erase_percent=5",
            "--lookup_insert_percent=0",
            "--cache_size=67108864",
            "--value_bytes=8192",
            "--num_shard_bits=6",
            "--nopopulate_cache",
            "--lean",
            "--cache_type=hyper_clock_cache",
        ])
        .unwrap();
        assert_eq!((c.threads, c.lookup_percent, c.insert_percent, c.erase_percent), (8, 90, 5, 5));
        assert_eq!((c.max_key, c.cache_type), (32768, CacheType::Clock));
        assert!(!c.populate_cache && c.lean);
        assert_eq!(parse(&["--cache_type=clock_cache"]).unwrap().cache_type, CacheType::Clock);
        let c = parse(&["--lru_promote=false", "--max_key=77"]).unwrap();
        assert!(!c.lru_promote);
        assert_eq!(c.max_key, 77);
        assert!(CacheBenchConfig::parse(["--help"]).unwrap().is_none());
    }

    fn error(args: &[&str]) -> String {
        parse(args).unwrap_err().to_string()
    }

    #[test]
    fn percentages_must_add_to_100_as_in_cache_bench() {
        let e = error(&["--lookup_percent=90"]);
        assert!(e.contains("--lookup_percent=90") && e.contains("add to 180") && e.contains("100"), "{e}");
        let e = error(&["--lookup_insert_percent=0", "--lookup_percent=90", "--insert_percent=5", "--erase_percent=1"]);
        assert!(e.contains("add to 96"), "{e}");
        // cache_bench 10's blind inserts count too.
        let e = error(&["--blind_insert_percent=5"]);
        assert!(e.contains("--blind_insert_percent=5") && e.contains("add to 105"), "{e}");
    }

    #[test]
    fn bad_values_are_refused_naming_the_flag() {
        for (args, name) in [
            (&["--value_bytes=-1"][..], "--value_bytes"),
            (&["--threads=0"], "--threads"),
            (&["--threads=many"], "--threads"),
            (&["--insert_percent=4294967296"], "--insert_percent"),
            (&["--cache_type=fast_lru_cache"], "--cache_type"),
            (&["--lru_promote=false", "--cache_type=hyper_clock_cache"], "--lru_promote"),
            (&["--num_shard_bits=20"], "--num_shard_bits"),
            (&["--resident_ratio=0"], "--resident_ratio"),
            (&["--resident_ratio=inf"], "--resident_ratio"),
            (&["--populate_cache=maybe"], "--populate_cache"),
            (&["--gather_stats"], "--gather_stats"),
            (&["--pinned_ratio=1.5"], "--pinned_ratio"),
            (&["--pinned_ratio=nan"], "--pinned_ratio"),
            (&["--blind_insert_percent=lots"], "--blind_insert_percent"),
            (&["--value_bytes=0"], "--value_bytes"),
            (&["--ops_per_thread"], "--ops_per_thread"),
            (&["--no_such_flag=1"], "--no_such_flag"),
        ] {
            let e = error(args);
            assert!(e.contains(name), "{args:?}: {e}");
        }
        let e = error(&["--cache_size=1000"]);
        assert!(e.contains("key space is empty"), "{e}");
        let e = error(&["stray"]);
        assert!(e.contains("stray"), "{e}");
    }

    #[test]
    fn help_lists_every_flag() {
        let h = help_text();
        for f in FLAGS {
            assert!(h.contains(&format!("--{}=", f.name)), "{}", f.name);
        }
    }
}
