//! SST partitioners: compaction outputs cut where the family's partitioner
//! asks, in leveled and universal compaction, a table that spans a cut not
//! moved down as it is, nothing lost, and the built-in partitioner named in
//! the OPTIONS file.

use std::sync::Arc;

use ebb::fs::MemFs;
use ebb::sst_partitioner;
use ebb::{CompactionStyle, Db, IteratorMode, LiveFileMetaData, Options, ReadOptions};

/// Keys `pNNN-kKKKK`: `prefixes` prefixes of 4 bytes (`pNNN`).
fn key(prefix: u32, k: u32) -> Vec<u8> {
    format!("p{prefix:03}-k{k:04}").into_bytes()
}

fn options(fs: &MemFs, partitioned: bool, style: CompactionStyle) -> Options {
    let mut o = Options::default().create_if_missing(true);
    o.fs = Arc::new(fs.clone());
    o.compaction_style = style;
    o.compaction_options_universal.allow_trivial_move = true;
    o.write_buffer_size = 4 << 20;
    if partitioned {
        o.sst_partitioner_factory = Some(sst_partitioner::fixed_prefix(4));
    }
    o
}

/// The tables below level 0 whose keys span more than one 4-byte prefix.
fn spanning(db: &Db) -> Vec<LiveFileMetaData> {
    db.get_live_files_metadata()
        .unwrap()
        .into_iter()
        .filter(|f| f.level > 0 && f.smallest_key[..4] != f.largest_key[..4])
        .collect()
}

fn fill(db: &Db, prefixes: u32, keys: u32) {
    for p in 0..prefixes {
        for k in 0..keys {
            db.put(&key(p, k), &[b'v'; 100]).unwrap();
        }
    }
}

fn check_all(db: &Db, prefixes: u32, keys: u32) {
    let got: Vec<Vec<u8>> = db.iterator(ReadOptions::default(), IteratorMode::Start).map(|kv| kv.unwrap().0).collect();
    let want: Vec<Vec<u8>> = (0..prefixes).flat_map(|p| (0..keys).map(move |k| key(p, k))).collect();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "keys differ after compaction");
}

#[test]
fn compaction_outputs_are_cut_where_the_prefix_changes() {
    for style in [CompactionStyle::Level, CompactionStyle::Universal] {
        let fs = MemFs::new();
        let db = Db::open("/db", options(&fs, true, style)).unwrap();
        fill(&db, 6, 200);
        db.flush(true).unwrap();
        db.compact_range(None, None).unwrap();
        let files = db.get_live_files_metadata().unwrap();
        assert!(files.iter().all(|f| f.level > 0), "{style:?}: everything compacted below L0");
        assert!(spanning(&db).is_empty(), "{style:?}: a table spans two prefixes: {:?}", spanning(&db));
        assert_eq!(files.len(), 6, "{style:?}: one table per prefix");
        check_all(&db, 6, 200);

        // Without a partitioner, the same data makes one table.
        let fs = MemFs::new();
        let plain = Db::open("/db", options(&fs, false, style)).unwrap();
        fill(&plain, 6, 200);
        plain.flush(true).unwrap();
        plain.compact_range(None, None).unwrap();
        assert_eq!(spanning(&plain).len(), 1, "{style:?}");
    }
}

#[test]
fn a_table_the_partitioner_would_cut_is_rewritten_not_moved() {
    let fs = MemFs::new();
    let mut o = options(&fs, true, CompactionStyle::Level);
    o.level0_file_num_compaction_trigger = 1;
    let db = Db::open("/db", o).unwrap();
    // One flush, two prefixes, nothing below: a move without the partitioner.
    fill(&db, 2, 50);
    db.flush(true).unwrap();
    db.wait_for_compact().unwrap();
    let files = db.get_live_files_metadata().unwrap();
    assert!(files.iter().all(|f| f.level > 0), "{files:?}");
    assert!(spanning(&db).is_empty(), "{:?}", spanning(&db));
    assert_eq!(files.len(), 2);
    // One prefix only: moved as it is.
    db.put(&key(7, 1), b"x").unwrap();
    db.flush(true).unwrap();
    let l0 = db.get_live_files_metadata().unwrap().into_iter().find(|f| f.level == 0).map(|f| f.file_number);
    db.wait_for_compact().unwrap();
    if let Some(number) = l0 {
        let after = db.get_live_files_metadata().unwrap();
        assert!(after.iter().any(|f| f.file_number == number && f.level > 0), "moved as it is: {after:?}");
    }
}

#[test]
fn the_options_file_names_the_built_in_partitioner() {
    let fs = MemFs::new();
    let db = Db::open("/db", options(&fs, true, CompactionStyle::Level)).unwrap();
    db.put(b"p000-a", b"v").unwrap();
    db.close().unwrap();
    let name = ebb::fs::FileSystem::list_dir(&fs, std::path::Path::new("/db"))
        .unwrap()
        .into_iter()
        .filter(|n| n.starts_with("OPTIONS-"))
        .max()
        .expect("an OPTIONS file");
    let bytes = fs.file_bytes(&std::path::Path::new("/db").join(name)).unwrap();
    let (loaded, _) = Options::load_options_file(&String::from_utf8(bytes).unwrap()).unwrap();
    let factory = loaded.sst_partitioner_factory.expect("the partitioner read back");
    assert_eq!(factory.name(), "SstPartitionerFixedPrefixFactory:4");
    let mut o = Options::default();
    let e = o.set("sst_partitioner_factory", "MyPartitioner").unwrap_err();
    assert!(e.to_string().contains("set ColumnFamilyOptions::sst_partitioner_factory in code"), "{e}");
}
