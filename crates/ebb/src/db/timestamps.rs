//! The user-defined timestamp calls of the handle (RocksDB's `Put`,
//! `Delete`, `SingleDelete`, `Merge` and `Get` with a timestamp): in a
//! column family whose comparator is
//! [`crate::comparator::bytewise_with_u64_ts`], every key carries a u64
//! timestamp, and reads see each key as of a timestamp
//! (docs/timestamps.md).
//!
//! Contract (RocksDB's): for two versions of one key, the one written
//! later has the larger or equal timestamp. Reads take the newest version
//! at or below `ReadOptions::timestamp` that their snapshot sees.

use super::{ColumnFamilyHandle, Db, ReadOptions, WriteBatch, WriteOptions};
use crate::error::{Error, Result};
use crate::version::VersionEdit;

impl Db {
    /// Sets `key` to `value` at timestamp `ts` in column family `cf`, whose
    /// comparator has timestamps; a family without them refuses it
    /// (`InvalidArgument`).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let mut o = ebb::Options::default();
    /// # o.create_if_missing = true;
    /// # let db = ebb::Db::open(dir.path(), o).unwrap();
    /// let mut cfo = ebb::ColumnFamilyOptions::default();
    /// cfo.comparator = Some(ebb::comparator::bytewise_with_u64_ts());
    /// let cf = db.create_column_family("versions", cfo).unwrap();
    /// db.put_with_ts(&cf, b"k", 10, b"v10").unwrap();
    /// db.put_with_ts(&cf, b"k", 20, b"v20").unwrap();
    /// let at = |ts| ebb::ReadOptions { timestamp: Some(ts), ..Default::default() };
    /// assert_eq!(db.get_cf_opt(&cf, b"k", &at(15)).unwrap(), Some(b"v10".to_vec()));
    /// assert_eq!(db.get_with_ts(&cf, b"k", &at(25)).unwrap(), Some((b"v20".to_vec(), 20)));
    /// assert_eq!(db.get_cf_opt(&cf, b"k", &at(5)).unwrap(), None);
    /// ```
    pub fn put_with_ts(&self, cf: &ColumnFamilyHandle, key: &[u8], ts: u64, value: &[u8]) -> Result<()> {
        self.put_with_ts_opt(cf, key, ts, value, &WriteOptions::default())
    }

    /// [`Db::put_with_ts`] with write options.
    pub fn put_with_ts_opt(
        &self,
        cf: &ColumnFamilyHandle,
        key: &[u8],
        ts: u64,
        value: &[u8],
        wo: &WriteOptions,
    ) -> Result<()> {
        self.write_one(cf, wo, |b| b.put_with_ts(cf, key, ts, value))
    }

    /// Deletes `key` at timestamp `ts` in column family `cf`: reads at `ts`
    /// or later do not see its older versions.
    pub fn delete_with_ts(&self, cf: &ColumnFamilyHandle, key: &[u8], ts: u64) -> Result<()> {
        self.delete_with_ts_opt(cf, key, ts, &WriteOptions::default())
    }

    /// [`Db::delete_with_ts`] with write options.
    pub fn delete_with_ts_opt(&self, cf: &ColumnFamilyHandle, key: &[u8], ts: u64, wo: &WriteOptions) -> Result<()> {
        self.write_one(cf, wo, |b| b.delete_with_ts(cf, key, ts))
    }

    /// Single-deletes `key` at timestamp `ts` in column family `cf`
    /// (RocksDB `SingleDelete` with a timestamp; single delete's contract
    /// holds per timestamp).
    pub fn single_delete_with_ts(&self, cf: &ColumnFamilyHandle, key: &[u8], ts: u64) -> Result<()> {
        self.write_one(cf, &WriteOptions::default(), |b| b.single_delete_with_ts(cf, key, ts))
    }

    /// Adds merge operand `value` for `key` at timestamp `ts` in column
    /// family `cf`: a read at `ts` or later applies it to the versions
    /// below it.
    pub fn merge_with_ts(&self, cf: &ColumnFamilyHandle, key: &[u8], ts: u64, value: &[u8]) -> Result<()> {
        self.write_one(cf, &WriteOptions::default(), |b| b.merge_with_ts(cf, key, ts, value))
    }

    /// Reads `key` in column family `cf` as of `ro.timestamp` (required
    /// there): its newest version at or below it, with that version's
    /// timestamp (RocksDB `Get` with a `timestamp` out-parameter).
    pub fn get_with_ts(
        &self,
        cf: &ColumnFamilyHandle,
        key: &[u8],
        ro: &ReadOptions<'_>,
    ) -> Result<Option<(Vec<u8>, u64)>> {
        match self.inner.get_at_timestamp::<Vec<u8>>(&cf.data, key, ro)? {
            Some((got, ts)) => Ok(Some((got.into_value(key)?, ts))),
            None => Ok(None),
        }
    }

    /// Raises column family `cf`'s full_history_ts_low to `ts` (RocksDB
    /// `IncreaseFullHistoryTsLow`): reads at a timestamp below it are
    /// refused from now on, and compactions may drop the versions only such
    /// reads could see (of a key's versions below `ts`, the newest is kept;
    /// at the bottom level, with a tombstone, none). Recorded in the
    /// MANIFEST before it takes effect. Lowering it is `InvalidArgument`;
    /// so is a family without timestamps.
    pub fn increase_full_history_ts_low(&self, cf: &ColumnFamilyHandle, ts: u64) -> Result<()> {
        self.inner.check_family(&cf.data)?;
        let data = &cf.data;
        if data.cmp.timestamp_size() == 0 {
            return Err(Error::invalid(format!(
                "increase_full_history_ts_low: column family '{}' has no timestamps",
                data.name
            )));
        }
        let mut st = self.inner.state.lock();
        let current = data.full_history_ts_low();
        if ts < current {
            return Err(Error::invalid(format!(
                "increase_full_history_ts_low: {ts} is below column family '{}''s current {current}",
                data.name
            )));
        }
        if ts == current {
            return Ok(());
        }
        let edit = VersionEdit { column_family: data.id, full_history_ts_low: Some(ts), ..VersionEdit::default() };
        self.inner.log_and_apply(&mut st, vec![edit])?;
        data.raise_full_history_ts_low(ts);
        Ok(())
    }

    /// Column family `cf`'s full_history_ts_low (0 when never raised).
    pub fn get_full_history_ts_low(&self, cf: &ColumnFamilyHandle) -> Result<u64> {
        self.inner.check_family(&cf.data)?;
        if cf.data.cmp.timestamp_size() == 0 {
            return Err(Error::invalid(format!(
                "get_full_history_ts_low: column family '{}' has no timestamps",
                cf.data.name
            )));
        }
        Ok(cf.data.full_history_ts_low())
    }

    /// Writes the one update `add` puts in a batch.
    fn write_one(&self, cf: &ColumnFamilyHandle, wo: &WriteOptions, add: impl FnOnce(&mut WriteBatch)) -> Result<()> {
        self.inner.check_family(&cf.data)?;
        let mut b = WriteBatch::new();
        add(&mut b);
        b.validate()?;
        self.inner.write(Some(b), wo, None)
    }
}
