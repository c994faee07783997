//! Per-thread performance counters: what this thread's reads and writes
//! did, step by step (RocksDB's `PerfContext` and `IOStatsContext`,
//! `perf_context.h`, `iostats_context.h`, `perf_level.h`).
//!
//! Nothing is counted until a thread sets a level above
//! [`PerfLevel::Disable`] with [`set_perf_level`]; the level, like the
//! counters, belongs to the thread that sets it. Off, each counting point
//! costs a read of a thread-local byte.
//!
//! ```
//! use ebb::perf::{self, PerfLevel};
//! # let dir = tempfile::tempdir().unwrap();
//! # let db = ebb::Db::open(dir.path(), ebb::Options::default().create_if_missing(true)).unwrap();
//! perf::set_perf_level(PerfLevel::EnableTime);
//! perf::reset_perf_context();
//! db.put(b"k", b"v").unwrap();
//! db.get(b"k").unwrap();
//! let ctx = perf::perf_context();
//! assert_eq!(ctx.get_from_memtable_count, 1);
//! println!("{}", ctx.report(true));
//! perf::set_perf_level(PerfLevel::Disable);
//! ```
//!
//! What each counter counts is on its field. Times are in nanoseconds, from
//! the monotonic clock, and only at [`PerfLevel::EnableTimeExceptForMutex`]
//! or above. Ebb does not time its mutexes, so [`PerfLevel::EnableTime`]
//! counts what `EnableTimeExceptForMutex` does.

use std::cell::{Cell, RefCell};
use std::fmt::Write as _;
use std::time::Instant;

/// How much the calling thread counts (RocksDB's `PerfLevel`, with its
/// numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(u8)]
pub enum PerfLevel {
    /// Nothing (the default).
    #[default]
    Disable = 1,
    /// Counts, no times.
    EnableCount = 2,
    /// Counts and the times of every step but waiting for mutexes.
    EnableTimeExceptForMutex = 4,
    /// Counts and times (as `EnableTimeExceptForMutex`: Ebb does not time
    /// its mutexes).
    EnableTime = 6,
}

impl PerfLevel {
    /// The level RocksDB numbers `n` (db_bench's `--perf_level`); `None`
    /// for a number that is not a level. RocksDB's 3 (`kEnableWait`) and 5
    /// (`kEnableTimeAndCPUTimeExceptForMutex`) map to the nearest level Ebb
    /// keeps: counts, and times except for mutexes.
    pub fn from_number(n: u32) -> Option<PerfLevel> {
        Some(match n {
            0 | 1 => PerfLevel::Disable,
            2 | 3 => PerfLevel::EnableCount,
            4 | 5 => PerfLevel::EnableTimeExceptForMutex,
            6 => PerfLevel::EnableTime,
            _ => return None,
        })
    }
}

/// What the calling thread's reads and writes did since its last
/// [`reset_perf_context`] (RocksDB's `PerfContext`, the counters Ebb keeps,
/// by their RocksDB names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PerfContext {
    /// Blocks found in the block cache (data, index and filter).
    pub block_cache_hit_count: u64,
    /// Index blocks found in the block cache.
    pub block_cache_index_hit_count: u64,
    /// Filter blocks found in the block cache.
    pub block_cache_filter_hit_count: u64,
    /// Blocks of any kind looked up in the block cache and not found.
    pub block_cache_miss_count: u64,
    /// Blocks missing from the block cache that its compressed secondary
    /// cache held (not read from the file).
    pub secondary_cache_hit_count: u64,
    /// Blocks read from table files.
    pub block_read_count: u64,
    /// Bytes of those blocks, as stored (trailers included).
    pub block_read_byte: u64,
    /// Time reading them.
    pub block_read_time: u64,
    /// Time checking their checksums.
    pub block_checksum_time: u64,
    /// Time decompressing them.
    pub block_decompress_time: u64,
    /// Table filter probes that said the key (or prefix) may be there.
    pub bloom_sst_hit_count: u64,
    /// Table filter probes that ruled the key (or prefix) out.
    pub bloom_sst_miss_count: u64,
    /// Point reads (`get`, each key of `multi_get`).
    pub get_count: u64,
    /// Bytes of the values point reads returned.
    pub get_read_bytes: u64,
    /// Time taking a point read's view of the database (its sequence and
    /// files).
    pub get_snapshot_time: u64,
    /// Memtables point reads searched (the mutable one and each immutable
    /// one asked, until one held the key).
    pub get_from_memtable_count: u64,
    /// Time in the memtables.
    pub get_from_memtable_time: u64,
    /// Time in the table files.
    pub get_from_output_files_time: u64,
    /// Iterator seeks (of any of the four kinds).
    pub iter_seek_count: u64,
    /// Iterator `next` calls.
    pub iter_next_count: u64,
    /// Iterator `prev` calls.
    pub iter_prev_count: u64,
    /// Bytes of the keys and values iterators stopped on.
    pub iter_read_bytes: u64,
    /// Entries an iterator moved past going forwards without stopping:
    /// older versions, deleted keys and their tombstones.
    pub internal_key_skipped_count: u64,
    /// Tombstones an iterator moved past (point and single deletions, and
    /// keys a range tombstone deletes).
    pub internal_delete_skipped_count: u64,
    /// Entries newer than the iterator's sequence it moved past.
    pub internal_recent_skipped_count: u64,
    /// Write groups this thread committed (led).
    pub write_group_count: u64,
    /// Time appending those groups to the WAL (syncs included).
    pub write_wal_time: u64,
    /// Time inserting them into the memtables.
    pub write_memtable_time: u64,
    /// Time a write of this thread waited in a write stall (delay or stop).
    pub write_delay_time: u64,
}

