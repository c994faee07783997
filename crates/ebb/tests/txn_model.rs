//! Random transactional histories against a reference that knows, for each
//! step, what a read must return and whether a lock, a write or a commit
//! must fail: several transactions open at once (interleaved on one thread),
//! snapshots, savepoints, merges, rollbacks, plain writes and range
//! deletions on the database beside them, flushes, and (pessimistic) named
//! transactions prepared and finished.
//!
//! Optimistic: a commit fails `Busy` exactly when a key the transaction
//! tracked was written after the transaction's sequence for it (its
//! snapshot's, or the time it was first tracked). Pessimistic (lock
//! timeout 0): a lock fails `TimedOut` exactly when another transaction
//! holds the key in a conflicting mode; with a snapshot, locking a key
//! written after it fails `Busy`.
//!
//! `EBB_TXN_MODEL_CASES` (default 150), `EBB_TXN_MODEL_SEED` (one case).

use std::collections::BTreeMap;

use ebb::{
    OptimisticTransactionDb, OptimisticTransactionDbOptions, OptimisticTransactionOptions, Options, ReadOptions,
    Transaction, TransactionDb, TransactionDbOptions, TransactionOptions, TransactionState, WriteOptions,
};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, pct: u64) -> bool {
        self.below(100) < pct
    }
}

const KEYS: u64 = 10;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:02}").into_bytes()
}

type State = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Clone, Debug)]
enum Op {
    Put(Vec<u8>),
    Delete,
    Merge(Vec<u8>),
}

fn apply(state: &mut State, k: &[u8], op: &Op) {
    match op {
        Op::Put(v) => {
            state.insert(k.to_vec(), v.clone());
        }
        Op::Delete => {
            state.remove(k);
        }
        Op::Merge(v) => {
            let new = match state.get(k) {
                Some(old) => [old.as_slice(), b",", v].concat(),
                None => v.clone(),
            };
            state.insert(k.to_vec(), new);
        }
    }
}

#[derive(Clone)]
struct Tracked {
    time: u64,
    exclusive: bool,
}

#[derive(Clone)]
struct SavePoint {
    writes: usize,
    tracked: BTreeMap<Vec<u8>, Tracked>,
    snapshot: Option<u64>,
}

#[derive(Clone)]
struct ModelTxn {
    writes: Vec<(Vec<u8>, Op)>,
    tracked: BTreeMap<Vec<u8>, Tracked>,
    snapshot: Option<u64>,
    save_points: Vec<SavePoint>,
    prepared: bool,
}

impl ModelTxn {
    fn view(&self, base: &State) -> State {
        let mut s = base.clone();
        for (k, op) in &self.writes {
            apply(&mut s, k, op);
        }
        s
    }
}

struct Model {
    /// The database after each write event: `states[t]` at time `t`.
    states: Vec<State>,
    last_write: BTreeMap<Vec<u8>, u64>,
}

impl Model {
    fn now(&self) -> u64 {
        (self.states.len() - 1) as u64
    }
    fn latest(&self) -> &State {
        self.states.last().unwrap()
    }
    fn write(&mut self, writes: &[(Vec<u8>, Op)]) {
        if writes.is_empty() {
            return;
        }
        let mut s = self.latest().clone();
        for (k, op) in writes {
            apply(&mut s, k, op);
        }
        self.states.push(s);
        let t = self.now();
        for (k, _) in writes {
            self.last_write.insert(k.clone(), t);
        }
    }
    fn written_after(&self, k: &[u8], t: u64) -> bool {
        self.last_write.get(k).is_some_and(|w| *w > t)
    }
}

enum Db {
    O(Box<OptimisticTransactionDb>),
    P(Box<TransactionDb>),
}

fn check_view(t: &Transaction<'_>, want: &State, ctx: &str) {
    for i in 0..KEYS {
        let k = key(i);
        assert_eq!(t.get(&k).unwrap().as_ref(), want.get(&k), "{ctx}: get {}", String::from_utf8_lossy(&k));
    }
    let mut it = t.iter(ReadOptions::default());
    it.seek_to_first();
    let mut got = Vec::new();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    let expect: Vec<_> = want.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got, expect, "{ctx}: forward scan");
    it.seek_to_last();
    let mut back = Vec::new();
    while it.valid() {
        back.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    back.reverse();
    assert_eq!(back, expect, "{ctx}: backward scan");
}

