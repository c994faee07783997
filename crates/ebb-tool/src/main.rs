//! `ebb`: look after an Ebb database from the shell (RocksDB's `ldb`,
//! `sst_dump` and `RepairDB` in one command; `ebb --help`, and
//! docs/ebb-tool.md for every verb, its flags and its output).
//!
//! Looking after a database:
//! - `ebb repair --db=DIR` rebuilds the MANIFEST from the tables and WALs
//!   present (`Db::repair`) and prints what it kept and what it set aside.
//! - `ebb check --db=DIR` opens the database as an application would and
//!   prints what recovery found (`Db::recovery_report`), without writing
//!   anything but what an open writes.
//! - `ebb checkpoint --db=DIR --to=DIR` makes an openable copy of the
//!   database (`Checkpoint`): tables hard-linked, WALs copied. The database
//!   must not be open in another process (its LOCK is taken; a live
//!   database is refused as busy): checkpoint it from that process.
//! - `ebb backup --db=DIR --backup_dir=DIR` adds an incremental backup
//!   (`BackupEngine`) and lists the backups; `ebb restore --backup_dir=DIR
//!   --db=DIR [--backup_id=N] [--overwrite]` restores one (the newest by
//!   default), checking every byte.
//! - `ebb load --db=DIR --file=F [--delimiter=C] [--hex]` bulk-loads
//!   `key<C>value` lines through `SstFileWriter` and ingestion.
//!
//! Data, as ldb (`data.rs`): `get`, `scan`, `dump` (every version of every
//! key), `get_property`, `checkconsistency` open the database read-only
//! (no LOCK: safe beside a live process); `put`, `delete`, `compact` open
//! it for writing and are refused as busy while it is open elsewhere;
//! `list_column_families` reads the MANIFEST.
//!
//! Files, decoded without opening the database (`files.rs`, through the
//! engine's `internals`): `manifest_dump` (one line per version edit),
//! `dump_wal` (one WAL's write batches), `sst_dump` (one table: its
//! entries, a checksum check, its properties, its blocks).
//!
//! Keys and values are text, `\xNN`-escaped on output, or hex with
//! `--hex`, `--key_hex`, `--value_hex` (`format.rs`).
//!
//! Exit status: 0 on success, 1 when the operation failed (the message names
//! the file and offset of any damage, the key not found, the argument that
//! is not hex), 2 for a bad command line.

mod data;
mod files;
mod format;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use data::{DbArgs, Range};
use ebb::{
    BackupEngine, Checkpoint, CheckpointOptions, Db, IngestExternalFileOptions, Options, RestoreOptions, SstFileWriter,
};
use files::SstCommand;
use format::{say, Encoding};

