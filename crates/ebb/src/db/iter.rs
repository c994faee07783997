//! Iterators of the db layer: the per-level concatenating iterator and
//! [`DbIterator`], which turns internal entries into the user's view at a
//! snapshot (LevelDB `db/db_iter.cc`).
//!
//! Errors: both keep iterator contract 2 (an iterator in error is not
//! valid), so a damaged or unopenable table never lets the older entries it
//! shadows through. `DbIterator` leans on its inner [`MergingIterator`] being
//! invalid whenever its status is an error: every scan that stops at
//! `!iter.valid()` also stops at an error, and only the reverse scan, which
//! may hold an older version collected before the error, reads the status
//! itself. An internal key that does not parse is a corruption error of the
//! `DbIterator`, not the end of the data; so is a blob (the value of an
//! entry of kind `BlobIndex`, read from its blob file when the iterator
//! lands on it) that cannot be read back whole: the iterator stops there,
//! invalid, never moving on to an older version or another key.

use std::sync::Arc;

use super::column_family::ColumnFamilyData;
use super::{Db, DbInner, ReadOptions, SuperVersion};
use crate::blob::{BlobFetcher, BlobIndex};
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{make_internal_key, parse_internal_key, user_key, SequenceNumber, ValueKind, KIND_FOR_SEEK};
use crate::merge_operator::MergeOperator;
use crate::sst::table_reader::SeekPrefix;
use crate::sst::ReadSettings;
use crate::version::{LevelFiles, LevelIterator};

/// A bounded prefix mode: the extractor, and the state shared with the
/// table iterators when they may skip tables (not with `total_order_seek`).
pub(crate) type PrefixMode = (Arc<dyn crate::prefix::SliceTransform>, Option<Arc<SeekPrefix>>);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Forward,
    Reverse,
}

/// A cursor over the database as of one sequence number (a consistent view
/// taken when it was created). Keys and values it returns stay valid until the
/// next call that moves it.
///
/// Errors do not panic or yield wrong data: the iterator becomes invalid and
/// [`DbIterator::status`] reports the error (RocksDB's behaviour: a damaged
/// block never lets an older, shadowed value through). A later seek clears
/// the error only if every table and memtable iterator under it is then free
/// of error (a table iterator that met damage keeps its error).
pub struct DbIterator<'a> {
    _db: std::marker::PhantomData<&'a Db>,
    iter: MergingIterator,
    /// The order of the family's keys (bounds and keys compare in it).
    cmp: UserComparator,
    sequence: SequenceNumber,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    direction: Direction,
    valid: bool,
    saved_key: Vec<u8>,
    saved_value: Vec<u8>,
    /// Going forwards, the current entry's value read from its blob file
    /// (when `value_is_blob`); backwards, `saved_value` holds it.
    blob_value: Vec<u8>,
    value_is_blob: bool,
    /// Going forwards, the current entry is a merge result: its key is in
    /// `saved_key`, its value in `blob_value`, and the inner iterator is
    /// past the versions merged.
    merged: bool,
    /// The current entry is a wide-column entity, serialized in `entity`
    /// (checked when the iterator landed on it); its value (the default
    /// column) is in `blob_value` going forwards, in `saved_value` backwards.
    is_entity: bool,
    entity: Vec<u8>,
    /// Combines merge operands (the family's `merge_operator`).
    merge_operator: Option<Arc<dyn MergeOperator>>,
    /// Merge operands of the key being collected backwards, oldest first.
    operands: Vec<Vec<u8>>,
    /// The range tombstones of the memtables and tables the iterator reads,
    /// per source (empty: there are none).
    tombstones: Vec<Arc<crate::range_del::FragmentedTombstones>>,
    /// Bounded prefix seeks (`prefix_same_as_start` with a prefix
    /// extractor): the extractor, and (unless `total_order_seek`) the state
    /// shared with the table iterators, which skip tables lacking the
    /// prefix during such a seek.
    prefix_mode: Option<PrefixMode>,
    /// The prefix the last seek bounds the iterator to.
    bound_prefix: Option<Vec<u8>>,
    /// Where blobs are read from, and whether their checksums are verified.
    blobs: Option<(Arc<dyn BlobFetcher>, bool)>,
    /// Where seeks are counted (`rocksdb.number.db.seek`; the adaptive
    /// tuner weighs reads by it).
    stats: Option<Arc<crate::stats::Stats>>,
    /// An unparsable internal key or an unreadable blob met since the last seek.
    error: Option<Error>,
    /// In a family with timestamps (docs/timestamps.md), the read's
    /// timestamp: versions newer than it are not seen, and keys are shown
    /// (and compared, in `cmp`) without their timestamps.
    read_ts: Option<u64>,
    /// The timestamp of the current entry when it is not the inner
    /// iterator's (a merge result, or going backwards).
    saved_ts: u64,
    /// Keeps the memtables and version this view reads alive.
    _pin: Box<dyn std::any::Any + Send>,
}

/// An internal key parsed as an iterator of a family with timestamps sees
/// it (`read_ts` set): the user key without its timestamp, and whether the
/// timestamp is newer than the read's. Without `read_ts`, as it is. `None`
/// when it does not parse (or is too short to hold a timestamp).
#[inline]
fn parse_at(ikey: &[u8], read_ts: Option<u64>) -> Option<(crate::key::ParsedKey<'_>, bool)> {
    let mut p = parse_internal_key(ikey)?;
    match read_ts {
        None => Some((p, false)),
        Some(read_ts) => {
            if p.user_key.len() < crate::comparator::TIMESTAMP_SIZE {
                return None;
            }
            let (key, ts) = crate::comparator::split_timestamp(p.user_key);
            p.user_key = key;
            Some((p, ts > read_ts))
        }
    }
}

impl<'a> DbIterator<'a> {
    pub(crate) fn new(
        iter: MergingIterator,
        cmp: UserComparator,
        sequence: SequenceNumber,
        lower: Option<Vec<u8>>,
        upper: Option<Vec<u8>>,
        pin: Box<dyn std::any::Any + Send>,
    ) -> Self {
        DbIterator {
            _db: std::marker::PhantomData,
            iter,
            cmp,
            sequence,
            lower,
            upper,
            direction: Direction::Forward,
            valid: false,
            saved_key: Vec::new(),
            saved_value: Vec::new(),
            blob_value: Vec::new(),
            value_is_blob: false,
            merged: false,
            is_entity: false,
            entity: Vec::new(),
            merge_operator: None,
            operands: Vec::new(),
            tombstones: Vec::new(),
            prefix_mode: None,
            bound_prefix: None,
            blobs: None,
            stats: None,
            error: None,
            read_ts: None,
            saved_ts: 0,
            _pin: pin,
        }
    }

    fn count_seek(&self) {
        if let Some(stats) = &self.stats {
            stats.reads.record_seek();
        }
        crate::perf::count(|c| c.iter_seek_count += 1);
    }

