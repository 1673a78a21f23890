"""BFCL's own checkers wired in (comlrl/tasks/bfcl/checker.py, reward.py): the verdicts they give on
hand-written gold and wrong answers, per category, as the benchmark's checker counts them. The installed
`bfcl-eval` package (no declared dependencies, the model table stood in for) must import in CI."""

from __future__ import annotations

import pytest

from comlrl.tasks.bfcl.checker import bfcl, multi_turn_verdict
from comlrl.tasks.bfcl.data import load_category
from comlrl.tasks.bfcl.reward import ShapingWeights, score

W = ShapingWeights()


@pytest.fixture(scope="module")
def entries() -> dict[str, object]:
    """The first entry of each category used below (BFCL's own data, as shipped)."""
    wanted = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_parallel",
              "simple_java", "simple_javascript", "irrelevance", "multi_turn_base")
    return {c: load_category(c)[0] for c in wanted}


def test_the_split_install_imports_the_official_checkers() -> None:
    b = bfcl()
    assert b.ast.ast_checker.__module__ == "bfcl_eval.eval_checker.ast_eval.ast_checker"
    assert b.multi_turn.multi_turn_checker.__module__ == "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker"
    assert "site-packages" in b.ast.__file__ and "bfcl_eval" in b.ast.__file__  # the package's file, not a copy


# (category, reply, passes, the checker's error type when it fails)
CASES = [
    ("simple_python", "[calculate_triangle_area(base=10, height=5)]", True, ""),
    ("simple_python", "[calculate_triangle_area(base=10, height=5, unit='units')]", True, ""),
    ("simple_python", "calculate_triangle_area(height=5, base=10)", True, ""),  # order and brackets free
    ("simple_python", "[calculate_triangle_area(base=10, height=6)]", False, "value_error:others"),
    ("simple_python", "[calculate_triangle_area(base='10', height=5)]", False, "type_error:simple"),
    ("simple_python", "[calculate_triangle_area(base=10)]", False, "simple_function_checker:missing_required"),
    ("simple_python", "[triangle_area(base=10, height=5)]", False, "simple_function_checker:wrong_func_name"),
    ("simple_python", "The area is 25.", False, "ast_decoder:decoder_failed"),
    ("multiple", "[triangle_properties.get(side1=5, side2=4, side3=3)]", True, ""),
    ("multiple", "[circle_properties.get(radius=3)]", False, "simple_function_checker:wrong_func_name"),
    ("parallel", "[spotify.play(artist='Maroon 5', duration=15), spotify.play(artist='Taylor Swift', duration=20)]",
     True, ""),
    ("parallel", "[spotify.play(artist='Taylor Swift', duration=20)]", False,
     "parallel_function_checker_no_order:wrong_count"),
    ("parallel_multiple", "[math_toolkit.sum_of_multiples(lower_limit=1, upper_limit=1000, multiples=[3, 5]), "
                          "math_toolkit.product_of_primes(count=5)]", True, ""),
    ("parallel_multiple", "[math_toolkit.product_of_primes(count=5)]", False,
     "parallel_function_checker_no_order:wrong_count"),
    ("live_simple", "[get_user_info(user_id=7890, special='black')]", True, ""),
    ("live_simple", "[get_user_info(user_id=7891, special='black')]", False, "value_error:others"),
    ("live_parallel", "[get_current_weather(location='Beijing, China', unit='fahrenheit'), "
                      "get_current_weather(location='Shanghai, China', unit='fahrenheit')]", True, ""),
    ("simple_java", "[GeometryPresentation.createPresentation(controller='mapController', parent='mapArea')]",
     True, ""),
    ("simple_java", "[GeometryPresentation.createPresentation(controller='mapController')]", False,
     "simple_function_checker:missing_required"),
    ("simple_javascript", "[validateUserInput(inputField='userInputField', isComplete=true)]", True, ""),
    ("simple_javascript", "[validateUserInput(inputField='other', isComplete=true)]", False, "value_error:string"),
    ("irrelevance", "I cannot answer this with the given function.", True, ""),
    ("irrelevance", "[]", True, ""),
    ("irrelevance", "[determine_body_mass_index(weight=70, height=1.75)]", False, "irrelevance_error:decoder_success"),
]


@pytest.mark.parametrize(("category", "reply", "passes", "error_type"), CASES)
def test_the_checkers_verdict_on_gold_and_wrong_answers(entries, category, reply, passes, error_type) -> None:
    r = score(entries[category], [reply], W)
    assert (r.all_passed, r.verdict.error_type) == (passes, error_type)
    assert r.components["checker"] == float(passes)