#[derive(Parser)]
#[command(name = "ebb", version, about = "Look after an Ebb database from the shell")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Rebuild the MANIFEST of a damaged database from its tables and WALs
    /// (LevelDB's and RocksDB's RepairDB). Unreadable files go to DIR/lost/.
    Repair {
        /// The database directory.
        #[arg(long)]
        db: PathBuf,
        /// The comparator the database was created with: a built-in name
        /// (leveldb.BytewiseComparator, the default, or
        /// rocksdb.ReverseBytewiseComparator).
        #[arg(long, default_value = ebb::comparator::BYTEWISE_NAME)]
        comparator: String,
    },
    /// Open the database, print what recovery found damaged or set aside,
    /// then read every table whole, verifying its checksums (damage: exit 1).
    Check {
        /// The database directory.
        #[arg(long)]
        db: PathBuf,
        /// Open what can be opened of a damaged MANIFEST (RocksDB's
        /// best_efforts_recovery) instead of failing.
        #[arg(long)]
        best_efforts: bool,
        /// The comparator the database was created with (as for repair).
        #[arg(long, default_value = ebb::comparator::BYTEWISE_NAME)]
        comparator: String,
    },
    /// Make an openable copy of the database in a new directory (RocksDB's
    /// Checkpoint): tables and blob files hard-linked (copied across
    /// filesystems), WALs copied.
    Checkpoint {
        /// The database directory.
        #[arg(long)]
        db: PathBuf,
        /// The directory to create; it must not exist.
        #[arg(long)]
        to: PathBuf,
        /// Flush the memtables first unless the WALs hold fewer bytes than
        /// this; 0 always flushes.
        #[arg(long = "log_size_for_flush", default_value_t = 0)]
        log_size_for_flush: u64,
        /// The comparator the database was created with (as for repair).
        #[arg(long, default_value = ebb::comparator::BYTEWISE_NAME)]
        comparator: String,
    },
    /// Add an incremental backup of the database to a backup directory
    /// (RocksDB's BackupEngine; tables already backed up are not copied
    /// again), then list the backups there.
    Backup {
        /// The database directory.
        #[arg(long)]
        db: PathBuf,
        /// The backup directory (created if missing).
        #[arg(long = "backup_dir")]
        backup_dir: PathBuf,
        /// Copy the WALs instead of flushing the memtables first.
        #[arg(long = "no_flush")]
        no_flush: bool,
        /// The comparator the database was created with (as for repair).
        #[arg(long, default_value = ebb::comparator::BYTEWISE_NAME)]
        comparator: String,
    },
    /// Restore a backup into a database directory, checking every byte
    /// against the checksums recorded.
    Restore {
        /// The backup directory.
        #[arg(long = "backup_dir")]
        backup_dir: PathBuf,
        /// The database directory to restore into (created if missing).
        #[arg(long)]
        db: PathBuf,
        /// The backup to restore (default: the newest).
        #[arg(long = "backup_id")]
        backup_id: Option<u32>,
        /// Replace the database the directory holds (never one that is open).
        #[arg(long)]
        overwrite: bool,
    },
    /// Bulk-load `key<delimiter>value` lines from a text or CSV file into
    /// the default column family: sorted, written to one SST file with
    /// SstFileWriter, and ingested (later lines win over earlier ones with
    /// the same key; ingested data wins over what the database holds).
    Load {
        /// The database directory (created if missing).
        #[arg(long)]
        db: PathBuf,
        /// The input file.
        #[arg(long)]
        file: PathBuf,
        /// What separates a key from its value on a line (the first one does).
        #[arg(long, default_value = ",")]
        delimiter: String,
        /// Keys and values are hex-encoded (as ldb's --hex).
        #[arg(long)]
        hex: bool,
    },
    /// Print the value of a key (ldb get). Read-only open: safe on a live
    /// database. A key not found fails, naming it.
    Get {
        #[command(flatten)]
        db: DbArgs,
        /// The key.
        #[arg(allow_hyphen_values = true)]
        key: String,
        /// The column family.
        #[arg(long, default_value = ebb::DEFAULT_COLUMN_FAMILY)]
        cf: String,
        #[command(flatten)]
        encoding: Encoding,
    },
    /// Set a key to a value and print OK (ldb put). Opens the database for
    /// writing: refused as busy while it is open elsewhere.
    Put {
        #[command(flatten)]
        db: DbArgs,
        /// The key.
        #[arg(allow_hyphen_values = true)]
        key: String,
        /// The value.
        #[arg(allow_hyphen_values = true)]
        value: String,
        /// The column family.
        #[arg(long, default_value = ebb::DEFAULT_COLUMN_FAMILY)]
        cf: String,
        #[command(flatten)]
        encoding: Encoding,
    },
    /// Delete a key and print OK (ldb delete). Opens the database for
    /// writing: refused as busy while it is open elsewhere.
    Delete {
        #[command(flatten)]
        db: DbArgs,
        /// The key.
        #[arg(allow_hyphen_values = true)]
        key: String,
        /// The column family.
        #[arg(long, default_value = ebb::DEFAULT_COLUMN_FAMILY)]
        cf: String,
        #[command(flatten)]
        encoding: Encoding,
    },
    /// Print the keys in [--from, --to) and their values, one
    /// `KEY ==> VALUE` line each (ldb scan). Read-only open.
    Scan {
        #[command(flatten)]
        db: DbArgs,
        /// The first key (inclusive; default: the first there is).
        #[arg(long, allow_hyphen_values = true)]
        from: Option<String>,
        /// The end key (exclusive; default: none).
        #[arg(long, allow_hyphen_values = true)]
        to: Option<String>,
        /// Print at most this many keys.
        #[arg(long)]
        limit: Option<usize>,
        /// The column family.
        #[arg(long, default_value = ebb::DEFAULT_COLUMN_FAMILY)]
        cf: String,
        #[command(flatten)]
        encoding: Encoding,
    },
    /// Print every stored version of every key, deletions included, newest
    /// first within a key: `KEY @ SEQ : TYPE ==> VALUE` (ldb idump;
    /// TYPE is put, delete, single_delete, merge or blob_index; a deletion's
    /// value is empty). Read-only open.
    Dump {
        #[command(flatten)]
        db: DbArgs,
        /// The column family.
        #[arg(long, default_value = ebb::DEFAULT_COLUMN_FAMILY)]
        cf: String,
        /// Print at most this many versions.
        #[arg(long)]
        limit: Option<usize>,
        #[command(flatten)]
        encoding: Encoding,
    },
    /// Print the names of the column families, one a line, the default
    /// first, as the MANIFEST records them (ldb list_column_families).
    #[command(name = "list_column_families")]
    ListColumnFamilies {
        /// The database directory.
        #[arg(long)]
        db: PathBuf,
    },
    /// Print a property of the database or of a column family
    /// (`ebb.stats`, `ebb.num-files-at-level0`, ...; ldb get_property).
    /// Read-only open: the figures are those of the tool's own instance.
    #[command(name = "get_property")]
    GetProperty {
        #[command(flatten)]
        db: DbArgs,
        /// The property's name (RocksDB's `rocksdb.` prefix is accepted).
        name: String,
        /// The column family.
        #[arg(long, default_value = ebb::DEFAULT_COLUMN_FAMILY)]
        cf: String,
    },
    /// Compact the files overlapping [--from, --to] of a column family down
    /// to the last level holding data (ldb compact). Opens the database for
    /// writing: refused as busy while it is open elsewhere.
    Compact {
        #[command(flatten)]
        db: DbArgs,
        /// The first key (default: the first there is).
        #[arg(long, allow_hyphen_values = true)]
        from: Option<String>,
        /// The last key (inclusive, as `compact_range` takes it; default:
        /// the last there is).
        #[arg(long, allow_hyphen_values = true)]
        to: Option<String>,
        /// The column family.
        #[arg(long, default_value = ebb::DEFAULT_COLUMN_FAMILY)]
        cf: String,
        #[command(flatten)]
        encoding: Encoding,
    },
    /// Read every table of every column family whole, verifying every
    /// block's checksum, and print `OK: N tables verified` (ldb
    /// checkconsistency). Read-only open. Damage fails, naming the file.
    Checkconsistency {
        #[command(flatten)]
        db: DbArgs,
    },
    /// Print every version edit of the MANIFEST that CURRENT names, one line
    /// each (ldb manifest_dump). Reads the file only.
    #[command(name = "manifest_dump")]
    ManifestDump {
        /// The database directory.
        #[arg(long, required_unless_present = "path")]
        db: Option<PathBuf>,
        /// A MANIFEST file to read instead of the one CURRENT names.
        #[arg(long)]
        path: Option<PathBuf>,
        #[command(flatten)]
        encoding: Encoding,
    },
    /// Print every write batch of a WAL file: its sequence, count and
    /// updates (ldb dump_wal). Reads the file only. With --db instead, the
    /// batches of a database's WALs (live and archived) from --since on, in
    /// order; --tail keeps printing new writes as they are made.
    #[command(name = "dump_wal")]
    DumpWal {
        /// The WAL file (`NNNNNN.log`).
        #[arg(long, required_unless_present = "db", conflicts_with = "db")]
        walfile: Option<PathBuf>,
        /// A database directory: its WALs from --since on (the database may
        /// be open in another process).
        #[arg(long)]
        db: Option<PathBuf>,
        /// With --db: the first sequence number wanted.
        #[arg(long, requires = "db", default_value_t = 1)]
        since: u64,
        /// With --db: go on printing writes as they are made (until
        /// interrupted, or --count batches).
        #[arg(long, requires = "db")]
        tail: bool,
        /// With --db: stop after this many batches.
        #[arg(long, requires = "db")]
        count: Option<u64>,
        /// Print the values of puts and merges too.
        #[arg(long = "print_values")]
        print_values: bool,
        #[command(flatten)]
        encoding: Encoding,
    },
    /// Open one table file and print its entries, check it, or print its
    /// properties or blocks (RocksDB's sst_dump). Reads the file only.
    #[command(name = "sst_dump")]
    SstDump {
        /// The table file (`NNNNNN.sst`).
        #[arg(long)]
        file: PathBuf,
        /// What to print.
        #[arg(long, value_enum, default_value_t = SstCommand::Scan)]
        command: SstCommand,
        /// Print at most this many entries (scan) or data blocks (blocks).
        #[arg(long)]
        limit: Option<usize>,
        /// The comparator the table was written with (as for repair).
        #[arg(long, default_value = ebb::comparator::BYTEWISE_NAME)]
        comparator: String,
        #[command(flatten)]
        encoding: Encoding,
    },
}

