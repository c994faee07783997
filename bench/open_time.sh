#!/usr/bin/env bash
# Open time of a database whose MANIFEST holds many edits (issue 17, part 1):
# each engine fills a database with 64 KiB memtables over a small key range,
# so that tens of thousands of flushes and compactions each append an edit
# while the tree stays small; ends with a flush, so the WAL is empty. Then the
# engines (or builds) reopen their database in turn, alternating, REPS times
# each (`--report_open_timing`, page cache warm), and the OpenDb times are
# printed per run with their median. The MANIFEST's records are counted
# before the reopens (bench/count_log_records.py): an open writes a new
# MANIFEST.
#
# Usage: bench/open_time.sh OUT_DIR [REPS] VARIANT...
#   variant: ebb | rocksdb | NAME=ebb@BINARY (Ebb built elsewhere, e.g. the
#   commit before, reopening the database the first ebb variant filled)
#   EBB_BENCH: the ebb-bench binary (the rocksdb variant needs one built with
#   --features rocksdb-peer: bench/build_peer.sh).
#   WRITES (default 3,500,000) sets how many 1 KB writes the fill makes, NUM
#   (default 1,000) the keys they overwrite: the live tree is about NUM KB in
#   64 KiB tables (NUM=130000: ~2,000 tables).
set -euo pipefail
out=${1:?usage: bench/open_time.sh OUT_DIR [REPS] VARIANT...}
reps=${2:-5}
shift 2
variants=("$@")
[ ${#variants[@]} -gt 0 ] || { echo "name at least one variant" >&2; exit 2; }
bin=${EBB_BENCH:-target/release/ebb-bench}
writes=${WRITES:-3500000}
here=$(dirname "$0")
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
common=(--num="${NUM:-1000}" --value_size=1000 --compression_type=none --write_buffer_size=65536
  --target_file_size_base=65536 --max_bytes_for_level_base=262144 --background_tuning=off --progress=false)

engine_of() { local v=${1#*=}; echo "${v%@*}"; }
binary_of() { case $1 in *@*) echo "${1#*@}" ;; *) echo "$bin" ;; esac; }
name_of() { echo "${1%%=*}"; }

declare -A filled
for v in "${variants[@]}"; do
  engine=$(engine_of "$v")
  [ -z "${filled[$engine]:-}" ] || continue
  filled[$engine]=1
  db="$tmp/db-$engine"
  echo "== fill $engine" >&2
  "$(binary_of "$v")" --engine="$engine" "${common[@]}" --benchmarks=fillrandom,flush,waitforcompaction,flush \
    --writes="$writes" --db="$db" >"$out/fill-$engine.log" 2>&1
  manifest=$(ls "$db" | grep '^MANIFEST-' | sort | tail -1)
  echo "$engine: $(python3 "$here/count_log_records.py" "$db/$manifest") records in $manifest" | tee -a "$out/manifests.txt" >&2
done
for rep in $(seq 1 "$reps"); do
  for v in "${variants[@]}"; do
    engine=$(engine_of "$v")
    name=$(name_of "$v")
    # Every open writes a new MANIFEST holding a snapshot of the state, so
    # each one starts from a copy of the database the fill left.
    rm -rf "$tmp/open"
    cp -a "$tmp/db-$engine" "$tmp/open"
    "$(binary_of "$v")" --engine="$engine" "${common[@]}" --use_existing_db=true --benchmarks=readrandom --reads=1 \
      --report_open_timing=true --summary=false --db="$tmp/open" >"$out/$name.$rep.log" 2>&1
    echo "$rep $name $(grep -m1 '^OpenDb:' "$out/$name.$rep.log" | awk '{print $2}')" | tee -a "$out/open.txt" >&2
  done
done
python3 - "$out/open.txt" <<'PY'
import statistics, sys
times = {}
for line in open(sys.argv[1]):
    _, name, ms = line.split()
    times.setdefault(name, []).append(float(ms))
for name, ms in times.items():
    print(f"{name}: OpenDb ms per run {' / '.join(f'{m:.1f}' for m in ms)}, median {statistics.median(ms):.1f}")
PY
