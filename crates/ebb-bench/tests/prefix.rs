//! db_bench's prefix flags (`--prefix_size`, `--keys_per_prefix`,
//! `--prefix_same_as_start`, `--total_order_seek`,
//! `--memtable_bloom_size_ratio`, `--whole_key_filtering`) through the binary
//! against a real database: the keys a seeded fill leaves against db_bench's
//! `GenerateKeyFromInt`, seekrandom's found counts and bytes against a model
//! of db_bench's `SeekRandom` over those keys, and the refusals.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::{Command, Output};

use ebb_bench::rng::{thread_seed, Rng64};

fn ebb_bench(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ebb-bench")).args(args).output().expect("run ebb-bench")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The header's first line: nothing may be printed before a refusal.
const HEADER: &str = "version";

const NUM: u64 = 2000;
/// db_bench's `num_prefix`: `num / keys_per_prefix` with `--keys_per_prefix=10`.
const PREFIXES: u64 = NUM / 10;
/// `--key_size` + `--value_size`: the bytes of one entry.
const ENTRY: u64 = 16 + 100;

/// The key db_bench's `GenerateKeyFromInt(n, num)` makes with
/// `--prefix_size=8 --keys_per_prefix=10 --key_size=16`: the prefix
/// `n mod (num / 10)` big-endian in 8 bytes, then `n` big-endian in 8.
fn key_of(n: u64) -> Vec<u8> {
    [(n % PREFIXES).to_be_bytes(), n.to_be_bytes()].concat()
}

/// The key numbers a seeded fillrandom writes when it is the first
/// benchmark of its run: one thread, `NUM` uniform draws from `[0, NUM)`.
fn filled(seed: u64) -> BTreeSet<u64> {
    let mut rng = Rng64::new(thread_seed(seed, 0, 0));
    (0..NUM).map(|_| rng.below(NUM)).collect()
}

/// Runs ebb-bench with `args` and the common flags; returns stdout and the
/// JSON report.
fn run(dir: &Path, args: &[&str]) -> (String, serde_json::Value) {
    let json = dir.join("run.json");
    let mut all: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    all.extend([
        format!("--num={NUM}"),
        "--progress=false".into(),
        "--summary=false".into(),
        format!("--db={}", dir.join("db").display()),
        format!("--json={}", json.display()),
    ]);
    let o = ebb_bench(&all.iter().map(String::as_str).collect::<Vec<_>>());
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{all:?}\nstdout:\n{out}\nstderr:\n{}", stderr(&o));
    let report = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    (out, report)
}

/// The messages of benchmark `name`'s result lines (`(F of R found)`), in order.
fn messages<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    out.lines()
        .filter(|l| l.split_once(" : ").is_some_and(|(n, _)| n.trim() == name))
        .map(|l| {
            let tail = l.rsplit_once("operations;").unwrap().1;
            tail.split_once("MB/s").map_or(tail, |(_, m)| m).trim()
        })
        .collect()
}

/// The message of benchmark `name`'s only result line.
fn message<'a>(out: &'a str, name: &str) -> &'a str {
    match messages(out, name)[..] {
        [m] => m,
        _ => panic!("not one {name} line:\n{out}"),
    }
}

/// Every key of an Ebb database, in order.
fn ebb_keys(db: &Path) -> Vec<Vec<u8>> {
    let mut o = ebb::Options::default();
    o.prefix_extractor = Some(ebb::prefix::fixed(8));
    let handle = ebb::Db::open(db, o).unwrap();
    let keys = handle
        .iterator(ebb::ReadOptions::default(), ebb::IteratorMode::Start)
        .map(|entry| entry.unwrap().0.to_vec())
        .collect();
    handle.close().unwrap();
    keys
}

const PREFIX_FLAGS: [&str; 2] = ["--prefix_size=8", "--keys_per_prefix=10"];

