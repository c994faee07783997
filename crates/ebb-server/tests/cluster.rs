//! A three-node cluster in-process: writes and reads through any node
//! (redirects followed), stale reads, ranges, batches and scans; a learner
//! added (by snapshot) and promoted, a voter removed; the leader stopped,
//! a new one elected, every acknowledged write still there.

mod common;

use common::Cluster;
use ebb_server::api::BatchOp;

fn kv(key: &str, value: &str) -> (String, String) {
    (key.to_string(), value.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_and_reads_through_any_node() {
    let cluster = Cluster::start(3, |_| {}).await;
    let leader = cluster.leader().await;
    let follower = (1..=3).find(|id| *id != leader).unwrap();

    // A write through each node; linearizable reads through each node see
    // every write acknowledged before them.
    for id in 1..=3 {
        let answer = cluster.client(id).put(&format!("key{id}"), &format!("value{id}")).await.unwrap();
        assert_eq!(answer.previous, None);
        for reader in 1..=3 {
            for written in 1..=id {
                let value = cluster.client(reader).get(&format!("key{written}")).await.unwrap();
                assert_eq!(value, Some(format!("value{written}")), "node {reader} reads key{written}");
            }
        }
    }
    let answer = cluster.client(follower).put("key1", "again").await.unwrap();
    assert_eq!(answer.previous.as_deref(), Some("value1"), "a put answers the previous value");

    // A stale read reads the node's own applied state: once the node has
    // applied the write, it sees it, without asking the leader.
    cluster.wait_applied(follower, answer.log_index).await;
    assert_eq!(cluster.client(follower).get_stale("key1").await.unwrap().as_deref(), Some("again"));
    assert_eq!(cluster.client(follower).get_stale("absent").await.unwrap(), None);

    // Keys with characters a URL path treats specially.
    cluster.client(follower).put("a/b c?d", "odd").await.unwrap();
    assert_eq!(cluster.client(leader).get("a/b c?d").await.unwrap().as_deref(), Some("odd"));
    cluster.client(leader).delete("a/b c?d").await.unwrap();

    // Delete.
    let answer = cluster.client(follower).delete("key2").await.unwrap();
    assert_eq!(answer.previous.as_deref(), Some("value2"));
    assert_eq!(cluster.client(follower).get("key2").await.unwrap(), None);

    // Batch, then delete_range over part of it.
    let ops: Vec<BatchOp> = (0..10)
        .map(|i| BatchOp::Set { key: format!("r{i}"), value: format!("{i}") })
        .chain([BatchOp::Delete { key: "key3".into() }])
        .collect();
    cluster.client(follower).batch(&ops).await.unwrap();
    assert_eq!(cluster.client(leader).get("r7").await.unwrap().as_deref(), Some("7"));
    assert_eq!(cluster.client(leader).get("key3").await.unwrap(), None, "the batch's delete applied");
    cluster.client(follower).delete_range("r2", "r5").await.unwrap();

    // Scan bounds: start included, end excluded, limit and `more`.
    let scan = |start: &'static str, end: Option<&'static str>, limit: Option<usize>| {
        let client = cluster.client(follower);
        async move { client.scan(start, end, limit, false).await.unwrap() }
    };
    let all = scan("r", Some("s"), None).await;
    let keys: Vec<&str> = all.items.iter().map(|i| i.key.as_str()).collect();
    assert_eq!(keys, ["r0", "r1", "r5", "r6", "r7", "r8", "r9"]);
    assert!(!all.more);
    let first = scan("r1", Some("r8"), Some(3)).await;
    let got: Vec<(String, String)> = first.items.iter().map(|i| (i.key.clone(), i.value.clone())).collect();
    assert_eq!(got, [kv("r1", "1"), kv("r5", "5"), kv("r6", "6")]);
    assert!(first.more, "r7 follows within the range");
    let rest = scan("r7", Some("r8"), Some(3)).await;
    assert_eq!(rest.items.len(), 1);
    assert!(!rest.more);
    assert!(scan("r5", Some("r5"), None).await.items.is_empty(), "an empty range");
    let tail = scan("r9", None, None).await;
    assert_eq!(tail.items.first().map(|i| i.key.as_str()), Some("r9"));

    // A stale scan on a follower after it applied everything.
    let last = cluster.client(leader).put("zz", "last").await.unwrap();
    cluster.wait_applied(follower, last.log_index).await;
    let stale = cluster.client(follower).scan("r", Some("s"), None, true).await.unwrap();
    assert_eq!(stale.items, all.items);

    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn learner_catches_up_by_snapshot_and_is_promoted() {
    // Snapshots every 20 entries and no log kept behind them: a new node
    // can only catch up by installing a snapshot over HTTP.
    let small_log = |c: &mut ebb_server::NodeConfig| {
        c.snapshot_every = 20;
        c.logs_to_keep = 0;
    };
    let mut cluster = Cluster::start(3, small_log).await;
    for i in 0..60 {
        cluster.client(1).put(&format!("k{i:02}"), &format!("v{i}")).await.unwrap();
    }
    let leader = cluster.leader().await;
    cluster
        .node(leader)
        .raft()
        .wait(Some(common::WAIT))
        .metrics(|m| m.purged.is_some_and(|p| p.index >= 20), "log purged behind a snapshot")
        .await
        .unwrap();

    cluster.start_node(4, small_log).await;
    let addr4 = cluster.addrs[&4].clone();
    // Through a follower: the client follows the redirect to the leader.
    let follower = (1..=3).find(|id| *id != leader).unwrap();
    let added = cluster.client(follower).add_learner(4, &addr4).await.unwrap();
    cluster.wait_applied(4, added.log_index).await;
    let metrics = cluster.node(4).raft().metrics().borrow().clone();
    assert!(metrics.snapshot.is_some(), "the learner installed a snapshot: {metrics:?}");
    assert_eq!(cluster.client(4).get_stale("k07").await.unwrap().as_deref(), Some("v7"));
    let status = cluster.client(4).status().await.unwrap();
    assert_eq!(status.learners, [4]);
    assert_eq!(status.state, "Learner");

    // Promote it, then remove node `follower` through change-membership.
    let mut voters = vec![1, 2, 3, 4];
    cluster.client(1).change_membership(&voters).await.unwrap();
    assert_eq!(cluster.client(leader).status().await.unwrap().voters, voters);
    voters.retain(|id| *id != follower);
    let changed = cluster.client(4).change_membership(&voters).await.unwrap();
    let status = cluster.client(leader).status().await.unwrap();
    assert_eq!(status.voters, voters);
    assert!(status.nodes.iter().all(|n| n.id != follower), "node {follower} removed: {status:?}");

    // The new voter serves writes and linearizable reads (via the leader).
    cluster.client(4).put("after", "promotion").await.unwrap();
    assert_eq!(cluster.client(4).get("after").await.unwrap().as_deref(), Some("promotion"));
    assert!(changed.log_index > added.log_index);

    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_leader_keeps_every_acknowledged_write() {
    let mut cluster = Cluster::start(3, |_| {}).await;
    let old = cluster.leader().await;
    let survivor = (1..=3).find(|id| *id != old).unwrap();

    let mut acknowledged = Vec::new();
    for i in 0..40 {
        let (key, value) = (format!("k{i}"), format!("v{i}"));
        // Half through the leader, half through a follower.
        let via = if i % 2 == 0 { old } else { survivor };
        cluster.client(via).put(&key, &value).await.unwrap();
        acknowledged.push((key, value));
    }

    cluster.stop(old).await;
    let new = cluster.leader().await;
    assert_ne!(new, old, "a new leader among the two left");
    let status = cluster.client(survivor).status().await.unwrap();
    assert_eq!(status.leader.map(|l| l.id), Some(new));

    // Through a client that knew the old leader: it falls back to its seed.
    let client = cluster.client(survivor);
    for (key, value) in &acknowledged {
        assert_eq!(client.get(key).await.unwrap().as_ref(), Some(value), "acknowledged {key} lost");
    }
    client.put("after", "failover").await.unwrap();
    for id in (1..=3).filter(|id| *id != old) {
        assert_eq!(cluster.client(id).get("after").await.unwrap().as_deref(), Some("failover"));
    }

    cluster.shutdown().await;
}
