//! The point-read path: `get` (one allocation: the value), `get_pinned`
//! (none: the value stays in its block) and the batched `multi_get`.
//!
//! Every read takes its super versions first and its sequence after
//! (RocksDB's `GetImpl`), as iterators do. The super version holds its
//! memtables and tables as they were, and a flush or compaction drops a
//! version only under a newer one at or below the sequence published
//! then, which a read taking its sequence later also sees. The other order
//! lost keys: a read took sequence 40, a put at 41 and a flush that dropped
//! the key's version 40 under it came before the read took the super
//! version, and the key read as missing. A write the super version does not
//! hold (it went into a memtable started after it) has a sequence above
//! every write it holds, so the read is the state at some moment while it
//! ran.

use std::sync::Arc;

use super::column_family::ColumnFamilyData;
use super::{DbInner, SuperVersion};
use crate::blob::{BlobFetcher, BlobIndex};
use crate::error::{Error, Result};
use crate::key::{parse_internal_key, with_internal_key, SequenceNumber, ValueKind, KIND_FOR_SEEK};
use crate::memtable::MemLookup;
use crate::sst::ReadValue;
use crate::sst::{PointLookup, ReadSettings, Readahead};
use crate::version::{BatchAnswer, Found, KeyBatch, KeyVersions};
use crate::wide_columns::MergeBase;

/// The sequence a lookup key reads at.
fn lookup_sequence(lookup: &[u8]) -> SequenceNumber {
    parse_internal_key(lookup).map_or(0, |p| p.seq)
}

/// A key's value as the read path finds it: a plain value, or a
/// wide-column entity's serialized columns ([`crate::wide_columns`]).
#[derive(Debug)]
pub(crate) enum Got<V> {
    /// A plain value.
    Plain(V),
    /// An entity.
    Entity(V),
}

impl<V: ReadValue> Got<V> {
    /// The plain value `get` returns: an entity's default column (empty
    /// when it has none). A damaged entity is corruption naming `key`.
    pub(crate) fn into_value(self, key: &[u8]) -> Result<V> {
        match self {
            Got::Plain(v) => Ok(v),
            Got::Entity(e) => crate::wide_columns::default_value(e.bytes())
                .map(|d| V::owned(d.to_vec()))
                .map_err(|r| crate::wide_columns::damaged(key, "(read)", r)),
        }
    }

    /// The columns `get_entity` returns: a plain value's one default column.
    pub(crate) fn into_columns(self, key: &[u8]) -> Result<Vec<crate::wide_columns::WideColumn>> {
        match self {
            Got::Plain(v) => {
                Ok(vec![crate::wide_columns::WideColumn::new(crate::wide_columns::DEFAULT_COLUMN_NAME, v.bytes())])
            }
            Got::Entity(e) => crate::wide_columns::columns(key, e.bytes(), "(read)"),
        }
    }
}

/// What a family's memtables say of a key's writes after a sequence
/// (RocksDB's `TransactionUtil::CheckKey`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WrittenSince {
    /// Written at this sequence, after the one asked about.
    Yes(SequenceNumber),
    /// Not written since.
    No,
    /// The memtables kept begin after the sequence asked about: they cannot
    /// tell. The earliest sequence they cover is given.
    Unknown(SequenceNumber),
}

impl DbInner {
    /// For each of `keys` of family `cf`, whether it was written (put,
    /// deleted, merged, covered by a range deletion) after the sequence
    /// given with it, as the family's memtables tell: the mutable and
    /// immutable ones and the flushed ones `max_write_buffer_size_to_maintain`
    /// keeps. `InvalidArgument` when the family is gone. What ingestion put
    /// straight into tables is not seen, as in RocksDB.
    pub(crate) fn written_since(&self, cf: u32, keys: &[(&[u8], SequenceNumber)]) -> Result<Vec<WrittenSince>> {
        self.check_open()?;
        let mems = {
            let st = self.state.lock();
            match st.families.get(cf) {
                Some(f) => f.newest_first(),
                None => return Err(Error::invalid(format!("column family {cf} does not exist (dropped?)"))),
            }
        };
        Ok(keys
            .iter()
            .map(|&(key, since)| {
                for m in &mems {
                    let latest = m.latest_sequence(key);
                    if latest > 0 {
                        return if latest > since { WrittenSince::Yes(latest) } else { WrittenSince::No };
                    }
                    if m.earliest_sequence() <= since {
                        return WrittenSince::No;
                    }
                }
                WrittenSince::Unknown(mems.last().map_or(0, |m| m.earliest_sequence()))
            })
            .collect())
    }

