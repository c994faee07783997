//! The memtables of every live column family and the WALs their data is
//! in, owned by the write path (RocksDB's `ColumnFamilySet` with each
//! family's `MemTableList`, and `DBImpl::logs_`).
//!
//! Invariants (all under the db mutex):
//! 1. Each live family has one mutable memtable and its immutable ones,
//!    oldest first; a family leaves only when dropped.
//! 2. `current_wal` is the number of the WAL being written; `old_wals`
//!    are the WALs before it not yet deleted, oldest first, with their
//!    sizes. A memtable's data is all in WALs numbered from its
//!    `log_number` up.
//! 3. A family's mutable memtable that is empty carries `current_wal`
//!    (it is renumbered at every switch), so an idle family pins no old
//!    WAL (column_family.rs, invariant 2).
//! 4. `writable` lists every live family's mutable memtable by id: the
//!    write path's list, rebuilt only when a memtable is switched or a
//!    family comes or goes, so a write takes it with one reference count.
//! 5. `wal_full_flushed` is the oldest WAL for which `max_total_wal_size`
//!    already forced a switch; it only grows.
//! 6. A family's memtables, newest first (the mutable one, the immutable
//!    ones, then its `history` of flushed ones), each begin where the next
//!    one ends: every write to the family after a memtable's earliest
//!    sequence is in it or a newer one (`MemTable::earliest_sequence`; an
//!    empty memtable renumbered to a new WAL keeps its predecessor's). The
//!    history is what `max_write_buffer_size_to_maintain` keeps of flushed
//!    memtables, for transactions to check for conflicts; reads never see
//!    it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use super::column_family::ColumnFamilyData;
use crate::memtable::MemTable;
use crate::options::ColumnFamilyOptions;

/// Every live family's mutable memtable, by id (invariant 4).
pub(crate) type Writable = Arc<[(u32, Arc<MemTable>)]>;

/// One family's memtables (invariant 1).
pub(crate) struct Family {
    data: Arc<ColumnFamilyData>,
    mem: Arc<MemTable>,
    /// Waiting for flush, oldest first.
    imm: Vec<Arc<MemTable>>,
    /// Flushed and kept for conflict checks, oldest first (invariant 6).
    history: VecDeque<Arc<MemTable>>,
}

impl Family {
    /// The family's shared part (handles, readers).
    pub(crate) fn data(&self) -> &Arc<ColumnFamilyData> {
        &self.data
    }

    /// The memtable writes go into.
    pub(crate) fn mem(&self) -> &Arc<MemTable> {
        &self.mem
    }

    /// The memtables waiting for flush, oldest first.
    pub(crate) fn imm(&self) -> &[Arc<MemTable>] {
        &self.imm
    }

    /// The oldest WAL this family's unflushed data may be in.
    pub(crate) fn oldest_log_to_keep(&self) -> u64 {
        self.imm.iter().map(|m| m.log_number()).chain(std::iter::once(self.mem.log_number())).min().unwrap_or(0)
    }

    /// Whether any memtable of the family holds an entry.
    pub(crate) fn holds_data(&self) -> bool {
        !self.mem.is_empty() || !self.imm.is_empty()
    }

    /// Every memtable of the family, newest first: the mutable one, the
    /// immutable ones, the flushed ones kept (invariant 6).
    pub(crate) fn newest_first(&self) -> Vec<Arc<MemTable>> {
        std::iter::once(&self.mem).chain(self.imm.iter().rev()).chain(self.history.iter().rev()).cloned().collect()
    }

    /// Drops the oldest flushed memtables kept until those left fit in
    /// `max_write_buffer_size_to_maintain` beside the unflushed ones; the
    /// newest flushed one stays while the option keeps any (RocksDB's
    /// `TrimHistory` likewise leaves the last).
    fn trim_history(&mut self) {
        let limit = self.data.options().memtable_history_bytes();
        if limit == 0 {
            self.history.clear();
            return;
        }
        let size = |m: &Arc<MemTable>| m.approximate_memory_usage() as u64;
        let unflushed: u64 = size(&self.mem) + self.imm.iter().map(size).sum::<u64>();
        let mut kept: u64 = self.history.iter().map(size).sum();
        while self.history.len() > 1 && unflushed + kept > limit {
            if let Some(old) = self.history.pop_front() {
                kept -= size(&old);
            }
        }
    }

