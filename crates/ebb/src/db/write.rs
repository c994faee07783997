//! The write path: group commit, memtable switching and write stalls.
//!
//! Writers queue up; the one at the front is the leader. It makes room
//! (switching the memtable or stalling), merges the batches of compatible
//! followers into one WAL record (LevelDB `BuildBatchGroup`), appends and
//! optionally syncs it, inserts every entry into the memtable, publishes the
//! new last sequence, and wakes the followers with the shared result.
//!
//! Column families share the WAL: a memtable switch in one family starts a
//! new WAL for all, and the others keep their memtables. When the live WALs
//! outgrow `max_total_wal_size`, the families whose memtables hold data in
//! the oldest WAL are switched so they flush and let it go (RocksDB
//! `SwitchWAL`, flush reason `kWalFull`).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use super::column_family::ColumnFamilyData;
use super::StallCondition;
use super::{DbInner, DbState, ReadOptions, WriteBatch};
use crate::error::{Error, Result};
use crate::key::{SequenceNumber, ValueKind};
use crate::memtable::{MemTable, WARM_LANES};
use crate::options::ColumnFamilyOptions;

use crate::stats::{bump, StallCause};
use crate::version::filename;
use crate::wal::LogWriter;

/// Largest group a leader builds, in bytes (LevelDB's 1 MiB).
const MAX_GROUP_BYTES: usize = 1 << 20;
/// A small leader batch only gathers this much more, so its latency stays low.
const SMALL_BATCH: usize = 128 << 10;

pub(crate) struct WriterSlot {
    /// Taken by the leader (its own) or read in place (a follower's).
    batch: Mutex<Option<WriteBatch>>,
    has_batch: bool,
    batch_bytes: usize,
    sync: bool,
    disable_wal: bool,
    /// Switch this family's memtable even if it is not full (a flush request).
    force_switch: Option<u32>,
    done: Mutex<Option<Result<()>>>,
    pub(crate) cv: Condvar,
}

impl WriterSlot {
    /// A slot that writes nothing and is never grouped with others: its
    /// owner, once at the front of the queue, has writes stopped until it
    /// pops itself (`DbInner::with_writes_stopped`).
    pub(crate) fn barrier() -> Self {
        WriterSlot {
            batch: Mutex::new(None),
            has_batch: false,
            batch_bytes: 0,
            sync: false,
            disable_wal: false,
            force_switch: None,
            done: Mutex::new(None),
            cv: Condvar::new(),
        }
    }
}

/// The write queue while a writer leads it. Should the leader's thread
/// panic (in the WAL, a memtable insert, a switch), it unwinds through this
/// guard, which keeps the queue from waiting forever on a leader that is
/// gone: the group's writes may be half applied (in the WAL, not all in the
/// memtable, `last_sequence` not published), so the panic becomes the sticky
/// background error, and the leader leaves the queue, so that the writers
/// behind it fail with that error. A flag, not `catch_unwind`: the panic
/// goes on to the leader's caller, and a write pays nothing for this.
struct Leading<'g, 'a> {
    inner: &'g DbInner,
    q: &'g mut MutexGuard<'a, VecDeque<Arc<WriterSlot>>>,
    leader: &'g Arc<WriterSlot>,
    /// `lead` returned (the leader popped itself).
    returned: bool,
}

impl<'a> std::ops::Deref for Leading<'_, 'a> {
    type Target = MutexGuard<'a, VecDeque<Arc<WriterSlot>>>;
    fn deref(&self) -> &Self::Target {
        self.q
    }
}

impl std::ops::DerefMut for Leading<'_, '_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.q
    }
}

impl Drop for Leading<'_, '_> {
    fn drop(&mut self) {
        if self.returned {
            return;
        }
        // The queue lock is held (`MutexGuard::unlocked` took it back while
        // unwinding), the db lock is not: queue, then state, is the lock order.
        let message = "its leader's thread panicked (the panic goes on to the leader's caller)".to_string();
        self.inner.set_bg_error(Error::Panicked { job: "write group", message });
        if let Some(i) = self.q.iter().position(|w| Arc::ptr_eq(w, self.leader)) {
            self.q.remove(i);
        }
        if let Some(front) = self.q.front() {
            front.cv.notify_one();
        }
    }
}

impl DbInner {
    pub(crate) fn write(&self, batch: Option<WriteBatch>, wo: &WriteOptions, force_switch: Option<u32>) -> Result<()> {
        self.check_writable(if force_switch.is_some() { "a flush" } else { "a write" })?;
        if let Some(b) = &batch {
            if b.has_other_families() {
                let st = self.state.lock();
                let ids = b.column_families();
                if let Some(id) = ids.iter().find(|id| !st.families.contains_key(id)) {
                    return Err(Error::invalid(format!(
                        "the write batch writes to column family {id}, which does not exist (dropped?)"
                    )));
                }
                if b.needs_family_checks() {
                    self.check_family_rules(b, |cf| st.families.get(&cf).map(|f| Arc::clone(&f.data)))?;
                }
            } else if b.needs_family_checks() {
                // The default family's: no db mutex on the write path.
                self.check_family_rules(b, |_| Some(Arc::clone(&self.default_cf)))?;
            }
            bump(&self.stats.user_writes, 1);
        }
        let batch_bytes = batch.as_ref().map_or(0, |b| b.size_in_bytes());
        let slot = Arc::new(WriterSlot {
            has_batch: batch.is_some(),
            batch_bytes,
            batch: Mutex::new(batch),
            sync: wo.sync,
            disable_wal: wo.disable_wal,
            force_switch,
            done: Mutex::new(None),
            cv: Condvar::new(),
        });
        let start = self.stats.start_timer();
        let record = |r: Result<()>| {
            self.stats.time_since(|h| &h.write_micros, start);
            r
        };
        let mut q = self.queue.lock();
        q.push_back(Arc::clone(&slot));
        loop {
            if let Some(r) = slot.done.lock().take() {
                return record(r);
            }
            if q.front().is_some_and(|f| Arc::ptr_eq(f, &slot)) {
                break;
            }
            slot.cv.wait(&mut q);
        }
        // We lead.
        let mut leading = Leading { inner: self, q: &mut q, leader: &slot, returned: false };
        let result = self.lead(&mut leading, &slot);
        leading.returned = true;
        drop(leading);
        // `lead` popped the group and answered the followers; wake the next leader.
        if let Some(front) = q.front() {
            front.cv.notify_one();
        }
        drop(q);
        record(result)
    }

