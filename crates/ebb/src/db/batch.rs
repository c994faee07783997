//! `WriteBatch`: a group of updates applied atomically.
//!
//! Representation (RocksDB's, see docs/format.md "Write batch"): a 12-byte
//! header — fixed64 sequence number, fixed32 count — then one record per
//! update: a tag byte, for a family other than the default its varint32
//! column family id, a length-prefixed key and, for a put, a length-prefixed
//! value. The same bytes are the WAL record payload, so a batch touching
//! several column families is one WAL record and recovers all or nothing.

use crate::error::{Error, Result};
use crate::key::{SequenceNumber, ValueKind, MAX_SEQUENCE};
use crate::options::{MAX_KEY_SIZE, MAX_VALUE_SIZE};
use crate::util::coding::{decode_fixed32, decode_fixed64, put_length_prefixed, put_varint32, Decoder};

use super::ColumnFamilyHandle;

/// Bytes of the batch header: sequence number and count.
pub(crate) const HEADER_LEN: usize = 12;

/// The record a memtable switch appends to the WAL it closes: a batch header
/// with sequence 0 (no batch has it) and no updates. Recovery knows from it
/// that a closed WAL is whole (db/wal_seal.rs). DO NOT CHANGE: on-disk format.
pub(crate) const END_OF_LOG: [u8; HEADER_LEN] = [0; HEADER_LEN];

// DO NOT CHANGE: on-disk format (RocksDB's kTypeColumnFamilyDeletion and
// kTypeColumnFamilyValue). Records of the default family use the plain
// `ValueKind` tags, so batches without column families are as before.
const TAG_CF_DELETION: u8 = 0x04;
const TAG_CF_VALUE: u8 = 0x05;
// RocksDB's kTypeColumnFamilySingleDeletion.
const TAG_CF_SINGLE_DELETION: u8 = 0x08;
// RocksDB's kTypeColumnFamilyMerge.
const TAG_CF_MERGE: u8 = 0x06;
// RocksDB's kTypeColumnFamilyRangeDeletion.
const TAG_CF_RANGE_DELETION: u8 = 0x0E;
// RocksDB's kTypeColumnFamilyWideColumnEntity (the default family's tag is
// `ValueKind::WideColumnEntity`, 0x16).
const TAG_CF_ENTITY: u8 = 0x17;
// Two-phase commit markers, RocksDB's kTypeBeginPrepareXID,
// kTypeEndPrepareXID (with the transaction's name), kTypeCommitXID and
// kTypeRollbackXID. They are not updates: the count leaves them out.
const TAG_BEGIN_PREPARE: u8 = 0x09;
const TAG_END_PREPARE: u8 = 0x0A;
const TAG_COMMIT: u8 = 0x0B;
const TAG_ROLLBACK: u8 = 0x0C;

/// A two-phase commit step a batch records (docs/format.md, "Write
/// batch"): a prepared transaction's section, its updates written to the WAL
/// but not applied until a commit names it; the commit of a prepared
/// transaction, whose updates come before its marker and are applied as any
/// batch's; or the rollback of one. A write group's record may hold several,
/// among plain updates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TwoPhase {
    /// `BeginPrepare`, the updates, `EndPrepare(name)`: `record` is the
    /// section as a batch of its own (what a prepare written alone would
    /// have logged), which is kept and logged again while it is prepared.
    Prepare { name: Vec<u8>, record: Vec<u8> },
    /// `Commit(name)`, after the commit's updates.
    Commit(Vec<u8>),
    /// `Rollback(name)`.
    Rollback(Vec<u8>),
}

/// What a batch holds for two-phase commit ([`WriteBatch::two_phase`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct TwoPhaseSteps {
    /// The steps in the batch's order.
    pub(crate) steps: Vec<TwoPhase>,
    /// Updates outside prepared sections: those applied, each taking a
    /// sequence number ([`WriteBatch::applied_cf`]).
    pub(crate) applied: usize,
}

/// An atomic group of puts and deletes.
#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    /// Some record is of a family other than the default (saves the write
    /// path a pass over the records of default-only batches).
    other_families: bool,
    /// Some record is a merge or a range deletion: checked against its
    /// family (an operator; a range in the family's order) when written.
    family_checks: bool,
    /// The batch carries two-phase commit markers ([`TwoPhase`]).
    markers: bool,
    /// Whether its updates suit their families' timestamps.
    timestamps: TimestampChecks,
}

/// What a batch built through its calls knows of timestamps
/// (docs/timestamps.md), checked when it is written: an update of a family
/// with timestamps must come with one (the `*_with_ts` calls), and an
/// update of a family without them must not. A batch decoded from bytes
/// carries its keys as they are. Not part of the batch's contents: two
/// batches of the same records are equal whatever it says.
#[derive(Clone, Default)]
struct TimestampChecks {
    /// The first update added against its family's timestamps.
    refused: Option<String>,
    /// Some update of the default family was added without a handle and
    /// without a timestamp (checked against the family when written).
    default_plain: bool,
}

impl PartialEq for TimestampChecks {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for TimestampChecks {}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch").field("count", &self.len()).field("bytes", &self.rep.len()).finish()
    }
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

/// One update decoded from a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Set `key` to `value`.
    Put {
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// Remove `key`.
    Delete {
        /// The key.
        key: &'a [u8],
    },
    /// Remove `key`, written by one put since its last single delete
    /// ([`WriteBatch::single_delete`]).
    SingleDelete {
        /// The key.
        key: &'a [u8],
    },
    /// Remove every key in `[begin, end)` ([`WriteBatch::delete_range`]).
    DeleteRange {
        /// The first key removed.
        begin: &'a [u8],
        /// The first key not removed.
        end: &'a [u8],
    },
    /// Apply the operand `value` to `key`'s value with the column family's
    /// merge operator ([`WriteBatch::merge`]).
    Merge {
        /// The key.
        key: &'a [u8],
        /// The operand.
        value: &'a [u8],
    },
    /// Set `key` to a wide-column entity ([`WriteBatch::put_entity`]).
    PutEntity {
        /// The key.
        key: &'a [u8],
        /// The columns, serialized ([`crate::wide_columns`]; decoded by
        /// [`crate::wide_columns::decode_entity`]).
        entity: &'a [u8],
    },
}

