//! `WriteBatchWithIndex` (RocksDB's `utilities/write_batch_with_index`): a
//! [`WriteBatch`] with an index over its keys, per column family, so that
//! what the batch will write can be read before it is written: point reads
//! from the batch alone or from the batch over the database, and
//! [`BaseDeltaIterator`], the batch's keys over a database iterator's.
//! Transactions keep their writes in one (docs/transactions.md).
//!
//! What it owns: the batch, the index and the savepoints.
//!
//! Invariants:
//! 1. The index holds, per column family, every key the batch writes in
//!    that family, in the family's order, each with the batch's updates to
//!    it in the batch's order: all of them, or (`overwrite_key`) those
//!    since its last put, delete or single delete, which is all a read
//!    needs. Reads come out the same either way.
//! 2. Each indexed update knows where its value lies in the batch's bytes:
//!    the index is rebuilt from the batch whenever the batch is cut back
//!    (a rollback to a savepoint) and emptied when the batch is cleared,
//!    so those places are always inside the batch.
//! 3. A family's order is fixed when its index is made: the default
//!    family's by the constructor, another family's by the handle of its
//!    first write (a family's comparator cannot change while it is open).
//!
//! Thread safety: none of its own; writes take `&mut self`, reads `&self`,
//! and an iterator borrows the batch, which cannot change while it lives.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{btree_map, BTreeMap};
use std::ops::{Bound, Range};
use std::sync::Arc;

use smallvec::SmallVec;

use crate::comparator::{Comparator, UserComparator};
use crate::db::{BatchMark, BatchOp, ColumnFamilyHandle, Db, DbIterator, ReadOptions, WriteBatch};
use crate::error::{Error, Result};
use crate::merge_operator::MergeOperator;
use crate::options::Options;
use crate::prefix::SliceTransform;

/// Where merge failures are said to happen (the place of their corruption
/// error, as a read from the database names its source).
const PLACE: &str = "(write batch with index)";

/// What a [`WriteBatchWithIndex`] holds for one key
/// ([`WriteBatchWithIndex::lookup_in_batch`]; RocksDB's
/// `WBWIIteratorImpl::Result`, whose merge in progress is an error here).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchValue {
    /// The batch sets the key to this value (a put, or merge operands on a
    /// put or delete of the batch, merged).
    Found(Vec<u8>),
    /// The batch deletes the key (a delete or single delete, newest).
    Deleted,
    /// The batch does not write the key.
    NotFound,
}

impl BatchValue {
    /// The value, `None` when deleted or not found.
    pub fn into_option(self) -> Option<Vec<u8>> {
        match self {
            BatchValue::Found(v) => Some(v),
            BatchValue::Deleted | BatchValue::NotFound => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UpdateKind {
    Put,
    Delete,
    SingleDelete,
    Merge,
}

/// One update of the batch to an indexed key.
#[derive(Debug, Clone)]
struct Update {
    kind: UpdateKind,
    /// Where its value (a put's or a merge's operand) lies in the batch's
    /// bytes; empty for a deletion.
    value: Range<usize>,
}

/// A key of a family's index, ordered by the family's comparator (the same
/// one for every key of one index).
struct IndexKey {
    key: Box<[u8]>,
    cmp: UserComparator,
}

impl IndexKey {
    fn new(key: &[u8], cmp: &UserComparator) -> Self {
        IndexKey { key: key.into(), cmp: cmp.clone() }
    }
}

impl PartialEq for IndexKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for IndexKey {}

impl PartialOrd for IndexKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for IndexKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.cmp.compare(&self.key, &other.key)
    }
}

/// A key's updates, oldest first; mostly one.
type Updates = SmallVec<[Update; 1]>;

/// The index of one column family's keys.
struct FamilyIndex {
    cmp: UserComparator,
    keys: BTreeMap<IndexKey, Updates>,
}

impl FamilyIndex {
    fn new(cmp: UserComparator) -> Self {
        FamilyIndex { cmp, keys: BTreeMap::new() }
    }

    /// Records `update` to `key`: with `overwrite_key`, a put or deletion
    /// replaces the key's earlier updates, which no read needs any more.
    fn add(&mut self, key: &[u8], update: Update, overwrite_key: bool) {
        let updates = self.keys.entry(IndexKey::new(key, &self.cmp)).or_default();
        if overwrite_key && update.kind != UpdateKind::Merge {
            updates.clear();
        }
        updates.push(update);
    }

    fn get(&self, key: &[u8]) -> Option<&Updates> {
        self.keys.get(&IndexKey::new(key, &self.cmp))
    }
}

/// What a key's updates in the batch come to: the newest put or deletion
/// (`under`) and the merge operands after it, oldest first.
struct KeyState<'a> {
    under: Under<'a>,
    operands: Vec<&'a [u8]>,
}

#[derive(Clone, Copy)]
enum Under<'a> {
    Put(&'a [u8]),
    Deleted,
    /// No put or deletion in the batch: the operands apply to what the
    /// database holds.
    Nothing,
}

impl<'a> KeyState<'a> {
    /// The state of a key with `updates` in a batch of bytes `data`.
    fn of(data: &'a [u8], updates: &Updates) -> Self {
        let mut operands = Vec::new();
        let mut under = Under::Nothing;
        // Invariant 2: every value range lies inside the batch.
        for u in updates.iter().rev() {
            match u.kind {
                UpdateKind::Merge => operands.push(&data[u.value.clone()]),
                UpdateKind::Put => {
                    under = Under::Put(&data[u.value.clone()]);
                    break;
                }
                UpdateKind::Delete | UpdateKind::SingleDelete => {
                    under = Under::Deleted;
                    break;
                }
            }
        }
        operands.reverse();
        KeyState { under, operands }
    }

