"""Which training problems a step expands: a stateless, seeded draw (so resume needs no sampler state), and
the probe an evaluation tracks, which is the first distinct problems those draws will visit. Pure."""

from __future__ import annotations

import random


def step_problems(n_problems: int, step: int, per_rank: int, rank: int, world: int, seed: int) -> list[int]:
    """Problem indices this rank expands at `step`: a stateless, seeded draw, so resume needs no sampler state."""
    rng = random.Random(seed * 1_000_003 + step)
    need = per_rank * world
    order: list[int] = []
    while len(order) < need:
        block = list(range(n_problems))
        rng.shuffle(block)
        order.extend(block)
    return order[rank * per_rank : (rank + 1) * per_rank]


def probe_indices(n_problems: int, steps: int, per_rank: int, world: int, seed: int, cap: int) -> list[int]:
    """The first `cap` distinct problems the run's steps will draw (all ranks, step order): known before
    training starts, so the untrained policy can be scored on exactly the problems it will train on."""
    out: list[int] = []
    seen: set[int] = set()
    for step in range(steps):
        for rank in range(world):
            for i in step_problems(n_problems, step, per_rank, rank, world, seed):
                if i not in seen and len(out) < cap:
                    seen.add(i)
                    out.append(i)
        if len(out) >= cap:
            break
    return out
