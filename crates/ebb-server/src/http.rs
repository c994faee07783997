//! The HTTP server of a node: the client API and the Raft messages on one
//! axum router (docs/cluster.md, "The replicated server").
//!
//! Every answer is JSON. Errors are [`ErrorBody`]s with a status saying
//! whose fault: 400 bad input (never a panic), 404 absent key or unknown
//! path, 307 not the leader (the body and `Location` name it), 409 a
//! cluster already initialized, 413 a body over the limit, 503 no leader
//! or no quorum right now (retry), 500 the node failed.
//!
//! Writes go through `Raft::client_write`, which answers once the entry is
//! committed and applied on the leader. Reads are linearizable unless
//! `stale=true`: `Raft::ensure_linearizable` first confirms with a quorum
//! that this node is still the leader and waits until it has applied
//! everything committed before the read arrived, then the local state
//! machine is read.

use std::collections::{BTreeMap, BTreeSet};

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use ebb_raft::{NodeId, Request, StateMachine, TypeConfig};
use openraft::error::{CheckIsLeaderError, ClientWriteError, ForwardToLeader, InitializeError, RaftError};
use openraft::{BasicNode, Raft};
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::api::{
    batch_request, BatchOp, ChangeMembershipRequest, DeleteRange, ErrorBody, GetResponse, InitRequest, KeyValue,
    Member, ScanResponse, Status, WriteResponse, DEFAULT_SCAN_LIMIT, MAX_SCAN_LIMIT,
};
use crate::identity::{ClusterIdentity, Refusal, CLUSTER_HEADER};
use crate::network::{SnapshotChunk, APPEND_PATH, SNAPSHOT_PATH, TARGET_HEADER, VOTE_PATH};

/// What the HTTP handlers share: the node's Raft and a handle on its
/// state machine for local reads.
#[derive(Clone)]
pub(crate) struct NodeState {
    /// This node's id.
    pub(crate) id: NodeId,
    /// The address it serves on, `host:port`.
    pub(crate) addr: String,
    /// Largest request body accepted.
    pub(crate) max_body_bytes: usize,
    /// Its Raft.
    pub(crate) raft: Raft<TypeConfig>,
    /// The applied state (a clone sharing the database with the one
    /// openraft drives).
    pub(crate) state_machine: StateMachine,
    /// The cluster its directory belongs to.
    pub(crate) identity: ClusterIdentity,
}

/// Ebb properties `GET /status` reports, of the data column family.
const STATUS_PROPERTIES: [&str; 6] = [
    "ebb.estimate-num-keys",
    "ebb.num-files-at-level0",
    "ebb.num-files-at-level1",
    "ebb.total-sst-files-size",
    "ebb.cur-size-all-mem-tables",
    "ebb.num-immutable-mem-table",
];

/// The node's routes.
pub(crate) fn router(state: NodeState) -> Router {
    // The body limit is checked by the handlers' `Bytes` extractor; its
    // rejection becomes a JSON 413 in `body`.
    let limit = state.max_body_bytes;
    Router::new()
        .route("/kv/{*key}", put(put_key).get(get_key).delete(delete_key))
        .route("/delete_range", post(delete_range))
        .route("/batch", post(batch))
        .route("/scan", get(scan))
        .route("/status", get(status))
        .route("/init", post(init))
        .route("/add-learner", post(add_learner))
        .route("/change-membership", post(change_membership))
        .route(APPEND_PATH, post(raft_append))
        .route(VOTE_PATH, post(raft_vote))
        .route(SNAPSHOT_PATH, post(raft_snapshot))
        .fallback(unknown_path)
        .layer(DefaultBodyLimit::max(limit))
        .with_state(state)
}

