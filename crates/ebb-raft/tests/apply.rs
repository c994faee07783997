//! What applying entries does: responses carry a key's previous value, also
//! when an earlier entry of the same `apply` call wrote it; operations Ebb
//! would refuse are skipped without failing the entry; an installed
//! snapshot replaces every key.

mod common;

use common::{log_id, membership, normal, open, receive, set, snapshot_bytes};
use ebb_raft::{Operation, Request, Response, StateMachine};
use openraft::storage::RaftStateMachine;
use openraft::RaftSnapshotBuilder;

fn key(i: u64) -> Vec<u8> {
    format!("k{}", i % 8).into_bytes()
}

/// A fixed mix of requests over eight keys (a linear congruential sequence).
fn requests(n: usize) -> Vec<Request> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        x >> 33
    };
    (0..n)
        .map(|_| match next() % 6 {
            0 | 1 => Request::Set { key: key(next()), value: format!("v{}", next() % 100).into_bytes() },
            2 => Request::Delete { key: key(next()) },
            3 => {
                let (a, b) = (next() % 8, next() % 8);
                Request::DeleteRange { begin: key(a.min(b)), end: key(a.max(b)) }
            }
            4 => Request::Batch(vec![
                Operation::Set { key: key(next()), value: b"batch".to_vec() },
                Operation::Delete { key: key(next()) },
            ]),
            _ => Request::Set { key: key(next()), value: Vec::new() },
        })
        .collect()
}

async fn contents(sm: &StateMachine) -> Vec<Option<Vec<u8>>> {
    (0..8).map(|i| sm.get(&key(i)).unwrap()).collect()
}

#[tokio::test]
async fn one_apply_call_answers_and_ends_as_one_call_per_entry() {
    let requests = requests(300);
    let dir = tempfile::tempdir().unwrap();
    let (_, mut together) = open(&dir.path().join("together"));
    let (_, mut apart) = open(&dir.path().join("apart"));

    let entries = requests.iter().enumerate().map(|(i, r)| normal(1, i as u64 + 1, r.clone()));
    let answers_together = together.apply(entries).await.unwrap();
    let mut answers_apart = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        answers_apart.extend(apart.apply([normal(1, i as u64 + 1, r.clone())]).await.unwrap());
    }
    assert_eq!(answers_together, answers_apart);
    assert_eq!(contents(&together).await, contents(&apart).await);
    assert!(answers_apart.iter().any(|a| a.previous.is_some()), "some requests found a value");
    assert_eq!(together.applied_state().await.unwrap().0, Some(log_id(1, 300)));
}

#[tokio::test]
async fn responses_carry_the_previous_value() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut sm) = open(&dir.path().join("db"));
    let previous = |v: Option<&str>| Response { previous: v.map(|v| v.as_bytes().to_vec()) };
    let answers = sm
        .apply([
            membership(1, 1, &[1]),
            normal(1, 2, set("a", "1")),
            normal(1, 3, set("a", "2")),
            normal(1, 4, Request::Delete { key: b"a".to_vec() }),
            normal(1, 5, set("b", "3")),
            normal(1, 6, Request::DeleteRange { begin: b"a".to_vec(), end: b"c".to_vec() }),
            normal(1, 7, set("b", "4")),
        ])
        .await
        .unwrap();
    let expected = [None, None, Some("1"), Some("2"), None, None, None].map(|v: Option<&str>| previous(v)).to_vec();
    assert_eq!(answers, expected);
    let answers = sm.apply([normal(1, 8, Request::Delete { key: b"b".to_vec() })]).await.unwrap();
    assert_eq!(answers, vec![previous(Some("4"))], "across calls, read from the database");
}

#[tokio::test]
async fn operations_ebb_would_refuse_are_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut sm) = open(&dir.path().join("db"));
    let too_long = vec![b'x'; ebb::MAX_KEY_SIZE + 1];
    let requests = [
        set("keep", "1"),
        Request::DeleteRange { begin: b"z".to_vec(), end: b"a".to_vec() },
        Request::Set { key: too_long.clone(), value: b"v".to_vec() },
        Request::Batch(vec![
            Operation::Delete { key: too_long.clone() },
            Operation::Set { key: b"also".to_vec(), value: b"2".to_vec() },
        ]),
    ];
    for r in &requests[1..] {
        assert!(r.validate().is_err() || matches!(r, Request::Batch(_)), "{r:?}");
    }
    let entries = requests.iter().enumerate().map(|(i, r)| normal(1, i as u64 + 1, r.clone()));
    let answers = sm.apply(entries).await.unwrap();
    assert_eq!(answers.len(), 4);
    assert_eq!(sm.get(b"keep").unwrap(), Some(b"1".to_vec()), "the reversed range deleted nothing");
    assert_eq!(sm.get(b"also").unwrap(), Some(b"2".to_vec()), "the batch's valid operation applied");
    assert_eq!(sm.applied_state().await.unwrap().0, Some(log_id(1, 4)));
}

#[tokio::test]
async fn an_installed_snapshot_replaces_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let (_, mut leader) = open(&dir.path().join("leader"));
    leader
        .apply([membership(1, 1, &[1, 2]), normal(1, 2, set("b", "new")), normal(1, 3, set("", "empty key"))])
        .await
        .unwrap();
    let mut snapshot = leader.get_snapshot_builder().await.build_snapshot().await.unwrap();
    let sent = snapshot_bytes(&mut snapshot.snapshot).await;

    let (_, mut follower) = open(&dir.path().join("follower"));
    follower
        .apply([
            normal(1, 1, set("a", "old")),
            normal(1, 2, set("b", "old")),
            normal(1, 3, set("\u{ff}\u{ff}", "old, last")),
        ])
        .await
        .unwrap();
    let data = receive(&mut follower, &sent, 5).await.unwrap();
    follower.install_snapshot(&snapshot.meta, data).await.unwrap();
    assert_eq!(follower.get(b"a").unwrap(), None);
    assert_eq!(follower.get(b"b").unwrap(), Some(b"new".to_vec()));
    assert_eq!(follower.get(b"").unwrap(), Some(b"empty key".to_vec()));
    assert_eq!(follower.get("\u{ff}\u{ff}".as_bytes()).unwrap(), None, "the last key too");
    assert_eq!(follower.applied_state().await.unwrap(), leader.applied_state().await.unwrap());
    let mut rebuilt = follower.get_snapshot_builder().await.build_snapshot().await.unwrap();
    assert_eq!(snapshot_bytes(&mut rebuilt.snapshot).await, sent, "the same keys and values");
}
