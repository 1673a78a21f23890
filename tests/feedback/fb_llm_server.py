"""A scripted LLM API on 127.0.0.1 for the expert-client tests: chat completions and messages.

Each request takes the next behaviour from the script (then `default`): "ok", "429", "500", "401",
"timeout" (answers after `slow_s`), "malformed" (a cut-off JSON body), "prose" (valid API reply whose
text holds no edits), "echo500" (a 500 whose body repeats the request's auth header, to check
redaction). Bounded: a test sends a handful of requests and `close()` stops the server.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class FakeLLMServer:
    def __init__(self, reply: str = '{"helper": "ok", "main": "ok"}', slow_s: float = 0.6) -> None:
        self.reply = reply
        self.slow_s = slow_s
        self.script: deque[str] = deque()
        self.default = "ok"
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.delay_s = 0.0  # added to every "ok" answer (concurrency test)
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                server._handle(self)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_v1(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> FakeLLMServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _next(self) -> str:
        with self._lock:
            return self.script.popleft() if self.script else self.default

    def _send(self, h: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            h.send_response(status)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(body)))
            for k, v in (headers or {}).items():
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and left

    def _payload(self, path: str, text: str) -> bytes:
        if path.endswith("/chat/completions"):
            return json.dumps({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
            }).encode()
        return json.dumps({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 20},
        }).encode()

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        n = int(h.headers.get("content-length", 0))
        body = json.loads(h.rfile.read(n) or b"{}")
        headers = {k.lower(): v for k, v in h.headers.items()}
        behaviour = self._next()
        with self._lock:
            self.requests.append({"path": h.path, "headers": headers, "body": body, "behaviour": behaviour})
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if not (h.path.endswith("/chat/completions") or h.path.endswith("/messages")):
                self._send(h, 404, b'{"error": {"message": "not found"}}')
            elif behaviour == "429":
                self._send(h, 429, b'{"error": {"message": "rate limited"}}', {"retry-after": "0.01"})
            elif behaviour == "500":
                self._send(h, 500, b'{"error": {"message": "internal error"}}')
            elif behaviour == "echo500":
                leak = json.dumps({"error": {"message": "bad auth " + headers.get("authorization", "") +
                                             " " + headers.get("x-api-key", "")}}).encode()
                self._send(h, 500, leak)
            elif behaviour == "401":
                self._send(h, 401, b'{"error": {"message": "invalid api key"}}')
            elif behaviour == "timeout":
                time.sleep(self.slow_s)
                self._send(h, 200, self._payload(h.path, self.reply))
            elif behaviour == "malformed":
                self._send(h, 200, b'{"id": "x", "choices": [{"index": 0, "message": {"content": "{\\"hel')
            elif behaviour == "prose":
                self._send(h, 200, self._payload(h.path, "I am not sure what you want me to do here."))
            else:
                if self.delay_s:
                    time.sleep(self.delay_s)
                self._send(h, 200, self._payload(h.path, self.reply))
        finally:
            with self._lock:
                self.in_flight -= 1
