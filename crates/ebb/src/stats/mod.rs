//! Counters the engine keeps about itself: what `ebb.stats`, `DbMetrics` and
//! the tuner read.
//!
//! Thread safety: lock-free atomics for the hot counters; per-level compaction
//! figures behind a mutex taken once per finished job.

pub mod histogram;

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

pub use histogram::Histogram;

/// Latency histograms kept when `Options::statistics` is on (RocksDB names).
#[derive(Default)]
pub struct Histograms {
    /// `rocksdb.db.get.micros`: point reads.
    pub get_micros: Histogram,
    /// `rocksdb.db.write.micros`: writes, from the call to its return.
    pub write_micros: Histogram,
    /// `rocksdb.db.flush.micros`: flush jobs.
    pub flush_micros: Histogram,
    /// `rocksdb.compaction.times.micros`: compaction jobs.
    pub compaction_micros: Histogram,
    /// `rocksdb.db.write.stall`: each stall's length.
    pub stall_micros: Histogram,
}

/// Why writers were stalled (RocksDB's stall causes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StallCause {
    /// Writes delayed: L0 file count at or over `level0_slowdown_writes_trigger`.
    L0Slowdown,
    /// Writes stopped: L0 file count at or over `level0_stop_writes_trigger`.
    L0Stop,
    /// Writes stopped: every memtable is full and waiting for flush.
    MemtableLimit,
    /// Writes delayed: pending compaction bytes over the soft limit.
    PendingCompactionSlowdown,
    /// Writes stopped: pending compaction bytes over the hard limit.
    PendingCompactionStop,
}

impl StallCause {
    /// Every cause, in a fixed order.
    pub const ALL: [StallCause; 5] = [
        StallCause::L0Slowdown,
        StallCause::L0Stop,
        StallCause::MemtableLimit,
        StallCause::PendingCompactionSlowdown,
        StallCause::PendingCompactionStop,
    ];

