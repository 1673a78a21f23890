"""The one record type of `trees.jsonl`: one line per tree node, written by the trainer, read by export and viz.

A line is `NodeRecord.to_json()`; the per-joint-action lists (`joint_actions`, `rewards`, `returns`,
`reward_details`, `children`) are parallel, and `NodeRecord.actions` gives them as `JointActionRecord`s.
`reward_details[j]` is a `RewardRecord`: what the `Reward` contract (comlrl/tree/contracts.py) declares about
joint action j, minus its total (that is `rewards[j]`) and the scored code (the completions hold it).

Schema versions: 1 is the unmarked line written before this type existed, whose reward details held test
counts and helper flags but no pass verdict; version 2 (`"schema": 2` first) records `all_passed` and
`notes`. Both load; a version-1 detail gets the verdict export gave it (`success` component, else every
test passed). `problem` (the id of the problem the node's tree is about, `Task.problem_id`) came later within
version 2: a line without it loads with None, and a reader that predates it ignores it. Lines written by the
removed tree switches (docs/results.md#what-did-not-work) may carry `redraws`, `first_draw` or `branches`:
they load, those keys ignored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from comlrl.tree.contracts import Reward
from comlrl.tree.nodes import Node, Sample

SCHEMA_VERSION = 2
Message = dict[str, str]


class RecordError(ValueError):
    """A trees.jsonl line that is not a node record; the message is one line naming the field."""


def _need(ok: bool, field: str, expected: str) -> None:
    if not ok:
        raise RecordError(f"field {field!r}: expected {expected}")


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _nums(v: Any, field: str) -> list[float]:
    _need(isinstance(v, list) and all(_is_num(x) for x in v), field, "a list of numbers")
    return v


@dataclass(frozen=True)
class RewardRecord:
    """What trees.jsonl keeps of one joint action's `Reward`."""

    components: dict[str, float]
    all_passed: bool
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, reward: Reward) -> RewardRecord:
        return cls(dict(reward.components), bool(reward.all_passed), tuple(reward.notes))

    def to_json(self) -> dict[str, Any]:
        return {"components": self.components, "all_passed": self.all_passed, "notes": list(self.notes)}

    @classmethod
    def from_json(cls, data: Any, version: int, field: str = "reward_details") -> RewardRecord | None:
        if data is None:
            return None
        _need(isinstance(data, dict), field, "an object or null")
        comps = data.get("components") or {}
        _need(isinstance(comps, dict) and all(_is_num(v) for v in comps.values()), f"{field}.components",
              "an object of numbers")
        if version == 1:
            return cls(comps, _v1_passed(comps, data.get("tests_passed"), data.get("tests_total")))
        passed, notes = data.get("all_passed"), data.get("notes")
        _need(isinstance(passed, bool), f"{field}.all_passed", "true or false")
        _need(isinstance(notes, list) and all(isinstance(n, str) for n in notes), f"{field}.notes",
              "a list of strings")
        return cls(comps, passed, tuple(notes))


def _v1_passed(components: Mapping[str, float], passed: Any, total: Any) -> bool:
    """The verdict version-1 readers derived: a `success` component of 1, else every test passed."""
    if "success" in components:
        return float(components["success"] or 0) >= 1.0
    return bool(total) and passed == total


@dataclass(frozen=True)
class JointActionRecord:
    """Joint action `index` of a node: one completion per agent, its reward, return, details and child."""

    index: int
    choice: tuple[int, ...]  # per agent, the index of the completion it used
    texts: tuple[str, ...]  # per agent, that completion
    reward: float
    ret: float | None  # None where the node has no returns (never backed up)
    detail: RewardRecord | None
    child: str | None  # the node this joint action continues into (None: a leaf)


