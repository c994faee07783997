//! Membership changes under faults:
//! - with a tenth of the messages lost and a client writing throughout,
//!   two learners are added and made voters, the leader removes itself,
//!   and a voter that is down is replaced (removed while stopped): every
//!   node left holds every acknowledged write, the same state, and the
//!   membership asked for, and still does after all of them restart;
//! - a leader cut off with one follower of five asks to shrink the
//!   membership to the two of them: the change never commits, the
//!   majority side elects a leader and takes writes, and once healed every
//!   node is back in the five-voter membership with one state.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use ebb_raft::NodeId;
use ebb_raft::TypeConfig;
use openraft::raft::ClientWriteResponse;
use tokio::sync::watch;

use crate::harness::{
    assert_same_contents, bounded, fast_config, node_address, set, voters, Cluster, Nodes, Raft, REQUEST_TIMEOUT, WAIT,
};

/// Asks the leader for a membership change, trying again with whichever
/// node leads (a change made twice is made once), at most `attempts`
/// times; fails the test if none is acknowledged.
async fn on_leader<F, Fut, E>(nodes: &Nodes, what: &str, attempts: usize, change: F) -> ClientWriteResponse<TypeConfig>
where
    F: Fn(Raft) -> Fut,
    Fut: Future<Output = Result<ClientWriteResponse<TypeConfig>, E>>,
    E: std::fmt::Display,
{
    let mut last = String::new();
    for _ in 0..attempts {
        let Some(leader) = nodes.leader_among(&nodes.ids(), WAIT).await else { continue };
        match tokio::time::timeout(WAIT, change(nodes.get(leader).raft.clone())).await {
            Ok(Ok(response)) => return response,
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => last = format!("no answer from node {leader} within {WAIT:?}"),
        }
    }
    panic!("{what}: not acknowledged in {attempts} attempts, last: {last}");
}

/// Asks the leader (as [`on_leader`]) to make `voters` the voters, the
/// others leaving the membership.
async fn change_voters(nodes: &Nodes, what: &str, voters: &BTreeSet<NodeId>) {
    on_leader(nodes, what, 10, |raft| {
        let voters = voters.clone();
        async move { raft.change_membership(voters, false).await }
    })
    .await;
}

/// Writes `w0`, `w1`, ... through the leader until told to stop (at most
/// 2,000); the indexes acknowledged.
async fn writer(nodes: Nodes, stop: watch::Receiver<bool>) -> Vec<u64> {
    let mut acknowledged = Vec::new();
    for i in 0..2_000u64 {
        if *stop.borrow() {
            break;
        }
        if nodes.write(set(format!("w{i}"), i.to_string()), 3).await.is_some() {
            acknowledged.push(i);
        }
    }
    acknowledged
}

