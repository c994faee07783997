//! Three `openraft::Raft` nodes in one process, each on its own store,
//! joined by a router that calls the target's `Raft` directly (the same
//! for every store: what differs between runs is the storage only). The
//! clients are tasks calling the leader's `client_write`, or reading
//! through `ensure_linearizable` and the leader's state machine, or a
//! follower's state machine as it is (stale).

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ebb_raft::{Request, Response};
use openraft::error::{InstallSnapshotError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::impls::OneshotResponder;
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse, VoteRequest,
    VoteResponse,
};
use openraft::storage::{RaftLogStorage, RaftStateMachine};
use openraft::{BasicNode, Config, Entry, Raft, RaftTypeConfig, SnapshotPolicy};
use parking_lot::Mutex;
use serde_json::json;

use crate::load::{disk_bytes, Latencies, Load};

/// The bounds every benchmarked store's type configuration meets.
pub trait Cfg:
    RaftTypeConfig<
    D = Request,
    R = Response,
    NodeId = u64,
    Node = BasicNode,
    Entry = Entry<Self>,
    Responder = OneshotResponder<Self>,
>
{
}
impl<C> Cfg for C where
    C: RaftTypeConfig<
        D = Request,
        R = Response,
        NodeId = u64,
        Node = BasicNode,
        Entry = Entry<C>,
        Responder = OneshotResponder<C>,
    >
{
}

/// Reads a replica's applied state directly.
pub trait LocalRead: Clone + Send + Sync + 'static {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String>;
}

impl LocalRead for ebb_raft::StateMachine {
    fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, String> {
        self.get(key).map_err(|e| e.to_string())
    }
}

/// The running nodes.
pub struct Router<C: Cfg> {
    nodes: Arc<Mutex<BTreeMap<u64, Raft<C>>>>,
}

impl<C: Cfg> Clone for Router<C> {
    fn clone(&self) -> Self {
        Router { nodes: Arc::clone(&self.nodes) }
    }
}

pub struct Connection<C: Cfg> {
    router: Router<C>,
    target: u64,
}

impl<C: Cfg> Connection<C> {
    fn raft<E: std::error::Error>(&self) -> Result<Raft<C>, Box<RPCError<u64, BasicNode, E>>> {
        self.router.nodes.lock().get(&self.target).cloned().ok_or_else(|| {
            Box::new(RPCError::Unreachable(Unreachable::new(&io::Error::new(
                io::ErrorKind::NotConnected,
                "no such node",
            ))))
        })
    }
}

impl<C: Cfg> RaftNetworkFactory<C> for Router<C> {
    type Network = Connection<C>;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> Connection<C> {
        Connection { router: self.clone(), target }
    }
}

