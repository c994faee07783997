//! Applying version edits to a version (RocksDB's `VersionBuilder`,
//! LevelDB's `VersionSet::Builder`): edits accumulate as per-level
//! deletions and additions on a base version, and [`VersionBuilder::build`]
//! makes the result once, merging each level's sorted base files (those not
//! deleted) with its sorted additions.
//!
//! Recovery applies every MANIFEST edit to one builder per family and
//! builds one version at the end: O(edits + files · log files), where a
//! version built per edit cost O(edits · files · log files). A running
//! database builds one version per installed edit: O(files) for the merge,
//! with no re-sort of the levels.
//!
//! Invariants:
//! 1. `deleted[l]` hides base files of level `l` by number; `added[l]` holds
//!    the files added at `l` since the base and not deleted since. A file
//!    added where the base has its number replaces it (it is hidden too).
//! 2. `blob_files` is the base's blob files with every addition and garbage
//!    applied; which of them stay in the built version is decided once, in
//!    [`VersionBuilder::build`] (version invariant 6), as RocksDB's
//!    `VersionBuilder::SaveTo` does. In a history the engine writes, a blob
//!    file that could leave after some edit is referred to by no later one,
//!    so deciding at the end gives the version that deciding after every
//!    edit gives.
//!
//! Not thread-safe; a builder belongs to whoever applies the edits (the
//! version set, under the db mutex, or recovery).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use super::{BlobFileMetaData, FileMetaData, Version, VersionEdit};
use crate::comparator::UserComparator;
use crate::error::{Error, Result};

/// Edits applied to a base version, not yet built into one.
pub struct VersionBuilder<'a> {
    base: &'a Version,
    /// Per level: base files hidden, by number (invariant 1).
    deleted: Vec<HashSet<u64>>,
    /// Per level: files added, by number (invariant 1).
    added: Vec<HashMap<u64, Arc<FileMetaData>>>,
    /// Invariant 2.
    blob_files: BTreeMap<u64, BlobFileMetaData>,
    /// The order of the family's keys.
    cmp: UserComparator,
}

/// Version invariant 2's order of a level: L0 newest first (largest
/// sequence number, then smallest, then file number, descending: RocksDB's
/// `NewestFirstBySeqNo`); deeper levels by smallest key. The smallest
/// sequence matters when files tie on the largest: files ingested together
/// share one sequence number, and a merge of one of them with older files
/// has the same largest sequence and a higher file number, yet holds older
/// data than its siblings; ordered by number alone it went before them, and
/// a read found its older version of a key first.
fn level_order(cmp: &UserComparator, level: usize, a: &FileMetaData, b: &FileMetaData) -> std::cmp::Ordering {
    if level == 0 {
        b.largest_seq.cmp(&a.largest_seq).then(b.smallest_seq.cmp(&a.smallest_seq)).then(b.number.cmp(&a.number))
    } else {
        cmp.compare_internal(&a.smallest, &b.smallest)
    }
}

impl<'a> VersionBuilder<'a> {
    /// A builder on `base`, with its number of levels.
    pub fn new(base: &'a Version) -> Self {
        Self::with_levels(base, base.num_levels())
    }

    /// A builder on `base` with `num_levels` levels; levels the base does
    /// not have start empty.
    pub fn with_levels(base: &'a Version, num_levels: usize) -> Self {
        Self::with_shape(base, num_levels, base.cmp.clone())
    }

    /// A builder on `base` with `num_levels` levels whose keys are in
    /// `cmp`'s order (a family being recovered, built on an empty base).
    pub fn with_shape(base: &'a Version, num_levels: usize, cmp: UserComparator) -> Self {
        VersionBuilder {
            base,
            deleted: vec![HashSet::new(); num_levels],
            added: vec![HashMap::new(); num_levels],
            blob_files: base.blob_files.clone(),
            cmp,
        }
    }