/// An error answer.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    message: String,
    leader: Option<Member>,
    location: Option<String>,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), leader: None, location: None }
    }

    fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// This node is not the leader: a 307 to the same request at the
    /// leader if it is known, else a 503 to retry later.
    fn forward(state: &NodeState, uri: &Uri, to: &ForwardToLeader<NodeId, BasicNode>) -> Self {
        match (to.leader_id, &to.leader_node) {
            (Some(id), Some(node)) => {
                let path = uri.path_and_query().map_or("/", |p| p.as_str());
                ApiError {
                    status: StatusCode::TEMPORARY_REDIRECT,
                    message: format!("node {} is not the leader; the leader is node {id} at {}", state.id, node.addr),
                    leader: Some(Member { id, addr: node.addr.clone() }),
                    location: Some(format!("http://{}{path}", node.addr)),
                }
            }
            _ => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("node {} is not the leader and knows of none (an election may be under way); retry", state.id),
            ),
        }
    }

    fn fatal(e: &openraft::error::Fatal<NodeId>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, format!("raft stopped: {e}"))
    }

    fn from_write(state: &NodeState, uri: &Uri, e: RaftError<NodeId, ClientWriteError<NodeId, BasicNode>>) -> Self {
        match e {
            RaftError::APIError(ClientWriteError::ForwardToLeader(to)) => Self::forward(state, uri, &to),
            RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
                Self::bad_request(format!("membership change refused: {e}"))
            }
            RaftError::Fatal(e) => Self::fatal(&e),
        }
    }

    fn from_read(state: &NodeState, uri: &Uri, e: RaftError<NodeId, CheckIsLeaderError<NodeId, BasicNode>>) -> Self {
        match e {
            RaftError::APIError(CheckIsLeaderError::ForwardToLeader(to)) => Self::forward(state, uri, &to),
            RaftError::APIError(CheckIsLeaderError::QuorumNotEnough(e)) => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, format!("no quorum confirms the leader: {e}; retry"))
            }
            RaftError::Fatal(e) => Self::fatal(&e),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(ErrorBody { error: self.message, leader: self.leader });
        match self.location {
            Some(location) => (self.status, [(header::LOCATION, location)], body).into_response(),
            None => (self.status, body).into_response(),
        }
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// The request body, or why it was refused (over the limit: 413).
fn body(state: &NodeState, body: Result<Bytes, BytesRejection>) -> ApiResult<Bytes> {
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(e.status(), format!("request body over {} bytes", state.max_body_bytes))
        } else {
            ApiError::new(e.status(), format!("reading the request body: {}", e.body_text()))
        }
    })
}

/// The body as JSON of type `T` (whatever its `Content-Type`, so that
/// `curl -d` works).
fn json_body<T: DeserializeOwned>(state: &NodeState, raw: Result<Bytes, BytesRejection>, what: &str) -> ApiResult<T> {
    let raw = body(state, raw)?;
    serde_json::from_slice(&raw).map_err(|e| ApiError::bad_request(format!("malformed JSON for {what}: {e}")))
}

fn key_from(path: Result<Path<String>, PathRejection>) -> ApiResult<String> {
    path.map(|Path(key)| key).map_err(|e| ApiError::bad_request(format!("bad key in the path: {}", e.body_text())))
}

fn query<T>(q: Result<Query<T>, QueryRejection>) -> ApiResult<T> {
    q.map(|Query(q)| q).map_err(|e| ApiError::bad_request(format!("bad query string: {}", e.body_text())))
}

/// Text of stored bytes. Everything written through this API is UTF-8;
/// bytes written otherwise are shown with U+FFFD for what is not.
fn text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// Proposes `request` after checking Ebb can apply it.
async fn write(state: &NodeState, uri: &Uri, request: Request) -> ApiResult<Json<WriteResponse>> {
    request.validate().map_err(|e| ApiError::bad_request(e.to_string()))?;
    let answer = state.raft.client_write(request).await.map_err(|e| ApiError::from_write(state, uri, e))?;
    Ok(Json(WriteResponse { log_index: answer.log_id.index, previous: answer.data.previous.map(text) }))
}

/// Unless `stale`, waits until reading the local state machine is
/// linearizable (this node is the leader and has applied every entry
/// committed before now).
async fn read_barrier(state: &NodeState, uri: &Uri, stale: bool) -> ApiResult<()> {
    // A node whose Raft stopped (a storage error) serves nothing, not even
    // stale reads: its state would never catch up again.
    stopped(state)?;
    if !stale {
        state.raft.ensure_linearizable().await.map_err(|e| ApiError::from_read(state, uri, e))?;
    }
    Ok(())
}

