"""The verifiers side of `task.name=verifiers`, run by the interpreter that has verifiers (`task.verifiers.python`).

It imports nothing of comlrl, so verifiers and its pins (0.3.0: datasets<4.7, regex<2026.4.4) live in their own
environment. It speaks JSON lines with the trainer (comlrl/tasks/verifiers/channel.py), one request per line on
stdin, one answer per line on stdout:

    {"op": "load", "env": ID or "module:Class", "args": {...}}  -> {"train": n, "eval": m, "max_turns": k, ...}
    {"op": "open", "episodes": [[id, "train" | "eval", row], ...]} -> {"events": [[id, EVENT], ...]}
    {"op": "reply", "replies": [[id, {"content": str, "finish_reason": str}], ...]} -> {"events": [...]}
    {"op": "drop", "ids": [...]} -> {}
    EVENT: {"ask": messages} (the episode's next model call) | {"done": {"reward", "metrics", "error"}}

Every episode is the environment's own `run_rollout` on one row of its dataset (its rollout loop, setup, stop
conditions, environment responses and rubric, scored alone): its model calls come to the trainer through a
verifiers `Client` whose `get_native_response` asks the trainer, which samples them from the run's current policy.
A failure answers {"error": "..."} on one line; an episode's own exception is its `done` event's error.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any


def load_environment(spec: str, args: dict[str, Any]) -> Any:
    """`module:name` or `path/to/file.py:name` (a class or function) called with the args, else verifiers' own
    loader of an installed environment (`vf.load_environment(id, **args)`: the module named by the id, its
    `load_environment`)."""
    import verifiers as vf

    if ":" not in spec:
        return vf.load_environment(spec, **args)
    where, _, attr = spec.rpartition(":")
    if where.endswith(".py"):
        found = importlib.util.spec_from_file_location(Path(where).stem, where)
        if found is None or found.loader is None:
            raise ImportError(f"cannot import {where}")
        module = importlib.util.module_from_spec(found)
        found.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    return getattr(module, attr)(**args)  # a module's own lazy names (verifiers' classes) resolve through it


class Episodes:
    """The open episodes: each an asyncio task of the environment's `run_rollout`, paused at its model calls."""

    def __init__(self, env: Any) -> None:
        from openai.types.chat import ChatCompletion
        from verifiers.clients.openai_chat_completions_client import OpenAIChatCompletionsClient

        self.env = env
        env.build_eval_dataset()  # without one, the trainer holds out the last training rows (never verifiers'
        held = env.eval_dataset   # fallback to the training rows)
        self.rows = {"train": env.get_dataset().to_list(), "eval": [] if held is None else held.to_list()}
        self.events: dict[str, asyncio.Queue] = {}
        self.replies: dict[str, asyncio.Future] = {}
        self.tasks: dict[str, asyncio.Task] = {}
        episodes = self

        class TrainerClient(OpenAIChatCompletionsClient):
            """verifiers' OpenAI chat client whose requests the trainer answers from the run's current policy."""

            async def get_native_response(self, prompt: Any, model: str, sampling_args: Any, tools: Any = None,
                                          **kwargs: Any) -> Any:
                if tools:
                    raise RuntimeError("the environment offers tools: task.name=verifiers samples plain chat turns, "
                                       "the trainer's engines do not parse tool calls")
                messages = [{k: v for k, v in dict(m).items() if v is not None} for m in prompt]
                answer = await episodes.ask(model, messages)  # the model name is the episode
                return ChatCompletion.model_validate({
                    "id": f"comlrl-{model}", "object": "chat.completion", "created": 0, "model": model,
                    "choices": [{"index": 0, "finish_reason": answer.get("finish_reason", "stop"),
                                 "message": {"role": "assistant", "content": answer["content"]}}]})

        self.client_type = TrainerClient

    async def ask(self, episode: str, messages: list[dict]) -> dict:
        reply = asyncio.get_running_loop().create_future()
        self.replies[episode] = reply
        await self.events[episode].put({"ask": messages})
        return await reply

    async def _run(self, episode: str, row: dict) -> None:
        try:
            # the episode's id is the model name its client sees: the one way into the client per episode
            client = self.client_type(_NoClient())
            out = await self.env.run_rollout(row, client, episode, {})
            error = out.get("error")
            done = {"reward": float(out.get("reward") or 0.0), "metrics": _numbers(out.get("metrics") or {}),
                    "error": None if error is None else str(error)}
        except Exception as exc:  # noqa: BLE001 - an episode's own failure is its result, never the worker's
            done = {"reward": 0.0, "metrics": {}, "error": f"{type(exc).__name__}: {exc}"}
        await self.events[episode].put({"done": done})

    async def open(self, specs: list[list[Any]]) -> list[list[Any]]:
        for episode, split, index in specs:
            rows = self.rows[split]
            self.events[episode] = asyncio.Queue()
            self.tasks[episode] = asyncio.create_task(self._run(episode, dict(rows[int(index) % len(rows)])))
        return [[e, await self._next(e)] for e, _, _ in specs]

    async def reply(self, replies: list[list[Any]]) -> list[list[Any]]:
        for episode, answer in replies:
            self.replies.pop(episode).set_result(answer)
        return [[e, await self._next(e)] for e, _ in replies]

    async def _next(self, episode: str) -> dict:
        event = await self.events[episode].get()
        if "done" in event:
            self._forget(episode)
        return event

    def drop(self, ids: list[str]) -> None:
        for episode in ids:
            task = self.tasks.get(episode)
            if task is not None:
                task.cancel()
            self._forget(episode)

    def _forget(self, episode: str) -> None:
        self.tasks.pop(episode, None)
        self.events.pop(episode, None)
        self.replies.pop(episode, None)


