//! An open database hands the allocator's free pages back to the OS
//! (`malloc_trim_period_ms`, util/heap.rs): memory a thread freed inside its
//! glibc arena stays resident until then, and goes once a background thread's
//! period comes. One test in its own process, so that no other test's
//! database trims, and resident memory is this test's alone.
#![cfg(all(target_os = "linux", target_env = "gnu"))]

use std::time::{Duration, Instant};

use ebb::{Db, Options};

const MIB: u64 = 1 << 20;
/// Bytes a helper thread allocates, touches and frees inside its arena.
const FREED: u64 = 96 * MIB;
/// How long the test waits for a trim before calling it missing (a
/// watchdog, not a speed limit: the period is a millisecond, the idle
/// workers wake every 250 ms).
const STUCK: Duration = Duration::from_secs(20);

/// The process's resident bytes (`/proc/self/statm`, second field, in pages).
fn resident() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf reads a constant of the system; it touches no memory of ours.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * u64::try_from(page).unwrap()
}

/// Allocates `FREED` bytes in 64 KiB pieces on a thread of its own (so in an
/// arena of its own, below glibc's mmap threshold), writes every byte, and
/// frees all but the last piece: the freed space sits below a live chunk, in
/// the middle of the arena's heap, where glibc keeps it resident.
fn free_inside_an_arena() -> Vec<u8> {
    std::thread::spawn(|| {
        let pieces = (FREED / (64 << 10)) as usize;
        let mut all: Vec<Vec<u8>> = Vec::with_capacity(pieces);
        for i in 0..pieces {
            all.push(vec![i as u8 | 1; 64 << 10]);
        }
        let fence = all.pop().unwrap();
        drop(all);
        fence
    })
    .join()
    .unwrap()
}

fn options(period_ms: u64) -> Options {
    let mut o = Options::default();
    o.create_if_missing = true;
    o.malloc_trim_period_ms = period_ms;
    o
}

#[test]
fn an_open_database_hands_pages_freed_inside_an_arena_back_to_the_os() {
    let dir = tempfile::tempdir().unwrap();
    let before = resident();
    let fence = free_inside_an_arena();
    let freed_resident = resident();
    assert!(
        freed_resident >= before + FREED / 2,
        "the freed pieces stay resident without a trim: {before} then {freed_resident} bytes"
    );

    // Period 0: the database's threads leave the pages alone.
    let db = Db::open(dir.path(), options(0)).unwrap();
    db.put(b"k", b"v").unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let untrimmed = resident();
    assert!(
        untrimmed + FREED / 4 > freed_resident,
        "nothing trims with malloc_trim_period_ms = 0: {freed_resident} then {untrimmed} bytes"
    );

    // A period of a millisecond (a dynamic option): the pages go back.
    db.set_options(&[("malloc_trim_period_ms", "1")]).unwrap();
    let start = Instant::now();
    loop {
        let now = resident();
        if now + FREED / 2 <= untrimmed {
            break;
        }
        assert!(
            start.elapsed() < STUCK,
            "resident memory stayed at {now} bytes ({untrimmed} before the period was set)"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    drop(fence);
}
