"""Turn a run's trees into training data: SFT chat records per trajectory, preference pairs per node.

Works on any `trees.jsonl` the trainer writes (see comlrl/run_outputs.py), whatever the task:

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

Message = dict[str, str]


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
    detail: dict[str, Any] | None


@dataclass(frozen=True)
class Trajectory:
    """Root-to-leaf path of joint actions in one tree of one training step."""

    step: int
    tree: str
    steps: tuple[Step, ...]

    @property
    def reward(self) -> float:
        """Sum of the immediate rewards along the path (undiscounted)."""
        return float(sum(s.reward for s in self.steps))

    @property
    def success(self) -> bool:
        return is_success(self.steps[-1].detail)

    @property
    def num_agents(self) -> int:
        return len(self.steps[0].completions)


def is_success(detail: Any) -> bool:
    """A joint action succeeded: `components.success` (actions task) or every test passed (code tasks)."""
    if not isinstance(detail, dict):
        return False
    comps = detail.get("components") or {}
    if "success" in comps:
        return float(comps["success"] or 0) >= 1.0
    passed, total = detail.get("tests_passed"), detail.get("tests_total")
    return bool(total) and passed == total


def load_trees(path: str | Path) -> list[dict[str, Any]]:
    """The node records of a trees.jsonl (a run directory works too); lines cut by a crash are skipped."""
    p = Path(path)
    if p.is_dir():
        p = p / "trees.jsonl"
    out = []
    for line in p.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def _joint_completions(rec: dict[str, Any], j: int) -> list[str]:
    joint = rec["joint_actions"][j]
    return [rec["completions"][a][k] for a, k in enumerate(joint)]


def _step(rec: dict[str, Any], j: int) -> Step:
    returns = rec.get("returns") or []
    details = rec.get("reward_details") or []
    return Step(rec["id"], int(rec["turn"]), j, rec["prompts"], _joint_completions(rec, j),
                float(rec["rewards"][j]), float(returns[j]) if j < len(returns) else None,
                details[j] if j < len(details) else None)


def trajectories(records: Iterable[dict[str, Any]]) -> Iterator[Trajectory]:
    """Every root-to-leaf path: one per joint action that has no child node."""
    by_id = {r["id"]: r for r in records}
    for rec in by_id.values():
        children = rec.get("children") or {}
        for j in range(len(rec.get("rewards") or [])):
            if str(j) in children:
                continue
            path = [_step(rec, j)]
            cur = rec
            while cur.get("parent") is not None and cur["parent"] in by_id:
                parent = by_id[cur["parent"]]
                path.append(_step(parent, int(cur["parent_action"])))
                cur = parent
            path.reverse()
            yield Trajectory(int(rec.get("step", 0)), str(rec.get("tree", cur["id"])), tuple(path))


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
    meta = {"step": trajectory.step, "tree": trajectory.tree, "agent": agent,
            "role": role_names[agent] if role_names and agent < len(role_names) else f"agent{agent}",
            "turns": len(trajectory.steps), "reward": trajectory.reward, "success": trajectory.success,
            "leaf": trajectory.steps[-1].node, "joint_action": trajectory.steps[-1].joint}
    if not per_turn:
        return {"messages": chat_of(trajectory.steps, agent), "meta": meta}
    return [{"messages": chat_of([s], agent), "meta": {**meta, "turn": s.turn, "turn_reward": s.reward}}
            for s in trajectory.steps]


def sft_records(records: Iterable[dict[str, Any]], *, only_success: bool = False, min_reward: float | None = None,
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


def preference_pairs(records: Iterable[dict[str, Any]], *, min_gap: float = 1e-9, only_success: bool = False,
                     min_reward: float | None = None, agents: Sequence[int] | None = None,
                     role_names: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Best vs worst joint action of every node (by return, else reward), per agent whose texts differ.

    Record: `{"prompt": [...], "chosen": [assistant msg], "rejected": [assistant msg], "meta": {...}}` (the
    conversational preference format). Filters apply to the chosen joint action (`only_success`: it
    succeeded; `min_reward`: its value is at least that).
    """
    out = []
    for rec in records:
        values = rec.get("returns") or rec.get("rewards") or []
        if len(values) < 2:
            continue
        best = max(range(len(values)), key=lambda j: values[j])
        worst = min(range(len(values)), key=lambda j: values[j])
        if values[best] - values[worst] < min_gap:
            continue
        details = rec.get("reward_details") or []
        if only_success and not is_success(details[best] if best < len(details) else None):
            continue
        if min_reward is not None and values[best] < min_reward:
            continue
        chosen, rejected = _joint_completions(rec, best), _joint_completions(rec, worst)
        n = len(rec["prompts"])
        for a in agents if agents is not None else range(n):
            if chosen[a] == rejected[a]:
                continue
            out.append({
                "prompt": merge_roles(prompt_of(rec["prompts"][a])),
                "chosen": [{"role": "assistant", "content": chosen[a]}],
                "rejected": [{"role": "assistant", "content": rejected[a]}],
                "meta": {"step": rec.get("step"), "tree": rec.get("tree"), "node": rec["id"], "turn": rec["turn"],
                         "agent": a,
                         "role": role_names[a] if role_names and a < len(role_names) else f"agent{a}",
                         "chosen_value": values[best], "rejected_value": values[worst],
                         "chosen_joint": best, "rejected_joint": worst},
            })
    return out


def nodes_with_gap(records: Iterable[dict[str, Any]], min_gap: float = 1e-9) -> tuple[int, int]:
    """(nodes with two or more joint actions, those whose best and worst values differ by at least min_gap):
    why `preference_pairs` found nothing, when it did."""
    groups = gapped = 0
    for rec in records:
        values = rec.get("returns") or rec.get("rewards") or []
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
