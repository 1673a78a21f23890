"""What a feedback mode sees (`FeedbackContext`) and how it is asked to render (`FeedbackOptions`).

Plain data only, so every mode is a pure function of these two records and can be golden-tested
without models, sandboxes or the trainer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from comlrl.errors import require
from feedback.results import CodeResults

SLICE_OF = ("tests", "failing")
CONTEXTS = ("minimal", "full")
Message = dict[str, str]
Messages = list[Message]


@dataclass
class ExternalConfig:
    """The `external` config section: how the next turn's prompts are built (docs/feedback.md)."""

    mode: str = "level_feedback"  # level_feedback | level_passed | passed | plain | expert_edits | registered
    sandbox_slice: Any = 1  # 1 first assert, n>0 first n, 0/null/'all' all, n<0 last |n|
    sandbox_slice_of: str = "tests"  # tests: slice all eval asserts (with outcomes) | failing: only failing ones
    passed_context: str = "minimal"  # passed/level_passed: minimal (own code + outcome) | full (+ teammates, history)
    include_original_prompt: bool = True
    include_history: bool = True
    expert_edits_model: str = "deepseek:deepseek-coder"
    expert_fallback: str = "level_feedback"
    expert_timeout_s: float = 60.0
    expert_max_retries: int = 3  # the SDK's transport retries, and retries of a reply that does not parse
    expert_concurrency: int = 4
    expert_max_tokens: int = 512
    expert_cache_dir: str | None = None  # null = ~/.cache/comlrl/expert_edits, "off" disables


def normalize_slice(value: Any) -> int | None:
    """`external.sandbox_slice` as an int (first n / last |n|) or None for all asserts."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("all", "none", "null")):
        return None
    try:
        n = int(value) if isinstance(value, int | str) and not isinstance(value, bool) else None
    except ValueError:
        n = None
    require(n is not None, "external.sandbox_slice", value, "an integer, 0, 'all' or null")
    return None if n == 0 else n


@dataclass(frozen=True)
class FeedbackContext:
    """One joint action of turn t and the one sandbox execution that scored it.

    `history[i]` holds agent i's previous responses, oldest first; the last one is being revised.
    `codes[i][t]` is the code the task extracted from `history[i][t]`; the last one is the code the
    reward scored, so prompts show the code that ran. Feedback never parses responses itself: without
    `codes` the responses are shown as written. `reward` is what the built-in modes read (`CodeResults`,
    which `comlrl.tasks.code.reward.CodeReward` satisfies); a mode registered for a task of its own gets
    that task's reward here. `entry_point` is optional and only names the function in the instructions.
    `agent_problems[i]`, when given, is the problem text agent i sees instead of `problem` (a task that
    splits the specification between its agents: `Task.problem_statement`).
    """

    problem: str
    role_names: list[str]
    role_instructions: list[str]
    initial_messages: list[Messages]
    history: list[list[str]]
    reward: CodeResults
    entry_point: str = ""
    codes: list[list[str]] | None = None
    agent_problems: list[str] | None = None

    def __post_init__(self) -> None:
        n = len(self.role_names)
        if n < 1:
            raise ValueError("FeedbackContext needs at least one agent (role_names is empty)")
        for name, value in (("role_instructions", self.role_instructions), ("history", self.history)):
            if len(value) != n:
                raise ValueError(f"FeedbackContext.{name} has {len(value)} entries for {n} agents")
        if self.initial_messages and len(self.initial_messages) != n:
            raise ValueError(f"FeedbackContext.initial_messages has {len(self.initial_messages)} entries "
                             f"for {n} agents")
        if self.agent_problems is not None and len(self.agent_problems) != n:
            raise ValueError(f"FeedbackContext.agent_problems has {len(self.agent_problems)} entries for {n} agents")
        if any(len(h) == 0 for h in self.history):
            raise ValueError("FeedbackContext.history needs at least one previous response per agent")
        if self.codes is not None and [len(c) for c in self.codes] != [len(h) for h in self.history]:
            raise ValueError("FeedbackContext.codes needs one code per response in history (same shape)")

    @property
    def num_agents(self) -> int:
        return len(self.role_names)

    def problem_for(self, agent: int) -> str:
        """The problem text agent `agent` sees: its own part of the specification, or the shared one."""
        return self.problem if self.agent_problems is None else self.agent_problems[agent]

    def team_problem(self) -> str:
        """Every distinct part of the problem, in agent order: what a reviewer of the whole team sees."""
        return "\n\n".join(dict.fromkeys(self.problem_for(a).strip("\n") for a in range(self.num_agents)))

    def latest(self, agent: int) -> str:
        """The response being revised."""
        return self.history[agent][-1]

    def code(self, agent: int, turn: int = -1) -> str:
        """The code of agent `agent`'s response at `turn` (default: the latest, i.e. the scored code)."""
        source = self.codes if self.codes is not None else self.history
        return source[agent][turn]


@dataclass(frozen=True)
class FeedbackOptions:
    """Rendering switches from `external.*` plus caps that keep prompts inside the token budget."""

    sandbox_slice: int | str | None = 1
    sandbox_slice_of: str = "tests"  # tests: the slice of all eval asserts, with outcomes | failing: of failing ones
    passed_context: str = "minimal"  # passed / level_passed: minimal (own latest code) | full (as level_feedback)
    include_original_prompt: bool = True
    include_history: bool = True
    max_problem_chars: int = 2000
    max_code_chars: int = 1500
    max_history_chars: int = 600  # per older attempt; the latest attempt gets max_code_chars
    max_assert_chars: int = 200
    max_error_chars: int = 200
    max_edit_chars: int = 1200
    max_shown_asserts: int = 10  # hard cap even for sandbox_slice='all'

    @classmethod
    def from_config(cls, external_cfg: ExternalConfig) -> FeedbackOptions:
        """Read the `external` config section."""
        slice_of = str(external_cfg.sandbox_slice_of)
        context = str(external_cfg.passed_context)
        for key, value, allowed in (("sandbox_slice_of", slice_of, SLICE_OF), ("passed_context", context, CONTEXTS)):
            if value not in allowed:
                raise ValueError(f"external.{key}={value!r} is not allowed; expected one of: {', '.join(allowed)}")
        return cls(
            sandbox_slice=external_cfg.sandbox_slice,
            sandbox_slice_of=slice_of,
            passed_context=context,
            include_original_prompt=bool(external_cfg.include_original_prompt),
            include_history=bool(external_cfg.include_history),
        )


def cap(text: str, limit: int) -> str:
    """Keep head and tail of a long text: errors show up at both ends of code and tracebacks."""
    text = text if isinstance(text, str) else str(text)
    if limit <= 0 or len(text) <= limit:
        return text
    marker = f"\n... [{len(text) - limit} characters cut] ...\n"
    head = (limit * 2) // 3
    tail = limit - head
    return text[:head].rstrip() + marker + text[len(text) - tail :].lstrip()


def one_line(text: Any, limit: int) -> str:
    """Error messages on one line, capped (multi-line tracebacks would swamp a small model)."""
    s = " ".join(str(text or "").split())
    return s if len(s) <= limit else s[: max(0, limit - 3)] + "..."