/// fillrandom with prefixes writes db_bench's keys: each the prefix of its
/// number then the number, at most 10 numbers (of `[0, 2000)`) per prefix;
/// the engine gets the fixed 8-byte extractor, the memtable bloom and
/// prefix-only table filters asked for (as its OPTIONS and the report's
/// effective options say), and point reads through those filters find
/// exactly the keys written.
#[test]
fn fillrandom_writes_db_bench_s_prefixed_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (out, report) = run(
        dir.path(),
        &[
            "--benchmarks=fillrandom,readrandom,flush,readrandom",
            "--seed=7",
            "--memtable_bloom_size_ratio=0.1",
            "--whole_key_filtering=false",
            PREFIX_FLAGS[0],
            PREFIX_FLAGS[1],
        ],
    );
    assert!(out.contains("\nPrefix:    8 bytes\nKeys per prefix:    10\n"), "db_bench's header lines:\n{out}");
    let effective = &report["effective_options"];
    assert_eq!(effective["prefix_size"], 8, "{effective}");
    assert_eq!(effective["memtable_bloom_size_ratio"], 0.1, "{effective}");
    assert_eq!(effective["whole_key_filtering"], false, "{effective}");

    let written = filled(7);
    let keys = ebb_keys(&dir.path().join("db"));
    assert_eq!(keys, written.iter().map(|n| key_of(*n)).collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>());
    let mut per_prefix: BTreeMap<&[u8], BTreeSet<u64>> = BTreeMap::new();
    for k in &keys {
        assert_eq!(k.len(), 16);
        let n = u64::from_be_bytes(k[8..].try_into().unwrap());
        assert_eq!(u64::from_be_bytes(k[..8].try_into().unwrap()), n % PREFIXES, "{k:?}");
        per_prefix.entry(&k[..8]).or_default().insert(n);
    }
    assert!(per_prefix.len() <= PREFIXES as usize);
    assert!(per_prefix.values().all(|ns| ns.len() <= 10), "at most keys_per_prefix keys share a prefix");
    assert!(per_prefix.values().any(|ns| ns.len() > 1), "keys do share prefixes");

    // readrandom (its thread's own draws), from the memtable then from a table.
    let expected: Vec<String> = [1, 3]
        .into_iter()
        .map(|index| {
            let mut rng = Rng64::new(thread_seed(7, index, 0));
            let found = (0..NUM).filter(|_| written.contains(&rng.below(NUM))).count();
            format!("({found} of {NUM} found)")
        })
        .collect();
    assert_eq!(messages(&out, "readrandom"), expected);

    let options = std::fs::read_dir(dir.path().join("db"))
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("OPTIONS"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect::<String>();
    assert!(options.contains("prefix_extractor=rocksdb.FixedPrefix.8"), "{options}");
}

/// db_bench's `SeekRandom` over `keys` (sorted): `reads` seeks to the key of
/// a uniform number, found when the iterator is at that key, then up to
/// `seek_nexts` entries read (forward, or backward from the last key at or
/// before the target), within the target's prefix when `bounded`. Returns
/// (found, entries read).
fn seek_model(keys: &[Vec<u8>], seed: u64, reads: u64, seek_nexts: usize, bounded: bool, reverse: bool) -> (u64, u64) {
    let mut rng = Rng64::new(thread_seed(seed, 0, 0));
    let (mut found, mut entries) = (0, 0);
    for _ in 0..reads {
        let target = key_of(rng.below(NUM));
        let same = |k: &&Vec<u8>| !bounded || k[..8] == target[..8];
        let visited: Vec<&Vec<u8>> = if reverse {
            keys.iter().rev().skip_while(|k| **k > target).take_while(same).collect()
        } else {
            keys.iter().skip_while(|k| **k < target).take_while(same).collect()
        };
        found += u64::from(visited.first() == Some(&&target));
        entries += visited.len().min(seek_nexts) as u64;
    }
    (found, entries)
}

/// seekrandom after a prefixed fill: the found counts are db_bench's (the
/// seek key itself, whether or not the iterator then stops at the end of its
/// prefix), and the entries read, each of `--seek_nexts` steps, stop at the
/// prefix's end with `--prefix_same_as_start`, forward and backward, and not
/// without it or with `--total_order_seek` (Ebb's total order wins).
#[test]
fn seekrandom_counts_found_seeks_and_stays_within_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), &["--benchmarks=fillrandom", "--seed=7", PREFIX_FLAGS[0], PREFIX_FLAGS[1]]);
    let keys = ebb_keys(&dir.path().join("db"));
    assert_eq!(keys.len(), filled(7).len());
    let reads = 3000;
    let mut founds = BTreeSet::new();
    for (extra, bounded, reverse) in [
        (&["--prefix_same_as_start=true"][..], true, false),
        (&["--prefix_same_as_start=true", "--reverse_iterator=true"][..], true, true),
        (&[][..], false, false),
        (&["--reverse_iterator=true"][..], false, true),
        (&["--total_order_seek=true"][..], false, false),
    ] {
        for seek_nexts in [0usize, 5] {
            let mut args = vec![
                "--benchmarks=seekrandom".to_string(),
                "--use_existing_db=true".into(),
                "--seed=11".into(),
                format!("--reads={reads}"),
                format!("--seek_nexts={seek_nexts}"),
            ];
            args.extend(PREFIX_FLAGS.iter().chain(extra).map(|s| s.to_string()));
            let (out, report) = run(dir.path(), &args.iter().map(String::as_str).collect::<Vec<_>>());
            let (found, entries) = seek_model(&keys, 11, reads, seek_nexts, bounded, reverse);
            let what = format!("{extra:?} --seek_nexts={seek_nexts}");
            assert_eq!(message(&out, "seekrandom"), format!("({found} of {reads} found)"), "{what}\n{out}");
            let result = &report["results"][0];
            assert_eq!(result["bytes"], entries * ENTRY, "{what}: the entries read are db_bench's");
            if seek_nexts == 0 {
                assert!(result["mb_per_sec"].is_null(), "{what}: db_bench reads no entry without steps");
            }
            founds.insert(found);
        }
    }
    assert_eq!(founds.len(), 1, "the same seeds find the same keys, bounded or not: {founds:?}");
    let found = *founds.first().unwrap();
    assert!(found > 0 && found < reads, "{found}: some seek keys were written, some not");
    // The bound matters: fewer entries read within the prefix than past it.
    assert!(seek_model(&keys, 11, reads, 5, true, false).1 < seek_model(&keys, 11, reads, 5, false, false).1);
}

