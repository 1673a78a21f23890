"""PNG plots and the summary table of scripts/plot_metrics.py, on synthetic and real small runs."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType

import pytest
from viz_helpers import DATA, ROOT, write_run

from comlrl.viz import VizError
from comlrl.viz.metrics_plot import PLOTS, load_metrics, load_runs, plot_runs, run_names, summary_table


def script() -> ModuleType:
    """scripts/plot_metrics.py as a module (run in-process: importing matplotlib once is cheaper)."""
    spec = importlib.util.spec_from_file_location("plot_metrics_script", ROOT / "scripts" / "plot_metrics.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def metrics_a() -> list[dict]:
    return [
        {"step": 0, "eval/pass_at_1": 0.25, "eval/reward_mean": 0.5},
        {"step": 1, "reward_mean": 0.5, "turn_1/reward_mean": 0.4, "turn_2/reward_mean": 0.6, "pruned_frac": 0.0,
         "turn_1/pruned_frac": 0.0, "turn_2/pruned_frac": 0.0, "loss": 0.1, "step_seconds": 1.5},
        {"step": 2, "reward_mean": 0.7, "turn_1/reward_mean": 0.6, "turn_2/reward_mean": 0.8, "pruned_frac": 0.2,
         "turn_1/pruned_frac": 0.0, "turn_2/pruned_frac": 0.25, "loss": -0.05, "step_seconds": 2.25,
         "eval/pass_at_1": 0.75},
    ]


def metrics_b() -> list[dict]:
    """No loss at all, NaN (stored as null) in places, a third turn, no eval."""
    return [
        {"step": 1, "reward_mean": None, "turn_1/reward_mean": 0.1, "turn_3/reward_mean": None, "pruned_frac": 1.0,
         "step_seconds": 4.0},
        {"step": 2, "reward_mean": 0.3, "turn_1/reward_mean": None, "turn_3/reward_mean": 0.2, "pruned_frac": None,
         "step_seconds": None, "note": "text is ignored"},
    ]


def check_png(path: Path) -> tuple[int, int]:
    from PIL import Image  # a matplotlib dependency

    assert path.is_file() and path.stat().st_size > 1000, path
    assert path.read_bytes()[:8] == PNG_MAGIC
    with Image.open(path) as im:
        im.verify()
    with Image.open(path) as im:
        w, h = im.size
        colours = im.convert("RGB").getcolors(maxcolors=1 << 20)
    assert w > 200 and h > 200
    assert colours is not None and len(colours) > 10  # not a blank canvas
    return w, h


@pytest.fixture(autouse=True)
def _need_matplotlib() -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install matplotlib)")


def test_two_runs_overlaid_with_nan_and_missing_keys(tmp_path: Path) -> None:
    a = write_run(tmp_path / "exp" / "align", metrics=metrics_a())
    b = write_run(tmp_path / "exp" / "cross", metrics=metrics_b())
    runs = load_runs([a, b])
    assert [r.name for r in runs] == ["align", "cross"]
    assert math.isnan(runs[1].steps[1]["reward_mean"]) and "note" not in runs[1].steps[2]
    paths = plot_runs(runs, tmp_path / "plots")
    # no helper-call rates or signal share logged: no empty figures of them
    assert [p.name for p in paths] == [p for p in PLOTS if p not in ("cooperation.png", "signal.png")]
    sizes = {p.name: check_png(p) for p in paths}
    # reward_per_turn.png has one panel per turn plus "all turns": turns 1, 2, 3 -> four panels, wider than
    # loss.png; reward.png keeps only its training panel (these runs have no sampled evaluation)
    assert sizes["reward_per_turn.png"][0] > sizes["loss.png"][0] == sizes["reward.png"][0]


def test_summary_table_numbers(tmp_path: Path) -> None:
    a = write_run(tmp_path / "align", metrics=metrics_a())
    b = write_run(tmp_path / "cross", metrics=metrics_b())
    table = summary_table(load_runs([a, b]))
    lines = table.strip().splitlines()
    assert lines[0] == ("| run | steps | reward_mean | turn_1 reward | turn_2 reward | turn_3 reward | pruned_frac "
                        "| loss | eval pass@1 (first → last) | wall time (s) |")
    assert lines[2] == "| align | 2 | 0.700 | 0.600 | 0.800 | n/a | 0.200 | -0.0500 | 0.250 → 0.750 | 3.8 |"
    assert lines[3] == "| cross | 2 | 0.300 | n/a | n/a | 0.200 | n/a | n/a | n/a | 4.0 |"


def test_run_names_are_the_shortest_distinct_suffix() -> None:
    assert run_names([Path("/r/a/out"), Path("/r/b/out")]) == ["a/out", "b/out"]
    assert run_names([Path("/r/align"), Path("/q/cross")]) == ["align", "cross"]
    assert run_names([Path("/r/x"), Path("/r/x")]) == ["/r/x", "/r/x"]


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(VizError, match="run directory not found"):
        load_metrics(tmp_path / "missing")
    with pytest.raises(VizError, match="no metrics.jsonl in"):
        load_metrics(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss"\nnot json\n')
    with pytest.raises(VizError, match="holds no metrics records"):
        load_metrics(tmp_path)


def test_a_run_without_any_plotted_key_still_plots(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", metrics=[{"step": 1, "lr": 0.1}])
    for p in plot_runs(load_runs([run]), tmp_path / "plots"):
        check_png(p)
    assert "| r | 1 | n/a |" in summary_table(load_runs([run]))


def test_real_runs_through_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cmp"
    rc = script().main([str(DATA / "align"), str(DATA / "cross"), str(DATA / "cross_pruned"), "--out", str(out)])
    res = capsys.readouterr()
    assert rc == 0, res.err
    for name in PLOTS:
        if name in ("cooperation.png", "signal.png"):  # these runs log no helper-call rates or signal share
            assert not (out / name).exists()
        else:
            check_png(out / name)
    md = (out / "summary.md").read_text()
    assert res.out.splitlines()[0] in md
    wall = {}
    for name in ("align", "cross", "cross_pruned"):
        recs = [json.loads(x) for x in (DATA / name / "metrics.jsonl").read_text().splitlines()]
        wall[name] = sum(r["step_seconds"] for r in recs if r["step"] > 0)
        row = next(line for line in res.out.splitlines() if line.startswith(f"| {name} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == "3"
        assert cells[-1] == f"{wall[name]:.1f}"
        assert cells[-3] == "0.0000"  # tiny-random: no signal, loss 0
    pruned_row = next(line for line in res.out.splitlines() if line.startswith("| cross_pruned |"))
    assert "| 1.000 |" in pruned_row  # the threshold stopped every root


def test_cli_default_out_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    run = write_run(tmp_path / "run", metrics=metrics_a())
    mod = script()
    monkeypatch.chdir(tmp_path)
    assert mod.main([str(run)]) == 0
    assert (tmp_path / "plots" / "run" / "summary.md").is_file()
    assert (tmp_path / "plots" / "run" / "overview.png").is_file()
    capsys.readouterr()
    assert mod.main([str(run), str(tmp_path / "nope")]) == 2  # bad input: 2, as every other comlrl command
    assert capsys.readouterr().err == f"plot_metrics: run directory not found: {tmp_path / 'nope'}\n"
    (tmp_path / "file").write_text("")
    assert mod.main([str(run), "--out", str(tmp_path / "file" / "sub")]) == 2
    assert capsys.readouterr().err.startswith("plot_metrics: cannot write to ")


def test_running_band_is_the_mean_plus_minus_one_standard_error() -> None:
    from comlrl.viz.metrics_plot import running_band

    band = running_band([1.0, 3.0, math.nan, 5.0], 3)
    assert all(math.isnan(v) for v in band[0])  # one value: no spread yet
    assert band[1] == pytest.approx((1.0, 3.0))  # mean 2, sd sqrt(2), se 1
    assert band[2] == pytest.approx((1.0, 3.0))  # the nan is skipped
    assert band[3] == pytest.approx((3.0, 5.0))  # 3 and 5 (the nan skipped): mean 4, sd sqrt(2), se 1


def test_the_reward_plot_is_relative_to_the_start_only_where_most_steps_have_it() -> None:
    """A probe that covers the training problems gives reward_vs_start at every step; one that saw few of a
    large pool's draws leaves a handful of points, and the plot shows the raw per-step reward instead."""
    from comlrl.viz.metrics_plot import Run, training_reward_key

    def run(with_vs: set[int]) -> Run:
        steps = {s: {"reward_mean": 1.0, **({"reward_vs_start": 0.1} if s in with_vs else {})} for s in range(1, 7)}
        return Run("r", Path("r"), {0: {"eval/pass_at_1": 0.5}, **steps})

    assert training_reward_key([run(set(range(1, 7)))]) == "reward_vs_start"
    assert training_reward_key([run({1, 2, 3})]) == "reward_vs_start"
    assert training_reward_key([run({1, 4})]) == "reward_mean"
    assert training_reward_key([run(set()), run({1, 2, 3, 4})]) == "reward_vs_start"


