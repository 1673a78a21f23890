"""What every mode guarantees beyond its golden files: slicing, options, stable prefix, caps, N agents."""

from __future__ import annotations

import dataclasses

import fb_cases as cases
import pytest
from fb_golden import MODES, canned_expert, config

from feedback import FeedbackContext, FeedbackMetrics, build_next_messages
from feedback.context import cap

FIRST_FAIL = "assert sum_of_squares([1, 2, 3]) == 14"
LAST_FAIL = "assert sum_of_squares([-2]) == 4"


def build(mode: str, ctx: FeedbackContext, metrics: FeedbackMetrics | None = None, **kw: object):
    expert = canned_expert("failing") if mode == "expert_edits" else None
    [out] = build_next_messages([ctx], config(mode, **kw), expert=expert, metrics=metrics or FeedbackMetrics())
    return out


def user(msgs) -> str:
    return msgs[1]["content"]


PASSING = "assert sum_of_squares([]) == 0"  # the failing case's second assert, which passes


@pytest.mark.parametrize("sandbox_slice,first,last", [(1, True, False), (-1, False, True), ("all", True, True),
                                                       (0, True, True), (None, True, True), (2, True, True)])
def test_sandbox_slice_of_failing_selects_failing_asserts(sandbox_slice, first, last):
    text = user(build("level_feedback", cases.context("failing"), sandbox_slice=sandbox_slice,
                      sandbox_slice_of="failing")[1])
    assert (FIRST_FAIL in text) is first and (LAST_FAIL in text) is last
    assert PASSING not in text  # passing asserts are never listed
    assert "Tests: 1/3 passed" in text and "- Failing asserts (" in text


@pytest.mark.parametrize("sandbox_slice,shown,label", [
    (1, [FIRST_FAIL], "first 1 of 3"), (2, [FIRST_FAIL, PASSING], "first 2 of 3"), (-1, [LAST_FAIL], "last 1 of 3"),
    (-2, [PASSING, LAST_FAIL], "last 2 of 3"), ("all", [FIRST_FAIL, PASSING, LAST_FAIL], "all 3"),
])
def test_sandbox_slice_of_tests_is_the_documented_meaning(sandbox_slice, shown, label):
    """Default: the first / last n eval asserts in test order, passing or failing, with their outcomes."""
    text = user(build("level_feedback", cases.context("failing"), sandbox_slice=sandbox_slice)[1])
    assert f"- Asserts ({label}):" in text
    assert [a for a in (FIRST_FAIL, PASSING, LAST_FAIL) if a in text] == shown
    if PASSING in text:
        assert f"{PASSING}\n    -> passed" in text
    passing = user(build("level_feedback", cases.context("passing"), sandbox_slice=sandbox_slice)[0])
    assert f"- Asserts ({label}):" in passing and "-> passed" in passing  # shown even when all pass


def test_bad_feedback_options_are_refused():
    for key, value in (("sandbox_slice_of", "passing"), ("passed_context", "tiny")):
        with pytest.raises(ValueError, match=f"external.{key}={value!r} is not allowed"):
            build("level_feedback", cases.context("failing"), **{key: value})


@pytest.mark.parametrize("mode", ["level_passed", "passed", "plain", "expert_edits"])
def test_sandbox_slice_has_no_effect_outside_level_feedback(mode):
    outs = [build(mode, cases.context("failing"), sandbox_slice=s) for s in (1, -1, "all")]
    assert outs[0] == outs[1] == outs[2]
    assert FIRST_FAIL not in user(outs[0][0]) and LAST_FAIL not in user(outs[0][0])


@pytest.mark.parametrize("mode", MODES)
def test_stable_prefix_system_problem_role_history_then_feedback(mode):
    ctx = cases.context("failing")
    for agent, msgs in enumerate(build(mode, ctx, passed_context="full")):
        assert [m["role"] for m in msgs] == ["system", "user"]
        assert msgs[0]["content"] == cases.SYSTEM  # the task's own system prompt, as in turn 1
        text = user(msgs)
        order = [text.index("Problem:"), text.index(f"Your role: {ctx.role_names[agent]}"),
                 text.index("Your earlier attempts"), text.index("Your latest code:"),
                 text.index("Your teammates' latest code:")]
        assert order == sorted(order) and text.startswith("Problem:\n" + cases.PROBLEM.strip("\n"))
        if mode != "plain":
            assert text.index("Feedback:") > order[-1]


