"""A rollout engine that replies from a fixed cycle of texts: the stand-in for the model in tests whose subject is
an environment (a real TextArena game, a real OpenEnv server), not the policy."""

from __future__ import annotations

import itertools

from comlrl.tree.nodes import Sample


class Scripted:
    """Each requested sample takes the next text of `texts`, cycling."""

    def __init__(self, texts):
        self.texts = itertools.cycle(texts)

    def generate(self, requests, n, greedy=False):
        sizes = [n] * len(requests) if isinstance(n, int) else n
        return [[Sample(a, (), (1,), next(self.texts), True) for _ in range(k)]
                for (a, _), k in zip(requests, sizes, strict=True)]
