#!/usr/bin/env bash
# Builds RocksDB's cache_bench (cache/cache_bench_tool.cc) in release mode
# (NDEBUG, -O2) against the librocksdb.a that the rocksdb-peer feature of
# ebb-bench already built, from the same librocksdb-sys source: the release
# RocksDB counterpart of `ebb-bench cachebench` for W4 (Debian's cache_bench is
# RocksDB 7.8.3 built with assertions).
#
# Usage: bench/build_cache_bench.sh OUT_BINARY
#   ROCKS_TARGET  cargo target dir of the peer build (default /work/target-rocks;
#                 build it first: CARGO_TARGET_DIR=$ROCKS_TARGET cargo build
#                 --release -p ebb-bench --features rocksdb-peer)
# Needs g++ and libgflags-dev (installed with apt-get when missing).
set -euo pipefail
out=${1:?usage: bench/build_cache_bench.sh OUT_BINARY}
target=${ROCKS_TARGET:-/work/target-rocks}
registry=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/ | head -n 1)
src=$(ls -d "$registry"librocksdb-sys-*+10.* | sort -V | tail -n 1)
lib=$(ls "$target"/release/build/librocksdb-sys-*/out/librocksdb.a | head -n 1)
libdir=$(dirname "$lib")
lz4=$(ls "$target"/release/build/lz4-sys-*/out/liblz4.a | head -n 1)
zstd=$(ls "$target"/release/build/zstd-sys-*/out/libzstd.a | head -n 1)
zstd_inc=$(ls -d "$registry"zstd-sys-*/zstd/lib | sort -V | tail -n 1)
lz4_inc=$(ls -d "$registry"lz4-sys-*/liblz4/lib | sort -V | tail -n 1)
if [ ! -e /usr/include/gflags/gflags.h ]; then
  apt-get install -y -q libgflags-dev >/dev/null
fi
echo "cache_bench from $src against $lib" >&2
# The defines librocksdb-sys compiles the library with (build.rs), so the
# tool's view of RocksDB's classes matches the archive's.
g++ -O2 -std=c++20 -DNDEBUG=1 -DGFLAGS=1 -DOS_LINUX -DROCKSDB_PLATFORM_POSIX -DROCKSDB_LIB_IO_POSIX \
  -DROCKSDB_SCHED_GETCPU_PRESENT -DROCKSDB_SUPPORT_THREAD_LOCAL -DSNAPPY=1 -DLZ4=1 -DZSTD=1 \
  -D_FILE_OFFSET_BITS=64 -msse4.2 -mpclmul \
  -I"$src/rocksdb" -I"$src/rocksdb/include" -I"$src/snappy" -I"$src" -I"$zstd_inc" -I"$lz4_inc" \
  "$src/rocksdb/cache/cache_bench.cc" "$src/rocksdb/cache/cache_bench_tool.cc" -o "$out" \
  "$lib" "$libdir/libsnappy.a" "$lz4" "$zstd" -lgflags -lz -lbz2 -lpthread -ldl
echo "built $out" >&2
