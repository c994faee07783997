//! Merge operands in flushes and compactions (RocksDB's `MergeHelper` as
//! its `CompactionIterator` uses it): a stage of the job's input that
//! combines each run of merge operands of one user key that no live
//! snapshot separates (one snapshot stripe).
//!
//! Rules, for a run of operands of key `k`, newest first, all in one stripe
//! (a stripe: the sequences whose oldest snapshot at or above them is the
//! same one, or none):
//! 1. When the entry below the run is a version of `k` in the same stripe
//!    (a value, a blob index read back, an entity, a deletion or single
//!    deletion), the run and that version become one value
//!    ([`MergeOperator::full_merge`]; an entity over an entity, its default
//!    column merged), at the newest operand's sequence. The version below is passed on
//!    unchanged after it; the job's hiding rules drop it where no reader
//!    can see it.
//! 2. Otherwise, when nothing older of `k` can exist (the output is the
//!    bottommost, and the run is the last of `k` in the input), the run
//!    becomes one value merged with none.
//! 3. Otherwise a run of two or more is combined by
//!    [`MergeOperator::partial_merge`] into one operand at the newest
//!    sequence, where the operator can; else the operands pass unchanged.
//!
//! Before a run is combined, a compaction filter is asked about each of its
//! operands that no live snapshot can see (RocksDB's `FilterMergeOperand`,
//! as its `MergeHelper::MergeUntil` asks); an operand it removes is dropped
//! as if never written.
//!
//! A merge operator that fails, or a blob that cannot be read back, fails
//! the job (the input stage reports the error as its status and becomes
//! invalid), as a failed merge fails a RocksDB compaction.

use std::collections::VecDeque;

use super::job::FilterSettings;
use super::snapshot_stripe;
use crate::blob::{BlobFetcher, BlobIndex};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{make_internal_key, parse_internal_key, SequenceNumber, ValueKind};
use crate::merge_operator::MergeOperator;
use crate::wide_columns::MergeBase;

/// What a job needs to combine merge operands.
#[derive(Clone, Copy)]
pub struct MergeSettings<'a> {
    /// The column family's merge operator.
    pub operator: &'a dyn MergeOperator,
    /// Reads a value kept in a blob file back, when it is the version below
    /// a run; without it such a run is combined as if it had none below
    /// it in the input (rule 3).
    pub blobs: Option<&'a dyn BlobFetcher>,
    /// Whether blob reads verify checksums.
    pub verify_checksums: bool,
}

/// The input stage (module documentation). Forward only; a seek starts
/// over.
pub(crate) struct Operands<'a> {
    inner: &'a mut dyn InternalIterator,
    settings: Option<MergeSettings<'a>>,
    /// The live snapshots when the job started, ascending (later ones are
    /// above every sequence the job reads).
    snapshots: &'a [SequenceNumber],
    /// No older version of any key exists below the job's inputs.
    bottommost: bool,
    /// Entries made from a run, served before `inner`'s current entry.
    out: VecDeque<(Vec<u8>, Vec<u8>)>,
    /// Operands that went into combined entries, or that the filter
    /// removed (inputs read, not written).
    pub(crate) absorbed: u64,
    /// Asked about operands before they are combined.
    filter: Option<FilterSettings<'a>>,
    error: Option<Error>,
}

impl<'a> Operands<'a> {
    pub(crate) fn new(
        inner: &'a mut dyn InternalIterator,
        settings: Option<MergeSettings<'a>>,
        filter: Option<FilterSettings<'a>>,
        snapshots: &'a [SequenceNumber],
        bottommost: bool,
    ) -> Self {
        let mut s =
            Operands { inner, settings, snapshots, bottommost, out: VecDeque::new(), absorbed: 0, filter, error: None };
        s.settle();
        s
    }

    /// With nothing made waiting: while `inner` is on a merge operand, reads
    /// its run and makes what it becomes (nothing, when the filter removed
    /// the whole run: then the next entry is looked at).
    fn settle(&mut self) {
        let Some(settings) = self.settings else { return };
        while self.out.is_empty() && self.error.is_none() && self.inner.valid() {
            let Some(p) = parse_internal_key(self.inner.key()) else { return };
            if p.kind != ValueKind::Merge {
                return;
            }
            if let Err(e) = self.combine(settings) {
                self.out.clear();
                self.error = Some(e);
            }
        }
    }

