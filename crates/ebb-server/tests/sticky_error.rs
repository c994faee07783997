//! A node whose database fails (every sync an I/O error, through Ebb's
//! in-memory filesystem) stops serving rather than answering from a state
//! that can no longer catch up; the cluster goes on without it; restarted
//! on a healthy disk it keeps what it had and catches up.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use ebb::fs::{FaultOp, FaultRule, MemFs};
use ebb_server::{Client, ClientError};
use reqwest::StatusCode;

/// Writes `key` through `client` until acknowledged (a leader may be being
/// elected), for at most [`common::WAIT`].
async fn put_acknowledged(client: &Client, key: &str, value: &str) {
    let deadline = tokio::time::Instant::now() + common::WAIT;
    loop {
        match client.put(key, value).await {
            Ok(_) => return,
            Err(e) => assert!(tokio::time::Instant::now() < deadline, "{key} not acknowledged: {e}"),
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

fn assert_stopped<T: std::fmt::Debug>(what: &str, answer: Result<T, ClientError>) {
    match answer {
        Err(ClientError::Server { status: StatusCode::INTERNAL_SERVER_ERROR, message }) => {
            assert!(message.contains("raft stopped"), "{what}: {message}")
        }
        other => panic!("{what} on the failed node answered {other:?}, not a 500"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_disk_fails_stops_serving_and_the_cluster_goes_on() {
    // Each node's database on its own in-memory filesystem.
    let disks: BTreeMap<u64, MemFs> = (1..=3).map(|id| (id, MemFs::new())).collect();
    let on_disk = |config: &mut ebb_server::NodeConfig| {
        config.ebb_options.fs = Arc::new(disks[&config.id].clone());
    };
    let mut cluster = common::Cluster::start(3, on_disk).await;
    let leader = cluster.leader().await;
    let failing = (1..=3).find(|id| *id != leader).unwrap();
    let healthy = (1..=3).find(|id| *id != leader && *id != failing).unwrap();
    let client = cluster.client(leader);
    let mut acknowledged = BTreeMap::new();
    for i in 0..20 {
        let (key, value) = (format!("before-{i:02}"), format!("v{i}"));
        put_acknowledged(&client, &key, &value).await;
        acknowledged.insert(key, value);
    }
    let applied = cluster.node(leader).raft().metrics().borrow().last_applied.unwrap().index;
    cluster.wait_applied(failing, applied).await;

    // From now on every sync on the failing node's disk is an I/O error:
    // its next append fails, and its Raft stops.
    disks[&failing].inject(FaultRule::new(FaultOp::Sync).persistent());
    for i in 0..20 {
        let (key, value) = (format!("during-{i:02}"), format!("w{i}"));
        put_acknowledged(&client, &key, &value).await;
        acknowledged.insert(key, value);
    }
    cluster
        .node(failing)
        .raft()
        .wait(Some(common::WAIT))
        .metrics(|m| m.running_state.is_err(), "raft stopped on the storage error")
        .await
        .expect("the failing node's raft stops");
    assert!(disks[&failing].faults_injected() > 0, "the fault was hit");

    // It serves nothing: no writes, no linearizable reads, no stale reads
    // of a state that would never catch up; its status says why.
    let on_failing = cluster.client(failing);
    assert_stopped("a write", on_failing.put("after", "x").await);
    assert_stopped("a read", on_failing.get("before-00").await);
    assert_stopped("a stale read", on_failing.get_stale("before-00").await);
    assert_stopped("a stale scan", on_failing.scan("", None, None, true).await);
    let status = on_failing.status().await.expect("status still answers");
    let why = status.stopped.expect("status says the node stopped");
    assert!(why.contains("I/O") || why.contains("error"), "{why}");

    // The other two go on: every acknowledged write reads back through
    // the healthy follower (redirected to the leader) and is applied there.
    let on_healthy = cluster.client(healthy);
    put_acknowledged(&on_healthy, "after", "x").await;
    acknowledged.insert("after".into(), "x".into());
    for (key, value) in &acknowledged {
        assert_eq!(on_healthy.get(key).await.unwrap().as_deref(), Some(value.as_str()), "{key}");
    }

    // Restarted on a healthy disk, the node keeps what it had and catches
    // up: every acknowledged write is in its own applied state.
    cluster.stop(failing).await;
    disks[&failing].clear_faults();
    cluster.restart(failing, on_disk).await;
    let applied = cluster.node(leader).raft().metrics().borrow().last_applied.unwrap().index;
    cluster.wait_applied(failing, applied).await;
    let on_failing = cluster.client(failing);
    for (key, value) in &acknowledged {
        assert_eq!(on_failing.get_stale(key).await.unwrap().as_deref(), Some(value.as_str()), "{key}");
    }
    cluster.shutdown().await;
}
