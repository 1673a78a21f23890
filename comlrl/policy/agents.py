"""The two shapes of N agents behind one interface: LoRA adapters on one shared base, or a full model each.

`AgentsModule` is the one `nn.Module` the trainer hands to `accelerate.prepare`. Its forward takes a batch
that mixes agents and returns log-probs of the given tokens, so a whole micro-batch of all agents costs one
forward and one backward, and one optimizer step updates every agent. Everything else that differs between
the shapes (which model generates whose rows, the reference policy of the KL, one agent's parameters, the
files a save writes) is a method here, so the rest of the policy never asks which shape it holds.

Mixed-adapter batches use peft's per-row `adapter_names` routing in LoRA layers, injected by our own
forward pre-hooks instead of `PeftModel(adapter_names=...)`: peft refuses that in training mode, and its
hooks are gone when gradient checkpointing replays a layer during backward (the replay would use the
active adapter: a CheckpointError at best, silently wrong gradients when a micro-batch holds one agent). The
reference policy (KL) routes every row to `__base__` rather than using `disable_adapter()`, which would
reset `requires_grad` of all adapters but one.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch
from peft.tuners.lora import LoraLayer
from torch import nn
from torch.utils.checkpoint import checkpoint

from comlrl.policy.packed_linear import PackedLinears
from comlrl.policy.packing import PackedBatch, grouped_logprobs, hidden_to_logprobs, packed_hidden
from comlrl.tree.nodes import agent_name


class AgentsModule(nn.Module, ABC):
    """All agents' weights as one module; the members the policy calls, whatever the shape.

    Actor-critic algorithms attach one value head per agent (`attach_value_heads`): a linear map of the
    final hidden state at the prompt's last token (the state the agent acts in), zero-initialised, so every
    value starts at 0. A forward with `values=True` also returns each sample's head output; a critic
    over the whole team sums the heads of the agents' states, which is one linear head over the
    concatenated states (`comlrl.learn.algorithms`)."""

    def __init__(self) -> None:
        super().__init__()
        self._generation_packs: dict[nn.Module, PackedLinears] = {}  # per generation model

    @property
    def value_heads(self) -> nn.ModuleList | None:
        """The agents' value heads, once attached (a submodule: prepared, optimized and saved with the rest)."""
        heads = self._modules.get("critic_heads")
        return heads if isinstance(heads, nn.ModuleList) else None

    @property
    def device(self) -> torch.device:
        """Wherever accelerate put the module."""
        return next(self.parameters()).device

    @abstractmethod
    def forward(self, batch: PackedBatch, temperature: float = 1.0,
                values: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """log p of each sample's completion tokens under its agent, [S, Lc]; with `values`, also each
        sample's value head output at its prompt's last token, [S] (needs `attach_value_heads`)."""

    @abstractmethod
    def hidden_sizes(self) -> list[int]:
        """The width of each agent's final hidden state (what its value head reads)."""

    value_at_action = False  # the heads read the state after the action (a Q critic), not the prompt's end (V)
    # each agent's forward and backward touch only weights of its own (a model each): they may run side by side
    independent_agents = False

    def attach_value_heads(self, at_action: bool = False) -> None:
        """One zero-initialised `Linear(hidden, 1)` per agent, trainable, in float32 on the module's device;
        `at_action`: each reads the hidden state at its sample's last completion token, Q(s, a), instead of
        the prompt's last, V(s)."""
        self.value_at_action = at_action
        heads = []
        for width in self.hidden_sizes():
            head = nn.Linear(width, 1)
            nn.init.zeros_(head.weight)
            nn.init.zeros_(head.bias)
            heads.append(head)
        self.add_module("critic_heads", nn.ModuleList(heads).to(self.device))

    def head_values(self, states: torch.Tensor, agents: torch.Tensor) -> torch.Tensor:
        """[S] value head outputs of final hidden states [S, D] at prompt ends, each through its agent's head."""
        if self.value_heads is None:
            raise RuntimeError("values=True needs attach_value_heads() (an actor-critic algorithm)")
        out = states.new_zeros(states.shape[0], dtype=torch.float32)
        for a in torch.unique(agents).tolist():
            rows = (agents == a).nonzero().squeeze(1)
            head = self.value_heads[a]
            out = out.index_put((rows,), head(states[rows, :head.in_features].float()).squeeze(-1))
        return out

    @abstractmethod
    def reference_logprobs(self, batch: PackedBatch, temperature: float) -> torch.Tensor:
        """log p under the initial policy (the KL's reference), [S, Lc]; call it under no_grad."""

    @abstractmethod
    def generation_model(self, agent: int) -> nn.Module:
        """The HF model whose `generate` samples this agent's rows (and whose generation_config it has)."""

    @abstractmethod
    def generation_groups(self, agents: Sequence[int]) -> list[list[int]]:
        """Indices of requests (`agents[i]`: request i's agent) that share one `generate` call, none empty."""

    @contextlib.contextmanager
    def generating(self, agents: Sequence[int]) -> Iterator[None]:
        """The context a forward of `generation_model` over rows of `agents` (row i: agents[i]) runs in: the
        shape's routing of rows, with the model's big float32 CPU matmuls on packed weights
        (`comlrl.policy.packed_linear`; `release_packs` drops them when the rollout ends)."""
        model = self.generation_model(agents[0])
        packs = self._generation_packs.setdefault(model, PackedLinears(model))
        with self.routing(agents), packs.serving():
            yield

    def release_packs(self) -> None:
        """Drop the packed weight copies generation made (their memory goes to the update)."""
        for packs in self._generation_packs.values():
            packs.release()

    @abstractmethod
    def routing(self, agents: Sequence[int]) -> AbstractContextManager[None]:
        """How the shape sends rows of `agents` (row i: agents[i]) to their agent's weights in a generation."""

    @abstractmethod
    def agent_parameters(self, agent: int) -> list[nn.Parameter]:
        """One agent's trainable parameters (per-agent grad norms, tests)."""

    @abstractmethod
    def save_weights(self, out: Path, names: Sequence[str]) -> None:
        """Agent i's weights to `out/names[i]/`, loadable with plain peft / transformers."""

    @abstractmethod
    def load_weights(self, src: Path, names: Sequence[str]) -> None:
        """Weights written by `save_weights`, in place (parameters keep their identity for the optimizer)."""


class LoraAgentsModule(AgentsModule):
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

    def all_adapters_trainable(self) -> None:
        """peft leaves only the active adapter trainable; every agent learns in every step."""
        for name, p in self.named_parameters():
            p.requires_grad_("lora_" in name)

    @property
    def base(self) -> nn.Module:
        return self.peft.get_base_model()

    def forward(self, batch: PackedBatch, temperature: float = 1.0,
                values: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        return self._logprobs(batch, temperature, reference=False, values=values)

    def reference_logprobs(self, batch: PackedBatch, temperature: float) -> torch.Tensor:
        """The base with no adapter routed."""
        return self._logprobs(batch, temperature, reference=True)

    def hidden_sizes(self) -> list[int]:
        return [int(self.base.config.hidden_size)] * self.num_agents

    def _logprobs(self, batch: PackedBatch, temperature: float, reference: bool,
                  values: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        rows = ["__base__"] * len(batch.row_agents) if reference else [agent_name(a) for a in batch.row_agents.tolist()]
        with self.routed(rows):
            flat = packed_hidden(self.base, batch)
        lp = self._hidden_logprobs(flat, batch, temperature, reference)
        if values:  # the hidden state predicting a completion's first token is its prompt's last
            at = batch.action_index if self.value_at_action else batch.pred_index[:, 0]
            return lp, self.head_values(flat[at], batch.sample_agents)
        return lp

    def _hidden_logprobs(self, flat: torch.Tensor, batch: PackedBatch, temperature: float,
                         reference: bool) -> torch.Tensor:
        hidden = flat[batch.pred_index]
        head = self.base.get_output_embeddings()
        if isinstance(head, LoraLayer):  # per-token chunks lose the row -> adapter map: logits in one piece
            per_sample = (["__base__"] * len(batch.sample_agents) if reference
                          else [agent_name(a) for a in batch.sample_agents.tolist()])
            with self.routed(per_sample):
                logits = head(hidden).float() / temperature
            return logits.log_softmax(-1).gather(-1, batch.targets.unsqueeze(-1)).squeeze(-1)
        return hidden_to_logprobs(head, hidden, batch.targets, temperature)

    def generation_model(self, agent: int) -> nn.Module:
        return self.base

    def generation_groups(self, agents: Sequence[int]) -> list[list[int]]:
        """Every request in one call: rows of all agents share the base, each routed to its adapter."""
        return [list(range(len(agents)))] if agents else []

    def routing(self, agents: Sequence[int]) -> AbstractContextManager[None]:
        return self.routed([agent_name(a) for a in agents])

    def agent_parameters(self, agent: int) -> list[nn.Parameter]:
        tag = f".{agent_name(agent)}."
        return [p for n, p in self.named_parameters() if p.requires_grad and tag in n]

    def save_weights(self, out: Path, names: Sequence[str]) -> None:
        """`out/agent<i>/`: a peft adapter (PeftModel.from_pretrained(base, out/agent0))."""
        self.peft.save_pretrained(str(out), selected_adapters=list(names))

    def load_weights(self, src: Path, names: Sequence[str]) -> None:
        from peft.utils import load_peft_weights, set_peft_model_state_dict

        for name in names:
            weights = load_peft_weights(str(src / name), device=str(self.device))
            result = set_peft_model_state_dict(self.peft, weights, adapter_name=name)
            missing = [k for k in result.missing_keys if f".{name}." in k]
            if missing:
                raise ValueError(f"{src / name} lacks {len(missing)} adapter weights, e.g. {missing[0]}")
        self.all_adapters_trainable()


class FullAgentsModule(AgentsModule):
    """One full model per agent; a mixed batch runs each agent's rows through its own model.

    `load_reference(device)` returns frozen copies of the initial models, one per agent; they are loaded on
    the first reference call (only the KL needs them) and are not submodules (no state_dict, no optimizer).
    """

    independent_agents = True

    def __init__(self, models: Sequence[nn.Module],
                 load_reference: Callable[[torch.device], list[nn.Module]]) -> None:
        super().__init__()
        self.models = nn.ModuleList(models)
        self._load_reference = load_reference
        self._reference: list[nn.Module] | None = None

    def forward(self, batch: PackedBatch, temperature: float = 1.0,
                values: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        if not values:
            return grouped_logprobs(list(self.models), batch, temperature)
        lp, states = grouped_logprobs(list(self.models), batch, temperature, states=True,
                                      at_action=self.value_at_action)
        return lp, self.head_values(states, batch.sample_agents)

    def hidden_sizes(self) -> list[int]:
        return [int(m.config.hidden_size) for m in self.models]

    def reference_logprobs(self, batch: PackedBatch, temperature: float) -> torch.Tensor:
        if self._reference is None:
            self._reference = self._load_reference(self.device)
        return grouped_logprobs(self._reference, batch, temperature)

    def generation_model(self, agent: int) -> nn.Module:
        return self.models[agent]

    def generation_groups(self, agents: Sequence[int]) -> list[list[int]]:
        """One call per agent (its own model), in agent order."""
        groups = ([r for r, a in enumerate(agents) if a == agent] for agent in range(len(self.models)))
        return [g for g in groups if g]

    def routing(self, agents: Sequence[int]) -> AbstractContextManager[None]:
        return contextlib.nullcontext()  # each agent's rows go to its own model

    def agent_parameters(self, agent: int) -> list[nn.Parameter]:
        return [p for p in self.models[agent].parameters() if p.requires_grad]

    def save_weights(self, out: Path, names: Sequence[str]) -> None:
        """`out/agent<i>/`: a full HF model."""
        for name, m in zip(names, self.models, strict=True):
            m.save_pretrained(out / name)

    def load_weights(self, src: Path, names: Sequence[str]) -> None:
        from transformers import AutoModelForCausalLM

        for name, m in zip(names, self.models, strict=True):
            loaded = AutoModelForCausalLM.from_pretrained(str(src / name), dtype=m.dtype)
            m.load_state_dict(loaded.state_dict())
