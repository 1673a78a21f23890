"""BFCL's multi-turn environment on the turn tree: the benchmark's own backend classes, their instance state
kept per tree path, and one joint action's step (its calls run, then BFCL's multi-turn checker).

A path's state (`TurnState`, `comlrl.tree.nodes.Node.state`) holds the backend instances as pickled bytes, so
sibling joint actions start from equal copies and never share an object, and a child continues from the
bytes its joint action left. Instances are made as BFCL's `multi_turn_utils.execute_multi_turn_func_call`
makes them (`_load_scenario(deepcopy(initial_config[cls]), long_context=...)`, the stateless classes
without a scenario); a call runs as the public method of that name on the instance that has it (the last
involved class wins a shared name, as in BFCL's mapping), with the call's literal keyword arguments: no
model text is evaluated here. Only the names of the entry's function documents run (BFCL leaves its
`excluded_function` out of them); another name is an "unknown function". Results are rendered as BFCL
renders them (a str as is, a dict as JSON, else `str()`), an exception as `Error during execution: ...`.

`run_step` (one joint action: every agent's calls in agent order, then the checker on the trajectory so
far) runs in the scoring process (comlrl/tasks/bfcl/scorer.py): a call's arguments can make a backend
compute for minutes or allocate gigabytes, and the checker replays the same calls.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import inspect
import json
import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from comlrl.tasks.bfcl.calls import Call
from comlrl.tasks.bfcl.checker import Verdict, bfcl, multi_turn_verdict

# What the checker is given for a call this environment did not run (a name outside the entry's documents):
# the checker `eval`s call strings with every builtin and its module's globals in reach, so the model's
# name never reaches it; this stand-in fails there as an undefined name does, an error result like BFCL's.
UNKNOWN_CALL = "comlrl_unknown_function()"
ERROR_PREFIX = "Error during execution: "
TIMED_OUT = "execution timed out"
# The classes of BFCL's multi-turn categories (the other backends serve its memory and web-search suites).
MULTI_TURN_CLASSES = ("GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI", "TicketAPI", "TradingBot",
                      "TravelAPI", "VehicleControlAPI")

Steps = tuple[tuple[str, ...], ...]  # one user turn's steps: per agent that decoded calls, its call strings
Pairs = tuple[tuple[str, str], ...]  # one agent's (call, result) pairs of a turn


@dataclass(frozen=True)
class TurnState:
    """One tree path's environment after some replies (`Node.state`); never changed, only replaced.

    A user turn is open while its replies keep making calls (BFCL's multi-turn loop: the model replies
    again after seeing its calls' results, until it writes no call or reaches the step limit)."""

    task_id: str
    instances: bytes = field(repr=False)  # pickled {class name: backend instance}
    steps: tuple[Steps, ...] = ()  # per user turn begun (the open one last), its steps as the checker reads them
    answered: int = 0  # user turns finished on this path
    in_turn: int = 0  # replies made so far in the open user turn (0: none open; the next reply begins a turn)
    last: tuple[Pairs, ...] = ()  # per agent, the (call, result) pairs of the last turn (what the next prompt shows)
    decode_errors: tuple[str, ...] = ()  # per agent, why its last reply decoded into no call ("" when it did)
    verdict: Verdict | None = None  # the checker's verdict through the last answered user turn
    note: str = ""  # why the last joint action changed nothing (it timed out, the scoring process failed)

    @property
    def key(self) -> str:
        """A short digest of the entry, the calls run and the turns answered: the environment is a function
        of them (the pickled bytes are not: BFCL's files keep a private `datetime.now()` stamp)."""
        return hashlib.sha1(repr((self.task_id, self.steps, self.answered, self.in_turn)).encode()).hexdigest()[:12]

    @property
    def continues_turn(self) -> bool:
        """The next reply continues a user turn already begun (`comlrl.tree.contracts.StepState`: the tree
        branches only at a user turn's first reply)."""
        return self.in_turn > 0


@dataclass(frozen=True)
class StepRequest:
    """One joint action to run in the scoring process."""

    entry: dict  # BFCL's raw entry (id, initial_config, involved_classes): what the checker reads
    instances: bytes
    allowed: frozenset[str]  # the names of the entry's function documents
    calls: tuple[tuple[Call, ...], ...]  # per agent, its decoded calls (empty: nothing decoded)
    steps: tuple[Steps, ...]  # the user turns' steps so far (the open one last when `open_turn`)
    gold: tuple[tuple[str, ...], ...]  # the ground truth through this user turn
    open_turn: bool = False  # this reply continues the last user turn of `steps`


@dataclass(frozen=True)
class StepOutcome:
    """What one joint action did: the instances it left, per agent its (call, result, error) triples, this
    turn's steps as the checker read them and the checker's verdict through this turn."""

    instances: bytes
    results: tuple[tuple[tuple[str, str, bool], ...], ...]
    steps: Steps
    verdict: Verdict


def long_context(entry: dict) -> bool:
    """BFCL's rule for loading a scenario with its long-context additions (from the entry's category)."""
    category = str(entry["id"]).rsplit("_", 1)[0]
    return "long_context" in category or "composite" in category


@functools.cache
def backend_classes() -> dict[str, type]:
    """The multi-turn backend classes by name. Imported by import statements, not from the module paths in
    BFCL's `CLASS_FILE_PATH_MAPPING` as BFCL does (no module here imports by a name in a string:
    tests/test_architecture_imports.py); each class is checked against that table so the two cannot drift."""
    b = bfcl()  # the checker's stand-in for BFCL's model table goes in first
    from bfcl_eval.eval_checker.multi_turn_eval.func_source_code import (
        gorilla_file_system,
        math_api,
        message_api,
        posting_api,
        ticket_api,
        trading_bot,
        travel_booking,
        vehicle_control,
    )

    modules = (gorilla_file_system, math_api, message_api, posting_api, ticket_api, trading_bot, travel_booking,
               vehicle_control)
    out = {}
    for name in MULTI_TURN_CLASSES:
        [cls] = [getattr(m, name) for m in modules if hasattr(m, name)]
        if cls.__module__ != b.backends.CLASS_FILE_PATH_MAPPING[name]:
            raise RuntimeError(f"BFCL's {name} lives in {b.backends.CLASS_FILE_PATH_MAPPING[name]}, "
                               f"not {cls.__module__}")
        out[name] = cls
    return out


def fresh_instances(entry: dict) -> bytes:
    """The entry's backend instances before any call, pickled (the state of a tree's root)."""
    stateless = bfcl().backends.STATELESS_CLASSES
    out = {}
    for name in entry["involved_classes"]:
        instance = backend_classes()[name]()
        if name not in stateless:
            instance._load_scenario(copy.deepcopy(entry["initial_config"].get(name, {})),
                                    long_context=long_context(entry))
        out[name] = instance
    return pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)