/// The calling thread's file I/O since its last [`reset_iostats_context`]
/// (RocksDB's `IOStatsContext`): reads and writes of the database's files
/// on the operating system's filesystem ([`crate::fs::PosixFs`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct IoStatsContext {
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Time reading.
    pub read_nanos: u64,
    /// Time writing.
    pub write_nanos: u64,
    /// Time syncing (`fsync`, `fdatasync`).
    pub fsync_nanos: u64,
}

thread_local! {
    static LEVEL: Cell<PerfLevel> = const { Cell::new(PerfLevel::Disable) };
    static CONTEXT: RefCell<PerfContext> = RefCell::new(PerfContext::default());
    static IOSTATS: RefCell<IoStatsContext> = RefCell::new(IoStatsContext::default());
}

/// Sets what the calling thread counts from now on.
pub fn set_perf_level(level: PerfLevel) {
    LEVEL.with(|l| l.set(level));
}

/// What the calling thread counts.
pub fn perf_level() -> PerfLevel {
    LEVEL.with(Cell::get)
}

/// A copy of the calling thread's counters.
pub fn perf_context() -> PerfContext {
    CONTEXT.with(|c| c.borrow().clone())
}

/// Sets the calling thread's counters to zero.
pub fn reset_perf_context() {
    CONTEXT.with(|c| *c.borrow_mut() = PerfContext::default());
}

/// A copy of the calling thread's file I/O counters.
pub fn iostats_context() -> IoStatsContext {
    IOSTATS.with(|c| c.borrow().clone())
}

/// Sets the calling thread's file I/O counters to zero.
pub fn reset_iostats_context() {
    IOSTATS.with(|c| *c.borrow_mut() = IoStatsContext::default());
}

macro_rules! report_fields {
    ($out:expr, $self:expr, $exclude_zero:expr, $($field:ident),* $(,)?) => {
        $(
            if !$exclude_zero || $self.$field != 0 {
                if !$out.is_empty() {
                    $out.push_str(", ");
                }
                let _ = write!($out, "{} = {}", stringify!($field), $self.$field);
            }
        )*
    };
}

impl PerfContext {
    /// The counters as RocksDB's `PerfContext::ToString` writes them
    /// (`name = value, ...`), leaving out those at zero when
    /// `exclude_zero`.
    pub fn report(&self, exclude_zero: bool) -> String {
        let mut out = String::new();
        report_fields!(
            out,
            self,
            exclude_zero,
            block_cache_hit_count,
            block_cache_index_hit_count,
            block_cache_filter_hit_count,
            block_cache_miss_count,
            secondary_cache_hit_count,
            block_read_count,
            block_read_byte,
            block_read_time,
            block_checksum_time,
            block_decompress_time,
            bloom_sst_hit_count,
            bloom_sst_miss_count,
            get_count,
            get_read_bytes,
            get_snapshot_time,
            get_from_memtable_count,
            get_from_memtable_time,
            get_from_output_files_time,
            iter_seek_count,
            iter_next_count,
            iter_prev_count,
            iter_read_bytes,
            internal_key_skipped_count,
            internal_delete_skipped_count,
            internal_recent_skipped_count,
            write_group_count,
            write_wal_time,
            write_memtable_time,
            write_delay_time,
        );
        out
    }
}

impl IoStatsContext {
    /// The counters as RocksDB's `IOStatsContext::ToString` writes them,
    /// leaving out those at zero when `exclude_zero`.
    pub fn report(&self, exclude_zero: bool) -> String {
        let mut out = String::new();
        report_fields!(out, self, exclude_zero, bytes_read, bytes_written, read_nanos, write_nanos, fsync_nanos);
        out
    }
}

