//! Tables built outside a database and ingested into it (RocksDB's
//! `SstFileWriter` and `IngestExternalFile`): docs/operations.md,
//! "Bulk loading".
//!
//! An external file holds every key at sequence number 0. Ingestion:
//! 1. reads each file whole (checksums verified): every entry at sequence 0,
//!    user keys strictly increasing, a value, merge or deletion; files of one
//!    family must not overlap each other;
//! 2. stops writes (it leads the write queue), flushes the family's
//!    memtables when they overlap a file (`allow_blocking_flush`), and waits
//!    for running flushes and compactions with new ones held off;
//! 3. places each file at the deepest level above the first level whose
//!    files overlap it (level 0 in universal and FIFO styles). When some
//!    data overlaps it, or a snapshot is held (`snapshot_consistency`), the
//!    file takes a global sequence number, one above the last, and is
//!    rewritten with it (`allow_global_seqno`; RocksDB edits the number in
//!    place instead); otherwise it is hard-linked (`move_files`) or copied
//!    as it is. With `ingest_behind` it goes to the last level at sequence
//!    0, below everything, which must not overlap it;
//! 4. records every file of every family in one MANIFEST step (a new
//!    MANIFEST when more than one family takes files, so a crash keeps all
//!    or none), then lets writes and background work go on.
//!
//! A failure before the MANIFEST step removes the files placed and leaves
//! the database as it was; the source files are never changed.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::MutexGuard;

use super::column_family::ColumnFamilyData;
use super::job_guard::JobGuard;
use super::jobs::Hold;
use super::{ColumnFamilyHandle, Db, DbInner, DbState};
use crate::clock::Clock;
use crate::comparator::UserComparator;
use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::iter::InternalIterator;
use crate::key::{
    make_internal_key, parse_internal_key, user_key, SequenceNumber, ValueKind, KIND_FOR_SEEK, MAX_KEY_SIZE,
    MAX_SEQUENCE,
};
use crate::options::{ColumnFamilyOptions, CompactionStyle, Options};
use crate::range_del::RangeTombstone;
use crate::sst::table_reader::TableCachePolicy;
use crate::sst::{ReadSettings, Table, TableBuilder, TableBuilderOptions};
use crate::version::{filename, FileMetaData, VersionEdit};

/// Writes a table for [`Db::ingest_external_file`] (RocksDB's
/// `SstFileWriter`): keys added in strictly increasing order of the
/// column family's comparator, each at most once; range deletions in any
/// order.
pub struct SstFileWriter {
    options: ColumnFamilyOptions,
    fs: Arc<dyn FileSystem>,
    /// Stamps the files' `creation_time` (`Options::clock`).
    clock: Arc<dyn Clock>,
    writing: Option<Writing>,
}

struct Writing {
    builder: TableBuilder,
    path: PathBuf,
    /// The last key added (empty before the first: `entries` tells).
    last: Vec<u8>,
    smallest: Option<Vec<u8>>,
    entries: u64,
    range_deletions: u64,
    /// The internal key being added, reused.
    ikey: Vec<u8>,
}

/// What [`SstFileWriter::finish`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalSstFileInfo {
    /// The file.
    pub file_path: PathBuf,
    /// Its first and last user keys added with put, merge or delete (empty
    /// when it holds only range deletions).
    pub smallest_key: Vec<u8>,
    /// See `smallest_key`.
    pub largest_key: Vec<u8>,
    /// Puts, merges and deletes.
    pub num_entries: u64,
    /// Range deletions.
    pub num_range_deletions: u64,
    /// Bytes.
    pub file_size: u64,
}

impl SstFileWriter {
    /// A writer of tables for the default column family of a database with
    /// `options` (its comparator, block and filter settings, compression and
    /// filesystem).
    pub fn create(options: &Options) -> Self {
        SstFileWriter {
            options: options.cf_options(),
            fs: Arc::clone(&options.fs),
            clock: Arc::clone(&options.clock),
            writing: None,
        }
    }

    /// A writer of tables for a column family with `cf` options, on `options`' filesystem.
    pub fn create_for(options: &Options, cf: &ColumnFamilyOptions) -> Self {
        SstFileWriter {
            options: cf.clone(),
            fs: Arc::clone(&options.fs),
            clock: Arc::clone(&options.clock),
            writing: None,
        }
    }

