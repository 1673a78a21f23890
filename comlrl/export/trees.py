"""Turn a run's trees into training data: SFT chat records per trajectory, preference pairs per node.

Works on any `trees.jsonl` the trainer writes (records: comlrl/tree/records.py), whatever the task:

    records = load_trees("runs/x/trees.jsonl")
    for traj in trajectories(records):                 # one per leaf joint action (root -> leaf path)
        rec = to_training_format(traj, agent=0)         # {"messages": [...], "meta": {...}}
    pairs = preference_pairs(records)                   # best vs worst joint action of every node

A trajectory's chat for agent i is its turn-1 prompt, then, turn by turn, its answer and whatever the
next prompt adds: when the next prompt continues the chat (the actions task) only the new messages are
kept; when it is a fresh prompt (code feedback modes) its non-system messages are appended. Consecutive
messages of the same role are merged, so the result alternates user/assistant after one optional system
message and every chat template accepts it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from comlrl.tree.records import JointActionRecord, Message, NodeRecord, RewardRecord, read_records


@dataclass(frozen=True)
class Step:
    """One joint action on a trajectory's path."""

    node: str
    turn: int
    joint: int
    prompts: list[list[Message]]  # per agent
    completions: list[str]  # per agent: the completion this joint action used
    reward: float
    ret: float | None
    detail: RewardRecord | None


@dataclass(frozen=True)
class Trajectory:
    """Root-to-leaf path of joint actions in one tree of one training step."""

    step: int
    tree: str
    steps: tuple[Step, ...]
    problem: str | None = None  # the id of the problem the tree is about (None: trees.jsonl did not record it)

    @property
    def reward(self) -> float:
        """Sum of the immediate rewards along the path (undiscounted)."""
        return float(sum(s.reward for s in self.steps))

    @property
    def success(self) -> bool:
        """The last joint action passed (its reward's `all_passed`)."""
        return _passed(self.steps[-1].detail)

    @property
    def num_agents(self) -> int:
        return len(self.steps[0].completions)


def _passed(detail: RewardRecord | None) -> bool:
    return detail is not None and detail.all_passed


def load_trees(path: str | Path) -> list[NodeRecord]:
    """The node records of a trees.jsonl (a run directory works too); a last line cut by a crash is skipped,
    any other bad line raises `RecordError` naming the file and line."""
    p = Path(path)
    return list(read_records(p / "trees.jsonl" if p.is_dir() else p))


def _step(rec: NodeRecord, act: JointActionRecord) -> Step:
    return Step(rec.id, rec.turn, act.index, rec.prompts, list(act.texts), float(act.reward),
                None if act.ret is None else float(act.ret), act.detail)


def trajectories(records: Iterable[NodeRecord]) -> Iterator[Trajectory]:
    """Every root-to-leaf path: one per joint action that has no child node."""
    by_id = {r.id: r for r in records}
    for rec in by_id.values():
        for act in rec.actions:
            if act.child is not None:
                continue
            path = [_step(rec, act)]
            cur = rec
            while cur.parent is not None and cur.parent in by_id and cur.parent_action is not None:
                parent = by_id[cur.parent]
                path.append(_step(parent, parent.actions[cur.parent_action]))
                cur = parent
            path.reverse()
            yield Trajectory(rec.step, rec.tree, tuple(path), rec.problem)


def merge_roles(messages: Sequence[Message]) -> list[Message]:
    """Consecutive messages of one role joined; a system message after the first message becomes user text."""
    out: list[Message] = []
    for m in messages:
        role, content = str(m.get("role", "user")), str(m.get("content", ""))
        if role == "system" and out:
            role = "user"
        if out and out[-1]["role"] == role:
            out[-1] = {"role": role, "content": out[-1]["content"] + "\n\n" + content}
        else:
            out.append({"role": role, "content": content})
    return out


def prompt_of(messages: Sequence[Message]) -> list[Message]:
    """A node's prompt without its answer prefix (a trailing assistant message): the answer text holds it."""
    msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
    return msgs[:-1] if msgs and msgs[-1]["role"] == "assistant" else msgs


def chat_of(steps: Sequence[Step], agent: int) -> list[Message]:
    """One agent's whole conversation along `steps`, ending with its last answer."""
    msgs: list[Message] = []
    for s in steps:
        prompt = prompt_of(s.prompts[agent])
        if msgs and prompt[: len(msgs)] == msgs:
            new = prompt[len(msgs):]
        elif msgs:
            new = [m for m in prompt if m["role"] != "system"]
        else:
            new = prompt
        msgs.extend(new)
        msgs.append({"role": "assistant", "content": s.completions[agent]})
    return merge_roles(msgs)


