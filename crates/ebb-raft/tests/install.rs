//! Installing a snapshot by ingestion: a snapshot of many chunks replaces
//! the state exactly (keys only the old state had are gone), and an install
//! interrupted at each of its steps leaves the old state whole and nothing
//! that stops the next install.

mod common;

use std::path::Path;

use common::{membership, normal, open, open_on, receive, set, snapshot_bytes, MEM_DB};
use ebb::fs::{FaultOp, FaultRule, FileSystem, MemFs};
use ebb_raft::{KeyValues, StateMachine};
use openraft::storage::RaftStateMachine;
use openraft::{BasicNode, RaftSnapshotBuilder, SnapshotMeta};

type Sent = (SnapshotMeta<u64, BasicNode>, Vec<u8>);

fn everything(sm: &StateMachine) -> KeyValues {
    sm.scan(b"", None, usize::MAX).unwrap()
}

/// Files in the snapshot directory of the store at `db` on `fs`.
fn snapshot_files(fs: &dyn FileSystem, db: &Path) -> Vec<String> {
    fs.list_dir(&db.join("raft-snapshots")).unwrap()
}

#[tokio::test]
async fn a_snapshot_of_many_chunks_replaces_the_state_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut leader) = open(&dir.path().join("leader"));
    // About 3.5 MB: several of the reader's 1 MiB reads, many transfer chunks.
    let value = |i: usize, tag: &str| format!("{tag}{i:0>100}");
    let entries = (0..30_000).map(|i| normal(2, i as u64 + 2, set(&format!("key{i:06}"), &value(i, "new"))));
    leader.apply(std::iter::once(membership(1, 1, &[1, 2])).chain(entries)).await.unwrap();
    let mut built = leader.get_snapshot_builder().await.build_snapshot().await.unwrap();
    let sent = snapshot_bytes(&mut built.snapshot).await;
    assert!(sent.len() > 3 << 20, "{} bytes", sent.len());

    let path = dir.path().join("follower");
    let old = |first: u64, keys: Vec<String>| -> Vec<_> {
        keys.iter().zip(first..).map(|(k, i)| normal(1, i, set(k, "old"))).collect()
    };
    // Keys between the sent ones, in tables (the reopen's recovery flushes
    // the memtable).
    let (_, mut follower) = open(&path);
    follower.apply(old(1, (0..30_000).step_by(7).map(|i| format!("key{i:06}x")).collect())).await.unwrap();
    drop(follower);
    let (_, mut follower) = open(&path);
    let tables: u64 = follower.data_property("ebb.num-files-at-level0").unwrap().parse().unwrap();
    let deeper = follower.data_property("ebb.num-files-at-level1").unwrap();
    assert!(tables > 0 || deeper != "0", "some old keys are in tables");
    // Keys before the first sent, equal to sent ones, and after the last,
    // in the memtable.
    let mut keys: Vec<String> = vec!["".into(), "a".into(), "key".into(), "zzz".into(), "\u{ff}".into()];
    keys.extend((0..30_000).step_by(1000).map(|i| format!("key{i:06}")));
    follower.apply(old(10_000, keys)).await.unwrap();
    assert!(everything(&follower).len() > 4000);

    let data = receive(&mut follower, &sent, 256 << 10).await.unwrap();
    follower.install_snapshot(&built.meta, data).await.unwrap();
    let expected = everything(&leader);
    assert_eq!(expected.len(), 30_000);
    assert!(everything(&follower) == expected, "the installed state is exactly the snapshot's");
    assert_eq!(follower.applied_state().await.unwrap(), leader.applied_state().await.unwrap());
    let mut current = follower.get_current_snapshot().await.unwrap().expect("the installed snapshot");
    assert_eq!(current.meta, built.meta);
    assert!(snapshot_bytes(&mut current.snapshot).await == sent);
    drop((current, follower));

    let (_, mut reopened) = open(&path);
    assert!(everything(&reopened) == expected, "after a reopen");
    assert_eq!(reopened.applied_state().await.unwrap(), leader.applied_state().await.unwrap());
    let fs = ebb::Options::default().fs;
    assert_eq!(snapshot_files(fs.as_ref(), &path).len(), 1, "only the current snapshot's file");
}

