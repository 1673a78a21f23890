"""How a run ends when it does not end well: Ctrl-C, a failure before its first step, a resume with nothing to
do, trackers without a login, the README's launch form. Real subprocesses on the tiny model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from trainer_helpers import ENTRY, ROOT, TINY, VENV_BIN, env, metrics, train

from comlrl.models import cache_root
from comlrl.run.checkpoint import checkpoint_step, latest_checkpoint

HERE = Path(__file__).resolve().parent
ARGS = ["--config", "configs/align_T2_G4.yaml", *TINY]


def _files(run: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def _signalled_run(cmd: list[str], ready: Callable[[], bool], sig: int) -> tuple[int, str]:
    """Start the trainer, send `sig` once `ready()` holds; its exit status and stderr."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 600
    while not ready():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
    return proc.returncode, err


@pytest.mark.slow
def test_ctrl_c_mid_run_is_one_line_exit_130_and_the_checkpoint_resumes(tmp_path, tiny_model):
    run = tmp_path / "run"
    cmd = [sys.executable, str(ENTRY), *ARGS, "training.steps=50", "training.save_every=1", "model.max_new_tokens=48",
           "evaluation.samples=0", "evaluation.probe_problems=0",  # greedy only: the stop is what is tested
           f"training.output_dir={run}"]
    # step 1 done: step 2 is running
    rc, err = _signalled_run(cmd, (run / "checkpoints" / "step-1" / "meta.json").is_file, signal.SIGINT)
    assert rc == 130, err[-3000:]
    k = checkpoint_step(latest_checkpoint(run / "checkpoints"))
    assert k >= 1
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == (f"interrupted during step {k + 1}; checkpoint step-{k} is intact; "
                                            f"resume with --resume {run}")
    # `--resume DIR` alone: DIR/config.yaml (the tiny model, 48 tokens, not the defaults), an override on top
    again = train(["--resume", str(run), f"training.steps={k + 1}"])  # the intact checkpoint resumes
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resumed from" in again.stderr and f"(step {k})" in again.stderr, again.stderr[-3000:]
    assert [r["step"] for r in metrics(run)] == list(range(k + 2))
    saved = (run / "config.yaml").read_text()
    assert "name: tiny-random" in saved and "max_new_tokens: 48" in saved and f"steps: {k + 1}" in saved
    assert (run / "checkpoints" / f"step-{k + 1}" / "meta.json").is_file()


@pytest.mark.slow
def test_sigterm_before_the_first_checkpoint_is_one_line_exit_143_and_nothing_blocks_the_same_command(tmp_path,
                                                                                                      tiny_model):
    """SIGTERM is what `timeout`, SLURM and Kubernetes send: it ended the run with status 143, no message, and
    left config.yaml and tensorboard/ that refused the same command. Sent here during the evaluation before
    step 1 (the run's files are written by then)."""
    run = tmp_path / "run"
    cmd = [sys.executable, str(ENTRY), *ARGS, "training.steps=1", f"training.output_dir={run}"]
    rc, err = _signalled_run(cmd, lambda: (run / "config.yaml").is_file() and (run / "tensorboard").is_dir(),
                             signal.SIGTERM)
    assert rc == 143, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    assert err.strip().splitlines()[-1] == ("terminated during step 1; nothing was kept: the same command starts "
                                            "the run again")
    assert not run.exists()  # what the run created is taken back
    again = train([*ARGS, "training.steps=1", f"training.output_dir={run}"])
    assert again.returncode == 0, again.stderr[-3000:]