    /// Applies one edit's files and blob files. Corruption (naming the
    /// MANIFEST) when it names a level the family does not have, adds a
    /// blob file twice, or records garbage for a blob file not listed or
    /// beyond its count; the builder must not be used after an error.
    pub fn apply(&mut self, edit: &VersionEdit) -> Result<()> {
        let bad = |what: String| Error::corruption("MANIFEST", 0, what);
        for b in &edit.blob_file_additions {
            let meta = BlobFileMetaData {
                number: b.number,
                total_count: b.total_count,
                total_bytes: b.total_bytes,
                garbage_count: 0,
                garbage_bytes: 0,
            };
            if self.blob_files.insert(b.number, meta).is_some() {
                return Err(bad(format!("blob file {} added twice", b.number)));
            }
        }
        for g in &edit.blob_file_garbage {
            let meta = self
                .blob_files
                .get_mut(&g.number)
                .ok_or_else(|| bad(format!("garbage recorded for blob file {}, not listed", g.number)))?;
            meta.garbage_count += g.count;
            meta.garbage_bytes += g.bytes;
            if meta.garbage_count > meta.total_count {
                return Err(bad(format!(
                    "blob file {} has {} garbage blobs of {}",
                    g.number, meta.garbage_count, meta.total_count
                )));
            }
        }
        for (level, number) in &edit.deleted_files {
            let (deleted, added) = match (self.deleted.get_mut(*level), self.added.get_mut(*level)) {
                (Some(d), Some(a)) => (d, a),
                _ => return Err(bad(format!("edit deletes file {number} at missing level {level}"))),
            };
            added.remove(number);
            deleted.insert(*number);
        }
        for (level, f) in &edit.new_files {
            let (deleted, added) = match (self.deleted.get_mut(*level), self.added.get_mut(*level)) {
                (Some(d), Some(a)) => (d, a),
                _ => return Err(bad(format!("edit adds file {} at missing level {level}", f.number))),
            };
            deleted.insert(f.number);
            added.insert(f.number, Arc::clone(f));
        }
        Ok(())
    }

