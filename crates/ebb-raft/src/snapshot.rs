//! Snapshots: their byte format, and the store that keeps the current one.
//!
//! The format (docs/cluster.md, "Snapshot format"): one format version
//! byte, the number of records as 8 big-endian bytes, then each record, a
//! key and its value, both in postcard's form (a varint length and the
//! bytes), keys in ascending order. [`SnapshotWriter`] writes it,
//! [`decode_records`] reads and checks it whole before anything is
//! installed.
//!
//! [`SnapshotStore`] owns the `sm_snapshot` family: the current snapshot's
//! metadata under `meta`, its bytes cut into chunks under `chunk/<n>`.
//! Replacing it is one synced batch that deletes every chunk and writes the
//! new ones and the metadata, so a reader sees the old snapshot or the new
//! one. A lock serialises replacements, so that a snapshot built from an
//! older state never replaces a newer one installed meanwhile.

use std::sync::Arc;

use ebb::{ColumnFamilyHandle, Db, IteratorMode, WriteBatch, WriteOptions};
use openraft::{BasicNode, ErrorSubject, SnapshotMeta};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::codec::{self, CodecError};
use crate::error::{read_error, write_error, StoreError};
use crate::types::NodeId;

/// DO NOT CHANGE: on-disk format. The first byte of a snapshot's data.
pub(crate) const SNAPSHOT_FORMAT_VERSION: u8 = 1;

/// Bytes before the records: the version and the record count.
const HEADER_LEN: usize = 1 + 8;

/// A snapshot's records, keys and values, borrowed from its data.
pub(crate) type Records<'a> = Vec<(&'a [u8], &'a [u8])>;

/// openraft's snapshot metadata, for this crate's node ids and nodes.
type Meta = SnapshotMeta<NodeId, BasicNode>;

/// Writes a snapshot's data, record by record.
pub(crate) struct SnapshotWriter {
    data: Vec<u8>,
    records: u64,
}

impl SnapshotWriter {
    pub(crate) fn new() -> Self {
        let mut data = Vec::with_capacity(HEADER_LEN);
        data.push(SNAPSHOT_FORMAT_VERSION);
        data.extend_from_slice(&0u64.to_be_bytes());
        SnapshotWriter { data, records: 0 }
    }

    /// Appends a record; keys must come in ascending order.
    pub(crate) fn push(&mut self, key: &[u8], value: &[u8]) -> Result<(), CodecError> {
        self.data = postcard::to_extend(&(key, value), std::mem::take(&mut self.data))?;
        self.records += 1;
        Ok(())
    }

    /// The data, its record count filled in.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.data[1..HEADER_LEN].copy_from_slice(&self.records.to_be_bytes());
        self.data
    }
}

/// The records of a snapshot's data, checked whole: the version, the
/// count against the records present, each record, nothing left over.
pub(crate) fn decode_records(data: &[u8]) -> Result<Records<'_>, CodecError> {
    let (&version, rest) = data.split_first().ok_or(CodecError::Empty)?;
    if version != SNAPSHOT_FORMAT_VERSION {
        return Err(CodecError::UnknownVersion(version));
    }
    let count: [u8; 8] = rest
        .get(..8)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| CodecError::Inconsistent("snapshot data ends inside its header".into()))?;
    let count = u64::from_be_bytes(count);
    let mut rest = &rest[8..];
    // The count is not trusted for the allocation: each record takes two bytes at least.
    let mut records = Vec::with_capacity(usize::try_from(count).unwrap_or(usize::MAX).min(rest.len() / 2));
    for _ in 0..count {
        if rest.is_empty() {
            return Err(CodecError::Inconsistent(format!(
                "snapshot data holds {} records, its header says {count}",
                records.len()
            )));
        }
        let (record, tail): ((&[u8], &[u8]), &[u8]) = postcard::take_from_bytes(rest)?;
        records.push(record);
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(CodecError::TrailingBytes(rest.len()));
    }
    Ok(records)
}

/// DO NOT CHANGE: on-disk format. Keys in the snapshot family.
const META_KEY: &[u8] = b"meta";
/// DO NOT CHANGE: on-disk format. Chunk `n` is under this prefix and the
/// 8 big-endian bytes of `n`.
const CHUNK_PREFIX: &[u8] = b"chunk/";
/// After every chunk key: `'0'` is the byte after `'/'`.
const CHUNKS_END: &[u8] = b"chunk0";

/// Bytes of snapshot data per stored value: large enough that a snapshot
/// is few values, small enough that one stays far below Ebb's value limit
/// and a memtable holds many.
const CHUNK_SIZE: usize = 4 << 20;

/// What the `meta` key holds.
#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    meta: Meta,
    /// Bytes of data, over all chunks.
    len: u64,
    /// Number of chunks.
    chunks: u64,
}

fn chunk_key(n: u64) -> Vec<u8> {
    let mut key = CHUNK_PREFIX.to_vec();
    key.extend_from_slice(&n.to_be_bytes());
    key
}

/// Whether the current snapshot may be replaced by one built from the
/// state machine, or must be (an installed snapshot replaces whatever is
/// there: the state machine now holds it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replace {
    /// Only if the current one is not newer.
    UnlessNewer,
    /// Always.
    Always,
}

/// The current snapshot, kept in the `sm_snapshot` family.
pub(crate) struct SnapshotStore {
    db: Arc<Db>,
    family: ColumnFamilyHandle,
    /// Held from reading the current metadata to writing the batch that
    /// replaces it.
    replacing: Mutex<()>,
}

impl SnapshotStore {
    pub(crate) fn new(db: Arc<Db>, family: ColumnFamilyHandle) -> Self {
        SnapshotStore { db, family, replacing: Mutex::new(()) }
    }