def warm_up() -> None:
    """Import the checker and the multi-turn backends once (the scoring process does it when it starts)."""
    backend_classes()


def render(value: Any) -> str:
    """A call's result as BFCL renders it for the model and its checker."""
    if type(value) is str:  # noqa: E721 - BFCL's exact test: a str subclass is rendered by str()
        return value
    if type(value) is dict:  # noqa: E721
        try:
            return json.dumps(value)
        except Exception:  # noqa: BLE001 - BFCL's fallback for values JSON cannot hold
            return str(value)
    return str(value)


def is_error(result: str) -> bool:
    """The call failed: an exception, an unknown name, a timeout, or a backend's own `{"error": ...}` answer."""
    if result.startswith(ERROR_PREFIX) or result == TIMED_OUT:
        return True
    return result.startswith('{"error":')


def _methods(instances: dict[str, Any]) -> dict[str, Any]:
    """Public method name -> bound method, over the instances in BFCL's order (a later class wins a name)."""
    out = {}
    for instance in instances.values():
        for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
            if not name.startswith("_"):
                out[name] = method
    return out


def execute(methods: dict[str, Any], allowed: frozenset[str], call: Call) -> tuple[str, str]:
    """Run one call on the instances whose `methods` these are (changing them); (the string the checker
    gets, the rendered result)."""
    if call.name not in allowed or call.name not in methods:
        return UNKNOWN_CALL, f"{ERROR_PREFIX}unknown function '{call.name}'"
    try:
        return call.text(), render(methods[call.name](**call.args))
    except Exception as exc:  # noqa: BLE001 - wrong arguments or a backend failing: the model's observation
        return call.text(), f"{ERROR_PREFIX}{exc}"


