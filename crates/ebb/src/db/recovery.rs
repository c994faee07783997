//! Recovery at open, after the MANIFEST: replay the WALs, write what they
//! held into L0 tables, record those and the new WAL in a new MANIFEST, and
//! clean the directory without destroying evidence.
//!
//! Promises (docs/reliability.md, "Damage and what it leads to"):
//! 1. Damage is loud. Whatever a recovery mode accepted and left out of a WAL
//!    (file, offset, bytes, records), and the incomplete last record of a
//!    MANIFEST, is written to the info log, kept in the [`RecoveryReport`]
//!    (`Db::recovery_report`, property `ebb.recovery-report`) and given to
//!    the listeners (`EventListener::on_recovery_damage`).
//! 2. Nothing is deleted on the strength of a damaged file. An open that
//!    tolerated any damage moves what it would otherwise delete into `lost/`
//!    (LevelDB's RepairDB convention); so does every open for a table or
//!    blob file the MANIFEST does not list whose number is at or above the
//!    next file number the MANIFEST recorded (the output of a job, or of an
//!    edit that was lost), and for a WAL whose replay stopped early.
//! 3. File numbers are never reused: the next number is above every numbered
//!    file in the directory and in `lost/`.
//! 4. The recovered state is recorded in one step: the tables written from
//!    the WALs and every family's new log number go into a new MANIFEST that
//!    CURRENT switches to, so a crash during recovery leaves either the old
//!    state (and WALs) or the new one, never a mix of families.
//!
//! Point-in-time recovery follows RocksDB: replay stops at the first damage;
//! a later WAL holding writes, or a column family whose tables hold data
//! logged after the damaged WAL, makes the open fail as corruption. A WAL
//! with its final name starts only after the one before it was synced whole
//! (db/wal_seal.rs), so damage followed by a write in such a WAL is damage to
//! acknowledged data, not a write torn by a crash. A pending WAL
//! (`NNNNNN.log.pending`) holds no write acknowledged as synced: damage
//! before it may be a tail torn by a power loss, so its writes are dropped,
//! reported (`later_records_dropped`) and the file set aside, instead of the
//! open failing. `TolerateCorruptedTailRecords` treats a WAL followed only by
//! pending WALs as the last, and stops there likewise.
//!
//! Requires: called once, from open, before any background thread starts.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::MutexGuard;

use super::batch::TwoPhase;
use super::info_log::Level;
use super::{DbInner, DbState, WriteBatch};
use crate::error::{Error, Result};
use crate::events::{self, LogDamage, RecoveryReport, SetAside, WalDamage, LOST_DIR};
use crate::fs::FileSystem;
use crate::memtable::MemTable;
use crate::options::{Options, WalRecoveryMode};
use crate::stats::bump;
use crate::version::{filename, ManifestRecovery, VersionEdit};
use crate::wal::LogWriter;

/// Per column family during replay: the recovered memtables, the one being
/// filled, its write buffer size and its log number.
struct Recovering {
    mems: Vec<Arc<MemTable>>,
    mem: Option<Arc<MemTable>>,
    write_buffer_size: usize,
    log_number: u64,
    /// The family's key order.
    cmp: crate::comparator::UserComparator,
}

