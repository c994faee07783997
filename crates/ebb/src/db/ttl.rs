//! A database whose values expire (RocksDB's `DBWithTTL`;
//! docs/data_model.md, "TTL").
//!
//! Each value is stored with the time it was written appended, as RocksDB
//! does: four bytes, the seconds since the Unix epoch as a little-endian
//! fixed32. Reads take the four bytes off again. A compaction filter drops
//! a value once it is older than the TTL, wrapping the column family's own
//! filter (which sees values without their timestamps), so an expired value
//! may still be read until a compaction reaches it, as RocksDB documents.
//!
//! Time is the database's clock ([`Options::clock`]): values are stamped
//! with its wall-clock seconds, and compactions judge them expired by it.
//!
//! Merges (RocksDB's `TtlMergeOperator`): operands are stamped as values
//! are; the family's merge operator is wrapped so that it sees values and
//! operands without their write times, and its result is stamped with the
//! time of the merge (a merge renews the key's TTL, as in RocksDB).
//!
//! A database opened with a TTL carries a marker file (`TTL`) from before
//! its first write, and [`Db::open`] refuses a database that has it, as
//! [`Db::open_with_ttl`] refuses one that has data but no marker: either
//! would otherwise read values with the wrong bytes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{ColumnFamilyHandle, Db, DbIterator, ReadOptions, Snapshot, WriteBatch, WriteOptions};
use crate::clock::Clock;
use crate::compaction_filter::{CompactionFilter, CompactionFilterContext, CompactionFilterFactory, Decision};
use crate::error::{Error, Result};
use crate::merge_operator::MergeOperator;
use crate::options::{ColumnFamilyOptions, Options};

/// The marker file of a database opened with a TTL.
pub const TTL_MARKER: &str = "TTL";

/// Bytes of the write time appended to each value.
const TS_LEN: usize = 4;

/// The clock's wall-clock seconds as the TTL database stamps values: a
/// fixed32, saturated past 2106.
fn stamp_secs(clock: &dyn Clock) -> u32 {
    u32::try_from(clock.now_secs()).unwrap_or(u32::MAX)
}

/// True when a value written at `ts` is older than `ttl` seconds at `now`
/// (RocksDB's `DBWithTTLImpl::IsStale`); a TTL of 0 or less never expires.
fn is_stale(ts: u32, ttl: i32, now: u32) -> bool {
    ttl > 0 && i64::from(ts) + i64::from(ttl) < i64::from(now)
}

/// Splits a stored value into the user's value and its write time.
fn split(stored: &[u8]) -> Option<(&[u8], u32)> {
    let at = stored.len().checked_sub(TS_LEN)?;
    let ts = u32::from_le_bytes(stored[at..].try_into().ok()?);
    Some((&stored[..at], ts))
}

/// What the TTL compaction filter wraps: the family's own filter or factory.
enum Inner {
    None,
    Filter(Arc<dyn CompactionFilter>),
    Owned(Box<dyn CompactionFilter>),
}

/// Drops expired values, and hands the rest, without their timestamps, to
/// the family's own filter (RocksDB's `TtlCompactionFilter`).
struct TtlFilter {
    ttl: i32,
    clock: Arc<dyn Clock>,
    inner: Inner,
}

impl CompactionFilter for TtlFilter {
    fn name(&self) -> &str {
        "ebb.TtlCompactionFilter"
    }

    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> Decision {
        // A value too short for its timestamp is left for reads to report.
        let Some((user_value, ts)) = split(value) else { return Decision::Keep };
        if is_stale(ts, self.ttl, stamp_secs(self.clock.as_ref())) {
            return Decision::Remove;
        }
        let inner = match &self.inner {
            Inner::None => return Decision::Keep,
            Inner::Filter(f) => f.as_ref(),
            Inner::Owned(f) => f.as_ref(),
        };
        match inner.filter(level, key, user_value) {
            // A changed value keeps the original write time.
            Decision::ChangeValue(mut v) => {
                v.extend_from_slice(&ts.to_le_bytes());
                Decision::ChangeValue(v)
            }
            d => d,
        }
    }

