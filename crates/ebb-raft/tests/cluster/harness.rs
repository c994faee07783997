//! An in-process cluster: `openraft::Raft` nodes, each on its own Ebb
//! database (a directory of one temporary directory, opened by
//! `ebb_raft::open`), joined by a [`Router`] that calls the target node's
//! `Raft` methods directly.
//!
//! The router is where the faults are: a node isolated (nothing to or from
//! it), a set of nodes cut off from the rest, and a fraction of messages
//! lost, drawn from a seeded generator. A lost message is lost either on
//! the way there (the target never sees it) or on the way back (the target
//! acted on it, the sender hears nothing), as on a real network. The
//! sequence of losses is seeded but the order in which tasks draw from the
//! generator is the scheduler's, so a run is not replayed exactly.
//!
//! Clients reach every node, whatever the faults: only messages between
//! nodes go through the router.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ebb_raft::{NodeId, Request, StateMachine, TypeConfig};
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, ClientWriteResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Config, ServerState, SnapshotPolicy};
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tempfile::TempDir;

pub type Raft = openraft::Raft<TypeConfig>;

/// An acknowledged write: its log id, and the state machine's `Response`
/// in `data`.
pub type Written = ClientWriteResponse<TypeConfig>;

/// How long one client request may take before the client gives up on it
/// (an election with the timeouts of [`fast_config`] takes well under this).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// How long a test waits for the cluster to reach a state it must reach.
pub const WAIT: Duration = Duration::from_secs(10);

/// Short timeouts so that elections, and so the tests, are quick:
/// heartbeats every 50 ms, elections after 150-300 ms of silence.
pub fn fast_config() -> Config {
    Config {
        cluster_name: "ebb-raft-tests".into(),
        heartbeat_interval: 50,
        election_timeout_min: 150,
        election_timeout_max: 300,
        // Snapshots only when a test asks for one.
        snapshot_policy: SnapshotPolicy::Never,
        ..Config::default()
    }
}

/// Runs `body` and fails the test if it takes longer than `limit`.
pub async fn bounded<T>(limit: Duration, body: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, body).await {
        Ok(value) => value,
        Err(_) => panic!("the test did not finish within {limit:?}"),
    }
}

#[derive(Default)]
struct Faults {
    isolated: BTreeSet<NodeId>,
    /// Nodes that reach each other but none of the others.
    cut_off: Option<BTreeSet<NodeId>>,
    /// Groups cut off from everyone outside them ([`Router::split`]).
    groups: Vec<BTreeSet<NodeId>>,
    loss_rate: f64,
    rng: Option<StdRng>,
}

impl Faults {
    fn blocked(&self, from: NodeId, to: NodeId) -> bool {
        self.isolated.contains(&from)
            || self.isolated.contains(&to)
            || self.cut_off.as_ref().is_some_and(|side| side.contains(&from) != side.contains(&to))
            || self.groups.iter().any(|group| group.contains(&from) != group.contains(&to))
    }

    fn lose(&mut self) -> bool {
        let rate = self.loss_rate;
        match &mut self.rng {
            Some(rng) if rate > 0.0 => rng.gen_bool(rate),
            _ => false,
        }
    }
}

/// Why a message did not arrive (or its answer did not come back).
enum Lost {
    /// The link is cut: openraft backs off before trying again.
    Unreachable,
    /// This one message was lost: openraft retries.
    Dropped,
}

impl Lost {
    fn into_rpc_error<E: std::error::Error>(self) -> RPCError<NodeId, BasicNode, E> {
        match self {
            Lost::Unreachable => RPCError::Unreachable(Unreachable::new(&io::Error::new(
                io::ErrorKind::NotConnected,
                "cut off by the test router",
            ))),
            Lost::Dropped => RPCError::Network(NetworkError::new(&io::Error::new(
                io::ErrorKind::TimedOut,
                "message lost by the test router",
            ))),
        }
    }
}

/// The nodes that are running and the faults between them.
#[derive(Clone, Default)]
pub struct Router {
    nodes: Arc<Mutex<BTreeMap<NodeId, Raft>>>,
    faults: Arc<Mutex<Faults>>,
}

impl Router {
    /// Nothing reaches `id` and nothing leaves it, until [`Router::heal`].
    pub fn isolate(&self, id: NodeId) {
        self.faults.lock().isolated.insert(id);
    }

