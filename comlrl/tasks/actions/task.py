"""task.name=actions: two agents answer each scripted user turn with prose + JSON actions in a workspace.

N=2 so that align and cross modes differ: agent 0, the **operator**, carries out the request; agent 1, the
**reviewer**, checks and completes the work (its actions run after the operator's in the same turn). A
joint action is one answer per agent; its state is the replay of the trajectory's joint actions in a
scratch workspace of its own (see comlrl/tasks/actions/environment.py).

Reward of a joint action (one turn):

    action_reward x (valid, successful actions not already run in this trajectory, both agents)
  - format_penalty x (agents whose answer had a malformed, unknown, schema-violating or missing action)
  + judge_reward x weighted judge score in [0, 1]      only on the turn the trajectory ends
                                                        (complete_task, or the turn limit)

Turns after a trajectory ended execute nothing and score 0.

How a joint action finds its state: the tree node it was sampled at holds it (`Node.state`; a root's is
`initial_state`, a fresh workspace), `score_turns` steps it with the joint action and returns the state
it leaves, which the trainer keeps on the node for the child turn and for `next_messages` (this task is
its own `Transition`: observations, not feedback modes, make the next turn). The task only tracks the
states it made so `begin_rollout` and `close` remove their directories.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from comlrl.errors import ConfigError
from comlrl.tasks.actions import options as actions_options
from comlrl.tasks.actions import prompts
from comlrl.tasks.actions.environment import Environment, TrajectoryState, render_turn, trajectory_key
from comlrl.tasks.actions.judge import (
    JUDGE_SYSTEM,
    Judge,
    JudgeOptions,
    JudgeRequest,
    JudgeScores,
    load_judge_prompt,
    make_judge,
)
from comlrl.tasks.actions.options import ActionsTaskConfig
from comlrl.tasks.actions.registry import REGISTRY, ActionRegistry
from comlrl.tasks.actions.taskfile import ActionProblem, TaskFileError, load_action_tasks
from comlrl.tasks.base import Task, TaskDefaults
from comlrl.tasks.datasets import DatasetConfig, DatasetError, split_problems
from comlrl.tree.contracts import Continuation, JointTurn, Messages, TaskConfig, Transition
from sandbox.executor import Sandbox

log = logging.getLogger("comlrl.tasks.actions")

ROLE_NAMES = ["operator", "reviewer"]
OPERATOR_INSTRUCTIONS = (
    "You are the operator: you carry out the user's request in the workspace (read and write files, run "
    "Python, call the task's API)."
)
REVIEWER_INSTRUCTIONS = (
    "You are the reviewer: the operator's actions run just before yours in each turn, in the same workspace. "
    "Check its work (read files, test with run_python, query the API), fix small problems, and call "
    "complete_task with a short summary when the user's request is fully met."
)


def bundled_tasks_path() -> Path:
    """comlrl/data/action_tasks.jsonl, shipped with the package."""
    return Path(__file__).resolve().parents[2] / "data" / "action_tasks.jsonl"


@dataclass(frozen=True)
class ActionReward:
    """The reward of one joint action: `.total`, a breakdown, the checks and (at the end) the judge's scores.

    `tests_passed`/`tests_total` count the success checks so run outputs record them; `components` holds
    every number (judge scores as `judge/<criterion>`), which trees.jsonl keeps per joint action.
    """

    total: float
    components: dict[str, float]
    all_passed: bool
    tests_passed: int
    tests_total: int
    done: bool
    task_id: str
    state_key: str
    turn: int
    judge: JudgeScores | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    actions: tuple[str, ...] = ()  # per agent, the actions it ran this turn ("type ok|failed" lines)

    @property
    def scored(self) -> tuple[str, ...]:
        return self.actions


def _resolve_local(name: str) -> str:
    """`local:` judge models resolve like the policy's model names (aliases, local dirs)."""
    from comlrl.models import resolve_model_path

    return str(resolve_model_path(name))


