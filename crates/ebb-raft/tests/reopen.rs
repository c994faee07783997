//! Everything the stores keep survives closing and reopening the database:
//! the log (after appends, a purge and a truncation), the vote, the
//! committed log id, the applied state and the current snapshot.

mod common;

use common::{blank, log_id, membership, normal, open, set, snapshot_bytes};
use ebb_raft::Request;
use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::{RaftLogReader, RaftSnapshotBuilder, Vote};

#[tokio::test]
async fn the_log_the_vote_and_the_log_pointers_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let written = {
        let (mut log, _sm) = open(&path);
        log.blocking_append((0..=4).map(|i| blank(1, i))).await.unwrap();
        log.blocking_append((5..=12).map(|i| normal(2, i, set(&format!("k{i}"), "v")))).await.unwrap();
        log.save_vote(&Vote::new_committed(2, 1)).await.unwrap();
        log.save_committed(Some(log_id(2, 8))).await.unwrap();
        log.purge(log_id(1, 3)).await.unwrap();
        log.truncate(log_id(2, 11)).await.unwrap();
        log.try_get_log_entries(..).await.unwrap()
    };
    assert_eq!(written.first().map(|e| e.log_id), Some(log_id(1, 4)));
    assert_eq!(written.last().map(|e| e.log_id), Some(log_id(2, 10)));

    let (mut log, _sm) = open(&path);
    let state = log.get_log_state().await.unwrap();
    assert_eq!(state.last_purged_log_id, Some(log_id(1, 3)));
    assert_eq!(state.last_log_id, Some(log_id(2, 10)));
    let read = log.try_get_log_entries(0..100).await.unwrap();
    assert_eq!(format!("{read:?}"), format!("{written:?}"), "entries and their requests read back");
    assert_eq!(log.read_vote().await.unwrap(), Some(Vote::new_committed(2, 1)));
    assert_eq!(log.read_committed().await.unwrap(), Some(log_id(2, 8)));
}

#[tokio::test]
async fn the_applied_state_and_the_current_snapshot_survive_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let built = {
        let (_log, mut sm) = open(&path);
        sm.apply([
            membership(1, 1, &[1, 2, 3]),
            normal(1, 2, set("a", "1")),
            normal(1, 3, set("b", "2")),
            normal(1, 4, Request::Delete { key: b"a".to_vec() }),
        ])
        .await
        .unwrap();
        let mut built = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
        let bytes = snapshot_bytes(&mut built.snapshot).await;
        // Applied after the snapshot: only the state machine holds it.
        sm.apply([normal(2, 5, set("c", "3"))]).await.unwrap();
        (built.meta, bytes)
    };

    let (_log, mut sm) = open(&path);
    let (last_applied, last_membership) = sm.applied_state().await.unwrap();
    assert_eq!(last_applied, Some(log_id(2, 5)));
    assert_eq!(last_membership.log_id(), &Some(log_id(1, 1)));
    assert_eq!(sm.get(b"a").unwrap(), None);
    assert_eq!(sm.get(b"b").unwrap(), Some(b"2".to_vec()));
    assert_eq!(sm.get(b"c").unwrap(), Some(b"3".to_vec()));

    let mut current = sm.get_current_snapshot().await.unwrap().expect("the snapshot survived");
    assert_eq!(current.meta, built.0);
    assert_eq!(current.meta.last_log_id, Some(log_id(1, 4)));
    assert_eq!(snapshot_bytes(&mut current.snapshot).await, built.1);
}
