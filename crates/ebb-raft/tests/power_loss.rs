//! The durability contract under a power loss (Ebb's in-memory filesystem,
//! dropping every byte not synced): what a call acknowledged survives,
//! and an install interrupted at any filesystem operation leaves the old
//! state or the new one, never a mix.

mod common;

use common::{blank, log_id, membership, normal, open_on, receive, set, snapshot_bytes};
use ebb::fs::{CrashMode, FaultRule, MemFs};
use ebb_raft::StateMachine;
use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::{BasicNode, SnapshotMeta};
use openraft::{RaftLogReader, RaftSnapshotBuilder, Vote};

/// What a power loss now would leave of `fs`.
fn power_loss(fs: &MemFs) -> MemFs {
    fs.crash_clone(CrashMode::DropUnsynced)
}

#[tokio::test]
async fn each_acknowledged_log_call_survives_a_power_loss_right_after_it() {
    let fs = MemFs::new();
    let (mut log, mut sm) = open_on(&fs);

    log.blocking_append((0..=5).map(|i| blank(1, i))).await.unwrap();
    let (mut after, _) = open_on(&power_loss(&fs));
    assert_eq!(after.get_log_state().await.unwrap().last_log_id, Some(log_id(1, 5)), "append");

    log.save_vote(&Vote::new(2, 1)).await.unwrap();
    let (mut after, _) = open_on(&power_loss(&fs));
    assert_eq!(after.read_vote().await.unwrap(), Some(Vote::new(2, 1)), "save_vote");

    log.purge(log_id(1, 2)).await.unwrap();
    let (mut after, _) = open_on(&power_loss(&fs));
    assert_eq!(after.get_log_state().await.unwrap().last_purged_log_id, Some(log_id(1, 2)), "purge");
    assert_eq!(after.try_get_log_entries(..).await.unwrap().len(), 3, "purge deleted 0..=2");

    log.truncate(log_id(1, 4)).await.unwrap();
    let (mut after, _) = open_on(&power_loss(&fs));
    assert_eq!(after.get_log_state().await.unwrap().last_log_id, Some(log_id(1, 3)), "truncate");

    // An apply is not synced itself; the next synced write carries it.
    sm.apply([normal(1, 3, set("k", "v"))]).await.unwrap();
    log.blocking_append([blank(2, 4)]).await.unwrap();
    let (_, mut after) = open_on(&power_loss(&fs));
    assert_eq!(after.applied_state().await.unwrap().0, Some(log_id(1, 3)), "apply, then append");
    assert_eq!(after.get(b"k").unwrap(), Some(b"v".to_vec()));

    let built = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
    let (_, mut after) = open_on(&power_loss(&fs));
    let current = after.get_current_snapshot().await.unwrap().expect("build_snapshot");
    assert_eq!(current.meta, built.meta);
}

/// The state a test can see of a state machine: applied id, keys, current snapshot id.
async fn observe(sm: &mut StateMachine) -> String {
    let (applied, _) = sm.applied_state().await.unwrap();
    let keys: Vec<_> = ["a", "b", "old", "new"].iter().map(|k| (k, sm.get(k.as_bytes()).unwrap())).collect();
    let snapshot = sm.get_current_snapshot().await.unwrap().map(|s| s.meta.snapshot_id);
    format!("{applied:?} {keys:?} {snapshot:?}")
}

/// A store at `fs` holding the old state, and the snapshot of the new one
/// (built on another store): its metadata and its bytes.
async fn old_state_and_new_snapshot(fs: &MemFs) -> (StateMachine, (SnapshotMeta<u64, BasicNode>, Vec<u8>)) {
    let (_, mut sm) = open_on(fs);
    sm.apply([membership(1, 1, &[1]), normal(1, 2, set("a", "1")), normal(1, 3, set("b", "2"))]).await.unwrap();
    sm.apply([normal(1, 4, set("old", "x"))]).await.unwrap();
    sm.get_snapshot_builder().await.build_snapshot().await.unwrap();

    let (_, mut leader) = open_on(&MemFs::new());
    leader.apply([membership(1, 1, &[1]), normal(3, 9, set("a", "9")), normal(3, 10, set("new", "y"))]).await.unwrap();
    let mut snapshot = leader.get_snapshot_builder().await.build_snapshot().await.unwrap();
    let bytes = snapshot_bytes(&mut snapshot.snapshot).await;
    (sm, (snapshot.meta, bytes))
}

/// Receives the snapshot (in chunks, as from a leader) and installs it;
/// whether both succeeded.
async fn install(sm: &mut StateMachine, snapshot: &(SnapshotMeta<u64, BasicNode>, Vec<u8>)) -> bool {
    match receive(sm, &snapshot.1, 16).await {
        Ok(data) => sm.install_snapshot(&snapshot.0, data).await.is_ok(),
        Err(_) => false,
    }
}

#[tokio::test]
async fn an_install_interrupted_at_any_filesystem_operation_leaves_the_old_state_or_the_new() {
    // The two states, and how many filesystem operations an install takes.
    let probe = MemFs::new();
    let (mut sm, snapshot) = old_state_and_new_snapshot(&probe).await;
    let old = observe(&mut sm).await;
    let before = probe.op_count();
    assert!(install(&mut sm, &snapshot).await);
    let ops = probe.op_count() - before;
    let new = observe(&mut sm).await;
    assert_eq!((sm.get(b"old").unwrap(), sm.get(b"new").unwrap()), (None, Some(b"y".to_vec())));
    assert!(ops > 0);
    drop(sm);

    let mut outcomes = std::collections::BTreeSet::new();
    for k in 1..=ops {
        let fs = MemFs::new();
        let (mut sm, snapshot) = old_state_and_new_snapshot(&fs).await;
        fs.inject(FaultRule::any_op().nth(k).persistent());
        let installed = install(&mut sm, &snapshot).await;
        let (_, mut after) = open_on(&power_loss(&fs));
        let seen = observe(&mut after).await;
        if installed {
            assert_eq!(seen, new, "fault at operation {k}: the install was acknowledged");
        } else {
            assert!(seen == old || seen == new, "fault at operation {k}: {seen}");
        }
        outcomes.insert(seen == new);
        // Nothing the interrupted install left behind stops the next one.
        assert!(install(&mut after, &snapshot).await, "fault at operation {k}: the next install");
        assert_eq!(observe(&mut after).await, new, "fault at operation {k}: the next install");
    }
    assert!(outcomes.contains(&false), "some fault interrupted the install");
}
