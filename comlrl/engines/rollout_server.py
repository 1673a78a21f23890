"""The rollout server: one vLLM engine in its own process serves every training rank over HTTP.

    python -m comlrl.engines.rollout_server --model PATH [--port 8100] ...   # what the trainer starts
    comlrl-serve --config configs/align_T2_G4.yaml [--port 8100]              # the same, from a run config

Protocol (JSON over HTTP on the host given, loopback by default):

* `POST /push {"version", "files": {agent: path}, "whole_model"}`: the trainer's weights after an optimizer
  step, one safetensors file per agent (merged LoRA layers or whole models) in a directory both processes
  see (/dev/shm: shared memory). Versions only go forward.
* `POST /generate {"version", "agent", "prompts", "sampling"}`: token-id prompts of one agent, sampled
  under policy `version`. A request for an older version than the server holds is refused (409, never
  answered with other weights); one for a newer version waits for its push (another rank may push it).
* `GET /health`: the model, the held version and the server's limits.

One worker thread owns the engine and its state: pushes and generate requests queue; between engine steps
the worker refuses what is stale and lets the requests of the held version for the running agent join the
running batch (continuous batching: the ranks' requests share the engine's steps); pushes and requests for
another agent wait until the running requests have finished.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from comlrl.engines.refused import Refused

log = logging.getLogger(__name__)

PUSH_WAIT_S = 1800.0  # how long a request for a version not yet pushed waits before it is refused


def verdict(requested: int, held: int | None) -> str:
    """What the server does with a request for policy `requested` while it holds `held` (None: nothing
    pushed yet): `serve` it, `wait` for that version's push, or refuse it as `stale`."""
    if held is None or requested > held:
        return "wait"
    return "serve" if requested == held else "stale"


@dataclass
class _Item:
    """A queued push or generate request; the handler thread waits on `done`."""

    kind: str  # push | generate
    body: dict[str, Any]
    deadline: float
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: str | None = None
    outputs: list[Any] = field(default_factory=list)  # generate: per prompt, filled as the engine finishes them
    pending: int = 0

    def finish(self, result: Any = None, error: str | None = None) -> None:
        self.result, self.error = result, error
        self.done.set()