    /// After a move: the bytes of the entry it stopped on, for the calling
    /// thread's `PerfContext` (`iter_read_bytes`).
    fn count_landing(&self) {
        if self.valid && crate::perf::counting() {
            let bytes = (self.key().len() + self.value().len()) as u64;
            crate::perf::count(|c| c.iter_read_bytes += bytes);
        }
    }

    /// True when positioned at an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current key. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        match self.direction {
            Direction::Forward if !self.merged => self.shown_key(self.iter.key()),
            _ => &self.saved_key,
        }
    }

    /// The current entry's timestamp, in a family with timestamps (RocksDB
    /// `Iterator::timestamp`); 0 elsewhere and when not `valid()`. For a
    /// merge result, its newest operand's.
    pub fn timestamp(&self) -> u64 {
        if !self.valid || self.read_ts.is_none() {
            return 0;
        }
        match self.direction {
            Direction::Forward if !self.merged => crate::comparator::split_timestamp(user_key(self.iter.key())).1,
            _ => self.saved_ts,
        }
    }

    /// The user key of internal key `ikey` as the iterator shows it:
    /// without its timestamp in a family with timestamps.
    #[inline]
    fn shown_key<'k>(&self, ikey: &'k [u8]) -> &'k [u8] {
        let key = user_key(ikey);
        match self.read_ts {
            Some(_) => crate::comparator::split_timestamp(key).0,
            None => key,
        }
    }

    /// The internal key of `key` (shown: without a timestamp) at timestamp
    /// `ts` (in a family with timestamps), `seq` and `kind`.
    fn target(&self, key: &[u8], ts: u64, seq: SequenceNumber, kind: ValueKind) -> Vec<u8> {
        match self.read_ts {
            Some(_) => make_internal_key(&crate::comparator::with_timestamp(key, ts), seq, kind),
            None => make_internal_key(key, seq, kind),
        }
    }

    /// The current value. Requires `valid()`.
    pub fn value(&self) -> &[u8] {
        if !self.valid {
            return &[];
        }
        match self.direction {
            Direction::Forward if self.value_is_blob || self.merged => &self.blob_value,
            Direction::Forward => self.iter.value(),
            Direction::Reverse => &self.saved_value,
        }
    }

    /// The current entry's columns (RocksDB `Iterator::columns`), by name
    /// ascending: an entity's, or for a plain value (and a merge result
    /// over one) one column named `""` holding [`Self::value`]. Empty when
    /// not `valid()`.
    pub fn columns(&self) -> Vec<crate::wide_columns::WideColumn> {
        if !self.valid {
            return Vec::new();
        }
        if self.is_entity {
            // Decoded once already, when the iterator landed here.
            return crate::wide_columns::columns(self.key(), &self.entity, "(db iterator)").unwrap_or_default();
        }
        vec![crate::wide_columns::WideColumn::new(crate::wide_columns::DEFAULT_COLUMN_NAME, self.value())]
    }

    /// The current entry's serialized entity, when it is one.
    pub(crate) fn entity(&self) -> Option<&[u8]> {
        (self.valid && self.is_entity).then_some(self.entity.as_slice())
    }

    /// The error that made the iterator invalid, if any.
    pub fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => self.iter.status(),
        }
    }

    /// Positions at the first key (at or after the lower bound). With a
    /// lower bound this is a seek to it (RocksDB's `DBIter::SeekToFirst`):
    /// in a bounded prefix mode the prefix is the bound's.
    pub fn seek_to_first(&mut self) {
        if let Some(lower) = self.lower.clone() {
            self.seek(&lower);
            return;
        }
        self.count_seek();
        self.error = None;
        self.bound_prefix = None;
        self.direction = Direction::Forward;
        self.iter.seek_to_first();
        self.find_next_user_entry(false);
        self.bound_to_current_prefix();
        self.count_landing();
    }

    /// In a bounded prefix mode, after `seek_to_first` or `seek_to_last`
    /// without a bound: bounds the iterator to the prefix of the key it
    /// landed on (RocksDB's `DBIter` with `prefix_same_as_start` does the
    /// same).
    fn bound_to_current_prefix(&mut self) {
        if self.valid {
            self.bound_prefix = self.prefix_of(self.key());
        }
    }

    /// In a bounded prefix mode, `key`'s prefix when it has one.
    fn prefix_of(&self, key: &[u8]) -> Option<Vec<u8>> {
        match &self.prefix_mode {
            Some((x, _)) if x.in_domain(key) => Some(x.transform(key).to_vec()),
            _ => None,
        }
    }

    /// Positions at the last key (before the upper bound). With an upper
    /// bound this is a seek for the last key before it (RocksDB's
    /// `DBIter::SeekToLast`, a `SeekForPrev` to the bound): in a bounded
    /// prefix mode the prefix is the bound's.
    pub fn seek_to_last(&mut self) {
        let upper = self.upper.clone();
        self.seek_before_upper(upper.as_deref());
        self.count_landing();
    }

    /// [`Self::seek_to_last`], bounded (in a bounded prefix mode) to the
    /// prefix of `prefix_of` when given, else to the upper bound's, else to
    /// the landing key's.
    fn seek_before_upper(&mut self, prefix_of: Option<&[u8]>) {
        match self.upper.clone() {
            Some(upper) => {
                let prefix = self.prefix_of(prefix_of.unwrap_or(&upper));
                self.seek_for_prev_in(&upper, prefix);
            }
            None => {
                self.count_seek();
                self.error = None;
                self.bound_prefix = None;
                self.direction = Direction::Reverse;
                self.iter.seek_to_last();
                self.find_prev_user_entry();
                self.bound_to_current_prefix();
            }
        }
    }

    /// Positions at the first key `>= target` (and at or after the lower
    /// bound). In a bounded prefix mode the prefix is `target`'s, the lower
    /// bound's only when `target` is the bound (RocksDB's `DBIter::Seek`).
    pub fn seek(&mut self, target: &[u8]) {
        let prefix = self.prefix_of(target);
        self.seek_in(target, prefix);
        self.count_landing();
    }

    /// [`Self::seek`], bounded (in a bounded prefix mode) to `prefix`.
    fn seek_in(&mut self, target: &[u8], prefix: Option<Vec<u8>>) {
        self.count_seek();
        self.error = None;
        self.direction = Direction::Forward;
        self.begin_prefix_seek(prefix);
        let from = match &self.lower {
            Some(l) if self.cmp.lt(target, l) => l.as_slice(),
            _ => target,
        };
        let target = self.target(from, self.read_ts.unwrap_or(0), self.sequence, KIND_FOR_SEEK);
        self.iter.seek(&target);
        self.end_prefix_seek();
        self.find_next_user_entry(false);
    }

    /// For a seek: bounds the iterator to `prefix` (a prefix of the
    /// bounded prefix mode; `None`, total order), and lets the tables skip
    /// by it during the seek.
    fn begin_prefix_seek(&mut self, prefix: Option<Vec<u8>>) {
        if let (Some(p), Some((_, Some(shared)))) = (&prefix, &self.prefix_mode) {
            shared.set(Some(p.clone()));
        }
        self.bound_prefix = prefix;
    }

    fn end_prefix_seek(&self) {
        if let Some((_, Some(shared))) = &self.prefix_mode {
            shared.set(None);
            let (checked, useful) = shared.take_counts();
            if let Some(stats) = &self.stats {
                stats.reads.record_prefix_checks(checked, useful);
            }
        }
    }

    /// True when `key` lies past the prefix the iterator is bounded to.
    fn out_of_prefix(&self, key: &[u8]) -> bool {
        match (&self.bound_prefix, &self.prefix_mode) {
            (Some(b), Some((x, _))) => !crate::prefix::has_prefix(x.as_ref(), key, b),
            _ => false,
        }
    }

    /// Positions at the last key `<= target` (and before the upper bound).
    /// In a bounded prefix mode the prefix is `target`'s (RocksDB's
    /// `DBIter::SeekForPrev`).
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        let prefix = self.prefix_of(target);
        self.seek_for_prev_in(target, prefix);
        self.count_landing();
    }

    /// [`Self::seek_for_prev`], bounded (in a bounded prefix mode) to
    /// `prefix`; a `target` at or past the upper bound is the last key
    /// before the bound.
    fn seek_for_prev_in(&mut self, target: &[u8], prefix: Option<Vec<u8>>) {
        let from = match &self.upper {
            Some(u) if !self.cmp.lt(target, u) => self.target(u, u64::MAX, crate::key::MAX_SEQUENCE, KIND_FOR_SEEK),
            _ => self.target(target, 0, 0, ValueKind::Deletion),
        };
        self.count_seek();
        self.error = None;
        self.direction = Direction::Reverse;
        self.begin_prefix_seek(prefix);
        self.iter.seek_for_prev(&from);
        self.end_prefix_seek();
        self.find_prev_user_entry();
    }

    /// For an iterator layered over this one (a write batch's
    /// `BaseDeltaIterator`, txn/wbwi.rs), which moves it to keys of its
    /// own choosing: [`Self::seek`] (`reverse` false) or
    /// [`Self::seek_for_prev`] (`reverse` true) to `target`, staying
    /// bounded to the prefix it is bounded to (or to none: total order)
    /// rather than taking `target`'s.
    pub(crate) fn reseek(&mut self, target: &[u8], reverse: bool) {
        let prefix = self.bound_prefix.clone();
        if reverse {
            self.seek_for_prev_in(target, prefix);
        } else {
            self.seek_in(target, prefix);
        }
    }

    /// For a layered iterator (see [`Self::reseek`]): bounds the iterator
    /// from here on to `prefix` (`None`: total order), as a seek in a
    /// bounded prefix mode would. Without a prefix extractor it stays
    /// unbounded.
    pub(crate) fn set_bound_prefix(&mut self, prefix: Option<Vec<u8>>) {
        self.bound_prefix = prefix.filter(|_| self.prefix_mode.is_some());
    }

    /// The read options' lower bound (inclusive).
    pub(crate) fn lower_bound(&self) -> Option<&[u8]> {
        self.lower.as_deref()
    }

    /// The read options' upper bound (exclusive).
    pub(crate) fn upper_bound(&self) -> Option<&[u8]> {
        self.upper.as_deref()
    }

    /// The order of the family's keys.
    pub(crate) fn comparator(&self) -> &UserComparator {
        &self.cmp
    }

    /// The family's merge operator.
    pub(crate) fn merge_operator(&self) -> Option<&Arc<dyn MergeOperator>> {
        self.merge_operator.as_ref()
    }

    /// The prefix extractor of a bounded prefix mode
    /// (`ReadOptions::prefix_same_as_start` with the family's extractor).
    pub(crate) fn prefix_extractor(&self) -> Option<&Arc<dyn crate::prefix::SliceTransform>> {
        self.prefix_mode.as_ref().map(|(x, _)| x)
    }

    /// Moves to the next key. Requires `valid()`.
    pub fn next(&mut self) {
        if !self.valid {
            return;
        }
        crate::perf::count(|c| c.iter_next_count += 1);
        self.next_in();
        self.count_landing();
    }

    fn next_in(&mut self) {
        if self.direction == Direction::Reverse {
            self.direction = Direction::Forward;
            // The inner iterator is before the entries of key() (in
            // `saved_key`); step into them and skip them with the usual
            // code below. Where it may not be just before them (it ran out,
            // or a bounded prefix seek left it outside the prefix, with
            // tables skipped), it seeks to them instead (RocksDB's
            // `DBIter::ReverseToForward`).
            if self.iter.valid() && self.bound_prefix.is_none() {
                self.iter.next();
            } else {
                self.reseek_to_saved_key(Direction::Forward);
            }
            if !self.iter.valid() {
                self.valid = false;
                self.saved_key.clear();
                return;
            }
        } else if self.merged {
            // The inner iterator is past the merged versions already; the
            // rest of the key's (older) versions are skipped below.
        } else {
            self.saved_key.clear();
            self.saved_key.extend_from_slice(self.shown_key(self.iter.key()));
            self.iter.next();
        }
        self.find_next_user_entry(true);
    }

    /// Moves to the previous key. Requires `valid()`.
    pub fn prev(&mut self) {
        if !self.valid {
            return;
        }
        crate::perf::count(|c| c.iter_prev_count += 1);
        self.prev_in();
        self.count_landing();
    }

    fn prev_in(&mut self) {
        if self.direction == Direction::Forward {
            // Step back before every entry of the current key: the inner
            // iterator's, or (a merge result) `saved_key`, the inner
            // iterator then past some of its versions or at the end.
            if !self.merged {
                self.saved_key.clear();
                self.saved_key.extend_from_slice(self.shown_key(self.iter.key()));
            } else if !self.iter.valid() || self.bound_prefix.is_some() {
                // Past the merged versions the inner iterator may have run
                // out, or stand past the prefix with tables skipped: seek
                // back to just before the key (RocksDB's
                // `DBIter::ReverseToBackward`).
                self.reseek_to_saved_key(Direction::Reverse);
            }
            while self.iter.valid() && !self.cmp.lt(self.shown_key(self.iter.key()), &self.saved_key) {
                self.iter.prev();
            }
            if !self.iter.valid() {
                self.valid = false;
                self.saved_key.clear();
                self.saved_value.clear();
                return;
            }
            self.direction = Direction::Reverse;
        }
        self.find_prev_user_entry();
    }

    /// For a change of direction at the current key (in `saved_key`):
    /// positions the inner iterator at the key's first entry (forwards) or
    /// at the last entry before the key (backwards). In a bounded prefix
    /// mode the tables lacking the prefix are skipped again (the key is of
    /// the prefix, and the iterator stops where the prefix ends).
    fn reseek_to_saved_key(&mut self, direction: Direction) {
        let target = self.target(&self.saved_key, u64::MAX, crate::key::MAX_SEQUENCE, KIND_FOR_SEEK);
        if let (Some(prefix), Some((_, Some(shared)))) = (&self.bound_prefix, &self.prefix_mode) {
            shared.set(Some(prefix.clone()));
        }
        match direction {
            Direction::Forward => self.iter.seek(&target),
            Direction::Reverse => self.iter.seek_for_prev(&target),
        }
        self.end_prefix_seek();
    }

    /// Forward scan from the inner position to the next visible user entry.
    /// With `skipping`, entries of keys `<= saved_key` are hidden.
    fn find_next_user_entry(&mut self, mut skipping: bool) {
        self.merged = false;
        self.is_entity = false;
        while self.iter.valid() {
            let Some((p, newer_ts)) = parse_at(self.iter.key(), self.read_ts) else {
                self.fail_unparsable();
                return;
            };
            if self.out_of_prefix(p.user_key) {
                break;
            }
            let recent = p.seq > self.sequence || newer_ts;
            if !recent {
                match self.kind_seen(&p) {
                    ValueKind::Deletion | ValueKind::SingleDeletion | ValueKind::RangeDeletion => {
                        crate::perf::count(|c| c.internal_delete_skipped_count += 1);
                        // Keys up to `saved_key` stay hidden: after a
                        // reverse scan skipped older sources past deleted
                        // keys, a step forwards meets those again, below
                        // the key it steps from.
                        if !(skipping && self.cmp.le(p.user_key, &self.saved_key)) {
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(p.user_key);
                        }
                        skipping = true;
                        if !p.kind.is_deletion() && self.skip_covered(Direction::Forward) {
                            continue;
                        }
                    }
                    ValueKind::Value | ValueKind::BlobIndex | ValueKind::WideColumnEntity => {
                        if !(skipping && self.cmp.le(p.user_key, &self.saved_key)) {
                            if self.upper.as_ref().is_some_and(|u| !self.cmp.lt(p.user_key, u)) {
                                break;
                            }
                            self.value_is_blob = p.kind != ValueKind::Value;
                            self.valid = true;
                            self.saved_key.clear();
                            match p.kind {
                                ValueKind::BlobIndex => self.load_blob(Direction::Forward),
                                ValueKind::WideColumnEntity => self.load_entity(Direction::Forward),
                                _ => {}
                            }
                            return;
                        }
                    }
                    ValueKind::Merge => {
                        if !(skipping && self.cmp.le(p.user_key, &self.saved_key)) {
                            if self.upper.as_ref().is_some_and(|u| !self.cmp.lt(p.user_key, u)) {
                                break;
                            }
                            self.merge_forward();
                            return;
                        }
                    }
                }
            }
            count_skip(recent);
            self.iter.next();
        }
        self.valid = false;
        self.saved_key.clear();
    }

    /// Reverse scan collecting the newest visible version of the previous key
    /// (with the merge operands above the version below them, merged).
    fn find_prev_user_entry(&mut self) {
        self.merged = false;
        self.is_entity = false;
        let mut kind = ValueKind::Deletion;
        // Under merge operands: the kind of the version below them (its
        // value in `saved_value`), `None` when there is none.
        let mut base: Option<ValueKind> = None;
        self.operands.clear();
        // Entries stepped over (`PerfContext`): at or below the sequence,
        // and newer than it.
        let (mut stepped, mut recent_stepped) = (0u64, 0u64);
        while self.iter.valid() {
            let Some((p, newer_ts)) = parse_at(self.iter.key(), self.read_ts) else {
                // It may be a newer version of the key collected so far.
                self.fail_unparsable();
                return;
            };
            if self.out_of_prefix(p.user_key) {
                break;
            }
            let recent = p.seq > self.sequence || newer_ts;
            if !recent {
                if !kind.is_deletion() && self.cmp.lt(p.user_key, &self.saved_key) {
                    break;
                }
                let seen = self.kind_seen(&p);
                let covered = seen == ValueKind::Deletion && !p.kind.is_deletion();
                match seen {
                    ValueKind::Deletion | ValueKind::SingleDeletion | ValueKind::RangeDeletion => {
                        self.saved_key.clear();
                        self.saved_value.clear();
                        self.operands.clear();
                    }
                    ValueKind::Value | ValueKind::BlobIndex | ValueKind::WideColumnEntity => {
                        self.saved_key.clear();
                        self.saved_key.extend_from_slice(p.user_key);
                        self.saved_value.clear();
                        self.saved_value.extend_from_slice(self.iter.value());
                        self.operands.clear();
                        self.saved_ts = self.entry_ts();
                    }
                    ValueKind::Merge => {
                        self.saved_ts = self.entry_ts();
                        if kind.is_deletion() {
                            self.saved_key.clear();
                            self.saved_key.extend_from_slice(p.user_key);
                            self.saved_value.clear();
                            base = None;
                        } else if kind != ValueKind::Merge {
                            base = Some(kind);
                        }
                        self.operands.push(self.iter.value().to_vec());
                    }
                }
                kind = seen;
                if seen.is_deletion() {
                    crate::perf::count(|c| c.internal_delete_skipped_count += 1);
                }
                if covered && self.skip_covered(Direction::Reverse) {
                    continue;
                }
            }
            match recent {
                true => recent_stepped += 1,
                false => stepped += 1,
            }
            self.iter.prev();
        }
        // Stopped by an error, the scan may have missed newer versions of
        // the key collected (they come after the older ones backwards).
        let failed = !self.iter.valid() && self.iter.status().is_err();
        // The version stopped on was stepped over too, but not skipped.
        let landed = u64::from(!(failed || kind.is_deletion()));
        crate::perf::count(|c| {
            c.internal_key_skipped_count += stepped.saturating_sub(landed);
            c.internal_recent_skipped_count += recent_stepped;
        });
        if failed || kind.is_deletion() || self.lower.as_ref().is_some_and(|l| self.cmp.lt(&self.saved_key, l)) {
            self.valid = false;
            self.saved_key.clear();
            self.saved_value.clear();
            self.direction = Direction::Forward;
        } else {
            self.valid = true;
            if kind == ValueKind::BlobIndex {
                self.load_blob(Direction::Reverse);
            } else if kind == ValueKind::WideColumnEntity {
                self.load_entity(Direction::Reverse);
            } else if kind == ValueKind::Merge {
                if base == Some(ValueKind::BlobIndex) {
                    self.load_blob(Direction::Reverse);
                    if !self.valid {
                        return;
                    }
                }
                let existing = base.map(|k| (k == ValueKind::WideColumnEntity, std::mem::take(&mut self.saved_value)));
                let operands = std::mem::take(&mut self.operands);
                match self.merge(existing.as_ref().map(|(e, v)| (*e, v.as_slice())), &operands) {
                    Ok(v) => self.saved_value = v,
                    Err(e) => self.fail(e),
                }
                self.operands = operands;
            }
        }
    }

    /// Going forwards, the inner iterator is on a merge operand, the newest
    /// visible version of its key: collects the older operands and the
    /// version below them, merges them into `blob_value`, and leaves the
    /// inner iterator past what it read.
    fn merge_forward(&mut self) {
        self.saved_key.clear();
        self.saved_key.extend_from_slice(self.shown_key(self.iter.key()));
        self.saved_ts = self.entry_ts();
        let mut operands = vec![self.iter.value().to_vec()];
        let mut existing = None;
        self.iter.next();
        while self.iter.valid() {
            let Some((p, newer_ts)) = parse_at(self.iter.key(), self.read_ts) else {
                self.fail_unparsable();
                return;
            };
            if p.user_key != self.saved_key.as_slice() {
                break;
            }
            if newer_ts || p.seq > self.sequence {
                // Not seen by this read (only where timestamps and
                // sequences disagree, which their contract rules out).
                self.iter.next();
                continue;
            }
            match self.kind_seen(&p) {
                ValueKind::Merge => operands.push(self.iter.value().to_vec()),
                ValueKind::Value => {
                    existing = Some((false, self.iter.value().to_vec()));
                    break;
                }
                ValueKind::WideColumnEntity => {
                    existing = Some((true, self.iter.value().to_vec()));
                    break;
                }
                ValueKind::BlobIndex => {
                    self.load_blob(Direction::Forward);
                    if self.error.is_some() {
                        return;
                    }
                    existing = Some((false, std::mem::take(&mut self.blob_value)));
                    break;
                }
                ValueKind::Deletion | ValueKind::SingleDeletion | ValueKind::RangeDeletion => break,
            }
            self.iter.next();
        }
        if !self.iter.valid() && self.iter.status().is_err() {
            // Older versions may be missing: no value rather than a wrong one.
            self.valid = false;
            self.saved_key.clear();
            return;
        }
        operands.reverse();
        match self.merge(existing.as_ref().map(|(e, v)| (*e, v.as_slice())), &operands) {
            Ok(v) => {
                self.blob_value = v;
                self.value_is_blob = false;
                self.merged = true;
                self.valid = true;
            }
            Err(e) => self.fail(e),
        }
    }

    /// The timestamp of the inner iterator's entry (0 without timestamps).
    fn entry_ts(&self) -> u64 {
        match self.read_ts {
            Some(_) => crate::comparator::split_timestamp(user_key(self.iter.key())).1,
            None => 0,
        }
    }

    /// What an entry visible to the iterator is to it: a version a range
    /// tombstone the iterator sees deletes reads as a deletion.
    fn kind_seen(&self, p: &crate::key::ParsedKey<'_>) -> ValueKind {
        if self.tombstones.iter().any(|t| t.max_covering(p.user_key, self.sequence) > p.seq) {
            ValueKind::Deletion
        } else {
            p.kind
        }
    }

    /// The inner iterator is on an entry a range tombstone deletes: moves
    /// the sources older than that tombstone past the fragment of keys it
    /// covers there (forwards to its end, backwards to before its start),
    /// where all they hold is deleted, without reading it (docs/data_model.md,
    /// "Range deletion"). Returns true when the inner iterator is no longer
    /// on that entry (it moved past it); false leaves it there.
    fn skip_covered(&mut self, direction: Direction) -> bool {
        // Every covering tombstone the reader sees is at or below its
        // sequence: with no source older than that, none can be skipped,
        // and the tombstones are not searched again.
        if !self.iter.can_skip_older(self.sequence.saturating_add(1)) {
            return false;
        }
        let Some(p) = parse_internal_key(self.iter.key()) else { return false };
        let mut best: Option<(SequenceNumber, &[u8], &[u8])> = None;
        for t in &self.tombstones {
            if let Some(c) = t.covering(p.user_key, self.sequence) {
                if best.is_none_or(|b| c.0 > b.0) {
                    best = Some(c);
                }
            }
        }
        let Some((seq, start, end)) = best else { return false };
        if !self.iter.can_skip_older(seq) {
            return false;
        }
        let target = match direction {
            Direction::Forward => make_internal_key(end, crate::key::MAX_SEQUENCE, KIND_FOR_SEEK),
            Direction::Reverse => make_internal_key(start, crate::key::MAX_SEQUENCE, KIND_FOR_SEEK),
        };
        let here = self.iter.key().to_vec();
        self.iter.skip_older(seq, &target);
        if self.iter.valid() && self.iter.key() == here.as_slice() {
            return false;
        }
        if let Some(stats) = &self.stats {
            stats.reads.record_range_skip();
        }
        true
    }

    /// `operands` (oldest first) applied to `existing` (a plain value, or
    /// with `true` an entity) with the merge operator, for the key in
    /// `saved_key`: the merged value. Over an entity, the entity with its
    /// default column merged goes to `entity`, and `is_entity` is set.
    fn merge(&mut self, existing: Option<(bool, &[u8])>, operands: &[Vec<u8>]) -> Result<Vec<u8>> {
        let op = self.merge_operator.as_ref().ok_or_else(|| crate::merge_operator::missing(&self.saved_key))?;
        let refs: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
        let base = match existing {
            None => crate::wide_columns::MergeBase::None,
            Some((false, v)) => crate::wide_columns::MergeBase::Plain(v),
            Some((true, e)) => crate::wide_columns::MergeBase::Entity(e),
        };
        let (entity, v) = crate::wide_columns::merge(op.as_ref(), &self.saved_key, base, &refs, "(db iterator)")?;
        if !entity {
            return Ok(v);
        }
        let value = crate::wide_columns::default_value(&v)
            .map_err(|r| crate::wide_columns::damaged(&self.saved_key, "(db iterator)", r))?
            .to_vec();
        self.entity = v;
        self.is_entity = true;
        Ok(value)
    }

    /// Stops the iterator with `e`.
    fn fail(&mut self, e: Error) {
        self.error = Some(e);
        self.valid = false;
        self.merged = false;
        self.is_entity = false;
        self.value_is_blob = false;
        self.saved_key.clear();
        self.saved_value.clear();
        self.direction = Direction::Forward;
    }

    /// Reads the current entry's blob: going forwards the inner iterator is
    /// on the entry, and the blob goes to `blob_value`; backwards the entry
    /// was collected into `saved_key` and `saved_value` (its blob index),
    /// and the blob replaces the index there. A blob that cannot be read
    /// whole stops the iterator with the error.
    fn load_blob(&mut self, at: Direction) {
        let (key, raw) = match at {
            Direction::Forward => (user_key(self.iter.key()), self.iter.value()),
            Direction::Reverse => (self.saved_key.as_slice(), self.saved_value.as_slice()),
        };
        let read = match (&self.blobs, BlobIndex::decode(raw)) {
            (Some((fetcher, verify)), Ok(index)) => fetcher.fetch(key, &index, *verify),
            (_, Err(r)) => Err(Error::corruption(
                "(db iterator)",
                0,
                format!("blob index of key {:?}: {r}", String::from_utf8_lossy(key)),
            )),
            (None, Ok(index)) => Err(Error::corruption(
                "(db iterator)",
                0,
                format!("an iterator without blob files met a blob index into blob file {}", index.file_number),
            )),
        };
        match (read, at) {
            (Ok(v), Direction::Forward) => self.blob_value = v,
            (Ok(v), Direction::Reverse) => self.saved_value = v,
            (Err(e), _) => {
                self.error = Some(e);
                self.valid = false;
                self.value_is_blob = false;
                self.saved_key.clear();
                self.saved_value.clear();
                self.direction = Direction::Forward;
            }
        }
    }

    /// Takes the current entry's entity: going forwards the inner iterator
    /// is on it, and its default column goes to `blob_value`; backwards it
    /// was collected into `saved_value`, which the default column replaces.
    /// The entity is kept in `entity`. A damaged entity stops the iterator
    /// with a corruption error.
    fn load_entity(&mut self, at: Direction) {
        let (key, raw) = match at {
            Direction::Forward => (user_key(self.iter.key()), self.iter.value()),
            Direction::Reverse => (self.saved_key.as_slice(), self.saved_value.as_slice()),
        };
        match crate::wide_columns::default_value(raw) {
            Ok(v) => {
                let v = v.to_vec();
                self.entity.clear();
                self.entity.extend_from_slice(raw);
                self.is_entity = true;
                match at {
                    Direction::Forward => self.blob_value = v,
                    Direction::Reverse => self.saved_value = v,
                }
            }
            Err(r) => {
                let e = crate::wide_columns::damaged(key, "(db iterator)", r);
                self.fail(e);
            }
        }
    }

    /// Ends the scan on an internal key that does not parse: a corruption
    /// the iterator reports, not the end of the data.
    fn fail_unparsable(&mut self) {
        let key = self.iter.key();
        let shown: String = key.iter().take(32).map(|b| format!("{b:02x}")).collect();
        self.error = Some(Error::corruption(
            "(db iterator)",
            0,
            format!("unparsable internal key of {} bytes: {shown}", key.len()),
        ));
        self.valid = false;
        self.saved_key.clear();
        self.saved_value.clear();
        self.direction = Direction::Forward;
    }

    /// A Rust iterator over `(key, value)` pairs from the current position
    /// forwards (or, with `reverse`, backwards). Ends at the first error,
    /// which it yields.
    pub fn into_entries(self, reverse: bool) -> Entries<'a> {
        Entries { it: self, reverse, done: false, prefix: None }
    }

    /// [`Self::into_entries`] forwards, ending at the first key that does
    /// not start with `prefix`.
    pub(crate) fn into_entries_with_prefix(self, prefix: &[u8]) -> Entries<'a> {
        Entries { it: self, reverse: false, done: false, prefix: Some(prefix.to_vec()) }
    }
}

