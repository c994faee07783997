//! Repair: rebuild a database's MANIFEST from the tables and WALs in its
//! directory (LevelDB's `RepairDB`, RocksDB's `RepairDB`), for when the
//! MANIFEST or CURRENT is damaged beyond what an open accepts.
//!
//! Steps, with the directory locked:
//! 1. Read every MANIFEST present leniently (damaged records skipped) for
//!    what it can still tell: the names of column families and which were
//!    dropped, each family's log number, the tables edits removed, the last
//!    sequence number.
//! 2. Replay every WAL leniently (damaged records skipped, as
//!    `SkipAnyCorruptedRecords`) into memtables, per family, skipping what a
//!    family's log number says is already in its tables, and write them out
//!    as tables.
//! 3. Read every table whole with checksums verified: a table that reads
//!    cleanly is kept, with its key range, sequence range and entries; one
//!    that does not, whose column family was dropped, or that a readable
//!    edit removed (a compaction's input whose deletion had not happened:
//!    kept, it could bring back a value a tombstone dropped at the bottom
//!    level had deleted), is set aside.
//! 4. Write a new MANIFEST listing every kept table at level 0 of its
//!    family (L0 files may overlap; compaction sorts them into levels after
//!    the next open), and every blob file a kept table refers to, with the
//!    counters above every number and sequence seen, and point CURRENT at it.
//!    A blob file's garbage is its blobs less the references the kept tables
//!    hold (counted with repeats, so a blob two kept tables refer to is not
//!    garbage until both references are gone); one whose header or footer
//!    is damaged is listed all the same, as holding what the tables refer
//!    to, so reads of its blobs report the damage instead of its being lost.
//! 5. Move what was replaced or could not be used into `lost/`: the old
//!    MANIFESTs, the WALs that were converted, the unreadable tables, the
//!    blob files no kept table refers to.
//!
//! Every family is taken to be in the order of the options' comparator
//! (LevelDB's RepairDB); a MANIFEST record or a table naming another order
//! makes repair refuse before it changes anything (invalid argument naming
//! both: a repair in the wrong order would set every table aside).
//!
//! Nothing is deleted. A table is placed by the column family recorded in
//! its properties; tables written before that property existed go to the
//! default family, and a family whose name no MANIFEST still holds is named
//! `family-<id>`. What repair cannot know, it cannot restore: a table moved
//! to level 0 may hold versions a compaction had already hidden, which reads
//! resolve by sequence number; data only a lost table held is gone.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use super::flush::{write_memtables, TableTarget};
use super::info_log::{InfoLog, Level};
use super::recovery::{list_lost, move_to_lost, newest_number};
use super::WriteBatch;
use crate::blob::{BlobFileReader, BlobIndex};
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::events::{LogDamage, SetAside};
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{parse_internal_key, SequenceNumber, ValueKind};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::sst::table_reader::TableCachePolicy;
use crate::sst::{ReadSettings, Table};
use crate::version::{
    filename, write_manifest, BlobFileMetaData, FamilyVersions, FileMetaData, SnapshotCounters, Version, VersionEdit,
    DEFAULT_COLUMN_FAMILY,
};
use crate::wal::{LogReader, LogRecord, LogWriter};

/// A table the repaired MANIFEST lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairedTable {
    /// Its file number.
    pub number: u64,
    /// The column family it was placed in.
    pub column_family: u32,
    /// Entries read from it.
    pub entries: u64,
    /// Its sequence number range.
    pub sequences: (SequenceNumber, SequenceNumber),
    /// The WAL it was written from, for tables repair made.
    pub from_wal: Option<u64>,
}

/// A blob file the repaired MANIFEST lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairedBlobFile {
    /// Its file number.
    pub number: u64,
    /// The column family whose tables refer to it.
    pub column_family: u32,
    /// Blobs the kept tables refer to (a blob referred to twice counts twice).
    pub references: u64,
    /// Blobs its footer counts; `None` when its header or footer cannot be
    /// read (it is listed all the same: reads of its blobs report the damage).
    pub blobs: Option<u64>,
}

/// A WAL repair turned into tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairedWal {
    /// Its file number.
    pub number: u64,
    /// Intact write batches replayed.
    pub records: u64,
    /// Damage skipped.
    pub damage: Vec<LogDamage>,
}