    /// The key's value with the batch applied over `base`, the value under
    /// the batch's updates (the database's; read only when `under` is
    /// `Nothing`): `None` when deleted. Operands are merged by `op`.
    fn resolve(
        &self,
        key: &[u8],
        op: Option<&dyn MergeOperator>,
        base: Option<&[u8]>,
    ) -> Result<Option<Cow<'a, [u8]>>> {
        if self.operands.is_empty() {
            return Ok(match self.under {
                Under::Put(v) => Some(Cow::Borrowed(v)),
                Under::Deleted => None,
                Under::Nothing => base.map(|b| Cow::Owned(b.to_vec())),
            });
        }
        let existing = match self.under {
            Under::Put(v) => Some(v),
            Under::Deleted => None,
            Under::Nothing => base,
        };
        let op = op.ok_or_else(|| crate::merge_operator::missing(key))?;
        crate::merge_operator::full_merge(op, key, existing, &self.operands, PLACE).map(|v| Some(Cow::Owned(v)))
    }

    /// [`Self::resolve`], owned.
    fn value(&self, key: &[u8], op: Option<&dyn MergeOperator>, base: Option<&[u8]>) -> Result<Option<Vec<u8>>> {
        Ok(self.resolve(key, op, base)?.map(Cow::into_owned))
    }

    fn needs_base(&self) -> bool {
        matches!(self.under, Under::Nothing)
    }
}

/// A write batch with an index over its keys, per column family (RocksDB
/// `WriteBatchWithIndex`): the batch can be read (alone, or over the
/// database) and iterated before it is written with [`Db::write_opt`]
/// (pass [`WriteBatchWithIndex::write_batch`]). Writes are infallible, as
/// a [`WriteBatch`]'s: sizes, families and merge operators are checked when
/// the batch is written. Range deletions are not supported (as in RocksDB).
/// See docs/transactions.md.
pub struct WriteBatchWithIndex {
    batch: WriteBatch,
    overwrite_key: bool,
    /// The order of the default family's keys.
    default_cmp: UserComparator,
    /// The default family's merge operator, when known
    /// ([`WriteBatchWithIndex::for_db`]).
    default_merge_operator: Option<Arc<dyn MergeOperator>>,
    /// By column family id. Kept when emptied, for its order (invariant 3).
    families: BTreeMap<u32, FamilyIndex>,
    save_points: Vec<BatchMark>,
}

impl std::fmt::Debug for WriteBatchWithIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatchWithIndex")
            .field("count", &self.len())
            .field("bytes", &self.size_in_bytes())
            .field("overwrite_key", &self.overwrite_key)
            .field("save_points", &self.save_points.len())
            .finish()
    }
}

impl Default for WriteBatchWithIndex {
    /// [`WriteBatchWithIndex::new`]`(false)`, RocksDB's default.
    fn default() -> Self {
        Self::new(false)
    }
}

impl WriteBatchWithIndex {
    /// An empty batch whose default family is in the bytewise order
    /// (RocksDB's `WriteBatchWithIndex(BytewiseComparator(), 0,
    /// overwrite_key)`). With `overwrite_key`, the index keeps of each key
    /// only the updates since its last put, delete or single delete; reads
    /// come out the same either way, and the batch itself keeps every
    /// update.
    pub fn new(overwrite_key: bool) -> Self {
        Self::with_order(UserComparator::BYTEWISE, None, overwrite_key)
    }

    /// An empty batch whose default family is in `comparator`'s order
    /// (RocksDB's `backup_index_comparator`): it must be the order of the
    /// default family it is read with, or iterators over it report an
    /// `InvalidArgument` error.
    pub fn with_comparator(comparator: Arc<dyn Comparator>, overwrite_key: bool) -> Self {
        Self::with_order(UserComparator::new(&comparator), None, overwrite_key)
    }

    /// An empty batch for `db`: its default family in the order and with
    /// the merge operator of `db`'s default family (what a transaction
    /// database makes its transactions' batches with).
    pub fn for_db(db: &Db, overwrite_key: bool) -> Self {
        let default = db.default_family();
        let merge_operator = default.data.options().merge_operator.clone();
        Self::with_order(default.data.cmp.clone(), merge_operator, overwrite_key)
    }

    fn with_order(cmp: UserComparator, merge_operator: Option<Arc<dyn MergeOperator>>, overwrite_key: bool) -> Self {
        WriteBatchWithIndex {
            batch: WriteBatch::new(),
            overwrite_key,
            default_cmp: cmp,
            default_merge_operator: merge_operator,
            families: BTreeMap::new(),
            save_points: Vec::new(),
        }
    }

    /// Indexes the update just appended to the batch: of `kind`, to `key`
    /// of family `cf` (`cmp`, its order when it is not the default), its
    /// value the batch's last `value_len` bytes.
    fn index_last(&mut self, cf: u32, cmp: Option<&UserComparator>, key: &[u8], kind: UpdateKind, value_len: usize) {
        let end = self.batch.size_in_bytes();
        let update = Update { kind, value: end - value_len..end };
        let order = || match (cf, cmp) {
            (0, _) | (_, None) => self.default_cmp.clone(),
            (_, Some(c)) => c.clone(),
        };
        let family = self.families.entry(cf).or_insert_with(|| FamilyIndex::new(order()));
        family.add(key, update, self.overwrite_key);
    }