def test_a_panel_no_run_has_data_for_is_left_out() -> None:
    """A run without a probe (or without greedy chains) drew an empty "no data" panel in reward.png; the panels
    are those some run has a finite value for, and the first alone when none has."""
    from comlrl.viz.metrics_plot import Run, panels_with_data

    specs = [("reward_mean", "a"), ("eval/probe/sampled/reward_mean", "b"), ("eval/sampled/reward_mean", "c")]
    no_probe = Run("r", Path("r"), {0: {"eval/sampled/reward_mean": 1.4}, 1: {"reward_mean": 1.6},
                                    2: {"reward_mean": 1.7, "eval/sampled/reward_mean": 1.9}})
    assert panels_with_data([no_probe], specs) == [specs[0], specs[2]]
    nan_probe = Run("s", Path("s"), {0: {"eval/probe/sampled/reward_mean": math.nan}})
    assert panels_with_data([no_probe, nan_probe], specs) == [specs[0], specs[2]]
    with_probe = Run("t", Path("t"), {0: {"eval/probe/sampled/reward_mean": 1.2}})
    assert panels_with_data([no_probe, with_probe], specs) == specs
    assert panels_with_data([Run("e", Path("e"), {})], specs) == [specs[0]]
    # only step 0 has the training key: a training panel ignores the evaluation line
    assert panels_with_data([Run("z", Path("z"), {0: {"reward_mean": 1.0}})], specs[:1] + specs[2:]) == [specs[0]]


