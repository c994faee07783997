//! `VersionEdit`: one change to the set of live files, as recorded in the
//! MANIFEST (see docs/format.md, "MANIFEST").
//!
//! Encoding: a sequence of fields, each a varint32 tag followed by its
//! payload. Unknown tags are corruption (no forward compatibility is promised
//! yet). The tag numbers are on disk: DO NOT CHANGE.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::key::{SequenceNumber, MAX_SEQUENCE};
use crate::util::coding::{put_length_prefixed, put_varint32, put_varint64, Decoder};

// DO NOT CHANGE: on-disk format (MANIFEST field tags).
const TAG_LOG_NUMBER: u32 = 1;
const TAG_NEXT_FILE_NUMBER: u32 = 2;
const TAG_LAST_SEQUENCE: u32 = 3;
const TAG_DELETED_FILE: u32 = 4;
const TAG_NEW_FILE: u32 = 5;
// A new file that refers to blob files: as 5, then the oldest blob file it
// refers to (RocksDB's `oldest_blob_file_number`). A file that refers to
// none is written with tag 5, so a database without blob files writes the
// bytes it wrote before they existed.
const TAG_NEW_FILE_WITH_BLOBS: u32 = 6;
// A new file that has range tombstones: as 6 (its oldest blob file, 0 for
// none), then how many. Written only for such files, so an older reader
// refuses a MANIFEST listing one (an unknown tag) instead of opening it
// without knowing.
const TAG_NEW_FILE_WITH_RANGE_DELETIONS: u32 = 7;
// The name of the comparator the edit's family orders its keys by (RocksDB's
// kComparator), in the edit that creates the family and in each MANIFEST
// snapshot. Written only for a comparator other than the bytewise one, so
// a bytewise database writes the bytes it wrote before comparators existed
// and an older reader refuses any other (an unknown tag).
const TAG_COMPARATOR: u32 = 8;
// Column families, RocksDB's tag numbers (kColumnFamily, kColumnFamilyAdd,
// kColumnFamilyDrop, kMaxColumnFamily).
const TAG_COLUMN_FAMILY: u32 = 200;
const TAG_COLUMN_FAMILY_ADD: u32 = 201;
const TAG_COLUMN_FAMILY_DROP: u32 = 202;
const TAG_MAX_COLUMN_FAMILY: u32 = 203;
// Blob files, RocksDB's tag numbers (kBlobFileAddition, kBlobFileGarbage).
const TAG_BLOB_FILE_ADDITION: u32 = 400;
const TAG_BLOB_FILE_GARBAGE: u32 = 401;
/// The family's `full_history_ts_low` (RocksDB's tag and encoding: the
/// timestamp's 8 bytes, length-prefixed).
const TAG_FULL_HISTORY_TS_LOW: u32 = 404;

/// What the version set knows about one SST.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMetaData {
    /// File number (`NNNNNN.sst`).
    pub number: u64,
    /// Size in bytes.
    pub file_size: u64,
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// Smallest sequence number of any entry.
    pub smallest_seq: SequenceNumber,
    /// Largest sequence number of any entry.
    pub largest_seq: SequenceNumber,
    /// Entries (every version counts).
    pub num_entries: u64,
    /// Tombstones.
    pub num_deletions: u64,
    /// The oldest (smallest-numbered) blob file the table's entries refer
    /// to; 0 when they refer to none (RocksDB's `oldest_blob_file_number`).
    /// A blob file older than every table's oldest is referred to by none.
    pub oldest_blob_file: u64,
    /// Range tombstones in the table's range-deletion block (MANIFEST tag
    /// 7): readers gather the tombstones of the files that have any.
    pub num_range_deletions: u64,
}

/// A blob file a flush or compaction wrote (RocksDB's `BlobFileAddition`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobFileAddition {
    /// File number (`NNNNNN.blob`).
    pub number: u64,
    /// Blobs in it.
    pub total_count: u64,
    /// Bytes of its records, their headers and keys included.
    pub total_bytes: u64,
}

