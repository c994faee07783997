//! Concurrent clients on a few keys, with the leader isolated for part of
//! the run: the history of puts (answering the previous value) and reads
//! (`ensure_linearizable`, then the node's applied state) is linearizable,
//! key by key (`register`, `checker`).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::harness::{bounded, Cluster};
use crate::register::{self, Load};

const LOAD: Load = Load { clients: 3, ops_per_client: 30, keys: 2, epoch: 0 };

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_clients_see_a_linearizable_register_across_a_partition() {
    bounded(Duration::from_secs(40), async {
        let cluster = Cluster::start(3).await;
        let (done, mut progress) = watch::channel(0u64);
        let clients = LOAD.spawn(cluster.nodes(), Instant::now(), &Arc::new(done));

        // The nemesis: cuts the leader off once a fifth of the operations
        // are done, heals once three fifths are.
        let total = LOAD.total();
        progress.wait_for(|&n| n >= total / 5).await.expect("clients running");
        let old = cluster.leader().await;
        // The old leader alone on its side: a partition of one.
        cluster.router.partition([old]);
        let rest: Vec<_> = cluster.ids().into_iter().filter(|&id| id != old).collect();
        cluster.leader_among(&rest).await;
        progress.wait_for(|&n| n >= total * 3 / 5).await.expect("clients running");
        cluster.router.heal();

        let answered = register::check(clients).await;
        assert!(answered as u64 >= total / 2, "only {answered} of {total} operations answered (old leader {old})");
        cluster.shutdown().await;
    })
    .await;
}