    /// RocksDB's name for the cause in its stats dump.
    pub fn name(self) -> &'static str {
        match self {
            StallCause::L0Slowdown => "level0_slowdown",
            StallCause::L0Stop => "level0_numfiles",
            StallCause::MemtableLimit => "memtable_compaction",
            StallCause::PendingCompactionSlowdown => "slowdown_for_pending_compaction_bytes",
            StallCause::PendingCompactionStop => "stop_for_pending_compaction_bytes",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Compaction figures of one output level (a row of the `ebb.stats` table).
#[derive(Debug, Clone, Default)]
pub struct LevelCompactionStats {
    /// Bytes read from the input level.
    pub bytes_read_level: u64,
    /// Bytes read from the output level.
    pub bytes_read_next: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Bytes moved by trivial moves.
    pub bytes_moved: u64,
    /// Seconds spent.
    pub micros: u64,
    /// Jobs finished.
    pub count: u64,
    /// Input records.
    pub keys_in: u64,
    /// Records dropped.
    pub keys_dropped: u64,
}

/// How many compaction reasons there are (`events::CompactionReason::ALL`),
/// the length of the per-reason counters.
pub const COMPACTION_REASONS: usize = 13;

/// Engine counters.
pub struct Stats {
    /// When the database was opened.
    pub started: Instant,
    /// Write calls.
    pub user_writes: AtomicU64,
    /// Keys written.
    pub user_keys: AtomicU64,
    /// Bytes of keys and values written.
    pub user_bytes: AtomicU64,
    /// Write groups committed (one WAL record each).
    pub write_groups: AtomicU64,
    /// WAL bytes appended.
    pub wal_bytes: AtomicU64,
    /// WAL records appended.
    pub wal_writes: AtomicU64,
    /// WAL syncs.
    pub wal_syncs: AtomicU64,
    /// Bytes written by flushes.
    pub flush_bytes: AtomicU64,
    /// Flushes finished.
    pub flushes: AtomicU64,
    /// Memtable switches forced because the live WALs exceeded
    /// `max_total_wal_size` (RocksDB flush reason `kWalFull`).
    pub wal_full_flushes: AtomicU64,
    /// Bytes read by compactions.
    pub compaction_bytes_read: AtomicU64,
    /// Bytes written by compactions.
    pub compaction_bytes_written: AtomicU64,
    /// Compactions finished that moved files without rewriting them.
    pub trivial_moves: AtomicU64,
    /// L0→L0 compactions finished.
    pub intra_l0_compactions: AtomicU64,
    /// Compactions finished that were split into subcompactions.
    pub split_compactions: AtomicU64,
    /// Subcompactions run (one per key range).
    pub subcompactions: AtomicU64,
    /// Compactions cancelled.
    pub cancelled_compactions: AtomicU64,
    /// Bytes written to blob files by flushes and compactions
    /// (`rocksdb.blobdb.blob.file.bytes.written`).
    pub blob_file_bytes_written: AtomicU64,
    /// Bytes of blob records read, by reads and by garbage collection
    /// (`rocksdb.blobdb.blob.file.bytes.read`).
    pub blob_file_bytes_read: AtomicU64,
    /// Blob files written and synced (`rocksdb.blobdb.blob.file.synced`).
    pub blob_files_synced: AtomicU64,
    /// Blobs relocated by garbage collection (`rocksdb.blobdb.gc.num.keys.relocated`).
    pub blob_gc_keys_relocated: AtomicU64,
    /// Bytes of the blobs relocated (`rocksdb.blobdb.gc.bytes.relocated`).
    pub blob_gc_bytes_relocated: AtomicU64,
    /// Compactions finished, per reason (index = `CompactionReason::index`).
    pub compactions_by_reason: [AtomicU64; COMPACTION_REASONS],
    /// Microseconds stalled, per cause.
    stall_micros: [AtomicU64; 5],
    /// Stall events, per cause.
    stall_count: [AtomicU64; 5],
    /// Per output level compaction figures (index = level; flushes at 0).
    pub levels: Mutex<Vec<LevelCompactionStats>>,
    /// Counters at the previous `ebb.stats` dump.
    last_dump: Mutex<DumpMark>,
    /// Point-read counters, striped per thread.
    pub reads: ReadCounters,
    /// Latency histograms; `None` unless `Options::statistics` is on.
    pub histograms: Option<Histograms>,
}

impl Stats {
    /// Zeroed counters for a database with `num_levels` levels, with latency
    /// histograms when `histograms` is set.
    pub fn with_histograms(num_levels: usize, histograms: bool) -> Self {
        let mut s = Stats::new(num_levels);
        if histograms {
            s.histograms = Some(Histograms::default());
        }
        s
    }

    /// Zeroed counters for a database with `num_levels` levels.
    pub fn new(num_levels: usize) -> Self {
        Stats {
            started: Instant::now(),
            user_writes: AtomicU64::new(0),
            user_keys: AtomicU64::new(0),
            user_bytes: AtomicU64::new(0),
            write_groups: AtomicU64::new(0),
            wal_bytes: AtomicU64::new(0),
            wal_writes: AtomicU64::new(0),
            wal_syncs: AtomicU64::new(0),
            flush_bytes: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
            wal_full_flushes: AtomicU64::new(0),
            compaction_bytes_read: AtomicU64::new(0),
            compaction_bytes_written: AtomicU64::new(0),
            trivial_moves: AtomicU64::new(0),
            intra_l0_compactions: AtomicU64::new(0),
            split_compactions: AtomicU64::new(0),
            subcompactions: AtomicU64::new(0),
            cancelled_compactions: AtomicU64::new(0),
            blob_file_bytes_written: AtomicU64::new(0),
            blob_file_bytes_read: AtomicU64::new(0),
            blob_files_synced: AtomicU64::new(0),
            blob_gc_keys_relocated: AtomicU64::new(0),
            blob_gc_bytes_relocated: AtomicU64::new(0),
            compactions_by_reason: std::array::from_fn(|_| AtomicU64::new(0)),
            stall_micros: Default::default(),
            stall_count: Default::default(),
            levels: Mutex::new(vec![LevelCompactionStats::default(); num_levels]),
            last_dump: Mutex::new(DumpMark::default()),
            reads: ReadCounters::default(),
            histograms: None,
        }
    }

    /// A start time for [`Stats::time_since`]: read from the clock only when
    /// histograms are on (a point read or write does not pay for the clock
    /// otherwise).
    pub fn start_timer(&self) -> Option<Instant> {
        self.histograms.is_some().then(Instant::now)
    }

    /// Records the time since `start` (from [`Stats::start_timer`]) in the
    /// chosen histogram.
    pub fn time_since(&self, pick: impl Fn(&Histograms) -> &Histogram, start: Option<Instant>) {
        if let (Some(h), Some(start)) = (&self.histograms, start) {
            pick(h).record(start.elapsed().as_micros() as u64);
        }
    }

    /// Records a latency in the chosen histogram, when histograms are on.
    pub fn time(&self, pick: impl Fn(&Histograms) -> &Histogram, micros: u64) {
        if let Some(h) = &self.histograms {
            pick(h).record(micros);
        }
    }

    /// RocksDB's `Statistics::ToString()` layout: one line per ticker
    /// (`rocksdb.NAME COUNT : N`) and per histogram (`rocksdb.NAME P50 : x P95 : x
    /// P99 : x P100 : x COUNT : n SUM : s`).
    /// `block_cache` holds the cache's tickers (`rocksdb.block.cache.*`),
    /// which the cache layer above this one counts.
    pub fn statistics_text(&self, block_cache: &[(String, u64)]) -> String {
        let mut out = String::new();
        for (name, v) in block_cache {
            out.push_str(&format!("{name} COUNT : {v}\n"));
        }
        let stall: u64 = self.total_stall_micros();
        let tickers: [(&str, u64); 23] = [
            ("rocksdb.bloom.filter.useful", self.reads.bloom_useful()),
            ("rocksdb.bloom.filter.prefix.checked", self.reads.prefix_checked()),
            ("rocksdb.bloom.filter.prefix.useful", self.reads.prefix_useful()),
            ("ebb.range.tombstone.skips", self.reads.range_skips()),
            ("rocksdb.number.keys.written", read(&self.user_keys)),
            ("rocksdb.number.keys.read", self.reads.keys_read()),
            ("rocksdb.number.keys.found", self.reads.keys_found()),
            ("rocksdb.number.db.seek", self.reads.seeks()),
            ("rocksdb.bytes.written", read(&self.user_bytes)),
            ("rocksdb.bytes.read", self.reads.bytes_read()),
            ("rocksdb.wal.bytes", read(&self.wal_bytes)),
            ("rocksdb.wal.synced", read(&self.wal_syncs)),
            ("rocksdb.write.self", read(&self.write_groups)),
            ("rocksdb.compact.read.bytes", read(&self.compaction_bytes_read)),
            ("rocksdb.compact.write.bytes", read(&self.compaction_bytes_written)),
            ("rocksdb.flush.write.bytes", read(&self.flush_bytes)),
            ("rocksdb.stall.micros", stall),
            ("rocksdb.compaction.cancelled", read(&self.cancelled_compactions)),
            ("rocksdb.blobdb.blob.file.bytes.written", read(&self.blob_file_bytes_written)),
            ("rocksdb.blobdb.blob.file.bytes.read", read(&self.blob_file_bytes_read)),
            ("rocksdb.blobdb.blob.file.synced", read(&self.blob_files_synced)),
            ("rocksdb.blobdb.gc.num.keys.relocated", read(&self.blob_gc_keys_relocated)),
            ("rocksdb.blobdb.gc.bytes.relocated", read(&self.blob_gc_bytes_relocated)),
        ];
        for (name, v) in tickers {
            out.push_str(&format!("{name} COUNT : {v}\n"));
        }

        if let Some(h) = &self.histograms {
            for (name, hist) in [
                ("rocksdb.db.get.micros", &h.get_micros),
                ("rocksdb.db.write.micros", &h.write_micros),
                ("rocksdb.db.flush.micros", &h.flush_micros),
                ("rocksdb.compaction.times.micros", &h.compaction_micros),
                ("rocksdb.db.write.stall", &h.stall_micros),
            ] {
                let s = hist.summary();
                out.push_str(&format!(
                    "{name} P50 : {:.6} P95 : {:.6} P99 : {:.6} P100 : {:.6} COUNT : {} SUM : {}\n",
                    s.p50, s.p95, s.p99, s.max as f64, s.count, s.sum
                ));
            }
        }
        out
    }

    /// Adds `micros` of stall for `cause`.
    pub fn record_stall(&self, cause: StallCause, micros: u64) {
        crate::perf::add_time(|c| &mut c.write_delay_time, micros.saturating_mul(1000));
        self.time(|h| &h.stall_micros, micros);
        self.stall_micros[cause.index()].fetch_add(micros, Ordering::Relaxed);
        self.stall_count[cause.index()].fetch_add(1, Ordering::Relaxed);
    }

    /// Microseconds stalled for `cause`.
    pub fn stall_micros(&self, cause: StallCause) -> u64 {
        self.stall_micros[cause.index()].load(Ordering::Relaxed)
    }

    /// Stall events for `cause`.
    pub fn stall_count(&self, cause: StallCause) -> u64 {
        self.stall_count[cause.index()].load(Ordering::Relaxed)
    }

    /// Microseconds stalled, all causes.
    pub fn total_stall_micros(&self) -> u64 {
        StallCause::ALL.iter().map(|c| self.stall_micros(*c)).sum()
    }

    /// Adds a finished job's figures to `level`.
    pub fn add_level(&self, level: usize, add: &LevelCompactionStats) {
        let mut levels = self.levels.lock();
        if levels.len() <= level {
            levels.resize(level + 1, LevelCompactionStats::default());
        }
        add_into(&mut levels[level], add);
    }
}

/// Shorthand for a relaxed atomic add.
pub fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// Rows of striped counters; threads beyond this share rows.
const STRIPES: usize = 16;

/// The stripe the calling thread adds to: threads take rows in turn, so up
/// to [`STRIPES`] threads each write their own cache lines.
fn stripe_of_this_thread() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static STRIPE: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    STRIPE.with(|s| {
        if s.get() == usize::MAX {
            s.set(NEXT.fetch_add(1, Ordering::Relaxed) % STRIPES);
        }
        s.get()
    })
}

/// One thread group's row of `N` counters, alone in its cache lines.
#[repr(align(128))]
struct StripeRow<const N: usize>([AtomicU64; N]);

/// `N` counters that many threads bump: one shared atomic per counter would
/// be written by every thread and bounce between cores, so each thread adds
/// to its own row and a read sums the rows (exact once updates stop; a read
/// during updates may miss the latest ones).
pub(crate) struct Striped<const N: usize> {
    rows: [StripeRow<N>; STRIPES],
}

impl<const N: usize> Default for Striped<N> {
    fn default() -> Self {
        Striped { rows: std::array::from_fn(|_| StripeRow(std::array::from_fn(|_| AtomicU64::new(0)))) }
    }
}

impl<const N: usize> Striped<N> {
    /// Adds `n` to counter `i` in the calling thread's row.
    pub(crate) fn add(&self, i: usize, n: u64) {
        self.rows[stripe_of_this_thread()].0[i].fetch_add(n, Ordering::Relaxed);
    }

