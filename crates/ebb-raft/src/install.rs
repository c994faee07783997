//! Installing a snapshot by ingestion (docs/cluster.md, "Installing a
//! snapshot").
//!
//! The snapshot's records stream from its file into one table for the
//! data family, written by Ebb's `SstFileWriter`, behind a range deletion
//! from the empty key to past the last key present or sent (Ebb's range
//! deletions need an end; the successor of the last key is one). Two small
//! tables carry the state machine metadata (`last_applied`,
//! `last_membership`) and the current snapshot's record. One
//! `ingest_external_files` call then takes the three tables into their
//! three families: Ebb records them in one MANIFEST step (a new MANIFEST,
//! as more than one family takes files), so the data, the metadata and the
//! current snapshot change together or, after an error or a crash, not at
//! all.
//!
//! The range deletion spares the table's own keys: an ingested table's
//! keys and range deletions share one sequence number, and a range
//! deletion deletes only what is older (`tests/ingest_semantics.rs`).
//!
//! Nothing that a crash could leave half done is visible: the snapshot
//! file and the tables are synced, and their directory too, before the
//! ingestion names them; a failure before the ingestion removes them, and
//! the snapshot store's clean-up at open removes what a crash, or a failed
//! ingestion, left. Memory is bounded by the
//! reader's buffer and the table writer's index and filter, not by the
//! snapshot's size.

use std::path::PathBuf;
use std::sync::Arc;

use ebb::fs::FileSystem;
use ebb::{ColumnFamilyHandle, Db, IngestExternalFileOptions, SstFileWriter};
use openraft::ErrorSubject;

use crate::codec::{self, FORMAT_VERSION};
use crate::error::{read_error, write_error, StoreError};
use crate::snapshot::{SnapshotReader, IO_SIZE};
use crate::snapshot_file::SnapshotFile;
use crate::snapshot_store::{Meta, SnapshotStore, StoredSnapshot, CURRENT_KEY};
use crate::types::NodeId;

/// Where an install writes, and what it replaces.
pub(crate) struct Install<'a> {
    pub(crate) db: &'a Db,
    pub(crate) data: &'a ColumnFamilyHandle,
    /// Past the last data key present (its successor); `None` when the
    /// family is empty.
    pub(crate) data_end: Option<Vec<u8>>,
    pub(crate) meta: &'a ColumnFamilyHandle,
    /// The state machine metadata's new records in key order; `None`: the
    /// key is deleted.
    pub(crate) meta_records: Vec<(&'static [u8], Option<Vec<u8>>)>,
    pub(crate) snapshots: &'a SnapshotStore,
}

/// The tables of one install; removed when dropped (once ingested they
/// are the database's own copies, or links).
struct Tables {
    fs: Arc<dyn FileSystem>,
    paths: Vec<PathBuf>,
}

impl Drop for Tables {
    fn drop(&mut self) {
        for path in &self.paths {
            if self.fs.exists(path) {
                let _ = self.fs.remove_file(path);
            }
        }
    }
}

