"""A real OpenAI-compatible HTTP server on 127.0.0.1 serving a scripted tool-using "model".

`POST /v1/chat/completions` answers like a small reasoning model would, from the conversation so far:

* round 1: `<think>` reasoning and a first, buggy version in a tool call. By problem index k: k % 3 == 0
  malformed the way models really write it (raw newlines and unescaped quotes in the JSON string:
  repairable), k % 3 == 1 well-formed, k % 3 == 2 unreadable (`"code": }`: a structured error comes back);
* round 2 (after an error or failing tests): the fix, as well-formed JSON. Every fourth problem is served
  as by a server that ignores `stop`, so the model's own made-up `<tool_response>` reaches the client;
* round 3 (after the tests pass): `</think>` and the final answer in a ```python block.

The server applies `stop` like vLLM/Ollama (cuts before the earliest stop sequence, which is not
returned; `finish_reason: "stop"`, vLLM's `stop_reason`), continues a trailing assistant message (an answer
prefix: only the continuation comes back), returns per-token `logprobs` when asked
(unless `refuse_logprobs`: then HTTP 400, as servers without support do), and records every request.
"""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler
from typing import Any

from llm_server import LoopbackServer

_ENTRY = re.compile(r"Write `([A-Za-z_]\w*)`\.")


def _loose_call(code: str) -> str:
    """JSON as small models write it: the code pasted raw into the string (newlines, quotes unescaped)."""
    return '{"name": "python", "arguments": {"code": "' + code + '"}}'


def _strict_call(code: str) -> str:
    return json.dumps({"name": "python", "arguments": {"code": code}})


class ScriptedModel:
    """Scripted completions per problem; `solutions[entry_point] = (signature + docstring, correct body)`."""

    def __init__(self, solutions: dict[str, tuple[str, str]]) -> None:
        self.solutions = solutions
        self.order = list(solutions)

    def reply(self, messages: list[dict[str, Any]]) -> tuple[str, bool]:
        """(completion text before stop handling, whether this reply ignores `stop`)."""
        first_user = next((m["content"] for m in messages if m.get("role") == "user"), "")
        match = _ENTRY.search(first_user)
        if match is None or match.group(1) not in self.solutions:
            return "I am not sure what to do.", False
        name = match.group(1)
        k = self.order.index(name)
        prompt, body = self.solutions[name]
        correct = prompt.rstrip("\n") + "\n" + body.rstrip("\n")
        buggy = prompt.rstrip("\n") + ("\n    return result_\n" if k % 2 == 0 else "\n    return None\n")
        rounds = sum(m.get("role") == "assistant" for m in messages)
        last = messages[-1]["content"] if messages[-1].get("role") == "user" and rounds else ""
        if rounds == 0:
            calls = (_loose_call(buggy + f'\nprint("checking {name}")'), _strict_call(buggy),
                     '{"name": "python", "arguments": {"code": }}')
            call = calls[k % 3]
            return (f"<think>\nI need to implement {name}. I'll write a first version and run it on the "
                    f"docstring example before answering.\n<tool_call>\n{call}\n</tool_call>\n"
                    "<tool_response>{\"stdout\": \"made up\"}</tool_response>", False)
        if '"tests_passed": "' in last and _all_passed(last):
            return (f"The tests pass now, so {name} is done.\n</think>\n\nFinal answer:\n```python\n{correct}\n```",
                    False)
        return (f"The tool reported a problem. Let me fix {name} and run it again.\n<tool_call>\n"
                f"{_strict_call(correct)}\n</tool_call>\n<tool_response>{{\"stdout\": \"\", \"tests_passed\": "
                "\"9/9\"}</tool_response>\nGreat, it works.", k % 4 == 3)


def _all_passed(observation: str) -> bool:
    m = re.search(r'"tests_passed": "(\d+)/(\d+)"', observation)
    return bool(m) and m.group(1) == m.group(2) and m.group(2) != "0"


class ScriptedServer(LoopbackServer):
    """`ScriptedServer(model)` listens on 127.0.0.1:<free port> until `close()`; `base_url` ends in /v1."""

    def __init__(self, model: ScriptedModel, refuse_logprobs: bool = False) -> None:
        self.model = model
        self.refuse_logprobs = refuse_logprobs
        super().__init__()

    def handle(self, h: BaseHTTPRequestHandler, path: str, req: dict[str, Any], headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(req)
        if path.rstrip("/") != "/v1/chat/completions":
            self.send(h, 404, {"error": {"message": f"no route {path}"}})
            return
        if req.get("logprobs") and self.refuse_logprobs:
            self.send(h, 400, {"error": {"message": "logprobs are not supported", "type": "invalid_request"}})
            return
        messages = req.get("messages") or []
        prefix = messages[-1]["content"] if messages and messages[-1].get("role") == "assistant" else ""
        text, ignore_stop = self.model.reply(messages[:-1] if prefix else messages)
        text = text.removeprefix(prefix)  # a server continues an answer prefix and returns only the rest
        finish, stop_reason = "stop", None
        stops = [] if ignore_stop else [s for s in (req.get("stop") or []) if s in text]
        if stops:
            cut = min(text.find(s) for s in stops)
            stop_reason = next(s for s in stops if text.find(s) == cut)
            text = text[:cut]
        pieces = re.findall(r"\s*\S+|\s+$", text)
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text},
                                  "finish_reason": finish, "stop_reason": stop_reason}
        if req.get("logprobs"):
            choice["logprobs"] = {"content": [{"token": p, "logprob": -0.25, "bytes": None, "top_logprobs": []}
                                              for p in pieces]}
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in req.get("messages") or [])
        self.send(h, 200, {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
            "model": req.get("model", "scripted"), "choices": [choice],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": len(pieces),
                      "total_tokens": prompt_tokens + len(pieces)},
        })
