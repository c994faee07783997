//! Resident memory beside what the engine says it holds (`--report_memory`;
//! issue 17's memory budget): the process's peak resident set during each
//! benchmark (Linux's `VmHWM`, reset before the benchmark by writing `5` to
//! `/proc/self/clear_refs`) and at its end (`VmRSS`), and the engine's own
//! figures: block cache usage, memtables, table readers (the properties
//! `<engine>.block-cache-usage`, `.cur-size-all-mem-tables`,
//! `.estimate-table-readers-mem`, which Ebb and RocksDB both have).
//!
//! Off Linux, or where `/proc` is not readable, the resident figures are
//! absent; nothing fails.

use crate::engine::Engine;
use crate::report::MemorySummary;

/// Starts a benchmark's window: the kernel's peak resident set is reset to
/// the current one. False where that is not possible (the peak then covers
/// the process's whole life).
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// `VmHWM` and `VmRSS` of `/proc/self/status`, in bytes.
pub fn resident() -> (Option<u64>, Option<u64>) {
    match std::fs::read_to_string("/proc/self/status") {
        Ok(status) => parse_status(&status),
        Err(_) => (None, None),
    }
}

/// The `VmHWM` and `VmRSS` lines of a `/proc/<pid>/status` text, in bytes.
pub fn parse_status(status: &str) -> (Option<u64>, Option<u64>) {
    let field = |name: &str| {
        status.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            let kb: u64 = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
            Some(kb * 1024)
        })
    };
    (field("VmHWM"), field("VmRSS"))
}

/// The summary at the end of a benchmark whose window [`reset_peak`] began
/// (`peak_reset` says whether it could).
pub fn summary(engine: &dyn Engine, peak_reset: bool) -> MemorySummary {
    let (peak, now) = resident();
    let prop = |name: &str| engine.property(&format!("{}.{name}", engine.name())).and_then(|v| v.trim().parse().ok());
    MemorySummary {
        rss_peak_bytes: peak,
        peak_since_start: peak_reset,
        rss_end_bytes: now,
        block_cache_bytes: prop("block-cache-usage"),
        memtable_bytes: prop("cur-size-all-mem-tables"),
        table_readers_bytes: prop("estimate-table-readers-mem"),
    }
}

/// The line printed after a benchmark's result.
pub fn line(m: &MemorySummary) -> String {
    let mb = |b: Option<u64>| b.map_or_else(|| "?".to_string(), |b| format!("{:.1} MB", b as f64 / 1048576.0));
    let peak = if m.peak_since_start { "peak" } else { "peak (since start of process)" };
    format!(
        "Memory:     RSS {peak} {}, at end {}; block cache {}, memtables {}, table readers {}",
        mb(m.rss_peak_bytes),
        mb(m.rss_end_bytes),
        mb(m.block_cache_bytes),
        mb(m.memtable_bytes),
        mb(m.table_readers_bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_parse_in_bytes_and_missing_ones_are_absent() {
        let status = "Name:\tebb-bench\nVmPeak:\t  999 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n";
        assert_eq!(parse_status(status), (Some(2048 * 1024), Some(1024 * 1024)));
        assert_eq!(parse_status("Name:\tx\nVmRSS: 12 kB\n"), (None, Some(12 * 1024)));
        assert_eq!(parse_status("VmHWM: lots\n"), (None, None));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_peak_follows_an_allocation_and_resets() {
        assert!(reset_peak(), "clear_refs is writable on Linux");
        let (before, _) = resident();
        let big = vec![1u8; 64 << 20];
        std::hint::black_box(&big);
        let (during, _) = resident();
        assert!(during.unwrap() >= before.unwrap() + (60 << 20), "{before:?} -> {during:?}");
        drop(big);
        assert!(reset_peak());
        let (after, _) = resident();
        assert!(after.unwrap() < during.unwrap(), "the peak was not reset: {during:?} -> {after:?}");
    }
}