    /// `side` reaches only itself, the others only themselves.
    pub fn partition(&self, side: impl IntoIterator<Item = NodeId>) {
        self.faults.lock().cut_off = Some(side.into_iter().collect());
    }

    /// Each of `groups` reaches only itself: `split(&[&[1, 2], &[3, 4], &[5]])`
    /// leaves no side with a majority of five. Replaces an earlier split;
    /// other faults stay.
    pub fn split(&self, groups: &[&[NodeId]]) {
        self.faults.lock().groups = groups.iter().map(|group| group.iter().copied().collect()).collect();
    }

    /// Loses each message (each way) with probability `rate`.
    pub fn lose_messages(&self, rate: f64, seed: u64) {
        let mut faults = self.faults.lock();
        faults.loss_rate = rate;
        faults.rng = Some(StdRng::seed_from_u64(seed));
    }

    /// Ends every fault.
    pub fn heal(&self) {
        *self.faults.lock() = Faults::default();
    }

    fn add(&self, id: NodeId, raft: Raft) {
        self.nodes.lock().insert(id, raft);
    }

    fn remove(&self, id: NodeId) {
        self.nodes.lock().remove(&id);
    }

    /// The target's `Raft` if a message from `from` gets to `to`.
    fn send(&self, from: NodeId, to: NodeId) -> Result<Raft, Lost> {
        let mut faults = self.faults.lock();
        if faults.blocked(from, to) {
            return Err(Lost::Unreachable);
        }
        if faults.lose() {
            return Err(Lost::Dropped);
        }
        self.nodes.lock().get(&to).cloned().ok_or(Lost::Unreachable)
    }

    /// Whether the answer to a message gets back (the link may have been
    /// cut while the target handled it).
    fn answer(&self, from: NodeId, to: NodeId) -> Result<(), Lost> {
        let mut faults = self.faults.lock();
        if faults.blocked(from, to) {
            return Err(Lost::Unreachable);
        }
        if faults.lose() {
            return Err(Lost::Dropped);
        }
        Ok(())
    }
}

/// One node's view of the network: openraft's `RaftNetworkFactory`.
pub struct NodeNetwork {
    router: Router,
    id: NodeId,
}

impl RaftNetworkFactory<TypeConfig> for NodeNetwork {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> Connection {
        Connection { router: self.router.clone(), from: self.id, to: target }
    }
}

/// Messages from one node to another: openraft's `RaftNetwork`.
/// `full_snapshot` is openraft's default, which sends the snapshot in
/// chunks through `install_snapshot`.
pub struct Connection {
    router: Router,
    from: NodeId,
    to: NodeId,
}

impl Connection {
    async fn deliver<T, E, F, Fut>(&self, call: F) -> Result<T, RPCError<NodeId, BasicNode, E>>
    where
        E: std::error::Error,
        F: FnOnce(Raft) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let raft = self.router.send(self.from, self.to).map_err(Lost::into_rpc_error)?;
        let result = call(raft).await;
        self.router.answer(self.from, self.to).map_err(Lost::into_rpc_error)?;
        result.map_err(|e| RPCError::RemoteError(RemoteError::new(self.to, e)))
    }
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.deliver(|raft| async move { raft.append_entries(rpc).await }).await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>>
    {
        self.deliver(|raft| async move { raft.install_snapshot(rpc).await }).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.deliver(|raft| async move { raft.vote(rpc).await }).await
    }

    /// openraft waits 500 ms after an unreachable node by default; a healed
    /// link is used again sooner with this.
    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(Duration::from_millis(50)))
    }
}

/// A running node: its `Raft` and (sharing its database) its state machine,
/// for reading what it applied.
#[derive(Clone)]
pub struct Node {
    pub raft: Raft,
    pub state: StateMachine,
}

/// Handles on the running nodes, for clients (cloned into client tasks).
#[derive(Clone)]
pub struct Nodes(BTreeMap<NodeId, Node>);

impl Nodes {
    pub fn get(&self, id: NodeId) -> &Node {
        self.0.get(&id).unwrap_or_else(|| panic!("node {id} is not running"))
    }

    pub fn ids(&self) -> Vec<NodeId> {
        self.0.keys().copied().collect()
    }

