"""The multi-turn environment of the action task: executes a turn's joint actions and returns the next state.

A trajectory's state is the replay of its joint actions: every state lives in its own scratch directory
(copied from its parent's, then changed by the turn's actions), with its own API state, so sibling
trajectories of a turn tree never see each other's files or calls, and the same history always gives the
same state.
"""

from __future__ import annotations

import copy
import hashlib
import http.client
import itertools
import json
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from comlrl.tasks.actions.checks import CheckContext, CheckResult, evaluate_checks
from comlrl.tasks.actions.harness import run_in_sandbox
from comlrl.tasks.actions.http_api import TRAJECTORY_HEADER, ApiServer, ApiSpec, ApiState
from comlrl.tasks.actions.parser import ActionError, parse_actions
from comlrl.tasks.actions.registry import REGISTRY, ActionContext, ActionRegistry, Observation
from comlrl.tasks.actions.taskfile import ActionProblem
from comlrl.tasks.actions.workspace import Workspace, WorkspaceError
from feedback.context import cap

MAX_OBS_CHARS = 1500


@dataclass(frozen=True)
class ActionOutcome:
    type: str
    ok: bool
    text: str
    novel: bool = True  # first time this exact action (type + parameters) ran in the trajectory


@dataclass(frozen=True)
class AgentTurn:
    agent: int
    role: str
    prose: str
    outcomes: tuple[ActionOutcome, ...]
    errors: tuple[ActionError, ...]
    skipped: int = 0  # valid actions not run because the task was completed earlier in the turn


@dataclass(frozen=True)
class TurnRecord:
    turn: int
    agents: tuple[AgentTurn, ...]
    after_done: bool = False  # the trajectory had already ended: nothing ran


@dataclass
class TrajectoryState:
    """Everything after replaying a history; `dir/files` is the workspace."""

    key: str
    task_id: str
    dir: Path
    api: ApiState
    history: tuple[tuple[str, ...], ...] = ()
    transcript: tuple[TurnRecord, ...] = ()
    done: bool = False
    finished_by: str | None = None  # complete_task | turn_limit
    summary: str = ""
    seen: frozenset[str] = frozenset()
    checks: tuple[CheckResult, ...] = ()

    @property
    def turn(self) -> int:
        return len(self.history)

    def workspace(self) -> Workspace:
        return Workspace(self.dir / "files")