/// What [`crate::Db::repair`] kept, made and set aside.
#[derive(Debug, Clone, Default)]
pub struct RepairReport {
    /// The new MANIFEST.
    pub manifest: String,
    /// The column families of the repaired database, by id.
    pub column_families: BTreeMap<u32, String>,
    /// The tables it lists.
    pub tables: Vec<RepairedTable>,
    /// The blob files it lists.
    pub blob_files: Vec<RepairedBlobFile>,
    /// The WALs turned into tables.
    pub wals: Vec<RepairedWal>,
    /// Damage skipped in old MANIFESTs while reading them for family names.
    pub manifest_damage: Vec<LogDamage>,
    /// Files moved to `lost/`, with why.
    pub set_aside: Vec<SetAside>,
    /// The last sequence number the repaired database starts from.
    pub last_sequence: SequenceNumber,
}

impl fmt::Display for RepairReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let families: Vec<String> = self.column_families.iter().map(|(id, n)| format!("{n} ({id})")).collect();
        writeln!(f, "repaired: {} lists {} tables in {}", self.manifest, self.tables.len(), families.join(", "))?;
        for t in &self.tables {
            let from = t.from_wal.map(|w| format!(", written from WAL {w:06}.log")).unwrap_or_default();
            writeln!(
                f,
                "  kept {:06}.sst: family {}, {} entries, sequences {}..{}{from}",
                t.number, t.column_family, t.entries, t.sequences.0, t.sequences.1
            )?;
        }
        for b in &self.blob_files {
            let blobs = b.blobs.map_or("its header or footer is damaged".to_string(), |n| format!("{n} blobs"));
            writeln!(
                f,
                "  kept {:06}.blob: family {}, {} references from kept tables, {blobs}",
                b.number, b.column_family, b.references
            )?;
        }
        for w in &self.wals {
            writeln!(f, "  WAL {:06}.log: {} write batches replayed", w.number, w.records)?;
            for d in &w.damage {
                writeln!(f, "    skipped {} bytes at offset {}: {}", d.bytes, d.offset, d.reason)?;
            }
        }
        for d in &self.manifest_damage {
            writeln!(f, "  {}: skipped damage at offset {}: {}", d.file, d.offset, d.reason)?;
        }
        for s in &self.set_aside {
            writeln!(f, "  set aside {} as {}: {}", s.from.display(), s.to.display(), s.why)?;
        }
        writeln!(f, "  last sequence {}", self.last_sequence)
    }
}

/// What the MANIFESTs present still say, read leniently.
#[derive(Default)]
struct Remembered {
    names: BTreeMap<u32, String>,
    dropped: HashSet<u32>,
    log_numbers: BTreeMap<u32, u64>,
    /// The comparator each family's edits name (absent: bytewise).
    comparators: BTreeMap<u32, String>,
    /// Tables an edit removed and no later edit listed again: obsolete (a
    /// compaction's inputs whose deletion did not happen), so not kept.
    removed_tables: HashSet<u64>,
    last_sequence: SequenceNumber,
    max_column_family: u32,
}

/// Rebuilds the MANIFEST of the database in `dir` (module documentation).
pub(crate) fn repair(dir: &Path, options: &Options) -> Result<RepairReport> {
    options.validate()?;
    let fs = Arc::clone(&options.fs);
    if !fs.exists(dir) {
        return Err(Error::invalid(format!("{} does not exist", dir.display())));
    }
    let names = fs.list_dir(dir)?;
    let parsed: Vec<(filename::FileType, u64, String)> =
        names.iter().filter_map(|n| filename::parse_file_name(n).map(|(t, number)| (t, number, n.clone()))).collect();
    let of = |kind: filename::FileType| -> Vec<u64> {
        let mut v: Vec<u64> = parsed.iter().filter(|(t, _, _)| *t == kind).map(|(_, n, _)| *n).collect();
        v.sort_unstable();
        v
    };
    let (tables, manifests) = (of(filename::FileType::Table), of(filename::FileType::Manifest));
    // WALs by number, with their names: final or pending (db/wal_seal.rs).
    let mut wals: Vec<(u64, String)> = parsed
        .iter()
        .filter(|(t, _, _)| *t == filename::FileType::Wal)
        .map(|(_, n, name)| (*n, name.clone()))
        .collect();
    wals.sort_unstable();
    let blob_files = of(filename::FileType::Blob);
    if tables.is_empty() && wals.is_empty() && manifests.is_empty() {
        return Err(Error::invalid(format!(
            "{} holds no tables, WALs or MANIFESTs of an Ebb database; nothing to repair",
            dir.display()
        )));
    }
    let _lock = fs.lock_file(&filename::lock_file(dir))?;
    let log = InfoLog::open(fs.as_ref(), dir, options.keep_log_file_num)?;
    log.log(Level::Warn, &format!("repair of {} started", dir.display()));
    let result = repair_locked(dir, options, &fs, &tables, &wals, &manifests, &blob_files);
    match &result {
        Ok(report) => log.log(Level::Warn, &report.to_string()),
        Err(e) => log.log(Level::Error, &format!("repair failed: {e}")),
    }
    result
}

