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
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use super::batch::TwoPhase;
use super::column_family::ColumnFamilyData;
use super::current_wal::Durability;
use super::memtables::Writable;
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
/// Times a writer behind a group yields its core, checking its slot after
/// each, before it sleeps. RocksDB's `WriteThread::AwaitState` first spins
/// 200 times; on two cores busy-waiting took the leader's core and lost
/// throughput, while a few yields (which give the core to the leader when
/// it is waiting for one) won over both spinning and sleeping at once.
const AWAIT_YIELDS: u32 = 8;
/// The longest a writer yields before it sleeps (RocksDB's
/// `write_thread_max_yield_usec`, 100 µs).
const AWAIT_YIELD: Duration = Duration::from_micros(100);

/// The writers waiting to write, oldest first: the one at the front leads
/// (db/mod.rs, invariant 1). The first lock in the lock order.
#[derive(Default)]
pub(crate) struct WriteQueue(Mutex<VecDeque<Arc<WriterSlot>>>);

/// The write queue held: no writer joins it while this lives.
pub(crate) struct QueueHold<'a> {
    _held: MutexGuard<'a, VecDeque<Arc<WriterSlot>>>,
}

impl WriteQueue {
    /// Holds new writers off until the hold drops (the close stops writes
    /// with it).
    pub(crate) fn hold(&self) -> QueueHold<'_> {
        QueueHold { _held: self.0.lock() }
    }
}

struct WriterSlot {
    /// Taken by the leader (its own) or read in place (a follower's).
    batch: Mutex<Option<WriteBatch>>,
    has_batch: bool,
    batch_bytes: usize,
    sync: bool,
    disable_wal: bool,
    /// Switch this family's memtable even if it is not full (a flush request).
    force_switch: Option<u32>,
    done: Mutex<Option<Result<()>>>,
    /// Set (under the queue lock) when the slot's writer has something to
    /// look at: its result, or the front of the queue. A waiting writer
    /// watches it a short while before it sleeps on `cv`.
    woken: AtomicBool,
    cv: Condvar,
}

impl WriterSlot {
    /// Tells the slot's writer to look again (its result is in, or it
    /// leads). Called with the queue lock held, which the writer takes
    /// before it sleeps: no wake-up is lost.
    fn wake(&self) {
        self.woken.store(true, AtomicOrdering::Release);
        self.cv.notify_one();
    }

    /// Waits, without the queue lock, a bounded while for [`WriterSlot::wake`]
    /// (RocksDB's `WriteThread::AwaitState`): a group's write takes a few
    /// microseconds, less than a sleep and a wake-up on the condition
    /// variable cost, so a writer behind it yields its core a few times
    /// ([`AWAIT_YIELDS`]), and only then returns to sleep on `cv` under the
    /// lock.
    fn await_wake(&self) {
        let start = Instant::now();
        for _ in 0..AWAIT_YIELDS {
            if self.woken.load(AtomicOrdering::Acquire) || start.elapsed() >= AWAIT_YIELD {
                return;
            }
            std::thread::yield_now();
        }
    }

    /// A slot that writes nothing and is never grouped with others: its
    /// owner, once at the front of the queue, has writes stopped until it
    /// pops itself (`DbInner::with_writes_stopped`).
    fn barrier() -> Self {
        WriterSlot {
            batch: Mutex::new(None),
            has_batch: false,
            batch_bytes: 0,
            sync: false,
            disable_wal: false,
            force_switch: None,
            done: Mutex::new(None),
            woken: AtomicBool::new(false),
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
            front.wake();
        }
    }
}

impl DbInner {
    /// Bytes in live WAL files, the one being written included.
    pub(crate) fn total_wal_size(&self, families: &super::memtables::Memtables) -> u64 {
        let current = self.wal.len();
        families.old_wal_bytes() + current
    }

    /// The `max_total_wal_size` in force: when 0, four times the memtable
    /// budget of all families (RocksDB `DBImpl::GetMaxTotalWalSize`).
    pub(crate) fn max_total_wal_size(&self, families: &super::memtables::Memtables) -> u64 {
        let limit = self.opts().max_total_wal_size;
        if limit > 0 {
            return limit;
        }
        // Asked on every write group while an old WAL waits.
        let budget = families.iter().fold(0u64, |sum, (_, f)| {
            let d = f.data();
            sum.saturating_add((d.write_buffer_size() as u64).saturating_mul(d.max_write_buffer_number() as u64))
        });
        budget.saturating_mul(4)
    }

