#!/usr/bin/env bash
# Issue 19's benchmarks, side by side with RocksDB through the same harness:
# bulk loading NUM keys through the SST writer and ingestion (`bulkload`)
# against `fillrandom` of the same keys, and the time of a checkpoint of the
# database `fillrandom` left (after `waitforcompaction`), three in a row.
# Each run starts from an empty database; the variants alternate
# (A B A B ...), REPS times each; every figure is appended to
# OUT_DIR/runs.txt as "benchmark engine rep ops/s micros/op".
#
# Usage: bench/operations.sh OUT_DIR REPS VARIANT...
#   variant: ebb | rocksdb. BIN: an ebb-bench built with --features
#   rocksdb-peer (bench/build_peer.sh), used for both engines. NUM keys
#   (default 10,000,000).
set -euo pipefail
out=${1:?usage: bench/operations.sh OUT_DIR REPS VARIANT...}
reps=${2:?reps}
shift 2
variants=("$@")
[ ${#variants[@]} -gt 0 ] || { echo "name at least one variant" >&2; exit 2; }
bin=${BIN:-/work/target-rocks/release/ebb-bench}
num=${NUM:-10000000}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--num="$num" --key_size=16 --value_size=100 --compression_type=none --bloom_bits=10
  --cache_size=67108864 --progress=false)
record() { # file engine rep benchmark...
  local f=$1 e=$2 rep=$3
  shift 3
  for b in "$@"; do
    awk -v b="$b" -v e="$e" -v r="$rep" '$1 == b && $2 == ":" {print b, e, r, $5, $3}' "$f" | tee -a "$out/runs.txt"
  done
}
for rep in $(seq 1 "$reps"); do
  for e in "${variants[@]}"; do
    rm -rf "$tmp/db"
    "$bin" --engine="$e" "${common[@]}" --benchmarks=bulkload --seed="$rep" --db="$tmp/db" >"$out/bulk.$e.$rep.txt" 2>&1
    record "$out/bulk.$e.$rep.txt" "$e" "$rep" bulkload
    rm -rf "$tmp/db"
    "$bin" --engine="$e" "${common[@]}" --benchmarks=fillrandom,waitforcompaction,checkpoint,checkpoint,checkpoint \
      --seed="$rep" --db="$tmp/db" >"$out/fill.$e.$rep.txt" 2>&1
    record "$out/fill.$e.$rep.txt" "$e" "$rep" fillrandom checkpoint
    du -sb "$tmp/db" | awk -v e="$e" -v r="$rep" '{print "dbsize", e, r, $1}' | tee -a "$out/runs.txt"
  done
done
rm -rf "$tmp/db"
