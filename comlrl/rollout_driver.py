"""The rollout driver: the three callables the level-synchronous expander (`comlrl.rollout`) drives,
bound to one batch of problems, a task, a feedback transition and a rollout engine."""

from __future__ import annotations

import time
from typing import Any

from comlrl.components import Components
from comlrl.contracts import Continuation, JointTurn, Transition
from comlrl.rollout import TreeShape, expand_trees, make_roots
from comlrl.tree import Node


def _history(index: dict[str, Node], node: Node, action: int, num_agents: int) -> list[list[str]]:
    """Each agent's responses along the path root → node, ending with joint action `action`."""
    path: list[tuple[Node, int]] = [(node, action)]
    cur = node
    while cur.parent is not None:
        parent = index[cur.parent]
        path.append((parent, cur.parent_action))
        cur = parent
    path.reverse()
    return [[n.completions[a][n.joint[j][a]].text for n, j in path] for a in range(num_agents)]


class Rollout:
    """The three callables the level-synchronous expander drives, bound to one batch of problems."""

    def __init__(self, comp: Components, problems: list, greedy: bool = False, label: str = "rollout") -> None:
        self.c, self.problems, self.greedy, self.label = comp, problems, greedy, label
        self.turn = 0
        self.transition: Transition = comp.task.transition(comp.feedback)
        self.roots: list[Node] = []
        self.nodes: dict[str, Node] = {}  # every node scored so far, by id: the paths of later turns
        self.gen_tokens = 0
        self.gen_seconds = 0.0
        self.score_seconds = 0.0
        self.feedback_seconds = 0.0

    def _phase(self, doing: str) -> None:
        self.c.phase(f"{self.label} turn {self.turn}: {doing}")

    def generate(self, requests: list[tuple[int, list[dict]]], n: int) -> list[list[Any]]:
        self.turn += 1  # the expander generates once per turn, for every open node of every tree
        self._phase(f"generating {len(requests) * n}")
        t0 = time.perf_counter()
        out = self.c.engine.generate(requests, n, greedy=self.greedy)
        self.gen_seconds += time.perf_counter() - t0
        self.gen_tokens += sum(len(s.completion_ids) for row in out for s in row)
        return out

    def score(self, pairs: list[tuple[Node, tuple[int, ...]]]) -> list[tuple[float, Any]]:
        """Scores each joint action on its node's state and keeps the state it leaves on the node."""
        self._phase(f"scoring {len(pairs)}")
        t0 = time.perf_counter()
        turns = [
            JointTurn(self.problems[node.root], tuple(node.completions[a][act[a]].text for a in range(len(act))),
                      node.state)
            for node, act in pairs
        ]
        scored = self.c.task.score_joint(turns)
        for node, _ in pairs:
            self.nodes[node.id] = node
            node.next_states = []
        for (node, _), (_, state) in zip(pairs, scored, strict=True):
            node.next_states.append(state)
        self.score_seconds += time.perf_counter() - t0
        return [(r.total, r) for r, _ in scored]

    def next_messages(self, pairs: list[tuple[Node, int]]) -> list[list[list[dict]]]:
        t0 = time.perf_counter()
        n_agents = self.c.task.num_agents
        paths = [Continuation(self.problems[node.root], node, j, _history(self.nodes, node, j, n_agents))
                 for node, j in pairs]
        out = self.transition.next_messages(self.c.task, paths)
        out = [self._prefixed(self.problems[node.root], msgs) for (node, _), msgs in zip(pairs, out, strict=True)]
        self.feedback_seconds += time.perf_counter() - t0
        return out

    def _prefixed(self, problem: Any, messages: list[list[dict]]) -> list[list[dict]]:
        """Each agent's chat, ending with the task's answer prefix as a partial assistant message if it has one."""
        out = []
        for a, msgs in enumerate(messages):
            prefix = self.c.task.answer_prefix(a, problem)
            out.append([*msgs, {"role": "assistant", "content": prefix}] if prefix else msgs)
        return out

    def initial_messages(self, problem: Any) -> list[list[dict]]:
        """The turn-1 chats the agents are prompted with: the task's messages plus its answer prefix."""
        return self._prefixed(problem, self.c.task.initial_messages(problem))

    def run(self, shape: TreeShape, tag: str) -> list[Node]:
        self.c.task.begin_rollout()
        self.roots = make_roots([self.initial_messages(p) for p in self.problems], tag)
        for root, problem in zip(self.roots, self.problems, strict=True):
            root.state = self.c.task.initial_state(problem)
        roots = expand_trees(self.roots, shape, self.generate, self.score, self.next_messages)
        self.c.policies.report_truncations(self.label)  # one line for the whole rollout, not one per prompt
        return roots