    pub(crate) fn write(&self, batch: Option<WriteBatch>, wo: &WriteOptions, force_switch: Option<u32>) -> Result<()> {
        self.check_writable(if force_switch.is_some() { "a flush" } else { "a write" })?;
        if let Some(b) = &batch {
            b.check_timestamps(&self.default_cf)?;
            if b.has_other_families() {
                let st = self.state.lock();
                let ids = b.column_families();
                if let Some(id) = ids.iter().find(|id| !st.families.contains(**id)) {
                    return Err(Error::invalid(format!(
                        "the write batch writes to column family {id}, which does not exist (dropped?)"
                    )));
                }
                if b.needs_family_checks() {
                    self.check_family_rules(b, |cf| st.families.data(cf))?;
                }
            } else if b.needs_family_checks() {
                // The default family's: no db mutex on the write path.
                self.check_family_rules(b, |_| Some(Arc::clone(&self.default_cf)))?;
            }
            bump(&self.stats.user_writes, 1);
        }
        let batch_bytes = batch.as_ref().map_or(0, |b| b.size_in_bytes());
        if batch.as_ref().is_some_and(|b| b.has_markers()) && wo.disable_wal {
            return Err(Error::invalid("two-phase commit writes to the WAL: disable_wal cannot be set"));
        }
        let slot = Arc::new(WriterSlot {
            has_batch: batch.is_some(),
            batch_bytes,
            batch: Mutex::new(batch),
            sync: wo.sync,
            disable_wal: wo.disable_wal,
            force_switch,
            done: Mutex::new(None),
            woken: AtomicBool::new(false),
            cv: Condvar::new(),
        });
        let start = self.stats.start_timer();
        let record = |r: Result<()>| {
            self.stats.time_since(|h| &h.write_micros, start);
            r
        };
        let mut q = self.queue.0.lock();
        q.push_back(Arc::clone(&slot));
        if q.len() > 1 {
            // Queued behind another writer (the tests that build write
            // groups wait for this point; it takes callbacks only).
            #[cfg(feature = "failpoints")]
            fail::fail_point!("write_queued_behind");
            // Behind a group being written: watch for the answer or the
            // lead without the lock first.
            drop(q);
            slot.await_wake();
            q = self.queue.0.lock();
        }
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
            front.wake();
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
            Some(mut batch) if !batch.is_empty() || batch.has_markers() => {
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
                w.wake();
            }
        }
        q.pop_front();
        result
    }

    /// Runs `f` as the leader of the write queue: no write is in progress
    /// or starts until it returns (RocksDB's unbatched writer).
    pub(crate) fn with_writes_stopped<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let slot = Arc::new(WriterSlot::barrier());
        let mut q = self.queue.0.lock();
        q.push_back(Arc::clone(&slot));
        while !q.front().is_some_and(|front| Arc::ptr_eq(front, &slot)) {
            slot.cv.wait(&mut q);
        }
        let result = MutexGuard::unlocked(&mut q, f);
        q.pop_front();
        if let Some(front) = q.front() {
            front.wake();
        }
        result
    }

    /// Appends the group to the WAL and the memtables (`mems`: every
    /// family's, by id, when the leader made room). Runs without the queue
    /// lock. Entries of a family dropped since the batch was checked are not
    /// inserted anywhere (recovery skips them too).
    fn commit_group(&self, batch: &mut WriteBatch, mems: &Writable, sync: bool, disable_wal: bool) -> Result<()> {
        // Two-phase commit steps (db/prepared.rs, invariant 1): the
        // updates of prepared sections are logged, not applied, and take no
        // sequence number.
        let phases = batch.has_markers().then(|| batch.two_phase());
        let count = phases.as_ref().map_or(batch.len(), |p| p.applied) as u64;
        let record_phases = |phases: &Option<super::batch::TwoPhaseSteps>| {
            for step in phases.iter().flat_map(|p| &p.steps) {
                match step {
                    TwoPhase::Prepare { name, record } => self.prepared.add(name, record),
                    TwoPhase::Commit(name) | TwoPhase::Rollback(name) => self.prepared.remove(name),
                }
            }
        };
        if count == 0 && phases.is_some() {
            // Prepares (and rollbacks) alone: logged, nothing applied.
            batch.set_sequence(self.last_sequence.get());
            if sync {
                self.seal_closed_wals().map_err(|e| self.set_bg_error(e))?;
            }
            let durability = if sync { Durability::Sync } else { Durability::Flush };
            self.wal.append(batch.data(), durability).map_err(|e| self.set_bg_error(e))?;
            bump(&self.stats.wal_bytes, batch.size_in_bytes() as u64);
            bump(&self.stats.wal_writes, 1);
            if sync {
                bump(&self.stats.wal_syncs, 1);
            }
            record_phases(&phases);
            return Ok(());
        }
        self.tuning.on_client_write();
        let first = self.last_sequence.get() + 1;
        batch.set_sequence(first);
        // A family created after the leader made room is looked up now; its
        // memtable cannot have been switched since (only a leader switches).
        let mut mems = Arc::clone(mems);
        if batch.has_other_families() && batch.column_families().iter().any(|cf| !mems.iter().any(|(id, _)| id == cf)) {
            mems = self.state.lock().families.writable();
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
            let durability = match (sync, manual) {
                (true, _) => Durability::Sync,
                (false, false) => Durability::Flush,
                (false, true) => Durability::Buffer,
            };
            let wal_time = crate::perf::PerfTimer::start();
            if let Err(e) = self.wal.append(batch.data(), durability) {
                // The record may be in the WAL, in part or whole, with the
                // group's sequence numbers: a resume must not hand them out
                // again (db/bg_error.rs, invariant 3).
                let mut st = self.state.lock();
                if count > 0 {
                    st.bg_error.burn(first + count - 1);
                }
                return Err(self.set_bg_error_locked(&mut st, e));
            }
            wal_time.stop(|c| &mut c.write_wal_time);
            // Prepares join the prepared set with their records, commits
            // and rollbacks leave it (db/prepared.rs, invariant 1).
            record_phases(&phases);
            if sync {
                bump(&self.stats.wal_syncs, 1);
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
                    if let Some((kind, merged)) = self.merge_in_place(data, mem, key, value, seq) {
                        mem.add(seq, kind, key, &merged);
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
        let memtable_time = crate::perf::PerfTimer::start();
        let inserted = (|| -> Result<()> {
            let mut ops = (first..).zip(batch.applied_cf());
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
        memtable_time.stop(|c| &mut c.write_memtable_time);
        crate::perf::count(|c| c.write_group_count += 1);
        // Part of the group may be in the memtable, at sequence numbers not
        // published: only a reopen (which replays the WAL) recovers from that.
        inserted.map_err(|e| self.set_fatal_bg_error(e))?;
        self.last_sequence.publish(first + count - 1);
        bump(&self.stats.user_keys, count);
        bump(&self.stats.user_bytes, user_bytes);
        bump(&self.stats.write_groups, 1);
        Ok(())
    }

    /// With `max_successive_merges` reached by `key`'s operands on top of
    /// memtable `mem`, the value the merge at `seq` makes (everything
    /// before it read, the operand applied), to be written instead of the
    /// operand (RocksDB's `MemTableInserter::MergeCF`), with its kind (an
    /// entity when the merge was over one); `None` otherwise.
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
    ) -> Option<(ValueKind, Vec<u8>)> {
        let opts = data.options();
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
        let base = match &before {
            None => crate::wide_columns::MergeBase::None,
            Some(super::read::Got::Plain(v)) => crate::wide_columns::MergeBase::Plain(v),
            Some(super::read::Got::Entity(e)) => crate::wide_columns::MergeBase::Entity(e),
        };
        let (entity, v) = crate::wide_columns::merge(op.as_ref(), key, base, &[operand], "write").ok()?;
        Some((if entity { ValueKind::WideColumnEntity } else { ValueKind::Value }, v))
    }

    /// The families `batch` merges into that set `max_successive_merges`
    /// (with an operator), by id; the db mutex only for families other than
    /// the default.
    fn successive_merge_families(&self, batch: &WriteBatch) -> Vec<(u32, Arc<ColumnFamilyData>)> {
        let wanted = |data: &ColumnFamilyData| {
            let o = data.options();
            o.max_successive_merges > 0 && o.merge_operator.is_some()
        };
        if !batch.has_other_families() {
            return if wanted(&self.default_cf) { vec![(0, Arc::clone(&self.default_cf))] } else { Vec::new() };
        }
        let st = self.state.lock();
        batch
            .column_families()
            .into_iter()
            .filter_map(|cf| st.families.data(cf).map(|data| (cf, data)))
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
                    if f.options().merge_operator.is_none() {
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
    fn make_room_for_write(&self, force: Option<u32>, batch_bytes: usize) -> Result<Writable> {
        let mut st = self.state.lock();
        let mut delayed_once = false;
        loop {
            st.bg_error.check()?;
            if st.jobs.is_shutting_down() {
                return Err(Error::Closed);
            }
            let condition = self.cached_stall_condition(&mut st);
            if let (None, false, StallCondition::Delayed(cause)) = (force, delayed_once, condition) {
                delayed_once = true;
                // Paced on the database's clock (`Options::clock`), as
                // RocksDB's `WriteController` reads its `SystemClock`.
                let clock = Arc::clone(&self.opts().clock);
                if let Some(wait) = st.controller.delay(batch_bytes as u64, clock.monotonic()) {
                    let start = Instant::now();
                    let deadline = clock.monotonic() + wait;
                    // Waited out on the background condition variable, not
                    // slept at once: the delay ends early when the condition
                    // that set it is gone (a flush or compaction installed,
                    // options changed), or an error or a close comes, as
                    // RocksDB's `DelayWrite` checks every millisecond. At
                    // the controller's lowest rate one large batch was a
                    // sleep of minutes, every writer queued behind it.
                    while !st.bg_error.is_set() && !st.jobs.is_shutting_down() {
                        let Some(left) = deadline.checked_sub(clock.monotonic()).filter(|l| !l.is_zero()) else {
                            break;
                        };
                        self.bg_cv.wait_for(&mut st, clock.real_wait(left));
                        if !matches!(self.cached_stall_condition(&mut st), StallCondition::Delayed(_)) {
                            break;
                        }
                    }
                    self.stats.record_stall(cause, start.elapsed().as_micros() as u64);
                    continue;
                }
            }
            let mut switch: Vec<u32> = Vec::new();
            for (id, family) in st.families.iter() {
                // Every family, every write group: the limit is read from
                // the family's atomic, not its options.
                let full = family.mem().approximate_memory_usage() >= family.data().write_buffer_size();
                let forced = force == Some(id) && !family.mem().is_empty();
                if full || forced {
                    switch.push(id);
                }
            }
            let wal_full = if switch.is_empty() {
                st.families.families_pinning_oldest_wal(|m| self.total_wal_size(m) > self.max_total_wal_size(m))
            } else {
                None
            };
            if let Some((_, ids)) = &wal_full {
                switch.extend(ids);
            }
            if let Some(wbm) = &self.write_buffer_manager {
                self.report_memtable_usage(&st);
                if switch.is_empty() && wbm.should_flush() {
                    // The shared budget: this database's family holding the
                    // most in its mutable memtable goes to a flush.
                    let biggest = st
                        .families
                        .iter()
                        .filter(|(_, f)| !f.mem().is_empty())
                        .max_by_key(|(_, f)| f.mem().allocated_bytes())
                        .map(|(id, _)| id);
                    switch.extend(biggest);
                }
                // Over the budget with flushes of ours under way: wait for
                // them to give memory back. With none, the memory is another
                // database's (whose own writes flush it): waiting would not
                // help, so the write goes on.
                let flushing = st.families.iter().any(|(_, f)| !f.imm().is_empty());
                if switch.is_empty() && force.is_none() && flushing && wbm.should_stall() {
                    let start = Instant::now();
                    self.work_cv.notify_all();
                    MutexGuard::unlocked(&mut st, || wbm.wait_for_room(Duration::from_millis(100)));
                    self.stats.record_stall(StallCause::MemtableLimit, start.elapsed().as_micros() as u64);
                    continue;
                }
            }
            if switch.is_empty() {
                return Ok(st.families.writable());
            }
            if let StallCondition::Stopped(cause) = condition {
                let start = Instant::now();
                self.work_cv.notify_all();
                self.bg_cv.wait_for(&mut st, Duration::from_millis(100));
                self.stats.record_stall(cause, start.elapsed().as_micros() as u64);
                continue;
            }
            let at_limit = switch.iter().any(|id| {
                st.families.get(*id).is_some_and(|f| f.imm().len() + 1 >= f.data().max_write_buffer_number())
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
                st.families.wal_full_switched(oldest);
                bump(&self.stats.wal_full_flushes, 1);
            }
            return Ok(st.families.writable());
        }
    }

    /// Tells the shared memtable budget, if any, what this database's
    /// memtables hold now: the mutable ones and all.
    pub(crate) fn report_memtable_usage(&self, st: &DbState) {
        let Some(wbm) = &self.write_buffer_manager else { return };
        // Once closed (`close` has left the count), a late flush reports
        // nothing.
        if self.closed.is_set() {
            return;
        }
        // What the memtables hold, their key indexes included (as
        // `ebb.cur-size-all-mem-tables` counts).
        let (mut mutable, mut total) = (0u64, 0u64);
        for (_, f) in st.families.iter() {
            let m = f.mem().allocated_bytes() as u64;
            mutable += m;
            total += m + f.imm().iter().map(|i| i.allocated_bytes() as u64).sum::<u64>();
        }
        wbm.report(self.instance, mutable, total);
    }

    /// Makes the mutable memtables of the families `ids` immutable and starts
    /// new ones with a new WAL. Every other family's empty memtable is
    /// renumbered to the new WAL, so an idle family pins no old WAL. Requires
    /// the db mutex (and the queue, held by the caller).
    pub(crate) fn switch_memtables(&self, st: &mut DbState, ids: &[u32]) -> Result<()> {
        self.try_switch_memtables(st, ids).map_err(|e| self.set_bg_error_locked(st, e))
    }

    /// [`DbInner::switch_memtables`], its failure returned as it is, not
    /// made the sticky error (a resume's, db/resume.rs).
    pub(crate) fn try_switch_memtables(&self, st: &mut DbState, ids: &[u32]) -> Result<()> {
        let number = st.versions.new_file_number();
        // Neither the old WAL nor the directory is synced here: the new WAL
        // starts under its pending name and the old one is sealed later, by
        // whoever first needs it synced (db/wal_seal.rs).
        let path = filename::pending_wal_file(&self.dir, number);
        let bytes_per_sync = self.opts().wal_bytes_per_sync;
        let switched = self.wal.switch(|| {
            let file = crate::fs::WriteBehindFile::wrap(self.fs.new_writable(&path)?, bytes_per_sync);
            Ok(LogWriter::new(file, path.display().to_string()))
        });
        let old_size = match switched {
            Ok((old, old_size)) => {
                if let Some(old) = old {
                    self.wal_sealer.push(st.families.current_wal(), old, number);
                }
                old_size
            }
            Err(e) => return Err(e),
        };
        // The prepared transactions move into the new WAL before any write
        // (db/prepared.rs, invariant 2).
        for (_, record) in self.prepared.records() {
            self.wal.append(&record, Durability::Flush)?;
        }
        st.families.switch(ids, number, old_size, self.last_sequence.get(), new_memtable);
        self.install_super_version(st);
        self.work_cv.notify_all();
        Ok(())
    }

    /// Records `e` as the sticky background error, one that
    /// [`Db::resume`](crate::Db::resume) cannot end (db/bg_error.rs,
    /// invariant 2), and returns it wrapped.
    pub(crate) fn set_fatal_bg_error(&self, e: Error) -> Error {
        let mut st = self.state.lock();
        self.record_bg_error(&mut st, e, true)
    }

    pub(crate) fn set_bg_error_locked(&self, st: &mut DbState, e: Error) -> Error {
        self.record_bg_error(st, e, false)
    }

    fn record_bg_error(&self, st: &mut DbState, e: Error, fatal: bool) -> Error {
        if matches!(e, Error::Cancelled | Error::Closed) {
            return e;
        }
        let (arc, first) = st.bg_error.set(e, fatal);
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
        let held = if wait { self.state.lock().families.holding_data(&[cf], true) } else { Vec::new() };
        self.write(None, &WriteOptions::default(), Some(cf))?;
        if wait {
            self.wait_for_memtables_flushed(&mut self.state.lock(), &held)?;
        }
        Ok(())
    }

    /// Waits until every immutable memtable the families `ids` hold now is
    /// flushed (a sticky error or a close ends the wait).
    pub(crate) fn wait_for_flushes(&self, st: &mut MutexGuard<'_, DbState>, ids: &[u32]) -> Result<()> {
        let held = st.families.holding_data(ids, false);
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
            st.bg_error.check()?;
            if held.iter().all(|(id, m)| m.flush_done() || !st.families.contains(*id)) {
                return Ok(());
            }
            if st.jobs.is_shutting_down() {
                return Err(Error::Closed);
            }
            self.work_cv.notify_all();
            self.bg_cv.wait(st);
        }
    }

    /// Seals the closed WALs and syncs the current one (`flush_wal(true)`;
    /// a purge's, with transactions prepared: db/prepared.rs, invariant 3).
    /// Every write made before the call is durable on return, also those in
    /// a WAL a switch closed meanwhile: seal until, with the WAL locked
    /// (switches are then excluded), no closed WAL is owed.
    pub(crate) fn sync_current_wal(&self) -> Result<()> {
        loop {
            self.seal_closed_wals()?;
            if let Some(r) = self.wal.flush_when(true, || self.wal_sealer.all_sealed()) {
                return r;
            }
        }
    }

    pub(crate) fn flush_wal(&self, sync: bool) -> Result<()> {
        self.check_writable("flush_wal")?;
        let r = match sync {
            true => self.sync_current_wal(),
            false => self.wal.flush_when(false, || true).unwrap_or(Ok(())),
        };
        if sync && r.is_ok() {
            bump(&self.stats.wal_syncs, 1);
        }
        r.map_err(|e| self.set_bg_error(e))
    }
}

/// A new memtable for a family with options `opts`, writing to WAL `log`:
/// with a prefix bloom filter when the options ask for one, and a hash
/// index of user keys for point lookups (`memtable::skiplist` contract 5)
/// of one 8-byte slot per `MEMTABLE_INDEX_BYTES_PER_SLOT` bytes of the
/// write buffer.
///
/// With timestamps (docs/timestamps.md), whose reads look for a key's newest
/// version at or below a timestamp, which the hash index of whole user keys
/// cannot find, the memtable has instead a bloom filter of its keys without
/// their timestamps, of one byte per `MEMTABLE_KEY_BLOOM_BYTES_PER_BYTE`
/// bytes of the write buffer: a point read of a key the memtable does not
/// hold, the most common, skips it without a descent.
pub(crate) fn new_memtable(opts: &ColumnFamilyOptions, log: u64) -> MemTable {
    let bytes = (opts.write_buffer_size as f64 * opts.memtable_prefix_bloom_size_ratio) as usize;
    let bloom = match opts.user_comparator().timestamp_size() {
        0 => opts.prefix_extractor.clone().filter(|_| bytes > 0).map(|x| (x, bytes)),
        _ => Some((crate::prefix::without_timestamp(), opts.write_buffer_size / MEMTABLE_KEY_BLOOM_BYTES_PER_BYTE)),
    };
    let slots = opts.write_buffer_size / MEMTABLE_INDEX_BYTES_PER_SLOT;
    let hints = opts.prefix_extractor.clone().map(|x| (x, opts.write_buffer_size / MEMTABLE_HINT_BYTES_PER_SLOT));
    MemTable::with_filters(log, opts.user_comparator(), bloom, slots, hints)
}

/// Write-buffer bytes per byte of the key bloom filter of a memtable with
/// timestamps: about 16 bits per entry of 128 bytes, six probes, under 1 %
/// false positives.
const MEMTABLE_KEY_BLOOM_BYTES_PER_BYTE: usize = 64;

/// Write-buffer bytes per prefix hint of a memtable (`memtable::skiplist`
/// contract 7), and per entry of its prefix firsts (contract 8), when the
/// family has a prefix extractor: 8 bytes each per 512 (3.1 % beside
/// `write_buffer_size`, reported in `ebb.cur-size-all-mem-tables`; pages
/// of slots never used are never touched). A 64 MiB memtable of 150-byte
/// entries holds about 450,000 keys in 131,072 slots: prefixes of about
/// four keys or more each find their own hint mostly.
const MEMTABLE_HINT_BYTES_PER_SLOT: usize = 512;

/// Write-buffer bytes per slot of a memtable's key index: 8 bytes of index
/// per 96 of buffer in its last tier (8.3 % beside `write_buffer_size`,
/// reported in `ebb.cur-size-all-mem-tables`). The tiers before it (32 KiB,
/// then eight times as much each) are made as the keys come, so a memtable
/// flushed at a fraction of its buffer holds a fraction of the index. The
/// last tier holds keys up to three quarters of its slots, so it saturates
/// only when entries average under 128 bytes (header, tower, key and value).
const MEMTABLE_INDEX_BYTES_PER_SLOT: usize = 96;

/// Options passed to each write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// Wait until the write is durable (the WAL fsynced) before returning.
    pub sync: bool,
    /// Skip the WAL: the write survives a crash only once its memtable is flushed.
    pub disable_wal: bool,
}