/// Blobs of a blob file that no table refers to any more, found by a
/// compaction that dropped or relocated their references (RocksDB's
/// `BlobFileGarbage`). Added to what the file already had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobFileGarbage {
    /// File number.
    pub number: u64,
    /// Blobs that became garbage.
    pub count: u64,
    /// Their record bytes.
    pub bytes: u64,
}

impl FileMetaData {
    /// Smallest user key.
    pub fn smallest_user_key(&self) -> &[u8] {
        crate::key::user_key(&self.smallest)
    }
    /// Largest user key.
    pub fn largest_user_key(&self) -> &[u8] {
        crate::key::user_key(&self.largest)
    }
}

/// A change to the version of one column family: files added and removed,
/// the family created or dropped; and the database's counters advanced.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// The column family the edit is about (0, the default family, when the
    /// field is absent).
    pub column_family: u32,
    /// Creates the family `column_family` with this name.
    pub column_family_add: Option<String>,
    /// Drops the family `column_family`.
    pub column_family_drop: bool,
    /// The name of the comparator the family's keys are ordered by, when
    /// it is not the bytewise one.
    pub comparator: Option<String>,
    /// The largest column family id ever handed out (ids are never reused).
    pub max_column_family: Option<u32>,
    /// The family's data in WALs numbered below this is all in tables.
    pub log_number: Option<u64>,
    /// The next file number to hand out.
    pub next_file_number: Option<u64>,
    /// The last sequence number used.
    pub last_sequence: Option<SequenceNumber>,
    /// Files removed: (level, file number).
    pub deleted_files: Vec<(usize, u64)>,
    /// Files added: (level, metadata).
    pub new_files: Vec<(usize, Arc<FileMetaData>)>,
    /// Blob files added to the family.
    pub blob_file_additions: Vec<BlobFileAddition>,
    /// Garbage found in the family's blob files.
    pub blob_file_garbage: Vec<BlobFileGarbage>,
    /// The family's full_history_ts_low: reads below it are refused, and
    /// compactions may drop the versions they alone could see
    /// (docs/timestamps.md).
    pub full_history_ts_low: Option<u64>,
}

impl VersionEdit {
    /// Records the removal of `number` from `level`.
    pub fn delete_file(&mut self, level: usize, number: u64) {
        self.deleted_files.push((level, number));
    }

    /// Records the addition of a file at `level`.
    pub fn add_file(&mut self, level: usize, f: FileMetaData) {
        self.new_files.push((level, Arc::new(f)));
    }