    /// The family's filter asked about the operand without its write time
    /// (operands do not expire: the value they merge into does).
    fn filter_merge_operand(&self, level: usize, key: &[u8], operand: &[u8]) -> bool {
        let Some((user_operand, _)) = split(operand) else { return false };
        match &self.inner {
            Inner::None => false,
            Inner::Filter(f) => f.filter_merge_operand(level, key, user_operand),
            Inner::Owned(f) => f.filter_merge_operand(level, key, user_operand),
        }
    }
}

/// The family's merge operator on values and operands without their write
/// times, its results stamped with the time now (RocksDB's
/// `TtlMergeOperator`). A value or operand too short for a write time
/// fails the merge (a corruption error naming the key, as RocksDB's).
struct TtlMergeOperator {
    inner: Arc<dyn MergeOperator>,
    clock: Arc<dyn Clock>,
}

impl TtlMergeOperator {
    fn stamped(&self, mut v: Vec<u8>) -> Vec<u8> {
        v.extend_from_slice(&stamp_secs(self.clock.as_ref()).to_le_bytes());
        v
    }
}

impl MergeOperator for TtlMergeOperator {
    /// The family's operator's name: the OPTIONS file records what the user set.
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn full_merge(&self, key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let existing = match existing {
            Some(v) => Some(split(v)?.0),
            None => None,
        };
        let operands: Vec<&[u8]> = operands.iter().map(|o| split(o).map(|(v, _)| v)).collect::<Option<_>>()?;
        self.inner.full_merge(key, existing, &operands).map(|v| self.stamped(v))
    }

    fn partial_merge(&self, key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        let operands: Vec<&[u8]> = operands.iter().map(|o| split(o).map(|(v, _)| v)).collect::<Option<_>>()?;
        self.inner.partial_merge(key, &operands).map(|v| self.stamped(v))
    }
}

/// Wraps a family's merge operator, if it has one, in [`TtlMergeOperator`].
fn install_ttl_merge_operator(operator: &mut Option<Arc<dyn MergeOperator>>, clock: &Arc<dyn Clock>) {
    if let Some(inner) = operator.take() {
        *operator = Some(Arc::new(TtlMergeOperator { inner, clock: Arc::clone(clock) }));
    }
}

/// Makes a [`TtlFilter`] per compaction around the family's factory.
struct TtlFilterFactory {
    ttl: i32,
    clock: Arc<dyn Clock>,
    inner: Arc<dyn CompactionFilterFactory>,
}

impl CompactionFilterFactory for TtlFilterFactory {
    fn name(&self) -> &str {
        "ebb.TtlCompactionFilterFactory"
    }

    fn create_compaction_filter(&self, context: &CompactionFilterContext) -> Option<Box<dyn CompactionFilter>> {
        let inner = self.inner.create_compaction_filter(context).map_or(Inner::None, Inner::Owned);
        Some(Box::new(TtlFilter { ttl: self.ttl, clock: Arc::clone(&self.clock), inner }))
    }
}

/// Puts the TTL filter in front of a family's own compaction filter or
/// factory (`filter` and `factory` are that family's option fields).
fn install_ttl_filter(
    filter: &mut Option<Arc<dyn CompactionFilter>>,
    factory: &mut Option<Arc<dyn CompactionFilterFactory>>,
    ttl: i32,
    clock: &Arc<dyn Clock>,
) {
    let ttl_filter = |inner| TtlFilter { ttl, clock: Arc::clone(clock), inner };
    match (filter.take(), factory.take()) {
        (Some(f), _) => *filter = Some(Arc::new(ttl_filter(Inner::Filter(f)))),
        (None, Some(inner)) => *factory = Some(Arc::new(TtlFilterFactory { ttl, clock: Arc::clone(clock), inner })),
        (None, None) => *filter = Some(Arc::new(ttl_filter(Inner::None))),
    }
}

/// A database whose values expire some seconds after they are written
/// (RocksDB's `DBWithTTL`), opened by [`Db::open_with_ttl`] or
/// [`Db::open_cf_with_ttl`], with a TTL per column family. Values are read
/// and written as with [`Db`]; an expired value is removed by the first
/// compaction that reads it and may be read until then.
pub struct TtlDb {
    db: Db,
    ttl: i32,
    clock: Arc<dyn Clock>,
}

