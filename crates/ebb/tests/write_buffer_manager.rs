//! One memtable budget for many families and databases
//! (`WriteBufferManager`): flushes when the shared budget fills, stalls
//! with `allow_stall`, the databases' memtables counted together and
//! dropped at close, the memory charged to a block cache, and every write
//! read back.

use std::sync::Arc;

use ebb::cache::{new_cache, CacheOptions, CacheType};
use ebb::fs::MemFs;
use ebb::{ColumnFamilyHandle, ColumnFamilyOptions, Db, Options, WriteBufferManager};

const FAMILIES: usize = 6;

fn options(fs: &MemFs, wbm: Option<Arc<WriteBufferManager>>) -> (Options, ColumnFamilyOptions) {
    let mut o = Options::default().create_if_missing(true);
    o.fs = Arc::new(fs.clone());
    o.write_buffer_manager = wbm;
    // Each family alone would hold 64 MiB before a flush.
    o.write_buffer_size = 64 << 20;
    let cf = o.cf_options();
    (o, cf)
}

fn families(db: &Db, cf: &ColumnFamilyOptions) -> Vec<ColumnFamilyHandle> {
    (0..FAMILIES).map(|i| db.create_column_family(&format!("f{i}"), cf.clone()).unwrap()).collect()
}

fn memtable_bytes(db: &Db, families: &[ColumnFamilyHandle]) -> u64 {
    families
        .iter()
        .map(|cf| db.get_property_cf(cf, "ebb.cur-size-all-mem-tables").unwrap().parse::<u64>().unwrap())
        .sum()
}

/// Writes `rounds` rounds of 100 keys of 1 KiB to every family, calling
/// `each` after every batch of 100.
fn write(db: &Db, families: &[ColumnFamilyHandle], rounds: u32, mut each: impl FnMut()) {
    for round in 0..rounds {
        for (i, cf) in families.iter().enumerate() {
            for k in 0..100u32 {
                db.put_cf(cf, format!("{i}-{round:04}-{k:03}").as_bytes(), &[b'v'; 1024]).unwrap();
            }
            each();
        }
    }
}

fn read_back(db: &Db, families: &[ColumnFamilyHandle], rounds: u32) {
    for (i, cf) in families.iter().enumerate() {
        for round in (0..rounds).step_by(7) {
            let key = format!("{i}-{round:04}-050");
            assert_eq!(db.get_cf(cf, key.as_bytes()).unwrap().map(|v| v.len()), Some(1024), "{key}");
        }
    }
}

#[test]
fn a_shared_budget_flushes_families_and_stalls_at_its_limit() {
    let budget = 2 << 20;
    let wbm = WriteBufferManager::new(budget, true);
    let fs = MemFs::new();
    let (o, cf) = options(&fs, Some(Arc::clone(&wbm)));
    let db = Db::open("/db", o).unwrap();
    let fams = families(&db, &cf);
    let mut peak = 0;
    write(&db, &fams, 40, || peak = peak.max(wbm.memory_usage()));
    // About 24 MiB written: without the budget every byte would sit in the
    // memtables (next test); with it, flushes keep them near the budget.
    assert!(peak <= 2 * budget, "memtables reached {peak} bytes against a {budget}-byte budget");
    assert!(wbm.memory_usage() as u64 <= memtable_bytes(&db, &fams) + (1 << 20));
    let flushed = db.get_live_files_metadata().unwrap();
    let families_flushed: std::collections::BTreeSet<String> =
        flushed.iter().map(|f| f.column_family_name.clone()).collect();
    assert!(families_flushed.len() >= FAMILIES / 2, "flushes spread over the families: {families_flushed:?}");
    read_back(&db, &fams, 40);
    drop(fams);
    db.close().unwrap();
    assert_eq!(wbm.memory_usage(), 0, "a closed database counts no more");
}

