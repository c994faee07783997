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
  # The Python package (crates/ebb-py, docs/python.md): a wheel built with
  # maturin (tools/requirements.txt; an unoptimised build, quick), installed
  # with pip into a fresh virtual environment, where `import ebb` must work,
  # and into .venv/, where its pytest suite runs.
  rm -rf target/wheels target/wheel-venv
  maturin build --quiet --profile dev --manifest-path crates/ebb-py/Cargo.toml --out target/wheels
  python3 -m venv target/wheel-venv
  target/wheel-venv/bin/python3 -m pip install --quiet --no-index --disable-pip-version-check target/wheels/ebb-*.whl
  target/wheel-venv/bin/python3 -c 'import ebb, tempfile
with ebb.Db(tempfile.mkdtemp() + "/db") as db:
    db[b"k"] = b"v"
    assert db[b"k"] == b"v"
print("wheel: import ebb works in a fresh virtual environment")'
  python3 -m pip install --quiet --force-reinstall --no-deps --disable-pip-version-check target/wheels/ebb-*.whl
  python3 -m pytest -q crates/ebb-py/tests
fi