/// Why a verb failed: the engine's error, or the tool's own finding (a key
/// not found, an unknown property).
enum Failure {
    Engine(ebb::Error),
    Finding(String),
}

impl From<ebb::Error> for Failure {
    fn from(e: ebb::Error) -> Self {
        Failure::Engine(e)
    }
}

impl Failure {
    /// Whether this is a write to standard output that failed because the
    /// reading end of the pipe was closed.
    fn is_closed_pipe(&self) -> bool {
        matches!(self, Failure::Engine(ebb::Error::Io { op: "write", source, .. })
            if source.kind() == std::io::ErrorKind::BrokenPipe)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Engine(e) => e.fmt(f),
            Failure::Finding(m) => f.write_str(m),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // The new verbs print through one buffer, flushed before any error is
    // reported, so that what was read before damage is printed whole.
    let mut out = std::io::BufWriter::new(std::io::stdout());
    let result = run(cli.command, &mut out);
    let flushed = out.flush().map_err(|e| Failure::from(format::stdout_error(e)));
    match result.and(flushed) {
        Ok(()) => ExitCode::SUCCESS,
        // The reader went away (`ebb scan ... | head`): what it wanted
        // was printed; nothing to report.
        Err(e) if e.is_closed_pipe() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ebb: {}", for_the_shell(&e.to_string()));
            ExitCode::FAILURE
        }
    }
}

