//! The pessimistic transaction database's per-key locks, with RocksDB's
//! `PointLockManager` semantics
//! (utilities/transactions/lock/point/point_lock_manager.cc).
//!
//! Owns: per column family, a table of `num_stripes` stripes, each a map
//! key -> [`LockEntry`] (the holding transactions and whether the lock is
//! exclusive) under its own mutex, with a condition variable its waiters park
//! on; the wait-for graph of the transactions waiting with deadlock
//! detection; the buffer of recent deadlocks; the counters.
//!
//! Rules:
//! 1. A key hashes (xxh3) to one stripe of its family. Shared locks are
//!    compatible with shared locks only. A transaction that holds a key
//!    exclusively may ask for it again in either mode (it stays exclusive); one
//!    that holds it shared may ask for it shared again, or exclusively when it
//!    is the only holder (an upgrade). Holders are told apart by [`TxnId`].
//! 2. A request that conflicts with other holders takes the lock from them
//!    when every one of them has expired (on the database clock) and can be
//!    stolen: Active -> Stolen, or Stolen already; a Committing holder keeps
//!    its locks. Otherwise the requester waits on the stripe's condition
//!    variable until its timeout (real time), waking no later than the moment
//!    the holders become stealable, and tries again after every wake.
//! 3. With deadlock detection, a requester records its wait-for edges (to the
//!    holders it conflicts with) before each wait and removes them after;
//!    a breadth-first walk from those holders that reaches the requester
//!    within `deadlock_detect_depth` transactions is a deadlock, and so is a
//!    walk cut off by the depth while someone waits on the requester (RocksDB
//!    `IncrementWaiters`). The requester then takes no lock and gets
//!    [`Error::Deadlock`].
//! 4. `max_num_locks` bounds the keys locked per family (a key shared by
//!    several transactions counts once, as in RocksDB); a new key over the
//!    bound gets [`Error::Busy`]. Joining a shared lock or re-taking a held one
//!    is not a new key.
//!
//! Invariants: an entry exists only while it has holders; an exclusive entry
//! has exactly one; a family's `locked_keys` and the `locks` counter equal the
//! number of entries (dropped families aside, which are cleared).
//!
//! Thread safety: `LockManager` is shared by reference between threads. Lock
//! order: a stripe mutex, then the wait-for graph's mutex, then the deadlock
//! buffer's; no thread holds two stripe mutexes except [`LockManager::status`],
//! which takes them in (family, stripe) order. The family map's lock is never
//! held while a stripe mutex is taken.

// The TransactionDb, which calls this manager, is written after it; until
// then the library build uses it only from its tests.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};
use smallvec::SmallVec;

use crate::clock::Clock;
use crate::error::{Error, Result};

/// A transaction's id, unique within one transaction database.
pub(crate) type TxnId = u64;

/// [`TxnLockState`] states. Committing also covers prepared and finished:
/// what matters to the lock manager is only whether the locks may be stolen.
const ACTIVE: u8 = 0;
const COMMITTING: u8 = 1;
const STOLEN: u8 = 2;

/// A transaction as the lock manager sees it: its id, when it expires (on the
/// database clock, microseconds; None = never) and its state machine
/// Active -> Committing/Finished, or Active -> Stolen when another transaction
/// took its locks after it expired.
#[derive(Debug)]
pub(crate) struct TxnLockState {
    id: TxnId,
    expires_at_micros: Option<u64>,
    state: AtomicU8,
}

impl TxnLockState {
    /// An Active transaction.
    pub(crate) fn new(id: TxnId, expires_at_micros: Option<u64>) -> Arc<Self> {
        Arc::new(TxnLockState { id, expires_at_micros, state: AtomicU8::new(ACTIVE) })
    }

    /// The transaction's id.
    pub(crate) fn id(&self) -> TxnId {
        self.id
    }

    /// Owner calls before committing/preparing: true and the state moves to
    /// Committing, unless its locks were stolen (then false, state stays Stolen).
    /// A Committing transaction's locks can no longer be stolen even if expired.
    pub(crate) fn try_begin_commit(&self) -> bool {
        match self.state.compare_exchange(ACTIVE, COMMITTING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(state) => state == COMMITTING,
        }
    }

    /// Back to Active (a failed commit that the owner may retry or roll back).
    pub(crate) fn abort_commit(&self) {
        // A Stolen transaction stays Stolen (it never reached Committing).
        let _ = self.state.compare_exchange(COMMITTING, ACTIVE, Ordering::AcqRel, Ordering::Acquire);
    }

    /// True once another transaction took (some of) this one's locks.
    pub(crate) fn is_stolen(&self) -> bool {
        self.state.load(Ordering::Acquire) == STOLEN
    }

    /// True when the transaction has an expiration and `now` has reached it.
    fn expired(&self, now_micros: u64) -> bool {
        self.expires_at_micros.is_some_and(|at| at <= now_micros)
    }

    /// Whether [`TxnLockState::try_steal`] would succeed now (racy: a check
    /// before marking anyone Stolen).
    fn stealable(&self, now_micros: u64) -> bool {
        match self.state.load(Ordering::Acquire) {
            STOLEN => true,
            ACTIVE => self.expired(now_micros),
            _ => false,
        }
    }

    /// Marks an expired Active transaction Stolen (RocksDB
    /// `TryStealingLocks`); true when it is Stolen now.
    fn try_steal(&self, now_micros: u64) -> bool {
        if !self.expired(now_micros) {
            return self.is_stolen();
        }
        match self.state.compare_exchange(ACTIVE, STOLEN, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => true,
            Err(state) => state == STOLEN,
        }
    }
}

/// One lock request: who asks, and how long and how carefully it waits.
pub(crate) struct LockRequest<'a> {
    /// The requesting transaction.
    pub(crate) txn: &'a Arc<TxnLockState>,
    /// None waits forever; Some(Duration::ZERO) does not wait.
    pub(crate) timeout: Option<Duration>,
    /// Look for a wait-for cycle before waiting (RocksDB `deadlock_detect`).
    pub(crate) deadlock_detect: bool,
    /// How many waiting transactions the search visits at most (RocksDB
    /// `deadlock_detect_depth`, default 50).
    pub(crate) deadlock_detect_depth: usize,
}

/// One transaction of a deadlock cycle: it waits for `waiting_key` of column
/// family `cf_id` (RocksDB `DeadlockInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadlockInfo {
    /// The waiting transaction's id.
    pub txn_id: u64,
    /// The column family of the key it waits for.
    pub cf_id: u32,
    /// Whether it asked for the key exclusively.
    pub exclusive: bool,
    /// The key it waits for.
    pub waiting_key: Vec<u8>,
}

/// A deadlock found by a transaction about to wait (RocksDB `DeadlockPath`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeadlockPath {
    /// The cycle, starting with the transaction that found it and refused to
    /// wait; each entry waits for a key held by the next, the last for one
    /// held by the first. Empty when `limit_exceeded`.
    pub path: Vec<DeadlockInfo>,
    /// The search reached `deadlock_detect_depth` before finding a cycle,
    /// which is taken for a deadlock.
    pub limit_exceeded: bool,
    /// When it was found, in seconds since the Unix epoch on the database
    /// clock.
    pub deadlock_time: u64,
}