    /// Starts a new file at `path` (replacing one there).
    pub fn open(&mut self, path: impl AsRef<Path>) -> Result<()> {
        let path = path.as_ref().to_path_buf();
        let o = &self.options;
        let bottom = o.num_levels.saturating_sub(1);
        let mut table = TableBuilderOptions::from_options(o, o.compression_for_level(bottom, true));
        table.clock = Arc::clone(&self.clock);
        // Writeback starts every MiB, as RocksDB's SstFileWriter drops the
        // pages it wrote: a bulk load writes far more than the page cache
        // should keep dirty.
        let file = crate::fs::WriteBehindFile::wrap(self.fs.new_writable(&path)?, 1 << 20);
        let builder = TableBuilder::new(file, table, path.display().to_string());
        self.writing = Some(Writing {
            builder,
            path,
            last: Vec::new(),
            smallest: None,
            entries: 0,
            range_deletions: 0,
            ikey: Vec::new(),
        });
        Ok(())
    }

    /// Adds `key` with `value`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.add(ValueKind::Value, key, value)
    }

    /// Adds `key` holding a wide-column entity of `columns` (RocksDB
    /// `SstFileWriter::PutEntity`; as [`crate::Db::put_entity`]).
    pub fn put_entity(&mut self, key: &[u8], columns: &[(&[u8], &[u8])]) -> Result<()> {
        let entity = crate::wide_columns::encode(columns)?;
        self.add(ValueKind::WideColumnEntity, key, &entity)
    }

    /// Adds a merge operand for `key` (the ingesting family needs a merge
    /// operator to read it).
    pub fn merge(&mut self, key: &[u8], operand: &[u8]) -> Result<()> {
        self.add(ValueKind::Merge, key, operand)
    }

    /// Adds a deletion of `key`: older data for it in the database is
    /// deleted once the file is ingested.
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.add(ValueKind::Deletion, key, b"")
    }

    /// Adds a deletion of every key in `[begin, end)` of older data (not of
    /// the keys this file puts: they share its sequence number). An empty
    /// range adds nothing; `begin > end` is refused.
    pub fn delete_range(&mut self, begin: &[u8], end: &[u8]) -> Result<()> {
        let cmp = self.options.user_comparator();
        let w = self.writing_mut()?;
        match cmp.compare(begin, end) {
            std::cmp::Ordering::Greater => {
                return Err(Error::invalid("delete_range: begin is after end in the column family's order"))
            }
            std::cmp::Ordering::Equal => return Ok(()),
            std::cmp::Ordering::Less => {}
        }
        w.builder.add_range_deletion(RangeTombstone { start: begin.to_vec(), end: end.to_vec(), seq: 0 });
        w.range_deletions += 1;
        Ok(())
    }

    fn writing_mut(&mut self) -> Result<&mut Writing> {
        self.writing.as_mut().ok_or_else(|| Error::invalid("the SstFileWriter has no open file (call open first)"))
    }

    fn add(&mut self, kind: ValueKind, key: &[u8], value: &[u8]) -> Result<()> {
        if key.len() > MAX_KEY_SIZE {
            return Err(Error::invalid(format!("a key of {} bytes is over the limit of {MAX_KEY_SIZE}", key.len())));
        }
        let cmp = self.options.user_comparator();
        let w = self.writing_mut()?;
        if w.entries > 0 && cmp.compare(&w.last, key) != std::cmp::Ordering::Less {
            return Err(Error::invalid(format!(
                "keys must be added in strictly increasing order ({}): {:?} after {:?}",
                cmp.name(),
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(&w.last)
            )));
        }
        w.ikey.clear();
        crate::key::append_internal_key(&mut w.ikey, key, 0, kind);
        w.builder.add(&w.ikey, value)?;
        if w.entries == 0 {
            w.smallest = Some(key.to_vec());
        }
        w.last.clear();
        w.last.extend_from_slice(key);
        w.entries += 1;
        Ok(())
    }

    /// Finishes the file: writes its index, filter and properties and syncs
    /// it. A file with no entry and no range deletion is refused (and
    /// removed).
    pub fn finish(&mut self) -> Result<ExternalSstFileInfo> {
        let w = self.writing.take().ok_or_else(|| Error::invalid("the SstFileWriter has no open file"))?;
        if w.entries == 0 && w.range_deletions == 0 {
            drop(w.builder);
            let _ = self.fs.remove_file(&w.path);
            return Err(Error::invalid("an SST file needs at least one entry or range deletion"));
        }
        w.builder.finish()?;
        if let Some(dir) = w.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            self.fs.sync_dir(dir)?;
        }
        Ok(ExternalSstFileInfo {
            file_size: self.fs.file_size(&w.path)?,
            file_path: w.path,
            smallest_key: w.smallest.unwrap_or_default(),
            largest_key: w.last,
            num_entries: w.entries,
            num_range_deletions: w.range_deletions,
        })
    }
}

