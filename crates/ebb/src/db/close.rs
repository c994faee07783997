//! Closing the database: queued writes finish, the WAL is synced, writes
//! made without the WAL are flushed, background threads stop and are
//! joined, and what went wrong on the way is reported (`Db::close`, and
//! the drop of a `Db`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::DbInner;
use crate::error::{Error, Result};

/// Whether the database is closed: set once, by the close, never cleared.
#[derive(Default)]
pub(crate) struct ClosedFlag(AtomicBool);

impl ClosedFlag {
    fn set(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub(crate) fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

impl DbInner {
    /// Shuts the database down. Idempotent.
    pub(crate) fn close(&self) -> Result<()> {
        if self.closed.is_set() {
            return Ok(());
        }
        // Let queued writes finish: take the queue, then stop new ones.
        let q = self.queue.hold();
        let mut result = self.seal_closed_wals();
        if let Err(e) = self.wal.sync() {
            result = result.and(Err(e));
        }
        // Writes made without the WAL survive only in an SST. If a background
        // error stopped flushes, they are lost: close must say so (the
        // writes were acknowledged before the error).
        let needs_flush = {
            let st = self.state.lock();
            let unlogged = st.families.any_unlogged();
            if let (true, Some(e)) = (unlogged, st.bg_error.get()) {
                if result.is_ok() {
                    result = Err(Error::Background(Arc::clone(e)));
                }
            }
            unlogged && !st.bg_error.is_set()
        };
        if needs_flush && result.is_ok() {
            let mut st = self.state.lock();
            let flushed = self.catch_job(&mut st, "flush at close", |st| self.flush_all_memtables(st, false));
            if let Err(e) = flushed.and_then(|r| r.map_err(|e| self.set_bg_error_locked(&mut st, e))) {
                result = Err(e);
            }
        }
        self.closed.set();
        self.tuning.close();
        {
            let mut st = self.state.lock();
            st.jobs.shut_down();
            self.work_cv.notify_all();
            self.bg_cv.notify_all();
        }
        drop(q);
        let threads = self.threads.take_all();
        for t in threads {
            let name = t.thread().name().unwrap_or("unnamed").to_string();
            // Jobs run under `catch_unwind`; a thread dies only of a panic
            // outside one, and that is reported, not ignored.
            if let Err(payload) = t.join() {
                let message = format!("{name}: {}", crate::error::panic_message(payload.as_ref()));
                let e = Error::Panicked { job: "background thread", message };
                self.info_log.log(super::info_log::Level::Error, &format!("background error: {e}"));
                if result.is_ok() {
                    result = Err(e);
                }
            }
        }
        // A panic (caught, and made the sticky error) may have interrupted
        // work half done: unlike an I/O error that a write or flush already
        // reported, nothing else tells the caller, so close does not report
        // a clean shutdown.
        if result.is_ok() {
            let st = self.state.lock();
            if let Some(e) = st.bg_error.get().filter(|e| matches!(***e, Error::Panicked { .. })) {
                result = Err(Error::Background(Arc::clone(e)));
            }
        }
        self.wal.close();
        self.info_log.close();
        // Its memtables no longer count against a shared budget (every
        // background thread has stopped, so nothing reports after this).
        if let Some(wbm) = &self.write_buffer_manager {
            wbm.leave(self.instance);
        }
        result
    }
}
