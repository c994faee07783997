//! Point reads through a version (LevelDB `Version::Get`, RocksDB's
//! `Version::Get` and `MultiGet`): the levels walked newest first, and each
//! table that may hold the key asked one question through the table cache
//! ([`crate::sst::Table::lookup`]), the table checking its own filters and
//! range tombstones. Memtables, snapshots, merge operators and blob files
//! are the database's (`db/read.rs`).
//!
//! What it owns: the walk and how the tables' answers combine: [`Found`]
//! (the newest entry of a key), [`KeyBatch`] (the state of a batched read).
//!
//! Invariants:
//! 1. L0 files may overlap, in keys and (after an L0→L0 compaction) in
//!    sequences: every L0 file whose range holds the key is asked, except
//!    one whose newest sequence is older than an entry found already; the
//!    newest entry wins. Below L0 at most one file per level holds the key,
//!    and the first level with an entry ends the walk.
//! 2. A range tombstone of a table deletes the versions below it in that
//!    table and every older one: the entry found is weighed against the
//!    newest tombstone of the tables asked, all of which are at or above its
//!    level; one that is older reads as absent.
//! 3. A table that cannot be opened or read fails the read that reaches it;
//!    it is never skipped. A table's filter verdict that rules the key out
//!    counts once in `ReadCounters::bloom_useful`.
//!
//! Thread-safety: a version is immutable and read by any number of threads;
//! the table cache does its own locking.

use std::sync::{Arc, OnceLock};

use super::{FileMetaData, TableCache, TableRef, Version};
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::key::{append_internal_key, SequenceNumber, ValueKind, KIND_FOR_SEEK};
use crate::sst::filter::filter_hash;
use crate::sst::{copied_entry, BatchEntry, FilterProbe, PointLookup, ReadSettings, ReadValue, Table, TableEntry};
use crate::stats::ReadCounters;

/// L0 tables whose filter probes a point read starts together (see
/// [`Version::get`]): enough to overlap the memory waits of a deep L0, few
/// enough to keep on the stack.
const L0_PROBE_BATCH: usize = 8;
/// The fewest L0 files a point read batches; below, the few probes cost
/// less than setting up a batch.
const L0_BATCH_FROM: usize = 4;

/// A version's L0 tables, opened, in the order of its L0 files: kept by the version once a point read found them all
/// open in a table cache that keeps every table open (so they stay open as
/// long as the version lives). A point read over a deep L0 then walks them
/// without finding each in the table cache, and asks a file's key range
/// only when its filter lets the key through. A copy of the version starts
/// without them.
#[derive(Default)]
pub(super) struct L0Tables(OnceLock<KeptTables>);

/// L0's tables, in the order of the L0 files.
type KeptTables = Box<[Arc<Table>]>;

impl L0Tables {
    /// None kept yet.
    pub(super) const fn empty() -> L0Tables {
        L0Tables(OnceLock::new())
    }
}

impl Clone for L0Tables {
    fn clone(&self) -> Self {
        L0Tables::default()
    }
}

impl std::fmt::Debug for L0Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("L0Tables").field(&self.0.get().map(|t| t.len())).finish()
    }
}

/// The newest entry of a key a read has found in the tables.
pub struct Found<V> {
    /// Its sequence.
    pub seq: SequenceNumber,
    /// Its kind.
    pub kind: ValueKind,
    /// Its value (empty for a tombstone).
    pub value: V,
    /// The number of the table it came from (for errors).
    pub file: u64,
}

/// A key's versions as a read collects them: sequence, kind, value.
pub type KeyVersions = Vec<(SequenceNumber, ValueKind, Vec<u8>)>;

/// The error for an entry of table `file` whose internal key does not parse.
fn unparsable(file: u64) -> Error {
    Error::corruption(format!("{file:06}.sst"), 0, "unparsable internal key")
}