/// Replays the WALs, writes what they held into L0 tables, records them with
/// a new WAL in a new MANIFEST and cleans the directory (module promises).
/// Returns the report, `manifest` included.
pub(super) fn recover(
    inner: &Arc<DbInner>,
    options: &Options,
    manifest: ManifestRecovery,
    read_only: bool,
) -> Result<RecoveryReport> {
    let recorded_next_file = manifest.recorded_next_file;
    let mut report =
        RecoveryReport { manifest: events::ManifestRecovery::from_version(manifest), ..RecoveryReport::default() };
    let mut st = inner.state.lock();
    let names = inner.fs.list_dir(&inner.dir)?;
    // Promise 3: above every numbered file, here and in lost/.
    let lost_names = list_lost(inner.fs.as_ref(), &inner.dir)?;
    if let Some(newest) = newest_number(names.iter().chain(&lost_names)) {
        st.versions.set_next_file_at_least(newest + 1);
    }
    let log_number = st.versions.log_number();
    // Each WAL's number and whether its name is pending (db/wal_seal.rs).
    let mut wal_names: Vec<(u64, bool)> = names
        .iter()
        .filter_map(|n| filename::parse_file_name(n).map(|(t, number)| (t, number, filename::is_pending_wal(n))))
        .filter(|(t, n, _)| *t == filename::FileType::Wal && *n >= log_number)
        .map(|(_, n, pending)| (n, pending))
        .collect();
    wal_names.sort_unstable();
    let wals: Vec<u64> = wal_names.iter().map(|(n, _)| *n).collect();
    check_files_present(inner, &st, &report, log_number, &wals)?;

    let mut last_seq = st.versions.last_sequence();
    let mut recovering: BTreeMap<u32, Recovering> = st
        .families
        .iter()
        .map(|(id, f)| {
            let r = Recovering {
                mems: Vec::new(),
                mem: None,
                write_buffer_size: inner.family_opts(f.data()).write_buffer_size,
                log_number: st.versions.family_log_number(id),
                cmp: f.data().cmp.clone(),
            };
            (id, r)
        })
        .collect();
    let mode = options.wal_recovery_mode;
    let max_family_id = st.versions.next_column_family_id() - 1;
    let best_efforts = options.best_efforts_recovery;
    let manifest_file = report.manifest.file.clone();
    let mut unknown_family_writes = 0u64;
    // Transactions prepared and not finished in the WALs replayed, by name
    // (db/prepared.rs), with their records.
    let mut prepared: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    // Replay stopped in this WAL, at this damage.
    let mut stopped: Option<(u64, LogDamage)> = None;
    for (i, &(number, pending)) in wal_names.iter().enumerate() {
        let number = &number;
        let path = filename::wal_path(&inner.dir, *number, pending);
        let name = path.display().to_string();
        if let Some((_, damage)) = &stopped {
            let records = crate::wal::count_intact_records(inner.fs.as_ref(), &path)?;
            if records > 0 && pending {
                inner.info_log.log(
                    Level::Warn,
                    &format!(
                        "WAL {name}: {records} records not replayed: replay stopped at the damage in {} and this \
                         WAL is pending (started before that one was synced, so none of its writes was \
                         acknowledged as synced); the file is kept in {LOST_DIR}/",
                        damage.file
                    ),
                );
                if let Some(w) = report.wal_damage.last_mut() {
                    w.later_records_dropped += records;
                }
            } else if records > 0 {
                return Err(Error::corruption(
                    &damage.file,
                    damage.offset,
                    format!(
                        "{}; point-in-time recovery would stop here, but the later WAL {name} holds {records} \
                         writes past this point (a WAL is synced before the next one starts, so this is damage \
                         to acknowledged writes, not a write torn by a crash)",
                        damage.reason
                    ),
                ));
            }
            continue;
        }
        // A WAL followed only by pending ones may have lost its tail to a
        // power loss as the newest may (module documentation).
        let is_last = wal_names[i + 1..].iter().all(|(_, pending)| *pending);
        // Whether the last record replayed is the end mark of a switch.
        let mut ends_whole = false;
        let outcome = crate::wal::replay(inner.fs.as_ref(), &path, mode, is_last, |record, offset| {
            ends_whole = record == super::batch::END_OF_LOG;
            let batch = WriteBatch::from_data(record, &name, offset)?;
            // Prepared sections are kept for the transaction database, not
            // applied; commits and rollbacks end them.
            for step in batch.two_phase().steps {
                match step {
                    TwoPhase::Prepare { name, record } => {
                        prepared.insert(name, record);
                    }
                    TwoPhase::Commit(name) | TwoPhase::Rollback(name) => {
                        prepared.remove(&name);
                    }
                }
            }
            let mut seq = batch.sequence();
            for op in batch.applied_cf() {
                let (cf, op) = op.map_err(|reason| Error::corruption(&name, offset, reason))?;
                // Ids are never reused, so a family above every id the
                // MANIFEST handed out is one whose creation it lost.
                if cf > max_family_id && best_efforts {
                    unknown_family_writes += 1;
                    seq += 1;
                    continue;
                }
                if cf > max_family_id {
                    return Err(Error::corruption(
                        &manifest_file,
                        0,
                        format!(
                            "WAL {name} at offset {offset} holds a write to column family {cf}, which the MANIFEST \
                             never created (its largest family id is {max_family_id}): edits are missing from it"
                        ),
                    ));
                }
                // A dropped family's entries, and those already in a family's
                // tables, are skipped.
                if let Some(r) = recovering.get_mut(&cf).filter(|r| *number >= r.log_number) {
                    let mem = r.mem.get_or_insert_with(|| Arc::new(MemTable::new(*number, r.cmp.clone())));
                    let (kind, key, value) = op.entry();
                    mem.add(seq, kind, key, value);
                    if mem.approximate_memory_usage() >= r.write_buffer_size {
                        r.mems.extend(r.mem.take());
                    }
                }
                seq += 1;
            }
            last_seq = last_seq.max(seq.saturating_sub(1));
            Ok(())
        })?;
        let mut first_damage = outcome.first_damage.clone();
        if first_damage.is_none() && !ends_whole && wal_names.get(i + 1).is_some_and(|(_, pending)| *pending) {
            // A WAL the switch closed ends in its end mark. Without it, and
            // with writes in the pending WAL after it, the tail was lost to a
            // power loss at a record boundary, which reads as a clean end:
            // replaying on would leave a hole (db/wal_seal.rs).
            // Only whether any later WAL holds a write matters here: the
            // stopped replay below counts each one's for the report.
            let mut later_holds_writes = false;
            for (n, pending) in &wal_names[i + 1..] {
                let p = filename::wal_path(&inner.dir, *n, *pending);
                if crate::wal::count_intact_records(inner.fs.as_ref(), &p)? > 0 {
                    later_holds_writes = true;
                    break;
                }
            }
            if later_holds_writes {
                let size = inner.fs.file_size(&path)?;
                let reason = "the WAL ends without the end mark its memtable switch wrote, and a later (pending) \
                              WAL holds writes: its tail was lost";
                if mode == WalRecoveryMode::AbsoluteConsistency {
                    return Err(Error::corruption(&name, size, reason));
                }
                first_damage = Some((size, reason.to_string()));
            }
        }
        if let Some((offset, reason)) = first_damage {
            let damage = LogDamage { file: name.clone(), offset, bytes: outcome.corrupted_bytes, reason };
            // A tail tolerated before later (pending) WALs ends the replay:
            // their writes would follow a hole.
            let stop = outcome.stop_replay
                || (mode == WalRecoveryMode::PointInTime && outcome.first_damage.is_none())
                || (mode == WalRecoveryMode::TolerateCorruptedTailRecords && i + 1 < wal_names.len());
            let w = WalDamage {
                number: *number,
                damage: damage.clone(),
                records_dropped: outcome.records_dropped,
                mode,
                stopped_replay: stop,
                later_records_dropped: 0,
            };
            inner.info_log.log(
                Level::Warn,
                &format!(
                    "WAL {name}: damage at offset {offset} ({}); {} bytes and {} intact records after it not replayed \
                     ({mode:?}); the file is kept in {LOST_DIR}/",
                    damage.reason, damage.bytes, outcome.records_dropped
                ),
            );
            report.wal_damage.push(w);
            if stop {
                stopped = Some((*number, damage));
            }
        }
    }
    if unknown_family_writes > 0 {
        inner.info_log.log(
            Level::Warn,
            &format!(
                "best-efforts recovery left out {unknown_family_writes} WAL writes to column families the \
                 MANIFEST never created"
            ),
        );
    }
    if let Some((wal, damage)) = &stopped {
        // RocksDB's "SST file is ahead of WALs": a family whose tables hold
        // data logged after the damaged WAL cannot be rolled back with it.
        for f in st.versions.families().values() {
            if f.log_number > *wal && f.current.levels.iter().any(|l| !l.is_empty()) {
                return Err(Error::corruption(
                    &damage.file,
                    damage.offset,
                    format!(
                        "{}; point-in-time recovery would stop here, but column family '{}' holds tables with \
                         data logged after this WAL (its log number is {})",
                        damage.reason, f.name, f.log_number
                    ),
                ));
            }
        }
    }
    inner.last_sequence.publish(last_seq);
    st.versions.set_last_sequence(last_seq);
    for (xid, record) in &prepared {
        inner.prepared.add(xid, record);
    }
    if read_only {
        // The replayed memtables are read as they are, never flushed; no
        // WAL, table or MANIFEST is written and nothing is moved.
        for (id, r) in recovering.iter_mut() {
            r.mems.extend(r.mem.take().filter(|m| !m.is_empty()));
            if let Some(data) = st.families.data(*id) {
                let empty = super::write::new_memtable(&data.options(), 0);
                st.families.keep_replayed(*id, std::mem::take(&mut r.mems), empty);
            }
        }
        inner.install_super_version(&mut st);
        return Ok(report);
    }

    // The new WAL, durable by name before anything refers to it. It starts
    // under its pending name: the WALs just replayed may end in a torn tail,
    // and a WAL with a final name follows only a WAL synced whole
    // (db/wal_seal.rs). A crash before the new MANIFEST would otherwise
    // leave a final-named (empty) WAL after a torn one, which the next
    // recovery takes for damage to acknowledged writes. It takes its final
    // name once the new MANIFEST has made every older WAL obsolete.
    let wal_number = st.versions.new_file_number();
    let pending_path = filename::pending_wal_file(&inner.dir, wal_number);
    let path = filename::wal_file(&inner.dir, wal_number);
    let file = crate::fs::WriteBehindFile::wrap(inner.fs.new_writable(&pending_path)?, options.wal_bytes_per_sync);
    let mut writer = LogWriter::new(file, path.display().to_string());
    // The prepared transactions found move into it, synced before the WALs
    // they were in can go (db/prepared.rs, invariants 2 and 3).
    for record in prepared.values() {
        writer.add_record(record)?;
    }
    writer.sync()?;
    inner.fs.sync_dir(&inner.dir)?;
    inner.wal.start(writer);
    st.families.start_wal(wal_number, last_seq, super::write::new_memtable);

    // Promise 4: every recovered memtable into a table, then one new MANIFEST.
    let smallest_snapshot = last_seq;
    let mut edits = Vec::new();
    let mut written = 0;
    for (id, r) in recovering.iter_mut() {
        r.mems.extend(r.mem.take().filter(|m| !m.is_empty()));
        let Some(data) = st.families.data(*id) else { continue };
        let opts = inner.family_opts(&data);
        let mut edit = VersionEdit { column_family: *id, log_number: Some(wal_number), ..Default::default() };
        let numbers = st.versions.file_number_allocator();
        let new_blob_number = || numbers.fetch_add(1, Ordering::SeqCst);
        for mem in &r.mems {
            let number = st.versions.new_file_number();
            let mem = std::slice::from_ref(mem);
            let output =
                inner.write_level0_table(mem, &opts, &data, number, (smallest_snapshot, &[]), &new_blob_number)?;
            written += output.bytes_written;
            inner.record_blob_output(&mut edit, &output);
            for f in output.files {
                edit.add_file(0, f);
            }
        }
        edits.push(edit);
    }
    st.versions.log_and_apply_in_new_manifest(edits)?;
    inner.fs.rename(&pending_path, &path)?;
    inner.fs.sync_dir(&inner.dir)?;
    bump(&inner.stats.flush_bytes, written);
    inner.install_super_version(&mut st);
    clean_directory(inner, &mut st, recorded_next_file, &mut report)?;
    Ok(report)
}

