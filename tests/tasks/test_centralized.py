"""algorithm.name=centralized, the task side: one completion holds every role's part in tagged sections
(comlrl/role_sections.py); `centralize(task)` makes the team of a task's agents one agent whose prompts
join the roles' prompts and whose parts are scored, fed back and recorded by the inner task."""

from __future__ import annotations

import pytest

from comlrl.contracts import Task
from comlrl.role_sections import close_tag, join_roles, open_tag, split_roles
from comlrl.tasks import TASKS, build_task

# --- split_roles: untrusted model output in, one part per role out ------------------------------------------


def test_sections_in_order_give_one_stripped_part_per_role() -> None:
    text = "<agent_0>\n```python\ndef aux(x):\n    return x\n```\n</agent_0>\n<agent_1>  main part \n</agent_1>"
    assert split_roles(text, 2) == ["```python\ndef aux(x):\n    return x\n```", "main part"]
    assert split_roles("<agent_0>a</agent_0><agent_1>b</agent_1><agent_2>c</agent_2>", 3) == ["a", "b", "c"]


def test_the_order_of_the_sections_does_not_matter() -> None:
    assert split_roles("<agent_1>second</agent_1> prose <agent_0>first</agent_0>", 2) == ["first", "second"]


def test_tags_match_in_any_case_and_with_whitespace_inside_the_brackets() -> None:
    assert split_roles("<AGENT_0>a</Agent_0>< agent_1 >b< / AGENT_1 >", 2) == ["a", "b"]
    assert split_roles("<\tagent_0\n>x<\n/agent_0  >", 1) == ["x"]


def test_a_missing_or_unclosed_section_is_empty_and_the_others_stay() -> None:
    assert split_roles("<agent_1>only main</agent_1>", 2) == ["", "only main"]
    assert split_roles("<agent_0>helper</agent_0><agent_1>cut by the token limit", 2) == ["helper", ""]
    assert split_roles("</agent_0>close first<agent_0>then open", 2) == ["", ""]
    assert split_roles("<agent_0></agent_0><agent_1>  \n </agent_1>", 2) == ["", ""]


@pytest.mark.parametrize("text", ["", "no tags at all", "```python\ndef f():\n    pass\n```", "<agent>x</agent>",
                                  "<agent_a>x</agent_a>", "<agent-0>x</agent-0>", "<agent_ 0>x</agent_ 0>"])
def test_without_any_section_every_role_is_empty(text: str) -> None:
    assert split_roles(text, 2) == ["", ""]


def test_the_first_complete_section_wins_and_nested_tags_stay_in_their_part() -> None:
    assert split_roles("<agent_0>one</agent_0><agent_0>two</agent_0>", 1) == ["one"]
    assert split_roles("<agent_0>open<agent_0>again</agent_0>late</agent_0>", 1) == ["open<agent_0>again"]
    nested = "<agent_0>outer <agent_1>inner</agent_1> tail</agent_0>"
    assert split_roles(nested, 2) == ["outer <agent_1>inner</agent_1> tail", "inner"]


def test_tags_of_other_numbers_are_not_a_roles_tags() -> None:
    """agent_1 is not agent_10's prefix, nor agent_01 agent_1's."""
    text = "<agent_10>ten</agent_10><agent_01>zero-one</agent_01><agent_1>one</agent_1>"
    assert split_roles(text, 2) == ["", "one"]
    assert split_roles(text, 11)[10] == "ten"


def test_more_sections_than_roles_are_ignored_and_fewer_roles_than_zero_give_nothing() -> None:
    text = join_roles(["a", "b", "c", "d"])
    assert split_roles(text, 2) == ["a", "b"]
    assert split_roles(text, 0) == [] and split_roles(text, -1) == [] and split_roles(None, -3) == []


@pytest.mark.parametrize("garbage", [None, 3, b"<agent_0>x</agent_0>", ["<agent_0>x</agent_0>"], object()])
def test_anything_but_a_string_has_no_sections(garbage: object) -> None:
    assert split_roles(garbage, 2) == ["", ""]


def test_unicode_control_characters_and_stray_brackets_never_raise() -> None:
    text = "\x00<agent_0>héllo 🙂 λx: x\u2028</agent_0>\udcff<<<agent_1>>>> 中文 </agent_1><>\\1(?P<"
    assert split_roles(text, 2) == ["héllo 🙂 λx: x", ">>> 中文"]
    assert split_roles("<" * 5000 + "agent_0>" + " " * 5000, 2) == ["", ""]


def test_a_long_unclosed_completion_is_read_in_linear_time() -> None:
    import time

    text = "<agent_0>" * 200_000  # 1.8M characters, no closing tag: a rescan per opening would take minutes
    t0 = time.perf_counter()
    assert split_roles(text, 2) == ["", ""]
    assert time.perf_counter() - t0 < 10.0


def test_join_roles_is_what_split_roles_reads_back() -> None:
    parts = ["def aux():\n    return 1", "", "third"]
    assert join_roles(parts) == ("<agent_0>\ndef aux():\n    return 1\n</agent_0>\n<agent_1>\n\n</agent_1>\n"
                                 "<agent_2>\nthird\n</agent_2>")
    assert split_roles(join_roles(parts), 3) == parts
    assert (open_tag(1), close_tag(1)) == ("<agent_1>", "</agent_1>")


def test_every_task_splits_into_its_own_number_of_roles() -> None:
    """`Task.split_roles` is the hook (a task may read its own format); the default reads the tags."""
    collab = build_task("code_collab", None)
    assert collab.split_roles(join_roles(["h", "m", "extra"])) == ["h", "m"]
    assert collab.split_roles("no tags") == ["", ""]
    assert build_task("code_single", None).split_roles(join_roles(["only"])) == ["only"]


def test_which_tasks_can_be_centralized() -> None:
    """The code tasks of two agents and the text task: their parts only meet in the score and the prompts.
    The tool agent (one agent, its own tool turns) and the actions task (an environment per path) cannot."""
    assert Task.centralizable is False  # a plug-in task opts in
    assert {name: TASKS[name].centralizable for name in ("code_collab", "code_coop", "text", "code_single",
                                                         "tool_agent", "actions")} == {
        "code_collab": True, "code_coop": True, "text": True, "code_single": False, "tool_agent": False,
        "actions": False}
