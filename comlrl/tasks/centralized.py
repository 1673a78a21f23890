"""One policy writes every role's part in one completion (algorithm.name=centralized): the task side.

`centralize(task)` wraps a task of N agents as a task of one agent, the team. Its one completion holds
the N parts in tagged sections (comlrl/tree/role_sections.py); they are split for everything that works per
role, so the inner task is used unchanged:

- prompts: the team's chat joins the inner roles' chats (comlrl/tasks/joint_chat.py), in the first turn
  and in every later one;
- scoring: the parts go to the inner task's `score_joint`, so its reward, and the terms of
  `task.reward_funcs` (kept on the inner task by `build_task`, added there once per joint action, with one
  row per role as in a run of N agents), are what a team of N agents would get for the same parts; the
  inner `Reward` stays the node's detail, so trees.jsonl, the pass rate and `outcome_counts` read as before;
- later turns: the inner task's transition (the feedback modes, or its own) gets each role's history of
  parts and builds per-role messages, which are joined into the team's one chat again.

Answer prefix: `<agent_0>` and the inner agent 0's own prefix (code tasks: "```python\\ndef aux("), so the
reply starts inside the first section exactly as agent 0's answer would, and a small model cannot miss the
format. Later roles' prefixes cannot be forced (they start mid-completion); the prompt shows their sections.
Stop string: the closing tag of the last role: nothing after it is read. The inner task's own stops are
not used: a code task's ("```\\n\\n", after the first code block) would end the reply after one part.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from comlrl.errors import ConfigError
from comlrl.tasks import TASKS
from comlrl.tasks.base import FeedbackPrompts, TaskDefaults
from comlrl.tasks.joint_chat import joint_chat, team_instructions
from comlrl.tree.contracts import Continuation, JointTurn, Messages, Reward, Task, Transition
from comlrl.tree.role_sections import close_tag, open_tag


class CentralizedTask(TaskDefaults, FeedbackPrompts):
    """The team of `inner`'s N agents as one agent (see the module docstring)."""

    num_agents = 1
    role_names = ["team"]

    def __init__(self, inner: Task) -> None:
        self.inner = inner
        self.stop_strings = (close_tag(inner.num_agents - 1),)
        self.outcome_names = tuple(inner.outcome_names)
        self.headline_outcome = inner.headline_outcome

    @property
    def reward_range(self) -> tuple[float, float]:  # type: ignore[override]
        return self.inner.reward_range

    @property
    def reward_terms(self) -> Any:  # type: ignore[override]
        """The inner task's: it adds them (once) and the trainer reads their names here."""
        return self.inner.reward_terms

    @reward_terms.setter
    def reward_terms(self, terms: Any) -> None:
        self.inner.reward_terms = terms

    # -- prompts -----------------------------------------------------------------------------------------

    def joint(self, chats: Sequence[Messages]) -> Messages:
        """The team's chat from the inner roles' chats (one per role, in order)."""
        return joint_chat(chats, self.inner.role_names)

    def initial_messages(self, problem: Any) -> list[Messages]:
        return [self.joint(self.inner.initial_messages(problem))]

    def role_instructions(self, agent: int) -> str:
        return team_instructions(self.inner.role_names)

    def problem_statement(self, agent: int, problem: Any) -> str:
        """Every distinct part of the problem the inner roles see (code_coop: the helper's rule too)."""
        inner = self.inner
        parts = (inner.problem_statement(a, problem) if isinstance(inner, FeedbackPrompts) else str(problem.prompt)
                 for a in range(inner.num_agents))
        return "\n\n".join(dict.fromkeys(parts))

    def answer_prefix(self, agent: int, problem: Any) -> str:
        return f"{open_tag(0)}\n{self.inner.answer_prefix(0, problem)}"

    def split_roles(self, text: str) -> list[str]:
        """The team's one part: the whole completion (`inner.split_roles` gives the roles' parts)."""
        return [text if isinstance(text, str) else ""]

    def problem_id(self, problem: Any) -> str | None:
        return self.inner.problem_id(problem)

    # -- scoring -----------------------------------------------------------------------------------------

    def parts(self, texts: Sequence[str]) -> tuple[str, ...]:
        """The inner roles' parts of the team's one completion."""
        if len(texts) != 1:
            raise ValueError(f"centralized: {len(texts)} completions per joint action, expected 1 (the team's)")
        return tuple(self.inner.split_roles(texts[0]))

    def role_turns(self, turns: Sequence[JointTurn]) -> list[JointTurn]:
        return [JointTurn(t.problem, self.parts(t.texts), t.state, t.turn) for t in turns]  # ids: the team's

    def score(self, items: list[tuple[Any, list[str]]]) -> list[Reward]:
        return self.inner.score([(problem, list(self.parts(texts))) for problem, texts in items])

    def score_turns(self, turns: Sequence[JointTurn]) -> list[tuple[Reward, Any]]:
        return self.inner.score_turns(self.role_turns(turns))

    def score_joint(self, turns: Sequence[JointTurn]) -> list[tuple[Reward, Any]]:
        """The inner task's `score_joint` of the parts: its reward plus the reward functions' terms, once."""
        return self.inner.score_joint(self.role_turns(turns))

    def outcome_counts(self, reward: Any) -> dict[str, float]:
        return self.inner.outcome_counts(reward)

    def reward_inputs(self, problem: Any) -> tuple[Any, dict[str, Any]]:
        return self.inner.reward_inputs(problem)

    # -- later turns ---------------------------------------------------------------------------------------

    def role_history(self, history: list[list[str]]) -> list[list[str]]:
        """The team's completions root -> here as each inner role's parts (`Continuation.history` shape)."""
        (team,) = history
        parts = [self.inner.split_roles(text) for text in team]
        return [[p[a] for p in parts] for a in range(self.inner.num_agents)]

    def transition(self, configured: Transition) -> Transition:
        return CentralizedTransition(self, self.inner.transition(configured))

    # -- the rest is the inner task's --------------------------------------------------------------------

    def load(self, dataset_cfg: Any) -> tuple[list[Any], list[Any]]:
        return self.inner.load(dataset_cfg)

    def begin_rollout(self) -> None:
        self.inner.begin_rollout()

    def initial_state(self, problem: Any) -> Any:
        return self.inner.initial_state(problem)

    def metrics(self) -> dict[str, float]:
        return self.inner.metrics()

    def close(self) -> None:
        self.inner.close()