class ActionsTask(TaskDefaults):
    """Operator + reviewer acting on a workspace through structured actions, judged at the end."""

    num_agents = 2
    role_names = ROLE_NAMES
    stop_strings = prompts.STOP_STRINGS  # generation ends with the answer's ```json block
    head_messages = prompts.HEAD_MESSAGES  # a history cut keeps the system prompt, demonstration and task
    centralizable = False  # each agent acts on the workspace in its own turn and sees its own observations

    def __init__(self, sandbox: Any = None, options: ActionsTaskConfig | None = None, *, judge: Judge | None = None,
                 registry: ActionRegistry | None = None, root: str | None = None) -> None:
        o = options if options is not None else ActionsTaskConfig()
        self.sandbox = sandbox
        self.file = o.file or str(bundled_tasks_path())
        self.action_reward = float(o.action_reward)
        self.format_penalty = float(o.format_penalty)
        self.judge_reward = float(o.judge_reward)
        self.max_actions = int(o.max_actions_per_turn)
        self.max_turns = int(o.max_turns or 4)
        self.weights = {"task_completion": float(o.weight_completion), "action_quality": float(o.weight_quality),
                        "efficiency": float(o.weight_efficiency), "creativity": float(o.weight_creativity)}
        self.registry = registry if registry is not None else REGISTRY
        if judge is None:
            from comlrl.llm import LLMError

            try:
                rubric = load_judge_prompt(o.judge_prompt) if o.judge_prompt else JUDGE_SYSTEM
                jo = JudgeOptions(timeout_s=float(o.judge_timeout_s), max_retries=int(o.judge_max_retries),
                                  max_tokens=int(o.judge_max_tokens), cache_dir=o.judge_cache_dir, system_prompt=rubric)
                judge = make_judge(str(o.judge), jo, resolve_local=_resolve_local)
            except (LLMError, ValueError) as exc:
                raise ConfigError(f"config error: {exc}") from None
        self.judge = judge
        n = self.num_agents
        self.reward_range = (-n * self.format_penalty,
                             n * self.max_actions * self.action_reward + self.judge_reward)
        self.env = Environment(registry=self.registry, sandbox=sandbox, role_names=ROLE_NAMES,
                               max_actions_per_turn=self.max_actions, max_turns=self.max_turns, root=root)
        self._problems: dict[str, ActionProblem] = {}
        self._live: list[TrajectoryState] = []  # states made since the last rollout began (their directories)
        self.judgements: list[dict[str, Any]] = []  # every trajectory-end judgement, in order

    options_type = ActionsTaskConfig  # task.actions.*

    @classmethod
    def validate_options(cls, options: ActionsTaskConfig) -> None:
        actions_options.validate_options(options)

    @classmethod
    def resolve_options(cls, options: ActionsTaskConfig, num_turns: int, model_name: str = "") -> ActionsTaskConfig:
        return actions_options.resolve_options(options, num_turns)

    @classmethod
    def from_config(cls, task_cfg: TaskConfig, sandbox: Any) -> ActionsTask:
        return cls(sandbox, task_cfg.options())

    # -- data + prompts ---------------------------------------------------------------------------------

    def load(self, dataset_cfg: DatasetConfig) -> tuple[list[ActionProblem], list[ActionProblem]]:
        """Tasks of `task.actions.file`; dataset.eval_size / max_problems / seed split them (name/path unused)."""
        try:
            problems = load_action_tasks(self.file)
        except TaskFileError as exc:
            raise DatasetError(f"task.actions.file: {exc}") from None
        for p in problems:
            self._problems[p.task_id] = p
        train, evals = split_problems(problems, int(dataset_cfg.eval_size), int(dataset_cfg.seed))
        if dataset_cfg.max_problems is not None:
            train = train[: int(dataset_cfg.max_problems)]
        return train, evals  # type: ignore[return-value]

    def role_instructions(self, agent: int) -> str:
        if agent == 0:
            return OPERATOR_INSTRUCTIONS
        if agent == 1:
            return REVIEWER_INSTRUCTIONS
        raise IndexError(f"actions has agents 0 (operator) and 1 (reviewer), got agent {agent}")

    def system_prompt(self, agent: int, problem: ActionProblem) -> str:
        return prompts.system_prompt(self.role_instructions(agent), problem, self.registry, self.max_actions)

    def initial_messages(self, problem: ActionProblem) -> list[list[dict[str, str]]]:
        """Per agent: system prompt, a demonstration exchange, turn 1 (see comlrl/tasks/actions/prompts.py)."""
        self._problems.setdefault(problem.task_id, problem)
        return [prompts.initial_messages(self.system_prompt(a, problem), problem) for a in range(self.num_agents)]

    def problem_id(self, problem: ActionProblem) -> str:
        return problem.task_id

    def messages_for(self, problem: ActionProblem, state: TrajectoryState) -> list[list[dict[str, str]]]:
        """Each agent's chat after `state`: its own earlier answers, then observations + the next user turn."""
        out = []
        ended = sum(not r.after_done for r in state.transcript) if state.done else None
        for a, msgs in enumerate(self.initial_messages(problem)):
            for rec, texts in zip(state.transcript, state.history, strict=True):
                msgs.append({"role": "assistant", "content": texts[a]})
                if ended is not None and rec.turn >= ended:
                    nxt = "The task is finished. Reply with a one-sentence closing remark; no action is needed."
                else:
                    nxt = problem.user_turn(rec.turn + 1) + prompts.reminder(problem, rec.turn + 1)
                msgs.append({"role": "user", "content": f"Results of turn {rec.turn}:\n{render_turn(rec)}\n\n{nxt}"})
            out.append(msgs)
        return out

    # -- states ------------------------------------------------------------------------------------------

    def _problem(self, task_id: str) -> ActionProblem:
        if task_id not in self._problems:
            raise KeyError(f"actions: unknown task {task_id!r} (load() or initial_messages() registers tasks)")
        return self._problems[task_id]

    def _made(self, state: TrajectoryState) -> TrajectoryState:
        self._live.append(state)
        return state

    def initial_state(self, problem: ActionProblem) -> TrajectoryState:
        """A fresh workspace with the task's files: the state of a tree's root."""
        self._problems.setdefault(problem.task_id, problem)
        return self._made(self.env.reset(problem))

    def state(self, problem: ActionProblem, history: tuple[tuple[str, ...], ...]) -> TrajectoryState:
        """The state after replaying `history` from a fresh workspace: for tools and tests that hold only
        texts (the trainer keeps each path's state on its tree node and never replays)."""
        self._problems.setdefault(problem.task_id, problem)
        return self._made(self.env.replay(problem, history))

    def begin_rollout(self) -> None:
        """Forget every state (their directories are removed): the previous rollout's trees are done."""
        for st in self._live:
            self.env.discard(st)
        self._live.clear()

    # -- scoring -----------------------------------------------------------------------------------------

    def score(self, items: list[Any]) -> list[ActionReward]:
        """One ActionReward per (problem, completions per agent[, history]) item; no history = a first turn."""
        return self.score_paths([(it[0], list(it[1]), tuple(tuple(t) for t in it[2]) if len(it) >= 3 else ())
                                 for it in items])

    def score_paths(self, items: list[tuple[ActionProblem, list[str], tuple[tuple[str, ...], ...]]]
                    ) -> list[ActionReward]:
        """Rewards of joint actions whose earlier turns are given as texts (replayed; see `state`)."""
        turns = [JointTurn(problem, tuple(texts), self.state(problem, history)) for problem, texts, history in items]
        return [reward for reward, _ in self.score_turns(turns)]

    def score_turns(self, turns: Sequence[JointTurn]) -> list[tuple[ActionReward, TrajectoryState]]:
        """(reward, state after) per joint action, each stepped from its node's state; equal paths run once."""
        keys: list[str] = []
        todo: dict[str, tuple[ActionProblem, TrajectoryState, tuple[str, ...]]] = {}
        for t in turns:
            if not isinstance(t.state, TrajectoryState):
                raise ValueError(f"actions: joint action of {t.problem.task_id} has no state (initial_state makes one)")
            self._problems.setdefault(t.problem.task_id, t.problem)
            key = trajectory_key(t.problem.task_id, (*t.state.history, tuple(t.texts)))
            keys.append(key)
            todo.setdefault(key, (t.problem, t.state, tuple(t.texts)))
        jobs = list(todo.values())
        pool_size = self.sandbox.workers if isinstance(self.sandbox, Sandbox) else 1
        workers = max(1, min(8, int(pool_size or 1) * 2, len(jobs)))
        if workers == 1:
            done = [self.env.step(p, par, texts) for p, par, texts in jobs]
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="actions") as pool:
                done = list(pool.map(lambda job: self.env.step(*job), jobs))
        states = {key: self._made(st) for key, st in zip(todo, done, strict=True)}
        ending = [k for k, st in states.items() if st.done and not st.transcript[-1].after_done]
        scores: dict[str, JudgeScores] = {}
        if ending:
            reqs = [JudgeRequest.from_state(self._problem(states[k].task_id), states[k], self.max_turns)
                    for k in ending]
            for k, s in zip(ending, self.judge.score_many(reqs), strict=True):
                scores[k] = s
        rewards = {k: self._reward(st, scores.get(k)) for k, st in states.items()}
        return [(rewards[k], states[k]) for k in keys]

    def _reward(self, st: TrajectoryState, judged: JudgeScores | None) -> ActionReward:
        rec = st.transcript[-1]
        ok = failed = novel = agents_with_errors = errors = 0
        for at in rec.agents:
            ok += sum(o.ok for o in at.outcomes)
            failed += sum(not o.ok for o in at.outcomes)
            novel += sum(o.ok and o.novel for o in at.outcomes)
            errors += len(at.errors)
            agents_with_errors += bool(at.errors)
        r_actions = self.action_reward * novel
        r_format = -self.format_penalty * agents_with_errors
        passed = sum(c.passed for c in st.checks)
        comps: dict[str, float] = {
            "actions": r_actions, "format": r_format, "judge": 0.0,
            "actions_ok": float(ok), "actions_failed": float(failed), "format_errors": float(errors),
            "checks_passed": float(passed), "checks_total": float(len(st.checks)),
            "done": float(st.done), "after_done": float(rec.after_done),
            "success": float(bool(st.checks) and passed == len(st.checks)),
        }
        notes: list[str] = []
        if judged is not None:
            comps["judge"] = self.judge_reward * judged.weighted(self.weights)
            comps.update({f"judge/{k}": v for k, v in judged.as_dict().items()})
            comps["judge/llm"] = float(not judged.source.startswith("rule"))
            notes.append(f"judge {judged.source}: {judged.rationale}")
            self.judgements.append({"task_id": st.task_id, "state": st.key, "turn": st.turn,
                                    "finished_by": st.finished_by, "source": judged.source,
                                    **judged.as_dict(), "rationale": judged.rationale,
                                    "reward": comps["judge"]})
        total = r_actions + r_format + comps["judge"]
        actions = tuple("\n".join(f"{o.type} {'ok' if o.ok else 'failed'}" for o in at.outcomes) for at in rec.agents)
        return ActionReward(total, comps, comps["success"] == 1.0, passed, len(st.checks), st.done, st.task_id,
                            st.key, st.turn, judged, tuple(notes), actions)

    # -- next turn -----------------------------------------------------------------------------------------

    def transition(self, configured: Transition) -> Transition:
        return self  # the environment's observations, not the feedback modes, make the next turn

    def next_messages(self, task: Task, paths: Sequence[Continuation]) -> list[list[Messages]]:
        """Next-turn chats of the joint actions that continue, from the states they left."""
        return [self.messages_for(c.problem, c.state) for c in paths]

    def metrics(self) -> dict[str, float]:
        return self.judge.metrics()

    def close(self) -> None:
        self.begin_rollout()  # drops every state and its directory
        self.judge.close()
        self.env.close()
