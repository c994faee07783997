//! Events and what they report: the listener callbacks for background events
//! (RocksDB `EventListener`, `listener.h`) and the facts they carry: flush
//! and compaction job infos, compaction reasons, stall conditions, tuning
//! decisions and the recovery report. A layer of its own, below the options
//! (which hold the listeners) and the compaction and db layers (which raise
//! the events).
//!
//! Callbacks run on the thread that did the work, without the db mutex held
//! (but for `on_background_error`); they must be quick and must not call back
//! into the database's write path.
//!
//! Listeners are user code, called defensively (as RocksDB does): a callback
//! that panics is caught, written to the info log (`LOG`) with the
//! callback's name and the panic's message, and otherwise ignored; the job
//! that called it and the other listeners carry on.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use crate::stats::{StallCause, COMPACTION_REASONS};
use crate::wal::WalRecoveryMode;

/// Facts about a flush, at its start (file number and counts 0) or its
/// end.
#[derive(Debug, Clone)]
pub struct FlushJobInfo {
    /// The column family flushed: its id ...
    pub cf_id: u32,
    /// ... and its name (RocksDB's `cf_name`).
    pub cf_name: String,
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
    /// The column family compacted: its id ...
    pub cf_id: u32,
    /// ... and its name (RocksDB's `cf_name`).
    pub cf_name: String,
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
    pub reason: CompactionReason,
}

/// How a [`Db::resume`](crate::Db::resume) ended (RocksDB's
/// `BackgroundErrorRecoveryInfo`).
#[derive(Debug, Clone)]
pub struct ErrorRecoveryInfo {
    /// The background error the resume started from.
    pub old_error: Arc<crate::Error>,
    /// `None` when the database recovered and takes writes again; else what
    /// stopped the recovery (the old error still stands).
    pub new_error: Option<Arc<crate::Error>>,
}

/// A deleted table file.
#[derive(Debug, Clone)]
pub struct TableFileDeletionInfo {
    /// Its path.
    pub file_path: PathBuf,
    /// Its number.
    pub file_number: u64,
    /// Whether the deletion succeeded (a file left is deleted later).
    pub deleted: bool,
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
///
/// As RocksDB asks of its listeners, a method returns soon and does not
/// wait on the database: it is called from the job or writer it tells of.
/// Reads are fine from any of them. A flush or compaction callback that
/// waits for flushes or compactions (`flush(true)`, `compact_range`,
/// `wait_for_compact`, a checkpoint) waits for its own job, which counts as
/// running until the callback returns; `on_stall_conditions_changed` runs
/// in the write group's leader, so a write or flush from it waits for
/// itself. Both never return.
pub trait EventListener: Send + Sync {
    /// A flush of `info.cf_name` is about to start (counts 0).
    fn on_flush_begin(&self, _info: &FlushJobInfo) {}
    /// A flush finished and its file is installed.
    fn on_flush_completed(&self, _info: &FlushJobInfo) {}
    /// A compaction is about to start.
    fn on_compaction_begin(&self, _info: &CompactionJobInfo) {}
    /// A compaction finished (installed, failed or cancelled).
    fn on_compaction_completed(&self, _info: &CompactionJobInfo) {}
    /// The write-stall condition changed. Called by the writer that found
    /// it, in its write group: it must not write to or flush the database.
    fn on_stall_conditions_changed(&self, _previous: StallCondition, _current: StallCondition) {}
    /// A background error became sticky; writes fail until a resume or a
    /// reopen ([`Db::resume`](crate::Db::resume)). Called
    /// with the database's mutex held: it must not call the database.
    fn on_background_error(&self, _error: &crate::Error) {}
    /// [`Db::resume`](crate::Db::resume) starts recovering from `error`,
    /// the sticky background error (RocksDB's `OnErrorRecoveryBegin`, which
    /// Ebb calls only for a resume asked for: it has no automatic
    /// recovery). Called with the database's mutex held: it must not call
    /// the database.
    fn on_error_recovery_begin(&self, _error: &crate::Error) {}
    /// A resume ended (RocksDB's `OnErrorRecoveryEnd`): `info.new_error` is
    /// `None` when writes are accepted again. Called with the database's
    /// mutex held: it must not call the database.
    fn on_error_recovery_end(&self, _info: &ErrorRecoveryInfo) {}
    /// A table file was deleted (obsolete: no version lists it and no
    /// reader holds it). RocksDB's `OnTableFileDeleted`.
    fn on_table_file_deleted(&self, _info: &TableFileDeletionInfo) {}
    /// A background tuner changed something (docs/tuning.md).
    fn on_background_tuning(&self, _event: &TuningEvent) {}
    /// The open that is finishing accepted damage (a WAL record or the
    /// MANIFEST's incomplete last record left out) or set files aside in
    /// `lost/`; called once, before `Db::open` returns, only when there is
    /// something to report.
    fn on_recovery_damage(&self, _report: &RecoveryReport) {}
}

/// Why a compaction was chosen (RocksDB `CompactionReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompactionReason {
    /// L0 reached `level0_file_num_compaction_trigger`.
    L0FileCount,
    /// A level exceeded its target size.
    LevelSize,
    /// L0 files merged into one L0 file because L0→base was blocked.
    IntraL0,
    /// Asked for by `compact_range`.
    Manual,
    /// Universal: the runs above the oldest outgrew `max_size_amplification_percent` of it.
    UniversalSizeAmplification,
    /// Universal: adjacent runs of similar size (`size_ratio`) merged.
    UniversalSizeRatio,
    /// Universal: more sorted runs than `level0_file_num_compaction_trigger`.
    UniversalSortedRunNum,
    /// FIFO: the oldest files dropped to get under `max_table_files_size`.
    FifoMaxSize,
    /// FIFO: files older than `ttl` dropped.
    FifoTtl,
    /// FIFO with `allow_compaction`: small L0 files merged into one.
    FifoReduceNumFiles,
    /// A table rewritten in place so the oldest blob files, mostly
    /// garbage, can go (`blob_garbage_collection_force_threshold`).
    ForcedBlobGc,
    /// Leveled: a file older than `ttl` moved on to the next level.
    Ttl,
    /// Leveled: a file older than `periodic_compaction_seconds` rewritten
    /// (in its own level when it is the last).
    PeriodicCompaction,
}

