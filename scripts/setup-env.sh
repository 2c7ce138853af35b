#!/usr/bin/env bash
# Creates .venv (if missing or stale) and installs studyctl with its test tools. Sourced by the
# other scripts; idempotent and quick when nothing changed.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=${STUDYCTL_VENV:-$ROOT/.venv}
PY=${PYTHON:-python3}

if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "studyctl needs Python >= 3.10 ($PY is $("$PY" --version 2>&1))" >&2; exit 1
fi
if [[ ! -x $VENV/bin/python ]]; then
  if ! "$PY" -m venv "$VENV" 2>/dev/null; then
    echo "python3 -m venv failed; installing python3-venv" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    "$PY" -m venv "$VENV"
  fi
fi
stamp=$VENV/.studyctl-installed
if [[ ! -f $stamp || $ROOT/pyproject.toml -nt $stamp ]]; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e "$ROOT[test]" 2>&1 | grep -v '^WARNING: Location' || true
  "$VENV/bin/python" -c 'import studyctl, worker, mpi4py, submitit' || { echo "install failed" >&2; exit 1; }
  touch "$stamp"
fi
# The checkpoint engines' torch (the `torch` extra), for the test script: its CPU build where this machine keeps one
# (a bare `torch` would fetch a CUDA build of several GB). The main job needs none.
if [[ ${STUDYCTL_WITH_TORCH:-0} == 1 ]] && ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check torch==2.13.0 2>&1 | grep -v '^WARNING: Location' || true
  "$VENV/bin/python" -c 'import torch' || { echo "installing torch failed" >&2; exit 1; }
fi
# Every point starts its ranks afresh, each importing studyctl: byte-compiled once here, not by every rank of every
# point where the environment forbids writing bytecode (PYTHONDONTWRITEBYTECODE, set in many containers: 0.3 s of
# CPU per rank here). Quick when nothing changed.
"$VENV/bin/python" -m compileall -q "$ROOT/studyctl" "$ROOT/worker" >/dev/null || true
export PATH=$VENV/bin:$PATH
