"""comlrl.console: what a run prints. Each case runs in its own interpreter, as an entry point would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str, **env: str | None) -> subprocess.CompletedProcess:
    e = dict(os.environ)
    for key, value in env.items():
        if value is None:
            e.pop(key, None)
        else:
            e[key] = value
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=e, capture_output=True, text=True, timeout=300)


def test_deepspeeds_cpu_accelerator_notice_is_not_printed_on_a_machine_without_a_gpu() -> None:
    """DeepSpeed warns on every run of a CPU machine that it picked its CPU accelerator: expected here."""
    pytest.importorskip("deepspeed")
    code = ("from comlrl.console import quiet_console; quiet_console()\n"
            "import torch; assert not torch.cuda.is_available()\n"
            "from deepspeed.accelerator import get_accelerator; print('accelerator:', get_accelerator()._name)\n"
            "import logging; logging.getLogger('DeepSpeed').warning('a real DeepSpeed warning')\n")
    res = _python(code, DS_ACCELERATOR=None)
    assert res.returncode == 0, res.stderr
    out = res.stdout + res.stderr
    assert "accelerator: cpu" in out and "Setting accelerator to CPU" not in out
    assert "a real DeepSpeed warning" in out  # every other DeepSpeed warning still shows


@pytest.mark.parametrize("rank", ["0", "1", None])
def test_info_and_warnings_of_our_loggers_come_from_rank_0_only(rank: str | None) -> None:
    """Fallbacks (sandbox isolation, vLLM -> hf) are the same on every rank: one line, not one per rank.
    Errors still come from every rank."""
    code = ("import logging\nfrom comlrl.console import quiet_console; quiet_console()\n"
            "logging.getLogger('comlrl.engines').warning('engine fell back')\n"
            "logging.getLogger('sandbox.executor').warning('weaker isolation')\n"
            "logging.getLogger('comlrl').info('resumed')\n"
            "logging.getLogger('comlrl.run.trainer').error('rank failed')\n")
    res = _python(code, RANK=rank)
    assert res.returncode == 0, res.stderr
    shown = [line.split(": ", 1)[1] for line in res.stderr.splitlines()]
    if rank == "1":
        assert shown == ["rank failed"]
    else:
        assert shown == ["engine fell back", "weaker isolation", "resumed", "rank failed"]


def test_transformers_bars_are_off_even_when_a_script_imported_it_first() -> None:
    """A CoMLRL-style script imports transformers before the run quiets the console: its save bar ("Writing model
    shards", twice a step in compatibility runs) reads the environment at import, so it is turned off directly."""
    code = ("import transformers; from transformers.utils import logging as l; assert l.is_progress_bar_enabled(); "
            "from comlrl.console import quiet_console; quiet_console(); print(l.is_progress_bar_enabled())")
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "False"
