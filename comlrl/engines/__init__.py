"""Rollout engines: what samples the agents' completions during a rollout.

`hf` is the reference (transformers `generate` on the trainer's own modules, always the current policy);
`vllm` is the fast path (a colocated vLLM engine that the trainer pushes each agent's weights into).
Both return the same `Sample`s, so the tree expander, scoring and the update do not know which ran.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the engines hold policies built elsewhere: importing the names loads no torch
    from comlrl.policy import AgentPolicies, Messages, Sample

log = logging.getLogger(__name__)

ENGINES = ("hf", "vllm")  # rollout.engine


@dataclass
class VLLMSettings:
    """`rollout.vllm`: the colocated vLLM engine's settings."""

    enforce_eager: bool = True  # skip vLLM's compile step (start-up ~20 s instead of ~100 s on 2 CPU cores)
    kv_cache_gib: int = 2  # CPU build: KV cache size in GiB (VLLM_CPU_KVCACHE_SPACE, unless that is set)
    gpu_memory_utilization: float = 0.3  # CUDA build: share of GPU memory for weights + KV cache
    sleep_between_rollouts: bool = True  # CUDA build: offload weights and free the KV cache during updates


@dataclass
class RolloutConfig:
    """The `rollout` section: which engine samples the rollouts, and the correction for its log-prob gap."""

    engine: str = "hf"  # hf (transformers generate, the reference) | vllm (falls back to hf if it cannot start)
    # truncated importance sampling: each token's loss is weighted by min(pi_train / pi_engine, cap) when
    # the engine's log-probs differ from the trainer's (vllm); null = no correction (the gap is still logged)
    is_cap: float | None = 2.0
    vllm: VLLMSettings = field(default_factory=VLLMSettings)


class RolloutEngine(Protocol):
    """Generates completions for (agent, chat) requests under the agents' current weights."""

    name: str

    def generate(self, requests: list[tuple[int, Messages]], num_samples: int, greedy: bool = False,
                 stop_strings: Sequence[str] | None = None) -> list[list[Sample]]:
        """`num_samples` completions per request, in request order (see `AgentPolicies.generate`)."""
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

    def generate(self, requests: list[tuple[int, Messages]], num_samples: int, greedy: bool = False,
                 stop_strings: Sequence[str] | None = None) -> list[list[Sample]]:
        return self.policies.generate(requests, num_samples, greedy=greedy, stop_strings=stop_strings)

    def weights_changed(self) -> None:
        pass

    def idle(self) -> None:
        pass

    def close(self) -> None:
        pass


def build_engine(name: str, policies: AgentPolicies, settings: object, seed: int) -> RolloutEngine:
    """The engine `rollout.engine` names; `vllm` falls back to `hf` with one warning when it cannot start
    here (not installed, unsupported model or platform), so a run never dies for want of the fast path."""
    if name == "hf":
        return HFEngine(policies)
    if name != "vllm":
        raise ValueError(f"rollout.engine={name!r} is not one of: {', '.join(ENGINES)}")
    from comlrl.engines.vllm_engine import VLLMEngine, VLLMUnavailable

    try:
        return VLLMEngine(policies, settings, seed)
    except VLLMUnavailable as exc:
        log.warning("rollout.engine=vllm cannot start here (%s): using the hf engine", exc)
        return HFEngine(policies)