impl CompactionReason {
    /// Every reason, in a fixed order (the index of per-reason counters).
    pub const ALL: [CompactionReason; COMPACTION_REASONS] = [
        CompactionReason::L0FileCount,
        CompactionReason::LevelSize,
        CompactionReason::IntraL0,
        CompactionReason::Manual,
        CompactionReason::UniversalSizeAmplification,
        CompactionReason::UniversalSizeRatio,
        CompactionReason::UniversalSortedRunNum,
        CompactionReason::FifoMaxSize,
        CompactionReason::FifoTtl,
        CompactionReason::FifoReduceNumFiles,
        CompactionReason::ForcedBlobGc,
        CompactionReason::Ttl,
        CompactionReason::PeriodicCompaction,
    ];

    /// RocksDB's name for the reason (`GetCompactionReasonString`); intra-L0 is Ebb's.
    pub fn name(self) -> &'static str {
        match self {
            CompactionReason::L0FileCount => "LevelL0FilesNum",
            CompactionReason::LevelSize => "LevelMaxLevelSize",
            CompactionReason::IntraL0 => "IntraL0",
            CompactionReason::Manual => "ManualCompaction",
            CompactionReason::UniversalSizeAmplification => "UniversalSizeAmplification",
            CompactionReason::UniversalSizeRatio => "UniversalSizeRatio",
            CompactionReason::UniversalSortedRunNum => "UniversalSortedRunNum",
            CompactionReason::FifoMaxSize => "FIFOMaxSize",
            CompactionReason::FifoTtl => "FIFOTtl",
            CompactionReason::FifoReduceNumFiles => "FIFOReduceNumFiles",
            CompactionReason::ForcedBlobGc => "ForcedBlobGC",
            CompactionReason::Ttl => "Ttl",
            CompactionReason::PeriodicCompaction => "PeriodicCompaction",
        }
    }

    /// Index into [`CompactionReason::ALL`].
    pub fn index(self) -> usize {
        CompactionReason::ALL.iter().position(|r| *r == self).unwrap_or(0)
    }
}

/// A tuning decision, as reported to listeners.
#[derive(Debug, Clone, PartialEq)]
pub struct TuningEvent {
    /// The mode that decided.
    pub mode: &'static str,
    /// What changed, in words (`disable compaction`, `pause compactions`, ...).
    pub action: String,
    /// The phase after the decision.
    pub phase: &'static str,
}

/// The directory, inside the database directory, where files recovery would
/// not delete are moved (LevelDB's RepairDB convention).
pub const LOST_DIR: &str = "lost";

/// Damage in a log file (a WAL or the MANIFEST) that recovery or repair
/// accepted and left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDamage {
    /// The file, as its path was given to the reader.
    pub file: String,
    /// Offset of the damaged record.
    pub offset: u64,
    /// Bytes from the damaged record to the end of the file (the part not
    /// replayed; for records repair skipped, the bytes skipped).
    pub bytes: u64,
    /// What check failed.
    pub reason: String,
}

impl LogDamage {
    /// The report's copy of damage a log reader found.
    fn from_log(d: crate::wal::LogDamage) -> Self {
        let crate::wal::LogDamage { file, offset, bytes, reason } = d;
        LogDamage { file, offset, bytes, reason }
    }
}