    /// Reads `key` in `cf` as `ro` says, timed and counted: its plain value
    /// (an entity's default column).
    pub(super) fn get_in<V: ReadValue>(
        &self,
        cf: &ColumnFamilyData,
        key: &[u8],
        ro: &ReadOptions<'_>,
    ) -> Result<Option<V>> {
        self.get_got_in(cf, key, ro)?.map(|g| g.into_value(key)).transpose()
    }

    /// Reads `key` in `cf` as `ro` says, as columns (RocksDB `GetEntity`).
    pub(super) fn get_entity_in(
        &self,
        cf: &ColumnFamilyData,
        key: &[u8],
        ro: &ReadOptions<'_>,
    ) -> Result<Option<Vec<crate::wide_columns::WideColumn>>> {
        self.get_got_in::<Vec<u8>>(cf, key, ro)?.map(|g| g.into_columns(key)).transpose()
    }

    /// Reads `key` in `cf` as `ro` says, timed and counted, as found.
    fn get_got_in<V: ReadValue>(
        &self,
        cf: &ColumnFamilyData,
        key: &[u8],
        ro: &ReadOptions<'_>,
    ) -> Result<Option<Got<V>>> {
        if cf.cmp.timestamp_size() > 0 || ro.timestamp.is_some() {
            return self.get_stamped(cf, key, ro);
        }
        self.check_open()?;
        self.check_family(cf)?;
        let snapshot_time = crate::perf::PerfTimer::start();
        let sv = cf.super_version_guard();
        kill_point!("read_between_its_two_steps");
        let seq = self.read_sequence(ro)?;
        snapshot_time.stop(|c| &mut c.get_snapshot_time);
        let start = self.stats.start_timer();
        // The lookup key on the stack (for keys up to 56 bytes): a copied
        // value is then the read's one allocation.
        let r = with_internal_key(key, seq, KIND_FOR_SEEK, |lookup| self.get_with_lookup(cf, &sv, key, lookup, ro));
        self.record_get(r.as_ref().ok().and_then(Option::as_ref), start);
        r
    }

    /// Counts a point read that found `got` (none: absent or failed) and
    /// started at `start` (`rocksdb.number.keys.read`, its bytes, and
    /// `rocksdb.db.get.micros`).
    fn record_get<V: ReadValue>(&self, got: Option<&Got<V>>, start: Option<std::time::Instant>) {
        let s = &self.stats;
        s.reads.record_get(got.map(|v| match v {
            Got::Plain(v) | Got::Entity(v) => v.bytes().len(),
        }));
        s.time_since(|h| &h.get_micros, start);
    }

    /// A point read in a family with timestamps (docs/timestamps.md), as
    /// found: through the point-read path ([`Self::get_stamped_fast`]), or
    /// where that cannot answer, an iterator ([`Self::get_at_timestamp`]).
    fn get_stamped<V: ReadValue>(
        &self,
        cf: &ColumnFamilyData,
        key: &[u8],
        ro: &ReadOptions<'_>,
    ) -> Result<Option<Got<V>>> {
        self.check_open()?;
        self.check_family(cf)?;
        cf.check_read_timestamp(ro.timestamp)?;
        let sv = cf.super_version_guard();
        let seq = self.read_sequence(ro)?;
        let start = self.stats.start_timer();
        let stamped = crate::comparator::with_timestamp(key, ro.timestamp.unwrap_or(0));
        let lookup = crate::key::make_internal_key(&stamped, seq, KIND_FOR_SEEK);
        let fast = self.get_stamped_fast::<V>(cf, &sv, key, &lookup, ro);
        drop(sv);
        let r = match fast {
            Ok(Some(got)) => Ok(got),
            Ok(None) => return Ok(self.get_at_timestamp(cf, key, ro)?.map(|(got, _)| got)),
            Err(e) => Err(e),
        };
        self.record_get(r.as_ref().ok().and_then(Option::as_ref), start);
        r
    }

