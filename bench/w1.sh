#!/usr/bin/env bash
# W1 of shared/WORKLOADS.md (the micro suite), tuning modes side by side:
# every variant in one alternating series (A B ... A B ...), REPS times, the
# page cache dropped before each run (as root; skipped otherwise). Each run's
# JSON report lands in $OUT; bench/summarize_w1.py OUT [BASELINE] prints the
# medians and ratios to the baseline variant.
#
# Usage: bench/w1.sh OUT_DIR [REPS] [VARIANT...]
#   variant: a --background_tuning mode (off, adaptive, thesis, idle), or
#   NAME=MODE@BINARY to run a mode with another ebb-bench build (A/B of two
#   commits: build the other commit into its own target directory first).
#   EBB_BENCH: the default binary (target/release/ebb-bench).
#   NUM (default 1000000) and BENCHMARKS (default W1's list; e.g.
#   BENCHMARKS=fillrandom,readwhilewriting NUM=4000000 for the 4M-key steady
#   load) change the suite; EXTRA_FLAGS are added to every run.
set -euo pipefail
out=${1:?usage: bench/w1.sh OUT_DIR [REPS] [VARIANT...]}
reps=${2:-5}
shift $(( $# >= 2 ? 2 : $# ))
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(off adaptive)
bin=${EBB_BENCH:-target/release/ebb-bench}
benchmarks=${BENCHMARKS:-fillseq,fillrandom,overwrite,readrandom,readseq,seekrandom,readwhilewriting}
num=${NUM:-1000000}
# shellcheck disable=SC2206
extra=(${EXTRA_FLAGS:-})
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for rep in $(seq 1 "$reps"); do
  for v in "${variants[@]}"; do
    name=${v%%=*}
    spec=${v#*=}
    mode=${spec%%@*}
    vbin=$bin
    [ "$spec" = "${spec#*@}" ] || vbin=${spec#*@}
    db="$tmp/db-$name"
    rm -rf "$db"
    sync
    [ -w /proc/sys/vm/drop_caches ] && echo 3 >/proc/sys/vm/drop_caches
    echo "== rep $rep $name" >&2
    "$vbin" --engine=ebb --benchmarks="$benchmarks,stats" --num="$num" --key_size=16 --value_size=100 \
      --compression_type=none --threads=1 --seed=$((100 + rep)) --background_tuning="$mode" --progress=false \
      "${extra[@]}" --db="$db" --json="$out/$name.$rep.json" >"$out/$name.$rep.log" 2>&1
    rm -rf "$db"
  done
done
echo "done: $out" >&2
