#!/usr/bin/env bash
# Reads on the tree a write wave leaves, on shapes beside W2's sine
# (shared/WORKLOADS.md, W2): W2's options (8 MiB memtables, 32 MiB base
# level, 8 MiB target files, no compression, two compaction threads) under
#   sine2     another sine: 40 to 200 MB/s, period 40 s, 100 KB values;
#   square    20 s at 250 MB/s, 20 s at 30 MB/s (bench/shapes/square.csv);
#   sawtooth  ramps from 20 to 194 MB/s over 30 s (bench/shapes/sawtooth.csv),
#             16 KB values, one reader thread beside the writer;
# each 120 s, then readrandom on the database it left in a new process, as
# W2 measures it (20,000 reads, --disable_auto_compactions=true). The
# variants alternate (A B A B ...), REPS times; the page cache is dropped
# before each fill (as root; skipped otherwise), not before the read-back.
# Reports land in OUT as SHAPE-VARIANT.REP.json (the fill) and
# SHAPE-VARIANT.REP.read.json (the read-back); bench/runs_csv.py flattens
# them.
#
# Usage: bench/wave_reads.sh OUT_DIR [REPS] [VARIANT...]
#   variant: ebb | rocksdb | NAME=ENGINE@BINARY (default: ebb rocksdb)
#   SHAPES (default "sine2 square sawtooth"); EBB_BENCH: the ebb-bench
#   binary, built with --features rocksdb-peer (bench/build_peer.sh).
set -euo pipefail
out=${1:?usage: bench/wave_reads.sh OUT_DIR [REPS] [VARIANT...]}
reps=${2:-3}
shift $(( $# >= 2 ? 2 : $# ))
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(ebb rocksdb)
bin=${EBB_BENCH:-target/release/ebb-bench}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--benchmarks=fillrandom,stats --duration=120 --compression_type=none
  --stats_interval_seconds=10 --stats_per_interval=1
  --write_buffer_size=8388608 --max_bytes_for_level_base=33554432 --target_file_size_base=8388608
  --max_write_buffer_number=6 --max_background_flushes=2 --max_background_compactions=2 --progress=false)

for rep in $(seq 1 "$reps"); do
  for shape in ${SHAPES:-sine2 square sawtooth}; do
    case $shape in
      sine2) num=50000 value=100000
        wave=(--sine_write_rate=true --sine_a=80000000 --sine_b=0.15708 --sine_c=4.712 --sine_d=120000000
          --sine_write_rate_interval_milliseconds=1000) ;;
      square) num=50000 value=100000 wave=(--trace_file="$here/shapes/square.csv") ;;
      sawtooth) num=300000 value=16384 wave=(--trace_file="$here/shapes/sawtooth.csv" --readers=1) ;;
      *) echo "unknown shape $shape" >&2; exit 2 ;;
    esac
    for v in "${variants[@]}"; do
      name=${v%%=*}
      spec=${v#*=}
      engine=${spec%%@*}
      vbin=$bin
      [ "$spec" = "${spec#*@}" ] || vbin=${spec#*@}
      db="$tmp/db"
      rm -rf "$db"
      sync
      [ -w /proc/sys/vm/drop_caches ] && echo 3 >/proc/sys/vm/drop_caches
      echo "== rep $rep $shape $name" >&2
      "$vbin" --engine="$engine" "${common[@]}" --num="$num" --value_size="$value" "${wave[@]}" \
        --db="$db" --json="$out/$shape-$name.$rep.json" >"$out/$shape-$name.$rep.log" 2>&1
      "$vbin" --engine="$engine" --use_existing_db=1 --benchmarks=readrandom,stats --num="$num" --reads=20000 \
        --value_size="$value" --disable_auto_compactions=true --progress=false \
        --db="$db" --json="$out/$shape-$name.$rep.read.json" >"$out/$shape-$name.$rep.read.log" 2>&1
      rm -rf "$db"
    done
  done
done
grep -h -e '^fillrandom' -e '^readrandom' "$out"/*.log >&2 || true
echo "done: $out" >&2
