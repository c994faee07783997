//! The wide-column calls of the handle (RocksDB's `PutEntity` and
//! `GetEntity`): a key holding named columns instead of one value
//! (docs/data_model.md, "Wide columns"; the format in
//! [`crate::wide_columns`]).

use super::column_family::ColumnFamilyData;
use super::{ColumnFamilyHandle, Db, ReadOptions, WriteBatch, WriteOptions};
use crate::error::Result;
use crate::wide_columns::WideColumn;

impl Db {
    /// Sets `key` to an entity of `columns` (RocksDB `PutEntity`), given in
    /// any order, names unique; the column named `""` is its plain value,
    /// what [`Db::get`] returns.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let mut o = ebb::Options::default();
    /// # o.create_if_missing = true;
    /// # let db = ebb::Db::open(dir.path(), o).unwrap();
    /// use ebb::WideColumn;
    /// db.put_entity(b"user1", &[(b"", b"Ada"), (b"city", b"London")]).unwrap();
    /// assert_eq!(db.get(b"user1").unwrap(), Some(b"Ada".to_vec()));
    /// let columns = db.get_entity(b"user1").unwrap().unwrap();
    /// assert_eq!(columns, vec![WideColumn::new("", "Ada"), WideColumn::new("city", "London")]);
    /// ```
    pub fn put_entity(&self, key: &[u8], columns: &[(&[u8], &[u8])]) -> Result<()> {
        self.put_entity_opt(key, columns, &WriteOptions::default())
    }

    /// [`Db::put_entity`] with write options.
    pub fn put_entity_opt(&self, key: &[u8], columns: &[(&[u8], &[u8])], wo: &WriteOptions) -> Result<()> {
        self.write_entity(&self.inner.default_cf, key, columns, wo)
    }

    /// [`Db::put_entity`] in column family `cf`.
    pub fn put_entity_cf(&self, cf: &ColumnFamilyHandle, key: &[u8], columns: &[(&[u8], &[u8])]) -> Result<()> {
        self.put_entity_cf_opt(cf, key, columns, &WriteOptions::default())
    }

    /// [`Db::put_entity`] in column family `cf`, with write options.
    pub fn put_entity_cf_opt(
        &self,
        cf: &ColumnFamilyHandle,
        key: &[u8],
        columns: &[(&[u8], &[u8])],
        wo: &WriteOptions,
    ) -> Result<()> {
        self.inner.check_family(&cf.data)?;
        self.write_entity(&cf.data, key, columns, wo)
    }

    /// Writes one entity into family `cf`.
    fn write_entity(
        &self,
        cf: &ColumnFamilyData,
        key: &[u8],
        columns: &[(&[u8], &[u8])],
        wo: &WriteOptions,
    ) -> Result<()> {
        if cf.cmp.timestamp_size() > 0 {
            return Err(crate::error::Error::NotSupported(
                "wide-column entities in a column family with timestamps".into(),
            ));
        }
        let mut b = WriteBatch::new();
        b.put_entity_in(cf.id, key, columns)?;
        b.validate()?;
        self.inner.write(Some(b), wo, None)
    }

    /// The columns of `key` (RocksDB `GetEntity`), by name ascending: an
    /// entity's, or for a plain value one column named `""` holding it;
    /// `None` when the key has neither.
    pub fn get_entity(&self, key: &[u8]) -> Result<Option<Vec<WideColumn>>> {
        self.get_entity_opt(key, &ReadOptions::default())
    }

    /// [`Db::get_entity`] with read options.
    pub fn get_entity_opt(&self, key: &[u8], ro: &ReadOptions<'_>) -> Result<Option<Vec<WideColumn>>> {
        self.inner.get_entity_in(&self.inner.default_cf, key, ro)
    }

    /// The columns of each of `keys` (RocksDB `MultiGetEntity`), all read at
    /// one point: `ro`'s snapshot, or one taken for the call. Answers are in
    /// the order of `keys`; an error fails only the keys it concerns.
    pub fn multi_get_entity(&self, keys: &[&[u8]], ro: &ReadOptions<'_>) -> Vec<Result<Option<Vec<WideColumn>>>> {
        let reads: Vec<(&ColumnFamilyData, &[u8])> = keys.iter().map(|k| (&*self.inner.default_cf, *k)).collect();
        self.multi_get_entity_in(&reads, ro)
    }

    /// [`Db::multi_get_entity`] across column families: each key read in
    /// its family, all at one point.
    pub fn multi_get_entity_cf(
        &self,
        reads: &[(&ColumnFamilyHandle, &[u8])],
        ro: &ReadOptions<'_>,
    ) -> Vec<Result<Option<Vec<WideColumn>>>> {
        let reads: Vec<(&ColumnFamilyData, &[u8])> = reads.iter().map(|(cf, k)| (&*cf.data, *k)).collect();
        self.multi_get_entity_in(&reads, ro)
    }

    fn multi_get_entity_in(
        &self,
        reads: &[(&ColumnFamilyData, &[u8])],
        ro: &ReadOptions<'_>,
    ) -> Vec<Result<Option<Vec<WideColumn>>>> {
        self.each_at_one_point(reads, ro, |cf, key, ro| self.inner.get_entity_in(cf, key, ro))
    }

    /// [`Db::get_entity`] in column family `cf`, with read options.
    pub fn get_entity_cf_opt(
        &self,
        cf: &ColumnFamilyHandle,
        key: &[u8],
        ro: &ReadOptions<'_>,
    ) -> Result<Option<Vec<WideColumn>>> {
        self.inner.get_entity_in(&cf.data, key, ro)
    }
}