@dataclass(frozen=True)
class NodeRecord:
    """One line of trees.jsonl: one node of one tree of one training step, ids unique per step and rank."""

    step: int
    id: str
    parent: str | None
    parent_action: int | None
    turn: int
    tree: str
    prompts: list[list[Message]]  # per agent: its chat prompt
    completions: list[list[str]]  # [agent][g]
    joint_actions: list[list[int]]  # per joint action: the completion index of each agent
    rewards: list[float]  # immediate reward per joint action
    returns: list[float]  # per joint action ([] if never backed up)
    advantages: list[list[float] | None]  # [agent][g], None = no signal
    reward_details: list[RewardRecord | None]  # per joint action
    pruned: bool  # stopped early by the threshold
    children: dict[int, str]  # joint-action index -> child node id
    problem: str | None = None  # the id of the problem the tree is about (`Task.problem_id`); None: not known

    @property
    def actions(self) -> tuple[JointActionRecord, ...]:
        out = []
        for j, choice in enumerate(self.joint_actions):
            out.append(JointActionRecord(
                j, tuple(choice), tuple(self.completions[a][k] for a, k in enumerate(choice)), self.rewards[j],
                self.returns[j] if self.returns else None,
                self.reward_details[j] if self.reward_details else None, self.children.get(j)))
        return tuple(out)

    @property
    def num_agents(self) -> int:
        return len(self.prompts)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA_VERSION, "step": self.step, "id": self.id, "parent": self.parent,
            "parent_action": self.parent_action, "turn": self.turn, "tree": self.tree, "problem": self.problem,
            "prompts": self.prompts, "completions": self.completions, "joint_actions": self.joint_actions,
            "rewards": self.rewards, "returns": self.returns, "advantages": self.advantages,
            "reward_details": [None if d is None else d.to_json() for d in self.reward_details],
            "pruned": self.pruned, "children": {str(j): c for j, c in self.children.items()},
        }

    def to_line(self) -> str:
        """The record as one trees.jsonl line, newline included."""
        return json.dumps(self.to_json()) + "\n"

    @classmethod
    def from_json(cls, data: Any) -> NodeRecord:
        """The record of one parsed line; RecordError (one line, naming the field) if it is not one."""
        _need(isinstance(data, dict), "(line)", "a JSON object")
        version = data.get("schema", 1)
        if version not in (1, SCHEMA_VERSION):
            raise RecordError(f"schema version {version!r} is not one this comlrl reads (1 or {SCHEMA_VERSION}); "
                              "a newer comlrl wrote it")
        missing = [k for k in _FIELDS if k not in data]
        if missing:
            raise RecordError(f"missing field(s): {', '.join(missing)}")
        d = data
        _need(isinstance(d["step"], int), "step", "an integer")
        _need(isinstance(d["id"], str) and isinstance(d["tree"], str), "id/tree", "strings")
        _need(d["parent"] is None or isinstance(d["parent"], str), "parent", "a string or null")
        _need(d["parent_action"] is None or isinstance(d["parent_action"], int), "parent_action", "an integer or null")
        _need(isinstance(d["turn"], int), "turn", "an integer")
        problem = d.get("problem")  # absent from lines written before it
        _need(problem is None or isinstance(problem, str), "problem", "a string or null")
        _need(_is_chats(d["prompts"]), "prompts", "per agent a list of {role, content} messages")
        _need(_is_grid(d["completions"], str), "completions", "per agent a list of strings")
        _need(_is_grid(d["joint_actions"], int), "joint_actions", "per joint action a list of integers")
        n = len(d["joint_actions"])
        rewards = _nums(d["rewards"], "rewards")
        returns = _nums(d["returns"], "returns")
        _need(len(rewards) == n and len(returns) in (0, n), "rewards/returns", f"{n} values (one per joint action)")
        _need(isinstance(d["advantages"], list)
              and all(a is None or (isinstance(a, list) and all(_is_num(x) or x is None for x in a))
                      for a in d["advantages"]),
              "advantages", "per agent a list of numbers or null")
        details = d["reward_details"]
        _need(isinstance(details, list) and len(details) in (0, n), "reward_details", f"{n} entries")
        _need(isinstance(d["pruned"], bool), "pruned", "true or false")
        kids = d["children"]
        _need(isinstance(kids, dict) and all(k.isdigit() and int(k) < n and isinstance(v, str)
                                             for k, v in kids.items()),
              "children", "an object of joint-action index -> node id")
        for j, choice in enumerate(d["joint_actions"]):
            ok = len(choice) == len(d["completions"]) and all(0 <= k < len(d["completions"][a])
                                                              for a, k in enumerate(choice))
            _need(ok, f"joint_actions[{j}]", "one completion index per agent, in range")
        return cls(
            d["step"], d["id"], d["parent"], d["parent_action"], d["turn"], d["tree"], d["prompts"], d["completions"],
            d["joint_actions"], rewards, returns, d["advantages"],
            [RewardRecord.from_json(x, version, f"reward_details[{j}]") for j, x in enumerate(details)],
            d["pruned"], {int(k): v for k, v in kids.items()}, problem,
        )


_FIELDS = ("step", "id", "parent", "parent_action", "turn", "tree", "prompts", "completions", "joint_actions",
           "rewards", "returns", "advantages", "reward_details", "pruned", "children")


def _is_grid(v: Any, kind: type) -> bool:
    return isinstance(v, list) and all(isinstance(row, list) and all(isinstance(x, kind) for x in row) for row in v)


def _is_chats(v: Any) -> bool:
    return isinstance(v, list) and all(
        isinstance(chat, list) and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                                       and isinstance(m.get("content"), str) for m in chat) for chat in v)


def _text(completion: Sample | str) -> str:
    return completion if isinstance(completion, str) else completion.text


def node_records(roots: Sequence[Node], step: int, prefix: str, num_agents: int) -> list[NodeRecord]:
    """One record per node of every tree, parents first, ids made unique per step and rank by `prefix`; each
    names its tree's problem (the root's `problem`), so a reader needs no prompt to tell the trees apart."""
    out = []
    for root in roots:
        for node in root.walk():
            out.append(NodeRecord(
                step=step, id=f"{prefix}{node.id}",
                parent=None if node.parent is None else f"{prefix}{node.parent.id}",
                parent_action=node.parent_action, turn=node.turn, tree=f"{prefix}{node.root}",
                prompts=node.messages,
                completions=[[_text(c) for c in node.completions[a]] for a in range(num_agents)],
                joint_actions=[list(j) for j in node.joint], rewards=node.rewards, returns=node.returns,
                advantages=node.advantages,
                reward_details=[None if d is None else RewardRecord.of(d) for d in node.details],
                pruned=node.terminated, children={j: f"{prefix}{c.id}" for j, c in node.children.items()},
                problem=root.problem,
            ))
    return out


def read_records(path: str | Path) -> Iterator[NodeRecord]:
    """The records of a trees.jsonl in file order. A last line without its newline that does not parse was
    cut by a crash and is skipped; any other bad line raises RecordError naming the file and line."""
    p = Path(path)
    with p.open(encoding="utf-8") as f:
        lines = f.readlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines) and not line.endswith("\n"):
                return  # the line a crash cut
            raise RecordError(f"{p} line {number}: not JSON ({exc.msg} at character {exc.pos + 1})") from None
        try:
            yield NodeRecord.from_json(data)
        except RecordError as exc:
            raise RecordError(f"{p} line {number}: {exc}") from None
