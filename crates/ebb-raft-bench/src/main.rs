//! `ebb-raft-bench`: Ebb as openraft's storage, measured beside a
//! RocksDB-backed store with openraft-rocksstore's layout (built with the
//! `rocksdb-peer` feature; `bench/raft.sh` runs the comparison and
//! docs/benchmarks.md, "Raft storage", records it).
//!
//! `ebb-raft-bench log --store S`: the Raft log alone, appends of
//! `--batch` entries waited for until durable, purges behind.
//! `ebb-raft-bench cluster --store S`: three in-process nodes, clients
//! writing through the leader (optionally in a square wave), then reads.
//! Each prints one JSON object per line.

mod cluster;
mod load;
mod log_bench;
#[cfg(feature = "rocksdb-peer")]
mod rocks;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use ebb::BackgroundTuning;
use serde_json::json;

#[derive(Parser)]
#[command(name = "ebb-raft-bench", about = "Ebb as openraft's storage, beside a RocksDB-backed store")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The Raft log alone: appends waited for until durable, purges behind.
    Log {
        #[command(flatten)]
        common: Common,
        /// Entries per append.
        #[arg(long, default_value_t = 16)]
        batch: u64,
        /// Entries kept behind the head at each purge.
        #[arg(long, default_value_t = 1000)]
        keep: u64,
        /// Purge once this many entries past the kept ones accumulate.
        #[arg(long, default_value_t = 1000)]
        purge_every: u64,
    },
    /// Three in-process nodes: writes through the leader, then reads.
    Cluster {
        #[command(flatten)]
        common: Common,
        /// Concurrent clients.
        #[arg(long, default_value_t = 8)]
        clients: usize,
        /// Keys the clients write and read, drawn uniformly.
        #[arg(long, default_value_t = 100_000)]
        keys: u64,
        /// After the writes, read as long (linearizable, then stale).
        #[arg(long)]
        reads: bool,
        /// Write in a square wave of this period (seconds), idle between
        /// bursts; a sample a second of writes, p99 and disk footprint.
        #[arg(long)]
        wave_period: Option<f64>,
        /// Fraction of each period spent writing.
        #[arg(long, default_value_t = 0.5)]
        wave_duty: f64,
    },
}

#[derive(Args)]
struct Common {
    /// The store: Ebb (adaptive tuning, the default), Ebb with tuning
    /// off, or RocksDB with rocksstore's or ebb-raft's write pattern
    /// (these two need the `rocksdb-peer` feature).
    #[arg(long, value_enum)]
    store: Store,
    /// Bytes of each value written.
    #[arg(long, default_value_t = 100)]
    value_bytes: usize,
    /// Seconds each phase runs.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Directory for the databases (a temporary directory inside it,
    /// removed at the end).
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    dir: PathBuf,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq, Debug)]
enum Store {
    Ebb,
    EbbOff,
    Rocksstore,
    RocksBatch,
}

impl Store {
    fn name(self) -> &'static str {
        match self {
            Store::Ebb => "ebb",
            Store::EbbOff => "ebb-off",
            Store::Rocksstore => "rocksstore",
            Store::RocksBatch => "rocks-batch",
        }
    }

    /// The RocksDB stores' write pattern.
    #[cfg(feature = "rocksdb-peer")]
    fn rocks_pattern(self) -> rocks::Pattern {
        if self == Store::Rocksstore {
            rocks::Pattern::RocksStore
        } else {
            rocks::Pattern::Batch
        }
    }

    fn open_ebb(self, path: &Path) -> Result<(ebb_raft::LogStore, ebb_raft::StateMachine), String> {
        let mut options = ebb::Options::default();
        if self == Store::EbbOff {
            options.background_tuning = BackgroundTuning::Off;
        }
        ebb_raft::open(path, options).map_err(|e| format!("opening {}: {e}", path.display()))
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return fail(&format!("starting the runtime: {e}")),
    };
    match runtime.block_on(run(cli.command)) {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(message) => fail(&message),
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("ebb-raft-bench: error: {message}");
    ExitCode::FAILURE
}

