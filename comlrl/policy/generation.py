"""Sampling completions with HF `generate`: batched rows, a shared prefill per prompt (and of the prompts' starts
that earlier calls prefilled), cuts at EOS / stops.

The prompts it samples from are made here too: the chat template, an answer prefix continued, and the cut of a
long history (`fit_prompt`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from comlrl.console import plural
from comlrl.models import ModelConfig
from comlrl.policy.agents import AgentsModule
from comlrl.tree.nodes import Messages, answer_prefix_of


def positions(attention_mask: torch.Tensor) -> torch.Tensor:
    """Positions that skip left padding, as `generate` computes them, so log-probs match sampling."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def sample_counts(num_samples: int | Sequence[int], requests: int) -> list[int]:
    """Completions per request: `num_samples` for every request, or one count per request (nodes of different
    G drawn in one call)."""
    if isinstance(num_samples, int):
        return [num_samples] * requests
    counts = list(num_samples)
    if len(counts) != requests:
        raise ValueError(f"{len(counts)} sample counts for {requests} requests")
    return counts


def cut_at_eos(ids: Sequence[int], eos: Sequence[int]) -> tuple[list[int], bool]:
    """The completion up to and including its first EOS id, and whether there was one."""
    ends = set(eos)
    for i, t in enumerate(ids):
        if t in ends:
            return list(ids[:i + 1]), True
    return list(ids), False


def cut_at_stop(tokenizer: Any, ids: Sequence[int], eos: Sequence[int],
                stops: Sequence[str]) -> tuple[list[int], bool]:
    """Cut after EOS or after the first token whose text completes a stop string, whichever comes first."""
    ends = set(eos)
    longest, text = max(len(s) for s in stops), ""
    for i, t in enumerate(ids):
        if t in ends:
            return list(ids[:i + 1]), True
        start = max(0, len(text) - longest)
        text += tokenizer.decode([t])
        if any(s in text[start:] for s in stops):
            return list(ids[:i + 1]), True
    return list(ids), False


def stop_criterion(cache: dict[tuple[str, tuple[str, ...]], Any], path: str, tokenizer: Any,
                   stops: tuple[str, ...]) -> Any:
    """HF's StopStringCriteria, built once per tokenizer `path` and stops in `cache` (building scans the
    vocab: ~2 s)."""
    from transformers import StoppingCriteriaList
    from transformers.generation.stopping_criteria import StopStringCriteria

    key = (path, stops)
    if key not in cache:
        cache[key] = StopStringCriteria(tokenizer, list(stops))
    return StoppingCriteriaList([cache[key]])


