//! openraft's state machine ([`RaftStateMachine`], [`RaftSnapshotBuilder`])
//! on Ebb: the application's keys and values, and the snapshots of them.
//!
//! Owns two column families: the data (`sm_data`: each application key
//! under itself, its value behind the format version byte) and the state
//! machine metadata (`sm_meta`: the last applied log id and the last
//! membership). An `apply` call is one `WriteBatch` holding the updates of
//! all its entries and the metadata that covers them, so after a crash the
//! metadata names exactly the entries whose updates are there. A snapshot
//! is built by streaming the data into a file of the [`SnapshotStore`];
//! installing one ingests tables that replace the data, the metadata and
//! the current snapshot in one atomic step (`crate::install`).
//!
//! Durability (docs/cluster.md, "Durability"): `apply` does not sync.
//! Ebb recovers a prefix of the writes it was given, so every apply is on
//! disk once a later synced write is (the next append, vote or purge); a
//! crash loses at most applies that the log still holds, which openraft
//! applies again from the last applied id. Building and installing a
//! snapshot sync.
//!
//! Thread-safety: openraft applies and installs from one task (`&mut
//! self`); snapshot builders (clones) read at an Ebb snapshot, so they see
//! the data and the metadata of the same apply.

use std::collections::HashMap;
use std::sync::Arc;

use ebb::{ColumnFamilyHandle, Db, IteratorMode, ReadOptions, WriteBatch};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    BasicNode, Entry, EntryPayload, ErrorSubject, LogId, OptionalSend, RaftSnapshotBuilder, SnapshotMeta,
    StoredMembership,
};

use crate::codec;
use crate::error::{read_error, write_error, StoreError};
use crate::install::Install;
use crate::snapshot::SnapshotWriter;
use crate::snapshot_file::SnapshotFile;
use crate::snapshot_store::SnapshotStore;
use crate::types::{check_key, check_range, check_set, NodeId, Operation, Request, Response, TypeConfig};

/// DO NOT CHANGE: on-disk format. Keys in the state machine metadata family.
const LAST_APPLIED_KEY: &[u8] = b"last_applied";
/// DO NOT CHANGE: on-disk format.
const LAST_MEMBERSHIP_KEY: &[u8] = b"last_membership";

/// The replicated key-value state and its snapshots, in an Ebb database;
/// also its own snapshot builder. Made by [`crate::open`].
#[derive(Clone)]
pub struct StateMachine {
    db: Arc<Db>,
    data: ColumnFamilyHandle,
    meta: ColumnFamilyHandle,
    snapshots: Arc<SnapshotStore>,
}

impl std::fmt::Debug for StateMachine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateMachine").field("path", &self.db.path()).finish()
    }
}

/// The updates of the current `apply` call, which the database does not
/// show yet: what a later request of the same call reads as a key's
/// previous value.
#[derive(Default)]
struct PendingWrites {
    /// A key's value after the call's updates so far; `None` if deleted.
    points: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// Ranges deleted, for keys not in `points`.
    ranges: Vec<(Vec<u8>, Vec<u8>)>,
}

impl PendingWrites {
    /// `Some(value)` if the call's updates decide `key`'s value.
    fn lookup(&self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        if let Some(value) = self.points.get(key) {
            return Some(value.clone());
        }
        let deleted = self.ranges.iter().any(|(begin, end)| begin.as_slice() <= key && key < end.as_slice());
        deleted.then_some(None)
    }

    fn set(&mut self, key: &[u8], value: Option<&[u8]>) {
        self.points.insert(key.to_vec(), value.map(<[u8]>::to_vec));
    }

    fn delete_range(&mut self, begin: &[u8], end: &[u8]) {
        self.points.retain(|key, _| !(begin <= key.as_slice() && key.as_slice() < end));
        self.ranges.push((begin.to_vec(), end.to_vec()));
    }
}

/// One `apply` call's batch, being built.
struct ApplyBatch<'a> {
    machine: &'a StateMachine,
    batch: WriteBatch,
    pending: PendingWrites,
}