def run_step(req: StepRequest) -> StepOutcome:
    """One joint action: agent 0's calls run first, then agent 1's, ...; then BFCL's multi-turn checker on the
    trajectory through this user turn (`req.gold` is the ground truth truncated to it)."""
    instances = pickle.loads(req.instances)
    methods = _methods(instances)
    results, steps = [], []
    for calls in req.calls:
        done = [(call, *execute(methods, req.allowed, call)) for call in calls]
        results.append(tuple((call.text(), result, is_error(result)) for call, _, result in done))
        if done:
            steps.append(tuple(checked for _, checked, _ in done))
    before = req.steps[:-1] if req.open_turn else req.steps
    current = (req.steps[-1] if req.open_turn else ()) + tuple(steps)
    turns = [[list(step) for step in turn] for turn in (*before, current)]
    verdict = multi_turn_verdict(req.entry, turns, [list(turn) for turn in req.gold])
    return StepOutcome(pickle.dumps(instances, protocol=pickle.HIGHEST_PROTOCOL), tuple(results), tuple(steps),
                       verdict)


def advanced(state: TurnState, outcome: StepOutcome, decode_errors: Sequence[str], steps_per_turn: int) -> TurnState:
    """The state a joint action leaves: its instances and this reply's steps added to its user turn. The
    user turn stays open when some agent made a call and the turn has had fewer than `steps_per_turn`
    replies; else it is finished (a reply without a call ends it, as in BFCL's loop)."""
    last = tuple(tuple((call, result) for call, result, _ in agent) for agent in outcome.results)
    before = state.steps[:-1] if state.in_turn else state.steps
    current = (state.steps[-1] if state.in_turn else ()) + outcome.steps
    called = any(outcome.results)
    replies = state.in_turn + 1
    if called and replies < steps_per_turn:
        return TurnState(state.task_id, outcome.instances, (*before, current), state.answered, replies, last,
                         tuple(decode_errors), outcome.verdict)
    return TurnState(state.task_id, outcome.instances, (*before, current), state.answered + 1, 0, last,
                     tuple(decode_errors), outcome.verdict)


def unchanged(state: TurnState, calls: Sequence[Sequence[Call]], decode_errors: Sequence[str],
              why: str) -> TurnState:
    """The state a joint action that ran to no end leaves: the environment as it was (the same user turn is
    asked again), each call's result `why` (e.g. "execution timed out")."""
    last = tuple(tuple((call.text(), why) for call in agent) for agent in calls)
    return TurnState(state.task_id, state.instances, state.steps, state.answered, state.in_turn, last,
                     tuple(decode_errors), state.verdict, why)


def tool_results(state: TurnState, roles: Sequence[str]) -> list[dict[str, str]]:
    """The last turn's results as BFCL hands them to prompting models (`{"role": "tool", "name": call,
    "content": result}` per call, in the order they ran); a reply that decoded into no call is one entry
    saying why; with several agents each entry names its caller."""
    out = []
    for a, pairs in enumerate(state.last):
        tag = {"caller": roles[a]} if len(roles) > 1 else {}
        error = state.decode_errors[a] if a < len(state.decode_errors) else ""
        if error:
            out.append({"role": "tool", **tag, "name": "(reply)",
                        "content": f"Error: the reply is not a list of function calls ({error})"})
        out += [{"role": "tool", **tag, "name": call, "content": result} for call, result in pairs]
    return out
