//! The set of live SSTs: immutable [`Version`]s, and the [`VersionSet`] that
//! records every change in the MANIFEST.
//!
//! Invariants:
//! 1. A `Version` never changes once built; readers hold it by `Arc` and keep
//!    its files alive for as long as they read.
//! 2. Levels 1 and deeper hold files sorted by smallest key with disjoint key
//!    ranges; L0 files may overlap and are ordered newest first (largest
//!    sequence number descending).
//! 3. A change becomes visible only after its edit is synced to the MANIFEST.
//! 4. CURRENT is switched to a new MANIFEST by an atomic rename followed by a
//!    directory sync; the old MANIFEST is deleted only afterwards.
//!
//! 5. Every column family has its own version and log number; the
//!    MANIFEST's edits name their family (docs/format.md "MANIFEST"). Family
//!    ids are never reused.
//! 6. A version lists the blob files its tables may refer to, with how many
//!    of each file's blobs are garbage (no table refers to them any more).
//!    A blob file leaves the version once no table can refer to it: when all
//!    its blobs are garbage and no table names it as its oldest, or when it
//!    is older than every table's oldest (RocksDB's `VersionBuilder` rules).
//!
//! Thread safety: `VersionSet` requires the db mutex (callers hold it). The
//! one exception is a MANIFEST append: [`VersionSet::prepare`] hands the
//! MANIFEST's writer out with the encoded edits, [`PreparedEdits::write`]
//! appends and syncs them without the mutex, and [`VersionSet::install`]
//! takes the writer back; in between no other edit can be prepared
//! ([`VersionSet::manifest_busy`]), so edits are written and installed in
//! the order they were prepared.

pub mod builder;
pub mod edit;
pub mod filename;
mod get;
mod level_iter;
mod storage_info;
mod table_cache;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

pub use builder::VersionBuilder;
#[cfg(test)]
pub(crate) use edit::test_file;
pub use edit::{BlobFileAddition, BlobFileGarbage, FileMetaData, VersionEdit};
pub use get::{BatchAnswer, Found, KeyBatch, KeyVersions};
pub(crate) use level_iter::{LevelFiles, LevelIterator};
pub use storage_info::{LevelTargets, SortedRun, StorageInfoOptions, TreeStyle};
pub use table_cache::{TableCache, TableCacheOptions, TableRef};

use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::key::{user_key, SequenceNumber};
use crate::wal::{LogDamage, LogReader, LogRecord, LogWriter};

/// What a version knows about one blob file (RocksDB's `BlobFileMetaData`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobFileMetaData {
    /// File number (`NNNNNN.blob`).
    pub number: u64,
    /// Blobs in the file.
    pub total_count: u64,
    /// Bytes of its records.
    pub total_bytes: u64,
    /// Blobs no table refers to any more.
    pub garbage_count: u64,
    /// Their record bytes.
    pub garbage_bytes: u64,
}

impl BlobFileMetaData {
    /// The file's size: its records, header and footer.
    pub fn file_size(&self) -> u64 {
        self.total_bytes + (crate::blob::format::HEADER_LEN + crate::blob::format::FOOTER_LEN) as u64
    }
}

/// One immutable state of the LSM tree: the files of every level, and the
/// blob files they refer to.
#[derive(Debug, Clone, Default)]
pub struct Version {
    /// `levels[l]` holds the files of level `l`.
    pub levels: Vec<Vec<Arc<FileMetaData>>>,
    /// The blob files the tables may refer to, by number (oldest first).
    pub blob_files: BTreeMap<u64, BlobFileMetaData>,
    /// The order of the family's keys: the levels are sorted in it.
    pub cmp: UserComparator,
    /// The order their ranges are compared in ([`Version::ranges`]).
    key_ranges: UserComparator,
    /// L0's tables, in the order of `levels[0]`, once a point read found
    /// them all open in a table cache that keeps every table open
    /// ([`Version::get`]).
    l0_tables: get::L0Tables,
}

impl Version {
    /// An empty version with `num_levels` levels, its keys in bytewise order.
    #[cfg(any(test, feature = "internals"))]
    pub fn new(num_levels: usize) -> Self {
        Self::with_comparator(num_levels, UserComparator::BYTEWISE)
    }

    /// An empty version with `num_levels` levels, its keys in `cmp`'s order.
    pub fn with_comparator(num_levels: usize, cmp: UserComparator) -> Self {
        Version::of(vec![Vec::new(); num_levels], BTreeMap::new(), cmp)
    }

    /// A version of `levels` and `blob_files`, its keys in `cmp`'s order.
    pub fn of(
        levels: Vec<Vec<Arc<FileMetaData>>>,
        blob_files: BTreeMap<u64, BlobFileMetaData>,
        cmp: UserComparator,
    ) -> Self {
        Version { levels, blob_files, key_ranges: cmp.without_timestamp(), cmp, l0_tables: Default::default() }
    }

    /// The order of key ranges ([`UserComparator::without_timestamp`]):
    /// with timestamps, every version of a key falls in one range, so a
    /// level's files never split a key's versions and a range always takes
    /// all of them.
    pub fn ranges(&self) -> &UserComparator {
        &self.key_ranges
    }

