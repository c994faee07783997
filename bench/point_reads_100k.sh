#!/usr/bin/env bash
# Point reads of 100 KB values from a settled tree, per build: fillrandom of
# 20,000 keys of 100 KB (2 GB, W2's options: 8 MiB memtables, 32 MiB base,
# 8 MiB target files, no compression, two compaction threads), wait for
# compaction, then 100,000 readrandom in a new process, the tree's files
# still in the page cache as its own writes left them. Variants alternate
# (A B A B ...), REPS times; reports land in OUT as VARIANT.REP.json and
# VARIANT.REP.read.json (bench/runs_csv.py flattens them).
#
# Usage: bench/point_reads_100k.sh OUT_DIR [REPS] NAME=ENGINE@BINARY...
set -euo pipefail
out=${1:?usage: bench/point_reads_100k.sh OUT_DIR [REPS] NAME=ENGINE@BINARY...}
reps=${2:-3}
shift 2
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
opts=(--num=20000 --value_size=100000 --compression_type=none --write_buffer_size=8388608
  --max_bytes_for_level_base=33554432 --target_file_size_base=8388608 --max_background_compactions=2 --progress=false)
for rep in $(seq 1 "$reps"); do
  for v in "$@"; do
    name=${v%%=*} spec=${v#*=}
    engine=${spec%%@*} bin=${spec#*@}
    rm -rf "$tmp/db"
    "$bin" --engine="$engine" --benchmarks=fillrandom,waitforcompaction "${opts[@]}" --db="$tmp/db" \
      --json="$out/$name.$rep.json" >"$out/$name.$rep.log" 2>&1
    "$bin" --engine="$engine" --use_existing_db=1 --benchmarks=readrandom --reads=100000 --disable_auto_compactions=true \
      "${opts[@]}" --db="$tmp/db" --json="$out/$name.$rep.read.json" >"$out/$name.$rep.read.log" 2>&1
    echo "$name $rep $(grep -h '^readrandom' "$out/$name.$rep.read.log" | cut -c1-70)" >&2
  done
done
