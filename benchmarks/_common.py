"""What the benchmark scripts share: environment, machine description, JSON output."""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def setup(threads: int = 1) -> None:
    """Offline, quiet, `threads` torch threads (1 by default: the machine is shared, see docs/results.md)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TQDM_DISABLE", "1")
    import logging

    import torch

    torch.set_num_threads(threads)
    logging.getLogger("transformers").setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:
        pass


def machine(threads: int) -> dict:
    import torch
    import transformers

    info = {
        "cpus": os.cpu_count(), "torch_threads": threads, "python": platform.python_version(),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "date": time.strftime("%Y-%m-%d %H:%M"), "load_average_at_start": os.getloadavg(),
    }
    try:
        import peft

        info["peft"] = peft.__version__
    except ImportError:
        pass
    return info


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def write(name: str, data: dict, out: str | None = None) -> Path:
    data.setdefault("load_average_at_end", os.getloadavg())
    path = Path(out) if out else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"\nwrote {path}")
    return path


def command(script: str) -> str:
    return f"python benchmarks/{script} " + " ".join(sys.argv[1:])


TIE_BREAK = 1e-4  # reward per completion character


class TieBreakTask:
    """A comlrl task whose reward gets TIE_BREAK x (total completion length) added.

    comlrl skips a sibling group whose rewards are all equal (no signal, no loss); a benchmark of step time
    or memory should train on every completion, so ties are broken by a negligible length term.
    """

    def __init__(self, task) -> None:
        self._task = task

    def __getattr__(self, name):
        return getattr(self._task, name)

    @property
    def __class__(self):
        """The wrapped task's class, so that `isinstance` sees the opt-in protocols it implements
        (comlrl.tree.contracts: the rollout asks `isinstance(task, Prompting)` before `answer_prefix`)."""
        return type(self._task)

    def score(self, items):
        out = self._task.score(items)
        return [dataclasses.replace(r, total=r.total + TIE_BREAK * sum(len(t) for t in texts))
                for r, (_, texts) in zip(out, items, strict=True)]

    def score_joint(self, turns):
        """What the trainer calls (comlrl.tree.contracts.Task.score_joint): the wrapped task's rewards, tie-broken.
        Overriding `score` alone is not enough: the wrapped task's own `score_joint` would never reach it."""
        return [(dataclasses.replace(r, total=r.total + TIE_BREAK * sum(len(t) for t in turn.texts)), state)
                for (r, state), turn in zip(self._task.score_joint(turns), turns, strict=True)]
