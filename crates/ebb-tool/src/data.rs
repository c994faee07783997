//! The verbs that open a database and read or change its data (ldb's `get`,
//! `put`, `delete`, `scan`, `idump`, `list_column_families`,
//! `get_property`, `compact`, `checkconsistency`).
//!
//! Reading verbs open the database read-only (`Db::open_cf_read_only`): no
//! LOCK is taken and no file is written, so they are safe beside a process
//! that has it open, and see the database as of their open. Writing verbs
//! open it as an application does, every column family (and as a TTL
//! database when it is one), so a database open elsewhere is refused with
//! the engine's `Busy` error.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use ebb::{ColumnFamilyHandle, Db, Direction, IteratorMode, Options, ReadOptions, TtlDb};

use crate::format::{say, Encoding};
use crate::Failure;

/// The database a verb opens.
#[derive(Args, Debug)]
pub struct DbArgs {
    /// The database directory.
    #[arg(long)]
    pub db: PathBuf,
    /// The comparator the database was created with: a built-in name
    /// (leveldb.BytewiseComparator, the default, or
    /// rocksdb.ReverseBytewiseComparator).
    #[arg(long, default_value = ebb::comparator::BYTEWISE_NAME)]
    pub comparator: String,
}

/// A database opened for writing: a plain one, or a TTL database, whose
/// values must be stamped with their write time as they are written.
pub enum Writable<'a> {
    /// A database created without a TTL.
    Plain(&'a Db),
    /// A database created with a TTL (opened with TTL 0: nothing expires
    /// while the tool has it open).
    Ttl(&'a TtlDb),
}

impl Writable<'_> {
    /// The database underneath (a TTL database's values carry their times).
    pub fn base(&self) -> &Db {
        match self {
            Writable::Plain(db) => db,
            Writable::Ttl(db) => db.base_db(),
        }
    }

    fn put(&self, cf: &ColumnFamilyHandle, key: &[u8], value: &[u8]) -> ebb::Result<()> {
        match self {
            Writable::Plain(db) => db.put_cf(cf, key, value),
            Writable::Ttl(db) => db.put_cf(cf, key, value),
        }
    }

    fn delete(&self, cf: &ColumnFamilyHandle, key: &[u8]) -> ebb::Result<()> {
        match self {
            Writable::Plain(db) => db.delete_cf(cf, key),
            Writable::Ttl(db) => db.delete_cf(cf, key),
        }
    }

    fn compact(&self, cf: &ColumnFamilyHandle, begin: Option<&[u8]>, end: Option<&[u8]>) -> ebb::Result<()> {
        match self {
            Writable::Plain(db) => db.compact_range_cf(cf, begin, end),
            Writable::Ttl(db) => db.compact_range_cf(cf, begin, end),
        }
    }
}

