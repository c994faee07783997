//! Three nodes elect a leader; writes through the leader are applied, with
//! their answers, on every node.

use std::time::Duration;

use crate::harness::{bounded, set, Cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_elect_a_leader_and_replicate_writes() {
    bounded(Duration::from_secs(20), async {
        let cluster = Cluster::start(3).await;
        let nodes = cluster.nodes();
        let leader = cluster.leader().await;
        for id in cluster.ids() {
            let m =
                nodes.get(id).raft.wait(Some(crate::harness::WAIT)).current_leader(leader, "agree on the leader").await;
            assert!(m.is_ok(), "node {id} does not follow {leader}: {m:?}");
        }

        let mut last = 0;
        for i in 0..20u32 {
            let key = format!("k{}", i % 10);
            let response = nodes.write_on(leader, set(key, format!("v{i}"))).await.expect("the leader takes the write");
            let previous = (i >= 10).then(|| format!("v{}", i - 10).into_bytes());
            assert_eq!(response.data.previous, previous, "write {i} answers the key's previous value");
            last = response.log_id.index;
        }
        nodes.wait_applied(&cluster.ids(), last).await;
        for id in cluster.ids() {
            for k in 0..10 {
                assert_eq!(
                    nodes.read(id, format!("k{k}").as_bytes()),
                    Some(format!("v{}", k + 10).into_bytes()),
                    "node {id}"
                );
            }
        }
        cluster.shutdown().await;
    })
    .await;
}