    /// The point-read path with timestamps: `lookup` is the internal key of
    /// `(key, read's timestamp)` at the read's sequence, so in each memtable
    /// and table the first entry of the key at or after it is the newest
    /// version at or below the timestamp (and the filters, which hold keys
    /// without timestamps, are asked for `key`). Sources go newest first,
    /// and by the timestamps' contract a newer source's version has the
    /// larger timestamp. `None` where this path cannot answer and the
    /// caller reads through an iterator: a merge operand (its versions at
    /// older timestamps are other keys to the point-read path), a blob, or
    /// an entry newer than the read's snapshot found first (an older
    /// version may lie behind it).
    fn get_stamped_fast<V: ReadValue>(
        &self,
        cf: &ColumnFamilyData,
        sv: &SuperVersion,
        key: &[u8],
        lookup: &[u8],
        ro: &ReadOptions<'_>,
    ) -> Result<Option<Option<Got<V>>>> {
        let seq = lookup_sequence(lookup);
        for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            crate::perf::count(|c| c.get_from_memtable_count += 1);
            if let Some((s, found)) = mem.get_entry(lookup) {
                return Ok(match found {
                    _ if s > seq => None,
                    MemLookup::Value(v) => Some(Some(Got::Plain(V::owned(v)))),
                    MemLookup::Entity(v) => Some(Some(Got::Entity(V::owned(v)))),
                    MemLookup::Deleted => Some(None),
                    MemLookup::BlobIndex(_) | MemLookup::Merge => None,
                });
            }
        }
        let read = PointLookup {
            key,
            lookup,
            seq,
            rs: ReadSettings::from_read_options(ro),
            prefix_extractor: &|| cf.options().prefix_extractor.clone(),
        };
        match sv.version.get::<V>(&self.tables, &read, &self.stats.reads)? {
            None => Ok(Some(None)),
            Some(f) if f.seq > seq || matches!(f.kind, ValueKind::Merge | ValueKind::BlobIndex) => Ok(None),
            Some(f) => self.finish(key, f, ro).map(Some),
        }
    }

    /// A point read in a family with timestamps (docs/timestamps.md): the
    /// newest version of `key` at or below `ro.timestamp` (and the read's
    /// sequence), as found, with its timestamp. It seeks an iterator of
    /// the family, which sees each key's versions through their
    /// timestamps; the filters of the point-read path are not asked.
    pub(super) fn get_at_timestamp<V: ReadValue>(
        &self,
        cf: &ColumnFamilyData,
        key: &[u8],
        ro: &ReadOptions<'_>,
    ) -> Result<Option<(Got<V>, u64)>> {
        self.check_open()?;
        self.check_family(cf)?;
        cf.check_read_timestamp(ro.timestamp)?;
        let start = self.stats.start_timer();
        let ro = ReadOptions {
            iterate_lower_bound: None,
            iterate_upper_bound: None,
            prefix_same_as_start: false,
            ..ro.clone()
        };
        let mut it = self.new_iterator(cf, ro);
        it.seek(key);
        let r = if !it.valid() {
            it.status().map(|()| None)
        } else if it.key() != key {
            Ok(None)
        } else {
            let got = match it.entity() {
                Some(e) => Got::Entity(V::owned(e.to_vec())),
                None => Got::Plain(V::owned(it.value().to_vec())),
            };
            Ok(Some((got, it.timestamp())))
        };
        self.record_get(r.as_ref().ok().and_then(Option::as_ref).map(|(got, _)| got), start);
        r
    }

    /// The value of `key` in `sv` at the sequence in `lookup`.
    pub(super) fn get_with_lookup<V: ReadValue>(
        &self,
        cf: &ColumnFamilyData,
        sv: &SuperVersion,
        key: &[u8],
        lookup: &[u8],
        ro: &ReadOptions<'_>,
    ) -> Result<Option<Got<V>>> {
        let seq = lookup_sequence(lookup);
        let slow = |pre| {
            self.get_slow(cf, sv, key, lookup, ro, pre).map(|v| {
                v.map(|g| match g {
                    Got::Plain(v) => Got::Plain(V::owned(v)),
                    Got::Entity(v) => Got::Entity(V::owned(v)),
                })
            })
        };
        // The newest range tombstone covering the key that the read sees,
        // from the sources asked so far: a version below it is deleted. The
        // sources go newest first, and a tombstone in an older source is
        // older than every version of the key a newer one holds, so the
        // first version found is compared with the sources up to its own.
        let mut floor = 0;
        // A merge operand's versions, collected by the search that found it.
        let mut versions = Vec::new();
        let memtable_time = crate::perf::PerfTimer::start();
        let mut in_memtable = None;
        for (i, mem) in std::iter::once(&sv.mem).chain(sv.imm.iter()).enumerate() {
            crate::perf::count(|c| c.get_from_memtable_count += 1);
            floor = floor.max(mem.max_covering(key, seq));
            if let Some(entry) = mem.get_entry_or_versions(lookup, &mut versions) {
                in_memtable = Some((i, entry));
                break;
            }
        }
        memtable_time.stop(|c| &mut c.get_from_memtable_time);
        if let Some((i, entry)) = in_memtable {
            return match entry {
                (s, _) if s < floor => Ok(None),
                (_, MemLookup::Value(v)) => Ok(Some(Got::Plain(V::owned(v)))),
                (_, MemLookup::Entity(v)) => Ok(Some(Got::Entity(V::owned(v)))),
                (_, MemLookup::Deleted) => Ok(None),
                (_, MemLookup::BlobIndex(v)) => {
                    self.resolve_blob(key, &v, "memtable", ro).map(|v| Some(Got::Plain(V::owned(v))))
                }
                (_, MemLookup::Merge) => slow(Some((i, versions))),
            };
        }
        if floor > 0 {
            return Ok(None);
        }
        // The tables, through the version: each asked once, checking its
        // own filters and range tombstones.
        let read = PointLookup {
            key,
            lookup,
            seq,
            rs: ReadSettings::from_read_options(ro),
            prefix_extractor: &|| cf.options().prefix_extractor.clone(),
        };
        let files_time = crate::perf::PerfTimer::start();
        let found = sv.version.get::<V>(&self.tables, &read, &self.stats.reads);
        files_time.stop(|c| &mut c.get_from_output_files_time);
        match found? {
            Some(found) if found.kind == ValueKind::Merge => slow(None),
            found => found.map_or(Ok(None), |found| self.finish(key, found, ro)),
        }
    }

    /// The value of `key` at `lookup`'s sequence when its newest version
    /// there is a merge operand or a range tombstone may delete it: the
    /// newest range tombstone covering the key that the read sees, from
    /// every memtable and table that may hold the key; then the key's
    /// versions, newest first, from each memtable and level in turn (L0's
    /// files together, by sequence), down to the first that is not an
    /// operand (RocksDB's `MergeContext`), a version below the tombstone
    /// reading as a deletion; operands given to the family's merge
    /// operator.
    ///
    /// `pre`: the memtable (by its index, newest first) whose search found
    /// the operand, with the versions it collected: the memtables before it
    /// hold none of the key's, and it is not searched again.
    fn get_slow(
        &self,
        cf: &ColumnFamilyData,
        sv: &SuperVersion,
        key: &[u8],
        lookup: &[u8],
        ro: &ReadOptions<'_>,
        pre: Option<(usize, KeyVersions)>,
    ) -> Result<Option<Got<Vec<u8>>>> {
        let seq = lookup_sequence(lookup);
        let mems = || std::iter::once(&sv.mem).chain(sv.imm.iter());
        let mut tombstone = mems().map(|m| m.max_covering(key, seq)).max().unwrap_or(0);
        tombstone = tombstone.max(sv.version.max_covering_tombstone(&self.tables, key, seq)?);
        let mut operands: Vec<Vec<u8>> = Vec::new();
        let mut versions = Vec::new();
        // The version below the operands, and where it was found.
        let mut base: Option<(ValueKind, Vec<u8>, String)> = None;
        // Moves the operands at the head of `versions` (newest first) to
        // `operands`; the first other version is the base.
        let take = |versions: &mut KeyVersions, operands: &mut Vec<Vec<u8>>| {
            versions.sort_by_key(|v| std::cmp::Reverse(v.0));
            for (s, kind, v) in versions.drain(..) {
                if s < tombstone {
                    return Some((ValueKind::Deletion, Vec::new()));
                }
                if kind != ValueKind::Merge {
                    return Some((kind, v));
                }
                operands.push(v);
            }
            None
        };
        let (searched, mut collected) = pre.map_or((0, None), |(i, v)| (i, Some(v)));
        for (i, mem) in mems().enumerate().skip(searched) {
            match collected.take().filter(|_| i == searched) {
                Some(v) => versions.extend(v),
                None => {
                    mem.versions(lookup, &mut versions);
                }
            }
            if let Some((kind, v)) = take(&mut versions, &mut operands) {
                base = Some((kind, v, "memtable".into()));
                break;
            }
        }
        if base.is_none() {
            let read = PointLookup {
                key,
                lookup,
                seq,
                rs: ReadSettings::from_read_options(ro),
                prefix_extractor: &|| cf.options().prefix_extractor.clone(),
            };
            sv.version.key_versions(&self.tables, &read, &mut versions, |versions, file| {
                match take(versions, &mut operands) {
                    Some((kind, v)) => {
                        base = Some((kind, v, format!("{file:06}.sst")));
                        true
                    }
                    None => false,
                }
            })?;
        }
        let existing = match base {
            Some((ValueKind::Value, v, _)) => Some(Got::Plain(v)),
            Some((ValueKind::WideColumnEntity, v, _)) => Some(Got::Entity(v)),
            Some((ValueKind::BlobIndex, v, holder)) => Some(Got::Plain(self.resolve_blob(key, &v, &holder, ro)?)),
            _ => None,
        };
        if operands.is_empty() {
            return Ok(existing);
        }
        let op = cf.options().merge_operator.clone().ok_or_else(|| crate::merge_operator::missing(key))?;
        operands.reverse();
        let refs: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
        let base = match &existing {
            None => MergeBase::None,
            Some(Got::Plain(v)) => MergeBase::Plain(v),
            Some(Got::Entity(e)) => MergeBase::Entity(e),
        };
        let (entity, v) = crate::wide_columns::merge(op.as_ref(), key, base, &refs, "read")?;
        Ok(Some(if entity { Got::Entity(v) } else { Got::Plain(v) }))
    }

    /// What the newest entry found for `key` reads as.
    fn finish<V: ReadValue>(&self, key: &[u8], found: Found<V>, ro: &ReadOptions<'_>) -> Result<Option<Got<V>>> {
        match found.kind {
            ValueKind::Value => Ok(Some(Got::Plain(found.value))),
            ValueKind::WideColumnEntity => Ok(Some(Got::Entity(found.value))),
            ValueKind::BlobIndex => self
                .resolve_blob(key, found.value.bytes(), &format!("{:06}.sst", found.file), ro)
                .map(|v| Some(Got::Plain(V::owned(v)))),
            _ => Ok(None),
        }
    }

    /// The value of `key` that the blob index `index` (found in `holder`, a
    /// table's name) points at. A damaged index is corruption naming the
    /// table; a damaged blob, corruption naming the blob file.
    pub(super) fn resolve_blob(&self, key: &[u8], index: &[u8], holder: &str, ro: &ReadOptions<'_>) -> Result<Vec<u8>> {
        let index = BlobIndex::decode(index).map_err(|r| {
            Error::corruption(holder, 0, format!("blob index of key {:?}: {r}", String::from_utf8_lossy(key)))
        })?;
        self.blobs.fetch(key, &index, ro.verify_checksums)
    }

    /// Reads several keys, each in its family, at one sequence (RocksDB's
    /// batched `MultiGet`): per family, the keys are sorted, each memtable is
    /// searched per key, and each table is visited once for all the keys it
    /// may hold, each of its data blocks read once. Answers come back in the
    /// order of `reads`; an error fails only the keys it concerns.
    pub(super) fn multi_get_in(
        &self,
        reads: &[(&ColumnFamilyData, &[u8])],
        ro: &ReadOptions<'_>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        if let Err(e) = self.check_open() {
            return reads.iter().map(|_| Err(e.duplicate())).collect();
        }
        let start = self.stats.start_timer();
        let mut results: Vec<Option<Result<Option<Vec<u8>>>>> = (0..reads.len()).map(|_| None).collect();
        // Families in the order they first appear; the reads of each, and
        // its super version, taken before the sequence (module doc).
        let mut families: Vec<(&ColumnFamilyData, Vec<usize>, Arc<SuperVersion>)> = Vec::new();
        for (i, (cf, _)) in reads.iter().enumerate() {
            match families.iter_mut().find(|(f, _, _)| std::ptr::eq(*f, *cf)) {
                Some((_, idx, _)) => idx.push(i),
                None => families.push((cf, vec![i], cf.super_version())),
            }
        }
        kill_point!("read_between_its_two_steps" => reads
            .iter()
            .map(|_| Err(crate::kill_points::injected("read_between_its_two_steps")))
            .collect());
        let seq = match self.read_sequence(ro) {
            Ok(seq) => seq,
            Err(e) => return reads.iter().map(|_| Err(e.duplicate())).collect(),
        };
        for (cf, idx, sv) in families {
            if let Err(e) = self.check_family(cf) {
                idx.iter().for_each(|&i| results[i] = Some(Err(e.duplicate())));
                continue;
            }
            let keys: Vec<&[u8]> = idx.iter().map(|&i| reads[i].1).collect();
            for (k, r) in self.multi_get_family(cf, &sv, &keys, seq, ro).into_iter().enumerate() {
                results[idx[k]] = Some(r);
            }
        }
        let results: Vec<_> = results.into_iter().map(|r| r.unwrap_or(Ok(None))).collect();
        for r in &results {
            self.stats.reads.record_get(r.as_ref().ok().and_then(|v| v.as_ref()).map(Vec::len));
        }
        self.stats.time_since(|h| &h.get_micros, start);
        results
    }

    /// [`Self::multi_get_in`] for the keys of one family, read in `sv`.
    fn multi_get_family(
        &self,
        cf: &ColumnFamilyData,
        sv: &SuperVersion,
        keys: &[&[u8]],
        seq: SequenceNumber,
        ro: &ReadOptions<'_>,
    ) -> Vec<Result<Option<Vec<u8>>>> {
        let mut batch = KeyBatch::new(keys, seq, ReadSettings::from_read_options(ro), &sv.version.cmp);
        let mut results: Vec<Option<Result<Option<Vec<u8>>>>> = (0..keys.len()).map(|_| None).collect();
        // Keys whose newest version is a merge operand, or that a range
        // tombstone may delete: read on their own at the end.
        let mut merges = Vec::new();
        for o in 0..keys.len() {
            let i = batch.order()[o];
            for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
                if mem.max_covering(keys[i], seq) > 0 {
                    merges.push(i);
                    results[i] = Some(Ok(None));
                    break;
                }
                let r = match mem.get(batch.lookup(i)) {
                    Some(MemLookup::Value(v)) => Ok(Some(v)),
                    Some(MemLookup::Entity(e)) => Got::Entity(e).into_value(keys[i]).map(Some),
                    Some(MemLookup::Deleted) => Ok(None),
                    Some(MemLookup::BlobIndex(v)) => self.resolve_blob(keys[i], &v, "memtable", ro).map(Some),
                    Some(MemLookup::Merge) => {
                        merges.push(i);
                        Ok(None)
                    }
                    None => continue,
                };
                results[i] = Some(r);
                break;
            }
            if results[i].is_some() {
                batch.settle(i);
            }
        }
        sv.version.multi_get(&self.tables, &mut batch, &self.stats.reads, |i, answer| {
            results[i] = Some(match answer {
                BatchAnswer::Found(found) if found.kind == ValueKind::Merge => {
                    merges.push(i);
                    Ok(None)
                }
                BatchAnswer::Found(found) => {
                    self.finish(keys[i], found, ro).and_then(|g| g.map(|g| g.into_value(keys[i])).transpose())
                }
                BatchAnswer::Covered => {
                    merges.push(i);
                    Ok(None)
                }
                BatchAnswer::Failed(e) => Err(e),
            });
        });
        for &i in &merges {
            let got = self.get_slow(cf, sv, keys[i], batch.lookup(i), ro, None);
            results[i] = Some(got.and_then(|g| g.map(|g| g.into_value(keys[i])).transpose()));
        }
        results.into_iter().map(|r| r.unwrap_or(Ok(None))).collect()
    }
}

