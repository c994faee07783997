//! The FIFO compaction picker, after RocksDB's `FIFOCompactionPicker`
//! (db/compaction/compaction_picker_fifo.cc) without temperature tiers.
//!
//! Every file lives in L0 (flushes write there and nothing compacts down).
//! Only one FIFO compaction runs at a time. In order:
//!
//! 1. **TTL** (`ttl` > 0): the oldest files whose `creation_time` table
//!    property is more than `ttl` seconds ago are dropped, provided that
//!    brings L0 under `max_table_files_size`; otherwise step 2 drops them
//!    along with whatever else it must.
//! 2. **Size**: while L0 adds up to more than `max_table_files_size`, the
//!    oldest files are dropped.
//! 3. **Intra-L0** (`allow_compaction`, L0 under the size limit): the newest
//!    run of free files, at least `level0_file_num_compaction_trigger` long,
//!    each under 1.1 x `write_buffer_size` per file removed, is merged into one
//!    L0 file, so files already merged are not merged again and again.
//!
//! Dropping is a version edit that deletes the files: nothing is read or
//! written ([`Compaction::is_deletion`]). Files below L0 (left by another
//! `compaction_style`) are not touched.
//!
//! Requires the db mutex (reads `being_compacted`, which the caller owns).

use std::collections::HashSet;
use std::sync::Arc;

use super::picker::{any_busy, intra_l0_span, total};
use super::{Compaction, CompactionReason, CreationTime};
use crate::options::ColumnFamilyOptions;
use crate::version::{FileMetaData, Version};

/// Picks a FIFO compaction at time `now` (seconds), or `None`.
pub fn pick(
    version: &Version,
    opts: &ColumnFamilyOptions,
    busy: &HashSet<u64>,
    now: u64,
    created: CreationTime<'_>,
) -> Option<Compaction> {
    let l0 = &version.levels[0];
    if l0.is_empty() {
        return None;
    }
    if opts.ttl > 0 {
        if let Some(c) = pick_ttl(l0, opts, busy, now, created) {
            return Some(c);
        }
    }
    pick_size(l0, opts, busy)
}

fn pick_ttl(
    l0: &[Arc<FileMetaData>],
    opts: &ColumnFamilyOptions,
    busy: &HashSet<u64>,
    now: u64,
    created: CreationTime<'_>,
) -> Option<Compaction> {
    if any_busy(l0, busy) || now < opts.ttl {
        return None;
    }
    let cutoff = now - opts.ttl;
    let mut remaining = total(l0);
    let mut inputs = Vec::new();
    // Oldest first; a file of unknown age stops the scan, as in RocksDB.
    for f in l0.iter().rev() {
        match created(f) {
            Some(t) if t > 0 && t < cutoff => {}
            _ => break,
        }
        remaining -= f.file_size;
        inputs.push(Arc::clone(f));
    }
    if inputs.is_empty() || remaining > opts.compaction_options_fifo.max_table_files_size {
        return None;
    }
    Some(compaction(opts, inputs, CompactionReason::FifoTtl))
}

fn pick_size(l0: &[Arc<FileMetaData>], opts: &ColumnFamilyOptions, busy: &HashSet<u64>) -> Option<Compaction> {
    let fopts = &opts.compaction_options_fifo;
    let mut remaining = total(l0);
    if remaining <= fopts.max_table_files_size {
        if !fopts.allow_compaction {
            return None;
        }
        let min_files = opts.level0_file_num_compaction_trigger.max(2) as usize;
        let max_per_deleted = (opts.write_buffer_size as f64 * 1.1) as u64;
        let limit = intra_l0_span(l0, busy, min_files, max_per_deleted, opts.effective_max_compaction_bytes())?;
        return Some(compaction(opts, l0[..limit].to_vec(), CompactionReason::FifoReduceNumFiles));
    }
    if any_busy(l0, busy) {
        return None;
    }
    let mut inputs = Vec::new();
    for f in l0.iter().rev() {
        remaining -= f.file_size;
        inputs.push(Arc::clone(f));
        if remaining <= fopts.max_table_files_size {
            break;
        }
    }
    Some(compaction(opts, inputs, CompactionReason::FifoMaxSize))
}

