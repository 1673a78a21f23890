"""Two tree settings compared as issue 39 asks: learning per minute of training, seed by seed.

    python benchmarks/tree_arms.py --arm fixed runs/t39_fixed_s0 runs/t39_fixed_s1 runs/t39_fixed_s2 \
        --arm redraw runs/t39_redraw_s0 runs/t39_redraw_s1 runs/t39_redraw_s2 [--json OUT] [--plot DIR]

Each arm lists its runs in seed order (the i-th run of every arm is one seed, which each run's config.yaml
confirms). Both arms train under the same `training.time_budget_minutes` and are evaluated the same way (held-out
set, seed, chains), so their last evaluations are compared at equal training time. Per run: the training minutes
spent, the held-out sampled pass@1 gain with its paired interval, the signal share (completions in a sibling group
that trains over all completions generated, redraws included), tokens generated per trained completion, a step's
seconds (generation / update), and the evaluation before training's seconds: the same work in every arm of a seed,
so it shows the host's speed when each run was made (a slower host fits fewer steps in the budget). Per seed, for
each arm after the first: its held-out sampled pass@1 minus the first arm's at the end, paired by problem, and the
ratio of the gains, and the issue's other reading of the target: the share of the first arm's training time the arm
took to first reach the first arm's final gain, read from the arm's evaluations during training
(`training.eval_every`; without them only its last evaluation can reach it). --plot draws signal.png and the other
metric plots of every run overlaid (comlrl-plot's). --set probe --measure sampled_reward compares the trained-on
problems' sampled reward instead (the quick start's claim: its four held-out problems are too few to tell two arms
apart).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from comlrl.run.outputs import OUTPUTS, read_run_config, read_run_lines  # noqa: E402
from comlrl.run.paired import PairedDiff, record_difference  # noqa: E402


@dataclass(frozen=True)
class Measure:
    """What a gain is read from: a set of eval.jsonl (`heldout` or the trained-on `probe`) and a per-problem
    field; held-out sampled pass@1 by default, as every learning claim of docs/results.md."""

    set: str = "heldout"
    field: str = "sampled_pass"

    @property
    def fixed(self) -> bool:  # the probe's problems are fixed: its interval comes from the chains
        return self.set == "probe"

    @property
    def label(self) -> str:
        return f"{'held-out' if self.set == 'heldout' else 'trained-on'} {self.field.replace('_', ' ')}"

    @property
    def unit(self) -> str:  # what a difference is counted in
        return "points" if self.field == "sampled_pass" else "difference"

    def show(self, value: float) -> str:  # a pass rate in percent (points for a difference), a reward as is
        return f"{100 * value:.1f}%" if self.field == "sampled_pass" else f"{value:.3f}"

    def diff(self, d: PairedDiff) -> str:
        k, unit = (100, ".1f") if self.field == "sampled_pass" else (1, ".3f")
        return f"{k * d.delta:+{unit}} ({k * d.lo:+{unit}} to {k * d.hi:+{unit}})"


HELDOUT_PASS = Measure()


@dataclass(frozen=True)
class RunFigures:
    run: str
    seed: int  # training.seed of the run's own config.yaml: what pairs the arms' runs
    steps: int
    train_minutes: float  # summed step_seconds: what training.time_budget_minutes counts
    gain: PairedDiff | None  # the measure (held-out sampled pass@1), last evaluation against the one before training
    signal_share: float  # over the whole run: sum of in-signal completions / sum generated
    tokens_per_trained: float  # generated tokens / trained completions
    redraws: int
    trained: int  # completions trained on: what the update's time follows
    gen_seconds: float  # per step, mean: where an arm's step time goes
    update_seconds: float
    host_seconds: float | None  # the evaluation before training: the same work in every arm of a seed, so a
    # slower host between two arms' runs shows here (it shrinks the slower run's steps within the budget)


def _of_set(records: list[dict], step: int, name: str) -> dict[str, dict]:
    return {str(r["index"]): r for r in records if r["step"] == step and r["set"] == name}


def evaluations(run: Path, measure: Measure = HELDOUT_PASS) -> tuple[dict[str, dict], dict[str, dict]]:
    """The measured set's records of the first and the last evaluation."""
    records = read_run_lines(run, "eval")
    steps = sorted({int(r["step"]) for r in records})
    if len(steps) < 2:
        raise SystemExit(f"tree_arms: {run}/eval.jsonl holds {len(steps)} evaluation(s); a run evaluated "
                         "before and after training is needed")
    return _of_set(records, steps[0], measure.set), _of_set(records, steps[-1], measure.set)


