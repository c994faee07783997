//! Secondary instances (RocksDB's `OpenAsSecondary` and
//! `TryCatchUpWithPrimary`): a read-only instance of a database another
//! process writes, which catches up with it on request
//! (docs/operations.md, "Secondary instances").
//!
//! A secondary opens the primary's directory as a read-only instance does
//! (no LOCK, nothing written there); its info log goes to its own
//! directory. `try_catch_up_with_primary` reads the primary's MANIFEST and
//! WALs again into a fresh view and installs it only if the MANIFEST did not
//! change while the view was read, so the WALs replayed belong to the
//! MANIFEST state read, and the view is one the primary had: every table of
//! that state as of some point, and the WALs' records up to a point. The
//! tables of the view are opened before it is installed (an open file
//! outlives the primary deleting it), so reads of an installed view do not
//! fail on a table the primary compacted away meanwhile.

use std::path::Path;
use std::sync::Arc;

use super::engine::SecondaryState;
use super::info_log::InfoLog;
use super::open::{open_locked, NoLock};
use super::Db;
use crate::error::{Error, Result};
use crate::options::{ColumnFamilyOptions, Options, WalRecoveryMode};
use crate::version::filename;

/// Attempts at a view the primary did not change under.
const CATCH_UP_ATTEMPTS: usize = 20;

impl Db {
    /// Opens the database at `primary` as a secondary instance (RocksDB's
    /// `OpenAsSecondary`): read-only, no LOCK taken, nothing written in the
    /// primary's directory; its info log goes to `secondary` (created if
    /// missing). It reads the database as it was when opened until
    /// [`Db::try_catch_up_with_primary`]. The WALs are read in
    /// point-in-time mode whatever `wal_recovery_mode` says: the primary's
    /// newest WAL may end in a record being written.
    pub fn open_as_secondary(primary: impl AsRef<Path>, secondary: impl AsRef<Path>, options: Options) -> Result<Db> {
        let none: [(&str, ColumnFamilyOptions); 0] = [];
        Db::open_cf_as_secondary(primary, secondary, options, &none)
    }

    /// [`Db::open_as_secondary`] with options for column families (those
    /// not listed open with `options`).
    pub fn open_cf_as_secondary<F>(
        primary: impl AsRef<Path>,
        secondary: impl AsRef<Path>,
        mut options: Options,
        families: &[(&str, F)],
    ) -> Result<Db>
    where
        for<'a> &'a F: Into<ColumnFamilyOptions>,
    {
        let primary = primary.as_ref();
        super::refuse_ttl_database(primary, &options)?;
        options.validate()?;
        if options.wal_recovery_mode == WalRecoveryMode::AbsoluteConsistency {
            options.wal_recovery_mode = WalRecoveryMode::PointInTime;
        }
        let fs = Arc::clone(&options.fs);
        if !fs.exists(&filename::current_file(primary)) {
            return Err(Error::invalid(format!(
                "{} is not an Ebb database: it has no CURRENT file",
                primary.display()
            )));
        }
        let secondary = secondary.as_ref();
        // Its info log would rotate and prune the primary's.
        if secondary.components().eq(primary.components()) {
            return Err(Error::invalid(format!(
                "a secondary's own directory must not be the primary's ({})",
                primary.display()
            )));
        }
        fs.create_dir_all(secondary)?;
        let info_log = Arc::new(InfoLog::open(fs.as_ref(), secondary, options.keep_log_file_num)?);
        let families: Vec<(&str, ColumnFamilyOptions)> = families.iter().map(|(n, o)| (*n, o.into())).collect();
        let db = super::open::open_beside_primary(primary, &options, &families, info_log)?;
        let _ = db.inner.secondary.set(SecondaryState::new(options));
        Ok(db)
    }