/// Options passed to each read.
///
/// A read at a snapshot borrows it (as the `rocksdb` crate's
/// `ReadOptions::set_snapshot(&snapshot)` does), so read options cannot
/// outlive their snapshot: a read through a dropped snapshot does not compile.
///
/// ```
/// # use ebb::{Db, Options, ReadOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// # let mut o = Options::default();
/// # o.create_if_missing = true;
/// # let db = Db::open(dir.path(), o).unwrap();
/// db.put(b"k", b"v1").unwrap();
/// let snapshot = db.snapshot();
/// let ro = ReadOptions { snapshot: Some(&snapshot), ..ReadOptions::default() };
/// db.put(b"k", b"v2").unwrap();
/// assert_eq!(db.get_opt(b"k", &ro).unwrap(), Some(b"v1".to_vec()));
/// ```
///
/// ```compile_fail,E0597
/// # use ebb::{Db, Options, ReadOptions};
/// # let dir = tempfile::tempdir().unwrap();
/// # let mut o = Options::default();
/// # o.create_if_missing = true;
/// # let db = Db::open(dir.path(), o).unwrap();
/// let ro = {
///     let snapshot = db.snapshot();
///     ReadOptions { snapshot: Some(&snapshot), ..ReadOptions::default() }
/// }; // the snapshot is dropped here, while `ro` still borrows it
/// db.get_opt(b"k", &ro).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct ReadOptions<'a> {
    /// Read as of this snapshot (from [`crate::Db::snapshot`], of the same
    /// database); the latest state when `None`.
    pub snapshot: Option<&'a super::Snapshot<'a>>,
    /// Verify block checksums on this read. Default true.
    pub verify_checksums: bool,
    /// Put blocks read into the block cache. Default true.
    pub fill_cache: bool,
    /// Iterators see no key below this (inclusive).
    pub iterate_lower_bound: Option<Vec<u8>>,
    /// Iterators see no key at or above this (exclusive).
    pub iterate_upper_bound: Option<Vec<u8>>,
    /// Bytes iterators read ahead of each data block they read from a file;
    /// 0 means auto readahead (`initial_auto_readahead_size` growing to
    /// `max_auto_readahead_size` on sequential reads). RocksDB
    /// `ReadOptions::readahead_size`; default 0.
    pub readahead_size: usize,
    /// With a prefix extractor: a seek (or `seek_for_prev`) to a key in its
    /// domain stays within that key's prefix, the iterator ending where the
    /// prefix does, and skips the tables whose bloom filter lacks the
    /// prefix (RocksDB `prefix_same_as_start`). Default false.
    pub prefix_same_as_start: bool,
    /// Ignore the prefix extractor: seeks are in total order and no table is
    /// skipped by prefix (RocksDB `total_order_seek`). Default false.
    pub total_order_seek: bool,
    /// In a column family with timestamps (docs/timestamps.md), read as of
    /// this timestamp: the newest version of each key at or below it
    /// (RocksDB `ReadOptions::timestamp`). Required there, and refused in a
    /// family without timestamps. Default `None`.
    pub timestamp: Option<u64>,
}

