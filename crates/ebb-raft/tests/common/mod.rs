//! What the scenario files share: opening a store, making entries, and
//! reaching the database underneath to damage it.

#![allow(dead_code)] // each scenario file uses a part

use std::io::SeekFrom;
use std::path::Path;
use std::sync::Arc;

use ebb::fs::MemFs;

use ebb_raft::{LogStore, Request, SnapshotFile, StateMachine, TypeConfig};
use openraft::storage::RaftStateMachine;
use openraft::{BasicNode, Entry, EntryPayload, LogId, Membership};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

pub fn open(path: &Path) -> (LogStore, StateMachine) {
    ebb_raft::open(path, ebb::Options::default()).expect("open the raft store")
}

/// The database directory on an in-memory filesystem.
pub const MEM_DB: &str = "/raft";

/// Opens the store at [`MEM_DB`] on `fs`, an in-memory filesystem a test
/// can cut the power of.
pub fn open_on(fs: &MemFs) -> (LogStore, StateMachine) {
    let mut options = ebb::Options::default();
    options.fs = Arc::new(fs.clone());
    ebb_raft::open(MEM_DB, options).expect("open the raft store")
}

pub fn log_id(term: u64, index: u64) -> LogId<u64> {
    openraft::testing::log_id(term, 1, index)
}

pub fn blank(term: u64, index: u64) -> Entry<TypeConfig> {
    Entry { log_id: log_id(term, index), payload: EntryPayload::Blank }
}

pub fn normal(term: u64, index: u64, request: Request) -> Entry<TypeConfig> {
    Entry { log_id: log_id(term, index), payload: EntryPayload::Normal(request) }
}

pub fn membership(term: u64, index: u64, voters: &[u64]) -> Entry<TypeConfig> {
    let config = vec![voters.iter().copied().collect()];
    Entry {
        log_id: log_id(term, index),
        payload: EntryPayload::Membership(Membership::<u64, BasicNode>::new(config, ())),
    }
}

pub fn set(key: &str, value: &str) -> Request {
    Request::Set { key: key.into(), value: value.into() }
}

/// Opens the database under a closed store as a plain Ebb database (every
/// family listed) and replaces the value under `key` in `family` (`None`
/// if there is none) by what `damage` makes of it (`None`: deleted).
pub fn rewrite_raw(path: &Path, family: &str, key: &[u8], damage: impl FnOnce(Option<Vec<u8>>) -> Option<Vec<u8>>) {
    let options = ebb::Options::default();
    let names = ebb::Db::list_column_families(path, &options).expect("list families");
    let families: Vec<(&str, ebb::ColumnFamilyOptions)> =
        names.iter().map(|n| (n.as_str(), options.cf_options())).collect();
    let db = ebb::Db::open_cf(path, options, &families).expect("open as plain Ebb");
    let cf = db.cf_handle(family).expect("family exists");
    match damage(db.get_cf(&cf, key).expect("get")) {
        Some(value) => db.put_cf(&cf, key, &value).expect("put"),
        None => db.delete_cf(&cf, key).expect("delete"),
    }
    db.close().expect("close");
}

/// The bytes of a snapshot's data, read from its start.
pub async fn snapshot_bytes(file: &mut SnapshotFile) -> Vec<u8> {
    file.seek(SeekFrom::Start(0)).await.expect("seek to the start");
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).await.expect("read the snapshot");
    bytes
}

/// `bytes` received into a new snapshot file of `sm`, as openraft's
/// transport writes them (in chunks of `chunk` bytes, then shut down).
pub async fn receive(sm: &mut StateMachine, bytes: &[u8], chunk: usize) -> std::io::Result<Box<SnapshotFile>> {
    let mut file = sm.begin_receiving_snapshot().await.map_err(std::io::Error::other)?;
    for piece in bytes.chunks(chunk.max(1)) {
        file.write_all(piece).await?;
    }
    file.shutdown().await?;
    Ok(file)
}
