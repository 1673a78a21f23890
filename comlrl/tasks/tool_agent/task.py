"""One agent that reasons, calls a Python tool, reads the real result and fixes its code (N=1).

Each tool round is a turn of the tree: turn t's completion is reasoning ending in a `<tool_call>` (or a
final answer); `score` runs its code in the sandbox against all the problem's tests (dataset, docstring
examples, edge cases) and the task's own `Transition` (`next_messages`, used instead of the feedback
module) continues the node's chat with the round and its `<tool_response>` and continuation hint. The
reward carries the round's cleaned text and response, so nothing is re-run or cached to build a prompt.
See docs/tool-agent.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from comlrl.errors import require
from comlrl.tasks.base import Problem, Task, TaskDefaults
from comlrl.tasks.datasets import DatasetConfig, easy_path, load_dataset
from comlrl.tasks.tool_agent import environment as tool_env
from comlrl.tasks.tool_agent import prompts, turns
from comlrl.tasks.tool_agent.call_format import STOP_SEQUENCES
from comlrl.tree.contracts import Continuation, Messages, TaskConfig, Transition


@dataclass
class ToolAgentConfig:
    """Options of task.name=tool_agent (`task.tool_agent.*`, docs/tool-agent.md)."""

    doctests: bool = True  # add the prompt's `>>>` examples to the tests
    edge_tests: str | None = None  # JSONL of {"task_id", "tests"}: extra edge-case tests per problem
    format_weight: float = 0.1  # well-formed call (half if repaired); half of it for reasoning first
    fake_response_penalty: float = 0.1  # subtracted when the model writes its own <tool_response>
    max_output_chars: int = 600  # stdout / error shown in a tool response
    show_failed: int = 1  # failing tests shown in a tool response
    hints: bool = True  # a short continuation hint after each tool response


class ToolAgentTask(TaskDefaults):
    """N=1 tool-using coder; `cfg` holds its options (`task.tool_agent`)."""

    num_agents = 1
    role_names = ["coder"]
    stop_strings: tuple[str, ...] = STOP_SEQUENCES  # generation stops after a call (or a fake response)
    options_type = ToolAgentConfig
    centralizable = False  # one agent, whose next turn continues its own chat with the tool's response

    def __init__(self, sandbox: Any = None, cfg: ToolAgentConfig | None = None) -> None:
        self.cfg = cfg if cfg is not None else ToolAgentConfig()
        edge = tool_env.load_edge_tests(self.cfg.edge_tests) if self.cfg.edge_tests else {}
        self.env = tool_env.ToolEnvironment(sandbox, doctests=bool(self.cfg.doctests), edge_tests=edge)

    @classmethod
    def validate_options(cls, options: ToolAgentConfig) -> None:
        ta = options
        require(ta.format_weight >= 0, "task.tool_agent.format_weight", ta.format_weight, "a number >= 0")
        require(ta.fake_response_penalty >= 0, "task.tool_agent.fake_response_penalty", ta.fake_response_penalty,
                "a number >= 0")
        require(ta.max_output_chars >= 50, "task.tool_agent.max_output_chars", ta.max_output_chars, "an integer >= 50")
        require(ta.show_failed >= 0, "task.tool_agent.show_failed", ta.show_failed, "an integer >= 0")

    @classmethod
    def from_config(cls, task_cfg: TaskConfig, sandbox: Any) -> ToolAgentTask:
        return cls(sandbox, task_cfg.options())

    @property
    def reward_range(self) -> tuple[float, float]:  # type: ignore[override]
        return turns.reward_range(self.cfg.format_weight, self.cfg.fake_response_penalty)

    def load(self, dataset_cfg: DatasetConfig) -> tuple[list[Problem], list[Problem]]:
        """The data set's problems; records with an `edge_tests` field add them to the problem's tests."""
        train, evals = load_dataset(dataset_cfg)
        path = easy_path() if dataset_cfg.name == "easy" else dataset_cfg.path
        if dataset_cfg.name in ("easy", "jsonl") and path:
            self.env.add_edge_tests(tool_env.record_edge_tests(path))
        return train, evals

    def role_instructions(self, agent: int) -> str:
        if agent != 0:
            raise IndexError(f"tool_agent has one agent (0), got agent {agent}")
        return prompts.TOOL_INSTRUCTIONS

    def initial_messages(self, problem: Problem) -> list[list[dict[str, str]]]:
        return [prompts.initial_messages(problem)]

    # ---- rounds ---------------------------------------------------------------------------------------
    def rounds(self, items: Sequence[tuple[Problem, str]]) -> list[turns.ToolReward]:
        """The reward (with the cleaned round and the next message) per (problem, completion); runs batched."""
        analyses = [turns.analyze_turn(text, problem.entry_point, problem.prompt) for problem, text in items]
        runnable = [i for i, a in enumerate(analyses) if a.code is not None]
        results = dict(zip(runnable, self.env.run([(items[i][0], analyses[i].code or "") for i in runnable]),
                           strict=True))
        c = self.cfg
        out = []
        for i, analysis in enumerate(analyses):
            result = results.get(i)
            payload, hint = turns.observation(analysis, result, max_output_chars=c.max_output_chars,
                                              show_failed=c.show_failed, hints=c.hints)
            out.append(turns.turn_reward(analysis, result, format_weight=c.format_weight,
                                         fake_response_penalty=c.fake_response_penalty,
                                         response=turns.observation_message(payload, hint)))
        return out

    def score(self, items: list[tuple[Problem, list[str]]]) -> list[Any]:
        """One `ToolReward` per (problem, [completion]); executions run in parallel in the sandbox."""
        for problem, completions in items:
            if len(completions) != 1:
                raise ValueError(f"tool_agent.score: {problem.task_id} has {len(completions)} completions, expected 1")
        return self.rounds([(p, c[0]) for p, c in items])

    def transition(self, configured: Transition) -> Transition:
        return self  # tool responses, not the feedback modes, make the next turn

    def next_messages(self, task: Task, paths: Sequence[Continuation]) -> list[list[Messages]]:
        """The node's chat, then this round (as kept) and its tool response."""
        return [[prompts.continue_messages(c.node.messages[0], c.reward.clean, c.reward.response)] for c in paths]
