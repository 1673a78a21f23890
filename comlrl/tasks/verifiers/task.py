"""`task.name=verifiers`: episodes of a verifiers environment, in its own rollout loop and scored by its own
rubric (docs/verifiers.md).

The environment lives in a worker process of the interpreter that has verifiers (`task.verifiers.python`;
comlrl/tasks/verifiers/worker.py). A problem is one row of the environment's dataset. Each episode is the
environment's own `run_rollout` on that row; every model call it makes comes back here as the next turn's prompt
(the environment's messages), the run's engine samples it from the current policy, and the reply goes back into
the episode. The tokens the update trains on are the ones the engine sampled. An episode's coroutine cannot be
copied, so the episodes of a row are independent (`rollout.shape=flat`, required): G episodes form the root's
group and every later turn is trained with its episode's advantage. The rubric's reward arrives when the episode
ends; earlier turns score 0.
"""

from __future__ import annotations

import itertools
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from comlrl.errors import ConfigError, require
from comlrl.tasks.datasets import DatasetConfig
from comlrl.tasks.episodes import EpisodeReward, EpisodeTask
from comlrl.tasks.verifiers.channel import Channel
from comlrl.tree.contracts import Continuation, JointTurn, Messages, Task, TaskConfig

log = logging.getLogger("comlrl")


@dataclass
class VerifiersOptions:
    """Options of task.name=verifiers (`task.verifiers.*`, docs/verifiers.md)."""

    env: str | None = None  # an installed environment's id (verifiers' load_environment), or module:Class
    args: dict[str, Any] = field(default_factory=dict)  # the environment's arguments
    python: str | None = None  # the interpreter that has verifiers (0.3.0); null = this run's
    answer_prefix: str = ""  # how every reply starts
    stop: list[str] = field(default_factory=list)  # a reply ends after one of these
    timeout_s: float = 300.0  # the worker answers a request within this (a level of the tree's episodes)


@dataclass(frozen=True)
class RowProblem:
    """One row of the environment's dataset (`split`: train or eval)."""

    split: str
    row: int


@dataclass
class Episode:
    """A node's episode: its id in the worker (None once it ended), the row, and the messages it asks with."""

    problem: RowProblem
    messages: Messages
    id: str | None = None
    done: bool = False
    error: str = ""  # why an episode ended before its first model call

    @property
    def ended(self) -> bool:
        return self.done


