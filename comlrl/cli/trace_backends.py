"""The trace generator's backends by spec, the local trainable model among them (`local:<model>`): built here,
at the top, because it loads the policy stack the tasks below must not import (comlrl/tasks/tool_agent/backends.py
has the server backends and the spec parser)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from comlrl.llm import ChatResult, Messages
from comlrl.models import AgentsConfig, ModelConfig
from comlrl.tasks.tool_agent.backends import ChatBackend, ServerBackend, first_stop, parse_backend

__all__ = ["LocalBackend", "make_backend"]


class LocalBackend(ChatBackend):
    """The trainable model (`comlrl.policy.AgentPolicies`), one agent; stop strings cut generation."""

    def __init__(self, policies: Any, agent: int = 0, *, greedy: bool = False, logprobs: bool = False,
                 name: str = "local") -> None:
        self.policies, self.agent, self.greedy, self.logprobs, self.name = policies, agent, greedy, logprobs, name

    @classmethod
    def from_model(cls, model: str, *, max_new_tokens: int = 256, temperature: float = 0.7, top_p: float = 1.0,
                   max_prompt_tokens: int = 2048, dtype: str = "float32", greedy: bool = False,
                   logprobs: bool = False) -> LocalBackend:
        """A full (no adapter) model for generation only."""
        from comlrl.policy import AgentPolicies

        cfg = ModelConfig(name=model, dtype=dtype, max_new_tokens=max_new_tokens, temperature=temperature,
                          top_p=top_p, max_prompt_tokens=max_prompt_tokens)
        policies = AgentPolicies(cfg, AgentsConfig(mode="full"), 1)
        policies.module.eval()
        return cls(policies, 0, greedy=greedy, logprobs=logprobs, name=f"local:{model}")

    def complete(self, conversations: Sequence[Messages], *, stop: Sequence[str] = ()) -> list[ChatResult]:
        if not conversations:
            return []
        rows = self.policies.generate([(self.agent, list(m)) for m in conversations], 1, greedy=self.greedy,
                                      stop_strings=tuple(stop))
        self.policies.report_truncations(self.name)  # one line per batch for the prompts it had to cut
        samples = [row[0] for row in rows]
        lps: list[tuple[float, ...] | None] = [None] * len(samples)
        if self.logprobs:
            import torch

            with torch.no_grad():
                values, mask = self.policies.token_logprobs(samples)
            for i in range(len(samples)):
                n = int(mask[i].sum())
                lps[i] = tuple(round(float(v), 6) for v in values[i, :n])
        tok = self.policies.tokenizers[self.agent]
        out = []
        for s, lp in zip(samples, lps, strict=True):
            hit = first_stop(s.text, stop) if s.finished else None
            tokens = tuple(tok.decode([t]) for t in s.completion_ids[: len(lp)]) if lp is not None else None
            out.append(ChatResult(s.text, "stop" if s.finished else "length", hit, tokens, lp,
                                  len(s.prompt_ids), len(s.completion_ids)))
        return out


def make_backend(spec: str, *, max_tokens: int = 512, temperature: float = 0.7, top_p: float = 1.0,
                 logprobs: bool = False, greedy: bool = False, concurrency: int = 4, timeout_s: float = 120.0,
                 max_prompt_tokens: int = 2048, seed: int | None = None) -> ChatBackend:
    """A backend from its spec (see the module docstring)."""
    kind, model, _ = parse_backend(spec)
    if kind == "local":
        return LocalBackend.from_model(model, max_new_tokens=max_tokens, temperature=temperature, top_p=top_p,
                                       max_prompt_tokens=max_prompt_tokens, greedy=greedy, logprobs=logprobs)
    return ServerBackend(spec, max_tokens=max_tokens, temperature=0.0 if greedy else temperature, top_p=top_p,
                         logprobs=logprobs, timeout_s=timeout_s, concurrency=concurrency, seed=seed)
