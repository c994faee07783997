//! [`MemFs`]: an in-memory [`FileSystem`] that can lose power and fail on
//! demand, for tests (Pebble `vfs.MemFS` in strict mode plus `vfs/errorfs`).
//!
//! Model. A file's bytes live in an inode; a directory maps names to inodes
//! twice, once as callers see it now (live) and once as it would be found after
//! a power loss (durable). Invariants:
//! 1. An inode holds `data` (what readers see: the page cache) and
//!    `synced_len <= data.len()`, the prefix that survives a crash. Only a
//!    successful `sync()` advances `synced_len`, to `data.len()`.
//! 2. Creating, renaming or removing a file changes only the live namespace of
//!    its directory; `sync_dir` copies the live namespace to the durable one.
//!    Nothing else writes the durable namespace except the test helper
//!    [`MemFs::set_file_bytes`]. `new_writable` on an existing name binds a fresh
//!    inode, so until the directory is synced a crash brings the old file back.
//! 3. Directories themselves are durable at once (`create_dir_all`,
//!    `remove_dir`): the durability contract in `fs/mod.rs` concerns file
//!    entries, and modelling `mkdir` would only exercise the parent of the
//!    database directory, which Ebb does not own.
//! 4. [`MemFs::crash`] is a power loss: every directory's live namespace reverts
//!    to its durable one; every surviving inode's unsynced tail is treated per
//!    [`CrashMode`] and the result counts as synced; inodes reachable only from
//!    the live namespace are gone; locks are released; every handle opened
//!    before the crash is dead.
//! 5. Dead handles fail: every call through a handle opened before a crash
//!    returns an I/O error with `ESTALE` ("stale file handle") and changes
//!    nothing, so a database still running on the old handles cannot write
//!    into the post-crash state. Dropping a dead lock does not release a lock
//!    taken after the crash. The same holds for the process that lost power:
//!    a [`MemFs`] value through which a lock is held (a database's, which
//!    locks its directory at open) is bound to the generation it took it in,
//!    and after a crash every call through it fails likewise (creating,
//!    renaming, removing and syncing included) until every lock taken
//!    through it is dropped (the crashed database is gone). So a database
//!    still running after a crash, its background jobs or its close, cannot
//!    create files in the post-crash state, roll its MANIFEST there or delete
//!    what recovery needs. Values that hold no lock (the test's own, and every
//!    fresh clone) are not bound.
//! 6. Every operation is counted by [`FaultOp`] before it runs, including ones
//!    that then fail. An operation failed by an injected fault changes nothing:
//!    a failed append applies no byte, a failed sync leaves `synced_len`.
//! 7. Read-path hints are ignored: `open_random_mmap` opens an ordinary
//!    handle (there is no memory to map; reads copy out of the inode either
//!    way) and `advise` does nothing and is not counted.
//!
//! Thread-safety: one mutex guards the whole state and every call, including
//! each call through a handle, holds it throughout, so a crash is atomic with
//! respect to every other operation. Handles follow the [`FileSystem`] rules:
//! `Send`, and random-access handles are also `Sync`.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{FileLock, FileSystem, RandomAccessFile, SequentialFile, WritableFile};
use crate::error::{Error, Result};

/// What a power loss does to each file's unsynced bytes. Whatever the mode,
/// directory entries not made durable by `sync_dir` are lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Unsynced bytes are lost: each file is truncated to its synced length.
    DropUnsynced,
    /// A random prefix (possibly empty, possibly all) of each file's unsynced
    /// bytes survives: a write torn at an arbitrary byte.
    KeepRandomPrefix {
        /// Seeds the choice of prefix lengths; the same seed and history give
        /// the same result.
        seed: u64,
    },
    /// Unsynced bytes are replaced by random bytes of the same length: the
    /// file size reached the disk but the data blocks did not.
    GarbageTail {
        /// Seeds the garbage.
        seed: u64,
    },
    /// Unsynced bytes are replaced by zeros of the same length (ext4's
    /// zero-filled blocks after a crash with delayed allocation).
    ZeroTail,
}

/// The error an injected fault produces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// `EIO`: a generic I/O error.
    Io,
    /// `ENOSPC`: no space left on device ([`Error::is_no_space`] is true).
    NoSpace,
}

impl FaultKind {
    fn errno(self) -> i32 {
        match self {
            FaultKind::Io => libc::EIO,
            FaultKind::NoSpace => libc::ENOSPC,
        }
    }
}

/// The kinds of operation [`MemFs`] counts and can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultOp {
    /// `create_dir_all`.
    CreateDir,
    /// `new_writable`, `link_file`.
    Create,
    /// `reopen_writable`, `open_random`, `open_sequential`.
    Open,
    /// A read through a sequential or random-access handle.
    Read,
    /// `WritableFile::append`.
    Append,
    /// `WritableFile::flush` and `range_sync_hint`.
    Flush,
    /// `WritableFile::sync`.
    Sync,
    /// `sync_dir`.
    SyncDir,
    /// `rename`.
    Rename,
    /// `remove_file`, `remove_dir`.
    Remove,
    /// `list_dir`.
    List,
    /// `file_size`, `RandomAccessFile::size`.
    Stat,
    /// `lock_file`.
    Lock,
}

impl FaultOp {
    /// Every kind, in declaration order.
    pub const ALL: [FaultOp; 13] = [
        FaultOp::CreateDir,
        FaultOp::Create,
        FaultOp::Open,
        FaultOp::Read,
        FaultOp::Append,
        FaultOp::Flush,
        FaultOp::Sync,
        FaultOp::SyncDir,
        FaultOp::Rename,
        FaultOp::Remove,
        FaultOp::List,
        FaultOp::Stat,
        FaultOp::Lock,
    ];
}

/// Which operations an injected fault fails. Built with [`FaultRule::new`] or
/// [`FaultRule::any_op`] and the setters; handed to [`MemFs::inject`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRule {
    op: Option<FaultOp>,
    path_contains: Option<String>,
    path_excludes: Option<String>,
    nth: u64,
    persistent: bool,
    kind: FaultKind,
}

impl FaultRule {
    /// Fails the next operation of kind `op` once, with [`FaultKind::Io`].
    pub fn new(op: FaultOp) -> Self {
        FaultRule {
            op: Some(op),
            path_contains: None,
            path_excludes: None,
            nth: 1,
            persistent: false,
            kind: FaultKind::Io,
        }
    }

