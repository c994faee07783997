//! The verbs that decode one file of a database without opening it (ldb's
//! `manifest_dump` and `dump_wal`, RocksDB's `sst_dump`), through the
//! engine's internal readers (feature `internals`). None takes a LOCK or
//! writes anything; each reads the file as it is when read, so on a live
//! database a WAL or MANIFEST being appended may end in a torn record.
//!
//! Damage is reported, never skipped: what was decoded before it is printed,
//! then the verb fails with the engine's corruption error naming the file
//! and offset (docs/format.md describes every format read here).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::ValueEnum;
use ebb::comparator::UserComparator;
use ebb::fs::{FileSystem, PosixFs, RandomAccessFile};
use ebb::internals::iter::InternalIterator;
use ebb::internals::key::ValueKind;
use ebb::internals::sst::format::{unwrap_block, BLOCK_TRAILER_LEN, FOOTER_LEN};
use ebb::internals::sst::table_reader::TableCachePolicy;
use ebb::internals::sst::{Block, BlockHandle, BlockIterator, Footer, KeyOrder, ReadSettings, Table};
use ebb::internals::version::filename::{self, FileType};
use ebb::internals::version::VersionEdit;
use ebb::internals::wal::{LogReader, LogRecord};
use ebb::{BatchOp, Error, WriteBatch};

use crate::format::{kind_name, say, Encoding};
use crate::Failure;

/// `ebb manifest_dump`: one line per version edit of the MANIFEST that
/// CURRENT names (or of `path`), then the number of edits.
pub fn manifest_dump(
    out: &mut dyn Write,
    db: Option<&Path>,
    path: Option<&Path>,
    enc: Encoding,
) -> Result<(), Failure> {
    let fs = PosixFs::new();
    let manifest = match (path, db) {
        (Some(p), _) => p.to_path_buf(),
        (None, Some(dir)) => current_manifest(&fs, dir)?,
        (None, None) => return Err(Error::invalid("manifest_dump needs --db or --path").into()),
    };
    let name = manifest.display().to_string();
    say!(out, "manifest: {name}")?;
    let mut reader = LogReader::new(fs.open_sequential(&manifest)?, name.clone());
    // Family names as the edits create them, to name the family of each.
    let mut families = BTreeMap::from([(0, ebb::DEFAULT_COLUMN_FAMILY.to_string())]);
    let mut edits = 0u64;
    loop {
        match reader.next()? {
            LogRecord::Record { data, offset } => {
                let edit = VersionEdit::decode(&data, &name, offset)?;
                if let Some(added) = &edit.column_family_add {
                    families.insert(edit.column_family, added.clone());
                }
                say!(out, "{}", describe_edit(&edit, offset, &families, enc))?;
                edits += 1;
            }
            LogRecord::Eof => break,
            LogRecord::Corrupt { offset, reason, .. } => return Err(Error::corruption(name, offset, reason).into()),
        }
    }
    Ok(say!(out, "edits: {edits}")?)
}

/// The MANIFEST that `dir`'s CURRENT names.
fn current_manifest(fs: &PosixFs, dir: &Path) -> ebb::Result<PathBuf> {
    crate::data::require_directory(dir)?;
    let current = filename::current_file(dir);
    let text = fs.read_file(&current)?;
    let named = std::str::from_utf8(&text).ok().map(|t| t.trim_end_matches('\n'));
    match named {
        Some(n) if matches!(filename::parse_file_name(n), Some((FileType::Manifest, _))) => Ok(dir.join(n)),
        _ => Err(Error::corruption(current.display().to_string(), 0, "CURRENT does not name a MANIFEST file")),
    }
}

