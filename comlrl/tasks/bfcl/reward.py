"""The reward of one joint action on a single-turn BFCL entry: BFCL's own verdict on the team's calls,
plus small shaping terms, each logged as a component.

    total = checker                       1 when BFCL's checker accepts the union of the agents' calls
          + format_reward  x decoded      some call decoded (relevance categories: the verdict alone)
          + count_reward   x count_match  as many distinct calls as the gold has
          + schema_reward  x schema       how well the calls fit the documents: per call, the share of its
                                          function's required parameters given, times the share of its
                                          arguments the document names (0 for an undocumented function)
          + argument_reward x arguments   per gold call, the share of its parameters whose value BFCL's own
                                          checker accepts when judged alone (the gold call's parameter
                                          against the same-named call's argument; an optional one left
                                          out counts), averaged over the gold calls
          - duplicate_penalty x duplicates  calls written twice (by one agent or by two), per gold call
          - lazy_penalty   x lazy_agents  agents (of N >= 2) that wrote no call, when the gold has a call per agent

The union is each agent's decoded calls in agent order with exact repeats dropped, so two agents that
split a parallel entry's calls pass when together they wrote the gold set (the reference library's
native-parallel task); the pass (pass@1, the evaluations' accuracy) is the checker's verdict alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from comlrl.tasks.bfcl.calls import Call, Decoded, checker_output, decode
from comlrl.tasks.bfcl.checker import Verdict, ast_verdict, relevance_verdict
from comlrl.tasks.bfcl.data import RELEVANCE_CATEGORIES, BfclProblem


@dataclass(frozen=True)
class ShapingWeights:
    """The shaping terms' weights (task.bfcl.*): small next to the checker's 1."""

    format_reward: float = 0.1
    count_reward: float = 0.1
    schema_reward: float = 0.1
    argument_reward: float = 0.4
    duplicate_penalty: float = 0.1
    lazy_penalty: float = 0.1

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-(self.duplicate_penalty * 4 + self.lazy_penalty),
                1.0 + self.format_reward + self.count_reward + self.schema_reward + self.argument_reward)


@dataclass(frozen=True)
class BfclReward:
    """One joint action's reward (the `Reward` contract), with the checker's verdict and the calls."""

    total: float
    components: dict[str, float]
    verdict: Verdict
    calls: tuple[str, ...]  # the union handed to the checker, as canonical call text
    texts: tuple[str, ...] = ()  # per agent, what it wrote
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def all_passed(self) -> bool:
        return self.verdict.valid

    @property
    def scored(self) -> tuple[str, ...]:
        return self.texts


def union(per_agent: Sequence[Sequence[Call]]) -> tuple[tuple[Call, ...], int]:
    """The team's calls in agent order without exact repeats, and how many repeats were dropped."""
    seen: set[str] = set()
    out, repeats = [], 0
    for calls in per_agent:
        for call in calls:
            key = call.text()
            if key in seen:
                repeats += 1
                continue
            seen.add(key)
            out.append(call)
    return tuple(out), repeats


def gold_calls(problem: BfclProblem) -> int:
    """How many calls the gold answer holds (0 for an irrelevance entry)."""
    return len(problem.gold) if problem.gold is not None else int(problem.category == "live_relevance")


def schema_fit(calls: Sequence[Call], functions: Sequence[dict]) -> float:
    """Mean over the calls of (required parameters given / required) x (arguments documented / arguments);
    a call of an undocumented function counts 0 (no calls: 0)."""
    docs = {f["name"]: f.get("parameters", {}) for f in functions}
    fits = []
    for call in calls:
        doc = docs.get(call.name)
        if doc is None:
            fits.append(0.0)
            continue
        required, known = set(doc.get("required", [])), set(doc.get("properties", {}))
        given = set(call.args)
        fits.append((len(required & given) / len(required) if required else 1.0)
                    * (len(given & known) / len(given) if given else 1.0))
    return sum(fits) / len(fits) if fits else 0.0


