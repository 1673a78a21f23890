"""Trajectory-end judges: an LLM (a `comlrl.llm` chat client) or rules from success checks.

Both score a finished trajectory on four criteria, 0-10 each:

    task_completion   is the user's request done (the success checks)?
    action_quality    were the actions valid, correct and well chosen?
    efficiency        was the work done without wasted turns or failed actions?
    creativity        did the agents find a good, resourceful approach?

`make_judge(spec)` builds one from `task.actions.judge`:

    rule                                    the offline default (RuleJudge)
    openai:<model> | anthropic:<model> | deepseek:<model>
    openai-compatible:<model>@<base_url> | ollama:<model>@<base_url>
    local:<path or alias>                   an LLMJudge on that chat client
    <provider>:<model>                      the same on a provider registered with
                                            `comlrl.config.registry.register_provider`
    <name>[:<arg>]                          a judge registered with `register_judge`

An LLM judge answers with a JSON object; a reply that is not one, a score outside 0-10, a timeout or an
HTTP error is retried (transport errors by the official SDK, or for `ollama:` its client by the same rules;
cached once valid) and, when every attempt failed, that trajectory is scored by the rule-based judge
instead (`source == "rule-fallback"`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from comlrl.llm import (
    ChatClient,
    Counters,
    LLMError,
    LLMSettings,
    cache_dir_setting,
    make_client,
    provider_names,
    spec_forms,
)
from comlrl.llm.reach import check_reachable
from comlrl.tasks.actions.checks import CheckResult
from comlrl.tasks.actions.environment import TrajectoryState
from comlrl.tasks.actions.parser import json_objects
from comlrl.tasks.actions.taskfile import ActionProblem
from feedback.context import cap

SCORE_KEYS = ("task_completion", "action_quality", "efficiency", "creativity")
DEFAULT_CACHE_DIR = Path("~/.cache/comlrl/judge")


@dataclass(frozen=True)
class JudgeScores:
    """Four 0-10 scores, where they came from, and the judge's one-line reason."""

    task_completion: float
    action_quality: float
    efficiency: float
    creativity: float
    source: str = "rule"
    rationale: str = ""

    def as_dict(self) -> dict[str, float]:
        """The four scores by name, in SCORE_KEYS order."""
        return {"task_completion": float(self.task_completion), "action_quality": float(self.action_quality),
                "efficiency": float(self.efficiency), "creativity": float(self.creativity)}

    def weighted(self, weights: Mapping[str, float]) -> float:
        """Weighted mean of the scores scaled to [0, 1]."""
        total = sum(max(0.0, float(weights.get(k, 0.0))) for k in SCORE_KEYS)
        if total <= 0:
            return 0.0
        scores = self.as_dict()
        return sum(max(0.0, float(weights.get(k, 0.0))) * scores[k] for k in SCORE_KEYS) / (10.0 * total)


@dataclass(frozen=True)
class JudgeRequest:
    """What a judge sees of one finished trajectory."""

    task_id: str
    pattern: str
    goal: str
    transcript: str
    checks: tuple[CheckResult, ...]
    turns_used: int
    max_turns: int
    actions_ok: int
    actions_failed: int
    format_errors: int
    action_types: tuple[str, ...]  # distinct types of the successful actions
    completed: bool  # complete_task was called
    summary: str = ""

    @classmethod
    def from_state(cls, problem: ActionProblem, state: TrajectoryState, max_turns: int) -> JudgeRequest:
        ok = failed = errors = 0
        types: list[str] = []
        lines = []
        for rec in state.transcript:
            if rec.after_done:
                continue
            lines.append(f"--- turn {rec.turn} ---\nuser: {cap(problem.user_turn(rec.turn), 400)}")
            for at in rec.agents:
                if at.prose:
                    lines.append(f"{at.role}: {cap(at.prose, 300)}")
                for o in at.outcomes:
                    ok += o.ok
                    failed += not o.ok
                    if o.ok and o.type not in types:
                        types.append(o.type)
                    lines.append(f"{at.role} -> {o.type} [{'ok' if o.ok else 'failed'}]: {cap(o.text, 300)}")
                for e in at.errors:
                    errors += 1
                    lines.append(f"{at.role} -> invalid action ({e.kind}): {cap(e.message, 200)}")
        used = sum(1 for r in state.transcript if not r.after_done)
        return cls(problem.task_id, problem.pattern, problem.goal, cap("\n".join(lines), 6000), state.checks, used,
                   max_turns, ok, failed, errors, tuple(types), state.finished_by == "complete_task", state.summary)