def test_a_parallel_entry_split_between_two_agents_passes_when_the_union_is_right(entries) -> None:
    p = entries["parallel"]
    a, b = "[spotify.play(artist='Taylor Swift', duration=20)]", "[spotify.play(artist='Maroon 5', duration=15)]"
    both = score(p, [a, b], W)
    assert both.all_passed and both.components["lazy_agents"] == 0 and both.components["duplicates"] == 0
    assert both.components["schema"] == 1.0  # both calls give spotify.play's required parameters, nothing else
    assert both.components["arguments"] == 1.0
    assert both.total == pytest.approx(1 + W.format_reward + W.count_reward + W.schema_reward + W.argument_reward)
    # the same call twice: both reach the checker (repeats are kept, as BFCL judges one reply holding both),
    # which finds no match for the second gold call; the reward's duplicate term says so too
    twice = score(p, [a, a], W)
    assert not twice.all_passed and twice.components["duplicates"] == 0.5
    assert twice.verdict.error_type == "parallel_function_checker_no_order:cannot_find_match"
    # one agent does it all, the other writes an empty call list: a pass, with the lazy-agent penalty
    lazy = score(p, [a[:-1] + ", " + b[1:], "[]"], W)
    assert lazy.all_passed and lazy.components["lazy_agents"] == 1
    assert lazy.total == pytest.approx(both.total - W.lazy_penalty / 2)
    # a teammate's prose is a reply BFCL cannot decode: the team's answer fails, as one model's would
    prose = score(p, [a[:-1] + ", " + b[1:], "I agree."], W)
    assert not prose.all_passed and prose.verdict.error_type == "ast_decoder:decoder_failed"


def test_bad_model_output_is_a_failed_verdict_never_an_exception(entries) -> None:
    for reply in ["[calculate_triangle_area(base=float('nan'))]", "[calculate_triangle_area(base={1: 2}, height=[])]",
                  "[" * 500, "[calculate_triangle_area(base=" + "9" * 5000 + ", height=5)]", "\x00\x01"]:
        r = score(entries["simple_python"], [reply], W)
        assert not r.all_passed and r.components["checker"] == 0 and r.total < 1


def test_the_multi_turn_checker_accepts_the_gold_turn_by_turn_and_refuses_a_wrong_state(entries) -> None:
    e = entries["multi_turn_base"]
    gold = e.gold
    for t in range(1, len(gold) + 1):  # the per-turn verdict: the gold prefix through turn t
        assert multi_turn_verdict(e.entry, [[list(turn)] for turn in gold[:t]], gold[:t]).valid
    wrong = [[["cd(folder='document')", "mkdir(dir_name='tmp')"]]]  # made 'tmp', the gold makes 'temp'
    v = multi_turn_verdict(e.entry, wrong, gold[:1])
    assert not v.valid and v.error_type == "multi_turn:instance_state_mismatch"
    assert multi_turn_verdict(e.entry, [[]], gold[:1]).error_type == "multi_turn:empty_turn_model_response"
    # each verdict runs under its own name: the checker's cached backend instances never leak between verdicts
    scope = vars(bfcl().multi_turn_utils)
    assert not [k for k in scope if k.startswith("comlrl_")]


def test_schema_fit_rewards_documented_parameters_and_nothing_else(entries) -> None:
    p = entries["simple_python"]  # calculate_triangle_area(base, height required; unit optional)
    fit = {reply: score(p, [reply], W).components["schema"] for reply in (
        "[calculate_triangle_area(base=1, height=2, unit='m')]",  # right names, wrong values: a full fit
        "[calculate_triangle_area(base=1)]",  # half the required
        "[calculate_triangle_area(base=1, height=2, colour='red')]",  # one of three arguments undocumented
        "[area(base=1, height=2)]",  # an undocumented function
        "no call")}
    assert list(fit.values()) == [1.0, 0.5, pytest.approx(2 / 3), 0.0, 0.0]
    wrong_values = score(p, ["[calculate_triangle_area(base=1, height=2)]"], W)
    assert not wrong_values.all_passed and wrong_values.total == pytest.approx(
        W.format_reward + W.count_reward + W.schema_reward + W.argument_reward / 3)  # only `unit` (optional, left out)


@pytest.mark.parametrize(("reply", "credit"), [
    ("[calculate_triangle_area(base=10, height=5)]", 1.0),  # unit is optional in the gold: leaving it out counts
    ("[calculate_triangle_area(base=10, height=6)]", 2 / 3),
    ("[calculate_triangle_area(base=10.0, height=5)]", 2 / 3),  # the checker's own rule: an integer is no float
    ("[calculate_triangle_area(base='10', height=5, unit='cm')]", 1 / 3),  # a string is no integer; cm is no unit
    ("[triangle(base=10, height=5)]", 0.0),  # no call of the gold's function
])
def test_argument_credit_is_the_checkers_verdict_on_each_parameter_alone(entries, reply, credit) -> None:
    assert score(entries["simple_python"], [reply], W).components["arguments"] == pytest.approx(credit)


def test_argument_credit_matches_each_gold_call_of_a_parallel_entry_once(entries) -> None:
    p = entries["parallel"]
    one_wrong = "[spotify.play(artist='Taylor Swift', duration=20), spotify.play(artist='Maroon 5', duration=16)]"
    assert score(p, [one_wrong], W).components["arguments"] == pytest.approx(0.75)
    twice = "[spotify.play(artist='Taylor Swift', duration=20)]"  # the second gold call finds no call left
    assert score(p, [twice], W).components["arguments"] == pytest.approx(0.5)


def test_the_benchmarks_result_folder_is_removed_when_the_process_exits(tmp_path) -> None:
    """BFCL makes result folders under BFCL_PROJECT_ROOT on import; the one made here goes with the process."""
    import os
    import subprocess
    import sys

    code = ("import os; from comlrl.tasks.bfcl.checker import bfcl; bfcl(); "
            "root = os.environ['BFCL_PROJECT_ROOT']; assert os.path.isdir(os.path.join(root, 'result')); print(root)")
    env = {k: v for k, v in os.environ.items() if k != "BFCL_PROJECT_ROOT"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    root = out.stdout.strip()
    assert root and not os.path.exists(root)
