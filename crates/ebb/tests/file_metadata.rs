//! Live file metadata, column family metadata, approximate sizes and
//! memtable stats, and the properties of tables in a key range (RocksDB's
//! `GetLiveFilesMetaData`, `GetColumnFamilyMetaData`, `GetApproximateSizes`,
//! `GetApproximateMemTableStats`, `GetPropertiesOfTablesInRange`), checked
//! against the files on disk and the keys written; bad ranges are errors.

mod common;

use std::collections::BTreeSet;

use ebb::comparator;
use ebb::{ColumnFamilyOptions, Db, Error, Options, SizeApproximationOptions};

const VALUE: usize = 1000;

fn options() -> Options {
    let mut o = Options::default();
    o.create_if_missing = true;
    o.write_buffer_size = 64 << 20;
    o.disable_auto_compactions = true;
    o.block_size = 4096;
    o.compression = ebb::CompressionType::None;
    o
}

fn key(range: char, i: u32) -> Vec<u8> {
    format!("{range}{i:05}").into_bytes()
}

/// Writes `n` keys of range `range` (values of [`VALUE`] bytes), then
/// flushes them into a table of their own.
fn write_range(db: &Db, range: char, n: u32, flush: bool) {
    for i in 0..n {
        db.put(&key(range, i), &[range as u8; VALUE]).unwrap();
    }
    if flush {
        db.flush(true).unwrap();
    }
}

const FILES: SizeApproximationOptions = SizeApproximationOptions { include_memtables: false, include_files: true };
const MEMS: SizeApproximationOptions = SizeApproximationOptions { include_memtables: true, include_files: false };

#[test]
fn live_files_match_the_files_on_disk_and_the_keys_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    let other = db.create_column_family("other", ColumnFamilyOptions::from(&options())).unwrap();
    for (i, range) in ['a', 'b', 'c'].into_iter().enumerate() {
        write_range(&db, range, 200 + 100 * i as u32, true);
    }
    db.put_cf(&other, b"x1", b"1").unwrap();
    db.put_cf(&other, b"x9", b"9").unwrap();
    db.delete_cf(&other, b"x5").unwrap();
    db.flush_cf(&other, true).unwrap();

    let live = db.get_live_files_metadata().unwrap();
    assert_eq!(live.len(), 4);
    let mut seqs = BTreeSet::new();
    for f in &live {
        let path = f.db_path.join(f.name.trim_start_matches('/'));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), f.size, "{path:?}");
        assert_eq!(f.name, format!("/{:06}.sst", f.file_number));
        assert_eq!(f.level, 0);
        assert!(!f.being_compacted);
        assert!(f.smallest_seqno <= f.largest_seqno);
        // Sequence ranges of separate flushes do not overlap.
        assert!(seqs.insert((f.smallest_seqno, f.largest_seqno)));
    }
    let of = |range: &[u8]| live.iter().find(|f| f.smallest_key.starts_with(range)).unwrap();
    for (i, range) in ['a', 'b', 'c'].into_iter().enumerate() {
        let f = of(&[range as u8]);
        let n = 200 + 100 * i as u32;
        assert_eq!(f.column_family_name, "default");
        assert_eq!((f.smallest_key.clone(), f.largest_key.clone()), (key(range, 0), key(range, n - 1)));
        assert_eq!((f.num_entries, f.num_deletions), (u64::from(n), 0));
        assert_eq!(f.largest_seqno - f.smallest_seqno + 1, u64::from(n));
    }
    let x = of(b"x");
    assert_eq!(x.column_family_name, "other");
    assert_eq!((x.smallest_key.as_slice(), x.largest_key.as_slice()), (&b"x1"[..], &b"x9"[..]));
    assert_eq!((x.num_entries, x.num_deletions), (3, 1));

    // The family's view: the same files, by level, with their sizes summed.
    let meta = db.get_column_family_metadata().unwrap();
    assert_eq!(meta.name, "default");
    assert_eq!(meta.file_count, 3);
    assert_eq!(meta.levels.len(), options().num_levels);
    assert_eq!(meta.size, live.iter().filter(|f| f.column_family_name == "default").map(|f| f.size).sum::<u64>());
    db.compact_range(None, None).unwrap();
    let meta = db.get_column_family_metadata().unwrap();
    let bottom = meta.levels.iter().rposition(|l| !l.files.is_empty()).unwrap();
    assert!(bottom > 0, "a full compaction moves the tables down");
    assert_eq!(meta.levels[0].files.len(), 0);
    let files = &meta.levels[bottom].files;
    assert!(files.windows(2).all(|w| w[0].largest_key < w[1].smallest_key), "a level's files in key order");
    assert_eq!(meta.levels[bottom].size, files.iter().map(|f| f.size).sum::<u64>());
    assert_eq!(files.iter().map(|f| f.num_entries).sum::<u64>(), 200 + 300 + 400);
    let other_meta = db.get_column_family_metadata_cf(&other).unwrap();
    assert_eq!((other_meta.name.as_str(), other_meta.file_count), ("other", 1));
}