    /// The node among `among` that its own metrics say leads, with the
    /// highest term of those that do (an isolated old leader still thinks
    /// it leads, at an older term). Polls the metrics every 10 ms, for at
    /// most `limit`.
    pub async fn leader_among(&self, among: &[NodeId], limit: Duration) -> Option<NodeId> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let leader = among
                .iter()
                .filter_map(|id| self.0.get(id))
                .map(|node| node.raft.metrics().borrow().clone())
                .filter(|m| m.state == ServerState::Leader && m.current_leader == Some(m.id))
                .max_by_key(|m| m.current_term)
                .map(|m| m.id);
            if leader.is_some() || tokio::time::Instant::now() >= deadline {
                return leader;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Every node whose metrics say it leads, in any term: an old leader
    /// cut off from the majority is among them until it hears of a newer
    /// term.
    pub fn claimants(&self) -> Vec<NodeId> {
        let leads = |node: &Node| {
            let metrics = node.raft.metrics().borrow().clone();
            metrics.state == ServerState::Leader && metrics.current_leader == Some(metrics.id)
        };
        self.0.iter().filter(|(_, node)| leads(node)).map(|(&id, _)| id).collect()
    }

    /// Proposes `request` on `id`; its log id and response once applied
    /// there, or why not (an error, or no answer within
    /// [`REQUEST_TIMEOUT`]). Wait for the returned index rather than read
    /// the metrics: they may not show the entry applied yet.
    pub async fn write_on(&self, id: NodeId, request: Request) -> Result<Written, String> {
        match tokio::time::timeout(REQUEST_TIMEOUT, self.get(id).raft.client_write(request)).await {
            Ok(Ok(response)) => Ok(response),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("no answer within {REQUEST_TIMEOUT:?}")),
        }
    }

    /// Proposes `request` to the leader, trying again (at most `attempts`
    /// times) with whichever node leads then. `None` if no attempt was
    /// acknowledged: the write may or may not have been committed.
    pub async fn write(&self, request: Request, attempts: usize) -> Option<Written> {
        let ids = self.ids();
        for _ in 0..attempts {
            let Some(leader) = self.leader_among(&ids, WAIT).await else { continue };
            if let Ok(response) = self.write_on(leader, request.clone()).await {
                return Some(response);
            }
        }
        None
    }

    /// Waits until each of `ids` has applied the entry at `index`.
    pub async fn wait_applied(&self, ids: &[NodeId], index: u64) {
        for &id in ids {
            let waited = self.get(id).raft.wait(Some(WAIT)).applied_index_at_least(Some(index), "applied").await;
            if let Err(e) = waited {
                panic!("node {id} did not apply index {index}: {e}");
            }
        }
    }

    /// `key`'s value in `id`'s applied state.
    pub fn read(&self, id: NodeId, key: &[u8]) -> Option<Vec<u8>> {
        self.get(id).state.get(key).unwrap_or_else(|e| panic!("node {id} cannot read its state: {e}"))
    }
}

/// N nodes, numbered from 1, each with an Ebb database in `dir`.
pub struct Cluster {
    pub router: Router,
    nodes: Nodes,
    config: Arc<Config>,
    dir: TempDir,
}

impl Cluster {
    /// Starts `n` nodes with [`fast_config`], makes them the members, and
    /// waits for a leader.
    pub async fn start(n: u64) -> Cluster {
        Cluster::start_with(n, fast_config()).await
    }

    pub async fn start_with(n: u64, config: Config) -> Cluster {
        Cluster::start_some(n, n, config).await
    }

    /// Starts `running` nodes with `config` and makes the first `members`
    /// of them the members; the others run without a membership until they
    /// are added ([`Cluster::add_learner`]). Waits for a leader.
    pub async fn start_some(running: u64, members: u64, config: Config) -> Cluster {
        let config = Arc::new(config.validate().expect("a valid openraft config"));
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut cluster = Cluster { router: Router::default(), nodes: Nodes(BTreeMap::new()), config, dir };
        for id in 1..=running {
            cluster.start_node(id).await;
        }
        let members: BTreeMap<NodeId, BasicNode> = (1..=members).map(|id| (id, node_address(id))).collect();
        cluster.nodes.get(1).raft.initialize(members).await.expect("initialize the cluster");
        cluster.leader().await;
        cluster
    }

