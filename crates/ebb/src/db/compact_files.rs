//! Compacting named files (RocksDB's `CompactFiles`): for systems that
//! drive compaction themselves (YugabyteDB), or an operator who wants
//! particular tables rewritten into a particular level.

use super::job_guard::JobGuard;
use super::jobs::Hold;
use super::{ColumnFamilyHandle, Db};
use crate::compaction::picker;
use crate::error::{Error, Result};

impl Db {
    /// Compacts the table files named `input_file_names` of column family
    /// `cf` into `output_level`, on the caller's thread, and returns the
    /// names of the tables written (`/000034.sst`, as
    /// [`LiveFileMetaData::name`](crate::LiveFileMetaData::name)). A name is
    /// a table's file name, with or without a directory or a leading `/`
    /// (`/000012.sst`, `000012.sst`).
    ///
    /// As RocksDB does, the files that must go with the named ones are
    /// added: from the shallowest named level down to the output level,
    /// every file overlapping the inputs' key range (so no older version is
    /// left above a newer one moved beneath it, and level 0's overlapping
    /// files go together). The inputs are always rewritten, never moved.
    ///
    /// Errors: `InvalidArgument` for a name that is not a live table of the
    /// family, an output level that does not exist or is above an input's
    /// level, or no name; `Busy` when a running compaction holds a file the
    /// compaction needs (retry once it ends); `NotSupported` on a read-only
    /// instance.
    pub fn compact_files(
        &self,
        cf: &ColumnFamilyHandle,
        input_file_names: &[&str],
        output_level: usize,
    ) -> Result<Vec<String>> {
        let inner = &self.inner;
        inner.check_writable("compact_files")?;
        inner.check_family(&cf.data)?;
        let numbers = input_file_names.iter().map(|name| table_number(name)).collect::<Result<Vec<u64>>>()?;
        let cf_id = cf.data.id;
        let mut st = inner.state.lock();
        let written = inner.catch_job(&mut st, "manual compaction", |st| {
            let mut st = JobGuard::new(inner, st, Hold::ManualCompaction);
            st.bg_error.check()?;
            let dropped = || Error::invalid(format!("column family {} was dropped", cf.data.name));
            let data = st.families.data(cf_id).ok_or_else(dropped)?;
            let opts = inner.family_opts(&data);
            let version = st.versions.version(cf_id).ok_or_else(dropped)?;
            let c = picker::files_compaction(&version, &opts, st.jobs.being_compacted(), &numbers, output_level)?;
            drop(version);
            inner.run_compaction(&mut st, cf_id, c)
        })??;
        Ok(written.iter().map(|n| format!("/{n:06}.sst")).collect())
    }
}

/// The number of the table file `name` names (`[dir/]NNNNNN.sst`).
fn table_number(name: &str) -> Result<u64> {
    let file = name.rsplit('/').next().unwrap_or(name);
    file.strip_suffix(".sst")
        .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|digits| digits.parse().ok())
        .ok_or_else(|| Error::invalid(format!("compact_files: {name:?} is not a table file name (NNNNNN.sst)")))
}