    /// Fails the next operation of any kind once, with [`FaultKind::Io`].
    pub fn any_op() -> Self {
        FaultRule { op: None, path_contains: None, path_excludes: None, nth: 1, persistent: false, kind: FaultKind::Io }
    }

    /// Fails the `k`-th matching operation counted from injection (1 is the
    /// next one; 0 is read as 1). Default 1.
    pub fn nth(mut self, k: u64) -> Self {
        self.nth = k.max(1);
        self
    }

    /// Fails the `k`-th matching operation and every later one, until
    /// [`MemFs::clear_faults`]. Default: only the `k`-th.
    pub fn persistent(mut self) -> Self {
        self.persistent = true;
        self
    }

    /// The error to produce. Default [`FaultKind::Io`].
    pub fn kind(mut self, kind: FaultKind) -> Self {
        self.kind = kind;
        self
    }

    /// Matches only operations whose path contains `fragment` (for a rename,
    /// either path; for a handle, the path it was opened with). Default: any path.
    pub fn path_contains(mut self, fragment: impl Into<String>) -> Self {
        self.path_contains = Some(fragment.into());
        self
    }

    /// Matches only operations whose paths do not contain `fragment` (for a
    /// rename, neither path). Default: no path is excluded.
    pub fn path_excludes(mut self, fragment: impl Into<String>) -> Self {
        self.path_excludes = Some(fragment.into());
        self
    }

    fn matches(&self, op: FaultOp, path: &Path, other: Option<&Path>) -> bool {
        if self.op.is_some_and(|want| want != op) {
            return false;
        }
        if let Some(fragment) = &self.path_excludes {
            let hit = |p: &Path| p.to_string_lossy().contains(fragment.as_str());
            if hit(path) || other.is_some_and(hit) {
                return false;
            }
        }
        match &self.path_contains {
            None => true,
            Some(fragment) => {
                let hit = |p: &Path| p.to_string_lossy().contains(fragment.as_str());
                hit(path) || other.is_some_and(hit)
            }
        }
    }
}

#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    synced_len: usize,
}

type InodeRef = Arc<Mutex<Inode>>;

fn new_inode() -> InodeRef {
    Arc::new(Mutex::new(Inode::default()))
}

#[derive(Default)]
struct Dir {
    live: BTreeMap<String, InodeRef>,
    durable: BTreeMap<String, InodeRef>,
}

struct ActiveFault {
    rule: FaultRule,
    seen: u64,
    spent: bool,
}

struct State {
    dirs: BTreeMap<PathBuf, Dir>,
    /// Bumped by every crash; a handle is alive while its generation matches.
    generation: u64,
    locks: HashMap<PathBuf, u64>,
    next_lock_id: u64,
    faults: Vec<ActiveFault>,
    op_counts: [u64; FaultOp::ALL.len()],
    faults_injected: u64,
}

fn os_error(op: &'static str, path: &Path, errno: i32) -> Error {
    Error::io(op, path, std::io::Error::from_raw_os_error(errno))
}

/// Lexical normalisation: drops `.`, resolves `..`, keeps a leading `/`.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Splits a file path into its (normalised) directory and its name.
fn split(path: &Path) -> Result<(PathBuf, String)> {
    let norm = normalize(path);
    let name = norm
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| Error::invalid(format!("{} does not name a file", path.display())))?;
    let dir = norm.parent().map(Path::to_path_buf).unwrap_or_default();
    Ok((dir, name))
}

impl State {
    fn new() -> Self {
        let mut dirs = BTreeMap::new();
        // Both roots always exist: "" for relative paths, "/" for absolute ones.
        dirs.insert(PathBuf::new(), Dir::default());
        dirs.insert(PathBuf::from("/"), Dir::default());
        State {
            dirs,
            generation: 0,
            locks: HashMap::new(),
            next_lock_id: 0,
            faults: Vec::new(),
            op_counts: [0; FaultOp::ALL.len()],
            faults_injected: 0,
        }
    }

    /// Counts the operation, refuses it when it comes through a dead handle,
    /// and fails it when an injected fault fires (invariants 5 and 6).
    fn enter(
        &mut self,
        op: FaultOp,
        what: &'static str,
        path: &Path,
        other: Option<&Path>,
        handle_generation: Option<u64>,
    ) -> Result<()> {
        self.op_counts[op as usize] += 1;
        if handle_generation.is_some_and(|g| g != self.generation) {
            return Err(os_error(what, path, libc::ESTALE));
        }
        let mut fired = None;
        for fault in &mut self.faults {
            if fault.spent || !fault.rule.matches(op, path, other) {
                continue;
            }
            fault.seen += 1;
            let hit = fault.seen == fault.rule.nth || (fault.rule.persistent && fault.seen > fault.rule.nth);
            if hit {
                fault.spent = !fault.rule.persistent;
                fired.get_or_insert(fault.rule.kind);
            }
        }
        self.faults.retain(|f| !f.spent);
        match fired {
            Some(kind) => {
                self.faults_injected += 1;
                Err(os_error(what, path, kind.errno()))
            }
            None => Ok(()),
        }
    }

    fn dir(&self, dir: &Path, what: &'static str, path: &Path) -> Result<&Dir> {
        self.dirs.get(dir).ok_or_else(|| os_error(what, path, libc::ENOENT))
    }

    fn dir_mut(&mut self, dir: &Path, what: &'static str, path: &Path) -> Result<&mut Dir> {
        self.dirs.get_mut(dir).ok_or_else(|| os_error(what, path, libc::ENOENT))
    }

    /// The live inode a file path names.
    fn lookup(&self, path: &Path, what: &'static str) -> Result<InodeRef> {
        let (dir, name) = split(path)?;
        self.dir(&dir, what, path)?.live.get(&name).cloned().ok_or_else(|| os_error(what, path, libc::ENOENT))
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.dirs.contains_key(&normalize(path))
    }

