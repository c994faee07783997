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
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{
    append_internal_key, parse_internal_key, with_internal_key, SequenceNumber, ValueKind, KIND_FOR_SEEK,
};
use crate::memtable::MemLookup;
use crate::sst::filter::filter_hash;
use crate::sst::{FilterProbe, PinnableSlice, ReadSettings, Readahead, Table};
use crate::version::{FileMetaData, TableRef};

/// How a point read hands out the value it finds: copied into a vector, or
/// pinned in its block.
pub(crate) trait ReadValue: Sized {
    /// A value that is owned already (a memtable's, a blob's).
    fn owned(v: Vec<u8>) -> Self;
    /// The bytes.
    fn bytes(&self) -> &[u8];
    /// The entry of `lookup`'s user key in `table` at or below its sequence:
    /// `Some(None)` when the entry's internal key does not parse. The value
    /// of a tombstone is not kept.
    #[allow(clippy::type_complexity)]
    fn from_table(
        table: &Table,
        rs: &ReadSettings,
        lookup: &[u8],
    ) -> Result<Option<Option<(SequenceNumber, ValueKind, Self)>>>;
}

impl ReadValue for Vec<u8> {
    fn owned(v: Vec<u8>) -> Self {
        v
    }
    fn bytes(&self) -> &[u8] {
        self
    }
    fn from_table(
        table: &Table,
        rs: &ReadSettings,
        lookup: &[u8],
    ) -> Result<Option<Option<(SequenceNumber, ValueKind, Self)>>> {
        // Only a value (or blob index) is copied out of the block; the key
        // is parsed in place.
        table.get_past_filter_with(rs, lookup, copied_entry)
    }
}

impl ReadValue for PinnableSlice {
    fn owned(v: Vec<u8>) -> Self {
        PinnableSlice::from_vec(v)
    }
    fn bytes(&self) -> &[u8] {
        self
    }
    fn from_table(
        table: &Table,
        rs: &ReadSettings,
        lookup: &[u8],
    ) -> Result<Option<Option<(SequenceNumber, ValueKind, Self)>>> {
        table.get_past_filter_pinned(rs, lookup, |ikey, value| parse_internal_key(ikey).map(|p| (p.seq, p.kind, value)))
    }
}

/// The newest entry a read has found for a key so far: its sequence, kind,
/// value and the table it came from (for errors).
type Found<V> = (SequenceNumber, ValueKind, V, u64);

/// L0 tables whose filter probes a point read starts together (see
/// `get_with_lookup`): enough to overlap the memory waits of a deep L0,
/// few enough to keep on the stack.
const L0_PROBE_BATCH: usize = 8;
/// The fewest L0 files a point read batches; below, the few probes cost
/// less than setting up a batch.
const L0_BATCH_FROM: usize = 4;

/// An entry found in a table as a read keeps it: sequence, kind, and the
/// value copied out of the block only for a value or blob index (the key is
/// parsed in place); `None` when the internal key does not parse.
fn copied_entry(ikey: &[u8], value: &[u8]) -> Option<(SequenceNumber, ValueKind, Vec<u8>)> {
    parse_internal_key(ikey).map(|p| (p.seq, p.kind, if p.kind.is_value() { value.to_vec() } else { Vec::new() }))
}

/// The sequence a lookup key reads at.
fn lookup_sequence(lookup: &[u8]) -> SequenceNumber {
    parse_internal_key(lookup).map_or(0, |p| p.seq)
}

fn unparsable(table: u64) -> Error {
    Error::corruption(format!("{table:06}.sst"), 0, "unparsable internal key")
}

