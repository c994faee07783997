#!/usr/bin/env bash
# Point reads on an existing database (issue 17, part 3): each engine fills a
# database once (fillrandom, 100-byte values, no compression, 10-bit bloom,
# a 64 MB block cache: about 40 % of the data), then the variants run
# readrandom, readrandom through mmap, seekrandom through mmap and
# multireadrandom (batches of 32 and 256) in turn, alternating, REPS times
# each, and the ops/s are printed per run with their median.
#
# Usage: bench/point_reads.sh OUT_DIR [REPS] VARIANT...
#   variant: ebb | rocksdb | NAME=ebb@BINARY (another Ebb build reading the
#   database the first ebb variant filled)
#   EBB_BENCH: the ebb-bench binary (rocksdb needs --features rocksdb-peer:
#   bench/build_peer.sh). NUM (default 2,000,000) keys, READS (default
#   1,500,000) reads per run.
set -euo pipefail
out=${1:?usage: bench/point_reads.sh OUT_DIR [REPS] VARIANT...}
reps=${2:-3}
shift 2
variants=("$@")
[ ${#variants[@]} -gt 0 ] || { echo "name at least one variant" >&2; exit 2; }
bin=${EBB_BENCH:-target/release/ebb-bench}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--num="${NUM:-2000000}" --value_size=100 --compression_type=none --bloom_bits=10
  --cache_size=67108864 --seed=1 --progress=false)

engine_of() { local v=${1#*=}; echo "${v%@*}"; }
binary_of() { case $1 in *@*) echo "${1#*@}" ;; *) echo "$bin" ;; esac; }
name_of() { echo "${1%%=*}"; }

for e in ebb rocksdb; do
  if printf '%s\n' "${variants[@]}" | grep -q "$e"; then
    "$bin" --engine="$e" --benchmarks=fillrandom,flush,waitforcompaction "${common[@]}" --db="$tmp/$e" \
      >"$out/fill.$e.txt" 2>&1
  fi
done

runs=(
  "readrandom|--benchmarks=readrandom"
  "readrandom-mmap|--benchmarks=readrandom --mmap_read=1"
  "seekrandom-mmap|--benchmarks=seekrandom --mmap_read=1 --seek_nexts=10"
  "multireadrandom-32|--benchmarks=multireadrandom --batch_size=32"
  "multireadrandom-256|--benchmarks=multireadrandom --batch_size=256"
)
for run in "${runs[@]}"; do
  label=${run%%|*}
  read -r -a flags <<<"${run#*|}"
  bench=${flags[0]#--benchmarks=}
  for rep in $(seq 1 "$reps"); do
    for v in "${variants[@]}"; do
      e=$(engine_of "$v")
      n=$(name_of "$v")
      "$(binary_of "$v")" --engine="$e" "${common[@]}" "${flags[@]}" --use_existing_db=1 \
        --reads="${READS:-1500000}" --seed=$((rep + 2)) --db="$tmp/$e" >"$out/$label.$n.$rep.txt" 2>&1
      ops=$(awk -v b="$bench" '$1 == b && $2 == ":" {print $5}' "$out/$label.$n.$rep.txt")
      echo "$label $n $rep $ops" | tee -a "$out/runs.txt"
    done
  done
done
echo "medians (ops/s):"
awk '{k=$1" "$2; v[k]=v[k]" "$4} END {for (k in v) print k, v[k]}' "$out/runs.txt" | sort | while read -r label name rest; do
  med=$(printf '%s\n' $rest | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}')
  echo "$label $name $med  ($rest )"
done
