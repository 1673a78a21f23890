"""The Python API (issue 24, item D): `from comlrl import load_config, train`, an in-memory dataset, the
run's metrics and paths back; the example of docs/python-api.md runs as written."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from comlrl.config.schema import ConfigError

ROOT = Path(__file__).resolve().parents[1]
TEXT = ["task.name=text", "magrpo.num_agents=1", "task.reward_funcs=[reward_fns:length]", "dataset.eval_size=1"]


def test_import_stays_light() -> None:
    code = ("import sys, comlrl\nfrom comlrl import load_config, train, TrainResult, RunConfig\n"
            "cfg = load_config(None, ['training.steps=1'])\n"
            "print(sorted(m for m in ('torch', 'transformers', 'accelerate', 'peft', 'datasets') if m in sys.modules))")
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "[]"


def test_load_config_takes_a_run_config_and_leaves_it_unchanged() -> None:
    from comlrl import load_config

    base = load_config(None, ["training.steps=3"])
    again = load_config(base, ["magrpo.num_generations=5"])
    assert (again.training.steps, again.magrpo.num_generations) == (3, 5) and base.magrpo.num_generations == 4


def test_a_lambda_is_accepted_and_named_in_this_process(tmp_path: Path) -> None:
    from comlrl import load_config, train

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 0}\n')  # stops train() right after the functions are named
    cfg = load_config(None, [*TEXT, f"training.output_dir={run}"])
    with pytest.raises(ConfigError, match="already holds a run"):  # not "cannot be imported by that name"
        train(cfg, dataset=[{"prompt": "hi"}] * 3, reward_funcs=[lambda completions, **kw: [0.0] * len(completions)])


@pytest.mark.parametrize(("dataset", "error", "message"), [
    # rows counted from 1, as every loader counts them; the list index beside it
    ([{"prompt": "a", "when": object()}], "DatasetError",
     r"^dataset: row 1 \(dataset\[0\]\), column 'when': object cannot be written"),
    ("rows.jsonl", "ConfigError", r"^config error: dataset: expected a list of dicts or a datasets.Dataset, got str$"),
    ([{"prompt": "a"}, "b"], "ConfigError",
     r"^config error: dataset: row 2 \(dataset\[1\]\) is a str, expected a dict$"),
])
def test_bad_rows_are_one_line(tmp_path: Path, dataset: object, error: str, message: str) -> None:
    from comlrl import load_config, train

    cfg = load_config(None, [*TEXT, f"training.output_dir={tmp_path / 'run'}"])
    with pytest.raises(Exception) as err:  # noqa: PT011 - the type is checked by name below
        train(cfg, dataset=dataset)
    assert type(err.value).__name__ == error and re.match(message, str(err.value)), str(err.value)


def test_an_earlier_run_is_refused_before_its_dataset_is_touched(tmp_path: Path) -> None:
    from comlrl import load_config, train

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 0}\n')
    (run / "dataset.jsonl").write_text('{"prompt": "old"}\n')
    cfg = load_config(None, [*TEXT, f"training.output_dir={run}"])
    with pytest.raises(ConfigError, match="already holds a run"):
        train(cfg, dataset=[{"prompt": "new"}] * 3)
    assert (run / "dataset.jsonl").read_text() == '{"prompt": "old"}\n'


def example() -> str:
    text = (ROOT / "docs" / "python-api.md").read_text()
    [code] = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    return code


@pytest.mark.slow
def test_the_documented_example_trains_and_returns_metrics_and_paths(tmp_path: Path) -> None:
    script = tmp_path / "example.py"
    script.write_text(example())
    env = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    out = {line.split(" ", 1)[0]: line for line in res.stdout.splitlines() if line.split(" ", 1)[0] in
           ("reward", "held-out", "adapters")}
    run = tmp_path / "runs" / "api_demo"
    assert out["adapters"] == f"adapters {run / 'final'}"
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [0, 1, 2] and metrics[-1]["samples"] > 0 and metrics[-1]["grad_norm"] > 0
    assert out["reward"] == f"reward {metrics[-1]['reward_mean']} correct {metrics[-1]['reward/correct']}"
    assert metrics[0]["eval/problems"] == 4 and "eval/reward/concise" in metrics[-1]
    rows = [json.loads(x) for x in (run / "dataset.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and rows[0] == {"prompt": "What is 0 + 0? Answer with the number.", "answer": "0"}
    config = (run / "config.yaml").read_text()
    assert "- __main__:correct" in config and f"path: {run / 'dataset.jsonl'}" in config
    trees = [json.loads(x) for x in (run / "trees.jsonl").read_text().splitlines()]
    assert all({"correct", "concise"} <= set(d["components"]) for t in trees for d in t["reward_details"])
    # a text task runs no model-written code: no sandbox starts, and no empty cooperation plot is drawn
    assert "sandbox isolation level" not in res.stderr and (run / "plots" / "reward.png").is_file()
    assert not (run / "plots" / "cooperation.png").exists()


FAILS_THEN_TRAINS = """
import json, sys
from pathlib import Path
from comlrl import load_config, train

def broken(completions, **kwargs):
    raise RuntimeError("a reward that fails on purpose")

def length(completions, **kwargs):
    return [len(c) / 100 for c in completions]

run = Path(sys.argv[1])
cfg = load_config(None, ["task.name=text", "magrpo.num_agents=1", "magrpo.num_turns=1", "model.name=tiny-random",
                         "model.max_new_tokens=4", "dataset.eval_size=1", "evaluation.samples=1",
                         "evaluation.probe_problems=0", "training.steps=1", "logging.progress_bar=false",
                         f"training.output_dir={run}"])
rows = [{"prompt": f"Say {i}"} for i in range(4)]
try:
    train(cfg, dataset=rows, reward_funcs=[broken])
except Exception as exc:
    print("failed:", str(exc).splitlines()[0][:200])
print("left:", json.dumps(sorted(p.name for p in run.iterdir()) if run.exists() else None))
result = train(cfg, dataset=rows, reward_funcs=[length])
print("steps:", json.dumps([m["step"] for m in result.metrics]))
"""


@pytest.mark.slow
def test_a_run_that_fails_before_its_first_step_takes_back_its_files_so_the_fixed_call_runs(tmp_path: Path) -> None:
    """train() left config.yaml, dataset.jsonl and tensorboard/ behind, and the fixed call was refused as
    "already holds a run" (the command line took them back already)."""
    script = tmp_path / "script.py"
    script.write_text(FAILS_THEN_TRAINS)
    env = {"PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    res = subprocess.run([sys.executable, str(script), str(tmp_path / "run")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    lines = dict(line.split(": ", 1) for line in res.stdout.splitlines() if ": " in line)
    assert "a reward that fails on purpose" in lines["failed"]
    assert json.loads(lines["left"]) is None  # the run made the folder: it is gone with what it wrote
    assert json.loads(lines["steps"]) == [0, 1]
