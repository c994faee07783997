//! Fuzz regressions: every fuzz target's body (crates/ebb/fuzz/src/lib.rs)
//! runs over every kept input in crates/ebb/fuzz/corpus/<target>/ (the
//! seeds, and any input a fuzzer found to crash, kept under its
//! `crash-<hash>` name once fixed), and over a few hundred seeded mutations
//! of them, so `cargo test` exercises the decoders on bad input without
//! cargo-fuzz.
//!
//! `cargo test -p ebb --test fuzz_regressions -- --ignored write_seed_corpus`
//! rewrites the seeds from a database made here.

#[path = "../fuzz/src/lib.rs"]
mod bodies;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use ebb::fs::{FileSystem, MemFs};
use ebb::internals::key::{make_internal_key, ValueKind};
use ebb::internals::sst::BlockBuilder;
use ebb::internals::wal::{LogReader, LogRecord};
use ebb::{ChecksumType, CompressionType, Db, Options};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus").join(target)
}

fn body(target: &str) -> fn(&[u8]) {
    bodies::TARGETS.iter().find(|(n, _)| *n == target).map(|(_, f)| *f).expect("a known target")
}

fn kept_inputs(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            (name, std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        })
        .collect()
}

/// A random small change: flipped, overwritten, inserted or removed bytes,
/// or a truncation.
fn mutate(input: &[u8], rng: &mut StdRng) -> Vec<u8> {
    let mut v = input.to_vec();
    for _ in 0..rng.gen_range(1..4) {
        let at = if v.is_empty() { 0 } else { rng.gen_range(0..v.len()) };
        match rng.gen_range(0..5) {
            0 if !v.is_empty() => v[at] ^= 1 << rng.gen_range(0..8),
            1 if !v.is_empty() => v[at] = rng.gen(),
            2 => v.insert(at, rng.gen()),
            3 if !v.is_empty() => {
                v.remove(at);
            }
            _ => v.truncate(at),
        }
    }
    v
}

/// Runs `target` over its kept inputs and `mutations` mutations of each.
fn run(target: &str, mutations: usize) {
    let f = body(target);
    let inputs = kept_inputs(target);
    assert!(!inputs.is_empty(), "{target}: no kept inputs in {}", corpus_dir(target).display());
    let mut rng = StdRng::seed_from_u64(0xeb);
    for (name, input) in &inputs {
        if let Err(e) = catch_unwind(AssertUnwindSafe(|| f(input))) {
            panic!("{target}: kept input {name} fails: {:?}", e.downcast_ref::<String>());
        }
        // Large inputs (a WAL of several blocks) get fewer: a damaged log is
        // scanned for the next intact record, which takes a while in a debug build.
        let mutations = if input.len() > 8192 { mutations / 10 } else { mutations };
        for m in 0..mutations {
            let mutated = mutate(input, &mut rng);
            if let Err(e) = catch_unwind(AssertUnwindSafe(|| f(&mutated))) {
                panic!(
                    "{target}: mutation {m} of {name} fails: {:?}; input (hex) {}",
                    e.downcast_ref::<String>(),
                    mutated.iter().map(|b| format!("{b:02x}")).collect::<String>()
                );
            }
        }
    }
}

#[test]
fn wal_reader_inputs() {
    run("wal_reader", 300);
}

#[test]
fn block_inputs() {
    run("block", 300);
}

#[test]
fn table_inputs() {
    run("table", 200);
}

#[test]
fn version_edit_inputs() {
    run("version_edit", 300);
}

#[test]
fn batch_replay_inputs() {
    run("batch_replay", 10);
}

#[test]
fn model_inputs() {
    run("model", 3);
}

#[test]
fn manifest_recovery_inputs() {
    run("manifest_recovery", 40);
}

#[test]
fn blob_file_inputs() {
    run("blob_file", 300);
}

// ---- the seeds ----

fn files_named(fs: &MemFs, suffix: &str) -> Vec<Vec<u8>> {
    let dir = Path::new("/db");
    let mut names: Vec<String> = fs.list_dir(dir).unwrap().into_iter().filter(|n| n.ends_with(suffix)).collect();
    names.sort();
    names.into_iter().filter_map(|n| fs.file_bytes(&dir.join(n))).collect()
}

fn records_of(bytes: &[u8]) -> Vec<Vec<u8>> {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/r")).unwrap();
    fs.set_file_bytes(Path::new("/r/f"), bytes).unwrap();
    let mut r = LogReader::new(fs.open_sequential(Path::new("/r/f")).unwrap(), "f".into());
    let mut out = Vec::new();
    while let Ok(LogRecord::Record { data, .. }) = r.next() {
        out.push(data);
    }
    out
}

/// A small database on a `MemFs`: its tables, WAL and MANIFEST. Without
/// `flush`, every write stays in the WAL.
fn sample_database(compression: CompressionType, checksum: ChecksumType, bloom: u32, flush: bool) -> MemFs {
    let fs = MemFs::new();
    let mut o = Options::default();
    o.create_if_missing = true;
    o.compression = compression;
    o.checksum = checksum;
    o.bloom_bits_per_key = bloom;
    o.block_size = 256;
    o.disable_auto_compactions = true;
    o.fs = std::sync::Arc::new(fs.clone());
    let db = Db::open("/db", o).unwrap();
    for i in 0..40u32 {
        db.put(format!("key{i:03}").as_bytes(), format!("value {i} {}", "v".repeat(i as usize)).as_bytes()).unwrap();
    }
    db.delete(b"key007").unwrap();
    if flush {
        db.flush(true).unwrap();
        db.put(b"key001", b"again").unwrap();
        db.flush(true).unwrap();
        db.compact_range(None, None).unwrap();
    }
    let mut b = ebb::WriteBatch::new();
    b.put(b"batch-a", b"1");
    b.delete(b"key010");
    b.put(b"batch-b", &[7u8; 300]);
    db.write(&b).unwrap();
    drop(db);
    fs
}

