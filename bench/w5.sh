#!/usr/bin/env bash
# W5 of issue 17 (a benchmark at scale): 20,000,000 keys of 16 bytes with
# 400-byte values (about 8 GB before compression), lz4, a 256 MB block cache
# (about 3 % of the data), 10-bit bloom filters, two client threads:
# fillrandom, overwrite, readrandom, seekrandom and readwhilewriting in one
# run, then readrandom with four threads on the database it left, with
# --report_memory after each. The engines alternate (A B A B ...), REPS
# times; the page cache is dropped before each run (as root; skipped
# otherwise). Each run's output and JSON land in OUT; the result lines and
# Memory lines are printed at the end.
#
# Usage: bench/w5.sh OUT_DIR [REPS] [VARIANT...]
#   variant: ebb | rocksdb | NAME=ENGINE@BINARY (default: ebb rocksdb)
#   EBB_BENCH: the ebb-bench binary, built with --features rocksdb-peer
#   (bench/build_peer.sh). NUM (default 20000000) keys; READS (default
#   2000000) reads per thread for the read benchmarks; EXTRA_FLAGS are added
#   to every run, after the defaults, so they override them (e.g.
#   --index_type=2 --partition_filters=true). WARM_READS (default 0): when
#   set, a third process reads that many keys per thread with four threads,
#   page cache warm, on the database the second left. FIRST_REP (default 1):
#   the first repetition to run (its seeds follow its number), to finish a
#   series whose later repetitions were cut off.
set -euo pipefail
out=${1:?usage: bench/w5.sh OUT_DIR [REPS] [VARIANT...]}
reps=${2:-2}
shift $(( $# >= 2 ? 2 : $# ))
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(ebb rocksdb)
bin=${EBB_BENCH:-target/release/ebb-bench}
num=${NUM:-20000000}
reads=${READS:-2000000}
# shellcheck disable=SC2206
extra=(${EXTRA_FLAGS:-})
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--num="$num" --reads="$reads" --key_size=16 --value_size=400 --compression_type=lz4
  --cache_size=268435456 --bloom_bits=10 --progress=false --report_memory=true)

for rep in $(seq "${FIRST_REP:-1}" "$reps"); do
  for v in "${variants[@]}"; do
    name=${v%%=*}
    spec=${v#*=}
    engine=${spec%%@*}
    vbin=$bin
    [ "$spec" = "${spec#*@}" ] || vbin=${spec#*@}
    db="$tmp/db-$name"
    rm -rf "$db"
    sync
    [ -w /proc/sys/vm/drop_caches ] && echo 3 >/proc/sys/vm/drop_caches
    echo "== rep $rep $name" >&2
    "$vbin" --engine="$engine" "${common[@]}" --threads=2 --seed=$((500 + rep)) "${extra[@]}" \
      --benchmarks=fillrandom,overwrite,readrandom,seekrandom,readwhilewriting,stats \
      --db="$db" --json="$out/$name.$rep.json" >"$out/$name.$rep.log" 2>&1
    sync
    [ -w /proc/sys/vm/drop_caches ] && echo 3 >/proc/sys/vm/drop_caches
    "$vbin" --engine="$engine" "${common[@]}" --threads=4 --seed=$((600 + rep)) "${extra[@]}" \
      --use_existing_db=1 --benchmarks=readrandom \
      --db="$db" --json="$out/$name.$rep.read4.json" >"$out/$name.$rep.read4.log" 2>&1
    if [ "${WARM_READS:-0}" -gt 0 ]; then
      "$vbin" --engine="$engine" "${common[@]}" --threads=4 --seed=$((700 + rep)) "${extra[@]}" \
        --reads="$WARM_READS" --use_existing_db=1 --benchmarks=readrandom \
        --db="$db" --json="$out/$name.$rep.warm4.json" >"$out/$name.$rep.warm4.log" 2>&1
    fi
    rm -rf "$db"
  done
done
for f in "$out"/*.log; do
  echo "== $(basename "$f")"
  grep -E '^[a-z]+ +: |^Memory:' "$f" || true
done
echo "done: $out" >&2