    /// Counter `i` over all rows.
    pub(crate) fn sum(&self, i: usize) -> u64 {
        self.rows.iter().map(|r| r.0[i].load(Ordering::Relaxed)).sum()
    }

    /// Every counter over all rows.
    pub(crate) fn sums(&self) -> [u64; N] {
        std::array::from_fn(|i| self.sum(i))
    }
}

const KEYS_READ: usize = 0;
const KEYS_FOUND: usize = 1;
const BYTES_READ: usize = 2;
const BLOOM_USEFUL: usize = 3;
const SEEKS: usize = 4;
const PREFIX_CHECKED: usize = 5;
const PREFIX_USEFUL: usize = 6;
const RANGE_SKIPS: usize = 7;

/// The counters every point read and iterator seek bumps (RocksDB
/// `NUMBER_KEYS_READ`, `NUMBER_KEYS_FOUND`, `BYTES_READ`,
/// `BLOOM_FILTER_USEFUL`, `NUMBER_DB_SEEK`), striped per thread.
#[derive(Default)]
pub struct ReadCounters(Striped<8>);

impl ReadCounters {
    /// Counts a point read, and the value it returned if any (in the
    /// calling thread's `PerfContext` too).
    pub fn record_get(&self, found: Option<usize>) {
        crate::perf::count(|c| {
            c.get_count += 1;
            c.get_read_bytes += found.unwrap_or(0) as u64;
        });
        self.0.add(KEYS_READ, 1);
        if let Some(bytes) = found {
            self.0.add(KEYS_FOUND, 1);
            self.0.add(BYTES_READ, bytes as u64);
        }
    }

