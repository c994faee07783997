//! The read-path I/O options (docs/io.md) change how table bytes are fetched,
//! never what a read returns: a model run on the real filesystem with
//! `allow_mmap_reads`, compaction readahead on and off, and long scans under
//! auto and explicit readahead; fewer file reads where readahead promises
//! them; and a damaged SST read through a memory map is a corruption error.

mod common;

use std::path::Path;

use common::{check_bounded_scans, scan, scan_reverse, tiny_options, Model};
use ebb::fs::{FaultOp, MemFs};
use ebb::{Db, Error, Options, ReadOptions, WriteBatch};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(rng: &mut StdRng) -> Vec<u8> {
    let len = rng.gen_range(0..200);
    (0..len).map(|_| rng.gen_range(b'a'..=b'z')).collect()
}

/// Random puts, deletes and batches with flushes, compactions and reopens;
/// point reads and full, bounded and reverse scans checked against a model.
fn run_model(seed: u64, path: &Path, opts_for: &dyn Fn() -> Options, ctx: &str) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::new();
    for epoch in 0..4 {
        let db = Db::open(path, opts_for()).unwrap_or_else(|e| panic!("{ctx} epoch {epoch}: open: {e}"));
        assert_eq!(scan(&db, ReadOptions::default()), model, "{ctx} epoch {epoch}: state after reopen");
        for step in 0..1500 {
            let ctx = format!("{ctx} epoch {epoch} step {step}");
            match rng.gen_range(0..100) {
                0..=49 => {
                    let (k, v) = (key(rng.gen_range(0..800)), value(&mut rng));
                    db.put(&k, &v).unwrap();
                    model.insert(k, v);
                }
                50..=64 => {
                    let k = key(rng.gen_range(0..800));
                    db.delete(&k).unwrap();
                    model.remove(&k);
                }
                65..=72 => {
                    let mut b = WriteBatch::new();
                    for _ in 0..rng.gen_range(1..10) {
                        let k = key(rng.gen_range(0..800));
                        if rng.gen_bool(0.7) {
                            let v = value(&mut rng);
                            b.put(&k, &v);
                            model.insert(k, v);
                        } else {
                            b.delete(&k);
                            model.remove(&k);
                        }
                    }
                    db.write(&b).unwrap();
                }
                73..=87 => {
                    let k = key(rng.gen_range(0..800));
                    assert_eq!(db.get(&k).unwrap(), model.get(&k).cloned(), "{ctx}: get");
                }
                88..=91 => db.flush(rng.gen_bool(0.5)).unwrap(),
                92..=93 => {
                    let a = key(rng.gen_range(0..800));
                    let b = key(rng.gen_range(0..800));
                    let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
                    db.compact_range(Some(&lo), Some(&hi)).unwrap();
                }
                94..=96 => {
                    // A long scan, under auto readahead or an explicit one.
                    let readahead_size = [0, 0, 4096, 64 << 10][rng.gen_range(0..4)];
                    let ro = ReadOptions { readahead_size, ..ReadOptions::default() };
                    assert_eq!(scan(&db, ro.clone()), model, "{ctx}: scan, readahead_size {readahead_size}");
                    assert_eq!(scan_reverse(&db, ro), model, "{ctx}: reverse scan");
                }
                _ => {
                    let a = key(rng.gen_range(0..800));
                    let b = key(rng.gen_range(0..800));
                    check_bounded_scans(&db, &model, a, b, &ctx);
                }
            }
        }
        db.compact_range(None, None).unwrap();
        assert_eq!(scan(&db, ReadOptions::default()), model, "{ctx} epoch {epoch}: after a full compaction");
        let m = db.metrics();
        assert!(m.flushes > 0, "{ctx} epoch {epoch}: no flush happened");
        db.close().unwrap();
    }
}

fn real_fs_options(configure: impl Fn(&mut Options)) -> impl Fn() -> Options {
    move || {
        let mut o = tiny_options(None);
        // A small cache, so that most scans read the files.
        o.block_cache_size = 8 * 1024;
        configure(&mut o);
        o
    }
}

#[test]
fn model_with_mmap_reads_and_small_compaction_readahead() {
    let dir = tempfile::tempdir().unwrap();
    let opts = real_fs_options(|o| {
        o.allow_mmap_reads = true;
        o.compaction_readahead_size = 64 << 10;
    });
    run_model(1, &dir.path().join("db"), &opts, "mmap, readahead 64 KiB");
}

