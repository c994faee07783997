//! openraft's network (`RaftNetworkFactory`, `RaftNetwork`) over HTTP: each
//! Raft message is a `POST /raft/{append,vote,snapshot}` to the target's
//! address with the request as JSON; the answer is the JSON of the target
//! Raft's `Result`. Byte strings travel as base64 text: the keys and values
//! of requests (`ebb_raft::bytes`), and a snapshot's chunk, sent as a
//! [`SnapshotChunk`].
//!
//! Every request carries a timeout, openraft's `hard_ttl` for that RPC.
//! A connection that fails is reported as `Unreachable` (openraft backs
//! off, `backoff()`), anything else that keeps an answer from arriving as
//! a `NetworkError`, and the target's own error as a `RemoteError`.
//! Snapshots go with openraft's default chunked transport
//! (`install_snapshot` per chunk).

use std::time::Duration;

use ebb_raft::{NodeId, TypeConfig};
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::{BasicNode, SnapshotMeta, Vote};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::identity::{ClusterIdentity, CLUSTER_HEADER};

/// Paths of the Raft messages on every node.
pub(crate) const APPEND_PATH: &str = "/raft/append";
pub(crate) const VOTE_PATH: &str = "/raft/vote";
pub(crate) const SNAPSHOT_PATH: &str = "/raft/snapshot";

/// The header naming the node a Raft message is for. A node that gets a
/// message for another id refuses it (409): two nodes given one id, or a
/// member's address now served by another node, would otherwise let one
/// process vote or log as two members.
pub(crate) const TARGET_HEADER: &str = "ebb-target-node";

/// Longest wait to open a connection to another node: a node that does not
/// answer within it is treated as unreachable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Makes a [`Connection`] to each member openraft replicates to or asks
/// for votes. One HTTP client (one connection pool) for all of them.
#[derive(Clone)]
pub struct Network {
    http: reqwest::Client,
    /// The node's cluster id, sent with every message once it has one.
    identity: Option<ClusterIdentity>,
}

impl Network {
    /// A network with a fresh connection pool, whose messages carry no
    /// cluster id.
    pub fn new() -> Self {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        Network { http, identity: None }
    }

    /// A network whose messages carry `identity`'s cluster id.
    pub(crate) fn with_identity(identity: ClusterIdentity) -> Self {
        Network { identity: Some(identity), ..Network::new() }
    }
}

impl Default for Network {
    fn default() -> Self {
        Self::new()
    }
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        Connection {
            http: self.http.clone(),
            identity: self.identity.clone(),
            target,
            node: node.clone(),
            warned: false,
        }
    }
}

/// openraft's `InstallSnapshotRequest` as it travels: the same fields, the
/// chunk's bytes as base64 text rather than an array of numbers.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SnapshotChunk {
    vote: Vote<NodeId>,
    meta: SnapshotMeta<NodeId, BasicNode>,
    offset: u64,
    #[serde(with = "ebb_raft::bytes")]
    data: Vec<u8>,
    done: bool,
}

impl From<InstallSnapshotRequest<TypeConfig>> for SnapshotChunk {
    fn from(rpc: InstallSnapshotRequest<TypeConfig>) -> Self {
        SnapshotChunk { vote: rpc.vote, meta: rpc.meta, offset: rpc.offset, data: rpc.data, done: rpc.done }
    }
}

impl From<SnapshotChunk> for InstallSnapshotRequest<TypeConfig> {
    fn from(chunk: SnapshotChunk) -> Self {
        InstallSnapshotRequest {
            vote: chunk.vote,
            meta: chunk.meta,
            offset: chunk.offset,
            data: chunk.data,
            done: chunk.done,
        }
    }
}

/// Sends one member's Raft messages.
pub struct Connection {
    http: reqwest::Client,
    identity: Option<ClusterIdentity>,
    target: NodeId,
    node: BasicNode,
    /// Whether a refusal for being sent to the wrong node was reported.
    warned: bool,
}

type RpcError<E = openraft::error::Infallible> = RPCError<NodeId, BasicNode, RaftError<NodeId, E>>;

impl Connection {
    async fn call<Req, Resp, E>(&mut self, path: &str, message: &Req, option: &RPCOption) -> Result<Resp, RpcError<E>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let url = format!("http://{}{path}", self.node.addr);
        let mut request = self.http.post(url).timeout(option.hard_ttl()).header(TARGET_HEADER, self.target.to_string());
        if let Some(cluster) = self.identity.as_ref().and_then(ClusterIdentity::get) {
            request = request.header(CLUSTER_HEADER, cluster);
        }
        let sent = request.json(message).send().await;
        let answer = match sent {
            Ok(answer) => answer,
            Err(e) if e.is_connect() => return Err(RPCError::Unreachable(Unreachable::new(&e))),
            Err(e) => return Err(RPCError::Network(NetworkError::new(&e))),
        };
        if !answer.status().is_success() {
            let status = answer.status();
            let text = answer.text().await.unwrap_or_default();
            // Another node at the member's address: nothing openraft can
            // retry its way out of, so say it where an operator looks.
            if status == reqwest::StatusCode::CONFLICT && !self.warned {
                self.warned = true;
                eprintln!("ebb-server: node {} at {} refused a raft message: {text}", self.target, self.node.addr);
            }
            let e = std::io::Error::other(format!("node {} answered {status}: {text}", self.target));
            return Err(RPCError::Network(NetworkError::new(&e)));
        }
        let result: Result<Resp, RaftError<NodeId, E>> =
            answer.json().await.map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new_with_node(self.target, self.node.clone(), e)))
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcError> {
        self.call(APPEND_PATH, &rpc, &option).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcError<InstallSnapshotError>> {
        self.call(SNAPSHOT_PATH, &SnapshotChunk::from(rpc), &option).await
    }

    async fn vote(&mut self, rpc: VoteRequest<NodeId>, option: RPCOption) -> Result<VoteResponse<NodeId>, RpcError> {
        self.call(VOTE_PATH, &rpc, &option).await
    }
}

#[cfg(test)]
mod tests {
    use ebb_raft::Request;
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};

    use super::*;

    #[test]
    fn raft_messages_carry_bytes_as_base64() {
        let entry: Entry<TypeConfig> = Entry {
            log_id: LogId::new(CommittedLeaderId::new(2, 1), 7),
            payload: EntryPayload::Normal(Request::Set { key: vec![0xff; 3], value: b"v".to_vec() }),
        };
        let append = AppendEntriesRequest::<TypeConfig> {
            vote: Vote::new_committed(2, 1),
            prev_log_id: None,
            entries: vec![entry],
            leader_commit: None,
        };
        let json = serde_json::to_string(&append).unwrap();
        assert!(json.contains(r#""key":"////""#) && json.contains(r#""value":"dg==""#), "{json}");
        let back: AppendEntriesRequest<TypeConfig> = serde_json::from_str(&json).unwrap();
        assert_eq!(back.entries, append.entries);

        let rpc = InstallSnapshotRequest::<TypeConfig> {
            vote: Vote::new_committed(2, 1),
            meta: SnapshotMeta::default(),
            offset: 4096,
            data: (0..=255).collect(),
            done: false,
        };
        let json = serde_json::to_string(&SnapshotChunk::from(rpc.clone())).unwrap();
        assert!(json.contains(r#""data":"AAECAw"#) && json.len() < 800, "{json}");
        let back: InstallSnapshotRequest<TypeConfig> = serde_json::from_str::<SnapshotChunk>(&json).unwrap().into();
        assert_eq!((back.offset, back.data, back.done), (rpc.offset, rpc.data, rpc.done));
    }
}
