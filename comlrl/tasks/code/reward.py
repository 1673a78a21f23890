"""Levelled code-collaboration reward, computed from the AST plus one sandboxed run of ALL the tests.

Levels (weights in `WEIGHTS`, range from `reward_range`; see docs/rewards.md):

1. structure   the entry point is a top-level ``def`` in the main agent's code (and, with 2 agents, the
               helper ``aux`` is a top-level ``def`` in the helper agent's code);
2. syntax      every agent's code compiles and so does the combined program, credited only when level 1
               holds (cumulative, as in the reference library: a reply without the functions it must
               define, prose or an empty program, earns no syntax credit);
3. tests       fraction of ALL test asserts passed (never the feedback slice). Runs only when level 2
               holds and the entry point exists; otherwise nothing executes, so unparsable code is cheap;
4. cooperation (2 agents) the entry point calls the helper and uses its result, and is not a thin
               wrapper around it. Both bonuses are scaled by the test fraction: an unused or broken
               program cannot collect them.

Combined program = preamble (imports/helpers of the problem prompt) + helper code + main code.
The levels are the code tasks' rules, so they live here; `sandbox` only runs the program and the tests.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from sandbox.executor import Sandbox
from sandbox.results import ExecResult, SyntaxErrorInfo
from sandbox.testparse import ParsedTests
from sandbox.untrusted_source import check_compiles, parse

__all__ = [
    "LEVELS", "REWARDS", "WEIGHTS", "CodeAnalysis", "CodeReward", "CodeRewardRule", "FunctionRule", "ScoreRequest",
    "SyntaxErrorInfo", "analyze", "combine", "reward_range", "score", "score_batch",
]

WEIGHTS: dict[int, dict[str, float]] = {
    1: {"main_defined": 0.5, "syntax": 0.5, "tests": 2.0},
    2: {"helper_defined": 0.25, "main_defined": 0.25, "syntax": 0.5, "tests": 2.0, "helper_used": 0.5,
        "not_thin_wrapper": 0.5},
}


@dataclass(frozen=True)
class CodeAnalysis:
    """Static facts about one agent's code."""

    role: str  # "helper" or "main"
    defined: bool  # the function this role must provide is a top-level def
    syntax_error: SyntaxErrorInfo | None
    functions: tuple[str, ...] = ()


@dataclass(frozen=True)
class CodeReward:
    total: float
    components: dict[str, float]
    analyses: tuple[CodeAnalysis, ...]
    tests_passed: int
    tests_total: int
    helper_called: bool
    helper_result_used: bool
    thin_wrapper: bool
    exec: ExecResult | None
    notes: tuple[str, ...] = ()
    codes: tuple[str, ...] = ()  # the code each agent contributed, as scored: what feedback shows

    @property
    def all_passed(self) -> bool:
        """Every test passed (and there was at least one)."""
        return self.tests_total > 0 and self.tests_passed == self.tests_total

    @property
    def scored(self) -> tuple[str, ...]:
        """The code each agent contributed, as scored (the `Reward` contract's name for `codes`)."""
        return self.codes


@dataclass(frozen=True)
class ScoreRequest:
    """`codes` has 1 entry (single agent: main) or 2 (helper, main)."""

    codes: tuple[str, ...]
    entry_point: str
    tests: ParsedTests
    preamble: str = ""
    helper_name: str = "aux"


def reward_range(num_agents: int) -> tuple[float, float]:
    """(min, max) of `CodeReward.total` for 1 or 2 agents."""
    if num_agents not in WEIGHTS:
        raise ValueError(f"num_agents={num_agents!r} is not supported; expected 1 or 2")
    return 0.0, float(sum(WEIGHTS[num_agents].values()))


# --------------------------------------------------------------------------------------------- static

def _parse(code: str) -> tuple[ast.Module | None, SyntaxErrorInfo | None]:
    try:
        tree = parse(code)
        check_compiles(tree)  # catches e.g. `return` outside a function
    except SyntaxError as e:
        return None, SyntaxErrorInfo(e.lineno or 0, e.offset or 0, e.msg)
    except (ValueError, RecursionError, MemoryError, OverflowError) as e:
        return None, SyntaxErrorInfo(0, 0, f"{type(e).__name__}: {e}")
    return tree, None


def _top_defs(tree: ast.Module | None) -> dict[str, ast.FunctionDef]:
    """Top-level function definitions by name (the last one wins, as at run time)."""
    out: dict[str, ast.FunctionDef] = {}
    for node in tree.body if tree else ():
        if isinstance(node, ast.FunctionDef):
            out[node.name] = node
    return out


def analyze(code: str, role: str, name: str) -> tuple[CodeAnalysis, ast.Module | None]:
    """Parse one agent's code and check that it defines `name` at top level."""
    tree, err = _parse(code)
    defs = _top_defs(tree)
    return CodeAnalysis(role, name in defs, err, tuple(defs)), tree


def _effective_body(fn: ast.FunctionDef) -> list[ast.stmt]:
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return [s for s in body if not isinstance(s, ast.Pass)]