/// How [`Db::ingest_external_file`] ingests (RocksDB's
/// `IngestExternalFileOptions`; the defaults are RocksDB's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngestExternalFileOptions {
    /// Hard-link the files into the database instead of copying them (they
    /// are copied where a link cannot be made; the originals stay).
    pub move_files: bool,
    /// Give the files a sequence number above every snapshot held, so that
    /// reads at those snapshots do not see them.
    pub snapshot_consistency: bool,
    /// Allow a global sequence number when data in the database overlaps a
    /// file; without it such an ingestion is refused.
    pub allow_global_seqno: bool,
    /// Flush memtables that overlap a file first; without it such an
    /// ingestion is refused.
    pub allow_blocking_flush: bool,
    /// Place the files below all data, in the last level at sequence 0, as
    /// older than everything (the last level must not overlap them).
    pub ingest_behind: bool,
    /// Read every file whole before ingesting it, verifying every block's
    /// checksum, that every entry is at sequence 0 and that the keys are
    /// in order (RocksDB's `verify_checksums_before_ingest`; default on,
    /// where RocksDB's is off). Off, a file is opened (its footer, index,
    /// filter and properties checked) and its properties are trusted: a
    /// damaged data block is then found by the first read of it.
    pub verify_checksums_before_ingest: bool,
}

impl Default for IngestExternalFileOptions {
    fn default() -> Self {
        IngestExternalFileOptions {
            move_files: false,
            snapshot_consistency: true,
            allow_global_seqno: true,
            allow_blocking_flush: true,
            ingest_behind: false,
            verify_checksums_before_ingest: true,
        }
    }
}

/// An external file read and checked (step 1).
struct Scanned {
    path: PathBuf,
    meta: FileMetaData,
    /// Its user-key range, tombstones included (the end inclusive: a
    /// tombstone's exclusive end counts, which can only widen it).
    smallest: Vec<u8>,
    largest: Vec<u8>,
}

