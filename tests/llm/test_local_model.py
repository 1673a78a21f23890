"""`comlrl.llm.local_model` with the tiny-random model: the loader and sampler the `local:` client and
`comlrl.tasks.code.measure` share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from comlrl.llm.local_model import load_model, sample


@pytest.fixture(scope="module")
def tiny_path() -> str:
    from comlrl.models import resolve_model_path

    torch.set_num_threads(1)
    return resolve_model_path("tiny-random")


def test_load_gives_float32_and_sample_returns_n_per_prompt(tiny_path: str) -> None:
    tok, model = load_model(tiny_path)  # through comlrl.models' loader, in float32
    assert next(model.parameters()).dtype == torch.float32
    torch.manual_seed(0)
    out = sample(tok, model, ["def f():", "x = 1\n"], n=3, temperature=1.0, max_new_tokens=4)
    assert [len(row) for row in out] == [3, 3] and all(isinstance(t, str) for row in out for t in row)
    assert tok.padding_side == "left" and tok.pad_token is not None


def test_measure_samples_through_the_shared_loader(tiny_path: str, tmp_path: Path) -> None:
    from comlrl.tasks.code.measure import main

    out = tmp_path / "m.json"
    assert main(["--model", tiny_path, "--limit", "2", "--samples", "2", "--max-new-tokens", "8", "--batch", "2",
                 "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["summary"]["problems"] == 2 and result["summary"]["samples"] == 2
    assert [r["samples"] for r in result["problems"]] == [2, 2]
    assert all(0 <= r["passed"] <= 2 for r in result["problems"])
