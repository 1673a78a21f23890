"""`scripts/train.py` with a text-dependent bonus added to the real code reward.

The tiny random model cannot write code, so every real reward would be equal and no advantage would
exist; the bonus (distinct characters / 100) gives siblings different rewards so the trainer's update
path is exercised. The real reward and sandbox still run underneath (see test_embedded_* for the real
model). Usable under `accelerate launch`.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from comlrl.tasks.code.common import CodeTask  # noqa: E402

_real_score = CodeTask.score


def _score_with_bonus(self, items):
    rewards = _real_score(self, items)
    return [
        dataclasses.replace(r, total=r.total + len(set("".join(texts))) / 100.0)
        for r, (_, texts) in zip(rewards, items, strict=True)
    ]


CodeTask.score = _score_with_bonus

if __name__ == "__main__":
    import train

    sys.exit(train.main(sys.argv[1:]))