/// Reads the external table at `path`: whole, with checksums verified, when
/// `verify`; otherwise its properties (module documentation).
fn scan(fs: &dyn FileSystem, path: &Path, cmp: &UserComparator, verify: bool) -> Result<Scanned> {
    let name = path.display().to_string();
    let size = fs.file_size(path)?;
    let policy = TableCachePolicy { comparator: cmp.clone(), ..TableCachePolicy::default() };
    let table = Table::open_with_policy(fs.open_random(path)?, size, name.clone(), policy)?;
    let props = table.properties();
    if props.largest_seqno != 0 {
        return Err(Error::invalid(format!(
            "{name} is not an external SST file: it holds keys up to sequence number {} (SstFileWriter writes \
             every key at 0)",
            props.largest_seqno
        )));
    }
    if !verify {
        let (mut smallest, mut largest) = (props.smallest_key.clone(), props.largest_key.clone());
        let mut seqs = (0, 0);
        if let Some(t) = table.range_tombstones() {
            t.extend_file_bounds(&mut smallest, &mut largest, &mut seqs);
        }
        if smallest.is_empty() {
            return Err(Error::invalid(format!("{name} holds no entries")));
        }
        let counts = (props.num_entries, props.num_deletions, props.num_range_deletions);
        return Ok(Scanned::new(path, size, smallest, largest, counts));
    }
    let rs = ReadSettings { verify_checksums: true, fill_cache: false, ..ReadSettings::default() };
    let mut it = table.iter(rs);
    it.seek_to_first();
    let (mut smallest, mut largest) = (Vec::new(), Vec::new());
    let (mut entries, mut deletions) = (0u64, 0u64);
    while it.valid() {
        let key = it.key();
        let p = parse_internal_key(key).ok_or_else(|| Error::corruption(&name, 0, "an unparsable internal key"))?;
        if p.seq != 0 {
            return Err(Error::invalid(format!(
                "{name} is not an external SST file: it holds a key at sequence number {} (SstFileWriter writes \
                 every key at 0)",
                p.seq
            )));
        }
        if !matches!(
            p.kind,
            ValueKind::Value
                | ValueKind::Merge
                | ValueKind::Deletion
                | ValueKind::SingleDeletion
                | ValueKind::WideColumnEntity
        ) {
            return Err(Error::invalid(format!("{name} holds a {:?} entry, which ingestion does not take", p.kind)));
        }
        if !largest.is_empty() && cmp.compare(user_key(&largest), p.user_key) != std::cmp::Ordering::Less {
            return Err(Error::invalid(format!("{name} holds keys out of order or twice")));
        }
        if smallest.is_empty() {
            smallest = key.to_vec();
        }
        largest.clear();
        largest.extend_from_slice(key);
        entries += 1;
        deletions += u64::from(p.kind.is_deletion());
        it.next();
    }
    it.status()?;
    let mut seqs = (0, 0);
    if let Some(t) = table.range_tombstones() {
        t.extend_file_bounds(&mut smallest, &mut largest, &mut seqs);
    }
    let num_range_deletions = table.properties().num_range_deletions;
    if entries == 0 && num_range_deletions == 0 {
        return Err(Error::invalid(format!("{name} holds no entries")));
    }
    Ok(Scanned::new(path, size, smallest, largest, (entries, deletions, num_range_deletions)))
}

impl Scanned {
    /// An external file of `size` bytes whose internal keys range from
    /// `smallest` to `largest` (range tombstones included), with its
    /// (entries, deletions, range deletions), all at sequence 0.
    fn new(path: &Path, size: u64, smallest: Vec<u8>, largest: Vec<u8>, counts: (u64, u64, u64)) -> Scanned {
        let (user_smallest, user_largest) = (user_key(&smallest).to_vec(), user_key(&largest).to_vec());
        let meta = FileMetaData {
            number: 0,
            file_size: size,
            smallest,
            largest,
            smallest_seq: 0,
            largest_seq: 0,
            num_entries: counts.0,
            num_deletions: counts.1,
            oldest_blob_file: 0,
            num_range_deletions: counts.2,
        };
        Scanned { path: path.to_path_buf(), meta, smallest: user_smallest, largest: user_largest }
    }
}

/// One family's files, checked.
struct FamilyFiles {
    data: Arc<ColumnFamilyData>,
    files: Vec<Scanned>,
    /// Per file: the level it goes to.
    levels: Vec<usize>,
}

impl Db {
    /// Ingests tables written by [`SstFileWriter`] into the default column
    /// family (RocksDB's `IngestExternalFile`); see the `ingest` module
    /// documentation and docs/operations.md, "Bulk loading".
    pub fn ingest_external_file(&self, paths: &[impl AsRef<Path>], options: &IngestExternalFileOptions) -> Result<()> {
        let cf = ColumnFamilyHandle { data: Arc::clone(&self.inner.default_cf) };
        self.ingest_external_file_cf(&cf, paths, options)
    }

    /// [`Db::ingest_external_file`] into column family `cf`.
    pub fn ingest_external_file_cf(
        &self,
        cf: &ColumnFamilyHandle,
        paths: &[impl AsRef<Path>],
        options: &IngestExternalFileOptions,
    ) -> Result<()> {
        let paths: Vec<PathBuf> = paths.iter().map(|p| p.as_ref().to_path_buf()).collect();
        self.ingest_external_files(&[(cf, paths.as_slice())], options)
    }

    /// Ingests files into several column families at once (RocksDB's
    /// `IngestExternalFiles`): all of them or, after an error or a crash,
    /// none.
    pub fn ingest_external_files(
        &self,
        families: &[(&ColumnFamilyHandle, &[PathBuf])],
        options: &IngestExternalFileOptions,
    ) -> Result<()> {
        self.inner.ingest(families, options)
    }
}

