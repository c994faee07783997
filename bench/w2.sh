#!/usr/bin/env bash
# W2 of shared/WORKLOADS.md (the thesis sine wave, scaled): every variant in
# one alternating series (A B C ... A B C ...), REPS times, each run followed
# by readrandom on the database it left. Reports land in $OUT as JSON and logs;
# bench/summarize.py turns them into the docs/benchmarks.md table.
#
# Usage: bench/w2.sh OUT_DIR [REPS] [VARIANT...]
#   variants: ebb-enabled ebb-disabled ebb-thesis ebb-adaptive rocks-enabled rocks-disabled
#   EBB_BENCH: the ebb-bench binary (default target/release/ebb-bench; the rocks-*
#   variants need one built with --features rocksdb-peer).
#   COOLDOWN=1 adds the thesis's cool-down (sine_finished after 60 s at 10 MB/s).
#   EXTRA_FLAGS: more flags for every run and its read-back (e.g. --checksum_type=4).
#   --readers=N among them runs N point-read threads beside the wave's writer (the
#   read-back, which has no writer, leaves it out); summarize.py then adds the reads
#   during the wave. Give it as --readers=N, one word.
#   Sine flags (a variant's other wave) are left out of the read-back too,
#   which refuses them without --sine_write_rate.
set -euo pipefail
out=${1:?usage: bench/w2.sh OUT_DIR [REPS] [VARIANT...]}
reps=${2:-3}
shift $(( $# >= 2 ? 2 : $# ))
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(ebb-enabled ebb-disabled ebb-thesis ebb-adaptive rocks-enabled rocks-disabled)
bin=${EBB_BENCH:-target/release/ebb-bench}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

base=(--benchmarks=fillrandom,stats --duration=120 --num=50000 --value_size=100000 --compression_type=none
  --sine_write_rate=true --sine_a=100000000 --sine_b=0.10472 --sine_c=4.712 --sine_d=150000000
  --sine_write_rate_interval_milliseconds=1000 --stats_interval_seconds=10 --stats_per_interval=1
  --write_buffer_size=8388608 --max_bytes_for_level_base=33554432 --target_file_size_base=8388608
  --max_write_buffer_number=6 --max_background_flushes=2 --progress=false)
# shellcheck disable=SC2206
extra=(${EXTRA_FLAGS:-})
base+=("${extra[@]}")
read_extra=()
for f in "${extra[@]}"; do
  case $f in --readers=* | -readers=* | --sine_* | -sine_*) ;; *) read_extra+=("$f") ;; esac
done
if [ "${COOLDOWN:-0}" = 1 ]; then
  base+=(--sine_finished_seconds=60 --sine_finished_write_rate_limit=10000000)
fi
disabled=(--disable_auto_compactions=true --level0_file_num_compaction_trigger=10000
  --level0_slowdown_writes_trigger=10000 --level0_stop_writes_trigger=10000)

flags_for() {
  case $1 in
    ebb-enabled) echo --engine=ebb --background_tuning=off --max_background_compactions=2 ;;
    ebb-disabled) echo --engine=ebb --background_tuning=off "${disabled[@]}" ;;
    ebb-thesis) echo --engine=ebb --max_background_compactions=2 --auto_tuned_compactions=true \
      --rate_limiter_bytes_per_sec="${THESIS_RATE:-398458880}" --subcompactions=2 ;;
    ebb-adaptive) echo --engine=ebb --max_background_compactions=2 --background_tuning=adaptive --subcompactions=2 --tuning_max_l0_files="${ADAPTIVE_MAX_L0:-4096}" ;;
    ebb-idle) echo --engine=ebb --max_background_compactions=2 --background_tuning=idle --subcompactions=2 --tuning_max_l0_files="${ADAPTIVE_MAX_L0:-4096}" ;;
    rocks-enabled) echo --engine=rocksdb --max_background_compactions=2 ;;
    rocks-disabled) echo --engine=rocksdb "${disabled[@]}" ;;
    *) echo "unknown variant $1" >&2; exit 2 ;;
  esac
}

for rep in $(seq 1 "$reps"); do
  for v in "${variants[@]}"; do
    db="$tmp/db-$v"
    rm -rf "$db"
    engine=$(flags_for "$v" | tr ' ' '\n' | grep -- '--engine=')
    echo "== rep $rep $v" >&2
    # shellcheck disable=SC2046
    "$bin" "${base[@]}" $(flags_for "$v") --db="$db" --json="$out/$v.$rep.json" >"$out/$v.$rep.log" 2>&1
    # RocksDB's readrandom on the filterless, uncompacted tree "disabled"
    # leaves takes minutes: cut at READ_TIMEOUT seconds (reported as unfinished).
    timeout "${READ_TIMEOUT:-90}" "$bin" "$engine" --use_existing_db=1 --benchmarks=readrandom --num=50000 \
      --reads=20000 --value_size=100000 --disable_auto_compactions=true --progress=false "${read_extra[@]}" --db="$db" \
      --json="$out/$v.$rep.read.json" >"$out/$v.$rep.read.log" 2>&1 || echo "read cut or failed: $?" >>"$out/$v.$rep.read.log"
    rm -rf "$db"
  done
done
echo "done: $out" >&2
