#!/usr/bin/env bash
# W2 (bench/w2.sh, its flags and read-back) with the keys spread over
# FAMILIES column families (--num_column_families, default 3), two builds of
# Ebb alternating: AFTER adaptive, AFTER with --background_tuning=off, BEFORE
# adaptive (A B C A B C ...), REPS times. Reports land in OUT as
# VARIANT.REP.json and VARIANT.REP.read.json (after-adaptive, after-off,
# before-adaptive); bench/summarize.py OUT makes the table. Usage:
#   BEFORE=bin AFTER=bin bench/ab_w2_families.sh OUT [REPS] [FAMILIES]
# EXTRA_FLAGS are passed on to w2.sh after --num_column_families.
set -euo pipefail
out=${1:?usage: BEFORE=bin AFTER=bin bench/ab_w2_families.sh OUT [REPS] [FAMILIES]}
reps=${2:-3}
families=${3:-3}
here=$(dirname "$0")
mkdir -p "$out"
tmp=$(mktemp -d /tmp/abw2f.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
for rep in $(seq 1 "$reps"); do
  for v in after-adaptive after-off before-adaptive; do
    case $v in
      after-adaptive) bin=${AFTER:?}; variant=ebb-adaptive ;;
      after-off) bin=${AFTER:?}; variant=ebb-enabled ;;
      before-adaptive) bin=${BEFORE:?}; variant=ebb-adaptive ;;
    esac
    echo "== rep $rep $v $(date +%T)" >&2
    EBB_BENCH=$bin EXTRA_FLAGS="--num_column_families=$families ${EXTRA_FLAGS:-}" \
      bash "$here/w2.sh" "$tmp/run" 1 "$variant" 2>>"$out/series.log"
    for f in json log read.json read.log; do
      if [ -e "$tmp/run/$variant.1.$f" ]; then mv "$tmp/run/$variant.1.$f" "$out/$v.$rep.$f"; fi
    done
  done
done
echo "done: $out" >&2