impl DbInner {
    fn ingest(
        &self,
        families: &[(&ColumnFamilyHandle, &[PathBuf])],
        options: &IngestExternalFileOptions,
    ) -> Result<()> {
        self.check_writable("an ingestion")?;
        let mut work = Vec::new();
        for (cf, paths) in families {
            self.check_family(&cf.data)?;
            if cf.data.cmp.timestamp_size() > 0 {
                return Err(Error::NotSupported(format!(
                    "ingestion into column family '{}', whose keys carry timestamps",
                    cf.data.name
                )));
            }
            if paths.is_empty() {
                continue;
            }
            if work.iter().any(|w: &FamilyFiles| w.data.id == cf.data.id) {
                return Err(Error::invalid(format!("column family '{}' is listed twice", cf.data.name)));
            }
            let cmp = cf.data.cmp.clone();
            let verify = options.verify_checksums_before_ingest;
            let mut files =
                paths.iter().map(|p| scan(self.fs.as_ref(), p, &cmp, verify)).collect::<Result<Vec<_>>>()?;
            files.sort_by(|a, b| cmp.compare(&a.smallest, &b.smallest));
            for pair in files.windows(2) {
                if cmp.compare(&pair[0].largest, &pair[1].smallest) != std::cmp::Ordering::Less {
                    return Err(Error::invalid(format!(
                        "{} and {} overlap: the files of one ingestion must not",
                        pair[0].path.display(),
                        pair[1].path.display()
                    )));
                }
            }
            work.push(FamilyFiles { data: Arc::clone(&cf.data), files, levels: Vec::new() });
        }
        if work.is_empty() {
            return Ok(());
        }
        self.with_writes_stopped(|| self.ingest_stopped(&mut work, options))
    }

