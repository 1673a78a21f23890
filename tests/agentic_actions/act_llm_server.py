"""A scripted LLM API on 127.0.0.1 for the judge tests: OpenAI chat completions and Anthropic messages.

Each request takes the next behaviour from `script` (then `default`): "ok" (the `reply` text), "timeout"
(answers after `slow_s`), "500", or any other string, sent as the reply text itself (malformed scores).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

VALID = json.dumps({"task_completion": 8, "action_quality": 7, "efficiency": 6, "creativity": 5,
                    "rationale": "mostly done"})


class JudgeServer:
    def __init__(self, reply: str = VALID, slow_s: float = 1.0) -> None:
        self.reply = reply
        self.slow_s = slow_s
        self.script: deque[str] = deque()
        self.default = "ok"
        self.requests: list[dict[str, Any]] = []
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
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> JudgeServer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _payload(self, path: str, text: str) -> bytes:
        if path.endswith("/chat/completions"):
            return json.dumps({
                "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
            }).encode()
        return json.dumps({
            "id": "m1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 50, "output_tokens": 10},
        }).encode()

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        n = int(h.headers.get("content-length", 0))
        body = json.loads(h.rfile.read(n) or b"{}")
        with self._lock:
            behaviour = self.script.popleft() if self.script else self.default
            self.requests.append({"path": h.path, "body": body, "behaviour": behaviour})
        if behaviour == "timeout":
            time.sleep(self.slow_s)
            status, data = 200, self._payload(h.path, self.reply)
        elif behaviour == "500":
            status, data = 500, b'{"error": {"message": "internal error"}}'
        else:
            status, data = 200, self._payload(h.path, self.reply if behaviour == "ok" else behaviour)
        try:
            h.send_response(status)
            h.send_header("content-type", "application/json")
            h.send_header("content-length", str(len(data)))
            h.end_headers()
            h.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
