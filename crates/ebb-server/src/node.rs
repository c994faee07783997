//! One node: its directory (which node it belongs to, the Ebb database),
//! its `openraft::Raft`, and its HTTP server, started and stopped
//! together.
//!
//! Directory layout: `DIR/node-id` holds the node's id as text, written
//! (synced, by rename) at the first start; `DIR/db` is the Ebb database
//! `ebb_raft::open` keeps the log, the vote and the key-value state in.
//! Every start checks `node-id` before opening the database, so a node
//! never adopts another node's log and vote (which would let one voter
//! count twice).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ebb_raft::{NodeId, StateMachine, TypeConfig};
use openraft::Raft;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::http::NodeState;
use crate::identity::{write_durably, ClusterIdentity};
use crate::network::Network;

/// DO NOT CHANGE: on-disk layout. The file naming the node a directory
/// belongs to.
pub const NODE_ID_FILE: &str = "node-id";
/// DO NOT CHANGE: on-disk layout. The Ebb database under the directory.
pub const DATABASE_DIR: &str = "db";

/// How to run a node.
#[derive(Clone)]
pub struct NodeConfig {
    /// This node's id (not 0-special: any `u64`).
    pub id: NodeId,
    /// Its directory (created if missing).
    pub dir: PathBuf,
    /// Leader heartbeat period. Default 150 ms.
    pub heartbeat: Duration,
    /// A follower that hears no leader for a random time between this and
    /// twice this starts an election. Default 750 ms: five heartbeats, so
    /// a loaded machine does not see spurious elections.
    pub election_timeout: Duration,
    /// Build a snapshot after this many applied entries (openraft's
    /// `SnapshotPolicy::LogsSinceLast`). Default 5000.
    pub snapshot_every: u64,
    /// Entries kept in the log behind the snapshot, for followers that lag
    /// a little (openraft's `max_in_snapshot_log_to_keep`). Default 1000.
    pub logs_to_keep: u64,
    /// Largest request body accepted; larger gets a 413. Default 64 MiB:
    /// Ebb takes values up to 256 MiB, but a request body is held in
    /// memory whole, several times over on its way to the log.
    pub max_body_bytes: usize,
    /// The options the database is opened with (its filesystem among
    /// them). Default `ebb::Options::default()`.
    pub ebb_options: ebb::Options,
}

impl fmt::Debug for NodeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeConfig")
            .field("id", &self.id)
            .field("dir", &self.dir)
            .field("heartbeat", &self.heartbeat)
            .field("election_timeout", &self.election_timeout)
            .field("snapshot_every", &self.snapshot_every)
            .field("logs_to_keep", &self.logs_to_keep)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish_non_exhaustive()
    }
}

impl NodeConfig {
    /// The defaults above, for node `id` in `dir`.
    pub fn new(id: NodeId, dir: impl Into<PathBuf>) -> Self {
        NodeConfig {
            id,
            dir: dir.into(),
            heartbeat: Duration::from_millis(150),
            election_timeout: Duration::from_millis(750),
            snapshot_every: 5000,
            logs_to_keep: 1000,
            max_body_bytes: 64 << 20,
            ebb_options: ebb::Options::default(),
        }
    }

    fn raft_config(&self) -> Result<openraft::Config, StartError> {
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let config = openraft::Config {
            cluster_name: "ebb".into(),
            heartbeat_interval: millis(self.heartbeat),
            election_timeout_min: millis(self.election_timeout),
            election_timeout_max: millis(self.election_timeout).saturating_mul(2),
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            max_in_snapshot_log_to_keep: self.logs_to_keep,
            ..openraft::Config::default()
        };
        config.validate().map_err(|e| StartError::Config(e.to_string()))
    }
}

/// Why a node did not start.
#[derive(Debug)]
pub enum StartError {
    /// The directory belongs to another node.
    WrongNode {
        /// The directory.
        dir: PathBuf,
        /// The node it belongs to.
        owner: NodeId,
        /// The node asked to start in it.
        id: NodeId,
    },
    /// The directory holds a database but no `node-id`, or a `node-id`
    /// that does not read as one.
    UnknownOwner(String),
    /// Creating, reading or writing the directory failed.
    Io(PathBuf, std::io::Error),
    /// Ebb could not open the database.
    Database(ebb::Error),
    /// openraft refused the configuration or failed to start.
    Config(String),
    /// The directory's `cluster-id` cannot be read.
    ClusterId(String),
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StartError::WrongNode { dir, owner, id } => write!(
                f,
                "{} belongs to node {owner}, not node {id}: start node {owner} with it, or give node {id} its own directory",
                dir.display()
            ),
            StartError::UnknownOwner(what) => f.write_str(what),
            StartError::Io(path, e) => write!(f, "{}: {e}", path.display()),
            StartError::Database(e) => write!(f, "opening the database: {e}"),
            StartError::Config(e) => write!(f, "raft: {e}"),
            StartError::ClusterId(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for StartError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StartError::Io(_, e) => Some(e),
            StartError::Database(e) => Some(e),
            _ => None,
        }
    }
}

