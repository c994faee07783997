//! Dropping whole table files by key range (RocksDB's
//! `DeleteFilesInRange`/`DeleteFilesInRanges`): the quick way for a system
//! that moves a range of keys elsewhere (TiKV dropping a region) to give
//! back most of its space at once, without writing tombstones or
//! compacting.
//!
//! What it promises, as RocksDB does:
//! - Only table files of levels 1 and up whose keys all lie in a range are
//!   dropped; level 0's files (which overlap each other), the memtables,
//!   and files that reach outside the range keep their keys. So keys of the
//!   range may remain, and an older version of a key, in a deeper level's
//!   file that reaches outside the range, may show again.
//! - A dropped file is gone for every reader from the moment the call
//!   returns, snapshots taken before included (an iterator open before
//!   keeps reading the version it started with).
//! - A run of files is cut cleanly: a file is not dropped when the file
//!   beside it, outside the range, holds versions of its first or last user
//!   key (dropping it would leave part of that key's versions).
//! - Files a running compaction reads are left alone.
//!
//! The drop is one version edit, durable in the MANIFEST before it is seen;
//! a crash leaves the files all listed or all dropped.

use super::job_guard::JobGuard;
use super::jobs::Hold;
use super::{ColumnFamilyHandle, Db};
use crate::error::{Error, Result};
use crate::key::user_key;
use crate::version::{FileMetaData, VersionEdit};

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

impl Db {
    /// Drops the table files of column family `cf` whose keys all lie in
    /// `[begin, end]` (`end` excluded when `include_end` is false; `None`:
    /// unbounded), in levels 1 and up (RocksDB's `DeleteFilesInRange`; the
    /// module documentation says what is and is not dropped). Returns the
    /// number of files dropped. Errors: `InvalidArgument` when `end` comes
    /// before `begin`; `NotSupported` on a read-only instance.
    pub fn delete_files_in_range(
        &self,
        cf: &ColumnFamilyHandle,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
        include_end: bool,
    ) -> Result<usize> {
        self.delete_files_in_ranges(cf, &[(begin, end)], include_end)
    }

    /// [`Db::delete_files_in_range`] for several ranges, in one version edit
    /// (RocksDB's `DeleteFilesInRanges`).
    // Each range is RocksDB's `RangePtr`: two optional ends, spelled out.
    #[allow(clippy::type_complexity)]
    pub fn delete_files_in_ranges(
        &self,
        cf: &ColumnFamilyHandle,
        ranges: &[(Option<&[u8]>, Option<&[u8]>)],
        include_end: bool,
    ) -> Result<usize> {
        let inner = &self.inner;
        inner.check_writable("a deletion of files")?;
        inner.check_family(&cf.data)?;
        let cmp = &cf.data.cmp;
        // Bounds are keys without timestamps in a family with them.
        let padded: Vec<_> = ranges
            .iter()
            .map(|&(b, e)| {
                (b.map(|b| cf.data.range_bound(b, true, true)), e.map(|e| cf.data.range_bound(e, false, include_end)))
            })
            .collect();
        let ranges: Vec<(Option<&[u8]>, Option<&[u8]>)> =
            padded.iter().map(|(b, e)| (b.as_deref(), e.as_deref())).collect();
        let ranges = ranges.as_slice();
        for (i, &(begin, end)) in ranges.iter().enumerate() {
            if let (Some(b), Some(e)) = (begin, end) {
                if cmp.lt(e, b) {
                    return Err(Error::invalid(format!(
                        "delete files in range: range {i} ends before it starts (in column family {}'s order)",
                        cf.data.name
                    )));
                }
            }
        }
        let mut st = inner.state.lock();
        st.bg_error.check()?;
        let Some(version) = st.versions.version(cf.data.id) else {
            return Err(Error::invalid(format!("column family {} was dropped", cf.data.name)));
        };
        let within = |f: &FileMetaData, begin: Option<&[u8]>, end: Option<&[u8]>| {
            let (first, last) = (user_key(&f.smallest), user_key(&f.largest));
            begin.is_none_or(|b| !cmp.lt(first, b))
                && end.is_none_or(|e| if include_end { !cmp.lt(e, last) } else { cmp.lt(last, e) })
        };
        let mut doomed: Vec<(usize, u64)> = Vec::new();
        for (level, files) in version.levels.iter().enumerate().skip(1) {
            for &(begin, end) in ranges {
                // Maximal runs of files inside the range, then trimmed at
                // either end while a neighbour outside shares the boundary
                // user key.
                let mut i = 0;
                while i < files.len() {
                    if !within(&files[i], begin, end) {
                        i += 1;
                        continue;
                    }
                    let mut j = i;
                    while j + 1 < files.len() && within(&files[j + 1], begin, end) {
                        j += 1;
                    }
                    let (mut lo, mut hi) = (i, j + 1);
                    let shares = |a: &FileMetaData, b: &FileMetaData| user_key(&a.largest) == user_key(&b.smallest);
                    while lo < hi && lo > 0 && shares(&files[lo - 1], &files[lo]) {
                        lo += 1;
                    }
                    while hi > lo && hi < files.len() && shares(&files[hi - 1], &files[hi]) {
                        hi -= 1;
                    }
                    for f in &files[lo..hi] {
                        if !st.jobs.being_compacted().contains(&f.number) && !doomed.contains(&(level, f.number)) {
                            doomed.push((level, f.number));
                        }
                    }
                    i = j + 1;
                }
            }
        }
        if doomed.is_empty() {
            return Ok(0);
        }
        let mut edit = VersionEdit { column_family: cf.data.id, ..Default::default() };
        for &(level, number) in &doomed {
            edit.delete_file(level, number);
        }
        // Held as a compaction's inputs while the edit is written (without
        // the mutex), so no compaction picks them meanwhile.
        let hold = Hold::Compaction {
            inputs: doomed.iter().map(|&(_, n)| n).collect(),
            cancel: Arc::new(AtomicBool::new(false)),
        };
        let mut guard = JobGuard::new(inner, &mut st, hold);
        if !guard.families.contains(cf.data.id) {
            return Err(Error::invalid(format!("column family {} was dropped", cf.data.name)));
        }
        inner.log_and_apply(&mut guard, vec![edit])?;
        inner.install_super_version(&mut guard);
        drop(guard);
        inner.delete_obsolete_files(&mut st);
        Ok(doomed.len())
    }
}