def _is_helper_call(node: ast.AST | None, helper: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == helper


def _result_used(site: ast.AST, parents: dict[ast.AST, ast.AST], loads: list[str]) -> bool:
    """The value of expression `site` is used: not a bare statement, not assigned to names never read."""
    parent = parents.get(site)
    if isinstance(parent, ast.Expr):
        return False  # result thrown away
    if isinstance(parent, ast.Assign | ast.AnnAssign | ast.NamedExpr):
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        if names and not any(loads.count(n) for n in names):
            return False  # assigned but never read
    return True


def _helper_usage(fn: ast.FunctionDef, helper: str) -> tuple[bool, bool]:
    """(called, result used) for uses of `helper` anywhere inside the entry point function: calls
    `aux(...)`, and the function passed as a value (`map(aux, xs)`, `key=aux`, `f = aux`), whose
    enclosing call or alias stands for the call."""
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(fn):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    loads = [n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)]
    called = used = False
    for node in ast.walk(fn):
        if _is_helper_call(node, helper):
            site: ast.AST = node
        elif isinstance(node, ast.Name) and node.id == helper and isinstance(node.ctx, ast.Load) \
                and not (isinstance(parents.get(node), ast.Call) and parents[node].func is node):
            site = parents.get(node, node)
            if isinstance(site, ast.keyword):
                site = parents.get(site, site)
            if not isinstance(site, ast.Call | ast.Assign | ast.AnnAssign | ast.NamedExpr):
                site = node
            if isinstance(site, ast.Assign | ast.AnnAssign | ast.NamedExpr):
                site = node  # an alias: used when the alias is read
        else:
            continue
        called = True
        used = used or _result_used(site, parents, loads)
    return called, used


def _thin_wrapper(fn: ast.FunctionDef, helper: str) -> bool:
    """The entry point only forwards to the helper: `return aux(...)` or `r = aux(...); return r`."""
    body = _effective_body(fn)
    if len(body) == 1 and isinstance(body[0], ast.Return):
        return _is_helper_call(body[0].value, helper)
    if len(body) == 2 and isinstance(body[0], ast.Assign) and isinstance(body[1], ast.Return):
        target = body[0].targets[0] if len(body[0].targets) == 1 else None
        value = body[1].value
        return (_is_helper_call(body[0].value, helper) and isinstance(target, ast.Name)
                and isinstance(value, ast.Name) and value.id == target.id)
    return False


def combine(request: ScoreRequest) -> str:
    """The program that runs: preamble + helper code + main code."""
    parts = [request.preamble, *request.codes]
    return "\n\n".join(p.strip("\n") for p in parts if p and p.strip())


# ---------------------------------------------------------------------------------------------- score

@dataclass
class _Plan:
    request: ScoreRequest
    analyses: tuple[CodeAnalysis, ...]
    components: dict[str, float]
    notes: list[str] = field(default_factory=list)
    program: str | None = None  # set when the tests must run
    helper_called: bool = False
    helper_used: bool = False
    thin: bool = False


def _plan(req: ScoreRequest) -> _Plan:
    n = len(req.codes)
    if n not in WEIGHTS:
        raise ValueError(f"ScoreRequest.codes has {n} entries; expected 1 (main) or 2 (helper, main)")
    w = WEIGHTS[n]
    roles = ("main",) if n == 1 else ("helper", "main")
    names = (req.entry_point,) if n == 1 else (req.helper_name, req.entry_point)
    parsed = [analyze(code, role, name) for code, role, name in zip(req.codes, roles, names, strict=True)]
    analyses = tuple(a for a, _ in parsed)
    main, main_tree = parsed[-1]
    comp = {k: 0.0 for k in w}
    plan = _Plan(req, analyses, comp)
    comp["main_defined"] = w["main_defined"] if main.defined else 0.0
    if n == 2:
        comp["helper_defined"] = w["helper_defined"] if analyses[0].defined else 0.0
    for a in analyses:
        if a.syntax_error is not None:
            plan.notes.append(f"{a.role}: SyntaxError at {a.syntax_error}")
        elif not a.defined:
            plan.notes.append(f"{a.role}: no top-level def {names[roles.index(a.role)]}")
    if any(a.syntax_error for a in analyses):
        return plan
    program = combine(req)
    _, err = _parse(program)
    if err is not None:
        plan.notes.append(f"combined program: SyntaxError at {err}")
        return plan
    if all(a.defined for a in analyses):  # levels are cumulative: syntax counts for the code the task asks for
        comp["syntax"] = w["syntax"]
    if not main.defined:
        return plan
    plan.program = program
    if n == 2:
        fn = _top_defs(main_tree)[req.entry_point]
        if req.helper_name in _top_defs(main_tree):
            plan.notes.append(f"main redefines {req.helper_name}: the helper agent's code is shadowed")
        else:
            plan.helper_called, plan.helper_used = _helper_usage(fn, req.helper_name)
            plan.thin = plan.helper_called and _thin_wrapper(fn, req.helper_name)
        if not plan.helper_called:
            plan.notes.append(f"main does not call {req.helper_name}")
        elif not plan.helper_used:
            plan.notes.append(f"main calls {req.helper_name} but ignores its result")
        if plan.thin:
            plan.notes.append(f"main is a thin wrapper around {req.helper_name}")
    return plan


