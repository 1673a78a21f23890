"""A run stopped while its writer starts the trackers leaves no TensorBoard writer thread behind: the run
guard then takes back the folder, and a live thread writing into it printed a traceback after the one-line
stop (seen in tests/trainer/test_run_failures.py's SIGTERM test, a timing race, twice). The stops are made
deterministic here: right after the writer started the trackers, and halfway through TensorBoard's own start
(its event file and thread existed, the tracker had no writer yet: closing it raised AttributeError, exit 1
instead of 143)."""

from __future__ import annotations

import signal
import threading

import pytest
from torch.utils import tensorboard

from comlrl.config.schema import load_config
from comlrl.run import run_parts, trainer
from comlrl.run.guard import Interrupted, guarded_run
from comlrl.run.outputs import RunWriter


class InterruptedWriter(RunWriter):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)  # the trackers are running now
        raise KeyboardInterrupt


def _tensorboard_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.is_alive() and "tensorboard" in type(t).__module__]


class SignalledSummaryWriter(tensorboard.SummaryWriter):
    def _get_file_writer(self):  # called by __init__: the event file and its thread exist once it returns
        file_writer = super()._get_file_writer()
        signal.raise_signal(signal.SIGTERM)
        return file_writer


def _config(run):
    return load_config(None, ["model.name=tiny-random", "training.torch_threads=1", "rollout.engine=hf",
                              "logging.progress_bar=false", f"training.output_dir={run}"])


def test_sigterm_halfway_through_tensorboards_start_is_the_one_line_stop_and_no_thread_is_left(
        tmp_path, monkeypatch, tiny_model):
    monkeypatch.setattr(tensorboard, "SummaryWriter", SignalledSummaryWriter)
    run = tmp_path / "run"
    before = set(_tensorboard_threads())
    with pytest.raises(Interrupted) as stop:
        guarded_run(_config(run), trainer.run)
    assert stop.value.status == 143
    assert str(stop.value) == "terminated during step 1; nothing was kept: the same command starts the run again"
    assert not set(_tensorboard_threads()) - before
    assert not run.exists()  # taken back, with no thread left to write into it
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handlers are the ones before the run


def test_an_interrupted_writer_stops_the_trackers_it_started(tmp_path, monkeypatch, tiny_model):
    monkeypatch.setattr(run_parts, "RunWriter", InterruptedWriter)
    cfg = _config(tmp_path / "run")
    before = set(_tensorboard_threads())
    with pytest.raises(KeyboardInterrupt):
        trainer.run(cfg)
    assert not set(_tensorboard_threads()) - before


class _StoppedInFinalizer:
    """A library object whose finalizer runs when the stop arrives (matplotlib's, while the plots are drawn)."""

    def __del__(self) -> None:
        signal.raise_signal(signal.SIGTERM)


def test_sigterm_while_the_report_is_written_is_the_one_line_stop_with_143(tmp_path, monkeypatch, tiny_model):
    written = trainer.write_report

    def report(out, finished):
        _StoppedInFinalizer()  # dropped at once: its finalizer receives the signal
        return written(out, finished)

    monkeypatch.setattr(trainer, "write_report", report)
    run = tmp_path / "run"
    cfg = _config(run)
    cfg.training.steps, cfg.dataset.eval_size, cfg.evaluation.probe_problems = 1, 0, 0
    with pytest.raises(Interrupted) as stop:
        guarded_run(cfg, trainer.run)
    assert stop.value.status == 143
    assert str(stop.value) == (f"terminated after step 1, writing the final outputs; checkpoint step-1 is intact; "
                               f"resume with --resume {run}")
    assert (run / "final").is_dir()
