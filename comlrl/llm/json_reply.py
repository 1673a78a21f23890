"""Robust extraction of one string per name (per-agent edits) from a JSON reply, and its JSON schema.

Models wrap JSON in fences, add prose after it, stop mid-string at the token limit, or answer with
near-JSON (unescaped quotes in code, single quotes, Python literals). We try, in order: every decodable
`{...}` in fenced blocks and in the text (the last answer wins over quoted examples), then what the
`json-repair` package recovers from each fenced block and from the whole text, and finally a per-key scan
for `"role": "..."`. Keys are matched to role names case-insensitively; `agent0`/`0`-style keys and a JSON
list in agent order are accepted too. Where the provider offers structured outputs, `edits_schema` asks
for exactly these keys (tests/feedback/expert_replies.jsonl is the corpus of broken replies this must
recover at least as well as json-repair alone).
"""

from __future__ import annotations

import json
import re
from typing import Any

import json_repair

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


def _repaired(text: str) -> list[Any]:
    """What `json_repair` recovers from broken JSON (unescaped quotes, truncation, single quotes, comments,
    Python literals...): every value it finds, in order of position."""
    try:
        value = json_repair.loads(text)
    except (ValueError, RecursionError):
        return []
    if isinstance(value, list) and any(isinstance(v, dict) for v in value):
        return value  # several top-level values
    return [value]


def _scan_keys(text: str, role_names: list[str]) -> dict[str, str]:
    """`"role": "value` per role (its last occurrence), the value running to the quote that closes the
    object (or the text, or its fence) or precedes the next key. Unlike a JSON parser this knows the keys,
    so a code value with unescaped quotes (`"print("hi")"`, `"s.split(",")"`) keeps them. Unterminated
    values run to the end of the text, less a dangling `", "partial-key`."""
    keys = "|".join(re.escape(r) for r in role_names)
    # a role's key after an optional comma, or any other key after a comma
    next_key = re.compile(r'"\s*(?:,?\s*"(?:' + keys + r')"|,\s*"[^"\n]*")\s*:', re.IGNORECASE)
    out: dict[str, str] = {}
    for role in role_names:
        starts = list(re.finditer(r'"' + re.escape(role) + r'"\s*:\s*"', text, re.IGNORECASE))
        if not starts:
            continue
        rest = text[starts[-1].end():]
        end = next_key.search(rest)
        closes = list(re.finditer(r'"\s*(?:[}\]]|```|$)', rest))
        if end is not None:
            raw = rest[: end.start()]
        elif closes:
            raw = rest[: closes[-1].start()]
        else:
            dangling = re.search(r'"\s*,\s*"?[^"]*$', rest)
            raw = rest[: dangling.start()] if dangling else rest
        try:
            out[role] = json.loads('"' + raw + '"').strip()
        except ValueError:
            out[role] = raw.replace("\\n", "\n").replace('\\"', '"').strip()
    return out


def edits_schema(role_names: list[str]) -> dict[str, Any]:
    """The JSON schema of an edits reply: one string per role, nothing else (strict structured outputs)."""
    return {"type": "object", "properties": {r: {"type": "string"} for r in role_names},
            "required": list(role_names), "additionalProperties": False}


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
    repaired: dict[str, str] = {}
    for block in [m.group(2) for m in _FENCE.finditer(text)] + [text]:
        for obj in reversed(_repaired(block)):
            repaired = _match(obj, role_names) or {}
            if repaired:
                break
        if repaired:
            break
    # json-repair fixes what a key scan cannot (single quotes, lists, bare keys); the scan keeps unescaped
    # quotes that json-repair reads as the end of a value, so where both found a role the scan wins
    return {**repaired, **_scan_keys(text, role_names)} or None