impl<'a> BatchOp<'a> {
    /// The memtable entry this update is: its kind, key and value (empty
    /// for a deletion).
    pub(crate) fn entry(self) -> (crate::key::ValueKind, &'a [u8], &'a [u8]) {
        match self {
            BatchOp::Put { key, value } => (crate::key::ValueKind::Value, key, value),
            BatchOp::Delete { key } => (crate::key::ValueKind::Deletion, key, &[]),
            BatchOp::SingleDelete { key } => (crate::key::ValueKind::SingleDeletion, key, &[]),
            BatchOp::Merge { key, value } => (crate::key::ValueKind::Merge, key, value),
            BatchOp::DeleteRange { begin, end } => (crate::key::ValueKind::RangeDeletion, begin, end),
            BatchOp::PutEntity { key, entity } => (crate::key::ValueKind::WideColumnEntity, key, entity),
        }
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0; HEADER_LEN],
            other_families: false,
            family_checks: false,
            markers: false,
            timestamps: TimestampChecks::default(),
        }
    }

    /// An empty batch with room for `bytes` of records, so filling it does
    /// not reallocate (RocksDB `WriteBatch(reserved_bytes)`).
    pub fn with_capacity(bytes: usize) -> Self {
        let mut rep = Vec::with_capacity(HEADER_LEN + bytes);
        rep.resize(HEADER_LEN, 0);
        WriteBatch {
            rep,
            other_families: false,
            family_checks: false,
            markers: false,
            timestamps: TimestampChecks::default(),
        }
    }

    /// Room for one put or delete of `key` and `value` in family `cf`: tag,
    /// family id, two lengths, the bytes.
    pub(crate) fn one_record(cf: u32, key: &[u8], value: &[u8]) -> Self {
        let varint = crate::util::coding::varint_length;
        let family = if cf == 0 { 0 } else { varint(u64::from(cf)) };
        WriteBatch::with_capacity(
            1 + family + varint(key.len() as u64) + key.len() + varint(value.len() as u64) + value.len(),
        )
    }

    /// Adds a put to the default column family. Sizes are checked when the
    /// batch is written.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.timestamps.default_plain = true;
        self.put_in(0, key, value);
    }

    /// Adds a delete in the default column family.
    pub fn delete(&mut self, key: &[u8]) {
        self.timestamps.default_plain = true;
        self.delete_in(0, key);
    }

    /// Adds a single delete in the default column family (RocksDB
    /// `SingleDelete`): removes `key`, which must have been written by one
    /// put since its last single delete, and never deleted with `delete`;
    /// otherwise the result is undefined, as in RocksDB. When it meets that
    /// put in a flush or compaction, both are dropped (docs/data_model.md).
    pub fn single_delete(&mut self, key: &[u8]) {
        self.timestamps.default_plain = true;
        self.single_delete_in(0, key);
    }

    /// Adds a single delete in the column family `cf`.
    pub fn single_delete_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8]) {
        self.check_plain(cf);
        self.single_delete_in(cf.id(), key);
    }

    /// Adds a range deletion to the default column family (RocksDB
    /// `WriteBatch::DeleteRange`): removes every key from `begin`
    /// (included) to `end` (excluded). Writing the batch fails, writing
    /// nothing, if `begin` comes after `end`; an empty range removes nothing.
    pub fn delete_range(&mut self, begin: &[u8], end: &[u8]) {
        self.timestamps.default_plain = true;
        self.delete_range_in(0, begin, end);
    }

    /// Adds a range deletion to the column family `cf`.
    pub fn delete_range_cf(&mut self, cf: &ColumnFamilyHandle, begin: &[u8], end: &[u8]) {
        self.check_plain(cf);
        self.delete_range_in(cf.id(), begin, end);
    }

    pub(crate) fn delete_range_in(&mut self, cf: u32, begin: &[u8], end: &[u8]) {
        self.push_tag(cf, ValueKind::RangeDeletion as u8, TAG_CF_RANGE_DELETION);
        put_length_prefixed(&mut self.rep, begin);
        put_length_prefixed(&mut self.rep, end);
        self.bump_count();
        self.family_checks = true;
    }

    /// Adds a merge operand to the default column family (RocksDB
    /// `WriteBatch::Merge`): `value` is applied to the key's value by the
    /// family's merge operator. Writing the batch fails if the family has
    /// no merge operator.
    pub fn merge(&mut self, key: &[u8], value: &[u8]) {
        self.timestamps.default_plain = true;
        self.merge_in(0, key, value);
    }

    /// Adds a merge operand to the column family `cf`.
    pub fn merge_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8]) {
        self.check_plain(cf);
        self.merge_in(cf.id(), key, value);
    }

    /// Adds a put to the column family `cf` (RocksDB `WriteBatch::Put(cf, ..)`).
    /// Writing the batch fails if the family was dropped by then.
    pub fn put_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8]) {
        self.check_plain(cf);
        self.put_in(cf.id(), key, value);
    }

    /// Adds a delete in the column family `cf`.
    pub fn delete_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8]) {
        self.check_plain(cf);
        self.delete_in(cf.id(), key);
    }

    /// Adds a put of a wide-column entity to the default column family
    /// (RocksDB `WriteBatch::PutEntity`): `key` holds `columns`, given in any
    /// order, the one named `""` being its plain value (docs/data_model.md,
    /// "Wide columns"). A column named twice is refused here, adding
    /// nothing.
    pub fn put_entity(&mut self, key: &[u8], columns: &[(&[u8], &[u8])]) -> Result<()> {
        self.timestamps.default_plain = true;
        self.put_entity_in(0, key, columns)
    }

    /// Adds a put of a wide-column entity to the column family `cf`.
    pub fn put_entity_cf(&mut self, cf: &ColumnFamilyHandle, key: &[u8], columns: &[(&[u8], &[u8])]) -> Result<()> {
        self.check_plain(cf);
        self.put_entity_in(cf.id(), key, columns)
    }

    pub(crate) fn put_entity_in(&mut self, cf: u32, key: &[u8], columns: &[(&[u8], &[u8])]) -> Result<()> {
        let entity = crate::wide_columns::encode(columns)?;
        self.put_entity_raw_in(cf, key, &entity);
        Ok(())
    }

    /// Adds a put of an entity already serialized (as a batch read back
    /// holds it; checked when the batch is written).
    pub(crate) fn put_entity_raw_in(&mut self, cf: u32, key: &[u8], entity: &[u8]) {
        self.push_tag(cf, ValueKind::WideColumnEntity as u8, TAG_CF_ENTITY);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, entity);
        self.bump_count();
    }

    /// Adds a put of `key` at timestamp `ts` to column family `cf`, whose
    /// comparator has timestamps (RocksDB `WriteBatch::Put(cf, key, ts,
    /// value)`, docs/timestamps.md). Writing the batch fails if `cf` has
    /// none.
    pub fn put_with_ts(&mut self, cf: &ColumnFamilyHandle, key: &[u8], ts: u64, value: &[u8]) {
        self.check_stamped(cf);
        self.put_in(cf.id(), &crate::comparator::with_timestamp(key, ts), value);
    }

    /// Adds a delete of `key` at timestamp `ts` in column family `cf`
    /// (RocksDB `WriteBatch::Delete(cf, key, ts)`): reads at `ts` or later
    /// do not see the key's older versions.
    pub fn delete_with_ts(&mut self, cf: &ColumnFamilyHandle, key: &[u8], ts: u64) {
        self.check_stamped(cf);
        self.delete_in(cf.id(), &crate::comparator::with_timestamp(key, ts));
    }

    /// Adds a single delete of `key` at timestamp `ts` in column family
    /// `cf` (RocksDB `WriteBatch::SingleDelete(cf, key, ts)`).
    pub fn single_delete_with_ts(&mut self, cf: &ColumnFamilyHandle, key: &[u8], ts: u64) {
        self.check_stamped(cf);
        self.single_delete_in(cf.id(), &crate::comparator::with_timestamp(key, ts));
    }

    /// Adds a merge operand for `key` at timestamp `ts` in column family
    /// `cf` (RocksDB `WriteBatch::Merge(cf, key, ts, value)`).
    pub fn merge_with_ts(&mut self, cf: &ColumnFamilyHandle, key: &[u8], ts: u64, value: &[u8]) {
        self.check_stamped(cf);
        self.merge_in(cf.id(), &crate::comparator::with_timestamp(key, ts), value);
    }

    /// Notes an update without a timestamp of `cf`: refused when written if
    /// the family has timestamps.
    fn check_plain(&mut self, cf: &ColumnFamilyHandle) {
        if cf.data.cmp.timestamp_size() > 0 && self.timestamps.refused.is_none() {
            self.timestamps.refused = Some(format!(
                "column family '{}' has timestamps ({}): write it with the *_with_ts calls",
                cf.name(),
                cf.data.cmp.name()
            ));
        }
    }

    /// Notes an update with a timestamp of `cf`: refused when written if
    /// the family has none.
    fn check_stamped(&mut self, cf: &ColumnFamilyHandle) {
        if cf.data.cmp.timestamp_size() == 0 && self.timestamps.refused.is_none() {
            self.timestamps.refused = Some(format!(
                "a write with a timestamp to column family '{}', which has no timestamps (its comparator is {})",
                cf.name(),
                cf.data.cmp.name()
            ));
        }
    }

    /// Whether the batch's updates suit their families' timestamps
    /// (`default_cf`: the default family's); `InvalidArgument` naming the
    /// first that does not.
    pub(crate) fn check_timestamps(&self, default_cf: &super::column_family::ColumnFamilyData) -> Result<()> {
        if let Some(why) = &self.timestamps.refused {
            return Err(Error::invalid(why.clone()));
        }
        if self.timestamps.default_plain && default_cf.cmp.timestamp_size() > 0 {
            return Err(Error::invalid(format!(
                "the default column family has timestamps ({}): write it with the *_with_ts calls",
                default_cf.cmp.name()
            )));
        }
        Ok(())
    }

    pub(crate) fn put_in(&mut self, cf: u32, key: &[u8], value: &[u8]) {
        self.push_tag(cf, ValueKind::Value as u8, TAG_CF_VALUE);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, value);
        self.bump_count();
    }

    pub(crate) fn merge_in(&mut self, cf: u32, key: &[u8], value: &[u8]) {
        self.push_tag(cf, ValueKind::Merge as u8, TAG_CF_MERGE);
        put_length_prefixed(&mut self.rep, key);
        put_length_prefixed(&mut self.rep, value);
        self.bump_count();
        self.family_checks = true;
    }

    /// True when some update is a merge or a range deletion (checked
    /// against its family when the batch is written).
    pub(crate) fn needs_family_checks(&self) -> bool {
        self.family_checks
    }

    pub(crate) fn delete_in(&mut self, cf: u32, key: &[u8]) {
        self.push_tag(cf, ValueKind::Deletion as u8, TAG_CF_DELETION);
        put_length_prefixed(&mut self.rep, key);
        self.bump_count();
    }

    pub(crate) fn single_delete_in(&mut self, cf: u32, key: &[u8]) {
        self.push_tag(cf, ValueKind::SingleDeletion as u8, TAG_CF_SINGLE_DELETION);
        put_length_prefixed(&mut self.rep, key);
        self.bump_count();
    }

    fn push_tag(&mut self, cf: u32, default_tag: u8, cf_tag: u8) {
        if cf == 0 {
            self.rep.push(default_tag);
        } else {
            self.rep.push(cf_tag);
            put_varint32(&mut self.rep, cf);
            self.other_families = true;
        }
    }

    /// Number of updates.
    pub fn len(&self) -> usize {
        decode_fixed32(&self.rep[8..]).unwrap_or(0) as usize
    }

    /// True when the batch holds no update.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every update.
    pub fn clear(&mut self) {
        self.other_families = false;
        self.family_checks = false;
        self.markers = false;
        self.timestamps = TimestampChecks::default();
        self.rep.clear();
        self.rep.resize(HEADER_LEN, 0);
    }

    /// Size of the encoded batch in bytes.
    pub fn size_in_bytes(&self) -> usize {
        self.rep.len()
    }

    /// The updates in order, of every column family.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter { inner: self.records() }
    }

    /// The updates in order, each with its column family id.
    pub(crate) fn has_other_families(&self) -> bool {
        self.other_families
    }

    /// The updates in order, each with its column family id (0 for the
    /// default family); an error string on a malformed record, then the end.
    pub fn iter_cf(&self) -> impl Iterator<Item = std::result::Result<(u32, BatchOp<'_>), String>> + '_ {
        self.records()
    }

    /// The records in order, each with its column family id; the
    /// iterator tells each record's offset ([`CfBatchIter::offset`]).
    pub(crate) fn records(&self) -> CfBatchIter<'_> {
        CfBatchIter {
            d: Decoder::new(&self.rep[HEADER_LEN..]),
            remaining: self.len(),
            failed: false,
            skip_prepared: false,
            in_prepare: false,
        }
    }

    /// The updates a write of the batch applies, in order, each with its
    /// column family id: all but those inside prepared sections
    /// ([`TwoPhase::Prepare`]), which wait for their commit. The i-th takes
    /// the batch's sequence number plus i.
    pub fn applied_cf(&self) -> impl Iterator<Item = std::result::Result<(u32, BatchOp<'_>), String>> + '_ {
        CfBatchIter { skip_prepared: true, ..self.records() }
    }

    /// The column family ids the batch writes to, ascending, without repeats.
    pub(crate) fn column_families(&self) -> Vec<u32> {
        if !self.other_families {
            return if self.is_empty() { Vec::new() } else { vec![0] };
        }
        let mut ids: Vec<u32> = self.iter_cf().filter_map(|r| r.ok().map(|(cf, _)| cf)).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Marks the batch as a prepared transaction's, named `name`
    /// ([`TwoPhase::Prepare`]). A batch already marked is refused.
    pub(crate) fn mark_prepare(&mut self, name: &[u8]) -> Result<()> {
        self.refuse_marked()?;
        self.rep.insert(HEADER_LEN, TAG_BEGIN_PREPARE);
        self.rep.push(TAG_END_PREPARE);
        put_length_prefixed(&mut self.rep, name);
        self.markers = true;
        Ok(())
    }

    /// Marks the batch as the commit of the prepared transaction `name`
    /// ([`TwoPhase::Commit`]).
    pub(crate) fn mark_commit(&mut self, name: &[u8]) -> Result<()> {
        self.refuse_marked()?;
        self.rep.push(TAG_COMMIT);
        put_length_prefixed(&mut self.rep, name);
        self.markers = true;
        Ok(())
    }

    /// The rollback of the prepared transaction `name` ([`TwoPhase::Rollback`]).
    pub(crate) fn rollback_marker(name: &[u8]) -> WriteBatch {
        let mut b = WriteBatch::new();
        b.rep.push(TAG_ROLLBACK);
        put_length_prefixed(&mut b.rep, name);
        b.markers = true;
        b
    }

    fn refuse_marked(&self) -> Result<()> {
        if self.markers {
            return Err(Error::invalid("the write batch is already marked for two-phase commit"));
        }
        Ok(())
    }

    /// The batch's two-phase commit steps in order, and how many of its
    /// updates are applied (all of them when it carries no marker).
    pub(crate) fn two_phase(&self) -> TwoPhaseSteps {
        if !self.markers {
            return TwoPhaseSteps { steps: Vec::new(), applied: self.len() };
        }
        let mut out = TwoPhaseSteps::default();
        let mut it = self.records();
        // The open prepared section: where its begin marker starts, and its
        // updates so far.
        let mut open: Option<(usize, u32)> = None;
        loop {
            let at = it.offset();
            let Some(step) = it.next_with_markers() else { break };
            // `from_data` checked the records and their order.
            let Ok(step) = step else { break };
            match (step, open.as_mut()) {
                (Step::Update(..), Some((_, n))) => *n += 1,
                (Step::Update(..), None) => out.applied += 1,
                (Step::Marker(Marker::BeginPrepare), _) => open = Some((at, 0)),
                (Step::Marker(Marker::EndPrepare(name)), Some(&mut (start, n))) => {
                    let mut record = Vec::with_capacity(HEADER_LEN + it.offset() - start);
                    record.extend_from_slice(&self.rep[..8]);
                    record.extend_from_slice(&n.to_le_bytes());
                    record.extend_from_slice(&self.rep[start..it.offset()]);
                    out.steps.push(TwoPhase::Prepare { name: name.to_vec(), record });
                    open = None;
                }
                (Step::Marker(Marker::EndPrepare(_)), None) => {}
                (Step::Marker(Marker::Commit(name)), _) => out.steps.push(TwoPhase::Commit(name.to_vec())),
                (Step::Marker(Marker::Rollback(name)), _) => out.steps.push(TwoPhase::Rollback(name.to_vec())),
            }
        }
        out
    }

    /// For a batch read from a WAL that two-phase commit wrote: its steps,
    /// each as what it is (`"prepare"`: logged, not applied until a commit
    /// names it; `"commit"`; `"rollback"`) and the transaction's name, in
    /// the record's order (docs/format.md, "Two-phase commit markers").
    ///
    /// A prepare comes with its section's updates as a batch of their own;
    /// a commit or a rollback with none.
    pub fn two_phase_markers(&self) -> Vec<(&'static str, Vec<u8>, Option<WriteBatch>)> {
        self.two_phase()
            .steps
            .into_iter()
            .map(|step| match step {
                TwoPhase::Prepare { name, record } => {
                    let section = WriteBatch { rep: record, markers: true, ..WriteBatch::new() };
                    ("prepare", name, Some(section))
                }
                TwoPhase::Commit(name) => ("commit", name, None),
                TwoPhase::Rollback(name) => ("rollback", name, None),
            })
            .collect()
    }

    /// True when the batch carries two-phase commit markers: it is written
    /// even with no update.
    pub(crate) fn has_markers(&self) -> bool {
        self.markers
    }

    /// Where the batch stands now, for [`WriteBatch::truncate_to`] (the
    /// savepoints of a `WriteBatchWithIndex`, txn/wbwi.rs).
    pub(crate) fn mark(&self) -> BatchMark {
        BatchMark {
            bytes: self.rep.len(),
            count: self.len(),
            other_families: self.other_families,
            family_checks: self.family_checks,
        }
    }

    /// Drops every update added since `mark` was taken (RocksDB's
    /// `WriteBatch::RollbackToSavePoint`). A mark past the batch's end (it
    /// was cleared since) changes nothing.
    pub(crate) fn truncate_to(&mut self, mark: BatchMark) {
        if mark.bytes < HEADER_LEN || mark.bytes > self.rep.len() {
            return;
        }
        self.rep.truncate(mark.bytes);
        self.rep[8..12].copy_from_slice(&(mark.count as u32).to_le_bytes());
        // Both only ever turn on between clears: as they were at the mark.
        self.other_families = mark.other_families;
        self.family_checks = mark.family_checks;
    }

    fn bump_count(&mut self) {
        let n = self.len() as u32 + 1;
        self.rep[8..12].copy_from_slice(&n.to_le_bytes());
    }

    pub(crate) fn set_sequence(&mut self, seq: SequenceNumber) {
        self.rep[..8].copy_from_slice(&seq.to_le_bytes());
    }

    /// The sequence number of the batch's first update (0 until written;
    /// in a batch read from a WAL, the one it was written at).
    pub fn sequence(&self) -> SequenceNumber {
        decode_fixed64(&self.rep).unwrap_or(0)
    }

    pub(crate) fn data(&self) -> &[u8] {
        &self.rep
    }

    /// Appends the records of `other`, its two-phase commit markers
    /// included (the group-commit leader merges batches).
    pub(crate) fn append(&mut self, other: &WriteBatch) {
        let n = (self.len() + other.len()) as u32;
        self.rep.extend_from_slice(&other.rep[HEADER_LEN..]);
        self.other_families |= other.other_families;
        self.family_checks |= other.family_checks;
        self.markers |= other.markers;
        if self.timestamps.refused.is_none() {
            self.timestamps.refused = other.timestamps.refused.clone();
        }
        self.timestamps.default_plain |= other.timestamps.default_plain;
        self.rep[8..12].copy_from_slice(&n.to_le_bytes());
    }

    /// Decodes a batch as the WAL stores it (docs/format.md, "Write
    /// batch"; RocksDB's `WriteBatch(rep)`), checking every record: a
    /// malformed one is `Corruption` naming `file` and `offset`.
    pub fn from_data(data: &[u8], file: &str, offset: u64) -> Result<WriteBatch> {
        if data.len() < HEADER_LEN {
            return Err(Error::corruption(file, offset, "write batch shorter than its header"));
        }
        let mut b = WriteBatch { rep: data.to_vec(), ..WriteBatch::new() };
        let mut seen = 0;
        let (mut other_families, mut family_checks, mut markers) = (false, false, Vec::new());
        let mut it = b.records();
        while let Some(step) = it.next_with_markers() {
            match step.map_err(|reason| Error::corruption(file, offset, reason))? {
                Step::Update(cf, op) => {
                    other_families |= cf != 0;
                    family_checks |= matches!(op, BatchOp::Merge { .. } | BatchOp::DeleteRange { .. });
                    seen += 1;
                }
                Step::Marker(m) => markers.push(m),
            }
        }
        check_markers(&markers).map_err(|reason| Error::corruption(file, offset, reason))?;
        let has_markers = !markers.is_empty();
        b.other_families = other_families;
        b.family_checks = family_checks;
        b.markers = has_markers;
        if seen != b.len() {
            return Err(Error::corruption(file, offset, "write batch count does not match its records"));
        }
        if b.sequence().saturating_add(b.len() as u64) > MAX_SEQUENCE {
            return Err(Error::corruption(
                file,
                offset,
                "write batch sequence numbers reach the largest one, kept for seeks",
            ));
        }
        Ok(b)
    }

    /// Checks key and value sizes against the documented limits.
    pub(crate) fn validate(&self) -> Result<()> {
        for op in self.iter() {
            let op = op.map_err(Error::invalid)?;
            let (key, value_len) = match op {
                BatchOp::Put { key, value } | BatchOp::Merge { key, value } => (key, value.len()),
                BatchOp::PutEntity { key, entity } => {
                    crate::wide_columns::decode(entity).map_err(|r| {
                        Error::invalid(format!("entity of key {:?}: {r}", String::from_utf8_lossy(key)))
                    })?;
                    (key, entity.len())
                }
                BatchOp::DeleteRange { begin, end } => {
                    if end.len() > MAX_KEY_SIZE {
                        return Err(Error::invalid(format!(
                            "key of {} bytes exceeds the limit of {MAX_KEY_SIZE}",
                            end.len()
                        )));
                    }
                    (begin, 0)
                }
                BatchOp::Delete { key } | BatchOp::SingleDelete { key } => (key, 0),
            };
            if key.len() > MAX_KEY_SIZE {
                return Err(Error::invalid(format!("key of {} bytes exceeds the limit of {MAX_KEY_SIZE}", key.len())));
            }
            if value_len > MAX_VALUE_SIZE {
                return Err(Error::invalid(format!(
                    "value of {value_len} bytes exceeds the limit of {MAX_VALUE_SIZE}"
                )));
            }
        }
        Ok(())
    }
}

/// Where a [`WriteBatch`] stood ([`WriteBatch::mark`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchMark {
    bytes: usize,
    count: usize,
    other_families: bool,
    family_checks: bool,
}

