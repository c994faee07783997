//! Work a user asks for and waits on: a manual compaction of a key range
//! (RocksDB's `CompactRange`), run on the caller's thread through the same
//! job steps as automatic ones, and the wait for background work to settle
//! (`wait_for_compact`).

use std::time::Duration;

use parking_lot::MutexGuard;

use super::job_guard::JobGuard;
use super::jobs::Hold;
use super::{DbInner, DbState};
use crate::compaction::{picker, CompactionReason};
use crate::error::{Error, Result};
use crate::version::FileMetaData;

impl DbInner {
    /// Compacts column family `cf`'s files overlapping `[begin, end]`, on
    /// the caller's thread: a panic there is a job's panic too (the sticky
    /// error, returned).
    pub(crate) fn compact_range(&self, cf: u32, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.check_writable("compact_range")?;
        self.flush_family(cf, true)?;
        let mut st = self.state.lock();
        // With timestamps the bounds are keys without them (RocksDB's): the
        // range takes every version of both.
        let data = st.families.data(cf);
        let begin = match (&data, begin) {
            (Some(d), Some(b)) => Some(d.range_bound(b, true, true).into_owned()),
            (_, b) => b.map(<[u8]>::to_vec),
        };
        let end = match (&data, end) {
            (Some(d), Some(e)) => Some(d.range_bound(e, false, true).into_owned()),
            (_, e) => e.map(<[u8]>::to_vec),
        };
        drop(data);
        let (begin, end) = (begin.as_deref(), end.as_deref());
        self.catch_job(&mut st, "manual compaction", |st| {
            let mut st = JobGuard::new(self, st, Hold::ManualCompaction);
            self.compact_range_locked(&mut st, cf, begin, end)
        })?
    }

    fn compact_range_locked(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        cf: u32,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        // Wait for automatic compactions to finish, so inputs are free.
        while st.jobs.compactions_running() > 0 {
            self.bg_cv.wait(st);
        }
        st.bg_error.check()?;
        let dropped = || Error::invalid(format!("column family {cf} was dropped"));
        let data = st.families.data(cf).ok_or_else(dropped)?;
        let opts = self.family_opts(&data);
        let version = st.versions.version(cf).ok_or_else(dropped)?;
        if opts.compaction_style != crate::CompactionStyle::Level {
            let created = |f: &FileMetaData| self.creation_time(f, &data.cmp);
            let now = self.opts().clock.now_secs();
            let c = picker::manual_compaction_for_style(&version, &opts, st.jobs.being_compacted(), now, &created);
            return c.map_or(Ok(()), |c| self.run_compaction(st, cf, c).map(|_| ()));
        }
        let (deepest, num_levels) = (version.deepest_nonempty_level(), version.num_levels());
        // Versions held here would keep the files each compaction makes
        // obsolete until some later job's clean-up.
        drop(version);
        // With a compaction filter every file in the range is rewritten
        // through it: no trivial moves, and the deepest level compacted into
        // itself (RocksDB's `bottommost_level_compaction =
        // kIfHaveCompactionFilter`, its default). So with timestamps and a
        // full_history_ts_low, whose history below it compactions collect.
        let collects_history = data.cmp.timestamp_size() > 0 && data.full_history_ts_low() > 0;
        let filtered = opts.has_compaction_filter() || collects_history;
        let mut level = 0;
        while level < num_levels {
            st.bg_error.check()?;
            let v = st.versions.version(cf).ok_or_else(dropped)?;
            let last = deepest.max(1);
            if level >= last && level > 0 && !(filtered && level == deepest) {
                // Without a filter, rewriting the deepest level into itself
                // would not change it, so stop.
                break;
            }
            let output_level = match level {
                0 => v
                    .level_targets(&crate::version::StorageInfoOptions::from_options(&opts))
                    .base_level
                    .min(last)
                    .max(1),
                l if l == deepest => l,
                l => l + 1,
            };
            let picked = picker::range_compaction(
                &v,
                &opts,
                st.jobs.being_compacted(),
                (level, output_level),
                (begin, end),
                CompactionReason::Manual,
            );
            drop(v);
            if let Some(mut c) = picked {
                if filtered {
                    c.trivial_move = false;
                }
                self.run_compaction(st, cf, c)?;
            }
            if level == deepest && level > 0 {
                break;
            }
            level = if level == 0 { output_level } else { level + 1 };
        }
        Ok(())
    }

    pub(crate) fn wait_for_compact(&self) -> Result<()> {
        self.check_open()?;
        if self.read_only {
            // Nothing runs, and nothing ever will.
            return Ok(());
        }
        let mut st = self.state.lock();
        let mut purged = false;
        loop {
            st.bg_error.check()?;
            // A deferral is compaction put off, not compaction done: wait
            // for the tuner to end it (it ends when writes stop) and for
            // the catch-up that follows.
            let deferred = self.tuning.is_deferred() && !st.jobs.is_shutting_down();
            let needs = deferred
                || st.families.iter().any(|(id, f)| {
                    let opts = self.family_opts(f.data());
                    !opts.disable_auto_compactions && self.pick_compaction(&st, id, &opts).is_some()
                });
            let flushing = st.jobs.flushes_running() > 0 || st.families.most_immutable() > 0;
            if !flushing && st.jobs.compactions_running() == 0 && st.jobs.purges_running() == 0 && !needs {
                // A file a job made obsolete while something else held it
                // for a moment (a reader, another job's grandparents) waits
                // for the next job's look (db/files.rs);
                // the work done, look once more here, so the files the jobs
                // made obsolete are gone unless still held.
                if !purged && (st.files.pending() || st.versions.has_retired_manifests()) {
                    purged = true;
                    self.delete_obsolete_files(&mut st);
                    continue;
                }
                return Ok(());
            }
            if st.jobs.is_paused() {
                return Err(Error::invalid("background work is paused; wait_for_compact would never return"));
            }
            self.work_cv.notify_all();
            self.bg_cv.wait_for(&mut st, Duration::from_millis(100));
        }
    }
}
