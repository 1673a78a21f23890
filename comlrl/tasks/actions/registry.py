"""Action types: a parameter schema and an executor each, the registry, and the built-in types.

Users add action types without editing the library:

    from comlrl.tasks.actions import Observation, Param, register_action

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

PARAM_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
    "any": (object,),
}




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
            return f"parameter '{self.name}' must be {article} {self.type}, got {json_type(value)}"
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
class Observation:
    """What an executed action returns: success, text for the next prompt, structured data."""

    ok: bool
    text: str
    data: Mapping[str, Any] = field(default_factory=dict)
    terminal: bool = False  # ends the trajectory (complete_task)


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


def json_type(value: Any) -> str:
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
