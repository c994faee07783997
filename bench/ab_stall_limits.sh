#!/bin/bash
# Two binaries of Ebb (BEFORE, AFTER; AFTER a rocksdb-peer build) with tuning
# off beside RocksDB, alternating: the sine of experiments/sine_stall_limits.toml
# with pending-bytes limits of 1 / 4 GiB (60 s), and W2 "enabled" (120 s);
# each tree read back (5,000 random reads). Usage:
#   BEFORE=bin AFTER=bin bench/ab_stall_limits.sh OUT REPS; bench/summarize.py OUT
set -u
out=$1; reps=$2
mkdir -p $out
tmp=$(mktemp -d /tmp/abst.XXXX)
sine=(--benchmarks=fillrandom,stats --num=50000 --value_size=100000 --compression_type=none
  --sine_write_rate=true --sine_a=100000000 --sine_b=0.10472 --sine_c=4.712 --sine_d=150000000
  --sine_write_rate_interval_milliseconds=1000 --stats_interval_seconds=10 --stats_per_interval=1
  --write_buffer_size=8388608 --max_bytes_for_level_base=33554432 --target_file_size_base=8388608
  --max_write_buffer_number=6 --max_background_flushes=2 --max_background_compactions=2 --progress=false)
tight=(--duration=60 --soft_pending_compaction_bytes_limit=1073741824 --hard_pending_compaction_bytes_limit=4294967296)
w2=(--duration=120)
for rep in $(seq 1 $reps); do
  for shape in tight w2; do
    for v in before after rocks; do
      case $v in before) bin=${BEFORE:?}; e="--engine=ebb --background_tuning=off";;
                 after) bin=${AFTER:?}; e="--engine=ebb --background_tuning=off";;
                 rocks) bin=${AFTER:?}; e="--engine=rocksdb";; esac
      if [ $shape = tight ]; then s=("${tight[@]}"); else s=("${w2[@]}"); fi
      db=$tmp/db; rm -rf $db
      echo "== $rep $shape $v $(date +%T)" >&2
      $bin "${sine[@]}" "${s[@]}" $e --db=$db --json=$out/$shape-$v.$rep.json >$out/$shape-$v.$rep.log 2>&1
      eng=$(echo $e | cut -d' ' -f1)
      timeout 90 $bin $eng --use_existing_db=1 --benchmarks=readrandom --num=50000 --reads=5000 --value_size=100000 \
        --disable_auto_compactions=true --progress=false --db=$db --json=$out/$shape-$v.$rep.read.json >$out/$shape-$v.$rep.read.log 2>&1
      rm -rf $db
    done
  done
done
rm -rf $tmp
echo done >&2
