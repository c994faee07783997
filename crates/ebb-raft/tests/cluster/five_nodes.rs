//! Five nodes, with partitions that split the majority:
//! - the leader and one follower cut off from the three others: only the
//!   three commit and serve linearizable reads; then a split into 2 | 2 | 1
//!   where no side has a majority: nothing commits anywhere; once healed,
//!   every node holds every acknowledged write and the same state;
//! - concurrent clients while a seeded nemesis moves through such splits
//!   (the leader on the minority side, on the majority side, no majority
//!   at all, one node isolated with messages lost), each twice: the history is
//!   linearizable, and the nodes converge to one state.

use std::sync::Arc;
use std::time::Duration;

use ebb_raft::NodeId;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::harness::{assert_same_contents, bounded, set, Cluster, Nodes, REQUEST_TIMEOUT};
use crate::register::{self, Load};

/// Whether `id` can confirm it leads (`ensure_linearizable`) within
/// [`REQUEST_TIMEOUT`].
async fn confirms_leadership(nodes: &Nodes, id: NodeId) -> bool {
    matches!(tokio::time::timeout(REQUEST_TIMEOUT, nodes.get(id).raft.ensure_linearizable()).await, Ok(Ok(_)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_commit_only_on_a_majority_side() {
    bounded(Duration::from_secs(40), async {
        let cluster = Cluster::start(5).await;
        let nodes = cluster.nodes();
        let old = cluster.leader().await;
        nodes.write_on(old, set("before", "1")).await.expect("the leader takes a write");

        // The leader and one follower on the minority side.
        let ids = cluster.ids();
        let others: Vec<NodeId> = ids.iter().copied().filter(|&id| id != old).collect();
        let minority = [old, others[0]];
        let majority = &others[1..];
        cluster.router.split(&[&minority, majority]);
        let new = cluster.leader_among(majority).await;
        let old_term = nodes.get(old).raft.metrics().borrow().current_term;
        assert!(nodes.get(new).raft.metrics().borrow().current_term > old_term, "the new leader has a newer term");
        // Two of five: the old leader commits nothing and cannot confirm it leads.
        assert!(nodes.write_on(old, set("lost", "x")).await.is_err(), "a leader with two of five committed");
        assert!(!confirms_leadership(nodes, old).await, "a leader with two of five confirmed its leadership");
        for i in 0..5 {
            nodes.write_on(new, set(format!("after{i}"), "2")).await.expect("three of five commit");
        }
        assert!(confirms_leadership(nodes, new).await, "the majority's leader cannot confirm it leads");

        // No side with a majority: the new leader with one follower, two
        // others together, one alone.
        let rest: Vec<NodeId> = ids.iter().copied().filter(|&id| id != new).collect();
        cluster.router.split(&[&[new, rest[0]], &[rest[1], rest[2]], &[rest[3]]]);
        for &id in &ids {
            let leads = nodes.get(id).raft.metrics().borrow().current_leader == Some(id);
            if leads {
                assert!(
                    nodes.write_on(id, set("nowhere", "x")).await.is_err(),
                    "node {id} committed without a majority"
                );
                assert!(!confirms_leadership(nodes, id).await, "node {id} confirmed leadership without a majority");
            }
        }

        cluster.router.heal();
        let barrier = cluster.write_barrier().await;
        nodes.wait_applied(&ids, barrier).await;
        for &id in &ids {
            assert_eq!(nodes.read(id, b"before"), Some(b"1".to_vec()), "node {id}");
            for i in 0..5 {
                assert_eq!(nodes.read(id, format!("after{i}").as_bytes()), Some(b"2".to_vec()), "node {id}");
            }
            // Its leader lost the election's race with a longer log of a
            // newer term: this entry is overwritten everywhere.
            assert_eq!(nodes.read(id, b"lost"), None, "node {id} applied what two of five appended");
        }
        // "nowhere" was appended by a leader and maybe one follower without
        // an answer: it may commit once healed, but on every node or none.
        assert_same_contents(nodes, &ids);
        cluster.shutdown().await;
    })
    .await;
}

const LOAD: Load = Load { clients: 4, ops_per_client: 25, keys: 2, epoch: 0 };

/// How many runs of [`LOAD`] the moving-partitions test makes, one after
/// another on one cluster, each on its own keys and through the four
/// faults twice: `EBB_CLUSTER_EPOCHS` (default 1). A long soak is
/// `EBB_CLUSTER_EPOCHS=100 cargo test --release -p ebb-raft --test cluster
/// partitions_move`; the test's time limit grows with it.
fn epochs() -> u64 {
    std::env::var("EBB_CLUSTER_EPOCHS").ok().and_then(|v| v.parse().ok()).filter(|&n| n > 0).unwrap_or(1)
}

/// The faults the nemesis moves through.
#[derive(Clone, Copy, Debug)]
enum Fault {
    /// The leader and one follower against three.
    LeaderInMinority,
    /// The leader and two followers against two.
    LeaderInMajority,
    /// 2 | 2 | 1: no majority anywhere.
    NoMajority,
    /// One follower cut off, a tenth of the other messages lost.
    IsolatedAndLossy,
}

const FAULTS: [Fault; 4] =
    [Fault::LeaderInMinority, Fault::LeaderInMajority, Fault::NoMajority, Fault::IsolatedAndLossy];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_nodes_stay_linearizable_while_partitions_move() {
    let epochs = epochs();
    bounded(Duration::from_secs(90 * epochs), async {
        let cluster = Cluster::start(5).await;
        let ids = cluster.ids();
        let mut rng = StdRng::seed_from_u64(0xf17e);
        for epoch in 0..epochs {
            let load = Load { epoch, ..LOAD };
            let (done, mut progress) = watch::channel(0u64);
            let clients = load.spawn(cluster.nodes(), Instant::now(), &Arc::new(done));

            // Every fault twice, in a seeded order, each for a ninth of the
            // operations, around whichever node leads when it starts.
            let mut faults = Vec::new();
            for _ in 0..2 {
                let mut round = FAULTS;
                round.shuffle(&mut rng);
                faults.extend(round);
            }
            let total = load.total();
            let steps = faults.len() as u64;
            for (step, fault) in (1..).zip(faults) {
                progress.wait_for(|&n| n >= total * step / (steps + 1)).await.expect("clients running");
                let leader = cluster.nodes().leader_among(&ids, REQUEST_TIMEOUT).await.unwrap_or(ids[0]);
                let mut others: Vec<NodeId> = ids.iter().copied().filter(|&id| id != leader).collect();
                others.shuffle(&mut rng);
                eprintln!("epoch {epoch} step {step}: {fault:?} around node {leader}");
                cluster.router.heal();
                match fault {
                    Fault::LeaderInMinority => cluster.router.split(&[&[leader, others[0]], &others[1..]]),
                    Fault::LeaderInMajority => cluster.router.split(&[&[leader, others[0], others[1]], &others[2..]]),
                    Fault::NoMajority => cluster.router.split(&[&[leader, others[0]], &others[1..3], &others[3..]]),
                    Fault::IsolatedAndLossy => {
                        cluster.router.isolate(others[0]);
                        cluster.router.lose_messages(0.1, rng.gen());
                    }
                }
            }
            progress.wait_for(|&n| n >= total).await.expect("clients running");
            cluster.router.heal();

            let answered = register::check(clients).await;
            assert!(answered as u64 >= total / 4, "epoch {epoch}: only {answered} of {total} operations answered");
            let barrier = cluster.write_barrier().await;
            cluster.nodes().wait_applied(&ids, barrier).await;
            let keys = assert_same_contents(cluster.nodes(), &ids);
            eprintln!("epoch {epoch}: linearizable, five equal states of {keys} keys");
        }
        cluster.shutdown().await;
    })
    .await;
}
