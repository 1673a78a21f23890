"""Real HTTP servers on 127.0.0.1 standing in for LLM APIs in tests (the official SDKs talk to them).

`LoopbackServer` is the plumbing (a free port, a thread, JSON replies, every request recorded);
`ScriptedLLMServer` answers OpenAI chat completions and Anthropic messages from a script of behaviours.
Bounded: a test sends a handful of requests and `close()` (or leaving the `with` block) stops the server.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class LoopbackServer:
    """Serves POST requests with `handle(handler, path, body, headers)` on 127.0.0.1:<free port>."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                n = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                outer.handle(self, self.path, body, {k.lower(): v for k, v in self.headers.items()})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_v1(self) -> str:
        return f"{self.base}/v1"

    base_url = base_v1

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> LoopbackServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def handle(self, h: BaseHTTPRequestHandler, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        raise NotImplementedError

    @staticmethod
    def send(h: BaseHTTPRequestHandler, status: int, data: bytes | dict[str, Any],
             headers: dict[str, str] | None = None) -> None:
        body = data if isinstance(data, bytes) else json.dumps(data).encode()
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


def chat_reply(path: str, text: str, input_tokens: int = 100, output_tokens: int = 20) -> dict[str, Any]:
    """A reply carrying `text`: OpenAI chat-completions shape on */chat/completions, else Anthropic messages."""
    if path.endswith("/chat/completions"):
        return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": input_tokens, "completion_tokens": output_tokens,
                          "total_tokens": input_tokens + output_tokens}}
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens}}


class ScriptedLLMServer(LoopbackServer):
    """Each request takes the next behaviour from `script` (then `default`):

    "ok" (the `reply` text, after `delay_s`), "timeout" (the reply after `slow_s`), "429" (retry-after 0.01),
    "429ms" (retry-after-ms 20), "503stop" (a 503 with x-should-retry: false), "500", "401",
    "echo500" (a 500 with x-should-retry: false whose body repeats the request's auth headers: redaction checks),
    "malformed" (a cut-off JSON body), "prose" (a valid reply with no usable content); any other string is
    sent as the reply text itself. `max_in_flight` counts concurrent requests.
    """

    def __init__(self, reply: str = "ok", slow_s: float = 0.6) -> None:
        self.reply, self.slow_s, self.delay_s = reply, slow_s, 0.0
        self.script: deque[str] = deque()
        self.default = "ok"
        self.in_flight = self.max_in_flight = 0
        super().__init__()

    def handle(self, h: BaseHTTPRequestHandler, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            behaviour = self.script.popleft() if self.script else self.default
            self.requests.append({"path": path, "headers": headers, "body": body, "behaviour": behaviour})
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self._answer(h, path, headers, behaviour)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(self, h: BaseHTTPRequestHandler, path: str, headers: dict[str, str], behaviour: str) -> None:
        if not (path.endswith("/chat/completions") or path.endswith("/messages")):
            self.send(h, 404, {"error": {"message": "not found"}})
        elif behaviour == "429":
            self.send(h, 429, {"error": {"message": "rate limited"}}, {"retry-after": "0.01"})
        elif behaviour == "429ms":
            self.send(h, 429, {"error": {"message": "rate limited"}}, {"retry-after-ms": "20"})
        elif behaviour == "503stop":
            self.send(h, 503, {"error": {"message": "overloaded"}}, {"x-should-retry": "false"})
        elif behaviour in ("500", "401"):
            self.send(h, int(behaviour), {"error": {"message": "internal error" if behaviour == "500"
                                                    else "invalid api key"}})
        elif behaviour == "echo500":
            leak = "bad auth " + headers.get("authorization", "") + " " + headers.get("x-api-key", "")
            self.send(h, 500, {"error": {"message": leak}}, {"x-should-retry": "false"})
        elif behaviour == "malformed":
            self.send(h, 200, b'{"id": "x", "choices": [{"index": 0, "message": {"content": "{\\"hel')
        elif behaviour == "prose":
            self.send(h, 200, chat_reply(path, "I am not sure what you want me to do here."))
        elif behaviour in ("ok", "timeout"):
            time.sleep(self.slow_s if behaviour == "timeout" else self.delay_s)
            self.send(h, 200, chat_reply(path, self.reply))
        else:
            self.send(h, 200, chat_reply(path, behaviour))