/// Names in `dir/lost/`, none if it does not exist.
pub(super) fn list_lost(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<String>> {
    let lost = dir.join(LOST_DIR);
    if fs.exists(&lost) {
        fs.list_dir(&lost)
    } else {
        Ok(Vec::new())
    }
}

/// The largest file number among `names`.
pub(super) fn newest_number<'a>(names: impl Iterator<Item = &'a String>) -> Option<u64> {
    names.filter_map(|n| filename::parse_file_name(n)).map(|(_, n)| n).max()
}

/// Moves each `(name, why)` from `dir` into `dir/lost/`, under a name not
/// taken there (`name.1`, `name.2`, ...), and syncs both directories;
/// returns what was moved where.
pub(super) fn move_to_lost(fs: &dyn FileSystem, dir: &Path, files: Vec<(String, String)>) -> Result<Vec<SetAside>> {
    if files.is_empty() {
        return Ok(Vec::new());
    }
    let lost = dir.join(LOST_DIR);
    fs.create_dir_all(&lost)?;
    let mut taken = fs.list_dir(&lost)?;
    let mut moved = Vec::new();
    for (name, why) in files {
        let from = dir.join(&name);
        let unique = if taken.contains(&name) {
            (1..).map(|i| format!("{name}.{i}")).find(|n| !taken.contains(n)).unwrap_or_default()
        } else {
            name
        };
        let to = lost.join(&unique);
        taken.push(unique);
        fs.rename(&from, &to)?;
        moved.push(SetAside { from, to, why });
    }
    fs.sync_dir(&lost)?;
    fs.sync_dir(dir)?;
    Ok(moved)
}

