//! Command-line entry: subcommands (`plot`, `compare`, `experiment`, `tune`,
//! `cachebench`)
//! beside db_bench-style flags.

use crate::error::Result;
use crate::flags::{help_text, Flags, Parsed};

/// Runs ebb-bench with `args` (without the program name).
pub fn run(args: Vec<String>) -> Result<()> {
    match args.first().map(String::as_str) {
        Some("plot") => crate::plot::run(&args[1..]),
        Some("compare") => crate::compare::run(&args[1..]),
        Some("experiment") => crate::experiment::run_experiment_cli(&args[1..]),
        Some("tune") => crate::experiment::run_tune_cli(&args[1..]),
        Some("cachebench") => crate::cachebench::run_cli(&args[1..]),
        Some("help") => {
            print!("{}", help_text());
            Ok(())
        }
        _ => match Flags::parse(args)? {
            Parsed::Help => {
                print!("{}", help_text());
                Ok(())
            }
            Parsed::Version => {
                println!("ebb-bench {}", env!("CARGO_PKG_VERSION"));
                Ok(())
            }
            Parsed::Run(flags) => crate::bench::run(&flags),
        },
    }
}
