//! openraft's log store ([`RaftLogStorage`], [`RaftLogReader`]) on Ebb.
//!
//! Owns two column families: the log (`raft_log`: entry `i` under the
//! 8-byte big-endian key of `i`, so the family's order is the log's) and the
//! log metadata (`raft_meta`: the vote, the committed log id and the last
//! purged log id). Every change is one `WriteBatch`, so an entry and the
//! metadata written with it are on disk together or not at all.
//!
//! Durability (docs/cluster.md, "Durability"): `append`, `truncate`,
//! `purge` and `save_vote` write with `sync: true`, one WAL fsync per call,
//! before they return or call back; `save_committed` does not sync
//! (openraft can lose it: the committed id is learnt again from the leader).
//!
//! Thread-safety: clones share the database; openraft serialises the
//! writes (one log store), and readers (log readers given to replication
//! tasks) read through Ebb's iterators, which see a consistent view.
//! The methods are `async` but call Ebb synchronously: a synced append
//! holds its runtime thread for the fsync.

use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use ebb::{ColumnFamilyHandle, Db, IteratorMode, ReadOptions, WriteBatch, WriteOptions};
use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{Entry, ErrorSubject, LogId, OptionalSend, RaftLogReader, Vote};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::codec::{self, CodecError};
use crate::error::{read_error, write_error, StoreError};
use crate::types::{NodeId, TypeConfig};

/// DO NOT CHANGE: on-disk format. Keys in the log metadata family.
const VOTE_KEY: &[u8] = b"vote";
/// DO NOT CHANGE: on-disk format.
const COMMITTED_KEY: &[u8] = b"committed";
/// DO NOT CHANGE: on-disk format.
const LAST_PURGED_KEY: &[u8] = b"last_purged";

const SYNC: WriteOptions = WriteOptions { sync: true, disable_wal: false };

/// The Raft log, the vote and the log pointers, in an Ebb database; also
/// its own log reader. Made by [`crate::open`].
#[derive(Clone)]
pub struct LogStore {
    db: Arc<Db>,
    log: ColumnFamilyHandle,
    meta: ColumnFamilyHandle,
}

impl Debug for LogStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore").field("path", &self.db.path()).finish()
    }
}

impl LogStore {
    pub(crate) fn new(db: Arc<Db>, log: ColumnFamilyHandle, meta: ColumnFamilyHandle) -> Self {
        LogStore { db, log, meta }
    }

    fn read_meta<T: DeserializeOwned>(
        &self,
        key: &[u8],
        subject: ErrorSubject<NodeId>,
    ) -> Result<Option<T>, StoreError> {
        let Some(value) = self.db.get_cf(&self.meta, key).map_err(|e| read_error(subject.clone(), &e))? else {
            return Ok(None);
        };
        codec::decode(&value).map(Some).map_err(|e| read_error(subject, &e))
    }

    fn put_meta<T: Serialize>(
        &self,
        batch: &mut WriteBatch,
        key: &[u8],
        value: &T,
        subject: ErrorSubject<NodeId>,
    ) -> Result<(), StoreError> {
        let value = codec::encode(value).map_err(|e| write_error(subject, &e))?;
        batch.put_cf(&self.meta, key, &value);
        Ok(())
    }

    fn write(
        &self,
        batch: &WriteBatch,
        options: &WriteOptions,
        subject: ErrorSubject<NodeId>,
    ) -> Result<(), StoreError> {
        self.db.write_opt(batch, options).map_err(|e| write_error(subject, &e))
    }
}

/// The entry stored under `key`, checked against the key.
fn decode_entry(key: &[u8], value: &[u8]) -> Result<Entry<TypeConfig>, CodecError> {
    let index = codec::log_index(key)?;
    let entry: Entry<TypeConfig> = codec::decode(value)?;
    if entry.log_id.index != index {
        return Err(CodecError::Inconsistent(format!("log entry {} is stored under index {index}", entry.log_id)));
    }
    Ok(entry)
}

/// The key bounds, lower included and upper excluded, of the log indexes
/// in `range`; `None` when the range holds no index. An upper bound of
/// `None` is the end of the log.
fn key_bounds(range: &impl RangeBounds<u64>) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let start = match range.start_bound() {
        Bound::Included(&i) => i,
        Bound::Excluded(&i) => i.checked_add(1)?,
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(&i) => i.checked_add(1),
        Bound::Excluded(&i) => Some(i),
        Bound::Unbounded => None,
    };
    if end.is_some_and(|end| end <= start) {
        return None;
    }
    Some((codec::log_key(start).to_vec(), end.map(|end| codec::log_key(end).to_vec())))
}