/// The engine's advice in `message`, which names its API (an option to
/// set), said as what to type at the shell instead.
fn for_the_shell(message: &str) -> String {
    const REPAIR: &str = "(`ebb load` creates a database; if this one lost its CURRENT file, \
                          `ebb repair --db` on this directory rebuilds it)";
    let advice = [
        ("set RestoreOptions::overwrite to replace", "pass --overwrite to replace"),
        ("(set create_if_missing to create one)", REPAIR),
        ("(a read-only open creates nothing)", REPAIR),
        ("(set create_if_missing to create a database)", "(`ebb load` creates a database)"),
    ];
    advice.iter().fold(message.to_string(), |message, (api, shell)| message.replace(api, shell))
}

fn run(command: Command, out: &mut dyn Write) -> Result<(), Failure> {
    let result = match command {
        Command::Repair { db, comparator } => options_with(&comparator)
            .and_then(|o| Db::repair(&db, &o))
            .and_then(|report| write!(out, "{report}").map_err(format::stdout_error)),
        // What recovery found, then every table of every family read whole
        // with its checksums verified: damage in a table no open reads is
        // damage all the same.
        Command::Check { db, best_efforts, comparator } => options_with(&comparator).and_then(|mut options| {
            options.best_efforts_recovery = best_efforts;
            with_every_family(&db, options, |d| {
                write!(out, "{}", d.recovery_report()).map_err(format::stdout_error)?;
                let tables = d.verify_checksum()?;
                say!(out, "tables: {tables} read whole, every checksum verified")?;
                Ok(())
            })
        }),
        Command::Checkpoint { db, to, log_size_for_flush, comparator } => {
            options_with(&comparator).and_then(|options| {
                with_every_family(&db, options, |d| {
                    let info = Checkpoint::create_with(d, &to, &CheckpointOptions { log_size_for_flush })?;
                    say!(out, "checkpoint of {} made in {}", db.display(), to.display())?;
                    say!(out, "tables and blob files linked: {}", info.files_linked)?;
                    say!(out, "tables and blob files copied: {}", info.files_copied)?;
                    say!(out, "WAL files copied: {}", info.wal_files)?;
                    say!(out, "bytes copied: {}", info.bytes_copied)?;
                    say!(out, "memtables flushed first: {}", if info.flushed { "yes" } else { "no" })?;
                    Ok(())
                })
            })
        }
        Command::Backup { db, backup_dir, no_flush, comparator } => options_with(&comparator).and_then(|options| {
            let mut engine = BackupEngine::open_dir(&backup_dir)?;
            with_every_family(&db, options, |d| {
                let id = engine.create_new_backup(d, !no_flush)?;
                say!(out, "backup {id} of {} made in {}", db.display(), backup_dir.display())?;
                Ok(())
            })?;
            for b in engine.backup_info() {
                say!(
                    out,
                    "backup {}: timestamp {} sequence {} files {} bytes {}",
                    b.backup_id,
                    b.timestamp,
                    b.sequence,
                    b.number_files,
                    b.size
                )?;
            }
            Ok(())
        }),
        Command::Restore { backup_dir, db, backup_id, overwrite } => {
            BackupEngine::open_dir(&backup_dir).and_then(|e| {
                let options = RestoreOptions { overwrite };
                let id = match backup_id {
                    Some(id) => id,
                    None => e
                        .backup_info()
                        .last()
                        .map(|b| b.backup_id)
                        .ok_or_else(|| ebb::Error::invalid(format!("{} holds no backup", backup_dir.display())))?,
                };
                e.verify_backup(id)?;
                e.restore_db_from_backup(id, &db, &options)?;
                say!(out, "backup {id} restored into {}", db.display())?;
                Ok(())
            })
        }
        Command::Load { db, file, delimiter, hex } => load(out, &db, &file, &delimiter, hex),
        Command::Get { db, key, cf, encoding } => return data::get(out, &db, &cf, &key, encoding),
        Command::Put { db, key, value, cf, encoding } => return data::put(out, &db, &cf, &key, &value, encoding),
        Command::Delete { db, key, cf, encoding } => return data::delete(out, &db, &cf, &key, encoding),
        Command::Scan { db, from, to, limit, cf, encoding } => {
            let range = Range { from: from.as_deref(), to: to.as_deref(), limit };
            return data::scan(out, &db, &cf, &range, encoding);
        }
        Command::Dump { db, cf, limit, encoding } => return data::dump(out, &db, &cf, limit, encoding),
        Command::ListColumnFamilies { db } => return data::list_column_families(out, &db),
        Command::GetProperty { db, name, cf } => return data::get_property(out, &db, &cf, &name),
        Command::Compact { db, from, to, cf, encoding } => {
            let range = Range { from: from.as_deref(), to: to.as_deref(), limit: None };
            return data::compact(out, &db, &cf, &range, encoding);
        }
        Command::Checkconsistency { db } => return data::checkconsistency(out, &db),
        Command::ManifestDump { db, path, encoding } => {
            return files::manifest_dump(out, db.as_deref(), path.as_deref(), encoding)
        }
        Command::DumpWal { walfile, db, since, tail, count, print_values, encoding } => {
            return match (walfile, db) {
                (Some(walfile), _) => files::dump_wal(out, &walfile, print_values, encoding),
                (None, Some(db)) => {
                    let tailing = files::Tailing { since, follow: tail, count };
                    files::dump_wal_since(out, &db, &tailing, print_values, encoding)
                }
                (None, None) => Err(Failure::from(ebb::Error::invalid("dump_wal needs --walfile or --db"))),
            };
        }
        Command::SstDump { file, command, limit, comparator, encoding } => {
            return files::sst_dump(out, &file, command, limit, &comparator, encoding)
        }
    };
    result.map_err(Failure::from)
}

