//! `ebb`: look after an Ebb database from the shell (RocksDB's `ldb` and
//! `RepairDB` in one command; `ebb --help`).
//!
//! - `ebb repair --db=DIR` rebuilds the MANIFEST from the tables and WALs
//!   present (`Db::repair`) and prints what it kept and what it set aside.
//! - `ebb check --db=DIR` opens the database as an application would and
//!   prints what recovery found (`Db::recovery_report`), without writing
//!   anything but what an open writes.
//!
//! Exit status: 0 on success, 1 when the operation failed (the message names
//! the file and offset of any damage), 2 for a bad command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ebb::{Db, Options};

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
    /// Open the database and print what recovery found damaged or set aside.
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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Repair { db, comparator } => {
            options_with(&comparator).and_then(|o| Db::repair(&db, &o)).map(|report| print!("{report}"))
        }
        Command::Check { db, best_efforts, comparator } => options_with(&comparator).and_then(|mut options| {
            options.best_efforts_recovery = best_efforts;
            Db::open(&db, options).and_then(|d| {
                print!("{}", d.recovery_report());
                d.close()
            })
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ebb: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Default options in the order of the built-in comparator named `name`.
fn options_with(name: &str) -> ebb::Result<Options> {
    let mut options = Options::default();
    options.set("comparator", name)?;
    Ok(options)
}
