"""The code_coop task: who sees the rule (first and later turns), scoring through the real sandbox, its data
set and config errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from comlrl.config.schema import ConfigError, load_config
from comlrl.tasks import TASKS, CodeCollabTask, CodeCoopTask, build_task
from comlrl.tasks.code.common import SYSTEM_PROMPT
from comlrl.tasks.code.coop import HELPER_DEMOS, MAIN_DEMOS
from comlrl.tasks.code.coop_problems import CoopProblem, generate_coop_problems
from comlrl.tasks.code.feedback import FeedbackBridge
from comlrl.tasks.datasets import DatasetConfig, DatasetError, split_problems
from comlrl.tree.contracts import Continuation
from comlrl.tree.nodes import Node

ROOT = Path(__file__).resolve().parents[2]
PROBLEMS = generate_coop_problems(120, 0)
AFFINE = next(p for p in PROBLEMS if p.template == "total/affine")  # e.g. total_score(xs), aux(x) = x * a + b
LOOKUP = next(p for p in PROBLEMS if p.template == "best/lookup")
RULE = AFFINE.helper_solution.strip().removeprefix("return ")  # "x * a + b"


@pytest.fixture(scope="module")
def sandbox():  # noqa: ANN201 - sandbox.executor.Sandbox
    from sandbox.executor import Sandbox

    with Sandbox(workers=2, timeout_s=5.0) as box:
        yield box


def answer(task: CodeCoopTask, agent: int, p: CoopProblem, rest: str) -> str:
    """A completion as the policy returns it: the answer prefix, then what the model wrote."""
    return task.answer_prefix(agent, p) + rest


def team(task: CodeCoopTask, p: CoopProblem) -> list[str]:
    """The reference team: the helper's rule and the main's canonical combination."""
    helper = p.helper_prompt.removeprefix("def aux(") + p.helper_solution + "```"
    main = p.prompt.removeprefix(f"def {p.entry_point}(") + p.canonical_solution + "```"
    return [answer(task, 0, p, helper), answer(task, 1, p, main)]


def DS(name: str = "coop", eval_size: int = 64, max_problems: int | None = None, seed: int = 0) -> DatasetConfig:  # noqa: N802
    return DatasetConfig(name=name, eval_size=eval_size, max_problems=max_problems, seed=seed)


# --- roles and prompts --------------------------------------------------------------------------------------


def test_code_coop_is_registered_with_code_collab_roles_and_outcomes() -> None:
    task = build_task("code_coop", None)
    assert TASKS["code_coop"] is CodeCoopTask and isinstance(task, CodeCollabTask)
    assert task.num_agents == 2 and task.role_names == ["helper", "main"]
    assert task.outcome_names == ("helper_called", "helper_used", "passed_with_helper")
    assert task.reward_range == (0.0, 4.0)
    with pytest.raises(IndexError):
        task.role_instructions(2)


def test_the_helper_sees_the_rule_and_the_main_agent_only_what_aux_returns() -> None:
    task = CodeCoopTask()
    helper, main = (m[-1]["content"] for m in task.initial_messages(AFFINE))
    assert [m[0]["content"] for m in task.initial_messages(AFFINE)] == [SYSTEM_PROMPT, SYSTEM_PROMPT]
    assert f"```python\n{AFFINE.helper_prompt.strip()}\n```" in helper and RULE in helper
    assert AFFINE.entry_point not in helper and helper.endswith("Write `aux`.")
    assert f"```python\n{AFFINE.prompt.strip()}\n```" in main and RULE not in main
    assert "Your teammate writes `aux(x: int) -> int`, which returns the " in main
    assert main.endswith(f"Write `{AFFINE.entry_point}` and call `aux` in it.") and "Do not define `aux`" in main
    assert task.answer_prefix(0, AFFINE) == "```python\ndef aux("
    assert task.answer_prefix(1, AFFINE) == f"```python\ndef {AFFINE.entry_point}("
    assert task.problem_statement(0, AFFINE) == AFFINE.helper_prompt
    assert task.problem_statement(1, AFFINE) == AFFINE.prompt


def test_each_agent_sees_the_same_worked_examples_before_every_problem() -> None:
    """A few-shot chat: system, k (user, assistant) examples in the task's own format, then the problem; the
    same examples for every problem (a shared prefix the engine caches), none of them the generator's rules."""
    task = CodeCoopTask()
    first, other = task.initial_messages(AFFINE), task.initial_messages(LOOKUP)
    for agent, demos in ((0, HELPER_DEMOS), (1, MAIN_DEMOS)):
        msgs = first[agent]
        assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * len(demos) + ["user"]
        assert msgs[:-1] == other[agent][:-1] and msgs[-1] != other[agent][-1]
        for user, answer in zip(msgs[1:-1:2], msgs[2:-1:2], strict=True):
            assert user["content"].startswith("Problem:\n```python\ndef ")
            assert task.role_instructions(agent) in user["content"]
            assert answer["content"].startswith("```python\ndef ") and answer["content"].endswith("\n```")
            assert '"""' not in answer["content"]  # the answer is code only, as the answer prefix starts it
    helpers = [task.demonstrations(0)[i]["content"] for i in (1, 3)]
    mains = [task.demonstrations(1)[i]["content"] for i in (1, 3, 5)]
    assert all(h.startswith("```python\ndef aux(") for h in helpers)
    assert all("aux(" in m and "def aux" not in m for m in mains)
    generated = {p.helper_prompt.split('"""')[1] for p in generate_coop_problems(400, 0)}
    assert not generated & {stub.split('"""')[1] for stub, _ in HELPER_DEMOS}


