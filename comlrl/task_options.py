"""The option sections of the built-in tasks that have options (`task.tool_agent`, `task.actions`).

Kept apart from the run schema (comlrl/config.py) so each task's knobs sit in one place; `config.py`
validates their values at load time like every other key.
"""

from __future__ import annotations

from dataclasses import dataclass


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
