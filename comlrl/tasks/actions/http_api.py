"""The task's API: a real HTTP server on 127.0.0.1 serving each task's scripted endpoints, one state per
trajectory (the request names its trajectory in the `TRAJECTORY_HEADER`)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

TRAJECTORY_HEADER = "X-Comlrl-Trajectory"


def is_subset(want: Any, got: Any) -> bool:
    """`want` is contained in `got`: dict keys recursively, everything else by equality."""
    if isinstance(want, dict):
        return isinstance(got, dict) and all(k in got and is_subset(v, got[k]) for k, v in want.items())
    return bool(want == got)


@dataclass(frozen=True)
class Endpoint:
    """One scripted endpoint. `store` saves the JSON body under a key; `from_store` answers with it;
    `require` rejects bodies without those fields (422); `when` lists conditional answers
    `{"stored": {key: subset}, "status": .., "response": ..}` tried before the default."""

    method: str
    path: str
    status: int = 200
    response: Any = None
    store: str | None = None
    from_store: str | None = None
    require: Mapping[str, Any] | None = None
    when: tuple[Mapping[str, Any], ...] = ()


@dataclass
class ApiState:
    """Calls made and values stored by one trajectory (forked with its workspace)."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    store: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ApiSpec:
    hosts: tuple[str, ...]
    endpoints: tuple[Endpoint, ...] = ()

    def answer(self, method: str, path: str, body: Any, state: ApiState) -> tuple[int, Any]:
        path = "/" + path.strip("/")
        same_path = [e for e in self.endpoints if e.path.rstrip("/") == path.rstrip("/") or e.path == path]
        ep = next((e for e in same_path if e.method == method), None)
        if ep is None:
            listing = [f"{e.method} {e.path}" for e in self.endpoints]
            if same_path:
                return 405, {"error": f"method {method} not allowed on {path}",
                             "allowed": [e.method for e in same_path]}
            return 404, {"error": f"no endpoint {method} {path}", "endpoints": listing}
        if ep.require is not None and not is_subset(dict(ep.require), body):
            return 422, {"error": "the request body must contain " + json.dumps(dict(ep.require))}
        if ep.store is not None:
            state.store[ep.store] = body
        for cond in ep.when:
            if all(is_subset(v, state.store.get(k)) for k, v in dict(cond.get("stored", {})).items()):
                return int(cond.get("status", ep.status)), cond.get("response")
        if ep.from_store is not None and ep.from_store in state.store:
            return ep.status, state.store[ep.from_store]
        return ep.status, ep.response


class ApiServer:
    """A threaded HTTP server on 127.0.0.1:<free port>; `resolve(trajectory id)` gives (spec, state)."""

    def __init__(self, resolve: Callable[[str], tuple[ApiSpec, ApiState] | None]) -> None:
        self._resolve = resolve
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _go(self) -> None:
                server._handle(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _go  # noqa: N815 - http.server's naming

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="comlrl-action-api", daemon=True)
        self._thread.start()

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        n = min(int(h.headers.get("content-length", 0) or 0), 65536)
        raw = h.rfile.read(n) if n else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", errors="replace")
        found = self._resolve(h.headers.get(TRAJECTORY_HEADER, ""))
        if found is None:
            status, payload = 403, {"error": "unknown client"}
        else:
            spec, state = found
            path = urlsplit(h.path).path
            with self.lock:
                status, payload = spec.answer(h.command, path, body, state)
                state.calls.append({"method": h.command, "path": "/" + path.strip("/"), "body": body,
                                    "status": status})
        data = json.dumps(payload).encode()
        try:
            h.send_response(status)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
