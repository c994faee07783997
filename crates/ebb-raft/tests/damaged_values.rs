//! Damaged stored values are errors, never panics: a value with an unknown
//! format version byte, one cut short, one with bytes left over, one that
//! disagrees with its key, each in the log, the vote, the state machine and
//! the snapshot, gives openraft's `StorageError` naming what it was reading.
//! So does a snapshot sent to be installed that does not decode; the state
//! it was to replace stays.

mod common;

use std::path::Path;

use common::{blank, log_id, membership, normal, open, receive, rewrite_raw, set, snapshot_bytes};
use ebb_raft::{ReadError, StoreError};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::{RaftLogReader, RaftSnapshotBuilder, SnapshotMeta, Vote};

/// A stored value and its damaged forms, each with what it is.
fn damaged(value: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let mut unknown_version = value.to_vec();
    unknown_version[0] = 0x7f;
    let mut longer = value.to_vec();
    longer.push(0);
    vec![
        ("unknown version byte", unknown_version),
        ("no bytes at all", Vec::new()),
        ("only the version byte", value[..1].to_vec()),
        ("cut short", value[..value.len() - 1].to_vec()),
        ("a byte left over", longer),
    ]
}

/// A store at `path` with a log, a vote, an applied state and a snapshot.
async fn populate(path: &Path) {
    let (mut log, mut sm) = open(path);
    log.blocking_append([blank(1, 1), normal(1, 2, set("k", "value")), blank(1, 3)]).await.unwrap();
    log.save_vote(&Vote::new(1, 1)).await.unwrap();
    sm.apply([membership(1, 1, &[1]), normal(1, 2, set("k", "value"))]).await.unwrap();
    sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
}

/// The value under `key` in `family` of a populated store.
fn stored(path: &Path, family: &str, key: &[u8]) -> Vec<u8> {
    let mut value = None;
    rewrite_raw(path, family, key, |v| {
        value = v.clone();
        v
    });
    value.expect("the key is stored")
}

fn assert_storage_error<T: std::fmt::Debug>(result: Result<T, StoreError>, subject: &str, case: &str) {
    let error = result.expect_err(case);
    let text = error.to_string();
    assert!(text.starts_with(&format!("when Read {subject}")), "{case}: {text}");
}

#[tokio::test]
async fn a_damaged_log_entry_is_a_storage_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    populate(&path).await;
    let key = 3u64.to_be_bytes();
    let good = stored(&path, "raft_log", &key);
    let mut cases = damaged(&good);
    cases.push(("an entry under another index", stored(&path, "raft_log", &2u64.to_be_bytes())));
    for (case, value) in cases {
        rewrite_raw(&path, "raft_log", &key, |_| Some(value));
        let (mut log, _) = open(&path);
        assert_storage_error(log.try_get_log_entries(0..10).await, "Logs", case);
        assert_storage_error(log.get_log_state().await, "Logs", case);
        assert_eq!(log.try_get_log_entries(1..3).await.unwrap().len(), 2, "{case}: the entries before it read");
    }
    rewrite_raw(&path, "raft_log", &key, |_| Some(good));
    let (mut log, _) = open(&path);
    assert_eq!(log.get_log_state().await.unwrap().last_log_id, Some(log_id(1, 3)), "repaired");
}

#[tokio::test]
async fn a_damaged_vote_committed_or_purge_record_is_a_storage_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    populate(&path).await;
    {
        let (mut log, _) = open(&path);
        log.save_committed(Some(log_id(1, 2))).await.unwrap();
        log.purge(log_id(1, 1)).await.unwrap();
    }
    for (key, subject) in [(&b"vote"[..], "Vote"), (b"committed", "Logs"), (b"last_purged", "Logs")] {
        let good = stored(&path, "raft_meta", key);
        for (case, value) in damaged(&good) {
            rewrite_raw(&path, "raft_meta", key, |_| Some(value));
            let (mut log, _) = open(&path);
            let result = match key {
                b"vote" => log.read_vote().await.map(|v| format!("{v:?}")),
                b"committed" => log.read_committed().await.map(|c| format!("{c:?}")),
                _ => log.get_log_state().await.map(|s| format!("{s:?}")),
            };
            assert_storage_error(result, subject, case);
        }
        rewrite_raw(&path, "raft_meta", key, |_| Some(good));
    }
}