    /// Steps 2 to 4, with writes stopped.
    fn ingest_stopped(&self, work: &mut [FamilyFiles], options: &IngestExternalFileOptions) -> Result<()> {
        // Step 2: memtables that overlap a file are flushed first.
        let mut st = self.state.lock();
        let overlapping: Vec<u32> = work
            .iter()
            .filter(|w| {
                st.families.get(w.data.id).is_some_and(|f| {
                    std::iter::once(f.mem())
                        .chain(f.imm().iter())
                        .any(|m| w.files.iter().any(|s| mem_overlaps(m, s, &w.data.cmp)))
                })
            })
            .map(|w| w.data.id)
            .collect();
        if !overlapping.is_empty() {
            if !options.allow_blocking_flush {
                return Err(Error::invalid(
                    "the files overlap data not yet flushed, and allow_blocking_flush is off".to_string(),
                ));
            }
            if st.jobs.is_paused() {
                return Err(Error::invalid(
                    "the files overlap data not yet flushed, and background work is paused, so it cannot be",
                ));
            }
            let full: Vec<u32> = overlapping
                .iter()
                .copied()
                .filter(|id| st.families.get(*id).is_some_and(|f| !f.mem().is_empty()))
                .collect();
            if !full.is_empty() {
                self.switch_memtables(&mut st, &full)?;
            }
            self.wait_for_flushes(&mut st, &overlapping)?;
        }
        // Held off from here: running jobs end, none starts.
        st.jobs.pause();
        let mut resume = Resume { inner: self, st };
        let st = &mut resume.st;
        while st.jobs.flushing_or_compacting() || st.jobs.manual_compactions() > 0 {
            self.bg_cv.wait(st);
        }
        st.bg_error.check()?;
        self.wait_for_manifest_writes(st);

        // Step 3: levels and the sequence number.
        let mut needs_seqno = options.snapshot_consistency && !st.snapshots.is_empty();
        for w in work.iter_mut() {
            let version =
                st.versions.version(w.data.id).ok_or_else(|| Error::invalid("the column family was dropped"))?;
            let opts = self.family_opts(&w.data);
            let bottom = version.num_levels() - 1;
            w.levels.clear();
            for s in &w.files {
                let overlaps =
                    |level: usize| !version.overlapping_files(level, Some(&s.smallest), Some(&s.largest)).is_empty();
                let level = if options.ingest_behind {
                    if opts.compaction_style != CompactionStyle::Level {
                        return Err(Error::NotSupported("ingest_behind outside leveled compaction".into()));
                    }
                    if overlaps(bottom) {
                        return Err(Error::invalid(format!(
                            "{} overlaps the last level, so it cannot go behind it (ingest_behind)",
                            s.path.display()
                        )));
                    }
                    bottom
                } else if opts.compaction_style != CompactionStyle::Level {
                    needs_seqno |= (0..=bottom).any(overlaps);
                    0
                } else {
                    match (0..=bottom).find(|&l| overlaps(l)) {
                        Some(0) => {
                            needs_seqno = true;
                            0
                        }
                        Some(l) => {
                            needs_seqno = true;
                            l - 1
                        }
                        None => bottom,
                    }
                };
                w.levels.push(level);
            }
        }
        if needs_seqno && options.ingest_behind {
            return Err(Error::invalid("ingest_behind with snapshots held: the files would be seen by them"));
        }
        if needs_seqno && !options.allow_global_seqno {
            return Err(Error::invalid(
                "the files overlap data in the database (or a snapshot is held), and allow_global_seqno is off",
            ));
        }
        let seqno = if needs_seqno { self.last_sequence.get() + 1 } else { 0 };
        let numbers: Vec<Vec<u64>> =
            work.iter().map(|w| w.files.iter().map(|_| st.versions.new_file_number()).collect()).collect();
        let floor = numbers.iter().flatten().min().copied().unwrap_or(0);
        let mut job = JobGuard::new(self, st, Hold::PendingOutputs(floor));
        let st = &mut *job;

        // Place the files (without the mutex).
        let mut placed: Vec<PathBuf> = Vec::new();
        let mut metas: Vec<Vec<FileMetaData>> = Vec::new();
        let wrote = MutexGuard::unlocked(st, || -> Result<()> {
            for (w, numbers) in work.iter().zip(&numbers) {
                let opts = self.family_opts(&w.data);
                let mut family_metas = Vec::new();
                for ((s, &number), &level) in w.files.iter().zip(numbers).zip(&w.levels) {
                    let to = filename::table_file(&self.dir, number);
                    placed.push(to.clone());
                    let meta = if seqno > 0 {
                        self.rewrite(s, &to, number, seqno, &opts, &w.data, level)?
                    } else {
                        let linked = options.move_files && self.fs.link_file(&s.path, &to).is_ok();
                        if !linked {
                            let (size, _) =
                                super::checkpoint::copy_file(self.fs.as_ref(), &s.path, self.fs.as_ref(), &to, None)?;
                            if size != s.meta.file_size {
                                return Err(Error::invalid(format!(
                                    "{} changed while it was ingested",
                                    s.path.display()
                                )));
                            }
                        }
                        FileMetaData { number, ..s.meta.clone() }
                    };
                    family_metas.push(meta);
                }
                metas.push(family_metas);
            }
            self.fs.sync_dir(&self.dir)
        });
        // An error says whether the placed files go with it: yes when no
        // edit can name them (placing failed, or the edit was cancelled
        // before it was written). Any other failure may have left the edit
        // in the MANIFEST (a failed sync after the append, a new MANIFEST
        // that CURRENT already names): the files stay, as a job's outputs
        // do (db/jobs.rs `NewTables`), and the reopen's full scan removes
        // them if the edit did not last.
        let recorded = wrote.map_err(|e| (e, true)).and_then(|()| {
            // Step 4.
            let edits: Vec<VersionEdit> = work
                .iter()
                .zip(metas)
                .map(|(w, family_metas)| {
                    let mut edit = VersionEdit { column_family: w.data.id, ..Default::default() };
                    for (meta, &level) in family_metas.into_iter().zip(&w.levels) {
                        edit.add_file(level, meta);
                    }
                    edit
                })
                .collect();
            if seqno > 0 {
                self.last_sequence.publish(seqno);
                st.versions.set_last_sequence(seqno);
            }
            let r = if edits.len() > 1 {
                // Not through the writer queue: a write another job (a
                // family drop) began while the files were placed must end
                // first, and a family it dropped cancels the ingestion.
                self.wait_for_manifest_writes(st);
                if work.iter().any(|w| !st.families.contains(w.data.id)) {
                    Err(Error::Cancelled)
                } else {
                    st.versions.log_and_apply_in_new_manifest(edits)
                }
            } else {
                self.log_and_apply(st, edits)
            };
            r.map_err(|e| {
                let unwritten = matches!(e, Error::Cancelled);
                (self.set_bg_error_locked(st, e), unwritten)
            })
        });
        if let Err((e, remove_files)) = recorded {
            if remove_files {
                for path in placed {
                    let _ = self.fs.remove_file(&path);
                }
            }
            return Err(e);
        }
        self.install_super_version(st);
        Ok(())
    }