impl Install<'_> {
    /// Installs `snapshot` as `meta`; see the module documentation.
    pub(crate) fn run(self, meta: &Meta, snapshot: SnapshotFile) -> Result<(), StoreError> {
        let subject = || ErrorSubject::<NodeId>::Snapshot(Some(meta.signature()));
        let write = |e: ebb::Error| write_error(subject(), &e);
        let snapshots = self.snapshots;
        let (number, mut file) = self.adopt(snapshot).map_err(write)?;
        let (source, len) = file.reader().map_err(write)?;

        let fs = Arc::clone(snapshots.fs());
        let tables = Tables {
            fs: Arc::clone(&fs),
            paths: ["data", "meta", "snapshot"].map(|what| snapshots.table_path(number, what)).to_vec(),
        };
        let options = self.db.options();
        let mut writer = SstFileWriter::create_for(&options, &options.cf_options());

        // The data table.
        writer.open(&tables.paths[0]).map_err(write)?;
        let mut records = SnapshotReader::open(source, len).map_err(|e| read_error(subject(), &e))?;
        let mut value = Vec::with_capacity(IO_SIZE);
        let mut sent_any = false;
        while let Some((k, v)) = records.next_record().map_err(|e| read_error(subject(), &e))? {
            value.clear();
            value.push(FORMAT_VERSION);
            value.extend_from_slice(v);
            writer.put(k, &value).map_err(write)?;
            sent_any = true;
        }
        let sent_end = sent_any.then(|| codec::successor(records.last_key()));
        records.finish().map_err(|e| read_error(subject(), &e))?;
        let end = match (self.data_end, sent_end) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let data_table = match &end {
            Some(end) => {
                writer.delete_range(b"", end).map_err(write)?;
                writer.finish().map_err(write)?;
                true
            }
            None => {
                // Nothing present, nothing sent: the writer refuses an empty
                // table (and removes it); the data family is left as it is.
                let _ = writer.finish();
                false
            }
        };

        // The metadata table.
        writer.open(&tables.paths[1]).map_err(write)?;
        for (key, value) in &self.meta_records {
            match value {
                Some(value) => writer.put(key, value),
                None => writer.delete(key),
            }
            .map_err(write)?;
        }
        writer.finish().map_err(write)?;

        // The current snapshot's record.
        let record = StoredSnapshot { meta: meta.clone(), file: number, len };
        let value = record.encode().map_err(|e| write_error(subject(), &e))?;
        writer.open(&tables.paths[2]).map_err(write)?;
        writer.put(CURRENT_KEY, &value).map_err(write)?;
        writer.finish().map_err(write)?;
        fs.sync_dir(snapshots.dir()).map_err(write)?;

        // The one atomic step.
        let data_tables: &[PathBuf] = if data_table { &tables.paths[..1] } else { &[] };
        let families: [(&ColumnFamilyHandle, &[PathBuf]); 3] =
            [(self.data, data_tables), (self.meta, &tables.paths[1..2]), (snapshots.family(), &tables.paths[2..])];
        let ingest = IngestExternalFileOptions {
            move_files: true,
            // Written moments ago by this process from data whose checksum
            // was checked; every later read still checks each block's.
            verify_checksums_before_ingest: false,
            ..IngestExternalFileOptions::default()
        };
        let _replacing = snapshots.lock();
        // A record that does not decode names no file to remove.
        let replaced = snapshots.read_record().ok().flatten();
        // Kept from here whatever the outcome: a failure after Ebb wrote
        // the MANIFEST edit (its sync failed, say) may leave a record
        // naming the file after a restart. If none does, the next open
        // removes it.
        file.keep();
        self.db.ingest_external_files(&families, &ingest).map_err(write)?;
        snapshots.remove_replaced(replaced, number);
        Ok(())
    }

    /// The snapshot's file in this store's directory, and its number: the
    /// file itself when this store received it, otherwise a copy (a
    /// snapshot handed over from another store).
    fn adopt(&self, mut snapshot: SnapshotFile) -> ebb::Result<(u64, SnapshotFile)> {
        if let Some((store, number)) = snapshot.received_by() {
            if store == self.snapshots.id() {
                return Ok((number, snapshot));
            }
        }
        let (source, len) = snapshot.reader()?;
        let (number, mut copy, pending) = self.snapshots.create()?;
        let mut offset = 0;
        while offset < len {
            let want = usize::try_from(len - offset).map_or(IO_SIZE, |left| left.min(IO_SIZE));
            let bytes = source.read_at(offset, want)?;
            if bytes.is_empty() {
                return Err(ebb::Error::Corruption {
                    file: snapshot.path().display().to_string(),
                    offset,
                    reason: format!("the file ends before its size, {len} bytes"),
                });
            }
            copy.append(&bytes)?;
            offset += bytes.len() as u64;
        }
        copy.sync()?;
        drop(copy);
        let path = pending.path().to_path_buf();
        let file = SnapshotFile::open(Arc::clone(self.snapshots.fs()), path, true)?;
        pending.done();
        Ok((number, file))
    }
}
