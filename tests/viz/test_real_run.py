"""A real short run (tiny random model, cross mode, 1 step) drawn by both scripts, then opened in Chromium."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from viz_helpers import NODE_RE, PYTHON, ROOT, chromium, run_chromium

pytestmark = pytest.mark.slow

TINY = ["model.name=tiny-random", "model.max_new_tokens=8", "dataset.eval_size=2", "training.torch_threads=1",
        "training.steps=1", "logging.progress_bar=false", "rollout.engine=hf", "evaluation.samples=1",
        "evaluation.greedy=true", "training.trees_per_step=1"]


def run(args: list[str], timeout: int = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    return subprocess.run([PYTHON, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def cross_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("viz_real") / "cross"
    res = run(["scripts/train.py", "--config", "configs/cross_T2_G4.yaml", *TINY, f"training.output_dir={out}"])
    assert res.returncode == 0, res.stderr[-3000:]
    (out.parent / "stdout.txt").write_text(res.stdout)
    return out


def test_the_run_ends_with_its_before_after_report(cross_run: Path) -> None:
    """The last lines: the paired before/after per measure with its interval and verdict, what before and
    after are, the PNG and the tree page."""
    lines = (cross_run.parent / "stdout.txt").read_text().splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("done: 1 step; outputs in "))
    report = lines[i + 1 :]
    measures = [x for x in report if x.startswith("held-out problems, ")]
    assert [x.split(" (")[0] for x in measures] == ["held-out problems, sampled reward",
                                                    "held-out problems, sampled pass@1",
                                                    "held-out problems, greedy pass@1"]
    for x in measures:
        assert "(2 problems, " in x and "95% CI " in x and x.rsplit(": ", 1)[1] in ("improved", "worse", "within noise")
    curve, tree = report[-2:]
    assert report[-3].startswith("(before = the untrained policy, after = step 1; ")
    png = Path(curve.removeprefix("reward plot: "))
    assert png == cross_run / "plots" / "reward.png" and png.read_bytes()[:4] == b"\x89PNG"
    page = Path(tree.removeprefix("tree view (open in a browser): "))
    assert page == cross_run / "tree_step1.html" and len(NODE_RE.findall(page.read_text())) == 17
    metrics = [json.loads(x) for x in (cross_run / "metrics.jsonl").read_text().splitlines()]
    assert 0.0 <= metrics[0]["eval/helper_called"] <= 1.0 and "turn_2/helper_used" in metrics[1]
    assert "eval/sampled/reward_mean_delta" in metrics[-1]


def test_tree_page_of_a_real_cross_run(cross_run: Path, tmp_path: Path) -> None:
    res = run(["scripts/show_tree.py", str(cross_run), "--step", "1"], timeout=120)
    assert res.returncode == 0, res.stderr
    page = Path(res.stdout.strip())
    html = page.read_text()
    nodes = [json.loads(x) for x in (cross_run / "trees.jsonl").read_text().splitlines()]
    assert len(NODE_RE.findall(html)) == len(nodes) == 17
    assert html.count('<g class="edge"') == 16
    if chromium() is None:
        pytest.skip("headless Chromium not installed (Debian: apt-get install -y chromium)")
    res = run_chromium(page.as_uri() + "#node=s1r0t0.15", tmp_path / "profile", "--dump-dom")
    assert res.returncode == 0
    assert 'data-viz-ready="17"' in res.stdout and "data-js-error=" not in res.stdout.split("<head>")[0]
    shot = tmp_path / "real_cross.png"
    res = run_chromium(page.as_uri() + "#node=s1r0t0.15", tmp_path / "profile", f"--screenshot={shot}",
                       "--window-size=1500,950", "--hide-scrollbars")
    assert res.returncode == 0 and shot.stat().st_size > 10_000


def test_plots_of_a_real_run(cross_run: Path, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (pip install matplotlib)")
    res = run(["scripts/plot_metrics.py", str(cross_run), "--out", str(tmp_path / "plots")], timeout=300)
    assert res.returncode == 0, res.stderr
    for name in ("overview.png", "reward.png", "pruned.png", "loss.png", "eval_pass_at_1.png", "summary.md"):
        assert (tmp_path / "plots" / name).stat().st_size > 0
    assert res.stdout.splitlines()[2].startswith("| cross | 1 | ")
