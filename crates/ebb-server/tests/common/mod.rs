//! In-process clusters for the tests: every node on a tokio task of the
//! test's runtime, on a loopback port the system chose, in a temporary
//! directory; stopped when the test ends.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use ebb_server::{Client, NodeConfig, RunningNode};
use tempfile::TempDir;
use tokio::net::TcpListener;

/// How long a test waits for a condition before it fails.
pub const WAIT: Duration = Duration::from_secs(15);

/// A node's settings for the tests: quick heartbeats and elections.
pub fn config(id: u64, dir: &std::path::Path) -> NodeConfig {
    let mut config = NodeConfig::new(id, dir.join(format!("node{id}")));
    config.heartbeat = Duration::from_millis(50);
    config.election_timeout = Duration::from_millis(400);
    config
}

/// A loopback listener on a port the system chose.
pub async fn listener() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").await.expect("bind a loopback port")
}

pub struct Cluster {
    pub dir: TempDir,
    /// Running nodes by id; `None` once stopped.
    pub nodes: BTreeMap<u64, Option<RunningNode>>,
    pub addrs: BTreeMap<u64, String>,
}

impl Cluster {
    /// Starts `n` nodes (ids 1..=n) with `tune` applied to each config,
    /// initializes them as one cluster at node 1 and waits for a leader.
    pub async fn start(n: u64, tune: impl Fn(&mut NodeConfig)) -> Cluster {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut cluster = Cluster { dir, nodes: BTreeMap::new(), addrs: BTreeMap::new() };
        for id in 1..=n {
            cluster.start_node(id, &tune).await;
        }
        let members = cluster.addrs.clone();
        cluster.client(1).init(&members).await.expect("init");
        cluster.leader().await;
        cluster
    }

    /// Starts node `id` (not yet a member).
    pub async fn start_node(&mut self, id: u64, tune: impl Fn(&mut NodeConfig)) {
        let mut config = config(id, self.dir.path());
        tune(&mut config);
        let node = ebb_server::start(config, listener().await).await.expect("start node");
        self.addrs.insert(id, node.addr().to_string());
        self.nodes.insert(id, Some(node));
    }

    /// Starts node `id` again, stopped before, on the address it had (its
    /// address in the membership).
    pub async fn restart(&mut self, id: u64, tune: impl Fn(&mut NodeConfig)) {
        let mut config = config(id, self.dir.path());
        tune(&mut config);
        let addr = self.addrs[&id].clone();
        let listener = TcpListener::bind(&addr).await.unwrap_or_else(|e| panic!("bind {addr} again: {e}"));
        let node = ebb_server::start(config, listener).await.expect("restart node");
        self.nodes.insert(id, Some(node));
    }

    pub fn client(&self, id: u64) -> Client {
        Client::new(self.addrs[&id].clone())
    }

    pub fn node(&self, id: u64) -> &RunningNode {
        self.nodes[&id].as_ref().expect("node running")
    }

    /// The leader every running voter agrees on, waiting for one.
    pub async fn leader(&self) -> u64 {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let leaders: Vec<Option<u64>> =
                self.nodes.values().flatten().map(|node| node.raft().metrics().borrow().current_leader).collect();
            if let Some(Some(leader)) = leaders.first() {
                let running = self.nodes.get(leader).is_some_and(Option::is_some);
                if running && leaders.iter().all(|l| l == &Some(*leader)) {
                    return *leader;
                }
            }
            assert!(tokio::time::Instant::now() < deadline, "no agreed leader within {WAIT:?}: {leaders:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops node `id` as a crash would look to the others: its server
    /// and its Raft stop; its data stays in its directory.
    pub async fn stop(&mut self, id: u64) {
        if let Some(node) = self.nodes.get_mut(&id).and_then(Option::take) {
            node.shutdown().await;
        }
    }

    /// Waits until node `id` has applied at least `index`.
    pub async fn wait_applied(&self, id: u64, index: u64) {
        self.node(id)
            .raft()
            .wait(Some(WAIT))
            .applied_index_at_least(Some(index), "applied")
            .await
            .unwrap_or_else(|e| panic!("node {id} did not apply {index}: {e}"));
    }

    pub async fn shutdown(mut self) {
        let ids: Vec<u64> = self.nodes.keys().copied().collect();
        for id in ids {
            self.stop(id).await;
        }
    }
}
