//! The README's example, compiled and run by `cargo test` (as an example) so it
//! cannot drift from the API.

use ebb::{Db, IteratorMode, Options, ReadOptions, WriteBatch, WriteOptions};

fn main() -> ebb::Result<()> {
    let dir = tempfile::tempdir().map_err(|e| ebb::Error::io("tempdir", "/tmp", e))?;
    let mut opts = Options::default();
    opts.create_if_missing = true;
    let db = Db::open(dir.path().join("example"), opts)?;

    db.put(b"apple", b"red")?;
    let mut batch = WriteBatch::new();
    batch.put(b"banana", b"yellow");
    batch.delete(b"apple");
    db.write_opt(&batch, &WriteOptions { sync: true, disable_wal: false })?;
    assert_eq!(db.get(b"banana")?, Some(b"yellow".to_vec()));

    let snapshot = db.snapshot();
    db.put(b"cherry", b"dark red")?;
    assert_eq!(snapshot.get(b"cherry")?, None);

    for entry in db.iterator(ReadOptions::default(), IteratorMode::Start) {
        let (key, value) = entry?;
        println!("{} = {}", String::from_utf8_lossy(&key), String::from_utf8_lossy(&value));
    }
    drop(snapshot);
    db.close()
}
