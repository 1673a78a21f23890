"""Reward functions written as TRL users write them, imported by name (`task.reward_funcs: [reward_fns:...]`).

`distinct_chars` is the tests' signal on tiny-random: the random model never writes working code, so the
task's own reward ties every sibling; distinct characters differ between samples, so advantages exist and
the update really runs (issue 24, defect 7).
"""

from __future__ import annotations

import math
from typing import Any

CALLS: list[dict[str, Any]] = []  # what `record` was called with, for the tests that read it back


def _text(completion: Any) -> str:
    return completion if isinstance(completion, str) else completion[0]["content"]


def distinct_chars(completions: list, **kwargs: Any) -> list[float]:
    return [len(set(_text(c))) / 100.0 for c in completions]


def length(prompts: list, completions: list, **kwargs: Any) -> list[float]:
    return [len(_text(c)) / 100.0 for c in completions]


def contains_answer(completions: list, answer: list, **kwargs: Any) -> list[float]:
    return [1.0 if str(a) in _text(c) else 0.0 for c, a in zip(completions, answer, strict=True)]


def record(prompts: list, completions: list, **kwargs: Any) -> list[float]:
    CALLS.append({"prompts": prompts, "completions": completions, **kwargs})
    return [float(i) for i in range(len(completions))]


def main_only(completions: list, agent: list, **kwargs: Any) -> list[float | None]:
    return [1.0 if a == 1 else None for a in agent]


def never(completions: list, **kwargs: Any) -> list[None]:
    return [None] * len(completions)


def raises(completions: list, **kwargs: Any) -> list[float]:
    raise KeyError("answer")


_CALLS = {"raises_later": 0}


def raises_later(completions: list, **kwargs: Any) -> list[float]:
    """Scores its first two calls in a process, then raises (a run that fails after its first step)."""
    _CALLS["raises_later"] += 1
    if _CALLS["raises_later"] > 2:
        raise KeyError("answer")
    return [0.0] * len(completions)


def too_short(completions: list, **kwargs: Any) -> list[float]:
    return [0.0] * (len(completions) - 1)


def not_a_number(completions: list, **kwargs: Any) -> list[Any]:
    return ["high"] * len(completions)


def nan(completions: list, **kwargs: Any) -> list[float]:
    return [math.nan] * len(completions)


class Scorer:
    @staticmethod
    def length(completions: list, **kwargs: Any) -> list[float]:
        return [1.0] * len(completions)


def as_numpy(completions: list, **kwargs: Any) -> Any:
    import numpy as np

    return np.array([len(_text(c)) for c in completions], dtype=np.float32) / 100.0


def as_tensor(completions: list, **kwargs: Any) -> Any:
    import torch

    return torch.tensor([len(_text(c)) / 100.0 for c in completions])


def tensor_items(completions: list, **kwargs: Any) -> list[Any]:
    import numpy as np
    import torch

    return [torch.tensor(1.0), np.float32(2.0), np.int64(3)][: len(completions)]


def two_d(completions: list, **kwargs: Any) -> Any:
    import numpy as np

    return np.ones((len(completions), 2))
