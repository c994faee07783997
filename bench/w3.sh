#!/usr/bin/env bash
# W3 of shared/WORKLOADS.md (seed 002: write bursts with idle gaps): random
# writes at full speed for 10 s, 20 s idle, for 120 s, sync writes in batches
# of 100. Variants alternate (A B C ... A B C ...), REPS times.
#
# Usage: bench/w3.sh OUT_DIR [REPS] [VARIANT...]
#   variants: ebb-off ebb-idle ebb-idle-lastwrite ebb-adaptive ebb-thesis
#   bench/summarize.py OUT_DIR --baseline ebb-off gives the table.
#   PROFILE=leveldb runs every variant on LevelDB's defaults, the UW paper's
#   baseline (seed 002 §6): 4 MiB memtables, 2 MiB files, a 10 MiB L1, one
#   flush and one compaction thread, L0 slowdown at 8 files and stop at 12.
set -euo pipefail
out=${1:?usage: bench/w3.sh OUT_DIR [REPS] [VARIANT...]}
reps=${2:-3}
shift $(( $# >= 2 ? 2 : $# ))
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(ebb-off ebb-idle ebb-idle-lastwrite ebb-adaptive)
bin=${EBB_BENCH:-target/release/ebb-bench}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
base=(--benchmarks=fillrandom,stats --duration=120 --num=1000000 --value_size=1000 --compression_type=none
  --burst_seconds=10 --idle_seconds=20 --sync=true --batch_size=100 --progress=false)
if [ "${PROFILE:-ebb}" = leveldb ]; then
  base+=(--write_buffer_size=4194304 --target_file_size_base=2097152 --max_bytes_for_level_base=10485760
    --max_background_flushes=1 --max_background_compactions=1
    --level0_file_num_compaction_trigger=4 --level0_slowdown_writes_trigger=8 --level0_stop_writes_trigger=12)
fi
flags_for() {
  case $1 in
    ebb-off) echo --engine=ebb --background_tuning=off ;;
    ebb-idle) echo --engine=ebb --background_tuning=idle ;;
    ebb-idle-lastwrite) echo --engine=ebb --background_tuning=idle --idle_policy=since_last_write ;;
    ebb-adaptive) echo --engine=ebb --background_tuning=adaptive ;;
    ebb-thesis) echo --engine=ebb --auto_tuned_compactions=true --rate_limiter_bytes_per_sec="${THESIS_RATE:-104857600}" ;;
    *) echo "unknown variant $1" >&2; exit 2 ;;
  esac
}
for rep in $(seq 1 "$reps"); do
  for v in "${variants[@]}"; do
    db="$tmp/db-$v"
    rm -rf "$db"
    echo "== rep $rep $v" >&2
    # shellcheck disable=SC2046
    "$bin" "${base[@]}" $(flags_for "$v") --db="$db" --json="$out/$v.$rep.json" >"$out/$v.$rep.log" 2>&1
    rm -rf "$db"
  done
done
echo "done: $out" >&2
