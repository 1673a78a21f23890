"""Preference rounds (pure): which earlier rounds' pairs a step trains on beside its own, and how many of each.

madpo and marlhf are online: every step samples with the current policy, labels pairs of its siblings (the
comparator) and trains on them; each step is one round of CoMLRL's iterative trainers. Pairs of every round
are kept (the run folder's pairs.jsonl), and a replay mode adds earlier rounds' pairs to the step's own:

- `current`: none (each step trains on its own pairs only: the online algorithm as it always was);
- `nearest_k`: the `k` rounds just before this one, each pair alike;
- `all`: every earlier round, each pair alike;
- `decay`: every earlier round, a pair of round r weighted lambda^(t - r) at round t.

`replay_quota` splits the replayed pairs (`replay_size`, at most every eligible pair) over the rounds in
proportion to weight x pairs held, so that a pair's chance of replay is proportional to its round's weight;
a round holds at most its own pairs, and what it cannot take goes to the others.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from comlrl.errors import require
from comlrl.tree.budget import allocate

REPLAY_MODES = ("current", "nearest_k", "all", "decay")
JUDGES = ("task", "policy", "checkpoint")  # and llm:<provider spec> (comlrl.llm.spec)


@dataclass
class PreferenceRounds:
    """The comparator that labels a step's pairs and the replay of earlier rounds' pairs (madpo, marlhf)."""

    # pairs per node (madpo: per node and agent) that train: the largest task-return gaps first, or the first
    # candidates a comparator is asked about; null = every pair
    pairs_per_node: int | None = 2
    # task: the task's returns rank siblings (the default); policy: the current policy judges each pair;
    # checkpoint: the policy the run started from judges; llm:<spec>: a chat model judges (any comlrl.llm spec)
    comparator: str = "task"
    replay: str = "current"  # current | nearest_k | all | decay (comlrl.learn.replay)
    replay_k: int = 2  # nearest_k: how many rounds before this one
    replay_lambda: float = 0.5  # decay: a pair of round r weighs replay_lambda ** (t - r) at round t
    replay_size: int | None = None  # earlier rounds' pairs per step; null = as many as the step's own pairs

    def check_rounds(self, section: str) -> None:
        require(self.pairs_per_node is None or self.pairs_per_node >= 1, f"{section}.pairs_per_node",
                self.pairs_per_node, "an integer >= 1 or null (every pair)")
        require(self.comparator in JUDGES or (self.comparator.startswith("llm:") and len(self.comparator) > 4),
                f"{section}.comparator", self.comparator,
                "task, policy, checkpoint or llm:<provider:model> (e.g. llm:openai:gpt-4o-mini)")
        require(self.replay in REPLAY_MODES, f"{section}.replay", self.replay, " | ".join(REPLAY_MODES))
        require(self.replay_k >= 1, f"{section}.replay_k", self.replay_k, "an integer >= 1")
        require(0.0 < self.replay_lambda <= 1.0, f"{section}.replay_lambda", self.replay_lambda, "a number in (0, 1]")
        require(self.replay_size is None or self.replay_size >= 1, f"{section}.replay_size", self.replay_size,
                "an integer >= 1 or null (as many as the step's own pairs)")


def round_weights(mode: str, rounds: list[int], current: int, k: int = 2, lam: float = 0.5) -> dict[int, float]:
    """Each earlier round's weight at round `current` (rounds >= current are not earlier: left out)."""
    if mode not in REPLAY_MODES:
        raise ValueError(f"replay mode {mode!r}; expected one of {REPLAY_MODES}")
    earlier = sorted(r for r in rounds if r < current)
    if mode == "current":
        return {}
    if mode == "nearest_k":
        return {r: 1.0 for r in earlier if r >= current - k}
    if mode == "all":
        return {r: 1.0 for r in earlier}
    return {r: lam ** (current - r) for r in earlier}


def replay_quota(counts: Mapping[int, int], weights: Mapping[int, float], size: int) -> dict[int, int]:
    """Pairs to replay from each round: min(size, every eligible pair) split in proportion to weight x count,
    each round capped at its count (water-filling), then rounded by largest remainder (ties: newer round)."""
    return allocate(counts, weights, size, newer_first=True)


def replay_draw(quota: Mapping[int, int], counts: Mapping[int, int], rng: random.Random) -> list[tuple[int, int]]:
    """(round, index in that round) of each replayed pair: a uniform draw without replacement within each
    round, rounds in order."""
    return [(r, i) for r in sorted(quota) for i in sorted(rng.sample(range(counts[r]), quota[r]))]
