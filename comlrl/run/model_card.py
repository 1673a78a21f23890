"""final/README.md: the model card of a finished run's agents, from the run's own files.

`AgentPolicies.save` writes a card that knows only the weights (also in every checkpoint); at the end of the
run the report (comlrl/run/report.py, `write_report`) replaces final/README.md with one that adds what the
run did: the task and dataset, the algorithm and its shape, the training steps (config.yaml), the held-out
and trained-on figures of the first and last evaluation (metrics.jsonl) and the paired before/after lines
the run printed (eval.jsonl).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from comlrl.console import plural
from comlrl.policy.model_card import card

# the evaluation figures a card shows (metrics.jsonl key, label), where the run logged them
FIGURES = (("eval/pass_at_1", "held-out greedy pass@1"), ("eval/sampled/pass_at_1", "held-out sampled pass@1"),
           ("eval/sampled/reward_mean", "held-out sampled reward"),
           ("eval/probe/sampled/pass_at_1", "trained-on (probe) sampled pass@1"),
           ("eval/probe/sampled/reward_mean", "trained-on (probe) sampled reward"))


def training_lines(config: Any, steps: int) -> list[str]:
    """What the run trained on and how (config.yaml's task, dataset, algorithm and tree shape)."""
    m = config.magrpo
    return ["## Training", "", f"- task: `{config.task.name}` (dataset `{config.dataset.name}`)",
            f"- algorithm: `{config.algorithm.name}`, {plural(m.num_agents, 'agent')}, {plural(m.num_turns, 'turn')}, "
            f"{plural(m.num_generations, 'completion')} per agent and node, joint actions `{m.joint_mode}`",
            f"- training steps: {steps}", "- every other setting: the run's config.yaml"]


def _finite(record: dict[str, float], key: str) -> bool:
    return math.isfinite(record.get(key, math.nan))


def evaluation_table(steps: dict[int, dict[str, float]]) -> list[str]:
    """The figures of FIGURES at the first and the last evaluation (one column when there was one); [] when
    the run logged none."""
    evaluated = sorted(s for s, rec in steps.items() if any(_finite(rec, k) for k, _ in FIGURES))
    if not evaluated:
        return []
    cols = list(dict.fromkeys((evaluated[0], evaluated[-1])))
    rows = [(key, label) for key, label in FIGURES if _finite(steps[cols[-1]], key)]
    head = [f"step {s}{' (untrained)' if s == 0 else ''}" for s in cols]
    lines = ["| measure | " + " | ".join(head) + " |", "|---|" + "---:|" * len(cols)]
    for key, label in rows:
        cells = [f"{steps[s][key]:.3f}" if _finite(steps[s], key) else "–" for s in cols]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def evaluation_lines(run_dir: Path, paired: Sequence[str] = ()) -> list[str]:
    """The card's evaluation: the figures table and the paired before/after lines (`paired`: as the run printed
    them, `comlrl.run.report.summary_lines` of eval.jsonl), or a line saying none."""
    from comlrl.viz import VizError
    from comlrl.viz.metrics_plot import load_metrics

    try:
        table = evaluation_table(load_metrics(run_dir))
    except VizError:
        table = []
    if not table and not paired:
        return ["## Evaluation", "", "The run recorded no evaluation (training.eval_size=0, or it stopped before "
                                     "one)."]
    lines = ["## Evaluation", "", *table]
    if paired:
        lines += ["", "Paired before/after, as the run printed it:", "", *(f"- {line}" for line in paired)]
    return lines


def write_model_card(run_dir: str | Path, steps: int, paired: Sequence[str] = ()) -> Path | None:
    """Write final/README.md of a run whose final weights are saved (else nothing: None); returns its path.
    `paired`: the paired before/after lines the run printed (the report passes them)."""
    out = Path(run_dir)
    weights = out / "final"
    if not (weights / "policies.json").is_file():
        return None
    from comlrl.run.outputs import read_run_config

    meta = json.loads((weights / "policies.json").read_text())
    about = [*training_lines(read_run_config(out), steps), "", *evaluation_lines(out, paired)]
    path = weights / "README.md"
    path.write_text(card(meta["mode"], meta["models"], meta["paths"], about))
    return path
