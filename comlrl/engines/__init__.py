"""Rollout engines: what samples the agents' completions during a rollout.

`hf` is the reference (transformers `generate` on the trainer's own modules, always the current policy);
`vllm` is the fast path (a colocated vLLM engine that the trainer pushes each agent's weights into);
`vllm_server` samples from a vLLM engine in its own process that serves every rank (`rollout_server.py`).
Both return the same `Sample`s, so the tree expander, scoring and the update do not know which ran.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from comlrl.errors import require

if TYPE_CHECKING:  # the engines hold policies built elsewhere: importing the names loads no torch
    from comlrl.policy import AgentPolicies, Messages, Sample

log = logging.getLogger(__name__)

ENGINES = ("hf", "vllm", "vllm_server")  # rollout.engine


@dataclass
class VLLMSettings:
    """`rollout.vllm`: the colocated vLLM engine's settings."""

    enforce_eager: bool = True  # skip vLLM's compile step (start-up ~20 s instead of ~100 s on 2 CPU cores)
    kv_cache_gib: int = 2  # CPU build: KV cache size in GiB (VLLM_CPU_KVCACHE_SPACE, unless that is set)
    gpu_memory_utilization: float = 0.3  # CUDA build: share of GPU memory for weights + KV cache
    sleep_between_rollouts: bool = True  # CUDA build: offload weights and free the KV cache during updates


@dataclass
class ServerSettings:
    """`rollout.server`: the rollout server of `rollout.engine=vllm_server` (it uses `rollout.vllm` too)."""

    # a server started with `comlrl-serve` on this machine (the trainer writes the weights it pushes into
    # /dev/shm, which the server reads); null: the trainer starts one per machine and stops it at the end
    url: str | None = None
    start_timeout_s: int = 600  # a server not serving by then: one warning, and the hf engine
    # the port of the server the trainer starts (url null); 0: a free one. Set it when other programs sample
    # from the run's current policy there (Atropos environments: its OpenAI-compatible /v1 endpoints)
    port: int = 0


@dataclass
class AtroposSettings:
    """`rollout.atropos`: train on the scored groups of Atropos environments (docs/atropos.md) instead of
    growing trees; the trainer pulls them from Atropos's API server (`run-api`)."""

    url: str | None = None  # the API server, e.g. http://127.0.0.1:8000; null: the run grows its own trees
    batch_size: int = 16  # sequences per optimizer step (Atropos counts sequences: groups x group_size)
    max_token_len: int = 2048  # the longest sequence the environments may send (tokens, prompt included)
    wait_timeout_s: float = 600.0  # no batch for this long: the run stops (its checkpoint intact)
    poll_s: float = 1.0  # between /batch requests while the queue is empty