fn write_seeds(target: &str, seeds: &[Vec<u8>]) {
    let dir = corpus_dir(target);
    std::fs::create_dir_all(&dir).unwrap();
    for (i, s) in seeds.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i:02}")), s).unwrap();
    }
}

#[test]
#[ignore = "rewrites the seed corpus; run by hand"]
fn write_seed_corpus() {
    let plain = sample_database(CompressionType::None, ChecksumType::Crc32c, 10, true);
    let packed = sample_database(CompressionType::Snappy, ChecksumType::Xxh3, 0, true);
    let unflushed = sample_database(CompressionType::None, ChecksumType::Crc32c, 10, false);
    let mut wals: Vec<Vec<u8>> = files_named(&plain, ".log");
    wals.extend(files_named(&unflushed, ".log"));
    wals.retain(|w| !w.is_empty());
    let mut big_wal = Vec::new();
    {
        let fs = MemFs::new();
        fs.create_dir_all(Path::new("/w")).unwrap();
        let mut w =
            ebb::internals::wal::LogWriter::new(fs.new_writable(Path::new("/w/1.log")).unwrap(), "1.log".into());
        for r in [vec![1u8; 100], vec![2u8; 40_000], vec![3u8; 10]] {
            w.add_record(&r).unwrap();
        }
        w.sync().unwrap();
        big_wal.extend(fs.file_bytes(Path::new("/w/1.log")).unwrap());
    }
    let mut wal_seeds = wals.clone();
    wal_seeds.push(big_wal);
    write_seeds("wal_reader", &wal_seeds);

    let mut blocks = Vec::new();
    for restart in [1, 2, 16] {
        let mut b = BlockBuilder::new(restart);
        for i in 0..12u64 {
            let kind = if i % 5 == 4 { ValueKind::Deletion } else { ValueKind::Value };
            b.add(&make_internal_key(format!("key{i:02}").as_bytes(), 100 - i, kind), format!("v{i}").as_bytes());
        }
        blocks.push(b.finish());
    }
    write_seeds("block", &blocks);

    let mut tables = files_named(&plain, ".sst");
    tables.extend(files_named(&packed, ".sst"));
    write_seeds("table", &tables);

    let mut edits: Vec<Vec<u8>> = Vec::new();
    for name in plain.list_dir(Path::new("/db")).unwrap().into_iter().filter(|n| n.starts_with("MANIFEST")) {
        edits.extend(records_of(&plain.file_bytes(&Path::new("/db").join(name)).unwrap()));
    }
    edits.dedup();
    write_seeds("version_edit", &edits);

    let records: Vec<Vec<u8>> = wals.iter().flat_map(|w| records_of(w)).collect();
    let batches: Vec<Vec<u8>> = records.iter().step_by(records.len() / 6 + 1).cloned().collect();
    write_seeds("batch_replay", &batches);

    let mut rng = StdRng::seed_from_u64(1);
    let programs: Vec<Vec<u8>> = (0..4).map(|_| (0..rng.gen_range(40..160)).map(|_| rng.gen()).collect()).collect();
    write_seeds("model", &programs);

    // Damage programs: none; a flipped, a set and a cut MANIFEST byte; a
    // flipped CURRENT byte; a cut CURRENT (four bytes a change).
    let damage: Vec<Vec<u8>> = vec![
        vec![],
        vec![0, 0, 5, 1],
        vec![4, 0, 0x30, 0],
        vec![1, 0, 3, 2],
        vec![0, 0, 0x40, 0x80, 2, 1, 0, 0],
        vec![5, 0, 9, 0],
    ];
    write_seeds("manifest_recovery", &damage);

    write_seeds("blob_file", &blob_seeds());
}

/// Blob files of a small database: values of 20 bytes or more, raw and
/// compressed with snappy.
fn blob_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for compression in [CompressionType::None, CompressionType::Snappy] {
        let fs = MemFs::new();
        let mut o = Options::default();
        o.create_if_missing = true;
        o.enable_blob_files = true;
        o.min_blob_size = 20;
        o.blob_compression_type = compression;
        o.disable_auto_compactions = true;
        o.fs = std::sync::Arc::new(fs.clone());
        let db = Db::open("/db", o).unwrap();
        for i in 0..12u32 {
            db.put(format!("key{i:03}").as_bytes(), format!("value {i} {}", "v".repeat(4 * i as usize)).as_bytes())
                .unwrap();
        }
        db.flush(true).unwrap();
        drop(db);
        seeds.extend(files_named(&fs, ".blob"));
    }
    seeds
}

/// Writes the blob file seeds alone (the other seeds hold creation times,
/// which a rewrite would change).
#[test]
#[ignore = "rewrites the blob file seeds; run by hand"]
fn write_blob_seed_corpus() {
    write_seeds("blob_file", &blob_seeds());
}