/// The old state on a store at `fs`, and a snapshot of a different one.
async fn old_state_and_new_snapshot(fs: &MemFs) -> (StateMachine, Sent) {
    let (_, mut sm) = open_on(fs);
    sm.apply([membership(1, 1, &[1]), normal(1, 2, set("a", "1")), normal(1, 3, set("b", "2"))]).await.unwrap();
    sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
    sm.apply([normal(1, 4, set("old", "x"))]).await.unwrap();

    let (_, mut leader) = open_on(&MemFs::new());
    leader.apply([membership(1, 1, &[1]), normal(3, 9, set("a", "9")), normal(3, 10, set("new", "y"))]).await.unwrap();
    let mut snapshot = leader.get_snapshot_builder().await.build_snapshot().await.unwrap();
    let bytes = snapshot_bytes(&mut snapshot.snapshot).await;
    (sm, (snapshot.meta, bytes))
}

async fn observe(sm: &mut StateMachine) -> String {
    let (applied, membership) = sm.applied_state().await.unwrap();
    let snapshot = sm.get_current_snapshot().await.unwrap().map(|s| s.meta.snapshot_id);
    format!("{applied:?} {membership:?} {:?} {snapshot:?}", everything(sm))
}

async fn install(sm: &mut StateMachine, sent: &Sent) -> Result<(), String> {
    let data = receive(sm, &sent.1, 8).await.map_err(|e| e.to_string())?;
    sm.install_snapshot(&sent.0, data).await.map_err(|e| e.to_string())
}

#[tokio::test]
async fn an_install_interrupted_at_each_step_leaves_the_old_state_and_no_obstacle() {
    let steps: Vec<(&str, FaultRule)> = vec![
        ("receiving the file", FaultRule::new(FaultOp::Append).path_contains(".snap")),
        ("syncing the received file", FaultRule::new(FaultOp::Sync).path_contains(".snap")),
        ("creating the data table", FaultRule::new(FaultOp::Create).path_contains(".data.sst")),
        ("writing the data table", FaultRule::new(FaultOp::Append).path_contains(".data.sst")),
        ("syncing the data table", FaultRule::new(FaultOp::Sync).path_contains(".data.sst")),
        ("writing the metadata table", FaultRule::new(FaultOp::Create).path_contains(".meta.sst")),
        ("writing the snapshot record's table", FaultRule::new(FaultOp::Append).path_contains(".snapshot.sst")),
        ("syncing the snapshot directory", FaultRule::new(FaultOp::SyncDir).path_contains("raft-snapshots")),
        ("reading the tables to ingest", FaultRule::new(FaultOp::Open).path_contains(".sst")),
        (
            "placing the tables in the database",
            FaultRule::new(FaultOp::Create).path_contains(".sst").path_excludes("raft-snapshots"),
        ),
        ("recording them in the MANIFEST", FaultRule::any_op().path_contains("MANIFEST")),
    ];
    let probe = MemFs::new();
    let (mut sm, sent) = old_state_and_new_snapshot(&probe).await;
    let old = observe(&mut sm).await;
    install(&mut sm, &sent).await.unwrap();
    let new = observe(&mut sm).await;
    assert_ne!(old, new);
    drop(sm);

    for (step, rule) in steps {
        let fs = MemFs::new();
        let (mut sm, sent) = old_state_and_new_snapshot(&fs).await;
        fs.inject(rule);
        let result = install(&mut sm, &sent).await;
        assert_eq!(fs.faults_injected(), 1, "{step}: the fault was met");
        assert!(result.is_err(), "{step}: the install failed");
        fs.clear_faults();
        drop(sm);

        let (_, mut reopened) = open_on(&fs);
        assert_eq!(observe(&mut reopened).await, old, "{step}: the old state, whole");
        assert_eq!(snapshot_files(&fs, Path::new(MEM_DB)).len(), 1, "{step}: nothing left but the current file");
        install(&mut reopened, &sent).await.unwrap_or_else(|e| panic!("{step}: the next install: {e}"));
        assert_eq!(observe(&mut reopened).await, new, "{step}: the next install");
    }
}

#[tokio::test]
async fn a_replaced_snapshot_file_that_cannot_be_removed_is_removed_at_the_next_open() {
    let fs = MemFs::new();
    let (mut sm, sent) = old_state_and_new_snapshot(&fs).await;
    fs.inject(FaultRule::new(FaultOp::Remove).path_contains(".snap"));
    install(&mut sm, &sent).await.unwrap();
    assert_eq!(fs.faults_injected(), 1);
    let new = observe(&mut sm).await;
    assert_eq!(snapshot_files(&fs, Path::new(MEM_DB)).len(), 2, "the replaced file stayed");
    drop(sm);
    let (_, mut reopened) = open_on(&fs);
    assert_eq!(observe(&mut reopened).await, new);
    assert_eq!(snapshot_files(&fs, Path::new(MEM_DB)).len(), 1, "removed at the open");
}