#[cfg(not(feature = "rocksdb-peer"))]
fn no_peer(store: Store) -> String {
    format!(
        "--store {} needs the RocksDB peer: build with `--features rocksdb-peer` (bench/raft.sh does)",
        store.name()
    )
}

async fn run(command: Command) -> Result<Vec<serde_json::Value>, String> {
    match command {
        Command::Log { common, batch, keep, purge_every } => {
            if batch == 0 {
                return Err("--batch must be at least 1".into());
            }
            let tmp = tempfile::tempdir_in(&common.dir).map_err(|e| format!("{}: {e}", common.dir.display()))?;
            let path = tmp.path().join("db");
            let params = log_bench::LogParams {
                batch,
                value_bytes: common.value_bytes,
                seconds: common.seconds,
                keep,
                purge_every: purge_every.max(1),
            };
            let mut result = match common.store {
                Store::Ebb | Store::EbbOff => {
                    let (log, _sm) = common.store.open_ebb(&path)?;
                    log_bench::run(log, &path, &params).await?
                }
                #[cfg(feature = "rocksdb-peer")]
                Store::Rocksstore | Store::RocksBatch => {
                    let pattern = common.store.rocks_pattern();
                    let (log, _sm) = rocks::open(&path, pattern)?;
                    log_bench::run(log, &path, &params).await?
                }
                #[cfg(not(feature = "rocksdb-peer"))]
                store => return Err(no_peer(store)),
            };
            result["bench"] = json!("log");
            result["store"] = json!(common.store.name());
            result["batch"] = json!(batch);
            result["value_bytes"] = json!(common.value_bytes);
            Ok(vec![result])
        }
        Command::Cluster { common, clients, keys, reads, wave_period, wave_duty } => {
            if clients == 0 {
                return Err("--clients must be at least 1".into());
            }
            if let Some(period) = wave_period {
                if !(period > 0.0 && wave_duty > 0.0 && wave_duty <= 1.0) {
                    return Err("--wave-period must be positive and --wave-duty in (0, 1]".into());
                }
            }
            let tmp = tempfile::tempdir_in(&common.dir).map_err(|e| format!("{}: {e}", common.dir.display()))?;
            let params = cluster::ClusterParams {
                clients,
                seconds: common.seconds,
                value_bytes: common.value_bytes,
                keys,
                reads,
                wave: wave_period.map(|period| (period, wave_duty)),
            };
            let dirs: Vec<PathBuf> = (1..=3).map(|id| tmp.path().join(format!("node{id}"))).collect();
            let mut results = match common.store {
                Store::Ebb | Store::EbbOff => {
                    let mut stores = Vec::new();
                    for dir in dirs {
                        let (log, sm) = common.store.open_ebb(&dir)?;
                        stores.push(cluster::NodeStores { log, reader: sm.clone(), sm, dir });
                    }
                    cluster::run::<ebb_raft::TypeConfig, _, _, _>(stores, &params).await?
                }
                #[cfg(feature = "rocksdb-peer")]
                Store::Rocksstore | Store::RocksBatch => {
                    let pattern = common.store.rocks_pattern();
                    let mut stores = Vec::new();
                    for dir in dirs {
                        let (log, sm) = rocks::open(&dir, pattern)?;
                        stores.push(cluster::NodeStores { log, reader: sm.clone(), sm, dir });
                    }
                    cluster::run::<rocks::RocksConfig, _, _, _>(stores, &params).await?
                }
                #[cfg(not(feature = "rocksdb-peer"))]
                store => return Err(no_peer(store)),
            };
            for result in &mut results {
                result["bench"] = json!("cluster");
                result["store"] = json!(common.store.name());
                result["clients"] = json!(clients);
                result["value_bytes"] = json!(common.value_bytes);
            }
            Ok(results)
        }
    }
}