impl Default for ReadOptions<'_> {
    fn default() -> Self {
        ReadOptions {
            snapshot: None,
            verify_checksums: true,
            fill_cache: true,
            iterate_lower_bound: None,
            iterate_upper_bound: None,
            readahead_size: 0,
            prefix_same_as_start: false,
            total_order_seek: false,
            timestamp: None,
        }
    }
}

impl ReadSettings {
    /// The settings a user's [`ReadOptions`] ask for: a `readahead_size` of 0
    /// means auto readahead, as in RocksDB.
    pub fn from_read_options(o: &ReadOptions) -> Self {
        let readahead = if o.readahead_size > 0 { Readahead::Fixed(o.readahead_size) } else { Readahead::Auto };
        ReadSettings {
            verify_checksums: o.verify_checksums,
            fill_cache: o.fill_cache,
            readahead,
            for_compaction: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_options_default_to_verified_cached_reads_with_auto_readahead() {
        let d = ReadOptions::default();
        assert!(d.snapshot.is_none() && d.verify_checksums && d.fill_cache);
        assert_eq!(d.readahead_size, 0, "RocksDB's default");
        let rs = ReadSettings::from_read_options(&d);
        assert_eq!(rs.readahead, Readahead::Auto);
        let fixed = ReadSettings::from_read_options(&ReadOptions { readahead_size: 4096, ..d });
        assert_eq!(fixed.readahead, Readahead::Fixed(4096));
    }
}
