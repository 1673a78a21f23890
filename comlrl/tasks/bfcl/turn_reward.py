"""The reward record of one reply on BFCL's multi-turn environment and its dense shaping term
(`call_match`): what comlrl/tasks/bfcl/multi_turn.py scores each joint action with."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

from comlrl.tasks.bfcl.calls import Call, decode
from comlrl.tasks.bfcl.checker import Verdict


@dataclass(frozen=True)
class BfclTurnReward:
    """One joint action's reward (the `Reward` contract): the checker's verdict through this user turn."""

    total: float
    components: dict[str, float]
    verdict: Verdict | None
    passed: bool
    results: tuple[str, ...] = ()  # per agent, its calls and their results ("call -> result" lines)
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def all_passed(self) -> bool:
        return self.passed

    @property
    def scored(self) -> tuple[str, ...]:
        return self.results


@functools.lru_cache(maxsize=4096)
def gold_calls(text: str) -> tuple[Call, ...]:
    """A ground-truth call string decoded once (every joint action of its turn is credited against it)."""
    return decode(text).calls


def call_match(gold: Sequence[str], calls: Sequence[Call]) -> float:
    """Mean over the gold calls of (1 + arguments equal) / (1 + gold arguments) for a decoded call of the same
    name, each call matched at most once, the best-crediting pairs first (0 for a turn without gold calls)."""
    wanted = [gold_calls(text) for text in gold]
    if not wanted:
        return 0.0
    pairs = []
    for i, parsed in enumerate(wanted):
        if len(parsed) != 1:
            continue  # a gold string that does not decode as one call earns nothing
        g = parsed[0]
        for j, c in enumerate(calls):
            if c.name == g.name:
                equal = sum(k in c.args and c.args[k] == v for k, v in g.args.items())
                pairs.append(((1 + equal) / (1 + len(g.args)), i, j))
    used_gold: set[int] = set()
    used_calls: set[int] = set()
    total = 0.0
    for credit, i, j in sorted(pairs, reverse=True):
        if i not in used_gold and j not in used_calls:
            used_gold.add(i)
            used_calls.add(j)
            total += credit
    return total / len(wanted)


def lines(pairs: Sequence[tuple[str, str]]) -> str:
    return "\n".join(f"{call} -> {result[:200]}" for call, result in pairs)