/// The MANIFEST must not be behind the directory: every table it lists must
/// exist, and so must the WAL its state replays from (the smallest log number
/// of any family). WALs and tables are deleted only after the edit that makes
/// them obsolete is synced, so a missing one means the MANIFEST lost an edit
/// that was acted on: its incomplete last record, or records cut off at a
/// record boundary, which no check can tell from the end of the file.
fn check_files_present(
    inner: &DbInner,
    st: &DbState,
    report: &RecoveryReport,
    log_number: u64,
    wals: &[u64],
) -> Result<()> {
    let torn = report.manifest.torn_tail.as_ref();
    let behind = |what: String| -> Error {
        let advice = "open with best_efforts_recovery, or repair the database (Db::repair, `ebb repair`)";
        match torn {
            Some(t) => Error::corruption(
                t.file.clone(),
                t.offset,
                format!("the last record is incomplete ({}), and the database acted on it: {what}; {advice}", t.reason),
            ),
            None => Error::corruption(
                report.manifest.file.clone(),
                0,
                format!("the MANIFEST is behind the files it describes (edits are missing from it): {what}; {advice}"),
            ),
        }
    };
    for family in st.versions.families().values() {
        let tables = family.current.live_files().map(|n| (n, filename::table_file(&inner.dir, n), "table"));
        let blobs = family.current.live_blob_files().map(|n| (n, filename::blob_file(&inner.dir, n), "blob file"));
        for (number, path, what) in tables.chain(blobs) {
            if !inner.fs.exists(&path) {
                let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                if torn.is_some() {
                    return Err(behind(format!("{what} {name}, which the state before it lists, is gone")));
                }
                return Err(Error::corruption(
                    path.display().to_string(),
                    0,
                    format!(
                        "{what} {number} listed in {} is missing (deleted, or the MANIFEST lost the edit that \
                         removed it); repair the database (Db::repair, `ebb repair`) to open what remains",
                        report.manifest.file
                    ),
                ));
            }
        }
    }
    let best_efforts = report.manifest.stopped_at.is_some() || report.manifest.edits_left_out > 0;
    // Log number 0 is a new database's, from before its first WAL.
    if !best_efforts && log_number > 0 && !wals.contains(&log_number) {
        return Err(behind(format!("WAL {log_number:06}.log, from which its state replays, is gone")));
    }
    Ok(())
}