#[test]
fn approximate_sizes_follow_the_bytes_of_each_range() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for range in ['a', 'b', 'c', 'd'] {
        write_range(&db, range, 1000, true);
    }
    let live = db.get_live_files_metadata().unwrap();
    let size_of = |range: u8| live.iter().find(|f| f.smallest_key[0] == range).unwrap().size;
    let sizes = db
        .get_approximate_sizes(
            &[
                (b"a", b"b"),      // table a whole
                (b"b", b"d"),      // tables b and c whole
                (b"e", b"z"),      // nothing
                (b"a", b"a00500"), // half of table a
                (b"", b"zz"),      // everything
                (b"c", b"c"),      // empty
            ],
            &FILES,
        )
        .unwrap();
    assert_eq!(sizes[0], size_of(b'a'));
    assert_eq!(sizes[1], size_of(b'b') + size_of(b'c'));
    assert_eq!(sizes[2], 0);
    let half = size_of(b'a') / 2;
    assert!(sizes[3] > half / 2 && sizes[3] < half * 3 / 2, "half of table a: {} of {}", sizes[3], size_of(b'a'));
    assert_eq!(sizes[4], live.iter().map(|f| f.size).sum::<u64>());
    assert_eq!(sizes[5], 0);

    // Unflushed writes count only with the memtables included.
    write_range(&db, 'm', 2000, false);
    let range: &[(&[u8], &[u8])] = &[(b"m", b"n"), (b"m", b"m01000")];
    assert_eq!(db.get_approximate_sizes(range, &FILES).unwrap(), vec![0, 0]);
    let in_mems = db.get_approximate_sizes(range, &MEMS).unwrap();
    let written = 2000 * (VALUE as u64 + 6);
    assert!(in_mems[0] > written / 2 && in_mems[0] < written * 2, "{in_mems:?} for {written} bytes written");
    assert!(in_mems[1] > in_mems[0] / 4 && in_mems[1] < in_mems[0] * 3 / 4, "half of them: {in_mems:?}");
    let both = SizeApproximationOptions { include_memtables: true, include_files: true };
    let all = db.get_approximate_sizes(&[(b"", b"zz")], &both).unwrap()[0];
    assert!(all > sizes[4] + written / 2, "tables and memtables: {all}");

    let cf = db.cf_handle("default").unwrap();
    let (count, bytes) = db.get_approximate_memtable_stats_cf(&cf, b"m", b"n").unwrap();
    assert!((1000..=4000).contains(&count), "about 2000 entries: {count}");
    assert_eq!(bytes, in_mems[0]);
    let (half_count, _) = db.get_approximate_memtable_stats_cf(&cf, b"m00500", b"m01500").unwrap();
    assert!((250..=2000).contains(&half_count), "about 1000 entries: {half_count}");
    assert_eq!(db.get_approximate_memtable_stats_cf(&cf, b"x", b"y").unwrap(), (0, 0));
}

#[test]
fn properties_of_tables_in_range_name_the_tables_a_range_reaches() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    for range in ['a', 'b', 'c', 'd'] {
        write_range(&db, range, 100, true);
    }
    let cf = db.cf_handle("default").unwrap();
    let live = db.get_live_files_metadata().unwrap();
    let path_of = |range: u8| {
        let f = live.iter().find(|f| f.smallest_key[0] == range).unwrap();
        f.db_path.join(f.name.trim_start_matches('/')).display().to_string()
    };
    let found = db.get_properties_of_tables_in_range(&cf, &[(b"a00050", b"a1"), (b"c", b"c00001")]).unwrap();
    let names: BTreeSet<_> = found.keys().cloned().collect();
    assert_eq!(names, BTreeSet::from([path_of(b'a'), path_of(b'c')]));
    assert!(found.values().all(|p| p.num_entries == 100));
    // A limit is exclusive: a range ending at a table's first key misses it.
    assert!(db.get_properties_of_tables_in_range(&cf, &[(b"a1", b"b00000")]).unwrap().is_empty());
    assert_eq!(db.get_properties_of_tables_in_range(&cf, &[(b"", b"zz")]).unwrap().len(), 4);
}

/// `r` is an `InvalidArgument` whose message holds `words`.
fn invalid<T>(r: ebb::Result<T>, words: &str) {
    match r {
        Err(e @ Error::InvalidArgument(_)) => assert!(e.to_string().contains(words), "{e}"),
        Err(e) => panic!("not an invalid argument: {e}"),
        Ok(_) => panic!("accepted"),
    }
}

#[test]
fn bad_ranges_and_options_are_errors_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    write_range(&db, 'a', 10, true);
    let cf = db.cf_handle("default").unwrap();
    invalid(db.get_approximate_sizes(&[(b"a", b"b"), (b"z", b"a")], &FILES), "range 1 ends before it starts");
    let none = SizeApproximationOptions { include_memtables: false, include_files: false };
    invalid(db.get_approximate_sizes(&[(b"a", b"b")], &none), "nothing is counted");
    invalid(db.get_approximate_memtable_stats_cf(&cf, b"z", b"a"), "ends before it starts");
    invalid(db.get_properties_of_tables_in_range(&cf, &[(b"z", b"a")]), "ends before it starts");

    // In a reverse-ordered family, a range runs from the larger key.
    let mut rev = ColumnFamilyOptions::from(&options());
    rev.comparator = Some(comparator::reverse_bytewise());
    let rev = db.create_column_family("rev", rev).unwrap();
    for i in 0..100u32 {
        db.put_cf(&rev, &key('r', i), &[b'r'; VALUE]).unwrap();
    }
    db.flush_cf(&rev, true).unwrap();
    let size = db.get_approximate_sizes_cf(&rev, &[(b"s", b"r")], &FILES).unwrap()[0];
    assert_eq!(size, db.get_column_family_metadata_cf(&rev).unwrap().size);
    invalid(db.get_approximate_sizes_cf(&rev, &[(b"r", b"s")], &FILES), "ends before it starts");

    // A dropped family is an error, not a panic.
    db.drop_column_family(&rev).unwrap();
    assert!(db.get_column_family_metadata_cf(&rev).is_err());
    assert!(db.get_approximate_sizes_cf(&rev, &[(b"s", b"r")], &FILES).is_err());
}
