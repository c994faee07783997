//! What a running database reports about itself: [`DbMetrics`] (for
//! programs) and the `ebb.*` properties (`Db::get_property`, including the
//! `ebb.stats` text), read from the database's state and statistics, and
//! the thread that writes `ebb.stats` to the info log periodically.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use super::{DbInner, StallCondition, TuningMetrics};
use crate::stats;
use crate::version::StorageInfoOptions;

/// Figures about a running database, for programs (the same figures `ebb.stats` prints).
#[derive(Debug, Clone, Default)]
pub struct DbMetrics {
    /// Seconds since open.
    pub uptime_secs: f64,
    /// Write calls (batches) accepted.
    pub user_writes: u64,
    /// Keys written (puts and deletes).
    pub user_keys_written: u64,
    /// Bytes of keys and values written by users.
    pub user_bytes_written: u64,
    /// Point reads (`get`, `multi_get` keys) and iterator seeks by users.
    pub user_reads: u64,
    /// Bytes appended to the WAL.
    pub wal_bytes: u64,
    /// WAL syncs.
    pub wal_syncs: u64,
    /// Bytes written by flushes.
    pub flush_bytes_written: u64,
    /// Bytes written by compactions (trivial moves excluded).
    pub compaction_bytes_written: u64,
    /// Bytes read by compactions.
    pub compaction_bytes_read: u64,
    /// Microseconds writers spent stalled (slowed or stopped).
    pub stall_micros: u64,
    /// Files per level.
    pub files_per_level: Vec<usize>,
    /// Bytes per level.
    pub bytes_per_level: Vec<u64>,
    /// Estimated bytes compaction must rewrite to bring every level under its target.
    pub pending_compaction_bytes: u64,
    /// Compactions running now.
    pub running_compactions: usize,
    /// Flushes running now.
    pub running_flushes: usize,
    /// False while automatic compaction is disabled (by option or by the tuner).
    pub compaction_enabled: bool,
    /// Block cache hits.
    pub block_cache_hits: u64,
    /// Block cache misses.
    pub block_cache_misses: u64,
    /// Bytes held by all memtables.
    pub memtable_bytes: u64,
    /// Compaction figures per output level (flushes at L0), as in `ebb.stats`.
    pub level_compaction: Vec<crate::stats::LevelCompactionStats>,
    /// Microseconds stalled per cause, in `StallCause::ALL` order.
    pub stall_micros_by_cause: Vec<u64>,
    /// The write-stall condition now.
    pub stall_condition: Option<StallCondition>,
    /// The adapted delayed write rate, bytes/s (0 when writes are not delayed).
    pub delayed_write_rate: u64,
    /// Flushes finished.
    pub flushes: u64,
    /// Memtable switches forced by `max_total_wal_size` (flush reason WAL full).
    pub wal_full_flushes: u64,
    /// Compactions that moved files without rewriting them.
    pub trivial_moves: u64,
    /// L0→L0 compactions.
    pub intra_l0_compactions: u64,
    /// Compactions split into subcompactions, and the subcompactions they ran.
    pub split_compactions: (u64, u64),
    /// Compactions cancelled.
    pub cancelled_compactions: u64,
    /// Compactions finished per reason, by RocksDB's reason name (FIFO drops included).
    pub compactions_by_reason: Vec<(&'static str, u64)>,
    /// Blob files the current version lists (`rocksdb.num-blob-files`).
    pub blob_files: usize,
    /// Their bytes (`rocksdb.live-blob-file-size`).
    pub blob_file_bytes: u64,
    /// Bytes of their blobs no table refers to (`rocksdb.live-blob-file-garbage-size`).
    pub blob_garbage_bytes: u64,
    /// Bytes written to blob files (`rocksdb.blobdb.blob.file.bytes.written`).
    pub blob_bytes_written: u64,
    /// Bytes of blob records read (`rocksdb.blobdb.blob.file.bytes.read`).
    pub blob_bytes_read: u64,
    /// Blobs relocated by garbage collection (`rocksdb.blobdb.gc.num.keys.relocated`).
    pub blobs_relocated: u64,
    /// What the background tuner is doing.
    pub tuning: TuningMetrics,
}

impl DbInner {
    /// Appends `ebb.stats` to the info log (`LOG`) every
    /// `stats_dump_period_sec` (dynamic), as RocksDB does. A panic ends the
    /// thread and becomes the sticky background error.
    pub(crate) fn stats_dump_loop(self: Arc<Self>) {
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| self.dump_stats_until_shutdown())) {
            let e = self.panic_error("stats dump thread", payload);
            self.set_bg_error(e);
        }
    }

    fn dump_stats_until_shutdown(&self) {
        // The period is on the database's clock (`Options::clock`).
        let clock = Arc::clone(&self.opts().clock);
        let mut last = clock.monotonic();
        loop {
            let period = Duration::from_secs(u64::from(self.opts().stats_dump_period_sec.max(1)));
            {
                let mut st = self.state.lock();
                if st.jobs.is_shutting_down() {
                    return;
                }
                self.work_cv.wait_for(&mut st, clock.real_wait(Duration::from_millis(500)));
                if st.jobs.is_shutting_down() {
                    return;
                }
            }
            if self.opts().stats_dump_period_sec == 0 || clock.monotonic().saturating_sub(last) < period {
                continue;
            }
            last = clock.monotonic();
            if let Some(text) = self.property(0, "ebb.stats") {
                self.info_log.log(super::info_log::Level::Info, &format!("------- DUMPING STATS -------\n{text}"));
            }
        }
    }

    pub(crate) fn metrics(&self) -> DbMetrics {
        self.family_metrics(0)
    }

    /// The database's figures, with those about levels and memtables taken
    /// from column family `cf`.
    fn family_metrics(&self, cf: u32) -> DbMetrics {
        let st = self.state.lock();
        let Some(family) = st.families.get(cf) else { return DbMetrics::default() };
        let opts = self.family_opts(family.data());
        let version = st.versions.version(cf).unwrap_or_default();
        let mut memtable_bytes = family.mem().allocated_bytes() as u64;
        for m in family.imm() {
            memtable_bytes += m.allocated_bytes() as u64;
        }
        let s = &self.stats;
        let (hits, misses) = self.tables.block_cache().map_or((0, 0), |c| c.hits_and_misses());
        DbMetrics {
            uptime_secs: s.started.elapsed().as_secs_f64(),
            user_writes: stats::read(&s.user_writes),
            user_keys_written: stats::read(&s.user_keys),
            user_bytes_written: stats::read(&s.user_bytes),
            user_reads: s.reads.keys_read() + s.reads.seeks(),
            wal_bytes: stats::read(&s.wal_bytes),
            wal_syncs: stats::read(&s.wal_syncs),
            flush_bytes_written: stats::read(&s.flush_bytes),
            compaction_bytes_written: stats::read(&s.compaction_bytes_written),
            compaction_bytes_read: stats::read(&s.compaction_bytes_read),
            stall_micros: s.total_stall_micros(),
            files_per_level: (0..version.num_levels()).map(|l| version.num_files(l)).collect(),
            bytes_per_level: (0..version.num_levels()).map(|l| version.level_bytes(l)).collect(),
            pending_compaction_bytes: version
                .estimate_pending_compaction_bytes(&StorageInfoOptions::from_options(&opts)),
            running_compactions: st.jobs.compactions_running(),
            running_flushes: st.jobs.flushes_running(),
            compaction_enabled: !opts.disable_auto_compactions && !st.jobs.is_paused() && !self.tuning.is_deferred(),
            block_cache_hits: hits,
            block_cache_misses: misses,
            memtable_bytes,
            level_compaction: s.levels.lock().clone(),
            stall_micros_by_cause: crate::stats::StallCause::ALL.iter().map(|c| s.stall_micros(*c)).collect(),
            stall_condition: Some(st.controller.condition()),
            delayed_write_rate: st.controller.rate(),
            flushes: stats::read(&s.flushes),
            wal_full_flushes: stats::read(&s.wal_full_flushes),
            trivial_moves: stats::read(&s.trivial_moves),
            intra_l0_compactions: stats::read(&s.intra_l0_compactions),
            split_compactions: (stats::read(&s.split_compactions), stats::read(&s.subcompactions)),
            cancelled_compactions: stats::read(&s.cancelled_compactions),
            compactions_by_reason: crate::compaction::CompactionReason::ALL
                .iter()
                .map(|r| (r.name(), stats::read(&s.compactions_by_reason[r.index()])))
                .collect(),
            blob_files: version.blob_files.len(),
            blob_file_bytes: version.blob_file_bytes(),
            blob_garbage_bytes: version.blob_files.values().map(|b| b.garbage_bytes).sum(),
            blob_bytes_written: stats::read(&s.blob_file_bytes_written),
            blob_bytes_read: stats::read(&s.blob_file_bytes_read),
            blobs_relocated: stats::read(&s.blob_gc_keys_relocated),
            tuning: self.tuning.snapshot(),
        }
    }

    /// Property `name`; the per-family ones are about column family `cf`.
    pub(crate) fn property(&self, cf: u32, name: &str) -> Option<String> {
        let m = self.family_metrics(cf);
        let family = self.state.lock().families.data(cf)?;
        let name = name.strip_prefix("rocksdb.").map(|n| format!("ebb.{n}")).unwrap_or_else(|| name.to_string());
        if let Some(level) = name.strip_prefix("ebb.num-files-at-level") {
            let l: usize = level.parse().ok()?;
            return m.files_per_level.get(l).map(|n| n.to_string());
        }
        match name.as_str() {
            "ebb.estimate-pending-compaction-bytes" => Some(m.pending_compaction_bytes.to_string()),
            "ebb.num-running-compactions" => Some(m.running_compactions.to_string()),
            "ebb.num-running-flushes" => Some(m.running_flushes.to_string()),
            "ebb.compaction-pending" => {
                let st = self.state.lock();
                let pending = self.pick_compaction(&st, cf, &self.family_opts(&family)).is_some();
                Some(u8::from(pending).to_string())
            }
            "ebb.cur-size-all-mem-tables" => Some(m.memtable_bytes.to_string()),
            "ebb.actual-delayed-write-rate" => Some(m.delayed_write_rate.to_string()),
            "ebb.block-cache-usage" => Some(self.tables.block_cache().map_or(0, |c| c.usage()).to_string()),
            "ebb.estimate-table-readers-mem" => Some(self.tables.memory_usage().to_string()),
            "ebb.num-open-tables" => Some(self.tables.open_tables().to_string()),
            "ebb.block-cache-pinned-usage" => {
                Some(self.tables.block_cache().map_or(0, |c| c.pinned_usage()).to_string())
            }
            "ebb.block-cache-capacity" => Some(self.tables.block_cache().map_or(0, |c| c.capacity()).to_string()),
            "ebb.compressed-secondary-cache-usage" => {
                Some(self.tables.block_cache().and_then(|c| c.secondary().map(|s| s.usage())).unwrap_or(0).to_string())
            }
            "ebb.compressed-secondary-cache-stats" => {
                let n = self.tables.block_cache().and_then(|c| c.secondary().map(|s| s.counters()))?;
                Some(format!(
                    "hits={} dummy_hits={} misses={} inserts={} dummy_inserts={} uncompressed_bytes={} \
                     compressed_bytes={}",
                    n.hits,
                    n.dummy_hits,
                    n.misses,
                    n.inserts,
                    n.dummy_inserts,
                    n.uncompressed_bytes,
                    n.compressed_bytes
                ))
            }
            "ebb.is-write-stopped" => {
                Some(u8::from(matches!(m.stall_condition, Some(StallCondition::Stopped(_)))).to_string())
            }
            "ebb.num-immutable-mem-table" => Some(self.state.lock().families.get(cf)?.imm().len().to_string()),
            "ebb.num-live-wal-files" => Some(self.state.lock().families.live_wal_count().to_string()),
            "ebb.total-wal-size" => Some(self.total_wal_size(&self.state.lock().families).to_string()),
            "ebb.num-column-families" => Some(self.state.lock().families.len().to_string()),
            "ebb.estimate-num-keys" => {
                let sv = family.super_version();
                let mut n = sv.mem.num_entries();
                for i in &sv.imm {
                    n += i.num_entries();
                }
                for f in sv.version.levels.iter().flatten() {
                    n += f.num_entries.saturating_sub(f.num_deletions);
                }
                Some(n.to_string())
            }
            "ebb.total-sst-files-size" => Some(m.bytes_per_level.iter().sum::<u64>().to_string()),
            "ebb.num-blob-files" => Some(m.blob_files.to_string()),
            "ebb.live-blob-file-size" => Some(m.blob_file_bytes.to_string()),
            "ebb.live-blob-file-garbage-size" => Some(m.blob_garbage_bytes.to_string()),
            "ebb.total-blob-file-size" => Some(self.total_blob_file_size(cf).to_string()),
            "ebb.blob-stats" => Some(blob_stats_text(&m)),
            "ebb.num-snapshots" => Some(self.state.lock().snapshots.count().to_string()),
            "ebb.recovery-report" => Some(self.recovery_report.get().cloned().unwrap_or_default().to_string()),
            "ebb.background-errors" => Some(self.state.lock().bg_error.count().to_string()),
            "ebb.levelstats" => Some(self.level_stats_text(&m)),
            "ebb.options-statistics" => {
                let cache = self.tables.block_cache().map(|c| c.stats().snapshot()).unwrap_or_default();
                Some(self.stats.statistics_text(&cache.tickers()))
            }
            "ebb.stats" => Some(self.stats_text(cf, &m)),
            _ => None,
        }
    }

    /// Bytes of the blob files of column family `cf` in every version still
    /// held (RocksDB's `rocksdb.total-blob-file-size`): the current one's,
    /// and those kept only for readers of older versions.
    fn total_blob_file_size(&self, cf: u32) -> u64 {
        let mut st = self.state.lock();
        let held = st.files.held_versions(cf).into_iter();
        let mut files = std::collections::BTreeMap::new();
        for v in st.versions.version(cf).into_iter().chain(held) {
            for b in v.blob_files.values() {
                files.insert(b.number, b.file_size());
            }
        }
        files.values().sum()
    }

    fn level_stats_text(&self, m: &DbMetrics) -> String {
        let mut s = String::from("Level Files Size(MB)\n--------------------\n");
        for (l, (files, bytes)) in m.files_per_level.iter().zip(&m.bytes_per_level).enumerate() {
            s.push_str(&format!("{l:>5} {files:>5} {:>8.0}\n", *bytes as f64 / 1048576.0));
        }
        s
    }

    fn stats_text(&self, cf: u32, m: &DbMetrics) -> String {
        let st = self.state.lock();
        let Some(family) = st.families.get(cf) else { return String::new() };
        let opts = self.family_opts(family.data());
        let version = st.versions.version(cf).unwrap_or_default();
        let scores = version.level_scores(&StorageInfoOptions::from_options(&opts), st.jobs.being_compacted());
        let compacting = version
            .levels
            .iter()
            .map(|files| files.iter().filter(|f| st.jobs.being_compacted().contains(&f.number)).count())
            .collect();
        drop(st);
        let shape = crate::stats::LevelShape {
            files: m.files_per_level.clone(),
            compacting,
            bytes: m.bytes_per_level.clone(),
            scores,
            blob_files: (m.blob_files, m.blob_file_bytes, m.blob_garbage_bytes),
        };
        self.stats.format(&shape)
    }
}

/// RocksDB's `rocksdb.blob-stats` text.
fn blob_stats_text(m: &DbMetrics) -> String {
    let live = m.blob_file_bytes.saturating_sub(m.blob_garbage_bytes);
    let amplification = if live > 0 { m.blob_file_bytes as f64 / live as f64 } else { 0.0 };
    format!(
        "Number of blob files: {}\nTotal size of blob files: {}\nTotal size of garbage in blob files: {}\n\
         Blob file space amplification: {amplification:.1}\n",
        m.blob_files, m.blob_file_bytes, m.blob_garbage_bytes
    )
}
