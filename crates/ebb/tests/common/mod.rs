//! Helpers shared by the integration tests: a reference model and option presets.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use ebb::fs::MemFs;
use ebb::{CompressionType, Db, Options, ReadOptions};

/// Options that make flushes and compactions happen after a few KiB.
pub fn tiny_options(fs: Option<MemFs>) -> Options {
    let mut o = Options::default();
    o.create_if_missing = true;
    o.write_buffer_size = 8 * 1024;
    o.max_write_buffer_number = 3;
    o.level0_file_num_compaction_trigger = 2;
    o.level0_slowdown_writes_trigger = 8;
    o.level0_stop_writes_trigger = 12;
    o.max_bytes_for_level_base = 32 * 1024;
    o.max_bytes_for_level_multiplier = 4.0;
    o.target_file_size_base = 8 * 1024;
    o.block_size = 512;
    o.num_levels = 4;
    o.compression = CompressionType::None;
    o.block_cache_size = 64 * 1024;
    o.max_subcompactions = 2;
    o.max_background_compactions = 2;
    if let Some(fs) = fs {
        o.fs = Arc::new(fs);
    }
    o
}

/// Every key/value visible through a full forward scan.
pub fn scan(db: &Db, ro: ReadOptions) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db.iter(ro);
    it.seek_to_first();
    let mut out = BTreeMap::new();
    while it.valid() {
        assert!(out.insert(it.key().to_vec(), it.value().to_vec()).is_none(), "key returned twice");
        it.next();
    }
    it.status().expect("iterator status");
    out
}

/// Every key/value visible through a full reverse scan, in ascending order.
pub fn scan_reverse(db: &Db, ro: ReadOptions) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut it = db.iter(ro);
    it.seek_to_last();
    let mut out = BTreeMap::new();
    let mut prev: Option<Vec<u8>> = None;
    while it.valid() {
        if let Some(p) = &prev {
            assert!(it.key() < p.as_slice(), "reverse scan out of order");
        }
        prev = Some(it.key().to_vec());
        out.insert(it.key().to_vec(), it.value().to_vec());
        it.prev();
    }
    it.status().expect("iterator status");
    out
}
