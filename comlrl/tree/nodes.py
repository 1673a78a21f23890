"""The turn tree: nodes, joint actions, early termination and return backup.

Pure Python (no torch, no models) so every shape and number is unit-testable. A node holds, for one
turn, each agent's prompt and its G sampled completions; its joint actions combine one completion per
agent (`align`: the g-th of each, G per node; `cross`: the Cartesian product, G^N per node, never across
nodes). Every joint action of a node that continues gets a child node for the next turn.

The `Sample` per completion and the chat `Messages` it answers live here too: the policies hand them out and the
tree holds them, so the tree, the learner and the policies name the same types (`comlrl.policy` re-exports them).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

Messages = list[dict]


def answer_prefix_of(messages: Messages) -> str | None:
    """The start of the answer a chat prescribes (its trailing assistant message), or None."""
    if messages and messages[-1].get("role") == "assistant":
        return str(messages[-1].get("content", ""))
    return None


def agent_name(i: int) -> str:
    return f"agent{i}"


@dataclass(frozen=True)
class Sample:
    """One completion; ids are in the agent's tokenizer, completion_ids end with EOS (or with the token that
    completed a stop string) when `finished`."""

    agent: int
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    text: str
    finished: bool
    prompt_truncated: bool = False
    # per completion token, log p under the engine that sampled it (None: the trainer's own model sampled)
    logprobs: tuple[float, ...] | None = None


JOINT_MODES = ("align", "cross")


def joint_actions(num_agents: int, num_generations: int, mode: str) -> list[tuple[int, ...]]:
    """Completion indices per agent for each joint action of one node."""
    if num_agents < 1 or num_generations < 1:
        raise ValueError(f"need num_agents >= 1 and num_generations >= 1, got {num_agents}, {num_generations}")
    if mode == "align":
        return [(g,) * num_agents for g in range(num_generations)]
    if mode == "cross":
        return list(itertools.product(range(num_generations), repeat=num_agents))
    raise ValueError(f"joint_mode={mode!r} is not allowed; expected one of: {', '.join(JOINT_MODES)}")


def should_terminate(rewards: list[float], threshold: float | None) -> bool:
    """A node stops expanding when the mean immediate reward of its joint actions exceeds the threshold."""
    return threshold is not None and len(rewards) > 0 and sum(rewards) / len(rewards) > threshold


def tied(values: Sequence[float]) -> bool:
    """No spread: every joint action (or every completion's value) alike, so a centring estimator's advantages are
    all zero; what the advantages skip."""
    return max(values) - min(values) <= 1e-12


@dataclass
class Node:
    """One turn of one tree: per-agent prompts, G completions per agent, scored joint actions."""

    id: str
    turn: int  # 1-based
    root: int  # index of the tree (problem) in its batch
    messages: list[Messages]  # per agent: the chat prompt
    parent: Node | None = field(default=None, repr=False, compare=False)  # the node whose joint action led here
    parent_action: int | None = None  # that joint action's index in `parent.joint`
    completions: list[list[Sample]] = field(default_factory=list)  # [agent][g]
    joint: list[tuple[int, ...]] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)  # immediate reward per joint action
    details: list[Any] = field(default_factory=list)  # task's reward breakdown per joint action
    returns: list[float] = field(default_factory=list)
    advantages: list[list[float] | None] = field(default_factory=list)  # [agent][g], None = no signal
    children: dict[int, Node] = field(default_factory=dict)  # joint-action index -> child
    terminated: bool = False  # stopped early by the threshold
    state: Any = None  # the task's environment this turn acts on (None: the task keeps none)
    next_states: list[Any] = field(default_factory=list)  # per joint action, the state it leaves (a child's `state`)
    problem: str | None = None  # on a root: its problem's id (`Task.problem_id`; trees.jsonl puts it on every node)

    def child_id(self, action: int) -> str:
        return f"{self.id}.{action}"

    def path(self, action: int) -> list[tuple[Node, int]]:
        """(node, joint action) of every turn from the root down to this node's joint action `action`."""
        steps: list[tuple[Node, int]] = [(self, action)]
        node = self
        while node.parent is not None and node.parent_action is not None:
            steps.append((node.parent, node.parent_action))
            node = node.parent
        return steps[::-1]

    def walk(self) -> Iterator[Node]:
        """This node and its descendants, parents before children."""
        yield self
        for action in sorted(self.children):
            yield from self.children[action].walk()

    def is_leaf(self) -> bool:
        return not self.children


@runtime_checkable
class SeatView(Protocol):
    """A node state of a game whose seats keep rewards of their own (comlrl/tasks/games): how a vector of
    per-seat returns becomes this node's return (the seat to move's entry; a team's mean)."""

    def view(self, seat_returns: Sequence[float]) -> float: ...


@runtime_checkable
class SeatRewards(Protocol):
    """A joint action's reward per seat (`seat_rewards`), beside its `total` (the node's view of them)."""

    @property
    def seat_rewards(self) -> tuple[float, ...]: ...


def backup_returns(node: Node, discount: float) -> list[float]:
    """R_j = r_j + discount * mean(returns of j's child node); a joint action without a child is a leaf.
    A tree of seated states (`SeatView`, rewards with `SeatRewards`) backs up per-seat vectors the same way
    and each node takes its own view of them, so a move is judged from the side of the seat that made it."""
    if isinstance(node.state, SeatView) and all(isinstance(d, SeatRewards) for d in node.details):
        _seat_returns(node, discount)
        return node.returns
    returns = []
    for j, reward in enumerate(node.rewards):
        child = node.children.get(j)
        if child is None:
            returns.append(float(reward))
        else:
            child_returns = backup_returns(child, discount)
            returns.append(float(reward) + discount * sum(child_returns) / len(child_returns))
    node.returns = returns
    return returns


def _seat_returns(node: Node, discount: float) -> list[list[float]]:
    """Per joint action, the per-seat returns V_j = v_j + discount * mean(V of j's child's joint actions); sets
    every node's `returns` to its view of them (`SeatView.view`)."""
    vectors = []
    for j, detail in enumerate(node.details):
        own = [float(r) for r in detail.seat_rewards]
        child = node.children.get(j)
        if child is not None:
            below = _seat_returns(child, discount)
            own = [v + discount * sum(b[s] for b in below) / len(below) for s, v in enumerate(own)]
        vectors.append(own)
    node.returns = [float(node.state.view(v)) for v in vectors]
    return vectors


@dataclass
class TreeStats:
    """Counters of one batch of trees, per turn (index 0 = turn 1)."""

    nodes: list[int]
    pruned: list[int]
    joint_actions: list[int]
    leaves: int

    @staticmethod
    def of(roots: list[Node], num_turns: int) -> TreeStats:
        nodes = [0] * num_turns
        pruned = [0] * num_turns
        joint = [0] * num_turns
        leaves = 0
        for root in roots:
            for node in root.walk():
                t = node.turn - 1
                nodes[t] += 1
                pruned[t] += int(node.terminated)
                joint[t] += len(node.rewards)
                leaves += sum(1 for j in range(len(node.rewards)) if j not in node.children)
        return TreeStats(nodes=nodes, pruned=pruned, joint_actions=joint, leaves=leaves)


def expected_counts(num_agents: int, num_generations: int, num_turns: int, mode: str) -> tuple[list[int], list[int]]:
    """Nodes and joint-action rewards per turn of one tree when nothing terminates early."""
    per_node = len(joint_actions(num_agents, num_generations, mode))
    nodes = [per_node**t for t in range(num_turns)]
    return nodes, [n * per_node for n in nodes]