/// Once a barrier written through the leader is applied on every voter:
/// each of `voters_wanted` has exactly those as its voters, every write of
/// `acknowledged` (`w{i}` = `i`), and the same state as the others.
async fn all_kept(nodes: &Nodes, voters_wanted: &BTreeSet<NodeId>, acknowledged: &[u64], when: &str) {
    let ids: Vec<NodeId> = voters_wanted.iter().copied().collect();
    let barrier = on_leader(nodes, &format!("the barrier {when}"), 10, |raft| async move {
        raft.client_write(set("barrier", "")).await
    })
    .await
    .log_id
    .index;
    nodes.wait_applied(&ids, barrier).await;
    for &id in &ids {
        assert_eq!(&voters(nodes, id), voters_wanted, "node {id}'s voters {when}");
        for i in acknowledged {
            let value = nodes.read(id, format!("w{i}").as_bytes());
            assert_eq!(value, Some(i.to_string().into_bytes()), "node {id} lacks acknowledged write w{i} {when}");
        }
    }
    assert_same_contents(nodes, &ids);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn membership_changes_under_message_loss_keep_every_acknowledged_write() {
    bounded(Duration::from_secs(90), async {
        // Five nodes running, three of them members.
        let mut cluster = Cluster::start_some(5, 3, fast_config()).await;
        let nodes = cluster.nodes().clone();
        let (stop, stopped) = watch::channel(false);
        let client = tokio::spawn(writer(nodes.clone(), stopped));
        cluster.router.lose_messages(0.1, 0x3e3b);

        for id in [4, 5] {
            on_leader(
                &nodes,
                "add a learner",
                10,
                |raft| async move { raft.add_learner(id, node_address(id), true).await },
            )
            .await;
        }
        let all: BTreeSet<NodeId> = (1..=5).collect();
        change_voters(&nodes, "five voters", &all).await;

        // The leader removes itself; the others elect a leader among them.
        let old = cluster.leader().await;
        let without_old: BTreeSet<NodeId> = all.iter().copied().filter(|&id| id != old).collect();
        change_voters(&nodes, "remove the leader", &without_old).await;
        let remaining: Vec<NodeId> = without_old.iter().copied().collect();
        let new = cluster.leader_among(&remaining).await;
        assert_ne!(new, old, "the removed leader still leads");

        // A voter goes down and is removed while it is down.
        let down = remaining.iter().copied().find(|&id| id != new).expect("a follower");
        cluster.stop(down).await;
        drop(nodes);
        let nodes = cluster.nodes().clone();
        let final_voters: BTreeSet<NodeId> = without_old.iter().copied().filter(|&id| id != down).collect();
        change_voters(&nodes, "remove the node that is down", &final_voters).await;

        stop.send_replace(true);
        let acknowledged = client.await.expect("the writer");
        eprintln!("{} writes acknowledged; removed {old} (the leader) and {down} (down)", acknowledged.len());
        assert!(!acknowledged.is_empty(), "no write was acknowledged");

        cluster.router.heal();
        let ids: Vec<NodeId> = final_voters.iter().copied().collect();
        all_kept(&nodes, &final_voters, &acknowledged, "after the changes").await;

        // The three voters restarted from their directories: the
        // membership and the writes are what the stores kept. (Every
        // handle on their databases goes first, so that they close.)
        drop(nodes);
        for &id in &ids {
            cluster.stop(id).await;
        }
        for &id in &ids {
            cluster.restart(id).await;
        }
        let nodes = cluster.nodes().clone();
        let leader = cluster.leader_among(&ids).await;
        assert!(final_voters.contains(&leader), "node {leader} leads after the restart but is not a voter");
        all_kept(&nodes, &final_voters, &acknowledged, "after the restart").await;
        cluster.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_membership_change_asked_of_a_minority_leader_never_commits() {
    bounded(Duration::from_secs(40), async {
        let cluster = Cluster::start(5).await;
        let nodes = cluster.nodes();
        let ids = cluster.ids();
        let old = cluster.leader().await;
        let follower = ids.iter().copied().find(|&id| id != old).expect("a follower");
        let majority: Vec<NodeId> = ids.iter().copied().filter(|&id| id != old && id != follower).collect();
        cluster.router.split(&[&[old, follower], &majority]);

        let two: BTreeSet<NodeId> = [old, follower].into_iter().collect();
        let shrink = tokio::time::timeout(REQUEST_TIMEOUT, nodes.get(old).raft.change_membership(two, false)).await;
        assert!(!matches!(shrink, Ok(Ok(_))), "a leader with two of five changed the membership: {shrink:?}");

        let new = cluster.leader_among(&majority).await;
        for i in 0..5 {
            nodes.write_on(new, set(format!("k{i}"), "v")).await.expect("three of five commit");
        }

        cluster.router.heal();
        let barrier = cluster.write_barrier().await;
        nodes.wait_applied(&ids, barrier).await;
        let five: BTreeSet<NodeId> = ids.iter().copied().collect();
        for &id in &ids {
            assert_eq!(voters(nodes, id), five, "node {id}'s voters");
            for i in 0..5 {
                assert_eq!(nodes.read(id, format!("k{i}").as_bytes()), Some(b"v".to_vec()), "node {id}");
            }
        }
        assert_same_contents(nodes, &ids);
        cluster.shutdown().await;
    })
    .await;
}
