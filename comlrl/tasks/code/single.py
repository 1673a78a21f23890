"""One agent writes the entry-point function (N=1): the baseline and the single-agent HumanEval task."""

from __future__ import annotations

from comlrl.tasks.base import Problem
from comlrl.tasks.code.common import CodeTask
from comlrl.tasks.code.extract import extract_code, function_header

SINGLE_INSTRUCTIONS = (
    "Write the complete function from the problem, with the same name and signature, and return the "
    "result (do not print it)."
)


class CodeSingleTask(CodeTask):
    """N=1: the agent's code alone must pass the problem's tests."""

    num_agents = 1
    role_names = ["coder"]

    def role_instructions(self, agent: int) -> str:
        if agent != 0:
            raise IndexError(f"code_single has one agent (0), got agent {agent}")
        return SINGLE_INSTRUCTIONS

    def target_line(self, agent: int, problem: Problem) -> str:
        return f"Write `{problem.entry_point}`."

    def defined_name(self, agent: int, problem: Problem) -> str:
        return problem.entry_point

    def agent_codes(self, problem: Problem, completions: list[str]) -> tuple[str, ...]:
        header = function_header(problem.prompt, problem.entry_point)
        return (extract_code(completions[0], problem.entry_point, header),)