fn repair_locked(
    dir: &Path,
    options: &Options,
    fs: &Arc<dyn FileSystem>,
    tables: &[u64],
    wals: &[(u64, String)],
    manifests: &[u64],
    blob_files: &[u64],
) -> Result<RepairReport> {
    let mut report = RepairReport::default();
    let remembered = read_manifests(dir, fs.as_ref(), manifests, &mut report)?;
    // Numbers above every file here and in lost/, so none is reused.
    let (names, lost_names) = (fs.list_dir(dir)?, list_lost(fs.as_ref(), dir)?);
    let mut next_number = newest_number(names.iter().chain(&lost_names)).unwrap_or(0) + 1;
    let mut last_sequence = remembered.last_sequence;
    let mut to_lost: Vec<(String, String)> = Vec::new();
    let mut families = remembered.names.clone();
    families.insert(0, DEFAULT_COLUMN_FAMILY.to_string());
    let mut placed = Placed::default();
    // Every family's keys are taken to be in the options' order (LevelDB's
    // RepairDB); a table written in another is set aside.
    let cmp = options.cf_options().user_comparator();
    if let Some((id, other)) = remembered.comparators.iter().find(|(_, c)| c.as_str() != cmp.name()) {
        return Err(wrong_order(&format!("the MANIFEST records column family {id} as ordered by {other}"), &cmp));
    }
    let fs_cmp = (fs.as_ref(), &cmp);
    // Step 3 (the tables found): first, as their properties name their families.
    for &number in tables {
        keep_table(dir, fs_cmp, number, None, &remembered, &mut families, &mut placed, &mut to_lost, &mut report)?;
    }
    // Step 2: WALs into tables, then read back as the others. Every family's
    // tables are written with the table format of `options`.
    let cf_options = options.cf_options();
    for (wal, wal_name) in wals {
        let wal = *wal;
        let (records, damage, mems, max_seq) = replay_wal(&dir.join(wal_name), fs_cmp, wal, &remembered)?;
        last_sequence = last_sequence.max(max_seq);
        for (cf, mem) in mems {
            let number = next_number;
            next_number += 1;
            let name = families.entry(cf).or_insert_with(|| format!("family-{cf}")).clone();
            // Values stay in the tables: repair writes no blob files.
            let target = TableTarget {
                dir,
                fs,
                opts: &cf_options,
                clock: &options.clock,
                cf,
                cf_name: &name,
                bytes_per_sync: options.bytes_per_sync,
                new_blob_number: None,
                // Operands are kept as they are: repair runs no user code.
                merge: None,
                snapshots: &[],
            };
            let out = write_memtables(&target, &[mem], number, max_seq, &mut |_| {})?;
            for f in out.files {
                let (families, placed) = (&mut families, &mut placed);
                keep_table(dir, fs_cmp, f.number, Some(wal), &remembered, families, placed, &mut to_lost, &mut report)?;
            }
        }
        let why = format!("its {records} write batches were written into tables");
        report.wals.push(RepairedWal { number: wal, records, damage });
        to_lost.push((wal_name.clone(), why));
    }
    last_sequence = report.tables.iter().map(|t| t.sequences.1).fold(last_sequence, u64::max);
    let listed_blobs = place_blob_files(dir, fs.as_ref(), blob_files, &placed, &mut to_lost, &mut report);

    // Step 4: the new MANIFEST, every kept table at L0 of its family.
    let manifest_number = next_number;
    let log_number = manifest_number + 1;
    let counters = SnapshotCounters {
        next_file_number: manifest_number + 2,
        last_sequence,
        max_column_family: families.keys().copied().max().unwrap_or(0).max(remembered.max_column_family),
    };
    let versions: BTreeMap<u32, FamilyVersions> = families
        .iter()
        .map(|(id, name)| {
            let l0 = placed.tables.remove(id).unwrap_or_default().into_iter().map(Arc::new).collect();
            let blob_files = listed_blobs.get(id).cloned().unwrap_or_default();
            let current = Arc::new(Version::of(vec![l0], blob_files, cmp.clone()));
            (*id, FamilyVersions { name: name.clone(), current, log_number, full_history_ts_low: 0 })
        })
        .collect();
    // The WAL the repaired state replays from exists, as in every database
    // (recovery checks it): an empty one.
    let wal_path = filename::wal_file(dir, log_number);
    LogWriter::new(fs.new_writable(&wal_path)?, wal_path.display().to_string()).sync()?;
    write_manifest(fs.as_ref(), dir, manifest_number, &versions, counters, &mut false)?;
    report.manifest = format!("MANIFEST-{manifest_number:06}");
    report.column_families = families;
    report.last_sequence = last_sequence;

    // Step 5: what was replaced or could not be used, into lost/.
    for m in manifests {
        to_lost.push((format!("MANIFEST-{m:06}"), "replaced by the repaired MANIFEST".into()));
    }
    report.set_aside = move_to_lost(fs.as_ref(), dir, to_lost)?;
    report.tables.sort_by_key(|t| t.number);
    Ok(report)
}

