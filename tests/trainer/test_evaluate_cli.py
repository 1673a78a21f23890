"""`scripts/evaluate.py` reports as training does (issue 24, item 11): the summary line of an evaluation and the
paired before/after lines, no library noise and no JSON dump. Real subprocesses on the tiny model."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from trainer_helpers import ROOT, TINY, env

from comlrl.config.schema import load_config, to_yaml

pytestmark = pytest.mark.slow

SUMMARY = (r"held-out pass@1 greedy \d\.\d{3}, sampled \d\.\d{3} of 2 problems; "
           r"training probe sampled reward \d\.\d{3} of 1 problem \(\d+ s\)")


def _evaluate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "scripts/evaluate.py", *args], cwd=ROOT, env=env(), capture_output=True,
                          text=True, timeout=900)


def test_evaluate_prints_the_summary_lines_training_prints(tmp_path, tiny_model):
    run = tmp_path / "run"
    run.mkdir()
    cfg = load_config(ROOT / "configs" / "align_T2_G4.yaml",
                      [*TINY, "training.steps=1", f"training.output_dir={run}"])  # probe: the 1 problem step 1 draws
    (run / "config.yaml").write_text(to_yaml(cfg))
    scores = tmp_path / "base.jsonl"
    res = _evaluate(str(run), "--base", "--out", str(scores))
    assert res.returncode == 0, res.stderr[-3000:]
    assert re.fullmatch(rf"base model: {SUMMARY}\nper-problem scores: {re.escape(str(scores))}\n",
                        res.stdout), res.stdout
    noise = [line for line in res.stderr.splitlines() if line.strip() and not re.match(
        r"^\d{4}-\d\d-\d\d [\d:,]+ (sandbox|comlrl): ", line)]  # our own INFO lines only
    assert not noise, noise

    paired = _evaluate("--records", str(scores), str(scores))  # the same scores twice: a paired difference of 0
    assert paired.returncode == 0, paired.stderr[-3000:]
    lines = paired.stdout.splitlines()
    assert lines[0] == (f"before = {scores}, after = {scores} (last evaluation of each; 95% intervals, paired t over "
                        "problems; trained-on sampled figures: over the chains, the problems fixed)")
    assert "held-out problems, greedy pass@1 (2 problems, 1 greedy chain each): " in paired.stdout
    # the trained-on probe is one problem with one sampled chain (TINY): its sampled figures have no interval
    assert all(line.endswith((": within noise", ": one problem gives no interval")) for line in lines[1:]), lines
    assert len(lines) > 2 and any(line.endswith(": within noise") for line in lines[1:]), lines