/// Default options in the order of the built-in comparator named `name`.
fn options_with(name: &str) -> ebb::Result<Options> {
    let mut options = Options::default();
    options.set("comparator", name)?;
    Ok(options)
}

/// Opens the database at `dir` with every column family it has (default
/// options for each), and as a TTL database when it is one (TTL 0: nothing
/// expires while the tool has it open); runs `f` on it (the database under
/// the TTL layer), then closes it.
fn with_every_family(
    dir: &std::path::Path,
    options: Options,
    f: impl FnOnce(&Db) -> ebb::Result<()>,
) -> ebb::Result<()> {
    data::with_writable(dir, options, |w| f(w.base()))
}

/// `ebb load`: parses the lines, writes one sorted SST next to the database
/// and ingests it.
fn load(
    out: &mut dyn Write,
    dir: &std::path::Path,
    file: &std::path::Path,
    delimiter: &str,
    hex: bool,
) -> ebb::Result<()> {
    let text = std::fs::read_to_string(file).map_err(|e| ebb::Error::io("read", file, e))?;
    let decode = |s: &str, line: usize| -> ebb::Result<Vec<u8>> {
        if !hex {
            return Ok(s.as_bytes().to_vec());
        }
        let s = s.strip_prefix("0x").unwrap_or(s);
        if !s.len().is_multiple_of(2) {
            return Err(ebb::Error::invalid(format!("line {line}: '{s}' is not hex (an odd number of digits)")));
        }
        // `get`, not slicing: two bytes of a non-ASCII character are no
        // char boundary, and are no hex digits either.
        (0..s.len())
            .step_by(2)
            .map(|i| s.get(i..i + 2).and_then(|pair| u8::from_str_radix(pair, 16).ok()))
            .collect::<Option<_>>()
            .ok_or_else(|| ebb::Error::invalid(format!("line {line}: '{s}' is not hex")))
    };
    if delimiter.is_empty() {
        return Err(ebb::Error::invalid("the delimiter is empty: it must separate each key from its value"));
    }
    let mut pairs = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.is_empty()) {
        let Some((k, v)) = line.split_once(delimiter) else {
            return Err(ebb::Error::invalid(format!("line {}: no '{delimiter}' between a key and a value", i + 1)));
        };
        pairs.push((decode(k, i + 1)?, decode(v, i + 1)?));
    }
    if pairs.is_empty() {
        return Err(ebb::Error::invalid(format!("{} holds no lines to load", file.display())));
    }
    // Stable: of equal keys, the last line stays last, and wins.
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    let mut last: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(pairs.len());
    for (k, v) in pairs {
        match last.last_mut() {
            Some(prev) if prev.0 == k => prev.1 = v,
            _ => last.push((k, v)),
        }
    }
    let mut options = Options::default();
    options.create_if_missing = true;
    let sst = dir.with_extension("load.sst");
    if sst.exists() {
        return Err(ebb::Error::invalid(format!(
            "{} exists: ebb load writes its table there first and removes it after; move it away",
            sst.display()
        )));
    }
    let mut w = SstFileWriter::create(&options);
    w.open(&sst)?;
    let written = last.iter().try_for_each(|(k, v)| w.put(k, v)).and_then(|()| w.finish());
    let result = written.and_then(|info| {
        data::with_writable(dir, options, |w| {
            if let data::Writable::Ttl(_) = w {
                // An ingested table's values go in as they are, without the
                // write time a TTL database keeps after each value; its
                // compactions would read four bytes of the value as that
                // time, and drop most values as expired.
                return Err(ebb::Error::NotSupported(format!(
                    "{} is a TTL database, whose values carry their write time: load its entries with `ebb put`",
                    dir.display()
                )));
            }
            w.base().ingest_external_file(&[&sst], &IngestExternalFileOptions::default())?;
            say!(out, "loaded {} entries from {} into {}", info.num_entries, file.display(), dir.display())?;
            Ok(())
        })
    });
    let _ = std::fs::remove_file(&sst);
    result
}