    fn lead(&self, q: &mut MutexGuard<'_, VecDeque<Arc<WriterSlot>>>, leader: &Arc<WriterSlot>) -> Result<()> {
        let leader_bytes = leader.batch_bytes;
        let mems = match self.make_room_for_write(leader.force_switch, leader_bytes) {
            Ok(m) => m,
            Err(e) => {
                q.pop_front();
                return Err(e);
            }
        };
        // Build the group from the leader and compatible followers.
        let mut group = 1;
        let mut merged: Option<WriteBatch> = leader.batch.lock().take();
        let mut sync = leader.sync;
        if let Some(m) = merged.as_mut() {
            let limit = if leader_bytes <= SMALL_BATCH { leader_bytes + SMALL_BATCH } else { MAX_GROUP_BYTES };
            let mut bytes = leader_bytes;
            for w in q.iter().skip(1) {
                if !w.has_batch
                    || w.force_switch.is_some()
                    || w.disable_wal != leader.disable_wal
                    || (w.sync && !leader.sync)
                {
                    break;
                }
                if bytes + w.batch_bytes > limit {
                    break;
                }
                bytes += w.batch_bytes;
                if let Some(b) = w.batch.lock().as_ref() {
                    m.append(b);
                }
                sync |= w.sync;
                group += 1;
            }
        }
        let result = match merged {
            None => Ok(()),
            Some(mut batch) if !batch.is_empty() => {
                // Release the queue while doing I/O so followers can enqueue.

                MutexGuard::unlocked(q, || self.commit_group(&mut batch, &mems, sync, leader.disable_wal))
            }
            Some(_) => Ok(()),
        };
        for _ in 1..group {
            if let Some(w) = q.get(1).cloned() {
                q.remove(1);
                *w.done.lock() = Some(match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(e.duplicate()),
                });
                w.cv.notify_one();
            }
        }
        q.pop_front();
        result
    }

    /// Appends the group to the WAL and the memtables (`mems`: every
    /// family's, by id, when the leader made room). Runs without the queue
    /// lock. Entries of a family dropped since the batch was checked are not
    /// inserted anywhere (recovery skips them too).
    fn commit_group(
        &self,
        batch: &mut WriteBatch,
        mems: &[(u32, Arc<MemTable>)],
        sync: bool,
        disable_wal: bool,
    ) -> Result<()> {
        self.tuning.on_client_write();
        let first = self.last_sequence.load(Ordering::Acquire) + 1;
        let count = batch.len() as u64;
        batch.set_sequence(first);
        // A family created after the leader made room is looked up now; its
        // memtable cannot have been switched since (only a leader switches).
        let mut mems = mems.to_vec();
        if batch.has_other_families() {
            for cf in batch.column_families() {
                if !mems.iter().any(|(id, _)| *id == cf) {
                    if let Some(f) = self.state.lock().families.get(&cf) {
                        mems.push((cf, Arc::clone(&f.mem)));
                    }
                }
            }
        }
        let mem_of = |cf: u32| mems.iter().find(|(id, _)| *id == cf).map(|(_, m)| m);
        if disable_wal {
            for cf in batch.column_families() {
                if let Some(m) = mem_of(cf) {
                    m.mark_unlogged();
                }
            }
        } else {
            let manual = self.opts().manual_wal_flush;
            // A write acknowledged as synced follows only sealed WALs, and
            // the current WAL's name is durable (db/wal_seal.rs, contract 3).
            if sync {
                self.seal_closed_wals().map_err(|e| self.set_bg_error(e))?;
            }
            let mut wal = self.wal.lock();
            let w = wal.as_mut().ok_or(Error::Closed)?;
            let r = (|| {
                w.add_record(batch.data())?;
                if sync {
                    w.sync()?;
                    bump(&self.stats.wal_syncs, 1);
                } else if !manual {
                    w.flush()?;
                }
                Ok(())
            })();
            if let Err(e) = r {
                return Err(self.set_bg_error(e));
            }
            bump(&self.stats.wal_bytes, batch.size_in_bytes() as u64);
            self.tuning.on_wal_write(batch.size_in_bytes() as u64);
            bump(&self.stats.wal_writes, 1);
        }
        // The families whose merges may be written as values
        // (`max_successive_merges`), looked up once for the group.
        let merging = if batch.needs_family_checks() { self.successive_merge_families(batch) } else { Vec::new() };
        let mut user_bytes = 0u64;
        let mut insert = |seq: SequenceNumber, cf: u32, kind: ValueKind, key: &[u8], value: &[u8]| -> Result<()> {
            let Some(mem) = mem_of(cf) else { return Ok(()) };
            user_bytes += (key.len() + value.len()) as u64;
            if kind == ValueKind::Merge {
                if let Some((_, data)) = merging.iter().find(|(id, _)| *id == cf) {
                    if let Some(merged) = self.merge_in_place(data, mem, key, value, seq) {
                        mem.add(seq, ValueKind::Value, key, &merged);
                        return Ok(());
                    }
                }
            }
            mem.add(seq, kind, key, value);
            Ok(())
        };
        // Past the WAL append, a failed insert would leave the memtable
        // holding part of a logged group whose sequence numbers the next
        // group would reuse: writes stop instead, with the error (RocksDB's
        // `MemTableInsertStatusCheck`). Batches are validated before they
        // are logged, and a merge that cannot be made in place is stored as
        // its operand, so this takes a broken invariant.
        let inserted = (|| -> Result<()> {
            let mut ops = (first..).zip(batch.iter_cf());
            if count <= 1 {
                for (seq, op) in ops {
                    let (cf, op) = op.map_err(Error::invalid)?;
                    let (kind, key, value) = op.entry();
                    insert(seq, cf, kind, key, value)?;
                }
            } else {
                // Entries go in by runs of up to `WARM_LANES`; a run's descents
                // of each memtable are warmed together first (`MemTable::warm`),
                // so a batch's inserts do not wait out their cache misses one by
                // one.
                let mut run = Vec::with_capacity(WARM_LANES);
                let mut warm = Vec::with_capacity(WARM_LANES);
                let mut families = Vec::new();
                loop {
                    run.clear();
                    let mut failed = None;
                    for (seq, op) in ops.by_ref().take(WARM_LANES) {
                        match op {
                            Ok((cf, op)) => {
                                let (kind, key, value) = op.entry();
                                run.push((seq, cf, kind, key, value));
                            }
                            Err(e) => {
                                failed = Some(Error::invalid(e));
                                break;
                            }
                        }
                    }
                    // Each family's entries of the run together (most batches
                    // have one family).
                    families.clear();
                    for e in &run {
                        if !families.contains(&e.1) {
                            families.push(e.1);
                        }
                    }
                    for &cf in &families {
                        if let Some(mem) = mem_of(cf) {
                            warm.clear();
                            warm.extend(
                                run.iter().filter(|e| e.1 == cf).map(|&(seq, _, kind, key, _)| (seq, kind, key)),
                            );
                            mem.warm(&warm);
                        }
                    }
                    for &(seq, cf, kind, key, value) in &run {
                        insert(seq, cf, kind, key, value)?;
                    }
                    if let Some(e) = failed {
                        return Err(e);
                    }
                    if run.len() < WARM_LANES {
                        break;
                    }
                }
            }
            Ok(())
        })();
        inserted.map_err(|e| self.set_bg_error(e))?;
        self.last_sequence.store(first + count - 1, Ordering::Release);
        bump(&self.stats.user_keys, count);
        bump(&self.stats.user_bytes, user_bytes);
        bump(&self.stats.write_groups, 1);
        Ok(())
    }

    /// With `max_successive_merges` reached by `key`'s operands on top of
    /// memtable `mem`, the value the merge at `seq` makes (everything
    /// before it read, the operand applied), to be written instead of the
    /// operand (RocksDB's `MemTableInserter::MergeCF`); `None` otherwise.
    /// The WAL keeps the operand: replaying it gives the same value. A read
    /// that fails, or a merge the operator refuses, is `None` too: the
    /// operand is stored as it came, and reads merge it (or report the
    /// failure) as for any operand (RocksDB stores the delta then).
    fn merge_in_place(
        &self,
        data: &ColumnFamilyData,
        mem: &Arc<MemTable>,
        key: &[u8],
        operand: &[u8],
        seq: SequenceNumber,
    ) -> Option<Vec<u8>> {
        let opts = data.options.load();
        let (limit, Some(op)) = (opts.max_successive_merges, opts.merge_operator.clone()) else { return None };
        if limit == 0 || mem.successive_merges(key) < limit {
            return None;
        }
        let sv = data.super_version_guard();
        if !Arc::ptr_eq(&sv.mem, mem) {
            return None;
        }
        let ro = ReadOptions::default();
        let before = crate::key::with_internal_key(key, seq - 1, crate::key::KIND_FOR_SEEK, |lookup| {
            self.get_with_lookup::<Vec<u8>>(data, &sv, key, lookup, &ro)
        })
        .ok()?;
        crate::merge_operator::full_merge(op.as_ref(), key, before.as_deref(), &[operand], "write").ok()
    }

    /// The families `batch` merges into that set `max_successive_merges`
    /// (with an operator), by id; the db mutex only for families other than
    /// the default.
    fn successive_merge_families(&self, batch: &WriteBatch) -> Vec<(u32, Arc<ColumnFamilyData>)> {
        let wanted = |data: &ColumnFamilyData| {
            let o = data.options.load();
            o.max_successive_merges > 0 && o.merge_operator.is_some()
        };
        if !batch.has_other_families() {
            return if wanted(&self.default_cf) { vec![(0, Arc::clone(&self.default_cf))] } else { Vec::new() };
        }
        let st = self.state.lock();
        batch
            .column_families()
            .into_iter()
            .filter_map(|cf| st.families.get(&cf).map(|f| (cf, Arc::clone(&f.data))))
            .filter(|(_, data)| wanted(data))
            .collect()
    }

    /// Refuses a batch with a merge into a family without a merge operator,
    /// or a range deletion whose begin comes after its end in its family's
    /// order (RocksDB refuses both), before anything is written; `family`
    /// finds a family's data by id.
    fn check_family_rules(&self, b: &WriteBatch, family: impl Fn(u32) -> Option<Arc<ColumnFamilyData>>) -> Result<()> {
        for op in b.iter_cf() {
            match op.map_err(Error::invalid)? {
                (cf, super::BatchOp::Merge { key, .. }) => {
                    let Some(f) = family(cf) else { continue };
                    if f.options.load().merge_operator.is_none() {
                        return Err(Error::invalid(format!(
                            "merge of key {:?} into column family {:?}, which has no merge operator \
                             (set ColumnFamilyOptions::merge_operator)",
                            String::from_utf8_lossy(key),
                            f.name
                        )));
                    }
                }
                (cf, super::BatchOp::DeleteRange { begin, end }) => {
                    let Some(f) = family(cf) else { continue };
                    if f.cmp.lt(end, begin) {
                        return Err(Error::invalid(format!(
                            "delete_range: the begin key {:?} comes after the end key {:?} in the order of \
                             column family {:?} ({})",
                            String::from_utf8_lossy(begin),
                            String::from_utf8_lossy(end),
                            f.name,
                            f.cmp.name()
                        )));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Records `e` as the sticky background error and returns it wrapped.
    pub(crate) fn set_bg_error(&self, e: Error) -> Error {
        if matches!(e, Error::Cancelled | Error::Closed) {
            return e;
        }
        let mut st = self.state.lock();
        self.set_bg_error_locked(&mut st, e)
    }

    /// Returns every family's memtable to write into, after switching full
    /// ones (and `force`'s) and waiting out stalls (RocksDB's
    /// `WriteController` conditions, see docs/compaction.md "Write stalls").
    fn make_room_for_write(&self, force: Option<u32>, batch_bytes: usize) -> Result<Vec<(u32, Arc<MemTable>)>> {
        let mut st = self.state.lock();
        let mut delayed_once = false;
        loop {
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(Arc::clone(e)));
            }
            if st.shutting_down {
                return Err(Error::Closed);
            }
            let condition = self.cached_stall_condition(&mut st);
            if let (None, false, StallCondition::Delayed(cause)) = (force, delayed_once, condition) {
                delayed_once = true;
                if let Some(wait) = st.controller.delay(batch_bytes as u64, Instant::now()) {
                    let start = Instant::now();
                    let deadline = start + wait;
                    // Waited out on the background condition variable, not
                    // slept at once: the delay ends early when the condition
                    // that set it is gone (a flush or compaction installed,
                    // options changed), or an error or a close comes, as
                    // RocksDB's `DelayWrite` checks every millisecond. At
                    // the controller's lowest rate one large batch was a
                    // sleep of minutes, every writer queued behind it.
                    while Instant::now() < deadline && st.bg_error.is_none() && !st.shutting_down {
                        self.bg_cv.wait_until(&mut st, deadline);
                        if !matches!(self.cached_stall_condition(&mut st), StallCondition::Delayed(_)) {
                            break;
                        }
                    }
                    self.stats.record_stall(cause, start.elapsed().as_micros() as u64);
                    continue;
                }
            }
            let mut switch: Vec<u32> = Vec::new();
            for (id, family) in &st.families {
                let full = family.mem.approximate_memory_usage() >= self.family_opts(&family.data).write_buffer_size;
                let forced = force == Some(*id) && !family.mem.is_empty();
                if full || forced {
                    switch.push(*id);
                }
            }
            let wal_full = if switch.is_empty() { self.families_pinning_oldest_wal(&mut st) } else { None };
            if let Some((_, ids)) = &wal_full {
                switch.extend(ids);
            }
            if switch.is_empty() {
                return Ok(st.families.iter().map(|(id, f)| (*id, Arc::clone(&f.mem))).collect());
            }
            if let StallCondition::Stopped(cause) = condition {
                let start = Instant::now();
                self.work_cv.notify_all();
                self.bg_cv.wait_for(&mut st, Duration::from_millis(100));
                self.stats.record_stall(cause, start.elapsed().as_micros() as u64);
                continue;
            }
            let at_limit = switch.iter().any(|id| {
                st.families
                    .get(id)
                    .is_some_and(|f| f.imm.len() + 1 >= self.family_opts(&f.data).max_write_buffer_number)
            });
            if at_limit {
                // Switching now would exceed the memtable limit: wait for a flush.
                let start = Instant::now();
                self.set_stall_condition(&mut st, StallCondition::Stopped(StallCause::MemtableLimit));
                self.work_cv.notify_all();
                self.bg_cv.wait_for(&mut st, Duration::from_millis(100));
                self.stats.record_stall(StallCause::MemtableLimit, start.elapsed().as_micros() as u64);
                continue;
            }
            self.switch_memtables(&mut st, &switch)?;
            if let Some((oldest, _)) = wal_full {
                st.wal_full_flushed = oldest;
                bump(&self.stats.wal_full_flushes, 1);
            }
            return Ok(st.families.iter().map(|(id, f)| (*id, Arc::clone(&f.mem))).collect());
        }
    }

    /// When the live WALs exceed `max_total_wal_size`: the oldest live WAL
    /// and the families whose mutable memtable holds data in it; switching
    /// them lets that WAL go once they are flushed (RocksDB `SwitchWAL`).
    /// Done once per oldest WAL (`wal_full_flushed`, set once the switch is
    /// made), and only with more than one family, as RocksDB (one family's
    /// WALs are bounded by its memtables anyway).
    fn families_pinning_oldest_wal(&self, st: &mut DbState) -> Option<(u64, Vec<u32>)> {
        let &(oldest, _) = st.old_wals.front()?;
        if st.families.len() < 2 || st.wal_full_flushed >= oldest {
            return None;
        }
        if self.total_wal_size(st) <= self.max_total_wal_size(st) {
            return None;
        }
        let pinning: Vec<u32> = st
            .families
            .iter()
            .filter(|(_, f)| !f.mem.is_empty() && f.mem.log_number() <= oldest)
            .map(|(id, _)| *id)
            .collect();
        if pinning.is_empty() {
            // Only immutable memtables hold it: their flushes will free it.
            st.wal_full_flushed = oldest;
            return None;
        }
        Some((oldest, pinning))
    }

    /// The stall condition the current state calls for (RocksDB
    /// `GetWriteStallConditionAndCause`), the worst over the column families.
    /// L0 and pending-bytes conditions apply only while automatic compaction
    /// is on.
    pub(crate) fn stall_condition(&self, st: &DbState) -> StallCondition {
        let severity = |c: &StallCondition| match c {
            StallCondition::Normal => 0,
            StallCondition::Delayed(_) => 1,
            StallCondition::Stopped(_) => 2,
        };
        let mut worst = StallCondition::Normal;
        for (id, family) in &st.families {
            let o = self.family_opts(&family.data);
            let c = family_stall_condition(&st.versions.version(*id).unwrap_or_default(), &o);
            if severity(&c) > severity(&worst) {
                worst = c;
            }
        }
        worst
    }

    /// The stall condition in force. It depends only on the versions, the
    /// immutable memtables and the options, so it is recomputed (and
    /// recorded) after any of them changes (`stall_cache` is cleared then),
    /// not on every write.
    fn cached_stall_condition(&self, st: &mut MutexGuard<'_, DbState>) -> StallCondition {
        if let Some(c) = st.stall_cache {
            return c;
        }
        let c = self.stall_condition(st);
        self.set_stall_condition(st, c);
        st.stall_cache = Some(c);
        c
    }

    /// Records a new stall condition, adapts the delayed write rate, and tells listeners.
    pub(crate) fn set_stall_condition(&self, st: &mut MutexGuard<'_, DbState>, condition: StallCondition) {
        let opts = self.opts();
        // The debt the rate adapts to is the largest over the families,
        // each counted by its own compaction style and options.
        let mut debt = StallDebt::default();
        for (id, family) in &st.families {
            let o = self.family_opts(&family.data);
            if o.disable_auto_compactions {
                continue;
            }
            let version = st.versions.version(*id).unwrap_or_default();
            let shape = crate::version::StorageInfoOptions::from_options(&o);
            let pending = version.estimate_pending_compaction_bytes(&shape);
            debt.pending = debt.pending.max(pending);
            let l0 = version.l0_delay_trigger_count(&shape) as i32;
            let (_, stop) = o.effective_l0_stall_triggers();
            let (soft, hard) = (o.soft_pending_compaction_bytes_limit, o.hard_pending_compaction_bytes_limit);
            debt.near_stop |= match condition {
                StallCondition::Delayed(StallCause::L0Slowdown) => l0 >= stop - 2,
                StallCondition::Delayed(StallCause::PendingCompactionSlowdown) => {
                    hard > soft && pending > soft && pending - soft > 3 * ((hard - soft) / 4)
                }
                _ => false,
            };
        }
        let previous = st.controller.condition;
        st.controller.update(condition, debt, &opts);
        // As RocksDB's LOG: each recomputation while delayed, each new stop.
        match condition {
            StallCondition::Delayed(cause) => self.info_log.log(
                super::info_log::Level::Warn,
                &format!(
                    "Stalling writes because of {}: estimated pending compaction bytes {}, rate {}",
                    cause.name(),
                    debt.pending,
                    st.controller.rate()
                ),
            ),
            StallCondition::Stopped(cause) if previous != condition => self.info_log.log(
                super::info_log::Level::Warn,
                &format!(
                    "Stopping writes because of {}: estimated pending compaction bytes {}",
                    cause.name(),
                    debt.pending
                ),
            ),
            _ => {}
        }
        if previous != condition && !opts.listeners.is_empty() {
            MutexGuard::unlocked(st, || {
                self.notify_event("on_stall_conditions_changed", |l| l.on_stall_conditions_changed(previous, condition))
            });
        }
    }

    /// Makes the mutable memtables of the families `ids` immutable and starts
    /// new ones with a new WAL. Every other family's empty memtable is
    /// renumbered to the new WAL, so an idle family pins no old WAL. Requires
    /// the db mutex (and the queue, held by the caller).
    pub(crate) fn switch_memtables(&self, st: &mut DbState, ids: &[u32]) -> Result<()> {
        let number = st.versions.new_file_number();
        // Neither the old WAL nor the directory is synced here: the new WAL
        // starts under its pending name and the old one is sealed later, by
        // whoever first needs it synced (db/wal_seal.rs).
        let path = filename::pending_wal_file(&self.dir, number);
        let mut wal = self.wal.lock();
        let file = match self.fs.new_writable(&path) {
            Ok(f) => f,
            Err(e) => {
                drop(wal);
                return Err(self.set_bg_error_locked(st, e));
            }
        };
        let file = crate::fs::WriteBehindFile::wrap(file, self.opts().wal_bytes_per_sync);
        let new = LogWriter::new(file, path.display().to_string());
        let old_size = wal.as_ref().map_or(0, |w| w.file_size());
        if let Some(mut old) = wal.replace(new) {
            // The end mark tells recovery this WAL is whole; what
            // `manual_wal_flush` buffered goes to the OS with it, as RocksDB
            // flushes at a switch: the old writer is written no more.
            if let Err(e) = old.add_record(&super::batch::END_OF_LOG).and_then(|()| old.flush()) {
                drop(wal);
                return Err(self.set_bg_error_locked(st, e));
            }
            self.wal_sealer.push(st.wal_number, old, number);
        }
        drop(wal);
        let old_number = std::mem::replace(&mut st.wal_number, number);
        st.old_wals.push_back((old_number, old_size));
        for (id, family) in st.families.iter_mut() {
            if ids.contains(id) {
                let old =
                    std::mem::replace(&mut family.mem, Arc::new(new_memtable(&family.data.options.load(), number)));
                family.imm.push(old);
            } else if family.mem.is_empty() {
                family.mem = Arc::new(new_memtable(&family.data.options.load(), number));
            }
        }
        self.install_super_version(st);
        self.work_cv.notify_all();
        Ok(())
    }

    pub(crate) fn set_bg_error_locked(&self, st: &mut DbState, e: Error) -> Error {
        if matches!(e, Error::Cancelled | Error::Closed) {
            return e;
        }
        let first = st.bg_error.is_none();
        let arc = st.bg_error.get_or_insert_with(|| Arc::new(e)).clone();
        self.bg_cv.notify_all();
        if first {
            // With the db mutex held: `notify_event` isolates a listener that panics.
            self.notify_event("on_background_error", |l| l.on_background_error(&arc));
        }
        Error::Background(arc)
    }

    /// Switches column family `cf`'s memtable and flushes it; with `wait`,
    /// returns once every memtable of the family that held data is in an SST.
    pub(crate) fn flush_family(&self, cf: u32, wait: bool) -> Result<()> {
        // The memtables that hold data now: the immutable ones, and the
        // mutable one the write below switches.
        let held = if wait { memtables_holding_data(&self.state.lock(), &[cf], true) } else { Vec::new() };
        self.write(None, &WriteOptions::default(), Some(cf))?;
        if wait {
            self.wait_for_memtables_flushed(&mut self.state.lock(), &held)?;
        }
        Ok(())
    }

    /// Waits until every immutable memtable the families `ids` hold now is
    /// flushed (a sticky error or a close ends the wait).
    pub(crate) fn wait_for_flushes(&self, st: &mut MutexGuard<'_, DbState>, ids: &[u32]) -> Result<()> {
        let held = memtables_holding_data(st, ids, false);
        self.wait_for_memtables_flushed(st, &held)
    }

    /// Waits until each of `held` (a family id and one of its memtables) is
    /// flushed, its listeners told, or its family dropped; a sticky error
    /// or a close ends the wait. Only these: writes that go on meanwhile
    /// fill new memtables, and a wait for none left would last as long as
    /// they do (RocksDB's `FlushMemTable` waits for the memtables up to the
    /// one it switched, likewise).
    fn wait_for_memtables_flushed(
        &self,
        st: &mut MutexGuard<'_, DbState>,
        held: &[(u32, Arc<MemTable>)],
    ) -> Result<()> {
        loop {
            if let Some(e) = &st.bg_error {
                return Err(Error::Background(Arc::clone(e)));
            }
            if held.iter().all(|(id, m)| m.flush_done() || !st.families.contains_key(id)) {
                return Ok(());
            }
            if st.shutting_down {
                return Err(Error::Closed);
            }
            self.work_cv.notify_all();
            self.bg_cv.wait(st);
        }
    }

    pub(crate) fn flush_wal(&self, sync: bool) -> Result<()> {
        self.check_writable("flush_wal")?;
        // Every write made before the call is durable on return, also those
        // in a WAL a switch closed meanwhile: seal until, with the WAL
        // locked (switches are then excluded), no closed WAL is owed.
        let mut wal = loop {
            if sync {
                self.seal_closed_wals().map_err(|e| self.set_bg_error(e))?;
            }
            let wal = self.wal.lock();
            if !sync || self.wal_sealer.all_sealed() {
                break wal;
            }
        };
        let Some(w) = wal.as_mut() else { return Err(Error::Closed) };
        let r = if sync { w.sync() } else { w.flush() };
        drop(wal);
        if sync && r.is_ok() {
            bump(&self.stats.wal_syncs, 1);
        }
        r.map_err(|e| self.set_bg_error(e))
    }
}

/// The memtables of the families `ids` that hold data: the immutable ones,
/// and with `mutable` the mutable one when it is not empty.
fn memtables_holding_data(st: &DbState, ids: &[u32], mutable: bool) -> Vec<(u32, Arc<MemTable>)> {
    let mut out = Vec::new();
    for id in ids {
        if let Some(f) = st.families.get(id) {
            out.extend(f.imm.iter().map(|m| (*id, Arc::clone(m))));
            if mutable && !f.mem.is_empty() {
                out.push((*id, Arc::clone(&f.mem)));
            }
        }
    }
    out
}

/// A new memtable for a family with options `opts`, writing to WAL `log`:
/// with a prefix bloom filter when the options ask for one, and a hash
/// index of user keys for point lookups (`memtable::skiplist` contract 5)
/// of one 8-byte slot per `MEMTABLE_INDEX_BYTES_PER_SLOT` bytes of the
/// write buffer.
pub(crate) fn new_memtable(opts: &ColumnFamilyOptions, log: u64) -> MemTable {
    let bytes = (opts.write_buffer_size as f64 * opts.memtable_prefix_bloom_size_ratio) as usize;
    let bloom = opts.prefix_extractor.clone().filter(|_| bytes > 0).map(|x| (x, bytes));
    let slots = opts.write_buffer_size / MEMTABLE_INDEX_BYTES_PER_SLOT;
    let hints = opts.prefix_extractor.clone().map(|x| (x, opts.write_buffer_size / MEMTABLE_HINT_BYTES_PER_SLOT));
    MemTable::with_filters(log, opts.user_comparator(), bloom, slots, hints)
}

/// Write-buffer bytes per prefix hint of a memtable (`memtable::skiplist`
/// contract 7), and per entry of its prefix firsts (contract 8), when the
/// family has a prefix extractor: 8 bytes each per 512 (3.1 % beside
/// `write_buffer_size`, reported in `ebb.cur-size-all-mem-tables`; pages
/// of slots never used are never touched). A 64 MiB memtable of 150-byte
/// entries holds about 450,000 keys in 131,072 slots: prefixes of about
/// four keys or more each find their own hint mostly.
const MEMTABLE_HINT_BYTES_PER_SLOT: usize = 512;

/// Write-buffer bytes per slot of a memtable's key index: 8 bytes of index
/// per 96 of buffer (8.3 % beside `write_buffer_size`, reported in
/// `ebb.cur-size-all-mem-tables`), in a second tier made once the first
/// (32 KiB) fills. The index holds keys up to three quarters of its slots,
/// so it saturates only when entries average under 128 bytes (header,
/// tower, key and value).
const MEMTABLE_INDEX_BYTES_PER_SLOT: usize = 96;

/// The stall condition one family's version and options call for.
fn family_stall_condition(version: &crate::version::Version, opts: &ColumnFamilyOptions) -> StallCondition {
    // L0 files under leveled compaction, sorted runs under universal, none
    // under FIFO (`l0_delay_trigger_count`).
    let shape = crate::version::StorageInfoOptions::from_options(opts);
    let l0 = version.l0_delay_trigger_count(&shape) as i32;
    let compaction_on = !opts.disable_auto_compactions;
    let pending = if compaction_on
        && (opts.soft_pending_compaction_bytes_limit > 0 || opts.hard_pending_compaction_bytes_limit > 0)
    {
        version.estimate_pending_compaction_bytes(&shape)
    } else {
        0
    };
    // Adjusted as RocksDB adjusts them (`Options::effective_l0_stall_triggers`).
    let (slowdown, stop) = opts.effective_l0_stall_triggers();
    if compaction_on && l0 >= stop {
        StallCondition::Stopped(StallCause::L0Stop)
    } else if compaction_on
        && opts.hard_pending_compaction_bytes_limit > 0
        && pending >= opts.hard_pending_compaction_bytes_limit
    {
        StallCondition::Stopped(StallCause::PendingCompactionStop)
    } else if compaction_on && l0 >= slowdown {
        StallCondition::Delayed(StallCause::L0Slowdown)
    } else if compaction_on
        && opts.soft_pending_compaction_bytes_limit > 0
        && pending >= opts.soft_pending_compaction_bytes_limit
    {
        StallCondition::Delayed(StallCause::PendingCompactionSlowdown)
    } else {
        StallCondition::Normal
    }
}

/// Smallest delayed write rate the controller adapts down to (RocksDB's floor).
const MIN_DELAYED_WRITE_RATE: u64 = 16 * 1024;

/// RocksDB's `SetupDelay` ratios: the rate falls by this while the debt does
/// not shrink, and rises by its inverse while it does.
const INC_SLOWDOWN_RATIO: f64 = 0.8;
/// Near a stop: the rate falls by this.
const NEAR_STOP_SLOWDOWN_RATIO: f64 = 0.6;
/// Leaving a delay for no stall: the rate kept for the next delay rises by this.
const DELAY_RECOVER_SLOWDOWN_RATIO: f64 = 1.4;

/// Delays writes while the tree is behind (RocksDB `WriteController` with
/// `ColumnFamilyData::RecalculateWriteStallConditions` and `SetupDelay`):
/// writes are paced to the delayed write rate by a virtual clock. The rate
/// is kept between delays and adapted each time the condition is recomputed
/// (after each flush, compaction and memtable switch) from the pending
/// compaction bytes, whatever caused the delay: down by 0.8 while they do
/// not shrink, up by 1.25 while they do, down by 0.6 near a stop (L0 within
/// two files of its stop trigger, or pending bytes in the last quarter
/// between the soft and hard limits); up by 1.4 when a delay ends. A delay
/// starts at the rate the previous one left. Between 16 KiB/s and
/// `delayed_write_rate`.
#[derive(Debug)]
pub(crate) struct WriteController {
    pub(crate) condition: StallCondition,
    /// The delayed write rate, kept between delays; 0 until the first one.
    delayed_rate: u64,
    /// Pending compaction bytes at the previous recomputation.
    prev_pending: u64,
    next_write: Option<Instant>,
}

impl Default for WriteController {
    fn default() -> Self {
        WriteController { condition: StallCondition::Normal, delayed_rate: 0, prev_pending: 0, next_write: None }
    }
}

/// The debt a stall condition is judged on, the largest over the families.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StallDebt {
    /// Pending compaction bytes.
    pub(crate) pending: u64,
    /// L0 within two files of its stop trigger, or pending bytes past three
    /// quarters of the way from the soft to the hard limit.
    pub(crate) near_stop: bool,
}

impl WriteController {
    /// The current delayed write rate, bytes/s (0 when not delaying).
    pub(crate) fn rate(&self) -> u64 {
        if matches!(self.condition, StallCondition::Delayed(_)) {
            self.delayed_rate
        } else {
            0
        }
    }

    fn update(&mut self, condition: StallCondition, debt: StallDebt, opts: &crate::Options) {
        let max = opts.delayed_write_rate;
        if self.delayed_rate == 0 {
            self.delayed_rate = max;
        }
        let was_delayed = matches!(self.condition, StallCondition::Delayed(_));
        let scale = |rate: u64, by: f64| ((rate as f64 * by) as u64).clamp(MIN_DELAYED_WRITE_RATE.min(max), max);
        match condition {
            StallCondition::Delayed(_) => {
                if opts.disable_auto_compactions {
                    self.delayed_rate = max;
                } else if was_delayed && max > MIN_DELAYED_WRITE_RATE {
                    // A delay entered now keeps the rate the last one left.
                    if debt.near_stop {
                        self.delayed_rate = scale(self.delayed_rate, NEAR_STOP_SLOWDOWN_RATIO);
                    } else if self.prev_pending > 0 && self.prev_pending <= debt.pending {
                        self.delayed_rate = scale(self.delayed_rate, INC_SLOWDOWN_RATIO);
                    } else if self.prev_pending > debt.pending {
                        self.delayed_rate = scale(self.delayed_rate, 1.0 / INC_SLOWDOWN_RATIO);
                    }
                }
                self.delayed_rate = self.delayed_rate.min(max);
            }
            StallCondition::Normal if was_delayed => {
                self.delayed_rate = scale(self.delayed_rate, DELAY_RECOVER_SLOWDOWN_RATIO);
            }
            _ => {}
        }
        if !matches!(condition, StallCondition::Delayed(_)) {
            self.next_write = None;
        }
        self.prev_pending = debt.pending;
        self.condition = condition;
    }

    /// Charges `bytes` to the virtual clock; returns how long to sleep when
    /// the clock runs more than a millisecond ahead of `now`.
    fn delay(&mut self, bytes: u64, now: Instant) -> Option<Duration> {
        let rate = self.rate();
        if rate == 0 {
            return None;
        }
        let cost = Duration::from_nanos(bytes.max(1).saturating_mul(1_000_000_000) / rate);
        let start = match self.next_write {
            Some(t) if t > now => t,
            _ => now,
        };
        let next = start + cost;
        self.next_write = Some(next);
        let ahead = next.saturating_duration_since(now);
        (ahead > Duration::from_millis(1)).then_some(ahead)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delayed(c: &mut WriteController, cause: StallCause, pending: u64, near_stop: bool, opts: &crate::Options) {
        c.update(StallCondition::Delayed(cause), StallDebt { pending, near_stop }, opts);
    }

    #[test]
    fn controller_paces_to_its_rate_and_adapts() {
        let mut opts = crate::Options::default();
        opts.delayed_write_rate = 1_000_000;
        let mut c = WriteController::default();
        let l0 = StallCause::L0Slowdown;
        delayed(&mut c, l0, 1000, false, &opts);
        assert_eq!(c.rate(), 1_000_000);
        let t0 = Instant::now();
        // 100 writes of 1000 bytes at 1 MB/s cost 100 ms of virtual time.
        let mut slept = Duration::ZERO;
        for _ in 0..100 {
            if let Some(d) = c.delay(1000, t0) {
                slept = d;
            }
        }
        assert!(slept >= Duration::from_millis(99) && slept <= Duration::from_millis(101), "{slept:?}");
        // Pending bytes do not shrink: the rate drops by 0.8, whatever the
        // cause; they shrink: it rises by 1.25, capped.
        delayed(&mut c, l0, 1000, false, &opts);
        assert_eq!(c.rate(), 800_000);
        delayed(&mut c, l0, 900, false, &opts);
        assert_eq!(c.rate(), 1_000_000);
        delayed(&mut c, l0, 800, false, &opts);
        assert_eq!(c.rate(), 1_000_000);
        // Near a stop: down by 0.6.
        delayed(&mut c, l0, 700, true, &opts);
        assert_eq!(c.rate(), 600_000);
        for pending in 800..900 {
            delayed(&mut c, StallCause::PendingCompactionSlowdown, pending, false, &opts);
        }
        assert_eq!(c.rate(), MIN_DELAYED_WRITE_RATE);
        // No delay: no rate, no sleep; the rate kept for the next delay
        // rises by 1.4.
        c.update(StallCondition::Normal, StallDebt::default(), &opts);
        assert_eq!(c.rate(), 0);
        assert!(c.delay(1 << 20, Instant::now()).is_none());
        delayed(&mut c, l0, 5000, false, &opts);
        assert_eq!(c.rate(), (MIN_DELAYED_WRITE_RATE as f64 * 1.4) as u64, "a delay starts where the last one left");
        // A stop keeps the rate; the delay after it starts there.
        c.update(StallCondition::Stopped(StallCause::L0Stop), StallDebt { pending: 6000, near_stop: false }, &opts);
        assert_eq!(c.rate(), 0);
        delayed(&mut c, l0, 7000, false, &opts);
        assert_eq!(c.rate(), (MIN_DELAYED_WRITE_RATE as f64 * 1.4) as u64);
        // With compaction off a delay runs at the configured rate.
        opts.disable_auto_compactions = true;
        delayed(&mut c, l0, 7000, false, &opts);
        assert_eq!(c.rate(), 1_000_000);
    }
}

/// Options passed to each write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Wait until the write is durable (the WAL fsynced) before returning.
    pub sync: bool,
    /// Skip the WAL: the write survives a crash only once its memtable is flushed.
    pub disable_wal: bool,
}
