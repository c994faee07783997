#!/usr/bin/env bash
# The data-model benchmarks of issue 18, side by side with RocksDB through
# the same harness: each run starts from an empty database, the variants
# alternate (A B A B ...), REPS times each, and the ops/s of every run are
# printed and appended to OUT_DIR/runs.txt (median: bench/summarize.py or
# by eye).
#
#   merge:      mergerandom then readrandommergerandom, uint64add on 8-byte
#               operands (db_bench's --merge_operator=uint64add).
#   rangedel:   fillrandom with a range tombstone of 100 keys every 100
#               writes (--writes_per_range_tombstone=100
#               --range_tombstone_width=100), then readrandom and seekrandom.
#   prefix:     fillrandom with 8-byte prefixes of 10 keys each
#               (--prefix_size=8 --keys_per_prefix=10), then seekrandom in
#               bounded prefix mode (--prefix_same_as_start).
#
# Usage: bench/data_model.sh OUT_DIR REPS SUITE VARIANT...
#   suite: merge | rangedel | prefix
#   variant: ebb | rocksdb (EBB_BENCH: the ebb-bench binary for ebb,
#   PEER_BENCH: one built with --features rocksdb-peer for rocksdb,
#   bench/build_peer.sh). NUM keys (default 1,000,000).
set -euo pipefail
out=${1:?usage: bench/data_model.sh OUT_DIR REPS SUITE VARIANT...}
reps=${2:?reps}
suite=${3:?suite}
shift 3
variants=("$@")
[ ${#variants[@]} -gt 0 ] || { echo "name at least one variant" >&2; exit 2; }
ebb_bin=${EBB_BENCH:-target/release/ebb-bench}
peer_bin=${PEER_BENCH:-/work/target-rocks/release/ebb-bench}
num=${NUM:-1000000}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--num="$num" --compression_type=none --bloom_bits=10 --cache_size=67108864 --progress=false)

case $suite in
  merge)
    flags=(--benchmarks=mergerandom,readrandommergerandom --merge_operator=uint64add --value_size=8
      --merge_keys=$((num / 10)))
    benches=(mergerandom readrandommergerandom)
    ;;
  rangedel)
    flags=(--benchmarks=fillrandom,readrandom,seekrandom --value_size=100 --writes_per_range_tombstone=100
      --range_tombstone_width=100 --max_num_range_tombstones=$((num / 100)) --reads=$((num / 2)))
    benches=(fillrandom readrandom seekrandom)
    ;;
  prefix)
    flags=(--benchmarks=fillrandom,seekrandom --value_size=100 --prefix_size=8 --keys_per_prefix=10
      --prefix_same_as_start=true --seek_nexts=10 --reads=$((num / 2)))
    benches=(fillrandom seekrandom)
    ;;
  *) echo "unknown suite $suite" >&2; exit 2 ;;
esac

for rep in $(seq 1 "$reps"); do
  for e in "${variants[@]}"; do
    bin=$ebb_bin
    [ "$e" = rocksdb ] && bin=$peer_bin
    rm -rf "$tmp/db"
    "$bin" --engine="$e" "${common[@]}" "${flags[@]}" --seed="$rep" --db="$tmp/db" >"$out/$suite.$e.$rep.txt" 2>&1
    for b in "${benches[@]}"; do
      ops=$(awk -v b="$b" '$1 == b && $2 == ":" {print $5}' "$out/$suite.$e.$rep.txt")
      echo "$suite $b $e $rep $ops" | tee -a "$out/runs.txt"
    done
  done
done
rm -rf "$tmp/db"