/// An `--options_file` naming a prefix extractor is one for
/// `--prefix_same_as_start` too (the keys then have no prefix of their own:
/// `--prefix_size` alone makes them); an explicit `--prefix_size=0` still
/// means none.
#[test]
fn an_options_file_s_extractor_serves_prefix_seeks() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("OPTIONS.prefix");
    std::fs::write(&file, "[CFOptions \"default\"]\n  prefix_extractor=rocksdb.FixedPrefix.4\n").unwrap();
    let options_file = format!("--options_file={}", file.display());
    let (out, report) =
        run(dir.path(), &["--benchmarks=fillseq,seekrandom", "--seed=3", "--prefix_same_as_start=true", &options_file]);
    assert_eq!(report["effective_options"]["prefix_size"], 4);
    assert!(out.contains("\nPrefix:    0 bytes\n"), "{out}");
    // fillseq wrote every key of [0, num): every seek finds its key.
    assert_eq!(message(&out, "seekrandom"), format!("({NUM} of {NUM} found)"));

    let db = format!("--db={}", dir.path().join("db2").display());
    let o = ebb_bench(&[
        "--benchmarks=seekrandom",
        "--prefix_same_as_start=true",
        "--prefix_size=0",
        &options_file,
        &db,
        "--progress=false",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("has no prefix extractor"), "{}", stderr(&o));
}

