"""PNG plots and a markdown summary of one or several runs' `metrics.jsonl`.

Each run is one line colour in every plot, named by its directory (the shortest path suffix that tells
the runs apart). Missing keys and NaN (stored as null) leave gaps instead of failing.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from comlrl.viz import VizError

PLOTS = ("overview.png", "reward.png", "pruned.png", "loss.png", "eval_pass_at_1.png", "reward_per_turn.png",
         "cooperation.png", "signal.png")
SMOOTH = 3  # steps in the running mean drawn over noisy per-step curves
COOPERATION = ("helper_called", "helper_used", "passed_with_helper")  # a code task's helper-call rates
SIGNAL = ("signal_share",)  # what the step's sampling bought (run/metrics.py: DrawSums)
_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
_DASHES = ("-", "--", "-.", ":")
_TURN = re.compile(r"^turn_(\d+)/reward_mean$")


@dataclass
class Run:
    """One run's metrics: step -> {key: float or nan} (records of the same step merged, later wins)."""

    name: str
    path: Path
    steps: dict[int, dict[str, float]]

    def series(self, key: str, train_only: bool = False) -> tuple[list[int], list[float]]:
        """Steps that have `key` (nan where it was NaN/null) in step order."""
        xs, ys = [], []
        for step in sorted(self.steps):
            if train_only and step == 0:
                continue
            if key in self.steps[step]:
                xs.append(step)
                ys.append(self.steps[step][key])
        return xs, ys

    def final(self, key: str) -> float:
        """The value at the last training step (nan when absent there)."""
        train = [s for s in self.steps if s > 0]
        return self.steps[max(train)].get(key, math.nan) if train else math.nan

    def turns(self) -> list[int]:
        """Turns that have a `turn_<t>/reward_mean` anywhere in the run."""
        return sorted({int(m.group(1)) for rec in self.steps.values() for k in rec if (m := _TURN.match(k))})


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if value is None:
        return math.nan
    if isinstance(value, int | float):
        return float(value)
    return None


