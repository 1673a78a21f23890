"""The trained side of a run, typed: the agents' weights, the prepared module, the optimizer and its schedule
under one accelerator, and the few operations the update needs of them.

The update (`comlrl.learn.update`) and the algorithms see only this: log-probs (of the trained, the
reference or the value-headed policy), one micro-step's backward under the right gradient-sync rules for
DDP and DeepSpeed, and one optimizer step. `comlrl.run.components.build` makes it once per run.

The accelerator it runs under is made here too (`make_accelerator`): on CPU, accelerate picks no process-group
backend and may believe world=1 while the launcher started two ranks, so distributed without CUDA uses gloo and
a launcher's WORLD_SIZE that accelerate does not see is refused (`WorldSizeError`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

import torch
from accelerate import Accelerator
from accelerate.utils import DistributedType, InitProcessGroupKwargs

from comlrl.tree.nodes import Node, Sample


class AgentsShape(Protocol):
    """What the learner reads of the agents' module (`comlrl.policy.agents.AgentsModule` is one)."""

    value_at_action: bool  # the value head scores (state, action), a Q head, not the state alone
    independent_agents: bool  # each agent's forward and backward touch only its own weights


class TrainedPolicies(Protocol):
    """What the learner needs of the agents' policies (`comlrl.policy.AgentPolicies` is one). learn/ sits below
    the policies, so it names what it calls instead of importing their type."""

    @property
    def module(self) -> AgentsShape: ...

    def trainable_parameters(self) -> list[torch.nn.Parameter]: ...

    def token_logprobs(self, samples: Sequence[Sample], module: torch.nn.Module | None = None,
                       reference: bool = False) -> tuple[torch.Tensor, torch.Tensor]: ...

    def logprobs_and_values(self, samples: Sequence[Sample], module: torch.nn.Module | None = None
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]: ...

    def packed_area(self, samples: Sequence[Sample]) -> int: ...


class WeightsListener(Protocol):
    """What the learner tells the rollout engine (`comlrl.engines.RolloutEngine` is one)."""

    def weights_changed(self) -> None: ...


