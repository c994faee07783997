//! What a system built on the engine asks of its files and sizes
//! (RocksDB's `GetLiveFilesMetaData`, `GetColumnFamilyMetaData`,
//! `GetApproximateSizes`, `GetApproximateMemTableStats` and
//! `GetPropertiesOfTablesInRange`): the tables of each level with their key
//! ranges, sequence numbers and sizes, and estimates of the bytes a key
//! range takes, for splitting and balancing ranges of keys (TiKV's regions).
//!
//! All of it reads one super version of each family: a consistent view of
//! its memtables and tables, whatever flushes and compactions do meanwhile.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use super::column_family::ColumnFamilyData;
use super::{ColumnFamilyHandle, Db};
use crate::error::{Error, Result};
use crate::key::{make_internal_key, user_key, KIND_FOR_SEEK, MAX_SEQUENCE};
use crate::sst::TableProperties;
use crate::version::{filename, FileMetaData};

/// A live table file (RocksDB's `LiveFileMetaData`/`SstFileMetaData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveFileMetaData {
    /// The column family it belongs to.
    pub column_family_name: String,
    /// Its level.
    pub level: usize,
    /// Its name as RocksDB gives it: `/` and the file name (`/000012.sst`).
    pub name: String,
    /// The directory it is in (the database's).
    pub db_path: PathBuf,
    /// Its number.
    pub file_number: u64,
    /// Its size in bytes.
    pub size: u64,
    /// Its smallest user key.
    pub smallest_key: Vec<u8>,
    /// Its largest user key.
    pub largest_key: Vec<u8>,
    /// The smallest sequence number of its entries.
    pub smallest_seqno: u64,
    /// The largest sequence number of its entries.
    pub largest_seqno: u64,
    /// Its entries (every version counts).
    pub num_entries: u64,
    /// The deletions among its entries.
    pub num_deletions: u64,
    /// A compaction is reading it now.
    pub being_compacted: bool,
}

/// One level of a column family ([`ColumnFamilyMetaData::levels`];
/// RocksDB's `LevelMetaData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelMetaData {
    /// The level.
    pub level: usize,
    /// Bytes of its files.
    pub size: u64,
    /// Its files: in key order from level 1 on; level 0's newest first.
    pub files: Vec<LiveFileMetaData>,
}

/// A column family's tables by level (RocksDB's `ColumnFamilyMetaData`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnFamilyMetaData {
    /// The family's name.
    pub name: String,
    /// Bytes of its table files (blob files are not counted).
    pub size: u64,
    /// How many table files it has.
    pub file_count: usize,
    /// Every level, empty ones included.
    pub levels: Vec<LevelMetaData>,
}

/// What [`Db::get_approximate_sizes_cf`] counts (RocksDB's
/// `SizeApproximationOptions`); at least one must be set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SizeApproximationOptions {
    /// The memtables' bytes in the range (an estimate from their skiplists).
    pub include_memtables: bool,
    /// The table files' bytes in the range (from their index blocks).
    pub include_files: bool,
}

impl Default for SizeApproximationOptions {
    /// Files only, RocksDB's default (`INCLUDE_FILES`).
    fn default() -> Self {
        SizeApproximationOptions { include_memtables: false, include_files: true }
    }
}

impl Db {
    /// Every live table file of every column family (RocksDB's
    /// `GetLiveFilesMetaData`), family by family, level by level.
    pub fn get_live_files_metadata(&self) -> Result<Vec<LiveFileMetaData>> {
        self.inner.check_open()?;
        let (families, compacting) = {
            let st = self.inner.state.lock();
            let families: Vec<_> = st.families.iter().map(|(_, f)| Arc::clone(f.data())).collect();
            (families, st.jobs.being_compacted().clone())
        };
        let mut out = Vec::new();
        for data in families {
            for level in self.levels_of(&data, &compacting) {
                out.extend(level.files);
            }
        }
        Ok(out)
    }

    /// The tables of the default column family by level (RocksDB's
    /// `GetColumnFamilyMetaData`).
    pub fn get_column_family_metadata(&self) -> Result<ColumnFamilyMetaData> {
        self.get_column_family_metadata_cf(&self.default_family())
    }

