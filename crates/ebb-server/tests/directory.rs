//! A node's directory remembers its node id: another node refuses to start
//! in it, in-process and as the `ebb-server` binary.

mod common;

use std::process::Command;

use ebb_server::StartError;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_refuses_another_nodes_directory() {
    let dir = tempfile::tempdir().unwrap();
    let config = common::config(1, dir.path());
    let node_dir = config.dir.clone();
    let node = ebb_server::start(config, common::listener().await).await.unwrap();
    node.shutdown().await;

    let mut other = common::config(2, dir.path());
    other.dir = node_dir.clone();
    match ebb_server::start(other, common::listener().await).await {
        Err(StartError::WrongNode { owner: 1, id: 2, .. }) => {}
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("node 2 started in node 1's directory"),
    }

    // Its own node starts again in it.
    let again = ebb_server::start(common::config(1, dir.path()), common::listener().await).await.unwrap();
    again.shutdown().await;

    // A database without the node-id file: whose it is is unknown.
    std::fs::remove_file(node_dir.join(ebb_server::node::NODE_ID_FILE)).unwrap();
    match ebb_server::start(common::config(1, dir.path()), common::listener().await).await {
        Err(StartError::UnknownOwner(message)) => assert!(message.contains("no node-id file"), "{message}"),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("started with a database of unknown owner"),
    }
}

#[test]
fn the_binary_refuses_another_nodes_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(ebb_server::node::NODE_ID_FILE), "3\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_ebb-server"))
        .args(["--id", "1", "--listen", "127.0.0.1:0", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("belongs to node 3, not node 1"), "{stderr}");
    assert!(!dir.path().join(ebb_server::node::DATABASE_DIR).exists(), "no database created");
}