def _difference(before: dict[str, dict], after: dict[str, dict], measure: Measure) -> PairedDiff | None:
    return record_difference(before, after, lambda r: r.get(measure.field), measure.field, fixed=measure.fixed)


def run_seed(run: Path) -> int:
    """The run's training.seed, from the config.yaml the trainer wrote into it."""
    path = run / OUTPUTS["config"]
    if not path.is_file():
        raise SystemExit(f"tree_arms: {path} is missing; a run folder written by comlrl-train holds it")
    return int(read_run_config(run).training.seed)


def figures(run: Path, measure: Measure = HELDOUT_PASS) -> RunFigures:
    metrics = read_run_lines(run, "metrics")
    lines = [m for m in metrics if "step_seconds" in m]
    if not lines:
        raise SystemExit(f"tree_arms: {run}/metrics.jsonl holds no training step")
    first, last = evaluations(run, measure)
    # each step's share weighted by what that step generated (a redrawing step generates more)
    counted = [m for m in lines if "completions_generated" in m]
    generated = sum(m["completions_generated"] for m in counted)
    with_signal = sum(m["signal_share"] * m["completions_generated"] for m in counted)
    samples = sum(m["samples"] for m in lines)
    return RunFigures(
        run=str(run), seed=run_seed(run), steps=len(lines), train_minutes=sum(m["step_seconds"] for m in lines) / 60,
        gain=_difference(first, last, measure),
        signal_share=with_signal / generated if generated else math.nan,
        tokens_per_trained=sum(m["gen_tokens"] for m in lines) / samples if samples else math.nan,
        redraws=int(sum(m.get("redraw/draws", 0) for m in lines)), trained=int(samples),
        gen_seconds=sum(m.get("gen_seconds", 0.0) for m in lines) / len(lines),
        update_seconds=sum(m.get("update_seconds", 0.0) for m in lines) / len(lines),
        host_seconds=next((m["eval/seconds"] for m in metrics if m.get("step") == 0 and "eval/seconds" in m), None))


def time_to_reach(run: Path, target: float, measure: Measure = HELDOUT_PASS) -> tuple[int, float] | None:
    """The first evaluation whose gain over the one before training reaches `target`, as (its step, the training
    minutes spent up to that step); None if no evaluation does. The first crossing of a noisy curve: the more
    evaluations a run makes, the earlier it can cross by chance, so the row shows its step and the text reads it
    with the gain's interval."""
    records = read_run_lines(run, "eval")
    steps = sorted({int(r["step"]) for r in records})
    first = _of_set(records, steps[0], measure.set)
    seconds = {int(m["step"]): m["step_seconds"] for m in read_run_lines(run, "metrics") if "step_seconds" in m}
    for step in steps[1:]:
        d = _difference(first, _of_set(records, step, measure.set), measure)
        if d is not None and d.delta >= target:
            return step, sum(s for k, s in seconds.items() if k <= step) / 60
    return None


def versus(base: Path, other: Path, measure: Measure = HELDOUT_PASS) -> PairedDiff | None:
    """`other`'s last measured value minus `base`'s, paired by problem (the same set and seed)."""
    return _difference(evaluations(base, measure)[1], evaluations(other, measure)[1], measure)


