"""Two agents, one specification split between them (N=2, task `code_coop`): they pass only together.

Agent 0 (helper) sees `aux`'s stub, whose docstring holds a secret rule; agent 1 (main) sees the entry
point's stub, which names `aux`, its signature and what it returns, but not the rule, and must combine
`aux`'s results. Roles, extraction, the levelled reward and the outcome counts are code_collab's; what
differs is the data (`coop_problems`, dataset.name=coop) and what each agent is shown, in every turn
(`problem_statement`).
"""

from __future__ import annotations

from typing import Any

from comlrl.tasks.base import Problem
from comlrl.tasks.code.collab import CodeCollabTask
from comlrl.tasks.code.coop_problems import CoopProblem, generate_coop_problems
from comlrl.tasks.code.extract import extract_code, function_header
from comlrl.tasks.datasets import DatasetError, split_problems

DEFAULT_PROBLEMS = 400  # generated when dataset.max_problems is null

HELPER_INSTRUCTIONS = (
    "You are the helper agent. Write the function `aux` exactly as its docstring says: only you know this "
    "rule. Another agent writes the main function and calls `aux`. Write only `aux`."
)
MAIN_ROLE = "You are the main agent. Write the complete function from the problem, with the same name and signature."
MAIN_INSTRUCTIONS = MAIN_ROLE + (" Your teammate writes `aux` as the docstring describes and only it knows the "
                                 "rule: call `aux` and use its results. Do not define `aux` yourself.")
MAIN_REVISE_INSTRUCTIONS = MAIN_ROLE + (" Your teammate's `aux` is shown below: call `aux` and use its results. "
                                        "Do not define `aux` yourself.")


# Worked examples shown to each agent before its problem, as earlier chat turns in the task's own format
# (statement, what to write, the answer): a few-shot prompt. Without them the untrained embedded model
# passed with the helper in 0 of 128 sampled joint actions; with them in 5 of 128 (docs/results.md), the
# positive examples RL amplifies. Their rules and combinations are none of the generator's.
HELPER_DEMOS = (
    ('def aux(x: int) -> bool:\n    """Return whether x is odd: x % 2 == 1."""\n', "    return x % 2 == 1\n"),
    ('def aux(word: str) -> int:\n    """Return the cost of word: len(word) * 3."""\n', "    return len(word) * 3\n"),
)
MAIN_DEMOS = (
    ("total_cost", "words: list[str]", "int", "Return the total cost of the words in words: the sum of aux(word) "
     "for each word (0 for an empty list).", "word: str", "int", "the cost of one word",
     "return sum(aux(word) for word in words)"),
    ("count_odd", "xs: list[int]", "int", "Return how many x in xs are odd, that is aux(x) is True (0 for an "
     "empty list).", "x: int", "bool", "whether one number is odd", "return sum(1 for x in xs if aux(x))"),
    ("keep_even", "xs: list[int]", "list[int]", "Return a list of each x in xs that is even, that is aux(x) is "
     "True, in order.", "x: int", "bool", "whether one number is even", "return [x for x in xs if aux(x)]"),
)


def _main_demo(entry: str, params: str, result: str, doc: str, arg: str, out: str, returns: str,
               body: str) -> tuple[str, str, str]:
    """(statement, target line, answer) of a main-agent example, laid out as the generator lays out its stubs."""
    header = f"def {entry}({params}) -> {result}:"
    statement = (f'{header}\n    """{doc}\n    Your teammate writes `aux({arg}) -> {out}`, which returns '
                 f'{returns}.\n    """\n')
    return statement, f"Write `{entry}` and call `aux` in it.", f"```python\n{header}\n    {body}\n```"


class CodeCoopTask(CodeCollabTask):
    """N=2 on generated problems whose helper holds part of the specification (see the module docstring)."""

    def role_instructions(self, agent: int) -> str:
        if agent == 0:
            return HELPER_INSTRUCTIONS
        if agent == 1:
            return MAIN_INSTRUCTIONS
        raise IndexError(f"code_coop has agents 0 (helper) and 1 (main), got agent {agent}")

    def revise_instructions(self, agent: int) -> str:
        return MAIN_REVISE_INSTRUCTIONS if agent == 1 else self.role_instructions(agent)

    def initial_messages(self, problem: CoopProblem) -> list[list[dict[str, str]]]:
        """code_collab's messages with each agent's worked examples between the system prompt and the problem."""
        return [[msgs[0], *self.demonstrations(agent), *msgs[1:]]
                for agent, msgs in enumerate(super().initial_messages(problem))]

    def demonstrations(self, agent: int) -> list[dict[str, str]]:
        """Agent `agent`'s worked examples as user/assistant turns (`HELPER_DEMOS`, `MAIN_DEMOS`)."""
        if agent == 0:
            shots = [(stub, self.target_line(0, None), "```python\n" + stub.split("\n")[0] + "\n" + body + "```")
                     for stub, body in HELPER_DEMOS]
        else:
            shots = [_main_demo(*demo) for demo in MAIN_DEMOS]
        return [turn for statement, target, answer in shots
                for turn in ({"role": "user", "content": self.first_request(agent, statement, target)},
                             {"role": "assistant", "content": answer})]

    def problem_statement(self, agent: int, problem: CoopProblem) -> str:
        """The helper sees aux's stub with the rule, the main agent its own stub (never the rule)."""
        return problem.helper_prompt if agent == 0 else problem.prompt

    def target_line(self, agent: int, problem: Any) -> str:
        if agent == 0:
            return f"Write `{self.helper_name}`."
        return f"Write `{problem.entry_point}` and call `{self.helper_name}` in it."

    def agent_codes(self, problem: CoopProblem, completions: list[str]) -> tuple[str, ...]:
        """As code_collab, and a body-only helper answer is wrapped in aux's own header."""
        helper_header = function_header(problem.helper_prompt, self.helper_name)
        helper = extract_code(completions[0], self.helper_name, helper_header, exclude={problem.entry_point})
        header = function_header(problem.prompt, problem.entry_point)
        main = extract_code(completions[1], problem.entry_point, header, exclude={self.helper_name})
        return helper, main

    def load(self, dataset_cfg: Any) -> tuple[list[Problem], list[Problem]]:
        """`dataset.max_problems` (null: 400) problems generated from `dataset.seed`, `dataset.eval_size` of
        them held out by the usual seeded split."""
        if dataset_cfg.name != "coop":
            raise DatasetError(f"dataset.name={dataset_cfg.name!r} is not allowed with task.name=code_coop; "
                               "expected coop (its problems are generated with the helper's part)")
        seed = int(dataset_cfg.seed)
        count = DEFAULT_PROBLEMS if dataset_cfg.max_problems is None else int(dataset_cfg.max_problems)
        if count < 1:
            raise DatasetError(f"dataset.max_problems: must be >= 1 or null, got {count}")
        return split_problems(generate_coop_problems(count, seed), int(dataset_cfg.eval_size), seed)