    /// Encodes the edit.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.column_family != 0 {
            put_varint32(&mut out, TAG_COLUMN_FAMILY);
            put_varint32(&mut out, self.column_family);
        }
        if let Some(name) = &self.column_family_add {
            put_varint32(&mut out, TAG_COLUMN_FAMILY_ADD);
            put_length_prefixed(&mut out, name.as_bytes());
        }
        if self.column_family_drop {
            put_varint32(&mut out, TAG_COLUMN_FAMILY_DROP);
        }
        if let Some(name) = &self.comparator {
            put_varint32(&mut out, TAG_COMPARATOR);
            put_length_prefixed(&mut out, name.as_bytes());
        }
        if let Some(n) = self.max_column_family {
            put_varint32(&mut out, TAG_MAX_COLUMN_FAMILY);
            put_varint32(&mut out, n);
        }
        if let Some(n) = self.log_number {
            put_varint32(&mut out, TAG_LOG_NUMBER);
            put_varint64(&mut out, n);
        }
        if let Some(n) = self.next_file_number {
            put_varint32(&mut out, TAG_NEXT_FILE_NUMBER);
            put_varint64(&mut out, n);
        }
        if let Some(n) = self.last_sequence {
            put_varint32(&mut out, TAG_LAST_SEQUENCE);
            put_varint64(&mut out, n);
        }
        for (level, number) in &self.deleted_files {
            put_varint32(&mut out, TAG_DELETED_FILE);
            put_varint32(&mut out, *level as u32);
            put_varint64(&mut out, *number);
        }
        for (level, f) in &self.new_files {
            let tag = match (f.num_range_deletions, f.oldest_blob_file) {
                (0, 0) => TAG_NEW_FILE,
                (0, _) => TAG_NEW_FILE_WITH_BLOBS,
                _ => TAG_NEW_FILE_WITH_RANGE_DELETIONS,
            };
            put_varint32(&mut out, tag);
            put_varint32(&mut out, *level as u32);
            put_varint64(&mut out, f.number);
            put_varint64(&mut out, f.file_size);
            put_length_prefixed(&mut out, &f.smallest);
            put_length_prefixed(&mut out, &f.largest);
            put_varint64(&mut out, f.smallest_seq);
            put_varint64(&mut out, f.largest_seq);
            put_varint64(&mut out, f.num_entries);
            put_varint64(&mut out, f.num_deletions);
            if tag != TAG_NEW_FILE {
                put_varint64(&mut out, f.oldest_blob_file);
            }
            if tag == TAG_NEW_FILE_WITH_RANGE_DELETIONS {
                put_varint64(&mut out, f.num_range_deletions);
            }
        }
        for b in &self.blob_file_additions {
            put_varint32(&mut out, TAG_BLOB_FILE_ADDITION);
            put_varint64(&mut out, b.number);
            put_varint64(&mut out, b.total_count);
            put_varint64(&mut out, b.total_bytes);
        }
        for g in &self.blob_file_garbage {
            put_varint32(&mut out, TAG_BLOB_FILE_GARBAGE);
            put_varint64(&mut out, g.number);
            put_varint64(&mut out, g.count);
            put_varint64(&mut out, g.bytes);
        }
        if let Some(ts) = self.full_history_ts_low {
            put_varint32(&mut out, TAG_FULL_HISTORY_TS_LOW);
            put_length_prefixed(&mut out, &ts.to_le_bytes());
        }
        out
    }

    /// Decodes an edit; `file` and `offset` name the record for errors.
    pub fn decode(data: &[u8], file: &str, offset: u64) -> Result<VersionEdit> {
        let bad = |what: &str| Error::corruption(file, offset, format!("MANIFEST record: {what}"));
        let mut d = Decoder::new(data);
        let mut edit = VersionEdit::default();
        while !d.is_empty() {
            let tag = d.varint32().ok_or_else(|| bad("truncated tag"))?;
            match tag {
                TAG_COLUMN_FAMILY => edit.column_family = d.varint32().ok_or_else(|| bad("column family id"))?,
                TAG_COLUMN_FAMILY_ADD => {
                    let name = d.length_prefixed().ok_or_else(|| bad("column family name"))?;
                    let name = std::str::from_utf8(name).map_err(|_| bad("column family name is not UTF-8"))?;
                    edit.column_family_add = Some(name.to_string());
                }
                TAG_COLUMN_FAMILY_DROP => edit.column_family_drop = true,
                TAG_COMPARATOR => {
                    let name = d.length_prefixed().ok_or_else(|| bad("comparator name"))?;
                    let name = std::str::from_utf8(name).map_err(|_| bad("comparator name is not UTF-8"))?;
                    edit.comparator = Some(name.to_string());
                }
                TAG_MAX_COLUMN_FAMILY => {
                    edit.max_column_family = Some(d.varint32().ok_or_else(|| bad("max column family"))?)
                }
                TAG_LOG_NUMBER => edit.log_number = Some(d.varint64().ok_or_else(|| bad("log number"))?),
                TAG_NEXT_FILE_NUMBER => {
                    edit.next_file_number = Some(d.varint64().ok_or_else(|| bad("next file number"))?)
                }
                TAG_LAST_SEQUENCE => {
                    let seq = d.varint64().filter(|s| *s <= MAX_SEQUENCE);
                    edit.last_sequence = Some(seq.ok_or_else(|| bad("last sequence missing or past the largest"))?)
                }
                TAG_DELETED_FILE => {
                    let level = d.varint32().ok_or_else(|| bad("deleted file level"))? as usize;
                    let number = d.varint64().ok_or_else(|| bad("deleted file number"))?;
                    edit.deleted_files.push((level, number));
                }
                TAG_NEW_FILE | TAG_NEW_FILE_WITH_BLOBS | TAG_NEW_FILE_WITH_RANGE_DELETIONS => {
                    let level = d.varint32().ok_or_else(|| bad("new file level"))? as usize;
                    let f = (|| {
                        Some(FileMetaData {
                            number: d.varint64()?,
                            file_size: d.varint64()?,
                            smallest: d.length_prefixed()?.to_vec(),
                            largest: d.length_prefixed()?.to_vec(),
                            smallest_seq: d.varint64()?,
                            largest_seq: d.varint64()?,
                            num_entries: d.varint64()?,
                            num_deletions: d.varint64()?,
                            oldest_blob_file: if tag == TAG_NEW_FILE { 0 } else { d.varint64()? },
                            num_range_deletions: if tag == TAG_NEW_FILE_WITH_RANGE_DELETIONS {
                                d.varint64()?
                            } else {
                                0
                            },
                        })
                    })()
                    .ok_or_else(|| bad("new file fields truncated"))?;
                    if f.smallest.len() < 8 || f.largest.len() < 8 {
                        return Err(bad("new file key shorter than an internal key"));
                    }
                    if tag == TAG_NEW_FILE_WITH_BLOBS && f.oldest_blob_file == 0 {
                        return Err(bad("new file refers to blob file 0"));
                    }
                    edit.new_files.push((level, Arc::new(f)));
                }
                TAG_BLOB_FILE_ADDITION => {
                    let b = (|| {
                        Some(BlobFileAddition {
                            number: d.varint64()?,
                            total_count: d.varint64()?,
                            total_bytes: d.varint64()?,
                        })
                    })()
                    .ok_or_else(|| bad("blob file addition truncated"))?;
                    edit.blob_file_additions.push(b);
                }
                TAG_BLOB_FILE_GARBAGE => {
                    let g = (|| {
                        Some(BlobFileGarbage { number: d.varint64()?, count: d.varint64()?, bytes: d.varint64()? })
                    })()
                    .ok_or_else(|| bad("blob file garbage truncated"))?;
                    edit.blob_file_garbage.push(g);
                }
                TAG_FULL_HISTORY_TS_LOW => {
                    let raw = d.length_prefixed().ok_or_else(|| bad("full_history_ts_low truncated"))?;
                    let raw: [u8; 8] =
                        raw.try_into().map_err(|_| bad(&format!("full_history_ts_low of {} bytes", raw.len())))?;
                    edit.full_history_ts_low = Some(u64::from_le_bytes(raw));
                }
                other => return Err(bad(&format!("unknown field tag {other}"))),
            }
        }
        Ok(edit)
    }
}

