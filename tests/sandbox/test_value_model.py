"""Correct code scores as correct: what crosses between the solution and the judge (issue 17, point 6).

Four ways correct reference solutions of a public dataset failed in the sandbox while plain Python passed
them, each with the rule that fixes it, and the checks that the rule does not let wrong code through.
"""

from __future__ import annotations

import pytest
from sbx_helpers import check_body

from sandbox import Sandbox
from sandbox.testparse import parse_tests

# ------------------------------------------------------------------- plain-data subclasses cross as their base


@pytest.mark.parametrize(("code", "body"), [
    ("from collections import Counter\ndef f(s):\n    return Counter(s)\n",
     "assert candidate('abca') == {'a': 2, 'b': 1, 'c': 1}"),
    ("from collections import OrderedDict\ndef f():\n    return OrderedDict([(1, 'x'), (2, 'y')])\n",
     "assert candidate() == {2: 'y', 1: 'x'}"),
    ("from collections import defaultdict\ndef f(xs):\n    d = defaultdict(list)\n"
     "    for x in xs:\n        d[x % 2].append(x)\n    return d\n",
     "assert candidate([1, 2, 3]) == {1: [1, 3], 0: [2]}"),
    ("from collections import namedtuple\nP = namedtuple('P', 'x y')\ndef f():\n    return P(1, 2)\n",
     "assert candidate() == (1, 2)"),
    ("from typing import NamedTuple\nclass P(NamedTuple):\n    x: int\n    y: str\ndef f():\n    return [P(1, 'a')]\n",
     "assert candidate() == [(1, 'a')]"),
    ("import enum\nclass C(enum.IntEnum):\n    RED = 3\ndef f():\n    return {C.RED: C.RED}\n",
     "assert candidate() == {3: 3}"),
    ("class S(str):\n    pass\ndef f():\n    return S('ab'), frozenset({S('c')})\n",
     "assert candidate() == ('ab', frozenset({'c'}))"),
])
def test_plain_data_subclasses_cross_as_their_base_type(sb: Sandbox, code: str, body: str) -> None:
    r = sb.run(code, check_body(body))
    assert r.status == "passed", r


def test_subclass_values_arrive_as_exact_base_types(sb: Sandbox) -> None:
    code = ("from collections import Counter, namedtuple\nP = namedtuple('P', 'x')\n"
            "def f():\n    return Counter('aa'), P(1)\n")
    r = sb.run(code, check_body("c, p = candidate()\nassert type(c) is dict and type(p) is tuple"))
    assert r.status == "passed", r


def test_a_subclass_crosses_as_its_data_not_its_behaviour(sb: Sandbox) -> None:
    # __eq__ stays in the solution's process: what crosses is the int 7, so a wrong answer stays wrong.
    code = "class I(int):\n    __eq__ = lambda *a: True\n    __hash__ = int.__hash__\ndef f():\n    return I(7)\n"
    r = sb.run(code, check_body("assert candidate() == 1\nassert candidate() == 7"))
    assert [a.status for a in r.asserts] == ["failed", "passed"]
    assert r.asserts[0].message == "assert 7 == 1"


# -------------------------------------------------------------- other objects cross as opaque (truth, repr)

MATCH = "import re\ndef f(s):\n    return re.match(r'a+b', s)\n"


def test_an_object_tested_for_truth_crosses_as_its_truth_value(sb: Sandbox) -> None:
    r = sb.run(MATCH, check_body("assert candidate('aab')\nassert not candidate('b')\n"
                                 "assert candidate('ab') is not None"))
    assert r.status == "passed", r


def test_an_opaque_value_is_never_equal_and_keeps_its_repr(sb: Sandbox) -> None:
    body = ("assert candidate('aab') == 1\n"
            "m = candidate('aab')\nassert m == m\n"
            "assert candidate('aab') != candidate('aab')\n"
            "assert repr(candidate('aab')) == \"<re.Match object; span=(0, 3), match='aab'>\"\n"
            "assert candidate('aab').group(0) == 'aab'\n"
            "assert candidate('xx') is not None")
    r = sb.run(MATCH, check_body(body))
    assert [a.status for a in r.asserts] == ["failed", "failed", "passed", "passed", "error", "failed"]
    assert r.asserts[0].message == "assert <re.Match object; span=(0, 3), match='aab'> == 1"
    assert r.asserts[4].error_type == "AttributeError" and "truth value and repr" in r.asserts[4].message
    assert r.asserts[5].message == "assert None is not None"