impl ApplyBatch<'_> {
    /// Adds `request`'s updates; its response. An operation that the
    /// checks of [`Request::validate`] refuse is skipped.
    fn request(&mut self, request: &Request, log_id: LogId<NodeId>) -> Result<Response, StoreError> {
        let previous = match request {
            Request::Set { key, value } if check_set(key, value).is_ok() => {
                let previous = self.previous(key, log_id)?;
                self.set(key, value);
                previous
            }
            Request::Delete { key } if check_key(key).is_ok() => {
                let previous = self.previous(key, log_id)?;
                self.delete(key);
                previous
            }
            Request::DeleteRange { begin, end } if check_range(begin, end).is_ok() => {
                self.delete_range(begin, end);
                None
            }
            Request::Batch(ops) => {
                for op in ops.iter().filter(|op| op.validate().is_ok()) {
                    match op {
                        Operation::Set { key, value } => self.set(key, value),
                        Operation::Delete { key } => self.delete(key),
                        Operation::DeleteRange { begin, end } => self.delete_range(begin, end),
                    }
                }
                None
            }
            Request::Set { .. } | Request::Delete { .. } | Request::DeleteRange { .. } => None,
        };
        Ok(Response { previous })
    }

    /// `key`'s value before the updates added from here on.
    fn previous(&self, key: &[u8], log_id: LogId<NodeId>) -> Result<Option<Vec<u8>>, StoreError> {
        match self.pending.lookup(key) {
            Some(value) => Ok(value),
            None => self.machine.get(key).map_err(|e| read_error(ErrorSubject::Apply(log_id), &e)),
        }
    }

    fn set(&mut self, key: &[u8], value: &[u8]) {
        self.batch.put_cf(&self.machine.data, key, &codec::encode_raw(value));
        self.pending.set(key, Some(value));
    }

    fn delete(&mut self, key: &[u8]) {
        self.batch.delete_cf(&self.machine.data, key);
        self.pending.set(key, None);
    }

    fn delete_range(&mut self, begin: &[u8], end: &[u8]) {
        self.batch.delete_range_cf(&self.machine.data, begin, end);
        self.pending.delete_range(begin, end);
    }
}

/// The last applied log id and the last membership.
type AppliedState = (Option<LogId<NodeId>>, StoredMembership<NodeId, BasicNode>);

/// Keys and their values, in key order: what [`StateMachine::scan`] reads.
pub type KeyValues = Vec<(Vec<u8>, Vec<u8>)>;

/// Why [`StateMachine::get`] failed.
#[derive(Debug)]
pub enum ReadError {
    /// Ebb's read failed.
    Ebb(ebb::Error),
    /// The stored value is damaged or of an unknown format version.
    Format(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Ebb(e) => write!(f, "{e}"),
            ReadError::Format(what) => f.write_str(what),
        }
    }
}

impl std::error::Error for ReadError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReadError::Ebb(e) => Some(e),
            ReadError::Format(_) => None,
        }
    }
}

impl StateMachine {
    pub(crate) fn new(
        db: Arc<Db>,
        data: ColumnFamilyHandle,
        meta: ColumnFamilyHandle,
        snapshots: SnapshotStore,
    ) -> Self {
        StateMachine { db, data, meta, snapshots: Arc::new(snapshots) }
    }

    /// `key`'s value in the applied state (what this replica has applied,
    /// which may lag the cluster's commits).
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ReadError> {
        let Some(value) = self.db.get_cf(&self.data, key).map_err(ReadError::Ebb)? else { return Ok(None) };
        let bytes = codec::strip_version(&value).map_err(|e| ReadError::Format(e.to_string()))?;
        Ok(Some(bytes.to_vec()))
    }

    /// At most `limit` keys and values of the applied state, in key order,
    /// from `start` (included) to `end` (excluded; `None`: to the last
    /// key), read by one iterator bounded to the range. Like [`Self::get`],
    /// it reads what this replica has applied.
    pub fn scan(&self, start: &[u8], end: Option<&[u8]>, limit: usize) -> Result<KeyValues, ReadError> {
        let ro = ReadOptions {
            iterate_lower_bound: Some(start.to_vec()),
            iterate_upper_bound: end.map(<[u8]>::to_vec),
            ..ReadOptions::default()
        };
        let mut items = Vec::new();
        for item in self.db.iterator_cf(&self.data, ro, IteratorMode::Start).take(limit) {
            let (key, value) = item.map_err(ReadError::Ebb)?;
            let bytes = codec::strip_version(&value).map_err(|e| ReadError::Format(e.to_string()))?;
            items.push((key, bytes.to_vec()));
        }
        Ok(items)
    }