def test_a_zero_width_interval_draws(tmp_path: Path) -> None:
    """Regression: a probe whose chains all scored alike before and after has a zero-width interval; the
    rounding of first + delta left a bar of -5.6e-17, matplotlib raised, and the finished run exited 1."""
    first, delta = 0.1, 0.2  # lo and hi a rounding error inside delta: both bar halves a hair below zero
    metrics = [{"step": 0, "eval/probe/sampled/reward_mean": first},
               {"step": 1, "reward_mean": 1.0, "reward_vs_start": 0.1},
               {"step": 2, "reward_mean": 1.2, "reward_vs_start": 0.2, "eval/probe/sampled/reward_mean": 0.3,
                "eval/probe/sampled/reward_mean_delta": delta, "eval/probe/sampled/reward_mean_delta_lo": 0.2 + 1e-16,
                "eval/probe/sampled/reward_mean_delta_hi": 0.2 - 1e-16}]
    run = write_run(tmp_path / "run", metrics=metrics)
    paths = plot_runs(load_runs([run]), tmp_path / "plots")
    assert check_png(next(p for p in paths if p.name == "reward.png"))[0] > 0


def test_cooperation_is_drawn_only_for_runs_that_log_the_helper_call_rates(tmp_path: Path) -> None:
    """A text or BFCL run drew an empty cooperation.png (issue 36, item 9)."""
    plain = write_run(tmp_path / "plain", metrics=metrics_a())
    coop = write_run(tmp_path / "coop", metrics=[{**m, "helper_called": 0.5, "helper_used": 0.25,
                                                  "passed_with_helper": 0.0} for m in metrics_a()])
    assert "cooperation.png" not in [p.name for p in plot_runs(load_runs([plain]), tmp_path / "a")]
    drawn = plot_runs(load_runs([plain, coop]), tmp_path / "b")
    assert [p.name for p in drawn] == [p for p in PLOTS if p != "signal.png"]
    check_png(tmp_path / "b" / "cooperation.png")


