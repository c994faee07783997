//! The operator's view below reads: `get_all_key_versions` lists every
//! stored version (RocksDB's `GetAllKeyVersions`), and `verify_checksum`
//! reads every table whole (RocksDB's `VerifyChecksum`).

mod common;

use std::path::Path;

use common::tiny_options;
use ebb::fs::{FileSystem, MemFs};
use ebb::{Db, EntryType};

#[test]
fn every_version_is_listed_newest_first_from_memtables_and_tables() {
    let fs = MemFs::new();
    let mut o = common::manual_options(&fs);
    o.merge_operator = Some(ebb::merge_operator::from_name("stringappend").unwrap());
    let db = Db::open("/db", o).unwrap();
    db.put(b"a", b"1").unwrap();
    db.put(b"b", b"1").unwrap();
    db.flush(true).unwrap();
    let snapshot = db.snapshot();
    db.put(b"a", b"2").unwrap();
    db.delete(b"b").unwrap();
    db.merge(b"c", b"x").unwrap();
    db.single_delete(b"d").unwrap();
    let cf = db.cf_handle("default").unwrap();
    let all = db.get_all_key_versions(&cf, None, None, 100).unwrap();
    let got: Vec<(&[u8], &[u8], EntryType)> =
        all.iter().map(|v| (v.user_key.as_slice(), v.value.as_slice(), v.entry_type)).collect();
    assert_eq!(
        got,
        vec![
            (&b"a"[..], &b"2"[..], EntryType::Put),
            (b"a", b"1", EntryType::Put),
            (b"b", b"", EntryType::Delete),
            (b"b", b"1", EntryType::Put),
            (b"c", b"x", EntryType::Merge),
            (b"d", b"", EntryType::SingleDelete),
        ]
    );
    assert!(all.windows(2).all(|w| w[0].user_key != w[1].user_key || w[0].sequence > w[1].sequence));
    let some = db.get_all_key_versions(&cf, Some(b"b"), Some(b"d"), 100).unwrap();
    assert_eq!(some.iter().map(|v| v.user_key.as_slice()).collect::<Vec<_>>(), vec![&b"b"[..], b"b", b"c"]);
    assert_eq!(db.get_all_key_versions(&cf, None, None, 2).unwrap().len(), 2);
    drop(snapshot);
}

#[test]
fn verify_checksum_reads_every_table_and_names_a_damaged_one() {
    let fs = MemFs::new();
    let o = tiny_options(Some(fs.clone()));
    let db = Db::open("/db", o).unwrap();
    for i in 0..2000u32 {
        db.put(format!("key{i:05}").as_bytes(), &[b'v'; 50]).unwrap();
    }
    db.wait_for_compact().unwrap();
    let tables = db.verify_checksum().unwrap();
    let on_disk: Vec<String> =
        fs.list_dir(Path::new("/db")).unwrap().into_iter().filter(|n| n.ends_with(".sst")).collect();
    assert_eq!(tables, on_disk.len());
    // Damage the middle of one table's data.
    let victim = Path::new("/db").join(&on_disk[0]);
    let mut bytes = fs.file_bytes(&victim).unwrap();
    let mid = bytes.len() / 3;
    bytes[mid] ^= 0x55;
    fs.set_file_bytes(&victim, &bytes).unwrap();
    let e = db.verify_checksum().unwrap_err();
    assert!(e.is_corruption() && e.to_string().contains(&on_disk[0]), "{e}");
}