    /// Whether this is the last handle on the database: no clone of this
    /// state machine, no log store, log reader or snapshot builder is left
    /// (the snapshot store, shared by the clones, holds one more). Dropping
    /// the last handle closes the database.
    pub fn is_last_handle(&self) -> bool {
        Arc::strong_count(&self.snapshots) == 1 && Arc::strong_count(&self.db) == 2
    }

    /// Ebb's property `name` (as `ebb::Db::get_property_cf`) of the column
    /// family that holds the applied keys and values; `None` for a name
    /// Ebb does not know.
    pub fn data_property(&self, name: &str) -> Option<String> {
        self.db.get_property_cf(&self.data, name)
    }

    /// The last applied log id and the last membership, as `ro` reads them.
    fn read_applied(&self, ro: &ReadOptions<'_>) -> Result<AppliedState, StoreError> {
        let read = |key: &[u8]| {
            self.db.get_cf_opt(&self.meta, key, ro).map_err(|e| read_error(ErrorSubject::StateMachine, &e))
        };
        let last_applied = match read(LAST_APPLIED_KEY)? {
            Some(value) => Some(codec::decode(&value).map_err(|e| read_error(ErrorSubject::StateMachine, &e))?),
            None => None,
        };
        let membership = match read(LAST_MEMBERSHIP_KEY)? {
            Some(value) => codec::decode(&value).map_err(|e| read_error(ErrorSubject::StateMachine, &e))?,
            None => StoredMembership::default(),
        };
        Ok((last_applied, membership))
    }

    /// Adds the last applied id (deleted when `None`) and the membership to `batch`.
    fn put_applied(
        &self,
        batch: &mut WriteBatch,
        last_applied: Option<&LogId<NodeId>>,
        membership: Option<&StoredMembership<NodeId, BasicNode>>,
        subject: impl Fn() -> ErrorSubject<NodeId>,
    ) -> Result<(), StoreError> {
        match last_applied {
            Some(log_id) => {
                let value = codec::encode(log_id).map_err(|e| write_error(subject(), &e))?;
                batch.put_cf(&self.meta, LAST_APPLIED_KEY, &value);
            }
            None => batch.delete_cf(&self.meta, LAST_APPLIED_KEY),
        }
        if let Some(membership) = membership {
            let value = codec::encode(membership).map_err(|e| write_error(subject(), &e))?;
            batch.put_cf(&self.meta, LAST_MEMBERSHIP_KEY, &value);
        }
        Ok(())
    }

    /// The exclusive end of a range over every data key, `None` when the
    /// family is empty. Ebb's range deletions need an end, and no byte
    /// string sorts after all others: the successor of the last key is one.
    fn data_keys_end(&self, subject: impl Fn() -> ErrorSubject<NodeId>) -> Result<Option<Vec<u8>>, StoreError> {
        match self.db.iterator_cf(&self.data, ReadOptions::default(), IteratorMode::End).next() {
            None => Ok(None),
            Some(item) => {
                let (last, _) = item.map_err(|e| read_error(subject(), &e))?;
                Ok(Some(codec::successor(&last)))
            }
        }
    }
}