/// A 500 if this node's Raft has stopped on a fatal error.
fn stopped(state: &NodeState) -> ApiResult<()> {
    match &state.raft.metrics().borrow().running_state {
        Ok(()) => Ok(()),
        Err(e) => Err(ApiError::fatal(e)),
    }
}

fn read_failed(e: ebb_raft::ReadError) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("reading the state machine: {e}"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadParams {
    #[serde(default)]
    stale: bool,
}

async fn put_key(
    State(state): State<NodeState>,
    uri: Uri,
    path: Result<Path<String>, PathRejection>,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<WriteResponse>> {
    let key = key_from(path)?;
    let value = String::from_utf8(body(&state, raw)?.to_vec())
        .map_err(|e| ApiError::bad_request(format!("the value (request body) is not UTF-8: {e}")))?;
    write(&state, &uri, Request::Set { key: key.into_bytes(), value: value.into_bytes() }).await
}

async fn delete_key(
    State(state): State<NodeState>,
    uri: Uri,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Json<WriteResponse>> {
    let key = key_from(path)?;
    write(&state, &uri, Request::Delete { key: key.into_bytes() }).await
}

async fn get_key(
    State(state): State<NodeState>,
    uri: Uri,
    path: Result<Path<String>, PathRejection>,
    params: Result<Query<ReadParams>, QueryRejection>,
) -> ApiResult<Response> {
    let key = key_from(path)?;
    let params = query(params)?;
    read_barrier(&state, &uri, params.stale).await?;
    let value = state.state_machine.get(key.as_bytes()).map_err(read_failed)?.map(text);
    let status = if value.is_some() { StatusCode::OK } else { StatusCode::NOT_FOUND };
    Ok((status, Json(GetResponse { key, value })).into_response())
}

async fn delete_range(
    State(state): State<NodeState>,
    uri: Uri,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<WriteResponse>> {
    let range: DeleteRange = json_body(&state, raw, "a range ({\"begin\": ..., \"end\": ...})")?;
    write(&state, &uri, Request::DeleteRange { begin: range.begin.into_bytes(), end: range.end.into_bytes() }).await
}

async fn batch(
    State(state): State<NodeState>,
    uri: Uri,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<WriteResponse>> {
    let ops: Vec<BatchOp> =
        json_body(&state, raw, "a batch (an array of {\"op\": \"set\"|\"delete\"|\"delete_range\", ...})")?;
    write(&state, &uri, batch_request(ops)).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScanParams {
    #[serde(default)]
    start: String,
    end: Option<String>,
    limit: Option<usize>,
    #[serde(default)]
    stale: bool,
}

async fn scan(
    State(state): State<NodeState>,
    uri: Uri,
    params: Result<Query<ScanParams>, QueryRejection>,
) -> ApiResult<Json<ScanResponse>> {
    let params = query(params)?;
    let limit = params.limit.unwrap_or(DEFAULT_SCAN_LIMIT);
    if limit == 0 {
        return Err(ApiError::bad_request(format!("limit must be at least 1 (at most {MAX_SCAN_LIMIT} are returned)")));
    }
    let limit = limit.min(MAX_SCAN_LIMIT);
    if let Some(end) = &params.end {
        if params.start > *end {
            return Err(ApiError::bad_request(format!("start {:?} is after end {end:?}", params.start)));
        }
    }
    read_barrier(&state, &uri, params.stale).await?;
    let end = params.end.as_deref().map(str::as_bytes);
    let mut items = state.state_machine.scan(params.start.as_bytes(), end, limit + 1).map_err(read_failed)?;
    let more = items.len() > limit;
    items.truncate(limit);
    let items = items.into_iter().map(|(key, value)| KeyValue { key: text(key), value: text(value) }).collect();
    Ok(Json(ScanResponse { items, more }))
}

async fn status(State(state): State<NodeState>) -> Json<Status> {
    let metrics = state.raft.metrics().borrow().clone();
    let membership = metrics.membership_config.membership();
    let addr_of = |id: NodeId| membership.get_node(&id).map(|n| n.addr.clone());
    let ebb = STATUS_PROPERTIES
        .iter()
        .filter_map(|name| state.state_machine.data_property(name).map(|value| (name.to_string(), value)))
        .collect::<BTreeMap<_, _>>();
    Json(Status {
        id: state.id,
        state: format!("{:?}", metrics.state),
        leader: metrics.current_leader.and_then(|id| addr_of(id).map(|addr| Member { id, addr })),
        term: metrics.current_term,
        last_log_index: metrics.last_log_index,
        last_applied: metrics.last_applied.map(|l| l.index),
        snapshot: metrics.snapshot.map(|l| l.index),
        voters: membership.voter_ids().collect(),
        learners: membership.learner_ids().collect(),
        nodes: membership.nodes().map(|(id, n)| Member { id: *id, addr: n.addr.clone() }).collect(),
        ebb,
        stopped: metrics.running_state.as_ref().err().map(ToString::to_string),
        cluster_id: state.identity.get(),
    })
}

async fn init(State(state): State<NodeState>, raw: Result<Bytes, BytesRejection>) -> ApiResult<Json<Status>> {
    let raw = body(&state, raw)?;
    let request: InitRequest = if raw.iter().all(u8::is_ascii_whitespace) {
        InitRequest::default()
    } else {
        serde_json::from_slice(&raw).map_err(|e| {
            ApiError::bad_request(format!(
                "malformed JSON for init ({{\"members\": {{\"1\": \"host:port\", ...}}}}): {e}"
            ))
        })?
    };
    let mut members: BTreeMap<NodeId, BasicNode> =
        request.members.into_iter().map(|(id, addr)| (id, BasicNode::new(addr))).collect();
    if members.is_empty() {
        members.insert(state.id, BasicNode::new(state.addr.clone()));
    }
    if !members.contains_key(&state.id) {
        return Err(ApiError::bad_request(format!("members must include this node, node {}", state.id)));
    }
    let mut by_addr: BTreeMap<&str, NodeId> = BTreeMap::new();
    for (id, node) in &members {
        if let Some(other) = by_addr.insert(node.addr.as_str(), *id) {
            return Err(ApiError::bad_request(format!(
                "nodes {other} and {id} are both given address {}: each member needs its own",
                node.addr
            )));
        }
    }

    state.raft.initialize(members).await.map_err(|e| match e {
        RaftError::APIError(InitializeError::NotAllowed(e)) => {
            ApiError::new(StatusCode::CONFLICT, format!("already initialized or holding a log: {e}"))
        }
        RaftError::APIError(InitializeError::NotInMembers(e)) => ApiError::bad_request(e.to_string()),
        RaftError::Fatal(e) => ApiError::fatal(&e),
    })?;
    state
        .identity
        .create()
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("recording the cluster id: {e}")))?;
    Ok(status(State(state)).await)
}

async fn add_learner(
    State(state): State<NodeState>,
    uri: Uri,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<WriteResponse>> {
    let member: Member = json_body(&state, raw, "a learner ({\"id\": 4, \"addr\": \"host:port\"})")?;
    check_new_member(&state, &member)?;
    // Blocking: answers once the learner has caught up with the log.
    let answer = state
        .raft
        .add_learner(member.id, BasicNode::new(member.addr), true)
        .await
        .map_err(|e| ApiError::from_write(&state, &uri, e))?;
    Ok(Json(WriteResponse { log_index: answer.log_id.index, previous: None }))
}

/// Refuses a learner whose id is a member at another address, or whose
/// address is another member's: openraft would keep the old address (or
/// count one process twice). The same id at the same address is a retry.
fn check_new_member(state: &NodeState, new: &Member) -> ApiResult<()> {
    let metrics = state.raft.metrics().borrow().clone();
    let membership = metrics.membership_config.membership();
    for (id, node) in membership.nodes() {
        if *id == new.id && node.addr != new.addr {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!(
                    "node {id} is already a member at {}: remove it first (change-membership), or give the new node another id",
                    node.addr
                ),
            ));
        }
        if *id != new.id && node.addr == new.addr {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                format!("{} is already node {id}'s address: two members cannot share one", new.addr),
            ));
        }
    }
    Ok(())
}

async fn change_membership(
    State(state): State<NodeState>,
    uri: Uri,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Json<WriteResponse>> {
    let request: ChangeMembershipRequest = json_body(&state, raw, "a membership ({\"members\": [1, 2, 3]})")?;
    let members: BTreeSet<NodeId> = request.members.into_iter().collect();
    if members.is_empty() {
        return Err(ApiError::bad_request("members is empty: a cluster needs at least one voter"));
    }
    // `retain: false`: voters left out are removed, not kept as learners.
    let answer =
        state.raft.change_membership(members, false).await.map_err(|e| ApiError::from_write(&state, &uri, e))?;
    Ok(Json(WriteResponse { log_index: answer.log_id.index, previous: None }))
}

/// Refuses a Raft message meant for another node (docs/cluster.md,
/// "Bad input"): one sent without the header (by hand, with curl) is
/// taken.
fn check_target(state: &NodeState, headers: &HeaderMap) -> ApiResult<()> {
    check_cluster(state, headers)?;
    let Some(target) = headers.get(TARGET_HEADER) else { return Ok(()) };
    let target = target.to_str().ok().and_then(|t| t.trim().parse::<NodeId>().ok()).ok_or_else(|| {
        ApiError::bad_request(format!("the {TARGET_HEADER} header does not hold a node id: {target:?}"))
    })?;
    if target != state.id {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "this is node {}, not node {target}: the cluster has node {target} at {}, where node {} is serving (two nodes given one id, or a member's address reused)",
                state.id, state.addr, state.id
            ),
        ));
    }
    Ok(())
}