    /// The tables of column family `cf` by level.
    pub fn get_column_family_metadata_cf(&self, cf: &ColumnFamilyHandle) -> Result<ColumnFamilyMetaData> {
        self.inner.check_open()?;
        self.inner.check_family(&cf.data)?;
        let compacting = self.inner.state.lock().jobs.being_compacted().clone();
        let levels = self.levels_of(&cf.data, &compacting);
        Ok(ColumnFamilyMetaData {
            name: cf.data.name.clone(),
            size: levels.iter().map(|l| l.size).sum(),
            file_count: levels.iter().map(|l| l.files.len()).sum(),
            levels,
        })
    }

    /// The levels of `data`'s current version.
    fn levels_of(&self, data: &ColumnFamilyData, compacting: &HashSet<u64>) -> Vec<LevelMetaData> {
        let sv = data.super_version();
        sv.version
            .levels
            .iter()
            .enumerate()
            .map(|(level, files)| {
                let files: Vec<_> = files
                    .iter()
                    .map(|f| LiveFileMetaData {
                        column_family_name: data.name.clone(),
                        level,
                        name: format!("/{:06}.sst", f.number),
                        db_path: self.inner.dir.clone(),
                        file_number: f.number,
                        size: f.file_size,
                        smallest_key: user_key(&f.smallest).to_vec(),
                        largest_key: user_key(&f.largest).to_vec(),
                        smallest_seqno: f.smallest_seq,
                        largest_seqno: f.largest_seq,
                        num_entries: f.num_entries,
                        num_deletions: f.num_deletions,
                        being_compacted: compacting.contains(&f.number),
                    })
                    .collect();
                LevelMetaData { level, size: files.iter().map(|f| f.size).sum(), files }
            })
            .collect()
    }

    /// About how many bytes each range `[start, limit)` of the default
    /// column family takes (RocksDB's `GetApproximateSizes`).
    pub fn get_approximate_sizes(
        &self,
        ranges: &[(&[u8], &[u8])],
        options: &SizeApproximationOptions,
    ) -> Result<Vec<u64>> {
        self.get_approximate_sizes_cf(&self.default_family(), ranges, options)
    }

