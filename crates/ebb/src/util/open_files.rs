//! Open file readers by file number, with their order of last use: the
//! bookkeeping the table cache (`version/table_cache.rs`) and the blob file
//! cache (`db/blob_cache.rs`) share. With a capacity, keeping a reader past
//! it closes the least recently used first (a reader still in use stays
//! open until its users drop their references).
//!
//! Not thread-safe; each cache holds its own under its lock.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// Readers of type `T` by file number, each with the tick of its last use,
/// and the file numbers by last use, oldest first.
pub(crate) struct OpenFiles<T> {
    by_number: HashMap<u64, (Arc<T>, u64)>,
    by_use: BTreeMap<u64, u64>,
    tick: u64,
}

impl<T> Default for OpenFiles<T> {
    fn default() -> Self {
        OpenFiles { by_number: HashMap::new(), by_use: BTreeMap::new(), tick: 0 }
    }
}

impl<T> OpenFiles<T> {
    /// The reader of `number`, marked used now.
    pub(crate) fn touch(&mut self, number: u64) -> Option<Arc<T>> {
        let (reader, used) = self.by_number.get_mut(&number)?;
        self.by_use.remove(used);
        self.tick += 1;
        *used = self.tick;
        self.by_use.insert(self.tick, number);
        Some(Arc::clone(reader))
    }

    /// Keeps `reader` as the reader of `number` (or the one another thread
    /// kept first), marked used now; then closes the least recently used
    /// beyond `capacity` (`None`: no bound).
    pub(crate) fn keep(&mut self, number: u64, reader: Arc<T>, capacity: Option<usize>) -> Arc<T> {
        if let Some(kept) = self.touch(number) {
            return kept;
        }
        self.tick += 1;
        self.by_number.insert(number, (Arc::clone(&reader), self.tick));
        self.by_use.insert(self.tick, number);
        if let Some(capacity) = capacity {
            while self.by_number.len() > capacity.max(1) {
                let Some((_, oldest)) = self.by_use.pop_first() else { break };
                self.by_number.remove(&oldest);
            }
        }
        reader
    }

    /// Forgets the reader of `number` (its file was deleted).
    pub(crate) fn remove(&mut self, number: u64) {
        if let Some((_, used)) = self.by_number.remove(&number) {
            self.by_use.remove(&used);
        }
    }

    /// How many readers are kept.
    pub(crate) fn len(&self) -> usize {
        self.by_number.len()
    }

    /// The readers kept.
    pub(crate) fn readers(&self) -> impl Iterator<Item = &Arc<T>> {
        self.by_number.values().map(|(r, _)| r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_goes_first_and_a_kept_reader_wins_a_race() {
        let mut open = OpenFiles::default();
        for n in 1..=3u64 {
            open.keep(n, Arc::new(n), Some(3));
        }
        // 1 used again: 2 is now the oldest, and goes when 4 comes.
        assert_eq!(open.touch(1).as_deref(), Some(&1));
        open.keep(4, Arc::new(4), Some(3));
        assert_eq!(open.len(), 3);
        assert!(open.touch(2).is_none());
        // A second reader of a kept file gives back the first.
        let first = open.touch(3).unwrap();
        assert!(Arc::ptr_eq(&open.keep(3, Arc::new(3), Some(3)), &first));
        open.remove(3);
        assert!(open.touch(3).is_none());
        assert_eq!(open.len(), 2);
        // Unbounded keeps everything.
        for n in 10..100u64 {
            open.keep(n, Arc::new(n), None);
        }
        assert_eq!(open.len(), 92);
    }
}