/// `@OFFSET field; field; ...`: every field the edit sets, in the order of
/// docs/ebb-tool.md, "manifest_dump".
fn describe_edit(edit: &VersionEdit, offset: u64, families: &BTreeMap<u32, String>, enc: Encoding) -> String {
    let mut fields = Vec::new();
    let cf = edit.column_family;
    match families.get(&cf) {
        Some(n) => fields.push(format!("column_family {cf} ({n})")),
        None => fields.push(format!("column_family {cf}")),
    }
    if let Some(n) = &edit.column_family_add {
        fields.push(format!("add_column_family {n}"));
    }
    if edit.column_family_drop {
        fields.push("drop_column_family".to_string());
    }
    if let Some(n) = edit.max_column_family {
        fields.push(format!("max_column_family {n}"));
    }
    if let Some(n) = &edit.comparator {
        fields.push(format!("comparator {n}"));
    }
    if let Some(n) = edit.log_number {
        fields.push(format!("log_number {n}"));
    }
    if let Some(n) = edit.next_file_number {
        fields.push(format!("next_file_number {n}"));
    }
    if let Some(n) = edit.last_sequence {
        fields.push(format!("last_sequence {n}"));
    }
    for (level, number) in &edit.deleted_files {
        fields.push(format!("delete_file level {level} #{number}"));
    }
    for (level, f) in &edit.new_files {
        let mut s = format!(
            "add_file level {level} #{} size {} keys [{} .. {}] seqs {}..{} entries {} deletions {}",
            f.number,
            f.file_size,
            enc.internal_key(&f.smallest),
            enc.internal_key(&f.largest),
            f.smallest_seq,
            f.largest_seq,
            f.num_entries,
            f.num_deletions
        );
        if f.num_range_deletions > 0 {
            s.push_str(&format!(" range_deletions {}", f.num_range_deletions));
        }
        if f.oldest_blob_file > 0 {
            s.push_str(&format!(" oldest_blob_file #{}", f.oldest_blob_file));
        }
        fields.push(s);
    }
    for b in &edit.blob_file_additions {
        fields.push(format!("add_blob_file #{} blobs {} bytes {}", b.number, b.total_count, b.total_bytes));
    }
    for g in &edit.blob_file_garbage {
        fields.push(format!("blob_garbage #{} blobs {} bytes {}", g.number, g.count, g.bytes));
    }
    format!("@{offset} {}", fields.join("; "))
}

/// `ebb dump_wal`: every record of a WAL decoded as a write batch, then
/// the number of records.
pub fn dump_wal(out: &mut dyn Write, wal: &Path, print_values: bool, enc: Encoding) -> Result<(), Failure> {
    let fs = PosixFs::new();
    let name = wal.display().to_string();
    let mut reader = LogReader::new(fs.open_sequential(wal)?, name.clone());
    let mut records = 0u64;
    loop {
        match reader.next()? {
            LogRecord::Record { data, offset } => {
                print_batch(out, &data, offset, &name, print_values, enc)?;
                records += 1;
            }
            LogRecord::Eof => break,
            LogRecord::Corrupt { offset, reason, .. } => return Err(Error::corruption(name, offset, reason).into()),
        }
    }
    Ok(say!(out, "records: {records}")?)
}

/// What `ebb dump_wal --db` reads.
pub struct Tailing {
    /// The first sequence number wanted.
    pub since: u64,
    /// Keep reading new writes as they are made.
    pub follow: bool,
    /// Stop after this many batches.
    pub count: Option<u64>,
}

/// How long `dump_wal --tail` waits before looking for new writes again.
const TAIL_POLL: std::time::Duration = std::time::Duration::from_millis(200);

/// `ebb dump_wal --db`: the write batches of a database's WALs, live and
/// archived, from `since` on (`ebb::WalUpdates`), then how many; with
/// `follow`, new ones as they are written.
pub fn dump_wal_since(
    out: &mut dyn Write,
    db: &Path,
    tailing: &Tailing,
    print_values: bool,
    enc: Encoding,
) -> Result<(), Failure> {
    let options = ebb::Options::default();
    if !db.join("CURRENT").exists() {
        return Err(Error::NotFound(format!("{}: no database here (no CURRENT file)", db.display())).into());
    }
    let mut next = tailing.since;
    let mut batches = 0u64;
    loop {
        let mut updates = ebb::WalUpdates::read_dir(db, &options, next)?;
        for update in updates.by_ref() {
            let update = update?;
            let name = db.display().to_string();
            let header = format!("sequence {} count {}", update.sequence, update.batch.len());
            print_decoded(out, &update.batch, &header, (&name, 0), print_values, enc)?;
            batches += 1;
            if tailing.count.is_some_and(|count| batches >= count) {
                return Ok(say!(out, "batches: {batches}")?);
            }
        }
        next = updates.next_sequence();
        if !tailing.follow {
            return Ok(say!(out, "batches: {batches}")?);
        }
        out.flush().map_err(crate::format::stdout_error)?;
        std::thread::sleep(TAIL_POLL);
    }
}

