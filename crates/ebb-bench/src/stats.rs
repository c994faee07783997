//! Per-thread benchmark statistics (db_bench's `Stats`): operations, bytes,
//! per-operation-type latency histograms, and the counters the interval
//! monitor reads while the benchmark runs. Also the result line.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::engine::transaction::TransactionError;
use crate::histogram::Histogram;

/// db_bench's `OperationType`, for histogram titles.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OpType {
    /// A point read.
    Read,
    /// A write.
    Write,
    /// A delete.
    Delete,
    /// A seek (with its nexts).
    Seek,
    /// A read-modify-write.
    Update,
    /// A merge (mergerandom, readrandommergerandom).
    Merge,
    /// A checksum computation.
    Crc,
    /// A hash computation.
    Hash,
    /// Anything else.
    Other,
}

impl OpType {
    /// db_bench's name (`Microseconds per read:`).
    pub fn name(self) -> &'static str {
        match self {
            OpType::Read => "read",
            OpType::Write => "write",
            OpType::Delete => "delete",
            OpType::Seek => "seek",
            OpType::Update => "update",
            OpType::Merge => "merge",
            OpType::Crc => "crc",
            OpType::Hash => "hash",
            OpType::Other => "op",
        }
    }
}

/// What the monitor thread reads while a client thread runs.
#[derive(Debug, Default)]
pub struct LiveCounters {
    /// Operations done.
    pub ops: AtomicU64,
    /// Bytes written by this thread (keys + values).
    pub write_bytes: AtomicU64,
    /// What the thread did since the monitor last took it.
    pub interval: Mutex<IntervalTally>,
}

/// A thread's latencies and found reads since the monitor last took them,
/// under one lock, so an interval's found reads never outnumber its reads.
#[derive(Debug, Default)]
pub struct IntervalTally {
    /// Latencies (microseconds), one sample per finished call.
    pub hist: Histogram,
    /// Point reads that found their key ([`ThreadStats::finished_read`]).
    pub found: u64,
}

impl IntervalTally {
    /// Adds `other`.
    pub fn merge(&mut self, other: &IntervalTally) {
        self.hist.merge(&other.hist);
        self.found += other.found;
    }
}

/// What the transaction benchmarks' transactions came to (RocksDB's
/// `Status` codes of the failures), summed over the threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransactionCounts {
    /// Transactions begun (batches, without a transaction database).
    pub attempts: u64,
    /// Committed.
    pub committed: u64,
    /// Committed after a prepare (two-phase commit), among `committed`.
    pub prepared: u64,
    /// Rolled back by choice (randomtransaction rolls back 1 in 20, as
    /// db_bench does), not for a failure.
    pub rolled_back: u64,
    /// Failed with `Busy`: a conflict.
    pub busy: u64,
    /// Failed with `Busy` of subcode `kDeadlock`.
    pub deadlock: u64,
    /// Failed with `TimedOut` waiting for a lock.
    pub timed_out: u64,
    /// Failed with `TryAgain`: the memtable history could not tell.
    pub try_again: u64,
    /// Failed with `Expired`.
    pub expired: u64,
}

impl TransactionCounts {
    /// Counts one failed transaction.
    pub fn count_failure(&mut self, e: &TransactionError) {
        match e {
            TransactionError::Busy => self.busy += 1,
            TransactionError::Deadlock => self.deadlock += 1,
            TransactionError::TimedOut => self.timed_out += 1,
            TransactionError::TryAgain => self.try_again += 1,
            TransactionError::Expired => self.expired += 1,
            TransactionError::Other(_) => {}
        }
    }

    /// Transactions that failed (db_bench's `aborts`).
    pub fn aborted(&self) -> u64 {
        self.busy + self.deadlock + self.timed_out + self.try_again + self.expired
    }

    /// Adds `other`.
    pub fn add(&mut self, other: &TransactionCounts) {
        self.attempts += other.attempts;
        self.committed += other.committed;
        self.prepared += other.prepared;
        self.rolled_back += other.rolled_back;
        self.busy += other.busy;
        self.deadlock += other.deadlock;
        self.timed_out += other.timed_out;
        self.try_again += other.try_again;
        self.expired += other.expired;
    }
}

/// One thread's statistics.
#[derive(Debug)]
pub struct ThreadStats {
    /// Thread index.
    pub id: usize,
    start: Instant,
    finish: Instant,
    last_op: Instant,
    done: u64,
    found: u64,
    bytes: u64,
    hists: BTreeMap<OpType, Histogram>,
    message: String,
    range_deletions: u64,
    /// The transaction benchmarks' outcomes.
    pub transactions: TransactionCounts,
    live: Arc<LiveCounters>,
    exclude_from_merge: bool,
}