def table(arms: dict[str, list[Path]], measure: Measure = HELDOUT_PASS) -> tuple[str, dict]:
    names = list(arms)
    base = names[0]

    def shown(d: PairedDiff | None) -> str:
        return "n/a" if d is None else measure.diff(d)

    rows = [f"| seed | arm | steps | training min | {measure.label} | gain, {measure.unit} (95% CI) | "
            f"vs {base} at the end | gain ratio | time to {base}'s gain | signal share | "
            "tokens per trained completion | redraws | completions trained | s per step (generation / update) | "
            "evaluation before training, s |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    out: dict = {"arms": {}, "versus": {}}
    for i in range(len(arms[base])):
        ref = figures(arms[base][i], measure)
        for name in names:
            f = ref if name == base else figures(arms[name][i], measure)
            if f.seed != ref.seed:
                raise SystemExit(f"tree_arms: {f.run} trained with seed {f.seed} and {ref.run} with seed {ref.seed}; "
                                 "list each arm's runs in the same seed order")
            out["arms"].setdefault(name, []).append({**asdict(f), "gain": asdict(f.gain) if f.gain else None})
            vs, ratio, reach = "", "", ""
            if name != base:
                d = versus(arms[base][i], arms[name][i], measure)
                out["versus"].setdefault(name, []).append(asdict(d) if d else None)
                vs = shown(d)
                reached = None
                if ref.gain and ref.gain.delta > 0:  # a baseline that lost has no gain to reach or divide by
                    ratio = f"{f.gain.delta / ref.gain.delta:.2f}" if f.gain else ""
                    reached = time_to_reach(Path(f.run), ref.gain.delta, measure)
                    reach = "not reached" if reached is None else \
                        f"{reached[1] / ref.train_minutes:.2f} (step {reached[0]})"
                # one entry per seed, as "versus": the i-th is seed i's even where nothing was reached
                out.setdefault("reach", {}).setdefault(name, []).append(
                    None if reached is None else {"step": reached[0], "minutes": reached[1],
                                                  "time_ratio": reached[1] / ref.train_minutes})
            per_step = 60 * f.train_minutes / f.steps
            host = "n/a" if f.host_seconds is None else f"{f.host_seconds:.0f}"
            level = f"{measure.show(f.gain.before)} → {measure.show(f.gain.after)}" if f.gain else "n/a"
            rows.append(f"| {f.seed} | {name} | {f.steps} | {f.train_minutes:.1f} | {level} | {shown(f.gain)} | "
                        f"{vs} | {ratio} | {reach} | {f.signal_share:.2f} | {f.tokens_per_trained:.0f} | "
                        f"{f.redraws} | {f.trained} | {per_step:.0f} ({f.gen_seconds:.0f} / {f.update_seconds:.0f}) | "
                        f"{host} |")
    return "\n".join(rows), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--arm", nargs="+", action="append", required=True, metavar=("NAME", "RUN"),
                    help="an arm's name, then its run folders in seed order (once per arm; the first is the baseline)")
    ap.add_argument("--set", choices=("heldout", "probe"), default="heldout",
                    help="the evaluation set the gains are read from (probe: the trained-on problems)")
    ap.add_argument("--measure", choices=("sampled_pass", "sampled_reward"), default="sampled_pass",
                    help="the per-problem figure: sampled pass@1, or the sampled chains' mean reward")
    ap.add_argument("--json", type=Path, help="write the figures here")
    ap.add_argument("--plot", type=Path, help="draw every run's metric plots overlaid into this folder")
    args = ap.parse_args(argv)
    arms = {a[0]: [Path(p) for p in a[1:]] for a in args.arm}
    counts = {name: len(runs) for name, runs in arms.items()}
    if len(set(counts.values())) != 1 or 0 in counts.values():
        ap.error(f"--arm: arms with the same number of runs (one per seed) are needed; got {counts}")
    text, data = table(arms, Measure(args.set, args.measure))
    print(text)
    if args.json:
        args.json.write_text(json.dumps(data, indent=1))
    if args.plot:
        from comlrl.viz.metrics_plot import load_runs, plot_runs

        for path in plot_runs(load_runs([p for runs in arms.values() for p in runs]), args.plot):
            print(f"plot: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
