"""What the policies hand out and the tree holds: a `Sample` per completion, the chat `Messages` it answers, and
the names every part of the policy shares. Pure (no torch, no models): it sits in the tree's layer, so the
tree, the learner and the policies all name the same types (`comlrl.policy` re-exports them)."""

from __future__ import annotations

from dataclasses import dataclass

Messages = list[dict]


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
