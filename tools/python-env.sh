#!/usr/bin/env bash
# Makes .venv/ at the project root (gitignored): a Python virtual environment
# holding the tuner's packages (tools/requirements.txt: optuna, numpy, ...),
# which `ebb-bench tune` and its tests (crates/ebb-bench/tests/tune.rs) run.
# A virtual environment because Debian's python3 refuses `pip install` into
# the system (PEP 668, "externally-managed-environment"). Debian ships venv's
# pip bootstrap (ensurepip) in the python3-venv package: installed here with
# apt-get when missing and running as root. Does nothing when .venv/ already
# holds exactly tools/requirements.txt.
#
#   bash tools/python-env.sh        then: .venv/bin/python3, or EBB_PYTHON=.venv/bin/python3
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
requirements="$root/tools/requirements.txt"
stamp="$venv/requirements.installed"

if [ -x "$venv/bin/python3" ] && cmp -s "$requirements" "$stamp"; then
  exit 0
fi

apt_install() {
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "python-env: installing $* with apt-get" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq "$@" >/dev/null
  else
    echo "python-env: $1 is missing; install it (Debian: sudo apt-get install $*) and run this again" >&2
    exit 1
  fi
}

if ! command -v python3 >/dev/null 2>&1; then
  apt_install python3 python3-venv
fi
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  apt_install python3-venv
fi
# A venv left without pip (by an earlier run that lacked ensurepip) is made anew.
if [ ! -x "$venv/bin/python3" ] || ! "$venv/bin/python3" -m pip --version >/dev/null 2>&1; then
  rm -rf "$venv"
  python3 -m venv "$venv"
fi
"$venv/bin/python3" -m pip install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"
echo "python-env: $venv/bin/python3 has the packages of tools/requirements.txt" >&2