/// Counts an entry a scan steps over for the calling thread's
/// `PerfContext`: newer than the read's sequence (`recent`), or an older
/// version or a deleted key's.
fn count_skip(recent: bool) {
    crate::perf::count(|c| match recent {
        true => c.internal_recent_skipped_count += 1,
        false => c.internal_key_skipped_count += 1,
    });
}

impl DbInner {
    /// A cursor over column family `cf` at `ro`'s snapshot (or the latest
    /// state): every memtable, L0 table and deeper level of the family's
    /// current super version merged, with their range tombstones. An
    /// error (a dropped family, a table that cannot be opened) is the
    /// iterator's status.
    /// The range tombstones of `sv`'s tables (of the files whose MANIFEST
    /// record says they have some), fragmented; computed once per super
    /// version (a failure to open a table is not remembered).
    fn table_tombstones(&self, sv: &SuperVersion) -> Result<Option<Arc<crate::range_del::FragmentedTombstones>>> {
        if let Some(t) = sv.table_tombstones.get() {
            return Ok(t.clone());
        }
        let mut list = Vec::new();
        for (level, files) in sv.version.levels.iter().enumerate() {
            for f in files.iter().filter(|f| f.num_range_deletions > 0) {
                if let Some(t) = self.tables.get(f, level, &sv.version.cmp)?.range_tombstones() {
                    list.extend(t.tombstones());
                }
            }
        }
        let cmp = &sv.version.cmp;
        let t =
            (!list.is_empty()).then(|| Arc::new(crate::range_del::FragmentedTombstones::with_comparator(cmp, &list)));
        let _ = sv.table_tombstones.set(t.clone());
        Ok(t)
    }

