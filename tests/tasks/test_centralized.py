"""algorithm.name=centralized, the task side: one completion holds every role's part in tagged sections
(comlrl/tree/role_sections.py); `centralize(task)` makes the team of a task's agents one agent whose prompts
join the roles' prompts and whose parts are scored, fed back and recorded by the inner task."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import reward_fns

from comlrl.config.schema import load_config
from comlrl.errors import ConfigError
from comlrl.tasks import TASKS, CodeCollabTask, CodeCoopTask, build_task
from comlrl.tasks.centralized import CentralizedTask, centralize
from comlrl.tasks.code.common import SYSTEM_PROMPT
from comlrl.tasks.code.coop import HELPER_DEMOS, MAIN_DEMOS
from comlrl.tasks.code.coop_problems import generate_coop_problems
from comlrl.tasks.code.feedback import FeedbackBridge
from comlrl.tasks.datasets import load_easy
from comlrl.tasks.text import TextProblem, TextTask, TextTaskConfig
from comlrl.tree.contracts import Continuation, JointTurn, TaskConfig, TaskDefaults
from comlrl.tree.nodes import Node
from comlrl.tree.role_sections import close_tag, join_roles, open_tag, split_roles

ADD = next(p for p in load_easy() if p.entry_point == "add")
AFFINE = next(p for p in generate_coop_problems(120, 0) if p.template == "total/affine")
RULE = AFFINE.helper_solution.strip().removeprefix("return ")  # "x * a + b": only the helper's stub says it
HELPER = "```python\ndef aux(a):\n    return a\n```"
MAIN = "```python\ndef add(a, b):\n    return aux(a) + b\n```"  # calls aux and adds work of its own: full marks


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Any]:
    from sandbox.executor import Sandbox

    with Sandbox(workers=2, timeout_s=5.0) as box:
        yield box


def reply(task: CentralizedTask, problem: Any, rest: str) -> str:
    """A team completion as the policy returns it: the answer prefix, then what the model wrote."""
    return task.answer_prefix(0, problem) + rest


# the two parts above, written by one policy after its answer prefix ("<agent_0>\n```python\ndef aux(")
TEAM_REST = "a):\n    return a\n```\n</agent_0>\n\n<agent_1>\n" + MAIN + "\n</agent_1>"

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


def test_a_missing_section_is_empty_and_the_others_stay() -> None:
    assert split_roles("<agent_1>only main</agent_1>", 2) == ["", "only main"]
    assert split_roles("<agent_0></agent_0><agent_1>  \n </agent_1>", 2) == ["", ""]
    assert split_roles("</agent_0>close only", 2) == ["", ""]


def test_a_section_left_open_runs_to_the_next_role_tag_or_the_end() -> None:
    # what a small model writes: the helper's section never closed (SmolLM2-135M closed 2 of 352)
    code = "```python\ndef aux(n):\n    return n > 0\n\ndef is_positive(n):\n    return aux(n)\n```"
    assert split_roles("<agent_0>\n" + code + "\nSome prose.", 2) == [code + "\nSome prose.", ""]
    assert split_roles("<agent_0>helper<agent_1>main", 2) == ["helper", "main"]
    assert (split_roles("<agent_0>helper</agent_0><agent_1>cut by the token limit", 2)
            == ["helper", "cut by the token limit"])
    assert split_roles("<agent_0>a</agent_1>b</agent_0>", 2) == ["a", ""]  # any role tag ends a section
    assert split_roles("</agent_0>close first<agent_0>then open", 2) == ["then open", ""]


@pytest.mark.parametrize("text", ["", "no tags at all", "```python\ndef f():\n    pass\n```", "<agent>x</agent>",
                                  "<agent_a>x</agent_a>", "<agent-0>x</agent-0>", "<agent_ 0>x</agent_ 0>"])
def test_without_any_section_every_role_is_empty(text: str) -> None:
    assert split_roles(text, 2) == ["", ""]


def test_the_first_section_wins_and_any_role_tag_inside_ends_it() -> None:
    assert split_roles("<agent_0>one</agent_0><agent_0>two</agent_0>", 1) == ["one"]
    assert split_roles("<agent_0>open<agent_0>again</agent_0>late</agent_0>", 1) == ["open"]
    nested = "<agent_0>outer <agent_1>inner</agent_1> tail</agent_0>"
    assert split_roles(nested, 2) == ["outer", "inner"]


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
    """`SplitRoles.split_roles` is the hook (a task may read its own format); the default reads the tags."""
    collab = build_task("code_collab", None)
    assert collab.split_roles(join_roles(["h", "m", "extra"])) == ["h", "m"]
    assert collab.split_roles("no tags") == ["", ""]
    assert build_task("code_single", None).split_roles(join_roles(["only"])) == ["only"]


def test_which_tasks_can_be_centralized() -> None:
    """The code tasks of two agents and the text task: their parts only meet in the score and the prompts.
    The tool agent (one agent, its own tool turns) and the actions task (an environment per path) cannot."""
    assert TaskDefaults.centralizable is False  # a plug-in task opts in
    assert {name: TASKS[name].centralizable for name in ("code_collab", "code_coop", "text", "code_single",
                                                         "tool_agent", "actions")} == {
        "code_collab": True, "code_coop": True, "text": True, "code_single": False, "tool_agent": False,
        "actions": False}


# --- the team as one agent ------------------------------------------------------------------------------------


def test_the_team_is_one_agent_with_the_inner_tasks_range_outcomes_and_format() -> None:
    inner = build_task("code_collab", None)
    team = centralize(inner)
    assert isinstance(team, CentralizedTask) and team.inner is inner
    assert (team.num_agents, team.role_names) == (1, ["team"])
    assert team.reward_range == inner.reward_range == (0.0, 4.0)
    assert team.outcome_names == ("helper_called", "helper_used", "passed_with_helper")
    assert team.headline_outcome == ("helper", "helper_called")
    # the inner "```\n\n" would end the reply after the first part; the last closing tag ends it after all
    assert inner.stop_strings == ("```\n\n",) and team.stop_strings == ("</agent_1>",)
    assert team.answer_prefix(0, ADD) == "<agent_0>\n```python\ndef aux("
    assert team.split_roles("<agent_0>a</agent_0>") == ["<agent_0>a</agent_0>"]  # the team's one part: all of it
    assert team.initial_state(ADD) is None and team.metrics() == {}


def test_the_joint_prompt_of_code_collab_holds_each_roles_prompt_and_the_format() -> None:
    inner = CodeCollabTask()
    ((system, user),) = centralize(inner).initial_messages(ADD)
    assert system["role"] == "system" and user["role"] == "user"
    assert system["content"].startswith("You write the answers of a team of 2 agents in one reply: agent_0 (helper), "
                                        "agent_1 (main).")
    assert system["content"].endswith(f"The system prompt every agent gets: {SYSTEM_PROMPT}")
    helper, main = (chat[-1]["content"] for chat in inner.initial_messages(ADD))
    assert user["content"].startswith(f"### agent_0 (helper)\n{helper}\n\n### agent_1 (main)\n{main}\n\n")
    assert inner.role_instructions(0) in helper and inner.role_instructions(1) in main  # both roles' rules
    assert user["content"].count(f"```python\n{ADD.prompt.strip()}\n```") == 2  # the problem each role sees
    assert user["content"].endswith("only what is inside the sections is read:\n<agent_0>\n(helper's answer)\n"
                                    "</agent_0>\n<agent_1>\n(main's answer)\n</agent_1>")


def test_the_joint_prompt_of_code_coop_gives_the_helpers_rule_and_each_roles_worked_examples() -> None:
    """One policy writes both parts, so it sees both parts of the specification: the rule (the helper's
    stub) and the entry point's stub; each role's few-shot chat becomes a transcript in its section."""
    inner = CodeCoopTask()
    ((system, user),) = centralize(inner).initial_messages(AFFINE)
    assert system["content"].endswith(f"The system prompt every agent gets: {SYSTEM_PROMPT}")
    text = user["content"]
    helper_at, main_at = text.index("### agent_0 (helper)\n"), text.index("### agent_1 (main)\n")
    assert 0 == helper_at < main_at
    helper, main = text[helper_at:main_at], text[main_at:]
    assert f"```python\n{AFFINE.helper_prompt.strip()}\n```" in helper and RULE in helper
    assert f"```python\n{AFFINE.prompt.strip()}\n```" in main and RULE not in main.split("Write the 2 answers")[0]
    assert inner.role_instructions(0) in helper and inner.role_instructions(1) in main
    assert helper.count("[user]\n") == len(HELPER_DEMOS) + 1 and helper.count("[assistant]\n") == len(HELPER_DEMOS)
    assert main.count("[user]\n") == len(MAIN_DEMOS) + 1 and main.count("[assistant]\n") == len(MAIN_DEMOS)
    for demo in inner.demonstrations(0)[1::2]:
        assert f"[assistant]\n{demo['content']}" in helper
    assert text.endswith("<agent_0>\n(helper's answer)\n</agent_0>\n<agent_1>\n(main's answer)\n</agent_1>")
    assert "\n\n".join(dict.fromkeys([AFFINE.helper_prompt, AFFINE.prompt])) == centralize(inner).problem_statement(
        0, AFFINE)


def test_roles_with_their_own_system_prompts_keep_them_in_their_sections() -> None:
    from comlrl.tasks.joint_chat import joint_chat

    chats = [[{"role": "system", "content": "S0"}, {"role": "user", "content": "U0"}],
             [{"role": "system", "content": "S1"}, {"role": "user", "content": "U1"}]]
    system, user = joint_chat(chats, ["a", "b"])
    assert "system prompt every agent gets" not in system["content"]
    assert user["content"].startswith("### agent_0 (a)\n[system]\nS0\n\n[user]\nU0\n\n### agent_1 (b)\n[system]\nS1")
    with pytest.raises(ValueError, match="2 chats for 3 roles"):
        joint_chat(chats, ["a", "b", "c"])


# --- scoring through the real sandbox ---------------------------------------------------------------------------


def _same(a: Any, b: Any) -> None:
    assert (a.total, a.components, a.all_passed, a.codes, a.notes) == (b.total, b.components, b.all_passed, b.codes,
                                                                       b.notes)


def test_a_right_team_in_its_sections_gets_what_the_two_agents_would_get(sandbox: Any) -> None:
    inner = CodeCollabTask(sandbox)
    team = centralize(inner)
    text = reply(team, ADD, TEAM_REST)
    assert inner.split_roles(text) == [HELPER, MAIN]
    ((got, state),) = team.score_joint([JointTurn(ADD, (text,))])
    ((want, _),) = inner.score_joint([JointTurn(ADD, (HELPER, MAIN))])
    _same(got, want)
    assert state is None and got.all_passed and got.total == pytest.approx(4.0)
    assert team.outcome_counts(got) == {"helper_called": 1.0, "helper_used": 1.0, "passed_with_helper": 1.0}
    assert got.codes == ("def aux(a):\n    return a\n", "def add(a, b):\n    return aux(a) + b\n")
    (first,) = team.score([(ADD, [text])])  # the first-turn entry point agrees
    _same(first, want)


def test_a_reply_without_sections_scores_as_two_empty_answers(sandbox: Any) -> None:
    inner = CodeCollabTask(sandbox)
    team = centralize(inner)
    untagged = MAIN + "\n" + HELPER  # right code, but no sections: nothing is read
    rewards = [r for r, _ in team.score_joint([JointTurn(ADD, (untagged,)), JointTurn(ADD, ("",)),
                                               JointTurn(ADD, ("\x00<agent_1>\udcff",))])]
    (empty,) = inner.score([(ADD, ["", ""])])
    for r in rewards:
        _same(r, empty)
    assert not empty.all_passed and empty.codes == ("", "") and empty.total == 0.0  # no code: no level at all
    with pytest.raises(ValueError, match="2 completions per joint action, expected 1"):
        team.score_turns([JointTurn(ADD, (HELPER, MAIN))])


def test_reward_functions_are_added_once_with_one_row_per_role(sandbox: Any) -> None:
    """build_task keeps task.reward_funcs on the inner task; the team's score adds them there, once, over
    the same rows a team of two agents gives them (so the two algorithms' rewards compare)."""
    cfg = TaskConfig(name="code_collab", reward_funcs=["reward_fns:record", "reward_fns:length"])
    inner = build_task(cfg, sandbox)
    team = centralize(inner)
    assert team.reward_terms is inner.reward_terms and team.reward_terms.names == ("record", "length")
    assert team.count_names == ("helper_called", "helper_used", "passed_with_helper", "reward/record",
                                "reward/length", "reward/weighted_sum")
    texts = [reply(team, ADD, TEAM_REST), "no sections"]
    reward_fns.CALLS.clear()
    got = [r for r, _ in team.score_joint([JointTurn(ADD, (t,)) for t in texts])]
    (call,) = reward_fns.CALLS  # one call for the batch, as for any task
    assert call["agent"] == [0, 1, 0, 1] and call["role"] == ["helper", "main", "helper", "main"]
    assert call["completions"] == [HELPER, MAIN, "", ""]
    assert [r.components["record"] for r in got] == [0.5, 2.5]  # mean of rows 0, 1 and of rows 2, 3
    assert got[0].components["length"] == pytest.approx((len(HELPER) + len(MAIN)) / 200)
    base = inner.score_turns([JointTurn(ADD, (HELPER, MAIN))])[0][0].total  # the sandbox reward alone
    assert got[0].total == pytest.approx(base + 0.5 + got[0].components["length"])
    assert team.counts(got[0])["reward/record"] == 0.5 and team.counts(got[0])["passed_with_helper"] == 1.0
    reward_fns.CALLS.clear()
    ((direct, _),) = inner.score_joint([JointTurn(ADD, (HELPER, MAIN))])
    assert direct.components == got[0].components and direct.total == got[0].total
    team.reward_terms = None  # set on the team, kept by the inner task that adds them
    assert inner.reward_terms is None and team.count_names == inner.outcome_names


# --- later turns: the inner transition per role, joined again --------------------------------------------------


def _continuation(team: CentralizedTask, problem: Any, texts: list[str]) -> Continuation:
    """The path of one team completion per turn, its last one scored."""
    ((reward, _),) = team.score_joint([JointTurn(problem, (texts[-1],))])
    return Continuation(problem, Node(id="0", turn=len(texts), root=0, messages=[], details=[reward]), 0, [texts])


@pytest.mark.parametrize("mode", ["level_feedback", "plain"])
def test_the_next_turn_is_the_feedback_modes_per_role_prompts_in_one_chat(sandbox: Any, mode: str) -> None:
    inner = CodeCollabTask(sandbox)
    team = centralize(inner)
    bridge = FeedbackBridge(load_config(None, [f"external.mode={mode}"]).external)
    texts = [reply(team, ADD, "a, b):\n    return a - b\n```\n</agent_0><agent_1>no code</agent_1>"),
             reply(team, ADD, TEAM_REST)]
    path = _continuation(team, ADD, texts)
    ((chat,),) = team.transition(bridge).next_messages(team, [path])
    assert team.role_history(path.history) == [["```python\ndef aux(a, b):\n    return a - b\n```", HELPER],
                                               ["no code", MAIN]]
    per_role = bridge.next_messages(inner, [Continuation(ADD, path.node, 0, team.role_history(path.history))])
    assert chat == team.joint(per_role[0])
    assert [m["role"] for m in chat] == ["system", "user"]
    assert chat[0] == team.initial_messages(ADD)[0][0]  # the same system message as turn 1: a shared prefix
    user = chat[1]["content"]
    assert "Your role: helper (agent 1 of 2)" in user and "Your role: main (agent 2 of 2)" in user
    assert "def aux(a):\n    return a\n" in user and "def add(a, b):\n    return aux(a) + b" in user
    assert user.endswith("<agent_0>\n(helper's answer)\n</agent_0>\n<agent_1>\n(main's answer)\n</agent_1>")


def test_code_coops_helper_rule_stays_in_the_later_turns(sandbox: Any) -> None:
    inner = CodeCoopTask(sandbox)
    team = centralize(inner)
    bridge = FeedbackBridge(load_config(None, ["task.name=code_coop", "dataset.name=coop"]).external)
    path = _continuation(team, AFFINE, [reply(team, AFFINE, "x: int) -> int:\n    return x\n```</agent_0>")])
    ((chat,),) = team.transition(bridge).next_messages(team, [path])
    helper, main = chat[1]["content"].split("### agent_1 (main)\n")
    assert f"Problem:\n{AFFINE.helper_prompt.strip()}" in helper and RULE in helper
    assert f"Problem:\n{AFFINE.prompt.strip()}" in main and "# (empty response: no code)" in main


def test_the_text_task_of_two_roles_keeps_its_own_next_turn() -> None:
    inner = TextTask(TextTaskConfig(roles=["writer", "critic"], instructions=["Write it.", "Criticize it."]))
    team = centralize(inner, "text")
    problem = TextProblem("0", "Name a prime.")
    ((system, user),) = team.initial_messages(problem)
    assert user["content"].startswith("### agent_0 (writer)\nName a prime.\n\nWrite it.\n\n### agent_1 (critic)\n"
                                      "Name a prime.\n\nCriticize it.\n\n")
    assert "system prompt every agent gets" not in system["content"]  # the text task has none here
    path = _continuation(team, problem, ["<agent_0>7</agent_0><agent_1>fine</agent_1>"])
    ((chat,),) = team.transition(None).next_messages(team, [path])  # type: ignore[arg-type]  # the task's own
    writer, critic = chat[1]["content"].split("### agent_1 (critic)\n")
    assert "[assistant]\n7\n\n[user]\nYour team's answers scored 0 (higher is better).\n\ncritic's answer:\nfine" \
        in writer
    assert "[assistant]\nfine\n\n[user]\nYour team's answers scored 0" in critic and "writer's answer:\n7" in critic


# --- a rollout of the team with a real model --------------------------------------------------------------------


@pytest.fixture()
def one_torch_thread() -> Iterator[None]:
    """Two threads on a busy two-core machine collapse; one barely slows down (as tests/feedback do)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_a_two_turn_rollout_of_the_team_with_the_tiny_random_model(sandbox: Any, one_torch_thread: None) -> None:
    """One policy (model.name=tiny-random, one LoRA agent) writes the team's replies over two turns: one
    completion row per node, the inner task's rewards on the nodes, and a second-turn prompt that is the
    feedback mode's two per-role prompts joined into one chat (with the team's answer prefix)."""
    import torch

    from comlrl.config.schema import AgentsConfig, ModelConfig
    from comlrl.engines import HFEngine
    from comlrl.policy import AgentPolicies
    from comlrl.tasks.code.reward import CodeReward
    from comlrl.tree.rollout import Rollout, TreeShape, texts_along

    inner = CodeCollabTask(sandbox)
    team = centralize(inner)
    torch.manual_seed(0)
    policies = AgentPolicies(ModelConfig(name="tiny-random", max_new_tokens=8, max_prompt_tokens=4096),
                             AgentsConfig(mode="lora"), team.num_agents, stop_strings=team.stop_strings,
                             head_messages=team.head_messages)
    bridge = FeedbackBridge(load_config(None, ["external.mode=level_feedback"]).external)
    rollout = Rollout(team, team.transition(bridge), HFEngine(policies), [ADD])
    (root,) = rollout.run(TreeShape(num_agents=1, num_generations=2, num_turns=2, joint_mode="align",
                                    threshold=None), tag="c")
    nodes = list(root.walk())
    assert [n.turn for n in nodes] == [1, 2, 2] and sorted(root.children) == [0, 1]
    prefix = {"role": "assistant", "content": "<agent_0>\n```python\ndef aux("}
    assert root.messages == [[*team.initial_messages(ADD)[0], prefix]]
    for node in nodes:
        assert len(node.messages) == 1 and len(node.completions) == 1 and len(node.completions[0]) == 2
        texts = [s.text for s in node.completions[0]]
        assert all(t.startswith(prefix["content"]) for t in texts)
        assert all(isinstance(d, CodeReward) and len(d.codes) == 2 for d in node.details)
        want = [inner.score([(ADD, inner.split_roles(t))])[0].total for t in texts]
        # 8 random tokens close no section: the helper's part is the unfinished prefix (a syntax error),
        # the main's is empty
        assert node.rewards == want == [0.0, 0.0]
    for j, child in root.children.items():
        history = team.role_history(texts_along(root, j, 1))
        (per_role,) = bridge.next_messages(inner, [Continuation(ADD, root, j, history)])
        assert len(per_role) == 2 and child.messages == [[*team.joint(per_role), prefix]]
        user = child.messages[0][1]["content"]
        assert "Your role: helper (agent 1 of 2)" in user and "Your role: main (agent 2 of 2)" in user
        assert "Feedback:\n" in user and child.messages[0][0] == root.messages[0][0]


# --- which tasks are refused ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "why"), [
    ("tool_agent", "it has 1 agent, nothing to join"),
    ("actions", "its agents act through their own turns (Task.centralizable is False)"),
    ("code_single", "it has 1 agent, nothing to join"),
])
def test_tasks_that_cannot_be_centralized_are_refused_in_one_line(name: str, why: str) -> None:
    task = build_task(name, None)
    try:
        with pytest.raises(ConfigError) as err:
            centralize(task)
    finally:
        task.close()
    assert str(err.value) == (f"config error: algorithm.name=centralized is not allowed with task.name={name}: {why}; "
                              "expected a task whose agents write parts of one answer (code_collab, code_coop, "
                              "text, bfcl; 2 or more agents)")


def test_a_text_task_of_one_role_is_refused_and_of_two_accepted() -> None:
    with pytest.raises(ConfigError, match=r"task.name=text: it has 1 agent, nothing to join;"):
        centralize(TextTask(TextTaskConfig()))
    assert centralize(TextTask(TextTaskConfig(roles=["a", "b", "c"]))).stop_strings == ("</agent_2>",)
