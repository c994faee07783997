//! [`BlobFileBuilder`]: writes one blob file front to back, a record per
//! value, and returns where each went.

use super::format::{encode_record_head, BlobFileFooter, BlobFileHeader, BlobIndex, HEADER_LEN, RECORD_HEADER_LEN};
use crate::error::{Error, Result};
use crate::fs::WritableFile;
use crate::util::compression::CompressionType;

/// What a finished blob file holds: what the MANIFEST records about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinishedBlobFile {
    /// The file's number.
    pub number: u64,
    /// Records written.
    pub blob_count: u64,
    /// Bytes of the records (headers and keys included).
    pub blob_bytes: u64,
    /// The file's size: header, records and footer.
    pub file_size: u64,
}

/// Writes one blob file. Used by one thread (a flush or a compaction).
pub struct BlobFileBuilder {
    file: Box<dyn WritableFile>,
    number: u64,
    name: String,
    compression: CompressionType,
    offset: u64,
    footer: BlobFileFooter,
    failed: Option<Error>,
}

impl BlobFileBuilder {
    /// Starts blob file `number` in `file` (empty), writing its header;
    /// values are compressed with `compression` where that pays. `name`
    /// appears in errors.
    pub fn new(
        mut file: Box<dyn WritableFile>,
        number: u64,
        name: String,
        column_family: u32,
        compression: CompressionType,
    ) -> Result<Self> {
        file.append(&BlobFileHeader { column_family, compression }.encode())?;
        Ok(BlobFileBuilder {
            file,
            number,
            name,
            compression,
            offset: HEADER_LEN as u64,
            footer: BlobFileFooter::default(),
            failed: None,
        })
    }

    /// Appends the record of `value` for `key`; returns the index the LSM
    /// keeps for it. A failed append fails every later call.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<BlobIndex> {
        if let Some(e) = &self.failed {
            return Err(e.duplicate());
        }
        if key.len() > u32::MAX as usize || value.len() > u32::MAX as usize {
            return Err(Error::invalid(format!("{}: a blob's key or value does not fit in 4 GiB", self.name)));
        }
        // Stored as SST blocks are: compressed only where that saves 1/8.
        let (stored, compression) = match crate::sst::format::maybe_compress(value, self.compression) {
            Some((c, t)) => (std::borrow::Cow::Owned(c), t),
            None => (std::borrow::Cow::Borrowed(value), CompressionType::None),
        };
        // The head and the value are appended apart: a large value goes to
        // the file as it is, not copied into one record buffer first.
        let head = encode_record_head(key, &stored, compression);
        if let Err(e) = self.file.append(&head).and_then(|()| self.file.append(&stored)) {
            self.failed = Some(e.duplicate());
            return Err(e);
        }
        let record_len = head.len() + stored.len();
        let index = BlobIndex {
            file_number: self.number,
            offset: self.offset + (RECORD_HEADER_LEN + key.len()) as u64,
            size: stored.len() as u64,
            compression,
        };
        self.offset += record_len as u64;
        self.footer.blob_count += 1;
        self.footer.blob_bytes += record_len as u64;
        Ok(index)
    }

    /// The file's size so far (header and records; the footer comes at `finish`).
    pub fn file_size(&self) -> u64 {
        self.offset
    }

    /// Writes the footer and syncs the file: once this returns, every
    /// record is durable (a version edit may refer to the file).
    pub fn finish(mut self) -> Result<FinishedBlobFile> {
        if let Some(e) = &self.failed {
            return Err(e.duplicate());
        }
        let footer = self.footer.encode();
        self.file.append(&footer)?;
        self.offset += footer.len() as u64;
        kill_point!("blob_sync");
        self.file.sync()?;
        Ok(FinishedBlobFile {
            number: self.number,
            blob_count: self.footer.blob_count,
            blob_bytes: self.footer.blob_bytes,
            file_size: self.offset,
        })
    }
}
