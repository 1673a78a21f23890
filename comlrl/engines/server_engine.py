"""`rollout.engine=vllm_server`: the training ranks sample from a rollout server (`rollout_server.py`).

Without `rollout.server.url` the trainer starts one server per machine (its local rank 0 does, on a free
loopback port) and stops it at the end; with a URL it uses a server started by `comlrl-serve` on the same
machine. After every optimizer step the pushing rank (the one that started the server, or rank 0) writes
each agent's weights as a safetensors file into shared memory (/dev/shm; a temporary directory where there
is none) and pushes the new policy version; every request carries the version its rank holds, so the
server refuses a stale request and the client refuses an answer of another version: nothing sampled under
other weights is trained on. Merged weights are pushed, not LoRA adapters: with vLLM's multi-LoRA the CPU
build generated about half the tokens/s of merged-weight pushes, the pushes included (1.95x,
docs/results.md), and a push is one file write per agent per step.

Faults: a server that cannot start is one warning and the hf engine (on every rank, so the ranks agree);
one that stops answering mid-run raises `RolloutServerError` naming it (the run guard adds the intact
checkpoint and how to resume).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from comlrl.engines.vllm_engine import PushedWeights, generate_by_agent, several_processes
from comlrl.engines.vllm_runner import Completion, Sampling, VLLMUnavailable
from comlrl.errors import ConfigError, RunStopped
from comlrl.policy import AgentPolicies, Messages, Sample

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 3600.0  # one generate call on CPU can take minutes; a server that hangs longer is dead


class RolloutServerError(RunStopped):
    """The rollout server stopped answering, or refused a request mid-run (a stale version)."""


def weights_root() -> Path:
    """Where pushed weights are written: shared memory when the machine has it (no disk write, the server
    maps the file), else the temporary directory."""
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


class ServerClient:
    """JSON over HTTP to one rollout server; every failure to get an answer is a RolloutServerError."""

    def __init__(self, url: str, process: subprocess.Popen | None = None, log_path: Path | None = None) -> None:
        self.url = url.rstrip("/")
        self.process = process
        self.log_path = log_path

    def _fault(self, why: str, gone: bool = False) -> RolloutServerError:
        """`gone`: the connection failed; a server process of ours that is dying gets a moment to exit, so the
        error names its exit status (its socket closes before the process is reaped)."""
        parts = [f"the rollout server {self.url} {why}"]
        if gone and self.process is not None:
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.process is not None and self.process.poll() is not None:
            parts.append(f"its process exited with status {self.process.returncode}")
        if self.log_path is not None:
            parts.append(f"its log: {self.log_path}")
        return RolloutServerError("; ".join(parts))

    def call(self, path: str, body: dict[str, Any] | None = None, timeout: float = REQUEST_TIMEOUT_S) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            try:
                why = json.loads(exc.read()).get("error", "")
            except (ValueError, AttributeError):
                why = ""
            raise self._fault(f"refused {path} (HTTP {exc.code}): {why}") from None
        except (OSError, ValueError) as exc:  # refused, reset, timed out, or not JSON
            raise self._fault(f"stopped answering ({path}: {type(exc).__name__}: {exc})", gone=True) from None


def _die_with_parent() -> None:
    """In the server's child process: SIGTERM it when the trainer dies (even by SIGKILL), so no server
    outlives its run (Linux prctl PR_SET_PDEATHSIG; elsewhere nothing)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass


def start_server(policies: AgentPolicies, settings: Any, seed: int, workdir: Path,
                 timeout_s: float, port: int = 0) -> tuple[subprocess.Popen, str, Path]:
    """Start `python -m comlrl.engines.rollout_server` on loopback `port` (0: a free one): the process, its
    URL once it serves, and its log.
    VLLMUnavailable (the caller falls back) when it exits or does not serve within `timeout_s`."""
    cfg = policies.cfg
    # the log outlives the shared-memory workdir: a server that dies leaves it for the error to name
    announce, log_path = workdir / "url", Path(tempfile.gettempdir()) / f"{workdir.name}-server.log"
    cmd = [sys.executable, "-m", "comlrl.engines.rollout_server", "--model", policies.paths[0], "--dtype", cfg.dtype,
           "--max-model-len", str(cfg.max_prompt_tokens + cfg.max_new_tokens), "--seed", str(seed),
           "--kv-cache-gib", str(settings.kv_cache_gib),
           "--gpu-memory-utilization", str(settings.gpu_memory_utilization),
           "--port", str(port), "--announce", str(announce), *([] if settings.enforce_eager else ["--compile"])]
    # the server is the project's own code: it gets the environment minus the launcher's rank variables
    # (it is not a rank of the training world) and no API keys
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                                            "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK")
           and not k.endswith("_API_KEY")}
    # the launcher gives each rank one thread; the server runs while the ranks wait for it: every core
    env["OMP_NUM_THREADS"] = str(len(os.sched_getaffinity(0)))
    with open(log_path, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, preexec_fn=_die_with_parent)
    deadline = time.monotonic() + timeout_s
    while not announce.is_file():
        if proc.poll() is not None:
            tail = " ".join(log_path.read_text(errors="replace").split()[-40:])
            raise VLLMUnavailable(f"the rollout server exited with status {proc.returncode}: ...{tail[-300:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise VLLMUnavailable(f"the rollout server did not serve within {timeout_s:.0f} s (log: {log_path})")
        time.sleep(0.2)
    return proc, announce.read_text().strip(), log_path


class ServerEngine:
    """Samples from a rollout server under the version of the policy this rank holds (module docstring)."""

    name = "vllm_server"

    def __init__(self, policies: AgentPolicies, client: ServerClient, workdir: Path | None) -> None:
        """`workdir`: where this rank writes the weights it pushes; None on the ranks that do not push."""
        self.policies, self.client, self.workdir = policies, client, workdir
        self.version = 0  # optimizer steps (and checkpoint loads) since the start: the same on every rank
        self._pushed: int | None = None
        self._last_agent: int | None = None
        self.pushes = 0
        self.push_seconds = 0.0
        self.start_seconds = 0.0  # starting (or reaching) the server, set by build_server_engine
        self.weights = PushedWeights(policies)

    @property
    def pusher(self) -> bool:
        """This rank writes and pushes the weights (it started the server, or is rank 0)."""
        return self.workdir is not None

    def _push(self) -> None:
        """Every agent's current weights as one file each, then the new version; the old files go after the
        server has switched (it never reads them again)."""
        t0 = time.perf_counter()
        from safetensors.torch import save_file

        assert self.workdir is not None, "only the pushing rank pushes"
        files = {}
        for agent in range(self.policies.num_agents):
            path = self.workdir / f"v{self.version}-agent{agent}.safetensors"
            save_file({n: t.to("cpu").contiguous() for n, t in self.weights.of(agent)}, str(path))
            files[str(agent)] = str(path)
        self.client.call("/push", {"version": self.version, "files": files,
                                   "whole_model": self.weights.whole_model})
        for old in self.workdir.glob("v*-agent*.safetensors"):
            if not old.name.startswith(f"v{self.version}-"):
                old.unlink(missing_ok=True)
        self._pushed = self.version
        self.pushes += 1
        self.push_seconds += time.perf_counter() - t0

    def _run(self, agent: int, prompts: list[list[int]], sampling: list[Sampling]) -> list[list[Completion]]:
        answer = self.client.call("/generate", {"version": self.version, "agent": agent, "prompts": prompts,
                                                "sampling": [asdict(s) for s in sampling]})
        if answer.get("version") != self.version:  # never train on what other weights sampled
            raise RolloutServerError(f"the rollout server {self.client.url} answered under policy version "
                                     f"{answer.get('version')}, this rank holds {self.version}: refused")
        self._last_agent = agent
        return [[(list(ids), lps) for ids, lps in completions] for completions in answer["outputs"]]

    def generate(self, requests: list[tuple[int, Messages]], num_samples: int | Sequence[int], greedy: bool = False,
                 stop_strings: Sequence[str] | None = None) -> list[list[Sample]]:
        if self.pusher and self._pushed != self.version:  # no weights_changed yet (an evaluation-only build)
            self._push()
        return generate_by_agent(self.policies, requests, num_samples, greedy, stop_strings, self._last_agent,
                                 self._run)

    def weights_changed(self) -> None:
        """Every rank calls this at the same point (after an optimizer step or a checkpoint load): the pusher
        pushes now, not at its next request, since the other ranks may ask first (a rank with no problem
        to evaluate asks nothing, and would leave the others waiting for the version)."""
        self.version += 1
        self.weights.refresh()  # ZeRO-3: every rank gathers here, together (only the pusher writes)
        if self.pusher:
            self._push()

    def idle(self) -> None:
        pass

    def close(self) -> None:
        proc = self.client.process
        if proc is not None and proc.poll() is None:  # stopped by us: its log goes with it
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if self.client.log_path is not None:
                self.client.log_path.unlink(missing_ok=True)
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _local_rank() -> int:
    """This process's rank on its machine, from the launcher's variables (0: alone)."""
    return int(os.environ.get("LOCAL_RANK", 0))


def _all_gather(obj: Any) -> list[Any]:
    if not several_processes():
        return [obj]
    out: list[Any] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(out, obj)
    return out


def check_server(client: ServerClient, policies: AgentPolicies) -> None:
    """The server serves the agents' model with room for their sequences: else a config error (a server
    started from another config), since its answers would not be this run's policy."""
    health = client.call("/health", timeout=30)
    cfg = policies.cfg
    need = cfg.max_prompt_tokens + cfg.max_new_tokens
    if os.path.realpath(health["model"]) != os.path.realpath(policies.paths[0]):
        raise ConfigError(f"config error: rollout.server.url={client.url} serves {health['model']}, but the agents "
                          f"are {policies.paths[0]} (start it with this run's config: comlrl-serve --config ...)")
    if int(health["max_model_len"]) < need:
        raise ConfigError(f"config error: rollout.server.url={client.url} holds {health['max_model_len']} tokens "
                          f"per sequence; this run needs {need} (model.max_prompt_tokens + model.max_new_tokens: "
                          "start it with this run's config)")


def build_server_engine(policies: AgentPolicies, settings: Any, server: Any, seed: int) -> ServerEngine:
    """The server engine of this rank (module docstring); VLLMUnavailable when a server cannot be started
    or reached, raised on every rank alike so that they all fall back together."""
    if len(set(policies.paths)) != 1:
        raise VLLMUnavailable("agents built from different models need one engine each")
    t0 = time.perf_counter()
    rank = torch.distributed.get_rank() if several_processes() else 0
    local_rank = _local_rank()
    starts = server.url is None and local_rank == 0  # one server per machine, started by its local rank 0
    pusher = starts or (server.url is not None and rank == 0)
    workdir = Path(tempfile.mkdtemp(prefix="comlrl-rollout-", dir=weights_root())) if pusher else None
    proc, url, log_path, error = None, server.url, None, None
    if starts:
        try:
            proc, url, log_path = start_server(policies, settings, seed, workdir, server.start_timeout_s, server.port)
        except VLLMUnavailable as exc:
            error = str(exc)
    if server.url is None:  # every rank learns its machine's URL (ranks are numbered machine by machine)
        gathered = _all_gather((url, error))
        url, error = gathered[rank - local_rank][0], next((e for _, e in gathered if e), None)
    if error is None:
        try:  # a server of another config is a config error on every rank (they all ask the same one)
            check_server(ServerClient(url, proc, log_path), policies)
        except RolloutServerError as exc:  # not reachable
            error = str(exc)
    error = next((e for e in _all_gather(error) if e), None)  # one rank's failure: every rank falls back
    if error is not None:
        if proc is not None:
            proc.kill()
            proc.wait()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
        raise VLLMUnavailable(error)
    engine = ServerEngine(policies, ServerClient(url, proc, log_path), workdir)
    engine.start_seconds = time.perf_counter() - t0
    log.info("rollout server %s serves this rank (%s; %.1f s)", url, "started here" if proc else "shared",
             engine.start_seconds)
    return engine