/// Deletes what the recovered state makes obsolete, or moves it to `lost/`
/// (module promise 2), and logs and reports what it moved. `recorded_next`
/// is the next file number the MANIFEST recorded.
fn clean_directory(
    inner: &DbInner,
    st: &mut MutexGuard<'_, DbState>,
    recorded_next: u64,
    report: &mut RecoveryReport,
) -> Result<()> {
    let tolerated = report.tolerated_damage();
    let live: std::collections::HashSet<u64> = st
        .versions
        .families()
        .values()
        .flat_map(|f| f.current.live_files().chain(f.current.live_blob_files()))
        .collect();
    let log_number = st.versions.log_number();
    let manifest = st.versions.manifest_number();
    let damaged_wals: Vec<u64> = report.wal_damage.iter().map(|w| w.number).collect();
    let stop = report.wal_damage.iter().find(|w| w.stopped_replay).map(|w| w.number);
    let nothing_deleted = "recovery tolerated damage, so it deletes nothing".to_string();
    let mut moved = Vec::new();
    for name in inner.fs.list_dir(&inner.dir)? {
        let Some((kind, number)) = filename::parse_file_name(&name) else { continue };
        // `None`: obsolete, and deleted; `Some(why)`: obsolete, and set aside.
        let why = match kind {
            filename::FileType::Wal if number < log_number && number != st.families.current_wal() => {
                if damaged_wals.contains(&number) {
                    Some("its replay met damage (see the info log)".to_string())
                } else if stop.is_some_and(|w| number > w) {
                    Some("point-in-time recovery stopped in an earlier WAL".to_string())
                } else {
                    tolerated.then(|| nothing_deleted.clone())
                }
            }
            filename::FileType::Table | filename::FileType::Blob if !live.contains(&number) => {
                if number >= recorded_next {
                    Some(format!(
                        "the MANIFEST does not list it and it is numbered at or above the next file number \
                         {recorded_next} the MANIFEST recorded (the output of an unfinished job or of a lost edit)"
                    ))
                } else {
                    tolerated.then(|| nothing_deleted.clone())
                }
            }
            filename::FileType::Manifest if number != manifest => tolerated.then(|| nothing_deleted.clone()),
            _ => continue,
        };
        match why {
            Some(why) => moved.push((name, why)),
            None => {
                match kind {
                    filename::FileType::Table => inner.tables.evict(number),
                    filename::FileType::Blob => inner.blobs.evict(number),
                    _ => {}
                }
                let path = inner.dir.join(&name);
                if kind == filename::FileType::Wal {
                    // Archived for `get_updates_since` when the options say so.
                    let _ = inner.wal_archive.retire(inner.fs.as_ref(), &path, number, &inner.opts());
                } else {
                    let _ = inner.fs.remove_file(&path);
                }
            }
        }
    }
    for s in move_to_lost(inner.fs.as_ref(), &inner.dir, moved)? {
        inner.info_log.log(Level::Warn, &format!("set aside {} as {}: {}", s.from.display(), s.to.display(), s.why));
        report.set_aside.push(s);
    }
    Ok(())
}
