"""What a new user meets first: --help, output_dir reuse, --resume of a folder that is no run, W&B offline (tiny
model)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from trainer_helpers import ROOT, SIGNAL, TINY, env, metrics, train


def _train_py(args: list[str], timeout: int = 120) -> subprocess.CompletedProcess:
    e = {**env(), "COLUMNS": "200"}  # argparse wraps help at the terminal width, hyphenated words included
    return subprocess.run([sys.executable, "scripts/train.py", *args], cwd=ROOT, env=e, capture_output=True,
                          text=True, timeout=timeout)


def test_help_lists_every_config_key_and_says_where_defaults_come_from():
    from comlrl.config.schema import schema_keys

    res = _train_py(["--help"])
    assert res.returncode == 0
    text = " ".join(res.stdout.split())
    for key, _ in schema_keys():
        assert key.split(".", 1)[-1] in text, key  # top-level keys (plugins) have no section
    assert "--print-config" in text and "docs/configuration.md" in text
    assert "schema defaults that --print-config shows" in text


def test_an_earlier_runs_outputs_are_refused_and_kept(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints" / "step-1").mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 0, "reward_mean": 1.5}\n')
    (run / "trees.jsonl").write_text('{"step": 1}\n')
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    res = _train_py(["--config", "configs/align_T2_G4.yaml", *TINY, f"training.output_dir={run}"])
    assert res.returncode == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"config error: training.output_dir='{run}' already holds a run")
    assert "metrics.jsonl" in lines[0] and "training.overwrite=true" in lines[0]
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    assert (run / "checkpoints" / "step-1").is_dir()


def test_resume_of_a_directory_without_a_config_says_so(tmp_path):
    run = tmp_path / "not-a-run"
    res = _train_py(["--resume", str(run)])
    assert res.returncode == 2
    assert res.stderr.strip() == (f"error: --resume {run}: {run}/config.yaml does not exist "
                                  "(not a run directory?); give the run's config with --config")
    assert not run.exists()  # nothing written


# `--resume DIR` alone reading DIR/config.yaml (with an override on top): the Ctrl-C test in
# test_run_failures.py resumes that way


@pytest.mark.slow
def test_overwrite_replaces_the_earlier_run_and_wandb_offline_writes_its_files(tmp_path, tiny_model):
    """One run shows both (a run's fixed cost is most of either test): training.overwrite=true over an earlier
    run's outputs, with an offline W&B run."""
    pytest.importorskip("wandb")
    run = tmp_path / "run"
    (run / "checkpoints" / "step-9").mkdir(parents=True)
    (run / "metrics.jsonl").write_text('{"step": 9}\n')
    wandb_home = tmp_path / "wandb-home"
    extra = {"WANDB_MODE": "offline", "WANDB_DIR": str(wandb_home), "WANDB_CONFIG_DIR": str(wandb_home / "config"),
             "WANDB_CACHE_DIR": str(wandb_home / "cache"), "WANDB_DATA_DIR": str(wandb_home / "data"),
             "WANDB_SILENT": "true"}
    res = train(["--config", "configs/align_T2_G4.yaml", *TINY, "training.steps=1", f"training.output_dir={run}",
                 "logging.wandb=true", "logging.wandb_project=comlrl-test", "training.overwrite=true",
                 "logging.progress_bar=true"], extra_env=extra)
    assert res.returncode == 0, res.stderr[-3000:]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-1"]  # the earlier run's are gone
    # stderr is a pipe, not a terminal: one line per step instead of the bar's \r frames
    assert "\r" not in res.stderr and sum(" comlrl: step 1/1: reward=" in line for line in res.stderr.splitlines()) == 1
    [offline] = list((run / "wandb").glob("offline-run-*"))
    [record] = list(offline.glob("run-*.wandb"))  # the run's protobuf record, what `wandb sync` uploads
    data = record.read_bytes()
    for needle in (b"comlrl-test", b"magrpo.num_generations", b"tiny-random", b"reward_mean", b"eval/pass_at_1"):
        assert needle in data, needle  # the project, the flat config and the logged metrics
    assert list((run / "tensorboard").glob("events.*"))  # the other outputs are all still there
    assert [r["step"] for r in metrics(run)] == [0, 1]
    [done] = [line for line in res.stdout.splitlines() if line.startswith("done: ")]  # the report follows it
    assert done.endswith("(metrics.jsonl, trees.jsonl, eval.jsonl, tensorboard, wandb, checkpoints, final)")
    assert not os.environ.get("WANDB_API_KEY") or os.environ["WANDB_API_KEY"] not in res.stderr


@pytest.mark.slow
def test_a_step_with_all_groups_tied_warns_once_with_the_count(tmp_path, tiny_model):
    """Plain train.py on tiny-random without a signal reward: it never writes working code, every sibling
    ties, nothing trains."""
    run = tmp_path / "run"
    tiny = [a for a in TINY if a != SIGNAL]
    res = _train_py(["--config", "configs/align_T2_G4.yaml", *tiny, "training.steps=2", "dataset.eval_size=0",
                     f"training.output_dir={run}"], timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    steps = metrics(run)[-2:]
    assert [r["samples"] for r in steps] == [0, 0] and all(r["adv_groups_skipped"] == 10 for r in steps)
    warnings = [line for line in res.stderr.splitlines() if "trained on nothing" in line]
    assert len(warnings) == 1
    assert "step 1 trained on nothing: all 10 advantage groups tied" in warnings[0]


@pytest.mark.slow
def test_prompt_cuts_are_one_line_per_step_and_per_evaluation(tmp_path, tiny_model):
    """Every prompt is longer than 16 tokens: one line per step (10 prompts: 2 agents x (1 root + 4 children))
    and per evaluation (8: 2 problems x 2 agents x 2 turns), not one per prompt."""
    run = tmp_path / "run"
    res = train(["--config", "configs/align_T2_G4.yaml", *TINY, "training.steps=2", "model.max_prompt_tokens=16",
                 "evaluation.samples=0", "evaluation.probe_problems=0", f"training.output_dir={run}"])
    assert res.returncode == 0, res.stderr[-3000:]
    lines = [line.split(": ", 1)[1] for line in res.stderr.splitlines() if "max_prompt_tokens" in line]
    assert [line.split(": ")[0] for line in lines] == ["evaluation (greedy)", "step 1", "step 2", "evaluation (greedy)"]
    assert lines[0].startswith("evaluation (greedy): cut 8 of 8 prompts to model.max_prompt_tokens=16 (longest ")
    assert lines[1].startswith("step 1: cut 10 of 10 prompts to model.max_prompt_tokens=16 (longest ")
    assert lines[3].endswith("; 36 cut so far") and "dropped 0" not in res.stderr
    assert [r.get("prompt_truncations") for r in metrics(run)[1:]] == [18, 28]
