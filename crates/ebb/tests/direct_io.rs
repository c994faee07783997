//! Direct I/O (`use_direct_reads`, `use_direct_io_for_flush_and_compaction`;
//! docs/io.md): the files read and write exactly what buffered files do,
//! whatever the sizes and offsets; a database with both options keeps every
//! write through flushes, compactions, blob files and a reopen, and reads
//! its tables through `O_DIRECT` descriptors; the options are refused with
//! `allow_mmap_reads`, and on a filesystem without direct I/O, naming them.
//!
//! The real-disk tests run under `CARGO_TARGET_TMPDIR` (the target
//! directory, on disk: the kernel's tmpfs may refuse `O_DIRECT`).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::hooked_fs::{FsHooks, HookedFs};
use ebb::fs::{FileSystem, MemFs, PosixFs};
use ebb::{Db, Error, Options, ReadOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// A directory on disk, if its filesystem takes `O_DIRECT`; where it does
/// not, the refusal must be the clear error the options document, and the
/// test has nothing more to run.
fn disk_dir() -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let probe = dir.path().join("probe");
    std::fs::write(&probe, [0u8; 4096]).unwrap();
    match PosixFs::new().open_random_direct(&probe) {
        Ok(_) => Some(dir),
        Err(e) => {
            assert!(matches!(e, Error::NotSupported(_)) && e.to_string().contains("use_direct_reads"), "{e}");
            eprintln!("{} refuses O_DIRECT: {e}", dir.path().display());
            None
        }
    }
}

#[test]
fn direct_files_read_and_write_exactly_what_buffered_files_do() {
    let Some(dir) = disk_dir() else { return };
    let path = dir.path().join("f");
    let fs = PosixFs::new();
    let mut rng = StdRng::seed_from_u64(7);
    let mut expected = Vec::new();
    let mut w = fs.new_writable_direct(&path).unwrap();
    // Appends of every size around the 4 KiB unit and the 1 MiB buffer,
    // with flushes and syncs between: after each, the file holds exactly
    // what was appended (the padded tail truncated away).
    let sizes = [0usize, 1, 7, 4095, 4096, 4097, 10_000, 1 << 20, (1 << 20) + 3, 123_457];
    for round in 0..60 {
        let len = if round < sizes.len() { sizes[round] } else { rng.gen_range(0..300_000) };
        let data: Vec<u8> = (0..len).map(|_| rng.gen::<u8>()).collect();
        w.append(&data).unwrap();
        expected.extend_from_slice(&data);
        assert_eq!(w.size(), expected.len() as u64);
        match rng.gen_range(0..3) {
            0 => w.flush().unwrap(),
            1 => w.sync().unwrap(),
            _ => continue,
        }
        assert_eq!(std::fs::read(&path).unwrap(), expected, "after round {round}");
    }
    w.sync().unwrap();
    drop(w);
    assert_eq!(std::fs::read(&path).unwrap(), expected);
    // Reads at any offset and length, inside, across and past the end.
    let r = fs.open_random_direct(&path).unwrap();
    let buffered = fs.open_random(&path).unwrap();
    assert_eq!(r.size().unwrap(), expected.len() as u64);
    let n = expected.len() as u64;
    let mut cases: Vec<(u64, usize)> =
        vec![(0, 0), (0, 1), (4095, 2), (4096, 4096), (n - 1, 10), (n, 5), (n + 9000, 3)];
    for _ in 0..300 {
        cases.push((rng.gen_range(0..n + 100), rng.gen_range(0..70_000)));
    }
    for (offset, len) in cases {
        let want = buffered.read_at(offset, len).unwrap();
        assert_eq!(r.read_at(offset, len).unwrap(), want, "read of {len} at {offset}");
        let mut out = b"kept".to_vec();
        assert_eq!(r.read_at_append(offset, len, &mut out).unwrap(), want.len());
        assert_eq!(&out[4..], &want[..]);
    }
}

