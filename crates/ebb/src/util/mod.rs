//! Leaf helpers shared by every layer: integer coding, checksums,
//! compression, calendar dates, the allocator's free pages, the open-file
//! readers' order of use and the CPU's cache-line prefetch.

pub mod calendar;
pub mod checksum;
pub mod coding;
pub mod compression;
pub(crate) mod heap;
pub(crate) mod open_files;

/// Hints the CPU to load the cache line at `p` into every cache level (a
/// hint: any address is safe, null included; nothing on other targets).
#[inline(always)]
pub(crate) fn prefetch(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of the x86_64 baseline, so the instruction exists;
    // a prefetch is a hint that reads nothing and never faults, whatever the
    // address.
    #[allow(unsafe_code)]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