def _simple_category(category: str) -> str:
    """The simple category of the same language: how one parameter is judged alone."""
    return category if category.startswith("simple_") else "simple_python"


def argument_credit(problem: BfclProblem, calls: Sequence[Call]) -> float:
    """Per gold call, the share of its parameters BFCL's checker accepts one at a time (each judged as a
    one-parameter call of a one-parameter function, so the checker's own type and value rules decide),
    against the first call of the same name not matched yet; averaged over the gold calls (0 without)."""
    if not isinstance(problem.gold, list) or not problem.gold:
        return 0.0
    docs = {f["name"]: f for f in problem.checker_functions}
    category = _simple_category(problem.category)
    language = category.rsplit("_", 1)[-1]
    free = list(calls)
    credits = []
    for gold_call in problem.gold:
        (name, params), = gold_call.items()
        call = next((c for c in free if c.name == name), None)
        doc = docs.get(name)
        if call is None or doc is None or not params:
            credits.append(0.0 if call is None else 1.0)
            continue
        free.remove(call)
        properties = doc.get("parameters", {}).get("properties", {})
        ok = 0
        for param, allowed in params.items():
            if param not in call.args:
                ok += "" in allowed  # an optional parameter left out
                continue
            one = {**doc, "parameters": {"type": "dict", "properties": {param: properties.get(param, {})},
                                         "required": [param]}}
            decoded = checker_output([Call(name, {param: call.args[param]}, call.source)], language)
            ok += ast_verdict([one], decoded, [{name: {param: allowed}}], category).valid
        credits.append(ok / len(params))
    return sum(credits) / len(credits)


def verdict_of(problem: BfclProblem, calls: tuple[Call, ...], decoded: Sequence[Decoded]) -> Verdict:
    """BFCL's verdict on the team's calls: the relevance rule or the AST checker."""
    if problem.category in RELEVANCE_CATEGORIES:
        return relevance_verdict(checker_output(calls) if any(d.ok for d in decoded) else None, problem.category)
    if not any(d.ok for d in decoded):
        return Verdict(False, "ast_decoder:decoder_failed", tuple(d.error for d in decoded))
    language = problem.category.rsplit("_", 1)[-1] if problem.category.startswith("simple_j") else "python"
    return ast_verdict(list(problem.checker_functions), checker_output(calls, language), problem.gold,
                       problem.category)


def score(problem: BfclProblem, texts: Sequence[str], weights: ShapingWeights) -> BfclReward:
    """The reward of one joint action: every agent's reply decoded, the union judged by BFCL's checker."""
    decoded = [decode(t) for t in texts]
    calls, repeats = union([d.calls for d in decoded])
    verdict = verdict_of(problem, calls, decoded)
    want = gold_calls(problem)
    is_relevance = problem.category in RELEVANCE_CATEGORIES
    made = any(d.calls for d in decoded)
    lazy = sum(1 for d in decoded if not d.calls) if len(texts) > 1 and want >= len(texts) else 0
    parts = {
        "checker": float(verdict.valid),
        "decoded": float(made and not is_relevance),
        "count_match": float(len(calls) == want and not is_relevance),
        "schema": 0.0 if is_relevance else schema_fit(calls, problem.checker_functions),
        "arguments": argument_credit(problem, calls),
        "duplicates": repeats / max(1, want),
        "lazy_agents": float(lazy),
        "exact_format": float(all(d.exact for d in decoded)),
        "calls": float(len(calls)),
    }
    total = (parts["checker"] + weights.format_reward * parts["decoded"] + weights.count_reward * parts["count_match"]
             + weights.schema_reward * parts["schema"] + weights.argument_reward * parts["arguments"]
             - weights.duplicate_penalty * min(parts["duplicates"], 4.0) - weights.lazy_penalty * lazy / len(texts))
    notes = verdict.errors[:2] if not verdict.valid else ()
    return BfclReward(round(total, 6), parts, verdict, tuple(c.text() for c in calls), tuple(texts),
                      tuple(f"{verdict.error_type}: {n}"[:300] for n in notes))
