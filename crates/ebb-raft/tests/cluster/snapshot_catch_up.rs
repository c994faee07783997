//! A follower far behind, whose missing entries the leader has purged,
//! catches up through a snapshot: the leader builds one and purges its log,
//! the follower installs the snapshot (sent in chunks through
//! `install_snapshot`) and ends with the leader's state.

use std::time::Duration;

use openraft::storage::RaftStateMachine;
use tokio::io::AsyncReadExt;

use crate::harness::{bounded, fast_config, set, Cluster, WAIT};

const KEYS: usize = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_a_purged_log_catches_up_by_snapshot() {
    bounded(Duration::from_secs(20), async {
        // Purge every entry a snapshot covers; send the snapshot in many
        // chunks (it is a few hundred bytes).
        let config = openraft::Config {
            max_in_snapshot_log_to_keep: 0,
            purge_batch_size: 1,
            snapshot_max_chunk_size: 64,
            ..fast_config()
        };
        let cluster = Cluster::start_with(3, config).await;
        let nodes = cluster.nodes();
        let leader = cluster.leader().await;
        let lagging = cluster.ids().into_iter().find(|&id| id != leader).expect("a follower");
        let first = nodes.write_on(leader, set("k0", "old")).await.expect("a first write");
        nodes.wait_applied(&[lagging], first.log_id.index).await;

        cluster.router.isolate(lagging);
        let mut applied = 0;
        for i in 0..KEYS {
            applied = nodes
                .write_on(leader, set(format!("k{i}"), format!("v{i}")))
                .await
                .expect("the leader and one follower commit")
                .log_id
                .index;
        }
        let leader_raft = &nodes.get(leader).raft;
        leader_raft.trigger().snapshot().await.expect("trigger a snapshot");
        let snapshot = leader_raft
            .wait(Some(WAIT))
            .metrics(|m| m.snapshot.is_some_and(|s| s.index >= applied), "snapshot built")
            .await
            .expect("the leader builds a snapshot");
        let snapshot = snapshot.snapshot.expect("a snapshot");
        leader_raft.trigger().purge_log(snapshot.index).await.expect("trigger a purge");
        leader_raft
            .wait(Some(WAIT))
            .metrics(|m| m.purged.is_some_and(|p| p.index >= snapshot.index), "log purged")
            .await
            .expect("the leader purges the log the snapshot covers");

        let behind = nodes.get(lagging).raft.metrics().borrow().last_applied;
        assert!(
            behind.is_some_and(|l| l.index <= first.log_id.index),
            "the follower applied entries while cut off: {behind:?}"
        );

        cluster.router.heal();
        nodes.wait_applied(&[lagging], applied).await;
        let installed = nodes.get(lagging).raft.metrics().borrow().snapshot;
        assert!(
            installed.is_some_and(|s| s.index >= snapshot.index),
            "the follower caught up without the snapshot: its snapshot is {installed:?}"
        );
        let mut state = nodes.get(lagging).state.clone();
        let mut current = state.get_current_snapshot().await.expect("read the current snapshot").expect("a snapshot");
        assert!(current.meta.last_log_id.is_some_and(|l| l.index >= snapshot.index), "{:?}", current.meta);
        let mut sent = nodes.get(leader).state.clone().get_current_snapshot().await.expect("read").expect("a snapshot");
        assert_eq!(current.meta, sent.meta, "the follower holds the leader's snapshot");
        let (mut current_bytes, mut sent_bytes) = (Vec::new(), Vec::new());
        current.snapshot.read_to_end(&mut current_bytes).await.expect("read the follower's snapshot");
        sent.snapshot.read_to_end(&mut sent_bytes).await.expect("read the leader's snapshot");
        assert_eq!(current_bytes, sent_bytes, "with the same keys and values");
        for i in 0..KEYS {
            let key = format!("k{i}");
            assert_eq!(nodes.read(lagging, key.as_bytes()), nodes.read(leader, key.as_bytes()), "{key}");
            assert_eq!(nodes.read(lagging, key.as_bytes()), Some(format!("v{i}").into_bytes()), "{key}");
        }
        cluster.shutdown().await;
    })
    .await;
}