fn compaction(opts: &ColumnFamilyOptions, inputs: Vec<Arc<FileMetaData>>, reason: CompactionReason) -> Compaction {
    Compaction {
        level: 0,
        output_level: 0,
        inputs,
        output_inputs: Vec::new(),
        middle_inputs: Vec::new(),
        grandparents: Vec::new(),
        trivial_move: false,
        // Older L0 files may hold what a tombstone deletes.
        bottommost: false,
        target_file_size: u64::MAX,
        compression: opts.compression_for_level(0, false),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::CompactionStyle;
    use crate::version::test_file;
    use crate::version::VersionEdit;

    /// L0 files numbered 1..=sizes.len(), file n written at time 1000 + n.
    fn version(sizes: &[u64]) -> Version {
        let mut e = VersionEdit::default();
        for (i, size) in sizes.iter().enumerate() {
            let n = i as u64 + 1;
            e.add_file(0, test_file(n, "a", "z", *size, n));
        }
        Version::new(4).apply(&[&e]).unwrap()
    }

    fn opts(max: u64) -> ColumnFamilyOptions {
        let mut o = ColumnFamilyOptions::default();
        o.compaction_style = CompactionStyle::Fifo;
        o.compaction_options_fifo.max_table_files_size = max;
        o
    }

    fn created(f: &FileMetaData) -> Option<u64> {
        Some(1000 + f.number)
    }

    fn numbers(c: &Compaction) -> Vec<u64> {
        c.inputs.iter().map(|f| f.number).collect()
    }

    #[test]
    fn size_drops_the_oldest_files_until_under_the_limit() {
        let v = version(&[10, 10, 10, 10, 10]);
        assert!(pick(&v, &opts(50), &HashSet::new(), 0, &created).is_none());
        let c = pick(&v, &opts(25), &HashSet::new(), 0, &created).unwrap();
        assert_eq!((c.reason, numbers(&c)), (CompactionReason::FifoMaxSize, vec![1, 2, 3]));
        assert!(c.is_deletion());
        // Any L0 file busy: wait.
        let busy: HashSet<u64> = [5].into_iter().collect();
        assert!(pick(&v, &opts(25), &busy, 0, &created).is_none());
    }

    #[test]
    fn ttl_drops_expired_files_when_that_is_enough() {
        let v = version(&[10, 10, 10, 10]);
        let mut o = opts(1000);
        o.ttl = 100;
        // At 1103, files written before 1003 (1 and 2) are expired.
        let c = pick(&v, &o, &HashSet::new(), 1103, &created).unwrap();
        assert_eq!((c.reason, numbers(&c)), (CompactionReason::FifoTtl, vec![1, 2]));
        assert!(pick(&v, &o, &HashSet::new(), 1101, &created).is_none());
        // Unknown ages expire nothing.
        assert!(pick(&v, &o, &HashSet::new(), 5000, &|_| None).is_none());
        // Dropping the expired files is not enough: the size rule drops more.
        let mut o = opts(15);
        o.ttl = 100;
        let c = pick(&v, &o, &HashSet::new(), 1103, &created).unwrap();
        assert_eq!((c.reason, numbers(&c)), (CompactionReason::FifoMaxSize, vec![1, 2, 3]));
    }

    #[test]
    fn allow_compaction_merges_small_newest_files() {
        let mut o = opts(1 << 30);
        o.write_buffer_size = 100;
        o.level0_file_num_compaction_trigger = 3;
        let v = version(&[500, 20, 20, 20, 20]);
        assert!(pick(&v, &o, &HashSet::new(), 0, &created).is_none(), "allow_compaction is off");
        o.compaction_options_fifo.allow_compaction = true;
        let c = pick(&v, &o, &HashSet::new(), 0, &created).unwrap();
        assert_eq!(c.reason, CompactionReason::FifoReduceNumFiles);
        assert!(!c.is_deletion() && c.output_level == 0);
        assert_eq!(numbers(&c), vec![5, 4, 3, 2], "the big old file is left alone");
        o.level0_file_num_compaction_trigger = 5;
        assert!(pick(&v, &o, &HashSet::new(), 0, &created).is_none());
    }
}