/// Opens the database at `dir` for writing with every column family it has
/// (default options for each), and as a TTL database when it is one (TTL 0);
/// runs `f` on it, then closes it. A directory without a database is
/// created only when `options` ask.
pub fn with_writable(dir: &Path, options: Options, f: impl FnOnce(Writable<'_>) -> ebb::Result<()>) -> ebb::Result<()> {
    if !dir.join("CURRENT").exists() {
        // No database yet: Db::open creates one when the options ask.
        let db = Db::open(dir, options)?;
        f(Writable::Plain(&db))?;
        return db.close();
    }
    let names = Db::list_column_families(dir, &options)?;
    let others: Vec<&str> = names.iter().map(String::as_str).filter(|n| *n != ebb::DEFAULT_COLUMN_FAMILY).collect();
    if dir.join(ebb::TTL_MARKER).exists() {
        let families: Vec<(&str, ebb::ColumnFamilyOptions, i32)> =
            others.iter().map(|n| (*n, ebb::ColumnFamilyOptions::from(&options), 0)).collect();
        let db = Db::open_cf_with_ttl(dir, options, 0, &families)?;
        f(Writable::Ttl(&db))?;
        return db.close();
    }
    let families: Vec<(&str, Options)> = others.iter().map(|n| (*n, options.clone())).collect();
    let db = Db::open_cf(dir, options, &families)?;
    f(Writable::Plain(&db))?;
    db.close()
}

/// Opens the database read-only with every column family (those not
/// listed open with the given options).
fn open_read_only(args: &DbArgs) -> ebb::Result<Db> {
    require_directory(&args.db)?;
    let options = crate::options_with(&args.comparator)?;
    if args.db.join(ebb::TTL_MARKER).exists() {
        // The engine has no read-only open for a TTL database, and a plain
        // one would show values with their 4-byte write times appended.
        return Err(ebb::Error::NotSupported(format!(
            "{} is a TTL database ({} file): the read-only verbs cannot open it",
            args.db.display(),
            ebb::TTL_MARKER
        )));
    }
    let none: [(&str, Options); 0] = [];
    Db::open_cf_read_only(&args.db, options, &none)
}

/// The column family `name` of `db`, or an error naming the ones it has.
fn family(db: &Db, dir: &Path, name: &str) -> ebb::Result<ColumnFamilyHandle> {
    db.cf_handle(name).ok_or_else(|| {
        ebb::Error::invalid(format!(
            "{} has no column family {name:?} (it has: {})",
            dir.display(),
            db.column_family_names().join(", ")
        ))
    })
}

/// `ebb get`: the value of one key, read-only.
pub fn get(out: &mut dyn Write, args: &DbArgs, cf: &str, key: &str, enc: Encoding) -> Result<(), Failure> {
    let key = enc.parse_key("KEY", key)?;
    let db = open_read_only(args)?;
    let handle = family(&db, &args.db, cf)?;
    match db.get_cf(&handle, &key)? {
        Some(value) => Ok(say!(out, "{}", enc.value(&value))?),
        None => Err(Failure::Finding(format!(
            "key {} not found in column family {cf} of {}",
            enc.key(&key),
            args.db.display()
        ))),
    }
}

/// `ebb put`: sets one key, through a writable open.
pub fn put(out: &mut dyn Write, args: &DbArgs, cf: &str, key: &str, value: &str, enc: Encoding) -> Result<(), Failure> {
    let key = enc.parse_key("KEY", key)?;
    let value = enc.parse_value("VALUE", value)?;
    require_directory(&args.db)?;
    with_writable(&args.db, crate::options_with(&args.comparator)?, |w| {
        w.put(&family(w.base(), &args.db, cf)?, &key, &value)
    })?;
    Ok(say!(out, "OK")?)
}

/// `ebb delete`: deletes one key, through a writable open.
pub fn delete(out: &mut dyn Write, args: &DbArgs, cf: &str, key: &str, enc: Encoding) -> Result<(), Failure> {
    let key = enc.parse_key("KEY", key)?;
    require_directory(&args.db)?;
    with_writable(&args.db, crate::options_with(&args.comparator)?, |w| {
        w.delete(&family(w.base(), &args.db, cf)?, &key)
    })?;
    Ok(say!(out, "OK")?)
}

/// Key bounds and a count limit given on the command line.
pub struct Range<'a> {
    /// `--from`: the first key (inclusive).
    pub from: Option<&'a str>,
    /// `--to`: the end key: exclusive for a scan; inclusive for a
    /// compaction, as `compact_range_cf` takes it.
    pub to: Option<&'a str>,
    /// `--limit`: at most this many lines.
    pub limit: Option<usize>,
}

/// A range's bounds as bytes (`None`: unbounded on that side).
struct Bounds {
    from: Option<Vec<u8>>,
    to: Option<Vec<u8>>,
}

impl Range<'_> {
    fn keys(&self, enc: Encoding) -> ebb::Result<Bounds> {
        let from = self.from.map(|k| enc.parse_key("--from", k)).transpose()?;
        let to = self.to.map(|k| enc.parse_key("--to", k)).transpose()?;
        Ok(Bounds { from, to })
    }
}

