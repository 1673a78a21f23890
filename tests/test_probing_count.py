"""Attribute probing (`getattr(` / `hasattr(`) in comlrl stays rare: an object of ours declares what it has (a
Protocol or ABC method, a dataclass field, a class to check with isinstance), so probing is left for foreign
objects (SDK responses, transformers/peft models, users' callbacks, a registered section found by name).

Counts lines, as `grep -rn "getattr(\\|hasattr(" comlrl/ --include=*.py | wc -l` does.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROBE = re.compile(r"getattr\(|hasattr\(")
LIMIT = 30


def probing_lines() -> list[str]:
    out = []
    for path in sorted((ROOT / "comlrl").rglob("*.py")):
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if PROBE.search(line):
                out.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    return out


def test_the_count_sees_probing() -> None:
    assert PROBE.search("x = getattr(obj, 'name', None)") and PROBE.search("if hasattr(obj, 'name'):")
    assert not PROBE.search("obj.name")


def test_comlrl_probes_attributes_at_most_limit_times() -> None:
    found = probing_lines()
    assert len(found) <= LIMIT, (f"{len(found)} lines of comlrl probe attributes (at most {LIMIT}); declare what "
                                 "the object has instead:\n" + "\n".join(found))
