//! The crate's one error type.
//!
//! Every fallible public call returns [`Result<T>`]. Errors name what went wrong
//! precisely enough to act on: corruption names the file and offset, I/O names the
//! path, an invalid argument names the option or input.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong in Ebb.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    Io {
        /// The file or directory the call was about.
        path: PathBuf,
        /// The operation that failed (`"open"`, `"append"`, `"sync"`, ...).
        op: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Stored data failed a check: a checksum, a magic number, a length.
    Corruption {
        /// The file that holds the bad data.
        file: String,
        /// Byte offset of the bad data within `file`.
        offset: u64,
        /// What check failed.
        reason: String,
    },
    /// An argument, option or input was refused. The message names it.
    InvalidArgument(String),
    /// The resource is held by someone else: the database directory is
    /// locked by another process or handle, or a transaction's key was
    /// written by another since the transaction read it, or is locked by
    /// another transaction (RocksDB `Status::Busy`). Retrying the whole
    /// transaction may succeed. Also: a file `compact_files` needs is being
    /// compacted (RocksDB's `Status::Aborted` there); retry once that ends.
    Busy(String),
    /// A transaction found a deadlock waiting for a lock (RocksDB
    /// `Status::Busy` with the subcode `kDeadlock`); it took no lock and may
    /// be retried. [`Error::is_busy`] is true for it too.
    Deadlock(String),
    /// A transaction could not be checked for conflicts because the history
    /// it needs is no longer kept in memory (RocksDB `Status::TryAgain`);
    /// retrying the transaction may succeed. Keep more with
    /// `max_write_buffer_size_to_maintain`.
    TryAgain(String),
    /// A transaction waited `lock_timeout` for a lock and did not get it
    /// (RocksDB `Status::TimedOut`).
    TimedOut(String),
    /// A transaction outlived its `expiration` and another took its locks;
    /// it can no longer commit (RocksDB `Status::Expired`).
    Expired(String),
    /// A read from a write batch found merge operands for a key and nothing
    /// they apply to in the batch: the database holds the value (RocksDB
    /// `Status::MergeInProgress`).
    MergeInProgress(String),
    /// A thing asked for by name or position does not exist: a savepoint, a
    /// prepared transaction (RocksDB `Status::NotFound`).
    NotFound(String),
    /// A feature or option value that this build does not support.
    NotSupported(String),
    /// An earlier background flush, compaction or fsync failed (or panicked:
    /// [`Error::Panicked`]); the database refuses writes until
    /// [`Db::resume`](crate::Db::resume) recovers from it (an I/O error) or
    /// the database is reopened.
    Background(Arc<Error>),
    /// Code running for the database panicked: a background job (a flush,
    /// a compaction, the tuner), or the thread leading a group of writes.
    /// It is recorded as the sticky background error (so it reaches callers
    /// wrapped in [`Error::Background`]): what the panic interrupted may be
    /// half done, so the database refuses writes until it is reopened (no
    /// resume ends it), and
    /// the reopen recovers every acknowledged write.
    Panicked {
        /// What panicked (`"flush"`, `"compaction"`, `"subcompaction"`, ...).
        job: &'static str,
        /// The panic's message.
        message: String,
    },
    /// The operation was cancelled (a compaction cancelled at run time).
    Cancelled,
    /// The database was closed.
    Closed,
}

