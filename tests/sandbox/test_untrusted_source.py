"""Model code that warns at compile time: nothing reaches the host's warnings, nothing becomes a SyntaxError.

Before: the trainer's log carried `<solution>:3: SyntaxWarning: 'tuple' object is not callable` for model
output, and under `-W error` such code (which loads and runs) was scored as a syntax error.
"""

from __future__ import annotations

import warnings

import pytest

from comlrl.tasks.code.extract import extract_code
from comlrl.tasks.code.reward import analyze
from sandbox.executor import syntax_error_of
from sandbox.untrusted_source import FILENAME, check_compiles, parse

WARNS = "def total(xs):\n    y = '\\d'\n    if xs is (1, 2):\n        return (1, 2)(3)\n    return sum(xs)\n"


def _compile_warnings(code: str) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        compile(code, "<host>", "exec", dont_inherit=True)
    return [str(w.message) for w in seen]


def test_the_sample_does_warn_when_compiled_plainly():
    found = _compile_warnings(WARNS)
    assert any("not callable" in m for m in found) and any("escape sequence" in m for m in found)


@pytest.mark.parametrize("host_filter", ["always", "error"])  # "error": as under python -W error
def test_parsing_and_scoring_stay_quiet_and_correct(host_filter):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter(host_filter)
        assert syntax_error_of(WARNS) is None
        analysis, tree = analyze(WARNS, "main", "total")
        assert analysis.syntax_error is None and analysis.defined and tree is not None
        assert extract_code(f"```python\n{WARNS}```", "total") == WARNS
        parse(WARNS)
        check_compiles(WARNS)
        if host_filter == "error":
            with pytest.raises(UserWarning, match="host's own"):
                warnings.warn("the host's own warning", UserWarning, stacklevel=1)
        else:
            warnings.warn("the host's own warning", UserWarning, stacklevel=1)
    # a ResourceWarning is the garbage collector finalising some earlier test's socket or file while this block
    # runs (seen once in the full suite): not the parser's, so not this test's
    messages = [str(w.message) for w in seen if not issubclass(w.category, ResourceWarning)]
    assert messages == ([] if host_filter == "error" else ["the host's own warning"])


def test_real_syntax_errors_still_raise_and_are_reported():
    with pytest.raises(SyntaxError):
        parse("def f(:\n")
    with pytest.raises(SyntaxError):
        check_compiles("return 1\n")  # parses, cannot load
    err = syntax_error_of("def f(:\n")
    assert err is not None and err.line == 1


def test_only_the_untrusted_name_is_ignored():
    parse(WARNS)
    assert _compile_warnings(WARNS)  # the same code under another file name still warns
    assert FILENAME == "<untrusted>"