/// The kept tables by family, and the blob references they hold: per
/// family and blob file, (count, record bytes).
#[derive(Default)]
struct Placed {
    tables: BTreeMap<u32, Vec<FileMetaData>>,
    blob_refs: BTreeMap<u32, BTreeMap<u64, (u64, u64)>>,
}

/// Step 4 for blob files: every blob file a kept table refers to, listed in
/// the families that refer to it (module documentation); the others are
/// marked for `lost/`.
fn place_blob_files(
    dir: &Path,
    fs: &dyn FileSystem,
    blob_files: &[u64],
    placed: &Placed,
    to_lost: &mut Vec<(String, String)>,
    report: &mut RepairReport,
) -> BTreeMap<u32, BTreeMap<u64, BlobFileMetaData>> {
    let mut listed: BTreeMap<u32, BTreeMap<u64, BlobFileMetaData>> = BTreeMap::new();
    for &number in blob_files {
        let referring: Vec<(u32, (u64, u64))> =
            placed.blob_refs.iter().filter_map(|(cf, refs)| refs.get(&number).map(|r| (*cf, *r))).collect();
        if referring.is_empty() {
            to_lost.push((format!("{number:06}.blob"), "no table kept refers to it".into()));
            continue;
        }
        let footer = open_blob_file(dir, fs, number).ok().map(|r| r.footer());
        for (cf, (references, reference_bytes)) in referring {
            // The totals are at least the references, so a blob referred to
            // more often than the file holds blobs (tables kept twice) never
            // reads as all garbage while a reference is left.
            let total_count = footer.map_or(references, |f| f.blob_count.max(references));
            let total_bytes = footer.map_or(reference_bytes, |f| f.blob_bytes.max(reference_bytes));
            let meta = BlobFileMetaData {
                number,
                total_count,
                total_bytes,
                garbage_count: total_count - references,
                garbage_bytes: total_bytes - reference_bytes,
            };
            listed.entry(cf).or_default().insert(number, meta);
            let blobs = footer.map(|f| f.blob_count);
            report.blob_files.push(RepairedBlobFile { number, column_family: cf, references, blobs });
        }
    }
    listed
}

fn open_blob_file(dir: &Path, fs: &dyn FileSystem, number: u64) -> Result<BlobFileReader> {
    let path = filename::blob_file(dir, number);
    let size = fs.file_size(&path)?;
    BlobFileReader::open(fs.open_random(&path)?, size, path.display().to_string(), number)
}

/// Step 3 for one table: keeps it, placed in its family, if it reads back
/// whole and its family was not dropped; otherwise marks it for `lost/`.
#[allow(clippy::too_many_arguments)]
fn keep_table(
    dir: &Path,
    (fs, cmp): (&dyn FileSystem, &UserComparator),
    number: u64,
    from_wal: Option<u64>,
    remembered: &Remembered,
    families: &mut BTreeMap<u32, String>,
    placed: &mut Placed,
    to_lost: &mut Vec<(String, String)>,
    report: &mut RepairReport,
) -> Result<()> {
    let name = format!("{number:06}.sst");
    if remembered.removed_tables.contains(&number) {
        to_lost.push((name, "a MANIFEST edit removed it (a compaction's input not yet deleted)".into()));
        return Ok(());
    }
    match scan_table(dir, fs, cmp, number) {
        Ok(ScannedTable { meta, cf, cf_name, blob_refs }) => {
            let cf = cf.unwrap_or(0);
            if remembered.dropped.contains(&cf) {
                to_lost.push((name, format!("its column family {cf} was dropped")));
                return Ok(());
            }
            let fallback = cf_name.unwrap_or_else(|| format!("family-{cf}"));
            families.entry(cf).or_insert(fallback);
            report.tables.push(RepairedTable {
                number,
                column_family: cf,
                entries: meta.num_entries,
                sequences: (meta.smallest_seq, meta.largest_seq),
                from_wal,
            });
            placed.tables.entry(cf).or_default().push(meta);
            let refs = placed.blob_refs.entry(cf).or_default();
            for (number, (count, bytes)) in blob_refs {
                let r = refs.entry(number).or_default();
                r.0 += count;
                r.1 += bytes;
            }
        }
        Err(Error::InvalidArgument(why)) => return Err(wrong_order(&why, cmp)),
        Err(e) => to_lost.push((name, format!("it cannot be read whole: {e}"))),
    }
    Ok(())
}