/// A locked key and who holds it (RocksDB `KeyLockInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLockInfo {
    /// The key.
    pub key: Vec<u8>,
    /// The ids of the transactions holding it: one when exclusive.
    pub ids: Vec<u64>,
    /// Whether the lock is exclusive.
    pub exclusive: bool,
}

/// The lock manager's counters, for the database's properties.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LockCounters {
    /// Keys locked now (a key shared by several transactions counts once).
    pub(crate) locks: u64,
    /// Lock requests that had to wait.
    pub(crate) waits: u64,
    /// Lock requests refused with [`Error::TimedOut`].
    pub(crate) timeouts: u64,
    /// Deadlocks found (including searches cut off by the depth).
    pub(crate) deadlocks: u64,
    /// Locks taken from expired transactions.
    pub(crate) stolen: u64,
}

#[derive(Default)]
struct Counters {
    locks: AtomicU64,
    waits: AtomicU64,
    timeouts: AtomicU64,
    deadlocks: AtomicU64,
    stolen: AtomicU64,
}

/// Who holds one key, and how.
struct LockEntry {
    exclusive: bool,
    holders: SmallVec<[Arc<TxnLockState>; 2]>,
}

/// One stripe of a family's lock table.
#[derive(Default)]
struct Stripe {
    keys: Mutex<HashMap<Vec<u8>, LockEntry>>,
    /// Notified whenever a holder leaves an entry of this stripe.
    released: Condvar,
}

/// The lock table of one column family.
struct FamilyLocks {
    stripes: Box<[Stripe]>,
    /// Entries in all stripes; changed under a stripe mutex.
    locked_keys: AtomicUsize,
    /// Set by [`LockManager::drop_family`]; read under a stripe mutex.
    dropped: AtomicBool,
}

impl FamilyLocks {
    fn new(num_stripes: usize) -> FamilyLocks {
        FamilyLocks {
            stripes: (0..num_stripes).map(|_| Stripe::default()).collect(),
            locked_keys: AtomicUsize::new(0),
            dropped: AtomicBool::new(false),
        }
    }

    fn stripe_index(&self, key: &[u8]) -> usize {
        // Lemire's fast range: the high word of hash * n is uniform in 0..n.
        let hash = xxhash_rust::xxh3::xxh3_64(key);
        ((u128::from(hash) * self.stripes.len() as u128) >> 64) as usize
    }

    fn stripe(&self, key: &[u8]) -> &Stripe {
        &self.stripes[self.stripe_index(key)]
    }

    /// Counts one more locked key unless that would pass `max`.
    fn reserve_key(&self, max: Option<usize>) -> bool {
        match max {
            None => {
                self.locked_keys.fetch_add(1, Ordering::AcqRel);
                true
            }
            Some(max) => self
                .locked_keys
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
                .is_ok(),
        }
    }
}

/// What one look at a key's entry found.
enum Attempt {
    Granted,
    /// Held by others, who do not all expire.
    Conflict {
        /// The other holders.
        holders: Vec<TxnId>,
        /// Clock time (micros) when all of them will have expired, if they
        /// all expire and none is Committing.
        stealable_at: Option<u64>,
    },
    /// A new key would pass `max_num_locks`.
    LimitReached,
}

/// One waiting transaction's edges in the wait-for graph.
struct WaitEdges {
    holders: Vec<TxnId>,
    cf: u32,
    key: Vec<u8>,
    exclusive: bool,
}

/// Who waits for whom, among transactions waiting with deadlock detection
/// (RocksDB `wait_txn_map_` and `rev_wait_txn_map_`).
#[derive(Default)]
struct WaitForGraph {
    edges: HashMap<TxnId, WaitEdges>,
    /// How many waiting transactions wait for each transaction.
    waited_on: HashMap<TxnId, usize>,
}

/// What the deadlock search found.
enum Search {
    NoCycle,
    Cycle(Vec<DeadlockInfo>),
    LimitExceeded,
}

impl WaitForGraph {
    fn insert(&mut self, waiter: TxnId, edges: WaitEdges) {
        self.remove(waiter);
        for holder in &edges.holders {
            *self.waited_on.entry(*holder).or_insert(0) += 1;
        }
        self.edges.insert(waiter, edges);
    }

    fn remove(&mut self, waiter: TxnId) {
        let Some(edges) = self.edges.remove(&waiter) else { return };
        for holder in edges.holders {
            if let Some(n) = self.waited_on.get_mut(&holder) {
                *n -= 1;
                if *n == 0 {
                    self.waited_on.remove(&holder);
                }
            }
        }
    }

    /// Breadth-first from `requester`'s holders along the edges, visiting at
    /// most `depth` transactions. Unlike RocksDB's walk it visits each
    /// transaction once, so a cycle that does not pass through the requester
    /// ends the walk instead of exhausting the depth.
    fn search(&self, requester: TxnId, depth: usize) -> Search {
        // No cycle through the requester if nobody waits for it.
        if !self.waited_on.contains_key(&requester) {
            return Search::NoCycle;
        }
        let Some(start) = self.edges.get(&requester) else { return Search::NoCycle };
        // (transaction, index of the one that waits for it)
        let mut queue: Vec<(TxnId, Option<usize>)> = start.holders.iter().map(|&id| (id, None)).collect();
        let mut seen: HashSet<TxnId> = start.holders.iter().copied().collect();
        let mut head = 0;
        while head < queue.len() {
            if head >= depth {
                return Search::LimitExceeded;
            }
            let (id, _) = queue[head];
            if id == requester {
                return Search::Cycle(self.cycle(&queue, head));
            }
            if let Some(edges) = self.edges.get(&id) {
                for &next in &edges.holders {
                    if seen.insert(next) {
                        queue.push((next, Some(head)));
                    }
                }
            }
            head += 1;
        }
        Search::NoCycle
    }

    /// The cycle ending at `queue[last]` (the requester), from the requester.
    fn cycle(&self, queue: &[(TxnId, Option<usize>)], last: usize) -> Vec<DeadlockInfo> {
        let mut ids = Vec::new();
        let mut at = Some(last);
        while let Some(i) = at {
            ids.push(queue[i].0);
            at = queue[i].1;
        }
        // ids: requester, then back along the cycle; reversed, as RocksDB's,
        // it starts with the transaction the requester waits for and ends
        // with the requester.
        ids.reverse();
        ids.iter()
            .filter_map(|id| {
                self.edges.get(id).map(|e| DeadlockInfo {
                    txn_id: *id,
                    cf_id: e.cf,
                    exclusive: e.exclusive,
                    waiting_key: e.key.clone(),
                })
            })
            .collect()
    }
}

/// The newest deadlocks, newest first (RocksDB `DeadlockInfoBuffer`).
struct DeadlockBuffer {
    capacity: usize,
    paths: VecDeque<DeadlockPath>,
}

impl DeadlockBuffer {
    fn push(&mut self, path: DeadlockPath) {
        self.paths.push_front(path);
        self.paths.truncate(self.capacity);
    }