def test_signal_share_is_drawn_for_runs_that_log_it_beside_runs_that_do_not(tmp_path: Path) -> None:
    """Two arms of issue 39 overlaid, and a run from before the share was logged."""
    steps = metrics_a()  # step 0 is the evaluation before training: no sampling counts on it
    fixed = write_run(tmp_path / "fixed", metrics=[steps[0], *({**m, "signal_share": 0.5} for m in steps[1:])])
    share = write_run(tmp_path / "share", metrics=[steps[0], *({**m, "signal_share": 0.7} for m in steps[1:])])
    old = write_run(tmp_path / "old", metrics=metrics_a())
    runs = load_runs([fixed, share, old])
    assert [r.series("signal_share")[1] for r in runs] == [[0.5, 0.5], [0.7, 0.7], []]
    drawn = plot_runs(runs, tmp_path / "plots")
    assert [p.name for p in drawn] == [p for p in PLOTS if p != "cooperation.png"]
    w, _ = check_png(tmp_path / "plots" / "signal.png")
    assert w == check_png(tmp_path / "plots" / "loss.png")[0]  # one panel: the share


def test_the_table_shows_the_sampled_pass_rate_of_a_run_that_evaluated_sampled_only(tmp_path: Path) -> None:
    """A run that evaluated sampled only (eval/sampled/pass_at_1, no eval/pass_at_1) read `n/a` (issue 36,
    item 8); its sampled figure is shown, labelled; a run with greedy figures keeps them."""
    sampled = write_run(tmp_path / "sampled", metrics=[
        {"step": 0, "eval/sampled/pass_at_1": 0.125},
        {"step": 1, "reward_mean": 1.0, "step_seconds": 2.0},
        {"step": 2, "reward_mean": 1.5, "step_seconds": 2.0, "eval/sampled/pass_at_1": 0.375}])
    both = write_run(tmp_path / "both", metrics=[{**m, "eval/sampled/pass_at_1": 0.5} for m in metrics_a()])
    rows = summary_table(load_runs([sampled, both])).strip().splitlines()[2:]
    # turn_1 and turn_2 reward (the other run's turns), pruned_frac and loss are absent: n/a
    assert rows[0] == "| sampled | 2 | 1.500 | n/a | n/a | n/a | n/a | 0.125 → 0.375 (sampled) | 4.0 |"
    assert rows[1].split(" | ")[-2] == "0.250 → 0.750"  # greedy, as before


def test_the_default_output_folder_leaves_the_runs_own_plots_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """It overwrote RUN_DIR/plots, which the run itself draws at its end (issue 36, item 8): the default is
    ./plots/<run names>, a folder of its own; --out still writes where it is told."""
    run = write_run(tmp_path / "runs" / "align", metrics=metrics_a())
    other = write_run(tmp_path / "runs" / "cross", metrics=metrics_b())
    (run / "plots").mkdir()
    (run / "plots" / "reward.png").write_bytes(b"the run's own")
    monkeypatch.chdir(tmp_path)
    mod = script()
    assert mod.main([str(run)]) == 0
    assert (run / "plots" / "reward.png").read_bytes() == b"the run's own"
    assert sorted(p.name for p in (run / "plots").iterdir()) == ["reward.png"]
    check_png(tmp_path / "plots" / "align" / "reward.png")
    assert capsys.readouterr().out.splitlines()[-1].endswith(" to plots/align")
    assert mod.main([str(run), str(other)]) == 0
    assert (tmp_path / "plots" / "align_vs_cross" / "summary.md").is_file()
    assert mod.main([str(run), "--out", str(run / "plots")]) == 0  # told to: it writes there
    check_png(run / "plots" / "reward.png")


def test_help_and_readme_say_what_each_png_shows(capsys: pytest.CaptureFixture[str]) -> None:
    """--help called reward.png "per turn", the README "the training reward minus the untrained policy's"
    (issue 36, item 8): both name every PNG the code draws and say the same of reward.png."""
    with pytest.raises(SystemExit):
        script().main(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    readme = " ".join((ROOT / "README.md").read_text().split())
    for name in PLOTS:
        assert name in help_text, name
    reward = "the training reward minus the untrained policy's on the same problems"
    assert f"reward.png: what training changed, {reward}" in help_text
    assert f"`reward.png` shows what training changed ({reward}" in readme
    assert "reward_per_turn.png: the raw training reward per step" in help_text
    assert "`reward_per_turn.png` the raw training reward per step" in readme
    assert "./plots/RUN" in help_text and "RUN_DIR/plots" in help_text
