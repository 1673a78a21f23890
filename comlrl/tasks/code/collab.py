"""Two agents write one solution (N=2): agent 0 a helper `aux`, agent 1 the entry point that may call it.

Each agent is credited only for its own role: the helper's copy of the entry point and the main agent's
own `aux` are dropped before scoring, so neither agent can solve the problem alone in the other's place.
"""

from __future__ import annotations

from typing import Any

from comlrl.tasks.base import Problem
from comlrl.tasks.code.common import CodeTask
from comlrl.tasks.code.extract import extract_code, function_header

HELPER_INSTRUCTIONS = (
    "You are the helper agent. Write one helper function named `aux` that does a useful part of the work "
    "(for example a check or a calculation). Another agent writes the main function and can call `aux`. "
    "Write only `aux`, not the main function."
)
MAIN_ROLE = ("You are the main agent. Write the complete function from the problem, with the same name and "
             "signature.")
MAIN_INSTRUCTIONS = MAIN_ROLE + " Another agent writes a helper function `aux` that you can call; do not define " \
    "`aux` yourself."
# From turn 2 the main agent sees the helper's code, so it can be asked to call it: without this the
# embedded model calls `aux` in 0 of 40 training joint actions and the cooperation reward never pays.
MAIN_REVISE_INSTRUCTIONS = MAIN_ROLE + " Your teammate's helper `aux` is shown below: call `aux` where it does " \
    "part of the work and use its result. Do not define `aux` yourself."

class CodeCollabTask(CodeTask):
    """N=2: helper (`aux`) + main (entry point); the reward credits definitions, tests and helper use."""

    num_agents = 2
    role_names = ["helper", "main"]
    outcome_names = ("helper_called", "helper_used", "passed_with_helper")
    headline_outcome = ("helper", "helper_called")
    centralizable = True  # the two parts only meet in the sandbox run and the prompts (code_coop too)

    def role_instructions(self, agent: int) -> str:
        if agent == 0:
            return HELPER_INSTRUCTIONS
        if agent == 1:
            return MAIN_INSTRUCTIONS
        raise IndexError(f"code_collab has agents 0 (helper) and 1 (main), got agent {agent}")

    def revise_instructions(self, agent: int) -> str:
        return MAIN_REVISE_INSTRUCTIONS if agent == 1 else self.role_instructions(agent)

    def target_line(self, agent: int, problem: Problem) -> str:
        if agent == 0:
            return f"Write `{self.helper_name}` to help with `{problem.entry_point}`."
        return f"Write `{problem.entry_point}`."

    def defined_name(self, agent: int, problem: Problem) -> str:
        return self.helper_name if agent == 0 else problem.entry_point

    def outcome_counts(self, reward: Any) -> dict[str, float]:
        """How the team cooperated: the main agent called `aux`, used its result, and the tests passed
        with the helper in use (`passed_with_helper` / `helper_used` is the pass rate when it is used)."""
        used = bool(reward.helper_result_used)
        return {"helper_called": float(reward.helper_called), "helper_used": float(used),
                "passed_with_helper": float(used and reward.all_passed)}

    def agent_codes(self, problem: Problem, completions: list[str]) -> tuple[str, ...]:
        helper = extract_code(completions[0], self.helper_name, None, exclude={problem.entry_point})
        header = function_header(problem.prompt, problem.entry_point)
        main = extract_code(completions[1], problem.entry_point, header, exclude={self.helper_name})
        return helper, main
