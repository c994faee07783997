//! The expected state: what every key may hold, in a file that survives the
//! worker being killed (RocksDB db_stress's `ExpectedState`, file-backed).
//!
//! One slot per key holds two words, `committed` and `pending`, each a
//! [`Slot`]: a value id and whether the key is present. A writer marks the
//! new state pending before it calls the database and committed after the
//! call returns, so after a kill the key holds its committed or its pending
//! state, and nothing else. Each word is written to the file with `pwrite`
//! as it changes: a killed process loses nothing it wrote to the page cache
//! (an operating-system crash could, and is not what this tests).
//!
//! File layout (little endian): magic `EBBEXP01`, the number of keys (u64),
//! the operations of all earlier runs (u64), the number of column families
//! the keys are spread over (u64; 0, in files made before it was recorded,
//! means 1), the number of threads of the last run that wrote (u64; 0:
//! unknown), 24 reserved bytes; then the slots, 16 bytes each.
//!
//! Thread safety: every key has one writer at a time (the worker partitions
//! keys by thread); readers of other threads' keys read the in-memory
//! mirror, whose words are atomics.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const MAGIC: &[u8; 8] = b"EBBEXP01";
const HEADER_LEN: u64 = 64;
const OPS_AT: u64 = 16;
const FAMILIES_AT: usize = 24;
const THREADS_AT: u64 = 32;
const SLOT_LEN: u64 = 16;

/// One state of a key: a value id, and whether the key holds that value
/// (present) or was deleted by the write with that id. Ids only grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot(u64);

impl Slot {
    /// The state after write `id`: a put (`present`) or a delete.
    pub fn new(id: u64, present: bool) -> Slot {
        Slot(id << 1 | u64::from(present))
    }

    /// The id of the write that made this state.
    pub fn id(self) -> u64 {
        self.0 >> 1
    }

    /// True when the key holds the value of [`Slot::id`].
    pub fn present(self) -> bool {
        self.0 & 1 == 1
    }
}

impl std::fmt::Display for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.present() {
            write!(f, "value {}", self.id())
        } else {
            write!(f, "absent (write {})", self.id())
        }
    }
}

/// Makes the expected-state file at `path` for `keys` keys, every key
/// absent: written under `path` with `.tmp` appended, then renamed.
fn create(path: &Path, keys: u64, families: u64, len: u64) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let file = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
    let mut header = vec![0u8; HEADER_LEN as usize];
    header[..8].copy_from_slice(MAGIC);
    header[8..16].copy_from_slice(&keys.to_le_bytes());
    header[FAMILIES_AT..FAMILIES_AT + 8].copy_from_slice(&families.to_le_bytes());
    file.write_all_at(&header, 0)?;
    file.set_len(len)?;
    drop(file);
    std::fs::rename(&tmp, path)
}

/// The expected state of every key, mirrored in memory and in a file.
pub struct ExpectedState {
    file: File,
    committed: Vec<AtomicU64>,
    pending: Vec<AtomicU64>,
}

impl ExpectedState {
    /// Opens the file at `path`, or creates it with every key absent.
    /// Refuses a file made for another number of keys or of column families
    /// (a key's family follows from both, so its state would not).
    ///
    /// A new file is made whole under a temporary name and then renamed, so
    /// a worker killed while creating it leaves no file, or a whole one: a
    /// file found too short is damage, not an interrupted start.
    pub fn open(path: &Path, keys: u64, families: u64) -> io::Result<ExpectedState> {
        let len = HEADER_LEN + keys * SLOT_LEN;
        if !path.exists() {
            create(path, keys, families, len)?;
        }
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let mut bytes = vec![0u8; len as usize];
        file.read_exact_at(&mut bytes, 0)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: shorter than {len} bytes: {e}", path.display())))?;
        if &bytes[..8] != MAGIC {
            return Err(io::Error::other(format!("{} is not an expected-state file", path.display())));
        }
        let stored_keys = word(&bytes, 8);
        if stored_keys != keys {
            return Err(io::Error::other(format!("{} was made for {stored_keys} keys, not {keys}", path.display())));
        }
        let stored_families = word(&bytes, FAMILIES_AT).max(1);
        if stored_families != families {
            return Err(io::Error::other(format!(
                "{} was made for {stored_families} column families, not {families}",
                path.display()
            )));
        }
        let slot = |i: u64, half: u64| AtomicU64::new(word(&bytes, (HEADER_LEN + i * SLOT_LEN + half * 8) as usize));
        Ok(ExpectedState {
            file,
            committed: (0..keys).map(|i| slot(i, 0)).collect(),
            pending: (0..keys).map(|i| slot(i, 1)).collect(),
        })
    }

    /// Number of keys.
    pub fn keys(&self) -> u64 {
        self.committed.len() as u64
    }

