//! Two nodes given one id, members given one address, and a node started
//! with another cluster's directory: refused with a clear error, and the
//! impostor never counts as a member.

mod common;

use std::collections::BTreeMap;

use ebb_server::ClientError;
use reqwest::StatusCode;

fn assert_conflict<T: std::fmt::Debug>(answer: Result<T, ClientError>, expected: &str) {
    match answer {
        Err(ClientError::Server { status: StatusCode::CONFLICT, message }) => {
            assert!(message.contains(expected), "{message:?} does not say {expected:?}")
        }
        other => panic!("answered {other:?}, not a 409 saying {expected:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_learner_cannot_take_a_members_id_or_address() {
    let mut cluster = common::Cluster::start(3, |_| {}).await;
    let leader = cluster.leader().await;
    // A fourth node, started by mistake with node 2's id.
    let dir = cluster.dir.path().join("impostor");
    let mut config = common::config(2, cluster.dir.path());
    config.dir = dir;
    let impostor = ebb_server::start(config, common::listener().await).await.unwrap();
    let impostor_addr = impostor.addr().to_string();

    let client = cluster.client(leader);
    assert_conflict(client.add_learner(2, &impostor_addr).await, "node 2 is already a member at");
    // Another id at a member's address.
    let node3_addr = cluster.addrs[&3].clone();
    assert_conflict(client.add_learner(4, &node3_addr).await, "is already node 3's address");
    // Nothing changed: three voters at their own addresses.
    let status = client.status().await.unwrap();
    assert_eq!(status.voters, vec![1, 2, 3]);
    assert!(status.learners.is_empty());
    let addrs: BTreeMap<u64, String> = status.nodes.into_iter().map(|m| (m.id, m.addr)).collect();
    assert_eq!(addrs, cluster.addrs);
    // The cluster still writes.
    client.put("k", "v").await.unwrap();
    cluster.nodes.insert(4, Some(impostor));
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_refuses_raft_messages_for_another_id() {
    let dir = tempfile::tempdir().unwrap();
    let one = ebb_server::start(common::config(1, dir.path()), common::listener().await).await.unwrap();
    let two = ebb_server::start(common::config(2, dir.path()), common::listener().await).await.unwrap();
    // An operator's mistake: node 3's address is where a second node 2
    // serves.
    let mut config = common::config(2, dir.path());
    config.dir = dir.path().join("impostor");
    let impostor = ebb_server::start(config, common::listener().await).await.unwrap();

    // Init refuses two members at one address.
    let init = ebb_server::Client::new(one.addr().to_string());
    let same_addr =
        BTreeMap::from([(1, one.addr().to_string()), (2, two.addr().to_string()), (3, two.addr().to_string())]);
    match init.init(&same_addr).await {
        Err(ClientError::Server { status: StatusCode::BAD_REQUEST, message }) => {
            assert!(message.contains("nodes 2 and 3 are both given address"), "{message}")
        }
        other => panic!("init with one address twice answered {other:?}"),
    }

    let members =
        BTreeMap::from([(1, one.addr().to_string()), (2, two.addr().to_string()), (3, impostor.addr().to_string())]);
    init.init(&members).await.expect("init");
    // Nodes 1 and 2 are a majority of three and elect a leader; writes commit.
    let deadline = tokio::time::Instant::now() + common::WAIT;
    loop {
        if init.put("k", "v").await.is_ok() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no write acknowledged");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(init.get("k").await.unwrap().as_deref(), Some("v"));

    // The impostor refused every message meant for node 3: it holds no
    // log, voted for no one, and knows no leader.
    let metrics = impostor.raft().metrics().borrow().clone();
    assert_eq!(metrics.last_log_index, None, "the impostor appended entries meant for node 3");
    assert_eq!(metrics.current_term, 0, "the impostor took part in an election");
    assert_eq!(metrics.current_leader, None);

    // A message naming another node is a 409 saying which node this is.
    let answer = reqwest::Client::new()
        .post(format!("http://{}/raft/vote", impostor.addr()))
        .header("ebb-target-node", "3")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::CONFLICT);
    let message = answer.text().await.unwrap();
    assert!(message.contains("this is node 2, not node 3"), "{message}");

    for node in [one, two, impostor] {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_another_clusters_directory_is_refused() {
    // Cluster A writes, and stops.
    let a = common::Cluster::start(3, |_| {}).await;
    let written = a.client(a.leader().await).put("from", "cluster a").await.unwrap();
    a.wait_applied(3, written.log_index).await;
    let a_id = a.client(1).status().await.unwrap().cluster_id.expect("cluster a has an id");
    let a3_applied = a.node(3).raft().metrics().borrow().last_applied;
    let a_dir = a.dir.path().to_path_buf();
    let mut a = a;
    let ids: Vec<u64> = a.nodes.keys().copied().collect();
    for id in ids {
        a.stop(id).await;
    }

    // Cluster B: two fresh nodes, and a node 3 started (by mistake) with
    // A's node 3 directory.
    let dir = tempfile::tempdir().unwrap();
    let one = ebb_server::start(common::config(1, dir.path()), common::listener().await).await.unwrap();
    let two = ebb_server::start(common::config(2, dir.path()), common::listener().await).await.unwrap();
    let stray = ebb_server::start(common::config(3, &a_dir), common::listener().await).await.unwrap();
    let members =
        BTreeMap::from([(1, one.addr().to_string()), (2, two.addr().to_string()), (3, stray.addr().to_string())]);
    let client = ebb_server::Client::new(one.addr().to_string());
    let status = client.init(&members).await.expect("init cluster b");
    let b_id = status.cluster_id.expect("init gives cluster b an id");
    assert_ne!(a_id, b_id);

    // B goes on with nodes 1 and 2 ...
    let deadline = tokio::time::Instant::now() + common::WAIT;
    while client.put("from", "cluster b").await.is_err() {
        assert!(tokio::time::Instant::now() < deadline, "cluster b acknowledged no write");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let two_status = ebb_server::Client::new(two.addr().to_string()).status().await.unwrap();
    assert_eq!(two_status.cluster_id.as_deref(), Some(b_id.as_str()), "node 2 adopted b's id");
    // ... and A's node 3 refused every message of B: its log and state are
    // still A's.
    let metrics = stray.raft().metrics().borrow().clone();
    assert_eq!(metrics.last_applied, a3_applied, "the stray node took entries of cluster b");
    let stale = ebb_server::Client::new(stray.addr().to_string()).get_stale("from").await.unwrap();
    assert_eq!(stale.as_deref(), Some("cluster a"));
    let answer = reqwest::Client::new()
        .post(format!("http://{}/raft/vote", stray.addr()))
        .header("ebb-cluster-id", b_id.as_str())
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::CONFLICT);
    let message = answer.text().await.unwrap();
    assert!(message.contains(&format!("belongs to cluster {a_id}, not to cluster {b_id}")), "{message}");

    for node in [one, two, stray] {
        node.shutdown().await;
    }
}
