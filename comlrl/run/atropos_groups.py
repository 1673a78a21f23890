"""Atropos's scored groups as the update's training units (pure: no torch, no HTTP).

An Atropos environment sends a `ScoredDataGroup` per item: G sequences (`tokens`, the prompt and the
completion together), `masks` (-100 where nothing is trained, else the token itself), one score per
sequence, and optionally per-token `advantages` and `inference_logprobs` (aligned with `tokens`, 1.0 at
masked positions). A group is a sibling group: its advantages come from its scores by the run's estimator
(`magrpo.advantage.*`, exactly as for a node of the tree), unless the group sends its own.

A sequence whose mask trains several separate spans (a multi-step tool trajectory: the tool responses
between the assistant turns are masked) becomes one sample per span, each with every token before it as
its prompt: the log-probs of the trained tokens are the same as in one pass over the sequence.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from comlrl.learn.advantages import AdvantageStats, group_advantages
from comlrl.learn.units import Unit
from comlrl.tree.nodes import Sample

MASKED = -100  # Atropos's (and Hugging Face's) label for a token that is not trained


class MalformedGroup(ValueError):
    """A group the trainer cannot train on; `kind` names the defect (one warning per kind per run)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


@dataclass(frozen=True)
class Estimator:
    """How a group's scores become advantages (the run's `magrpo.advantage` settings)."""

    baseline: str = "mean"
    scale: str = "group"
    eps: float = 1e-6


@dataclass
class BatchUnits:
    """What a batch of groups became: units to train, and the counts the step reports."""

    units: list[Unit] = field(default_factory=list)
    groups: AdvantageStats = field(default_factory=AdvantageStats)  # groups with and without a signal
    sequences: int = 0
    scores: list[float] = field(default_factory=list)
    malformed: dict[str, int] = field(default_factory=dict)  # kind -> groups skipped
    own_advantages: int = 0  # groups that sent their own advantages
    with_logprobs: int = 0  # samples whose inference log-probs give importance weights


def trained_spans(mask: Sequence[int]) -> list[tuple[int, int]]:
    """[start, end) of each run of trained positions; position 0 is never trained (nothing predicts it)."""
    spans: list[tuple[int, int]] = []
    start = None
    for i, m in enumerate(mask):
        trained = m != MASKED and i > 0
        if trained and start is None:
            start = i
        elif not trained and start is not None:
            spans.append((start, i))
            start = None
    if start is not None:
        spans.append((start, len(mask)))
    return spans


def _ints(row: Any, what: str) -> list[int]:
    if not isinstance(row, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in row):
        raise MalformedGroup(f"{what} not integers", f"a row of `{what}` is not a list of integers")
    return row


def _checked(group: Any, max_len: int) -> tuple[list[list[int]], list[list[int]], list[float]]:
    """tokens, masks and scores of a well-formed group, else MalformedGroup naming the defect."""
    if not isinstance(group, dict):
        raise MalformedGroup("not an object", f"a group is a {type(group).__name__}")
    missing = [k for k in ("tokens", "masks", "scores") if not isinstance(group.get(k), list)]
    if missing:
        raise MalformedGroup("missing field", f"no list in {', '.join(missing)}")
    tokens = [_ints(r, "tokens") for r in group["tokens"]]
    masks = [_ints(r, "masks") for r in group["masks"]]
    scores = group["scores"]
    if not (len(tokens) == len(masks) == len(scores)) or not tokens:
        raise MalformedGroup("length mismatch", f"{len(tokens)} token rows, {len(masks)} masks, {len(scores)} scores")
    if not all(isinstance(s, int | float) and not isinstance(s, bool) and math.isfinite(s) for s in scores):
        raise MalformedGroup("bad score", f"scores {scores!r} are not all finite numbers")
    for t, m in zip(tokens, masks, strict=True):
        if len(t) != len(m):
            raise MalformedGroup("mask length", f"a sequence of {len(t)} tokens has a mask of {len(m)}")
        if any(x != MASKED and x != y for x, y in zip(m, t, strict=True)):
            raise MalformedGroup("mask not tokens", "a trained mask position differs from its token")
        if not trained_spans(m):
            raise MalformedGroup("nothing trained", "a sequence has no trained token")
        if max_len > 0 and len(t) > max_len:
            raise MalformedGroup("too long", f"a sequence of {len(t)} tokens (rollout.atropos.max_token_len={max_len})")
    return tokens, masks, [float(s) for s in scores]


