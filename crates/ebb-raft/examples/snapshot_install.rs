//! Prints the time an install of a large snapshot takes (run it under
//! `/usr/bin/time -v` for the peak memory).
//!
//! ```sh
//! cargo run --release -p ebb-raft --example snapshot_install -- prepare /tmp/snap 1000000
//! /usr/bin/time -v target/release/examples/snapshot_install install /tmp/snap
//! ```
//!
//! `prepare DIR KEYS` applies KEYS keys of 100-byte values on a store in
//! `DIR/leader`, builds a snapshot and copies its data to `DIR/snapshot.bin`
//! (its metadata to `DIR/snapshot.meta`). `install DIR` receives that data
//! into a new store in `DIR/follower` in openraft's default chunks of
//! 3 MiB, installs it, and prints the times; `install DIR over` installs
//! it over the follower's state instead (every key replaced).

use std::io::{Read, Write};
use std::path::Path;
use std::time::Instant;

use ebb_raft::{Request, StateMachine};
use openraft::storage::RaftStateMachine;
use openraft::{BasicNode, Entry, EntryPayload, RaftSnapshotBuilder, SnapshotMeta};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

type Meta = SnapshotMeta<u64, BasicNode>;

const CHUNK: usize = 3 << 20;

fn open(path: &Path) -> StateMachine {
    ebb_raft::open(path, ebb::Options::default()).expect("open the store").1
}

async fn prepare(dir: &Path, keys: u64) {
    let mut leader = open(&dir.join("leader"));
    let started = Instant::now();
    let mut index = 0;
    while index < keys {
        let batch: Vec<Entry<ebb_raft::TypeConfig>> = (index..keys.min(index + 10_000))
            .map(|i| Entry {
                log_id: openraft::testing::log_id(1, 1, i + 1),
                payload: EntryPayload::Normal(Request::Set {
                    key: format!("key{i:012}").into_bytes(),
                    value: format!("{i:0>100}").into_bytes(),
                }),
            })
            .collect();
        index += batch.len() as u64;
        leader.apply(batch).await.expect("apply");
    }
    println!("applied {keys} keys in {:.2?}", started.elapsed());
    let started = Instant::now();
    let mut snapshot = leader.get_snapshot_builder().await.build_snapshot().await.expect("build");
    println!("built the snapshot in {:.2?}", started.elapsed());
    let mut out = std::fs::File::create(dir.join("snapshot.bin")).expect("create snapshot.bin");
    let mut buf = vec![0; CHUNK];
    loop {
        let n = snapshot.snapshot.read(&mut buf).await.expect("read the snapshot");
        if n == 0 {
            break;
        }
        out.write_all(&buf[..n]).expect("write snapshot.bin");
    }
    let meta = postcard::to_stdvec(&snapshot.meta).expect("encode the metadata");
    std::fs::write(dir.join("snapshot.meta"), meta).expect("write snapshot.meta");
}

async fn install(dir: &Path, over: bool) {
    let meta: Meta = postcard::from_bytes(&std::fs::read(dir.join("snapshot.meta")).expect("read snapshot.meta"))
        .expect("decode the metadata");
    let path = dir.join("follower");
    if path.exists() && !over {
        std::fs::remove_dir_all(&path).expect("remove the old follower");
    }
    let mut follower = open(&path);
    let started = Instant::now();
    let mut data = follower.begin_receiving_snapshot().await.expect("begin receiving");
    let mut input = std::fs::File::open(dir.join("snapshot.bin")).expect("open snapshot.bin");
    let mut buf = vec![0; CHUNK];
    let mut bytes = 0;
    loop {
        let n = input.read(&mut buf).expect("read snapshot.bin");
        if n == 0 {
            break;
        }
        data.write_all(&buf[..n]).await.expect("receive a chunk");
        bytes += n;
    }
    data.shutdown().await.expect("finish receiving");
    let received = started.elapsed();
    let started = Instant::now();
    follower.install_snapshot(&meta, data).await.expect("install");
    let installed = started.elapsed();
    println!("received {bytes} bytes in {received:.2?}, installed in {installed:.2?}");
    let keys = meta.last_log_id.map_or(0, |l| l.index);
    for i in [0, keys.saturating_sub(1)] {
        let key = format!("key{i:012}");
        assert!(follower.get(key.as_bytes()).expect("read").is_some(), "{key} installed");
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1..).unwrap_or_default() {
        [cmd, dir, keys] if cmd == "prepare" => prepare(Path::new(dir), keys.parse().expect("KEYS")).await,
        [cmd, dir] if cmd == "install" => install(Path::new(dir), false).await,
        [cmd, dir, over] if cmd == "install" && over == "over" => install(Path::new(dir), true).await,
        _ => {
            eprintln!("usage: snapshot_install prepare DIR KEYS | install DIR [over]");
            std::process::exit(2);
        }
    }
}
