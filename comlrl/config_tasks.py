"""The task section's option groups (`task.tool_agent`, `task.actions`, `task.text`) and the checks of the
reward functions (`task.reward_funcs`, `task.reward_weights`, `task.text.*`); `comlrl.config` holds them
in its one schema and calls `validate_rewards` from `validate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolAgentConfig:
    """Options of task.name=tool_agent (docs/tool-agent.md)."""

    doctests: bool = True  # add the prompt's `>>>` examples to the tests
    edge_tests: str | None = None  # JSONL of {"task_id", "tests"}: extra edge-case tests per problem
    format_weight: float = 0.1  # well-formed call (half if repaired); half of it for reasoning first
    fake_response_penalty: float = 0.1  # subtracted when the model writes its own <tool_response>
    max_output_chars: int = 600  # stdout / error shown in a tool response
    show_failed: int = 1  # failing tests shown in a tool response
    hints: bool = True  # a short continuation hint after each tool response


@dataclass
class ActionsTaskConfig:
    """Options of task.name=actions (docs/agentic-tasks.md)."""

    file: str | None = None  # task file (JSONL); null = the bundled comlrl/data/action_tasks.jsonl
    judge: str = "rule"  # rule | openai:<m> | anthropic:<m> | openai-compatible:<m>@<url> | ollama:<m>@<url> | local:<m> | deepseek:<m>
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


@dataclass
class TextTaskConfig:
    """Options of task.name=text: N agents answer each row's prompt, scored by task.reward_funcs (docs/reward-functions.md)."""

    roles: list[str] = field(default_factory=lambda: ["answerer"])  # one name per agent (= magrpo.num_agents)
    instructions: list[str] | None = None  # per agent, a line after the prompt (its role); null = none
    system_prompt: str | None = None  # a system message before every agent's prompt; null = none
    pass_threshold: float | None = None  # a joint action passes (pass rates, eval pass@1) at total >= this


def validate_rewards(cfg: Any) -> None:
    """task.reward_funcs import and name distinct functions, task.reward_weights match them, task.text fits."""
    from comlrl.config import ConfigError  # here: comlrl.config imports this module
    from comlrl.reward_funcs import component_name, resolve

    t = cfg.task
    funcs, weights = list(t.reward_funcs), t.reward_weights
    names: dict[str, str] = {}
    for spec in funcs:
        resolve(spec)
        name = component_name(spec)
        if name in names:
            raise ConfigError(f"config error: task.reward_funcs: {spec!r} and {names[name]!r} are both named {name!r} "
                              "(each function's name is its component in the rewards); rename one")
        names[name] = spec
    if weights is not None and (len(weights) != len(funcs) or not all(math.isfinite(w) for w in weights)):
        raise ConfigError(f"config error: task.reward_weights={list(weights)!r} is not allowed; expected "
                          f"{len(funcs)} finite numbers (one per task.reward_funcs entry) or null")
    if t.name != "text":
        return
    x = t.text
    if not x.roles or not all(isinstance(r, str) and r.strip() for r in x.roles):
        raise ConfigError(f"config error: task.text.roles={x.roles!r} is not allowed; expected a non-empty list of "
                          "role names (one per agent)")
    if x.instructions is not None and len(x.instructions) != len(x.roles):
        raise ConfigError(f"config error: task.text.instructions has {len(x.instructions)} entries; expected "
                          f"{len(x.roles)} (one per task.text.roles entry) or null")
    if x.pass_threshold is not None and not math.isfinite(x.pass_threshold):
        raise ConfigError(f"config error: task.text.pass_threshold={x.pass_threshold!r} is not allowed; expected a "
                          "finite number or null")