class RolloutServer:
    """The server's state and worker (see module docstring); `runner` is a `VLLMRunner` (or anything with
    its `load`, `enqueue`, `step`, `busy` and `abort`).

    Continuous batching: while the engine runs requests of one agent, new requests for that agent (and the
    held version) join the running batch between engine steps; a push, or a request for another agent,
    waits until the running requests have finished, so no answer mixes weights."""

    def __init__(self, runner: Any, model: str, max_model_len: int, push_wait_s: float = PUSH_WAIT_S) -> None:
        self.runner, self.model, self.max_model_len = runner, model, max_model_len
        self.push_wait_s = push_wait_s
        self.version: int | None = None
        self.files: dict[int, str] = {}
        self.whole_model = False
        self.held: int | None = None  # the agent whose weights (at self.version) the engine holds
        self.served = {"requests": 0, "joined_running_batch": 0, "stale_refused": 0, "pushes": 0}
        self._queue: list[_Item] = []
        self._running: dict[str, tuple[_Item, int]] = {}  # engine request id -> (request, its prompt's index)
        self._cv = threading.Condition()
        self._closing = False
        self._failed: str | None = None
        self._worker = threading.Thread(target=self._work, name="rollout-worker", daemon=True)
        self._worker.start()

    # ---- called from the HTTP threads ------------------------------------------------------------
    def submit(self, kind: str, body: dict[str, Any]) -> Any:
        item = _Item(kind, body, time.monotonic() + self.push_wait_s)
        with self._cv:
            if self._failed:
                raise Refused(self._failed)
            self._queue.append(item)
            self._cv.notify_all()
        item.done.wait()
        if item.error is not None:
            raise Refused(item.error)
        return item.result

    def health(self) -> dict[str, Any]:
        return {"model": self.model, "version": self.version, "max_model_len": self.max_model_len, **self.served}

    def close(self) -> None:
        with self._cv:
            self._closing = True
            self._cv.notify_all()

    # ---- the worker: the only thread that touches the engine and the version ------------------------
    def _ready(self) -> bool:
        now = time.monotonic()
        return self._closing or any(i.kind == "push" or verdict(i.body["version"], self.version) != "wait"
                                    or i.deadline <= now for i in self._queue)

    def _work(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # a bug, not a request: fail what waits and everything after, loudly
            log.exception("the rollout server's worker failed")
            with self._cv:
                self._failed = f"the rollout server's worker failed: {type(exc).__name__}: {exc}"
                for item in self._queue + [i for i, _ in self._running.values()]:
                    item.finish(error=self._failed)
                self._queue.clear()

    def _loop(self) -> None:
        while True:
            busy = bool(self._running)
            with self._cv:
                if not busy:
                    self._cv.wait_for(self._ready, timeout=1.0)
                if self._closing:
                    for item in self._queue + [i for i, _ in self._running.values()]:
                        item.finish(error="the rollout server is shutting down")
                    return
                if not busy:  # versions change only between batches
                    for push in [i for i in self._queue if i.kind == "push"]:
                        self._queue.remove(push)
                        self._apply_push(push)
                joining = self._take_joining(busy)
            if joining:
                self._start(joining, busy)
            if self._running:
                self._step()

    def _take_joining(self, busy: bool) -> list[_Item]:
        """Refuse what is stale or waited too long; take the requests that run now: those of the held
        version for the running agent (busy), or for one agent (idle: the held one first)."""
        now, ready = time.monotonic(), []
        for item in [i for i in self._queue if i.kind == "generate"]:
            v = verdict(item.body["version"], self.version)
            if v == "stale":
                self.served["stale_refused"] += 1
                item.finish(error=f"stale request: policy version {item.body['version']}, the server "
                                  f"holds version {self.version}")
            elif v == "wait" and item.deadline <= now:
                item.finish(error=f"policy version {item.body['version']} was never pushed "
                                  f"(waited {self.push_wait_s:.0f} s; the server holds {self.version})")
            elif v == "serve":
                ready.append(item)
                continue
            else:
                continue
            self._queue.remove(item)
        if not ready:
            return []
        agents = {int(i.body["agent"]) for i in ready}
        agent = self.held if busy else min(agents, key=lambda a: (a != self.held, a))
        joining = [i for i in ready if int(i.body["agent"]) == agent]
        for item in joining:
            self._queue.remove(item)
        return joining

    def _apply_push(self, item: _Item) -> None:
        version = int(item.body["version"])
        if self.version is not None and version <= self.version:
            item.finish(error=f"push of policy version {version} refused: the server holds version {self.version}")
            return
        self.version, self.held = version, None
        self.files = {int(a): str(p) for a, p in item.body["files"].items()}
        self.whole_model = bool(item.body.get("whole_model", False))
        self.served["pushes"] += 1
        item.finish({"version": version})

    def _start(self, items: list[_Item], busy: bool) -> None:
        from comlrl.engines.vllm_runner import Sampling

        agent = int(items[0].body["agent"])
        for item in items:
            try:
                if agent not in self.files:
                    raise Refused(f"agent {agent} has no weights in policy version {self.version}")
                if self.held != agent:  # only when idle: a running batch's agent is the held one
                    from safetensors.torch import load_file

                    self.runner.load(load_file(self.files[agent]).items(), whole_model=self.whole_model)
                    self.held = agent
                prompts = item.body["prompts"]
                sampling = [Sampling(**{**x, "stop": tuple(x["stop"]), "stop_token_ids": tuple(x["stop_token_ids"])})
                            for x in item.body["sampling"]]
                ids = self.runner.enqueue(prompts, sampling) if prompts else []
            except Exception as exc:  # one bad request (or weights file) fails that request, not the server
                item.finish(error=f"{type(exc).__name__}: {exc}")
                continue
            item.outputs, item.pending = [None] * len(ids), len(ids)
            item.result = {"version": self.version}
            self.served["joined_running_batch"] += int(busy)
            if not ids:
                item.finish({"version": self.version, "outputs": []})
            for index, rid in enumerate(ids):
                self._running[rid] = (item, index)
            busy = busy or bool(ids)

    def _step(self) -> None:
        try:
            finished = self.runner.step()
        except Exception as exc:  # the engine failed mid-batch: its requests fail, the server goes on
            self.runner.abort(list(self._running))
            for item in {id(i): i for i, _ in self._running.values()}.values():
                item.finish(error=f"the engine failed: {type(exc).__name__}: {exc}")
            self._running.clear()
            return
        for rid, completions in finished.items():
            item, index = self._running.pop(rid)
            item.outputs[index] = completions
            item.pending -= 1
            if item.pending == 0:
                self.served["requests"] += 1
                item.finish({**item.result, "outputs": item.outputs})


def _handler(server: RolloutServer, front: Any = None) -> type[BaseHTTPRequestHandler]:
    """The HTTP handler: the trainer's protocol, and with `front` (an `OpenAIFront`) the OpenAI endpoints."""
    openai_paths: dict[str, Callable[[dict], Any]] = {} if front is None else {
        "/v1/completions": front.completions, "/v1/chat/completions": front.chat_completions}

    class Handler(BaseHTTPRequestHandler):
        def _reply(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path == "/health":
                self._reply(200, server.health())
            elif self.path == "/v1/models" and front is not None:
                self._reply(200, front.models())
            else:
                self._reply(404, {"error": f"no such path: {self.path}"})

        def do_POST(self) -> None:  # noqa: N802
            if self.path in openai_paths and front is not None:
                self._openai(openai_paths[self.path])
                return
            kind = {"/push": "push", "/generate": "generate"}.get(self.path)
            if kind is None:
                self._reply(404, {"error": f"no such path: {self.path}"})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                int(body["version"])
            except (ValueError, KeyError, TypeError) as exc:
                self._reply(400, {"error": f"bad request body: {exc}"})
                return
            try:
                self._reply(200, server.submit(kind, body))
            except Refused as exc:
                self._reply(409, {"error": str(exc)})

        def _openai(self, call: Callable[[dict], Any]) -> None:
            from comlrl.engines.openai_front import BadRequest, NotReady

            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if not isinstance(body, dict):
                    raise BadRequest("the body is not a JSON object")
                self._reply(200, call(body))
            except (BadRequest, ValueError) as exc:
                self._reply(400, {"error": {"message": str(exc), "type": "invalid_request_error"}})
            except NotReady as exc:
                self._reply(503, {"error": {"message": str(exc), "type": "unavailable"}})
            except Refused as exc:
                self._reply(409, {"error": {"message": str(exc), "type": "refused"}})

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (http.server's signature)
            log.debug(format, *args)

    return Handler


def make_server(runner: Any, model: str, max_model_len: int, host: str, port: int,
                push_wait_s: float = PUSH_WAIT_S, tokenizer: Any = None
                ) -> tuple[ThreadingHTTPServer, RolloutServer, str]:
    """The HTTP server (not yet serving), the state behind it, and its URL (`port` 0: a free port); with
    `tokenizer` it also answers OpenAI requests (`comlrl/engines/openai_front.py`)."""
    from comlrl.engines.openai_front import OpenAIFront

    state = RolloutServer(runner, model, max_model_len, push_wait_s)
    front = OpenAIFront(state, tokenizer) if tokenizer is not None else None
    httpd = ThreadingHTTPServer((host, port), _handler(state, front))
    httpd.daemon_threads = True
    return httpd, state, f"http://{host}:{httpd.server_address[1]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="comlrl rollout server (started by the trainer; users: comlrl-serve)")
    ap.add_argument("--model", required=True, help="a local HF model folder")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--max-model-len", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--kv-cache-gib", type=int, default=2)
    ap.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    ap.add_argument("--compile", action="store_true", help="let vLLM compile (default: eager, faster start)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8100, help="0: a free port (the first stdout line names it)")
    ap.add_argument("--announce", default=None, help="also write the URL to this file once serving")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    from comlrl.engines import VLLMSettings
    from comlrl.engines.vllm_runner import VLLMRunner, VLLMUnavailable

    settings = VLLMSettings(enforce_eager=not args.compile, kv_cache_gib=args.kv_cache_gib,
                            gpu_memory_utilization=args.gpu_memory_utilization, sleep_between_rollouts=False)
    try:
        runner = VLLMRunner(args.model, args.dtype, args.seed, args.max_model_len, settings)
    except VLLMUnavailable as exc:
        print(f"error: the rollout server cannot start vLLM: {exc}", file=sys.stderr)
        return 3
    log.info("vllm engine ready in %.1f s", runner.start_seconds)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.model)  # for the OpenAI endpoints (text and chat templates)
    httpd, state, url = make_server(runner, args.model, args.max_model_len, args.host, args.port,
                                    tokenizer=tokenizer)
    print(f"comlrl rollout server: {args.model} on {url}", flush=True)  # the first line names the URL
    if args.announce:  # written whole: the trainer waits for the file
        tmp = Path(args.announce).with_suffix(".tmp")
        tmp.write_text(url)
        tmp.replace(args.announce)

    def stop(signum: int, frame: object) -> None:  # SIGTERM (the trainer's close) ends it like Ctrl-C
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    try:
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        state.close()
        httpd.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