    fn path(&self, id: NodeId) -> PathBuf {
        self.dir.path().join(format!("node-{id}"))
    }

    /// Opens (or creates) `id`'s database and starts its `Raft` on it.
    async fn start_node(&mut self, id: NodeId) {
        let (log_store, state) = ebb_raft::open(self.path(id), ebb::Options::default()).expect("open the store");
        let network = NodeNetwork { router: self.router.clone(), id };
        let raft =
            Raft::new(id, Arc::clone(&self.config), network, log_store, state.clone()).await.expect("start the node");
        self.router.add(id, raft.clone());
        self.nodes.0.insert(id, Node { raft, state });
    }

    /// Shuts `id` down and drops every handle on its database, so that
    /// the database is closed.
    pub async fn stop(&mut self, id: NodeId) {
        self.router.remove(id);
        let node = self.nodes.0.remove(&id).unwrap_or_else(|| panic!("node {id} is not running"));
        node.raft.shutdown().await.expect("shut the node down");
    }

    /// Reopens `id`'s database from its directory and starts it again.
    pub async fn restart(&mut self, id: NodeId) {
        self.start_node(id).await;
    }

    pub fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    pub fn ids(&self) -> Vec<NodeId> {
        self.nodes.ids()
    }

    /// The leader of all the nodes (highest term), waiting for one.
    pub async fn leader(&self) -> NodeId {
        self.leader_among(&self.ids()).await
    }

    /// A leader among `among`, waiting for one.
    pub async fn leader_among(&self, among: &[NodeId]) -> NodeId {
        match self.nodes.leader_among(among, WAIT).await {
            Some(id) => id,
            None => panic!("no leader among {among:?} within {WAIT:?}"),
        }
    }

    /// Writes through the leader, waiting for one; the log index of the
    /// write. A barrier: once every node applied that index, each has
    /// every write acknowledged before it. Tries again with the next leader
    /// when the one it asked stepped down (a healed partition may bring a
    /// newer term), for at most [`WAIT`].
    pub async fn write_barrier(&self) -> u64 {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let leader = self.leader().await;
            let raft = &self.nodes.get(leader).raft;
            let request = Request::Set { key: b"barrier".to_vec(), value: Vec::new() };
            let why = match tokio::time::timeout_at(deadline, raft.client_write(request)).await {
                Ok(Ok(response)) => return response.log_id.index,
                Ok(Err(e)) => e.to_string(),
                Err(_) => format!("no answer from node {leader}"),
            };
            if tokio::time::Instant::now() >= deadline {
                panic!("the barrier write failed for {WAIT:?}, last: {why}");
            }
        }
    }

    /// Shuts every node down (before the directory goes).
    pub async fn shutdown(mut self) {
        for id in self.ids() {
            self.stop(id).await;
        }
    }
}

/// The address a node is known by in the membership (the router finds
/// nodes by id; the address is only recorded).
pub fn node_address(id: NodeId) -> BasicNode {
    BasicNode { addr: format!("node-{id}") }
}

/// The voters of the membership `id` has applied or appended last, by its
/// metrics.
pub fn voters(nodes: &Nodes, id: NodeId) -> BTreeSet<NodeId> {
    nodes.get(id).raft.metrics().borrow().membership_config.membership().voter_ids().collect()
}

/// Every key and value `id` has applied, in key order.
pub fn contents(nodes: &Nodes, id: NodeId) -> Vec<(Vec<u8>, Vec<u8>)> {
    nodes.get(id).state.scan(b"", None, usize::MAX).unwrap_or_else(|e| panic!("node {id} cannot scan its state: {e}"))
}

/// Fails the test unless every node of `ids` has applied the same keys and
/// values; returns how many there are.
pub fn assert_same_contents(nodes: &Nodes, ids: &[NodeId]) -> usize {
    let first = contents(nodes, ids[0]);
    for &id in &ids[1..] {
        assert!(contents(nodes, id) == first, "node {id} applied other keys or values than node {}", ids[0]);
    }
    first.len()
}

/// A `Set` of `key` to `value`.
pub fn set(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Request {
    Request::Set { key: key.into(), value: value.into() }
}
