//! A transaction of either transaction database: its writes gathered in a
//! [`WriteBatchWithIndex`] (reads see them), the keys it must keep from
//! others (checked at commit by an optimistic database, locked by a
//! pessimistic one), its snapshot, savepoints and state.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::lock_manager::{LockRequest, TxnLockState};
use super::optimistic::OptimisticTransactionDb;
use super::pessimistic::TransactionDb;
use super::wbwi::{BaseDeltaIterator, WriteBatchWithIndex};
use crate::db::{ColumnFamilyHandle, Db, ReadOptions, Snapshot, WriteBatch, WriteOptions, WrittenSince};
use crate::error::{Error, Result};
use crate::key::SequenceNumber;

/// Where a transaction is in its life (RocksDB `Transaction::TransactionState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransactionState {
    /// Begun: reads and writes are taken.
    Started,
    /// Prepared (two-phase commit): its writes are in the WAL, not visible;
    /// only `commit` or `rollback` are taken.
    Prepared,
    /// Committed: its writes are visible. Nothing more is taken.
    Committed,
    /// Rolled back: its writes are gone. Nothing more is taken.
    RolledBack,
    /// It outlived its `expiration` and another transaction took its locks:
    /// it cannot commit (every call fails with [`Error::Expired`]).
    LocksStolen,
}

/// The database a transaction belongs to.
#[derive(Clone, Copy)]
pub(crate) enum Owner<'db> {
    Optimistic(&'db OptimisticTransactionDb),
    Pessimistic(&'db TransactionDb),
}

/// A key the transaction keeps from others.
#[derive(Debug, Clone, Copy)]
struct Tracked {
    /// The sequence after which a write by another is a conflict (an
    /// optimistic transaction's; the snapshot's, or the last sequence when
    /// first tracked).
    seq: SequenceNumber,
    /// Locked, or to be validated, exclusively (a shared lock otherwise).
    exclusive: bool,
}

/// What rolling back to a savepoint undoes beside the batch.
struct SavePoint<'db> {
    /// Keys first tracked (and locked) after the savepoint.
    new_keys: Vec<(u32, Vec<u8>)>,
    /// Keys whose lock was upgraded from shared after it.
    upgraded: Vec<(u32, Vec<u8>)>,
    /// The snapshot at the savepoint.
    snapshot: Option<Snapshot<'db>>,
}

/// A transaction (RocksDB `Transaction`), from
/// [`OptimisticTransactionDb::begin_transaction`] or
/// [`TransactionDb::begin_transaction`]. Its writes are seen by its own
/// reads and iterators and by no one else's until it commits; its
/// conflicts are found at commit (optimistic) or when it locks a key
/// (pessimistic). See docs/transactions.md.
///
/// Dropping a transaction that is not committed rolls it back (a prepared
/// one stays prepared in the WAL, found again at the next open) and
/// releases its locks.
pub struct Transaction<'db> {
    owner: Owner<'db>,
    db: &'db Db,
    default_cf: ColumnFamilyHandle,
    id: u64,
    write_options: WriteOptions,
    batch: WriteBatchWithIndex,
    snapshot: Option<Snapshot<'db>>,
    snapshot_on_next_operation: bool,
    tracked: BTreeMap<(u32, Vec<u8>), Tracked>,
    save_points: Vec<SavePoint<'db>>,
    state: TransactionState,
    name: Option<Vec<u8>>,
    /// A pessimistic transaction's standing with the lock manager.
    lock: Option<Arc<TxnLockState>>,
    lock_timeout: Option<Duration>,
    deadlock_detect: bool,
    deadlock_detect_depth: usize,
}

impl std::fmt::Debug for Transaction<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("id", &self.id)
            .field("state", &self.state)
            .field("name", &self.name.as_ref().map(|n| String::from_utf8_lossy(n).into_owned()))
            .field("updates", &self.batch.len())
            .finish()
    }
}

