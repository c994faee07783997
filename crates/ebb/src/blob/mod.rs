//! Blob files: large values kept apart from the LSM tree (RocksDB's
//! integrated BlobDB, "key-value separation"). The format is written up in
//! docs/format.md, "Blob files"; the behaviour in docs/blob.md.
//!
//! What this module owns:
//! - [`format`]: the header, record and footer of a blob file, and the
//!   [`BlobIndex`] an LSM entry of kind `BlobIndex` holds instead of its value;
//! - [`BlobFileBuilder`] writes a blob file, a record per value, during a
//!   flush or a compaction; [`BlobFileReader`] reads the blob an index
//!   points at.
//!
//! Invariants:
//! 1. A blob file is written once, front to back, and never changed; it is
//!    synced, footer included, before any version edit refers to it.
//! 2. Every byte of a blob file belongs to the header, a record or the
//!    footer, each covered by a masked CRC-32C. A record also carries its
//!    user key, and a read checks it against the key being read, so a
//!    misdirected index reads as corruption, never as another key's value.
//! 3. Decoders trust nothing: damage is [`crate::Error::Corruption`] naming
//!    the file and offset, never a panic and never a wrong value.
//!
//! Thread safety: a builder is used by one thread; a reader is immutable and
//! shared through `Arc`.

pub mod builder;
pub mod format;
pub mod reader;

pub use builder::{BlobFileBuilder, FinishedBlobFile};
pub use format::BlobIndex;
pub use reader::BlobFileReader;

use crate::error::Result;

/// Reads blobs by their index: what a compaction needs to relocate a blob
/// (garbage collection), defined here so the compaction layer does not
/// reach up to the db's blob file cache, which implements it.
pub trait BlobFetcher: Send + Sync {
    /// The value of the blob `index` points at, written for user key `key`;
    /// checksums are verified when `verify`.
    fn fetch(&self, key: &[u8], index: &BlobIndex, verify: bool) -> Result<Vec<u8>>;
}