/// Bytes of a write batch's header: fixed64 sequence, fixed32 count.
const BATCH_HEADER_LEN: usize = 12;

/// `@OFFSET sequence S count C bytes B`, then one indented line per update:
/// `cf N KEY @ SEQ : TYPE`, with ` ==> VALUE` for puts and merges when
/// `print_values`, and ` ==> END` for range deletions always.
fn print_batch(
    out: &mut dyn Write,
    data: &[u8],
    offset: u64,
    file: &str,
    print_values: bool,
    enc: Encoding,
) -> ebb::Result<()> {
    if data == [0u8; BATCH_HEADER_LEN] {
        // The record a memtable switch appends to the WAL it closes
        // (db/wal_seal.rs): sequence 0, no updates.
        return say!(out, "@{offset} end of log: the WAL was closed whole");
    }
    // The engine's decoder checks every record and the count.
    let batch = WriteBatch::from_data(data, file, offset)?;
    let header = format!("@{offset} sequence {} count {} bytes {}", batch.sequence(), batch.len(), data.len());
    print_decoded(out, &batch, &header, (file, offset), print_values, enc)
}

/// A decoded batch: `header`, then its updates as [`print_batch`] says.
fn print_decoded(
    out: &mut dyn Write,
    batch: &WriteBatch,
    header: &str,
    (file, offset): (&str, u64),
    print_values: bool,
    enc: Encoding,
) -> ebb::Result<()> {
    let sequence = batch.sequence();
    say!(out, "{header}")?;
    // The applied updates, each at its sequence number; then each prepared
    // section's, which take theirs when committed.
    let applied = batch.applied_cf().zip(sequence..).map(|(u, seq)| (u, seq.to_string()));
    print_updates(out, applied, file, offset, print_values, enc)?;
    for (what, name, section) in batch.two_phase_markers() {
        let note = if what == "prepare" { " (logged, not applied until its commit)" } else { "" };
        say!(out, "  two-phase {what} of transaction {}{note}", enc.key(&name))?;
        if let Some(section) = section {
            let updates = section.iter_cf().map(|u| (u, "prepared".to_string()));
            print_updates(out, updates, file, offset, print_values, enc)?;
        }
    }
    Ok(())
}

/// Prints updates of a WAL record, each `cf CF KEY @ AT : TYPE [==> VALUE]`.
fn print_updates<'a>(
    out: &mut dyn Write,
    updates: impl Iterator<Item = (std::result::Result<(u32, BatchOp<'a>), String>, String)>,
    file: &str,
    offset: u64,
    print_values: bool,
    enc: Encoding,
) -> ebb::Result<()> {
    for (update, at) in updates {
        let (cf, op) = update.map_err(|r| Error::corruption(file, offset, r))?;
        let (kind, key, value) = match op {
            BatchOp::Put { key, value } => (ValueKind::Value, key, value),
            BatchOp::Delete { key } => (ValueKind::Deletion, key, &[][..]),
            BatchOp::SingleDelete { key } => (ValueKind::SingleDeletion, key, &[][..]),
            BatchOp::Merge { key, value } => (ValueKind::Merge, key, value),
            BatchOp::DeleteRange { begin, end } => (ValueKind::RangeDeletion, begin, end),
            BatchOp::PutEntity { key, entity } => (ValueKind::WideColumnEntity, key, entity),
        };
        let mut line = format!("  cf {cf} {} @ {at} : {}", enc.key(key), kind_name(kind));
        match kind {
            ValueKind::RangeDeletion => line.push_str(&format!(" ==> {}", enc.key(value))),
            ValueKind::Value | ValueKind::Merge | ValueKind::WideColumnEntity if print_values => {
                line.push_str(&format!(" ==> {}", enc.stored_value(kind, value)))
            }
            _ => {}
        }
        say!(out, "{line}")?;
    }
    Ok(())
}

/// What `ebb sst_dump` prints.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SstCommand {
    /// Every entry, `KEY @ SEQ : TYPE ==> VALUE`, then the range tombstones.
    Scan,
    /// Read every entry with checksums verified, check their order and
    /// count; print the count.
    Check,
    /// The table's properties, `name: value`.
    Properties,
    /// The data blocks the index lists, and the block sizes.
    Blocks,
}

