"""Chat prompts as token ids: the chat template, an answer prefix continued, and the cut of a long history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from comlrl.console import plural
from comlrl.tree.sample import Messages, answer_prefix_of


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