/// Refuses a Raft message from another cluster (the sender's cluster id
/// is not this node's); a node without one yet adopts the sender's.
fn check_cluster(state: &NodeState, headers: &HeaderMap) -> ApiResult<()> {
    let Some(theirs) = headers.get(CLUSTER_HEADER) else { return Ok(()) };
    let theirs =
        theirs.to_str().map_err(|_| ApiError::bad_request(format!("the {CLUSTER_HEADER} header is not text")))?.trim();
    state.identity.admit(theirs).map_err(|refusal| match refusal {
        Refusal::Malformed(id) => {
            ApiError::bad_request(format!("the {CLUSTER_HEADER} header does not hold a cluster id: {id:?}"))
        }
        Refusal::OtherCluster { ours } => ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "node {}'s directory belongs to cluster {ours}, not to cluster {theirs} that sent this message: a directory of another cluster; start this node with a fresh directory",
                state.id
            ),
        ),
        Refusal::Io(e) => ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, format!("recording the cluster id: {e}")),
    })
}

async fn raft_append(
    State(state): State<NodeState>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    check_target(&state, &headers)?;
    let rpc: openraft::raft::AppendEntriesRequest<TypeConfig> = json_body(&state, raw, "append entries")?;
    Ok(Json(state.raft.append_entries(rpc).await).into_response())
}

async fn raft_vote(
    State(state): State<NodeState>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    check_target(&state, &headers)?;
    let rpc: openraft::raft::VoteRequest<NodeId> = json_body(&state, raw, "vote")?;
    Ok(Json(state.raft.vote(rpc).await).into_response())
}

async fn raft_snapshot(
    State(state): State<NodeState>,
    headers: HeaderMap,
    raw: Result<Bytes, BytesRejection>,
) -> ApiResult<Response> {
    check_target(&state, &headers)?;
    let chunk: SnapshotChunk = json_body(&state, raw, "install snapshot")?;
    Ok(Json(state.raft.install_snapshot(chunk.into()).await).into_response())
}

async fn unknown_path(uri: Uri) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, format!("no such endpoint: {}", uri.path()))
}
