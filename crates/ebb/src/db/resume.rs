//! Recovering from a background error without a reopen (RocksDB's
//! `DB::Resume`): the writes the error put at risk are made durable in
//! tables, away from the WAL and MANIFEST that failed, and then the error
//! is cleared (db/bg_error.rs, invariant 1).
//!
//! Contract:
//! 1. Only a recoverable error (an I/O error, db/bg_error.rs invariant 2)
//!    is resumed; any other is returned as it stands.
//! 2. Writes stay refused until the recovery is done: the write queue is
//!    held throughout, so no write group runs, and the error stays set
//!    (background threads start no job meanwhile).
//! 3. The recovery, in order: (a) a new WAL, since the one being written
//!    may end in part of a record that failed (every family's memtable
//!    holding data is switched, the empty ones renumbered); (b) every
//!    immutable memtable flushed, oldest WAL first; (c) every family's log
//!    number moved past the closed WALs, which are not sealed (the one that
//!    failed refuses every sync) but forgotten, so that no recovery replays
//!    a WAL written before the error, a failed record included; (d) when an earlier MANIFEST write failed, a new MANIFEST
//!    (any edit in (b) or (c) rolls one; with none, an edit of the default
//!    family's log number as it stands does). Each step that fails ends
//!    the resume with its error, and the old error stays in force: the
//!    resume may be tried again, or the database reopened.
//! 4. Then the error is cleared, the sequence numbers failed writes were
//!    given are skipped (db/bg_error.rs, invariant 3), background work
//!    starts again and the files the failed jobs left are deleted.
//!
//! Listeners hear `on_error_recovery_begin` before (a) and
//! `on_error_recovery_end` after, whatever the outcome.

use std::sync::Arc;

use parking_lot::MutexGuard;

use super::engine::DbState;
use super::DbInner;
use crate::error::{Error, Result};
use crate::events::ErrorRecoveryInfo;
use crate::version::VersionEdit;

impl DbInner {
    /// The resume (the module's contract).
    pub(crate) fn resume(&self) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            return Ok(());
        }
        // The queue, then the state: the lock order (db/engine.rs).
        let _queue = self.queue.hold();
        let mut st = self.state.lock();
        let Some(old) = st.bg_error.get().cloned() else { return Ok(()) };
        if st.jobs.is_shutting_down() {
            return Err(Error::Closed);
        }
        if !st.bg_error.recoverable() {
            return Err(Error::Background(old));
        }
        self.notify_event("on_error_recovery_begin", |l| l.on_error_recovery_begin(&old));
        let recovered = self.recover(&mut st);
        let new_error = match recovered {
            Ok(()) => {
                let burned = st.bg_error.clear();
                if burned > self.last_sequence.get() {
                    self.last_sequence.publish(burned);
                    st.versions.set_last_sequence(burned);
                }
                self.info_log.log(super::info_log::Level::Info, &format!("resumed after background error: {old}"));
                None
            }
            Err(e) => Some(Arc::new(e)),
        };
        let info = ErrorRecoveryInfo { old_error: Arc::clone(&old), new_error: new_error.clone() };
        self.notify_event("on_error_recovery_end", |l| l.on_error_recovery_end(&info));
        if let Some(e) = new_error {
            return Err(Error::Background(e));
        }
        self.delete_obsolete_files(&mut st);
        self.work_cv.notify_all();
        self.bg_cv.notify_all();
        Ok(())
    }

    /// Steps (a) to (d) of contract 3.
    fn recover(&self, st: &mut MutexGuard<'_, DbState>) -> Result<()> {
        // (a) and (b): as a close flushes unlogged writes, but always to a
        // new WAL.
        self.flush_all_memtables(st, true)?;
        // (c) Nothing of the closed WALs is needed now: every write in them
        // is in a table. They are not sealed (the one that failed refuses
        // every sync): every family's log number moves past them at once,
        // and then they are forgotten, and the new WAL takes its final name.
        let mut edits = super::flush::advanced_log_numbers(st, u64::MAX);
        // (d)
        if edits.is_empty() && st.versions.manifest_uncertain() {
            let log_number = Some(st.versions.family_log_number(0));
            edits.push(VersionEdit { column_family: 0, log_number, ..Default::default() });
        }
        if !edits.is_empty() {
            self.log_and_apply(st, edits)?;
        }
        self.wal_sealer.forget_below(st.versions.log_number());
        MutexGuard::unlocked(st, || self.seal_closed_wals())?;
        Ok(())
    }
}
