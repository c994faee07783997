#!/usr/bin/env bash
# Builds the `ebb` Python package for users to install anywhere:
#   - one optimised abi3 wheel (CPython 3.9 on) tagged manylinux_2_28, made
#     with maturin's --zig (zig as the linker, from the `ziglang` package),
#     so it runs on any Linux with glibc 2.28 or newer, not only on glibcs
#     as new as the building machine's;
#   - the source distribution (sdist), which builds with pip on any machine
#     with Rust and a C compiler.
# Then checks them: auditwheel confirms the wheel's tag, and the wheel is
# installed into a fresh virtual environment of every CPython from 3.9 on
# found (on PATH, or pyenv's), where `import ebb` and a write and a read
# must work: each a check of the abi3 claim.
# Usage: bash tools/wheels.sh [OUT]   (default target/dist)
# Needs: tools/deps.sh's .venv (maturin), and the network for ziglang and
# auditwheel the first time (pip, PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/dist}
bash tools/deps.sh
export VIRTUAL_ENV="$PWD/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"
python3 -m pip install --quiet --disable-pip-version-check ziglang==0.17.1 auditwheel==6.8.2
rm -rf "$out"
maturin build --release --zig --compatibility manylinux_2_28 --manifest-path crates/ebb-py/Cargo.toml --out "$out"
maturin sdist --manifest-path crates/ebb-py/Cargo.toml --out "$out"
wheel=$(ls "$out"/ebb-*-manylinux_2_28_*.whl)
# (auditwheel wraps its lines: joined before matching.)
auditwheel show "$wheel" | tr -s '\n ' '  ' | grep -q 'consistent with the following platform tag: "manylinux_2_28' ||
  { auditwheel show "$wheel"; echo "wheels: $wheel is not manylinux_2_28" >&2; exit 1; }
# One interpreter per CPython version from 3.9 on: those on PATH and
# pyenv's (whose shims may refuse to run; its binaries are called directly).
declare -A by_version=()
for python in python3 $(compgen -c python3. | grep -E '^python3\.[0-9]+$' | sort -u) \
  "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.*/bin/python3; do
  version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2] if sys.version_info >= (3, 9) else "")' \
    2>/dev/null) || continue
  [ -n "$version" ] && [ -z "${by_version[$version]:-}" ] && by_version[$version]=$python
done
checked=0
for version in $(printf '%s\n' "${!by_version[@]}" | sort -V); do
  venv=$(mktemp -d)
  "${by_version[$version]}" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --no-index --disable-pip-version-check "$wheel"
  "$venv/bin/python" -c 'import ebb, sys, tempfile
with ebb.Db(tempfile.mkdtemp() + "/db") as db:
    db[b"k"] = b"v"
    assert db[b"k"] == b"v"
print("wheels: import ebb works on Python", sys.version.split()[0])'
  rm -rf "$venv"
  checked=$((checked + 1))
done
echo "wheels: $wheel (checked on $checked Python versions) and $(ls "$out"/ebb-*.tar.gz)"