    /// Adds a put to the default family.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.batch.put(key, value);
        self.index_last(0, None, key, UpdateKind::Put, value.len());
    }

    /// Adds a put to the family `cf`.
    pub fn put_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8]) {
        self.batch.put_cf(cf, key, value);
        self.index_last(cf.id(), Some(&cf.data.cmp), key, UpdateKind::Put, value.len());
    }

    /// Adds a delete to the default family.
    pub fn delete(&mut self, key: &[u8]) {
        self.batch.delete(key);
        self.index_last(0, None, key, UpdateKind::Delete, 0);
    }

    /// Adds a delete to the family `cf`.
    pub fn delete_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8]) {
        self.batch.delete_cf(cf, key);
        self.index_last(cf.id(), Some(&cf.data.cmp), key, UpdateKind::Delete, 0);
    }

    /// Adds a single delete to the default family ([`WriteBatch::single_delete`]);
    /// the batch's reads take it as a delete.
    pub fn single_delete(&mut self, key: &[u8]) {
        self.batch.single_delete(key);
        self.index_last(0, None, key, UpdateKind::SingleDelete, 0);
    }

    /// Adds a single delete to the family `cf`.
    pub fn single_delete_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8]) {
        self.batch.single_delete_cf(cf, key);
        self.index_last(cf.id(), Some(&cf.data.cmp), key, UpdateKind::SingleDelete, 0);
    }

    /// Adds a merge operand to the default family ([`WriteBatch::merge`]).
    pub fn merge(&mut self, key: &[u8], value: &[u8]) {
        self.batch.merge(key, value);
        self.index_last(0, None, key, UpdateKind::Merge, value.len());
    }

    /// Adds a merge operand to the family `cf`.
    pub fn merge_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8]) {
        self.batch.merge_cf(cf, key, value);
        self.index_last(cf.id(), Some(&cf.data.cmp), key, UpdateKind::Merge, value.len());
    }

    /// Refused: a batch with an index holds no range deletions (RocksDB's
    /// `WriteBatchWithIndex::DeleteRange` is `NotSupported` too). Adds
    /// nothing.
    ///
    /// Errors: always `NotSupported`.
    pub fn delete_range(&mut self, begin: &[u8], end: &[u8]) -> Result<()> {
        let _ = (begin, end);
        Err(Error::NotSupported("delete_range in a WriteBatchWithIndex (RocksDB's is not supported either)".into()))
    }

    /// As [`WriteBatchWithIndex::delete_range`]: refused, adds nothing.
    ///
    /// Errors: always `NotSupported`.
    pub fn delete_range_cf(&mut self, cf: &ColumnFamilyHandle, begin: &[u8], end: &[u8]) -> Result<()> {
        let _ = cf;
        self.delete_range(begin, end)
    }

    /// The batch, to write with [`Db::write_opt`]; it holds every update,
    /// also those the index no longer keeps (`overwrite_key`).
    pub fn write_batch(&self) -> &WriteBatch {
        &self.batch
    }

    /// The batch, giving up the index.
    pub fn into_write_batch(self) -> WriteBatch {
        self.batch
    }

    /// Number of updates in the batch.
    pub fn len(&self) -> usize {
        self.batch.len()
    }

    /// True when the batch holds no update.
    pub fn is_empty(&self) -> bool {
        self.batch.is_empty()
    }

    /// Size of the encoded batch in bytes.
    pub fn size_in_bytes(&self) -> usize {
        self.batch.size_in_bytes()
    }

    /// Removes every update and every savepoint.
    pub fn clear(&mut self) {
        self.batch.clear();
        for family in self.families.values_mut() {
            family.keys.clear();
        }
        self.save_points.clear();
    }

    /// Records a savepoint: [`WriteBatchWithIndex::rollback_to_save_point`]
    /// comes back to here. Savepoints nest.
    pub fn set_save_point(&mut self) {
        self.save_points.push(self.batch.mark());
    }

    /// Removes every update added since the newest savepoint, from the
    /// batch and from the index, and forgets that savepoint.
    ///
    /// Errors: `NotFound` when there is no savepoint (nothing changes).
    pub fn rollback_to_save_point(&mut self) -> Result<()> {
        let mark = self.save_points.pop().ok_or_else(no_save_point)?;
        self.batch.truncate_to(mark);
        self.rebuild_index()
    }

    /// Forgets the newest savepoint, keeping the updates made since.
    ///
    /// Errors: `NotFound` when there is no savepoint.
    pub fn pop_save_point(&mut self) -> Result<()> {
        self.save_points.pop().map(|_| ()).ok_or_else(no_save_point)
    }

    /// Indexes the batch afresh (invariant 2).
    fn rebuild_index(&mut self) -> Result<()> {
        for family in self.families.values_mut() {
            family.keys.clear();
        }
        let mut records = self.batch.records();
        while let Some(record) = records.next() {
            let end = records.offset();
            let (cf, op) = record.map_err(|reason| Error::corruption(PLACE, end as u64, reason))?;
            let (kind, key, value_len) = match op {
                BatchOp::Put { key, value } => (UpdateKind::Put, key, value.len()),
                BatchOp::Merge { key, value } => (UpdateKind::Merge, key, value.len()),
                BatchOp::Delete { key } => (UpdateKind::Delete, key, 0),
                BatchOp::SingleDelete { key } => (UpdateKind::SingleDelete, key, 0),
                BatchOp::DeleteRange { .. } => {
                    return Err(Error::corruption(PLACE, end as u64, "a range deletion in a batch with an index"))
                }
                BatchOp::PutEntity { .. } => {
                    return Err(Error::corruption(PLACE, end as u64, "an entity in a batch with an index"))
                }
            };
            let Some(family) = self.families.get_mut(&cf) else {
                return Err(Error::corruption(PLACE, end as u64, format!("an update of unindexed family {cf}")));
            };
            family.add(key, Update { kind, value: end - value_len..end }, self.overwrite_key);
        }
        Ok(())
    }

    /// The batch's indexed updates to `key` in family `cf`.
    fn updates(&self, cf: u32, key: &[u8]) -> Option<&Updates> {
        self.families.get(&cf)?.get(key)
    }

    /// What the batch holds for `key` in the default family (RocksDB
    /// `GetFromBatch`): merge operands on a put or delete of the batch are
    /// merged by `options.merge_operator` (else the one of
    /// [`WriteBatchWithIndex::for_db`]'s database).
    ///
    /// Errors: `MergeInProgress` when the batch has merge operands for the
    /// key and no put or delete under them (the database holds what they
    /// apply to: see [`WriteBatchWithIndex::get_from_batch_and_db`]);
    /// `InvalidArgument` when operands need merging and there is no merge
    /// operator; `Corruption` when the operator fails.
    pub fn lookup_in_batch(&self, options: &Options, key: &[u8]) -> Result<BatchValue> {
        let op = options.merge_operator.as_ref().or(self.default_merge_operator.as_ref());
        self.lookup(0, key, op.map(|o| o.as_ref()))
    }

    /// [`WriteBatchWithIndex::lookup_in_batch`] in the family `cf`, merging
    /// with the family's merge operator.
    ///
    /// Errors: as `lookup_in_batch`; `InvalidArgument` when `cf` was
    /// dropped.
    pub fn lookup_in_batch_cf(&self, cf: &ColumnFamilyHandle, key: &[u8]) -> Result<BatchValue> {
        cf.data.check_live()?;
        let op = cf.data.options().merge_operator.clone();
        self.lookup(cf.id(), key, op.as_deref())
    }

    fn lookup(&self, cf: u32, key: &[u8], op: Option<&dyn MergeOperator>) -> Result<BatchValue> {
        let Some(updates) = self.updates(cf, key) else { return Ok(BatchValue::NotFound) };
        let state = KeyState::of(self.batch.data(), updates);
        if state.needs_base() {
            return Err(Error::MergeInProgress(format!(
                "the batch has {} merge operand(s) for key {:?} and nothing under them: the database holds what \
                 they apply to",
                state.operands.len(),
                String::from_utf8_lossy(key)
            )));
        }
        Ok(match state.value(key, op, None)? {
            Some(v) => BatchValue::Found(v),
            None => BatchValue::Deleted,
        })
    }

    /// The value of `key` in the default family as the batch leaves it:
    /// `None` when the batch deletes it or does not write it (tell them
    /// apart with [`WriteBatchWithIndex::lookup_in_batch`]).
    ///
    /// Errors: as `lookup_in_batch`.
    pub fn get_from_batch(&self, options: &Options, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.lookup_in_batch(options, key)?.into_option())
    }

    /// [`WriteBatchWithIndex::get_from_batch`] in the family `cf`.
    ///
    /// Errors: as `lookup_in_batch_cf`.
    pub fn get_from_batch_cf(&self, cf: &ColumnFamilyHandle, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.lookup_in_batch_cf(cf, key)?.into_option())
    }

    /// The value of `key` in `db`'s default family once the batch is
    /// written over what `ro` reads (RocksDB `GetFromBatchAndDB`): the
    /// batch's put or delete if it has one, else the database's value read
    /// with `ro` (at its snapshot, if any); merge operands of the batch
    /// are merged onto either with the family's merge operator.
    ///
    /// Errors: those of [`Db::get_opt`]; `InvalidArgument` when operands
    /// need merging and the family has no merge operator; `Corruption`
    /// when the operator fails.
    pub fn get_from_batch_and_db(&self, db: &Db, ro: &ReadOptions<'_>, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_from_batch_and_db_cf(db, ro, &db.default_family(), key)
    }

    /// [`WriteBatchWithIndex::get_from_batch_and_db`] in the family `cf`.
    ///
    /// Errors: as `get_from_batch_and_db`; `InvalidArgument` when `cf` was
    /// dropped.
    pub fn get_from_batch_and_db_cf(
        &self,
        db: &Db,
        ro: &ReadOptions<'_>,
        cf: &ColumnFamilyHandle,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>> {
        cf.data.check_live()?;
        let Some(updates) = self.updates(cf.id(), key) else { return db.get_cf_opt(cf, key, ro) };
        let state = KeyState::of(self.batch.data(), updates);
        let base = if state.needs_base() { db.get_cf_opt(cf, key, ro)? } else { None };
        let op = cf.data.options().merge_operator.clone();
        state.value(key, op.as_deref(), base.as_deref())
    }

    /// [`WriteBatchWithIndex::get_from_batch_and_db`] for several keys of
    /// the default family, the database read once for all of them that
    /// need it, at one sequence ([`Db::multi_get_cf`]). Answers are in the
    /// order of `keys`; an error fails only the keys it concerns.
    pub fn multi_get_from_batch_and_db(
        &self,
        db: &Db,
        ro: &ReadOptions<'_>,
        keys: &[&[u8]],
    ) -> Vec<Result<Option<Vec<u8>>>> {
        self.multi_get_from_batch_and_db_cf(db, ro, &db.default_family(), keys)
    }

    /// [`WriteBatchWithIndex::multi_get_from_batch_and_db`] in the family
    /// `cf`.
    pub fn multi_get_from_batch_and_db_cf(
        &self,
        db: &Db,
        ro: &ReadOptions<'_>,
        cf: &ColumnFamilyHandle,
        keys: &[&[u8]],
    ) -> Vec<Result<Option<Vec<u8>>>> {
        if let Err(e) = cf.data.check_live() {
            return keys.iter().map(|_| Err(e.duplicate())).collect();
        }
        let data = self.batch.data();
        let states: Vec<Option<KeyState<'_>>> =
            keys.iter().map(|k| self.updates(cf.id(), k).map(|u| KeyState::of(data, u))).collect();
        let reads: Vec<(&ColumnFamilyHandle, &[u8])> = keys
            .iter()
            .zip(&states)
            .filter(|(_, s)| s.as_ref().is_none_or(KeyState::needs_base))
            .map(|(k, _)| (cf, *k))
            .collect();
        let mut from_db = db.multi_get_cf(&reads, ro).into_iter();
        let op = cf.data.options().merge_operator.clone();
        keys.iter()
            .zip(states)
            .map(|(key, state)| {
                let mut db_value = || {
                    from_db.next().unwrap_or_else(|| {
                        Err(Error::corruption(PLACE, 0, "the database answered fewer keys than it was asked"))
                    })
                };
                match state {
                    None => db_value(),
                    Some(s) if s.needs_base() => s.value(key, op.as_deref(), db_value()?.as_deref()),
                    Some(s) => s.value(key, op.as_deref(), None),
                }
            })
            .collect()
    }

    /// The batch's keys of the default family in its order, each with its
    /// indexed updates in the batch's order (RocksDB `NewIterator`): all of
    /// them, or with `overwrite_key` those since its last put or deletion.
    pub fn iter_batch(&self) -> BatchEntries<'_> {
        self.entries(0)
    }

    /// [`WriteBatchWithIndex::iter_batch`] for the family `cf`.
    ///
    /// Errors: `InvalidArgument` when `cf` was dropped.
    pub fn iter_batch_cf(&self, cf: &ColumnFamilyHandle) -> Result<BatchEntries<'_>> {
        cf.data.check_live()?;
        Ok(self.entries(cf.id()))
    }

    fn entries(&self, cf: u32) -> BatchEntries<'_> {
        BatchEntries { data: self.batch.data(), keys: self.families.get(&cf).map(|f| f.keys.iter()), current: None }
    }

    /// The default family's keys of `base` with the batch written over them
    /// (RocksDB `NewIteratorWithBase`); see [`BaseDeltaIterator`]. `base`
    /// must be an iterator over the default family of the database the
    /// batch will be written to.
    pub fn iterator_with_base<'a>(&'a self, base: DbIterator<'a>) -> BaseDeltaIterator<'a> {
        BaseDeltaIterator::new(self, 0, base, None)
    }

    /// [`WriteBatchWithIndex::iterator_with_base`] for the family `cf`;
    /// `base` must be an iterator over that family. A dropped `cf` makes
    /// an iterator whose status is the `InvalidArgument` error.
    pub fn iterator_with_base_cf<'a>(&'a self, cf: &ColumnFamilyHandle, base: DbIterator<'a>) -> BaseDeltaIterator<'a> {
        BaseDeltaIterator::new(self, cf.id(), base, cf.data.check_live().err())
    }
}

