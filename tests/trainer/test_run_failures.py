"""How a run ends when it does not end well: Ctrl-C, a failure before its first step, a resume with nothing to
do, trackers without a login, the README's launch form. Real subprocesses on the tiny model."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from trainer_helpers import ROOT, TINY, env, train

from comlrl.models import cache_root

ARGS = ["--config", "configs/align_T2_G4.yaml", *TINY]


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
    code = ("from comlrl.config import ConfigError\nfrom comlrl.run_outputs import check_wandb\n"
            "try:\n    check_wandb()\nexcept ConfigError as exc:\n    print(exc)\nelse:\n    print('ok')\n")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=e, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-3000:]
    [line] = res.stdout.strip().splitlines()
    if refusal is None:
        assert line == "ok" and not res.stderr.strip(), res.stderr
    else:
        assert line.startswith(refusal) and "\n" not in line
