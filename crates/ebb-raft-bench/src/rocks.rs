//! RocksDB-backed stores for openraft, on the `rocksdb` crate (RocksDB
//! 10.4.2, as ebb-bench's peer): the anchor Ebb's store is measured
//! against.
//!
//! The layout is openraft-rocksstore's: the log in a `logs` family keyed
//! by the 8-byte big-endian index, the vote and the last purged id in
//! `meta`, the state machine in memory with its snapshot in `sm_meta`
//! (rebuilt from the snapshot at open). Values are encoded as ebb-raft
//! encodes them (a version byte and postcard), where rocksstore uses
//! JSON, so that both engines store the same bytes. Two write patterns:
//! - [`Pattern::RocksStore`], rocksstore's own: one `put` per entry, then
//!   `flush_wal(true)` (an fsync of the WAL) per append, truncation and
//!   vote; a purge writes the last purged id and a range deletion without
//!   syncing;
//! - [`Pattern::Batch`], ebb-raft's: every call one `WriteBatch` written
//!   with `sync: true`, a purge included.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::io::Cursor;
use std::ops::{Bound, RangeBounds};
use std::path::Path;
use std::sync::Arc;

use ebb_raft::{Operation, Request, Response};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{
    AnyError, BasicNode, Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, OptionalSend, RaftLogReader,
    RaftSnapshotBuilder, SnapshotMeta, StorageError, StorageIOError, StoredMembership, Vote,
};
use parking_lot::RwLock;
use rocksdb::{ColumnFamilyDescriptor, Direction, IteratorMode, Options, ReadOptions, WriteBatch, WriteOptions, DB};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