    /// Renames directory `from` (and everything under it) to `to`, which
    /// must not exist or be an empty directory. Directories themselves
    /// always survive a crash here (only their entries have a durable
    /// state), so the rename does too.
    fn rename_dir(&mut self, from: &Path, to: &Path) -> Result<()> {
        let (from, to_norm) = (normalize(from), normalize(to));
        if to_norm.starts_with(&from) {
            return Err(os_error("rename", &from, libc::EINVAL));
        }
        if let Some(target) = self.dirs.get(&to_norm) {
            let has_subdir = self.dirs.keys().any(|d| d.parent() == Some(to_norm.as_path()));
            if !target.live.is_empty() || has_subdir {
                return Err(os_error("rename", to, libc::ENOTEMPTY));
            }
            self.dirs.remove(&to_norm);
        } else {
            let (parent, name) = split(&to_norm)?;
            if self.dir(&parent, "rename", to)?.live.contains_key(&name) {
                return Err(os_error("rename", to, libc::ENOTDIR));
            }
        }
        let moved: Vec<PathBuf> = self.dirs.keys().filter(|d| d.starts_with(&from)).cloned().collect();
        for old in moved {
            if let (Some(dir), Ok(rest)) = (self.dirs.remove(&old), old.strip_prefix(&from)) {
                let new = if rest.as_os_str().is_empty() { to_norm.clone() } else { to_norm.join(rest) };
                self.dirs.insert(new, dir);
            }
        }
        Ok(())
    }

    /// Invariant 4: the durable namespace becomes the live one, and each
    /// surviving inode is replaced by a fresh one holding what the disk kept,
    /// so old handles (which hold the old inodes) cannot reach the new state.
    fn crash(&mut self, mode: CrashMode) {
        self.generation += 1;
        self.locks.clear();
        let seed = match mode {
            CrashMode::KeepRandomPrefix { seed } | CrashMode::GarbageTail { seed } => seed,
            CrashMode::DropUnsynced | CrashMode::ZeroTail => 0,
        };
        let mut rng = SplitMix64(seed);
        let mut survivors: HashMap<*const Mutex<Inode>, InodeRef> = HashMap::new();
        // BTreeMap order makes the random choices depend only on the seed and
        // the set of files.
        for dir in self.dirs.values_mut() {
            let mut kept = BTreeMap::new();
            for (name, inode) in &dir.durable {
                let fresh = survivors
                    .entry(Arc::as_ptr(inode))
                    .or_insert_with(|| Arc::new(Mutex::new(after_power_loss(&inode.lock(), mode, &mut rng))));
                kept.insert(name.clone(), Arc::clone(fresh));
            }
            dir.live = kept.clone();
            dir.durable = kept;
        }
    }
}

/// What the disk holds of one inode after a power loss.
fn after_power_loss(inode: &Inode, mode: CrashMode, rng: &mut SplitMix64) -> Inode {
    let synced = inode.synced_len.min(inode.data.len());
    let tail = &inode.data[synced..];
    let mut data = inode.data[..synced].to_vec();
    match mode {
        CrashMode::DropUnsynced => {}
        CrashMode::KeepRandomPrefix { .. } => {
            let keep = (rng.next() % (tail.len() as u64 + 1)) as usize;
            data.extend_from_slice(&tail[..keep]);
        }
        CrashMode::GarbageTail { .. } => {
            let start = data.len();
            data.resize(start + tail.len(), 0);
            for chunk in data[start..].chunks_mut(8) {
                let word = rng.next().to_le_bytes();
                chunk.copy_from_slice(&word[..chunk.len()]);
            }
        }
        CrashMode::ZeroTail => data.resize(inode.data.len(), 0),
    }
    Inode { synced_len: data.len(), data }
}

/// SplitMix64 (Steele, Lea, Flood 2014): enough randomness for crash
/// simulation without making `rand` a library dependency.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// An in-memory filesystem that can simulate power loss and inject faults.
///
/// Cloning is cheap and every clone is the same filesystem, so a test keeps a
/// handle after giving one to the database. See the module documentation for
/// the model and its invariants.
pub struct MemFs {
    state: Arc<Mutex<State>>,
    /// The locks held through this value and the generation they were
    /// taken in: calls through it fail after a crash while any is held
    /// (invariant 5). Each clone starts with none.
    binding: Arc<Mutex<Binding>>,
}

/// See [`MemFs::binding`].
#[derive(Default)]
struct Binding {
    generation: u64,
    locks: usize,
}

impl Clone for MemFs {
    fn clone(&self) -> Self {
        MemFs { state: Arc::clone(&self.state), binding: Arc::default() }
    }
}

impl Default for MemFs {
    fn default() -> Self {
        MemFs::new()
    }
}

impl fmt::Debug for MemFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.state.lock();
        f.debug_struct("MemFs").field("dirs", &st.dirs.len()).field("generation", &st.generation).finish()
    }
}

impl MemFs {
    /// An empty filesystem holding only the roots `/` and `` (for relative paths).
    pub fn new() -> Self {
        MemFs { state: Arc::new(Mutex::new(State::new())), binding: Arc::default() }
    }

    /// The generation this value is bound to while it holds a lock
    /// (invariant 5).
    fn bound(&self) -> Option<u64> {
        let b = self.binding.lock();
        (b.locks > 0).then_some(b.generation)
    }

    /// Simulates a power loss (module invariant 4); the filesystem is then
    /// ready for a fresh open, and every handle from before it is dead.
    pub fn crash(&self, mode: CrashMode) {
        self.state.lock().crash(mode);
    }

    /// A new, independent filesystem holding what a power loss now would
    /// leave of this one (Pebble `MemFS.CrashClone`); this one carries on
    /// untouched. For tests whose crashed process keeps running: nothing it
    /// does reaches the copy. Not counted, never faulted; the copy has no
    /// faults and no locks.
    pub fn crash_clone(&self, mode: CrashMode) -> MemFs {
        let st = self.state.lock();
        let mut copy = State::new();
        copy.dirs = st
            .dirs
            .iter()
            .map(|(path, dir)| (path.clone(), Dir { live: dir.durable.clone(), durable: dir.durable.clone() }))
            .collect();
        // The copy shares inodes with `self` until its crash replaces each
        // with a fresh one holding what the disk kept.
        copy.crash(mode);
        MemFs { state: Arc::new(Mutex::new(copy)), binding: Arc::default() }
    }

    /// Adds a fault; its count of matching operations starts now.
    pub fn inject(&self, rule: FaultRule) {
        self.state.lock().faults.push(ActiveFault { rule, seen: 0, spent: false });
    }

    /// Removes every injected fault.
    pub fn clear_faults(&self) {
        self.state.lock().faults.clear();
    }

