"""N agent policies: one frozen base with a LoRA adapter per agent (default) or a full model per agent.

`AgentPolicies.module` is the one `nn.Module` the trainer hands to `accelerator.prepare`. Its forward
takes a batch that mixes agents and returns log-probs of the given tokens, so a whole micro-batch of all
agents costs one forward and one backward, and one optimizer step updates every agent.

Mixed-adapter batches use peft's per-row `adapter_names` routing in LoRA layers, injected by our own
forward pre-hooks instead of `PeftModel(adapter_names=...)`: peft refuses that in training mode, and its
hooks are gone when gradient checkpointing replays a layer during backward (the replay would use the
active adapter: a CheckpointError at best, silently wrong gradients when a micro-batch holds one agent). The reference policy (KL) routes every row to `__base__` rather than using
`disable_adapter()`, which would reset `requires_grad` of all adapters but one.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from peft.tuners.lora import LoraLayer
from torch import nn
from torch.utils.checkpoint import checkpoint

from comlrl.config import AgentsConfig, ModelConfig
from comlrl.models import load_model, load_tokenizer, resolve_model_path
from comlrl.packing import PackedBatch, pack

log = logging.getLogger(__name__)

Messages = list[dict]
LOGIT_CHUNK_TOKENS = 512  # tokens per lm_head chunk: 512 x 49k vocab x 4 B = 100 MB of logits at a time


def answer_prefix_of(messages: Messages) -> str | None:
    """The start of the answer a chat prescribes (its trailing assistant message), or None."""
    if messages and messages[-1].get("role") == "assistant":
        return str(messages[-1].get("content", ""))
    return None


def agent_name(i: int) -> str:
    return f"agent{i}"


@dataclass(frozen=True)
class Sample:
    """One completion; ids are in the agent's tokenizer, completion_ids end with EOS (or with the token that
    completed a stop string) when `finished`."""

    agent: int
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    text: str
    finished: bool
    prompt_truncated: bool = False
    # per completion token, log p under the engine that sampled it (None: the trainer's own model sampled)
    logprobs: tuple[float, ...] | None = None


def _chunk_logprobs(head: Callable[[torch.Tensor], torch.Tensor], temperature: float, h: torch.Tensor,
                    targets: torch.Tensor) -> torch.Tensor:
    logits = head(h).float()
    if temperature != 1.0:
        logits = logits / temperature
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - logits.logsumexp(-1)


def hidden_to_logprobs(head: Callable[[torch.Tensor], torch.Tensor], hidden: torch.Tensor, targets: torch.Tensor,
                       temperature: float = 1.0, chunk: int = LOGIT_CHUNK_TOKENS) -> torch.Tensor:
    """log p(target) from final hidden states without keeping [B, L, V] fp32 logits alive.

    The lm_head runs on chunks of tokens; with grad on, each chunk is checkpointed so backward recomputes
    its logits instead of storing them (costs one more lm_head matmul, saves B*L*V*4 bytes).
    """
    b, t, d = hidden.shape
    flat_h, flat_t = hidden.reshape(b * t, d), targets.reshape(b * t)
    fn = partial(_chunk_logprobs, head, temperature)
    outs = []
    for s in range(0, b * t, chunk):
        if torch.is_grad_enabled():
            outs.append(checkpoint(fn, flat_h[s:s + chunk], flat_t[s:s + chunk], use_reentrant=False))
        else:
            outs.append(fn(flat_h[s:s + chunk], flat_t[s:s + chunk]))
    return torch.cat(outs).view(b, t) if outs else hidden.new_zeros(b, t, dtype=torch.float32)


def _positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding, as `generate` computes them, so log-probs match sampling."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def packed_hidden(model: nn.Module, batch: PackedBatch) -> torch.Tensor:
    """Final hidden states of a packed batch, flattened to [R * L, D] for `pred_index` lookups."""
    hidden = model.get_decoder()(input_ids=batch.input_ids, attention_mask=batch.attention,
                                 position_ids=batch.position_ids, use_cache=False).last_hidden_state
    return hidden.reshape(-1, hidden.shape[-1])


class LoraAgentsModule(nn.Module):
    """Frozen base + one LoRA adapter per agent; rows of a batch are routed to their agent's adapter."""

    def __init__(self, peft_model: nn.Module, num_agents: int) -> None:
        super().__init__()
        self.peft = peft_model
        self.num_agents = num_agents
        self._route: list[str] | None = None
        self._uniform: list[str] | None = None  # the one adapter of every row ([] = base), when there is one
        self._layers = [m for m in peft_model.modules() if isinstance(m, LoraLayer)]
        self._peft_active = [m._active_adapter for m in self._layers]
        for mod in self._layers:
            mod.register_forward_pre_hook(self._inject_route, with_kwargs=True)

    def _inject_route(self, module: nn.Module, args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
        if self._route is None:
            return None
        if self._uniform is not None:  # one adapter for all rows: peft's plain path, no per-row indexing
            module._active_adapter = self._uniform
            return None
        return args, {**kwargs, "adapter_names": self._route}

    @contextlib.contextmanager
    def routed(self, names: list[str] | None) -> Iterator[None]:
        """Route row i of every LoRA layer's input to adapter names[i] ('__base__' = no adapter).

        A batch of one agent takes peft's single-adapter forward (the layer's active adapter is pointed at
        it for the call, never through `set_adapter`, which would freeze the other adapters); mixed
        batches take peft's per-row `adapter_names` path, about 15% slower per decode step."""
        prev = self._route, self._uniform
        uniform = bool(names) and all(n == names[0] for n in names)
        self._route = names
        self._uniform = ([] if names[0] == "__base__" else [names[0]]) if uniform else None
        try:
            yield
        finally:
            self._route, self._uniform = prev
            if uniform:  # only the plain path moved the layers' active adapters
                for mod, active in zip(self._layers, self._peft_active, strict=True):
                    mod._active_adapter = active

    def checkpoint_fn(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """Per-layer gradient checkpointing that replays the layer with the routing of its forward."""
        names = self._route

        def run(*a: Any) -> Any:
            with self.routed(names):
                return fn(*a)

        return checkpoint(run, *args, use_reentrant=False)

    @property
    def base(self) -> nn.Module:
        return self.peft.get_base_model()

    def forward(self, batch: PackedBatch, temperature: float = 1.0, reference: bool = False) -> torch.Tensor:
        """log p of each sample's completion tokens under its agent (or the base when `reference`), [S, Lc]."""
        rows = ["__base__"] * len(batch.row_agents) if reference else [agent_name(a) for a in batch.row_agents.tolist()]
        with self.routed(rows):
            flat = packed_hidden(self.base, batch)
        hidden = flat[batch.pred_index]
        head = self.base.get_output_embeddings()
        if isinstance(head, LoraLayer):  # per-token chunks lose the row -> adapter map: logits in one piece
            per_sample = (["__base__"] * len(batch.sample_agents) if reference
                          else [agent_name(a) for a in batch.sample_agents.tolist()])
            with self.routed(per_sample):
                logits = head(hidden).float() / temperature
            return logits.log_softmax(-1).gather(-1, batch.targets.unsqueeze(-1)).squeeze(-1)
        return hidden_to_logprobs(head, hidden, batch.targets, temperature)


class FullAgentsModule(nn.Module):
    """One full model per agent; a mixed batch runs each agent's rows through its own model."""

    def __init__(self, models: Sequence[nn.Module]) -> None:
        super().__init__()
        self.models = nn.ModuleList(models)

    def forward(self, batch: PackedBatch, temperature: float = 1.0) -> torch.Tensor:
        return grouped_logprobs(list(self.models), batch, temperature)


def grouped_logprobs(models: Sequence[nn.Module], batch: PackedBatch, temperature: float) -> torch.Tensor:
    """[S, Lc] log-probs when each agent has its own model: one forward per agent over its rows."""
    out = batch.targets.new_zeros(batch.targets.shape, dtype=torch.float32)
    width = batch.input_ids.shape[1]
    for a in torch.unique(batch.row_agents).tolist():
        rows = (batch.row_agents == a).nonzero().squeeze(1)
        local = torch.full((len(batch.row_agents),), -1, dtype=torch.long, device=rows.device)
        local[rows] = torch.arange(len(rows), device=rows.device)
        part = PackedBatch(batch.input_ids[rows], batch.position_ids[rows], batch.attention[rows],
                           batch.row_agents[rows], batch.pred_index, batch.targets, batch.mask,
                           batch.sample_agents, batch.row_lengths[rows])
        flat = packed_hidden(models[a], part)
        mine = (batch.sample_agents == a).nonzero().squeeze(1)
        pred = batch.pred_index[mine]
        pred = local[pred // width] * width + pred % width
        lp = hidden_to_logprobs(models[a].get_output_embeddings(), flat[pred], batch.targets[mine], temperature)
        out = out.index_put((mine,), lp.to(out.dtype))
    return out


def _enable_checkpointing(model: nn.Module) -> None:
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x name
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


class AgentPolicies:
    """Models, tokenizers and chat templates of N agents; batched generation and log-probs."""

    def __init__(self, model_cfg: ModelConfig, agents_cfg: AgentsConfig, num_agents: int,
                 stop_strings: Sequence[str] = (), head_messages: int | None = None) -> None:
        self.cfg = model_cfg
        self.stop_strings = tuple(stop_strings)  # default stops of `generate` (e.g. "</tool_call>")
        # leading messages a history cut keeps (None: the system message and the first user message)
        self.head_messages = head_messages
        self._stop_criteria: dict[tuple[str, tuple[str, ...]], Any] = {}
        self.agents_cfg = agents_cfg
        self.num_agents = num_agents
        self.mode = agents_cfg.mode
        self.prompt_truncations = 0
        if self.mode == "lora" and agents_cfg.models:
            raise ValueError("agents.models names one model per agent and needs agents.mode=full")
        names = list(agents_cfg.models) if agents_cfg.models else [model_cfg.name] * num_agents
        if len(names) != num_agents:
            raise ValueError(f"agents.models has {len(names)} entries for {num_agents} agents")
        self.model_names = names
        self.paths = [resolve_model_path(n, model_cfg.cache_dir) for n in names]
        toks: dict[str, Any] = {}
        for p in self.paths:
            if p not in toks:
                toks[p] = load_tokenizer(p)
        self.tokenizers = [toks[p] for p in self.paths]
        self._reference: list[nn.Module] | None = None
        if self.mode == "lora":
            self.module: nn.Module = self._build_lora(self.paths[0])
        elif self.mode == "full":
            models = [load_model(p, model_cfg.dtype) for p in self.paths]
            for m in models if model_cfg.gradient_checkpointing else []:
                _enable_checkpointing(m)
            self.module = FullAgentsModule(models)
        else:
            raise ValueError(f"agents.mode={self.mode!r} is not one of: lora, full")
        self.eos_ids = [self._eos_ids(i) for i in range(num_agents)]
        self.module.train()

    # ---- construction -------------------------------------------------------------------------
    def _build_lora(self, path: str) -> LoraAgentsModule:
        from peft import LoraConfig, get_peft_model

        base = load_model(path, self.cfg.dtype)
        lc = self.agents_cfg.lora
        pcfg = LoraConfig(r=lc.r, lora_alpha=lc.alpha, lora_dropout=lc.dropout,
                          target_modules=lc.target_modules if isinstance(lc.target_modules, str)
                          else list(lc.target_modules), task_type="CAUSAL_LM")
        peft_model = get_peft_model(base, pcfg, adapter_name=agent_name(0))
        for i in range(1, self.num_agents):
            peft_model.add_adapter(agent_name(i), pcfg)
        module = LoraAgentsModule(peft_model, self.num_agents)
        if self.cfg.gradient_checkpointing:
            from transformers.modeling_layers import GradientCheckpointingLayer

            _enable_checkpointing(base)
            for layer in base.modules():
                if isinstance(layer, GradientCheckpointingLayer):
                    layer._gradient_checkpointing_func = module.checkpoint_fn
        self._all_adapters_trainable(module)
        return module

    @staticmethod
    def _all_adapters_trainable(module: nn.Module) -> None:
        """peft leaves only the active adapter trainable; every agent learns in every step."""
        for name, p in module.named_parameters():
            p.requires_grad_("lora_" in name)

    def _eos_ids(self, agent: int) -> list[int]:
        tok = self.tokenizers[agent]
        ids = {tok.eos_token_id} if tok.eos_token_id is not None else set()
        gen = self._hf_model(agent).generation_config.eos_token_id
        ids.update(gen if isinstance(gen, list) else [gen] if gen is not None else [])
        return sorted(ids)

    def _hf_model(self, agent: int) -> nn.Module:
        if isinstance(self.module, LoraAgentsModule):
            return self.module.base
        return self.module.models[agent]

    # ---- plumbing -------------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        """Wherever accelerate put the module."""
        return next(self.module.parameters()).device

    def trainable_parameters(self) -> list[nn.Parameter]:
        """All agents' trainable parameters, for ONE optimizer (one step updates every agent)."""
        return [p for p in self.module.parameters() if p.requires_grad]

    def agent_parameters(self, agent: int) -> list[nn.Parameter]:
        """One agent's trainable parameters (per-agent grad norms, tests)."""
        if isinstance(self.module, LoraAgentsModule):
            tag = f".{agent_name(agent)}."
            return [p for n, p in self.module.named_parameters() if p.requires_grad and tag in n]
        return [p for p in self.module.models[agent].parameters() if p.requires_grad]

    # ---- prompts --------------------------------------------------------------------------------
    def _encode(self, agent: int, messages: Messages) -> list[int]:
        """A chat ending in an assistant message is an answer prefix: the model continues that message."""
        tok = self.tokenizers[agent]
        partial = answer_prefix_of(messages) is not None
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=not partial,
                                       continue_final_message=partial)
        return list(tok(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, agent: int, messages: Messages) -> tuple[list[int], bool]:
        """Chat-templated prompt ids; too long -> drop the oldest history between the head and the end.

        The head (`head_messages` leading messages; by default the system message and the first user
        message: the problem) and the latest messages are kept; only candidates whose roles still alternate
        at the cut are used. If that is not enough, tokens are cut from the middle. Every truncation is counted in `prompt_truncations` and logged.
        """
        limit = self.cfg.max_prompt_tokens
        ids = self._encode(agent, messages)
        if len(ids) <= limit:
            return ids, False
        full = len(ids)
        head = self.head_messages or (2 if messages and messages[0].get("role") == "system" else 1)
        dropped = 0
        for k in range(1, len(messages) - head):
            cand = messages[:head] + messages[head + k:]
            if cand[head - 1].get("role") == cand[head].get("role"):
                continue
            ids, dropped = self._encode(agent, cand), k
            if len(ids) <= limit:
                break
        if len(ids) > limit:
            keep_head = limit // 2
            ids = ids[:keep_head] + ids[len(ids) - (limit - keep_head):]
        self.prompt_truncations += 1
        log.warning("agent %d prompt of %d tokens exceeds model.max_prompt_tokens=%d: dropped %d middle "
                    "message(s), now %d tokens (%d truncations so far)", agent, full, limit, dropped, len(ids),
                    self.prompt_truncations)
        return ids, True

    # ---- generation -----------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, requests: list[tuple[int, Messages]], num_samples: int, greedy: bool = False,
                 stop_strings: Sequence[str] | None = None) -> list[list[Sample]]:
        """`num_samples` completions per (agent, messages) request, all in one batched `generate` call.

        In LoRA mode rows of all agents share one call (per-row adapter routing); in full mode there is one
        call per agent. Sampling uses model.temperature / top_p / top_k, greedy ignores them.
        When the messages end with an assistant message (an answer prefix, e.g. "```python\ndef aux("), the
        model continues it and each Sample's `text` starts with it, so scoring and history see the whole answer.
        A row also stops when its text contains one of `stop_strings` (default `self.stop_strings`); the
        completion then ends with the token that completed it, so nothing after it is trained on.
        """
        stops = tuple(self.stop_strings if stop_strings is None else stop_strings)
        prompts = [self.prompt_ids(agent, msgs) for agent, msgs in requests]
        rows = [(r, requests[r][0]) for r in range(len(requests)) for _ in range(num_samples)]
        completions: list[list[int]] = [[] for _ in rows]
        if isinstance(self.module, LoraAgentsModule):
            groups = [list(range(len(requests)))] if requests else []
        else:
            groups = [[r for r, (a, _) in enumerate(requests) if a == agent] for agent in range(self.num_agents)]
        was_training = self.module.training
        self.module.eval()
        try:
            for group in filter(None, groups):  # request r owns rows r*num_samples .. (r+1)*num_samples-1
                outs = self._generate_rows([requests[r][0] for r in group], [prompts[r][0] for r in group],
                                           greedy, stops, repeat=num_samples)
                for k, r in enumerate(group):
                    for s in range(num_samples):
                        completions[r * num_samples + s] = outs[k * num_samples + s]
        finally:
            self.module.train(was_training)
        results: list[list[Sample]] = [[] for _ in requests]
        for (r, agent), comp in zip(rows, completions, strict=True):
            results[r].append(self.make_sample(agent, requests[r][1], prompts[r], comp, stops))
        return results

    def make_sample(self, agent: int, messages: Messages, prompt: tuple[list[int], bool], generated: list[int],
                    stops: Sequence[str], logprobs: Sequence[float] | None = None) -> Sample:
        """A Sample from an engine's raw output: cut after EOS or the token completing a stop string (what
        follows is never trained on), text = answer prefix + decoded completion."""
        comp, finished = self._cut_at_stop(agent, generated, stops) if stops else self._cut_at_eos(agent, generated)
        text = (answer_prefix_of(messages) or "") + self.tokenizers[agent].decode(comp, skip_special_tokens=True)
        lps = None if logprobs is None else tuple(float(x) for x in logprobs[:len(comp)])
        return Sample(agent, tuple(prompt[0]), tuple(comp), text, finished, prompt[1], lps)

    def _cut_at_eos(self, agent: int, ids: Sequence[int]) -> tuple[list[int], bool]:
        eos = set(self.eos_ids[agent])
        for i, t in enumerate(ids):
            if t in eos:
                return list(ids[:i + 1]), True
        return list(ids), False

    def _cut_at_stop(self, agent: int, ids: Sequence[int], stops: Sequence[str]) -> tuple[list[int], bool]:
        """Cut after EOS or after the first token whose text completes a stop string, whichever comes first."""
        tok, eos = self.tokenizers[agent], set(self.eos_ids[agent])
        longest, text = max(len(s) for s in stops), ""
        for i, t in enumerate(ids):
            if t in eos:
                return list(ids[:i + 1]), True
            start = max(0, len(text) - longest)
            text += tok.decode([t])
            if any(s in text[start:] for s in stops):
                return list(ids[:i + 1]), True
        return list(ids), False

    def _stop_criterion(self, agent: int, stops: tuple[str, ...]) -> Any:
        """HF's StopStringCriteria, built once per tokenizer and stops (building scans the vocab: ~2 s)."""
        from transformers import StoppingCriteriaList
        from transformers.generation.stopping_criteria import StopStringCriteria

        key = (self.paths[agent], stops)
        if key not in self._stop_criteria:
            self._stop_criteria[key] = StopStringCriteria(self.tokenizers[agent], list(stops))
        return StoppingCriteriaList([self._stop_criteria[key]])

    def _generate_rows(self, agents: list[int], prompts: list[list[int]], greedy: bool,
                       stop_strings: tuple[str, ...] = (), repeat: int = 1) -> list[list[int]]:
        """`repeat` completions of each prompt (agents[i]'s prompts[i]), as consecutive output rows.

        With repeat > 1 every prompt is prefilled once and its KV cache copied to its `repeat` rows (all but
        the last prompt token; `generate` runs that one per row and samples), instead of prefilling the same
        prompt `repeat` times: G siblings of a node share one prefill.
        """
        from transformers import DynamicCache, GenerationConfig

        tok = self.tokenizers[agents[0]]
        width = max(len(p) for p in prompts)
        ids = torch.full((len(prompts), width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, p in enumerate(prompts):  # left padding: every row's last prompt token sits at width - 1
            ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p):] = 1
        eos = sorted({e for a in agents for e in self.eos_ids[a]})
        gen_cfg = GenerationConfig(
            max_new_tokens=self.cfg.max_new_tokens, do_sample=not greedy, use_cache=True,
            temperature=None if greedy else self.cfg.temperature, top_p=None if greedy else self.cfg.top_p,
            top_k=None if greedy else self.cfg.top_k, eos_token_id=eos, pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
        )
        extra = {"stopping_criteria": self._stop_criterion(agents[0], stop_strings)} if stop_strings else {}
        dev = self.device
        lora = isinstance(self.module, LoraAgentsModule)
        model = self.module.base if lora else self.module.models[agents[0]]
        if repeat > 1 and width > 1 and min(len(p) for p in prompts) > 1:  # shared prefill of width - 1 tokens
            cache = DynamicCache(config=model.config)
            pre_mask = mask[:, :-1].to(dev)
            with self.module.routed([agent_name(a) for a in agents]) if lora else contextlib.nullcontext():
                model.get_decoder()(input_ids=ids[:, :-1].to(dev), attention_mask=pre_mask,
                                    position_ids=_positions(pre_mask), past_key_values=cache, use_cache=True)
            cache.batch_repeat_interleave(repeat)
            extra["past_key_values"] = cache
        ids, mask = ids.repeat_interleave(repeat, 0), mask.repeat_interleave(repeat, 0)
        names = [agent_name(a) for a in agents for _ in range(repeat)]
        with self.module.routed(names) if lora else contextlib.nullcontext():
            out = model.generate(input_ids=ids.to(dev), attention_mask=mask.to(dev), generation_config=gen_cfg,
                                 **extra)
        return out[:, width:].tolist()

    # ---- log-probs ------------------------------------------------------------------------------
    def pack(self, samples: Sequence[Sample], share_prefix: bool = True) -> PackedBatch:
        """Model inputs for samples (see `comlrl.packing`): with `share_prefix`, adjacent samples of one
        agent and prompt (a node's G siblings) share one copy of the prompt."""
        return pack([s.agent for s in samples], [s.prompt_ids for s in samples],
                    [s.completion_ids for s in samples],
                    [len(self._cut_at_eos(s.agent, s.completion_ids)[0]) for s in samples],
                    pad_id=self.tokenizers[0].pad_token_id or 0, share_prefix=share_prefix,
                    dtype=next(self.module.parameters()).dtype)

    def token_logprobs(self, samples: Sequence[Sample], module: nn.Module | None = None,
                       reference: bool = False, share_prefix: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """(logps [B, Lc], mask [B, Lc] float) of the completion tokens, in the sampling distribution.

        Log-probs are of logits / model.temperature (the distribution the samples were drawn from, as in
        TRL/verl), so PPO ratios and the KL compare like with like. `module` is the accelerate-prepared
        wrapper of `self.module` (DDP / DeepSpeed engine); `reference=True` uses the base model without
        adapters (full mode: a frozen copy of the initial weights), under no_grad. `share_prefix=False`
        repeats each prompt per sample (the reference layout; same values, more compute).
        """
        batch = self.pack(samples, share_prefix).to(self.device)
        temperature = self.cfg.temperature
        if reference:
            with torch.no_grad():
                if isinstance(self.module, LoraAgentsModule):
                    return self.module(batch, temperature, reference=True), batch.mask
                return grouped_logprobs(self._reference_models(), batch, temperature), batch.mask
        return (module if module is not None else self.module)(batch, temperature), batch.mask

    def _reference_models(self) -> list[nn.Module]:
        """Full mode: frozen copies of the initial models (loaded on first use; only needed for KL)."""
        if self._reference is None:
            by_path: dict[str, nn.Module] = {}
            for p in self.paths:
                if p not in by_path:
                    m = load_model(p, self.cfg.dtype).to(self.device).eval()
                    m.requires_grad_(False)
                    by_path[p] = m
            self._reference = [by_path[p] for p in self.paths]
        return self._reference

    # ---- save / load ----------------------------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        """`dir/agent<i>/`: a peft adapter (PeftModel.from_pretrained(base, dir/agent0)) or a full HF model."""
        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        names = [agent_name(i) for i in range(self.num_agents)]
        if isinstance(self.module, LoraAgentsModule):
            self.module.peft.save_pretrained(str(out), selected_adapters=names)
        else:
            for i, m in enumerate(self.module.models):
                m.save_pretrained(out / names[i])
        for i, name in enumerate(names):
            self.tokenizers[i].save_pretrained(out / name)
        meta = {"mode": self.mode, "num_agents": self.num_agents, "models": self.model_names, "paths": self.paths}
        (out / "policies.json").write_text(json.dumps(meta, indent=1))

    def load(self, directory: str | Path) -> None:
        """Load weights saved by `save` in place (parameters keep their identity for the optimizer)."""
        src = Path(directory)
        if isinstance(self.module, LoraAgentsModule):
            from peft.utils import load_peft_weights, set_peft_model_state_dict

            for i in range(self.num_agents):
                weights = load_peft_weights(str(src / agent_name(i)), device=str(self.device))
                result = set_peft_model_state_dict(self.module.peft, weights, adapter_name=agent_name(i))
                missing = [k for k in result.missing_keys if f".{agent_name(i)}." in k]
                if missing:
                    raise ValueError(f"{src / agent_name(i)} lacks {len(missing)} adapter weights, e.g. {missing[0]}")
            self._all_adapters_trainable(self.module)
        else:
            from transformers import AutoModelForCausalLM

            for i, m in enumerate(self.module.models):
                loaded = AutoModelForCausalLM.from_pretrained(str(src / agent_name(i)), dtype=m.dtype)
                m.load_state_dict(loaded.state_dict())
