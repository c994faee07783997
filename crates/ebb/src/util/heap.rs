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

/// When the last trim started, in milliseconds since [`epoch`], plus one (0:
/// never).
static LAST_TRIM: AtomicU64 = AtomicU64::new(0);

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Trims the allocator's free pages if `period_ms` (0: never) has passed
/// since the last trim in this process; returns whether this call trimmed.
pub(crate) fn trim_if_due(period_ms: u64) -> bool {
    if period_ms == 0 {
        return false;
    }
    let now = u64::try_from(epoch().elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1;
    let last = LAST_TRIM.load(Ordering::Relaxed);
    if last != 0 && now.saturating_sub(last) < period_ms {
        return false;
    }
    // One caller per period: the one that moves the mark.
    if LAST_TRIM.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_err() {
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
        assert!(!trim_if_due(0));
        // A period far longer than the test: whatever trimmed before (other
        // tests' databases share the process), at most one call of these
        // trims, and once one has, none of the rest does.
        let results: Vec<bool> = (0..5).map(|_| trim_if_due(3_600_000)).collect();
        assert!(results.iter().filter(|&&t| t).count() <= 1, "{results:?}");
        assert!(!trim_if_due(3_600_000));
        // A period of a millisecond is due again once a millisecond passes
        // (a few tries: another test's database may trim in between).
        assert!((0..100).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            trim_if_due(1)
        }));
        assert!(!trim_if_due(3_600_000));
    }
}
