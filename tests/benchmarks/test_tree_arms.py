"""benchmarks/tree_arms.py on run folders written by hand: every figure of its table computed here from the
lines it reads (issue 39's comparison of two tree settings at equal training time)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from comlrl.run.paired import paired_difference, within_problem_difference

ROOT = Path(__file__).resolve().parents[2]


def tree_arms():
    spec = importlib.util.spec_from_file_location("tree_arms", ROOT / "benchmarks" / "tree_arms.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def write_run(path: Path, before: list[float], after: list[float], steps: list[dict], host: float = 100.0,
              seed: int = 0) -> Path:
    """A run: its held-out sampled pass@1 per problem before (step 0) and after, its training steps, the
    seconds of its evaluation before training, and its config's training seed."""
    path.mkdir(parents=True)
    (path / "config.yaml").write_text(f"training:\n  seed: {seed}\n")
    last = len(steps)
    evals = [{"step": step, "set": "heldout", "index": i, "sampled_pass": v}
             for step, values in ((0, before), (last, after)) for i, v in enumerate(values)]
    evals.append({"step": last, "set": "probe", "index": 0, "sampled_pass": 1.0})  # not held out: not counted
    (path / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in evals))
    lines = [{"step": 0, "eval/sampled/pass_at_1": sum(before) / len(before), "eval/seconds": host},
             *({"step": i + 1, **s} for i, s in enumerate(steps))]
    (path / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in lines))
    return path


BEFORE = [0.0, 0.25, 0.5, 0.0]


@pytest.fixture
def arms(tmp_path: Path) -> tuple[Path, Path]:
    fixed = write_run(tmp_path / "fixed_s0", BEFORE, [0.25, 0.25, 0.75, 0.25], [
        {"step_seconds": 60.0, "samples": 8, "gen_tokens": 800, "signal_share": 0.5, "completions_generated": 16,
         "gen_seconds": 20.0, "update_seconds": 40.0},
        {"step_seconds": 60.0, "samples": 8, "gen_tokens": 800, "signal_share": 0.5, "completions_generated": 16,
         "gen_seconds": 30.0, "update_seconds": 30.0}])
    redraw = write_run(tmp_path / "redraw_s0", BEFORE, [0.5, 0.25, 1.0, 0.25], [
        {"step_seconds": 90.0, "samples": 24, "gen_tokens": 3200, "signal_share": 0.75,
         "completions_generated": 32, "redraw/draws": 2},
        {"step_seconds": 30.0, "samples": 8, "gen_tokens": 800, "signal_share": 0.5, "completions_generated": 16}],
        host=123.4)
    return fixed, redraw


def test_each_run_and_the_arms_against_each_other_by_hand(arms, capsys) -> None:
    fixed, redraw = arms
    assert tree_arms().main(["--arm", "fixed", str(fixed), "--arm", "redraw", str(redraw)]) == 0
    rows = capsys.readouterr().out.splitlines()
    gain_fixed = paired_difference(BEFORE, [0.25, 0.25, 0.75, 0.25])  # +0.1875
    gain_redraw = paired_difference(BEFORE, [0.5, 0.25, 1.0, 0.25])  # +0.3125
    vs = paired_difference([0.25, 0.25, 0.75, 0.25], [0.5, 0.25, 1.0, 0.25])  # +0.125
    assert (gain_fixed.delta, gain_redraw.delta, vs.delta) == (0.1875, 0.3125, 0.125)

    def pts(d):
        return f"{100 * d.delta:+.1f} ({100 * d.lo:+.1f} to {100 * d.hi:+.1f})"

    # 2 steps of 60 s (generation 20 and 30 s, update 40 and 30 s); 16 of 32 generated in trained groups; 1600
    # tokens for 16 trained completions; the evaluation before training took 100 s
    assert rows[2] == (f"| 0 | fixed | 2 | 2.0 | 18.8% → 37.5% | {pts(gain_fixed)} |  |  |  | 0.50 | 100 | 0 "
                       "| 16 | 60 (25 / 35) | 100 |")
    # 90 + 30 s; (0.75 x 32 + 0.5 x 16) / 48 = 0.67; 4000 tokens / 32 trained = 125; ratio 0.3125 / 0.1875;
    # no generation or update seconds logged: 0; a slower host's evaluation, 123 s; evaluated only at the end, it
    # first reaches the fixed arm's gain there: 2.0 of the fixed arm's 2.0 minutes
    assert rows[3] == (f"| 0 | redraw | 2 | 2.0 | 18.8% → 50.0% | {pts(gain_redraw)} | {pts(vs)} | 1.67 | "
                       "1.00 (step 2) | 0.67 "
                       "| 125 | 2 | 32 | 60 (0 / 0) | 123 |")


