//! Opening (or creating) the Ebb database a node keeps its Raft state in,
//! and handing each store the column families it owns.
//!
//! The families (docs/cluster.md, "Storage layout"): the log store owns
//! [`LOG_FAMILY`] and [`LOG_META_FAMILY`]; the state machine owns
//! [`DATA_FAMILY`] and [`SM_META_FAMILY`]; its snapshot store owns
//! [`SNAPSHOT_FAMILY`] and the snapshot directory inside the database's
//! (`raft-snapshots`). No store reads or writes another's families; the
//! default family is left to the application.

use std::path::Path;
use std::sync::Arc;

use ebb::{ColumnFamilyOptions, Db, Error, Options};

use crate::log_store::LogStore;
use crate::snapshot_store::SnapshotStore;
use crate::state_machine::StateMachine;

/// DO NOT CHANGE: on-disk format. Log entries, by index.
pub(crate) const LOG_FAMILY: &str = "raft_log";
/// DO NOT CHANGE: on-disk format. The vote, the committed log id and the
/// last purged log id.
pub(crate) const LOG_META_FAMILY: &str = "raft_meta";
/// DO NOT CHANGE: on-disk format. The application's keys and values.
pub(crate) const DATA_FAMILY: &str = "sm_data";
/// DO NOT CHANGE: on-disk format. The last applied log id and membership.
pub(crate) const SM_META_FAMILY: &str = "sm_meta";
/// DO NOT CHANGE: on-disk format. The current snapshot.
pub(crate) const SNAPSHOT_FAMILY: &str = "sm_snapshot";

const FAMILIES: [&str; 5] = [LOG_FAMILY, LOG_META_FAMILY, DATA_FAMILY, SM_META_FAMILY, SNAPSHOT_FAMILY];

/// Opens the Raft storage in the Ebb database at `path`, creating the
/// database and its column families if they are missing
/// (`create_if_missing` is set). `options` configure the database and
/// every family.
///
/// Returns the log store and the state machine to give to
/// `openraft::Raft::new`. Both share the database, which closes when the
/// last of them (and of the log readers and snapshot builders made from
/// them) is dropped.
///
/// Errors: Ebb's, from opening the database, creating a family, or
/// creating the snapshot directory and removing the files left in it by a
/// build, transfer or install that did not finish.
pub fn open(path: impl AsRef<Path>, options: Options) -> ebb::Result<(LogStore, StateMachine)> {
    let db = Arc::new(open_database(path.as_ref(), options)?);
    let handle = |name: &str| {
        db.cf_handle(name).ok_or_else(|| Error::NotFound(format!("column family '{name}' after creating it")))
    };
    let log_store = LogStore::new(Arc::clone(&db), handle(LOG_FAMILY)?, handle(LOG_META_FAMILY)?);
    let snapshots = SnapshotStore::open(Arc::clone(&db), handle(SNAPSHOT_FAMILY)?)?;
    let state_machine = StateMachine::new(Arc::clone(&db), handle(DATA_FAMILY)?, handle(SM_META_FAMILY)?, snapshots);
    Ok((log_store, state_machine))
}

/// Opens the database with every family it has, then creates those of
/// [`FAMILIES`] it lacks (as `create_missing_column_families` would, with
/// the families the database has left as they are): a new database takes
/// two steps, and a crash between them leaves a database the next open
/// completes.
fn open_database(path: &Path, options: Options) -> ebb::Result<Db> {
    let options = options.create_if_missing(true);
    let family_options: ColumnFamilyOptions = options.cf_options();
    let db = match Db::list_column_families(path, &options) {
        Ok(names) => {
            let families: Vec<(&str, ColumnFamilyOptions)> =
                names.iter().map(|name| (name.as_str(), family_options.clone())).collect();
            Db::open_cf(path, options, &families)?
        }
        // No database there yet, or none that can be read: `Db::open`
        // creates one, or reports why the directory cannot hold one.
        Err(_) => Db::open(path, options)?,
    };
    for name in FAMILIES {
        if db.cf_handle(name).is_none() {
            db.create_column_family(name, family_options.clone())?;
        }
    }
    Ok(db)
}