/// What recovering the MANIFEST tolerated or left out; all empty for an
/// intact MANIFEST (docs/reliability.md, "Damage and what it leads to").
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ManifestRecovery {
    /// The MANIFEST replayed.
    pub file: String,
    /// Its last record was incomplete (an append cut short by a crash) and
    /// was ignored.
    pub torn_tail: Option<LogDamage>,
    /// `best_efforts_recovery`: the damage replay stopped at; later records
    /// were not read.
    pub stopped_at: Option<LogDamage>,
    /// `best_efforts_recovery`: edits read but left out, because every state
    /// after them lists a table or blob file that does not exist.
    pub edits_left_out: u64,
    /// `best_efforts_recovery`: the missing tables that made it leave them
    /// out.
    pub missing_tables: Vec<u64>,
    /// `best_efforts_recovery`: the missing blob files that made it leave
    /// them out.
    pub missing_blob_files: Vec<u64>,
}

impl ManifestRecovery {
    /// The report's part of what the MANIFEST's recovery found: all of it
    /// but the next file number the MANIFEST recorded, which stays with the
    /// recovery (it decides by it what to set aside).
    pub(crate) fn from_version(m: crate::version::ManifestRecovery) -> Self {
        ManifestRecovery {
            file: m.file,
            torn_tail: m.torn_tail.map(LogDamage::from_log),
            stopped_at: m.stopped_at.map(LogDamage::from_log),
            edits_left_out: m.edits_left_out,
            missing_tables: m.missing_tables,
            missing_blob_files: m.missing_blob_files,
        }
    }
}

/// Damage a WAL recovery mode accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalDamage {
    /// The WAL's number.
    pub number: u64,
    /// Where the damage starts, how many bytes were not replayed, and why.
    pub damage: LogDamage,
    /// Intact records after the damage that were not replayed (point-in-time
    /// recovery stops at the damage).
    pub records_dropped: u64,
    /// The mode that accepted it.
    pub mode: WalRecoveryMode,
    /// Whether replay stopped here, leaving every later WAL unread.
    pub stopped_replay: bool,
    /// Intact records in later pending WALs left out because replay stopped
    /// here: none was acknowledged as synced (module documentation).
    pub later_records_dropped: u64,
}

/// A file moved to `lost/` instead of being deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetAside {
    /// Where it was.
    pub from: PathBuf,
    /// Where it is now.
    pub to: PathBuf,
    /// Why it was not deleted.
    pub why: String,
}

/// What an open found damaged and left out, and what it set aside. Empty
/// after the open of an undamaged database that crashed nowhere special.
#[derive(Debug, Clone, Default)]
pub struct RecoveryReport {
    /// What replaying the MANIFEST tolerated (an incomplete last record) or,
    /// with `best_efforts_recovery`, left out.
    pub manifest: ManifestRecovery,
    /// Damage accepted in WALs, oldest first.
    pub wal_damage: Vec<WalDamage>,
    /// Files moved to `lost/`.
    pub set_aside: Vec<SetAside>,
}

impl RecoveryReport {
    /// True when recovery accepted damage of any kind: then nothing is
    /// deleted at this open, only set aside.
    pub fn tolerated_damage(&self) -> bool {
        let m = &self.manifest;
        m.torn_tail.is_some() || m.stopped_at.is_some() || m.edits_left_out > 0 || !self.wal_damage.is_empty()
    }

    /// True when there is nothing to report.
    pub fn is_empty(&self) -> bool {
        !self.tolerated_damage() && self.set_aside.is_empty()
    }
}

impl fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return writeln!(f, "recovery: nothing damaged, nothing set aside");
        }
        let m = &self.manifest;
        if let Some(d) = &m.torn_tail {
            writeln!(
                f,
                "{}: last record at offset {} incomplete ({}); {} bytes ignored (an append cut short)",
                d.file, d.offset, d.reason, d.bytes
            )?;
        }
        if let Some(d) = &m.stopped_at {
            writeln!(
                f,
                "{}: best-efforts recovery stopped at offset {} ({}); {} bytes not read",
                d.file, d.offset, d.reason, d.bytes
            )?;
        }
        if m.edits_left_out > 0 {
            let tables = m.missing_tables.iter().map(|n| format!("{n:06}.sst"));
            let missing: Vec<String> =
                tables.chain(m.missing_blob_files.iter().map(|n| format!("{n:06}.blob"))).collect();
            writeln!(
                f,
                "{}: best-efforts recovery left out its last {} edits, whose state lists missing files: {}",
                m.file,
                m.edits_left_out,
                missing.join(", ")
            )?;
        }
        for w in &self.wal_damage {
            writeln!(
                f,
                "{}: damage at offset {} ({}); {} bytes and {} intact records after it not replayed ({:?})",
                w.damage.file, w.damage.offset, w.damage.reason, w.damage.bytes, w.records_dropped, w.mode
            )?;
            if w.later_records_dropped > 0 {
                writeln!(
                    f,
                    "{}: {} records in later pending WALs (none acknowledged as synced) not replayed",
                    w.damage.file, w.later_records_dropped
                )?;
            }
        }
        for s in &self.set_aside {
            writeln!(f, "set aside {} as {}: {}", s.from.display(), s.to.display(), s.why)?;
        }
        Ok(())
    }
}