/// How a transaction is begun: its database's part.
pub(crate) struct Begin<'db> {
    pub(crate) owner: Owner<'db>,
    pub(crate) db: &'db Db,
    pub(crate) id: u64,
    pub(crate) write_options: WriteOptions,
    pub(crate) set_snapshot: bool,
    pub(crate) lock: Option<Arc<TxnLockState>>,
    pub(crate) lock_timeout: Option<Duration>,
    pub(crate) deadlock_detect: bool,
    pub(crate) deadlock_detect_depth: usize,
}

impl<'db> Transaction<'db> {
    pub(crate) fn begin(b: Begin<'db>) -> Self {
        let default_cf = ColumnFamilyHandle { data: Arc::clone(&b.db.inner.default_cf) };
        let batch = WriteBatchWithIndex::for_db(b.db, true);
        let snapshot = b.set_snapshot.then(|| b.db.snapshot());
        Transaction {
            owner: b.owner,
            db: b.db,
            default_cf,
            id: b.id,
            write_options: b.write_options,
            batch,
            snapshot,
            snapshot_on_next_operation: false,
            tracked: BTreeMap::new(),
            save_points: Vec::new(),
            state: TransactionState::Started,
            name: None,
            lock: b.lock,
            lock_timeout: b.lock_timeout,
            deadlock_detect: b.deadlock_detect,
            deadlock_detect_depth: b.deadlock_detect_depth,
        }
    }

    /// A transaction recovered prepared at open: `batch` holds its updates,
    /// `keys` are locked under `lock`.
    pub(crate) fn recovered(
        b: Begin<'db>,
        name: Vec<u8>,
        batch: &WriteBatch,
        keys: Vec<(u32, Vec<u8>)>,
    ) -> Result<Self> {
        let mut t = Transaction::begin(b);
        for op in batch.iter_cf() {
            let (cf, op) = op.map_err(Error::invalid)?;
            // A family dropped since the prepare: its data is gone with it.
            let Some(handle) = t.handle(cf) else { continue };
            match op {
                crate::db::BatchOp::Put { key, value } => t.batch.put_cf(&handle, key, value),
                crate::db::BatchOp::Delete { key } => t.batch.delete_cf(&handle, key),
                crate::db::BatchOp::SingleDelete { key } => t.batch.single_delete_cf(&handle, key),
                crate::db::BatchOp::Merge { key, value } => t.batch.merge_cf(&handle, key, value),
                crate::db::BatchOp::DeleteRange { .. } => {
                    return Err(Error::corruption(
                        "WAL",
                        0,
                        "a prepared transaction holds a range deletion, which transactions never write",
                    ))
                }
                crate::db::BatchOp::PutEntity { .. } => {
                    return Err(Error::corruption(
                        "WAL",
                        0,
                        "a prepared transaction holds a wide-column entity, which transactions never write",
                    ))
                }
            }
        }
        for key in keys {
            t.tracked.insert(key, Tracked { seq: 0, exclusive: true });
        }
        t.name = Some(name);
        t.state = TransactionState::Prepared;
        Ok(t)
    }

    fn handle(&self, cf: u32) -> Option<ColumnFamilyHandle> {
        if cf == 0 {
            return Some(self.default_cf.clone());
        }
        self.db.cf_handle_by_id(cf)
    }

    /// The transaction's id, unique in its database since it was opened
    /// (RocksDB `GetID`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Where the transaction is in its life.
    pub fn state(&self) -> TransactionState {
        self.state
    }

    /// The transaction's name (two-phase commit), once set.
    pub fn name(&self) -> Option<&[u8]> {
        self.name.as_deref()
    }

    /// The transaction's writes so far, indexed (RocksDB `GetWriteBatch`).
    pub fn get_write_batch(&self) -> &WriteBatchWithIndex {
        &self.batch
    }

    /// The number of keys the transaction keeps from others: locked
    /// (pessimistic) or to be validated at commit (optimistic).
    pub fn num_tracked_keys(&self) -> usize {
        self.tracked.len()
    }

