"""Test policies on the tiny random model whose agents really differ (shared by the policy tests)."""

from __future__ import annotations

import torch

from comlrl.config.schema import AgentsConfig, ModelConfig
from comlrl.policy import AgentPolicies


def make_policies(mode: str = "lora", name: str = "tiny-random", num_agents: int = 2, seed: int = 0,
                  **model_kw) -> AgentPolicies:
    """Policies whose adapters differ from the base and from each other (lora_B starts at zero)."""
    kw = {"max_new_tokens": 8, "temperature": 1.0, **model_kw}
    pol = AgentPolicies(ModelConfig(name=name, **kw), AgentsConfig(mode=mode), num_agents)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in pol.module.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
            elif mode == "full" and n.startswith("models.1.") and p.ndim == 2:
                p.add_(torch.randn(p.shape, generator=gen) * 0.02)
    return pol