fn run_case(seed: u64, pessimistic: bool) {
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let dir = tempfile::tempdir().unwrap();
    let mut o = Options::default();
    o.create_if_missing = true;
    o.merge_operator = Some(ebb::merge_operator::from_name("stringappend").unwrap());
    let db = if pessimistic {
        let to = TransactionDbOptions { default_lock_timeout: 0, transaction_lock_timeout: 0, ..Default::default() };
        Db::P(Box::new(TransactionDb::open(dir.path(), o, to).unwrap()))
    } else {
        Db::O(Box::new(
            OptimisticTransactionDb::open(dir.path(), o, OptimisticTransactionDbOptions::default()).unwrap(),
        ))
    };
    let base: &ebb::Db = match &db {
        Db::O(d) => d.db(),
        Db::P(d) => d.db(),
    };
    let mut model = Model { states: vec![State::new()], last_write: BTreeMap::new() };
    let mut txns: Vec<(Transaction<'_>, ModelTxn)> = Vec::new();
    let wo = WriteOptions::default();
    let mut next_name = 0u64;
    for step in 0..250 {
        let ctx = format!("seed {seed} {} step {step}", if pessimistic { "pessimistic" } else { "optimistic" });
        let roll = rng.below(100);
        if txns.is_empty() || (roll < 8 && txns.len() < 4) {
            let set_snapshot = rng.chance(40);
            let t = match &db {
                Db::O(d) => d.begin_transaction(&wo, &OptimisticTransactionOptions { set_snapshot }),
                Db::P(d) => {
                    d.begin_transaction(&wo, &TransactionOptions { set_snapshot, ..TransactionOptions::default() })
                }
            };
            let m = ModelTxn {
                writes: Vec::new(),
                tracked: BTreeMap::new(),
                snapshot: set_snapshot.then(|| model.now()),
                save_points: Vec::new(),
                prepared: false,
            };
            txns.push((t, m));
            continue;
        }
        if roll < 14 {
            // A plain write, or a range deletion, on the database.
            let k = key(rng.below(KEYS));
            if rng.chance(20) {
                let (a, b) = (rng.below(KEYS), rng.below(KEYS));
                let (a, b) = (a.min(b), a.max(b) + 1);
                base.delete_range(&key(a), &key(b)).unwrap();
                let gone: Vec<_> = (a..b).map(|i| (key(i), Op::Delete)).collect();
                model.write(&gone);
                continue;
            }
            let v = format!("plain{step}").into_bytes();
            let locked_by_other = txns.iter().any(|(_, m)| m.tracked.contains_key(&k));
            let r = match &db {
                Db::O(d) => d.put(&k, &v),
                Db::P(d) => d.put(&k, &v),
            };
            if pessimistic && locked_by_other {
                assert!(r.unwrap_err().is_timed_out(), "{ctx}: a plain write to a locked key");
            } else {
                r.unwrap();
                model.write(&[(k, Op::Put(v))]);
            }
            continue;
        }
        if roll < 16 {
            base.flush(rng.chance(50)).unwrap();
            continue;
        }
        let ti = rng.below(txns.len() as u64) as usize;
        let others_hold = |txns: &Vec<(Transaction<'_>, ModelTxn)>, k: &[u8], exclusive: bool| {
            txns.iter()
                .enumerate()
                .any(|(j, (_, m))| j != ti && m.tracked.get(k).is_some_and(|t| exclusive || t.exclusive))
        };
        if txns[ti].1.prepared {
            // Only commit or rollback.
            let (mut t, m) = txns.remove(ti);
            if rng.chance(60) {
                t.commit().unwrap();
                model.write(&m.writes);
            } else {
                t.rollback().unwrap();
            }
            continue;
        }
        match rng.below(100) {
            // A write (put, delete, merge), or a read for update.
            0..=54 => {
                let k = key(rng.below(KEYS));
                let for_update = rng.chance(30);
                let exclusive = !for_update || !pessimistic || rng.chance(50);
                let op = match rng.below(3) {
                    0 => Op::Put(format!("t{ti}s{step}").into_bytes()),
                    1 => Op::Delete,
                    _ => Op::Merge(format!("m{step}").into_bytes()),
                };
                let before = txns[ti].1.tracked.get(&k).cloned();
                // What the engine must say.
                let mut expect_err = None;
                if pessimistic {
                    let needs_lock = match &before {
                        None => true,
                        Some(t) => exclusive && !t.exclusive,
                    };
                    if needs_lock && others_hold(&txns, &k, exclusive) {
                        expect_err = Some("timed out");
                    } else if needs_lock {
                        if let Some(s) = txns[ti].1.snapshot {
                            if model.written_after(&k, s) {
                                expect_err = Some("busy");
                            }
                        }
                    }
                }
                let (t, m) = &mut txns[ti];
                let r = if for_update {
                    let snap = m.snapshot;
                    // The transaction's snapshot, held apart so that the
                    // read options do not borrow the transaction.
                    let held = t.snapshot().cloned();
                    let ro = ReadOptions { snapshot: held.as_ref(), ..ReadOptions::default() };
                    let got = t.get_for_update_opt(&ro, &k, exclusive);
                    drop(ro);
                    drop(held);
                    got.map(|v| {
                        let base_state = match snap {
                            Some(s) => &model.states[s as usize],
                            None => model.latest(),
                        };
                        assert_eq!(v.as_ref(), m.view(base_state).get(&k), "{ctx}: get_for_update");
                    })
                } else {
                    match &op {
                        Op::Put(v) => t.put(&k, v),
                        Op::Delete => t.delete(&k),
                        Op::Merge(v) => t.merge(&k, v),
                    }
                };
                match (expect_err, r) {
                    (None, Ok(())) => {
                        let time = match &before {
                            Some(b) => b.time,
                            None => m.snapshot.unwrap_or(model.now()),
                        };
                        let was_exclusive = before.as_ref().is_some_and(|b| b.exclusive);
                        m.tracked.insert(k.clone(), Tracked { time, exclusive: exclusive || was_exclusive });
                        if !for_update {
                            m.writes.push((k, op));
                        }
                    }
                    (Some("timed out"), Err(e)) => assert!(e.is_timed_out(), "{ctx}: {e}"),
                    (Some(_), Err(e)) => assert!(e.is_busy(), "{ctx}: {e}"),
                    (want, got) => panic!("{ctx}: expected {want:?}, got {got:?}"),
                }
            }
            55..=62 => {
                let (t, m) = &txns[ti];
                check_view(t, &m.view(model.latest()), &ctx);
            }
            63..=70 => {
                let (t, m) = &mut txns[ti];
                t.set_save_point();
                m.save_points.push(SavePoint {
                    writes: m.writes.len(),
                    tracked: m.tracked.clone(),
                    snapshot: m.snapshot,
                });
            }
            71..=76 => {
                let (t, m) = &mut txns[ti];
                let r = t.rollback_to_save_point();
                match m.save_points.pop() {
                    None => assert!(matches!(r, Err(ebb::Error::NotFound(_))), "{ctx}"),
                    Some(sp) => {
                        r.unwrap();
                        m.writes.truncate(sp.writes);
                        // Keys tracked before stay, in the mode they have now.
                        m.tracked.retain(|k, _| sp.tracked.contains_key(k));
                        m.snapshot = sp.snapshot;
                    }
                }
            }
            77..=79 => {
                let (t, m) = &mut txns[ti];
                let r = t.pop_save_point();
                if m.save_points.pop().is_none() {
                    assert!(matches!(r, Err(ebb::Error::NotFound(_))), "{ctx}");
                } else {
                    r.unwrap();
                }
            }
            80..=84 if pessimistic => {
                // Two-phase: name and prepare; finished at a later step.
                let (t, m) = &mut txns[ti];
                next_name += 1;
                t.set_name(format!("x{seed}-{next_name}").as_bytes()).unwrap();
                t.prepare().unwrap();
                assert_eq!(t.state(), TransactionState::Prepared);
                m.prepared = true;
                // Prepared writes are visible to nobody.
                for i in 0..KEYS {
                    assert_eq!(base.get(&key(i)).unwrap().as_ref(), model.latest().get(&key(i)), "{ctx}: prepared");
                }
            }
            85..=94 => {
                let (mut t, m) = txns.remove(ti);
                let conflict = !pessimistic && m.tracked.iter().any(|(k, tr)| model.written_after(k, tr.time));
                let r = t.commit();
                if conflict {
                    let e = r.unwrap_err();
                    assert!(e.is_busy(), "{ctx}: {e}");
                    t.rollback().unwrap();
                } else {
                    r.unwrap_or_else(|e| panic!("{ctx}: commit: {e}"));
                    model.write(&m.writes);
                }
            }
            _ => {
                let (mut t, _) = txns.remove(ti);
                t.rollback().unwrap();
            }
        }
        if step % 25 == 0 {
            for i in 0..KEYS {
                assert_eq!(base.get(&key(i)).unwrap().as_ref(), model.latest().get(&key(i)), "{ctx}: database");
            }
        }
    }
    drop(txns);
    for i in 0..KEYS {
        assert_eq!(base.get(&key(i)).unwrap().as_ref(), model.latest().get(&key(i)), "seed {seed}: at the end");
    }
}

fn seeds() -> Vec<u64> {
    if let Some(s) = std::env::var("EBB_TXN_MODEL_SEED").ok().and_then(|s| s.parse().ok()) {
        return vec![s];
    }
    let n: u64 = std::env::var("EBB_TXN_MODEL_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(150);
    (0..n).collect()
}

#[test]
fn optimistic_histories_match_the_model() {
    for seed in seeds() {
        run_case(seed, false);
    }
}

#[test]
fn pessimistic_histories_match_the_model() {
    for seed in seeds() {
        run_case(seed, true);
    }
}