    fn refuse_unless_started(&self) -> Result<()> {
        match self.state {
            TransactionState::Started => Ok(()),
            TransactionState::Prepared => {
                Err(Error::invalid("the transaction is prepared: only commit or rollback are taken"))
            }
            TransactionState::Committed => Err(Error::invalid("the transaction has already been committed")),
            TransactionState::RolledBack => Err(Error::invalid("the transaction has already been rolled back")),
            TransactionState::LocksStolen => {
                Err(Error::Expired("the transaction expired and another transaction took its locks".into()))
            }
        }
    }

    fn check_family(&self, cf: &ColumnFamilyHandle) -> Result<()> {
        if cf.data.owner != self.db.inner.instance {
            return Err(Error::invalid(format!("column family handle '{}' belongs to another database", cf.name())));
        }
        cf.data.check_live()
    }

    // ---- Snapshots ----

    /// Takes a snapshot now (RocksDB `SetSnapshot`): an optimistic
    /// transaction then fails to commit if a key it tracks was written
    /// after it; a pessimistic one fails to lock such a key. Reads see it
    /// only through read options that name it ([`Transaction::snapshot`]).
    pub fn set_snapshot(&mut self) {
        self.snapshot = Some(self.db.snapshot());
        self.snapshot_on_next_operation = false;
    }

    /// Takes the snapshot at the next write or `get_for_update` instead of
    /// now (RocksDB `SetSnapshotOnNextOperation`).
    pub fn set_snapshot_on_next_operation(&mut self) {
        self.snapshot_on_next_operation = true;
    }