impl ThreadStats {
    /// Statistics starting now.
    pub fn new(id: usize, live: Arc<LiveCounters>) -> ThreadStats {
        let now = Instant::now();
        ThreadStats {
            id,
            start: now,
            finish: now,
            last_op: now,
            done: 0,
            found: 0,
            bytes: 0,
            hists: BTreeMap::new(),
            message: String::new(),
            range_deletions: 0,
            transactions: TransactionCounts::default(),
            live,
            exclude_from_merge: false,
        }
    }

    /// Restarts the clock (after per-thread setup).
    pub fn start(&mut self) {
        let now = Instant::now();
        self.start = now;
        self.finish = now;
        self.last_op = now;
    }

    /// Records `n` operations of `op` finished now; one latency sample since the previous op.
    pub fn finished_ops(&mut self, n: u64, op: OpType) {
        self.finished(n, op, false);
    }

    /// Records one point read finished now, and whether it found its key
    /// (the found / not-found figures of `--readers`).
    pub fn finished_read(&mut self, found: bool) {
        self.finished(1, OpType::Read, found);
    }

    fn finished(&mut self, n: u64, op: OpType, found: bool) {
        let now = Instant::now();
        let micros = now.duration_since(self.last_op).as_micros() as u64;
        self.hists.entry(op).or_default().add(micros);
        {
            let mut tally = self.live.interval.lock();
            tally.hist.add(micros);
            tally.found += u64::from(found);
        }
        self.live.ops.fetch_add(n, Ordering::Relaxed);
        self.done += n;
        self.found += u64::from(found);
        self.last_op = now;
    }

    /// Hides a wait (the rate limiter's) from the next latency sample.
    pub fn reset_last_op_time(&mut self) {
        self.last_op = Instant::now();
    }

    /// Adds bytes moved (reads and writes), for the MB/s figure.
    pub fn add_bytes(&mut self, n: u64) {
        self.bytes += n;
    }

