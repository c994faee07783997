//! ebb-bench: a db_bench-compatible benchmark client for Ebb (and, behind the
//! `rocksdb-peer` feature, for RocksDB through the `rocksdb` crate).
//!
//! Layout: `flags` (the flag table and parser) → `config` (typed, checked
//! settings) → `bench` (the runner and the client-thread bodies) over
//! `engine` (the `Engine` trait and its implementations). Load shapes live in
//! `shape` and `limiter` on a `clock`; key and value generation in `keys`,
//! `values`, `dist`, `workload`; output in `stats`, `histogram`, `monitor`,
//! `report`, `progress`, `summary`; the `plot` and `compare` subcommands in their own
//! modules, `experiment` for `experiment` and `tune`, `cachebench` for
//! `cachebench` (RocksDB's `cache_bench` over Ebb's block caches). docs/bench-client.md
//! describes the flags and the JSON schema; docs/experiments.md the files.

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod bench;
pub mod cachebench;
pub mod cli;
pub mod clock;
pub mod compare;
pub mod config;
pub mod dist;
pub mod engine;
pub mod error;
pub mod experiment;
pub mod flags;
pub mod histogram;
pub mod keys;
pub mod limiter;
pub mod memory;
pub mod monitor;
pub mod plot;
pub mod progress;
pub mod report;
pub mod rng;
pub mod shape;
pub mod stats;
pub mod summary;
pub mod timefmt;
pub mod values;
pub mod workload;
