"""Named float counters behind one lock: clients count calls, retries, tokens and cost from a thread pool."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Protocol


class CounterSink(Protocol):
    """What a client needs of its counters (feedback's `FeedbackMetrics` is one)."""

    def inc(self, name: str, value: float = 1.0) -> None: ...

    def snapshot(self, reset: bool = False) -> dict[str, float]: ...


class Counters:
    """Cumulative counters; `known` names are present (zero) in every snapshot, for stable dashboard keys."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        self._known = tuple(known)
        self._lock = threading.Lock()
        self._values: dict[str, float] = dict.fromkeys(self._known, 0.0)

    def inc(self, name: str, value: float = 1.0) -> None:
        with self._lock:
            self._values[name] = self._values.get(name, 0.0) + float(value)

    def get(self, name: str) -> float:
        with self._lock:
            return self._values.get(name, 0.0)

    def snapshot(self, reset: bool = False) -> dict[str, float]:
        """`{name: value}`; with `reset`, counters restart from zero."""
        with self._lock:
            out = dict(sorted(self._values.items()))
            if reset:
                self._values = dict.fromkeys(self._known, 0.0)
        return out

    def reset(self) -> None:
        self.snapshot(reset=True)
