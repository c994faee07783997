#!/usr/bin/env bash
# Seed 004's WAL experiments and Manos's compaction-style comparison (issue 8),
# Ebb beside Debian's RocksDB 7.8.3 db_bench with the same flags, through
# `ebb-bench compare --peer=db_bench` (alternating runs, medians of REPS).
# Debian's db_bench is built with assertions: the ratios orient, they do not
# rank. Sizes are the seed's scaled to this machine (1M keys, not 10M; sync
# runs 20K keys, since each write waits for an fsync).
#
# Usage: bench/seed004.sh OUT_DIR [REPS]
set -euo pipefail
out=${1:?usage: bench/seed004.sh OUT_DIR [REPS]}
reps=${2:-3}
bin=${EBB_BENCH:-target/release/ebb-bench}
mkdir -p "$out"
cmp() {
  local name=$1
  shift
  echo "== $name" >&2
  "$bin" compare --peer=db_bench --reps="$reps" -- "$@" --compression_type=none >"$out/$name.txt" 2>&1 ||
    echo "failed: $?" >>"$out/$name.txt"
}
# disable_wal (seed 004: fillseq, fillrandom, readrandom)
for w in false true; do
  cmp "disable_wal_$w" --benchmarks=fillseq,fillrandom,readrandom --num=1000000 --reads=200000 --disable_wal=$w
done
# manual_wal_flush, async and sync
for m in false true; do
  cmp "manual_wal_flush_${m}_async" --benchmarks=fillseq,fillrandom --num=1000000 --manual_wal_flush=$m --sync=false
  cmp "manual_wal_flush_${m}_sync" --benchmarks=fillseq,fillrandom --num=20000 --manual_wal_flush=$m --sync=true
done
# max_total_wal_size, one and several column families
for cf in 1 4; do
  for size in 0 4194304; do
    cmp "max_total_wal_size_${size}_cf$cf" --benchmarks=fillrandom --num=1000000 --num_column_families=$cf \
      --write_buffer_size=4194304 --max_total_wal_size=$size
  done
done
# compaction styles (Manos): fillrandom then readrandom
for style in 0 1 2; do
  cmp "compaction_style_$style" --benchmarks=fillrandom,readrandom,stats --num=1000000 --reads=200000 \
    --compaction_style=$style --write_buffer_size=8388608 --target_file_size_base=8388608 \
    --max_bytes_for_level_base=33554432
done
echo "done: $out" >&2
