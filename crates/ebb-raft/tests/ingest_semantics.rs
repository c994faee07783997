//! What the snapshot install relies on in Ebb's ingestion: a range
//! deletion written into an ingested table deletes the older data in its
//! range but not the table's own keys (they share its sequence number),
//! whether the table is ingested over data (a global sequence number),
//! into an empty family (sequence 0), or with a snapshot held; and it
//! stays so after flushes, compactions and a reopen.

use ebb::{Db, IngestExternalFileOptions, Options, SstFileWriter};

fn options() -> Options {
    Options::default().create_if_missing(true)
}

/// A table deleting `["", "z")` and putting `b` and `x`.
fn replacing_table(path: &std::path::Path) {
    let mut writer = SstFileWriter::create(&options());
    writer.open(path).unwrap();
    writer.delete_range(b"", b"z").unwrap();
    writer.put(b"b", b"new b").unwrap();
    writer.put(b"x", b"new x").unwrap();
    writer.finish().unwrap();
}

fn contents(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iterator(ebb::ReadOptions::default(), ebb::IteratorMode::Start).map(|item| item.unwrap()).collect()
}

fn expected() -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![(b"b".to_vec(), b"new b".to_vec()), (b"x".to_vec(), b"new x".to_vec())]
}

fn check_through_compaction_and_reopen(db: Db, path: &std::path::Path) {
    assert_eq!(contents(&db), expected(), "right after the ingestion");
    db.flush(true).unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(contents(&db), expected(), "after a full compaction");
    drop(db);
    let db = Db::open(path, options()).unwrap();
    assert_eq!(contents(&db), expected(), "after a reopen");
    db.compact_range(None, None).unwrap();
    assert_eq!(contents(&db), expected(), "after a compaction of the reopened database");
}

#[test]
fn a_range_deletion_in_an_ingested_table_spares_the_tables_own_keys() {
    for held_snapshot in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = Db::open(&path, options()).unwrap();
        for key in [&b"a"[..], b"b", b"c"] {
            db.put(key, b"old").unwrap();
        }
        db.flush(true).unwrap();
        for key in [&b"b"[..], b"d", b"x"] {
            db.put(key, b"old, in the memtable").unwrap();
        }
        let table = dir.path().join("replacing.sst");
        replacing_table(&table);
        let snapshot = held_snapshot.then(|| db.snapshot());
        let options = IngestExternalFileOptions { move_files: true, ..Default::default() };
        db.ingest_external_file(&[&table], &options).unwrap();
        if let Some(snapshot) = &snapshot {
            let old: Vec<_> = db.iterator(snapshot.read_options(), ebb::IteratorMode::Start).collect();
            assert_eq!(old.len(), 5, "the snapshot still sees the old keys");
        }
        drop(snapshot);
        check_through_compaction_and_reopen(db, &path);
    }
}

#[test]
fn a_range_deletion_in_a_table_ingested_into_an_empty_database_spares_its_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path, options()).unwrap();
    let table = dir.path().join("replacing.sst");
    replacing_table(&table);
    db.ingest_external_file(&[&table], &IngestExternalFileOptions::default()).unwrap();
    check_through_compaction_and_reopen(db, &path);
}
