//! The option presets on a real database: a bulk load under
//! `prepare_for_bulk_load` piles files into L0 without an L0 stall or an
//! automatic compaction, and one manual compaction moves them all to L1;
//! the write and read presets open and keep data like the defaults do.

mod common;

use std::sync::Arc;

use common::scan;
use ebb::fs::MemFs;
use ebb::StallCause;
use ebb::{CompressionType, Db, Options, ReadOptions};

fn small(o: Options) -> Options {
    let mut o = o.create_if_missing(true).with_fs(Arc::new(MemFs::new()));
    o.write_buffer_size = 8 * 1024;
    o.compression = CompressionType::None;
    o
}

fn load(db: &Db, n: u32) {
    for i in 0..n {
        let k = format!("key{:06}", (i * 7919) % n);
        db.put(k.as_bytes(), &[b'v'; 100]).unwrap();
    }
    db.flush(true).unwrap();
}

#[test]
fn bulk_load_keeps_everything_in_l0_until_a_manual_compaction() {
    // One flush per 75 keys, each into a memtable far from full: exactly 40
    // L0 files, however slowly the machine flushes (a flush that fell behind
    // would merge several full memtables into one file).
    let mut o = small(Options::default().prepare_for_bulk_load());
    o.write_buffer_size = 1 << 20;
    let db = Db::open("/bulk", o).unwrap();
    for i in 0..3000u32 {
        let k = format!("key{:06}", (i * 7919) % 3000);
        db.put(k.as_bytes(), &[b'v'; 100]).unwrap();
        if i % 75 == 74 {
            db.flush(true).unwrap();
        }
    }
    let m = db.metrics();
    let l0 = m.files_per_level[0];
    // Far past the default triggers (compaction at 4, stop at 36).
    assert_eq!(l0, 40, "L0 has {l0} files");
    assert_eq!(m.files_per_level.iter().skip(1).sum::<usize>(), 0, "{:?}", m.files_per_level);
    // Only a full set of memtables may hold writes back, never L0 or pending bytes.
    for (cause, micros) in StallCause::ALL.iter().zip(&m.stall_micros_by_cause) {
        if *cause != StallCause::MemtableLimit {
            assert_eq!(*micros, 0, "{cause:?}");
        }
    }
    assert!(!m.compaction_enabled);
    db.compact_range(None, None).unwrap();
    let m = db.metrics();
    assert_eq!(m.files_per_level.len(), 2);
    assert_eq!(m.files_per_level[0], 0, "{:?}", m.files_per_level);
    assert!(m.files_per_level[1] > 0);
    assert_eq!(scan(&db, ReadOptions::default()).len(), 3000);
    db.close().unwrap();
}

#[test]
fn write_and_read_presets_keep_data() {
    for (name, opts) in
        [("write", Options::default().optimize_for_writes()), ("read", Options::default().optimize_for_reads())]
    {
        let db = Db::open(format!("/{name}"), small(opts)).unwrap();
        load(&db, 2000);
        db.wait_for_compact().unwrap();
        assert_eq!(scan(&db, ReadOptions::default()).len(), 2000, "{name}");
        assert_eq!(db.get(b"key000042").unwrap().as_deref(), Some(&[b'v'; 100][..]), "{name}");
        db.close().unwrap();
    }
}