    /// How many operations injected faults have failed so far.
    pub fn faults_injected(&self) -> u64 {
        self.state.lock().faults_injected
    }

    /// Operations of every kind attempted so far (failed ones included).
    pub fn op_count(&self) -> u64 {
        self.state.lock().op_counts.iter().sum()
    }

    /// Operations of kind `op` attempted so far (failed ones included).
    pub fn op_count_of(&self, op: FaultOp) -> u64 {
        self.state.lock().op_counts[op as usize]
    }

    /// The current contents of a file (synced or not), or `None` when no file
    /// has that name. Not counted, never faulted.
    pub fn file_bytes(&self, path: &Path) -> Option<Vec<u8>> {
        self.state.lock().lookup(path, "read").ok().map(|inode| inode.lock().data.clone())
    }

    /// Replaces a file's contents, all of them durable, for corruption tests.
    /// A file that does not exist is created with a durable directory entry.
    /// Not counted, never faulted.
    pub fn set_file_bytes(&self, path: &Path, bytes: &[u8]) -> Result<()> {
        let mut st = self.state.lock();
        let (dir, name) = split(path)?;
        let dir = st.dir_mut(&dir, "write", path)?;
        let inode = match dir.live.get(&name) {
            Some(inode) => Arc::clone(inode),
            None => {
                let inode = new_inode();
                dir.live.insert(name.clone(), Arc::clone(&inode));
                dir.durable.insert(name, Arc::clone(&inode));
                inode
            }
        };
        let mut inode = inode.lock();
        inode.data = bytes.to_vec();
        inode.synced_len = bytes.len();
        Ok(())
    }

    /// Bytes held by the files visible now (each file counted once).
    pub fn total_bytes(&self) -> u64 {
        let st = self.state.lock();
        let mut seen = std::collections::HashSet::new();
        let mut total = 0u64;
        for dir in st.dirs.values() {
            for inode in dir.live.values() {
                if seen.insert(Arc::as_ptr(inode)) {
                    total += inode.lock().data.len() as u64;
                }
            }
        }
        total
    }

    fn new_handle_parts(&self, st: &State, path: &Path, inode: InodeRef) -> HandleParts {
        HandleParts { state: Arc::clone(&self.state), path: path.to_path_buf(), inode, generation: st.generation }
    }
}

struct HandleParts {
    state: Arc<Mutex<State>>,
    path: PathBuf,
    inode: InodeRef,
    generation: u64,
}

struct MemWritable {
    h: HandleParts,
    size: u64,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut st = self.h.state.lock();
        st.enter(FaultOp::Append, "append", &self.h.path, None, Some(self.h.generation))?;
        self.h.inode.lock().data.extend_from_slice(data);
        self.size += data.len() as u64;
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        self.h.state.lock().enter(FaultOp::Flush, "flush", &self.h.path, None, Some(self.h.generation))
    }
    fn sync(&mut self) -> Result<()> {
        let mut st = self.h.state.lock();
        st.enter(FaultOp::Sync, "fdatasync", &self.h.path, None, Some(self.h.generation))?;
        let mut inode = self.h.inode.lock();
        inode.synced_len = inode.data.len();
        Ok(())
    }
    fn size(&self) -> u64 {
        self.size
    }
    fn range_sync_hint(&mut self) -> Result<()> {
        self.h.state.lock().enter(FaultOp::Flush, "sync_file_range", &self.h.path, None, Some(self.h.generation))
    }
}

struct MemSequential {
    h: HandleParts,
    pos: usize,
}

impl SequentialFile for MemSequential {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut st = self.h.state.lock();
        st.enter(FaultOp::Read, "read", &self.h.path, None, Some(self.h.generation))?;
        let inode = self.h.inode.lock();
        let rest = inode.data.get(self.pos..).unwrap_or_default();
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n;
        Ok(n)
    }
}

struct MemRandom {
    h: HandleParts,
}

impl RandomAccessFile for MemRandom {
    fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let mut st = self.h.state.lock();
        st.enter(FaultOp::Read, "pread", &self.h.path, None, Some(self.h.generation))?;
        let inode = self.h.inode.lock();
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(inode.data.len());
        let end = start.saturating_add(len).min(inode.data.len());
        Ok(inode.data[start..end].to_vec())
    }
    fn size(&self) -> Result<u64> {
        let mut st = self.h.state.lock();
        st.enter(FaultOp::Stat, "stat", &self.h.path, None, Some(self.h.generation))?;
        let len = self.h.inode.lock().data.len() as u64;
        Ok(len)
    }
}

struct MemLock {
    state: Arc<Mutex<State>>,
    path: PathBuf,
    id: u64,
    /// The binding of the value it was taken through (invariant 5).
    binding: Arc<Mutex<Binding>>,
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut st = self.state.lock();
        // A crash released this lock already and someone may hold it anew.
        if st.locks.get(&self.path) == Some(&self.id) {
            st.locks.remove(&self.path);
        }
        let mut binding = self.binding.lock();
        binding.locks = binding.locks.saturating_sub(1);
    }
}

impl FileSystem for MemFs {
    fn create_dir_all(&self, path: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.enter(FaultOp::CreateDir, "mkdir", path, None, self.bound())?;
        let norm = normalize(path);
        let mut missing: Vec<&Path> = norm.ancestors().take_while(|a| !st.dirs.contains_key(*a)).collect();
        missing.reverse();
        for dir in missing {
            if let (Some(parent), Some(name)) = (dir.parent(), dir.file_name()) {
                if st.dirs.get(parent).is_some_and(|p| p.live.contains_key(&*name.to_string_lossy())) {
                    return Err(os_error("mkdir", path, libc::ENOTDIR));
                }
            }
            st.dirs.insert(dir.to_path_buf(), Dir::default());
        }
        Ok(())
    }

