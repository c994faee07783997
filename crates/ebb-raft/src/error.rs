//! Ebb's errors and decoding errors as openraft's `StorageError`.
//!
//! openraft stops a node on any `StorageError`, so the subject says what
//! the node could not read or write (the logs or one entry, the vote, the
//! state machine, a snapshot) and the verb whether it was reading or
//! writing; the source error (Ebb's or the decoder's) is kept as the cause.

use openraft::{AnyError, ErrorSubject, ErrorVerb, StorageError, StorageIOError};

use crate::types::NodeId;

/// openraft's storage error, for this crate's node ids.
pub type StoreError = StorageError<NodeId>;

/// A failed read of `subject`, caused by `source`.
pub(crate) fn read_error<E: std::error::Error + 'static>(subject: ErrorSubject<NodeId>, source: &E) -> StoreError {
    StorageIOError::new(subject, ErrorVerb::Read, AnyError::new(source)).into()
}

/// A failed write of `subject`, caused by `source`.
pub(crate) fn write_error<E: std::error::Error + 'static>(subject: ErrorSubject<NodeId>, source: &E) -> StoreError {
    StorageIOError::new(subject, ErrorVerb::Write, AnyError::new(source)).into()
}
