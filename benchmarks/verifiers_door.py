"""What the verifiers door costs a step: the worker's requests of one training step of
configs/verifiers_reasoning_gym.yaml (8 rows x 4 single-turn episodes: start them, send the replies, get the
rubric's rewards), timed without a model, against the step time of a run of that config (its metrics.jsonl).

    python benchmarks/verifiers_door.py --run runs/verifiers_reasoning_gym [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from _common import ROOT

from comlrl.tasks.datasets import DatasetConfig
from comlrl.tasks.verifiers import VerifiersOptions, VerifiersTask
from comlrl.tree.contracts import JointTurn


def door_seconds(task: VerifiersTask, rows: list, per_row: int) -> float:
    """One step's worker traffic: every row's root episode and its siblings, each answered once."""
    t0 = time.perf_counter()
    turns = []
    for row in rows:
        state = task.initial_state(row)
        turns += [JointTurn(row, ("<answer>False</answer>",), state)] * per_row
    task.score_turns(turns)
    task.begin_rollout()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", required=True, help="a run of configs/verifiers_reasoning_gym.yaml (its metrics.jsonl)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--python", default=str(ROOT / ".venv-verifiers" / "bin" / "python"))
    args = ap.parse_args()
    t0 = time.perf_counter()
    task = VerifiersTask(VerifiersOptions(env="verifiers:ReasoningGymEnv", python=args.python,
                                          args={"gym": "ransom_note", "num_train_examples": 1000,
                                                "num_eval_examples": 32, "seed": 0}))
    start = time.perf_counter() - t0
    train, _ = task.load(DatasetConfig(eval_size=32))
    times = [door_seconds(task, train[8 * r:8 * r + 8], 4) for r in range(args.rounds)]
    task.close()
    steps = [json.loads(x) for x in (Path(args.run) / "metrics.jsonl").read_text().splitlines()]
    step_s = statistics.median(s["step_seconds"] for s in steps if "step_seconds" in s and "eval/problems" not in s)
    door = statistics.median(times)
    print(json.dumps({"worker_start_s": round(start, 2), "door_s_per_step": round(door, 4),
                      "run_step_s_median": round(step_s, 2), "door_share": round(door / step_s, 4),
                      "rounds": args.rounds, "python": sys.version.split()[0]}))


if __name__ == "__main__":
    main()
