"""Decoding replies into calls (comlrl/tasks/bfcl/calls.py): the accepted forms, the literal-only rule, and
nothing a model writes ever raises or reaches `eval`."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.tasks.bfcl.calls import Call, checker_output, decode


@pytest.mark.parametrize(("text", "calls", "form", "exact"), [
    ("[f(a=1, b='x')]", [("f", {"a": 1, "b": "x"})], "python", True),
    ("f(a=1)", [("f", {"a": 1})], "python", True),  # BFCL adds the brackets
    ("```\n[f(a=1)]\n```", [("f", {"a": 1})], "python", True),  # backticks and newlines stripped, as BFCL does
    ("[math.sqrt(x=4), g(y=[1, 2], z={'k': (1, 2)})]",
     [("math.sqrt", {"x": 4}), ("g", {"y": [1, 2], "z": {"k": (1, 2)}})], "python", True),
    ("[f(a=-3, b=2**10, c=7/2, d=None, e=True, unit=celsius)]",
     [("f", {"a": -3, "b": 1024, "c": 3.5, "d": None, "e": True, "unit": "celsius"})], "python", True),
    ("[]", [], "python", True),
    ("Sure! [f(a=1)] is the call.", [("f", {"a": 1})], "python", False),  # prose around the list
    ("[f(a=1)]\n\nThe function returns 5.", [("f", {"a": 1})], "python", False),
    ("```python\n[f(a=1)]\n```", [("f", {"a": 1})], "python", False),  # a language tag BFCL would choke on
    ('[{"name": "f", "arguments": {"a": 1}}]', [("f", {"a": 1})], "json", False),
    ('{"function": "f", "parameters": {"a": "x"}}', [("f", {"a": "x"})], "json", False),
    ('[{"name": "f", "arguments": "{\\"a\\": 2}"}]', [("f", {"a": 2})], "json", False),
])
def test_accepted_forms_decode_to_their_calls(text, calls, form, exact) -> None:
    d = decode(text)
    assert [(c.name, c.args) for c in d.calls] == calls
    assert (d.form, d.exact, d.ok, d.error) == (form, exact, True, "")


@pytest.mark.parametrize(("text", "reason"), [
    ("The area is 25 square units.", "not Python call syntax"),
    ("[f(a=g(b=1))]", "nested call"),  # BFCL would run the inner call through eval: refused
    ("[f(a=__import__('os').system('true'))]", "nested call"),
    ("[f(a=math.pi)]", "Attribute"),
    ("[f(a=x + 1)]", "not a literal"),
    ("[f(a=10**100000)]", "too large"),
    ("[f(a=1/0)]", "fails"),
    ("[f(**kw)]", "** argument"),
    ("[(lambda: 1)()]", "not a name"),
    ("[1, 2]", "not a call"),
])
def test_what_is_not_a_call_says_why_and_never_raises(text, reason) -> None:
    d = decode(text)
    assert not d.ok and d.calls == ()
    assert reason in d.error


def test_positional_arguments_are_dropped_as_bfcl_drops_them() -> None:
    assert decode("[f(1, 2, a=3)]").calls[0].args == {"a": 3}


def test_canonical_text_is_literal_python_that_round_trips() -> None:
    call = decode("[f(a=\"it's\", b=[1, {'k': None}], c=-0.5)]").calls[0]
    tree = ast.parse(call.text(), mode="eval")
    assert isinstance(tree.body, ast.Call)
    assert [ast.literal_eval(k.value) for k in tree.body.keywords] == ["it's", [1, {"k": None}], -0.5]
    assert decode(call.text()).calls == (call,)


def test_checker_output_shapes_python_and_java_values() -> None:
    calls = decode("[Foo.bar(flag=true, name='x', n=50, items=[1, 2])]").calls
    assert checker_output(calls) == [{"Foo.bar": {"flag": "true", "name": "x", "n": 50, "items": [1, 2]}}]
    # Java/JavaScript values are source text, as BFCL's tree-sitter decoders give them (strings unquoted)
    assert checker_output(calls, "java") == [{"Foo.bar": {"flag": "true", "name": "x", "n": "50", "items": "[1, 2]"}}]
    assert checker_output([Call("g", {})]) == [{"g": {}}]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("[](){},=:'\"abcxyz_.0123456789 -*/\n`")), max_size=80))
def test_any_text_decodes_or_says_why_without_raising(text: str) -> None:
    d = decode(text)
    assert d.ok or d.error
    for call in d.calls:  # every decoded call renders as literal-only Python that decodes to itself
        assert decode(call.text()).calls[0].args == call.args
