#!/usr/bin/env bash
# W1 (shared/WORKLOADS.md) with user-defined timestamps on both engines
# (--user_timestamp_size=8: the bytewise u64-timestamp comparator, writes at
# increasing timestamps, reads at the latest), beside the same runs without
# timestamps, and RocksDB without timestamps but with its bytewise order given
# through the rocksdb crate's comparator callbacks (the way its timestamped
# order has to be given: the C API has no handle on the built-in one), which
# shows what those callbacks cost RocksDB. Alternating, REPS times, the page
# cache dropped before each run (as root). Reports land in OUT_DIR as
# VARIANT.REP.json; bench/runs_csv.py OUT_DIR w1_timestamps flattens them.
#
# Usage: bench/w1_timestamps.sh OUT_DIR [REPS]   (EBB_BENCH: a peer build,
# bench/build_peer.sh)
set -euo pipefail
out=${1:?usage: bench/w1_timestamps.sh OUT_DIR [REPS]}
reps=${2:-3}
bin=${EBB_BENCH:-/work/target-rocks/release/ebb-bench}
num=${NUM:-1000000}
benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,seekrandom,readwhilewriting
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
variants=(ebb_ts rocksdb_ts ebb rocksdb rocksdb_callbacks)
for rep in $(seq 1 "$reps"); do
  for v in "${variants[@]}"; do
    case $v in
      ebb_ts) args=(--engine=ebb --user_timestamp_size=8) ;;
      rocksdb_ts) args=(--engine=rocksdb --user_timestamp_size=8) ;;
      ebb) args=(--engine=ebb) ;;
      rocksdb) args=(--engine=rocksdb) ;;
      rocksdb_callbacks) args=(--engine=rocksdb --peer_comparator_callbacks=true) ;;
    esac
    db="$tmp/db"
    rm -rf "$db"
    sync
    [ -w /proc/sys/vm/drop_caches ] && echo 3 >/proc/sys/vm/drop_caches
    echo "== rep $rep $v" >&2
    "$bin" "${args[@]}" --benchmarks="$benchmarks,stats" --num="$num" --key_size=16 --value_size=100 \
      --compression_type=none --threads=1 --seed=$((400 + rep)) --progress=false \
      --db="$db" --json="$out/$v.$rep.json" >"$out/$v.$rep.log" 2>&1
    rm -rf "$db"
  done
done
echo "done: $out" >&2
