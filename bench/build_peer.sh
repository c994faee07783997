#!/usr/bin/env bash
# Builds ebb-bench with the RocksDB peer (`--engine=rocksdb`, `compare
# --peer=rocksdb`) the way a release RocksDB is built: librocksdb-sys compiles
# RocksDB with -msse4.2 -mpclmul only when rustc's target has those features
# (its build.rs reads CARGO_CFG_TARGET_FEATURE), and without them RocksDB's
# CRC-32C is the portable software loop, several times slower than the
# hardware instruction Ebb's crc32c crate detects at run time. Both engines are
# in the same binary, so both get the same target features.
#
# Usage: bench/build_peer.sh            (prints the binary's path)
#   ROCKS_TARGET  cargo target dir (default /work/target-rocks); the first
#                 build compiles RocksDB from source: ~17 min on 2 cores.
# Needs libclang-dev and a C++ compiler (apt-get install libclang-dev g++).
set -euo pipefail
target=${ROCKS_TARGET:-/work/target-rocks}
RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+sse4.2,+pclmulqdq" CARGO_TARGET_DIR="$target" \
  cargo build --release -p ebb-bench --features rocksdb-peer >&2
echo "$target/release/ebb-bench"