    fn resize(&mut self, capacity: usize) {
        self.capacity = capacity;
        self.paths.truncate(capacity);
    }
}

/// The per-key lock manager of a pessimistic transaction database (RocksDB
/// `PointLockManager`). See the module comment for its rules.
pub(crate) struct LockManager {
    num_stripes: usize,
    max_num_locks: Option<usize>,
    clock: Arc<dyn Clock>,
    families: RwLock<HashMap<u32, Arc<FamilyLocks>>>,
    wait_for: Mutex<WaitForGraph>,
    deadlocks: Mutex<DeadlockBuffer>,
    counters: Counters,
}

impl LockManager {
    /// `num_stripes` >= 1 (RocksDB default 16; 0 is taken as 1);
    /// `max_num_locks` per column family (None = unlimited);
    /// `max_deadlocks` = size of the deadlock info buffer (RocksDB default 5).
    pub(crate) fn new(
        num_stripes: usize,
        max_num_locks: Option<usize>,
        max_deadlocks: usize,
        clock: Arc<dyn Clock>,
    ) -> Self {
        LockManager {
            num_stripes: num_stripes.max(1),
            max_num_locks,
            clock,
            families: RwLock::new(HashMap::new()),
            wait_for: Mutex::new(WaitForGraph::default()),
            deadlocks: Mutex::new(DeadlockBuffer { capacity: max_deadlocks, paths: VecDeque::new() }),
            counters: Counters::default(),
        }
    }

    /// Takes (or re-takes, or upgrades shared -> exclusive when it is the only holder) the lock
    /// on (cf, key) for req.txn. Shared locks are compatible with shared locks only.
    ///
    /// Errors: [`Error::TimedOut`] when the timeout ran out, [`Error::Deadlock`]
    /// when waiting would close a cycle, [`Error::Busy`] over `max_num_locks`,
    /// [`Error::Expired`] when the requester's own locks were stolen, and
    /// [`Error::InvalidArgument`] when the family is dropped while it waits.
    pub(crate) fn lock(&self, req: &LockRequest<'_>, cf: u32, key: &[u8], exclusive: bool) -> Result<()> {
        let txn = req.txn;
        let family = self.family(cf);
        let stripe = family.stripe(key);
        // A timeout too large for an Instant waits forever.
        let deadline = req.timeout.and_then(|t| Instant::now().checked_add(t));
        let mut keys = stripe.keys.lock();
        let mut waited = false;
        loop {
            if txn.is_stolen() {
                return Err(Error::Expired(format!(
                    "transaction {} expired and another transaction took its locks",
                    txn.id()
                )));
            }
            if family.dropped.load(Ordering::Acquire) {
                return Err(Error::InvalidArgument(format!("column family {cf} was dropped")));
            }
            let (holders, stealable_at) = match self.try_acquire(&family, &mut keys, txn, key, exclusive) {
                Attempt::Granted => return Ok(()),
                Attempt::LimitReached => {
                    return Err(Error::Busy("Failed to acquire lock due to max_num_locks limit".into()))
                }
                Attempt::Conflict { holders, stealable_at } => (holders, stealable_at),
            };
            let mut wait = match deadline {
                None => None,
                Some(deadline) => {
                    let now = Instant::now();
                    if now >= deadline {
                        self.counters.timeouts.fetch_add(1, Ordering::AcqRel);
                        return Err(Error::TimedOut(format!("Timeout waiting to lock key (column family {cf})")));
                    }
                    Some(deadline - now)
                }
            };
            if let Some(at) = stealable_at {
                let now = self.clock.now_micros();
                if at > now {
                    let until_stealable = self.clock.real_wait(Duration::from_micros(at - now));
                    wait = Some(wait.map_or(until_stealable, |w| w.min(until_stealable)));
                }
            }
            if req.deadlock_detect {
                self.check_deadlock(req, holders, cf, key, exclusive)?;
            }
            if !waited {
                waited = true;
                // Release: a test that reads the count also sees this
                // waiter's edges and that it holds the stripe's mutex.
                self.counters.waits.fetch_add(1, Ordering::Release);
            }
            match wait {
                Some(w) => {
                    stripe.released.wait_for(&mut keys, w);
                }
                None => stripe.released.wait(&mut keys),
            }
            if req.deadlock_detect {
                self.wait_for.lock().remove(txn.id());
            }
        }
    }

    /// Releases `txn`'s lock on (cf, key) (no-op if not held) and wakes waiters.
    pub(crate) fn unlock(&self, txn: TxnId, cf: u32, key: &[u8]) {
        let Some(family) = self.existing_family(cf) else { return };
        let stripe = family.stripe(key);
        let released = self.release(&family, &mut stripe.keys.lock(), txn, key);
        if released {
            stripe.released.notify_all();
        }
    }