/// Repair's refusal of a database in another order than `cmp`'s: `why`
/// says which.
fn wrong_order(why: &str, cmp: &UserComparator) -> Error {
    Error::invalid(format!(
        "repair with comparator {} refused, nothing changed: {why} (repair with the options the database was \
         created with)",
        cmp.name()
    ))
}

/// Step 1: family names, drops, log numbers and the last sequence from every
/// MANIFEST present, oldest first, damaged records skipped.
fn read_manifests(dir: &Path, fs: &dyn FileSystem, manifests: &[u64], report: &mut RepairReport) -> Result<Remembered> {
    let mut r = Remembered::default();
    for &m in manifests {
        let path = filename::manifest_file(dir, m);
        let name = path.display().to_string();
        let mut reader = LogReader::new(fs.open_sequential(&path)?, name.clone());
        loop {
            match reader.next()? {
                LogRecord::Record { data, offset } => {
                    let Ok(edit) = VersionEdit::decode(&data, &name, offset) else {
                        report.manifest_damage.push(LogDamage {
                            file: name.clone(),
                            offset,
                            bytes: data.len() as u64,
                            reason: "an edit that does not decode".into(),
                        });
                        continue;
                    };
                    let id = edit.column_family;
                    if let Some(family) = &edit.column_family_add {
                        r.names.insert(id, family.clone());
                        r.dropped.remove(&id);
                    }
                    if edit.column_family_drop {
                        r.dropped.insert(id);
                    }
                    if let Some(c) = &edit.comparator {
                        r.comparators.insert(id, c.clone());
                    }
                    for (_, number) in &edit.deleted_files {
                        r.removed_tables.insert(*number);
                    }
                    for (_, f) in &edit.new_files {
                        r.removed_tables.remove(&f.number);
                    }
                    if let Some(n) = edit.log_number {
                        let entry = r.log_numbers.entry(id).or_insert(0);
                        *entry = (*entry).max(n);
                    }
                    r.last_sequence = r.last_sequence.max(edit.last_sequence.unwrap_or(0));
                    r.max_column_family = r.max_column_family.max(id).max(edit.max_column_family.unwrap_or(0));
                }
                LogRecord::Eof => break,
                LogRecord::Corrupt { offset, reason, .. } => {
                    let bytes = 0;
                    report.manifest_damage.push(LogDamage { file: name.clone(), offset, bytes, reason });
                }
            }
        }
    }
    Ok(r)
}

