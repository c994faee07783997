//! The OPTIONS file records every column family and is rewritten when
//! families or options change; `Options::load_options_file` reads it back.

mod common;

use std::path::Path;

use ebb::fs::{FileSystem, MemFs};
use ebb::{Db, Options};

/// The newest OPTIONS file's text.
fn newest_options(fs: &MemFs) -> String {
    let mut names: Vec<String> =
        fs.list_dir(Path::new("/db")).unwrap().into_iter().filter(|n| n.starts_with("OPTIONS-")).collect();
    names.sort();
    String::from_utf8(fs.file_bytes(&Path::new("/db").join(names.last().unwrap())).unwrap()).unwrap()
}

#[test]
fn the_options_file_lists_every_family_as_it_changes() {
    let fs = MemFs::new();
    let o = common::tiny_options(Some(fs.clone()));
    let db = Db::open("/db", o.clone()).unwrap();
    let mut big = o.clone();
    big.write_buffer_size = 123_456;
    db.create_column_family("big", &big).unwrap();
    let (_, families) = Options::load_options_file(&newest_options(&fs)).unwrap();
    assert_eq!(
        families.iter().map(|(n, o)| (n.as_str(), o.write_buffer_size)).collect::<Vec<_>>(),
        vec![("big", 123_456)]
    );

    db.set_options(&[("write_buffer_size", "65536")]).unwrap();
    let (default, _) = Options::load_options_file(&newest_options(&fs)).unwrap();
    assert_eq!(default.write_buffer_size, 65_536);

    let big_cf = db.cf_handle("big").unwrap();
    db.drop_column_family(&big_cf).unwrap();
    let (_, families) = Options::load_options_file(&newest_options(&fs)).unwrap();
    assert!(families.is_empty());
    // Only the newest OPTIONS file stays.
    let count = fs.list_dir(Path::new("/db")).unwrap().iter().filter(|n| n.starts_with("OPTIONS-")).count();
    assert_eq!(count, 1);

    // Reopening with what the file records opens every family.
    db.create_column_family("again", &big).unwrap();
    drop(big_cf);
    drop(db);
    let (mut default, families) = Options::load_options_file(&newest_options(&fs)).unwrap();
    default.fs = o.fs.clone();
    let db = Db::open_cf("/db", default, &families.iter().map(|(n, f)| (n.as_str(), f.clone())).collect::<Vec<_>>())
        .unwrap();
    assert_eq!(db.cf_options(&db.cf_handle("again").unwrap()).write_buffer_size, 123_456);
}
