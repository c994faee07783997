//! The application the replicated log carries: writes to a key-value store,
//! and openraft's type configuration for it.
//!
//! Owns nothing at run time; these are the types a later server (and its
//! clients) share with this crate. Requests travel in log entries, so their
//! serde form is part of the stored format (docs/cluster.md, "Log entries").

use openraft::BasicNode;
use serde::{Deserialize, Serialize};

use crate::snapshot_file::SnapshotFile;

/// A member's id in the cluster.
pub type NodeId = u64;

openraft::declare_raft_types!(
    /// openraft's type configuration for a replicated Ebb key-value store:
    /// requests are [`Request`]s, responses [`Response`]s, members are
    /// numbered by [`NodeId`] and reached at a [`BasicNode`] address, and a
    /// snapshot is a [`SnapshotFile`] in the format of docs/cluster.md.
    pub TypeConfig:
        D = Request,
        R = Response,
        NodeId = u64,
        Node = BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = SnapshotFile,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A write proposed to the cluster. Keys and values are bytes, ordered
/// bytewise; in JSON (the server's Raft messages) they are base64 strings
/// ([`crate::bytes`]), in the stored format the bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Sets `key` to `value`.
    Set {
        /// The key.
        #[serde(with = "crate::bytes")]
        key: Vec<u8>,
        /// Its new value.
        #[serde(with = "crate::bytes")]
        value: Vec<u8>,
    },
    /// Removes `key`.
    Delete {
        /// The key.
        #[serde(with = "crate::bytes")]
        key: Vec<u8>,
    },
    /// Removes every key from `begin` (included) to `end` (excluded).
    DeleteRange {
        /// First key removed.
        #[serde(with = "crate::bytes")]
        begin: Vec<u8>,
        /// First key kept.
        #[serde(with = "crate::bytes")]
        end: Vec<u8>,
    },
    /// Several operations applied together, in order: a replica applies all
    /// of them or, after a crash, none.
    Batch(Vec<Operation>),
}

/// One operation of a [`Request::Batch`]. A batch holds no batches, so a
/// stored entry decodes without recursion however it was damaged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Operation {
    /// As [`Request::Set`].
    Set {
        /// The key.
        #[serde(with = "crate::bytes")]
        key: Vec<u8>,
        /// Its new value.
        #[serde(with = "crate::bytes")]
        value: Vec<u8>,
    },
    /// As [`Request::Delete`].
    Delete {
        /// The key.
        #[serde(with = "crate::bytes")]
        key: Vec<u8>,
    },
    /// As [`Request::DeleteRange`].
    DeleteRange {
        /// First key removed.
        #[serde(with = "crate::bytes")]
        begin: Vec<u8>,
        /// First key kept.
        #[serde(with = "crate::bytes")]
        end: Vec<u8>,
    },
}

/// What applying a log entry answers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// For [`Request::Set`] and [`Request::Delete`]: the key's value before
    /// the request, `None` if it had none. `None` for every other request
    /// and for openraft's own entries (blank and membership entries).
    pub previous: Option<Vec<u8>>,
}

/// Why a request cannot be applied; see [`Request::validate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidRequest(String);

impl std::fmt::Display for InvalidRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidRequest {}

impl Request {
    /// Checks that the state machine can apply every operation: keys of at
    /// most [`ebb::MAX_KEY_SIZE`] bytes, values under
    /// [`ebb::MAX_VALUE_SIZE`] bytes (one byte of each stored value is the
    /// format version), ranges whose `begin` is not after `end`.
    ///
    /// Call it before proposing. The state machine skips an operation that
    /// fails it instead of failing the entry (it answers `previous: None`):
    /// a committed entry every replica refused would stop the cluster.
    pub fn validate(&self) -> Result<(), InvalidRequest> {
        match self {
            Request::Set { key, value } => check_set(key, value),
            Request::Delete { key } => check_key(key),
            Request::DeleteRange { begin, end } => check_range(begin, end),
            Request::Batch(ops) => ops.iter().try_for_each(Operation::validate),
        }
    }
}

impl Operation {
    /// As [`Request::validate`], for one operation.
    pub fn validate(&self) -> Result<(), InvalidRequest> {
        match self {
            Operation::Set { key, value } => check_set(key, value),
            Operation::Delete { key } => check_key(key),
            Operation::DeleteRange { begin, end } => check_range(begin, end),
        }
    }
}

pub(crate) fn check_key(key: &[u8]) -> Result<(), InvalidRequest> {
    if key.len() > ebb::MAX_KEY_SIZE {
        return Err(InvalidRequest(format!("key of {} bytes (at most {})", key.len(), ebb::MAX_KEY_SIZE)));
    }
    Ok(())
}

pub(crate) fn check_set(key: &[u8], value: &[u8]) -> Result<(), InvalidRequest> {
    check_key(key)?;
    if value.len() >= ebb::MAX_VALUE_SIZE {
        return Err(InvalidRequest(format!("value of {} bytes (under {})", value.len(), ebb::MAX_VALUE_SIZE)));
    }
    Ok(())
}

pub(crate) fn check_range(begin: &[u8], end: &[u8]) -> Result<(), InvalidRequest> {
    check_key(begin)?;
    check_key(end)?;
    if begin > end {
        return Err(InvalidRequest("range begins after its end".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};

    use super::*;

    /// The worked example of docs/cluster.md ("Values and the version
    /// byte"): the stored form of an entry does not change.
    #[test]
    fn an_entry_is_stored_as_the_docs_show() {
        let entry: Entry<TypeConfig> = Entry {
            log_id: LogId::new(CommittedLeaderId::new(2, 1), 7),
            payload: EntryPayload::Normal(Request::Set { key: b"k".to_vec(), value: b"v".to_vec() }),
        };
        let stored = crate::codec::encode(&entry).unwrap();
        assert_eq!(stored, [0x01, 0x02, 0x01, 0x07, 0x01, 0x00, 0x01, 0x6b, 0x01, 0x76]);
        assert_eq!(crate::codec::decode::<Entry<TypeConfig>>(&stored).unwrap(), entry);
    }

    #[test]
    fn requests_in_json_carry_base64() {
        let batch = Request::Batch(vec![
            Operation::Set { key: vec![0, 255], value: b"v".to_vec() },
            Operation::DeleteRange { begin: b"a".to_vec(), end: b"b".to_vec() },
        ]);
        let json = serde_json::to_string(&batch).unwrap();
        assert_eq!(
            json,
            r#"{"Batch":[{"Set":{"key":"AP8=","value":"dg=="}},{"DeleteRange":{"begin":"YQ==","end":"Yg=="}}]}"#
        );
        assert_eq!(serde_json::from_str::<Request>(&json).unwrap(), batch);
    }
}
