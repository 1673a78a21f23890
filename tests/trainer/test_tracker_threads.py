"""A run stopped while its writer starts the trackers leaves no TensorBoard writer thread behind: the run
guard then takes back the folder, and a live thread writing into it printed a traceback after the one-line
stop (seen once in tests/trainer/test_run_failures.py's SIGTERM test, a timing race). The stop is made
deterministic here: the writer is interrupted right after it started the trackers."""

from __future__ import annotations

import threading

import pytest

from comlrl.config.schema import load_config
from comlrl.run import trainer
from comlrl.run.outputs import RunWriter


class InterruptedWriter(RunWriter):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)  # the trackers are running now
        raise KeyboardInterrupt


def _tensorboard_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.is_alive() and "tensorboard" in type(t).__module__]


def test_an_interrupted_writer_stops_the_trackers_it_started(tmp_path, monkeypatch, tiny_model):
    monkeypatch.setattr(trainer, "RunWriter", InterruptedWriter)
    cfg = load_config(None, ["model.name=tiny-random", "training.torch_threads=1", "rollout.engine=hf",
                             "logging.progress_bar=false", f"training.output_dir={tmp_path / 'run'}"])
    before = set(_tensorboard_threads())
    with pytest.raises(KeyboardInterrupt):
        trainer.run(cfg)
    assert not set(_tensorboard_threads()) - before
