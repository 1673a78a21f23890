"""The rollout, in one place: level-synchronous expansion of a batch of turn trees, and the driver that
binds its three steps to a run.

All open nodes of a turn, across every tree in the batch, are generated together: one batched call
for all agents (nodes x agents prompts, G samples each) instead of one call per node per agent. Scoring
and next-turn prompts are also batched per level. `expand_trees` takes the three steps as callables, so
it is testable without models; `Rollout` binds them to a rollout engine (generate), a task (score, with
the state each joint action leaves) and a transition (the next turn's messages).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from comlrl.tree.contracts import (
    Continuation,
    EndState,
    EnvironmentState,
    JointTurn,
    ProblemInfo,
    Prompting,
    Reward,
    StepState,
    Task,
    Transition,
)
from comlrl.tree.nodes import Messages, Node, Sample, joint_actions, should_terminate


class Scored(NamedTuple):
    """What scoring one joint action gives the expander."""

    reward: float  # the immediate reward the tree backs up
    detail: Reward | None = None  # the task's `Reward` (breakdown, verdict, notes), kept on the node
    next_state: Any = None  # the environment the joint action leaves: its child's `Node.state`


# (agent, messages) requests, G (one for all, or one per request) -> that many completions per request, in
# request order. Nodes of different G in one call keep them in one decode pass: a pass lasts about as long as
# its longest completion, whatever its batch, so a second call costs about as much as the first.
GenerateFn = Callable[..., list[list[Sample]]]
# (node, joint action) pairs -> one `Scored` per pair
ScoreFn = Callable[[list[tuple[Node, tuple[int, ...]]]], list[Scored]]
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
    # samples per agent at a node whose parent joint action solved the problem (None: as any node)
    solved_generations: int | None = None

    def generations(self, turn: int) -> int:
        """G at `turn` (1-based)."""
        if turn > 1 and self.later_generations is not None:
            return self.later_generations
        return self.num_generations

    def node_generations(self, node: Node) -> int:
        """G at `node`: 1 where its state continues a user turn already begun (`StepState`: the tree branches
        at a user turn's first reply); `solved_generations` where the joint action that led to it solved the
        problem (the task's `Reward.all_passed`), so the turns after a solved answer cost less; else
        `generations`."""
        if isinstance(node.state, StepState) and node.state.continues_turn:
            return 1
        parent, j = node.parent, node.parent_action
        if self.solved_generations is not None and parent is not None and j is not None:
            detail = parent.details[j] if j < len(parent.details) else None
            if detail is not None and detail.all_passed:
                return self.solved_generations
        return self.generations(node.turn)


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
        # one draw for the level, each node at its G (solved_generations sets some apart)
        draw(level, shape.num_agents, [shape.node_generations(node) for node in level], shape.joint_mode,
             generate, score)
        if turn == shape.num_turns:  # last-turn nodes are leaves anyway: nothing to prune
            break
        for node in level:
            node.terminated = should_terminate(node.rewards, shape.threshold)
        growing = [(node, j) for node in level if not node.terminated for j in range(len(node.joint))
                   if not ended(node.next_states[j] if node.next_states else None)]
        child_messages = next_messages(growing) if growing else []
        level = []
        for (node, j), msgs in zip(growing, child_messages, strict=True):
            child = Node(id=node.child_id(j), turn=turn + 1, root=node.root, messages=msgs, parent=node,
                         parent_action=j, state=node.next_states[j])
            node.children[j] = child
            level.append(child)
    return roots


def ended(state: Any) -> bool:
    """The state's episode is over (`EndState`): its joint action gets no child."""
    return isinstance(state, EndState) and state.ended


def _sampled_rows(nodes: list[Node], num_agents: int, sizes: list[int], generate: GenerateFn
                  ) -> list[list[list[Sample]]]:
    """`sizes[i]` samples per agent of node i, every node in one call: per node, one row per agent. One G for
    all goes to `generate` as one number (the fixed tree's call), several as one per request."""
    requests = [(a, node.messages[a]) for node in nodes for a in range(num_agents)]
    uniform = len(set(sizes)) == 1
    outputs = generate(requests, sizes[0] if uniform else [g for g in sizes for _ in range(num_agents)])
    if len(outputs) != len(requests):
        raise RuntimeError(f"generate returned {len(outputs)} results for {len(requests)} requests")
    return [[list(outputs[i * num_agents + a]) for a in range(num_agents)] for i in range(len(nodes))]


def _scored_chunks(nodes: list[Node], actions: list[list[tuple[int, ...]]], score: ScoreFn) -> list[list[Scored]]:
    """Node i's `actions[i]` scored, every node in one call (the nodes hold their completions): per node, its
    chunk."""
    scored = score([(node, action) for node, acts in zip(nodes, actions, strict=True) for action in acts])
    chunks, start = [], 0
    for acts in actions:
        chunks.append(scored[start : start + len(acts)])
        start += len(acts)
    return chunks


def draw(nodes: list[Node], num_agents: int, sizes: list[int], joint_mode: str, generate: GenerateFn,
         score: ScoreFn) -> None:
    """Sample `sizes[i]` completions per agent of node i, every node in one call, then score every joint
    action (`joint_mode`'s of that G) in one call; fills (or replaces) the nodes' completions, joint actions,
    rewards, details and next states."""
    actions = [joint_actions(num_agents, g, joint_mode) for g in sizes]
    for node, rows, acts in zip(nodes, _sampled_rows(nodes, num_agents, sizes, generate), actions, strict=True):
        node.completions, node.joint = rows, list(acts)
    for node, chunk in zip(nodes, _scored_chunks(nodes, actions, score), strict=True):
        node.rewards = [float(s.reward) for s in chunk]
        node.details = [s.detail for s in chunk]
        node.next_states = [s.next_state for s in chunk]


class Engine(Protocol):
    """What the rollout samples from (`comlrl.engines.RolloutEngine`)."""

    def generate(self, requests: list[tuple[int, Messages]], num_samples: int | list[int], greedy: bool = False
                 ) -> list[list[Sample]]: ...


def texts_along(node: Node, action: int, num_agents: int) -> list[list[str]]:
    """Each agent's completion texts along the path root -> `node`'s joint action `action`, oldest first."""
    path = node.path(action)
    return [[n.completions[a][n.joint[j][a]].text for n, j in path] for a in range(num_agents)]


class Rollout:
    """`expand_trees`' three steps bound to one batch of problems, with the time each took and the tokens
    generated (a step's metrics). `phase` shows what it does; `on_done(label)` runs after the expansion
    (the policies' one line about prompts cut for length)."""

    def __init__(self, task: Task, transition: Transition, engine: Engine, problems: list, *, greedy: bool = False,
                 label: str = "rollout", phase: Callable[[str], None] | None = None,
                 on_done: Callable[[str], None] | None = None) -> None:
        self.task, self.transition, self.engine = task, transition, engine
        self.problems, self.greedy, self.label = problems, greedy, label
        self.phase, self.on_done = phase, on_done
        self.turn = 1  # the turn being expanded
        self.gen_tokens = 0
        self.gen_seconds = 0.0
        self.score_seconds = 0.0
        self.feedback_seconds = 0.0

    def _phase(self, doing: str) -> None:
        if self.phase is not None:
            self.phase(f"{self.label} turn {self.turn}: {doing}")

    def generate(self, requests: list[tuple[int, Messages]], n: int | list[int]) -> list[list[Sample]]:
        self._phase(f"generating {len(requests) * n if isinstance(n, int) else sum(n)}")
        t0 = time.perf_counter()
        out = self.engine.generate(requests, n, greedy=self.greedy)
        self.gen_seconds += time.perf_counter() - t0
        self.gen_tokens += sum(len(s.completion_ids) for row in out for s in row)
        return out

    def score(self, pairs: list[tuple[Node, tuple[int, ...]]]) -> list[Scored]:
        """Each joint action scored on its node's state: its reward and the state it leaves."""
        self._phase(f"scoring {len(pairs)}")
        t0 = time.perf_counter()
        turns = [self._joint_turn(node, act) for node, act in pairs]
        scored = [Scored(r.total, r, state) for r, state in self.task.score_joint(turns)]
        self.score_seconds += time.perf_counter() - t0
        return scored

    def _joint_turn(self, node: Node, act: tuple[int, ...]) -> JointTurn:
        samples = [node.completions[a][k] for a, k in enumerate(act)]
        return JointTurn(self.problems[node.root], tuple(s.text for s in samples), node.state, node.turn,
                         tuple(tuple(s.completion_ids) for s in samples))

    def next_messages(self, pairs: list[tuple[Node, int]]) -> list[list[Messages]]:
        t0 = time.perf_counter()
        n_agents = self.task.num_agents
        paths = [Continuation(self.problems[node.root], node, j, texts_along(node, j, n_agents)) for node, j in pairs]
        out = self.transition.next_messages(self.task, paths)
        out = [self._prefixed(self.problems[node.root], msgs) for (node, _), msgs in zip(pairs, out, strict=True)]
        self.feedback_seconds += time.perf_counter() - t0
        self.turn += 1  # the expander asks for the next turn's prompts once per turn, then generates at it
        return out

    def _prefixed(self, problem: Any, messages: list[Messages]) -> list[Messages]:
        """Each agent's chat, ending with the task's answer prefix as a partial assistant message if it has one."""
        if not isinstance(self.task, Prompting):  # a task of the required protocol alone: free answers
            return messages
        out = []
        for a, msgs in enumerate(messages):
            prefix = self.task.answer_prefix(a, problem)
            out.append([*msgs, {"role": "assistant", "content": prefix}] if prefix else msgs)
        return out

    def initial_messages(self, problem: Any) -> list[Messages]:
        """The turn-1 chats the agents are prompted with: the task's messages plus its answer prefix."""
        return self._prefixed(problem, self.task.initial_messages(problem))

    def run(self, shape: TreeShape, tag: str) -> list[Node]:
        """One tree per problem, grown by `expand_trees`; returns the roots."""
        if isinstance(self.task, EnvironmentState):
            self.task.begin_rollout()
        roots = make_roots([self.initial_messages(p) for p in self.problems], tag)
        for root, problem in zip(roots, self.problems, strict=True):
            root.state = self.task.initial_state(problem)
            root.problem = self.task.problem_id(problem) if isinstance(self.task, ProblemInfo) else None
        expand_trees(roots, shape, self.generate, self.score, self.next_messages)
        if self.on_done is not None:
            self.on_done(self.label)  # one line for the whole rollout, not one per prompt
        return roots
