//! A follower shut down, its database closed and reopened from the same
//! directory, started again: it catches up and keeps every acknowledged
//! write, those from before the stop (read back from its own disk) and
//! those made while it was down. Ebb refuses to open a database this
//! process already holds, so the reopen also checks that shutting the node
//! down released every handle on it.

use std::time::Duration;

use crate::harness::{bounded, set, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_follower_catches_up_and_keeps_every_write() {
    bounded(Duration::from_secs(20), async {
        let mut cluster = Cluster::start(3).await;
        let leader = cluster.leader().await;
        let follower = cluster.ids().into_iter().find(|&id| id != leader).expect("a follower");
        let mut applied = 0;
        for i in 0..10 {
            let written = cluster.nodes().write_on(leader, set(format!("a{i}"), "1")).await;
            applied = written.expect("write before the stop").log_id.index;
        }
        cluster.nodes().wait_applied(&[follower], applied).await;

        cluster.stop(follower).await;
        for i in 0..10 {
            cluster.nodes().write_on(leader, set(format!("b{i}"), "2")).await.expect("write while it is down");
        }
        // Started cut off, it can only reach what it had applied from its
        // own database.
        cluster.router.isolate(follower);
        cluster.restart(follower).await;
        cluster.nodes().wait_applied(&[follower], applied).await;
        for i in 0..10 {
            assert_eq!(cluster.nodes().read(follower, format!("a{i}").as_bytes()), Some(b"1".to_vec()));
        }

        cluster.router.heal();
        let barrier = cluster.write_barrier().await;
        let nodes = cluster.nodes();
        nodes.wait_applied(&cluster.ids(), barrier).await;
        for i in 0..10 {
            assert_eq!(nodes.read(follower, format!("a{i}").as_bytes()), Some(b"1".to_vec()));
            assert_eq!(nodes.read(follower, format!("b{i}").as_bytes()), Some(b"2".to_vec()));
        }
        cluster.shutdown().await;
    })
    .await;
}