fn no_save_point() -> Error {
    Error::NotFound("no savepoint in the write batch (set_save_point)".into())
}

/// The updates of one family of a [`WriteBatchWithIndex`] in key order
/// ([`WriteBatchWithIndex::iter_batch`]), each key's in the batch's order.
/// Borrows the batch.
pub struct BatchEntries<'a> {
    data: &'a [u8],
    keys: Option<btree_map::Iter<'a, IndexKey, Updates>>,
    /// The key whose updates are being yielded, and the rest of them.
    current: Option<(&'a [u8], std::slice::Iter<'a, Update>)>,
}

impl<'a> Iterator for BatchEntries<'a> {
    type Item = BatchOp<'a>;

    fn next(&mut self) -> Option<BatchOp<'a>> {
        loop {
            if let Some((key, updates)) = &mut self.current {
                let key = *key;
                if let Some(u) = updates.next() {
                    // Invariant 2: the value lies inside the batch.
                    let value = &self.data[u.value.clone()];
                    return Some(match u.kind {
                        UpdateKind::Put => BatchOp::Put { key, value },
                        UpdateKind::Merge => BatchOp::Merge { key, value },
                        UpdateKind::Delete => BatchOp::Delete { key },
                        UpdateKind::SingleDelete => BatchOp::SingleDelete { key },
                    });
                }
            }
            let (key, updates) = self.keys.as_mut()?.next()?;
            self.current = Some((&key.key, updates.iter()));
        }
    }
}