/// Iterator over the updates of a [`WriteBatch`]; yields an error string on a
/// malformed record and then stops.
pub struct BatchIter<'a> {
    inner: CfBatchIter<'a>,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = std::result::Result<BatchOp<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        self.inner.next().map(|r| r.map(|(_, op)| op))
    }
}

/// A two-phase commit marker as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Marker<'a> {
    BeginPrepare,
    EndPrepare(&'a [u8]),
    Commit(&'a [u8]),
    Rollback(&'a [u8]),
}

/// A record: an update, or a marker.
enum Step<'a> {
    Update(u32, BatchOp<'a>),
    Marker(Marker<'a>),
}

/// The markers of a batch (of a write group's record, which joins several)
/// are in the only order they are written in: each `BeginPrepare` closed by
/// an `EndPrepare` before any other marker, and `Commit` and `Rollback`
/// outside prepared sections.
fn check_markers(markers: &[Marker<'_>]) -> std::result::Result<(), String> {
    let mut in_prepare = false;
    for m in markers {
        in_prepare = match (m, in_prepare) {
            (Marker::BeginPrepare, false) => true,
            (Marker::EndPrepare(_), true) => false,
            (Marker::Commit(_) | Marker::Rollback(_), false) => false,
            _ => return Err("write batch has two-phase commit markers out of order".to_string()),
        };
    }
    if in_prepare {
        return Err("write batch has a prepared section without its end marker".to_string());
    }
    Ok(())
}

/// As [`BatchIter`], with each update's column family id.
pub(crate) struct CfBatchIter<'a> {
    d: Decoder<'a>,
    remaining: usize,
    failed: bool,
    /// Pass over the updates of prepared sections ([`WriteBatch::applied_cf`]).
    skip_prepared: bool,
    /// Inside a prepared section (between its markers).
    in_prepare: bool,
}

impl CfBatchIter<'_> {
    /// The offset in the batch's bytes ([`WriteBatch::data`]) where the
    /// next record starts (the batch's size after the last).
    pub(crate) fn offset(&self) -> usize {
        HEADER_LEN + self.d.position()
    }
}

impl<'a> Iterator for CfBatchIter<'a> {
    type Item = std::result::Result<(u32, BatchOp<'a>), String>;

    /// The next update; two-phase commit markers are passed over, and so
    /// are prepared sections' updates when the iterator skips them.
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.next_with_markers()? {
                Ok(Step::Update(_, _)) if self.skip_prepared && self.in_prepare => continue,
                Ok(Step::Update(cf, op)) => return Some(Ok((cf, op))),
                Ok(Step::Marker(Marker::BeginPrepare)) => self.in_prepare = true,
                Ok(Step::Marker(Marker::EndPrepare(_))) => self.in_prepare = false,
                Ok(Step::Marker(_)) => continue,
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

impl<'a> CfBatchIter<'a> {
    fn marker(&mut self) -> Option<std::result::Result<Marker<'a>, String>> {
        let tag = *self.d.remaining().first()?;
        if !matches!(tag, TAG_BEGIN_PREPARE | TAG_END_PREPARE | TAG_COMMIT | TAG_ROLLBACK) {
            return None;
        }
        self.d.u8();
        if tag == TAG_BEGIN_PREPARE {
            return Some(Ok(Marker::BeginPrepare));
        }
        let Some(name) = self.d.length_prefixed() else {
            return Some(Err("write batch two-phase commit marker truncated".into()));
        };
        Some(Ok(match tag {
            TAG_END_PREPARE => Marker::EndPrepare(name),
            TAG_COMMIT => Marker::Commit(name),
            _ => Marker::Rollback(name),
        }))
    }

    fn next_with_markers(&mut self) -> Option<std::result::Result<Step<'a>, String>> {
        if self.failed {
            return None;
        }
        match self.marker() {
            Some(Ok(m)) => return Some(Ok(Step::Marker(m))),
            Some(Err(e)) => {
                self.failed = true;
                return Some(Err(e));
            }
            None => {}
        }
        if self.remaining == 0 && self.d.is_empty() {
            return None;
        }
        if self.remaining == 0 {
            self.failed = true;
            return Some(Err("write batch has bytes after its last record".into()));
        }
        self.remaining -= 1;
        let op = (|| {
            let tag = self.d.u8().ok_or("write batch record truncated")?;
            let (cf, kind) = match tag {
                TAG_CF_VALUE
                | TAG_CF_DELETION
                | TAG_CF_SINGLE_DELETION
                | TAG_CF_MERGE
                | TAG_CF_RANGE_DELETION
                | TAG_CF_ENTITY => {
                    let cf = self.d.varint32().ok_or("write batch column family id truncated")?;
                    let kind = match tag {
                        TAG_CF_VALUE => ValueKind::Value,
                        TAG_CF_DELETION => ValueKind::Deletion,
                        TAG_CF_MERGE => ValueKind::Merge,
                        TAG_CF_RANGE_DELETION => ValueKind::RangeDeletion,
                        TAG_CF_ENTITY => ValueKind::WideColumnEntity,
                        _ => ValueKind::SingleDeletion,
                    };
                    (cf, kind)
                }
                // Only the kinds a user writes: a blob index (0x11) is
                // made by flushes and compactions, never taken from a WAL.
                _ => match ValueKind::from_u8(tag).filter(|k| *k != ValueKind::BlobIndex) {
                    Some(kind) => (0, kind),
                    None => return Err(format!("write batch record has unknown tag {tag}")),
                },
            };
            match kind {
                ValueKind::Value | ValueKind::BlobIndex => {
                    let key = self.d.length_prefixed().ok_or("write batch put key truncated")?;
                    let value = self.d.length_prefixed().ok_or("write batch put value truncated")?;
                    Ok((cf, BatchOp::Put { key, value }))
                }
                ValueKind::Deletion => {
                    let key = self.d.length_prefixed().ok_or("write batch delete key truncated")?;
                    Ok((cf, BatchOp::Delete { key }))
                }
                ValueKind::SingleDeletion => {
                    let key = self.d.length_prefixed().ok_or("write batch single delete key truncated")?;
                    Ok((cf, BatchOp::SingleDelete { key }))
                }
                ValueKind::RangeDeletion => {
                    let begin = self.d.length_prefixed().ok_or("write batch range deletion begin truncated")?;
                    let end = self.d.length_prefixed().ok_or("write batch range deletion end truncated")?;
                    Ok((cf, BatchOp::DeleteRange { begin, end }))
                }
                ValueKind::Merge => {
                    let key = self.d.length_prefixed().ok_or("write batch merge key truncated")?;
                    let value = self.d.length_prefixed().ok_or("write batch merge operand truncated")?;
                    Ok((cf, BatchOp::Merge { key, value }))
                }
                ValueKind::WideColumnEntity => {
                    let key = self.d.length_prefixed().ok_or("write batch entity key truncated")?;
                    let entity = self.d.length_prefixed().ok_or("write batch entity columns truncated")?;
                    Ok((cf, BatchOp::PutEntity { key, entity }))
                }
            }
        })();
        if op.is_err() {
            self.failed = true;
        }
        Some(op.map(|(cf, op)| Step::Update(cf, op)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_record_batches_are_sized_to_fit() {
        for (cf, key, value) in
            [(0u32, &b"k"[..], &b"v"[..]), (0, &[7u8; 200][..], &[1u8; 5000][..]), (300, b"key", b"")]
        {
            let mut b = WriteBatch::one_record(cf, key, value);
            let room = b.rep.capacity();
            b.put_in(cf, key, value);
            assert_eq!(b.rep.capacity(), room, "cf {cf}, {} + {} bytes: the put reallocated", key.len(), value.len());
            assert!(b.rep.len() <= room);
            let mut d = WriteBatch::one_record(cf, key, &[]);
            let room = d.rep.capacity();
            d.delete_in(cf, key);
            assert_eq!(d.rep.capacity(), room, "the delete reallocated");
        }
    }

    #[test]
    fn a_sequence_past_the_largest_is_corruption() {
        let mut b = WriteBatch::new();
        b.put(b"a", b"1");
        b.set_sequence(MAX_SEQUENCE);
        assert!(WriteBatch::from_data(b.data(), "wal", 0).unwrap_err().is_corruption());
        b.set_sequence(MAX_SEQUENCE - 1);
        assert!(WriteBatch::from_data(b.data(), "wal", 0).is_ok());
    }

    #[test]
    fn batch_round_trips_through_its_bytes() {
        let mut b = WriteBatch::new();
        b.put(b"a", b"1");
        b.delete(b"b");
        b.put(b"", b"");
        b.set_sequence(99);
        let back = WriteBatch::from_data(b.data(), "wal", 0).unwrap();
        assert_eq!(back.sequence(), 99);
        let ops: Vec<_> = back.iter().map(|o| o.unwrap()).collect();
        assert_eq!(
            ops,
            vec![
                BatchOp::Put { key: b"a", value: b"1" },
                BatchOp::Delete { key: b"b" },
                BatchOp::Put { key: b"", value: b"" }
            ]
        );
    }

    #[test]
    fn single_deletes_round_trip_with_rocksdb_tags() {
        let mut b = WriteBatch::new();
        b.single_delete(b"a");
        b.single_delete_in(7, b"b");
        b.put_in(7, b"c", b"3");
        let data = b.data();
        // RocksDB's kTypeSingleDeletion, then kTypeColumnFamilySingleDeletion.
        assert_eq!(&data[HEADER_LEN..HEADER_LEN + 3], &[0x07, 1, b'a']);
        assert_eq!(&data[HEADER_LEN + 3..HEADER_LEN + 7], &[0x08, 7, 1, b'b']);
        let back = WriteBatch::from_data(data, "wal", 0).unwrap();
        let ops: Vec<_> = back.iter_cf().map(|o| o.unwrap()).collect();
        assert_eq!(
            ops,
            vec![
                (0, BatchOp::SingleDelete { key: b"a" }),
                (7, BatchOp::SingleDelete { key: b"b" }),
                (7, BatchOp::Put { key: b"c", value: b"3" })
            ]
        );
        assert_eq!(BatchOp::SingleDelete { key: b"a" }.entry(), (ValueKind::SingleDeletion, &b"a"[..], &b""[..]));
        // A record cut inside its key is corruption, as for any record.
        assert!(WriteBatch::from_data(&data[..HEADER_LEN + 2], "wal", 0).unwrap_err().is_corruption());
    }

    #[test]
    fn damaged_batches_are_corruption() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value");
        let data = b.data().to_vec();
        for cut in 0..data.len() {
            assert!(WriteBatch::from_data(&data[..cut], "wal", 7).is_err(), "cut at {cut}");
        }
        let mut bad_tag = data.clone();
        bad_tag[HEADER_LEN] = 9;
        assert!(WriteBatch::from_data(&bad_tag, "wal", 7).unwrap_err().is_corruption());
        // The blob index kind is an entry kind, but never a batch record's.
        bad_tag[HEADER_LEN] = crate::key::ValueKind::BlobIndex as u8;
        assert!(WriteBatch::from_data(&bad_tag, "wal", 7).unwrap_err().is_corruption());
        let mut extra = data;
        extra.push(0);
        assert!(WriteBatch::from_data(&extra, "wal", 7).is_err());
    }

    #[test]
    fn column_family_records_round_trip_and_match_the_format_doc() {
        let mut b = WriteBatch::new();
        b.put_in(3, b"a", b"1");
        b.delete_in(200, b"b");
        b.put(b"c", b"2");
        b.set_sequence(7);
        let back = WriteBatch::from_data(b.data(), "wal", 0).unwrap();
        let ops: Vec<_> = back.iter_cf().map(|o| o.unwrap()).collect();
        assert_eq!(
            ops,
            vec![
                (3, BatchOp::Put { key: b"a", value: b"1" }),
                (200, BatchOp::Delete { key: b"b" }),
                (0, BatchOp::Put { key: b"c", value: b"2" })
            ]
        );
        assert_eq!(back.column_families(), vec![0, 3, 200]);
        // docs/format.md "Write batch", the column family example.
        let mut doc = WriteBatch::new();
        doc.put_in(3, b"a", b"1");
        doc.delete_in(200, b"b");
        doc.set_sequence(7);
        assert_eq!(
            doc.data(),
            &[7, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0x05, 0x03, 1, b'a', 1, b'1', 0x04, 0xc8, 0x01, 1, b'b']
        );
        let data = doc.data().to_vec();
        for cut in HEADER_LEN + 1..data.len() {
            assert!(WriteBatch::from_data(&data[..cut], "wal", 0).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn two_phase_markers_round_trip_and_leave_the_count_alone() {
        let mut p = WriteBatch::new();
        p.put(b"a", b"1");
        p.put_in(3, b"b", b"2");
        p.mark_prepare(b"xid").unwrap();
        assert_eq!(p.len(), 2);
        assert!(p.mark_commit(b"xid").is_err(), "one marking per batch");
        // RocksDB's tags: begin prepare right after the header, end prepare last.
        assert_eq!(p.data()[HEADER_LEN], 0x09);
        assert_eq!(&p.data()[p.data().len() - 5..], &[0x0A, 3, b'x', b'i', b'd']);
        let back = WriteBatch::from_data(p.data(), "wal", 0).unwrap();
        assert_eq!(
            back.two_phase(),
            TwoPhaseSteps {
                steps: vec![TwoPhase::Prepare { name: b"xid".to_vec(), record: p.data().to_vec() }],
                applied: 0
            }
        );
        assert_eq!(back.applied_cf().count(), 0, "a prepared section is not applied");
        let ops: Vec<_> = back.iter_cf().map(|o| o.unwrap()).collect();
        assert_eq!(
            ops,
            vec![(0, BatchOp::Put { key: b"a", value: b"1" }), (3, BatchOp::Put { key: b"b", value: b"2" })]
        );

        let mut c = WriteBatch::new();
        c.delete(b"a");
        c.mark_commit(b"xid").unwrap();
        let back = WriteBatch::from_data(c.data(), "wal", 0).unwrap();
        assert_eq!(back.two_phase(), TwoPhaseSteps { steps: vec![TwoPhase::Commit(b"xid".to_vec())], applied: 1 });
        assert_eq!(back.iter().count(), 1);

        let r = WriteBatch::rollback_marker(b"xid");
        assert!(r.is_empty() && r.has_markers());
        let back = WriteBatch::from_data(r.data(), "wal", 0).unwrap();
        assert_eq!(back.two_phase(), TwoPhaseSteps { steps: vec![TwoPhase::Rollback(b"xid".to_vec())], applied: 0 });

        let plain = WriteBatch::from_data(WriteBatch::new().data(), "wal", 0).unwrap();
        assert_eq!(plain.two_phase(), TwoPhaseSteps::default());
    }

    #[test]
    fn markers_out_of_order_or_cut_are_corruption() {
        let mut p = WriteBatch::new();
        p.put(b"a", b"1");
        p.mark_prepare(b"xid").unwrap();
        let data = p.data().to_vec();
        for cut in HEADER_LEN + 1..data.len() {
            assert!(WriteBatch::from_data(&data[..cut], "wal", 0).is_err(), "cut at {cut}");
        }
        // A begin prepare without its end.
        let mut begin_only = WriteBatch::new();
        begin_only.put(b"a", b"1");
        begin_only.rep.insert(HEADER_LEN, TAG_BEGIN_PREPARE);
        assert!(WriteBatch::from_data(begin_only.data(), "wal", 0).unwrap_err().is_corruption());
        // A rollback inside a prepared section.
        let mut inside = WriteBatch::new();
        inside.put(b"a", b"1");
        inside.rep.push(TAG_ROLLBACK);
        put_length_prefixed(&mut inside.rep, b"x");
        inside.mark_prepare(b"xid").unwrap();
        assert!(WriteBatch::from_data(inside.data(), "wal", 0).unwrap_err().is_corruption());
        // An end without its begin.
        let mut end_only = WriteBatch::new();
        end_only.put(b"a", b"1");
        end_only.rep.push(TAG_END_PREPARE);
        put_length_prefixed(&mut end_only.rep, b"x");
        assert!(WriteBatch::from_data(end_only.data(), "wal", 0).unwrap_err().is_corruption());
    }

    #[test]
    fn a_group_record_applies_all_but_its_prepared_sections() {
        // A write group's record: a plain batch, a prepare, a commit, a
        // rollback and another prepare, joined as a leader joins them.
        let mut plain = WriteBatch::new();
        plain.put(b"p", b"0");
        let mut prep1 = WriteBatch::new();
        prep1.put(b"a", b"1");
        prep1.put_in(3, b"b", b"2");
        prep1.mark_prepare(b"t1").unwrap();
        let mut commit = WriteBatch::new();
        commit.delete(b"c");
        commit.mark_commit(b"t0").unwrap();
        let rollback = WriteBatch::rollback_marker(b"t9");
        let mut prep2 = WriteBatch::new();
        prep2.merge(b"d", b"3");
        prep2.mark_prepare(b"t2").unwrap();
        let mut group = plain.clone();
        for b in [&prep1, &commit, &rollback, &prep2] {
            group.append(b);
        }
        group.set_sequence(100);
        assert_eq!(group.len(), 5, "every update counts in the header");
        let back = WriteBatch::from_data(group.data(), "wal", 0).unwrap();
        let applied: Vec<_> = back.applied_cf().map(|o| o.unwrap()).collect();
        assert_eq!(applied, vec![(0, BatchOp::Put { key: b"p", value: b"0" }), (0, BatchOp::Delete { key: b"c" })]);
        assert_eq!(back.iter_cf().count(), 5);
        let steps = back.two_phase();
        assert_eq!(steps.applied, 2);
        // Each prepared section comes back as the batch it was prepared as
        // (the sequence number is the record's).
        let alone = |b: &WriteBatch| {
            let mut b = b.clone();
            b.set_sequence(100);
            b.data().to_vec()
        };
        assert_eq!(
            steps.steps,
            vec![
                TwoPhase::Prepare { name: b"t1".to_vec(), record: alone(&prep1) },
                TwoPhase::Commit(b"t0".to_vec()),
                TwoPhase::Rollback(b"t9".to_vec()),
                TwoPhase::Prepare { name: b"t2".to_vec(), record: alone(&prep2) },
            ]
        );
        let markers: Vec<_> =
            back.two_phase_markers().into_iter().map(|(w, n, s)| (w, n, s.map(|s| s.len()))).collect();
        assert_eq!(
            markers,
            vec![
                ("prepare", b"t1".to_vec(), Some(2)),
                ("commit", b"t0".to_vec(), None),
                ("rollback", b"t9".to_vec(), None),
                ("prepare", b"t2".to_vec(), Some(1)),
            ]
        );
    }

    #[test]
    fn append_merges_counts() {
        let mut a = WriteBatch::new();
        a.put(b"x", b"1");
        let mut b = WriteBatch::new();
        b.delete(b"y");
        b.put(b"z", b"2");
        a.append(&b);
        assert_eq!(a.len(), 3);
        assert_eq!(a.iter().count(), 3);
        a.clear();
        assert!(a.is_empty());
    }

    #[test]
    fn truncating_to_a_mark_restores_the_batch() {
        let mut b = WriteBatch::new();
        b.put(b"a", b"1");
        let at_one = b.clone();
        let mark = b.mark();
        b.merge_in(3, b"m", b"x");
        b.delete_range(b"a", b"b");
        assert!(b.has_other_families() && b.needs_family_checks());
        b.truncate_to(mark);
        assert_eq!(b, at_one, "bytes, count and flags as at the mark");
        b.clear();
        b.truncate_to(mark);
        assert!(b.is_empty(), "a mark past a cleared batch's end changes nothing");
        let mut r = at_one.records();
        assert_eq!(r.offset(), HEADER_LEN);
        assert!(r.next().is_some());
        assert_eq!(r.offset(), at_one.size_in_bytes());
    }

    #[test]
    fn oversized_keys_are_refused() {
        let mut b = WriteBatch::new();
        b.put(&vec![0u8; MAX_KEY_SIZE + 1], b"v");
        let e = b.validate().unwrap_err().to_string();
        assert!(e.contains("key"), "{e}");
    }
}
