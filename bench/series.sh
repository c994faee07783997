#!/usr/bin/env bash
# The issue-5 evidence series, in the order it was run for docs/benchmarks.md:
# W2 (every variant, alternating), W2 with the cool-down, W3 on Ebb's defaults
# and on LevelDB's. OUT gets one folder per part; bench/summarize.py OUT/<part>
# makes each table. EBB_BENCH must be built with --features rocksdb-peer.
set -euo pipefail
out=${1:?usage: bench/series.sh OUT [W2_REPS] [COOL_REPS] [W3_REPS]}
w2_reps=${2:-3}
cool_reps=${3:-2}
w3_reps=${4:-2}
here=$(dirname "$0")
bash "$here/w2.sh" "$out/w2" "$w2_reps" ebb-enabled ebb-disabled ebb-thesis ebb-adaptive ebb-idle rocks-enabled rocks-disabled
COOLDOWN=1 bash "$here/w2.sh" "$out/w2-cool" "$cool_reps" ebb-enabled ebb-disabled ebb-thesis ebb-adaptive rocks-enabled
bash "$here/w3.sh" "$out/w3" "$w3_reps" ebb-off ebb-idle ebb-adaptive
PROFILE=leveldb bash "$here/w3.sh" "$out/w3-leveldb" "$w3_reps" ebb-off ebb-idle ebb-adaptive
