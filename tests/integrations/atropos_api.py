"""Atropos's real API server (`run-api` of atroposlib 0.4.0) on a free loopback port, and an environment's
side of its protocol as plain HTTP (what `BaseEnv` sends: register-env, then scored groups)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

RUN_API = Path(sys.executable).parent / "run-api"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url + path, data=data, method="GET" if body is None else "POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


class RunApi:
    """`run-api --host 127.0.0.1 --port P` in its own process; `stop()` kills it (a server going away)."""

    def __init__(self, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log_path, "w")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen([str(RUN_API), "--host", "127.0.0.1", "--port", str(self.port)],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            try:
                call(self.url, "/")
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"run-api did not start: {log_path.read_text()[-500:]}") from None
                time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def register_env(url: str, group_size: int, name: str = "test_env", timeout: float = 60) -> int:
    """An environment registers (the API answers "wait for trainer to start" until the trainer's first
    /batch); its env_id."""
    deadline = time.monotonic() + timeout
    while True:
        answer = call(url, "/register-env", {"max_token_length": 4096, "desired_name": name, "weight": 1.0,
                                             "group_size": group_size})
        if answer.get("status") == "success":
            return int(answer["env_id"])
        if time.monotonic() > deadline:
            raise RuntimeError(f"the API never let the environment register: {answer}")
        time.sleep(0.2)


def send_group(url: str, group: dict[str, Any], env_id: int) -> Any:
    return call(url, "/scored_data", {**group, "env_id": env_id})
