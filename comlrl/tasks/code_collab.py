"""Two agents write one solution (N=2): agent 0 a helper `aux`, agent 1 the entry point that may call it.

Each agent is credited only for its own role: the helper's copy of the entry point and the main agent's
own `aux` are dropped before scoring, so neither agent can solve the problem alone in the other's place.
"""

from __future__ import annotations

from comlrl.tasks.base import Problem
from comlrl.tasks.code_common import CodeTask
from comlrl.tasks.code_extract import extract_code, function_header

HELPER_INSTRUCTIONS = (
    "You are the helper agent. Write one helper function named `aux` that does a useful part of the work "
    "(for example a check or a calculation). Another agent writes the main function and can call `aux`. "
    "Write only `aux`, not the main function."
)
MAIN_INSTRUCTIONS = (
    "You are the main agent. Write the complete function from the problem, with the same name and "
    "signature. Another agent writes a helper function `aux` that you can call; do not define `aux` "
    "yourself."
)


class CodeCollabTask(CodeTask):
    """N=2: helper (`aux`) + main (entry point); the sandbox rewards definitions, tests and helper use."""

    num_agents = 2
    role_names = ["helper", "main"]

    def role_instructions(self, agent: int) -> str:
        if agent == 0:
            return HELPER_INSTRUCTIONS
        if agent == 1:
            return MAIN_INSTRUCTIONS
        raise IndexError(f"code_collab has agents 0 (helper) and 1 (main), got agent {agent}")

    def target_line(self, agent: int, problem: Problem) -> str:
        if agent == 0:
            return f"Write `{self.helper_name}` to help with `{problem.entry_point}`."
        return f"Write `{problem.entry_point}`."

    def defined_name(self, agent: int, problem: Problem) -> str:
        return self.helper_name if agent == 0 else problem.entry_point

    def agent_codes(self, problem: Problem, completions: list[str]) -> tuple[str, ...]:
        helper = extract_code(completions[0], self.helper_name, None, exclude={problem.entry_point})
        header = function_header(problem.prompt, problem.entry_point)
        main = extract_code(completions[1], problem.entry_point, header, exclude={self.helper_name})
        return helper, main
