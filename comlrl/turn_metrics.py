"""Per-turn sums and means of a batch of trees: rewards, pass rates and the task's outcome counts.

Sums carry the same keys on every rank (whatever its trees hold) so they can be reduced over ranks;
means are taken once, after the reduction.
"""

from __future__ import annotations

from comlrl.contracts import Task
from comlrl.tree import Node


def turn_sums(roots: list[Node], num_turns: int, task: Task | None = None) -> dict[str, float]:
    """Per-turn sums of rewards, joint actions, passes and the task's outcome counts (the same keys on
    every rank, whatever its trees hold, so they can be summed over ranks)."""
    sums: dict[str, float] = {}
    for t in range(1, num_turns + 1):
        sums[f"turn_{t}/reward_sum"] = 0.0
        sums[f"turn_{t}/count"] = 0.0
        sums[f"turn_{t}/passed"] = 0.0
        for name in task.count_names if task is not None else ():
            sums[f"turn_{t}/{name}"] = 0.0
    for root in roots:
        for node in root.walk():
            sums[f"turn_{node.turn}/reward_sum"] += sum(node.rewards)
            sums[f"turn_{node.turn}/count"] += len(node.rewards)
            sums[f"turn_{node.turn}/passed"] += sum(bool(d.all_passed) for d in node.details)
            for d in node.details if task is not None else ():
                for name, value in task.counts(d).items():
                    sums[f"turn_{node.turn}/{name}"] += float(value)
    return sums


def turn_means(sums: dict[str, float], num_turns: int, prefix: str = "") -> dict[str, float]:
    """Means per turn and over all turns; a task's outcome counts become rates per joint action."""
    out: dict[str, float] = {}
    total_r = total_n = 0.0
    extra: dict[str, float] = {}
    for t in range(1, num_turns + 1):
        n = sums[f"turn_{t}/count"]
        total_r += sums[f"turn_{t}/reward_sum"]
        total_n += n
        out[f"{prefix}turn_{t}/reward_mean"] = sums[f"turn_{t}/reward_sum"] / n if n else float("nan")
        out[f"{prefix}turn_{t}/pass_rate"] = sums[f"turn_{t}/passed"] / n if n else float("nan")
        for key, value in sums.items():
            head, _, name = key.partition("/")
            if head == f"turn_{t}" and name not in ("reward_sum", "count", "passed"):
                out[f"{prefix}{key}"] = value / n if n else float("nan")
                extra[name] = extra.get(name, 0.0) + value
    out[f"{prefix}reward_mean"] = total_r / total_n if total_n else float("nan")
    for name, value in extra.items():
        out[f"{prefix}{name}"] = value / total_n if total_n else float("nan")
    return out