def warped_candidates(scores: torch.Tensor, temperature: float, top_k: int | None,
                      top_p: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The tokens sampling can draw and their probabilities, per row: HF's temperature, top-k and top-p warpers
    (in `generate`'s order) computed on the top-k candidates only, largest first, instead of the whole vocabulary
    (HF sorts all of it for top-p: ~10 of a decode step's ~90 ms at 4 rows of SmolLM2's 49k tokens, on one CPU
    core). A candidate stays while the mass ranked above it is below `top_p` (the first always does), which is
    HF's "cumulative probability from the bottom <= 1 - top_p is removed"; a cut token gets probability 0."""
    logits = scores.float() / temperature if temperature != 1.0 else scores.float()
    k = min(top_k, logits.shape[-1]) if top_k else logits.shape[-1]
    top, tokens = torch.topk(logits, k, dim=-1)  # sorted, largest first
    probs = torch.softmax(top, dim=-1)
    if top_p < 1.0:
        above = probs.cumsum(dim=-1) - probs
        probs = torch.softmax(top.masked_fill(above >= top_p, float("-inf")), dim=-1)
    return probs, tokens


class SeededSampler:
    """A logits processor that samples the next token itself: from `warped_candidates` (HF's warpers' distribution),
    by a draw from its own `torch.Generator`, handed back as a one-hot score that greedy decoding keeps. HF samples
    from torch's one global generator, so two `generate` calls in two threads (full-weight agents decoded side by
    side, `AgentPolicies.generate`) would draw in whatever order the threads ran; with a generator per call the
    samples depend on the seed alone."""

    def __init__(self, cfg: ModelConfig, seed: int, device: torch.device) -> None:
        self.temperature, self.top_k, self.top_p = cfg.temperature, cfg.top_k, cfg.top_p
        self.generator = torch.Generator(device=device).manual_seed(seed)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        probs, tokens = warped_candidates(scores, self.temperature, self.top_k, self.top_p)
        drawn = tokens.gather(1, torch.multinomial(probs, num_samples=1, generator=self.generator))
        return torch.full_like(scores, float("-inf")).scatter_(1, drawn, 0.0)


PROMPT_CACHE_BYTES = 256 * 2**20  # keys and values kept for reuse: ~75 prompts of 77 tokens of SmolLM2-135M


@dataclass(frozen=True)
class _Prefilled:
    """One prompt's keys and values (all its tokens but the last, which `generate` runs), per layer [1, H, n, D]."""

    tokens: np.ndarray
    layers: list[tuple[torch.Tensor, torch.Tensor]]
    nbytes: int


def _plain(cache: Any) -> bool:
    """Whether every layer of a transformers cache holds whole keys and values (no sliding window or state)."""
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer for layer in cache.layers)


class PromptCache:
    """The keys and values of the prompts generation prefilled while the weights stayed, per agent, so that a
    prompt starting like one of them prefills only the rest: a later turn's prompt repeats the system message,
    the problem and the history before it (SmolLM2-135M, a 77-token turn-2 prompt whose first 49 tokens turn 1
    prefilled: 0.45 s -> 0.22 s a node on one core). Causal attention makes a token's keys and values depend on
    the tokens before it only, so the reused ones are those a full prefill computes, up to float rounding.
    Bounded by `budget` bytes (oldest dropped first); `clear()` when the weights change or the rollout ends
    (`comlrl.engines.HFEngine`). Models whose cache holds anything but plain full-attention layers (sliding
    windows, recurrent states) prefill every prompt whole."""

    def __init__(self, budget: int = PROMPT_CACHE_BYTES) -> None:
        self.budget = budget
        self._kept: OrderedDict[tuple[int, bytes], _Prefilled] = OrderedDict()  # (agent, tokens), oldest first
        self._bytes = 0
        self._lock = threading.Lock()  # full-weight agents generate in threads of their own

    def clear(self) -> None:
        with self._lock:
            self._kept, self._bytes = OrderedDict(), 0

    def held(self) -> int:
        """How many prompts are kept now."""
        return len(self._kept)

    def _longest(self, agent: int, tokens: np.ndarray) -> tuple[int, _Prefilled | None]:
        best, found = 0, None
        with self._lock:
            entries = [entry for (owner, _), entry in self._kept.items() if owner == agent]
        for entry in entries:
            n = min(len(tokens), len(entry.tokens))
            differ = np.flatnonzero(tokens[:n] != entry.tokens[:n])
            common = int(differ[0]) if len(differ) else n
            if common > best:
                best, found = common, entry
        return best, found

    def start(self, agents: Sequence[int], prompts: Sequence[Sequence[int]], width: int,
              model_config: Any) -> tuple[int, Any] | None:
        """For prompts left-padded to `width`: the first column the prefill must compute for every row, and a
        cache holding the columns before it (zeros where a row has padding), or None when no row gains."""
        from transformers import DynamicCache

        found = [self._longest(a, np.asarray(p[:-1])) for a, p in zip(agents, prompts, strict=True)]
        start = min(width - len(p) + n for p, (n, _) in zip(prompts, found, strict=True))
        if all(start <= width - len(p) for p in prompts):
            return None
        cache = DynamicCache(config=model_config)
        if not _plain(cache):
            return None
        some = next(entry for _, entry in found if entry is not None)
        for li, (k0, v0) in enumerate(some.layers):
            keys = k0.new_zeros((len(prompts), k0.shape[1], start, k0.shape[3]))
            values = v0.new_zeros((len(prompts), v0.shape[1], start, v0.shape[3]))
            for row, (p, (_, entry)) in enumerate(zip(prompts, found, strict=True)):
                take = start - (width - len(p))  # this row's tokens left of `start`: all held by its entry
                if take > 0 and entry is not None:
                    keys[row, :, start - take:] = entry.layers[li][0][0, :, :take]
                    values[row, :, start - take:] = entry.layers[li][1][0, :, :take]
            cache.update(keys, values, li)
        return start, cache

    def keep(self, agents: Sequence[int], prompts: Sequence[Sequence[int]], width: int, cache: Any) -> None:
        """Hold each row's prefilled keys and values (columns width - len(prompt) .. width - 2 of `cache`)."""
        if not _plain(cache):  # a sliding window or a recurrent state: nothing `start` could reuse
            return
        for row, (agent, p) in enumerate(zip(agents, prompts, strict=True)):
            tokens = np.asarray(p[:-1])
            key = (agent, tokens.tobytes())
            left = width - len(p)
            layers = [(layer.keys[row:row + 1, :, left:].clone(), layer.values[row:row + 1, :, left:].clone())
                      for layer in cache.layers]
            nbytes = sum(k.nbytes + v.nbytes for k, v in layers)
            with self._lock:
                old = self._kept.pop(key, None)
                self._bytes += nbytes - (old.nbytes if old is not None else 0)
                self._kept[key] = _Prefilled(tokens, layers, nbytes)
                while self._bytes > self.budget:
                    _, dropped = self._kept.popitem(last=False)
                    self._bytes -= dropped.nbytes


@torch.no_grad()  # grad mode is per thread: a call in a lane of `side_by_side` does not inherit its caller's
def generate_rows(module: AgentsModule, cfg: ModelConfig, tokenizer: Any, eos: Sequence[int], agents: list[int],
                  prompts: list[list[int]], greedy: bool, stopping: Any = None, repeat: int = 1,
                  seed: int | None = None, prompt_cache: PromptCache | None = None) -> list[list[int]]:
    """`repeat` completions of each prompt (agents[i]'s prompts[i]), as consecutive output rows.

    One `generate` call of `module.generation_model(agents[0])` (the caller groups the agents by
    `module.generation_groups`), stopping at any of `eos` or at `stopping` (HF stopping criteria). With
    repeat > 1 every prompt is prefilled once and its KV cache copied to its `repeat` rows (all but the last
    prompt token; `generate` runs that one per row and samples), instead of prefilling the same prompt
    `repeat` times: G siblings of a node share one prefill. `prompt_cache`: the start of a prompt that an earlier
    call prefilled is not prefilled again, and this call's prompts are kept there for later ones. `seed`: sampled
    by a `SeededSampler` of that seed instead of torch's global generator (for calls that run in threads).
    """
    from transformers import DynamicCache, GenerationConfig, LogitsProcessorList

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, p in enumerate(prompts):  # left padding: every row's last prompt token sits at width - 1
        ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
        mask[i, width - len(p):] = 1
    dev = module.device
    sampler = SeededSampler(cfg, seed, dev) if seed is not None and not greedy else None
    hf_samples = not greedy and sampler is None
    gen_cfg = GenerationConfig(
        max_new_tokens=cfg.max_new_tokens, do_sample=hf_samples, use_cache=True,
        temperature=cfg.temperature if hf_samples else None, top_p=cfg.top_p if hf_samples else None,
        top_k=cfg.top_k if hf_samples else None, eos_token_id=list(eos), pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
    )
    extra: dict[str, Any] = {"stopping_criteria": stopping} if stopping is not None else {}
    if sampler is not None:
        extra["logits_processor"] = LogitsProcessorList([sampler])
    model = module.generation_model(agents[0])
    short = width < 2 or min(len(p) for p in prompts) < 2
    reuse = None if short or prompt_cache is None else prompt_cache.start(agents, prompts, width, model.config)
    if (repeat > 1 or reuse is not None) and not short:  # prefill of width - 1 tokens, shared by the G siblings
        start, cache = reuse or (0, DynamicCache(config=model.config))
        pre_mask = mask[:, :-1].to(dev)
        if start < width - 1:
            with module.generating(agents):
                model.get_decoder()(input_ids=ids[:, start:-1].to(dev), attention_mask=pre_mask,
                                    position_ids=positions(pre_mask)[:, start:], past_key_values=cache,
                                    use_cache=True)
        if prompt_cache is not None:
            prompt_cache.keep(agents, prompts, width, cache)
        cache.batch_repeat_interleave(repeat)
        extra["past_key_values"] = cache
    ids, mask = ids.repeat_interleave(repeat, 0), mask.repeat_interleave(repeat, 0)
    with module.generating([a for a in agents for _ in range(repeat)]):
        out = model.generate(input_ids=ids.to(dev), attention_mask=mask.to(dev), generation_config=gen_cfg,
                             **extra)
    return out[:, width:].tolist()


def encode_chat(tokenizer: Any, messages: Messages) -> list[int]:
    """A chat ending in an assistant message is an answer prefix: the model continues that message."""
    partial = answer_prefix_of(messages) is not None
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=not partial,
                                         continue_final_message=partial)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