def test_the_worked_examples_are_right() -> None:
    """Each example answer does what its problem says (run here: our own constant source, not model output)."""
    task = CodeCoopTask()

    def define(answer: str, **names: object) -> dict:
        namespace: dict = dict(names)
        exec(answer.removeprefix("```python\n").removesuffix("```"), namespace)  # noqa: S102 - our constants
        return namespace

    odd = define(task.demonstrations(0)[1]["content"])["aux"]
    cost = define(task.demonstrations(0)[3]["content"])["aux"]
    assert [odd(x) for x in (0, 1, 2, 7)] == [False, True, False, True] and cost("abcd") == 12
    total, count, keep = (define(task.demonstrations(1)[i]["content"], aux=f)
                          for i, f in ((1, cost), (3, odd), (5, lambda x: x % 2 == 0)))
    assert total["total_cost"](["ab", "c"]) == 9 and total["total_cost"]([]) == 0
    assert count["count_odd"]([1, 2, 3, 5]) == 3 and count["count_odd"]([]) == 0
    assert keep["keep_even"]([1, 2, 4, 5]) == [2, 4]


def test_later_turns_keep_the_rule_with_the_helper_only(sandbox) -> None:  # noqa: ANN001
    """Feedback prompts show each agent its own problem text: the helper still sees its rule in turn 2."""
    task = CodeCoopTask(sandbox)
    texts = [answer(task, 0, AFFINE, "x: int) -> int:\n    return x\n```"),
             answer(task, 1, AFFINE, "xs: list[int]) -> int:\n    return sum(aux(x) for x in xs)\n```")]
    (reward,) = task.score([(AFFINE, texts)])
    node = Node(id="0", turn=1, root=0, messages=[], details=[reward])
    bridge = FeedbackBridge(load_config(None, ["task.name=code_coop", "dataset.name=coop"]).external)
    (msgs,) = bridge.next_messages(task, [Continuation(AFFINE, node, 0, [[texts[0]], [texts[1]]])])
    helper, main = (m[-1]["content"] for m in msgs)
    assert f"Problem:\n{AFFINE.helper_prompt.strip()}" in helper and RULE in helper
    main_problem = main.split("Your role:")[0]
    assert f"Problem:\n{AFFINE.prompt.strip()}" in main_problem and RULE not in main_problem
    assert "call `aux` and use its results" in main


def test_an_expert_reviews_every_part_of_the_specification(sandbox) -> None:  # noqa: ANN001
    from feedback import FeedbackContext
    from feedback.expert_edits import expert_messages

    task = CodeCoopTask(sandbox)
    texts = team(task, AFFINE)
    (reward,) = task.score([(AFFINE, texts)])
    fields = dict(problem=AFFINE.prompt, role_names=list(task.role_names),
                  role_instructions=[task.revise_instructions(a) for a in range(2)],
                  initial_messages=task.initial_messages(AFFINE), history=[[texts[0]], [texts[1]]], reward=reward)
    parts = [task.problem_statement(a, AFFINE) for a in range(2)]
    both = expert_messages(FeedbackContext(**fields, agent_problems=parts))[1]["content"]
    assert both.startswith(f"Problem:\n{AFFINE.helper_prompt}\n{AFFINE.prompt.strip()}\n\nTeam")  # both parts
    shared = expert_messages(FeedbackContext(**fields))[1]["content"]
    assert shared.startswith(f"Problem:\n{AFFINE.prompt.strip()}\n\nTeam")
    with pytest.raises(ValueError, match="agent_problems has 1 entries for 2 agents"):
        FeedbackContext(**fields, agent_problems=parts[:1])


def test_code_collab_later_turns_show_both_agents_the_shared_prompt(sandbox) -> None:  # noqa: ANN001
    task = CodeCollabTask(sandbox)
    texts = ["```python\ndef aux(x):\n    return x\n```", "```python\ndef total(xs):\n    return 0\n```"]
    (reward,) = task.score([(AFFINE, texts)])
    node = Node(id="0", turn=1, root=0, messages=[], details=[reward])
    bridge = FeedbackBridge(load_config(None, []).external)
    (msgs,) = bridge.next_messages(task, [Continuation(AFFINE, node, 0, [[texts[0]], [texts[1]]])])
    for m in msgs:
        assert m[-1]["content"].startswith(f"Problem:\n{AFFINE.prompt.strip()}\n\nYour role:")


