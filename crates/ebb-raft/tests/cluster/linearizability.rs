//! Concurrent clients on a few keys, with the leader isolated for part of
//! the run: the history of puts (answering the previous value) and reads
//! (`ensure_linearizable`, then the node's applied state) is linearizable,
//! key by key (`checker`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ebb_raft::NodeId;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::checker::{self, Op};
use crate::harness::{bounded, set, Cluster, Nodes, REQUEST_TIMEOUT, WAIT};

const CLIENTS: u64 = 3;
const OPS_PER_CLIENT: u64 = 30;
const KEYS: u64 = 2;

/// A client's operations, each with its key.
type ClientHistory = Vec<(u64, Op)>;

fn decode(value: Option<Vec<u8>>) -> Option<u64> {
    value.map(|bytes| String::from_utf8(bytes).expect("utf-8").parse().expect("a number"))
}

async fn client(id: u64, nodes: Nodes, start: Instant, done: Arc<watch::Sender<u64>>) -> ClientHistory {
    let now = || start.elapsed().as_nanos() as u64;
    let mut rng = StdRng::seed_from_u64(id);
    let mut target: NodeId = nodes.ids()[0];
    let mut history = Vec::new();
    for n in 0..OPS_PER_CLIENT {
        let key = rng.gen_range(0..KEYS);
        let key_bytes = format!("key{key}").into_bytes();
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_see_a_linearizable_register_across_a_partition() {
    bounded(Duration::from_secs(40), async {
        let cluster = Cluster::start(3).await;
        let start = Instant::now();
        let (done, mut progress) = watch::channel(0u64);
        let done = Arc::new(done);
        let clients: Vec<_> = (0..CLIENTS)
            .map(|id| tokio::spawn(client(id, cluster.nodes().clone(), start, Arc::clone(&done))))
            .collect();

        // The nemesis: cuts the leader off once a fifth of the operations
        // are done, heals once three fifths are.
        let total = CLIENTS * OPS_PER_CLIENT;
        progress.wait_for(|&n| n >= total / 5).await.expect("clients running");
        let old = cluster.leader().await;
        // The old leader alone on its side: a partition of one.
        cluster.router.partition([old]);
        let rest: Vec<_> = cluster.ids().into_iter().filter(|&id| id != old).collect();
        cluster.leader_among(&rest).await;
        progress.wait_for(|&n| n >= total * 3 / 5).await.expect("clients running");
        cluster.router.heal();

        let mut by_key: BTreeMap<u64, Vec<Op>> = BTreeMap::new();
        for handle in clients {
            for (key, op) in handle.await.expect("a client") {
                by_key.entry(key).or_default().push(op);
            }
        }
        let answered = by_key.values().flatten().filter(|op| op.output.is_some()).count();
        let unknown = by_key.values().flatten().filter(|op| op.output.is_none()).count();
        eprintln!("{answered} operations answered, {unknown} puts unanswered, failed reads left out; old leader {old}");
        assert!(answered as u64 >= total / 2, "only {answered} of {total} operations answered");
        for (key, ops) in &by_key {
            if let Err(why) = checker::check(ops) {
                panic!("key{key}: {why}");
            }
        }
        cluster.shutdown().await;
    })
    .await;
}