/// Checks that `dir` belongs to node `id`, claiming it at the first start:
/// a missing directory is created and `node-id` written before the
/// database is.
pub fn claim_directory(dir: &Path, id: NodeId) -> Result<(), StartError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |e| StartError::Io(path, e)
    };
    let id_file = dir.join(NODE_ID_FILE);
    match std::fs::read_to_string(&id_file) {
        Ok(text) => {
            let owner: NodeId = text.trim().parse().map_err(|_| {
                StartError::UnknownOwner(format!("{} does not hold a node id: {:?}", id_file.display(), text.trim()))
            })?;
            if owner != id {
                return Err(StartError::WrongNode { dir: dir.to_path_buf(), owner, id });
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if dir.join(DATABASE_DIR).exists() {
                return Err(StartError::UnknownOwner(format!(
                    "{} holds a database but no {NODE_ID_FILE} file: which node it belongs to is unknown",
                    dir.display()
                )));
            }
            std::fs::create_dir_all(dir).map_err(io(dir))?;
            write_durably(dir, NODE_ID_FILE, &format!("{id}\n")).map_err(io(&id_file))?;
            Ok(())
        }
        Err(e) => Err(StartError::Io(id_file, e)),
    }
}

/// A running node. Dropping it leaves the node running; call
/// [`RunningNode::shutdown`] to stop it.
pub struct RunningNode {
    addr: std::net::SocketAddr,
    raft: Raft<TypeConfig>,
    /// A handle on the database, to know when the others are gone.
    state_machine: StateMachine,
    stop_http: Option<oneshot::Sender<()>>,
    /// The server's task; `None` once awaited.
    http: Option<JoinHandle<std::io::Result<()>>>,
}

impl RunningNode {
    /// The address it serves on.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Its Raft (metrics, waits; for tests and embedding).
    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.raft
    }

    /// Stops Raft and the HTTP server (idle connections are closed, requests
    /// in flight answered, for at most 5 s), then waits (at most 5 s more)
    /// until the database is closed, so that the node can start again at
    /// once.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop_http.take() {
            let _ = stop.send(());
        }
        // Raft first, so that requests in flight (a read waiting for the
        // leader's quorum) fail at once and the connections can close.
        let _ = self.raft.shutdown().await;
        if let Some(mut http) = self.http.take() {
            if tokio::time::timeout(Duration::from_secs(5), &mut http).await.is_err() {
                http.abort();
            }
        }
        // openraft's state machine worker and replication tasks end after
        // `Raft::shutdown` returns, each holding a handle on the database.
        let RunningNode { state_machine, .. } = self;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !state_machine.is_last_handle() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Waits until the HTTP server stops (by itself only on an error),
    /// then stops Raft.
    pub async fn wait(&mut self) -> std::io::Result<()> {
        let Some(http) = self.http.take() else { return Ok(()) };
        let result = http.await.unwrap_or_else(|e| Err(std::io::Error::other(e)));
        let _ = self.raft.shutdown().await;
        result
    }
}

/// Starts node `config.id` serving on `listener`: claims the directory,
/// opens the database, starts Raft and the HTTP server. The node's address
/// in the cluster is the one its members are told at `init` or
/// `add-learner`, which should be `listener`'s.
pub async fn start(config: NodeConfig, listener: TcpListener) -> Result<RunningNode, StartError> {
    claim_directory(&config.dir, config.id)?;
    let identity = ClusterIdentity::load(&config.dir).map_err(StartError::ClusterId)?;
    let raft_config = Arc::new(config.raft_config()?);
    let (log_store, state_machine) =
        ebb_raft::open(config.dir.join(DATABASE_DIR), config.ebb_options.clone()).map_err(StartError::Database)?;
    let addr = listener.local_addr().map_err(|e| StartError::Io(config.dir.clone(), e))?;
    let raft =
        Raft::new(config.id, raft_config, Network::with_identity(identity.clone()), log_store, state_machine.clone())
            .await
            .map_err(|e| StartError::Config(e.to_string()))?;
    let state = NodeState {
        id: config.id,
        addr: addr.to_string(),
        max_body_bytes: config.max_body_bytes,
        raft: raft.clone(),
        state_machine: state_machine.clone(),
        identity,
    };
    let app = crate::http::router(state);
    let (stop_http, stopped) = oneshot::channel::<()>();
    let http = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .await
    });
    Ok(RunningNode { addr, raft, state_machine, stop_http: Some(stop_http), http: Some(http) })
}
