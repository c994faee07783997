//! WALs closed at a memtable switch whose sync is still owed.
//!
//! A memtable switch does not sync the WAL it closes, nor the directory: it
//! happens inside the write path, and RocksDB with one column family does
//! neither there. (Ebb did both until issue 16; on W2 that was ~24 ms per
//! switch with the db mutex held, an eighth of the run, and it forced every
//! WAL byte to the disk although most WALs are deleted, flushed, before the
//! page cache would ever write them.)
//!
//! Recovery must still tell a crash's torn tail from damage to acknowledged
//! writes: point-in-time recovery refuses damage in a WAL followed by a later
//! WAL holding writes (docs/reliability.md). So the file name says what was
//! synced:
//! 1. A switch starts the new WAL under a pending name (`NNNNNN.log.pending`,
//!    [`filename::pending_wal_file`]) and queues the old writer here.
//! 2. Sealing a closed WAL syncs it, then renames the WAL started after it to
//!    its final name; the directory is synced after the renames. So a WAL
//!    with a final name follows a WAL that was synced whole.
//! 3. Before a write is acknowledged as synced (`sync` writes,
//!    `flush_wal(true)`, `close`), every closed WAL is sealed and the
//!    directory synced. So a pending WAL holds no write acknowledged as
//!    synced, and damage before it may be a torn tail: recovery drops what
//!    follows the damage, reported, instead of refusing to open.
//! 4. With more than one column family, a flush seals before its MANIFEST
//!    edit (RocksDB `SyncClosedLogs`): otherwise one family's tables could
//!    hold writes logged after another family's torn WAL. With one family,
//!    flushes go in WAL order, so nothing in a table follows a hole.
//! 5. No flush edit moves a family's log number past a closed WAL not yet
//!    sealed ([`WalSealer::oldest_unsealed`]). A switch between a flush's
//!    seal and its edit renumbers the idle families' empty memtables (and
//!    the flushed family's new one) onto the WAL it starts; recorded as
//!    they were, those log numbers passed the WAL the switch closed, and a
//!    power loss tearing it made point-in-time recovery refuse to open
//!    ("holds tables with data logged after this WAL"), although no table
//!    held any write of it. Capped, the families replay from that WAL,
//!    which holds none of their writes. The cap needs the seal of contract
//!    4 (the flushed memtables' WALs synced, so none of them is replayed
//!    again): a flush that began with one family and finds several when it
//!    takes the mutex back for its edit seals then. A new family's log
//!    number stops at the same WAL. WALs below every family's log number
//!    are obsolete and do not count, even while still queued or syncing.
//!
//! A closed WAL that becomes obsolete unsealed is forgotten, and the WAL
//! after it is renamed at the next seal without a sync: no WAL before it is
//! replayed any more (the MANIFEST edit that made that one obsolete is
//! durable first). The current WAL's own directory entry is made durable
//! before a synced write in it is acknowledged.
//!
//! Thread-safety: `queue` is taken briefly, under the db mutex or not;
//! `sealing` serialises sealers across their syncs and is never taken with
//! the db mutex held.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use parking_lot::Mutex;

use std::path::Path;

use crate::error::Result;
use crate::fs::FileSystem;
use crate::version::filename;
use crate::wal::LogWriter;

/// A WAL closed by a memtable switch, and the number of the WAL started then.
struct ClosedWal {
    number: u64,
    writer: LogWriter,
    next: u64,
}

#[derive(Default)]
struct Queue {
    closed: VecDeque<ClosedWal>,
    /// Pending WALs whose predecessor became obsolete unsealed: renamed
    /// without a sync.
    orphans: Vec<u64>,
    /// The closed WAL a sealer has taken from `closed` and is syncing.
    in_flight: Option<u64>,
}

#[derive(Default)]
pub(crate) struct WalSealer {
    queue: Mutex<Queue>,
    /// Held by the one sealer at work, across its syncs.
    sealing: Mutex<()>,
    /// A WAL was created, or renamed, since the directory was last synced.
    dir_dirty: AtomicBool,
    /// Closed WALs queued or being sealed.
    owed: AtomicUsize,
}

impl WalSealer {
    /// Queues `writer` (WAL `number`), closed by a switch that started WAL
    /// `next` under its pending name.
    pub(crate) fn push(&self, number: u64, writer: LogWriter, next: u64) {
        self.owed.fetch_add(1, Ordering::AcqRel);
        self.queue.lock().closed.push_back(ClosedWal { number, writer, next });
        self.dir_dirty.store(true, Ordering::Release);
    }

