"""Shared helpers of the trainer tests: run the trainer as a user would, read its outputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENTRY = Path(__file__).with_name("bonus_entry.py")
VENV_BIN = Path(sys.executable).parent

TINY = [
    "model.name=tiny-random", "model.max_new_tokens=12", "dataset.eval_size=2", "training.torch_threads=1",
    "logging.progress_bar=false", "external.mode=plain",
    "rollout.engine=hf",  # the reference engine; the vllm engine has its own tests (tests/engines)
    "training.trees_per_step=1",  # one tree per step: the node and joint-action counts the tests assert
]


def env() -> dict[str, str]:
    e = dict(os.environ)
    e.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    return e


def train(args: list[str], launcher: list[str] | None = None, timeout: int = 900,
          extra_env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess:
    cmd = (launcher or [sys.executable]) + [str(ENTRY)] + args
    e = env()
    for key, value in (extra_env or {}).items():  # None removes the variable
        if value is None:
            e.pop(key, None)
        else:
            e[key] = value
    return subprocess.run(cmd, cwd=ROOT, env=e, capture_output=True, text=True, timeout=timeout)


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
