"""An installed OpenEnv environment's app (`task.openenv.app: module:attribute`) served on loopback for the run.

The app is what the environment package builds with `openenv.core.env_server.http_server.create_app`; uvicorn
serves it on 127.0.0.1 at a free port in a thread of the trainer's process, so the run talks to it through the
same client and WebSocket sessions as to any remote server.
"""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from comlrl.errors import ConfigError
from comlrl.tasks.reward_funcs import resolve

START_TIMEOUT_S = 30.0


def load_app(spec: str) -> Any:
    """The ASGI app `module:attribute` names, imported as the task's reward functions are (one resolver for a
    user's `module:name`); a one-line ConfigError naming task.openenv.app otherwise."""
    return resolve(spec, key="task.openenv.app")


@dataclass
class LocalServer:
    """A running uvicorn server of one app; `stop()` ends it."""

    url: str
    server: Any
    thread: threading.Thread

    @classmethod
    def start(cls, spec: str) -> LocalServer:
        import uvicorn

        app = load_app(spec)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                               ws="websockets-sansio"))
        thread = threading.Thread(target=server.run, name="openenv-server", daemon=True)
        thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise ConfigError(f"config error: task.openenv.app={spec!r} did not start serving on 127.0.0.1 "
                                  f"within {START_TIMEOUT_S:.0f} s")
            time.sleep(0.05)
        return cls(f"http://127.0.0.1:{port}", server, thread)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