@pytest.mark.parametrize("mode", ["passed", "level_passed"])
def test_outcome_modes_carry_only_own_latest_code_by_default(mode):
    ctx = cases.context("failing")
    for agent, msgs in enumerate(build(mode, ctx)):
        text = user(msgs)
        assert "teammates" not in text and "earlier attempts" not in text
        assert "return x + x" not in text  # the helper's older attempt
        assert ctx.code(1 - agent).strip("\n") not in text  # the teammate's code
        own = ctx.code(agent).strip("\n")
        assert f"Your latest code:\n```python\n{own}\n```\n\nFeedback:\n" in text
        assert "AssertionError" not in text and "Failing" not in text  # no diagnostics
        assert text.endswith("Reply with the complete code of your part only, no explanations.")


def test_prefix_is_shared_across_modes_and_outcomes():
    """Everything before the feedback depends only on problem, role and the agents' code (and, for the
    outcome-only modes, on how much context they carry)."""
    ctx = cases.context("failing")
    ctx_other_reward = dataclasses.replace(ctx, reward=cases.passing_reward())
    heads: dict[str, set[str]] = {"full": set(), "minimal": set()}
    for mode, context in (("level_feedback", "full"), ("expert_edits", "full"), ("level_passed", "full"),
                          ("passed", "full"), ("level_passed", "minimal"), ("passed", "minimal")):
        for c in (ctx, ctx_other_reward):
            heads[context].add(user(build(mode, c, passed_context=context)[0]).split("\n\nFeedback:\n")[0])
    assert len(heads["full"]) == 1 and len(heads["minimal"]) == 1


def test_teammates_see_each_others_latest_code():
    out = build("plain", cases.context("failing"))
    assert "def sum_of_squares(xs):\n    return sum(aux(x) for x in xs)" in user(out[0]).split("teammates'")[1]
    assert "def aux(x):\n    return x * 2" in user(out[1]).split("teammates'")[1]


def test_include_original_prompt_false_drops_the_problem_but_keeps_the_role():
    text = user(build("level_feedback", cases.context("failing"), include_original_prompt=False)[0])
    assert "Problem:" not in text and "Return the sum of the squares" not in text
    assert text.startswith("Your role: helper") and "Write a helper function `aux`" in text


def test_include_history_false_keeps_only_the_code_being_revised():
    text = user(build("level_feedback", cases.context("failing"), include_history=False)[0])
    assert "earlier attempts" not in text and "return x + x" not in text
    assert "Your latest code:\n```python\ndef aux(x):\n    return x * 2" in text


def test_plain_reads_no_results_at_all():
    ctx = dataclasses.replace(cases.context("failing"), reward=None)
    out = build("plain", ctx)
    assert all("Feedback:" not in user(m) for m in out)
    assert out == build("plain", cases.context("failing"))  # results make no difference


def test_level_feedback_reports_syntax_errors_with_line_and_column():
    out = build("level_feedback", cases.context("syntax"))
    assert "main (you): error at line 1, col 23: expected ':'" in user(out[1])
    assert "main: MISSING" in user(out[0]) and "(not run: the code does not compile)" in user(out[0])


def test_passed_is_one_binary_signal():
    assert "Feedback:\nAll checks passed.\n" in user(build("passed", cases.context("passing"))[0])
    for case in ("failing", "syntax"):
        assert "Feedback:\nNot all checks passed.\n" in user(build("passed", cases.context(case))[0])


def test_any_number_of_agents():
    roles = ["parser", "solver", "checker"]
    base = cases.failing_reward()
    reward = dataclasses.replace(base, analyses=tuple(dataclasses.replace(base.analyses[0], role=r) for r in roles))
    ctx = FeedbackContext(problem=cases.PROBLEM, role_names=roles, role_instructions=["a", "b", "c"],
                          initial_messages=[], history=[["x = 1"], ["y = 2"], ["z = 3"]], reward=reward)
    for mode in ("level_feedback", "level_passed", "passed", "plain"):
        out = build(mode, ctx)
        assert len(out) == 3
        for i, msgs in enumerate(out):
            text = user(msgs)
            assert f"(agent {i + 1} of 3)" in text
            seen = sum(code in text for code in ("x = 1", "y = 2", "z = 3"))
            assert seen == (1 if mode in ("level_passed", "passed") else 3)  # outcome modes: own code only