    /// Counts bytes written (for the live ingest figure) as well as moved.
    pub fn add_write_bytes(&mut self, n: u64) {
        self.bytes += n;
        self.live.write_bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts bytes written for the live ingest figure only (mixgraph's
    /// Puts, which db_bench leaves out of the MB/s figure).
    pub fn count_written(&self, n: u64) {
        self.live.write_bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// Appends to the message printed after the result line.
    pub fn add_message(&mut self, msg: &str) {
        if !self.message.is_empty() {
            self.message.push(' ');
        }
        self.message.push_str(msg);
    }

    /// Counts one range deletion (`--writes_per_range_tombstone`), which
    /// db_bench counts apart from the operations.
    pub fn count_range_deletion(&mut self) {
        self.range_deletions += 1;
    }

    /// Range deletions this thread issued.
    pub fn range_deletions(&self) -> u64 {
        self.range_deletions
    }

    /// Keeps this thread out of the reported figures (readwhilewriting's writer).
    pub fn exclude_from_merge(&mut self) {
        self.exclude_from_merge = true;
    }

    /// True when excluded.
    pub fn is_excluded(&self) -> bool {
        self.exclude_from_merge
    }

    /// Operations done.
    pub fn done(&self) -> u64 {
        self.done
    }

    /// Marks the end of the thread's work.
    pub fn stop(&mut self) {
        self.finish = Instant::now();
    }
}

/// Several threads' statistics merged (db_bench `Stats::Merge` + `Report`).
#[derive(Debug, Clone, Default)]
pub struct Merged {
    /// Operations.
    pub done: u64,
    /// Point reads that found their key, where the threads count them
    /// ([`ThreadStats::finished_read`]).
    pub found: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Sum of the threads' elapsed seconds.
    pub thread_seconds: f64,
    /// Wall-clock seconds from the first start to the last finish.
    pub elapsed: f64,
    /// Latency histograms by operation type.
    pub hists: BTreeMap<OpType, Histogram>,
    /// Messages of the threads (identical messages once).
    pub message: String,
    /// The transaction benchmarks' outcomes, summed.
    pub transactions: TransactionCounts,
}

impl Merged {
    /// Merges the threads not excluded.
    pub fn from_threads(threads: &[ThreadStats]) -> Merged {
        let included: Vec<&ThreadStats> = threads.iter().filter(|t| !t.exclude_from_merge).collect();
        let mut m = Merged::default();
        let (Some(start), Some(finish)) =
            (included.iter().map(|t| t.start).min(), included.iter().map(|t| t.finish).max())
        else {
            return m;
        };
        m.elapsed = finish.duration_since(start).as_secs_f64();
        for t in &included {
            m.done += t.done;
            m.found += t.found;
            m.bytes += t.bytes;
            m.transactions.add(&t.transactions);
            m.thread_seconds += t.finish.duration_since(t.start).as_secs_f64();
            for (op, h) in &t.hists {
                m.hists.entry(*op).or_default().merge(h);
            }
        }
        // db_bench keeps the message of the merged-into thread; the threads of
        // one benchmark report the same kind of message, so keep thread 0's.
        m.message = included.first().map(|t| t.message.clone()).unwrap_or_default();
        m
    }

    /// Operations per second over the wall-clock time.
    pub fn ops_per_sec(&self) -> f64 {
        if self.elapsed > 0.0 {
            self.done.max(1) as f64 / self.elapsed
        } else {
            0.0
        }
    }

    /// Microseconds per operation per thread (db_bench's figure).
    pub fn micros_per_op(&self) -> f64 {
        self.thread_seconds * 1e6 / self.done.max(1) as f64
    }

    /// MB/s (MB = 1048576 bytes) over the wall-clock time; `None` without bytes.
    pub fn mb_per_sec(&self) -> Option<f64> {
        (self.bytes > 0 && self.elapsed > 0.0).then(|| self.bytes as f64 / 1048576.0 / self.elapsed)
    }
}

/// db_bench's result line:
/// `%-12s : %11.3f micros/op %ld ops/sec %.3f seconds %lu operations;%s%s`.
pub fn result_line(name: &str, m: &Merged) -> String {
    let mut extra = String::new();
    if let Some(mb) = m.mb_per_sec() {
        extra = format!("{mb:>6.1} MB/s");
    }
    if !m.message.is_empty() {
        if !extra.is_empty() {
            extra.push(' ');
        }
        extra.push_str(&m.message);
    }
    format!(
        "{:<12} : {:>11.3} micros/op {} ops/sec {:.3} seconds {} operations;{}{}",
        name,
        m.micros_per_op(),
        m.ops_per_sec() as i64,
        m.elapsed,
        m.done.max(1),
        if extra.is_empty() { "" } else { " " },
        extra
    )
}

/// One parsed result line.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultLine {
    /// Benchmark name.
    pub name: String,
    /// micros/op.
    pub micros_per_op: f64,
    /// ops/sec.
    pub ops_per_sec: f64,
    /// seconds.
    pub seconds: f64,
    /// operations.
    pub operations: u64,
    /// MB/s, when printed.
    pub mb_per_sec: Option<f64>,
}

/// Parses a db_bench result line (ours or db_bench's own).
pub fn parse_result_line(line: &str) -> Option<ResultLine> {
    let (name, rest) = line.split_once(" : ")?;
    let name = name.trim();
    if name.is_empty() || name.contains(' ') {
        return None;
    }
    let words: Vec<&str> = rest.split_whitespace().collect();
    let pos = |w: &str| words.iter().position(|x| *x == w);
    let micros_per_op = words.get(pos("micros/op")?.checked_sub(1)?)?.parse().ok()?;
    let ops_per_sec = words.get(pos("ops/sec")?.checked_sub(1)?)?.parse().ok()?;
    let seconds = words.get(pos("seconds")?.checked_sub(1)?)?.parse().ok()?;
    let operations = words.get(pos("operations;")?.checked_sub(1)?)?.parse().ok()?;
    let mb_per_sec = pos("MB/s").and_then(|i| words.get(i.checked_sub(1)?)?.parse().ok());
    Some(ResultLine { name: name.to_string(), micros_per_op, ops_per_sec, seconds, operations, mb_per_sec })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_line_matches_db_bench_layout() {
        let m = Merged {
            done: 810000,
            found: 0,
            bytes: (9.0 * 1048576.0 * 10.0) as u64,
            thread_seconds: 10.0,
            elapsed: 10.0,
            hists: BTreeMap::new(),
            message: String::new(),
            transactions: TransactionCounts::default(),
        };
        assert_eq!(
            result_line("fillrandom", &m),
            "fillrandom   :      12.346 micros/op 81000 ops/sec 10.000 seconds 810000 operations;    9.0 MB/s"
        );
        let parsed = parse_result_line(&result_line("fillrandom", &m)).unwrap();
        assert_eq!(parsed.name, "fillrandom");
        assert_eq!(parsed.operations, 810000);
        assert_eq!(parsed.ops_per_sec, 81000.0);
        assert_eq!(parsed.mb_per_sec, Some(9.0));
    }

    #[test]
    fn result_line_without_bytes_has_no_mb() {
        let m = Merged { done: 1, thread_seconds: 2.0, elapsed: 2.0, ..Merged::default() };
        let line = result_line("compact", &m);
        assert!(line.ends_with("1 operations;"), "{line}");
        assert!(parse_result_line(&line).unwrap().mb_per_sec.is_none());
        assert!(parse_result_line("Date:       Mon").is_none());
    }
}