def load_metrics(run_dir: str | Path) -> dict[int, dict[str, float]]:
    """Parse RUN_DIR/metrics.jsonl; VizError for a missing directory/file or one without records."""
    run = Path(run_dir)
    if not run.is_dir():
        raise VizError(f"run directory not found: {run}")
    path = run / "metrics.jsonl"
    if not path.is_file():
        raise VizError(f"no metrics.jsonl in {run}")
    steps: dict[int, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut by a crash
        if not isinstance(rec, dict) or not isinstance(rec.get("step"), int):
            continue
        merged = steps.setdefault(rec["step"], {})
        for k, v in rec.items():
            num = _number(v)
            if k != "step" and num is not None:
                merged[k] = num
    if not steps:
        raise VizError(f"{path} holds no metrics records")
    return steps


def run_names(paths: list[Path]) -> list[str]:
    """Shortest trailing path parts that tell the runs apart (`a/out`, `b/out`; `align`, `cross`)."""
    parts = [p.resolve().parts for p in paths]
    for n in range(1, max(len(p) for p in parts) + 1):
        names = ["/".join(p[-n:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [str(p) for p in paths]  # the same directory given twice


def default_out_dir(run_dirs: list[str | Path]) -> Path:
    """`plots/<run names>` in the working directory (several joined by `_vs_`): a folder of the command's own,
    so re-plotting a run never overwrites the `plots/` the run drew into its folder at its end."""
    names = run_names([Path(d) for d in run_dirs])
    return Path("plots") / "_vs_".join(n.strip("/").replace("/", "-") or "run" for n in names)


def load_runs(run_dirs: list[str | Path]) -> list[Run]:
    """Load every run (VizError on the first bad one), named by `run_names`."""
    paths = [Path(d) for d in run_dirs]
    data = [load_metrics(p) for p in paths]
    return [Run(n, p, d) for n, p, d in zip(run_names(paths), paths, data, strict=True)]


def _fmt(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}f}" if math.isfinite(value) else "n/a"


def eval_pass_cell(run: Run) -> str:
    """The table's held-out pass@1, first → last evaluation: greedy, else sampled and labelled so (a run that
    evaluated sampled chains only logs no greedy figure, and `n/a` would hide what it measured)."""
    for key, label in (("eval/pass_at_1", ""), ("eval/sampled/pass_at_1", " (sampled)")):
        ev = [v for v in run.series(key)[1] if math.isfinite(v)]
        if ev:
            return (_fmt(ev[0]) if len(ev) == 1 else f"{_fmt(ev[0])} → {_fmt(ev[-1])}") + label
    return "n/a"


def summary_table(runs: list[Run]) -> str:
    """Markdown table of each run's final figures (last training step) and wall time."""
    turns = sorted({t for r in runs for t in r.turns()})
    head = (["run", "steps", "reward_mean"] + [f"turn_{t} reward" for t in turns]
            + ["pruned_frac", "loss", "eval pass@1 (first → last)", "wall time (s)"])
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    for r in runs:
        train = [s for s in r.steps if s > 0]
        evtxt = eval_pass_cell(r)
        _, secs = r.series("step_seconds", train_only=True)
        secs = [v for v in secs if math.isfinite(v)]
        row = ([r.name, str(max(train)) if train else "0", _fmt(r.final("reward_mean"))]
               + [_fmt(r.final(f"turn_{t}/reward_mean")) for t in turns]
               + [_fmt(r.final("pruned_frac")), _fmt(r.final("loss"), 4), evtxt,
                  _fmt(sum(secs), 1) if secs else "n/a"])
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise VizError("matplotlib is not installed (pip install matplotlib)") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def running_mean(ys: list[float], width: int) -> list[float]:
    """Mean of the last `width` finite values at each point (nan until one exists)."""
    out = []
    for i in range(len(ys)):
        window = [y for y in ys[max(0, i - width + 1) : i + 1] if math.isfinite(y)]
        out.append(sum(window) / len(window) if window else math.nan)
    return out


def running_band(ys: list[float], width: int) -> list[tuple[float, float]]:
    """Running mean +- one standard error of the last `width` finite values (nan where under two)."""
    out = []
    for i in range(len(ys)):
        window = [y for y in ys[max(0, i - width + 1) : i + 1] if math.isfinite(y)]
        if len(window) < 2:
            out.append((math.nan, math.nan))
            continue
        mean = sum(window) / len(window)
        se = math.sqrt(sum((y - mean) ** 2 for y in window) / (len(window) - 1) / len(window))
        out.append((mean - se, mean + se))
    return out


def _rate(key: str) -> bool:
    return key.endswith(("pruned_frac", "pass_at_1", "helper_called", "helper_used", "passed_with_helper"))


def _paired_bars(ax: Any, run: Run, key: str, xs: list[int], ys: list[float], colour: Any) -> None:
    """At each evaluation after the first, the paired 95% interval of the change since the first one,
    drawn around the first value shifted by the change (where `<key>_delta_lo/_hi` were logged)."""
    first = next((y for y in ys if math.isfinite(y)), math.nan)
    for x, y in zip(xs, ys, strict=True):
        rec = run.steps[x]
        lo, hi = rec.get(f"{key}_delta_lo"), rec.get(f"{key}_delta_hi")
        if x == xs[0] or lo is None or hi is None or not all(map(math.isfinite, (first, y, lo, hi))):
            continue
        # a zero-width interval leaves -1e-17 of rounding, which matplotlib refuses as a negative error bar
        below, above = max(0.0, y - (first + lo)), max(0.0, (first + hi) - y)
        ax.errorbar([x], [y], yerr=[[below], [above]], color=colour, capsize=4, linewidth=1.2, alpha=0.9)


def _draw(ax: Any, runs: list[Run], key: str, title: str, colours: list[Any], legend: bool = False,
          smooth: bool = False, zero_line: bool = False, band: bool = False) -> None:
    """One panel: `key` over steps for every run; eval keys include step 0, rates get a 0..1 axis.
    `smooth` draws the points faintly under their running mean (per-step values are noisy), `band` adds
    +- one standard error of that mean; evaluation keys get their paired interval to step 0 as a bar."""
    paired = key.startswith("eval/")
    from matplotlib.ticker import MaxNLocator

    train_only = not key.startswith("eval/")
    ylim = (-0.03, 1.03) if _rate(key) else None
    drawn = False
    if zero_line:
        ax.axhline(0.0, color="black", linewidth=0.8, alpha=0.6)
    for i, (run, colour) in enumerate(zip(runs, colours, strict=True)):
        xs, ys = run.series(key, train_only=train_only)
        if not xs:
            continue
        drawn = drawn or any(math.isfinite(y) for y in ys)
        # distinct markers and dashes keep runs with identical values visible on top of each other
        style = dict(marker=_MARKERS[i % len(_MARKERS)], markersize=4, linestyle=_DASHES[i % len(_DASHES)],
                     color=colour)
        if smooth:
            ax.plot(xs, ys, linewidth=0.8, alpha=0.35, **style)
            ax.plot(xs, running_mean(ys, SMOOTH), linewidth=2.0, alpha=0.95, color=colour,
                    linestyle=_DASHES[i % len(_DASHES)], label=run.name)
            if band:
                lo, hi = zip(*running_band(ys, SMOOTH), strict=True)
                ax.fill_between(xs, lo, hi, color=colour, alpha=0.15, linewidth=0)
        elif paired:
            ax.plot(xs, ys, linewidth=1.2, alpha=0.9, label=run.name, **style)
            _paired_bars(ax, run, key, xs, ys, colour)
        else:
            ax.plot(xs, ys, linewidth=1.6, alpha=0.9, label=run.name, **style)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("step", fontsize=9)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.tick_params(labelsize=8)
    ax.grid(True, alpha=0.3)
    if ylim is not None:
        ax.set_ylim(*ylim)
    if not drawn:
        ax.text(0.5, 0.5, f"no data for {key}", transform=ax.transAxes, ha="center", va="center", color="grey")
    elif legend:
        ax.legend(fontsize=8, loc="best")


def panels_with_data(runs: list[Run], specs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The panels some run has a finite value for (a run without a probe or greedy chains gets no empty
    panel); the first panel alone, saying "no data", when none has."""
    def has(key: str) -> bool:
        return any(math.isfinite(y) for run in runs for y in run.series(key, not key.startswith("eval/"))[1])
    return [spec for spec in specs if has(spec[0])] or specs[:1]


def _panels(plt: Any, runs: list[Run], specs: list[tuple[str, str]], path: Path, colours: list[Any],
            suptitle: str, smooth: bool = False, zero_keys: tuple[str, ...] = (), band: bool = False) -> None:
    specs = panels_with_data(runs, specs)
    ncols = 2 if len(specs) == 4 else min(len(specs), 3)
    nrows = math.ceil(len(specs) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.4 * ncols, 3.3 * nrows), squeeze=False)
    for i, (key, title) in enumerate(specs):
        _draw(axes[i // ncols][i % ncols], runs, key, title, colours, legend=i == 0,
              smooth=smooth and not key.startswith("eval/"), zero_line=key in zero_keys, band=band)
    for j in range(len(specs), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    fig.suptitle(textwrap.fill(suptitle, int(13 * 4.4 * ncols)), fontsize=11)  # ~13 characters an inch
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_runs(runs: list[Run], out_dir: str | Path) -> list[Path]:
    """Write the PNGs (see PLOTS) into out_dir and return their paths; cooperation.png only for runs that log
    the code tasks' helper-call rates (a text or BFCL run would get an empty figure), signal.png only for runs
    that log `signal_share`."""
    plt = _pyplot()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cmap = plt.get_cmap("tab10")
    colours = [cmap(i % 10) for i in range(len(runs))]
    turns = sorted({t for r in runs for t in r.turns()})
    paths = [out / name for name in PLOTS]
    _panels(plt, runs, [("reward_mean", "reward (all turns)"), ("pruned_frac", "pruned fraction"),
                        ("loss", "loss"), ("eval/pass_at_1", "eval pass@1 (last turn)")],
            paths[0], colours, "overview")
    _reward_plot(plt, runs, paths[1], colours)
    _panels(plt, runs, [("pruned_frac", "all turns")] + [(f"turn_{t}/pruned_frac", f"turn {t}") for t in turns],
            paths[2], colours, "fraction of nodes pruned (early termination)")
    _panels(plt, runs, [("loss", "loss")], paths[3], colours, "training loss")
    _panels(plt, runs, [("eval/pass_at_1", "greedy"), ("eval/sampled/pass_at_1", "sampled")], paths[4], colours,
            "held-out pass@1 (step 0 = before training)")
    _panels(plt, runs, [("reward_mean", "all turns")] + [(f"turn_{t}/reward_mean", f"turn {t}") for t in turns],
            paths[5], colours, "training reward per turn (each step draws other problems: not a learning curve)",
            smooth=True)
    drawn = paths[:6]
    if any(r.series(key)[0] for r in runs for key in COOPERATION):
        _panels(plt, runs, list(zip(COOPERATION, ("main calls aux", "uses its result", "passes with the helper"),
                                    strict=True)), paths[6], colours,
                f"cooperation per step (share of training joint actions; thick: mean of {SMOOTH} steps)", smooth=True)
        drawn.append(paths[6])
    if any(r.series(SIGNAL[0])[0] for r in runs):  # runs from before it was logged get no empty figure
        _panels(plt, runs, list(zip(SIGNAL, ("completions in a group with signal",), strict=True)), paths[7], colours,
                "what the sampling bought per step (signal share: completions in a sibling group that trains, over "
                "all generated)")
        drawn.append(paths[7])
    return drawn


def training_reward_key(runs: list[Run]) -> str:
    """`reward_vs_start` (relative to the untrained policy on the same problems) where at least half of some
    run's steps have it, i.e. its probe covers the problems those steps drew; else the raw `reward_mean`
    (a probe that saw few of a large pool's draws would leave a handful of points)."""
    for run in runs:
        steps = len(run.series("reward_mean", train_only=True)[0])
        if steps and 2 * len(run.series("reward_vs_start", train_only=True)[0]) >= steps:
            return "reward_vs_start"
    return "reward_mean"


def _reward_plot(plt: Any, runs: list[Run], path: Path, colours: list[Any]) -> None:
    """What the policy did, not which problems a step drew: the training reward relative to the untrained
    policy on the same problems (`reward_vs_start`), and the paired evaluations (probe and held-out)."""
    first = ("reward_vs_start", "training reward minus the untrained policy's,\nsame problems (turn 1)") \
        if training_reward_key(runs) == "reward_vs_start" else \
        ("reward_mean", "training reward\n(each step draws other problems)")
    specs = [first, ("eval/probe/sampled/reward_mean", "trained-on problems (probe),\nsampled reward"),
             ("eval/sampled/reward_mean", "held-out problems,\nsampled reward")]
    _panels(plt, runs, specs, path, colours,
            f"what the policy did: per step (thick: mean of {SMOOTH} steps, band ±1 s.e.) and at each evaluation "
            "(bars: paired 95% interval of the change since step 0)", smooth=True, zero_keys=("reward_vs_start",),
            band=True)