    /// Counts an iterator seek (any of the four).
    pub fn record_seek(&self) {
        self.0.add(SEEKS, 1);
    }

    /// Iterator seeks.
    pub fn seeks(&self) -> u64 {
        self.0.sum(SEEKS)
    }

    /// Counts a table a bloom filter ruled out.
    pub fn record_bloom_useful(&self) {
        self.0.add(BLOOM_USEFUL, 1);
    }

    /// Counts tables asked whether they hold a prefix seek's prefix, and
    /// those whose filter said no (RocksDB `BLOOM_FILTER_PREFIX_CHECKED`,
    /// `BLOOM_FILTER_PREFIX_USEFUL`).
    pub fn record_prefix_checks(&self, checked: u64, useful: u64) {
        self.0.add(PREFIX_CHECKED, checked);
        self.0.add(PREFIX_USEFUL, useful);
    }

    /// Counts an iterator's skip of older sources past the keys a range
    /// tombstone deletes (seeks instead of visiting them).
    pub fn record_range_skip(&self) {
        self.0.add(RANGE_SKIPS, 1);
    }

    /// Skips counted by [`ReadCounters::record_range_skip`].
    pub fn range_skips(&self) -> u64 {
        self.0.sum(RANGE_SKIPS)
    }

    /// Tables asked about a prefix seek's prefix.
    pub fn prefix_checked(&self) -> u64 {
        self.0.sum(PREFIX_CHECKED)
    }