@dataclass(frozen=True)
class FittedPrompt:
    """A chat's prompt ids within the limit, and what the cut took (`full_tokens` before it): whole middle
    messages, then, if that was not enough, tokens from the middle of what was left."""

    ids: list[int]
    truncated: bool
    full_tokens: int
    dropped_messages: int = 0
    cut_tokens: int = 0


def fit_prompt(tokenizer: Any, messages: Messages, limit: int, head_messages: int | None = None) -> FittedPrompt:
    """Chat-templated prompt ids; too long -> drop the oldest history between the head and the end.

    The head (`head_messages` leading messages; by default the system message and the first user
    message: the problem) and the latest messages are kept; only candidates whose roles still alternate
    at the cut are used. If that is not enough, tokens are cut from the middle.
    """
    ids = encode_chat(tokenizer, messages)
    if len(ids) <= limit:
        return FittedPrompt(ids, False, len(ids))
    full = len(ids)
    head = head_messages or (2 if messages and messages[0].get("role") == "system" else 1)
    dropped = 0
    for k in range(1, len(messages) - head):
        cand = messages[:head] + messages[head + k:]
        if cand[head - 1].get("role") == cand[head].get("role"):
            continue
        ids, dropped = encode_chat(tokenizer, cand), k
        if len(ids) <= limit:
            break
    cut = max(0, len(ids) - limit)
    if cut:
        keep_head = limit // 2
        ids = ids[:keep_head] + ids[len(ids) - (limit - keep_head):]
    return FittedPrompt(ids, True, full, dropped, cut)


def describe_cuts(cuts: list[FittedPrompt], prompts: int, limit: int, so_far: int) -> str:
    """One line for a batch of cut prompts (a training step's, an evaluation's): how many of how many, the
    longest, and how they were cut; `so_far` counts the run's cuts."""
    how = []
    dropped = sorted(c.dropped_messages for c in cuts if c.dropped_messages)
    if dropped:
        lo, hi = dropped[0], dropped[-1]
        span = plural(lo, "middle message") if lo == hi else f"{lo}-{hi} middle messages"
        how.append(f"{len(dropped)} by dropping {span}")
    inside = sum(1 for c in cuts if c.cut_tokens)
    if inside:
        how.append(f"{inside} by cutting tokens inside a message")
    return (f"cut {len(cuts)} of {plural(prompts, 'prompt')} to model.max_prompt_tokens={limit} (longest "
            f"{max(c.full_tokens for c in cuts)} tokens): {', '.join(how)}; {so_far} cut so far")