@pytest.mark.slow
def test_a_run_that_fails_before_its_first_step_leaves_nothing_that_blocks_a_rerun(tmp_path, tiny_model):
    """The reward fails in the evaluation before step 1, after config.yaml and tensorboard/ were opened."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("the user's own file")
    args = [*ARGS, "training.steps=1", f"training.output_dir={run}"]
    plugin_path = os.pathsep.join([str(HERE), env()["PYTHONPATH"]])  # the helpers' path holds reward_fns too
    bad = train([*args, "plugins=[failing_reward]", "task.reward=fails"], extra_env={"PYTHONPATH": plugin_path})
    assert bad.returncode != 0 and "the failing_reward plugin failed on purpose" in bad.stderr
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]  # what was there before, nothing more
    ok = train(args)  # the same command, with a reward that works
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert [r["step"] for r in metrics(run)] == [0, 1] and (run / "notes.txt").read_text() == "the user's own file"
    assert any(line.startswith("done: 1 step; outputs in") for line in ok.stdout.splitlines()), ok.stdout


@pytest.mark.parametrize("where", ["/sys/kernel/comlrl-run", "/proc/comlrl-run"])
def test_an_unwritable_output_dir_is_one_line_before_anything_loads(where):
    """It was a 26-line PermissionError traceback after the model loaded."""
    res = train([*ARGS, "training.steps=1", f"training.output_dir={where}"], timeout=300)
    assert res.returncode == 2, res.stderr[-3000:]
    [line] = res.stderr.strip().splitlines()
    assert line.startswith(f"config error: training.output_dir='{where}' cannot be written (")
    assert line.endswith("); choose a directory this user can write")
    assert "sandbox" not in res.stderr and not Path(where).exists()


def test_wandb_without_a_login_is_refused_before_anything_loads(tmp_path):
    pytest.importorskip("wandb")
    home, run = tmp_path / "home", tmp_path / "run"
    home.mkdir()
    no_login = {"HOME": str(home), "WANDB_CONFIG_DIR": str(home / "wandb-config"), "WANDB_API_KEY": None,
                "WANDB_MODE": None, "WANDB_IDENTITY_TOKEN_FILE": None, "NETRC": None,
                "COMLRL_CACHE": str(cache_root())}  # the tiny model stays where it is
    res = train([*ARGS, "training.steps=1", f"training.output_dir={run}", "logging.wandb=true"], extra_env=no_login,
                timeout=300)
    assert res.returncode == 2, res.stderr[-3000:]
    assert res.stderr.strip().splitlines() == [
        "config error: logging.wandb=true but W&B has no login here (no WANDB_API_KEY, no `wandb login`): run "
        "`wandb login`, set WANDB_API_KEY, or set WANDB_MODE=offline to keep the run local (`wandb sync` uploads "
        "it later)"]
    assert not run.exists()  # so the same command with WANDB_MODE=offline is not refused


def test_an_output_dir_that_is_a_file_is_one_line_at_load(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("x")
    t0 = time.monotonic()
    res = train([*ARGS, f"training.output_dir={notes}"], timeout=120)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [
        f"config error: training.output_dir={str(notes)!r} is not allowed; expected a directory path ({notes} is "
        "a file)"]
    assert time.monotonic() - t0 < 30 and notes.read_text() == "x"


def test_the_readme_quick_start_command_ends_with_the_one_line_and_exit_2():
    """The README's single-process form: no launcher's traceback after the line, and the line's own exit code."""
    [quick] = [line for line in (ROOT / "README.md").read_text().splitlines() if "bash scripts/install.sh &&" in line]
    cmd = [str(VENV_BIN / Path(word).name) if word.startswith(".venv/bin/") else word
           for word in quick.split("&&", 1)[1].split()]
    res = subprocess.run([*cmd, "magrpo.joint_mode=diagonal"], cwd=ROOT, env=env(), capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 2, res.stderr[-3000:]
    assert res.stderr.strip().splitlines() == [
        "config error: magrpo.joint_mode='diagonal' is not allowed; expected one of: align, cross"]


@pytest.mark.parametrize(("extra", "refusal"), [
    ({"WANDB_MODE": "offline"}, None),
    ({"WANDB_MODE": "disabled"}, None),
    ({"WANDB_API_KEY": "k" * 40}, None),  # looked for, not sent: no network needed
    ({"WANDB_MODE": "sometimes"}, "config error: logging.wandb=true but W&B's settings are refused: mode='sometimes': "
                                  "Input should be 'online', 'offline', "),
    ({"WANDB_API_KEY": "short"}, "config error: logging.wandb=true but W&B refuses the login: WANDB_API_KEY invalid: "
                                 "API key must have 40+ characters, has 5."),
])
def test_the_wandb_check_passes_offline_or_with_a_key_and_names_what_is_wrong(tmp_path, extra, refusal):
    pytest.importorskip("wandb")
    home = tmp_path / "home"
    e = {k: v for k, v in env().items() if not k.startswith("WANDB_")}
    e.update(HOME=str(home), WANDB_CONFIG_DIR=str(home / "wandb-config"), WANDB_DIR=str(tmp_path), **extra)
    # The check starts no W&B service thread or process: on CI (no network) such a service's exit hung the
    # interpreter for over 120 s after the check had printed "ok" (the CI run of 2026-11-25).
    code = ("import threading\nfrom comlrl.config.schema import ConfigError\n"
            "from comlrl.run.outputs import check_wandb\n"
            "try:\n    check_wandb()\nexcept ConfigError as exc:\n    print(exc)\nelse:\n    print('ok')\n"
            "assert not [t.name for t in threading.enumerate() if t.name.startswith('wandb')]\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=e, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr[-3000:]
    [line] = res.stdout.strip().splitlines()
    if refusal is None:
        assert line == "ok" and not res.stderr.strip(), res.stderr
    else:
        assert line.startswith(refusal) and "\n" not in line


@pytest.mark.slow
def test_checkpoints_by_default_a_truncated_one_is_one_line_and_an_earlier_one_resumes(tmp_path, tiny_model):
    """Defects 3 and 5: no save_every given, every step is checkpointed and the newest two kept; a checkpoint file
    cut short (a full disk) was a 24-28-line traceback naming no file: one line naming the file and the previous
    intact checkpoint, which `--resume <run>/checkpoints/step-<k>` goes on from."""
    run = tmp_path / "run"
    first = train([*ARGS, "training.steps=3", "evaluation.samples=0", "evaluation.probe_problems=0",
                   f"training.output_dir={run}"])
    assert first.returncode == 0, first.stderr[-3000:]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-2", "step-3"]
    _resume_of_the_finished_run_says_so_and_changes_nothing(run)
    optimizer = run / "checkpoints" / "step-3" / "optimizer.pt"
    size = optimizer.stat().st_size
    optimizer.write_bytes(optimizer.read_bytes()[: size // 2])
    more = train(["--resume", str(run), "training.steps=4"])
    assert more.returncode == 2, more.stderr[-3000:]
    assert more.stderr.strip().splitlines()[-1] == (
        f"checkpoint error: {run}/checkpoints/step-3/optimizer.pt is {size // 2} bytes, {size} when written "
        f"(truncated); the previous intact checkpoint is {run}/checkpoints/step-2: resume from it with --resume "
        f"{run}/checkpoints/step-2")
    again = train(["--resume", str(run / "checkpoints" / "step-2"), "training.steps=4"])
    assert again.returncode == 0, again.stderr[-3000:]
    assert "(step 2)" in again.stderr and [r["step"] for r in metrics(run)] == [0, 1, 2, 3, 4]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-3", "step-4"]  # step-3 written anew


def _resume_of_the_finished_run_says_so_and_changes_nothing(run: Path) -> None:
    """A resume with a lower step count is refused, one with the same count has nothing to do; neither loads
    anything or touches a file (on the checkpoint test's finished 3-step run: one run less to train)."""
    before = _files(run)
    lower = train(["--resume", str(run), "training.steps=1"])
    assert lower.returncode == 2, lower.stderr[-3000:]
    assert lower.stderr.strip().splitlines() == [
        f"config error: training.steps=1 is below the 3 steps {run} has trained; a run is not cut back: pass "
        "training.steps=4 or more to train further, or start a new run in another training.output_dir"]
    same = train(["--resume", str(run)])
    assert same.returncode == 0, same.stderr[-3000:]
    assert same.stdout.strip().splitlines() == [
        f"nothing to do: {run} has trained all 3 steps of training.steps=3; pass training.steps=4 or more to "
        "train further"]
    assert "sandbox" not in same.stderr and "sandbox" not in lower.stderr  # nothing was loaded
    assert _files(run) == before  # config.yaml, metrics, trees, checkpoints, plots: byte for byte


def test_a_dataset_whose_test_does_not_parse_is_one_line_at_load(tmp_path):
    """It trained until a policy first wrote code that compiled for that problem, then stopped with a traceback."""
    data = tmp_path / "data.jsonl"
    rows = [{"task_id": f"t/{i}", "prompt": f'def add{i}(a, b):\n    """Add."""\n', "entry_point": f"add{i}",
             "test": f"def check(candidate):\n    assert candidate(1, 2) == {3 + i}\n"} for i in range(4)]
    rows[3]["test"] = "def check(candidate):\n    assert candidate(1, 2) ==\n"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = tmp_path / "run"
    res = train([*ARGS, "dataset.name=jsonl", f"dataset.path={data}", f"training.output_dir={run}"], timeout=120)
    assert res.returncode == 2, res.stderr[-3000:]
    last = res.stderr.strip().splitlines()[-1]
    assert last == f"error: {data}:4: field 'test' does not parse: line 2: invalid syntax"
    assert not (run / "metrics.jsonl").exists()
