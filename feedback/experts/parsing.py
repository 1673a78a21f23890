"""Robust extraction of per-agent edits from an expert's reply.

Models wrap JSON in fences, add prose after it, stop mid-string at the token limit, or answer with
near-JSON. We try, in order: fenced blocks, every decodable `{...}` in the text (last wins), a repaired
truncated object, Python-literal dicts, and finally a per-key scan for `"role": "..."`. Keys are matched to role names
case-insensitively; `agent0`/`0`-style keys and a JSON list in agent order are accepted too.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n?(.*?)(?:```|\Z)", re.DOTALL)


def _value_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(v.strip() for v in value)
    return json.dumps(value, ensure_ascii=False)


def _norm(key: str) -> str:
    return re.sub(r"[^a-z0-9]", "", key.lower())


def _match(obj: Any, role_names: list[str]) -> dict[str, str] | None:
    """Map a decoded JSON value onto the roles; None if it names none of them."""
    if isinstance(obj, list):
        if len(obj) == len(role_names) and all(isinstance(v, str) for v in obj):
            return {r: _value_text(v) for r, v in zip(role_names, obj, strict=True)}
        return None
    if not isinstance(obj, dict):
        return None
    by_key = {_norm(str(k)): v for k, v in obj.items()}
    out: dict[str, str] = {}
    for i, role in enumerate(role_names):
        for key in (_norm(role), f"agent{i}", str(i)):
            if key in by_key:
                out[role] = _value_text(by_key[key])
                break
    if not out and isinstance(obj.get("edits"), dict | list):  # {"edits": {...}} wrappers
        return _match(obj["edits"], role_names)
    return out or None


def _decoded_objects(text: str) -> list[Any]:
    """Every JSON object or array that decodes starting at some `{` or `[`, in order of position."""
    dec = json.JSONDecoder()
    found: list[Any] = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch in "{[":
            try:
                obj, end = dec.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            found.append(obj)
            i = end
        else:
            i += 1
    return found


def repair_truncated(text: str) -> list[Any]:
    """Objects cut off mid-way (token limit), closed again: strings, then brackets, dropping dangling members.

    Tries each `{` that opens an object left unclosed at the end of the text.
    """
    out: list[Any] = []
    starts = [m.start() for m in re.finditer(r"\{", text)][:32]
    for start in starts:
        s = text[start:]
        for _ in range(8):  # each round drops one trailing member that could not be completed
            closed = _close(s)
            if closed is None:
                break  # this `{` closes before the end: a complete object, not a truncated one
            try:
                out.append(json.loads(closed))
                break
            except ValueError:
                pass
            cut = s.rfind(",")
            if cut <= 0:
                break
            s = s[:cut]
        if out:
            break
    return out


def _close(s: str) -> str | None:
    stack: list[str] = []
    in_str = False
    esc = False
    for ch in s:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
            if not stack:
                return None  # complete object: raw_decode would have found it
    out = s
    if in_str:
        if esc:
            out = out[:-1]
        out += '"'
    out = out.rstrip()
    if out.endswith(","):
        out = out[:-1]
    if out.endswith(":"):
        out += " null"
    return out + "".join(reversed(stack))


def _scan_keys(text: str, role_names: list[str]) -> dict[str, str] | None:
    """Last resort: `"role": "value` per role, the value possibly unterminated."""
    out: dict[str, str] = {}
    for role in role_names:
        m = re.search(r'"' + re.escape(role) + r'"\s*:\s*"((?:[^"\\]|\\.)*)("?)', text, re.IGNORECASE | re.DOTALL)
        if not m:
            continue
        raw = m.group(1)
        try:
            out[role] = json.loads('"' + raw + '"').strip()
        except ValueError:
            out[role] = raw.replace("\\n", "\n").replace('\\"', '"').strip()
    return out or None


def parse_edits(text: str, role_names: list[str]) -> dict[str, str] | None:
    """Edits per role name from an expert reply, or None when no role's edits can be recovered."""
    if not text or not text.strip():
        return None
    candidates: list[Any] = []
    for m in _FENCE.finditer(text):
        candidates.extend(_decoded_objects(m.group(2)))
    candidates.extend(_decoded_objects(text))
    for obj in reversed(candidates):  # the last complete answer wins over examples quoted earlier
        got = _match(obj, role_names)
        if got:
            return got
    for repaired in repair_truncated(text):
        got = _match(repaired, role_names)
        if got:
            return got
    for span in re.findall(r"\{.*\}", text, re.DOTALL)[-1:] + re.findall(r"\{.*?\}", text, re.DOTALL)[::-1]:
        try:  # Python-literal dicts ('single quotes', True/None) from models imitating code
            got = _match(ast.literal_eval(span), role_names)
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            continue
        if got:
            return got
    return _scan_keys(text, role_names)