impl Error {
    /// Builds an [`Error::Io`] from an I/O error and the path it concerns.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io { path: path.into(), op, source }
    }

    /// Builds an [`Error::Corruption`].
    pub fn corruption(file: impl Into<String>, offset: u64, reason: impl Into<String>) -> Error {
        Error::Corruption { file: file.into(), offset, reason: reason.into() }
    }

    /// Builds an [`Error::InvalidArgument`].
    pub fn invalid(msg: impl Into<String>) -> Error {
        Error::InvalidArgument(msg.into())
    }

    /// Builds an [`Error::Panicked`] from the payload `std::panic::catch_unwind`
    /// caught for `job`.
    pub(crate) fn panicked(job: &'static str, payload: &(dyn std::any::Any + Send)) -> Error {
        Error::Panicked { job, message: panic_message(payload) }
    }

    /// True for [`Error::Corruption`], also when wrapped as a background error.
    pub fn is_corruption(&self) -> bool {
        match self {
            Error::Corruption { .. } => true,
            Error::Background(e) => e.is_corruption(),
            _ => false,
        }
    }

    /// True for [`Error::Busy`] and [`Error::Deadlock`] (a deadlock is a
    /// kind of busy in RocksDB too).
    pub fn is_busy(&self) -> bool {
        matches!(self, Error::Busy(_) | Error::Deadlock(_))
    }

    /// True for [`Error::Deadlock`].
    pub fn is_deadlock(&self) -> bool {
        matches!(self, Error::Deadlock(_))
    }

    /// True for [`Error::TryAgain`].
    pub fn is_try_again(&self) -> bool {
        matches!(self, Error::TryAgain(_))
    }

    /// True for [`Error::TimedOut`].
    pub fn is_timed_out(&self) -> bool {
        matches!(self, Error::TimedOut(_))
    }

    /// True for [`Error::Expired`].
    pub fn is_expired(&self) -> bool {
        matches!(self, Error::Expired(_))
    }

    /// True when the underlying OS error is "no space left on device".
    pub fn is_no_space(&self) -> bool {
        match self {
            Error::Io { source, .. } => source.raw_os_error() == Some(libc::ENOSPC),
            Error::Background(e) => e.is_no_space(),
            _ => false,
        }
    }

    /// A copy of this error for a second recipient (background errors are
    /// reported to every later writer). I/O errors keep their kind and message.
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Io { path, op, source } => Error::Io {
                path: path.clone(),
                op,
                source: match source.raw_os_error() {
                    Some(code) => std::io::Error::from_raw_os_error(code),
                    None => std::io::Error::new(source.kind(), source.to_string()),
                },
            },
            Error::Corruption { file, offset, reason } => {
                Error::Corruption { file: file.clone(), offset: *offset, reason: reason.clone() }
            }
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::Busy(m) => Error::Busy(m.clone()),
            Error::Deadlock(m) => Error::Deadlock(m.clone()),
            Error::TryAgain(m) => Error::TryAgain(m.clone()),
            Error::TimedOut(m) => Error::TimedOut(m.clone()),
            Error::Expired(m) => Error::Expired(m.clone()),
            Error::MergeInProgress(m) => Error::MergeInProgress(m.clone()),
            Error::NotFound(m) => Error::NotFound(m.clone()),
            Error::NotSupported(m) => Error::NotSupported(m.clone()),
            Error::Background(e) => Error::Background(e.clone()),
            Error::Panicked { job, message } => Error::Panicked { job, message: message.clone() },
            Error::Cancelled => Error::Cancelled,
            Error::Closed => Error::Closed,
        }
    }
}

/// The message of a panic caught by `std::panic::catch_unwind`: what
/// `panic!` was given (a literal or a format string), or a placeholder for
/// another payload (`std::panic::panic_any`).
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(m), _) => (*m).to_string(),
        (None, Some(m)) => m.clone(),
        (None, None) => "a panic without a message".to_string(),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, op, source } => {
                write!(f, "I/O error: {op} {}: {source}", path.display())
            }
            Error::Corruption { file, offset, reason } => {
                write!(f, "corruption in {file} at offset {offset}: {reason}")
            }
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::Busy(m) => write!(f, "busy: {m}"),
            Error::Deadlock(m) => write!(f, "deadlock: {m}"),
            Error::TryAgain(m) => write!(f, "try again: {m}"),
            Error::TimedOut(m) => write!(f, "timed out: {m}"),
            Error::Expired(m) => write!(f, "expired: {m}"),
            Error::MergeInProgress(m) => write!(f, "merge in progress: {m}"),
            Error::NotFound(m) => write!(f, "not found: {m}"),
            Error::NotSupported(m) => write!(f, "not supported: {m}"),
            Error::Background(e) => {
                write!(f, "background error, database is read-only until resumed or reopened: {e}")
            }
            Error::Panicked { job, message } => write!(f, "{job} panicked: {message}"),
            Error::Cancelled => write!(f, "operation cancelled"),
            Error::Closed => write!(f, "database is closed"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Background(e) => Some(e.as_ref()),
            _ => None,
        }
    }
}