    /// The transaction's snapshot, if it has one.
    pub fn snapshot(&self) -> Option<&Snapshot<'db>> {
        self.snapshot.as_ref()
    }

    /// Forgets the snapshot (RocksDB `ClearSnapshot`); keys tracked before
    /// stay tracked at its sequence.
    pub fn clear_snapshot(&mut self) {
        self.snapshot = None;
        self.snapshot_on_next_operation = false;
    }

    /// Read options reading at the transaction's snapshot (the latest
    /// state without one).
    pub fn read_options(&self) -> ReadOptions<'_> {
        ReadOptions { snapshot: self.snapshot.as_ref(), ..ReadOptions::default() }
    }

    // ---- Tracking and locking ----

    /// Keeps `key` of `cf` from others: locks it (pessimistic) or records
    /// it for validation at commit (optimistic).
    fn track(&mut self, cf: &ColumnFamilyHandle, key: &[u8], exclusive: bool) -> Result<()> {
        if self.snapshot_on_next_operation {
            self.set_snapshot();
        }
        let id = cf.id();
        let entry = self.tracked.get(&(id, key.to_vec())).copied();
        match self.owner {
            Owner::Optimistic(_) => {
                let seq = match (&self.snapshot, entry) {
                    (_, Some(t)) => t.seq,
                    (Some(s), None) => s.sequence(),
                    (None, None) => self.db.inner.last_sequence.get(),
                };
                let exclusive = exclusive || entry.is_some_and(|t| t.exclusive);
                self.note_tracked(id, key, entry, exclusive);
                self.tracked.insert((id, key.to_vec()), Tracked { seq, exclusive });
                Ok(())
            }
            Owner::Pessimistic(tdb) => {
                if entry.is_some_and(|t| t.exclusive || !exclusive) {
                    return Ok(());
                }
                let Some(lock) = self.lock.as_ref() else {
                    return Err(Error::invalid("the transaction has no lock state"));
                };
                let req = LockRequest {
                    txn: lock,
                    timeout: self.lock_timeout,
                    deadlock_detect: self.deadlock_detect,
                    deadlock_detect_depth: self.deadlock_detect_depth,
                };
                tdb.locks().lock(&req, id, key, exclusive).inspect_err(|e| {
                    if e.is_expired() {
                        self.state = TransactionState::LocksStolen;
                    }
                })?;
                // Locked now; written by another after the snapshot is a
                // conflict all the same (RocksDB `ValidateSnapshot`).
                if let Some(snap) = &self.snapshot {
                    let seq = snap.sequence();
                    let verdict = self.db.inner.written_since(id, &[(key, seq)]).and_then(|v| conflict(id, seq, v[0]));
                    if let Err(e) = verdict {
                        match entry {
                            // Newly locked: let it go again.
                            None => tdb.locks().unlock(lock.id(), id, key),
                            // An upgrade that failed validation keeps the
                            // shared lock it had: taken again shared.
                            Some(_) => {
                                tdb.locks().unlock(lock.id(), id, key);
                                tdb.locks().lock(&req, id, key, false)?;
                            }
                        }
                        return Err(e);
                    }
                }
                self.note_tracked(id, key, entry, exclusive);
                self.tracked.insert((id, key.to_vec()), Tracked { seq: 0, exclusive });
                Ok(())
            }
        }
    }

    /// Notes a key newly tracked, or upgraded, for the newest savepoint.
    fn note_tracked(&mut self, cf: u32, key: &[u8], before: Option<Tracked>, exclusive: bool) {
        if let Some(sp) = self.save_points.last_mut() {
            match before {
                None => sp.new_keys.push((cf, key.to_vec())),
                Some(t) if exclusive && !t.exclusive => sp.upgraded.push((cf, key.to_vec())),
                Some(_) => {}
            }
        }
    }

    // ---- Reads ----

    /// Reads `key` with the transaction's writes over the database's, as
    /// `ro` says (RocksDB `Transaction::Get`): `ro.snapshot`, not the
    /// transaction's own, decides what of the database it sees. Takes no
    /// lock and tracks nothing.
    pub fn get_opt(&self, ro: &ReadOptions<'_>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_cf_opt(&self.default_cf.clone(), ro, key)
    }

    /// [`Transaction::get_opt`] with default read options: the latest
    /// state of the database under the transaction's writes.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_opt(&ReadOptions::default(), key)
    }

    /// [`Transaction::get_opt`] in column family `cf`.
    pub fn get_cf_opt(&self, cf: &ColumnFamilyHandle, ro: &ReadOptions<'_>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.refuse_unless_readable()?;
        self.check_family(cf)?;
        self.batch.get_from_batch_and_db_cf(self.db, ro, cf, key)
    }

    /// [`Transaction::get`] in column family `cf`.
    pub fn get_cf(&self, cf: &ColumnFamilyHandle, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_cf_opt(cf, &ReadOptions::default(), key)
    }

    fn refuse_unless_readable(&self) -> Result<()> {
        match self.state {
            TransactionState::Started | TransactionState::Prepared => Ok(()),
            _ => self.refuse_unless_started(),
        }
    }

    /// Reads each of `keys` as [`Transaction::get_opt`] does.
    pub fn multi_get(&self, ro: &ReadOptions<'_>, keys: &[&[u8]]) -> Vec<Result<Option<Vec<u8>>>> {
        let cf = self.default_cf.clone();
        keys.iter().map(|k| self.get_cf_opt(&cf, ro, k)).collect()
    }

    /// Reads each `(family, key)` as [`Transaction::get_cf_opt`] does.
    pub fn multi_get_cf(
        &self,
        ro: &ReadOptions<'_>,
        keys: &[(&ColumnFamilyHandle, &[u8])],
    ) -> Vec<Result<Option<Vec<u8>>>> {
        keys.iter().map(|(cf, k)| self.get_cf_opt(cf, ro, k)).collect()
    }

    /// Reads `key` and keeps it from others until the transaction ends
    /// (RocksDB `GetForUpdate`): a pessimistic transaction locks it
    /// (`exclusive`, or shared with other readers), and fails with `Busy`
    /// if it has a snapshot and the key was written after it; an optimistic
    /// one fails to commit if the key is written by another meanwhile.
    /// Errors: `TimedOut` after `lock_timeout`, `Deadlock`, `Busy`,
    /// `TryAgain` (the history kept in memory does not reach the snapshot).
    /// To read at the transaction's own snapshot, hold a clone of it apart
    /// (`let s = txn.snapshot().cloned();`) and name that in `ro`, or use
    /// [`Transaction::get_for_update`].
    pub fn get_for_update_opt(&mut self, ro: &ReadOptions<'_>, key: &[u8], exclusive: bool) -> Result<Option<Vec<u8>>> {
        let cf = self.default_cf.clone();
        self.get_for_update_cf_opt(&cf, ro, key, exclusive)
    }

    /// [`Transaction::get_for_update_opt`] exclusively, reading at the
    /// transaction's snapshot (the latest state without one).
    pub fn get_for_update(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let cf = self.default_cf.clone();
        self.get_for_update_cf(&cf, key)
    }

    /// [`Transaction::get_for_update`] in column family `cf`.
    pub fn get_for_update_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.refuse_unless_started()?;
        self.check_family(cf)?;
        self.track(cf, key, true)?;
        let ro = ReadOptions { snapshot: self.snapshot.as_ref(), ..ReadOptions::default() };
        self.batch.get_from_batch_and_db_cf(self.db, &ro, cf, key)
    }

    /// [`Transaction::get_for_update_opt`] in column family `cf`.
    pub fn get_for_update_cf_opt(
        &mut self,
        cf: &ColumnFamilyHandle,
        ro: &ReadOptions<'_>,
        key: &[u8],
        exclusive: bool,
    ) -> Result<Option<Vec<u8>>> {
        self.refuse_unless_started()?;
        self.check_family(cf)?;
        self.track(cf, key, exclusive)?;
        self.batch.get_from_batch_and_db_cf(self.db, ro, cf, key)
    }

    /// [`Transaction::get_for_update_cf_opt`] for each `(family, key)`,
    /// exclusively (RocksDB `MultiGetForUpdate`).
    pub fn multi_get_for_update(
        &mut self,
        ro: &ReadOptions<'_>,
        keys: &[(&ColumnFamilyHandle, &[u8])],
    ) -> Vec<Result<Option<Vec<u8>>>> {
        keys.iter().map(|(cf, k)| self.get_for_update_cf_opt(cf, ro, k, true)).collect()
    }

    /// An iterator over the database as `ro` says with the transaction's
    /// writes over it (RocksDB `GetIterator`). It borrows the transaction,
    /// which cannot be written while it lives.
    pub fn iter(&self, ro: ReadOptions<'_>) -> BaseDeltaIterator<'_> {
        let cf = self.default_cf.clone();
        self.iter_cf(&cf, ro)
    }

    /// [`Transaction::iter`] in column family `cf`.
    pub fn iter_cf(&self, cf: &ColumnFamilyHandle, ro: ReadOptions<'_>) -> BaseDeltaIterator<'_> {
        let base = self.db.iter_cf(cf, ro);
        self.batch.iterator_with_base_cf(cf, base)
    }

    // ---- Writes ----

    /// Sets `key` to `value` (RocksDB `Transaction::Put`), keeping the key
    /// from others as `get_for_update` does.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let cf = self.default_cf.clone();
        self.put_cf(&cf, key, value)
    }

    /// [`Transaction::put`] in column family `cf`.
    pub fn put_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8]) -> Result<()> {
        self.write_op(cf, key, |b| b.put_cf(cf, key, value))
    }

    /// Removes `key` (RocksDB `Transaction::Delete`).
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        let cf = self.default_cf.clone();
        self.delete_cf(&cf, key)
    }

    /// [`Transaction::delete`] in column family `cf`.
    pub fn delete_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8]) -> Result<()> {
        self.write_op(cf, key, |b| b.delete_cf(cf, key))
    }

    /// Removes `key`, written by one put since its last single delete
    /// (RocksDB `Transaction::SingleDelete`; see [`WriteBatch::single_delete`]).
    pub fn single_delete(&mut self, key: &[u8]) -> Result<()> {
        let cf = self.default_cf.clone();
        self.single_delete_cf(&cf, key)
    }

    /// [`Transaction::single_delete`] in column family `cf`.
    pub fn single_delete_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8]) -> Result<()> {
        self.write_op(cf, key, |b| b.single_delete_cf(cf, key))
    }

    /// Adds a merge operand for `key` (RocksDB `Transaction::Merge`); the
    /// family needs a merge operator.
    pub fn merge(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let cf = self.default_cf.clone();
        self.merge_cf(&cf, key, value)
    }

    /// [`Transaction::merge`] in column family `cf`.
    pub fn merge_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8]) -> Result<()> {
        if cf.data.options().merge_operator.is_none() {
            self.check_family(cf)?;
            return Err(Error::invalid(format!("merge in column family '{}', which has no merge operator", cf.name())));
        }
        self.write_op(cf, key, |b| b.merge_cf(cf, key, value))
    }

    /// Sets `key` without keeping it from others: no lock, no conflict
    /// check at commit (RocksDB `PutUntracked`).
    pub fn put_untracked(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let cf = self.default_cf.clone();
        self.put_untracked_cf(&cf, key, value)
    }

    /// [`Transaction::put_untracked`] in column family `cf`.
    pub fn put_untracked_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8]) -> Result<()> {
        self.refuse_unless_started()?;
        self.check_family(cf)?;
        self.batch.put_cf(cf, key, value);
        Ok(())
    }

    /// Removes `key` without keeping it from others (RocksDB `DeleteUntracked`).
    pub fn delete_untracked(&mut self, key: &[u8]) -> Result<()> {
        let cf = self.default_cf.clone();
        self.delete_untracked_cf(&cf, key)
    }

    /// [`Transaction::delete_untracked`] in column family `cf`.
    pub fn delete_untracked_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8]) -> Result<()> {
        self.refuse_unless_started()?;
        self.check_family(cf)?;
        self.batch.delete_cf(cf, key);
        Ok(())
    }

    fn write_op(
        &mut self,
        cf: &ColumnFamilyHandle,
        key: &[u8],
        op: impl FnOnce(&mut WriteBatchWithIndex),
    ) -> Result<()> {
        self.refuse_unless_started()?;
        self.check_family(cf)?;
        if key.len() > crate::options::MAX_KEY_SIZE {
            return Err(Error::invalid(format!(
                "key of {} bytes exceeds the limit of {}",
                key.len(),
                crate::options::MAX_KEY_SIZE
            )));
        }
        self.track(cf, key, true)?;
        op(&mut self.batch);
        Ok(())
    }

    // ---- Savepoints ----

    /// Marks a savepoint (RocksDB `SetSavePoint`).
    pub fn set_save_point(&mut self) {
        self.batch.set_save_point();
        self.save_points.push(SavePoint {
            new_keys: Vec::new(),
            upgraded: Vec::new(),
            snapshot: self.snapshot.clone(),
        });
    }

    /// Undoes everything since the newest savepoint and forgets it
    /// (RocksDB `RollbackToSavePoint`): its writes, the keys it tracked
    /// (a pessimistic transaction unlocks them; locks upgraded since are
    /// kept exclusive) and its snapshot. `NotFound` without a savepoint.
    pub fn rollback_to_save_point(&mut self) -> Result<()> {
        self.refuse_unless_started()?;
        let Some(sp) = self.save_points.pop() else {
            return Err(Error::NotFound("no savepoint to roll back to".into()));
        };
        self.batch.rollback_to_save_point()?;
        for key in &sp.new_keys {
            self.tracked.remove(key);
        }
        if let (Owner::Pessimistic(tdb), Some(lock)) = (self.owner, &self.lock) {
            tdb.locks().unlock_all(lock.id(), sp.new_keys.iter().map(|(cf, k)| (*cf, k.as_slice())));
        }
        self.snapshot = sp.snapshot;
        Ok(())
    }

    /// Forgets the newest savepoint, keeping what came after it (RocksDB
    /// `PopSavePoint`). `NotFound` without a savepoint.
    pub fn pop_save_point(&mut self) -> Result<()> {
        self.refuse_unless_started()?;
        let Some(sp) = self.save_points.pop() else {
            return Err(Error::NotFound("no savepoint to pop".into()));
        };
        self.batch.pop_save_point()?;
        if let Some(parent) = self.save_points.last_mut() {
            parent.new_keys.extend(sp.new_keys);
            parent.upgraded.extend(sp.upgraded);
        }
        Ok(())
    }

    // ---- Two-phase commit ----

    /// Names the transaction, for two-phase commit (RocksDB `SetName`). A
    /// pessimistic transaction's only. Errors: `InvalidArgument` for an
    /// empty name, a second name, or a name another live or prepared
    /// transaction of the database has.
    pub fn set_name(&mut self, name: &[u8]) -> Result<()> {
        self.refuse_unless_started()?;
        let Owner::Pessimistic(tdb) = self.owner else {
            return Err(Error::NotSupported("optimistic transactions have no two-phase commit, so no name".into()));
        };
        if name.is_empty() {
            return Err(Error::invalid("a transaction name cannot be empty"));
        }
        if self.name.is_some() {
            return Err(Error::invalid("the transaction already has a name"));
        }
        tdb.register_name(name)?;
        self.name = Some(name.to_vec());
        Ok(())
    }

    /// Writes the transaction's updates to the WAL, not applied, under its
    /// name (RocksDB `Prepare`): from then on they survive a crash, and
    /// after one the transaction is found by
    /// [`TransactionDb::get_all_prepared_transactions`]; they become
    /// visible only with `commit`. Its locks stay held. Errors:
    /// `InvalidArgument` without a name, with `disable_wal`, or not in the
    /// started state; `Expired` when its locks were taken.
    pub fn prepare(&mut self) -> Result<()> {
        self.refuse_unless_started()?;
        let Owner::Pessimistic(_) = self.owner else {
            return Err(Error::NotSupported("optimistic transactions have no two-phase commit".into()));
        };
        let Some(name) = self.name.clone() else {
            return Err(Error::invalid("a transaction must be named (set_name) before it is prepared"));
        };
        if self.write_options.disable_wal {
            return Err(Error::invalid("a transaction cannot be prepared with disable_wal: prepare writes the WAL"));
        }
        self.begin_commit()?;
        let mut batch = self.batch.write_batch().clone();
        let written = batch.mark_prepare(&name).and_then(|()| self.db.write_owned(batch, &self.write_options));
        match written {
            Ok(()) => {
                self.state = TransactionState::Prepared;
                Ok(())
            }
            Err(e) => {
                self.abort_commit();
                Err(e)
            }
        }
    }

    fn begin_commit(&mut self) -> Result<()> {
        if let Some(lock) = &self.lock {
            if !lock.try_begin_commit() {
                self.state = TransactionState::LocksStolen;
                return Err(Error::Expired("the transaction expired and another transaction took its locks".into()));
            }
        }
        Ok(())
    }

    fn abort_commit(&self) {
        if let Some(lock) = &self.lock {
            lock.abort_commit();
        }
    }

    // ---- Commit and rollback ----

    /// Makes the transaction's writes visible, atomically (RocksDB
    /// `Commit`). An optimistic transaction first checks that no key it
    /// tracks was written by another since it tracked it: `Busy` when one
    /// was (nothing is written; roll back and retry), `TryAgain` when the
    /// history kept in memory does not reach back far enough
    /// (`max_write_buffer_size_to_maintain`). A pessimistic one holds its
    /// keys' locks, so it only writes, then releases them. Errors:
    /// `InvalidArgument` when already committed or rolled back, `Expired`
    /// when its locks were taken after it expired.
    pub fn commit(&mut self) -> Result<()> {
        match self.state {
            TransactionState::Prepared => return self.commit_prepared(),
            _ => self.refuse_unless_started()?,
        }
        match self.owner {
            Owner::Optimistic(odb) => {
                let keys: Vec<(u32, &[u8], SequenceNumber)> =
                    self.tracked.iter().map(|((cf, k), t)| (*cf, k.as_slice(), t.seq)).collect();
                let _held = odb.hold_for_commit(keys.iter().map(|(cf, k, _)| (*cf, *k)));
                validate(self.db, &keys)?;
                if !self.batch.is_empty() {
                    self.db.write_owned(self.batch.write_batch().clone(), &self.write_options)?;
                }
            }
            Owner::Pessimistic(_) => {
                self.begin_commit()?;
                if !self.batch.is_empty() {
                    if let Err(e) = self.db.write_owned(self.batch.write_batch().clone(), &self.write_options) {
                        self.abort_commit();
                        return Err(e);
                    }
                }
            }
        }
        self.finish(TransactionState::Committed);
        Ok(())
    }

    fn commit_prepared(&mut self) -> Result<()> {
        let name = self.name.clone().unwrap_or_default();
        let mut batch = self.batch.write_batch().clone();
        batch.mark_commit(&name)?;
        self.db.write_owned(batch, &self.write_options)?;
        self.finish(TransactionState::Committed);
        Ok(())
    }

    /// Discards the transaction's writes and releases its locks (RocksDB
    /// `Rollback`); a prepared transaction's rollback is written to the
    /// WAL. `InvalidArgument` when already committed or rolled back.
    pub fn rollback(&mut self) -> Result<()> {
        match self.state {
            TransactionState::Started | TransactionState::LocksStolen => {}
            TransactionState::Prepared => {
                let name = self.name.clone().unwrap_or_default();
                self.db.write_owned(WriteBatch::rollback_marker(&name), &self.write_options)?;
            }
            _ => self.refuse_unless_started()?,
        }
        self.finish(TransactionState::RolledBack);
        Ok(())
    }

    /// Ends the transaction in `state`: its batch, keys and locks go, its
    /// name is free again.
    fn finish(&mut self, state: TransactionState) {
        self.release();
        self.batch.clear();
        self.save_points.clear();
        self.snapshot = None;
        self.state = state;
    }

    /// Releases the locks and the name.
    fn release(&mut self) {
        if let Owner::Pessimistic(tdb) = self.owner {
            if let Some(lock) = &self.lock {
                tdb.locks().unlock_all(lock.id(), self.tracked.keys().map(|(cf, k)| (*cf, k.as_slice())));
            }
            if let Some(name) = self.name.take() {
                tdb.unregister_name(&name);
            }
        }
        self.tracked.clear();
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        self.release();
    }
}

