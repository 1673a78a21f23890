"""Refresh the example prompts in docs/feedback.md from the golden files (so the docs show real output).

    /work/venv/bin/python tests/feedback/fb_update_docs.py      # rewrite docs/feedback.md in place

A block is marked in the markdown as

    <!-- example: <golden file> [agent=<i>] [part=user|feedback|all] -->
    ````text
    ...
    ````

(four backticks, so the prompts' own ``` fences nest)
and test_feedback_docs.py fails when a block no longer matches its golden file.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
DOC = HERE.parents[1] / "docs" / "feedback.md"
BLOCK = re.compile(r"(<!-- example: (?P<spec>[^>]*?) -->\n````text\n)(?P<body>.*?)(\n?````)", re.DOTALL)


def _agents(text: str) -> list[dict[str, str]]:
    """Golden text -> per agent {role: content}."""
    agents: list[dict[str, str]] = []
    for chunk in re.split(r"^===== agent \d+ \([^)]*\) =====\n", text, flags=re.MULTILINE)[1:]:
        msgs: dict[str, str] = {}
        for m in re.finditer(r"^----- (\w+) -----\n(.*?)(?=^----- \w+ -----\n|\Z)", chunk, re.DOTALL | re.MULTILINE):
            msgs[m.group(1)] = m.group(2).rstrip("\n")
        agents.append(msgs)
    return agents


def example(spec: str) -> str:
    parts = spec.split()
    text = (GOLDEN / parts[0]).read_text(encoding="utf-8")
    opts = dict(p.split("=", 1) for p in parts[1:])
    part = opts.get("part", "all")
    if "agent" not in opts:
        return text.rstrip("\n")
    msgs = _agents(text)[int(opts["agent"])]
    if part == "user":
        return msgs["user"]
    if part == "feedback":
        user = msgs["user"]
        return user[user.index("Feedback:"):]
    return "\n".join(f"----- {k} -----\n{v}" for k, v in msgs.items())


def refresh(doc: str) -> str:
    return BLOCK.sub(lambda m: m.group(1) + example(m.group("spec")) + "\n````", doc)


def main() -> int:
    doc = DOC.read_text(encoding="utf-8")
    new = refresh(doc)
    if new != doc:
        DOC.write_text(new, encoding="utf-8")
        print(f"updated {DOC}")
    else:
        print(f"{DOC} is up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