    pub(crate) fn new_iterator(&self, cf: &ColumnFamilyData, ro: ReadOptions<'_>) -> DbIterator<'static> {
        let sv = cf.super_version();
        let sequence = self.read_sequence(&ro);
        let seq = *sequence.as_ref().unwrap_or(&0);
        let rs = ReadSettings::from_read_options(&ro);
        let opts = cf.options();
        // Bounded prefix seeks (docs/data_model.md, "Prefixes").
        // As RocksDB: `prefix_same_as_start` bounds even with
        // `total_order_seek`, which only keeps tables from being skipped.
        let prefix_mode = match &opts.prefix_extractor {
            Some(x) if ro.prefix_same_as_start => Some((
                Arc::clone(x),
                (!ro.total_order_seek).then(|| Arc::new(crate::sst::table_reader::SeekPrefix::new(x.name()))),
            )),
            _ => None,
        };
        let n = 1 + sv.imm.len() + sv.version.levels[0].len() + sv.version.levels.len();
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::with_capacity(n);
        // Per child, a sequence none of its entries is above (a memtable's
        // is not fixed): range tombstones let the iterator skip the older
        // children over what they delete.
        let mut newest = Vec::with_capacity(n);
        for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            children.push(Box::new(mem.iter()));
            newest.push(SequenceNumber::MAX);
        }
        for f in &sv.version.levels[0] {
            newest.push(f.largest_seq);
            match (self.tables.get(f, 0, &cf.cmp), &prefix_mode) {
                (Ok(t), Some((_, Some(shared)))) => children.push(Box::new(
                    crate::sst::table_reader::PrefixCheckedIterator::new(t.iter(rs), Arc::clone(shared)),
                )),
                (Ok(t), _) => children.push(Box::new(t.iter(rs))),
                (Err(e), _) => children.push(Box::new(crate::iter::EmptyIterator::with_error(e))),
            }
        }
        for (level, files) in sv.version.levels.iter().enumerate().skip(1) {
            if !files.is_empty() {
                newest.push(files.iter().map(|f| f.largest_seq).max().unwrap_or(0));
                let files = LevelFiles::Version(Arc::clone(&sv.version), level);
                let level_iter = LevelIterator::new(files, cf.cmp.clone(), level, Arc::clone(&self.tables), rs);
                children.push(match &prefix_mode {
                    Some((_, Some(shared))) => Box::new(level_iter.with_seek_prefix(Arc::clone(shared))),
                    _ => Box::new(level_iter),
                });
            }
        }
        // Every range tombstone of the view: each memtable's, and the
        // tables' (fragmented once per super version).
        let mut tombstones: Vec<_> =
            std::iter::once(&sv.mem).chain(sv.imm.iter()).filter_map(|m| m.range_tombstones()).collect();
        let mut tombstones_error = false;
        match self.table_tombstones(&sv) {
            Ok(t) => tombstones.extend(t),
            // Without a table's tombstones the view could show deleted keys.
            Err(e) => {
                children.push(Box::new(crate::iter::EmptyIterator::with_error(e)));
                tombstones_error = true;
            }
        }
        if tombstones_error {
            newest.push(SequenceNumber::MAX);
        }
        let merged = MergingIterator::new(cf.cmp.clone(), children).with_newest(newest);
        let (lower, upper) = (ro.iterate_lower_bound, ro.iterate_upper_bound);
        let mut it = DbIterator::new(merged, cf.cmp.of_stripped_keys(), seq, lower, upper, Box::new(sv));
        if cf.cmp.timestamp_size() > 0 {
            it.read_ts = Some(ro.timestamp.unwrap_or(0));
        }
        it.tombstones = tombstones;
        it.prefix_mode = prefix_mode;
        if ro.prefix_same_as_start && !ro.total_order_seek && opts.prefix_extractor.is_none() {
            it.iter = MergingIterator::new(
                cf.cmp.clone(),
                vec![Box::new(crate::iter::EmptyIterator::with_error(Error::invalid(format!(
                    "a prefix seek (ReadOptions::prefix_same_as_start) in column family {:?}, which has no prefix \
                     extractor (set ColumnFamilyOptions::prefix_extractor)",
                    cf.name
                ))))],
            );
        }
        it.blobs = Some((Arc::clone(&self.blobs) as Arc<dyn BlobFetcher>, ro.verify_checksums));
        it.merge_operator = opts.merge_operator.clone();
        it.stats = Some(Arc::clone(&self.stats));
        let checked = self
            .check_open()
            .and_then(|()| self.check_family(cf))
            .and_then(|()| cf.check_read_timestamp(ro.timestamp))
            .and(sequence.map(|_| ()));
        if let Err(e) = checked {
            it.iter = MergingIterator::new(cf.cmp.clone(), vec![Box::new(crate::iter::EmptyIterator::with_error(e))]);
        }
        it
    }
}