/// Where a [`BaseDeltaIterator`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    Invalid,
    /// At the base iterator's key, which the batch does not write.
    Base,
    /// At a key only the batch writes.
    Delta,
    /// At a key both write: the batch's value (merged onto the base's).
    Both,
}

/// A cursor over a family's index, in its order.
struct DeltaCursor<'a> {
    keys: Option<&'a BTreeMap<IndexKey, Updates>>,
    cmp: UserComparator,
    at: Option<(&'a IndexKey, &'a Updates)>,
}

impl<'a> DeltaCursor<'a> {
    fn key(&self) -> Option<&'a [u8]> {
        self.at.map(|(k, _)| &*k.key)
    }

    fn updates(&self) -> Option<&'a Updates> {
        self.at.map(|(_, u)| u)
    }

    fn find(&mut self, range: (Bound<&IndexKey>, Bound<&IndexKey>), last: bool) {
        self.at = self.keys.and_then(|keys| {
            let mut r = keys.range::<IndexKey, _>(range);
            if last {
                r.next_back()
            } else {
                r.next()
            }
        });
    }

    /// To the first key at or after `target` (`inclusive`) or after it.
    fn seek(&mut self, target: &[u8], inclusive: bool) {
        let t = IndexKey::new(target, &self.cmp);
        let from = if inclusive { Bound::Included(&t) } else { Bound::Excluded(&t) };
        self.find((from, Bound::Unbounded), false);
    }

    /// To the last key at or before `target` (`inclusive`) or before it.
    fn seek_for_prev(&mut self, target: &[u8], inclusive: bool) {
        let t = IndexKey::new(target, &self.cmp);
        let to = if inclusive { Bound::Included(&t) } else { Bound::Excluded(&t) };
        self.find((Bound::Unbounded, to), true);
    }

    fn first(&mut self) {
        self.find((Bound::Unbounded, Bound::Unbounded), false);
    }

    fn last(&mut self) {
        self.find((Bound::Unbounded, Bound::Unbounded), true);
    }

    fn next(&mut self) {
        if let Some((k, _)) = self.at {
            self.find((Bound::Excluded(k), Bound::Unbounded), false);
        }
    }

    fn prev(&mut self) {
        if let Some((k, _)) = self.at {
            self.find((Bound::Unbounded, Bound::Excluded(k)), true);
        }
    }
}