    /// Releases every listed lock of `txn`, taking each stripe's mutex once.
    pub(crate) fn unlock_all<'k>(&self, txn: TxnId, keys: impl IntoIterator<Item = (u32, &'k [u8])>) {
        let mut keys: Vec<(u32, &[u8])> = keys.into_iter().collect();
        keys.sort_unstable_by_key(|&(cf, _)| cf);
        for family_keys in keys.chunk_by(|a, b| a.0 == b.0) {
            let Some(family) = self.existing_family(family_keys[0].0) else { continue };
            let mut by_stripe: Vec<(usize, &[u8])> =
                family_keys.iter().map(|&(_, key)| (family.stripe_index(key), key)).collect();
            by_stripe.sort_unstable_by_key(|&(stripe, _)| stripe);
            for stripe_keys in by_stripe.chunk_by(|a, b| a.0 == b.0) {
                let stripe = &family.stripes[stripe_keys[0].0];
                let mut released = false;
                {
                    let mut map = stripe.keys.lock();
                    for &(_, key) in stripe_keys {
                        released |= self.release(&family, &mut map, txn, key);
                    }
                }
                if released {
                    stripe.released.notify_all();
                }
            }
        }
    }

    /// Every held lock: (cf, KeyLockInfo), RocksDB `GetLockStatusData`. A
    /// consistent picture (all stripes are locked together), ordered by
    /// family, then key.
    pub(crate) fn status(&self) -> Vec<(u32, KeyLockInfo)> {
        let mut families: Vec<(u32, Arc<FamilyLocks>)> =
            self.families.read().iter().map(|(cf, family)| (*cf, Arc::clone(family))).collect();
        families.sort_unstable_by_key(|(cf, _)| *cf);
        let guards: Vec<_> =
            families.iter().flat_map(|(cf, family)| family.stripes.iter().map(move |s| (*cf, s.keys.lock()))).collect();
        let mut locks: Vec<(u32, KeyLockInfo)> = guards
            .iter()
            .flat_map(|(cf, map)| {
                map.iter().map(move |(key, entry)| {
                    let ids = entry.holders.iter().map(|h| h.id()).collect();
                    (*cf, KeyLockInfo { key: key.clone(), ids, exclusive: entry.exclusive })
                })
            })
            .collect();
        drop(guards);
        locks.sort_unstable_by(|a, b| (a.0, &a.1.key).cmp(&(b.0, &b.1.key)));
        locks
    }

    /// Recent deadlocks, newest first (RocksDB `GetDeadlockInfoBuffer`).
    pub(crate) fn deadlock_info(&self) -> Vec<DeadlockPath> {
        self.deadlocks.lock().paths.iter().cloned().collect()
    }

    /// RocksDB `SetDeadlockInfoBufferSize`: keeps the newest `n`.
    pub(crate) fn set_deadlock_info_buffer_size(&self, n: usize) {
        self.deadlocks.lock().resize(n);
    }

    /// Counters for properties: locks held now, waits started, timeouts, deadlocks found, locks stolen.
    pub(crate) fn counters(&self) -> LockCounters {
        let c = &self.counters;
        LockCounters {
            locks: c.locks.load(Ordering::Acquire),
            waits: c.waits.load(Ordering::Acquire),
            timeouts: c.timeouts.load(Ordering::Acquire),
            deadlocks: c.deadlocks.load(Ordering::Acquire),
            stolen: c.stolen.load(Ordering::Acquire),
        }
    }

    /// Forgets every lock of column family `cf` (the family was dropped) and
    /// wakes its waiters, which get [`Error::InvalidArgument`]. A later
    /// request on `cf` starts a new table.
    pub(crate) fn drop_family(&self, cf: u32) {
        let Some(family) = self.families.write().remove(&cf) else { return };
        family.dropped.store(true, Ordering::Release);
        for stripe in family.stripes.iter() {
            let cleared = {
                let mut keys = stripe.keys.lock();
                let n = keys.len();
                keys.clear();
                n
            };
            self.counters.locks.fetch_sub(cleared as u64, Ordering::AcqRel);
            stripe.released.notify_all();
        }
    }

    /// The lock table of `cf`, created on first use.
    fn family(&self, cf: u32) -> Arc<FamilyLocks> {
        if let Some(family) = self.existing_family(cf) {
            return family;
        }
        let mut families = self.families.write();
        Arc::clone(families.entry(cf).or_insert_with(|| Arc::new(FamilyLocks::new(self.num_stripes))))
    }

    fn existing_family(&self, cf: u32) -> Option<Arc<FamilyLocks>> {
        self.families.read().get(&cf).map(Arc::clone)
    }

    /// One look at `key`'s entry (rules 1, 2 and 4). Requires the stripe's
    /// mutex: `keys` is its map.
    fn try_acquire(
        &self,
        family: &FamilyLocks,
        keys: &mut HashMap<Vec<u8>, LockEntry>,
        txn: &Arc<TxnLockState>,
        key: &[u8],
        exclusive: bool,
    ) -> Attempt {
        let me = txn.id();
        let Some(entry) = keys.get_mut(key) else {
            if !family.reserve_key(self.max_num_locks) {
                return Attempt::LimitReached;
            }
            let holders = SmallVec::from_elem(Arc::clone(txn), 1);
            keys.insert(key.to_vec(), LockEntry { exclusive, holders });
            self.counters.locks.fetch_add(1, Ordering::AcqRel);
            return Attempt::Granted;
        };
        let mine = entry.holders.iter().any(|h| h.id() == me);
        if !entry.exclusive && !exclusive {
            if !mine {
                entry.holders.push(Arc::clone(txn));
            }
            return Attempt::Granted;
        }
        if mine && entry.holders.len() == 1 {
            // A re-take never downgrades an exclusive lock.
            entry.exclusive |= exclusive;
            return Attempt::Granted;
        }
        let now = self.clock.now_micros();
        let mut others = entry.holders.iter().filter(|h| h.id() != me);
        // Check them all before marking any Stolen, so that one Committing
        // holder does not cost the others their locks for nothing.
        if others.clone().all(|h| h.stealable(now)) && others.all(|h| h.try_steal(now)) {
            entry.holders.retain(|h| h.id() == me);
            if entry.holders.is_empty() {
                entry.holders.push(Arc::clone(txn));
            }
            entry.exclusive = exclusive;
            self.counters.stolen.fetch_add(1, Ordering::AcqRel);
            return Attempt::Granted;
        }
        let others = entry.holders.iter().filter(|h| h.id() != me);
        let holders = others.clone().map(|h| h.id()).collect();
        // They become stealable together when the last of them expires;
        // a Stolen one is stealable already, a Committing one never.
        let stealable_at = others
            .map(|h| match h.state.load(Ordering::Acquire) {
                STOLEN => Some(0),
                ACTIVE => h.expires_at_micros,
                _ => None,
            })
            .try_fold(0, |latest: u64, at| at.map(|at| latest.max(at)));
        Attempt::Conflict { holders, stealable_at }
    }

    /// Removes `txn` from `key`'s holders, and the entry when it was the last.
    /// True when it held the key. Requires the stripe's mutex.
    fn release(&self, family: &FamilyLocks, keys: &mut HashMap<Vec<u8>, LockEntry>, txn: TxnId, key: &[u8]) -> bool {
        let Some(entry) = keys.get_mut(key) else { return false };
        let Some(at) = entry.holders.iter().position(|h| h.id() == txn) else { return false };
        entry.holders.swap_remove(at);
        if entry.holders.is_empty() {
            keys.remove(key);
            family.locked_keys.fetch_sub(1, Ordering::AcqRel);
            self.counters.locks.fetch_sub(1, Ordering::AcqRel);
        }
        true
    }

    /// Records that `req.txn` is about to wait for `holders` and searches for
    /// a cycle (rule 3). On a deadlock the edges are removed again, the path
    /// is kept, and the error returned.
    fn check_deadlock(
        &self,
        req: &LockRequest<'_>,
        holders: Vec<TxnId>,
        cf: u32,
        key: &[u8],
        exclusive: bool,
    ) -> Result<()> {
        let me = req.txn.id();
        let path = {
            let mut graph = self.wait_for.lock();
            graph.insert(me, WaitEdges { holders, cf, key: key.to_vec(), exclusive });
            let found = match graph.search(me, req.deadlock_detect_depth) {
                Search::NoCycle => return Ok(()),
                Search::Cycle(path) => DeadlockPath { path, limit_exceeded: false, deadlock_time: 0 },
                Search::LimitExceeded => DeadlockPath { path: Vec::new(), limit_exceeded: true, deadlock_time: 0 },
            };
            graph.remove(me);
            found
        };
        let limit_exceeded = path.limit_exceeded;
        self.deadlocks.lock().push(DeadlockPath { deadlock_time: self.clock.now_secs(), ..path });
        self.counters.deadlocks.fetch_add(1, Ordering::AcqRel);
        Err(Error::Deadlock(if limit_exceeded {
            format!(
                "transaction {me} gave up waiting for a key of column family {cf}: deadlock search passed depth {}",
                req.deadlock_detect_depth
            )
        } else {
            format!("transaction {me} would deadlock waiting for a key of column family {cf}")
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicI64;
    use std::thread;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::clock::{ManualClock, SystemClock};

    const EPOCH: Duration = Duration::from_secs(1_700_000_000);
    const NOW_MICROS: u64 = 1_700_000_000_000_000;
    const SHORT: Option<Duration> = Some(Duration::from_millis(20));
    const NO_WAIT: Option<Duration> = Some(Duration::ZERO);
    /// For waiters that the test releases: long enough never to run out, but
    /// finite, so that a failing test ends instead of leaving them waiting.
    const PATIENT: Option<Duration> = Some(Duration::from_secs(60));

    fn manager() -> (LockManager, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(EPOCH));
        (LockManager::new(16, None, 5, clock.clone()), clock)
    }

    fn txn(id: TxnId) -> Arc<TxnLockState> {
        TxnLockState::new(id, None)
    }

    fn req(txn: &Arc<TxnLockState>, timeout: Option<Duration>) -> LockRequest<'_> {
        LockRequest { txn, timeout, deadlock_detect: false, deadlock_detect_depth: 50 }
    }

    fn detecting(txn: &Arc<TxnLockState>, depth: usize) -> LockRequest<'_> {
        LockRequest { txn, timeout: PATIENT, deadlock_detect: true, deadlock_detect_depth: depth }
    }

    fn held(mgr: &LockManager) -> Vec<(u32, Vec<u8>, Vec<u64>, bool)> {
        mgr.status()
            .into_iter()
            .map(|(cf, mut info)| {
                info.ids.sort_unstable();
                (cf, info.key, info.ids, info.exclusive)
            })
            .collect()
    }

    /// Blocks until `n` lock requests have started to wait. A waiter counts
    /// itself holding its stripe's mutex, which it gives up only inside the
    /// wait, so whatever the test does next on that stripe happens after.
    fn await_waiters(mgr: &LockManager, n: u64) {
        let give_up = Instant::now() + Duration::from_secs(60);
        while mgr.counters().waits < n {
            assert!(Instant::now() < give_up, "no waiter after a minute");
            thread::yield_now();
        }
    }

    #[test]
    fn exclusive_locks_conflict_until_the_timeout() {
        let (mgr, _) = manager();
        let (t1, t2) = (txn(1), txn(2));
        mgr.lock(&req(&t1, NO_WAIT), 0, b"k", true).unwrap();
        let err = mgr.lock(&req(&t2, NO_WAIT), 0, b"k", true).unwrap_err();
        assert!(err.is_timed_out(), "{err}");
        assert!(err.to_string().contains("column family 0"), "{err}");
        assert_eq!((mgr.counters().timeouts, mgr.counters().waits), (1, 0), "a zero timeout does not wait");

        let err = mgr.lock(&req(&t2, SHORT), 0, b"k", false).unwrap_err();
        assert!(err.is_timed_out(), "{err}");
        assert_eq!((mgr.counters().timeouts, mgr.counters().waits), (2, 1));
        assert_eq!(held(&mgr), vec![(0, b"k".to_vec(), vec![1], true)]);

        // The same key in another family, and another key, are free.
        mgr.lock(&req(&t2, NO_WAIT), 1, b"k", true).unwrap();
        mgr.lock(&req(&t2, NO_WAIT), 0, b"other", true).unwrap();
        assert_eq!(mgr.counters().locks, 3);
    }

    #[test]
    fn shared_locks_share_and_exclude_exclusive_ones() {
        let (mgr, _) = manager();
        let (t1, t2, t3) = (txn(1), txn(2), txn(3));
        mgr.lock(&req(&t1, NO_WAIT), 0, b"k", false).unwrap();
        mgr.lock(&req(&t2, NO_WAIT), 0, b"k", false).unwrap();
        assert_eq!(held(&mgr), vec![(0, b"k".to_vec(), vec![1, 2], false)]);
        assert_eq!(mgr.counters().locks, 1, "a shared key counts once");
        assert!(mgr.lock(&req(&t3, NO_WAIT), 0, b"k", true).unwrap_err().is_timed_out());

        // An exclusive lock keeps shared requests out.
        mgr.lock(&req(&t3, NO_WAIT), 0, b"x", true).unwrap();
        assert!(mgr.lock(&req(&t1, NO_WAIT), 0, b"x", false).unwrap_err().is_timed_out());
    }

    #[test]
    fn the_only_shared_holder_upgrades() {
        let (mgr, _) = manager();
        let (t1, t2) = (txn(1), txn(2));
        mgr.lock(&req(&t1, NO_WAIT), 0, b"k", false).unwrap();
        mgr.lock(&req(&t2, NO_WAIT), 0, b"k", false).unwrap();
        let err = mgr.lock(&req(&t1, SHORT), 0, b"k", true).unwrap_err();
        assert!(err.is_timed_out(), "another holder shares it: {err}");
        assert_eq!(held(&mgr), vec![(0, b"k".to_vec(), vec![1, 2], false)], "the failed upgrade left it shared");

        mgr.unlock(2, 0, b"k");
        mgr.lock(&req(&t1, NO_WAIT), 0, b"k", true).unwrap();
        assert_eq!(held(&mgr), vec![(0, b"k".to_vec(), vec![1], true)]);
        assert!(mgr.lock(&req(&t2, NO_WAIT), 0, b"k", false).unwrap_err().is_timed_out());
    }

    #[test]
    fn a_holder_takes_its_lock_again() {
        let (mgr, _) = manager();
        let t1 = txn(1);
        mgr.lock(&req(&t1, NO_WAIT), 0, b"x", true).unwrap();
        mgr.lock(&req(&t1, NO_WAIT), 0, b"x", true).unwrap();
        mgr.lock(&req(&t1, NO_WAIT), 0, b"x", false).unwrap();
        mgr.lock(&req(&t1, NO_WAIT), 0, b"s", false).unwrap();
        mgr.lock(&req(&t1, NO_WAIT), 0, b"s", false).unwrap();
        assert_eq!(
            held(&mgr),
            vec![(0, b"s".to_vec(), vec![1], false), (0, b"x".to_vec(), vec![1], true)],
            "one holder each; a shared re-take does not downgrade"
        );
        assert_eq!(mgr.counters(), LockCounters { locks: 2, ..LockCounters::default() });

        mgr.unlock_all(1, [(0, &b"x"[..]), (0, &b"s"[..]), (0, &b"never"[..]), (9, &b"x"[..])]);
        assert_eq!(held(&mgr), vec![]);
        assert_eq!(mgr.counters().locks, 0);
    }

    #[test]
    fn unlock_releases_only_the_callers_lock() {
        let (mgr, _) = manager();
        let (t1, t2) = (txn(1), txn(2));
        mgr.lock(&req(&t1, NO_WAIT), 0, b"k", false).unwrap();
        mgr.lock(&req(&t2, NO_WAIT), 0, b"k", false).unwrap();
        mgr.unlock(3, 0, b"k");
        mgr.unlock(1, 0, b"k");
        mgr.unlock(1, 0, b"k");
        assert_eq!(held(&mgr), vec![(0, b"k".to_vec(), vec![2], false)]);
        mgr.unlock(2, 0, b"k");
        assert_eq!((held(&mgr), mgr.counters().locks), (vec![], 0));
    }

    #[test]
    fn a_waiter_gets_the_lock_when_the_holder_unlocks() {
        let (mgr, _) = manager();
        let (t1, t2) = (txn(1), txn(2));
        mgr.lock(&req(&t1, NO_WAIT), 0, b"k", true).unwrap();
        thread::scope(|s| {
            let waiter = s.spawn(|| mgr.lock(&req(&t2, None), 0, b"k", true));
            await_waiters(&mgr, 1);
            assert!(!waiter.is_finished());
            mgr.unlock(1, 0, b"k");
            waiter.join().unwrap().unwrap();
        });
        assert_eq!(held(&mgr), vec![(0, b"k".to_vec(), vec![2], true)]);
    }

    #[test]
    fn an_upgrade_waits_for_the_other_shared_holder() {
        let (mgr, _) = manager();
        let (t1, t2) = (txn(1), txn(2));
        mgr.lock(&req(&t1, NO_WAIT), 0, b"k", false).unwrap();
        mgr.lock(&req(&t2, NO_WAIT), 0, b"k", false).unwrap();
        thread::scope(|s| {
            let upgrade = s.spawn(|| mgr.lock(&req(&t1, None), 0, b"k", true));
            await_waiters(&mgr, 1);
            mgr.unlock_all(2, [(0, &b"k"[..])]);
            upgrade.join().unwrap().unwrap();
        });
        assert_eq!(held(&mgr), vec![(0, b"k".to_vec(), vec![1], true)]);
    }

    fn info(txn_id: u64, key: &[u8]) -> DeadlockInfo {
        DeadlockInfo { txn_id, cf_id: 0, exclusive: true, waiting_key: key.to_vec() }
    }

    /// `a` holds `ka` and waits for `kb`, held by `b`, which then asks for
    /// `ka`: `b` gets Deadlock; then everything is released.
    fn two_cycle(mgr: &LockManager, a: u64, b: u64, ka: &[u8], kb: &[u8]) {
        let (ta, tb) = (txn(a), txn(b));
        mgr.lock(&req(&ta, NO_WAIT), 0, ka, true).unwrap();
        mgr.lock(&req(&tb, NO_WAIT), 0, kb, true).unwrap();
        let waits = mgr.counters().waits;
        thread::scope(|s| {
            let first = s.spawn(|| mgr.lock(&detecting(&ta, 50), 0, kb, true));
            await_waiters(mgr, waits + 1);
            let err = mgr.lock(&detecting(&tb, 50), 0, ka, true).unwrap_err();
            assert!(err.is_deadlock(), "{err}");
            mgr.unlock_all(b, [(0, kb)]);
            first.join().unwrap().unwrap();
        });
        mgr.unlock_all(a, [(0, ka), (0, kb)]);
    }

    #[test]
    fn a_two_transaction_cycle_is_a_deadlock() {
        let (mgr, clock) = manager();
        clock.advance(Duration::from_secs(7));
        two_cycle(&mgr, 1, 2, b"k1", b"k2");
        assert_eq!(
            mgr.deadlock_info(),
            vec![DeadlockPath {
                path: vec![info(1, b"k2"), info(2, b"k1")],
                limit_exceeded: false,
                deadlock_time: EPOCH.as_secs() + 7,
            }]
        );
        assert_eq!(mgr.counters().deadlocks, 1);
        assert_eq!((held(&mgr), mgr.counters().locks), (vec![], 0));
        assert!(mgr.wait_for.lock().edges.is_empty() && mgr.wait_for.lock().waited_on.is_empty());
    }

    #[test]
    fn a_three_transaction_cycle_is_a_deadlock() {
        let (mgr, _) = manager();
        let (t1, t2, t3) = (txn(1), txn(2), txn(3));
        for (t, key) in [(&t1, b"k1"), (&t2, b"k2"), (&t3, b"k3")] {
            mgr.lock(&req(t, NO_WAIT), 0, key, true).unwrap();
        }
        thread::scope(|s| {
            let one = s.spawn(|| mgr.lock(&detecting(&t1, 50), 0, b"k2", true));
            await_waiters(&mgr, 1);
            let two = s.spawn(|| mgr.lock(&detecting(&t2, 50), 0, b"k3", true));
            await_waiters(&mgr, 2);
            let err = mgr.lock(&detecting(&t3, 50), 0, b"k1", false).unwrap_err();
            assert!(err.is_deadlock(), "{err}");
            let path = mgr.deadlock_info();
            assert_eq!(path.len(), 1);
            assert!(!path[0].limit_exceeded);
            let shared_k1 = DeadlockInfo { exclusive: false, ..info(3, b"k1") };
            assert_eq!(path[0].path, vec![info(1, b"k2"), info(2, b"k3"), shared_k1]);

            mgr.unlock_all(3, [(0, &b"k3"[..])]);
            two.join().unwrap().unwrap();
            mgr.unlock_all(2, [(0, &b"k2"[..]), (0, &b"k3"[..])]);
            one.join().unwrap().unwrap();
        });
        mgr.unlock_all(1, [(0, &b"k1"[..]), (0, &b"k2"[..])]);
        assert_eq!((held(&mgr), mgr.counters().locks), (vec![], 0));
    }

    #[test]
    fn the_deadlock_buffer_keeps_the_newest() {
        let clock = Arc::new(ManualClock::new(EPOCH));
        let mgr = LockManager::new(4, None, 3, clock);
        for round in 0..4u64 {
            two_cycle(&mgr, 10 * round + 1, 10 * round + 2, b"a", b"b");
        }
        let requesters = |mgr: &LockManager| -> Vec<u64> {
            mgr.deadlock_info().iter().filter_map(|p| p.path.last()).map(|d| d.txn_id).collect()
        };
        assert_eq!(requesters(&mgr), vec![32, 22, 12], "newest first, at most max_deadlocks");
        mgr.set_deadlock_info_buffer_size(2);
        assert_eq!(requesters(&mgr), vec![32, 22]);
        mgr.set_deadlock_info_buffer_size(10);
        two_cycle(&mgr, 41, 42, b"a", b"b");
        assert_eq!(requesters(&mgr), vec![42, 32, 22]);
        mgr.set_deadlock_info_buffer_size(0);
        two_cycle(&mgr, 51, 52, b"a", b"b");
        assert_eq!(mgr.deadlock_info(), vec![]);
        assert_eq!(mgr.counters().deadlocks, 6);
    }

    #[test]
    fn a_search_past_the_depth_counts_as_a_deadlock() {
        let (mgr, _) = manager();
        let (t1, t2, t3) = (txn(1), txn(2), txn(3));
        for (t, key) in [(&t1, b"k1"), (&t2, b"k2"), (&t3, b"k3")] {
            mgr.lock(&req(t, NO_WAIT), 0, key, true).unwrap();
        }
        thread::scope(|s| {
            let one = s.spawn(|| mgr.lock(&detecting(&t1, 50), 0, b"k2", true));
            await_waiters(&mgr, 1);
            let two = s.spawn(|| mgr.lock(&detecting(&t2, 50), 0, b"k3", true));
            await_waiters(&mgr, 2);
            // The cycle 3 -> 1 -> 2 -> 3 needs three transactions visited.
            let err = mgr.lock(&detecting(&t3, 2), 0, b"k1", true).unwrap_err();
            assert!(err.is_deadlock(), "{err}");
            assert_eq!(mgr.deadlock_info()[0].path, vec![]);
            assert!(mgr.deadlock_info()[0].limit_exceeded);

            mgr.unlock_all(3, [(0, &b"k3"[..])]);
            two.join().unwrap().unwrap();
            mgr.unlock_all(2, [(0, &b"k2"[..]), (0, &b"k3"[..])]);
            one.join().unwrap().unwrap();
        });
        assert_eq!(mgr.counters().deadlocks, 1);
    }

    #[test]
    fn a_chain_nobody_waits_on_is_no_deadlock_however_shallow() {
        let (mgr, _) = manager();
        let (t1, t2, t3) = (txn(1), txn(2), txn(3));
        mgr.lock(&req(&t1, NO_WAIT), 0, b"k1", true).unwrap();
        mgr.lock(&req(&t2, NO_WAIT), 0, b"k2", true).unwrap();
        thread::scope(|s| {
            let one = s.spawn(|| mgr.lock(&detecting(&t1, 50), 0, b"k2", true));
            await_waiters(&mgr, 1);
            let shallow = LockRequest { timeout: SHORT, ..detecting(&t3, 0) };
            let err = mgr.lock(&shallow, 0, b"k1", true).unwrap_err();
            assert!(err.is_timed_out(), "3 -> 1 -> 2 and nobody waits for 3: {err}");
            mgr.unlock(2, 0, b"k2");
            one.join().unwrap().unwrap();
        });
        assert_eq!((mgr.counters().deadlocks, mgr.deadlock_info()), (0, vec![]));
    }

    #[test]
    fn without_detection_a_cycle_waits_for_the_timeout() {
        let (mgr, _) = manager();
        let (t1, t2) = (txn(1), txn(2));
        mgr.lock(&req(&t1, NO_WAIT), 0, b"k1", true).unwrap();
        mgr.lock(&req(&t2, NO_WAIT), 0, b"k2", true).unwrap();
        thread::scope(|s| {
            let one = s.spawn(|| mgr.lock(&req(&t1, PATIENT), 0, b"k2", true));
            await_waiters(&mgr, 1);
            let err = mgr.lock(&req(&t2, SHORT), 0, b"k1", true).unwrap_err();
            assert!(err.is_timed_out(), "{err}");
            mgr.unlock(2, 0, b"k2");
            one.join().unwrap().unwrap();
        });
        assert_eq!(mgr.counters().deadlocks, 0);
    }

    #[test]
    fn an_expired_holders_lock_is_stolen() {
        let (mgr, clock) = manager();
        let holder = TxnLockState::new(1, Some(NOW_MICROS + 1_000_000));
        let thief = txn(2);
        mgr.lock(&req(&holder, NO_WAIT), 0, b"k", true).unwrap();
        mgr.lock(&req(&holder, NO_WAIT), 0, b"other", true).unwrap();
        clock.advance(Duration::from_micros(999_999));
        assert!(mgr.lock(&req(&thief, NO_WAIT), 0, b"k", true).unwrap_err().is_timed_out(), "not expired yet");
        clock.advance(Duration::from_micros(1));
        mgr.lock(&req(&thief, NO_WAIT), 0, b"k", false).unwrap();
        assert_eq!(mgr.counters().stolen, 1);
        assert!(holder.is_stolen());
        assert!(!holder.try_begin_commit(), "a transaction whose locks were stolen cannot commit");
        assert!(holder.is_stolen());

        let err = mgr.lock(&req(&holder, NO_WAIT), 0, b"new", true).unwrap_err();
        assert!(err.is_expired(), "{err}");
        // The stolen holder's rollback leaves the thief's lock alone.
        mgr.unlock_all(1, [(0, &b"k"[..]), (0, &b"other"[..])]);
        assert_eq!(held(&mgr), vec![(0, b"k".to_vec(), vec![2], false)]);
        assert_eq!(mgr.counters().locks, 1);
    }

    #[test]
    fn a_waiter_steals_once_the_holder_expires() {
        let (mgr, clock) = manager();
        let holder = TxnLockState::new(1, Some(NOW_MICROS + 5_000_000));
        let waiter = txn(2);
        mgr.lock(&req(&holder, NO_WAIT), 0, b"k", true).unwrap();
        thread::scope(|s| {
            // No timeout: only the expiration can wake it.
            let waiting = s.spawn(|| mgr.lock(&req(&waiter, None), 0, b"k", true));
            await_waiters(&mgr, 1);
            clock.advance(Duration::from_secs(6));
            let give_up = Instant::now() + Duration::from_secs(60);
            while !waiting.is_finished() && Instant::now() < give_up {
                thread::yield_now();
            }
            if !waiting.is_finished() {
                mgr.unlock(1, 0, b"k");
                panic!("the waiter did not see the holder expire");
            }
            waiting.join().unwrap().unwrap();
        });
        assert!(holder.is_stolen());
        assert_eq!(held(&mgr), vec![(0, b"k".to_vec(), vec![2], true)]);
    }

    #[test]
    fn a_committing_holder_keeps_its_locks() {
        let (mgr, clock) = manager();
        let holder = TxnLockState::new(1, Some(NOW_MICROS + 1_000));
        let other = txn(2);
        mgr.lock(&req(&holder, NO_WAIT), 0, b"k", true).unwrap();
        assert!(holder.try_begin_commit());
        assert!(holder.try_begin_commit(), "still committing");
        clock.advance(Duration::from_secs(1));
        assert!(mgr.lock(&req(&other, NO_WAIT), 0, b"k", true).unwrap_err().is_timed_out());
        assert!(!holder.is_stolen());
        holder.abort_commit();
        mgr.lock(&req(&other, NO_WAIT), 0, b"k", true).unwrap();
        assert!(holder.is_stolen() && !holder.try_begin_commit());
        holder.abort_commit();
        assert!(holder.is_stolen(), "abort_commit does not undo a theft");
    }

    #[test]
    fn shared_holders_are_stolen_only_when_all_can_be() {
        let (mgr, clock) = manager();
        let expiring = TxnLockState::new(1, Some(NOW_MICROS + 1_000));
        let committing = TxnLockState::new(2, Some(NOW_MICROS + 1_000));
        let lasting = txn(3);
        let thief = txn(4);
        for t in [&expiring, &committing, &lasting] {
            mgr.lock(&req(t, NO_WAIT), 0, b"k", false).unwrap();
        }
        mgr.lock(&req(&committing, NO_WAIT), 0, b"c", false).unwrap();
        mgr.lock(&req(&expiring, NO_WAIT), 0, b"c", false).unwrap();
        assert!(committing.try_begin_commit());
        clock.advance(Duration::from_secs(1));
        assert!(mgr.lock(&req(&thief, NO_WAIT), 0, b"k", true).unwrap_err().is_timed_out());
        assert!(mgr.lock(&req(&thief, NO_WAIT), 0, b"c", true).unwrap_err().is_timed_out());
        assert!(!expiring.is_stolen(), "nobody lost a lock while one holder could not be stolen");

        mgr.unlock(2, 0, b"c");
        mgr.lock(&req(&thief, NO_WAIT), 0, b"c", true).unwrap();
        assert!(expiring.is_stolen());
        assert_eq!(held(&mgr)[0], (0, b"c".to_vec(), vec![4], true));
    }

    #[test]
    fn max_num_locks_refuses_new_keys_per_family() {
        let clock = Arc::new(ManualClock::new(EPOCH));
        let mgr = LockManager::new(16, Some(2), 5, clock);
        let (t1, t2) = (txn(1), txn(2));
        mgr.lock(&req(&t1, NO_WAIT), 0, b"a", false).unwrap();
        mgr.lock(&req(&t1, NO_WAIT), 0, b"b", true).unwrap();
        let err = mgr.lock(&req(&t1, None), 0, b"c", true).unwrap_err();
        assert!(matches!(err, Error::Busy(ref m) if m.contains("max_num_locks")), "{err}");
        mgr.lock(&req(&t1, NO_WAIT), 0, b"b", true).unwrap();
        mgr.lock(&req(&t2, NO_WAIT), 0, b"a", false).unwrap();
        mgr.lock(&req(&t2, NO_WAIT), 1, b"c", true).unwrap();
        mgr.unlock(1, 0, b"a");
        assert!(mgr.lock(&req(&t1, NO_WAIT), 0, b"c", true).unwrap_err().is_busy(), "t2 still holds a");
        mgr.unlock(2, 0, b"a");
        mgr.lock(&req(&t1, NO_WAIT), 0, b"c", true).unwrap();
    }

    #[test]
    fn dropping_a_family_releases_its_locks_and_waiters() {
        let (mgr, _) = manager();
        let (t1, t2, t3) = (txn(1), txn(2), txn(3));
        mgr.lock(&req(&t1, NO_WAIT), 7, b"k", true).unwrap();
        mgr.lock(&req(&t1, NO_WAIT), 7, b"j", false).unwrap();
        mgr.lock(&req(&t1, NO_WAIT), 8, b"k", true).unwrap();
        thread::scope(|s| {
            let waiting = s.spawn(|| mgr.lock(&detecting(&t2, 50), 7, b"k", true));
            await_waiters(&mgr, 1);
            mgr.drop_family(7);
            let err = waiting.join().unwrap().unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(ref m) if m.contains("7")), "{err}");
        });
        assert_eq!(held(&mgr), vec![(8, b"k".to_vec(), vec![1], true)]);
        assert_eq!(mgr.counters().locks, 1);
        assert!(mgr.wait_for.lock().edges.is_empty());
        mgr.unlock_all(1, [(7, &b"k"[..]), (7, &b"j"[..]), (8, &b"k"[..])]);
        mgr.lock(&req(&t3, NO_WAIT), 7, b"k", true).unwrap();
        assert_eq!(held(&mgr), vec![(7, b"k".to_vec(), vec![3], true)]);
    }

    #[test]
    fn transaction_states() {
        let t = TxnLockState::new(9, Some(10));
        assert_eq!(t.id(), 9);
        assert!(!t.try_steal(9), "not expired");
        assert!(t.try_begin_commit());
        assert!(!t.try_steal(10), "committing");
        t.abort_commit();
        assert!(t.try_steal(10) && t.try_steal(10) && t.is_stolen());
        assert!(!t.try_begin_commit());
        assert!(!txn(1).try_steal(u64::MAX), "never expires");
    }

    /// Random transactions on a few keys, with deadlock detection and short
    /// timeouts: each tracks what it holds in a per-key counter (-1 for an
    /// exclusive holder, else the number of shared ones) that a second
    /// exclusive holder, or a holder beside an exclusive one, would trip.
    /// The threads start together and yield while they hold their locks;
    /// each goes on past its 300 rounds (to at most 30,000) until some
    /// request has waited, so that a build fast enough to finish a thread's
    /// rounds in one time slice still contends.
    #[test]
    fn hammering_never_breaks_exclusion_nor_leaks() {
        const KEYS: usize = 6;
        const THREADS: u64 = 4;
        let mgr = LockManager::new(2, None, 5, Arc::new(SystemClock::new()));
        let inside: Vec<AtomicI64> = (0..2 * KEYS).map(|_| AtomicI64::new(0)).collect();
        let keys: Vec<Vec<u8>> = (0..KEYS).map(|k| format!("key{k}").into_bytes()).collect();
        let start = std::sync::Barrier::new(THREADS as usize);
        thread::scope(|s| {
            for thread in 0..THREADS {
                let (mgr, inside, keys, start) = (&mgr, &inside, &keys, &start);
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(thread);
                    start.wait();
                    for round in 0..30_000 {
                        if round >= 300 && mgr.counters().waits > 0 {
                            break;
                        }
                        let t = txn(round * THREADS + thread + 1);
                        let request = LockRequest {
                            txn: &t,
                            timeout: Some(Duration::from_millis(rng.gen_range(0..3))),
                            deadlock_detect: true,
                            deadlock_detect_depth: 50,
                        };
                        // (cf, key index) -> exclusive
                        let mut mine: HashMap<(u32, usize), bool> = HashMap::new();
                        for _ in 0..rng.gen_range(1..5) {
                            let (cf, k, exclusive) =
                                (rng.gen_range(0..2u32), rng.gen_range(0..KEYS), rng.gen_bool(0.6));
                            if mgr.lock(&request, cf, &keys[k], exclusive).is_err() {
                                break;
                            }
                            let count = &inside[cf as usize * KEYS + k];
                            match (mine.get(&(cf, k)).copied(), exclusive) {
                                (Some(true), _) | (Some(false), false) => {}
                                (Some(false), true) => {
                                    assert_eq!(
                                        count.compare_exchange(1, -1, Ordering::SeqCst, Ordering::SeqCst),
                                        Ok(1)
                                    );
                                    mine.insert((cf, k), true);
                                }
                                (None, true) => {
                                    assert_eq!(
                                        count.compare_exchange(0, -1, Ordering::SeqCst, Ordering::SeqCst),
                                        Ok(0)
                                    );
                                    mine.insert((cf, k), true);
                                }
                                (None, false) => {
                                    let shared = count.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                                        (n >= 0).then_some(n + 1)
                                    });
                                    assert!(shared.is_ok(), "a shared lock beside an exclusive one");
                                    mine.insert((cf, k), false);
                                }
                            }
                        }
                        thread::yield_now();
                        assert!(t.try_begin_commit());
                        for (&(cf, k), &exclusive) in &mine {
                            let count = &inside[cf as usize * KEYS + k];
                            if exclusive {
                                assert_eq!(count.swap(0, Ordering::SeqCst), -1);
                            } else {
                                assert!(count.fetch_sub(1, Ordering::SeqCst) > 0);
                            }
                        }
                        mgr.unlock_all(t.id(), mine.keys().map(|&(cf, k)| (cf, keys[k].as_slice())));
                    }
                });
            }
        });
        assert_eq!(mgr.status(), vec![]);
        let counters = mgr.counters();
        assert_eq!(counters.locks, 0);
        assert!(counters.waits > 0, "the threads never contended: {counters:?}");
        assert!(mgr.wait_for.lock().edges.is_empty() && mgr.wait_for.lock().waited_on.is_empty());
    }
}