/// Rust [`Iterator`] adapter over a [`DbIterator`]; see
/// [`DbIterator::into_entries`] and [`Db::iterator`].
pub struct Entries<'a> {
    it: DbIterator<'a>,
    reverse: bool,
    done: bool,
    /// Ends at the first key not starting with this (a prefix iterator in
    /// an order other than bytewise, where no bound can say it).
    prefix: Option<Vec<u8>>,
}

impl Iterator for Entries<'_> {
    type Item = Result<(Vec<u8>, Vec<u8>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if !self.it.valid() {
            self.done = true;
            return self.it.status().err().map(Err);
        }
        if self.prefix.as_ref().is_some_and(|p| !self.it.key().starts_with(p)) {
            self.done = true;
            return None;
        }
        let item = (self.it.key().to_vec(), self.it.value().to_vec());
        if self.reverse {
            self.it.prev();
        } else {
            self.it.next();
        }
        Some(Ok(item))
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::fs::{FileSystem, MemFs};
    use crate::iter::testing::FailingIterator;
    use crate::iter::VecIterator;
    use crate::sst::ReadSettings;
    use crate::sst::{TableBuilder, TableBuilderOptions};
    use crate::version::{filename, FileMetaData, LevelFiles, LevelIterator, TableCache, TableCacheOptions};
    use std::cmp::Ordering;

    type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

    fn ikey(k: &str, seq: u64, kind: ValueKind) -> Vec<u8> {
        make_internal_key(k.as_bytes(), seq, kind)
    }

    /// An internal key whose kind byte names no kind.
    fn unparsable(k: &str, seq: u64) -> Vec<u8> {
        let mut v = k.as_bytes().to_vec();
        v.extend_from_slice(&((seq << 8) | 0x7f).to_le_bytes());
        assert!(parse_internal_key(&v).is_none());
        assert_eq!(
            crate::key::compare_bytewise_internal_keys(&v, &ikey(k, seq, ValueKind::Value)),
            Ordering::Less,
            "trailer encoding"
        );
        v
    }

    fn sorted(mut v: Pairs) -> Pairs {
        v.sort_by(|a, b| crate::key::compare_bytewise_internal_keys(&a.0, &b.0));
        v
    }

    fn db_iter(children: Vec<Box<dyn InternalIterator>>) -> DbIterator<'static> {
        DbIterator::new(
            MergingIterator::new(UserComparator::BYTEWISE, children),
            UserComparator::BYTEWISE,
            1000,
            None,
            None,
            Box::new(()),
        )
    }

    /// `b` has a newer version whose key does not parse, above the older
    /// value "old"; `a` and `c` are intact.
    fn with_unparsable_key() -> DbIterator<'static> {
        let entries = sorted(vec![
            (ikey("a", 1, ValueKind::Value), b"a".to_vec()),
            (unparsable("b", 5), b"new".to_vec()),
            (ikey("b", 1, ValueKind::Value), b"old".to_vec()),
            (ikey("c", 1, ValueKind::Value), b"c".to_vec()),
        ]);
        db_iter(vec![Box::new(VecIterator::new(entries))])
    }

    fn assert_corrupt(it: &DbIterator<'_>, ctx: &str) {
        assert!(!it.valid(), "{ctx}: valid at {:?} = {:?}", it.key(), it.value());
        let e = it.status().expect_err(ctx);
        assert!(e.is_corruption(), "{ctx}: {e}");
    }

    #[test]
    fn an_unparsable_key_is_corruption_forwards() {
        let mut it = with_unparsable_key();
        it.seek_to_first();
        assert_eq!((it.key(), it.value()), (&b"a"[..], &b"a"[..]));
        it.next();
        assert_corrupt(&it, "next onto the unparsable key");
        it.seek(b"b");
        assert_corrupt(&it, "seek onto the unparsable key");
        it.seek(b"c");
        assert!(it.valid() && it.status().is_ok(), "a seek past it starts afresh");
        assert_eq!(it.value(), b"c");
        let mut it = with_unparsable_key();
        it.seek_to_first();
        let got: Vec<_> = it.into_entries(false).collect();
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[1].as_ref().is_err_and(Error::is_corruption), "{got:?}");
    }

    #[test]
    fn an_unparsable_key_is_corruption_backwards() {
        let mut it = with_unparsable_key();
        it.seek_to_last();
        assert_eq!(it.value(), b"c");
        // Backwards the older "old" comes first; the unparsable newer
        // version must not let it through.
        it.prev();
        assert_corrupt(&it, "prev onto the unparsable key");
        it.seek_for_prev(b"b");
        assert_corrupt(&it, "seek_for_prev onto the unparsable key");
        it.seek_for_prev(b"a");
        assert!(it.valid() && it.status().is_ok(), "a seek before it starts afresh");
        assert_eq!(it.value(), b"a");
        // Forwards at "c", then back: the direction switch meets it too.
        it.seek(b"c");
        it.prev();
        assert_corrupt(&it, "prev switching direction");
        let mut it = with_unparsable_key();
        it.seek_to_last();
        let got: Vec<_> = it.into_entries(true).collect();
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[1].as_ref().is_err_and(Error::is_corruption), "{got:?}");
    }

    #[test]
    fn a_reverse_scan_stopped_by_an_error_drops_the_version_it_collected() {
        // Backwards, "old" (older child) is collected first; the older child
        // then fails stepping back to "a", before the newer child's "new"
        // for the same key is reached.
        let newer = vec![(ikey("b", 5, ValueKind::Value), b"new".to_vec())];
        let older = sorted(vec![
            (ikey("a", 1, ValueKind::Value), b"a".to_vec()),
            (ikey("b", 1, ValueKind::Value), b"old".to_vec()),
        ]);
        let mut it = db_iter(vec![Box::new(VecIterator::new(newer)), Box::new(FailingIterator::new(older, 0))]);
        it.seek_to_last();
        assert_corrupt(&it, "seek_to_last");
        let got: Vec<_> = it.into_entries(true).collect();
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(got[0].is_err(), "{got:?}");
    }

    /// Something done to a table file.
    type Damage = dyn Fn(&MemFs, &Path);

    /// Three tables of one level, holding `a`..`c`, `d`..`f` and `g`..`i`,
    /// after `damage` is done to the middle one's file.
    fn level(damage: impl FnOnce(&MemFs, &Path)) -> LevelIterator {
        let fs = Arc::new(MemFs::new());
        let dir = PathBuf::from("/db");
        fs.create_dir_all(&dir).unwrap();
        let mut files = Vec::new();
        for (n, keys) in [(1, ["a", "b", "c"]), (2, ["d", "e", "f"]), (3, ["g", "h", "i"])] {
            let path = filename::table_file(&dir, n);
            let mut b =
                TableBuilder::new(fs.new_writable(&path).unwrap(), TableBuilderOptions::default(), format!("{n}"));
            let keys = keys.map(|k| ikey(k, 1, ValueKind::Value));
            for k in &keys {
                b.add(k, user_key(k)).unwrap();
            }
            let props = b.finish().unwrap();
            files.push(Arc::new(FileMetaData {
                number: n,
                file_size: props.file_size,
                smallest: keys[0].clone(),
                largest: keys[2].clone(),
                smallest_seq: 1,
                largest_seq: 1,
                num_entries: 3,
                num_deletions: 0,
                oldest_blob_file: 0,
                num_range_deletions: 0,
            }));
        }
        damage(&fs, &filename::table_file(&dir, 2));
        let tables =
            Arc::new(TableCache::new(dir, fs, None, TableCacheOptions::from_options(&crate::Options::default())));
        LevelIterator::new(LevelFiles::Listed(files), UserComparator::BYTEWISE, 1, tables, ReadSettings::default())
    }

    fn walk(it: &mut LevelIterator, forward: bool) -> String {
        let mut out = String::new();
        while it.valid() {
            out.push_str(std::str::from_utf8(it.value()).unwrap());
            if forward {
                it.next();
            } else {
                it.prev();
            }
        }
        out
    }

    #[test]
    fn a_level_iterators_prepared_seeks_land_where_plain_seeks_do() {
        use crate::iter::InternalIterator;
        let keys = ["", "a", "b", "c", "cc", "d", "e", "f", "ff", "g", "h", "i", "j"];
        let mut prepared = level(|_, _| {});
        for (n, goal) in keys.iter().enumerate() {
            let goal = ikey(goal, 9, ValueKind::Value);
            let mut plain = level(|_, _| {});
            plain.seek(&goal);
            let want = walk(&mut plain, true);
            // Prepared for this target, for every other one (another file,
            // discarded), and prepared then moved (discarded).
            for other in keys {
                prepared.prepare_seek(&ikey(other, 9, ValueKind::Value));
                prepared.seek(&goal);
                assert_eq!(walk(&mut prepared, true), want, "prepared for {other:?}, sought {:?}", keys[n]);
            }
            prepared.prepare_seek(&goal);
            prepared.seek_to_last();
            prepared.seek(&goal);
            assert_eq!(walk(&mut prepared, true), want, "prepared, moved, sought {:?}", keys[n]);
            prepared.prepare_seek(&goal);
            prepared.seek(&goal);
            assert_eq!(walk(&mut prepared, true), want, "sought {:?}", keys[n]);
        }
    }

    #[test]
    fn a_level_iterator_stops_at_a_file_in_error_in_both_directions() {
        let missing = |fs: &MemFs, path: &Path| fs.remove_file(path).unwrap();
        let damaged_block = |fs: &MemFs, path: &Path| {
            let mut bytes = fs.file_bytes(path).unwrap();
            bytes[2] ^= 0x10;
            fs.set_file_bytes(path, &bytes).unwrap();
        };
        let damages: [(&str, &Damage); 2] = [("missing", &missing), ("damaged", &damaged_block)];
        for (what, damage) in damages {
            let mut it = level(damage);
            let failed = |it: &LevelIterator, ctx: &str| {
                assert!(!it.valid(), "{what}: {ctx}: valid at {:?}", it.key());
                assert!(it.status().is_err(), "{what}: {ctx}: no error");
            };
            it.seek_to_first();
            assert_eq!(walk(&mut it, true), "abc", "{what}: forward scan");
            failed(&it, "forward scan");
            it.seek_to_last();
            assert_eq!(walk(&mut it, false), "ihg", "{what}: reverse scan");
            failed(&it, "reverse scan");
            it.seek(&ikey("e", 9, ValueKind::Value));
            failed(&it, "seek into the file");
            it.seek(&ikey("h", 9, ValueKind::Value));
            assert!(it.valid() && it.status().is_ok(), "{what}: a seek into another file starts afresh");
            assert_eq!(it.value(), b"h");
            it.seek_for_prev(&ikey("e", 0, ValueKind::Deletion));
            failed(&it, "seek_for_prev into the file");
            it.seek_for_prev(&ikey("b", 0, ValueKind::Deletion));
            assert_eq!((it.valid(), it.value()), (true, &b"b"[..]), "{what}");
            assert!(it.status().is_ok());
        }
    }
}
