"""One agent that reasons, calls a Python tool, reads the real result and fixes its code (N=1).

Each tool round is a turn of the tree: turn t's completion is reasoning ending in a `<tool_call>` (or a
final answer); `score` runs its code in the sandbox against all the problem's tests (dataset, docstring
examples, edge cases) and `build_next_messages` (used by the trainer instead of the feedback module)
appends the round and the `<tool_response>` with a continuation hint. See docs/tool-agent.md.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

# Modules, not names: comlrl.agentic imports comlrl.tasks submodules, so either package may load first.
from comlrl.agentic import env as tool_env
from comlrl.agentic import prompts, turns
from comlrl.agentic.toolcall import STOP_SEQUENCES
from comlrl.tasks.base import Problem, Task
from comlrl.tasks.datasets import easy_path, load_dataset

CACHE_ROUNDS = 50_000  # scored rounds kept to rebuild later turns' prompts without re-running them


def _default_cfg() -> Any:
    from comlrl.config import ToolAgentConfig

    return ToolAgentConfig()


class ToolAgentTask(Task):
    """N=1 tool-using coder; `cfg` is a `comlrl.config.ToolAgentConfig` (`task.tool_agent`)."""

    num_agents = 1
    role_names = ["coder"]
    stop_strings: tuple[str, ...] = STOP_SEQUENCES  # generation stops after a call (or a fake response)

    def __init__(self, sandbox: Any = None, cfg: Any = None) -> None:
        self.cfg = cfg if cfg is not None else _default_cfg()
        edge = tool_env.load_edge_tests(self.cfg.edge_tests) if self.cfg.edge_tests else {}
        self.env = tool_env.ToolEnvironment(sandbox, doctests=bool(self.cfg.doctests), edge_tests=edge)
        self._problems: dict[tuple[str, str], Problem] = {}
        self._rounds: OrderedDict[tuple[str, str, str], tuple[str, turns.ToolReward]] = OrderedDict()

    @classmethod
    def from_config(cls, task_cfg: Any, sandbox: Any) -> ToolAgentTask:
        return cls(sandbox, getattr(task_cfg, "tool_agent", None))  # options in task.tool_agent

    @property
    def reward_range(self) -> tuple[float, float]:  # type: ignore[override]
        return turns.reward_range(self.cfg.format_weight, self.cfg.fake_response_penalty)

    def load(self, dataset_cfg: Any) -> tuple[list[Problem], list[Problem]]:
        """The data set's problems; records with an `edge_tests` field add them to the problem's tests."""
        train, evals = load_dataset(dataset_cfg)
        path = easy_path() if dataset_cfg.name == "easy" else getattr(dataset_cfg, "path", None)
        if dataset_cfg.name in ("easy", "jsonl") and path:
            self.env.add_edge_tests(tool_env.record_edge_tests(path))
        for p in (*train, *evals):
            self._problems[(p.prompt, p.entry_point)] = p
        return train, evals

    def role_instructions(self, agent: int) -> str:
        if agent != 0:
            raise IndexError(f"tool_agent has one agent (0), got agent {agent}")
        return prompts.TOOL_INSTRUCTIONS

    def initial_messages(self, problem: Problem) -> list[list[dict[str, str]]]:
        self._problems[(problem.prompt, problem.entry_point)] = problem
        return [prompts.initial_messages(problem)]

    # ---- rounds ---------------------------------------------------------------------------------------
    def rounds(self, items: Sequence[tuple[Problem, str]]) -> list[tuple[str, turns.ToolReward]]:
        """(cleaned assistant text, reward with the next message) per (problem, completion); runs batched."""
        out: list[tuple[str, turns.ToolReward] | None] = [None] * len(items)
        todo: list[tuple[int, Any]] = []
        for i, (problem, text) in enumerate(items):
            key = (problem.task_id, problem.prompt, text)
            if key in self._rounds:
                self._rounds.move_to_end(key)
                out[i] = self._rounds[key]
            else:
                todo.append((i, turns.analyze_turn(text, problem.entry_point, problem.prompt)))
        runnable = [(i, a) for i, a in todo if a.code is not None]
        results = dict(zip([i for i, _ in runnable],
                           self.env.run([(items[i][0], a.code or "") for i, a in runnable]), strict=True))
        c = self.cfg
        for i, analysis in todo:
            result = results.get(i)
            payload, hint = turns.observation(analysis, result, max_output_chars=c.max_output_chars,
                                              show_failed=c.show_failed, hints=c.hints)
            reward = turns.turn_reward(analysis, result, format_weight=c.format_weight,
                                       fake_response_penalty=c.fake_response_penalty,
                                       response=turns.observation_message(payload, hint))
            done = (analysis.clean, reward)
            out[i] = done
            problem, text = items[i]
            self._rounds[(problem.task_id, problem.prompt, text)] = done
            while len(self._rounds) > CACHE_ROUNDS:
                self._rounds.popitem(last=False)
        return [r for r in out if r is not None]

    def score(self, items: list[tuple[Problem, list[str]]]) -> list[Any]:
        """One `ToolReward` per (problem, [completion]); executions run in parallel in the sandbox."""
        for problem, completions in items:
            if len(completions) != 1:
                raise ValueError(f"tool_agent.score: {problem.task_id} has {len(completions)} completions, expected 1")
        return [reward for _, reward in self.rounds([(p, c[0]) for p, c in items])]

    def build_next_messages(self, contexts: Sequence[Any]) -> list[list[list[dict[str, str]]]]:
        """Next turn's messages per `feedback.FeedbackContext`: the path's rounds, each with its tool response."""
        flat: list[tuple[Problem, str]] = []
        for ctx in contexts:
            problem = self._problems.get((ctx.problem, ctx.entry_point))
            if problem is None:
                raise KeyError(f"tool_agent: unknown problem for entry point {ctx.entry_point!r} (not loaded)")
            flat.extend((problem, text) for text in ctx.history[0])
        done = iter(self.rounds(flat))
        out = []
        for ctx in contexts:
            messages = list(ctx.initial_messages[0])
            for _ in ctx.history[0]:
                clean, reward = next(done)
                messages = prompts.continue_messages(messages, clean, reward.response)
            out.append([messages])
        return out