def to_training_format(trajectory: Trajectory, agent: int = 0, *, role_names: Sequence[str] | None = None,
                       per_turn: bool = False) -> dict[str, Any] | list[dict[str, Any]]:
    """SFT chat record(s) of one agent's side of a trajectory: `{"messages": [...], "meta": {...}}`.

    `per_turn=True` gives one record per turn (that turn's prompt + answer) instead of one for the path.
    """
    meta = {"step": trajectory.step, "tree": trajectory.tree, "problem": trajectory.problem, "agent": agent,
            "role": role_names[agent] if role_names and agent < len(role_names) else f"agent{agent}",
            "turns": len(trajectory.steps), "reward": trajectory.reward, "success": trajectory.success,
            "leaf": trajectory.steps[-1].node, "joint_action": trajectory.steps[-1].joint}
    if not per_turn:
        return {"messages": chat_of(trajectory.steps, agent), "meta": meta}
    return [{"messages": chat_of([s], agent), "meta": {**meta, "turn": s.turn, "turn_reward": s.reward}}
            for s in trajectory.steps]


def sft_records(records: Iterable[NodeRecord], *, only_success: bool = False, min_reward: float | None = None,
                agents: Sequence[int] | None = None, role_names: Sequence[str] | None = None,
                per_turn: bool = False) -> list[dict[str, Any]]:
    """SFT records of every trajectory passing the filters, each agent's chat once (duplicates dropped)."""
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for traj in trajectories(records):
        if only_success and not traj.success:
            continue
        if min_reward is not None and traj.reward < min_reward:
            continue
        for a in agents if agents is not None else range(traj.num_agents):
            made = to_training_format(traj, a, role_names=role_names, per_turn=per_turn)
            for rec in made if isinstance(made, list) else [made]:
                key = json.dumps([a, rec["messages"]], ensure_ascii=False)
                if key not in seen:
                    seen.add(key)
                    out.append(rec)
    return out


def preference_pairs(records: Iterable[NodeRecord], *, min_gap: float = 1e-9, only_success: bool = False,
                     min_reward: float | None = None, agents: Sequence[int] | None = None,
                     role_names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Best vs worst joint action of every node (by return, else reward), per agent whose texts differ.

    Record: `{"prompt": [...], "chosen": [assistant msg], "rejected": [assistant msg], "meta": {...}}` (the
    conversational preference format). Filters apply to the chosen joint action (`only_success`: it
    succeeded; `min_reward`: its value is at least that).
    """
    out = []
    for rec in records:
        values = _values(rec)
        if len(values) < 2:
            continue
        best = max(range(len(values)), key=lambda j: values[j])
        worst = min(range(len(values)), key=lambda j: values[j])
        if values[best] - values[worst] < min_gap:
            continue
        actions = rec.actions
        if only_success and not _passed(actions[best].detail):
            continue
        if min_reward is not None and values[best] < min_reward:
            continue
        chosen, rejected = actions[best].texts, actions[worst].texts
        for a in agents if agents is not None else range(rec.num_agents):
            if chosen[a] == rejected[a]:
                continue
            out.append({
                "prompt": merge_roles(prompt_of(rec.prompts[a])),
                "chosen": [{"role": "assistant", "content": chosen[a]}],
                "rejected": [{"role": "assistant", "content": rejected[a]}],
                "meta": {"step": rec.step, "tree": rec.tree, "problem": rec.problem, "node": rec.id, "turn": rec.turn,
                         "agent": a,
                         "role": role_names[a] if role_names and a < len(role_names) else f"agent{a}",
                         "chosen_value": values[best], "rejected_value": values[worst],
                         "chosen_joint": best, "rejected_joint": worst},
            })
    return out


def _values(rec: NodeRecord) -> list[float]:
    """What ranks a node's joint actions: their returns, else (never backed up) their rewards."""
    return rec.returns or rec.rewards


def nodes_with_gap(records: Iterable[NodeRecord], min_gap: float = 1e-9) -> tuple[int, int]:
    """(nodes with two or more joint actions, those whose best and worst values differ by at least min_gap):
    why `preference_pairs` found nothing, when it did."""
    groups = gapped = 0
    for rec in records:
        values = _values(rec)
        if len(values) >= 2:
            groups += 1
            gapped += max(values) - min(values) >= min_gap
    return groups, gapped


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with p.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
            n += 1
    return n