impl RaftSnapshotBuilder<TypeConfig> for StateMachine {
    /// Reads every data key and the metadata at one Ebb snapshot and
    /// streams them into a new snapshot file (synced), then makes it the
    /// current snapshot (a synced write of its record) unless a newer one
    /// was installed meanwhile.
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StoreError> {
        let write = |e: ebb::Error| write_error(ErrorSubject::Snapshot(None), &e);
        let view = self.db.snapshot();
        let (last_log_id, last_membership) = self.read_applied(&view.read_options())?;
        let (number, file, pending) = self.snapshots.create().map_err(write)?;
        let mut writer = SnapshotWriter::new(file);
        for item in self.db.iterator_cf(&self.data, view.read_options(), IteratorMode::Start) {
            let (key, value) = item.map_err(|e| read_error(ErrorSubject::StateMachine, &e))?;
            let value = codec::strip_version(&value).map_err(|e| read_error(ErrorSubject::StateMachine, &e))?;
            writer.push(&key, value).map_err(write)?;
        }
        let len = writer.finish().map_err(write)?;
        // The sequence number tells apart snapshots of the same last log id
        // taken at different states (after an install, say).
        let snapshot_id = match &last_log_id {
            Some(log_id) => format!("{log_id}-{}", view.sequence()),
            None => format!("none-{}", view.sequence()),
        };
        drop(view);
        let meta = SnapshotMeta { last_log_id, last_membership, snapshot_id };
        let mut file =
            SnapshotFile::open(Arc::clone(self.snapshots.fs()), pending.path().to_path_buf(), true).map_err(write)?;
        pending.done();
        match self.snapshots.replace_built(&meta, number, len) {
            Ok(true) => file.keep(),
            Ok(false) => {}
            Err(e) => {
                // The record may have reached the WAL (a failed sync): the
                // file stays for it, or for the next open to remove.
                file.keep();
                return Err(e);
            }
        }
        Ok(Snapshot { meta, snapshot: Box::new(file) })
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = StateMachine;

    async fn applied_state(&mut self) -> Result<AppliedState, StoreError> {
        let view = self.db.snapshot();
        self.read_applied(&view.read_options())
    }

    /// Applies the entries as one unsynced batch with the last applied id
    /// and, if an entry changed it, the membership.
    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Response>, StoreError>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut apply = ApplyBatch { machine: self, batch: WriteBatch::new(), pending: PendingWrites::default() };
        let mut responses = Vec::new();
        let mut last_applied = None;
        let mut membership = None;
        for entry in entries {
            let response = match &entry.payload {
                EntryPayload::Blank => Response::default(),
                EntryPayload::Normal(request) => apply.request(request, entry.log_id)?,
                EntryPayload::Membership(m) => {
                    membership = Some(StoredMembership::new(Some(entry.log_id), m.clone()));
                    Response::default()
                }
            };
            responses.push(response);
            last_applied = Some(entry.log_id);
        }
        let Some(last_applied) = last_applied else { return Ok(responses) };
        let mut batch = apply.batch;
        let subject = || ErrorSubject::Apply(last_applied);
        self.put_applied(&mut batch, Some(&last_applied), membership.as_ref(), subject)?;
        self.db.write(&batch).map_err(|e| write_error(subject(), &e))?;
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    /// A new file in the snapshot directory; removed if it is dropped
    /// before an install takes it.
    async fn begin_receiving_snapshot(&mut self) -> Result<Box<SnapshotFile>, StoreError> {
        let file = self.snapshots.receive().map_err(|e| write_error(ErrorSubject::Snapshot(None), &e))?;
        Ok(Box::new(file))
    }

    /// Replaces the data, the metadata and the current snapshot by
    /// ingesting tables written from the snapshot (`crate::install`). A
    /// snapshot that does not decode, or any failure before the ingestion,
    /// changes nothing.
    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, BasicNode>,
        snapshot: Box<SnapshotFile>,
    ) -> Result<(), StoreError> {
        let subject = || ErrorSubject::Snapshot(Some(meta.signature()));
        let last_applied = match &meta.last_log_id {
            Some(log_id) => Some(codec::encode(log_id).map_err(|e| write_error(subject(), &e))?),
            None => None,
        };
        let membership = codec::encode(&meta.last_membership).map_err(|e| write_error(subject(), &e))?;
        let install = Install {
            db: &self.db,
            data: &self.data,
            data_end: self.data_keys_end(subject)?,
            meta: &self.meta,
            // In key order, as a table takes them.
            meta_records: vec![(LAST_APPLIED_KEY, last_applied), (LAST_MEMBERSHIP_KEY, Some(membership))],
            snapshots: &self.snapshots,
        };
        install.run(meta, *snapshot)
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StoreError> {
        Ok(self.snapshots.current()?.map(|(meta, file)| Snapshot { meta, snapshot: Box::new(file) }))
    }
}
