//! The JSON bodies of the client API, shared by the server and the client
//! (docs/cluster.md, "The replicated server").
//!
//! Keys and values are UTF-8 strings: what a client writes through this API
//! is text, so every stored key and value is too, and a request body or a
//! URL that is not UTF-8 is refused with a 400. Requests become
//! [`ebb_raft::Request`]s of bytes (the strings' UTF-8 encoding).

use std::collections::BTreeMap;

use ebb_raft::{NodeId, Operation, Request};
use serde::{Deserialize, Serialize};

/// Largest `limit` a scan answers; a larger one is capped to it.
pub const MAX_SCAN_LIMIT: usize = 1000;
/// A scan's `limit` when the request names none.
pub const DEFAULT_SCAN_LIMIT: usize = 100;

/// Every error answer's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong, for a person.
    pub error: String,
    /// Present when the node is not the leader and knows who is: retry
    /// there (the answer is a 307 whose `Location` is the same request at
    /// the leader).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<Member>,
}

/// A node of the cluster: its id and the `host:port` it serves on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Node id.
    pub id: NodeId,
    /// `host:port` of its HTTP server.
    pub addr: String,
}

/// Answer to `GET /kv/{key}` (200 when found, 404 with `value: null`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetResponse {
    /// The key asked for.
    pub key: String,
    /// Its value, `None` when the key is absent.
    pub value: Option<String>,
}

/// Answer to a write: where the write sits in the replicated log and, for
/// a put or a delete, the key's value before it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteResponse {
    /// Index of the log entry that carried the write; it is committed and
    /// applied on the leader when the answer is sent.
    pub log_index: u64,
    /// For `PUT` and `DELETE /kv/{key}`: the key's value before, `None`
    /// when it had none (always `None` for ranges and batches).
    pub previous: Option<String>,
}

/// Body of `POST /delete_range`: removes the keys from `begin` (included)
/// to `end` (excluded).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteRange {
    /// First key removed.
    pub begin: String,
    /// First key kept.
    pub end: String,
}

/// One operation of `POST /batch` (a JSON array of them, applied together
/// in order): `{"op":"set","key":"a","value":"1"}`,
/// `{"op":"delete","key":"a"}`, `{"op":"delete_range","begin":"a","end":"c"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum BatchOp {
    /// Sets `key` to `value`.
    Set {
        /// The key.
        key: String,
        /// Its new value.
        value: String,
    },
    /// Removes `key`.
    Delete {
        /// The key.
        key: String,
    },
    /// Removes the keys from `begin` (included) to `end` (excluded).
    DeleteRange {
        /// First key removed.
        begin: String,
        /// First key kept.
        end: String,
    },
}

impl BatchOp {
    fn into_operation(self) -> Operation {
        match self {
            BatchOp::Set { key, value } => Operation::Set { key: key.into_bytes(), value: value.into_bytes() },
            BatchOp::Delete { key } => Operation::Delete { key: key.into_bytes() },
            BatchOp::DeleteRange { begin, end } => {
                Operation::DeleteRange { begin: begin.into_bytes(), end: end.into_bytes() }
            }
        }
    }
}

/// The replicated request a batch proposes.
pub fn batch_request(ops: Vec<BatchOp>) -> Request {
    Request::Batch(ops.into_iter().map(BatchOp::into_operation).collect())
}

/// One key and its value in a scan's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// Its value.
    pub value: String,
}

/// Answer to `GET /scan`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanResponse {
    /// The keys in `[start, end)`, in order, at most `limit` of them.
    pub items: Vec<KeyValue>,
    /// Whether keys of the range follow the last one returned: scan again
    /// from the last key followed by a NUL character (`"\u0000"`).
    pub more: bool,
}

/// Body of `POST /init`: the first members, by id, with their addresses.
/// An empty body or no `members` makes a cluster of this node alone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitRequest {
    /// `{"1": "127.0.0.1:21001", ...}`.
    #[serde(default)]
    pub members: BTreeMap<NodeId, String>,
}

/// Body of `POST /change-membership`: the voters wanted. Voters not listed
/// are removed from the cluster (not kept as learners); listed ids must
/// already be members or learners.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChangeMembershipRequest {
    /// Node ids of the new voters.
    pub members: Vec<NodeId>,
}

/// A node's view of the cluster and of its database, `GET /status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// This node's id.
    pub id: NodeId,
    /// `Leader`, `Follower`, `Candidate`, `Learner` or `Shutdown`.
    pub state: String,
    /// The leader this node knows of.
    pub leader: Option<Member>,
    /// Current Raft term.
    pub term: u64,
    /// Index of the last entry in this node's log.
    pub last_log_index: Option<u64>,
    /// Index of the last entry this node has applied.
    pub last_applied: Option<u64>,
    /// Index of the last entry in this node's current snapshot.
    pub snapshot: Option<u64>,
    /// Voting members (of the last membership this node knows; two sets
    /// during a change).
    pub voters: Vec<NodeId>,
    /// Learners: replicated to, not voting.
    pub learners: Vec<NodeId>,
    /// Every member's address.
    pub nodes: Vec<Member>,
    /// Ebb properties of the column family that holds the data (`sm_data`),
    /// by name.
    pub ebb: BTreeMap<String, String>,
    /// Why this node's Raft stopped (a storage error), if it did: it then
    /// serves nothing until restarted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    /// The cluster this node's directory belongs to (`None` until it is
    /// initialized or hears from a member).
    #[serde(default)]
    pub cluster_id: Option<String>,
}