#[test]
fn bad_prefix_flags_are_refused_before_the_header() {
    for (flags, needle) in [
        (
            &["--prefix_same_as_start=true"][..],
            "--prefix_same_as_start=true keeps each seek within its key's prefix, and the ebb engine has no prefix \
             extractor to say what that prefix is: give --prefix_size=N",
        ),
        (&["--prefix_same_as_start=true", "--keys_per_prefix=10"][..], "give --prefix_size=N"),
        // The peer too, whether or not this build has it.
        (
            &["--engine=rocksdb", "--prefix_same_as_start=true"][..],
            "the rocksdb engine has no prefix extractor to say what that prefix is: give --prefix_size=N",
        ),
        (
            &["--engine=rocksdb", "--prefix_size=8", "--memtable_bloom_size_ratio=0.3"][..],
            "memtable_prefix_bloom_size_ratio",
        ),
        (&["--prefix_size=17"][..], "--prefix_size=17 is larger than --key_size=16"),
        (&["--prefix_size=-1"][..], "flag --prefix_size must not be negative, got -1"),
        (&["--prefix_size=8", "--keys_per_prefix=-1"][..], "flag --keys_per_prefix must not be negative, got -1"),
        (&["--prefix_size=8", "--keys_per_prefix=101"][..], "--keys_per_prefix=101 is more than --num=100"),
        (
            &[
                "--benchmarks=mergerandom",
                "--merge_operator=put",
                "--merge_keys=5",
                "--prefix_size=8",
                "--keys_per_prefix=10",
            ][..],
            "--keys_per_prefix=10 is more than --merge_keys=5",
        ),
        (&["--prefix_size=8", "--memtable_bloom_size_ratio=0.5"][..], "memtable_prefix_bloom_size_ratio"),
        (&["--whole_key_filtering=maybe"][..], "--whole_key_filtering"),
        (
            &[
                "--prefix_size=8",
                "--keys_per_prefix=10",
                "--writes_per_range_tombstone=10",
                "--max_num_range_tombstones=3",
            ][..],
            "give --expand_range_tombstones=true",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = format!("--db={}", dir.path().join("db").display());
        let mut args = vec!["--benchmarks=fillrandom,seekrandom", "--num=100", "--progress=false", &db];
        args.extend(flags);
        let o = ebb_bench(&args);
        assert_eq!(o.status.code(), Some(1), "{flags:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(needle), "{flags:?}: {}", stderr(&o));
        assert!(!String::from_utf8_lossy(&o.stdout).contains(HEADER), "{flags:?}: the run started");
        assert!(!dir.path().join("db").exists(), "{flags:?}: nothing is created");
    }
}

/// `--keys_per_prefix` without `--prefix_size` changes no key (db_bench's
/// prefix is `--prefix_size` bytes), which the run says; and range
/// deletions expanded into point deletes work with prefixed keys.
#[test]
fn keys_per_prefix_alone_is_noted_and_expanded_range_deletions_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let o = ebb_bench(&[
        "--benchmarks=fillseq",
        "--num=100",
        "--keys_per_prefix=10",
        "--progress=false",
        &format!("--db={}", db.display()),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--keys_per_prefix=10 without --prefix_size puts no prefix in the keys"),
        "{}",
        stderr(&o)
    );
    let keys = ebb_keys(&db);
    assert_eq!(keys.len(), 100);
    assert!(keys.iter().enumerate().all(|(n, k)| k[..8] == (n as u64).to_be_bytes()), "unprefixed keys");

    let dir = tempfile::tempdir().unwrap();
    let (out, _) = run(
        dir.path(),
        &[
            "--benchmarks=fillseq",
            "--seed=5",
            "--writes_per_range_tombstone=10",
            "--max_num_range_tombstones=3",
            "--range_tombstone_width=4",
            "--expand_range_tombstones=true",
            PREFIX_FLAGS[0],
            PREFIX_FLAGS[1],
        ],
    );
    assert!(out.contains("Number of range deletions: 3\n"), "{out}");
    // fillseq's range deletions begin at the next number, so they delete
    // nothing written and leave one-number holes: 10, 21, 32.
    let expected: BTreeSet<Vec<u8>> = (0..NUM + 3).filter(|n| ![10, 21, 32].contains(n)).map(key_of).collect();
    assert_eq!(ebb_keys(&dir.path().join("db")), expected.into_iter().collect::<Vec<_>>());
}

/// The same seeded runs on Ebb and on RocksDB: the same prefixed keys and
/// values, the same seekrandom found counts and bytes read within the
/// prefix, and both engines' read-back options name the same extractor.
#[cfg(feature = "rocksdb-peer")]
#[test]
fn both_engines_leave_the_same_keys() {
    use ebb_bench::config::EngineKind;

    let dir = tempfile::tempdir().unwrap();
    let mut contents = Vec::new();
    let mut seeks = Vec::new();
    for (engine, kind) in [("ebb", EngineKind::Ebb), ("rocksdb", EngineKind::RocksDb)] {
        let db = dir.path().join(engine);
        let common = [
            format!("--engine={engine}"),
            format!("--num={NUM}"),
            "--prefix_size=8".to_string(),
            "--keys_per_prefix=10".to_string(),
            "--memtable_bloom_size_ratio=0.05".to_string(),
            "--write_buffer_size=65536".to_string(),
            "--progress=false".to_string(),
            "--summary=false".to_string(),
            format!("--db={}", db.display()),
        ];
        let json = dir.path().join(format!("{engine}.json"));
        let mut args = common.to_vec();
        args.extend([
            "--benchmarks=fillrandom,overwrite,compact,seekrandom,readrandom".to_string(),
            "--writes=1000".to_string(),
            "--seek_nexts=4".to_string(),
            "--prefix_same_as_start=true".to_string(),
            "--seed=13".to_string(),
            format!("--json={}", json.display()),
        ]);
        let o = ebb_bench(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        assert!(o.status.success(), "{engine}: stdout:\n{out}\nstderr:\n{}", stderr(&o));
        let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(report["effective_options"]["prefix_size"], 8, "{engine}: {}", report["effective_options"]);
        assert_eq!(report["effective_options"]["memtable_bloom_size_ratio"], 0.05, "{engine}");
        seeks.push((
            message(&out, "seekrandom").to_string(),
            report["results"][3]["bytes"].clone(),
            message(&out, "readrandom").to_string(),
        ));
        // Read back without the prefix bound (RocksDB bounds even a scan
        // from the first key by that key's prefix).
        contents.push(common::engine_contents(kind, &db, &common));
    }
    assert_eq!(contents[0].len(), contents[1].len(), "key counts");
    assert!(contents[0] == contents[1], "Ebb and RocksDB hold different keys or values");
    let mut rng = Rng64::new(thread_seed(13, 0, 0));
    let mut expected: BTreeSet<u64> = (0..1000).map(|_| rng.below(NUM)).collect();
    let mut rng = Rng64::new(thread_seed(13, 1, 0));
    expected.extend((0..1000).map(|_| rng.below(NUM)));
    let held: Vec<Vec<u8>> = contents[0].iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(held, expected.iter().map(|n| key_of(*n)).collect::<BTreeSet<_>>().into_iter().collect::<Vec<_>>());
    assert_eq!(seeks[0], seeks[1], "seekrandom and readrandom agree on both engines");
}
