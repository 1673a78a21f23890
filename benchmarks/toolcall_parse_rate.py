"""How often tool calls that a model really wrote parse: strict `json.loads` vs the tool agent's call parser.

    # build the corpus from generate_traces output (default record format), one label per file
    python benchmarks/toolcall_parse_rate.py --build open=/tmp/smol_open.jsonl json=/tmp/smol_json.jsonl \
        --corpus tests/tool_agent/model_toolcalls.jsonl
    # recompute the table from the kept corpus
    python benchmarks/toolcall_parse_rate.py --corpus tests/tool_agent/model_toolcalls.jsonl

Every `<tool_call>` block of every round is one call. Per call:

* strict: `json.loads` of the block gives an object with a string `name` and an object `arguments`;
* our parser (`parse_tool_call`): a call or a structured error (it never raises; a crash is counted);
* a recovered call is **verbatim** when its code argument is a contiguous span of what the model wrote,
  either as written or after decoding the JSON escapes it used (checked here independently of the
  parser: nothing was invented, reordered or re-joined), else **rewritten**; and **runnable** when that
  code parses as Python. A strict call must come back identical to what `json.loads` gave.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from comlrl.tasks.tool_agent.call_blocks import find_tool_calls  # noqa: E402
from comlrl.tasks.tool_agent.call_format import ToolCall  # noqa: E402
from comlrl.tasks.tool_agent.call_parser import parse_tool_call  # noqa: E402

_JSON_ESCAPE = re.compile(r'\\(["\\/bfnrt])')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def build_corpus(sources: Sequence[tuple[str, Path]]) -> list[dict[str, Any]]:
    """One entry per round that holds a `<tool_call>` block: label, task, round and the completion text."""
    out = []
    for label, path in sources:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            record = json.loads(line)
            for i, rnd in enumerate(record.get("rounds") or []):
                text = rnd.get("completion") or ""
                if find_tool_calls(text):
                    out.append({"id": f"{label}/{record['task_id']}/r{i}", "label": label,
                                "task_id": record["task_id"], "round": i, "backend": record.get("backend", ""),
                                "text": text})
    return out


def strict_call(raw: str) -> dict[str, Any] | None:
    """What plain `json.loads` makes of the block, when it is a call."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    ok = isinstance(obj, dict) and isinstance(obj.get("name"), str) and isinstance(obj.get("arguments"), dict)
    return obj if ok else None


def verbatim(code: str, raw: str) -> bool:
    """The code is a contiguous span of the block, as written or with its JSON escapes decoded."""
    decoded = _JSON_ESCAPE.sub(lambda m: _ESCAPES[m.group(1)], raw)
    return bool(code.strip()) and (code in raw or code in decoded)


def runnable(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def classify(raw: str) -> dict[str, Any]:
    """One call's outcome under both readers."""
    strict = strict_call(raw)
    try:
        parsed = parse_tool_call(raw)
    except Exception as exc:  # noqa: BLE001 - counted: the parser promises never to raise
        return {"strict": strict is not None, "outcome": "crash", "detail": type(exc).__name__}
    if not isinstance(parsed, ToolCall):
        return {"strict": strict is not None, "outcome": "error", "detail": parsed.reason}
    row = {"strict": strict is not None, "outcome": "recovered", "detail": parsed.repair,
           "same_as_strict": strict is None or (parsed.name, parsed.arguments) == (strict["name"], strict["arguments"])}
    code = parsed.code
    row["verbatim"] = code is not None and verbatim(code, raw)
    row["runnable"] = code is not None and runnable(code)
    return row


def measure(entries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Counts per label and in total (see the module docstring for the columns)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        for span in find_tool_calls(e["text"]):
            rows.setdefault(e["label"], []).append(classify(span.raw))
    rows["all"] = [r for label in list(rows) for r in rows[label]]
    table = {}
    for label, rs in rows.items():
        rec = [r for r in rs if r["outcome"] == "recovered"]
        table[label] = {
            "calls": len(rs),
            "strict": sum(r["strict"] for r in rs),
            "recovered": len(rec),
            "verbatim": sum(r["verbatim"] for r in rec),
            "rewritten": sum(not r["verbatim"] for r in rec),
            "runnable": sum(r["runnable"] for r in rec),
            "error": sum(r["outcome"] == "error" for r in rs),
            "crash": sum(r["outcome"] == "crash" for r in rs),
            "strict_changed": sum(not r["same_as_strict"] for r in rec),
            "repairs": dict(Counter(r["detail"] for r in rec).most_common()),
            "errors": dict(Counter(r["detail"] for r in rs if r["outcome"] == "error").most_common()),
        }
    return table


def pct(n: int, d: int) -> str:
    return f"{100 * n / d:.1f}%" if d else "-"


def markdown(table: dict[str, Any]) -> str:
    lines = ["| calls | n | strict `json.loads` | our parser: recovered | verbatim | rewritten | code parses "
             "| structured error | crash |", "|---|---|---|---|---|---|---|---|---|"]
    for label, t in table.items():
        n = t["calls"]
        lines.append(f"| {label} | {n} | {t['strict']} ({pct(t['strict'], n)}) | {t['recovered']} "
                     f"({pct(t['recovered'], n)}) | {t['verbatim']} | {t['rewritten']} | {t['runnable']} | "
                     f"{t['error']} ({pct(t['error'], n)}) | {t['crash']} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", required=True, help="the corpus JSONL (written by --build, else read)")
    ap.add_argument("--build", nargs="+", metavar="LABEL=TRACES", help="generate_traces outputs to build it from")
    ap.add_argument("--json", default=None, help="also write the table as JSON here")
    args = ap.parse_args(argv)
    corpus = Path(args.corpus)
    if args.build:
        sources = [(s.partition("=")[0], Path(s.partition("=")[2])) for s in args.build]
        entries = build_corpus(sources)
        corpus.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries), encoding="utf-8")
    entries = [json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines() if line.strip()]
    table = measure(entries)
    print(markdown(table))
    for label, t in table.items():
        print(f"{label}: repairs {t['repairs']}; errors {t['errors']}; strict calls changed {t['strict_changed']}")
    if args.json:
        Path(args.json).write_text(json.dumps(table, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