    /// Forgets closed WALs numbered below `log_number`: obsolete, their data
    /// is in tables.
    pub(crate) fn forget_below(&self, log_number: u64) {
        let mut queue = self.queue.lock();
        let Queue { closed, orphans, .. } = &mut *queue;
        orphans.retain(|n| *n >= log_number);
        let before = closed.len();
        closed.retain(|c| {
            if c.number >= log_number {
                return true;
            }
            if c.next >= log_number {
                orphans.push(c.next);
            }
            false
        });
        self.owed.fetch_sub(before - closed.len(), Ordering::AcqRel);
    }

    /// Keeps sealers out while obsolete WALs are deleted, so a sealer never
    /// sees a pending WAL vanish between its checks and its rename.
    pub(crate) fn hold_deletions(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.sealing.lock()
    }

    /// The number of the oldest closed WAL numbered `floor` or above not yet
    /// sealed (queued, or being synced), if any. A family's log number must
    /// not pass it: a power loss may tear that WAL, point-in-time recovery
    /// then stops in it, and a family whose log number is past the stop and
    /// that holds tables reads as holding data logged after the damage
    /// (db/recovery.rs, and module contract 5). `floor` is the lowest log
    /// number of any family: WALs below it are obsolete (recovery never
    /// reads them, and they may be deleted at any time), even while they
    /// are still queued here (file deletions disabled) or being synced.
    pub(crate) fn oldest_unsealed(&self, floor: u64) -> Option<u64> {
        let queue = self.queue.lock();
        queue.closed.iter().map(|c| c.number).chain(queue.in_flight).filter(|n| *n >= floor).min()
    }

    /// Whether every closed WAL is sealed (none queued, none being sealed).
    pub(crate) fn all_sealed(&self) -> bool {
        self.owed.load(Ordering::Acquire) == 0
    }

    /// Seals every closed WAL (module contract 2), then syncs the directory
    /// if a WAL was created or renamed since it was last synced. On return,
    /// every WAL closed before the call is synced and the current WAL's name
    /// is durable. Must not be called with the db mutex held. An error is the
    /// caller's to make sticky.
    pub(crate) fn seal(&self, fs: &dyn FileSystem, dir: &Path) -> Result<()> {
        let _one = self.sealing.lock();
        let orphans = std::mem::take(&mut self.queue.lock().orphans);
        for (i, next) in orphans.iter().enumerate() {
            if let Err(e) = Self::finalize_wal_name(fs, dir, *next) {
                self.queue.lock().orphans.extend(&orphans[i..]);
                return Err(e);
            }
            self.dir_dirty.store(true, Ordering::Release);
        }
        loop {
            let Some(mut closed) = ({
                let mut queue = self.queue.lock();
                let closed = queue.closed.pop_front();
                queue.in_flight = closed.as_ref().map(|c| c.number);
                closed
            }) else {
                break;
            };
            if let Err(e) = closed.writer.sync().and_then(|()| Self::finalize_wal_name(fs, dir, closed.next)) {
                // Still unsealed: the next sealer tries again.
                let mut queue = self.queue.lock();
                queue.in_flight = None;
                queue.closed.push_front(closed);
                return Err(e);
            }
            self.queue.lock().in_flight = None;
            self.dir_dirty.store(true, Ordering::Release);
            self.owed.fetch_sub(1, Ordering::AcqRel);
        }
        if self.dir_dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = fs.sync_dir(dir) {
                self.dir_dirty.store(true, Ordering::Release);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Renames pending WAL `number` to its final name. Called with
    /// `sealing` held, which obsolete-file deletion also holds while it
    /// removes WALs ([`WalSealer::hold_deletions`]): so a pending WAL
    /// missing here became obsolete and was deleted before (`forget_below`
    /// can run after the sealer took its predecessor), and any error of the
    /// rename is a real one, returned.
    fn finalize_wal_name(fs: &dyn FileSystem, dir: &Path, number: u64) -> Result<()> {
        let pending = filename::pending_wal_file(dir, number);
        if !fs.exists(&pending) {
            return Ok(());
        }
        fs.rename(&pending, &filename::wal_file(dir, number))
    }
}
