"""N agent policies: one frozen base with a LoRA adapter per agent (default) or a full model per agent.

`AgentPolicies` is what the trainer, the engines and the local LLM backend hold: the agents' module
(`comlrl.policy.agents`, built by `comlrl.policy.loading`), their tokenizers and EOS ids, and the calls on
them: prompt ids (`prompts`), batched generation (`generation`), log-probs of samples (`logprobs`), save and
load. It asks the module, never the config or the module's type, how the agents are shaped.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any

import torch
from torch import nn

from comlrl.cores import side_by_side
from comlrl.models import AgentsConfig, ModelConfig, publishable, resolve_model_path
from comlrl.policy.agents import AgentsModule
from comlrl.policy.generation import (
    FittedPrompt,
    PromptCache,
    cut_at_eos,
    cut_at_stop,
    describe_cuts,
    fit_prompt,
    generate_rows,
    sample_counts,
    stop_criterion,
)
from comlrl.policy.loading import build_agents, eos_ids, load_tokenizers
from comlrl.policy.model_card import base_model, card, name_base
from comlrl.policy.packing import PackedBatch, pack, packed_area
from comlrl.tree.nodes import Messages, Sample, agent_name, answer_prefix_of

log = logging.getLogger(__name__)

VALUE_HEADS = "value_heads.pt"  # beside the agents' weights, when the agents carry value heads


class AgentPolicies:
    """Models, tokenizers and chat templates of N agents; batched generation and log-probs."""

    def __init__(self, model_cfg: ModelConfig, agents_cfg: AgentsConfig, num_agents: int,
                 stop_strings: Sequence[str] = (), head_messages: int | None = None) -> None:
        self.cfg = model_cfg
        self.stop_strings = tuple(stop_strings)  # default stops of `generate` (e.g. "</tool_call>")
        # leading messages a history cut keeps (None: the system message and the first user message)
        self.head_messages = head_messages
        self._stop_criteria: dict[tuple[str, tuple[str, ...]], Any] = {}
        self.prompt_cache = PromptCache()  # prompts prefilled since the weights last changed
        self.agents_cfg = agents_cfg
        self.num_agents = num_agents
        self.mode = agents_cfg.mode
        self.prompt_truncations = 0  # prompts cut so far (metrics.jsonl)
        self._cuts: list[FittedPrompt] = []  # cut since the last report_truncations
        self._prompts = 0  # prompts fitted since the last report_truncations
        if self.mode == "lora" and agents_cfg.models:
            raise ValueError("agents.models names one model per agent and needs agents.mode=full")
        names = list(agents_cfg.models) if agents_cfg.models else [model_cfg.name] * num_agents
        if len(names) != num_agents:
            raise ValueError(f"agents.models has {len(names)} entries for {num_agents} agents")
        self.model_names = names
        self.paths = [resolve_model_path(n, model_cfg.cache_dir) for n in names]
        self.tokenizers = load_tokenizers(self.paths)
        self.module: AgentsModule = build_agents(model_cfg, agents_cfg, self.paths)
        self.eos_ids = [eos_ids(self.tokenizers[i], self.module.generation_model(i)) for i in range(num_agents)]
        self.module.train()

    # ---- plumbing -------------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        """Wherever accelerate put the module."""
        return self.module.device

    def forget_generation(self) -> None:
        """Drop what generation keeps while the weights stay (packed weights, prompts' keys and values): the
        rollout ended, or the weights changed."""
        self.module.release_packs()
        self.prompt_cache.clear()

    def trainable_parameters(self) -> list[nn.Parameter]:
        """All agents' trainable parameters, for ONE optimizer (one step updates every agent)."""
        return [p for p in self.module.parameters() if p.requires_grad]

    def agent_parameters(self, agent: int) -> list[nn.Parameter]:
        """One agent's trainable parameters (per-agent grad norms, tests)."""
        return self.module.agent_parameters(agent)

    # ---- prompts --------------------------------------------------------------------------------
    def prompt_ids(self, agent: int, messages: Messages) -> tuple[list[int], bool]:
        """Chat-templated prompt ids, cut to model.max_prompt_tokens (`comlrl.policy.generation.fit_prompt`);
        every cut is counted in `prompt_truncations` and reported by `report_truncations`."""
        fit = fit_prompt(self.tokenizers[agent], messages, self.cfg.max_prompt_tokens, self.head_messages)
        self._prompts += 1
        if fit.truncated:
            self.prompt_truncations += 1
            self._cuts.append(fit)
        return fit.ids, fit.truncated

    def report_truncations(self, label: str) -> None:
        """One warning line, `<label>: cut N of M prompts ...`, for the prompts cut since the last report (a
        step's rollout, an evaluation): a long history is cut in every node of every step, and a line per
        prompt buried the log. Nothing cut: no line."""
        cuts, prompts = self._cuts, self._prompts
        self._cuts, self._prompts = [], 0
        if cuts:
            log.warning("%s: %s", label, describe_cuts(cuts, prompts, self.cfg.max_prompt_tokens,
                                                       self.prompt_truncations))

    # ---- generation -----------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, requests: list[tuple[int, Messages]], num_samples: int | Sequence[int], greedy: bool = False,
                 stop_strings: Sequence[str] | None = None) -> list[list[Sample]]:
        """`num_samples` completions per (agent, messages) request (one count for all, or one per request),
        batched as the module groups them.

        In LoRA mode rows of all agents share one call (per-row adapter routing); in full mode there is one
        call per agent. Sampling uses model.temperature / top_p / top_k, greedy ignores them.
        When the messages end with an assistant message (an answer prefix, e.g. "```python\ndef aux("), the
        model continues it and each Sample's `text` starts with it, so scoring and history see the whole answer.
        A row also stops when its text contains one of `stop_strings` (default `self.stop_strings`); the
        completion then ends with the token that completed it, so nothing after it is trained on.
        """
        stops = tuple(self.stop_strings if stop_strings is None else stop_strings)
        prompts = [self.prompt_ids(agent, msgs) for agent, msgs in requests]
        counts = sample_counts(num_samples, len(requests))
        rows = [(r, requests[r][0]) for r in range(len(requests)) for _ in range(counts[r])]
        first = [0, *accumulate(counts)]  # request r owns rows first[r] .. first[r + 1] - 1
        completions: list[list[int]] = [[] for _ in rows]
        was_training = self.module.training
        self.module.eval()
        groups = self.module.generation_groups([agent for agent, _ in requests])
        # several calls (agents with models of their own) on CPU run side by side, one core each: a decode step of a
        # small model is bound by one core, not by the machine (benchmarks/compat_speed.py); each call then samples
        # from a generator of its own, seeded from torch's in group order, so the samples do not depend on the
        # threads (or on how many cores there are)
        parallel = len(groups) > 1 and self.module.device.type == "cpu"
        seeds = [int(torch.randint(2**62, ())) if parallel else None for _ in groups]
        calls = []
        for group, seed in zip(groups, seeds, strict=True):
            tok = self.tokenizers[requests[group[0]][0]]
            sizes = {counts[r] for r in group}
            # one count: each prompt prefilled once for its rows; several: each row its own prompt copy,
            # still one call (one decode pass)
            repeat = sizes.pop() if len(sizes) == 1 else 1
            order = [r for r in group for _ in range(1 if repeat > 1 else counts[r])]
            agents = [requests[r][0] for r in order]
            stopping = stop_criterion(self._stop_criteria, self.paths[agents[0]], tok, stops) if stops else None
            calls.append(functools.partial(generate_rows, self.module, self.cfg, tok,
                                           sorted({e for a in agents for e in self.eos_ids[a]}), agents,
                                           [prompts[r][0] for r in order], greedy, stopping, repeat=repeat,
                                           seed=seed, prompt_cache=self.prompt_cache))
        try:
            for group, rows_out in zip(groups, side_by_side(calls) if parallel else [c() for c in calls],
                                       strict=True):
                outs = iter(rows_out)
                for r in group:  # the rows come back request by request, each request's consecutive
                    for s in range(counts[r]):
                        completions[first[r] + s] = next(outs)
        finally:
            self.module.train(was_training)
        results: list[list[Sample]] = [[] for _ in requests]
        for (r, agent), comp in zip(rows, completions, strict=True):
            results[r].append(self.make_sample(agent, requests[r][1], prompts[r], comp, stops))
        return results

    def sample_of(self, agent: int, messages: Messages, text: str) -> Sample:
        """A finished Sample of `text` as agent `agent`'s answer to `messages` (a written answer, e.g. an
        exported preference pair, rather than one sampled here): its tokens, then EOS."""
        prompt = self.prompt_ids(agent, messages)
        tok = self.tokenizers[agent]
        ids = list(tok(text, add_special_tokens=False)["input_ids"])[: self.cfg.max_new_tokens - 1]
        return Sample(agent, tuple(prompt[0]), (*ids, self.eos_ids[agent][0]), text, True, prompt[1])

    def make_sample(self, agent: int, messages: Messages, prompt: tuple[list[int], bool], generated: list[int],
                    stops: Sequence[str], logprobs: Sequence[float] | None = None) -> Sample:
        """A Sample from an engine's raw output: cut after EOS or the token completing a stop string (what
        follows is never trained on), text = answer prefix + decoded completion."""
        tok, eos = self.tokenizers[agent], self.eos_ids[agent]
        comp, finished = cut_at_stop(tok, generated, eos, stops) if stops else cut_at_eos(generated, eos)
        text = (answer_prefix_of(messages) or "") + tok.decode(comp, skip_special_tokens=True)
        lps = None if logprobs is None else tuple(float(x) for x in logprobs[:len(comp)])
        return Sample(agent, tuple(prompt[0]), tuple(comp), text, finished, prompt[1], lps)

    # ---- log-probs ------------------------------------------------------------------------------
    def packed_area(self, samples: Sequence[Sample]) -> int:
        """The token slots a forward over `samples` takes (`comlrl.policy.packing.packed_area`)."""
        return packed_area([s.agent for s in samples], [s.prompt_ids for s in samples],
                           [s.completion_ids for s in samples])

    def pack(self, samples: Sequence[Sample], share_prefix: bool = True) -> PackedBatch:
        """Model inputs for samples (see `comlrl.policy.packing`): with `share_prefix`, adjacent samples of one
        agent and prompt (a node's G siblings) share one copy of the prompt."""
        return pack([s.agent for s in samples], [s.prompt_ids for s in samples],
                    [s.completion_ids for s in samples],
                    [len(cut_at_eos(s.completion_ids, self.eos_ids[s.agent])[0]) for s in samples],
                    pad_id=self.tokenizers[0].pad_token_id or 0, share_prefix=share_prefix,
                    dtype=next(self.module.parameters()).dtype)

    def token_logprobs(self, samples: Sequence[Sample], module: nn.Module | None = None,
                       reference: bool = False, share_prefix: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """(logps [B, Lc], mask [B, Lc] float) of the completion tokens, in the sampling distribution.

        Log-probs are of logits / model.temperature (the distribution the samples were drawn from, as in
        TRL/verl), so PPO ratios and the KL compare like with like. `module` is the accelerate-prepared
        wrapper of `self.module` (DDP / DeepSpeed engine); `reference=True` uses the initial policy (LoRA: the
        base without adapters; full: a frozen copy of the initial weights), under no_grad.
        `share_prefix=False` repeats each prompt per sample (the reference layout; same values, more compute).
        """
        batch = self.pack(samples, share_prefix).to(self.device)
        temperature = self.cfg.temperature
        if reference:
            with torch.no_grad():
                return self.module.reference_logprobs(batch, temperature), batch.mask
        return (module if module is not None else self.module)(batch, temperature), batch.mask

    def logprobs_and_values(self, samples: Sequence[Sample], module: nn.Module | None = None
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(logps [B, Lc], mask [B, Lc], values [B]): `token_logprobs` and each sample's value head output at
        its prompt's last token (actor-critic; the module carries value heads)."""
        batch = self.pack(samples).to(self.device)
        logps, values = (module if module is not None else self.module)(batch, self.cfg.temperature, values=True)
        return logps, batch.mask, values

    # ---- save / load ----------------------------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        """`dir/agent<i>/`: a peft adapter (PeftModel.from_pretrained(base, dir/agent0)) naming the base a user
        loads (`model_card.base_model`) or a full HF model, with the agent's tokenizer; `dir/policies.json` says
        which, `dir/README.md` what they are (peft's is an empty template). Modes as the umask gives (not
        safetensors' 0600), so the weights are as readable as any file the user writes."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        names = [agent_name(i) for i in range(self.num_agents)]
        self.module.save_weights(out, names)
        if self.module.value_heads is not None:  # actor-critic: the critic is part of the policy's state
            torch.save(self.module.value_heads.state_dict(), out / VALUE_HEADS)
        for i, name in enumerate(names):
            self.tokenizers[i].save_pretrained(out / name)
            if self.mode == "lora":
                name_base(out / name, base_model(self.model_names[i], self.paths[i]))
        meta = {"mode": self.mode, "num_agents": self.num_agents, "models": self.model_names, "paths": self.paths}
        (out / "policies.json").write_text(json.dumps(meta, indent=1))
        (out / "README.md").write_text(card(self.mode, self.model_names, self.paths))
        publishable(out)

    def load(self, directory: str | Path) -> None:
        """Load weights saved by `save` in place (parameters keep their identity for the optimizer)."""
        self.module.load_weights(Path(directory), [agent_name(i) for i in range(self.num_agents)])
        heads = Path(directory) / VALUE_HEADS
        if self.module.value_heads is not None:
            if not heads.is_file():
                raise ValueError(f"{directory} holds no value heads ({VALUE_HEADS}): it was not saved by an "
                                 "actor-critic run")
            self.module.value_heads.load_state_dict(torch.load(heads, map_location=self.device, weights_only=True))