class CentralizedTransition:
    """The inner task's next turns, built per role from the split history, joined into the team's chat."""

    def __init__(self, task: CentralizedTask, inner: Transition) -> None:
        self.task, self.inner = task, inner

    def next_messages(self, task: Task, paths: Sequence[Continuation]) -> list[list[Messages]]:
        per_role = [Continuation(c.problem, c.node, c.action, self.task.role_history(c.history)) for c in paths]
        return [[self.task.joint(chats)] for chats in self.inner.next_messages(self.task.inner, per_role)]


def task_name(task: Task) -> str:
    """The name `task.name` gives `task`'s class (its class name for an unregistered one)."""
    return next((name for name, cls in TASKS.items() if type(task) is cls), type(task).__name__)


def centralize(task: Task, name: str | None = None) -> CentralizedTask:
    """`task` written by one policy; a `ConfigError` (one line) where that cannot work: a task of one agent
    has nothing to join, and one whose agents act through their own turns (`centralizable` False: the
    tool agent, the actions environment) has no parts that only meet in the score and the prompts."""
    if task.centralizable and task.num_agents >= 2:
        return CentralizedTask(task)
    label = name or task_name(task)
    why = (f"it has {task.num_agents} agent{'' if task.num_agents == 1 else 's'}, nothing to join"
           if task.num_agents < 2 else "its agents act through their own turns (Task.centralizable is False)")
    fits = ", ".join(n for n, cls in TASKS.items() if cls.centralizable)
    raise ConfigError(f"config error: algorithm.name=centralized is not allowed with task.name={label}: {why}; "
                      f"expected a task whose agents write parts of one answer ({fits}; 2 or more agents)")
