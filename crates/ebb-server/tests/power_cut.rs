//! Power cuts of nodes in a running cluster while clients write: each node
//! on its own Ebb in-memory filesystem; the victim's disk stops taking
//! writes (every operation an I/O error, so nothing more becomes durable
//! and it acknowledges nothing more), the disk is copied as a power loss
//! would leave it (unsynced bytes dropped, torn, or garbage), the node is
//! stopped and started again on the copy; last, the whole cluster's power
//! goes at once. Every write a client saw acknowledged is, once the
//! cluster settles, on every node, and no node panicked.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{stale_contents, wait_acknowledged, wait_applied_at, writer, Acknowledged};
use ebb::fs::{CrashMode, FaultRule, MemFs};

/// Acknowledged writes each phase waits for before its next fault.
const PER_PHASE: usize = 20;
const LIMIT: Duration = Duration::from_secs(30);

/// Panics anywhere in the process (openraft's tasks included), counted by
/// a hook around the default one.
static PANICS: AtomicUsize = AtomicUsize::new(0);

fn count_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        default(info);
    }));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_writes_survive_power_cuts_of_running_nodes() {
    count_panics();
    let disks: Arc<Mutex<BTreeMap<u64, MemFs>>> = Arc::new(Mutex::new((1..=3).map(|id| (id, MemFs::new())).collect()));
    let on_disk = {
        let disks = Arc::clone(&disks);
        move |config: &mut ebb_server::NodeConfig| {
            config.ebb_options.fs = Arc::new(disks.lock().unwrap()[&config.id].clone());
        }
    };
    let mut cluster = common::Cluster::start(3, &on_disk).await;
    let acknowledged: Acknowledged = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let addrs: Vec<String> = cluster.addrs.values().cloned().collect();
    let writers: Vec<_> =
        (0..3).map(|t| tokio::spawn(writer(t, addrs.clone(), acknowledged.clone(), stop.clone()))).collect();
    wait_acknowledged(&acknowledged, PER_PHASE, LIMIT).await;

    let phases = [
        ("leader", CrashMode::DropUnsynced),
        ("follower", CrashMode::KeepRandomPrefix { seed: 7 }),
        ("leader", CrashMode::GarbageTail { seed: 11 }),
        ("follower", CrashMode::ZeroTail),
    ];
    for (who, mode) in phases {
        let leader = cluster.leader().await;
        let victim = if who == "leader" { leader } else { *cluster.addrs.keys().find(|id| **id != leader).unwrap() };
        let disk = disks.lock().unwrap()[&victim].clone();
        // The power goes: nothing more reaches the disk ...
        disk.inject(FaultRule::any_op().persistent());
        // ... which keeps what a power loss keeps.
        let after = disk.crash_clone(mode);
        cluster.stop(victim).await;
        let goal = acknowledged.lock().unwrap().len() + PER_PHASE;
        wait_acknowledged(&acknowledged, goal, LIMIT).await;
        disks.lock().unwrap().insert(victim, after);
        cluster.restart(victim, &on_disk).await;
        let goal = acknowledged.lock().unwrap().len() + PER_PHASE;
        wait_acknowledged(&acknowledged, goal, LIMIT).await;
    }
    // The whole cluster at once: only what each node synced survives.
    let mut after = BTreeMap::new();
    for (id, disk) in disks.lock().unwrap().iter() {
        disk.inject(FaultRule::any_op().persistent());
        after.insert(*id, disk.crash_clone(CrashMode::DropUnsynced));
    }
    for id in 1..=3 {
        cluster.stop(id).await;
    }
    *disks.lock().unwrap() = after;
    for id in 1..=3 {
        cluster.restart(id, &on_disk).await;
    }
    let goal = acknowledged.lock().unwrap().len() + PER_PHASE;
    wait_acknowledged(&acknowledged, goal, LIMIT).await;
    stop.store(true, Ordering::Relaxed);
    for writer in writers {
        writer.await.unwrap();
    }

    // After a last write is applied everywhere, every node holds every
    // acknowledged write, and all hold the same.
    let leader = cluster.leader().await;
    let last = cluster.client(leader).put("last", "write").await.expect("last write").log_index;
    let mut states = Vec::new();
    for (id, addr) in &cluster.addrs {
        wait_applied_at(addr, last, LIMIT).await;
        let state = stale_contents(addr).await;
        for (key, value) in acknowledged.lock().unwrap().iter() {
            assert_eq!(state.get(key), Some(value), "node {id} lost acknowledged write {key}");
        }
        states.push(state);
    }
    assert!(states.windows(2).all(|w| w[0] == w[1]), "the nodes' states differ");
    cluster.shutdown().await;
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "a node panicked");
}