impl Db {
    /// Opens (or creates, with `create_if_missing`) the database at `path`
    /// with values that expire `ttl` seconds after they are written; a TTL
    /// of 0 or less keeps them forever (RocksDB's `DBWithTTL::Open`). Time
    /// is the wall-clock time of `options.clock`, the system's by default.
    ///
    /// Errors: `InvalidArgument` when the database exists and was not
    /// created with a TTL (its values carry no timestamps); as [`Db::open`]
    /// otherwise.
    pub fn open_with_ttl(path: impl AsRef<Path>, options: Options, ttl: i32) -> Result<TtlDb> {
        Db::open_cf_with_ttl(path, options, ttl, &[])
    }

    /// [`Db::open_with_ttl`] for a database with column families (RocksDB's
    /// `DBWithTTL::Open` with column families and their TTLs): the default
    /// family expires values after `ttl` seconds, each family listed after
    /// its own; every family the database has must be listed, as
    /// [`Db::open_cf`] requires.
    pub fn open_cf_with_ttl(
        path: impl AsRef<Path>,
        mut options: Options,
        ttl: i32,
        families: &[(&str, ColumnFamilyOptions, i32)],
    ) -> Result<TtlDb> {
        let path = path.as_ref();
        let clock = Arc::clone(&options.clock);
        let fs = Arc::clone(&options.fs);
        let marker = marker_path(path);
        if !fs.exists(&marker) {
            if fs.exists(&path.join("CURRENT")) {
                return Err(Error::invalid(format!(
                    "{}: the database was not created with a TTL (no {TTL_MARKER} file): its values carry no \
                     timestamps; open it with Db::open",
                    path.display()
                )));
            }
            if !options.create_if_missing {
                return Err(Error::invalid(format!(
                    "{}: no database there, and create_if_missing is false",
                    path.display()
                )));
            }
            // The marker goes first, so no database it belongs to ever
            // exists without it.
            fs.create_dir_all(path)?;
            fs.write_file_atomic(&marker, b"ebb ttl database: values end with a 4-byte write time\n")?;
        }
        install_ttl_filter(&mut options.compaction_filter, &mut options.compaction_filter_factory, ttl, &clock);
        install_ttl_merge_operator(&mut options.merge_operator, &clock);
        let families: Vec<(&str, ColumnFamilyOptions)> = families
            .iter()
            .map(|(name, o, family_ttl)| {
                let mut o = o.clone();
                install_ttl_filter(&mut o.compaction_filter, &mut o.compaction_filter_factory, *family_ttl, &clock);
                install_ttl_merge_operator(&mut o.merge_operator, &clock);
                (*name, o)
            })
            .collect();
        let db = super::open::open(path, options, &families)?;
        Ok(TtlDb { db, ttl, clock })
    }
}

/// The marker file of the database at `path`.
pub(crate) fn marker_path(path: &Path) -> PathBuf {
    path.join(TTL_MARKER)
}

impl TtlDb {
    /// The default family's TTL, in seconds (0 or less: never).
    pub fn ttl(&self) -> i32 {
        self.ttl
    }

    /// The database underneath, whose values carry their 4-byte write times
    /// (RocksDB's `GetBaseDB`).
    pub fn base_db(&self) -> &Db {
        &self.db
    }

    fn stamp(&self, value: &[u8]) -> Vec<u8> {
        let mut v = Vec::with_capacity(value.len() + TS_LEN);
        v.extend_from_slice(value);
        v.extend_from_slice(&stamp_secs(self.clock.as_ref()).to_le_bytes());
        v
    }