/// The keys of a database iterator (the base) with a
/// [`WriteBatchWithIndex`] (the delta) written over them (RocksDB's
/// `BaseDeltaIterator`, from `NewIteratorWithBase`): the batch's puts
/// shadow the base's values, its deletes and single deletes hide the
/// base's keys, and its merge operands are merged onto the base's value of
/// the same key (or onto a put or delete of the batch under them) with the
/// family's merge operator. Both directions, seeks of every kind and
/// changes of direction, as a [`DbIterator`].
///
/// The base's read options hold for the batch's keys too: its bounds
/// (`iterate_lower_bound`, `iterate_upper_bound`) and, with
/// `prefix_same_as_start`, the prefix each seek bounds the iterator to.
/// Its snapshot is the base's; the batch is as it is while the iterator
/// lives (it borrows it).
///
/// Errors: the iterator becomes invalid and [`BaseDeltaIterator::status`]
/// says why: the base's error, a merge without a merge operator
/// (`InvalidArgument`) or a failed merge (`Corruption`), a family order
/// other than the base's or a dropped family (`InvalidArgument`, for good).
/// A seek starts afresh after the first two kinds.
pub struct BaseDeltaIterator<'a> {
    base: DbIterator<'a>,
    delta: DeltaCursor<'a>,
    /// The batch's bytes, where the delta's values lie.
    data: &'a [u8],
    cmp: UserComparator,
    merge_operator: Option<Arc<dyn MergeOperator>>,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    /// The base's prefix extractor in a bounded prefix mode.
    extractor: Option<Arc<dyn SliceTransform>>,
    /// The prefix the last seek bounds the iterator to (and the base).
    bound_prefix: Option<Vec<u8>>,
    /// The last move went forwards. Then the base is at its first key at
    /// or after the current one, and the delta at its first; backwards, at
    /// their last at or before it (or each invalid: none).
    forward: bool,
    at: At,
    /// The value at a key of the delta (`Delta`, `Both`).
    value: Cow<'a, [u8]>,
    /// A merge that failed since the last seek.
    error: Option<Error>,
    /// An error the iterator was made with: it stays invalid.
    fatal: Option<Error>,
}

impl<'a> BaseDeltaIterator<'a> {
    fn new(batch: &'a WriteBatchWithIndex, cf: u32, base: DbIterator<'a>, dropped: Option<Error>) -> Self {
        let cmp = base.comparator().clone();
        let family = batch.families.get(&cf);
        let order = if cf == 0 { Some(&batch.default_cmp) } else { family.map(|f| &f.cmp) };
        let mismatch = order.filter(|o| o.name() != cmp.name()).map(|o| {
            Error::invalid(format!(
                "the write batch orders column family {cf} by {}, the base iterator by {}",
                o.name(),
                cmp.name()
            ))
        });
        BaseDeltaIterator {
            delta: DeltaCursor { keys: family.map(|f| &f.keys), cmp: cmp.clone(), at: None },
            data: batch.batch.data(),
            merge_operator: base.merge_operator().cloned(),
            lower: base.lower_bound().map(<[u8]>::to_vec),
            upper: base.upper_bound().map(<[u8]>::to_vec),
            extractor: base.prefix_extractor().cloned(),
            base,
            cmp,
            bound_prefix: None,
            forward: true,
            at: At::Invalid,
            value: Cow::Borrowed(&[]),
            error: None,
            fatal: dropped.or(mismatch),
        }
    }

    /// True when positioned at a key.
    pub fn valid(&self) -> bool {
        self.at != At::Invalid
    }

