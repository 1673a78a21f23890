"""The parser figure in docs/results.md, recomputed from the kept corpus of calls SmolLM2-135M really wrote.

`model_toolcalls.jsonl` holds every round with a `<tool_call>` block from two `scripts/generate_traces.py`
runs of the embedded model (the command is in docs/results.md); `benchmarks/toolcall_parse_rate.py`
classifies each call under strict `json.loads` and under our parser. This test recomputes the table,
asserts its numbers and that docs/results.md shows exactly this table.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).with_name("model_toolcalls.jsonl")


def rate_module():  # noqa: ANN201 - the benchmark script as a module
    spec = importlib.util.spec_from_file_location("toolcall_parse_rate", ROOT / "benchmarks" / "toolcall_parse_rate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parser_table_from_the_kept_corpus() -> None:
    rate = rate_module()
    entries = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert {e["backend"] for e in entries} == {"local:smollm2-135m-instruct"}
    table = rate.measure(entries)
    keys = ("calls", "strict", "recovered", "verbatim", "rewritten", "runnable", "error", "crash", "strict_changed")
    got = {label: tuple(t[k] for k in keys) for label, t in table.items()}
    assert got == EXPECTED
    assert rate.markdown(table) in (ROOT / "docs" / "results.md").read_text(encoding="utf-8")


# label: (calls, strict, recovered, verbatim, rewritten, code parses, structured error, crash, strict changed)
EXPECTED = {
    "open": (50, 0, 43, 43, 0, 39, 7, 0, 0),
    "json": (64, 6, 63, 63, 0, 11, 1, 0, 0),
    "all": (114, 6, 106, 106, 0, 50, 8, 0, 0),
}