    fn combine(&mut self, settings: MergeSettings<'_>) -> Result<()> {
        let first = parse_internal_key(self.inner.key()).ok_or_else(unparsable)?;
        let key = first.user_key.to_vec();
        let (newest, stripe) = (first.seq, snapshot_stripe(self.snapshots, first.seq));
        // The run, newest first, as read.
        let mut run: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        while self.inner.valid() {
            let p = parse_internal_key(self.inner.key()).ok_or_else(unparsable)?;
            if p.user_key != key.as_slice()
                || p.kind != ValueKind::Merge
                || snapshot_stripe(self.snapshots, p.seq) != stripe
            {
                break;
            }
            let removed = self.filter.is_some_and(|f| {
                f.unprotected(p.seq) && f.filter.filter_merge_operand(f.level, &key, self.inner.value())
            });
            if removed {
                self.absorbed += 1;
            } else {
                run.push((self.inner.key().to_vec(), self.inner.value().to_vec()));
            }
            self.inner.next();
        }
        self.inner.status()?;
        if run.is_empty() {
            return Ok(());
        }
        // What lies below the run: `Some(base)` when it settles the value.
        let below = match self.inner.valid() {
            true => Some(parse_internal_key(self.inner.key()).ok_or_else(unparsable)?),
            false => None,
        };
        // The base's value, and whether it is an entity.
        let base: Option<Option<(bool, Vec<u8>)>> = match below {
            Some(p) if p.user_key == key.as_slice() && snapshot_stripe(self.snapshots, p.seq) == stripe => match p.kind
            {
                ValueKind::Value => Some(Some((false, self.inner.value().to_vec()))),
                ValueKind::WideColumnEntity => Some(Some((true, self.inner.value().to_vec()))),
                ValueKind::BlobIndex => match settings.blobs {
                    Some(blobs) => {
                        let index = BlobIndex::decode(self.inner.value()).map_err(|r| {
                            Error::corruption(
                                "compaction input",
                                0,
                                format!("blob index of key {:?}: {r}", shown(&key)),
                            )
                        })?;
                        Some(Some((false, blobs.fetch(&key, &index, settings.verify_checksums)?)))
                    }
                    None => None,
                },
                ValueKind::Deletion | ValueKind::SingleDeletion | ValueKind::RangeDeletion => Some(None),
                ValueKind::Merge => None,
            },
            Some(p) if p.user_key == key.as_slice() => None,
            _ if self.bottommost => Some(None),
            _ => None,
        };
        let oldest_first: Vec<&[u8]> = run.iter().rev().map(|(_, v)| v.as_slice()).collect();
        if let Some(existing) = base {
            let base = match &existing {
                None => MergeBase::None,
                Some((false, v)) => MergeBase::Plain(v),
                Some((true, e)) => MergeBase::Entity(e),
            };
            let (entity, v) = crate::wide_columns::merge(settings.operator, &key, base, &oldest_first, "compaction")?;
            self.absorbed += run.len() as u64 - 1;
            let kind = if entity { ValueKind::WideColumnEntity } else { ValueKind::Value };
            self.out.push_back((make_internal_key(&key, newest, kind), v));
        } else if run.len() >= 2 {
            match settings.operator.partial_merge(&key, &oldest_first) {
                Some(v) => {
                    self.absorbed += run.len() as u64 - 1;
                    self.out.push_back((make_internal_key(&key, newest, ValueKind::Merge), v));
                }
                None => self.out.extend(run),
            }
        } else {
            self.out.extend(run);
        }
        Ok(())
    }
}

fn unparsable() -> Error {
    Error::corruption("compaction input", 0, "unparsable internal key")
}