/// Step 2 for one WAL: its intact batches into one memtable per family,
/// skipping dropped families and what a family's log number says is in its
/// tables. Returns the records replayed, the damage skipped, the memtables
/// and the largest sequence number seen.
#[allow(clippy::type_complexity)]
fn replay_wal(
    path: &Path,
    (fs, cmp): (&dyn FileSystem, &UserComparator),
    wal: u64,
    remembered: &Remembered,
) -> Result<(u64, Vec<LogDamage>, Vec<(u32, Arc<MemTable>)>, SequenceNumber)> {
    let name = path.display().to_string();
    let mut reader = LogReader::new(fs.open_sequential(path)?, name.clone());
    let mut mems: BTreeMap<u32, Arc<MemTable>> = BTreeMap::new();
    let (mut records, mut damage, mut max_seq) = (0, Vec::new(), 0);
    let size = fs.file_size(path)?;
    loop {
        match reader.next()? {
            LogRecord::Record { data, offset } => {
                let batch = match WriteBatch::from_data(&data, &name, offset) {
                    Ok(b) => b,
                    Err(e) => {
                        let reason = format!("a write batch that does not decode: {e}");
                        damage.push(LogDamage { file: name.clone(), offset, bytes: data.len() as u64, reason });
                        continue;
                    }
                };
                records += 1;
                // A prepared transaction's updates are not applied until its
                // commit, which carries them again.
                for (seq, op) in (batch.sequence()..).zip(batch.applied_cf()) {
                    let Ok((cf, op)) = op else { break };
                    let in_tables = remembered.log_numbers.get(&cf).is_some_and(|n| *n > wal);
                    if !remembered.dropped.contains(&cf) && !in_tables {
                        let mem = mems.entry(cf).or_insert_with(|| Arc::new(MemTable::new(wal, cmp.clone())));
                        let (kind, key, value) = op.entry();
                        mem.add(seq, kind, key, value);
                    }
                    max_seq = max_seq.max(seq);
                }
            }
            LogRecord::Eof => break,
            LogRecord::Corrupt { offset, reason, tail, .. } => {
                let bytes = if tail { size.saturating_sub(offset) } else { 0 };
                damage.push(LogDamage { file: name.clone(), offset, bytes, reason });
            }
        }
    }
    Ok((records, damage, mems.into_iter().filter(|(_, m)| !m.is_empty()).collect(), max_seq))
}

/// What [`scan_table`] read.
struct ScannedTable {
    meta: FileMetaData,
    /// The column family id and name its properties record.
    cf: Option<u32>,
    cf_name: Option<String>,
    /// The blob references it holds, per blob file: (count, record bytes).
    blob_refs: BTreeMap<u64, (u64, u64)>,
}

/// Reads one table whole with checksums verified: its metadata, its family
/// and the blob files it refers to.
fn scan_table(dir: &Path, fs: &dyn FileSystem, cmp: &UserComparator, number: u64) -> Result<ScannedTable> {
    let path = filename::table_file(dir, number);
    let size = fs.file_size(&path)?;
    let policy = TableCachePolicy { comparator: cmp.clone(), ..TableCachePolicy::default() };
    let table = Table::open_with_policy(fs.open_random(&path)?, size, path.display().to_string(), policy)?;
    let rs = ReadSettings { verify_checksums: true, fill_cache: false, ..ReadSettings::default() };
    let mut it = table.iter(rs);
    it.seek_to_first();
    let (mut smallest, mut largest) = (Vec::new(), Vec::new());
    let (mut smallest_seq, mut largest_seq, mut entries, mut deletions) = (SequenceNumber::MAX, 0, 0, 0);
    let mut blob_refs: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    while it.valid() {
        let key = it.key();
        let p = parse_internal_key(key)
            .ok_or_else(|| Error::corruption(path.display().to_string(), 0, "unparsable internal key"))?;
        if p.kind == ValueKind::BlobIndex {
            let index = BlobIndex::decode(it.value())
                .map_err(|r| Error::corruption(path.display().to_string(), 0, format!("blob index: {r}")))?;
            let r = blob_refs.entry(index.file_number).or_default();
            r.0 += 1;
            r.1 += index.record_len(p.user_key);
        }
        if smallest.is_empty() {
            smallest = key.to_vec();
        }
        largest.clear();
        largest.extend_from_slice(key);
        smallest_seq = smallest_seq.min(p.seq);
        largest_seq = largest_seq.max(p.seq);
        entries += 1;
        deletions += u64::from(p.kind.is_deletion());
        it.next();
    }
    it.status()?;
    if entries != table.properties().num_entries {
        return Err(Error::corruption(
            path.display().to_string(),
            0,
            format!("{entries} entries read, {} recorded in its properties", table.properties().num_entries),
        ));
    }
    let mut seqs = (smallest_seq, largest_seq);
    if let Some(t) = table.range_tombstones() {
        t.extend_file_bounds(&mut smallest, &mut largest, &mut seqs);
    }
    let (smallest_seq, largest_seq) = seqs;
    let num_range_deletions = table.properties().num_range_deletions;
    if entries == 0 && num_range_deletions == 0 {
        return Err(Error::corruption(path.display().to_string(), 0, "the table holds no entries"));
    }
    let meta = FileMetaData {
        number,
        file_size: size,
        smallest,
        largest,
        smallest_seq,
        largest_seq,
        num_entries: entries,
        num_deletions: deletions,
        oldest_blob_file: blob_refs.keys().next().copied().unwrap_or(0),
        num_range_deletions,
    };
    let p = table.properties();
    Ok(ScannedTable { meta, cf: p.column_family, cf_name: p.column_family_name.clone(), blob_refs })
}