def test_long_texts_are_capped():
    huge = "def aux(x):\n" + "".join(f"    v{i} = {i}\n" for i in range(3000)) + "    return x"
    msg = "boom " * 2000
    base = cases.failing_reward()
    bad = dataclasses.replace(base.exec.asserts[0], message=msg, source="assert " + "f(1) and " * 500 + "True")
    reward = dataclasses.replace(base, exec=dataclasses.replace(base.exec, asserts=(bad, *base.exec.asserts[1:])))
    ctx = dataclasses.replace(cases.context("failing"), problem=cases.PROBLEM * 200,
                              history=[[huge, huge], [cases.MAIN_OK]], codes=[[huge, huge], [cases.MAIN_OK]],
                              reward=reward)
    for mode in ("level_feedback", "plain", "expert_edits"):
        text = user(build(mode, ctx)[0])
        assert len(text) < 9000 and "characters cut" in text
    assert len(user(build("level_feedback", ctx)[1])) < 9000


def test_metrics_count_prompts_per_mode():
    m = FeedbackMetrics()
    cfg = config("level_passed")
    build_next_messages([cases.context(c) for c in ("passing", "failing", "syntax")], cfg, metrics=m)
    assert m.get("prompts/level_passed") == 3
    assert set(m.snapshot()) >= {"expert/fallbacks", "expert/cost_usd", "expert/calls"}
    assert m.snapshot(reset=True)["prompts/level_passed"] == 3 and m.get("prompts/level_passed") == 0


def test_process_wide_counters_by_default():
    import feedback

    before = feedback.metrics()["prompts/passed"]
    build_next_messages([cases.context("failing")], config("passed"))
    assert feedback.metrics()["prompts/passed"] == before + 1


def test_unknown_mode_and_fallback_are_refused():
    with pytest.raises(ValueError, match="external.mode='loud'"):
        build_next_messages([cases.context("failing")], config("loud"))
    with pytest.raises(ValueError, match="external.expert_fallback"):
        build_next_messages([cases.context("failing")], config("expert_edits", expert_fallback="expert_edits"),
                            expert=canned_expert("failing"))


@dataclasses.dataclass(frozen=True)
class Verdict:
    """A reward of a task with no code (a plugin task's, like tests/plugins/rhyme_task.py's)."""

    total: float
    components: dict[str, float] = dataclasses.field(default_factory=dict)
    notes: tuple[str, ...] = ()
    all_passed: bool = False


@pytest.mark.parametrize("mode", ["level_feedback", "level_passed", "passed", "expert_edits"])
def test_a_reward_without_code_results_is_refused_in_one_line(mode):
    """The default mode with a task of its own used to render "Tests: none found" from getattr defaults."""
    ctx = dataclasses.replace(cases.context("failing"), reward=Verdict(0.5))
    with pytest.raises(ValueError, match=rf"^external.mode='{mode}' shows a code task's results "
                                         r"\(feedback.CodeResults\); "
                                         r"this task's reward Verdict has none: use external.mode=plain"):
        build(mode, ctx)
    assert len(build("plain", ctx)) == 2  # plain reads no results


def test_context_validation():
    ctx = cases.context("failing")
    with pytest.raises(ValueError, match="history"):
        dataclasses.replace(ctx, history=[["a"]])
    with pytest.raises(ValueError, match="at least one previous response"):
        dataclasses.replace(ctx, history=[[], ["b"]])


def test_works_with_the_real_external_config():
    from comlrl.config.schema import ExternalConfig, normalize_slice

    cfg = ExternalConfig()
    cfg.sandbox_slice = normalize_slice("all")
    [out] = build_next_messages([cases.context("failing")], cfg, metrics=FeedbackMetrics())
    assert FIRST_FAIL in user(out[0]) and LAST_FAIL in user(out[0])


def test_code_is_the_scored_code_never_a_reparse():
    """Prompts show `codes` (the extractor's output, the last one scored); without codes, the text as written."""
    ctx = cases.context("failing")
    history = [["```python\ndef aux(x):\n    return 1\n```", "raw helper"], ["raw main 1", "raw main 2"]]
    codes = [["def aux(x):\n    return 1\n", "def aux(x):\n    return 2\n"], ["m1", "m2"]]
    with_codes = dataclasses.replace(ctx, history=history, codes=codes)
    assert [with_codes.code(0, 0), with_codes.code(0), with_codes.code(1)] == [codes[0][0], codes[0][1], "m2"]
    as_written = dataclasses.replace(ctx, history=history, codes=None)
    assert [as_written.code(0, 0), as_written.code(1)] == [history[0][0], "raw main 2"]
    with pytest.raises(ValueError, match="one code per response"):
        dataclasses.replace(ctx, history=history, codes=[["only one"], ["m1", "m2"]])


def test_cap_keeps_head_and_tail():
    text = "HEAD" + "x" * 1000 + "TAIL"
    out = cap(text, 100)
    assert out.startswith("HEAD") and out.endswith("TAIL") and "characters cut" in out and len(out) < 160
    assert cap("short", 100) == "short"
