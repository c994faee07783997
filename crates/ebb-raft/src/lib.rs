//! openraft's storage on Ebb: the Raft log and a replicated key-value state
//! machine, both in one Ebb database (docs/cluster.md).
//!
//! [`open`] opens (or creates) the database and returns a [`LogStore`]
//! (openraft's `RaftLogStorage` and `RaftLogReader`) and a [`StateMachine`]
//! (`RaftStateMachine` and `RaftSnapshotBuilder`) for openraft 0.9's
//! storage API (v2), with the type configuration [`TypeConfig`]: requests
//! are [`Request`]s (set, delete, delete a range, or a batch of those),
//! responses [`Response`]s.
//!
//! # Modules
//!
//! Bottom up; a module uses only those listed before it.
//!
//! 1. `snapshot_file`: [`SnapshotFile`], a snapshot's bytes in a file
//!    (openraft's `SnapshotData`); [`bytes`]: byte strings as base64 in
//!    JSON and as bytes in the stored format.
//! 2. `types`: the requests, responses and openraft type configuration.
//! 3. `codec`: the version byte, value and key encodings.
//! 4. `error`: Ebb's and decoding errors as openraft's `StorageError`.
//! 5. `log_store`: the log, the vote and the log pointers.
//! 6. `snapshot`: the snapshot data format, written and read as a stream.
//! 7. `snapshot_store`: the snapshot files and the current snapshot's record.
//! 8. `install`: installing a snapshot by ingesting tables.
//! 9. `state_machine`: applying entries, building and installing snapshots.
//! 10. `open`: the database, its column families, which store owns which.
//!
//! Errors are values: a damaged or unknown stored value is a
//! `StorageError` naming what could not be read (openraft then stops the
//! node), never a panic.

#![deny(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(not(test), warn(clippy::unwrap_used))]
// openraft's traits return its `StorageError` (224 bytes); the helpers that
// build it return it as the traits do rather than box it for one hop.
#![allow(clippy::result_large_err)]

pub mod bytes;
mod codec;
mod error;
mod install;
mod log_store;
mod open;
mod snapshot;
mod snapshot_file;
mod snapshot_store;
mod state_machine;
mod types;

pub use error::StoreError;
pub use log_store::LogStore;
pub use open::open;
pub use snapshot_file::SnapshotFile;
pub use state_machine::{KeyValues, ReadError, StateMachine};
pub use types::{InvalidRequest, NodeId, Operation, Request, Response, TypeConfig};
