//! Clients of a register per key for the linearizability tests: each puts
//! (answering the previous value) or reads (`ensure_linearizable`, then
//! the node's applied state) at random, moving to whichever node leads
//! after a failure; the histories are checked key by key (`checker`).
//!
//! Half the reads go to a node drawn from all those whose metrics say
//! they lead, so a leader cut off from the majority (it keeps believing it
//! leads) is asked too: a stale answer from it is caught by the checker.

use std::collections::BTreeMap;
use std::sync::Arc;

use ebb_raft::NodeId;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::checker::{self, Op};
use crate::harness::{set, Nodes, REQUEST_TIMEOUT, WAIT};

/// A client's operations, each with its key.
pub type ClientHistory = Vec<(u64, Op)>;

fn decode(value: Option<Vec<u8>>) -> Option<u64> {
    value.map(|bytes| String::from_utf8(bytes).expect("utf-8").parse().expect("a number"))
}

/// How a run of clients is shaped.
#[derive(Clone, Copy)]
pub struct Load {
    pub clients: u64,
    pub ops_per_client: u64,
    pub keys: u64,
    /// Names this run's keys (`e{epoch}-key{n}`) and seeds its clients, so
    /// that runs one after another on one cluster touch different keys.
    pub epoch: u64,
}

impl Load {
    pub fn total(&self) -> u64 {
        self.clients * self.ops_per_client
    }

    /// Starts the clients; `done` counts the operations tried (answered or
    /// not), for a nemesis to act on.
    pub fn spawn(
        self,
        nodes: &Nodes,
        start: Instant,
        done: &Arc<watch::Sender<u64>>,
    ) -> Vec<JoinHandle<ClientHistory>> {
        (0..self.clients).map(|id| tokio::spawn(client(id, self, nodes.clone(), start, Arc::clone(done)))).collect()
    }
}

async fn client(id: u64, load: Load, nodes: Nodes, start: Instant, done: Arc<watch::Sender<u64>>) -> ClientHistory {
    let now = || start.elapsed().as_nanos() as u64;
    let mut rng = StdRng::seed_from_u64(load.epoch << 16 | id);
    let mut target: NodeId = nodes.ids()[0];
    let mut history = Vec::new();
    for n in 0..load.ops_per_client {
        let key = rng.gen_range(0..load.keys);
        let key_bytes = format!("e{}-key{key}", load.epoch).into_bytes();
        let node = nodes.get(target);
        let invoked = now();
        let ok = if rng.gen_bool(0.5) {
            let value = id * 1000 + n;
            let answer =
                tokio::time::timeout(REQUEST_TIMEOUT, node.raft.client_write(set(key_bytes, value.to_string()))).await;
            match answer {
                Ok(Ok(response)) => {
                    history.push((key, Op::put(value, decode(response.data.previous), invoked, now())));
                    true
                }
                _ => {
                    history.push((key, Op::put_unknown(value, invoked)));
                    false
                }
            }
        } else {
            let claimants = nodes.claimants();
            let node = match claimants.is_empty() || rng.gen_bool(0.5) {
                true => node,
                false => nodes.get(claimants[rng.gen_range(0..claimants.len())]),
            };
            match tokio::time::timeout(REQUEST_TIMEOUT, node.raft.ensure_linearizable()).await {
                Ok(Ok(_)) => {
                    let value = node.state.get(&key_bytes).expect("read the applied state");
                    history.push((key, Op::get(decode(value), invoked, now())));
                    true
                }
                // A read that failed changed nothing: left out.
                _ => false,
            }
        };
        if !ok {
            if let Some(leader) = nodes.leader_among(&nodes.ids(), WAIT).await {
                target = leader;
            }
        }
        done.send_modify(|count| *count += 1);
    }
    history
}

/// Waits for the clients; fails the test unless each key's history is
/// linearizable. Returns how many operations were answered.
pub async fn check(clients: Vec<JoinHandle<ClientHistory>>) -> usize {
    let mut by_key: BTreeMap<u64, Vec<Op>> = BTreeMap::new();
    for handle in clients {
        for (key, op) in handle.await.expect("a client") {
            by_key.entry(key).or_default().push(op);
        }
    }
    let answered = by_key.values().flatten().filter(|op| op.output.is_some()).count();
    let unknown = by_key.values().flatten().filter(|op| op.output.is_none()).count();
    eprintln!("{answered} operations answered, {unknown} puts unanswered, failed reads left out");
    for (key, ops) in &by_key {
        if let Err(why) = checker::check(ops) {
            panic!("key{key}: {why}");
        }
    }
    answered
}
