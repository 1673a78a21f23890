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
import time
from collections.abc import Callable, Sequence

import torch
from peft.tuners.lora import LoraLayer

from comlrl.engines.vllm_runner import Completion, Sampling, VLLMRunner, VLLMUnavailable
from comlrl.policy import AgentPolicies, LoraAgentsModule, Messages, Sample, agent_name, sample_counts

log = logging.getLogger(__name__)

__all__ = ["PushedWeights", "VLLMEngine", "VLLMUnavailable", "agent_order", "agent_weights", "generate_by_agent",
           "merged_lora_weights", "several_processes"]


def merged_lora_weights(module: LoraAgentsModule, agent: int) -> list[tuple[str, torch.Tensor]]:
    """(HF parameter name, base weight + agent's LoRA delta) for every adapted layer.

    Names are those of the plain HF model (`model.layers.0.self_attn.q_proj.weight`), which is what an
    inference engine's loader maps onto its own (fused) layers.
    """
    name = agent_name(agent)
    with torch.no_grad():
        return [(f"{path}.weight", _merged(layer, name)) for path, layer in module.peft.base_model.model.named_modules()
                if isinstance(layer, LoraLayer) and name in layer.lora_A]


def _merged(layer: LoraLayer, name: str) -> torch.Tensor:
    """A LoRA layer's base weight plus adapter `name`'s delta (under no_grad)."""
    base = layer.get_base_layer().weight
    return (base + layer.get_delta_weight(name).to(base.dtype)).detach()


def agent_weights(policies: AgentPolicies, agent: int) -> list[tuple[str, torch.Tensor]]:
    """What an engine must load to serve `agent`'s current policy: the merged adapted layers (LoRA agents)
    or the agent's whole model (full agents)."""
    module = policies.module
    if isinstance(module, LoraAgentsModule):
        return merged_lora_weights(module, agent)
    return [(n, p.detach()) for n, p in module.models[agent].named_parameters()]


def partitioned(policies: AgentPolicies) -> bool:
    """The agents' parameters are partitioned over the ranks (DeepSpeed ZeRO-3): a push must gather them."""
    return any(hasattr(p, "ds_id") for p in policies.module.parameters())


def gathered_weights(policies: AgentPolicies) -> dict[int, list[tuple[str, torch.Tensor]]]:
    """Every agent's push (as `agent_weights`) under ZeRO-3, gathered one layer at a time and kept on the
    CPU: a gather is a collective, so every rank calls this at the same point (after an optimizer step),
    never from a generate call (the ranks generate different trees, at their own pace)."""
    import deepspeed

    module, out = policies.module, {a: [] for a in range(policies.num_agents)}
    with torch.no_grad():
        if isinstance(module, LoraAgentsModule):
            for path, layer in module.peft.base_model.model.named_modules():
                if not isinstance(layer, LoraLayer):
                    continue
                names = [agent_name(a) for a in out if agent_name(a) in layer.lora_A]
                params = [layer.get_base_layer().weight, *(w for n in names for w in
                                                             (layer.lora_A[n].weight, layer.lora_B[n].weight))]
                with deepspeed.zero.GatheredParameters(params):
                    for a in out:
                        if agent_name(a) in names:
                            out[a].append((f"{path}.weight", _merged(layer, agent_name(a)).to("cpu", copy=True)))
        else:
            for a, model in enumerate(module.models):
                for name, param in model.named_parameters():
                    with deepspeed.zero.GatheredParameters([param]):
                        out[a].append((name, param.detach().to("cpu", copy=True)))
    return out


class PushedWeights:
    """Where an engine takes an agent's weights from: the live modules, or under ZeRO-3 the snapshot that
    `refresh` gathers on every rank after each optimizer step (and once after the model is prepared)."""

    def __init__(self, policies: AgentPolicies) -> None:
        self.policies = policies
        # full agents push whole models, whose tied output layer the engine must pack again
        self.whole_model = not isinstance(policies.module, LoraAgentsModule)
        self.snapshot: dict[int, list[tuple[str, torch.Tensor]]] | None = None
        self.gathers = 0
        self.gather_seconds = 0.0

    def refresh(self) -> None:
        if partitioned(self.policies):
            t0 = time.perf_counter()
            self.snapshot = gathered_weights(self.policies)
            self.gathers += 1
            self.gather_seconds += time.perf_counter() - t0

    def of(self, agent: int) -> list[tuple[str, torch.Tensor]]:
        return self.snapshot[agent] if self.snapshot is not None else agent_weights(self.policies, agent)


def several_processes() -> bool:
    """The trainer runs as several processes (accelerate / DeepSpeed launched a world of more than one)."""
    return bool(torch.distributed.is_available() and torch.distributed.is_initialized()
                and torch.distributed.get_world_size() > 1)