#[test]
fn without_a_budget_the_same_writes_stay_in_the_memtables() {
    let fs = MemFs::new();
    let (o, cf) = options(&fs, None);
    let db = Db::open("/db", o).unwrap();
    let fams = families(&db, &cf);
    write(&db, &fams, 40, || {});
    db.wait_for_compact().unwrap();
    assert!(db.get_live_files_metadata().unwrap().is_empty(), "nothing flushed");
    assert!(memtable_bytes(&db, &fams) > 20 << 20);
}

#[test]
fn two_databases_share_one_budget() {
    // A budget well above the memtables' 2 MiB arena blocks, so that what
    // B holds is set by its writes, not by the blocks' granularity.
    let wbm = WriteBufferManager::new(16 << 20, false);
    let (fs_a, fs_b) = (MemFs::new(), MemFs::new());
    let (oa, cfa) = options(&fs_a, Some(Arc::clone(&wbm)));
    let (ob, cfb) = options(&fs_b, Some(Arc::clone(&wbm)));
    let a = Db::open("/a", oa).unwrap();
    let b = Db::open("/b", ob).unwrap();
    let (fa, fb) = (families(&a, &cfa), families(&b, &cfb));
    // B's writes leave more than half the budget unflushed, below the 7/8
    // of it that would flush them; A's writes then find it spent and flush.
    write(&b, &fb[..1], 100, || {});
    b.wait_for_compact().unwrap();
    assert!(b.get_live_files_metadata().unwrap().is_empty(), "B stayed under the flush trigger");
    let b_bytes = memtable_bytes(&b, &fb);
    assert!(b_bytes > 8 << 20, "{b_bytes}");
    write(&a, &fa, 12, || {});
    // The flushes A's writes asked for run in the background: wait for them
    // rather than racing them.
    a.wait_for_compact().unwrap();
    assert!(!a.get_live_files_metadata().unwrap().is_empty(), "A flushed under the shared budget");
    let both = memtable_bytes(&a, &fa) + memtable_bytes(&b, &fb);
    assert!((wbm.memory_usage() as u64).abs_diff(both) < 1 << 20, "{} against {both}", wbm.memory_usage());
    drop(fb);
    b.close().unwrap();
    let a_bytes = memtable_bytes(&a, &fa);
    assert!(
        (wbm.memory_usage() as u64).abs_diff(a_bytes) < 1 << 20,
        "B's memtables left the count: {} against A's {a_bytes}",
        wbm.memory_usage()
    );
    read_back(&a, &fa, 12);
}

#[test]
fn db_write_buffer_size_gives_a_database_its_own_budget_and_the_cache_can_be_charged() {
    let fs = MemFs::new();
    let (mut o, cf) = options(&fs, None);
    o.db_write_buffer_size = 2 << 20;
    let db = Db::open("/db", o).unwrap();
    let fams = families(&db, &cf);
    write(&db, &fams, 20, || {});
    db.wait_for_compact().unwrap();
    assert!(!db.get_live_files_metadata().unwrap().is_empty(), "flushed under db_write_buffer_size");
    read_back(&db, &fams, 20);
    drop(fams);
    db.close().unwrap();

    // Charged to a block cache: its pinned usage follows the memtables.
    let cache = new_cache(CacheType::Lru, &CacheOptions::new(64 << 20)).unwrap();
    let wbm = WriteBufferManager::with_cache(32 << 20, false, Arc::clone(&cache));
    let fs = MemFs::new();
    let (mut o, cf) = options(&fs, Some(Arc::clone(&wbm)));
    o.block_cache = Some(Arc::clone(&cache));
    let db = Db::open("/db", o).unwrap();
    let fams = families(&db, &cf);
    write(&db, &fams, 5, || {});
    let memtables = memtable_bytes(&db, &fams);
    assert!(cache.pinned_usage() as u64 >= memtables, "{} pinned for {memtables}", cache.pinned_usage());
    drop(fams);
    db.close().unwrap();
    assert!(cache.pinned_usage() < 1 << 20, "released at close: {}", cache.pinned_usage());
}
