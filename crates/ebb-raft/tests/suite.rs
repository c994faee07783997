//! openraft's storage conformance suite (`openraft::testing::Suite`), as
//! openraft ships it, against the Ebb store: each case opens a fresh
//! database in its own temporary directory.
//!
//! The suite itself waits a second in seven of its cases (it allows a
//! store to purge in the background); that is most of this test's time.

use ebb_raft::{LogStore, StateMachine, StoreError, TypeConfig};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{AnyError, ErrorSubject, ErrorVerb, StorageIOError};
use tempfile::TempDir;

struct EbbStoreBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for EbbStoreBuilder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StoreError> {
        let dir = TempDir::new().map_err(|e| StoreError::from_io_error(ErrorSubject::Store, ErrorVerb::Write, e))?;
        let (log_store, state_machine) = ebb_raft::open(dir.path().join("db"), ebb::Options::default())
            .map_err(|e| StorageIOError::new(ErrorSubject::Store, ErrorVerb::Write, AnyError::new(&e)))?;
        Ok((dir, log_store, state_machine))
    }
}

#[test]
fn openraft_storage_suite() {
    if let Err(e) = Suite::test_all(EbbStoreBuilder) {
        panic!("the suite failed: {e}");
    }
}
