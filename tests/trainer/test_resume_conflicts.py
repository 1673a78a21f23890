"""A resume keeps what its checkpoint and its paired evaluation depend on (comlrl/run/guard.py:
`resume_conflict`): a change to the weights' shape or to the held-out set is one config-error line naming the
key and the run's value, never a 'damaged checkpoint' that ends in advice to overwrite a good run."""

from __future__ import annotations

import pytest

from comlrl.config.schema import load_config
from comlrl.run.guard import check_resume, resume_conflict

BASE = ["model.name=tiny-random", "training.output_dir=runs/x"]


def _cfg(*extra: str):
    return load_config("configs/align_T2_G4.yaml", [*BASE, *extra])


@pytest.mark.parametrize(("change", "key", "was"), [
    ("agents.lora.r=16", "agents.lora.r", "8"),
    ("model.name=other-model", "model.name", "'tiny-random'"),
    ("agents.mode=full", "agents.mode", "'lora'"),
    ("task.name=code_single magrpo.num_agents=1", "task.name", "'code_collab'"),  # the first key that differs
])
def test_a_change_of_shape_is_named_with_the_runs_value(change: str, key: str, was: str) -> None:
    msg = resume_conflict(_cfg(), _cfg(*change.split()))
    assert msg is not None and msg.startswith(f"config error: --resume runs/x: {key}=")
    assert f"differs from the run's {was} (its checkpoint's weights and optimizer have the run's shape)" in msg
    assert "overwrite" not in msg and "\n" not in msg


@pytest.mark.parametrize(("change", "key"), [
    ("dataset.seed=5", "dataset.seed"),
    ("dataset.eval_size=8", "dataset.eval_size"),
    ("evaluation.samples=2", "evaluation.samples"),
    ("evaluation.seed=7", "evaluation.seed"),
    ("model.temperature=0.3", "model.temperature"),
    ("task.bfcl.examples=0", None),  # another task's section: not this run's, no conflict
])
def test_a_change_of_the_held_out_set_or_its_sampling_is_refused(change: str, key: str | None) -> None:
    msg = resume_conflict(_cfg(), _cfg(change))
    if key is None:
        assert msg is None
    else:
        assert msg is not None and f": {key}=" in msg and "the held-out problems and the paired before/after" in msg


def test_the_tasks_own_section_is_kept() -> None:
    saved = load_config("configs/bfcl_T1_G8.yaml", BASE)
    msg = resume_conflict(saved, load_config("configs/bfcl_T1_G8.yaml", [*BASE, "task.bfcl.categories=[multiple]"]))
    assert msg is not None and ": task.bfcl.categories=['multiple'] differs" in msg


@pytest.mark.parametrize("change", ["training.steps=12", "training.eval_every=2", "training.save_every=3",
                                    "logging.progress_bar=false", "training.save_total_limit=5"])
def test_what_a_resume_may_change_is_accepted(change: str) -> None:
    assert resume_conflict(_cfg(), _cfg(change)) is None


def test_check_resume_reads_the_runs_saved_config(tmp_path) -> None:
    from comlrl.config.schema import to_yaml
    from comlrl.run.checkpoint import write_manifest

    run = tmp_path / "run"
    saved = load_config("configs/align_T2_G4.yaml", ["model.name=tiny-random", f"training.output_dir={run}"])
    run.mkdir()
    (run / "config.yaml").write_text(to_yaml(saved))
    ckpt = run / "checkpoints" / "step-2"
    ckpt.mkdir(parents=True)
    write_manifest(ckpt, 2, 1)
    again = load_config(run / "config.yaml", ["training.resume=true", "dataset.seed=5", "training.steps=7"])
    with pytest.raises(ValueError) as err:
        check_resume(again)
    assert str(err.value).startswith(f"config error: --resume {run}: dataset.seed=5 differs from the run's 0 ")
    assert check_resume(load_config(run / "config.yaml", ["training.resume=true", "training.steps=7"])) is None