    /// The state of key `i` after its last acknowledged write.
    pub fn committed(&self, i: u64) -> Slot {
        Slot(self.committed[i as usize].load(Ordering::Acquire))
    }

    /// The state key `i` is being moved to (its committed state when no write is in flight).
    pub fn pending(&self, i: u64) -> Slot {
        Slot(self.pending[i as usize].load(Ordering::Acquire))
    }

    /// The next state of key `i` for a put (`present`) or a delete.
    pub fn next(&self, i: u64, present: bool) -> Slot {
        Slot::new(self.committed(i).id().max(self.pending(i).id()) + 1, present)
    }

    /// Records that a write moving key `i` to `s` is about to be issued.
    pub fn mark_pending(&self, i: u64, s: Slot) -> io::Result<()> {
        self.pending[i as usize].store(s.0, Ordering::Release);
        self.file.write_all_at(&s.0.to_le_bytes(), HEADER_LEN + i * SLOT_LEN + 8)
    }

    /// Records that the write moving key `i` to `s` returned.
    pub fn commit(&self, i: u64, s: Slot) -> io::Result<()> {
        self.committed[i as usize].store(s.0, Ordering::Release);
        self.file.write_all_at(&s.0.to_le_bytes(), HEADER_LEN + i * SLOT_LEN)
    }

    /// After verification: key `i` holds `s`, with no write in flight.
    pub fn resolve(&self, i: u64, s: Slot) -> io::Result<()> {
        // Committed first: a kill between the two leaves committed == the
        // state found and pending at the state found or the one before.
        self.commit(i, s)?;
        self.mark_pending(i, s)
    }

    /// Operations of all earlier runs, as last recorded.
    pub fn recorded_ops(&self) -> io::Result<u64> {
        let mut w = [0u8; 8];
        self.file.read_exact_at(&mut w, OPS_AT)?;
        Ok(u64::from_le_bytes(w))
    }

    /// The number of threads of the last run that wrote, 0 if unknown.
    /// Each thread has at most one write in flight, so the keys a thread
    /// owns that are in flight after a kill are all of one write.
    pub fn recorded_threads(&self) -> io::Result<u64> {
        let mut w = [0u8; 8];
        self.file.read_exact_at(&mut w, THREADS_AT)?;
        Ok(u64::from_le_bytes(w))
    }

    /// Records the number of threads of the run about to write.
    pub fn record_threads(&self, threads: u64) -> io::Result<()> {
        self.file.write_all_at(&threads.to_le_bytes(), THREADS_AT)
    }

    /// Records the operations of all runs so far.
    pub fn record_ops(&self, ops: u64) -> io::Result<()> {
        self.file.write_all_at(&ops.to_le_bytes(), OPS_AT)
    }
}

fn word(bytes: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_survive_reopening_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("expected");
        {
            let e = ExpectedState::open(&path, 10, 3).unwrap();
            assert_eq!(e.committed(3), Slot::new(0, false));
            let s = e.next(3, true);
            e.mark_pending(3, s).unwrap();
            e.commit(3, s).unwrap();
            e.mark_pending(4, e.next(4, false)).unwrap();
            e.record_ops(99).unwrap();
            assert_eq!(e.recorded_threads().unwrap(), 0);
            e.record_threads(4).unwrap();
        }
        let e = ExpectedState::open(&path, 10, 3).unwrap();
        assert_eq!(e.committed(3), Slot::new(1, true));
        assert_eq!(e.pending(4), Slot::new(1, false));
        assert_eq!(e.committed(4), Slot::new(0, false));
        assert_eq!(e.recorded_ops().unwrap(), 99);
        assert_eq!(e.recorded_threads().unwrap(), 4);
        assert!(ExpectedState::open(&path, 11, 3).is_err());
        let e = ExpectedState::open(&path, 10, 1).err().expect("a file of 3 families opened for 1");
        assert!(e.to_string().contains("3 column families"), "{e}");
    }

    /// A worker killed while making the file leaves its temporary copy
    /// (here: the header written, the slots not yet): the next start makes
    /// the file whole and takes the temporary copy's place. A short file
    /// under the real name is damage, and refused.
    #[test]
    fn a_creation_cut_short_leaves_no_file_the_next_start_refuses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("expected");
        let tmp = dir.path().join("expected.tmp");
        std::fs::write(&tmp, &MAGIC[..]).unwrap();
        let e = ExpectedState::open(&path, 10, 3).unwrap();
        assert_eq!(e.committed(9), Slot::new(0, false));
        assert!(!tmp.exists(), "the temporary copy was not renamed into place");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), HEADER_LEN + 10 * SLOT_LEN);
        drop(e);

        std::fs::write(&path, &MAGIC[..]).unwrap();
        let e = ExpectedState::open(&path, 10, 3).err().expect("a short file opened");
        assert!(e.to_string().contains("shorter than"), "{e}");
    }
}