    /// The current key; empty when not valid. Valid until the next move.
    pub fn key(&self) -> &[u8] {
        match self.at {
            At::Invalid => &[],
            At::Base => self.base.key(),
            At::Delta | At::Both => self.delta.key().unwrap_or_default(),
        }
    }

    /// The current value; empty when not valid. Valid until the next move.
    pub fn value(&self) -> &[u8] {
        match self.at {
            At::Invalid => &[],
            At::Base => self.base.value(),
            At::Delta | At::Both => &self.value,
        }
    }

    /// The current entry's columns (RocksDB's `Iterator::columns`): the
    /// database's entry as [`DbIterator::columns`] gives it; an entry of
    /// the batch (which holds plain values) as one column named `""`.
    /// Empty when not valid.
    pub fn columns(&self) -> Vec<crate::wide_columns::WideColumn> {
        match self.at {
            At::Invalid => Vec::new(),
            At::Base => self.base.columns(),
            At::Delta | At::Both => {
                vec![crate::wide_columns::WideColumn::new(crate::wide_columns::DEFAULT_COLUMN_NAME, self.value())]
            }
        }
    }

    /// The error that made the iterator invalid, if any.
    pub fn status(&self) -> Result<()> {
        match (&self.fatal, &self.error) {
            (Some(e), _) | (None, Some(e)) => Err(e.duplicate()),
            (None, None) => self.base.status(),
        }
    }

    /// In a bounded prefix mode, `key`'s prefix when it has one.
    fn prefix_of(&self, key: &[u8]) -> Option<Vec<u8>> {
        match &self.extractor {
            Some(x) if x.in_domain(key) => Some(x.transform(key).to_vec()),
            _ => None,
        }
    }

    /// True when `key` is within the bounds and the bound prefix.
    fn in_view(&self, key: &[u8]) -> bool {
        self.lower.as_ref().is_none_or(|l| !self.cmp.lt(key, l))
            && self.upper.as_ref().is_none_or(|u| self.cmp.lt(key, u))
            && match (&self.bound_prefix, &self.extractor) {
                (Some(p), Some(x)) => crate::prefix::has_prefix(x.as_ref(), key, p),
                _ => true,
            }
    }

    /// Positions at the first key `>= target` (and at or after the lower
    /// bound); in a bounded prefix mode the prefix is `target`'s, as
    /// [`DbIterator::seek`].
    pub fn seek(&mut self, target: &[u8]) {
        self.forward = true;
        self.bound_prefix = self.prefix_of(target);
        self.base.seek(target);
        let from = match &self.lower {
            Some(l) if self.cmp.lt(target, l) => l.as_slice(),
            _ => target,
        };
        self.delta.seek(from, true);
        self.settle();
    }

