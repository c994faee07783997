//! The leader cut off from the two others: they elect a new leader; the
//! old one cannot commit a write or serve a linearizable read (no
//! split brain); once healed it follows the new leader and holds every
//! acknowledged write, and not the write it could not commit.

use std::time::Duration;

use crate::harness::{bounded, set, Cluster, REQUEST_TIMEOUT, WAIT};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_cannot_commit_or_read_and_catches_up_after_healing() {
    bounded(Duration::from_secs(20), async {
        let cluster = Cluster::start(3).await;
        let nodes = cluster.nodes();
        let old = cluster.leader().await;
        nodes.write_on(old, set("before", "1")).await.expect("the leader takes a write");

        cluster.router.isolate(old);
        let rest: Vec<_> = cluster.ids().into_iter().filter(|&id| id != old).collect();
        let new = cluster.leader_among(&rest).await;
        let old_term = nodes.get(old).raft.metrics().borrow().current_term;
        assert!(nodes.get(new).raft.metrics().borrow().current_term > old_term, "the new leader has a newer term");

        // The old leader still believes it leads, but reaches no quorum.
        assert!(nodes.write_on(old, set("lost", "x")).await.is_err(), "the isolated leader committed a write");
        // It asks the others to confirm its leadership and hears from none.
        let read = tokio::time::timeout(REQUEST_TIMEOUT, nodes.get(old).raft.ensure_linearizable()).await;
        assert!(matches!(read, Ok(Err(_))), "the isolated leader's read check did not fail: {read:?}");

        for i in 0..5 {
            nodes.write_on(new, set(format!("after{i}"), "2")).await.expect("the new leader takes writes");
        }
        nodes.get(new).raft.ensure_linearizable().await.expect("the new leader serves linearizable reads");

        cluster.router.heal();
        let followed = nodes.get(old).raft.wait(Some(WAIT)).current_leader(new, "follow the new leader").await;
        assert!(followed.is_ok(), "the old leader does not follow {new}: {followed:?}");
        let barrier = cluster.write_barrier().await;
        nodes.wait_applied(&cluster.ids(), barrier).await;
        for id in cluster.ids() {
            assert_eq!(nodes.read(id, b"before"), Some(b"1".to_vec()), "node {id}");
            for i in 0..5 {
                assert_eq!(nodes.read(id, format!("after{i}").as_bytes()), Some(b"2".to_vec()), "node {id}");
            }
            assert_eq!(nodes.read(id, b"lost"), None, "node {id} applied the write the old leader could not commit");
        }
        cluster.shutdown().await;
    })
    .await;
}
