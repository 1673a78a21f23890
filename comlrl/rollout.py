"""Level-synchronous expansion of a batch of turn trees.

All open nodes of a turn, across every tree in the batch, are generated together: one batched call
for all agents (nodes x agents prompts, G samples each) instead of one call per node per agent. Scoring
and next-turn prompts are also batched per level. The three steps are callables so the expander is
testable without models.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from comlrl.tree import Node, joint_actions, should_terminate

Messages = list[dict]
# (agent, messages) requests -> G completions per request, in request order
GenerateFn = Callable[[list[tuple[int, Messages]], int], list[list[Any]]]
# (node, joint action) pairs -> (reward, detail) per pair
ScoreFn = Callable[[list[tuple[Node, tuple[int, ...]]]], list[tuple[float, Any]]]
# (node, joint-action index) pairs that continue -> per-agent messages of the child node
NextMessagesFn = Callable[[list[tuple[Node, int]]], list[list[Messages]]]


@dataclass(frozen=True)
class TreeShape:
    num_agents: int
    num_generations: int
    num_turns: int
    joint_mode: str
    threshold: float | None
    # samples per agent at turns after the first (None: num_generations). 1 makes k independent chains
    # from one root of k samples: the evaluation's sampled chains, whose turn-1 prompt is then shared.
    later_generations: int | None = None

    def generations(self, turn: int) -> int:
        """G at `turn` (1-based)."""
        if turn > 1 and self.later_generations is not None:
            return self.later_generations
        return self.num_generations


def make_roots(initial_messages: Sequence[list[Messages]], tag: str = "") -> list[Node]:
    """One root per problem; `initial_messages[i]` holds the per-agent turn-1 prompts."""
    return [Node(id=f"{tag}{i}", turn=1, root=i, messages=msgs) for i, msgs in enumerate(initial_messages)]


def expand_trees(
    roots: list[Node],
    shape: TreeShape,
    generate: GenerateFn,
    score: ScoreFn,
    next_messages: NextMessagesFn,
) -> list[Node]:
    """Grow every tree turn by turn; returns the roots, with rewards, completions and children filled."""
    level = list(roots)
    for turn in range(1, shape.num_turns + 1):
        if not level:
            break
        actions = joint_actions(shape.num_agents, shape.generations(turn), shape.joint_mode)
        requests = [(a, node.messages[a]) for node in level for a in range(shape.num_agents)]
        outputs = generate(requests, shape.generations(turn))
        if len(outputs) != len(requests):
            raise RuntimeError(f"generate returned {len(outputs)} results for {len(requests)} requests")
        for i, node in enumerate(level):
            node.completions = [list(outputs[i * shape.num_agents + a]) for a in range(shape.num_agents)]
            node.joint = list(actions)
        pairs = [(node, action) for node in level for action in actions]
        scored = score(pairs)
        for i, node in enumerate(level):
            chunk = scored[i * len(actions) : (i + 1) * len(actions)]
            node.rewards = [float(r) for r, _ in chunk]
            node.details = [d for _, d in chunk]
        if turn == shape.num_turns:  # last-turn nodes are leaves anyway: nothing to prune
            break
        for node in level:
            node.terminated = should_terminate(node.rewards, shape.threshold)
        growing = [(node, j) for node in level if not node.terminated for j in range(len(actions))]
        child_messages = next_messages(growing) if growing else []
        level = []
        for (node, j), msgs in zip(growing, child_messages, strict=True):
            child = Node(
                id=node.child_id(j), turn=turn + 1, root=node.root, messages=msgs, parent=node.id, parent_action=j,
                state=node.next_states[j] if node.next_states else None,
            )
            node.children[j] = child
            level.append(child)
    return roots