    /// Tables a prefix bloom filter ruled out for a prefix seek.
    pub fn prefix_useful(&self) -> u64 {
        self.0.sum(PREFIX_USEFUL)
    }

    /// Point reads.
    pub fn keys_read(&self) -> u64 {
        self.0.sum(KEYS_READ)
    }

    /// Point reads that found a value.
    pub fn keys_found(&self) -> u64 {
        self.0.sum(KEYS_FOUND)
    }

    /// Bytes of values returned by point reads.
    pub fn bytes_read(&self) -> u64 {
        self.0.sum(BYTES_READ)
    }

    /// Tables a bloom filter ruled out for a point read.
    pub fn bloom_useful(&self) -> u64 {
        self.0.sum(BLOOM_USEFUL)
    }
}

/// Shorthand for a relaxed atomic load.
pub fn read(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// Cumulative counters at the previous `ebb.stats` dump, for the interval lines.
#[derive(Debug, Clone, Default)]
pub struct DumpMark {
    secs: f64,
    writes: u64,
    keys: u64,
    groups: u64,
    user_bytes: u64,
    wal_writes: u64,
    wal_syncs: u64,
    wal_bytes: u64,
    stall_micros: u64,
    comp_written: u64,
    comp_read: u64,
    comp_micros: u64,
    flush_bytes: u64,
    levels: Vec<LevelCompactionStats>,
}

/// RocksDB's `NumberToHumanString`: 9999, 10K, 10M, 10G.
fn human_count(n: u64) -> String {
    if n < 10_000 {
        n.to_string()
    } else if n < 10_000_000 {
        format!("{}K", n / 1000)
    } else if n < 10_000_000_000 {
        format!("{}M", n / 1_000_000)
    } else {
        format!("{}G", n / 1_000_000_000)
    }
}

/// RocksDB's `BytesToHumanString` for the Size column.
fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KB", "MB", "GB", "TB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.2} {}", UNITS[u])
}

fn hms(micros: u64) -> String {
    let secs = micros as f64 / 1e6;
    let h = (secs / 3600.0) as u64;
    let m = ((secs - h as f64 * 3600.0) / 60.0) as u64;
    let s = secs - h as f64 * 3600.0 - m as f64 * 60.0;
    format!("{h:02}:{m:02}:{s:06.3}")
}

const GB: f64 = 1024.0 * 1024.0 * 1024.0;
const MB: f64 = 1024.0 * 1024.0;

/// Level shapes for the stats table: files, bytes, score per level.
pub struct LevelShape {
    /// Files per level.
    pub files: Vec<usize>,
    /// Files being compacted per level.
    pub compacting: Vec<usize>,
    /// Bytes per level.
    pub bytes: Vec<u64>,
    /// Compaction score per level.
    pub scores: Vec<f64>,
    /// Blob files listed: count, bytes, garbage bytes.
    pub blob_files: (usize, u64, u64),
}