    /// Writes the external table `s` anew at `to` with every entry (and
    /// range deletion) at `seqno`; returns its metadata.
    #[allow(clippy::too_many_arguments)]
    fn rewrite(
        &self,
        s: &Scanned,
        to: &Path,
        number: u64,
        seqno: SequenceNumber,
        opts: &ColumnFamilyOptions,
        data: &ColumnFamilyData,
        level: usize,
    ) -> Result<FileMetaData> {
        let cmp = data.cmp.clone();
        let policy = TableCachePolicy { comparator: cmp.clone(), ..TableCachePolicy::default() };
        let name = s.path.display().to_string();
        let table = Table::open_with_policy(self.fs.open_random(&s.path)?, s.meta.file_size, name, policy)?;
        let bottom = level + 1 == opts.num_levels;
        let mut table_options = TableBuilderOptions::from_options(opts, opts.compression_for_level(level, bottom));
        table_options.column_family = data.id;
        table_options.clock = Arc::clone(&self.opts().clock);
        table_options.column_family_name = Some(Arc::from(data.name.as_str()));
        let mut builder = TableBuilder::new(self.fs.new_writable(to)?, table_options, to.display().to_string());
        let rs = ReadSettings { verify_checksums: true, fill_cache: false, ..ReadSettings::default() };
        let mut it = table.iter(rs);
        it.seek_to_first();
        let mut meta = FileMetaData { number, smallest_seq: seqno, largest_seq: seqno, ..s.meta.clone() };
        meta.smallest.clear();
        meta.largest.clear();
        while it.valid() {
            let p = parse_internal_key(it.key())
                .ok_or_else(|| Error::corruption(s.path.display().to_string(), 0, "an unparsable key"))?;
            let key = make_internal_key(p.user_key, seqno, p.kind);
            builder.add(&key, it.value())?;
            if meta.smallest.is_empty() {
                meta.smallest = key.clone();
            }
            meta.largest = key;
            it.next();
        }
        it.status()?;
        let mut seqs = (seqno, seqno);
        if let Some(t) = table.range_tombstones() {
            let shifted: Vec<RangeTombstone> = t.tombstones().map(|x| RangeTombstone { seq: seqno, ..x }).collect();
            let fragments = crate::range_del::FragmentedTombstones::with_comparator(&cmp, shifted.iter());
            fragments.extend_file_bounds(&mut meta.smallest, &mut meta.largest, &mut seqs);
            for tombstone in shifted {
                builder.add_range_deletion(tombstone);
            }
        }
        builder.finish()?;
        meta.file_size = self.fs.file_size(to)?;
        Ok(meta)
    }
}

/// Whether memtable `m` holds a key or a range deletion within `s`'s range.
fn mem_overlaps(m: &Arc<crate::memtable::MemTable>, s: &Scanned, cmp: &UserComparator) -> bool {
    let mut it = m.iter();
    it.seek(&make_internal_key(&s.smallest, MAX_SEQUENCE, KIND_FOR_SEEK));
    if it.valid() && cmp.compare(user_key(it.key()), &s.largest) != std::cmp::Ordering::Greater {
        return true;
    }
    m.range_tombstones()
        .is_some_and(|t| t.tombstones().any(|r| !cmp.lt(&s.largest, &r.start) && cmp.lt(&s.smallest, &r.end)))
}

/// Lets background work go on again when dropped.
struct Resume<'a> {
    inner: &'a DbInner,
    st: MutexGuard<'a, DbState>,
}

impl Drop for Resume<'_> {
    fn drop(&mut self) {
        self.st.jobs.resume();
        self.inner.work_cv.notify_all();
        self.inner.bg_cv.notify_all();
    }
}