def _per_token(group: dict, key: str, tokens: list[list[int]]) -> list[list[float]] | None:
    rows = group.get(key)
    if rows is None or rows == []:
        return None
    if (not isinstance(rows, list) or len(rows) != len(tokens)
            or any(not isinstance(r, list) or len(r) != len(t) for r, t in zip(rows, tokens, strict=False))):
        raise MalformedGroup(f"{key} shape", f"`{key}` is not one value per token of every sequence")
    if not all(isinstance(x, int | float) and math.isfinite(x) for r in rows for x in r):
        raise MalformedGroup(f"{key} shape", f"`{key}` holds a value that is not a finite number")
    return [[float(x) for x in r] for r in rows]


def group_units(group: Any, agent: int, estimator: Estimator, max_len: int = 0) -> tuple[list[Unit], bool, bool]:
    """The units of one group (one per trained span), whether it carried a signal, and whether it sent its
    own advantages. A group whose scores tie (and sent no advantages) has no signal: no units, as for a
    tied sibling group of the tree. MalformedGroup for a group the trainer cannot read."""
    tokens, masks, scores = _checked(group, max_len)
    own = _per_token(group, "advantages", tokens)
    logprobs = _per_token(group, "inference_logprobs", tokens)
    if own is None:
        advantages = group_advantages(scores, estimator.baseline, estimator.scale, estimator.eps) \
            if len(scores) > 1 else None
        if advantages is None:
            return [], False, False
    units = []
    for i, (t, m) in enumerate(zip(tokens, masks, strict=True)):
        for start, end in trained_spans(m):
            lp = None
            if logprobs is not None and all(x <= 0.0 for x in logprobs[i][start:end]):  # 1.0: no log-prob there
                lp = tuple(logprobs[i][start:end])
            adv = sum(own[i][start:end]) / (end - start) if own is not None else advantages[i]
            sample = Sample(agent=agent, prompt_ids=tuple(t[:start]), completion_ids=tuple(t[start:end]), text="",
                            finished=True, logprobs=lp)
            units.append(Unit((sample,), (float(adv),)))
    return units, True, own is not None


def batch_units(batch: Sequence[Any], agent_of_env: dict[int, int] | int, estimator: Estimator,
                max_len: int = 0) -> BatchUnits:
    """Every group of a batch as units; malformed ones skipped and counted by kind. `agent_of_env`: the agent
    every group trains (an int), or env_id -> agent (several agents: one environment each)."""
    out = BatchUnits()
    for group in batch:
        try:
            agent = _agent(group, agent_of_env)
            units, signal, own = group_units(group, agent, estimator, max_len)
        except MalformedGroup as exc:
            out.malformed[exc.kind] = out.malformed.get(exc.kind, 0) + 1
            continue
        out.groups.groups += 1
        out.groups.skipped += not signal
        out.own_advantages += own
        out.sequences += len(group["tokens"])
        out.scores.extend(float(s) for s in group["scores"])
        out.units.extend(units)
        out.with_logprobs += sum(1 for u in units if u.samples[0].logprobs is not None)
    return out


def _agent(group: Any, agent_of_env: dict[int, int] | int) -> int:
    if isinstance(agent_of_env, int):
        return agent_of_env
    env_id = group.get("env_id") if isinstance(group, dict) else None
    if env_id not in agent_of_env:
        raise MalformedGroup("unknown env_id", f"env_id {env_id!r} trains no agent (agents: {sorted(agent_of_env)})")
    return agent_of_env[env_id]