@dataclass
class Learner:
    """The agents' trainable weights and what steps them."""

    accelerator: Accelerator
    policies: TrainedPolicies
    model: torch.nn.Module  # policies.module as prepared by accelerate (DDP) or DeepSpeed
    optimizer: torch.optim.Optimizer  # under DeepSpeed: its wrapper, stepped by the engine
    scheduler: torch.optim.lr_scheduler.LRScheduler
    engine: WeightsListener  # told when the weights change, so it never samples the old ones
    micro_batch_size: int  # magrpo.loss.micro_batch_size: completions per forward
    max_grad_norm: float  # magrpo.max_grad_norm (DeepSpeed: its gradient_clipping, set at build)

    @property
    def deepspeed(self) -> bool:
        return uses_deepspeed(self.accelerator)

    @property
    def zero3(self) -> bool:
        return uses_zero3(self.accelerator)

    @property
    def agents_side_by_side(self) -> bool:
        """Whether the agents' micro-batches may run side by side, one core each (`comlrl.cores.side_by_side`):
        full models of their own on CPU, one process without DeepSpeed (no gradient sync to line up), and
        cores for them. A forward and backward of a few hundred tokens through a 135M model gains less from
        two threads than two agents gain from one each (benchmarks/compat_speed.py)."""
        return (self.policies.module.independent_agents and not self.deepspeed
                and self.accelerator.num_processes == 1 and self.accelerator.device.type == "cpu"
                and torch.get_num_threads() > 1)

    @property
    def in_lock_step(self) -> bool:
        """Whether every micro-batch's backward must run on every rank (several processes, or DeepSpeed's engine,
        which counts them): a rank short of micro-batches then runs zero-weight ones (`update.idle_step`). One
        process without DeepSpeed needs none: a weight no loss reached gets its zero gradient at the step."""
        return self.deepspeed or self.accelerator.num_processes > 1

    def trainable(self) -> list[torch.nn.Parameter]:
        return list(self.policies.trainable_parameters())

    def logprobs(self, samples: Sequence[Sample], reference: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """Per completion token: log-prob under the trained (or, `reference`, the adapter-free) policy, and
        the mask of real completion tokens."""
        return self.policies.token_logprobs(list(samples), module=self.model, reference=reference)

    def logprobs_and_values(self, samples: Sequence[Sample]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """As `logprobs`, and each sample's value head output at its prompt's end."""
        return self.policies.logprobs_and_values(list(samples), module=self.model)

    @torch.no_grad()
    def action_values(self, nodes: list[Node]) -> dict[str, list[list[float]]]:
        """Every completion's head output ({node id: [agent][k]}), before the update, in micro-batches; every
        rank runs the same number of forwards (ZeRO-3 gathers parameters in each)."""
        return self._head_outputs(nodes, every_completion=True)

    @torch.no_grad()
    def state_values(self, nodes: list[Node]) -> dict[str, list[float]]:
        """Each node's state value per agent, before the update: a V head's output at the state the agent acts
        in (its prompt's end; one sample per (node, agent) carries it), or for a Q head (`value_at_action`)
        the mean of its outputs after each of the agent's sampled actions there."""
        per_action = bool(self.policies.module.value_at_action)
        outs = self._head_outputs(nodes, every_completion=per_action)
        return {nid: [sum(v) / len(v) if v else 0.0 for v in per_agent] for nid, per_agent in outs.items()}

    @torch.no_grad()
    def sequence_logprobs(self, samples: Sequence[Sample], reference: bool = False) -> list[float]:
        """Each sample's completion log-prob (summed over its tokens) under the trained or, `reference`, the
        initial policy, in micro-batches; every rank runs the same number of forwards (ZeRO-3 gathers in each)."""
        rows = list(samples)
        size = self.micro_batch_size
        chunks = [rows[i:i + size] for i in range(0, len(rows), size)]
        out: list[float] = []
        for i in range(max_over_ranks(self.accelerator, max(1, len(chunks)))):
            chunk = chunks[i] if i < len(chunks) else rows[:1]
            if not chunk:
                continue  # this rank has nothing to judge at all
            logps, mask = self.policies.token_logprobs(chunk, reference=reference)
            if i < len(chunks):
                out.extend(float(x) for x in (logps * mask).sum(-1).tolist())
        return out

    def _head_outputs(self, nodes: list[Node], every_completion: bool) -> dict[str, list[list[float]]]:
        rows = [(node.id, a, s) for node in nodes for a in range(len(node.completions))
                for s in (node.completions[a] if every_completion else node.completions[a][:1])]
        out: dict[str, list[list[float]]] = {node.id: [[] for _ in node.completions] for node in nodes}
        size = self.micro_batch_size
        chunks = [rows[i:i + size] for i in range(0, len(rows), size)]
        for i in range(max_over_ranks(self.accelerator, max(1, len(chunks)))):
            chunk = chunks[i] if i < len(chunks) else rows[:1]
            if not chunk:
                continue  # no nodes on any rank's first chunk: nothing to gather for
            _, _, values = self.policies.logprobs_and_values([s for _, _, s in chunk])
            for (node_id, a, _), v in zip(chunk, values.tolist(), strict=True) if i < len(chunks) else ():
                out[node_id][a].append(float(v))
        return out

    @contextmanager
    def accumulating(self, last: bool) -> Iterator[None]:
        """One micro-batch's forward and backward: gradients sync across ranks only on the step's last one
        (DeepSpeed: its accumulation boundary; DDP: `no_sync` before it)."""
        if self.deepspeed:
            self.model.set_gradient_accumulation_boundary(last)  # type: ignore[operator]
        acc = self.accelerator
        sync = last or self.deepspeed or acc.num_processes == 1
        with nullcontext() if sync else acc.no_sync(self.model):
            yield

    def backward(self, loss: torch.Tensor) -> None:
        """Backward of one micro-batch's loss. Across ranks a zero term touches every trainable tensor so all
        ranks reduce the same gradients (ZeRO-3 holds only partitions outside forward and zero-fills unused
        ones itself), as under DeepSpeed; one process without it gives untouched tensors their zero gradient at
        the step instead (`optimizer_step`), without a pass over every weight per micro-batch."""
        if not self.zero3 and self.in_lock_step:
            loss = loss + 0.0 * sum(p.sum() for p in self.trainable())
        if self.deepspeed:  # accelerate's backward would step the engine after every micro-batch
            self.model.backward(loss)  # type: ignore[operator]
        else:
            self.accelerator.backward(loss)

    def optimizer_step(self) -> float:
        """Clip, step and zero the gradients; the gradient norm before clipping (nan when unknown)."""
        if self.deepspeed:  # clips (gradient_clipping), steps and zeroes
            self.model.step()  # type: ignore[operator]
            norm = self.model.get_global_grad_norm()  # type: ignore[operator]
        else:
            params = self.trainable()
            for p in params:  # a weight no loss reached steps on a zero gradient, as on several ranks
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            norm = self.accelerator.clip_grad_norm_(params, self.max_grad_norm)
            self.optimizer.step()
            # freed, not zeroed: the next backward's gradients become the buffers (no accumulating pass over a zeroed
            # copy), and until then generation's packed weights reuse their memory (on the CPU the allocator keeps it:
            # `comlrl.cores.keep_freed_memory`): a CoMLRL-style script's peak memory 5.7-6.0 -> 5.3-5.5 GB
            self.optimizer.zero_grad(set_to_none=True)
        return float(norm) if norm is not None else float("nan")

    def end_step(self) -> float:
        """After a step's last optimizer step: advance the schedule, tell the engine; the step's learning rate."""
        self.scheduler.step()
        self.engine.weights_changed()
        return float(self.scheduler.get_last_lr()[0])

    def weights_spread(self) -> float:
        """Max minus min over ranks of a checksum of the trainable weights: 0 when data parallel is in sync."""
        acc, params = self.accelerator, self.trainable()
        if acc.num_processes == 1:
            return 0.0
        with torch.no_grad():
            checksum = sum(p.detach().double().sum() for p in params) if params else torch.zeros(())
            checksum = checksum.reshape(1).to(acc.device)
        every = acc.gather(checksum)
        return float(every.max() - every.min())


class WorldSizeError(RuntimeError):
    """The launcher and accelerate disagree about how many processes train."""


def launcher_world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def make_accelerator(log_with: list[Any] | None = None) -> Accelerator:
    """The run's Accelerator; `log_with` takes accelerate trackers (see run_outputs.make_trackers)."""
    world = launcher_world_size()
    handlers = []
    if world > 1 and not torch.cuda.is_available():
        handlers.append(InitProcessGroupKwargs(backend="gloo", timeout=timedelta(minutes=30)))
    accelerator = Accelerator(kwargs_handlers=handlers, log_with=log_with or None)
    real = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
    if accelerator.distributed_type == DistributedType.NO:
        real = 1  # a process group may exist, but accelerate will neither wrap the model nor synchronise
    if accelerator.num_processes != world or real != world:
        raise WorldSizeError(
            f"launcher started WORLD_SIZE={world} processes but accelerate sees {accelerator.num_processes} "
            f"and {real} of them train together; "
            "on CPU launch with `ACCELERATE_USE_CPU=true accelerate launch --multi_gpu --num_processes N` "
            "or the DeepSpeed config in configs/accelerate/"
        )
    return accelerator


def uses_deepspeed(accelerator: Accelerator) -> bool:
    return accelerator.state.deepspeed_plugin is not None


def uses_zero3(accelerator: Accelerator) -> bool:
    """DeepSpeed ZeRO-3: parameters partitioned over the ranks, gathered in every forward."""
    return uses_deepspeed(accelerator) and accelerator.state.deepspeed_plugin.zero_stage == 3


def sum_over_ranks(accelerator: Accelerator, values: list[float]) -> list[float]:
    """Each position summed over ranks (every rank passes as many values, in the same order)."""
    if accelerator.num_processes == 1:
        return list(values)
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=accelerator.device)
    return [float(v) for v in accelerator.reduce(t, reduction="sum").tolist()]


def max_over_ranks(accelerator: Accelerator, value: int) -> int:
    if accelerator.num_processes == 1:
        return value
    t = torch.tensor([value], dtype=torch.int64, device=accelerator.device)
    return int(accelerator.reduce(t, reduction="max").item())