def trajectory_key(task_id: str, history: Iterable[Sequence[str]]) -> str:
    """sha256 of the task and each turn's texts: equal histories share one state."""
    h = hashlib.sha256(task_id.encode())
    for texts in history:
        h.update(b"\x01" + json.dumps(list(texts), ensure_ascii=False).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def render_turn(record: TurnRecord, limit: int = MAX_OBS_CHARS) -> str:
    """The observations of one turn, as the agents read them in the next prompt."""
    if record.after_done:
        return "The task was already completed; nothing was executed."
    lines = []
    for at in record.agents:
        for o in at.outcomes:
            lines.append(f"[{at.role}] {o.type}: {'ok' if o.ok else 'FAILED'}\n{cap(o.text, limit // 2)}")
        for e in at.errors:
            lines.append(f"[{at.role}] action error ({e.kind}): {e.message}")
        if at.skipped:
            lines.append(f"[{at.role}] {at.skipped} action(s) skipped: the task was already completed")
    return cap("\n".join(lines) or "No actions.", limit * 2)


class Environment:
    """Executes joint actions: parse each agent's answer, run its actions in the state's copy, check."""

    def __init__(
        self,
        *,
        registry: ActionRegistry | None = None,
        sandbox: Any = None,
        role_names: Sequence[str] = ("agent",),
        max_actions_per_turn: int = 3,
        max_turns: int = 4,
        root: str | os.PathLike[str] | None = None,
        http_timeout_s: float = 5.0,
    ) -> None:
        self.registry = REGISTRY if registry is None else registry
        self.sandbox = sandbox
        self.role_names = list(role_names)
        self.max_actions = int(max_actions_per_turn)
        self.max_turns = int(max_turns)
        self.http_timeout_s = float(http_timeout_s)
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="comlrl-actions-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self._live: dict[str, tuple[ApiSpec, ApiState]] = {}
        self._live_lock = threading.Lock()
        self._dirs = itertools.count()
        self.server = ApiServer(self._lookup)
        self._finalizer = weakref.finalize(self, _cleanup, self.server, self.root)

    # -- API plumbing ----------------------------------------------------------------------------------

    def _lookup(self, key: str) -> tuple[ApiSpec, ApiState] | None:
        with self._live_lock:
            return self._live.get(key)

    def api_call(self, problem: ActionProblem, state: TrajectoryState, method: str, url: str, body: Any) -> Observation:
        """A real HTTP request to the loopback server, only for the task's allowed hosts."""
        if problem.api is None:
            return Observation(False, "this task has no API: api_call is not available")
        try:
            parts = urlsplit(url.strip())
            host = (parts.hostname or "").lower()
            port = parts.port
        except ValueError as exc:
            return Observation(False, f"invalid URL {url!r}: {exc}")
        allowed = ", ".join(problem.api.hosts)
        if parts.scheme not in ("http", "https"):
            return Observation(False, f"only http(s) URLs are allowed (got {url!r}); use http://{problem.api.hosts[0]}/...")
        if host not in problem.api.hosts or parts.username or parts.password or port not in (None, 80, 443):
            return Observation(False, f"host {host or url!r} is not allowed; allowed hosts: {allowed}")
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Host": host, TRAJECTORY_HEADER: state.key, "Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=self.http_timeout_s)
        try:
            conn.request(method, path, body=payload, headers=headers)
            resp = conn.getresponse()
            data = resp.read(65536).decode("utf-8", errors="replace")
            status = resp.status
        except (OSError, http.client.HTTPException) as exc:
            return Observation(False, f"{method} {url} failed: {type(exc).__name__}: {exc}")
        finally:
            conn.close()
        return Observation(200 <= status < 300, f"{method} {url} -> HTTP {status}\n{cap(data, 1200)}",
                           {"status": status, "body": data})

    # -- states ----------------------------------------------------------------------------------------

    def _new_dir(self, key: str) -> Path:
        """A fresh directory per state (two states of one history never share one)."""
        with self._live_lock:
            n = next(self._dirs)
        return self.root / f"{key[:24]}-{n}"

    def reset(self, problem: ActionProblem) -> TrajectoryState:
        """The initial state: a fresh workspace with the task's files and an empty API state."""
        key = trajectory_key(problem.task_id, ())
        d = self._new_dir(key)
        ws = Workspace(d / "files")
        for path, content in problem.files:
            ws.write(path, content)
        state = TrajectoryState(key, problem.task_id, d, ApiState())
        state.checks = self.check(problem, state)
        return state

    def discard(self, state: TrajectoryState) -> None:
        shutil.rmtree(state.dir, ignore_errors=True)

    def check(self, problem: ActionProblem, state: TrajectoryState) -> tuple[CheckResult, ...]:
        ctx = CheckContext(state.workspace().snapshot(), state.api, state.finished_by == "complete_task", self.sandbox)
        return evaluate_checks(problem.checks, ctx)

    def step(self, problem: ActionProblem, parent: TrajectoryState, texts: Sequence[str]) -> TrajectoryState:
        """The state after one joint action (agent 0's actions first). Never raises on model output."""
        history = (*parent.history, tuple(texts))
        key = trajectory_key(problem.task_id, history)
        turn = len(history)
        d = self._new_dir(key)
        ws = Workspace(parent.dir / "files").copy_to(d / "files")
        api = copy.deepcopy(parent.api)
        state = TrajectoryState(key, problem.task_id, d, api, history, parent.transcript, parent.done,
                                parent.finished_by, parent.summary, parent.seen)
        if parent.done:
            state.transcript = (*parent.transcript, TurnRecord(turn, (), after_done=True))
            state.checks = parent.checks
            return state
        seen = set(parent.seen)
        agents: list[AgentTurn] = []
        with self._live_lock:
            if problem.api is not None:
                self._live[key] = (problem.api, api)
        try:
            for a, text in enumerate(texts):
                role = self.role_names[a] if a < len(self.role_names) else f"agent{a}"
                parsed = parse_actions(text, self.registry, self.max_actions)
                ctx = ActionContext(
                    workspace=ws, agent=a, role=role,
                    run_python=lambda code, _ws=ws: self._run_python(_ws, code),
                    api_call=lambda m, u, b, _s=state: self.api_call(problem, _s, m, u, b),
                    extra={"problem": problem, "state": state},
                )
                outcomes: list[ActionOutcome] = []
                skipped = 0
                for action in parsed.actions:
                    if state.done:
                        skipped += 1
                        continue
                    atype = self.registry.get(action.type)
                    assert atype is not None  # parse_actions only returns registered types
                    obs = atype.execute(action, ctx)
                    k = action.key()
                    outcomes.append(ActionOutcome(action.type, obs.ok, obs.text, novel=k not in seen))
                    seen.add(k)
                    if obs.ok and (obs.terminal or atype.terminal):
                        state.done, state.finished_by = True, "complete_task"
                        state.summary = str(dict(obs.data).get("summary", ""))
                agents.append(AgentTurn(a, role, parsed.prose, tuple(outcomes), parsed.errors, skipped))
        finally:
            with self._live_lock:
                self._live.pop(key, None)
        if not state.done and turn >= self.max_turns:
            state.done, state.finished_by = True, "turn_limit"
        state.seen = frozenset(seen)
        state.transcript = (*parent.transcript, TurnRecord(turn, tuple(agents)))
        state.checks = self.check(problem, state)
        return state

    def replay(self, problem: ActionProblem, history: Sequence[Sequence[str]]) -> TrajectoryState:
        """The state of a history from scratch (intermediate states are discarded)."""
        state = self.reset(problem)
        for texts in history:
            nxt = self.step(problem, state, texts)
            self.discard(state)
            state = nxt
        return state

    def _run_python(self, ws: Workspace, code: str) -> Observation:
        run = run_in_sandbox(self.sandbox, code, ws.snapshot())
        kept, refused = [], []
        for path, content in run.files.items():
            try:
                ws.write(path, content)
                kept.append(path)
            except WorkspaceError as exc:
                refused.append(f"{path} ({exc})")
        text = run.render()
        if refused:
            text += "\nfiles not kept: " + "; ".join(refused)
        return Observation(run.ok, text, {"stdout": run.stdout, "error": run.error, "files": kept})

    def close(self) -> None:
        self._finalizer()


def _cleanup(server: ApiServer, root: Path) -> None:
    try:
        server.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