def agent_order(agents: set[int], held: int | None) -> list[int]:
    """The order in which one generate call serves its agents: the one whose weights the engine holds
    first (no push), then the others by index. A T-turn rollout of N agents then pushes N + (T-1)(N-1)
    times instead of N*T, and an evaluation after a rollout goes on with the agent the rollout left."""
    return sorted(agents, key=lambda a: (a != held, a))


def generate_by_agent(policies: AgentPolicies, requests: list[tuple[int, Messages]], num_samples: int | Sequence[int],
                      greedy: bool, stop_strings: Sequence[str] | None, held: int | None,
                      run: Callable[[int, list[list[int]], list[Sampling]], list[list[Completion]]]
                      ) -> list[list[Sample]]:
    """`AgentPolicies.generate`'s contract on an engine that serves one agent's weights at a time: the
    requests are grouped by agent (the held one first) and each group goes to `run(agent, prompts,
    sampling)` in one call. One seed per request, drawn in request order from the trainer's torch seed,
    so the samples do not depend on the order in which the agents are served."""
    pol, cfg = policies, policies.cfg
    counts = sample_counts(num_samples, len(requests))
    stops = tuple(pol.stop_strings if stop_strings is None else stop_strings)
    prompts = [pol.prompt_ids(agent, msgs) for agent, msgs in requests]
    results: list[list[Sample]] = [[] for _ in requests]
    seeds = [0 if greedy else int(torch.randint(0, 2**31 - 1, (1,))) for _ in requests]
    for agent in agent_order({a for a, _ in requests}, held):
        mine = [r for r, (a, _) in enumerate(requests) if a == agent]
        # greedy: n must be 1, so a request's samples are separate (identical) prompts
        rows = [r for r in mine for _ in range(counts[r] if greedy else 1)]
        sampling = [Sampling(max_tokens=cfg.max_new_tokens, stop=stops,
                             stop_token_ids=tuple(pol.eos_ids[agent]), greedy=greedy, n=counts[r],
                             temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k or 0, seed=seeds[r])
                    for r in rows]
        outs = run(agent, [list(prompts[r][0]) for r in rows], sampling)
        for r, completions in zip(rows, outs, strict=True):
            for ids, lps in completions:
                results[r].append(pol.make_sample(agent, requests[r][1], prompts[r], ids, stops, lps))
    return results


class VLLMEngine:
    """Serves every agent's current policy from one colocated vLLM engine (see module docstring)."""

    name = "vllm"

    def __init__(self, policies: AgentPolicies, settings: object, seed: int) -> None:
        if len(set(policies.paths)) != 1:
            raise VLLMUnavailable("agents built from different models need one engine each")
        self.policies = policies
        cfg = policies.cfg
        self.runner = VLLMRunner(policies.paths[0], cfg.dtype, seed, cfg.max_prompt_tokens + cfg.max_new_tokens,
                                 settings, external_launcher=several_processes(), sleeps=True)
        self.start_seconds = self.runner.start_seconds
        self._held: int | None = None  # the agent whose current weights the engine holds
        self.weights = PushedWeights(policies)
        log.info("vllm engine ready in %.1f s", self.start_seconds)

    @property
    def pushes(self) -> int:
        return self.runner.loads

    @property
    def push_seconds(self) -> float:
        return self.runner.load_seconds

    # Every switch of agent is a push of all adapted layers and a reset of the prefix cache (the next
    # call prefills its prompts from scratch), so a call starts with the agent the engine already holds.
    def _run(self, agent: int, prompts: list[list[int]], sampling: list[Sampling]) -> list[list[Completion]]:
        if self._held != agent:
            t0 = time.perf_counter()
            self.runner.load(self.weights.of(agent), whole_model=self.weights.whole_model)
            self._held = agent
            log.debug("pushed agent %d in %.2f s", agent, time.perf_counter() - t0)
        return self.runner.generate(prompts, sampling)

    def weights_changed(self) -> None:
        self._held = None
        self.weights.refresh()  # ZeRO-3: every rank gathers here, together

    def generate(self, requests: list[tuple[int, Messages]], num_samples: int | Sequence[int], greedy: bool = False,
                 stop_strings: Sequence[str] | None = None) -> list[list[Sample]]:
        return generate_by_agent(self.policies, requests, num_samples, greedy, stop_strings, self._held, self._run)

    def idle(self) -> None:
        """The rollout is over: on GPU, give the memory to the update (weights offloaded, KV cache freed)."""
        self.runner.idle()

    def close(self) -> None:
        if several_processes():
            # vLLM's teardown under the external launcher destroys the launcher's process group, which the
            # trainer still uses (its last barrier, accelerate's own teardown): the engine goes with the process
            return
        self.runner = None  # type: ignore[assignment]
