//! Keeping a second database up to date from a primary's WAL
//! (`get_updates_since`), as replicating servers built on RocksDB do:
//! a writer thread writes to the primary while the main thread ships
//! every batch the primary's WALs hold to the replica, then both are
//! compared. docs/operations.md, "WAL tailing".
//!
//! `cargo run --release -p ebb --example replicate`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use ebb::{Db, IteratorMode, Options, ReadOptions, WriteBatch};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    // The primary keeps flushed WALs for an hour, in archive/, so that a
    // replica that falls behind a flush still finds its writes.
    let mut options = Options::default().create_if_missing(true);
    options.wal_ttl_seconds = 3600;
    options.write_buffer_size = 1 << 20;
    let primary = Arc::new(Db::open(dir.path().join("primary"), options)?);
    let replica = Db::open(dir.path().join("replica"), Options::default().create_if_missing(true))?;

    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (primary, done) = (Arc::clone(&primary), Arc::clone(&done));
        std::thread::spawn(move || -> ebb::Result<()> {
            for i in 0..20_000u32 {
                let mut batch = WriteBatch::new();
                batch.put(format!("user{:05}", i % 5000).as_bytes(), format!("visit {i}").as_bytes());
                if i % 10 == 0 {
                    batch.delete(format!("user{:05}", (i * 7) % 5000).as_bytes());
                }
                primary.write(&batch)?;
            }
            done.store(true, Ordering::Release);
            Ok(())
        })
    };

    // The replication loop: ship what the WALs hold, then ask again from
    // where the stream ended.
    let (mut next, mut shipped) = (1, 0u64);
    loop {
        let finished = done.load(Ordering::Acquire);
        let mut updates = primary.get_updates_since(next)?;
        for update in updates.by_ref() {
            replica.write(&update?.batch)?;
            shipped += 1;
        }
        next = updates.next_sequence();
        if finished && next > primary.latest_sequence_number() {
            break;
        }
        std::thread::yield_now();
    }
    writer.join().map_err(|_| "the writer thread panicked")??;

    let contents = |db: &Db| -> ebb::Result<Vec<(Vec<u8>, Vec<u8>)>> {
        db.iterator(ReadOptions::default(), IteratorMode::Start).collect()
    };
    let (ours, theirs) = (contents(&primary)?, contents(&replica)?);
    println!(
        "shipped {shipped} batches up to sequence {}; primary and replica hold {} and {} keys: {}",
        next - 1,
        ours.len(),
        theirs.len(),
        if ours == theirs { "identical" } else { "DIFFERENT" }
    );
    assert_eq!(ours, theirs, "the replica differs from the primary");
    Ok(())
}
