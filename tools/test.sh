#!/usr/bin/env bash
# The README's test command, and the last step of .ci/run: what the tests need
# beyond Rust (tools/deps.sh: a font for the plot tests, .venv/ with the
# tuner's Python packages, maturin and pytest), .venv/ first on PATH so that
# the tests' `python3` is that one, then `cargo test --workspace` and the
# Python package built into .venv/ with its pytest suite; or only `cargo test`
# with the arguments given here instead (`bash tools/test.sh -p ebb-bench
# --test tune`).
set -euo pipefail
cd "$(dirname "$0")/.."

bash tools/deps.sh
export VIRTUAL_ENV="$PWD/.venv"
export PATH="$VIRTUAL_ENV/bin:$PATH"
# rustup puts cargo in ~/.cargo/bin, which a shell opened before it may not have on PATH.
if ! command -v cargo >/dev/null 2>&1 && [ -x "$HOME/.cargo/bin/cargo" ]; then
  export PATH="$PATH:$HOME/.cargo/bin"
fi
python_too=0
if [ $# -eq 0 ]; then
  set -- --workspace
  python_too=1
fi
cargo test "$@"
if [ "$python_too" = 1 ]; then
  # The Python package (crates/ebb-py, docs/python.md): built into .venv/
  # with maturin (tools/requirements.txt), then its pytest suite.
  maturin develop --quiet --manifest-path crates/ebb-py/Cargo.toml
  python3 -m pytest -q crates/ebb-py/tests
fi