impl RaftLogReader<TypeConfig> for LogStore {
    /// The entries in `range` that are in the log, in order, read by one
    /// iterator bounded to the range.
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<TypeConfig>>, StoreError> {
        let Some((lower, upper)) = key_bounds(&range) else { return Ok(Vec::new()) };
        let ro = ReadOptions { iterate_lower_bound: Some(lower), iterate_upper_bound: upper, ..ReadOptions::default() };
        let mut entries = Vec::new();
        for item in self.db.iterator_cf(&self.log, ro, IteratorMode::Start) {
            let (key, value) = item.map_err(|e| read_error(ErrorSubject::Logs, &e))?;
            let entry = decode_entry(&key, &value).map_err(|e| read_error(ErrorSubject::Logs, &e))?;
            entries.push(entry);
        }
        Ok(entries)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StoreError> {
        let last = self.db.iterator_cf(&self.log, ReadOptions::default(), IteratorMode::End).next();
        let last_log_id = match last {
            None => None,
            Some(item) => {
                let (key, value) = item.map_err(|e| read_error(ErrorSubject::Logs, &e))?;
                Some(decode_entry(&key, &value).map_err(|e| read_error(ErrorSubject::Logs, &e))?.log_id)
            }
        };
        let last_purged_log_id: Option<LogId<NodeId>> = self.read_meta(LAST_PURGED_KEY, ErrorSubject::Logs)?;
        // With every entry purged, the last log id is the last purged one.
        Ok(LogState { last_purged_log_id, last_log_id: last_log_id.or(last_purged_log_id) })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StoreError> {
        let mut batch = WriteBatch::new();
        self.put_meta(&mut batch, VOTE_KEY, vote, ErrorSubject::Vote)?;
        self.write(&batch, &SYNC, ErrorSubject::Vote)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StoreError> {
        self.read_meta(VOTE_KEY, ErrorSubject::Vote)
    }

    /// Not synced: openraft calls it often, and losing it is safe (the
    /// state machine's own last applied id, written with the data, bounds
    /// what a restart re-applies; the leader tells the committed id again).
    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> Result<(), StoreError> {
        let mut batch = WriteBatch::new();
        match committed {
            Some(log_id) => self.put_meta(&mut batch, COMMITTED_KEY, &log_id, ErrorSubject::Logs)?,
            None => batch.delete_cf(&self.meta, COMMITTED_KEY),
        }
        self.write(&batch, &WriteOptions::default(), ErrorSubject::Logs)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StoreError> {
        self.read_meta(COMMITTED_KEY, ErrorSubject::Logs)
    }

    /// Writes the entries as one batch with `sync: true`, then calls back:
    /// when the callback runs, the entries are in the fsynced WAL. One
    /// fsync per call, however many entries: openraft hands over what
    /// accumulated while the previous append was being synced.
    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> Result<(), StoreError>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batch = WriteBatch::new();
        for entry in entries {
            let value = codec::encode(&entry).map_err(|e| write_error(ErrorSubject::Log(entry.log_id), &e))?;
            batch.put_cf(&self.log, &codec::log_key(entry.log_id.index), &value);
        }
        self.write(&batch, &SYNC, ErrorSubject::Logs)?;
        callback.log_io_completed(Ok(()));
        Ok(())
    }

    /// Deletes the entries from `log_id.index` on, one synced range deletion.
    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StoreError> {
        let mut batch = WriteBatch::new();
        batch.delete_range_cf(&self.log, &codec::log_key(log_id.index), &codec::LOG_KEYS_END);
        self.write(&batch, &SYNC, ErrorSubject::Logs)
    }

    /// Deletes the entries up to `log_id.index` and records `log_id` as the
    /// last purged, in one synced batch.
    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StoreError> {
        let end = match log_id.index.checked_add(1) {
            Some(next) => codec::log_key(next).to_vec(),
            None => codec::LOG_KEYS_END.to_vec(),
        };
        let mut batch = WriteBatch::new();
        batch.delete_range_cf(&self.log, &codec::log_key(0), &end);
        self.put_meta(&mut batch, LAST_PURGED_KEY, &log_id, ErrorSubject::Logs)?;
        self.write(&batch, &SYNC, ErrorSubject::Logs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_bounds_cover_exactly_the_range() {
        let key = |i: u64| codec::log_key(i).to_vec();
        assert_eq!(key_bounds(&(3..7)), Some((key(3), Some(key(7)))));
        assert_eq!(key_bounds(&(3..=7)), Some((key(3), Some(key(8)))));
        assert_eq!(key_bounds(&(3..)), Some((key(3), None)));
        assert_eq!(key_bounds(&(..=u64::MAX)), Some((key(0), None)));
        assert_eq!(key_bounds(&(5..5)), None);
        assert_eq!(key_bounds(&(Bound::Excluded(u64::MAX), Bound::Unbounded)), None);
    }
}