impl DbInner {
    /// Reads `key` in `cf` as `ro` says, timed and counted.
    pub(super) fn get_in<V: ReadValue>(
        &self,
        cf: &ColumnFamilyData,
        key: &[u8],
        ro: &ReadOptions<'_>,
    ) -> Result<Option<V>> {
        self.check_open()?;
        self.check_family(cf)?;
        let sv = cf.super_version_guard();
        kill_point!("read_between_its_two_steps");
        let seq = self.read_sequence(ro)?;
        let start = self.stats.start_timer();
        // The lookup key on the stack (for keys up to 56 bytes): a copied
        // value is then the read's one allocation.
        let r = with_internal_key(key, seq, KIND_FOR_SEEK, |lookup| self.get_with_lookup(cf, &sv, key, lookup, ro));
        let s = &self.stats;
        s.reads.record_get(r.as_ref().ok().and_then(|v: &Option<V>| v.as_ref()).map(|v| v.bytes().len()));
        s.time_since(|h| &h.get_micros, start);
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
    ) -> Result<Option<V>> {
        let seq = lookup_sequence(lookup);
        let slow = |pre| self.get_slow(cf, sv, key, lookup, ro, pre).map(|v| v.map(V::owned));
        // The newest range tombstone covering the key that the read sees,
        // from the sources asked so far: a version below it is deleted. The
        // sources go newest first, and a tombstone in an older source is
        // older than every version of the key a newer one holds, so the
        // first version found is compared with the sources up to its own.
        let mut floor = 0;
        // A merge operand's versions, collected by the search that found it.
        let mut versions = Vec::new();
        for (i, mem) in std::iter::once(&sv.mem).chain(sv.imm.iter()).enumerate() {
            floor = floor.max(mem.max_covering(key, seq));
            match mem.get_entry_or_versions(lookup, &mut versions) {
                Some((s, _)) if s < floor => return Ok(None),
                Some((_, MemLookup::Value(v))) => return Ok(Some(V::owned(v))),
                Some((_, MemLookup::Deleted)) => return Ok(None),
                Some((_, MemLookup::BlobIndex(v))) => {
                    return self.resolve_blob(key, &v, "memtable", ro).map(|v| Some(V::owned(v)))
                }
                Some((_, MemLookup::Merge)) => return slow(Some((i, versions))),
                None => {}
            }
        }
        if floor > 0 {
            return Ok(None);
        }
        let rs = ReadSettings::from_read_options(ro);
        // L0 files may overlap in sequence ranges (after L0→L0), so keep the
        // newest hit, stopping once no remaining file can be newer.
        let mut best: Option<Found<V>> = None;
        let mut best_level = 0;
        // Reads `table` (file `f` of `level`) if its filters may hold the
        // key, keeping its entry if it is the newest so far; true once
        // nothing deeper can be newer (a hit below L0).
        let read_table = |best: &mut Option<Found<V>>,
                          best_level: &mut usize,
                          level: usize,
                          f: &FileMetaData,
                          table: &Table,
                          may_match: bool|
         -> Result<bool> {
            if !may_match || !self.prefix_may_match(cf, table, key) {
                self.stats.reads.record_bloom_useful();
                return Ok(false);
            }
            let Some(hit) = V::from_table(table, &rs, lookup)? else { return Ok(false) };
            let (seq, kind, value) = hit.ok_or_else(|| unparsable(f.number))?;
            if best.as_ref().is_none_or(|(s, ..)| seq > *s) {
                *best = Some((seq, kind, value, f.number));
                *best_level = level;
            }
            Ok(level > 0)
        };
        let newer_found =
            |best: &Option<Found<V>>, f: &FileMetaData| best.as_ref().is_some_and(|(s, ..)| f.largest_seq < *s);
        let mut files = sv.version.files_for_key(key).peekable();
        // L0's files, when there are several, a batch at a time: every
        // filter probe of a batch is started (its filter line prefetched)
        // before the first is answered, so a read over many L0 runs waits
        // for memory once per batch instead of once per file (docs/cache.md,
        // "Point reads over many L0 files"). A shallow L0 is read as the
        // levels below it, one file after the other.
        if sv.version.num_files(0) >= L0_BATCH_FROM {
            let mut hash = None;
            loop {
                let mut batch: [Option<(&FileMetaData, TableRef<'_>)>; L0_PROBE_BATCH] = Default::default();
                let mut opened = 0;
                // A table that fails to open fails the read only if the read
                // reaches it, as when the files are read one by one.
                let mut failed: Option<(&FileMetaData, Error)> = None;
                while opened < L0_PROBE_BATCH {
                    let Some((_, f)) = files.next_if(|(level, _)| *level == 0) else { break };
                    if newer_found(&best, f) {
                        continue;
                    }
                    match self.tables.get(f, 0, &sv.version.cmp) {
                        Ok(table) => {
                            batch[opened] = Some((f, table));
                            opened += 1;
                        }
                        Err(e) => {
                            failed = Some((f, e));
                            break;
                        }
                    }
                }
                if opened == 0 && failed.is_none() {
                    break;
                }
                let hash = *hash.get_or_insert_with(|| filter_hash(key));
                let probes: [Option<FilterProbe<'_>>; L0_PROBE_BATCH] =
                    std::array::from_fn(|i| batch[i].as_ref().map(|(_, table)| table.start_filter_probe(key, hash)));
                for (slot, probe) in batch.iter().zip(&probes) {
                    let (Some((f, table)), Some(probe)) = (slot, probe) else { break };
                    if !newer_found(&best, f) {
                        read_table(&mut best, &mut best_level, 0, f, table, probe.may_match())?;
                    }
                }
                if let Some((f, e)) = failed {
                    if !newer_found(&best, f) {
                        return Err(e);
                    }
                }
            }
        }
        for (level, f) in files {
            if level > 0 && best.is_some() {
                break;
            }
            if level == 0 && newer_found(&best, f) {
                continue;
            }
            let table = self.tables.get(f, level, &sv.version.cmp)?;
            if read_table(&mut best, &mut best_level, level, f, &table, table.key_may_match(key))? {
                break;
            }
        }
        // The tables' tombstones matter only to a version found: those of
        // the files up to its level (every L0 file whose range holds the
        // key; a file skipped above for its sequences holds none newer).
        if best.is_some() {
            for (level, f) in sv.version.files_for_key(key).take_while(|(l, _)| *l <= best_level) {
                if f.num_range_deletions > 0 {
                    if let Some(t) = self.tables.get(f, level, &sv.version.cmp)?.range_tombstones() {
                        floor = floor.max(t.max_covering(key, seq));
                    }
                }
            }
        }
        match best {
            // L0's files may overlap in sequences: all read are weighed.
            Some((s, ..)) if s < floor => Ok(None),
            Some((_, ValueKind::Merge, ..)) => slow(None),
            found => found.map_or(Ok(None), |found| self.finish(key, found, ro)),
        }
    }

    /// For a table whose filter holds prefixes but not whole keys: whether
    /// it may hold `key`'s prefix under the family's extractor.
    fn prefix_may_match(&self, cf: &ColumnFamilyData, table: &Table, key: &[u8]) -> bool {
        if table.whole_key_filtering() {
            return true;
        }
        let opts = cf.options();
        match &opts.prefix_extractor {
            Some(x) if x.in_domain(key) => table.prefix_may_match(x.name(), x.transform(key)),
            _ => true,
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
    ) -> Result<Option<Vec<u8>>> {
        let seq = lookup_sequence(lookup);
        let mems = || std::iter::once(&sv.mem).chain(sv.imm.iter());
        let mut tombstone = mems().map(|m| m.max_covering(key, seq)).max().unwrap_or(0);
        for (level, f) in sv.version.files_for_key(key).filter(|(_, f)| f.num_range_deletions > 0) {
            if let Some(t) = self.tables.get(f, level, &sv.version.cmp)?.range_tombstones() {
                tombstone = tombstone.max(t.max_covering(key, seq));
            }
        }
        let mut operands: Vec<Vec<u8>> = Vec::new();
        let mut versions = Vec::new();
        // The version below the operands, and where it was found.
        let mut base: Option<(ValueKind, Vec<u8>, String)> = None;
        // Moves the operands at the head of `versions` (newest first) to
        // `operands`; the first other version is the base.
        let take = |versions: &mut Vec<(SequenceNumber, ValueKind, Vec<u8>)>, operands: &mut Vec<Vec<u8>>| {
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
            let rs = ReadSettings::from_read_options(ro);
            let mut files = sv.version.files_for_key(key).peekable();
            while let Some((level, f)) = files.next() {
                let table = self.tables.get(f, level, &sv.version.cmp)?;
                if table.key_may_match(key) && self.prefix_may_match(cf, &table, key) {
                    let mut it = table.iter(rs);
                    it.seek(lookup);
                    while it.valid() {
                        let p = parse_internal_key(it.key()).ok_or_else(|| unparsable(f.number))?;
                        if p.user_key != key {
                            break;
                        }
                        versions.push((p.seq, p.kind, it.value().to_vec()));
                        if p.kind != ValueKind::Merge {
                            break;
                        }
                        it.next();
                    }
                    it.status()?;
                }
                // L0's files may overlap in sequences: they are taken
                // together, once the last of them is read.
                if level > 0 || files.peek().is_none_or(|(l, _)| *l > 0) {
                    if let Some((kind, v)) = take(&mut versions, &mut operands) {
                        base = Some((kind, v, format!("{:06}.sst", f.number)));
                        break;
                    }
                }
            }
        }
        let existing = match base {
            Some((ValueKind::Value, v, _)) => Some(v),
            Some((ValueKind::BlobIndex, v, holder)) => Some(self.resolve_blob(key, &v, &holder, ro)?),
            _ => None,
        };
        if operands.is_empty() {
            return Ok(existing);
        }
        let op = cf.options().merge_operator.clone().ok_or_else(|| crate::merge_operator::missing(key))?;
        operands.reverse();
        let refs: Vec<&[u8]> = operands.iter().map(Vec::as_slice).collect();
        crate::merge_operator::full_merge(op.as_ref(), key, existing.as_deref(), &refs, "read").map(Some)
    }

    /// What the newest entry found for `key` reads as.
    fn finish<V: ReadValue>(&self, key: &[u8], found: Found<V>, ro: &ReadOptions<'_>) -> Result<Option<V>> {
        match found {
            (_, ValueKind::Value, v, _) => Ok(Some(v)),
            (_, ValueKind::BlobIndex, v, table) => {
                self.resolve_blob(key, v.bytes(), &format!("{table:06}.sst"), ro).map(|v| Some(V::owned(v)))
            }
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
        let cmp = &sv.version.cmp;
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by(|&a, &b| cmp.compare(keys[a], keys[b]));
        // Every lookup key in one buffer: key i's is `buf[ends[i-1]..ends[i]]`.
        let mut buf = Vec::with_capacity(keys.iter().map(|k| k.len() + 8).sum());
        let mut ends = Vec::with_capacity(keys.len());
        for k in keys {
            append_internal_key(&mut buf, k, seq, KIND_FOR_SEEK);
            ends.push(buf.len());
        }
        let mut batch = Batch {
            keys,
            lookups: Lookups { buf: &buf, ends: &ends },
            results: (0..keys.len()).map(|_| None).collect(),
            best: (0..keys.len()).map(|_| None).collect(),
            rs: ReadSettings::from_read_options(ro),
            hashes: keys.iter().map(|k| filter_hash(k)).collect(),
            wanted: Vec::with_capacity(keys.len()),
            passing: Vec::with_capacity(keys.len()),
            merges: Vec::new(),
            cmp,
        };
        for &i in &order {
            for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
                if mem.max_covering(keys[i], seq) > 0 {
                    batch.merges.push(i);
                    batch.results[i] = Some(Ok(None));
                    break;
                }
                let r = match mem.get(batch.lookups.get(i)) {
                    Some(MemLookup::Value(v)) => Ok(Some(v)),
                    Some(MemLookup::Deleted) => Ok(None),
                    Some(MemLookup::BlobIndex(v)) => self.resolve_blob(keys[i], &v, "memtable", ro).map(Some),
                    Some(MemLookup::Merge) => {
                        batch.merges.push(i);
                        Ok(None)
                    }
                    None => continue,
                };
                batch.results[i] = Some(r);
                break;
            }
        }
        // L0, newest file first: every file whose range holds the key and
        // that may hold a newer entry than the newest found so far.
        for f in &sv.version.levels[0] {
            batch.wanted.clear();
            for &i in &order {
                if batch.results[i].is_none()
                    && cmp.le(f.smallest_user_key(), keys[i])
                    && cmp.le(keys[i], f.largest_user_key())
                    && batch.best[i].as_ref().is_none_or(|(s, ..)| f.largest_seq >= *s)
                {
                    batch.wanted.push(i);
                }
            }
            self.multi_get_table(&mut batch, f, 0);
        }
        self.settle(&mut batch, ro);
        // Deeper levels: the keys still open, in runs that the same file of
        // the level may hold (the keys are sorted, so each file's keys are
        // consecutive).
        for (level, files) in sv.version.levels.iter().enumerate().skip(1) {
            let mut run_file: Option<usize> = None;
            batch.wanted.clear();
            for &i in &order {
                if batch.results[i].is_some() {
                    continue;
                }
                let at = files.partition_point(|f| cmp.lt(f.largest_user_key(), keys[i]));
                if files.get(at).is_none_or(|f| cmp.lt(keys[i], f.smallest_user_key())) {
                    continue;
                }
                if let Some(previous) = run_file.filter(|&r| r != at) {
                    self.multi_get_table(&mut batch, &files[previous], level);
                    batch.wanted.clear();
                }
                run_file = Some(at);
                batch.wanted.push(i);
            }
            if let Some(at) = run_file {
                self.multi_get_table(&mut batch, &files[at], level);
            }
            self.settle(&mut batch, ro);
        }
        // Keys whose newest version is a merge operand are read on their own.
        for &i in &batch.merges {
            batch.results[i] = Some(self.get_slow(cf, sv, keys[i], batch.lookups.get(i), ro, None));
        }
        batch.results.into_iter().map(|r| r.unwrap_or(Ok(None))).collect()
    }

    /// Looks the keys `batch.wanted` (ascending) up in `f`, keeping for each
    /// the entry if newer than the one found so far; an error settles the
    /// key.
    fn multi_get_table(&self, batch: &mut Batch<'_>, f: &FileMetaData, level: usize) {
        if batch.wanted.is_empty() {
            return;
        }
        let table = match self.tables.get(f, level, batch.cmp) {
            Ok(t) => t,
            Err(e) => {
                for &i in &batch.wanted {
                    batch.results[i] = Some(Err(e.duplicate()));
                }
                return;
            }
        };
        if let Some(t) = table.range_tombstones() {
            // Keys a tombstone here may delete are read on their own.
            let seq = lookup_sequence(batch.lookups.get(batch.wanted[0]));
            let (keys, results, merges) = (batch.keys, &mut batch.results, &mut batch.merges);
            batch.wanted.retain(|&i| {
                if t.max_covering(keys[i], seq) == 0 {
                    return true;
                }
                merges.push(i);
                results[i] = Some(Ok(None));
                false
            });
        }
        batch.passing.clear();
        let (wanted, keys, hashes, passing) = (&batch.wanted, batch.keys, &batch.hashes, &mut batch.passing);
        table.keys_may_match(
            wanted.len(),
            |k| keys[wanted[k]],
            |k| hashes[wanted[k]],
            |k, may| {
                if may {
                    passing.push(wanted[k]);
                } else {
                    self.stats.reads.record_bloom_useful();
                }
            },
        );
        let Batch { lookups, results, best, rs, passing, .. } = batch;
        table.multi_get_past_filter(
            rs,
            passing.len(),
            |k| lookups.get(passing[k]),
            |k, r| {
                let i = passing[k];
                let hit = r.and_then(|(ikey, value)| copied_entry(ikey, value).ok_or_else(|| unparsable(f.number)));
                match hit {
                    Err(e) => results[i] = Some(Err(e)),
                    Ok((seq, kind, value)) => {
                        if best[i].as_ref().is_none_or(|(s, ..)| seq > *s) {
                            best[i] = Some((seq, kind, value, f.number));
                        }
                    }
                }
            },
        );
    }

    /// Settles every open key that has found an entry (after L0, and after
    /// each deeper level).
    fn settle(&self, batch: &mut Batch<'_>, ro: &ReadOptions<'_>) {
        for i in 0..batch.keys.len() {
            if batch.results[i].is_none() {
                if let Some(found) = batch.best[i].take() {
                    if found.1 == ValueKind::Merge {
                        // Settled (no older version matters), read at the end.
                        batch.merges.push(i);
                        batch.results[i] = Some(Ok(None));
                    } else {
                        batch.results[i] = Some(self.finish(batch.keys[i], found, ro));
                    }
                }
            }
        }
    }
}

/// A key's versions as a read collects them, newest first: sequence,
/// kind, value.
type KeyVersions = Vec<(SequenceNumber, ValueKind, Vec<u8>)>;

/// The lookup keys of a batch, in one buffer.
#[derive(Clone, Copy)]
struct Lookups<'a> {
    buf: &'a [u8],
    ends: &'a [usize],
}

impl<'a> Lookups<'a> {
    fn get(self, i: usize) -> &'a [u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.buf[start..self.ends[i]]
    }
}

/// The state of one family's batched read.
struct Batch<'a> {
    keys: &'a [&'a [u8]],
    lookups: Lookups<'a>,
    /// The answer of each key, once settled.
    results: Vec<Option<Result<Option<Vec<u8>>>>>,
    /// The newest entry found for each open key.
    best: Vec<Option<Found<Vec<u8>>>>,
    rs: ReadSettings,
    /// Each key's bloom filter hash, the same in every table.
    hashes: Vec<u64>,
    /// The keys to look up in the table at hand (ascending), and those its
    /// filter lets through: reused from table to table.
    wanted: Vec<usize>,
    passing: Vec<usize>,
    /// Keys whose newest version is a merge operand ([`DbInner::get_slow`]).
    merges: Vec<usize>,
    /// The family's key order (the keys are sorted in it).
    cmp: &'a UserComparator,
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
