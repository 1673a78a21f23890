"""The cooperative problem generator: deterministic, every template used, every problem right by construction
and passable only with the helper's rule (checked in the real sandbox, through the real reward)."""

from __future__ import annotations

import ast
import random
import re
from collections import Counter

import pytest

from comlrl.tasks.code.common import prompt_preamble
from comlrl.tasks.code.coop_problems import CoopProblem, _problem, generate_coop_problems, template_pairs
from comlrl.tasks.code.coop_templates import COMBINERS, RULES
from comlrl.tasks.code.reward import ScoreRequest, score_batch
from sandbox.testparse import parse_tests

PROBLEMS = generate_coop_problems(400, 0)
COMBINER_NAMES = {"total", "each", "best", "pair", "repeat", "count", "keep", "drop", "sentence", "sentence_count"}
RULE_NAMES = {"affine", "convert", "modscore", "modpred", "threshold", "letters", "lookup", "length", "first", "last"}


@pytest.fixture(scope="module")
def sandbox():  # noqa: ANN201 - sandbox.executor.Sandbox
    from sandbox.executor import Sandbox

    with Sandbox(workers=2, timeout_s=5.0) as box:
        yield box


def helper_code(p: CoopProblem) -> str:
    return p.helper_prompt + p.helper_solution


def request(p: CoopProblem, helper: str) -> ScoreRequest:
    """The team's program as code_coop scores it: preamble + helper + the main's canonical solution."""
    return ScoreRequest(codes=(helper, p.prompt + p.canonical_solution), entry_point=p.entry_point,
                        tests=parse_tests(p.test, p.entry_point, prompt=p.prompt),
                        preamble=prompt_preamble(p.prompt, p.entry_point))


class Guess(ast.NodeTransformer):
    """aux with every secret changed, read from its source alone: ints + 1, one-letter strings shifted, a
    table's values moved one key on (what a main agent guessing the rule's shape would write)."""

    def visit_Dict(self, node: ast.Dict) -> ast.Dict:
        node.values = node.values[1:] + node.values[:1]
        return node

    def visit_Constant(self, node: ast.Constant) -> ast.Constant:
        v = node.value
        if isinstance(v, int) and not isinstance(v, bool):
            return ast.Constant(v + 1)
        if isinstance(v, str) and len(v) == 1:
            return ast.Constant(chr((ord(v) - ord("a") + 1) % 26 + ord("a")))
        return node


def guessed_aux(p: CoopProblem) -> str:
    tree = Guess().visit(ast.parse(helper_code(p)))
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def constant_auxes(p: CoopProblem) -> list[str]:
    returns = ast.parse(p.helper_prompt).body[0].returns
    assert isinstance(returns, ast.Name) and returns.id in ("int", "bool")
    values = ["0"] if returns.id == "int" else ["False", "True"]
    return [f"def aux(*args):\n    return {v}\n" for v in values]


def aux_body(p: CoopProblem) -> ast.AST:
    fn = ast.parse(helper_code(p)).body[0]
    assert isinstance(fn, ast.FunctionDef) and fn.name == "aux"
    return fn.body[-1]  # the return statement (the docstring is body[0])


# --- determinism and coverage ------------------------------------------------------------------------------


def test_same_seed_same_problems_and_a_larger_set_extends_a_smaller_one() -> None:
    assert generate_coop_problems(60, 3) == generate_coop_problems(60, 3)
    assert generate_coop_problems(90, 3)[:60] == generate_coop_problems(60, 3)
    assert generate_coop_problems(400, 0) == PROBLEMS
    assert generate_coop_problems(0, 0) == []
    with pytest.raises(ValueError, match="n must be >= 0"):
        generate_coop_problems(-1, 0)


def test_different_seeds_give_different_problems() -> None:
    a, b = generate_coop_problems(80, 0), generate_coop_problems(80, 1)
    same = sum(x.test == y.test and x.helper_prompt == y.helper_prompt for x, y in zip(a, b, strict=True))
    assert same <= 2, same


def test_every_template_appears_in_400_problems() -> None:
    assert {c.name for c in COMBINERS} == COMBINER_NAMES and {r.name for r in RULES} == RULE_NAMES
    seen = Counter(p.template for p in PROBLEMS)
    pairs = {f"{c.name}/{r.name}" for c, r in template_pairs()}
    assert set(seen) == pairs and len(pairs) == 41
    assert {t.split("/")[0] for t in seen} == COMBINER_NAMES and {t.split("/")[1] for t in seen} == RULE_NAMES
    assert min(seen.values()) >= 9  # every 41 consecutive problems use every pair once
    # each combiner takes several rules, each rule several combiners
    assert all(sum(t.startswith(f"{c}/") for t in pairs) >= 2 for c in COMBINER_NAMES)
    assert all(sum(t.endswith(f"/{r}") for t in pairs) >= 3 for r in RULE_NAMES)


