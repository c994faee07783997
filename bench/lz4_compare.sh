#!/usr/bin/env bash
# LZ4 block compression and decompression of db_bench-shaped blocks (keys of
# 16 bytes, values of 100 whose second half repeats the first: ratio 0.5)
# through three builds: lz4_flex as Ebb uses it (default features: the safe
# decoder, which zeroes its output buffer first), lz4_flex without
# `safe-decode`/`safe-encode` (its unsafe, bounds-checked code, no zeroing),
# and the C liblz4 through the `lz4` crate. Each is its own small cargo
# project in a temporary directory (features of one crate unify inside a
# build); they run alternating, REPS times, at each block size.
#
# Usage: bench/lz4_compare.sh [REPS] [BLOCK_SIZE...]   (default 3, 4096 16384)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
reps=${1:-3}
shift $(( $# >= 1 ? 1 : 0 ))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(4096 16384)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
project() { # NAME DEPENDENCY COMPRESS DECOMPRESS
  mkdir -p "$tmp/$1/src"
  printf '[package]\nname = "lz%s"\nversion = "0.1.0"\nedition = "2021"\n[workspace]\n[dependencies]\n%s\n' "$1" "$2" >"$tmp/$1/Cargo.toml"
  printf 'mod imp {\n    pub const NAME: &str = "%s";\n    pub fn compress(d: &[u8]) -> Vec<u8> { %s }\n    pub fn decompress(c: &[u8], _n: usize) -> Vec<u8> { %s }\n}\ninclude!("%s/lz4_compare/main.rs");\n' \
    "$1" "$3" "$4" "$here" >"$tmp/$1/src/main.rs"
  (cd "$tmp/$1" && cargo build --release -q)
}
project flex-safe 'lz4_flex = "0.11"' 'lz4_flex::compress_prepend_size(d)' 'lz4_flex::decompress_size_prepended(c).unwrap()'
project flex-unsafe 'lz4_flex = { version = "0.11", default-features = false, features = ["std", "checked-decode"] }' \
  'lz4_flex::compress_prepend_size(d)' 'lz4_flex::decompress_size_prepended(c).unwrap()'
project c-liblz4 'lz4 = "1"' 'lz4::block::compress(d, None, true).unwrap()' 'lz4::block::decompress(c, None).unwrap()'
echo "rep,build,block_size,compress_ns,decompress_ns,ratio"
for rep in $(seq 1 "$reps"); do
  for bs in "${sizes[@]}"; do
    for b in flex-safe flex-unsafe c-liblz4; do
      "$tmp/$b/target/release/lz$b" "$bs" |
        sed -E "s/^[^ ]+ block=([0-9]+) compress_ns=([0-9]+) decompress_ns=([0-9]+) ratio=([0-9.]+) .*/$rep,$b,\1,\2,\3,\4/"
    done
  done
done
