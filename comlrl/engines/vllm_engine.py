"""vLLM rollout engine, colocated with the trainer: generate, then train, on the same cores or GPU.

One engine holds one set of weights at a time. Before an agent's requests run, that agent's current
weights are pushed into it (LoRA mode: the base weights of every adapted layer plus that agent's LoRA
delta, i.e. the merged layer; full mode: the agent's whole model) and the prefix cache is reset, so a KV
entry computed under one agent's or one step's weights never serves another. Pushes happen only when the
held weights are not the wanted ones (another agent, or `weights_changed` after an optimizer step).
Merged pushes were chosen over vLLM's multi-LoRA batching by measurement (docs/results.md): on the CPU
build a mixed-adapter batch runs at about 60% of the speed of plain weights.

The engine runs in the trainer's process (VLLM_ENABLE_V1_MULTIPROCESSING=0): pushes are tensor copies, and
there is no second process spinning on the cores while the update runs. Under several training processes
every rank runs its own engine (vLLM's external launcher: the ranks' engines share the launcher's process
group but no generate call communicates) and pushes the weights it holds, which data parallelism keeps
identical on every rank.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from typing import Any

import torch
from peft.tuners.lora import LoraLayer

from comlrl.policy import AgentPolicies, LoraAgentsModule, Messages, Sample, agent_name

log = logging.getLogger(__name__)


class VLLMUnavailable(RuntimeError):
    """vLLM cannot serve these agents here; the caller falls back to the hf engine."""


def merged_lora_weights(module: LoraAgentsModule, agent: int) -> list[tuple[str, torch.Tensor]]:
    """(HF parameter name, base weight + agent's LoRA delta) for every adapted layer.

    Names are those of the plain HF model (`model.layers.0.self_attn.q_proj.weight`), which is what an
    inference engine's loader maps onto its own (fused) layers.
    """
    name = agent_name(agent)
    out = []
    with torch.no_grad():
        for path, layer in module.peft.base_model.model.named_modules():
            if not isinstance(layer, LoraLayer) or name not in layer.lora_A:
                continue
            base = layer.get_base_layer().weight
            out.append((f"{path}.weight", (base + layer.get_delta_weight(name).to(base.dtype)).detach()))
    return out


def _repack_tied_output_layer(model: Any) -> None:
    """A tied output layer is not among the weights a reload names (the checkpoint has no lm_head), so the
    kernel it was packed into at start-up (CPU build) keeps the old embedding: pack it again."""
    head = getattr(model, "lm_head", None)
    if head is not None and getattr(getattr(model, "config", None), "tie_word_embeddings", False):
        head.quant_method.process_weights_after_loading(head)


def _platform_is_cuda() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_cuda_alike())


def several_processes() -> bool:
    """The trainer runs as several processes (accelerate / DeepSpeed launched a world of more than one)."""
    return bool(torch.distributed.is_available() and torch.distributed.is_initialized()
                and torch.distributed.get_world_size() > 1)


def agent_order(agents: set[int], held: int | None) -> list[int]:
    """The order in which one generate call serves its agents: the one whose weights the engine holds
    first (no push), then the others by index. A T-turn rollout of N agents then pushes N + (T-1)(N-1)
    times instead of N*T, and an evaluation after a rollout goes on with the agent the rollout left."""
    return sorted(agents, key=lambda a: (a != held, a))


class VLLMEngine:
    """Serves every agent's current policy from one colocated vLLM engine (see module docstring)."""

    name = "vllm"

    def __init__(self, policies: AgentPolicies, settings: Any, seed: int) -> None:
        if len(set(policies.paths)) != 1:
            raise VLLMUnavailable("agents built from different models need one engine each")
        # before vllm is imported: it reads these once
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(settings.kv_cache_gib))
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        try:
            from vllm import LLM
        except Exception as exc:  # ImportError, or a broken install (mismatched torch extensions)
            raise VLLMUnavailable(f"vllm does not import: {type(exc).__name__}: {exc}") from exc
        self.policies = policies
        cfg = policies.cfg
        cuda = _platform_is_cuda()
        kw: dict[str, Any] = {}
        if cuda:
            kw = {"gpu_memory_utilization": settings.gpu_memory_utilization,
                  "enable_sleep_mode": settings.sleep_between_rollouts}
        if several_processes():
            # one engine per training process (DDP / ZeRO-2): vLLM joins the launcher's process group as
            # tensor-parallel groups of one, so each rank's engine serves that rank's trees on its own
            # device and no generate call waits for another rank
            kw["distributed_executor_backend"] = "external_launcher"
        self._sleeps = cuda and settings.sleep_between_rollouts
        self._asleep = False
        t0 = time.perf_counter()
        # the CPU worker replaces torch.set_num_threads process-wide with a no-op; the trainer's thread
        # setting was made before and stays, and later callers (tests, benchmarks) keep the real function
        set_num_threads = torch.set_num_threads
        try:
            self.llm = LLM(model=policies.paths[0], tokenizer=policies.paths[0], dtype=cfg.dtype, seed=seed,
                           enable_prefix_caching=True, enforce_eager=settings.enforce_eager,
                           max_model_len=cfg.max_prompt_tokens + cfg.max_new_tokens,
                           logprobs_mode="processed_logprobs",
                           # chunked prefill + per-request seeds crashes the CPU build (its sampler rewinds
                           # a torch.Generator offset, which CPU generators lack); whole prefills avoid it
                           enable_chunked_prefill=False, use_tqdm_on_load=False, **kw)
        except Exception as exc:  # unsupported architecture / head size / platform
            raise VLLMUnavailable(f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}") from exc
        finally:
            torch.set_num_threads = set_num_threads
        self.start_seconds = time.perf_counter() - t0
        self._held: int | None = None  # the agent whose current weights the engine holds
        self.pushes = 0
        self.push_seconds = 0.0
        log.info("vllm engine ready in %.1f s", self.start_seconds)

    # ---- weights ----------------------------------------------------------------------------------
    # Every switch of agent is a push of all adapted layers and a reset of the prefix cache (the next
    # call prefills its prompts from scratch), so a call starts with the agent the engine already holds.
    def _agent_weights(self, agent: int) -> list[tuple[str, torch.Tensor]]:
        module = self.policies.module
        if isinstance(module, LoraAgentsModule):
            return merged_lora_weights(module, agent)
        return [(n, p.detach()) for n, p in module.models[agent].named_parameters()]

    def _hold(self, agent: int) -> None:
        if self._asleep:
            self.llm.wake_up()
            self._asleep = False
        if self._held == agent:
            return
        t0 = time.perf_counter()
        weights = self._agent_weights(agent)
        # vLLM's in-place reload: re-runs the loaders and the kernel repacking (the CPU build packs linear
        # weights for oneDNN, so writing into the parameters would not reach the kernels); layers not
        # named keep their weights
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(weights),
                                                          "is_checkpoint_format": True})
        if not isinstance(self.policies.module, LoraAgentsModule):
            self.llm.apply_model(_repack_tied_output_layer)
        self.llm.reset_prefix_cache()  # cached KV of the previous weights must not serve these
        self._held = agent
        self.pushes += 1
        self.push_seconds += time.perf_counter() - t0

    def weights_changed(self) -> None:
        self._held = None

    # ---- generation -------------------------------------------------------------------------------
    def _params(self, agent: int, greedy: bool, n: int, stops: tuple[str, ...], seed: int) -> Any:
        from vllm import SamplingParams

        cfg = self.policies.cfg
        # EOS is the agent's eos_ids, exactly as for the hf engine (ignore_eos: not also the tokenizer's own)
        common = {"max_tokens": cfg.max_new_tokens, "stop": list(stops) or None,
                  "include_stop_str_in_output": True, "stop_token_ids": list(self.policies.eos_ids[agent]),
                  "ignore_eos": True, "skip_special_tokens": False}
        if greedy:
            return SamplingParams(n=1, temperature=0.0, **common)
        return SamplingParams(n=n, temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k or -1,
                              seed=seed, logprobs=0, **common)

    def generate(self, requests: list[tuple[int, Messages]], num_samples: int, greedy: bool = False,
                 stop_strings: Sequence[str] | None = None) -> list[list[Sample]]:
        pol = self.policies
        stops = tuple(pol.stop_strings if stop_strings is None else stop_strings)
        prompts = [pol.prompt_ids(agent, msgs) for agent, msgs in requests]
        results: list[list[Sample]] = [[] for _ in requests]
        # one seed per request, drawn in request order from the trainer's torch seed: the samples do not
        # depend on the order in which the agents are served
        seeds = [0 if greedy else int(torch.randint(0, 2**31 - 1, (1,))) for _ in requests]
        for agent in agent_order({a for a, _ in requests}, self._held):
            mine = [r for r, (a, _) in enumerate(requests) if a == agent]
            # greedy: n must be 1, so a request's samples are separate (identical) prompts
            rows = [r for r in mine for _ in range(num_samples if greedy else 1)]
            self._hold(agent)
            params = [self._params(agent, greedy, num_samples, stops, seeds[r]) for r in rows]
            outs = self.llm.generate([{"prompt_token_ids": prompts[r][0]} for r in rows], params, use_tqdm=False)
            for r, out in zip(rows, outs, strict=True):
                for c in out.outputs:
                    lps = None if c.logprobs is None else [d[t].logprob for t, d in zip(c.token_ids, c.logprobs,
                                                                                         strict=True)]
                    results[r].append(pol.make_sample(agent, requests[r][1], prompts[r], list(c.token_ids),
                                                      stops, lps))
        return results

    def idle(self) -> None:
        """The rollout is over: on GPU, give the memory to the update (weights offloaded, KV cache freed)."""
        if self._sleeps and not self._asleep:
            self.llm.sleep(level=1)
            self._asleep = True

    def close(self) -> None:
        if several_processes():
            # vLLM's teardown under the external launcher destroys the launcher's process group, which the
            # trainer still uses (its last barrier, accelerate's own teardown): the engine goes with the process
            return
        self.llm = None
