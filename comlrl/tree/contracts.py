"""The three contracts the trainer drives, in one place: `Task`, `Transition` and `Reward`.

A `Task` holds the data, the agents' roles, their first prompts and the scoring; a `Transition` turns a
joint action that continues into the next turn's messages (the feedback modes are one, the tool agent's
tool responses and the actions environment's observations are others); a `Reward` is what scoring one
joint action returns, whatever the task. Per-path environment state lives on the tree node
(`comlrl.tree.nodes.Node.state`), so no task rebuilds it from text. The trainer calls only what is declared
here: `Task` is the required protocol (`TASK_MEMBERS`), every optional ability an opt-in protocol with its
defaults that callers ask for with `isinstance` (`TaskDefaults` brings them all but `FeedbackPrompts`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Protocol, runtime_checkable

from comlrl.tree import role_sections
from comlrl.tree.nodes import Node

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Problem:
    """One function-writing problem in HumanEval format.

    `prompt` holds imports, the signature and a docstring; `test` defines `check(candidate)`;
    `canonical_solution` (a body, HumanEval style) is optional and only used to validate data sets.
    """

    task_id: str
    prompt: str
    entry_point: str
    test: str
    canonical_solution: str | None = None


@dataclass
class TaskConfig:
    """The `task` config section every task is built from. Beside these keys it holds one options section
    per registered task that declares an `options_type` (`task.<task name>.*`, added by
    `comlrl.config.schema.run_schema`); `options()` is the chosen task's."""

    name: str = "code_collab"  # code_collab | code_coop (N=2) | code_single | tool_agent (N=1)
                               # | actions (N=2) | text | bfcl | bfcl_multi_turn | textarena | openenv (N=1)
                               # | registered
    reward: str = "levels"  # code tasks: levels (docs/rewards.md) | a reward registered by a plugins module
    reward_funcs: list[str] = field(default_factory=list)  # module:function, TRL-style (comlrl/tasks/reward_funcs.py)
    reward_weights: list[float] | None = None  # one per reward function; null = 1 each

    def options(self) -> Any:
        """The options section of the chosen task (`task.<name>`), None for a task without options."""
        return vars(self).get(self.name)


@runtime_checkable
class Reward(Protocol):
    """What scoring one joint action returns, for every task: the trainer reads only these members."""

    total: float  # the scalar the tree backs up
    components: dict[str, float]  # the breakdown trees.jsonl keeps per joint action
    notes: tuple[str, ...]  # short remarks for people reading the trees (why a level failed, the judge)

    @property
    def all_passed(self) -> bool:
        """The joint action solved the problem (every test / success check passed): the pass rate."""

    @property
    def scored(self) -> tuple[str, ...]:
        """Per agent, what the reward judged: the code it ran, or the actions it executed."""


@runtime_checkable
class StepState(Protocol):
    """A node state that can say its node continues a user turn already begun (an environment where one
    user turn takes several replies, as BFCL's multi-turn loop): there the tree does not branch, one
    sample per agent goes on from each such node."""

    @property
    def continues_turn(self) -> bool:
        """The node's next reply continues a user turn whose first reply was already sampled."""


@runtime_checkable
class Transcribed(Protocol):
    """A reward that carries the readable episode so far (a game's moves): the evaluation writes the greedy
    episodes of its last run as text (games.txt)."""

    @property
    def transcript(self) -> tuple[str, ...]: ...


@runtime_checkable
class FailedEpisode(Protocol):
    """A reward that can say its episode failed (the environment raised, the episode could not go on): the sibling
    group's advantages are formed without it, and it trains nothing."""

    @property
    def failed(self) -> bool: ...


@runtime_checkable
class EndState(Protocol):
    """A state that can say its episode is over (a finished game): the joint action that left it gets no
    child, whatever the turn."""

    @property
    def ended(self) -> bool:
        """The episode ended with the joint action that left this state."""