    fn new_writable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut st = self.state.lock();
        st.enter(FaultOp::Create, "create", path, None, self.bound())?;
        if st.is_dir(path) {
            return Err(os_error("create", path, libc::EISDIR));
        }
        let (dir, name) = split(path)?;
        let inode = new_inode();
        st.dir_mut(&dir, "create", path)?.live.insert(name, Arc::clone(&inode));
        let h = self.new_handle_parts(&st, path, inode);
        Ok(Box::new(MemWritable { h, size: 0 }))
    }

    fn reopen_writable(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let mut st = self.state.lock();
        st.enter(FaultOp::Open, "open", path, None, self.bound())?;
        let inode = st.lookup(path, "open")?;
        let size = inode.lock().data.len() as u64;
        let h = self.new_handle_parts(&st, path, inode);
        Ok(Box::new(MemWritable { h, size }))
    }

    fn open_random(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let mut st = self.state.lock();
        st.enter(FaultOp::Open, "open", path, None, self.bound())?;
        let inode = st.lookup(path, "open")?;
        Ok(Arc::new(MemRandom { h: self.new_handle_parts(&st, path, inode) }))
    }

    /// Memory has no page cache to bypass: as `open_random`.
    fn open_random_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_random(path)
    }

    /// Memory has no page cache to bypass: as `new_writable`.
    fn new_writable_direct(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.new_writable(path)
    }

    fn open_sequential(&self, path: &Path) -> Result<Box<dyn SequentialFile>> {
        let mut st = self.state.lock();
        st.enter(FaultOp::Open, "open", path, None, self.bound())?;
        let inode = st.lookup(path, "open")?;
        Ok(Box::new(MemSequential { h: self.new_handle_parts(&st, path, inode), pos: 0 }))
    }

    fn exists(&self, path: &Path) -> bool {
        let st = self.state.lock();
        st.is_dir(path) || st.lookup(path, "stat").is_ok()
    }

    fn list_dir(&self, path: &Path) -> Result<Vec<String>> {
        let mut st = self.state.lock();
        st.enter(FaultOp::List, "readdir", path, None, self.bound())?;
        let norm = normalize(path);
        let dir = st.dir(&norm, "readdir", path)?;
        let mut names: Vec<String> = dir.live.keys().cloned().collect();
        for sub in st.dirs.keys() {
            if sub.parent() == Some(norm.as_path()) {
                if let Some(name) = sub.file_name() {
                    names.push(name.to_string_lossy().into_owned());
                }
            }
        }
        names.sort();
        Ok(names)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let mut st = self.state.lock();
        st.enter(FaultOp::Stat, "stat", path, None, self.bound())?;
        let inode = st.lookup(path, "stat")?;
        let len = inode.lock().data.len() as u64;
        Ok(len)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.enter(FaultOp::Remove, "unlink", path, None, self.bound())?;
        let (dir, name) = split(path)?;
        match st.dir_mut(&dir, "unlink", path)?.live.remove(&name) {
            Some(_) => Ok(()),
            None => Err(os_error("unlink", path, libc::ENOENT)),
        }
    }

    fn remove_dir(&self, path: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.enter(FaultOp::Remove, "rmdir", path, None, self.bound())?;
        let norm = normalize(path);
        if norm.parent().is_none() {
            return Err(os_error("rmdir", path, libc::EBUSY));
        }
        let dir = st.dir(&norm, "rmdir", path)?;
        let has_subdir = st.dirs.keys().any(|d| d.parent() == Some(norm.as_path()));
        if !dir.live.is_empty() || has_subdir {
            return Err(os_error("rmdir", path, libc::ENOTEMPTY));
        }
        st.dirs.remove(&norm);
        Ok(())
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.enter(FaultOp::Rename, "rename", from, Some(to), self.bound())?;
        if st.is_dir(from) {
            return st.rename_dir(from, to);
        }
        if st.is_dir(to) {
            return Err(os_error("rename", from, libc::EISDIR));
        }
        let (from_dir, from_name) = split(from)?;
        let (to_dir, to_name) = split(to)?;
        let inode = st.lookup(from, "rename")?;
        st.dir(&to_dir, "rename", to)?;
        st.dir_mut(&from_dir, "rename", from)?.live.remove(&from_name);
        st.dir_mut(&to_dir, "rename", to)?.live.insert(to_name, inode);
        Ok(())
    }

    fn link_file(&self, from: &Path, to: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.enter(FaultOp::Create, "link", to, Some(from), self.bound())?;
        let inode = st.lookup(from, "link")?;
        let (to_dir, to_name) = split(to)?;
        if st.is_dir(to) || st.dir(&to_dir, "link", to)?.live.contains_key(&to_name) {
            return Err(os_error("link", to, libc::EEXIST));
        }
        st.dir_mut(&to_dir, "link", to)?.live.insert(to_name, inode);
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> Result<()> {
        let mut st = self.state.lock();
        st.enter(FaultOp::SyncDir, "fsync dir", path, None, self.bound())?;
        let dir = st.dir_mut(&normalize(path), "fsync dir", path)?;
        dir.durable = dir.live.clone();
        Ok(())
    }

    fn lock_file(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut st = self.state.lock();
        st.enter(FaultOp::Lock, "flock", path, None, self.bound())?;
        let (dir_path, name) = split(path)?;
        let dir = st.dir_mut(&dir_path, "open lock", path)?;
        dir.live.entry(name.clone()).or_insert_with(new_inode);
        let key = dir_path.join(name);
        if st.locks.contains_key(&key) {
            return Err(Error::Busy(format!("{} is locked by another open handle", path.display())));
        }
        let id = st.next_lock_id;
        st.next_lock_id += 1;
        st.locks.insert(key.clone(), id);
        // The taker is the process that now runs: bound to this generation.
        let mut binding = self.binding.lock();
        binding.generation = st.generation;
        binding.locks += 1;
        drop(binding);
        Ok(Box::new(MemLock { state: Arc::clone(&self.state), path: key, id, binding: Arc::clone(&self.binding) }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    fn write(fs: &MemFs, path: &str, data: &[u8], sync: bool) {
        let mut f = fs.new_writable(p(path)).unwrap();
        f.append(data).unwrap();
        if sync {
            f.sync().unwrap();
        }
    }

    fn fresh_db_dir() -> MemFs {
        let fs = MemFs::new();
        fs.create_dir_all(p("/db")).unwrap();
        fs
    }

    #[test]
    fn a_hard_link_shares_the_file_and_its_name_is_durable_after_sync_dir() {
        let fs = fresh_db_dir();
        fs.create_dir_all(p("/copy")).unwrap();
        write(&fs, "/db/t", b"table", true);
        fs.sync_dir(p("/db")).unwrap();
        fs.link_file(p("/db/t"), p("/copy/t")).unwrap();
        // The source's name goes; the link keeps the bytes.
        fs.remove_file(p("/db/t")).unwrap();
        assert_eq!(fs.file_bytes(p("/copy/t")).unwrap(), b"table");
        let e = fs.link_file(p("/db/missing"), p("/copy/u")).unwrap_err().to_string();
        assert!(e.contains("No such file"), "{e}");
        write(&fs, "/copy/u", b"u", true);
        let e = fs.link_file(p("/copy/t"), p("/copy/u")).unwrap_err().to_string();
        assert!(e.contains("exists"), "{e}");
        // Unsynced directory entries are lost by a crash; synced ones stay.
        fs.crash(CrashMode::DropUnsynced);
        assert!(!fs.exists(p("/copy/t")));
        write(&fs, "/copy/u", b"u", true);
        fs.link_file(p("/copy/u"), p("/copy/v")).unwrap();
        fs.sync_dir(p("/copy")).unwrap();
        fs.crash(CrashMode::DropUnsynced);
        assert_eq!(fs.file_bytes(p("/copy/v")).unwrap(), b"u");
    }

    #[test]
    fn a_directory_renames_with_everything_under_it() {
        let fs = fresh_db_dir();
        fs.create_dir_all(p("/a.tmp/sub")).unwrap();
        write(&fs, "/a.tmp/f", b"f", true);
        write(&fs, "/a.tmp/sub/g", b"g", true);
        fs.sync_dir(p("/a.tmp")).unwrap();
        fs.sync_dir(p("/a.tmp/sub")).unwrap();
        // Onto a directory that holds something: refused, nothing moves.
        write(&fs, "/db/x", b"x", true);
        let e = fs.rename(p("/a.tmp"), p("/db")).unwrap_err().to_string();
        assert!(e.contains("not empty"), "{e}");
        let e = fs.rename(p("/a.tmp"), p("/a.tmp/sub/inside")).unwrap_err().to_string();
        assert!(e.contains("Invalid argument"), "{e}");
        fs.rename(p("/a.tmp"), p("/a")).unwrap();
        assert!(!fs.exists(p("/a.tmp")) && !fs.exists(p("/a.tmp/f")));
        assert_eq!(fs.file_bytes(p("/a/f")).unwrap(), b"f");
        assert_eq!(fs.file_bytes(p("/a/sub/g")).unwrap(), b"g");
        fs.crash(CrashMode::DropUnsynced);
        assert_eq!(fs.file_bytes(p("/a/sub/g")).unwrap(), b"g");
    }

    #[test]
    fn a_value_that_took_a_lock_is_dead_after_a_crash_until_it_locks_again() {
        let fs = fresh_db_dir();
        let process = fs.clone();
        let lock = process.lock_file(p("/db/LOCK")).unwrap();
        write(&process, "/db/a", b"a", true);
        process.sync_dir(p("/db")).unwrap();
        fs.crash(CrashMode::DropUnsynced);
        // The process that lost power changes nothing any more.
        for result in [
            process.new_writable(p("/db/b")).map(drop),
            process.rename(p("/db/a"), p("/db/c")),
            process.remove_file(p("/db/a")),
            process.sync_dir(p("/db")),
            process.list_dir(p("/db")).map(drop),
        ] {
            let e = result.unwrap_err().to_string();
            assert!(e.contains("Stale file handle"), "{e}");
        }
        assert_eq!(fs.list_dir(p("/db")).unwrap(), vec!["LOCK".to_string(), "a".to_string()]);
        // The test's own value, which never locked, works; so does any clone.
        write(&fs.clone(), "/db/d", b"d", false);
        // Once its lock is dropped (the crashed database is gone), the value
        // works again, and a lock taken anew binds it to the new state.
        drop(lock);
        process.remove_file(p("/db/d")).unwrap();
        let _lock = process.lock_file(p("/db/LOCK")).unwrap();
        fs.crash(CrashMode::DropUnsynced);
        assert!(process.new_writable(p("/db/e")).is_err());
    }

    #[test]
    fn unsynced_data_is_lost_and_synced_data_kept() {
        let fs = fresh_db_dir();
        let mut f = fs.new_writable(p("/db/a")).unwrap();
        f.append(b"durable").unwrap();
        f.sync().unwrap();
        f.append(b" and not").unwrap();
        fs.sync_dir(p("/db")).unwrap();
        assert_eq!(fs.file_bytes(p("/db/a")).unwrap(), b"durable and not");
        fs.crash(CrashMode::DropUnsynced);
        assert_eq!(fs.file_bytes(p("/db/a")).unwrap(), b"durable");
        assert_eq!(fs.read_file(p("/db/a")).unwrap(), b"durable");
    }

    #[test]
    fn a_new_file_not_yet_dir_synced_vanishes() {
        let fs = fresh_db_dir();
        write(&fs, "/db/kept", b"x", true);
        fs.sync_dir(p("/db")).unwrap();
        write(&fs, "/db/lost", b"y", true);
        assert!(fs.exists(p("/db/lost")));
        fs.crash(CrashMode::DropUnsynced);
        assert!(!fs.exists(p("/db/lost")));
        assert_eq!(fs.list_dir(p("/db")).unwrap(), vec!["kept".to_string()]);
    }

    #[test]
    fn removal_is_durable_only_after_sync_dir() {
        let fs = fresh_db_dir();
        write(&fs, "/db/a", b"x", true);
        fs.sync_dir(p("/db")).unwrap();
        fs.remove_file(p("/db/a")).unwrap();
        assert!(!fs.exists(p("/db/a")));
        fs.crash(CrashMode::DropUnsynced);
        assert_eq!(fs.file_bytes(p("/db/a")).unwrap(), b"x");
        fs.remove_file(p("/db/a")).unwrap();
        fs.sync_dir(p("/db")).unwrap();
        fs.crash(CrashMode::DropUnsynced);
        assert!(!fs.exists(p("/db/a")));
    }

    #[test]
    fn rename_is_durable_only_after_sync_dir() {
        let fs = fresh_db_dir();
        write(&fs, "/db/CURRENT", b"old", true);
        fs.sync_dir(p("/db")).unwrap();
        write(&fs, "/db/CURRENT.tmp", b"new", true);
        fs.rename(p("/db/CURRENT.tmp"), p("/db/CURRENT")).unwrap();
        assert_eq!(fs.file_bytes(p("/db/CURRENT")).unwrap(), b"new");
        assert!(!fs.exists(p("/db/CURRENT.tmp")));
        fs.crash(CrashMode::DropUnsynced);
        assert_eq!(fs.file_bytes(p("/db/CURRENT")).unwrap(), b"old");
        assert!(!fs.exists(p("/db/CURRENT.tmp")));

        fs.write_file_atomic(p("/db/CURRENT"), b"new").unwrap();
        fs.crash(CrashMode::DropUnsynced);
        assert_eq!(fs.file_bytes(p("/db/CURRENT")).unwrap(), b"new");
        assert_eq!(fs.list_dir(p("/db")).unwrap(), vec!["CURRENT".to_string()]);
    }

    #[test]
    fn recreating_a_file_is_undone_by_a_crash_before_sync_dir() {
        let fs = fresh_db_dir();
        write(&fs, "/db/f", b"first", true);
        fs.sync_dir(p("/db")).unwrap();
        write(&fs, "/db/f", b"second", true);
        fs.crash(CrashMode::DropUnsynced);
        assert_eq!(fs.file_bytes(p("/db/f")).unwrap(), b"first");
    }

    fn crash_with(mode: CrashMode) -> Vec<u8> {
        let fs = fresh_db_dir();
        let mut f = fs.new_writable(p("/db/f")).unwrap();
        f.append(b"synced.").unwrap();
        f.sync().unwrap();
        f.append(&[0xAA; 100]).unwrap();
        fs.sync_dir(p("/db")).unwrap();
        fs.crash(mode);
        fs.file_bytes(p("/db/f")).unwrap()
    }

    #[test]
    fn a_crash_clone_holds_what_a_crash_would_and_is_independent() {
        let fs = fresh_db_dir();
        write(&fs, "/db/synced", b"kept", true);
        fs.sync_dir(p("/db")).unwrap();
        let mut f = fs.new_writable(p("/db/synced")).unwrap();
        f.append(b"lost").unwrap();
        write(&fs, "/db/unlisted", b"x", true);
        let copy = fs.crash_clone(CrashMode::DropUnsynced);
        assert_eq!(copy.file_bytes(p("/db/synced")).unwrap(), b"kept");
        assert!(copy.file_bytes(p("/db/unlisted")).is_none());
        // The original carries on, and nothing it does reaches the copy.
        f.sync().unwrap();
        fs.remove_file(p("/db/synced")).unwrap();
        fs.sync_dir(p("/db")).unwrap();
        assert_eq!(copy.file_bytes(p("/db/synced")).unwrap(), b"kept");
        assert!(fs.file_bytes(p("/db/synced")).is_none());
    }

    #[test]
    fn drop_unsynced_truncates_to_the_synced_length() {
        assert_eq!(crash_with(CrashMode::DropUnsynced), b"synced.");
    }

    #[test]
    fn keep_random_prefix_keeps_a_seeded_prefix_of_the_tail() {
        let mut lengths = std::collections::BTreeSet::new();
        for seed in 0..20 {
            let got = crash_with(CrashMode::KeepRandomPrefix { seed });
            assert!(got.starts_with(b"synced."));
            assert!(got.len() <= 7 + 100);
            assert!(got[7..].iter().all(|&b| b == 0xAA));
            assert_eq!(got, crash_with(CrashMode::KeepRandomPrefix { seed }), "same seed, same result");
            lengths.insert(got.len());
        }
        assert!(lengths.len() > 5, "prefix lengths should vary with the seed: {lengths:?}");
    }

    #[test]
    fn garbage_tail_replaces_unsynced_bytes_keeping_the_length() {
        let got = crash_with(CrashMode::GarbageTail { seed: 7 });
        assert_eq!(got.len(), 107);
        assert_eq!(&got[..7], b"synced.");
        assert_ne!(&got[7..], &[0xAA; 100][..]);
        assert_eq!(got, crash_with(CrashMode::GarbageTail { seed: 7 }));
        assert_ne!(got, crash_with(CrashMode::GarbageTail { seed: 8 }));
    }

    #[test]
    fn zero_tail_zeroes_unsynced_bytes_keeping_the_length() {
        let got = crash_with(CrashMode::ZeroTail);
        assert_eq!(&got[..7], b"synced.");
        assert_eq!(&got[7..], &[0u8; 100][..]);
    }

    #[test]
    fn every_mode_drops_entries_that_were_not_dir_synced() {
        for mode in [
            CrashMode::DropUnsynced,
            CrashMode::KeepRandomPrefix { seed: 1 },
            CrashMode::GarbageTail { seed: 1 },
            CrashMode::ZeroTail,
        ] {
            let fs = fresh_db_dir();
            write(&fs, "/db/new", b"data", false);
            fs.crash(mode);
            assert!(!fs.exists(p("/db/new")), "{mode:?}");
            assert!(fs.exists(p("/db")), "directories are durable at once");
        }
    }

    #[test]
    fn handles_from_before_a_crash_are_dead() {
        let fs = fresh_db_dir();
        let mut w = fs.new_writable(p("/db/f")).unwrap();
        w.append(b"abc").unwrap();
        w.sync().unwrap();
        fs.sync_dir(p("/db")).unwrap();
        let r = fs.open_random(p("/db/f")).unwrap();
        let mut s = fs.open_sequential(p("/db/f")).unwrap();
        fs.crash(CrashMode::DropUnsynced);

        let err = w.append(b"zzz").unwrap_err();
        assert!(matches!(&err, Error::Io { source, .. } if source.raw_os_error() == Some(libc::ESTALE)), "{err}");
        assert!(w.sync().is_err());
        assert!(r.read_at(0, 3).is_err());
        assert!(s.read(&mut [0u8; 3]).is_err());
        assert_eq!(fs.file_bytes(p("/db/f")).unwrap(), b"abc", "a dead handle changes nothing");

        let mut w2 = fs.reopen_writable(p("/db/f")).unwrap();
        assert_eq!(w2.size(), 3);
        w2.append(b"def").unwrap();
        assert_eq!(fs.read_file(p("/db/f")).unwrap(), b"abcdef");
    }

    #[test]
    fn locks_are_exclusive_and_released_on_drop_and_by_a_crash() {
        let fs = fresh_db_dir();
        let lock = fs.lock_file(p("/db/LOCK")).unwrap();
        assert!(matches!(fs.lock_file(p("/db/LOCK")), Err(Error::Busy(_))));
        drop(lock);
        let crashed = fs.clone();
        let held = crashed.lock_file(p("/db/LOCK")).unwrap();
        fs.crash(CrashMode::DropUnsynced);
        let after = fs.lock_file(p("/db/LOCK")).unwrap();
        drop(held);
        assert!(matches!(fs.lock_file(p("/db/LOCK")), Err(Error::Busy(_))), "a dead lock must not free a new one");
        drop(after);
        fs.lock_file(p("/db/LOCK")).unwrap();
    }

    #[test]
    fn a_fault_fires_once_on_the_kth_matching_operation() {
        let fs = fresh_db_dir();
        let mut f = fs.new_writable(p("/db/f")).unwrap();
        fs.inject(FaultRule::new(FaultOp::Append).nth(2));
        f.append(b"1").unwrap();
        assert!(f.append(b"2").is_err());
        f.append(b"3").unwrap();
        f.append(b"4").unwrap();
        assert_eq!(fs.file_bytes(p("/db/f")).unwrap(), b"134", "a failed append applies nothing");
        assert_eq!(f.size(), 3);
        assert_eq!(fs.faults_injected(), 1);
    }

    #[test]
    fn a_persistent_fault_fails_every_later_matching_operation() {
        let fs = fresh_db_dir();
        let mut f = fs.new_writable(p("/db/f")).unwrap();
        fs.inject(FaultRule::new(FaultOp::Sync).nth(2).persistent());
        f.append(b"a").unwrap();
        f.sync().unwrap();
        f.append(b"b").unwrap();
        for _ in 0..3 {
            assert!(f.sync().is_err());
        }
        fs.clear_faults();
        fs.sync_dir(p("/db")).unwrap();
        fs.crash(CrashMode::DropUnsynced);
        assert_eq!(fs.file_bytes(p("/db/f")).unwrap(), b"a", "a failed sync leaves the synced length");
        assert_eq!(fs.faults_injected(), 3);
    }

    #[test]
    fn no_space_is_recognisable_and_path_filters_apply() {
        let fs = fresh_db_dir();
        fs.inject(FaultRule::new(FaultOp::Create).kind(FaultKind::NoSpace).path_contains(".sst").persistent());
        fs.new_writable(p("/db/000001.log")).unwrap();
        let err = fs.new_writable(p("/db/000002.sst")).err().unwrap();
        assert!(err.is_no_space(), "{err}");
        assert!(!fs.exists(p("/db/000002.sst")));

        let io = FaultRule::any_op().path_contains("CURRENT");
        fs.inject(io);
        let err = fs.rename(p("/db/000001.log"), p("/db/CURRENT")).unwrap_err();
        assert!(!err.is_no_space());
        assert!(matches!(&err, Error::Io { source, .. } if source.raw_os_error() == Some(libc::EIO)));
        assert!(fs.exists(p("/db/000001.log")), "a failed rename changes nothing");
    }

    #[test]
    fn operations_are_counted_by_kind() {
        let fs = MemFs::new();
        fs.create_dir_all(p("/db")).unwrap();
        fs.write_file_atomic(p("/db/CURRENT"), b"MANIFEST-1\n").unwrap();
        fs.read_file(p("/db/CURRENT")).unwrap();
        assert!(fs.open_sequential(p("/db/missing")).is_err());
        assert_eq!(fs.op_count_of(FaultOp::CreateDir), 1);
        assert_eq!(fs.op_count_of(FaultOp::Create), 1);
        assert_eq!(fs.op_count_of(FaultOp::Append), 1);
        assert_eq!(fs.op_count_of(FaultOp::Sync), 1);
        assert_eq!(fs.op_count_of(FaultOp::Rename), 1);
        assert_eq!(fs.op_count_of(FaultOp::SyncDir), 1);
        assert_eq!(fs.op_count_of(FaultOp::Open), 2, "failed operations are counted too");
        assert_eq!(fs.op_count_of(FaultOp::Read), 2);
        assert_eq!(fs.op_count(), 10);
    }

    #[test]
    fn namespace_operations_behave_like_posix() {
        let fs = MemFs::new();
        fs.create_dir_all(p("/db/sub")).unwrap();
        write(&fs, "/db/a", b"12345", false);
        assert_eq!(fs.list_dir(p("/db")).unwrap(), vec!["a".to_string(), "sub".to_string()]);
        assert_eq!(fs.file_size(p("/db/a")).unwrap(), 5);
        assert_eq!(fs.file_bytes(p("/db/./sub/../a")).unwrap(), b"12345");
        assert!(fs.new_writable(p("/nowhere/f")).is_err());
        assert!(fs.remove_dir(p("/db")).is_err(), "not empty");
        fs.remove_dir(p("/db/sub")).unwrap();
        assert!(!fs.exists(p("/db/sub")));
        let r = fs.open_random(p("/db/a")).unwrap();
        assert_eq!(r.read_at(1, 3).unwrap(), b"234");
        assert_eq!(r.read_at(3, 10).unwrap(), b"45");
        assert_eq!(r.read_at(99, 1).unwrap(), b"");
        fs.remove_file(p("/db/a")).unwrap();
        assert_eq!(r.read_at(0, 5).unwrap(), b"12345", "an open file outlives its name");
        assert!(fs.remove_file(p("/db/a")).is_err());
        write(&fs, "relative", b"r", false);
        assert!(fs.exists(p("relative")));
    }

    #[test]
    fn test_helpers_plant_and_measure_files() {
        let fs = fresh_db_dir();
        fs.set_file_bytes(p("/db/planted"), b"hello").unwrap();
        write(&fs, "/db/other", b"abc", false);
        assert_eq!(fs.total_bytes(), 8);
        fs.crash(CrashMode::DropUnsynced);
        assert_eq!(fs.file_bytes(p("/db/planted")).unwrap(), b"hello", "planted files are durable");
        fs.set_file_bytes(p("/db/planted"), b"HELLO").unwrap();
        assert_eq!(fs.read_file(p("/db/planted")).unwrap(), b"HELLO");
        assert_eq!(fs.total_bytes(), 5);
    }

    #[test]
    fn clones_share_one_filesystem() {
        let fs = fresh_db_dir();
        let other = fs.clone();
        write(&other, "/db/f", b"x", true);
        other.sync_dir(p("/db")).unwrap();
        fs.crash(CrashMode::DropUnsynced);
        assert_eq!(other.file_bytes(p("/db/f")).unwrap(), b"x");
    }
}