    /// Sets `key` to `value`, stamped with the time now.
    pub fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put_opt(key, value, &WriteOptions::default())
    }

    /// [`TtlDb::put`] with write options.
    pub fn put_opt(&self, key: &[u8], value: &[u8], wo: &WriteOptions) -> Result<()> {
        self.db.put_opt(key, &self.stamp(value), wo)
    }

    /// Removes `key`.
    pub fn delete(&self, key: &[u8]) -> Result<()> {
        self.db.delete(key)
    }

    /// Writes the merge operand `operand` for `key`, stamped with the time
    /// now ([`Db::merge`]; module documentation).
    pub fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        self.db.merge(key, &self.stamp(operand))
    }

    /// [`TtlDb::merge`] in `cf`.
    pub fn merge_cf(&self, cf: &ColumnFamilyHandle, key: &[u8], operand: &[u8]) -> Result<()> {
        self.db.merge_cf(cf, key, &self.stamp(operand))
    }

    /// Removes every key in `[begin, end)` ([`Db::delete_range`]).
    pub fn delete_range(&self, begin: &[u8], end: &[u8]) -> Result<()> {
        self.db.delete_range(begin, end)
    }

    /// Applies `batch` atomically, in any of its column families, its
    /// values stamped with the time now.
    pub fn write(&self, batch: &WriteBatch, wo: &WriteOptions) -> Result<()> {
        let mut stamped = WriteBatch::with_capacity(batch.size_in_bytes() + batch.len() * TS_LEN);
        for op in batch.iter_cf() {
            match op.map_err(|r| Error::invalid(format!("write batch: {r}")))? {
                (cf, super::BatchOp::Put { key, value }) => stamped.put_in(cf, key, &self.stamp(value)),
                (cf, super::BatchOp::Delete { key }) => stamped.delete_in(cf, key),
                (cf, super::BatchOp::SingleDelete { key }) => stamped.single_delete_in(cf, key),
                (cf, super::BatchOp::DeleteRange { begin, end }) => stamped.delete_range_in(cf, begin, end),
                (cf, super::BatchOp::Merge { key, value }) => stamped.merge_in(cf, key, &self.stamp(value)),
                // RocksDB's `DBWithTTL` has no stamp for an entity either.
                (_, super::BatchOp::PutEntity { .. }) => {
                    return Err(Error::NotSupported("a TtlDb does not take wide-column entities".into()))
                }
            }
        }
        self.db.write_opt(&stamped, wo)
    }

    /// Sets `key` to `value` in `cf`, stamped with the time now.
    pub fn put_cf(&self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8]) -> Result<()> {
        self.db.put_cf_opt(cf, key, &self.stamp(value), &WriteOptions::default())
    }

    /// Removes `key` from `cf`.
    pub fn delete_cf(&self, cf: &ColumnFamilyHandle, key: &[u8]) -> Result<()> {
        self.db.delete_cf(cf, key)
    }

    /// The value of `key` in `cf`, without its timestamp.
    pub fn get_cf(&self, cf: &ColumnFamilyHandle, key: &[u8]) -> Result<Option<Vec<u8>>> {
        unstamp(key, self.db.get_cf_opt(cf, key, &ReadOptions::default())?)
    }

    /// An iterator over `cf` whose values come without their timestamps.
    pub fn iter_cf(&self, cf: &ColumnFamilyHandle, ro: ReadOptions<'_>) -> TtlIterator<'_> {
        TtlIterator { inner: self.db.iter_cf(cf, ro), error: std::cell::RefCell::new(None) }
    }

    /// A handle on the column family `name`.
    pub fn cf_handle(&self, name: &str) -> Option<ColumnFamilyHandle> {
        self.db.cf_handle(name)
    }

    /// Creates a column family whose values expire after `ttl` seconds
    /// (RocksDB's `DBWithTTL::CreateColumnFamilyWithTtl`).
    pub fn create_column_family(
        &self,
        name: &str,
        options: impl Into<ColumnFamilyOptions>,
        ttl: i32,
    ) -> Result<ColumnFamilyHandle> {
        let mut o = options.into();
        install_ttl_filter(&mut o.compaction_filter, &mut o.compaction_filter_factory, ttl, &self.clock);
        install_ttl_merge_operator(&mut o.merge_operator, &self.clock);
        self.db.create_column_family(name, o)
    }

    /// Drops a column family (see [`Db::drop_column_family`]).
    pub fn drop_column_family(&self, cf: &ColumnFamilyHandle) -> Result<()> {
        self.db.drop_column_family(cf)
    }

    /// Compacts a key range of `cf`, dropping what has expired.
    pub fn compact_range_cf(&self, cf: &ColumnFamilyHandle, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.db.compact_range_cf(cf, begin, end)
    }

    /// The value of `key`, without its timestamp; an expired value is
    /// returned until a compaction removes it.
    pub fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get_opt(key, &ReadOptions::default())
    }

    /// [`TtlDb::get`] with read options.
    pub fn get_opt(&self, key: &[u8], ro: &ReadOptions<'_>) -> Result<Option<Vec<u8>>> {
        unstamp(key, self.db.get_opt(key, ro)?)
    }

    /// An iterator over the database whose values come without their
    /// timestamps.
    pub fn iter(&self, ro: ReadOptions<'_>) -> TtlIterator<'_> {
        TtlIterator { inner: self.db.iter(ro), error: std::cell::RefCell::new(None) }
    }

    /// A snapshot of the database.
    pub fn snapshot(&self) -> Snapshot<'_> {
        self.db.snapshot()
    }

    /// Flushes the memtables (see [`Db::flush`]).
    pub fn flush(&self, wait: bool) -> Result<()> {
        self.db.flush(wait)
    }

    /// Compacts the key range, dropping what has expired (see [`Db::compact_range`]).
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.db.compact_range(begin, end)
    }

    /// Closes the database (see [`Db::close`]).
    pub fn close(self) -> Result<()> {
        self.db.close()
    }
}

