//! Helpers of the integration tests that run both engines side by side
//! (feature `rocksdb-peer`).
#![cfg(feature = "rocksdb-peer")]

use std::path::Path;

use ebb_bench::config::EngineKind;
use ebb_bench::engine::{Direction, ScanStart};
use ebb_bench::flags::{Flags, Parsed};

/// Every entry of the database at `db`, in key order, read back through the
/// engine `kind` opened with the options the flags `args` give it.
pub fn engine_contents(kind: EngineKind, db: &Path, args: &[String]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let Parsed::Run(flags) = Flags::parse(args.iter().cloned()).unwrap() else { unreachable!() };
    let handle = ebb_bench::engine::open(kind, db, &flags, false, false).unwrap();
    let mut contents = Vec::new();
    handle
        .scan(ScanStart::First, Direction::Forward, u64::MAX, &mut |k, v| {
            contents.push((k.to_vec(), v.to_vec()));
            true
        })
        .unwrap();
    handle.close().unwrap();
    contents
}