impl<C: Cfg> RaftNetwork<C> for Connection<C> {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<C>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let raft = self.raft().map_err(|e| *e)?;
        raft.append_entries(rpc).await.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<C>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, RPCError<u64, BasicNode, RaftError<u64, InstallSnapshotError>>> {
        let raft = self.raft().map_err(|e| *e)?;
        raft.install_snapshot(rpc).await.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, BasicNode, RaftError<u64>>> {
        let raft = self.raft().map_err(|e| *e)?;
        raft.vote(rpc).await.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

/// What the cluster benchmark runs.
pub struct ClusterParams {
    pub clients: usize,
    pub seconds: f64,
    pub value_bytes: usize,
    pub keys: u64,
    /// Reads after the writes (linearizable, then stale).
    pub reads: bool,
    /// Square wave: writes for `period * duty` seconds, idle for the rest
    /// of each `period`; `None` writes all the time.
    pub wave: Option<(f64, f64)>,
}

/// A node's stores, its reader and its directory.
pub struct NodeStores<LS, SM, R> {
    pub log: LS,
    pub sm: SM,
    pub reader: R,
    pub dir: PathBuf,
}

/// The same configuration as `ebb-server`'s defaults (snapshots every
/// 5000 entries, 1000 kept behind), with heartbeats every 50 ms.
fn config() -> Result<Arc<Config>, String> {
    let config = Config {
        cluster_name: "ebb-raft-bench".into(),
        heartbeat_interval: 50,
        election_timeout_min: 1000,
        election_timeout_max: 2000,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(5000),
        max_in_snapshot_log_to_keep: 1000,
        ..Config::default()
    };
    Ok(Arc::new(config.validate().map_err(|e| e.to_string())?))
}

/// Runs the phases on three nodes made of `stores` and returns one JSON
/// object per phase.
pub async fn run<C, LS, SM, R>(
    stores: Vec<NodeStores<LS, SM, R>>,
    p: &ClusterParams,
) -> Result<Vec<serde_json::Value>, String>
where
    C: Cfg,
    LS: RaftLogStorage<C>,
    SM: RaftStateMachine<C>,
    R: LocalRead,
{
    let router = Router::<C> { nodes: Arc::default() };
    let config = config()?;
    let mut readers = BTreeMap::new();
    let mut dirs = BTreeMap::new();
    let mut members = BTreeMap::new();
    for (i, node) in stores.into_iter().enumerate() {
        let id = i as u64 + 1;
        let raft = Raft::new(id, Arc::clone(&config), router.clone(), node.log, node.sm)
            .await
            .map_err(|e| format!("starting node {id}: {e}"))?;
        router.nodes.lock().insert(id, raft);
        readers.insert(id, node.reader);
        dirs.insert(id, node.dir);
        members.insert(id, BasicNode::new(format!("node{id}")));
    }
    let leader = router.nodes.lock()[&1].clone();
    leader.initialize(members).await.map_err(|e| format!("initialize: {e}"))?;
    leader
        .wait(Some(Duration::from_secs(10)))
        .current_leader(1, "node 1 leads")
        .await
        .map_err(|e| format!("no leader: {e}"))?;

    let mut results = Vec::new();
    let (phase, series) = write_phase(&leader, &dirs[&1], p).await?;
    let mut phase = phase;
    if let Some(series) = series {
        phase["series"] = series;
    }
    results.push(phase);
    if p.reads {
        // Reads of what was written, once every node has applied it.
        let last = leader.metrics().borrow().last_applied.map(|l| l.index);
        let follower = router.nodes.lock()[&2].clone();
        follower
            .wait(Some(Duration::from_secs(60)))
            .applied_index_at_least(last, "follower caught up")
            .await
            .map_err(|e| format!("follower: {e}"))?;
        results.push(read_phase(&leader, &readers[&1], true, p).await?);
        results.push(read_phase(&leader, &readers[&2], false, p).await?);
    }
    let rafts: Vec<Raft<C>> = router.nodes.lock().values().cloned().collect();
    for raft in rafts {
        raft.shutdown().await.map_err(|e| format!("shutdown: {e}"))?;
    }
    router.nodes.lock().clear();
    Ok(results)
}

/// Whether clients write at `elapsed` seconds into the run.
fn writing(wave: Option<(f64, f64)>, elapsed: f64) -> bool {
    match wave {
        None => true,
        Some((period, duty)) => (elapsed % period) < period * duty,
    }
}

type Shared = Arc<Mutex<(u64, Latencies)>>;

async fn write_phase<C: Cfg>(
    leader: &Raft<C>,
    dir: &std::path::Path,
    p: &ClusterParams,
) -> Result<(serde_json::Value, Option<serde_json::Value>), String> {
    let start = Instant::now();
    let seconds = p.seconds;
    let wave = p.wave;
    // The current second's writes and latencies, taken by the sampler.
    let window: Shared = Arc::default();
    let mut tasks = Vec::new();
    for c in 0..p.clients {
        let raft = leader.clone();
        let window = Arc::clone(&window);
        let mut load = Load::new(1000 + c as u64, p.keys, p.value_bytes);
        tasks.push(tokio::spawn(async move {
            let mut all = Latencies::default();
            loop {
                let elapsed = start.elapsed().as_secs_f64();
                if elapsed >= seconds {
                    break;
                }
                if !writing(wave, elapsed) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                let t = Instant::now();
                raft.client_write(load.set()).await.map_err(|e| format!("write: {e}"))?;
                let took = t.elapsed();
                all.push(took);
                let mut w = window.lock();
                w.0 += 1;
                w.1.push(took);
            }
            Ok::<_, String>(all)
        }));
    }
    // One sample a second: writes, p99 and the leader's disk footprint.
    let mut series = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    while start.elapsed().as_secs_f64() < seconds {
        tick.tick().await;
        let (ops, mut lat) = std::mem::take(&mut *window.lock());
        let at = start.elapsed().as_secs_f64();
        series.push(json!({
            "t": (at * 10.0).round() / 10.0,
            "writing": writing(wave, at - 0.5),
            "ops": ops,
            "p99_us": lat.quantile(0.99),
            "disk_bytes": disk_bytes(dir),
        }));
    }
    let mut latencies = Latencies::default();
    for task in tasks {
        latencies.extend(task.await.map_err(|e| e.to_string())??);
    }
    let elapsed = start.elapsed().as_secs_f64();
    let writes = latencies.len();
    let busy = match wave {
        None => elapsed,
        Some((_, duty)) => elapsed * duty,
    };
    let footprints: Vec<u64> = series.iter().filter_map(|s| s["disk_bytes"].as_u64()).collect();
    let phase = json!({
        "phase": "put",
        "writes": writes,
        "seconds": elapsed,
        "writes_per_s": writes as f64 / busy,
        "p50_us": latencies.quantile(0.5),
        "p99_us": latencies.quantile(0.99),
        "p999_us": latencies.quantile(0.999),
        "disk_bytes_max": footprints.iter().max().copied().unwrap_or(0),
        "disk_bytes_end": disk_bytes(dir),
    });
    Ok((phase, wave.map(|_| serde_json::Value::Array(series))))
}

async fn read_phase<C: Cfg, R: LocalRead>(
    leader: &Raft<C>,
    reader: &R,
    linearizable: bool,
    p: &ClusterParams,
) -> Result<serde_json::Value, String> {
    let start = Instant::now();
    let seconds = p.seconds;
    let mut tasks = Vec::new();
    for c in 0..p.clients {
        let raft = leader.clone();
        let reader = reader.clone();
        let mut load = Load::new(2000 + c as u64, p.keys, p.value_bytes);
        tasks.push(tokio::spawn(async move {
            let mut latencies = Latencies::default();
            let mut found = 0u64;
            while start.elapsed().as_secs_f64() < seconds {
                let key = load.key();
                let t = Instant::now();
                if linearizable {
                    raft.ensure_linearizable().await.map_err(|e| format!("read index: {e}"))?;
                }
                found += u64::from(reader.read(&key)?.is_some());
                latencies.push(t.elapsed());
            }
            Ok::<_, String>((latencies, found))
        }));
    }
    let mut latencies = Latencies::default();
    let mut found = 0;
    for task in tasks {
        let (l, f) = task.await.map_err(|e| e.to_string())??;
        latencies.extend(l);
        found += f;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let reads = latencies.len();
    Ok(json!({
        "phase": if linearizable { "get-linearizable" } else { "get-stale" },
        "reads": reads,
        "found": found,
        "seconds": elapsed,
        "reads_per_s": reads as f64 / elapsed,
        "p50_us": latencies.quantile(0.5),
        "p99_us": latencies.quantile(0.99),
    }))
}
