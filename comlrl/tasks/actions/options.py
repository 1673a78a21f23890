"""The actions task's options (`task.actions.*`, docs/agentic-tasks.md) and their checks."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from comlrl.errors import require


@dataclass
class ActionsTaskConfig:
    """Options of task.name=actions (docs/agentic-tasks.md)."""

    file: str | None = None  # task file (JSONL); null = the bundled comlrl/data/action_tasks.jsonl
    judge: str = "rule"  # rule | openai:<m> | anthropic:<m> | openai-compatible:<m>@<url> | ollama:<m>@<url>
                         # | local:<m> | deepseek:<m>
    judge_prompt: str | None = None  # a text file with the LLM judge's rubric (system prompt); null = built-in
    judge_reward: float = 2.0  # trajectory-end reward for a perfect judge score
    weight_completion: float = 0.5
    weight_quality: float = 0.2
    weight_efficiency: float = 0.15
    weight_creativity: float = 0.15
    action_reward: float = 0.05  # per valid, successful action not already run in the trajectory
    format_penalty: float = 0.2  # per agent turn with an invalid or missing action
    max_actions_per_turn: int = 3
    max_turns: int | None = None  # trajectory turn limit; null = magrpo.num_turns
    judge_timeout_s: float = 30.0
    judge_max_retries: int = 2
    judge_max_tokens: int = 300
    judge_cache_dir: str | None = None  # null = ~/.cache/comlrl/judge, "off" disables


def validate_options(a: ActionsTaskConfig) -> None:
    """task.actions.*: numbers in range, a judge named, a rubric only for an LLM judge."""
    require(bool(str(a.judge).strip()), "task.actions.judge", a.judge, "rule or a judge spec like openai:<model>")
    for key, value in (("judge_reward", a.judge_reward), ("weight_completion", a.weight_completion),
                       ("weight_quality", a.weight_quality), ("weight_efficiency", a.weight_efficiency),
                       ("weight_creativity", a.weight_creativity), ("action_reward", a.action_reward),
                       ("format_penalty", a.format_penalty)):
        require(math.isfinite(value) and value >= 0, f"task.actions.{key}", value, "a finite number >= 0")
    weights = a.weight_completion + a.weight_quality + a.weight_efficiency + a.weight_creativity
    require(weights > 0 or a.judge_reward == 0, "task.actions.weight_completion", a.weight_completion,
            "weights with a positive sum (or task.actions.judge_reward=0)")
    require(a.max_actions_per_turn >= 1, "task.actions.max_actions_per_turn", a.max_actions_per_turn,
            "an integer >= 1")
    require(a.max_turns is None or a.max_turns >= 1, "task.actions.max_turns", a.max_turns, "an integer >= 1 or null")
    require(a.judge_timeout_s > 0, "task.actions.judge_timeout_s", a.judge_timeout_s, "a number > 0")
    require(a.judge_max_retries >= 0, "task.actions.judge_max_retries", a.judge_max_retries, "an integer >= 0")
    require(a.judge_max_tokens >= 16, "task.actions.judge_max_tokens", a.judge_max_tokens, "an integer >= 16")
    require(a.judge_prompt is None or str(a.judge).strip() != "rule", "task.actions.judge_prompt", a.judge_prompt,
            "null with task.actions.judge=rule (the rule-based judge reads no prompt)")


def resolve_options(a: ActionsTaskConfig, num_turns: int) -> ActionsTaskConfig:
    """The options with max_turns null resolved to the run's `magrpo.num_turns` (a copy)."""
    return a if a.max_turns is not None else replace(a, max_turns=num_turns)