# --- scoring through the real sandbox -----------------------------------------------------------------------


def test_only_the_team_with_the_rule_passes(sandbox) -> None:  # noqa: ANN001
    task = CodeCoopTask(sandbox)
    right = team(task, AFFINE)
    sig = "xs: list[int]) -> int:\n"
    guessed = answer(task, 1, AFFINE, sig + "    return sum(x * 2 + 1 for x in xs)\n```")  # inlines a guess
    ignores = answer(task, 1, AFFINE,
                     sig + "    total = 0\n    for x in xs:\n        total += x\n    return total\n```")
    body_only = "    " + AFFINE.helper_solution.strip() + "\n```"  # a bare body: wrapped in aux's own header
    wrong_helper = answer(task, 0, AFFINE, "x: int) -> int:\n    return x * 2 + 1\n```")
    items = [(AFFINE, right), (AFFINE, [right[0], guessed]), (AFFINE, [right[0], ignores]),
             (AFFINE, ["```python\n" + body_only, right[1]]), (AFFINE, [wrong_helper, right[1]]),
             (LOOKUP, team(task, LOOKUP))]
    ok, inlined, ignored, body, wrong, lookup = task.score(items)
    assert ok.all_passed and task.outcome_counts(ok) == {"helper_called": 1.0, "helper_used": 1.0,
                                                         "passed_with_helper": 1.0}
    assert ok.total == pytest.approx(4.0) and lookup.all_passed and lookup.helper_result_used
    assert not inlined.all_passed and not inlined.helper_called and inlined.tests_passed < inlined.tests_total
    assert not ignored.all_passed and task.outcome_counts(ignored)["helper_used"] == 0.0
    assert body.all_passed and body.codes[0].startswith("def aux(x: int) -> int:\n")
    assert not wrong.all_passed and task.outcome_counts(wrong)["passed_with_helper"] == 0.0
    assert ok.total > max(r.total for r in (inlined, ignored, wrong))


# --- data set and config ------------------------------------------------------------------------------------


def test_load_generates_the_set_and_splits_it_by_the_usual_rule() -> None:
    task = CodeCoopTask()
    train, evals = task.load(DS())
    assert len(train) == 336 and len(evals) == 64 and all(isinstance(p, CoopProblem) for p in train + evals)
    assert (train, evals) == split_problems(generate_coop_problems(400, 0), 64, 0)
    small_train, small_eval = task.load(DS(eval_size=10, max_problems=50, seed=3))
    assert (small_train, small_eval) == split_problems(generate_coop_problems(50, 3), 10, 3)
    assert task.load(DS(seed=1))[1] != evals
    with pytest.raises(DatasetError, match=r"^dataset.eval_size: 64 leaves no training problems"):
        task.load(DS(max_problems=64))


def test_coop_and_other_data_sets_do_not_mix() -> None:
    cfg = load_config(None, ["task.name=code_coop", "dataset.name=easy"])
    with pytest.raises(DatasetError) as err:
        build_task(cfg.task, None).load(cfg.dataset)
    assert str(err.value) == ("dataset.name='easy' is not allowed with task.name=code_coop; expected coop "
                              "(its problems are generated with the helper's part)")
    for name in ("code_collab", "code_single", "tool_agent"):
        cfg = load_config(None, [f"task.name={name}", "dataset.name=coop",
                                 f"magrpo.num_agents={TASKS[name].num_agents}"])
        with pytest.raises(DatasetError, match=r"^dataset.name='coop' is not allowed with this task; expected "
                                               r"task.name=code_coop with it") as err:
            build_task(cfg.task, None).load(cfg.dataset)
        assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"dataset.name='cop' is not allowed; expected one of: .*hf, coop$"):
        load_config(None, ["dataset.name=cop"])


def test_the_shipped_config_loads() -> None:
    cfg = load_config(ROOT / "configs" / "coop_T1_G8.yaml")
    assert (cfg.task.name, cfg.dataset.name, cfg.dataset.eval_size, cfg.dataset.max_problems) == ("code_coop", "coop",
                                                                                                  48, None)
    m = cfg.magrpo
    assert (m.num_agents, m.num_turns, m.num_generations, m.joint_mode, m.learning_rate) == (2, 1, 8, "align", 1.5e-3)
    assert (cfg.model.name, cfg.agents.mode, cfg.rollout.engine) == ("smollm2-135m-instruct", "lora", "vllm")
    t = cfg.training
    assert (t.steps, t.trees_per_step, t.output_dir) == (12, 4, "runs/coop_T1_G8")
    train, evals = build_task(cfg.task, None).load(cfg.dataset)
    assert (len(train), len(evals)) == (352, 48)