/// The stored value of `key` read, if any, without its write time.
fn unstamp(key: &[u8], stored: Option<Vec<u8>>) -> Result<Option<Vec<u8>>> {
    let Some(mut v) = stored else { return Ok(None) };
    v.truncate(user_len(key, &v)?);
    Ok(Some(v))
}

/// The length of the user's value in the stored `v` of `key`.
fn user_len(key: &[u8], v: &[u8]) -> Result<usize> {
    v.len().checked_sub(TS_LEN).ok_or_else(|| {
        Error::corruption(
            "ttl value",
            0,
            format!(
                "value of key {:?} is {} bytes, shorter than its {TS_LEN}-byte write time",
                String::from_utf8_lossy(key),
                v.len()
            ),
        )
    })
}

/// A [`DbIterator`] over a TTL database: values without their timestamps.
/// A value too short to hold one reads as empty and makes
/// [`TtlIterator::status`] a corruption error.
pub struct TtlIterator<'a> {
    inner: DbIterator<'a>,
    error: std::cell::RefCell<Option<Error>>,
}

impl TtlIterator<'_> {
    /// True when positioned at an entry.
    pub fn valid(&self) -> bool {
        self.inner.valid()
    }

    /// The current key.
    pub fn key(&self) -> &[u8] {
        self.inner.key()
    }

    /// The current value, without its timestamp.
    pub fn value(&self) -> &[u8] {
        let v = self.inner.value();
        match user_len(self.inner.key(), v) {
            Ok(n) => &v[..n],
            Err(e) => {
                self.error.borrow_mut().get_or_insert(e);
                &[]
            }
        }
    }

    /// The first error met, by the iterator or in a value.
    pub fn status(&self) -> Result<()> {
        self.inner.status()?;
        match &*self.error.borrow() {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }

    /// Positions at the first entry.
    pub fn seek_to_first(&mut self) {
        self.inner.seek_to_first()
    }

    /// Positions at the last entry.
    pub fn seek_to_last(&mut self) {
        self.inner.seek_to_last()
    }

    /// Positions at the first key at or after `target`.
    pub fn seek(&mut self, target: &[u8]) {
        self.inner.seek(target)
    }

    /// Positions at the last key at or before `target`.
    pub fn seek_for_prev(&mut self, target: &[u8]) {
        self.inner.seek_for_prev(target)
    }

    /// Moves to the next entry.
    pub fn next(&mut self) {
        self.inner.next()
    }

    /// Moves to the previous entry.
    pub fn prev(&mut self) {
        self.inner.prev()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staleness_follows_rocksdb() {
        assert!(!is_stale(100, 10, 110), "exactly ttl old is not stale");
        assert!(is_stale(100, 10, 111));
        assert!(!is_stale(100, 0, u32::MAX), "ttl 0 never expires");
        assert!(!is_stale(100, -5, u32::MAX), "a negative ttl never expires");
        assert!(!is_stale(u32::MAX, i32::MAX, u32::MAX), "no overflow");
    }

    #[test]
    fn split_takes_the_last_four_bytes() {
        assert_eq!(split(b"abc\x01\x00\x00\x00"), Some((&b"abc"[..], 1)));
        assert_eq!(split(b"\x02\x01\x00\x00"), Some((&b""[..], 258)));
        assert_eq!(split(b"abc"), None);
    }
}
