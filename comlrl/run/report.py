"""The lines a finished run prints last: what training changed, problem by problem, and how sure that is.

Every figure is a paired before/after over the same problems with the same sampling seed (eval.jsonl,
written by comlrl/run/evaluation.py), with its 95% interval (comlrl/run/paired.py: a paired t over problems; for the
sampled figures of the trained-on problems, over their chains with the problems fixed). Lines
whose interval excludes zero come first, so the report leads with what moved; the others say "within
noise". `write_report` also draws the plots and the last step's tree page from the run's own files, and
writes the final weights' model card (comlrl/run/model_card.py).
The line-making is pure (tested without a model).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from comlrl.console import plural
from comlrl.run.paired import METHOD, METHOD_FIXED, PairedDiff, record_difference

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
class Measure:
    """One per-problem score of eval.jsonl, as a report line names it."""

    field: str  # the record's field (or "outcome:<name>" for a task's outcome rate)
    label: str
    percent: bool  # a rate shown in points, or a reward shown as a number


MEASURES = (
    Measure("sampled_reward", "sampled reward", False),
    Measure("sampled_pass", "sampled pass@1", True),
    Measure("greedy_pass", "greedy pass@1", True),
    Measure("outcome:passed_with_helper", "passed with the helper (sampled)", True),
    Measure("outcome:turn_passed", "turns the checker accepted (sampled)", True),  # bfcl_multi_turn
    Measure("outcome:decoded", "replies BFCL's own decoder reads as calls (sampled)", True),  # bfcl tasks
    Measure("outcome:decoded_lenient", "replies the lenient decoder finds a call in (sampled; not accuracy)", True),
)
SET_LABELS = {"probe": "trained-on problems (probe)", "heldout": "held-out problems"}


def _value(record: dict[str, Any], field: str) -> float | None:
    if field.startswith("outcome:"):
        return (record.get("outcomes") or {}).get(field.split(":", 1)[1])
    value = record.get(field)
    return None if value is None else float(value)


def _by_set(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for r in records:
        out.setdefault(r["set"], {})[str(r["index"])] = r
    return out


def _format(d: PairedDiff, percent: bool) -> str:
    if not d.has_interval:
        if percent:
            return f"{100 * d.before:.1f}% -> {100 * d.after:.1f}%, {100 * d.delta:+.1f} points"
        return f"{d.before:.3f} -> {d.after:.3f}, {d.delta:+.3f}"
    if percent:
        return (f"{100 * d.before:.1f}% -> {100 * d.after:.1f}%, {100 * d.delta:+.1f} points "
                f"(95% CI {100 * d.lo:+.1f} to {100 * d.hi:+.1f})")
    return f"{d.before:.3f} -> {d.after:.3f}, {d.delta:+.3f} (95% CI {d.lo:+.3f} to {d.hi:+.3f})"


def paired_lines(before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]]) -> list[str]:
    """One line per set and measure present in both evaluations, those that moved first."""
    lines: list[tuple[int, str]] = []
    b_sets, a_sets = _by_set(before), _by_set(after)
    for name in ("probe", "heldout"):
        if name not in b_sets or name not in a_sets:
            continue
        samples = max((int(r.get("samples") or 0) for r in a_sets[name].values()), default=0)
        for m in MEASURES:
            d = record_difference(b_sets[name], a_sets[name], lambda r, f=m.field: _value(r, f), m.field,
                                  fixed=name == "probe")
            if d is None:
                continue
            if m.field.startswith("outcome:") and d.before == d.after == 0:
                continue  # a cooperation rate that never occurred says nothing
            kind = f"{plural(samples, 'sample')} each" if "sampled" in m.label and samples else "1 greedy chain each"
            text = (f"{SET_LABELS[name]}, {m.label} ({plural(d.n, 'problem')}, {kind}): {_format(d, m.percent)}: "
                    f"{d.verdict}")
            lines.append((0 if d.verdict != "within noise" else 1, text))
        lines += _category_pairs(name, b_sets[name], a_sets[name], samples)
    lines.sort(key=lambda x: x[0])  # stable: what moved leads, in the order above
    return [text for _, text in lines]


def _categories(records: dict[str, dict[str, Any]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for key, r in records.items():
        if r.get("category"):
            out.setdefault(r["category"], set()).add(key)
    return out


def _category_pairs(name: str, before: dict[str, dict[str, Any]], after: dict[str, dict[str, Any]],
                    samples: int) -> list[tuple[int, str]]:
    """The pass@1 lines of each category of a set that holds several (a benchmark's per-category figures)."""
    categories = _categories(after)
    if len(categories) < 2:
        return []
    out = []
    for category, keys in categories.items():
        own = {k: v for k, v in before.items() if k in keys}
        for m in MEASURES[1:3]:
            d = record_difference(own, after, lambda r, f=m.field: _value(r, f), m.field, fixed=name == "probe")
            if d is None:
                continue
            kind = f"{plural(samples, 'sample')} each" if "sampled" in m.label and samples else "1 greedy chain each"
            text = (f"{SET_LABELS[name]}, {category}, {m.label} ({d.n} problems, {kind}): {_format(d, True)}: "
                    f"{d.verdict}")
            out.append((0 if d.verdict != "within noise" else 1, text))
    return out


def category_lines(records: Sequence[dict[str, Any]]) -> list[str]:
    """One evaluation's accuracy per category of each set (BFCL's per-category accuracy: entries the
    checker accepted over entries; greedy, and the mean over the sampled chains); empty without categories."""
    lines = []
    for name, by_key in _by_set(records).items():
        for category, keys in _categories(by_key).items():
            own = [by_key[k] for k in sorted(keys, key=int)]
            bits = []
            greedy = [float(r["greedy_pass"]) for r in own if r.get("greedy_pass") is not None]
            if greedy:
                bits.append(f"greedy {100 * sum(greedy) / len(greedy):.1f}% ({int(sum(greedy))}/{len(greedy)})")
            sampled = [float(r["sampled_pass"]) for r in own if r.get("sampled_pass") is not None]
            if sampled:
                k = max(int(r.get("samples") or 0) for r in own)
                bits.append(f"sampled {100 * sum(sampled) / len(sampled):.1f}% ({plural(k, 'sample')} each)")
            if bits:
                lines.append(f"{SET_LABELS.get(name, name)}, {category}: accuracy {', '.join(bits)} "
                             f"of {len(own)} entries")
    return lines


def summary_lines(records: Sequence[dict[str, Any]]) -> list[str]:
    """Before/after lines of a run's eval.jsonl (first vs last evaluation; empty with fewer than two)."""
    steps = sorted({int(r["step"]) for r in records})
    if len(steps) < 2:
        return []
    first = [r for r in records if r["step"] == steps[0]]
    last = [r for r in records if r["step"] == steps[-1]]
    lines = paired_lines(first, last)
    if lines:
        lines.append(f"(before = the untrained policy, after = step {steps[-1]}; the same problems and sampling "
                     f"seed; intervals: 95%, {METHOD} (trained-on sampled figures: {METHOD_FIXED}))")
    return lines


def write_report(run_dir: str | Path, last_step: int) -> list[str]:
    """Draw the plots and the last step's tree page into the run folder, write final/README.md; return the
    lines to print."""
    from comlrl.run.model_card import write_model_card
    from comlrl.run.outputs import read_run_lines
    from comlrl.viz import VizError
    from comlrl.viz.metrics_plot import load_runs, plot_runs
    from comlrl.viz.tree_html import render

    out = Path(run_dir)
    lines = summary_lines(read_run_lines(out, "eval"))
    try:
        reward_png = plot_runs(load_runs([out]), out / "plots")[1]
        lines.append(f"reward plot: {reward_png}")
    except Exception as exc:  # noqa: BLE001 - the run's outputs are written: a plot never fails a finished run
        lines.append(f"reward plot: not drawn ({type(exc).__name__}: {exc})")
    trees = out / "trees.jsonl"
    if trees.is_file() and trees.stat().st_size == 0:  # steps on Atropos groups or a pairs file grow no trees
        lines.append("tree view: none (the steps trained on Atropos groups or a pairs file, not on trees)")
    else:
        try:
            page = out / f"tree_step{last_step}.html"
            page.write_text(render(out, last_step), encoding="utf-8")
            lines.append(f"tree view (open in a browser): {page}")
        except (VizError, OSError) as exc:
            lines.append(f"tree view: not written ({exc})")
    try:
        write_model_card(out, last_step, summary_lines(read_run_lines(out, "eval")))
    except Exception as exc:  # noqa: BLE001 - as the plots: the weights are saved, a card never fails the run
        lines.append(f"model card: not written ({type(exc).__name__}: {exc})")
    return lines