/// The verdict on one key: `Busy` when written by another after `seq`,
/// `TryAgain` when the memtables kept cannot tell (RocksDB
/// `TransactionUtil::CheckKey`).
fn conflict(cf: u32, seq: SequenceNumber, verdict: WrittenSince) -> Result<()> {
    match verdict {
        WrittenSince::No => Ok(()),
        WrittenSince::Yes(at) => Err(Error::Busy(format!(
            "write conflict: a key of column family {cf} was written at sequence {at}, after the transaction's \
             sequence {seq}"
        ))),
        WrittenSince::Unknown(earliest) => Err(Error::TryAgain(format!(
            "the transaction could not check for conflicts at sequence {seq}: the memtables of column family {cf} \
             only hold writes after sequence {earliest}; a larger max_write_buffer_size_to_maintain keeps more"
        ))),
    }
}

/// Checks every tracked key of an optimistic transaction, family by family.
fn validate(db: &Db, keys: &[(u32, &[u8], SequenceNumber)]) -> Result<()> {
    let mut by_family: BTreeMap<u32, Vec<(&[u8], SequenceNumber)>> = BTreeMap::new();
    for &(cf, key, seq) in keys {
        by_family.entry(cf).or_default().push((key, seq));
    }
    for (cf, keys) in by_family {
        let verdicts = db.inner.written_since(cf, &keys)?;
        for ((_, seq), v) in keys.iter().zip(verdicts) {
            conflict(cf, *seq, v)?;
        }
    }
    Ok(())
}
