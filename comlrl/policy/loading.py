"""Building the agents from the config: tokenizers, the LoRA or full-model `AgentsModule`, EOS ids."""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import torch
from torch import nn

from comlrl.models import AgentsConfig, ModelConfig, load_model, load_tokenizer
from comlrl.policy.agents import AgentsModule, FullAgentsModule, LoraAgentsModule
from comlrl.tree.nodes import agent_name


def load_tokenizers(paths: Sequence[str]) -> list[Any]:
    """One tokenizer per agent; agents on the same model directory share one object."""
    toks: dict[str, Any] = {}
    for p in paths:
        if p not in toks:
            toks[p] = load_tokenizer(p)
    return [toks[p] for p in paths]


def build_agents(model_cfg: ModelConfig, agents_cfg: AgentsConfig, paths: Sequence[str]) -> AgentsModule:
    """The module `agents.mode` names: `lora` (adapters on the first path's model) or `full` (one per path)."""
    if agents_cfg.mode == "lora":
        return build_lora(paths[0], model_cfg, agents_cfg, len(paths))
    if agents_cfg.mode == "full":
        return build_full(paths, model_cfg)
    raise ValueError(f"agents.mode={agents_cfg.mode!r} is not one of: lora, full")


def build_lora(path: str, model_cfg: ModelConfig, agents_cfg: AgentsConfig, num_agents: int) -> LoraAgentsModule:
    """One frozen base with an adapter per agent, all trainable; checkpointing replays each row's routing."""
    from peft import LoraConfig, get_peft_model

    base = load_model(path, model_cfg.dtype)
    lc = agents_cfg.lora
    pcfg = LoraConfig(r=lc.r, lora_alpha=lc.alpha, lora_dropout=lc.dropout,
                      target_modules=lc.target_modules if isinstance(lc.target_modules, str)
                      else list(lc.target_modules), task_type="CAUSAL_LM")
    peft_model = get_peft_model(base, pcfg, adapter_name=agent_name(0))
    for i in range(1, num_agents):
        peft_model.add_adapter(agent_name(i), pcfg)
    module = LoraAgentsModule(peft_model, num_agents)
    if model_cfg.gradient_checkpointing:
        from transformers.modeling_layers import GradientCheckpointingLayer

        enable_checkpointing(base)
        for layer in base.modules():
            if isinstance(layer, GradientCheckpointingLayer):
                layer._gradient_checkpointing_func = module.checkpoint_fn
    module.all_adapters_trainable()
    return module


def build_full(paths: Sequence[str], model_cfg: ModelConfig) -> FullAgentsModule:
    """A full model per agent (loaded per agent even when paths repeat: each trains on its own)."""
    models = [load_model(p, model_cfg.dtype) for p in paths]
    for m in models if model_cfg.gradient_checkpointing else []:
        enable_checkpointing(m)
    return FullAgentsModule(models, partial(frozen_copies, list(paths), model_cfg.dtype))


def frozen_copies(paths: Sequence[str], dtype: str, device: torch.device) -> list[nn.Module]:
    """The initial models, frozen in eval mode on `device`; agents on the same path share one copy."""
    by_path: dict[str, nn.Module] = {}
    for p in paths:
        if p not in by_path:
            m = load_model(p, dtype).to(device).eval()
            m.requires_grad_(False)
            by_path[p] = m
    return [by_path[p] for p in paths]


def enable_checkpointing(model: nn.Module) -> None:
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def eos_ids(tokenizer: Any, model: nn.Module) -> list[int]:
    """Every id that ends a completion: the tokenizer's EOS and the model's generation_config EOS ids."""
    ids = {tokenizer.eos_token_id} if tokenizer.eos_token_id is not None else set()
    gen = model.generation_config.eos_token_id
    ids.update(gen if isinstance(gen, list) else [gen] if gen is not None else [])
    return sorted(ids)
