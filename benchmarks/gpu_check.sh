#!/usr/bin/env bash
# GPU readiness in one command, on a GPU machine that has torch, transformers, peft and accelerate but no
# network, DeepSpeed or the project's other needs (the lent machines' image). Two halves:
#
#   bash benchmarks/gpu_check.sh --prepare   # here, with PyPI: .gpu/ = wheels + DeepSpeed's sdist + the
#                                            # embedded tokenizer (about 8 MiB; .gpu/ is git-ignored)
#   bash benchmarks/gpu_check.sh [gpu_check.py args]   # there, with .gpu/ carried: installs it into
#                                            # /tmp/gpu_check_site (nothing of the image changes), then
#                                            # python benchmarks/gpu_check.py ...
#
# On a GPU machine with network, `pip install -e . && python benchmarks/gpu_check.py` does the same.
set -euo pipefail
cd "$(dirname "$0")/.."
CARRY=.gpu
# what the image lacks of the trainer's path (setup.cfg), pinned to what CI runs; DeepSpeed needs no build
# (bfcl-eval: BFCL's data and checkers for task.name=bfcl / bfcl_multi_turn, without its declared deps, as
# scripts/install.sh installs it)
PACKAGES=(omegaconf==2.4.0 json_repair==0.64.6 hjson==3.1.0 pydantic==2.14.4 pydantic_core==2.50.5
          annotated-types==0.8.0 typing-inspection==0.4.5 bfcl-eval==2026.3.23)
DEEPSPEED=deepspeed==0.19.8

if [[ "${1:-}" == "--prepare" ]]; then
    python=${PYTHON:-python3}
    rm -rf "$CARRY" && mkdir -p "$CARRY/wheels" "$CARRY/tokenizer"
    "$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        -d "$CARRY/wheels" "${PACKAGES[@]}"
    "$python" -m pip download -q --no-deps --no-binary=:all: -d "$CARRY/wheels" "$DEEPSPEED"
    "$python" - "$CARRY/tokenizer" <<'EOF'
import shutil, sys
from pathlib import Path
from comlrl.models import TINY_RANDOM, resolve_model_path
src = Path(resolve_model_path(TINY_RANDOM))
for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"):
    if (src / name).is_file():
        shutil.copy(src / name, sys.argv[1])
EOF
    du -sh "$CARRY"
    exit 0
fi

if [[ -d "$CARRY/wheels" ]]; then
    site=/tmp/gpu_check_site
    python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-compile --no-cache-dir \
        --target "$site" "$CARRY"/wheels/*
    export PYTHONPATH="$site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
    export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
exec python3 benchmarks/gpu_check.py "$@"