def test_opaque_values_nest_and_cannot_be_passed_back(sb: Sandbox) -> None:
    code = ("def g():\n    yield 1\n"
            "def f():\n    return [g(), object(), 3]\n"
            "def h(x):\n    return 1\n")
    body = ("xs = candidate()\nassert all(xs) and xs[2] == 3 and xs[0] != xs[0]\n"
            "assert list(candidate()[0]) == [1]\n"
            "assert h(candidate()[1]) == 1")
    r = sb.run(code, check_body(body))
    assert [a.status for a in r.asserts] == ["passed", "error", "error"], r
    assert r.asserts[1].error_type == "TypeError" and "generator" in r.asserts[1].message
    assert r.asserts[2].error_type == "TypeError" and "cannot be passed" in r.asserts[2].message


def test_falsy_and_unprintable_objects(sb: Sandbox) -> None:
    code = ("class Z:\n    def __bool__(self):\n        return False\n    def __repr__(self):\n"
            "        raise ValueError\n"
            "class B:\n    def __bool__(self):\n        raise RuntimeError('no truth')\n"
            "def f():\n    return Z()\ndef g():\n    return B()\n")
    r = sb.run(code, parse_tests("assert not f()\nassert repr(f()) == '<unrepresentable>'\nassert g()\n", "f"))
    assert [a.status for a in r.asserts] == ["passed", "passed", "error"], r
    assert r.asserts[2].error_type == "TypeError" and "__bool__ raised" in r.asserts[2].message


# -------------------------------------------------- the entry point resolves to the solution over a builtin


def test_an_entry_point_named_like_a_builtin_is_the_solution(sb: Sandbox) -> None:
    code = "def sum(a, b):\n    return a + b\n"
    r = sb.run(code, parse_tests("assert sum(10, 15) == 25\nassert sum(-1, 1) == 0\n", "sum"))
    assert r.status == "passed", r


def test_other_solution_functions_never_shadow_builtins(sb: Sandbox) -> None:
    # A helper named like a builtin stays the builtin: `abs` returning 0 cannot make a wrong answer pass.
    code = "def abs(x):\n    return 0\ndef f(x):\n    return x + 1\n"
    r = sb.run(code, parse_tests("assert abs(f(1) - 5) < 1e-6\n", "f"))
    assert r.asserts[0].status == "failed" and r.asserts[0].message == "assert 3 < 1e-06"
    # HumanEval style: the entry point is `candidate`; a `sum` helper does not replace the builtin
    r = sb.run("def sum(xs):\n    return 99\ndef f(x):\n    return x\n", check_body("assert sum([candidate(1)]) == 1"))
    assert r.status == "passed", r


# ----------------------------------------------------- standard modules the solution imported reach the tests


def test_a_standard_module_the_solution_imported_is_visible_to_the_tests(sb: Sandbox) -> None:
    code = "import sys\nimport os.path\nimport collections.abc as cabc\ndef f(x):\n    return x\n"
    tests = ("assert f(sys.getsizeof(1)) > 0\nassert os.path.join('a', 'b') == 'a/b'\n"
             "assert isinstance(f([1]), cabc.Sequence)\n")
    r = sb.run(code, parse_tests(tests, "f"))
    assert r.status == "passed", r


def test_only_standard_modules_imported_by_the_judge_itself(sb: Sandbox) -> None:
    # The solution makes its own module object named `sys` / `json` and a fake standard module: the tests
    # get the judge's real `json`, never the solution's objects; non-standard and unimported names stay unbound.
    code = ("import types, sys as _s\njson = types.ModuleType('json')\njson.dumps = lambda x: 'forged'\n"
            "fake = types.ModuleType('fakemod')\n_s.modules['fakemod'] = fake\n"
            "import fakemod as shim\n"
            "def f():\n    return 1\n")
    tests = ("assert json.dumps(f()) == '1'\n"
             "assert shim is not None\n"
             "assert math.pi > 3\n")
    r = sb.run(code, parse_tests(tests, "f"))
    assert [a.status for a in r.asserts] == ["passed", "error", "error"], r
    assert [a.error_type for a in r.asserts[1:]] == ["NameError", "NameError"]


def test_a_module_file_the_solution_wrote_is_never_what_the_judge_imports(sb: Sandbox) -> None:
    # The solution imports its own forged `difflib` (from a file it wrote into its cwd); the judge imports
    # the standard one from its own library, where the solution cannot write.
    code = ("import sys, os\nopen('difflib.py', 'w').write('FORGED = 1\\n')\nsys.path.insert(0, os.getcwd())\n"
            "import difflib\ndef f():\n    return difflib.FORGED\n")
    r = sb.run(code, parse_tests("assert f() == 1\nassert not hasattr(difflib, 'FORGED')\n"
                                 "assert difflib.SequenceMatcher(None, 'ab', 'ab').ratio() == 1.0\n", "f"))
    assert r.status == "passed", r
