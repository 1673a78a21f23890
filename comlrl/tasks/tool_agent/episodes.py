"""Multi-round tool-agent episodes outside the tree trainer: generate, run, answer, repeat.

Episodes of a batch advance in lock step (one backend call per round for all of them), so a local model
generates them as one batch and a server gets concurrent requests. An episode ends with a final answer
(a round without a tool call that contains the function) or after `max_rounds` rounds. The same
`turns` functions as the trainer's `tool_agent` task analyse, run, answer and score every round.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from comlrl.tasks.base import Problem
from comlrl.tasks.tool_agent.backends import ChatBackend, ChatResult
from comlrl.tasks.tool_agent.call_blocks import find_tool_calls
from comlrl.tasks.tool_agent.call_format import STOP_SEQUENCES, ToolCall
from comlrl.tasks.tool_agent.environment import ToolEnvironment
from comlrl.tasks.tool_agent.prompts import Messages, conversation, initial_messages
from comlrl.tasks.tool_agent.turns import (
    ToolReward,
    TurnAnalysis,
    analyze_turn,
    observation,
    observation_message,
    run_error,
    turn_reward,
)
from sandbox.untrusted_source import parse

RECORD_FORMATS = ("full", "chat", "training")


@dataclass
class Round:
    """One round: the completion, what it did, the sandbox run, the tool's answer and the round's reward."""

    completion: ChatResult
    analysis: TurnAnalysis
    result: Any  # sandbox.results.ExecResult | None
    payload: dict[str, Any]
    hint: str
    reward: ToolReward

    @property
    def observation(self) -> str:
        """The message the model reads after this round."""
        return observation_message(self.payload, self.hint)

    @property
    def failed(self) -> bool:
        """The tool reported a problem: an unreadable call, a run error or failing tests."""
        if self.analysis.kind == "bad_call":
            return True
        return self.result is not None and (run_error(self.result) is not None or not self.result.all_passed)


@dataclass
class Episode:
    """One problem's multi-round trace."""

    problem: Problem
    first: Messages
    rounds: list[Round] = field(default_factory=list)
    finish: str | None = None  # "final" (answered) | "max_rounds"

    @property
    def done(self) -> bool:
        return self.finish is not None

    def _pairs(self, canonical: bool = False) -> list[tuple[str, str]]:
        """(assistant text, observation) per round; the last round's observation was never shown."""
        out = []
        for i, r in enumerate(self.rounds):
            shown = not self.done or i < len(self.rounds) - 1
            out.append((canonical_text(r.analysis) if canonical else r.analysis.clean, r.observation if shown else ""))
        return out

    def messages(self, canonical: bool = False) -> Messages:
        """The chat so far (what the model sees next, or the whole episode once done)."""
        return conversation(self.first, self._pairs(canonical))

    def text(self, canonical: bool = False) -> str:
        """The full interleaved trace: rounds and injected tool responses in order."""
        return "\n".join(part for a, obs in self._pairs(canonical) for part in (a, obs) if part)

    def final_round(self) -> Round | None:
        """The round whose code counts: the final answer, else the last round that ran code."""
        with_code = [r for r in self.rounds if r.analysis.code is not None]
        if self.finish == "final" and self.rounds and self.rounds[-1].analysis.kind == "final":
            return self.rounds[-1]
        return with_code[-1] if with_code else None

    def metrics(self) -> dict[str, Any]:
        """Per-trace figures: think blocks, tool calls, code iterations, errors, tests, success, ideal."""
        rounds = self.rounds
        calls = [r for r in rounds if r.analysis.kind in ("tool_call", "bad_call")]
        codes = [_code_key(r.analysis.code) for r in rounds if r.analysis.code is not None]
        iterations = sum(1 for i, c in enumerate(codes) if i == 0 or c != codes[i - 1])
        last = self.final_round()
        result = last.result if last is not None else None
        passed, total = (int(result.passed), int(result.total)) if result is not None else (0, 0)
        success = bool(result is not None and result.all_passed)
        fixes = sum(1 for a, b in zip(rounds, rounds[1:], strict=False) if a.failed and _better(a, b))
        observed_fix = any(r.failed for r in rounds[:-1]) and success
        well_formed = bool(rounds) and all(r.analysis.well_formed for r in rounds)
        return {
            "rounds": len(rounds),
            "think_blocks": sum(r.analysis.think_blocks for r in rounds),
            "tool_calls": len(calls),
            "malformed_calls": sum(r.analysis.kind == "bad_call" for r in rounds),
            "repaired_calls": sum(r.analysis.kind == "tool_call" and r.analysis.call_repair != "strict"
                                  for r in rounds),
            "fake_responses": sum(r.analysis.fake_responses for r in rounds),
            "extra_calls_dropped": sum(r.analysis.extra_calls for r in rounds),
            "code_iterations": iterations,
            "had_errors": any(r.analysis.kind == "bad_call" or run_error(r.result) is not None for r in rounds),
            "fixes": fixes,
            "tests_passed": passed,
            "tests_total": total,
            "success": success,
            "well_formed": well_formed,
            "ideal": bool(success and observed_fix and well_formed),
            "final_answer": self.finish == "final",
            "finish": self.finish,
            "reward_sum": round(sum(r.reward.total for r in rounds), 6),
            "completion_tokens": sum(r.completion.completion_tokens for r in rounds),
        }

    def record(self, backend: str = "", fmt: str = "full", attempt: int = 0) -> dict[str, Any]:
        """The JSONL record in one of RECORD_FORMATS.

        full: the trace with per-round details; chat: the conversation, one message per round and tool
        response; training: the prompt and ONE assistant message holding the whole interleaved trace (tool
        responses inline), for models trained to write a trace in one pass. chat and training rewrite
        repaired calls as well-formed JSON.
        """
        metrics = self.metrics()
        base = {"task_id": self.problem.task_id, "entry_point": self.problem.entry_point, "backend": backend,
                "attempt": attempt}
        if fmt == "chat":
            return {**base, "messages": self.messages(canonical=True), "metrics": metrics}
        if fmt == "training":
            trace = {"role": "assistant", "content": self.text(canonical=True)}
            return {**base, "messages": [*self.first, trace], "metrics": metrics}
        if fmt != "full":
            raise ValueError(f"record format {fmt!r}; expected one of {', '.join(RECORD_FORMATS)}")
        last = self.final_round()
        rounds = []
        for r in self.rounds:
            row: dict[str, Any] = {
                "completion": r.completion.text, "finish_reason": r.completion.finish_reason,
                "stop": r.completion.stop, "kind": r.analysis.kind, "call_repair": r.analysis.call_repair,
                "code": r.analysis.code, "tool_response": r.observation, "reward": r.reward.total,
                "reward_components": r.reward.components,
                "tests_passed": r.reward.tests_passed, "tests_total": r.reward.tests_total,
            }
            if r.completion.logprobs is not None:
                row["tokens"] = list(r.completion.tokens or ())
                row["logprobs"] = list(r.completion.logprobs)
            rounds.append(row)
        return {**base, "text": self.text(), "messages": self.messages(), "rounds": rounds,
                "final_code": last.analysis.code if last is not None else None, "metrics": metrics}