@dataclass(frozen=True)
class JointTurn:
    """One joint action to score: each agent's completion of this turn and the state it acts on."""

    problem: Any  # the task's problem record (a `Problem` or the task's own)
    texts: tuple[str, ...]  # one completion per agent
    state: Any = None  # `Node.state` of the node it was sampled at (None: the task keeps no environment)
    turn: int = 1  # the node's turn, 1-based (reward functions get it as `turn`)
    completion_ids: tuple[tuple[int, ...], ...] = ()  # per agent, the completion's token ids (empty: not known)


@dataclass(frozen=True)
class Continuation:
    """A joint action whose path goes on: `node.joint[action]`, reached along `history`."""

    problem: Any
    node: Node
    action: int
    history: list[list[str]]  # per agent, its responses root → this joint action (the last is this one)

    @property
    def reward(self) -> Any:
        """The `Reward` this joint action got."""
        return self.node.details[self.action]

    @property
    def state(self) -> Any:
        """The environment state this joint action left (None: the task keeps none)."""
        return self.node.next_states[self.action] if self.node.next_states else None


@runtime_checkable
class Transition(Protocol):
    """Builds the next turn's per-agent chat messages of the joint actions that continue."""

    def next_messages(self, task: Task, paths: Sequence[Continuation]) -> list[list[Messages]]:
        """One list of per-agent messages per continuation, in order."""


class Task(ABC):
    """The required protocol every task implements (9 members): its agents, data, first prompts, scoring and
    next state. What else a task can do is an opt-in protocol below (`Scoring`, `Prompting`,
    `EnvironmentState`, `ProblemInfo`, `Counts`, `Configured`, `SplitRoles`, `FeedbackPrompts`) that callers
    ask for with `isinstance`; `TaskDefaults` brings every opt-in protocol but `FeedbackPrompts` with its
    defaults, and the built-in tasks inherit it."""

    num_agents: int
    role_names: list[str]
    reward_range: tuple[float, float]

    @abstractmethod
    def load(self, dataset_cfg: Any) -> tuple[list[Any], list[Any]]:
        """Train and eval problems for a dataset config (name, path, eval_size, max_problems, seed)."""

    @abstractmethod
    def initial_messages(self, problem: Any) -> list[Messages]:
        """First-turn chat messages, one list per agent."""

    @abstractmethod
    def score_joint(self, turns: Sequence[JointTurn]) -> list[tuple[Reward, Any]]:
        """(reward, state it leaves) per joint action: what the rollout calls to score a turn."""

    def initial_state(self, problem: Any) -> Any:
        """The environment a tree's first turn acts on (`Node.state` of its root); None: no environment."""
        return None

    def transition(self, configured: Transition) -> Transition:
        """How this task's next turns are built: the configured feedback mode, unless the task brings its
        own environment (tool responses, observations)."""
        return configured

    def close(self) -> None:
        """The run is over: release what the task holds (servers, workspaces, clients)."""
        return None


TASK_MEMBERS = ("num_agents", "role_names", "reward_range", "load", "initial_messages", "score_joint",
                "initial_state", "transition", "close")  # the required protocol, in the order `Task` declares it


