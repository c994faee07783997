//! kill -9 of `ebb-server` processes while clients write: the leader, then
//! a follower, then the new leader again, each restarted from its
//! directory. Every write a client saw acknowledged is, once the cluster
//! settles, in every node's applied state; every node's state is the
//! same.
//!
//! Three processes on loopback ports, three writer tasks; bounded by
//! [`DEADLINE`] and by the number of writes each phase waits for.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{stale_contents, writer, Acknowledged};
use ebb_server::Client;
use tokio::time::Instant;

mod common;

/// The whole test's bound.
const DEADLINE: Duration = Duration::from_secs(120);
/// Acknowledged writes each phase waits for before its next fault.
const PER_PHASE: usize = 25;
const WRITERS: usize = 3;

/// One node's process, killed when dropped.
struct Node {
    id: u64,
    addr: String,
    dir: PathBuf,
    log: PathBuf,
    child: Option<Child>,
}

impl Node {
    fn spawn(&mut self) {
        let stderr = File::options().create(true).append(true).open(&self.log).expect("node log file");
        let child = Command::new(env!("CARGO_BIN_EXE_ebb-server"))
            .args(["--id", &self.id.to_string(), "--listen", &self.addr, "--dir"])
            .arg(&self.dir)
            .args(["--heartbeat-ms", "50", "--election-timeout-ms", "400"])
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn ebb-server");
        self.child = Some(child);
    }

    /// SIGKILL: no shutdown, unsynced data in the page cache survives but
    /// nothing of the process does.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("kill -9");
            child.wait().expect("reap");
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

struct Cluster {
    nodes: BTreeMap<u64, Node>,
    start: Instant,
}

impl Cluster {
    fn logs(&self) -> String {
        let mut out = String::new();
        for node in self.nodes.values() {
            let log = std::fs::read_to_string(&node.log).unwrap_or_default();
            out += &format!("--- node {} ---\n{log}", node.id);
        }
        out
    }

    fn check_time(&self, what: &str) {
        assert!(self.start.elapsed() < DEADLINE, "{what}: not within {DEADLINE:?}\n{}", self.logs());
    }

    async fn wait_serving(&self, id: u64) {
        let client = Client::new(self.nodes[&id].addr.clone());
        while client.status().await.is_err() {
            self.check_time(&format!("node {id} serving"));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The node the running nodes agree leads.
    async fn leader(&self) -> u64 {
        loop {
            let mut leaders = Vec::new();
            for node in self.nodes.values().filter(|n| n.child.is_some()) {
                let status = Client::new(node.addr.clone()).status().await;
                leaders.push(status.ok().and_then(|s| s.leader).map(|m| m.id));
            }
            if let Some(Some(leader)) = leaders.first() {
                if leaders.iter().all(|l| l == &Some(*leader)) && self.nodes[leader].child.is_some() {
                    return *leader;
                }
            }
            self.check_time("an agreed leader");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn wait_acknowledged(cluster: &Cluster, acknowledged: &Acknowledged, at_least: usize) {
    while acknowledged.lock().unwrap().len() < at_least {
        cluster.check_time(&format!("{at_least} acknowledged writes"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn make_nodes(dir: &Path) -> BTreeMap<u64, Node> {
    (1..=3)
        .map(|id| {
            let node = Node {
                id,
                addr: format!("127.0.0.1:{}", free_port()),
                dir: dir.join(format!("node{id}")),
                log: dir.join(format!("node{id}.log")),
                child: None,
            };
            (id, node)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_kill_9_of_leaders_and_followers() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster { nodes: make_nodes(dir.path()), start: Instant::now() };
    for node in cluster.nodes.values_mut() {
        node.spawn();
    }
    for id in 1..=3 {
        cluster.wait_serving(id).await;
    }
    let members: BTreeMap<u64, String> = cluster.nodes.values().map(|n| (n.id, n.addr.clone())).collect();
    Client::new(members[&1].clone()).init(&members).await.expect("init");

    let acknowledged: Acknowledged = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let addrs: Vec<String> = members.values().cloned().collect();
    let writers: Vec<_> =
        (0..WRITERS).map(|t| tokio::spawn(writer(t, addrs.clone(), acknowledged.clone(), stop.clone()))).collect();

    // Leader, follower, the new leader: each killed under load, the
    // cluster writing without it, then restarted from its directory.
    let mut goal = PER_PHASE;
    wait_acknowledged(&cluster, &acknowledged, goal).await;
    for phase in ["leader", "follower", "leader"] {
        let leader = cluster.leader().await;
        let victim = match phase {
            "leader" => leader,
            _ => *cluster.nodes.keys().find(|id| **id != leader).unwrap(),
        };
        cluster.nodes.get_mut(&victim).unwrap().kill();
        goal = acknowledged.lock().unwrap().len() + PER_PHASE;
        wait_acknowledged(&cluster, &acknowledged, goal).await;
        cluster.nodes.get_mut(&victim).unwrap().spawn();
        cluster.wait_serving(victim).await;
        goal += PER_PHASE;
        wait_acknowledged(&cluster, &acknowledged, goal).await;
    }
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }

    // A last write through the leader; once every node has applied it,
    // each holds every acknowledged write, and all hold the same.
    let leader = cluster.leader().await;
    let last = Client::new(members[&leader].clone()).put("last", "write").await.expect("last write").log_index;
    for (id, addr) in &members {
        loop {
            let applied = Client::new(addr.clone()).status().await.ok().and_then(|s| s.last_applied);
            if applied >= Some(last) {
                break;
            }
            cluster.check_time(&format!("node {id} applying {last}"));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let acknowledged = acknowledged.lock().unwrap().clone();
    let mut states = Vec::new();
    for (id, addr) in &members {
        let state = stale_contents(addr).await;
        for (key, value) in &acknowledged {
            assert_eq!(state.get(key), Some(value), "node {id} lost acknowledged write {key}\n{}", cluster.logs());
        }
        states.push(state);
    }
    assert!(states.windows(2).all(|w| w[0] == w[1]), "the nodes' states differ");
    assert!(acknowledged.len() >= 7 * PER_PHASE);
}
