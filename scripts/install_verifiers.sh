#!/usr/bin/env bash
# The interpreter for task.name=verifiers (docs/verifiers.md): verifiers 0.1.14 and reasoning-gym in their own
# environment, ./.venv-verifiers. Not an extra of this project: verifiers pins datasets<4.7 and regex<2026.4.4
# (0.1.14; 0.4.0 pins openai<3), which this project's constraints.txt does not allow. The run talks to it through a
# worker process (task.verifiers.python). Safe to re-run. About a minute and 850 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv-verifiers/bin/python ] || "$PY" -m venv .venv-verifiers
.venv-verifiers/bin/pip install -q --upgrade pip
.venv-verifiers/bin/pip install -q verifiers==0.1.14 reasoning-gym==0.1.25
echo "install_verifiers.sh: task.verifiers.python=$PWD/.venv-verifiers/bin/python"