class Judge:
    """Scores finished trajectories; subclasses implement `score_many`."""

    name = "judge"

    def score_many(self, requests: Sequence[JudgeRequest]) -> list[JudgeScores]:
        raise NotImplementedError

    def score(self, request: JudgeRequest) -> JudgeScores:
        return self.score_many([request])[0]

    def metrics(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        """Release clients (no-op by default)."""
        return None


class RuleJudge(Judge):
    """Offline scores from the success checks and the action log.

    task_completion = 10 x fraction of checks passed; action_quality = 10 x successful / attempted actions
    (invalid ones count as attempted); efficiency = task_completion scaled down by each turn after the
    first; creativity = 10 x distinct successful action types / 3, capped (a crude resourcefulness proxy).
    """

    name = "rule"

    def __init__(self, source: str = "rule") -> None:
        self.source = source

    def score_many(self, requests: Sequence[JudgeRequest]) -> list[JudgeScores]:
        return [self._one(r) for r in requests]

    def _one(self, r: JudgeRequest) -> JudgeScores:
        total = len(r.checks)
        frac = sum(c.passed for c in r.checks) / total if total else float(r.completed)
        attempted = r.actions_ok + r.actions_failed + r.format_errors
        quality = r.actions_ok / attempted if attempted else 0.0
        spare = 1.0 - (max(1, r.turns_used) - 1) / max(1, r.max_turns)
        creativity = min(1.0, len(r.action_types) / 3.0)
        failing = [c.description for c in r.checks if not c.passed]
        why = "all checks pass" if not failing else f"{len(failing)}/{total} checks fail: " + "; ".join(failing[:3])
        return JudgeScores(round(10 * frac, 3), round(10 * quality, 3), round(10 * frac * spare, 3),
                           round(10 * creativity, 3), self.source, why)


JUDGE_SYSTEM = (
    "You judge how well a team of AI agents handled a user's request in a sandboxed workspace. Score the whole "
    "trajectory on four criteria, each an integer from 0 (worst) to 10 (best):\n"
    "- task_completion: is the user's request fully done? Use the success checks as strong evidence.\n"
    "- action_quality: were the actions valid, correct and sensible for the situation?\n"
    "- efficiency: was the goal reached without wasted turns, repeated or failed actions?\n"
    "- creativity: did the agents find a resourceful, well-reasoned approach (e.g. verifying their work)?\n"
    'Reply with one JSON object and nothing else: {"task_completion": n, "action_quality": n, '
    '"efficiency": n, "creativity": n, "rationale": "one sentence"}'
)


def judge_messages(r: JudgeRequest, system: str = JUDGE_SYSTEM) -> list[dict[str, str]]:
    """The chat sent to an LLM judge: the rubric (`system`, `task.actions.judge_prompt` replaces it), then the case."""
    checks = "\n".join(f"- [{'pass' if c.passed else 'FAIL'}] {c.description}" for c in r.checks) or "- (none)"
    user = (
        f"Task ({r.pattern}): {r.goal}\n\n"
        f"Transcript ({r.turns_used} of at most {r.max_turns} turns):\n{r.transcript or '(no actions)'}\n\n"
        f"Success checks on the final workspace:\n{checks}\n\n"
        f"Actions: {r.actions_ok} succeeded, {r.actions_failed} failed, {r.format_errors} invalid. "
        f"complete_task called: {'yes' if r.completed else 'no'}"
        + (f" (summary: {cap(r.summary, 300)})" if r.summary else "")
        + "\n\nScore the trajectory now as the JSON object."
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _score_value(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if 0.0 <= v <= 10.0 else None


def parse_judge_scores(text: str) -> dict[str, Any] | None:
    """The scores of a judge reply (the last JSON object holding all four), or None when malformed.

    Malformed: no JSON object, a missing criterion, a non-numeric score, or one outside [0, 10].
    """
    if not isinstance(text, str) or not text.strip():
        return None
    # every value of the reply, left to right; one inside a ``` fence is found like any other
    objs = [value for _, _, value in json_objects(text) if not isinstance(value, json.JSONDecodeError)]
    for obj in reversed(objs):
        if not isinstance(obj, dict) or not all(k in obj for k in SCORE_KEYS):
            continue
        values = {k: _score_value(obj[k]) for k in SCORE_KEYS}
        if any(v is None for v in values.values()):
            return None
        rationale = obj.get("rationale", "")
        return {**values, "rationale": rationale if isinstance(rationale, str) else json.dumps(rationale)}
    return None


class LLMJudge(Judge):
    """Scores through a `ChatClient` (retries, cache, counters); the fallback scores failures."""

    name = "llm"

    def __init__(self, client: ChatClient, fallback: Judge | None = None, system_prompt: str = JUDGE_SYSTEM) -> None:
        self.client = client
        self.system_prompt = system_prompt
        self.fallback = fallback if fallback is not None else RuleJudge("rule-fallback")
        self.fallbacks = 0
        self._lock = threading.Lock()

    def score_many(self, requests: Sequence[JudgeRequest]) -> list[JudgeScores]:
        if not requests:
            return []
        parsed = self.client.complete_many([judge_messages(r, self.system_prompt) for r in requests],
                                           parse_judge_scores, counter_prefix="judge")
        out: list[JudgeScores] = []
        for r, p in zip(requests, parsed, strict=True):
            if p is None:
                with self._lock:
                    self.fallbacks += 1
                self.client.counters.inc("judge/fallbacks")
                out.append(self.fallback.score(r))
            else:
                out.append(JudgeScores(p["task_completion"], p["action_quality"], p["efficiency"], p["creativity"],
                                       self.client.spec, cap(p["rationale"], 300)))
        return out

    def metrics(self) -> dict[str, float]:
        return {k: v for k, v in self.client.metrics().items() if k.startswith("judge/")}

    def close(self) -> None:
        self.client.close()


JudgeFactory = Callable[[str, Mapping[str, Any]], Judge]
JUDGES: dict[str, JudgeFactory] = {}


def register_judge(name: str, factory: JudgeFactory) -> None:
    """Make `task.actions.judge=<name>[:<arg>]` build `factory(arg, options)` (options: make_judge's kwargs)."""
    JUDGES[name] = factory


@dataclass
class JudgeOptions:
    """Client settings of an LLM judge (the `task.actions.judge_*` keys)."""

    timeout_s: float = 30.0
    max_retries: int = 2
    max_tokens: int = 300
    cache_dir: str | None = None  # None = ~/.cache/comlrl/judge, "off" disables
    system_prompt: str = JUDGE_SYSTEM  # the rubric; `load_judge_prompt` reads task.actions.judge_prompt
    concurrency: int = 4
    extra: dict[str, Any] = field(default_factory=dict)  # other LLMSettings fields (temperature, price_per_mtok...)


def make_judge(
    spec: str,
    options: JudgeOptions | None = None,
    *,
    base_url: str | None = None,
    resolve_local: Callable[[str], str] | None = None,
) -> Judge:
    """The judge named by `spec` (see the module docstring). Raises LLMError for a bad spec or key."""
    o = options or JudgeOptions()
    spec = (spec or "").strip()
    if spec in ("", "rule"):
        return RuleJudge()
    name, _, arg = spec.partition(":")
    if name in JUDGES:
        return JUDGES[name](arg, vars(o))
    providers = provider_names()  # the built-in ones and those registered with comlrl.config.registry.register_provider
    if name.lower() not in providers:
        raise LLMError(f"task.actions.judge={spec!r} is not allowed; expected rule, {spec_forms(providers)} "
                       f"or a registered judge ({', '.join(JUDGES) or 'none registered'})")
    settings = LLMSettings(timeout_s=o.timeout_s, max_retries=o.max_retries, concurrency=o.concurrency,
                           max_tokens=o.max_tokens, cache_dir=cache_dir_setting(o.cache_dir, DEFAULT_CACHE_DIR),
                           **o.extra)
    client = make_client(spec, settings, key="task.actions.judge", resolve_local=resolve_local, base_url=base_url,
                         metrics=Counters())
    check_reachable(client.endpoint, "task.actions.judge")  # a judge server that is down: one line at start-up
    return LLMJudge(client, system_prompt=o.system_prompt)


def load_judge_prompt(path: str) -> str:
    """The judge's rubric from a UTF-8 text file (`task.actions.judge_prompt`); one-line ValueError if unusable.

    The reply format stays the four-score JSON object, so the rubric must ask for it (see JUDGE_SYSTEM).
    """
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"task.actions.judge_prompt: cannot read {str(p)!r} ({type(exc).__name__})") from None
    if not text:
        raise ValueError(f"task.actions.judge_prompt: {str(p)!r} is empty")
    missing = [k for k in SCORE_KEYS if k not in text]
    if missing:
        raise ValueError(f"task.actions.judge_prompt: {str(p)!r} never names {', '.join(missing)}; the judge must "
                         "reply with a JSON object holding all four scores, so the prompt has to ask for them")
    return text