#[test]
fn model_with_mmap_reads_and_no_compaction_readahead() {
    let dir = tempfile::tempdir().unwrap();
    let opts = real_fs_options(|o| {
        o.allow_mmap_reads = true;
        o.compaction_readahead_size = 0;
        o.advise_random_on_open = false;
    });
    run_model(2, &dir.path().join("db"), &opts, "mmap, no readahead");
}

#[test]
fn model_with_pread_and_small_auto_readahead() {
    let dir = tempfile::tempdir().unwrap();
    let opts = real_fs_options(|o| {
        o.compaction_readahead_size = 4096;
        o.initial_auto_readahead_size = 1024;
        o.max_auto_readahead_size = 8192;
    });
    run_model(3, &dir.path().join("db"), &opts, "pread, auto readahead 1-8 KiB");
}

#[test]
fn model_with_direct_reads_and_writes() {
    // On disk: a tmpfs may refuse O_DIRECT (then only the refusal is checked).
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let probe = dir.path().join("probe");
    std::fs::write(&probe, [0u8; 4096]).unwrap();
    if let Err(e) = ebb::fs::FileSystem::open_random_direct(&ebb::fs::PosixFs::new(), &probe) {
        assert!(matches!(e, ebb::Error::NotSupported(_)), "{e}");
        return;
    }
    let opts = real_fs_options(|o| {
        o.use_direct_reads = true;
        o.use_direct_io_for_flush_and_compaction = true;
        o.compaction_readahead_size = 16 << 10;
    });
    run_model(4, &dir.path().join("db"), &opts, "direct reads and writes");
}

/// A database on `fs` holding keys 0..n in several L0 files, no cache.
fn layered_db(fs: &MemFs, configure: impl Fn(&mut Options)) -> (Db, Model) {
    let mut o = tiny_options(Some(fs.clone()));
    o.disable_auto_compactions = true;
    o.level0_slowdown_writes_trigger = 100;
    o.level0_stop_writes_trigger = 100;
    o.block_cache_size = 0;
    o.write_buffer_size = 64 << 10;
    configure(&mut o);
    let db = Db::open(Path::new("/db"), o).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let mut model = Model::new();
    for round in 0..4 {
        for i in (round..3000).step_by(4) {
            let (k, v) = (key(i), value(&mut rng));
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush(true).unwrap();
    }
    (db, model)
}

/// File reads (MemFs `pread`s) made by `f`.
fn reads_during(fs: &MemFs, f: impl FnOnce()) -> u64 {
    let before = fs.op_count_of(FaultOp::Read);
    f();
    fs.op_count_of(FaultOp::Read) - before
}

#[test]
fn compaction_readahead_reads_inputs_in_few_large_reads() {
    let mut counts = Vec::new();
    for readahead in [0, 64 << 10] {
        let fs = MemFs::new();
        // Outputs of up to 1 MiB: the few a compaction writes are opened
        // (a handful of reads each) before they are installed.
        let (db, model) = layered_db(&fs, |o| {
            o.compaction_readahead_size = readahead;
            o.target_file_size_base = 1 << 20;
        });
        let reads = reads_during(&fs, || db.compact_range(None, None).unwrap());
        assert_eq!(scan(&db, ReadOptions::default()), model, "readahead {readahead}");
        counts.push(reads);
    }
    // Four inputs of about 85 KiB in 512-byte blocks: hundreds of block
    // reads without readahead, a few per input with it (and a few to open
    // the outputs).
    assert!(counts[0] > 500, "block by block: {counts:?}");
    assert!(counts[1] * 5 < counts[0], "with readahead: {counts:?}");
}

#[test]
fn long_scans_read_ahead_automatically_and_on_request() {
    let fs = MemFs::new();
    // Large outputs: auto readahead starts anew in every file.
    let (db, model) = layered_db(&fs, |o| o.target_file_size_base = 1 << 20);
    db.compact_range(None, None).unwrap();
    let count = |ro: ReadOptions| reads_during(&fs, || assert_eq!(scan(&db, ro), model));
    let auto = count(ReadOptions::default());
    let explicit = count(ReadOptions { readahead_size: 1 << 20, ..ReadOptions::default() });
    db.close().unwrap();

    let mut o = tiny_options(Some(fs.clone()));
    o.block_cache_size = 0;
    o.write_buffer_size = 64 << 10;
    o.target_file_size_base = 1 << 20;
    o.max_auto_readahead_size = 0;
    let db = Db::open(Path::new("/db"), o).unwrap();
    let off = reads_during(&fs, || assert_eq!(scan(&db, ReadOptions::default()), model));
    // Reverse scans never look sequential: block by block either way.
    let reverse = reads_during(&fs, || assert_eq!(scan_reverse(&db, ReadOptions::default()), model));
    assert!(off > 500, "block by block: {off}");
    assert!(auto * 5 < off, "auto readahead {auto} vs off {off}");
    assert!(explicit < auto, "1 MiB readahead {explicit} vs auto {auto}");
    assert!(reverse * 10 > off * 9, "reverse {reverse} vs forward {off}");
    eprintln!("file reads of a full scan: auto {auto}, 1 MiB {explicit}, off {off}, reverse {reverse}");
}

/// The SSTs of the database at `dir`.
fn table_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    out.sort();
    out
}