    /// Whether any memtable holds writes made without the WAL.
    pub(crate) fn has_unlogged(&self) -> bool {
        self.mem.has_unlogged() || self.imm.iter().any(|m| m.has_unlogged())
    }
}

/// Every live family's memtables, and the WALs (the module's invariants).
/// Requires the db mutex.
pub(crate) struct Memtables {
    families: BTreeMap<u32, Family>,
    writable: Writable,
    current_wal: u64,
    old_wals: VecDeque<(u64, u64)>,
    wal_full_flushed: u64,
}

impl Memtables {
    /// The families opened, each with an empty memtable on no WAL yet
    /// (recovery replays into its own memtables and then starts the WAL:
    /// [`Memtables::start_wal`]).
    pub(crate) fn new(families: impl IntoIterator<Item = Arc<ColumnFamilyData>>) -> Self {
        let families: BTreeMap<u32, Family> = families
            .into_iter()
            .map(|data| {
                let mem = Arc::new(MemTable::new(0, data.cmp.clone()));
                (data.id, Family { data, mem, imm: Vec::new(), history: VecDeque::new() })
            })
            .collect();
        let mut m = Memtables {
            families,
            writable: Arc::from([]),
            current_wal: 0,
            old_wals: VecDeque::new(),
            wal_full_flushed: 0,
        };
        m.rebuild_writable();
        m
    }

    fn rebuild_writable(&mut self) {
        self.writable = self.families.iter().map(|(id, f)| (*id, Arc::clone(&f.mem))).collect();
    }

    /// Family `id`, if live.
    pub(crate) fn get(&self, id: u32) -> Option<&Family> {
        self.families.get(&id)
    }

    pub(crate) fn contains(&self, id: u32) -> bool {
        self.families.contains_key(&id)
    }

    /// The live families' count.
    pub(crate) fn len(&self) -> usize {
        self.families.len()
    }