@dataclass
class RolloutConfig:
    """The `rollout` section: which engine samples the rollouts, and the correction for its log-prob gap."""

    # hf (transformers generate, the reference) | vllm (colocated, one engine per rank) | vllm_server (one
    # engine in its own process serves every rank); the vLLM engines fall back to hf if they cannot start
    engine: str = "hf"
    # truncated importance sampling: each token's loss is weighted by min(pi_train / pi_engine, cap) when
    # the engine's log-probs differ from the trainer's (vllm); null = no correction (the gap is still logged)
    is_cap: float | None = 2.0
    # samples per agent at a node whose parent joint action solved the problem (its turns after a solved answer
    # cost less: an unbiased estimate of that path's continuation from fewer samples); null = G, as any node
    solved_generations: int | None = None
    # tree: G samples per agent at every node (the turn tree) | flat: G independent episodes per problem (G samples
    # at the root, one at every later turn), each later move trained with its episode's advantage (trajectory-level
    # GRPO, as flat multi-turn trainers do): the baseline the tree is measured against
    shape: str = "tree"
    vllm: VLLMSettings = field(default_factory=VLLMSettings)
    server: ServerSettings = field(default_factory=ServerSettings)
    atropos: AtroposSettings = field(default_factory=AtroposSettings)

    def check(self) -> None:
        require(self.is_cap is None or self.is_cap >= 1.0, "rollout.is_cap", self.is_cap, "a number >= 1 or null")
        require(self.solved_generations is None or self.solved_generations >= 2, "rollout.solved_generations",
                self.solved_generations, "an integer >= 2 (a sibling group needs two) or null (= G)")
        require(self.shape in ("tree", "flat"), "rollout.shape", self.shape, "tree or flat")
        v, s = self.vllm, self.server
        require(v.kv_cache_gib >= 1, "rollout.vllm.kv_cache_gib", v.kv_cache_gib, "an integer >= 1")
        require(0 < v.gpu_memory_utilization <= 1, "rollout.vllm.gpu_memory_utilization", v.gpu_memory_utilization,
                "a number in (0, 1]")
        require(s.url is None or s.url.startswith(("http://", "https://")), "rollout.server.url", s.url,
                "an http:// URL of a running comlrl-serve, or null (the trainer starts one)")
        require(s.start_timeout_s > 0, "rollout.server.start_timeout_s", s.start_timeout_s, "a number of seconds > 0")
        require(0 <= s.port <= 65535, "rollout.server.port", s.port, "a port number, or 0 (a free one)")
        a = self.atropos
        require(a.url is None or a.url.startswith(("http://", "https://")), "rollout.atropos.url", a.url,
                "an http:// URL of Atropos's API server (run-api), or null")
        require(a.batch_size >= 1, "rollout.atropos.batch_size", a.batch_size, "an integer >= 1 (sequences)")
        require(a.max_token_len >= 2, "rollout.atropos.max_token_len", a.max_token_len, "an integer >= 2")
        require(a.wait_timeout_s > 0, "rollout.atropos.wait_timeout_s", a.wait_timeout_s, "a number of seconds > 0")
        require(a.poll_s > 0, "rollout.atropos.poll_s", a.poll_s, "a number of seconds > 0")


class RolloutEngine(Protocol):
    """Generates completions for (agent, chat) requests under the agents' current weights."""

    name: str

    def generate(self, requests: list[tuple[int, Messages]], num_samples: int | Sequence[int], greedy: bool = False,
                 stop_strings: Sequence[str] | None = None) -> list[list[Sample]]:
        """`num_samples` completions per request (one count for all, or one per request), in request order."""
        ...

    def weights_changed(self) -> None:
        """The agents' weights moved (optimizer step, checkpoint load): never serve the old ones again."""
        ...

    def idle(self) -> None:
        """A rollout is over and the update comes next: free what the update needs (GPU memory)."""
        ...

    def close(self) -> None:
        ...


class HFEngine:
    """Reference engine: `AgentPolicies.generate` on the live modules (nothing to sync)."""

    name = "hf"

    def __init__(self, policies: AgentPolicies) -> None:
        self.policies = policies

    def generate(self, requests: list[tuple[int, Messages]], num_samples: int | Sequence[int], greedy: bool = False,
                 stop_strings: Sequence[str] | None = None) -> list[list[Sample]]:
        return self.policies.generate(requests, num_samples, greedy=greedy, stop_strings=stop_strings)

    def weights_changed(self) -> None:
        self.policies.forget_generation()

    def idle(self) -> None:
        self.policies.forget_generation()

    def close(self) -> None:
        pass


def build_engine(rollout: RolloutConfig, policies: AgentPolicies, seed: int) -> RolloutEngine:
    """The engine `rollout.engine` names; the vLLM engines fall back to `hf` with one warning when they
    cannot start here (not installed, unsupported model or platform, a server that does not come up), so a
    run never dies for want of the fast path."""
    name = rollout.engine
    if name == "hf":
        return HFEngine(policies)
    if name not in ENGINES:
        raise ValueError(f"rollout.engine={name!r} is not one of: {', '.join(ENGINES)}")
    from comlrl.engines.vllm_runner import VLLMUnavailable

    try:
        if name == "vllm_server":
            from comlrl.engines.server_engine import build_server_engine

            return build_server_engine(policies, rollout.vllm, rollout.server, seed)
        from comlrl.engines.vllm_engine import VLLMEngine

        return VLLMEngine(policies, rollout.vllm, seed)
    except VLLMUnavailable as exc:
        log.warning("rollout.engine=%s cannot start here (%s): using the hf engine", name, exc)
        return HFEngine(policies)
