"""Structured actions: a registry of action types (parameter schema + executor) and a parser that never raises.

An action is a JSON object inside the model's answer, in a ```json fence or bare:

    {"action": "create_file", "parameters": {"path": "notes.md", "content": "# Notes"}}

`"type"` may replace `"action"`, `"params"`/`"arguments"`/`"args"` may replace `"parameters"`, and the
flat form `{"action": "read_file", "path": "app.py"}` is accepted too; a fence may hold a list of actions.
`parse_actions` validates every action against its type's schema. Anything wrong (malformed JSON, unknown
type, missing/unknown/mistyped parameter, too many actions, no action at all) becomes an `ActionError` the
environment turns into an observation for the next turn and a format penalty: it is never an exception
and never silently dropped.

Users add action types without editing the library:

    from comlrl.agentic.actions import Observation, Param, register_action

    @register_action("word_count", [Param("path", "string")], description="count the words of a file")
    def word_count(action, ctx):
        text = ctx.workspace.read(action.params["path"])
        return Observation(True, f"{len(text.split())} words")
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from feedback.context import one_line

PARAM_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "any": (object,),
}
TYPE_KEYS = ("action", "type", "name", "tool")
PARAM_KEYS = ("parameters", "params", "arguments", "args", "input")
MAX_TEXT_CHARS = 50_000  # a turn's answer is a few KB; refuse to scan pathological input
EXCERPT_CHARS = 120  # the excerpt of the offending text an ActionError quotes
_FENCE = re.compile(r"(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:\n?[ \t]*\1[ \t]*(?:\n|$)|\Z)", re.S)
_DECODER = json.JSONDecoder(strict=False)  # raw newlines inside strings (code) are accepted


# --------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Param:
    """One parameter of an action type: JSON type, whether required, optional choices and length cap."""

    name: str
    type: str = "string"  # string | integer | number | boolean | object | array | any
    required: bool = True
    description: str = ""
    choices: tuple[Any, ...] | None = None
    max_length: int | None = None  # strings only
    nullable: bool = False

    def __post_init__(self) -> None:
        if self.type not in PARAM_TYPES:
            raise ValueError(f"Param {self.name!r}: type {self.type!r} is not one of {', '.join(PARAM_TYPES)}")

    def check(self, value: Any) -> str | None:
        """An error message for a bad value, or None."""
        if value is None:
            return None if self.nullable else f"parameter '{self.name}' must not be null"
        ok = isinstance(value, PARAM_TYPES[self.type])
        if self.type in ("integer", "number") and isinstance(value, bool):
            ok = False
        if not ok:
            article = "an" if self.type[0] in "aeiou" else "a"
            return f"parameter '{self.name}' must be {article} {self.type}, got {_json_type(value)}"
        if self.choices is not None and value not in self.choices:
            shown = ", ".join(str(c) for c in self.choices)
            return f"parameter '{self.name}' must be one of: {shown} (got {value!r})"
        if self.max_length is not None and isinstance(value, str) and len(value) > self.max_length:
            return f"parameter '{self.name}' is {len(value)} characters long (at most {self.max_length})"
        return None


@dataclass(frozen=True)
class Action:
    """A validated action: its type name and parameters (the schema's names only)."""

    type: str
    params: dict[str, Any]
    source: str = ""  # the JSON text it came from

    def key(self) -> str:
        """Canonical JSON of type + parameters (duplicate detection)."""
        return json.dumps([self.type, self.params], sort_keys=True, ensure_ascii=False, default=str)


@dataclass(frozen=True)
class ActionError:
    """Why (part of) an answer could not be turned into an action."""

    kind: str  # no_action | malformed_json | not_an_action | unknown_type | schema | too_many
    message: str
    source: str = ""

    def render(self) -> str:
        return f"{self.kind}: {self.message}"


@dataclass(frozen=True)
class Observation:
    """What an executed action returns: success, text for the next prompt, structured data."""

    ok: bool
    text: str
    data: Mapping[str, Any] = field(default_factory=dict)
    terminal: bool = False  # ends the trajectory (complete_task)


@dataclass(frozen=True)
class ParseResult:
    """The valid actions of one answer (in order), the errors, and the prose around the JSON."""

    actions: tuple[Action, ...]
    errors: tuple[ActionError, ...]
    prose: str = ""

    @property
    def format_ok(self) -> bool:
        return not self.errors


@dataclass
class ActionContext:
    """What an executor may use: the trajectory's workspace and the environment's services.

    `run_python(code) -> Observation` runs code in the sandbox with the workspace's files;
    `api_call(method, url, body) -> Observation` reaches only the task's allowed hosts.
    `extra` is free for user action types (the environment passes the task's problem as `problem`).
    """

    workspace: Any
    agent: int = 0
    role: str = ""
    run_python: Callable[[str], Observation] | None = None
    api_call: Callable[[str, str, Any], Observation] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


Executor = Callable[[Action, ActionContext], Observation]


@dataclass(frozen=True)
class ActionType:
    """A named action with its parameter schema and the function that executes it."""

    name: str
    params: tuple[Param, ...]
    executor: Executor
    description: str = ""
    terminal: bool = False

    def signature(self) -> str:
        """`create_file(path: string, content: string)`; optional parameters carry a `?`."""
        parts = [f"{p.name}{'' if p.required else '?'}: {p.type}" for p in self.params]
        return f"{self.name}({', '.join(parts)})"

    def validate(self, params: Mapping[str, Any]) -> list[str]:
        """Every schema violation of `params` (empty when valid)."""
        errors = []
        known = {p.name for p in self.params}
        for p in self.params:
            if p.name not in params:
                if p.required:
                    errors.append(f"missing required parameter '{p.name}'")
                continue
            msg = p.check(params[p.name])
            if msg:
                errors.append(msg)
        extra = sorted(k for k in params if k not in known)
        if extra:
            errors.append(f"unknown parameter(s) {', '.join(repr(k) for k in extra)}; "
                          f"{self.name} takes {', '.join(p.name for p in self.params) or 'none'}")
        return errors

    def execute(self, action: Action, ctx: ActionContext) -> Observation:
        """Run the executor; an exception inside it becomes a failed observation."""
        try:
            obs = self.executor(action, ctx)
        except Exception as exc:  # noqa: BLE001 - a buggy executor must not stop training
            return Observation(False, f"{self.name} failed: {type(exc).__name__}: {exc}")
        if not isinstance(obs, Observation):
            return Observation(False, f"{self.name} failed: its executor returned {type(obs).__name__}")
        return obs


class ActionRegistry:
    """Action types by name. `REGISTRY` holds the built-ins; copy it to customise one task."""

    def __init__(self, types: Iterable[ActionType] = ()) -> None:
        self._types: dict[str, ActionType] = {}
        for t in types:
            self.add(t)

    def add(self, action_type: ActionType, *, replace: bool = False) -> ActionType:
        if not action_type.name or not re.fullmatch(r"[A-Za-z_][\w.-]{0,63}", action_type.name):
            raise ValueError(f"action type name {action_type.name!r} must be an identifier")
        if action_type.name in self._types and not replace:
            raise ValueError(f"action type {action_type.name!r} is already registered (pass replace=True)")
        self._types[action_type.name] = action_type
        return action_type

    def register(
        self,
        name: str,
        params: Sequence[Param] = (),
        executor: Executor | None = None,
        *,
        description: str = "",
        terminal: bool = False,
        replace: bool = False,
    ) -> Any:
        """Register `name`; without `executor`, returns a decorator for the executor function."""

        def deco(fn: Executor) -> Executor:
            self.add(ActionType(name, tuple(params), fn, description, terminal), replace=replace)
            return fn

        if executor is not None:
            deco(executor)
            return self._types[name]
        return deco

    def unregister(self, name: str) -> None:
        self._types.pop(name, None)

    def get(self, name: str) -> ActionType | None:
        return self._types.get(name)

    def names(self) -> list[str]:
        return list(self._types)

    def copy(self, only: Iterable[str] | None = None) -> ActionRegistry:
        """A new registry with the same types (or the named subset)."""
        keep = None if only is None else set(only)
        return ActionRegistry(t for n, t in self._types.items() if keep is None or n in keep)

    def describe(self) -> str:
        """One line per type for the system prompt."""
        return "\n".join(f"- {t.signature()}: {t.description}" for t in self._types.values())

    def __contains__(self, name: object) -> bool:
        return name in self._types

    def __iter__(self) -> Iterator[ActionType]:
        return iter(self._types.values())

    def __len__(self) -> int:
        return len(self._types)


# --------------------------------------------------------------------------------------------- parsing


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _looks_like_action(text: str) -> bool:
    head = text[:200]
    return any(f'"{k}"' in head or f"'{k}'" in head for k in TYPE_KEYS[:2])


def json_objects(text: str) -> Iterator[tuple[int, int, Any]]:
    """(start, end, value) of each JSON value that starts at a `{` in prose, left to right; a `{` that does
    not decode gives (start, start, JSONDecodeError) and the scan goes on at the next `{`."""
    i = 0
    while (start := text.find("{", i)) >= 0:
        try:
            value, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            yield start, start, exc
            i = start + 1
            continue
        yield start, end, value
        i = end


def _candidates(text: str) -> tuple[list[tuple[Any, str]], list[ActionError], str]:
    """Decoded JSON values that may hold actions, decoding errors, and the remaining prose."""
    found: list[tuple[Any, str]] = []
    errors: list[ActionError] = []
    fences = [m for m in _FENCE.finditer(text)
              if m.group(2).lower() in ("json", "jsonc", "json5", "")
              and m.group(3).strip()[:1] in ("{", "[")]
    if fences:
        prose = text
        for m in fences:
            body = m.group(3).strip()
            prose = prose.replace(m.group(0), " ", 1)
            try:
                value, end = _DECODER.raw_decode(body)
            except json.JSONDecodeError as exc:
                errors.append(ActionError("malformed_json", f"invalid JSON in the ```json block ({exc.msg} at "
                                          f"line {exc.lineno} column {exc.colno})", one_line(body, EXCERPT_CHARS)))
                continue
            if body[end:].strip():
                errors.append(ActionError("malformed_json", "extra text after the JSON value in the ```json block",
                                          one_line(body, EXCERPT_CHARS)))
                continue
            found.append((value, body))
        return found, errors, prose.strip()
    pieces: list[str] = []
    last = 0
    for start, end, value in json_objects(text):
        if isinstance(value, json.JSONDecodeError):
            if _looks_like_action(text[start:]):
                errors.append(ActionError("malformed_json", f"invalid JSON action ({value.msg} at column "
                                          f"{value.pos - start + 1} of the object)",
                                          one_line(text[start:], EXCERPT_CHARS)))
                pieces.append(text[last:start])
                last = len(text)
                break
            continue
        if isinstance(value, dict) and any(k in value for k in TYPE_KEYS):  # other JSON in prose is prose
            found.append((value, text[start:end]))
            pieces.append(text[last:start])
            last = end
    pieces.append(text[last:])
    return found, errors, "".join(pieces).strip()


def _split_action(obj: dict[str, Any]) -> tuple[Any, Any, str | None]:
    """(type, params, problem) of one action object in any accepted spelling."""
    type_key = next((k for k in TYPE_KEYS if k in obj), None)
    if type_key is None:
        return None, None, f"an action needs an \"action\" field naming its type (keys seen: {', '.join(obj) or 'none'})"
    name = obj[type_key]
    param_key = next((k for k in PARAM_KEYS if k in obj), None)
    if param_key is not None:
        params = obj[param_key]
        others = [k for k in obj if k not in (type_key, param_key)]
        if others:
            return name, None, (f"fields {', '.join(repr(k) for k in others)} are outside \"{param_key}\"; "
                                "put every parameter inside it")
        if isinstance(params, str):  # OpenAI style: arguments as a JSON string
            try:
                params = _DECODER.decode(params)
            except json.JSONDecodeError:
                return name, None, f"\"{param_key}\" is a string that is not a JSON object"
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return name, None, f"\"{param_key}\" must be an object, got {_json_type(params)}"
        return name, params, None
    return name, {k: v for k, v in obj.items() if k != type_key}, None


def parse_actions(text: str, registry: ActionRegistry | None = None, max_actions: int = 3) -> ParseResult:
    """The valid actions of an answer plus an error for everything that is not one. Never raises."""
    registry = REGISTRY if registry is None else registry
    try:
        return _parse(text, registry, max_actions)
    except Exception as exc:  # noqa: BLE001 - defensive: parsing model output must never stop training
        return ParseResult((), (ActionError("malformed_json", f"could not parse the answer ({type(exc).__name__})"),),
                           str(text)[:2000] if isinstance(text, str) else "")


def _parse(text: str, registry: ActionRegistry, max_actions: int) -> ParseResult:
    if not isinstance(text, str):
        text = "" if text is None else str(text)
    if len(text) > MAX_TEXT_CHARS:
        return ParseResult((), (ActionError("malformed_json", f"answer too long ({len(text)} characters)"),), "")
    found, errors, prose = _candidates(text)
    actions: list[Action] = []
    for value, source in found:
        items = value if isinstance(value, list) else [value]
        if not items:
            errors.append(ActionError("not_an_action", "an empty list holds no action", one_line(source, EXCERPT_CHARS)))
        for obj in items:
            if not isinstance(obj, dict):
                errors.append(ActionError("not_an_action", f"an action must be a JSON object, got {_json_type(obj)}",
                                          one_line(source, EXCERPT_CHARS)))
                continue
            name, params, problem = _split_action(obj)
            if problem is not None and name is None:
                errors.append(ActionError("not_an_action", problem, one_line(source, EXCERPT_CHARS)))
                continue
            if not isinstance(name, str) or name not in registry:
                known = ", ".join(registry.names())
                errors.append(ActionError("unknown_type", f"unknown action type {name!r}; known types: {known}",
                                          one_line(source, EXCERPT_CHARS)))
                continue
            if problem is not None:
                errors.append(ActionError("schema", f"{name}: {problem}", one_line(source, EXCERPT_CHARS)))
                continue
            schema_errors = registry.get(name).validate(params)  # type: ignore[union-attr]
            if schema_errors:
                errors.append(ActionError("schema", f"{name}: " + "; ".join(schema_errors), one_line(source, EXCERPT_CHARS)))
                continue
            actions.append(Action(name, dict(params), source))
    if len(actions) > max_actions:
        extra = actions[max_actions:]
        actions = actions[:max_actions]
        errors.append(ActionError("too_many", f"{len(extra)} action(s) beyond the limit of {max_actions} per turn "
                                  f"were not executed ({', '.join(a.type for a in extra)})"))
    if not actions and not errors:
        errors.append(ActionError("no_action", "no JSON action found; answer with a ```json block like "
                                  '{"action": "read_file", "parameters": {"path": "README.md"}}'))
    return ParseResult(tuple(actions), tuple(errors), prose)


# ------------------------------------------------------------------------------------ built-in types


def _create_file(action: Action, ctx: ActionContext) -> Observation:
    path, content = action.params["path"], action.params["content"]
    existed = ctx.workspace.exists(path)
    ctx.workspace.write(path, content)
    verb = "overwrote" if existed else "created"
    return Observation(True, f"{verb} {path} ({len(content)} characters)", {"path": path, "created": not existed})


def _read_file(action: Action, ctx: ActionContext) -> Observation:
    path = action.params["path"]
    if not ctx.workspace.exists(path):
        ctx.workspace.resolve(path)  # a path that may not be used fails with the reason, not "does not exist"
        listing = ", ".join(ctx.workspace.list()) or "(empty)"
        return Observation(False, f"{path} does not exist; files: {listing}", {"path": path})
    text = ctx.workspace.read(path)
    return Observation(True, f"{path}:\n{text}", {"path": path, "chars": len(text)})


def _run_python(action: Action, ctx: ActionContext) -> Observation:
    if ctx.run_python is None:
        return Observation(False, "run_python is not available in this environment")
    return ctx.run_python(action.params["code"])


def _api_call(action: Action, ctx: ActionContext) -> Observation:
    if ctx.api_call is None:
        return Observation(False, "api_call is not available in this environment")
    p = action.params
    return ctx.api_call(p["method"].upper(), p["url"], p.get("body"))


def _complete_task(action: Action, ctx: ActionContext) -> Observation:
    summary = action.params["summary"]
    return Observation(True, "task marked complete", {"summary": summary}, terminal=True)


BUILTIN_TYPES: tuple[ActionType, ...] = (
    ActionType("create_file", (Param("path", max_length=200, description="relative path in the workspace"),
                               Param("content", max_length=20_000)),
               _create_file, "create or overwrite a text file in the workspace"),
    ActionType("read_file", (Param("path", max_length=200),), _read_file, "show a file of the workspace"),
    ActionType("run_python", (Param("code", max_length=20_000),), _run_python,
               "run Python 3 in a sandbox whose working directory holds the workspace files; "
               "prints stdout/stderr; files it writes are kept"),
    ActionType("api_call", (Param("method", choices=("GET", "POST", "PUT", "PATCH", "DELETE", "get", "post", "put",
                                                      "patch", "delete")),
                            Param("url", max_length=500),
                            Param("body", "any", required=False, nullable=True)),
               _api_call, "HTTP request to the task's API (JSON body)"),
    ActionType("complete_task", (Param("summary", max_length=2000),), _complete_task,
               "declare the user's request done, with a short summary", terminal=True),
)

REGISTRY = ActionRegistry(BUILTIN_TYPES)


def register_action(
    name: str,
    params: Sequence[Param] = (),
    executor: Executor | None = None,
    *,
    description: str = "",
    terminal: bool = False,
    replace: bool = False,
) -> Any:
    """Register an action type in the default registry (usable as a decorator without `executor`)."""
    return REGISTRY.register(name, params, executor, description=description, terminal=terminal, replace=replace)