def _code_key(code: str) -> str:
    """Formatting-independent identity of a code version (the final answer re-states the tested code)."""
    try:
        return ast.dump(parse(code))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return code.strip()


def _better(a: Round, b: Round) -> bool:
    """Round b improved on round a: more tests pass, or it runs cleanly where a did not."""
    if b.result is None:
        return False
    if a.result is None:
        return b.result.passed > 0 or run_error(b.result) is None
    return b.result.passed > a.result.passed or (run_error(a.result) is not None and run_error(b.result) is None)


def canonical_text(analysis: TurnAnalysis) -> str:
    """The round with a repaired call rewritten as well-formed JSON (for fine-tuning data)."""
    if not isinstance(analysis.call, ToolCall) or analysis.call.well_formed:
        return analysis.clean
    spans = find_tool_calls(analysis.clean)
    return analysis.clean[: spans[0].start] + analysis.call.render() if spans else analysis.clean


@dataclass(frozen=True)
class EpisodeSettings:
    """Reward and tool-response knobs (the same meaning as `task.tool_agent.*`)."""

    format_weight: float = 0.1
    fake_response_penalty: float = 0.1
    max_output_chars: int = 600
    show_failed: int = 1
    hints: bool = True


def run_episodes(
    backend: ChatBackend,
    problems: Sequence[Problem],
    env: ToolEnvironment,
    *,
    max_rounds: int = 4,
    settings: Any = None,
    stop: Sequence[str] = STOP_SEQUENCES,
    answer_prefix: str = "",
) -> list[Episode]:
    """One episode per problem, all advanced together round by round.

    `answer_prefix` starts every round's answer (a trailing assistant message the backend continues): a
    model too small to follow the system prompt's format on its own can be started inside it.
    """
    s = settings if settings is not None else EpisodeSettings()
    episodes = [Episode(p, initial_messages(p)) for p in problems]
    opening = [{"role": "assistant", "content": answer_prefix}] if answer_prefix else []
    for index in range(max_rounds):
        active = [e for e in episodes if not e.done]
        if not active:
            break
        completions = backend.complete([e.messages() + opening for e in active], stop=stop)
        analyses = [analyze_turn(c.text, e.problem.entry_point, e.problem.prompt)
                    for e, c in zip(active, completions, strict=True)]
        runnable = [i for i, a in enumerate(analyses) if a.code is not None]
        ran = env.run([(active[i].problem, analyses[i].code or "") for i in runnable])
        results = dict(zip(runnable, ran, strict=True))
        for i, (ep, comp, analysis) in enumerate(zip(active, completions, analyses, strict=True)):
            result = results.get(i)
            payload, hint = observation(analysis, result, max_output_chars=s.max_output_chars,
                                        show_failed=s.show_failed, hints=s.hints)
            reward = turn_reward(analysis, result, format_weight=s.format_weight,
                                 fake_response_penalty=s.fake_response_penalty,
                                 response=observation_message(payload, hint))
            ep.rounds.append(Round(comp, analysis, result, payload, hint, reward))
            if analysis.kind == "final":
                ep.finish = "final"
            elif index == max_rounds - 1:
                ep.finish = "max_rounds"
    return episodes


def dumps(record: dict[str, Any]) -> str:
    """One JSONL line (non-ASCII kept, anything odd rendered with repr)."""
    return json.dumps(record, ensure_ascii=False, default=repr)
