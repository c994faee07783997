//! The Raft log alone: appends of `batch` entries at a time, each waited
//! for until durable (`blocking_append`: the store's flush callback), with
//! purges behind the head as a node that snapshots would do (every
//! `purge_every` entries, everything but the last `keep`).

use std::time::{Duration, Instant};

use ebb_raft::{Request, Response};
use openraft::storage::{RaftLogStorage, RaftLogStorageExt};
use openraft::{BasicNode, CommittedLeaderId, Entry, EntryPayload, LogId, RaftTypeConfig};
use serde_json::json;

use crate::load::{disk_bytes, Latencies, Load};

pub struct LogParams {
    pub batch: u64,
    pub value_bytes: usize,
    pub seconds: f64,
    pub keep: u64,
    pub purge_every: u64,
}

fn log_id(index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

/// Runs the appends on `store` (a fresh log in `dir`) and returns the
/// result as JSON.
pub async fn run<C, LS>(mut store: LS, dir: &std::path::Path, p: &LogParams) -> Result<serde_json::Value, String>
where
    C: RaftTypeConfig<D = Request, R = Response, NodeId = u64, Node = BasicNode, Entry = Entry<C>>,
    LS: RaftLogStorage<C>,
{
    let mut load = Load::new(42, 1_000_000, p.value_bytes);
    let mut latencies = Latencies::default();
    let mut purge_latencies = Latencies::default();
    let (mut next, mut purged, mut appends) = (1u64, 0u64, 0u64);
    let start = Instant::now();
    let deadline = start + Duration::from_secs_f64(p.seconds);
    while Instant::now() < deadline {
        let entries: Vec<Entry<C>> = (0..p.batch)
            .map(|i| Entry { log_id: log_id(next + i), payload: EntryPayload::Normal(load.set()) })
            .collect();
        let t = Instant::now();
        store.blocking_append(entries).await.map_err(|e| format!("append: {e}"))?;
        latencies.push(t.elapsed());
        appends += 1;
        next += p.batch;
        let last = next - 1;
        if last >= purged + p.keep + p.purge_every {
            let upto = last - p.keep;
            let t = Instant::now();
            store.purge(log_id(upto)).await.map_err(|e| format!("purge: {e}"))?;
            purge_latencies.push(t.elapsed());
            purged = upto;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let entries = next - 1;
    Ok(json!({
        "appends": appends,
        "entries": entries,
        "seconds": elapsed,
        "appends_per_s": appends as f64 / elapsed,
        "entries_per_s": entries as f64 / elapsed,
        "mb_per_s": (entries as f64 * p.value_bytes as f64) / elapsed / 1e6,
        "p50_us": latencies.quantile(0.5),
        "p99_us": latencies.quantile(0.99),
        "p999_us": latencies.quantile(0.999),
        "purges": purge_latencies.len(),
        "purge_p99_us": purge_latencies.quantile(0.99),
        "disk_bytes": disk_bytes(dir),
    }))
}
