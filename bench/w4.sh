#!/usr/bin/env bash
# W4 of shared/WORKLOADS.md (issue 6, the block cache): every variant in one
# alternating series, REPS times.
#   (a) cachebench at 1, 2 and 8 threads with W4's mix: Ebb's LRU, LRU without
#       promotion on hit and clock cache (`ebb-bench cachebench`), beside
#       Debian's RocksDB cache_bench with lru_cache and hyper_clock_cache.
#   (b) readrandom with 8 threads on a database that fits in a 1 GiB block
#       cache (filled once per engine with every key, warmed by a readseq in the
#       same process):
#       Ebb LRU and clock, RocksDB LRU and HyperClockCache.
# Logs (and JSON reports for (b)) land in OUT_DIR; bench/summarize_w4.py turns
# them into a markdown table of medians and ratios.
#
# Usage: bench/w4.sh OUT_DIR [REPS]
#   EBB_BENCH    ebb-bench for the Ebb runs (default target/release/ebb-bench)
#   ROCKS_BENCH  ebb-bench built with --features rocksdb-peer (default
#                /work/target-rocks/release/ebb-bench)
#   CACHE_BENCH  RocksDB's cache_bench (default /usr/bin/cache_bench)
#   CACHE_BENCH10  a release-built cache_bench of RocksDB 10
#                (bench/build_cache_bench.sh); when set, (a) also runs
#                cache_bench 10's loop (--pinned_ratio=0.25: each thread keeps
#                its newest handles pinned) for it (rocks10-lru, rocks10-hcc)
#                and for Ebb's caches (ebb10-lru, ebb10-clock)
#   CACHE_VARIANTS  the (a) variants to run (default: all)
#   CACHE_FLAGS  extra flags for every (a) run, e.g. "--lean=true" (cache_bench's
#                flag: hits are not hashed, so the loop times the cache rather
#                than hashing 8 KiB per hit; inserts still fill their values)
#   OPS          cachebench operations per run over all threads (default 4000000,
#                5-10 s on 2 cores); each thread runs OPS / threads
#   THREADS      cachebench thread counts (default "1 2 8")
#   NUM, READS   readrandom keys (default 200000) and reads per thread (default
#                1000000, about 10 s at 8 threads)
#   PARTS        "cache read" (default) or either alone
set -euo pipefail
out=${1:?usage: bench/w4.sh OUT_DIR [REPS]}
reps=${2:-3}
ebb=${EBB_BENCH:-target/release/ebb-bench}
rocks=${ROCKS_BENCH:-/work/target-rocks/release/ebb-bench}
cache_bench=${CACHE_BENCH:-/usr/bin/cache_bench}
ops=${OPS:-4000000}
threads_list=${THREADS:-1 2 8}
num=${NUM:-200000}
reads=${READS:-1000000}
parts=${PARTS:-cache read}
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

w4=(--lookup_percent=90 --insert_percent=5 --erase_percent=5 --lookup_insert_percent=0
  --cache_size=67108864 --value_bytes=8192 --num_shard_bits=6)

cache_bench10=${CACHE_BENCH10:-}
cache_variants=(ebb-lru ebb-lru-nopromote ebb-clock rocks-lru rocks-hcc)
if [[ -n "$cache_bench10" ]]; then
  cache_variants+=(ebb10-lru ebb10-clock rocks10-lru rocks10-hcc)
fi
if [[ -n "${CACHE_VARIANTS:-}" ]]; then
  read -r -a cache_variants <<<"$CACHE_VARIANTS"
fi
# cache_bench 10's loop: blind inserts (its flag, 5 % by default) off so the
# mix stays W4's, and a quarter of the capacity pinned (its default).
loop10=(--blind_insert_percent=0 --pinned_ratio=0.25)
cachebench() {
  case $1 in
    ebb10-lru) "$ebb" cachebench --cache_type=lru_cache "${loop10[@]}" "${@:2}" ;;
    ebb10-clock) "$ebb" cachebench --cache_type=hyper_clock_cache "${loop10[@]}" "${@:2}" ;;
    rocks10-lru) "$cache_bench10" --cache_type=lru_cache "${loop10[@]}" "${@:2}" ;;
    rocks10-hcc) "$cache_bench10" --cache_type=hyper_clock_cache "${loop10[@]}" "${@:2}" ;;
    ebb-lru) "$ebb" cachebench --cache_type=lru_cache "${@:2}" ;;
    ebb-lru-nopromote) "$ebb" cachebench --cache_type=lru_cache --lru_promote=false "${@:2}" ;;
    ebb-clock) "$ebb" cachebench --cache_type=hyper_clock_cache "${@:2}" ;;
    rocks-lru) "$cache_bench" --cache_type=lru_cache "${@:2}" ;;
    rocks-hcc) "$cache_bench" --cache_type=hyper_clock_cache "${@:2}" ;;
    *) echo "unknown variant $1" >&2; exit 2 ;;
  esac
}

read_variants=(ebb-lru ebb-clock rocks-lru rocks-hcc)
engine_of() {
  case $1 in
    ebb-*) echo "$ebb --engine=ebb" ;;
    rocks-*) echo "$rocks --engine=rocksdb" ;;
  esac
}
cache_type_of() {
  case $1 in
    *-lru) echo lru_cache ;;
    *) echo hyper_clock_cache ;;
  esac
}

# Both engines build and probe a 10-bit bloom filter: with db_bench's
# default (-1) RocksDB writes none and Ebb its own default of 10.
data=(--num="$num" --value_size=100 --compression_type=none --bloom_bits=10 --progress=false)
if [[ " $parts " == *" read "* ]]; then
  for e in ebb rocks; do
    echo "== fill $e" >&2
    # shellcheck disable=SC2046
    $(engine_of "$e-lru") --benchmarks=filluniquerandom,flush,compact,waitforcompaction "${data[@]}" \
      --db="$tmp/db-$e" >"$out/fill.$e.log" 2>&1
  done
fi

for rep in $(seq 1 "$reps"); do
  if [[ " $parts " == *" cache "* ]]; then
    for t in $threads_list; do
      for v in "${cache_variants[@]}"; do
        echo "== rep $rep cachebench $v threads=$t" >&2
        # shellcheck disable=SC2086
        cachebench "$v" "${w4[@]}" ${CACHE_FLAGS:-} --threads="$t" --ops_per_thread=$((ops / t)) >"$out/cache.$v.t$t.$rep.log" 2>&1
      done
    done
  fi
  if [[ " $parts " == *" read "* ]]; then
    for v in "${read_variants[@]}"; do
      echo "== rep $rep readrandom $v" >&2
      # shellcheck disable=SC2046
      $(engine_of "$v") --use_existing_db=1 --db="$tmp/db-${v%%-*}" --benchmarks=readseq,readrandom --threads=8 \
        --reads="$reads" "${data[@]}" --cache_size=1073741824 --cache_type="$(cache_type_of "$v")" \
        --disable_auto_compactions=true --json="$out/read.$v.$rep.json" >"$out/read.$v.$rep.log" 2>&1
    done
  fi
done
echo "done: $out" >&2
