"""Answer text -> actions: a parser that never raises.

An action is a JSON object inside the model's answer, in a ```json fence or bare:

    {"action": "create_file", "parameters": {"path": "notes.md", "content": "# Notes"}}

`"type"` may replace `"action"`, `"params"`/`"arguments"`/`"args"` may replace `"parameters"`, and the
flat form `{"action": "read_file", "path": "app.py"}` is accepted too; a fence may hold a list of actions.
`parse_actions` validates every action against its type's schema. Anything wrong (malformed JSON, unknown
type, missing/unknown/mistyped parameter, too many actions, no action at all) becomes an `ActionError` the
environment turns into an observation for the next turn and a format penalty: it is never an exception
and never silently dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from comlrl.tasks.actions.registry import REGISTRY, Action, ActionRegistry, json_type
from feedback.context import one_line

TYPE_KEYS = ("action", "type", "name", "tool")
PARAM_KEYS = ("parameters", "params", "arguments", "args", "input")
MAX_TEXT_CHARS = 50_000  # a turn's answer is a few KB; refuse to scan pathological input
EXCERPT_CHARS = 120  # the excerpt of the offending text an ActionError quotes
_FENCE = re.compile(r"(`{3,}|~{3,})[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:\n?[ \t]*\1[ \t]*(?:\n|$)|\Z)", re.S)
_DECODER = json.JSONDecoder(strict=False)  # raw newlines inside strings (code) are accepted


@dataclass(frozen=True)
class ActionError:
    """Why (part of) an answer could not be turned into an action."""

    kind: str  # no_action | malformed_json | not_an_action | unknown_type | schema | too_many
    message: str
    source: str = ""

    def render(self) -> str:
        return f"{self.kind}: {self.message}"


@dataclass(frozen=True)
class ParseResult:
    """The valid actions of one answer (in order), the errors, and the prose around the JSON."""

    actions: tuple[Action, ...]
    errors: tuple[ActionError, ...]
    prose: str = ""

    @property
    def format_ok(self) -> bool:
        return not self.errors


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
                errors.append(ActionError("malformed_json", f"invalid JSON action ({value.msg}: column "
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
        return None, None, ("an action needs an \"action\" field naming its type "
                            f"(keys seen: {', '.join(obj) or 'none'})")
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
            return name, None, f"\"{param_key}\" must be an object, got {json_type(params)}"
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
            errors.append(ActionError("not_an_action", "an empty list holds no action",
                                      one_line(source, EXCERPT_CHARS)))
        for obj in items:
            if not isinstance(obj, dict):
                errors.append(ActionError("not_an_action", f"an action must be a JSON object, got {json_type(obj)}",
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
                errors.append(ActionError("schema", f"{name}: " + "; ".join(schema_errors),
                                          one_line(source, EXCERPT_CHARS)))
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