def _finish(plan: _Plan, result: ExecResult | None) -> CodeReward:
    req, comp = plan.request, plan.components
    w = WEIGHTS[len(req.codes)]
    total_tests = len(req.tests.asserts)
    passed = result.passed if result is not None else 0
    frac = passed / total_tests if total_tests else 0.0
    notes = list(plan.notes)
    if result is not None:
        comp["tests"] = w["tests"] * frac
        if result.status not in ("passed", "failed"):
            notes.append(f"run {result.status}: {result.message}".rstrip(": "))
    if len(req.codes) == 2:
        comp["helper_used"] = w["helper_used"] * frac if plan.helper_used else 0.0
        comp["not_thin_wrapper"] = w["not_thin_wrapper"] * frac if plan.helper_used and not plan.thin else 0.0
    return CodeReward(
        total=round(sum(comp.values()), 10), components=dict(comp), analyses=plan.analyses,
        tests_passed=passed, tests_total=total_tests, helper_called=plan.helper_called,
        helper_result_used=plan.helper_used, thin_wrapper=plan.thin, exec=result, notes=tuple(notes),
        codes=tuple(req.codes),
    )


def score_batch(requests: Sequence[ScoreRequest], sandbox: Sandbox) -> list[CodeReward]:
    """Score many joint actions: static checks here, all executions in parallel (and cached) in `sandbox`."""
    plans = [_plan(r) for r in requests]
    runnable = [i for i, p in enumerate(plans) if p.program is not None]
    results = sandbox.run_many([(plans[i].program or "", plans[i].request.tests) for i in runnable]) \
        if runnable else []
    by_index: dict[int, ExecResult] = dict(zip(runnable, results, strict=True))
    return [_finish(p, by_index.get(i)) for i, p in enumerate(plans)]


def score(request: ScoreRequest, sandbox: Sandbox) -> CodeReward:
    return score_batch([request], sandbox)[0]


@runtime_checkable
class CodeRewardRule(Protocol):
    """A code tasks' reward, chosen by `task.reward` (register one with `comlrl.config.registry.register_reward`)."""

    def reward_range(self, num_agents: int) -> tuple[float, float]:
        """The lowest and highest total for this many agents (bounds magrpo.early_termination_threshold)."""
        ...

    def score_batch(self, requests: Sequence[ScoreRequest], sandbox: Sandbox) -> list[CodeReward]:
        """One `CodeReward` per request, in order; executions go through `sandbox`."""
        ...


class Levels:
    """The levelled reward above (`task.reward=levels`, the default)."""

    def reward_range(self, num_agents: int) -> tuple[float, float]:
        return reward_range(num_agents)

    def score_batch(self, requests: Sequence[ScoreRequest], sandbox: Sandbox | None) -> list[CodeReward]:
        if sandbox is None:
            raise RuntimeError("the levels reward runs the tests, so it needs a sandbox (build_task(cfg, sandbox))")
        return score_batch(requests, sandbox)


class FunctionRule:
    """A plain function registered as a code reward (`register_reward(name, fn)`): `fn(requests, sandbox)`
    returns one `CodeReward` or one number per request, in order; a number becomes a reward whose one
    component is the function's name. Its range is the one registered, else open (any threshold)."""

    def __init__(self, name: str, fn: Callable[..., Any], reward_range: tuple[float, float] | None = None) -> None:
        self.name, self.fn = name, fn
        self.range = (-math.inf, math.inf) if reward_range is None else (float(reward_range[0]),
                                                                          float(reward_range[1]))

    def reward_range(self, num_agents: int) -> tuple[float, float]:
        return self.range

    def score_batch(self, requests: Sequence[ScoreRequest], sandbox: Sandbox | None) -> list[CodeReward]:
        from comlrl.tasks.reward_funcs import RewardFunctionError, call_name, checked_values

        who = f"task.reward={self.name}: {call_name(self.fn)}"
        try:
            out = self.fn(list(requests), sandbox)
        except RewardFunctionError:
            raise
        except Exception as exc:  # noqa: BLE001 - a user's function: any failure is one line naming it
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            raise RewardFunctionError(f"{who} raised {type(exc).__name__}: {first}".rstrip(": ")) from exc
        if isinstance(out, Sequence) and len(out) == len(requests) and all(isinstance(r, CodeReward) for r in out):
            return list(out)
        values = checked_values(out, len(requests), who, allow_none=False)
        return [CodeReward(total=float(v or 0.0), components={self.name: float(v or 0.0)}, analyses=(),
                           tests_passed=0, tests_total=0, helper_called=False, helper_result_used=False,
                           thin_wrapper=False, exec=None, codes=tuple(req.codes))
                for v, req in zip(values, requests, strict=True)]


LEVELS = Levels()
REWARDS: dict[str, CodeRewardRule] = {"levels": LEVELS}  # the one table of code rewards (comlrl.config.registry)
