#!/usr/bin/env bash
# Transactions on both engines, alternating (Ebb, RocksDB, Ebb, RocksDB ...):
# db_bench's randomtransaction with --transaction_db and with
# --optimistic_transaction_db at 1 and 4 threads, and the contended
# transfertransaction (100 accounts) at 4 and 16 threads, each run on a fresh
# database under the temporary directory (deleted after), REPS times. Every
# run verifies its data (randomtransaction's set sums, the transfers' total)
# and fails otherwise. Reports land in OUT as CASE-ENGINE.REP.json;
# bench/summarize_txn.py OUT makes the table and the CSV. Usage:
#   BIN=$(bash bench/build_peer.sh) bench/txn.sh OUT [REPS] [SECONDS]
set -euo pipefail
out=${1:?usage: BIN=ebb-bench-with-peer bench/txn.sh OUT [REPS] [SECONDS]}
reps=${2:-3}
secs=${3:-10}
bin=${BIN:?BIN must be an ebb-bench built with the RocksDB peer (bench/build_peer.sh)}
mkdir -p "$out"
tmp=$(mktemp -d /tmp/txnbench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
cases=(
  "rt-pessimistic-t1|--benchmarks=randomtransaction --transaction_db --threads=1 --num=100000"
  "rt-pessimistic-t4|--benchmarks=randomtransaction --transaction_db --threads=4 --num=100000"
  "rt-optimistic-t1|--benchmarks=randomtransaction --optimistic_transaction_db --threads=1 --num=100000"
  "rt-optimistic-t4|--benchmarks=randomtransaction --optimistic_transaction_db --threads=4 --num=100000"
  "transfer-pessimistic-t4|--benchmarks=transfertransaction --transaction_db --transaction_deadlock_detect --threads=4"
  "transfer-pessimistic-t16|--benchmarks=transfertransaction --transaction_db --transaction_deadlock_detect --threads=16"
  "transfer-optimistic-t4|--benchmarks=transfertransaction --optimistic_transaction_db --threads=4"
  "transfer-optimistic-t16|--benchmarks=transfertransaction --optimistic_transaction_db --threads=16"
)
for rep in $(seq 1 "$reps"); do
  for c in "${cases[@]}"; do
    name=${c%%|*}
    flags=${c#*|}
    for engine in ebb rocksdb; do
      echo "== rep $rep $name $engine $(date +%T)" >&2
      rm -rf "$tmp/db"
      # shellcheck disable=SC2086
      "$bin" --engine=$engine $flags --duration="$secs" --transfer_accounts=100 --progress=false \
        --db="$tmp/db" --json="$out/$name-$engine.$rep.json" > "$out/$name-$engine.$rep.log"
    done
  done
done
echo "done: $out" >&2
