//! In-process clusters for the tests: every node on a tokio task of the
//! test's runtime, on a loopback port the system chose, in a temporary
//! directory; stopped when the test ends.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
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

/// Writes every client saw acknowledged, key and value.
pub type Acknowledged = Arc<Mutex<Vec<(String, String)>>>;

/// A client writing fresh keys (`w{t}-{i}`) until `stop`, moving to the
/// next node of `addrs` on any error: a write without an answer may or may
/// not have happened, so its key is not used again and not recorded.
pub async fn writer(t: usize, addrs: Vec<String>, acknowledged: Acknowledged, stop: Arc<AtomicBool>) {
    let mut at = t % addrs.len();
    let mut client = Client::new(addrs[at].clone());
    let mut i = 0;
    while !stop.load(Ordering::Relaxed) {
        let (key, value) = (format!("w{t}-{i:05}"), format!("value {t} {i}"));
        i += 1;
        match client.put(&key, &value).await {
            Ok(_) => acknowledged.lock().unwrap().push((key, value)),
            Err(_) => {
                at = (at + 1) % addrs.len();
                client = Client::new(addrs[at].clone());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

/// Waits until at least `at_least` writes are acknowledged, failing after
/// `limit`.
pub async fn wait_acknowledged(acknowledged: &Acknowledged, at_least: usize, limit: Duration) {
    let deadline = tokio::time::Instant::now() + limit;
    while acknowledged.lock().unwrap().len() < at_least {
        assert!(tokio::time::Instant::now() < deadline, "{at_least} acknowledged writes not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every key and value of the applied state of the node at `addr` (stale
/// scans, page by page).
pub async fn stale_contents(addr: &str) -> BTreeMap<String, String> {
    let client = Client::new(addr.to_string());
    let mut all = BTreeMap::new();
    let mut start = String::new();
    loop {
        let page = client.scan(&start, None, Some(1000), true).await.expect("stale scan");
        if let Some(last) = page.items.last() {
            start = format!("{}\u{0}", last.key);
        }
        all.extend(page.items.into_iter().map(|kv| (kv.key, kv.value)));
        if !page.more {
            return all;
        }
    }
}

/// Waits until the node at `addr` has applied `index`, failing after
/// `limit`.
pub async fn wait_applied_at(addr: &str, index: u64, limit: Duration) {
    let client = Client::new(addr.to_string());
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if client.status().await.ok().and_then(|s| s.last_applied) >= Some(index) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{addr} did not apply {index} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