    /// Reads the primary's MANIFEST and WALs again and makes what they hold
    /// this instance's view (RocksDB's `TryCatchUpWithPrimary`): tables
    /// flushed and compacted since, and writes in the WALs since. Column
    /// families created on the primary since the open are not opened here
    /// (reopen the secondary to read them); one dropped there reads as
    /// dropped here.
    ///
    /// Errors: `NotSupported` on an instance that is not a secondary;
    /// `InvalidArgument` when the primary's directory is no longer a
    /// database; `Busy` when the primary changed its MANIFEST during every
    /// attempt; the error that stopped the last attempt when every attempt
    /// failed (a read error is tried again: the primary may have renamed or
    /// deleted a file under it). After an error the view stays what it was.
    pub fn try_catch_up_with_primary(&self) -> Result<()> {
        let inner = &self.inner;
        inner.check_open()?;
        let Some(secondary) = inner.secondary.get() else {
            return Err(Error::NotSupported(format!(
                "try_catch_up_with_primary on {}, which is not open as a secondary instance",
                inner.dir.display()
            )));
        };
        let _one = secondary.one_catch_up();
        let fs = inner.fs.as_ref();
        let dir = &inner.dir;
        let families: Vec<(String, ColumnFamilyOptions)> = {
            let st = inner.state.lock();
            st.families
                .iter()
                .filter(|(id, _)| *id != 0)
                .map(|(_, f)| (f.data().name.clone(), ColumnFamilyOptions::clone(&f.data().options())))
                .collect()
        };
        let listed: Vec<(&str, ColumnFamilyOptions)> = families.iter().map(|(n, o)| (n.as_str(), o.clone())).collect();
        let mut last_error = None;
        for _ in 0..CATCH_UP_ATTEMPTS {
            if !fs.exists(&filename::current_file(dir)) {
                return Err(Error::invalid(format!(
                    "the primary database at {} is gone: its directory has no CURRENT file",
                    dir.display()
                )));
            }
            let before = super::open::manifest_marker(fs, dir);
            let fresh = open_locked(
                dir,
                secondary.options().clone(),
                &listed,
                Box::new(NoLock),
                Arc::new(InfoLog::disabled()),
                true,
            );
            let fresh = match fresh {
                Ok(db) => db,
                // A WAL or table deleted or renamed under the read (the
                // MANIFEST moved on, or a pending WAL took its final name):
                // again; an error that stays is returned after the last try.
                Err(e) => {
                    last_error = Some(e);
                    continue;
                }
            };
            // Open every table of the view through this instance's cache.
            let pinned = (|| -> Result<()> {
                let st = fresh.inner.state.lock();
                for (id, f) in st.families.iter() {
                    let Some(version) = st.versions.version(id) else { continue };
                    for (level, files) in version.levels.iter().enumerate() {
                        for file in files {
                            inner.tables.get(file, level, &f.data().cmp)?;
                        }
                    }
                }
                Ok(())
            })();
            let unchanged = before.is_some() && super::open::manifest_marker(fs, dir) == before;
            if let Err(e) = pinned {
                last_error = Some(e);
                continue;
            }
            if !unchanged {
                continue;
            }
            let mut fresh_st = fresh.inner.state.lock();
            let mut st = inner.state.lock();
            std::mem::swap(&mut st.versions, &mut fresh_st.versions);
            let st = &mut *st;
            let versions = &st.versions;
            st.families.take_memtables_of(&fresh_st.families, |id| versions.version(id).is_some());
            // A raised full_history_ts_low comes with the view: reads below
            // it would see the history the primary's compactions dropped.
            for (id, f) in st.versions.families() {
                if let Some(data) = st.families.data(*id) {
                    data.raise_full_history_ts_low(f.full_history_ts_low);
                }
            }
            let seq = fresh.inner.last_sequence.get();
            inner.last_sequence.advance_to(seq);
            inner.install_super_version(st);
            return Ok(());
        }
        if let Some(e) = last_error {
            return Err(e);
        }
        Err(Error::Busy(format!(
            "the primary at {} changed its MANIFEST during each of {CATCH_UP_ATTEMPTS} attempts to catch up; try again",
            dir.display()
        )))
    }
}
