//! Which cluster a node's directory belongs to: `DIR/cluster-id`, a random
//! 128-bit id in hex made by the node that initializes the cluster and
//! adopted by every other member from the first Raft message it takes.
//!
//! Every Raft message carries the sender's cluster id (when it has one);
//! a node whose directory belongs to another cluster refuses it. So a
//! directory moved from one cluster to another (restored from the wrong
//! backup, a node started with another cluster's data) does not mix two
//! clusters' logs: the node is counted unreachable, and says why.

use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

/// DO NOT CHANGE: on-disk layout. The file naming the cluster a directory
/// belongs to.
pub const CLUSTER_ID_FILE: &str = "cluster-id";

/// The header carrying the sender's cluster id on Raft messages.
pub(crate) const CLUSTER_HEADER: &str = "ebb-cluster-id";

/// Writes `contents` to `dir/name` so that a crash leaves the old file or
/// the new one: a synced temporary file renamed over it, then the
/// directory synced.
pub(crate) fn write_durably(dir: &Path, name: &str, contents: &str) -> std::io::Result<()> {
    let tmp = dir.join(format!("{name}.tmp"));
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(contents.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, dir.join(name))?;
    std::fs::File::open(dir)?.sync_all()
}

/// Whether `text` is a cluster id: 32 lowercase hex digits.
fn well_formed(text: &str) -> bool {
    text.len() == 32 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// A node's cluster id, shared by its network and its HTTP handlers.
#[derive(Clone, Debug)]
pub(crate) struct ClusterIdentity {
    dir: PathBuf,
    id: Arc<Mutex<Option<String>>>,
}

/// A message from another cluster than the node's.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The id is not 32 hex digits.
    Malformed(String),
    /// The node belongs to `ours`.
    OtherCluster { ours: String },
    /// Recording the adopted id failed.
    Io(std::io::Error),
}

impl ClusterIdentity {
    /// Reads `dir/cluster-id`, if there is one.
    pub(crate) fn load(dir: &Path) -> Result<Self, String> {
        let path = dir.join(CLUSTER_ID_FILE);
        let id = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let text = text.trim().to_string();
                if !well_formed(&text) {
                    return Err(format!("{} does not hold a cluster id: {text:?}", path.display()));
                }
                Some(text)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        Ok(ClusterIdentity { dir: dir.to_path_buf(), id: Arc::new(Mutex::new(id)) })
    }

    /// The node's cluster id, if it has one yet.
    pub(crate) fn get(&self) -> Option<String> {
        self.id.lock().clone()
    }

    /// Takes `theirs`, a sender's cluster id: adopted (and recorded) if
    /// the node has none yet, refused if it has another.
    pub(crate) fn admit(&self, theirs: &str) -> Result<(), Refusal> {
        if !well_formed(theirs) {
            return Err(Refusal::Malformed(theirs.to_string()));
        }
        let mut id = self.id.lock();
        match id.as_deref() {
            Some(ours) if ours == theirs => Ok(()),
            Some(ours) => Err(Refusal::OtherCluster { ours: ours.to_string() }),
            None => {
                write_durably(&self.dir, CLUSTER_ID_FILE, &format!("{theirs}\n")).map_err(Refusal::Io)?;
                *id = Some(theirs.to_string());
                Ok(())
            }
        }
    }

    /// Gives the node a fresh cluster id (at `init`), unless it has one.
    pub(crate) fn create(&self) -> std::io::Result<String> {
        let mut id = self.id.lock();
        if let Some(id) = id.as_ref() {
            return Ok(id.clone());
        }
        let fresh = random_id();
        write_durably(&self.dir, CLUSTER_ID_FILE, &format!("{fresh}\n"))?;
        *id = Some(fresh.clone());
        Ok(fresh)
    }
}

/// 128 random bits in hex, from the standard library's randomly seeded
/// hasher, the time and the process id.
fn random_id() -> String {
    let mut out = String::with_capacity(32);
    for half in 0..2u64 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(half);
        hasher.write_u32(std::process::id());
        if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            hasher.write_u128(now.as_nanos());
        }
        let _ = write!(out, "{:016x}", hasher.finish());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_adopts_the_first_cluster_and_refuses_others() {
        let dir = tempfile::tempdir().unwrap();
        let identity = ClusterIdentity::load(dir.path()).unwrap();
        assert_eq!(identity.get(), None);
        let a = "0123456789abcdef0123456789abcdef";
        identity.admit(a).unwrap();
        identity.admit(a).unwrap();
        assert!(matches!(identity.admit("ffffffffffffffffffffffffffffffff"), Err(Refusal::OtherCluster { .. })));
        assert!(matches!(identity.admit("not hex"), Err(Refusal::Malformed(_))));
        // Recorded: a restart remembers it, and init keeps it.
        let again = ClusterIdentity::load(dir.path()).unwrap();
        assert_eq!(again.get().as_deref(), Some(a));
        assert_eq!(again.create().unwrap(), a);
    }

    #[test]
    fn fresh_ids_differ_and_damaged_files_are_refused() {
        let (x, y) = (random_id(), random_id());
        assert!(well_formed(&x) && well_formed(&y));
        assert_ne!(x, y);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(CLUSTER_ID_FILE), "garbage\n").unwrap();
        let error = ClusterIdentity::load(dir.path()).unwrap_err();
        assert!(error.contains("does not hold a cluster id"), "{error}");
    }
}