    /// Positions at the last key `<= target` (and before the upper bound);
    /// in a bounded prefix mode the prefix is `target`'s, as
    /// [`DbIterator::seek_for_prev`].
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.forward = false;
        self.bound_prefix = self.prefix_of(target);
        self.base.seek_for_prev(target);
        match &self.upper {
            Some(u) if !self.cmp.lt(target, u) => self.delta.seek_for_prev(u, false),
            _ => self.delta.seek_for_prev(target, true),
        }
        self.settle();
    }

    /// Positions at the first key (a seek to the lower bound when there is
    /// one). Without a lower bound, in a bounded prefix mode the iterator
    /// is bounded to the prefix of the key it lands on, as
    /// [`DbIterator::seek_to_first`].
    pub fn seek_to_first(&mut self) {
        if let Some(lower) = self.lower.clone() {
            self.seek(&lower);
            return;
        }
        self.forward = true;
        // In total order to the first key the batch leaves, then bounded
        // to its prefix: the batch may hide all the base's keys of the
        // prefix the base landed in.
        self.bound_prefix = None;
        self.base.seek_to_first();
        self.base.set_bound_prefix(None);
        self.delta.first();
        self.settle();
        self.bound_to_current_prefix();
    }

    /// Positions at the last key (before the upper bound, bounded to its
    /// prefix in a bounded prefix mode; without one, to the prefix of the
    /// key it lands on), as [`DbIterator::seek_to_last`].
    pub fn seek_to_last(&mut self) {
        self.forward = false;
        match self.upper.clone() {
            Some(upper) => {
                self.bound_prefix = self.prefix_of(&upper);
                self.base.seek_to_last();
                self.delta.seek_for_prev(&upper, false);
                self.settle();
            }
            None => {
                self.bound_prefix = None;
                self.base.seek_to_last();
                self.base.set_bound_prefix(None);
                self.delta.last();
                self.settle();
                self.bound_to_current_prefix();
            }
        }
    }

    /// Bounds the iterator and the base to the current key's prefix.
    fn bound_to_current_prefix(&mut self) {
        if self.extractor.is_some() && self.valid() {
            let prefix = self.prefix_of(self.key());
            self.base.set_bound_prefix(prefix.clone());
            self.bound_prefix = prefix;
        }
    }

    /// Moves to the next key. Requires `valid()`.
    pub fn next(&mut self) {
        if !self.valid() {
            return;
        }
        if self.forward {
            if matches!(self.at, At::Base | At::Both) {
                self.base.next();
            }
            if matches!(self.at, At::Delta | At::Both) {
                self.delta.next();
            }
        } else {
            // Both sides to their first key after the current one. The
            // base is at its last key at or before it, one step back (or
            // has none: a seek, keeping the prefix it is bounded to); the
            // loop holds that whatever the base did at a prefix's edge.
            let key = self.key().to_vec();
            self.forward = true;
            if self.base.valid() {
                self.base.next();
            } else {
                self.base.reseek(&key, false);
            }
            while self.base.valid() && !self.cmp.lt(&key, self.base.key()) {
                self.base.next();
            }
            self.delta.seek(&key, false);
        }
        self.settle();
    }

    /// Moves to the previous key. Requires `valid()`.
    pub fn prev(&mut self) {
        if !self.valid() {
            return;
        }
        if !self.forward {
            if matches!(self.at, At::Base | At::Both) {
                self.base.prev();
            }
            if matches!(self.at, At::Delta | At::Both) {
                self.delta.prev();
            }
        } else {
            // Both sides to their last key before the current one, as in
            // `next`.
            let key = self.key().to_vec();
            self.forward = false;
            if self.base.valid() {
                self.base.prev();
            } else {
                self.base.reseek(&key, true);
            }
            while self.base.valid() && !self.cmp.lt(self.base.key(), &key) {
                self.base.prev();
            }
            self.delta.seek_for_prev(&key, false);
        }
        self.settle();
    }

    /// From the base's and the delta's positions, in the direction of the
    /// last move, to the nearest key the batch leaves: the nearer of the
    /// two sides' keys, skipping the keys the batch deletes.
    fn settle(&mut self) {
        self.at = At::Invalid;
        self.error = None;
        if self.fatal.is_some() {
            return;
        }
        loop {
            if !self.base.valid() && self.base.status().is_err() {
                return;
            }
            let base_key = Some(self.base.key()).filter(|k| self.base.valid() && self.in_view(k));
            let delta_key = self.delta.key().filter(|k| self.in_view(k));
            let nearer = match (base_key, delta_key) {
                (None, None) => return,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(b), Some(d)) if self.forward => self.cmp.compare(b, d),
                (Some(b), Some(d)) => self.cmp.compare(d, b),
            };
            if nearer == Ordering::Less {
                self.at = At::Base;
                return;
            }
            let both = nearer == Ordering::Equal;
            let (Some(key), Some(updates)) = (delta_key, self.delta.updates()) else { return };
            let state = KeyState::of(self.data, updates);
            let base_value = if both { Some(self.base.value()) } else { None };
            match state.resolve(key, self.merge_operator.as_deref(), base_value) {
                Err(e) => {
                    self.error = Some(e);
                    return;
                }
                Ok(Some(v)) => {
                    self.value = v;
                    self.at = if both { At::Both } else { At::Delta };
                    return;
                }
                // Deleted by the batch: on to the next key.
                Ok(None) => {
                    if self.forward {
                        self.delta.next();
                        if both {
                            self.base.next();
                        }
                    } else {
                        self.delta.prev();
                        if both {
                            self.base.prev();
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(b: &WriteBatchWithIndex, cf: u32) -> Vec<String> {
        b.entries(cf).map(|op| format!("{op:?}")).collect()
    }

    #[test]
    fn wbwi_index_rebuilt_from_the_batch_is_the_index_built_write_by_write() {
        for overwrite in [false, true] {
            let mut b = WriteBatchWithIndex::with_order(UserComparator::BYTEWISE, None, overwrite);
            b.put(b"b", b"1");
            b.merge(b"a", b"x");
            b.put(b"b", b"2");
            b.delete(b"a");
            b.merge(b"a", b"y");
            b.single_delete(b"c");
            b.batch.put_in(7, b"k", b"v");
            b.index_last(
                7,
                Some(&crate::comparator::UserComparator::new(&crate::comparator::reverse_bytewise())),
                b"k",
                UpdateKind::Put,
                1,
            );
            b.batch.put_in(7, b"z", b"v");
            b.index_last(7, None, b"z", UpdateKind::Put, 1);
            let (default, family) = (ops(&b, 0), ops(&b, 7));
            b.rebuild_index().unwrap();
            assert_eq!(ops(&b, 0), default, "overwrite_key={overwrite}");
            assert_eq!(ops(&b, 7), family, "overwrite_key={overwrite}");
            // Family 7 keeps the order of its first write: reverse.
            assert_eq!(family.len(), 2);
            assert!(family[0].contains("122") && family[1].contains("107"), "{family:?}");
            assert_eq!(default.len(), if overwrite { 4 } else { 6 }, "{default:?}");
        }
    }

    #[test]
    fn wbwi_key_state_takes_the_newest_put_or_deletion_and_the_operands_after_it() {
        let mut b = WriteBatchWithIndex::new(false);
        b.merge(b"k", b"1");
        b.put(b"k", b"p");
        b.merge(b"k", b"2");
        b.merge(b"k", b"3");
        let Some(updates) = b.updates(0, b"k") else { panic!("indexed") };
        let state = KeyState::of(b.batch.data(), updates);
        assert!(matches!(state.under, Under::Put(b"p")));
        assert_eq!(state.operands, [&b"2"[..], &b"3"[..]]);
        let op = crate::merge_operator::from_name("stringappend").unwrap();
        assert_eq!(state.value(b"k", Some(op.as_ref()), Some(b"ignored")).unwrap(), Some(b"p,2,3".to_vec()));
        b.single_delete(b"k");
        let Some(updates) = b.updates(0, b"k") else { panic!("indexed") };
        let state = KeyState::of(b.batch.data(), updates);
        assert!(matches!(state.under, Under::Deleted) && state.operands.is_empty());
        assert_eq!(state.value(b"k", None, Some(b"ignored")).unwrap(), None);
    }
}