impl Stats {
    /// RocksDB's `rocksdb.stats` text: the compaction table, then the DB stats
    /// with cumulative and interval lines. The interval runs from the previous
    /// call, as RocksDB's does. The thesis's parser (seed 000 Appendix A) reads it.
    pub fn format(&self, shape: &LevelShape) -> String {
        let now = self.started.elapsed().as_secs_f64();
        let levels = self.levels.lock().clone();
        let flush_bytes = read(&self.flush_bytes);
        let comp_written = levels.iter().map(|l| l.bytes_written).sum::<u64>();
        let comp_read = levels.iter().map(|l| l.bytes_read_level + l.bytes_read_next).sum::<u64>();
        let comp_micros = levels.iter().map(|l| l.micros).sum::<u64>();
        let cur = DumpMark {
            secs: now,
            writes: read(&self.user_writes),
            keys: read(&self.user_keys),
            groups: read(&self.write_groups),
            user_bytes: read(&self.user_bytes),
            wal_writes: read(&self.wal_writes),
            wal_syncs: read(&self.wal_syncs),
            wal_bytes: read(&self.wal_bytes),
            stall_micros: self.total_stall_micros(),
            comp_written,
            comp_read,
            comp_micros,
            flush_bytes,
            levels: levels.clone(),
        };
        let prev = std::mem::replace(&mut *self.last_dump.lock(), cur.clone());
        let mut out = String::new();
        out.push_str("\n** Compaction Stats [default] **\n");
        out.push_str(
            "Level    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec) Comp(cnt) Avg(sec) KeyIn KeyDrop\n",
        );
        out.push_str(&"-".repeat(150));
        out.push('\n');
        let mut sum = LevelCompactionStats::default();
        for (l, ls) in levels.iter().enumerate() {
            let files = shape.files.get(l).copied().unwrap_or(0);
            if files == 0 && ls.count == 0 {
                continue;
            }
            add_into(&mut sum, ls);
            out.push_str(&level_row(
                &format!("L{l}"),
                files,
                shape.compacting.get(l).copied().unwrap_or(0),
                shape.bytes.get(l).copied().unwrap_or(0),
                shape.scores.get(l).copied().unwrap_or(0.0),
                ls,
                flush_bytes,
                l == 0,
            ));
        }
        let total_files: usize = shape.files.iter().sum();
        let total_bytes: u64 = shape.bytes.iter().sum();
        out.push_str(&level_row("Sum", total_files, 0, total_bytes, 0.0, &sum, read(&self.user_bytes), false));
        let mut int = LevelCompactionStats::default();
        for (i, ls) in levels.iter().enumerate() {
            let mut d = ls.clone();
            if let Some(p) = prev.levels.get(i) {
                sub_from(&mut d, p);
            }
            add_into(&mut int, &d);
        }
        out.push_str(&level_row("Int", 0, 0, 0, 0.0, &int, cur.user_bytes.saturating_sub(prev.user_bytes), false));
        // RocksDB's line, where its stats put it.
        let (blob_count, blob_bytes, blob_garbage) = shape.blob_files;
        let live = blob_bytes.saturating_sub(blob_garbage);
        out.push_str(&format!(
            "\nBlob file count: {blob_count}, total size: {:.1} GB, garbage size: {:.1} GB, space amp: {:.1}\n\n",
            blob_bytes as f64 / GB,
            blob_garbage as f64 / GB,
            if live > 0 { blob_bytes as f64 / live as f64 } else { 0.0 }
        ));
        let interval = (now - prev.secs).max(1e-9);
        let uptime = now.max(1e-9);
        out.push_str(&format!("Uptime(secs): {now:.1} total, {interval:.1} interval\n"));
        out.push_str(&format!(
            "Flush(GB): cumulative {:.3}, interval {:.3}\n",
            flush_bytes as f64 / GB,
            // Flushes alone, as the cumulative figure: L0's written bytes
            // also count compactions into L0 (intra-L0, universal).
            flush_bytes.saturating_sub(prev.flush_bytes) as f64 / GB
        ));
        out.push_str(&format!(
            "Cumulative compaction: {:.2} GB write, {:.2} MB/s write, {:.2} GB read, {:.2} MB/s read, {:.1} seconds\n",
            comp_written as f64 / GB,
            comp_written as f64 / MB / uptime,
            comp_read as f64 / GB,
            comp_read as f64 / MB / uptime,
            comp_micros as f64 / 1e6
        ));
        let (iw, ir) = (comp_written - prev.comp_written.min(comp_written), comp_read - prev.comp_read.min(comp_read));
        out.push_str(&format!(
            "Interval compaction: {:.2} GB write, {:.2} MB/s write, {:.2} GB read, {:.2} MB/s read, {:.1} seconds\n",
            iw as f64 / GB,
            iw as f64 / MB / interval,
            ir as f64 / GB,
            ir as f64 / MB / interval,
            comp_micros.saturating_sub(prev.comp_micros) as f64 / 1e6
        ));
        out.push_str("Stalls(count): ");
        let parts: Vec<String> =
            StallCause::ALL.iter().map(|c| format!("{} {}", self.stall_count(*c), c.name())).collect();
        out.push_str(&parts.join(", "));
        out.push_str("\n\n** DB Stats **\n");
        out.push_str(&format!("Uptime(secs): {now:.1} total, {interval:.1} interval\n"));
        out.push_str(&writes_lines("Cumulative", &cur, &DumpMark::default(), uptime));
        out.push_str(&writes_lines("Interval", &cur, &prev, interval));
        out
    }
}

