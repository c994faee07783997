//! A fifth of the messages between nodes lost (seeded), each way, while a
//! client writes: every acknowledged write is on every node once the
//! network is healed.

use std::time::Duration;

use crate::harness::{bounded, set, Cluster};

const KEYS: usize = 40;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_message_loss() {
    bounded(Duration::from_secs(40), async {
        let cluster = Cluster::start(3).await;
        let nodes = cluster.nodes();
        cluster.router.lose_messages(0.2, 0x5eed);

        let mut acknowledged = Vec::new();
        for i in 0..KEYS {
            let (key, value) = (format!("k{i}"), format!("v{i}"));
            if nodes.write(set(key.clone(), value.clone()), 5).await.is_some() {
                acknowledged.push((key, value));
            }
        }
        eprintln!("{} of {KEYS} writes acknowledged", acknowledged.len());
        assert!(acknowledged.len() >= KEYS / 2, "only {} of {KEYS} writes acknowledged", acknowledged.len());

        cluster.router.heal();
        let barrier = cluster.write_barrier().await;
        nodes.wait_applied(&cluster.ids(), barrier).await;
        for id in cluster.ids() {
            for (key, value) in &acknowledged {
                assert_eq!(nodes.read(id, key.as_bytes()), Some(value.clone().into_bytes()), "node {id}, {key}");
            }
        }
        cluster.shutdown().await;
    })
    .await;
}
