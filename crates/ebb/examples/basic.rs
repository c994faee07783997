//! The README's example ("Use"), word for word after this comment
//! (tests/readme.rs checks that). `cargo test` runs it (Cargo.toml: `test =
//! true`, `harness = false`) and `cargo run -p ebb --example basic` does too.

use ebb::{
    merge_operator, prefix, BackupEngine, Checkpoint, Db, IteratorMode, Options, ReadOptions, RestoreOptions,
    TransactionDb, TransactionDbOptions, TransactionOptions, WriteBatch, WriteOptions,
};

fn main() -> ebb::Result<()> {
    let mut opts = Options::default();
    opts.create_if_missing = true;
    // Merges add to counters without reading them first.
    opts.merge_operator = Some(merge_operator::from_name("uint64add")?);
    // Keys' first 5 bytes form a prefix that bloom filters hold.
    opts.prefix_extractor = Some(prefix::fixed(5));
    // A database is a directory that outlives the process: this run's own,
    // destroyed at the end, so the example runs again from scratch.
    let path = std::env::temp_dir().join(format!("ebb-example-{}", std::process::id()));
    let db = Db::open(&path, opts.clone())?;

    db.put(b"apple", b"red")?;
    let mut batch = WriteBatch::new();
    batch.put(b"banana", b"yellow");
    batch.delete(b"apple");
    db.write_opt(&batch, &WriteOptions { sync: true, disable_wal: false })?;
    assert_eq!(db.get(b"banana")?, Some(b"yellow".to_vec()));

    db.merge(b"visits", &1u64.to_le_bytes())?;
    db.merge(b"visits", &2u64.to_le_bytes())?;
    assert_eq!(db.get(b"visits")?, Some(3u64.to_le_bytes().to_vec()));

    db.put(b"fig", b"purple")?;
    db.delete_range(b"f", b"g")?; // every key from "f" up to, not including, "g"
    assert_eq!(db.get(b"fig")?, None);

    db.put(b"user:1:name", b"ada")?;
    db.put(b"user:2:name", b"bob")?;
    let users: Vec<_> = db.prefix_iterator(b"user:").collect::<ebb::Result<_>>()?;
    assert_eq!(users.len(), 2);

    let snapshot = db.snapshot();
    db.put(b"cherry", b"dark red")?;
    assert_eq!(snapshot.get(b"cherry")?, None);

    for entry in db.iterator(ReadOptions::default(), IteratorMode::Start) {
        let (key, value) = entry?;
        println!("{} = {}", String::from_utf8_lossy(&key), String::from_utf8_lossy(&value));
    }
    drop(snapshot);

    // Transactions (docs/transactions.md): a pessimistic one locks the keys
    // it reads for update or writes; no one else sees its writes until it
    // commits, and then all of them at once.
    let txn_path = path.with_extension("txn");
    let txn_db = TransactionDb::open(&txn_path, opts.clone(), TransactionDbOptions::default())?;
    txn_db.put(b"alice", b"100")?;
    let mut txn = txn_db.begin_transaction(&WriteOptions::default(), &TransactionOptions::default());
    assert_eq!(txn.get_for_update(b"alice")?, Some(b"100".to_vec())); // locked until the commit
    txn.put(b"alice", b"90")?;
    txn.put(b"bob", b"10")?;
    assert_eq!(txn_db.get(b"bob")?, None);
    txn.commit()?;
    assert_eq!(txn_db.get(b"bob")?, Some(b"10".to_vec()));
    drop(txn);
    txn_db.close()?;
    Db::destroy(&txn_path, &opts)?;

    // An openable copy made while the database runs: tables hard-linked.
    let copy_path = path.with_extension("checkpoint");
    Checkpoint::create(&db, &copy_path)?;
    let copy = Db::open(&copy_path, opts.clone())?;
    assert_eq!(copy.get(b"cherry")?, Some(b"dark red".to_vec()));
    copy.close()?;
    Db::destroy(&copy_path, &opts)?;

    // Incremental backups (tables already backed up are not copied again),
    // checked and restored.
    let backup_dir = path.with_extension("backups");
    let mut backups = BackupEngine::open_dir(&backup_dir)?;
    let id = backups.create_new_backup(&db, true)?;
    backups.verify_backup(id)?;
    backups.restore_db_from_backup(id, &copy_path, &RestoreOptions::default())?;
    assert_eq!(Db::open(&copy_path, opts.clone())?.get(b"banana")?, Some(b"yellow".to_vec()));
    Db::destroy(&copy_path, &opts)?;
    drop(backups);
    let _ = std::fs::remove_dir_all(&backup_dir);

    db.close()?;
    Db::destroy(&path, &opts)
}
