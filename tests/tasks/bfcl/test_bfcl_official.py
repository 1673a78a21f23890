"""Accuracy is BFCL's own pipeline on the reply text (comlrl/tasks/bfcl/official.py): its prompting decoder,
its format check and its checker. The project's lenient decoder only shapes the reward and is logged as
`decoded_lenient`. Every reply here is judged by `bfcl_eval`'s own functions, as its eval runner calls them."""

from __future__ import annotations

import pytest

from comlrl.tasks.bfcl import official
from comlrl.tasks.bfcl.data import gold_answer, load_category
from comlrl.tasks.bfcl.reward import ShapingWeights, score

W = ShapingWeights()
GOLD = "[calculate_triangle_area(base=10, height=5)]"


@pytest.fixture(scope="module")
def by_id() -> dict[str, object]:
    out = {}
    for category in ("simple_python", "parallel", "simple_java", "simple_javascript", "irrelevance"):
        out.update({p.task_id: p for p in load_category(category)})
    return out


@pytest.mark.parametrize("reply", [
    f"Sure! Here is the call: {GOLD}",  # prose before
    f"{GOLD}\n\nThe area is 25.",  # trailing text
    f"```python\n{GOLD}\n```",  # a fenced block with a language tag
    '[{"name": "calculate_triangle_area", "arguments": {"base": 10, "height": 5}}]',  # JSON
    f"'{GOLD}'".replace("'[", "\"[").replace("]'", "]\""),  # a quoted list
    f"{GOLD}{GOLD}",  # the call list written twice
])
def test_a_wrapped_gold_reply_fails_bfcls_pipeline_and_passes_the_lenient_decoder(by_id, reply) -> None:
    r = score(by_id["simple_python_0"], [reply], W)
    assert not r.all_passed and r.components["checker"] == 0.0
    assert r.verdict.error_type in ("ast_decoder:decoder_failed", "ast_decoder:decoder_wrong_output_format")
    assert r.components["decoded_lenient"] == 1.0 and r.components["decoded"] == 0.0
    assert r.components["arguments"] == 1.0  # the shaping terms still read the wrapped call


def test_the_gold_in_bfcls_format_passes_both(by_id) -> None:
    r = score(by_id["simple_python_0"], [GOLD], W)
    assert r.all_passed and r.components["decoded"] == 1.0 and r.components["decoded_lenient"] == 1.0
    assert r.total == pytest.approx(1 + W.format_reward + W.count_reward + W.schema_reward + W.argument_reward)


def test_a_gold_with_a_repeated_call_passes(by_id) -> None:
    p = by_id["parallel_158"]  # random.normalvariate(mu=5, sigma=2) twice, then (mu=10, sigma=3) twice
    assert len(p.gold) == 4 and p.gold[0] == p.gold[1] and p.gold[2] == p.gold[3]
    r = score(p, [gold_answer(p)], W)
    assert r.all_passed and r.components["duplicates"] == 0.0 and len(r.calls) == 4
    once = score(p, ["[random.normalvariate(mu=5, sigma=2), random.normalvariate(mu=10, sigma=3)]"], W)
    assert not once.all_passed and once.verdict.error_type == "parallel_function_checker_no_order:wrong_count"
    five, ten = "random.normalvariate(mu=5, sigma=2)", "random.normalvariate(mu=10, sigma=3)"
    thrice = "[" + ", ".join([five] * 3 + [ten]) + "]"
    assert score(p, [thrice], W).components["duplicates"] == 0.25  # one more than the gold writes it


@pytest.mark.parametrize(("task_id", "reply"), [
    ("simple_java_7", '[EFSNIOResource.copy(destination=new Path("/backup/data.txt"), force=true, '
                      'monitor=progressTracker)]'),
    ("simple_java_11", '[BasePolicyDataProvider.getRegistryPolicyValue(root=WinReg.HKEY_LOCAL_MACHINE, '
                       'property="EnableExtensions")]'),
    ("simple_java_82", "[clear001a.runIt(args=testArgs, out=System.out)]"),
    ("simple_java_6", "[SpreadsheetPresentation.refreshData(refreshMetadata=true, append=true, keepState=true)]"),
    ("simple_javascript_0", '[validateUserInput(inputField="userInputField", isComplete=true)]'),
])
def test_java_and_javascript_golds_pass_through_bfcls_tree_sitter_parsers(by_id, task_id, reply) -> None:
    r = score(by_id[task_id], [reply], W)
    assert r.all_passed, r.verdict


def test_irrelevance_follows_bfcls_rule_on_the_reply_text(by_id) -> None:
    p = by_id["irrelevance_0"]
    name = p.functions[0]["name"]
    assert score(p, ["I cannot help with that."], W).all_passed
    assert score(p, ["[]"], W).all_passed
    assert not score(p, [f"[{name}(x=1)]"], W).all_passed
    # a call mentioned in prose or a fence does not decode by BFCL's decoder: no call, so irrelevance passes
    for reply in (f"You could call [{name}(x=1)] but it does not apply.", f"```\n[{name}(x=1)]\n```\nNo."):
        r = score(p, [reply], W)
        assert r.all_passed and r.components["decoded_lenient"] == 1.0


@pytest.mark.parametrize("reply", [
    "[f(a=__import__('os').getpid() + 1)]",
    "[f(a=open('/etc/passwd').read() + 'x')]",
    "[f(a=2 ** 10 ** 10)]",
    "[f(a='x' * 10 ** 9)]",
    "[f(a=[0] * 10 ** 8)]",
    "[f(a=1 << 10 ** 6)]",
])
def test_arithmetic_that_is_not_literal_never_reaches_bfcls_eval(reply, monkeypatch) -> None:
    import builtins

    def refuse(*args, **kwargs):  # BFCL's decoder calls `eval` on arithmetic: it must not be reached
        raise AssertionError("eval reached")

    monkeypatch.setattr(builtins, "eval", refuse)
    out = official.decode_ast(reply, "simple_python")
    assert not out.ok and out.refused and out.error == official.UNEVALUATED
    assert official.decode_execute(reply).refused


def test_literal_arithmetic_is_decoded_as_bfcl_decodes_it() -> None:
    out = official.decode_ast("[f(a=2**10, b=-3, c=7/2, d='ab' + 'c', e=[1] * 3, g=unit)]", "simple_python")
    assert out.calls == [{"f": {"a": 1024, "b": -3, "c": 3.5, "d": "abc", "e": [1, 1, 1], "g": "unit"}}]


def test_a_multi_turn_step_decodes_as_bfcls_execute_decoder() -> None:
    step = official.decode_execute("[cd(folder='document'), ls(a=True)]")
    assert step.strings == ("cd(folder='document')", "ls(a=True)") and step.called
    assert not official.decode_execute("[]").called and not official.decode_execute("").called
    prose = official.decode_execute("I will list the files: [ls()]")
    assert not prose.called and prose.error