#[test]
fn a_damaged_sst_read_through_mmap_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let opts = || {
        let mut o = tiny_options(None);
        o.allow_mmap_reads = true;
        o.block_cache_size = 0;
        o.write_buffer_size = 1 << 20;
        o.disable_auto_compactions = true;
        o
    };
    let db = Db::open(&path, opts()).unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    for i in 0..2000 {
        db.put(&key(i), &value(&mut rng)).unwrap();
    }
    db.flush(true).unwrap();
    db.close().unwrap();
    let tables = table_files(&path);
    assert_eq!(tables.len(), 1, "{tables:?}");
    let mut bytes = std::fs::read(&tables[0]).unwrap();
    // A quarter in: inside the data blocks, which take most of the file.
    let at = bytes.len() / 4;
    bytes[at] ^= 0x10;
    std::fs::write(&tables[0], &bytes).unwrap();

    let db = Db::open(&path, opts()).unwrap();
    let mut it = db.iter(ReadOptions::default());
    it.seek_to_first();
    while it.valid() {
        it.next();
    }
    let err = it.status().unwrap_err();
    assert!(matches!(err, Error::Corruption { .. }), "scan: {err}");
    drop(it);
    let corrupt_gets = (0..2000).filter(|&i| matches!(db.get(&key(i)), Err(Error::Corruption { .. }))).count();
    assert!(corrupt_gets > 0, "no point read met the damaged block");
    assert!(corrupt_gets < 100, "only one block is damaged, {corrupt_gets} reads failed");
}

/// With `allow_mmap_reads`, an uncompressed data block is a view of the
/// mapping, not a copy, and is not put in the block cache (LevelDB's and
/// RocksDB's rule for blocks they did not copy); a compressed one is
/// decompressed and cached as with `pread`. A pinned value read through the
/// map stays readable after compaction deleted its table.
#[test]
fn mmap_reads_leave_uncompressed_blocks_out_of_the_cache_and_pinned_values_outlive_their_table() {
    let usage_after_reads = |mmap: bool, compression: ebb::CompressionType| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let mut o = tiny_options(None);
        o.allow_mmap_reads = mmap;
        o.compression = compression;
        o.block_cache_size = 8 << 20;
        o.write_buffer_size = 1 << 20;
        o.disable_auto_compactions = true;
        let db = Db::open(&path, o).unwrap();
        let mut model = Model::new();
        for i in 0..2000 {
            // Compressible, so that lz4 tables hold compressed blocks.
            let v = format!("value {i:08} ").repeat(8).into_bytes();
            db.put(&key(i), &v).unwrap();
            model.insert(key(i), v);
        }
        db.flush(true).unwrap();
        for (k, v) in &model {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
        }
        let usage: u64 = db.get_property("ebb.block-cache-usage").unwrap().parse().unwrap();
        // A value pinned from the table, held while compaction replaces it.
        let held = db.get_pinned(&key(7)).unwrap().unwrap();
        assert!(held.is_pinned());
        let before = table_files(&path);
        db.put(&key(7), b"newer").unwrap();
        db.flush(true).unwrap();
        db.compact_range(None, None).unwrap();
        let after = table_files(&path);
        assert!(before.iter().all(|t| !after.contains(t)), "{before:?} -> {after:?}");
        assert_eq!(&*held, model[&key(7)].as_slice(), "mmap {mmap}: a pinned value changed after its table went");
        assert_eq!(db.get(&key(7)).unwrap().as_deref(), Some(&b"newer"[..]));
        usage
    };
    let none = ebb::CompressionType::None;
    assert!(usage_after_reads(false, none) > 100_000, "pread blocks are cached");
    assert_eq!(usage_after_reads(true, none), 0, "mapped uncompressed blocks went into the cache");
    assert!(usage_after_reads(true, ebb::CompressionType::Lz4) > 10_000, "decompressed blocks are cached");
}
