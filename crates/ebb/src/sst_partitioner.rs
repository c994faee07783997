//! SST partitioners (RocksDB's `SstPartitioner`): where a compaction must
//! cut its output tables, whatever their size, so that no table spans a
//! boundary the application cares about (TiKV cuts at its regions', so that
//! a region's tables can be dropped or moved whole). docs/compaction.md,
//! "SST partitioners".
//!
//! A family's `sst_partitioner_factory` makes one partitioner per
//! compaction (per subcompaction); the compaction asks it at each new user
//! key whether to cut before it, and a file it would cut is never moved
//! down a level as it is (a trivial move), but rewritten. Flushes do not
//! cut. Built in, as in RocksDB: [`fixed_prefix`], which cuts where the
//! first `n` bytes of the key change.

use std::sync::Arc;

use crate::error::{Error, Result};

/// Whether to cut before the current key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartitionerResult {
    /// Keep writing the current table.
    NotRequired,
    /// End the current table before this key.
    Required,
}

/// What a compaction asks its partitioner at each new user key.
#[derive(Debug, Clone, Copy)]
pub struct PartitionerRequest<'a> {
    /// The last user key written to the current table.
    pub prev_user_key: &'a [u8],
    /// The user key about to be written.
    pub current_user_key: &'a [u8],
    /// The current table's size so far (estimated).
    pub current_output_file_size: u64,
}

/// Decides where one compaction cuts its outputs (RocksDB's
/// `SstPartitioner`). Used by one thread at a time.
pub trait SstPartitioner: Send {
    /// Its name.
    fn name(&self) -> &str;
    /// Whether to end the current table before `request.current_user_key`.
    fn should_partition(&mut self, request: &PartitionerRequest<'_>) -> PartitionerResult;
    /// Whether a table holding `smallest_user_key ..= largest_user_key` may
    /// move to another level as it is: false when it would be cut.
    fn can_do_trivial_move(&mut self, smallest_user_key: &[u8], largest_user_key: &[u8]) -> bool;
}

/// What a partitioner is made for.
#[derive(Debug, Clone, Copy)]
pub struct SstPartitionerContext<'a> {
    /// The compaction reads every table of the family.
    pub is_full_compaction: bool,
    /// The compaction was asked for (`compact_range`, `compact_files`).
    pub is_manual_compaction: bool,
    /// The level the outputs go to.
    pub output_level: usize,
    /// The smallest user key the compaction (or subcompaction) reads.
    pub smallest_user_key: &'a [u8],
    /// The largest user key it reads.
    pub largest_user_key: &'a [u8],
}

/// Makes the partitioner of each compaction (RocksDB's
/// `SstPartitionerFactory`). Called from several compactions at once.
pub trait SstPartitionerFactory: Send + Sync {
    /// Its name, recorded in the OPTIONS file; [`from_name`] reads the
    /// built-in ones back.
    fn name(&self) -> &str;
    /// A partitioner for one compaction.
    fn create_partitioner(&self, context: &SstPartitionerContext<'_>) -> Box<dyn SstPartitioner>;
}

/// The name prefix of [`fixed_prefix`]'s factories (RocksDB's class name).
const FIXED_PREFIX: &str = "SstPartitionerFixedPrefixFactory";

struct FixedPrefixFactory {
    len: usize,
    name: String,
}

struct FixedPrefix {
    len: usize,
}

impl SstPartitioner for FixedPrefix {
    fn name(&self) -> &str {
        "SstPartitionerFixedPrefix"
    }

    /// Cuts where the first `len` bytes change; keys shorter than `len`
    /// are never a reason to cut (RocksDB's rule).
    fn should_partition(&mut self, request: &PartitionerRequest<'_>) -> PartitionerResult {
        let (prev, cur) = (request.prev_user_key, request.current_user_key);
        if prev.len() < self.len || cur.len() < self.len || prev[..self.len] == cur[..self.len] {
            PartitionerResult::NotRequired
        } else {
            PartitionerResult::Required
        }
    }

    fn can_do_trivial_move(&mut self, smallest_user_key: &[u8], largest_user_key: &[u8]) -> bool {
        let request = PartitionerRequest {
            prev_user_key: smallest_user_key,
            current_user_key: largest_user_key,
            current_output_file_size: 0,
        };
        self.should_partition(&request) == PartitionerResult::NotRequired
    }
}

impl SstPartitionerFactory for FixedPrefixFactory {
    fn name(&self) -> &str {
        &self.name
    }

    fn create_partitioner(&self, _context: &SstPartitionerContext<'_>) -> Box<dyn SstPartitioner> {
        Box::new(FixedPrefix { len: self.len })
    }
}

/// Cuts compaction outputs where the first `len` bytes of the user key
/// change (RocksDB's `NewSstPartitionerFixedPrefixFactory`): every table
/// then holds keys of one prefix. Recorded in the OPTIONS file as
/// `SstPartitionerFixedPrefixFactory:LEN`.
pub fn fixed_prefix(len: usize) -> Arc<dyn SstPartitionerFactory> {
    Arc::new(FixedPrefixFactory { len, name: format!("{FIXED_PREFIX}:{len}") })
}

/// The built-in factory named `name` (as [`SstPartitionerFactory::name`]
/// gives it). Errors: `InvalidArgument` for any other name.
pub fn from_name(name: &str) -> Result<Arc<dyn SstPartitionerFactory>> {
    name.strip_prefix(FIXED_PREFIX)
        .and_then(|rest| rest.strip_prefix(':'))
        .and_then(|len| len.parse::<usize>().ok())
        .filter(|len| *len > 0)
        .map(fixed_prefix)
        .ok_or_else(|| {
            Error::invalid(format!(
                "{name:?} is not a built-in SST partitioner ({FIXED_PREFIX}:N with N > 0); set \
                 ColumnFamilyOptions::sst_partitioner_factory in code"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(p: &mut dyn SstPartitioner, prev: &str, cur: &str) -> PartitionerResult {
        let request = PartitionerRequest {
            prev_user_key: prev.as_bytes(),
            current_user_key: cur.as_bytes(),
            current_output_file_size: 0,
        };
        p.should_partition(&request)
    }

    #[test]
    fn fixed_prefix_cuts_where_the_prefix_changes() {
        let factory = fixed_prefix(3);
        assert_eq!(factory.name(), "SstPartitionerFixedPrefixFactory:3");
        let context = SstPartitionerContext {
            is_full_compaction: false,
            is_manual_compaction: false,
            output_level: 1,
            smallest_user_key: b"",
            largest_user_key: b"",
        };
        let mut p = factory.create_partitioner(&context);
        assert_eq!(ask(p.as_mut(), "aaa1", "aaa2"), PartitionerResult::NotRequired);
        assert_eq!(ask(p.as_mut(), "aaa9", "aab0"), PartitionerResult::Required);
        // Shorter keys are no reason to cut.
        assert_eq!(ask(p.as_mut(), "aa", "aab0"), PartitionerResult::NotRequired);
        assert!(p.can_do_trivial_move(b"aaa1", b"aaa9"));
        assert!(!p.can_do_trivial_move(b"aaa1", b"aab0"));
    }

    #[test]
    fn built_in_names_read_back() {
        assert_eq!(
            from_name("SstPartitionerFixedPrefixFactory:8").unwrap().name(),
            "SstPartitionerFixedPrefixFactory:8"
        );
        for bad in ["SstPartitionerFixedPrefixFactory", "SstPartitionerFixedPrefixFactory:0", "mine"] {
            assert!(from_name(bad).is_err(), "{bad}");
        }
    }
}