class _NoClient:
    """The OpenAI client slot of the trainer's client: never called (the trainer answers every request)."""


def _numbers(metrics: dict[str, Any]) -> dict[str, float]:
    return {str(k): float(v) for k, v in metrics.items() if isinstance(v, int | float) and not isinstance(v, bool)}


async def serve(lines: Any, write: Any) -> None:
    episodes: Episodes | None = None
    loop = asyncio.get_running_loop()
    while True:
        line = await loop.run_in_executor(None, lines.readline)
        if not line:
            return
        try:
            request = json.loads(line)
            op = request.get("op")
            if op == "load":
                import verifiers as vf

                env = load_environment(request["env"], request.get("args") or {})
                episodes = Episodes(env)
                answer = {"train": len(episodes.rows["train"]), "eval": len(episodes.rows["eval"]),
                          "max_turns": env.max_turns if isinstance(env, vf.MultiTurnEnv) else 0,
                          "env": type(env).__name__,
                          "verifiers": vf.__version__}
            elif episodes is None:
                answer = {"error": f"{op!r} before load"}
            elif op == "open":
                answer = {"events": await episodes.open(request["episodes"])}
            elif op == "reply":
                answer = {"events": await episodes.reply(request["replies"])}
            elif op == "drop":
                episodes.drop(request["ids"])
                answer = {}
            elif op == "quit":
                return
            else:
                answer = {"error": f"unknown op {op!r}"}
        except Exception as exc:  # noqa: BLE001 - one line back to the trainer, the worker goes on
            answer = {"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:500],
                      "trace": traceback.format_exc()[-2000:]}
        write(json.dumps(answer) + "\n")


def main() -> None:
    sys.path.insert(0, os.getcwd())  # the run's folder: a user's own environment module imports as with `python -m`
    out = sys.stdout
    sys.stdout = sys.stderr  # anything the environment prints goes to the log, not into the protocol

    def write(text: str) -> None:
        out.write(text)
        out.flush()

    asyncio.run(serve(sys.stdin, write))


if __name__ == "__main__":
    main()