    /// The live families, by id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &Family)> {
        self.families.iter().map(|(id, f)| (*id, f))
    }

    /// The live families' ids, ascending.
    pub(crate) fn ids(&self) -> Vec<u32> {
        self.families.keys().copied().collect()
    }

    /// The shared part of family `id`, if live.
    pub(crate) fn data(&self, id: u32) -> Option<Arc<ColumnFamilyData>> {
        self.families.get(&id).map(|f| Arc::clone(&f.data))
    }

    /// The live family named `name`.
    pub(crate) fn find(&self, name: &str) -> Option<&Family> {
        self.families.values().find(|f| f.data.name == name)
    }

    /// Adds a family created now, with `mem` (on the current WAL).
    pub(crate) fn add_family(&mut self, data: Arc<ColumnFamilyData>, mem: Arc<MemTable>) {
        self.families.insert(data.id, Family { data, mem, imm: Vec::new(), history: VecDeque::new() });
        self.rebuild_writable();
    }

    /// Takes family `id` out (dropped); its memtables are discarded.
    pub(crate) fn remove_family(&mut self, id: u32) -> Option<Family> {
        let f = self.families.remove(&id);
        self.rebuild_writable();
        f
    }

    /// Every live family's mutable memtable, by id (invariant 4).
    pub(crate) fn writable(&self) -> Writable {
        Arc::clone(&self.writable)
    }

    /// The number of the WAL being written.
    pub(crate) fn current_wal(&self) -> u64 {
        self.current_wal
    }

    /// The WALs before the current one not deleted yet, oldest first:
    /// (number, bytes).
    pub(crate) fn old_wals(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.old_wals.iter().copied()
    }

    /// How many WALs are live, the current one included.
    pub(crate) fn live_wal_count(&self) -> usize {
        self.old_wals.len() + 1
    }

    /// Bytes in the WALs before the current one.
    pub(crate) fn old_wal_bytes(&self) -> u64 {
        self.old_wals.iter().map(|(_, size)| size).sum()
    }

    /// Takes the WALs below `log_number` (every family's data in them is
    /// in tables) out of the list, oldest first: they are obsolete.
    pub(crate) fn take_wals_below(&mut self, log_number: u64) -> Vec<u64> {
        let mut gone = Vec::new();
        while let Some(&(number, _)) = self.old_wals.front() {
            if number >= log_number {
                break;
            }
            self.old_wals.pop_front();
            gone.push(number);
        }
        gone
    }

    /// After recovery: WAL `number` is the one being written, and every
    /// family starts an empty memtable on it (what recovery replayed is in
    /// tables, or read only) after `last_seq`, the last sequence recovered.
    pub(crate) fn start_wal(
        &mut self,
        number: u64,
        last_seq: u64,
        new_mem: impl Fn(&ColumnFamilyOptions, u64) -> MemTable,
    ) {
        self.current_wal = number;
        for family in self.families.values_mut() {
            family.mem = Arc::new(new_mem(&family.data.options(), number));
            family.mem.set_earliest_sequence(last_seq);
            family.imm.clear();
            family.history.clear();
        }
        self.rebuild_writable();
    }

    /// For a read-only instance: family `id` reads `replayed` (oldest
    /// first) as its immutable memtables, never flushed.
    pub(crate) fn keep_replayed(&mut self, id: u32, replayed: Vec<Arc<MemTable>>, empty: MemTable) {
        if let Some(family) = self.families.get_mut(&id) {
            family.imm = replayed;
            family.mem = Arc::new(empty);
        }
        self.rebuild_writable();
    }

    /// For a secondary instance catching up: each family takes the
    /// memtables of `fresh` (a new read of the primary) when `alive` says
    /// it is still there; the others are marked dropped.
    pub(crate) fn take_memtables_of(&mut self, fresh: &Memtables, alive: impl Fn(u32) -> bool) {
        for (id, f) in self.families.iter_mut() {
            match fresh.families.get(id).filter(|_| alive(*id)) {
                Some(new) => {
                    f.mem = Arc::clone(&new.mem);
                    f.imm = new.imm.clone();
                }
                None => f.data.mark_dropped(),
            }
        }
        self.rebuild_writable();
    }

    /// A switch to WAL `new_wal` (the one before it `old_wal_bytes` long)
    /// after sequence `last_seq`: the mutable memtables of the families
    /// `ids` become immutable and new ones start; every other family's
    /// empty memtable is renumbered to the new WAL (invariants 3 and 6).
    pub(crate) fn switch(
        &mut self,
        ids: &[u32],
        new_wal: u64,
        old_wal_bytes: u64,
        last_seq: u64,
        new_mem: impl Fn(&ColumnFamilyOptions, u64) -> MemTable,
    ) {
        let old = std::mem::replace(&mut self.current_wal, new_wal);
        self.old_wals.push_back((old, old_wal_bytes));
        for (id, family) in self.families.iter_mut() {
            if ids.contains(id) {
                let fresh = Arc::new(new_mem(&family.data.options(), new_wal));
                fresh.set_earliest_sequence(last_seq);
                let full = std::mem::replace(&mut family.mem, fresh);
                family.imm.push(full);
                family.trim_history();
            } else if family.mem.is_empty() {
                let fresh = Arc::new(new_mem(&family.data.options(), new_wal));
                fresh.set_earliest_sequence(family.mem.earliest_sequence());
                family.mem = fresh;
            }
        }
        self.rebuild_writable();
    }

    /// The memtables a new flush takes: in each family, the first run of
    /// immutable memtables no running flush has taken (oldest first); of
    /// the families, the one whose run starts in the oldest WAL.
    pub(crate) fn pick_flush(&self) -> Option<(u32, Vec<Arc<MemTable>>)> {
        self.families
            .iter()
            .filter_map(|(id, f)| {
                let start = f.imm.iter().position(|m| !m.flush_claimed())?;
                let run: Vec<_> = f.imm[start..].iter().take_while(|m| !m.flush_claimed()).cloned().collect();
                Some((*id, run))
            })
            .min_by_key(|(_, run)| run[0].log_number())
    }

    /// `mems`, flushed and installed, leave family `cf`'s immutable
    /// memtables, for its history when `max_write_buffer_size_to_maintain`
    /// keeps any (invariant 6).
    pub(crate) fn remove_flushed(&mut self, cf: u32, mems: &[Arc<MemTable>]) {
        if let Some(family) = self.families.get_mut(&cf) {
            let keep = family.data.options().memtable_history_bytes() > 0;
            let mut flushed = Vec::new();
            family.imm.retain(|m| {
                let gone = mems.iter().any(|x| Arc::ptr_eq(x, m));
                if gone {
                    flushed.push(Arc::clone(m));
                }
                !gone
            });
            if keep {
                // Flushes take the oldest memtables, and may finish out of
                // order: the history is kept in the order of its sequences.
                family.history.extend(flushed);
                family.history.make_contiguous().sort_by_key(|m| m.earliest_sequence());
                family.trim_history();
            } else {
                family.history.clear();
            }
        }
    }

    /// The oldest WAL family `cf`'s data may be in once `flushed` are in a
    /// table: its other memtables' oldest (`None` once it is dropped).
    pub(crate) fn oldest_log_after_flush(&self, cf: u32, flushed: &[Arc<MemTable>]) -> Option<u64> {
        let family = self.families.get(&cf)?;
        let oldest = family
            .imm
            .iter()
            .filter(|m| !flushed.iter().any(|x| Arc::ptr_eq(x, m)))
            .map(|m| m.log_number())
            .chain(std::iter::once(family.mem.log_number()))
            .min()
            .unwrap_or(self.current_wal);
        Some(oldest)
    }

    /// The memtables of the families `ids` that hold data: the immutable
    /// ones, and with `mutable` the mutable one when it is not empty.
    pub(crate) fn holding_data(&self, ids: &[u32], mutable: bool) -> Vec<(u32, Arc<MemTable>)> {
        let mut out = Vec::new();
        for id in ids {
            if let Some(f) = self.families.get(id) {
                out.extend(f.imm.iter().map(|m| (*id, Arc::clone(m))));
                if mutable && !f.mem.is_empty() {
                    out.push((*id, Arc::clone(&f.mem)));
                }
            }
        }
        out
    }

    /// The most immutable memtables one family has waiting for flush (the
    /// tuner's backlog: three families with one each are no backlog).
    pub(crate) fn most_immutable(&self) -> usize {
        self.families.values().map(|f| f.imm.len()).max().unwrap_or(0)
    }

    /// Whether any family holds writes made without the WAL.
    pub(crate) fn any_unlogged(&self) -> bool {
        self.families.values().any(Family::has_unlogged)
    }

    /// Whether any family's memtables hold an entry.
    pub(crate) fn any_data(&self) -> bool {
        self.families.values().any(Family::holds_data)
    }

    /// The oldest WAL and the families whose mutable memtable holds data in
    /// it, for a switch that lets it go once they are flushed (RocksDB
    /// `SwitchWAL`), when `over_limit` says the live WALs are past
    /// `max_total_wal_size`. Done once per oldest WAL, and only with more
    /// than one family, as RocksDB (one family's WALs are bounded by its
    /// memtables anyway). A WAL only immutable memtables hold is marked
    /// done: their flushes free it.
    pub(crate) fn families_pinning_oldest_wal(
        &mut self,
        over_limit: impl FnOnce(&Memtables) -> bool,
    ) -> Option<(u64, Vec<u32>)> {
        let &(oldest, _) = self.old_wals.front()?;
        if self.families.len() < 2 || self.wal_full_flushed >= oldest || !over_limit(self) {
            return None;
        }
        let pinning: Vec<u32> = self
            .families
            .iter()
            .filter(|(_, f)| !f.mem.is_empty() && f.mem.log_number() <= oldest)
            .map(|(id, _)| *id)
            .collect();
        if pinning.is_empty() {
            self.wal_full_flushed = oldest;
            return None;
        }
        Some((oldest, pinning))
    }

    /// The switch for WAL `oldest` being full is made (invariant 5).
    pub(crate) fn wal_full_switched(&mut self, oldest: u64) {
        self.wal_full_flushed = self.wal_full_flushed.max(oldest);
    }
}