class VerifiersTask(EpisodeTask):
    """One agent in a verifiers environment; `cfg` holds its options (`task.verifiers`)."""

    options_type = VerifiersOptions

    def __init__(self, cfg: VerifiersOptions | None = None) -> None:
        super().__init__()
        self.cfg = cfg if cfg is not None else VerifiersOptions()
        require(bool(self.cfg.env), "task.verifiers.env", self.cfg.env,
                "an installed verifiers environment's id, or module:Class")
        self.stop_strings = tuple(self.cfg.stop)
        self.channel = Channel(self.cfg.python or sys.executable, self.cfg.timeout_s)
        loaded = self.channel.ask({"op": "load", "env": self.cfg.env, "args": self.cfg.args})
        if "error" in loaded:
            self.channel.close()
            raise ConfigError(f"config error: task.verifiers.env={self.cfg.env!r} cannot be loaded "
                              f"(interpreter {self.channel.python}): {_load_error(loaded['error'])}")
        self.sizes = (int(loaded["train"]), int(loaded["eval"]))
        self.max_turns = int(loaded["max_turns"])
        log.info("verifiers %s: %s with %d training and %d held-out rows (up to %s turns an episode)",
                 loaded.get("verifiers"), loaded.get("env"), *self.sizes, self.max_turns or "unbounded")
        self._ids = itertools.count()
        self._open: set[str] = set()  # episodes of the current batch of trees, dropped when the next starts
        self._roots: dict[RowProblem, Episode] = {}  # root episodes made for their prompts, until the rollout
        self._warned = False

    @classmethod
    def validate_options(cls, options: VerifiersOptions) -> None:
        require(options.env is None or bool(options.env.strip()), "task.verifiers.env", options.env,
                "an installed verifiers environment's id, or module:Class")
        require(options.timeout_s > 0, "task.verifiers.timeout_s", options.timeout_s, "a number of seconds > 0")

    @classmethod
    def from_config(cls, task_cfg: TaskConfig, sandbox: Any) -> VerifiersTask:
        return cls(task_cfg.options())

    # ---- problems ----------------------------------------------------------------------------------------
    def load(self, dataset_cfg: DatasetConfig) -> tuple[list[RowProblem], list[RowProblem]]:
        """Training rows of the environment's dataset (dataset.max_problems of them), held-out rows of its eval
        dataset (dataset.eval_size); an environment without an eval dataset gives its last rows instead, and
        they are not trained on."""
        train, held = self.sizes
        want = dataset_cfg.eval_size
        if held:
            evals = [RowProblem("eval", i) for i in range(min(want, held))]
        else:
            require(want < train, "dataset.eval_size", want,
                    f"below the environment's {train} rows (it has no eval dataset: held-out rows come from its end)")
            evals, train = [RowProblem("train", i) for i in range(train - want, train)], train - want
        n = min(train, dataset_cfg.max_problems or train)
        return [RowProblem("train", i) for i in range(n)], evals

    def problem_id(self, problem: RowProblem) -> str:
        return f"{problem.split}-{problem.row}"

    # ---- episodes ----------------------------------------------------------------------------------------
    def _start(self, problems: Sequence[RowProblem]) -> list[tuple[str, dict[str, Any]]]:
        """New episodes of these rows, each at its first model call (or already over)."""
        ids = [f"e{next(self._ids)}" for _ in problems]
        self._open.update(ids)
        answer = self.channel.ask({"op": "open", "episodes": [[i, p.split, p.row] for i, p in
                                                              zip(ids, problems, strict=True)]})
        return self._events(answer)

    def _events(self, answer: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        if "error" in answer:
            raise ConfigError(f"task.verifiers.env={self.cfg.env!r}: the worker refused a request: {answer['error']}")
        out = [(str(i), event) for i, event in answer["events"]]
        self._open.difference_update(i for i, e in out if "done" in e)
        return out

    def initial_state(self, problem: RowProblem) -> Episode:
        """The root's episode: the one its prompt was made from, else a new one of its row."""
        made = self._roots.pop(problem, None)
        if made is not None:
            return made
        ((episode, event),) = self._start([problem])
        if "done" in event:  # over before its first model call (its setup failed, or it refused the request)
            return Episode(problem, [], None, done=True, error=_early(event))
        return Episode(problem, event["ask"], episode)

    def initial_messages(self, problem: RowProblem) -> list[Messages]:
        state = self._roots.get(problem) or self.initial_state(problem)
        self._roots[problem] = state
        return [state.messages]

    def begin_rollout(self) -> None:
        """A new batch of trees: drop the episodes the previous one left running (the tree ended first)."""
        if self._open:
            self._count("episodes_unfinished", len(self._open))
            if not self._warned:
                self._warned = True
                log.warning("verifiers: %d episode(s) were still running when the tree's last turn came and score "
                            "0 (the environment takes up to %s turns: set magrpo.num_turns at least that; counted "
                            "as task/episodes_unfinished)", len(self._open), self.max_turns or "unbounded")
            self.channel.ask({"op": "drop", "ids": sorted(self._open)})
            self._open.clear()
        self._roots.clear()

    def score_turns(self, turns: Sequence[JointTurn]) -> list[tuple[EpisodeReward, Any]]:
        """Every joint action's reply sent into its own episode at once: a root's first joint action goes on in the
        root's episode, the others in new episodes of the same row."""
        episodes, early = self._episodes([t.state for t in turns])
        replies = [t.texts[0] for t in turns]
        live = [(i, e) for i, e in enumerate(episodes) if e is not None]
        answer = self.channel.ask({"op": "reply", "replies": [[e, {"content": replies[i], "finish_reason": "stop"}]
                                                              for i, e in live]}) if live else {"events": []}
        events = dict(self._events(answer))
        out: list[tuple[EpisodeReward, Any]] = []
        for i, (state, episode, reply) in enumerate(zip([t.state for t in turns], episodes, replies, strict=True)):
            event = events.get(episode) if episode is not None else {"done": {"reward": 0.0, "metrics": {},
                                                                                "error": early.get(i, state.error)}}
            assert event is not None
            if "ask" in event:
                out.append((EpisodeReward(0.0, {}, (), reply), Episode(state.problem, event["ask"], episode)))
                continue
            done = event["done"]
            error = done.get("error")
            if error:
                self._count("episode_errors")
                log.warning("verifiers: an episode ended with an error and scores its rubric's %.3g: %s",
                            done["reward"], str(error).splitlines()[0][:300])
            reward = float(done["reward"])
            out.append((EpisodeReward(reward, {"env": reward, **done.get("metrics", {})},
                                      (str(error),) if error else (), reply, ended=True, failed=bool(error)),
                        Episode(state.problem, [], None, done=True)))
        return out

    def _episodes(self, states: Sequence[Episode]) -> tuple[list[str | None], dict[int, str]]:
        """An episode per joint action: a node's own for its first, new ones of the same row for the rest (their
        first prompt should be the node's: counted as task/prompt_mismatch when it is not); and, by index, why
        a new one ended before its first model call."""
        taken: set[str] = set()
        early: dict[int, str] = {}
        out: list[str | None] = [None] * len(states)
        fresh: list[int] = []
        for i, state in enumerate(states):
            if state.id is None or state.id in taken:
                fresh.append(i)
            else:
                taken.add(state.id)
                out[i] = state.id
        fresh = [i for i in fresh if not states[i].done and states[i].messages]
        if fresh:
            for i, (episode, event) in zip(fresh, self._start([states[i].problem for i in fresh]), strict=True):
                if "done" in event:
                    early[i] = _early(event)
                    continue
                if event["ask"] != states[i].messages:
                    self._count("prompt_mismatch")  # a later turn's node: its new episode starts at the first turn
                out[i] = episode
        return out, early

    def next_messages(self, task: Task, paths: Sequence[Continuation]) -> list[list[Messages]]:
        """What the environment asks with next (its conversation so far, its response included)."""
        return [[c.state.messages] for c in paths]

    def close(self) -> None:
        self.channel.close()


def _early(event: dict[str, Any]) -> str:
    return str(event["done"].get("error") or "the episode ended before its first model call")


def _load_error(error: str) -> str:
    if error.startswith("ModuleNotFoundError") and "'verifiers'" in error:
        return "verifiers is not installed in it (bash scripts/install_verifiers.sh, docs/verifiers.md)"
    return error
