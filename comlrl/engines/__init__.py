"""Rollout engines: what samples the agents' completions during a rollout.

`hf` is the reference (transformers `generate` on the trainer's own modules, always the current policy);
`vllm` is the fast path (a colocated vLLM engine that the trainer pushes each agent's weights into).
Both return the same `Sample`s, so the tree expander, scoring and the update do not know which ran.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol

from comlrl.policy import AgentPolicies, Messages, Sample

log = logging.getLogger(__name__)

ENGINES = ("hf", "vllm")


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
