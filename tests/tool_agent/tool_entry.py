"""`scripts/train.py` for the tool-agent runs of the tests.

* Prints the stop strings `trainer.build` wired into the policies (the test checks them).
* With `TOOL_AGENT_BONUS=1`, adds a text-dependent bonus (distinct characters / 100) to the real reward:
  the tiny random model never calls a tool, so every real reward would be equal and no advantage would
  exist; the bonus exercises the update path while the real scoring, sandbox and tool rounds run beneath.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from comlrl.run import trainer  # noqa: E402
from comlrl.tasks.tool_agent import ToolAgentTask  # noqa: E402

_build = trainer.build


def _build_with_stops(cfg: Any, *args: Any, **kwargs: Any) -> Any:
    comp = _build(cfg, *args, **kwargs)
    print(f"stop_strings={list(comp.policies.stop_strings)}", flush=True)
    return comp


trainer.build = _build_with_stops

if os.environ.get("TOOL_AGENT_BONUS") == "1":
    _score = ToolAgentTask.score

    def _score_with_bonus(self: ToolAgentTask, items: list) -> list:
        rewards = _score(self, items)
        return [dataclasses.replace(r, total=r.total + len(set(texts[0])) / 100.0)
                for r, (_, texts) in zip(rewards, items, strict=True)]

    ToolAgentTask.score = _score_with_bonus  # type: ignore[method-assign]

if __name__ == "__main__":
    import train

    sys.exit(train.main(sys.argv[1:]))
