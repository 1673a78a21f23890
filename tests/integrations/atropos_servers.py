"""Shared pieces of the Atropos environment tests: loopback servers, the CLI runner, the groups reader.

The servers are real HTTP servers on 127.0.0.1 (tests/llm_server.py's plumbing) answering OpenAI chat
completions as scripted models would; the envs reach them through Atropos's own server classes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from llm_server import LoopbackServer

from comlrl.tasks.datasets import load_easy

ROOT = Path(__file__).resolve().parents[2]
EASY = {p.entry_point: p for p in load_easy()}
_ENTRY = re.compile(r"Write `([A-Za-z_]\w*)`\.")


def correct_code(entry_point: str) -> str:
    """The easy set's canonical solution as a model would answer it."""
    p = EASY[entry_point]
    return f"```python\n{p.prompt.rstrip()}\n{p.canonical_solution.rstrip()}\n```"


def wrong_code(entry_point: str) -> str:
    return f"```python\ndef {entry_point}(*args):\n    return None\n```"


class CodeServer(LoopbackServer):
    """`POST /v1/chat/completions` for the code env: each of the request's `n` choices takes the next word of
    `script` ("correct" | "wrong"; then `default`) and answers that code for the problem named in the
    prompt ("Write `add`."). Requests without a problem (Atropos's "hi" health checks) get "hi" and take
    nothing from the script. `logprobs`, when set, is sent with every choice."""

    def __init__(self, script: list[str] | None = None, default: str = "wrong") -> None:
        self.script: deque[str] = deque(script or [])
        self.default = default
        self.logprobs: list[float] | None = None
        self.problems: list[str] = []
        self.lock = threading.Lock()
        super().__init__()

    def handle(self, h: BaseHTTPRequestHandler, path: str, body: dict[str, Any], headers: dict[str, str]) -> None:
        user = next((m["content"] for m in body.get("messages", []) if m.get("role") == "user"), "")
        match = _ENTRY.search(user)
        with self.lock:
            self.requests.append(body)
            words = []
            if match:
                self.problems.append(match.group(1))
                words = [self.script.popleft() if self.script else self.default for _ in range(int(body.get("n") or 1))]
        texts = ([correct_code(match.group(1)) if w == "correct" else wrong_code(match.group(1)) for w in words]
                 if match else ["hi"])
        choices = []
        for i, text in enumerate(texts):
            choice: dict[str, Any] = {"index": i, "message": {"role": "assistant", "content": text},
                                      "finish_reason": "stop"}
            if self.logprobs is not None and body.get("logprobs"):
                choice["logprobs"] = {"content": [{"token": f"t{j}", "logprob": v, "bytes": None, "top_logprobs": []}
                                                  for j, v in enumerate(self.logprobs)]}
            choices.append(choice)
        self.send(h, 200, {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "scripted",
                           "choices": choices,
                           "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})


def run_env(module: str, command: str, *args: str, timeout: float = 150) -> subprocess.CompletedProcess[str]:
    """`python -m comlrl.integrations.atropos.<module> <command> ...`, Atropos's own CLI, offline."""
    env = {**os.environ, "WANDB_MODE": "disabled", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join((str(ROOT), str(ROOT / "tests")))}
    return subprocess.run([sys.executable, "-m", f"comlrl.integrations.atropos.{module}", command, *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def read_groups(path: Path) -> list[dict[str, Any]]:
    """The groups file, read back the way atroposlib reads JSONL (the `jsonlines` package it writes it with)."""
    import jsonlines

    with jsonlines.open(path) as reader:
        return list(reader)


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


class TwoWayModel:
    """The tool agent's scripted model (tests/tool_agent/scripted_server.py), with a second, failing way.

    Per problem, the first episode to ask gets the scripted model's trace (a first version run through the
    tool, a fix, then a final answer that passes every test); the next one guesses: a call whose code returns
    None, then a final answer with that same wrong code. So a group of 2 has one passing and one failing
    trace whatever order the concurrent requests arrive in."""

    GUESS = "I will guess the answer without thinking much about it."

    def __init__(self, solutions: dict[str, tuple[str, str]]) -> None:
        from tool_agent.scripted_server import ScriptedModel

        self.inner = ScriptedModel(solutions)
        self.first_rounds: dict[str, int] = {}
        self.lock = threading.Lock()

    def reply(self, messages: list[dict[str, Any]]) -> tuple[str, bool]:
        user = next((m["content"] for m in messages if m.get("role") == "user"), "")
        match = _ENTRY.search(user)
        if match is None:  # Atropos's health check ("hi")
            return "hi", False
        name = match.group(1)
        assistants = [m["content"] for m in messages if m.get("role") == "assistant"]
        wrong = f"def {name}(*args):\n    return None"
        if not assistants:
            with self.lock:
                k = self.first_rounds[name] = self.first_rounds.get(name, 0) + 1
            if k % 2 == 0:
                call = json.dumps({"name": "python", "arguments": {"code": wrong}})
                return f"<think>\n{self.GUESS}\n<tool_call>\n{call}\n</tool_call>", False
        elif self.GUESS in assistants[0]:
            return f"Good enough.\n</think>\n\nFinal answer:\n```python\n{wrong}\n```", False
        return self.inner.reply(messages)


def tool_server(names: list[str]) -> Any:
    """A ScriptedServer (tests/tool_agent) serving `TwoWayModel` for these easy problems."""
    from tool_agent.scripted_server import ScriptedServer

    solutions = {n: (EASY[n].prompt, EASY[n].canonical_solution or "") for n in names}
    return ScriptedServer(TwoWayModel(solutions))  # type: ignore[arg-type]