def test_the_figures_go_to_json_and_the_plots_overlay_the_runs(arms, tmp_path, capsys) -> None:
    fixed, redraw = arms
    out = tmp_path / "arms.json"
    assert tree_arms().main(["--arm", "fixed", str(fixed), "--arm", "redraw", str(redraw), "--json", str(out),
                             "--plot", str(tmp_path / "plots")]) == 0
    data = json.loads(out.read_text())
    assert data["arms"]["redraw"][0]["signal_share"] == pytest.approx(32 / 48)
    assert data["versus"]["redraw"][0]["delta"] == 0.125 and data["arms"]["fixed"][0]["train_minutes"] == 2.0
    assert (tmp_path / "plots" / "signal.png").stat().st_size > 1000
    assert "plot: " + str(tmp_path / "plots" / "signal.png") in capsys.readouterr().out


def test_arms_of_unequal_length_and_a_run_not_evaluated_after_are_one_line(arms, tmp_path, capsys) -> None:
    fixed, redraw = arms
    with pytest.raises(SystemExit) as err:
        tree_arms().main(["--arm", "fixed", str(fixed), str(fixed), "--arm", "redraw", str(redraw)])
    assert err.value.code == 2 and "{'fixed': 2, 'redraw': 1}" in capsys.readouterr().err
    (redraw / "eval.jsonl").write_text(json.dumps({"step": 0, "set": "heldout", "index": 0, "sampled_pass": 0}))
    with pytest.raises(SystemExit, match="eval.jsonl holds 1 evaluation"):
        tree_arms().main(["--arm", "fixed", str(fixed), "--arm", "redraw", str(redraw)])


