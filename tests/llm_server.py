"""Real HTTP servers on 127.0.0.1 standing in for LLM APIs in tests (the official SDKs talk to them).

`LoopbackServer` is the plumbing (a free port, a thread, JSON replies, every request recorded);
`ScriptedLLMServer` answers OpenAI chat completions and Anthropic messages from a script of behaviours.
Bounded: a test sends a handful of requests and `close()` (or leaving the `with` block) stops the server.
"""

from __future__ import annotations

import json
import re
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


def ollama_tokens(text: str) -> list[str]:
    """Word-sized tokens that concatenate back to `text` (a stand-in tokenizer for the Ollama server)."""
    return re.findall(r"\s*\S+|\s+", text)


class OllamaServer(LoopbackServer):
    """Ollama's native `POST /api/chat` as its API documents it, on 127.0.0.1.

    Streamed (`"stream": true`, Ollama's default) replies are NDJSON chunks, one per token, then a final
    `done` chunk with `done_reason` and token counts; non-streamed ones are one JSON object. `options.stop`
    cuts before the earliest stop sequence (which is not returned), `options.num_predict` caps the tokens
    (`done_reason: "length"`). With `"logprobs": true` every token carries `{token, logprob, bytes,
    top_logprobs}` (`top_logprobs` entries when asked), unless `logprobs_supported` is False (an Ollama
    before log-prob support: the field is ignored). A model not in `models` is a 404 `{"error": ...}`.
    `script` behaviours per request: "ok", "500" (HTTP 500 `{"error": ...}`, Ollama's crashed runner), any
    other status code as digits (that status with an `{"error": ...}` body), "503stop" (a 503 with
    `x-should-retry: false`), "stream_error" (a streamed reply that ends in an `{"error": ...}` line),
    "echo500" (a 500 that repeats the auth header). `error_headers` go with every error status (e.g.
    `{"retry-after-ms": "1"}` for fast retries).
    """

    def __init__(self, reply: Any = "Hello there.", models: tuple[str, ...] = ("scripted",),
                 logprobs_supported: bool = True, error_headers: dict[str, str] | None = None) -> None:
        self.reply = reply  # str, or callable(messages) -> str
        self.models = models
        self.logprobs_supported = logprobs_supported
        self.error_headers = error_headers or {}
        self.script: deque[str] = deque()
        super().__init__()

    @staticmethod
    def logprob(i: int) -> float:
        """The log-prob the server gives the i-th generated token (known to the tests)."""
        return round(-0.05 * (i % 7) - 0.01, 6)

    def _entry(self, i: int, token: str, top: int) -> dict[str, Any]:
        alts = [{"token": token, "logprob": self.logprob(i), "bytes": list(token.encode())}]
        alts += [{"token": f"alt{j}", "logprob": self.logprob(i) - j, "bytes": list(f"alt{j}".encode())}
                 for j in range(1, top)]
        return {"token": token, "logprob": self.logprob(i), "bytes": list(token.encode()), "top_logprobs": alts[:top]}

    def handle(self, h: BaseHTTPRequestHandler, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            behaviour = self.script.popleft() if self.script else "ok"
            self.requests.append({"path": path, "headers": headers, "body": body, "behaviour": behaviour})
        if path != "/api/chat":
            self.send(h, 404, b"404 page not found", {"content-type": "text/plain"})
            return
        model = str(body.get("model", ""))
        if model not in self.models:
            self.send(h, 404, {"error": f'model "{model}" not found, try pulling it first'}, self.error_headers)
            return
        if behaviour == "500":
            self.send(h, 500, {"error": "llama runner process has terminated: exit status 2"}, self.error_headers)
            return
        if behaviour == "503stop":
            self.send(h, 503, {"error": "server busy"}, {**self.error_headers, "x-should-retry": "false"})
            return
        if behaviour.isdigit():
            self.send(h, int(behaviour), {"error": f"scripted status {behaviour}"}, self.error_headers)
            return
        if behaviour == "echo500":
            self.send(h, 500, {"error": "unauthorized: " + headers.get("authorization", "")}, self.error_headers)
            return
        messages = body.get("messages") or []
        text = self.reply(messages) if callable(self.reply) else str(self.reply)
        options = body.get("options") or {}
        done_reason = "stop"
        stops = [s for s in options.get("stop") or [] if s and s in text]
        if stops:
            text = text[: min(text.find(s) for s in stops)]
        tokens = ollama_tokens(text)
        limit = options.get("num_predict")
        if isinstance(limit, int) and 0 <= limit < len(tokens):
            tokens, done_reason = tokens[:limit], "length"
        want = bool(body.get("logprobs")) and self.logprobs_supported
        top = int(body.get("top_logprobs") or 0)
        head = {"model": model, "created_at": "2026-11-24T12:00:00.000000Z"}
        final = {**head, "message": {"role": "assistant", "content": ""}, "done": True, "done_reason": done_reason,
                 "total_duration": 1200000, "load_duration": 100000, "prompt_eval_count": 10 + len(messages),
                 "prompt_eval_duration": 50000, "eval_count": len(tokens), "eval_duration": 900000}
        if not body.get("stream", True):
            one = {**final, "message": {"role": "assistant", "content": "".join(tokens)}}
            if want:
                one["logprobs"] = [self._entry(i, t, top) for i, t in enumerate(tokens)]
            self.send(h, 200, one)
            return
        lines = []
        for i, t in enumerate(tokens):
            chunk: dict[str, Any] = {**head, "message": {"role": "assistant", "content": t}, "done": False}
            if want:
                chunk["logprobs"] = [self._entry(i, t, top)]
            lines.append(chunk)
        if behaviour == "stream_error":
            lines = lines[:2] + [{"error": "an error was encountered while running the model: unexpected EOF"}]
        else:
            lines.append(final)
        try:
            h.send_response(200)
            h.send_header("content-type", "application/x-ndjson")
            h.send_header("transfer-encoding", "chunked")
            h.end_headers()
            for line in lines:
                data = (json.dumps(line) + "\n").encode()
                h.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                h.wfile.flush()
            h.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            pass


class JudgeServer(LoopbackServer):
    """An OpenAI-compatible chat endpoint that judges pairs (comlrl.run.comparators' prompt) by a rule,
    `prefers(a, b)`: True says A. The default: the answer that holds `return` wins (both or neither: A, the
    first shown); `biased` always says A."""

    def __init__(self, biased: bool = False, prefers: Any = None) -> None:
        self.biased = biased
        self.prefers = prefers or (lambda a, b: "return" in a or "return" not in b)
        super().__init__()

    def handle(self, h: BaseHTTPRequestHandler, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append({"path": path, "body": body})
        text = body["messages"][-1]["content"]
        a = re.search(r"Answer A:\n(.*?)\n\nAnswer B:", text, re.S).group(1)
        b = re.search(r"Answer B:\n(.*?)\n\nWhich answer is better", text, re.S).group(1)
        self.send(h, 200, chat_reply(path, "A" if self.biased or self.prefers(a, b) else "B"))
