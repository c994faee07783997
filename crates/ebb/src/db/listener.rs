//! Event listeners: callbacks for background events (RocksDB `EventListener`).
//!
//! Callbacks run on the thread that did the work, without the db mutex held
//! (but for `on_background_error`); they must be quick and must not call back
//! into the database's write path.
//!
//! Listeners are user code, called defensively (as RocksDB does): a callback
//! that panics is caught, written to the info log (`LOG`) with the
//! callback's name and the panic's message, and otherwise ignored; the job
//! that called it and the other listeners carry on.

use crate::stats::StallCause;

/// Facts about a finished flush.
#[derive(Debug, Clone)]
pub struct FlushJobInfo {
    /// The new L0 file's number (0 when the flush wrote nothing).
    pub file_number: u64,
    /// Bytes written.
    pub bytes_written: u64,
    /// Entries read from the memtables.
    pub entries: u64,
    /// Microseconds the flush took.
    pub micros: u64,
}

/// Facts about a compaction, at its start (byte counts 0) or its end.
#[derive(Debug, Clone)]
pub struct CompactionJobInfo {
    /// Level of the first inputs.
    pub input_level: usize,
    /// Level of the outputs.
    pub output_level: usize,
    /// Input file numbers.
    pub input_files: Vec<u64>,
    /// Output file numbers (empty at the start).
    pub output_files: Vec<u64>,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written (0 for a trivial move).
    pub bytes_written: u64,
    /// The inputs were moved, not rewritten.
    pub trivial_move: bool,
    /// The compaction was cancelled (only in `on_compaction_completed`).
    pub cancelled: bool,
    /// Microseconds the compaction took (0 at the start).
    pub micros: u64,
    /// Why the compaction was chosen.
    pub reason: crate::compaction::CompactionReason,
}

/// The write-stall condition after a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StallCondition {
    /// Writes run at full speed.
    Normal,
    /// Writes are delayed, for the given cause.
    Delayed(StallCause),
    /// Writes are stopped, for the given cause.
    Stopped(StallCause),
}

/// Receives background events. Every method has an empty default.
pub trait EventListener: Send + Sync {
    /// A flush is about to start.
    fn on_flush_begin(&self) {}
    /// A flush finished and its file is installed.
    fn on_flush_completed(&self, _info: &FlushJobInfo) {}
    /// A compaction is about to start.
    fn on_compaction_begin(&self, _info: &CompactionJobInfo) {}
    /// A compaction finished (installed, failed or cancelled).
    fn on_compaction_completed(&self, _info: &CompactionJobInfo) {}
    /// The write-stall condition changed.
    fn on_stall_conditions_changed(&self, _previous: StallCondition, _current: StallCondition) {}
    /// A background error became sticky; writes fail until reopen. Called
    /// with the database's mutex held: it must not call the database.
    fn on_background_error(&self, _error: &crate::Error) {}
    /// A background tuner changed something (docs/tuning.md).
    fn on_background_tuning(&self, _event: &super::TuningEvent) {}
    /// The open that is finishing accepted damage (a WAL record or the
    /// MANIFEST's incomplete last record left out) or set files aside in
    /// `lost/`; called once, before `Db::open` returns, only when there is
    /// something to report.
    fn on_recovery_damage(&self, _report: &super::RecoveryReport) {}
}
