#!/usr/bin/env bash
# A local cluster of ebb-server nodes (docs/cluster.md, "The replicated server").
#
#   bash tools/cluster.sh [N]    build ebb-server (release), start N nodes (default 3)
#                                on 127.0.0.1:21001.., initialize the cluster
#   bash tools/cluster.sh stop   stop the nodes started last (their data is kept)
#
# Everything listens on 127.0.0.1. The nodes' directories, logs and pids are in
# a temporary directory; $TMPDIR/ebb-cluster.current names it for `stop`.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
CURRENT=${TMPDIR:-/tmp}/ebb-cluster.current
BASE_PORT=21001

stop() {
    if [[ ! -f $CURRENT ]]; then
        echo "no cluster recorded in $CURRENT" >&2
        return 0
    fi
    local dir
    dir=$(cat "$CURRENT")
    for pidfile in "$dir"/node*.pid; do
        [[ -f $pidfile ]] || continue
        local pid
        pid=$(cat "$pidfile")
        if kill "$pid" 2>/dev/null; then
            echo "stopped $(basename "$pidfile" .pid) (pid $pid)"
        fi
        rm -f "$pidfile"
    done
    rm -f "$CURRENT"
    echo "data kept in $dir"
}

if [[ ${1:-} == stop ]]; then
    stop
    exit 0
fi

N=${1:-3}
if ! [[ $N =~ ^[1-9][0-9]?$ ]]; then
    echo "usage: $0 [N] | stop    (N: 1 to 99 nodes)" >&2
    exit 2
fi
if [[ -f $CURRENT ]]; then
    echo "a cluster is already recorded in $CURRENT; run: bash $0 stop" >&2
    exit 1
fi

cd "$ROOT"
cargo build --release -p ebb-server
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/ebb-server

DIR=$(mktemp -d "${TMPDIR:-/tmp}/ebb-cluster.XXXXXX")
echo "$DIR" > "$CURRENT"
MEMBERS=()
for ((i = 1; i <= N; i++)); do
    addr=127.0.0.1:$((BASE_PORT + i - 1))
    "$BIN" --id "$i" --listen "$addr" --dir "$DIR/node$i" > "$DIR/node$i.log" 2>&1 &
    echo $! > "$DIR/node$i.pid"
    MEMBERS+=("$i=$addr")
done

# Wait until every node answers (at most 10 s).
for ((i = 1; i <= N; i++)); do
    addr=127.0.0.1:$((BASE_PORT + i - 1))
    for ((t = 0; t < 100; t++)); do
        if "$BIN" client --addr "$addr" status > /dev/null 2>&1; then
            break
        fi
        if ! kill -0 "$(cat "$DIR/node$i.pid")" 2>/dev/null || ((t == 99)); then
            echo "node $i did not start; its log ($DIR/node$i.log):" >&2
            cat "$DIR/node$i.log" >&2
            stop
            exit 1
        fi
        sleep 0.1
    done
done

"$BIN" client --addr 127.0.0.1:$BASE_PORT init "${MEMBERS[@]}" > /dev/null
# A first write, through the client, waits for the leader.
"$BIN" client --addr 127.0.0.1:$BASE_PORT put ebb-cluster-started "$(date +%s)" > /dev/null

cat <<USAGE
$N nodes on 127.0.0.1:$BASE_PORT..$((BASE_PORT + N - 1)), data, logs and pids in $DIR

  $BIN client --addr 127.0.0.1:$BASE_PORT put greeting hello
  $BIN client --addr 127.0.0.1:$((BASE_PORT + N - 1)) get greeting
  $BIN client --addr 127.0.0.1:$BASE_PORT status
  curl -s -X PUT --data-binary hello http://127.0.0.1:$BASE_PORT/kv/greeting
  curl -sL http://127.0.0.1:$BASE_PORT/kv/greeting

Stop it with: bash tools/cluster.sh stop
USAGE