class Scoring(ABC):
    """Opt-in: a task that scores the texts of a first turn (`score`) and gets `score_joint` from it, with the
    weighted terms of the configured reward functions (task.reward_funcs, comlrl/tasks/reward_funcs.py)."""

    reward_terms: Any = None  # comlrl.tasks.reward_funcs.RewardTerms of task.reward_funcs, or None (build_task)

    @abstractmethod
    def score(self, items: list[tuple[Any, list[str]]]) -> list[Reward]:
        """One `Reward` per (problem, completions per agent) item of a first turn, in order."""

    def score_turns(self, turns: Sequence[JointTurn]) -> list[tuple[Reward, Any]]:
        """(reward, state it leaves) per joint action. Tasks without an environment score the texts alone
        and leave the state as it was."""
        rewards = self.score([(t.problem, list(t.texts)) for t in turns])
        return [(r, t.state) for r, t in zip(rewards, turns, strict=True)]

    def score_joint(self, turns: Sequence[JointTurn]) -> list[tuple[Reward, Any]]:
        """What the trainer calls: `score_turns`, plus the weighted terms of the configured reward
        functions (task.reward_funcs, comlrl/tasks/reward_funcs.py) on every reward."""
        scored = self.score_turns(turns)
        return self.reward_terms.add(self, turns, scored) if self.reward_terms else scored

    def reward_inputs(self, problem: Any) -> tuple[Any, dict[str, Any]]:
        """(prompt, other columns) of a problem as a reward function receives them (TRL passes the prompt
        and every other column of the data set's row); default: the fields of a dataclass problem."""
        if not is_dataclass(problem):
            return "", {}
        columns = {f.name: vars(problem)[f.name] for f in fields(problem)}
        return columns.pop("prompt", ""), columns


class Prompting:
    """Opt-in: how the rows of a task are generated (a forced answer start, stop strings, history cuts)."""

    stop_strings: tuple[str, ...] = ()  # generation of a row ends after one of these (e.g. a closing fence)
    head_messages: int | None = None  # leading messages a history cut keeps (None: system + first user)

    def answer_prefix(self, agent: int, problem: Any) -> str:
        """How agent `agent`'s answer must start in every turn ("" = free). The model continues it, so
        small models cannot miss the format the reward checks (the function name, the code fence)."""
        return ""


class EnvironmentState:
    """Opt-in: a task whose per-path environment states (`Node.state`, from `Task.initial_state`) hold
    something to release between batches of trees."""

    def begin_rollout(self) -> None:
        """A new batch of trees starts: release what the previous one held (environment states)."""
        return None


class ProblemInfo:
    """Opt-in: how trees.jsonl and eval.jsonl name and group a problem."""

    def problem_label(self, problem: Any, index: int) -> str:
        """How eval.jsonl names a problem: its own id (`problem_id`), else its position."""
        own = self.problem_id(problem)
        return own if own is not None else str(index)

    def problem_id(self, problem: Any) -> str | None:
        """The problem's own id, written on every node of its tree in trees.jsonl so that a reader can tell
        which problem a tree was about: a HumanEval-format problem's `task_id`; None where there is none
        (a task whose problems are of its own type names them itself)."""
        return problem.task_id if isinstance(problem, Problem) else None

    def problem_category(self, problem: Any) -> str:
        """The group a problem's evaluation figures are also reported in (a benchmark's category, e.g.
        BFCL's `simple_python`); "" for none."""
        return ""


class Counts:
    """Opt-in: cooperation metrics, the 0/1 facts per scored joint action the trainer averages per turn,
    and the task's own per-step counters."""

    outcome_names: tuple[str, ...] = ()  # the keys of `outcome_counts`
    headline_outcome: tuple[str, str] | None = None  # (label, outcome name) the progress bar shows per step
    reward_terms: Any = None  # (declared by `Scoring`: the reward functions' terms are counted too)

    def outcome_counts(self, reward: Any) -> dict[str, float]:
        """0/1 facts about one scored joint action, keyed by `outcome_names`, that the trainer averages
        per turn and logs as rates (`<name>`, `turn_<t>/<name>`, `eval/...`): e.g. helper calls."""
        return {}

    @property
    def count_names(self) -> tuple[str, ...]:
        """What the trainer averages per turn: `outcome_names`, each reward function's `reward/<name>` and
        their `reward/weighted_sum`."""
        return (*self.outcome_names, *(self.reward_terms.metric_names if self.reward_terms else ()))

    def counts(self, reward: Any) -> dict[str, float]:
        """`outcome_counts(reward)` and each reward function's value of it, keyed by `count_names`."""
        out = dict(self.outcome_counts(reward))
        if self.reward_terms:
            out.update(self.reward_terms.metrics(reward))
        return out

    def metrics(self) -> dict[str, float]:
        """Counters since the last call (e.g. judge calls and fallbacks), logged per step as `task/<name>`."""
        return {}