fn writes_lines(label: &str, cur: &DumpMark, base: &DumpMark, secs: f64) -> String {
    let writes = cur.writes - base.writes.min(cur.writes);
    let keys = cur.keys - base.keys.min(cur.keys);
    let groups = cur.groups - base.groups.min(cur.groups);
    let bytes = cur.user_bytes - base.user_bytes.min(cur.user_bytes);
    let wal_writes = cur.wal_writes - base.wal_writes.min(cur.wal_writes);
    let wal_syncs = cur.wal_syncs - base.wal_syncs.min(cur.wal_syncs);
    let wal_bytes = cur.wal_bytes - base.wal_bytes.min(cur.wal_bytes);
    let stall = cur.stall_micros - base.stall_micros.min(cur.stall_micros);
    let ingest = if label == "Cumulative" {
        format!("{:.2} GB", bytes as f64 / GB)
    } else {
        format!("{:.2} MB", bytes as f64 / MB)
    };
    let wal_written = format!("{:.2} GB", wal_bytes as f64 / GB);
    format!(
        "{label} writes: {} writes, {} keys, {} commit groups, {:.1} writes per commit group, ingest: {ingest}, {:.2} MB/s\n\
         {label} WAL: {} writes, {} syncs, {:.2} writes per sync, written: {wal_written}, {:.2} MB/s\n\
         {label} stall: {} H:M:S, {:.1} percent\n",
        human_count(writes),
        human_count(keys),
        human_count(groups),
        writes as f64 / groups.max(1) as f64,
        bytes as f64 / MB / secs,
        human_count(wal_writes),
        human_count(wal_syncs),
        wal_writes as f64 / wal_syncs.max(1) as f64,
        wal_bytes as f64 / MB / secs,
        hms(stall),
        (stall as f64 / 1e6 / secs * 100.0).min(100.0),
    )
}

fn add_into(sum: &mut LevelCompactionStats, l: &LevelCompactionStats) {
    sum.bytes_read_level += l.bytes_read_level;
    sum.bytes_read_next += l.bytes_read_next;
    sum.bytes_written += l.bytes_written;
    sum.bytes_moved += l.bytes_moved;
    sum.micros += l.micros;
    sum.count += l.count;
    sum.keys_in += l.keys_in;
    sum.keys_dropped += l.keys_dropped;
}

fn sub_from(d: &mut LevelCompactionStats, p: &LevelCompactionStats) {
    d.bytes_read_level = d.bytes_read_level.saturating_sub(p.bytes_read_level);
    d.bytes_read_next = d.bytes_read_next.saturating_sub(p.bytes_read_next);
    d.bytes_written = d.bytes_written.saturating_sub(p.bytes_written);
    d.bytes_moved = d.bytes_moved.saturating_sub(p.bytes_moved);
    d.micros = d.micros.saturating_sub(p.micros);
    d.count = d.count.saturating_sub(p.count);
    d.keys_in = d.keys_in.saturating_sub(p.keys_in);
    d.keys_dropped = d.keys_dropped.saturating_sub(p.keys_dropped);
}

#[allow(clippy::too_many_arguments)]
fn level_row(
    name: &str,
    files: usize,
    compacting: usize,
    bytes: u64,
    score: f64,
    s: &LevelCompactionStats,
    ingest_bytes: u64,
    is_l0: bool,
) -> String {
    let read = s.bytes_read_level + s.bytes_read_next;
    // W-Amp: bytes written over bytes that came in (RocksDB: over Rn, or over
    // user ingest for L0 and Sum rows).
    let base = if is_l0 || name == "Sum" || name == "Int" { ingest_bytes } else { s.bytes_read_level };
    let w_amp = if base > 0 { s.bytes_written as f64 / base as f64 } else { 0.0 };
    let secs = s.micros as f64 / 1e6;
    let rd = if secs > 0.0 { read as f64 / MB / secs } else { 0.0 };
    let wr = if secs > 0.0 { s.bytes_written as f64 / MB / secs } else { 0.0 };
    let wnew = s.bytes_written.saturating_sub(s.bytes_read_next);
    format!(
        "{name:>5} {files:>6}/{compacting:<3} {:>10} {score:5.1} {:8.1} {:7.1} {:8.1} {:9.1} {:8.1} {:9.1} {w_amp:5.1} {rd:8.1} {wr:8.1} {secs:9.2} {:9} {:8.3} {:>7} {:>7}\n",
        human_bytes(bytes),
        read as f64 / GB,
        s.bytes_read_level as f64 / GB,
        s.bytes_read_next as f64 / GB,
        s.bytes_written as f64 / GB,
        wnew as f64 / GB,
        s.bytes_moved as f64 / GB,
        s.count,
        if s.count > 0 { secs / s.count as f64 } else { 0.0 },
        human_count(s.keys_in),
        human_count(s.keys_dropped),
    )
}

#[cfg(test)]
mod counter_tests {
    use super::*;

