"""Preference pairs from a file, for DPO without a rollout: the records `scripts/export.py --pairs` writes.

Each line: `{"prompt": [chat messages], "chosen": [{"role": "assistant", "content": ...}], "rejected": [...],
"meta": {"agent": i, ...}}` (the conversational preference format; `meta.agent` is the agent that trains
on it, 0 when absent). A bad line is a one-line error naming the setting, the file, the line and the field.

A joint pair (marlhf's reward heads learn from them: `algorithm.marlhf.pairs_file`) is the lines of one node's
two joint actions, one per agent: `meta.node` with `meta.chosen_joint`/`rejected_joint` (what `comlrl-export
--pairs` writes) or `chosen_index`/`rejected_index` with `meta.joint` (a run's pairs.jsonl); a line without
them, or marked `"joint": false` (one agent's siblings), is a pair of its own.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path

from comlrl.errors import ConfigError

KEY = "algorithm.dpo.offline_pairs"


@dataclass(frozen=True)
class PairRecord:
    agent: int
    prompt: list[dict[str, str]]
    chosen: str
    rejected: str
    group: tuple | None = None  # the joint pair this line is one agent's side of (None: a pair of its own)


def joint_group(meta: dict) -> tuple | None:
    """Which joint pair a line belongs to, from its meta (see the module), or None."""
    chosen = meta.get("chosen_joint", meta.get("chosen_index"))
    rejected = meta.get("rejected_joint", meta.get("rejected_index"))
    if meta.get("node") is None or chosen is None or rejected is None or meta.get("joint") is False:
        return None
    return (meta.get("step"), meta.get("tree"), meta.get("rank"), meta.get("node"), chosen, rejected)


def joint_pairs(records: list[PairRecord]) -> list[list[PairRecord]]:
    """The records grouped into joint pairs, in order of their first line."""
    out: list[list[PairRecord]] = []
    index: dict[tuple, int] = {}
    for r in records:
        if r.group is not None and r.group in index:
            out[index[r.group]].append(r)
            continue
        if r.group is not None:
            index[r.group] = len(out)
        out.append([r])
    return out


def _answer(value: object, where: str, field: str, key: str) -> str:
    if isinstance(value, str):
        return value
    if (isinstance(value, list) and value and isinstance(value[-1], dict)
            and isinstance(value[-1].get("content"), str)):
        return value[-1]["content"]
    raise ConfigError(f"config error: {key}: {where}: {field!r} must be a string or a list of messages ending "
                      "in one with a string 'content'")


def parse_pair(line: str, where: str, num_agents: int, key: str = KEY) -> PairRecord:
    """One record of the file; `where` is `file:line` and `key` the setting that named it, for the error."""
    try:
        rec = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"config error: {key}: {where}: not JSON ({exc.msg})") from None
    if not isinstance(rec, dict):
        raise ConfigError(f"config error: {key}: {where}: a record must be a JSON object")
    prompt = rec.get("prompt")
    if not (isinstance(prompt, list) and prompt and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
            for m in prompt)):
        raise ConfigError(f"config error: {key}: {where}: 'prompt' must be a non-empty list of messages "
                          "with string 'role' and 'content'")
    meta = rec.get("meta") if isinstance(rec.get("meta"), dict) else {}
    agent = meta.get("agent", 0)
    if not (isinstance(agent, int) and 0 <= agent < num_agents):
        raise ConfigError(f"config error: {key}: {where}: meta.agent={agent!r} is not an agent of this run "
                          f"(0..{num_agents - 1})")
    chosen = _answer(rec.get("chosen"), where, "chosen", key)
    rejected = _answer(rec.get("rejected"), where, "rejected", key)
    return PairRecord(agent, [{"role": m["role"], "content": m["content"]} for m in prompt], chosen, rejected,
                      joint_group(meta))


def read_pairs(path: str | Path, num_agents: int, key: str = KEY) -> list[PairRecord]:
    """Every pair of the file, in order; a missing, empty or malformed file is a one-line ConfigError."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config error: {key}: file {str(p)!r} does not exist")
    pairs = [parse_pair(line, f"{p}:{i}", num_agents, key)
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1) if line.strip()]
    if not pairs:
        raise ConfigError(f"config error: {key}: {p} holds no pairs")
    return pairs


def step_slice(count: int, steps: int, step: int, seed: int) -> list[int]:
    """Indices of the pairs step `step` (0-based) trains on: one seeded shuffle of all pairs, cut into
    `steps` near-equal consecutive parts, so a run of `steps` steps makes one pass over the file."""
    order = list(range(count))
    random.Random(seed).shuffle(order)
    lo, hi = count * step // steps, count * (step + 1) // steps
    return order[lo:hi]