fn shown(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

impl InternalIterator for Operands<'_> {
    fn valid(&self) -> bool {
        self.error.is_none() && (!self.out.is_empty() || self.inner.valid())
    }
    fn seek_to_first(&mut self) {
        self.out.clear();
        self.error = None;
        self.inner.seek_to_first();
        self.settle();
    }
    fn seek_to_last(&mut self) {
        self.out.clear();
        self.inner.seek_to_last();
    }
    fn seek(&mut self, target: &[u8]) {
        self.out.clear();
        self.error = None;
        self.inner.seek(target);
        self.settle();
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.out.clear();
        self.inner.seek_for_prev(target);
    }
    fn next(&mut self) {
        if self.out.pop_front().is_none() {
            self.inner.next();
        }
        self.settle();
    }
    fn prev(&mut self) {
        // Not used by the job.
        self.out.clear();
        self.inner.prev();
    }
    fn key(&self) -> &[u8] {
        match self.out.front() {
            Some((k, _)) => k,
            None => self.inner.key(),
        }
    }
    fn value(&self) -> &[u8] {
        match self.out.front() {
            Some((_, v)) => v,
            None => self.inner.value(),
        }
    }
    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => self.inner.status(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iter::VecIterator;
    use crate::merge_operator::from_name;
    use ValueKind::{Deletion as D, Merge as M, Value as V};

    /// Runs `entries` (user key, sequence, kind, value) through the stage.
    fn run(
        entries: &[(&str, u64, ValueKind, &str)],
        snapshots: &[u64],
        bottommost: bool,
    ) -> Vec<(String, u64, ValueKind, String)> {
        let op = from_name("stringappend").unwrap();
        let items: Vec<(Vec<u8>, Vec<u8>)> = entries
            .iter()
            .map(|(k, s, kind, v)| (make_internal_key(k.as_bytes(), *s, *kind), v.as_bytes().to_vec()))
            .collect();
        let mut inner = VecIterator::new(items);
        inner.seek_to_first();
        let settings = MergeSettings { operator: op.as_ref(), blobs: None, verify_checksums: true };
        let mut it = Operands::new(&mut inner, Some(settings), None, snapshots, bottommost);
        let mut out = Vec::new();
        while it.valid() {
            let p = parse_internal_key(it.key()).unwrap();
            out.push((
                String::from_utf8_lossy(p.user_key).into(),
                p.seq,
                p.kind,
                String::from_utf8_lossy(it.value()).into(),
            ));
            it.next();
        }
        it.status().unwrap();
        out
    }

    fn row(k: &str, s: u64, kind: ValueKind, v: &str) -> (String, u64, ValueKind, String) {
        (k.into(), s, kind, v.into())
    }

    #[test]
    fn operands_over_a_value_in_one_stripe_become_a_value_above_it() {
        let got = run(&[("a", 5, M, "c"), ("a", 4, M, "b"), ("a", 3, V, "a"), ("b", 2, V, "x")], &[], false);
        assert_eq!(got, vec![row("a", 5, V, "a,b,c"), row("a", 3, V, "a"), row("b", 2, V, "x")]);
        // Over a deletion: merged with nothing.
        let got = run(&[("a", 5, M, "c"), ("a", 4, M, "b"), ("a", 3, D, "")], &[], false);
        assert_eq!(got, vec![row("a", 5, V, "b,c"), row("a", 3, D, "")]);
    }

    #[test]
    fn a_snapshot_between_keeps_the_stripes_apart() {
        // A snapshot at 4 reads b over a; the present reads c, b, a.
        let got = run(&[("a", 5, M, "c"), ("a", 4, M, "b"), ("a", 3, V, "a")], &[4], false);
        assert_eq!(got, vec![row("a", 5, M, "c"), row("a", 4, V, "a,b"), row("a", 3, V, "a")]);
        let got = run(&[("a", 6, M, "d"), ("a", 5, M, "c"), ("a", 4, M, "b"), ("a", 3, V, "a")], &[4], false);
        assert_eq!(got, vec![row("a", 6, M, "c,d"), row("a", 4, V, "a,b"), row("a", 3, V, "a")]);
    }

    #[test]
    fn without_a_version_below_operands_combine_partially_or_fully_at_the_bottom() {
        let input = [("a", 5, M, "c"), ("a", 4, M, "b"), ("b", 1, M, "z")];
        assert_eq!(run(&input, &[], false), vec![row("a", 5, M, "b,c"), row("b", 1, M, "z")]);
        assert_eq!(run(&input, &[], true), vec![row("a", 5, V, "b,c"), row("b", 1, V, "z")]);
        // Not at the bottom when an older stripe of the key follows.
        assert_eq!(
            run(&[("a", 5, M, "c"), ("a", 2, M, "b")], &[3], true),
            vec![row("a", 5, M, "c"), row("a", 2, V, "b")]
        );
    }

    #[test]
    fn a_failing_operator_fails_the_stage() {
        let items =
            vec![(make_internal_key(b"a", 2, M), b"x".to_vec()), (make_internal_key(b"a", 1, V), b"y".to_vec())];
        let mut inner = VecIterator::new(items);
        inner.seek_to_first();
        let settings =
            MergeSettings { operator: &crate::merge_operator::tests::Fails, blobs: None, verify_checksums: true };
        let it = Operands::new(&mut inner, Some(settings), None, &[], false);
        assert!(!it.valid());
        assert!(it.status().unwrap_err().to_string().contains("Fails"));
    }
}