    /// About how many bytes each range `[start, limit)` of column family
    /// `cf` takes: in its table files (a file inside the range counts
    /// whole; one it cuts, from the offsets its index gives the range's
    /// ends) and, with `include_memtables`, in its memtables
    /// ([`Db::get_approximate_memtable_stats_cf`]). Stale versions and
    /// tombstones count until compactions drop them; blob files do not
    /// count. Errors: `InvalidArgument` when neither source is included or
    /// a range's `limit` comes before its `start` (an empty range,
    /// `start == limit`, is 0).
    pub fn get_approximate_sizes_cf(
        &self,
        cf: &ColumnFamilyHandle,
        ranges: &[(&[u8], &[u8])],
        options: &SizeApproximationOptions,
    ) -> Result<Vec<u64>> {
        self.inner.check_open()?;
        self.inner.check_family(&cf.data)?;
        if !options.include_files && !options.include_memtables {
            return Err(Error::invalid(
                "approximate sizes: include_files and include_memtables are both off, so nothing is counted",
            ));
        }
        let data = &cf.data;
        // Bounds are keys without timestamps in a family with them.
        let padded: Vec<_> =
            ranges.iter().map(|&(s, l)| (data.range_bound(s, true, true), data.range_bound(l, false, false))).collect();
        let ranges: Vec<(&[u8], &[u8])> = padded.iter().map(|(s, l)| (s.as_ref(), l.as_ref())).collect();
        let ranges = ranges.as_slice();
        check_ranges(data, ranges, "approximate sizes")?;
        let sv = data.super_version();
        let mut sizes = Vec::with_capacity(ranges.len());
        for &(start, limit) in ranges {
            let mut size = 0u64;
            if options.include_files {
                for (level, files) in sv.version.levels.iter().enumerate() {
                    for f in files {
                        size = size.saturating_add(self.file_bytes_in(data, f, level, start, limit)?);
                    }
                }
            }
            if options.include_memtables {
                for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
                    size = size.saturating_add(mem.approximate_stats(start, limit).1);
                }
            }
            sizes.push(size);
        }
        Ok(sizes)
    }

    /// About how many entries the memtables of column family `cf` hold in
    /// `[start, limit)`, and their bytes (RocksDB's
    /// `GetApproximateMemTableStats`): estimates from the skiplists' upper
    /// levels, in time logarithmic in their sizes. Errors as
    /// [`Db::get_approximate_sizes_cf`]'s for the range.
    pub fn get_approximate_memtable_stats_cf(
        &self,
        cf: &ColumnFamilyHandle,
        start: &[u8],
        limit: &[u8],
    ) -> Result<(u64, u64)> {
        self.inner.check_open()?;
        self.inner.check_family(&cf.data)?;
        let (start, limit) = (cf.data.range_bound(start, true, true), cf.data.range_bound(limit, false, false));
        let (start, limit) = (start.as_ref(), limit.as_ref());
        check_ranges(&cf.data, &[(start, limit)], "approximate memtable stats")?;
        let sv = cf.data.super_version();
        let (mut count, mut bytes) = (0u64, 0u64);
        for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            let (c, b) = mem.approximate_stats(start, limit);
            count = count.saturating_add(c);
            bytes = bytes.saturating_add(b);
        }
        Ok((count, bytes))
    }

    /// The properties of the live tables of column family `cf` whose key
    /// ranges overlap any of `ranges` (each `[start, limit)`), by file path
    /// (RocksDB's `GetPropertiesOfTablesInRange`). Errors: as
    /// [`Db::get_approximate_sizes_cf`]'s for the ranges; a table that
    /// cannot be read.
    pub fn get_properties_of_tables_in_range(
        &self,
        cf: &ColumnFamilyHandle,
        ranges: &[(&[u8], &[u8])],
    ) -> Result<BTreeMap<String, TableProperties>> {
        self.inner.check_open()?;
        self.inner.check_family(&cf.data)?;
        let data = &cf.data;
        let padded: Vec<_> =
            ranges.iter().map(|&(s, l)| (data.range_bound(s, true, true), data.range_bound(l, false, false))).collect();
        let ranges: Vec<(&[u8], &[u8])> = padded.iter().map(|(s, l)| (s.as_ref(), l.as_ref())).collect();
        let ranges = ranges.as_slice();
        check_ranges(data, ranges, "properties of tables in range")?;
        let sv = data.super_version();
        let mut out = BTreeMap::new();
        for (level, files) in sv.version.levels.iter().enumerate() {
            for f in files {
                if ranges.iter().any(|&(start, limit)| overlaps(data, f, start, limit)) {
                    let table = self.inner.tables.get(f, level, &data.cmp)?;
                    let path = filename::table_file(&self.inner.dir, f.number);
                    out.insert(path.display().to_string(), table.properties().clone());
                }
            }
        }
        Ok(out)
    }

    /// Bytes of table `f` (of `level`) in `[start, limit)`.
    fn file_bytes_in(
        &self,
        data: &ColumnFamilyData,
        f: &FileMetaData,
        level: usize,
        start: &[u8],
        limit: &[u8],
    ) -> Result<u64> {
        if !overlaps(data, f, start, limit) {
            return Ok(0);
        }
        let cmp = &data.cmp;
        let (first, last) = (user_key(&f.smallest), user_key(&f.largest));
        if !cmp.lt(first, start) && cmp.lt(last, limit) {
            return Ok(f.file_size);
        }
        let table = self.inner.tables.get(f, level, cmp)?;
        let at = |k: &[u8]| table.approximate_offset_of(&make_internal_key(k, MAX_SEQUENCE, KIND_FOR_SEEK));
        let from = if cmp.lt(first, start) { at(start) } else { 0 };
        let to = if cmp.lt(last, limit) { f.file_size } else { at(limit) };
        Ok(to.saturating_sub(from).min(f.file_size))
    }
}

/// Whether table `f`'s keys reach into `[start, limit)`.
fn overlaps(data: &ColumnFamilyData, f: &FileMetaData, start: &[u8], limit: &[u8]) -> bool {
    let cmp = &data.cmp;
    !cmp.lt(user_key(&f.largest), start) && cmp.lt(user_key(&f.smallest), limit)
}

/// Every range's `start` comes at or before its `limit`, in the family's order.
fn check_ranges(data: &ColumnFamilyData, ranges: &[(&[u8], &[u8])], what: &str) -> Result<()> {
    for (i, &(start, limit)) in ranges.iter().enumerate() {
        if data.cmp.lt(limit, start) {
            return Err(Error::invalid(format!(
                "{what}: range {i} ends before it starts (its limit comes before its start in column family {}'s \
                 order)",
                data.name
            )));
        }
    }
    Ok(())
}