    /// The version the edits make: each level's base files not deleted,
    /// merged in the level's order with its added files sorted, and the
    /// blob files some table may still refer to (version invariant 6).
    pub fn build(self) -> Version {
        let VersionBuilder { base, deleted, added, mut blob_files, cmp } = self;
        let mut levels = Vec::with_capacity(added.len());
        for (level, (deleted, added)) in deleted.into_iter().zip(added).enumerate() {
            let base_files = base.levels.get(level).map_or(&[][..], Vec::as_slice);
            let mut added: Vec<Arc<FileMetaData>> = added.into_values().collect();
            added.sort_by(|a, b| level_order(&cmp, level, a, b));
            let mut kept = base_files.iter().filter(|f| !deleted.contains(&f.number)).peekable();
            let mut files = Vec::with_capacity(base_files.len() + added.len());
            // A merge of two sorted runs; on equal order the base file comes
            // first, as a stable sort of the base followed by the additions.
            for f in added {
                while let Some(b) = kept.next_if(|b| level_order(&cmp, level, b, &f) != std::cmp::Ordering::Greater) {
                    files.push(Arc::clone(b));
                }
                files.push(f);
            }
            files.extend(kept.cloned());
            levels.push(files);
        }
        // Version invariant 6. A table names the oldest blob file it refers
        // to, so a blob file older than every table's oldest is referred to
        // by none; one that is all garbage stays while a table names it (a
        // miscount must never drop a blob still referred to).
        if !blob_files.is_empty() {
            let linked: BTreeSet<u64> =
                levels.iter().flatten().map(|f| f.oldest_blob_file).filter(|n| *n != 0).collect();
            let oldest_linked = linked.first().copied().unwrap_or(u64::MAX);
            blob_files.retain(|number, meta| {
                *number >= oldest_linked && (linked.contains(number) || meta.garbage_count < meta.total_count)
            });
        }
        Version::of(levels, blob_files, cmp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn file(number: u64, lo: u8, hi: u8, seq: u64) -> Arc<FileMetaData> {
        Arc::new(crate::version::tests::file(number, &[lo], &[hi], seq))
    }

    /// What the version looked like when it was rebuilt from scratch for
    /// every edit: each level retained and re-sorted (the code the builder
    /// replaced), for comparison.
    fn apply_by_resorting(v: &Version, edit: &VersionEdit) -> Version {
        let mut levels = v.levels.clone();
        for (level, number) in &edit.deleted_files {
            levels[*level].retain(|f| f.number != *number);
        }
        for (level, f) in &edit.new_files {
            levels[*level].retain(|g| g.number != f.number);
            levels[*level].push(Arc::clone(f));
        }
        for (level, files) in levels.iter_mut().enumerate() {
            files.sort_by(|a, b| level_order(&UserComparator::BYTEWISE, level, a, b));
        }
        Version::of(levels, BTreeMap::new(), UserComparator::BYTEWISE)
    }

    fn numbers(v: &Version) -> Vec<Vec<u64>> {
        v.levels.iter().map(|l| l.iter().map(|f| f.number).collect()).collect()
    }

    /// A random history of edits over four levels: files added (L0 with
    /// growing sequence numbers, deeper levels over one-byte ranges),
    /// deleted, re-added at another level, or replaced at the same one.
    fn history() -> impl Strategy<Value = Vec<VersionEdit>> {
        let change = (0usize..4, 0u64..40, any::<u8>(), any::<u8>(), any::<bool>());
        proptest::collection::vec(proptest::collection::vec(change, 1..6), 1..60).prop_map(|edits| {
            let mut seq = 0;
            edits
                .into_iter()
                .map(|changes| {
                    let mut e = VersionEdit::default();
                    for (level, number, lo, width, delete) in changes {
                        seq += 1;
                        if delete {
                            e.delete_file(level, number);
                        } else {
                            let hi = lo.saturating_add(width % 8);
                            e.new_files.push((level, file(number, lo, hi, seq)));
                        }
                    }
                    e
                })
                .collect()
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// One builder fed a whole history builds the version that
        /// rebuilding after every edit gives, and so does a builder per
        /// edit on the version before it (how a running database installs
        /// edits). Levels here may overlap: the order, not the check, is
        /// under test.
        #[test]
        fn one_builder_matches_a_version_per_edit(edits in history()) {
            let mut stepwise = Version::new(4);
            let mut per_edit = Version::new(4);
            for e in &edits {
                stepwise = apply_by_resorting(&stepwise, e);
                let mut b = VersionBuilder::new(&per_edit);
                b.apply(e).unwrap();
                per_edit = b.build();
            }
            let empty = Version::new(0);
            let mut once = VersionBuilder::with_levels(&empty, 4);
            for e in &edits {
                once.apply(e).unwrap();
            }
            let once = once.build();
            prop_assert_eq!(numbers(&once), numbers(&stepwise));
            prop_assert_eq!(numbers(&per_edit), numbers(&stepwise));
        }
    }

    #[test]
    fn a_file_added_deleted_and_added_again_is_listed_once() {
        let mut e = VersionEdit::default();
        e.new_files.push((1, file(5, b'a', b'c', 1)));
        let base = Version::new(3).apply(&[&e]).unwrap();
        let mut b = VersionBuilder::new(&base);
        let mut d = VersionEdit::default();
        d.delete_file(1, 5);
        b.apply(&d).unwrap();
        b.apply(&e).unwrap();
        // Replaced at the same level by a file of the same number.
        b.apply(&e).unwrap();
        assert_eq!(numbers(&b.build()), vec![vec![], vec![5], vec![]]);
    }

    /// L0 files that tie on their largest sequence number go newest first
    /// by their smallest: two files ingested together share sequence 9,
    /// and a merge of one of them (file 7) with older data (file 3, at 2)
    /// writes file 12, with sequences 2 to 9, which must come after its
    /// sibling (file 8), whatever their numbers. Equal in both, the higher
    /// number goes first.
    #[test]
    fn l0_files_tied_on_their_largest_sequence_go_by_their_smallest() {
        let ranged = |number: u64, smallest_seq: u64, largest_seq: u64| {
            let mut f = crate::version::tests::file(number, b"a", b"z", largest_seq);
            f.smallest_seq = smallest_seq;
            Arc::new(f)
        };
        let mut e = VersionEdit::default();
        for f in [ranged(12, 2, 9), ranged(8, 9, 9), ranged(5, 1, 1), ranged(13, 9, 9)] {
            e.new_files.push((0, f));
        }
        let base = Version::new(2);
        let mut b = VersionBuilder::new(&base);
        b.apply(&e).unwrap();
        assert_eq!(numbers(&b.build())[0], vec![13, 8, 12, 5]);
    }

    #[test]
    fn edits_naming_a_missing_level_are_corruption() {
        let base = Version::new(2);
        let mut add = VersionEdit::default();
        add.new_files.push((2, file(1, b'a', b'b', 1)));
        assert!(VersionBuilder::new(&base).apply(&add).unwrap_err().is_corruption());
        let mut del = VersionEdit::default();
        del.delete_file(7, 1);
        assert!(VersionBuilder::new(&base).apply(&del).unwrap_err().is_corruption());
    }
}