/// `ebb sst_dump`: opens one table file as the engine does (footer,
/// metaindex, index, filter and properties verified) and runs `command`.
pub fn sst_dump(
    out: &mut dyn Write,
    file: &Path,
    command: SstCommand,
    limit: Option<usize>,
    comparator: &str,
    enc: Encoding,
) -> Result<(), Failure> {
    let name = file.display().to_string();
    let cmp = UserComparator::new(&ebb::comparator::from_name(comparator)?);
    let raf = PosixFs::new().open_random(file)?;
    let size = raf.size()?;
    let policy = TableCachePolicy { comparator: cmp.clone(), ..TableCachePolicy::default() };
    let table = Table::open_with_policy(Arc::clone(&raf), size, name.clone(), policy)?;
    let limit = limit.unwrap_or(usize::MAX);
    match command {
        SstCommand::Scan => sst_scan(out, &table, limit, enc)?,
        SstCommand::Check => sst_check(out, &table, &name, &cmp)?,
        SstCommand::Properties => sst_properties(out, &table, enc)?,
        SstCommand::Blocks => sst_blocks(out, &table, raf.as_ref(), &name, limit)?,
    }
    Ok(())
}

/// Every data block read from the file and its checksum checked; nothing
/// kept in a cache (there is none).
const VERIFY_ALL: ReadSettings = ReadSettings {
    verify_checksums: true,
    fill_cache: false,
    readahead: ebb::internals::sst::Readahead::Auto,
    for_compaction: false,
};

fn sst_scan(out: &mut dyn Write, table: &Arc<Table>, limit: usize, enc: Encoding) -> ebb::Result<()> {
    let mut it = table.iter(VERIFY_ALL);
    it.seek_to_first();
    let mut printed = 0;
    while it.valid() && printed < limit {
        let kind = ebb::internals::key::parse_internal_key(it.key()).map_or(ValueKind::Value, |p| p.kind);
        say!(out, "{} ==> {}", enc.internal_key(it.key()), enc.stored_value(kind, it.value()))?;
        printed += 1;
        it.next();
    }
    it.status()?;
    if let Some(tombstones) = table.range_tombstones() {
        for t in tombstones.tombstones().take(limit - printed) {
            say!(out, "{} @ {} : range_delete ==> {}", enc.key(&t.start), t.seq, enc.key(&t.end))?;
        }
    }
    Ok(())
}

fn sst_check(out: &mut dyn Write, table: &Arc<Table>, name: &str, cmp: &UserComparator) -> ebb::Result<()> {
    let mut it = table.iter(VERIFY_ALL);
    it.seek_to_first();
    let mut entries = 0u64;
    let mut previous: Vec<u8> = Vec::new();
    while it.valid() {
        if ebb::internals::key::parse_internal_key(it.key()).is_none() {
            return Err(Error::corruption(name, 0, format!("entry {entries} has a key that is not an internal key")));
        }
        if entries > 0 && cmp.compare_internal(&previous, it.key()).is_ge() {
            return Err(Error::corruption(name, 0, format!("entry {entries} is not after the entry before it")));
        }
        previous.clear();
        previous.extend_from_slice(it.key());
        entries += 1;
        it.next();
    }
    it.status()?;
    let recorded = table.properties().num_entries;
    if entries != recorded {
        return Err(Error::corruption(
            name,
            0,
            format!("read {entries} entries, but the properties record {recorded}"),
        ));
    }
    say!(out, "OK: {entries} entries read, every data block's checksum verified")
}

