"""OpenEnv sessions driven through OpenEnv's own client, many at once, from the trainer's synchronous code.

Each episode is one WebSocket session of `openenv.core.GenericEnvClient` (the server keeps its state). The clients
live on one event loop in a background thread; a level of the tree resets or steps all its episodes in one
`gather`, so G episodes cost about one round trip. A server that stops answering is a `RunStopped` naming it
(the run guard ends the step with the checkpoint intact); an error the server returns for one episode is that
episode's (`EpisodeFailed`), never the run's.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import Any

from comlrl.errors import ConfigError, RunStopped


class EpisodeFailed(Exception):
    """The server answered one episode's reset or step with an error (a bad action, the environment raised)."""


@dataclass(frozen=True)
class Outcome:
    """One reset or step: the observation (a dict), its reward (None where the environment gives none), done."""

    observation: dict[str, Any]
    reward: float | None
    done: bool


def openenv_client() -> Any:
    """`openenv.core.GenericEnvClient`, or a one-line error saying how to install it."""
    try:
        from openenv.core.generic_client import GenericEnvClient
    except ImportError:
        raise ConfigError("config error: task.name=openenv needs the `openenv` extra: pip install -e '.[openenv]' "
                          "(openenv-core 0.3.0)") from None
    return GenericEnvClient


class Sessions:
    """Open sessions to one OpenEnv server at `url`, on a private event loop."""

    def __init__(self, url: str, timeout_s: float = 60.0) -> None:
        self.url, self.timeout_s = url, timeout_s
        self._client_type = openenv_client()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="openenv", daemon=True)
        self._thread.start()

    def _run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def open(self, count: int) -> list[Any]:
        """`count` new sessions; a server that refuses or cannot be reached stops the run in one line."""
        async def one() -> Any:
            client = self._client_type(base_url=self.url, connect_timeout_s=self.timeout_s,
                                       message_timeout_s=self.timeout_s)
            await client.connect()
            return client

        async def many() -> list[Any]:
            return list(await asyncio.gather(*(one() for _ in range(count))))

        try:
            return self._run(many())
        except Exception as exc:  # noqa: BLE001 - connection refused, capacity reached, handshake failed
            raise RunStopped(f"the OpenEnv server at {self.url} did not open {count} session(s): "
                             f"{type(exc).__name__}: {exc}"[:400]) from None

    def reset(self, clients: Sequence[Any], **kwargs: Any) -> list[Outcome | EpisodeFailed]:
        return self._each([c.reset(**kwargs) for c in clients])

    def step(self, clients: Sequence[Any], actions: Sequence[dict[str, Any]]) -> list[Outcome | EpisodeFailed]:
        return self._each([c.step(a) for c, a in zip(clients, actions, strict=True)])

    def _each(self, calls: list[Coroutine[Any, Any, Any]]) -> list[Outcome | EpisodeFailed]:
        """Every call at once: its outcome, or the episode's failure; a lost connection stops the run."""
        async def many() -> list[Any]:
            return list(await asyncio.gather(*calls, return_exceptions=True))

        out: list[Outcome | EpisodeFailed] = []
        for result in self._run(many()):
            if isinstance(result, BaseException):
                if _lost(result):
                    raise RunStopped(f"the OpenEnv server at {self.url} stopped answering: "
                                     f"{type(result).__name__}: {result}"[:400])
                out.append(EpisodeFailed(f"{type(result).__name__}: {result}"[:300]))
            else:
                reward = result.reward
                out.append(Outcome(dict(result.observation or {}), None if reward is None else float(reward),
                                   bool(result.done)))
        return out

    def close(self, clients: Sequence[Any]) -> None:
        """Close sessions (errors ignored: the episode is over either way)."""
        async def many() -> None:
            await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)

        if clients and self._loop.is_running():
            self._run(many())

    def shutdown(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


def _lost(exc: BaseException) -> bool:
    """A failure of the connection (the server died or hung), not an error it sent back for one episode."""
    if isinstance(exc, (ConnectionError, OSError, asyncio.TimeoutError, TimeoutError)):
        return True
    return type(exc).__module__.startswith("websockets")  # ConnectionClosed and its kin
