#!/usr/bin/env bash
# Ebb as openraft's storage beside RocksDB 10.4.2 with openraft-rocksstore's
# layout (crates/ebb-raft-bench), alternating stores within each repetition
# (the order reversed every other repetition), REPS times:
#   log      the Raft log alone: appends of 1, 16 and 256 entries of 100 B
#            and 4 KiB, each waited for until durable, purges behind;
#   cluster  three in-process nodes, 1, 8 and 64 clients writing through
#            the leader, then reading (linearizable, then stale);
#   wave     64 clients in a square wave (10 s period, half of it writing),
#            Ebb's default tuning against tuning off.
# Raw results: OUT/raft.jsonl (one JSON object per run and phase);
# python3 bench/summarize_raft.py OUT/raft.jsonl CSV makes the tables and
# the CSV. Usage: bash bench/raft.sh OUT [REPS] [SECONDS]
# Builds with the RocksDB peer in ROCKS_TARGET (default /work/target-rocks),
# with the target features bench/build_peer.sh gives RocksDB.
set -euo pipefail
out=${1:?usage: bench/raft.sh OUT [REPS] [SECONDS]}
reps=${2:-3}
secs=${3:-5}
target=${ROCKS_TARGET:-/work/target-rocks}
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+sse4.2,+pclmulqdq" CARGO_TARGET_DIR="$target" \
  cargo build --release -p ebb-raft-bench --features rocksdb-peer >&2
bin="$target/release/ebb-raft-bench"
mkdir -p "$out"
tmp=$(mktemp -d /tmp/raftbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
runs="$out/raft.jsonl"
# Tags each result line with its repetition.
tag() { sed "s/^{/{\"rep\":$1,/" >> "$runs"; }
for rep in $(seq 1 "$reps"); do
  stores=(ebb rocksstore rocks-batch)
  waves=(ebb ebb-off)
  if (( rep % 2 == 0 )); then stores=(rocks-batch rocksstore ebb); waves=(ebb-off ebb); fi
  for value in 100 4096; do
    for batch in 1 16 256; do
      for store in "${stores[@]}"; do
        echo "== rep $rep log $store batch $batch value $value $(date +%T)" >&2
        "$bin" log --store "$store" --batch "$batch" --value-bytes "$value" --seconds "$secs" --dir "$tmp" | tag "$rep"
      done
    done
  done
  for clients in 1 8 64; do
    for store in "${stores[@]}"; do
      echo "== rep $rep cluster $store clients $clients $(date +%T)" >&2
      "$bin" cluster --store "$store" --clients "$clients" --keys 10000 --seconds "$secs" --reads --dir "$tmp" | tag "$rep"
    done
  done
  for store in "${waves[@]}"; do
    echo "== rep $rep wave $store $(date +%T)" >&2
    "$bin" cluster --store "$store" --clients 64 --seconds $((secs * 8)) --wave-period $((secs * 2)) --wave-duty 0.5 \
      --value-bytes 1024 --dir "$tmp" | tag "$rep"
  done
done
echo "$runs"