impl Version {
    /// The newest entry of `read`'s key at or below its sequence in this
    /// version's tables, `None` when they hold none or a range tombstone
    /// deletes it (invariant 2).
    pub fn get<V: ReadValue>(
        &self,
        tables: &TableCache,
        read: &PointLookup<'_>,
        stats: &ReadCounters,
    ) -> Result<Option<Found<V>>> {
        let key = read.key;
        let mut best: Option<Found<V>> = None;
        // The newest range tombstone covering the key of the tables asked.
        let mut floor = 0;
        // Asks `f`'s table (`probe`: its filter probe, when started) and keeps
        // its entry if it is the newest so far; true once nothing deeper can
        // be newer (a hit below L0).
        let ask = |best: &mut Option<Found<V>>,
                   floor: &mut SequenceNumber,
                   level: usize,
                   f: &FileMetaData,
                   table: &Table,
                   probe: Option<FilterProbe<'_>>|
         -> Result<bool> {
            let got = table.lookup::<V>(read, probe)?;
            *floor = (*floor).max(got.tombstone);
            let (seq, kind, value) = match got.entry {
                TableEntry::FilteredOut => {
                    stats.record_bloom_useful();
                    return Ok(false);
                }
                TableEntry::Absent => return Ok(false),
                TableEntry::Unparsable => return Err(unparsable(f.number)),
                TableEntry::Found(seq, kind, value) => (seq, kind, value),
            };
            if best.as_ref().is_none_or(|b| seq > b.seq) {
                *best = Some(Found { seq, kind, value, file: f.number });
            }
            Ok(level > 0)
        };
        let newer_found =
            |best: &Option<Found<V>>, f: &FileMetaData| best.as_ref().is_some_and(|b| f.largest_seq < b.seq);
        // With timestamps the files are found by the key with the read's
        // (the lookup's user key); `key`, without it, asks the filters.
        let lookup_key = crate::key::user_key(read.lookup);
        let l0 = if self.num_files(0) >= L0_BATCH_FROM { self.open_l0_tables(tables) } else { None };
        let mut files = self.files_for_key_from(lookup_key, usize::from(l0.is_some())).peekable();
        // L0's files, when there are several, a batch at a time: every
        // filter probe of a batch is started (its filter line prefetched)
        // before the first is answered, so a read over many L0 runs waits
        // for memory once per batch instead of once per file (docs/cache.md,
        // "Point reads over many L0 files"). A shallow L0 is read as the
        // levels below it, one file after the other.
        if let Some(l0) = l0 {
            // L0's tables as the version keeps them, a batch at a time, the
            // filters first: a file's range is compared only to count a
            // filter's verdict or for a key its filter lets through
            // (`files` starts below L0).
            let hash = filter_hash(key);
            for (files, tables) in self.levels[0].chunks(L0_PROBE_BATCH).zip(l0.chunks(L0_PROBE_BATCH)) {
                let probes: [Option<FilterProbe<'_>>; L0_PROBE_BATCH] = std::array::from_fn(|i| {
                    let f = files.get(i)?;
                    (!newer_found(&best, f)).then(|| tables[i].start_filter_probe(key, hash))
                });
                for ((f, table), probe) in files.iter().zip(tables).zip(probes) {
                    let Some(probe) = probe else { continue };
                    if newer_found(&best, f) {
                        continue;
                    }
                    // A table with range tombstones is asked whatever its
                    // filter says: they may cover the key.
                    if f.num_range_deletions == 0 && !probe.may_match() {
                        if self.range_holds(f, lookup_key) {
                            stats.record_bloom_useful();
                        }
                    } else if self.range_holds(f, lookup_key) {
                        ask(&mut best, &mut floor, 0, f, table, Some(probe))?;
                    }
                }
            }
        } else if self.num_files(0) >= L0_BATCH_FROM {
            let mut hash = None;
            loop {
                let mut batch: [Option<(&FileMetaData, TableRef)>; L0_PROBE_BATCH] = Default::default();
                let mut opened = 0;
                // Only the batch's first table may be opened here (a read of
                // the file): the read needs it, as nothing newer was found,
                // and its failure is the read's. A later one not open yet
                // ends the batch and starts the next, which opens it only if
                // the read still needs it, as when the files are read one by
                // one: so no file is read that the answer does not need, and
                // no failure to read one is dropped.
                while opened < L0_PROBE_BATCH {
                    let Some(&(level, f)) = files.peek() else { break };
                    if level != 0 {
                        break;
                    }
                    if newer_found(&best, f) {
                        files.next();
                        continue;
                    }
                    let table = match opened {
                        0 => tables.get(f, 0, &self.cmp)?,
                        _ => match tables.get_if_open(f) {
                            Some(table) => table,
                            None => break,
                        },
                    };
                    files.next();
                    batch[opened] = Some((f, table));
                    opened += 1;
                }
                if opened == 0 {
                    break;
                }
                let hash = *hash.get_or_insert_with(|| filter_hash(key));
                let probes: [Option<FilterProbe<'_>>; L0_PROBE_BATCH] =
                    std::array::from_fn(|i| batch[i].as_ref().map(|(_, table)| table.start_filter_probe(key, hash)));
                for (slot, probe) in batch.iter().zip(probes) {
                    let (Some((f, table)), Some(probe)) = (slot, probe) else { break };
                    if !newer_found(&best, f) {
                        ask(&mut best, &mut floor, 0, f, table, Some(probe))?;
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
            let table = tables.get(f, level, &self.cmp)?;
            if ask(&mut best, &mut floor, level, f, &table, None)? {
                break;
            }
        }
        // L0's files may overlap in sequences: all asked are weighed. A file
        // skipped for its sequences holds no tombstone newer than the entry
        // found (a file's newest sequence counts its tombstones').
        Ok(best.filter(|b| b.seq >= floor))
    }

    /// L0's tables when all are open in a table cache that keeps every
    /// table open, kept by the version from the first read that finds
    /// them so, in the order of its L0 files; `None` otherwise (the read
    /// then finds each in the cache). A version is not changed once read.
    fn open_l0_tables(&self, tables: &TableCache) -> Option<&[Arc<Table>]> {
        let l0 = &self.levels[0];
        if let Some(kept) = self.l0_tables.0.get() {
            return (kept.len() == l0.len()).then_some(&kept[..]);
        }
        if tables.is_bounded() {
            return None;
        }
        // Not kept while a table is not open: a later read may find it so.
        let opened: KeptTables =
            l0.iter().map(|f| tables.get_if_open(f).map(|t| Arc::clone(&t))).collect::<Option<_>>()?;
        Some(&self.l0_tables.0.get_or_init(|| opened)[..])
    }

    /// The newest range tombstone covering `key` at or below `seq` in the
    /// tables that may hold the key (those the version records tombstones
    /// for); 0 for none.
    pub fn max_covering_tombstone(
        &self,
        tables: &TableCache,
        key: &[u8],
        seq: SequenceNumber,
    ) -> Result<SequenceNumber> {
        let mut floor = 0;
        for (level, f) in self.files_for_key(key).filter(|(_, f)| f.num_range_deletions > 0) {
            floor = floor.max(tables.get(f, level, &self.cmp)?.max_covering_tombstone(key, seq));
        }
        Ok(floor)
    }

    /// Collects the versions of `read`'s key at or below its sequence,
    /// newest first within each table, from the tables that may hold it, a
    /// level at a time (L0's files together, as they may overlap in
    /// sequences): after each, `settled(versions, file)` is called with
    /// what was collected so far and the last table asked, and the walk
    /// stops once it answers true (the database's merge of operands,
    /// RocksDB's `MergeContext`).
    pub fn key_versions(
        &self,
        tables: &TableCache,
        read: &PointLookup<'_>,
        versions: &mut KeyVersions,
        mut settled: impl FnMut(&mut KeyVersions, u64) -> bool,
    ) -> Result<()> {
        let mut files = self.files_for_key(read.key).peekable();
        while let Some((level, f)) = files.next() {
            let table = tables.get(f, level, &self.cmp)?;
            if !table.key_versions(read, |seq, kind, value| versions.push((seq, kind, value.to_vec())))? {
                return Err(unparsable(f.number));
            }
            if (level > 0 || files.peek().is_none_or(|(l, _)| *l > 0)) && settled(versions, f.number) {
                break;
            }
        }
        Ok(())
    }

    /// Reads the keys of `batch` still open in this version's tables
    /// (RocksDB's batched `MultiGet`): each table is visited once for all
    /// the keys it may hold, each of its data blocks read once. Keys settle
    /// after L0 and after each deeper level, in the order of their index,
    /// with `answer(i, ..)`; keys no table holds are left open.
    pub fn multi_get(
        &self,
        tables: &TableCache,
        batch: &mut KeyBatch<'_>,
        stats: &ReadCounters,
        mut answer: impl FnMut(usize, BatchAnswer),
    ) {
        let cmp = &self.cmp;
        let keys = batch.keys;
        // L0, newest file first: every file whose range holds the key and
        // that may hold a newer entry than the newest found so far.
        for f in &self.levels[0] {
            batch.wanted.clear();
            for &i in &batch.order {
                if !batch.settled[i]
                    && self.range_holds(f, keys[i])
                    && batch.best[i].as_ref().is_none_or(|b| f.largest_seq >= b.seq)
                {
                    batch.wanted.push(i);
                }
            }
            self.multi_get_table(tables, batch, f, 0, stats, &mut answer);
        }
        batch.settle_found(&mut answer);
        // Deeper levels: the keys still open, in runs that the same file of
        // the level may hold (the keys are sorted, so each file's keys are
        // consecutive).
        for (level, files) in self.levels.iter().enumerate().skip(1) {
            let mut run_file: Option<usize> = None;
            batch.wanted.clear();
            for o in 0..batch.order.len() {
                let i = batch.order[o];
                if batch.settled[i] {
                    continue;
                }
                let at = files.partition_point(|f| cmp.lt(f.largest_user_key(), keys[i]));
                if files.get(at).is_none_or(|f| cmp.lt(keys[i], f.smallest_user_key())) {
                    continue;
                }
                if let Some(previous) = run_file.filter(|&r| r != at) {
                    self.multi_get_table(tables, batch, &files[previous], level, stats, &mut answer);
                    batch.wanted.clear();
                }
                run_file = Some(at);
                batch.wanted.push(i);
            }
            if let Some(at) = run_file {
                self.multi_get_table(tables, batch, &files[at], level, stats, &mut answer);
            }
            batch.settle_found(&mut answer);
        }
    }

    /// Looks the keys `batch.wanted` (ascending) up in `f`, keeping for each
    /// the entry if newer than the one found so far; an error, or a range
    /// tombstone of the table covering the key, settles the key.
    fn multi_get_table(
        &self,
        tables: &TableCache,
        batch: &mut KeyBatch<'_>,
        f: &FileMetaData,
        level: usize,
        stats: &ReadCounters,
        answer: &mut impl FnMut(usize, BatchAnswer),
    ) {
        if batch.wanted.is_empty() {
            return;
        }
        let table = match tables.get(f, level, &self.cmp) {
            Ok(t) => t,
            Err(e) => {
                for &i in &batch.wanted {
                    batch.settled[i] = true;
                    answer(i, BatchAnswer::Failed(e.duplicate()));
                }
                return;
            }
        };
        let KeyBatch { keys, buf, ends, hashes, seq, rs, settled, best, wanted, passing, .. } = batch;
        let (buf, ends, hashes): (&[u8], &[usize], &[u64]) = (buf, ends, hashes);
        table.multi_get(
            rs,
            *seq,
            wanted,
            passing,
            |i| keys[i],
            |i| lookup_at(buf, ends, i),
            |i| hashes[i],
            |i, entry| match entry {
                BatchEntry::FilteredOut => stats.record_bloom_useful(),
                BatchEntry::Covered => {
                    settled[i] = true;
                    answer(i, BatchAnswer::Covered);
                }
                BatchEntry::Failed(e) => {
                    settled[i] = true;
                    answer(i, BatchAnswer::Failed(e));
                }
                BatchEntry::Found(ikey, value) => match copied_entry(ikey, value) {
                    None => {
                        settled[i] = true;
                        answer(i, BatchAnswer::Failed(unparsable(f.number)));
                    }
                    Some((seq, kind, value)) => {
                        if best[i].as_ref().is_none_or(|b| seq > b.seq) {
                            best[i] = Some(Found { seq, kind, value, file: f.number });
                        }
                    }
                },
            },
        );
    }
}

/// How a key of a batched read ([`Version::multi_get`]) settled.
pub enum BatchAnswer {
    /// The newest entry of the key in the tables.
    Found(Found<Vec<u8>>),
    /// A range tombstone of a table covers the key: the caller reads it
    /// alone (through [`Version::max_covering_tombstone`] and
    /// [`Version::key_versions`]).
    Covered,
    /// The error that kept the key from being answered (only the keys of a
    /// damaged or missing table fail).
    Failed(Error),
}

/// The keys of a batched read of one family, sorted, with their lookup keys
/// and filter hashes, and which are still open.
pub struct KeyBatch<'a> {
    keys: &'a [&'a [u8]],
    /// The keys' indexes in the family's key order.
    order: Vec<usize>,
    /// Every lookup key in one buffer: key i's is `buf[ends[i-1]..ends[i]]`.
    buf: Vec<u8>,
    ends: Vec<usize>,
    /// Each key's bloom filter hash, the same in every table.
    hashes: Vec<u64>,
    seq: SequenceNumber,
    rs: ReadSettings,
    /// Keys answered already (by the memtables, or by a level).
    settled: Vec<bool>,
    /// The newest entry found for each open key.
    best: Vec<Option<Found<Vec<u8>>>>,
    /// The keys to look up in the table at hand (ascending), and those its
    /// filter lets through: reused from table to table.
    wanted: Vec<usize>,
    passing: Vec<usize>,
}

impl<'a> KeyBatch<'a> {
    /// A read of `keys` at `seq`, sorted in `cmp`'s order, its data blocks
    /// read as `rs` says.
    pub fn new(keys: &'a [&'a [u8]], seq: SequenceNumber, rs: ReadSettings, cmp: &UserComparator) -> Self {
        let mut order: Vec<usize> = (0..keys.len()).collect();
        order.sort_by(|&a, &b| cmp.compare(keys[a], keys[b]));
        let mut buf = Vec::with_capacity(keys.iter().map(|k| k.len() + 8).sum());
        let mut ends = Vec::with_capacity(keys.len());
        for k in keys {
            append_internal_key(&mut buf, k, seq, KIND_FOR_SEEK);
            ends.push(buf.len());
        }
        KeyBatch {
            keys,
            order,
            buf,
            ends,
            hashes: keys.iter().map(|k| filter_hash(k)).collect(),
            seq,
            rs,
            settled: vec![false; keys.len()],
            best: (0..keys.len()).map(|_| None).collect(),
            wanted: Vec::with_capacity(keys.len()),
            passing: Vec::with_capacity(keys.len()),
        }
    }

    /// The keys' indexes in key order.
    pub fn order(&self) -> &[usize] {
        &self.order
    }

    /// Key `i`'s lookup key.
    pub fn lookup(&self, i: usize) -> &[u8] {
        lookup_at(&self.buf, &self.ends, i)
    }

    /// Marks key `i` answered (by a memtable): the tables are not asked.
    pub fn settle(&mut self, i: usize) {
        self.settled[i] = true;
    }

    /// Settles every open key that has found an entry.
    fn settle_found(&mut self, answer: &mut impl FnMut(usize, BatchAnswer)) {
        for i in 0..self.keys.len() {
            if !self.settled[i] {
                if let Some(found) = self.best[i].take() {
                    self.settled[i] = true;
                    answer(i, BatchAnswer::Found(found));
                }
            }
        }
    }
}

/// Key `i`'s lookup key in a batch's buffer.
fn lookup_at<'b>(buf: &'b [u8], ends: &[usize], i: usize) -> &'b [u8] {
    let start = if i == 0 { 0 } else { ends[i - 1] };
    &buf[start..ends[i]]
}
