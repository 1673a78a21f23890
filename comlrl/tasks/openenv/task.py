"""`task.name=openenv`: episodes of an OpenEnv environment server, driven through OpenEnv's own client
(docs/openenv.md).

A problem is a reset seed. An OpenEnv session's state lives on its server and cannot be copied, so the episodes
of one seed are independent (`rollout.shape=flat`, required): G sessions reset with the seed form the root's
group, each goes on alone, and every later move is trained with its episode's advantage. The model's reply fills
one field of the action (`action_key`); the observation's fields are the next user message; the environment's
reward is the reward. A session ends with its episode (done) or with the tree's last turn.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from comlrl.errors import ConfigError, RunStopped, require
from comlrl.tasks.datasets import DatasetConfig
from comlrl.tasks.episodes import EpisodeReward, EpisodeTask
from comlrl.tasks.openenv.local_server import LocalServer
from comlrl.tasks.openenv.sessions import EpisodeFailed, Outcome, Sessions
from comlrl.tree.contracts import Continuation, JointTurn, Messages, Task, TaskConfig

log = logging.getLogger("comlrl")
EVAL_SEED_BASE = 1_000_000  # held-out episodes' seeds start here; training seeds are below it
HIDDEN = ("reward", "done", "metadata")  # observation fields that are not shown to the model


@dataclass
class OpenEnvOptions:
    """Options of task.name=openenv (`task.openenv.*`, docs/openenv.md)."""

    url: str | None = None  # a running OpenEnv server (http://host:port)
    app: str | None = None  # or module:attribute of an OpenEnv app (create_app(...)) the run serves on loopback
    action_key: str = "message"  # the action field the model's reply fills
    observation_keys: list[str] | None = None  # the observation fields shown to the model; null = all but
                                               # reward, done and metadata
    instruction: str = ""  # a line after every observation
    answer_prefix: str = ""  # how every reply starts
    stop: list[str] = field(default_factory=list)  # a reply ends after one of these
    reset_kwargs: dict[str, Any] = field(default_factory=dict)  # sent with every reset, beside its seed
    timeout_s: float = 60.0  # a connection or a message waits this long


@dataclass(frozen=True)
class EpisodeProblem:
    seed: int


@dataclass
class Episode:
    """A node's episode: its session (None on a root that has not handed it out yet), the seed, the last
    observation as text, and whether the episode is over."""

    seed: int
    text: str
    client: Any = None
    done: bool = False

    @property
    def ended(self) -> bool:
        return self.done


class OpenEnvTask(EpisodeTask):
    """One agent acting in an OpenEnv environment; `cfg` holds its options (`task.openenv`)."""

    options_type = OpenEnvOptions

    def __init__(self, cfg: OpenEnvOptions | None = None) -> None:
        super().__init__()
        self.cfg = cfg if cfg is not None else OpenEnvOptions()
        require(self.cfg.url is not None or self.cfg.app is not None, "task.openenv.url", None,
                "an http:// URL of a running OpenEnv server, or task.openenv.app (module:attribute) set")
        self.stop_strings = tuple(self.cfg.stop)
        self._open: list[Any] = []  # sessions of the current batch of trees, closed when the next starts
        self._roots: dict[EpisodeProblem, Episode] = {}  # root states made for their prompts, until the rollout
        self.server = LocalServer.start(self.cfg.app) if self.cfg.app else None
        self.url = self.server.url if self.server is not None else str(self.cfg.url)
        self.sessions = Sessions(self.url, self.cfg.timeout_s)
        try:
            self.sessions.close(self.sessions.open(1))  # a server that is down: one line at start-up
        except RunStopped as exc:
            self.close()
            key = "task.openenv.app" if self.cfg.app else "task.openenv.url"
            raise ConfigError(f"config error: {key}={self.cfg.app or self.url!r} cannot be used: {exc}") from None

    @classmethod
    def validate_options(cls, options: OpenEnvOptions) -> None:
        require(options.url is None or options.app is None, "task.openenv.url", options.url,
                "null when task.openenv.app is set (one server: a URL, or an app the run serves)")
        require(options.url is None or options.url.startswith(("http://", "https://")), "task.openenv.url",
                options.url, "an http:// or https:// URL")
        require(options.app is None or ":" in options.app, "task.openenv.app", options.app, "module:attribute")
        require(bool(options.action_key), "task.openenv.action_key", options.action_key, "an action field name")
        require(options.timeout_s > 0, "task.openenv.timeout_s", options.timeout_s, "a number of seconds > 0")

    @classmethod
    def from_config(cls, task_cfg: TaskConfig, sandbox: Any) -> OpenEnvTask:
        return cls(task_cfg.options())

    # ---- problems ----------------------------------------------------------------------------------------
    def load(self, dataset_cfg: DatasetConfig) -> tuple[list[EpisodeProblem], list[EpisodeProblem]]:
        """Training seeds 0.. (dataset.max_problems, default 1000; shifted by dataset.seed), held-out seeds
        from EVAL_SEED_BASE (dataset.eval_size)."""
        n, base = dataset_cfg.max_problems or 1000, dataset_cfg.seed * 10_000
        require(base + n <= EVAL_SEED_BASE, "dataset.max_problems", n, f"at most {EVAL_SEED_BASE - base} seeds")
        return ([EpisodeProblem(base + i) for i in range(n)],
                [EpisodeProblem(EVAL_SEED_BASE + i) for i in range(dataset_cfg.eval_size)])

    def problem_id(self, problem: EpisodeProblem) -> str:
        return f"seed-{problem.seed}"

    # ---- episodes ----------------------------------------------------------------------------------------
    def observation_text(self, observation: dict[str, Any]) -> str:
        """The fields shown to the model: one field's value as it is, several as `name: value` lines."""
        keys = self.cfg.observation_keys or [k for k in observation if k not in HIDDEN]
        shown = {k: observation.get(k, "") for k in keys}
        if len(shown) == 1:
            (value,) = shown.values()
            return value if isinstance(value, str) else json.dumps(value)
        return "\n".join(f"{k}: {v if isinstance(v, str) else json.dumps(v)}" for k, v in shown.items())

    def _user(self, text: str) -> dict[str, str]:
        return {"role": "user", "content": f"{text}\n\n{self.cfg.instruction}".strip()}

    def _reset(self, clients: list[Any], seed: int) -> list[Outcome | EpisodeFailed]:
        return self.sessions.reset(clients, seed=seed, **self.cfg.reset_kwargs)

    def initial_state(self, problem: EpisodeProblem) -> Episode:
        """The root's episode: the one its prompt was made from, else a new session reset with its seed."""
        made = self._roots.pop(problem, None)
        if made is not None:
            return made
        (client,) = self.sessions.open(1)
        self._open.append(client)
        (first,) = self._reset([client], problem.seed)
        if isinstance(first, EpisodeFailed):
            raise RunStopped(f"the OpenEnv server at {self.url} failed to reset seed {problem.seed}: {first}")
        return Episode(problem.seed, self.observation_text(first.observation), client)

    def initial_messages(self, problem: EpisodeProblem) -> list[Messages]:
        state = self._roots.get(problem) or self.initial_state(problem)
        self._roots[problem] = state
        return [[self._user(state.text)]]

    def begin_rollout(self) -> None:
        """A new batch of trees: close the sessions the previous one left open."""
        self.sessions.close(self._open)
        self._open = []
        self._roots.clear()

    def score_turns(self, turns: Sequence[JointTurn]) -> list[tuple[EpisodeReward, Any]]:
        """Every joint action stepped at once, each on its own session: a root's first joint action takes the
        root's session, the others new ones reset with the same seed."""
        clients = self._clients([t.state for t in turns])
        replies = [t.texts[0] for t in turns]
        outcomes = self.sessions.step([c for c, _ in clients], [{self.cfg.action_key: r} for r in replies])
        out = []
        for (client, failed), reply, outcome in zip(clients, replies, outcomes, strict=True):
            outcome = failed or outcome
            if isinstance(outcome, EpisodeFailed):
                self._count("episode_errors")
                log.warning("openenv: an episode failed and ends with reward 0: %s", outcome)
                out.append((EpisodeReward(0.0, {"env": 0.0}, (str(outcome),), reply, ended=True, failed=True),
                            Episode(-1, "", None, done=True)))
                continue
            reward = outcome.reward or 0.0
            state = Episode(-1, self.observation_text(outcome.observation), client, outcome.done)
            out.append((EpisodeReward(reward, {"env": reward}, (), reply, ended=outcome.done), state))
        return out

    def _clients(self, states: Sequence[Episode]) -> list[tuple[Any, EpisodeFailed | None]]:
        """A session per joint action: a root's own for its first, new reset ones for the rest."""
        taken: set[int] = set()
        out: list[tuple[Any, EpisodeFailed | None]] = [(None, None)] * len(states)
        fresh: list[int] = []
        for i, state in enumerate(states):
            if id(state) in taken or state.client is None:
                fresh.append(i)
            else:
                taken.add(id(state))
                out[i] = (state.client, None)
        if fresh:
            clients = self.sessions.open(len(fresh))
            self._open += clients
            by_seed: dict[int, list[int]] = {}
            for i, c in zip(fresh, clients, strict=True):
                out[i] = (c, None)
                by_seed.setdefault(states[i].seed, []).append(i)
            for seed, idx in by_seed.items():
                for i, first in zip(idx, self._reset([out[i][0] for i in idx], seed), strict=True):
                    if isinstance(first, EpisodeFailed):
                        out[i] = (out[i][0], first)
                    elif self.observation_text(first.observation) != states[i].text:
                        self._count("reset_mismatch")  # the seed did not give the root's observation again
        return out

    def next_messages(self, task: Task, paths: Sequence[Continuation]) -> list[list[Messages]]:
        """The node's chat, the reply as the assistant's, then the next observation."""
        return [[[*c.node.messages[0], {"role": "assistant", "content": c.reward.reply}, self._user(c.state.text)]]
                for c in paths]

    def close(self) -> None:
        self.sessions.close(self._open)
        self._open = []
        self.sessions.shutdown()
        if self.server is not None:
            self.server.stop()
