"""The reward of one joint action on a single-turn BFCL entry: BFCL's own verdict on the team's replies,
plus small shaping terms, each logged as a component.

    total = checker                         1 when BFCL's pipeline accepts the team's replies (its decoder on
                                            every reply, its format check, then `ast_checker`; the relevance
                                            rule for the relevance categories): comlrl/tasks/bfcl/official.py
          + format_reward  x decoded        BFCL's decoder read every reply and found a call (not on relevance)
          + lenient_reward x decoded_lenient  the project's lenient decoder (calls.py) found a call in some reply
          + count_reward   x count_match    as many calls as the gold has
          + schema_reward  x schema         how well the calls fit the documents: per call, the share of its
                                            function's required parameters given, times the share of its
                                            arguments the document names (0 for an undocumented function)
          + argument_reward x arguments     per gold call, the share of its parameters whose value BFCL's own
                                            checker accepts when judged alone (the gold call's parameter
                                            against the same-named call's argument; an optional one left
                                            out counts), averaged over the gold calls
          - duplicate_penalty x duplicates  calls written more often than the gold writes them, per gold call
          - lazy_penalty   x lazy_agents    agents (of N >= 2) that wrote no call, when the gold has a call per agent

The team's answer is each agent's reply decoded by BFCL, concatenated in agent order, repeats kept (BFCL
judges a call written twice as two calls): with N >= 2 agents split a parallel entry's calls (the reference
library's native-parallel task) and pass when together they wrote the gold list; a reply BFCL cannot decode
fails the team (`ast_decoder:decoder_failed`), as it would fail one model. The shaping terms read the
lenient decoder's calls, so a reply with prose around a right call still learns its arguments; the pass
(pass@1, every evaluation's accuracy) is BFCL's verdict alone.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from comlrl.tasks.bfcl import official
from comlrl.tasks.bfcl.calls import Call, checker_output, decode
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
    lenient_reward: float = 0.0

    @property
    def reward_range(self) -> tuple[float, float]:
        return (-(self.duplicate_penalty * 4 + self.lazy_penalty),
                1.0 + self.format_reward + self.lenient_reward + self.count_reward + self.schema_reward
                + self.argument_reward)


@dataclass(frozen=True)
class BfclReward:
    """One joint action's reward (the `Reward` contract), with BFCL's verdict and the calls it judged."""

    total: float
    components: dict[str, float]
    verdict: Verdict
    calls: tuple[str, ...]  # the team's calls as BFCL decoded them, as call text (empty: nothing decoded)
    texts: tuple[str, ...] = ()  # per agent, what it wrote
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def all_passed(self) -> bool:
        return self.verdict.valid

    @property
    def scored(self) -> tuple[str, ...]:
        return self.texts


def team_calls(per_agent: Sequence[Sequence[Call]]) -> tuple[Call, ...]:
    """The team's calls in agent order, repeats kept."""
    return tuple(call for calls in per_agent for call in calls)


def excess_repeats(calls: Sequence[Call], problem: BfclProblem) -> int:
    """Calls written more often than the gold writes the same call (a gold that calls `f(x=1)` twice may)."""
    made = Counter(c.text() for c in calls)
    gold = problem.gold if isinstance(problem.gold, list) else []
    allowed = max(Counter(json.dumps(g, sort_keys=True, default=str) for g in gold).values(), default=1)
    return sum(max(0, n - allowed) for n in made.values())


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


def verdict_of(problem: BfclProblem, replies: Sequence[official.Official]) -> Verdict:
    """BFCL's verdict on the team's replies as its eval runner gives it: the relevance rule (some reply
    holds a call), or every reply decoded, the format check and the AST checker on their calls together."""
    if problem.category in RELEVANCE_CATEGORIES:
        return relevance_verdict(any(r.called for r in replies), problem.category)
    failed = [r.error for r in replies if not r.ok]
    if failed:
        return Verdict(False, "ast_decoder:decoder_failed", tuple(failed))
    decoded = [call for r in replies for call in r.calls or []]
    return ast_verdict(list(problem.checker_functions), decoded, problem.gold, problem.category)


def score(problem: BfclProblem, texts: Sequence[str], weights: ShapingWeights) -> BfclReward:
    """The reward of one joint action: every agent's reply decoded by BFCL and judged by its checker; the
    shaping terms on the lenient decoder's calls."""
    replies = [official.decode_ast(t, problem.category) for t in texts]
    verdict = verdict_of(problem, replies)
    lenient = [decode(t) for t in texts]
    calls = team_calls([d.calls for d in lenient])
    want = gold_calls(problem)
    is_relevance = problem.category in RELEVANCE_CATEGORIES
    lazy = sum(1 for d in lenient if not d.calls) if len(texts) > 1 and want >= len(texts) else 0
    parts = {
        "checker": float(verdict.valid),
        "decoded": float(not is_relevance and all(r.ok for r in replies) and any(r.called for r in replies)),
        "decoded_lenient": float(any(d.calls for d in lenient)),
        "refused": float(any(r.refused for r in replies)),
        "count_match": float(len(calls) == want and not is_relevance),
        "schema": 0.0 if is_relevance else schema_fit(calls, problem.checker_functions),
        "arguments": argument_credit(problem, calls),
        "duplicates": excess_repeats(calls, problem) / max(1, want),
        "lazy_agents": float(lazy),
        "calls": float(len(calls)),
    }
    total = (parts["checker"] + weights.format_reward * parts["decoded"]
             + weights.lenient_reward * parts["decoded_lenient"] + weights.count_reward * parts["count_match"]
             + weights.schema_reward * parts["schema"] + weights.argument_reward * parts["arguments"]
             - weights.duplicate_penalty * min(parts["duplicates"], 4.0) - weights.lazy_penalty * lazy / len(texts))
    notes = verdict.errors[:2] if not verdict.valid else ()
    judged = tuple(_text(call) for r in replies for call in r.calls or [])
    return BfclReward(round(total, 6), parts, verdict, judged, tuple(texts),
                      tuple(f"{verdict.error_type}: {n}"[:300] for n in notes))


def _text(call: dict) -> str:
    """A decoded call `{name: {param: value}}` as call text, for traces."""
    (name, args), = call.items() if isinstance(call, dict) and len(call) == 1 else (("?", {}),)
    items = args.items() if isinstance(args, dict) else ()
    return f"{name}({', '.join(f'{k}={v!r}' for k, v in items)})"
