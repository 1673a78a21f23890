"""The lines a finished run prints last: held-out pass@1 before and after with their intervals, the
cooperation rates, and where the reward curve and the tree view are.

A reader of a 10-minute run should see in four lines whether training helped and how sure that is, not
dig through metrics.jsonl. The interval math is pure (tested without a model); `write_report` draws
the plot and the tree page from the run's own files.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

Z95 = 1.959963984540054  # two-sided 95% normal quantile


def wilson_interval(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """95% Wilson score interval of a binomial proportion (sound at 0/n and n/n, unlike p +- z*se)."""
    if n <= 0:
        raise ValueError(f"wilson_interval needs n > 0, got {n}")
    if not 0 <= successes <= n:
        raise ValueError(f"wilson_interval: successes must be in 0..{n}, got {successes}")
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class EvalPoint:
    """One held-out evaluation: greedy pass@1 after the last turn over `problems` problems."""

    step: int
    pass_at_1: float
    problems: int
    reward: float
    helper_called: float | None = None

    @property
    def solved(self) -> int:
        return round(self.pass_at_1 * self.problems)

    def interval(self) -> tuple[float, float]:
        return wilson_interval(self.solved, self.problems)


def eval_points(steps: dict[int, dict[str, float]]) -> list[EvalPoint]:
    """The evaluations of a run (metrics.jsonl records merged per step), in step order."""
    out = []
    for step in sorted(steps):
        rec = steps[step]
        if "eval/pass_at_1" in rec and rec.get("eval/problems"):
            called = rec.get("eval/helper_called")
            out.append(EvalPoint(step, float(rec["eval/pass_at_1"]), int(rec["eval/problems"]),
                                 float(rec.get("eval/reward_mean", math.nan)),
                                 None if called is None else float(called)))
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def verdict(before: EvalPoint, after: EvalPoint) -> str:
    """One line: what changed on the held-out set, and whether it is beyond the binomial noise."""
    delta = after.pass_at_1 - before.pass_at_1
    lo_a, hi_a = after.interval()
    lo_b, hi_b = before.interval()
    moved = f"{100 * delta:+.1f} points ({before.solved} -> {after.solved} of {after.problems} problems)"
    if delta > 0:
        sure = ("beyond the 95% interval of the start" if after.pass_at_1 > hi_b else
                "within the 95% interval of the start: more steps or problems would tell")
        return f"improved: held-out pass@1 {moved}, {sure}"
    if delta < 0:
        sure = "below the start's 95% interval" if after.pass_at_1 < lo_b else "within noise"
        return f"not improved: held-out pass@1 {moved}, {sure}"
    reward = after.reward - before.reward
    return f"no change in held-out pass@1 ({after.solved} of {after.problems}); held-out reward {reward:+.3f}"


def summary_lines(steps: dict[int, dict[str, float]]) -> list[str]:
    """Before/after lines for a run's merged metrics (empty when it was not evaluated twice)."""
    points = eval_points(steps)
    if len(points) < 2:
        return []
    before, after = points[0], points[-1]
    lines = []
    for label, p in (("before", before), (f"after {after.step} steps", after)):
        lo, hi = p.interval()
        line = (f"held-out pass@1 {label}: {_pct(p.pass_at_1)} ({p.solved}/{p.problems}, 95% CI "
                f"{_pct(lo)}-{_pct(hi)}), reward {p.reward:.3f}")
        if p.helper_called is not None:
            line += f", main calls the helper in {_pct(p.helper_called)}"
        lines.append(line)
    lines.append(verdict(before, after))
    return lines


def write_report(run_dir: str | Path, last_step: int) -> list[str]:
    """Draw the reward curve and the last step's tree page into the run folder; return the lines to print."""
    from comlrl.viz import VizError
    from comlrl.viz.metrics_plot import load_runs, plot_runs
    from comlrl.viz.tree_html import render

    out = Path(run_dir)
    runs = load_runs([out])
    lines = summary_lines(runs[0].steps)
    try:
        reward_png = plot_runs(runs, out / "plots")[1]
        lines.append(f"reward curve: {reward_png}")
    except (VizError, ImportError, OSError) as exc:  # a missing plotting backend never fails a finished run
        lines.append(f"reward curve: not drawn ({exc})")
    try:
        page = out / f"tree_step{last_step}.html"
        page.write_text(render(out, last_step), encoding="utf-8")
        lines.append(f"tree view (open in a browser): {page}")
    except (VizError, OSError) as exc:
        lines.append(f"tree view: not written ({exc})")
    return lines