fn sst_properties(out: &mut dyn Write, table: &Table, enc: Encoding) -> ebb::Result<()> {
    let p = table.properties();
    let optional = |v: &Option<String>| v.clone().unwrap_or_else(|| "(none)".to_string());
    let key = |k: &[u8]| if k.is_empty() { "(none)".to_string() } else { enc.internal_key(k) };
    let lines = [
        ("file size", p.file_size.to_string()),
        ("entries", p.num_entries.to_string()),
        ("deletions", p.num_deletions.to_string()),
        ("range deletions", p.num_range_deletions.to_string()),
        ("raw key size", p.raw_key_size.to_string()),
        ("raw value size", p.raw_value_size.to_string()),
        ("data blocks", p.num_data_blocks.to_string()),
        ("data size", p.data_size.to_string()),
        ("index size", p.index_size.to_string()),
        ("index partitions", p.index_partitions.to_string()),
        ("filter size", p.filter_size.to_string()),
        ("smallest key", key(&p.smallest_key)),
        ("largest key", key(&p.largest_key)),
        ("smallest seqno", p.smallest_seqno.to_string()),
        ("largest seqno", p.largest_seqno.to_string()),
        ("compression", p.compression.name().to_string()),
        ("checksum", p.checksum.name().to_string()),
        ("creation time", p.creation_time.to_string()),
        ("column family id", p.column_family.map_or("(none)".to_string(), |id| id.to_string())),
        ("column family name", optional(&p.column_family_name)),
        ("comparator", p.comparator_name.clone().unwrap_or_else(|| ebb::comparator::BYTEWISE_NAME.to_string())),
        ("prefix extractor", optional(&p.prefix_extractor_name)),
        ("whole key filtering", p.whole_key_filtering.to_string()),
    ];
    for (label, value) in lines {
        say!(out, "{label}: {value}")?;
    }
    Ok(())
}

fn sst_blocks(
    out: &mut dyn Write,
    table: &Table,
    file: &dyn RandomAccessFile,
    name: &str,
    limit: usize,
) -> ebb::Result<()> {
    let p = table.properties();
    let footer_at = p.file_size.saturating_sub(FOOTER_LEN as u64);
    let footer =
        Footer::decode(&file.read_at(footer_at, FOOTER_LEN)?).map_err(|r| Error::corruption(name, footer_at, r))?;
    let mut data_blocks = Vec::new();
    let index = read_block(file, name, &footer, footer.index)?;
    for handle in block_handles(index, name, footer.index)? {
        if footer.partitioned_index() {
            data_blocks.extend(block_handles(read_block(file, name, &footer, handle)?, name, handle)?);
        } else {
            data_blocks.push(handle);
        }
    }
    say!(out, "format version: {}", footer.format_version)?;
    say!(out, "data blocks: {}", p.num_data_blocks)?;
    for (i, h) in data_blocks.iter().enumerate().take(limit) {
        say!(out, "data block {i}: offset {} size {}", h.offset, h.size)?;
    }
    say!(out, "data size: {}", p.data_size)?;
    say!(out, "index: offset {} size {} partitions {}", footer.index.offset, p.index_size, p.index_partitions)?;
    say!(out, "filter size: {}", p.filter_size)?;
    if data_blocks.len() as u64 != p.num_data_blocks {
        return Err(Error::corruption(
            name,
            footer.index.offset,
            format!("the index lists {} data blocks, the properties {}", data_blocks.len(), p.num_data_blocks),
        ));
    }
    Ok(())
}

/// The block at `handle`, its checksum verified and decompressed.
fn read_block(file: &dyn RandomAccessFile, name: &str, footer: &Footer, handle: BlockHandle) -> ebb::Result<Block> {
    let bad = |reason: String| Error::corruption(name, handle.offset, reason);
    let len = handle
        .size
        .checked_add(BLOCK_TRAILER_LEN as u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| bad(format!("block size {} is past any file", handle.size)))?;
    let raw = file.read_at(handle.offset, len)?;
    if raw.len() != len {
        return Err(bad(format!("truncated block: read {} of {len} bytes", raw.len())));
    }
    Block::new(unwrap_block(raw, footer.checksum, true).map_err(bad)?).map_err(bad)
}

/// The block handles an index block (or index partition) holds as values.
fn block_handles(block: Block, name: &str, at: BlockHandle) -> ebb::Result<Vec<BlockHandle>> {
    let bad = |reason: String| Error::corruption(name, at.offset, format!("index block: {reason}"));
    // Only walked front to back, so the order its keys compare in is moot.
    let mut it = BlockIterator::new(Arc::new(block), KeyOrder::Bytewise);
    it.seek_to_first();
    let mut handles = Vec::new();
    while it.valid() {
        handles.push(BlockHandle::decode_exact(it.value()).map_err(bad)?);
        it.next();
    }
    match it.corruption() {
        Some(r) => Err(bad(r.to_string())),
        None => Ok(handles),
    }
}
