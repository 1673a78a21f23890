"""`agents.lora.target_modules` in the forms peft accepts, from the config to the built adapters."""

from __future__ import annotations

import torch

from comlrl.config.schema import load_config
from comlrl.policy import AgentPolicies


def _adapted_linears(overrides: list[str]) -> tuple[set[str], set[str]]:
    """(names of the base model's Linear layers, names of those that got agent0's LoRA) for a tiny-random build."""
    cfg = load_config(None, ["model.name=tiny-random", "model.max_new_tokens=4", *overrides])
    pol = AgentPolicies(cfg.model, cfg.agents, cfg.magrpo.num_agents)
    adapted, linears = set(), set()
    for name, mod in pol.module.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if hasattr(mod, "lora_A") and "agent0" in mod.lora_A and "agent1" in mod.lora_A:
            adapted.add(leaf)
        elif isinstance(mod, torch.nn.Linear) and not hasattr(mod, "lora_A") and ".lora_" not in name \
                and ".base_layer" not in name:
            linears.add(leaf)
    return linears | adapted, adapted


def test_all_linear_string_adapts_every_linear_layer_but_the_head():
    every, adapted = _adapted_linears(["agents.lora.target_modules=all-linear"])
    assert adapted == every - {"lm_head"}
    assert {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"} <= adapted


def test_a_list_still_adapts_only_the_listed_modules():
    _, adapted = _adapted_linears(["agents.lora.target_modules=[q_proj,v_proj]"])
    assert adapted == {"q_proj", "v_proj"}