/// A one-entry table of `size` bytes spanning user keys `[lo, hi]` at
/// sequence `seq`, for the version layer's and the pickers' tests.
#[cfg(test)]
pub(crate) fn test_file(number: u64, lo: impl AsRef<[u8]>, hi: impl AsRef<[u8]>, size: u64, seq: u64) -> FileMetaData {
    use crate::key::{make_internal_key, ValueKind};
    FileMetaData {
        number,
        file_size: size,
        smallest: make_internal_key(lo.as_ref(), seq, ValueKind::Value),
        largest: make_internal_key(hi.as_ref(), seq, ValueKind::Value),
        smallest_seq: seq,
        largest_seq: seq,
        num_entries: 1,
        num_deletions: 0,
        oldest_blob_file: 0,
        num_range_deletions: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{make_internal_key, ValueKind};

    fn sample() -> VersionEdit {
        let mut e = VersionEdit {
            log_number: Some(12),
            next_file_number: Some(40),
            last_sequence: Some(99_999),
            ..Default::default()
        };
        e.delete_file(1, 7);
        e.add_file(
            2,
            FileMetaData {
                number: 33,
                file_size: 4096,
                smallest: make_internal_key(b"a", 5, ValueKind::Value),
                largest: make_internal_key(b"z", 9, ValueKind::Deletion),
                smallest_seq: 5,
                largest_seq: 9,
                num_entries: 10,
                num_deletions: 1,
                oldest_blob_file: 0,
                num_range_deletions: 0,
            },
        );
        e
    }

    /// [`sample`] with a table referring to blob files, a blob file added
    /// and garbage found in another.
    fn sample_with_blobs() -> VersionEdit {
        let mut e = sample();
        e.add_file(
            1,
            FileMetaData {
                number: 34,
                file_size: 2048,
                smallest: make_internal_key(b"b", 6, ValueKind::BlobIndex),
                largest: make_internal_key(b"c", 7, ValueKind::Value),
                smallest_seq: 6,
                largest_seq: 7,
                num_entries: 2,
                num_deletions: 0,
                oldest_blob_file: 30,
                num_range_deletions: 0,
            },
        );
        e.blob_file_additions.push(BlobFileAddition { number: 35, total_count: 2, total_bytes: 900 });
        e.blob_file_garbage.push(BlobFileGarbage { number: 30, count: 1, bytes: 450 });
        e
    }

    #[test]
    fn edit_round_trips() {
        let e = sample();
        assert_eq!(VersionEdit::decode(&e.encode(), "MANIFEST", 0).unwrap(), e);
        assert_eq!(VersionEdit::decode(&[], "MANIFEST", 0).unwrap(), VersionEdit::default());
        let b = sample_with_blobs();
        assert_eq!(VersionEdit::decode(&b.encode(), "MANIFEST", 0).unwrap(), b);
        // A table that refers to no blob file keeps tag 5's bytes.
        let plain = VersionEdit { new_files: e.new_files.clone(), ..Default::default() };
        assert_eq!(plain.encode()[0], TAG_NEW_FILE as u8);
        let data = b.encode();
        for cut in 1..data.len() {
            if let Ok(d) = VersionEdit::decode(&data[..cut], "MANIFEST", 0) {
                assert!(d.new_files.len() < 2 || d.new_files[1].1.oldest_blob_file == 30, "cut {cut}");
                assert!(d.blob_file_additions.iter().all(|a| a.total_bytes == 900), "cut {cut}");
                assert!(d.blob_file_garbage.iter().all(|g| g.bytes == 450), "cut {cut}");
            }
        }
    }

    #[test]
    fn a_table_with_range_tombstones_is_recorded_with_tag_7() {
        let mut e = VersionEdit::default();
        let mut f = sample().new_files[0].1.as_ref().clone();
        f.num_range_deletions = 3;
        e.add_file(4, f.clone());
        let enc = e.encode();
        assert_eq!(enc[0], TAG_NEW_FILE_WITH_RANGE_DELETIONS as u8);
        let back = VersionEdit::decode(&enc, "MANIFEST", 0).unwrap();
        assert_eq!(back.new_files[0].1.num_range_deletions, 3);
        assert_eq!(back, e);
        // With blob files too.
        f.oldest_blob_file = 30;
        let e = VersionEdit { new_files: vec![(1, std::sync::Arc::new(f))], ..Default::default() };
        assert_eq!(VersionEdit::decode(&e.encode(), "MANIFEST", 0).unwrap(), e);
    }

    #[test]
    fn blob_fields_match_the_format_doc() {
        // docs/format.md "MANIFEST", the blob file example.
        let e = VersionEdit {
            blob_file_additions: vec![BlobFileAddition { number: 12, total_count: 1, total_bytes: 21 }],
            blob_file_garbage: vec![BlobFileGarbage { number: 9, count: 3, bytes: 300 }],
            ..Default::default()
        };
        assert_eq!(e.encode(), vec![0x90, 0x03, 0x0c, 0x01, 0x15, 0x91, 0x03, 0x09, 0x03, 0xac, 0x02]);
        let mut t = VersionEdit::default();
        t.add_file(
            0,
            FileMetaData {
                number: 13,
                file_size: 1000,
                smallest: make_internal_key(b"key", 5, ValueKind::BlobIndex),
                largest: make_internal_key(b"key", 5, ValueKind::BlobIndex),
                smallest_seq: 5,
                largest_seq: 5,
                num_entries: 1,
                num_deletions: 0,
                oldest_blob_file: 12,
                num_range_deletions: 0,
            },
        );
        let key = [0x0b, b'k', b'e', b'y', 0x11, 0x05, 0, 0, 0, 0, 0, 0];
        let mut want = vec![0x06, 0x00, 0x0d, 0xe8, 0x07];
        want.extend_from_slice(&key);
        want.extend_from_slice(&key);
        want.extend_from_slice(&[0x05, 0x05, 0x01, 0x00, 0x0c]);
        assert_eq!(t.encode(), want);
        assert_eq!(VersionEdit::decode(&want, "MANIFEST", 0).unwrap(), t);
        // Both in one edit, as the document shows them.
        t.blob_file_additions = e.blob_file_additions.clone();
        t.blob_file_garbage = e.blob_file_garbage.clone();
        want.extend_from_slice(&e.encode());
        assert_eq!((t.encode(), want.len()), (want, 45));
    }

    #[test]
    fn column_family_fields_round_trip_and_match_the_format_doc() {
        let add = VersionEdit {
            column_family: 1,
            column_family_add: Some("users".into()),
            max_column_family: Some(1),
            log_number: Some(7),
            ..Default::default()
        };
        assert_eq!(VersionEdit::decode(&add.encode(), "MANIFEST", 0).unwrap(), add);
        // docs/format.md "MANIFEST", the column family example.
        assert_eq!(
            add.encode(),
            vec![0xc8, 0x01, 0x01, 0xc9, 0x01, 0x05, b'u', b's', b'e', b'r', b's', 0xcb, 0x01, 0x01, 0x01, 0x07]
        );
        let drop = VersionEdit { column_family: 1, column_family_drop: true, ..Default::default() };
        assert_eq!(VersionEdit::decode(&drop.encode(), "MANIFEST", 0).unwrap(), drop);
        assert_eq!(drop.encode(), vec![0xc8, 0x01, 0x01, 0xca, 0x01]);
        // docs/format.md "MANIFEST", the comparator example.
        let reversed = VersionEdit {
            column_family: 1,
            column_family_add: Some("r".into()),
            comparator: Some("rev".into()),
            ..Default::default()
        };
        assert_eq!(VersionEdit::decode(&reversed.encode(), "MANIFEST", 0).unwrap(), reversed);
        assert_eq!(reversed.encode(), vec![0xc8, 0x01, 0x01, 0xc9, 0x01, 0x01, b'r', 0x08, 0x03, b'r', b'e', b'v']);
    }

    #[test]
    fn every_truncation_is_corruption() {
        let data = sample().encode();
        for cut in 1..data.len() {
            if let Ok(e) = VersionEdit::decode(&data[..cut], "MANIFEST", 3) {
                // A cut that falls exactly between fields decodes to a prefix of the edit.
                assert!(e.new_files.is_empty(), "cut {cut} decoded a partial file");
            }
        }
        let past = VersionEdit { last_sequence: Some(MAX_SEQUENCE + 1), ..Default::default() };
        assert!(VersionEdit::decode(&past.encode(), "MANIFEST", 0).unwrap_err().is_corruption());
        let e = VersionEdit::decode(&[99, 1], "MANIFEST-000001", 77).unwrap_err();
        assert!(e.to_string().contains("MANIFEST-000001") && e.to_string().contains("77"), "{e}");
    }
}
