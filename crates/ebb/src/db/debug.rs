//! What operators and tools read below the user's view: every version of a
//! key (RocksDB's `GetAllKeyVersions`, utilities/debug.h) and a check of
//! every table's checksums (RocksDB's `DB::VerifyChecksum`).

use std::sync::Arc;

use super::{ColumnFamilyHandle, Db};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIterator};
use crate::key::{make_internal_key, parse_internal_key, KIND_FOR_SEEK, MAX_SEQUENCE};
use crate::sst::ReadSettings;
use crate::table_properties::EntryType;
use crate::version::{LevelFiles, LevelIterator};

/// One stored version of a key ([`Db::get_all_key_versions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyVersion {
    /// The user key.
    pub user_key: Vec<u8>,
    /// The value as stored (empty for a deletion; a blob reference for
    /// [`EntryType::BlobIndex`]).
    pub value: Vec<u8>,
    /// Its sequence number.
    pub sequence: u64,
    /// What it is.
    pub entry_type: EntryType,
}

impl Db {
    /// Every stored version of every key in `[begin, end)` of column family
    /// `cf` (`None`: unbounded), newest first within a key, at most `max`
    /// of them, from the memtables and every table, whether a read would
    /// see them or not (RocksDB's `GetAllKeyVersions`). Range deletions are
    /// not listed; checksums are verified.
    pub fn get_all_key_versions(
        &self,
        cf: &ColumnFamilyHandle,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
        max: usize,
    ) -> Result<Vec<KeyVersion>> {
        let inner = &self.inner;
        inner.check_open()?;
        self.inner.check_family(&cf.data)?;
        let data = &cf.data;
        let sv = data.super_version();
        let rs = ReadSettings { verify_checksums: true, fill_cache: false, ..ReadSettings::default() };
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for mem in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            children.push(Box::new(mem.iter()));
        }
        for f in &sv.version.levels[0] {
            children.push(Box::new(inner.tables.get(f, 0, &data.cmp)?.iter(rs)));
        }
        for (level, files) in sv.version.levels.iter().enumerate().skip(1) {
            if !files.is_empty() {
                let files = LevelFiles::Version(Arc::clone(&sv.version), level);
                children.push(Box::new(LevelIterator::new(
                    files,
                    data.cmp.clone(),
                    level,
                    Arc::clone(&inner.tables),
                    rs,
                )));
            }
        }
        let mut it = MergingIterator::new(data.cmp.clone(), children);
        match begin {
            Some(b) => it.seek(&make_internal_key(b, MAX_SEQUENCE, KIND_FOR_SEEK)),
            None => it.seek_to_first(),
        }
        let mut out = Vec::new();
        while it.valid() && out.len() < max {
            let p =
                parse_internal_key(it.key()).ok_or_else(|| Error::corruption("an entry", 0, "an unparsable key"))?;
            if end.is_some_and(|e| !data.cmp.lt(p.user_key, e)) {
                break;
            }
            let entry_type = EntryType::of(p.kind);
            out.push(KeyVersion {
                user_key: p.user_key.to_vec(),
                value: it.value().to_vec(),
                sequence: p.seq,
                entry_type,
            });
            it.next();
        }
        it.status()?;
        Ok(out)
    }

    /// The properties of every live table of column family `cf`, by file
    /// path (RocksDB's `GetPropertiesOfAllTables`), the user collectors'
    /// included (`TableProperties::user_collected_properties`).
    pub fn get_properties_of_all_tables(
        &self,
        cf: &ColumnFamilyHandle,
    ) -> Result<std::collections::BTreeMap<String, crate::sst::TableProperties>> {
        let inner = &self.inner;
        inner.check_open()?;
        self.inner.check_family(&cf.data)?;
        let sv = cf.data.super_version();
        let mut out = std::collections::BTreeMap::new();
        for (level, files) in sv.version.levels.iter().enumerate() {
            for f in files {
                let table = inner.tables.get(f, level, &cf.data.cmp)?;
                let path = crate::version::filename::table_file(&inner.dir, f.number);
                out.insert(path.display().to_string(), table.properties().clone());
            }
        }
        Ok(out)
    }

    /// Reads every table of every column family whole, verifying every
    /// block's checksum (RocksDB's `VerifyChecksum`); returns the tables
    /// read. Errors: `Corruption` naming the first damaged table.
    pub fn verify_checksum(&self) -> Result<usize> {
        let inner = &self.inner;
        inner.check_open()?;
        let versions: Vec<_> = {
            let st = inner.state.lock();
            st.families.iter().map(|(_, f)| (f.data().super_version(), f.data().cmp.clone())).collect()
        };
        let rs = ReadSettings { verify_checksums: true, fill_cache: false, ..ReadSettings::default() };
        let mut tables = 0;
        for (sv, cmp) in versions {
            for (level, files) in sv.version.levels.iter().enumerate() {
                for f in files {
                    let mut it = inner.tables.get(f, level, &cmp)?.iter(rs);
                    it.seek_to_first();
                    while it.valid() {
                        it.next();
                    }
                    it.status()?;
                    tables += 1;
                }
            }
        }
        Ok(tables)
    }
}
