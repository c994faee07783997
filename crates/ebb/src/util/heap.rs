//! Returning the allocator's free pages to the OS, at most once a period.
//!
//! glibc's malloc gives each thread that allocates one of up to eight arenas
//! per core, and gives memory back to the OS only from the top of a heap:
//! pages freed in the middle of an arena stay resident until the same arena
//! reuses them. A storage engine frees across threads all day (a reader evicts
//! blocks another thread read, a flush frees the memtable the writers built,
//! a compaction's buffers go when it ends), so the process's resident memory
//! climbs to the sum of each arena's peak, far above what the engine holds
//! (docs/cache.md, "Resident memory and the allocator"). `malloc_trim(0)` hands every
//! whole free page of every arena back (`MADV_DONTNEED`), as jemalloc's decay
//! and the JDK's `TrimNativeHeapInterval` do on a timer.
//!
//! The period is process-wide: the heap is the process's, so several open
//! databases share one trim a period. Elsewhere than glibc nothing is done.
//! Thread-safe; callers hold no lock (a trim takes each arena's lock in turn).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

/// When the last trim started, in milliseconds since an origin, plus one (0:
/// never): who may trim now.
struct TrimSchedule {
    last: AtomicU64,
}

impl TrimSchedule {
    const fn new() -> TrimSchedule {
        TrimSchedule { last: AtomicU64::new(0) }
    }

    /// Whether a trim is due at `now_ms` (milliseconds since the origin)
    /// with `period_ms` (0: never); if so, marks it started, so that one
    /// caller per period gets true.
    fn due(&self, period_ms: u64, now_ms: u64) -> bool {
        if period_ms == 0 {
            return false;
        }
        let now = now_ms.min(u64::MAX - 1) + 1;
        let last = self.last.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < period_ms {
            return false;
        }
        // One caller per period: the one that moves the mark.
        self.last.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    }
}

/// The process's schedule: the heap is the process's.
static SCHEDULE: TrimSchedule = TrimSchedule::new();

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Trims the allocator's free pages if `period_ms` (0: never) has passed
/// since the last trim in this process; returns whether this call trimmed.
pub(crate) fn trim_if_due(period_ms: u64) -> bool {
    let now_ms = u64::try_from(epoch().elapsed().as_millis()).unwrap_or(u64::MAX);
    if !SCHEDULE.due(period_ms, now_ms) {
        return false;
    }
    release_free_pages();
    true
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_pages() {
    // SAFETY: `malloc_trim` takes each arena's own lock and only gives back
    // pages no allocation holds; it may be called from any thread at any time.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_pages() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trim_comes_at_most_once_a_period_and_never_at_zero() {
        // A schedule of its own, on made-up times: no other test's trims,
        // no waiting for a period to pass.
        let schedule = TrimSchedule::new();
        assert!(!schedule.due(0, 5));
        assert!(schedule.due(1_000, 5), "the first trim is due at once");
        assert!(!schedule.due(1_000, 5));
        assert!(!schedule.due(1_000, 1_004), "within the period");
        assert!(schedule.due(1_000, 1_005), "a period after the last");
        assert!(!schedule.due(1_000, 1_005), "one caller per period");
        assert!(schedule.due(1, 1_006));
        assert!(!schedule.due(3_600_000, 1_007));
        // The process's: a period far longer than the test trims at most once
        // (other tests' databases share it), then never again.
        assert!(!trim_if_due(0));
        let results: Vec<bool> = (0..5).map(|_| trim_if_due(3_600_000)).collect();
        assert!(results.iter().filter(|&&t| t).count() <= 1, "{results:?}");
        assert!(!trim_if_due(3_600_000));
    }
}
