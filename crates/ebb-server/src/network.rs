//! openraft's network (`RaftNetworkFactory`, `RaftNetwork`) over HTTP: each
//! Raft message is a `POST /raft/{append,vote,snapshot}` to the target's
//! address with the request as JSON; the answer is the JSON of the target
//! Raft's `Result`.
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
use openraft::BasicNode;
use serde::de::DeserializeOwned;
use serde::Serialize;

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
        self.call(SNAPSHOT_PATH, &rpc, &option).await
    }

    async fn vote(&mut self, rpc: VoteRequest<NodeId>, option: RPCOption) -> Result<VoteResponse<NodeId>, RpcError> {
        self.call(VOTE_PATH, &rpc, &option).await
    }
}