class Configured(ABC):
    """Opt-in: what the config layer asks of a registered task's class (options, agents, sandbox)."""

    num_agents: int
    role_names: list[str]
    options_type: type | None = None  # the dataclass of its options, `task.<name>.*` (None: it has none)
    needs_reward_funcs: bool = False  # its reward comes only from task.reward_funcs (the text task)
    needs_sandbox: bool = True  # it runs model-written code in the sandbox (False: the run starts none)

    @classmethod
    def validate_options(cls, options: Any) -> None:
        """Raise `comlrl.errors.ConfigError` naming `task.<name>.<key>` for a value its type allows but the
        task cannot use (called at load time, for the chosen task only)."""
        return None

    @classmethod
    def resolve_options(cls, options: Any, num_turns: int, model_name: str = "") -> Any:
        """The options the run uses: a copy with defaults that depend on the run filled in (the actions
        task's max_turns: null = magrpo.num_turns; a game's `base` seat: model.name, `model_name`);
        `options` itself is left unchanged."""
        return options

    @classmethod
    def agents_for(cls, task_cfg: TaskConfig) -> int:
        """How many agents this task has under the `task` config section (magrpo.num_agents must match)."""
        return cls.num_agents

    @classmethod
    def roles_for(cls, task_cfg: TaskConfig) -> list[str]:
        """The role names under the `task` config section (what exports call the agents)."""
        return list(cls.role_names)

    @classmethod
    def from_config(cls, task_cfg: TaskConfig, sandbox: Any) -> Any:
        """The task for the `task` config section, scoring through `sandbox` (how `build_task` makes
        every registered task; override to read options such as `task.<name>.*`)."""
        return cls(sandbox)  # type: ignore[call-arg]


class SplitRoles(ABC):
    """Opt-in: whether one policy may write every role's part in one completion (algorithm.name=centralized),
    and how such a completion splits into the roles' parts."""

    num_agents: int
    # True where the parts only meet in the score, the prompts and the feedback; False where each agent acts
    # on an environment through its own turns (its transition reads its own messages or state)
    centralizable: bool = False

    def split_roles(self, text: str) -> list[str]:
        """One part per role of a completion that holds every role's answer in tagged sections
        (`<agent_0>...</agent_0>`, comlrl/tree/role_sections.py): how a centralized policy's one completion is
        scored and fed back per role. Never raises; a role without its section gets ""."""
        return role_sections.split_roles(text, self.num_agents)


class FeedbackPrompts(ABC):
    """Opt-in: a task whose later turns the feedback modes build (`external.mode`, through the code tasks'
    adapter comlrl/tasks/code/feedback.py): the texts those prompts reuse."""

    @abstractmethod
    def role_instructions(self, agent: int) -> str:
        """What agent `agent` must write; reused by the feedback prompts of later turns."""

    def problem_statement(self, agent: int, problem: Any) -> str:
        """The problem text agent `agent` sees in every turn: the shared `problem.prompt`, unless the task
        splits the specification between its agents (code_coop: only the helper sees its rule)."""
        return str(problem.prompt)

    def shown_codes(self, history: list[list[str]], reward: Any) -> list[list[str]] | None:
        """What the next turn's prompt shows of each response in `history` (per agent, per turn): the code
        the reward scored (code tasks), or None to show the responses as written."""
        return None

    def revise_instructions(self, agent: int) -> str:
        """The role text of the prompts after turn 1, where an agent also sees its teammates' code."""
        return self.role_instructions(agent)


class TaskDefaults(Scoring, Prompting, EnvironmentState, ProblemInfo, Counts, Configured, SplitRoles, Task):
    """A `Task` with every opt-in protocol but `FeedbackPrompts`, each with its defaults: what the built-in
    tasks and most plugins subclass (they implement `load`, `initial_messages` and `score`)."""