    /// Makes `meta` and `data` the current snapshot, in `batch` (which may
    /// hold the caller's updates, written with it) written with
    /// `sync: true`. Returns false, writing nothing, when `replace` is
    /// [`Replace::UnlessNewer`] and the current snapshot is newer.
    pub(crate) fn replace(
        &self,
        mut batch: WriteBatch,
        meta: &Meta,
        data: &[u8],
        replace: Replace,
    ) -> Result<bool, StoreError> {
        let subject = || ErrorSubject::Snapshot(Some(meta.signature()));
        let _replacing = self.replacing.lock();
        if replace == Replace::UnlessNewer {
            if let Some(current) = self.read_meta()? {
                if current.meta.last_log_id > meta.last_log_id {
                    return Ok(false);
                }
            }
        }
        batch.delete_range_cf(&self.family, CHUNK_PREFIX, CHUNKS_END);
        let mut chunks = 0u64;
        for chunk in data.chunks(CHUNK_SIZE) {
            batch.put_cf(&self.family, &chunk_key(chunks), &codec::encode_raw(chunk));
            chunks += 1;
        }
        let stored = StoredSnapshot { meta: meta.clone(), len: data.len() as u64, chunks };
        let value = codec::encode(&stored).map_err(|e| write_error(subject(), &e))?;
        batch.put_cf(&self.family, META_KEY, &value);
        let sync = WriteOptions { sync: true, disable_wal: false };
        self.db.write_opt(&batch, &sync).map_err(|e| write_error(subject(), &e))?;
        Ok(true)
    }

    fn read_meta(&self) -> Result<Option<StoredSnapshot>, StoreError> {
        let Some(value) =
            self.db.get_cf(&self.family, META_KEY).map_err(|e| read_error(ErrorSubject::Snapshot(None), &e))?
        else {
            return Ok(None);
        };
        codec::decode(&value).map(Some).map_err(|e| read_error(ErrorSubject::Snapshot(None), &e))
    }

    /// The current snapshot's metadata and data, read at one Ebb snapshot;
    /// `None` if there is none. The chunks are checked against the
    /// metadata.
    pub(crate) fn current(&self) -> Result<Option<(Meta, Vec<u8>)>, StoreError> {
        let view = self.db.snapshot();
        let ro = view.read_options();
        let Some(value) = self
            .db
            .get_cf_opt(&self.family, META_KEY, &ro)
            .map_err(|e| read_error(ErrorSubject::Snapshot(None), &e))?
        else {
            return Ok(None);
        };
        let stored: StoredSnapshot = codec::decode(&value).map_err(|e| read_error(ErrorSubject::Snapshot(None), &e))?;
        let subject = || ErrorSubject::Snapshot(Some(stored.meta.signature()));
        let mut data = Vec::with_capacity(usize::try_from(stored.len).unwrap_or(0).min(CHUNK_SIZE));
        let mut chunks = 0u64;
        for item in self.db.iterator_cf(
            &self.family,
            view.read_options(),
            IteratorMode::From(CHUNK_PREFIX, ebb::Direction::Forward),
        ) {
            let (key, value) = item.map_err(|e| read_error(subject(), &e))?;
            if !key.starts_with(CHUNK_PREFIX) {
                break;
            }
            if key != chunk_key(chunks) {
                let e = CodecError::Inconsistent(format!("snapshot chunk {chunks} missing"));
                return Err(read_error(subject(), &e));
            }
            data.extend_from_slice(codec::strip_version(&value).map_err(|e| read_error(subject(), &e))?);
            chunks += 1;
        }
        if chunks != stored.chunks || data.len() as u64 != stored.len {
            let e = CodecError::Inconsistent(format!(
                "snapshot has {chunks} chunks and {} bytes; its metadata says {} and {}",
                data.len(),
                stored.chunks,
                stored.len
            ));
            return Err(read_error(subject(), &e));
        }
        Ok(Some((stored.meta, data)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let mut w = SnapshotWriter::new();
        w.push(b"", b"empty key").unwrap();
        w.push(b"k", b"").unwrap();
        w.push(&[0xff; 300], &[7; 1000]).unwrap();
        let data = w.finish();
        let records = decode_records(&data).unwrap();
        let expected: Vec<(&[u8], &[u8])> = vec![(b"", b"empty key"), (b"k", b""), (&[0xff; 300], &[7; 1000])];
        assert_eq!(records, expected);
    }

    #[test]
    fn damaged_data_is_refused() {
        let mut w = SnapshotWriter::new();
        w.push(b"a", b"1").unwrap();
        w.push(b"b", b"2").unwrap();
        let data = w.finish();
        assert!(decode_records(&[]).is_err());
        assert!(decode_records(&data[..5]).is_err(), "cut in the header");
        assert!(decode_records(&data[..data.len() - 1]).is_err(), "cut in a record");
        assert!(decode_records(&data[..data.len() - 4]).is_err(), "a whole record missing");
        let mut longer = data.clone();
        longer.push(0);
        assert!(decode_records(&longer).is_err());
        let mut version = data.clone();
        version[0] = 9;
        assert!(matches!(decode_records(&version), Err(CodecError::UnknownVersion(9))));
        let mut count = data.clone();
        count[1..HEADER_LEN].copy_from_slice(&u64::MAX.to_be_bytes());
        assert!(decode_records(&count).is_err(), "a huge count neither allocates nor passes");
    }

    #[test]
    fn an_empty_snapshot_is_a_header() {
        let data = SnapshotWriter::new().finish();
        assert_eq!(data, [SNAPSHOT_FORMAT_VERSION, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert!(decode_records(&data).unwrap().is_empty());
    }
}