/// Whether the process has `path` open with `O_DIRECT` (its fdinfo flags).
fn open_direct(path_suffix: &str) -> (usize, usize) {
    let (mut all, mut direct) = (0, 0);
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let Ok(target) = std::fs::read_link(entry.path()) else { continue };
        if !target.to_string_lossy().ends_with(path_suffix) {
            continue;
        }
        let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", entry.file_name().to_string_lossy()));
        let Ok(info) = info else { continue };
        let flags = info.lines().find_map(|l| l.strip_prefix("flags:")).map(|f| f.trim().to_string());
        let flags = u32::from_str_radix(&flags.unwrap_or_default(), 8).unwrap_or(0);
        all += 1;
        direct += usize::from(flags & libc::O_DIRECT as u32 != 0);
    }
    (all, direct)
}

fn direct_options() -> Options {
    let mut o = Options::default();
    o.create_if_missing = true;
    o.use_direct_reads = true;
    o.use_direct_io_for_flush_and_compaction = true;
    o.write_buffer_size = 64 << 10;
    o.target_file_size_base = 64 << 10;
    o.max_bytes_for_level_base = 256 << 10;
    o.level0_file_num_compaction_trigger = 2;
    o.enable_blob_files = true;
    o.min_blob_size = 200;
    o.block_cache_size = 256 << 10;
    o
}

#[test]
fn a_database_with_direct_io_keeps_every_write() {
    let Some(dir) = disk_dir() else { return };
    let path = dir.path().join("db");
    let o = direct_options();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut rng = StdRng::seed_from_u64(11);
    for reopen in 0..3 {
        let db = Db::open(&path, o.clone()).unwrap_or_else(|e| panic!("open {reopen}: {e}"));
        for i in 0..6000 {
            let k = format!("key{:05}", rng.gen_range(0..3000)).into_bytes();
            if i % 9 == 0 {
                db.delete(&k).unwrap();
                model.remove(&k);
            } else {
                // Some values go to blob files (at least `min_blob_size`).
                let len = if i % 3 == 0 { 400 } else { 40 };
                let v: Vec<u8> = (0..len).map(|j| b'a' + ((i + j + reopen) % 26) as u8).collect();
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        db.flush(true).unwrap();
        db.wait_for_compact().unwrap();
        let m = db.metrics();
        assert!(m.compaction_bytes_written > 0 && m.blob_files > 0, "compactions ran, blob files were written");
        // Every table open is an O_DIRECT descriptor.
        for (k, v) in model.iter().step_by(7) {
            assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
        }
        let (tables, direct) = open_direct(".sst");
        assert!(tables > 0 && direct == tables, "{direct} of {tables} open tables are direct");
        let mut it = db.iter(ReadOptions::default());
        it.seek_to_first();
        let mut got = BTreeMap::new();
        while it.valid() {
            got.insert(it.key().to_vec(), it.value().to_vec());
            it.next();
        }
        it.status().unwrap();
        drop(it);
        assert!(got == model, "reopen {reopen}: the scan differs from the model");
        db.close().unwrap();
    }
}

#[test]
fn direct_reads_and_mmap_reads_are_refused_together() {
    let fs = MemFs::new();
    let mut o = common::tiny_options(Some(fs));
    o.use_direct_reads = true;
    o.allow_mmap_reads = true;
    let e = Db::open("/db", o).err().expect("refused");
    assert!(matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("use_direct_reads"), "{e}");
    // The options have RocksDB's names in OPTIONS text.
    let o = Options::from_text("use_direct_reads=true\nuse_direct_io_for_flush_and_compaction=true\n").unwrap();
    assert!(o.use_direct_reads && o.use_direct_io_for_flush_and_compaction);
}

struct NoHooks;
impl FsHooks for NoHooks {}

#[test]
fn a_filesystem_without_direct_io_is_refused_at_open_naming_the_options() {
    for (reads, writes) in [(true, false), (false, true)] {
        let mut o = common::tiny_options(None);
        o.fs = Arc::new(HookedFs::new(MemFs::new(), Arc::new(NoHooks)));
        o.use_direct_reads = reads;
        o.use_direct_io_for_flush_and_compaction = writes;
        let e = Db::open("/db", o.clone()).err().expect("refused");
        assert!(matches!(e, Error::NotSupported(_)), "{e:?}");
        let text = e.to_string();
        assert!(text.contains("direct I/O") && text.contains("use_direct_reads"), "{text}");
        // Without them the same filesystem opens.
        o.use_direct_reads = false;
        o.use_direct_io_for_flush_and_compaction = false;
        Db::open("/db", o).unwrap().close().unwrap();
    }
}
