"""Console scripts (setup.cfg) and the scripts/*.py shims over them: one main per command, no sys.path edits."""

from __future__ import annotations

import configparser
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIMS = {"train": "comlrl.cli.train", "evaluate": "comlrl.cli.evaluate", "export": "comlrl.cli.export",
         "show_tree": "comlrl.cli.show_tree", "plot_metrics": "comlrl.cli.plot_metrics",
         "generate_traces": "comlrl.cli.generate_traces", "serve": "comlrl.cli.serve"}


def console_scripts() -> dict[str, str]:
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    lines = [x.strip() for x in cfg["options.entry_points"]["console_scripts"].splitlines() if x.strip()]
    return dict(tuple(part.strip() for part in line.split("=", 1)) for line in lines)  # type: ignore[misc]


def test_every_console_script_names_a_main_and_every_shim_has_one() -> None:
    scripts = console_scripts()
    assert set(scripts) == {"comlrl-train", "comlrl-evaluate", "comlrl-export", "comlrl-show-tree", "comlrl-plot",
                            "comlrl-traces", "comlrl-serve"}
    targets = set()
    for target in scripts.values():
        module, attr = target.split(":")
        assert callable(getattr(importlib.import_module(module), attr)), target
        targets.add(module)
    assert targets == set(SHIMS.values())  # a shim per command, a command per shim
    # the scripts that are no command: the docs' generator (docs/reference/config.md)
    assert {p.stem for p in (ROOT / "scripts").glob("*.py")} - {"gen_docs_reference"} == set(SHIMS)


@pytest.mark.parametrize("shim", sorted(SHIMS))
def test_shims_import_the_cli_main_and_never_edit_sys_path(shim: str) -> None:
    text = (ROOT / "scripts" / f"{shim}.py").read_text()
    assert "sys.path" not in text
    assert f"from {SHIMS[shim]} import main" in text


def test_train_shim_imports_nothing_heavy_before_quiet_console() -> None:
    """quiet_console() must run before torch/transformers are imported (some settings are read at import)."""
    code = ("import sys; sys.path.insert(0, 'scripts'); import train; "
            "print(sorted(m for m in ('torch', 'transformers', 'comlrl.run.trainer') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_train_help_lists_the_top_level_plugins_key() -> None:
    res = subprocess.run([sys.executable, "scripts/train.py", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert "top level: plugins" in res.stdout and "  task: name" in res.stdout


@pytest.mark.parametrize("shim", sorted(SHIMS))
def test_help_shows_the_description_once(shim: str) -> None:
    res = subprocess.run([sys.executable, f"scripts/{shim}.py", "--help"], cwd=ROOT, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    first = importlib.import_module(SHIMS[shim]).__doc__.strip().splitlines()[0]
    assert res.stdout.count(first) == 1, res.stdout


@pytest.mark.parametrize("shim", sorted(SHIMS))
def test_every_console_script_tells_its_version(shim: str) -> None:
    from importlib.metadata import version

    res = subprocess.run([sys.executable, f"scripts/{shim}.py", "--version"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"comlrl {version('comlrl')}"


def test_the_train_cli_sets_a_short_openmp_spin_before_torch_loads() -> None:
    """Issue 36, defect 13: spinning OpenMP threads collapsed the vLLM CPU engine beside another process
    (benchmarks/vllm_contention.py); OpenMP reads its environment once, when torch loads."""
    code = ("import os, sys\nfrom comlrl.cli.train import main\n"
            "main(['--config', 'configs/align_T2_G4.yaml', '--print-config'])\n"
            "print(os.environ.get('GOMP_SPINCOUNT'), 'torch' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "10000 False"
    mine = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**env, "GOMP_SPINCOUNT": "300000"})
    assert mine.stdout.strip().splitlines()[-1] == "300000 False"  # the user's own setting is kept
    policy = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**env, "OMP_WAIT_POLICY": "ACTIVE"})
    assert policy.stdout.strip().splitlines()[-1] == "None False"  # a spin count would override their policy