    /// Every live blob file number.
    pub fn live_blob_files(&self) -> impl Iterator<Item = u64> + '_ {
        self.blob_files.keys().copied()
    }

    /// Bytes of every blob file listed.
    pub fn blob_file_bytes(&self) -> u64 {
        self.blob_files.values().map(BlobFileMetaData::file_size).sum()
    }

    /// Blobs in files numbered below this are relocated by a compaction
    /// collecting garbage: the number of the blob file at `age_cutoff` of
    /// the way through the list, oldest first, or every file when that is
    /// past the end (RocksDB's `ComputeBlobGarbageCollectionCutoffFileNumber`).
    pub fn blob_gc_cutoff(&self, age_cutoff: f64) -> u64 {
        let index = (age_cutoff * self.blob_files.len() as f64) as usize;
        self.blob_files.keys().nth(index).copied().unwrap_or(u64::MAX)
    }

    /// Number of levels.
    pub fn num_levels(&self) -> usize {
        self.levels.len()
    }

    /// Files at `level`.
    pub fn num_files(&self, level: usize) -> usize {
        self.levels.get(level).map_or(0, Vec::len)
    }

    /// Bytes at `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels.get(level).map_or(0, |fs| fs.iter().map(|f| f.file_size).sum())
    }

    /// Every live file number.
    pub fn live_files(&self) -> impl Iterator<Item = u64> + '_ {
        self.levels.iter().flatten().map(|f| f.number)
    }

    /// The deepest level holding any file, or 0.
    pub fn deepest_nonempty_level(&self) -> usize {
        self.levels.iter().rposition(|l| !l.is_empty()).unwrap_or(0)
    }

    /// Files whose user-key range overlaps `[begin, end]` at `level` (either
    /// bound open when `None`). For L0 the range is not widened.
    pub fn overlapping_files(&self, level: usize, begin: Option<&[u8]>, end: Option<&[u8]>) -> Vec<Arc<FileMetaData>> {
        let Some(files) = self.levels.get(level) else { return Vec::new() };
        let cmp = self.ranges();
        let overlaps = |f: &FileMetaData| {
            begin.is_none_or(|b| cmp.le(b, f.largest_user_key()))
                && end.is_none_or(|e| cmp.le(f.smallest_user_key(), e))
        };
        if level == 0 {
            return files.iter().filter(|f| overlaps(f)).cloned().collect();
        }
        // Sorted and disjoint: binary search for the first candidate.
        let start = match begin {
            Some(b) => files.partition_point(|f| cmp.lt(f.largest_user_key(), b)),
            None => 0,
        };
        files[start..].iter().take_while(|f| end.is_none_or(|e| cmp.le(f.smallest_user_key(), e))).cloned().collect()
    }

    /// For a point lookup: the L0 files that may hold `key` (newest first), then
    /// at most one file per deeper level.
    pub fn files_for_key<'a>(&'a self, key: &'a [u8]) -> impl Iterator<Item = (usize, &'a FileMetaData)> + 'a {
        self.files_for_key_from(key, 0)
    }

    /// [`Version::files_for_key`] in the levels from `first` down.
    pub fn files_for_key_from<'a>(
        &'a self,
        key: &'a [u8],
        first: usize,
    ) -> impl Iterator<Item = (usize, &'a FileMetaData)> + 'a {
        // Borrowed, not cloned: a point read bumps no reference count shared
        // with readers on other cores, and allocates nothing. Compared in
        // the order of ranges: with timestamps, `key` (with one) is in the
        // one file per level that holds the key's versions.
        let cmp = self.ranges();
        self.levels.iter().enumerate().skip(first).flat_map(move |(level, files)| {
            // L0: every file; deeper: the one file whose range may hold `key`.
            let candidates = if level == 0 {
                &files[..]
            } else {
                let i = files.partition_point(|f| cmp.lt(f.largest_user_key(), key));
                files.get(i..=i).unwrap_or_default()
            };
            candidates.iter().filter(move |f| self.range_holds(f, key)).map(move |f| (level, &**f))
        })
    }

    /// True when `f`'s key range holds `key`, compared in the order of
    /// ranges ([`Version::ranges`]).
    pub fn range_holds(&self, f: &FileMetaData, key: &[u8]) -> bool {
        let cmp = self.ranges();
        cmp.le(f.smallest_user_key(), key) && cmp.le(key, f.largest_user_key())
    }

    /// Checks invariant 2; corruption when violated.
    fn check(&self, manifest: &str) -> Result<()> {
        for (level, files) in self.levels.iter().enumerate().skip(1) {
            for pair in files.windows(2) {
                if !self.ranges().lt(user_key(&pair[0].largest), user_key(&pair[1].smallest)) {
                    return Err(Error::corruption(
                        manifest,
                        0,
                        format!("level {level} files {} and {} overlap", pair[0].number, pair[1].number),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Builds the version that results from applying `edits` to `self`
    /// (one [`VersionBuilder`]; blob files leave by invariant 6 once, after
    /// all of them).
    pub fn apply(&self, edits: &[&VersionEdit]) -> Result<Version> {
        let mut builder = VersionBuilder::new(self);
        for edit in edits {
            builder.apply(edit)?;
        }
        Ok(builder.build())
    }
}

/// A version with no levels: the base recovery builds families on.
static EMPTY_VERSION: Version = Version {
    levels: Vec::new(),
    blob_files: BTreeMap::new(),
    cmp: UserComparator::BYTEWISE,
    key_ranges: UserComparator::BYTEWISE,
    l0_tables: get::L0Tables::empty(),
};

/// The name of the column family every database has, id 0 (RocksDB's
/// `kDefaultColumnFamilyName`).
pub const DEFAULT_COLUMN_FAMILY: &str = "default";

/// What a family's options decide about its versions: how many levels,
/// and the order of its keys.
#[derive(Debug, Clone, Default)]
pub struct FamilyShape {
    /// Levels (`num_levels`).
    pub num_levels: usize,
    /// The family's comparator.
    pub comparator: UserComparator,
}

#[cfg(test)]
impl FamilyShape {
    /// `num_levels` levels in the bytewise order.
    pub fn levels(num_levels: usize) -> Self {
        FamilyShape { num_levels, comparator: UserComparator::BYTEWISE }
    }
}

/// What the MANIFEST records about one column family.
#[derive(Debug, Clone)]
pub struct FamilyVersions {
    /// The family's name.
    pub name: String,
    /// Its live version.
    pub current: Arc<Version>,
    /// The family's data in WALs numbered below this is all in tables.
    pub log_number: u64,
    /// Its full_history_ts_low (0: none; docs/timestamps.md).
    pub full_history_ts_low: u64,
}

/// The live version of every column family, plus the counters persisted in
/// the MANIFEST.
pub struct VersionSet {
    dir: PathBuf,
    fs: Arc<dyn FileSystem>,
    families: BTreeMap<u32, FamilyVersions>,
    /// The largest family id ever handed out; ids are never reused, so WAL
    /// entries of a dropped family can never be taken for a new one's.
    max_column_family: u32,
    /// Shared with running jobs so they can number their outputs without the mutex.
    next_file_number: Arc<AtomicU64>,
    last_sequence: SequenceNumber,
    manifest_number: u64,
    manifest: Option<LogWriter>,
    /// The MANIFEST's writer is out in a [`PreparedEdits`] being written.
    writer_out: bool,
    /// A MANIFEST write failed since CURRENT last named a MANIFEST holding
    /// the current state: the MANIFEST CURRENT names may hold an edit that
    /// was never installed, and name tables and blob files no version
    /// lists ([`VersionSet::manifest_uncertain`]).
    uncertain: bool,
    max_manifest_size: u64,
    /// MANIFESTs a roll replaced, to be deleted without the db mutex
    /// ([`VersionSet::take_retired_manifests`]).
    retired_manifests: Vec<u64>,
}

/// Edits checked and encoded under the db mutex, to be written to the
/// MANIFEST without it ([`VersionSet::prepare`]).
pub struct PreparedEdits {
    next: BTreeMap<u32, FamilyVersions>,
    max_column_family: u32,
    write: PendingWrite,
}

/// What [`PreparedEdits::write`] writes.
enum PendingWrite {
    /// The edits' records, appended to the open MANIFEST with its writer.
    Append(LogWriter, Vec<Vec<u8>>),
    /// A new MANIFEST holding the whole state, edits included.
    Roll(Box<PendingRoll>),
}

/// A new MANIFEST to write: its number, its snapshot's records, and once
/// written, its writer or how far a failure got.
struct PendingRoll {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    number: u64,
    records: Vec<Vec<u8>>,
    writer: Option<LogWriter>,
    /// CURRENT began to change: it may name the new MANIFEST.
    current_touched: bool,
}

impl PreparedEdits {
    /// Appends the records to the MANIFEST and syncs it, or writes the new
    /// MANIFEST a roll needs and points CURRENT at it. Needs no lock: the
    /// writer, or the new file, is this value's alone until
    /// [`VersionSet::install`].
    pub fn write(&mut self) -> Result<()> {
        match &mut self.write {
            PendingWrite::Append(writer, records) => {
                kill_point!("manifest_append");
                for record in records.iter() {
                    writer.add_record(record)?;
                }
                writer.sync()
            }
            PendingWrite::Roll(roll) => {
                let PendingRoll { fs, dir, number, records, writer, current_touched } = &mut **roll;
                *writer = Some(write_manifest_records(fs.as_ref(), dir, *number, records, current_touched)?);
                Ok(())
            }
        }
    }
}

/// Column families are added by [`VersionSet::add_column_family`] only,
/// which knows their number of levels.
fn refuse_family_adds(edits: &[VersionEdit]) -> Result<()> {
    if edits.iter().any(|e| e.column_family_add.is_some()) {
        return Err(Error::invalid("a column family is added with add_column_family"));
    }
    Ok(())
}

/// A column family's files as edits are applied to it: its live version,
/// rebuilt at every edit (a change being made, or a best-efforts replay
/// checking every state), or a builder that recovery builds once, at the
/// end of the MANIFEST.
trait FamilyState {
    /// A new, empty family of its shape.
    fn new_family(name: &str, shape: FamilyShape) -> Self;
    /// Applies `edit`'s files and blob files.
    fn apply_files(&mut self, edit: &VersionEdit) -> Result<()>;
    /// The family's log number.
    fn log_number_mut(&mut self) -> &mut u64;
    /// The family's full_history_ts_low.
    fn full_history_ts_low_mut(&mut self) -> &mut u64;
}

impl FamilyState for FamilyVersions {
    fn new_family(name: &str, shape: FamilyShape) -> Self {
        let current = Arc::new(Version::with_comparator(shape.num_levels, shape.comparator));
        FamilyVersions { name: name.to_string(), current, log_number: 0, full_history_ts_low: 0 }
    }
    fn apply_files(&mut self, edit: &VersionEdit) -> Result<()> {
        self.current = Arc::new(self.current.apply(&[edit])?);
        Ok(())
    }
    fn log_number_mut(&mut self) -> &mut u64 {
        &mut self.log_number
    }
    fn full_history_ts_low_mut(&mut self) -> &mut u64 {
        &mut self.full_history_ts_low
    }
}

/// A family being recovered: every edit of the MANIFEST goes into one
/// builder, built into its version once replay ends.
struct RecoveringFamily {
    name: String,
    builder: VersionBuilder<'static>,
    log_number: u64,
    full_history_ts_low: u64,
}

impl RecoveringFamily {
    fn finish(self) -> FamilyVersions {
        let RecoveringFamily { name, builder, log_number, full_history_ts_low } = self;
        FamilyVersions { name, current: Arc::new(builder.build()), log_number, full_history_ts_low }
    }
}

impl FamilyState for RecoveringFamily {
    fn new_family(name: &str, shape: FamilyShape) -> Self {
        let builder = VersionBuilder::with_shape(&EMPTY_VERSION, shape.num_levels, shape.comparator);
        RecoveringFamily { name: name.to_string(), builder, log_number: 0, full_history_ts_low: 0 }
    }
    fn apply_files(&mut self, edit: &VersionEdit) -> Result<()> {
        self.builder.apply(edit)
    }
    fn log_number_mut(&mut self) -> &mut u64 {
        &mut self.log_number
    }
    fn full_history_ts_low_mut(&mut self) -> &mut u64 {
        &mut self.full_history_ts_low
    }
}

/// Applies `edit` to the families in `families` (a MANIFEST being replayed or
/// a change being made). `shape_for` gives a new family's shape.
fn apply_edit<F: FamilyState>(
    families: &mut BTreeMap<u32, F>,
    max_column_family: &mut u32,
    edit: &VersionEdit,
    shape_for: &dyn Fn(&str) -> FamilyShape,
) -> Result<()> {
    let id = edit.column_family;
    let bad = |what: String| Error::corruption("MANIFEST", 0, what);
    if let Some(name) = &edit.column_family_add {
        if families.contains_key(&id) {
            return Err(bad(format!("column family {id} ({name}) added twice")));
        }
        families.insert(id, F::new_family(name, shape_for(name)));
    }
    *max_column_family = (*max_column_family).max(id).max(edit.max_column_family.unwrap_or(0));
    if edit.column_family_drop {
        if id == 0 {
            return Err(bad("the default column family is dropped".into()));
        }
        families.remove(&id).ok_or_else(|| bad(format!("dropped column family {id} does not exist")))?;
        return Ok(());
    }
    let family = families.get_mut(&id).ok_or_else(|| bad(format!("edit for unknown column family {id}")))?;
    let changes_files = !edit.new_files.is_empty() || !edit.deleted_files.is_empty();
    if changes_files || !edit.blob_file_additions.is_empty() || !edit.blob_file_garbage.is_empty() {
        family.apply_files(edit)?;
    }
    if let Some(n) = edit.log_number {
        let log_number = family.log_number_mut();
        *log_number = (*log_number).max(n);
    }
    if let Some(ts) = edit.full_history_ts_low {
        let low = family.full_history_ts_low_mut();
        *low = (*low).max(ts);
    }
    Ok(())
}

/// Reads CURRENT: the MANIFEST's name and number. Anything but
/// `MANIFEST-<digits>` and a newline is corruption naming the first byte that
/// does not fit; a MANIFEST it names that does not exist is corruption too.
fn current_manifest(dir: &Path, fs: &dyn FileSystem) -> Result<(String, u64)> {
    let current = fs.read_file(&filename::current_file(dir))?;
    const PREFIX: &[u8] = b"MANIFEST-";
    let digits = current.iter().skip(PREFIX.len()).take_while(|b| b.is_ascii_digit()).count();
    let bad_at = current
        .iter()
        .zip(PREFIX)
        .position(|(a, b)| a != b)
        .or_else(|| (current.len() < PREFIX.len()).then_some(current.len()))
        .or_else(|| (digits == 0).then_some(PREFIX.len()))
        .or_else(|| (current.get(PREFIX.len() + digits) != Some(&b'\n')).then_some(PREFIX.len() + digits))
        .or_else(|| (current.len() != PREFIX.len() + digits + 1).then_some(PREFIX.len() + digits + 1));
    let parsed = std::str::from_utf8(&current).ok().and_then(|s| s.strip_suffix('\n')).and_then(|s| {
        match filename::parse_file_name(s) {
            Some((filename::FileType::Manifest, number)) => Some((s.to_string(), number)),
            _ => None,
        }
    });
    let (name, number) = match (bad_at, parsed) {
        (None, Some(parsed)) => parsed,
        (at, _) => {
            let at = at.unwrap_or(0);
            return Err(Error::corruption(
                "CURRENT",
                at as u64,
                format!(
                    "does not name a MANIFEST file (expected MANIFEST-<number> and a newline; byte {at} does not fit)"
                ),
            ));
        }
    };
    if !fs.exists(&dir.join(&name)) {
        return Err(Error::corruption("CURRENT", 0, format!("names {name}, which does not exist")));
    }
    Ok((name, number))
}

/// How a MANIFEST replay ended, beyond the edits it handed out.
#[derive(Debug, Clone, Default)]
struct ReplayEnd {
    /// The last record was incomplete (an append cut short) and was ignored.
    torn_tail: Option<LogDamage>,
    /// Best efforts only: the damage replay stopped at.
    stopped_at: Option<LogDamage>,
}

/// Calls `f` with every edit of the live MANIFEST and its offset, oldest
/// first. A record that fails its checksum, an edit that does not decode and
/// an edit `f` refuses are corruption naming the MANIFEST and the record's
/// offset, wherever they are, the last record included; only an incomplete
/// last record (its bytes run past the end of the file: an append cut short)
/// is ignored, and reported in the result. With `best_efforts`, replay stops
/// at the first damage instead and reports it.
fn replay_manifest(
    dir: &Path,
    fs: &dyn FileSystem,
    best_efforts: bool,
    mut f: impl FnMut(&str, u64, VersionEdit) -> Result<()>,
) -> Result<(String, ReplayEnd)> {
    let (name, _) = current_manifest(dir, fs)?;
    let path = dir.join(&name);
    let mut reader = LogReader::new(fs.open_sequential(&path)?, name.clone());
    let mut end = ReplayEnd::default();
    let damage = |offset: u64, reason: String| -> Result<LogDamage> {
        let bytes = fs.file_size(&path)?.saturating_sub(offset);
        Ok(LogDamage { file: name.clone(), offset, bytes, reason })
    };
    loop {
        match reader.next()? {
            LogRecord::Record { data, offset } => {
                let applied = VersionEdit::decode(&data, &name, offset).and_then(|edit| f(&name, offset, edit));
                match applied {
                    Ok(()) => {}
                    Err(Error::Corruption { reason, .. }) if best_efforts => {
                        end.stopped_at = Some(damage(offset, reason)?);
                        break;
                    }
                    Err(Error::Corruption { reason, .. }) => return Err(Error::corruption(&name, offset, reason)),
                    Err(other) => return Err(other),
                }
            }
            LogRecord::Eof => break,
            LogRecord::Corrupt { offset, reason, incomplete: true, .. } => {
                end.torn_tail = Some(damage(offset, reason)?);
                break;
            }
            LogRecord::Corrupt { offset, reason, .. } if best_efforts => {
                end.stopped_at = Some(damage(offset, reason)?);
                break;
            }
            LogRecord::Corrupt { offset, reason, .. } => {
                return Err(Error::corruption(
                    &name,
                    offset,
                    format!("{reason} (a record that is all there but fails its check is damage, not a torn write)"),
                ));
            }
        }
    }
    Ok((name, end))
}

/// The names of the column families of the database in `dir`, default first
/// (RocksDB `DB::ListColumnFamilies`).
pub fn list_column_families(dir: &Path, fs: &dyn FileSystem) -> Result<Vec<String>> {
    let mut families = BTreeMap::new();
    families.insert(0u32, DEFAULT_COLUMN_FAMILY.to_string());
    replay_manifest(dir, fs, false, |_, _, edit| {
        if let Some(added) = edit.column_family_add {
            families.insert(edit.column_family, added);
        } else if edit.column_family_drop {
            families.remove(&edit.column_family);
        } else if !families.contains_key(&edit.column_family) {
            return Err(Error::corruption(
                "MANIFEST",
                0,
                format!("edit for unknown column family {}", edit.column_family),
            ));
        }
        Ok(())
    })?;
    Ok(families.into_values().collect())
}

/// What recovering the MANIFEST tolerated or left out; all empty for an
/// intact MANIFEST (docs/reliability.md, "Damage and what it leads to").
#[derive(Debug, Clone, Default)]
pub struct ManifestRecovery {
    /// The MANIFEST replayed.
    pub file: String,
    /// Its last record was incomplete (an append cut short by a crash) and
    /// was ignored.
    pub torn_tail: Option<LogDamage>,
    /// `best_efforts_recovery`: the damage replay stopped at; later records
    /// were not read.
    pub stopped_at: Option<LogDamage>,
    /// `best_efforts_recovery`: edits read but left out, because every state
    /// after them lists a table that does not exist.
    pub edits_left_out: u64,
    /// `best_efforts_recovery`: the missing tables that made it leave them out.
    pub missing_tables: Vec<u64>,
    /// `best_efforts_recovery`: the missing blob files that made it leave them out.
    pub missing_blob_files: Vec<u64>,
    /// The next file number the MANIFEST recorded, before files found in the
    /// directory raised it: an unknown file numbered at or above it may be
    /// the output of a lost edit, and is never deleted.
    pub recorded_next_file: u64,
}

/// The counters the MANIFEST must record, as replay finds them.
#[derive(Default, Clone, Copy)]
struct Counters {
    log_number: Option<u64>,
    next_file: Option<u64>,
    last_sequence: Option<SequenceNumber>,
}

impl Counters {
    fn take(&mut self, edit: &VersionEdit) {
        self.log_number = edit.log_number.or(self.log_number);
        self.next_file = edit.next_file_number.or(self.next_file);
        self.last_sequence = edit.last_sequence.or(self.last_sequence);
    }
    fn complete(&self) -> bool {
        self.log_number.is_some() && self.next_file.is_some() && self.last_sequence.is_some()
    }
}

/// A family map holding only the empty default family.
fn default_family_only<F: FamilyState>(shape_for: &dyn Fn(&str) -> FamilyShape) -> BTreeMap<u32, F> {
    BTreeMap::from([(0u32, F::new_family(DEFAULT_COLUMN_FAMILY, shape_for(DEFAULT_COLUMN_FAMILY)))])
}

/// What [`longest_complete_prefix`] found: the edits to keep, and the
/// tables and blob files missing from the state after all of them.
struct CompletePrefix {
    keep: usize,
    missing_tables: Vec<u64>,
    missing_blob_files: Vec<u64>,
}

/// For `best_efforts_recovery`: the number of leading edits after which the
/// state has every counter and only tables and blob files in `files_on_disk`,
/// and the files missing from the state after all of `edits`.
fn longest_complete_prefix(
    edits: &[VersionEdit],
    files_on_disk: &std::collections::HashSet<u64>,
    shape_for: &dyn Fn(&str) -> FamilyShape,
) -> CompletePrefix {
    let mut families: BTreeMap<u32, FamilyVersions> = default_family_only(shape_for);
    let mut max_column_family = 0;
    let mut counters = Counters::default();
    // Missing tables of the state so far, by number, with their family.
    let mut missing: BTreeMap<u64, u32> = BTreeMap::new();
    let mut best = 0;
    for (i, edit) in edits.iter().enumerate() {
        if apply_edit(&mut families, &mut max_column_family, edit, shape_for).is_err() {
            break;
        }
        counters.take(edit);
        for (_, number) in &edit.deleted_files {
            missing.remove(number);
        }
        for (_, f) in &edit.new_files {
            if !files_on_disk.contains(&f.number) {
                missing.insert(f.number, edit.column_family);
            }
        }
        if edit.column_family_drop {
            missing.retain(|_, family| *family != edit.column_family);
        }
        // Blob files leave a version by its rules, not by edits: looked up anew.
        let blobs_missing = families
            .values()
            .flat_map(|f| f.current.live_blob_files().collect::<Vec<_>>())
            .any(|n| !files_on_disk.contains(&n));
        if missing.is_empty() && !blobs_missing && counters.complete() {
            best = i + 1;
        }
    }
    let mut missing_blob_files: Vec<u64> = families
        .values()
        .flat_map(|f| f.current.live_blob_files().collect::<Vec<_>>())
        .filter(|n| !files_on_disk.contains(n))
        .collect();
    missing_blob_files.sort_unstable();
    CompletePrefix { keep: best, missing_tables: missing.into_keys().collect(), missing_blob_files }
}

impl VersionSet {
    /// Recovers the version set from CURRENT and its MANIFEST. `shape_for`
    /// gives the number of levels and the comparator of a family by name; a
    /// comparator other than the one the family was created with is
    /// `InvalidArgument` naming both. Damage is corruption
    /// naming the file and offset (see `replay_manifest`); what was tolerated
    /// is returned beside the version set. With `best_efforts` (RocksDB's
    /// `best_efforts_recovery`), replay stops at the first damage and backs
    /// up to the last state whose tables all exist in `dir`.
    pub fn recover(
        dir: &Path,
        fs: Arc<dyn FileSystem>,
        shape_for: &dyn Fn(&str) -> FamilyShape,
        max_manifest_size: u64,
        best_efforts: bool,
    ) -> Result<(Self, ManifestRecovery)> {
        // One builder per family for the whole MANIFEST (RocksDB's
        // `VersionEditHandler`): each family's version is built once, below.
        let mut families: BTreeMap<u32, RecoveringFamily> = default_family_only(shape_for);
        let mut max_column_family = 0;
        let mut counters = Counters::default();
        let mut report = ManifestRecovery::default();
        // The comparator each family was created with, by id (absent: bytewise).
        let mut recorded_comparators: BTreeMap<u32, String> = BTreeMap::new();
        let mut note_comparator = |edit: &VersionEdit| {
            if let Some(c) = &edit.comparator {
                recorded_comparators.insert(edit.column_family, c.clone());
            }
        };
        let (name, end) = if best_efforts {
            let mut edits = Vec::new();
            let (name, end) = replay_manifest(dir, fs.as_ref(), true, |_, _, edit| {
                edits.push(edit);
                Ok(())
            })?;
            let files: std::collections::HashSet<u64> = fs
                .list_dir(dir)?
                .iter()
                .filter_map(|n| filename::parse_file_name(n))
                .filter(|(t, _)| matches!(t, filename::FileType::Table | filename::FileType::Blob))
                .map(|(_, n)| n)
                .collect();
            let prefix = longest_complete_prefix(&edits, &files, shape_for);
            let keep = prefix.keep;
            if keep == 0 {
                return Err(Error::corruption(
                    &name,
                    0,
                    "best-efforts recovery found no state in the MANIFEST with its counters and all its tables \
                     and blob files",
                ));
            }
            if keep < edits.len() {
                report.edits_left_out = (edits.len() - keep) as u64;
                report.missing_tables = prefix.missing_tables;
                report.missing_blob_files = prefix.missing_blob_files;
            }
            for edit in edits.iter().take(keep) {
                apply_edit(&mut families, &mut max_column_family, edit, shape_for)?;
                counters.take(edit);
                note_comparator(edit);
            }
            (name, end)
        } else {
            replay_manifest(dir, fs.as_ref(), false, |_, _, edit| {
                apply_edit(&mut families, &mut max_column_family, &edit, shape_for)?;
                counters.take(&edit);
                note_comparator(&edit);
                Ok(())
            })?
        };
        let families: BTreeMap<u32, FamilyVersions> = families.into_iter().map(|(id, f)| (id, f.finish())).collect();
        // Before anything is read in the order asked for: a family opened
        // with another comparator than it was created with would find its
        // levels out of order (RocksDB's "does not match existing comparator").
        for (id, family) in &families {
            let created = recorded_comparators.get(id).map_or(crate::comparator::BYTEWISE_NAME, String::as_str);
            let asked = family.current.cmp.name();
            if created != asked {
                return Err(Error::invalid(format!(
                    "column family '{}' was created with comparator {created} and cannot be opened with {asked} \
                     (set ColumnFamilyOptions::comparator to the one it was created with)",
                    family.name
                )));
            }
        }
        let manifest_number = filename::parse_file_name(&name).map_or(0, |(_, n)| n);
        let missing = |what: &str| {
            let cut = if end.torn_tail.is_some() { " (its last record is incomplete)" } else { "" };
            Error::corruption(&name, 0, format!("MANIFEST has no {what}{cut}"))
        };
        let next_file_number = counters.next_file.ok_or_else(|| missing("next file number"))?;
        let last_sequence = counters.last_sequence.ok_or_else(|| missing("last sequence"))?;
        counters.log_number.ok_or_else(|| missing("log number"))?;
        for family in families.values() {
            family.current.check(&name)?;
            let numbers = family.current.live_files().chain(family.current.live_blob_files());
            for number in numbers {
                if number >= next_file_number {
                    return Err(Error::corruption(
                        &name,
                        0,
                        format!("file {number} is not below the next file number {next_file_number}"),
                    ));
                }
            }
        }
        report.file = name;
        report.torn_tail = end.torn_tail;
        report.stopped_at = end.stopped_at;
        report.recorded_next_file = next_file_number;
        let versions = VersionSet {
            dir: dir.to_path_buf(),
            fs,
            families,
            max_column_family,
            next_file_number: Arc::new(AtomicU64::new(next_file_number.max(manifest_number + 1))),
            last_sequence,
            manifest_number,
            manifest: None,
            writer_out: false,
            uncertain: false,
            max_manifest_size,
            retired_manifests: Vec::new(),
        };
        Ok((versions, report))
    }

    /// Writes the MANIFEST and CURRENT of a new, empty database.
    /// The default family's keys are in `comparator`'s order (recorded when
    /// it is not the bytewise one).
    pub fn create_new(dir: &Path, fs: &dyn FileSystem, comparator: &UserComparator) -> Result<()> {
        let edit = VersionEdit {
            comparator: (!comparator.is_bytewise()).then(|| comparator.name().to_string()),
            log_number: Some(0),
            next_file_number: Some(2),
            last_sequence: Some(0),
            ..Default::default()
        };
        let path = filename::manifest_file(dir, 1);
        let mut w = LogWriter::new(fs.new_writable(&path)?, path.display().to_string());
        w.add_record(&edit.encode())?;
        w.sync()?;
        drop(w);
        fs.write_file_atomic(&filename::current_file(dir), b"MANIFEST-000001\n")
    }

    /// The live version of column family `id`, `None` if there is no such family.
    pub fn version(&self, id: u32) -> Option<Arc<Version>> {
        self.families.get(&id).map(|f| Arc::clone(&f.current))
    }

    /// Every live column family, by id.
    pub fn families(&self) -> &BTreeMap<u32, FamilyVersions> {
        &self.families
    }

    /// The id for a new column family.
    pub fn next_column_family_id(&self) -> u32 {
        self.max_column_family + 1
    }

    /// Hands out a new file number.
    pub fn new_file_number(&self) -> u64 {
        self.next_file_number.fetch_add(1, Ordering::SeqCst)
    }

    /// The shared counter behind [`VersionSet::new_file_number`], for jobs
    /// that number files without the db mutex.
    pub fn file_number_allocator(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.next_file_number)
    }

    /// Makes sure numbers below `n` are never handed out again (files found on disk).
    pub fn set_next_file_at_least(&mut self, n: u64) {
        self.next_file_number.fetch_max(n, Ordering::SeqCst);
    }

    /// The next file number that would be handed out.
    pub fn next_file_number(&self) -> u64 {
        self.next_file_number.load(Ordering::SeqCst)
    }

    /// The last sequence number persisted (or about to be).
    pub fn last_sequence(&self) -> SequenceNumber {
        self.last_sequence
    }

    /// Advances the persisted last sequence number.
    pub fn set_last_sequence(&mut self, seq: SequenceNumber) {
        self.last_sequence = self.last_sequence.max(seq);
    }

    /// WALs numbered below this are obsolete: the smallest log number of any
    /// live column family.
    pub fn log_number(&self) -> u64 {
        self.families.values().map(|f| f.log_number).min().unwrap_or(0)
    }

    /// The log number of column family `id` (0 if there is no such family).
    pub fn family_log_number(&self, id: u32) -> u64 {
        self.families.get(&id).map_or(0, |f| f.log_number)
    }

    /// The live MANIFEST's number.
    pub fn manifest_number(&self) -> u64 {
        self.manifest_number
    }

    /// Records `edit`, which adds a column family of `shape`.
    pub fn add_column_family(&mut self, edit: VersionEdit, shape: FamilyShape) -> Result<()> {
        self.apply_all(vec![edit], &|_| shape.clone(), false)
    }

    /// Records `edits` (which add no column family) in a new MANIFEST holding
    /// the whole state, which CURRENT switches to in one rename: the edits
    /// take effect all together or, after a crash, not at all.
    pub fn log_and_apply_in_new_manifest(&mut self, edits: Vec<VersionEdit>) -> Result<()> {
        refuse_family_adds(&edits)?;
        self.apply_all(edits, &|_| FamilyShape::default(), true)
    }

    fn apply_all(
        &mut self,
        edits: Vec<VersionEdit>,
        shape_for: &dyn Fn(&str) -> FamilyShape,
        new_manifest: bool,
    ) -> Result<()> {
        let mut prepared = self.prepare_with(edits, shape_for, new_manifest)?;
        let written = prepared.write();
        self.install(prepared, written)?;
        // Written with the caller's lock held anyway: the MANIFEST it
        // replaced goes now.
        for number in self.take_retired_manifests() {
            let _ = self.fs.remove_file(&filename::manifest_file(&self.dir, number));
        }
        Ok(())
    }

    /// Whether a MANIFEST write prepared by [`VersionSet::prepare`] is
    /// being written: no other edit may be prepared until it is installed.
    pub fn manifest_busy(&self) -> bool {
        self.writer_out
    }

    /// True after a MANIFEST write failed (an append or its sync, or a new
    /// MANIFEST after CURRENT began to change), until a new MANIFEST with
    /// the whole state is installed. Until then the MANIFEST a reopen reads
    /// may hold the failed edit, so the files it adds must stay: a
    /// directory scan deletes no table or blob file that no version lists
    /// (RocksDB likewise keeps files after a MANIFEST write error).
    pub fn manifest_uncertain(&self) -> bool {
        self.uncertain
    }

    /// The numbers of the MANIFESTs that installed rolls replaced, for the
    /// caller to delete without the db mutex (CURRENT names another, and
    /// nothing reads them).
    pub fn take_retired_manifests(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.retired_manifests)
    }

    /// Whether a roll has replaced a MANIFEST not yet taken for deletion.
    pub fn has_retired_manifests(&self) -> bool {
        !self.retired_manifests.is_empty()
    }

    /// The first of three steps that record `edits` (which add no column
    /// family) durably in the MANIFEST and install them (the db's
    /// `log_and_apply`), under the db mutex: checks `edits` against the
    /// current state and builds the next one, one version per family the
    /// edits change (all of a family's edits go into one builder). Each
    /// edit must be correct on its own: a crash may keep a prefix of them.
    /// The result holds what [`PreparedEdits::write`] writes without the
    /// mutex: the records and the MANIFEST's writer, or, when a new
    /// MANIFEST is due (none open, or the open one over
    /// `max_manifest_size`), the encoded snapshot of the whole state for a
    /// new one (RocksDB writes its new descriptor with the mutex released
    /// too). Until [`VersionSet::install`] takes it back,
    /// [`VersionSet::manifest_busy`] holds and this refuses.
    pub fn prepare(&mut self, edits: Vec<VersionEdit>) -> Result<PreparedEdits> {
        refuse_family_adds(&edits)?;
        self.prepare_with(edits, &|_| FamilyShape::default(), false)
    }

    fn prepare_with(
        &mut self,
        mut edits: Vec<VersionEdit>,
        shape_for: &dyn Fn(&str) -> FamilyShape,
        new_manifest: bool,
    ) -> Result<PreparedEdits> {
        if self.writer_out {
            return Err(Error::invalid("a MANIFEST write is already in flight"));
        }
        let mut changing: BTreeMap<u32, ChangingFamily> =
            self.families.iter().map(|(id, f)| (*id, ChangingFamily::of(f))).collect();
        let mut max_column_family = self.max_column_family;
        for edit in &mut edits {
            if let (Some(n), Some(f)) = (edit.log_number, changing.get(&edit.column_family)) {
                edit.log_number = Some(n.max(f.log_number));
            }
            apply_edit(&mut changing, &mut max_column_family, edit, shape_for)?;
            edit.next_file_number = Some(self.next_file_number());
            edit.last_sequence = Some(self.last_sequence);
        }
        let mut next = BTreeMap::new();
        for (id, family) in changing {
            next.insert(id, family.finish()?);
        }
        let too_big = self.manifest.as_ref().is_some_and(|m| m.file_size() >= self.max_manifest_size);
        let write = match self.manifest.take() {
            Some(writer) if !too_big && !new_manifest => {
                PendingWrite::Append(writer, edits.iter().map(VersionEdit::encode).collect())
            }
            writer => {
                // The open writer stays until the roll is installed: a roll
                // that fails before CURRENT changes leaves it in use.
                self.manifest = writer;
                let number = self.new_file_number();
                let counters = SnapshotCounters {
                    next_file_number: self.next_file_number(),
                    last_sequence: self.last_sequence,
                    max_column_family,
                };
                PendingWrite::Roll(Box::new(PendingRoll {
                    fs: Arc::clone(&self.fs),
                    dir: self.dir.clone(),
                    number,
                    records: snapshot_records(&next, counters),
                    writer: None,
                    current_touched: false,
                }))
            }
        };
        self.writer_out = true;
        Ok(PreparedEdits { next, max_column_family, write })
    }

    /// The last step after [`VersionSet::prepare`] and
    /// [`PreparedEdits::write`], under the db mutex: with `written` Ok, the
    /// prepared state becomes current and the MANIFEST's writer (the new
    /// one, after a roll) is back for the next edit; a MANIFEST a roll
    /// replaced waits in [`VersionSet::take_retired_manifests`]. With an
    /// error nothing changes. A failed append drops the writer, which may
    /// end in a partial record: the next edit starts a new MANIFEST holding
    /// the whole state (RocksDB likewise rolls after a failed MANIFEST
    /// write). A failed roll removes its file unless CURRENT began to
    /// change; if it did, CURRENT may name either file, so both writers
    /// are given up and the next edit rolls again.
    pub fn install(&mut self, prepared: PreparedEdits, written: Result<()>) -> Result<()> {
        let PreparedEdits { next, max_column_family, write } = prepared;
        self.writer_out = false;
        match write {
            PendingWrite::Append(writer, _) => {
                if written.is_ok() {
                    self.manifest = Some(writer);
                } else {
                    self.uncertain = true;
                }
            }
            PendingWrite::Roll(roll) => {
                let PendingRoll { number, writer, current_touched, .. } = *roll;
                match (&written, writer) {
                    (Ok(()), Some(w)) => {
                        let old = std::mem::replace(&mut self.manifest_number, number);
                        self.manifest = Some(w);
                        self.uncertain = false;
                        if old != number {
                            self.retired_manifests.push(old);
                        }
                    }
                    _ if !current_touched => {
                        let _ = self.fs.remove_file(&filename::manifest_file(&self.dir, number));
                    }
                    _ => {
                        // The old writer goes too, since CURRENT may no
                        // longer name its file, and an edit appended there
                        // would be lost.
                        self.uncertain = true;
                        self.manifest = None;
                    }
                }
            }
        }
        written?;
        self.families = next;
        self.max_column_family = max_column_family;
        Ok(())
    }

    /// Gives up a write prepared by [`VersionSet::prepare`] that will never
    /// be installed (its writer unwound): nothing changes, and the next edit
    /// starts a new MANIFEST. The MANIFEST CURRENT names may hold the
    /// given-up edit (an append, or a roll that got as far as CURRENT), so
    /// the state is uncertain until that new MANIFEST is installed.
    pub fn abandon_write(&mut self) {
        self.writer_out = false;
        self.uncertain = true;
        self.manifest = None;
    }
}

/// A column family's files as a batch of edits changes them: its live
/// version, and the edits that change its files, applied to one builder
/// when the batch ends (a family they do not change keeps its version).
struct ChangingFamily {
    name: String,
    current: Arc<Version>,
    file_edits: Vec<VersionEdit>,
    log_number: u64,
    full_history_ts_low: u64,
}

impl ChangingFamily {
    fn of(family: &FamilyVersions) -> Self {
        ChangingFamily {
            name: family.name.clone(),
            current: Arc::clone(&family.current),
            file_edits: Vec::new(),
            log_number: family.log_number,
            full_history_ts_low: family.full_history_ts_low,
        }
    }

    fn finish(self) -> Result<FamilyVersions> {
        let ChangingFamily { name, current, file_edits, log_number, full_history_ts_low } = self;
        let current = if file_edits.is_empty() {
            current
        } else {
            Arc::new(current.apply(&file_edits.iter().collect::<Vec<_>>())?)
        };
        Ok(FamilyVersions { name, current, log_number, full_history_ts_low })
    }
}

impl FamilyState for ChangingFamily {
    fn new_family(name: &str, shape: FamilyShape) -> Self {
        ChangingFamily::of(&FamilyVersions::new_family(name, shape))
    }
    fn apply_files(&mut self, edit: &VersionEdit) -> Result<()> {
        self.file_edits.push(VersionEdit {
            new_files: edit.new_files.clone(),
            deleted_files: edit.deleted_files.clone(),
            blob_file_additions: edit.blob_file_additions.clone(),
            blob_file_garbage: edit.blob_file_garbage.clone(),
            ..VersionEdit::default()
        });
        Ok(())
    }
    fn log_number_mut(&mut self) -> &mut u64 {
        &mut self.log_number
    }
    fn full_history_ts_low_mut(&mut self) -> &mut u64 {
        &mut self.full_history_ts_low
    }
}

/// The database-wide counters a MANIFEST snapshot records in the default
/// family's edit.
#[derive(Debug, Clone, Copy)]
pub struct SnapshotCounters {
    /// Field 2.
    pub next_file_number: u64,
    /// Field 3.
    pub last_sequence: SequenceNumber,
    /// Field 203, written once any family other than the default was ever
    /// created (absent before, so such a database keeps its earlier format).
    pub max_column_family: u32,
}

/// Writes `MANIFEST-<number>` in `dir` holding `families` as a snapshot, one
/// edit per family, syncs it and its directory entry, then points CURRENT
/// at it; returns the open MANIFEST, for edits to follow. The default
/// family's edit, which carries `counters` (the fields every MANIFEST must
/// have), comes last: a MANIFEST cut short inside its snapshot lacks them
/// and is refused, instead of opening without the families cut off.
/// `current_touched` is set once CURRENT is being replaced: from then on
/// CURRENT may name the new file, which must not be removed on error.
pub fn write_manifest(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    families: &BTreeMap<u32, FamilyVersions>,
    counters: SnapshotCounters,
    current_touched: &mut bool,
) -> Result<LogWriter> {
    write_manifest_records(fs, dir, number, &snapshot_records(families, counters), current_touched)
}

/// The records of a MANIFEST snapshot of `families` ([`write_manifest`]),
/// encoded: one edit per family, the default family's, with `counters`, last.
fn snapshot_records(families: &BTreeMap<u32, FamilyVersions>, counters: SnapshotCounters) -> Vec<Vec<u8>> {
    let mut snapshot = Vec::new();
    for (id, family) in families {
        let cmp = &family.current.cmp;
        let mut edit = VersionEdit {
            column_family: *id,
            column_family_add: (*id != 0).then(|| family.name.clone()),
            comparator: (!cmp.is_bytewise()).then(|| cmp.name().to_string()),
            log_number: Some(family.log_number),
            full_history_ts_low: (family.full_history_ts_low > 0).then_some(family.full_history_ts_low),
            ..Default::default()
        };
        if *id == 0 {
            edit.next_file_number = Some(counters.next_file_number);
            edit.last_sequence = Some(counters.last_sequence);
            let max = counters.max_column_family;
            edit.max_column_family = (max > 0).then_some(max);
        }
        for (level, files) in family.current.levels.iter().enumerate() {
            for f in files {
                edit.new_files.push((level, Arc::clone(f)));
            }
        }
        for b in family.current.blob_files.values() {
            let (number, total_count, total_bytes) = (b.number, b.total_count, b.total_bytes);
            edit.blob_file_additions.push(BlobFileAddition { number, total_count, total_bytes });
            if b.garbage_count > 0 {
                let (count, bytes) = (b.garbage_count, b.garbage_bytes);
                edit.blob_file_garbage.push(BlobFileGarbage { number, count, bytes });
            }
        }
        snapshot.push(edit.encode());
    }
    snapshot.rotate_left(1);
    snapshot
}

/// Writes `MANIFEST-<number>` in `dir` holding `records` (a snapshot from
/// [`snapshot_records`]), syncs it and its directory entry, then points
/// CURRENT at it, as [`write_manifest`] says.
fn write_manifest_records(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    records: &[Vec<u8>],
    current_touched: &mut bool,
) -> Result<LogWriter> {
    let path = filename::manifest_file(dir, number);
    let mut w = LogWriter::new(fs.new_writable(&path)?, path.display().to_string());
    kill_point!("manifest_append");
    for record in records {
        w.add_record(record)?;
    }
    w.sync()?;
    kill_point!("dir_sync");
    fs.sync_dir(dir)?;
    *current_touched = true;
    fs.write_file_atomic(&filename::current_file(dir), format!("MANIFEST-{number:06}\n").as_bytes())?;
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A one-entry table's metadata: `lo`..`hi` at `seq`.
    pub(super) fn file(number: u64, lo: &[u8], hi: &[u8], seq: u64) -> FileMetaData {
        test_file(number, lo, hi, 100, seq)
    }

    #[test]
    fn apply_sorts_levels_and_finds_files_for_keys() {
        let mut e = VersionEdit::default();
        e.add_file(0, file(1, b"a", b"m", 1));
        e.add_file(0, file(2, b"k", b"z", 5));
        e.add_file(1, file(4, b"n", b"r", 0));
        e.add_file(1, file(3, b"a", b"f", 0));
        let v = Version::new(3).apply(&[&e]).unwrap();
        assert_eq!(v.levels[0].iter().map(|f| f.number).collect::<Vec<_>>(), vec![2, 1]);
        assert_eq!(v.levels[1].iter().map(|f| f.number).collect::<Vec<_>>(), vec![3, 4]);
        let hits: Vec<_> = v.files_for_key(b"l").map(|(l, f)| (l, f.number)).collect();
        assert_eq!(hits, vec![(0, 2), (0, 1)]);
        let hits: Vec<_> = v.files_for_key(b"o").map(|(l, f)| (l, f.number)).collect();
        assert_eq!(hits, vec![(0, 2), (1, 4)]);
        assert!(v.files_for_key(b"h").all(|(l, _)| l == 0));
        assert_eq!(v.overlapping_files(1, Some(b"e"), Some(b"o")).len(), 2);
        assert_eq!(v.overlapping_files(1, Some(b"g"), Some(b"m")).len(), 0);
        let mut d = VersionEdit::default();
        d.delete_file(0, 2);
        let v2 = v.apply(&[&d]).unwrap();
        assert_eq!(v2.num_files(0), 1);
    }

    fn with_blobs(mut f: FileMetaData, oldest: u64) -> FileMetaData {
        f.oldest_blob_file = oldest;
        f
    }

    fn added(number: u64, count: u64) -> BlobFileAddition {
        BlobFileAddition { number, total_count: count, total_bytes: count * 100 }
    }

    #[test]
    fn blob_files_leave_a_version_only_when_no_table_can_refer_to_them() {
        // Two flushes, each a table and its blob file.
        let mut e = VersionEdit::default();
        e.add_file(0, with_blobs(file(2, b"a", b"m", 1), 3));
        e.blob_file_additions.push(added(3, 4));
        e.add_file(0, with_blobs(file(4, b"a", b"m", 2), 5));
        e.blob_file_additions.push(added(5, 2));
        let v = Version::new(3).apply(&[&e]).unwrap();
        assert_eq!(v.live_blob_files().collect::<Vec<_>>(), vec![3, 5]);
        assert_eq!(v.blob_gc_cutoff(0.25), 3);
        assert_eq!(v.blob_gc_cutoff(0.5), 5);
        assert_eq!(v.blob_gc_cutoff(1.0), u64::MAX);
        // Garbage short of all of a file keeps it.
        let g = |number, count| BlobFileGarbage { number, count, bytes: count * 100 };
        let partly = VersionEdit { blob_file_garbage: vec![g(3, 3)], ..Default::default() };
        let v = v.apply(&[&partly]).unwrap();
        assert_eq!(v.blob_files[&3].garbage_count, 3);
        // All of file 3 is garbage, but table 2 still names it: it stays.
        let all = VersionEdit { blob_file_garbage: vec![g(3, 1)], ..Default::default() };
        let v = v.apply(&[&all]).unwrap();
        assert!(v.blob_files.contains_key(&3), "a file a table names as its oldest was dropped");
        // A compaction rewrites table 2 into table 6, whose oldest is file 5:
        // file 3 is older than every table's oldest, and goes.
        let mut c = VersionEdit::default();
        c.delete_file(0, 2);
        c.add_file(1, with_blobs(file(6, b"a", b"m", 1), 5));
        let v = v.apply(&[&c]).unwrap();
        assert_eq!(v.live_blob_files().collect::<Vec<_>>(), vec![5]);
        // Garbage for a file not listed, or past its count, is corruption.
        let unknown = VersionEdit { blob_file_garbage: vec![g(3, 1)], ..Default::default() };
        assert!(v.apply(&[&unknown]).unwrap_err().is_corruption());
        let too_much = VersionEdit { blob_file_garbage: vec![g(5, 3)], ..Default::default() };
        assert!(v.apply(&[&too_much]).unwrap_err().is_corruption());
        let twice = VersionEdit { blob_file_additions: vec![added(5, 1)], ..Default::default() };
        assert!(v.apply(&[&twice]).unwrap_err().is_corruption());
        // Once no table refers to any blob file, none stays.
        let mut gone = VersionEdit::default();
        gone.delete_file(0, 4);
        gone.delete_file(1, 6);
        assert!(v.apply(&[&gone]).unwrap().blob_files.is_empty());
    }

    /// What a caller can see of one family: its id, name, log number, file
    /// numbers per level and blob files.
    type FamilyView = (u32, String, u64, Vec<Vec<u64>>, Vec<BlobFileMetaData>);

    /// What a caller can see of a version set, family by family.
    fn state(versions: &VersionSet) -> Vec<FamilyView> {
        versions
            .families()
            .iter()
            .map(|(id, f)| {
                let levels = f.current.levels.iter().map(|l| l.iter().map(|f| f.number).collect()).collect();
                (*id, f.name.clone(), f.log_number, levels, f.current.blob_files.values().copied().collect())
            })
            .collect()
    }

    /// A batch of edits (the MANIFEST writer queue's) goes into one builder
    /// per family it changes: the state it installs is the one its edits
    /// make one by one, a family it does not change keeps its version, and
    /// rolls to a new MANIFEST (a small `max_manifest_size`) in between
    /// recover to the same state.
    #[test]
    fn a_batch_of_edits_installs_the_state_its_edits_make_one_by_one() {
        use crate::fs::MemFs;
        use rand::{Rng, SeedableRng};
        const LEVELS: usize = 3;
        let open = |max_manifest_size: u64| {
            let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
            let dir = Path::new("/db");
            fs.create_dir_all(dir).unwrap();
            VersionSet::create_new(dir, fs.as_ref(), &UserComparator::BYTEWISE).unwrap();
            let shape = |_: &str| FamilyShape::levels(LEVELS);
            let (mut versions, _) =
                VersionSet::recover(dir, Arc::clone(&fs), &shape, max_manifest_size, false).unwrap();
            let add = VersionEdit {
                column_family: 1,
                column_family_add: Some("cf1".into()),
                log_number: Some(1),
                ..Default::default()
            };
            versions.add_column_family(add, FamilyShape::levels(LEVELS)).unwrap();
            (versions, fs)
        };
        // One by one, and in batches with a MANIFEST rolled every 2 KB.
        let (mut single, _) = open(u64::MAX);
        let (mut batched, batched_fs) = open(2_000);
        let mut rng = rand::rngs::StdRng::seed_from_u64(17);
        let key = |k: u16| k.to_be_bytes();
        let mut rolls = 0;
        for step in 0..400u64 {
            let mut batch = Vec::new();
            for _ in 0..rng.gen_range(1..=5) {
                let cf = rng.gen_range(0..2u32);
                let v = single.version(cf).unwrap();
                let mut edit = VersionEdit { column_family: cf, ..Default::default() };
                if rng.gen_bool(0.7) || v.levels[0].is_empty() {
                    // A flush.
                    let number = single.new_file_number();
                    batched.set_next_file_at_least(number + 1);
                    let lo = rng.gen_range(0..60_000u16);
                    edit.add_file(0, file(number, &key(lo), &key(lo + 100), step + 1));
                    edit.log_number = Some(step + 2);
                } else {
                    // L0 and L1 into one L1 file: it takes the files the
                    // batch's earlier edits added.
                    let inputs: Vec<(usize, u64)> =
                        (0..2).flat_map(|l| v.levels[l].iter().map(move |f| (l, f.number))).collect();
                    inputs.iter().for_each(|&(l, n)| edit.delete_file(l, n));
                    let number = single.new_file_number();
                    batched.set_next_file_at_least(number + 1);
                    edit.add_file(1, file(number, &key(0), &key(u16::MAX), 0));
                }
                let mut prepared = single.prepare(vec![edit.clone()]).unwrap();
                let written = prepared.write();
                single.install(prepared, written).unwrap();
                batch.push(edit);
            }
            let before: BTreeMap<u32, Arc<Version>> =
                batched.families().iter().map(|(id, f)| (*id, Arc::clone(&f.current))).collect();
            let changed: Vec<u32> = batch.iter().map(|e| e.column_family).collect();
            let manifest = batched.manifest_number();
            let mut prepared = batched.prepare(batch).unwrap();
            let written = prepared.write();
            batched.install(prepared, written).unwrap();
            rolls += usize::from(batched.manifest_number() != manifest);
            assert_eq!(state(&batched), state(&single), "after batch {step}");
            for (id, version) in &before {
                let kept = Arc::ptr_eq(version, &batched.families()[id].current);
                assert_eq!(kept, !changed.contains(id), "family {id}'s version after batch {step}");
            }
        }
        assert!(rolls > 3, "only {rolls} rolls");
        let expected = state(&batched);
        drop(batched);
        let shape = |_: &str| FamilyShape::levels(LEVELS);
        let (recovered, _) = VersionSet::recover(Path::new("/db"), batched_fs, &shape, u64::MAX, false).unwrap();
        assert_eq!(state(&recovered), expected, "recovered from the rolled MANIFESTs");
    }

    /// A long history as a running database writes it (flushes with blob
    /// files, compactions level to level that record blob garbage, column
    /// families added and dropped), installed edit by edit; recovery from
    /// the MANIFEST, which applies every edit to one builder per family,
    /// must give the same state.
    #[test]
    fn recovery_from_a_long_manifest_equals_the_state_built_edit_by_edit() {
        use crate::fs::MemFs;
        use rand::{Rng, SeedableRng};
        const LEVELS: usize = 4;
        let fs: Arc<dyn FileSystem> = Arc::new(MemFs::new());
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        VersionSet::create_new(dir, fs.as_ref(), &UserComparator::BYTEWISE).unwrap();
        let (mut versions, _) =
            VersionSet::recover(dir, Arc::clone(&fs), &|_| FamilyShape::levels(LEVELS), u64::MAX, false).unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let key = |k: u16| k.to_be_bytes();
        let mut log = 1;
        for step in 0..3_000 {
            let ids: Vec<u32> = versions.families().keys().copied().collect();
            let cf = ids[rng.gen_range(0..ids.len())];
            let v = versions.version(cf).unwrap();
            let edit = match rng.gen_range(0..20) {
                0 => {
                    let id = versions.next_column_family_id();
                    let add = VersionEdit {
                        column_family: id,
                        column_family_add: Some(format!("cf{id}")),
                        log_number: Some(log),
                        ..Default::default()
                    };
                    versions.add_column_family(add, FamilyShape::levels(LEVELS)).unwrap();
                    continue;
                }
                1 if cf != 0 => VersionEdit { column_family: cf, column_family_drop: true, ..Default::default() },
                2..=9 => {
                    // A flush: one L0 table, and now and then its blob file.
                    let (table, blob) = (versions.new_file_number(), versions.new_file_number());
                    let lo = rng.gen_range(0..60_000u16);
                    let mut f = file(table, &key(lo), &key(lo + rng.gen_range(0..5_000)), step + 1);
                    let mut edit = VersionEdit { column_family: cf, ..Default::default() };
                    if rng.gen_bool(0.5) {
                        f.oldest_blob_file = blob;
                        edit.blob_file_additions.push(added(blob, 10));
                    }
                    log += 1;
                    edit.log_number = Some(log);
                    edit.add_file(0, f);
                    edit
                }
                _ => {
                    // A compaction of every file of a level and the next,
                    // into up to three disjoint files below.
                    let level = rng.gen_range(0..LEVELS - 1);
                    let inputs: Vec<(usize, Arc<FileMetaData>)> =
                        (level..=level + 1).flat_map(|l| v.levels[l].iter().map(move |f| (l, Arc::clone(f)))).collect();
                    if inputs.is_empty() {
                        continue;
                    }
                    let mut edit = VersionEdit { column_family: cf, ..Default::default() };
                    let lo = inputs.iter().map(|(_, f)| f.smallest_user_key().to_vec()).min().unwrap();
                    let hi = inputs.iter().map(|(_, f)| f.largest_user_key().to_vec()).max().unwrap();
                    let (lo, hi) = (u16::from_be_bytes([lo[0], lo[1]]), u16::from_be_bytes([hi[0], hi[1]]));
                    let oldest = inputs.iter().map(|(_, f)| f.oldest_blob_file).filter(|n| *n != 0).min();
                    let pieces = rng.gen_range(1..=3u16).min(hi - lo + 1);
                    let width = (hi - lo + 1) / pieces;
                    for p in 0..pieces {
                        let (a, b) = (lo + p * width, if p + 1 == pieces { hi } else { lo + (p + 1) * width - 1 });
                        let mut out = file(versions.new_file_number(), &key(a), &key(b), 0);
                        out.oldest_blob_file = oldest.unwrap_or(0);
                        edit.add_file(level + 1, out);
                    }
                    for (l, f) in &inputs {
                        edit.delete_file(*l, f.number);
                    }
                    // Some blobs of the live blob files became garbage.
                    for b in v.blob_files.values() {
                        let left = b.total_count - b.garbage_count;
                        if left > 0 && rng.gen_bool(0.3) {
                            let count = rng.gen_range(1..=left);
                            edit.blob_file_garbage.push(BlobFileGarbage {
                                number: b.number,
                                count,
                                bytes: count * 100,
                            });
                        }
                    }
                    edit
                }
            };
            let mut prepared = versions.prepare(vec![edit]).unwrap();
            let written = prepared.write();
            versions.install(prepared, written).unwrap();
        }
        let built = state(&versions);
        assert!(built.iter().any(|(_, _, _, _, blobs)| !blobs.is_empty()), "the history kept no blob file");
        assert!(built.len() > 1, "the history kept no column family besides the default");
        drop(versions);
        let (recovered, report) =
            VersionSet::recover(dir, fs, &|_| FamilyShape::levels(LEVELS), u64::MAX, false).unwrap();
        assert!(report.torn_tail.is_none());
        assert_eq!(state(&recovered), built);
    }

    #[test]
    fn overlapping_deeper_levels_are_corruption() {
        let mut e = VersionEdit::default();
        e.add_file(1, file(3, b"a", b"f", 0));
        e.add_file(1, file(4, b"e", b"r", 0));
        let v = Version::new(3).apply(&[&e]).unwrap();
        assert!(v.check("MANIFEST-000001").unwrap_err().is_corruption());
    }
}
