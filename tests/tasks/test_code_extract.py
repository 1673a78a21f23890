"""Code extraction from untrusted completions: every shape small models produce, and never an exception."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from comlrl.tasks.code.extract import (
    drop_prose,
    extract,
    extract_code,
    fix_repeated_headers,
    function_header,
    salvage,
    split_fences,
)

HEADER = "def add(a: int, b: int) -> int:"
GOOD = "def add(a, b):\n    return a + b\n"


def run(code: str, *args: object) -> object:
    """Execute extracted (trusted, test-authored) code and call `add`."""
    ns: dict[str, object] = {}
    exec(compile(code, "<extracted>", "exec"), ns)  # noqa: S102 - test inputs written in this file
    return ns["add"](*args)  # type: ignore[operator]


def top_level(code: str) -> list[str]:
    return [type(n).__name__ for n in ast.parse(code).body]


# --- fences -------------------------------------------------------------------------------------------


def test_single_python_fence_with_prose_around() -> None:
    text = "Sure, here it is:\n```python\ndef add(a, b):\n    return a + b\n```\nThis adds two numbers."
    e = extract(text, "add", HEADER)
    assert e.code == GOOD
    assert e.notes == ("fenced",)


@pytest.mark.parametrize("lang", ["python", "py", "Python", "python3", ""])
def test_fence_languages(lang: str) -> None:
    assert extract_code(f"```{lang}\n{GOOD}```", "add") == GOOD


def test_tilde_fence_and_long_backtick_fence() -> None:
    assert extract_code(f"~~~python\n{GOOD}~~~", "add") == GOOD
    assert extract_code(f"````python\n{GOOD}````", "add") == GOOD


def test_usage_block_after_solution_is_dropped() -> None:
    text = f"```python\n{GOOD}```\nExample usage:\n```python\nprint(add(3, 7))  # Output: 10\n```"
    assert extract_code(text, "add") == GOOD


def test_first_definition_wins_over_later_variants() -> None:
    # small models often follow the answer with a broken "alternative" of the same function
    text = (
        "```python\ndef add(a, b):\n    return a + b\n```\nOr manually:\n"
        "```python\ndef add(a, b):\n    return add(a, b)\n```"
    )
    code = extract_code(text, "add")
    assert code.count("def add") == 1
    assert run(code, 2, 3) == 5


def test_echoed_stub_signature_loses_to_the_real_definition() -> None:
    text = f'{HEADER}\n    """Return the sum of a and b."""\n\n{GOOD}'
    code = extract_code(text, "add", HEADER)
    assert code.count("def add") == 1
    assert run(code, 2, 3) == 5
    # a stub alone is still returned (the reward sees the definition, and the failing tests)
    assert extract_code(f'{HEADER}\n    """Doc."""\n', "add", HEADER).startswith(HEADER)


def test_helper_and_imports_from_other_blocks_are_merged() -> None:
    text = (
        "```python\nimport math\n\ndef helper(x):\n    return math.floor(x)\n```\nNow the function:\n"
        "```python\nimport math\ndef add(a, b):\n    return helper(a) + b\n```"
    )
    code = extract_code(text, "add")
    assert code.count("import math") == 1
    assert code.index("import math") < code.index("def helper") < code.index("def add")
    assert run(code, 2.7, 3) == 5


def test_non_python_fence_used_only_when_nothing_else() -> None:
    assert extract_code(f"```text\n{GOOD}```", "add") == GOOD
    text = f"```bash\npip install foo\n```\n```python\n{GOOD}```"
    assert extract_code(text, "add") == GOOD


def test_code_outside_fences_when_fences_hold_only_usage() -> None:
    text = f"{GOOD}\nUsage:\n```python\nprint(add(1, 2))\n```"
    e = extract(text, "add")
    assert e.code == GOOD
    assert "outside_fences" in e.notes


def test_unclosed_fence_runs_to_end() -> None:
    blocks, outside = split_fences("intro\n```python\ndef f():\n    return 1")
    assert blocks == [("python", "def f():\n    return 1")]
    assert outside == "intro"


def test_fence_opened_inside_an_unclosed_fence_starts_a_new_block() -> None:
    blocks, _ = split_fences("```python\ndef f():\n    return 1\n```python\nprint(f())\n```")
    assert [b for _, b in blocks] == ["def f():\n    return 1", "print(f())"]


# --- unfenced and prose --------------------------------------------------------------------------------


def test_unfenced_code_with_prose_before_between_and_after() -> None:
    text = (
        "Here is the function:\ndef helper(x):\n    return x\nThe helper returns x unchanged.\n"
        "def add(a, b):\n    # add them\n    return helper(a) + b\nThis function returns the sum."
    )
    e = extract(text, "add")
    assert "prose" in e.notes
    assert "The helper" not in e.code and "This function" not in e.code
    assert "# add them" in e.code  # comments inside functions survive
    assert run(e.code, 1, 2) == 3


def test_prose_only_gives_no_code() -> None:
    assert extract("I am sorry, I cannot help with that.", "add").code == ""
    assert extract("Sure! Let me think.\n\nThe answer is 42.", "add", HEADER).code == ""


@pytest.mark.parametrize("junk", [None, "", "   \n\n", 12, b"bytes"])
def test_empty_and_non_string_inputs(junk: object) -> None:
    e = extract(junk, "add", HEADER)
    assert isinstance(e.code, str)
    assert "def add" not in e.code


def test_drop_prose_keeps_code_and_docstring_lines() -> None:
    code = 'x = 1\nThis is prose.\ndef f():\n    """Doc\nline at col 0 inside a docstring\n"""\n    return x'
    out = drop_prose(code)
    assert "This is prose." not in out
    assert "line at col 0 inside a docstring" in out
    assert ast.parse(out)


def test_special_tokens_and_crlf_are_cleaned() -> None:
    assert extract_code("def add(a, b):\r\n    return a + b<|im_end|>\r\n", "add") == GOOD
    assert extract_code("<|im_start|>assistant\n" + GOOD + "<|endoftext|>", "add") == GOOD


def test_tabs_are_repaired() -> None:
    code = extract_code("def add(a, b):\n\tc = a + b\n        return c\n", "add")
    assert run(code, 1, 2) == 3


# --- truncated output ----------------------------------------------------------------------------------


def test_truncated_mid_expression_keeps_the_complete_part() -> None:
    text = "```python\ndef add(a, b):\n    if a >= 0:\n        return a + b\n    else:\n        return (a +"
    e = extract(text, "add")
    assert "truncated" in e.notes
    assert run(e.code, 2, 3) == 5
    assert run(e.code, -2, 3) is None  # the cut branch is gone, not invented


def test_truncated_second_function_keeps_the_first() -> None:
    text = f"{GOOD}\ndef other(x):\n    return [x,"
    code = extract_code(text, "add")
    assert code == GOOD


def test_truncated_signature_leaves_raw_code_for_the_syntax_reward() -> None:
    e = extract("```python\ndef add(a, b", "add")
    assert e.notes == ("unparsed",)
    assert e.code.startswith("def add(a, b")
    with pytest.raises(SyntaxError):
        ast.parse(e.code)


def test_missing_colon_is_not_silently_repaired() -> None:
    e = extract("```python\ndef add(a, b)\n    return a + b\n```", "add", HEADER)
    assert e.notes == ("unparsed",)
    with pytest.raises(SyntaxError):
        ast.parse(e.code)


# --- repeated signature and body-only answers ---------------------------------------------------------


def test_repeated_def_line_is_merged() -> None:
    text = f"{HEADER}\n{HEADER}\n    return a + b\n"
    e = extract(text, "add", HEADER)
    assert "repeated_def" in e.notes
    assert e.code.count("def add") == 1
    assert run(e.code, 4, 5) == 9


def test_fix_repeated_headers_only_touches_same_name_same_indent() -> None:
    code = "def f(x):\ndef g(x):\n    return x"
    assert fix_repeated_headers(code) == code
    assert fix_repeated_headers("def f(x):\n\ndef f(x):\n    return x") == "\ndef f(x):\n    return x"


@pytest.mark.parametrize(
    "body",
    [
        "    return a + b",
        "return a + b",
        "```python\n    total = a + b\n    return total\n```",
        "```python\ntotal = a + b\nreturn total\n```",
        "The body:\n    return a + b\nThat is all.",
    ],
)
def test_body_only_answers_are_wrapped_in_the_prompt_signature(body: str) -> None:
    e = extract(body, "add", HEADER)
    assert "wrapped_body" in e.notes
    assert e.code.startswith(HEADER)
    assert top_level(e.code) == ["FunctionDef"]  # no stray module-level `total = a + b`
    assert run(e.code, 2, 3) == 5


def test_body_only_without_header_never_raises_and_defines_nothing() -> None:
    e = extract("    return a + b", "add")
    assert "def add" not in e.code


def test_wrong_function_name_is_not_wrapped_or_renamed() -> None:
    e = extract("def plus(a, b):\n    return a + b\n", "add", HEADER)
    assert "missing_entry_point" in e.notes
    assert "def plus" in e.code and "def add" not in e.code


def test_body_written_at_column_zero_is_indented() -> None:
    e = extract("def add(a, b):\nc = a + b\nreturn c\n", "add")
    assert "body_indent" in e.notes
    assert run(e.code, 1, 1) == 2


def test_multiline_signature_header_from_prompt() -> None:
    prompt = 'from typing import List\n\n\ndef total(\n    xs: List[int],\n    k: int,\n) -> int:\n    """Doc."""\n'
    header = function_header(prompt, "total")
    assert header == "def total(\n    xs: List[int],\n    k: int,\n) -> int:"
    code = extract_code("return sum(xs) * k", "total", header)
    ns: dict[str, object] = {"List": list}
    exec(code, ns)  # noqa: S102
    assert ns["total"]([1, 2], 3) == 9  # type: ignore[operator]


def test_function_header_variants() -> None:
    assert function_header('def f(x):\n    """d"""\n', "f") == "def f(x):"
    assert function_header('import os\n\ndef g():\n    pass\n\ndef f(x) -> int:\n    "d"\n', "f") == "def f(x) -> int:"
    assert function_header("def g(x):\n    pass\n", "f") is None
    # unparseable prompt: regex fallback
    assert function_header("def f(a, b):\n    >>> broken\n", "f") == "def f(a, b):"
    assert function_header("    def f(a, b):\n", "f") == "def f(a, b):"


# --- what is kept at module level ---------------------------------------------------------------------


def test_top_level_side_effects_are_dropped() -> None:
    text = (
        "import os\nLIMIT = 10\nVOWELS = set('aeiou')\n" + GOOD + "\nresult = add(1, 2)\nprint(result)\n"
        "assert add(1, 2) == 3\nname = input()\nfor i in range(3):\n    print(i)\n"
        "if __name__ == '__main__':\n    print(add(1, 2))\nadd(5, 6)\nwhile True:\n    pass\n"
    )
    code = extract_code(text, "add")
    assert top_level(code) == ["Import", "Assign", "Assign", "FunctionDef"]
    assert "LIMIT = 10" in code and "VOWELS" in code


def test_assignment_reading_undefined_names_is_dropped() -> None:
    code = extract_code("x = a + b\nY = len('ab')\nZ = Y * 2\n" + GOOD, "add")
    assert top_level(code) == ["Assign", "Assign", "FunctionDef"]
    assert "x = a + b" not in code


def test_decorators_and_classes_are_kept() -> None:
    text = "import functools\n\n@functools.lru_cache(None)\ndef add(a, b):\n    return a + b\n\nclass K:\n    v = 1\n"
    code = extract_code(text, "add")
    assert "@functools.lru_cache(None)" in code and "class K" in code
    assert run(code, 1, 2) == 3


def test_lambda_assignment_counts_as_a_definition() -> None:
    text = "```python\nadd = lambda a, b: a + b if a else add(1, b - 1)\n```\n```python\nadd = lambda a, b: 0\n```"
    e = extract(text, "add", HEADER)
    assert "missing_entry_point" not in e.notes and "wrapped_body" not in e.notes
    assert e.code.count("add = lambda") == 1  # the first definition wins
    assert run(e.code, 2, 3) == 5


def test_exclude_drops_named_definitions() -> None:
    text = "def aux(x):\n    return x * 2\n\ndef add(a, b):\n    return aux(a) + b\n"
    code = extract_code(text, "add", exclude={"aux"})
    assert "def aux" not in code and "def add" in code


def test_import_in_try_block_kept_but_other_try_dropped() -> None:
    text = ("try:\n    import numpy as np\nexcept ImportError:\n    np = None\n" + GOOD
            + "try:\n    add(1)\nexcept Exception:\n    pass\n")
    code = extract_code(text, "add")
    assert top_level(code) == ["Try", "FunctionDef"]


def test_doctest_lines_inside_docstring_survive() -> None:
    text = 'def add(a, b):\n    """Add.\n>>> add(1, 2)\n3\n    """\n    return a + b\n'
    assert run(extract_code(text, "add"), 1, 2) == 3


def test_any_definition_when_no_entry_point_given() -> None:
    assert extract_code("Helper:\n```python\ndef aux(x):\n    return x\n```") == "def aux(x):\n    return x\n"


# --- robustness ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "(" * 5000,
        "def f():\n" + "    " * 400 + "x",
        "```" * 1000,
        "def add(a, b):\n" + "    x = [" * 300,
        "\x00\x01def add(a, b):\n    return a+b",
        "'''" + "a" * 10_000,
        "def add(a, b):\n    return a + b\n" * 2000,
        "```python\n" + "[" * 200 + "]" * 200 + "\n```",
    ],
)
def test_pathological_inputs_never_raise(text: str) -> None:
    e = extract(text, "add", HEADER)
    assert isinstance(e.code, str)


def test_salvage_returns_none_for_hopeless_text() -> None:
    assert salvage("") is None
    assert salvage("))))") is None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("def add(a, b):\n    return a+b`'\"#\t xyz=[]{}.:>")), max_size=300))
def test_fuzz_never_raises_and_parsed_output_parses(text: str) -> None:
    e = extract(text, "add", HEADER)
    assert isinstance(e.code, str)
    if e.code and "unparsed" not in e.notes:
        ast.parse(e.code)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_fuzz_arbitrary_unicode(text: str) -> None:
    e = extract(text, "add", HEADER)
    assert isinstance(e.code, str)
    if e.code and "unparsed" not in e.notes and "error" not in e.notes:
        ast.parse(e.code)