/// Whether the calling thread counts.
#[inline]
pub(crate) fn counting() -> bool {
    LEVEL.with(Cell::get) >= PerfLevel::EnableCount
}

/// Whether the calling thread times.
#[inline]
pub(crate) fn timing() -> bool {
    LEVEL.with(Cell::get) >= PerfLevel::EnableTimeExceptForMutex
}

/// Applies `f` to the calling thread's counters when it counts.
#[inline]
pub(crate) fn count(f: impl FnOnce(&mut PerfContext)) {
    if counting() {
        CONTEXT.with(|c| f(&mut c.borrow_mut()));
    }
}

/// Applies `f` to the calling thread's file I/O counters when it counts.
#[inline]
pub(crate) fn count_io(f: impl FnOnce(&mut IoStatsContext)) {
    if counting() {
        IOSTATS.with(|c| f(&mut c.borrow_mut()));
    }
}

/// A step being timed: started only when the calling thread times.
pub(crate) struct PerfTimer(Option<Instant>);

impl PerfTimer {
    #[inline]
    pub(crate) fn start() -> PerfTimer {
        PerfTimer(timing().then(Instant::now))
    }

    /// Nanoseconds since the start, if timed.
    #[inline]
    fn elapsed(&self) -> Option<u64> {
        self.0.map(|t| t.elapsed().as_nanos() as u64)
    }

    /// Adds the time since the start to the counter `field` picks.
    #[inline]
    pub(crate) fn stop(self, field: impl FnOnce(&mut PerfContext) -> &mut u64) {
        if let Some(nanos) = self.elapsed() {
            CONTEXT.with(|c| *field(&mut c.borrow_mut()) += nanos);
        }
    }

    /// Adds the time since the start to the file I/O counter `field` picks.
    #[inline]
    pub(crate) fn stop_io(self, field: impl FnOnce(&mut IoStatsContext) -> &mut u64) {
        if let Some(nanos) = self.elapsed() {
            IOSTATS.with(|c| *field(&mut c.borrow_mut()) += nanos);
        }
    }
}

/// Adds `nanos` to the counter `field` picks when the calling thread times.
#[inline]
pub(crate) fn add_time(field: impl FnOnce(&mut PerfContext) -> &mut u64, nanos: u64) {
    if timing() {
        CONTEXT.with(|c| *field(&mut c.borrow_mut()) += nanos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_gate_counts_and_times_per_thread() {
        set_perf_level(PerfLevel::Disable);
        reset_perf_context();
        count(|c| c.get_count += 1);
        PerfTimer::start().stop(|c| &mut c.get_snapshot_time);
        assert_eq!(perf_context(), PerfContext::default(), "nothing counted while disabled");

        set_perf_level(PerfLevel::EnableCount);
        count(|c| c.get_count += 1);
        let t = PerfTimer::start();
        assert!(t.0.is_none(), "counts only: no clock read");
        t.stop(|c| &mut c.get_snapshot_time);
        assert_eq!((perf_context().get_count, perf_context().get_snapshot_time), (1, 0));

        set_perf_level(PerfLevel::EnableTime);
        let t = PerfTimer::start();
        assert!(t.0.is_some());
        add_time(|c| &mut c.write_delay_time, 7);
        assert_eq!(perf_context().write_delay_time, 7);

        // Another thread has its own level and counters.
        std::thread::spawn(|| {
            assert_eq!(perf_level(), PerfLevel::Disable);
            count(|c| c.get_count += 10);
            assert_eq!(perf_context().get_count, 0);
        })
        .join()
        .unwrap();
        assert_eq!(perf_context().get_count, 1);
        reset_perf_context();
        assert_eq!(perf_context(), PerfContext::default());
        set_perf_level(PerfLevel::Disable);
    }

    #[test]
    fn reports_name_the_counters_as_rocksdb_does() {
        let ctx = PerfContext { block_read_count: 3, get_count: 2, ..PerfContext::default() };
        assert_eq!(ctx.report(true), "block_read_count = 3, get_count = 2");
        assert!(ctx.report(false).starts_with("block_cache_hit_count = 0, "));
        let io = IoStatsContext { bytes_read: 5, ..IoStatsContext::default() };
        assert_eq!(io.report(true), "bytes_read = 5");
    }

    #[test]
    fn rocksdb_numbers_map_to_levels() {
        assert_eq!(PerfLevel::from_number(1), Some(PerfLevel::Disable));
        assert_eq!(PerfLevel::from_number(2), Some(PerfLevel::EnableCount));
        assert_eq!(PerfLevel::from_number(5), Some(PerfLevel::EnableTimeExceptForMutex));
        assert_eq!(PerfLevel::from_number(6), Some(PerfLevel::EnableTime));
        assert_eq!(PerfLevel::from_number(9), None);
    }
}
