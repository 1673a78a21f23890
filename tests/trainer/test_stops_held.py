"""comlrl.run.guard.stops_held: a stop inside the block is acted on when the block ends, a second one at once,
through the handlers the block replaced. Real signals to this process; no model."""

from __future__ import annotations

import signal
import threading

import pytest

from comlrl.run.guard import stops_held


class Stop(Exception):
    pass


@pytest.fixture
def handlers():
    """SIGINT and SIGTERM handlers that raise Stop(signum), as the run guard's first_signal raises."""
    seen: list[int] = []

    def handler(signum, frame):
        seen.append(signum)
        raise Stop(signum)

    before = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield handler, seen
    for sig, h in before.items():
        signal.signal(sig, h)


def test_a_stop_inside_the_block_is_acted_on_when_it_ends(handlers):
    handler, seen = handlers
    done = []
    with pytest.raises(Stop) as stop:
        with stops_held():
            signal.raise_signal(signal.SIGTERM)
            done.append("the rest of the block")
    assert done == ["the rest of the block"] and seen == [signal.SIGTERM] and stop.value.args == (signal.SIGTERM,)
    assert signal.getsignal(signal.SIGTERM) is handler and signal.getsignal(signal.SIGINT) is handler


def test_a_second_stop_inside_the_block_is_acted_on_at_once(handlers):
    handler, seen = handlers
    done = []
    with pytest.raises(Stop) as stop:
        with stops_held():
            signal.raise_signal(signal.SIGINT)
            signal.raise_signal(signal.SIGTERM)  # the user insists: leave now
            done.append("never")
    assert done == [] and seen == [signal.SIGTERM] and stop.value.args == (signal.SIGTERM,)
    assert signal.getsignal(signal.SIGTERM) is handler and signal.getsignal(signal.SIGINT) is handler


def test_no_stop_changes_nothing(handlers):
    handler, seen = handlers
    with stops_held():
        pass
    assert seen == [] and signal.getsignal(signal.SIGINT) is handler and signal.getsignal(signal.SIGTERM) is handler


def test_python_s_own_ctrl_c_handler_raises_keyboard_interrupt_when_the_block_ends():
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        done = []
        with pytest.raises(KeyboardInterrupt):
            with stops_held():
                signal.raise_signal(signal.SIGINT)
                done.append("the rest of the block")
        assert done == ["the rest of the block"]
    finally:
        signal.signal(signal.SIGINT, before)


def test_off_the_main_thread_the_block_runs_as_it_is(handlers):
    handler, _ = handlers
    ran, errors = [], []

    def body():
        try:
            with stops_held():
                ran.append(signal.getsignal(signal.SIGTERM))
        except Exception as exc:  # signal.signal off the main thread raises ValueError
            errors.append(exc)

    worker = threading.Thread(target=body)
    worker.start()
    worker.join()
    assert errors == [] and ran == [handler]
