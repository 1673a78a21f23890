"""Checkpoint folders without a model (issue 36, defects 3 and 5, `save_total_limit`, resume from a chosen
checkpoint): which checkpoints are kept, how a damaged one is found before anything loads, where a resume
starts. The end-to-end run is in test_run_failures.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from comlrl.config.schema import ConfigError, load_config
from comlrl.run.checkpoint import (
    CheckpointError,
    damage,
    intact_before,
    prune_checkpoints,
    resume_point,
    write_manifest,
)


def _checkpoint(root: Path, step: int, files: dict[str, bytes] | None = None) -> Path:
    path = root / f"step-{step}"
    (path / "weights").mkdir(parents=True)
    for name, data in (files or {"optimizer.pt": b"o" * 10, "weights/adapter_model.safetensors": b"w" * 20}).items():
        (path / name).write_bytes(data)
    write_manifest(path, step, world_size=1)
    return path


def test_the_manifest_records_every_file_and_its_size(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path, 3)
    meta = json.loads((path / "meta.json").read_text())
    assert meta == {"step": 3, "world_size": 1,
                    "files": {"optimizer.pt": 10, "weights/adapter_model.safetensors": 20}}
    assert damage(path) is None


@pytest.mark.parametrize(("change", "expected"), [
    (lambda p: (p / "optimizer.pt").write_bytes(b"o" * 4), "optimizer.pt is 4 bytes, 10 when written (truncated)"),
    (lambda p: (p / "weights" / "adapter_model.safetensors").unlink(),
     "weights/adapter_model.safetensors is missing"),
    (lambda p: (p / "optimizer.pt").write_bytes(b"o" * 12), "optimizer.pt is 12 bytes, 10 when written (changed)"),
])
def test_a_damaged_file_is_named_before_anything_loads(tmp_path: Path, change, expected: str) -> None:
    path = _checkpoint(tmp_path, 2)
    change(path)
    assert damage(path) == expected


def test_a_checkpoint_without_a_manifest_is_taken_as_it_is(tmp_path: Path) -> None:
    path = _checkpoint(tmp_path, 1)
    (path / "meta.json").write_text(json.dumps({"step": 1, "world_size": 1}))  # written before manifests
    (path / "optimizer.pt").write_bytes(b"")
    assert damage(path) is None


def test_the_previous_intact_checkpoint_is_offered(tmp_path: Path) -> None:
    one, two, three = (_checkpoint(tmp_path, k) for k in (1, 2, 3))
    (two / "optimizer.pt").write_bytes(b"")
    assert intact_before(tmp_path, 3) == one  # step-2 is damaged too
    assert intact_before(tmp_path, 1) is None


def test_load_checkpoint_refuses_a_damaged_one_in_one_line_naming_the_file_and_the_previous(tmp_path: Path) -> None:
    from comlrl.run.checkpoint import load_checkpoint

    _checkpoint(tmp_path, 1)
    two = _checkpoint(tmp_path, 2)
    (two / "optimizer.pt").write_bytes(b"o")
    with pytest.raises(CheckpointError) as err:
        load_checkpoint(None, two)  # type: ignore[arg-type]  # refused before the learner is touched
    assert str(err.value) == (
        f"checkpoint error: {two}/optimizer.pt is 1 bytes, 10 when written (truncated); the previous intact "
        f"checkpoint is {tmp_path}/step-1: resume from it with --resume {tmp_path}/step-1")


@pytest.mark.parametrize(("limit", "kept"), [(None, [1, 2, 3, 4]), (1, [4]), (2, [3, 4]), (5, [1, 2, 3, 4])])
def test_save_total_limit_keeps_the_newest(tmp_path: Path, limit: int | None, kept: list[int]) -> None:
    for k in (1, 2, 3, 4):
        _checkpoint(tmp_path, k)
    (tmp_path / ".step-5.tmp").mkdir()  # a checkpoint being written is not counted or touched
    prune_checkpoints(tmp_path, limit)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".step-5.tmp", *(f"step-{k}" for k in kept)]


def test_a_resume_starts_at_the_chosen_checkpoint_or_the_latest(tmp_path: Path) -> None:
    run = tmp_path / "run"
    for k in (1, 2):
        _checkpoint(run / "checkpoints", k)
    latest = load_config(None, [f"training.output_dir={run}", "training.resume=true"])
    assert resume_point(latest) == run / "checkpoints" / "step-2"
    chosen = load_config(None, [f"training.output_dir={run}", "training.resume=true",
                                f"training.resume_from={run}/checkpoints/step-1"])
    assert resume_point(chosen) == run / "checkpoints" / "step-1"
    assert resume_point(load_config(None, [f"training.output_dir={run}"])) is None


@pytest.mark.parametrize(("over", "message"), [
    (["training.resume_from={run}/checkpoints/step-9"], "config error: training.resume_from='{run}/checkpoints/step-9' "
     "is not allowed; expected a checkpoint folder of this run ({run}/checkpoints/step-<k> with its meta.json)"),
    (["training.resume_from={other}/checkpoints/step-1"], "config error: training.resume_from='{other}/checkpoints/"
     "step-1' is not allowed; expected a checkpoint folder of this run ({run}/checkpoints/step-<k> with its "
     "meta.json)"),
    (["training.save_total_limit=-1"], "config error: training.save_total_limit=-1 is not allowed; expected an "
                                       "integer >= 0 (0: write none) or null (keep every checkpoint)"),
])
def test_bad_checkpoint_keys_are_one_line(tmp_path: Path, over: list[str], message: str) -> None:
    run, other = tmp_path / "run", tmp_path / "other"
    for d in (run, other):
        _checkpoint(d / "checkpoints", 1)
    with pytest.raises(ConfigError) as err:
        load_config(None, [f"training.output_dir={run}", "training.resume=true",
                           *(o.format(run=run, other=other) for o in over)])
    assert str(err.value) == message.format(run=run, other=other)


def test_checkpoints_are_on_by_default() -> None:
    """Ctrl-C in step 2 lost step 1: a checkpoint every step, the newest two kept (docs: what one costs)."""
    t = load_config(None).training
    assert (t.save_every, t.save_total_limit) == (1, 2)


def test_a_whole_checkpoint_of_another_shape_says_the_config_changed_never_to_start_again(tmp_path: Path) -> None:
    """An optimizer (or weights) state of another shape than the model built now: the files are whole, so it is
    not damage; the line says so and points to the run's config, never to training.overwrite."""
    import torch

    from comlrl.run.checkpoint import CheckpointError, _reading

    saved = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))])
    state = saved.state_dict()
    now = torch.optim.AdamW([{"params": [torch.nn.Parameter(torch.zeros(2))]},
                             {"params": [torch.nn.Parameter(torch.zeros(3))]}])
    ckpt = tmp_path / "run" / "checkpoints" / "step-2"
    with pytest.raises(CheckpointError) as err:
        _reading(ckpt, "optimizer.pt", lambda _: now.load_state_dict(state))
    msg = str(err.value)
    assert msg.startswith(f"checkpoint error: {ckpt}/optimizer.pt does not fit this run's model (")
    assert msg.endswith(f"resume with the run's own {tmp_path / 'run' / 'config.yaml'}")
    assert "overwrite" not in msg and "\n" not in msg
    weights = torch.nn.Linear(2, 2)
    with pytest.raises(CheckpointError, match="does not fit this run's model .*size mismatch"):
        _reading(ckpt, "weights", lambda _: weights.load_state_dict(torch.nn.Linear(3, 2).state_dict()))


def test_a_run_that_keeps_no_checkpoint_is_never_told_to_resume_from_one(tmp_path: Path) -> None:
    """training.save_total_limit=0 writes no checkpoint (a CoMLRL script's scratch run): stopped mid-run, the
    line says a resume starts again from step 0, never that a checkpoint is intact."""
    from comlrl.run.guard import stop_line

    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"step": 1}\n{"step": 2}\n')
    cfg = load_config(None, [f"training.output_dir={run}", "training.save_total_limit=0", "training.steps=5"])
    assert stop_line(cfg, "stopped") == (f"stopped during step 3; this run keeps no checkpoint "
                                         f"(training.save_total_limit=0): --resume {run} starts it again from step 0")
