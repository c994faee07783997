#!/usr/bin/env bash
# Installs what ebb-bench's tests, plots and tuner need beyond Rust and a C
# compiler, on Debian when missing (apt-get, as root; otherwise it says what
# to install):
# - a TrueType font for plot labels (fonts-dejavu-core; crates/ebb-bench/src/plot.rs
#   looks for DejaVu Sans or Liberation Sans, or $EBB_BENCH_FONT);
# - .venv/ at the project root (gitignored): a Python virtual environment with
#   the tuner's packages (tools/requirements.txt: optuna, numpy, ...), which
#   `ebb-bench tune` and its tests run. A virtual environment because Debian's
#   python3 refuses `pip install` into the system (PEP 668,
#   "externally-managed-environment"); Debian ships venv's pip bootstrap
#   (ensurepip) in the python3-venv package.
# Quick when all is there (.venv/ holding exactly tools/requirements.txt).
#
#   bash tools/deps.sh        then: EBB_PYTHON=.venv/bin/python3 ebb-bench tune ...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
requirements="$root/tools/requirements.txt"
stamp="$venv/requirements.installed"

have_font() {
  [ -n "${EBB_BENCH_FONT:-}" ] && return 0
  local f
  for f in /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf /usr/share/fonts/dejavu/DejaVuSans.ttf \
    /usr/share/fonts/TTF/DejaVuSans.ttf /usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf \
    /usr/share/fonts/liberation/LiberationSans-Regular.ttf; do
    [ -f "$f" ] && return 0
  done
  return 1
}

missing=()
have_font || missing+=(fonts-dejavu-core)
if ! command -v python3 >/dev/null 2>&1; then
  missing+=(python3 python3-venv)
elif ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  missing+=(python3-venv)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "deps: installing ${missing[*]} with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "deps: missing ${missing[*]}; install them (Debian: sudo apt-get install ${missing[*]}) and run this again" >&2
    exit 1
  fi
fi

if [ -x "$venv/bin/python3" ] && cmp -s "$requirements" "$stamp"; then
  exit 0
fi
# A venv left without pip (by an earlier run that lacked ensurepip) is made anew.
if [ ! -x "$venv/bin/python3" ] || ! "$venv/bin/python3" -m pip --version >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv"
fi
"$venv/bin/python3" -m pip install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"
echo "deps: $venv/bin/python3 has the packages of tools/requirements.txt" >&2