/// `ebb scan`: `KEY ==> VALUE` for the keys in `[from, to)`, read-only.
pub fn scan(out: &mut dyn Write, args: &DbArgs, cf: &str, range: &Range<'_>, enc: Encoding) -> Result<(), Failure> {
    let Bounds { from, to } = range.keys(enc)?;
    let db = open_read_only(args)?;
    let handle = family(&db, &args.db, cf)?;
    let ro = ReadOptions { iterate_upper_bound: to, ..ReadOptions::default() };
    let mode = match &from {
        Some(k) => IteratorMode::From(k, Direction::Forward),
        None => IteratorMode::Start,
    };
    for entry in db.iterator_cf(&handle, ro, mode).take(range.limit.unwrap_or(usize::MAX)) {
        let (key, value) = entry?;
        say!(out, "{} ==> {}", enc.key(&key), enc.value(&value))?;
    }
    Ok(())
}

/// `ebb dump`: every stored version of every key, `KEY @ SEQ : TYPE ==>
/// VALUE`, newest first within a key, read-only.
pub fn dump(out: &mut dyn Write, args: &DbArgs, cf: &str, limit: Option<usize>, enc: Encoding) -> Result<(), Failure> {
    let db = open_read_only(args)?;
    let handle = family(&db, &args.db, cf)?;
    for v in db.get_all_key_versions(&handle, None, None, limit.unwrap_or(usize::MAX))? {
        let value = match v.entry_type {
            ebb::EntryType::WideColumnEntity => {
                enc.stored_value(ebb::internals::key::ValueKind::WideColumnEntity, &v.value)
            }
            _ => enc.value(&v.value),
        };
        say!(out, "{} @ {} : {} ==> {}", enc.key(&v.user_key), v.sequence, v.entry_type, value)?;
    }
    Ok(())
}

/// `ebb list_column_families`: the names from the MANIFEST, one a line.
pub fn list_column_families(out: &mut dyn Write, dir: &Path) -> Result<(), Failure> {
    require_directory(dir)?;
    for name in Db::list_column_families(dir, &Options::default())? {
        say!(out, "{name}")?;
    }
    Ok(())
}

/// `ebb get_property`: a property's text, read-only.
pub fn get_property(out: &mut dyn Write, args: &DbArgs, cf: &str, name: &str) -> Result<(), Failure> {
    let db = open_read_only(args)?;
    let handle = family(&db, &args.db, cf)?;
    let Some(value) = db.get_property_cf(&handle, name) else {
        return Err(Failure::Finding(format!("no property {name:?} (for column family {cf}); see docs/ebb-tool.md")));
    };
    // Multi-line properties (ebb.stats) end with a newline already.
    if value.ends_with('\n') {
        write!(out, "{value}").map_err(crate::format::stdout_error)?;
        Ok(())
    } else {
        Ok(say!(out, "{value}")?)
    }
}

/// `ebb compact`: compacts the keys in the range of one column family,
/// through a writable open.
pub fn compact(out: &mut dyn Write, args: &DbArgs, cf: &str, range: &Range<'_>, enc: Encoding) -> Result<(), Failure> {
    let Bounds { from, to } = range.keys(enc)?;
    require_directory(&args.db)?;
    with_writable(&args.db, crate::options_with(&args.comparator)?, |w| {
        w.compact(&family(w.base(), &args.db, cf)?, from.as_deref(), to.as_deref())
    })?;
    let bound = |k: &Option<Vec<u8>>, open: &str| k.as_deref().map_or(open.to_string(), |k| enc.key(k));
    Ok(say!(
        out,
        "compacted column family {cf} of {} from {} to {}",
        args.db.display(),
        bound(&from, "the first key"),
        bound(&to, "the last key")
    )?)
}

/// `ebb checkconsistency`: reads every table whole, verifying every
/// block's checksum, read-only.
pub fn checkconsistency(out: &mut dyn Write, args: &DbArgs) -> Result<(), Failure> {
    let db = open_read_only(args)?;
    let tables = db.verify_checksum()?;
    Ok(say!(out, "OK: {tables} tables verified")?)
}

/// Refuses a path that is not a directory before the engine reports it as a
/// missing file inside it.
pub fn require_directory(dir: &Path) -> ebb::Result<()> {
    if dir.is_dir() {
        Ok(())
    } else if dir.exists() {
        Err(ebb::Error::invalid(format!("{} is not a directory", dir.display())))
    } else {
        Err(ebb::Error::invalid(format!("{} does not exist", dir.display())))
    }
}
