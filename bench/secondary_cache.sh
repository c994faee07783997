#!/usr/bin/env bash
# Reads through a compressed secondary cache (docs/cache.md, "Compressed
# secondary cache"), W5's shape scaled down: NUM keys of 16 bytes with
# 400-byte values, lz4, 10-bit blooms, a block cache of CACHE bytes holding a
# small part of the data. Each engine fills one database (fillrandom, then
# waits for its compactions); then read runs on it alternate (A B A B, REPS
# times): readrandom with two threads, twice in one process (the second pass
# reads with the caches the first warmed). Variants:
#   ebb       Ebb, block cache CACHE
#   ebb_sec   Ebb, block cache CACHE over a compressed secondary cache SECONDARY
#   rocksdb   RocksDB, block cache CACHE (the rocksdb crate cannot build a
#             compressed secondary cache, so RocksDB has none)
#   rocksdb_big  RocksDB, block cache CACHE + SECONDARY: the same memory as
#             ebb_sec, all of it decompressed blocks
# The page cache is dropped before each run (as root). EXTRA_FLAGS are added
# to every run (e.g. --use_direct_reads=true, which keeps the OS page cache
# out of the reads).
#
# Usage: bench/secondary_cache.sh OUT_DIR [REPS]
#   EBB_BENCH: ebb-bench built with --features rocksdb-peer (bench/build_peer.sh)
#   NUM (default 2000000), READS per thread (default 500000), CACHE (default
#   67108864), SECONDARY (default 201326592)
set -euo pipefail
out=${1:?usage: bench/secondary_cache.sh OUT_DIR [REPS]}
reps=${2:-3}
bin=${EBB_BENCH:-target/release/ebb-bench}
num=${NUM:-2000000}
reads=${READS:-500000}
cache=${CACHE:-67108864}
secondary=${SECONDARY:-201326592}
# shellcheck disable=SC2206
extra=(${EXTRA_FLAGS:-})
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--num="$num" --key_size=16 --value_size=400 --compression_type=lz4 --bloom_bits=10 --progress=false)
drop() {
  sync
  [ -w /proc/sys/vm/drop_caches ] && echo 3 >/proc/sys/vm/drop_caches || true
}

for engine in ebb rocksdb; do
  drop
  echo "== fill $engine" >&2
  "$bin" --engine="$engine" "${common[@]}" --cache_size="$cache" --threads=2 --seed=900 "${extra[@]}" \
    --benchmarks=fillrandom,waitforcompaction --db="$tmp/db-$engine" \
    --json="$out/fill_$engine.1.json" >"$out/fill_$engine.1.log" 2>&1
done
for rep in $(seq 1 "$reps"); do
  for v in ebb ebb_sec rocksdb rocksdb_big; do
    case $v in
      ebb) engine=ebb flags=(--cache_size="$cache") ;;
      ebb_sec) engine=ebb flags=(--cache_size="$cache" --compressed_secondary_cache_size="$secondary") ;;
      rocksdb) engine=rocksdb flags=(--cache_size="$cache") ;;
      rocksdb_big) engine=rocksdb flags=(--cache_size=$((cache + secondary))) ;;
    esac
    drop
    echo "== rep $rep $v" >&2
    "$bin" --engine="$engine" "${common[@]}" "${flags[@]}" --threads=2 --reads="$reads" --seed=$((910 + rep)) \
      "${extra[@]}" --use_existing_db=1 --benchmarks=readrandom,readrandom,stats --db="$tmp/db-$engine" \
      --json="$out/$v.$rep.json" >"$out/$v.$rep.log" 2>&1
  done
done
for f in "$out"/*.log; do
  echo "== $(basename "$f")"
  grep -E '^[a-z]+ +: ' "$f" || true
done
echo "done: $out" >&2