def test_a_row_names_its_runs_seed_and_runs_of_different_seeds_are_not_paired(tmp_path, capsys) -> None:
    """The seed column is each run's training.seed (a comparison of seed 2 alone says 2, not its position 0);
    an arm listed in another seed order is refused in one line rather than compared."""
    step = [{"step_seconds": 60.0, "samples": 8, "gen_tokens": 800}]
    fixed = write_run(tmp_path / "fixed_s2", BEFORE, BEFORE, step, seed=2)
    pair = write_run(tmp_path / "pair_s2", BEFORE, BEFORE, step, seed=2)
    assert tree_arms().main(["--arm", "fixed", str(fixed), "--arm", "pair", str(pair)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[2].startswith("| 2 | fixed | 1 |") and rows[3].startswith("| 2 | pair | 1 |")
    other = write_run(tmp_path / "pair_s1", BEFORE, BEFORE, step, seed=1)
    with pytest.raises(SystemExit, match=r"pair_s1 trained with seed 1 and .*fixed_s2 with seed 2; list each arm's "
                                         r"runs in the same seed order$"):
        tree_arms().main(["--arm", "fixed", str(fixed), "--arm", "pair", str(other)])
    (other / "config.yaml").unlink()
    with pytest.raises(SystemExit, match=r"pair_s1/config.yaml is missing"):
        tree_arms().main(["--arm", "fixed", str(fixed), "--arm", "pair", str(other)])


def test_one_arm_alone_is_its_runs_figures_without_a_comparison(arms, capsys) -> None:
    fixed, _ = arms
    assert tree_arms().main(["--arm", "fixed", str(fixed)]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert len(rows) == 3 and rows[2].startswith("| 0 | fixed | 2 | 2.0 | 18.8% → 37.5% |") and "| 16 |" in rows[2]


def test_the_trained_on_reward_is_compared_from_its_chains(arms, capsys) -> None:
    """--set probe --measure sampled_reward (the quick start's arms): the probe's two fixed problems, each
    difference from their sampled chains (within_problem_difference), rewards shown as they are."""
    fixed, redraw = arms
    chains = {(fixed, 0): [[1.0, 2.0], [0.0, 1.0]], (fixed, 2): [[2.0, 2.0], [1.0, 2.0]],
              (redraw, 0): [[1.0, 2.0], [0.0, 1.0]], (redraw, 2): [[3.0, 2.0], [2.0, 2.0]]}
    for (run, step), rows in chains.items():
        with (run / "eval.jsonl").open("a") as f:
            for i, row in enumerate(rows):
                f.write(json.dumps({"step": step, "set": "probe", "index": i, "sampled_reward": sum(row) / 2,
                                    "chain_rewards": row}) + "\n")
    # the hand-written probe line at the last step (index 0, sampled_pass only) is replaced by the later one
    assert tree_arms().main(["--set", "probe", "--measure", "sampled_reward", "--arm", "fixed", str(fixed),
                             "--arm", "redraw", str(redraw)]) == 0
    rows = capsys.readouterr().out.splitlines()
    gain_fixed = within_problem_difference(chains[fixed, 0], chains[fixed, 2])  # 1.0 -> 1.75
    gain_redraw = within_problem_difference(chains[redraw, 0], chains[redraw, 2])  # 1.0 -> 2.25
    vs = within_problem_difference(chains[fixed, 2], chains[redraw, 2])

    def diff(d):
        return f"{d.delta:+.3f} ({d.lo:+.3f} to {d.hi:+.3f})"

    assert (gain_fixed.delta, gain_redraw.delta, vs.delta) == (0.75, 1.25, 0.5)
    assert "| trained-on sampled reward | gain, difference (95% CI) |" in rows[0]
    assert rows[2].startswith(f"| 0 | fixed | 2 | 2.0 | 1.000 → 1.750 | {diff(gain_fixed)} |  |  |")
    assert rows[3].startswith(f"| 0 | redraw | 2 | 2.0 | 1.000 → 2.250 | {diff(gain_redraw)} | {diff(vs)} | 1.67 | "
                              "1.00 (step 2) |")


def _evaluate_at(run: Path, step: int, values: list[float]) -> None:
    with (run / "eval.jsonl").open("a") as f:
        f.writelines(json.dumps({"step": step, "set": "heldout", "index": i, "sampled_pass": v}) + "\n"
                     for i, v in enumerate(values))


def test_time_to_reach_the_baselines_gain_is_read_from_evaluations_during_training(tmp_path, capsys) -> None:
    """The issue's other reading of the target: the first evaluation whose gain reaches the baseline's final gain,
    and the training minutes up to its step over the baseline's. Hand-computed: the baseline gains 0.1875 in 4
    minutes; the other arm steps 30, 60, 90 and 60 s."""
    step = {"samples": 8, "gen_tokens": 800}
    fixed = write_run(tmp_path / "fixed_s0", BEFORE, [0.25, 0.25, 0.75, 0.25], [{**step, "step_seconds": 120.0}] * 2)
    seconds = [{**step, "step_seconds": s} for s in (30.0, 60.0, 90.0, 60.0)]
    arm = write_run(tmp_path / "pair_s0", BEFORE, [0.25, 0.25, 0.75, 0.25], seconds)
    _evaluate_at(arm, 1, [0.25, 0.25, 0.5, 0.0])  # +0.0625: short of 0.1875
    _evaluate_at(arm, 3, [0.5, 0.5, 0.5, 0.0])  # +0.1875: reached, after 30 + 60 + 90 s = 3.0 minutes
    tree_arms_module = tree_arms()
    assert tree_arms_module.time_to_reach(arm, 0.1875) == (3, 3.0)
    assert tree_arms_module.time_to_reach(arm, 0.25) is None  # never: the last evaluation also gains 0.1875
    assert tree_arms_module.main(["--arm", "fixed", str(fixed), "--arm", "pair", str(arm),
                                  "--json", str(tmp_path / "a.json")]) == 0
    row = capsys.readouterr().out.splitlines()[3]
    assert "| 1.00 | 0.75 (step 3) |" in row  # the same gain at the end (ratio 1.00), reached in 3 of 4 minutes
    reach = json.loads((tmp_path / "a.json").read_text())["reach"]["pair"][0]
    assert reach == {"step": 3, "minutes": 3.0, "time_ratio": 0.75}
    (arm / "eval.jsonl").write_text("")
    _evaluate_at(arm, 0, BEFORE)
    _evaluate_at(arm, 4, BEFORE)  # gains nothing: never reaches the baseline's gain
    assert tree_arms_module.main(["--arm", "fixed", str(fixed), "--arm", "pair", str(arm)]) == 0
    assert "| 0.00 | not reached |" in capsys.readouterr().out.splitlines()[3]
    # a baseline that lost has no gain to reach: both columns stay empty
    assert tree_arms_module.main(["--arm", "pair", str(arm), "--arm", "fixed", str(fixed)]) == 0
    cells = [c.strip() for c in capsys.readouterr().out.splitlines()[3].split("|")]
    assert cells[2] == "fixed" and cells[8:10] == ["", ""]
