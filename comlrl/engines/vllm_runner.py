"""One vLLM engine and what it needs from outside: weights to load, token-id prompts, sampling settings.

Shared by the colocated engine (in the trainer's process, `vllm_engine.py`) and the rollout server (its own
process, `rollout_server.py`), so both start vLLM, reload weights and sample the same way. Nothing here
knows about agents or policies: the callers decide whose weights to load and which prompts to send.
"""

from __future__ import annotations

import itertools
import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

log = logging.getLogger(__name__)

Completion = tuple[list[int], list[float] | None]  # token ids, and their log-probs when sampled


class VLLMUnavailable(RuntimeError):
    """vLLM cannot serve these agents here; the caller falls back to the hf engine."""


@dataclass(frozen=True)
class Sampling:
    """How one prompt is sampled: plain values, so a request to the rollout server carries it as JSON."""

    max_tokens: int
    stop: tuple[str, ...]
    stop_token_ids: tuple[int, ...]
    greedy: bool
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0: off
    seed: int = 0

    def to_vllm(self) -> Any:
        from vllm import SamplingParams

        # EOS is the agent's eos_ids, exactly as for the hf engine (ignore_eos: not also the tokenizer's own)
        common = {"max_tokens": self.max_tokens, "stop": list(self.stop) or None, "include_stop_str_in_output": True,
                  "stop_token_ids": list(self.stop_token_ids), "ignore_eos": True, "skip_special_tokens": False}
        if self.greedy:
            return SamplingParams(n=1, temperature=0.0, **common)
        return SamplingParams(n=self.n, temperature=self.temperature, top_p=self.top_p, top_k=self.top_k or -1,
                              seed=self.seed, logprobs=0, **common)


def _repack_tied_output_layer(model: Any) -> None:
    """A tied output layer is not among the weights a reload names (the checkpoint has no lm_head), so the
    kernel it was packed into at start-up (CPU build) keeps the old embedding: pack it again."""
    head = getattr(model, "lm_head", None)
    if head is not None and getattr(getattr(model, "config", None), "tie_word_embeddings", False):
        head.quant_method.process_weights_after_loading(head)


def _completions(out: Any) -> list[Completion]:
    """A vLLM request output's completions: token ids, and their log-probs when they were asked for."""
    return [(list(c.token_ids), None if c.logprobs is None else
             [d[t].logprob for t, d in zip(c.token_ids, c.logprobs, strict=True)]) for c in out.outputs]


def platform_is_cuda() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_cuda_alike())


class VLLMRunner:
    """A vLLM `LLM` over one model that takes weight reloads between generate calls.

    `external_launcher`: the process belongs to a launcher's process group (several training processes);
    vLLM joins it as tensor-parallel groups of one, so no generate call waits for another rank.
    `sleeps`: on CUDA, `idle()` offloads weights and frees the KV cache for the update beside it.
    """

    def __init__(self, model_path: str, dtype: str, seed: int, max_model_len: int, settings: Any,
                 external_launcher: bool = False, sleeps: bool = False) -> None:
        # before vllm is imported: it reads these once
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(settings.kv_cache_gib))
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        try:
            from vllm import LLM
        except Exception as exc:  # ImportError, or a broken install (mismatched torch extensions)
            raise VLLMUnavailable(f"vllm does not import: {type(exc).__name__}: {exc}") from exc
        cuda = platform_is_cuda()
        kw: dict[str, Any] = {}
        if cuda:
            kw = {"gpu_memory_utilization": settings.gpu_memory_utilization,
                  "enable_sleep_mode": sleeps and settings.sleep_between_rollouts}
        if external_launcher:
            kw["distributed_executor_backend"] = "external_launcher"
        self._sleeps = bool(kw.get("enable_sleep_mode"))
        self._asleep = False
        t0 = time.perf_counter()
        # the CPU worker replaces torch.set_num_threads process-wide with a no-op; the caller's thread
        # setting was made before and stays, and later callers (tests, benchmarks) keep the real function
        set_num_threads = torch.set_num_threads
        try:
            self.llm = LLM(model=model_path, tokenizer=model_path, dtype=dtype, seed=seed,
                           enable_prefix_caching=True, enforce_eager=settings.enforce_eager,
                           max_model_len=max_model_len, logprobs_mode="processed_logprobs",
                           # chunked prefill + per-request seeds crashes the CPU build (its sampler rewinds
                           # a torch.Generator offset, which CPU generators lack); whole prefills avoid it
                           enable_chunked_prefill=False, use_tqdm_on_load=False, **kw)
        except Exception as exc:  # unsupported architecture / head size / platform
            raise VLLMUnavailable(f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}") from exc
        finally:
            torch.set_num_threads = set_num_threads
        self.start_seconds = time.perf_counter() - t0
        self._request_ids = itertools.count()
        self.loads = 0
        self.load_seconds = 0.0

    def load(self, weights: Iterable[tuple[str, torch.Tensor]], whole_model: bool) -> None:
        """Replace the named weights (HF names) and drop the prefix cache computed under the old ones.

        vLLM's in-place reload re-runs the loaders and the kernel repacking (the CPU build packs linear
        weights for oneDNN, so writing into the parameters would not reach the kernels); layers not named
        keep their weights. `whole_model`: the weights are a whole model's, whose tied output layer
        needs packing again."""
        self.wake()
        t0 = time.perf_counter()
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(weights),
                                                          "is_checkpoint_format": True})
        if whole_model:
            self.llm.apply_model(_repack_tied_output_layer)
        self.llm.reset_prefix_cache()  # cached KV of the previous weights must not serve these
        self.loads += 1
        self.load_seconds += time.perf_counter() - t0

    def generate(self, prompts: list[list[int]], sampling: list[Sampling]) -> list[list[Completion]]:
        """Per prompt, its completions (n of them), in prompt order."""
        self.wake()
        outs = self.llm.generate([{"prompt_token_ids": p} for p in prompts], [s.to_vllm() for s in sampling],
                                 use_tqdm=False)
        return [_completions(out) for out in outs]

    # ---- continuous batching (the rollout server): requests join the running batch between steps -------
    def enqueue(self, prompts: list[list[int]], sampling: list[Sampling]) -> list[str]:
        """Add requests to what the engine runs; their ids, which `step` reports when they finish (ours: the
        engine's outputs carry the id they were given, not the suffixed one `LLM.enqueue` returns)."""
        from vllm.sampling_params import RequestOutputKind

        self.wake()
        ids = []
        for prompt, s in zip(prompts, sampling, strict=True):
            params = s.to_vllm()
            params.output_kind = RequestOutputKind.FINAL_ONLY  # one output per request, when it is finished
            ids.append(f"q{next(self._request_ids)}")
            self.llm.llm_engine.add_request(ids[-1], {"prompt_token_ids": prompt}, params)
        return ids

    def step(self) -> dict[str, list[Completion]]:
        """One engine step over every request it holds; the completions of the requests it finished."""
        return {out.request_id: _completions(out) for out in self.llm.llm_engine.step() if out.finished}

    def busy(self) -> bool:
        """Requests are running: the weights must not change until they finish."""
        return bool(self.llm.llm_engine.has_unfinished_requests())

    def abort(self, request_ids: list[str]) -> None:
        self.llm.llm_engine.abort_request(request_ids)

    def wake(self) -> None:
        if self._asleep:
            self.llm.wake_up()
            self._asleep = False

    def idle(self) -> None:
        """On GPU, give the memory to the update (weights offloaded, KV cache freed) until the next call."""
        if self._sleeps and not self._asleep:
            self.llm.sleep(level=1)
            self._asleep = True
