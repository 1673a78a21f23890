"""Procedural two-agent problems that only a cooperating team can pass (the `code_coop` task's data set).

Each problem splits one specification between the agents. The helper's prompt (`helper_prompt`) states a
secret rule for `aux` (a constant, a letter, a lookup table, a conversion factor: `coop_templates.RULES`);
the main agent's prompt (`prompt`) names `aux`, its signature and what it returns, never how, and asks for
an entry point that combines `aux`'s results (`coop_templates.COMBINERS`). The tests' expected values come
from running the reference solutions themselves, so every problem is right by construction, and inputs are
redrawn until they tell the real rule apart from the same rule with other constants and from a constant
`aux`: a main agent that guesses the rule, or ignores `aux`, fails.

Pure and deterministic: problem i depends only on (seed, i), so a larger set extends a smaller one.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from comlrl.tasks.code.coop_templates import COMBINERS, RULES, Combiner, Params, Rule, perturb
from comlrl.tree.contracts import Problem

__all__ = ["CoopProblem", "generate_coop_problems", "template_pairs"]

MAX_TRIES = 200  # draws of constants and inputs per problem; a few suffice (tests/tasks/test_coop_problems.py)
CASES = tuple[tuple[Any, ...], ...]


@dataclass(frozen=True)
class CoopProblem(Problem):
    """A HumanEval problem for the main agent (`prompt`, `canonical_solution`, `test`) plus the helper's
    part: `helper_prompt` (aux's stub, whose docstring holds the secret rule) and `helper_solution`."""

    helper_prompt: str = ""
    helper_solution: str = ""
    template: str = ""  # "<combiner>/<rule>", e.g. "total/affine"


def template_pairs() -> list[tuple[Combiner, Rule]]:
    """Every (combiner, rule) whose types fit, in a fixed order."""
    return [(c, r) for c in COMBINERS for r in RULES if c.fits(r)]


def generate_coop_problems(n: int, seed: int) -> list[CoopProblem]:
    """`n` problems `Coop/0` .. `Coop/<n-1>`; each run of len(template_pairs()) problems uses every pair once."""
    if n < 0:
        raise ValueError(f"generate_coop_problems: n must be >= 0, got {n}")
    pairs = template_pairs()
    out: list[CoopProblem] = []
    order: list[tuple[Combiner, Rule]] = []
    for i in range(n):
        cycle, pos = divmod(i, len(pairs))
        if pos == 0:
            order = list(pairs)
            random.Random(f"coop-order:{seed}:{cycle}").shuffle(order)
        combiner, rule = order[pos]
        out.append(_problem(i, combiner, rule, random.Random(f"coop:{seed}:{i}")))
    return out


def helper_stub(rule: Rule, params: Params) -> str:
    return f'def aux({rule.var}: {rule.arg}) -> {rule.out}:\n    """{rule.doc.format(**params)}"""\n'


def helper_body(rule: Rule, params: Params) -> str:
    return f"    return {rule.body.format(**params)}\n"


def main_parts(combiner: Combiner, rule: Rule, params: Params) -> tuple[str, str, str]:
    """(entry point, prompt, canonical body) of the main agent's function."""
    item = "number" if rule.arg == "int" else "word"
    words = {"v": rule.var, "vs": f"{rule.var}s", "t": rule.arg, "item": item, "items": f"{item}s",
             "name": params["_name"], "tag": params["_tag"]}
    entry = combiner.entry.format(**words)
    prompt = (f"def {entry}({combiner.params.format(**words)}) -> {combiner.result.format(**words)}:\n"
              f'    """{combiner.doc.format(**words)}\n'
              f"    Your teammate writes `aux({rule.var}: {rule.arg}) -> {rule.out}`, which returns "
              f"{rule.returns.format(**params)}.\n"
              '    """\n')
    return entry, prompt, combiner.body.format(**words)


def _define(source: str, name: str) -> Callable[..., Any]:
    """A function of our own generated source (never a model's: those run only in the sandbox)."""
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<coop {name}>", "exec"), namespace)  # noqa: S102 - trusted, generated here
    return namespace[name]


def _outputs(main_source: str, entry: str, aux: Callable[..., Any], cases: CASES) -> list[Any]:
    """The reference main's result per case with this `aux` (an exception stands for "differs")."""
    namespace: dict[str, Any] = {"aux": aux}
    exec(compile(main_source, f"<coop {entry}>", "exec"), namespace)  # noqa: S102 - trusted, generated here
    results = []
    for args in cases:
        try:
            results.append(namespace[entry](*copy.deepcopy(args)))
        except Exception as exc:  # noqa: BLE001 - a wrong aux may break the reference main
            results.append(exc)
    return results


def _wrong_auxes(rule: Rule, params: Params) -> list[Callable[..., Any]]:
    """What a main agent that does not get the rule from its teammate could call instead."""
    guessed = _define(helper_stub(rule, perturb(params)) + helper_body(rule, perturb(params)), "aux")
    constants: tuple[Any, ...] = (0,) if rule.out == "int" else (False, True)
    return [guessed, *(lambda *_, c=c: c for c in constants)]


def _problem(i: int, combiner: Combiner, rule: Rule, rng: random.Random) -> CoopProblem:
    for _ in range(MAX_TRIES):
        params = rule.draw(rng)
        cases: CASES = tuple(combiner.cases(rng, lambda p=params: rule.sample(rng, p)))
        if len({repr(c) for c in cases}) < len(cases):
            continue
        helper_prompt, helper_solution = helper_stub(rule, params), helper_body(rule, params)
        entry, prompt, body = main_parts(combiner, rule, params)
        expected = _outputs(prompt + body, entry, _define(helper_prompt + helper_solution, "aux"), cases)
        if not all(any(got != want for got, want in zip(_outputs(prompt + body, entry, wrong, cases), expected,
                                                         strict=True)) for wrong in _wrong_auxes(rule, params)):
            continue  # some wrong aux passes every test: draw again
        asserts = [f"    assert candidate({', '.join(map(repr, args))}) == {want!r}"
                   for args, want in zip(cases, expected, strict=True)]
        return CoopProblem(task_id=f"Coop/{i}", prompt=prompt, entry_point=entry,
                           test="def check(candidate):\n" + "\n".join(asserts) + "\n", canonical_solution=body,
                           helper_prompt=helper_prompt, helper_solution=helper_solution,
                           template=f"{combiner.name}/{rule.name}")
    raise RuntimeError(f"Coop/{i} ({combiner.name}/{rule.name}): no tests that need the rule in {MAX_TRIES} draws")