#[tokio::test]
async fn damaged_state_machine_values_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    populate(&path).await;
    for key in [&b"last_applied"[..], b"last_membership"] {
        let good = stored(&path, "sm_meta", key);
        for (case, value) in damaged(&good) {
            rewrite_raw(&path, "sm_meta", key, |_| Some(value));
            let (_, mut sm) = open(&path);
            assert_storage_error(sm.applied_state().await, "StateMachine", case);
            assert_storage_error(sm.get_snapshot_builder().await.build_snapshot().await, "StateMachine", case);
        }
        rewrite_raw(&path, "sm_meta", key, |_| Some(good));
    }
    // An application value: only its version byte is checked.
    rewrite_raw(&path, "sm_data", b"k", |_| Some(b"\x7fvalue".to_vec()));
    let (_, mut sm) = open(&path);
    assert!(matches!(sm.get(b"k"), Err(ReadError::Format(_))));
    assert_storage_error(sm.get_snapshot_builder().await.build_snapshot().await, "StateMachine", "data value");
}

/// The path of the current snapshot's file of the store at `path` (the only
/// file in its snapshot directory after an open).
fn snapshot_file(path: &Path) -> std::path::PathBuf {
    let dir = path.join("raft-snapshots");
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(names.len(), 1, "{names:?}");
    names[0].clone()
}

#[tokio::test]
async fn a_damaged_current_snapshot_is_a_storage_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    populate(&path).await;
    let record = stored(&path, "sm_snapshot", b"current");
    let file = snapshot_file(&path);
    for (case, value) in damaged(&record) {
        rewrite_raw(&path, "sm_snapshot", b"current", |_| Some(value));
        let (_, mut sm) = open(&path);
        assert_storage_error(sm.get_current_snapshot().await, "Snapshot", case);
        assert!(file.exists(), "{case}: no file is removed on the strength of a damaged record");
    }
    rewrite_raw(&path, "sm_snapshot", b"current", |_| Some(record));
    let good = std::fs::read(&file).unwrap();
    std::fs::write(&file, &good[..good.len() - 1]).unwrap();
    let (_, mut sm) = open(&path);
    assert_storage_error(sm.get_current_snapshot().await, "Snapshot", "file cut short");
    drop(sm);
    std::fs::remove_file(&file).unwrap();
    let (_, mut sm) = open(&path);
    assert_storage_error(sm.get_current_snapshot().await, "Snapshot", "file missing");
}

#[tokio::test]
async fn a_snapshot_that_does_not_decode_is_refused_and_the_state_stays() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    populate(&path).await;
    let (_, mut sm) = open(&path);
    let before = sm.applied_state().await.unwrap();
    let mut built = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
    let good = snapshot_bytes(&mut built.snapshot).await;
    drop(built);
    let current = sm.get_current_snapshot().await.unwrap().expect("just built").meta;
    let meta = SnapshotMeta { last_log_id: Some(log_id(5, 50)), snapshot_id: "sent".into(), ..current.clone() };
    let mut cut = good.clone();
    cut.pop();
    let mut version = good.clone();
    version[0] = 9;
    let mut flipped = good.clone();
    flipped[3] ^= 0x20;
    let cases = [("cut short", cut), ("unknown version", version), ("empty", Vec::new()), ("a byte changed", flipped)];
    for (case, data) in cases {
        let received = receive(&mut sm, &data, 7).await.unwrap();
        let result = sm.install_snapshot(&meta, received).await;
        let text = result.expect_err(case).to_string();
        assert!(text.starts_with("when Read Snapshot"), "{case}: {text}");
        assert_eq!(sm.applied_state().await.unwrap(), before, "{case}");
        assert_eq!(sm.get(b"k").unwrap(), Some(b"value".to_vec()), "{case}");
        assert_eq!(sm.get_current_snapshot().await.unwrap().map(|s| s.meta), Some(current.clone()), "{case}");
        assert_eq!(std::fs::read_dir(path.join("raft-snapshots")).unwrap().count(), 1, "{case}: no file left");
    }
}