    #[test]
    fn striped_read_counters_add_up_across_threads() {
        let c = std::sync::Arc::new(ReadCounters::default());
        // More threads than stripes, so some share a row.
        let threads: Vec<_> = (0..STRIPES as u64 + 4)
            .map(|t| {
                let c = std::sync::Arc::clone(&c);
                std::thread::spawn(move || {
                    for i in 0..1000u64 {
                        c.record_get(if i % 4 == 0 { None } else { Some(t as usize + 1) });
                        if i % 10 == 0 {
                            c.record_bloom_useful();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let n = STRIPES as u64 + 4;
        assert_eq!(c.keys_read(), n * 1000);
        assert_eq!(c.keys_found(), n * 750);
        assert_eq!(c.bytes_read(), (1..=n).map(|b| b * 750).sum::<u64>());
        assert_eq!(c.bloom_useful(), n * 100);
    }
}

#[cfg(test)]
mod format_tests {
    use super::*;

    fn find_all(re: &str, text: &str) -> Vec<String> {
        // A tiny matcher for the thesis's patterns: `PREFIX.*?(\d*\.\d*)\sSUFFIX`
        // on one line, as Python's re.findall would apply them.
        let (prefix, suffix) = re.split_once("|").unwrap();
        let mut out = Vec::new();
        for line in text.lines() {
            let Some(start) = line.find(prefix) else { continue };
            let rest = &line[start + prefix.len()..];
            let bytes = rest.as_bytes();
            'outer: for i in 0..bytes.len() {
                let mut j = i;
                while j < bytes.len() && bytes[j].is_ascii_digit() {
                    j += 1;
                }
                if j >= bytes.len() || bytes[j] != b'.' {
                    continue;
                }
                let mut k = j + 1;
                while k < bytes.len() && bytes[k].is_ascii_digit() {
                    k += 1;
                }
                if rest[k..].starts_with(' ') && rest[k + 1..].starts_with(suffix) {
                    out.push(rest[i..k].to_string());
                    break 'outer;
                }
            }
        }
        out
    }

    #[test]
    fn stats_text_has_every_thesis_series() {
        let s = Stats::new(3);
        bump(&s.user_writes, 12_345);
        bump(&s.user_keys, 12_345);
        bump(&s.write_groups, 12_000);
        bump(&s.user_bytes, 100 << 20);
        bump(&s.wal_writes, 12_000);
        bump(&s.wal_bytes, 101 << 20);
        bump(&s.flush_bytes, 90 << 20);
        s.add_level(
            0,
            &LevelCompactionStats { bytes_written: 90 << 20, count: 3, micros: 500_000, ..Default::default() },
        );
        s.add_level(
            1,
            &LevelCompactionStats {
                bytes_read_level: 60 << 20,
                bytes_read_next: 30 << 20,
                bytes_written: 85 << 20,
                count: 1,
                micros: 900_000,
                ..Default::default()
            },
        );
        s.record_stall(StallCause::L0Slowdown, 250_000);
        let shape = LevelShape {
            files: vec![2, 3, 0],
            compacting: vec![0; 3],
            bytes: vec![1 << 20, 3 << 20, 0],
            scores: vec![0.5, 0.1, 0.0],
            blob_files: (2, 3 << 30, 1 << 30),
        };
        let text = s.format(&shape);
        for (name, re) in [
            ("uptime total", "Uptime(secs)|total"),
            ("uptime interval", "Uptime(secs)|interval"),
            ("interval stall", "Interval stall|percent"),
            ("cumulative stall", "Cumulative stall|percent"),
            ("interval writes", "Interval writes|MB/s"),
            ("cumulative writes", "Cumulative writes|MB/s"),
            ("cumulative compaction", "Cumulative compaction|MB/s"),
            ("interval compaction", "Interval compaction|MB/s"),
        ] {
            assert!(!find_all(re, &text).is_empty(), "{name} not found in:\n{text}");
        }
        assert!(text.contains("12K writes"), "{text}");
        assert!(
            text.contains("Blob file count: 2, total size: 3.0 GB, garbage size: 1.0 GB, space amp: 1.5"),
            "{text}"
        );
        assert!(text
            .contains("Level    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) Wnew(GB) Moved(GB) W-Amp"));
        // The second dump's interval covers only what happened in between.
        bump(&s.user_bytes, 10 << 20);
        let text2 = s.format(&shape);
        let line = text2.lines().find(|l| l.starts_with("Interval writes")).unwrap();
        assert!(line.contains("ingest: 10.00 MB"), "{line}");
        // Flushes: the interval counts flushes since the last dump, never
        // L0's other writes (an intra-L0 compaction here), so it stays
        // within the cumulative figure.
        bump(&s.flush_bytes, 256 << 20);
        s.add_level(0, &LevelCompactionStats { bytes_written: 512 << 20, count: 1, ..Default::default() });
        let text3 = s.format(&shape);
        let line = text3.lines().find(|l| l.starts_with("Flush(GB)")).unwrap();
        assert_eq!(line, "Flush(GB): cumulative 0.338, interval 0.250", "{text3}");
    }
}
