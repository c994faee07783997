#!/usr/bin/env bash
# Writes in batches, side by side with RocksDB through the same harness:
# fillrandom of NUM keys (16-byte keys, 100-byte values, no compression)
# with --batch_size of 1, 100 and 1000, each run on an empty database, the
# variants alternating (A B A B ...), REPS times. Prints and appends
# "batch_size variant rep ops/s" to OUT_DIR/runs.txt.
#
# Usage: bench/batch_writes.sh OUT_DIR REPS VARIANT...
#   variant: ebb (EBB_BENCH, default target/release/ebb-bench), before
#   (BEFORE_BENCH: an older ebb-bench, run as --engine=ebb), rocksdb
#   (PEER_BENCH: built with --features rocksdb-peer, bench/build_peer.sh).
set -euo pipefail
out=${1:?usage: bench/batch_writes.sh OUT_DIR REPS VARIANT...}
reps=${2:?reps}
shift 2
variants=("$@")
[ ${#variants[@]} -gt 0 ] || { echo "name at least one variant" >&2; exit 2; }
num=${NUM:-2000000}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for rep in $(seq 1 "$reps"); do
  for bs in 1 100 1000; do
    for v in "${variants[@]}"; do
      case $v in
        ebb) bin=${EBB_BENCH:-target/release/ebb-bench}; engine=ebb ;;
        before) bin=${BEFORE_BENCH:?BEFORE_BENCH}; engine=ebb ;;
        rocksdb) bin=${PEER_BENCH:-/work/target-rocks/release/ebb-bench}; engine=rocksdb ;;
        *) echo "unknown variant $v" >&2; exit 2 ;;
      esac
      rm -rf "$tmp/db"
      "$bin" --engine="$engine" --benchmarks=fillrandom --num="$num" --batch_size="$bs" --value_size=100 \
        --compression_type=none --progress=false --seed="$rep" --db="$tmp/db" >"$out/$bs.$v.$rep.txt" 2>&1
      ops=$(awk '$1 == "fillrandom" && $2 == ":" {print $5}' "$out/$bs.$v.$rep.txt")
      echo "$bs $v $rep $ops" | tee -a "$out/runs.txt"
    done
  done
done
rm -rf "$tmp/db"
