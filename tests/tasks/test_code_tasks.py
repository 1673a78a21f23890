"""The code tasks: roles, first-turn messages, per-agent code, and scoring through the sandbox."""

from __future__ import annotations

import pytest

from comlrl.config.schema import DatasetConfig, TaskConfig
from comlrl.tasks import TASKS, CodeCollabTask, CodeSingleTask, build_task
from comlrl.tasks.base import Problem, Task
from comlrl.tasks.code.common import SYSTEM_PROMPT, prompt_preamble
from comlrl.tasks.datasets import load_easy, load_humaneval

EASY = {p.entry_point: p for p in load_easy()}
ADD = EASY["add"]
VOWELS = EASY["count_vowels"]


def fenced(code: str) -> str:
    return f"```python\n{code}```"


# --- construction -------------------------------------------------------------------------------------


def test_build_task_by_name_and_config_object() -> None:
    assert isinstance(build_task(TaskConfig(name="code_collab"), None), CodeCollabTask)
    assert isinstance(build_task("code_single", None), CodeSingleTask)
    assert {"code_collab", "code_single"} <= set(TASKS)
    with pytest.raises(ValueError,
                       match=r"^config error: task.name='chess' is not allowed; expected one of: code_collab"):
        build_task("chess", None)


@pytest.mark.parametrize(("name", "n", "roles"),
                         [("code_collab", 2, ["helper", "main"]), ("code_single", 1, ["coder"])])
def test_agents_and_roles(name: str, n: int, roles: list[str]) -> None:
    task = build_task(name, None)
    assert isinstance(task, Task)
    assert task.num_agents == n and task.role_names == roles
    assert all(task.role_instructions(a) for a in range(n))
    with pytest.raises(IndexError):
        task.role_instructions(n)


def test_load_uses_the_dataset_config() -> None:
    train, evals = build_task("code_single", None).load(DatasetConfig(name="easy", eval_size=5, max_problems=10))
    assert len(train) == 10 and len(evals) == 5


# --- messages -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["code_collab", "code_single"])
def test_initial_messages_have_a_stable_prefix(name: str) -> None:
    task = build_task(name, None)
    msgs = task.initial_messages(VOWELS)
    assert len(msgs) == task.num_agents
    for agent, m in enumerate(msgs):
        assert [x["role"] for x in m] == ["system", "user"]
        assert m[0]["content"] == SYSTEM_PROMPT
        user = m[1]["content"]
        assert user.startswith("Problem:\n```python\n" + VOWELS.prompt.strip("\n") + "\n```\n\n")
        # problem first, then the role, then what exactly to write
        assert user.index(VOWELS.prompt.strip()) < user.index(task.role_instructions(agent))
        assert user.rstrip().endswith("`count_vowels`.")
    # same problem => identical prefix for every agent up to the role text
    prefix = msgs[0][1]["content"].split(task.role_instructions(0))[0]
    assert all(m[1]["content"].startswith(prefix) for m in msgs)
    # same role => messages differ only in the problem
    other = task.initial_messages(ADD)
    assert other[0][0] == msgs[0][0]


def test_collab_roles_name_aux_and_forbid_the_other_role() -> None:
    task = CodeCollabTask()
    helper, main = (task.initial_messages(ADD)[a][1]["content"] for a in (0, 1))
    assert "named `aux`" in helper and "not the main function" in helper
    assert "`aux` that you can call" in main and "do not define `aux`" in main
    assert helper.rstrip().endswith("Write `aux` to help with `add`.")


# --- code per agent -----------------------------------------------------------------------------------


def test_single_agent_code_is_extracted_and_body_only_wrapped() -> None:
    task = CodeSingleTask()
    (code,) = task.agent_codes(ADD, ["    return a + b"])
    assert code.startswith("def add(a: int, b: int) -> int:")
    (code,) = task.agent_codes(ADD, [fenced("def add(a, b):\n    return a + b\n") + "\nprint(add(1, 2))"])
    assert code == "def add(a, b):\n    return a + b\n"


def test_answers_start_with_the_function_each_agent_must_define() -> None:
    collab, single = CodeCollabTask(), CodeSingleTask()
    assert collab.answer_prefix(0, VOWELS) == "```python\ndef aux("
    assert collab.answer_prefix(1, VOWELS) == single.answer_prefix(0, VOWELS) == "```python\ndef count_vowels("
    # the model continues the prefix; the completed answer (prefix + continuation) scores as a whole
    helper, main = collab.agent_codes(VOWELS, [collab.answer_prefix(0, VOWELS) + "s):\n    return s.lower()\n```",
                                               collab.answer_prefix(1, VOWELS) + "s):\n    return len(aux(s))\n```"])
    assert helper == "def aux(s):\n    return s.lower()\n" and main.startswith("def count_vowels(s):")


@pytest.mark.parametrize("task", [CodeCollabTask(), CodeSingleTask()])
def test_generation_stops_after_the_closing_fence_only(task: Task) -> None:
    answer = "```python\ndef f(x):\n    return x\n```\n\nThis function returns x.\n```python\nf(1)\n```"
    cut = min(answer.find(s) + len(s) for s in task.stop_strings if s in answer)
    assert answer[:cut] == "```python\ndef f(x):\n    return x\n```\n\n"
    assert not any(s in task.answer_prefix(0, ADD) for s in task.stop_strings)


def test_collab_each_agent_only_contributes_its_own_role() -> None:
    task = CodeCollabTask()
    helper_reply = fenced("def aux(s):\n    return s.lower()\n\ndef count_vowels(s):\n    return 99\n")
    main_reply = fenced(
        "def aux(s):\n    return ''\n\ndef count_vowels(s):\n    return sum(c in 'aeiou' for c in aux(s))\n"
    )
    helper, main = task.agent_codes(VOWELS, [helper_reply, main_reply])
    assert "def aux" in helper and "count_vowels" not in helper
    assert "def count_vowels" in main and "def aux" not in main


def test_prompt_preamble_keeps_imports_and_prompt_helpers() -> None:
    he = {p.task_id: p for p in load_humaneval()}
    pre = prompt_preamble(he["HumanEval/0"].prompt, "has_close_elements")
    assert pre == "from typing import List\n"
    pre38 = prompt_preamble(he["HumanEval/38"].prompt, "decode_cyclic")
    assert "def encode_cyclic" in pre38 and "def decode_cyclic" not in pre38
    assert prompt_preamble(ADD.prompt, "add") == ""
    assert prompt_preamble("import os\ndef f(:\n", "f") == "import os\n"  # unparseable: import lines


# --- scoring ------------------------------------------------------------------------------------------


def test_score_argument_checks() -> None:
    assert CodeSingleTask(None).score([]) == []
    with pytest.raises(RuntimeError, match="needs a sandbox"):
        CodeSingleTask(None).score([(ADD, ["x"])])


def test_problem_is_frozen() -> None:
    with pytest.raises(AttributeError):
        ADD.prompt = "x"  # type: ignore[misc]
    assert Problem("a", "b", "c", "d").canonical_solution is None