def test_problems_are_in_humaneval_format_and_short() -> None:
    assert [p.task_id for p in PROBLEMS] == [f"Coop/{i}" for i in range(400)]
    for p in PROBLEMS:
        main = ast.parse(p.prompt).body
        assert len(main) == 1 and isinstance(main[0], ast.FunctionDef) and main[0].name == p.entry_point
        assert p.entry_point.isidentifier() and p.entry_point != "aux"
        assert ast.parse(p.helper_prompt).body[0].name == "aux"  # type: ignore[attr-defined]
        asserts = parse_tests(p.test, p.entry_point, prompt=p.prompt).asserts
        assert 4 <= len(asserts) <= 6, p.task_id
        assert len(p.prompt) < 300 and len(p.helper_prompt) < 160, p.task_id
    assert len({p.entry_point for p in PROBLEMS}) >= 60  # descriptive names, varied with the rule's words


def test_list_combiners_test_the_empty_list() -> None:
    for p in PROBLEMS:
        if p.template.split("/")[0] in ("total", "each", "count", "keep", "drop"):
            assert "candidate([]) ==" in p.test, p.task_id
        if p.template.startswith("sentence"):
            assert "candidate('') == 0" in p.test, p.task_id


# --- the secret stays with the helper ------------------------------------------------------------------------


def test_the_main_prompt_never_holds_the_secret() -> None:
    for p in PROBLEMS:
        rule = ast.get_docstring(ast.parse(p.helper_prompt).body[0])  # type: ignore[arg-type]
        assert rule and rule.split(": ", 1)[1] not in p.prompt, p.task_id
        assert set(re.findall(r"\d+", p.prompt)) <= {"0"}, p.task_id  # no constant of any rule
        for node in ast.walk(aux_body(p)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a letter or a table word
                word = node.value
                assert f"'{word}'" not in p.prompt and f'"{word}"' not in p.prompt, (p.task_id, word)
                assert len(word) == 1 or not re.search(rf"\b{word}\b", p.prompt), (p.task_id, word)
        # the main agent knows aux's signature and what it returns, not how
        sig = p.helper_prompt.split("\n", 1)[0].removeprefix("def ").removesuffix(":")
        assert f"Your teammate writes `{sig}`, which returns " in p.prompt, p.task_id
        assert p.canonical_solution and "aux(" in p.canonical_solution


def test_the_helper_prompt_states_the_rule_its_solution_implements() -> None:
    p = next(p for p in PROBLEMS if p.template.endswith("/affine"))
    expr = ast.unparse(aux_body(p).value)  # type: ignore[attr-defined]
    assert expr in p.helper_prompt  # e.g. "Return the score of x: x * 3 + 11."


# --- right by construction, and only with the rule (real sandbox, real reward) --------------------------------


def test_every_team_with_the_rule_passes_every_test_without_a_thin_wrapper(sandbox) -> None:  # noqa: ANN001
    problems = PROBLEMS + generate_coop_problems(82, 7)
    rewards = score_batch([request(p, helper_code(p)) for p in problems], sandbox)
    for p, r in zip(problems, rewards, strict=True):
        assert r.all_passed and r.tests_total == len(parse_tests(p.test, p.entry_point).asserts), (p.task_id, r.notes)
        assert r.helper_result_used and not r.thin_wrapper, p.task_id
        assert r.total == pytest.approx(4.0), p.task_id  # the levelled reward's maximum for two agents


def test_a_wrong_aux_fails_every_problem(sandbox) -> None:  # noqa: ANN001
    """The main's canonical solution with the rule's constants changed, or with a constant aux, fails at
    least one test of every problem: the team passes only with the helper's rule."""
    jobs = [(p, helper) for p in PROBLEMS for helper in (guessed_aux(p), *constant_auxes(p))]
    assert len(jobs) > 2 * len(PROBLEMS)
    rewards = score_batch([request(p, helper) for p, helper in jobs], sandbox)
    for (p, helper), r in zip(jobs, rewards, strict=True):
        assert r.exec is not None and r.exec.status in ("passed", "failed"), (p.task_id, r.notes)
        assert r.tests_passed < r.tests_total, (p.task_id, helper)


def test_a_pair_whose_tests_cannot_need_the_rule_is_refused() -> None:
    """`best` over a monotone rule (x * a + b) picks the same number whatever the constants: no test tells a
    guess from the rule, so the generator refuses the pair rather than emit a problem the main passes alone."""
    best = next(c for c in COMBINERS if c.name == "best")
    affine = next(r for r in RULES if r.name == "affine")
    assert not best.fits(affine)
    with pytest.raises(RuntimeError, match=r"^Coop/0 \(best/affine\): no tests that need the rule in 200 draws"):
        _problem(0, best, affine, random.Random(0))


def test_the_guessed_aux_really_changes_every_secret() -> None:
    p = next(p for p in PROBLEMS if p.template.endswith("/lookup"))  # return {'fig': 3, ...}.get(word, 0)
    original = ast.literal_eval(aux_body(p).value.func.value)  # type: ignore[attr-defined]
    guessed = ast.literal_eval(ast.parse(guessed_aux(p)).body[0].body[-1].value.func.value)  # type: ignore[attr-defined]
    assert list(original) == list(guessed) and sorted(original.values()) == sorted(guessed.values())
    assert all(original[w] != guessed[w] for w in original)


def test_the_example_in_the_docs_is_what_the_generator_makes() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "coop.md").read_text()
    p = PROBLEMS[31]
    assert p.template == "count/modpred" and "`Coop/31`, seed 0" in doc
    assert p.helper_prompt in doc and p.prompt in doc
    assert "\n".join(p.test.splitlines()[:3]) + "\n    ...\n" in doc
