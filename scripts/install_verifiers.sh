#!/usr/bin/env bash
# The interpreter for task.name=verifiers (docs/verifiers.md): verifiers 0.3.0 and reasoning-gym in their own
# environment, ./.venv-verifiers: verifiers' mcp<2 would move this project's mcp back and break OpenEnv's client
# (docs/verifiers.md). The run talks to it through a worker process (task.verifiers.python). Safe to re-run.
# About a minute and 870 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv-verifiers/bin/python ] || "$PY" -m venv .venv-verifiers
.venv-verifiers/bin/pip install -q --upgrade pip
.venv-verifiers/bin/pip install -q verifiers==0.3.0 reasoning-gym==0.1.25
echo "install_verifiers.sh: task.verifiers.python=$PWD/.venv-verifiers/bin/python"