openraft::declare_raft_types!(
    /// The RocksDB stores' types: ebb-raft's requests and responses, the
    /// snapshot in memory (rocksstore's choice).
    pub RocksConfig:
        D = Request,
        R = Response,
        NodeId = u64,
        Node = BasicNode,
        Entry = openraft::Entry<RocksConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

type StoreError = StorageError<u64>;

fn io_error(subject: ErrorSubject<u64>, verb: ErrorVerb, e: &(impl std::error::Error + 'static)) -> StoreError {
    StorageIOError::new(subject, verb, AnyError::new(e)).into()
}

fn write_err(e: &(impl std::error::Error + 'static)) -> StoreError {
    io_error(ErrorSubject::Logs, ErrorVerb::Write, e)
}

fn read_err(e: &(impl std::error::Error + 'static)) -> StoreError {
    io_error(ErrorSubject::Logs, ErrorVerb::Read, e)
}

/// The version byte and postcard, as ebb-raft stores values.
fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, postcard::Error> {
    postcard::to_extend(value, vec![1u8])
}

fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, postcard::Error> {
    match bytes.split_first() {
        Some((1, rest)) => postcard::from_bytes(rest),
        _ => Err(postcard::Error::DeserializeBadEncoding),
    }
}

const LOGS: &str = "logs";
const META: &str = "meta";
const SM_META: &str = "sm_meta";

/// How the log store writes (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pattern {
    RocksStore,
    Batch,
}

/// Opens (creating) the database at `path` with RocksDB's default options
/// (which Ebb's defaults follow), and returns the log store and the state
/// machine.
pub fn open(path: &Path, pattern: Pattern) -> Result<(RocksLog, RocksSm), String> {
    let mut options = Options::default();
    options.create_if_missing(true);
    options.create_missing_column_families(true);
    let families = [LOGS, META, SM_META].map(|name| ColumnFamilyDescriptor::new(name, Options::default()));
    let db = Arc::new(DB::open_cf_descriptors(&options, path, families).map_err(|e| e.to_string())?);
    let sm = RocksSm::open(Arc::clone(&db))?;
    Ok((RocksLog { db, pattern }, sm))
}

/// The log store.
#[derive(Clone)]
pub struct RocksLog {
    db: Arc<DB>,
    pattern: Pattern,
}

fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

impl RocksLog {
    fn cf(&self, name: &str) -> &rocksdb::ColumnFamily {
        // The three families are created at open.
        self.db.cf_handle(name).expect("family created at open")
    }

    fn get_meta<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StoreError> {
        match self.db.get_cf(self.cf(META), key).map_err(|e| read_err(&e))? {
            None => Ok(None),
            Some(bytes) => decode(&bytes).map(Some).map_err(|e| read_err(&e)),
        }
    }

    fn synced() -> WriteOptions {
        let mut options = WriteOptions::default();
        options.set_sync(true);
        options
    }

    fn sync_wal(&self) -> Result<(), StoreError> {
        self.db.flush_wal(true).map_err(|e| write_err(&e))
    }
}

impl RaftLogReader<RocksConfig> for RocksLog {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<RocksConfig>>, StoreError> {
        let start = match range.start_bound() {
            Bound::Included(&i) => i,
            Bound::Excluded(&i) => i.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let mut entries = Vec::new();
        let from = index_key(start);
        let it = self.db.iterator_cf_opt(
            self.cf(LOGS),
            ReadOptions::default(),
            IteratorMode::From(&from, Direction::Forward),
        );
        for item in it {
            let (key, value) = item.map_err(|e| read_err(&e))?;
            let index = u64::from_be_bytes(key.as_ref().try_into().map_err(|e| read_err(&e))?);
            if !range.contains(&index) {
                break;
            }
            entries.push(decode(&value).map_err(|e| read_err(&e))?);
        }
        Ok(entries)
    }
}

impl RaftLogStorage<RocksConfig> for RocksLog {
    type LogReader = RocksLog;

    async fn get_log_state(&mut self) -> Result<LogState<RocksConfig>, StoreError> {
        let last = match self.db.iterator_cf(self.cf(LOGS), IteratorMode::End).next() {
            None => None,
            Some(item) => {
                let (_, value) = item.map_err(|e| read_err(&e))?;
                let entry: Entry<RocksConfig> = decode(&value).map_err(|e| read_err(&e))?;
                Some(entry.log_id)
            }
        };
        let last_purged: Option<LogId<u64>> = self.get_meta("last_purged_log_id")?;
        Ok(LogState { last_purged_log_id: last_purged, last_log_id: last.or(last_purged) })
    }

    async fn get_log_reader(&mut self) -> RocksLog {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StoreError> {
        let value = encode(vote).map_err(|e| write_err(&e))?;
        match self.pattern {
            Pattern::RocksStore => {
                self.db.put_cf(self.cf(META), "vote", value).map_err(|e| write_err(&e))?;
                self.sync_wal()
            }
            Pattern::Batch => {
                let mut batch = WriteBatch::default();
                batch.put_cf(self.cf(META), "vote", value);
                self.db.write_opt(batch, &Self::synced()).map_err(|e| write_err(&e))
            }
        }
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StoreError> {
        self.get_meta("vote")
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<RocksConfig>) -> Result<(), StoreError>
    where
        I: IntoIterator<Item = Entry<RocksConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        match self.pattern {
            Pattern::RocksStore => {
                for entry in entries {
                    let value = encode(&entry).map_err(|e| write_err(&e))?;
                    self.db.put_cf(self.cf(LOGS), index_key(entry.log_id.index), value).map_err(|e| write_err(&e))?;
                }
                self.sync_wal()?;
            }
            Pattern::Batch => {
                let mut batch = WriteBatch::default();
                for entry in entries {
                    let value = encode(&entry).map_err(|e| write_err(&e))?;
                    batch.put_cf(self.cf(LOGS), index_key(entry.log_id.index), value);
                }
                self.db.write_opt(batch, &Self::synced()).map_err(|e| write_err(&e))?;
            }
        }
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), StoreError> {
        let (from, to) = (index_key(log_id.index), index_key(u64::MAX));
        match self.pattern {
            Pattern::RocksStore => {
                self.db.delete_range_cf(self.cf(LOGS), from, to).map_err(|e| write_err(&e))?;
                self.sync_wal()
            }
            Pattern::Batch => {
                let mut batch = WriteBatch::default();
                batch.delete_range_cf(self.cf(LOGS), from, to);
                self.db.write_opt(batch, &Self::synced()).map_err(|e| write_err(&e))
            }
        }
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), StoreError> {
        let value = encode(&log_id).map_err(|e| write_err(&e))?;
        let (from, to) = (index_key(0), index_key(log_id.index.saturating_add(1)));
        match self.pattern {
            Pattern::RocksStore => {
                self.db.put_cf(self.cf(META), "last_purged_log_id", value).map_err(|e| write_err(&e))?;
                self.db.delete_range_cf(self.cf(LOGS), from, to).map_err(|e| write_err(&e))
            }
            Pattern::Batch => {
                let mut batch = WriteBatch::default();
                batch.put_cf(self.cf(META), "last_purged_log_id", value);
                batch.delete_range_cf(self.cf(LOGS), from, to);
                self.db.write_opt(batch, &Self::synced()).map_err(|e| write_err(&e))
            }
        }
    }
}

/// The state machine: rocksstore's, in memory, persisted by its snapshots.
#[derive(Default, Clone, Serialize, Deserialize)]
struct SmState {
    last_applied: Option<LogId<u64>>,
    last_membership: StoredMembership<u64, BasicNode>,
    data: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl SmState {
    fn apply(&mut self, op: Operation) -> Option<Vec<u8>> {
        match op {
            Operation::Set { key, value } => self.data.insert(key, value),
            Operation::Delete { key } => self.data.remove(&key),
            Operation::DeleteRange { begin, end } => {
                let doomed: Vec<Vec<u8>> = self.data.range(begin..end).map(|(k, _)| k.clone()).collect();
                for key in doomed {
                    self.data.remove(&key);
                }
                None
            }
        }
    }
}

#[derive(Clone)]
pub struct RocksSm {
    db: Arc<DB>,
    state: Arc<RwLock<SmState>>,
}

type Meta = SnapshotMeta<u64, BasicNode>;

impl RocksSm {
    fn open(db: Arc<DB>) -> Result<Self, String> {
        let sm = RocksSm { db, state: Arc::default() };
        if let Some((_, data)) = sm.current().map_err(|e| e.to_string())? {
            *sm.state.write() = decode(&data).map_err(|e| format!("snapshot: {e}"))?;
        }
        Ok(sm)
    }

    fn cf(&self) -> &rocksdb::ColumnFamily {
        self.db.cf_handle(SM_META).expect("family created at open")
    }

    fn current(&self) -> Result<Option<(Meta, Vec<u8>)>, StoreError> {
        let subject = || ErrorSubject::Snapshot(None);
        match self.db.get_cf(self.cf(), "snapshot").map_err(|e| io_error(subject(), ErrorVerb::Read, &e))? {
            None => Ok(None),
            Some(bytes) => decode(&bytes).map(Some).map_err(|e| io_error(subject(), ErrorVerb::Read, &e)),
        }
    }

    fn save(&self, meta: &Meta, data: &[u8], sync: bool) -> Result<(), StoreError> {
        let subject = || ErrorSubject::Snapshot(Some(meta.signature()));
        let value = encode(&(meta, data)).map_err(|e| io_error(subject(), ErrorVerb::Write, &e))?;
        self.db.put_cf(self.cf(), "snapshot", value).map_err(|e| io_error(subject(), ErrorVerb::Write, &e))?;
        if sync {
            self.db.flush_wal(true).map_err(|e| io_error(subject(), ErrorVerb::Write, &e))?;
        }
        Ok(())
    }
}

impl crate::cluster::LocalRead for RocksSm {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        Ok(self.state.read().data.get(key).cloned())
    }
}

impl RaftSnapshotBuilder<RocksConfig> for RocksSm {
    async fn build_snapshot(&mut self) -> Result<Snapshot<RocksConfig>, StoreError> {
        let state = self.state.read().clone();
        let data = encode(&state).map_err(|e| io_error(ErrorSubject::StateMachine, ErrorVerb::Read, &e))?;
        let snapshot_id = match state.last_applied {
            Some(last) => format!("{last}"),
            None => "none".into(),
        };
        let meta = Meta { last_log_id: state.last_applied, last_membership: state.last_membership, snapshot_id };
        // rocksstore writes the snapshot without syncing.
        self.save(&meta, &data, false)?;
        Ok(Snapshot { meta, snapshot: Box::new(Cursor::new(data)) })
    }
}

impl RaftStateMachine<RocksConfig> for RocksSm {
    type SnapshotBuilder = RocksSm;

    async fn applied_state(&mut self) -> Result<(Option<LogId<u64>>, StoredMembership<u64, BasicNode>), StoreError> {
        let state = self.state.read();
        Ok((state.last_applied, state.last_membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StoreError>
    where
        I: IntoIterator<Item = Entry<RocksConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut state = self.state.write();
        let mut responses = Vec::new();
        for entry in entries {
            state.last_applied = Some(entry.log_id);
            let previous = match entry.payload {
                EntryPayload::Blank => None,
                EntryPayload::Normal(Request::Set { key, value }) => state.apply(Operation::Set { key, value }),
                EntryPayload::Normal(Request::Delete { key }) => state.apply(Operation::Delete { key }),
                EntryPayload::Normal(Request::DeleteRange { begin, end }) => {
                    state.apply(Operation::DeleteRange { begin, end })
                }
                EntryPayload::Normal(Request::Batch(ops)) => {
                    for op in ops {
                        state.apply(op);
                    }
                    None
                }
                EntryPayload::Membership(m) => {
                    state.last_membership = StoredMembership::new(Some(entry.log_id), m);
                    None
                }
            };
            responses.push(Response { previous });
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> RocksSm {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StoreError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(&mut self, meta: &Meta, snapshot: Box<Cursor<Vec<u8>>>) -> Result<(), StoreError> {
        let data = snapshot.into_inner();
        let state: SmState =
            decode(&data).map_err(|e| io_error(ErrorSubject::Snapshot(Some(meta.signature())), ErrorVerb::Read, &e))?;
        self.save(meta, &data, true)?;
        *self.state.write() = state;
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<RocksConfig>>, StoreError> {
        Ok(self.current()?.map(|(meta, data)| Snapshot { meta, snapshot: Box::new(Cursor::new(data)) }))
    }
}
